/* pg_batch: the PostgreSQL store's batch (pg.c has the overview): the
 * transaction of a loop iteration, opened by its first write; the order
 * locks; the commit's one round trip (the lease fence, the commits bump and
 * COMMIT in one pipeline), sent without waiting by store_commit_start; a
 * commit whose connection broke; the rollback; and the leases this store
 * holds, claims or releases, which the fence checks. */
#include "pg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- the leases a batch claims, fences and releases (store_lease_*) ---- */

void pg_map_reset(strmap *m) { /* keys freed; the values are epochs, not pointers */
  strmap_free(m);
  strmap_init(m);
}

intptr_t pg_lease_epoch(pg *s, const char *wf_id) {
  intptr_t ep = (intptr_t)strmap_get(&s->claimed, wf_id);
  if (ep || strmap_get(&s->releasing, wf_id)) return ep;
  return (intptr_t)strmap_get(&s->held, wf_id);
}

/* A claim of the open batch got the lease: held once it commits (a
 * release earlier in the batch is void: the lease stays). */
void pg_claimed(pg *s, const char *wf_id, int64_t epoch) {
  strmap_put(&s->claimed, wf_id, (void *)(intptr_t)epoch);
  strmap_del(&s->releasing, wf_id);
}

/* The batch is lost for a lease (s->failed = 2: store_commit answers STORE_ELEASE). */
static void lease_lost(pg *s, const char *id, int taken, int n) {
  char more[48] = "";
  if (n > 1) snprintf(more, sizeof more, " and %d more", n - 1);
  util_seterr(s->err, sizeof s->err,
              "lost the lease of workflow %s%s (%s): the batch that wrote to it was refused, nothing of it written", id,
              more, taken ? "another worker holds it now" : "it was released or taken over");
  s->failed = 2;
}

/* The fence: before COMMIT, every workflow the batch fenced is still held
 * at the epoch pg_claimed (Q_FENCE_OR_ABORT, in the commit's pipeline). The
 * lease rows read stay locked (FOR SHARE) to the commit, so no takeover can
 * commit between the check and it. */
/* Binds the workflows of ids (fenced or releasing), their epochs and the
 * owner ($1-$3 of Q_LEASE_FENCE, Q_FENCE_OR_ABORT and Q_LEASE_RELEASE_LIST);
 * the arrays live to fence_params_free. */
static void fence_params(pg *s, const strmap *ids) {
  size_t il = 0, ic = 0, el = 0, ec = 0;
  s->fence_ids = s->fence_eps = NULL;
  for (size_t i = 0; i < ids->cap; i++) {
    if (!STRMAP_LIVE(ids, i)) continue;
    char ep[24];
    intptr_t epoch = pg_lease_epoch(s, ids->keys[i]);
    snprintf(ep, sizeof ep, "%lld", (long long)(epoch ? epoch : (intptr_t)strmap_get(&s->releasing, ids->keys[i])));
    pg_array_add(&s->fence_ids, &il, &ic, ids->keys[i], 1);
    pg_array_add(&s->fence_eps, &el, &ec, ep, 0);
  }
  pg_array_add(&s->fence_ids, &il, &ic, NULL, 0);
  pg_array_add(&s->fence_eps, &el, &ec, NULL, 0);
  pg_params_start(s);
  pg_bind_text(s, s->fence_ids);
  pg_bind_text(s, s->fence_eps);
  pg_bind_text(s, s->owner);
}

static void fence_params_free(pg *s) {
  free(s->fence_ids);
  free(s->fence_eps);
  s->fence_ids = s->fence_eps = NULL;
}

/* After a commit the fence refused (FENCE_ABORTED): which workflows, and
 * whether another worker holds them; each lost one is forgotten and named
 * (s->failed = 2: it was a lease). */
static int fence_check(pg *s) {
  if (!s->fenced.len) return STORE_OK;
  fence_params(s, &s->fenced);
  PGresult *r = pq_run(s, Q_LEASE_FENCE, 0, FENCE_WHAT);
  fence_params_free(s);
  if (!r) return STORE_ERR;
  int lost = PQntuples(r);
  if (lost) {
    lease_lost(s, PQgetvalue(r, 0, 0), pg_col_text(r, 0, 1) != NULL, lost);
    for (int i = 0; i < lost; i++) strmap_del(&s->held, PQgetvalue(r, i, 0));
  }
  PQclear(r);
  return lost ? STORE_ERR : STORE_OK;
}

