/* sqlite_sql: the SQLite store's statements (sqlite_internal.h's Q_), in
 * SQLite's SQL: ? parameters, INSERT OR REPLACE and OR IGNORE. sqlite.c has
 * the overview. */
#include "sqlite_internal.h"

/* a schedule's columns in the order schedule_bind binds them */
#define SCH_COLS                                                                                           \
  "name,cron,tz,script,input,overlap,catchup_window_ms,jitter_ms,paused,next_fire_at,last_fire_at,"        \
  "buffered_fire_at,skipped_count,updated_at,created_at"

const char *const sq_sql[Q__N] = {
    [Q_WF_INSERT] = "INSERT INTO workflows(id,run,status,script_name,script_dir,code_hash,input,result,error,cancel,"
                    "created_at,updated_at,parent,parent_close,forked_from,hist_from_run) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?2)",
    [Q_WF_GET] = "SELECT id,run,status,script_name,script_dir,code_hash,input,result,error,cancel,created_at,"
                 "updated_at,parent,parent_close,forked_from FROM workflows WHERE id=?",
    [Q_WF_STATUS] = "UPDATE workflows SET status=?, result=?, error=?, updated_at=? WHERE id=?",
    [Q_WF_CANCEL] = "UPDATE workflows SET cancel=?, updated_at=? WHERE id=?",
    [Q_WF_CODE] = "UPDATE workflows SET code_hash=?, script_name=?, script_dir=?, updated_at=? WHERE id=?",
    [Q_WF_NEWRUN] = "UPDATE workflows SET run=?, input=?, status='running', result=NULL, error=NULL, updated_at=? "
                    "WHERE id=?",
    [Q_WF_LIST] = "SELECT id,run,status,script_name,script_dir,code_hash,NULL,NULL,error,cancel,created_at,"
                  "updated_at,parent,parent_close,forked_from FROM workflows ORDER BY created_at, id",
    [Q_WF_LIST_STATUS] = "SELECT id,run,status,script_name,script_dir,code_hash,NULL,NULL,error,cancel,created_at,"
                         "updated_at,parent,parent_close,forked_from FROM workflows WHERE status=? ORDER BY created_at, id",
    /* a range of the primary key's index (?2 is the prefix and a 0xff byte,
     * above every id that starts with it): a few rows read, however many
     * workflows there are; ?3 is ",status,...," or NULL */
    [Q_WF_IDS] = "SELECT id,run,status,script_name,script_dir,code_hash,NULL,NULL,NULL,cancel,created_at,updated_at,"
                 "parent,parent_close,forked_from FROM workflows WHERE id>=?1 AND id<?2 AND (?3 IS NULL OR instr(?3, ','||status||',')>0) "
                 "ORDER BY id LIMIT ?4",
    [Q_WF_CHILDREN] = "SELECT id,run,status,script_name,script_dir,code_hash,NULL,NULL,error,cancel,created_at,"
                      "updated_at,parent,parent_close,forked_from FROM workflows WHERE parent=? ORDER BY created_at, id",
    /* by the index workflows_forked (its expression and its condition, as written there) */
    [Q_WF_FORKS] = "SELECT id,run,status,script_name,script_dir,code_hash,NULL,NULL,error,cancel,created_at,"
                   "updated_at,parent,parent_close,forked_from FROM workflows WHERE forked_from IS NOT NULL AND "
                   "(CASE WHEN json_valid(forked_from) THEN json_extract(forked_from, '$.id') END)=? "
                   "ORDER BY created_at, id",
    /* down the parent column from ?1, at most ?2 levels, at most ?3 rows */
    [Q_WF_SUBTREE] = "WITH RECURSIVE down(id,n) AS (SELECT id,1 FROM workflows WHERE parent=?1 UNION ALL "
                     "SELECT w.id,down.n+1 FROM workflows w JOIN down ON w.parent=down.id WHERE down.n<?2) "
                     "SELECT w.id,w.run,w.status,w.script_name,w.script_dir,w.code_hash,NULL,w.result,w.error,w.cancel,"
                     "w.created_at,w.updated_at,w.parent,w.parent_close,w.forked_from FROM down JOIN workflows w ON w.id=down.id "
                     "ORDER BY w.created_at, w.id LIMIT ?3",
    /* up the parent column from ?1, at most ?2 steps: the last step's number is the depth */
    [Q_WF_DEPTH] = "WITH RECURSIVE up(id,parent,n) AS (SELECT id,parent,0 FROM workflows WHERE id=?1 UNION ALL "
                   "SELECT w.id,w.parent,up.n+1 FROM workflows w JOIN up ON w.id=up.parent WHERE up.n<?2) "
                   "SELECT coalesce(max(n),0) FROM up",
    [Q_WF_CHILDREN_RUNNING] = "SELECT count(*) FROM workflows WHERE parent=? "
                              "AND status NOT IN ('completed','failed','cancelled')",
    /* a workflow's hash chains: where they start, their heads (chain.c) */
    [Q_WF_CHAIN] = "SELECT w.run,c.hist_head,coalesce(c.hist_seq,0),c.hist_base,w.hist_from_run,w.hist_from_seq,"
                   "c.dom_head,coalesce(c.dom_seq,0),w.dom_from FROM workflows w LEFT JOIN chain_heads c ON c.wf_id=w.id "
                   "WHERE w.id=?",
    /* a head the batch moved: a narrow row's upsert, not a rewrite of the workflow's wide one */
    [Q_WF_HIST_HEAD] = "UPDATE chain_heads SET hist_head=?1, hist_seq=?2, hist_base=?3 WHERE wf_id=?4",
    [Q_WF_DOM_HEAD] = "UPDATE chain_heads SET dom_head=?1, dom_seq=?2 WHERE wf_id=?3",
    [Q_WF_HIST_HEAD_NEW] = "INSERT INTO chain_heads(wf_id,hist_head,hist_seq,hist_base) VALUES(?4,?1,?2,?3) "
                           "ON CONFLICT(wf_id) DO UPDATE SET hist_head=?1, hist_seq=?2, hist_base=?3",
    [Q_WF_DOM_HEAD_NEW] = "INSERT INTO chain_heads(wf_id,dom_head,dom_seq) VALUES(?3,?1,?2) "
                          "ON CONFLICT(wf_id) DO UPDATE SET dom_head=?1, dom_seq=?2",
    [Q_HIST_APPEND] = "INSERT INTO history(wf_id,run,seq,type,ref,name,hash,payload,time,chain) "
                      "VALUES(?,?,?,?,?,?,?,?,?,?)",
    [Q_HIST_LOAD] = "SELECT seq,type,ref,name,hash,payload,time,chain FROM history WHERE wf_id=? AND run=? "
                    "ORDER BY seq",
    /* point reads are not checked against the chain (store.h): no chain read,
     * and they work on a database opened read-only at an older schema (shell completion) */
    [Q_HIST_GET] = "SELECT seq,type,ref,name,hash,payload,time,NULL FROM history WHERE wf_id=? AND run=? AND seq=?",
    [Q_HIST_RANGE] = "SELECT seq,type,ref,name,hash,payload,time,NULL FROM history WHERE wf_id=? AND run=? AND seq>=? "
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
    /* a fork's pinned modules (store_fork_copy): ?1 the fork, ?2 the source */
    [Q_FORK_MOD] = "INSERT OR REPLACE INTO run_modules(wf_id,run,module,hash) SELECT ?1,run,module,hash "
                   "FROM run_modules WHERE wf_id=?2 AND run=?3",
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
    /* store_signal_wake: Q_SIG_PUT and Q_TASK_PUT, only while the workflow has not ended */
    [Q_SIG_WAKE_PUT] = "INSERT INTO signals(wf_id,name,payload,time) SELECT ?1,?2,?3,?4 WHERE EXISTS(SELECT 1 FROM "
                       "workflows WHERE id=?1 AND status NOT IN ('completed','failed','cancelled'))",
    [Q_SIG_WAKE_TASK] = "INSERT OR REPLACE INTO tasks(wf_id,kind,seq,run_at,attempt,first_at,lease_owner,lease_until) "
                        "SELECT ?1,'workflow',0,?2,0,0,NULL,0 WHERE EXISTS(SELECT 1 FROM workflows WHERE id=?1 AND "
                        "status NOT IN ('completed','failed','cancelled'))",
    [Q_SIG_COUNT] = "SELECT count(*) FROM signals WHERE wf_id=?",
    [Q_SIG_DEL_WF] = "DELETE FROM signals WHERE wf_id=?",
    /* the session's last seq and its chain's head (its workflow's head row) */
    [Q_DOM_LAST] = "SELECT (SELECT max(seq) FROM domain_events WHERE session_id=?1), "
                   "(SELECT dom_head FROM chain_heads WHERE wf_id=?1)",
    [Q_DOM_APPEND] = "INSERT INTO domain_events(session_id,seq,type,time,payload,chain) VALUES(?,?,?,?,?,?)",
    [Q_DOM_LIST] = "SELECT session_id,seq,type,time,payload,chain FROM domain_events WHERE session_id=? AND seq>=? "
                   "ORDER BY seq",
    [Q_FEED_PUT] = "INSERT INTO event_feed(session_id,seq) VALUES(?,?)",
    [Q_FEED_AFTER] = "SELECT f.id,d.session_id,d.seq,d.type,d.time,d.payload FROM event_feed f JOIN domain_events d "
                     "ON d.session_id=f.session_id AND d.seq=f.seq WHERE f.id>? ORDER BY f.id LIMIT ?",
    [Q_FEED_LAST] = "SELECT max(id) FROM event_feed",
    /* keyset pagination: (created_at, id) after the cursor, filters optional */
    [Q_WF_PAGE] = "SELECT id,run,status,script_name,script_dir,code_hash,input,result,error,cancel,created_at,"
                  "updated_at,parent,parent_close,forked_from FROM workflows WHERE (?1 IS NULL OR status=?1) AND (?2 IS NULL OR script_name=?2) "
                  "AND (created_at>?3 OR (created_at=?3 AND id>?4)) ORDER BY created_at, id LIMIT ?5",
    [Q_WF_PAGE_DESC] = "SELECT id,run,status,script_name,script_dir,code_hash,input,result,error,cancel,created_at,"
                       "updated_at,parent,parent_close,forked_from FROM workflows WHERE (?1 IS NULL OR status=?1) AND (?2 IS NULL OR script_name=?2) "
                       "AND (created_at<?3 OR (created_at=?3 AND id<?4)) ORDER BY created_at DESC, id DESC LIMIT ?5",
    [Q_GROUP_STATUS] = "SELECT status, count(*) FROM workflows GROUP BY status",
    [Q_GROUP_TASKS] = "SELECT kind, count(*) FROM tasks GROUP BY kind",
    /* unfinished workflows with an event of the types asked for (?1: a JSON
     * array of them, type_list in sqlite_records.c) */
    [Q_GROUP_LIVE_WITH] = "SELECT 'live', count(*) FROM workflows w WHERE w.status NOT IN ('completed','failed',"
                          "'cancelled') AND EXISTS(SELECT 1 FROM domain_events d WHERE d.session_id=w.id AND "
                          "d.type IN (SELECT value FROM json_each(?1)))",
    /* the unfinished ones and the payload of each one's latest such event (store_live_list) */
    [Q_LIVE_LIST] = "SELECT w.id, (SELECT d.payload FROM domain_events d WHERE d.session_id=w.id AND d.type IN "
                    "(SELECT value FROM json_each(?1)) ORDER BY d.seq DESC LIMIT 1) FROM workflows w "
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
    [Q_TOKEN_PUT] = "INSERT INTO tokens(name,hash,scopes,created_at,revoked_at,grants) VALUES(?,?,?,?,NULL,?) "
                    "ON CONFLICT(name) DO UPDATE SET hash=excluded.hash, scopes=excluded.scopes, grants=excluded.grants, "
                    "created_at=excluded.created_at, revoked_at=NULL WHERE tokens.revoked_at IS NOT NULL",
    [Q_TOKEN_REVOKE] = "UPDATE tokens SET revoked_at=? WHERE name=? AND revoked_at IS NULL",
    [Q_TOKEN_LIST] = "SELECT name,NULL,scopes,created_at,revoked_at,grants FROM tokens ORDER BY name",
    [Q_TOKEN_LIVE] = "SELECT name,hash,scopes,created_at,0,grants FROM tokens WHERE revoked_at IS NULL ORDER BY name",
    [Q_TOKEN_LIVE_COUNT] = "SELECT count(*) FROM tokens WHERE revoked_at IS NULL",
    /* an entry is written once, by its id: a rerun of its activity writes nothing */
    [Q_MEM_PUT] = "INSERT INTO memory(id,kind,identity,text,evidence,session_id,request_id,approver,approved_at) "
                  "VALUES(?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO NOTHING",
    [Q_MEM_REVOKE] = "UPDATE memory SET revoked_at=?, revoked_by=?, revoke_reason=? WHERE id=? AND revoked_at IS NULL",
    [Q_MEM_LIST] = "SELECT id,kind,identity,text,evidence,session_id,request_id,approver,approved_at,"
                   "coalesce(revoked_at,0),revoked_by,revoke_reason FROM memory WHERE (?1 IS NULL OR id=?1) AND "
                   "(?2 IS NULL OR kind=?2) AND (?3 IS NULL OR identity=?3) AND (?4=0 OR revoked_at IS NULL) "
                   "ORDER BY approved_at, id",
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
