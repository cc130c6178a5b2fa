/* client_local: client_ops.h on the local database, through the ops layer
 * (workflow_ops, approval, session_view) as identity local:USER; a start
 * that finds no worker takes the worker lock and runs the workflow in this
 * process (foreground.c). Every read that fails is an error, never a shorter
 * answer. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "audit.h"
#include "memory.h"
#include "client_ops.h"
#include "dbfile.h"
#include "foreground.h"
#include "script_file.h"
#include "util.h"
#include "workflow_ops.h"

typedef struct local_client {
  client base;
  const char *db;
  store *st;   /* opened at the first operation that reads or writes */
  int lockfd;  /* the worker lock this process holds (a start that runs here), or -1 */
  char *input; /* what run_here starts the workflow with */
  trace_start trace; /* and the caller's trace it records */
} local_client;

static int say(client_err *err, int refused, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(client_err *err, int refused, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  err->refused = refused;
  return -1;
}

/* The existing database, opened once. */
static store *db(local_client *lc, client_err *err) {
  char msg[1400];
  if (!lc->st && cli_db_open(lc->db, &lc->st, msg, sizeof msg) != 0) {
    say(err, 0, "%s", msg);
    return NULL;
  }
  return lc->st;
}

static int read_failed(local_client *lc, const char *what, const char *id, client_err *err) {
  return say(err, 1, "cannot read %s of %s: %s", what, id, store_errmsg(lc->st));
}

/* The row of workflow id (wf_row_free it), or -1 with err. */
static int find_workflow(local_client *lc, const char *id, wf_row *w, client_err *err) {
  int found = store_wf_get(lc->st, id, w);
  if (found == 1) return 0;
  if (found < 0) return read_failed(lc, "the workflow row", id, err);
  engine_unknown_id(id, err->msg, sizeof err->msg);
  err->refused = 1;
  return -1;
}

/* ---------------------------------------------------------------- start --- */

/* Whether the database at db, if there is one, holds workflow id: start
 * carries on a workflow whose id an older engine accepted. */
static int workflow_exists(const char *path, const char *id) {
  store *st;
  char err[256];
  wf_row w;
  if (engine_db_missing(path) || store_open(path, 1, &st, err, sizeof err) != STORE_OK) return 0;
  int found = store_wf_get(st, id, &w) == 1;
  if (found) wf_row_free(&w);
  store_close(st);
  return found;
}

static int local_start(client *cl, const client_start_req *req, client_started *out, client_err *err) {
  local_client *lc = (local_client *)cl;
  char who[300], msg[1024], shown[1024], holder[256] = "";
  memset(out, 0, sizeof *out);
  /* who started it goes into an object input's "identity" (what the API
   * does with the token's identity) */
  cli_local_identity(who, sizeof who);
  /* the local user, who holds the database, holds every grant (docs/grants.md) */
  char *input = engine_input_with_starter(req->input, who, "\"*\"", 0, msg, sizeof msg);
  if (!input) return say(err, 0, "--input: %s", msg);
  /* the script is checked before the database is touched (or created) */
  size_t len;
  char *src = engine_read_script(req->script, &len, msg, sizeof msg);
  int bad = !src || engine_check_script(req->script, src, len, msg, sizeof msg) != 0;
  free(src);
  if (bad) {
    free(input);
    return say(err, 0, "%s", msg);
  }
  if (cli_unwritable(lc->db, msg, sizeof msg)) {
    free(input);
    return say(err, 0, "start: cannot write %s: %s", engine_db_shown(lc->db, shown, sizeof shown), msg);
  }
  if (!req->id) {
    char made[ENGINE_ID_MAX + 1];
    engine_generate_id(req->script, made, sizeof made);
    out->id = util_strdup(made);
  } else if (engine_check_id(req->id, msg, sizeof msg) != 0 && !workflow_exists(lc->db, req->id)) {
    free(input); /* refused before the database is touched (or created) */
    return say(err, 0, "%s", msg);
  } else {
    out->id = util_strdup(req->id);
  }
  int lockfd = req->detach ? -1 : engine_lock(lc->db, "start", holder, sizeof holder);
  if (req->trace) lc->trace = *req->trace;
  if (lockfd >= 0) { /* no worker: this process is to be it, and creates the workflow in its engine */
    lc->lockfd = lockfd;
    free(lc->input);
    lc->input = input;
    out->here = 1;
    return 0;
  }
  /* another process is the worker: record the start for it */
  store *st;
  if (store_open(lc->db, 0, &st, msg, sizeof msg) != STORE_OK) {
    free(input);
    free(out->id); /* a failed start leaves the caller nothing to free */
    out->id = NULL;
    return say(err, 0, "%s", msg);
  }
  int rc = engine_create_workflow(st, out->id, req->script, input, &lc->trace, &out->existed, msg, sizeof msg);
  store_close(st);
  free(input);
  if (rc) {
    free(out->id);
    out->id = NULL;
    return say(err, 1, "%s", msg);
  }
  snprintf(out->runner, sizeof out->runner, "%s", holder);
  return 0;
}

static int local_fork(client *cl, const client_fork_req *req, client_started *out, fork_made *made,
                      client_err *err) {
  local_client *lc = (local_client *)cl;
  char who[300], msg[2048], shown[1024], holder[256] = "";
  memset(out, 0, sizeof *out);
  if (!db(lc, err)) return -1;
  if (cli_unwritable(lc->db, msg, sizeof msg))
    return say(err, 0, "fork: cannot write %s: %s", engine_db_shown(lc->db, shown, sizeof shown), msg);
  cli_local_identity(who, sizeof who);
  fork_req q = *req->fork;
  q.identity = who;
  /* with no worker, this process is to be it: its lock first, as a start's */
  int lockfd = req->detach ? -1 : engine_lock(lc->db, "fork", holder, sizeof holder);
  int why = 0;
  if (engine_fork_workflow(lc->st, &q, made, &why, msg, sizeof msg) != 0) {
    if (why == FORK_EXISTS && made->same) {
      out->existed = 1; /* a retry: the fork it made is followed */
    } else {
      if (lockfd >= 0) engine_unlock(lockfd);
      if (why == FORK_FAILED) return say(err, 0, "%s", msg);
      /* the field as the command's flag: input_patch is --input-patch */
      char flag[40] = "";
      if (made->field[0]) {
        snprintf(flag, sizeof flag, "--%s: ", made->field);
        for (char *p = flag; *p; p++)
          if (*p == '_') *p = '-';
      }
      return say(err, 1, "%s%s", flag, msg);
    }
  }
  out->id = util_strdup(made->id);
  if (lockfd >= 0) {
    lc->lockfd = lockfd;
    free(lc->input);
    lc->input = util_strdup("{}"); /* it exists: its own input is in the log */
    out->here = 1;
    return 0;
  }
  snprintf(out->runner, sizeof out->runner, "%s", holder);
  return 0;
}

static int local_run_here(client *cl, const client_run *run, int *code, client_err *err) {
  local_client *lc = (local_client *)cl;
  if (lc->lockfd < 0) return say(err, 0, "cannot run %s here: another process is the worker of %s", run->id, lc->db);
  if (lc->st) { /* the worker has a connection of its own */
    store_close(lc->st);
    lc->st = NULL;
  }
  char msg[1024];
  if (foreground_run(lc->db, run, lc->input ? lc->input : "{}", &lc->trace, code, msg, sizeof msg) != 0)
    return say(err, 0, "%s", msg);
  return 0;
}

/* --------------------------------------------------------------- follow --- */

typedef struct watch {
  local_client *lc;
  const char *id;
  const client_sink *sink;
  int64_t last;
  int failed; /* a read failed: the follow stops and says so */
  int lockfd; /* a start's follow: the worker lock, once the worker went away */
} watch;

static int deliver(void *ud, const domain_event *e) {
  watch *w = ud;
  w->sink->event(w->sink->ud, e);
  w->last = e->seq;
  return 0;
}

/* The events after the last one given: STORE_OK or the read error. */
static int flush(watch *w) {
  return w->sink->event ? store_domain_list(w->lc->st, w->id, w->last, deliver, w) : STORE_OK;
}

/* events --follow: until the workflow ends. */
static void events_changed(void *ud) {
  watch *w = ud;
  wf_row r;
  int found = flush(w) == STORE_OK ? store_wf_get(w->lc->st, w->id, &r) : -1;
  if (found == 1) {
    if (engine_status_terminal(r.status)) {
      if (flush(w) != STORE_OK) w->failed = 1;
      uv_stop(uv_default_loop());
    }
    wf_row_free(&r);
  } else if (found < 0) {
    w->failed = 1;
    uv_stop(uv_default_loop());
  }
}

/* A start that another process runs: until the workflow ends or is stuck.
 * The end's events are flushed again once the status says it ended: they
 * may have been committed with it after the first flush read. */
static void start_changed(void *ud) {
  watch *w = ud;
  flush(w);
  wf_row r;
  if (store_wf_get(w->lc->st, w->id, &r) == 1) {
    if (engine_status_terminal(r.status) || strcmp(r.status, "stuck") == 0) {
      flush(w);
      uv_stop(uv_default_loop());
    }
    wf_row_free(&r);
  }
}

/* ... or until the worker goes away: this process takes its lock. */
static void try_lock(uv_timer_t *t) {
  watch *w = t->data;
  char holder[256];
  w->lockfd = engine_lock(w->lc->db, "start", holder, sizeof holder);
  if (w->lockfd >= 0) uv_stop(t->loop);
}

static int follow_events(watch *w, client_err *err) {
  wf_row r;
  if (find_workflow(w->lc, w->id, &r, err) != 0) return -1;
  int done = engine_status_terminal(r.status);
  wf_row_free(&r);
  if (flush(w) != STORE_OK) return read_failed(w->lc, "the events", w->id, err);
  if (done) return 0;
  uv_loop_t *loop = uv_default_loop();
  dbwatch *dw = dbwatch_start(loop, w->lc->st, events_changed, w);
  events_changed(w);
  uv_run(loop, UV_RUN_DEFAULT);
  dbwatch_stop(dw);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);
  return w->failed ? read_failed(w->lc, "the events", w->id, err) : 0;
}

