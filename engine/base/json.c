#include "json.h"

#include <lauxlib.h>
#include <lualib.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "util.h"


#define JSON_MAX_DEPTH 64

/* The output buffer is owned by a userdata, so a Lua error mid-encode frees it. */
typedef ubuf jbuf;

static int jbuf_gc(lua_State *L) {
  jbuf *b = lua_touserdata(L, 1);
  free(b->p);
  b->p = NULL;
  return 0;
}

static void put(lua_State *L, jbuf *b, const char *s, size_t n) {
  /* a value too big for memory is the script's error, not the engine's end */
  if (ubuf_try_add(b, s, n) != 0) luaL_error(L, "json: out of memory");
}

static void put_string(lua_State *L, jbuf *b, const char *s, size_t n) {
  put(L, b, "\"", 1);
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = NULL;
    char tmp[8];
    switch (c) {
      case '"': esc = "\\\""; break;
      case '\\': esc = "\\\\"; break;
      case '\n': esc = "\\n"; break;
      case '\r': esc = "\\r"; break;
      case '\t': esc = "\\t"; break;
      case '\b': esc = "\\b"; break;
      case '\f': esc = "\\f"; break;
      default:
        if (c < 0x20) {
          snprintf(tmp, sizeof tmp, "\\u%04x", c);
          esc = tmp;
        } else if (c >= 0x80) { /* JSON is UTF-8: an invalid part is U+FFFD, live and on replay alike */
          uint32_t cp;
          size_t bad, len = util_utf8_decode(s + i, n - i, &cp, &bad);
          if (len) {
            run += len;
            i += len - 1;
            continue;
          }
          /* as the character itself, as it encodes once decoded: canonical text is a fixed point */
          put(L, b, s + i - run, run);
          run = 0;
          put(L, b, "\xef\xbf\xbd", 3);
          i += bad - 1;
          continue;
        }
    }
    if (esc) {
      put(L, b, s + i - run, run);
      run = 0;
      put(L, b, esc, strlen(esc));
    } else {
      run++;
    }
  }
  put(L, b, s + n - run, run);
  put(L, b, "\"", 1);
}

static void put_number(lua_State *L, jbuf *b, int idx) {
  char tmp[64];
  if (lua_isinteger(L, idx)) {
    snprintf(tmp, sizeof tmp, "%lld", (long long)lua_tointeger(L, idx));
  } else {
    double d = lua_tonumber(L, idx);
    if (!isfinite(d)) luaL_error(L, "json: cannot encode %s", isnan(d) ? "NaN" : "infinity");
    /* -0.0 == 0 like 3.0 == 3: equal values, equal bytes ("-0" would decode
     * as the integer 0 and encode as "0" the next time) */
    if (d == 0) d = 0;
    snprintf(tmp, sizeof tmp, "%.15g", d);
    if (strtod(tmp, NULL) != d) snprintf(tmp, sizeof tmp, "%.17g", d);
  }
  put(L, b, tmp, strlen(tmp));
}

typedef struct jkey {
  const char *s; /* its text as written: invalid UTF-8 repaired */
  size_t len;
  const char *raw; /* the key in the table */
  size_t rawlen;
  int isnum;
  lua_Integer ival;
  char num[24];
} jkey;

/* The key's text: numbers live in the struct itself, which qsort moves, so the
 * pointer is taken at use time, never stored. */
static const char *key_text(const jkey *k) { return k->isnum ? k->num : k->s; }

static int cmp_bytes(const char *x, size_t xn, const char *y, size_t yn) {
  int c = memcmp(x, y, xn < yn ? xn : yn);
  return c ? c : (xn > yn) - (xn < yn);
}

/* Sorted as written, so that canonical text decodes and sorts the same way;
 * keys written alike (invalid parts repaired) in the order of their bytes */
static int cmp_key(const void *a, const void *b) {
  const jkey *x = a, *y = b;
  int c = cmp_bytes(key_text(x), x->len, key_text(y), y->len);
  if (c || x->isnum || y->isnum) return c;
  return cmp_bytes(x->raw, x->rawlen, y->raw, y->rawlen);
}

static void encode(lua_State *L, jbuf *b, int idx, int depth);

