/* attempts: activity attempts. An attempt runs one call of an activity in
 * the activity VM (actvm.h); while it runs, its task row is this worker's
 * lease on it, so a crash leaves a task that the next worker runs as attempt
 * n + 1. When it ends, its outcome is recorded once (ActivityCompleted or
 * ActivityFailed), unless the retry policy schedules another attempt, and is
 * delivered to the run (runs.c). Also activity.history() for steps. */
#include "worker.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crash.h"
#include "json.h"
#include "memory.h"
#include "session_view.h"

/* ---------------------------------------------------------- activities --- */

void attempt_free(attempt *a) {
  if (!a) return;
  free(a->wf_id);
  free(a->name);
  free(a->payload);
  free(a->script_dir);
  free(a->span_note);
  free(a);
}

/* Whether the command at seq of the workflow's current run has its outcome in
 * the log already (cancelled meanwhile, or a stale task): then it gets no
 * second one. Also 1 when the log cannot be read: nothing may be recorded.
 * A run in memory answers from its VM, without a round trip: every outcome
 * appended to it is delivered to it or evicts it (runs.c), a lost batch or
 * lease drops it (engine.c), and another worker's appends need the lease
 * this one's commit is fenced on. So it waits on seq exactly when the log
 * has no outcome for it. */
int attempt_answered(engine *e, const char *id, wfrun *r, int64_t seq) {
  if (r && r->vm) return !wfvm_waits_on(r->vm, seq);
  int64_t run = r ? r->run : -1;
  wf_row w;
  if (!r) {
    if (store_wf_get(e->st, id, &w) != 1) return 1;
    run = w.run;
    wf_row_free(&w);
  }
  return store_hist_outcome(e->st, id, run, seq) != 0;
}

int attempt_open(engine *e, const char *id, int64_t run, int64_t seq, hist_list *h) {
  return store_hist_get(e->st, id, run, seq, h) == 1 && strcmp(h->v[0].type, "ActivityScheduled") == 0 &&
         store_hist_outcome(e->st, id, run, seq) == 0;
}

/* The wait after attempt n: initial_interval * backoff^(n-1), at most
 * max_interval, and never more than UTIL_MAX_SECONDS whatever the options:
 * pow overflows to inf (backoff 2 by attempt 1,025) and 0 * inf is NaN,
 * neither of which may reach an integer. */
static int64_t retry_delay_ms(const act_opts *o, int n) {
  double cap = o->max_interval > 0 && o->max_interval < UTIL_MAX_SECONDS ? o->max_interval : UTIL_MAX_SECONDS;
  double d = o->initial_interval > 0 ? o->initial_interval * pow(o->backoff, n - 1) : 0;
  if (!(d <= cap)) d = cap; /* inf or NaN too */
  return (int64_t)(d * 1000.0);
}

/* An error bigger than this is not kept as an activity's last error. */
#define LAST_ERROR_MAX 4096

/* Whether a failed attempt is tried again, from its error's own fields. */
static int should_retry(const attempt *a, const act_failure *why, int64_t *run_at) {
  if (why->non_retryable) return 0;
  for (int i = 0; i < a->opts.n_non_retryable && !why->type_too_long; i++)
    if (strcmp(why->type, a->opts.non_retryable[i]) == 0) return 0;
  if (a->opts.max_attempts > 0 && a->n >= a->opts.max_attempts) return 0;
  *run_at = util_now_ms() + retry_delay_ms(&a->opts, a->n);
  if (a->opts.schedule_to_close > 0 && *run_at >= a->first_at + (int64_t)(a->opts.schedule_to_close * 1000.0))
    return 0;
  return 1;
}

/* Records the end of an attempt. Returns 1 with *ev set when the activity has
 * an outcome (completed, or failed for good); 0 when a retry is scheduled. */