static int follow_start(watch *w, int *took_over, client_err *err) {
  uv_loop_t *loop = uv_default_loop();
  dbwatch *dw = dbwatch_start(loop, w->lc->st, start_changed, w);
  uv_timer_t lt;
  int uv = uv_timer_init(loop, &lt);
  if (uv != 0) {
    dbwatch_stop(dw);
    uv_run(loop, UV_RUN_DEFAULT);
    return say(err, 0, "cannot start the event loop: %s", uv_strerror(uv));
  }
  lt.data = w;
  uv_timer_start(&lt, try_lock, 250, 250);
  start_changed(w);
  uv_run(loop, UV_RUN_DEFAULT);
  dbwatch_stop(dw);
  uv_close((uv_handle_t *)&lt, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);
  if (w->lockfd >= 0) {
    w->lc->lockfd = w->lockfd;
    free(w->lc->input);
    w->lc->input = util_strdup("{}"); /* it exists: its own input is in the log */
    if (took_over) *took_over = 1;
  }
  return 0;
}

static int local_follow(client *cl, const char *id, enum client_follow_mode mode, const client_sink *sink,
                        int *took_over, client_err *err) {
  local_client *lc = (local_client *)cl;
  if (took_over) *took_over = 0;
  if (!db(lc, err)) return -1;
  watch w = {lc, id, sink, 0, 0, -1};
  return mode == CLIENT_FOLLOW_START ? follow_start(&w, took_over, err) : follow_events(&w, err);
}

