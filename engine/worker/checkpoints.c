/* checkpoints: SQLite's WAL copied into the database file off the commits'
 * path. SQLite's auto-checkpoint ran inside the commit that filled the WAL:
 * that commit, and a signal's answer waiting for it, took the checkpoint's
 * writes and syncs too (issue 40's stage table: about 1% of commits, p99's
 * place). Here a checkpoint runs on libuv's thread pool, on a connection of
 * its own (store_checkpoint, PASSIVE), once half of the store's bound is in
 * the WAL and not copied yet (and again for every eighth more committed
 * while it ran), when the loop pauses; the loop goes on committing
 * meanwhile. The store keeps the bound (STORE_WAL_MAX_FRAMES): past it, a
 * commit checkpoints inside itself as before. PostgreSQL has no WAL of the
 * store's: its stats read zero and nothing is started. */
#include "worker.h"

static void ckpt_work(uv_work_t *w) {
  engine *e = w->data;
  store_checkpoint(e->st, &e->ckpt_log, &e->ckpt_copied);
}

static void ckpt_after(uv_work_t *w, int status) {
  engine *e = w->data;
  e->ckpt_running = 0;
  e->ckpt_background += status == 0 && e->ckpt_copied > 0; /* one that copied nothing is not counted */
  /* what it copied counts only while the WAL it copied from is the current one */
  if (status == 0 && e->ckpt_restarts == e->wal_restarts) e->wal_copied = e->ckpt_copied;
}

static void ckpt_start(engine *e) {
  if (e->ckpt_running || e->stopping) return;
  e->ckpt_req.data = e;
  e->ckpt_restarts = e->wal_restarts;
  if (uv_queue_work(&e->loop, &e->ckpt_req, ckpt_work, ckpt_after) == 0) e->ckpt_running = 1;
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