static void encode_table(lua_State *L, jbuf *b, int idx, int depth) {
  if (depth > JSON_MAX_DEPTH) luaL_error(L, "json: nesting deeper than %d (a cycle?)", JSON_MAX_DEPTH);
  luaL_checkstack(L, 8, "json: stack");
  /* count keys and decide array vs object */
  size_t count = 0;
  lua_Integer maxi = 0;
  int only_pos_int = 1;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    count++;
    if (lua_type(L, -1) == LUA_TNUMBER && lua_isinteger(L, -1) && lua_tointeger(L, -1) > 0) {
      lua_Integer k = lua_tointeger(L, -1);
      if (k > maxi) maxi = k;
    } else {
      only_pos_int = 0;
    }
  }
  if (count > 0 && only_pos_int && (size_t)maxi == count) {
    put(L, b, "[", 1);
    for (lua_Integer i = 1; i <= maxi; i++) {
      if (i > 1) put(L, b, ",", 1);
      lua_rawgeti(L, idx, i);
      encode(L, b, lua_gettop(L), depth + 1);
      lua_pop(L, 1);
    }
    put(L, b, "]", 1);
    return;
  }
  /* its user value, made at the first repaired key, anchors their text */
  jkey *keys = lua_newuserdatauv(L, count ? count * sizeof(jkey) : 1, 1);
  int kidx = lua_gettop(L);
  lua_Integer nfixed = 0;
  size_t k = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    jkey *e = &keys[k++];
    memset(e, 0, sizeof *e);
    int t = lua_type(L, -1);
    if (t == LUA_TSTRING) {
      e->s = e->raw = lua_tolstring(L, -1, &e->rawlen); /* anchored: it is a key of the table */
      e->len = e->rawlen;
      size_t fn;
      char *fixed = util_utf8_repair(e->raw, e->rawlen, &fn);
      if (fixed) {
        if (!nfixed) {
          lua_newtable(L);
          lua_setiuservalue(L, kidx, 1);
        }
        lua_getiuservalue(L, kidx, 1);
        lua_pushlstring(L, fixed, fn);
        free(fixed);
        e->s = lua_tolstring(L, -1, &e->len);
        lua_rawseti(L, -2, ++nfixed);
        lua_pop(L, 1);
      }
    } else if (t == LUA_TNUMBER && lua_isinteger(L, -1)) {
      e->isnum = 1;
      e->ival = lua_tointeger(L, -1);
      snprintf(e->num, sizeof e->num, "%lld", (long long)e->ival);
    } else {
      luaL_error(L, "json: cannot encode a table key of type %s", luaL_typename(L, -1));
    }
  }
  for (size_t i = 0; i < count; i++)
    if (keys[i].isnum) keys[i].len = strlen(keys[i].num);
  qsort(keys, count, sizeof(jkey), cmp_key);
  put(L, b, "{", 1);
  for (size_t i = 0, out = 0; i < count; i++) {
    if (i && cmp_bytes(key_text(&keys[i - 1]), keys[i - 1].len, key_text(&keys[i]), keys[i].len) == 0) {
      if (keys[i - 1].isnum || keys[i].isnum)
        luaL_error(L, "json: table has both the integer key %s and the string key \"%s\"", key_text(&keys[i]),
                   key_text(&keys[i]));
      continue; /* written alike once repaired: the first in byte order stands, as a decoder keeps one */
    }
    if (out++) put(L, b, ",", 1);
    put_string(L, b, key_text(&keys[i]), keys[i].len);
    put(L, b, ":", 1);
    if (keys[i].isnum)
      lua_pushinteger(L, keys[i].ival);
    else
      lua_pushlstring(L, keys[i].raw, keys[i].rawlen);
    lua_rawget(L, idx);
    encode(L, b, lua_gettop(L), depth + 1);
    lua_pop(L, 1);
  }
  put(L, b, "}", 1);
  lua_pop(L, 1); /* keys */
}

static void encode(lua_State *L, jbuf *b, int idx, int depth) {
  switch (lua_type(L, idx)) {
    case LUA_TNIL: put(L, b, "null", 4); break;
    case LUA_TBOOLEAN: lua_toboolean(L, idx) ? put(L, b, "true", 4) : put(L, b, "false", 5); break;
    case LUA_TNUMBER: put_number(L, b, idx); break;
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(L, idx, &n);
      put_string(L, b, s, n);
      break;
    }
    case LUA_TTABLE: encode_table(L, b, idx, depth); break;
    case LUA_TLIGHTUSERDATA:
      if (lua_touserdata(L, idx) == NULL) { /* cjson.null */
        put(L, b, "null", 4);
        break;
      }
      /* fallthrough */
    default: luaL_error(L, "json: cannot encode a value of type %s", luaL_typename(L, idx));
  }
}

