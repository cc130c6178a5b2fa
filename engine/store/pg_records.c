/* pg_records: the PostgreSQL store's statements of what is kept beside the
 * workflows: domain events and the feed, meta, API tokens, slots, counters,
 * webhook deliveries, schedules, and the counts of /metrics and show. pg.c
 * has the overview. */
#include "pg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- domain events ---- */

int64_t pg_domain_append(store *st_, const char *session_id, const char *type, int64_t time,
                         const char *payload) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_FEED, NULL, NULL);
  int64_t seq = 0;
  char prev[65] = "", link[65];
  /* after the batch's own last event of the session (no round trip), else the rows' */
  if (!chain_dom_pending(&s->base, session_id, &seq, prev)) {
    pg_params_start(s);
    pg_bind_text(s, session_id);
    PGresult *r = pq_run(s, Q_DOM_LAST, 0, "append domain event");
    if (!r) return STORE_ERR;
    if (PQntuples(r) > 0) {
      seq = pg_col_int(r, 0, 0);
      snprintf(prev, sizeof prev, "%s", pg_col_text(r, 0, 1) ? pg_col_text(r, 0, 1) : "");
    }
    PQclear(r);
  }
  seq++;
  domain_event e = {session_id, seq, type, time, payload, NULL};
  chain_dom_link(&s->base, &e, prev, link);
  pg_params_start(s);
  pg_bind_text(s, session_id);
  pg_bind_int(s, seq);
  pg_bind_text(s, type);
  pg_bind_int(s, time);
  pg_bind_text(s, payload);
  pg_bind_text(s, link);
  if (pg_exec_defer(s, Q_DOM_APPEND, "append domain event") != STORE_OK) return STORE_ERR;
  pg_params_start(s);
  pg_bind_text(s, session_id);
  pg_bind_int(s, seq);
  if (pg_exec_defer(s, Q_FEED_PUT, "append domain event") != STORE_OK) return STORE_ERR;
  return seq;
}

/* The rows as they are from seq from_seq on (store.c checks them); with
 * cs, the chain's columns read first in the same round trip. */
int pg_domain_list(store *st_, const char *session_id, int64_t from_seq, store_domain_cb cb, void *ud,
                   chain_state *cs) {
  pg *s = (pg *)st_;
  PGresult *c = NULL, *r = NULL;
  int rc = cs ? pg_chain_send(s, session_id, &c) : STORE_OK;
  pg_params_start(s);
  pg_bind_text(s, session_id);
  pg_bind_int(s, from_seq);
  if (cs) {
    if (rc == STORE_OK) rc = pg_pipe_send_q(s, Q_DOM_LIST, "list domain events", &r);
    if (rc == STORE_OK) rc = pg_pipe_drain(s, 1);
    if (rc == STORE_OK) pg_chain_from(c, cs);
    PQclear(c);
  } else if (!(r = pq_run(s, Q_DOM_LIST, 0, "list domain events"))) {
    rc = STORE_ERR;
  }
  for (int i = 0, n = rc == STORE_OK ? PQntuples(r) : 0; i < n; i++) {
    domain_event e = {pg_col_text(r, i, 0), pg_col_int(r, i, 1), pg_col_text(r, i, 2), pg_col_int(r, i, 3),
                      pg_col_text(r, i, 4), pg_col_text(r, i, 5)};
    if (cb(ud, &e)) break;
  }
  PQclear(r);
  return rc;
}

int pg_feed_after(store *st_, int64_t after_id, int limit, store_feed_cb cb, void *ud) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_int(s, after_id);
  pg_bind_int(s, limit);
  PGresult *r = pq_run(s, Q_FEED_AFTER, 0, "read the event feed");
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++) {
    domain_event e = {pg_col_text(r, i, 1), pg_col_int(r, i, 2), pg_col_text(r, i, 3), pg_col_int(r, i, 4),
                      pg_col_text(r, i, 5), NULL};
    if (cb(ud, pg_col_int(r, i, 0), &e)) break;
  }
  PQclear(r);
  return STORE_OK;
}

int64_t pg_feed_last(store *st_) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  int64_t v = 0;
  return pg_query_int(s, Q_FEED_LAST, 0, &v) == STORE_OK ? v : STORE_ERR;
}

/* ---- meta ---- */

int pg_meta_get(store *st_, const char *key, char **value) {
  pg *s = (pg *)st_;
  ORDERED_READ(s, ORDER_META, key, NULL);
  *value = NULL;
  pg_params_start(s);
  pg_bind_text(s, key);
  PGresult *r = pq_run(s, Q_META_GET, 0, "meta");
  if (!r) return STORE_ERR;
  if (PQntuples(r) > 0) *value = pg_col_dup(r, 0, 0);
  PQclear(r);
  return *value ? 1 : 0;
}

