/* sqlite: the store on SQLite, for a database file (store_open of a path
 * that is not a URL). One worker holds the file (engine_lock): every lease
 * is its own, and a batch is one BEGIN IMMEDIATE transaction, committed at
 * once (store_commit_start has nothing to wait for).
 *
 * The backend's files (sqlite_internal.h is what they share): sqlite.c
 * opens a database (its pragmas, creating or migrating its schema) and
 * holds the operations' table (store_sqlite_ops); sqlite_exec.c runs
 * statements (prepared once, bound, their errors kept) and the batch;
 * sqlite_wal.c copies the WAL into the database file (checkpoints);
 * sqlite_sql.c has the statements' text; and the statements, by what they
 * store: sqlite_workflows.c (workflows, history, code and modules),
 * sqlite_tasks.c (tasks, signals), sqlite_records.c (domain events and the
 * feed, meta, tokens, slots, counters, deliveries, schedules, counts) and
 * sqlite_tables.c (whole tables, for engine migrate). */
#include "sqlite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

/* 2: event_feed (one order over every session's events, for GET /v1/events), tokens
 * 3: slots (concurrency limits and caps) and counters (quotas, rate windows)
 * 4: deliveries (webhook deliveries and their outcomes) and schedules
 * 5: workflows.parent and parent_close (child workflows)
 * 6: workflows.forked_from (engine fork)
 * 7: the hash chains (chain.c): history.chain, domain_events.chain, where
 *    each workflow's chains start (workflows) and their heads (chain_heads)
 * 8: tokens.grants (docs/grants.md)
 * 9: workflows_forked, the index of a fork's source (a workflow's forks)
 * 10: memory (docs/memory.md): approved knowledge and preferences, and their revocation */
#define SCHEMA_VERSION STORE_SQLITE_SCHEMA_VERSION
#define STR_(x) #x
#define STR(x) STR_(x)

/* Where a workflow's hash chains (chain.c) start: 1 for a workflow made with
 * them (a fork: its run's first event), the next event at the upgrade for
 * one made before (UPGRADE_7). Written once; the heads, written by every
 * batch that moves them, are a narrow row of their own (chain_heads), not
 * a rewrite of this wide one. */
#define CHAIN_COLUMNS \
  " hist_from_run INTEGER NOT NULL DEFAULT 1, hist_from_seq INTEGER NOT NULL DEFAULT 1, dom_from INTEGER NOT NULL DEFAULT 1"

