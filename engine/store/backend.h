/* The store's seam: a backend (SQLite: sqlite.c and the sqlite_*.c beside
 * it; PostgreSQL: pg.c and the pg_*.c) fills a table of the operations
 * store.h declares, and store.c dispatches to it.
 * A backend's own struct begins with struct store. Only store.c and the
 * backends include this. */
#ifndef ENGINE_STORE_BACKEND_H
#define ENGINE_STORE_BACKEND_H

#include "store.h"
#include "util.h"

struct store {
  const struct store_ops *ops;
  int pending;    /* a commit of store_commit_start, or a read sent without waiting: 1 on its way, 2 answered
                     and not reported yet */
  int pending_read; /* it is a read (store_task_due_send, store_task_start_send) */
  int pending_rc;   /* its result once answered */
  struct chain_cache *chains; /* the heads of the hash chains this store knows (chain.c) */
  char *errbuf;               /* the backend's error message (store_errmsg), for store.c's own errors */
  size_t errlen;
  /* the scripts' hashes whose code this store has put: committed (a start
   * of the same script need not put it again: code rows are never
   * deleted), and put by the batch still open (store.c) */
  strmap code_known, code_open;
};

/* ---- the hash chains (chain.c): what the backends and store.c share ----
 * A workflow's chain columns as its row has them ("" for a NULL head). */
typedef struct chain_state {
  int found; /* the row exists */
  int64_t run;
  char hist_head[65], hist_base[65]; /* the history's last link, and the link its current run's first follows */
  int64_t hist_seq;                  /* the head's seq in the current run (0: none yet) */
  int64_t hist_from_run, hist_from_seq; /* where the history's chain starts (1, 1; later for an upgraded one) */
  char dom_head[65];
  int64_t dom_seq, dom_from;
  /* the events checked against it were read in the same snapshot (op_read_begin):
   * none can have been appended after the head, so one past it is damage */
  int snapshot;
} chain_state;
/* What a check counted, and the last link it computed. */
typedef struct chain_tally {
  int64_t checked, unchained;
  char last[65];
} chain_tally;
/* What event e (its seq, run of wf_id) keeps of its link (its first
 * hex digits, chain.c) into out, its link chained after the workflow's head: the open batch's, or one this store committed when it
 * is the event before; else, with row (the row's chain columns), the row's.
 * 1 linked (the head moves to it, written at the commit), 0 the head is
 * not known: read the row and call again with it; -1 (with row) e is not
 * the event after the row's head: the history is out of step with it. */
int chain_hist_link(store *s, const char *wf_id, int64_t run, const hist_event *e, const chain_state *row,
                    char out[65]);
/* What the first event e of a new workflow keeps of its link (nothing before it), into out;
 * no head moves (chain_hist_link moves it once the event is written). */
void chain_hist_first(const char *wf_id, int64_t run, const hist_event *e, char out[65]);
/* The same, and the head of the chain after it (what chain_flush would write
 * for it; head NULL: not wanted), for a start that writes its head itself
 * (store_wf_start_send). */
void chain_hist_first_head(const char *wf_id, int64_t run, const hist_event *e, char out[65], char head[65]);
/* 1 with the seq and link of the last domain event the open batch appended
 * to session_id, 0 when it appended none (read them from the rows). */
int chain_dom_pending(store *s, const char *session_id, int64_t *seq, char head[65]);
/* What domain event e keeps of its link after prev, into out; the link the batch's head of its session. */
void chain_dom_link(store *s, const domain_event *e, const char *prev, char out[65]);
/* Writes a head the open batch moved into its workflow's head row: domain 0 the
 * history's (head, seq and base), 1 the domain events' (head, seq). */
typedef int (*chain_write_fn)(store *s, const char *wf_id, int domain, const char *head, int64_t seq,
                              const char *base);
/* Before COMMIT: every head the batch moved, through write. */
int chain_flush(store *s, chain_write_fn write);
/* After the commit: the batch's heads are the rows'; after a rollback they are forgotten. */
void chain_committed(store *s);
void chain_rolled_back(store *s);
/* ---- what a store keeps of its batches (batch_end.c) ----
 * A backend's batch ended, committed or rolled back: the chain heads it
 * moved (chain.c) and the code it put are the log's now, or gone with it. */