int pg_meta_put(store *st_, const char *key, const char *value) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_META, key, NULL);
  pg_params_start(s);
  pg_bind_text(s, key);
  if (value) pg_bind_text(s, value);
  return pg_exec_defer(s, value ? Q_META_PUT : Q_META_DEL, "meta");
}

/* ---- API tokens ---- */

int pg_token_put(store *st_, const char *name, const char *hash, unsigned scopes, const char *grants,
                 int64_t created_at) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_TOKENS, name, NULL);
  pg_params_start(s);
  pg_bind_text(s, name);
  pg_bind_text(s, hash);
  pg_bind_int(s, scopes);
  pg_bind_int(s, created_at);
  pg_bind_text(s, grants);
  if (pg_exec_write(s, Q_TOKEN_PUT, "put token") != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

int pg_token_revoke(store *st_, const char *name, int64_t revoked_at) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_TOKENS, name, NULL);
  pg_params_start(s);
  pg_bind_int(s, revoked_at);
  pg_bind_text(s, name);
  if (pg_exec_write(s, Q_TOKEN_REVOKE, "revoke token") != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

static int token_scan(pg *s, int q, store_token_cb cb, void *ud, const char *what) {
  pg_params_start(s);
  PGresult *r = pq_run(s, q, 0, what);
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++) {
    token_row t = {pg_col_text(r, i, 0), pg_col_text(r, i, 1), (unsigned)pg_col_int(r, i, 2), pg_col_int(r, i, 3),
                   pg_col_int(r, i, 4), pg_col_text(r, i, 5)};
    if (cb(ud, &t)) break;
  }
  PQclear(r);
  return STORE_OK;
}

int pg_token_list(store *st_, store_token_cb cb, void *ud) {
  return token_scan((pg *)st_, Q_TOKEN_LIST, cb, ud, "list tokens");
}

int pg_token_live(store *st_, store_token_cb cb, void *ud) {
  return token_scan((pg *)st_, Q_TOKEN_LIVE, cb, ud, "read live tokens");
}

int64_t pg_token_live_count(store *st_) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  int64_t v;
  return pg_query_int(s, Q_TOKEN_LIVE_COUNT, 0, &v) == STORE_OK ? v : -1;
}

/* ---- slots ---- */

static void slot_from(const PGresult *r, int i, slot_row *x) {
  x->pool = pg_col_text(r, i, 0);
  x->key = pg_col_text(r, i, 1);
  x->wf_id = pg_col_text(r, i, 2);
  x->seq = pg_col_int(r, i, 3);
  x->limit = pg_col_int(r, i, 4);
  x->held = (int)pg_col_int(r, i, 5);
  x->since = pg_col_int(r, i, 6);
  x->position = pg_col_int(r, i, 7);
}

int pg_slot_put(store *st_, const char *pool, const char *key, const char *wf_id, int64_t seq, int64_t limit,
                int64_t since) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_SLOTS, pool, key);
  pg_params_start(s);
  pg_bind_text(s, pool);
  pg_bind_text(s, key);
  pg_bind_text(s, wf_id);
  pg_bind_int(s, seq);
  pg_bind_int(s, limit);
  pg_bind_int(s, since);
  return pg_exec_defer(s, Q_SLOT_PUT, "put slot");
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

int pg_slot_get(store *st_, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud) {
  pg *s = (pg *)st_;
  ORDERED_READ(s, ORDER_SLOTS, pool, key);
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_text(s, pool);
  pg_bind_text(s, key);
  return slot_one(s, Q_SLOT_GET, cb, ud);
}

int pg_slot_head(store *st_, const char *pool, const char *key, store_slot_cb cb, void *ud) {
  pg *s = (pg *)st_;
  ORDERED_READ(s, ORDER_SLOTS, pool, key);
  pg_params_start(s);
  pg_bind_text(s, pool);
  pg_bind_text(s, key);
  return slot_one(s, Q_SLOT_HEAD, cb, ud);
}

int64_t pg_slot_count(store *st_, const char *pool, const char *key, int held) {
  pg *s = (pg *)st_;
  ORDERED_READ(s, ORDER_SLOTS, pool, key);
  pg_params_start(s);
  pg_bind_text(s, pool);
  pg_bind_text(s, key);
  pg_bind_int(s, held ? 1 : 0);
  int64_t v;
  return pg_query_int(s, Q_SLOT_COUNT, 0, &v) == STORE_OK ? v : -1;
}

