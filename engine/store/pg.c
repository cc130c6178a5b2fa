/* store_pg: the store on PostgreSQL (libpq), for a database URL
 * (postgres://... or postgresql://...). The same tables as sqlite.c,
 * in PostgreSQL's types, and the same semantics:
 *
 * - Group commit: the batch opens one transaction per loop iteration, at
 *   its first write, and workers write in parallel (pg_batch_begin): a
 *   workflow's rows are written only by its lease holder (fenced at
 *   commit), due tasks are locked to the batch that read them (FOR UPDATE
 *   SKIP LOCKED: another worker's dispatch takes the next ones), and a
 *   claim never waits on another worker's batch. There is no lock for all:
 *   - a start (store_wf_start, pg_wf_start) is one INSERT ... ON CONFLICT
 *     that writes the row, its first event and task, or finds the id's
 *     row: two starts of one id wait on the row's own lock, and one writes;
 *     an API start sends it ahead (store_wf_start_send, pg_wf_start_send:
 *     queued, its chain head in the statement) and reads its answer once
 *     the batch's answers are read;
 *   - a workflow's history is its lease holder's (the fence), so its seqs
 *     and its hash chain's head (chain_heads.hist_*) need no other order;
 *   - what else is read-then-written across workflows takes an order lock
 *     scoped to its key (pg_lock_on: pg_advisory_xact_lock(class,
 *     hashtext(key)), sent in the batch's pipeline, held to the commit),
 *     so two batches that touch the same key commit one after the other, as
 *     SQLite's BEGIN IMMEDIATE gives, and others do not wait: the event
 *     feed (one key: a session's domain event seqs and chain head, which a
 *     client and the lease holder both append to, and the feed's ids in
 *     commit order, read by id), a workflow's signals (their ids in commit
 *     order), a slot's queue (pool and key), a counter, a webhook delivery
 *     (trigger and delivery id), the schedules (one key), a meta value, a
 *     token, and a workflow id a client's check found free (pg_wf_get: a
 *     fork's new id);
 *   - a client's check of a workflow (store_begin, then store_wf_get) locks
 *     its row to the commit (FOR SHARE): a worker's status change waits.
 *   A wait is bounded by ENGINE_BUSY_TIMEOUT_MS (lock_timeout), and running
 *   out is STORE_EBUSY; a cycle of locks ends one batch (40P01, busy).
 * - A failed statement loses the batch: PostgreSQL aborts the transaction,
 *   and we roll it back at once (as SQLite does on I/O errors), so reads go
 *   on in autocommit while every write fails until store_rollback, and
 *   store_commit rolls back and fails.
 *
 * - Several workers share a database (engine_lock takes a shared advisory
 *   lock for serve, an exclusive one otherwise): each runs a
 *   workflow only under its lease (the leases table: owner, epoch, expiry;
 *   store_lease_*), and a batch that appended to a workflow commits only if
 *   its lease is still that owner's at that epoch (the fence, which
 *   keeps the lease rows locked to the commit, in the commit's own round trip).
 *
 * A batch's writes go in pipeline mode (pg_exec_defer): sent without waiting,
 * answered with the batch's next read or at the commit, one round trip for
 * all. The commit itself is one round trip (the fence, the commits bump and
 * COMMIT in one pipeline), and the worker's loop does not wait for it:
 * store_commit_start sends it (nonblocking), a uv_poll on PQsocket brings
 * the answer (pg_commit_progress), and any other call meanwhile waits for
 * it first (store.c). Reads and BEGIN still wait for their answer on the
 * loop's thread (an order lock does not: it goes with the next of them).
 *
 * Text is sent as text parameters (so it must be valid in the database's
 * encoding, UTF-8 from scripts/start-postgres); code sources are BYTEA sent
 * and read in binary. Every text column sorts with COLLATE "C", bytewise as
 * SQLite does, whatever the database's locale.
 *
 * The backend's files (pg_internal.h is what they share): pg.c opens a
 * database (creating or checking its schema) and holds the operations'
 * table (store_pg_ops); pg_conn.c is the connection's plumbing (errors and
 * their kinds, parameters, the pipeline, connecting again, the worker lock,
 * LISTEN); pg_batch.c the batch (its transaction, the order locks, the
 * commit's round trip and the lease fence); pg_sql.c the statements' text;
 * and the statements, by what they store: pg_workflows.c (workflows,
 * history, code and modules, a workflow's page), pg_tasks.c (tasks, leases,
 * signals), pg_records.c (domain events and the feed, meta, tokens, slots,
 * counters, deliveries, schedules, counts) and pg_tables.c (whole tables,
 * for engine migrate). */
