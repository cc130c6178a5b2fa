/* sqlite_tables: whole tables of the SQLite store, for engine migrate
 * (store_table_*): store_table_sql's statements, each column bound and read
 * by its type. sqlite.c has the overview. */
#include "sqlite_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- whole tables (engine migrate) ---- */

static sqlite3_stmt *table_stmt(sq *s, const store_table *t, store_table_stmt what) {
  s->bind_rc = SQLITE_OK;
  int ti = (int)(t - store_tables);
  if (ti < 0 || ti >= STORE_TABLES_MAX) {
    util_seterr(s->err, sizeof s->err, "%s: not one of the store's tables", t->name);
    return NULL;
  }
  sqlite3_stmt **st = &s->tq[ti][what];
  if (!*st) {
    char *sql = store_table_sql(t, what, 0);
    int rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
    free(sql);
    if (rc != SQLITE_OK) {
      sq_fail(s, t->name);
      return NULL;
    }
  }
  sqlite3_reset(*st);
  sqlite3_clear_bindings(*st);
  return *st;
}

static void bind_value(sq *s, sqlite3_stmt *st, int i, const store_value *v) {
  switch (v->type) {
  case STORE_V_NULL: sq_bind_check(s, sqlite3_bind_null(st, i), i, SIZE_MAX); break;
  case STORE_V_INT: sq_bind_int(s, st, i, v->i); break;
  case STORE_V_REAL: sq_bind_check(s, sqlite3_bind_double(st, i, v->r), i, SIZE_MAX); break;
  case STORE_V_TEXT:
    sq_bind_check(s, v->n > INT32_MAX ? SQLITE_TOOBIG : sqlite3_bind_text(st, i, v->p, (int)v->n, SQLITE_TRANSIENT), i,
               v->n);
    break;
  case STORE_V_BLOB: sq_bind_blob(s, st, i, v->p, v->n); break;
  }
}

/* Column i of the row st stands on, as t's type says (a NULL is NULL). */
static store_value read_value(sqlite3_stmt *st, const store_table *t, int i) {
  store_value v = {STORE_V_NULL, 0, 0, NULL, 0};
  if (sqlite3_column_type(st, i) == SQLITE_NULL) return v;
  switch (t->types[i]) {
  case 'i': v.type = STORE_V_INT; v.i = sqlite3_column_int64(st, i); break;
  case 'r': v.type = STORE_V_REAL; v.r = sqlite3_column_double(st, i); break;
  case 'b':
    v.type = STORE_V_BLOB;
    v.p = sqlite3_column_blob(st, i);
    v.n = (size_t)sqlite3_column_bytes(st, i);
    if (!v.p) v.p = "";
    break;
  default:
    v.type = STORE_V_TEXT;
    v.p = (const char *)sqlite3_column_text(st, i);
    v.n = (size_t)sqlite3_column_bytes(st, i);
    if (!v.p) v.p = "";
  }
  return v;
}

int sq_table_page(store *st_, const store_table *t, const store_value *after, int limit, store_row_cb cb,
                  void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = table_stmt(s, t, after ? STORE_TABLE_AFTER : STORE_TABLE_FIRST);
  if (!st) return STORE_ERR;
  int np = 0;
  if (after)
    for (; np < t->nkey; np++) bind_value(s, st, np + 1, &after[np]);
  sq_bind_int(s, st, np + 1, limit);
  store_value row[32];
  int n = 0, rc;
  while ((rc = sq_step(s, st)) == SQLITE_ROW) {
    for (int i = 0; i < t->ncolumns && i < 32; i++) row[i] = read_value(st, t, i);
    n++;
    if (cb(ud, row)) break;
  }
  int ok = rc == SQLITE_ROW || rc == SQLITE_DONE;
  sqlite3_reset(st);
  return ok ? n : sq_fail(s, t->name);
}

int sq_table_insert(store *st_, const store_table *t, const store_value *row, int replace) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = table_stmt(s, t, replace ? STORE_TABLE_REPLACE : STORE_TABLE_INSERT);
  if (!st) return STORE_ERR;
  for (int i = 0; i < t->ncolumns; i++) bind_value(s, st, i + 1, &row[i]);
  return sq_exec_write(s, st, t->name);
}

int64_t sq_table_count(store *st_, const store_table *t) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = table_stmt(s, t, STORE_TABLE_COUNT);
  if (!st) return STORE_ERR;
  int rc = sq_step(s, st);
  int64_t n = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_reset(st);
  return n < 0 ? sq_fail(s, t->name) : n;
}

int sq_table_finish(store *st_, const store_table *t) {
  (void)st_, (void)t; /* SQLite's next rowid is past the largest one already */
  return STORE_OK;
}
