/* Unit tests for the terminal layout (engine/base/pretty.c): JSON folded to a
 * width and a depth, strings cut with the bytes left out and never inside a
 * character or an escape, a workflow's outcome with its findings table, and
 * what reaches the terminal: only this module's SGR codes, nothing from the
 * data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pretty.h"
#include "util.h"

/* ------------------------------------------------------------ helpers --- */

/* json folded at width (no colour), starting at column col. Malloc'd; NULL
 * when pretty_json refuses it. */
static char *fold(const char *json, size_t col, size_t width) {
  pretty_opts o = pretty_defaults(width, 0);
  ubuf b = {0};
  if (pretty_json(&b, json, strlen(json), col, &o) != 0) {
    assert_int_equal(b.n, 0); /* nothing added */
    return NULL;
  }
  ubuf_add(&b, "", 1);
  return b.p;
}

static void expect_fold(const char *json, size_t col, size_t width, const char *want) {
  char *got = fold(json, col, width);
  assert_non_null(got);
  if (strcmp(got, want) != 0) fail_msg("folded at %zu columns:\n%s\nwanted:\n%s", width, got, want);
  free(got);
}

/* The widest line of s, in code points. */
static size_t widest(const char *s) {
  size_t best = 0, cur = 0;
  for (; *s; s++) {
    if (*s == '\n') cur = 0;
    else if (((unsigned char)*s & 0xc0) != 0x80 && ++cur > best) best = cur;
  }
  return best;
}

/* Whether s is valid UTF-8 whose only ESC bytes start the SGR codes pretty.c
 * writes (ESC [ 0|1|2|31|32|33|36 m), and which holds no other control byte
 * than newline, no C1 and no bidi control. */
static int only_our_sgr(const char *s) {
  static const char *const codes[] = {"0m", "1m", "2m", "31m", "32m", "33m", "36m", NULL};
  size_t n = strlen(s);
  for (size_t i = 0; i < n;) {
    if (s[i] == 0x1b) {
      if (s[i + 1] != '[') return 0;
      int ok = 0;
      for (const char *const *c = codes; *c && !ok; c++)
        if (strncmp(s + i + 2, *c, strlen(*c)) == 0) ok = (int)(2 + strlen(*c));
      if (!ok) return 0;
      i += (size_t)ok;
      continue;
    }
    uint32_t cp;
    size_t bad, len = util_utf8_decode(s + i, n - i, &cp, &bad);
    if (!len || (cp != '\n' && util_unsafe_codepoint(cp))) return 0;
    i += len;
  }
  return 1;
}

/* A summary as `show --json` prints it, around a result. */
static char *summary_with(const char *status, const char *result, const char *artifacts) {
  return util_fmt("{\"id\":\"pr1\",\"status\":\"%s\",\"run\":1,\"script\":\"workflows/agent_session.lua\","
                  "\"code_hash\":\"abc\",\"created_at\":0,\"updated_at\":0,\"input\":{},\"result\":%s,\"error\":null,"
                  "\"waiting_on\":\"\",\"waits\":null,\"history_events\":9,\"tasks\":0,\"buffered_signals\":0,"
                  "\"cancel_requested\":false,\"sandbox\":null,\"artifacts\":%s}",
                  status, result, artifacts);
}

/* The result workflows/agent_session.lua returns for examples/pr-review.json
 * (its shape: a summary, the model's result, usage), with its findings. */
static const char *REVIEW =
    "{\"artifacts\":[],\"outcome\":\"completed\",\"raw\":\"{...}\","
    "\"result\":{\"findings\":["
    "{\"body\":\"b\",\"file\":\"ratelimit/bucket.py\",\"line\":15,\"severity\":\"blocker\","
    "\"title\":\"Refill no longer capped at capacity\"},"
    "{\"file\":\"ratelimit/bucket.py\",\"line\":20,\"severity\":\"major\","
    "\"title\":\"Off-by-one: the last token can never be spent\"},"
    "{\"file\":\"ratelimit/bucket.py\",\"line\":6,\"severity\":\"major\",\"title\":\"Input validation removed\"},"
    "{\"file\":\"ratelimit/bucket.py\",\"line\":25,\"severity\":\"minor\","
    "\"title\":\"wait_time() can be negative and is untested\"}],"
    "\"verdict\":\"request_changes\"},"
    "\"summary\":\"Request changes: the refill is no longer capped (blocker), the last token cannot be spent, "
    "validation was removed and wait_time() can go negative.\","
    "\"tokens\":11719,\"tool_calls\":4,\"turns\":4}";

