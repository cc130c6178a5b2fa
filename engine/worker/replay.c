/* replay: `engine replay ID [--script NEW.lua] [--apply]`. Replays a run's
 * history against its pinned code or a new script in a throwaway VM with no
 * side effects, and says whether it replays cleanly, to the same end, or
 * where it diverges; with apply, a clean replay moves the run to that code. */
#include "engine.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "home.h"
#include "modules.h"
#include "util.h"
#include "wfvm.h"

static int is_terminal_event(const char *t) {
  return strcmp(t, "WorkflowCompleted") == 0 || strcmp(t, "WorkflowFailed") == 0 ||
         strcmp(t, "WorkflowCancelled") == 0 || strcmp(t, "ContinuedAsNew") == 0;
}

int engine_replay_check(store *st, const char *id, const char *script_path, int apply, char *report,
                        size_t reportlen) {
  wf_row w;
  int found = store_wf_get(st, id, &w);
  if (found != 1) {
    if (found == 0) engine_unknown_id(id, report, reportlen);
    else util_seterr(report, reportlen, "cannot read workflow '%s'", id);
    return -1;
  }
  int rc = -1;
  char *src = NULL, *tmp = NULL;
  char *terminal = NULL, *terminal_payload = NULL; /* the run's end, compared with the script's */
  size_t len = 0;
  char absdir[PATH_MAX], hash[65];
  hist_list h = {0};
  if (script_path) {
    src = engine_read_script(script_path, &len, report, reportlen); /* a FIFO would hang the read */
    if (!src) goto done;
    tmp = util_strdup(script_path);
    if (!realpath(dirname(tmp), absdir)) snprintf(absdir, sizeof absdir, ".");
    util_sha256_hex(src, len, hash);
  } else {
    src = store_code_get(st, w.code_hash, &len);
    snprintf(absdir, sizeof absdir, "%s", w.script_dir);
    snprintf(hash, sizeof hash, "%s", w.code_hash);
    if (!src) {
      util_seterr(report, reportlen, "the pinned code of '%s' is missing from the store", id);
      goto done;
    }
  }
  if (store_hist_load(st, id, w.run, &h) != STORE_OK) {
    util_seterr(report, reportlen, "%s", store_errmsg(st));
    goto done;
  }
  while (h.n && is_terminal_event(h.v[h.n - 1].type)) {
    free(terminal);
    free(terminal_payload);
    terminal = util_strdup(h.v[h.n - 1].type);
    terminal_payload = util_strdup(h.v[h.n - 1].payload ? h.v[h.n - 1].payload : "null");
    h.n--;
    free((char *)h.v[h.n].type);
    free((char *)h.v[h.n].name);
    free((char *)h.v[h.n].hash);
    free((char *)h.v[h.n].payload);
    free((char *)h.v[h.n].chain);
  }
  size_t total = h.n;
  wfvm_config cfg;
  wfvm_config_default(&cfg);
  cfg.check_only = 1;
  modhost m = {st, id, w.run, absdir, engine_lua_dir(), script_path == NULL};
  wfvm_host host = {&m, wfvm_check_append, wfvm_check_emit, modules_load, NULL};
  wfvm *vm = wfvm_new(&cfg, &host, id, w.run, &h);
  if (vm) wfvm_set_parent(vm, w.parent);
  char *chunk = util_fmt("@%s", script_path ? script_path : w.script_name);
  wfvm_state s = vm ? wfvm_start(vm, src, len, chunk) : WFVM_FAILED;
  free(chunk);
  const char *label = script_path ? script_path : "its pinned code";
  switch (s) {
    case WFVM_END:
    case WFVM_BLOCKED:
      util_seterr(report, reportlen, "ok: %s replays all %zu events of %s (run %lld)", label, total, id,
                  (long long)w.run);
      rc = 0;
      break;
    case WFVM_DONE: /* the script returned: the same result as the run's, if it has one */
      if (terminal && strcmp(terminal, "WorkflowCompleted") != 0) {
        util_seterr(report, reportlen, "diverges: the script returns after all %zu events, but the run ended with %s",
                    total, terminal);
        rc = 1;
      } else if (terminal && strcmp(wfvm_output(vm), terminal_payload) != 0) {
        util_seterr(report, reportlen, "diverges: the script returns %.300s but the run returned %.300s",
                    wfvm_output(vm), terminal_payload);
        rc = 1;
      } else {
        util_seterr(report, reportlen, "ok: %s replays all %zu events of %s (run %lld)%s", label, total, id,
                    (long long)w.run, terminal ? " and returns the same result" : "");
        rc = 0;
      }
      break;
    case WFVM_FAILED:
      if (terminal && (strcmp(terminal, "WorkflowFailed") == 0 || strcmp(terminal, "WorkflowCancelled") == 0) &&
          wfvm_cursor(vm) >= total) {
        util_seterr(report, reportlen, "ok: %s replays all %zu events of %s and %s as the run did", label, total, id,
                    strcmp(terminal, "WorkflowFailed") == 0 ? "fails" : "ends cancelled");
        rc = 0;
      } else {
        util_seterr(report, reportlen, "diverges: the script raises after %zu of %zu events: %s", wfvm_cursor(vm),
                    total, vm ? wfvm_output(vm) : "cannot create a VM");
        rc = 1;
      }
      break;
    default:
      util_seterr(report, reportlen, "diverges: %s", vm ? wfvm_output(vm) : "cannot create a VM");
      rc = 1;
  }
  wfvm_free(vm);
  if (rc == 0 && apply) {
    int bad = store_begin(st) != STORE_OK;
    if (!bad && script_path)
      bad = store_code_put(st, hash, script_path, src, len) != STORE_OK ||
            store_wf_set_code(st, id, hash, script_path, absdir) != STORE_OK ||
            store_modules_clear(st, id, w.run) != STORE_OK;
    if (!bad && strcmp(w.status, "stuck") == 0)
      bad = store_wf_set_status(st, id, "running", NULL, NULL) != STORE_OK ||
            store_task_put(st, id, "workflow", 0, util_now_ms(), 0, 0, NULL, 0) != STORE_OK;
    if (bad || store_commit(st) != STORE_OK) {
      util_seterr(report, reportlen, "cannot apply: %s", store_errmsg(st));
      store_rollback(st);
      rc = -1;
    } else {
      size_t n = strlen(report);
      util_seterr(report + n, reportlen - n, "; applied%s", strcmp(w.status, "stuck") == 0 ? ", resuming" : "");
    }
  }
done:
  hist_list_free(&h);
  free(terminal);
  free(terminal_payload);
  free(src);
  free(tmp);
  wf_row_free(&w);
  return rc;
}

