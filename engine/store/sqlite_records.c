/* sqlite_records: the SQLite store's statements of what is kept beside the
 * workflows: domain events and the feed, meta, API tokens, slots, counters,
 * webhook deliveries, schedules, and the counts of /metrics and show.
 * sqlite.c has the overview. */
#include "sqlite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

/* ---- domain events ---- */

int64_t sq_domain_append(store *st_, const char *session_id, const char *type, int64_t time, const char *payload) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st;
  int64_t seq = 0;
  char prev[65] = "", link[65];
  /* after the batch's own last event of the session, else the rows' */
  if (!chain_dom_pending(&s->base, session_id, &seq, prev)) {
    if (!(st = sq_stmt(s, Q_DOM_LAST))) return STORE_ERR;
    sq_bind_text(s, st, 1, session_id);
    int rc = sq_step(s, st);
    if (rc == SQLITE_ROW) {
      seq = sqlite3_column_int64(st, 0);
      snprintf(prev, sizeof prev, "%s", sq_col_text(st, 1) ? sq_col_text(st, 1) : "");
    }
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(s, "append domain event");
  }
  seq++;
  domain_event e = {session_id, seq, type, time, payload, NULL};
  chain_dom_link(&s->base, &e, prev, link);
  st = sq_stmt(s, Q_DOM_APPEND);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, session_id);
  sq_bind_int(s, st, 2, seq);
  sq_bind_text(s, st, 3, type);
  sq_bind_int(s, st, 4, time);
  sq_bind_text(s, st, 5, payload);
  sq_bind_text(s, st, 6, link);
  if (sq_exec_write(s, st, "append domain event") != STORE_OK) return STORE_ERR;
  st = sq_stmt(s, Q_FEED_PUT);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, session_id);
  sq_bind_int(s, st, 2, seq);
  if (sq_exec_write(s, st, "append domain event") != STORE_OK) return STORE_ERR;
  return seq;
}

int sq_feed_after(store *st_, int64_t after_id, int limit, store_feed_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_FEED_AFTER);
  if (!st) return STORE_ERR;
  sq_bind_int(s, st, 1, after_id);
  sq_bind_int(s, st, 2, limit);
  int rc;
  while ((rc = sq_step(s, st)) == SQLITE_ROW) {
    domain_event e = {(const char *)sqlite3_column_text(st, 1), sqlite3_column_int64(st, 2),
                      (const char *)sqlite3_column_text(st, 3), sqlite3_column_int64(st, 4),
                      (const char *)sqlite3_column_text(st, 5), NULL};
    if (cb(ud, sqlite3_column_int64(st, 0), &e)) break;
  }
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : sq_fail(s, "read the event feed");
}

int64_t sq_feed_last(store *st_) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_FEED_LAST);
  if (!st) return STORE_ERR;
  int64_t v = 0;
  return sq_query_int(s, st, 0, &v) == STORE_OK ? v : STORE_ERR;
}

/* The rows as they are from seq from_seq on (store.c checks them), after
 * the chain's columns when cs. */
int sq_domain_list(store *st_, const char *session_id, int64_t from_seq, store_domain_cb cb, void *ud,
                   chain_state *cs) {
  sq *s = (sq *)st_;
  int rc = cs ? sq_chain_get(st_, session_id, cs) : STORE_OK;
  if (rc != STORE_OK) return rc;
  sqlite3_stmt *st = sq_stmt(s, Q_DOM_LIST);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, session_id);
  sq_bind_int(s, st, 2, from_seq);
  while ((rc = sq_step(s, st)) == SQLITE_ROW) {
    domain_event e = {sq_col_text(st, 0), sqlite3_column_int64(st, 1), sq_col_text(st, 2), sqlite3_column_int64(st, 3),
                      sq_col_text(st, 4), sq_col_text(st, 5)};
    if (cb(ud, &e)) break;
  }
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : sq_fail_read(s, "list domain events");
}

/* ---- meta: the engine's own small named values ---- */

int sq_meta_get(store *st_, const char *key, char **value) {
  sq *s = (sq *)st_;
  *value = NULL;
  sqlite3_stmt *st = sq_stmt(s, Q_META_GET);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, key);
  int rc = sq_step(s, st);
  if (rc == SQLITE_ROW) *value = sq_col_dup(st, 0);
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(s, "meta");
  return *value ? 1 : 0;
}

int sq_meta_put(store *st_, const char *key, const char *value) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, value ? Q_META_PUT : Q_META_DEL);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, key);
  if (value) sq_bind_text(s, st, 2, value);
  return sq_exec_write(s, st, "meta");
}