static int attempt_record(attempt *a, wfrun *r, int ok, const char *json, hist_event *ev) {
  engine *e = a->e;
  if (!engine_owns(e, a->wf_id)) return 0; /* another worker took it over: its own attempt counts */
  if (attempt_answered(e, a->wf_id, r, a->seq)) {
    store_task_del(e->st, a->wf_id, "activity", a->seq);
    return 0;
  }
  int64_t retry_at = 0;
  act_failure why;
  /* the error as the workflow sees it: one attempts, the engine's count */
  char *payload = ok ? NULL : actvm_failure(e->act, json, a->n, &why);
  char key[200];
  snprintf(key, sizeof key, "last_error:%s/%lld", a->wf_id, (long long)a->seq);
  if (!ok && should_retry(a, &why, &retry_at)) {
    /* what `show` and the API tell of an activity between its attempts */
    if (strlen(payload) <= LAST_ERROR_MAX) store_meta_put(e->st, key, payload);
    if (store_task_put(e->st, a->wf_id, "activity", a->seq, retry_at, a->n + 1, a->first_at, NULL, 0) != STORE_OK)
      engine_log_err(e, "retry");
    else if (e->otel) /* the retry's task is this failure's record: the span goes with its batch */
      otel_steps_attempt(e, a, 0, payload, 1);
    tasks_arm(e, retry_at);
    free(payload);
    return 0;
  }
  crash_point("activity.record");
  store_task_del(e->st, a->wf_id, "activity", a->seq);
  if (a->n > 1) store_meta_put(e->st, key, NULL);
  (void)r; /* in memory or not: run_outcome finds it */
  int got = run_outcome(e, a->wf_id, ok ? "ActivityCompleted" : "ActivityFailed", a->seq, a->name,
                        ok ? json : payload, ev);
  if (got > 0 && e->otel) otel_steps_attempt(e, a, ok, payload, 0); /* before a->payload is the outcome's */
  if (got > 0) {
    /* the event's strings must outlive this call: keep copies on the attempt */
    free(a->payload);
    a->payload = util_strdup(ok ? json : payload);
    ev->payload = a->payload;
    ev->name = a->name;
    ev->type = ok ? "ActivityCompleted" : "ActivityFailed";
  }
  free(payload);
  return got > 0;
}

static void tell_latency(attempt *a, int ok) {
  engine *e = a->e;
  if (e->cfg.on_activity) e->cfg.on_activity(e->cfg.ud, a->name, (double)(util_mono_ms() - a->started_mono) / 1000.0, ok);
}

static void attempt_done(void *ud, act_call *call, int ok, const char *json) {
  (void)call;
  attempt *a = ud;
  engine *e = a->e;
  a->span_note = actvm_take_span(e->act); /* before anything else can end an attempt */
  tell_latency(a, ok);
  strmap_del(&e->attempts, a->key);
  crash_point("activity.done");
  wfrun *r = strmap_get(&e->runs, a->wf_id);
  hist_event ev;
  if (attempt_record(a, r, ok, json, &ev)) {
    run_deliver(e, a->wf_id, &ev);
  } else if (r && wfvm_waits_on(r->vm, a->seq)) {
    run_evict(r); /* waits for its retry; replayed when that ends */
  }
  attempt_free(a);
  /* no dispatch here: what this wrote that falls due armed the task timer
   * (a retry, a timer, a slot handed on), and asking the store after every
   * attempt costs a round trip or two each on PostgreSQL */
}

/* An attempt that ended without running on: its outcome recorded (see
 * attempt_begin for what the return says). */
static int attempt_end_at_once(attempt *a, wfrun *r, int ok, char *json, hist_event *ev) {
  tell_latency(a, ok);
  int outcome = attempt_record(a, r, ok, json, ev);
  free(json);
  if (!outcome) attempt_free(a);
  return outcome;
}

/* The traceparent attempt a's outgoing requests carry, into out
 * (TRACEPARENT_LEN bytes; "" for none): its run's trace, its own span
 * (otel_export.h: "attempt N" of the ActivityScheduled step), when tracing
 * is on. Returns the run's tracestate to hand on with it, or NULL. */
static const char *attempt_traceparent(const attempt *a, char *out) {
  *out = 0;
  if (!trace_propagate_outgoing()) return NULL;
  const run_trace *t = run_trace_of(a->e, a->wf_id, a->run);
  if (!t) return NULL;
  char kind[32];
  snprintf(kind, sizeof kind, "attempt %d", a->n);
  trace_step_parent(&t->ctx, a->wf_id, a->run, a->seq, kind, out);
  return t->tracestate;
}

