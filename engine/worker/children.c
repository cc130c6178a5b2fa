/* children: child workflows (wf.child, wf.start_child). A parent's
 * ChildStarted command creates the child (its row naming the parent, its
 * first event, its wake-up task) in the same batch as the event, so the log
 * never has one without the other whatever kill -9 does. The child's end
 * reaches the parent the way a signal does: in the batch of the child's
 * terminal event, its outcome is buffered in the parent's inbox under the
 * reserved name "child:ID" with a wake-up task, and the parent, loaded by
 * whichever worker runs it, takes it as ChildCompleted, ChildFailed or
 * ChildCancelled. So on PostgreSQL parent and child may run on any workers.
 *
 *   parent_close  what a parent's end (completed, failed, cancelled, or a
 *                 continue-as-new) does to a child still running: terminate
 *                 (the default: it ends at once as cancelled, type
 *                 Terminated, no clean-up runs), request_cancel (it is
 *                 cancelled as `engine cancel` does; its clean-up runs) or
 *                 abandon (it runs on alone). A child whose cancellation was
 *                 already asked is left to finish it.
 *   cancel        cancelling a parent cancels the children it waits on (not
 *                 abandon ones): their clean-up runs.
 *   timeout       a "child_timeout" task of the parent: past it the wait
 *                 raises Timeout and the child is cancelled.
 *
 * A start over child_max_depth or child_max_fanout (child_limits.c) is
 * refused like an id in use: ChildFailed is recorded at once and no child
 * is created. */
#include "worker.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crash.h"
#include "json.h"
#include "log.h"

#define INBOX_PREFIX "child:"

/* The member key of a command payload the VM wrote ({input, options, script}). */
static char *member(const char *json, const char *key) {
  const char *v;
  size_t n;
  if (!json || json_get(json, strlen(json), key, &v, &n) != 1) return NULL;
  return util_fmt("%.*s", (int)n, v);
}

/* An option of the command (options is its "options" object), as text. */
static char *option(const char *options, const char *key) {
  if (!options || *options != '{') return NULL;
  return member(options, key);
}

/* What the script names, as a path: absolute as it is, else beside the
 * parent's script (where its modules come from); ".lua" added to a bare name. */
static char *script_path(const wfrun *r, const char *script) {
  size_t n = strlen(script);
  const char *ext = n > 4 && strcmp(script + n - 4, ".lua") == 0 ? "" : ".lua";
  if (script[0] == '/') return util_fmt("%s%s", script, ext);
  return util_fmt("%s/%s%s", r->script_dir ? r->script_dir : ".", script, ext);
}

/* {"child":ID,"message":MSG,"type":TYPE}: an error the engine makes for the parent. */
static char *child_error(const char *child, const char *type, const char *msg) {
  char *qc = json_quote(child), *qm = json_quote(msg), *qt = json_quote(type);
  char *out = util_fmt("{\"child\":%s,\"message\":%s,\"type\":%s}", qc, qm, qt);
  free(qc);
  free(qm);
  free(qt);
  return out;
}

/* The outcome appended to the parent's log, kept (*keep) until delivered. */
static int answer(wfrun *r, const wfvm_cmd *c, const char *type, char *payload, hist_event *ev, void **keep) {
  *keep = payload;
  return run_append(r, type, c->seq, c->name, NULL, payload, ev) < 0 ? -1 : 1;
}

/* The trace context a child started at seq of run r records: the parent's
 * trace, its parent span the ChildStarted step's (otel_export.h), and the
 * parent's tracestate handed on. */
static void child_trace(wfrun *r, int64_t seq, trace_start *out) {
  memset(out, 0, sizeof *out);
  const run_trace *t = run_trace_of(r->e, r->id, r->run);
  trace_ctx own;
  if (!t) { /* no WorkflowStarted to read (a broken log): the workflow's own trace */
    trace_id_of_workflow(r->id, own.trace_id);
    own.span_id[0] = 0;
    own.sampled = -1;
  }
  trace_step_parent(t ? &t->ctx : &own, r->id, r->run, seq, "child", out->traceparent);
  if (t && t->tracestate) snprintf(out->tracestate, sizeof out->tracestate, "%s", t->tracestate);
}

/* A new ChildStarted: the child is created in this batch, or the start
 * fails at once (the id in use, a script that does not load). */
