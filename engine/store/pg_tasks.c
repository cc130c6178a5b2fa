/* pg_tasks: the PostgreSQL store's statements of tasks (store_task_start's
 * one round trip among them), of the leases of several workers and of
 * buffered signals. pg.c has the overview; pg_batch.c keeps the leases a
 * batch claims and fences. */
#include "pg_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- tasks ---- */

int pg_task_put(store *st_, const char *wf_id, const char *kind, int64_t seq, int64_t run_at, int attempt,
                int64_t first_at, const char *owner, int64_t lease_until) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_text(s, kind);
  pg_bind_int(s, seq);
  pg_bind_int(s, run_at);
  pg_bind_int(s, attempt);
  pg_bind_int(s, first_at);
  pg_bind_text(s, owner);
  pg_bind_int(s, lease_until);
  return pg_rows_task(s, 1);
}

/* take: whether it deleted one is known before it returns */
static int task_del(pg *s, const char *wf_id, const char *kind, int64_t seq, int take) {
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_text(s, kind);
  pg_bind_int(s, seq);
  return take ? pg_exec_write(s, Q_TASK_DEL, "delete task") : pg_rows_task(s, 0);
}

int pg_task_del(store *st_, const char *wf_id, const char *kind, int64_t seq) {
  return task_del((pg *)st_, wf_id, kind, seq, 0);
}

int pg_task_take(store *st_, const char *wf_id, const char *kind, int64_t seq) {
  pg *s = (pg *)st_;
  if (task_del(s, wf_id, kind, seq, 1) != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

/* store_task_start in one round trip: for each task its claim, its take
 * (while the lease is this worker's: Q_TASK_TAKE_HELD), its row and its
 * history go in one pipeline, each statement seeing what those before it
 * did. pg_task_start waits for the answers; pg_task_start_send sends them
 * without waiting (pg_read_start) and pg_task_start_result reads them. */
#define START_STMTS 5
static int start_send(pg *s, const char *owner, int64_t now, int64_t until, task_start *t, size_t n) {
  if (strcmp(s->owner, owner) != 0) pg_announce(s, owner);
  WRITE_BEGIN(s);
  for (size_t i = 0; i < n; i++)
    if ((t[i].claim && pg_injected(s, "claim lease")) || pg_injected(s, "delete task")) return STORE_ERR;
  /* the answers land on the heap (s->start_res: a full queue drains early, before they are read) */
  PGresult **res = s->start_res = util_xcalloc(n * START_STMTS + 1, sizeof *res);
  s->start_n = n;
  int rc = STORE_OK;
  for (size_t i = 0; i < n && rc == STORE_OK; i++) {
    PGresult **r = res + i * START_STMTS;
    if (t[i].claim) {
      pg_params_start(s);
      pg_bind_text(s, t[i].wf_id);
      pg_bind_text(s, owner);
      pg_bind_int(s, now);
      pg_bind_int(s, until);
      rc = pg_pipe_send_q(s, Q_LEASE_CLAIM, "claim lease", &r[0]);
    }
    pg_params_start(s);
    pg_bind_text(s, t[i].wf_id);
    pg_bind_text(s, t[i].kind);
    pg_bind_int(s, t[i].seq);
    pg_bind_text(s, owner);
    if (rc == STORE_OK) rc = pg_pipe_send_q(s, Q_TASK_TAKE_HELD, "delete task", &r[1]);
    pg_params_start(s);
    pg_bind_text(s, t[i].wf_id);
    if (rc == STORE_OK) rc = pg_pipe_send_q(s, Q_WF_GET, "get workflow", &r[2]);
    if (t[i].history && rc == STORE_OK) { /* the chain's columns before the history */
      rc = pg_chain_send(s, t[i].wf_id, &r[4]);
      pg_params_start(s);
      pg_bind_text(s, t[i].wf_id);
      if (rc == STORE_OK) rc = pg_pipe_send_q(s, Q_HIST_LOAD_CURRENT, "load history", &r[3]);
    }
  }
  return rc;
}

int pg_task_start_result(store *st_, int rc, task_start *t, size_t n, chain_state *cs) {
  pg *s = (pg *)st_;
  PGresult **res = s->start_res;
  if (!res || s->start_n != n) rc = STORE_ERR; /* nothing of this was sent */
  for (size_t i = 0; i < n && rc == STORE_OK; i++) {
    PGresult **r = res + i * START_STMTS;
    s->writes += t[i].claim + 1;
    t[i].owned = !t[i].claim || PQntuples(r[0]) > 0;
    if (t[i].claim && t[i].owned) pg_claimed(s, t[i].wf_id, pg_col_int(r[0], 0, 0));
    else if (t[i].claim) strmap_del(&s->held, t[i].wf_id); /* another worker has it */
    t[i].took = t[i].owned && atoll(PQcmdTuples(r[1])) > 0;
    t[i].found = t[i].took && PQntuples(r[2]) > 0;
    if (t[i].found) pg_read_wf(r[2], 0, &t[i].w);
    if (t[i].found && t[i].history) { /* raw: store.c checks them */
      pg_chain_from(r[4], &cs[i]);
      pg_events_from(r[3], &t[i].h);
      if (pg_events_run(r[3]) >= 0 && pg_events_run(r[3]) != cs[i].run) cs[i].run = -1;
    }
  }
  for (size_t i = 0; res && i < s->start_n * START_STMTS; i++) PQclear(res[i]);
  free(res);
  s->start_res = NULL;
  s->start_n = 0;
  return rc;
}

int pg_task_start(store *st_, const char *owner, int64_t now, int64_t until, task_start *t, size_t n,
                  chain_state *cs) {
  pg *s = (pg *)st_;
  int rc = start_send(s, owner, now, until, t, n);
  if (rc == STORE_OK) rc = pg_pipe_drain(s, 1);
  return pg_task_start_result(st_, rc, t, n, cs);
}

int pg_task_start_send(store *st_, const char *owner, int64_t now, int64_t until, task_start *t, size_t n) {
  pg *s = (pg *)st_;
  int rc = start_send(s, owner, now, until, t, n);
  return rc == STORE_OK ? pg_read_start(s) : rc;
}

int pg_task_release(store *st_, const char *owner) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, owner);
  return pg_exec_write(s, Q_TASK_RELEASE, "release tasks");
}

