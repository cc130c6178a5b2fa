/* PostgreSQL: rows a batch writes many of, sent as one statement. A busy
 * batch appends a history event and moves a chain's head for every step
 * it records: thousands of one-row statements, each parsed, planned and
 * executed on its own, most of the server's work for the batch. Those rows
 * are held here instead and sent as one statement whose parameters are
 * arrays, one per column (INSERT ... SELECT FROM unnest), before anything
 * that could see them: any read, any statement that is not known to leave
 * the history alone, and the commit. The batch's outcome is the same (a
 * row that fails fails the batch either way); only the round trip that
 * reports it comes later. */
#include "pg_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* past this many bytes held, the rows go (an array parameter is one value:
 * PostgreSQL takes at most 1 GB) */
#define ROWS_MAX_BYTES (8u << 20)

/* Statements that neither read nor write the history: the history's rows
 * held may wait behind them. */
static int leaves_history(int q) {
  switch (q) {
  case Q_TASK_PUT:
  case Q_TASK_DEL:
  case Q_TASK_DEL_WF:
  case Q_SIG_DEL_WF:
  case Q_WF_STATUS:
  case Q_WF_HIST_HEAD:
  case Q_WF_DOM_HEAD:
    return 1;
  default:
    return 0;
  }
}

/* The bound parameters (text) as one more row of r, whose statement q
 * takes each column as an array in the same order. */
int pg_rows_add(pg *s, pg_rows *r, int q, const char *what) {
  r->q = q;
  r->what = what;
  r->ncols = s->np;
  for (int i = 0; i < s->np && i < ROWS_COLS; i++) {
    struct rows_col *c = &r->col[i];
    size_t before = c->len;
    /* NULL is the bare word; a value is quoted, so a value "NULL" stays one */
    pg_array_add(&c->buf, &c->len, &c->cap, s->pv[i] ? s->pv[i] : "NULL", s->pv[i] != NULL);
    r->bytes += c->len - before;
  }
  r->n++;
  s->writes++;
  return r->bytes > ROWS_MAX_BYTES ? pg_rows_flush(s, r) : STORE_OK;
}

static void rows_clear(pg_rows *r) {
  for (int i = 0; i < ROWS_COLS; i++) r->col[i].len = 0;
  r->n = 0;
  r->bytes = 0;
}

/* Sends r's rows as one statement in the batch's pipeline. */
int pg_rows_flush(pg *s, pg_rows *r) {
  if (!r->n) return STORE_OK;
  const char *values[ROWS_COLS];
  for (int i = 0; i < r->ncols; i++) {
    struct rows_col *c = &r->col[i];
    pg_array_add(&c->buf, &c->len, &c->cap, NULL, 0); /* closes it */
    values[i] = c->buf;
  }
  int rc = pg_pipe_send_values(s, r->q, r->ncols, values, r->what);
  rows_clear(r);
  return rc;
}

/* Before statement q (-1: a read) is sent: the rows it could see go first. */
int pg_rows_flush_before(pg *s, int q) {
  if (s->hist_rows.n && !leaves_history(q) && pg_rows_flush(s, &s->hist_rows) != STORE_OK) return STORE_ERR;
  if (s->head_rows.n && pg_rows_flush(s, &s->head_rows) != STORE_OK) return STORE_ERR;
  return STORE_OK;
}

/* The batch is rolled back: what it held goes with it. */
void pg_rows_reset(pg *s) {
  rows_clear(&s->hist_rows);
  rows_clear(&s->head_rows);
}

void pg_rows_free(pg *s) {
  for (int i = 0; i < ROWS_COLS; i++) {
    free(s->hist_rows.col[i].buf);
    free(s->head_rows.col[i].buf);
  }
}