const char *json_encode(lua_State *L, int idx, size_t *len) {
  idx = lua_absindex(L, idx);
  jbuf *b = lua_newuserdatauv(L, sizeof(jbuf), 0);
  memset(b, 0, sizeof *b);
  if (luaL_newmetatable(L, "engine.jbuf")) {
    lua_pushcfunction(L, jbuf_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  encode(L, b, idx, 0);
  lua_pushlstring(L, b->p ? b->p : "", b->n);
  free(b->p);
  b->p = NULL;
  lua_remove(L, -2);
  return lua_tolstring(L, -1, len);
}

static int l_encode(lua_State *L) {
  luaL_checkany(L, 1);
  json_encode(L, 1, NULL);
  return 1;
}

/* ---- decoding: integers stay integers (Debian's lua-cjson makes every
 * number a float, which turns 3 into 3.0 and rounds 64-bit ids) ---- */

typedef struct jdec {
  lua_State *L;
  const char *p, *start, *end;
} jdec;

static void dec_error(jdec *d, const char *what) {
  luaL_error(d->L, "json: %s at character %d", what, (int)(d->p - d->start) + 1);
}

static void skip_ws(jdec *d) {
  while (d->p < d->end && (*d->p == ' ' || *d->p == '\t' || *d->p == '\n' || *d->p == '\r')) d->p++;
}

static int hexval(int ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

static unsigned read_hex4(jdec *d) {
  if (d->end - d->p < 4) dec_error(d, "truncated \\u escape");
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval((unsigned char)d->p[i]);
    if (h < 0) dec_error(d, "invalid \\u escape");
    v = v * 16 + (unsigned)h;
  }
  d->p += 4;
  return v;
}

static void put_utf8(luaL_Buffer *b, unsigned cp) {
  char u[4];
  int n;
  if (cp < 0x80) { u[0] = (char)cp; n = 1; }
  else if (cp < 0x800) { u[0] = (char)(0xC0 | (cp >> 6)); u[1] = (char)(0x80 | (cp & 0x3F)); n = 2; }
  else if (cp < 0x10000) {
    u[0] = (char)(0xE0 | (cp >> 12)); u[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (char)(0x80 | (cp & 0x3F)); n = 3;
  } else {
    u[0] = (char)(0xF0 | (cp >> 18)); u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    u[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (char)(0x80 | (cp & 0x3F)); n = 4;
  }
  luaL_addlstring(b, u, (size_t)n);
}

static void dec_string(jdec *d) {
  luaL_Buffer b;
  d->p++; /* opening quote */
  luaL_buffinit(d->L, &b);
  for (;;) {
    const char *run = d->p;
    while (d->p < d->end && *d->p != '"' && *d->p != '\\' && (unsigned char)*d->p >= 0x20) d->p++;
    luaL_addlstring(&b, run, (size_t)(d->p - run));
    if (d->p >= d->end) dec_error(d, "unterminated string");
    char ch = *d->p;
    if (ch == '"') { d->p++; break; }
    if ((unsigned char)ch < 0x20) dec_error(d, "control character in string");
    d->p++; /* backslash */
    if (d->p >= d->end) dec_error(d, "unterminated string");
    ch = *d->p++;
    switch (ch) {
      case '"': luaL_addchar(&b, '"'); break;
      case '\\': luaL_addchar(&b, '\\'); break;
      case '/': luaL_addchar(&b, '/'); break;
      case 'b': luaL_addchar(&b, '\b'); break;
      case 'f': luaL_addchar(&b, '\f'); break;
      case 'n': luaL_addchar(&b, '\n'); break;
      case 'r': luaL_addchar(&b, '\r'); break;
      case 't': luaL_addchar(&b, '\t'); break;
      case 'u': {
        unsigned cp = read_hex4(d);
        if (cp >= 0xD800 && cp <= 0xDBFF && d->end - d->p >= 6 && d->p[0] == '\\' && d->p[1] == 'u') {
          const char *next = d->p;
          d->p += 2;
          unsigned lo = read_hex4(d);
          if (lo >= 0xDC00 && lo <= 0xDFFF) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          else { /* a lone high surrogate: the next escape (maybe another
                  * high one, never to be written as UTF-8) is read on its own */
            d->p = next;
            cp = 0xFFFD;
          }
        } else if (cp >= 0xD800 && cp <= 0xDFFF) {
          cp = 0xFFFD; /* lone surrogate */
        }
        put_utf8(&b, cp);
        break;
      }
      default: d->p--; dec_error(d, "invalid escape in string");
    }
  }
  luaL_pushresult(&b);
}

/* 1e999 is JSON but no double: refused, as the encoder refuses infinity, so
 * no inf ever reaches a workflow or comes back out of one into the log. */
static void push_finite(jdec *d, const char *start, double v) {
  if (!isfinite(v)) {
    d->p = start;
    dec_error(d, "number out of range (beyond the largest double)");
  }
  lua_pushnumber(d->L, v);
}

static void dec_number(jdec *d) {
  const char *s = d->p;
  int is_float = 0;
  if (d->p < d->end && *d->p == '-') d->p++;
  if (d->p >= d->end || !(*d->p >= '0' && *d->p <= '9')) dec_error(d, "invalid number");
  if (*d->p == '0') d->p++;
  else while (d->p < d->end && *d->p >= '0' && *d->p <= '9') d->p++;
  if (d->p < d->end && *d->p == '.') {
    is_float = 1;
    d->p++;
    if (d->p >= d->end || !(*d->p >= '0' && *d->p <= '9')) dec_error(d, "invalid number");
    while (d->p < d->end && *d->p >= '0' && *d->p <= '9') d->p++;
  }
  if (d->p < d->end && (*d->p == 'e' || *d->p == 'E')) {
    is_float = 1;
    d->p++;
    if (d->p < d->end && (*d->p == '+' || *d->p == '-')) d->p++;
    if (d->p >= d->end || !(*d->p >= '0' && *d->p <= '9')) dec_error(d, "invalid number");
    while (d->p < d->end && *d->p >= '0' && *d->p <= '9') d->p++;
  }
  char tmp[64];
  size_t n = (size_t)(d->p - s);
  if (n >= sizeof tmp) { /* very long: only a float can hold it */
    char *big = util_xmalloc(n + 1);
    memcpy(big, s, n);
    big[n] = 0;
    double v = strtod(big, NULL);
    free(big);
    push_finite(d, s, v);
    return;
  }
  memcpy(tmp, s, n);
  tmp[n] = 0;
  if (!is_float) {
    errno = 0;
    long long v = strtoll(tmp, NULL, 10);
    if (errno != ERANGE) {
      lua_pushinteger(d->L, (lua_Integer)v);
      return;
    }
  }
  push_finite(d, s, strtod(tmp, NULL));
}

static void dec_value(jdec *d, int depth);

static void dec_literal(jdec *d, const char *word, size_t n) {
  if ((size_t)(d->end - d->p) < n || memcmp(d->p, word, n) != 0) dec_error(d, "unexpected token");
  d->p += n;
}

static void dec_value(jdec *d, int depth) {
  lua_State *L = d->L;
  if (depth > JSON_MAX_DEPTH) dec_error(d, "nested too deeply");
  luaL_checkstack(L, 4, "json: stack");
  skip_ws(d);
  if (d->p >= d->end) dec_error(d, "unexpected end of input");
  switch (*d->p) {
    case '{': {
      d->p++;
      lua_newtable(L);
      skip_ws(d);
      if (d->p < d->end && *d->p == '}') { d->p++; return; }
      for (;;) {
        skip_ws(d);
        if (d->p >= d->end || *d->p != '"') dec_error(d, "expected a string key");
        dec_string(d);
        skip_ws(d);
        if (d->p >= d->end || *d->p != ':') dec_error(d, "expected ':'");
        d->p++;
        dec_value(d, depth + 1);
        lua_rawset(L, -3);
        skip_ws(d);
        if (d->p < d->end && *d->p == ',') { d->p++; continue; }
        if (d->p < d->end && *d->p == '}') { d->p++; return; }
        dec_error(d, "expected ',' or '}'");
      }
    }
    case '[': {
      d->p++;
      lua_newtable(L);
      skip_ws(d);
      if (d->p < d->end && *d->p == ']') { d->p++; return; }
      for (lua_Integer i = 1;; i++) {
        dec_value(d, depth + 1);
        lua_rawseti(L, -2, i);
        skip_ws(d);
        if (d->p < d->end && *d->p == ',') { d->p++; continue; }
        if (d->p < d->end && *d->p == ']') { d->p++; return; }
        dec_error(d, "expected ',' or ']'");
      }
    }
    case '"': dec_string(d); return;
    case 't': dec_literal(d, "true", 4); lua_pushboolean(L, 1); return;
    case 'f': dec_literal(d, "false", 5); lua_pushboolean(L, 0); return;
    case 'n': dec_literal(d, "null", 4); lua_pushlightuserdata(L, NULL); return;
    default:
      if (*d->p == '-' || (*d->p >= '0' && *d->p <= '9')) { dec_number(d); return; }
      dec_error(d, "unexpected character");
  }
}

void json_decode(lua_State *L, const char *text, size_t len) {
  jdec d = {L, text, text, text + len};
  dec_value(&d, 0);
  skip_ws(&d);
  if (d.p != d.end) dec_error(&d, "trailing characters after the value");
}

static int decode_protected(lua_State *L) {
  const char *text = lua_touserdata(L, 1);
  size_t len = (size_t)lua_tointeger(L, 2);
  json_decode(L, text, len);
  return 1;
}

int json_decode_safe(lua_State *L, const char *text, size_t len, char *err, size_t errlen) {
  lua_pushcfunction(L, decode_protected);
  lua_pushlightuserdata(L, (void *)text);
  lua_pushinteger(L, (lua_Integer)len);
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
    const char *m = lua_tostring(L, -1);
    util_seterr(err, errlen, "%s", m ? m : "invalid JSON");
    lua_pop(L, 1);
    return -1;
  }
  return 0;
}

static int l_decode(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  json_decode(L, s, n);
  return 1;
}

int luaopen_engine_json(lua_State *L) {
  lua_newtable(L);
  lua_pushcfunction(L, l_encode);
  lua_setfield(L, -2, "encode");
  lua_pushcfunction(L, l_decode);
  lua_setfield(L, -2, "decode");
  lua_pushlightuserdata(L, NULL);
  lua_setfield(L, -2, "null");
  return 1;
}

int json_validate(const char *text, char *err, size_t errlen) {
  lua_State *L = luaL_newstate();
  if (!L) {
    util_seterr(err, errlen, "out of memory");
    return -1;
  }
  int rc = json_decode_safe(L, text, strlen(text), err, errlen);
  lua_close(L);
  return rc;
}

char *json_quote(const char *text) {
  size_t fixed_n;
  char *fixed = util_utf8_repair(text, strlen(text), &fixed_n); /* JSON is UTF-8 */
  const char *s = fixed ? fixed : text;
  size_t n = 0, k = 0;
  /* the exact size first: a webhook body of 25 MB must not cost 150 */
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    n += *p == '"' || *p == '\\' || *p == '\n' || *p == '\r' || *p == '\t' ? 2 : *p < 0x20 ? 6 : 1;
  char *out = util_xmalloc(n + 3);
  out[k++] = '"';
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '"': out[k++] = '\\'; out[k++] = '"'; break;
      case '\\': out[k++] = '\\'; out[k++] = '\\'; break;
      case '\n': out[k++] = '\\'; out[k++] = 'n'; break;
      case '\r': out[k++] = '\\'; out[k++] = 'r'; break;
      case '\t': out[k++] = '\\'; out[k++] = 't'; break;
      default:
        if (*p < 0x20) k += (size_t)sprintf(out + k, "\\u%04x", *p);
        else out[k++] = (char)*p;
    }
  }
  out[k++] = '"';
  out[k] = 0;
  free(fixed);
  return out;
}

char *json_for_output(const char *text, size_t n) {
  ubuf b = {0};
  int in_string = 0;
  char esc[8];
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)text[i];
    uint32_t cp;
    size_t bad, len = util_utf8_decode(text + i, n - i, &cp, &bad);
    if (!len) { /* not UTF-8: one replacement character for the invalid part */
      ubuf_add(&b, "\\ufffd", 6);
      i += bad;
      continue;
    }
    if (in_string && c == '\\' && i + 1 < n && text[i + 1] > 0x20 && text[i + 1] < 0x7f) {
      ubuf_add(&b, text + i, 2); /* an escape: its second byte never ends the string */
      i += 2;
      continue;
    }
    if (c == '"') in_string = !in_string;
    if (!util_unsafe_codepoint(cp))
      ubuf_add(&b, text + i, len);
    else if (in_string)
      ubuf_add(&b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp));
    else /* between tokens only whitespace is JSON: one line, nothing a terminal acts on */
      ubuf_add(&b, " ", 1);
    i += len;
  }
  ubuf_add(&b, "", 1);
  return b.p;
}

