/* sqlite_exec: running the SQLite store's statements (sqlite.c has the
 * overview): each prepared once and started clean, its parameters bound
 * (a failed bind is kept and stops it), its errors and their kinds, and
 * the batch: one write transaction, begun by the first write, committed or
 * rolled back whole. */
#include "sqlite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- plumbing ---- */

/* Records the error. Inside a batch any failure loses the batch: SQLite may
 * have rolled it back on its own (disk full, I/O error), and a batch with a
 * hole must never commit, so every later write fails at once (no piece of it
 * autocommits, none waits for the lock again) until store_rollback. The first
 * error is the one kept: it says why the batch was lost. */
int sq_fail(sq *s, const char *what) {
  int bind_failed = s->bind_rc != SQLITE_OK; /* the statement never ran: SQLite's own message is not about it */
  s->bind_rc = SQLITE_OK;
  if (s->failed) return STORE_ERR;
  /* a damaged page of the file is named as such (and is STORE_ECORRUPT):
   * a read it stops is an error, never a shorter answer */
  int code = bind_failed ? SQLITE_OK : sqlite3_errcode(s->db) & 0xff;
  int corrupt = code == SQLITE_CORRUPT || code == SQLITE_NOTADB;
  util_seterr(s->err, sizeof s->err, "%s: %s%s", what, bind_failed ? s->bind_err : sqlite3_errmsg(s->db),
              corrupt ? " (SQLite found a damaged page in the database file)" : "");
  if (s->in_txn) s->failed = 1;
  return corrupt ? STORE_ECORRUPT : STORE_ERR;
}

/* A read's error: as sq_fail, except that a damaged page read inside a batch
 * SQLite still holds open loses only that read (the workflow it belongs to
 * is stopped in that batch), not the batch. */
int sq_fail_read(sq *s, const char *what) {
  int keep = s->in_txn && !s->failed && s->bind_rc == SQLITE_OK && !sqlite3_get_autocommit(s->db) &&
             ((sqlite3_errcode(s->db) & 0xff) == SQLITE_CORRUPT);
  int rc = sq_fail(s, what);
  if (keep && rc == STORE_ECORRUPT) s->failed = 0;
  return rc;
}

/* ENGINE_STORE_FAIL: this write fails as a disk I/O error does, and SQLite's
 * rollback of the whole transaction is what happens with it. */
static int injected(sq *s, const char *what) {
  if (!store_fault_hit(what)) return 0;
  if (s->failed) return 1;
  util_seterr(s->err, sizeof s->err, "%s: disk I/O error (injected by ENGINE_STORE_FAIL)", what);
  if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  if (s->in_txn) s->failed = 1;
  return 1;
}

/* Keeps the first failed bind of the statement (see struct store): which
 * parameter, how big its value was (len: SIZE_MAX for a number), and why. */
void sq_bind_check(sq *s, int rc, int i, size_t len) {
  if (rc == SQLITE_OK || s->bind_rc != SQLITE_OK) return;
  s->bind_rc = rc;
  char size[96] = "";
  if (len != SIZE_MAX && (rc & 0xff) == SQLITE_TOOBIG)
    snprintf(size, sizeof size, " (%zu bytes; the store takes at most %d)", len,
             sqlite3_limit(s->db, SQLITE_LIMIT_LENGTH, -1));
  else if (len != SIZE_MAX)
    snprintf(size, sizeof size, " (%zu bytes)", len);
  snprintf(s->bind_err, sizeof s->bind_err, "cannot bind parameter %d%s: %s", i, size, sqlite3_errstr(rc));
}

void sq_bind_int(sq *s, sqlite3_stmt *st, int i, int64_t v) {
  sq_bind_check(s, sqlite3_bind_int64(st, i, v), i, SIZE_MAX);
}

void sq_bind_blob(sq *s, sqlite3_stmt *st, int i, const void *v, size_t n) {
  sq_bind_check(s, n > INT32_MAX ? SQLITE_TOOBIG : sqlite3_bind_blob(st, i, v, (int)n, SQLITE_TRANSIENT), i, n);
}

/* NULL binds SQL NULL (a column left empty on purpose). */
void sq_bind_text(sq *s, sqlite3_stmt *st, int i, const char *v) {
  int rc = v ? sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
  sq_bind_check(s, rc, i, v ? strlen(v) : 0);
}

/* sqlite3_step, unless a bind of this statement failed (then that error). */
int sq_step(sq *s, sqlite3_stmt *st) { return s->bind_rc != SQLITE_OK ? s->bind_rc : sqlite3_step(st); }

sqlite3_stmt *sq_stmt(sq *s, int q) {
  s->bind_rc = SQLITE_OK;
  if (!s->q[q] && sqlite3_prepare_v3(s->db, sq_sql[q], -1, SQLITE_PREPARE_PERSISTENT, &s->q[q], NULL) != SQLITE_OK) {
    sq_fail(s, "prepare");
    return NULL;
  }
  sqlite3_reset(s->q[q]);
  sqlite3_clear_bindings(s->q[q]);
  return s->q[q];
}

char *sq_col_dup(sqlite3_stmt *st, int i) {
  const unsigned char *t = sqlite3_column_text(st, i);
  return t ? util_strdup((const char *)t) : NULL;
}