static const char *SCHEMA =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS workflows("
    "  id TEXT PRIMARY KEY, run INTEGER NOT NULL, status TEXT NOT NULL,"
    "  script_name TEXT NOT NULL, script_dir TEXT NOT NULL, code_hash TEXT NOT NULL,"
    "  input TEXT, result TEXT, error TEXT, cancel INTEGER NOT NULL DEFAULT 0,"
    "  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, parent TEXT, parent_close TEXT, forked_from TEXT," CHAIN_COLUMNS ");"
    "CREATE INDEX IF NOT EXISTS workflows_status ON workflows(status, updated_at);"
    /* a parent's children (wf.child): few workflows have a parent */
    "CREATE INDEX IF NOT EXISTS workflows_parent ON workflows(parent, created_at) WHERE parent IS NOT NULL;"
    /* a workflow's forks (engine fork): the source's id in forked_from; few workflows are forks
     * (a text that is not JSON, which the engine never writes, is indexed as no source: never an error) */
    "CREATE INDEX IF NOT EXISTS workflows_forked ON workflows("
    "  (CASE WHEN json_valid(forked_from) THEN json_extract(forked_from, '$.id') END), created_at) "
    "  WHERE forked_from IS NOT NULL;"
    /* the API's pages (either direction) read a range of it, not the table sorted */
    "CREATE INDEX IF NOT EXISTS workflows_created ON workflows(created_at, id);"
    "CREATE TABLE IF NOT EXISTS history("
    "  wf_id TEXT NOT NULL, run INTEGER NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,"
    "  ref INTEGER NOT NULL DEFAULT 0, name TEXT, hash TEXT, payload TEXT, time INTEGER NOT NULL, chain TEXT,"
    "  PRIMARY KEY(wf_id, run, seq)) WITHOUT ROWID;"
    /* each workflow's hash chains' heads (chain.c): the last link and its
     * seq, the link its current run's first event follows */
    "CREATE TABLE IF NOT EXISTS chain_heads(wf_id TEXT PRIMARY KEY, hist_head TEXT, hist_seq INTEGER NOT NULL DEFAULT 0,"
    "  hist_base TEXT, dom_head TEXT, dom_seq INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS code(hash TEXT PRIMARY KEY, name TEXT NOT NULL, source BLOB NOT NULL);"
    "CREATE TABLE IF NOT EXISTS run_modules(wf_id TEXT NOT NULL, run INTEGER NOT NULL, module TEXT NOT NULL,"
    "  hash TEXT NOT NULL, PRIMARY KEY(wf_id, run, module)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS tasks("
    "  wf_id TEXT NOT NULL, kind TEXT NOT NULL, seq INTEGER NOT NULL, run_at INTEGER NOT NULL,"
    "  attempt INTEGER NOT NULL DEFAULT 0, first_at INTEGER NOT NULL DEFAULT 0,"
    "  lease_owner TEXT, lease_until INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY(wf_id, kind, seq));"
    "CREATE INDEX IF NOT EXISTS tasks_due ON tasks(run_at);"
    "CREATE TABLE IF NOT EXISTS signals(id INTEGER PRIMARY KEY, wf_id TEXT NOT NULL, name TEXT NOT NULL,"
    "  payload TEXT, time INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS signals_wf ON signals(wf_id, name, id);"
    "CREATE TABLE IF NOT EXISTS domain_events(session_id TEXT NOT NULL, seq INTEGER NOT NULL,"
    "  type TEXT NOT NULL, time INTEGER NOT NULL, payload TEXT, chain TEXT,"
    "  PRIMARY KEY(session_id, seq)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS event_feed(id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seq INTEGER NOT NULL);"
    /* API tokens keep only the SHA-256 of their secret (tokens.c) */
    "CREATE TABLE IF NOT EXISTS tokens(name TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE,"
    "  scopes INTEGER NOT NULL, created_at INTEGER NOT NULL, revoked_at INTEGER, grants TEXT);"
    /* a slot of a pool and key, held or queued (FIFO by id) by the command at seq of a workflow */
    "CREATE TABLE IF NOT EXISTS slots(id INTEGER PRIMARY KEY, pool TEXT NOT NULL, key TEXT NOT NULL,"
    "  wf_id TEXT NOT NULL, seq INTEGER NOT NULL, lim INTEGER NOT NULL, held INTEGER NOT NULL DEFAULT 0,"
    "  since INTEGER NOT NULL, UNIQUE(wf_id, pool, key));"
    "CREATE INDEX IF NOT EXISTS slots_queue ON slots(pool, key, held, id);"
    /* a named total, or a rate window (value used since window_start; none granted before paused_until) */
    "CREATE TABLE IF NOT EXISTS counters(name TEXT PRIMARY KEY, value REAL NOT NULL DEFAULT 0,"
    "  window_start INTEGER NOT NULL DEFAULT 0, paused_until INTEGER NOT NULL DEFAULT 0,"
    "  updated_at INTEGER NOT NULL);"
    /* an accepted delivery's (trigger, delivery id) is taken once: a redelivery finds it */
    "CREATE TABLE IF NOT EXISTS deliveries(id INTEGER PRIMARY KEY, trig TEXT NOT NULL, delivery TEXT NOT NULL,"
    "  received_at INTEGER NOT NULL, outcome TEXT NOT NULL, status INTEGER NOT NULL, wf_id TEXT, detail TEXT);"
    "CREATE UNIQUE INDEX IF NOT EXISTS deliveries_once ON deliveries(trig, delivery)"
    "  WHERE outcome IN ('started','existing') AND delivery <> '';"
    "CREATE INDEX IF NOT EXISTS deliveries_trig ON deliveries(trig, id);"
    /* a cron schedule and where it stands: the next fire is moved in the batch that starts a fire */
    "CREATE TABLE IF NOT EXISTS schedules(name TEXT PRIMARY KEY, cron TEXT NOT NULL, tz TEXT NOT NULL,"
    "  script TEXT NOT NULL, input TEXT NOT NULL, overlap TEXT NOT NULL, catchup_window_ms INTEGER NOT NULL,"
    "  jitter_ms INTEGER NOT NULL, paused INTEGER NOT NULL DEFAULT 0, next_fire_at INTEGER NOT NULL,"
    "  last_fire_at INTEGER NOT NULL DEFAULT 0, buffered_fire_at INTEGER NOT NULL DEFAULT 0,"
    "  skipped_count INTEGER NOT NULL DEFAULT 0, updated_at INTEGER NOT NULL, created_at INTEGER NOT NULL);"
    /* an approved memory entry (ops/memory.c); revoked_at NULL while it is given to sessions */
    "CREATE TABLE IF NOT EXISTS memory(id TEXT PRIMARY KEY, kind TEXT NOT NULL, identity TEXT, text TEXT NOT NULL,"
    "  evidence TEXT, session_id TEXT NOT NULL, request_id TEXT NOT NULL, approver TEXT NOT NULL,"
    "  approved_at INTEGER NOT NULL, revoked_at INTEGER, revoked_by TEXT, revoke_reason TEXT);"
    "CREATE INDEX IF NOT EXISTS memory_kind ON memory(kind, identity, approved_at);";

/* The columns a database older than version 5 lacks, added before SCHEMA
 * runs again (its index on them needs them; SQLite has no ADD COLUMN IF NOT
 * EXISTS). At the end of the table, as a new database has them. */
static const char *MIGRATE_5 =
    "ALTER TABLE workflows ADD COLUMN parent TEXT; ALTER TABLE workflows ADD COLUMN parent_close TEXT;";
/* And the one older than version 6 lacks (after those of version 5). */
static const char *MIGRATE_6 = "ALTER TABLE workflows ADD COLUMN forked_from TEXT;";

/* The hash chains' columns a database older than version 7 lacks (after
 * those of version 6). */
static const char *MIGRATE_7 =
    "ALTER TABLE history ADD COLUMN chain TEXT; ALTER TABLE domain_events ADD COLUMN chain TEXT;"
    "ALTER TABLE workflows ADD COLUMN hist_from_run INTEGER NOT NULL DEFAULT 1;"
    "ALTER TABLE workflows ADD COLUMN hist_from_seq INTEGER NOT NULL DEFAULT 1;"
    "ALTER TABLE workflows ADD COLUMN dom_from INTEGER NOT NULL DEFAULT 1;";

/* The upgrade to the hash chains, recorded: each workflow's chains start at
 * its next event (the events before it have no link, and verification
 * starts there). A workflow whose chain has a head already (a version label
 * set back by hand) keeps where it starts. */
static const char *UPGRADE_7 =
    "UPDATE workflows SET hist_from_run=run, hist_from_seq=(SELECT coalesce(max(seq),0)+1 FROM history h "
    "WHERE h.wf_id=workflows.id AND h.run=workflows.run) WHERE NOT EXISTS (SELECT 1 FROM chain_heads c "
    "WHERE c.wf_id=workflows.id AND c.hist_head IS NOT NULL);"
    "UPDATE workflows SET dom_from=(SELECT coalesce(max(seq),0)+1 FROM domain_events d "
    "WHERE d.session_id=workflows.id) WHERE NOT EXISTS (SELECT 1 FROM chain_heads c "
    "WHERE c.wf_id=workflows.id AND c.dom_head IS NOT NULL);";

/* Version 8: the grants a token carries (a JSON list; NULL: none), added after
 * SCHEMA ran, by whether the column is there (whatever the version number
 * that comes before it): a tokens table SCHEMA made has it already. */
static const char *MIGRATE_TOKEN_GRANTS = "ALTER TABLE tokens ADD COLUMN grants TEXT;";

/* A database of an older version gets what it lacks, in one transaction:
 * SCHEMA again (it only creates what is missing), and the feed of the events
 * it has, in the order they were written. */
static const char *MIGRATE =
    "INSERT INTO event_feed(session_id,seq) SELECT session_id,seq FROM domain_events "
    "WHERE NOT EXISTS(SELECT 1 FROM event_feed) ORDER BY time, session_id, seq;";

/* ---- opening ---- */

static void sq_close(store *st_);

static int open_once(const char *path, int must_exist, store **out, char *err, size_t errlen);

/* Opening races with another process creating the schema or switching to WAL
 * (SQLite reports those as busy without waiting), so busy opens are retried
 * for as long as the busy timeout allows. */
int store_sqlite_open(const char *path, int must_exist, store **out, char *err, size_t errlen) {
  int64_t deadline = util_mono_ms() + store_busy_timeout_ms();
  for (;;) {
    int rc = open_once(path, must_exist, out, err, errlen);
    if (rc != STORE_EBUSY || util_mono_ms() >= deadline) return rc;
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* The schema version (0: none) and how many objects the file holds, read in
 * one snapshot: read apart, a creation committed by another process between
 * the two reads looked like someone else's tables. */
static void schema_state(sq *s, int *have, int *other) {
  sqlite3_stmt *st = NULL;
  int meta = 0;
  *have = *other = 0;
  if (sqlite3_prepare_v2(s->db, "SELECT count(*), count(CASE WHEN type='table' AND name='meta' THEN 1 END) FROM sqlite_master",
                         -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    *other = sqlite3_column_int(st, 0);
    meta = sqlite3_column_int(st, 1);
  }
  sqlite3_finalize(st);
  st = NULL;
  /* meta and its version are written in one transaction: a meta seen has one */
  if (meta && sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key='schema_version'", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    *have = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
}

/* Whether table has column (a version label set back by hand keeps the
 * columns it had: they are not added twice). */
static int has_column(sq *s, const char *table, const char *column) {
  sqlite3_stmt *st = NULL;
  int has = 0;
  if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM pragma_table_info(?) WHERE name=?", -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, column, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) has = sqlite3_column_int(st, 0) > 0;
  }
  sqlite3_finalize(st);
  return has;
}

static int open_once(const char *path, int must_exist, store **out, char *err, size_t errlen) {
  *out = NULL;
  sq *s = util_xcalloc(1, sizeof *s);
  s->base.ops = &store_sqlite_ops;
  s->base.errbuf = s->err;
  s->base.errlen = sizeof s->err;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (must_exist ? 0 : SQLITE_OPEN_CREATE);
  int rc = sqlite3_open_v2(path, &s->db, flags, NULL);
  if (rc != SQLITE_OK) {
    util_seterr(err, errlen, "cannot open database %s: %s", path, s->db ? sqlite3_errmsg(s->db) : "out of memory");
    sqlite3_close(s->db);
    free(s);
    return rc == SQLITE_CANTOPEN ? STORE_ERR : sq_classify(rc);
  }
  s->path = util_strdup(path);
  /* ENGINE_STORE_MAX_LENGTH (bytes), for tests: SQLite's limit on a string or
   * blob, lowered so a bind fails for real without a gigabyte value */
  int maxlen = store_max_length();
  if (maxlen > 0) sqlite3_limit(s->db, SQLITE_LIMIT_LENGTH, maxlen);
  sqlite3_busy_timeout(s->db, store_busy_timeout_ms());
  const char *sync = getenv("ENGINE_SYNCHRONOUS");
  char pragmas[256];
  /* cell_size_check: a damaged page is an error when it is read, not a scan
   * that quietly ends early (a history cut short with no error at all) */
  snprintf(pragmas, sizeof pragmas,
           "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s; PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY; "
           "PRAGMA cell_size_check=ON;",
           sync && *sync ? sync : "FULL");
  snprintf(s->sync, sizeof s->sync, "%s", sync && *sync && strlen(sync) < sizeof s->sync ? sync : "FULL");
  char *emsg = NULL;
  /* The first statement reads the header: a file that is not SQLite fails here.
   * Nothing is written (not even WAL mode) before we know the file is ours. */
  rc = sqlite3_exec(s->db, "SELECT count(*) FROM sqlite_master", NULL, NULL, &emsg);
  int have = 0, other = 0;
  if (rc == SQLITE_OK) {
    schema_state(s, &have, &other);
    if (have > SCHEMA_VERSION) {
      util_seterr(err, errlen, "database %s has schema version %d; this engine knows up to %d", path, have,
                  SCHEMA_VERSION);
      sq_close(&s->base);
      return STORE_ERR;
    }
    if (have == 0 && (other > 0 || must_exist)) {
      /* a valid SQLite file that holds someone else's tables is not ours to change */
      util_seterr(err, errlen, "%s is not an engine database", path);
      sq_close(&s->base);
      return STORE_ECORRUPT;
    }
    rc = sqlite3_exec(s->db, pragmas, NULL, NULL, &emsg);
    /* in place of SQLite's auto-checkpoint inside a commit (sqlite_wal.c) */
    if (rc == SQLITE_OK) sqlite3_wal_hook(s->db, sq_on_wal_commit, s);
  }
  if (rc == SQLITE_OK && have < SCHEMA_VERSION) {
    sqlite3_free(emsg);
    emsg = NULL;
    rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, &emsg);
    /* another process may have created or migrated it while we waited */
    if (rc == SQLITE_OK) schema_state(s, &have, &other);
    if (rc == SQLITE_OK && (have > SCHEMA_VERSION || (have == 0 && other > 0))) {
      sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
      if (have > SCHEMA_VERSION)
        util_seterr(err, errlen, "database %s has schema version %d; this engine knows up to %d", path, have,
                    SCHEMA_VERSION);
      else
        util_seterr(err, errlen, "%s is not an engine database", path);
      sq_close(&s->base);
      return have > SCHEMA_VERSION ? STORE_ERR : STORE_ECORRUPT;
    }
    if (rc == SQLITE_OK && have > 0 && have < 5 && !has_column(s, "workflows", "parent"))
      rc = sqlite3_exec(s->db, MIGRATE_5, NULL, NULL, &emsg);
    if (rc == SQLITE_OK && have > 0 && have < 6 && !has_column(s, "workflows", "forked_from"))
      rc = sqlite3_exec(s->db, MIGRATE_6, NULL, NULL, &emsg);
    if (rc == SQLITE_OK && have > 0 && have < 7 && !has_column(s, "history", "chain"))
      rc = sqlite3_exec(s->db, MIGRATE_7, NULL, NULL, &emsg);
    if (rc == SQLITE_OK && have < SCHEMA_VERSION) rc = sqlite3_exec(s->db, SCHEMA, NULL, NULL, &emsg);
    if (rc == SQLITE_OK && have > 0 && have < SCHEMA_VERSION && !has_column(s, "tokens", "grants"))
      rc = sqlite3_exec(s->db, MIGRATE_TOKEN_GRANTS, NULL, NULL, &emsg);
    if (rc == SQLITE_OK && have > 0 && have < SCHEMA_VERSION) rc = sqlite3_exec(s->db, MIGRATE, NULL, NULL, &emsg);
    if (rc == SQLITE_OK && have > 0 && have < 7) rc = sqlite3_exec(s->db, UPGRADE_7, NULL, NULL, &emsg);
    if (rc == SQLITE_OK && have < SCHEMA_VERSION)
      rc = sqlite3_exec(s->db, "INSERT OR REPLACE INTO meta VALUES('schema_version','" STR(SCHEMA_VERSION) "')",
                        NULL, NULL, &emsg);
    if (rc == SQLITE_OK) {
      /* names this database's sandboxes, so a sweep never touches another's */
      char ins[128];
      snprintf(ins, sizeof ins, "INSERT OR IGNORE INTO meta VALUES('instance_id','%016llx')",
               (unsigned long long)util_random64());
      rc = sqlite3_exec(s->db, ins, NULL, NULL, &emsg);
    }
    if (rc == SQLITE_OK) rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, &emsg);
    /* the failure's code is kept for classify below: a ROLLBACK with no
     * transaction open (BEGIN was busy) would replace it */
    if (rc != SQLITE_OK && !sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    if (rc != SQLITE_OK && have > 0 && (rc & 0xff) == SQLITE_READONLY) {
      /* an older database that is read-only reads as before; only what needs
       * the new tables (tokens, the event feed) fails, naming the table */
      sqlite3_free(emsg);
      emsg = NULL;
      rc = SQLITE_OK;
    }
  }
  if (rc != SQLITE_OK) {
    int kind = sq_classify(sqlite3_extended_errcode(s->db));
    if (kind == STORE_EBUSY)
      util_seterr(err, errlen, "database %s is locked by another process (%s)", path, emsg ? emsg : "busy");
    else if (kind == STORE_ECORRUPT)
      util_seterr(err, errlen, "database %s is corrupt or not an engine database (%s)", path, emsg ? emsg : "");
    else
      util_seterr(err, errlen, "cannot open database %s: %s", path, emsg ? emsg : sqlite3_errmsg(s->db));
    sqlite3_free(emsg);
    sq_close(&s->base);
    return kind;
  }
  *out = &s->base;
  return STORE_OK;
}

int store_sqlite_open_readonly(const char *path, int busy_ms, store **out, char *err, size_t errlen) {
  *out = NULL;
  sq *s = util_xcalloc(1, sizeof *s);
  s->base.ops = &store_sqlite_ops;
  s->base.errbuf = s->err;
  s->base.errlen = sizeof s->err;
  /* READWRITE without CREATE, made read-only by query_only: a read-only
   * connection that is the last to close leaves -wal and -shm files behind,
   * this one removes them as every engine connection does */
  int rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL), have = 0;
  s->path = util_strdup(path);
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(s->db, busy_ms);
    rc = sqlite3_exec(s->db, "PRAGMA query_only=ON", NULL, NULL, NULL);
  }
  if (rc == SQLITE_OK) {
    /* no meta table (another program's database) reads as no version */
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key='schema_version'", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      have = sqlite3_column_int(st, 0);
    else if ((sqlite3_extended_errcode(s->db) & 0xff) != SQLITE_ERROR)
      rc = sqlite3_extended_errcode(s->db); /* busy, not a database, I/O */
    sqlite3_finalize(st);
  }
  int kind = STORE_OK, objects = -1;
  if (rc == SQLITE_OK && have <= 0) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM sqlite_master", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      objects = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
  }
  if (rc != SQLITE_OK) {
    kind = rc == SQLITE_CANTOPEN ? STORE_ERR : sq_classify(rc);
    util_seterr(err, errlen, "cannot open database %s: %s", path, s->db ? sqlite3_errmsg(s->db) : "out of memory");
  } else if (have <= 0 && objects == 0) {
    kind = STORE_EMPTY;
    util_seterr(err, errlen, "%s holds no engine data yet", path);
  } else if (have <= 0) {
    kind = STORE_ECORRUPT;
    util_seterr(err, errlen, "%s is not an engine database", path);
  } else if (have > SCHEMA_VERSION) {
    kind = STORE_ERR;
    util_seterr(err, errlen, "database %s has schema version %d; this engine knows up to %d", path, have,
                SCHEMA_VERSION);
  }
  if (kind == STORE_OK) {
    *out = &s->base;
    return STORE_OK;
  }
  if (s->db) {
    sq_close(&s->base);
  } else { /* SQLite had no memory for a handle */
    free(s->path);
    free(s);
  }
  return kind;
}

