/* Unit tests for what a terminal shows of a session: the layout of text in
 * rows (view_wrap), events as transcript rows (view_event_transcript: wrapped,
 * folded with the bytes left out, approvals marked) and the status of a
 * foreground start (engine/cli/progress.c: its words, and how it draws and erases
 * its area so that no half line is left); a session's own spend and a tree's
 * cost and tokens rolled up (view_own_spend, view_tree_*), and the line
 * `engine show` prints of it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "progress.h"
#include "session_view.h"
#include "util.h"

/* ------------------------------------------------------------ helpers --- */

typedef struct laid {
  char *text;
  size_t rows, shown;
} laid;

static laid wrap(const char *s, int width, int first_col, int indent, size_t max_rows) {
  ubuf b = {0};
  laid l;
  l.rows = view_wrap(&b, s, strlen(s), width, first_col, indent, max_rows, &l.shown);
  ubuf_add(&b, "", 1);
  l.text = b.p;
  return l;
}

#define EXPECT_WRAP(s, width, first_col, indent, want, want_rows)                                                   \
  do {                                                                                                              \
    laid l_ = wrap(s, width, first_col, indent, 0);                                                                 \
    assert_string_equal(l_.text, want);                                                                             \
    assert_int_equal(l_.rows, want_rows);                                                                           \
    assert_int_equal(l_.shown, strlen(s));                                                                          \
    free(l_.text);                                                                                                  \
  } while (0)