static int start_new(wfrun *r, const wfvm_cmd *c, hist_event *ev, void **keep) {
  engine *e = r->e;
  char *script = NULL, *input = member(c->payload, "input"), *options = member(c->payload, "options");
  char *qs = member(c->payload, "script");
  if (qs) script = json_string(qs, strlen(qs));
  char *close = NULL, *timeout = option(options, "timeout"), *qclose = option(options, "parent_close");
  if (qclose) close = json_string(qclose, strlen(qclose));
  int rc = 0;
  char err[1024];
  if (!script || !input) {
    rc = answer(r, c, "ChildFailed", child_error(c->name, "ChildStartFailed", "the command has no script or input"),
                ev, keep);
    goto out;
  }
  char *refused = NULL;
  int over = child_limits_check(e, r, c->name, options, &refused);
  if (over != 0) { /* no child row: the refusal is the outcome, which a replay takes whatever the limits are then */
    rc = over < 0 ? -1 : answer(r, c, "ChildFailed", refused, ev, keep);
    if (rc > 0) crash_point("child.limit");
    goto out;
  }
  char *path = script_path(r, script);
  /* read and checked once per change of the file, as engine_submit's: a
   * check builds a whole sandbox, most of a child's start when repeated */
  const scriptbuf *pre = run_script(e, path, err, sizeof err);
  trace_start trace;
  child_trace(r, c->seq, &trace);
  /* one insert that writes the child or finds the id in use (store_wf_start) */
  int existed = 0;
  wf_row w;
  int bad = !pre || ops_write_child(e->st, c->name, path, pre, input, r->id, close ? close : "terminate", &trace,
                                    &existed, &w, err, sizeof err);
  free(path);
  if (bad && store_batch_failed(e->st)) {
    rc = -1;
    goto out;
  }
  if (!bad && existed) {
    /* never this run's own child from before a crash: that one's ChildStarted is in the log, not new */
    snprintf(err, sizeof err, "workflow id '%s' is already in use (a %s workflow of script %s%s%s)", c->name,
             w.status, w.script_name, w.parent ? ", a child of " : "", w.parent ? w.parent : "");
    wf_row_free(&w);
    rc = answer(r, c, "ChildFailed", child_error(c->name, "WorkflowIdInUse", err), ev, keep);
    goto out;
  }
  if (bad) {
    char *msg = util_fmt("wf.child: %s", err);
    rc = answer(r, c, "ChildFailed", child_error(c->name, "ChildStartFailed", msg), ev, keep);
    free(msg);
    goto out;
  }
  crash_point("child.start");
  int64_t now = util_now_ms();
  engine_unsettle(e, c->name, 1, 1); /* its first step begins once its start is committed */
  tasks_arm(e, now);
  if (timeout) {
    double secs = strtod(timeout, NULL);
    if (secs >= 0 && tasks_put(e, r->id, "child_timeout", c->seq, c->time + (int64_t)(secs * 1000.0 + 0.999)) != 0)
      rc = -1;
  }
out:
  free(script);
  free(input);
  free(options);
  free(qs);
  free(close);
  free(qclose);
  free(timeout);
  return rc;
}

/* The outcome a child's end names, as the engine's own string; NULL for another. */
static const char *outcome_type(const char *event) {
  static const char *const types[] = {"ChildCompleted", "ChildFailed", "ChildCancelled", NULL};
  for (const char *const *t = types; event && *t; t++)
    if (strcmp(event, *t) == 0) return *t;
  return NULL;
}

/* The "child" command: a new one starts the child; a replayed one looks
 * in the inbox for the child's end, which is its outcome. */
static int child_command(wfrun *r, const wfvm_cmd *c, hist_event *ev, void **keep) {
  if (c->is_new) return start_new(r, c, ev, keep);
  engine *e = r->e;
  char name[ENGINE_ID_MAX + 16], *end = NULL;
  snprintf(name, sizeof name, INBOX_PREFIX "%s", c->name);
  int got = store_signal_take(e->st, r->id, name, &end);
  if (got < 0) return -1;
  if (got == 0) return 0;
  crash_point("child.take");
  store_task_del(e->st, r->id, "child_timeout", c->seq);
  char *event = json_get_string(end, strlen(end), "event"), *payload = member(end, "payload");
  const char *type = outcome_type(event); /* the event points at it until it is delivered */
  int rc = type && payload ? answer(r, c, type, payload, ev, keep) : 0;
  if (!(type && payload)) {
    log_wf(LOGL_ERROR, r->id, "workflow %s: the end of child %s is not readable: %s", r->id, c->name, end);
    free(payload);
  }
  free(event);
  free(end);
  return rc;
}

/* Asks child id to cancel, as `engine cancel` does, in this batch (a
 * finished one is left alone). -1 only when the batch failed. */