/* ---- the batch ---- */

/* A head the batch moved, into its workflow's head row (chain_heads; chain_flush, in the commit's pipeline). */
static int pg_chain_write(store *st_, const char *wf_id, int domain, const char *head, int64_t seq,
                          const char *base) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, head);
  pg_bind_int(s, seq);
  if (!domain) pg_bind_text(s, base && *base ? base : NULL);
  pg_bind_text(s, wf_id);
  if (domain) return pg_exec_defer(s, Q_WF_DOM_HEAD, "write the chain's head");
  return pg_rows_add(s, &s->head_rows, Q_WF_HIST_HEAD, Q_WF_HIST_HEAD_MANY, "write the chain's head");
}


int pg_batch_failed(store *st_) {
  pg *s = (pg *)st_;
  if (s->pipe) return s->failed; /* what was sent and not answered yet is not known to fail */
  return s->failed || (s->in_txn && PQtransactionStatus(s->conn) != PQTRANS_INTRANS);
}

/* The batch: a transaction of this loop iteration, opened by its first
 * write. Workers write in parallel: a workflow's rows are its lease
 * holder's (fenced at commit), the tasks a dispatch reads are locked to it
 * (Q_TASK_DUE), and what is shared across workflows takes the order lock. */
int pg_batch_begin(pg *s) {
  if (pg_batch_failed(&s->base)) {
    if (!s->failed) {
      util_seterr(s->err, sizeof s->err, "the transaction was lost (%s)", PQerrorMessage(s->conn));
      s->failed = 1;
    }
    return STORE_ERR;
  }
  if (s->in_txn) return STORE_OK;
  if (pg_injected(s, "begin")) {
    s->failed = 1;
    return STORE_ERR;
  }
  pg_reconnect_if_lost(s);
  char why[384];
  int kind = STORE_ERR;
  /* the worker lock: checked in the batch's pipeline, after its BEGIN,
   * when it can be (pg_locks_check_send), else asked here (a round trip) */
  int in_pipe = pg_locks_sendable(s);
  if (!in_pipe && pg_locks_held(s, why, sizeof why) != 0) {
    util_seterr(s->err, sizeof s->err, "begin: %s", why);
    s->failed = 1;
    return STORE_ERR;
  }
  /* with its id, sent in the batch's pipeline: no round trip is waited for
   * here, and a BEGIN that fails loses the batch where its answer is read
   * (its next read or its commit), as a failed write does; so does the
   * worker lock's check (LOCKS_WHAT): a batch whose worker lost its lock
   * does not commit */
  s->xid = 0;
  PQclear(s->xid_res);
  s->xid_res = NULL;
  pg_params_start(s);
  if (pg_pipe_send_q(s, Q_BEGIN, "begin", NULL) != STORE_OK ||
      (pg_params_start(s), pg_pipe_send_q(s, Q_TXID, "begin", &s->xid_res)) != STORE_OK ||
      (in_pipe && pg_locks_check_send(s) != STORE_OK)) {
    char sent[sizeof s->err];
    snprintf(sent, sizeof sent, "%s", s->err);
    if (PQtransactionStatus(s->conn) != PQTRANS_IDLE) PQclear(PQexec(s->conn, "ROLLBACK"));
    util_seterr(s->err, sizeof s->err, "begin: %.400s", sent);
    s->failed = 1; /* the writes that follow in this batch must not autocommit one by one */
    return kind;
  }
  s->in_txn = 1;
  return STORE_OK;
}

/* An order lock: what a batch reads and then writes of what is shared
 * across workflows is ordered by the lock of its key (class_: what it is,
 * pg_internal.h), held to the end of the batch, so two batches touching the
 * same key commit one after the other, as SQLite's BEGIN IMMEDIATE gives,
 * and batches touching different keys (most: starts take none) do not wait
 * for each other. Sent in the batch's pipeline: the statements after it run
 * once it is granted, and no round trip waits for it. Taken late in a
 * batch, it can close a cycle with row locks or another batch's order
 * locks: PostgreSQL then ends one batch (40P01), which is retried as busy.
 * The wait is bounded by ENGINE_BUSY_TIMEOUT_MS (lock_timeout). */