static size_t count(const char *s, const char *needle) {
  size_t n = 0;
  for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static domain_event event(int64_t seq, const char *type, const char *payload) {
  return (domain_event){"wf-1", seq, type, 1764587138123, payload, NULL};
}

/* ------------------------------------------------------------ view_wrap --- */

static void test_wrap_words(void **state) {
  (void)state;
  EXPECT_WRAP("hello world foo", 11, 0, 2, "hello world\n  foo\n", 2);
  /* the space where a row breaks is dropped: no row ends in one */
  EXPECT_WRAP("abc defgh", 10, 6, 2, "abc\n  defgh\n", 2);
  EXPECT_WRAP("one two three four", 9, 0, 0, "one two\nthree\nfour\n", 3);
  /* no limit: only newlines break */
  EXPECT_WRAP("one two three four", 0, 0, 4, "one two three four\n", 1);
}

static void test_wrap_cuts_long_words(void **state) {
  (void)state;
  EXPECT_WRAP("abcdefghij", 5, 0, 0, "abcde\nfghij\n", 2);
  /* one that fits no row fills the row it starts on */
  EXPECT_WRAP("ab abcdefghij", 5, 0, 1, "ab ab\n cdef\n ghij\n", 3);
}

static void test_wrap_lines(void **state) {
  (void)state;
  /* a blank row has no indentation: no trailing spaces */
  EXPECT_WRAP("a\n\nb", 10, 0, 3, "a\n\n   b\n", 3);
  /* trailing newlines are not rows of their own; leading spaces of a line are kept */
  EXPECT_WRAP("a\n  b\n\n", 10, 0, 0, "a\n  b\n", 2);
  EXPECT_WRAP("", 10, 0, 0, "\n", 1);
  /* a tab goes to the next multiple of 8 from the row's start */
  EXPECT_WRAP("a\tb", 20, 0, 0, "a       b\n", 1);
  EXPECT_WRAP("x\n\ty", 20, 0, 2, "x\n          y\n", 2);
}

static void test_wrap_renders(void **state) {
  (void)state;
  /* an escape takes the columns it shows in, and is never cut in two */
  EXPECT_WRAP("\x1b[2Jab", 8, 0, 0, "\\x1b[2Ja\nb\n", 2);
  EXPECT_WRAP("\x1b", 3, 0, 0, "\\x1b\n", 1);
  EXPECT_WRAP("a\rb\xff", 20, 0, 0, "a\\rb\\xff\n", 1);
  EXPECT_WRAP("\xe2\x80\xae" "evil", 20, 0, 0, "\\u202eevil\n", 1);
  /* wide characters take two columns, combining marks none */
  EXPECT_WRAP("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", 4, 0, 0, "\xe6\x97\xa5\xe6\x9c\xac\n\xe8\xaa\x9e\n", 2);
  EXPECT_WRAP("e\xcc\x81" "e\xcc\x81" "e", 3, 0, 0, "e\xcc\x81" "e\xcc\x81" "e\n", 1);
}

static void test_wrap_max_rows(void **state) {
  (void)state;
  laid l = wrap("l1\nl2\nl3\nl4", 10, 0, 0, 2);
  assert_string_equal(l.text, "l1\nl2\n");
  assert_int_equal(l.rows, 4); /* the whole text's */
  assert_int_equal(l.shown, 6);
  free(l.text);
  l = wrap("aaaa bbbb cccc", 4, 0, 0, 1);
  assert_string_equal(l.text, "aaaa\n");
  assert_int_equal(l.rows, 3);
  assert_int_equal(l.shown, 5);
  free(l.text);
  /* counting only */
  assert_int_equal(view_wrap(NULL, "aaaa bbbb cccc", 14, 4, 0, 0, 0, NULL), 3);
}

/* ----------------------------------------------------------- transcript --- */

/* A tool result of n lines "line 001" ...: its content and its event. */
static char *long_result(int n, char **content) {
  ubuf c = {0};
  for (int i = 1; i <= n; i++) {
    char line[32];
    snprintf(line, sizeof line, "line %03d\\n", i);
    ubuf_add(&c, line, strlen(line));
  }
  ubuf_add(&c, "", 1);
  *content = c.p;
  return util_fmt("{\"content\":\"%s\",\"ok\":true,\"tool\":\"shell\"}", c.p);
}

static void test_transcript_folds(void **state) {
  (void)state;
  char *content, *payload = long_result(100, &content);
  domain_event e = event(4, "tool.result", payload);
  view_layout lay = {80, 20, 0, 0, "engine events wf-1 --full"};
  char *out = view_event_transcript(&e, &lay);
  /* the first half screen of rows, then what is left out */
  assert_int_equal(count(out, "\n"), 11);
  assert_non_null(strstr(out, "#4    11:05:38.123Z    <- shell: line 001\n                          line 002\n"));
  assert_non_null(strstr(out, "line 010\n"));
  assert_null(strstr(out, "line 011"));
  /* 100 lines of 9 bytes, 10 shown */
  assert_non_null(strstr(out, "\n                          [... 810 bytes more: engine events wf-1 --full]\n"));
  free(out);

  lay.full = 1;
  out = view_event_transcript(&e, &lay);
  assert_int_equal(count(out, "\n"), 100);
  assert_non_null(strstr(out, "line 100\n"));
  assert_null(strstr(out, "bytes more"));
  free(out);

  /* what fits is not folded */
  lay = (view_layout){80, 200, 0, 0, NULL};
  out = view_event_transcript(&e, &lay);
  assert_int_equal(count(out, "\n"), 100);
  free(out);
  free(payload);
  free(content);
}

static void test_transcript_wraps_under_its_start(void **state) {
  (void)state;
  domain_event e = event(12, "agent.message",
                         "{\"text\":\"The refill is no longer capped at capacity. The last token cannot be spent.\\n\\n"
                         "Second.\"}");
  view_layout lay = {80, 24, 0, 0, NULL};
  char *out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#12   11:05:38.123Z  assistant: The refill is no longer capped at capacity. The\n"
                           "                                last token cannot be spent.\n"
                           "\n"
                           "                                Second.\n");
  free(out);
  /* on a narrow terminal, under the text after the time */
  lay.width = 50;
  out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#12   11:05:38.123Z  assistant: The refill is no\n"
                           "                     longer capped at capacity.\n"
                           "                     The last token cannot be\n"
                           "                     spent.\n"
                           "\n"
                           "                     Second.\n");
  free(out);
  /* the words of the line form */
  e = event(3, "tool.requested", "{\"args\":{\"command\":\"ls\"},\"tool\":\"shell\"}");
  out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#3    11:05:38.123Z    -> shell $ ls\n");
  free(out);
}

