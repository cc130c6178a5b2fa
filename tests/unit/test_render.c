/* Unit tests for text that reaches people and JSON readers: the UTF-8 decoder
 * (util_utf8_decode), the renderer for terminals (engine/base/render.c), the JSON
 * output filter (json_for_output) and the workflow id rule (engine_check_id).
 *
 * Tests whose name starts with BUG_ document a defect of the code this
 * replaced (see the comment at each one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workflow_ops.h"
#include "json.h"
#include "render.h"
#include "util.h"

/* ------------------------------------------------------------ helpers --- */

/* s[0..n) rendered with flags and no limit, into a static buffer. */
static const char *R(const char *s, size_t n, int flags) {
  static char out[4096];
  return render_buf(out, sizeof out, s, n, flags);
}
#define RS(lit) R(lit, sizeof lit - 1, 0)

/* json_for_output of a literal, compared and freed. */
static void expect_json(const char *in, size_t n, const char *want) {
  char *got = json_for_output(in, n);
  assert_string_equal(got, want);
  free(got);
}
#define EXPECT_JSON(lit, want) expect_json(lit, sizeof lit - 1, want)

/* Whether s is valid UTF-8 with no code point a terminal acts on (the promise
 * of both the renderer and the JSON filter). */
static int inert(const char *s) {
  size_t n = strlen(s);
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t bad, len = util_utf8_decode(s + i, n - i, &cp, &bad);
    if (!len || util_unsafe_codepoint(cp)) return 0;
    i += len;
  }
  return 1;
}

static uint64_t rng = 88172645463325252ull;
static unsigned next_byte(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (unsigned)(rng & 0xff);
}

/* ---------------------------------------------------------------- UTF-8 --- */

static void test_utf8_valid(void **state) {
  (void)state;
  uint32_t cp;
  size_t bad;
  assert_int_equal(util_utf8_decode("A", 1, &cp, &bad), 1);
  assert_int_equal(cp, 'A');
  assert_int_equal(util_utf8_decode("\xc3\xa9", 2, &cp, &bad), 2);
  assert_int_equal(cp, 0xE9);
  assert_int_equal(util_utf8_decode("\xe2\x80\xae", 3, &cp, &bad), 3);
  assert_int_equal(cp, 0x202E);
  assert_int_equal(util_utf8_decode("\xf0\x9f\x98\x80", 4, &cp, &bad), 4);
  assert_int_equal(cp, 0x1F600);
  assert_int_equal(util_utf8_decode("\xf4\x8f\xbf\xbf", 4, &cp, &bad), 4);
  assert_int_equal(cp, 0x10FFFF);
  assert_int_equal(util_utf8_decode("\xc2\x9b", 2, &cp, &bad), 2); /* C1: valid UTF-8, unsafe */
  assert_int_equal(cp, 0x9B);
  assert_int_equal(util_utf8_decode("\0", 1, &cp, &bad), 1);
  assert_int_equal(cp, 0);
}

