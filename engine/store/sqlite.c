#include "backend.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crash.h"
#include "util.h"

/* 2: event_feed (one order over every session's events, for GET /v1/events), tokens
 * 3: slots (concurrency limits and caps) and counters (quotas, rate windows)
 * 4: deliveries (webhook deliveries and their outcomes) and schedules */
#define SCHEMA_VERSION 4
#define STR_(x) #x
#define STR(x) STR_(x)

static const char *SCHEMA =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS workflows("
    "  id TEXT PRIMARY KEY, run INTEGER NOT NULL, status TEXT NOT NULL,"
    "  script_name TEXT NOT NULL, script_dir TEXT NOT NULL, code_hash TEXT NOT NULL,"
    "  input TEXT, result TEXT, error TEXT, cancel INTEGER NOT NULL DEFAULT 0,"
    "  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS workflows_status ON workflows(status, updated_at);"
    /* the API's pages (either direction) read a range of it, not the table sorted */
    "CREATE INDEX IF NOT EXISTS workflows_created ON workflows(created_at, id);"
    "CREATE TABLE IF NOT EXISTS history("
    "  wf_id TEXT NOT NULL, run INTEGER NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL,"
    "  ref INTEGER NOT NULL DEFAULT 0, name TEXT, hash TEXT, payload TEXT, time INTEGER NOT NULL,"
    "  PRIMARY KEY(wf_id, run, seq)) WITHOUT ROWID;"
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
    "  type TEXT NOT NULL, time INTEGER NOT NULL, payload TEXT,"
    "  PRIMARY KEY(session_id, seq)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS event_feed(id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seq INTEGER NOT NULL);"
    /* API tokens keep only the SHA-256 of their secret (tokens.c) */
    "CREATE TABLE IF NOT EXISTS tokens(name TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE,"
    "  scopes INTEGER NOT NULL, created_at INTEGER NOT NULL, revoked_at INTEGER);"
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
    "  skipped_count INTEGER NOT NULL DEFAULT 0, updated_at INTEGER NOT NULL, created_at INTEGER NOT NULL);";

/* A database of an older version gets what it lacks, in one transaction:
 * SCHEMA again (it only creates what is missing), and the feed of the events
 * it has, in the order they were written. */
static const char *MIGRATE =
    "INSERT INTO event_feed(session_id,seq) SELECT session_id,seq FROM domain_events "
    "WHERE NOT EXISTS(SELECT 1 FROM event_feed) ORDER BY time, session_id, seq;";

enum {
  Q_WF_INSERT,
  Q_WF_GET,
  Q_WF_STATUS,
  Q_WF_CANCEL,
  Q_WF_CODE,
  Q_WF_NEWRUN,
  Q_WF_LIST,
  Q_WF_LIST_STATUS,
  Q_WF_IDS,
  Q_HIST_APPEND,
  Q_HIST_LOAD,
  Q_HIST_GET,
  Q_HIST_RANGE,
  Q_HIST_MAX,
  Q_HIST_OUTCOME,
  Q_CODE_PUT,
  Q_CODE_GET,
  Q_MOD_PIN,
  Q_MOD_GET,
  Q_MOD_CLEAR,
  Q_MOD_COPY,
  Q_TASK_PUT,
  Q_TASK_DEL,
  Q_TASK_DEL_WF,
  Q_TASK_RELEASE,
  Q_TASK_GET,
  Q_TASK_DUE,
  Q_TASK_NEXT,
  Q_TASK_COUNT,
  Q_SIG_PUT,
  Q_SIG_FIND,
  Q_SIG_DEL,
  Q_SIG_COUNT,
  Q_SIG_DEL_WF,
  Q_DOM_MAX,
  Q_DOM_APPEND,
  Q_DOM_LIST,
  Q_FEED_PUT,
  Q_FEED_AFTER,
  Q_FEED_LAST,
  Q_WF_PAGE,
  Q_WF_PAGE_DESC,
  Q_GROUP_STATUS,
  Q_GROUP_TASKS,
  Q_GROUP_SANDBOXES,
  Q_LIVE_LIST,
  Q_GROUP_SLOTS,
  Q_DATA_VERSION,
  Q_COUNT_HIST,
  Q_META_GET,
  Q_META_PUT,
  Q_META_DEL,
  Q_DLV_PUT,
  Q_DLV_PRUNE,
  Q_DLV_FIND,
  Q_DLV_LIST,
  Q_DLV_LIST_ALL,
  Q_TOKEN_PUT,
  Q_TOKEN_REVOKE,
  Q_TOKEN_LIST,
  Q_TOKEN_LIVE,
  Q_TOKEN_LIVE_COUNT,
  Q_SLOT_PUT,
  Q_SLOT_GET,
  Q_SLOT_COUNT,
  Q_SLOT_HEAD,
  Q_SLOT_HOLD,
  Q_SLOT_DEL,
  Q_SLOT_OF_WF,
  Q_SLOT_OF_KEY,
  Q_SLOT_ALL,
  Q_CTR_GET,
  Q_CTR_PUT,
  Q_CTR_LIST,
  Q_SCH_INSERT,
  Q_SCH_UPDATE,
  Q_SCH_GET,
  Q_SCH_LIST,
  Q_SCH_DEL,
  Q__N
};

/* a schedule's columns in the order schedule_bind binds them */
#define SCH_COLS                                                                                           \
  "name,cron,tz,script,input,overlap,catchup_window_ms,jitter_ms,paused,next_fire_at,last_fire_at,"        \
  "buffered_fire_at,skipped_count,updated_at,created_at"

static const char *SQL[Q__N] = {
    [Q_WF_INSERT] = "INSERT INTO workflows(id,run,status,script_name,script_dir,code_hash,input,result,error,cancel,"
                    "created_at,updated_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
    [Q_WF_GET] = "SELECT id,run,status,script_name,script_dir,code_hash,input,result,error,cancel,created_at,"
                 "updated_at FROM workflows WHERE id=?",
    [Q_WF_STATUS] = "UPDATE workflows SET status=?, result=?, error=?, updated_at=? WHERE id=?",
    [Q_WF_CANCEL] = "UPDATE workflows SET cancel=?, updated_at=? WHERE id=?",
    [Q_WF_CODE] = "UPDATE workflows SET code_hash=?, script_name=?, script_dir=?, updated_at=? WHERE id=?",
    [Q_WF_NEWRUN] = "UPDATE workflows SET run=?, input=?, status='running', result=NULL, error=NULL, updated_at=? "
                    "WHERE id=?",
    [Q_WF_LIST] = "SELECT id,run,status,script_name,script_dir,code_hash,NULL,NULL,error,cancel,created_at,"
                  "updated_at FROM workflows ORDER BY created_at, id",
    [Q_WF_LIST_STATUS] = "SELECT id,run,status,script_name,script_dir,code_hash,NULL,NULL,error,cancel,created_at,"
                         "updated_at FROM workflows WHERE status=? ORDER BY created_at, id",
    /* a range of the primary key's index (?2 is the prefix and a 0xff byte,
     * above every id that starts with it): a few rows read, however many
     * workflows there are; ?3 is ",status,...," or NULL */
    [Q_WF_IDS] = "SELECT id,run,status,script_name,script_dir,code_hash,NULL,NULL,NULL,cancel,created_at,updated_at "
                 "FROM workflows WHERE id>=?1 AND id<?2 AND (?3 IS NULL OR instr(?3, ','||status||',')>0) "
                 "ORDER BY id LIMIT ?4",
    [Q_HIST_APPEND] = "INSERT INTO history(wf_id,run,seq,type,ref,name,hash,payload,time) VALUES(?,?,?,?,?,?,?,?,?)",
    [Q_HIST_LOAD] = "SELECT seq,type,ref,name,hash,payload,time FROM history WHERE wf_id=? AND run=? ORDER BY seq",
    [Q_HIST_GET] = "SELECT seq,type,ref,name,hash,payload,time FROM history WHERE wf_id=? AND run=? AND seq=?",
    [Q_HIST_RANGE] = "SELECT seq,type,ref,name,hash,payload,time FROM history WHERE wf_id=? AND run=? AND seq>=? "
                     "AND seq<=? ORDER BY seq",
    [Q_HIST_MAX] = "SELECT max(seq) FROM history WHERE wf_id=? AND run=?",
    /* an outcome comes after its command: the key range starts there */
    [Q_HIST_OUTCOME] = "SELECT EXISTS(SELECT 1 FROM history WHERE wf_id=? AND run=? AND seq>? AND ref=?)",
    [Q_CODE_PUT] = "INSERT OR IGNORE INTO code(hash,name,source) VALUES(?,?,?)",
    [Q_CODE_GET] = "SELECT source FROM code WHERE hash=?",
    [Q_MOD_PIN] = "INSERT OR REPLACE INTO run_modules(wf_id,run,module,hash) VALUES(?,?,?,?)",
    [Q_MOD_GET] = "SELECT hash FROM run_modules WHERE wf_id=? AND run=? AND module=?",
    [Q_MOD_CLEAR] = "DELETE FROM run_modules WHERE wf_id=? AND run=?",
    [Q_MOD_COPY] = "INSERT OR REPLACE INTO run_modules(wf_id,run,module,hash) SELECT wf_id,?,module,hash "
                   "FROM run_modules WHERE wf_id=? AND run=?",
    [Q_TASK_PUT] = "INSERT OR REPLACE INTO tasks(wf_id,kind,seq,run_at,attempt,first_at,lease_owner,lease_until) "
                   "VALUES(?,?,?,?,?,?,?,?)",
    [Q_TASK_DEL] = "DELETE FROM tasks WHERE wf_id=? AND kind=? AND seq=?",
    [Q_TASK_DEL_WF] = "DELETE FROM tasks WHERE wf_id=?",
    [Q_TASK_RELEASE] = "UPDATE tasks SET lease_owner=NULL, lease_until=0 WHERE lease_owner=?",
    [Q_TASK_GET] = "SELECT rowid,wf_id,kind,seq,run_at,attempt,first_at,lease_until FROM tasks WHERE wf_id=? AND kind=? AND seq=?",
    [Q_TASK_DUE] = "SELECT rowid,wf_id,kind,seq,run_at,attempt,first_at,lease_until FROM tasks WHERE run_at<=? "
                   "AND (lease_owner IS NULL OR lease_owner<>?) ORDER BY run_at LIMIT ?",
    [Q_TASK_NEXT] = "SELECT min(run_at) FROM tasks WHERE lease_owner IS NULL OR lease_owner<>?",
    [Q_TASK_COUNT] = "SELECT count(*) FROM tasks WHERE wf_id=?",
    [Q_SIG_PUT] = "INSERT INTO signals(wf_id,name,payload,time) VALUES(?,?,?,?)",
    [Q_SIG_FIND] = "SELECT id,payload FROM signals WHERE wf_id=? AND name=? ORDER BY id LIMIT 1",
    [Q_SIG_DEL] = "DELETE FROM signals WHERE id=?",
    [Q_SIG_COUNT] = "SELECT count(*) FROM signals WHERE wf_id=?",
    [Q_SIG_DEL_WF] = "DELETE FROM signals WHERE wf_id=?",
    [Q_DOM_MAX] = "SELECT max(seq) FROM domain_events WHERE session_id=?",
    [Q_DOM_APPEND] = "INSERT INTO domain_events(session_id,seq,type,time,payload) VALUES(?,?,?,?,?)",
    [Q_DOM_LIST] = "SELECT session_id,seq,type,time,payload FROM domain_events WHERE session_id=? AND seq>? "
                   "ORDER BY seq",
    [Q_FEED_PUT] = "INSERT INTO event_feed(session_id,seq) VALUES(?,?)",
    [Q_FEED_AFTER] = "SELECT f.id,d.session_id,d.seq,d.type,d.time,d.payload FROM event_feed f JOIN domain_events d "
                     "ON d.session_id=f.session_id AND d.seq=f.seq WHERE f.id>? ORDER BY f.id LIMIT ?",
    [Q_FEED_LAST] = "SELECT max(id) FROM event_feed",
    /* keyset pagination: (created_at, id) after the cursor, filters optional */
    [Q_WF_PAGE] = "SELECT id,run,status,script_name,script_dir,code_hash,input,result,error,cancel,created_at,"
                  "updated_at FROM workflows WHERE (?1 IS NULL OR status=?1) AND (?2 IS NULL OR script_name=?2) "
                  "AND (created_at>?3 OR (created_at=?3 AND id>?4)) ORDER BY created_at, id LIMIT ?5",
    [Q_WF_PAGE_DESC] = "SELECT id,run,status,script_name,script_dir,code_hash,input,result,error,cancel,created_at,"
                       "updated_at FROM workflows WHERE (?1 IS NULL OR status=?1) AND (?2 IS NULL OR script_name=?2) "
                       "AND (created_at<?3 OR (created_at=?3 AND id<?4)) ORDER BY created_at DESC, id DESC LIMIT ?5",
    [Q_GROUP_STATUS] = "SELECT status, count(*) FROM workflows GROUP BY status",
    [Q_GROUP_TASKS] = "SELECT kind, count(*) FROM tasks GROUP BY kind",
    /* unfinished sessions that reported a sandbox ready (it is destroyed before they finish) */
    [Q_GROUP_SANDBOXES] = "SELECT 'live', count(*) FROM workflows w WHERE w.status NOT IN ('completed','failed',"
                          "'cancelled') AND EXISTS(SELECT 1 FROM domain_events d WHERE d.session_id=w.id AND "
                          "d.type='sandbox.ready')",
    /* the unfinished ones and where each one's sandbox is now (store_live_list) */
    [Q_LIVE_LIST] = "SELECT w.id, (SELECT d.payload FROM domain_events d WHERE d.session_id=w.id AND d.type IN "
                    "('sandbox.ready','sandbox.reprovisioned') ORDER BY d.seq DESC LIMIT 1) FROM workflows w "
                    "WHERE w.status NOT IN ('completed','failed','cancelled')",
    [Q_GROUP_SLOTS] = "SELECT pool||char(31)||(CASE WHEN held THEN 'held' ELSE 'queued' END), count(*) FROM slots "
                      "GROUP BY pool, held",
    [Q_DATA_VERSION] = "PRAGMA data_version",
    [Q_COUNT_HIST] = "SELECT count(*) FROM history WHERE wf_id=?",
    [Q_META_GET] = "SELECT value FROM meta WHERE key=?",
    [Q_META_PUT] = "INSERT OR REPLACE INTO meta(key,value) VALUES(?,?)",
    [Q_META_DEL] = "DELETE FROM meta WHERE key=?",
    /* a live token of that name is left alone: no row changes */
    [Q_DLV_PUT] = "INSERT OR IGNORE INTO deliveries(trig,delivery,received_at,outcome,status,wf_id,detail) "
                  "VALUES(?,?,?,?,?,?,?)",
    [Q_DLV_PRUNE] = "DELETE FROM deliveries WHERE trig=?1 AND outcome NOT IN ('started','existing') AND id <= "
                    "(SELECT id FROM deliveries WHERE trig=?1 ORDER BY id DESC LIMIT 1 OFFSET 1000)",
    [Q_DLV_FIND] = "SELECT id,trig,delivery,received_at,outcome,status,wf_id,detail FROM deliveries "
                   "WHERE trig=? AND delivery=? AND outcome IN ('started','existing') AND delivery <> ''",
    [Q_DLV_LIST] = "SELECT id,trig,delivery,received_at,outcome,status,wf_id,detail FROM deliveries "
                   "WHERE trig=? ORDER BY id DESC LIMIT ?",
    [Q_DLV_LIST_ALL] = "SELECT id,trig,delivery,received_at,outcome,status,wf_id,detail FROM deliveries "
                       "ORDER BY id DESC LIMIT ?",
    [Q_TOKEN_PUT] = "INSERT INTO tokens(name,hash,scopes,created_at,revoked_at) VALUES(?,?,?,?,NULL) "
                    "ON CONFLICT(name) DO UPDATE SET hash=excluded.hash, scopes=excluded.scopes, "
                    "created_at=excluded.created_at, revoked_at=NULL WHERE tokens.revoked_at IS NOT NULL",
    [Q_TOKEN_REVOKE] = "UPDATE tokens SET revoked_at=? WHERE name=? AND revoked_at IS NULL",
    [Q_TOKEN_LIST] = "SELECT name,NULL,scopes,created_at,revoked_at FROM tokens ORDER BY name",
    [Q_TOKEN_LIVE] = "SELECT name,hash,scopes,created_at,0 FROM tokens WHERE revoked_at IS NULL ORDER BY name",
    [Q_TOKEN_LIVE_COUNT] = "SELECT count(*) FROM tokens WHERE revoked_at IS NULL",
    [Q_SLOT_PUT] = "INSERT OR IGNORE INTO slots(pool,key,wf_id,seq,lim,held,since) VALUES(?,?,?,?,?,0,?)",
    /* position: 1 for the head of its queue; 0 when held */
    [Q_SLOT_GET] = "SELECT s.pool,s.key,s.wf_id,s.seq,s.lim,s.held,s.since,CASE WHEN s.held THEN 0 ELSE "
                   "(SELECT count(*) FROM slots q WHERE q.pool=s.pool AND q.key=s.key AND q.held=0 AND q.id<=s.id) "
                   "END FROM slots s WHERE s.wf_id=? AND s.pool=? AND s.key=?",
    [Q_SLOT_COUNT] = "SELECT count(*) FROM slots WHERE pool=? AND key=? AND held=?",
    [Q_SLOT_HEAD] = "SELECT pool,key,wf_id,seq,lim,held,since,1 FROM slots WHERE pool=? AND key=? AND held=0 "
                    "ORDER BY id LIMIT 1",
    [Q_SLOT_HOLD] = "UPDATE slots SET held=1, since=? WHERE wf_id=? AND pool=? AND key=? AND held=0",
    [Q_SLOT_DEL] = "DELETE FROM slots WHERE wf_id=? AND pool=? AND key=?",
    [Q_SLOT_OF_WF] = "SELECT pool,key,wf_id,seq,lim,held,since,0 FROM slots WHERE wf_id=? ORDER BY id",
    [Q_SLOT_OF_KEY] = "SELECT pool,key,wf_id,seq,lim,held,since,0 FROM slots WHERE pool=? AND key=? ORDER BY id",
    [Q_SLOT_ALL] = "SELECT pool,key,wf_id,seq,lim,held,since,0 FROM slots ORDER BY pool, key, held DESC, id",
    [Q_CTR_GET] = "SELECT name,value,window_start,paused_until,updated_at FROM counters WHERE name=?",
    [Q_CTR_PUT] = "INSERT OR REPLACE INTO counters(name,value,window_start,paused_until,updated_at) VALUES(?,?,?,?,?)",
    /* a range of the primary key: names that start with the prefix */
    [Q_CTR_LIST] = "SELECT name,value,window_start,paused_until,updated_at FROM counters WHERE name>=?1 AND name<?2 "
                   "ORDER BY name",
    [Q_SCH_INSERT] = "INSERT OR IGNORE INTO schedules(" SCH_COLS ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [Q_SCH_UPDATE] = "UPDATE schedules SET cron=?2,tz=?3,script=?4,input=?5,overlap=?6,catchup_window_ms=?7,"
                     "jitter_ms=?8,paused=?9,next_fire_at=?10,last_fire_at=?11,buffered_fire_at=?12,"
                     "skipped_count=?13,updated_at=?14 WHERE name=?1",
    [Q_SCH_GET] = "SELECT " SCH_COLS " FROM schedules WHERE name=?",
    [Q_SCH_LIST] = "SELECT " SCH_COLS " FROM schedules ORDER BY name",
    [Q_SCH_DEL] = "DELETE FROM schedules WHERE name=?",
};

typedef struct sq {
  store base; /* first: the seam (backend.h) */
  sqlite3 *db;
  sqlite3_stmt *q[Q__N];
  sqlite3_stmt *tq[STORE_TABLES_MAX][STORE_TABLE_STMTS]; /* engine migrate's (store_table_*), made when first used */
  int in_txn; /* a batch was begun and not yet committed or rolled back */
  int64_t writes, last_writes; /* rows written by the open batch, by the last committed one */
  int failed; /* a statement of that batch failed: it is lost, every write fails until store_rollback */
  char *path;
  char err[512];
  /* A failed bind (a value too big, out of memory) leaves its parameter NULL,
   * and the statement must not run with it: the bind helpers keep the first
   * failure of the statement being bound, step() returns it instead of
   * running, fail() names it. stmt() starts each statement clean. */
  int bind_rc;
  char bind_err[192];
} sq;

/* the operations, defined below in store.h's order (store_sqlite_ops at the end) */
static void sq_close(store *st_);
static const char *sq_errmsg(store *st_);
static const char *sq_path(store *st_);
static int sq_instance_id(store *st_, char *out, size_t n);
static int sq_begin(store *st_);
static int sq_commit(store *st_);
static void sq_rollback(store *st_);
static int sq_in_txn(store *st_);
static int sq_batch_failed(store *st_);
static int64_t sq_batch_writes(store *st_);
static int64_t sq_data_version(store *st_);
static int sq_wf_insert(store *st_, const wf_row *w);
static int sq_wf_get(store *st_, const char *id, wf_row *out);
static int sq_wf_set_status(store *st_, const char *id, const char *status, const char *result, const char *error);
static int sq_wf_set_cancel(store *st_, const char *id, int cancel);
static int sq_wf_set_code(store *st_, const char *id, const char *code_hash, const char *script_name, const char *script_dir);
static int sq_wf_new_run(store *st_, const char *id, int64_t run, const char *input);
static int sq_wf_list(store *st_, const char *status, store_wf_cb cb, void *ud);
static int sq_wf_page(store *st_, const char *status, const char *script, int64_t after_created, const char *after_id, int newest_first, int limit, store_wf_cb cb, void *ud);
static int sq_wf_ids(store *st_, const char *prefix, const char *statuses, int limit, store_wf_cb cb, void *ud);
static int sq_hist_append(store *st_, const char *wf_id, int64_t run, const hist_event *e);
static int sq_hist_load(store *st_, const char *wf_id, int64_t run, hist_list *out);
static int sq_hist_range(store *st_, const char *wf_id, int64_t run, int64_t from_seq, int64_t to_seq, hist_list *out);
static int64_t sq_hist_max_seq(store *st_, const char *wf_id, int64_t run);
static int sq_hist_outcome(store *st_, const char *wf_id, int64_t run, int64_t seq);
static int sq_hist_get(store *st_, const char *wf_id, int64_t run, int64_t seq, hist_list *out);
static int sq_code_put(store *st_, const char *hash, const char *name, const char *src, size_t len);
static char *sq_code_get(store *st_, const char *hash, size_t *len);
static int sq_module_pin(store *st_, const char *wf_id, int64_t run, const char *module, const char *hash);
static char *sq_module_get(store *st_, const char *wf_id, int64_t run, const char *module);
static int sq_modules_clear(store *st_, const char *wf_id, int64_t run);
static int sq_modules_copy(store *st_, const char *wf_id, int64_t from_run, int64_t to_run);
static int sq_task_put(store *st_, const char *wf_id, const char *kind, int64_t seq, int64_t run_at, int attempt, int64_t first_at, const char *owner, int64_t lease_until);
static int sq_task_del(store *st_, const char *wf_id, const char *kind, int64_t seq);
static int sq_task_take(store *st_, const char *wf_id, const char *kind, int64_t seq);
static int sq_task_release(store *st_, const char *owner);
static int sq_task_del_wf(store *st_, const char *wf_id);
static int sq_task_get(store *st_, const char *wf_id, const char *kind, int64_t seq, task_row *out);
static int sq_task_due(store *st_, int64_t now, const char *owner, int limit, int unheld, store_task_cb cb, void *ud);
static int64_t sq_task_next_at(store *st_, const char *owner);
static int sq_task_count(store *st_, const char *wf_id);
static int sq_signal_put(store *st_, const char *wf_id, const char *name, const char *payload, int64_t time);
static int sq_signal_take(store *st_, const char *wf_id, const char *name, char **payload);
static int sq_signal_count(store *st_, const char *wf_id);
static int sq_signal_has(store *st_, const char *wf_id, const char *name);
static int sq_signal_del_wf(store *st_, const char *wf_id);
static int64_t sq_domain_append(store *st_, const char *session_id, const char *type, int64_t time, const char *payload);
static int sq_domain_list(store *st_, const char *session_id, int64_t after_seq, store_domain_cb cb, void *ud);
static int sq_feed_after(store *st_, int64_t after_id, int limit, store_feed_cb cb, void *ud);
static int64_t sq_feed_last(store *st_);
static int sq_meta_get(store *st_, const char *key, char **value);
static int sq_meta_put(store *st_, const char *key, const char *value);
static int sq_token_put(store *st_, const char *name, const char *hash, unsigned scopes, int64_t created_at);
static int sq_token_revoke(store *st_, const char *name, int64_t revoked_at);
static int sq_token_list(store *st_, store_token_cb cb, void *ud);
static int sq_token_live(store *st_, store_token_cb cb, void *ud);
static int64_t sq_token_live_count(store *st_);
static int sq_slot_put(store *st_, const char *pool, const char *key, const char *wf_id, int64_t seq, int64_t limit, int64_t since);
static int sq_slot_get(store *st_, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud);
static int sq_slot_head(store *st_, const char *pool, const char *key, store_slot_cb cb, void *ud);
static int64_t sq_slot_count(store *st_, const char *pool, const char *key, int held);
static int sq_slot_hold(store *st_, const char *wf_id, const char *pool, const char *key, int64_t since);
static int sq_slot_del(store *st_, const char *wf_id, const char *pool, const char *key);
static int sq_slot_list(store *st_, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud);
static int sq_counter_get(store *st_, const char *name, counter_row *out);
static int sq_counter_put(store *st_, const char *name, const counter_row *c);
static int sq_counter_list(store *st_, const char *prefix, store_counter_cb cb, void *ud);
static int sq_delivery_put(store *st_, const delivery_row *d);
static int sq_delivery_find(store *st_, const char *trigger, const char *delivery, store_delivery_cb cb, void *ud);
static int sq_delivery_list(store *st_, const char *trigger, int limit, store_delivery_cb cb, void *ud);
static int sq_schedule_insert(store *st_, const schedule_row *r);
static int sq_schedule_update(store *st_, const schedule_row *r);
static int sq_schedule_get(store *st_, const char *name, store_schedule_cb cb, void *ud);
static int sq_schedule_list(store *st_, store_schedule_cb cb, void *ud);
static int sq_schedule_del(store *st_, const char *name);
static int sq_group_count(store *st_, store_group what, int (*cb)(void *ud, const char *key, int64_t n), void *ud);
static int sq_live_list(store *st_, store_live_cb cb, void *ud);
static int64_t sq_count(store *st_, const char *what, const char *wf_id);

/* ---- plumbing ---- */

/* Records the error. Inside a batch any failure loses the batch: SQLite may
 * have rolled it back on its own (disk full, I/O error), and a batch with a
 * hole must never commit, so every later write fails at once (no piece of it
 * autocommits, none waits for the lock again) until store_rollback. The first
 * error is the one kept: it says why the batch was lost. */
static int fail(sq *s, const char *what) {
  int bind_failed = s->bind_rc != SQLITE_OK; /* the statement never ran: SQLite's own message is not about it */
  s->bind_rc = SQLITE_OK;
  if (s->failed) return STORE_ERR;
  util_seterr(s->err, sizeof s->err, "%s: %s", what, bind_failed ? s->bind_err : sqlite3_errmsg(s->db));
  if (s->in_txn) s->failed = 1;
  return STORE_ERR;
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
static void bind_check(sq *s, int rc, int i, size_t len) {
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

static void bind_int(sq *s, sqlite3_stmt *st, int i, int64_t v) {
  bind_check(s, sqlite3_bind_int64(st, i, v), i, SIZE_MAX);
}

static void bind_blob(sq *s, sqlite3_stmt *st, int i, const void *v, size_t n) {
  bind_check(s, n > INT32_MAX ? SQLITE_TOOBIG : sqlite3_bind_blob(st, i, v, (int)n, SQLITE_TRANSIENT), i, n);
}

/* NULL binds SQL NULL (a column left empty on purpose). */
static void bind_text(sq *s, sqlite3_stmt *st, int i, const char *v) {
  int rc = v ? sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(st, i);
  bind_check(s, rc, i, v ? strlen(v) : 0);
}

/* sqlite3_step, unless a bind of this statement failed (then that error). */
static int step(sq *s, sqlite3_stmt *st) { return s->bind_rc != SQLITE_OK ? s->bind_rc : sqlite3_step(st); }

static sqlite3_stmt *stmt(sq *s, int q) {
  s->bind_rc = SQLITE_OK;
  if (!s->q[q] && sqlite3_prepare_v3(s->db, SQL[q], -1, SQLITE_PREPARE_PERSISTENT, &s->q[q], NULL) != SQLITE_OK) {
    fail(s, "prepare");
    return NULL;
  }
  sqlite3_reset(s->q[q]);
  sqlite3_clear_bindings(s->q[q]);
  return s->q[q];
}

static char *col_dup(sqlite3_stmt *st, int i) {
  const unsigned char *t = sqlite3_column_text(st, i);
  return t ? util_strdup((const char *)t) : NULL;
}

static const char *col_text(sqlite3_stmt *st, int i) { return (const char *)sqlite3_column_text(st, i); }

/* Runs a write statement to completion. */
static int exec_write(sq *s, sqlite3_stmt *st, const char *what) {
  if (injected(s, what)) {
    sqlite3_reset(st);
    s->bind_rc = SQLITE_OK;
    return STORE_ERR;
  }
  int rc = step(s, st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return fail(s, what);
  s->writes++;
  return STORE_OK;
}

/* *out = the first column of the first row (dflt when NULL or no row). */
static int query_int(sq *s, sqlite3_stmt *st, int64_t dflt, int64_t *out) {
  *out = dflt;
  int rc = step(s, st);
  if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) *out = sqlite3_column_int64(st, 0);
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : fail(s, "query");
}

static int classify(int rc) {
  rc &= 0xff;
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) return STORE_EBUSY;
  if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT) return STORE_ECORRUPT;
  return STORE_ERR;
}

static int open_once(const char *path, int must_exist, store **out, char *err, size_t errlen);

/* Opening races with another process creating the schema or switching to WAL
 * (SQLite reports those as busy without waiting), so busy opens are retried
 * for as long as the busy timeout allows. */
int store_sqlite_open(const char *path, int must_exist, store **out, char *err, size_t errlen) {
  const char *btm = getenv("ENGINE_BUSY_TIMEOUT_MS");
  int64_t deadline = util_mono_ms() + (btm ? atoi(btm) : 5000);
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

static int open_once(const char *path, int must_exist, store **out, char *err, size_t errlen) {
  *out = NULL;
  sq *s = util_xcalloc(1, sizeof *s);
  s->base.ops = &store_sqlite_ops;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (must_exist ? 0 : SQLITE_OPEN_CREATE);
  int rc = sqlite3_open_v2(path, &s->db, flags, NULL);
  if (rc != SQLITE_OK) {
    util_seterr(err, errlen, "cannot open database %s: %s", path, s->db ? sqlite3_errmsg(s->db) : "out of memory");
    sqlite3_close(s->db);
    free(s);
    return rc == SQLITE_CANTOPEN ? STORE_ERR : classify(rc);
  }
  s->path = util_strdup(path);
  /* ENGINE_STORE_MAX_LENGTH (bytes), for tests: SQLite's limit on a string or
   * blob, lowered so a bind fails for real without a gigabyte value */
  const char *maxlen = getenv("ENGINE_STORE_MAX_LENGTH");
  if (maxlen && atoi(maxlen) > 0) sqlite3_limit(s->db, SQLITE_LIMIT_LENGTH, atoi(maxlen));
  const char *btm = getenv("ENGINE_BUSY_TIMEOUT_MS");
  sqlite3_busy_timeout(s->db, btm ? atoi(btm) : 5000);
  const char *sync = getenv("ENGINE_SYNCHRONOUS");
  char pragmas[256];
  /* cell_size_check: a damaged page is an error when it is read, not a scan
   * that quietly ends early (a history cut short with no error at all) */
  snprintf(pragmas, sizeof pragmas,
           "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s; PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY; "
           "PRAGMA cell_size_check=ON;",
           sync && *sync ? sync : "FULL");
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
    if (rc == SQLITE_OK && have < SCHEMA_VERSION) rc = sqlite3_exec(s->db, SCHEMA, NULL, NULL, &emsg);
    if (rc == SQLITE_OK && have > 0 && have < SCHEMA_VERSION) rc = sqlite3_exec(s->db, MIGRATE, NULL, NULL, &emsg);
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
    int kind = classify(sqlite3_extended_errcode(s->db));
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
  int kind = STORE_OK;
  if (rc != SQLITE_OK) {
    kind = rc == SQLITE_CANTOPEN ? STORE_ERR : classify(rc);
    util_seterr(err, errlen, "cannot open database %s: %s", path, s->db ? sqlite3_errmsg(s->db) : "out of memory");
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
  sqlite3_close(s->db);
  free(s->path);
  free(s);
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

/* SQLite says whether a transaction is open (sqlite3_get_autocommit); in_txn
 * only remembers that this store began one, so a batch SQLite rolled back on
 * its own is noticed instead of being continued in autocommit mode. */
static int sq_begin(store *st_) {
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
    return classify(sqlite3_extended_errcode(s->db));
  }
  s->in_txn = 1;
  return STORE_OK;
}

static int sq_commit(store *st_) {
  sq *s = (sq *)st_;
  if (sq_batch_failed(&s->base)) {
    if (!s->failed) util_seterr(s->err, sizeof s->err, "commit: the transaction was rolled back by SQLite");
    sq_rollback(&s->base);
    return STORE_ERR;
  }
  if (!s->in_txn) return STORE_OK;
  if (injected(s, "commit")) {
    sq_rollback(&s->base);
    return STORE_ERR;
  }
  int rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
  if (rc != SQLITE_OK) {
    fail(s, "commit");
    sq_rollback(&s->base);
    return classify(rc);
  }
  s->in_txn = 0;
  s->last_writes = s->writes;
  s->writes = 0;
  return STORE_OK;
}

static int64_t sq_batch_writes(store *st_) {
  sq *s = (sq *)st_; return s->last_writes; }

/* Ends the batch, whatever state SQLite left it in; keeps store_errmsg. */
static void sq_rollback(store *st_) {
  sq *s = (sq *)st_;
  if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  s->in_txn = 0;
  s->failed = 0;
  s->writes = 0;
}

static int sq_in_txn(store *st_) {
  sq *s = (sq *)st_; return !sqlite3_get_autocommit(s->db); }

static int sq_batch_failed(store *st_) {
  sq *s = (sq *)st_; return s->failed || (s->in_txn && sqlite3_get_autocommit(s->db)); }

static int64_t sq_data_version(store *st_) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_DATA_VERSION);
  int64_t v;
  return st && query_int(s, st, -1, &v) == STORE_OK ? v : -1;
}

/* Every write helper makes sure a transaction is open first. */
#define WRITE_BEGIN(s)                             \
  do {                                             \
    if (sq_begin(&s->base) != STORE_OK) return STORE_ERR; \
  } while (0)

/* ---- workflows ---- */

static int sq_wf_insert(store *st_, const wf_row *w) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_WF_INSERT);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, w->id);
  bind_int(s, st, 2, w->run);
  bind_text(s, st, 3, w->status);
  bind_text(s, st, 4, w->script_name);
  bind_text(s, st, 5, w->script_dir);
  bind_text(s, st, 6, w->code_hash);
  bind_text(s, st, 7, w->input);
  bind_text(s, st, 8, w->result);
  bind_text(s, st, 9, w->error);
  bind_int(s, st, 10, w->cancel);
  bind_int(s, st, 11, w->created_at);
  bind_int(s, st, 12, w->updated_at);
  return exec_write(s, st, "insert workflow");
}