/* Each kind as web/event_kinds.json describes it, not its JSON. */
static void test_transcript_kinds(void **state) {
  (void)state;
  view_layout lay = {80, 0, 1, 0, NULL};
  domain_event e = event(3, "sandbox.ready", "{\"container\":\"5aaff733078714daef05\",\"driver\":\"docker\",\"host\":\"vm\"}");
  char *out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#3    11:05:38.123Z  sandbox ready: docker container 5aaff7330787 on vm\n");
  free(out);
  e = event(4, "tool.requested", "{\"args\":{\"path\":\"/w/a.py\",\"start_line\":3},\"tool\":\"read_file\"}");
  out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#4    11:05:38.123Z    -> read_file read /w/a.py from line 3\n");
  free(out);
  e = event(5, "tool.requested",
            "{\"args\":{\"path\":\"/w/r.md\",\"content\":\"# Title\\n\\none\\ntwo\\nthree\\nfour\\nfive\\n\"},\"tool\":\"write_file\"}");
  out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#5    11:05:38.123Z    -> write_file /w/r.md (33 bytes, 7 lines)\n"
                           "                            # Title\n"
                           "                            one\n"
                           "                            two\n"
                           "                            three\n"
                           "                            ... 2 more lines\n");
  free(out);
  const char *review = "{\"findings\":[{\"file\":\"a.py\",\"line\":3,\"severity\":\"major\",\"title\":\"Off by one\"}],"
                       "\"summary\":\"One problem.\",\"verdict\":\"request_changes\"}";
  char *payload = util_fmt("{\"args\":%s,\"tool\":\"publish_review\"}", review);
  e = event(6, "tool.requested", payload);
  out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#6    11:05:38.123Z    -> publish_review\n"
                           "    summary:   One problem.\n"
                           "    verdict:   request_changes\n"
                           "    findings:  1 (1 major)\n"
                           "      SEVERITY  FILE:LINE  TITLE\n"
                           "      major     a.py:3     Off by one\n");
  free(out);
  free(payload);
  payload = util_fmt("{\"args\":%s,\"reason\":\"r\",\"request_id\":\"c1\",\"tool\":\"publish_review\"}", review);
  e = event(7, "approval.requested", payload);
  out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#7    11:05:38.123Z  ?? APPROVAL NEEDED publish_review (request c1)\n"
                           "                        reason: r\n"
                           "                        args: a review with 1 finding, verdict request_changes\n");
  free(out);
  free(payload);
  /* the model's final answer, a result: its outcome; other JSON stays text */
  e = event(8, "agent.message", "{\"text\":\"{\\\"summary\\\": \\\"Done.\\\", \\\"result\\\": {\\\"verdict\\\": \\\"approve\\\", "
                                "\\\"findings\\\": []}}\"}");
  out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#8    11:05:38.123Z  assistant: the final answer:\n"
                           "    summary:   Done.\n"
                           "    verdict:   approve\n");
  free(out);
  e = event(8, "agent.message", "{\"text\":\"{\\\"other\\\": 1}\"}");
  out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#8    11:05:38.123Z  assistant: {\"other\": 1}\n");
  free(out);
  /* a tool no kind describes, or arguments a kind cannot show: their JSON */
  e = event(9, "tool.requested", "{\"args\":{\"q\":1},\"tool\":\"mystery\"}");
  out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#9    11:05:38.123Z    -> mystery {\"q\":1}\n");
  free(out);
  e = event(9, "tool.requested", "{\"args\":{\"body\":\"LGTM\"},\"tool\":\"publish_review\"}");
  out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#9    11:05:38.123Z    -> publish_review {\"body\":\"LGTM\"}\n");
  free(out);
}