int pg_task_del_wf(store *st_, const char *wf_id) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  return pg_rows_tasks_ended(s);
}

static void read_task(const PGresult *r, int i, task_row *t) {
  t->id = pg_col_int(r, i, 0);
  t->wf_id = pg_col_text(r, i, 1);
  t->kind = pg_col_text(r, i, 2);
  t->seq = pg_col_int(r, i, 3);
  t->run_at = pg_col_int(r, i, 4);
  t->attempt = (int)pg_col_int(r, i, 5);
  t->first_at = pg_col_int(r, i, 6);
  t->leased = pg_col_int(r, i, 7) > 0;
}

int pg_task_get(store *st_, const char *wf_id, const char *kind, int64_t seq, task_row *out) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_text(s, kind);
  pg_bind_int(s, seq);
  PGresult *r = pq_run(s, Q_TASK_GET, 0, "get task");
  if (!r) return STORE_ERR;
  int found = PQntuples(r) > 0;
  if (found) {
    read_task(r, 0, out);
    out->wf_id = out->kind = NULL; /* the row's text goes with the result */
  }
  PQclear(r);
  return found;
}

static void due_bind(pg *s, int64_t now, const char *owner, int limit, int unheld) {
  pg_params_start(s);
  pg_bind_int(s, now);
  pg_bind_text(s, owner);
  pg_bind_int(s, limit);
  pg_bind_int(s, unheld < 0 ? limit : unheld);
}

static void due_each(const PGresult *r, store_task_cb cb, void *ud) {
  for (int i = 0, n = PQntuples(r); i < n; i++) {
    task_row t;
    read_task(r, i, &t);
    if (cb(ud, &t)) break;
  }
}

int pg_task_due(store *st_, int64_t now, const char *owner, int limit, int unheld, store_task_cb cb, void *ud) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s); /* the rows it returns are locked to this batch */
  due_bind(s, now, owner, limit, unheld);
  /* the whole result is here before the callbacks write to the store */
  PGresult *r = pq_run(s, Q_TASK_DUE, 0, "due tasks");
  if (!r) return STORE_ERR;
  due_each(r, cb, ud);
  PQclear(r);
  return STORE_OK;
}

