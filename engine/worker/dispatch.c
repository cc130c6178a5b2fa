/* dispatch: due tasks. The task table holds what must happen next for each
 * workflow: a wake-up ("workflow": run it, or deliver a cancellation), an
 * activity attempt (new, a retry, or one a crash cut short), a durable timer
 * and a signal's timeout. dispatch_due takes what is due (bounded per call),
 * acts on each task it managed to delete, and arms one loop timer for the
 * next.
 *
 * On PostgreSQL a dispatch's two round trips (the due tasks, then their
 * start) are not waited for on the loop: each is sent, and the loop goes on
 * (the API's requests, the model's streams, timers) until the socket brings
 * the answer, with the worker's batch held open meanwhile (a flight). */
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crash.h"
#include "log.h"

/* A run's timer or signal timeout fired: its outcome is appended, then
 * delivered; only if the log shows the command still waiting (a signal may
 * have answered it, in memory or not, earlier in this very batch). */
static void fire_timer(engine *e, const char *id, const char *kind, int64_t seq) {
  hist_event ev;
  crash_point("timer.fire");
  int fired = !attempt_answered(e, id, strmap_get(&e->runs, id), seq) &&
              run_outcome(e, id, strcmp(kind, "timer") == 0 ? "TimerFired" : "SignalTimedOut", seq, NULL, NULL, &ev) > 0;
  if (fired) run_deliver(e, id, &ev);
}

/* Workflows a worker takes on per dispatch on a shared store: the rest
 * stay for the other workers (or this one's next dispatch, a moment later),
 * and a batch stays short enough that one waiting on its locks (a takeover,
 * the order lock) does so well within its leases. */
#define CLAIMS_PER_DISPATCH 32

/* One dispatch: the due tasks it acts on, collected first. The first task
 * of each workflow is started with the others in one round trip
 * (store_task_start); a workflow's second task is taken at its turn, as the
 * first may have done it (ended the workflow, or moved it to a new run). */
typedef struct due_ctx {
  engine *e;
  int n;
  int claims, left; /* new leases asked for; tasks left for want of a claim */
  task_start *ts;
  struct due_extra {
    int attempt;
    int64_t first_at;
    size_t first; /* the index of its workflow's first task in this dispatch */
  } *x;
  size_t nt, cap;
  strmap seen; /* wf_id -> index + 1 of its first task */
  task_start *firsts; /* the first task of each workflow, started together */
  size_t nf;
  /* a flight: which answer it waits for, its wait on the store's socket,
   * the lost batches when it was sent (one lost meanwhile took what it
   * asked with it), a dispatch asked meanwhile */
  enum { WAITS_NONE, WAITS_DUE, WAITS_START } waits;
  answer_wait *wait;
  int64_t losses;
  int again;
} due_ctx;

/* Collects a due task to act on, unless an attempt of it runs here or it
 * would be one claim too many (a workflow's second task claims nothing). */
static int on_due(void *ud, const task_row *t) {
  due_ctx *d = ud;
  engine *e = d->e;
  d->n++;
  if (e->stopping) return 1;
  if (strcmp(t->kind, "activity") == 0) {
    char key[160];
    snprintf(key, sizeof key, "%s/%lld", t->wf_id, (long long)t->seq);
    if (strmap_get(&e->attempts, key)) return 0; /* running here */
  }
  size_t first = (size_t)(uintptr_t)strmap_get(&d->seen, t->wf_id);
  int had = first || store_lease_held(e->st, t->wf_id);
  if (!had && (d->claims >= CLAIMS_PER_DISPATCH ||
               (e->shared && store_lease_count(e->st) + d->claims >= e->max_leases))) {
    d->left++;
    return 0;
  }
  if (d->nt == d->cap) {
    d->cap = d->cap ? d->cap * 2 : 64;
    d->ts = util_xrealloc(d->ts, d->cap * sizeof *d->ts);
    d->x = util_xrealloc(d->x, d->cap * sizeof *d->x);
  }
  int wake = strcmp(t->kind, "workflow") == 0;
  d->ts[d->nt] = (task_start){.wf_id = util_strdup(t->wf_id),
                              .kind = util_strdup(t->kind),
                              .seq = t->seq,
                              .claim = e->shared && !had,
                              .history = wake && !first && !strmap_get(&e->runs, t->wf_id)};
  d->x[d->nt] = (struct due_extra){t->attempt, t->first_at, first ? first - 1 : d->nt};
  d->claims += d->ts[d->nt].claim;
  if (!first) strmap_put(&d->seen, t->wf_id, (void *)(uintptr_t)(d->nt + 1));
  d->nt++;
  return 0;
}

/* A workflow's second task in a dispatch, at its turn: its lease, its row
 * taken, the workflow's row read. 1 to act on it, 0 to pass, -1 to stop. */