void store_batch_ended(store *s, int committed);
/* Whether the code of hash was put by this store: committed, or in the open
 * batch (a start of the same script need not put it again). */
int code_cache_has(store *s, const char *hash);
void code_cache_put(store *s, const char *hash);
void code_cache_free(store *s);
void chain_cache_free(store *s);
/* The open batch's own heads over the row's (read inside that batch). */
void chain_overlay(store *s, const char *wf_id, chain_state *cs);
/* Checks run's events h->v[from..] (read after the row cs): dense from 1,
 * each link, and for the current run the head. prev: for a run older than
 * the row's, the last link of the run before it. STORE_OK, or
 * STORE_ECORRUPT with err naming the first bad seq; t (may be NULL) counts
 * and gets the run's last link. */
int chain_check_run(store *s, const char *wf_id, int64_t run, const hist_list *h, size_t from, const chain_state *cs,
                    const char *prev, chain_tally *t, char *err, size_t errlen);
/* A current run read and checked: its head (last, the full link the check
 * computed for its last event) is known to this store. */
void chain_learned(store *s, const char *wf_id, int64_t run, const hist_list *h, const chain_state *cs,
                   const char *last);
/* Checks a session's events v[0..n) (all of them, from #1; read after the
 * row cs). As chain_check_run. */
int chain_check_domain(store *s, const char *session_id, const domain_event *v, size_t n, const chain_state *cs,
                       chain_tally *t, char *err, size_t errlen);

/* Every field is named op_ and, where it serves one store.h function, that
 * function's name without store_ (store_token_revoke: op_token_revoke), so
 * that no field has the name of a public function (tokens.c's token_revoke
 * is not the table's op_token_revoke). */
