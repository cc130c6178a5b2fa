/* store: what store.h declares, dispatched to the backend that opened the
 * store (backend.h). */
#include "store.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"

#include <string.h>

#include "crash.h"
#include "util.h"

/* A commit of store_commit_start still on its way is answered before
 * anything else uses the connection (its result stays for store_commit_poll). */
static void settle(store *s) {
  s->pending_rc = s->ops->op_commit_settle(s);
  s->pending = 2;
}
#define SETTLE(s)                       \
  do {                                  \
    if ((s)->pending == 1) settle(s); \
  } while (0)

int store_open(const char *path, int must_exist, store **out, char *err, size_t errlen) {
  if (store_is_url(path)) return store_pg_open(path, must_exist, out, err, errlen);
  return store_sqlite_open(path, must_exist, out, err, errlen);
}

int store_open_readonly(const char *path, int busy_ms, store **out, char *err, size_t errlen) {
  if (store_is_url(path)) return store_pg_open_readonly(path, busy_ms, out, err, errlen);
  return store_sqlite_open_readonly(path, busy_ms, out, err, errlen);
}

int store_schema_version(const char *path) {
  return store_is_url(path) ? STORE_PG_SCHEMA_VERSION : STORE_SQLITE_SCHEMA_VERSION;
}

int store_write_probe(store *s, char *err, size_t errlen) { SETTLE(s); return s->ops->op_write_probe(s, err, errlen); }

int store_clock_skew(store *s, int64_t *skew_ms, int64_t *rtt_ms) {
  *skew_ms = *rtt_ms = 0;
  if (!s->ops->op_clock_skew) return 1;
  SETTLE(s);
  return s->ops->op_clock_skew(s, skew_ms, rtt_ms);
}

void store_close(store *s) {
  if (!s) return;
  SETTLE(s);
  s->ops->op_close(s);
}

const char *store_errmsg(store *s) { return s->ops->op_errmsg(s); }

const char *store_path(store *s) { return s->ops->op_path(s); }

int store_instance_id(store *s, char *out, size_t n) { SETTLE(s); return s->ops->op_instance_id(s, out, n); }

int store_begin(store *s) { SETTLE(s); return s->ops->op_begin(s); }

int store_commit(store *s) { SETTLE(s); return s->ops->op_commit(s); }

int store_commit_start(store *s) {
  SETTLE(s);
  if (!s->ops->op_commit_start) return s->ops->op_commit(s);
  int rc = s->ops->op_commit_start(s);
  if (rc == STORE_PENDING) s->pending = 1;
  return rc;
}

int store_commit_socket(store *s, int *writable) {
  *writable = 0;
  return s->pending == 1 ? s->ops->op_commit_socket(s, writable) : -1;
}

int store_commit_poll(store *s) {
  if (s->pending == 1) {
    int rc = s->ops->op_commit_progress(s);
    if (rc == STORE_PENDING) return rc;
    s->pending_rc = rc;
    s->pending = 2;
  }
  if (s->pending != 2) return STORE_OK;
  s->pending = 0;
  return s->pending_rc;
}

int store_commit_wait(store *s) {
  SETTLE(s);
  return store_commit_poll(s);
}

void store_rollback(store *s) { SETTLE(s); s->ops->op_rollback(s); }

int store_in_txn(store *s) { SETTLE(s); return s->ops->op_in_txn(s); }

int store_batch_failed(store *s) { SETTLE(s); return s->ops->op_batch_failed(s); }

int64_t store_batch_writes(store *s) { SETTLE(s); return s->ops->op_batch_writes(s); }

int64_t store_round_trips(store *s) { return s->ops->op_round_trips ? s->ops->op_round_trips(s) : 0; }

int64_t store_data_version(store *s) { SETTLE(s); return s->ops->op_data_version(s); }
void store_wal_stats(store *s, int64_t *frames, int64_t *checkpoint_ns) {
  *frames = *checkpoint_ns = 0;
  if (s->ops->op_wal_stats) s->ops->op_wal_stats(s, frames, checkpoint_ns);
}
/* no SETTLE: it runs on another thread, beside the store's own calls */
int store_checkpoint(store *s, int64_t *log, int64_t *copied) {
  *log = *copied = 0;
  return s->ops->op_checkpoint ? s->ops->op_checkpoint(s, log, copied) : STORE_OK;
}
int store_commit_fd(store *s, int old) { return s->ops->op_commit_fd ? s->ops->op_commit_fd(s, old) : -1; }
int store_commit_drain(store *s, int fd) { return s->ops->op_commit_drain ? s->ops->op_commit_drain(s, fd) : 0; }