int pg_slot_hold(store *st_, const char *wf_id, const char *pool, const char *key, int64_t since) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_SLOTS, pool, key);
  pg_params_start(s);
  pg_bind_int(s, since);
  pg_bind_text(s, wf_id);
  pg_bind_text(s, pool);
  pg_bind_text(s, key);
  return pg_exec_write(s, Q_SLOT_HOLD, "hold slot");
}

int pg_slot_del(store *st_, const char *wf_id, const char *pool, const char *key) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_SLOTS, pool, key);
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_text(s, pool);
  pg_bind_text(s, key);
  if (pg_exec_write(s, Q_SLOT_DEL, "delete slot") != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

int pg_slot_list(store *st_, const char *wf_id, const char *pool, const char *key, store_slot_cb cb,
                 void *ud) {
  pg *s = (pg *)st_;
  /* a workflow's own slots are its lease holder's to add: no order needed
   * (every workflow's end lists them, and most hold none); a key's queue is
   * that key's (the list of all of them is a view, not a check) */
  if (!wf_id && pool) ORDERED_READ(s, ORDER_SLOTS, pool, key);
  pg_params_start(s);
  if (wf_id) {
    pg_bind_text(s, wf_id);
  } else if (pool) {
    pg_bind_text(s, pool);
    pg_bind_text(s, key);
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
  c->name = pg_col_text(r, i, 0);
  c->value = PQgetisnull(r, i, 1) ? 0 : strtod(PQgetvalue(r, i, 1), NULL);
  c->window_start = pg_col_int(r, i, 2);
  c->paused_until = pg_col_int(r, i, 3);
  c->updated_at = pg_col_int(r, i, 4);
}

int pg_counter_get(store *st_, const char *name, counter_row *out) {
  pg *s = (pg *)st_;
  ORDERED_READ(s, ORDER_COUNTERS, name, NULL);
  memset(out, 0, sizeof *out);
  pg_params_start(s);
  pg_bind_text(s, name);
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

int pg_counter_put(store *st_, const char *name, const counter_row *c) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_COUNTERS, name, NULL);
  pg_params_start(s);
  pg_bind_text(s, name);
  pg_bind_double(s, c->value);
  pg_bind_int(s, c->window_start);
  pg_bind_int(s, c->paused_until);
  pg_bind_int(s, c->updated_at);
  return pg_exec_defer(s, Q_CTR_PUT, "write counter");
}

int pg_counter_list(store *st_, const char *prefix, store_counter_cb cb, void *ud) {
  pg *s = (pg *)st_;
  /* a listing (engine admin), not a check a write follows: no order lock */
  char *above = pg_prefix_above(prefix);
  pg_params_start(s);
  pg_bind_text(s, prefix);
  if (above) pg_bind_text(s, above);
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

int pg_delivery_put(store *st_, const delivery_row *d) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_DELIVERY, d->trigger, d->delivery ? d->delivery : "");
  pg_params_start(s);
  pg_bind_text(s, d->trigger);
  pg_bind_text(s, d->delivery ? d->delivery : "");
  pg_bind_int(s, d->received_at);
  pg_bind_text(s, d->outcome);
  pg_bind_int(s, d->status);
  pg_bind_text(s, d->wf_id);
  pg_bind_text(s, d->detail);
  if (pg_exec_write(s, Q_DLV_PUT, "record delivery") != STORE_OK) return STORE_ERR;
  if (s->changes == 0) return 1;
  if (store_delivery_accepted(d->outcome)) return 0;
  pg_params_start(s);
  pg_bind_text(s, d->trigger);
  return pg_exec_write(s, Q_DLV_PRUNE, "prune deliveries");
}

static int delivery_scan(pg *s, int q, store_delivery_cb cb, void *ud, const char *what) {
  PGresult *r = pq_run(s, q, 0, what);
  if (!r) return STORE_ERR;
  int n = PQntuples(r);
  for (int i = 0; i < n; i++) {
    delivery_row d = {pg_col_int(r, i, 0), pg_col_text(r, i, 1), pg_col_text(r, i, 2), pg_col_int(r, i, 3),
                      pg_col_text(r, i, 4), (int)pg_col_int(r, i, 5), pg_col_text(r, i, 6), pg_col_text(r, i, 7)};
    if (cb && cb(ud, &d)) break;
  }
  PQclear(r);
  return n;
}