static int canonical_protected(lua_State *L) {
  size_t n;
  const char *text = lua_tolstring(L, 1, &n);
  json_decode(L, text, n);
  json_encode(L, -1, NULL);
  return 1;
}

char *json_canonical(const char *text, char *err, size_t errlen) {
  lua_State *L = luaL_newstate();
  if (!L) {
    util_seterr(err, errlen, "out of memory");
    return NULL;
  }
  lua_pushcfunction(L, canonical_protected);
  lua_pushstring(L, text);
  char *out = NULL;
  if (lua_pcall(L, 1, 1, 0) == LUA_OK)
    out = util_strdup(lua_tostring(L, -1));
  else
    util_seterr(err, errlen, "%s", lua_tostring(L, -1));
  lua_close(L);
  return out;
}

/* ------------------------------------------- JSON from outside the engine --- */

enum { PAYLOAD_MIN = 1024, PAYLOAD_MAX = 1 << 30 };

/* ENGINE_MAX_PAYLOAD_BYTES as a number, or 0 when unset; -1 when it is not a
 * whole number of bytes in range. */
static long long payload_env(void) {
  const char *v = getenv("ENGINE_MAX_PAYLOAD_BYTES");
  if (!v || !*v) return 0;
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (errno || *end || n < PAYLOAD_MIN || n > PAYLOAD_MAX) return -1;
  return n;
}

