/* schedules: workflows started by cron expressions (cron.h), durable in the
 * store's schedules table.
 *
 * Each fire starts the schedule's workflow with id sched:NAME:FIRETIME
 * (FIRETIME the fire's nominal UTC instant, 20261201T090000Z), in the same
 * batch that moves the schedule's next_fire_at past it: a fire is started at
 * most once, also across a crash. A fire later than catchup_window (after a
 * downtime, or while paused for buffer_one) is skipped and counted instead.
 * While a workflow of the schedule is still running, a fire follows the
 * overlap policy: skip (counted), buffer_one (starts when the running one
 * ends; at most one waits, further fires are skipped), allow_all, or
 * cancel_other (the running ones are asked to cancel, the new one starts).
 * Jitter delays a fire by a hash of (name, fire) in [0, jitter): every
 * restart computes the same instant, and the id keeps the nominal time.
 *
 * The client operations (create, pause, resume, trigger, delete) write the
 * database directly; a running `engine serve` notices through its commit
 * watch and arms its timer again. */
#ifndef ENGINE_SCHEDULES_H
#define ENGINE_SCHEDULES_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "store.h"

#define SCHEDULE_NAME_MAX 64
/* What the batch forms (the _in functions below) return besides 0 and -1
 * (-1: bad input or the store, with err): no such schedule, or the name (or
 * a manual start's id) is taken. The CLI's forms return -1 for every failure. */
#define SCHEDULE_UNKNOWN (-2)
#define SCHEDULE_TAKEN (-3)
#define SCHEDULE_DEFAULT_CATCHUP_MS 60000 /* fires missed by at most a minute still run */
#define SCHEDULE_GRACE_MS 1000            /* a timer's own lateness never counts as missed */

/* What `engine schedule create` asks for. */
typedef struct schedule_spec {
  const char *name, *cron, *tz, *script, *input, *overlap;
  int64_t catchup_window_ms, jitter_ms;
} schedule_spec;

/* "30s", "5m", "2h", "1d", "250ms", "0": *ms. Returns 0, or -1 with err. */
int schedule_parse_duration(const char *s, int64_t *ms, char *err, size_t errlen);
/* 0 when name can name a schedule (1-64 of A-Z a-z 0-9 . _ -, starting with
 * a letter or digit), else -1 with err. */
int schedule_check_name(const char *name, char *err, size_t errlen);
/* The fire's instant: nominal plus its jitter. */
int64_t schedule_fire_at(const char *name, int64_t nominal_ms, int64_t jitter_ms);
/* ms as 20261201T090000Z (with_ms: 20261201T090000.123Z) into out. */
void schedule_format_utc(int64_t ms, int with_ms, char *out, size_t n);

/* Checks spec (name, cron, zone, overlap, the script compiles, input is
 * JSON) and inserts it with its first fire after now_ms; script is stored as
 * its resolved path. Returns 0, or -1 with err (a taken name included). */
int schedule_create(store *st, const schedule_spec *spec, int64_t now_ms, char *err, size_t errlen);
/* The checks of schedule_create alone, before a database is touched. */
int schedule_check(const schedule_spec *spec, int64_t now_ms, char *err, size_t errlen);
/* Pauses or resumes name; a resume moves the next fire to the first after
 * now_ms (fires while paused are not missed ones). 0, or -1 with err. */
int schedule_set_paused(store *st, const char *name, int paused, int64_t now_ms, char *err, size_t errlen);
/* Starts name's workflow now as sched:NAME:manual-TIME with identity in its
 * input, whatever the overlap policy; id gets the id. 0, or -1 with err. */
int schedule_trigger(store *st, const char *name, const char *identity, int64_t now_ms, char *id, size_t idlen,
                     char *err, size_t errlen);
int schedule_delete(store *st, const char *name, char *err, size_t errlen);

/* The same writes into st's open batch, neither committed nor rolled back
 * (the HTTP API inside serve, answered once the worker commits); a refused
 * one writes nothing. A trigger's start is engine_submit's. */
int schedule_create_in(store *st, const schedule_spec *spec, int64_t now_ms, char *err, size_t errlen);
int schedule_set_paused_in(store *st, const char *name, int paused, int64_t now_ms, char *err, size_t errlen);
int schedule_delete_in(store *st, const char *name, char *err, size_t errlen);
int schedule_trigger_in(engine *e, const char *name, const char *identity, int64_t now_ms, char *id, size_t idlen,
                        char *err, size_t errlen);
/* A schedule as JSON (malloc'd), as `schedule list --json` and the API print it. */
char *schedule_json(const schedule_row *r);

/* ---- inside engine serve ---- */
typedef struct schedules schedules;
/* Fires e's schedules from its loop (the first pass runs once the loop does). */
schedules *schedules_start(engine *e);
/* Plans again at once: after a write of the worker's own batch (the API),
 * which its commit watch does not report. */
void schedules_poke(schedules *s);
/* Before engine_free: closes the timer and the watch (freed with the loop). */
void schedules_stop(schedules *s);

#endif
