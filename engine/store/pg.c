/* store_pg: the store on PostgreSQL (libpq), for a database URL
 * (postgres://... or postgresql://...). The same tables as sqlite.c,
 * in PostgreSQL's types, and the same semantics:
 *
 * - Group commit: the batch opens one transaction per loop iteration, at
 *   its first write, and workers write in parallel (batch_begin): a
 *   workflow's rows are written only by its lease holder (fenced at
 *   commit), due tasks are locked to the batch that read them (FOR UPDATE
 *   SKIP LOCKED: another worker's dispatch takes the next ones), and a
 *   claim never waits on another worker's batch. What is shared across
 *   workflows takes the order lock (order_lock: an advisory lock held to the
 *   commit), so read-max-then-insert sequences (domain event seqs), slot
 *   positions and the order of the event feed's and signals' ids are commit
 *   order, as SQLite's BEGIN IMMEDIATE gives; so does store_begin, the
 *   clients' check-then-write. The wait is bounded by ENGINE_BUSY_TIMEOUT_MS
 *   (lock_timeout), and running out is STORE_EBUSY.
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
 * A batch's writes go in pipeline mode (exec_defer): sent without waiting,
 * answered with the batch's next read or at the commit, one round trip for
 * all. The commit itself is one round trip (the fence, the commits bump and
 * COMMIT in one pipeline), and the worker's loop does not wait for it:
 * store_commit_start sends it (nonblocking), a uv_poll on PQsocket brings
 * the answer (pg_commit_progress), and any other call meanwhile waits for
 * it first (store.c). Reads, BEGIN and the order lock still wait for their
 * answer on the loop's thread.
 *
 * Text is sent as text parameters (so it must be valid in the database's
 * encoding, UTF-8 from scripts/start-postgres); code sources are BYTEA sent
 * and read in binary. Every text column sorts with COLLATE "C", bytewise as
 * SQLite does, whatever the database's locale. */
#include "backend.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crash.h"
#include "util.h"

/* 4: SQLite's schema version 4 (slots, counters, tokens, the event feed),
 * plus the commits row store_data_version reads; 5: the leases of several
 * workers (SQLite has none: one worker holds a file); 6: tasks_leased, the
 * index of the attempts in flight (Q_TASK_DUE takes a dead worker's first) */
#define SCHEMA_VERSION 6
#define STR_(x) #x
#define STR(x) STR_(x)

/* advisory lock keys (two int4s): "engi" and which lock */
#define LOCK_CLASS 1701734249 /* 0x656e6769 */
#define WORKER_LOCK_KEY 1
#define WRITE_LOCK_KEY 2
#define LIVE_CLASS 1701734263 /* "engw": a worker's liveness lock (LIVE) */
#define CLAIM_CLASS 1701734252 /* "engl": a claim in progress, keyed hashtext(wf_id) (Q_LEASE_CLAIM) */
/* the commits row a connection bumps: one of 16, so that concurrent commits
 * do not queue on one row (store_data_version sums them) */
#define COMMIT_SHARDS 16
#define ORDER_LOCK "SELECT pg_advisory_xact_lock(" STR(LOCK_CLASS) ", " STR(WRITE_LOCK_KEY) ")"
/* a transaction with the order lock, in one round trip (one query string:
 * BEGIN holds past it; a lock_timeout leaves it aborted, rolled back by the
 * caller): the schema's creation */
#define BEGIN_LOCKED "BEGIN; " ORDER_LOCK
#define FENCE_WHAT "fence leases"
#define FENCE_ABORTED "22012" /* Q_FENCE_OR_ABORT's division_by_zero: a fenced lease is not ours */

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
    "CREATE TABLE IF NOT EXISTS history("
    "  wf_id " T " NOT NULL, run BIGINT NOT NULL, seq BIGINT NOT NULL, type " T " NOT NULL,"
    "  ref BIGINT NOT NULL DEFAULT 0, name " T ", hash " T ", payload " T ", time BIGINT NOT NULL,"
    "  PRIMARY KEY(wf_id, run, seq));"
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
    "CREATE TABLE IF NOT EXISTS event_feed(id BIGSERIAL PRIMARY KEY, session_id " T " NOT NULL, seq BIGINT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS tokens(name " T " PRIMARY KEY, hash " T " NOT NULL UNIQUE,"
    "  scopes BIGINT NOT NULL, created_at BIGINT NOT NULL, revoked_at BIGINT);"
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
    /* version 5: which worker runs a workflow (store_lease_*); not copied by migrate */
    "CREATE TABLE IF NOT EXISTS leases(wf_id " T " PRIMARY KEY, owner " T " NOT NULL, epoch BIGINT NOT NULL,"
    "  expires_at BIGINT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS leases_owner ON leases(owner);";
#undef T

enum {
  Q_WF_INSERT, Q_WF_GET, Q_WF_GET_SHARE, Q_WF_STATUS, Q_WF_CANCEL, Q_WF_CODE, Q_WF_NEWRUN, Q_WF_LIST, Q_WF_LIST_STATUS,
  Q_WF_IDS, Q_WF_IDS_FROM, Q_HIST_APPEND, Q_HIST_LOAD, Q_HIST_GET, Q_HIST_RANGE, Q_HIST_MAX, Q_HIST_OUTCOME, Q_CODE_PUT,
  Q_CODE_GET, Q_MOD_PIN, Q_MOD_GET, Q_MOD_CLEAR, Q_MOD_COPY, Q_TASK_PUT, Q_TASK_DEL, Q_TASK_TAKE_HELD, Q_HIST_LOAD_CURRENT, Q_TASK_DEL_WF,
  Q_TASK_RELEASE, Q_TASK_GET, Q_TASK_DUE, Q_TASK_NEXT, Q_TASK_COUNT, Q_SIG_PUT, Q_SIG_FIND, Q_SIG_DEL,
  Q_SIG_COUNT, Q_SIG_DEL_WF, Q_DOM_MAX, Q_DOM_APPEND, Q_DOM_LIST, Q_FEED_PUT, Q_FEED_AFTER, Q_FEED_LAST,
  Q_WF_PAGE, Q_WF_PAGE_DESC, Q_GROUP_STATUS, Q_GROUP_TASKS, Q_GROUP_SANDBOXES, Q_LIVE_LIST, Q_GROUP_SLOTS, Q_DATA_VERSION, Q_BUMP, Q_TXID_STATUS,
  Q_COUNT_HIST, Q_META_GET, Q_META_PUT, Q_META_DEL, Q_TOKEN_PUT, Q_TOKEN_REVOKE, Q_TOKEN_LIST, Q_TOKEN_LIVE,
  Q_TOKEN_LIVE_COUNT, Q_SLOT_PUT, Q_SLOT_GET, Q_SLOT_COUNT, Q_SLOT_HEAD, Q_SLOT_HOLD, Q_SLOT_DEL, Q_SLOT_OF_WF,
  Q_SLOT_OF_KEY, Q_SLOT_ALL, Q_CTR_GET, Q_CTR_PUT, Q_CTR_LIST, Q_CTR_LIST_FROM, Q_DLV_PUT, Q_DLV_PRUNE,
  Q_DLV_FIND, Q_DLV_LIST, Q_DLV_LIST_ALL, Q_SCH_INSERT, Q_SCH_UPDATE, Q_SCH_GET, Q_SCH_LIST, Q_SCH_DEL,
  Q_LEASE_CLAIM, Q_LEASE_RENEW, Q_LEASE_RELEASE_LIST, Q_LEASE_RELEASE_ALL, Q_LEASE_FENCE, Q_FENCE_OR_ABORT, Q_COMMIT, Q__N
};

#define WF_COLS "id,run,status,script_name,script_dir,code_hash"
/* a task's columns in the order read_task reads them (Q_TASK_DUE's h names them with t.) */
#define TASK_COLS "id,wf_id,kind,seq,run_at,attempt,first_at,lease_until"
/* A lease's owner is alive while its session holds its liveness lock
 * (announce: an advisory lock keyed hashtext(owner)): a worker killed with
 * -9 loses its session at once, and its leases need not run out; one cut
 * off keeps it until the server notices, then the expiry decides. pg_locks
 * is read live (pg_stat_activity is a snapshot per transaction, which would
 * not see a worker that started during a batch). */
#define LIVE(owner)                                                                                   \
  "EXISTS (SELECT 1 FROM pg_locks k WHERE k.locktype='advisory' AND k.granted AND k.classid=" \
  STR(LIVE_CLASS) " AND k.objsubid=2 AND k.objid=hashtext(" owner ")::oid AND k.database=(SELECT oid " \
  "FROM pg_database WHERE datname=current_database()))"
/* due tasks whose lease_owner matches pred, in run_at order, of workflows
 * neither this worker ($2) nor another live one (unexpired) holds */
#define DUE_UNHELD(pred)                                                                                   \
  "SELECT " TASK_COLS " FROM tasks t WHERE run_at<=$1 AND " pred                                         \
  " AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.wf_id=t.wf_id AND (l.owner=$2 OR (l.expires_at>$1 AND " \
  LIVE("l.owner") "))) ORDER BY run_at, id LIMIT $4 FOR UPDATE OF t SKIP LOCKED"
/* a schedule's columns in the order schedule_bind binds them */
#define SCH_COLS                                                                                           \
  "name,cron,tz,script,input,overlap,catchup_window_ms,jitter_ms,paused,next_fire_at,last_fire_at,"        \
  "buffered_fire_at,skipped_count,updated_at,created_at"