size_t json_max_payload(void) {
  long long n = payload_env();
  return n > 0 ? (size_t)n : JSON_MAX_PAYLOAD_DEFAULT;
}

int json_max_payload_check(char *err, size_t errlen) {
  if (payload_env() >= 0) return 0;
  char shown[64];
  const char *v = getenv("ENGINE_MAX_PAYLOAD_BYTES");
  render_buf(shown, sizeof shown, v, strlen(v), 0);
  util_seterr(err, errlen, "ENGINE_MAX_PAYLOAD_BYTES must be a number of bytes from %d to %d, not \"%s\"", PAYLOAD_MIN,
              PAYLOAD_MAX, shown);
  return -1;
}

int json_check_size(size_t len, const char *what, char *err, size_t errlen) {
  size_t max = json_max_payload();
  if (len <= max) return 0;
  util_seterr(err, errlen, "%s is %zu bytes, more than the limit of %zu bytes (ENGINE_MAX_PAYLOAD_BYTES)", what, len,
              max);
  return -1;
}

int json_check_text(const char *s, size_t n, const char *what, char *err, size_t errlen) {
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)s[i];
    if (c == 0) {
      util_seterr(err, errlen, "%s contains a NUL byte at byte %zu", what, i + 1);
      return -1;
    }
    if (c < 0x80) {
      i++;
      continue;
    }
    uint32_t cp;
    size_t bad, len = util_utf8_decode(s + i, n - i, &cp, &bad);
    if (!len) {
      util_seterr(err, errlen, "%s is not UTF-8: byte %zu (0x%02x) starts no valid sequence", what, i + 1, c);
      return -1;
    }
    i += len;
  }
  return 0;
}

