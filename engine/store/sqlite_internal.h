/* sqlite_internal: what the files of the SQLite backend share; sqlite.c
 * has the overview and says which file holds what. Included by them alone. */
#ifndef ENGINE_STORE_SQLITE_INTERNAL_H
#define ENGINE_STORE_SQLITE_INTERNAL_H

#include "backend.h"

#include <sqlite3.h>
#include <stdint.h>

#include "util.h"

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
  Q_WF_CHILDREN,
  Q_WF_FORKS,
  Q_WF_SUBTREE,
  Q_WF_DEPTH,
  Q_WF_CHILDREN_RUNNING,
  Q_WF_CHAIN,
  Q_WF_HIST_HEAD,
  Q_WF_DOM_HEAD,
  Q_WF_HIST_HEAD_NEW,
  Q_WF_DOM_HEAD_NEW,
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
  Q_FORK_MOD,
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
  Q_SIG_WAKE_PUT,
  Q_SIG_WAKE_TASK,
  Q_SIG_COUNT,
  Q_SIG_DEL_WF,
  Q_DOM_LAST,
  Q_DOM_APPEND,
  Q_DOM_LIST,
  Q_FEED_PUT,
  Q_FEED_AFTER,
  Q_FEED_LAST,
  Q_WF_PAGE,
  Q_WF_PAGE_DESC,
  Q_GROUP_STATUS,
  Q_GROUP_TASKS,
  Q_GROUP_LIVE_WITH,
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
  Q_MEM_PUT,
  Q_MEM_REVOKE,
  Q_MEM_LIST,
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

/* The text of each statement (sqlite_sql.c), prepared once when first run
 * (sq_stmt). */
extern const char *const sq_sql[Q__N];

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
   * failure of the statement being bound, sq_step() returns it instead of
   * running, sq_fail() names it. sq_stmt() starts each statement clean. */
  int bind_rc;
  char bind_err[192];
  /* the WAL as the last commit left it (sq_on_wal_commit): frames in it, and
   * the ns a checkpoint took inside that commit (store_wal_stats) */
  int64_t wal_frames, commit_checkpoint_ns;
  char sync[16];    /* PRAGMA synchronous, for the checkpoint's connection too */
  sqlite3 *ckpt_db; /* store_checkpoint's own connection, used by one thread at a time */
} sq;

/* What one file of the backend uses of another's, by file. */
/* sqlite_exec.c */
int sq_fail(sq *s, const char *what);
int sq_fail_read(sq *s, const char *what);
void sq_bind_check(sq *s, int rc, int i, size_t len);
void sq_bind_int(sq *s, sqlite3_stmt *st, int i, int64_t v);
void sq_bind_blob(sq *s, sqlite3_stmt *st, int i, const void *v, size_t n);
void sq_bind_text(sq *s, sqlite3_stmt *st, int i, const char *v);
int sq_step(sq *s, sqlite3_stmt *st);
sqlite3_stmt *sq_stmt(sq *s, int q);
char *sq_col_dup(sqlite3_stmt *st, int i);
const char *sq_col_text(sqlite3_stmt *st, int i);
int sq_exec_write(sq *s, sqlite3_stmt *st, const char *what);
int sq_query_int(sq *s, sqlite3_stmt *st, int64_t dflt, int64_t *out);
int sq_classify(int rc);
int sq_begin(store *st_);
int sq_commit(store *st_);
int64_t sq_batch_writes(store *st_);
void sq_rollback(store *st_);
int sq_in_txn(store *st_);
int sq_batch_failed(store *st_);
int64_t sq_data_version(store *st_);

/* sqlite_wal.c */
int sq_on_wal_commit(void *ud, sqlite3 *db, const char *name, int frames);
void sq_wal_stats(store *st_, int64_t *frames, int64_t *checkpoint_ns);
int sq_checkpoint(store *st_, int64_t *log, int64_t *copied);

/* sqlite_workflows.c */
int sq_wf_insert(store *st_, const wf_row *w);
int sq_wf_get(store *st_, const char *id, wf_row *out);
int sq_wf_set_status(store *st_, const char *id, const char *status, const char *result, const char *error);
int sq_wf_set_cancel(store *st_, const char *id, int cancel);
int sq_wf_set_code(store *st_, const char *id, const char *code_hash, const char *script_name,
                   const char *script_dir);
int sq_wf_new_run(store *st_, const char *id, int64_t run, const char *input);
int sq_wf_page(store *st_, const char *status, const char *script, int64_t after_created, const char *after_id,
               int newest_first, int limit, store_wf_cb cb, void *ud);
int sq_wf_list(store *st_, const char *status, store_wf_cb cb, void *ud);
int sq_wf_ids(store *st_, const char *prefix, const char *statuses, int limit, store_wf_cb cb, void *ud);
int sq_wf_children(store *st_, const char *parent, store_wf_cb cb, void *ud);
int sq_wf_forks(store *st_, const char *source, store_wf_cb cb, void *ud);
int sq_wf_subtree(store *st_, const char *root, int64_t depth, int64_t limit, store_wf_cb cb, void *ud);
int64_t sq_wf_depth(store *st_, const char *id, int64_t cap);
int64_t sq_wf_children_running(store *st_, const char *parent);
int sq_hist_append(store *st_, const char *wf_id, int64_t run, const hist_event *e);
int sq_hist_load(store *st_, const char *wf_id, int64_t run, hist_list *out, chain_state *cs);
int sq_chain_get(store *st_, const char *wf_id, chain_state *cs);
int sq_read_begin(store *st_, int *began);
void sq_read_end(store *st_, int began);
int sq_hist_range(store *st_, const char *wf_id, int64_t run, int64_t from_seq, int64_t to_seq, hist_list *out);
int sq_hist_get(store *st_, const char *wf_id, int64_t run, int64_t seq, hist_list *out);
int64_t sq_hist_max_seq(store *st_, const char *wf_id, int64_t run);
int sq_hist_outcome(store *st_, const char *wf_id, int64_t run, int64_t seq);
int sq_code_put(store *st_, const char *hash, const char *name, const char *src, size_t len);
char *sq_code_get(store *st_, const char *hash, size_t *len);
int sq_module_pin(store *st_, const char *wf_id, int64_t run, const char *module, const char *hash);
char *sq_module_get(store *st_, const char *wf_id, int64_t run, const char *module);
int sq_modules_clear(store *st_, const char *wf_id, int64_t run);
int sq_modules_copy(store *st_, const char *wf_id, int64_t from_run, int64_t to_run);
int sq_fork_modules(store *st_, const char *src, int64_t run, const char *dst);