static void sq_close(store *st_) {
  sq *s = (sq *)st_;
  if (!s) return;
  sq_rollback(&s->base);
  for (int i = 0; i < Q__N; i++) sqlite3_finalize(s->q[i]);
  for (int i = 0; i < STORE_TABLES_MAX; i++)
    for (int j = 0; j < STORE_TABLE_STMTS; j++) sqlite3_finalize(s->tq[i][j]);
  sqlite3_close(s->ckpt_db);
  sqlite3_close(s->db);
  chain_cache_free(&s->base);
  free(s->path);
  free(s);
}

/* A write transaction that rewrites the schema version's row as it is, then
 * rolls back: the file, its -wal and -shm and the directory take writes.
 * PRAGMA query_only (a read-only open) is off meanwhile. */
static int sq_write_probe(store *st_, char *err, size_t errlen) {
  sq *s = (sq *)st_;
  if (s->in_txn) {
    util_seterr(err, errlen, "a batch is open");
    return STORE_ERR;
  }
  if (sqlite3_db_readonly(s->db, "main") == 1) {
    util_seterr(err, errlen, "SQLite opened %s read-only (the file or its directory is not writable)", s->path);
    return STORE_ERR;
  }
  sqlite3_stmt *st = NULL;
  int query_only = 0, rc;
  if (sqlite3_prepare_v2(s->db, "PRAGMA query_only", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    query_only = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  char *emsg = NULL;
  rc = sqlite3_exec(s->db, "PRAGMA query_only=OFF; BEGIN IMMEDIATE; "
                    "UPDATE meta SET value=value WHERE key='schema_version'", NULL, NULL, &emsg);
  if (rc != SQLITE_OK) util_seterr(err, errlen, "a write to %s failed: %s", s->path, emsg ? emsg : sqlite3_errmsg(s->db));
  sqlite3_free(emsg);
  if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  if (query_only) sqlite3_exec(s->db, "PRAGMA query_only=ON", NULL, NULL, NULL);
  return rc == SQLITE_OK ? STORE_OK : STORE_ERR;
}

static const char *sq_errmsg(store *st_) {
  sq *s = (sq *)st_; return s->err; }

static int sq_instance_id(store *st_, char *out, size_t n) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = NULL;
  int found = 0;
  if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key='instance_id'", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    snprintf(out, n, "%s", (const char *)sqlite3_column_text(st, 0));
    found = 1;
  }
  sqlite3_finalize(st);
  return found ? 0 : -1;
}
static const char *sq_path(store *st_) {
  sq *s = (sq *)st_; return s->path; }

