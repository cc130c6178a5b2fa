/* Unit tests for engine/schedules: durations, names, the jitter that every
 * restart computes alike, fire ids, and the client operations (create with
 * its checks, pause and resume, trigger, delete) on a SQLite store. Firing
 * under engine serve is tests/integration/test_schedules.sh. */
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

#include "schedules.h"
#include "testutil.h"

#define NOW 1796169600000 /* 2026-12-02T00:00:00Z */

static void test_durations(void **state) {
  (void)state;
  static const struct {
    const char *s;
    int64_t ms;
  } ok[] = {{"0", 0}, {"250ms", 250}, {"30s", 30000}, {"5m", 300000}, {"2h", 7200000}, {"1d", 86400000}};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    int64_t ms = -1;
    char err[256];
    assert_int_equal(schedule_parse_duration(ok[i].s, &ms, err, sizeof err), 0);
    assert_int_equal(ms, ok[i].ms);
  }
  static const char *const bad[] = {"", "5", "5x", "-5s", "s", "1.5h", "5 m", "400d", "99999999999999999999d"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    int64_t ms = 7;
    char err[256] = "";
    if (schedule_parse_duration(bad[i], &ms, err, sizeof err) == 0)
      fail_msg("'%s' was taken as %lld", bad[i], (long long)ms);
    assert_true(strstr(err, "duration") != NULL);
  }
}