static const char *SQL[Q__N] = {
    [Q_WF_INSERT] = "INSERT INTO workflows(id,run,status,script_name,script_dir,code_hash,input,result,error,cancel,"
                    "created_at,updated_at) VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)",
    [Q_WF_GET] = "SELECT " WF_COLS ",input,result,error,cancel,created_at,updated_at FROM workflows WHERE id=$1",
    /* in a client's batch (store_begin): its check holds to its commit (a
     * worker's status change waits, or is seen) */
    [Q_WF_GET_SHARE] = "SELECT " WF_COLS ",input,result,error,cancel,created_at,updated_at FROM workflows "
                       "WHERE id=$1 FOR SHARE",
    [Q_WF_STATUS] = "UPDATE workflows SET status=$1, result=$2, error=$3, updated_at=$4 WHERE id=$5",
    [Q_WF_CANCEL] = "UPDATE workflows SET cancel=$1, updated_at=$2 WHERE id=$3",
    [Q_WF_CODE] = "UPDATE workflows SET code_hash=$1, script_name=$2, script_dir=$3, updated_at=$4 WHERE id=$5",
    [Q_WF_NEWRUN] = "UPDATE workflows SET run=$1, input=$2, status='running', result=NULL, error=NULL, "
                    "updated_at=$3 WHERE id=$4",
    [Q_WF_LIST] = "SELECT " WF_COLS ",NULL,NULL,error,cancel,created_at,updated_at FROM workflows "
                  "ORDER BY created_at, id",
    [Q_WF_LIST_STATUS] = "SELECT " WF_COLS ",NULL,NULL,error,cancel,created_at,updated_at FROM workflows "
                         "WHERE status=$1 ORDER BY created_at, id",
    /* a range of the primary key: $2 is the least string above every id
     * that starts with $1 (prefix_above); $3 is ",status,...," or NULL */
    [Q_WF_IDS] = "SELECT " WF_COLS ",NULL,NULL,NULL,cancel,created_at,updated_at FROM workflows "
                 "WHERE id>=$1 AND id<$2 AND ($3::text IS NULL OR strpos($3, ','||status||',')>0) "
                 "ORDER BY id LIMIT $4",
    /* "" or a prefix with no string above it: from $1 on */
    [Q_WF_IDS_FROM] = "SELECT " WF_COLS ",NULL,NULL,NULL,cancel,created_at,updated_at FROM workflows "
                      "WHERE id>=$1 AND starts_with(id, $1) AND ($2::text IS NULL OR "
                      "strpos($2, ','||status||',')>0) ORDER BY id LIMIT $3",
    [Q_HIST_APPEND] = "INSERT INTO history(wf_id,run,seq,type,ref,name,hash,payload,time) "
                      "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9)",
    [Q_HIST_LOAD] = "SELECT seq,type,ref,name,hash,payload,time FROM history WHERE wf_id=$1 AND run=$2 ORDER BY seq",
    [Q_HIST_GET] = "SELECT seq,type,ref,name,hash,payload,time FROM history WHERE wf_id=$1 AND run=$2 AND seq=$3",
    [Q_HIST_RANGE] = "SELECT seq,type,ref,name,hash,payload,time FROM history WHERE wf_id=$1 AND run=$2 AND seq>=$3 "
                     "AND seq<=$4 ORDER BY seq",
    [Q_HIST_MAX] = "SELECT max(seq) FROM history WHERE wf_id=$1 AND run=$2",
    [Q_HIST_OUTCOME] = "SELECT EXISTS(SELECT 1 FROM history WHERE wf_id=$1 AND run=$2 AND seq>$3 AND ref=$4)::int",
    [Q_CODE_PUT] = "INSERT INTO code(hash,name,source) VALUES($1,$2,$3) ON CONFLICT(hash) DO NOTHING",
    [Q_CODE_GET] = "SELECT source FROM code WHERE hash=$1",
    [Q_MOD_PIN] = "INSERT INTO run_modules(wf_id,run,module,hash) VALUES($1,$2,$3,$4) "
                  "ON CONFLICT(wf_id,run,module) DO UPDATE SET hash=excluded.hash",
    [Q_MOD_GET] = "SELECT hash FROM run_modules WHERE wf_id=$1 AND run=$2 AND module=$3",
    [Q_MOD_CLEAR] = "DELETE FROM run_modules WHERE wf_id=$1 AND run=$2",
    [Q_MOD_COPY] = "INSERT INTO run_modules(wf_id,run,module,hash) SELECT wf_id,$1::bigint,module,hash "
                   "FROM run_modules WHERE wf_id=$2 AND run=$3 "
                   "ON CONFLICT(wf_id,run,module) DO UPDATE SET hash=excluded.hash",
    [Q_TASK_PUT] = "INSERT INTO tasks(wf_id,kind,seq,run_at,attempt,first_at,lease_owner,lease_until) "
                   "VALUES($1,$2,$3,$4,$5,$6,$7,$8) ON CONFLICT(wf_id,kind,seq) DO UPDATE SET id=excluded.id, "
                   "run_at=excluded.run_at, attempt=excluded.attempt, first_at=excluded.first_at, "
                   "lease_owner=excluded.lease_owner, lease_until=excluded.lease_until",
    [Q_TASK_DEL] = "DELETE FROM tasks WHERE wf_id=$1 AND kind=$2 AND seq=$3",
    /* store_task_start: taken only while the lease is this worker's (claimed before it in the pipeline, or held) */
    [Q_TASK_TAKE_HELD] = "DELETE FROM tasks WHERE wf_id=$1 AND kind=$2 AND seq=$3 AND EXISTS "
                         "(SELECT 1 FROM leases WHERE wf_id=$1 AND owner=$4)",
    [Q_HIST_LOAD_CURRENT] = "SELECT seq,type,ref,name,hash,payload,time FROM history WHERE wf_id=$1 AND "
                            "run=(SELECT run FROM workflows WHERE id=$1) ORDER BY seq",
    [Q_TASK_DEL_WF] = "DELETE FROM tasks WHERE wf_id=$1",
    [Q_TASK_RELEASE] = "UPDATE tasks SET lease_owner=NULL, lease_until=0 WHERE lease_owner=$1",
    [Q_TASK_GET] = "SELECT " TASK_COLS " FROM tasks WHERE wf_id=$1 AND kind=$2 AND seq=$3",
    /* The tasks of the workflows this worker holds, then at most $4 of the
     * others (those it could claim; every row read stays locked to its batch
     * and other workers pass over it, SKIP LOCKED: reading 512 to claim 32
     * starved them). Each part in run_at, then id order (SQLite's tasks_due
     * index), except that the attempts a dead worker had in flight come
     * before the rest: their run_at is when they started, behind a backlog
     * of queued starts, and survivors at ENGINE_MAX_LEASES took the whole
     * backlog before them (a takeover lasted 33 s). A part is read only as
     * far as its LIMIT needs: it locks no row it does not return. */
    /* h is driven from this worker's leases (leases_owner), not the backlog */
    [Q_TASK_DUE] = "WITH h AS (SELECT t.id,t.wf_id,t.kind,t.seq,t.run_at,t.attempt,t.first_at,t.lease_until FROM "
                   "leases m JOIN tasks t ON t.wf_id=m.wf_id WHERE m.owner=$2 AND t.run_at<=$1 AND "
                   "(t.lease_owner IS NULL OR t.lease_owner<>$2) ORDER BY t.run_at, t.id LIMIT $3 "
                   "FOR UPDATE OF t SKIP LOCKED), "
                   "o AS (" DUE_UNHELD("lease_owner<>$2") "), n AS (" DUE_UNHELD("lease_owner IS NULL") ") "
                   "SELECT * FROM h UNION ALL (SELECT * FROM o UNION ALL SELECT * FROM n LIMIT $4)",
    /* a task of a workflow another worker holds comes due when that lease expires */
    [Q_TASK_NEXT] = "SELECT min(GREATEST(t.run_at, COALESCE(l.expires_at, 0))) FROM tasks t LEFT JOIN leases l "
                    "ON l.wf_id=t.wf_id AND l.owner<>$1 AND " LIVE("l.owner") " "
                    "WHERE t.lease_owner IS NULL OR t.lease_owner<>$1",
    [Q_TASK_COUNT] = "SELECT count(*) FROM tasks WHERE wf_id=$1",
    [Q_SIG_PUT] = "INSERT INTO signals(wf_id,name,payload,time) VALUES($1,$2,$3,$4)",
    [Q_SIG_FIND] = "SELECT id,payload FROM signals WHERE wf_id=$1 AND name=$2 ORDER BY id LIMIT 1",
    [Q_SIG_DEL] = "DELETE FROM signals WHERE id=$1",
    [Q_SIG_COUNT] = "SELECT count(*) FROM signals WHERE wf_id=$1",
    [Q_SIG_DEL_WF] = "DELETE FROM signals WHERE wf_id=$1",
    [Q_DOM_MAX] = "SELECT max(seq) FROM domain_events WHERE session_id=$1",
    [Q_DOM_APPEND] = "INSERT INTO domain_events(session_id,seq,type,time,payload) VALUES($1,$2,$3,$4,$5)",
    [Q_DOM_LIST] = "SELECT session_id,seq,type,time,payload FROM domain_events WHERE session_id=$1 AND seq>$2 "
                   "ORDER BY seq",
    [Q_FEED_PUT] = "INSERT INTO event_feed(session_id,seq) VALUES($1,$2)",
    [Q_FEED_AFTER] = "SELECT f.id,d.session_id,d.seq,d.type,d.time,d.payload FROM event_feed f JOIN domain_events d "
                     "ON d.session_id=f.session_id AND d.seq=f.seq WHERE f.id>$1 ORDER BY f.id LIMIT $2",
    [Q_FEED_LAST] = "SELECT max(id) FROM event_feed",
    [Q_WF_PAGE] = "SELECT " WF_COLS ",input,result,error,cancel,created_at,updated_at FROM workflows "
                  "WHERE ($1::text IS NULL OR status=$1) AND ($2::text IS NULL OR script_name=$2) "
                  "AND (created_at, id) > ($3::bigint, $4::text) ORDER BY created_at, id LIMIT $5",
    [Q_WF_PAGE_DESC] = "SELECT " WF_COLS ",input,result,error,cancel,created_at,updated_at FROM workflows "
                       "WHERE ($1::text IS NULL OR status=$1) AND ($2::text IS NULL OR script_name=$2) "
                       "AND (created_at, id) < ($3::bigint, $4::text) ORDER BY created_at DESC, id DESC LIMIT $5",
    [Q_GROUP_STATUS] = "SELECT status, count(*) FROM workflows GROUP BY status",
    [Q_GROUP_TASKS] = "SELECT kind, count(*) FROM tasks GROUP BY kind",
    [Q_GROUP_SANDBOXES] = "SELECT 'live', count(*) FROM workflows w WHERE w.status NOT IN ('completed','failed',"
                          "'cancelled') AND EXISTS(SELECT 1 FROM domain_events d WHERE d.session_id=w.id AND "
                          "d.type='sandbox.ready')",
    [Q_LIVE_LIST] = "SELECT w.id, (SELECT d.payload FROM domain_events d WHERE d.session_id=w.id AND d.type IN "
                    "('sandbox.ready','sandbox.reprovisioned') ORDER BY d.seq DESC LIMIT 1) FROM workflows w "
                    "WHERE w.status NOT IN ('completed','failed','cancelled')",
    [Q_GROUP_SLOTS] = "SELECT pool||chr(31)||(CASE WHEN held<>0 THEN 'held' ELSE 'queued' END), count(*) FROM slots "
                      "GROUP BY pool, held",
    /* taken when free, expired or ours (the epoch moves on when the owner changes) */
    /* Never waits on another claimer: one that is claiming the workflow in
     * an open batch holds its CLAIM_CLASS lock, and a live holder's row is
     * not touched (ON CONFLICT would lock it until this batch commits) */
    [Q_LEASE_CLAIM] = "INSERT INTO leases(wf_id,owner,epoch,expires_at) SELECT $1::text,$2::text,1,$4::bigint "
                      "WHERE pg_try_advisory_xact_lock(" STR(CLAIM_CLASS) ", hashtext($1)) AND NOT EXISTS "
                      "(SELECT 1 FROM leases l WHERE l.wf_id=$1 AND l.owner<>$2 AND l.expires_at>$3 AND "
                      LIVE("l.owner") ") ON CONFLICT(wf_id) DO "
                      "UPDATE SET owner=excluded.owner, expires_at=excluded.expires_at, epoch=leases.epoch + "
                      "CASE WHEN leases.owner=excluded.owner THEN 0 ELSE 1 END "
                      "WHERE leases.owner=excluded.owner OR leases.expires_at<=$3 OR NOT " LIVE("leases.owner")
                      " RETURNING epoch",
    [Q_LEASE_RENEW] = "UPDATE leases SET expires_at=$2 WHERE owner=$1 RETURNING wf_id, epoch",
    /* the batch's releases, in the commit's round trip after the fence */
    [Q_LEASE_RELEASE_LIST] = "DELETE FROM leases l USING unnest($1::text[], $2::bigint[]) AS f(id, ep) "
                             "WHERE l.wf_id=f.id AND l.epoch=f.ep AND l.owner=$3",
    [Q_LEASE_RELEASE_ALL] = "DELETE FROM leases WHERE owner=$1",
    /* the fenced workflows whose lease is not (owner, epoch) any more, and
     * who has each; the rows read stay locked (FOR SHARE) to the COMMIT, so
     * no takeover commits between this check and the batch */
    [Q_LEASE_FENCE] = "WITH l AS MATERIALIZED (SELECT wf_id, owner, epoch FROM leases WHERE wf_id = ANY($1::text[]) "
                      "FOR SHARE) SELECT f.id, l.owner FROM unnest($1::text[], $2::bigint[]) AS f(id, ep) "
                      "LEFT JOIN l ON l.wf_id=f.id WHERE l.owner IS DISTINCT FROM $3 OR l.epoch<>f.ep",
    /* the same check inside the commit's round trip: a lost lease aborts the
     * transaction (division_by_zero, FENCE_ABORTED), so the COMMIT after it
     * in the pipeline does not commit; Q_LEASE_FENCE then says which */
    [Q_FENCE_OR_ABORT] = "WITH l AS MATERIALIZED (SELECT wf_id, owner, epoch FROM leases WHERE wf_id = ANY($1::text[]) "
                         "FOR SHARE) SELECT 1 / (1 - LEAST(count(*), 1))::int FROM unnest($1::text[], $2::bigint[]) "
                         "AS f(id, ep) LEFT JOIN l ON l.wf_id=f.id WHERE l.owner IS DISTINCT FROM $3 OR l.epoch<>f.ep",
    [Q_COMMIT] = "COMMIT",
    [Q_DATA_VERSION] = "SELECT sum(n)::bigint FROM commits",
    /* the version moves, and listeners hear of it when the batch commits (store_commit_fd) */
    [Q_BUMP] = "WITH b AS (INSERT INTO commits VALUES($1, 1) ON CONFLICT(one) DO UPDATE SET n=commits.n+1 "
               "RETURNING n) SELECT pg_notify('engine_commits', n::text) FROM b",
    [Q_TXID_STATUS] = "SELECT txid_status($1::bigint)",
    [Q_COUNT_HIST] = "SELECT count(*) FROM history WHERE wf_id=$1",
    [Q_META_GET] = "SELECT value FROM meta WHERE key=$1",
    [Q_META_PUT] = "INSERT INTO meta(key,value) VALUES($1,$2) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
    [Q_META_DEL] = "DELETE FROM meta WHERE key=$1",
    [Q_DLV_PUT] = "INSERT INTO deliveries(trig,delivery,received_at,outcome,status,wf_id,detail) "
                  "VALUES($1,$2,$3,$4,$5,$6,$7) ON CONFLICT (trig, delivery) "
                  "WHERE outcome IN ('started','existing') AND delivery <> '' DO NOTHING",
    [Q_DLV_PRUNE] = "DELETE FROM deliveries WHERE trig=$1 AND outcome NOT IN ('started','existing') AND id <= "
                    "(SELECT id FROM deliveries WHERE trig=$1 ORDER BY id DESC LIMIT 1 OFFSET 1000)",
    [Q_DLV_FIND] = "SELECT id,trig,delivery,received_at,outcome,status,wf_id,detail FROM deliveries "
                   "WHERE trig=$1 AND delivery=$2 AND outcome IN ('started','existing') AND delivery <> ''",
    [Q_DLV_LIST] = "SELECT id,trig,delivery,received_at,outcome,status,wf_id,detail FROM deliveries "
                   "WHERE trig=$1 ORDER BY id DESC LIMIT $2",
    [Q_DLV_LIST_ALL] = "SELECT id,trig,delivery,received_at,outcome,status,wf_id,detail FROM deliveries "
                       "ORDER BY id DESC LIMIT $1",
    [Q_TOKEN_PUT] = "INSERT INTO tokens(name,hash,scopes,created_at,revoked_at) VALUES($1,$2,$3,$4,NULL) "
                    "ON CONFLICT(name) DO UPDATE SET hash=excluded.hash, scopes=excluded.scopes, "
                    "created_at=excluded.created_at, revoked_at=NULL WHERE tokens.revoked_at IS NOT NULL",
    [Q_TOKEN_REVOKE] = "UPDATE tokens SET revoked_at=$1 WHERE name=$2 AND revoked_at IS NULL",
    [Q_TOKEN_LIST] = "SELECT name,NULL,scopes,created_at,revoked_at FROM tokens ORDER BY name",
    [Q_TOKEN_LIVE] = "SELECT name,hash,scopes,created_at,0 FROM tokens WHERE revoked_at IS NULL ORDER BY name",
    [Q_TOKEN_LIVE_COUNT] = "SELECT count(*) FROM tokens WHERE revoked_at IS NULL",
    [Q_SLOT_PUT] = "INSERT INTO slots(pool,key,wf_id,seq,lim,held,since) VALUES($1,$2,$3,$4,$5,0,$6) "
                   "ON CONFLICT DO NOTHING",
    [Q_SLOT_GET] = "SELECT s.pool,s.key,s.wf_id,s.seq,s.lim,s.held,s.since,CASE WHEN s.held<>0 THEN 0 ELSE "
                   "(SELECT count(*) FROM slots q WHERE q.pool=s.pool AND q.key=s.key AND q.held=0 AND q.id<=s.id) "
                   "END FROM slots s WHERE s.wf_id=$1 AND s.pool=$2 AND s.key=$3",
    [Q_SLOT_COUNT] = "SELECT count(*) FROM slots WHERE pool=$1 AND key=$2 AND held=$3",
    [Q_SLOT_HEAD] = "SELECT pool,key,wf_id,seq,lim,held,since,1 FROM slots WHERE pool=$1 AND key=$2 AND held=0 "
                    "ORDER BY id LIMIT 1",
    [Q_SLOT_HOLD] = "UPDATE slots SET held=1, since=$1 WHERE wf_id=$2 AND pool=$3 AND key=$4 AND held=0",
    [Q_SLOT_DEL] = "DELETE FROM slots WHERE wf_id=$1 AND pool=$2 AND key=$3",
    [Q_SLOT_OF_WF] = "SELECT pool,key,wf_id,seq,lim,held,since,0 FROM slots WHERE wf_id=$1 ORDER BY id",
    [Q_SLOT_OF_KEY] = "SELECT pool,key,wf_id,seq,lim,held,since,0 FROM slots WHERE pool=$1 AND key=$2 ORDER BY id",
    [Q_SLOT_ALL] = "SELECT pool,key,wf_id,seq,lim,held,since,0 FROM slots ORDER BY pool, key, held DESC, id",
    [Q_CTR_GET] = "SELECT name,value,window_start,paused_until,updated_at FROM counters WHERE name=$1",
    [Q_CTR_PUT] = "INSERT INTO counters(name,value,window_start,paused_until,updated_at) VALUES($1,$2,$3,$4,$5) "
                  "ON CONFLICT(name) DO UPDATE SET value=excluded.value, window_start=excluded.window_start, "
                  "paused_until=excluded.paused_until, updated_at=excluded.updated_at",
    [Q_CTR_LIST] = "SELECT name,value,window_start,paused_until,updated_at FROM counters WHERE name>=$1 AND name<$2 "
                   "ORDER BY name",
    [Q_CTR_LIST_FROM] = "SELECT name,value,window_start,paused_until,updated_at FROM counters WHERE name>=$1 AND "
                        "starts_with(name, $1) ORDER BY name",
    [Q_SCH_INSERT] = "INSERT INTO schedules(" SCH_COLS ") VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15) "
                     "ON CONFLICT(name) DO NOTHING",
    [Q_SCH_UPDATE] = "UPDATE schedules SET cron=$2,tz=$3,script=$4,input=$5,overlap=$6,catchup_window_ms=$7,"
                     "jitter_ms=$8,paused=$9,next_fire_at=$10,last_fire_at=$11,buffered_fire_at=$12,"
                     "skipped_count=$13,updated_at=$14 WHERE name=$1",
    [Q_SCH_GET] = "SELECT " SCH_COLS " FROM schedules WHERE name=$1",
    [Q_SCH_LIST] = "SELECT " SCH_COLS " FROM schedules ORDER BY name",
    [Q_SCH_DEL] = "DELETE FROM schedules WHERE name=$1",
};

#define MAXP 16
/* statements a batch sends before it reads their answers: the answers are
 * a few dozen bytes each, so the server never blocks on sending them while
 * the client blocks on sending more */
#define PIPE_MAX 128

