/* PostgreSQL: rows a batch writes many of, sent as one statement. A busy
 * batch appends history events, puts and deletes tasks and moves a chain's
 * head for every step it records: thousands of one-row statements, each
 * parsed, planned and executed on its own, most of the server's work for
 * the batch; a run's end sets its status and deletes its tasks and its
 * signals. Those rows are held here instead and sent as one statement
 * whose parameters are arrays, one per column (INSERT ... SELECT FROM
 * unnest), before anything that could see them: any read, any statement
 * that is not known to leave their table alone, and the commit. Of a
 * task's puts and deletes only the last is sent (a put is the whole row's
 * upsert), and of a workflow's status updates (each sets the whole
 * status). The batch's outcome is the same (a row that fails fails the
 * batch either way); only the round trip that reports it comes later. */
#include "pg_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* A task's last put or delete in the open batch: Q_TASK_PUT's parameters
 * (a delete's: the first three); or a workflow's last status update:
 * Q_WF_STATUS's five. */
typedef struct held_op {
  int put;
  char *v[8];
} held_op;

/* past this many bytes held, the rows go (an array parameter is one value:
 * PostgreSQL takes at most 1 GB) */
#define ROWS_MAX_BYTES (8u << 20)

/* The tables held rows may be in that statement q can read or write: any
 * but the few known here (-1: one not known, a table's generic statement)
 * sees them all, and rows held for a table it leaves alone may wait behind
 * it. A start (Q_WF_START*) writes its workflow's first event and task,
 * but of an id that has no rows yet (an id in use writes nothing), so no
 * row held can be its; it does read the id's row (its status), as every
 * read of a workflow's row does. Without these, a batch of fifty starts or
 * fifty ends sent its held rows fifty times, a statement each. */
enum { HISTORY = 1, TASKS = 2, SIGNALS = 4, WORKFLOWS = 8 };
static int tables_seen(int q) {
  switch (q) {
  case Q_WF_HIST_HEAD:
  case Q_WF_DOM_HEAD:
  case Q_CODE_GET:
  case Q_CODE_PUT:
  case Q_LEASE_CLAIM:
  case Q_TXID:
  case Q_LOCKS_HELD:
    return 0;
  case Q_WF_STATUS:
  case Q_WF_GET:
  case Q_WF_GET_SHARE:
  case Q_WF_CHAIN:
  case Q_WF_START:
  case Q_WF_START_SEND:
    return WORKFLOWS;
  case Q_TASK_PUT:
  case Q_TASK_DEL:
  case Q_TASK_DEL_WF:
  case Q_TASK_TAKE_HELD:
  case Q_TASK_GET:
  case Q_TASK_COUNT:
    return TASKS;
  case Q_SIG_PUT:
  case Q_SIG_FIND:
  case Q_SIG_TAKE:
  case Q_SIG_COUNT:
  case Q_SIG_DEL_WF:
    return SIGNALS;
  case Q_HIST_APPEND:
  case Q_HIST_LOAD:
    return HISTORY;
  case Q_HIST_LOAD_CURRENT:
    return HISTORY | WORKFLOWS;
  default:
    return HISTORY | TASKS | SIGNALS | WORKFLOWS;
  }
}

/* Whether the bound row may be held: only in a batch that has not failed.
 * Otherwise it is sent on its own as before (q_one), and *rc says how that
 * went; an injected fault fails it either way. */
static int may_hold(pg *s, int q_one, const char *what, int *rc) {
  if (!s->in_txn || s->failed || s->bind_failed) {
    *rc = pg_exec_defer(s, q_one, what);
    return 0;
  }
  *rc = pg_injected(s, what) ? STORE_ERR : STORE_OK;
  return *rc == STORE_OK;
}

/* n values as one more row of r (NULL is the bare word; a value is quoted,
 * so a value "NULL" stays one). */
static void rows_put(pg_rows *r, int n, const char *const *v) {
  r->ncols = n;
  for (int i = 0; i < n && i < ROWS_COLS; i++) {
    struct rows_col *c = &r->col[i];
    size_t before = c->len;
    pg_array_add(&c->buf, &c->len, &c->cap, v[i] ? v[i] : "NULL", v[i] != NULL);
    r->bytes += c->len - before;
  }
  r->n++;
}

/* The bound parameters of statement q_one (text) as one more row of r,
 * whose statement q_many takes each column as an array in the same order. */
int pg_rows_add(pg *s, pg_rows *r, int q_one, int q_many, const char *what) {
  int rc;
  if (!may_hold(s, q_one, what, &rc)) return rc;
  r->q = q_many;
  r->what = what;
  rows_put(r, s->np, s->pv);
  s->writes++;
  return r->bytes > ROWS_MAX_BYTES ? pg_rows_flush(s, r) : STORE_OK;
}

static void rows_clear(pg_rows *r) {
  for (int i = 0; i < ROWS_COLS; i++) r->col[i].len = 0;
  r->n = 0;
  r->bytes = 0;
}

static void rows_free(pg_rows *r) {
  for (int i = 0; i < ROWS_COLS; i++) free(r->col[i].buf);
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

static void held_op_free(void *p) {
  held_op *o = p;
  for (int i = 0; i < 8; i++) free(o->v[i]);
  free(o);
}

/* The bound parameters, copied (at most 8). */
static held_op *held_op_new(pg *s, int put) {
  held_op *o = util_xcalloc(1, sizeof *o);
  o->put = put;
  for (int i = 0; i < s->np && i < 8; i++) o->v[i] = s->pv[i] ? util_strdup(s->pv[i]) : NULL;
  return o;
}

/* The bound parameters of Q_TASK_PUT (put) or Q_TASK_DEL, held as the
 * task's last operation in the batch. */
int pg_rows_task(pg *s, int put) {
  const char *what = put ? "put task" : "delete task";
  int rc;
  if (!may_hold(s, put ? Q_TASK_PUT : Q_TASK_DEL, what, &rc)) return rc;
  char *key = util_fmt("%zu:%s/%s/%s", strlen(s->pv[0]), s->pv[0], s->pv[1], s->pv[2]);
  held_op *o = held_op_new(s, put);
  held_op *old = strmap_del(&s->task_ops, key);
  if (old) held_op_free(old);
  strmap_put(&s->task_ops, key, o);
  free(key);
  s->writes++;
  return STORE_OK;
}

/* The statuses held, as one UPDATE. */
static int statuses_flush(pg *s) {
  if (!s->status_ops.len) return STORE_OK;
  pg_rows st = {.q = Q_WF_STATUS_MANY, .what = "set workflow status"};
  for (size_t i = 0; i < s->status_ops.cap; i++)
    if (STRMAP_LIVE(&s->status_ops, i)) rows_put(&st, 5, (const char *const *)((held_op *)s->status_ops.vals[i])->v);
  strmap_clear(&s->status_ops, held_op_free);
  s->status_bytes = 0;
  int rc = pg_rows_flush(s, &st);
  rows_free(&st);
  return rc;
}

/* The bound parameters of Q_WF_STATUS ($5 the workflow's id), held as the
 * workflow's last status update in the batch: each sets the whole status,
 * so the last is what the others come to. */
int pg_rows_status(pg *s) {
  int rc;
  if (!may_hold(s, Q_WF_STATUS, "set workflow status", &rc)) return rc;
  held_op *o = held_op_new(s, 1), *old = strmap_del(&s->status_ops, s->pv[4]);
  if (old) held_op_free(old);
  strmap_put(&s->status_ops, s->pv[4], o);
  for (int i = 0; i < 5; i++) s->status_bytes += o->v[i] ? strlen(o->v[i]) : 0;
  s->writes++;
  return s->status_bytes > ROWS_MAX_BYTES ? statuses_flush(s) : STORE_OK;
}

/* The tasks held: the workflows' whose tasks all go first (what was held
 * for them before is void, pg_rows_tasks_ended; what came after is theirs), then
 * one DELETE of those deleted, one upsert of those put. */
static int tasks_flush(pg *s) {
  if (pg_rows_flush(s, &s->ended_tasks) != STORE_OK) return STORE_ERR;
  if (!s->task_ops.len) return STORE_OK;
  pg_rows put = {.q = Q_TASK_PUT_MANY, .what = "put task"}, del = {.q = Q_TASK_DEL_MANY, .what = "delete task"};
  for (size_t i = 0; i < s->task_ops.cap; i++) {
    if (!STRMAP_LIVE(&s->task_ops, i)) continue;
    held_op *o = s->task_ops.vals[i];
    if (o->put) rows_put(&put, 8, (const char *const *)o->v);
    else rows_put(&del, 3, (const char *const *)o->v);
  }
  strmap_clear(&s->task_ops, held_op_free);
  int rc = pg_rows_flush(s, &del);
  if (rc == STORE_OK) rc = pg_rows_flush(s, &put);
  rows_free(&put);
  rows_free(&del);
  return rc;
}

/* A workflow's tasks deleted all at once (Q_TASK_DEL_WF, its id bound as
 * $1), held: what the batch held for them before is void, what it writes
 * for them after stays (tasks_flush sends these deletes first). */
int pg_rows_tasks_ended(pg *s) {
  const char *wf_id = s->pv[0]; /* outside a batch none is held: nothing to drop */
  for (size_t i = 0; i < s->task_ops.cap; i++) {
    if (!STRMAP_LIVE(&s->task_ops, i)) continue;
    held_op *o = s->task_ops.vals[i];
    if (wf_id && o->v[0] && strcmp(o->v[0], wf_id) == 0) held_op_free(strmap_del(&s->task_ops, s->task_ops.keys[i]));
  }
  return pg_rows_add(s, &s->ended_tasks, Q_TASK_DEL_WF, Q_TASK_DEL_WF_MANY, "delete tasks");
}

/* Before statement q (-1: a table's generic statement) is sent: the rows
 * it could see go first. In a lost batch they go nowhere: its transaction
 * is rolled back already (pg_fail_res), and rows sent now would run on
 * their own and commit, a lost batch's later events without its earlier
 * ones. */
int pg_rows_flush_before(pg *s, int q) {
  if (s->failed) {
    pg_rows_reset(s);
    return STORE_OK; /* reads go on */
  }
  int seen = tables_seen(q);
  if (s->hist_rows.n && (seen & HISTORY) && pg_rows_flush(s, &s->hist_rows) != STORE_OK) return STORE_ERR;
  if ((s->task_ops.len || s->ended_tasks.n) && (seen & TASKS) && tasks_flush(s) != STORE_OK) return STORE_ERR;
  if (s->ended_signals.n && (seen & SIGNALS) && pg_rows_flush(s, &s->ended_signals) != STORE_OK) return STORE_ERR;
  if (s->status_ops.len && (seen & WORKFLOWS) && statuses_flush(s) != STORE_OK) return STORE_ERR;
  if (s->head_rows.n && pg_rows_flush(s, &s->head_rows) != STORE_OK) return STORE_ERR;
  return STORE_OK;
}

/* Everything held, before the commit: the history, the tasks, the heads
 * (chain_flush has added them by then). */
int pg_rows_flush_all(pg *s) {
  if (pg_rows_flush(s, &s->hist_rows) != STORE_OK || tasks_flush(s) != STORE_OK ||
      pg_rows_flush(s, &s->ended_signals) != STORE_OK || statuses_flush(s) != STORE_OK)
    return STORE_ERR;
  return pg_rows_flush(s, &s->head_rows);
}

/* The batch is rolled back: what it held goes with it. */
void pg_rows_reset(pg *s) {
  rows_clear(&s->hist_rows);
  rows_clear(&s->head_rows);
  rows_clear(&s->ended_tasks);
  rows_clear(&s->ended_signals);
  strmap_clear(&s->task_ops, held_op_free);
  strmap_clear(&s->status_ops, held_op_free);
  s->status_bytes = 0;
}

void pg_rows_free(pg *s) {
  strmap_clear(&s->task_ops, held_op_free);
  strmap_free(&s->task_ops);
  strmap_clear(&s->status_ops, held_op_free);
  strmap_free(&s->status_ops);
  rows_free(&s->hist_rows);
  rows_free(&s->head_rows);
  rows_free(&s->ended_tasks);
  rows_free(&s->ended_signals);
}
