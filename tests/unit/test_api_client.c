/* Unit tests for engine/api_client (the CLI as a client of the HTTP API): the
 * Server-Sent Events parser fed the same stream cut in every way (LF, CR,
 * CRLF split between chunks, comments, multi-line data, ids, retry, a BOM),
 * the reader of the API's JSON (json.h: raw spans, strings), path escaping
 * and the URLs and tokens a client refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_client.h"
#include "json.h"
#include "session_view.h"
#include "util.h"

/* ------------------------------------------------------------ helpers --- */

/* What the parser dispatched, one "type|id|data" line per frame. */
typedef struct seen {
  ubuf log;
  int n, stop_after; /* stop_after > 0: the callback stops at that frame */
} seen;

static int record(void *ud, const sse_event *e) {
  seen *s = ud;
  char *line = util_fmt("%s|%s|%.*s\n", e->type, e->id, (int)e->len, e->data);
  assert_int_equal(strlen(e->data), e->len); /* NUL-terminated at its length */
  ubuf_add(&s->log, line, strlen(line));
  free(line);
  s->n++;
  return s->stop_after && s->n == s->stop_after ? 7 : 0;
}

/* Feeds text in pieces of chunk bytes (0: at once) and returns the log. */
static char *parse(const char *text, size_t len, size_t chunk) {
  seen s = {{0}, 0, 0};
  sse_parser p;
  sse_init(&p, record, &s);
  if (!chunk) chunk = len ? len : 1;
  for (size_t i = 0; i < len; i += chunk) assert_int_equal(sse_feed(&p, text + i, i + chunk > len ? len - i : chunk), 0);
  sse_free(&p);
  ubuf_add(&s.log, "", 1);
  return s.log.p;
}

static void expect_every_cut(const char *text, const char *want) {
  size_t len = strlen(text);
  for (size_t chunk = 0; chunk <= 7; chunk++) {
    char *got = parse(text, len, chunk);
    if (strcmp(got, want) != 0) fail_msg("chunk %zu:\n got [%s]\nwant [%s]", chunk, got, want);
    free(got);
  }
}

/* -------------------------------------------------------------- SSE --- */

static void test_frames_as_the_server_sends_them(void **state) {
  (void)state;
  expect_every_cut("retry: 2000\n\n"
                   "id: 1\ndata: {\"seq\":1}\n\n"
                   ":\n\n"
                   "event: agent.delta\ndata: {\"d\":1}\n\n"
                   "id: 2\ndata: {\"seq\":2}\n\n"
                   "event: end\ndata: {\"status\":\"completed\"}\n\n",
                   "message|1|{\"seq\":1}\n"
                   "agent.delta|1|{\"d\":1}\n" /* no id of its own: the last one stays */
                   "message|2|{\"seq\":2}\n"
                   "end|2|{\"status\":\"completed\"}\n");
}

static void test_line_endings(void **state) {
  (void)state;
  const char *want = "message|7|a\nx|7|b\n";
  expect_every_cut("id: 7\r\ndata: a\r\n\r\nevent: x\r\ndata: b\r\n\r\n", want);
  expect_every_cut("id: 7\rdata: a\r\revent: x\rdata: b\r\r", want);
  expect_every_cut("id: 7\ndata: a\n\nevent: x\r\ndata: b\r\r", want);
  /* CR then LF in separate chunks is one line end, not an empty line */
  char *got = parse("data: a\r\ndata: b\r\n\r\n", 20, 8);
  assert_string_equal(got, "message||a\nb\n");
  free(got);
}

static void test_fields(void **state) {
  (void)state;
  expect_every_cut("data:no space\n\n"        /* the space after the colon is optional */
                   "data:  two spaces\n\n"    /* only one is dropped */
                   "data: line 1\ndata: line 2\ndata\n\n" /* lines joined; "data" alone adds an empty line */
                   ": a comment\nevent: typed\n: another\ndata: x\n\n"
                   "unknown: field\ndata: y\n\n"
                   "event: no data\n\n" /* a frame without data dispatches nothing, and resets the type */
                   "data: z\n\n",
                   "message||no space\n"
                   "message|| two spaces\n"
                   "message||line 1\nline 2\n\n"
                   "typed||x\n"
                   "message||y\n"
                   "message||z\n");
}

static void test_ids_and_retry(void **state) {
  (void)state;
  seen s = {{0}, 0, 0};
  sse_parser p;
  sse_init(&p, record, &s);
  const char text[] = "retry: 1500\nid: 41\n\nid: 4\0002\ndata: a\n\nretry: 12x\nid\ndata: b\n\n";
  assert_int_equal(sse_feed(&p, text, sizeof text - 1), 0);
  ubuf_add(&s.log, "", 1);
  /* an id alone sets it; one with a NUL is ignored; "id" alone clears it */
  assert_string_equal(s.log.p, "message|41|a\nmessage||b\n");
  assert_int_equal(p.retry_ms, 1500); /* "12x" is not a number: ignored */
  assert_string_equal(p.last_id, "");
  /* a new connection forgets a half-received frame, keeps the id */
  assert_int_equal(sse_feed(&p, "id: 9\n\ndata: half", 17), 0);
  sse_reset(&p);
  assert_int_equal(sse_feed(&p, "data: whole\n\n", 13), 0);
  assert_string_equal(p.last_id, "9");
  ubuf_add(&s.log, "", 1);
  assert_string_equal(s.log.p + strlen(s.log.p) + 1, "message|9|whole\n");
  ubuf_free(&s.log);
  sse_free(&p);
}