int pg_lock_on(pg *s, int class_, const char *key, const char *key2) {
  if (s->failed) return STORE_ERR;
  /* key2 (a slot's key, a delivery's id) after a unit separator: one key */
  char *k = key2 ? util_fmt("%s\x1f%s", key ? key : "", key2) : util_strdup(key ? key : "");
  char *name = util_fmt("%d:%s", class_, k);
  int rc = STORE_OK;
  if (!strmap_get(&s->locked, name)) {
    pg_params_start(s);
    pg_bind_int(s, class_);
    pg_bind_text(s, k);
    rc = pg_pipe_send_q(s, Q_LOCK, "an order lock", NULL);
    if (rc == STORE_OK) strmap_put(&s->locked, name, (void *)1);
  }
  free(name);
  free(k);
  return rc;
}

/* store_begin: a client's batch (start, signal, cancel, approve, replay):
 * its reads of a workflow lock its row to its commit (a worker's status
 * change waits, or is seen), and an id it finds free stays free to it
 * (pg_wf_get). */
int pg_begin(store *st_) {
  pg *s = (pg *)st_;
  int rc = pg_batch_begin(s);
  if (rc != STORE_OK) return rc;
  s->client = 1;
  return STORE_OK;
}

/* After the connection broke during COMMIT: connected again, whether
 * transaction xid committed (txid_status). Unknown counts as not. */
static int committed_anyway(pg *s, int64_t xid) {
  s->in_txn = 0;
  if (!xid) return 0; /* its id's answer never came: unknown */
  pg_reconnect_if_lost(s);
  if (PQstatus(s->conn) != CONNECTION_OK) return 0;
  pg_params_start(s);
  pg_bind_int(s, xid);
  PGresult *r = pq_run(s, Q_TXID_STATUS, 0, "commit status");
  int yes = r && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0) && strcmp(PQgetvalue(r, 0, 0), "committed") == 0;
  PQclear(r);
  if (!yes) s->failed = 0, s->err[0] = 0;
  return yes;
}

/* The batch's last round trip: its writes not answered yet, the fence
 * (Q_FENCE_OR_ABORT), the commits bump, COMMIT and the listeners' notify
 * go in one pipeline.
 * commit_send sends them: STORE_PENDING, the answers to be read
 * (commit_finish), or the result when there was nothing to send. */
static int commit_outcome(pg *s, int ok);

static int commit_send(pg *s) {
  if (pg_batch_failed(&s->base)) {
    int lease = s->failed == 2;
    if (!s->failed) util_seterr(s->err, sizeof s->err, "commit: the transaction was lost");
    pg_rollback(&s->base);
    return lease ? STORE_ELEASE : STORE_ERR;
  }
  if (!s->in_txn) return STORE_OK;
  if (pg_injected(s, "commit")) {
    pg_rollback(&s->base);
    return STORE_ERR;
  }
  /* the heads of the hash chains the batch moved, into their workflows' rows, and every row
   * held (pg_rows.c), pipelined */
  if (chain_flush(&s->base, pg_chain_write) != STORE_OK || pg_rows_flush_all(s) != STORE_OK) {
    pg_rollback(&s->base);
    return STORE_ERR;
  }
  int sent = STORE_OK;
  s->commit_bumped = s->writes > 0;
  s->drain_state[0] = 0;
  s->drain_what = NULL;
  if (s->fenced.len) {
    fence_params(s, &s->fenced);
    sent = pg_pipe_send_q(s, Q_FENCE_OR_ABORT, FENCE_WHAT, NULL);
    fence_params_free(s);
  }
  if (s->releasing.len && sent == STORE_OK) {
    fence_params(s, &s->releasing);
    sent = pg_pipe_send_q(s, Q_LEASE_RELEASE_LIST, "release leases", NULL);
    fence_params_free(s);
  }
  if (s->commit_bumped && sent == STORE_OK) { /* other connections see the version change (store_data_version) */
    pg_params_start(s);
    pg_bind_int(s, 1 + PQbackendPID(s->conn) % COMMIT_SHARDS);
    sent = pg_pipe_send_q(s, Q_BUMP, "commit", NULL);
  }
  s->commit_res = NULL;
  if (sent == STORE_OK) {
    pg_params_start(s);
    sent = pg_pipe_send_q(s, Q_COMMIT, "commit", &s->commit_res);
  }
  if (s->commit_bumped && sent == STORE_OK) sent = pg_pipe_send_soft(s, Q_NOTIFY, "notify listeners");
  if (sent != STORE_OK) return commit_outcome(s, 0);
  pg_drain_begin(s);
  return STORE_PENDING;
}