int pg_delivery_find(store *st_, const char *trigger, const char *delivery, store_delivery_cb cb, void *ud) {
  pg *s = (pg *)st_;
  ORDERED_READ(s, ORDER_DELIVERY, trigger, delivery);
  pg_params_start(s);
  pg_bind_text(s, trigger);
  pg_bind_text(s, delivery);
  int n = delivery_scan(s, Q_DLV_FIND, cb, ud, "find delivery");
  return n < 0 ? n : n > 0;
}

int pg_delivery_list(store *st_, const char *trigger, int limit, store_delivery_cb cb, void *ud) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  if (trigger) pg_bind_text(s, trigger);
  pg_bind_int(s, limit);
  int n = delivery_scan(s, trigger ? Q_DLV_LIST : Q_DLV_LIST_ALL, cb, ud, "list deliveries");
  return n < 0 ? n : STORE_OK;
}

/* ---- schedules ---- */

/* Binds the columns in the order of the statements: name first, then the
 * fields an update rewrites (through updated_at), created_at last when with_created. */
static void schedule_bind(pg *s, const schedule_row *r, int with_created) {
  pg_params_start(s);
  pg_bind_text(s, r->name);
  pg_bind_text(s, r->cron);
  pg_bind_text(s, r->tz);
  pg_bind_text(s, r->script);
  pg_bind_text(s, r->input);
  pg_bind_text(s, r->overlap);
  pg_bind_int(s, r->catchup_window_ms);
  pg_bind_int(s, r->jitter_ms);
  pg_bind_int(s, r->paused);
  pg_bind_int(s, r->next_fire_at);
  pg_bind_int(s, r->last_fire_at);
  pg_bind_int(s, r->buffered_fire_at);
  pg_bind_int(s, r->skipped_count);
  pg_bind_int(s, r->updated_at);
  if (with_created) pg_bind_int(s, r->created_at);
}

int pg_schedule_insert(store *st_, const schedule_row *r) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_SCHEDULES, NULL, NULL);
  schedule_bind(s, r, 1);
  if (pg_exec_write(s, Q_SCH_INSERT, "write schedule") != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

int pg_schedule_update(store *st_, const schedule_row *r) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_SCHEDULES, NULL, NULL);
  schedule_bind(s, r, 0);
  if (pg_exec_write(s, Q_SCH_UPDATE, "update schedule") != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

static int schedule_scan(pg *s, int q, store_schedule_cb cb, void *ud, const char *what) {
  PGresult *r = pq_run(s, q, 0, what);
  if (!r) return STORE_ERR;
  int n = PQntuples(r);
  for (int i = 0; i < n; i++) {
    schedule_row row = {pg_col_text(r, i, 0),       pg_col_text(r, i, 1),       pg_col_text(r, i, 2),  pg_col_text(r, i, 3),
                        pg_col_text(r, i, 4),       pg_col_text(r, i, 5),       pg_col_int(r, i, 6),   pg_col_int(r, i, 7),
                        (int)pg_col_int(r, i, 8),   pg_col_int(r, i, 9),        pg_col_int(r, i, 10),  pg_col_int(r, i, 11),
                        pg_col_int(r, i, 12),       pg_col_int(r, i, 14),       pg_col_int(r, i, 13)};
    if (cb && cb(ud, &row)) break;
  }
  PQclear(r);
  return n;
}

int pg_schedule_get(store *st_, const char *name, store_schedule_cb cb, void *ud) {
  pg *s = (pg *)st_;
  ORDERED_READ(s, ORDER_SCHEDULES, NULL, NULL);
  pg_params_start(s);
  pg_bind_text(s, name);
  int n = schedule_scan(s, Q_SCH_GET, cb, ud, "read schedule");
  return n < 0 ? n : n > 0;
}

int pg_schedule_list(store *st_, store_schedule_cb cb, void *ud) {
  pg *s = (pg *)st_;
  /* ordered in a client's batch only (store_begin: the tick's second read,
   * whose fires follow): the tick's first look, in whatever batch is open,
   * takes no lock that could close a cycle with another worker's batch */
  if (s->client) ORDERED_READ(s, ORDER_SCHEDULES, NULL, NULL);
  pg_params_start(s);
  int n = schedule_scan(s, Q_SCH_LIST, cb, ud, "list schedules");
  return n < 0 ? n : STORE_OK;
}

int pg_schedule_del(store *st_, const char *name) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_SCHEDULES, NULL, NULL);
  pg_params_start(s);
  pg_bind_text(s, name);
  if (pg_exec_write(s, Q_SCH_DEL, "delete schedule") != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

/* ---- counts ---- */

/* The event types asked for (a NULL-terminated list) as a text[] literal,
 * malloc'd: $1 of Q_GROUP_LIVE_WITH and Q_LIVE_LIST. */
static char *type_array(const char *const *types) {
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (; types && *types; types++) pg_array_add(&buf, &len, &cap, *types, 1);
  pg_array_add(&buf, &len, &cap, NULL, 0);
  return buf;
}

int pg_group_count(store *st_, store_group what, const char *const *types,
                   int (*cb)(void *ud, const char *key, int64_t n), void *ud) {
  pg *s = (pg *)st_;
  int q = what == STORE_GROUP_STATUS  ? Q_GROUP_STATUS
          : what == STORE_GROUP_TASKS ? Q_GROUP_TASKS
          : what == STORE_GROUP_SLOTS ? Q_GROUP_SLOTS
                                      : Q_GROUP_LIVE_WITH;
  char *among = q == Q_GROUP_LIVE_WITH ? type_array(types) : NULL;
  pg_params_start(s);
  if (among) pg_bind_text(s, among);
  PGresult *r = pq_run(s, q, 0, "count");
  free(among);
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++)
    if (cb(ud, pg_col_text(r, i, 0), pg_col_int(r, i, 1))) break;
  PQclear(r);
  return STORE_OK;
}

