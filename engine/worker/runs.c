/* runs: the run cache. A workflow run in memory is its VM replayed from the
 * log (run_load), kept while it runs and evicted when it waits; an outcome
 * reaches it directly when cached, else by a replay (run_deliver). This file
 * owns a run's history appends and status, and what a run does when its VM
 * blocks on a command (run_handle_state): start an activity attempt, take a
 * buffered signal, put a timer task, or finish; and the code caches: the
 * compiled chunks replays load, the scripts starts write (run_script). */
#include "worker.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "crash.h"
#include "json.h"
#include "modules.h"
#include "log.h"
#include "render.h"
#include "trace_cache.h"

/* ------------------------------------------------------------ history --- */

/* Whether an event only records a command being issued: the workflow learns
 * nothing from it, so an effect issued after it need not wait for its commit. */
static int issues_command(const char *type) {
  static const char *const issued[] = {"ActivityScheduled", "TimerStarted",      "SignalWaitStarted",
                                       "SlotRequested",     "SlotReleaseRequested", "CounterRequested",
                                       "RateRequested",     "RateChargeRequested",  "ChildStarted",
                                       NULL};
  for (const char *const *t = issued; *t; t++)
    if (strcmp(type, *t) == 0) return 1;
  return 0;
}

int64_t run_append(wfrun *r, const char *type, int64_t ref, const char *name, const char *hash,
                          const char *payload, hist_event *out) {
  hist_event ev = {r->next_seq, type, ref, name, hash, payload, util_now_ms(), NULL};
  store_lease_fence(r->e->st, r->id); /* the batch commits only while this worker holds it */
  engine_touch(r->e, r->id);
  int rc = store_hist_append(r->e->st, r->id, r->run, &ev);
  if (rc == STORE_ECORRUPT) { /* appended without a replay (an outcome): a log out of step with its head */
    wf_row w = {.id = r->id};
    run_damaged(r->e, &w, store_errmsg(r->e->st));
    return -1;
  }
  if (rc != STORE_OK) {
    engine_log_err(r->e, "append");
    return -1;
  }
  crash_point("append");
  if (!issues_command(type)) engine_unsettle(r->e, r->id, r->run, ev.seq);
  r->next_seq++;
  if (r->e->otel) otel_steps_appended(r, &ev); /* a run's end, an approval's answer: held with this batch */
  if (out) *out = ev;
  return ev.seq;
}

void run_set_status(wfrun *r, const char *status, const char *result, const char *error, const char *detail) {
  if (strcmp(r->status, status) == 0 && !result && !error) {
    if (detail) engine_notify(r->e, r->id, status, detail); /* waiting on something else now */
    return;
  }
  if (store_wf_set_status(r->e->st, r->id, status, result, error) != STORE_OK) engine_log_err(r->e, "status");
  snprintf(r->status, sizeof r->status, "%s", status);
  engine_notify(r->e, r->id, status, detail);
}

/* -------------------------------------------------------------- host --- */

static int64_t host_append(void *ud, const char *type, int64_t ref, const char *name, const char *hash,
                           const char *payload, int64_t *time) {
  hist_event ev;
  int64_t seq = run_append(ud, type, ref, name, hash, payload, &ev);
  if (time) *time = seq >= 0 ? ev.time : 0; /* ev is unset when the append failed */
  return seq;
}

static int64_t host_emit(void *ud, const char *type, const char *payload) {
  wfrun *r = ud;
  return store_domain_append(r->e->st, r->id, type, util_now_ms(), payload);
}

static void host_print(void *ud, const char *msg) {
  wfrun *r = ud;
  log_workflow(r->id, msg); /* a script's print may carry model text: rendered */
}

static char *host_load_module(void *ud, const char *name, size_t *len, char **chunkname, char *err, size_t errlen) {
  wfrun *r = ud;
  modhost m = {r->e->st, r->id, r->run, r->script_dir, r->e->lua_dir, 1};
  return modules_load(&m, name, len, chunkname, err, errlen);
}

/* -------------------------------------------------------------- runs --- */

void run_free(wfrun *r) {
  wfvm_free(r->vm);
  free(r->id);
  free(r->parent);
  free(r->script_dir);
  free(r);
}

