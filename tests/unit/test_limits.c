/* Unit tests for the engine's number limits: util_check_seconds, the one rule
 * for every duration (wf.sleep, wait_signal timeouts, activity options and
 * retry intervals, activity.sleep, http.request timeouts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

static void expect_refused(double v, const char *shown) {
  char err[200] = "";
  if (util_check_seconds(v, "wf.sleep: seconds", err, sizeof err) != -1) fail_msg("accepted %g", v);
  char want[64];
  snprintf(want, sizeof want, ", not %s", shown);
  if (!strstr(err, "wf.sleep: seconds must be a finite number of seconds from 0 to 3155760000 (100 years)") ||
      !strstr(err, want))
    fail_msg("message for %g is \"%s\"", v, err);
}

static void test_seconds_accepted(void **state) {
  (void)state;
  char err[200] = "untouched";
  const double ok[] = {0, -0.0, 1e-300, 0.001, 1, 86400, 3155760000.0};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) assert_int_equal(util_check_seconds(ok[i], "x", err, sizeof err), 0);
  assert_string_equal(err, "untouched");
  /* the bound fits int64 milliseconds with room for any wall clock */
  assert_true(UTIL_MAX_SECONDS * 1000.0 + 1e13 < 9.2e18);
}

static void test_seconds_refused(void **state) {
  (void)state;
  expect_refused(INFINITY, "inf");
  expect_refused(-INFINITY, "-inf");
  expect_refused(NAN, "nan");
  expect_refused(-NAN, "nan");
  expect_refused(-1, "-1");
  expect_refused(-1e-9, "-1e-09");
  expect_refused(3155760000.5, "3155760000.5");
  expect_refused(1e300, "1e+300");
  /* a tiny buffer is cut, not overrun */
  char small[8];
  assert_int_equal(util_check_seconds(INFINITY, "what", small, sizeof small), -1);
  assert_int_equal(strlen(small), sizeof small - 1);
  assert_int_equal(util_check_seconds(NAN, "what", NULL, 0), -1);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seconds_accepted),
      cmocka_unit_test(test_seconds_refused),
  };
  const struct CMUnitTest bugs[] = {
      cmocka_unit_test(test_seconds_refused), /* inf reached timers and the log as an undefined conversion */
  };
  if (argc > 1 && strcmp(argv[1], "bugs") == 0) return cmocka_run_group_tests_name("unit_limits_bugs", bugs, NULL, NULL);
  return cmocka_run_group_tests_name("unit_limits", tests, NULL, NULL);
}