static void test_bom_and_stop(void **state) {
  (void)state;
  expect_every_cut("\xef\xbb\xbf" "data: a\n\n", "message||a\n");
  /* only at the start: a BOM later is text, and a broken one is kept as it was */
  expect_every_cut("data: a\n\n\xef\xbb\xbf" "data: b\n\n", "message||a\n");
  expect_every_cut("\xef\xbbxdata: c\n\n", "");
  seen s = {{0}, 0, 2};
  sse_parser p;
  sse_init(&p, record, &s);
  const char *text = "data: 1\n\ndata: 2\n\ndata: 3\n\n";
  assert_int_equal(sse_feed(&p, text, strlen(text)), 7); /* the callback's value */
  assert_int_equal(s.n, 2);
  ubuf_free(&s.log);
  sse_free(&p);
}

static void test_frame_limit(void **state) {
  (void)state;
  seen s = {{0}, 0, 0};
  sse_parser p;
  sse_init(&p, record, &s);
  p.max = 64;
  char big[200];
  memset(big, 'x', sizeof big);
  assert_int_equal(sse_feed(&p, "data: ", 6), 0);
  assert_int_equal(sse_feed(&p, big, sizeof big), -1);
  assert_int_equal(s.n, 0);
  ubuf_free(&s.log);
  sse_free(&p);
}

/* ------------------------------------------------------------- JSON --- */

static void test_json_spans(void **state) {
  (void)state;
  const char *doc = " {\"a\" : [1, {\"b\":\"}\"}], \"s\":\"x\\\"y\\u00e9\\ud83d\\ude00\\n\", \"n\": -12 ,"
                    "\"o\":{\"a\":2},\"z\":null} ";
  const char *v;
  size_t vn;
  assert_int_equal(json_get(doc, strlen(doc), "a", &v, &vn), 1);
  assert_int_equal(vn, strlen("[1, {\"b\":\"}\"}]"));
  assert_memory_equal(v, "[1, {\"b\":\"}\"}]", vn);
  assert_int_equal(json_get(doc, strlen(doc), "b", &v, &vn), 0); /* nested keys are not members */
  assert_int_equal(json_get(doc, strlen(doc), "o", &v, &vn), 1);
  assert_int_equal(json_get_int(v, vn, "a", 0), 2);
  assert_int_equal(json_get_int(doc, strlen(doc), "n", 0), -12);
  assert_int_equal(json_get_int(doc, strlen(doc), "s", 5), 5); /* not an integer */
  char *s = json_get_string(doc, strlen(doc), "s");
  assert_string_equal(s, "x\"y\xc3\xa9\xf0\x9f\x98\x80\n");
  free(s);
  assert_null(json_get_string(doc, strlen(doc), "z"));
  assert_null(json_get_string(doc, strlen(doc), "missing"));
  s = json_string("\"\\ud800x\"", 9); /* a lone surrogate */
  assert_string_equal(s, "\xef\xbf\xbdx");
  free(s);
  /* not well formed: refused, never half read */
  static const char *bad[] = {"{\"a\":}", "{\"a\":1", "{\"a\" 1}", "[1,2]", "{\"a\":\"\x01\"}", "{\"a\":[1,}", ""};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_int_equal(json_get(bad[i], strlen(bad[i]), "a", &v, &vn), -1);
}

static int count_items(void *ud, const char *v, size_t vn) {
  ubuf *b = ud;
  ubuf_add(b, v, vn);
  ubuf_add(b, "|", 1);
  return 0;
}

static void test_json_each(void **state) {
  (void)state;
  ubuf b = {0};
  const char *arr = "[ {\"x\":[1,2]} ,\"a,b\", 3 ,null]";
  assert_int_equal(json_each(arr, strlen(arr), count_items, &b), 0);
  ubuf_add(&b, "", 1);
  assert_string_equal(b.p, "{\"x\":[1,2]}|\"a,b\"|3|null|");
  ubuf_free(&b);
  assert_int_equal(json_each("[]", 2, count_items, &b), 0);
  assert_int_equal(json_each("[1,", 3, count_items, &b), -1);
  assert_int_equal(json_each("{}", 2, count_items, &b), -1);
  ubuf_free(&b);
}