/* sqlite_tasks.c */
int sq_task_put(store *st_, const char *wf_id, const char *kind, int64_t seq, int64_t run_at, int attempt,
                int64_t first_at, const char *owner, int64_t lease_until);
int sq_task_del(store *st_, const char *wf_id, const char *kind, int64_t seq);
int sq_task_take(store *st_, const char *wf_id, const char *kind, int64_t seq);
int sq_task_release(store *st_, const char *owner);
int sq_task_del_wf(store *st_, const char *wf_id);
int sq_task_get(store *st_, const char *wf_id, const char *kind, int64_t seq, task_row *out);
int sq_task_due(store *st_, int64_t now, const char *owner, int limit, int unheld, store_task_cb cb, void *ud);
int64_t sq_task_next_at(store *st_, const char *owner);
int sq_task_count(store *st_, const char *wf_id);
int sq_signal_put(store *st_, const char *wf_id, const char *name, const char *payload, int64_t time);
int sq_signal_take(store *st_, const char *wf_id, const char *name, char **payload);
int sq_signal_wake(store *st_, const char *wf_id, const char *name, const char *payload, int64_t time);
int sq_signal_has(store *st_, const char *wf_id, const char *name);
int sq_signal_count(store *st_, const char *wf_id);
int sq_signal_del_wf(store *st_, const char *wf_id);

/* sqlite_records.c */
int64_t sq_domain_append(store *st_, const char *session_id, const char *type, int64_t time, const char *payload);
int sq_feed_after(store *st_, int64_t after_id, int limit, store_feed_cb cb, void *ud);
int64_t sq_feed_last(store *st_);
int sq_domain_list(store *st_, const char *session_id, int64_t from_seq, store_domain_cb cb, void *ud, chain_state *cs);
int sq_meta_get(store *st_, const char *key, char **value);
int sq_meta_put(store *st_, const char *key, const char *value);
int sq_token_put(store *st_, const char *name, const char *hash, unsigned scopes, const char *grants,
                 int64_t created_at);
int sq_token_revoke(store *st_, const char *name, int64_t revoked_at);
int sq_token_list(store *st_, store_token_cb cb, void *ud);
int sq_token_live(store *st_, store_token_cb cb, void *ud);
int64_t sq_token_live_count(store *st_);
int sq_slot_put(store *st_, const char *pool, const char *key, const char *wf_id, int64_t seq, int64_t limit,
                int64_t since);
int sq_slot_get(store *st_, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud);
int sq_slot_head(store *st_, const char *pool, const char *key, store_slot_cb cb, void *ud);
int64_t sq_slot_count(store *st_, const char *pool, const char *key, int held);
int sq_slot_hold(store *st_, const char *wf_id, const char *pool, const char *key, int64_t since);
int sq_slot_del(store *st_, const char *wf_id, const char *pool, const char *key);
int sq_slot_list(store *st_, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud);
int sq_counter_get(store *st_, const char *name, counter_row *out);
int sq_counter_put(store *st_, const char *name, const counter_row *c);
int sq_counter_list(store *st_, const char *prefix, store_counter_cb cb, void *ud);
int sq_delivery_put(store *st_, const delivery_row *d);
int sq_delivery_find(store *st_, const char *trigger, const char *delivery, store_delivery_cb cb, void *ud);
int sq_delivery_list(store *st_, const char *trigger, int limit, store_delivery_cb cb, void *ud);
int sq_schedule_insert(store *st_, const schedule_row *r);
int sq_schedule_update(store *st_, const schedule_row *r);
int sq_schedule_get(store *st_, const char *name, store_schedule_cb cb, void *ud);
int sq_schedule_list(store *st_, store_schedule_cb cb, void *ud);
int sq_schedule_del(store *st_, const char *name);
int sq_memory_put(store *st_, const memory_row *m);
int sq_memory_revoke(store *st_, const char *id, int64_t at, const char *by, const char *reason);
int sq_memory_list(store *st_, const char *id, const char *kind, const char *identity, int live_only,
                   store_memory_cb cb, void *ud);
int sq_group_count(store *st_, store_group what, const char *const *types,
                   int (*cb)(void *ud, const char *key, int64_t n), void *ud);
int sq_live_list(store *st_, const char *const *types, store_live_cb cb, void *ud);
int64_t sq_count(store *st_, const char *what, const char *wf_id);

/* sqlite_tables.c */
int sq_table_page(store *st_, const store_table *t, const store_value *after, int limit, store_row_cb cb,
                  void *ud);
int sq_table_insert(store *st_, const store_table *t, const store_value *row, int replace);
int64_t sq_table_count(store *st_, const store_table *t);
int sq_table_finish(store *st_, const store_table *t);

/* Every write helper makes sure a transaction is open first. */
#define WRITE_BEGIN(s)                             \
  do {                                             \
    if (sq_begin(&s->base) != STORE_OK) return STORE_ERR; \
  } while (0)

#endif
