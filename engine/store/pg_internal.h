/* pg_internal: what the files of the PostgreSQL backend share; pg.c has
 * the overview and says which file holds what. Included by them alone. */
#ifndef ENGINE_STORE_PG_INTERNAL_H
#define ENGINE_STORE_PG_INTERNAL_H

#include "backend.h"

#include <libpq-fe.h>
#include <stdint.h>

#include "util.h"

#define STR_(x) #x
#define STR(x) STR_(x)

/* advisory lock keys (two int4s): "engi" and which lock */
#define LOCK_CLASS 1701734249 /* 0x656e6769 */
#define WORKER_LOCK_KEY 1
#define WRITE_LOCK_KEY 2 /* the schema's creation (BEGIN_LOCKED) */
#define LIVE_CLASS 1701734263 /* "engw": a worker's liveness lock (LIVE) */
#define CLAIM_CLASS 1701734252 /* "engl": a claim in progress, keyed hashtext(wf_id) (Q_LEASE_CLAIM) */
/* the commits row a connection bumps: one of 16, so that concurrent commits
 * do not queue on one row (store_data_version sums them) */
#define COMMIT_SHARDS 16
/* What is shared across workflows is ordered by a lock of its own, keyed
 * hashtext(key) in a class of what it orders (pg_lock_on): two batches wait
 * for each other only when they touch the same key. */
enum {
  ORDER_FEED = 1701734246,     /* "engf": the event feed (one key): domain event seqs, the feed's ids */
  ORDER_SIGNALS = 1701734259,  /* "engs": a workflow's buffered signals, keyed by its id */
  ORDER_SLOTS = 1701734257,    /* "engq": a slot's queue, keyed pool and key */
  ORDER_COUNTERS = 1701734243, /* "engc": a counter (caps, rates), keyed by its name */
  ORDER_DELIVERY = 1701734244, /* "engd": a webhook delivery, keyed trigger and delivery id */
  ORDER_SCHEDULES = 1701734248, /* "engh": the schedules (one key: a tick reads them all) */
  ORDER_META = 1701734253,     /* "engm": a meta value, keyed by its key */
  ORDER_TOKENS = 1701734260,   /* "engt": an API token, keyed by its name */
  ORDER_WF_ID = 1701734254     /* "engn": a workflow id a client found free (pg_wf_get in a client's batch) */
};
#define ORDER_LOCK "SELECT pg_advisory_xact_lock(" STR(LOCK_CLASS) ", " STR(WRITE_LOCK_KEY) ")"
#define FENCE_WHAT "fence leases"
#define LOCKS_WHAT "the worker lock" /* Q_LOCKS_HELD: its division_by_zero says a lock is not held */
#define FENCE_ABORTED "22012" /* Q_FENCE_OR_ABORT's division_by_zero: a fenced lease is not ours */