static const char *ARTIFACTS =
    "[{\"path\":\"output/review.md\",\"sha256\":\"a875\",\"size\":740,\"stored\":\"/var/db/artifacts/a875\"}]";

static char *outcome(const char *status, const char *result, const char *artifacts, size_t width, int color) {
  char *json = summary_with(status, result, artifacts);
  pretty_opts o = pretty_defaults(width, color);
  char *out = pretty_outcome(json, strlen(json), &o);
  free(json);
  assert_non_null(out);
  return out;
}

/* ----------------------------------------------------------- folding --- */

static void test_fits_on_one_line(void **state) {
  (void)state;
  expect_fold("{\"a\":1,\"b\":[true,null,\"x\"],\"c\":{}}", 0, 80, "{\"a\": 1, \"b\": [true, null, \"x\"], \"c\": {}}");
  expect_fold("  42 ", 0, 80, "42");
  expect_fold("\"plain\"", 11, 80, "\"plain\"");
  expect_fold("[]", 0, 20, "[]");
}

static void test_breaks_what_does_not_fit(void **state) {
  (void)state;
  /* 30 columns: the object does not fit, its members do; the nested one
   * that does not fit is broken too, one level further in */
  expect_fold("{\"name\":\"Ada\",\"tags\":[\"one\",\"two\",\"three\",\"four\"],\"n\":3}", 0, 30,
              "{\n"
              "  \"name\": \"Ada\",\n"
              "  \"tags\": [\n"
              "    \"one\",\n"
              "    \"two\",\n"
              "    \"three\",\n"
              "    \"four\"\n"
              "  ],\n"
              "  \"n\": 3\n"
              "}");
}

static void test_keeps_member_order_and_indents_to_col(void **state) {
  (void)state;
  /* the value starts after a label at column 11: its lines are indented there */
  expect_fold("{\"z\":\"last letter\",\"a\":\"first letter\"}", 11, 30,
              "{\n"
              "             \"z\": \"last letter\",\n"
              "             \"a\": \"first letter\"\n"
              "           }");
}

static void test_long_string_cut_with_bytes_left(void **state) {
  (void)state;
  char json[300], *got;
  /* 200 x: alone on a line of 40 columns the string keeps 16 of them */
  memset(json, 'x', sizeof json);
  json[0] = '"', json[201] = '"', json[202] = 0;
  got = fold(json, 0, 40);
  assert_string_equal(got, "\"xxxxxxxxxxxxxxxx...\" (184 more bytes)");
  free(got);
  /* what is left out counts the string's bytes, not its escapes: 16 shown,
   * then 10 \n (10 bytes) and 10 \u00e9 (20 bytes) */
  ubuf b = {0};
  ubuf_add(&b, "\"", 1);
  for (int i = 0; i < 16; i++) ubuf_add(&b, "a", 1);
  for (int i = 0; i < 10; i++) ubuf_add(&b, "\\n", 2);
  for (int i = 0; i < 10; i++) ubuf_add(&b, "\\u00e9", 6);
  ubuf_add(&b, "\"", 2);
  got = fold(b.p, 0, 40);
  assert_string_equal(got, "\"aaaaaaaaaaaaaaaa...\" (30 more bytes)");
  free(got);
  ubuf_free(&b);
  /* a string that fits is whole, however long */
  expect_fold("\"exactly thirty-eight columns of text!!\"", 0, 40, "\"exactly thirty-eight columns of text!!\"");
}

/* Cut at every width: the shown part never ends inside a UTF-8 character or
 * an escape (a surrogate pair is one), and shown + left out = the whole. */
