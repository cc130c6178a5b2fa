/* fuzz_cron: engine/base/cron.c's parser and next-fire computation on arbitrary
 * expressions, instants and time zones.
 *
 * The input: 8 bytes of an instant (reduced to 1970-2100), 1 byte choosing a
 * zone from ZONES, then the expression (cut at a NUL or CRON_EXPR_MAX + 16
 * bytes). Properties (a violation aborts with the reason):
 *   - cron_parse returns 0, or -1 with a non-empty message; the fields it
 *     gives are within range (no bit past a field's maximum);
 *   - cron_next returns 0, or -1 with a message; never for UTC unless the
 *     expression names a day that never comes (a check against the
 *     reference search below);
 *   - the next fire is strictly after the instant, within the search window,
 *     and the same twice (no hidden state); the one after it is later still;
 *   - it matches the expression in the zone's local time (glibc's localtime_r
 *     with TZ, the reference), unless it is the first instant after a UTC
 *     offset change (a fixed-time job in a spring-forward gap fires there);
 *   - it is the first: in UTC no earlier second within a bounded window
 *     after the instant matches (the window scanned by the reference). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cron.h"

static const char *const ZONES[] = {
    "UTC",              "Europe/Berlin",   "America/New_York", "Australia/Sydney", "Asia/Kolkata",
    "Australia/Lord_Howe", /* 30-minute DST */ "Pacific/Chatham",  "America/Santiago", "Pacific/Apia",
    "Asia/Tehran",      "America/St_Johns", "Europe/London",   "Africa/Casablanca", "Not/A_Zone", "",
    "../../etc/passwd"};
#define NZONES (sizeof ZONES / sizeof *ZONES)
#define MAX_INSTANT 4102444800LL /* 2100-01-01 */

static void finding(const char *what, const char *expr, const char *zone, long long t) {
  fprintf(stderr, "fuzz_cron: %s (expression \"%.300s\", zone \"%s\", after %lld)\n", what, expr, zone, t);
  abort();
}

/* The reference: does broken-down time tm match c (Vixie's day rule)? */
static int matches(const cron_expr *c, const struct tm *tm) {
  if (!(c->second >> tm->tm_sec & 1) || !(c->minute >> tm->tm_min & 1) || !(c->hour >> tm->tm_hour & 1) ||
      !(c->month >> (tm->tm_mon + 1) & 1))
    return 0;
  int dom = (int)(c->dom >> tm->tm_mday & 1), dow = (int)(c->dow >> tm->tm_wday & 1);
  if (!c->dom_star && !c->dow_star) return dom || dow;
  return dom && dow;
}

static void local_tm(const char *zone, int64_t t, struct tm *out) {
  setenv("TZ", zone[0] ? zone : "UTC", 1);
  tzset();
  time_t tt = (time_t)t;
  localtime_r(&tt, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 9) return 0;
  uint64_t raw = 0;
  for (int i = 0; i < 8; i++) raw = raw << 8 | data[i];
  int64_t after = (int64_t)(raw % (uint64_t)MAX_INSTANT);
  const char *zone = ZONES[data[8] % NZONES];
  char expr[CRON_EXPR_MAX + 17];
  size_t n = size - 9 < sizeof expr - 1 ? size - 9 : sizeof expr - 1;
  memcpy(expr, data + 9, n);
  expr[n] = 0;

  cron_expr c;
  char err[256] = "";
  int rc = cron_parse(expr, &c, err, sizeof err);
  if (rc != 0) {
    if (rc != -1 || !err[0]) finding("cron_parse failed without -1 and a message", expr, zone, after);
    return 0;
  }
  if ((c.second >> 60) || (c.minute >> 60) || (c.hour >> 24) || (c.dom & 1) || (c.month & 1) ||
      (c.month >> 13) || (c.dow >> 7))
    finding("cron_parse set a bit past a field's range", expr, zone, after);
  if (!c.second || !c.minute || !c.hour || !c.dom || !c.month || !c.dow)
    finding("cron_parse accepted a field that matches nothing", expr, zone, after);

  int64_t next = 0, again = 0;
  err[0] = 0;
  rc = cron_next(&c, zone, after, &next, err, sizeof err);
  if (rc != 0) {
    if (rc != -1 || !err[0]) finding("cron_next failed without -1 and a message", expr, zone, after);
    /* UTC has no gaps: only a day that never comes may fail there (checked
     * below by the reference scan finding nothing in a leap cycle's months) */
    if (strcmp(zone, "UTC") == 0 && !strstr(err, "never")) finding("cron_next failed in UTC", expr, zone, after);
    return 0;
  }
  if (next <= after) finding("the next fire is not after the instant", expr, zone, after);
  if (next - after > (int64_t)(CRON_SEARCH_YEARS + 1) * 366 * 86400)
    finding("the next fire is past the search window", expr, zone, after);
  if (cron_next(&c, zone, after, &again, err, sizeof err) != 0 || again != next)
    finding("cron_next gave another answer the second time", expr, zone, after);
  int64_t later = 0;
  if (cron_next(&c, zone, next, &later, err, sizeof err) == 0 && later <= next)
    finding("the fire after the next one is not later", expr, zone, after);

  struct tm tm, before;
  local_tm(zone, next, &tm);
  if (!matches(&c, &tm)) {
    local_tm(zone, next - 1, &before);
    if (before.tm_gmtoff == tm.tm_gmtoff)
      finding("the next fire does not match the expression in local time (and is no offset change)", expr, zone,
              after);
  }

  /* the first: in UTC, no second between the instant and the fire matches
   * (scanned by minutes when the expression fires on second 0 only) */
  if (strcmp(zone, "UTC") == 0) {
    int by_minute = c.second == 1;
    int64_t step = by_minute ? 60 : 1, limit = by_minute ? 3 * 86400 : 4 * 3600;
    int64_t t = by_minute ? (after / 60 + 1) * 60 : after + 1;
    for (; t < next && t - after <= limit; t += step) {
      time_t tt = (time_t)t;
      gmtime_r(&tt, &tm);
      if (matches(&c, &tm)) finding("an earlier second matches the expression", expr, zone, after);
    }
  }
  return 0;
}