enum {
  Q_WF_INSERT, Q_WF_START, Q_WF_START_SEND, Q_WF_GET, Q_WF_GET_SHARE, Q_WF_STATUS, Q_WF_CANCEL, Q_WF_CODE, Q_WF_NEWRUN, Q_WF_LIST, Q_WF_LIST_STATUS,
  Q_WF_IDS, Q_WF_IDS_FROM, Q_WF_CHILDREN, Q_WF_FORKS, Q_WF_SUBTREE, Q_WF_DEPTH, Q_WF_CHILDREN_RUNNING, Q_WF_CHAIN, Q_WF_HIST_HEAD,
  Q_WF_DOM_HEAD, Q_HIST_APPEND, Q_HIST_LOAD, Q_HIST_GET, Q_HIST_RANGE, Q_HIST_MAX, Q_HIST_OUTCOME, Q_CODE_PUT,
  Q_CODE_GET, Q_MOD_PIN, Q_MOD_GET, Q_MOD_CLEAR, Q_MOD_COPY, Q_FORK_MOD, Q_TASK_PUT, Q_TASK_DEL, Q_TASK_TAKE_HELD, Q_HIST_LOAD_CURRENT, Q_TASK_DEL_WF,
  Q_TASK_RELEASE, Q_TASK_GET, Q_TASK_DUE, Q_TASK_NEXT, Q_TASK_COUNT, Q_SIG_PUT, Q_SIG_FIND, Q_SIG_TAKE, Q_SIG_WAKE,
  Q_SIG_COUNT, Q_SIG_DEL_WF, Q_DOM_LAST, Q_DOM_APPEND, Q_DOM_LIST, Q_FEED_PUT, Q_FEED_AFTER, Q_FEED_LAST,
  Q_WF_PAGE, Q_WF_PAGE_DESC, Q_GROUP_STATUS, Q_GROUP_TASKS, Q_GROUP_LIVE_WITH, Q_LIVE_LIST, Q_GROUP_SLOTS, Q_DATA_VERSION, Q_BUMP, Q_NOTIFY, Q_TXID_STATUS, Q_HIST_APPEND_MANY, Q_WF_HIST_HEAD_MANY, Q_TASK_PUT_MANY, Q_TASK_DEL_MANY, Q_TASK_DEL_WF_MANY, Q_SIG_DEL_WF_MANY, Q_WF_STATUS_MANY,
  Q_COUNT_HIST, Q_META_GET, Q_META_PUT, Q_META_DEL, Q_TOKEN_PUT, Q_TOKEN_REVOKE, Q_TOKEN_LIST, Q_TOKEN_LIVE,
  Q_TOKEN_LIVE_COUNT, Q_SLOT_PUT, Q_SLOT_GET, Q_SLOT_COUNT, Q_SLOT_HEAD, Q_SLOT_HOLD, Q_SLOT_DEL, Q_SLOT_OF_WF,
  Q_SLOT_OF_KEY, Q_SLOT_ALL, Q_CTR_GET, Q_CTR_PUT, Q_CTR_LIST, Q_CTR_LIST_FROM, Q_DLV_PUT, Q_DLV_PRUNE,
  Q_DLV_FIND, Q_DLV_LIST, Q_DLV_LIST_ALL, Q_SCH_INSERT, Q_SCH_UPDATE, Q_SCH_GET, Q_SCH_LIST, Q_SCH_DEL,
  Q_LOCK, Q_LEASE_CLAIM, Q_LEASE_RENEW, Q_LEASE_RELEASE_LIST, Q_LEASE_RELEASE_ALL, Q_LEASE_FENCE, Q_FENCE_OR_ABORT, Q_COMMIT,
  Q_MEM_PUT, Q_MEM_REVOKE, Q_MEM_LIST, Q_BEGIN, Q_TXID, Q_LOCKS_HELD, Q__N
};

/* The text of each statement (pg_sql.c), prepared once per connection when
 * first run (pq_run). */
extern const char *const pg_sql[Q__N];

#define MAXP 32
/* statements a batch sends before it reads their answers. More than a few
 * hundred fit a busy batch (a step is several writes), and each time the
 * queue fills the loop waits a round trip for its answers. While libpq
 * sends it reads what the server answers meanwhile, so a server blocked on
 * answers not yet read never blocks the client (and the answers are a few
 * dozen bytes each); the queue grows as needed up to this */
#define PIPE_MAX 8192

/* Rows of one statement a batch writes many of, sent as one statement of
 * arrays (pg_rows.c): column i's values as an array literal */
#define ROWS_COLS 10
typedef struct pg_rows {
  int q, n; /* the statement of arrays; the rows held */
  const char *what;
  struct rows_col {
    char *buf;
    size_t len, cap;
  } col[ROWS_COLS];
  int ncols;
  size_t bytes;
} pg_rows;

