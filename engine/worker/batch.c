/* batch: the worker's group commit. Everything a loop iteration writes lands
 * in one transaction (committed at once, or sent without waiting for the
 * answer on PostgreSQL); the status notes and the waiters of a batch are
 * told once it is durable; a batch that cannot be written is rolled back and
 * retried with backoff, as one incident. It also keeps which results are
 * not durable yet (engine_unsettle), so a step never acts on one.
 *
 * What follows a batch is the other files' (engine.c wires it at open):
 * on_settled begins the attempts that waited, on_lost has the runs and
 * attempts drop what the log does not hold, on_retry sets the leases right
 * and dispatches. So this file calls none of the worker's other files. */
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crash.h"
#include "log.h"
#include "render.h"

void engine_log_err(engine *e, const char *what) {
  /* a lost batch is one incident, reported once when it is handled (batch_lost) */
  if (store_batch_failed(e->st)) return;
  log_msg(LOGL_ERROR, "%s: %s", what, store_errmsg(e->st));
}

/* Queues a status notification, delivered after the commit that makes it true. */
void engine_notify(engine *e, const char *id, const char *status, const char *detail) {
  if (!e->cfg.on_status && !e->status_watch) return;
  if (e->nnotes == e->capnotes) {
    e->capnotes = e->capnotes ? e->capnotes * 2 : 16;
    e->notes = util_xrealloc(e->notes, e->capnotes * sizeof(note));
  }
  e->notes[e->nnotes++] = (note){util_strdup(id), util_strdup(status), util_strdup(detail)};
}
/* ------------------------------------------------- durable results --- */

/* The first result of a workflow that is not durable yet, and the newest
 * batch it has one in. */
typedef struct unsettled {
  int64_t batch, run, seq;
} unsettled;

void engine_unsettle(engine *e, const char *id, int64_t run, int64_t seq) {
  unsettled *u = strmap_get(&e->unsettled, id);
  if (!u) {
    u = util_xmalloc(sizeof *u);
    strmap_put(&e->unsettled, id, u);
  } else if (u->batch > e->durable) { /* an earlier result still waits: it stays the first */
    u->batch = e->batch;
    return;
  }
  *u = (unsettled){e->batch, run, seq};
}

int64_t engine_unsettled(engine *e, const char *id, int64_t run, int64_t seq) {
  const unsettled *u = strmap_get(&e->unsettled, id);
  if (!u || u->batch <= e->durable) return 0;
  return u->run < run || (u->run == run && u->seq < seq) ? u->batch : 0;
}

static void forget_unsettled(engine *e) { strmap_clear(&e->unsettled, free); }

/* Batch `no` is durable: its results are forgotten, and what waited for it
 * begins at the loop's next turn (not from inside the commit). */
static void settle_batch(engine *e, int64_t no) {
  if (no > e->durable) e->durable = no;
  for (size_t i = 0; i < e->unsettled.cap; i++) {
    if (!STRMAP_LIVE(&e->unsettled, i)) continue;
    unsettled *u = e->unsettled.vals[i];
    if (u->batch > e->durable) continue;
    free(strmap_del(&e->unsettled, e->unsettled.keys[i]));
  }
  if (!e->unsettled.len) forget_unsettled(e); /* drops the tombstones */
  if (e->ndeferred && e->on_settled) e->on_settled(e); /* what waited for it begins */
}



static void on_retry_timer(uv_timer_t *t);
static void tell_waiters(engine *e, int ok);

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 5000

static void free_note(note *n) {
  free(n->id);
  free(n->status);
  free(n->detail);
}

static void drop_notes(engine *e) {
  for (size_t i = 0; i < e->nnotes; i++) free_note(&e->notes[i]);
  e->nnotes = 0;
}

/* The store failed (a lost batch, a failed query): said once per incident,
 * then retried after a growing pause (50 ms doubling up to 5 s) while the
 * loop goes on serving I/O and signals. Dispatch waits for the retry. The
 * incident is over once commits have succeeded for a calm period (1 s, or
 * twice the pause reached): a nearly full disk takes small batches and fails
 * big ones, and that is one incident, not one per batch. */
void engine_store_incident(engine *e) {
  e->recovered_at = 0;
  if (!e->incident_since) {
    e->incident_since = util_mono_ms();
    log_msg(LOGL_ERROR, "cannot write to the store: %s; retrying with backoff (nothing is lost)",
            store_errmsg(e->st));
  }
  e->incident_failures++;
  e->failed_commit = 1;
  e->recovering = 1;
  e->backoff_ms = e->backoff_ms ? e->backoff_ms * 2 : BACKOFF_MIN_MS;
  if (e->backoff_ms > BACKOFF_MAX_MS) e->backoff_ms = BACKOFF_MAX_MS;
  tasks_disarm(e);
  uv_timer_start(&e->retry_timer, on_retry_timer, (uint64_t)e->backoff_ms, 0);
}