/* ---- API tokens ---- */

int sq_token_put(store *st_, const char *name, const char *hash, unsigned scopes, const char *grants,
                 int64_t created_at) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_TOKEN_PUT);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, name);
  sq_bind_text(s, st, 2, hash);
  sq_bind_int(s, st, 3, scopes);
  sq_bind_int(s, st, 4, created_at);
  if (grants) sq_bind_text(s, st, 5, grants);
  if (sq_exec_write(s, st, "put token") != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

int sq_token_revoke(store *st_, const char *name, int64_t revoked_at) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_TOKEN_REVOKE);
  if (!st) return STORE_ERR;
  sq_bind_int(s, st, 1, revoked_at);
  sq_bind_text(s, st, 2, name);
  if (sq_exec_write(s, st, "revoke token") != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

/* Runs q over its rows; a callback that returns nonzero ends the scan. */
static int token_scan(sq *s, int q, store_token_cb cb, void *ud, const char *what) {
  sqlite3_stmt *st = sq_stmt(s, q);
  if (!st) return STORE_ERR;
  int rc;
  while ((rc = sq_step(s, st)) == SQLITE_ROW) {
    token_row t = {sq_col_text(st, 0), sq_col_text(st, 1), (unsigned)sqlite3_column_int64(st, 2),
                   sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4), sq_col_text(st, 5)};
    if (cb(ud, &t)) break;
  }
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : sq_fail(s, what);
}

int sq_token_list(store *st_, store_token_cb cb, void *ud) {
  sq *s = (sq *)st_;
  return token_scan(s, Q_TOKEN_LIST, cb, ud, "list tokens");
}

int sq_token_live(store *st_, store_token_cb cb, void *ud) {
  sq *s = (sq *)st_;
  return token_scan(s, Q_TOKEN_LIVE, cb, ud, "read live tokens");
}

int64_t sq_token_live_count(store *st_) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_TOKEN_LIVE_COUNT);
  if (!st) return -1;
  int64_t v;
  return sq_query_int(s, st, 0, &v) == STORE_OK ? v : -1;
}

/* ---- slots: concurrency limits and caps (slots.c decides who gets one) ---- */

static void slot_from(sqlite3_stmt *st, slot_row *r) {
  r->pool = sq_col_text(st, 0);
  r->key = sq_col_text(st, 1);
  r->wf_id = sq_col_text(st, 2);
  r->seq = sqlite3_column_int64(st, 3);
  r->limit = sqlite3_column_int64(st, 4);
  r->held = sqlite3_column_int(st, 5);
  r->since = sqlite3_column_int64(st, 6);
  r->position = sqlite3_column_int64(st, 7);
}

int sq_slot_put(store *st_, const char *pool, const char *key, const char *wf_id, int64_t seq, int64_t limit,
                int64_t since) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_SLOT_PUT);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, pool);
  sq_bind_text(s, st, 2, key);
  sq_bind_text(s, st, 3, wf_id);
  sq_bind_int(s, st, 4, seq);
  sq_bind_int(s, st, 5, limit);
  sq_bind_int(s, st, 6, since);
  return sq_exec_write(s, st, "put slot");
}

static int slot_one(sq *s, sqlite3_stmt *st, store_slot_cb cb, void *ud) {
  int rc = sq_step(s, st);
  if (rc == SQLITE_ROW) {
    slot_row r;
    slot_from(st, &r);
    cb(ud, &r);
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(s, "read slot");
  return rc == SQLITE_ROW;
}

int sq_slot_get(store *st_, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_SLOT_GET);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_text(s, st, 2, pool);
  sq_bind_text(s, st, 3, key);
  return slot_one(s, st, cb, ud);
}

int sq_slot_head(store *st_, const char *pool, const char *key, store_slot_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_SLOT_HEAD);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, pool);
  sq_bind_text(s, st, 2, key);
  return slot_one(s, st, cb, ud);
}

int64_t sq_slot_count(store *st_, const char *pool, const char *key, int held) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_SLOT_COUNT);
  if (!st) return -1;
  sq_bind_text(s, st, 1, pool);
  sq_bind_text(s, st, 2, key);
  sq_bind_int(s, st, 3, held ? 1 : 0);
  int64_t v;
  return sq_query_int(s, st, 0, &v) == STORE_OK ? v : -1;
}