typedef struct pg {
  store base; /* first: the seam (backend.h) */
  PGconn *conn;
  char prepared[Q__N];
  char table_prepared[STORE_TABLES_MAX][STORE_TABLE_STMTS]; /* engine migrate's (store_table_*) */
  int in_txn; /* a batch was begun and not yet committed or rolled back */
  int failed; /* a statement of that batch failed: it is lost, every write fails until store_rollback */
  strmap locked; /* the order locks that batch took (pg_lock_on): class and key */
  int client;  /* that batch was begun by store_begin: a client's check-then-write */
  /* statements sent in pipeline mode whose results are not read yet (pipe_send) */
  struct pipe_entry {
    const char *what; /* for the error */
    char *prepared;   /* a Parse: its flag, cleared again if it did not run */
    PGresult **keep;  /* where its result goes (NULL: checked, then dropped) */
    int soft;         /* its failure fails nothing (pg_pipe_send_soft) */
  } *pipeq;
  int pipe, pipe_cap;
  struct drain { /* the pipeline's answers being read (pg_drain_read) */
    int n, i, phase, lost;
    PGresult *bad;
    const char *what;
  } dr;
  PGresult *commit_res; /* the COMMIT's answer (commit_send) */
  PGresult *read_res;   /* a read's answer behind the batch's writes (pq_exec) */
  PGresult **start_res; /* pg_task_start's answers */
  size_t start_n;       /* for how many tasks */
  PGresult *due_res;    /* pg_task_due_send's answer */
  PGresult *next_res;   /* pg_task_next_send's answer, read after the commit */
  int next_sent;        /* it was sent in the open batch (once per batch) */
  int commit_bumped, flushing; /* flushing: the commit's request is not all sent yet */
  char drain_state[6];    /* the SQLSTATE of the statement a drain found failed ("" if none or lost) */
  const char *drain_what; /* and its what */
  char *fence_ids, *fence_eps; /* fence_params' arrays */
  int64_t xid;            /* the open batch's transaction id: a COMMIT whose answer is lost may have committed */
  PGresult *xid_res;      /* its answer, sent with BEGIN in the batch's pipeline (pg_batch_begin) */
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
  char *fixed[MAXP]; /* pg_bind_text's UTF-8 copies, freed at the next pg_params_start */
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
  pg_rows hist_rows, head_rows; /* the batch's history events and chain heads not sent yet (pg_rows.c) */
  strmap task_ops; /* and its task puts and deletes: the last of each task (pg_rows.c) */
  pg_rows ended_tasks, ended_signals; /* the workflows whose tasks, whose signals it deletes all at once */
  strmap status_ops;  /* and its workflows' status updates: the last of each workflow */
  size_t status_bytes;
  /* before statement q (-1: one of a table's generic statements) is sent,
   * what it could see goes (pg_rows_flush_before, set at open: pg_conn.c
   * sends, pg_rows.c holds) */
  int (*before_send)(struct pg *s, int q);
  PGconn *listen[4]; /* LISTEN engine_commits, one per watcher (store_commit_fd) */
  int listen_fd[4];  /* their sockets as handed out (PQsocket says -1 once one is lost) */
} pg;

/* What one file of the backend uses of another's, by file. */
/* pg_conn.c */
void pg_waited(struct pg *s, const char *what);
void pq_reason(PGconn *c, const PGresult *r, char *out, size_t n);
int pg_classify_state(const char *state);
int pg_classify(const PGresult *r);
int pg_fail_res(pg *s, const char *what, const PGresult *r);
int pg_injected(pg *s, const char *what);
void pg_params_start(pg *s);
void pg_bind_fail(pg *s, size_t len, const char *why);
void pg_bind_text(pg *s, const char *v);
void pg_bind_blob(pg *s, const void *v, size_t n);
void pg_bind_int(pg *s, int64_t v);
void pg_bind_double(pg *s, double v);
void pg_reconnect_if_lost(pg *s);
void pg_announce(pg *s, const char *owner);
void pg_drain_begin(pg *s);
int pg_drain_read(pg *s, int wait);
int pg_drain_end(pg *s, int report);
int pg_pipe_drain(pg *s, int report);
PGresult *pq_exec(pg *s, int q, const char *name, const char *sql, char *prepared, int binary, const char *what);
PGresult *pq_run(pg *s, int q, int binary, const char *what);
int pg_pipe_send_q(pg *s, int q, const char *what, PGresult **keep);
int pg_pipe_send_soft(pg *s, int q, const char *what);
int pg_pipe_send_values(pg *s, int q, int n, const char *const *values, const char *what);
/* pg_rows.c */
int pg_rows_add(pg *s, pg_rows *r, int q_one, int q_many, const char *what);
int pg_rows_flush(pg *s, pg_rows *r);
int pg_rows_status(pg *s);
int pg_rows_tasks_ended(pg *s);
int pg_rows_flush_before(pg *s, int q);
int pg_rows_task(pg *s, int put);
int pg_rows_flush_all(pg *s);
void pg_rows_reset(pg *s);
void pg_rows_free(pg *s);
int pg_exec_write(pg *s, int q, const char *what);
int pg_exec_defer(pg *s, int q, const char *what);
const char *pg_col_text(const PGresult *r, int row, int i);
char *pg_col_dup(const PGresult *r, int row, int i);
int64_t pg_col_int(const PGresult *r, int row, int i);
int pg_query_int(pg *s, int q, int64_t dflt, int64_t *out);
char *pg_prefix_above(const char *prefix);
PGconn *pg_connect_url(const char *url, const char *app, const char *timeout_s, char *where,
                       size_t wherelen, char *err, size_t errlen);