#include "pg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

/* 4: SQLite's schema version 4 (slots, counters, tokens, the event feed),
 * plus the commits row store_data_version reads; 5: the leases of several
 * workers (SQLite has none: one worker holds a file); 6: tasks_leased, the
 * index of the attempts in flight (Q_TASK_DUE takes a dead worker's first);
 * 7: workflows.parent and parent_close (child workflows); 8: workflows.forked_from
 * (engine fork); 9: the hash chains (chain.c): history.chain,
 * domain_events.chain, where each workflow's chains start (workflows) and
 * their heads (chain_heads; UPGRADE_9 records an older database's upgrade); 10: tokens.grants (docs/grants.md);
 * 11: workflows_forked, the index of a fork's source (a workflow's forks);
 * 12: memory (docs/memory.md): approved knowledge and preferences, and their revocation */
#define SCHEMA_VERSION STORE_PG_SCHEMA_VERSION
/* a transaction with the schema's lock, in one round trip (one query string:
 * BEGIN holds past it; a lock_timeout leaves it aborted, rolled back by the
 * caller): the schema's creation, one opener at a time */
#define BEGIN_LOCKED "BEGIN; " ORDER_LOCK

#define T "TEXT COLLATE \"C\""
static const char *SCHEMA =
    "CREATE TABLE IF NOT EXISTS meta(key " T " PRIMARY KEY, value " T " NOT NULL);"
    /* store_data_version: every commit that wrote adds one (see pg_data_version) */
    "CREATE TABLE IF NOT EXISTS commits(one INTEGER PRIMARY KEY, n BIGINT NOT NULL);"
    "INSERT INTO commits VALUES(1, 0) ON CONFLICT DO NOTHING;"
    "CREATE TABLE IF NOT EXISTS workflows("
    "  id " T " PRIMARY KEY, run BIGINT NOT NULL, status " T " NOT NULL,"
    "  script_name " T " NOT NULL, script_dir " T " NOT NULL, code_hash " T " NOT NULL,"
    "  input " T ", result " T ", error " T ", cancel INTEGER NOT NULL DEFAULT 0,"
    "  created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS workflows_status ON workflows(status, updated_at);"
    "CREATE INDEX IF NOT EXISTS workflows_created ON workflows(created_at, id);"
    /* version 7: a child's parent (wf.child), at the end of the table in an older one too */
    "ALTER TABLE workflows ADD COLUMN IF NOT EXISTS parent " T ";"
    "ALTER TABLE workflows ADD COLUMN IF NOT EXISTS parent_close " T ";"
    "CREATE INDEX IF NOT EXISTS workflows_parent ON workflows(parent, created_at) WHERE parent IS NOT NULL;"
    /* version 8: a fork's source (engine fork) */
    "ALTER TABLE workflows ADD COLUMN IF NOT EXISTS forked_from " T ";"
    /* version 9: where the hash chains start (chain.c), written once; their
     * heads, written by every batch that moves them, a narrow row of their own */
    "ALTER TABLE workflows ADD COLUMN IF NOT EXISTS hist_from_run BIGINT NOT NULL DEFAULT 1;"
    "ALTER TABLE workflows ADD COLUMN IF NOT EXISTS hist_from_seq BIGINT NOT NULL DEFAULT 1;"
    "ALTER TABLE workflows ADD COLUMN IF NOT EXISTS dom_from BIGINT NOT NULL DEFAULT 1;"
    "CREATE TABLE IF NOT EXISTS chain_heads(wf_id " T " PRIMARY KEY, hist_head " T ", hist_seq BIGINT NOT NULL DEFAULT 0,"
    "  hist_base " T ", dom_head " T ", dom_seq BIGINT NOT NULL DEFAULT 0);"
    /* version 11: a workflow's forks, by the source's id in forked_from (few workflows are forks):
     * its "id" member as the engine writes it (ids hold no quote), read without a cast that a text
     * that is not JSON would fail */
    "CREATE INDEX IF NOT EXISTS workflows_forked ON workflows((substring(forked_from from '\"id\":\"([^\"]*)\"')), "
    "  created_at) WHERE forked_from IS NOT NULL;"
    "CREATE TABLE IF NOT EXISTS history("
    "  wf_id " T " NOT NULL, run BIGINT NOT NULL, seq BIGINT NOT NULL, type " T " NOT NULL,"
    "  ref BIGINT NOT NULL DEFAULT 0, name " T ", hash " T ", payload " T ", time BIGINT NOT NULL,"
    "  PRIMARY KEY(wf_id, run, seq));"
    "ALTER TABLE history ADD COLUMN IF NOT EXISTS chain " T ";"
    "CREATE TABLE IF NOT EXISTS code(hash " T " PRIMARY KEY, name " T " NOT NULL, source BYTEA NOT NULL);"
    "CREATE TABLE IF NOT EXISTS run_modules(wf_id " T " NOT NULL, run BIGINT NOT NULL, module " T " NOT NULL,"
    "  hash " T " NOT NULL, PRIMARY KEY(wf_id, run, module));"
    /* id: SQLite's rowid (a replaced task gets a new one, as INSERT OR REPLACE gives) */
    "CREATE TABLE IF NOT EXISTS tasks(id BIGSERIAL NOT NULL,"
    "  wf_id " T " NOT NULL, kind " T " NOT NULL, seq BIGINT NOT NULL, run_at BIGINT NOT NULL,"
    "  attempt INTEGER NOT NULL DEFAULT 0, first_at BIGINT NOT NULL DEFAULT 0,"
    "  lease_owner " T ", lease_until BIGINT NOT NULL DEFAULT 0,"
    "  PRIMARY KEY(wf_id, kind, seq));"
    "CREATE INDEX IF NOT EXISTS tasks_due ON tasks(run_at, id);"
    /* the attempts in flight, few: a dead worker's are taken first (Q_TASK_DUE) */
    "CREATE INDEX IF NOT EXISTS tasks_leased ON tasks(run_at, id) WHERE lease_owner IS NOT NULL;"
    "CREATE TABLE IF NOT EXISTS signals(id BIGSERIAL PRIMARY KEY, wf_id " T " NOT NULL, name " T " NOT NULL,"
    "  payload " T ", time BIGINT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS signals_wf ON signals(wf_id, name, id);"
    "CREATE TABLE IF NOT EXISTS domain_events(session_id " T " NOT NULL, seq BIGINT NOT NULL,"
    "  type " T " NOT NULL, time BIGINT NOT NULL, payload " T ", PRIMARY KEY(session_id, seq));"
    "ALTER TABLE domain_events ADD COLUMN IF NOT EXISTS chain " T ";"
    "CREATE TABLE IF NOT EXISTS event_feed(id BIGSERIAL PRIMARY KEY, session_id " T " NOT NULL, seq BIGINT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS tokens(name " T " PRIMARY KEY, hash " T " NOT NULL UNIQUE,"
    "  scopes BIGINT NOT NULL, created_at BIGINT NOT NULL, revoked_at BIGINT);"
    /* version 10: the grants a token carries (a JSON list; NULL: none) */
    "ALTER TABLE tokens ADD COLUMN IF NOT EXISTS grants " T ";"
    "CREATE TABLE IF NOT EXISTS slots(id BIGSERIAL PRIMARY KEY, pool " T " NOT NULL, key " T " NOT NULL,"
    "  wf_id " T " NOT NULL, seq BIGINT NOT NULL, lim BIGINT NOT NULL, held INTEGER NOT NULL DEFAULT 0,"
    "  since BIGINT NOT NULL, UNIQUE(wf_id, pool, key));"
    "CREATE INDEX IF NOT EXISTS slots_queue ON slots(pool, key, held, id);"
    "CREATE TABLE IF NOT EXISTS counters(name " T " PRIMARY KEY, value DOUBLE PRECISION NOT NULL DEFAULT 0,"
    "  window_start BIGINT NOT NULL DEFAULT 0, paused_until BIGINT NOT NULL DEFAULT 0,"
    "  updated_at BIGINT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS deliveries(id BIGSERIAL PRIMARY KEY, trig " T " NOT NULL, delivery " T " NOT NULL,"
    "  received_at BIGINT NOT NULL, outcome " T " NOT NULL, status INTEGER NOT NULL, wf_id " T ", detail " T ");"
    "CREATE UNIQUE INDEX IF NOT EXISTS deliveries_once ON deliveries(trig, delivery)"
    "  WHERE outcome IN ('started','existing') AND delivery <> '';"
    "CREATE INDEX IF NOT EXISTS deliveries_trig ON deliveries(trig, id);"
    "CREATE TABLE IF NOT EXISTS schedules(name " T " PRIMARY KEY, cron " T " NOT NULL, tz " T " NOT NULL,"
    "  script " T " NOT NULL, input " T " NOT NULL, overlap " T " NOT NULL, catchup_window_ms BIGINT NOT NULL,"
    "  jitter_ms BIGINT NOT NULL, paused INTEGER NOT NULL DEFAULT 0, next_fire_at BIGINT NOT NULL,"
    "  last_fire_at BIGINT NOT NULL DEFAULT 0, buffered_fire_at BIGINT NOT NULL DEFAULT 0,"
    "  skipped_count BIGINT NOT NULL DEFAULT 0, updated_at BIGINT NOT NULL, created_at BIGINT NOT NULL);"
    /* version 12: an approved memory entry (ops/memory.c); revoked_at NULL while it is given to sessions */
    "CREATE TABLE IF NOT EXISTS memory(id " T " PRIMARY KEY, kind " T " NOT NULL, identity " T ", text " T " NOT NULL,"
    "  evidence " T ", session_id " T " NOT NULL, request_id " T " NOT NULL, approver " T " NOT NULL,"
    "  approved_at BIGINT NOT NULL, revoked_at BIGINT, revoked_by " T ", revoke_reason " T ");"
    "CREATE INDEX IF NOT EXISTS memory_kind ON memory(kind, identity, approved_at);"
    /* version 5: which worker runs a workflow (store_lease_*); not copied by migrate */
    "CREATE TABLE IF NOT EXISTS leases(wf_id " T " PRIMARY KEY, owner " T " NOT NULL, epoch BIGINT NOT NULL,"
    "  expires_at BIGINT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS leases_owner ON leases(owner);";