/* The batch was rolled back: memory may be ahead of the log, and the log is
 * the truth. Cached runs go (a task, a signal or an attempt's outcome brings
 * each back, replayed from the log); an attempt in flight stays only if the
 * log still shows its command waiting, else it is abandoned (its command, or
 * the start of this attempt, was in the lost batch and comes again). */
static void batch_lost(engine *e, int incident) {
  store_rollback(e->st);
  e->losses++;
  drop_notes(e);
  /* what was not committed is gone: the log holds only durable results, and
   * an attempt kept below (its command is in the log) may begin */
  forget_unsettled(e);
  settle_batch(e, e->batch - 1);
  if (e->nwaiters) tell_waiters(e, 0);
  if (e->on_lost) e->on_lost(e); /* runs and attempts drop what the log does not hold */
  if (incident) {
    engine_store_incident(e);
  } else { /* a lease was lost, the store is fine: set the task leases right at once */
    e->recovering = 1;
    tasks_disarm(e);
    uv_timer_start(&e->retry_timer, on_retry_timer, 1, 0);
  }
}

static void on_store_calm(uv_timer_t *t) {
  engine *e = t->data;
  log_msg(LOGL_INFO, "the store is writable again (%d failed attempt%s over %.1f s)",
          e->incident_failures, e->incident_failures == 1 ? "" : "s",
          (double)(e->recovered_at - e->incident_since) / 1000.0);
  e->incident_since = e->recovered_at = e->backoff_ms = 0;
  e->incident_failures = 0;
}

/* Waiters of engine_when_committed, told after the batch they wrote into. */
typedef struct waiter {
  void (*cb)(void *ud, int ok);
  void *ud;
} waiter;

void engine_when_committed(engine *e, void (*cb)(void *ud, int ok), void *ud) {
  if (e->nwaiters == e->capwaiters) {
    e->capwaiters = e->capwaiters ? e->capwaiters * 2 : 16;
    e->waiters = util_xrealloc(e->waiters, e->capwaiters * sizeof(waiter));
  }
  e->waiters[e->nwaiters++] = (waiter){cb, ud};
}

/* From a detached array: a callback may write again and wait for the next batch. */
static void tell_waiters(engine *e, int ok) {
  waiter *w = e->waiters;
  size_t n = e->nwaiters;
  e->waiters = NULL;
  e->nwaiters = e->capwaiters = 0;
  for (size_t i = 0; i < n; i++) w[i].cb(w[i].ud, ok);
  free(w);
}

/* What follows a commit's answer rc, with the notes and waiters of the batch
 * it committed (detached arrays, freed here): on success the notes are
 * delivered and the waiters told; on failure they go with the lost batch. */
static int commit_done(engine *e, int rc, int64_t no, note *notes, size_t nnotes, waiter *w, size_t nw) {
  if (rc == STORE_OK && e->on_committed) e->on_committed(e);
  if (e->cfg.on_commit_stages) {
    engine_commit_stages cs = {.begin = e->commit_began, .done = uv_hrtime(), .ok = rc == STORE_OK};
    int64_t ckpt;
    store_wal_stats(e->st, &cs.wal_frames, &ckpt);
    cs.checkpoint_ns = (uint64_t)ckpt;
    e->cfg.on_commit_stages(e->cfg.ud, &cs);
  }
  if (rc == STORE_OK) settle_batch(e, no);
  if (rc == STORE_ELEASE) /* another worker runs that workflow now: it is not ours to write */
    log_msg(LOGL_ERROR, "%s", store_errmsg(e->st));
  if (rc == STORE_OK) crash_point("commit.after");
  if (rc == STORE_OK && e->recovering) {
    /* writable again: set the leases right now rather than after the backoff */
    uv_timer_start(&e->retry_timer, on_retry_timer, 1, 0);
  } else if (rc == STORE_OK && e->incident_since && !e->recovered_at) {
    e->recovered_at = util_mono_ms();
    e->failed_commit = 0;
    int64_t calm = 2 * e->backoff_ms < 1000 ? 1000 : 2 * e->backoff_ms;
    uv_timer_start(&e->retry_timer, on_store_calm, (uint64_t)calm, 0);
  }
  /* callbacks may start work that queues new notes and waiters: those are the next batch's */
  for (size_t i = 0; i < nnotes; i++) {
    if (rc == STORE_OK && e->cfg.on_status) e->cfg.on_status(e->cfg.ud, notes[i].id, notes[i].status, notes[i].detail);
    if (rc == STORE_OK && e->status_watch) e->status_watch(e->status_watch_ud, notes[i].id, notes[i].status);
    free_note(&notes[i]);
  }
  free(notes);
  if (rc == STORE_OK && e->cfg.on_commit) e->cfg.on_commit(e->cfg.ud);
  if (rc != STORE_OK) batch_lost(e, rc != STORE_ELEASE); /* before the waiters hear: their retry is a new batch */
  for (size_t i = 0; i < nw; i++) w[i].cb(w[i].ud, rc == STORE_OK);
  free(w);
  return rc == STORE_OK ? 0 : -1;
}