static void read_wf(sqlite3_stmt *st, wf_row *w) {
  w->id = col_dup(st, 0);
  w->run = sqlite3_column_int64(st, 1);
  w->status = col_dup(st, 2);
  w->script_name = col_dup(st, 3);
  w->script_dir = col_dup(st, 4);
  w->code_hash = col_dup(st, 5);
  w->input = col_dup(st, 6);
  w->result = col_dup(st, 7);
  w->error = col_dup(st, 8);
  w->cancel = sqlite3_column_int(st, 9);
  w->created_at = sqlite3_column_int64(st, 10);
  w->updated_at = sqlite3_column_int64(st, 11);
}

static int sq_wf_get(store *st_, const char *id, wf_row *out) {
  sq *s = (sq *)st_;
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st = stmt(s, Q_WF_GET);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, id);
  int rc = step(s, st);
  if (rc == SQLITE_ROW) {
    read_wf(st, out);
    sqlite3_reset(st);
    return 1;
  }
  sqlite3_reset(st);
  if (rc == SQLITE_DONE) return 0;
  return fail(s, "get workflow");
}

static int sq_wf_set_status(store *st_, const char *id, const char *status, const char *result, const char *error) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_WF_STATUS);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, status);
  bind_text(s, st, 2, result);
  bind_text(s, st, 3, error);
  bind_int(s, st, 4, util_now_ms());
  bind_text(s, st, 5, id);
  return exec_write(s, st, "set workflow status");
}