#undef T

/* The upgrade of an older database to the hash chains, recorded: each
 * workflow's chains start at its next event (the events before have no
 * link, and verification starts there); one whose chain has a head already
 * (a version label set back by hand) keeps where it starts. */
static const char *UPGRADE_9 =
    "UPDATE workflows SET hist_from_run=run, hist_from_seq=(SELECT coalesce(max(seq),0)+1 FROM history h "
    "WHERE h.wf_id=workflows.id AND h.run=workflows.run) WHERE NOT EXISTS (SELECT 1 FROM chain_heads c "
    "WHERE c.wf_id=workflows.id AND c.hist_head IS NOT NULL);"
    "UPDATE workflows SET dom_from=(SELECT coalesce(max(seq),0)+1 FROM domain_events d "
    "WHERE d.session_id=workflows.id) WHERE NOT EXISTS (SELECT 1 FROM chain_heads c "
    "WHERE c.wf_id=workflows.id AND c.dom_head IS NOT NULL);";

/* ---- opening ---- */

/* The schema version (0: none, -1: the read failed) and how many tables the
 * connection's schema holds (someone else's database when not ours). */
static int schema_state(PGconn *c, int *other) {
  *other = 0;
  /* the common case first, our version in our meta table: the catalog's
   * count below costs a new session about 6 ms, a CLI command's tenth.
   * Outside a transaction only: a missing table would abort one. */
  PGresult *r = NULL;
  if (PQtransactionStatus(c) == PQTRANS_IDLE) {
    r = PQexec(c, "SELECT value FROM meta WHERE key='schema_version'");
    int fast = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 ? atoi(PQgetvalue(r, 0, 0)) : 0;
    PQclear(r);
    if (fast > 0) return fast;
  }
  r = PQexec(c, "SELECT count(*), count(*) FILTER (WHERE tablename='meta') FROM pg_tables "
                          "WHERE schemaname=current_schema()");
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    PQclear(r);
    return -1;
  }
  *other = atoi(PQgetvalue(r, 0, 0));
  int meta = atoi(PQgetvalue(r, 0, 1));
  PQclear(r);
  if (!meta) return 0;
  r = PQexec(c, "SELECT value FROM meta WHERE key='schema_version'");
  int have = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 ? atoi(PQgetvalue(r, 0, 0)) : 0;
  PQclear(r);
  return have;
}

