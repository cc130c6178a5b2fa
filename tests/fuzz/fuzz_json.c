/* fuzz_json: engine/base/json.c on arbitrary bytes.
 *
 * Properties (a violation aborts with the reason, so libFuzzer keeps the input):
 *   - decode either gives a value or a "json: ..." error; never a crash;
 *   - decode -> encode -> decode -> encode gives the same bytes twice (the
 *     canonical form is a fixed point after one round);
 *   - in a value decoded from canonical text, a number is an integer exactly
 *     when its own encoding has no '.', 'e' or 'E' (integers stay integers,
 *     floats stay floats);
 *   - json_accept, json_canonical and json_validate agree with decode;
 *   - json_quote of the text decodes back to the same C string (each part that
 *     is not UTF-8 as U+FFFD);
 *   - json_for_output gives valid UTF-8 without control bytes, and JSON stays
 *     JSON (with the same meaning when the text was UTF-8). */
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

static lua_State *L;

static void finding(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_json: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  abort();
}

/* stack: value -> value, canonical text; 0, or -1 with the message pushed */
static int encode_protected(lua_State *S) {
  json_encode(S, 1, NULL);
  return 1;
}

static int encode_top(lua_State *S) {
  lua_pushcfunction(S, encode_protected);
  lua_pushvalue(S, -2);
  return lua_pcall(S, 1, 1, 0) == LUA_OK ? 0 : -1;
}

/* Every number reachable from the value at idx: is it an integer exactly when
 * its encoding says so? */
static void check_numbers(lua_State *S, int idx, int depth) {
  idx = lua_absindex(S, idx);
  if (depth > 80) finding("decoded value nested deeper than the decoder allows", NULL);
  if (lua_type(S, idx) == LUA_TNUMBER) {
    lua_pushvalue(S, idx);
    if (encode_top(S) != 0) finding("a decoded number does not encode", lua_tostring(S, -1));
    const char *text = lua_tostring(S, -1);
    int looks_float = strpbrk(text, ".eE") != NULL;
    if (lua_isinteger(S, idx) == looks_float)
      finding(looks_float ? "an integer encodes like a float" : "a float encodes like an integer (its type changes on the next decode)",
              text);
    lua_pop(S, 2);
    return;
  }
  if (lua_type(S, idx) != LUA_TTABLE) return;
  luaL_checkstack(S, 8, "fuzz_json");
  lua_pushnil(S);
  while (lua_next(S, idx)) {
    check_numbers(S, -1, depth + 1);
    lua_pop(S, 1);
  }
}

static int utf8_clean(const char *s, size_t n) {
  char err[128];
  return json_check_text(s, n, "output", err, sizeof err) == 0;
}

/* A state of its own for each input, closed at the end: every allocation is
 * freed by then, so libFuzzer's leak check finds a leak in json.c itself. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  char err[512];
  L = luaL_newstate();
  if (!L) abort();

  /* decode -> encode -> decode -> encode */
  char *canon1 = NULL;
  size_t canon1_len = 0;
  if (json_decode_safe(L, text, size, err, sizeof err) == 0) {
    if (encode_top(L) != 0) finding("a decoded value does not encode", lua_tostring(L, -1));
    size_t n1;
    const char *c1 = lua_tolstring(L, -1, &n1);
    canon1 = malloc(n1 + 1);
    memcpy(canon1, c1, n1 + 1);
    canon1_len = n1;
    if (json_decode_safe(L, canon1, canon1_len, err, sizeof err) != 0) finding("canonical text does not decode", err);
    check_numbers(L, -1, 0);
    if (encode_top(L) != 0) finding("a value decoded from canonical text does not encode", lua_tostring(L, -1));
    size_t n2;
    const char *c2 = lua_tolstring(L, -1, &n2);
    if (n1 != n2 || memcmp(canon1, c2, n1) != 0) {
      fprintf(stderr, "first:  %.*s\nsecond: %.*s\n", (int)(n1 > 400 ? 400 : n1), canon1, (int)(n2 > 400 ? 400 : n2), c2);
      finding("decode -> encode is not a fixed point after one round", NULL);
    }
  } else if (strncmp(err, "json: ", 6) != 0) {
    finding("a decode error that is not the decoder's own", err);
  }
  lua_settop(L, 0);

  /* json_accept: decode's verdict on UTF-8 text without NUL bytes */
  char *accepted = json_accept(text, size, "input", err, sizeof err);
  int clean = utf8_clean(text, size);
  if (accepted && (!canon1 || strcmp(accepted, canon1) != 0))
    finding("json_accept took text decode refuses, or gave another canonical form", accepted);
  if (!accepted && canon1 && clean && canon1_len <= json_max_payload())
    finding("json_accept refused valid UTF-8 JSON", err);
  if (accepted && !utf8_clean(accepted, strlen(accepted))) finding("json_accept gave text that is not UTF-8", NULL);
  free(accepted);

  /* the C-string APIs see the text up to its first NUL */
  char *cstr = malloc(size + 1);
  memcpy(cstr, text, size);
  cstr[size] = 0;
  size_t clen = strlen(cstr);
  char *canon_c = NULL;
  if (clen == size) canon_c = canon1 ? strdup(canon1) : NULL;
  else if (json_decode_safe(L, cstr, clen, err, sizeof err) == 0 && encode_top(L) == 0)
    canon_c = strdup(lua_tostring(L, -1));
  lua_settop(L, 0);
  char *canonical = json_canonical(cstr, err, sizeof err);
  if ((canonical == NULL) != (canon_c == NULL) || (canonical && strcmp(canonical, canon_c) != 0))
    finding("json_canonical disagrees with decode -> encode", canonical ? canonical : err);
  if ((json_validate(cstr, err, sizeof err) == 0) != (canon_c != NULL)) finding("json_validate disagrees with decode", err);
  free(canonical);
  free(canon_c);

  char *quoted = json_quote(cstr);
  if (json_decode_safe(L, quoted, strlen(quoted), err, sizeof err) != 0) finding("json_quote gave text that does not decode", err);
  size_t qn, fn;
  const char *back = lua_tolstring(L, -1, &qn);
  char *fixed = util_utf8_repair(cstr, clen, &fn); /* JSON is UTF-8: invalid parts come back as U+FFFD */
  const char *want = fixed ? fixed : cstr;
  size_t wn = fixed ? fn : clen;
  if (!back || qn != wn || memcmp(back, want, wn) != 0) finding("json_quote does not decode back to its string", quoted);
  free(fixed);
  lua_settop(L, 0);
  free(quoted);
  free(cstr);

  /* json_for_output: printable, UTF-8, and JSON stays JSON */
  char *out = json_for_output(text, size);
  size_t on = strlen(out);
  if (!utf8_clean(out, on)) finding("json_for_output gave text that is not UTF-8 (or holds a NUL)", NULL);
  for (size_t i = 0; i < on; i++)
    if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f) finding("json_for_output left a control byte", NULL);
  if (canon1) {
    if (json_decode_safe(L, out, on, err, sizeof err) != 0) finding("json_for_output of JSON is not JSON", err);
    if (clean) {
      if (encode_top(L) != 0) finding("json_for_output's value does not encode", NULL);
      if (strcmp(lua_tostring(L, -1), canon1) != 0) finding("json_for_output changed the meaning of UTF-8 JSON", out);
    }
  }
  lua_close(L);
  free(out);
  free(canon1);
  return 0;
}