/* Reads the commit's answers (waiting for what has not arrived) and ends the batch. */
static int commit_finish(pg *s) {
  pg_drain_read(s, 1);
  return commit_outcome(s, pg_drain_end(s, 1) == STORE_OK);
}

static int commit_outcome(pg *s, int ok) {
  PGresult *r = s->commit_res;
  s->commit_res = NULL;
  /* a COMMIT of an aborted transaction answers ROLLBACK: not committed */
  if (ok && (!r || strcmp(PQcmdStatus(r), "COMMIT") != 0)) {
    ok = 0;
    if (!s->failed) util_seterr(s->err, sizeof s->err, "commit: the transaction was rolled back");
  }
  PQclear(r);
  int kind = !ok && s->drain_what && !strcmp(s->drain_what, FENCE_WHAT) && !strcmp(s->drain_state, FENCE_ABORTED)
                 ? STORE_ELEASE
                 : pg_classify_state(s->drain_state);
  if (s->xid_res && PQntuples(s->xid_res) == 1) s->xid = pg_col_int(s->xid_res, 0, 0);
  PQclear(s->xid_res);
  s->xid_res = NULL;
  if (!ok && PQstatus(s->conn) == CONNECTION_BAD) {
    char why[sizeof s->err];
    snprintf(why, sizeof why, "%s", s->err);
    if (committed_anyway(s, s->xid)) ok = 1;
    else snprintf(s->err, sizeof s->err, "%s", why);
  }
  if (!ok) {
    /* which fenced lease, and who has it (the transaction is rolled back already) */
    if (kind == STORE_ELEASE && fence_check(s) == STORE_OK) kind = STORE_ERR;
    pg_rollback(&s->base);
    return kind == STORE_OK ? STORE_ERR : kind;
  }
  store_batch_ended(&s->base, 1); /* the heads it moved are the rows' now */
  for (size_t i = 0; i < s->claimed.cap; i++) /* the batch's claims hold now */
    if (STRMAP_LIVE(&s->claimed, i)) strmap_put(&s->held, s->claimed.keys[i], s->claimed.vals[i]);
  for (size_t i = 0; i < s->releasing.cap; i++) /* and its releases are done */
    if (STRMAP_LIVE(&s->releasing, i)) strmap_del(&s->held, s->releasing.keys[i]);
  pg_map_reset(&s->claimed);
  pg_map_reset(&s->fenced);
  pg_map_reset(&s->releasing);
  s->own_commits += s->commit_bumped;
  s->in_txn = s->client = 0;
  pg_map_reset(&s->locked);
  s->last_writes = s->writes;
  s->writes = 0;
  return STORE_OK;
}

int pg_commit(store *st_) {
  pg *s = (pg *)st_;
  int rc = commit_send(s);
  if (rc == STORE_PENDING) pg_waited(s, "commit");
  return rc == STORE_PENDING ? commit_finish(s) : rc;
}

/* The same without waiting for the answers (store_commit_start): the
 * request is flushed without blocking (PQsetnonblocking), the rest when the
 * socket is writable (commit_progress). */
int pg_commit_start(store *st_) {
  pg *s = (pg *)st_;
  PQsetnonblocking(s->conn, 1);
  int rc = commit_send(s);
  if (rc != STORE_PENDING) {
    PQsetnonblocking(s->conn, 0);
    return rc;
  }
  int f = PQflush(s->conn);
  s->flushing = f == 1;
  if (f < 0) s->dr.lost = 1;
  return STORE_PENDING;
}

