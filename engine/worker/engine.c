/* engine: the worker's loop. One libuv loop drives workflow VMs (runs.c),
 * activity attempts (attempts.c), due tasks and timers (dispatch.c) and the
 * worker's hooks (hooks.c). This file owns the loop's life (open, run, stop,
 * free), the group commit with the status notes it delivers, the handling of
 * a store that cannot be written (rollback, backoff, leases set right), and
 * the count of crashes that stops a workflow from crash-looping the engine. */
#include "worker.h"

#include "activity_modules.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crash.h"
#include "fatal.h"
#include "json.h"
#include "render.h"

void engine_log_err(engine *e, const char *what) {
  /* a lost batch is one incident, reported once when it is handled (batch_lost) */
  if (store_batch_failed(e->st)) return;
  render_line(stderr, 0, "engine: %s: %s", what, store_errmsg(e->st));
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

static void on_effects(uv_timer_t *t) { attempts_begin_deferred(t->data); }

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
  if (e->ndeferred) uv_timer_start(&e->effects_timer, on_effects, 0, 0);
}


/* ------------------------------------------------------------- commit --- */

static void on_store_retry(uv_timer_t *t);
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
    render_line(stderr, 0, "engine: cannot write to the store: %s; retrying with backoff (nothing is lost)",
                store_errmsg(e->st));
  }
  e->incident_failures++;
  e->failed_commit = 1;
  e->recovering = 1;
  e->backoff_ms = e->backoff_ms ? e->backoff_ms * 2 : BACKOFF_MIN_MS;
  if (e->backoff_ms > BACKOFF_MAX_MS) e->backoff_ms = BACKOFF_MAX_MS;
  tasks_disarm(e);
  uv_timer_start(&e->retry_timer, on_store_retry, (uint64_t)e->backoff_ms, 0);
}

/* The batch was rolled back: memory may be ahead of the log, and the log is
 * the truth. Cached runs go (a task, a signal or an attempt's outcome brings
 * each back, replayed from the log); an attempt in flight stays only if the
 * log still shows its command waiting, else it is abandoned (its command, or
 * the start of this attempt, was in the lost batch and comes again). */
static void batch_lost(engine *e, int incident) {
  store_rollback(e->st);
  drop_notes(e);
  /* what was not committed is gone: the log holds only durable results, and
   * an attempt kept below (its command is in the log) may begin */
  forget_unsettled(e);
  settle_batch(e, e->batch - 1);
  if (e->nwaiters) tell_waiters(e, 0);
  for (size_t i = 0; i < e->runs.cap; i++)
    if (STRMAP_LIVE(&e->runs, i)) run_free(e->runs.vals[i]);
  strmap_free(&e->runs);
  strmap_init(&e->runs);
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
  if (incident) {
    engine_store_incident(e);
  } else { /* a lease was lost, the store is fine: set the task leases right at once */
    e->recovering = 1;
    tasks_disarm(e);
    uv_timer_start(&e->retry_timer, on_store_retry, 1, 0);
  }
}

/* After a lost batch the leases in the log may not match the attempts in
 * memory: void every lease of this engine and lease the running attempts
 * again, committed at once; then dispatch as usual. */
static void on_store_retry(uv_timer_t *t) {
  engine *e = t->data;
  if (e->stopping) return;
  int bad = store_task_release(e->st, e->owner) != STORE_OK;
  for (size_t i = 0; i < e->attempts.cap && !bad; i++) {
    if (!STRMAP_LIVE(&e->attempts, i)) continue;
    attempt *a = e->attempts.vals[i];
    int64_t now = util_now_ms();
    int next = a->after_batch ? a->n : a->n + 1; /* a deferred one has not begun: the same attempt */
    bad = store_task_put(e->st, a->wf_id, "activity", a->seq, now, next, a->first_at, e->owner,
                         now + a->lease_ms) != STORE_OK;
  }
  e->recovering = 0;
  if (engine_commit(e) == 0) dispatch_due(e); /* a failure has re-armed the retry */
}

