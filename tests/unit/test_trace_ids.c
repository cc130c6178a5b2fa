/* Unit tests for engine/base/trace_ids: the W3C traceparent header as the
 * Trace Context spec (Level 1, section 3.2, and its test suite's cases of
 * bad headers) reads it, and span ids derived from the log that are stable
 * and distinct. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off: cmocka.h needs the headers above first */
#include <cmocka.h>
/* clang-format on */

#include <string.h>

#include "trace_ids.h"

static const char *GOOD = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

static void test_parse_valid(void **state) {
  (void)state;
  trace_ctx t;
  char err[160];
  assert_true(traceparent_parse(GOOD, &t, err, sizeof err));
  assert_string_equal(t.trace_id, "0af7651916cd43dd8448eb211c80319c");
  assert_string_equal(t.span_id, "b7ad6b7169203331");
  assert_int_equal(t.sampled, 1);
  assert_true(traceparent_parse(" 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00\t", &t, err, sizeof err));
  assert_int_equal(t.sampled, 0);
  /* a later version: the first four fields are read, what follows ignored */
  assert_true(traceparent_parse("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-09-what-comes-next", &t, err,
                                sizeof err));
  assert_int_equal(t.sampled, 1);
}

static void test_parse_invalid(void **state) {
  (void)state;
  static const struct {
    const char *header, *why;
  } bad[] = {
      {"", "version-traceid"},
      {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", "version-traceid"},
      {"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", "trace id"},
      {"00-00000000000000000000000000000000-b7ad6b7169203331-01", "trace id"},
      {"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", "parent id"},
      {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333g-01", "parent id"},
      {"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "version ff"},
      {"0g-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "version"},
      {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0x", "flags"},
      {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra", "after its flags"},
      {"00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "version-traceid"},
      {"cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x", "after its flags"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    trace_ctx t;
    char err[160] = "";
    if (traceparent_parse(bad[i].header, &t, err, sizeof err)) fail_msg("accepted: %s", bad[i].header);
    if (!strstr(err, bad[i].why)) fail_msg("%s: said \"%s\", not about %s", bad[i].header, err, bad[i].why);
  }
  trace_ctx t;
  char err[80];
  assert_false(traceparent_parse(NULL, &t, err, sizeof err));
}

static void test_format_round_trip(void **state) {
  (void)state;
  char out[TRACEPARENT_LEN];
  traceparent_format("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", 1, out);
  assert_string_equal(out, GOOD);
  trace_ctx t;
  char err[80];
  assert_true(traceparent_parse(out, &t, err, sizeof err));
}

static void test_derived_ids(void **state) {
  (void)state;
  char a[TRACE_ID_HEX], b[TRACE_ID_HEX], s1[SPAN_ID_HEX], s2[SPAN_ID_HEX];
  trace_id_of_workflow("pr-42", a);
  trace_id_of_workflow("pr-42", b);
  assert_string_equal(a, b); /* the same workflow, the same trace, in any process */
  assert_true(trace_hex_valid(a, 32));
  trace_id_of_workflow("pr-43", b);
  assert_string_not_equal(a, b);
  span_id_of_step("pr-42", 1, 7, "activity", s1);
  span_id_of_step("pr-42", 1, 7, "activity", s2);
  assert_string_equal(s1, s2);
  assert_true(trace_hex_valid(s1, 16));
  /* each part of the step's name changes the id */
  span_id_of_step("pr-42", 1, 7, "attempt 2", s2);
  assert_string_not_equal(s1, s2);
  span_id_of_step("pr-42", 2, 7, "activity", s2);
  assert_string_not_equal(s1, s2);
  span_id_of_step("pr-42", 1, 8, "activity", s2);
  assert_string_not_equal(s1, s2);
  /* no id is a prefix game: "pr-4" run 21 is not "pr-42" run 1 */
  span_id_of_step("pr-4", 21, 7, "activity", s2);
  assert_string_not_equal(s1, s2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse_valid),
      cmocka_unit_test(test_parse_invalid),
      cmocka_unit_test(test_format_round_trip),
      cmocka_unit_test(test_derived_ids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