static int sq_wf_set_cancel(store *st_, const char *id, int cancel) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_WF_CANCEL);
  if (!st) return STORE_ERR;
  bind_int(s, st, 1, cancel);
  bind_int(s, st, 2, util_now_ms());
  bind_text(s, st, 3, id);
  return exec_write(s, st, "set cancel");
}

static int sq_wf_set_code(store *st_, const char *id, const char *code_hash, const char *script_name,
                      const char *script_dir) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_WF_CODE);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, code_hash);
  bind_text(s, st, 2, script_name);
  bind_text(s, st, 3, script_dir);
  bind_int(s, st, 4, util_now_ms());
  bind_text(s, st, 5, id);
  return exec_write(s, st, "set code");
}

static int sq_wf_new_run(store *st_, const char *id, int64_t run, const char *input) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_WF_NEWRUN);
  if (!st) return STORE_ERR;
  bind_int(s, st, 1, run);
  bind_text(s, st, 2, input);
  bind_int(s, st, 3, util_now_ms());
  bind_text(s, st, 4, id);
  return exec_write(s, st, "new run");
}

/* Runs the bound workflow query st, each row to cb (nonzero stops). */
static int each_wf(sq *s, sqlite3_stmt *st, store_wf_cb cb, void *ud) {
  int rc;
  while ((rc = step(s, st)) == SQLITE_ROW) {
    wf_row w;
    read_wf(st, &w);
    int stop = cb(ud, &w);
    wf_row_free(&w);
    if (stop) break;
  }
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : fail(s, "list workflows");
}