int pg_commit_socket(store *st_, int *writable) {
  pg *s = (pg *)st_;
  *writable = s->flushing;
  return PQsocket(s->conn);
}

/* The rest of a request sent without waiting, and what has arrived of its
 * answers: 1 once they are all in (the connection blocks again), else 0. */
static int flight_arrived(pg *s) {
  if (s->flushing) {
    int f = PQflush(s->conn);
    if (f == 1) return 0;
    s->flushing = 0;
    if (f < 0) s->dr.lost = 1;
  }
  if (!pg_drain_read(s, 0)) return 0;
  PQsetnonblocking(s->conn, 0);
  return 1;
}

/* The same, waiting for what has not arrived (store.c settles it before any other call). */
static void flight_wait(pg *s, const char *what) {
  PQsetnonblocking(s->conn, 0);
  pg_waited(s, what);
  if (s->flushing && PQflush(s->conn) < 0) s->dr.lost = 1;
  s->flushing = 0;
  pg_drain_read(s, 1);
}

int pg_commit_progress(store *st_) {
  pg *s = (pg *)st_;
  return flight_arrived(s) ? commit_outcome(s, pg_drain_end(s, 1) == STORE_OK) : STORE_PENDING;
}

int pg_commit_settle(store *st_) {
  pg *s = (pg *)st_;
  flight_wait(s, "commit");
  return commit_outcome(s, pg_drain_end(s, 1) == STORE_OK);
}

/* What the batch's pipeline holds (a dispatch's reads, behind its writes),
 * sent with a sync point without waiting for the answers: STORE_PENDING.
 * They land where each statement keeps its result, read by
 * pg_read_progress or pg_read_settle; a failed one loses the batch there,
 * as in any drain. */
int pg_read_start(pg *s) {
  PQsetnonblocking(s->conn, 1);
  pg_drain_begin(s);
  int f = PQflush(s->conn);
  s->flushing = f == 1;
  if (f < 0) s->dr.lost = 1;
  return STORE_PENDING;
}

int pg_read_progress(store *st_) {
  pg *s = (pg *)st_;
  return flight_arrived(s) ? pg_drain_end(s, 1) : STORE_PENDING;
}

int pg_read_settle(store *st_) {
  pg *s = (pg *)st_;
  flight_wait(s, "dispatch read");
  return pg_drain_end(s, 1);
}

/* Ends the batch, whatever state it is in; keeps store_errmsg. */
void pg_rollback(store *st_) {
  pg *s = (pg *)st_;
  pg_rows_reset(s);
  pg_pipe_drain(s, 0);
  if (PQtransactionStatus(s->conn) != PQTRANS_IDLE && PQstatus(s->conn) == CONNECTION_OK)
    PQclear(PQexec(s->conn, "ROLLBACK"));
  s->in_txn = s->client = 0;
  pg_map_reset(&s->locked);
  s->failed = 0;
  s->writes = 0;
  store_batch_ended(&s->base, 0);
  PQclear(s->xid_res);
  s->xid_res = NULL;
  PQclear(s->next_res); /* no one reads the next due time of a lost batch */
  s->next_res = NULL;
  s->next_sent = 0;
  pg_map_reset(&s->claimed); /* the claims went with the batch */
  pg_map_reset(&s->fenced);
  pg_map_reset(&s->releasing);
}

int pg_in_txn(store *st_) {
  pg *s = (pg *)st_;
  if (s->pipe) return 1;
  PGTransactionStatusType t = PQtransactionStatus(s->conn);
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR;
}

int64_t pg_batch_writes(store *st_) { return ((pg *)st_)->last_writes; }

int64_t pg_round_trips(store *st_) { return ((pg *)st_)->round_trips; }

/* The commits row counts every commit that wrote, by any connection; less
 * this connection's own, it changes exactly when another one commits (what
 * SQLite's PRAGMA data_version tells). A counter read in the same database
 * rather than pg_stat_database's xact_commit: that one counts reads too and
 * is reported late. */
int64_t pg_data_version(store *st_) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  int64_t v;
  return pg_query_int(s, Q_DATA_VERSION, 0, &v) == STORE_OK ? v - s->own_commits : -1;
}