const store_ops store_sqlite_ops = {
    .op_close = sq_close,
    .op_errmsg = sq_errmsg,
    .op_path = sq_path,
    .op_instance_id = sq_instance_id,
    .op_begin = sq_begin,
    .op_commit = sq_commit,
    .op_rollback = sq_rollback,
    .op_in_txn = sq_in_txn,
    .op_batch_failed = sq_batch_failed,
    .op_batch_writes = sq_batch_writes,
    .op_data_version = sq_data_version,
    .op_wal_stats = sq_wal_stats,
    .op_checkpoint = sq_checkpoint,
    .op_write_probe = sq_write_probe,
    .op_wf_insert = sq_wf_insert,
    .op_wf_get = sq_wf_get,
    .op_wf_set_status = sq_wf_set_status,
    .op_wf_set_cancel = sq_wf_set_cancel,
    .op_wf_set_code = sq_wf_set_code,
    .op_wf_new_run = sq_wf_new_run,
    .op_wf_list = sq_wf_list,
    .op_wf_page = sq_wf_page,
    .op_wf_ids = sq_wf_ids,
    .op_wf_children = sq_wf_children,
    .op_wf_forks = sq_wf_forks,
    .op_wf_subtree = sq_wf_subtree,
    .op_wf_depth = sq_wf_depth,
    .op_wf_children_running = sq_wf_children_running,
    .op_hist_append = sq_hist_append,
    .op_hist_load = sq_hist_load,
    .op_chain_get = sq_chain_get,
    .op_read_begin = sq_read_begin,
    .op_read_end = sq_read_end,
    .op_hist_range = sq_hist_range,
    .op_hist_max_seq = sq_hist_max_seq,
    .op_hist_outcome = sq_hist_outcome,
    .op_hist_get = sq_hist_get,
    .op_code_put = sq_code_put,
    .op_code_get = sq_code_get,
    .op_module_pin = sq_module_pin,
    .op_module_get = sq_module_get,
    .op_modules_clear = sq_modules_clear,
    .op_modules_copy = sq_modules_copy,
    .op_fork_modules = sq_fork_modules,
    .op_task_put = sq_task_put,
    .op_task_del = sq_task_del,
    .op_task_take = sq_task_take,
    .op_task_release = sq_task_release,
    .op_task_del_wf = sq_task_del_wf,
    .op_task_get = sq_task_get,
    .op_task_due = sq_task_due,
    .op_task_next_at = sq_task_next_at,
    .op_task_count = sq_task_count,
    .op_signal_put = sq_signal_put,
    .op_signal_take = sq_signal_take,
    .op_signal_wake = sq_signal_wake,
    .op_signal_count = sq_signal_count,
    .op_signal_has = sq_signal_has,
    .op_signal_del_wf = sq_signal_del_wf,
    .op_domain_append = sq_domain_append,
    .op_domain_list = sq_domain_list,
    .op_feed_after = sq_feed_after,
    .op_feed_last = sq_feed_last,
    .op_meta_get = sq_meta_get,
    .op_meta_put = sq_meta_put,
    .op_delivery_put = sq_delivery_put,
    .op_delivery_find = sq_delivery_find,
    .op_delivery_list = sq_delivery_list,
    .op_token_put = sq_token_put,
    .op_token_revoke = sq_token_revoke,
    .op_token_list = sq_token_list,
    .op_token_live = sq_token_live,
    .op_token_live_count = sq_token_live_count,
    .op_slot_put = sq_slot_put,
    .op_slot_get = sq_slot_get,
    .op_slot_head = sq_slot_head,
    .op_slot_count = sq_slot_count,
    .op_slot_hold = sq_slot_hold,
    .op_slot_del = sq_slot_del,
    .op_slot_list = sq_slot_list,
    .op_table_page = sq_table_page,
    .op_table_insert = sq_table_insert,
    .op_table_count = sq_table_count,
    .op_table_finish = sq_table_finish,
    .op_counter_get = sq_counter_get,
    .op_counter_put = sq_counter_put,
    .op_counter_list = sq_counter_list,
    .op_schedule_insert = sq_schedule_insert,
    .op_schedule_update = sq_schedule_update,
    .op_schedule_get = sq_schedule_get,
    .op_schedule_list = sq_schedule_list,
    .op_schedule_del = sq_schedule_del,
    .op_group_count = sq_group_count,
    .op_live_list = sq_live_list,
    .op_count = sq_count,
    .op_memory_put = sq_memory_put,
    .op_memory_revoke = sq_memory_revoke,
    .op_memory_list = sq_memory_list,
};
