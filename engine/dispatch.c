/* dispatch: due tasks. The task table holds what must happen next for each
 * workflow: a wake-up ("workflow": run it, or deliver a cancellation), an
 * activity attempt (new, a retry, or one a crash cut short), a durable timer
 * and a signal's timeout. dispatch_due takes what is due (bounded per call),
 * acts on each task it managed to delete, and arms one loop timer for the
 * next. */
#include "worker.h"

#include <stdio.h>
#include <string.h>

#include "crash.h"

/* A run's timer or signal timeout fired: its outcome is appended, then
 * delivered; only if the log shows the command still waiting (a signal may
 * have answered it, in memory or not, earlier in this very batch). */
static void fire_timer(engine *e, const char *id, const char *kind, int64_t seq) {
  wfrun *r = strmap_get(&e->runs, id), *detached = NULL;
  if (!r && !(r = detached = run_detached(e, id))) return;
  hist_event ev;
  crash_point("timer.fire");
  int fired = r->next_seq > 0 && !attempt_answered(e, id, r, seq) &&
              run_append(r, strcmp(kind, "timer") == 0 ? "TimerFired" : "SignalTimedOut", seq, NULL, NULL, NULL,
                         &ev) >= 0;
  if (detached) run_free(detached);
  if (fired) run_deliver(e, id, &ev);
}

/* Workflows a worker takes on per dispatch on a shared store: the rest
 * stay for the other workers (or this one's next dispatch, a moment later),
 * and a batch stays short enough that one waiting on its locks (a takeover,
 * the order lock) does so well within its leases. */
#define CLAIMS_PER_DISPATCH 32

typedef struct due_ctx {
  engine *e;
  int n;
  int claims, left; /* new leases taken; tasks left for want of a claim */
} due_ctx;

/* Tasks are collected before they run, so one may be stale by its turn
 * (taken by a step earlier in this dispatch): each acts only if deleting its
 * row here deleted something. An activity's task is put back as its lease. */