typedef struct pg {
  store base; /* first: the seam (backend.h) */
  PGconn *conn;
  char prepared[Q__N];
  char table_prepared[STORE_TABLES_MAX][STORE_TABLE_STMTS]; /* engine migrate's (store_table_*) */
  int in_txn; /* a batch was begun and not yet committed or rolled back */
  int failed; /* a statement of that batch failed: it is lost, every write fails until store_rollback */
  int ordered; /* that batch holds the order lock (order_lock) */
  int client;  /* that batch was begun by store_begin: a client's check-then-write */
  /* statements sent in pipeline mode whose results are not read yet (pipe_send) */
  struct pipe_entry {
    const char *what; /* for the error */
    char *prepared;   /* a Parse: its flag, cleared again if it did not run */
    PGresult **keep;  /* where its result goes (NULL: checked, then dropped) */
  } pipeq[PIPE_MAX];
  int pipe;
  struct drain { /* the pipeline's answers being read (drain_read) */
    int n, i, phase, lost;
    PGresult *bad;
    const char *what;
  } dr;
  PGresult *commit_res; /* the COMMIT's answer (commit_send) */
  PGresult *read_res;   /* a read's answer behind the batch's writes (pq_exec) */
  PGresult **start_res; /* pg_task_start's answers */
  int commit_bumped, flushing; /* flushing: the commit's request is not all sent yet */
  char drain_state[6];    /* the SQLSTATE of the statement a drain found failed ("" if none or lost) */
  const char *drain_what; /* and its what */
  char *fence_ids, *fence_eps; /* fence_params' arrays */
  int64_t xid;            /* the open batch's transaction id: a COMMIT whose answer is lost may have committed */
  int64_t writes, last_writes;
  int64_t round_trips; /* waited for (waited) */
  int64_t own_commits; /* commits of this connection that bumped the commits row */
  int64_t changes;     /* rows the last write changed */
  int64_t max_length;  /* ENGINE_STORE_MAX_LENGTH: the longest value a parameter takes (0: PostgreSQL's own) */
  char *path;          /* the URL as given (reopening it needs any password it has) */
  char where[256];     /* host:port/database, for messages: never a password */
  char settings[160];  /* the session's SETs (set_session), again after a reconnection */
  char err[512];
  /* parameters of the statement being built (bind_* in order) */
  const char *pv[MAXP];
  char *fixed[MAXP]; /* bind_text's UTF-8 copies, freed at the next params_start */
  int plen[MAXP], pfmt[MAXP], np;
  char pnum[MAXP][32];
  int bind_failed;
  char bind_err[192];
  /* leases (store_lease_*): wf_id -> epoch, as (void *)(intptr_t) */
  strmap held;    /* committed claims not seen lost */
  strmap claimed; /* claims of the open batch: held once it commits */
  strmap fenced;  /* workflows the open batch must still hold at commit */
  strmap releasing; /* leases the open batch releases at commit (pg_lease_release) */
  char owner[64]; /* who claimed them */
  PGconn *listen[4]; /* LISTEN engine_commits, one per watcher (store_commit_fd) */
  int listen_fd[4];  /* their sockets as handed out (PQsocket says -1 once one is lost) */
} pg;

/* ---- plumbing ---- */

static void pg_rollback(store *st_);
static int fence_check(struct pg *s);
static void fence_params(struct pg *s, const strmap *ids);
static void claimed(struct pg *s, const char *wf_id, int64_t epoch);
static void fence_params_free(struct pg *s);
static int pipe_drain(struct pg *s, int report);
static int simple(PGconn *c, const char *sql, char *why, size_t n, int *kind);
static void map_reset(strmap *m) { /* keys freed; the values are epochs, not pointers */
  strmap_free(m);
  strmap_init(m);
}
static void announce(struct pg *s, const char *owner);

/* A round trip the connection waited for (store_round_trips): what a
 * worker across a network pays per workflow. */
static void waited(struct pg *s, const char *what) {
  s->round_trips++;
#ifdef ENGINE_TRACE_WAITS
  fprintf(stderr, "pg wait: %s\n", what);
#else
  (void)what;
#endif
}

/* PostgreSQL's primary message, without "ERROR:" or a trailing newline. */
static void pq_reason(PGconn *c, const PGresult *r, char *out, size_t n) {
  const char *m = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
  snprintf(out, n, "%s", m ? m : c ? PQerrorMessage(c) : "out of memory");
  size_t len = strlen(out);
  while (len && (out[len - 1] == '\n' || out[len - 1] == ' ')) out[--len] = 0;
  if (!*out) snprintf(out, n, "%s", "unknown error");
}

static int classify_state(const char *state) {
  if (!state) return STORE_ERR;
  /* lock_not_available (lock_timeout), serialization, deadlock, statement timeout */
  if (!strcmp(state, "55P03") || !strcmp(state, "40001") || !strcmp(state, "40P01") || !strcmp(state, "57014"))
    return STORE_EBUSY;
  if (!strcmp(state, "XX001") || !strcmp(state, "XX002")) return STORE_ECORRUPT; /* data or index corrupted */
  return STORE_ERR;
}

static int classify(const PGresult *r) { return r ? classify_state(PQresultErrorField(r, PG_DIAG_SQLSTATE)) : STORE_ERR; }

/* Inside a batch the transaction is lost with the statement: PostgreSQL
 * aborted it, and it is rolled back now so reads go on (as SQLite rolls back
 * on its own), while writes fail until store_rollback. The first error is
 * the one kept. */
static int fail_res(pg *s, const char *what, const PGresult *r) {
  int bind_failed = s->bind_failed;
  s->bind_failed = 0;
  if (s->failed) return STORE_ERR;
  char why[384];
  if (bind_failed)
    snprintf(why, sizeof why, "%s", s->bind_err);
  else
    pq_reason(s->conn, r, why, sizeof why);
  util_seterr(s->err, sizeof s->err, "%s: %s", what, why);
  if (s->in_txn) {
    s->failed = 1;
    pipe_drain(s, 0);
    if (PQtransactionStatus(s->conn) != PQTRANS_IDLE) PQclear(PQexec(s->conn, "ROLLBACK"));
  }
  return STORE_ERR;
}

static int fail(pg *s, const char *what) { return fail_res(s, what, NULL); }

/* ENGINE_STORE_FAIL: this write fails as an I/O error does, and the whole
 * transaction is rolled back with it. */
static int injected(pg *s, const char *what) {
  if (!store_fault_hit(what)) return 0;
  if (s->failed) return 1;
  util_seterr(s->err, sizeof s->err, "%s: disk I/O error (injected by ENGINE_STORE_FAIL)", what);
  pipe_drain(s, 0);
  if (PQtransactionStatus(s->conn) != PQTRANS_IDLE) PQclear(PQexec(s->conn, "ROLLBACK"));
  if (s->in_txn) s->failed = 1;
  return 1;
}

static void params_start(pg *s) {
  for (int i = 0; i < MAXP; i++) {
    free(s->fixed[i]);
    s->fixed[i] = NULL;
  }
  s->np = 0;
  s->bind_failed = 0;
}

static void bind_fail(pg *s, size_t len, const char *why) {
  if (s->bind_failed) return;
  s->bind_failed = 1;
  if (s->max_length)
    snprintf(s->bind_err, sizeof s->bind_err, "cannot bind parameter %d (%zu bytes; the store takes at most %lld): %s",
             s->np + 1, len, (long long)s->max_length, why);
  else
    snprintf(s->bind_err, sizeof s->bind_err, "cannot bind parameter %d (%zu bytes): %s", s->np + 1, len, why);
}

/* NULL binds SQL NULL. Text goes as UTF-8, the only text PostgreSQL holds
 * (a byte sequence that is not would fail the whole batch, and every retry
 * of it): what the engine records is UTF-8 already (json.c, wfvm.c);
 * anything else (a script's path) has its invalid parts stored as U+FFFD. */
static void bind_text(pg *s, const char *v) {
  size_t len = v ? strlen(v) : 0, fn;
  if (s->max_length && (int64_t)len > s->max_length) bind_fail(s, len, "string or blob too big");
  if (v && (s->fixed[s->np] = util_utf8_repair(v, len, &fn))) v = s->fixed[s->np];
  s->pv[s->np] = v;
  s->plen[s->np] = 0;
  s->pfmt[s->np] = 0;
  s->np++;
}

static void bind_blob(pg *s, const void *v, size_t n) {
  if ((s->max_length && (int64_t)n > s->max_length) || n > INT32_MAX) bind_fail(s, n, "string or blob too big");
  s->pv[s->np] = v ? v : "";
  s->plen[s->np] = (int)(n > INT32_MAX ? 0 : n);
  s->pfmt[s->np] = 1;
  s->np++;
}

static void bind_int(pg *s, int64_t v) {
  snprintf(s->pnum[s->np], sizeof s->pnum[0], "%lld", (long long)v);
  bind_text(s, s->pnum[s->np]);
}

static void bind_double(pg *s, double v) {
  snprintf(s->pnum[s->np], sizeof s->pnum[0], "%.17g", v);
  bind_text(s, s->pnum[s->np]);
}

/* A lost connection outside a batch is opened again (its prepared statements
 * with it); inside a batch the batch is lost anyway. */
static void reconnect_if_lost(pg *s) {
  if (PQstatus(s->conn) != CONNECTION_BAD || s->in_txn) return;
  PQreset(s->conn);
  if (PQpipelineStatus(s->conn) != PQ_PIPELINE_OFF) PQexitPipelineMode(s->conn);
  s->pipe = 0;
  if (PQstatus(s->conn) == CONNECTION_OK) simple(s->conn, s->settings, (char[8]){0}, 8, NULL);
  memset(s->prepared, 0, sizeof s->prepared);
  memset(s->table_prepared, 0, sizeof s->table_prepared);
  if (s->owner[0] && PQstatus(s->conn) == CONNECTION_OK) announce(s, s->owner);
}

/* This connection is worker owner's (LIVE): its liveness lock, and a name
 * people can read in pg_stat_activity; once, and again after a reconnection. */
static void announce(pg *s, const char *owner) {
  if (pipe_drain(s, 1) != STORE_OK) return;
  if (owner != s->owner) snprintf(s->owner, sizeof s->owner, "%s", owner); /* again after a reconnection: the same */
  char name[96];
  snprintf(name, sizeof name, "engine worker %s", owner);
  char *lit = PQescapeLiteral(s->conn, name, strlen(name)), *olit = PQescapeLiteral(s->conn, owner, strlen(owner));
  if (lit && olit) {
    char *sql = util_fmt("SET application_name = %s; SELECT pg_try_advisory_lock(" STR(LIVE_CLASS) ", hashtext(%s))",
                         lit, olit);
    PQclear(PQexec(s->conn, sql));
    free(sql);
  }
  PQfreemem(lit);
  PQfreemem(olit);
}

/* ---- pipeline mode: a batch's writes go with its next read ---- */

/* Reading the answers of a pipeline: drain_begin marks the sync point,
 * drain_read reads up to it (without waiting when wait is 0: then 0 means
 * the next answer has not arrived), drain_end leaves pipeline mode and
 * reports. pipe_drain does all three, waiting. */
enum { DRAIN_ENTRY, DRAIN_REST, DRAIN_SYNC, DRAIN_DONE };

static void drain_begin(pg *s) {
  struct drain *d = &s->dr;
  d->n = s->pipe;
  s->pipe = 0;
  d->i = 0;
  d->phase = DRAIN_ENTRY;
  d->bad = NULL;
  d->what = d->n ? s->pipeq[0].what : "pipeline";
  d->lost = PQpipelineSync(s->conn) != 1;
  s->drain_state[0] = 0;
  s->drain_what = NULL;
}

static int drain_read(pg *s, int wait) {
  struct drain *d = &s->dr;
  if (!wait && !d->lost && !PQconsumeInput(s->conn)) d->lost = 1;
  while (!d->lost && d->phase != DRAIN_DONE) {
    if (d->phase == DRAIN_ENTRY && d->i == d->n) d->phase = DRAIN_SYNC;
    if (!wait && PQisBusy(s->conn)) return 0;
    PGresult *r = PQgetResult(s->conn);
    if (d->phase == DRAIN_SYNC) {
      d->lost = PQresultStatus(r) != PGRES_PIPELINE_SYNC;
      d->phase = DRAIN_DONE;
    } else if (d->phase == DRAIN_REST) { /* up to the NULL that ends the entry's answers */
      if (!r) d->i++, d->phase = DRAIN_ENTRY;
    } else if (!r) { /* the connection went */
      d->lost = 1;
      d->what = s->pipeq[d->i].what;
    } else {
      struct pipe_entry *q = &s->pipeq[d->i];
      ExecStatusType t = PQresultStatus(r);
      if (t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK) {
        if (q->keep) *q->keep = r, r = NULL;
      } else {
        if (q->prepared) *q->prepared = 0;
        if (!d->bad && t != PGRES_PIPELINE_ABORTED) d->bad = r, r = NULL, d->what = q->what;
      }
      d->phase = DRAIN_REST;
    }
    PQclear(r);
  }
  return 1;
}

/* STORE_OK, or the first statement that failed is the batch's error
 * (fail_res, when report) and the rest did not run. */
static int drain_end(pg *s, int report) {
  struct drain *d = &s->dr;
  int n = d->n;
  d->n = 0;
  for (int j = d->i; j < n; j++) /* not answered: not run */
    if (s->pipeq[j].prepared) *s->pipeq[j].prepared = 0;
  if (!d->lost) PQexitPipelineMode(s->conn);
  if (!d->bad && !d->lost) return STORE_OK;
  for (int j = 0; j < n; j++)
    if (s->pipeq[j].keep && *s->pipeq[j].keep) {
      PQclear(*s->pipeq[j].keep);
      *s->pipeq[j].keep = NULL;
    }
  const char *state = d->bad ? PQresultErrorField(d->bad, PG_DIAG_SQLSTATE) : NULL;
  snprintf(s->drain_state, sizeof s->drain_state, "%s", state ? state : "");
  s->drain_what = d->what;
  PGresult *bad = d->bad;
  d->bad = NULL;
  if (report) fail_res(s, s->drain_what, bad);
  PQclear(bad);
  return STORE_ERR;
}

/* Reads the answers of everything sent (pipe_send) up to a sync point, and
 * leaves pipeline mode. */
static int pipe_drain(pg *s, int report) {
  if (PQpipelineStatus(s->conn) == PQ_PIPELINE_OFF) return STORE_OK;
  waited(s, s->pipe ? s->pipeq[s->pipe - 1].what : "pipeline");
  drain_begin(s);
  drain_read(s, 1);
  return drain_end(s, report);
}

/* Sends sql (prepared once as name) with the bound parameters in pipeline
 * mode, without waiting: its answer is read by pipe_drain (into *keep). */
static int pipe_send(pg *s, const char *name, const char *sql, char *prepared, int binary, const char *what,
                     PGresult **keep) {
  if (s->pipe + 2 > PIPE_MAX && pipe_drain(s, 1) != STORE_OK) return STORE_ERR;
  int ok = PQpipelineStatus(s->conn) != PQ_PIPELINE_OFF || PQenterPipelineMode(s->conn);
  if (ok && !*prepared) {
    ok = PQsendPrepare(s->conn, name, sql, 0, NULL);
    if (ok) {
      *prepared = 1;
      s->pipeq[s->pipe++] = (struct pipe_entry){what, prepared, NULL};
    }
  }
  if (ok) ok = PQsendQueryPrepared(s->conn, name, s->np, s->pv, s->plen, s->pfmt, binary);
  if (ok) s->pipeq[s->pipe++] = (struct pipe_entry){what, NULL, keep};
  if (ok) return STORE_OK;
  pipe_drain(s, 0);
  return fail(s, what);
}

/* Runs sql (prepared once as name; *prepared says it is) with the bound
 * parameters: the result (PGRES_COMMAND_OK or PGRES_TUPLES_OK), or NULL after
 * fail(what). With writes of the batch sent and not yet answered, it goes
 * after them, and one round trip answers them all. */