wfrun *run_detached(engine *e, const char *id) {
  wf_row w;
  if (!engine_owns(e, id) || store_wf_get(e->st, id, &w) != 1) return NULL;
  wfrun *r = util_xcalloc(1, sizeof *r);
  r->e = e;
  r->id = util_strdup(id);
  r->run = w.run;
  r->script_dir = util_strdup(w.script_dir);
  r->parent = w.parent ? util_strdup(w.parent) : NULL;
  r->cancel = w.cancel;
  snprintf(r->status, sizeof r->status, "%s", w.status);
  r->next_seq = store_hist_max_seq(e->st, id, w.run) + 1;
  wf_row_free(&w);
  return r;
}

void run_evict(wfrun *r) {
  if (strmap_get(&r->e->runs, r->id) == r) strmap_del(&r->e->runs, r->id);
  run_free(r);
}

static void codebuf_free(void *p) {
  codebuf *cb = p;
  free(cb->buf);
  free(cb);
}

static void scriptbuf_free(void *p) {
  scriptbuf *sb = p;
  free(sb->src);
  free(sb);
}

void run_clear_codecache(engine *e) {
  strmap_clear(&e->bytecode, codebuf_free);
  strmap_clear(&e->scripts, scriptbuf_free);
}

const scriptbuf *run_script(engine *e, const char *path, char *err, size_t errlen) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    util_seterr(err, errlen, "cannot read workflow script %s: %s", path, strerror(errno));
    return NULL;
  }
  int64_t mt = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
  scriptbuf *s = strmap_get(&e->scripts, path);
  if (s && s->mtime_ns == mt && s->size == (int64_t)sb.st_size) return s;
  size_t len;
  char *src = engine_read_script(path, &len, err, errlen);
  if (!src) return NULL;
  if (engine_check_script(path, src, len, err, errlen) != 0) {
    free(src);
    return NULL;
  }
  if (!s) {
    s = util_xcalloc(1, sizeof *s);
    strmap_put(&e->scripts, path, s);
  }
  free(s->src);
  s->src = src;
  s->len = len;
  s->mtime_ns = mt;
  s->size = (int64_t)sb.st_size;
  util_sha256_hex(src, len, s->hash);
  return s;
}

/* Builds a VM for the workflow's current run and replays it; the run then
 * continues live (handle_state) and may finish or be evicted before return.
 * The run's events are read here unless given (loaded: taken from it). */
void run_load(engine *e, const wf_row *w, hist_list *loaded) {
  if (strmap_get(&e->runs, w->id) || !engine_owns(e, w->id)) return;
  wfrun *r = util_xcalloc(1, sizeof *r);
  r->e = e;
  r->id = util_strdup(w->id);
  r->run = w->run;
  r->script_dir = util_strdup(w->script_dir);
  r->parent = w->parent ? util_strdup(w->parent) : NULL;
  r->cancel = w->cancel;
  snprintf(r->status, sizeof r->status, "%s", w->status);
  hist_list h = {0};
  int rc = STORE_OK;
  if (loaded) {
    h = *loaded;
    *loaded = (hist_list){0};
  } else if ((rc = store_hist_load(e->st, w->id, w->run, &h)) != STORE_OK) {
    if (rc == STORE_ECORRUPT) run_damaged(e, w, store_errmsg(e->st)); /* never replayed from a damaged log */
    else engine_log_err(e, "load history");
    hist_list_free(&h);
    run_free(r);
    return;
  }
  r->next_seq = h.n ? h.v[h.n - 1].seq + 1 : 1;
  /* the run's trace, kept while it is at hand: its log lines, its
   * attempts' requests and its children name it without a read */
  if (h.n && strcmp(h.v[0].type, "WorkflowStarted") == 0) trace_cache_put(w->id, w->run, h.v[0].payload);
  char *chunk = util_fmt("@%s", w->script_name);
  codebuf *cb = strmap_get(&e->bytecode, w->code_hash);
  if (!cb) {
    size_t srclen = 0;
    char *src = store_code_get(e->st, w->code_hash, &srclen);
    if (src) {
      cb = util_xcalloc(1, sizeof *cb);
      cb->buf = wfvm_compile(src, srclen, chunk, &cb->len);
      if (!cb->buf) { /* does not compile: keep the source, the VM reports the error */
        cb->buf = src;
        cb->len = srclen;
        src = NULL;
      }
      if (e->bytecode.len >= 1024) { /* bound the cache: start over */
        run_clear_codecache(e);
      }
      strmap_put(&e->bytecode, w->code_hash, cb);
      free(src);
    }
  }
  wfvm_host host = {r, host_append, host_emit, host_load_module, host_print};
  r->vm = wfvm_new(&e->vmcfg, &host, w->id, w->run, &h);
  if (r->vm) wfvm_set_parent(r->vm, r->parent);
  hist_list_free(&h);
  strmap_put(&e->runs, r->id, r);
  if (!cb || !r->vm) {
    run_set_status(r, "stuck", NULL, !cb ? "the workflow's code is missing from the store" : "cannot create a VM",
               NULL);
    free(chunk);
    run_evict(r);
    return;
  }
  int binary = cb->len > 0 && cb->buf[0] == '\x1b'; /* LUA_SIGNATURE */
  wfvm_state st = wfvm_start_mode(r->vm, cb->buf, cb->len, chunk, binary ? "b" : "t");
  free(chunk);
  run_handle_state(r, st);
}