int pg_simple(PGconn *c, const char *sql, char *why, size_t n, int *kind);
int pg_locks_held(pg *s, char *why, size_t n);
int pg_locks_sendable(pg *s);
int pg_locks_check_send(pg *s);
int pg_commit_fd(store *st_, int old);
int pg_commit_drain(store *st_, int fd);
void pg_array_add(char **buf, size_t *len, size_t *cap, const char *v, int quote);

/* pg_batch.c */
void pg_map_reset(strmap *m);
intptr_t pg_lease_epoch(pg *s, const char *wf_id);
void pg_claimed(pg *s, const char *wf_id, int64_t epoch);
int pg_batch_failed(store *st_);
int pg_batch_begin(pg *s);
int pg_lock_on(pg *s, int class_, const char *key, const char *key2);
int pg_begin(store *st_);
int pg_commit(store *st_);
int pg_commit_start(store *st_);
int pg_commit_socket(store *st_, int *writable);
int pg_commit_progress(store *st_);
int pg_commit_settle(store *st_);
int pg_read_start(pg *s);
int pg_read_progress(store *st_);
int pg_read_settle(store *st_);
void pg_rollback(store *st_);
int pg_in_txn(store *st_);
int64_t pg_batch_writes(store *st_);
int64_t pg_round_trips(store *st_);
int64_t pg_data_version(store *st_);

/* pg_workflows.c */
int pg_wf_insert(store *st_, const wf_row *w);
int pg_wf_start(store *st_, const wf_row *w, const hist_event *e, int queue, wf_row *existing);
int pg_wf_start_send(store *st_, const wf_row *w, const hist_event *e, const char *head, store_start **t);
int pg_start_result(store *st_, store_start *t, wf_row *existing);
void pg_start_free(store *st_, store_start *t);
void pg_read_wf(const PGresult *r, int i, wf_row *w);
int pg_wf_get(store *st_, const char *id, wf_row *out);
int pg_wf_set_status(store *st_, const char *id, const char *status, const char *result, const char *error);
int pg_wf_set_cancel(store *st_, const char *id, int cancel);
int pg_wf_set_code(store *st_, const char *id, const char *code_hash, const char *script_name,
                   const char *script_dir);
int pg_wf_new_run(store *st_, const char *id, int64_t run, const char *input);
int pg_wf_list(store *st_, const char *status, store_wf_cb cb, void *ud);
int pg_wf_page(store *st_, const char *status, const char *script, int64_t after_created, const char *after_id,
               int newest_first, int limit, store_wf_cb cb, void *ud);