/* --------------------------------------------------------------- writes --- */

static int local_signal(client *cl, const char *id, const char *name, const char *payload, client_err *err) {
  local_client *lc = (local_client *)cl;
  char who[300];
  if (!db(lc, err)) return -1;
  cli_local_identity(who, sizeof who);
  if (engine_send_signal(lc->st, id, name, payload, who, err->msg, sizeof err->msg) != 0) return err->refused = 1, -1;
  return 0;
}

static int local_session_input(client *cl, const char *id, const char *kind, const char *text, client_err *err) {
  local_client *lc = (local_client *)cl;
  char who[300], msg[512];
  if (!db(lc, err)) return -1;
  cli_local_identity(who, sizeof who);
  char *payload = engine_session_input(kind, text, who, msg, sizeof msg);
  if (!payload) return say(err, 1, "%s: %s", kind, msg);
  int rc = engine_send_signal(lc->st, id, ENGINE_SESSION_SIGNAL, payload, who, err->msg, sizeof err->msg);
  free(payload);
  return rc ? (err->refused = 1, -1) : 0;
}

static int local_cancel(client *cl, const char *id, client_err *err) {
  local_client *lc = (local_client *)cl;
  char who[300];
  if (!db(lc, err)) return -1;
  cli_local_identity(who, sizeof who);
  if (engine_request_cancel(lc->st, id, who, err->msg, sizeof err->msg) != 0) return err->refused = 1, -1;
  return 0;
}