void run_damaged(engine *e, const wf_row *w, const char *why) {
  char *msg = util_strdup(why); /* why may be the store's message, which the writes below replace */
  log_wf(LOGL_WARNING, w->id, "workflow %s is stuck: %s", w->id, msg);
  store_lease_fence(e->st, w->id);
  if (store_wf_set_status(e->st, w->id, "stuck", NULL, msg) != STORE_OK) engine_log_err(e, "status");
  engine_notify(e, w->id, "stuck", NULL);
  free(msg);
}

void run_load_id(engine *e, const char *id) {
  wf_row w;
  int found = store_wf_get(e->st, id, &w);
  if (found == 1 && !engine_status_terminal(w.status) && strcmp(w.status, "stuck") != 0) run_load(e, &w, NULL);
  if (found == 1) wf_row_free(&w);
}

const run_trace *run_trace_of(engine *e, const char *id, int64_t run) {
  const run_trace *t = trace_cache_get(id, run);
  if (t) return t;
  hist_list h = {0};
  if (store_hist_get(e->st, id, run, 1, &h) == 1 && strcmp(h.v[0].type, "WorkflowStarted") == 0) {
    trace_cache_put(id, run, h.v[0].payload);
    t = trace_cache_get(id, run);
  }
  hist_list_free(&h);
  return t;
}

/* The one way an outcome that arrives from outside a run's own step (an
 * activity's attempt, a timer, a signal's timeout) enters its log: appended
 * to the run in memory, or after the last event of the log when it is not
 * (a detached run, freed here). 1 with *ev (its name and payload are the
 * caller's strings), 0 when the workflow is not this worker's to write (or
 * gone), -1 when the batch failed. Deliver it with run_deliver once the
 * strings *ev points at are kept. */
int run_outcome(engine *e, const char *id, const char *type, int64_t ref, const char *name, const char *payload,
                hist_event *ev) {
  wfrun *r = strmap_get(&e->runs, id), *detached = NULL;
  if (!r && !(r = detached = run_detached(e, id))) return 0;
  int rc = run_append(r, type, ref, name, NULL, payload, ev) >= 0 ? 1 : -1;
  if (detached) run_free(detached);
  return rc;
}

/* Hands the outcome event of the command a run waits on to the run: directly
 * when it is in memory, else by replaying it (the outcome is already logged). */
void run_deliver(engine *e, const char *id, const hist_event *ev) {
  wfrun *r = strmap_get(&e->runs, id);
  if (r && wfvm_waits_on(r->vm, ev->ref)) {
    run_handle_state(r, wfvm_deliver(r->vm, ev));
    return;
  }
  if (r) run_evict(r);
  run_load_id(e, id);
}

/* ------------------------------------------------------------ commands --- */

static const run_command *command_of(engine *e, const char *kind);

/* Cancellation is delivered as the outcome of every command pending when it
 * comes (what the run's futures wait on), in issue order; what the script
 * issues after it (clean-up) runs. Returns the VM's state after the last, or
 * -1 when an append failed. */