static void test_transcript_marks_approvals(void **state) {
  (void)state;
  domain_event e = event(6, "approval.requested",
                         "{\"args\":{\"body\":\"LGTM\"},\"reason\":\"needs a person\",\"request_id\":\"r1\","
                         "\"tool\":\"publish_review\"}");
  view_layout lay = {80, 24, 0, 1, NULL};
  char *out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#6    11:05:38.123Z  \033[1;33m?? APPROVAL NEEDED\033[0m publish_review (request r1)\n"
                           "                        reason: needs a person\n"
                           "                        args: {\"body\":\"LGTM\"}\n");
  free(out);
  lay.color = 0;
  out = view_event_transcript(&e, &lay);
  assert_null(strchr(out, '\033'));
  free(out);
  e = event(7, "approval.decided", "{\"approved\":true,\"approver\":\"local:ada\",\"reason\":\"fine\",\"request_id\":\"r1\"}");
  out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#7    11:05:38.123Z  ok APPROVED by local:ada (request r1)\n"
                           "                        reason: fine\n");
  free(out);
  e = event(7, "approval.decided", "{\"approved\":false,\"approver\":\"token:bob\",\"request_id\":\"r1\"}");
  out = view_event_transcript(&e, &lay);
  assert_string_equal(out, "#7    11:05:38.123Z  !! DENIED by token:bob (request r1)\n");
  free(out);
  lay.color = 1;
  out = view_event_transcript(&e, &lay);
  assert_non_null(strstr(out, "\033[1;31m!! DENIED\033[0m"));
  free(out);
}

static void test_transcript_is_terminal_safe(void **state) {
  (void)state;
  domain_event e = event(5, "tool.result", "{\"content\":\"\\u001b]0;pwned\\u0007 \\u009b \\u202e x\",\"tool\":\"sh\\u001b[2J\"}");
  view_layout lay = {80, 24, 0, 0, NULL};
  char *out = view_event_transcript(&e, &lay);
  assert_null(strchr(out, '\033'));
  assert_null(strchr(out, '\a'));
  assert_null(strstr(out, "\xc2\x9b"));
  assert_null(strstr(out, "\xe2\x80\xae"));
  assert_non_null(strstr(out, "<- sh\\x1b[2J: \\x1b]0;pwned\\x07 \\u009b \\u202e x\n"));
  free(out);
}

/* ------------------------------------------------------------- progress --- */

static int64_t at(int h, int m, int s) { return ((int64_t)h * 3600 + m * 60 + s) * 1000 + 1764547200000; }