static void test_names(void **state) {
  (void)state;
  char err[256];
  assert_int_equal(schedule_check_name("nightly-report_2.v1", err, sizeof err), 0);
  static const char *const bad[] = {
      "", "a:b", "-a", "a b", "a..b", "a/b", "12345678901234567890123456789012345678901234567890123456789012345"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (schedule_check_name(bad[i], err, sizeof err) == 0) fail_msg("name '%s' was taken", bad[i]);
}

/* The same (name, fire) always gets the same offset, in [0, jitter); others spread. */
static void test_jitter(void **state) {
  (void)state;
  assert_int_equal(schedule_fire_at("a", NOW, 0), NOW);
  int64_t first = schedule_fire_at("a", NOW, 60000);
  assert_int_equal(schedule_fire_at("a", NOW, 60000), first);
  int distinct = 0;
  int64_t prev = -1;
  for (int i = 0; i < 100; i++) {
    int64_t at = schedule_fire_at("a", NOW + i * 60000LL, 60000) - (NOW + i * 60000LL);
    assert_true(at >= 0 && at < 60000);
    distinct += at != prev;
    prev = at;
  }
  assert_true(distinct > 90);
  assert_true(schedule_fire_at("a", NOW, 60000) != schedule_fire_at("b", NOW, 60000));
}

static void test_format(void **state) {
  (void)state;
  char out[40];
  schedule_format_utc(NOW + 9 * 3600000LL, 0, out, sizeof out);
  assert_string_equal(out, "20261202T090000Z");
  schedule_format_utc(NOW + 123, 1, out, sizeof out);
  assert_string_equal(out, "20261202T000000.123Z");
}

typedef struct seen {
  int n;
  schedule_row r;
  char tz[64], overlap[32], input[128];
} seen;

static int keep(void *ud, const schedule_row *r) {
  seen *s = ud;
  s->n++;
  s->r = *r;
  snprintf(s->tz, sizeof s->tz, "%s", r->tz);
  snprintf(s->overlap, sizeof s->overlap, "%s", r->overlap);
  snprintf(s->input, sizeof s->input, "%s", r->input);
  return 0;
}

static void test_client_operations(void **state) {
  (void)state;
  char *dir = tu_mkdtemp(), *db = tu_path(dir, "e.db"), *wf = tu_path(dir, "w.lua"), *notwf = tu_path(dir, "n.lua");
  const char *src = "return function(input) return input end\n";
  assert_int_equal(tu_write_file(wf, src, strlen(src)), 0);
  assert_int_equal(tu_write_file(notwf, "return 1\n", 9), 0);
  store *st;
  char err[1024];
  assert_int_equal(store_open(db, 0, &st, err, sizeof err), STORE_OK);
  schedule_spec sp = {"morning", "30 9 * * *", "Europe/Berlin", wf, "{ \"b\": 1, \"a\": 2 }", NULL, 60000, 0};
  assert_int_equal(schedule_create(st, &sp, NOW, err, sizeof err), 0);
  assert_int_equal(schedule_create(st, &sp, NOW, err, sizeof err), -1);
  assert_non_null(strstr(err, "exists already"));
  seen s = {0};
  assert_int_equal(store_schedule_get(st, "morning", keep, &s), 1);
  assert_int_equal(s.r.next_fire_at, NOW + 8 * 3600000LL + 1800000); /* 09:30 CET = 08:30Z */
  assert_string_equal(s.overlap, "skip");
  assert_string_equal(s.input, "{\"a\":2,\"b\":1}"); /* canonical */
  /* each check names its problem, and writes nothing */
  struct {
    schedule_spec sp;
    const char *says;
  } bad[] = {
      {{"x", "61 * * * *", NULL, wf, NULL, NULL, 0, 0}, "minute: 61 is out of range"},
      {{"x", "* * * * *", "Nowhere/City", wf, NULL, NULL, 0, 0}, "unknown time zone"},
      {{"x", "0 0 30 2 *", NULL, wf, NULL, NULL, 0, 0}, "0 0 30 2 *"},
      {{"x", "* * * * *", NULL, "/no/such.lua", NULL, NULL, 0, 0}, "no such workflow file"},
      {{"x", "* * * * *", NULL, notwf, NULL, NULL, 0, 0}, notwf},
      {{"x", "* * * * *", NULL, wf, "[1,", NULL, 0, 0}, "--input"},
      {{"x", "* * * * *", NULL, wf, NULL, "queue", 0, 0}, "--overlap queue"},
      {{"x:y", "* * * * *", NULL, wf, NULL, NULL, 0, 0}, "schedule name"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = 0;
    assert_int_equal(schedule_create(st, &bad[i].sp, NOW, err, sizeof err), -1);
    if (!strstr(err, bad[i].says)) fail_msg("case %zu: [%s] lacks [%s]", i, err, bad[i].says);
  }
  assert_int_equal(store_schedule_get(st, "x", keep, &s), 0);
  /* pause keeps the next fire; resume moves it to the first after its now */
  assert_int_equal(schedule_set_paused(st, "morning", 1, NOW + 1000, err, sizeof err), 0);
  memset(&s, 0, sizeof s);
  store_schedule_get(st, "morning", keep, &s);
  assert_int_equal(s.r.paused, 1);
  assert_int_equal(schedule_set_paused(st, "morning", 0, NOW + 2 * 86400000LL, err, sizeof err), 0);
  memset(&s, 0, sizeof s);
  store_schedule_get(st, "morning", keep, &s);
  assert_int_equal(s.r.paused, 0);
  assert_int_equal(s.r.next_fire_at, NOW + 2 * 86400000LL + 8 * 3600000LL + 1800000);
  assert_int_equal(schedule_set_paused(st, "nope", 1, NOW, err, sizeof err), -1);
  assert_non_null(strstr(err, "no schedule named nope"));
  /* trigger: a workflow now, with the identity in its input, and the grants
   * a schedule's start holds: none (an empty list, encoded as {}) */
  char id[ENGINE_ID_MAX + 1];
  assert_int_equal(schedule_trigger(st, "morning", "local:ada", NOW + 5, id, sizeof id, err, sizeof err), 0);
  assert_string_equal(id, "sched:morning:manual-20261202T000000.005Z");
  wf_row w;
  assert_int_equal(store_wf_get(st, id, &w), 1);
  assert_string_equal(w.input, "{\"a\":2,\"b\":1,\"identity\":\"local:ada\",\"starterGrants\":{}}");
  wf_row_free(&w);
  assert_int_equal(schedule_trigger(st, "morning", "local:ada", NOW + 5, id, sizeof id, err, sizeof err), -1);
  assert_int_equal(schedule_delete(st, "morning", err, sizeof err), 0);
  assert_int_equal(schedule_delete(st, "morning", err, sizeof err), -1);
  assert_int_equal(store_schedule_get(st, "morning", keep, &s), 0);
  store_close(st);
  free(db);
  free(wf);
  free(notwf);
  tu_rmtree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_durations),
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_jitter),
      cmocka_unit_test(test_format),
      cmocka_unit_test(test_client_operations),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