static int sq_wf_page(store *st_, const char *status, const char *script, int64_t after_created, const char *after_id,
                  int newest_first, int limit, store_wf_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, newest_first ? Q_WF_PAGE_DESC : Q_WF_PAGE);
  if (!st) return STORE_ERR;
  if (status) bind_text(s, st, 1, status);
  if (script) bind_text(s, st, 2, script);
  bind_int(s, st, 3, after_created);
  bind_text(s, st, 4, after_id ? after_id : "");
  bind_int(s, st, 5, limit);
  return each_wf(s, st, cb, ud);
}

static int sq_group_count(store *st_, store_group what, int (*cb)(void *ud, const char *key, int64_t n), void *ud) {
  sq *s = (sq *)st_;
  int q = what == STORE_GROUP_STATUS  ? Q_GROUP_STATUS
          : what == STORE_GROUP_TASKS ? Q_GROUP_TASKS
          : what == STORE_GROUP_SLOTS ? Q_GROUP_SLOTS
                                      : Q_GROUP_SANDBOXES;
  sqlite3_stmt *st = stmt(s, q);
  if (!st) return STORE_ERR;
  int rc;
  while ((rc = step(s, st)) == SQLITE_ROW)
    if (cb(ud, (const char *)sqlite3_column_text(st, 0), sqlite3_column_int64(st, 1))) break;
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : fail(s, "count");
}