/* An event as the API sends it becomes the event the local CLI prints. */
static void test_event_round_trip(void **state) {
  (void)state;
  domain_event e = {"wf-1", 12, "agent.message", 1796133056530, "{\"text\":\"hi \\u001b[31m\",\"n\":[1,2]}", NULL};
  char *json = view_event_json(&e);
  view_event back;
  assert_int_equal(view_event_parse(json, strlen(json), &back), 0);
  assert_string_equal(back.e.session_id, "wf-1");
  assert_int_equal(back.e.seq, 12);
  assert_string_equal(back.e.type, "agent.message");
  assert_int_equal(back.e.time, 1796133056530);
  assert_string_equal(back.e.payload, e.payload); /* byte for byte */
  char *again = view_event_json(&back.e), *l1 = view_event_line(&e), *l2 = view_event_line(&back.e);
  assert_string_equal(again, json);
  assert_string_equal(l1, l2);
  free(again);
  free(l1);
  free(l2);
  view_event_free(&back);
  free(json);
  assert_int_equal(view_event_parse("{\"seq\":1}", 9, &back), -1);
}

static void test_live_text(void **state) {
  (void)state;
  const char *text = "{\"session_id\":\"s\",\"type\":\"agent.delta\",\"time\":1,"
                     "\"payload\":{\"step\":9,\"attempt\":1,\"n\":3,\"delta\":{\"type\":\"text\",\"text\":\"a\\nb\\u001b\"}}}";
  int64_t step = 0;
  char *t = view_live_text(text, strlen(text), &step);
  assert_string_equal(t, "a\\nb\\x1b"); /* on one line, inert on a terminal */
  assert_int_equal(step, 9);
  free(t);
  const char *tool = "{\"payload\":{\"step\":9,\"delta\":{\"type\":\"tool_call\",\"arguments\":\"{\"}}}";
  assert_null(view_live_text(tool, strlen(tool), &step));
}

/* ------------------------------------------------------------ client --- */

static void test_escape(void **state) {
  (void)state;
  char *s = api_client_escape("a b/c%d?e#f:g@h.i_j~k-\xc3\xa9");
  assert_string_equal(s, "a%20b%2Fc%25d%3Fe%23f%3Ag%40h.i_j~k-%C3%A9");
  free(s);
}

static void test_urls_and_tokens(void **state) {
  (void)state;
  char err[600];
  static const char *refused[][2] = {
      {"ftp://host", "must start with http:// or https://"},
      {"127.0.0.1:7420", "must start with http:// or https://"},
      {"http://", "not a valid URL"},
      {"http://u:secret@host", "user:password@"},
      {"http://host/?a=1", "?query"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    api_client *c = api_client_new(refused[i][0], NULL, err, sizeof err);
    assert_null(c);
    if (!strstr(err, refused[i][1])) fail_msg("%s: [%s] lacks [%s]", refused[i][0], err, refused[i][1]);
    assert_null(strstr(err, "secret"));
  }
  api_client *c = api_client_new("http://127.0.0.1:1", "eng_bad token\r\nX-Evil: 1", err, sizeof err);
  assert_null(c);
  assert_null(strstr(err, "eng_bad")); /* never the token itself */
  c = api_client_new("HTTPS://example.test:8443/engine//", "eng_ok", err, sizeof err);
  assert_non_null(c);
  assert_string_equal(api_client_url(c), "HTTPS://example.test:8443/engine");
  api_client_free(c);
}

/* A port nobody listens on: no answer, said plainly, status 0. */
static void test_no_server(void **state) {
  (void)state;
  char err[600];
  api_client *c = api_client_new("http://127.0.0.1:9", "eng_secret", err, sizeof err);
  assert_non_null(c);
  api_reply r;
  assert_int_equal(api_client_call(c, "GET", "/healthz", NULL, &r), -1);
  assert_int_equal(r.status, 0);
  if (strncmp(r.message, "cannot reach the server at http://127.0.0.1:9: ", 47) != 0) fail_msg("[%s]", r.message);
  assert_null(strstr(r.message, "eng_secret"));
  api_reply_free(&r);
  api_stream o = {record, NULL, NULL, NULL, 0};
  assert_int_equal(api_client_stream(c, "/v1/events", &o, &r), -1); /* the first connection fails at once */
  assert_int_equal(r.status, 0);
  api_reply_free(&r);
  api_client_free(c);
}

#define T(f) cmocka_unit_test(f)

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      T(test_frames_as_the_server_sends_them),
      T(test_line_endings),
      T(test_fields),
      T(test_ids_and_retry),
      T(test_bom_and_stop),
      T(test_frame_limit),
      T(test_json_spans),
      T(test_json_each),
      T(test_event_round_trip),
      T(test_live_text),
      T(test_escape),
      T(test_urls_and_tokens),
      T(test_no_server),
  };
  const struct CMUnitTest bugs[] = {
      T(test_line_endings), /* no defect found yet; the entry must run something */
  };
  if (argc > 1 && strcmp(argv[1], "bugs") == 0)
    return cmocka_run_group_tests_name("unit_api_client_bugs", bugs, NULL, NULL);
  return cmocka_run_group_tests_name("unit_api_client", tests, NULL, NULL);
}