/* ---------------------------------------------------------------- reads --- */

typedef struct items {
  local_client *lc;
  client_item_fn each;
  void *ud;
} items;

static int list_row(void *ud, const wf_row *w) {
  items *x = ud;
  char *item = view_list_item_json(x->lc->st, w);
  int stop = x->each(x->ud, item, strlen(item));
  free(item);
  return stop;
}

static int local_list(client *cl, const char *status, const char *cursor, client_item_fn each, void *ud, char **next,
                      client_err *err) {
  local_client *lc = (local_client *)cl;
  (void)cursor; /* one page */
  *next = NULL;
  if (!db(lc, err)) return -1;
  items x = {lc, each, ud};
  if (store_wf_list(lc->st, status, list_row, &x) != STORE_OK) return read_failed(lc, "the workflows", lc->db, err);
  return 0;
}

static int local_summary(client *cl, const char *id, char **json, client_err *err) {
  local_client *lc = (local_client *)cl;
  *json = NULL;
  if (!db(lc, err)) return -1;
  view_summary s;
  int found = view_summary_load(lc->st, id, &s, err->msg, sizeof err->msg);
  if (found != 1) {
    if (found == 0) engine_unknown_id(id, err->msg, sizeof err->msg);
    err->refused = 1;
    return -1;
  }
  *json = view_summary_json(&s); /* what the API answers */
  view_summary_free(&s);
  return 0;
}

static int local_audit(client *cl, const char *id, char **out, size_t *len, client_err *err) {
  local_client *lc = (local_client *)cl;
  *out = NULL;
  if (!db(lc, err)) return -1;
  char who[300];
  sign_key *key;
  if (audit_key_open(lc->db, &key, err->msg, sizeof err->msg) != 0) return -1;
  cli_local_identity(who, sizeof who);
  int found = audit_export(lc->st, id, key, who, out, len, err->msg, sizeof err->msg);
  sign_key_free(key);
  if (found == 1) return 0;
  if (found == 0) engine_unknown_id(id, err->msg, sizeof err->msg);
  err->refused = found == 0;
  return -1;
}

static int local_history(client *cl, const char *id, int64_t run, client_item_fn each, void *ud, client_err *err) {
  local_client *lc = (local_client *)cl;
  if (!db(lc, err)) return -1;
  wf_row w;
  if (find_workflow(lc, id, &w, err) != 0) return -1;
  hist_list h = {0};
  int rc = 0;
  if (store_hist_load(lc->st, id, run > 0 ? run : w.run, &h) != STORE_OK) /* all of it or an error */
    rc = read_failed(lc, "the history", id, err);
  for (size_t i = 0; rc == 0 && i < h.n; i++) {
    char *item = view_hist_item_json(&h.v[i]); /* what the API answers */
    int stop = each(ud, item, strlen(item));
    free(item);
    if (stop) break;
  }
  hist_list_free(&h);
  wf_row_free(&w);
  return rc;
}

static int local_events(client *cl, const char *id, int64_t after, void (*each)(void *ud, const domain_event *e),
                        void *ud, int *more, client_err *err) {
  local_client *lc = (local_client *)cl;
  *more = 0; /* one page */
  if (!db(lc, err)) return -1;
  wf_row r;
  if (find_workflow(lc, id, &r, err) != 0) return -1;
  wf_row_free(&r);
  client_sink sink = {each, NULL, ud};
  watch w = {lc, id, &sink, after, 0, -1};
  return flush(&w) == STORE_OK ? 0 : read_failed(lc, "the events", id, err);
}

/* ------------------------------------------------------------ approvals --- */

/* approval_answer's check of an approver, on local:USER as local_answer
 * sends it (cut to APPROVAL_APPROVER_MAX bytes). */