int run_cancel_pending(wfrun *r, wfvm_state *st) {
  engine *e = r->e;
  size_t n = wfvm_pending_count(r->vm);
  int64_t *seqs = util_xcalloc(n ? n : 1, sizeof *seqs);
  for (size_t i = 0; i < n; i++) seqs[i] = wfvm_pending_at(r->vm, i)->seq;
  store_wf_set_cancel(e->st, r->id, 2);
  r->cancel = 2;
  *st = WFVM_BLOCKED;
  int rc = 0;
  for (size_t i = 0; i < n && *st == WFVM_BLOCKED; i++) {
    if (!wfvm_waits_on(r->vm, seqs[i])) continue;
    const wfvm_cmd *c = NULL;
    for (size_t k = 0; !c; k++)
      if (wfvm_pending_at(r->vm, k)->seq == seqs[i]) c = wfvm_pending_at(r->vm, k);
    const run_command *k = command_of(e, c->kind);
    if (k && k->drop) k->drop(r, c->seq);
    store_task_del(e->st, r->id, "activity", c->seq);
    store_task_del(e->st, r->id, "timer", c->seq);
    store_task_del(e->st, r->id, "signal_timeout", c->seq);
    store_task_del(e->st, r->id, "wake", c->seq);
    hist_event ev;
    if (run_append(r, "CommandCancelled", c->seq, c->name, NULL, NULL, &ev) < 0) {
      rc = -1;
      break;
    }
    *st = wfvm_deliver(r->vm, &ev);
  }
  free(seqs);
  return rc;
}

/* Stops what runs here for the run's pending commands (its activities'
 * attempts): futures nobody waits for once the run has ended. */
static void drop_pending(wfrun *r) {
  for (size_t i = 0; i < wfvm_pending_count(r->vm); i++) {
    const wfvm_cmd *c = wfvm_pending_at(r->vm, i);
    const run_command *k = command_of(r->e, c->kind);
    if (k && k->drop) k->drop(r, c->seq);
  }
}

void run_finish(wfrun *r, const char *status, const char *event, const char *result, const char *error) {
  engine *e = r->e;
  if (event) run_append(r, event, 0, NULL, NULL, result ? result : error, NULL);
  if (r->vm) drop_pending(r);
  if (e->on_close) e->on_close(r, status, result, error); /* its parent told, its children closed */
  store_task_del_wf(e->st, r->id);
  store_signal_del_wf(e->st, r->id);
  /* its slots are its current run's (continue-as-new releases them): a
   * VM that never asked for one skips the round trip */
  if ((!r->vm || wfvm_issued_slot(r->vm)) && e->on_run_end) e->on_run_end(e, r->id);
  run_set_status(r, status, result, error, NULL);
  if (store_lease_release(e->st, e->owner, r->id) != STORE_OK) engine_log_err(e, "release lease");
  run_evict(r);
}

/* A timer: its task fires it (dispatch.c). */
static int start_timer(wfrun *r, const wfvm_cmd *c, hist_event *ev, void **keep) {
  (void)ev;
  (void)keep;
  if (c->is_new) tasks_put(r->e, r->id, "timer", c->seq, json_int_field(c->payload, "fire_at", util_now_ms()));
  return 0;
}

/* A signal wait: a signal buffered before it (or while the run was out of
 * memory) is its outcome at once; else a timeout's task, if it has one. */
static int start_signal(wfrun *r, const wfvm_cmd *c, hist_event *ev, void **keep) {
  engine *e = r->e;
  char *payload = NULL;
  int got = store_signal_take(e->st, r->id, c->name, &payload);
  if (got == 1) {
    crash_point("signal.take");
    store_task_del(e->st, r->id, "signal_timeout", c->seq);
    *keep = payload;
    return run_append(r, "SignalReceived", c->seq, c->name, NULL, payload, ev) < 0 ? -1 : 1;
  }
  if (got < 0) return -1;
  if (c->is_new) {
    int64_t deadline = json_int_field(c->payload, "deadline", -1);
    if (deadline >= 0) tasks_put(e, r->id, "signal_timeout", c->seq, deadline);
  }
  return 0;
}

