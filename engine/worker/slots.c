/* slots: the engine's durable limits. A workflow asks through a blocking
 * command (wf.acquire, wf.release, wf.counter, wf.rate) and its outcome is
 * appended in the same batch as the store rows it changed, so after a crash
 * at any point the counts equal what the log says.
 *
 *   slot      at most `limit` runs hold (pool, key); the others queue first
 *             come first served and are woken (a "wake" task) when one is
 *             handed to them. The run's end releases whatever it holds.
 *   counter   a named total (quotas): add and read back.
 *   rate      a fixed window of per_ms shared by every run: waits until the
 *             window has room (or a pause ends), then takes its cost.
 *
 * Who gets a slot is decided here and only here (slots_grant). */
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crash.h"
#include "json.h"

/* Slots handed out by one release at most (a limit is at most 1,000,000). */
#define LIMIT_GRANTS 1000001

typedef struct slot_copy {
  int found, held;
  int64_t seq, limit, since, position;
  char wf_id[ENGINE_ID_MAX + 1];
} slot_copy;

static int copy_slot(void *ud, const slot_row *r) {
  slot_copy *c = ud;
  c->found = 1;
  c->held = r->held;
  c->seq = r->seq;
  c->limit = r->limit;
  c->since = r->since;
  c->position = r->position;
  snprintf(c->wf_id, sizeof c->wf_id, "%s", r->wf_id);
  return 0;
}

/* Hands free slots of (pool, key) to the head of its queue, in order; each
 * run that got one, other than `self` (which looks itself), is woken. */
static int slots_grant(engine *e, const char *pool, const char *key, const char *self) {
  for (int i = 0; i < LIMIT_GRANTS; i++) { /* bounded: a head the update missed must not spin the loop */
    slot_copy head = {0};
    int got = store_slot_head(e->st, pool, key, copy_slot, &head);
    if (got <= 0) return got;
    int64_t held = store_slot_count(e->st, pool, key, 1);
    if (held < 0) return -1;
    if (held >= head.limit) return 0;
    int64_t now = util_now_ms();
    if (store_slot_hold(e->st, head.wf_id, pool, key, now) != STORE_OK) return -1;
    crash_point("slot.grant");
    if (!self || strcmp(head.wf_id, self) != 0) {
      if (tasks_put(e, head.wf_id, "wake", head.seq, now) != 0) return -1;
    }
  }
  return 0;
}

typedef struct rows {
  char **pool, **key;
  size_t n, cap;
} rows;

static int collect(void *ud, const slot_row *r) {
  rows *v = ud;
  if (v->n == v->cap) {
    v->cap = v->cap ? 2 * v->cap : 4;
    v->pool = util_xrealloc(v->pool, v->cap * sizeof *v->pool);
    v->key = util_xrealloc(v->key, v->cap * sizeof *v->key);
  }
  v->pool[v->n] = util_strdup(r->pool);
  v->key[v->n++] = util_strdup(r->key);
  return 0;
}

static void rows_free(rows *v) {
  for (size_t i = 0; i < v->n; i++) {
    free(v->pool[i]);
    free(v->key[i]);
  }
  free(v->pool);
  free(v->key);
}

void slots_release_all(engine *e, const char *wf_id) {
  rows v = {0};
  if (store_slot_list(e->st, wf_id, NULL, NULL, collect, &v) == STORE_OK) {
    for (size_t i = 0; i < v.n; i++) {
      if (store_slot_del(e->st, wf_id, v.pool[i], v.key[i]) < 0) break;
      crash_point("slot.release");
      if (slots_grant(e, v.pool[i], v.key[i], NULL) < 0) break;
    }
  }
  rows_free(&v);
}

typedef struct ids {
  const char *self;
  char **v;
  size_t n, cap;
} ids;

static int collect_other(void *ud, const slot_row *r) {
  ids *x = ud;
  if (strcmp(r->wf_id, x->self) == 0) return 0;
  if (x->n == x->cap) {
    x->cap = x->cap ? 2 * x->cap : 4;
    x->v = util_xrealloc(x->v, x->cap * sizeof *x->v);
  }
  x->v[x->n++] = util_strdup(r->wf_id);
  return 0;
}

/* cancel_in_progress: every other run holding or queued for (pool, key) is
 * cancelled the way `engine cancel` does it (its sandbox is destroyed, the
 * cancellation recorded with who asked). */