/* The same sent without waiting (pg_read_start), in the batch's pipeline. */
int pg_task_due_send(store *st_, int64_t now, const char *owner, int limit, int unheld) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  due_bind(s, now, owner, limit, unheld);
  PQclear(s->due_res);
  s->due_res = NULL;
  if (pg_pipe_send_q(s, Q_TASK_DUE, "due tasks", &s->due_res) != STORE_OK) return STORE_ERR;
  return pg_read_start(s);
}

int pg_task_due_result(store *st_, int rc, store_task_cb cb, void *ud) {
  pg *s = (pg *)st_;
  PGresult *r = s->due_res;
  s->due_res = NULL;
  if (rc == STORE_OK && !r) rc = STORE_ERR; /* nothing of this was sent */
  if (rc == STORE_OK) due_each(r, cb, ud);
  PQclear(r);
  return rc;
}

int64_t pg_task_next_at(store *st_, const char *owner) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, owner);
  int64_t v;
  return pg_query_int(s, Q_TASK_NEXT, -1, &v) == STORE_OK ? v : -2;
}

/* The same sent in the open batch's pipeline (store_task_next_send): its
 * answer comes with the batch's commit. Once per batch; 0 when it cannot
 * (no batch open, or one sent already): ask store_task_next_at. */
int pg_task_next_send(store *st_, const char *owner) {
  pg *s = (pg *)st_;
  if (!s->in_txn || s->failed || s->next_sent) return 0;
  PQclear(s->next_res);
  s->next_res = NULL;
  pg_params_start(s);
  pg_bind_text(s, owner);
  if (pg_pipe_send_q(s, Q_TASK_NEXT, "next due task", &s->next_res) != STORE_OK) return -1;
  s->next_sent = 1;
  return 1;
}

int64_t pg_task_next_result(store *st_) {
  pg *s = (pg *)st_;
  PGresult *r = s->next_res;
  s->next_res = NULL;
  s->next_sent = 0;
  int64_t v = !r ? -2 : PQntuples(r) == 0 || PQgetisnull(r, 0, 0) ? -1 : pg_col_int(r, 0, 0);
  PQclear(r);
  return v;
}

int pg_task_count(store *st_, const char *wf_id) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  int64_t v;
  return pg_query_int(s, Q_TASK_COUNT, 0, &v) == STORE_OK ? (int)v : -1;
}

/* ---- leases (store.h): several workers on one database ---- */

int pg_lease_claim(store *st_, const char *wf_id, const char *owner, int64_t now, int64_t until) {
  pg *s = (pg *)st_;
  if (strcmp(s->owner, owner) != 0) pg_announce(s, owner);
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_text(s, owner);
  pg_bind_int(s, now);
  pg_bind_int(s, until);
  PGresult *r = pg_injected(s, "claim lease") ? NULL : pq_run(s, Q_LEASE_CLAIM, 0, "claim lease");
  if (!r) return STORE_ERR;
  s->writes++;
  int got = PQntuples(r) > 0;
  if (got) {
    pg_claimed(s, wf_id, pg_col_int(r, 0, 0));
  } else {
    strmap_del(&s->held, wf_id); /* another worker has it */
  }
  PQclear(r);
  return got;
}

int pg_lease_held(store *st_, const char *wf_id) { return pg_lease_epoch((pg *)st_, wf_id) != 0; }

int64_t pg_lease_count(store *st_) {
  pg *s = (pg *)st_;
  return (int64_t)(s->held.len + s->claimed.len); /* a claim of one held already counts twice: a bound, not a census */
}

int pg_lease_fence(store *st_, const char *wf_id) {
  pg *s = (pg *)st_;
  strmap_put(&s->fenced, wf_id, (void *)1);
  return STORE_OK;
}