static const run_command timer_command = {"timer", start_timer, NULL, NULL};
static const run_command signal_command = {"signal", start_signal, NULL, NULL};

void runs_register(engine *e, const run_command *k) {
  if (e->ncommands == sizeof e->commands / sizeof *e->commands) { /* a kind added without room: a build error, said at start */
    log_msg(LOGL_ERROR, "no room for the command kind '%s' (worker.h: commands)", k->kind);
    abort();
  }
  e->commands[e->ncommands++] = k;
}

void runs_init(engine *e) {
  runs_register(e, &timer_command);
  runs_register(e, &signal_command);
}

static const run_command *command_of(engine *e, const char *kind) {
  for (size_t i = 0; i < e->ncommands; i++)
    if (strcmp(e->commands[i]->kind, kind) == 0) return e->commands[i];
  return NULL;
}

/* Starts what a pending command asks of the engine, or (replayed) looks at it
 * again, through k, the handler of its kind. Returns 1 with *ev when its
 * outcome is logged at once (deliver it), 0 when it waits, -1 when the batch
 * failed. *keep holds what *ev points at, for release once it is delivered. */
static int start_command(wfrun *r, const wfvm_cmd *c, const run_command *k, hist_event *ev, void **keep) {
  if (strcmp(c->kind, "activity") == 0) run_set_status(r, "running", NULL, NULL, NULL);
  if (!k) {
    log_wf(LOGL_ERROR, r->id, "workflow %s blocks on a command of unknown kind '%s'", r->id, c->kind);
    return 0;
  }
  int got = k->start(r, c, ev, keep);
  return got > 0 ? 1 : got;
}

/* Every thread of the run waits: the status says on what, and the run stays
 * in memory only while an activity of it runs here (bounded memory, however
 * many wait; an outcome replays the others). */
static void settle_status(wfrun *r) {
  engine *e = r->e;
  int activity = 0, here = 0, limit = 0;
  /* what it waits on, said: an activity (running), a slot or a rate (queued:
   * slots.c said so), else the newest signal wait (an approval asked after
   * the session's open wait for messages), else a timer */
  const wfvm_cmd *signal = NULL, *timer = NULL, *child = NULL;
  for (size_t i = 0; i < wfvm_pending_count(r->vm); i++) {
    const wfvm_cmd *c = wfvm_pending_at(r->vm, i);
    if (strcmp(c->kind, "activity") == 0) {
      char key[160];
      snprintf(key, sizeof key, "%s/%lld", r->id, (long long)c->seq);
      activity = 1;
      here |= strmap_get(&e->attempts, key) != NULL;
    } else if (strcmp(c->kind, "signal") == 0) {
      signal = c;
    } else if (strcmp(c->kind, "timer") == 0) {
      timer = c;
    } else if (strcmp(c->kind, "child") == 0) {
      child = c;
    } else {
      limit = 1;
    }
  }
  if (activity) {
    run_set_status(r, "running", NULL, NULL, NULL);
  } else if (!limit && signal) {
    char detail[300];
    snprintf(detail, sizeof detail, "signal %s", signal->name);
    run_set_status(r, "waiting", NULL, NULL, detail);
  } else if (!limit && child) {
    char detail[300];
    snprintf(detail, sizeof detail, "child %s", child->name);
    run_set_status(r, "waiting", NULL, NULL, detail);
  } else if (!limit && timer) {
    run_set_status(r, "waiting", NULL, NULL, "timer");
  }
  /* waiting with nothing of it running here: another worker may take it up
   * when it is due (a signal, a timer, a retry) */
  if (!here && store_lease_release(e->st, e->owner, r->id) != STORE_OK) engine_log_err(e, "release lease");
  if (!here || e->runs.len > e->max_cached) run_evict(r);
}

