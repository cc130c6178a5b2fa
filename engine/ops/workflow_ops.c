/* workflow_ops: what a client does to a workflow with only the database:
 * create it, signal it, request its cancellation, each one transaction
 * committed on return; and the checks each of them makes first (a script
 * that starts, an input that is an object, a session message). The CLI uses
 * them on a local database; the worker (client.c) writes the same rows into
 * its own batch through the ops_* parts. */
#include "workflow_ops.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "home.h"
#include "json.h"
#include "modules.h"
#include "names.h"
#include "script_file.h"
#include "util.h"
#include "wfvm.h"

void engine_unknown_id(const char *id, char *err, size_t errlen) {
  if (engine_check_id(id, err, errlen) == 0) util_seterr(err, errlen, "unknown workflow '%s'", id);
}

int engine_check_script(const char *path, const char *src, size_t len, char *err, size_t errlen) {
  char chunk[PATH_MAX + 2], absdir[PATH_MAX], why[768];
  snprintf(chunk, sizeof chunk, "@%s", path);
  if (wfvm_check_syntax(src, len, chunk, err, errlen) != 0) return -1;
  /* before anything is written: a script that cannot start leaves no failed row */
  char *tmp = util_strdup(path);
  if (!realpath(dirname(tmp), absdir)) snprintf(absdir, sizeof absdir, ".");
  free(tmp);
  modhost m = {NULL, NULL, 0, absdir, engine_lua_dir(), 0};
  wfvm_host host = {&m, NULL, NULL, modules_load, NULL};
  if (wfvm_check_main(&host, src, len, chunk, why, sizeof why) == 0) return 0;
  util_seterr(err, errlen, "workflow script %s %s", path, why);
  return -1;
}

char *engine_session_input(const char *kind, const char *text, const char *sender, char *err, size_t errlen) {
  text = text ? text : "";
  size_t n = strlen(text);
  char why[128];
  if (strcmp(kind, "message") && strcmp(kind, "interrupt") && strcmp(kind, "close")) {
    util_seterr(err, errlen, "unknown kind '%.40s' (message, interrupt or close)", kind);
    return NULL;
  }
  if (strcmp(kind, "message") == 0 && n == 0) {
    util_seterr(err, errlen, "the message is empty");
    return NULL;
  }
  size_t max = strcmp(kind, "message") == 0 ? ENGINE_MESSAGE_MAX : 4096;
  if (n > max) {
    util_seterr(err, errlen, "the %s is %zu bytes, more than %zu", strcmp(kind, "message") == 0 ? "message" : "reason", n,
                max);
    return NULL;
  }
  if (util_text_problem(text, n, 1, why, sizeof why) != 0) {
    util_seterr(err, errlen, "invalid %s: %s", strcmp(kind, "message") == 0 ? "message" : "reason", why);
    return NULL;
  }
  char *qk = json_quote(kind), *qs = json_quote(sender ? sender : ""), *qt = json_quote(text);
  char *out = util_fmt("{\"kind\":%s,\"sender\":%s,\"text\":%s}", qk, qs, qt);
  free(qk);
  free(qs);
  free(qt);
  return out;
}

char *engine_input_with_identity(const char *input_json, const char *identity, int required, char *err,
                                 size_t errlen) {
  return engine_input_with_starter(input_json, identity, "[]", required, err, errlen);
}

char *engine_input_with_starter(const char *input_json, const char *identity, const char *starter_grants,
                                int required, char *err, size_t errlen) {
  lua_State *L = luaL_newstate();
  if (!L) {
    util_seterr(err, errlen, "out of memory");
    return NULL;
  }
  char *out = NULL;
  const char *first = input_json + strspn(input_json, " \t\r\n");
  if (json_decode_safe(L, input_json, strlen(input_json), err, errlen) == 0) {
    int obj = *first == '{'; /* decoded, an empty array and an empty object look alike */
    if (obj) {
      lua_pushstring(L, identity);
      lua_setfield(L, -2, "identity");
      /* what the starter holds: the engine's to say, never the input's */
      if (json_decode_safe(L, starter_grants, strlen(starter_grants), err, errlen) != 0) {
        lua_close(L);
        return NULL;
      }
      lua_setfield(L, -2, "starterGrants");
    }
    if (obj || !required) {
      size_t len;
      const char *text = json_encode(L, -1, &len);
      out = util_xmalloc(len + 1);
      memcpy(out, text, len + 1);
    } else {
      util_seterr(err, errlen, "the workflow input must be a JSON object (the engine records who started it in "
                  "its \"identity\" field)");
    }
  }
  lua_close(L);
  return out;
}

static int commit_or_fail(store *st, char *err, size_t errlen) {
  if (store_commit(st) != STORE_OK) {
    util_seterr(err, errlen, "%s", store_errmsg(st));
    return -1;
  }
  return 0;
}

/* ops_write_workflow, and a child's row naming its parent (NULL for none).
 * One start (store_wf_start): written, or the existing row into *existing
 * (when given) and *existed set, in one statement on PostgreSQL. */
