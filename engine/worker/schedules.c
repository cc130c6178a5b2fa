/* schedules: cron schedules that start workflows (schedules.h). The client
 * operations first, then the part that runs inside engine serve. */
#include "schedules.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crash.h"
#include "cron.h"
#include "json.h"
#include "log.h"
#include "render.h"
#include "util.h"

/* A fire this many fires late is not counted one by one: the rest of a long
 * downtime is skipped as one jump (skipped_count then counts it as one). */
#define SCHEDULE_SCAN_MAX 100000
/* At most this many fires of one schedule are caught up in one pass. */
#define SCHEDULE_CATCHUP_MAX 100
/* The timer never sleeps longer: a wall clock that jumps is seen soon. */
#define SCHEDULE_TICK_MAX_MS 60000

static const char *const OVERLAPS[] = {"skip", "buffer_one", "allow_all", "cancel_other", NULL};

/* ------------------------------------------------------------ helpers --- */

int schedule_parse_duration(const char *s, int64_t *ms, char *err, size_t errlen) {
  char *end = NULL;
  if (!s || !*s || *s < '0' || *s > '9') goto bad;
  unsigned long long n = strtoull(s, &end, 10);
  int64_t unit;
  if (strcmp(end, "ms") == 0)
    unit = 1;
  else if (strcmp(end, "s") == 0)
    unit = 1000;
  else if (strcmp(end, "m") == 0)
    unit = 60000;
  else if (strcmp(end, "h") == 0)
    unit = 3600000;
  else if (strcmp(end, "d") == 0)
    unit = 86400000;
  else if (*end == 0 && n == 0)
    unit = 1;
  else
    goto bad;
  if (n > (unsigned long long)(INT64_MAX / unit) || n * (unsigned long long)unit > 366ull * 86400000) {
    util_seterr(err, errlen, "duration '%s' is longer than a year", s);
    return -1;
  }
  *ms = (int64_t)n * unit;
  return 0;
bad:
  util_seterr(err, errlen, "duration '%s' is not a number with a unit (ms, s, m, h or d: 30s, 5m, 2h, 1d)", s ? s : "");
  return -1;
}

int schedule_check_name(const char *name, char *err, size_t errlen) {
  char what[160];
  if (engine_name_problem(name, SCHEDULE_NAME_MAX, "._-", what, sizeof what) == 0 && !strstr(name, "..")) return 0;
  if (!*what) snprintf(what, sizeof what, "it contains \"..\"");
  char *q = json_quote(name);
  util_seterr(err, errlen, "schedule name %.80s: %s (1-%d of A-Z a-z 0-9 . _ -, starting with a letter or a digit)", q,
              what, SCHEDULE_NAME_MAX);
  free(q);
  return -1;
}