static void test_progress_words(void **state) {
  (void)state;
  progress *p = progress_new(stdout, NULL, "wf-1", 0, 0);
  char d[32];
  progress_duration(0, d, sizeof d);
  assert_string_equal(d, "0 s");
  progress_duration(65000, d, sizeof d);
  assert_string_equal(d, "1 min 05 s");
  progress_duration(7500000, d, sizeof d);
  assert_string_equal(d, "2 h 05 min");

  char *js = util_fmt("{\"kind\":\"activity\",\"activity\":\"session.tool\",\"seq\":9,\"since\":%lld,\"attempt\":2,"
                      "\"last_error\":null}", (long long)at(10, 42, 1));
  FILE *devnull = fopen("/dev/null", "w");
  progress_free(p);
  p = progress_new(devnull, NULL, "wf-1", 0, 0);
  domain_event e = event(8, "tool.requested", "{\"args\":{},\"tool\":\"shell\"}");
  progress_event(p, &e);
  progress_set_waits(p, js);
  char *s = progress_status(p, at(10, 42, 13), 1);
  assert_string_equal(s, "tool shell running for 12 s");
  free(s);
  s = progress_status(p, at(10, 42, 13), 0);
  assert_string_equal(s, "~ tool shell running");
  free(s);
  free(js);

  js = util_fmt("{\"kind\":\"activity\",\"activity\":\"x.fetch\",\"seq\":9,\"since\":%lld,\"attempt\":3,"
                "\"last_error\":{\"type\":\"HttpError\",\"message\":\"503 from upstream\"}}", (long long)at(10, 0, 0));
  progress_set_waits(p, js);
  s = progress_status(p, at(10, 3, 4), 1);
  assert_string_equal(s, "activity x.fetch running for 3 min 04 s (retrying; last error: 503 from upstream)");
  free(s);
  free(js);

  /* model turns: counted from the recorded messages, tokens from their usage */
  e = event(10, "agent.message", "{\"text\":\"a\",\"turn\":2,\"usage\":{\"input_tokens\":1200,\"output_tokens\":80}}");
  progress_event(p, &e);
  js = util_fmt("{\"kind\":\"activity\",\"activity\":\"model.turn\",\"seq\":12,\"since\":%lld,\"attempt\":1,"
                "\"last_error\":null}", (long long)at(10, 0, 0));
  progress_set_waits(p, js);
  s = progress_status(p, at(10, 0, 3), 1);
  assert_string_equal(s, "model turn 3: waiting for the model (3 s); 1280 tokens in the turns before");
  free(s);
  progress_delta(p, "{\"step\":12,\"attempt\":1,\"n\":1,\"delta\":{\"type\":\"text\",\"text\":\"h\xc3\xa9llo\"}}");
  progress_delta(p, "{\"step\":12,\"attempt\":1,\"n\":2,\"delta\":{\"type\":\"tool_call\",\"arguments\":\"{}\"}}");
  s = progress_status(p, at(10, 0, 4), 1);
  assert_string_equal(s, "model turn 3 streaming: 7 characters so far (4 s); 1280 tokens in the turns before");
  free(s);
  s = progress_status(p, at(10, 0, 4), 0);
  assert_string_equal(s, "~ model turn 3");
  free(s);
  free(js);

  js = util_fmt("{\"kind\":\"approval\",\"request_id\":\"call_4-8f\",\"tool\":\"publish_review\",\"about\":\"tool\","
                "\"signal\":\"approval:call_4-8f\",\"since\":%lld,\"deadline\":%lld}",
                (long long)at(10, 42, 1), (long long)at(11, 42, 1));
  progress_set_waits(p, js);
  s = progress_status(p, at(10, 43, 6), 1);
  assert_string_equal(s, "waiting for approval of publish_review since 10:42:01 (1 min 05 s); times out at 11:42:01\n"
                         "answer from another terminal: engine approve wf-1 --request call_4-8f (or --deny --reason "
                         "TEXT)");
  free(s);
  s = progress_status(p, at(10, 43, 6), 0);
  assert_string_equal(s, "engine: wf-1 is waiting for approval call_4-8f; from another terminal: engine approve wf-1 "
                         "--request call_4-8f (or --deny --reason TEXT)");
  free(s);
  free(js);

  js = util_fmt("{\"kind\":\"signal\",\"signal\":\"go\",\"since\":%lld,\"deadline\":null}", (long long)at(9, 0, 0));
  progress_set_waits(p, js);
  s = progress_status(p, at(9, 0, 2), 1);
  assert_string_equal(s, "waiting for signal 'go' since 09:00:00 (2 s)\n"
                         "send it from another terminal: engine signal wf-1 go '{...}'");
  free(s);
  free(js);
  js = util_fmt("{\"kind\":\"timer\",\"since\":%lld,\"due_at\":%lld}", (long long)at(9, 0, 0), (long long)at(9, 5, 0));
  progress_set_waits(p, js);
  s = progress_status(p, at(9, 0, 30), 1);
  assert_string_equal(s, "sleeping until 09:05:00 (4 min 30 s left)");
  free(s);
  free(js);
  progress_set_waits(p, NULL);
  s = progress_status(p, at(9, 0, 30), 0);
  assert_string_equal(s, ""); /* running its own code: no plain line */
  free(s);
  progress_free(p);
  fclose(devnull);
}