int sq_slot_hold(store *st_, const char *wf_id, const char *pool, const char *key, int64_t since) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_SLOT_HOLD);
  if (!st) return STORE_ERR;
  sq_bind_int(s, st, 1, since);
  sq_bind_text(s, st, 2, wf_id);
  sq_bind_text(s, st, 3, pool);
  sq_bind_text(s, st, 4, key);
  return sq_exec_write(s, st, "hold slot");
}

int sq_slot_del(store *st_, const char *wf_id, const char *pool, const char *key) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_SLOT_DEL);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_text(s, st, 2, pool);
  sq_bind_text(s, st, 3, key);
  if (sq_exec_write(s, st, "delete slot") != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

int sq_slot_list(store *st_, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, wf_id ? Q_SLOT_OF_WF : pool ? Q_SLOT_OF_KEY : Q_SLOT_ALL);
  if (!st) return STORE_ERR;
  if (wf_id) {
    sq_bind_text(s, st, 1, wf_id);
  } else if (pool) {
    sq_bind_text(s, st, 1, pool);
    sq_bind_text(s, st, 2, key);
  }
  int rc, stop = 0;
  while (!stop && (rc = sq_step(s, st)) == SQLITE_ROW) {
    slot_row r;
    slot_from(st, &r);
    stop = cb(ud, &r);
  }
  sqlite3_reset(st);
  if (!stop && rc != SQLITE_DONE) return sq_fail(s, "list slots");
  return STORE_OK;
}

/* ---- counters: named totals and rate windows ---- */

static void counter_from(sqlite3_stmt *st, counter_row *c) {
  c->name = sq_col_text(st, 0);
  c->value = sqlite3_column_double(st, 1);
  c->window_start = sqlite3_column_int64(st, 2);
  c->paused_until = sqlite3_column_int64(st, 3);
  c->updated_at = sqlite3_column_int64(st, 4);
}

int sq_counter_get(store *st_, const char *name, counter_row *out) {
  sq *s = (sq *)st_;
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st = sq_stmt(s, Q_CTR_GET);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, name);
  int rc = sq_step(s, st);
  if (rc == SQLITE_ROW) {
    counter_from(st, out);
    out->name = NULL; /* the statement's text goes away with the reset */
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(s, "read counter");
  return rc == SQLITE_ROW;
}

int sq_counter_put(store *st_, const char *name, const counter_row *c) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_CTR_PUT);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, name);
  sq_bind_check(s, sqlite3_bind_double(st, 2, c->value), 2, SIZE_MAX);
  sq_bind_int(s, st, 3, c->window_start);
  sq_bind_int(s, st, 4, c->paused_until);
  sq_bind_int(s, st, 5, c->updated_at);
  return sq_exec_write(s, st, "write counter");
}

int sq_counter_list(store *st_, const char *prefix, store_counter_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_CTR_LIST);
  if (!st) return STORE_ERR;
  char *hi = util_fmt("%s\xff", prefix);
  sq_bind_text(s, st, 1, prefix);
  sq_bind_text(s, st, 2, hi);
  int rc, stop = 0;
  while (!stop && (rc = sq_step(s, st)) == SQLITE_ROW) {
    counter_row c;
    counter_from(st, &c);
    stop = cb(ud, &c);
  }
  sqlite3_reset(st);
  free(hi);
  if (!stop && rc != SQLITE_DONE) return sq_fail(s, "list counters");
  return STORE_OK;
}

/* ---- webhook deliveries ---- */

int sq_delivery_put(store *st_, const delivery_row *d) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_DLV_PUT);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, d->trigger);
  sq_bind_text(s, st, 2, d->delivery ? d->delivery : "");
  sq_bind_int(s, st, 3, d->received_at);
  sq_bind_text(s, st, 4, d->outcome);
  sq_bind_int(s, st, 5, d->status);
  sq_bind_text(s, st, 6, d->wf_id);
  sq_bind_text(s, st, 7, d->detail);
  if (sq_exec_write(s, st, "record delivery") != STORE_OK) return STORE_ERR;
  if (sqlite3_changes(s->db) == 0) return 1;
  if (store_delivery_accepted(d->outcome)) return 0;
  st = sq_stmt(s, Q_DLV_PRUNE);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, d->trigger);
  return sq_exec_write(s, st, "prune deliveries");
}

