/* checkpoints: SQLite's WAL copied into the database file off the commits'
 * path. SQLite's auto-checkpoint ran inside the commit that filled the WAL:
 * that commit, and a signal's answer waiting for it, took the checkpoint's
 * writes and syncs too (issue 40's stage table: about 1% of commits, p99's
 * place). Here a checkpoint runs on a thread of its own, on a connection
 * of its own (store_checkpoint, PASSIVE), once half of the store's bound is in
 * the WAL and not copied yet (and again for every eighth more committed
 * while it ran), when the loop pauses; the loop goes on committing
 * meanwhile. The store keeps the bound (STORE_WAL_MAX_FRAMES): past it, a
 * commit checkpoints inside itself as before. PostgreSQL has no WAL of the
 * store's: its stats read zero and nothing is started. */
#include "worker.h"

#include "log.h"

/* The thread: one checkpoint per request, until asked to quit. Its own
 * thread, started at the first one, not libuv's pool (four threads, for one
 * checkpoint at a time). */
static void ckpt_main(void *arg) {
  engine *e = arg;
  uv_mutex_lock(&e->ckpt_mu);
  for (;;) {
    while (!e->ckpt_asked && !e->ckpt_quit) uv_cond_wait(&e->ckpt_cv, &e->ckpt_mu);
    if (e->ckpt_quit) break;
    e->ckpt_asked = 0;
    uv_mutex_unlock(&e->ckpt_mu);
    int64_t log = 0, copied = 0;
    int rc = store_checkpoint(e->st, &log, &copied);
    uv_mutex_lock(&e->ckpt_mu);
    e->ckpt_copied = copied;
    e->ckpt_rc = rc;
    uv_async_send(&e->ckpt_done);
  }
  uv_mutex_unlock(&e->ckpt_mu);
}

static void on_ckpt_done(uv_async_t *h) {
  engine *e = h->data;
  uv_mutex_lock(&e->ckpt_mu);
  int rc = e->ckpt_rc;
  int64_t copied = e->ckpt_copied;
  uv_mutex_unlock(&e->ckpt_mu);
  if (!e->ckpt_running) return; /* a second send of the same answer */
  e->ckpt_running = 0;
  e->ckpt_background += rc == STORE_OK && copied > 0; /* one that copied nothing is not counted */
  /* what it copied counts only while the WAL it copied from is the current one */
  if (rc == STORE_OK && e->ckpt_restarts == e->wal_restarts) e->wal_copied = copied;
}

/* The thread, started at the first checkpoint: 0 when it runs. When it
 * cannot be started, commits checkpoint inside themselves at the bound, as
 * SQLite's own auto-checkpoint did. */
static int ckpt_thread(engine *e) {
  if (e->ckpt_thread) return e->ckpt_thread > 0 ? 0 : -1;
  e->ckpt_thread = -1;
  if (uv_mutex_init(&e->ckpt_mu) != 0) return -1;
  if (uv_cond_init(&e->ckpt_cv) != 0) {
    uv_mutex_destroy(&e->ckpt_mu);
    return -1;
  }
  int rc = uv_async_init(&e->loop, &e->ckpt_done, on_ckpt_done);
  if (rc == 0) {
    e->ckpt_done.data = e;
    rc = uv_thread_create(&e->ckpt_tid, ckpt_main, e);
    if (rc != 0) uv_close((uv_handle_t *)&e->ckpt_done, NULL);
  }
  if (rc != 0) {
    log_msg(LOGL_WARNING, "WAL checkpoints run inside commits: cannot start their thread: %s", uv_strerror(rc));
    uv_cond_destroy(&e->ckpt_cv);
    uv_mutex_destroy(&e->ckpt_mu);
    return -1;
  }
  e->ckpt_thread = 1;
  return 0;
}

static void ckpt_start(engine *e) {
  if (e->ckpt_running || e->stopping || ckpt_thread(e) != 0) return;
  e->ckpt_restarts = e->wal_restarts;
  e->ckpt_running = 1;
  uv_mutex_lock(&e->ckpt_mu);
  e->ckpt_asked = 1;
  uv_cond_signal(&e->ckpt_cv);
  uv_mutex_unlock(&e->ckpt_mu);
}

void checkpoints_stop(engine *e) {
  if (e->ckpt_thread <= 0) return;
  uv_mutex_lock(&e->ckpt_mu);
  e->ckpt_quit = 1;
  uv_cond_signal(&e->ckpt_cv);
  uv_mutex_unlock(&e->ckpt_mu);
  uv_thread_join(&e->ckpt_tid);
  uv_cond_destroy(&e->ckpt_cv);
  uv_mutex_destroy(&e->ckpt_mu);
  e->ckpt_thread = 0; /* the async handle is closed with the loop's others */
}

static void on_ckpt_idle(uv_timer_t *t) { ckpt_start(t->data); }

/* A checkpoint that commits overtake does not leave the WAL wholly copied,
 * so the WAL does not start over: one begins once the loop has committed
 * nothing for CKPT_IDLE_MS (every commit puts it off), or at once when
 * three quarters of the bound are not copied (a load that never pauses). */
#define CKPT_IDLE_MS 2

void checkpoints_after_commit(engine *e) {
  int64_t frames, ns;
  store_wal_stats(e->st, &frames, &ns);
  e->ckpt_in_commit += ns > 0;
  if (frames < e->wal_frames) { /* the WAL started over: nothing of it is copied */
    e->wal_restarts++;
    e->wal_copied = 0;
  }
  e->wal_frames = frames;
  /* the first at half the bound; then, when commits came in while it ran,
   * every eighth more */
  int64_t due = e->wal_copied ? STORE_WAL_MAX_FRAMES / 8 : STORE_WAL_MAX_FRAMES / 2;
  if (e->ckpt_running || e->stopping || frames - e->wal_copied < due) return;
  if (frames - e->wal_copied >= STORE_WAL_MAX_FRAMES * 3 / 4) ckpt_start(e);
  else uv_timer_start(&e->ckpt_timer, on_ckpt_idle, CKPT_IDLE_MS, 0);
}

void engine_wal_checkpoints(engine *e, int64_t *background, int64_t *in_commit) {
  *background = e->ckpt_background;
  *in_commit = e->ckpt_in_commit;
}

int checkpoints_init(engine *e) {
  e->ckpt_timer.data = e;
  return uv_timer_init(&e->loop, &e->ckpt_timer);
}