int pg_lease_renew(store *st_, const char *owner, int64_t until, void (*lost)(void *ud, const char *wf_id),
                   void *ud) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, owner);
  pg_bind_int(s, until);
  PGresult *r = pg_injected(s, "renew leases") ? NULL : pq_run(s, Q_LEASE_RENEW, 0, "renew leases");
  if (!r) return STORE_ERR;
  s->writes++;
  strmap now;
  strmap_init(&now);
  for (int i = 0, n = PQntuples(r); i < n; i++) strmap_put(&now, PQgetvalue(r, i, 0), (void *)(intptr_t)pg_col_int(r, i, 1));
  PQclear(r);
  for (size_t i = 0; i < s->held.cap; i++) {
    if (!STRMAP_LIVE(&s->held, i)) continue;
    if (strmap_get(&now, s->held.keys[i]) == s->held.vals[i]) continue;
    char *id = util_strdup(s->held.keys[i]);
    strmap_del(&s->held, id);
    if (lost) lost(ud, id);
    free(id);
  }
  strmap_free(&now);
  return STORE_OK;
}

/* One lease is released with the batch's commit, in its round trip, after
 * the fence: a batch that wrote to the workflow stays fenced on it, so it
 * commits only if the lease was still this worker's. From the release on
 * the worker does not hold it (a claim in the same batch keeps it after
 * all); a rollback gives it back as it was. */
int pg_lease_release(store *st_, const char *owner, const char *wf_id) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  if (wf_id) {
    if (pg_injected(s, "release lease")) return STORE_ERR;
    intptr_t epoch = pg_lease_epoch(s, wf_id);
    if (epoch) {
      strmap_put(&s->releasing, wf_id, (void *)epoch);
      s->writes++;
    }
    strmap_del(&s->claimed, wf_id);
    return STORE_OK;
  }
  pg_params_start(s);
  pg_bind_text(s, owner);
  if (pg_exec_write(s, Q_LEASE_RELEASE_ALL, "release lease") != STORE_OK) return STORE_ERR;
  pg_map_reset(&s->held);
  pg_map_reset(&s->claimed);
  pg_map_reset(&s->releasing);
  return STORE_OK;
}

/* ---- signals ---- */

int pg_signal_put(store *st_, const char *wf_id, const char *name, const char *payload, int64_t time) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_SIGNALS, wf_id, NULL); /* a workflow's signals' ids in commit order */
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_text(s, name);
  pg_bind_text(s, payload);
  pg_bind_int(s, time);
  return pg_exec_defer(s, Q_SIG_PUT, "put signal");
}

/* One round trip (Q_SIG_TAKE): found and deleted in one statement; none
 * when there is none, or another batch took it first. */
int pg_signal_take(store *st_, const char *wf_id, const char *name, char **payload) {
  pg *s = (pg *)st_;
  *payload = NULL;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_text(s, name);
  if (pg_injected(s, "take signal")) {
    s->bind_failed = 0;
    return STORE_ERR;
  }
  PGresult *r = pq_run(s, Q_SIG_TAKE, 0, "take signal");
  if (!r) return STORE_ERR;
  s->writes++;
  int got = PQntuples(r) > 0;
  if (got) *payload = pg_col_dup(r, 0, 0);
  PQclear(r);
  return got;
}

/* Sent in the batch's pipeline: nothing waits for it (Q_SIG_WAKE). */
int pg_signal_wake(store *st_, const char *wf_id, const char *name, const char *payload, int64_t time) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_SIGNALS, wf_id, NULL);
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_text(s, name);
  pg_bind_text(s, payload);
  pg_bind_int(s, time);
  return pg_exec_defer(s, Q_SIG_WAKE, "put signal");
}

int pg_signal_has(store *st_, const char *wf_id, const char *name) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_text(s, name);
  PGresult *r = pq_run(s, Q_SIG_FIND, 0, "find signal");
  if (!r) return STORE_ERR;
  int has = PQntuples(r) > 0;
  PQclear(r);
  return has;
}

int pg_signal_count(store *st_, const char *wf_id) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  int64_t v;
  return pg_query_int(s, Q_SIG_COUNT, 0, &v) == STORE_OK ? (int)v : -1;
}

int pg_signal_del_wf(store *st_, const char *wf_id) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  return pg_rows_add(s, &s->ended_signals, Q_SIG_DEL_WF, Q_SIG_DEL_WF_MANY, "delete signals");
}