static pg *new_pg(const char *url, PGconn *c, const char *where, const char *settings) {
  pg *s = util_xcalloc(1, sizeof *s);
  snprintf(s->settings, sizeof s->settings, "%s", settings);
  s->base.ops = &store_pg_ops;
  s->base.errbuf = s->err;
  s->base.errlen = sizeof s->err;
  s->conn = c;
  s->path = util_strdup(url);
  snprintf(s->where, sizeof s->where, "%s", where);
  s->max_length = store_max_length();
  strmap_init(&s->held);
  strmap_init(&s->task_ops);
  strmap_init(&s->status_ops);
  s->before_send = pg_rows_flush_before;
  strmap_init(&s->claimed);
  strmap_init(&s->fenced);
  strmap_init(&s->releasing);
  strmap_init(&s->locked);
  return s;
}

/* The session's settings into sql (kept by the store: a reconnection sets
 * them again), then set on c. */
static void set_session(PGconn *c, char *sql, size_t n, int lock_ms, int statement_ms, int readonly) {
  snprintf(sql, n, "SET lock_timeout = %d; SET statement_timeout = %d%s", lock_ms, statement_ms,
           readonly ? "; SET default_transaction_read_only = on" : "");
  pg_simple(c, sql, (char[8]){0}, 8, NULL);
}