static int cancel_others(wfrun *r, const char *pool, const char *key) {
  ids x = {r->id, NULL, 0, 0};
  int rc = store_slot_list(r->e->st, NULL, pool, key, collect_other, &x) == STORE_OK ? 0 : -1;
  char who[400], err[512];
  snprintf(who, sizeof who, "engine:concurrency:%s", r->id);
  for (size_t i = 0; i < x.n; i++) {
    /* in this batch, without dispatching now (a run is being handled) */
    if (rc == 0 && ops_write_cancel(r->e->st, x.v[i], who, err, sizeof err) == 0) {
      engine_touch(r->e, x.v[i]);
      tasks_arm(r->e, util_now_ms());
    } else if (rc == 0 && store_batch_failed(r->e->st)) {
      rc = -1;
    }
    free(x.v[i]);
  }
  free(x.v);
  return rc;
}

/* The number field k of a command's arguments. */
static double arg_num(const char *args, const char *k, double dflt) {
  const char *v;
  size_t n;
  if (!args || json_get(args, strlen(args), k, &v, &n) != 1) return dflt;
  char buf[64];
  snprintf(buf, sizeof buf, "%.*s", (int)(n < 63 ? n : 63), v);
  return strtod(buf, NULL);
}

static void fmt_number(char *out, size_t n, double v) {
  if (v == (double)(int64_t)v && v > -9e15 && v < 9e15) snprintf(out, n, "%lld", (long long)v);
  else snprintf(out, n, "%.17g", v);
}

/* Appends the command's outcome: 1 (deliver it), or -1 when the append failed.
 * The event points at its payload, so the run keeps the bytes (r->answer)
 * until the caller has delivered it. */
static int answer(wfrun *r, const wfvm_cmd *c, const char *type, const char *payload, hist_event *ev) {
  snprintf(r->answer, sizeof r->answer, "%s", payload);
  return run_append(r, type, c->seq, c->name, NULL, r->answer, ev) >= 0 ? 1 : -1;
}

/* Waits: a status people read, and the run leaves memory (the caller). */
static int wait_for(wfrun *r, const char *detail) {
  run_set_status(r, "queued", NULL, NULL, detail);
  return 0;
}

static int acquire(wfrun *r, const wfvm_cmd *c, hist_event *ev) {
  engine *e = r->e;
  char *key = json_get_string(c->payload, strlen(c->payload), "key"),
       *strategy = json_get_string(c->payload, strlen(c->payload), "strategy");
  int64_t limit = (int64_t)arg_num(c->payload, "limit", 1);
  const char *pool = c->name;
  int rc = 0;
  slot_copy mine = {0};
  if (!key || !strategy || store_slot_get(e->st, r->id, pool, key, copy_slot, &mine) < 0) {
    rc = -1;
    goto out;
  }
  if (!mine.found) {
    if (strcmp(strategy, "drop") == 0) {
      int64_t held = store_slot_count(e->st, pool, key, 1), queued = store_slot_count(e->st, pool, key, 0);
      if (held < 0 || queued < 0) {
        rc = -1;
        goto out;
      }
      if (held >= limit || queued > 0) {
        char p[96];
        snprintf(p, sizeof p, "{\"held\":%lld,\"limit\":%lld}", (long long)held, (long long)limit);
        rc = answer(r, c, "SlotDropped", p, ev);
        goto out;
      }
    }
    if (store_slot_put(e->st, pool, key, r->id, c->seq, limit, util_now_ms()) != STORE_OK) {
      rc = -1;
      goto out;
    }
    crash_point("slot.queue");
    if (strcmp(strategy, "cancel_in_progress") == 0 && cancel_others(r, pool, key) != 0) {
      rc = -1;
      goto out;
    }
    if (slots_grant(e, pool, key, r->id) < 0 || store_slot_get(e->st, r->id, pool, key, copy_slot, &mine) < 0) {
      rc = -1;
      goto out;
    }
  }
  if (mine.held) {
    rc = answer(r, c, "SlotGranted", "true", ev);
    goto out;
  }
  char detail[400];
  snprintf(detail, sizeof detail, "slot %s%s%s (position %lld, limit %lld)", pool, *key ? " key " : "", key,
           (long long)mine.position, (long long)mine.limit);
  rc = wait_for(r, detail);
out:
  free(key);
  free(strategy);
  return rc;
}

static int release(wfrun *r, const wfvm_cmd *c, hist_event *ev) {
  char *key = json_get_string(c->payload, strlen(c->payload), "key");
  int held = key ? store_slot_del(r->e->st, r->id, c->name, key) : -1;
  if (held > 0) crash_point("slot.release");
  int rc = held < 0 || slots_grant(r->e, c->name, key, NULL) < 0 ? -1
                                                                    : answer(r, c, "SlotReleased", held ? "true" : "false", ev);
  free(key);
  return rc;
}

