/* cron: cron expressions for schedules, and their next fire time in a time zone.
 *
 * Syntax: five fields "minute hour day-of-month month day-of-week", or six
 * with a leading "second". Each field is a comma list of `*`, `N` or `A-B`,
 * each optionally followed by a step `/S`; `A/S` runs from A through the
 * field's maximum. Months take JAN-DEC and days SUN-SAT, case-insensitive;
 * day-of-week 7 is Sunday; `?` is `*` in the day fields. Macros: @yearly
 * @annually @monthly @weekly @daily @midnight @hourly.
 *
 * Days (Vixie cron): when both day fields are restricted (neither starts with
 * `*`), a day matches if EITHER matches; otherwise both must.
 *
 * Time zones are IANA names read from the system's tzdata (TZif files, never
 * the process's TZ, so any thread may call this). Daylight saving time, as
 * Vixie cron and cronie do it:
 *   - a "wildcard" job (its minute or hour field starts with `*`) follows the
 *     real clock: every real hour of a fall-back night fires (02:00 twice),
 *     local times skipped by a spring-forward do not fire;
 *   - a fixed-time job fires once per matching local time: a local time that
 *     occurs twice fires at its first occurrence only, one that does not exist
 *     fires once at the first instant after the gap (02:30 -> 03:00).
 * Vixie cron applies this to changes of under 3 hours; here it holds for any
 * change (a skipped day fires a daily job once, at the gap's end). Zones that
 * count leap seconds ("right/...") are refused. */
#ifndef ENGINE_CRON_H
#define ENGINE_CRON_H

#include <stddef.h>
#include <stdint.h>

#define CRON_EXPR_MAX 256 /* bytes of an expression */

typedef struct cron_expr {
  uint64_t second;            /* bit n: second n (0-59); bit 0 alone for five fields */
  uint64_t minute;            /* 0-59 */
  uint32_t hour;              /* 0-23 */
  uint32_t dom;               /* 1-31 */
  uint16_t month;             /* 1-12 */
  uint8_t dow;                /* 0-6, 0 = Sunday */
  uint8_t dom_star, dow_star; /* the field starts with `*` or `?` */
  uint8_t wildcard;           /* minute or hour starts with `*` (DST rule) */
} cron_expr;

/* Parses s into *out. Returns 0, or -1 with err naming the field and the
 * problem ("hour: 24 is out of range 0-23"). */
int cron_parse(const char *s, cron_expr *out, char *err, size_t errlen);

/* The first fire time strictly after after_unix (seconds since the epoch) in
 * time zone tz (an IANA name such as "Europe/Berlin"; NULL or "UTC" is UTC).
 * Returns 0 with *next_unix, or -1 with err: an unknown or malformed zone, or
 * an expression that never fires within CRON_SEARCH_YEARS ("0 0 30 2 *"). */
#define CRON_SEARCH_YEARS 8 /* covers 29 February across 2100, not a leap year */
int cron_next(const cron_expr *c, const char *tz, int64_t after_unix, int64_t *next_unix, char *err, size_t errlen);

#endif