int store_pg_open(const char *url, int must_exist, const char *app, store **out, char *err, size_t errlen) {
  *out = NULL;
  char where[256], why[384];
  PGconn *c = pg_connect_url(url, app, "10", where, sizeof where, err, errlen);
  if (!c) return STORE_ERR;
  char settings[160];
  set_session(c, settings, sizeof settings, store_busy_timeout_ms(), 0, 0);
  int other, have = schema_state(c, &other), kind = STORE_ERR;
  if (have < 0) {
    pq_reason(c, NULL, why, sizeof why);
    util_seterr(err, errlen, "cannot read database %s: %s", where, why);
    PQfinish(c);
    return STORE_ERR;
  }
  if (have > SCHEMA_VERSION) goto newer;
  if (have == 0 && other > 0) goto not_ours;
  if (have == 0 && must_exist) {
    util_seterr(err, errlen, "database %s holds no engine data yet (start a workflow first, or pass --db)", where);
    PQfinish(c);
    return STORE_ERR;
  }
  if (have < SCHEMA_VERSION) {
    /* created in one transaction, one creator at a time */
    if (!pg_simple(c, BEGIN_LOCKED, why, sizeof why, &kind)) goto failed;
    have = schema_state(c, &other);
    if (have > SCHEMA_VERSION || (have == 0 && other > 0)) {
      PQclear(PQexec(c, "ROLLBACK"));
      if (have > SCHEMA_VERSION) goto newer;
      goto not_ours;
    }
    char ins[160];
    snprintf(ins, sizeof ins, "INSERT INTO meta VALUES('instance_id','%016llx') ON CONFLICT DO NOTHING",
             (unsigned long long)util_random64());
    /* another process may have created it while we waited: then only the COMMIT */
    if ((have < SCHEMA_VERSION &&
         (!pg_simple(c, SCHEMA, why, sizeof why, &kind) ||
          (have > 0 && have < 9 && !pg_simple(c, UPGRADE_9, why, sizeof why, &kind)) ||
          !pg_simple(c, "INSERT INTO meta VALUES('schema_version','" STR(SCHEMA_VERSION) "') ON CONFLICT(key) DO UPDATE "
                     "SET value=excluded.value", why, sizeof why, &kind) ||
          !pg_simple(c, ins, why, sizeof why, &kind))) ||
        !pg_simple(c, "COMMIT", why, sizeof why, &kind)) {
      PQclear(PQexec(c, "ROLLBACK"));
      goto failed;
    }
  }
  *out = &new_pg(url, c, where, settings)->base;
  return STORE_OK;
newer:
  util_seterr(err, errlen, "database %s has schema version %d; this engine knows up to %d", where, have,
              SCHEMA_VERSION);
  PQfinish(c);
  return STORE_ERR;
not_ours:
  util_seterr(err, errlen, "%s is not an engine database (its schema holds other tables)", where);
  PQfinish(c);
  return STORE_ECORRUPT;
failed:
  if (kind == STORE_EBUSY)
    util_seterr(err, errlen, "database %s is locked by another process (%s)", where, why);
  else
    util_seterr(err, errlen, "cannot create the engine's tables in %s: %s", where, why);
  PQfinish(c);
  return kind;
}

