/* Unit tests for engine/cron: parsing (fields, names, steps, macros, the
 * messages for bad input) and next fire times in UTC and in time zones read
 * from the system's tzdata, across daylight saving changes.
 *
 * Times are written as UTC instants "YYYY-MM-DDTHH:MM:SSZ"; the local times
 * in the comments were checked with `TZ=<zone> date -d @<seconds>` and
 * `zdump -v`. The UTC cases follow robfig/cron's spec_test.go (TestNext,
 * TestErrors, see tests/unit/SOURCES), read as UTC; where this module differs
 * by design (Vixie cron's day and DST rules) the case says so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off: cmocka.h needs the headers above first */
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cron.h"

/* "YYYY-MM-DDTHH:MM:SSZ" (or without seconds) to seconds since the epoch. */
static int64_t utc(const char *s) {
  struct tm tm = {0};
  if (sscanf(s, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec) < 5)
    fail_msg("bad time in test: %s", s);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return (int64_t)timegm(&tm);
}

static const char *iso(int64_t t, char *buf, size_t n) {
  time_t tt = (time_t)t;
  struct tm tm;
  gmtime_r(&tt, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

static cron_expr parse_ok(const char *s) {
  cron_expr c;
  char err[256] = "";
  if (cron_parse(s, &c, err, sizeof err) != 0) fail_msg("cron_parse(\"%s\"): %s", s, err);
  return c;
}

static int64_t next_ok(const char *expr, const char *tz, int64_t after) {
  cron_expr c = parse_ok(expr);
  char err[256] = "", b[32];
  int64_t next = 0;
  if (cron_next(&c, tz, after, &next, err, sizeof err) != 0)
    fail_msg("cron_next(\"%s\", %s, %s): %s", expr, tz ? tz : "NULL", iso(after, b, sizeof b), err);
  return next;
}

/* -------------------------------------------------------------- parsing --- */

static void test_parse_errors(void **state) {
  (void)state;
  static const struct {
    const char *expr, *message;
  } cases[] = {
      /* robfig/cron TestErrors and TestParseScheduleErrors / TestRange errors */
      {"xyz", "expected 5 or 6 fields, got 1"},
      {"60 0 * * *", "minute: 60 is out of range 0-59"},
      {"0 60 * * *", "hour: 60 is out of range 0-23"},
      {"0 0 * * XYZ", "day-of-week: unknown name 'XYZ'"},
      {"* * * *", "expected 5 or 6 fields, got 4"},
      {"", "empty expression"},
      {"   ", "empty expression"},
      {"@unrecognized", "unknown macro '@unrecognized' (expected @yearly"},
      {"@every 5m", "unknown macro '@every 5m'"},
      {"* 5 j * * *", "hour: 'j' is not a number"},
      {"15/0 * * * *", "minute: step 0 is out of range 1-59"},
      {"*/0 * * * *", "minute: step 0 is out of range 1-59"},
      {"5--5 * * * *", "minute: '-5' is not a number"},
      {"*//2 * * * *", "minute: '*//2' has more than one '/'"},
      {"*/-12 * * * *", "minute: step '-12' is not a number"},
      {"0 0 * jan-x *", "month: unknown name 'x'"},
      {"0 0 * 2-x *", "month: unknown name 'x'"},
      /* the brief's examples and the rest of the grammar */
      {"0 24 * * *", "hour: 24 is out of range 0-23"},
      {"0 0 * * FUNDAY", "day-of-week: unknown name 'FUNDAY'"},
      {"0 0 * * MONDAY", "day-of-week: unknown name 'MONDAY'"},
      {"0 0 0 * *", "day-of-month: 0 is out of range 1-31"},
      {"0 0 32 * *", "day-of-month: 32 is out of range 1-31"},
      {"0 0 * 0 *", "month: 0 is out of range 1-12"},
      {"0 0 * 13 *", "month: 13 is out of range 1-12"},
      {"0 0 * * 8", "day-of-week: 8 is out of range 0-7"},
      {"60 * * * * *", "second: 60 is out of range 0-59"},
      {"99999999999999999999 * * * *", "minute: 99999999999999999999 is out of range 0-59"},
      {"5-3 * * * *", "minute: range 5-3 goes backwards"},
      {"0 0 * * SAT-SUN", "day-of-week: range SAT-SUN goes backwards"},
      {"1,,2 * * * *", "minute: empty item in list"},
      {"1, * * * *", "minute: empty item in list"},
      {"? * * * *", "minute: '?' is only allowed in day-of-month and day-of-week"},
      {"0 0 1 1 * * *", "expected 5 or 6 fields, got 7"},
      {"0 0 * * MON-", "day-of-week: missing value"},
      {"0 0 * * -5", "day-of-week: missing value"},
      {"0 0 * * 1/", "day-of-week: missing step after '/'"},
      {"0 0 * * 1/8", "day-of-week: step 8 is out of range 1-7"},
      {"0 0 * * */x", "day-of-week: step 'x' is not a number"},
      {"0 JAN * * *", "hour: 'JAN' is not a number"},
      {"0 0 * * 1.5", "day-of-week: '1.5' is not a number"},
      {"0 0 * MON *", "month: unknown name 'MON'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    cron_expr c;
    char err[256] = "";
    if (cron_parse(cases[i].expr, &c, err, sizeof err) != -1) fail_msg("\"%s\" parsed", cases[i].expr);
    if (strncmp(err, cases[i].message, strlen(cases[i].message)) != 0)
      fail_msg("\"%s\": got \"%s\", want \"%s\"", cases[i].expr, err, cases[i].message);
  }
  char long_expr[CRON_EXPR_MAX + 2];
  memset(long_expr, ' ', sizeof long_expr - 1);
  long_expr[sizeof long_expr - 1] = 0;
  memcpy(long_expr, "* * * * *", 9);
  cron_expr c;
  char err[256] = "";
  assert_int_equal(cron_parse(long_expr, &c, err, sizeof err), -1);
  assert_string_equal(err, "expression is longer than 256 bytes");
  assert_int_equal(cron_parse(NULL, &c, err, sizeof err), -1);
  assert_string_equal(err, "empty expression");
}

static void test_parse_fields(void **state) {
  (void)state;
  static const struct {
    const char *expr;
    uint64_t second, minute;
    uint32_t hour, dom;
    uint16_t month;
    uint8_t dow, dom_star, dow_star, wildcard;
  } cases[] = {
      {"* * * * *", 1, (1ULL << 60) - 1, (1u << 24) - 1, 0xfffffffe, 0x1ffe, 0x7f, 1, 1, 1},
      {"*/15 * * * *", 1, 1ULL | 1ULL << 15 | 1ULL << 30 | 1ULL << 45, (1u << 24) - 1, 0xfffffffe, 0x1ffe, 0x7f, 1, 1,
       1},
      /* robfig: "5/15" is 5 through the maximum in steps of 15 */
      {"5/15 0 * * *", 1, 1ULL << 5 | 1ULL << 20 | 1ULL << 35 | 1ULL << 50, 1, 0xfffffffe, 0x1ffe, 0x7f, 1, 1, 0},
      {"20-35/15 1,5-7/2,3 * * *", 1, 1ULL << 20 | 1ULL << 35, 1u << 1 | 1u << 3 | 1u << 5 | 1u << 7, 0xfffffffe,
       0x1ffe, 0x7f, 1, 1, 0},
      {"15/35 0 0 1 1 *", 1ULL << 15 | 1ULL << 50, 1, 1, 1u << 1, 1u << 1, 0x7f, 0, 1, 0},
      /* 7 is Sunday; ranges through 7 wrap to bit 0 */
      {"0 0 * * 7", 1, 1, 1, 0xfffffffe, 0x1ffe, 0x01, 1, 0, 0},
      {"0 0 * * 5-7", 1, 1, 1, 0xfffffffe, 0x1ffe, 0x61, 1, 0, 0},
      {"0 0 * * 0,7", 1, 1, 1, 0xfffffffe, 0x1ffe, 0x01, 1, 0, 0},
      {"0 0 * * */2", 1, 1, 1, 0xfffffffe, 0x1ffe, 0x55, 1, 1, 0},
      {"0 0 * * 1/2", 1, 1, 1, 0xfffffffe, 0x1ffe, 0x2a | 0x01, 1, 0, 0}, /* 1,3,5,7=Sunday */
      /* names, any case */
      {"0 0 * * MON-FRI", 1, 1, 1, 0xfffffffe, 0x1ffe, 0x3e, 1, 0, 0},
      {"0 0 * * sun,Wed,sAt", 1, 1, 1, 0xfffffffe, 0x1ffe, 0x49, 1, 0, 0},
      {"0 0 * jan-mar,DEC,Jul *", 1, 1, 1, 0xfffffffe, 0xe | 1u << 7 | 1u << 12, 0x7f, 1, 1, 0},
      {"0 0 1,15 * ?", 1, 1, 1, 1u << 1 | 1u << 15, 0x1ffe, 0x7f, 0, 1, 0},
      {"0 0 ? * 1", 1, 1, 1, 0xfffffffe, 0x1ffe, 0x02, 1, 0, 0},
      {"0 * 1 * 1", 1, 1, (1u << 24) - 1, 1u << 1, 0x1ffe, 0x02, 0, 0, 1},
      /* tabs and surrounding blanks */
      {"\t0\t12  *  * 1 \n", 1, 1, 1u << 12, 0xfffffffe, 0x1ffe, 0x02, 1, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    cron_expr c = parse_ok(cases[i].expr);
    if (c.second != cases[i].second || c.minute != cases[i].minute || c.hour != cases[i].hour ||
        c.dom != cases[i].dom || c.month != cases[i].month || c.dow != cases[i].dow ||
        c.dom_star != cases[i].dom_star || c.dow_star != cases[i].dow_star || c.wildcard != cases[i].wildcard)
      fail_msg("\"%s\": sec %llx min %llx hour %x dom %x mon %x dow %x stars %d%d wild %d", cases[i].expr,
               (unsigned long long)c.second, (unsigned long long)c.minute, c.hour, c.dom, c.month, c.dow, c.dom_star,
               c.dow_star, c.wildcard);
  }
}

static void test_macros(void **state) {
  (void)state;
  static const struct {
    const char *macro, *expr;
  } cases[] = {
      {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"}, {"@weekly", "0 0 * * 0"},
      {"@daily", "0 0 * * *"},  {"@midnight", "0 0 * * *"}, {"@hourly", "0 * * * *"},  {" @HOURLY ", "0 * * * *"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    cron_expr a = parse_ok(cases[i].macro), b = parse_ok(cases[i].expr);
    if (memcmp(&a, &b, sizeof a) != 0) fail_msg("%s is not \"%s\"", cases[i].macro, cases[i].expr);
  }
}

/* ------------------------------------------------------------ next: UTC --- */

typedef struct next_case {
  const char *tz, *after, *expr, *want; /* want NULL: never fires */
} next_case;

static void check_next(const next_case *cases, size_t n) {
  for (size_t i = 0; i < n; i++) {
    cron_expr c = parse_ok(cases[i].expr);
    char err[256] = "", b[32];
    int64_t next = 0;
    int rc = cron_next(&c, cases[i].tz, utc(cases[i].after), &next, err, sizeof err);
    if (!cases[i].want) {
      if (rc == 0)
        fail_msg("\"%s\" after %s: fires at %s, want never", cases[i].expr, cases[i].after, iso(next, b, sizeof b));
      if (strncmp(err, "never fires", 11) != 0) fail_msg("\"%s\": error \"%s\"", cases[i].expr, err);
      continue;
    }
    if (rc != 0)
      fail_msg("\"%s\" in %s after %s: %s", cases[i].expr, cases[i].tz ? cases[i].tz : "UTC", cases[i].after, err);
    if (next != utc(cases[i].want))
      fail_msg("\"%s\" in %s after %s: got %s, want %s", cases[i].expr, cases[i].tz ? cases[i].tz : "UTC",
               cases[i].after, iso(next, b, sizeof b), cases[i].want);
  }
}

static void test_next_utc(void **state) {
  (void)state;
  static const next_case cases[] = {
      /* robfig/cron spec_test.go TestNext, read as UTC */
      {NULL, "2012-07-09T14:45:00Z", "0 0/15 * * * *", "2012-07-09T15:00:00Z"},
      {NULL, "2012-07-09T14:59:00Z", "0 0/15 * * * *", "2012-07-09T15:00:00Z"},
      {NULL, "2012-07-09T14:59:59Z", "0 0/15 * * * *", "2012-07-09T15:00:00Z"},
      {NULL, "2012-07-09T15:45:00Z", "0 20-35/15 * * * *", "2012-07-09T16:20:00Z"},
      {NULL, "2012-07-09T23:46:00Z", "0 */15 * * * *", "2012-07-10T00:00:00Z"},
      {NULL, "2012-07-09T23:45:00Z", "0 20-35/15 * * * *", "2012-07-10T00:20:00Z"},
      {NULL, "2012-07-09T23:35:51Z", "15/35 20-35/15 * * * *", "2012-07-10T00:20:15Z"},
      {NULL, "2012-07-09T23:35:51Z", "15/35 20-35/15 1/2 * * *", "2012-07-10T01:20:15Z"},
      {NULL, "2012-07-09T23:35:51Z", "15/35 20-35/15 10-12 * * *", "2012-07-10T10:20:15Z"},
      {NULL, "2012-07-09T23:35:51Z", "15/35 20-35/15 1/2 */2 * *", "2012-07-11T01:20:15Z"},
      {NULL, "2012-07-09T23:35:51Z", "15/35 20-35/15 * 9-20 * *", "2012-07-10T00:20:15Z"},
      {NULL, "2012-07-09T23:35:51Z", "15/35 20-35/15 * 9-20 Jul *", "2012-07-10T00:20:15Z"},
      {NULL, "2012-07-09T23:35:00Z", "0 0 0 9 Apr-Oct ?", "2012-08-09T00:00:00Z"},
      /* robfig fires on 1 August (it counts "*\/5" as restricted); Vixie cron
       * counts a field starting with `*` as unrestricted, so both must match:
       * the first Monday on day 1, 6, 11 ... of April, August or October. */
      {NULL, "2012-07-09T23:35:00Z", "0 0 0 */5 Apr,Aug,Oct Mon", "2012-08-06T00:00:00Z"},
      {NULL, "2012-07-09T23:35:00Z", "0 0 0 */5 Oct Mon", "2012-10-01T00:00:00Z"},
      {NULL, "2012-07-09T23:35:00Z", "0 0 0 * Feb Mon", "2013-02-04T00:00:00Z"},
      {NULL, "2012-07-09T23:35:00Z", "0 0 0 * Feb Mon/2", "2013-02-01T00:00:00Z"},
      {NULL, "2012-12-31T23:59:45Z", "0 * * * * *", "2013-01-01T00:00:00Z"},
      {NULL, "2012-07-09T23:35:00Z", "0 0 0 29 Feb ?", "2016-02-29T00:00:00Z"},
      {NULL, "2012-07-09T23:35:00Z", "0 0 0 30 Feb ?", NULL},
      {NULL, "2012-07-09T23:35:00Z", "0 0 0 31 Apr ?", NULL},
      /* strictly after */
      {"UTC", "2026-01-01T12:00:00Z", "0 12 * * *", "2026-01-02T12:00:00Z"},
      {"UTC", "2026-01-01T11:59:59Z", "0 12 * * *", "2026-01-01T12:00:00Z"},
      {NULL, "2026-01-01T00:00:59Z", "*/20 * * * * *", "2026-01-01T00:01:00Z"},
      {NULL, "2026-12-31T00:00:00Z", "0 0 31 12 *", "2027-12-31T00:00:00Z"},
      /* 7 = Sunday: 1 January 2026 is a Thursday */
      {NULL, "2026-01-01T00:00:00Z", "0 12 * * 7", "2026-01-04T12:00:00Z"},
      {NULL, "2026-01-01T00:00:00Z", "0 12 * * SUN", "2026-01-04T12:00:00Z"},
      {NULL, "2026-01-04T12:00:00Z", "0 12 * * 6-7", "2026-01-10T12:00:00Z"},
      /* leap day; the next after 2096 is 2104 (2100 is no leap year) */
      {NULL, "2026-01-01T00:00:00Z", "0 0 29 2 *", "2028-02-29T00:00:00Z"},
      {NULL, "2028-02-29T00:00:00Z", "0 0 29 2 *", "2032-02-29T00:00:00Z"},
      {NULL, "2096-03-01T00:00:00Z", "0 0 29 2 *", "2104-02-29T00:00:00Z"},
      {NULL, "2026-01-01T00:00:00Z", "0 0 30 2 *", NULL},
      {NULL, "2026-01-01T00:00:00Z", "0 0 31 4,6,9,11 *", NULL},
      /* Vixie: both day fields restricted -> either; 2 January 2026 is a Friday */
      {NULL, "2026-01-01T00:00:00Z", "0 0 13 * FRI", "2026-01-02T00:00:00Z"},
      {NULL, "2026-01-02T00:00:00Z", "0 0 13 * FRI", "2026-01-09T00:00:00Z"},
      {NULL, "2026-01-09T00:00:00Z", "0 0 13 * FRI", "2026-01-13T00:00:00Z"},
      {NULL, "2026-01-02T00:00:00Z", "0 0 1,15 * MON", "2026-01-05T00:00:00Z"},
      {NULL, "2026-01-12T00:00:00Z", "0 0 1,15 * MON", "2026-01-15T00:00:00Z"},
      /* one starts with `*`: both must match (odd days that are Mondays) */
      {NULL, "2026-01-05T00:00:00Z", "0 0 */2 * MON", "2026-01-19T00:00:00Z"},
      {NULL, "2026-01-05T00:00:00Z", "0 0 1-31 * MON", "2026-01-06T00:00:00Z"}, /* restricted: any day */
      {NULL, "2026-01-01T00:00:00Z", "0 0 15 * *", "2026-01-15T00:00:00Z"},
      {NULL, "2026-01-01T00:00:00Z", "0 0 15 * ?", "2026-01-15T00:00:00Z"},
      /* names */
      {NULL, "2026-03-31T10:00:00Z", "0 9 * JAN-MAR,dec mon-fri", "2026-12-01T09:00:00Z"},
      {NULL, "2026-06-01T00:00:00Z", "0 0 1 jul,AUG *", "2026-07-01T00:00:00Z"},
      /* macros */
      {NULL, "2026-06-01T00:00:00Z", "@yearly", "2027-01-01T00:00:00Z"},
      {NULL, "2026-06-01T10:30:00Z", "@hourly", "2026-06-01T11:00:00Z"},
      {NULL, "2026-06-01T00:00:00Z", "@weekly", "2026-06-07T00:00:00Z"},
      {NULL, "2026-01-31T00:00:00Z", "@monthly", "2026-02-01T00:00:00Z"},
      {NULL, "2026-01-31T00:00:00Z", "@daily", "2026-02-01T00:00:00Z"},
      /* robfig TestNextWithTz, in a zone without DST (+05:30) */
      {"Asia/Kolkata", "2016-01-03T07:39:03Z", "14 14 * * *", "2016-01-03T08:44:00Z"},
      {"Asia/Kolkata", "2016-01-02T22:39:03Z", "14 14 * * ?", "2016-01-03T08:44:00Z"},
      /* robfig issue 157: the DST change at midnight in Sao Paulo (2018-11-04) */
      {"America/Sao_Paulo", "2018-10-17T09:00:00Z", "0 0 9 10 * ?", "2018-11-10T11:00:00Z"},
      {"America/Sao_Paulo", "2018-02-14T10:00:00Z", "0 0 9 22 * ?", "2018-02-22T12:00:00Z"},
  };
  check_next(cases, sizeof cases / sizeof *cases);
}

/* ------------------------------------------------------------ next: DST --- */

/* Successive fires of expr in tz from after: want[] then stop. */
typedef struct dst_case {
  const char *tz, *after, *expr;
  const char *want[8];
} dst_case;

static void test_dst(void **state) {
  (void)state;
  static const dst_case cases[] = {
      /* Europe/Berlin 2026-03-29: 02:00 CET -> 03:00 CEST at 01:00Z */
      {"Europe/Berlin",
       "2026-03-28T00:00:00Z",
       "30 2 * * *", /* 02:30 CET; 03:00 CEST (shifted); 02:30 CEST */
       {"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
      {"Europe/Berlin",
       "2026-03-28T23:00:00Z",
       "0,30 2 * * *", /* both shifted into one fire */
       {"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T00:30:00Z"}},
      {"Europe/Berlin",
       "2026-03-28T23:30:00Z",
       "0 * * * *", /* every real hour: 01:00 CET, 03:00 CEST */
       {"2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}},
      {"Europe/Berlin",
       "2026-03-29T00:40:00Z",
       "*/15 2 * * *", /* wildcard: skipped times do not fire */
       {"2026-03-30T00:00:00Z", "2026-03-30T00:15:00Z"}},
      {"Europe/Berlin",
       "2026-03-29T00:40:00Z",
       "0 3 * * *", /* 03:00 CEST exists: once */
       {"2026-03-29T01:00:00Z", "2026-03-30T01:00:00Z"}},
      /* Europe/Berlin 2026-10-25: 03:00 CEST -> 02:00 CET at 01:00Z; 02:xx twice */
      {"Europe/Berlin",
       "2026-10-24T12:00:00Z",
       "30 2 * * *", /* first occurrence (CEST) only */
       {"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
      {"Europe/Berlin",
       "2026-10-25T00:45:00Z",
       "30 2 * * *", /* between the two 02:30s */
       {"2026-10-26T01:30:00Z"}},
      {"Europe/Berlin",
       "2026-10-25T01:10:00Z",
       "30 2 * * *", /* inside the repeated hour */
       {"2026-10-26T01:30:00Z"}},
      {"Europe/Berlin",
       "2026-10-24T22:30:00Z",
       "0 * * * *", /* 01:00 CEST, 02:00 CEST, 02:00 CET, 03:00 CET */
       {"2026-10-24T23:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}},
      {"Europe/Berlin",
       "2026-10-24T12:00:00Z",
       "0 3 * * *", /* 03:00 CET, once */
       {"2026-10-25T02:00:00Z", "2026-10-26T02:00:00Z"}},
      /* America/New_York 2026-03-08: 02:00 EST -> 03:00 EDT at 07:00Z */
      {"America/New_York",
       "2026-03-07T12:00:00Z",
       "30 2 * * *", /* 03:00 EDT (shifted); 02:30 EDT */
       {"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
      {"America/New_York",
       "2026-03-08T05:30:00Z",
       "0 * * * *", /* 01:00 EST, 03:00 EDT, 04:00 EDT */
       {"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}},
      {"America/New_York",
       "2026-03-08T05:00:00Z",
       "0 1 * * *", /* robfig "1am nightly" */
       {"2026-03-08T06:00:00Z", "2026-03-09T05:00:00Z"}},
      /* America/New_York 2026-11-01: 02:00 EDT -> 01:00 EST at 06:00Z; 01:xx twice */
      {"America/New_York",
       "2026-10-31T12:00:00Z",
       "30 1 * * *", /* 01:30 EDT only, then 01:30 EST next day */
       {"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
      {"America/New_York",
       "2026-11-01T03:30:00Z",
       "0 * * * *", /* 00:00 EDT, 01:00 EDT, 01:00 EST, 02:00 EST */
       {"2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
      {"America/New_York",
       "2026-11-01T04:50:00Z",
       "*/20 1 * * *", /* wildcard: both 01:xx hours */
       {"2026-11-01T05:00:00Z", "2026-11-01T05:20:00Z", "2026-11-01T05:40:00Z", "2026-11-01T06:00:00Z",
        "2026-11-01T06:20:00Z", "2026-11-01T06:40:00Z", "2026-11-02T06:00:00Z"}},
      {"America/New_York",
       "2026-11-01T04:00:00Z",
       "0 2 * * *", /* robfig "2am nightly": 02:00 EST */
       {"2026-11-01T07:00:00Z", "2026-11-02T07:00:00Z"}},
      {"America/New_York",
       "2026-11-01T04:00:00Z",
       "0 0 3 3 * ?", /* robfig "Monthly job", 03:00 EST */
       {"2026-11-03T08:00:00Z", "2026-12-03T08:00:00Z"}},
      /* past the tables of a "fat" TZif file (2037): the footer's POSIX rule */
      {"Europe/Berlin", "2040-03-24T12:00:00Z", "30 2 * * *", {"2040-03-25T01:00:00Z", "2040-03-26T00:30:00Z"}},
      {"America/New_York", "2045-11-04T12:00:00Z", "30 1 * * *", {"2045-11-05T05:30:00Z", "2045-11-06T06:30:00Z"}},
      /* southern hemisphere (AEST-10AEDT,M10.1.0,M4.1.0/3): fall back in April, forward in October */
      {"Australia/Sydney", "2041-04-06T00:00:00Z", "30 2 * * *", {"2041-04-06T15:30:00Z", "2041-04-07T16:30:00Z"}},
      {"Australia/Sydney", "2041-10-05T00:00:00Z", "30 2 * * *", {"2041-10-05T16:00:00Z", "2041-10-06T15:30:00Z"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int64_t t = utc(cases[i].after);
    for (size_t k = 0; k < 8 && cases[i].want[k]; k++) {
      int64_t next = next_ok(cases[i].expr, cases[i].tz, t);
      char b[32];
      if (next != utc(cases[i].want[k]))
        fail_msg("\"%s\" in %s from %s, fire %zu: got %s, want %s", cases[i].expr, cases[i].tz, cases[i].after, k + 1,
                 iso(next, b, sizeof b), cases[i].want[k]);
      t = next;
    }
  }
}

/* Against the C library's own reading of the zone (localtime_r under TZ, in
 * this test only): twenty years of a daily job, firing where the rules say
 * and once per local date, and three years of an hourly one. */
static void test_against_libc(void **state) {
  (void)state;
  static const char *zones[] = {"Europe/Berlin", "America/New_York", "Australia/Sydney"};
  for (size_t z = 0; z < sizeof zones / sizeof *zones; z++) {
    setenv("TZ", zones[z], 1);
    tzset();
    cron_expr daily = parse_ok("30 2 * * *");
    int64_t t = utc("2026-01-01T00:00:00Z"), end = utc("2046-01-01T00:00:00Z");
    int prev_yday = -1, shifted = 0;
    while (t < end) {
      char err[256] = "";
      int64_t next;
      assert_int_equal(cron_next(&daily, zones[z], t, &next, err, sizeof err), 0);
      time_t tt = (time_t)next, before = tt - 1;
      struct tm lt, lb;
      localtime_r(&tt, &lt);
      localtime_r(&before, &lb);
      if (lt.tm_hour == 2 && lt.tm_min == 30) {
        /* a fixed job fires at the first 02:30 only */
        time_t hour_earlier = tt - 3600;
        struct tm le;
        localtime_r(&hour_earlier, &le);
        if (le.tm_hour == 2 && le.tm_min == 30) fail_msg("%s: second 02:30 at %lld", zones[z], (long long)next);
      } else if (lt.tm_hour == 3 && lt.tm_min == 0 && lb.tm_hour == 1) {
        shifted++; /* the gap's end on a spring-forward day */
      } else {
        fail_msg("%s: fire at local %02d:%02d", zones[z], lt.tm_hour, lt.tm_min);
      }
      if (lt.tm_yday == prev_yday) fail_msg("%s: two fires on one day", zones[z]);
      prev_yday = lt.tm_yday;
      t = next;
    }
    assert_int_equal(shifted, 20); /* one spring-forward a year */
    /* every real hour, across the end of the file's table (2037) */
    cron_expr hourly = parse_ok("0 * * * *");
    t = utc("2036-06-01T00:00:00Z");
    end = utc("2039-06-01T00:00:00Z");
    while (t < end) {
      int64_t next;
      char err[256] = "";
      assert_int_equal(cron_next(&hourly, zones[z], t, &next, err, sizeof err), 0);
      if (t % 3600 == 0 && next != t + 3600)
        fail_msg("%s: hourly %lld -> %lld", zones[z], (long long)t, (long long)next);
      t = next;
    }
  }
  unsetenv("TZ");
  tzset();
}

/* An independent oracle, minute by minute through localtime_r, for random
 * five-field expressions on the four 2026 change days in Berlin and New York:
 * a wildcard job fires at every instant whose local time matches; a fixed one
 * at the first instant of each matching local time, and once at a gap's end
 * when a local time inside the gap matches. */
static int tm_matches(const cron_expr *c, const struct tm *tm) {
  int dom_ok = (c->dom >> tm->tm_mday) & 1, dow_ok = (c->dow >> tm->tm_wday) & 1;
  int day = (c->dom_star || c->dow_star) ? dom_ok && dow_ok : dom_ok || dow_ok;
  return day && ((c->month >> (tm->tm_mon + 1)) & 1) && ((c->hour >> tm->tm_hour) & 1) &&
         ((c->minute >> tm->tm_min) & 1);
}

static void test_against_oracle(void **state) {
  (void)state;
  static const char *tokens[] = {"*",   "*/2",  "*/15", "0",       "1",  "2",  "3",  "30", "45",  "59", "1-3",
                                 "2-3", "0,30", "1,2",  "0-59/20", "25", "26", "29", "31", "1/2", "*/3"};
  static const char *hour_tokens[] = {"*", "*/2", "0", "1", "2", "3", "1-3", "2-3", "0,2", "1,2", "*/3", "22-23", "23"};
  static const char *dom_tokens[] = {"*", "?", "*/2", "8", "25", "29", "1,25", "1-8", "31"};
  static const char *mon_tokens[] = {"*", "3", "MAR", "10", "oct,nov", "3,10,11", "11", "1-12"};
  static const char *dow_tokens[] = {"*", "?", "0", "7", "SUN", "1-5", "6,0", "*/2", "sat"};
  static const struct {
    const char *tz, *from;
  } days[] = {{"Europe/Berlin", "2026-03-28T20:00:00Z"},
              {"Europe/Berlin", "2026-10-24T20:00:00Z"},
              {"America/New_York", "2026-03-08T02:00:00Z"},
              {"America/New_York", "2026-11-01T01:00:00Z"}};
  const int64_t window = 12 * 3600;
  srand(20261129);
  int checked_fires = 0;
  for (int n = 0; n < 400; n++) {
    char expr[128];
    const char *minute = tokens[rand() % 21], *hour = hour_tokens[rand() % 13];
    snprintf(expr, sizeof expr, "%s %s %s %s %s", minute, hour, dom_tokens[rand() % 9], mon_tokens[rand() % 8],
             dow_tokens[rand() % 9]);
    cron_expr c = parse_ok(expr);
    int wildcard = minute[0] == '*' || hour[0] == '*'; /* Vixie: MIN_STAR or HR_STAR */
    for (size_t d = 0; d < sizeof days / sizeof *days; d++) {
      setenv("TZ", days[d].tz, 1);
      tzset();
      int64_t from = utc(days[d].from), want[1500];
      size_t nwant = 0;
      for (int64_t u = from + 60; u <= from + window; u += 60) {
        time_t tu = (time_t)u, tp = tu - 60, th = tu - 3600;
        struct tm lu, lp, lh;
        localtime_r(&tu, &lu);
        localtime_r(&tp, &lp);
        localtime_r(&th, &lh);
        int fires = tm_matches(&c, &lu);
        /* a repeated local time (an hour after its first occurrence) */
        if (fires && !wildcard && lh.tm_hour == lu.tm_hour && lh.tm_min == lu.tm_min && lh.tm_mday == lu.tm_mday)
          fires = 0;
        /* a gap: the local minutes between lp and lu were skipped */
        if (!fires && !wildcard && (lu.tm_gmtoff - lp.tm_gmtoff) > 0) {
          for (int64_t k = 1; k * 60 < lu.tm_gmtoff - lp.tm_gmtoff + 60; k++) {
            time_t g = (time_t)(tp + lp.tm_gmtoff + k * 60); /* that local time, read as UTC */
            struct tm lg;
            gmtime_r(&g, &lg);
            lg.tm_gmtoff = 0;
            if (tm_matches(&c, &lg)) fires = 1;
          }
        }
        if (fires) want[nwant++] = u;
      }
      int64_t t = from;
      for (size_t k = 0;; k++) {
        char err[256] = "", b1[32], b2[32];
        int64_t next;
        int rc = cron_next(&c, days[d].tz, t, &next, err, sizeof err);
        if (k == nwant) {
          if (rc == 0 && next <= from + window)
            fail_msg("\"%s\" in %s: extra fire %s", expr, days[d].tz, iso(next, b1, sizeof b1));
          break;
        }
        if (rc != 0 || next != want[k])
          fail_msg("\"%s\" in %s: fire %zu got %s, want %s (%s)", expr, days[d].tz, k + 1,
                   rc ? "none" : iso(next, b1, sizeof b1), iso(want[k], b2, sizeof b2), err);
        checked_fires++;
        t = next;
      }
    }
  }
  unsetenv("TZ");
  tzset();
  assert_true(checked_fires > 1000); /* the random expressions did fire */
}

static void test_zone_errors(void **state) {
  (void)state;
  static const struct {
    const char *tz, *message;
  } cases[] = {
      {"Mars/Olympus", "unknown time zone 'Mars/Olympus' (no /usr/share/zoneinfo/Mars/Olympus)"},
      {"Europe", "unknown time zone 'Europe'"}, /* a directory */
      {"../../etc/passwd", "invalid time zone name '../../etc/passwd'"},
      {"Europe/../Europe/Berlin", "invalid time zone name"},
      {"/etc/localtime", "invalid time zone name '/etc/localtime'"},
      {"", "invalid time zone name ''"},
      {"Europe/Berlin ", "invalid time zone name"},
      {"tzdata.zi", "time zone 'tzdata.zi': /usr/share/zoneinfo/tzdata.zi is not a valid TZif file"},
  };
  cron_expr c = parse_ok("0 0 * * *");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char err[256] = "";
    int64_t next = -7;
    if (cron_next(&c, cases[i].tz, 0, &next, err, sizeof err) != -1) fail_msg("zone '%s' accepted", cases[i].tz);
    if (strncmp(err, cases[i].message, strlen(cases[i].message)) != 0)
      fail_msg("zone '%s': got \"%s\", want \"%s\"", cases[i].tz, err, cases[i].message);
    assert_int_equal(next, -7);
  }
  /* Etc/GMT-2 is UTC+2 (POSIX signs); "UTC" needs no file */
  assert_int_equal(next_ok("0 0 * * *", "Etc/GMT-2", utc("2026-01-01T00:00:00Z")), utc("2026-01-01T22:00:00Z"));
  assert_int_equal(next_ok("0 0 * * *", "UTC", utc("2026-01-01T00:00:00Z")), utc("2026-01-02T00:00:00Z"));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_errors),   cmocka_unit_test(test_parse_fields), cmocka_unit_test(test_macros),
      cmocka_unit_test(test_next_utc),       cmocka_unit_test(test_dst),          cmocka_unit_test(test_against_libc),
      cmocka_unit_test(test_against_oracle), cmocka_unit_test(test_zone_errors),
  };
  (void)argc;
  (void)argv;
  return cmocka_run_group_tests_name("unit_cron", tests, NULL, NULL);
}