static void test_cut_never_splits_a_character(void **state) {
  (void)state;
  /* per unit: "é" 2 bytes (1 column), "漢" 3, "\u00e9" 2 (6 columns), "\ud83d\ude00" 4 (12), "\n" 1 (2) */
  const char *units[] = {"\xc3\xa9", "\xe6\xbc\xa2", "\\u00e9", "\\ud83d\\ude00", "\\n", "a"};
  const size_t bytes[] = {2, 3, 2, 4, 1, 1};
  ubuf b = {0};
  size_t total = 0;
  ubuf_add(&b, "\"", 1);
  for (int i = 0; i < 60; i++) {
    ubuf_add(&b, units[i % 6], strlen(units[i % 6]));
    total += bytes[i % 6];
  }
  ubuf_add(&b, "\"", 2);
  for (size_t width = 20; width < 140; width++) {
    char *got = fold(b.p, 0, width);
    assert_true(only_our_sgr(got));
    const char *dots = strstr(got, "...\" (");
    if (!dots) {
      assert_string_equal(got, b.p); /* whole */
      free(got);
      continue;
    }
    /* the shown text is a prefix of the literal made of whole units */
    size_t shown = (size_t)(dots - got), pos = 1, kept = 0;
    assert_memory_equal(got, b.p, shown);
    for (int i = 0; pos < shown; i++) {
      pos += strlen(units[i % 6]);
      kept += bytes[i % 6];
    }
    if (pos != shown) fail_msg("at %zu columns the cut is inside a unit: %s", width, got);
    size_t left = 0;
    assert_int_equal(sscanf(dots, "...\" (%zu more bytes)", &left), 1);
    assert_int_equal(kept + left, total);
    free(got);
  }
  ubuf_free(&b);
}

static void test_depth_and_items_are_summarised(void **state) {
  (void)state;
  /* levels 0-3 are broken over lines; the container at level 4 that does
   * not fit is summarised */
  expect_fold("{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":\"deep and long enough not to fit\",\"f\":2}}}}}", 0, 30,
              "{\n"
              "  \"a\": {\n"
              "    \"b\": {\n"
              "      \"c\": {\n"
              "        \"d\": {...2 keys}\n"
              "      }\n"
              "    }\n"
              "  }\n"
              "}");
  /* 25 items at a width they cannot share a line in: 20 shown */
  ubuf b = {0};
  ubuf_add(&b, "[", 1);
  for (int i = 0; i < 25; i++) {
    char n[16];
    snprintf(n, sizeof n, "%s%d", i ? "," : "", 1000 + i);
    ubuf_add(&b, n, strlen(n));
  }
  ubuf_add(&b, "]", 2);
  char *got = fold(b.p, 0, 20);
  assert_non_null(strstr(got, "[\n  1000,\n  1001,\n"));
  assert_non_null(strstr(got, "  1019,\n  ... 5 more items\n]"));
  assert_null(strstr(got, "1020"));
  free(got);
  ubuf_free(&b);
}

static void test_lines_fit_the_width(void **state) {
  (void)state;
  const char *json =
      "{\"objective\":\"Review the pull request in /workspace/input/repo.bundle (branch 'feature' against 'main'): "
      "find bugs, risky changes and missing tests\",\"limits\":{\"timeoutSeconds\":1800,\"maxModelTurns\":12,"
      "\"maxToolCalls\":30},\"skills\":[\"code-review\"],\"context\":{\"files\":[\"examples/pr-review/repo.bundle\"]}}";
  /* from 72 columns on, the deepest string has room for its cut and its note */
  for (size_t width = 72; width <= 160; width += 4) {
    char *got = fold(json, 11, width), *line = util_fmt("%11s%s", "", got);
    if (widest(line) > width) fail_msg("a line is wider than %zu columns:\n%s", width, line);
    free(got);
    free(line);
  }
}

static void test_not_json_is_refused(void **state) {
  (void)state;
  assert_null(fold("{\"a\":", 0, 80));
  assert_null(fold("[string \"x\"]:3: boom", 0, 80)); /* a Lua error message is not JSON */
  assert_null(fold("1 2", 0, 80));
  assert_null(fold("", 0, 80));
}

/* A raw control character in the stored text (a model's output) reaches the
 * terminal escaped; colour is only our SGR codes. */