int store_pg_open_readonly(const char *url, int busy_ms, store **out, char *err, size_t errlen) {
  *out = NULL;
  char where[256], why[384];
  /* completion must answer at once: 2 s is the shortest wait libpq keeps */
  PGconn *c = pg_connect_url(url, "engine (read-only)", "2", where, sizeof where, err, errlen);
  if (!c) return STORE_ERR;
  char settings[160];
  set_session(c, settings, sizeof settings, busy_ms, busy_ms, 1);
  int other, have = schema_state(c, &other);
  int kind = STORE_OK;
  if (have < 0) {
    pq_reason(c, NULL, why, sizeof why);
    util_seterr(err, errlen, "cannot read database %s: %s", where, why);
    kind = STORE_ERR;
  } else if (have == 0 && other == 0) {
    util_seterr(err, errlen, "database %s holds no engine data yet", where);
    kind = STORE_EMPTY;
  } else if (have == 0) {
    util_seterr(err, errlen, "%s is not an engine database", where);
    kind = STORE_ECORRUPT;
  } else if (have > SCHEMA_VERSION) {
    util_seterr(err, errlen, "database %s has schema version %d; this engine knows up to %d", where, have,
                SCHEMA_VERSION);
    kind = STORE_ERR;
  }
  if (kind != STORE_OK) {
    PQfinish(c);
    return kind;
  }
  *out = &new_pg(url, c, where, settings)->base;
  return STORE_OK;
}

/* A read-write transaction that rewrites the schema version's row as it is,
 * then rolls back (a read-only open's sessions default to read only). */
static int pg_write_probe(store *st_, char *err, size_t errlen) {
  pg *s = (pg *)st_;
  char why[384];
  if (s->in_txn) {
    util_seterr(err, errlen, "a batch is open");
    return STORE_ERR;
  }
  int ok = pg_simple(s->conn, "BEGIN READ WRITE; UPDATE meta SET value=value WHERE key='schema_version'", why,
                     sizeof why, NULL);
  if (!ok) util_seterr(err, errlen, "a write to %s failed: %s", s->where, why);
  PQclear(PQexec(s->conn, "ROLLBACK"));
  return ok ? STORE_OK : STORE_ERR;
}