/* The bytes a progress wrote to a memory stream. */
typedef struct capture {
  char *buf;
  size_t len;
  FILE *f;
} capture;

static const char *captured(capture *c) {
  fflush(c->f);
  return c->buf;
}

static void test_progress_plain_lines(void **state) {
  (void)state;
  capture c = {0};
  c.f = open_memstream(&c.buf, &c.len);
  progress *p = progress_new(c.f, NULL, "wf-1", 0, 0);
  progress_start(p, NULL);
  char *js = util_fmt("{\"kind\":\"activity\",\"activity\":\"model.turn\",\"seq\":4,\"since\":%lld,\"attempt\":1,"
                      "\"last_error\":null}", (long long)util_now_ms());
  progress_set_waits(p, js);
  progress_refresh(p);
  progress_refresh(p); /* the same state: no second line */
  progress_delta(p, "{\"step\":4,\"attempt\":1,\"n\":1,\"delta\":{\"type\":\"text\",\"text\":\"Hel\"}}");
  progress_delta(p, "{\"step\":4,\"attempt\":1,\"n\":2,\"delta\":{\"type\":\"text\",\"text\":\"lo\\u001b[2J\"}}");
  domain_event e = event(5, "agent.message", "{\"text\":\"Hello\"}");
  progress_event(p, &e);
  progress_set_waits(p, "{\"kind\":\"signal\",\"signal\":\"go\",\"since\":1,\"deadline\":null}");
  progress_refresh(p);
  progress_stop(p);
  assert_string_equal(captured(&c), "~ model turn 1\n"
                                    "~ live (step 4): Hello\\x1b[2J\n"
                                    "#5    11:05:38.123Z  assistant: Hello\n"
                                    "engine: wf-1 is waiting for signal 'go'; send it with: engine signal wf-1 go '{...}'\n");
  progress_free(p);
  free(js);
  fclose(c.f);
  free(c.buf);
}

static void test_progress_draws_in_place(void **state) {
  (void)state;
  capture c = {0};
  c.f = open_memstream(&c.buf, &c.len);
  progress *p = progress_new(c.f, NULL, "wf-1", 1, 0);
  progress_refresh(p); /* not started: nothing shows */
  assert_string_equal(captured(&c), "");
  progress_start(p, NULL);
  char *js = util_fmt("{\"kind\":\"signal\",\"signal\":\"go\",\"since\":%lld,\"deadline\":null}", (long long)util_now_ms());
  progress_set_waits(p, js);
  progress_refresh(p);
  /* two rows, the cursor left at the end of the last one */
  const char *out = captured(&c);
  assert_non_null(strstr(out, "- waiting for signal 'go' since "));
  assert_non_null(strstr(out, "(0 s)\n  send it from another terminal: engine signal wf-1 go '{...}'"));
  assert_int_equal(out[strlen(out) - 1], '\'');
  size_t before = strlen(out);
  /* an event: the area is erased (back to its first row), the event printed, the area drawn again */
  domain_event e = event(3, "signal.sent", "{\"by\":\"local:ada\",\"name\":\"go\"}");
  progress_event(p, &e);
  out = captured(&c) + before;
  const char *want = "\r\033[1A\033[J#3    11:05:38.123Z  signal 'go' sent by local:ada\n- waiting for signal";
  assert_memory_equal(out, want, strlen(want));
  before += strlen(out);
  /* streamed text shows above the status, and goes with the recorded message */
  progress_set_waits(p, NULL);
  nanosleep(&(struct timespec){0, 60 * 1000 * 1000}, NULL); /* deltas redraw at most every 40 ms */
  progress_delta(p, "{\"step\":4,\"attempt\":1,\"n\":1,\"delta\":{\"type\":\"text\",\"text\":\"Streaming text\"}}");
  out = captured(&c) + before;
  assert_non_null(strstr(out, "Streaming text\n- running"));
  before += strlen(out);
  e = event(5, "agent.message", "{\"text\":\"Recorded text\"}");
  progress_event(p, &e);
  out = captured(&c) + before;
  want = "\r\033[1A\033[J#5    11:05:38.123Z  assistant: Recorded text\n- running";
  assert_string_equal(out, want);
  before += strlen(out);
  /* stopped: erased, and what is printed next starts on a clean row */
  progress_stop(p);
  assert_string_equal(captured(&c) + before, "\r\033[J");
  progress_free(p);
  free(js);
  fclose(c.f);
  free(c.buf);
}

