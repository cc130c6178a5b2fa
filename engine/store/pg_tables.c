/* pg_tables: whole tables of the PostgreSQL store, for engine migrate
 * (store_table_*): store_table_sql's statements, each column bound and read
 * by its type. pg.c has the overview. */
#include "pg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- whole tables (engine migrate) ---- */

/* Runs statement what of table t with the bound parameters. */
static PGresult *table_run(pg *s, const store_table *t, store_table_stmt what) {
  int ti = (int)(t - store_tables);
  if (ti < 0 || ti >= STORE_TABLES_MAX) {
    util_seterr(s->err, sizeof s->err, "%s: not one of the store's tables", t->name);
    return NULL;
  }
  char name[24];
  snprintf(name, sizeof name, "t%d_%d", ti, (int)what);
  char *sql = store_table_sql(t, what, 1);
  PGresult *r = pq_exec(s, -1, name, sql, &s->table_prepared[ti][what], 0, t->name);
  free(sql);
  return r;
}

static void bind_value(pg *s, const store_value *v) {
  switch (v->type) {
  case STORE_V_NULL: pg_bind_text(s, NULL); break;
  case STORE_V_INT: pg_bind_int(s, v->i); break;
  case STORE_V_REAL: pg_bind_double(s, v->r); break;
  case STORE_V_TEXT:
    /* a text parameter ends at its NUL: one inside the value would cut it */
    if (memchr(v->p, 0, v->n)) pg_bind_fail(s, v->n, "a NUL byte in text (PostgreSQL's text cannot hold one)");
    size_t fn;
    char *fixed = util_utf8_repair(v->p, v->n, &fn);
    if (fixed) /* a copy is exact or it stops: not made U+FFFD as pg_bind_text would */
      pg_bind_fail(s, v->n, "text that is not UTF-8 (PostgreSQL's text holds nothing else)");
    free(fixed);
    pg_bind_text(s, v->p);
    break;
  case STORE_V_BLOB: pg_bind_blob(s, v->p, v->n); break;
  }
}

static int hexval(int c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int pg_table_page(store *st_, const store_table *t, const store_value *after, int limit, store_row_cb cb,
                  void *ud) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  if (after)
    for (int i = 0; i < t->nkey; i++) bind_value(s, &after[i]);
  pg_bind_int(s, limit);
  PGresult *r = table_run(s, t, after ? STORE_TABLE_AFTER : STORE_TABLE_FIRST);
  if (!r) return STORE_ERR;
  int n = PQntuples(r), done = 0;
  store_value row[32];
  unsigned char *blobs[32] = {0};
  for (int k = 0; k < n && !done; k++) {
    for (int i = 0; i < t->ncolumns && i < 32; i++) {
      store_value v = {STORE_V_NULL, 0, 0, NULL, 0};
      if (!PQgetisnull(r, k, i)) {
        const char *text = PQgetvalue(r, k, i);
        switch (t->types[i]) {
        case 'i': v.type = STORE_V_INT; v.i = strtoll(text, NULL, 10); break;
        case 'r': v.type = STORE_V_REAL; v.r = strtod(text, NULL); break;
        case 'b': { /* bytea's text form: \x and two hex digits a byte */
          size_t len = (size_t)PQgetlength(r, k, i), m = len > 2 ? (len - 2) / 2 : 0;
          unsigned char *b = util_xmalloc(m + 1);
          for (size_t j = 0; j < m; j++) b[j] = (unsigned char)(hexval(text[2 + 2 * j]) << 4 | hexval(text[3 + 2 * j]));
          free(blobs[i]);
          blobs[i] = b;
          v.type = STORE_V_BLOB, v.p = (const char *)b, v.n = m;
          break;
        }
        default: v.type = STORE_V_TEXT, v.p = text, v.n = (size_t)PQgetlength(r, k, i);
        }
      }
      row[i] = v;
    }
    done = cb(ud, row);
  }
  for (int i = 0; i < 32; i++) free(blobs[i]);
  PQclear(r);
  return n;
}

int pg_table_insert(store *st_, const store_table *t, const store_value *row, int replace) {
  pg *s = (pg *)st_;
  if (pg_begin(st_) != STORE_OK) return STORE_ERR;
  if (pg_injected(s, t->name)) return STORE_ERR;
  pg_params_start(s);
  for (int i = 0; i < t->ncolumns; i++) bind_value(s, &row[i]);
  PGresult *r = table_run(s, t, replace ? STORE_TABLE_REPLACE : STORE_TABLE_INSERT);
  if (!r) return STORE_ERR;
  PQclear(r);
  s->writes++;
  return STORE_OK;
}

int64_t pg_table_count(store *st_, const store_table *t) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  PGresult *r = table_run(s, t, STORE_TABLE_COUNT);
  if (!r) return STORE_ERR;
  int64_t n = PQntuples(r) > 0 ? pg_col_int(r, 0, 0) : 0;
  PQclear(r);
  return n;
}

int pg_table_finish(store *st_, const store_table *t) {
  pg *s = (pg *)st_;
  char *sql = store_table_sql(t, STORE_TABLE_SERIAL, 1);
  free(sql);
  if (!sql) return STORE_OK;
  pg_params_start(s);
  PGresult *r = table_run(s, t, STORE_TABLE_SERIAL);
  if (!r) return STORE_ERR;
  PQclear(r);
  return STORE_OK;
}