/* The server's clock_timestamp() against ours (the wall clock, never a test's
 * virtual one) at the middle of the round trip. */
static int pg_clock_skew(store *st_, int64_t *skew_ms, int64_t *rtt_ms) {
  pg *s = (pg *)st_;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t t0 = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, m0 = util_mono_ms();
  PGresult *r = PQexec(s->conn, "SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint");
  int64_t m1 = util_mono_ms();
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
    char why[384];
    pq_reason(s->conn, r, why, sizeof why);
    util_seterr(s->err, sizeof s->err, "the clock of %s: %s", s->where, why);
    PQclear(r);
    return STORE_ERR;
  }
  int64_t server = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
  PQclear(r);
  *rtt_ms = m1 - m0;
  *skew_ms = server - (t0 + *rtt_ms / 2);
  return STORE_OK;
}

/* ---- the store's own state ---- */

static void pg_close(store *st_) {
  pg *s = (pg *)st_;
  if (!s) return;
  pg_rollback(&s->base);
  pg_task_due_result(st_, STORE_ERR, NULL, NULL); /* a dispatch's answers no one read */
  if (s->start_res) pg_task_start_result(st_, STORE_ERR, NULL, s->start_n, NULL);
  PQfinish(s->conn);
  for (int i = 0; i < 4; i++)
    if (s->listen[i]) PQfinish(s->listen[i]);
  free(s->pipeq);
  pg_rows_free(s);
  strmap_free(&s->held);
  strmap_free(&s->claimed);
  strmap_free(&s->fenced);
  strmap_free(&s->releasing);
  strmap_free(&s->locked);
  pg_params_start(s); /* frees the last copies */
  chain_cache_free(&s->base);
  free(s->path);
  free(s);
}

static const char *pg_errmsg(store *st_) { return ((pg *)st_)->err; }

static const char *pg_path(store *st_) { return ((pg *)st_)->path; }

static int pg_instance_id(store *st_, char *out, size_t n) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, "instance_id");
  PGresult *r = pq_run(s, Q_META_GET, 0, "instance id");
  int found = r && PQntuples(r) > 0;
  if (found) snprintf(out, n, "%s", PQgetvalue(r, 0, 0));
  PQclear(r);
  return found ? 0 : -1;
}