int store_wf_insert(store *s, const wf_row *w) { SETTLE(s); return s->ops->op_wf_insert(s, w); }

int store_wf_get(store *s, const char *id, wf_row *out) { SETTLE(s); return s->ops->op_wf_get(s, id, out); }

int store_wf_set_status(store *s, const char *id, const char *status, const char *result, const char *error) { SETTLE(s); return s->ops->op_wf_set_status(s, id, status, result, error); }

int store_wf_set_cancel(store *s, const char *id, int cancel) { SETTLE(s); return s->ops->op_wf_set_cancel(s, id, cancel); }

int store_wf_set_code(store *s, const char *id, const char *code_hash, const char *script_name, const char *script_dir) { SETTLE(s); return s->ops->op_wf_set_code(s, id, code_hash, script_name, script_dir); }

int store_wf_new_run(store *s, const char *id, int64_t run, const char *input) { SETTLE(s); return s->ops->op_wf_new_run(s, id, run, input); }

int store_wf_list(store *s, const char *status, store_wf_cb cb, void *ud) { SETTLE(s); return s->ops->op_wf_list(s, status, cb, ud); }

int store_wf_page(store *s, const char *status, const char *script, int64_t after_created, const char *after_id, int newest_first, int limit, store_wf_cb cb, void *ud) { SETTLE(s); return s->ops->op_wf_page(s, status, script, after_created, after_id, newest_first, limit, cb, ud); }

int store_wf_ids(store *s, const char *prefix, const char *statuses, int limit, store_wf_cb cb, void *ud) { SETTLE(s); return s->ops->op_wf_ids(s, prefix, statuses, limit, cb, ud); }
int store_wf_children(store *s, const char *parent, store_wf_cb cb, void *ud) { SETTLE(s); return s->ops->op_wf_children(s, parent, cb, ud); }
int store_wf_forks(store *s, const char *source, store_wf_cb cb, void *ud) { SETTLE(s); return s->ops->op_wf_forks(s, source, cb, ud); }
int store_wf_subtree(store *s, const char *root, int64_t depth, int64_t limit, store_wf_cb cb, void *ud) { SETTLE(s); return s->ops->op_wf_subtree(s, root, depth, limit, cb, ud); }
int64_t store_wf_depth(store *s, const char *id, int64_t cap) { SETTLE(s); return s->ops->op_wf_depth(s, id, cap); }
int64_t store_wf_children_running(store *s, const char *parent) { SETTLE(s); return s->ops->op_wf_children_running(s, parent); }

int store_hist_append(store *s, const char *wf_id, int64_t run, const hist_event *e) { SETTLE(s); return s->ops->op_hist_append(s, wf_id, run, e); }

int store_hist_load(store *s, const char *wf_id, int64_t run, hist_list *out) { SETTLE(s); return s->ops->op_hist_load(s, wf_id, run, out); }

int store_hist_range(store *s, const char *wf_id, int64_t run, int64_t from_seq, int64_t to_seq, hist_list *out) {
  SETTLE(s);
  return s->ops->op_hist_range(s, wf_id, run, from_seq, to_seq, out);
}

int64_t store_hist_max_seq(store *s, const char *wf_id, int64_t run) { SETTLE(s); return s->ops->op_hist_max_seq(s, wf_id, run); }

int store_hist_outcome(store *s, const char *wf_id, int64_t run, int64_t seq) { SETTLE(s); return s->ops->op_hist_outcome(s, wf_id, run, seq); }

int store_hist_get(store *s, const char *wf_id, int64_t run, int64_t seq, hist_list *out) { SETTLE(s); return s->ops->op_hist_get(s, wf_id, run, seq, out); }

int store_code_put(store *s, const char *hash, const char *name, const char *src, size_t len) { SETTLE(s); return s->ops->op_code_put(s, hash, name, src, len); }

char *store_code_get(store *s, const char *hash, size_t *len) { SETTLE(s); return s->ops->op_code_get(s, hash, len); }

int store_module_pin(store *s, const char *wf_id, int64_t run, const char *module, const char *hash) { SETTLE(s); return s->ops->op_module_pin(s, wf_id, run, module, hash); }

