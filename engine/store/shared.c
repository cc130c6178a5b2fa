/* shared: what both backends (sqlite*.c, pg*.c) and the dispatch (store.c)
 * use alike: the tables' schema and the statements made from it, the rows'
 * free functions, the knob that fails a write on purpose and the others
 * both read, and what makes a delivery accepted (the hash chains and their
 * checks are chain.c's). Nothing here
 * calls a backend, so the backends and the dispatch do not call each other
 * in a loop. */
#include "store.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "crash.h"
#include "util.h"

/* The fault knob's name for a write: a kind of store_fault_hit's what. */
static const char *fault_kind(const char *what) {
  static const char *const kinds[][2] = {
      {"append history", "append"}, {"append domain", "event"}, {"task", "task"},      {"signal", "signal"},
      {"module", "code"},           {"store code", "code"},     {"meta", "meta"},      {"begin", "begin"},
      {"commit", "commit"},         {"token", "token"},         {"slot", "slot"},      {"counter", "counter"},      {"schedule", "schedule"},
      {"memory", "memory"},
  };
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
    if (strstr(what, kinds[i][0])) return kinds[i][1];
  return "workflow";
}

int store_fault_hit(const char *what) {
  int hit = fault_point(fault_kind(what));
  if (fault_point("write")) hit = 1;
  return hit;
}

/* ENGINE_BUSY_TIMEOUT_MS: how long a write waits for another's lock. */
int store_busy_timeout_ms(void) {
  const char *btm = getenv("ENGINE_BUSY_TIMEOUT_MS");
  return btm ? atoi(btm) : 5000;
}

/* ENGINE_STORE_MAX_LENGTH (bytes), for tests: the longest value a parameter
 * takes, lowered so a bind fails for real without a gigabyte value; 0 when
 * unset (the backend's own limit). */
int store_max_length(void) {
  const char *maxlen = getenv("ENGINE_STORE_MAX_LENGTH");
  return maxlen && atoi(maxlen) > 0 ? atoi(maxlen) : 0;
}

int store_delivery_accepted(const char *outcome) {
  return strcmp(outcome, "started") == 0 || strcmp(outcome, "existing") == 0;
}

void store_wf_view_free(wf_view *v) {
  wf_row_free(&v->w);
  hist_list_free(&v->h);
  memset(v, 0, sizeof *v);
}

void wf_row_free(wf_row *w) {
  free(w->id);
  free(w->status);
  free(w->script_name);
  free(w->script_dir);
  free(w->code_hash);
  free(w->input);
  free(w->result);
  free(w->error);
  free(w->parent);
  free(w->parent_close);
  free(w->forked_from);
  memset(w, 0, sizeof *w);
}

void hist_list_free(hist_list *l) {
  for (size_t i = 0; i < l->n; i++) {
    free((char *)l->v[i].type);
    free((char *)l->v[i].name);
    free((char *)l->v[i].hash);
    free((char *)l->v[i].payload);
    free((char *)l->v[i].chain);
  }
  free(l->v);
  memset(l, 0, sizeof *l);
}

#define TABLE(name, types, nkey, ...) {name, (const char *const[]){__VA_ARGS__}, types, \
    sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *), nkey, 0}
/* Both backends' schema (sqlite.c, pg.c), column by column; the
 * PostgreSQL store's own commits counter is not data. */
const store_table store_tables[] = {
    TABLE("meta", "tt", 1, "key", "value"),
    TABLE("code", "ttb", 1, "hash", "name", "source"),
    TABLE("workflows", "titttttttiiitttiii", 1, "id", "run", "status", "script_name", "script_dir", "code_hash",
          "input", "result", "error", "cancel", "created_at", "updated_at", "parent", "parent_close", "forked_from",
          "hist_from_run", "hist_from_seq", "dom_from"),
    TABLE("chain_heads", "ttitti", 1, "wf_id", "hist_head", "hist_seq", "hist_base", "dom_head", "dom_seq"),
    TABLE("history", "tiititttit", 3, "wf_id", "run", "seq", "type", "ref", "name", "hash", "payload", "time", "chain"),
    TABLE("run_modules", "titt", 3, "wf_id", "run", "module", "hash"),
    {"tasks", (const char *const[]){"id", "wf_id", "kind", "seq", "run_at", "attempt", "first_at", "lease_owner",
                                     "lease_until"},
     "ittiiiiti", 9, 1, 1},
    TABLE("signals", "ittti", 1, "id", "wf_id", "name", "payload", "time"),
    TABLE("domain_events", "tititt", 2, "session_id", "seq", "type", "time", "payload", "chain"),
    TABLE("event_feed", "iti", 1, "id", "session_id", "seq"),
    TABLE("tokens", "ttiiit", 1, "name", "hash", "scopes", "created_at", "revoked_at", "grants"),
    TABLE("slots", "itttiiii", 1, "id", "pool", "key", "wf_id", "seq", "lim", "held", "since"),
    TABLE("counters", "triii", 1, "name", "value", "window_start", "paused_until", "updated_at"),
    TABLE("deliveries", "ittititt", 1, "id", "trig", "delivery", "received_at", "outcome", "status", "wf_id",
          "detail"),
    TABLE("schedules", "ttttttiiiiiiiii", 1, "name", "cron", "tz", "script", "input", "overlap", "catchup_window_ms",
          "jitter_ms", "paused", "next_fire_at", "last_fire_at", "buffered_fire_at", "skipped_count", "updated_at",
          "created_at"),
    TABLE("memory", "ttttttttiitt", 1, "id", "kind", "identity", "text", "evidence", "session_id", "request_id",
          "approver", "approved_at", "revoked_at", "revoked_by", "revoke_reason"),
};
const int store_ntables = (int)(sizeof store_tables / sizeof *store_tables);
#undef TABLE