static int take_now(engine *e, task_start *ts) {
  int had = store_lease_held(e->st, ts->wf_id);
  if (!engine_owns(e, ts->wf_id)) return store_batch_failed(e->st) ? -1 : 0; /* another worker runs it */
  int took = store_task_take(e->st, ts->wf_id, ts->kind, ts->seq);
  if (took != 1) {
    if (!had && took == 0) store_lease_release(e->st, e->owner, ts->wf_id); /* done meanwhile: not ours to keep */
    return took < 0 ? -1 : 0;
  }
  ts->found = store_wf_get(e->st, ts->wf_id, &ts->w);
  return ts->found == 1 ? 1 : ts->found < 0 ? -1 : 0;
}

/* Acts on task i of the dispatch. A first task was started with the
 * others: it acts only if taking its row took something, and what was read
 * with it is read again when its workflow was written to since by a step
 * of this dispatch (engine.touched). Returns 1 to stop. */
static int act_due(engine *e, due_ctx *d, size_t i) {
  task_start *ts = &d->ts[i];
  const struct due_extra *x = &d->x[i];
  const char *id = ts->wf_id;
  if (store_batch_failed(e->st)) return 1;
  /* a stop that came meanwhile (a step's, or while the starts were on
   * their way) leaves a workflow's second task untaken, but a first task is
   * taken already: it is acted on, or its removal would commit without it */
  if (e->stopping && x->first != i) return 0;
  if (x->first != i) {
    int go = take_now(e, ts);
    if (go <= 0) return go < 0;
  } else {
    if (!ts->owned) return 0; /* another worker runs it */
    if (e->shared) store_lease_fence(e->st, id);
    if (!ts->took) {
      /* another worker did it meanwhile (and may have ended the workflow): not ours to keep */
      if (ts->claim) store_lease_release(e->st, e->owner, id);
      return 0;
    }
    if (!ts->found) return 0;
    if (strmap_get(&e->touched, id)) { /* what was read is stale: read it now */
      store_task_start_free(ts);
      if ((ts->found = store_wf_get(e->st, id, &ts->w)) != 1) return ts->found < 0;
    }
  }
  const wf_row *w = &ts->w;
  if (strcmp(ts->kind, "workflow") == 0) {
    if (engine_status_terminal(w->status) && !strmap_get(&e->runs, id))
      store_lease_release(e->st, e->owner, id); /* a stale wake-up of an ended one */
    wfrun *r = strmap_get(&e->runs, id);
    if (children_terminate(e, r, w)) {
      /* its parent's close ended it */
    } else if (r) {
      r->cancel = w->cancel;
      wfvm_state st;
      if (w->cancel == 1) {
        if (run_cancel_pending(r, &st) == 0) run_handle_state(r, st);
      } else if (wfvm_pending_count(r->vm)) {
        /* a signal for a run that stays in memory (an activity of it runs):
         * loading it again takes what is buffered */
        run_evict(r);
        run_load_id(e, id);
      }
    } else if (!engine_status_terminal(w->status) && strcmp(w->status, "stuck") != 0) {
      if (ts->damaged) run_damaged(e, w, ts->damaged); /* its log did not check: nothing replayed */
      else run_load(e, w, ts->history && ts->h.n ? &ts->h : NULL);
    } else if (strcmp(w->status, "stuck") == 0 && w->cancel == 1) {
      /* its code does not replay, so no clean-up can run: cancelling ends
       * it as it is (its tasks, signals and slots go, as at any end) */
      wfrun *dr = run_detached(e, id);
      if (dr)
        run_finish(dr, "cancelled", "WorkflowCancelled", NULL,
                   "{\"message\":\"cancelled while stuck: the workflow's clean-up did not run\",\"type\":\"Cancelled\"}");
    }
  } else if (strcmp(ts->kind, "activity") == 0) {
    /* a cancellation asked for and not yet delivered: no new attempt. The
     * request's own task wakes the workflow, which cancels this command; on
     * a busy machine the retry fell due first and its attempt ran (and the
     * workflow completed) before the cancellation was delivered */
    if (w->cancel == 1) return 0;
    hist_list h = {0};
    wfrun *r = strmap_get(&e->runs, id);
    /* still scheduled and without an outcome (else the task was an orphan) */
    if (attempt_open(e, id, w->run, ts->seq, &h)) {
      hist_event ev;
      attempt *a = NULL;
      if (attempt_start(e, r, id, w->script_dir, ts->seq, x->attempt > 0 ? x->attempt : 1,
                        x->first_at ? x->first_at : util_now_ms(), h.v[0].name, h.v[0].payload, &ev, &a)) {
        run_deliver(e, id, &ev);
        attempt_free(a);
      }
    }
    hist_list_free(&h);
  } else if (strcmp(ts->kind, "wake") == 0) {
    /* a slot was handed to it, or a rate window opened: it looks again */
    wfrun *r = strmap_get(&e->runs, id);
    if (r && wfvm_waits_on(r->vm, ts->seq)) run_evict(r);
    else if (r) return 0; /* in memory doing something else: not waiting on it */
    run_load_id(e, id);
  } else if (strcmp(ts->kind, "child_timeout") == 0) {
    children_timeout(e, id, w->run, ts->seq);
  } else {
    fire_timer(e, id, ts->kind, ts->seq);
  }
  return 0;
}