static int cancel_child(engine *e, const char *parent, const char *id) {
  char who[ENGINE_ID_MAX + 32], err[512];
  snprintf(who, sizeof who, "engine:parent:%s", parent);
  if (ops_write_cancel(e->st, id, who, err, sizeof err) == 0) {
    engine_touch(e, id);
    tasks_arm(e, util_now_ms());
    return 0;
  }
  return store_batch_failed(e->st) ? -1 : 0;
}

/* The run's command at seq, while it is pending. */
static const wfvm_cmd *pending_at(wfrun *r, int64_t seq) {
  for (size_t i = 0; r->vm && i < wfvm_pending_count(r->vm); i++)
    if (wfvm_pending_at(r->vm, i)->seq == seq) return wfvm_pending_at(r->vm, i);
  return NULL;
}

/* The parent's command is cancelled (the parent is being cancelled) or its
 * run ended: the child's timeout goes; a cancelled parent cancels it too
 * (an abandon child runs on). A run's end applies parent_close (on_close). */
static void child_drop(wfrun *r, int64_t seq) {
  store_task_del(r->e->st, r->id, "child_timeout", seq);
  const wfvm_cmd *c = pending_at(r, seq);
  if (!c || r->cancel != 2) return;
  char *options = member(c->payload, "options"), *close = option(options, "parent_close");
  if (!close || strcmp(close, "\"abandon\"") != 0) cancel_child(r->e, r->id, c->name);
  free(options);
  free(close);
}

/* Tells the parent that child r ended: its outcome in the parent's inbox
 * and a wake-up, in the batch of the child's terminal event; nothing for a
 * parent that ended first (store_signal_wake checks that in the same
 * statement, so no round trip waits for the parent's row). */
static void tell_parent(wfrun *r, const char *status, const char *result, const char *error) {
  engine *e = r->e;
  char *q = json_quote(r->id), *end;
  if (strcmp(status, "completed") == 0) {
    end = util_fmt("{\"event\":\"ChildCompleted\",\"payload\":%s}", result && *result ? result : "null");
  } else {
    /* the child's error as it raised it, with the child's id; a cancelled
     * child's as ChildCancelled, whatever its clean-up raised */
    int cancelled = strcmp(status, "cancelled") == 0;
    char *detail = error && *error == '{' ? util_strdup(error) : NULL;
    if (!detail) {
      char *qe = json_quote(error ? error : "");
      detail = util_fmt("{\"message\":%s,\"type\":\"Error\"}", qe);
      free(qe);
    }
    char *payload;
    if (cancelled) {
      char type[64] = "", msg[600];
      char *t = json_get_string(detail, strlen(detail), "type");
      snprintf(type, sizeof type, "%s", t ? t : "");
      free(t);
      snprintf(msg, sizeof msg, "child workflow %s was %s", r->id,
               strcmp(type, "Terminated") == 0 ? "terminated" : "cancelled");
      char *base = child_error(r->id, "ChildCancelled", msg);
      payload = util_fmt("%.*s,\"cause\":%s}", (int)strlen(base) - 1, base, detail);
      free(base);
    } else if (strcmp(detail, "{}") == 0) {
      payload = child_error(r->id, "Error", "the child failed");
    } else if (json_get(detail, strlen(detail), "child", &(const char *){0}, &(size_t){0}) == 1) {
      /* it raised a child's error of its own: its type and message, the whole as the cause */
      char *t = json_get_string(detail, strlen(detail), "type"), *m = json_get_string(detail, strlen(detail), "message");
      char *base = child_error(r->id, t ? t : "Error", m ? m : "");
      payload = util_fmt("%.*s,\"cause\":%s}", (int)strlen(base) - 1, base, detail);
      free(base);
      free(t);
      free(m);
    } else {
      payload = util_fmt("{\"child\":%s,%s", q, detail + 1); /* {"child":ID, then the error's own members */
    }
    end = util_fmt("{\"event\":\"%s\",\"payload\":%s}", cancelled ? "ChildCancelled" : "ChildFailed", payload);
    free(payload);
    free(detail);
  }
  char name[ENGINE_ID_MAX + 16];
  snprintf(name, sizeof name, INBOX_PREFIX "%s", r->id);
  int64_t now = util_now_ms();
  if (store_signal_wake(e->st, r->parent, name, end, now) == STORE_OK) {
    crash_point("child.end");
    engine_touch(e, r->parent);
    tasks_arm(e, now);
  }
  free(end);
  free(q);
}

typedef struct closing {
  engine *e;
  const char *parent;
  char **ids, **policies;
  int *cancel;
  size_t n, cap;
} closing;