/* Begins attempt a's body. Returns 1 with *ev when it ended at once with an
 * outcome (a is then the caller's to free after delivery, as ev points into
 * it); 0 when it runs on (a is in engine.attempts), or a retry is scheduled
 * or nothing may be recorded (a is freed). */
static int attempt_begin(attempt *a, wfrun *r, hist_event *ev) {
  engine *e = a->e;
  int64_t stc = (int64_t)(a->opts.start_to_close * 1000.0);
  if (a->opts.schedule_to_close > 0) {
    int64_t left = a->first_at + (int64_t)(a->opts.schedule_to_close * 1000.0) - util_now_ms();
    if (left < 1) left = 1;
    if (stc == 0 || left < stc) stc = left;
  }
  char traceparent[TRACEPARENT_LEN] = "";
  const char *tracestate = attempt_traceparent(a, traceparent);
  act_info info = {a->wf_id, a->seq, a->n, a->name, a->script_dir, stc, (int64_t)(a->opts.heartbeat * 1000.0), a->run,
                   *traceparent ? traceparent : NULL, tracestate, e->otel && otel_steps_traced(e, a->wf_id, a->run)};
  act_call *call = NULL;
  int ok = 0;
  char *json = NULL;
  a->started_mono = util_mono_ms();
  if (e->otel) a->begun_ns = otel_steps_now_ns();
  crash_point("activity.start");
  if (e->cfg.call_activity) {
    ok = e->cfg.call_activity(e->cfg.ud, a->wf_id, a->seq, a->n, a->name, a->payload, stc, &json);
  } else if (!actvm_call(e->act, &info, a->payload, attempt_done, a, &ok, &json, &call)) {
    a->call = call;
    a->lease_ms = stc + 60000;
    strmap_put(&e->attempts, a->key, a);
    /* leased by this engine until it ends; a crash voids the lease, and the
     * attempt it cut short counts: the next one is n + 1 (activity.info) */
    store_task_put(e->st, a->wf_id, "activity", a->seq, util_now_ms(), a->n + 1, a->first_at, e->owner,
                   util_now_ms() + a->lease_ms);
    return 0;
  } else {
    a->span_note = actvm_take_span(e->act); /* it ended at once */
  }
  crash_point("activity.end");
  return attempt_end_at_once(a, r, ok, json, ev);
}

static void defer_key(engine *e, const char *key);

/* The attempt waits for batch `after` to be committed before its body
 * begins. Its task row, written in this batch beside its command, leases it
 * to this engine meanwhile: a crash before it began leaves a task that the
 * next worker runs as this same attempt n. */
static void attempt_defer(attempt *a, int64_t after) {
  engine *e = a->e;
  a->after_batch = after;
  a->lease_ms = (int64_t)(a->opts.start_to_close * 1000.0) + 60000;
  strmap_put(&e->attempts, a->key, a);
  int64_t now = util_now_ms();
  if (store_task_put(e->st, a->wf_id, "activity", a->seq, now, a->n, a->first_at, e->owner, now + a->lease_ms) !=
      STORE_OK)
    engine_log_err(e, "defer activity");
  defer_key(e, a->key);
}

static void defer_key(engine *e, const char *key) {
  if (e->ndeferred == e->capdeferred) {
    e->capdeferred = e->capdeferred ? e->capdeferred * 2 : 64;
    e->deferred = util_xrealloc(e->deferred, e->capdeferred * sizeof *e->deferred);
  }
  e->deferred[e->ndeferred++] = util_strdup(key);
}

/* Starts attempt n of the activity scheduled at seq. Returns 1 with *ev when it
 * ended synchronously with an outcome; 0 when pending, waiting for a commit,
 * or a retry is scheduled. An attempt begins only once every result recorded
 * before its command is durable (engine_unsettled), unless it is local
 * ({local = true}: it may run again with the results it acted on). */