static PGresult *pq_exec(pg *s, const char *name, const char *sql, char *prepared, int binary, const char *what) {
  if (s->bind_failed) {
    fail(s, what);
    return NULL;
  }
  if (s->pipe) { /* its answer lands in s->read_res (a field: the queue outlives this call's frame) */
    s->read_res = NULL;
    if (pipe_send(s, name, sql, prepared, binary, what, &s->read_res) != STORE_OK || pipe_drain(s, 1) != STORE_OK)
      return NULL;
    PGresult *r = s->read_res;
    s->read_res = NULL;
    return r;
  }
  reconnect_if_lost(s);
  if (!*prepared) {
    waited(s, "prepare");
    PGresult *r = PQprepare(s->conn, name, sql, 0, NULL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      fail_res(s, what, r);
      PQclear(r);
      return NULL;
    }
    PQclear(r);
    *prepared = 1;
  }
  waited(s, what);
  PGresult *r = PQexecPrepared(s->conn, name, s->np, s->pv, s->plen, s->pfmt, binary);
  ExecStatusType t = PQresultStatus(r);
  if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK) {
    fail_res(s, what, r);
    PQclear(r);
    return NULL;
  }
  return r;
}

/* Runs statement q (SQL[q]) with the bound parameters. */
static PGresult *pq_run(pg *s, int q, int binary, const char *what) {
  char name[16];
  snprintf(name, sizeof name, "e%d", q);
  return pq_exec(s, name, SQL[q], &s->prepared[q], binary, what);
}

/* Sends statement q (SQL[q]) with the bound parameters in the pipeline. */
static int pipe_send_q(pg *s, int q, const char *what, PGresult **keep) {
  if (s->bind_failed) return fail(s, what);
  char name[16];
  snprintf(name, sizeof name, "e%d", q);
  return pipe_send(s, name, SQL[q], &s->prepared[q], 0, what, keep);
}

/* A write statement, run to completion (s->changes: the rows it changed). */
static int exec_now(pg *s, int q, const char *what) {
  PGresult *r = pq_run(s, q, 0, what);
  if (!r) return STORE_ERR;
  s->changes = atoll(PQcmdTuples(r));
  PQclear(r);
  s->writes++;
  return STORE_OK;
}

static int exec_write(pg *s, int q, const char *what) {
  if (injected(s, what)) {
    s->bind_failed = 0;
    return STORE_ERR;
  }
  return exec_now(s, q, what);
}

/* A write of the batch whose answer no one waits for: sent at once, its
 * answer read with the batch's next read or at the commit, where an error
 * of it loses the batch (store_batch_failed says so from then on). Outside
 * a batch (migrate's copy runs in one), it runs to completion. */
static int exec_defer(pg *s, int q, const char *what) {
  if (injected(s, what)) {
    s->bind_failed = 0;
    return STORE_ERR;
  }
  if (!s->in_txn || s->failed || s->bind_failed) return exec_now(s, q, what);
  if (pipe_send_q(s, q, what, NULL) != STORE_OK) return STORE_ERR;
  s->writes++;
  return STORE_OK;
}

static const char *col_text(const PGresult *r, int row, int i) { return PQgetisnull(r, row, i) ? NULL : PQgetvalue(r, row, i); }

static char *col_dup(const PGresult *r, int row, int i) {
  const char *t = col_text(r, row, i);
  return t ? util_strdup(t) : NULL;
}

static int64_t col_int(const PGresult *r, int row, int i) {
  return PQgetisnull(r, row, i) ? 0 : strtoll(PQgetvalue(r, row, i), NULL, 10);
}

/* *out = the first column of the first row (dflt when NULL or no row). */
static int query_int(pg *s, int q, int64_t dflt, int64_t *out) {
  *out = dflt;
  PGresult *r = pq_run(s, q, 0, "query");
  if (!r) return STORE_ERR;
  if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) *out = col_int(r, 0, 0);
  PQclear(r);
  return STORE_OK;
}

/* The least string above every string that starts with prefix, in bytewise
 * (COLLATE "C") order of UTF-8: the prefix with its last character one code
 * point up (characters at U+10FFFF dropped first). NULL when there is none
 * ("" or only U+10FFFF), so the caller reads from the prefix on. */
static char *prefix_above(const char *prefix) {
  size_t n = strlen(prefix);
  char *out = util_xmalloc(n + 5);
  memcpy(out, prefix, n + 1);
  while (n > 0) {
    size_t start = n - 1;
    while (start > 0 && ((unsigned char)out[start] & 0xC0) == 0x80) start--;
    const unsigned char *p = (const unsigned char *)out + start;
    size_t len = n - start;
    uint32_t cp = len == 1   ? p[0]
                  : len == 2 ? (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F)
                  : len == 3 ? (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F)
                             : (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 |
                                   (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
    if (cp >= 0x10FFFF) { /* nothing above it: drop it, raise the one before */
      n = start;
      out[n] = 0;
      continue;
    }
    cp = cp + 1 == 0xD800 ? 0xE000 : cp + 1; /* surrogates are not characters */
    char *q = out + start;
    if (cp < 0x80) {
      *q++ = (char)cp;
    } else if (cp < 0x800) {
      *q++ = (char)(0xC0 | cp >> 6);
      *q++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *q++ = (char)(0xE0 | cp >> 12);
      *q++ = (char)(0x80 | (cp >> 6 & 0x3F));
      *q++ = (char)(0x80 | (cp & 0x3F));
    } else {
      *q++ = (char)(0xF0 | cp >> 18);
      *q++ = (char)(0x80 | (cp >> 12 & 0x3F));
      *q++ = (char)(0x80 | (cp >> 6 & 0x3F));
      *q++ = (char)(0x80 | (cp & 0x3F));
    }
    *q = 0;
    return out;
  }
  free(out);
  return NULL;
}

/* ---- opening ---- */

static void ignore_notice(void *arg, const char *message) {
  (void)arg;
  (void)message;
}

/* Connects to url: the connection, or NULL with err naming where and why
 * (host, port and database as libpq parsed them; never a password). */
static PGconn *connect_url(const char *url, const char *app, const char *timeout_s, char *where, size_t wherelen,
                           char *err, size_t errlen) {
  /* later keywords win: the URL's own connect_timeout, application_name or
   * TCP settings replace these defaults. A link that goes silent (cut off,
   * not closed) fails a call within about 10 s (keepalives for a wait on an
   * answer, tcp_user_timeout for unacknowledged data) instead of the
   * kernel's minutes, so the worker's loop goes on and its leases run out.
   * The server's side (options, kept across PQreset): a transaction left
   * open past a lease (its worker cut off mid-batch) is ended, with its row
   * locks and the order lock, instead of being kept until TCP tells the
   * server the client is gone (two hours by default) while the others skip
   * its tasks or wait for its locks (its batch is fenced off by then
   * anyway); an idle client is probed within about 10 s. */
  const char *lm = getenv("ENGINE_LEASE_MS");
  long long lease = lm && atoll(lm) >= 100 ? atoll(lm) : 10000;
  char options[192];
  snprintf(options, sizeof options,
           "-c idle_in_transaction_session_timeout=%lld -c tcp_keepalives_idle=4 -c tcp_keepalives_interval=2 "
           "-c tcp_keepalives_count=3", lease < 1000 ? 1000 : lease);
  const char *keys[] = {"connect_timeout", "application_name", "keepalives", "keepalives_idle", "keepalives_interval",
                        "keepalives_count", "tcp_user_timeout", "options", "dbname", NULL};
  const char *vals[] = {timeout_s, app, "1", "4", "2", "3", "10000", options, url, NULL};
  PGconn *c = PQconnectdbParams(keys, vals, 1);
  if (!c) {
    util_seterr(err, errlen, "cannot connect to PostgreSQL: out of memory");
    return NULL;
  }
  if (PQstatus(c) != CONNECTION_OK) {
    char why[384];
    pq_reason(c, NULL, why, sizeof why);
    PQconninfoOption *opts = PQconninfoParse(url, NULL);
    const char *host = NULL, *port = NULL, *db = NULL, *user = NULL;
    for (PQconninfoOption *o = opts; o && o->keyword; o++) {
      if (!strcmp(o->keyword, "host") && o->val) host = o->val;
      if (!strcmp(o->keyword, "port") && o->val) port = o->val;
      if (!strcmp(o->keyword, "dbname") && o->val) db = o->val;
      if (!strcmp(o->keyword, "user") && o->val) user = o->val;
    }
    util_seterr(err, errlen, "cannot connect to PostgreSQL at %s:%s, database %s%s%s: %s",
                host ? host : "localhost", port ? port : "5432", db ? db : user ? user : "(default)",
                user ? " as " : "", user ? user : "", why);
    PQconninfoFree(opts);
    PQfinish(c);
    return NULL;
  }
  snprintf(where, wherelen, "postgres://%s@%s:%s/%s", PQuser(c), PQhost(c), PQport(c), PQdb(c));
  PQsetNoticeProcessor(c, ignore_notice, NULL);
  return c;
}

/* Runs sql (no parameters) and says whether it worked; why in err. */
static int simple(PGconn *c, const char *sql, char *why, size_t n, int *kind) {
  PGresult *r = PQexec(c, sql);
  ExecStatusType t = PQresultStatus(r);
  int ok = t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK;
  if (!ok) {
    pq_reason(c, r, why, n);
    if (kind) *kind = classify(r);
  }
  PQclear(r);
  return ok;
}

/* The schema version (0: none, -1: the read failed) and how many tables the
 * connection's schema holds (someone else's database when not ours). */
static int schema_state(PGconn *c, int *other) {
  *other = 0;
  PGresult *r = PQexec(c, "SELECT count(*), count(*) FILTER (WHERE tablename='meta') FROM pg_tables "
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
  s->conn = c;
  s->path = util_strdup(url);
  snprintf(s->where, sizeof s->where, "%s", where);
  const char *maxlen = getenv("ENGINE_STORE_MAX_LENGTH");
  if (maxlen && atoi(maxlen) > 0) s->max_length = atoi(maxlen);
  strmap_init(&s->held);
  strmap_init(&s->claimed);
  strmap_init(&s->fenced);
  strmap_init(&s->releasing);
  return s;
}

/* The session's settings into sql (kept by the store: a reconnection sets
 * them again), then set on c. */
static void set_session(PGconn *c, char *sql, size_t n, int lock_ms, int statement_ms, int readonly) {
  snprintf(sql, n, "SET lock_timeout = %d; SET statement_timeout = %d%s", lock_ms, statement_ms,
           readonly ? "; SET default_transaction_read_only = on" : "");
  simple(c, sql, (char[8]){0}, 8, NULL);
}

int store_pg_open(const char *url, int must_exist, store **out, char *err, size_t errlen) {
  *out = NULL;
  char where[256], why[384];
  PGconn *c = connect_url(url, "engine", "10", where, sizeof where, err, errlen);
  if (!c) return STORE_ERR;
  const char *btm = getenv("ENGINE_BUSY_TIMEOUT_MS");
  char settings[160];
  set_session(c, settings, sizeof settings, btm ? atoi(btm) : 5000, 0, 0);
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
    if (!simple(c, BEGIN_LOCKED, why, sizeof why, &kind)) goto failed;
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
         (!simple(c, SCHEMA, why, sizeof why, &kind) ||
          !simple(c, "INSERT INTO meta VALUES('schema_version','" STR(SCHEMA_VERSION) "') ON CONFLICT(key) DO UPDATE "
                     "SET value=excluded.value", why, sizeof why, &kind) ||
          !simple(c, ins, why, sizeof why, &kind))) ||
        !simple(c, "COMMIT", why, sizeof why, &kind)) {
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
  PGconn *c = connect_url(url, "engine (read-only)", "2", where, sizeof where, err, errlen);
  if (!c) return STORE_ERR;
  char settings[160];
  set_session(c, settings, sizeof settings, busy_ms, busy_ms, 1);
  int other, have = schema_state(c, &other);
  int kind = STORE_OK;
  if (have < 0) {
    pq_reason(c, NULL, why, sizeof why);
    util_seterr(err, errlen, "cannot read database %s: %s", where, why);
    kind = STORE_ERR;
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

/* ---- the worker lock ---- */

/* Connections holding the worker lock, by the descriptor engine_lock hands
 * out (a /dev/null one, so engine_unlock's close works on it too). */
static struct {
  int fd;
  PGconn *c;
  int shared;
} locks[8];

/* Serves share the lock: several run on one database, each workflow under
 * its lease. Anything else takes it alone: migrate, and a foreground start,
 * which runs as the one worker only when no serve runs (beside one it
 * follows its workflow as a client, which it could not if a serve took the
 * workflow over while it waits). */
static const char *lock_sql(int shared) {
  return shared ? "SELECT pg_try_advisory_lock_shared(" STR(LOCK_CLASS) ", " STR(WORKER_LOCK_KEY) ")"
                : "SELECT pg_try_advisory_lock(" STR(LOCK_CLASS) ", " STR(WORKER_LOCK_KEY) ")";
}

int store_pg_lock(const char *url, const char *mode, char *holder, size_t holderlen) {
  char where[256], app[64];
  snprintf(app, sizeof app, "engine %s (pid %d)", mode, (int)getpid());
  int shared = !strcmp(mode, "serve");
  PGconn *c = connect_url(url, app, "10", where, sizeof where, holder, holderlen);
  if (!c) return -1;
  PGresult *r = PQexec(c, lock_sql(shared));
  int got = PQresultStatus(r) == PGRES_TUPLES_OK && PQgetvalue(r, 0, 0)[0] == 't';
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    char why[384];
    pq_reason(c, r, why, sizeof why);
    util_seterr(holder, holderlen, "cannot take the worker lock of %s: %s", where, why);
    PQclear(r);
    PQfinish(c);
    return -1;
  }
  PQclear(r);
  if (!got) {
    /* who holds it: that session's application_name says, as the lock file does */
    r = PQexec(c, "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid=l.pid "
                  "WHERE l.locktype='advisory' AND l.granted AND l.classid=" STR(LOCK_CLASS) " AND l.objid="
                  STR(WORKER_LOCK_KEY) " AND l.database=(SELECT oid FROM pg_database WHERE datname=current_database()) "
                  "LIMIT 1");
    const char *who = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    util_seterr(holder, holderlen, "%s", *who ? who : "another engine process");
    PQclear(r);
    PQfinish(c);
    return -1;
  }
  for (size_t i = 0; i < sizeof locks / sizeof *locks; i++)
    if (!locks[i].c) {
      int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      locks[i].fd = fd;
      locks[i].c = c;
      locks[i].shared = shared;
      return fd;
    }
  util_seterr(holder, holderlen, "too many worker locks held");
  PQfinish(c);
  return -1;
}

int store_pg_unlock(int fd) {
  for (size_t i = 0; i < sizeof locks / sizeof *locks; i++)
    if (locks[i].c && locks[i].fd == fd) {
      /* given up before the session ends: the server lets go of a closed
       * session's locks only once its backend has exited, a moment after
       * PQfinish returns, and a migrate right after a serve stopped must
       * find the lock free */
      if (PQstatus(locks[i].c) == CONNECTION_OK) PQclear(PQexec(locks[i].c, "SELECT pg_advisory_unlock_all()"));
      PQfinish(locks[i].c);
      locks[i].c = NULL;
      return 1;
    }
  return 0;
}

/* Whether this process still holds its worker locks, checked before every
 * batch: a lock session that the server dropped (a restart, a network cut)
 * is taken again, and when another worker took it meanwhile no batch of
 * this process may write: 0, or -1 with why. Asked of the server each time
 * (one round trip a batch): a socket with nothing to read did not prove the
 * session alive (a serve beside a restarted server was seen writing next to
 * the one that had taken the lock). The window that remains, a session lost
 * between this check and the commit, is what fencing in the next phase
 * closes. */
static int locks_held(pg *s, char *why, size_t n) {
  for (size_t i = 0; i < sizeof locks / sizeof *locks; i++) {
    PGconn *c = locks[i].c;
    if (!c) continue;
    PQconsumeInput(c);
    waited(s, "the worker lock");
    PGresult *alive =
        PQstatus(c) == CONNECTION_OK
            ? PQexec(c, "SELECT count(*) FROM pg_locks WHERE locktype='advisory' AND granted AND pid=pg_backend_pid() "
                        "AND classid=" STR(LOCK_CLASS) " AND objid=" STR(WORKER_LOCK_KEY))
            : NULL;
    int ok = PQresultStatus(alive) == PGRES_TUPLES_OK && PQntuples(alive) == 1 && atoi(PQgetvalue(alive, 0, 0)) == 1;
    PQclear(alive);
    if (ok) continue;
    PQreset(c);
    PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, lock_sql(locks[i].shared)) : NULL;
    int got = PQresultStatus(r) == PGRES_TUPLES_OK && PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    if (!got) {
      snprintf(why, n, "the worker lock's session of %s@%s:%s/%s was lost and %s", PQuser(c), PQhost(c), PQport(c),
               PQdb(c), PQstatus(c) == CONNECTION_OK ? "another worker holds the lock now" : "cannot be opened again");
      return -1;
    }
  }
  return 0;
}

/* ---- the store's own state ---- */

static void pg_close(store *st_) {
  pg *s = (pg *)st_;
  if (!s) return;
  pg_rollback(&s->base);
  PQfinish(s->conn);
  for (int i = 0; i < 4; i++)
    if (s->listen[i]) PQfinish(s->listen[i]);
  strmap_free(&s->held);
  strmap_free(&s->claimed);
  strmap_free(&s->fenced);
  strmap_free(&s->releasing);
  params_start(s); /* frees the last copies */
  free(s->path);
  free(s);
}

static const char *pg_errmsg(store *st_) { return ((pg *)st_)->err; }

static const char *pg_path(store *st_) { return ((pg *)st_)->path; }

static int pg_instance_id(store *st_, char *out, size_t n) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, "instance_id");
  PGresult *r = pq_run(s, Q_META_GET, 0, "instance id");
  int found = r && PQntuples(r) > 0;
  if (found) snprintf(out, n, "%s", PQgetvalue(r, 0, 0));
  PQclear(r);
  return found ? 0 : -1;
}

