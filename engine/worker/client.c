/* client: the client operations of workflow_ops.h (create, signal, cancel)
 * for a client inside a running engine (the HTTP API, schedules, benchmarks,
 * engine test): their writes join the engine's current batch and the
 * workflow runs at once. */
#include "worker.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "json.h"
#include "modules.h"
#include "render.h"

int engine_submit(engine *e, const char *id, const char *script_path, const char *input_json, int *existed,
                  char *err, size_t errlen) {
  return engine_submit_traced(e, id, script_path, input_json, NULL, existed, err, errlen);
}

static void dispatch_if_committed(void *ud, int ok) {
  if (ok) tasks_arm(ud, util_now_ms());
}

/* queued: the start's first task is due at once and whichever worker is
 * free takes it up (this one's dispatch after the commit, or another's);
 * else it runs here from what was written */
static int start_or_find(engine *e, const char *id, const char *script_path, const char *input_json,
                         const trace_start *trace, int queued, wf_row *existing, char *err, size_t errlen) {
  int found = 0;
  const scriptbuf *pre = run_script(e, script_path, err, errlen);
  if (!pre) return -1;
  made_wf made = {0};
  if (ops_write_workflow(e->st, id, script_path, input_json, queued, pre, trace, &found, existing,
                         queued ? NULL : &made, err, errlen) != 0)
    return -1;
  if (found) return 0;
  engine_unsettle(e, id, 1, 1); /* its first step begins once the start is committed */
  if (queued) {
    engine_when_committed(e, dispatch_if_committed, e);
    return 1;
  }
  run_load(e, &made.w, &made.h); /* from what was just written: no read back */
  wf_row_free(&made.w);
  hist_list_free(&made.h);
  return 1;
}

int engine_start_or_find(engine *e, const char *id, const char *script_path, const char *input_json,
                         const trace_start *trace, wf_row *existing, char *err, size_t errlen) {
  return start_or_find(e, id, script_path, input_json, trace, 0, existing, err, errlen);
}

/* engine_submit_traced, queued or run here */
static int submit(engine *e, const char *id, const char *script_path, const char *input_json,
                  const trace_start *trace, int queued, int *existed, char *err, size_t errlen) {
  int rc = start_or_find(e, id, script_path, input_json, trace, queued, NULL, err, errlen);
  if (rc < 0) return -1;
  if (existed) *existed = rc == 0;
  if (rc == 0 && !existed) {
    util_seterr(err, errlen, "workflow '%s' already exists", id);
    return -1;
  }
  return 0;
}

int engine_submit_traced(engine *e, const char *id, const char *script_path, const char *input_json,
                         const trace_start *trace, int *existed, char *err, size_t errlen) {
  return submit(e, id, script_path, input_json, trace, 0, existed, err, errlen);
}

int engine_submit_queued(engine *e, const char *id, const char *script_path, const char *input_json,
                         const trace_start *trace, int *existed, char *err, size_t errlen) {
  return submit(e, id, script_path, input_json, trace, e->shared, existed, err, errlen);
}

/* No wake-up task on a store of its own: the run takes the signal in this
 * same batch (a waiting run is not in memory, and loading it takes what is
 * buffered). On a shared store the run may be another worker's (its lease):
 * a wake-up task tells whoever holds it, else the signal waits unseen. */
int engine_signal_local(engine *e, const char *id, const char *name, const char *payload, const char *identity,
                        char *err, size_t errlen) {
  return engine_signal_traced(e, id, name, payload, identity, NULL, err, errlen);
}

int engine_signal_traced(engine *e, const char *id, const char *name, const char *payload, const char *identity,
                         const trace_start *trace, char *err, size_t errlen) {
  if (engine_check_signal_name(name, err, errlen) != 0) return -1;
  char *canon = json_accept(payload, strlen(payload), "the signal payload", err, errlen);
  if (!canon) return -1;
  if (ops_check_live(e->st, id, "signal", NULL, err, errlen) != 0) {
    free(canon);
    return -1;
  }
  int64_t now = util_now_ms();
  int rc = store_signal_put(e->st, id, name, canon, now) != STORE_OK ||
           (store_shared(e->st) && store_task_put(e->st, id, "workflow", 0, now, 0, 0, NULL, 0) != STORE_OK) ||
           ops_record_who(e->st, id, "signal.sent", name, identity, trace) != 0;
  free(canon);
  if (rc) {
    util_seterr(err, errlen, "%s", store_errmsg(e->st));
    return -1;
  }
  wfrun *r = strmap_get(&e->runs, id);
  if (r) run_evict(r); /* in memory while an activity of it runs: loaded again, it takes the signal */
  run_load_id(e, id);
  return 0;
}

int engine_fork(engine *e, const fork_req *req, fork_made *made, int *why, char *err, size_t errlen) {
  if (ops_write_fork(e->st, req, made, why, err, errlen) != 0) return -1;
  engine_unsettle(e, made->id, made->run, 1); /* its steps begin once the fork is committed */
  run_load_id(e, made->id);                  /* replays the copied prefix, then runs live */
  return 0;
}

int engine_cancel_local(engine *e, const char *id, const char *identity, char *err, size_t errlen) {
  if (ops_write_cancel(e->st, id, identity, err, errlen) != 0) return -1;
  dispatch_due(e);
  return 0;
}