static int sq_live_list(store *st_, store_live_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_LIVE_LIST);
  if (!st) return STORE_ERR;
  int rc;
  while ((rc = step(s, st)) == SQLITE_ROW)
    if (cb(ud, (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1))) break;
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : fail(s, "list live workflows");
}

static int sq_wf_list(store *st_, const char *status, store_wf_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, status ? Q_WF_LIST_STATUS : Q_WF_LIST);
  if (!st) return STORE_ERR;
  if (status) bind_text(s, st, 1, status);
  return each_wf(s, st, cb, ud);
}

static int sq_wf_ids(store *st_, const char *prefix, const char *statuses, int limit, store_wf_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_WF_IDS);
  if (!st) return STORE_ERR;
  char *above = util_fmt("%s\xff", prefix), *among = statuses ? util_fmt(",%s,", statuses) : NULL;
  bind_text(s, st, 1, prefix);
  bind_text(s, st, 2, above);
  bind_text(s, st, 3, among);
  bind_int(s, st, 4, limit);
  free(above); /* bound as copies */
  free(among);
  return each_wf(s, st, cb, ud);
}

/* ---- history ---- */

static int sq_hist_append(store *st_, const char *wf_id, int64_t run, const hist_event *e) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_HIST_APPEND);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_int(s, st, 2, run);
  bind_int(s, st, 3, e->seq);
  bind_text(s, st, 4, e->type);
  bind_int(s, st, 5, e->ref);
  bind_text(s, st, 6, e->name);
  bind_text(s, st, 7, e->hash);
  bind_text(s, st, 8, e->payload);
  bind_int(s, st, 9, e->time);
  return exec_write(s, st, "append history");
}

static int read_events(sq *s, sqlite3_stmt *st, hist_list *out) {
  int rc;
  while ((rc = step(s, st)) == SQLITE_ROW) {
    if (out->n == out->cap) {
      out->cap = out->cap ? out->cap * 2 : 16;
      out->v = util_xrealloc(out->v, out->cap * sizeof(hist_event));
    }
    hist_event *e = &out->v[out->n++];
    e->seq = sqlite3_column_int64(st, 0);
    e->type = col_dup(st, 1);
    e->ref = sqlite3_column_int64(st, 2);
    e->name = col_dup(st, 3);
    e->hash = col_dup(st, 4);
    e->payload = col_dup(st, 5);
    e->time = sqlite3_column_int64(st, 6);
  }
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? STORE_OK : fail(s, "load history");
}

static int sq_hist_load(store *st_, const char *wf_id, int64_t run, hist_list *out) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_HIST_LOAD);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_int(s, st, 2, run);
  size_t from = out->n;
  if (read_events(s, st, out) != STORE_OK) return STORE_ERR;
  /* a run's history is dense from 1: a hole is damage, never a shorter history */
  for (size_t i = from; i < out->n; i++)
    if (out->v[i].seq != (int64_t)(i - from) + 1) {
      util_seterr(s->err, sizeof s->err, "load history: event #%lld of %s is missing (the database is damaged)",
                  (long long)(i - from) + 1, wf_id);
      return STORE_ERR;
    }
  return STORE_OK;
}

static int sq_hist_range(store *st_, const char *wf_id, int64_t run, int64_t from_seq, int64_t to_seq, hist_list *out) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_HIST_RANGE);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_int(s, st, 2, run);
  bind_int(s, st, 3, from_seq);
  bind_int(s, st, 4, to_seq);
  return read_events(s, st, out);
}

static int sq_hist_get(store *st_, const char *wf_id, int64_t run, int64_t seq, hist_list *out) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_HIST_GET);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_int(s, st, 2, run);
  bind_int(s, st, 3, seq);
  size_t before = out->n;
  if (read_events(s, st, out) != STORE_OK) return STORE_ERR;
  return out->n > before;
}

static int64_t sq_hist_max_seq(store *st_, const char *wf_id, int64_t run) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_HIST_MAX);
  if (!st) return -1;
  bind_text(s, st, 1, wf_id);
  bind_int(s, st, 2, run);
  int64_t v;
  return query_int(s, st, 0, &v) == STORE_OK ? v : -1;
}

static int sq_hist_outcome(store *st_, const char *wf_id, int64_t run, int64_t seq) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_HIST_OUTCOME);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_int(s, st, 2, run);
  bind_int(s, st, 3, seq);
  bind_int(s, st, 4, seq);
  int64_t v;
  if (query_int(s, st, 0, &v) != STORE_OK) return STORE_ERR;
  return v != 0;
}

/* ---- code ---- */

static int sq_code_put(store *st_, const char *hash, const char *name, const char *src, size_t len) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_CODE_PUT);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, hash);
  bind_text(s, st, 2, name);
  bind_blob(s, st, 3, src, len);
  return exec_write(s, st, "store code");
}

static char *sq_code_get(store *st_, const char *hash, size_t *len) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_CODE_GET);
  if (!st) return NULL;
  bind_text(s, st, 1, hash);
  char *out = NULL;
  int rc = step(s, st);
  if (rc == SQLITE_ROW) {
    int n = sqlite3_column_bytes(st, 0);
    out = util_xmalloc((size_t)n + 1);
    if (n > 0) memcpy(out, sqlite3_column_blob(st, 0), (size_t)n);
    out[n] = 0;
    if (len) *len = (size_t)n;
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail(s, "get code");
  return out;
}

static int sq_module_pin(store *st_, const char *wf_id, int64_t run, const char *module, const char *hash) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_MOD_PIN);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_int(s, st, 2, run);
  bind_text(s, st, 3, module);
  bind_text(s, st, 4, hash);
  return exec_write(s, st, "pin module");
}

static char *sq_module_get(store *st_, const char *wf_id, int64_t run, const char *module) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_MOD_GET);
  if (!st) return NULL;
  bind_text(s, st, 1, wf_id);
  bind_int(s, st, 2, run);
  bind_text(s, st, 3, module);
  char *out = NULL;
  int rc = step(s, st);
  if (rc == SQLITE_ROW) out = col_dup(st, 0);
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail(s, "get module");
  return out;
}

static int sq_modules_clear(store *st_, const char *wf_id, int64_t run) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_MOD_CLEAR);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_int(s, st, 2, run);
  return exec_write(s, st, "clear modules");
}