static void test_data_never_steers_the_terminal(void **state) {
  (void)state;
  const char *json = "{\"title\":\"\x1b]0;pwned\x07\x1b[2J\",\"bidi\":\"\xe2\x80\xae" "abc\",\"bad\":\"\xff\"}";
  for (int color = 0; color <= 1; color++) {
    pretty_opts o = pretty_defaults(100, color);
    ubuf b = {0};
    assert_int_equal(pretty_json(&b, json, strlen(json), 0, &o), 0);
    ubuf_add(&b, "", 1);
    assert_true(only_our_sgr(b.p));
    assert_non_null(strstr(b.p, "\\u001b]0;pwned\\u0007\\u001b[2J"));
    assert_non_null(strstr(b.p, "\\u202eabc"));
    if (!color) assert_null(strchr(b.p, 0x1b));
    else assert_non_null(strstr(b.p, "\x1b[36m\"title\"\x1b[0m"));
    ubuf_free(&b);
  }
}

/* ----------------------------------------------------------- outcome --- */

static void test_outcome_of_the_pr_review(void **state) {
  (void)state;
  char *got = outcome("completed", REVIEW, ARTIFACTS, 100, 0);
  assert_string_equal(got,
                      "id:        pr1\n"
                      "status:    completed\n"
                      "summary:   Request changes: the refill is no longer capped (blocker), the last token cannot be\n"
                      "           spent, validation was removed and wait_time() can go negative.\n"
                      "verdict:   request_changes\n"
                      "usage:     4 model turns, 4 tool calls, 11,719 tokens\n"
                      "findings:  4 (1 blocker, 2 major, 1 minor)\n"
                      "  SEVERITY  FILE:LINE               TITLE\n"
                      "  blocker   ratelimit/bucket.py:15  Refill no longer capped at capacity\n"
                      "  major     ratelimit/bucket.py:20  Off-by-one: the last token can never be spent\n"
                      "  major     ratelimit/bucket.py:6   Input validation removed\n"
                      "  minor     ratelimit/bucket.py:25  wait_time() can be negative and is untested\n"
                      "artifacts: output/review.md (740 bytes) at /var/db/artifacts/a875\n"
                      "(all of it as JSON: engine show pr1 --json)\n");
  free(got);
  /* narrow: titles wrap in their column, words whole */
  got = outcome("completed", REVIEW, ARTIFACTS, 60, 0);
  assert_non_null(strstr(got, "  major     ratelimit/bucket.py:20  Off-by-one: the last\n"
                              "                                    token can never be spent\n"));
  assert_true(widest(got) <= 60);
  free(got);
}

static void test_outcome_colour(void **state) {
  (void)state;
  char *got = outcome("completed", REVIEW, ARTIFACTS, 100, 1);
  assert_true(only_our_sgr(got));
  assert_non_null(strstr(got, "status:    \x1b[32mcompleted\x1b[0m\n"));
  assert_non_null(strstr(got, "verdict:   \x1b[31mrequest_changes\x1b[0m\n"));
  assert_non_null(strstr(got, "  \x1b[31mblocker\x1b[0m   ratelimit/bucket.py:15"));
  free(got);
}

/* A model can put ESC in a finding's title, a file name or the summary: it
 * is shown as \x1b, as everywhere else the CLI prints for people. */
static void test_outcome_hostile_findings(void **state) {
  (void)state;
  const char *res = "{\"summary\":\"ok\\u001b[2J\\nsecond line\",\"turns\":1,\"result\":{\"verdict\":\"\\u009bx\","
                    "\"findings\":[{\"title\":\"\\u001b]0;pwned\\u0007 title\",\"severity\":\"\\u001b[5mhigh\","
                    "\"file\":\"a\\u202e.py\",\"line\":3}]}}";
  for (int color = 0; color <= 1; color++) {
    char *got = outcome("completed", res, "null", 80, color);
    assert_true(only_our_sgr(got));
    assert_non_null(strstr(got, "\\x1b]0;pwned\\x07 title"));
    assert_non_null(strstr(got, "a\\u202e.py:3"));
    assert_non_null(strstr(got, "\\x1b[5mhigh"));
    assert_non_null(strstr(got, "\\u009bx"));
    /* the summary keeps its line break: a new line at the label's column */
    assert_non_null(strstr(got, "summary:   ok\\x1b[2J\n           second line\n"));
    free(got);
  }
}