static void on_store_calm(uv_timer_t *t) {
  engine *e = t->data;
  render_line(stderr, 0, "engine: the store is writable again (%d failed attempt%s over %.1f s)",
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

void engine_dispatch_now(engine *e) { dispatch_due(e); }

int engine_begin_deferred(engine *e) {
  int n = (int)e->ndeferred;
  attempts_begin_deferred(e);
  return n;
}

void engine_watch_status(engine *e, void (*cb)(void *ud, const char *id, const char *status), void *ud) {
  e->status_watch = cb;
  e->status_watch_ud = ud;
}

/* What follows a commit's answer rc, with the notes and waiters of the batch
 * it committed (detached arrays, freed here): on success the notes are
 * delivered and the waiters told; on failure they go with the lost batch. */
static int commit_done(engine *e, int rc, int64_t no, note *notes, size_t nnotes, waiter *w, size_t nw) {
  if (rc == STORE_OK) settle_batch(e, no);
  if (rc == STORE_ELEASE) /* another worker runs that workflow now: it is not ours to write */
    render_line(stderr, 0, "engine: %s", store_errmsg(e->st));
  if (rc == STORE_OK) crash_point("commit.after");
  if (rc == STORE_OK && e->recovering) {
    /* writable again: set the leases right now rather than after the backoff */
    uv_timer_start(&e->retry_timer, on_store_retry, 1, 0);
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
  uv_poll_t *poll;
};

static int inflight_done(engine *e, int rc) {
  struct inflight *f = e->inflight;
  e->inflight = NULL;
  if (f->poll) uv_close((uv_handle_t *)f->poll, uvloop_free_handle);
  int done = commit_done(e, rc, f->no, f->notes, f->nnotes, f->waiters, f->nwaiters);
  free(f);
  return done;
}

static void on_commit_io(uv_poll_t *h, int status, int events) {
  (void)events;
  engine *e = h->data;
  if (!e->inflight) return;
  int rc = status < 0 ? store_commit_wait(e->st) : store_commit_poll(e->st);
  if (rc != STORE_PENDING) {
    inflight_done(e, rc);
    return;
  }
  int writable;
  store_commit_socket(e->st, &writable);
  uv_poll_start(h, UV_READABLE | (writable ? UV_WRITABLE : 0), on_commit_io);
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
  int rc = nowait ? store_commit_start(e->st) : store_commit(e->st);
  if (rc != STORE_PENDING) return commit_done(e, rc, no, notes, nnotes, w, nw);
  struct inflight *f = util_xcalloc(1, sizeof *f);
  *f = (struct inflight){no, notes, nnotes, w, nw, NULL};
  e->inflight = f;
  int writable, fd = store_commit_socket(e->st, &writable);
  f->poll = util_xcalloc(1, sizeof *f->poll);
  if (fd < 0 || uv_poll_init_socket(&e->loop, f->poll, fd) != 0) { /* cannot wait on it: wait here */
    free(f->poll);
    f->poll = NULL;
    return settle_inflight(e, 0);
  }
  f->poll->data = e;
  uv_poll_start(f->poll, UV_READABLE | (writable ? UV_WRITABLE : 0), on_commit_io);
  return 0;
}

int engine_commit(engine *e) { return commit_batch(e, 0); }

/* Group commit: everything written during this loop iteration lands in one
 * transaction, just before the loop blocks for I/O. A failed commit is
 * retried with backoff (engine_store_incident), never half applied. */
static void on_prepare(uv_prepare_t *p) { commit_batch(p->data, 1); }

static void on_external(void *ud) { dispatch_due(ud); }

static void on_signal(uv_signal_t *s, int signum) {
  (void)signum;
  engine_stop(s->data);
}

/* ------------------------------------------------------------- leases --- */

void engine_touch(engine *e, const char *id) {
  if (e->dispatching) strmap_put(&e->touched, id, (void *)1);
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

/* Another worker took a workflow over (this one was cut off, or stalled past
 * its lease): what runs of it here stops at once, without a write. */
static void on_lease_lost(void *ud, const char *id) {
  engine *e = ud;
  render_line(stderr, 0, "engine: lost the lease of workflow %s: another worker runs it now; stopped here", id);
  wfrun *r = strmap_get(&e->runs, id);
  if (r) run_evict(r);
  for (size_t i = 0; i < e->attempts.cap; i++) {
    if (!STRMAP_LIVE(&e->attempts, i)) continue;
    attempt *a = e->attempts.vals[i];
    if (strcmp(a->wf_id, id) != 0) continue;
    strmap_del(&e->attempts, a->key);
    actvm_cancel(a->call);
    attempt_free(a);
  }
}

/* The heartbeat: every lease of this worker is extended by lease_ms, three
 * times a lease, in the batch this loop iteration commits. */
static void on_lease_timer(uv_timer_t *t) {
  engine *e = t->data;
  if (e->stopping || e->recovering) return;
  if (store_lease_renew(e->st, e->owner, util_now_ms() + e->lease_ms, on_lease_lost, e) != STORE_OK)
    engine_log_err(e, "renew leases");
}

/* -------------------------------------------------------------- setup --- */

int engine_open(engine **out, const engine_config *cfg, char *err, size_t errlen) {
  *out = NULL;
  engine *e = util_xcalloc(1, sizeof *e);
  e->cfg = *cfg;
  e->lua_dir = util_strdup(cfg->lua_dir ? cfg->lua_dir : engine_lua_dir());
  snprintf(e->owner, sizeof e->owner, "%d-%016llx", (int)getpid(), (unsigned long long)util_random64());
  wfvm_config_default(&e->vmcfg);
  const char *mc = getenv("ENGINE_MAX_CACHED_RUNS");
  e->max_cached = mc && atoi(mc) >= 0 ? (size_t)atoi(mc) : 256;
  strmap_init(&e->runs);
  strmap_init(&e->attempts);
  strmap_init(&e->touched);
  strmap_init(&e->bytecode);
  strmap_init(&e->scripts);
  strmap_init(&e->unsettled);
  e->batch = 1;
  int uv = uv_loop_init(&e->loop);
  if (uv != 0) {
    util_seterr(err, errlen, "cannot start the event loop: %s", uv_strerror(uv));
    free(e->lua_dir);
    free(e);
    return -1;
  }
  if (store_open(cfg->db_path, 0, &e->st, err, errlen) != STORE_OK) {
    uv_loop_close(&e->loop);
    free(e->lua_dir);
    free(e);
    return -1;
  }
  e->shared = store_shared(e->st);
  const char *lm = getenv("ENGINE_LEASE_MS");
  e->lease_ms = lm && atoll(lm) >= 100 ? atoll(lm) : 10000;
  const char *ml = getenv("ENGINE_MAX_LEASES");
  e->max_leases = ml && atoll(ml) > 0 ? atoll(ml) : 256;
  e->act = actvm_new(&e->loop, e->lua_dir, activity_modules, err, errlen);
  if (!e->act) {
    engine_free(e);
    return -1;
  }
  actvm_set_history(e->act, attempt_history_json, e);
  actvm_observer obs = {cfg->on_live, cfg->on_usage, cfg->ud};
  actvm_set_observer(e->act, &obs);
  if ((uv = uv_prepare_init(&e->loop, &e->prep)) != 0 || (uv = uv_timer_init(&e->loop, &e->task_timer)) != 0 ||
      (uv = uv_timer_init(&e->loop, &e->retry_timer)) != 0 ||
      (uv = uv_timer_init(&e->loop, &e->lease_timer)) != 0 || (uv = uv_timer_init(&e->loop, &e->effects_timer)) != 0 ||
      (uv = uv_signal_init(&e->loop, &e->sigint)) != 0 ||
      (uv = uv_signal_init(&e->loop, &e->sigterm)) != 0) {
    util_seterr(err, errlen, "cannot start the event loop: %s", uv_strerror(uv));
    engine_free(e);
    return -1;
  }
  e->prep.data = e->task_timer.data = e->retry_timer.data = e->sigint.data = e->sigterm.data = e->lease_timer.data =
      e->effects_timer.data = e;
  dispatch_init(e);
  hooks_open(e);
  *out = e;
  return 0;
}

/* ------------------------------------------------------ crash loops --- */

/* Crashes of the engine in a row, while running one workflow's code with no
 * progress of that workflow in between, after which it fails instead. */
#define ENGINE_CRASH_LIMIT 3

/* The previous worker died of a crash while running a workflow's code (its
 * VM or one of its activities; see fatal.h): count it against that workflow.
 * The count (meta "crashes:ID" = "owner run last_seq n") starts again when the
 * run has moved on since the last crash; at ENGINE_CRASH_LIMIT the workflow
 * fails with EngineCrash, so recovery does not crash the engine forever. */
static void recover_crashed(engine *e, const char *note) {
  char owner[64], id[256], what[700];
  if (!fatal_read_note(note, owner, sizeof owner, id, sizeof id, what, sizeof what)) return;
  wf_row w;
  int found = store_wf_get(e->st, id, &w);
  if (found == 1 && !engine_status_terminal(w.status)) {
    char key[300], *prev = NULL, pown[64] = "";
    long long prun = -1, pat = -1;
    int n = 0;
    snprintf(key, sizeof key, "crashes:%s", id);
    if (store_meta_get(e->st, key, &prev) == 1) sscanf(prev, "%63s %lld %lld %d", pown, &prun, &pat, &n);
    free(prev);
    int64_t at = store_hist_max_seq(e->st, id, w.run);
    if (strcmp(pown, owner) != 0) { /* not counted yet (a crash right after counting leaves the note) */
      n = prun == w.run && pat == at ? n + 1 : 1;
      render_line(stderr, 0, "engine: the engine crashed (%s) while running workflow %s (%d of %d in a row)", what, id,
                  n, ENGINE_CRASH_LIMIT);
      char val[160];
      snprintf(val, sizeof val, "%s %lld %lld %d", owner, (long long)w.run, (long long)at, n);
      if (store_meta_put(e->st, key, n >= ENGINE_CRASH_LIMIT ? NULL : val) != STORE_OK)
        engine_log_err(e, "crash count");
      if (n >= ENGINE_CRASH_LIMIT) {
        char *msg = util_fmt("the engine crashed %d times in a row while running this workflow's code, with no "
                             "progress in between (last: %s); failed so that it does not crash the engine again",
                             n, what);
        char *q = json_quote(msg);
        char *err = util_fmt("{\"message\":%s,\"type\":\"EngineCrash\"}", q);
        wfrun *r = run_detached(e, id);
        if (r) run_finish(r, "failed", "WorkflowFailed", NULL, err);
        free(err);
        free(q);
        free(msg);
      }
    }
  }
  if (found == 1) wf_row_free(&w);
  if (engine_commit(e) == 0) fatal_clear_note(note);
}

int engine_run(engine *e) {
  /* a crash while a workflow's code runs leaves a note naming it (fatal.h) */
  /* beside the database; for a URL, in the data directory (engine_data_dir) */
  char dir[PATH_MAX];
  char *note = !store_is_url(store_path(e->st)) ? util_fmt("%s.crash", store_path(e->st))
               : engine_data_dir(store_path(e->st), dir) == 0 ? util_fmt("%s/engine.crash", dir)
                                                             : util_strdup("engine.crash");
  recover_crashed(e, note);
  fatal_arm(note, e->owner);
  free(note);
  int uv;
  if ((uv = uv_prepare_start(&e->prep, on_prepare)) != 0 || (uv = uv_signal_start(&e->sigint, on_signal, SIGINT)) != 0 ||
      (uv = uv_signal_start(&e->sigterm, on_signal, SIGTERM)) != 0) {
    render_line(stderr, 0, "engine: cannot start the event loop: %s", uv_strerror(uv));
    fatal_disarm();
    return -1;
  }
  e->watch = dbwatch_start(&e->loop, e->st, on_external, e);
  if (e->shared) uv_timer_start(&e->lease_timer, on_lease_timer, (uint64_t)e->lease_ms / 3, (uint64_t)e->lease_ms / 3);
  dispatch_due(e); /* recovery: everything due, including attempts a crash cut short */
  engine_commit(e);
  hooks_start(e); /* the Lua library's own start-up work: sandbox sweep, policies */
  if (!e->stopping) uv_run(&e->loop, UV_RUN_DEFAULT);
  engine_commit(e);
  /* a clean stop hands this worker's workflows to the others at once */
  if (e->shared && !store_batch_failed(e->st) && store_lease_release(e->st, e->owner, NULL) == STORE_OK)
    engine_commit(e);
  fatal_disarm();
  return e->failed_commit ? -1 : 0;
}

void engine_stop(engine *e) {
  e->stopping = 1;
  uv_stop(&e->loop);
}

store *engine_store(engine *e) { return e->st; }
uv_loop_t *engine_loop(engine *e) { return &e->loop; }

void engine_free(engine *e) {
  if (!e) return;
  if (e->inflight) { /* answered, and no one is told any more */
    store_commit_wait(e->st);
    for (size_t i = 0; i < e->inflight->nnotes; i++) free_note(&e->inflight->notes[i]);
    free(e->inflight->notes);
    free(e->inflight->waiters);
    if (e->inflight->poll) uv_close((uv_handle_t *)e->inflight->poll, uvloop_free_handle);
    free(e->inflight);
    e->inflight = NULL;
  }
  for (size_t i = 0; i < e->attempts.cap; i++) {
    if (!STRMAP_LIVE(&e->attempts, i)) continue;
    attempt *a = e->attempts.vals[i];
    actvm_cancel(a->call);
    attempt_free(a);
  }
  strmap_free(&e->attempts);
  attempts_clear_deferred(e);
  free(e->deferred);
  forget_unsettled(e);
  strmap_free(&e->touched);
  for (size_t i = 0; i < e->runs.cap; i++)
    if (STRMAP_LIVE(&e->runs, i)) run_free(e->runs.vals[i]);
  strmap_free(&e->runs);
  run_clear_codecache(e);
  strmap_free(&e->bytecode);
  strmap_free(&e->scripts);
  if (e->watch) dbwatch_stop(e->watch);
  hooks_free(e);
  actvm_free(e->act); /* closes its own handles (HTTP) while the loop still runs */
  uvloop_drain(&e->loop);
  drop_notes(e);
  free(e->notes);
  free(e->waiters); /* a client still waiting is gone with the loop */
  store_close(e->st);
  free(e->lua_dir);
  free(e);
}