int attempt_start(engine *e, wfrun *r, const char *wf_id, const char *script_dir, int64_t seq, int n,
                  int64_t first_at, const char *name, const char *payload, hist_event *ev, attempt **keep) {
  attempt *a = util_xcalloc(1, sizeof *a);
  a->e = e;
  a->wf_id = util_strdup(wf_id);
  a->seq = seq;
  a->n = n;
  a->first_at = first_at;
  a->name = util_strdup(name);
  a->payload = util_strdup(payload);
  a->script_dir = util_strdup(script_dir);
  a->started_mono = util_mono_ms();
  snprintf(a->key, sizeof a->key, "%s/%lld", wf_id, (long long)seq);
  a->run = r ? r->run : 0; /* for the idempotency key */
  wf_row w;
  if (!r && store_wf_get(e->st, wf_id, &w) == 1) {
    a->run = w.run;
    wf_row_free(&w);
  }
  *keep = NULL;
  char err[512];
  int outcome;
  if (actvm_parse_options(e->act, payload, &a->opts, err, sizeof err) != 0) {
    char *q = json_quote(err);
    char *json = util_fmt("{\"message\":%s,\"non_retryable\":true,\"type\":\"InvalidOptions\"}", q);
    free(q);
    crash_point("activity.end");
    outcome = attempt_end_at_once(a, r, 0, json, ev);
  } else {
    int64_t after = a->opts.local ? 0 : engine_unsettled(e, wf_id, a->run, seq);
    if (after) {
      attempt_defer(a, after);
      return 0;
    }
    outcome = attempt_begin(a, r, ev);
  }
  if (outcome) *keep = a; /* ev points into a: the caller frees it after delivery */
  return outcome;
}

void attempts_begin_deferred(engine *e) {
  char **keys = e->deferred;
  size_t n = e->ndeferred;
  e->deferred = NULL;
  e->ndeferred = e->capdeferred = 0;
  for (size_t i = 0; i < n; i++) {
    attempt *a = strmap_get(&e->attempts, keys[i]);
    if (a && a->after_batch > e->durable) { /* its batch is not answered yet */
      defer_key(e, a->key);
    } else if (a && a->after_batch) {
      strmap_del(&e->attempts, a->key);
      a->after_batch = 0;
      wfrun *r = strmap_get(&e->runs, a->wf_id);
      hist_event ev;
      if (e->stopping) { /* its leased task runs it at the next start */
        attempt_free(a);
      } else if (!engine_owns(e, a->wf_id)) { /* taken over: the other worker runs it */
        attempt_free(a);
      } else if (attempt_answered(e, a->wf_id, r, a->seq)) { /* its outcome came meanwhile: it never begins */
        store_task_del(e->st, a->wf_id, "activity", a->seq);
        attempt_free(a);
      } else if (attempt_begin(a, r, &ev)) {
        run_deliver(e, a->wf_id, &ev);
        attempt_free(a);
      }
    }
    free(keys[i]);
  }
  free(keys);
}

void attempts_clear_deferred(engine *e) {
  for (size_t i = 0; i < e->ndeferred; i++) free(e->deferred[i]);
  e->ndeferred = 0;
}

/* ---------------------------------------------------- history for steps --- */

/* activity.history(): events of the workflow's current run as a JSON array
 * (payloads are JSON already and go in as they are). */
char *attempt_history_json(void *ud, const char *wf_id, int64_t from, int64_t to) {
  engine *e = ud;
  wf_row w;
  if (store_wf_get(e->st, wf_id, &w) != 1) return NULL;
  hist_list h = {0};
  int rc = store_hist_range(e->st, wf_id, w.run, from, to, &h);
  wf_row_free(&w);
  if (rc != STORE_OK) {
    hist_list_free(&h);
    return NULL;
  }
  ubuf b = {0};
  ubuf_add(&b, "[", 1);
  int first = 1;
  for (size_t i = 0; i < h.n; i++) {
    const hist_event *ev = &h.v[i];
    if (ev->seq < from || ev->seq > to) continue;
    char *type = json_quote(ev->type), *name = json_quote(ev->name ? ev->name : "");
    char *item = util_fmt("%s{\"name\":%s,\"payload\":%s,\"ref\":%lld,\"seq\":%lld,\"type\":%s}", first ? "" : ",",
                          name, ev->payload && *ev->payload ? ev->payload : "null", (long long)ev->ref,
                          (long long)ev->seq, type);
    ubuf_add(&b, item, strlen(item));
    free(item);
    free(type);
    free(name);
    first = 0;
  }
  ubuf_add(&b, "]", 2); /* with the NUL */
  hist_list_free(&h);
  return b.p;
}