/* FNV-1a of name and the fire: the same offset on every run of the engine. */
int64_t schedule_fire_at(const char *name, int64_t nominal_ms, int64_t jitter_ms) {
  if (jitter_ms <= 0) return nominal_ms;
  uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
  for (int i = 0; i < 8; i++) h = (h ^ (((uint64_t)nominal_ms >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  return nominal_ms + (int64_t)(h % (uint64_t)jitter_ms);
}

void schedule_format_utc(int64_t ms, int with_ms, char *out, size_t n) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  int y = tm.tm_year + 1900;
  if (y < 0 || y > 9999) y = 0; /* cron_next searches a few years ahead: never */
  snprintf(out, n, "%04d%02d%02dT%02d%02d%02d", y, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  size_t used = strlen(out);
  if (with_ms)
    snprintf(out + used, n - used, ".%03dZ", (int)(ms % 1000));
  else
    snprintf(out + used, n - used, "Z");
}

/* The first nominal fire strictly after after_ms (whole seconds), 0 with
 * err when there is none or the zone cannot be read. */
static int64_t next_after(const cron_expr *c, const char *tz, int64_t after_ms, char *err, size_t errlen) {
  int64_t next;
  int64_t after = after_ms >= 0 ? after_ms / 1000 : -((-after_ms + 999) / 1000);
  if (cron_next(c, tz, after, &next, err, errlen) != 0) return 0;
  return next * 1000;
}

/* An owned copy of a row (the store's strings live only in its callback). */
typedef struct sched {
  schedule_row r;
  char *name, *cron, *tz, *script, *input, *overlap;
} sched;

static int copy_row(void *ud, const schedule_row *r) {
  sched *s = ud;
  s->r = *r;
  s->r.name = s->name = util_strdup(r->name);
  s->r.cron = s->cron = util_strdup(r->cron);
  s->r.tz = s->tz = util_strdup(r->tz);
  s->r.script = s->script = util_strdup(r->script);
  s->r.input = s->input = util_strdup(r->input);
  s->r.overlap = s->overlap = util_strdup(r->overlap);
  return 0;
}

static void sched_free(sched *s) {
  free(s->name);
  free(s->cron);
  free(s->tz);
  free(s->script);
  free(s->input);
  free(s->overlap);
}

/* Reads schedule name into *out: 0, or SCHEDULE_UNKNOWN or -1 with err. */
static int load(store *st, const char *name, sched *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  int found = store_schedule_get(st, name, copy_row, out);
  if (found == 1) return 0;
  if (found < 0)
    util_seterr(err, errlen, "cannot read schedule %s: %s", name, store_errmsg(st));
  else
    util_seterr(err, errlen, "no schedule named %s (see engine schedule list)", name);
  return found < 0 ? -1 : SCHEDULE_UNKNOWN;
}

/* Commits what a client operation wrote, or says why not. */
static int commit(store *st, char *err, size_t errlen) {
  if (store_commit(st) == STORE_OK) return 0;
  util_seterr(err, errlen, "%s", store_errmsg(st));
  store_rollback(st);
  return -1;
}

/* A write's store answer: -1 with the store's error (rc < 0), code with
 * none (rc == 0: why nothing was written), else 0. */
static int written(store *st, int rc, int code, const char *none, char *err, size_t errlen) {
  if (rc > 0) return 0;
  util_seterr(err, errlen, "%s", rc < 0 ? store_errmsg(st) : none);
  return rc < 0 ? -1 : code;
}

/* The CLI's end of an operation: committed when it succeeded, else rolled back. */
static int cli_end(store *st, int rc, char *err, size_t errlen) {
  if (rc == 0) return commit(st, err, errlen);
  store_rollback(st);
  return -1;
}

/* ---------------------------------------------------- client operations --- */

/* Checks sp: 0 with *first (the first fire after now_ms), real (the
 * script's resolved path) and *input (canonical, malloc'd), or -1 with err. */
static int check_spec(const schedule_spec *sp, int64_t now_ms, int64_t *first_out, char real[PATH_MAX],
                      char **input_out, char *err, size_t errlen) {
  char why[1024];
  if (schedule_check_name(sp->name, err, errlen) != 0) return -1;
  cron_expr c;
  if (cron_parse(sp->cron, &c, why, sizeof why) != 0) {
    util_seterr(err, errlen, "--cron '%s': %s", sp->cron, why);
    return -1;
  }
  const char *tz = sp->tz && *sp->tz ? sp->tz : "UTC";
  int64_t first = next_after(&c, tz, now_ms, why, sizeof why);
  if (!first) {
    util_seterr(err, errlen, "--cron '%s' --tz %s: %s", sp->cron, tz, why);
    return -1;
  }
  const char *overlap = sp->overlap ? sp->overlap : "skip";
  int known = 0;
  for (const char *const *o = OVERLAPS; *o; o++) known |= strcmp(*o, overlap) == 0;
  if (!known) {
    util_seterr(err, errlen, "--overlap %s: not a policy (skip, buffer_one, allow_all or cancel_other)", overlap);
    return -1;
  }
  if (sp->catchup_window_ms < 0 || sp->jitter_ms < 0) {
    util_seterr(err, errlen, "--catchup-window and --jitter cannot be negative");
    return -1;
  }
  if (!realpath(sp->script, real)) {
    util_seterr(err, errlen, "--workflow %s: no such workflow file", sp->script);
    return -1;
  }
  size_t len;
  char *src = engine_read_script(real, &len, why, sizeof why);
  int bad = !src || engine_check_script(real, src, len, why, sizeof why) != 0;
  free(src);
  if (bad) {
    util_seterr(err, errlen, "--workflow %s: %s", sp->script, why);
    return -1;
  }
  char *input = json_canonical(sp->input ? sp->input : "{}", why, sizeof why);
  if (!input) {
    util_seterr(err, errlen, "--input: %s", why);
    return -1;
  }
  *first_out = first;
  *input_out = input;
  return 0;
}

int schedule_check(const schedule_spec *sp, int64_t now_ms, char *err, size_t errlen) {
  int64_t first;
  char real[PATH_MAX], *input = NULL;
  if (check_spec(sp, now_ms, &first, real, &input, err, errlen) != 0) return -1;
  free(input);
  return 0;
}

int schedule_create(store *st, const schedule_spec *sp, int64_t now_ms, char *err, size_t errlen) {
  return cli_end(st, schedule_create_in(st, sp, now_ms, err, errlen), err, errlen);
}

int schedule_create_in(store *st, const schedule_spec *sp, int64_t now_ms, char *err, size_t errlen) {
  int64_t first;
  char real[PATH_MAX], *input = NULL;
  if (check_spec(sp, now_ms, &first, real, &input, err, errlen) != 0) return -1;
  const char *tz = sp->tz && *sp->tz ? sp->tz : "UTC", *overlap = sp->overlap ? sp->overlap : "skip";
  schedule_row r = {sp->name, sp->cron, tz, real, input,  overlap, sp->catchup_window_ms, sp->jitter_ms, 0,
                    first,    0,        0,  0,    now_ms, now_ms};
  int rc = store_schedule_insert(st, &r);
  free(input);
  char exists[300];
  snprintf(exists, sizeof exists, "a schedule named %s exists already (engine schedule delete %s first)", sp->name,
           sp->name);
  return written(st, rc, SCHEDULE_TAKEN, exists, err, errlen);
}

int schedule_set_paused(store *st, const char *name, int paused, int64_t now_ms, char *err, size_t errlen) {
  return cli_end(st, schedule_set_paused_in(st, name, paused, now_ms, err, errlen), err, errlen);
}

int schedule_set_paused_in(store *st, const char *name, int paused, int64_t now_ms, char *err, size_t errlen) {
  sched s;
  int rc = load(st, name, &s, err, errlen);
  if (rc != 0) return rc;
  if (!paused) {
    /* a resume starts from now: fires while paused were not missed */
    cron_expr c;
    char why[512];
    int64_t next = cron_parse(s.r.cron, &c, why, sizeof why) == 0 ? next_after(&c, s.r.tz, now_ms, why, sizeof why) : 0;
    if (!next) {
      util_seterr(err, errlen, "schedule %s: %s", name, why);
      rc = -1;
    }
    s.r.next_fire_at = next;
  }
  if (rc == 0) {
    s.r.paused = paused;
    s.r.updated_at = now_ms;
    rc = written(st, store_schedule_update(st, &s.r), SCHEDULE_UNKNOWN, "the schedule went away", err, errlen);
  }
  sched_free(&s);
  return rc;
}

/* The input a fire starts with: the schedule's, with who started it. */
static char *fire_input(const sched *s, const char *identity, char *err, size_t errlen) {
  return engine_input_with_identity(s->r.input, identity, 0, err, errlen);
}

/* A manual start of name now: through the CLI's own commit (st) or into the
 * worker's batch (e). */
static int manual_start(store *st, engine *e, const char *name, const char *identity, int64_t now_ms, char *id,
                        size_t idlen, char *err, size_t errlen) {
  sched s;
  int rc = load(e ? engine_store(e) : st, name, &s, err, errlen), existed = 0;
  if (rc != 0) return rc;
  char when[40];
  schedule_format_utc(now_ms, 1, when, sizeof when);
  snprintf(id, idlen, "sched:%s:manual-%s", name, when);
  rc = -1;
  char *input = fire_input(&s, identity, err, errlen);
  if (input && (e ? engine_submit_queued(e, id, s.r.script, input, NULL, &existed, err, errlen)
                  : engine_create_workflow(st, id, s.r.script, input, NULL, &existed, err, errlen)) == 0) {
    rc = 0;
    if (existed) {
      util_seterr(err, errlen, "%s exists already (triggered in this millisecond)", id);
      rc = SCHEDULE_TAKEN;
    }
  }
  free(input);
  sched_free(&s);
  return rc;
}

int schedule_trigger(store *st, const char *name, const char *identity, int64_t now_ms, char *id, size_t idlen,
                     char *err, size_t errlen) {
  return manual_start(st, NULL, name, identity, now_ms, id, idlen, err, errlen) == 0 ? 0 : -1;
}

int schedule_delete(store *st, const char *name, char *err, size_t errlen) {
  return cli_end(st, schedule_delete_in(st, name, err, errlen), err, errlen);
}

int schedule_delete_in(store *st, const char *name, char *err, size_t errlen) {
  char none[200];
  snprintf(none, sizeof none, "no schedule named %s (see engine schedule list)", name);
  return written(st, store_schedule_del(st, name), SCHEDULE_UNKNOWN, none, err, errlen);
}

int schedule_trigger_in(engine *e, const char *name, const char *identity, int64_t now_ms, char *id, size_t idlen,
                        char *err, size_t errlen) {
  return manual_start(NULL, e, name, identity, now_ms, id, idlen, err, errlen);
}

char *schedule_json(const schedule_row *r) {
  char next[40] = "null", last[40] = "null";
  if (r->next_fire_at) {
    int64_t at = schedule_fire_at(r->name, r->next_fire_at, r->jitter_ms);
    time_t t = (time_t)(at / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(next, sizeof next, "\"%Y-%m-%dT%H:%M:%SZ\"", &tm);
  }
  if (r->last_fire_at) {
    time_t t = (time_t)(r->last_fire_at / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(last, sizeof last, "\"%Y-%m-%dT%H:%M:%SZ\"", &tm);
  }
  char *name = json_quote(r->name), *cron = json_quote(r->cron), *tz = json_quote(r->tz), *wf = json_quote(r->script),
       *ov = json_quote(r->overlap);
  char *out = util_fmt("{\"name\":%s,\"cron\":%s,\"tz\":%s,\"workflow\":%s,\"input\":%s,\"overlap\":%s,"
                       "\"catchup_window_ms\":%lld,\"jitter_ms\":%lld,\"paused\":%s,\"next_fire_at\":%s,"
                       "\"last_fire_at\":%s,\"skipped_count\":%lld,\"buffered\":%s,\"created_at\":%lld}",
                       name, cron, tz, wf, r->input, ov, (long long)r->catchup_window_ms, (long long)r->jitter_ms,
                       r->paused ? "true" : "false", next, last, (long long)r->skipped_count,
                       r->buffered_fire_at ? "true" : "false", (long long)r->created_at);
  free(name), free(cron), free(tz), free(wf), free(ov);
  return out;
}

/* ------------------------------------------------- inside engine serve --- */

struct schedules {
  engine *e;
  uv_timer_t *timer; /* freed in its close callback */
  dbwatch *watch;
  int retry_armed;
  int fired; /* fires started in this pass */
};

static void on_timer(uv_timer_t *t);

static void arm(schedules *sc, int64_t delay_ms) {
  if (delay_ms < 0) delay_ms = 0;
  if (delay_ms > SCHEDULE_TICK_MAX_MS) delay_ms = SCHEDULE_TICK_MAX_MS;
  uv_timer_start(sc->timer, on_timer, (uint64_t)delay_ms, 0);
}

typedef struct running {
  char ids[16][ENGINE_ID_MAX + 1];
  int n;
} running;

static int add_running(void *ud, const wf_row *w) {
  running *r = ud;
  if (r->n < 16) snprintf(r->ids[r->n++], sizeof r->ids[0], "%s", w->id);
  return 0;
}

/* The unfinished workflows this schedule started (fires and triggers): a
 * range of the id index, which sees this batch's own starts. */
static int find_running(store *st, const char *name, running *out) {
  char prefix[SCHEDULE_NAME_MAX + 16];
  snprintf(prefix, sizeof prefix, "sched:%s:", name);
  out->n = 0;
  return store_wf_ids(st, prefix, "running,waiting,queued", 16, add_running, out);
}

/* Starts fire nominal_ms of s into the engine's batch: 1 started (or
 * found, from a batch before a crash), 0 not (said on stderr). */
static int start_fire(schedules *sc, const sched *s, int64_t nominal_ms) {
  char when[32], id[ENGINE_ID_MAX + 1], err[1024], who[SCHEDULE_NAME_MAX + 16];
  schedule_format_utc(nominal_ms, 0, when, sizeof when);
  snprintf(id, sizeof id, "sched:%s:%s", s->r.name, when);
  snprintf(who, sizeof who, "schedule:%s", s->r.name);
  char *input = fire_input(s, who, err, sizeof err);
  int existed = 0;
  int ok = input && engine_submit_queued(sc->e, id, s->r.script, input, NULL, &existed, err, sizeof err) == 0;
  free(input);
  if (!ok) log_msg(LOGL_ERROR, "schedule %s: cannot start %s: %s", s->r.name, id, err);
  sc->fired += ok;
  return ok;
}

/* Brings schedule s up to now: the buffered fire once nothing runs, then
 * every fire due, by its overlap policy; writes the row when it changed.
 * Returns the next instant it needs a pass at (INT64_MAX: none). */
static int64_t advance(schedules *sc, sched *s, int64_t now) {
  store *st = engine_store(sc->e);
  schedule_row *r = &s->r;
  if (r->paused) return INT64_MAX;
  int changed = 0;
  running run;
  if (find_running(st, r->name, &run) != STORE_OK) return now + 1000;
  if (r->buffered_fire_at && run.n == 0) {
    if (start_fire(sc, s, r->buffered_fire_at)) {
      r->last_fire_at = r->buffered_fire_at;
      run.n = 1;
    } else {
      r->skipped_count++;
    }
    r->buffered_fire_at = 0;
    changed = 1;
  }
  cron_expr c;
  char why[512];
  int parsed = cron_parse(r->cron, &c, why, sizeof why) == 0;
  int64_t window = r->catchup_window_ms > SCHEDULE_GRACE_MS ? r->catchup_window_ms : SCHEDULE_GRACE_MS;
  int64_t due[SCHEDULE_CATCHUP_MAX];
  int ndue = 0, scanned = 0;
  while (parsed && r->next_fire_at > 0 && schedule_fire_at(r->name, r->next_fire_at, r->jitter_ms) <= now) {
    int64_t t = r->next_fire_at, at = schedule_fire_at(r->name, t, r->jitter_ms);
    changed = 1;
    if (++scanned > SCHEDULE_SCAN_MAX) {
      /* a long downtime: the rest, up to the window, in one jump */
      r->next_fire_at = next_after(&c, r->tz, now - window - r->jitter_ms, why, sizeof why);
      r->skipped_count++;
      scanned = 0;
      continue;
    }
    r->next_fire_at = next_after(&c, r->tz, t, why, sizeof why);
    if (!r->next_fire_at) log_msg(LOGL_WARNING, "schedule %s fires no more: %s", r->name, why);
    if (at < now - window) {
      r->skipped_count++; /* missed beyond the catch-up window */
      continue;
    }
    if (ndue == SCHEDULE_CATCHUP_MAX) { /* the newest are the ones caught up */
      memmove(due, due + 1, (SCHEDULE_CATCHUP_MAX - 1) * sizeof *due);
      ndue--;
      r->skipped_count++;
    }
    due[ndue++] = t;
  }
  if (!parsed) log_msg(LOGL_WARNING, "schedule %s: %s", r->name, why);
  const char *o = r->overlap;
  int cancel_other = strcmp(o, "cancel_other") == 0;
  for (int i = 0; i < ndue; i++) {
    if (cancel_other && i + 1 < ndue) {
      r->skipped_count++; /* catching up: only the newest of the due fires starts */
      continue;
    }
    if (run.n > 0 && strcmp(o, "skip") == 0) {
      r->skipped_count++;
      continue;
    }
    if (run.n > 0 && strcmp(o, "buffer_one") == 0) {
      if (r->buffered_fire_at)
        r->skipped_count++; /* one waits already */
      else
        r->buffered_fire_at = due[i];
      continue;
    }
    for (int k = 0; cancel_other && k < run.n; k++) {
      char err[512];
      if (engine_cancel_local(sc->e, run.ids[k], "schedule:overlap", err, sizeof err) != 0)
        log_msg(LOGL_WARNING, "schedule %s: cannot cancel %s: %s", r->name, run.ids[k], err);
    }
    if (start_fire(sc, s, due[i])) {
      r->last_fire_at = due[i];
      run.n++;
    } else {
      r->skipped_count++;
    }
  }
  if (changed) {
    r->updated_at = now;
    if (store_schedule_update(st, r) < 0) log_msg(LOGL_ERROR, "schedule %s: %s", r->name, store_errmsg(st));
  }
  if (!r->next_fire_at) return INT64_MAX;
  return schedule_fire_at(r->name, r->next_fire_at, r->jitter_ms);
}

typedef struct sched_list {
  sched *v;
  size_t n, cap;
} sched_list;

static int add_sched(void *ud, const schedule_row *r) {
  sched_list *l = ud;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 8;
    l->v = util_xrealloc(l->v, l->cap * sizeof *l->v);
  }
  copy_row(&l->v[l->n++], r);
  return 0;
}

/* A lost batch took the fires of a pass with it: the row still says so, and
 * a pass soon starts them again. */
static void on_committed(void *ud, int ok) {
  schedules *sc = ud;
  sc->retry_armed = 0;
  if (ok) crash_point("schedule.committed"); /* tests: the fires are durable, nothing after them ran */
  if (!ok && sc->timer) arm(sc, 1000);
}

/* One pass over every schedule; the timer is armed for the earliest next
 * instant. The writes join the engine's batch, committed by its loop. */
static void pass(schedules *sc) {
  store *st = engine_store(sc->e);
  int64_t now = util_now_ms(), earliest = INT64_MAX;
  if (store_batch_failed(st)) { /* the store is failing: the engine retries it, and this pass after it */
    arm(sc, 1000);
    return;
  }
  sched_list l = {0};
  sc->fired = 0;
  int rc = store_schedule_list(st, add_sched, &l);
  if (rc == STORE_OK && l.n > 0) {
    /* read again in the batch that writes the fires, in commit order: of
     * several workers on one database, one fires an instant and the others
     * see it (with no schedule, no tick takes the order lock) */
    for (size_t i = 0; i < l.n; i++) sched_free(&l.v[i]);
    l.n = 0;
    rc = store_begin(st) == STORE_OK ? store_schedule_list(st, add_sched, &l) : STORE_ERR;
  }
  if (rc != STORE_OK) {
    log_msg(LOGL_ERROR, "cannot read the schedules: %s", store_errmsg(st));
    earliest = now + 1000;
  }
  for (size_t i = 0; i < l.n; i++) {
    int64_t at = advance(sc, &l.v[i], now);
    if (at < earliest) earliest = at;
    sched_free(&l.v[i]);
  }
  free(l.v);
  if (sc->fired) crash_point("schedule.fired"); /* tests: started in the batch, not yet committed */
  if (store_in_txn(st) && !sc->retry_armed) {
    sc->retry_armed = 1;
    engine_when_committed(sc->e, on_committed, sc);
  }
  arm(sc, earliest == INT64_MAX ? SCHEDULE_TICK_MAX_MS : earliest - util_now_ms());
}

static void on_timer(uv_timer_t *t) {
  pass(t->data);
}

/* Another process wrote (a schedule created, paused, resumed, deleted). */
static void on_external(void *ud) {
  arm(ud, 0);
}

/* A workflow of a schedule ended: a buffered fire may start now. */
static void on_status(void *ud, const char *id, const char *status) {
  if (strncmp(id, "sched:", 6) == 0 && engine_status_terminal(status)) arm(ud, 0);
}

schedules *schedules_start(engine *e) {
  schedules *sc = util_xcalloc(1, sizeof *sc);
  sc->e = e;
  sc->timer = util_xcalloc(1, sizeof *sc->timer);
  uv_timer_init(engine_loop(e), sc->timer);
  sc->timer->data = sc;
  sc->watch = dbwatch_start(engine_loop(e), engine_store(e), on_external, sc);
  engine_watch_status(e, on_status, sc);
  arm(sc, 0);
  return sc;
}

static void timer_closed(uv_handle_t *h) {
  free(h);
}

void schedules_poke(schedules *sc) {
  if (sc && sc->timer) arm(sc, 0);
}

void schedules_stop(schedules *sc) {
  if (!sc) return;
  engine_watch_status(sc->e, NULL, NULL);
  if (sc->watch) dbwatch_stop(sc->watch);
  uv_close((uv_handle_t *)sc->timer, timer_closed);
  sc->timer = NULL;
  free(sc); /* a when_committed waiter still pending is told with the loop gone: never */
}