static int pg_batch_failed(store *st_) {
  pg *s = (pg *)st_;
  if (s->pipe) return s->failed; /* what was sent and not answered yet is not known to fail */
  return s->failed || (s->in_txn && PQtransactionStatus(s->conn) != PQTRANS_INTRANS);
}

/* The batch: a transaction of this loop iteration, opened by its first
 * write. Workers write in parallel: a workflow's rows are its lease
 * holder's (fenced at commit), the tasks a dispatch reads are locked to it
 * (Q_TASK_DUE), and what is shared across workflows takes the order lock. */
static int batch_begin(pg *s) {
  if (pg_batch_failed(&s->base)) {
    if (!s->failed) {
      util_seterr(s->err, sizeof s->err, "the transaction was lost (%s)", PQerrorMessage(s->conn));
      s->failed = 1;
    }
    return STORE_ERR;
  }
  if (s->in_txn) return STORE_OK;
  if (injected(s, "begin")) {
    s->failed = 1;
    return STORE_ERR;
  }
  reconnect_if_lost(s);
  char why[384];
  int kind = STORE_ERR;
  if (locks_held(s, why, sizeof why) != 0) {
    util_seterr(s->err, sizeof s->err, "begin: %s", why);
    s->failed = 1;
    return STORE_ERR;
  }
  /* with its id, in the same round trip (batches always write) */
  waited(s, "begin");
  PGresult *r = PQexec(s->conn, "BEGIN; SELECT txid_current()");
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    pq_reason(s->conn, r, why, sizeof why);
    kind = classify(r);
    PQclear(r);
    if (PQtransactionStatus(s->conn) != PQTRANS_IDLE) PQclear(PQexec(s->conn, "ROLLBACK"));
    util_seterr(s->err, sizeof s->err, "begin: %s", why);
    s->failed = 1; /* the writes that follow in this batch must not autocommit one by one */
    return kind;
  }
  s->xid = col_int(r, 0, 0);
  PQclear(r);
  s->in_txn = 1;
  return STORE_OK;
}

/* The order lock (WRITE_LOCK_KEY), held to the end of the batch: what is
 * shared across workflows (domain event seqs and the feed's ids, signal
 * ids, slots, counters, deliveries, schedules, tokens, meta, new workflow
 * ids) is written in commit order by one batch at a time, as SQLite's
 * BEGIN IMMEDIATE gives. Taken late in a batch, it can close a cycle with
 * row locks: PostgreSQL then ends one batch (40P01), which is retried as
 * busy. The wait is bounded by ENGINE_BUSY_TIMEOUT_MS (lock_timeout). */
static int order_lock(pg *s) {
  if (s->ordered || s->failed) return s->failed ? STORE_ERR : STORE_OK;
  if (pipe_drain(s, 1) != STORE_OK) return STORE_ERR;
  waited(s, "the order lock");
  PGresult *r = PQexec(s->conn, ORDER_LOCK);
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    int kind = classify(r);
    fail_res(s, "the order lock", r);
    PQclear(r);
    return kind == STORE_OK ? STORE_ERR : kind;
  }
  PQclear(r);
  s->ordered = 1;
  return STORE_OK;
}

/* store_begin: a client's batch (start, signal, cancel, approve, replay),
 * all in commit order, and its reads of a workflow lock its row. */
static int pg_begin(store *st_) {
  pg *s = (pg *)st_;
  int rc = batch_begin(s);
  if (rc != STORE_OK) return rc;
  s->client = 1;
  return order_lock(s);
}

/* After the connection broke during COMMIT: connected again, whether
 * transaction xid committed (txid_status). Unknown counts as not. */
static int committed_anyway(pg *s, int64_t xid) {
  s->in_txn = 0;
  reconnect_if_lost(s);
  if (PQstatus(s->conn) != CONNECTION_OK) return 0;
  params_start(s);
  bind_int(s, xid);
  PGresult *r = pq_run(s, Q_TXID_STATUS, 0, "commit status");
  int yes = r && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0) && strcmp(PQgetvalue(r, 0, 0), "committed") == 0;
  PQclear(r);
  if (!yes) s->failed = 0, s->err[0] = 0;
  return yes;
}

/* The batch's last round trip: its writes not answered yet, the fence
 * (Q_FENCE_OR_ABORT), the commits bump and COMMIT go in one pipeline.
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
  if (injected(s, "commit")) {
    pg_rollback(&s->base);
    return STORE_ERR;
  }
  int sent = STORE_OK;
  s->commit_bumped = s->writes > 0;
  s->drain_state[0] = 0;
  s->drain_what = NULL;
  if (s->fenced.len) {
    fence_params(s, &s->fenced);
    sent = pipe_send_q(s, Q_FENCE_OR_ABORT, FENCE_WHAT, NULL);
    fence_params_free(s);
  }
  if (s->releasing.len && sent == STORE_OK) {
    fence_params(s, &s->releasing);
    sent = pipe_send_q(s, Q_LEASE_RELEASE_LIST, "release leases", NULL);
    fence_params_free(s);
  }
  if (s->commit_bumped && sent == STORE_OK) { /* other connections see the version change (store_data_version) */
    params_start(s);
    bind_int(s, 1 + PQbackendPID(s->conn) % COMMIT_SHARDS);
    sent = pipe_send_q(s, Q_BUMP, "commit", NULL);
  }
  s->commit_res = NULL;
  if (sent == STORE_OK) {
    params_start(s);
    sent = pipe_send_q(s, Q_COMMIT, "commit", &s->commit_res);
  }
  if (sent != STORE_OK) return commit_outcome(s, 0);
  drain_begin(s);
  return STORE_PENDING;
}

/* Reads the commit's answers (waiting for what has not arrived) and ends the batch. */
static int commit_finish(pg *s) {
  drain_read(s, 1);
  return commit_outcome(s, drain_end(s, 1) == STORE_OK);
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
                 : classify_state(s->drain_state);
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
  for (size_t i = 0; i < s->claimed.cap; i++) /* the batch's claims hold now */
    if (STRMAP_LIVE(&s->claimed, i)) strmap_put(&s->held, s->claimed.keys[i], s->claimed.vals[i]);
  for (size_t i = 0; i < s->releasing.cap; i++) /* and its releases are done */
    if (STRMAP_LIVE(&s->releasing, i)) strmap_del(&s->held, s->releasing.keys[i]);
  map_reset(&s->claimed);
  map_reset(&s->fenced);
  map_reset(&s->releasing);
  s->own_commits += s->commit_bumped;
  s->in_txn = s->ordered = s->client = 0;
  s->last_writes = s->writes;
  s->writes = 0;
  return STORE_OK;
}

static int pg_commit(store *st_) {
  pg *s = (pg *)st_;
  int rc = commit_send(s);
  if (rc == STORE_PENDING) waited(s, "commit");
  return rc == STORE_PENDING ? commit_finish(s) : rc;
}

/* The same without waiting for the answers (store_commit_start): the
 * request is flushed without blocking (PQsetnonblocking), the rest when the
 * socket is writable (commit_progress). */
static int pg_commit_start(store *st_) {
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

static int pg_commit_socket(store *st_, int *writable) {
  pg *s = (pg *)st_;
  *writable = s->flushing;
  return PQsocket(s->conn);
}

static int pg_commit_progress(store *st_) {
  pg *s = (pg *)st_;
  if (s->flushing) {
    int f = PQflush(s->conn);
    if (f == 1) return STORE_PENDING;
    s->flushing = 0;
    if (f < 0) s->dr.lost = 1;
  }
  if (!drain_read(s, 0)) return STORE_PENDING;
  PQsetnonblocking(s->conn, 0);
  return commit_finish(s);
}

/* Waits for the rest of a pending commit (store.c, before any other call). */
static int pg_commit_settle(store *st_) {
  pg *s = (pg *)st_;
  PQsetnonblocking(s->conn, 0);
  waited(s, "commit");
  if (s->flushing && PQflush(s->conn) < 0) s->dr.lost = 1;
  s->flushing = 0;
  return commit_finish(s);
}

/* Ends the batch, whatever state it is in; keeps store_errmsg. */
static void pg_rollback(store *st_) {
  pg *s = (pg *)st_;
  pipe_drain(s, 0);
  if (PQtransactionStatus(s->conn) != PQTRANS_IDLE && PQstatus(s->conn) == CONNECTION_OK)
    PQclear(PQexec(s->conn, "ROLLBACK"));
  s->in_txn = s->ordered = s->client = 0;
  s->failed = 0;
  s->writes = 0;
  map_reset(&s->claimed); /* the claims went with the batch */
  map_reset(&s->fenced);
  map_reset(&s->releasing);
}

static int pg_in_txn(store *st_) {
  pg *s = (pg *)st_;
  if (s->pipe) return 1;
  PGTransactionStatusType t = PQtransactionStatus(s->conn);
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR;
}

static int64_t pg_batch_writes(store *st_) { return ((pg *)st_)->last_writes; }

static int64_t pg_round_trips(store *st_) { return ((pg *)st_)->round_trips; }

/* The commits row counts every commit that wrote, by any connection; less
 * this connection's own, it changes exactly when another one commits (what
 * SQLite's PRAGMA data_version tells). A counter read in the same database
 * rather than pg_stat_database's xact_commit: that one counts reads too and
 * is reported late. */
static int64_t pg_data_version(store *st_) {
  pg *s = (pg *)st_;
  params_start(s);
  int64_t v;
  return query_int(s, Q_DATA_VERSION, 0, &v) == STORE_OK ? v - s->own_commits : -1;
}

#define WRITE_BEGIN(s)                                  \
  do {                                                  \
    if (batch_begin(s) != STORE_OK) return STORE_ERR; \
  } while (0)
/* a write of what is shared across workflows (order_lock) */
#define ORDERED_BEGIN(s)                                                         \
  do {                                                                         \
    if (batch_begin(s) != STORE_OK || order_lock(s) != STORE_OK) return STORE_ERR; \
  } while (0)
/* a read of it inside a batch: what the batch writes next follows from it */
#define ORDERED_READ(s)                                                 \
  do {                                                                \
    if (s->in_txn && !s->failed && order_lock(s) != STORE_OK) return STORE_ERR; \
  } while (0)

static int listener_of(pg *s, int fd) {
  for (int i = 0; i < 4; i++)
    if (s->listen[i] && s->listen_fd[i] == fd) return i;
  return -1;
}

/* A connection of its own that listens for every commit of the database. */
static int pg_commit_fd(store *st_, int old) {
  pg *s = (pg *)st_;
  int i = old >= 0 ? listener_of(s, old) : -1;
  if (i >= 0) {
    PQfinish(s->listen[i]);
    s->listen[i] = NULL;
  } else {
    for (i = 0; i < 4 && s->listen[i]; i++) {
    }
    if (i == 4) return -1;
  }
  char where[256], err[384];
  PGconn *c = connect_url(s->path, "engine (listening)", "10", where, sizeof where, err, sizeof err);
  if (!c) return -1;
  PGresult *r = PQexec(c, "LISTEN engine_commits");
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK && PQsetnonblocking(c, 1) == 0;
  PQclear(r);
  if (!ok) {
    PQfinish(c);
    return -1;
  }
  s->listen[i] = c;
  return s->listen_fd[i] = PQsocket(c);
}

static int pg_commit_drain(store *st_, int fd) {
  pg *s = (pg *)st_;
  int i = listener_of(s, fd);
  /* a lost one is closed by the next store_commit_fd, once nothing polls it */
  if (i < 0 || !PQconsumeInput(s->listen[i]) || PQstatus(s->listen[i]) != CONNECTION_OK) return -1;
  int heard = 0;
  for (PGnotify *n; (n = PQnotifies(s->listen[i])) != NULL; PQfreemem(n)) heard = 1;
  return heard;
}

/* ---- workflows ---- */

static int pg_wf_insert(store *st_, const wf_row *w) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s);
  params_start(s);
  bind_text(s, w->id);
  bind_int(s, w->run);
  bind_text(s, w->status);
  bind_text(s, w->script_name);
  bind_text(s, w->script_dir);
  bind_text(s, w->code_hash);
  bind_text(s, w->input);
  bind_text(s, w->result);
  bind_text(s, w->error);
  bind_int(s, w->cancel);
  bind_int(s, w->created_at);
  bind_int(s, w->updated_at);
  return exec_defer(s, Q_WF_INSERT, "insert workflow");
}

static void read_wf(const PGresult *r, int i, wf_row *w) {
  w->id = col_dup(r, i, 0);
  w->run = col_int(r, i, 1);
  w->status = col_dup(r, i, 2);
  w->script_name = col_dup(r, i, 3);
  w->script_dir = col_dup(r, i, 4);
  w->code_hash = col_dup(r, i, 5);
  w->input = col_dup(r, i, 6);
  w->result = col_dup(r, i, 7);
  w->error = col_dup(r, i, 8);
  w->cancel = (int)col_int(r, i, 9);
  w->created_at = col_int(r, i, 10);
  w->updated_at = col_int(r, i, 11);
}

static int pg_wf_get(store *st_, const char *id, wf_row *out) {
  pg *s = (pg *)st_;
  memset(out, 0, sizeof *out);
  params_start(s);
  bind_text(s, id);
  PGresult *r = pq_run(s, s->client && s->in_txn && !s->failed ? Q_WF_GET_SHARE : Q_WF_GET, 0, "get workflow");
  if (!r) return STORE_ERR;
  int found = PQntuples(r) > 0;
  if (found) read_wf(r, 0, out);
  PQclear(r);
  return found;
}

static int pg_wf_set_status(store *st_, const char *id, const char *status, const char *result, const char *error) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  params_start(s);
  bind_text(s, status);
  bind_text(s, result);
  bind_text(s, error);
  bind_int(s, util_now_ms());
  bind_text(s, id);
  return exec_defer(s, Q_WF_STATUS, "set workflow status");
}

static int pg_wf_set_cancel(store *st_, const char *id, int cancel) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  params_start(s);
  bind_int(s, cancel);
  bind_int(s, util_now_ms());
  bind_text(s, id);
  return exec_defer(s, Q_WF_CANCEL, "set cancel");
}