/* activity.workflow(id): workflow id's row (status, result, error) and its
 * domain events as view_event_json objects (what engine events --json
 * prints), one JSON object; NULL when there is no such workflow or a read
 * fails (never a shorter list). */
static int add_event(void *ud, const domain_event *ev) {
  ubuf *b = ud;
  char *item = view_event_json(ev);
  if (b->p[b->n - 1] != '[') ubuf_add(b, ",", 1);
  ubuf_add(b, item, strlen(item));
  free(item);
  return 0;
}

char *attempt_workflow_json(void *ud, const char *wf_id) {
  engine *e = ud;
  wf_row w;
  if (store_wf_get(e->st, wf_id, &w) != 1) return NULL;
  char *id = json_quote(w.id), *status = json_quote(w.status);
  char *head = util_fmt("{\"error\":%s,\"id\":%s,\"result\":%s,\"status\":%s,\"events\":[",
                        w.error && *w.error ? w.error : "null", id, w.result && *w.result ? w.result : "null", status);
  free(id);
  free(status);
  wf_row_free(&w);
  ubuf b = {0};
  ubuf_add(&b, head, strlen(head));
  free(head);
  if (store_domain_list(e->st, wf_id, 0, add_event, &b) != STORE_OK) {
    free(b.p);
    return NULL;
  }
  ubuf_add(&b, "]}", 3); /* with the NUL */
  return b.p;
}

char *attempt_memory_json(void *ud, const char *op, const char *args, size_t n, char *err, size_t errlen) {
  engine *e = ud;
  return memory_call(e->st, op, args, n, err, errlen);
}

/* A lost batch: an attempt in flight stays only if the log still shows its
 * command waiting (and its lease here), else it is abandoned (its command,
 * or the start of this attempt, was in the lost batch and comes again). */
void attempts_drop_unlogged(engine *e) {
  for (size_t i = 0; i < e->attempts.cap; i++) {
    if (!STRMAP_LIVE(&e->attempts, i)) continue;
    attempt *a = e->attempts.vals[i];
    wf_row w;
    hist_list h = {0};
    int open = store_wf_get(e->st, a->wf_id, &w) == 1;
    if (open) {
      open = attempt_open(e, a->wf_id, w.run, a->seq, &h) && store_lease_held(e->st, a->wf_id);
      wf_row_free(&w);
    }
    hist_list_free(&h);
    if (open) continue;
    strmap_del(&e->attempts, a->key);
    actvm_cancel(a->call);
    attempt_free(a);
  }
}

/* Another worker took workflow id over: its attempts here stop, unwritten. */
void attempts_drop_wf(engine *e, const char *id) {
  for (size_t i = 0; i < e->attempts.cap; i++) {
    if (!STRMAP_LIVE(&e->attempts, i)) continue;
    attempt *a = e->attempts.vals[i];
    if (strcmp(a->wf_id, id) != 0) continue;
    strmap_del(&e->attempts, a->key);
    actvm_cancel(a->call);
    attempt_free(a);
  }
}

/* ---------------------------------------------- the run's "activity" --- */

/* A run blocked on an activity's command (runs.c): a new one starts its
 * first attempt; one scheduled before a restart is run by its task. */
static int start_activity(wfrun *r, const wfvm_cmd *c, hist_event *ev, void **keep) {
  if (!c->is_new) return 0;
  attempt *a = NULL;
  if (attempt_start(r->e, r, r->id, r->script_dir, c->seq, 1, util_now_ms(), c->name, c->payload, ev, &a)) {
    *keep = a; /* ev points into it until it is delivered */
    return 1;
  }
  return 0; /* running, or failed once and waits for a retry */
}

static void release_activity(void *a) { attempt_free(a); }

/* The command is cancelled, or its run ended: its attempt here stops. */
static void drop_activity(wfrun *r, int64_t seq) {
  char key[160];
  snprintf(key, sizeof key, "%s/%lld", r->id, (long long)seq);
  attempt *a = strmap_del(&r->e->attempts, key);
  if (!a) return;
  actvm_cancel(a->call);
  attempt_free(a);
}

static const run_command activity_command = {"activity", start_activity, release_activity, drop_activity};

void attempts_init(engine *e) { runs_register(e, &activity_command); }
