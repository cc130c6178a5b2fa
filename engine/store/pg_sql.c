/* pg_sql: the PostgreSQL store's statements (pg_internal.h's Q_), in
 * PostgreSQL's SQL: $N parameters, its upserts, the leases' statements and
 * the commit's round trip. pg.c has the overview. */
#include "pg_internal.h"

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
const char *const pg_sql[Q__N] = {
    [Q_WF_INSERT] = "INSERT INTO workflows(id,run,status,script_name,script_dir,code_hash,input,result,error,cancel,"
                    "created_at,updated_at,parent,parent_close,forked_from,hist_from_run) "
                    "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$2)",
    /* store_wf_start: the row, its first event and (with $24) its first task
     * if the id is free, else nothing; then the existing row (NULL when it
     * was written, or when a batch that inserted it committed after this
     * statement began: pg_wf_start asks again) and whether it was written */
    [Q_WF_START] = "WITH ins AS (INSERT INTO workflows(id,run,status,script_name,script_dir,code_hash,input,result,"
                   "error,cancel,created_at,updated_at,parent,parent_close,forked_from,hist_from_run) "
                   "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$2) ON CONFLICT(id) DO NOTHING RETURNING id), "
                   "h AS (INSERT INTO history(wf_id,run,seq,type,ref,name,hash,payload,time,chain) SELECT id,$2::bigint,"
                   "$16::bigint,$17::text,$18::bigint,$19::text,$20::text,$21::text,$22::bigint,$23::text FROM ins), "
                   "t AS (INSERT INTO tasks(wf_id,kind,seq,run_at,attempt,first_at,lease_owner,lease_until) "
                   "SELECT id,'workflow',0,$11::bigint,0,0,NULL,0 FROM ins WHERE $24::int<>0 "
                   "ON CONFLICT(wf_id,kind,seq) DO UPDATE SET id=excluded.id, run_at=excluded.run_at, attempt=0, "
                   "first_at=0, lease_owner=NULL, lease_until=0) "
                   "SELECT w.id,w.run,w.status,w.script_name,w.script_dir,w.code_hash,w.input,w.result,w.error,w.cancel,"
                   "w.created_at,w.updated_at,w.parent,w.parent_close,w.forked_from,(SELECT count(*) FROM ins) "
                   "FROM (VALUES(1)) one LEFT JOIN workflows w ON w.id=$1",
    /* Q_WF_START queued, sent ahead (pg_wf_start_send): when it inserts, it
     * writes its chain's head too ($24) */
    [Q_WF_START_SEND] = "WITH ins AS (INSERT INTO workflows(id,run,status,script_name,script_dir,code_hash,input,result,"
                        "error,cancel,created_at,updated_at,parent,parent_close,forked_from,hist_from_run) "
                        "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$2) ON CONFLICT(id) DO NOTHING RETURNING id), "
                        "h AS (INSERT INTO history(wf_id,run,seq,type,ref,name,hash,payload,time,chain) SELECT id,$2::bigint,"
                        "$16::bigint,$17::text,$18::bigint,$19::text,$20::text,$21::text,$22::bigint,$23::text FROM ins), "
                        "t AS (INSERT INTO tasks(wf_id,kind,seq,run_at,attempt,first_at,lease_owner,lease_until) "
                        "SELECT id,'workflow',0,$11::bigint,0,0,NULL,0 FROM ins "
                        "ON CONFLICT(wf_id,kind,seq) DO UPDATE SET id=excluded.id, run_at=excluded.run_at, attempt=0, "
                        "first_at=0, lease_owner=NULL, lease_until=0), "
                        "c AS (INSERT INTO chain_heads(wf_id,hist_head,hist_seq,hist_base) SELECT id,$24::text,$16::bigint,NULL "
                        "FROM ins ON CONFLICT(wf_id) DO UPDATE SET hist_head=excluded.hist_head, hist_seq=excluded.hist_seq, "
                        "hist_base=NULL) "
                        "SELECT w.id,w.run,w.status,w.script_name,w.script_dir,w.code_hash,w.input,w.result,w.error,w.cancel,"
                        "w.created_at,w.updated_at,w.parent,w.parent_close,w.forked_from,(SELECT count(*) FROM ins) "
                        "FROM (VALUES(1)) one LEFT JOIN workflows w ON w.id=$1",
    [Q_WF_GET] = "SELECT " WF_COLS ",input,result,error,cancel,created_at,updated_at,parent,parent_close,forked_from FROM workflows WHERE id=$1",
    /* in a client's batch (store_begin): its check holds to its commit (a
     * worker's status change waits, or is seen) */
    [Q_WF_GET_SHARE] = "SELECT " WF_COLS ",input,result,error,cancel,created_at,updated_at,parent,parent_close,forked_from FROM workflows "
                       "WHERE id=$1 FOR SHARE",
    [Q_WF_STATUS] = "UPDATE workflows SET status=$1, result=$2, error=$3, updated_at=$4 WHERE id=$5",
    [Q_WF_CANCEL] = "UPDATE workflows SET cancel=$1, updated_at=$2 WHERE id=$3",
    [Q_WF_CODE] = "UPDATE workflows SET code_hash=$1, script_name=$2, script_dir=$3, updated_at=$4 WHERE id=$5",
    [Q_WF_NEWRUN] = "UPDATE workflows SET run=$1, input=$2, status='running', result=NULL, error=NULL, "
                    "updated_at=$3 WHERE id=$4",
    [Q_WF_LIST] = "SELECT " WF_COLS ",NULL,NULL,error,cancel,created_at,updated_at,parent,parent_close,forked_from FROM workflows "
                  "ORDER BY created_at, id",
    [Q_WF_LIST_STATUS] = "SELECT " WF_COLS ",NULL,NULL,error,cancel,created_at,updated_at,parent,parent_close,forked_from FROM workflows "
                         "WHERE status=$1 ORDER BY created_at, id",
    /* a range of the primary key: $2 is the least string above every id
     * that starts with $1 (pg_prefix_above); $3 is ",status,...," or NULL */
    [Q_WF_IDS] = "SELECT " WF_COLS ",NULL,NULL,NULL,cancel,created_at,updated_at,parent,parent_close,forked_from FROM workflows "
                 "WHERE id>=$1 AND id<$2 AND ($3::text IS NULL OR strpos($3, ','||status||',')>0) "
                 "ORDER BY id LIMIT $4",
    /* "" or a prefix with no string above it: from $1 on */
    [Q_WF_IDS_FROM] = "SELECT " WF_COLS ",NULL,NULL,NULL,cancel,created_at,updated_at,parent,parent_close,forked_from FROM workflows "
                      "WHERE id>=$1 AND starts_with(id, $1) AND ($2::text IS NULL OR "
                      "strpos($2, ','||status||',')>0) ORDER BY id LIMIT $3",
    [Q_WF_CHILDREN] = "SELECT " WF_COLS ",NULL,NULL,error,cancel,created_at,updated_at,parent,parent_close,forked_from "
                      "FROM workflows WHERE parent=$1 ORDER BY created_at, id",
    /* by the index workflows_forked (its expression and its condition, as written there) */
    [Q_WF_FORKS] = "SELECT " WF_COLS ",NULL,NULL,error,cancel,created_at,updated_at,parent,parent_close,forked_from "
                   "FROM workflows WHERE forked_from IS NOT NULL AND "
                   "(substring(forked_from from '\"id\":\"([^\"]*)\"'))=$1 "
                   "ORDER BY created_at, id",
    /* down the parent column from $1, at most $2 levels, at most $3 rows */
    [Q_WF_SUBTREE] = "WITH RECURSIVE down(id,n) AS (SELECT id,1 FROM workflows WHERE parent=$1 UNION ALL "
                     "SELECT w.id,down.n+1 FROM workflows w JOIN down ON w.parent=down.id WHERE down.n<$2::bigint) "
                     "SELECT w.id,w.run,w.status,w.script_name,w.script_dir,w.code_hash,NULL,w.result,w.error,w.cancel,"
                     "w.created_at,w.updated_at,w.parent,w.parent_close,w.forked_from FROM down JOIN workflows w ON w.id=down.id "
                     "ORDER BY w.created_at, w.id LIMIT $3::bigint",
    /* up the parent column from $1, at most $2 steps: the last step's number is the depth */
    [Q_WF_DEPTH] = "WITH RECURSIVE up(id,parent,n) AS (SELECT id,parent,0 FROM workflows WHERE id=$1 UNION ALL "
                   "SELECT w.id,w.parent,up.n+1 FROM workflows w JOIN up ON w.id=up.parent WHERE up.n<$2::bigint) "
                   "SELECT coalesce(max(n),0) FROM up",
    [Q_WF_CHILDREN_RUNNING] = "SELECT count(*) FROM workflows WHERE parent=$1 "
                              "AND status NOT IN ('completed','failed','cancelled')",
    /* a workflow's hash chains: where they start, their heads (chain.c) */
    [Q_WF_CHAIN] = "SELECT w.run,c.hist_head,coalesce(c.hist_seq,0),c.hist_base,w.hist_from_run,w.hist_from_seq,"
                   "c.dom_head,coalesce(c.dom_seq,0),w.dom_from FROM workflows w LEFT JOIN chain_heads c ON c.wf_id=w.id "
                   "WHERE w.id=$1",
    /* a head the batch moved: a narrow row's upsert, not a rewrite of the workflow's wide one */
    [Q_WF_HIST_HEAD] = "INSERT INTO chain_heads(wf_id,hist_head,hist_seq,hist_base) VALUES($4,$1,$2,$3) "
                       "ON CONFLICT(wf_id) DO UPDATE SET hist_head=$1, hist_seq=$2, hist_base=$3",
    [Q_WF_DOM_HEAD] = "INSERT INTO chain_heads(wf_id,dom_head,dom_seq) VALUES($3,$1,$2) "
                      "ON CONFLICT(wf_id) DO UPDATE SET dom_head=$1, dom_seq=$2",
    [Q_HIST_APPEND] = "INSERT INTO history(wf_id,run,seq,type,ref,name,hash,payload,time,chain) "
                      "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)",
    /* Q_HIST_APPEND's rows, many at once (pg_rows.c): each column an array */
    [Q_HIST_APPEND_MANY] = "INSERT INTO history(wf_id,run,seq,type,ref,name,hash,payload,time,chain) "
                           "SELECT * FROM unnest($1::text[],$2::bigint[],$3::bigint[],$4::text[],$5::bigint[],"
                           "$6::text[],$7::text[],$8::text[],$9::bigint[],$10::text[])",
    /* Q_WF_HIST_HEAD's, many at once (a batch moves a workflow's head once) */
    [Q_WF_HIST_HEAD_MANY] = "INSERT INTO chain_heads(wf_id,hist_head,hist_seq,hist_base) "
                            "SELECT w, h, q, b FROM unnest($1::text[],$2::bigint[],$3::text[],$4::text[]) AS r(h,q,b,w) "
                            "ON CONFLICT(wf_id) DO UPDATE SET hist_head=excluded.hist_head, "
                            "hist_seq=excluded.hist_seq, hist_base=excluded.hist_base",
    [Q_HIST_LOAD] = "SELECT seq,type,ref,name,hash,payload,time,chain,run FROM history WHERE wf_id=$1 AND run=$2 "
                    "ORDER BY seq",
    /* point reads are not checked against the chain (store.h): no chain read */
    [Q_HIST_GET] = "SELECT seq,type,ref,name,hash,payload,time,NULL::text,run FROM history WHERE wf_id=$1 AND run=$2 "
                   "AND seq=$3",
    [Q_HIST_RANGE] = "SELECT seq,type,ref,name,hash,payload,time,NULL::text,run FROM history WHERE wf_id=$1 AND run=$2 "
                     "AND seq>=$3 AND seq<=$4 ORDER BY seq",
    [Q_HIST_MAX] = "SELECT max(seq) FROM history WHERE wf_id=$1 AND run=$2",
    [Q_HIST_OUTCOME] = "SELECT EXISTS(SELECT 1 FROM history WHERE wf_id=$1 AND run=$2 AND seq>$3 AND ref=$4)::int",
    [Q_CODE_PUT] = "INSERT INTO code(hash,name,source) VALUES($1,$2,$3) ON CONFLICT(hash) DO NOTHING",
    [Q_CODE_GET] = "SELECT source FROM code WHERE hash=$1",
    [Q_MOD_PIN] = "INSERT INTO run_modules(wf_id,run,module,hash) VALUES($1,$2,$3,$4) "
                  "ON CONFLICT(wf_id,run,module) DO UPDATE SET hash=excluded.hash",
    [Q_MOD_GET] = "SELECT hash FROM run_modules WHERE wf_id=$1 AND run=$2 AND module=$3",
    [Q_MOD_CLEAR] = "DELETE FROM run_modules WHERE wf_id=$1 AND run=$2",
    /* a fork's pinned modules (store_fork_copy): $1 the fork, $2 the source */
    [Q_FORK_MOD] = "INSERT INTO run_modules(wf_id,run,module,hash) SELECT $1,run,module,hash FROM run_modules "
                   "WHERE wf_id=$2 AND run=$3 ON CONFLICT(wf_id,run,module) DO UPDATE SET hash=excluded.hash",
    [Q_MOD_COPY] = "INSERT INTO run_modules(wf_id,run,module,hash) SELECT wf_id,$1::bigint,module,hash "
                   "FROM run_modules WHERE wf_id=$2 AND run=$3 "
                   "ON CONFLICT(wf_id,run,module) DO UPDATE SET hash=excluded.hash",
    [Q_TASK_PUT] = "INSERT INTO tasks(wf_id,kind,seq,run_at,attempt,first_at,lease_owner,lease_until) "
                   "VALUES($1,$2,$3,$4,$5,$6,$7,$8) ON CONFLICT(wf_id,kind,seq) DO UPDATE SET id=excluded.id, "
                   "run_at=excluded.run_at, attempt=excluded.attempt, first_at=excluded.first_at, "
                   "lease_owner=excluded.lease_owner, lease_until=excluded.lease_until",
    [Q_TASK_DEL] = "DELETE FROM tasks WHERE wf_id=$1 AND kind=$2 AND seq=$3",
    /* a batch's last put or delete of each task, many at once (pg_rows.c) */
    [Q_TASK_PUT_MANY] = "INSERT INTO tasks(wf_id,kind,seq,run_at,attempt,first_at,lease_owner,lease_until) "
                        "SELECT * FROM unnest($1::text[],$2::text[],$3::bigint[],$4::bigint[],$5::int[],$6::bigint[],"
                        "$7::text[],$8::bigint[]) ON CONFLICT(wf_id,kind,seq) DO UPDATE SET id=excluded.id, "
                        "run_at=excluded.run_at, attempt=excluded.attempt, first_at=excluded.first_at, "
                        "lease_owner=excluded.lease_owner, lease_until=excluded.lease_until",
    [Q_TASK_DEL_MANY] = "DELETE FROM tasks t USING unnest($1::text[],$2::text[],$3::bigint[]) AS d(w,k,q) "
                        "WHERE t.wf_id=d.w AND t.kind=d.k AND t.seq=d.q",
    /* Q_TASK_DEL_WF's, Q_SIG_DEL_WF's and Q_WF_STATUS's rows, many at once
     * (pg_rows.c; a workflow's status once: its last in the batch) */
    [Q_TASK_DEL_WF_MANY] = "DELETE FROM tasks WHERE wf_id = ANY($1::text[])",
    [Q_SIG_DEL_WF_MANY] = "DELETE FROM signals WHERE wf_id = ANY($1::text[])",
    [Q_WF_STATUS_MANY] = "UPDATE workflows w SET status=u.s, result=u.r, error=u.e, updated_at=u.t FROM "
                         "unnest($1::text[],$2::text[],$3::text[],$4::bigint[],$5::text[]) AS u(s,r,e,t,id) "
                         "WHERE w.id=u.id",
    /* store_task_start: taken only while the lease is this worker's (claimed before it in the pipeline, or held) */
    [Q_TASK_TAKE_HELD] = "DELETE FROM tasks WHERE wf_id=$1 AND kind=$2 AND seq=$3 AND EXISTS "
                         "(SELECT 1 FROM leases WHERE wf_id=$1 AND owner=$4)",
    /* with the run its rows are of: the row read before them may show an older one */
    [Q_HIST_LOAD_CURRENT] = "SELECT seq,type,ref,name,hash,payload,time,chain,run FROM history WHERE wf_id=$1 AND "
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
    /* h is driven from this worker's leases (leases_owner), not the
     * backlog. (A nested loop, one probe of tasks' key per lease, would not
     * read a parked backlog; with the churn of a drain each probe met dead
     * versions, and it cost four times what this join costs: measured with
     * pg_stat_statements, 2,000 chain10 workflows.) */
    [Q_TASK_DUE] = "WITH h AS (SELECT t.id,t.wf_id,t.kind,t.seq,t.run_at,t.attempt,t.first_at,t.lease_until FROM "
                   "leases m JOIN tasks t ON t.wf_id=m.wf_id WHERE m.owner=$2 AND t.run_at<=$1 AND "
                   "(t.lease_owner IS NULL OR t.lease_owner<>$2) ORDER BY t.run_at, t.id LIMIT $3 "
                   "FOR UPDATE OF t SKIP LOCKED), "
                   "o AS (" DUE_UNHELD("lease_owner<>$2") "), n AS (" DUE_UNHELD("lease_owner IS NULL") ") "
                   "SELECT * FROM h UNION ALL (SELECT * FROM o UNION ALL SELECT * FROM n LIMIT $4)",
    /* A task of a workflow another live worker holds comes due when that
     * lease expires. Two parts, so that neither reads the queue: the first
     * task in run_at order (tasks_due) of no such workflow, passing over
     * only the tasks of held workflows; and the held workflows' tasks, from
     * the leases. A parked backlog (timers an hour away) is not read. */
    [Q_TASK_NEXT] = "SELECT LEAST((SELECT t.run_at FROM tasks t WHERE (t.lease_owner IS NULL OR t.lease_owner<>$1) "
                    "AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.wf_id=t.wf_id AND l.owner<>$1 AND "
                    LIVE("l.owner") ") ORDER BY t.run_at LIMIT 1), "
                    "(SELECT min(GREATEST(t.run_at, l.expires_at)) FROM leases l JOIN tasks t ON t.wf_id=l.wf_id "
                    "WHERE l.owner<>$1 AND " LIVE("l.owner") " AND (t.lease_owner IS NULL OR t.lease_owner<>$1)))",
    [Q_TASK_COUNT] = "SELECT count(*) FROM tasks WHERE wf_id=$1",
    [Q_SIG_PUT] = "INSERT INTO signals(wf_id,name,payload,time) VALUES($1,$2,$3,$4)",
    [Q_SIG_FIND] = "SELECT id,payload FROM signals WHERE wf_id=$1 AND name=$2 ORDER BY id LIMIT 1",
    /* the oldest of the name, taken in one round trip: a batch that took it
     * first (its row deleted while this one waited for its lock) leaves none */
    [Q_SIG_TAKE] = "DELETE FROM signals WHERE id=(SELECT id FROM signals WHERE wf_id=$1 AND name=$2 ORDER BY id "
                   "LIMIT 1) RETURNING payload",
    /* store_signal_wake: the signal and the wake-up (Q_TASK_PUT's), both
     * only while the workflow has not ended, in one statement */
    [Q_SIG_WAKE] = "WITH live AS (SELECT 1 FROM workflows WHERE id=$1 AND status NOT IN "
                   "('completed','failed','cancelled')), "
                   "sig AS (INSERT INTO signals(wf_id,name,payload,time) SELECT $1,$2::text,$3::text,$4::bigint FROM live) "
                   "INSERT INTO tasks(wf_id,kind,seq,run_at,attempt,first_at,lease_owner,lease_until) "
                   "SELECT $1,'workflow'::text,0,$4,0,0,NULL::text,0 FROM live ON CONFLICT(wf_id,kind,seq) DO UPDATE SET "
                   "id=excluded.id, run_at=excluded.run_at, attempt=excluded.attempt, first_at=excluded.first_at, "
                   "lease_owner=excluded.lease_owner, lease_until=excluded.lease_until",
    [Q_SIG_COUNT] = "SELECT count(*) FROM signals WHERE wf_id=$1",
    [Q_SIG_DEL_WF] = "DELETE FROM signals WHERE wf_id=$1",
    /* the session's last seq and its chain's head (its workflow's head row) */
    [Q_DOM_LAST] = "SELECT (SELECT max(seq) FROM domain_events WHERE session_id=$1), "
                   "(SELECT dom_head FROM chain_heads WHERE wf_id=$1)",
    [Q_DOM_APPEND] = "INSERT INTO domain_events(session_id,seq,type,time,payload,chain) VALUES($1,$2,$3,$4,$5,$6)",
    [Q_DOM_LIST] = "SELECT session_id,seq,type,time,payload,chain FROM domain_events WHERE session_id=$1 AND seq>=$2 "
                   "ORDER BY seq",
    [Q_FEED_PUT] = "INSERT INTO event_feed(session_id,seq) VALUES($1,$2)",
    [Q_FEED_AFTER] = "SELECT f.id,d.session_id,d.seq,d.type,d.time,d.payload FROM event_feed f JOIN domain_events d "
                     "ON d.session_id=f.session_id AND d.seq=f.seq WHERE f.id>$1 ORDER BY f.id LIMIT $2",
    [Q_FEED_LAST] = "SELECT max(id) FROM event_feed",
    [Q_WF_PAGE] = "SELECT " WF_COLS ",input,result,error,cancel,created_at,updated_at,parent,parent_close,forked_from FROM workflows "
                  "WHERE ($1::text IS NULL OR status=$1) AND ($2::text IS NULL OR script_name=$2) "
                  "AND (created_at, id) > ($3::bigint, $4::text) ORDER BY created_at, id LIMIT $5",
    [Q_WF_PAGE_DESC] = "SELECT " WF_COLS ",input,result,error,cancel,created_at,updated_at,parent,parent_close,forked_from FROM workflows "
                       "WHERE ($1::text IS NULL OR status=$1) AND ($2::text IS NULL OR script_name=$2) "
                       "AND (created_at, id) < ($3::bigint, $4::text) ORDER BY created_at DESC, id DESC LIMIT $5",
    [Q_GROUP_STATUS] = "SELECT status, count(*) FROM workflows GROUP BY status",
    [Q_GROUP_TASKS] = "SELECT kind, count(*) FROM tasks GROUP BY kind",
    /* $1: the event types asked for, a text[] (type_array, pg_records.c) */
    [Q_GROUP_LIVE_WITH] = "SELECT 'live', count(*) FROM workflows w WHERE w.status NOT IN ('completed','failed',"
                          "'cancelled') AND EXISTS(SELECT 1 FROM domain_events d WHERE d.session_id=w.id AND "
                          "d.type=ANY($1::text[]))",
    [Q_LIVE_LIST] = "SELECT w.id, (SELECT d.payload FROM domain_events d WHERE d.session_id=w.id AND "
                    "d.type=ANY($1::text[]) ORDER BY d.seq DESC LIMIT 1) FROM workflows w "
                    "WHERE w.status NOT IN ('completed','failed','cancelled')",
    [Q_GROUP_SLOTS] = "SELECT pool||chr(31)||(CASE WHEN held<>0 THEN 'held' ELSE 'queued' END), count(*) FROM slots "
                      "GROUP BY pool, held",
    /* taken when free, expired or ours (the epoch moves on when the owner changes) */
    /* Never waits on another claimer: one that is claiming the workflow in
     * an open batch holds its CLAIM_CLASS lock, and a live holder's row is
     * not touched (ON CONFLICT would lock it until this batch commits) */
    /* an order lock (pg_lock_on), held to the end of the batch */
    [Q_LOCK] = "SELECT pg_advisory_xact_lock($1::int, hashtext($2))",
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
    /* the version moves when the batch commits (store_data_version) */
    [Q_BUMP] = "INSERT INTO commits VALUES($1, 1) ON CONFLICT(one) DO UPDATE SET n=commits.n+1",
    /* the listeners hear of a commit (store_commit_fd): sent after the
     * COMMIT, in a transaction of its own, because PostgreSQL orders
     * notifying transactions with one lock for the database held through
     * their commit, which would make every worker's commits wait for each
     * other's flush; this one writes nothing, so it need not wait for its
     * own (a notify lost in a server crash costs a wake-up, which the
     * counter's poll makes up for) */
    [Q_NOTIFY] = "SELECT set_config('synchronous_commit', 'off', true), pg_notify('engine_commits', '')",
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
    [Q_TOKEN_PUT] = "INSERT INTO tokens(name,hash,scopes,created_at,revoked_at,grants) VALUES($1,$2,$3,$4,NULL,$5) "
                    "ON CONFLICT(name) DO UPDATE SET hash=excluded.hash, scopes=excluded.scopes, grants=excluded.grants, "
                    "created_at=excluded.created_at, revoked_at=NULL WHERE tokens.revoked_at IS NOT NULL",
    [Q_TOKEN_REVOKE] = "UPDATE tokens SET revoked_at=$1 WHERE name=$2 AND revoked_at IS NULL",
    [Q_TOKEN_LIST] = "SELECT name,NULL,scopes,created_at,revoked_at,grants FROM tokens ORDER BY name",
    [Q_TOKEN_LIVE] = "SELECT name,hash,scopes,created_at,0,grants FROM tokens WHERE revoked_at IS NULL ORDER BY name",
    [Q_TOKEN_LIVE_COUNT] = "SELECT count(*) FROM tokens WHERE revoked_at IS NULL",
    /* an entry is written once, by its id: a rerun of its activity writes nothing */
    [Q_MEM_PUT] = "INSERT INTO memory(id,kind,identity,text,evidence,session_id,request_id,approver,approved_at) "
                  "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9) ON CONFLICT(id) DO NOTHING",
    [Q_MEM_REVOKE] = "UPDATE memory SET revoked_at=$1, revoked_by=$2, revoke_reason=$3 WHERE id=$4 AND revoked_at IS NULL",
    [Q_MEM_LIST] = "SELECT id,kind,identity,text,evidence,session_id,request_id,approver,approved_at,"
                   "coalesce(revoked_at,0),revoked_by,revoke_reason FROM memory WHERE ($1::text IS NULL OR id=$1) AND "
                   "($2::text IS NULL OR kind=$2) AND ($3::text IS NULL OR identity=$3) AND "
                   "($4::bigint=0 OR revoked_at IS NULL) ORDER BY approved_at, id",
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
    /* a batch's first statements, sent in its pipeline (pg_batch_begin) */
    [Q_BEGIN] = "BEGIN",
    [Q_TXID] = "SELECT txid_current()",
    /* pg_locks_check_send: the lock sessions $1 (pids) begun at $2 (µs) hold
     * the worker lock, all $3 of them, or the statement fails (1/0) and the
     * batch with it (each holder's session read on its own, not the whole
     * pg_stat_activity view: 55 µs a batch, not 130) */
    [Q_LOCKS_HELD] = "SELECT 1 / (count(*) = $3::int)::int FROM pg_locks l, LATERAL pg_stat_get_activity(l.pid) a "
                     "WHERE l.locktype='advisory' AND l.granted AND l.classid=" STR(LOCK_CLASS) " AND l.objid="
                     STR(WORKER_LOCK_KEY) " AND l.database=(SELECT oid FROM pg_database WHERE "
                     "datname=current_database()) AND (l.pid, (extract(epoch FROM a.backend_start) * 1000000)::bigint) IN "
                     "(SELECT * FROM unnest($1::int[], $2::bigint[]))",
};