static int local_approver(client *cl, client_err *err) {
  (void)cl;
  char who[APPROVAL_APPROVER_MAX + 1], why[128];
  cli_local_identity(who, sizeof who);
  if (util_text_problem(who, strlen(who), 0, why, sizeof why) != 0) return say(err, 1, "invalid approver: %s", why);
  return 0;
}

static int local_pending(client *cl, const char *id, char *status, int (*each)(void *ud, const approval_request *r),
                         void *ud, client_err *err) {
  local_client *lc = (local_client *)cl;
  *status = 0;
  if (!db(lc, err)) return -1;
  wf_row w;
  if (find_workflow(lc, id, &w, err) != 0) return -1;
  snprintf(status, 32, "%s", w.status);
  wf_row_free(&w);
  if (approval_each_pending(lc->st, id, each, ud, err->msg, sizeof err->msg) != 0) return err->refused = 1, -1;
  return 0;
}

static int local_answer(client *cl, const char *id, const char *request_id, int approved, const char *reason,
                        approval_request *done, client_err *err) {
  local_client *lc = (local_client *)cl;
  if (!db(lc, err)) return -1;
  char who[APPROVAL_APPROVER_MAX + 1];
  cli_local_identity(who, sizeof who);
  approval_decision d = {request_id, approved, who, reason};
  if (approval_answer(lc->st, id, &d, done, err->msg, sizeof err->msg) != 0) return err->refused = 1, -1;
  return 0;
}

/* --------------------------------------------------------------- memory --- */

typedef struct memory_items {
  client_item_fn each;
  void *ud;
} memory_items;

static int memory_item(void *ud, char *json) {
  memory_items *x = ud;
  int stop = x->each(x->ud, json, strlen(json));
  free(json);
  return stop;
}

static int local_memory_list(client *cl, const char *kind, const char *identity, client_item_fn each, void *ud,
                             client_err *err) {
  local_client *lc = (local_client *)cl;
  if (!db(lc, err)) return -1;
  memory_items x = {each, ud};
  if (memory_list(lc->st, kind, identity, 0, memory_item, &x, err->msg, sizeof err->msg) != 0)
    return err->refused = 1, -1;
  return 0;
}

static int local_memory_show(client *cl, const char *id, char **json, client_err *err) {
  local_client *lc = (local_client *)cl;
  if (!db(lc, err)) return -1;
  int found = memory_show(lc->st, id, json, err->msg, sizeof err->msg);
  if (found == 1) return 0;
  err->refused = found == 0;
  return -1;
}

static int local_memory_revoke(client *cl, const char *id, const char *reason, char **json, client_err *err) {
  local_client *lc = (local_client *)cl;
  if (!db(lc, err)) return -1;
  char who[300];
  cli_local_identity(who, sizeof who);
  int rc = memory_revoke(lc->st, id, who, reason, util_now_ms(), json, err->msg, sizeof err->msg);
  if (rc != 1) {
    store_rollback(lc->st);
    err->refused = rc == 0 || rc == 2 || (rc < 0 && !store_batch_failed(lc->st));
    return -1;
  }
  if (store_commit(lc->st) != STORE_OK) {
    free(*json);
    *json = NULL;
    return say(err, 0, "cannot revoke memory entry %s: %s", id, store_errmsg(lc->st));
  }
  return 0;
}

static void local_close(client *cl) {
  local_client *lc = (local_client *)cl;
  if (lc->st) store_close(lc->st);
  if (lc->lockfd >= 0) engine_unlock(lc->lockfd);
  free(lc->input);
  free(lc);
}

static const client_ops LOCAL = {
    .start = local_start,
    .follow = local_follow,
    .run_here = local_run_here,
    .fork = local_fork,
    .signal = local_signal,
    .session_input = local_session_input,
    .cancel = local_cancel,
    .list = local_list,
    .summary = local_summary,
    .audit = local_audit,
    .history = local_history,
    .events = local_events,
    .approver = local_approver,
    .pending = local_pending,
    .answer = local_answer,
    .memory_list = local_memory_list,
    .memory_show = local_memory_show,
    .memory_revoke = local_memory_revoke,
    .close = local_close,
};

client *client_local_new(const char *path) {
  local_client *lc = util_xmalloc(sizeof *lc);
  *lc = (local_client){{&LOCAL}, path, NULL, -1, NULL, {{0}, {0}}};
  return &lc->base;
}