/* ------------------------------------------------- cost and tokens rolled up --- */

/* A session's own spend: its result's tokens and cost less its ended
 * sub-sessions' (which its totals include), or its error's usage; nothing for
 * a workflow without numbers. */
static void test_own_spend(void **state) {
  (void)state;
  view_spend s;
  assert_int_equal(view_own_spend("{\"tokens\":1100,\"cost_usd\":0.0011,\"turns\":1}", NULL, &s), 1);
  assert_int_equal(s.tokens, 1100);
  assert_true(s.priced && s.cost_usd > 0.00109 && s.cost_usd < 0.00111);
  /* a delegating session: 3340 tokens with its sub-sessions' 3300 */
  assert_int_equal(view_own_spend("{\"tokens\":3340,\"cost_usd\":0.05,\"sub_sessions\":{\"count\":2,\"tokens\":3300,"
                                  "\"cost_usd\":0.04}}",
                                  NULL, &s),
                   1);
  assert_int_equal(s.tokens, 40);
  assert_true(s.cost_usd > 0.0099 && s.cost_usd < 0.0101);
  /* no prices: tokens only */
  assert_int_equal(view_own_spend("{\"tokens\":7}", NULL, &s), 1);
  assert_int_equal(s.tokens, 7);
  assert_false(s.priced);
  /* a sub-session that failed: its error's usage */
  assert_int_equal(view_own_spend(NULL, "{\"type\":\"Boom\",\"usage\":{\"tokens\":30,\"turns\":1}}", &s), 1);
  assert_int_equal(s.tokens, 30);
  /* nothing to count: a workflow's plain result, a running one, an error without usage */
  assert_int_equal(view_own_spend("{\"sum\":4}", NULL, &s), 0);
  assert_int_equal(view_own_spend("42", NULL, &s), 0);
  assert_int_equal(view_own_spend(NULL, NULL, &s), 0);
  assert_int_equal(view_own_spend(NULL, "{\"type\":\"Boom\"}", &s), 0);
  assert_int_equal(view_own_spend("{\"tokens\":\"many\"}", NULL, &s), 0);
  assert_int_equal(s.tokens, 0);
}

static wf_row row(const char *id, const char *status, const char *result, const char *error) {
  wf_row w = {0};
  w.id = (char *)id;
  w.status = (char *)status;
  w.result = (char *)result;
  w.error = (char *)error;
  return w;
}

/* A tree: a parent that delegated to two sub-sessions (its totals hold
 * theirs), one more that failed, one still running. Each one's own spend
 * counted once. */
static void test_tree_rollup(void **state) {
  (void)state;
  view_tree t = {0};
  wf_row ws[] = {
      row("p", "completed",
          "{\"tokens\":3340,\"cost_usd\":0.0334,\"sub_sessions\":{\"count\":2,\"tokens\":3300,\"cost_usd\":0.033}}",
          NULL),
      row("p.1", "completed", "{\"tokens\":1100,\"cost_usd\":0.011}", NULL),
      row("p.2", "completed", "{\"tokens\":2200,\"cost_usd\":0.022}", NULL),
      row("p.3", "failed", NULL, "{\"type\":\"X\",\"usage\":{\"tokens\":5,\"cost_usd\":0.00005}}"),
      row("p.4", "running", NULL, NULL),
  };
  for (size_t i = 0; i < sizeof ws / sizeof *ws; i++) view_tree_add(&t, &ws[i]);
  assert_int_equal(t.sessions, 5);
  assert_int_equal(t.running, 1);
  assert_int_equal(t.tokens, 40 + 1100 + 2200 + 5);
  assert_true(t.priced);
  char *j = view_tree_json(&t);
  assert_string_equal(j, "{\"sessions\":5,\"tokens\":3345,\"cost_usd\":0.03345,\"running\":1}");
  free(j);
  /* nothing priced: the cost is null, not 0 */
  view_tree u = {0};
  wf_row plain = row("w", "waiting", NULL, NULL), done = row("w.1", "completed", "{\"tokens\":9}", NULL);
  view_tree_add(&u, &plain);
  view_tree_add(&u, &done);
  j = view_tree_json(&u);
  assert_string_equal(j, "{\"sessions\":2,\"tokens\":9,\"cost_usd\":null,\"running\":1}");
  free(j);
}