static int sq_modules_copy(store *st_, const char *wf_id, int64_t from_run, int64_t to_run) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_MOD_COPY);
  if (!st) return STORE_ERR;
  bind_int(s, st, 1, to_run);
  bind_text(s, st, 2, wf_id);
  bind_int(s, st, 3, from_run);
  return exec_write(s, st, "copy modules");
}

/* ---- tasks ---- */

static int sq_task_put(store *st_, const char *wf_id, const char *kind, int64_t seq, int64_t run_at, int attempt,
                   int64_t first_at, const char *owner, int64_t lease_until) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_TASK_PUT);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_text(s, st, 2, kind);
  bind_int(s, st, 3, seq);
  bind_int(s, st, 4, run_at);
  bind_int(s, st, 5, attempt);
  bind_int(s, st, 6, first_at);
  bind_text(s, st, 7, owner);
  bind_int(s, st, 8, lease_until);
  return exec_write(s, st, "put task");
}

static int sq_task_del(store *st_, const char *wf_id, const char *kind, int64_t seq) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_TASK_DEL);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_text(s, st, 2, kind);
  bind_int(s, st, 3, seq);
  return exec_write(s, st, "delete task");
}

static int sq_task_take(store *st_, const char *wf_id, const char *kind, int64_t seq) {
  sq *s = (sq *)st_;
  if (sq_task_del(&s->base, wf_id, kind, seq) != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

static int sq_task_release(store *st_, const char *owner) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_TASK_RELEASE);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, owner);
  return exec_write(s, st, "release tasks");
}

static int sq_task_del_wf(store *st_, const char *wf_id) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_TASK_DEL_WF);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  return exec_write(s, st, "delete tasks");
}

static void read_task(sqlite3_stmt *st, task_row *t) {
  t->id = sqlite3_column_int64(st, 0);
  t->wf_id = col_text(st, 1);
  t->kind = col_text(st, 2);
  t->seq = sqlite3_column_int64(st, 3);
  t->run_at = sqlite3_column_int64(st, 4);
  t->attempt = sqlite3_column_int(st, 5);
  t->first_at = sqlite3_column_int64(st, 6);
  t->leased = sqlite3_column_int64(st, 7) > 0;
}

static int sq_task_get(store *st_, const char *wf_id, const char *kind, int64_t seq, task_row *out) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_TASK_GET);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_text(s, st, 2, kind);
  bind_int(s, st, 3, seq);
  int rc = step(s, st);
  if (rc == SQLITE_ROW) {
    read_task(st, out);
    out->wf_id = out->kind = NULL; /* the row's text dies with the reset that ends the read */
  }
  sqlite3_reset(st);
  if (rc == SQLITE_ROW) return 1;
  return rc == SQLITE_DONE ? 0 : fail(s, "get task");
}

static int sq_task_due(store *st_, int64_t now, const char *owner, int limit, int unheld, store_task_cb cb, void *ud) {
  sq *s = (sq *)st_;
  (void)unheld; /* one worker: no lease to claim */
  /* Collect first: callbacks write to the store, which must not happen mid-scan. */
  sqlite3_stmt *st = stmt(s, Q_TASK_DUE);
  if (!st) return STORE_ERR;
  bind_int(s, st, 1, now);
  bind_text(s, st, 2, owner);
  bind_int(s, st, 3, limit);
  size_t n = 0, cap = 0;
  task_row *v = NULL;
  int rc;
  while ((rc = step(s, st)) == SQLITE_ROW) {
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      v = util_xrealloc(v, cap * sizeof *v);
    }
    read_task(st, &v[n]);
    v[n].wf_id = util_strdup(v[n].wf_id);
    v[n].kind = util_strdup(v[n].kind);
    n++;
  }
  sqlite3_reset(st);
  int ret = rc == SQLITE_DONE ? STORE_OK : fail(s, "due tasks");
  for (size_t i = 0; i < n; i++) {
    if (ret == STORE_OK && cb(ud, &v[i])) ret = 1;
    free((char *)v[i].wf_id);
    free((char *)v[i].kind);
  }
  free(v);
  return ret < 0 ? ret : STORE_OK;
}

static int64_t sq_task_next_at(store *st_, const char *owner) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_TASK_NEXT);
  if (!st) return -1;
  bind_text(s, st, 1, owner);
  int64_t v;
  return query_int(s, st, -1, &v) == STORE_OK ? v : -2;
}

static int sq_task_count(store *st_, const char *wf_id) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_TASK_COUNT);
  if (!st) return -1;
  bind_text(s, st, 1, wf_id);
  int64_t v;
  return query_int(s, st, 0, &v) == STORE_OK ? (int)v : -1;
}

/* ---- signals ---- */

static int sq_signal_put(store *st_, const char *wf_id, const char *name, const char *payload, int64_t time) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_SIG_PUT);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_text(s, st, 2, name);
  bind_text(s, st, 3, payload);
  bind_int(s, st, 4, time);
  return exec_write(s, st, "put signal");
}

static int sq_signal_take(store *st_, const char *wf_id, const char *name, char **payload) {
  sq *s = (sq *)st_;
  *payload = NULL;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_SIG_FIND);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_text(s, st, 2, name);
  int rc = step(s, st);
  if (rc != SQLITE_ROW) {
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : fail(s, "find signal");
  }
  int64_t id = sqlite3_column_int64(st, 0);
  *payload = col_dup(st, 1);
  sqlite3_reset(st);
  st = stmt(s, Q_SIG_DEL);
  if (!st) return STORE_ERR;
  bind_int(s, st, 1, id);
  if (exec_write(s, st, "take signal") != STORE_OK) {
    free(*payload);
    *payload = NULL;
    return STORE_ERR;
  }
  return 1;
}

static int sq_signal_has(store *st_, const char *wf_id, const char *name) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_SIG_FIND);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_text(s, st, 2, name);
  int rc = step(s, st);
  sqlite3_reset(st);
  if (rc == SQLITE_ROW) return 1;
  return rc == SQLITE_DONE ? 0 : fail(s, "find signal");
}

static int sq_signal_count(store *st_, const char *wf_id) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_SIG_COUNT);
  if (!st) return -1;
  bind_text(s, st, 1, wf_id);
  int64_t v;
  return query_int(s, st, 0, &v) == STORE_OK ? (int)v : -1;
}

static int sq_signal_del_wf(store *st_, const char *wf_id) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_SIG_DEL_WF);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  return exec_write(s, st, "delete signals");
}

/* ---- domain events ---- */

static int64_t sq_domain_append(store *st_, const char *session_id, const char *type, int64_t time, const char *payload) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_DOM_MAX);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, session_id);
  int64_t seq;
  if (query_int(s, st, 0, &seq) != STORE_OK) return STORE_ERR;
  seq++;
  st = stmt(s, Q_DOM_APPEND);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, session_id);
  bind_int(s, st, 2, seq);
  bind_text(s, st, 3, type);
  bind_int(s, st, 4, time);
  bind_text(s, st, 5, payload);
  if (exec_write(s, st, "append domain event") != STORE_OK) return STORE_ERR;
  st = stmt(s, Q_FEED_PUT);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, session_id);
  bind_int(s, st, 2, seq);
  if (exec_write(s, st, "append domain event") != STORE_OK) return STORE_ERR;
  return seq;
}

static int sq_feed_after(store *st_, int64_t after_id, int limit, store_feed_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_FEED_AFTER);
  if (!st) return STORE_ERR;
  bind_int(s, st, 1, after_id);
  bind_int(s, st, 2, limit);
  int rc;
  while ((rc = step(s, st)) == SQLITE_ROW) {
    domain_event e = {(const char *)sqlite3_column_text(st, 1), sqlite3_column_int64(st, 2),
                      (const char *)sqlite3_column_text(st, 3), sqlite3_column_int64(st, 4),
                      (const char *)sqlite3_column_text(st, 5)};
    if (cb(ud, sqlite3_column_int64(st, 0), &e)) break;
  }
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : fail(s, "read the event feed");
}

static int64_t sq_feed_last(store *st_) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_FEED_LAST);
  if (!st) return STORE_ERR;
  int64_t v = 0;
  return query_int(s, st, 0, &v) == STORE_OK ? v : STORE_ERR;
}

static int sq_domain_list(store *st_, const char *session_id, int64_t after_seq, store_domain_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_DOM_LIST);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, session_id);
  bind_int(s, st, 2, after_seq);
  int rc;
  while ((rc = step(s, st)) == SQLITE_ROW) {
    domain_event e = {col_text(st, 0), sqlite3_column_int64(st, 1), col_text(st, 2), sqlite3_column_int64(st, 3),
                      col_text(st, 4)};
    if (cb(ud, &e)) break;
  }
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : fail(s, "list domain events");
}

static int64_t sq_count(store *st_, const char *what, const char *wf_id) {
  sq *s = (sq *)st_;
  if (strcmp(what, "history") == 0) {
    sqlite3_stmt *st = stmt(s, Q_COUNT_HIST);
    if (!st) return -1;
    bind_text(s, st, 1, wf_id);
    int64_t v;
    return query_int(s, st, 0, &v) == STORE_OK ? v : -1;
  }
  if (strcmp(what, "signals") == 0) return sq_signal_count(&s->base, wf_id);
  if (strcmp(what, "tasks") == 0) return sq_task_count(&s->base, wf_id);
  return -1;
}

/* ---- meta: the engine's own small named values ---- */

static int sq_meta_get(store *st_, const char *key, char **value) {
  sq *s = (sq *)st_;
  *value = NULL;
  sqlite3_stmt *st = stmt(s, Q_META_GET);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, key);
  int rc = step(s, st);
  if (rc == SQLITE_ROW) *value = col_dup(st, 0);
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail(s, "meta");
  return *value ? 1 : 0;
}