char *store_module_get(store *s, const char *wf_id, int64_t run, const char *module) { SETTLE(s); return s->ops->op_module_get(s, wf_id, run, module); }

int store_modules_clear(store *s, const char *wf_id, int64_t run) { SETTLE(s); return s->ops->op_modules_clear(s, wf_id, run); }

int store_modules_copy(store *s, const char *wf_id, int64_t from_run, int64_t to_run) { SETTLE(s); return s->ops->op_modules_copy(s, wf_id, from_run, to_run); }

int store_fork_copy(store *s, const char *src, int64_t run, int64_t hist_from, int64_t hist_to, int64_t domain_to, int modules, const char *dst) { SETTLE(s); return s->ops->op_fork_copy(s, src, run, hist_from, hist_to, domain_to, modules, dst); }

int store_task_put(store *s, const char *wf_id, const char *kind, int64_t seq, int64_t run_at, int attempt, int64_t first_at, const char *owner, int64_t lease_until) { SETTLE(s); return s->ops->op_task_put(s, wf_id, kind, seq, run_at, attempt, first_at, owner, lease_until); }

int store_task_del(store *s, const char *wf_id, const char *kind, int64_t seq) { SETTLE(s); return s->ops->op_task_del(s, wf_id, kind, seq); }

int store_task_take(store *s, const char *wf_id, const char *kind, int64_t seq) { SETTLE(s); return s->ops->op_task_take(s, wf_id, kind, seq); }

static int task_start_one(store *s, const char *owner, int64_t now, int64_t until, task_start *t) {
  int rc = t->claim && s->ops->op_lease_claim ? s->ops->op_lease_claim(s, t->wf_id, owner, now, until) : 1;
  if (rc <= 0) return rc;
  t->owned = 1;
  if ((rc = s->ops->op_task_take(s, t->wf_id, t->kind, t->seq)) <= 0) return rc;
  t->took = 1;
  if ((rc = s->ops->op_wf_get(s, t->wf_id, &t->w)) <= 0) return rc;
  t->found = 1;
  return t->history ? s->ops->op_hist_load(s, t->wf_id, t->w.run, &t->h) : STORE_OK;
}

int store_task_start(store *s, const char *owner, int64_t now, int64_t until, task_start *t, size_t n) {
  SETTLE(s);
  for (size_t i = 0; i < n; i++) {
    t[i].owned = t[i].took = t[i].found = 0;
    memset(&t[i].w, 0, sizeof t[i].w);
    memset(&t[i].h, 0, sizeof t[i].h);
  }
  if (s->ops->op_task_start) return s->ops->op_task_start(s, owner, now, until, t, n);
  for (size_t i = 0; i < n; i++) {
    int rc = task_start_one(s, owner, now, until, &t[i]);
    if (rc < 0) return rc;
  }
  return STORE_OK;
}

void store_task_start_free(task_start *t) {
  if (t->found) wf_row_free(&t->w);
  hist_list_free(&t->h);
  t->found = 0;
}

int store_task_release(store *s, const char *owner) { SETTLE(s); return s->ops->op_task_release(s, owner); }

int store_task_del_wf(store *s, const char *wf_id) { SETTLE(s); return s->ops->op_task_del_wf(s, wf_id); }

int store_task_get(store *s, const char *wf_id, const char *kind, int64_t seq, task_row *out) { SETTLE(s); return s->ops->op_task_get(s, wf_id, kind, seq, out); }

int store_task_due(store *s, int64_t now, const char *owner, int limit, int unheld, store_task_cb cb, void *ud) { SETTLE(s); return s->ops->op_task_due(s, now, owner, limit, unheld, cb, ud); }

int64_t store_task_next_at(store *s, const char *owner) { SETTLE(s); return s->ops->op_task_next_at(s, owner); }

