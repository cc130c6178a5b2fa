/* sqlite_tasks: the SQLite store's statements of tasks and buffered
 * signals. sqlite.c has the overview. */
#include "sqlite_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- tasks ---- */

int sq_task_put(store *st_, const char *wf_id, const char *kind, int64_t seq, int64_t run_at, int attempt,
                int64_t first_at, const char *owner, int64_t lease_until) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_TASK_PUT);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_text(s, st, 2, kind);
  sq_bind_int(s, st, 3, seq);
  sq_bind_int(s, st, 4, run_at);
  sq_bind_int(s, st, 5, attempt);
  sq_bind_int(s, st, 6, first_at);
  sq_bind_text(s, st, 7, owner);
  sq_bind_int(s, st, 8, lease_until);
  return sq_exec_write(s, st, "put task");
}

int sq_task_del(store *st_, const char *wf_id, const char *kind, int64_t seq) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_TASK_DEL);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_text(s, st, 2, kind);
  sq_bind_int(s, st, 3, seq);
  return sq_exec_write(s, st, "delete task");
}

int sq_task_take(store *st_, const char *wf_id, const char *kind, int64_t seq) {
  sq *s = (sq *)st_;
  if (sq_task_del(&s->base, wf_id, kind, seq) != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

int sq_task_release(store *st_, const char *owner) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_TASK_RELEASE);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, owner);
  return sq_exec_write(s, st, "release tasks");
}

int sq_task_del_wf(store *st_, const char *wf_id) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_TASK_DEL_WF);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  return sq_exec_write(s, st, "delete tasks");
}

static void read_task(sqlite3_stmt *st, task_row *t) {
  t->id = sqlite3_column_int64(st, 0);
  t->wf_id = sq_col_text(st, 1);
  t->kind = sq_col_text(st, 2);
  t->seq = sqlite3_column_int64(st, 3);
  t->run_at = sqlite3_column_int64(st, 4);
  t->attempt = sqlite3_column_int(st, 5);
  t->first_at = sqlite3_column_int64(st, 6);
  t->leased = sqlite3_column_int64(st, 7) > 0;
}

int sq_task_get(store *st_, const char *wf_id, const char *kind, int64_t seq, task_row *out) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_TASK_GET);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_text(s, st, 2, kind);
  sq_bind_int(s, st, 3, seq);
  int rc = sq_step(s, st);
  if (rc == SQLITE_ROW) {
    read_task(st, out);
    out->wf_id = out->kind = NULL; /* the row's text dies with the reset that ends the read */
  }
  sqlite3_reset(st);
  if (rc == SQLITE_ROW) return 1;
  return rc == SQLITE_DONE ? 0 : sq_fail(s, "get task");
}

int sq_task_due(store *st_, int64_t now, const char *owner, int limit, int unheld, store_task_cb cb, void *ud) {
  sq *s = (sq *)st_;
  (void)unheld; /* one worker: no lease to claim */
  /* Collect first: callbacks write to the store, which must not happen mid-scan. */
  sqlite3_stmt *st = sq_stmt(s, Q_TASK_DUE);
  if (!st) return STORE_ERR;
  sq_bind_int(s, st, 1, now);
  sq_bind_text(s, st, 2, owner);
  sq_bind_int(s, st, 3, limit);
  size_t n = 0, cap = 0;
  task_row *v = NULL;
  int rc;
  while ((rc = sq_step(s, st)) == SQLITE_ROW) {
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      v = util_xrealloc(v, cap * sizeof *v);
    }
    read_task(st, &v[n]);
    v[n].wf_id = util_strdup(v[n].wf_id);
    v[n].kind = util_strdup(v[n].kind);
    n++;
  }
  sqlite3_reset(st);
  int ret = rc == SQLITE_DONE ? STORE_OK : sq_fail(s, "due tasks");
  for (size_t i = 0; i < n; i++) {
    if (ret == STORE_OK && cb(ud, &v[i])) ret = 1;
    free((char *)v[i].wf_id);
    free((char *)v[i].kind);
  }
  free(v);
  return ret < 0 ? ret : STORE_OK;
}

int64_t sq_task_next_at(store *st_, const char *owner) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_TASK_NEXT);
  if (!st) return -1;
  sq_bind_text(s, st, 1, owner);
  int64_t v;
  return sq_query_int(s, st, -1, &v) == STORE_OK ? v : -2;
}

int sq_task_count(store *st_, const char *wf_id) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_TASK_COUNT);
  if (!st) return -1;
  sq_bind_text(s, st, 1, wf_id);
  int64_t v;
  return sq_query_int(s, st, 0, &v) == STORE_OK ? (int)v : -1;
}

/* ---- signals ---- */

/* The signal's row, by Q_SIG_PUT or Q_SIG_WAKE_PUT (their parameters alike). */
static int signal_insert(sq *s, int q, const char *wf_id, const char *name, const char *payload, int64_t time) {
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, q);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_text(s, st, 2, name);
  sq_bind_text(s, st, 3, payload);
  sq_bind_int(s, st, 4, time);
  return sq_exec_write(s, st, "put signal");
}

int sq_signal_put(store *st_, const char *wf_id, const char *name, const char *payload, int64_t time) {
  return signal_insert((sq *)st_, Q_SIG_PUT, wf_id, name, payload, time);
}

int sq_signal_wake(store *st_, const char *wf_id, const char *name, const char *payload, int64_t time) {
  sq *s = (sq *)st_;
  if (signal_insert(s, Q_SIG_WAKE_PUT, wf_id, name, payload, time) != STORE_OK) return STORE_ERR;
  sqlite3_stmt *st = sq_stmt(s, Q_SIG_WAKE_TASK);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_int(s, st, 2, time);
  return sq_exec_write(s, st, "put task");
}

int sq_signal_take(store *st_, const char *wf_id, const char *name, char **payload) {
  sq *s = (sq *)st_;
  *payload = NULL;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_SIG_FIND);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_text(s, st, 2, name);
  int rc = sq_step(s, st);
  if (rc != SQLITE_ROW) {
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : sq_fail(s, "find signal");
  }
  int64_t id = sqlite3_column_int64(st, 0);
  *payload = sq_col_dup(st, 1);
  sqlite3_reset(st);
  st = sq_stmt(s, Q_SIG_DEL);
  if (!st) return STORE_ERR;
  sq_bind_int(s, st, 1, id);
  if (sq_exec_write(s, st, "take signal") != STORE_OK) {
    free(*payload);
    *payload = NULL;
    return STORE_ERR;
  }
  return 1;
}

int sq_signal_has(store *st_, const char *wf_id, const char *name) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_SIG_FIND);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_text(s, st, 2, name);
  int rc = sq_step(s, st);
  sqlite3_reset(st);
  if (rc == SQLITE_ROW) return 1;
  return rc == SQLITE_DONE ? 0 : sq_fail(s, "find signal");
}

int sq_signal_count(store *st_, const char *wf_id) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_SIG_COUNT);
  if (!st) return -1;
  sq_bind_text(s, st, 1, wf_id);
  int64_t v;
  return sq_query_int(s, st, 0, &v) == STORE_OK ? (int)v : -1;
}

int sq_signal_del_wf(store *st_, const char *wf_id) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_SIG_DEL_WF);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  return sq_exec_write(s, st, "delete signals");
}