static int sq_meta_put(store *st_, const char *key, const char *value) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, value ? Q_META_PUT : Q_META_DEL);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, key);
  if (value) bind_text(s, st, 2, value);
  return exec_write(s, st, "meta");
}

/* ---- API tokens ---- */

static int sq_token_put(store *st_, const char *name, const char *hash, unsigned scopes, int64_t created_at) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_TOKEN_PUT);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, name);
  bind_text(s, st, 2, hash);
  bind_int(s, st, 3, scopes);
  bind_int(s, st, 4, created_at);
  if (exec_write(s, st, "put token") != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

static int sq_token_revoke(store *st_, const char *name, int64_t revoked_at) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_TOKEN_REVOKE);
  if (!st) return STORE_ERR;
  bind_int(s, st, 1, revoked_at);
  bind_text(s, st, 2, name);
  if (exec_write(s, st, "revoke token") != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

/* Runs q over its rows; a callback that returns nonzero ends the scan. */
static int token_scan(sq *s, int q, store_token_cb cb, void *ud, const char *what) {
  sqlite3_stmt *st = stmt(s, q);
  if (!st) return STORE_ERR;
  int rc;
  while ((rc = step(s, st)) == SQLITE_ROW) {
    token_row t = {col_text(st, 0), col_text(st, 1), (unsigned)sqlite3_column_int64(st, 2),
                   sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4)};
    if (cb(ud, &t)) break;
  }
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : fail(s, what);
}

static int sq_token_list(store *st_, store_token_cb cb, void *ud) {
  sq *s = (sq *)st_;
  return token_scan(s, Q_TOKEN_LIST, cb, ud, "list tokens");
}

static int sq_token_live(store *st_, store_token_cb cb, void *ud) {
  sq *s = (sq *)st_;
  return token_scan(s, Q_TOKEN_LIVE, cb, ud, "read live tokens");
}

static int64_t sq_token_live_count(store *st_) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_TOKEN_LIVE_COUNT);
  if (!st) return -1;
  int64_t v;
  return query_int(s, st, 0, &v) == STORE_OK ? v : -1;
}

/* ---- slots: concurrency limits and caps (slots.c decides who gets one) ---- */

static void slot_from(sqlite3_stmt *st, slot_row *r) {
  r->pool = col_text(st, 0);
  r->key = col_text(st, 1);
  r->wf_id = col_text(st, 2);
  r->seq = sqlite3_column_int64(st, 3);
  r->limit = sqlite3_column_int64(st, 4);
  r->held = sqlite3_column_int(st, 5);
  r->since = sqlite3_column_int64(st, 6);
  r->position = sqlite3_column_int64(st, 7);
}

static int sq_slot_put(store *st_, const char *pool, const char *key, const char *wf_id, int64_t seq, int64_t limit,
                   int64_t since) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_SLOT_PUT);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, pool);
  bind_text(s, st, 2, key);
  bind_text(s, st, 3, wf_id);
  bind_int(s, st, 4, seq);
  bind_int(s, st, 5, limit);
  bind_int(s, st, 6, since);
  return exec_write(s, st, "put slot");
}

static int slot_one(sq *s, sqlite3_stmt *st, store_slot_cb cb, void *ud) {
  int rc = step(s, st);
  if (rc == SQLITE_ROW) {
    slot_row r;
    slot_from(st, &r);
    cb(ud, &r);
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail(s, "read slot");
  return rc == SQLITE_ROW;
}

static int sq_slot_get(store *st_, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_SLOT_GET);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_text(s, st, 2, pool);
  bind_text(s, st, 3, key);
  return slot_one(s, st, cb, ud);
}

static int sq_slot_head(store *st_, const char *pool, const char *key, store_slot_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_SLOT_HEAD);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, pool);
  bind_text(s, st, 2, key);
  return slot_one(s, st, cb, ud);
}

static int64_t sq_slot_count(store *st_, const char *pool, const char *key, int held) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_SLOT_COUNT);
  if (!st) return -1;
  bind_text(s, st, 1, pool);
  bind_text(s, st, 2, key);
  bind_int(s, st, 3, held ? 1 : 0);
  int64_t v;
  return query_int(s, st, 0, &v) == STORE_OK ? v : -1;
}

static int sq_slot_hold(store *st_, const char *wf_id, const char *pool, const char *key, int64_t since) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_SLOT_HOLD);
  if (!st) return STORE_ERR;
  bind_int(s, st, 1, since);
  bind_text(s, st, 2, wf_id);
  bind_text(s, st, 3, pool);
  bind_text(s, st, 4, key);
  return exec_write(s, st, "hold slot");
}

static int sq_slot_del(store *st_, const char *wf_id, const char *pool, const char *key) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_SLOT_DEL);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, wf_id);
  bind_text(s, st, 2, pool);
  bind_text(s, st, 3, key);
  if (exec_write(s, st, "delete slot") != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

static int sq_slot_list(store *st_, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, wf_id ? Q_SLOT_OF_WF : pool ? Q_SLOT_OF_KEY : Q_SLOT_ALL);
  if (!st) return STORE_ERR;
  if (wf_id) {
    bind_text(s, st, 1, wf_id);
  } else if (pool) {
    bind_text(s, st, 1, pool);
    bind_text(s, st, 2, key);
  }
  int rc, stop = 0;
  while (!stop && (rc = step(s, st)) == SQLITE_ROW) {
    slot_row r;
    slot_from(st, &r);
    stop = cb(ud, &r);
  }
  sqlite3_reset(st);
  if (!stop && rc != SQLITE_DONE) return fail(s, "list slots");
  return STORE_OK;
}

/* ---- counters: named totals and rate windows ---- */

static void counter_from(sqlite3_stmt *st, counter_row *c) {
  c->name = col_text(st, 0);
  c->value = sqlite3_column_double(st, 1);
  c->window_start = sqlite3_column_int64(st, 2);
  c->paused_until = sqlite3_column_int64(st, 3);
  c->updated_at = sqlite3_column_int64(st, 4);
}

static int sq_counter_get(store *st_, const char *name, counter_row *out) {
  sq *s = (sq *)st_;
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st = stmt(s, Q_CTR_GET);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, name);
  int rc = step(s, st);
  if (rc == SQLITE_ROW) {
    counter_from(st, out);
    out->name = NULL; /* the statement's text goes away with the reset */
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail(s, "read counter");
  return rc == SQLITE_ROW;
}

static int sq_counter_put(store *st_, const char *name, const counter_row *c) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_CTR_PUT);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, name);
  bind_check(s, sqlite3_bind_double(st, 2, c->value), 2, SIZE_MAX);
  bind_int(s, st, 3, c->window_start);
  bind_int(s, st, 4, c->paused_until);
  bind_int(s, st, 5, c->updated_at);
  return exec_write(s, st, "write counter");
}

static int sq_counter_list(store *st_, const char *prefix, store_counter_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_CTR_LIST);
  if (!st) return STORE_ERR;
  char *hi = util_fmt("%s\xff", prefix);
  bind_text(s, st, 1, prefix);
  bind_text(s, st, 2, hi);
  int rc, stop = 0;
  while (!stop && (rc = step(s, st)) == SQLITE_ROW) {
    counter_row c;
    counter_from(st, &c);
    stop = cb(ud, &c);
  }
  sqlite3_reset(st);
  free(hi);
  if (!stop && rc != SQLITE_DONE) return fail(s, "list counters");
  return STORE_OK;
}

/* ---- webhook deliveries ---- */

static int delivery_accepted(const char *outcome) {
  return strcmp(outcome, "started") == 0 || strcmp(outcome, "existing") == 0;
}

static int sq_delivery_put(store *st_, const delivery_row *d) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_DLV_PUT);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, d->trigger);
  bind_text(s, st, 2, d->delivery ? d->delivery : "");
  bind_int(s, st, 3, d->received_at);
  bind_text(s, st, 4, d->outcome);
  bind_int(s, st, 5, d->status);
  bind_text(s, st, 6, d->wf_id);
  bind_text(s, st, 7, d->detail);
  if (exec_write(s, st, "record delivery") != STORE_OK) return STORE_ERR;
  if (sqlite3_changes(s->db) == 0) return 1;
  if (delivery_accepted(d->outcome)) return 0;
  st = stmt(s, Q_DLV_PRUNE);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, d->trigger);
  return exec_write(s, st, "prune deliveries");
}

static int delivery_scan(sq *s, sqlite3_stmt *st, store_delivery_cb cb, void *ud, const char *what) {
  int rc, n = 0;
  while ((rc = step(s, st)) == SQLITE_ROW) {
    delivery_row d = {sqlite3_column_int64(st, 0), col_text(st, 1), col_text(st, 2), sqlite3_column_int64(st, 3),
                      col_text(st, 4), sqlite3_column_int(st, 5), col_text(st, 6), col_text(st, 7)};
    n++;
    if (cb && cb(ud, &d)) break;
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail(s, what);
  return n;
}

static int sq_delivery_find(store *st_, const char *trigger, const char *delivery, store_delivery_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_DLV_FIND);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, trigger);
  bind_text(s, st, 2, delivery);
  int n = delivery_scan(s, st, cb, ud, "find delivery");
  return n < 0 ? n : n > 0;
}