static int pg_wf_set_code(store *st_, const char *id, const char *code_hash, const char *script_name,
                          const char *script_dir) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  params_start(s);
  bind_text(s, code_hash);
  bind_text(s, script_name);
  bind_text(s, script_dir);
  bind_int(s, util_now_ms());
  bind_text(s, id);
  return exec_defer(s, Q_WF_CODE, "set code");
}

static int pg_wf_new_run(store *st_, const char *id, int64_t run, const char *input) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  params_start(s);
  bind_int(s, run);
  bind_text(s, input);
  bind_int(s, util_now_ms());
  bind_text(s, id);
  return exec_defer(s, Q_WF_NEWRUN, "new run");
}

/* Runs the bound workflow query q, each row to cb (nonzero stops). */
static int each_wf(pg *s, int q, store_wf_cb cb, void *ud) {
  PGresult *r = pq_run(s, q, 0, "list workflows");
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++) {
    wf_row w;
    read_wf(r, i, &w);
    int stop = cb(ud, &w);
    wf_row_free(&w);
    if (stop) break;
  }
  PQclear(r);
  return STORE_OK;
}

static int pg_wf_list(store *st_, const char *status, store_wf_cb cb, void *ud) {
  pg *s = (pg *)st_;
  params_start(s);
  if (status) bind_text(s, status);
  return each_wf(s, status ? Q_WF_LIST_STATUS : Q_WF_LIST, cb, ud);
}

static int pg_wf_page(store *st_, const char *status, const char *script, int64_t after_created, const char *after_id,
                      int newest_first, int limit, store_wf_cb cb, void *ud) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, status);
  bind_text(s, script);
  bind_int(s, after_created);
  bind_text(s, after_id ? after_id : "");
  bind_int(s, limit);
  return each_wf(s, newest_first ? Q_WF_PAGE_DESC : Q_WF_PAGE, cb, ud);
}

static int pg_wf_ids(store *st_, const char *prefix, const char *statuses, int limit, store_wf_cb cb, void *ud) {
  pg *s = (pg *)st_;
  char *above = prefix_above(prefix), *among = statuses ? util_fmt(",%s,", statuses) : NULL;
  params_start(s);
  bind_text(s, prefix);
  if (above) bind_text(s, above);
  bind_text(s, among);
  bind_int(s, limit);
  int rc = each_wf(s, above ? Q_WF_IDS : Q_WF_IDS_FROM, cb, ud);
  free(above);
  free(among);
  return rc;
}

/* ---- history ---- */

static int pg_hist_append(store *st_, const char *wf_id, int64_t run, const hist_event *e) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  params_start(s);
  bind_text(s, wf_id);
  bind_int(s, run);
  bind_int(s, e->seq);
  bind_text(s, e->type);
  bind_int(s, e->ref);
  bind_text(s, e->name);
  bind_text(s, e->hash);
  bind_text(s, e->payload);
  bind_int(s, e->time);
  return exec_defer(s, Q_HIST_APPEND, "append history");
}

static void events_from(const PGresult *r, hist_list *out) {
  for (int i = 0, n = PQntuples(r); i < n; i++) {
    if (out->n == out->cap) {
      out->cap = out->cap ? out->cap * 2 : 16;
      out->v = util_xrealloc(out->v, out->cap * sizeof(hist_event));
    }
    hist_event *e = &out->v[out->n++];
    e->seq = col_int(r, i, 0);
    e->type = col_dup(r, i, 1);
    e->ref = col_int(r, i, 2);
    e->name = col_dup(r, i, 3);
    e->hash = col_dup(r, i, 4);
    e->payload = col_dup(r, i, 5);
    e->time = col_int(r, i, 6);
  }
}

static int read_events(pg *s, int q, hist_list *out) {
  PGresult *r = pq_run(s, q, 0, "load history");
  if (!r) return STORE_ERR;
  events_from(r, out);
  PQclear(r);
  return STORE_OK;
}

/* A run's whole history, from seq 1 without a gap, else the database is damaged. */
static int events_whole(pg *s, const char *wf_id, const hist_list *out, size_t from) {
  for (size_t i = from; i < out->n; i++)
    if (out->v[i].seq != (int64_t)(i - from) + 1) {
      util_seterr(s->err, sizeof s->err, "load history: event #%lld of %s is missing (the database is damaged)",
                  (long long)(i - from) + 1, wf_id);
      return STORE_ERR;
    }
  return STORE_OK;
}

static int pg_hist_load(store *st_, const char *wf_id, int64_t run, hist_list *out) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, wf_id);
  bind_int(s, run);
  size_t from = out->n;
  if (read_events(s, Q_HIST_LOAD, out) != STORE_OK) return STORE_ERR;
  return events_whole(s, wf_id, out, from);
}

static int pg_hist_range(store *st_, const char *wf_id, int64_t run, int64_t from_seq, int64_t to_seq, hist_list *out) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, wf_id);
  bind_int(s, run);
  bind_int(s, from_seq);
  bind_int(s, to_seq);
  return read_events(s, Q_HIST_RANGE, out);
}

static int pg_hist_get(store *st_, const char *wf_id, int64_t run, int64_t seq, hist_list *out) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, wf_id);
  bind_int(s, run);
  bind_int(s, seq);
  size_t before = out->n;
  if (read_events(s, Q_HIST_GET, out) != STORE_OK) return STORE_ERR;
  return out->n > before;
}

static int64_t pg_hist_max_seq(store *st_, const char *wf_id, int64_t run) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, wf_id);
  bind_int(s, run);
  int64_t v;
  return query_int(s, Q_HIST_MAX, 0, &v) == STORE_OK ? v : -1;
}

static int pg_hist_outcome(store *st_, const char *wf_id, int64_t run, int64_t seq) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, wf_id);
  bind_int(s, run);
  bind_int(s, seq);
  bind_int(s, seq);
  int64_t v;
  if (query_int(s, Q_HIST_OUTCOME, 0, &v) != STORE_OK) return STORE_ERR;
  return v != 0;
}

/* ---- code ---- */

static int pg_code_put(store *st_, const char *hash, const char *name, const char *src, size_t len) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  params_start(s);
  bind_text(s, hash);
  bind_text(s, name);
  bind_blob(s, src, len);
  return exec_defer(s, Q_CODE_PUT, "store code");
}

static char *pg_code_get(store *st_, const char *hash, size_t *len) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, hash);
  PGresult *r = pq_run(s, Q_CODE_GET, 1, "get code"); /* binary: the source's bytes as they are */
  if (!r) return NULL;
  char *out = NULL;
  if (PQntuples(r) > 0) {
    int n = PQgetlength(r, 0, 0);
    out = util_xmalloc((size_t)n + 1);
    if (n > 0) memcpy(out, PQgetvalue(r, 0, 0), (size_t)n);
    out[n] = 0;
    if (len) *len = (size_t)n;
  }
  PQclear(r);
  return out;
}

static int pg_module_pin(store *st_, const char *wf_id, int64_t run, const char *module, const char *hash) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  params_start(s);
  bind_text(s, wf_id);
  bind_int(s, run);
  bind_text(s, module);
  bind_text(s, hash);
  return exec_defer(s, Q_MOD_PIN, "pin module");
}

static char *pg_module_get(store *st_, const char *wf_id, int64_t run, const char *module) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, wf_id);
  bind_int(s, run);
  bind_text(s, module);
  PGresult *r = pq_run(s, Q_MOD_GET, 0, "get module");
  if (!r) return NULL;
  char *out = PQntuples(r) > 0 ? col_dup(r, 0, 0) : NULL;
  PQclear(r);
  return out;
}

static int pg_modules_clear(store *st_, const char *wf_id, int64_t run) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  params_start(s);
  bind_text(s, wf_id);
  bind_int(s, run);
  return exec_defer(s, Q_MOD_CLEAR, "clear modules");
}

static int pg_modules_copy(store *st_, const char *wf_id, int64_t from_run, int64_t to_run) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  params_start(s);
  bind_int(s, to_run);
  bind_text(s, wf_id);
  bind_int(s, from_run);
  return exec_defer(s, Q_MOD_COPY, "copy modules");
}

/* ---- tasks ---- */

static int pg_task_put(store *st_, const char *wf_id, const char *kind, int64_t seq, int64_t run_at, int attempt,
                       int64_t first_at, const char *owner, int64_t lease_until) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  params_start(s);
  bind_text(s, wf_id);
  bind_text(s, kind);
  bind_int(s, seq);
  bind_int(s, run_at);
  bind_int(s, attempt);
  bind_int(s, first_at);
  bind_text(s, owner);
  bind_int(s, lease_until);
  return exec_defer(s, Q_TASK_PUT, "put task");
}

/* take: whether it deleted one is known before it returns */
static int task_del(pg *s, const char *wf_id, const char *kind, int64_t seq, int take) {
  WRITE_BEGIN(s);
  params_start(s);
  bind_text(s, wf_id);
  bind_text(s, kind);
  bind_int(s, seq);
  return (take ? exec_write : exec_defer)(s, Q_TASK_DEL, "delete task");
}

static int pg_task_del(store *st_, const char *wf_id, const char *kind, int64_t seq) {
  return task_del((pg *)st_, wf_id, kind, seq, 0);
}

static int pg_task_take(store *st_, const char *wf_id, const char *kind, int64_t seq) {
  pg *s = (pg *)st_;
  if (task_del(s, wf_id, kind, seq, 1) != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

/* store_task_start in one round trip: for each task its claim, its take
 * (while the lease is this worker's: Q_TASK_TAKE_HELD), its row and its
 * history go in one pipeline, each statement seeing what those before it
 * did. */
#define START_STMTS 4
static int pg_task_start(store *st_, const char *owner, int64_t now, int64_t until, task_start *t, size_t n) {
  pg *s = (pg *)st_;
  if (strcmp(s->owner, owner) != 0) announce(s, owner);
  WRITE_BEGIN(s);
  for (size_t i = 0; i < n; i++)
    if ((t[i].claim && injected(s, "claim lease")) || injected(s, "delete task")) return STORE_ERR;
  /* the answers land on the heap (s->start_res: a full queue drains early, before they are read here) */
  PGresult **res = s->start_res = util_xcalloc(n * START_STMTS + 1, sizeof *res);
  int rc = STORE_OK;
  for (size_t i = 0; i < n && rc == STORE_OK; i++) {
    PGresult **r = res + i * START_STMTS;
    if (t[i].claim) {
      params_start(s);
      bind_text(s, t[i].wf_id);
      bind_text(s, owner);
      bind_int(s, now);
      bind_int(s, until);
      rc = pipe_send_q(s, Q_LEASE_CLAIM, "claim lease", &r[0]);
    }
    params_start(s);
    bind_text(s, t[i].wf_id);
    bind_text(s, t[i].kind);
    bind_int(s, t[i].seq);
    bind_text(s, owner);
    if (rc == STORE_OK) rc = pipe_send_q(s, Q_TASK_TAKE_HELD, "delete task", &r[1]);
    params_start(s);
    bind_text(s, t[i].wf_id);
    if (rc == STORE_OK) rc = pipe_send_q(s, Q_WF_GET, "get workflow", &r[2]);
    if (t[i].history && rc == STORE_OK) {
      params_start(s);
      bind_text(s, t[i].wf_id);
      rc = pipe_send_q(s, Q_HIST_LOAD_CURRENT, "load history", &r[3]);
    }
  }
  if (rc == STORE_OK) rc = pipe_drain(s, 1);
  for (size_t i = 0; i < n && rc == STORE_OK; i++) {
    PGresult **r = res + i * START_STMTS;
    s->writes += t[i].claim + 1;
    t[i].owned = !t[i].claim || PQntuples(r[0]) > 0;
    if (t[i].claim && t[i].owned) claimed(s, t[i].wf_id, col_int(r[0], 0, 0));
    else if (t[i].claim) strmap_del(&s->held, t[i].wf_id); /* another worker has it */
    t[i].took = t[i].owned && atoll(PQcmdTuples(r[1])) > 0;
    t[i].found = t[i].took && PQntuples(r[2]) > 0;
    if (t[i].found) read_wf(r[2], 0, &t[i].w);
    if (t[i].found && t[i].history) {
      events_from(r[3], &t[i].h);
      rc = events_whole(s, t[i].wf_id, &t[i].h, 0);
    }
  }
  for (size_t i = 0; i < n * START_STMTS; i++) PQclear(res[i]);
  free(res);
  s->start_res = NULL;
  return rc;
}

static int pg_task_release(store *st_, const char *owner) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  params_start(s);
  bind_text(s, owner);
  return exec_write(s, Q_TASK_RELEASE, "release tasks");
}

static int pg_task_del_wf(store *st_, const char *wf_id) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  params_start(s);
  bind_text(s, wf_id);
  return exec_defer(s, Q_TASK_DEL_WF, "delete tasks");
}

static void read_task(const PGresult *r, int i, task_row *t) {
  t->id = col_int(r, i, 0);
  t->wf_id = col_text(r, i, 1);
  t->kind = col_text(r, i, 2);
  t->seq = col_int(r, i, 3);
  t->run_at = col_int(r, i, 4);
  t->attempt = (int)col_int(r, i, 5);
  t->first_at = col_int(r, i, 6);
  t->leased = col_int(r, i, 7) > 0;
}

static int pg_task_get(store *st_, const char *wf_id, const char *kind, int64_t seq, task_row *out) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, wf_id);
  bind_text(s, kind);
  bind_int(s, seq);
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

static int pg_task_due(store *st_, int64_t now, const char *owner, int limit, int unheld, store_task_cb cb, void *ud) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s); /* the rows it returns are locked to this batch */
  params_start(s);
  bind_int(s, now);
  bind_text(s, owner);
  bind_int(s, limit);
  bind_int(s, unheld < 0 ? limit : unheld);
  /* the whole result is here before the callbacks write to the store */
  PGresult *r = pq_run(s, Q_TASK_DUE, 0, "due tasks");
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++) {
    task_row t;
    read_task(r, i, &t);
    if (cb(ud, &t)) break;
  }
  PQclear(r);
  return STORE_OK;
}

static int64_t pg_task_next_at(store *st_, const char *owner) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, owner);
  int64_t v;
  return query_int(s, Q_TASK_NEXT, -1, &v) == STORE_OK ? v : -2;
}

static int pg_task_count(store *st_, const char *wf_id) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, wf_id);
  int64_t v;
  return query_int(s, Q_TASK_COUNT, 0, &v) == STORE_OK ? (int)v : -1;
}

/* ---- leases (store.h): several workers on one database ---- */

static intptr_t lease_epoch(pg *s, const char *wf_id) {
  intptr_t ep = (intptr_t)strmap_get(&s->claimed, wf_id);
  if (ep || strmap_get(&s->releasing, wf_id)) return ep;
  return (intptr_t)strmap_get(&s->held, wf_id);
}

/* A claim of the open batch got the lease: held once it commits (a
 * release earlier in the batch is void: the lease stays). */
static void claimed(pg *s, const char *wf_id, int64_t epoch) {
  strmap_put(&s->claimed, wf_id, (void *)(intptr_t)epoch);
  strmap_del(&s->releasing, wf_id);
}

static int pg_lease_claim(store *st_, const char *wf_id, const char *owner, int64_t now, int64_t until) {
  pg *s = (pg *)st_;
  if (strcmp(s->owner, owner) != 0) announce(s, owner);
  WRITE_BEGIN(s);
  params_start(s);
  bind_text(s, wf_id);
  bind_text(s, owner);
  bind_int(s, now);
  bind_int(s, until);
  PGresult *r = injected(s, "claim lease") ? NULL : pq_run(s, Q_LEASE_CLAIM, 0, "claim lease");
  if (!r) return STORE_ERR;
  s->writes++;
  int got = PQntuples(r) > 0;
  if (got) {
    claimed(s, wf_id, col_int(r, 0, 0));
  } else {
    strmap_del(&s->held, wf_id); /* another worker has it */
  }
  PQclear(r);
  return got;
}