/* Drives a run from a VM state until it waits on something external. */
void run_handle_state(wfrun *r, wfvm_state st) {
  engine *e = r->e;
  for (;;) {
    switch (st) {
      case WFVM_DONE: {
        char msg[200];
        if (json_check_size(strlen(wfvm_output(r->vm)), "the workflow's result", msg, sizeof msg) != 0) {
          /* the log never holds a result past the payload limit: the run fails instead */
          char *q = json_quote(msg), *error = util_fmt("{\"message\":%s,\"type\":\"PayloadTooLarge\"}", q);
          run_finish(r, "failed", "WorkflowFailed", NULL, error);
          free(q);
          free(error);
          return;
        }
        run_finish(r, "completed", "WorkflowCompleted", wfvm_output(r->vm), NULL);
        return;
      }
      case WFVM_FAILED: {
        const char *out = wfvm_output(r->vm);
        /* cancelled only when the script let the Cancelled error through */
        int cancelled = r->cancel == 2 && strcmp(wfvm_error_type(r->vm), "Cancelled") == 0;
        run_finish(r, cancelled ? "cancelled" : "failed", cancelled ? "WorkflowCancelled" : "WorkflowFailed", NULL, out);
        return;
      }
      case WFVM_KILLED: run_finish(r, "failed", "WorkflowFailed", NULL, wfvm_output(r->vm)); return;
      case WFVM_STUCK:
        log_wf(LOGL_WARNING, r->id, "workflow %s is stuck: %s", r->id, wfvm_output(r->vm));
        run_set_status(r, "stuck", NULL, wfvm_output(r->vm), NULL);
        run_evict(r);
        return;
      case WFVM_END: run_evict(r); return;
      case WFVM_CONTINUE: {
        char *input = util_strdup(wfvm_output(r->vm));
        run_append(r, "ContinuedAsNew", 0, NULL, NULL, input, NULL);
        int64_t next = r->run + 1;
        char seed[17];
        snprintf(seed, sizeof seed, "%016llx", (unsigned long long)util_random64());
        /* the next run stays in its caller's trace: the same traceparent and
         * tracestate; a run without one keeps the workflow's own trace */
        trace_start rec = {{0}, {0}};
        const run_trace *t = run_trace_of(e, r->id, r->run);
        if (t && t->ctx.span_id[0]) {
          traceparent_format(t->ctx.trace_id, t->ctx.span_id, t->ctx.sampled, rec.traceparent);
          if (t->tracestate) snprintf(rec.tracestate, sizeof rec.tracestate, "%s", t->tracestate);
        }
        char *traced = trace_start_members(&rec);
        char *payload = util_fmt("{\"input\":%s,\"seed\":\"%s\"%s}", input, seed, traced);
        free(traced);
        hist_event ev = {1, "WorkflowStarted", 0, NULL, NULL, payload, util_now_ms(), NULL};
        store_modules_copy(e->st, r->id, r->run, next);
        store_wf_new_run(e->st, r->id, next, input);
        store_hist_append(e->st, r->id, next, &ev);
        engine_unsettle(e, r->id, next, 1);
        store_task_del_wf(e->st, r->id);
        drop_pending(r);
        if (e->on_close) e->on_close(r, "continued", NULL, NULL);
        if (e->on_run_end) e->on_run_end(e, r->id); /* a new run asks again */
        tasks_put(e, r->id, "workflow", 0, util_now_ms());
        free(payload);
        free(input);
        engine_notify(e, r->id, "running", "continued as new");
        run_evict(r);
        return;
      }
      case WFVM_BLOCKED: break;
    }
    if (r->cancel == 1) {
      if (run_cancel_pending(r, &st) != 0) return;
      continue;
    }
    /* each command once per VM: the new ones start, the replayed ones are looked at again */
    const wfvm_cmd *c = wfvm_next_command(r->vm);
    if (c) {
      hist_event ev;
      void *keep = NULL;
      const run_command *k = command_of(e, c->kind); /* c goes with the delivery */
      int got = start_command(r, c, k, &ev, &keep);
      if (got > 0) st = wfvm_deliver(r->vm, &ev);
      if (k && k->release) k->release(keep);
      else free(keep);
      if (got < 0) return;
      continue;
    }
    settle_status(r);
    return;
  }
}

/* A lost batch: every cached run goes (a task, a signal or an attempt's
 * outcome brings each back, replayed from the log). */
void runs_drop_all(engine *e) {
  for (size_t i = 0; i < e->runs.cap; i++)
    if (STRMAP_LIVE(&e->runs, i)) run_free(e->runs.vals[i]);
  strmap_free(&e->runs);
  strmap_init(&e->runs);
}