static int sq_delivery_list(store *st_, const char *trigger, int limit, store_delivery_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, trigger ? Q_DLV_LIST : Q_DLV_LIST_ALL);
  if (!st) return STORE_ERR;
  if (trigger) bind_text(s, st, 1, trigger);
  bind_int(s, st, trigger ? 2 : 1, limit);
  int n = delivery_scan(s, st, cb, ud, "list deliveries");
  return n < 0 ? n : STORE_OK;
}

/* ---- schedules ---- */

/* Binds the columns in the order of the statements: name first, then the
 * fields an update rewrites (through updated_at), created_at last when with_created. */
static void schedule_bind(sq *s, sqlite3_stmt *st, const schedule_row *r, int with_created) {
  bind_text(s, st, 1, r->name);
  bind_text(s, st, 2, r->cron);
  bind_text(s, st, 3, r->tz);
  bind_text(s, st, 4, r->script);
  bind_text(s, st, 5, r->input);
  bind_text(s, st, 6, r->overlap);
  bind_int(s, st, 7, r->catchup_window_ms);
  bind_int(s, st, 8, r->jitter_ms);
  bind_int(s, st, 9, r->paused);
  bind_int(s, st, 10, r->next_fire_at);
  bind_int(s, st, 11, r->last_fire_at);
  bind_int(s, st, 12, r->buffered_fire_at);
  bind_int(s, st, 13, r->skipped_count);
  bind_int(s, st, 14, r->updated_at);
  if (with_created) bind_int(s, st, 15, r->created_at);
}

static int sq_schedule_insert(store *st_, const schedule_row *r) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_SCH_INSERT);
  if (!st) return STORE_ERR;
  schedule_bind(s, st, r, 1);
  if (exec_write(s, st, "write schedule") != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

static int sq_schedule_update(store *st_, const schedule_row *r) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_SCH_UPDATE);
  if (!st) return STORE_ERR;
  schedule_bind(s, st, r, 0);
  if (exec_write(s, st, "update schedule") != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

static int schedule_scan(sq *s, sqlite3_stmt *st, store_schedule_cb cb, void *ud, const char *what) {
  int rc, n = 0;
  while ((rc = step(s, st)) == SQLITE_ROW) {
    schedule_row r = {col_text(st, 0), col_text(st, 1), col_text(st, 2), col_text(st, 3), col_text(st, 4),
                      col_text(st, 5), sqlite3_column_int64(st, 6), sqlite3_column_int64(st, 7),
                      sqlite3_column_int(st, 8), sqlite3_column_int64(st, 9), sqlite3_column_int64(st, 10),
                      sqlite3_column_int64(st, 11), sqlite3_column_int64(st, 12), sqlite3_column_int64(st, 14),
                      sqlite3_column_int64(st, 13)};
    n++;
    if (cb && cb(ud, &r)) break;
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail(s, what);
  return n;
}

static int sq_schedule_get(store *st_, const char *name, store_schedule_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_SCH_GET);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, name);
  int n = schedule_scan(s, st, cb, ud, "read schedule");
  return n < 0 ? n : n > 0;
}

static int sq_schedule_list(store *st_, store_schedule_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = stmt(s, Q_SCH_LIST);
  if (!st) return STORE_ERR;
  int n = schedule_scan(s, st, cb, ud, "list schedules");
  return n < 0 ? n : STORE_OK;
}

static int sq_schedule_del(store *st_, const char *name) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = stmt(s, Q_SCH_DEL);
  if (!st) return STORE_ERR;
  bind_text(s, st, 1, name);
  if (exec_write(s, st, "delete schedule") != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

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
      fail(s, t->name);
      return NULL;
    }
  }
  sqlite3_reset(*st);
  sqlite3_clear_bindings(*st);
  return *st;
}

static void bind_value(sq *s, sqlite3_stmt *st, int i, const store_value *v) {
  switch (v->type) {
  case STORE_V_NULL: bind_check(s, sqlite3_bind_null(st, i), i, SIZE_MAX); break;
  case STORE_V_INT: bind_int(s, st, i, v->i); break;
  case STORE_V_REAL: bind_check(s, sqlite3_bind_double(st, i, v->r), i, SIZE_MAX); break;
  case STORE_V_TEXT:
    bind_check(s, v->n > INT32_MAX ? SQLITE_TOOBIG : sqlite3_bind_text(st, i, v->p, (int)v->n, SQLITE_TRANSIENT), i,
               v->n);
    break;
  case STORE_V_BLOB: bind_blob(s, st, i, v->p, v->n); break;
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

static int sq_table_page(store *st_, const store_table *t, const store_value *after, int limit, store_row_cb cb,
                         void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = table_stmt(s, t, after ? STORE_TABLE_AFTER : STORE_TABLE_FIRST);
  if (!st) return STORE_ERR;
  int np = 0;
  if (after)
    for (; np < t->nkey; np++) bind_value(s, st, np + 1, &after[np]);
  bind_int(s, st, np + 1, limit);
  store_value row[32];
  int n = 0, rc;
  while ((rc = step(s, st)) == SQLITE_ROW) {
    for (int i = 0; i < t->ncolumns && i < 32; i++) row[i] = read_value(st, t, i);
    n++;
    if (cb(ud, row)) break;
  }
  int ok = rc == SQLITE_ROW || rc == SQLITE_DONE;
  sqlite3_reset(st);
  return ok ? n : fail(s, t->name);
}

static int sq_table_insert(store *st_, const store_table *t, const store_value *row, int replace) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = table_stmt(s, t, replace ? STORE_TABLE_REPLACE : STORE_TABLE_INSERT);
  if (!st) return STORE_ERR;
  for (int i = 0; i < t->ncolumns; i++) bind_value(s, st, i + 1, &row[i]);
  return exec_write(s, st, t->name);
}

static int64_t sq_table_count(store *st_, const store_table *t) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = table_stmt(s, t, STORE_TABLE_COUNT);
  if (!st) return STORE_ERR;
  int rc = step(s, st);
  int64_t n = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_reset(st);
  return n < 0 ? fail(s, t->name) : n;
}

static int sq_table_finish(store *st_, const store_table *t) {
  (void)st_, (void)t; /* SQLite's next rowid is past the largest one already */
  return STORE_OK;
}

const store_ops store_sqlite_ops = {
    .close = sq_close,
    .errmsg = sq_errmsg,
    .path = sq_path,
    .instance_id = sq_instance_id,
    .begin = sq_begin,
    .commit = sq_commit,
    .rollback = sq_rollback,
    .in_txn = sq_in_txn,
    .batch_failed = sq_batch_failed,
    .batch_writes = sq_batch_writes,
    .data_version = sq_data_version,
    .wf_insert = sq_wf_insert,
    .wf_get = sq_wf_get,
    .wf_set_status = sq_wf_set_status,
    .wf_set_cancel = sq_wf_set_cancel,
    .wf_set_code = sq_wf_set_code,
    .wf_new_run = sq_wf_new_run,
    .wf_list = sq_wf_list,
    .wf_page = sq_wf_page,
    .wf_ids = sq_wf_ids,
    .hist_append = sq_hist_append,
    .hist_load = sq_hist_load,
    .hist_range = sq_hist_range,
    .hist_max_seq = sq_hist_max_seq,
    .hist_outcome = sq_hist_outcome,
    .hist_get = sq_hist_get,
    .code_put = sq_code_put,
    .code_get = sq_code_get,
    .module_pin = sq_module_pin,
    .module_get = sq_module_get,
    .modules_clear = sq_modules_clear,
    .modules_copy = sq_modules_copy,
    .task_put = sq_task_put,
    .task_del = sq_task_del,
    .task_take = sq_task_take,
    .task_release = sq_task_release,
    .task_del_wf = sq_task_del_wf,
    .task_get = sq_task_get,
    .task_due = sq_task_due,
    .task_next_at = sq_task_next_at,
    .task_count = sq_task_count,
    .signal_put = sq_signal_put,
    .signal_take = sq_signal_take,
    .signal_count = sq_signal_count,
    .signal_has = sq_signal_has,
    .signal_del_wf = sq_signal_del_wf,
    .domain_append = sq_domain_append,
    .domain_list = sq_domain_list,
    .feed_after = sq_feed_after,
    .feed_last = sq_feed_last,
    .meta_get = sq_meta_get,
    .meta_put = sq_meta_put,
    .delivery_put = sq_delivery_put,
    .delivery_find = sq_delivery_find,
    .delivery_list = sq_delivery_list,
    .token_put = sq_token_put,
    .token_revoke = sq_token_revoke,
    .token_list = sq_token_list,
    .token_live = sq_token_live,
    .token_live_count = sq_token_live_count,
    .slot_put = sq_slot_put,
    .slot_get = sq_slot_get,
    .slot_head = sq_slot_head,
    .slot_count = sq_slot_count,
    .slot_hold = sq_slot_hold,
    .slot_del = sq_slot_del,
    .slot_list = sq_slot_list,
    .table_page = sq_table_page,
    .table_insert = sq_table_insert,
    .table_count = sq_table_count,
    .table_finish = sq_table_finish,
    .counter_get = sq_counter_get,
    .counter_put = sq_counter_put,
    .counter_list = sq_counter_list,
    .schedule_insert = sq_schedule_insert,
    .schedule_update = sq_schedule_update,
    .schedule_get = sq_schedule_get,
    .schedule_list = sq_schedule_list,
    .schedule_del = sq_schedule_del,
    .group_count = sq_group_count,
    .live_list = sq_live_list,
    .count = sq_count,
};