/* Decodes and re-encodes text in a throwaway state: whatever it holds, the
 * caller's VMs never see it half-decoded. */
static int accept_protected(lua_State *L) {
  const char *text = lua_touserdata(L, 1);
  size_t len = (size_t)lua_tointeger(L, 2);
  json_decode(L, text, len);
  json_encode(L, -1, NULL);
  return 1;
}

char *json_accept(const char *text, size_t len, const char *what, char *err, size_t errlen) {
  if (json_check_size(len, what, err, errlen) || json_check_text(text, len, what, err, errlen)) return NULL;
  lua_State *L = luaL_newstate();
  if (!L) {
    util_seterr(err, errlen, "%s: out of memory", what);
    return NULL;
  }
  lua_pushcfunction(L, accept_protected);
  lua_pushlightuserdata(L, (void *)text);
  lua_pushinteger(L, (lua_Integer)len);
  char *out = NULL;
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
    util_seterr(err, errlen, "%s is not valid JSON: %s", what, lua_tostring(L, -1));
  } else {
    size_t n;
    const char *canon = lua_tolstring(L, -1, &n);
    /* the canonical form can be longer (a float's digits): the log holds it */
    if (json_check_size(n, what, err, errlen) == 0) out = util_strdup(canon);
  }
  lua_close(L);
  return out;
}

int64_t json_int_field(const char *json, const char *key, int64_t dflt) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = json ? strstr(json, pat) : NULL;
  return p ? strtoll(p + strlen(pat), NULL, 10) : dflt;
}

/* ---- reading the API's answers (json.h) ---- */

enum { JSON_SKIP_DEPTH = 256 };

static const char *span_ws(const char *s, const char *end) {
  while (s < end && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) s++;
  return s;
}

static const char *skip_string(const char *s, const char *end) {
  for (s++; s < end; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"') return s + 1;
    if (c < 0x20) return NULL;
    if (c == '\\' && ++s >= end) return NULL;
  }
  return NULL;
}

static const char *skip_value(const char *s, const char *end, int depth) {
  s = span_ws(s, end);
  if (s >= end || depth > JSON_SKIP_DEPTH) return NULL;
  char open = *s;
  if (open == '"') return skip_string(s, end);
  if (open == '{' || open == '[') {
    char close = open == '{' ? '}' : ']';
    s = span_ws(s + 1, end);
    if (s < end && *s == close) return s + 1;
    for (;;) {
      if (open == '{') {
        s = span_ws(s, end);
        if (s >= end || *s != '"' || !(s = skip_string(s, end))) return NULL;
        s = span_ws(s, end);
        if (s >= end || *s++ != ':') return NULL;
      }
      if (!(s = skip_value(s, end, depth + 1))) return NULL;
      s = span_ws(s, end);
      if (s >= end) return NULL;
      if (*s == close) return s + 1;
      if (*s++ != ',') return NULL;
    }
  }
  const char *start = s;
  while (s < end && (isalnum((unsigned char)*s) || *s == '-' || *s == '+' || *s == '.')) s++;
  return s > start ? s : NULL;
}

const char *json_skip(const char *s, const char *end) { return skip_value(s, end, 0); }