int pg_live_list(store *st_, const char *const *types, store_live_cb cb, void *ud) {
  pg *s = (pg *)st_;
  char *among = type_array(types);
  pg_params_start(s);
  pg_bind_text(s, among);
  PGresult *r = pq_run(s, Q_LIVE_LIST, 0, "list live workflows");
  free(among);
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++)
    if (cb(ud, pg_col_text(r, i, 0), pg_col_text(r, i, 1))) break;
  PQclear(r);
  return STORE_OK;
}

int64_t pg_count(store *st_, const char *what, const char *wf_id) {
  pg *s = (pg *)st_;
  if (strcmp(what, "history") == 0) {
    pg_params_start(s);
    pg_bind_text(s, wf_id);
    int64_t v;
    return pg_query_int(s, Q_COUNT_HIST, 0, &v) == STORE_OK ? v : -1;
  }
  if (strcmp(what, "signals") == 0) return pg_signal_count(&s->base, wf_id);
  if (strcmp(what, "tasks") == 0) return pg_task_count(&s->base, wf_id);
  return -1;
}

/* ---- memory (ops/memory.c) ---- */

int pg_memory_put(store *st_, const memory_row *m) {
  pg *s = (pg *)st_;
  /* no order across entries: the insert keeps the first of an id (ON CONFLICT) */
  if (pg_batch_begin(s) != STORE_OK) return STORE_ERR;
  pg_params_start(s);
  const char *text[] = {m->id, m->kind, m->identity, m->text, m->evidence, m->session_id, m->request_id, m->approver};
  for (int i = 0; i < 8; i++) pg_bind_text(s, text[i]);
  pg_bind_int(s, m->approved_at);
  if (pg_exec_write(s, Q_MEM_PUT, "put memory") != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

int pg_memory_revoke(store *st_, const char *id, int64_t at, const char *by, const char *reason) {
  pg *s = (pg *)st_;
  /* no order across entries: the update takes the row (WHERE not revoked) */
  if (pg_batch_begin(s) != STORE_OK) return STORE_ERR;
  pg_params_start(s);
  pg_bind_int(s, at);
  pg_bind_text(s, by);
  pg_bind_text(s, reason);
  pg_bind_text(s, id);
  if (pg_exec_write(s, Q_MEM_REVOKE, "revoke memory") != STORE_OK) return STORE_ERR;
  return s->changes > 0;
}

int pg_memory_list(store *st_, const char *id, const char *kind, const char *identity, int live_only,
                   store_memory_cb cb, void *ud) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, id);
  pg_bind_text(s, kind);
  pg_bind_text(s, identity);
  pg_bind_int(s, live_only ? 1 : 0);
  PGresult *r = pq_run(s, Q_MEM_LIST, 0, "list memory");
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++) {
    memory_row m = {pg_col_text(r, i, 0), pg_col_text(r, i, 1), pg_col_text(r, i, 2),  pg_col_text(r, i, 3),
                    pg_col_text(r, i, 4), pg_col_text(r, i, 5), pg_col_text(r, i, 6),  pg_col_text(r, i, 7),
                    pg_col_int(r, i, 8),  pg_col_int(r, i, 9),  pg_col_text(r, i, 10), pg_col_text(r, i, 11)};
    if (cb(ud, &m)) break;
  }
  PQclear(r);
  return STORE_OK;
}