typedef struct store_ops {
  void (*op_close)(store *s);
  const char *(*op_errmsg)(store *s);
  const char *(*op_path)(store *s);
  int (*op_instance_id)(store *s, char *out, size_t n);
  int (*op_begin)(store *s);
  int (*op_commit)(store *s);
  /* NULL in a backend that commits at once (store.c uses op_commit) */
  int (*op_commit_start)(store *s);
  int (*op_commit_socket)(store *s, int *writable);
  int (*op_commit_progress)(store *s); /* without waiting: STORE_PENDING or the result */
  int (*op_commit_settle)(store *s);   /* waiting: the result */
  /* the same for a read sent without waiting (op_task_due_send, op_task_start_send) */
  int (*op_read_progress)(store *s);
  int (*op_read_settle)(store *s);
  void (*op_rollback)(store *s);
  int (*op_in_txn)(store *s);
  int (*op_batch_failed)(store *s);
  int64_t (*op_batch_writes)(store *s);
  int64_t (*op_round_trips)(store *s); /* NULL: none (an embedded database) */
  int64_t (*op_data_version)(store *s);
  void (*op_wal_stats)(store *s, int64_t *frames, int64_t *checkpoint_ns); /* NULL: no WAL of its own */
  int (*op_checkpoint)(store *s, int64_t *log, int64_t *copied);           /* NULL: none to do */
  int (*op_commit_fd)(store *s, int old); /* NULL: none */
  int (*op_commit_drain)(store *s, int fd);
  int (*op_write_probe)(store *s, char *err, size_t errlen);
  int (*op_clock_skew)(store *s, int64_t *skew_ms, int64_t *rtt_ms); /* NULL: no server */
  int (*op_wf_insert)(store *s, const wf_row *w);
  /* NULL: store.c makes it of op_wf_get, op_wf_insert, op_hist_append and op_task_put
   * (SQLite: the batch's BEGIN IMMEDIATE orders them); e->chain is set */
  int (*op_wf_start)(store *s, const wf_row *w, const hist_event *e, int queue, wf_row *existing);
  /* NULL: starts are not sent ahead (store_can_send_starts); head is the chain's after e */
  int (*op_wf_start_send)(store *s, const wf_row *w, const hist_event *e, const char *head, store_start **t);
  int (*op_start_result)(store *s, store_start *t, wf_row *existing);
  void (*op_start_free)(store *s, store_start *t);
  int (*op_wf_get)(store *s, const char *id, wf_row *out);
  int (*op_wf_set_status)(store *s, const char *id, const char *status, const char *result, const char *error);
  int (*op_wf_set_cancel)(store *s, const char *id, int cancel);
  int (*op_wf_set_code)(store *s, const char *id, const char *code_hash, const char *script_name, const char *script_dir);
  int (*op_wf_new_run)(store *s, const char *id, int64_t run, const char *input);
  int (*op_wf_list)(store *s, const char *status, store_wf_cb cb, void *ud);
  int (*op_wf_page)(store *s, const char *status, const char *script, int64_t after_created, const char *after_id, int newest_first, int limit, store_wf_cb cb, void *ud);
  int (*op_wf_ids)(store *s, const char *prefix, const char *statuses, int limit, store_wf_cb cb, void *ud);
  int (*op_wf_children)(store *s, const char *parent, store_wf_cb cb, void *ud);
  int (*op_wf_forks)(store *s, const char *source, store_wf_cb cb, void *ud);
  int (*op_wf_subtree)(store *s, const char *root, int64_t depth, int64_t limit, store_wf_cb cb, void *ud);
  int64_t (*op_wf_depth)(store *s, const char *id, int64_t cap);
  int64_t (*op_wf_children_running)(store *s, const char *parent);
  /* the modules pinned to src's run, as dst's (store_fork_copy appends the rest) */
  int (*op_fork_modules)(store *s, const char *src, int64_t run, const char *dst);
  int (*op_hist_append)(store *s, const char *wf_id, int64_t run, const hist_event *e);
  /* raw: the rows as they are (store.c checks them); with cs, the
   * workflow's chain columns first (read before the events) */
  int (*op_hist_load)(store *s, const char *wf_id, int64_t run, hist_list *out, chain_state *cs);
  /* the chain columns of workflow wf_id (cs->found 0 when there is no row) */
  int (*op_chain_get)(store *s, const char *wf_id, chain_state *cs);
  /* may be NULL: the reads until op_read_end see one snapshot (SQLite: a read
   * transaction, unless one is open already); *began says to end it */
  int (*op_read_begin)(store *s, int *began);
  void (*op_read_end)(store *s, int began);
  int (*op_hist_range)(store *s, const char *wf_id, int64_t run, int64_t from_seq, int64_t to_seq, hist_list *out);
  int64_t (*op_hist_max_seq)(store *s, const char *wf_id, int64_t run);
  int (*op_hist_outcome)(store *s, const char *wf_id, int64_t run, int64_t seq);
  int (*op_hist_get)(store *s, const char *wf_id, int64_t run, int64_t seq, hist_list *out);
  int (*op_code_put)(store *s, const char *hash, const char *name, const char *src, size_t len);
  char *(*op_code_get)(store *s, const char *hash, size_t *len);
  int (*op_module_pin)(store *s, const char *wf_id, int64_t run, const char *module, const char *hash);
  char *(*op_module_get)(store *s, const char *wf_id, int64_t run, const char *module);
  int (*op_modules_clear)(store *s, const char *wf_id, int64_t run);
  int (*op_modules_copy)(store *s, const char *wf_id, int64_t from_run, int64_t to_run);
  int (*op_task_put)(store *s, const char *wf_id, const char *kind, int64_t seq, int64_t run_at, int attempt, int64_t first_at, const char *owner, int64_t lease_until);
  int (*op_task_del)(store *s, const char *wf_id, const char *kind, int64_t seq);
  int (*op_task_take)(store *s, const char *wf_id, const char *kind, int64_t seq);
  /* NULL: store.c makes it of op_lease_claim, op_task_take, op_wf_get and op_hist_load;
   * cs[i]: task i's chain columns when it reads history (raw, as op_hist_load) */
  int (*op_task_start)(store *s, const char *owner, int64_t now, int64_t until, task_start *t, size_t n,
                       chain_state *cs);
  /* NULL: the dispatch waits for its answers (op_task_start, op_task_due). Else
   * sent without waiting: STORE_PENDING (the read is on its way, as a commit
   * of op_commit_start is) or an error; once it is answered, the _result op
   * reads what arrived (rc: the read's result; on an error it frees them) */
  int (*op_task_start_send)(store *s, const char *owner, int64_t now, int64_t until, task_start *t, size_t n);
  int (*op_task_start_result)(store *s, int rc, task_start *t, size_t n, chain_state *cs);
  int (*op_task_due_send)(store *s, int64_t now, const char *owner, int limit, int unheld);
  int (*op_task_due_result)(store *s, int rc, store_task_cb cb, void *ud);
  int (*op_task_release)(store *s, const char *owner);
  int (*op_task_del_wf)(store *s, const char *wf_id);
  int (*op_task_get)(store *s, const char *wf_id, const char *kind, int64_t seq, task_row *out);
  int (*op_task_due)(store *s, int64_t now, const char *owner, int limit, int unheld, store_task_cb cb, void *ud);
  int64_t (*op_task_next_at)(store *s, const char *owner);
  /* NULL: the next due time is asked at once (store_task_next_send) */
  int (*op_task_next_send)(store *s, const char *owner);
  int64_t (*op_task_next_result)(store *s);
  int (*op_task_count)(store *s, const char *wf_id);
  /* leases: NULL in a backend one worker holds (store.c answers for it) */
  int (*op_lease_claim)(store *s, const char *wf_id, const char *owner, int64_t now, int64_t until);
  int (*op_lease_held)(store *s, const char *wf_id);
  int64_t (*op_lease_count)(store *s);
  int (*op_lease_fence)(store *s, const char *wf_id);
  int (*op_lease_renew)(store *s, const char *owner, int64_t until, void (*lost)(void *ud, const char *wf_id), void *ud);
  int (*op_lease_release)(store *s, const char *owner, const char *wf_id);
  int (*op_signal_put)(store *s, const char *wf_id, const char *name, const char *payload, int64_t time);
  int (*op_signal_take)(store *s, const char *wf_id, const char *name, char **payload);
  int (*op_signal_wake)(store *s, const char *wf_id, const char *name, const char *payload, int64_t time);
  int (*op_signal_count)(store *s, const char *wf_id);
  int (*op_signal_has)(store *s, const char *wf_id, const char *name);
  int (*op_signal_del_wf)(store *s, const char *wf_id);
  int64_t (*op_domain_append)(store *s, const char *session_id, const char *type, int64_t time, const char *payload);
  /* raw, from seq from_seq on (>=); with cs, the chain columns first */
  int (*op_domain_list)(store *s, const char *session_id, int64_t from_seq, store_domain_cb cb, void *ud,
                        chain_state *cs);
  /* NULL: store.c makes it of op_chain_get, op_wf_get, op_hist_load, op_task_count, op_signal_count and
   * op_domain_list; raw as they are, the chain columns into cs */
  int (*op_wf_view)(store *s, const char *id, wf_view *out, store_domain_cb cb, void *ud, chain_state *cs);
  int (*op_feed_after)(store *s, int64_t after_id, int limit, store_feed_cb cb, void *ud);
  int64_t (*op_feed_last)(store *s);
  int (*op_meta_get)(store *s, const char *key, char **value);
  int (*op_meta_put)(store *s, const char *key, const char *value);
  int (*op_token_put)(store *s, const char *name, const char *hash, unsigned scopes, const char *grants,
                      int64_t created_at);
  int (*op_token_revoke)(store *s, const char *name, int64_t revoked_at);
  int (*op_token_list)(store *s, store_token_cb cb, void *ud);
  int (*op_token_live)(store *s, store_token_cb cb, void *ud);
  int64_t (*op_token_live_count)(store *s);
  int (*op_slot_put)(store *s, const char *pool, const char *key, const char *wf_id, int64_t seq, int64_t limit, int64_t since);
  int (*op_slot_get)(store *s, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud);
  int (*op_slot_head)(store *s, const char *pool, const char *key, store_slot_cb cb, void *ud);
  int64_t (*op_slot_count)(store *s, const char *pool, const char *key, int held);
  int (*op_slot_hold)(store *s, const char *wf_id, const char *pool, const char *key, int64_t since);
  int (*op_slot_del)(store *s, const char *wf_id, const char *pool, const char *key);
  int (*op_slot_list)(store *s, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud);
  int (*op_table_page)(store *s, const store_table *t, const store_value *after, int limit, store_row_cb cb, void *ud);
  int (*op_table_insert)(store *s, const store_table *t, const store_value *row, int replace);
  int64_t (*op_table_count)(store *s, const store_table *t);
  int (*op_table_finish)(store *s, const store_table *t);
  int (*op_counter_get)(store *s, const char *name, counter_row *out);
  int (*op_counter_put)(store *s, const char *name, const counter_row *c);
  int (*op_counter_list)(store *s, const char *prefix, store_counter_cb cb, void *ud);
  int (*op_delivery_put)(store *s, const delivery_row *d);
  int (*op_delivery_find)(store *s, const char *trigger, const char *delivery, store_delivery_cb cb, void *ud);
  int (*op_delivery_list)(store *s, const char *trigger, int limit, store_delivery_cb cb, void *ud);
  int (*op_schedule_insert)(store *s, const schedule_row *r);
  int (*op_schedule_update)(store *s, const schedule_row *r);
  int (*op_schedule_get)(store *s, const char *name, store_schedule_cb cb, void *ud);
  int (*op_schedule_list)(store *s, store_schedule_cb cb, void *ud);
  int (*op_schedule_del)(store *s, const char *name);
  int (*op_group_count)(store *s, store_group what, const char *const *types,
                        int (*cb)(void *ud, const char *key, int64_t n), void *ud);
  int (*op_live_list)(store *s, const char *const *types, store_live_cb cb, void *ud);
  int64_t (*op_count)(store *s, const char *what, const char *wf_id);
  int (*op_memory_put)(store *s, const memory_row *m);
  int (*op_memory_revoke)(store *s, const char *id, int64_t at, const char *by, const char *reason);
  int (*op_memory_list)(store *s, const char *id, const char *kind, const char *identity, int live_only,
                        store_memory_cb cb, void *ud);
} store_ops;