static int write_workflow(store *st, const char *id, const char *script_path, const char *input_json, int queue,
                          const scriptbuf *pre, const char *parent, const char *parent_close, const trace_start *trace,
                          int *existed, wf_row *existing, made_wf *made, store_start **send, char *err,
                          size_t errlen) {
  *existed = 0;
  size_t len = 0;
  char *src;
  char hash[65];
  if (engine_check_id(id, err, errlen) != 0) {
    /* an id made before the check (an older engine's) is still its workflow's */
    wf_row was;
    int found = store_wf_get(st, id, &was);
    if (found != 1) return -1;
    *existed = 1;
    if (existing) *existing = was;
    else wf_row_free(&was);
    return 0;
  }
  if (pre) { /* read, hashed and checked before, unchanged since */
    src = util_xmalloc(pre->len + 1);
    memcpy(src, pre->src, pre->len + 1);
    len = pre->len;
    memcpy(hash, pre->hash, sizeof hash);
  } else {
    src = engine_read_script(script_path, &len, err, errlen);
    if (!src) return -1;
    if (engine_check_script(script_path, src, len, err, errlen) != 0) {
      free(src);
      return -1;
    }
    util_sha256_hex(src, len, hash);
  }
  /* the log holds the input in canonical form: one line, stable bytes; a bad
   * one is refused before the transaction begins */
  char *canon = json_accept(input_json, strlen(input_json), "the workflow input", err, errlen);
  if (!canon) {
    free(src);
    return -1;
  }
  char absdir[PATH_MAX];
  char *tmp = util_strdup(script_path);
  if (!realpath(dirname(tmp), absdir)) snprintf(absdir, sizeof absdir, ".");
  free(tmp);
  int64_t now = util_now_ms();
  wf_row row = {(char *)id, 1, (char *)"running", (char *)script_path, absdir, hash, canon,
                NULL, NULL, 0, now, now, (char *)parent, (char *)parent_close, NULL};
  char seed[17];
  snprintf(seed, sizeof seed, "%016llx", (unsigned long long)util_random64());
  /* the caller's trace, in the log: a replay or another worker finds it there */
  char *traced = trace_start_members(trace);
  char *payload = util_fmt("{\"input\":%s,\"seed\":\"%s\"%s}", canon, seed, traced);
  free(traced);
  hist_event ev = {1, "WorkflowStarted", 0, NULL, NULL, payload, now, NULL};
  wf_row was;
  /* the code first (kept by its hash, whoever's start it is), then the row,
   * its first event and task, or the row that exists. On a store of its own
   * an id that exists is answered before anything is written: a refused
   * start changes nothing (on a shared one the start's one insert finds it) */
  int found = store_shared(st) ? 0 : store_wf_get(st, id, &was);
  int started = found != 0 ? (found == 1 ? 0 : STORE_ERR)
                : store_code_put(st, hash, script_path, src, len) != STORE_OK ? STORE_ERR
                : send ? (store_wf_start_send(st, &row, &ev, send) == STORE_OK ? 1 : STORE_ERR)
                       : store_wf_start(st, &row, &ev, queue, &was);
  int bad = started < 0;
  if (started == 0) {
    *existed = 1;
    if (existing) *existing = was;
    else wf_row_free(&was);
  }
  if (made && started == 1) {
    made->w = (wf_row){util_strdup(id), 1, util_strdup("running"), util_strdup(script_path), util_strdup(absdir),
                       util_strdup(hash), util_strdup(canon), NULL, NULL, 0, now, now,
                       parent ? util_strdup(parent) : NULL, parent_close ? util_strdup(parent_close) : NULL, NULL};
    made->h.v = util_xcalloc(1, sizeof *made->h.v);
    made->h.n = made->h.cap = 1;
    made->h.v[0] = (hist_event){1, util_strdup(ev.type), 0, NULL, NULL, payload, now, NULL};
    payload = NULL;
  }
  free(payload);
  free(canon);
  free(src);
  if (bad) {
    util_seterr(err, errlen, "%s", store_errmsg(st));
    return -1;
  }
  return 0;
}

int ops_write_workflow(store *st, const char *id, const char *script_path, const char *input_json, int queue,
                       const scriptbuf *pre, const trace_start *trace, int *existed, wf_row *existing, made_wf *made,
                       char *err, size_t errlen) {
  return write_workflow(st, id, script_path, input_json, queue, pre, NULL, NULL, trace, existed, existing, made, NULL,
                        err, errlen);
}

int ops_send_workflow(store *st, const char *id, const char *script_path, const char *input_json,
                      const scriptbuf *pre, const trace_start *trace, int *existed, wf_row *existing, made_wf *made,
                      store_start **sent, char *err, size_t errlen) {
  *sent = NULL;
  return write_workflow(st, id, script_path, input_json, 1, pre, NULL, NULL, trace, existed, existing, made, sent, err,
                        errlen);
}

int ops_write_child(store *st, const char *id, const char *script_path, const scriptbuf *pre, const char *input_json,
                    const char *parent, const char *parent_close, const trace_start *trace, int *existed,
                    wf_row *existing, char *err, size_t errlen) {
  return write_workflow(st, id, script_path, input_json, 1, pre, parent, parent_close, trace, existed, existing, NULL,
                        NULL, err, errlen);
}