int store_shared(store *s) { return s->ops->op_lease_claim != NULL; }
int store_lease_claim(store *s, const char *wf_id, const char *owner, int64_t now, int64_t until) {
  SETTLE(s);
  return s->ops->op_lease_claim ? s->ops->op_lease_claim(s, wf_id, owner, now, until) : 1;
}
int store_lease_held(store *s, const char *wf_id) { return s->ops->op_lease_held ? s->ops->op_lease_held(s, wf_id) : 1; }
int64_t store_lease_count(store *s) { return s->ops->op_lease_count ? s->ops->op_lease_count(s) : 0; }
int store_lease_fence(store *s, const char *wf_id) {
  SETTLE(s);
  return s->ops->op_lease_fence ? s->ops->op_lease_fence(s, wf_id) : STORE_OK;
}
int store_lease_renew(store *s, const char *owner, int64_t until, void (*lost)(void *ud, const char *wf_id),
                      void *ud) {
  SETTLE(s);
  return s->ops->op_lease_renew ? s->ops->op_lease_renew(s, owner, until, lost, ud) : STORE_OK;
}
int store_lease_release(store *s, const char *owner, const char *wf_id) {
  SETTLE(s);
  return s->ops->op_lease_release ? s->ops->op_lease_release(s, owner, wf_id) : STORE_OK;
}

int store_task_count(store *s, const char *wf_id) { SETTLE(s); return s->ops->op_task_count(s, wf_id); }

int store_signal_put(store *s, const char *wf_id, const char *name, const char *payload, int64_t time) { SETTLE(s); return s->ops->op_signal_put(s, wf_id, name, payload, time); }

int store_signal_take(store *s, const char *wf_id, const char *name, char **payload) { SETTLE(s); return s->ops->op_signal_take(s, wf_id, name, payload); }

int store_signal_wake(store *s, const char *wf_id, const char *name, const char *payload, int64_t time) { SETTLE(s); return s->ops->op_signal_wake(s, wf_id, name, payload, time); }

int store_signal_count(store *s, const char *wf_id) { SETTLE(s); return s->ops->op_signal_count(s, wf_id); }

int store_signal_has(store *s, const char *wf_id, const char *name) { SETTLE(s); return s->ops->op_signal_has(s, wf_id, name); }

int store_signal_del_wf(store *s, const char *wf_id) { SETTLE(s); return s->ops->op_signal_del_wf(s, wf_id); }

int64_t store_domain_append(store *s, const char *session_id, const char *type, int64_t time, const char *payload) { SETTLE(s); return s->ops->op_domain_append(s, session_id, type, time, payload); }

int store_domain_list(store *s, const char *session_id, int64_t after_seq, store_domain_cb cb, void *ud) { SETTLE(s); return s->ops->op_domain_list(s, session_id, after_seq, cb, ud); }

int store_wf_view(store *s, const char *id, wf_view *out, store_domain_cb cb, void *ud) {
  SETTLE(s);
  memset(out, 0, sizeof *out);
  if (s->ops->op_wf_view) return s->ops->op_wf_view(s, id, out, cb, ud);
  int found = s->ops->op_wf_get(s, id, &out->w);
  if (found != 1) return found;
  if (s->ops->op_hist_load(s, id, out->w.run, &out->h) != STORE_OK || (out->tasks = s->ops->op_task_count(s, id)) < 0 ||
      (out->signals = s->ops->op_signal_count(s, id)) < 0 || s->ops->op_domain_list(s, id, 0, cb, ud) != STORE_OK) {
    store_wf_view_free(out);
    return -1;
  }
  return 1;
}

int store_feed_after(store *s, int64_t after_id, int limit, store_feed_cb cb, void *ud) { SETTLE(s); return s->ops->op_feed_after(s, after_id, limit, cb, ud); }

int64_t store_feed_last(store *s) { SETTLE(s); return s->ops->op_feed_last(s); }

int store_meta_get(store *s, const char *key, char **value) { SETTLE(s); return s->ops->op_meta_get(s, key, value); }

int store_meta_put(store *s, const char *key, const char *value) { SETTLE(s); return s->ops->op_meta_put(s, key, value); }

int store_token_put(store *s, const char *name, const char *hash, unsigned scopes, int64_t created_at) { SETTLE(s); return s->ops->op_token_put(s, name, hash, scopes, created_at); }

int store_token_revoke(store *s, const char *name, int64_t revoked_at) { SETTLE(s); return s->ops->op_token_revoke(s, name, revoked_at); }

int store_token_list(store *s, store_token_cb cb, void *ud) { SETTLE(s); return s->ops->op_token_list(s, cb, ud); }

int store_token_live(store *s, store_token_cb cb, void *ud) { SETTLE(s); return s->ops->op_token_live(s, cb, ud); }

int64_t store_token_live_count(store *s) { SETTLE(s); return s->ops->op_token_live_count(s); }

int store_slot_put(store *s, const char *pool, const char *key, const char *wf_id, int64_t seq, int64_t limit, int64_t since) { SETTLE(s); return s->ops->op_slot_put(s, pool, key, wf_id, seq, limit, since); }