/* ENGINE_STORE_FAIL (crash.h): 1 when this write (named by what, e.g.
 * "append history") is to fail as an I/O error does, in every backend alike. */
int store_fault_hit(const char *what);

/* What both backends read alike (shared.c): ENGINE_BUSY_TIMEOUT_MS (ms a
 * write waits for a lock; 5000 when unset), and ENGINE_STORE_MAX_LENGTH (the
 * longest value a parameter takes, for tests; 0 when unset). */
int store_busy_timeout_ms(void);
int store_max_length(void);
/* 1 when a delivery of this outcome holds its (trigger, delivery id) key
 * (store_delivery_put). */
int store_delivery_accepted(const char *outcome);

/* SQLite (sqlite.c): a database file. */
extern const store_ops store_sqlite_ops;
int store_sqlite_open(const char *path, int must_exist, store **out, char *err, size_t errlen);
int store_sqlite_open_readonly(const char *path, int busy_ms, store **out, char *err, size_t errlen);

/* PostgreSQL (pg.c): a database URL, postgres:// or postgresql://. */
extern const store_ops store_pg_ops;
int store_pg_open(const char *url, int must_exist, const char *app, store **out, char *err, size_t errlen);
int store_pg_open_readonly(const char *url, int busy_ms, store **out, char *err, size_t errlen);
/* The worker lock of a PostgreSQL database (store_remote_lock; pg_conn.c). */
int store_pg_lock(const char *url, const char *mode, char *holder, size_t holderlen);
int store_pg_unlock(int fd);

/* The statements of store_table_* for table t, built alike for both
 * backends ($N parameters; pg: PostgreSQL's names and upsert), malloc'd;
 * NULL when the backend needs none. FIRST takes the limit ($1), AFTER the
 * key values and the limit, INSERT and REPLACE every column. */
typedef enum { STORE_TABLE_FIRST, STORE_TABLE_AFTER, STORE_TABLE_INSERT, STORE_TABLE_REPLACE, STORE_TABLE_COUNT,
               STORE_TABLE_SERIAL } store_table_stmt;
#define STORE_TABLE_STMTS 6
char *store_table_sql(const store_table *t, store_table_stmt what, int pg);

#endif