int engine_create_workflow(store *st, const char *id, const char *script_path, const char *input_json,
                           const trace_start *trace, int *existed, char *err, size_t errlen) {
  if (ops_write_workflow(st, id, script_path, input_json, 1, NULL, trace, existed, NULL, NULL, err, errlen) != 0) {
    store_rollback(st);
    return -1;
  }
  if (*existed) {
    store_rollback(st);
    return 0;
  }
  return commit_or_fail(st, err, errlen);
}

/* Checks, inside the open transaction, that workflow id exists and has not
 * finished; *cancel gets its cancel state. Nothing is written. */
int ops_check_live(store *st, const char *id, const char *what, int *cancel, char *err, size_t errlen) {
  wf_row w;
  int found = store_wf_get(st, id, &w);
  if (found != 1) {
    if (found == 0) engine_unknown_id(id, err, errlen);
    else util_seterr(err, errlen, "%s", store_errmsg(st));
    return -1;
  }
  int rc = 0;
  if (engine_status_terminal(w.status)) {
    util_seterr(err, errlen, "workflow '%s' is %s; %s not delivered", id, w.status, what);
    rc = -1;
  }
  if (cancel) *cancel = w.cancel;
  wf_row_free(&w);
  return rc;
}

/* Who asked, as a domain event of the session (see workflow_ops.h). */
int ops_record_who(store *st, const char *id, const char *type, const char *name, const char *identity,
                   const trace_start *trace) {
  if (!identity && !(trace && trace->traceparent[0])) return 0;
  ubuf b = {0};
  ubuf_add(&b, "{", 1);
  if (identity) {
    char *qb = json_quote(identity);
    ubuf_add(&b, "\"by\":", 5);
    ubuf_add(&b, qb, strlen(qb));
    free(qb);
  }
  if (name) {
    char *qn = json_quote(name);
    if (b.n > 1) ubuf_add(&b, ",", 1);
    ubuf_add(&b, "\"name\":", 7);
    ubuf_add(&b, qn, strlen(qn));
    free(qn);
  }
  char *traced = trace_start_members(trace); /* ,"traceparent":...: after a member, or in place of one */
  if (*traced) ubuf_add(&b, b.n > 1 ? traced : traced + 1, strlen(traced) - (b.n > 1 ? 0 : 1));
  free(traced);
  ubuf_add(&b, "}", 2); /* with the NUL */
  int rc = store_domain_append(st, id, type, util_now_ms(), b.p) < 0 ? -1 : 0;
  ubuf_free(&b);
  return rc;
}

/* The writes of a signal (buffered, and a wake-up task) into the open
 * transaction, for every client. */
static int write_signal(store *st, const char *id, const char *name, const char *payload, const char *identity,
                        char *err, size_t errlen) {
  if (engine_check_signal_name(name, err, errlen) != 0) return -1;
  char *canon = json_accept(payload, strlen(payload), "the signal payload", err, errlen);
  if (!canon) return -1;
  if (store_begin(st) != STORE_OK || ops_check_live(st, id, "signal", NULL, err, errlen) != 0) {
    if (store_batch_failed(st)) util_seterr(err, errlen, "%s", store_errmsg(st));
    free(canon);
    return -1;
  }
  int64_t now = util_now_ms();
  int rc = store_signal_put(st, id, name, canon, now) != STORE_OK ||
           store_task_put(st, id, "workflow", 0, now, 0, 0, NULL, 0) != STORE_OK ||
           ops_record_who(st, id, "signal.sent", name, identity, NULL) != 0;
  free(canon);
  if (rc) util_seterr(err, errlen, "%s", store_errmsg(st));
  return rc ? -1 : 0;
}

int ops_write_cancel(store *st, const char *id, const char *identity, char *err, size_t errlen) {
  int cancel = 0;
  if (store_begin(st) != STORE_OK || ops_check_live(st, id, "cancellation", &cancel, err, errlen) != 0) {
    if (store_batch_failed(st)) util_seterr(err, errlen, "%s", store_errmsg(st));
    return -1;
  }
  if (cancel == 0 && (store_wf_set_cancel(st, id, 1) != STORE_OK ||
                      store_task_put(st, id, "workflow", 0, util_now_ms(), 0, 0, NULL, 0) != STORE_OK ||
                      ops_record_who(st, id, "cancel.requested", NULL, identity, NULL) != 0)) {
    util_seterr(err, errlen, "%s", store_errmsg(st));
    return -1;
  }
  return 0;
}

int engine_send_signal(store *st, const char *id, const char *name, const char *payload, const char *identity,
                       char *err, size_t errlen) {
  if (write_signal(st, id, name, payload, identity, err, errlen) != 0) {
    store_rollback(st);
    return -1;
  }
  return commit_or_fail(st, err, errlen);
}

int engine_request_cancel(store *st, const char *id, const char *identity, char *err, size_t errlen) {
  if (ops_write_cancel(st, id, identity, err, errlen) != 0) {
    store_rollback(st);
    return -1;
  }
  return commit_or_fail(st, err, errlen);
}