static int on_due(void *ud, const task_row *t) {
  due_ctx *d = ud;
  engine *e = d->e;
  d->n++;
  if (e->stopping || store_batch_failed(e->st)) return 1;
  if (strcmp(t->kind, "activity") == 0) {
    char key[160];
    snprintf(key, sizeof key, "%s/%lld", t->wf_id, (long long)t->seq);
    if (strmap_get(&e->attempts, key)) return 0; /* running here */
  }
  int had = store_lease_held(e->st, t->wf_id);
  if (!had && (d->claims >= CLAIMS_PER_DISPATCH || (e->shared && store_lease_count(e->st) >= e->max_leases))) {
    d->left++;
    return 0;
  }
  /* the lease, the task and what the workflow needs to run, in one round trip */
  int64_t now = util_now_ms();
  int wake = strcmp(t->kind, "workflow") == 0;
  task_start ts;
  if (store_task_start(e->st, t->wf_id, t->kind, t->seq, e->owner, now, now + e->lease_ms, e->shared && !had,
                       wake && !strmap_get(&e->runs, t->wf_id), &ts) != STORE_OK) {
    store_task_start_free(&ts);
    return 1;
  }
  if (!ts.owned) return 0; /* another worker runs it */
  if (e->shared) store_lease_fence(e->st, t->wf_id);
  d->claims += !had;
  if (!ts.took) {
    /* another worker did it meanwhile (and may have ended the workflow): not ours to keep */
    if (!had) store_lease_release(e->st, e->owner, t->wf_id);
    store_task_start_free(&ts);
    return 0;
  }
  if (!ts.found) {
    store_task_start_free(&ts);
    return 0;
  }
  if (wake) {
    wf_row w = ts.w;
    if (engine_status_terminal(w.status) && !strmap_get(&e->runs, t->wf_id))
      store_lease_release(e->st, e->owner, t->wf_id); /* a stale wake-up of an ended one */
    wfrun *r = strmap_get(&e->runs, t->wf_id);
    if (r) {
      r->cancel = w.cancel;
      wfvm_state st;
      if (w.cancel == 1) {
        if (run_cancel_pending(r, &st) == 0) run_handle_state(r, st);
      } else if (wfvm_pending_count(r->vm)) {
        /* a signal for a run that stays in memory (an activity of it runs):
         * loading it again takes what is buffered */
        run_evict(r);
        run_load_id(e, t->wf_id);
      }
    } else if (!engine_status_terminal(w.status) && strcmp(w.status, "stuck") != 0) {
      run_load(e, &w, &ts.h);
    } else if (strcmp(w.status, "stuck") == 0 && w.cancel == 1) {
      /* its code does not replay, so no clean-up can run: cancelling ends
       * it as it is (its tasks, signals and slots go, as at any end) */
      wfrun *d = run_detached(e, t->wf_id);
      if (d)
        run_finish(d, "cancelled", "WorkflowCancelled", NULL,
                   "{\"message\":\"cancelled while stuck: the workflow's clean-up did not run\",\"type\":\"Cancelled\"}");
    }
  } else if (strcmp(t->kind, "activity") == 0) {
    wf_row w = ts.w;
    hist_list h = {0};
    wfrun *r = strmap_get(&e->runs, t->wf_id);
    /* still scheduled and without an outcome (else the task was an orphan) */
    if (attempt_open(e, t->wf_id, w.run, t->seq, &h)) {
      hist_event ev;
      attempt *a = NULL;
      if (attempt_start(e, r, t->wf_id, w.script_dir, t->seq, t->attempt > 0 ? t->attempt : 1,
                        t->first_at ? t->first_at : util_now_ms(), h.v[0].name, h.v[0].payload, &ev, &a)) {
        run_deliver(e, t->wf_id, &ev);
        attempt_free(a);
      }
    }
    hist_list_free(&h);
  } else if (strcmp(t->kind, "wake") == 0) {
    /* a slot was handed to it, or a rate window opened: it looks again */
    wfrun *r = strmap_get(&e->runs, t->wf_id);
    if (r && wfvm_waits_on(r->vm, t->seq)) run_evict(r);
    else if (r) return 0; /* in memory doing something else: not waiting on it */
    run_load_id(e, t->wf_id);
  } else {
    fire_timer(e, t->wf_id, t->kind, t->seq);
  }
  store_task_start_free(&ts);
  return 0;
}

static void on_task_timer(uv_timer_t *t) {
  engine *e = t->data;
  e->task_timer_at = 0;
  dispatch_due(e);
}

/* Runs every due task (bounded per call), then arms the timer for the next.
 * While the store is failing the retry timer calls it instead (backoff). */
void dispatch_due(engine *e) {
  if (e->stopping || e->recovering) return;
  due_ctx d = {e, 0, 0, 0};
  int64_t next = -2;
  if (store_task_due(e->st, util_now_ms(), e->owner, DISPATCH_BATCH, on_due, &d) == STORE_OK &&
      !store_batch_failed(e->st))
    next = d.n >= DISPATCH_BATCH ? util_now_ms()
           : d.left ? util_now_ms() + 20 /* after this batch commits, and the others had a turn */
                    : store_task_next_at(e->st, e->owner);
  if (next == -2) { /* the batch is lost (the commit handles it) or a query failed */
    if (!store_batch_failed(e->st)) engine_store_incident(e);
    return;
  }
  if (next < 0) {
    uv_timer_stop(&e->task_timer);
    e->task_timer_at = 0;
    return;
  }
  dispatch_arm(e, next);
}

void dispatch_arm(engine *e, int64_t at) {
  if (e->stopping || e->recovering) return;
  if (e->task_timer_at && e->task_timer_at <= at && uv_is_active((uv_handle_t *)&e->task_timer)) return;
  /* at least 1 ms: libuv (1.44) runs a 0 ms timer started from its own
   * callback again at once, without polling for I/O or signals */
  int64_t delay = at - util_now_ms();
  if (delay < 1) delay = 1;
  e->task_timer_at = at;
  uv_timer_start(&e->task_timer, on_task_timer, (uint64_t)delay, 0);
}