int json_get(const char *text, size_t n, const char *key, const char **v, size_t *vn) {
  const char *s = span_ws(text, text + n), *end = text + n;
  size_t kl = strlen(key);
  int found = 0;
  if (s >= end || *s != '{') return -1;
  s = span_ws(s + 1, end);
  if (s < end && *s == '}') return span_ws(s + 1, end) == end ? 0 : -1;
  for (;;) { /* to the end: a cut document is refused, never half read */
    s = span_ws(s, end);
    const char *k = s;
    if (s >= end || *s != '"' || !(s = skip_string(s, end))) return -1;
    int match = !found && (size_t)(s - k) == kl + 2 && memcmp(k + 1, key, kl) == 0;
    s = span_ws(s, end);
    if (s >= end || *s++ != ':') return -1;
    const char *val = span_ws(s, end);
    if (!(s = json_skip(val, end))) return -1;
    if (match) {
      *v = val;
      *vn = (size_t)(s - val);
      found = 1;
    }
    s = span_ws(s, end);
    if (s >= end) return -1;
    if (*s == '}') return span_ws(s + 1, end) == end ? found : -1;
    if (*s++ != ',') return -1;
  }
}

int json_members(const char *text, size_t n,
                 int (*cb)(void *ud, const char *k, size_t kn, const char *v, size_t vn), void *ud) {
  const char *s = span_ws(text, text + n), *end = text + n;
  if (s >= end || *s != '{') return -1;
  s = span_ws(s + 1, end);
  if (s < end && *s == '}') return span_ws(s + 1, end) == end ? 0 : -1;
  for (;;) {
    s = span_ws(s, end);
    const char *k = s;
    if (s >= end || *s != '"' || !(s = skip_string(s, end))) return -1;
    size_t kn = (size_t)(s - k);
    s = span_ws(s, end);
    if (s >= end || *s++ != ':') return -1;
    const char *val = span_ws(s, end);
    if (!(s = json_skip(val, end))) return -1;
    int rc = cb(ud, k, kn, val, (size_t)(s - val));
    if (rc) return rc;
    s = span_ws(s, end);
    if (s >= end) return -1;
    if (*s == '}') return span_ws(s + 1, end) == end ? 0 : -1;
    if (*s++ != ',') return -1;
  }
}

/* ---- RFC 7386 merge patch, on canonical text (keys compared as written) ---- */

typedef struct mp_ctx {
  ubuf *out;
  const char *other; /* the other side's object text */
  size_t on;
  int first, failed;
} mp_ctx;

static int is_object_text(const char *v, size_t n) {
  const char *s = span_ws(v, v + n);
  return s < v + n && *s == '{';
}
static int is_null_text(const char *v, size_t n) { return n == 4 && memcmp(v, "null", 4) == 0; }

static void mp_merge(ubuf *out, const char *t, size_t tn, const char *p, size_t pn, int *failed);

/* The value of member k (a key as written) of object o, or NULL. */
static const char *mp_find(const char *o, size_t on, const char *k, size_t kn, size_t *vn) {
  if (!o) return NULL;
  char *key = util_xmalloc(kn);
  memcpy(key, k + 1, kn - 2); /* json_get compares the key's text inside its quotes */
  key[kn - 2] = 0;
  const char *v = NULL;
  int found = json_get(o, on, key, &v, vn);
  free(key);
  return found == 1 ? v : NULL;
}

static void mp_key(mp_ctx *c, const char *k, size_t kn) {
  if (!c->first) ubuf_add(c->out, ",", 1);
  c->first = 0;
  ubuf_add(c->out, k, kn);
  ubuf_add(c->out, ":", 1);
}

/* A member of the target: kept, removed (null in the patch) or merged. */
static int mp_target_member(void *ud, const char *k, size_t kn, const char *v, size_t vn) {
  mp_ctx *c = ud;
  size_t pn;
  const char *pv = mp_find(c->other, c->on, k, kn, &pn);
  if (pv && is_null_text(pv, pn)) return 0;
  mp_key(c, k, kn);
  if (pv) mp_merge(c->out, v, vn, pv, pn, &c->failed);
  else ubuf_add(c->out, v, vn);
  return 0;
}

/* A member of the patch the target lacks: added (its nulls removed). */
static int mp_patch_member(void *ud, const char *k, size_t kn, const char *v, size_t vn) {
  mp_ctx *c = ud;
  size_t tn;
  if (is_null_text(v, vn) || mp_find(c->other, c->on, k, kn, &tn)) return 0;
  mp_key(c, k, kn);
  mp_merge(c->out, NULL, 0, v, vn, &c->failed);
  return 0;
}

static void mp_merge(ubuf *out, const char *t, size_t tn, const char *p, size_t pn, int *failed) {
  if (!is_object_text(p, pn)) {
    ubuf_add(out, p, pn);
    return;
  }
  if (t && !is_object_text(t, tn)) t = NULL;
  ubuf_add(out, "{", 1);
  mp_ctx c = {out, p, pn, 1, 0};
  if (t && json_members(t, tn, mp_target_member, &c) != 0) *failed = 1;
  c.other = t;
  c.on = tn;
  if (json_members(p, pn, mp_patch_member, &c) != 0) *failed = 1;
  if (c.failed) *failed = 1;
  ubuf_add(out, "}", 1);
}

