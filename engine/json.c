#include "json.h"

#include <lauxlib.h>
#include <lualib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int luaopen_cjson(lua_State *L); /* from Debian's lua-cjson */

#define JSON_MAX_DEPTH 64

/* Growable output buffer owned by a userdata, so a Lua error mid-encode frees it. */
typedef struct jbuf {
  char *p;
  size_t n, cap;
} jbuf;

static int jbuf_gc(lua_State *L) {
  jbuf *b = lua_touserdata(L, 1);
  free(b->p);
  b->p = NULL;
  return 0;
}

static void put(lua_State *L, jbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) luaL_error(L, "json: out of memory");
    b->p = np;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
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
    snprintf(tmp, sizeof tmp, "%.15g", d);
    if (strtod(tmp, NULL) != d) snprintf(tmp, sizeof tmp, "%.17g", d);
  }
  put(L, b, tmp, strlen(tmp));
}

typedef struct jkey {
  const char *s;
  size_t len;
  int isnum;
  lua_Integer ival;
  char num[24];
} jkey;

static int cmp_key(const void *a, const void *b) {
  const jkey *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->s, y->s, n);
  if (c) return c;
  return (x->len > y->len) - (x->len < y->len);
}

static void encode(lua_State *L, jbuf *b, int idx, int depth);

static void encode_table(lua_State *L, jbuf *b, int idx, int depth) {
  if (depth > JSON_MAX_DEPTH) luaL_error(L, "json: nesting deeper than %d (a cycle?)", JSON_MAX_DEPTH);
  luaL_checkstack(L, 6, "json: stack");
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
  jkey *keys = lua_newuserdatauv(L, count ? count * sizeof(jkey) : 1, 0);
  size_t k = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    jkey *e = &keys[k++];
    memset(e, 0, sizeof *e);
    int t = lua_type(L, -1);
    if (t == LUA_TSTRING) {
      e->s = lua_tolstring(L, -1, &e->len); /* anchored: it is a key of the table */
    } else if (t == LUA_TNUMBER && lua_isinteger(L, -1)) {
      e->isnum = 1;
      e->ival = lua_tointeger(L, -1);
      snprintf(e->num, sizeof e->num, "%lld", (long long)e->ival);
    } else {
      luaL_error(L, "json: cannot encode a table key of type %s", luaL_typename(L, -1));
    }
  }
  for (size_t i = 0; i < count; i++)
    if (keys[i].isnum) {
      keys[i].s = keys[i].num;
      keys[i].len = strlen(keys[i].num);
    }
  qsort(keys, count, sizeof(jkey), cmp_key);
  put(L, b, "{", 1);
  for (size_t i = 0; i < count; i++) {
    if (i) put(L, b, ",", 1);
    put_string(L, b, keys[i].s, keys[i].len);
    put(L, b, ":", 1);
    if (keys[i].isnum)
      lua_pushinteger(L, keys[i].ival);
    else
      lua_pushlstring(L, keys[i].s, keys[i].len);
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

/* Pushes cjson.decode onto the stack (cached in the registry). */
static void push_cjson_decode(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, "engine.cjson_decode") == LUA_TFUNCTION) return;
  lua_pop(L, 1);
  luaL_requiref(L, "cjson", luaopen_cjson, 0);
  lua_getfield(L, -1, "decode_max_depth");
  lua_pushinteger(L, JSON_MAX_DEPTH);
  lua_call(L, 1, 0);
  lua_getfield(L, -1, "decode");
  lua_remove(L, -2);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, "engine.cjson_decode");
}

void json_decode(lua_State *L, const char *text, size_t len) {
  push_cjson_decode(L);
  lua_pushlstring(L, text, len);
  lua_call(L, 1, 1);
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
    /* cjson says "Expected value but found invalid token at character 1" */
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

char *json_quote(const char *s) {
  size_t n = strlen(s), k = 0;
  char *out = malloc(n * 6 + 3);
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
  return out;
}