/* `engine show`: the tree's line under the children, only when there are children. */
static void test_show_tree_line(void **state) {
  (void)state;
  const char *with = "{\"id\":\"p\",\"status\":\"waiting\",\"run\":1,\"script\":\"/w/agent_session.lua\",\"code_hash\":\"ab\","
                     "\"created_at\":0,\"updated_at\":0,\"input\":{},\"result\":null,\"error\":null,\"waiting_on\":\"\","
                     "\"history_events\":3,\"tasks\":0,\"buffered_signals\":0,\"parent\":null,"
                     "\"children\":[{\"id\":\"p.1\",\"status\":\"completed\",\"script\":\"agent_session.lua\","
                     "\"parent_close\":\"request_cancel\"}],"
                     "\"tree\":{\"sessions\":2,\"tokens\":1140,\"cost_usd\":0.0114,\"running\":1}}";
  char *text = view_summary_text(with, strlen(with));
  assert_non_null(strstr(text, "children:  1\n"));
  assert_non_null(strstr(text, "\ntree:      2 sessions, 1140 tokens, $0.0114, 1 running\n"));
  free(text);
  const char *unpriced = "{\"id\":\"p\",\"status\":\"completed\",\"children\":[{\"id\":\"p.1\",\"status\":\"completed\"}],"
                         "\"tree\":{\"sessions\":2,\"tokens\":9,\"cost_usd\":null,\"running\":0}}";
  text = view_summary_text(unpriced, strlen(unpriced));
  assert_non_null(strstr(text, "\ntree:      2 sessions, 9 tokens\n"));
  free(text);
  const char *leaf = "{\"id\":\"q\",\"status\":\"completed\",\"children\":[],"
                     "\"tree\":{\"sessions\":1,\"tokens\":9,\"cost_usd\":null,\"running\":0}}";
  text = view_summary_text(leaf, strlen(leaf));
  assert_null(strstr(text, "tree:"));
  free(text);
}

int main(int argc, char **argv) {
  setenv("TZ", "UTC", 1);
  tzset();
  setenv("COLUMNS", "80", 1);
  setenv("LINES", "24", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wrap_words),
      cmocka_unit_test(test_wrap_cuts_long_words),
      cmocka_unit_test(test_wrap_lines),
      cmocka_unit_test(test_wrap_renders),
      cmocka_unit_test(test_wrap_max_rows),
      cmocka_unit_test(test_transcript_folds),
      cmocka_unit_test(test_transcript_wraps_under_its_start),
      cmocka_unit_test(test_transcript_marks_approvals),
      cmocka_unit_test(test_transcript_kinds),
      cmocka_unit_test(test_transcript_is_terminal_safe),
      cmocka_unit_test(test_progress_words),
      cmocka_unit_test(test_progress_plain_lines),
      cmocka_unit_test(test_progress_draws_in_place),
      cmocka_unit_test(test_own_spend),
      cmocka_unit_test(test_tree_rollup),
      cmocka_unit_test(test_show_tree_line),
  };
  (void)argc;
  (void)argv;
  return cmocka_run_group_tests_name("unit_session_view", tests, NULL, NULL);
}