static int delivery_scan(sq *s, sqlite3_stmt *st, store_delivery_cb cb, void *ud, const char *what) {
  int rc, n = 0;
  while ((rc = sq_step(s, st)) == SQLITE_ROW) {
    delivery_row d = {sqlite3_column_int64(st, 0), sq_col_text(st, 1), sq_col_text(st, 2), sqlite3_column_int64(st, 3),
                      sq_col_text(st, 4), sqlite3_column_int(st, 5), sq_col_text(st, 6), sq_col_text(st, 7)};
    n++;
    if (cb && cb(ud, &d)) break;
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(s, what);
  return n;
}

int sq_delivery_find(store *st_, const char *trigger, const char *delivery, store_delivery_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_DLV_FIND);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, trigger);
  sq_bind_text(s, st, 2, delivery);
  int n = delivery_scan(s, st, cb, ud, "find delivery");
  return n < 0 ? n : n > 0;
}

int sq_delivery_list(store *st_, const char *trigger, int limit, store_delivery_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, trigger ? Q_DLV_LIST : Q_DLV_LIST_ALL);
  if (!st) return STORE_ERR;
  if (trigger) sq_bind_text(s, st, 1, trigger);
  sq_bind_int(s, st, trigger ? 2 : 1, limit);
  int n = delivery_scan(s, st, cb, ud, "list deliveries");
  return n < 0 ? n : STORE_OK;
}

/* ---- schedules ---- */

/* Binds the columns in the order of the statements: name first, then the
 * fields an update rewrites (through updated_at), created_at last when with_created. */
static void schedule_bind(sq *s, sqlite3_stmt *st, const schedule_row *r, int with_created) {
  sq_bind_text(s, st, 1, r->name);
  sq_bind_text(s, st, 2, r->cron);
  sq_bind_text(s, st, 3, r->tz);
  sq_bind_text(s, st, 4, r->script);
  sq_bind_text(s, st, 5, r->input);
  sq_bind_text(s, st, 6, r->overlap);
  sq_bind_int(s, st, 7, r->catchup_window_ms);
  sq_bind_int(s, st, 8, r->jitter_ms);
  sq_bind_int(s, st, 9, r->paused);
  sq_bind_int(s, st, 10, r->next_fire_at);
  sq_bind_int(s, st, 11, r->last_fire_at);
  sq_bind_int(s, st, 12, r->buffered_fire_at);
  sq_bind_int(s, st, 13, r->skipped_count);
  sq_bind_int(s, st, 14, r->updated_at);
  if (with_created) sq_bind_int(s, st, 15, r->created_at);
}

int sq_schedule_insert(store *st_, const schedule_row *r) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_SCH_INSERT);
  if (!st) return STORE_ERR;
  schedule_bind(s, st, r, 1);
  if (sq_exec_write(s, st, "write schedule") != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

int sq_schedule_update(store *st_, const schedule_row *r) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_SCH_UPDATE);
  if (!st) return STORE_ERR;
  schedule_bind(s, st, r, 0);
  if (sq_exec_write(s, st, "update schedule") != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

static int schedule_scan(sq *s, sqlite3_stmt *st, store_schedule_cb cb, void *ud, const char *what) {
  int rc, n = 0;
  while ((rc = sq_step(s, st)) == SQLITE_ROW) {
    schedule_row r = {sq_col_text(st, 0), sq_col_text(st, 1), sq_col_text(st, 2), sq_col_text(st, 3), sq_col_text(st, 4),
                      sq_col_text(st, 5), sqlite3_column_int64(st, 6), sqlite3_column_int64(st, 7),
                      sqlite3_column_int(st, 8), sqlite3_column_int64(st, 9), sqlite3_column_int64(st, 10),
                      sqlite3_column_int64(st, 11), sqlite3_column_int64(st, 12), sqlite3_column_int64(st, 14),
                      sqlite3_column_int64(st, 13)};
    n++;
    if (cb && cb(ud, &r)) break;
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(s, what);
  return n;
}

int sq_schedule_get(store *st_, const char *name, store_schedule_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_SCH_GET);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, name);
  int n = schedule_scan(s, st, cb, ud, "read schedule");
  return n < 0 ? n : n > 0;
}

int sq_schedule_list(store *st_, store_schedule_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_SCH_LIST);
  if (!st) return STORE_ERR;
  int n = schedule_scan(s, st, cb, ud, "list schedules");
  return n < 0 ? n : STORE_OK;
}