static void due_free(due_ctx *d) {
  for (size_t i = 0; i < d->nt; i++) {
    store_task_start_free(&d->ts[i]);
    free((char *)d->ts[i].wf_id);
    free((char *)d->ts[i].kind);
  }
  free(d->ts);
  free(d->x);
  free(d->firsts);
  strmap_free(&d->seen);
  free(d);
}

/* The next due time asked in the batch's pipeline (store_task_next_send):
 * the timer is armed when the batch's commit brings the answer, and no
 * round trip is waited for here. */
#define NEXT_AFTER_COMMIT -3

static void on_next_due(void *ud, int ok) {
  engine *e = ud;
  int64_t next = store_task_next_result(e->st);
  if (!ok) return; /* the lost batch's retry dispatches again (batch.c) */
  if (next == -2) next = util_now_ms(); /* no answer: look again */
  if (next >= 0) tasks_arm(e, next);
}

/* When the next task falls due, or NEXT_AFTER_COMMIT. */
static int64_t next_due(engine *e) {
  int64_t next;
  int sent = store_task_next_send(e->st, e->owner, &next);
  if (sent < 0) return -2;
  if (sent == 0) return next;
  tasks_disarm(e); /* until the answer: what arms it meanwhile (a start, a put) stays armed */
  engine_when_committed(e, on_next_due, e);
  return NEXT_AFTER_COMMIT;
}

/* The dispatch is over (read: its due tasks were read): the timer is armed
 * for the next. */
static void dispatch_end(engine *e, due_ctx *d, int read) {
  int n = d->n, left = d->left, again = d->again, lost = d->losses != e->losses;
  due_free(d);
  if (lost) { /* a batch was lost while its read was on its way: the retry dispatches again (batch.c) */
    if (again) tasks_arm(e, util_now_ms()); /* or has already, and found this one on its way */
    return;
  }
  int64_t next = -2;
  if (read && !store_batch_failed(e->st)) {
    if (n >= DISPATCH_BATCH || again) next = util_now_ms();
    else if (left) next = util_now_ms() + 20; /* after this batch commits, and the others had a turn */
    else next = next_due(e);
  }
  e->dispatch_ms = util_mono_ms() - e->dispatched_at;
  if (next == NEXT_AFTER_COMMIT) return;
  if (next == -2) { /* the batch is lost (the commit handles it) or a query failed */
    if (!store_batch_failed(e->st)) engine_store_incident(e);
    return;
  }
  if (next < 0) {
    tasks_disarm(e);
    return;
  }
  tasks_arm(e, next);
}

static void fly(engine *e, due_ctx *d, int waits);

/* The first task of each workflow was started (rc): the answers go back to
 * their tasks, and every task is acted on in order. */
static void started(engine *e, due_ctx *d, int rc) {
  for (size_t i = 0, k = 0; i < d->nt; i++)
    if (d->x[i].first == i) d->ts[i] = d->firsts[k++];
  free(d->firsts);
  d->firsts = NULL;
  if (rc == STORE_OK) {
    e->dispatching = 1;
    for (size_t i = 0; i < d->nt && !act_due(e, d, i); i++) {}
    e->dispatching = 0;
  }
  e->touching = 0;
  strmap_free(&e->touched);
  strmap_init(&e->touched);
  dispatch_end(e, d, 1);
}

/* The due tasks were read (rc): the first task of each workflow is started
 * with the others in one round trip. */
static void due_read(engine *e, due_ctx *d, int rc) {
  if (rc != STORE_OK || !d->nt || e->stopping) {
    dispatch_end(e, d, rc == STORE_OK);
    return;
  }
  int64_t now = util_now_ms();
  d->firsts = util_xcalloc(d->nt, sizeof *d->firsts);
  for (size_t i = 0; i < d->nt; i++)
    if (d->x[i].first == i) d->firsts[d->nf++] = d->ts[i];
  e->touching = 1; /* from here, a workflow written to has its row read again (act_due) */
  int sent = store_task_start_send(e->st, e->owner, now, now + e->lease_ms, d->firsts, d->nf);
  if (sent == 1) {
    fly(e, d, WAITS_START);
    return;
  }
  rc = sent < 0 ? store_task_start_result(e->st, STORE_ERR, d->firsts, d->nf)
                : store_task_start(e->st, e->owner, now, now + e->lease_ms, d->firsts, d->nf);
  started(e, d, rc);
}

