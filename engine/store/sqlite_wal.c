/* sqlite_wal: copying SQLite's WAL into the database file (a checkpoint)
 * off the commits' path. SQLite's own auto-checkpoint ran inside the commit
 * that filled the WAL to 1,000 pages: that commit, and whatever waited for
 * it (a signal's answer), took the checkpoint's writes and syncs too. Here a
 * commit checkpoints inside itself only at that bound; the worker copies
 * the WAL from half of it on another thread (store_checkpoint, scheduled by
 * worker/checkpoints.c). */
#include "sqlite_internal.h"

#include <stdio.h>
#include <time.h>

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Called by SQLite after each commit to the WAL, in place of its default
 * auto-checkpoint hook. This is the bound, for when the background cannot
 * keep up (a load that never pauses leaves the WAL never wholly copied, so
 * it never starts over) or no worker runs: a commit that leaves
 * STORE_WAL_MAX_FRAMES in it checkpoints inside it, as SQLite's own hook did
 * at that size (PASSIVE: what the background copied is not copied again).
 * Timed, for store_wal_stats. */
int sq_on_wal_commit(void *ud, sqlite3 *db, const char *name, int frames) {
  sq *s = ud;
  s->wal_frames = frames;
  s->commit_checkpoint_ns = 0;
  if (frames >= STORE_WAL_MAX_FRAMES) {
    int64_t t0 = mono_ns();
    sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    s->commit_checkpoint_ns = mono_ns() - t0;
  }
  return SQLITE_OK;
}

void sq_wal_stats(store *st_, int64_t *frames, int64_t *checkpoint_ns) {
  sq *s = (sq *)st_;
  *frames = s->wal_frames;
  *checkpoint_ns = s->commit_checkpoint_ns;
}

/* A PASSIVE checkpoint on a connection of its own, so that it can run on
 * another thread while the store's connection commits: it copies the frames
 * committed when it began, never waits for the writer and never blocks it
 * (SQLite serializes checkpointers itself: one running elsewhere makes this
 * one return SQLITE_BUSY at once). Committed data is never at risk: frames
 * are copied, synced (PRAGMA synchronous as the store's), and only then
 * marked copied; a crash halfway leaves the WAL as it was. The WAL starts
 * over at the next commit once it is wholly copied and no reader needs it. */
int sq_checkpoint(store *st_, int64_t *log, int64_t *copied) {
  sq *s = (sq *)st_;
  *log = *copied = 0;
  if (!sqlite3_threadsafe()) return STORE_ERR; /* no second thread in this build of SQLite */
  if (!s->ckpt_db) {
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA synchronous=%s", s->sync);
    if (sqlite3_open_v2(s->path, &s->ckpt_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK ||
        sqlite3_exec(s->ckpt_db, pragma, NULL, NULL, NULL) != SQLITE_OK) {
      sqlite3_close(s->ckpt_db);
      s->ckpt_db = NULL;
      return STORE_ERR;
    }
  }
  int nlog = 0, nckpt = 0;
  int rc = sqlite3_wal_checkpoint_v2(s->ckpt_db, NULL, SQLITE_CHECKPOINT_PASSIVE, &nlog, &nckpt);
  *log = nlog > 0 ? nlog : 0;
  *copied = nckpt > 0 ? nckpt : 0;
  return rc == SQLITE_OK ? STORE_OK : rc == SQLITE_BUSY ? STORE_EBUSY : STORE_ERR;
}