const store_ops store_pg_ops = {
    .op_close = pg_close,
    .op_errmsg = pg_errmsg,
    .op_path = pg_path,
    .op_instance_id = pg_instance_id,
    .op_begin = pg_begin,
    .op_commit = pg_commit,
    .op_rollback = pg_rollback,
    .op_in_txn = pg_in_txn,
    .op_batch_failed = pg_batch_failed,
    .op_batch_writes = pg_batch_writes,
    .op_round_trips = pg_round_trips,
    .op_data_version = pg_data_version,
    .op_commit_fd = pg_commit_fd,
    .op_write_probe = pg_write_probe,
    .op_clock_skew = pg_clock_skew,
    .op_commit_drain = pg_commit_drain,
    .op_lease_claim = pg_lease_claim,
    .op_lease_held = pg_lease_held,
    .op_lease_count = pg_lease_count,
    .op_lease_fence = pg_lease_fence,
    .op_lease_renew = pg_lease_renew,
    .op_lease_release = pg_lease_release,
    .op_wf_insert = pg_wf_insert,
    .op_wf_start = pg_wf_start,
    .op_wf_start_send = pg_wf_start_send,
    .op_start_result = pg_start_result,
    .op_start_free = pg_start_free,
    .op_wf_get = pg_wf_get,
    .op_wf_set_status = pg_wf_set_status,
    .op_wf_set_cancel = pg_wf_set_cancel,
    .op_wf_set_code = pg_wf_set_code,
    .op_wf_new_run = pg_wf_new_run,
    .op_wf_list = pg_wf_list,
    .op_wf_page = pg_wf_page,
    .op_wf_ids = pg_wf_ids,
    .op_wf_children = pg_wf_children,
    .op_wf_forks = pg_wf_forks,
    .op_wf_subtree = pg_wf_subtree,
    .op_wf_depth = pg_wf_depth,
    .op_wf_children_running = pg_wf_children_running,
    .op_hist_append = pg_hist_append,
    .op_hist_load = pg_hist_load,
    .op_chain_get = pg_chain_get,
    .op_hist_range = pg_hist_range,
    .op_hist_max_seq = pg_hist_max_seq,
    .op_hist_outcome = pg_hist_outcome,
    .op_hist_get = pg_hist_get,
    .op_code_put = pg_code_put,
    .op_code_get = pg_code_get,
    .op_module_pin = pg_module_pin,
    .op_module_get = pg_module_get,
    .op_modules_clear = pg_modules_clear,
    .op_modules_copy = pg_modules_copy,
    .op_fork_modules = pg_fork_modules,
    .op_task_put = pg_task_put,
    .op_task_del = pg_task_del,
    .op_task_take = pg_task_take,
    .op_task_start = pg_task_start,
    .op_task_start_send = pg_task_start_send,
    .op_task_start_result = pg_task_start_result,
    .op_task_due_send = pg_task_due_send,
    .op_task_due_result = pg_task_due_result,
    .op_wf_view = pg_wf_view,
    .op_task_release = pg_task_release,
    .op_task_del_wf = pg_task_del_wf,
    .op_task_get = pg_task_get,
    .op_task_due = pg_task_due,
    .op_task_next_at = pg_task_next_at,
    .op_task_next_send = pg_task_next_send,
    .op_task_next_result = pg_task_next_result,
    .op_task_count = pg_task_count,
    .op_signal_put = pg_signal_put,
    .op_signal_take = pg_signal_take,
    .op_signal_wake = pg_signal_wake,
    .op_signal_count = pg_signal_count,
    .op_signal_has = pg_signal_has,
    .op_signal_del_wf = pg_signal_del_wf,
    .op_domain_append = pg_domain_append,
    .op_domain_list = pg_domain_list,
    .op_feed_after = pg_feed_after,
    .op_feed_last = pg_feed_last,
    .op_meta_get = pg_meta_get,
    .op_meta_put = pg_meta_put,
    .op_delivery_put = pg_delivery_put,
    .op_delivery_find = pg_delivery_find,
    .op_delivery_list = pg_delivery_list,
    .op_token_put = pg_token_put,
    .op_token_revoke = pg_token_revoke,
    .op_token_list = pg_token_list,
    .op_token_live = pg_token_live,
    .op_token_live_count = pg_token_live_count,
    .op_slot_put = pg_slot_put,
    .op_slot_get = pg_slot_get,
    .op_slot_head = pg_slot_head,
    .op_slot_count = pg_slot_count,
    .op_slot_hold = pg_slot_hold,
    .op_slot_del = pg_slot_del,
    .op_slot_list = pg_slot_list,
    .op_table_page = pg_table_page,
    .op_table_insert = pg_table_insert,
    .op_table_count = pg_table_count,
    .op_table_finish = pg_table_finish,
    .op_counter_get = pg_counter_get,
    .op_counter_put = pg_counter_put,
    .op_counter_list = pg_counter_list,
    .op_schedule_insert = pg_schedule_insert,
    .op_schedule_update = pg_schedule_update,
    .op_schedule_get = pg_schedule_get,
    .op_schedule_list = pg_schedule_list,
    .op_schedule_del = pg_schedule_del,
    .op_group_count = pg_group_count,
    .op_commit_start = pg_commit_start,
    .op_commit_socket = pg_commit_socket,
    .op_commit_progress = pg_commit_progress,
    .op_commit_settle = pg_commit_settle,
    .op_read_progress = pg_read_progress,
    .op_read_settle = pg_read_settle,
    .op_live_list = pg_live_list,
    .op_count = pg_count,
    .op_memory_put = pg_memory_put,
    .op_memory_revoke = pg_memory_revoke,
    .op_memory_list = pg_memory_list,
};