int store_slot_get(store *s, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud) { SETTLE(s); return s->ops->op_slot_get(s, wf_id, pool, key, cb, ud); }

int store_slot_head(store *s, const char *pool, const char *key, store_slot_cb cb, void *ud) { SETTLE(s); return s->ops->op_slot_head(s, pool, key, cb, ud); }

int64_t store_slot_count(store *s, const char *pool, const char *key, int held) { SETTLE(s); return s->ops->op_slot_count(s, pool, key, held); }

int store_slot_hold(store *s, const char *wf_id, const char *pool, const char *key, int64_t since) { SETTLE(s); return s->ops->op_slot_hold(s, wf_id, pool, key, since); }

int store_slot_del(store *s, const char *wf_id, const char *pool, const char *key) { SETTLE(s); return s->ops->op_slot_del(s, wf_id, pool, key); }

int store_slot_list(store *s, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud) { SETTLE(s); return s->ops->op_slot_list(s, wf_id, pool, key, cb, ud); }

int store_delivery_put(store *s, const delivery_row *d) { SETTLE(s); return s->ops->op_delivery_put(s, d); }

int store_delivery_find(store *s, const char *trigger, const char *delivery, store_delivery_cb cb, void *ud) { SETTLE(s); return s->ops->op_delivery_find(s, trigger, delivery, cb, ud); }

int store_delivery_list(store *s, const char *trigger, int limit, store_delivery_cb cb, void *ud) { SETTLE(s); return s->ops->op_delivery_list(s, trigger, limit, cb, ud); }

int store_table_page(store *s, const store_table *t, const store_value *after, int limit, store_row_cb cb, void *ud) {
  SETTLE(s);
  return s->ops->op_table_page(s, t, after, limit, cb, ud);
}

int store_table_insert(store *s, const store_table *t, const store_value *row, int replace) {
  SETTLE(s);
  return s->ops->op_table_insert(s, t, row, replace);
}

int64_t store_table_count(store *s, const store_table *t) { SETTLE(s); return s->ops->op_table_count(s, t); }

int store_table_finish(store *s, const store_table *t) { SETTLE(s); return s->ops->op_table_finish(s, t); }

int store_counter_get(store *s, const char *name, counter_row *out) { SETTLE(s); return s->ops->op_counter_get(s, name, out); }

int store_counter_put(store *s, const char *name, const counter_row *c) { SETTLE(s); return s->ops->op_counter_put(s, name, c); }

int store_counter_list(store *s, const char *prefix, store_counter_cb cb, void *ud) { SETTLE(s); return s->ops->op_counter_list(s, prefix, cb, ud); }

int store_group_count(store *s, store_group what, const char *const *types,
                      int (*cb)(void *ud, const char *key, int64_t n), void *ud) {
  SETTLE(s);
  return s->ops->op_group_count(s, what, types, cb, ud);
}
int store_live_list(store *s, const char *const *types, store_live_cb cb, void *ud) {
  SETTLE(s);
  return s->ops->op_live_list(s, types, cb, ud);
}

int64_t store_count(store *s, const char *what, const char *wf_id) { SETTLE(s); return s->ops->op_count(s, what, wf_id); }

int store_schedule_insert(store *s, const schedule_row *r) { SETTLE(s); return s->ops->op_schedule_insert(s, r); }

int store_schedule_update(store *s, const schedule_row *r) { SETTLE(s); return s->ops->op_schedule_update(s, r); }

int store_schedule_get(store *s, const char *name, store_schedule_cb cb, void *ud) {
  SETTLE(s);
  return s->ops->op_schedule_get(s, name, cb, ud);
}

int store_schedule_list(store *s, store_schedule_cb cb, void *ud) { SETTLE(s); return s->ops->op_schedule_list(s, cb, ud); }

int store_schedule_del(store *s, const char *name) { SETTLE(s); return s->ops->op_schedule_del(s, name); }


int store_is_url(const char *path) {
  return path && (strncmp(path, "postgres://", 11) == 0 || strncmp(path, "postgresql://", 13) == 0);
}

int store_remote_lock(const char *url, const char *mode, char *holder, size_t holderlen) {
  return store_pg_lock(url, mode, holder, holderlen);
}

int store_remote_unlock(int fd) { return store_pg_unlock(fd); }