static int collect_child(void *ud, const wf_row *w) {
  closing *c = ud;
  if (engine_status_terminal(w->status)) return 0;
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 8;
    c->ids = util_xrealloc(c->ids, c->cap * sizeof *c->ids);
    c->policies = util_xrealloc(c->policies, c->cap * sizeof *c->policies);
    c->cancel = util_xrealloc(c->cancel, c->cap * sizeof *c->cancel);
  }
  c->ids[c->n] = util_strdup(w->id);
  c->policies[c->n] = util_strdup(w->parent_close ? w->parent_close : "terminate");
  c->cancel[c->n++] = w->cancel;
  return 0;
}

/* The parent's run ended: each child still running gets what its
 * parent_close says, in this batch. */
static void close_children(wfrun *r) {
  engine *e = r->e;
  closing c = {e, r->id, NULL, NULL, NULL, 0, 0};
  if (store_wf_children(e->st, r->id, collect_child, &c) != STORE_OK) engine_log_err(e, "children");
  int64_t now = util_now_ms();
  for (size_t i = 0; i < c.n; i++) {
    if (c.cancel[i] == 0 && strcmp(c.policies[i], "request_cancel") == 0) {
      cancel_child(e, r->id, c.ids[i]);
    } else if (c.cancel[i] == 0 && strcmp(c.policies[i], "terminate") == 0) {
      /* the worker that runs it ends it at its wake-up (children_terminate) */
      if (store_wf_set_cancel(e->st, c.ids[i], 3) == STORE_OK &&
          store_task_put(e->st, c.ids[i], "workflow", 0, now, 0, 0, NULL, 0) == STORE_OK) {
        engine_touch(e, c.ids[i]);
        tasks_arm(e, now);
      }
    }
    crash_point("child.close");
    free(c.ids[i]);
    free(c.policies[i]);
  }
  free(c.ids);
  free(c.policies);
  free(c.cancel);
}

/* A run closed (status terminal, or "continued" for a continue-as-new):
 * a child tells its parent of its end; a parent's children get its
 * parent_close (a run that started none skips the query). */
static void on_close(wfrun *r, const char *status, const char *result, const char *error) {
  if (r->parent && engine_status_terminal(status)) tell_parent(r, status, result, error);
  if (!r->vm || wfvm_children_started(r->vm) > 0) close_children(r);
}

int children_terminate(engine *e, wfrun *r, const wf_row *w) {
  if (w->cancel != 3 || engine_status_terminal(w->status)) return 0;
  wfrun *dr = r ? r : run_detached(e, w->id);
  if (!dr) return 1;
  char msg[ENGINE_ID_MAX + 128];
  snprintf(msg, sizeof msg, "terminated: its parent %s ended (parent_close terminate)", w->parent ? w->parent : "");
  char *q = json_quote(msg), *error = util_fmt("{\"message\":%s,\"type\":\"Terminated\"}", q);
  run_finish(dr, "cancelled", "WorkflowCancelled", NULL, error);
  free(q);
  free(error);
  return 1;
}

void children_timeout(engine *e, const char *id, int64_t run, int64_t seq) {
  hist_list h = {0};
  crash_point("child.timeout");
  if (store_hist_get(e->st, id, run, seq, &h) != 1 || strcmp(h.v[0].type, "ChildStarted") != 0 ||
      store_hist_outcome(e->st, id, run, seq) != 0) {
    hist_list_free(&h);
    return;
  }
  char inbox[ENGINE_ID_MAX + 16];
  snprintf(inbox, sizeof inbox, INBOX_PREFIX "%s", h.v[0].name);
  if (store_signal_has(e->st, id, inbox) != 0) { /* it ended in time: its wake-up delivers that */
    hist_list_free(&h);
    return;
  }
  char *options = member(h.v[0].payload, "options"), *timeout = option(options, "timeout");
  char msg[ENGINE_ID_MAX + 128];
  snprintf(msg, sizeof msg, "child workflow %s ran past its timeout of %s s", h.v[0].name, timeout ? timeout : "?");
  char *payload = child_error(h.v[0].name, "Timeout", msg);
  hist_event ev;
  if (run_outcome(e, id, "ChildFailed", seq, h.v[0].name, payload, &ev) > 0) {
    cancel_child(e, id, h.v[0].name);
    run_deliver(e, id, &ev);
  }
  free(payload);
  free(options);
  free(timeout);
  hist_list_free(&h);
}

static const run_command child_kind = {"child", child_command, NULL, child_drop};

void children_init(engine *e) {
  runs_register(e, &child_kind);
  e->on_close = on_close;
}