static int pg_lease_held(store *st_, const char *wf_id) { return lease_epoch((pg *)st_, wf_id) != 0; }

static int64_t pg_lease_count(store *st_) {
  pg *s = (pg *)st_;
  return (int64_t)(s->held.len + s->claimed.len); /* a claim of one held already counts twice: a bound, not a census */
}

static int pg_lease_fence(store *st_, const char *wf_id) {
  pg *s = (pg *)st_;
  strmap_put(&s->fenced, wf_id, (void *)1);
  return STORE_OK;
}

/* Appends v to the PostgreSQL array literal being built in *buf ("{" first,
 * then "," between), quoted and escaped when quote; v NULL closes it. */
static void array_add(char **buf, size_t *len, size_t *cap, const char *v, int quote) {
  size_t need = *len + 2 * (v ? strlen(v) : 0) + 4;
  if (need > *cap) {
    *cap = need * 2;
    *buf = util_xrealloc(*buf, *cap);
  }
  char *o = *buf + *len;
  if (!v) {
    if (!*len) *o++ = '{';
    *o++ = '}';
    *o = 0;
    *len = (size_t)(o - *buf);
    return;
  }
  *o++ = *len ? ',' : '{';
  if (quote) *o++ = '"';
  for (; *v; v++) {
    if (quote && (*v == '"' || *v == '\\')) *o++ = '\\';
    *o++ = *v;
  }
  if (quote) *o++ = '"';
  *len = (size_t)(o - *buf);
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
 * at the epoch claimed (Q_FENCE_OR_ABORT, in the commit's pipeline). The
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
    intptr_t epoch = lease_epoch(s, ids->keys[i]);
    snprintf(ep, sizeof ep, "%lld", (long long)(epoch ? epoch : (intptr_t)strmap_get(&s->releasing, ids->keys[i])));
    array_add(&s->fence_ids, &il, &ic, ids->keys[i], 1);
    array_add(&s->fence_eps, &el, &ec, ep, 0);
  }
  array_add(&s->fence_ids, &il, &ic, NULL, 0);
  array_add(&s->fence_eps, &el, &ec, NULL, 0);
  params_start(s);
  bind_text(s, s->fence_ids);
  bind_text(s, s->fence_eps);
  bind_text(s, s->owner);
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
    lease_lost(s, PQgetvalue(r, 0, 0), col_text(r, 0, 1) != NULL, lost);
    for (int i = 0; i < lost; i++) strmap_del(&s->held, PQgetvalue(r, i, 0));
  }
  PQclear(r);
  return lost ? STORE_ERR : STORE_OK;
}

static int pg_lease_renew(store *st_, const char *owner, int64_t until, void (*lost)(void *ud, const char *wf_id),
                          void *ud) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  params_start(s);
  bind_text(s, owner);
  bind_int(s, until);
  PGresult *r = injected(s, "renew leases") ? NULL : pq_run(s, Q_LEASE_RENEW, 0, "renew leases");
  if (!r) return STORE_ERR;
  s->writes++;
  strmap now;
  strmap_init(&now);
  for (int i = 0, n = PQntuples(r); i < n; i++) strmap_put(&now, PQgetvalue(r, i, 0), (void *)(intptr_t)col_int(r, i, 1));
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
static int pg_lease_release(store *st_, const char *owner, const char *wf_id) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  if (wf_id) {
    if (injected(s, "release lease")) return STORE_ERR;
    intptr_t epoch = lease_epoch(s, wf_id);
    if (epoch) {
      strmap_put(&s->releasing, wf_id, (void *)epoch);
      s->writes++;
    }
    strmap_del(&s->claimed, wf_id);
    return STORE_OK;
  }
  params_start(s);
  bind_text(s, owner);
  if (exec_write(s, Q_LEASE_RELEASE_ALL, "release lease") != STORE_OK) return STORE_ERR;
  map_reset(&s->held);
  map_reset(&s->claimed);
  map_reset(&s->releasing);
  return STORE_OK;
}

/* ---- signals ---- */

static int pg_signal_put(store *st_, const char *wf_id, const char *name, const char *payload, int64_t time) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s);
  params_start(s);
  bind_text(s, wf_id);
  bind_text(s, name);
  bind_text(s, payload);
  bind_int(s, time);
  return exec_defer(s, Q_SIG_PUT, "put signal");
}

static int pg_signal_take(store *st_, const char *wf_id, const char *name, char **payload) {
  pg *s = (pg *)st_;
  *payload = NULL;
  WRITE_BEGIN(s);
  params_start(s);
  bind_text(s, wf_id);
  bind_text(s, name);
  PGresult *r = pq_run(s, Q_SIG_FIND, 0, "find signal");
  if (!r) return STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return 0;
  }
  int64_t id = col_int(r, 0, 0);
  *payload = col_dup(r, 0, 1);
  PQclear(r);
  params_start(s);
  bind_int(s, id);
  if (exec_write(s, Q_SIG_DEL, "take signal") != STORE_OK || s->changes == 0) {
    free(*payload); /* none, or another batch took it first */
    *payload = NULL;
    return s->changes == 0 && !s->failed ? 0 : STORE_ERR;
  }
  return 1;
}

static int pg_signal_has(store *st_, const char *wf_id, const char *name) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, wf_id);
  bind_text(s, name);
  PGresult *r = pq_run(s, Q_SIG_FIND, 0, "find signal");
  if (!r) return STORE_ERR;
  int has = PQntuples(r) > 0;
  PQclear(r);
  return has;
}

static int pg_signal_count(store *st_, const char *wf_id) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, wf_id);
  int64_t v;
  return query_int(s, Q_SIG_COUNT, 0, &v) == STORE_OK ? (int)v : -1;
}

static int pg_signal_del_wf(store *st_, const char *wf_id) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  params_start(s);
  bind_text(s, wf_id);
  return exec_defer(s, Q_SIG_DEL_WF, "delete signals");
}

/* ---- domain events ---- */

static int64_t pg_domain_append(store *st_, const char *session_id, const char *type, int64_t time,
                                const char *payload) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s);
  params_start(s);
  bind_text(s, session_id);
  int64_t seq;
  if (query_int(s, Q_DOM_MAX, 0, &seq) != STORE_OK) return STORE_ERR;
  seq++;
  params_start(s);
  bind_text(s, session_id);
  bind_int(s, seq);
  bind_text(s, type);
  bind_int(s, time);
  bind_text(s, payload);
  if (exec_defer(s, Q_DOM_APPEND, "append domain event") != STORE_OK) return STORE_ERR;
  params_start(s);
  bind_text(s, session_id);
  bind_int(s, seq);
  if (exec_defer(s, Q_FEED_PUT, "append domain event") != STORE_OK) return STORE_ERR;
  return seq;
}

static int pg_domain_list(store *st_, const char *session_id, int64_t after_seq, store_domain_cb cb, void *ud) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_text(s, session_id);
  bind_int(s, after_seq);
  PGresult *r = pq_run(s, Q_DOM_LIST, 0, "list domain events");
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++) {
    domain_event e = {col_text(r, i, 0), col_int(r, i, 1), col_text(r, i, 2), col_int(r, i, 3), col_text(r, i, 4)};
    if (cb(ud, &e)) break;
  }
  PQclear(r);
  return STORE_OK;
}

/* store_wf_view: the five reads in one pipeline, so in one snapshot (one
 * implicit transaction, or the batch's own) and one round trip. */
static int pg_wf_view(store *st_, const char *id, wf_view *out, store_domain_cb cb, void *ud) {
  pg *s = (pg *)st_;
  static const int Q[] = {Q_WF_GET, Q_HIST_LOAD_CURRENT, Q_TASK_COUNT, Q_SIG_COUNT, Q_DOM_LIST};
  static const char *what[] = {"get workflow", "load history", "count tasks", "count signals", "list domain events"};
  PGresult *r[5] = {0}; /* filled by the drain before this returns (a send that fails drains too) */
  int rc = STORE_OK;
  for (int i = 0; i < 5 && rc == STORE_OK; i++) {
    params_start(s);
    bind_text(s, id);
    if (Q[i] == Q_DOM_LIST) bind_int(s, 0);
    rc = pipe_send_q(s, Q[i], what[i], &r[i]);
  }
  if (rc == STORE_OK) rc = pipe_drain(s, 1);
  int found = rc == STORE_OK ? PQntuples(r[0]) > 0 : -1;
  if (found == 1) {
    read_wf(r[0], 0, &out->w);
    events_from(r[1], &out->h);
    out->tasks = (int)col_int(r[2], 0, 0);
    out->signals = (int)col_int(r[3], 0, 0);
    if (events_whole(s, id, &out->h, 0) != STORE_OK) found = -1;
    for (int i = 0, n = PQntuples(r[4]); i < n && found == 1; i++) {
      domain_event e = {col_text(r[4], i, 0), col_int(r[4], i, 1), col_text(r[4], i, 2), col_int(r[4], i, 3),
                        col_text(r[4], i, 4)};
      if (cb(ud, &e)) break;
    }
  }
  for (int i = 0; i < 5; i++) PQclear(r[i]);
  if (found != 1) store_wf_view_free(out);
  return found;
}

static int pg_feed_after(store *st_, int64_t after_id, int limit, store_feed_cb cb, void *ud) {
  pg *s = (pg *)st_;
  params_start(s);
  bind_int(s, after_id);
  bind_int(s, limit);
  PGresult *r = pq_run(s, Q_FEED_AFTER, 0, "read the event feed");
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++) {
    domain_event e = {col_text(r, i, 1), col_int(r, i, 2), col_text(r, i, 3), col_int(r, i, 4), col_text(r, i, 5)};
    if (cb(ud, col_int(r, i, 0), &e)) break;
  }
  PQclear(r);
  return STORE_OK;
}

static int64_t pg_feed_last(store *st_) {
  pg *s = (pg *)st_;
  params_start(s);
  int64_t v = 0;
  return query_int(s, Q_FEED_LAST, 0, &v) == STORE_OK ? v : STORE_ERR;
}

/* ---- meta ---- */

static int pg_meta_get(store *st_, const char *key, char **value) {
  pg *s = (pg *)st_;
  ORDERED_READ(s);
  *value = NULL;
  params_start(s);
  bind_text(s, key);
  PGresult *r = pq_run(s, Q_META_GET, 0, "meta");
  if (!r) return STORE_ERR;
  if (PQntuples(r) > 0) *value = col_dup(r, 0, 0);
  PQclear(r);
  return *value ? 1 : 0;
}

static int pg_meta_put(store *st_, const char *key, const char *value) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s);
  params_start(s);
  bind_text(s, key);
  if (value) bind_text(s, value);
  return exec_defer(s, value ? Q_META_PUT : Q_META_DEL, "meta");
}

/* ---- API tokens ---- */

static int pg_token_put(store *st_, const char *name, const char *hash, unsigned scopes, int64_t created_at) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s);
  params_start(s);
  bind_text(s, name);
  bind_text(s, hash);
  bind_int(s, scopes);
  bind_int(s, created_at);
  if (exec_write(s, Q_TOKEN_PUT, "put token") != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

static int pg_token_revoke(store *st_, const char *name, int64_t revoked_at) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s);
  params_start(s);
  bind_int(s, revoked_at);
  bind_text(s, name);
  if (exec_write(s, Q_TOKEN_REVOKE, "revoke token") != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

static int token_scan(pg *s, int q, store_token_cb cb, void *ud, const char *what) {
  params_start(s);
  PGresult *r = pq_run(s, q, 0, what);
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++) {
    token_row t = {col_text(r, i, 0), col_text(r, i, 1), (unsigned)col_int(r, i, 2), col_int(r, i, 3),
                   col_int(r, i, 4)};
    if (cb(ud, &t)) break;
  }
  PQclear(r);
  return STORE_OK;
}

static int pg_token_list(store *st_, store_token_cb cb, void *ud) {
  return token_scan((pg *)st_, Q_TOKEN_LIST, cb, ud, "list tokens");
}

static int pg_token_live(store *st_, store_token_cb cb, void *ud) {
  return token_scan((pg *)st_, Q_TOKEN_LIVE, cb, ud, "read live tokens");
}

static int64_t pg_token_live_count(store *st_) {
  pg *s = (pg *)st_;
  params_start(s);
  int64_t v;
  return query_int(s, Q_TOKEN_LIVE_COUNT, 0, &v) == STORE_OK ? v : -1;
}

/* ---- slots ---- */

static void slot_from(const PGresult *r, int i, slot_row *x) {
  x->pool = col_text(r, i, 0);
  x->key = col_text(r, i, 1);
  x->wf_id = col_text(r, i, 2);
  x->seq = col_int(r, i, 3);
  x->limit = col_int(r, i, 4);
  x->held = (int)col_int(r, i, 5);
  x->since = col_int(r, i, 6);
  x->position = col_int(r, i, 7);
}

static int pg_slot_put(store *st_, const char *pool, const char *key, const char *wf_id, int64_t seq, int64_t limit,
                       int64_t since) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s);
  params_start(s);
  bind_text(s, pool);
  bind_text(s, key);
  bind_text(s, wf_id);
  bind_int(s, seq);
  bind_int(s, limit);
  bind_int(s, since);
  return exec_defer(s, Q_SLOT_PUT, "put slot");
}

static int slot_one(pg *s, int q, store_slot_cb cb, void *ud) {
  PGresult *r = pq_run(s, q, 0, "read slot");
  if (!r) return STORE_ERR;
  int found = PQntuples(r) > 0;
  if (found) {
    slot_row x;
    slot_from(r, 0, &x);
    cb(ud, &x);
  }
  PQclear(r);
  return found;
}

static int pg_slot_get(store *st_, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud) {
  pg *s = (pg *)st_;
  ORDERED_READ(s);
  params_start(s);
  bind_text(s, wf_id);
  bind_text(s, pool);
  bind_text(s, key);
  return slot_one(s, Q_SLOT_GET, cb, ud);
}

static int pg_slot_head(store *st_, const char *pool, const char *key, store_slot_cb cb, void *ud) {
  pg *s = (pg *)st_;
  ORDERED_READ(s);
  params_start(s);
  bind_text(s, pool);
  bind_text(s, key);
  return slot_one(s, Q_SLOT_HEAD, cb, ud);
}

static int64_t pg_slot_count(store *st_, const char *pool, const char *key, int held) {
  pg *s = (pg *)st_;
  ORDERED_READ(s);
  params_start(s);
  bind_text(s, pool);
  bind_text(s, key);
  bind_int(s, held ? 1 : 0);
  int64_t v;
  return query_int(s, Q_SLOT_COUNT, 0, &v) == STORE_OK ? v : -1;
}

static int pg_slot_hold(store *st_, const char *wf_id, const char *pool, const char *key, int64_t since) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s);
  params_start(s);
  bind_int(s, since);
  bind_text(s, wf_id);
  bind_text(s, pool);
  bind_text(s, key);
  return exec_write(s, Q_SLOT_HOLD, "hold slot");
}

static int pg_slot_del(store *st_, const char *wf_id, const char *pool, const char *key) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s);
  params_start(s);
  bind_text(s, wf_id);
  bind_text(s, pool);
  bind_text(s, key);
  if (exec_write(s, Q_SLOT_DEL, "delete slot") != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

static int pg_slot_list(store *st_, const char *wf_id, const char *pool, const char *key, store_slot_cb cb,
                        void *ud) {
  pg *s = (pg *)st_;
  /* a workflow's own slots are its lease holder's to add: no order needed
   * (every workflow's end lists them, and most hold none) */
  if (!wf_id) ORDERED_READ(s);
  params_start(s);
  if (wf_id) {
    bind_text(s, wf_id);
  } else if (pool) {
    bind_text(s, pool);
    bind_text(s, key);
  }
  PGresult *r = pq_run(s, wf_id ? Q_SLOT_OF_WF : pool ? Q_SLOT_OF_KEY : Q_SLOT_ALL, 0, "list slots");
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++) {
    slot_row x;
    slot_from(r, i, &x);
    if (cb(ud, &x)) break;
  }
  PQclear(r);
  return STORE_OK;
}