static void test_outcome_of_other_results(void **state) {
  (void)state;
  /* a result of another shape: folded as JSON */
  char *got = outcome("completed", "{\"count\":2,\"items\":[\"a\",\"b\"]}", "null", 80, 0);
  assert_string_equal(got, "id:        pr1\n"
                           "status:    completed\n"
                           "result:    {\"count\": 2, \"items\": [\"a\", \"b\"]}\n"
                           "(all of it as JSON: engine show pr1 --json)\n");
  free(got);
  /* hello.lua's: its summary, and the rest as its result */
  got = outcome("completed", "{\"approved\":true,\"greetings\":[\"Hello, Ada\"],\"summary\":\"Hello, Ada!\"}", "null",
                80, 0);
  assert_string_equal(got, "id:        pr1\n"
                           "status:    completed\n"
                           "summary:   Hello, Ada!\n"
                           "result:    {\"approved\": true, \"greetings\": [\"Hello, Ada\"]}\n"
                           "(all of it as JSON: engine show pr1 --json)\n");
  free(got);
  got = outcome("completed", "null", "null", 80, 0);
  assert_non_null(strstr(got, "result:    null\n"));
  free(got);
  /* a session that hit a limit, with no findings and keys of its own */
  got = outcome("completed",
                "{\"summary\":\"stopped\",\"turns\":12,\"tool_calls\":1,\"tokens\":5,\"cost_usd\":0.25,"
                "\"outcome\":\"limit_exceeded\",\"limit\":{\"limit\":\"maxModelTurns\",\"max\":12,\"value\":12},"
                "\"result\":{\"findings\":[],\"extra\":7}}",
                "null", 80, 0);
  assert_non_null(strstr(got, "status:    completed (outcome: limit_exceeded) (limit maxModelTurns reached: 12 of 12)\n"));
  assert_non_null(strstr(got, "usage:     12 model turns, 1 tool call, 5 tokens, $0.2500\n"));
  assert_non_null(strstr(got, "findings:  none\n"));
  assert_non_null(strstr(got, "result:    {\"extra\": 7}\n"));
  free(got);
  /* not a summary */
  pretty_opts o = pretty_defaults(80, 0);
  assert_null(pretty_outcome("[1]", 3, &o));
  assert_null(pretty_outcome("{\"id\":\"x\"}", 10, &o));
}

static void test_long_summary_is_cut(void **state) {
  (void)state;
  ubuf b = {0};
  ubuf_add(&b, "{\"turns\":1,\"summary\":\"", 22);
  for (int i = 0; i < 400; i++) ubuf_add(&b, "w\xc3\xa9rd ", 6); /* 5 columns and 6 bytes each */
  ubuf_add(&b, "\"}", 3);
  char *got = outcome("completed", b.p, "null", 50, 0);
  /* 8 lines of 39 columns from column 11: 8 words and the space after them
   * (48 bytes) each, of 2400 */
  assert_non_null(strstr(got, " ... (2016 more bytes)\n"));
  assert_true(only_our_sgr(got));
  assert_true(widest(got) <= 50 + strlen(" ... (2016 more bytes)"));
  free(got);
  ubuf_free(&b);
}

/* ------------------------------------------------- colour and width --- */