const char *sq_col_text(sqlite3_stmt *st, int i) { return (const char *)sqlite3_column_text(st, i); }

/* Runs a write statement to completion. */
int sq_exec_write(sq *s, sqlite3_stmt *st, const char *what) {
  if (injected(s, what)) {
    sqlite3_reset(st);
    s->bind_rc = SQLITE_OK;
    return STORE_ERR;
  }
  int rc = sq_step(s, st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return sq_fail(s, what);
  s->writes++;
  return STORE_OK;
}

/* *out = the first column of the first row (dflt when NULL or no row). */
int sq_query_int(sq *s, sqlite3_stmt *st, int64_t dflt, int64_t *out) {
  *out = dflt;
  int rc = sq_step(s, st);
  if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) *out = sqlite3_column_int64(st, 0);
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : sq_fail(s, "query");
}

int sq_classify(int rc) {
  rc &= 0xff;
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return STORE_EBUSY;
  if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT) return STORE_ECORRUPT;
  return STORE_ERR;
}

/* ---- the batch ---- */

/* A head the batch moved, into its workflow's head row (chain_heads; chain_flush, at the commit). */
static int sq_chain_write(store *st_, const char *wf_id, int domain, const char *head, int64_t seq,
                          const char *base) {
  sq *s = (sq *)st_;
  /* an update of the row, which is there but for a workflow's first head:
   * the upsert tried its insert first (10.6 k instructions against 11.3 k) */
  for (int q = 0; q < 2; q++) {
    int which = domain ? (q ? Q_WF_DOM_HEAD_NEW : Q_WF_DOM_HEAD) : (q ? Q_WF_HIST_HEAD_NEW : Q_WF_HIST_HEAD);
    sqlite3_stmt *st = sq_stmt(s, which);
    if (!st) return STORE_ERR;
    int i = 1;
    sq_bind_text(s, st, i++, head);
    sq_bind_int(s, st, i++, seq);
    if (!domain) sq_bind_text(s, st, i++, base && *base ? base : NULL);
    sq_bind_text(s, st, i, wf_id);
    if (sq_exec_write(s, st, "write the chain's head") != STORE_OK) return STORE_ERR;
    if (sqlite3_changes(s->db) > 0) return STORE_OK;
  }
  return STORE_OK;
}

/* SQLite says whether a transaction is open (sqlite3_get_autocommit); in_txn
 * only remembers that this store began one, so a batch SQLite rolled back on
 * its own is noticed instead of being continued in autocommit mode. */
int sq_begin(store *st_) {
  sq *s = (sq *)st_;
  if (sq_batch_failed(&s->base)) {
    if (!s->failed) {
      util_seterr(s->err, sizeof s->err, "the transaction was rolled back by SQLite (%s)", sqlite3_errmsg(s->db));
      s->failed = 1;
    }
    return STORE_ERR;
  }
  if (!sqlite3_get_autocommit(s->db)) return STORE_OK;
  if (injected(s, "begin")) {
    s->failed = 1;
    return STORE_ERR;
  }
  int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    /* the writes that follow in this batch must not autocommit one by one */
    util_seterr(s->err, sizeof s->err, "begin: %s", sqlite3_errmsg(s->db));
    s->failed = 1;
    return sq_classify(sqlite3_extended_errcode(s->db));
  }
  s->in_txn = 1;
  return STORE_OK;
}

int sq_commit(store *st_) {
  sq *s = (sq *)st_;
  if (sq_batch_failed(&s->base)) {
    if (!s->failed) util_seterr(s->err, sizeof s->err, "commit: the transaction was rolled back by SQLite");
    sq_rollback(&s->base);
    return STORE_ERR;
  }
  if (!s->in_txn) return STORE_OK;
  /* the heads of the hash chains the batch moved, into their workflows' rows */
  if (chain_flush(&s->base, sq_chain_write) != STORE_OK || injected(s, "commit")) {
    sq_rollback(&s->base);
    return STORE_ERR;
  }
  int rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    sq_fail(s, "commit");
    sq_rollback(&s->base);
    return sq_classify(rc);
  }
  s->in_txn = 0;
  s->last_writes = s->writes;
  s->writes = 0;
  store_batch_ended(&s->base, 1);
  return STORE_OK;
}

int64_t sq_batch_writes(store *st_) {
  sq *s = (sq *)st_; return s->last_writes; }

/* Ends the batch, whatever state SQLite left it in; keeps store_errmsg. */
void sq_rollback(store *st_) {
  sq *s = (sq *)st_;
  if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  s->in_txn = 0;
  s->failed = 0;
  s->writes = 0;
  store_batch_ended(&s->base, 0);
}

int sq_in_txn(store *st_) {
  sq *s = (sq *)st_; return !sqlite3_get_autocommit(s->db); }

int sq_batch_failed(store *st_) {
  sq *s = (sq *)st_; return s->failed || (s->in_txn && sqlite3_get_autocommit(s->db)); }

int64_t sq_data_version(store *st_) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_DATA_VERSION);
  int64_t v;
  return st && sq_query_int(s, st, -1, &v) == STORE_OK ? v : -1;
}