/* Appends to buf (n bytes, kept NUL-terminated). */
static void put(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(char *buf, size_t n, const char *fmt, ...) {
  size_t len = strlen(buf);
  if (len + 1 >= n) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, n - len, fmt, ap);
  va_end(ap);
}

/* Column i of t as the backend names it (SQLite's rowid, PostgreSQL's id). */
static const char *column(const store_table *t, int i, int pg) {
  return i == 0 && t->rowid && !pg ? "rowid" : t->columns[i];
}

static void key_list(char *buf, size_t n, const store_table *t, int pg) {
  for (int i = 0; i < t->nkey; i++) put(buf, n, "%s%s", i ? "," : "", column(t, i, pg));
}

char *store_table_sql(const store_table *t, store_table_stmt what, int pg) {
  char buf[2048] = "";
  switch (what) {
  case STORE_TABLE_FIRST:
  case STORE_TABLE_AFTER:
    put(buf, sizeof buf, "SELECT ");
    for (int i = 0; i < t->ncolumns; i++) put(buf, sizeof buf, "%s%s", i ? "," : "", column(t, i, pg));
    put(buf, sizeof buf, " FROM %s", t->name);
    if (what == STORE_TABLE_AFTER) {
      put(buf, sizeof buf, " WHERE (");
      key_list(buf, sizeof buf, t, pg);
      put(buf, sizeof buf, ")>(");
      for (int i = 0; i < t->nkey; i++) put(buf, sizeof buf, "%s$%d", i ? "," : "", i + 1);
      put(buf, sizeof buf, ")");
    }
    put(buf, sizeof buf, " ORDER BY ");
    key_list(buf, sizeof buf, t, pg);
    put(buf, sizeof buf, " LIMIT $%d", what == STORE_TABLE_AFTER ? t->nkey + 1 : 1);
    break;
  case STORE_TABLE_INSERT:
  case STORE_TABLE_REPLACE:
    put(buf, sizeof buf, "INSERT %sINTO %s(", what == STORE_TABLE_REPLACE && !pg ? "OR REPLACE " : "", t->name);
    for (int i = 0; i < t->ncolumns; i++) put(buf, sizeof buf, "%s%s", i ? "," : "", column(t, i, pg));
    put(buf, sizeof buf, ") VALUES(");
    for (int i = 0; i < t->ncolumns; i++) put(buf, sizeof buf, "%s$%d", i ? "," : "", i + 1);
    put(buf, sizeof buf, ")");
    if (what == STORE_TABLE_REPLACE && pg) {
      put(buf, sizeof buf, " ON CONFLICT(");
      key_list(buf, sizeof buf, t, pg);
      put(buf, sizeof buf, ") DO UPDATE SET ");
      for (int i = t->nkey; i < t->ncolumns; i++)
        put(buf, sizeof buf, "%s%s=excluded.%s", i > t->nkey ? "," : "", t->columns[i], t->columns[i]);
    }
    break;
  case STORE_TABLE_COUNT:
    put(buf, sizeof buf, "SELECT count(*) FROM %s", t->name);
    break;
  case STORE_TABLE_SERIAL:
    /* the tables whose id PostgreSQL makes (BIGSERIAL) */
    if (!pg || t->nkey != 1 || strcmp(t->columns[0], "id") != 0 || t->types[0] != 'i') return NULL;
    put(buf, sizeof buf, "SELECT setval(pg_get_serial_sequence('%s','id'),(SELECT COALESCE(max(id),0)+1 FROM %s),false)",
        t->name, t->name);
    break;
  }
  return util_strdup(buf);
}