int pg_wf_ids(store *st_, const char *prefix, const char *statuses, int limit, store_wf_cb cb, void *ud);
int pg_wf_children(store *st_, const char *parent, store_wf_cb cb, void *ud);
int pg_wf_forks(store *st_, const char *source, store_wf_cb cb, void *ud);
int pg_wf_subtree(store *st_, const char *root, int64_t depth, int64_t limit, store_wf_cb cb, void *ud);
int64_t pg_wf_depth(store *st_, const char *id, int64_t cap);
int64_t pg_wf_children_running(store *st_, const char *parent);
int pg_hist_append(store *st_, const char *wf_id, int64_t run, const hist_event *e);
void pg_events_from(const PGresult *r, hist_list *out);
int pg_hist_load(store *st_, const char *wf_id, int64_t run, hist_list *out, chain_state *cs);
int64_t pg_events_run(const PGresult *r);
void pg_chain_from(const PGresult *r, chain_state *cs);
int pg_chain_get(store *st_, const char *wf_id, chain_state *cs);
int pg_chain_send(pg *s, const char *wf_id, PGresult **keep);
int pg_hist_range(store *st_, const char *wf_id, int64_t run, int64_t from_seq, int64_t to_seq, hist_list *out);
int pg_hist_get(store *st_, const char *wf_id, int64_t run, int64_t seq, hist_list *out);
int64_t pg_hist_max_seq(store *st_, const char *wf_id, int64_t run);
int pg_hist_outcome(store *st_, const char *wf_id, int64_t run, int64_t seq);
int pg_code_put(store *st_, const char *hash, const char *name, const char *src, size_t len);
char *pg_code_get(store *st_, const char *hash, size_t *len);
int pg_module_pin(store *st_, const char *wf_id, int64_t run, const char *module, const char *hash);
char *pg_module_get(store *st_, const char *wf_id, int64_t run, const char *module);
int pg_modules_clear(store *st_, const char *wf_id, int64_t run);
int pg_modules_copy(store *st_, const char *wf_id, int64_t from_run, int64_t to_run);
int pg_fork_modules(store *st_, const char *src, int64_t run, const char *dst);
int pg_wf_view(store *st_, const char *id, wf_view *out, store_domain_cb cb, void *ud, chain_state *cs);

/* pg_tasks.c */
int pg_task_put(store *st_, const char *wf_id, const char *kind, int64_t seq, int64_t run_at, int attempt,
                int64_t first_at, const char *owner, int64_t lease_until);
int pg_task_del(store *st_, const char *wf_id, const char *kind, int64_t seq);
int pg_task_take(store *st_, const char *wf_id, const char *kind, int64_t seq);
int pg_task_start(store *st_, const char *owner, int64_t now, int64_t until, task_start *t, size_t n,
                  chain_state *cs);
int pg_task_release(store *st_, const char *owner);
int pg_task_del_wf(store *st_, const char *wf_id);
int pg_task_get(store *st_, const char *wf_id, const char *kind, int64_t seq, task_row *out);
int pg_task_due(store *st_, int64_t now, const char *owner, int limit, int unheld, store_task_cb cb, void *ud);
int pg_task_start_send(store *st_, const char *owner, int64_t now, int64_t until, task_start *t, size_t n);
int pg_task_start_result(store *st_, int rc, task_start *t, size_t n, chain_state *cs);
int pg_task_due_send(store *st_, int64_t now, const char *owner, int limit, int unheld);
int pg_task_due_result(store *st_, int rc, store_task_cb cb, void *ud);
int64_t pg_task_next_at(store *st_, const char *owner);
int pg_task_next_send(store *st_, const char *owner);
int64_t pg_task_next_result(store *st_);
int pg_task_count(store *st_, const char *wf_id);
int pg_lease_claim(store *st_, const char *wf_id, const char *owner, int64_t now, int64_t until);
int pg_lease_held(store *st_, const char *wf_id);
int64_t pg_lease_count(store *st_);
int pg_lease_fence(store *st_, const char *wf_id);
int pg_lease_renew(store *st_, const char *owner, int64_t until, void (*lost)(void *ud, const char *wf_id),
                   void *ud);
int pg_lease_release(store *st_, const char *owner, const char *wf_id);
int pg_signal_put(store *st_, const char *wf_id, const char *name, const char *payload, int64_t time);
int pg_signal_take(store *st_, const char *wf_id, const char *name, char **payload);
int pg_signal_wake(store *st_, const char *wf_id, const char *name, const char *payload, int64_t time);
int pg_signal_has(store *st_, const char *wf_id, const char *name);
int pg_signal_count(store *st_, const char *wf_id);
int pg_signal_del_wf(store *st_, const char *wf_id);

/* pg_records.c */
int64_t pg_domain_append(store *st_, const char *session_id, const char *type, int64_t time,
                         const char *payload);