/* ---- counters ---- */

static void counter_from(const PGresult *r, int i, counter_row *c) {
  c->name = col_text(r, i, 0);
  c->value = PQgetisnull(r, i, 1) ? 0 : strtod(PQgetvalue(r, i, 1), NULL);
  c->window_start = col_int(r, i, 2);
  c->paused_until = col_int(r, i, 3);
  c->updated_at = col_int(r, i, 4);
}

static int pg_counter_get(store *st_, const char *name, counter_row *out) {
  pg *s = (pg *)st_;
  ORDERED_READ(s);
  memset(out, 0, sizeof *out);
  params_start(s);
  bind_text(s, name);
  PGresult *r = pq_run(s, Q_CTR_GET, 0, "read counter");
  if (!r) return STORE_ERR;
  int found = PQntuples(r) > 0;
  if (found) {
    counter_from(r, 0, out);
    out->name = NULL; /* the result's text goes with it */
  }
  PQclear(r);
  return found;
}

static int pg_counter_put(store *st_, const char *name, const counter_row *c) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s);
  params_start(s);
  bind_text(s, name);
  bind_double(s, c->value);
  bind_int(s, c->window_start);
  bind_int(s, c->paused_until);
  bind_int(s, c->updated_at);
  return exec_defer(s, Q_CTR_PUT, "write counter");
}

static int pg_counter_list(store *st_, const char *prefix, store_counter_cb cb, void *ud) {
  pg *s = (pg *)st_;
  ORDERED_READ(s);
  char *above = prefix_above(prefix);
  params_start(s);
  bind_text(s, prefix);
  if (above) bind_text(s, above);
  PGresult *r = pq_run(s, above ? Q_CTR_LIST : Q_CTR_LIST_FROM, 0, "list counters");
  free(above);
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++) {
    counter_row c;
    counter_from(r, i, &c);
    if (cb(ud, &c)) break;
  }
  PQclear(r);
  return STORE_OK;
}

/* ---- webhook deliveries ---- */

static int pg_delivery_put(store *st_, const delivery_row *d) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s);
  params_start(s);
  bind_text(s, d->trigger);
  bind_text(s, d->delivery ? d->delivery : "");
  bind_int(s, d->received_at);
  bind_text(s, d->outcome);
  bind_int(s, d->status);
  bind_text(s, d->wf_id);
  bind_text(s, d->detail);
  if (exec_write(s, Q_DLV_PUT, "record delivery") != STORE_OK) return STORE_ERR;
  if (s->changes == 0) return 1;
  if (strcmp(d->outcome, "started") == 0 || strcmp(d->outcome, "existing") == 0) return 0;
  params_start(s);
  bind_text(s, d->trigger);
  return exec_write(s, Q_DLV_PRUNE, "prune deliveries");
}

static int delivery_scan(pg *s, int q, store_delivery_cb cb, void *ud, const char *what) {
  PGresult *r = pq_run(s, q, 0, what);
  if (!r) return STORE_ERR;
  int n = PQntuples(r);
  for (int i = 0; i < n; i++) {
    delivery_row d = {col_int(r, i, 0), col_text(r, i, 1), col_text(r, i, 2), col_int(r, i, 3),
                      col_text(r, i, 4), (int)col_int(r, i, 5), col_text(r, i, 6), col_text(r, i, 7)};
    if (cb && cb(ud, &d)) break;
  }
  PQclear(r);
  return n;
}

static int pg_delivery_find(store *st_, const char *trigger, const char *delivery, store_delivery_cb cb, void *ud) {
  pg *s = (pg *)st_;
  ORDERED_READ(s);
  params_start(s);
  bind_text(s, trigger);
  bind_text(s, delivery);
  int n = delivery_scan(s, Q_DLV_FIND, cb, ud, "find delivery");
  return n < 0 ? n : n > 0;
}

static int pg_delivery_list(store *st_, const char *trigger, int limit, store_delivery_cb cb, void *ud) {
  pg *s = (pg *)st_;
  params_start(s);
  if (trigger) bind_text(s, trigger);
  bind_int(s, limit);
  int n = delivery_scan(s, trigger ? Q_DLV_LIST : Q_DLV_LIST_ALL, cb, ud, "list deliveries");
  return n < 0 ? n : STORE_OK;
}

/* ---- schedules ---- */

/* Binds the columns in the order of the statements: name first, then the
 * fields an update rewrites (through updated_at), created_at last when with_created. */
static void schedule_bind(pg *s, const schedule_row *r, int with_created) {
  params_start(s);
  bind_text(s, r->name);
  bind_text(s, r->cron);
  bind_text(s, r->tz);
  bind_text(s, r->script);
  bind_text(s, r->input);
  bind_text(s, r->overlap);
  bind_int(s, r->catchup_window_ms);
  bind_int(s, r->jitter_ms);
  bind_int(s, r->paused);
  bind_int(s, r->next_fire_at);
  bind_int(s, r->last_fire_at);
  bind_int(s, r->buffered_fire_at);
  bind_int(s, r->skipped_count);
  bind_int(s, r->updated_at);
  if (with_created) bind_int(s, r->created_at);
}

static int pg_schedule_insert(store *st_, const schedule_row *r) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s);
  schedule_bind(s, r, 1);
  if (exec_write(s, Q_SCH_INSERT, "write schedule") != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

static int pg_schedule_update(store *st_, const schedule_row *r) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s);
  schedule_bind(s, r, 0);
  if (exec_write(s, Q_SCH_UPDATE, "update schedule") != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

static int schedule_scan(pg *s, int q, store_schedule_cb cb, void *ud, const char *what) {
  PGresult *r = pq_run(s, q, 0, what);
  if (!r) return STORE_ERR;
  int n = PQntuples(r);
  for (int i = 0; i < n; i++) {
    schedule_row row = {col_text(r, i, 0),       col_text(r, i, 1),       col_text(r, i, 2),  col_text(r, i, 3),
                        col_text(r, i, 4),       col_text(r, i, 5),       col_int(r, i, 6),   col_int(r, i, 7),
                        (int)col_int(r, i, 8),   col_int(r, i, 9),        col_int(r, i, 10),  col_int(r, i, 11),
                        col_int(r, i, 12),       col_int(r, i, 14),       col_int(r, i, 13)};
    if (cb && cb(ud, &row)) break;
  }
  PQclear(r);
  return n;
}

static int pg_schedule_get(store *st_, const char *name, store_schedule_cb cb, void *ud) {
  pg *s = (pg *)st_;
  ORDERED_READ(s);
  params_start(s);
  bind_text(s, name);
  int n = schedule_scan(s, Q_SCH_GET, cb, ud, "read schedule");
  return n < 0 ? n : n > 0;
}

static int pg_schedule_list(store *st_, store_schedule_cb cb, void *ud) {
  pg *s = (pg *)st_;
  ORDERED_READ(s);
  params_start(s);
  int n = schedule_scan(s, Q_SCH_LIST, cb, ud, "list schedules");
  return n < 0 ? n : STORE_OK;
}

static int pg_schedule_del(store *st_, const char *name) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s);
  params_start(s);
  bind_text(s, name);
  if (exec_write(s, Q_SCH_DEL, "delete schedule") != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

/* ---- counts ---- */

static int pg_group_count(store *st_, store_group what, int (*cb)(void *ud, const char *key, int64_t n), void *ud) {
  pg *s = (pg *)st_;
  int q = what == STORE_GROUP_STATUS  ? Q_GROUP_STATUS
          : what == STORE_GROUP_TASKS ? Q_GROUP_TASKS
          : what == STORE_GROUP_SLOTS ? Q_GROUP_SLOTS
                                      : Q_GROUP_SANDBOXES;
  params_start(s);
  PGresult *r = pq_run(s, q, 0, "count");
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++)
    if (cb(ud, col_text(r, i, 0), col_int(r, i, 1))) break;
  PQclear(r);
  return STORE_OK;
}

static int pg_live_list(store *st_, store_live_cb cb, void *ud) {
  pg *s = (pg *)st_;
  params_start(s);
  PGresult *r = pq_run(s, Q_LIVE_LIST, 0, "list live workflows");
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++)
    if (cb(ud, col_text(r, i, 0), col_text(r, i, 1))) break;
  PQclear(r);
  return STORE_OK;
}

static int64_t pg_count(store *st_, const char *what, const char *wf_id) {
  pg *s = (pg *)st_;
  if (strcmp(what, "history") == 0) {
    params_start(s);
    bind_text(s, wf_id);
    int64_t v;
    return query_int(s, Q_COUNT_HIST, 0, &v) == STORE_OK ? v : -1;
  }
  if (strcmp(what, "signals") == 0) return pg_signal_count(&s->base, wf_id);
  if (strcmp(what, "tasks") == 0) return pg_task_count(&s->base, wf_id);
  return -1;
}

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
  PGresult *r = pq_exec(s, name, sql, &s->table_prepared[ti][what], 0, t->name);
  free(sql);
  return r;
}

static void bind_value(pg *s, const store_value *v) {
  switch (v->type) {
  case STORE_V_NULL: bind_text(s, NULL); break;
  case STORE_V_INT: bind_int(s, v->i); break;
  case STORE_V_REAL: bind_double(s, v->r); break;
  case STORE_V_TEXT:
    /* a text parameter ends at its NUL: one inside the value would cut it */
    if (memchr(v->p, 0, v->n)) bind_fail(s, v->n, "a NUL byte in text (PostgreSQL's text cannot hold one)");
    size_t fn;
    char *fixed = util_utf8_repair(v->p, v->n, &fn);
    if (fixed) /* a copy is exact or it stops: not made U+FFFD as bind_text would */
      bind_fail(s, v->n, "text that is not UTF-8 (PostgreSQL's text holds nothing else)");
    free(fixed);
    bind_text(s, v->p);
    break;
  case STORE_V_BLOB: bind_blob(s, v->p, v->n); break;
  }
}

static int hexval(int c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int pg_table_page(store *st_, const store_table *t, const store_value *after, int limit, store_row_cb cb,
                         void *ud) {
  pg *s = (pg *)st_;
  params_start(s);
  if (after)
    for (int i = 0; i < t->nkey; i++) bind_value(s, &after[i]);
  bind_int(s, limit);
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

static int pg_table_insert(store *st_, const store_table *t, const store_value *row, int replace) {
  pg *s = (pg *)st_;
  if (pg_begin(st_) != STORE_OK) return STORE_ERR;
  if (injected(s, t->name)) return STORE_ERR;
  params_start(s);
  for (int i = 0; i < t->ncolumns; i++) bind_value(s, &row[i]);
  PGresult *r = table_run(s, t, replace ? STORE_TABLE_REPLACE : STORE_TABLE_INSERT);
  if (!r) return STORE_ERR;
  PQclear(r);
  s->writes++;
  return STORE_OK;
}

static int64_t pg_table_count(store *st_, const store_table *t) {
  pg *s = (pg *)st_;
  params_start(s);
  PGresult *r = table_run(s, t, STORE_TABLE_COUNT);
  if (!r) return STORE_ERR;
  int64_t n = PQntuples(r) > 0 ? col_int(r, 0, 0) : 0;
  PQclear(r);
  return n;
}

static int pg_table_finish(store *st_, const store_table *t) {
  pg *s = (pg *)st_;
  char *sql = store_table_sql(t, STORE_TABLE_SERIAL, 1);
  free(sql);
  if (!sql) return STORE_OK;
  params_start(s);
  PGresult *r = table_run(s, t, STORE_TABLE_SERIAL);
  if (!r) return STORE_ERR;
  PQclear(r);
  return STORE_OK;
}

const store_ops store_pg_ops = {
    .close = pg_close,
    .errmsg = pg_errmsg,
    .path = pg_path,
    .instance_id = pg_instance_id,
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .in_txn = pg_in_txn,
    .batch_failed = pg_batch_failed,
    .batch_writes = pg_batch_writes,
    .round_trips = pg_round_trips,
    .data_version = pg_data_version,
    .commit_fd = pg_commit_fd,
    .commit_drain = pg_commit_drain,
    .lease_claim = pg_lease_claim,
    .lease_held = pg_lease_held,
    .lease_count = pg_lease_count,
    .lease_fence = pg_lease_fence,
    .lease_renew = pg_lease_renew,
    .lease_release = pg_lease_release,
    .wf_insert = pg_wf_insert,
    .wf_get = pg_wf_get,
    .wf_set_status = pg_wf_set_status,
    .wf_set_cancel = pg_wf_set_cancel,
    .wf_set_code = pg_wf_set_code,
    .wf_new_run = pg_wf_new_run,
    .wf_list = pg_wf_list,
    .wf_page = pg_wf_page,
    .wf_ids = pg_wf_ids,
    .hist_append = pg_hist_append,
    .hist_load = pg_hist_load,
    .hist_range = pg_hist_range,
    .hist_max_seq = pg_hist_max_seq,
    .hist_outcome = pg_hist_outcome,
    .hist_get = pg_hist_get,
    .code_put = pg_code_put,
    .code_get = pg_code_get,
    .module_pin = pg_module_pin,
    .module_get = pg_module_get,
    .modules_clear = pg_modules_clear,
    .modules_copy = pg_modules_copy,
    .task_put = pg_task_put,
    .task_del = pg_task_del,
    .task_take = pg_task_take,
    .task_start = pg_task_start,
    .wf_view = pg_wf_view,
    .task_release = pg_task_release,
    .task_del_wf = pg_task_del_wf,
    .task_get = pg_task_get,
    .task_due = pg_task_due,
    .task_next_at = pg_task_next_at,
    .task_count = pg_task_count,
    .signal_put = pg_signal_put,
    .signal_take = pg_signal_take,
    .signal_count = pg_signal_count,
    .signal_has = pg_signal_has,
    .signal_del_wf = pg_signal_del_wf,
    .domain_append = pg_domain_append,
    .domain_list = pg_domain_list,
    .feed_after = pg_feed_after,
    .feed_last = pg_feed_last,
    .meta_get = pg_meta_get,
    .meta_put = pg_meta_put,
    .delivery_put = pg_delivery_put,
    .delivery_find = pg_delivery_find,
    .delivery_list = pg_delivery_list,
    .token_put = pg_token_put,
    .token_revoke = pg_token_revoke,
    .token_list = pg_token_list,
    .token_live = pg_token_live,
    .token_live_count = pg_token_live_count,
    .slot_put = pg_slot_put,
    .slot_get = pg_slot_get,
    .slot_head = pg_slot_head,
    .slot_count = pg_slot_count,
    .slot_hold = pg_slot_hold,
    .slot_del = pg_slot_del,
    .slot_list = pg_slot_list,
    .table_page = pg_table_page,
    .table_insert = pg_table_insert,
    .table_count = pg_table_count,
    .table_finish = pg_table_finish,
    .counter_get = pg_counter_get,
    .counter_put = pg_counter_put,
    .counter_list = pg_counter_list,
    .schedule_insert = pg_schedule_insert,
    .schedule_update = pg_schedule_update,
    .schedule_get = pg_schedule_get,
    .schedule_list = pg_schedule_list,
    .schedule_del = pg_schedule_del,
    .group_count = pg_group_count,
    .commit_start = pg_commit_start,
    .commit_socket = pg_commit_socket,
    .commit_progress = pg_commit_progress,
    .commit_settle = pg_commit_settle,
    .live_list = pg_live_list,
    .count = pg_count,
};