static void test_utf8_invalid_maximal_subparts(void **state) {
  (void)state;
  uint32_t cp;
  size_t bad;
  struct {
    const char *s;
    size_t n, bad;
  } cases[] = {
      {"\x80", 1, 1},                 /* a lone continuation byte */
      {"\xff", 1, 1},                 {"\xfe", 1, 1}, {"\xf5\x80\x80\x80", 4, 1},
      {"\xc0\x80", 2, 1},             /* overlong NUL */
      {"\xc1\xbf", 2, 1},             {"\xe0\x80\x80", 3, 1}, /* overlong 3-byte */
      {"\xf0\x80\x80\x80", 4, 1},     /* overlong 4-byte */
      {"\xed\xa0\x80", 3, 1},         /* a surrogate */
      {"\xf4\x90\x80\x80", 4, 1},     /* past U+10FFFF */
      {"\xe2\x80", 2, 2},             /* cut at the end */
      {"\xe2\x80]", 3, 2},            /* cut before ASCII */
      {"\xf0\x9f\x98" "A", 4, 3},     {"\xc3", 1, 1}, {"\xc3" "A", 2, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    bad = 99;
    assert_int_equal(util_utf8_decode(cases[i].s, cases[i].n, &cp, &bad), 0);
    assert_int_equal(bad, cases[i].bad);
  }
}

static void test_unsafe_codepoints(void **state) {
  (void)state;
  uint32_t unsafe[] = {0, 7, 0x1b, 0x1f, 0x7f, 0x80, 0x9b, 0x9f, 0x61c, 0x200e, 0x200f,
                       0x202a, 0x202e, 0x2066, 0x2069};
  uint32_t safe[] = {' ', 'a', '~', 0xa0, 0xe9, 0x200b, 0x2028, 0x2070, 0x1F600};
  for (size_t i = 0; i < sizeof unsafe / sizeof unsafe[0]; i++) assert_true(util_unsafe_codepoint(unsafe[i]));
  for (size_t i = 0; i < sizeof safe / sizeof safe[0]; i++) assert_false(util_unsafe_codepoint(safe[i]));
}

/* --------------------------------------------------------------- render --- */

static void test_render_escapes(void **state) {
  (void)state;
  assert_string_equal(RS("\x1b]0;pwned\x07"), "\\x1b]0;pwned\\x07");
  assert_string_equal(RS("\x1b[2J\x1b[31m"), "\\x1b[2J\\x1b[31m");
  assert_string_equal(RS("a\x7f" "b"), "a\\x7fb");
  assert_string_equal(RS("\xc2\x9b" "1m"), "\\u009b1m");    /* C1 as UTF-8 */
  assert_string_equal(RS("\x9b" "1m"), "\\x9b1m");          /* C1 as a raw byte: not UTF-8 */
  assert_string_equal(RS("\xe2\x80\xae" "txt"), "\\u202etxt"); /* bidi override */
  assert_string_equal(RS("\xe2\x81\xa6" "x\xe2\x81\xa9"), "\\u2066x\\u2069");
  assert_string_equal(RS("\xff\xfe"), "\\xff\\xfe");
  assert_string_equal(RS("\xe2\x80]"), "\\xe2\\x80]");     /* a cut sequence, byte by byte */
  assert_string_equal(RS("\xed\xa0\x80"), "\\xed\\xa0\\x80"); /* a surrogate */
  assert_string_equal(R("a\0b", 3, 0), "a\\x00b");
  assert_string_equal(RS("a\rb"), "a\\rb");
}

static void test_render_keeps_text(void **state) {
  (void)state;
  const char *plain = "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 C:\\dir \"q\" 100% {json}";
  assert_string_equal(R(plain, strlen(plain), 0), plain);
  assert_string_equal(RS(""), "");
}

static void test_render_lines(void **state) {
  (void)state;
  assert_string_equal(RS("a\nb\tc"), "a\\nb\\tc");
  assert_string_equal(R("a\nb\tc\x1b", 6, RENDER_MULTILINE), "a\nb\tc\\x1b");
  assert_string_equal(R("a\r\nb", 4, RENDER_MULTILINE), "a\\r\nb");
}

static void test_render_cut(void **state) {
  (void)state;
  char out[8];
  assert_string_equal(render_buf(out, sizeof out, "abcdefg", 7, 0), "abcdefg"); /* fits exactly: no dots */
  assert_string_equal(render_buf(out, sizeof out, "abcdefgh", 8, 0), "abcd...");
  assert_string_equal(render_buf(out, sizeof out, "\x1b\x1b\x1b", 3, 0), "\\x1b..."); /* an escape is never split */
  assert_string_equal(render_buf(out, sizeof out, "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", 9, 0), "\xe6\x97\xa5...");
  char tiny[3];
  assert_string_equal(render_buf(tiny, sizeof tiny, "abcdef", 6, 0), "..");
  char *s = render_str("x\x1b", 0, 0);
  assert_string_equal(s, "x\\x1b");
  free(s);
  s = render_str("0123456789", 0, 6);
  assert_string_equal(s, "012...");
  free(s);
}

static void test_render_line(void **state) {
  (void)state;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  render_line(f, 0, "engine: %s is waiting for signal '%s'", "wf-1", "go\x1b]0;t\x07\n[fake line]");
  render_line(f, 12, "%s", "0123456789abcdef");
  fclose(f);
  assert_string_equal(buf, "engine: wf-1 is waiting for signal 'go\\x1b]0;t\\x07\\n[fake line]'\n012345678...\n");
  free(buf);
}

/* Whatever bytes come in, what goes out is valid UTF-8 that a terminal does
 * not act on (fixed seed, so a failure repeats). */
static void test_render_any_bytes(void **state) {
  (void)state;
  char in[64];
  for (int round = 0; round < 5000; round++) {
    size_t n = next_byte() % sizeof in;
    for (size_t i = 0; i < n; i++) {
      unsigned b = next_byte();
      /* lean towards the interesting bytes */
      in[i] = (char)(b < 64 ? (b & 0x1f) : b < 128 ? 0x80 | (b & 0x3f) : b < 160 ? 0xe2 : b);
    }
    char *s = render_str((in[n] = 0, in), 0, 0);
    assert_true(inert(s));
    assert_null(strchr(s, '\n'));
    free(s);
    char out[20];
    render_buf(out, sizeof out, in, n, 0);
    assert_true(strlen(out) < sizeof out);
    assert_true(inert(out));
  }
}

/* The old transcript cut a field at a byte count, so a cut could fall inside a
 * multi-byte character and leave invalid UTF-8 on the screen (and, with
 * content:sub(1, 2000) in the session, inside an event). */
static void BUG_cut_splits_a_character(void **state) {
  (void)state;
  char out[6];
  render_buf(out, sizeof out, "ab\xc3\xa9\xc3\xa9", 6, 0);
  assert_true(inert(out));
  assert_string_equal(out, "ab...");
}

/* ----------------------------------------------------------------- JSON --- */

static void test_json_for_output(void **state) {
  (void)state;
  EXPECT_JSON("{\"a\":\"\xff\xfe\"}", "{\"a\":\"\\ufffd\\ufffd\"}");
  EXPECT_JSON("\"\xe2\x80]\"", "\"\\ufffd]\"");      /* one U+FFFD for a cut sequence */
  EXPECT_JSON("\"\xf0\x9f\x98" "A\"", "\"\\ufffdA\"");
  EXPECT_JSON("\"\x9b\"", "\"\\ufffd\"");
  EXPECT_JSON("\"\xc2\x9b\"", "\"\\u009b\"");
  EXPECT_JSON("\"\xe2\x80\xae\"", "\"\\u202e\"");
  EXPECT_JSON("\"a\x7f" "b\"", "\"a\\u007fb\"");
  EXPECT_JSON("\"a\nb\x1b\"", "\"a\\u000ab\\u001b\"");   /* raw controls in a string (never from our encoder) */
  EXPECT_JSON("\"a\\\"\xff\"", "\"a\\\"\\ufffd\"");      /* an escaped quote does not end the string */
  EXPECT_JSON("\"\\\\\xff\"", "\"\\\\\\ufffd\"");
  EXPECT_JSON("{\"a\":1,\n\t\"b\":[true]}", "{\"a\":1,  \"b\":[true]}"); /* between tokens: spaces */
  EXPECT_JSON("\"\\u001b caf\xc3\xa9 \xf0\x9f\x98\x80\"", "\"\\u001b caf\xc3\xa9 \xf0\x9f\x98\x80\"");
  EXPECT_JSON("", "");
}

/* Any string the engine's encoder records comes out as strict JSON: valid
 * UTF-8, parsable, inert; and a valid string is decoded to what it was. */
static void test_json_for_output_any_string(void **state) {
  (void)state;
  lua_State *L = luaL_newstate();
  char in[48], err[256];
  for (int round = 0; round < 3000; round++) {
    size_t n = next_byte() % sizeof in;
    for (size_t i = 0; i < n; i++) {
      unsigned b = next_byte();
      in[i] = (char)(b < 48 ? (b & 0x1f) : b < 96 ? 0x80 | (b & 0x3f) : b < 112 ? 0xc2 : b < 128 ? '"' : b);
    }
    lua_settop(L, 0);
    lua_pushlstring(L, in, n);
    size_t jn;
    const char *j = json_encode(L, 1, &jn);
    char *out = json_for_output(j, jn);
    assert_true(inert(out));
    if (json_validate(out, err, sizeof err) != 0) fail_msg("not JSON: %s (%s)", out, err);
    free(out);
  }
  lua_close(L);
}

/* ------------------------------------------------------------------ ids --- */

static void test_workflow_ids(void **state) {
  (void)state;
  char err[512], id128[129], id129[130];
  memset(id128, 'a', 128), id128[128] = 0;
  memset(id129, 'b', 129), id129[129] = 0;
  const char *good[] = {"pr-1", "pr_1", "PR.1", "a:b@c", "9", "x-_.:@y", "a.b.c", id128};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    err[0] = 0;
    if (engine_check_id(good[i], err, sizeof err) != 0) fail_msg("refused %s: %s", good[i], err);
  }
  struct {
    const char *id, *says;
  } bad[] = {
      {"", "it is empty"},
      {id129, "it is 129 bytes, more than 128"},
      {"pr 1", "a space at byte 3"},
      {"pr/1", "'/' at byte 3 is not allowed"},
      {"../x", "must start with a letter or a digit"},
      {"a..b", "contains \"..\""},
      {"-x", "must start with a letter or a digit"},
      {".x", "must start with a letter or a digit"},
      {"\x1b[2J", "\"\\x1b[2J\": '\\x1b' at byte 1"},
      {"a\nb", "'\\n' at byte 2"},
      {"caf\xc3\xa9", "'\xc3\xa9' at byte 4"},
      {"x\xff", "'\\xff' at byte 2"},
      {"a\xe2\x80\xae" "b", "'\\u202e' at byte 2"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = 0;
    assert_int_equal(engine_check_id(bad[i].id, err, sizeof err), -1);
    if (!strstr(err, bad[i].says)) fail_msg("for id #%zu: [%s] not in [%s]", i, bad[i].says, err);
    assert_non_null(strstr(err, "invalid workflow id"));
    assert_true(inert(err));
  }
  /* a long id is quoted cut short */
  char big[10000];
  memset(big, 'z', sizeof big - 1), big[sizeof big - 1] = 0;
  engine_check_id(big, err, sizeof err);
  assert_true(strlen(err) < 250);
  assert_non_null(strstr(err, "it is 9999 bytes"));
  engine_unknown_id("nope", err, sizeof err);
  assert_string_equal(err, "unknown workflow 'nope'");
  engine_unknown_id("no pe", err, sizeof err);
  assert_non_null(strstr(err, "invalid workflow id \"no pe\": a space"));
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_utf8_valid),
      cmocka_unit_test(test_utf8_invalid_maximal_subparts),
      cmocka_unit_test(test_unsafe_codepoints),
      cmocka_unit_test(test_render_escapes),
      cmocka_unit_test(test_render_keeps_text),
      cmocka_unit_test(test_render_lines),
      cmocka_unit_test(test_render_cut),
      cmocka_unit_test(test_render_line),
      cmocka_unit_test(test_render_any_bytes),
      cmocka_unit_test(test_json_for_output),
      cmocka_unit_test(test_json_for_output_any_string),
      cmocka_unit_test(test_workflow_ids),
  };
  const struct CMUnitTest bugs[] = {
      cmocka_unit_test(BUG_cut_splits_a_character),
  };
  if (argc > 1 && strcmp(argv[1], "bugs") == 0) return cmocka_run_group_tests_name("unit_render_bugs", bugs, NULL, NULL);
  return cmocka_run_group_tests_name("unit_render", tests, NULL, NULL);
}