int pg_domain_list(store *st_, const char *session_id, int64_t from_seq, store_domain_cb cb, void *ud,
                   chain_state *cs);
int pg_feed_after(store *st_, int64_t after_id, int limit, store_feed_cb cb, void *ud);
int64_t pg_feed_last(store *st_);
int pg_meta_get(store *st_, const char *key, char **value);
int pg_meta_put(store *st_, const char *key, const char *value);
int pg_token_put(store *st_, const char *name, const char *hash, unsigned scopes, const char *grants,
                 int64_t created_at);
int pg_token_revoke(store *st_, const char *name, int64_t revoked_at);
int pg_token_list(store *st_, store_token_cb cb, void *ud);
int pg_token_live(store *st_, store_token_cb cb, void *ud);
int64_t pg_token_live_count(store *st_);
int pg_slot_put(store *st_, const char *pool, const char *key, const char *wf_id, int64_t seq, int64_t limit,
                int64_t since);
int pg_slot_get(store *st_, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud);
int pg_slot_head(store *st_, const char *pool, const char *key, store_slot_cb cb, void *ud);
int64_t pg_slot_count(store *st_, const char *pool, const char *key, int held);
int pg_slot_hold(store *st_, const char *wf_id, const char *pool, const char *key, int64_t since);
int pg_slot_del(store *st_, const char *wf_id, const char *pool, const char *key);
int pg_slot_list(store *st_, const char *wf_id, const char *pool, const char *key, store_slot_cb cb,
                 void *ud);
int pg_counter_get(store *st_, const char *name, counter_row *out);
int pg_counter_put(store *st_, const char *name, const counter_row *c);
int pg_counter_list(store *st_, const char *prefix, store_counter_cb cb, void *ud);
int pg_delivery_put(store *st_, const delivery_row *d);
int pg_delivery_find(store *st_, const char *trigger, const char *delivery, store_delivery_cb cb, void *ud);
int pg_delivery_list(store *st_, const char *trigger, int limit, store_delivery_cb cb, void *ud);
int pg_schedule_insert(store *st_, const schedule_row *r);
int pg_schedule_update(store *st_, const schedule_row *r);
int pg_schedule_get(store *st_, const char *name, store_schedule_cb cb, void *ud);
int pg_schedule_list(store *st_, store_schedule_cb cb, void *ud);
int pg_schedule_del(store *st_, const char *name);
int pg_memory_put(store *st_, const memory_row *m);
int pg_memory_revoke(store *st_, const char *id, int64_t at, const char *by, const char *reason);
int pg_memory_list(store *st_, const char *id, const char *kind, const char *identity, int live_only,
                   store_memory_cb cb, void *ud);
int pg_group_count(store *st_, store_group what, const char *const *types,
                   int (*cb)(void *ud, const char *key, int64_t n), void *ud);
int pg_live_list(store *st_, const char *const *types, store_live_cb cb, void *ud);
int64_t pg_count(store *st_, const char *what, const char *wf_id);

/* pg_tables.c */
int pg_table_page(store *st_, const store_table *t, const store_value *after, int limit, store_row_cb cb,
                  void *ud);
int pg_table_insert(store *st_, const store_table *t, const store_value *row, int replace);
int64_t pg_table_count(store *st_, const store_table *t);
int pg_table_finish(store *st_, const store_table *t);

/* every write helper begins the batch first (pg_batch.c) */
#define WRITE_BEGIN(s)                                  \
  do {                                                  \
    if (pg_batch_begin(s) != STORE_OK) return STORE_ERR; \
  } while (0)
/* a write of what is shared across workflows, under the lock of its key (pg_lock_on) */
#define ORDERED_BEGIN(s, class_, key, key2)                                                        \
  do {                                                                                         \
    if (pg_batch_begin(s) != STORE_OK || pg_lock_on(s, class_, key, key2) != STORE_OK) return STORE_ERR; \
  } while (0)
/* a read of it inside a batch: what the batch writes next follows from it */
#define ORDERED_READ(s, class_, key, key2)                                                  \
  do {                                                                                  \
    if (s->in_txn && !s->failed && pg_lock_on(s, class_, key, key2) != STORE_OK) return STORE_ERR; \
  } while (0)

#endif