/* A commit sent without waiting (store_commit_start) whose answer is still
 * to come: the loop goes on (network, timers, the model's streams) while
 * PostgreSQL answers; its socket's readiness brings the answer in. Any
 * store call meanwhile waits for it first (store.c), and the next commit
 * reports it before anything else. */
struct inflight {
  int64_t no; /* the batch's number */
  note *notes;
  size_t nnotes;
  waiter *waiters;
  size_t nwaiters;
  answer_wait *wait;
};

static int inflight_done(engine *e, int rc) {
  struct inflight *f = e->inflight;
  e->inflight = NULL;
  answer_wait_end(f->wait);
  int done = commit_done(e, rc, f->no, f->notes, f->nnotes, f->waiters, f->nwaiters);
  free(f);
  if (e->due_after_commit) { /* a dispatch waited for this answer (dispatch.c) */
    e->due_after_commit = 0;
    tasks_arm(e, util_now_ms());
  }
  return done;
}

static void on_commit_answer(void *ud, int rc) {
  engine *e = ud;
  if (!e->inflight) return;
  e->inflight->wait = NULL; /* it ended itself */
  inflight_done(e, rc);
}

/* The commit on its way is answered (waiting for it unless nowait): 0 when
 * there was none or it committed, -1 when it failed, 1 when it is still on
 * its way (nowait). */
static int settle_inflight(engine *e, int nowait) {
  if (!e->inflight) return 0;
  int rc = nowait ? store_commit_poll(e->st) : store_commit_wait(e->st);
  if (rc == STORE_PENDING) return 1;
  return inflight_done(e, rc);
}

/* Commits the open batch: at once (engine_commit), or sent without waiting
 * for the answer (the loop's group commit). */
static int commit_batch(engine *e, int nowait) {
  if (nowait && e->flight) return 0; /* a dispatch's read is on its way in this batch: it commits after it */
  int prev = settle_inflight(e, nowait);
  if (prev != 0) return prev > 0 ? 0 : -1; /* a lost batch took the open one with it */
  if (!store_in_txn(e->st) && !store_batch_failed(e->st)) {
    if (e->nwaiters) tell_waiters(e, 1); /* they wrote nothing, or it is committed */
    return 0;
  }
  crash_point("commit.before");
  note *notes = e->notes;
  size_t nnotes = e->nnotes;
  waiter *w = e->waiters;
  size_t nw = e->nwaiters;
  e->notes = NULL;
  e->nnotes = e->capnotes = 0;
  e->waiters = NULL;
  e->nwaiters = e->capwaiters = 0;
  int64_t no = e->batch++; /* what is written from now on waits for the next commit */
  if (e->cfg.on_commit_stages) e->commit_began = uv_hrtime();
  int rc = nowait ? store_commit_start(e->st) : store_commit(e->st);
  if (rc != STORE_PENDING) return commit_done(e, rc, no, notes, nnotes, w, nw);
  struct inflight *f = util_xcalloc(1, sizeof *f);
  *f = (struct inflight){no, notes, nnotes, w, nw, NULL};
  e->inflight = f;
  f->wait = answer_wait_start(&e->loop, e->st, on_commit_answer, e);
  return f->wait ? 0 : settle_inflight(e, 0); /* cannot wait on it: wait here */
}

int engine_commit(engine *e) { return commit_batch(e, 0); }

/* The backoff is over, or the store is writable again. */
static void on_retry_timer(uv_timer_t *t) {
  engine *e = t->data;
  if (e->on_retry) e->on_retry(e);
}

void batch_commit_nowait(engine *e) { commit_batch(e, 1); }

/* At engine_free: the commit on its way is answered, and no one is told. */
void batch_abandon(engine *e) {
  e->due_after_commit = 0;
  if (!e->inflight) return;
  store_commit_wait(e->st);
  for (size_t i = 0; i < e->inflight->nnotes; i++) free_note(&e->inflight->notes[i]);
  free(e->inflight->notes);
  free(e->inflight->waiters);
  answer_wait_end(e->inflight->wait);
  free(e->inflight);
  e->inflight = NULL;
}

/* At engine_free, once the loop is closed: the notes, waiters and marks. */
void batch_free(engine *e) {
  forget_unsettled(e);
  drop_notes(e);
  free(e->notes);
  free(e->waiters);
}

/* ------------------------------------------------------------- leases --- */

void engine_touch(engine *e, const char *id) {
  if (e->dispatching || e->touching) strmap_put(&e->touched, id, (void *)1);
}

int engine_owns(engine *e, const char *id) {
  if (!e->shared) return 1;
  if (!store_lease_held(e->st, id)) {
    int64_t now = util_now_ms();
    if (store_lease_claim(e->st, id, e->owner, now, now + e->lease_ms) != 1) return 0;
  }
  store_lease_fence(e->st, id);
  return 1;
}