static void test_color_modes(void **state) {
  (void)state;
  pretty_color m;
  assert_int_equal(pretty_color_parse("auto", &m), 0), assert_int_equal(m, PRETTY_COLOR_AUTO);
  assert_int_equal(pretty_color_parse("always", &m), 0), assert_int_equal(m, PRETTY_COLOR_ALWAYS);
  assert_int_equal(pretty_color_parse("never", &m), 0), assert_int_equal(m, PRETTY_COLOR_NEVER);
  assert_int_equal(pretty_color_parse("yes", &m), -1);
  assert_int_equal(pretty_color_parse("", &m), -1);
  int fd = open("/dev/null", O_WRONLY);
  assert_true(fd >= 0);
  unsetenv("NO_COLOR");
  assert_int_equal(pretty_color_on(PRETTY_COLOR_AUTO, fd), 0); /* not a terminal */
  assert_int_equal(pretty_color_on(PRETTY_COLOR_ALWAYS, fd), 1);
  assert_int_equal(pretty_color_on(PRETTY_COLOR_NEVER, fd), 0);
  setenv("NO_COLOR", "1", 1);
  assert_int_equal(pretty_color_on(PRETTY_COLOR_ALWAYS, fd), 1); /* asked for by name */
  unsetenv("NO_COLOR");
  /* not a terminal: $COLUMNS, else 80; never under 20 */
  setenv("COLUMNS", "132", 1);
  assert_int_equal(pretty_width(fd), 132);
  setenv("COLUMNS", "wide", 1);
  assert_int_equal(pretty_width(fd), 80);
  setenv("COLUMNS", "5", 1);
  assert_int_equal(pretty_width(fd), 20);
  unsetenv("COLUMNS");
  assert_int_equal(pretty_width(fd), 80);
  close(fd);
}

/* pretty_table: columns as wide as their widest cell, the last one wrapped
 * to the width and indented to its column, an empty cell left blank, the
 * tones' colours only when asked for, and the data rendered inert. */
static void test_table(void **state) {
  (void)state;
  static const char *const head[] = {"CHECK", "STATE", "DETAIL"};
  pretty_cell cells[] = {
      {"database", PRETTY_PLAIN}, {"ok", PRETTY_GOOD},  {"/var/lib/engine/engine.db (SQLite)", PRETTY_PLAIN},
      {"docker", PRETTY_PLAIN},   {"FAIL", PRETTY_BAD}, {"cannot reach the Docker engine at /var/run/docker.sock", PRETTY_PLAIN},
      {"", PRETTY_PLAIN},         {"", PRETTY_PLAIN},   {"fix: start it\x1b[2J", PRETTY_QUIET},
  };
  pretty_opts o = pretty_defaults(44, 0);
  char *t = pretty_table(head, 3, cells, 3, &o);
  assert_string_equal(t, "CHECK     STATE  DETAIL\n"
                         "database  ok     /var/lib/engine/engine.db\n"
                         "                 (SQLite)\n"
                         "docker    FAIL   cannot reach the Docker\n"
                         "                 engine at\n"
                         "                 /var/run/docker.sock\n"
                         "                 fix: start it\\x1b[2J\n");
  free(t);
  o = pretty_defaults(1000, 1);
  t = pretty_table(head, 3, cells, 2, &o);
  assert_non_null(strstr(t, "\x1b[1mCHECK"));
  assert_non_null(strstr(t, "\x1b[32mok\x1b[0m"));
  assert_non_null(strstr(t, "\x1b[31mFAIL\x1b[0m"));
  free(t);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fits_on_one_line),
      cmocka_unit_test(test_breaks_what_does_not_fit),
      cmocka_unit_test(test_keeps_member_order_and_indents_to_col),
      cmocka_unit_test(test_long_string_cut_with_bytes_left),
      cmocka_unit_test(test_cut_never_splits_a_character),
      cmocka_unit_test(test_depth_and_items_are_summarised),
      cmocka_unit_test(test_lines_fit_the_width),
      cmocka_unit_test(test_not_json_is_refused),
      cmocka_unit_test(test_data_never_steers_the_terminal),
      cmocka_unit_test(test_outcome_of_the_pr_review),
      cmocka_unit_test(test_outcome_colour),
      cmocka_unit_test(test_outcome_hostile_findings),
      cmocka_unit_test(test_outcome_of_other_results),
      cmocka_unit_test(test_long_summary_is_cut),
      cmocka_unit_test(test_color_modes),
      cmocka_unit_test(test_table),
  };
  const struct CMUnitTest bugs[] = {
      cmocka_unit_test(test_cut_never_splits_a_character), /* no defect found yet; the entry must run something */
  };
  if (argc > 1 && strcmp(argv[1], "bugs") == 0) return cmocka_run_group_tests_name("unit_pretty_bugs", bugs, NULL, NULL);
  return cmocka_run_group_tests_name("unit_pretty", tests, NULL, NULL);
}