char *json_merge_patch(const char *target, const char *patch, char *err, size_t errlen) {
  char *t = target ? json_canonical(target, err, errlen) : NULL, *p = json_canonical(patch, err, errlen);
  if ((target && !t) || !p) {
    free(t);
    free(p);
    return NULL;
  }
  ubuf b = {0};
  int failed = 0;
  mp_merge(&b, t, t ? strlen(t) : 0, p, strlen(p), &failed);
  ubuf_add(&b, "", 1);
  free(t);
  free(p);
  char *out = failed ? NULL : json_canonical(b.p, err, errlen);
  if (failed) util_seterr(err, errlen, "the merge patch could not be applied");
  ubuf_free(&b);
  return out;
}

int json_each(const char *text, size_t n, int (*cb)(void *ud, const char *v, size_t vn), void *ud) {
  const char *s = span_ws(text, text + n), *end = text + n;
  if (s >= end || *s != '[') return -1;
  s = span_ws(s + 1, end);
  if (s < end && *s == ']') return span_ws(s + 1, end) == end ? 0 : -1;
  for (;;) {
    const char *val = span_ws(s, end);
    if (!(s = json_skip(val, end))) return -1;
    int rc = cb(ud, val, (size_t)(s - val));
    if (rc) return rc;
    s = span_ws(s, end);
    if (s >= end) return -1;
    if (*s == ']') return span_ws(s + 1, end) == end ? 0 : -1;
    if (*s++ != ',') return -1;
  }
}

static void add_utf8(ubuf *b, uint32_t cp) {
  char u[4];
  size_t n;
  if (cp < 0x80) u[0] = (char)cp, n = 1;
  else if (cp < 0x800) u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
  else if (cp < 0x10000)
    u[0] = (char)(0xe0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3f)), u[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
  else
    u[0] = (char)(0xf0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3f)), u[2] = (char)(0x80 | ((cp >> 6) & 0x3f)),
    u[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
  ubuf_add(b, u, n);
}

static int hex4(const char *s, const char *end, uint32_t *out) {
  if (end - s < 4) return -1;
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    int c = (unsigned char)s[i], d = isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
    if (d < 0) return -1;
    v = v << 4 | (uint32_t)d;
  }
  *out = v;
  return 0;
}

char *json_string(const char *v, size_t vn) {
  const char *s = v, *end = v + vn;
  if (vn < 2 || *s != '"' || skip_string(s, end) != end) return NULL;
  ubuf b = {0};
  for (s++; s < end - 1; s++) {
    if (*s != '\\') {
      ubuf_add(&b, s, 1);
      continue;
    }
    char c = *++s, one = 0;
    switch (c) {
    case '"': case '\\': case '/': one = c; break;
    case 'b': one = '\b'; break;
    case 'f': one = '\f'; break;
    case 'n': one = '\n'; break;
    case 'r': one = '\r'; break;
    case 't': one = '\t'; break;
    }
    if (one) {
      ubuf_add(&b, &one, 1);
      continue;
    }
    uint32_t cp, lo;
    if (c != 'u' || hex4(s + 1, end, &cp) != 0) {
      ubuf_free(&b);
      return NULL;
    }
    s += 4;
    if (cp >= 0xd800 && cp < 0xdc00 && s + 2 < end && s[1] == '\\' && s[2] == 'u' && hex4(s + 3, end, &lo) == 0 &&
        lo >= 0xdc00 && lo < 0xe000) {
      cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      s += 6;
    } else if (cp >= 0xd800 && cp < 0xe000) {
      cp = 0xfffd; /* a lone surrogate is no character */
    }
    add_utf8(&b, cp);
  }
  ubuf_add(&b, "", 1);
  return b.p;
}

int json_int(const char *v, size_t vn, int64_t *out) {
  char buf[32];
  if (vn == 0 || vn >= sizeof buf) return -1;
  memcpy(buf, v, vn);
  buf[vn] = 0;
  char *e;
  errno = 0;
  long long x = strtoll(buf, &e, 10);
  if (*e || errno) return -1;
  *out = x;
  return 0;
}

char *json_get_string(const char *text, size_t n, const char *key) {
  const char *v;
  size_t vn;
  return json_get(text, n, key, &v, &vn) == 1 ? json_string(v, vn) : NULL;
}

int64_t json_get_int(const char *text, size_t n, const char *key, int64_t dflt) {
  const char *v;
  size_t vn;
  int64_t x;
  return json_get(text, n, key, &v, &vn) == 1 && json_int(v, vn, &x) == 0 ? x : dflt;
}