int sq_schedule_del(store *st_, const char *name) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_SCH_DEL);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, name);
  if (sq_exec_write(s, st, "delete schedule") != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

/* ---- counts ---- */

/* The event types asked for (a NULL-terminated list) as a JSON array,
 * malloc'd: ?1 of Q_GROUP_LIVE_WITH and Q_LIVE_LIST (json_each). */
static char *type_list(const char *const *types) {
  ubuf b = {0};
  ubuf_add(&b, "[", 1);
  for (size_t i = 0; types && types[i]; i++) {
    char *q = json_quote(types[i]);
    if (i) ubuf_add(&b, ",", 1);
    ubuf_add(&b, q, strlen(q));
    free(q);
  }
  ubuf_add(&b, "]", 2); /* and its NUL */
  return b.p;
}

int sq_group_count(store *st_, store_group what, const char *const *types,
                   int (*cb)(void *ud, const char *key, int64_t n), void *ud) {
  sq *s = (sq *)st_;
  int q = what == STORE_GROUP_STATUS  ? Q_GROUP_STATUS
          : what == STORE_GROUP_TASKS ? Q_GROUP_TASKS
          : what == STORE_GROUP_SLOTS ? Q_GROUP_SLOTS
                                      : Q_GROUP_LIVE_WITH;
  sqlite3_stmt *st = sq_stmt(s, q);
  if (!st) return STORE_ERR;
  if (q == Q_GROUP_LIVE_WITH) {
    char *among = type_list(types);
    sq_bind_text(s, st, 1, among); /* bound as a copy */
    free(among);
  }
  int rc;
  while ((rc = sq_step(s, st)) == SQLITE_ROW)
    if (cb(ud, (const char *)sqlite3_column_text(st, 0), sqlite3_column_int64(st, 1))) break;
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : sq_fail(s, "count");
}

int sq_live_list(store *st_, const char *const *types, store_live_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_LIVE_LIST);
  if (!st) return STORE_ERR;
  char *among = type_list(types);
  sq_bind_text(s, st, 1, among); /* bound as a copy */
  free(among);
  int rc;
  while ((rc = sq_step(s, st)) == SQLITE_ROW)
    if (cb(ud, (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1))) break;
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : sq_fail(s, "list live workflows");
}

int64_t sq_count(store *st_, const char *what, const char *wf_id) {
  sq *s = (sq *)st_;
  if (strcmp(what, "history") == 0) {
    sqlite3_stmt *st = sq_stmt(s, Q_COUNT_HIST);
    if (!st) return -1;
    sq_bind_text(s, st, 1, wf_id);
    int64_t v;
    return sq_query_int(s, st, 0, &v) == STORE_OK ? v : -1;
  }
  if (strcmp(what, "signals") == 0) return sq_signal_count(&s->base, wf_id);
  if (strcmp(what, "tasks") == 0) return sq_task_count(&s->base, wf_id);
  return -1;
}

/* ---- memory (ops/memory.c) ---- */

int sq_memory_put(store *st_, const memory_row *m) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_MEM_PUT);
  if (!st) return STORE_ERR;
  const char *text[] = {m->id, m->kind, m->identity, m->text, m->evidence, m->session_id, m->request_id, m->approver};
  for (int i = 0; i < 8; i++) sq_bind_text(s, st, i + 1, text[i]);
  sq_bind_int(s, st, 9, m->approved_at);
  if (sq_exec_write(s, st, "put memory") != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

int sq_memory_revoke(store *st_, const char *id, int64_t at, const char *by, const char *reason) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_MEM_REVOKE);
  if (!st) return STORE_ERR;
  sq_bind_int(s, st, 1, at);
  sq_bind_text(s, st, 2, by);
  sq_bind_text(s, st, 3, reason);
  sq_bind_text(s, st, 4, id);
  if (sq_exec_write(s, st, "revoke memory") != STORE_OK) return STORE_ERR;
  return sqlite3_changes(s->db) > 0;
}

int sq_memory_list(store *st_, const char *id, const char *kind, const char *identity, int live_only,
                   store_memory_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_MEM_LIST);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, id);
  sq_bind_text(s, st, 2, kind);
  sq_bind_text(s, st, 3, identity);
  sq_bind_int(s, st, 4, live_only ? 1 : 0);
  int rc;
  while ((rc = sq_step(s, st)) == SQLITE_ROW) {
    memory_row m = {sq_col_text(st, 0),         sq_col_text(st, 1),         sq_col_text(st, 2),
                    sq_col_text(st, 3),         sq_col_text(st, 4),         sq_col_text(st, 5),
                    sq_col_text(st, 6),         sq_col_text(st, 7),         sqlite3_column_int64(st, 8),
                    sqlite3_column_int64(st, 9), sq_col_text(st, 10),       sq_col_text(st, 11)};
    if (cb(ud, &m)) break;
  }
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : sq_fail(s, "list memory");
}