/* ---- flights: the answer of a read sent without waiting ---- */

/* The flight's answer is in (rc): the dispatch goes on, unless a lost batch
 * took what it asked (its retry dispatches again). */
static void landed(engine *e, due_ctx *d, int rc) {
  crash_point("dispatch.landed"); /* answered, nothing of it acted on */
  int waits = d->waits;
  e->flight = NULL;
  answer_wait_end(d->wait); /* answered elsewhere (dispatch_poll, dispatch_settle) */
  d->wait = NULL;
  if (d->losses != e->losses && rc == STORE_OK) rc = STORE_ERR; /* nothing it read or took holds */
  if (waits == WAITS_DUE) {
    rc = store_task_due_result(e->st, rc, on_due, d);
    d->waits = WAITS_NONE;
    due_read(e, d, rc);
  } else {
    started(e, d, store_task_start_result(e->st, rc, d->firsts, d->nf));
  }
}

static void on_flight_answer(void *ud, int rc) {
  engine *e = ud;
  if (!e->flight) return;
  e->flight->wait = NULL; /* it ended itself */
  landed(e, e->flight, rc);
}

/* The read is on its way: the loop waits on the store's socket for it. */
static void fly(engine *e, due_ctx *d, int waits) {
  d->waits = waits;
  e->flight = d;
  if (!(d->wait = answer_wait_start(&e->loop, e->st, on_flight_answer, e))) { /* cannot wait on it: wait here */
    landed(e, d, store_commit_wait(e->st));
    return;
  }
  crash_point("dispatch.sent");
}

/* Before the loop blocks: a flight whose answer a store call meanwhile
 * waited for (the socket will not tell) goes on now. */
void dispatch_poll(engine *e) {
  due_ctx *d = e->flight;
  if (!d) return;
  int rc = store_commit_poll(e->st);
  if (rc != STORE_PENDING) landed(e, d, rc);
}

/* At the end of a run: the flight's answer is waited for and the dispatch
 * goes on (the tasks it took are acted on before the batch commits). */
void dispatch_settle(engine *e) {
  while (e->flight) {
    log_msg(LOGL_DEBUG, "a dispatch's %s are on their way: answered, then acted on",
            e->flight->waits == WAITS_DUE ? "due tasks" : "task starts");
    landed(e, e->flight, store_commit_wait(e->st));
  }
}

/* At engine_free: the flight's answer is waited for and dropped (its batch
 * is never committed). */
void dispatch_abandon(engine *e) {
  due_ctx *d = e->flight;
  if (!d) return;
  e->flight = NULL;
  store_commit_wait(e->st);
  if (d->waits == WAITS_DUE) store_task_due_result(e->st, STORE_ERR, on_due, d);
  else store_task_start_result(e->st, STORE_ERR, d->firsts, d->nf);
  answer_wait_end(d->wait);
  due_free(d);
}

/* Runs every due task (bounded per call), then arms the timer for the next.
 * While the store is failing the retry timer calls it instead (backoff). */
void dispatch_due(engine *e) {
  if (e->stopping || e->recovering) return;
  if (e->dispatching) { /* asked from inside a dispatch (a step of it): right after it */
    tasks_arm(e, util_now_ms());
    return;
  }
  if (e->flight) { /* one on its way: another right after it */
    e->flight->again = 1;
    return;
  }
  if (e->inflight) { /* the batch's commit is on its way: when it is answered (batch.c) */
    e->due_after_commit = 1;
    return;
  }
  e->dispatched_at = util_mono_ms();
  e->dispatch_batch = e->batch;
  due_ctx *d = util_xcalloc(1, sizeof *d);
  d->e = e;
  d->losses = e->losses;
  strmap_init(&d->seen);
  /* of the workflows it holds no lease on, as many as it may claim and one
   * more (seen and left: d->left says more wait) */
  int unheld = -1;
  if (e->shared) {
    long long room = (long long)e->max_leases - store_lease_count(e->st);
    unheld = 1 + (int)(room < 0 ? 0 : room < CLAIMS_PER_DISPATCH ? room : CLAIMS_PER_DISPATCH);
  }
  int sent = store_task_due_send(e->st, util_now_ms(), e->owner, DISPATCH_BATCH, unheld);
  if (sent == 1) {
    fly(e, d, WAITS_DUE);
    return;
  }
  int rc = sent < 0 ? store_task_due_result(e->st, STORE_ERR, on_due, d)
                    : store_task_due(e->st, util_now_ms(), e->owner, DISPATCH_BATCH, unheld, on_due, d);
  due_read(e, d, rc);
}

void dispatch_init(engine *e) { tasks_on_due(e, dispatch_due); }