static int counter(wfrun *r, const wfvm_cmd *c, hist_event *ev) {
  char name[300];
  snprintf(name, sizeof name, "total:%s", c->name);
  counter_row row;
  if (store_counter_get(r->e->st, name, &row) < 0) return -1;
  row.value += arg_num(c->payload, "delta", 0);
  row.updated_at = util_now_ms();
  if (store_counter_put(r->e->st, name, &row) != STORE_OK) return -1;
  char v[40];
  fmt_number(v, sizeof v, row.value);
  return answer(r, c, "CounterUpdated", v, ev);
}

/* The window of a rate as it is now: a new window starts empty. */
static int rate_window(wfrun *r, const wfvm_cmd *c, char *name, size_t n, counter_row *row, int64_t *now) {
  snprintf(name, n, "rate:%s", c->name);
  int64_t per = (int64_t)arg_num(c->payload, "per_ms", 60000);
  if (per < 1) per = 1;
  if (store_counter_get(r->e->st, name, row) < 0) return -1;
  *now = util_now_ms();
  int64_t start = *now - *now % per;
  if (row->window_start != start) {
    row->window_start = start;
    row->value = 0;
  }
  return 0;
}

static int rate(wfrun *r, const wfvm_cmd *c, hist_event *ev) {
  char name[300];
  counter_row row;
  int64_t now;
  if (rate_window(r, c, name, sizeof name, &row, &now) != 0) return -1;
  double limit = arg_num(c->payload, "limit", 1), cost = arg_num(c->payload, "cost", 1);
  int64_t per = (int64_t)arg_num(c->payload, "per_ms", 60000), until = 0;
  if (row.paused_until > now) until = row.paused_until;
  /* a cost past the whole limit goes through in an empty window, or it would wait forever */
  else if (row.value >= limit || (row.value > 0 && row.value + cost > limit)) until = row.window_start + per;
  if (!until) {
    row.value += cost;
    row.updated_at = now;
    if (store_counter_put(r->e->st, name, &row) != STORE_OK) return -1;
    char p[64];
    fmt_number(p, sizeof p, (double)(now - c->time) / 1000.0);
    return answer(r, c, "RateGranted", p, ev);
  }
  if (tasks_put(r->e, r->id, "wake", c->seq, until) != 0) return -1;
  char detail[400];
  snprintf(detail, sizeof detail, "rate %s (%s until %lld)", c->name, row.paused_until > now ? "paused" : "full",
           (long long)until);
  return wait_for(r, detail);
}

static int rate_charge(wfrun *r, const wfvm_cmd *c, hist_event *ev) {
  char name[300];
  counter_row row;
  int64_t now;
  if (rate_window(r, c, name, sizeof name, &row, &now) != 0) return -1;
  row.value += arg_num(c->payload, "charge", 0);
  int64_t pause = (int64_t)arg_num(c->payload, "pause_ms", 0);
  if (pause > 0 && now + pause > row.paused_until) row.paused_until = now + pause;
  row.updated_at = now;
  if (store_counter_put(r->e->st, name, &row) != STORE_OK) return -1;
  return answer(r, c, "RateCharged", "true", ev);
}

static int slots_command(wfrun *r, const wfvm_cmd *c, hist_event *ev, void **keep) {
  (void)keep;
  if (strcmp(c->kind, "slot") == 0) return acquire(r, c, ev);
  if (strcmp(c->kind, "release") == 0) return release(r, c, ev);
  if (strcmp(c->kind, "counter") == 0) return counter(r, c, ev);
  if (strcmp(c->kind, "rate") == 0) return rate(r, c, ev);
  if (strcmp(c->kind, "ratecharge") == 0) return rate_charge(r, c, ev);
  return 0;
}

/* The kinds of command this file answers (runs.c asks it through them). */
static const run_command slot_commands[] = {
    {"slot", slots_command, NULL, NULL},    {"release", slots_command, NULL, NULL},
    {"counter", slots_command, NULL, NULL}, {"rate", slots_command, NULL, NULL},
    {"ratecharge", slots_command, NULL, NULL},
};

void slots_init(engine *e) {
  for (size_t i = 0; i < sizeof slot_commands / sizeof *slot_commands; i++) runs_register(e, &slot_commands[i]);
  e->on_run_end = slots_release_all; /* what a run held or queued for goes to the next in line */
}
