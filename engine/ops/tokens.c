/* tokens: API tokens (see tokens.h). The secret exists only in the caller's
 * buffer and on the creator's terminal; the store keeps its SHA-256. */
#include "tokens.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "home.h"
#include "json.h"
#include "workflow_ops.h"
#include "render.h"
#include "util.h"

#define TOKEN_PREFIX "eng_"
#define TOKEN_RANDOM_BYTES 32

static const struct {
  const char *name;
  unsigned bit;
} SCOPES[] = {
    {"read", SCOPE_READ},       {"start", SCOPE_START},   {"signal", SCOPE_SIGNAL},
    {"approve", SCOPE_APPROVE}, {"cancel", SCOPE_CANCEL}, {"admin", SCOPE_ADMIN},
};
enum { NSCOPES = sizeof SCOPES / sizeof *SCOPES };
#define SCOPES_VALID "read, start, signal, approve, cancel, admin"

static int is_alnum(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* ---------------------------------------------------------------- names --- */

int token_check_name(const char *name, char *err, size_t errlen) {
  static const char *rule = "token names are 1-64 bytes of A-Z a-z 0-9 . _ @ -, starting with a letter or digit";
  char shown[48], what[64];
  if (engine_name_problem(name, TOKEN_NAME_MAX, "._@-", what, sizeof what) == 0) return 0;
  render_buf(shown, sizeof shown, name, strlen(name), 0);
  util_seterr(err, errlen, "invalid token name \"%s\": %s (%s)", shown, what, rule);
  return -1;
}

/* --------------------------------------------------------------- scopes --- */

int token_scopes_parse(const char *csv, unsigned *mask, char *err, size_t errlen) {
  *mask = 0;
  const char *p = csv;
  for (;;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    const char *b = p, *e = p + n;
    while (b < e && (*b == ' ' || *b == '\t')) b++;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t')) e--;
    size_t len = (size_t)(e - b);
    if (len == 0) {
      char shown[96];
      render_buf(shown, sizeof shown, csv, strlen(csv), 0);
      util_seterr(err, errlen, "%s in \"%s\" (valid scopes: %s)", *csv ? "an empty scope" : "no scope", shown,
                  SCOPES_VALID);
      return -1;
    }
    unsigned bit = 0;
    for (int i = 0; i < NSCOPES && !bit; i++)
      if (strlen(SCOPES[i].name) == len && memcmp(SCOPES[i].name, b, len) == 0) bit = SCOPES[i].bit;
    if (!bit) {
      char shown[96];
      render_buf(shown, sizeof shown, b, len, 0);
      util_seterr(err, errlen, "unknown scope \"%s\" (valid scopes: %s)", shown, SCOPES_VALID);
      return -1;
    }
    *mask |= bit;
    if (!end) return 0;
    p = end + 1;
  }
}

void token_scopes_format(unsigned mask, char *out, size_t n) {
  if (n == 0) return;
  out[0] = 0;
  if (mask & SCOPE_ADMIN) {
    snprintf(out, n, "admin");
    return;
  }
  size_t used = 0;
  for (int i = 0; i < NSCOPES; i++) {
    if (!(mask & SCOPES[i].bit)) continue;
    int w = snprintf(out + used, n - used, "%s%s", used ? "," : "", SCOPES[i].name);
    if (w < 0 || (size_t)w >= n - used) return; /* cut short, still NUL-terminated */
    used += (size_t)w;
  }
}

int token_allows(unsigned mask, unsigned scope) { return (mask & SCOPE_ADMIN) || (scope && (mask & scope) == scope); }

/* ---------------------------------------------------------------- store --- */

/* base64url without padding of n bytes into out (4 * n / 3 + 2 bytes). */
static void base64url(const unsigned char *in, size_t n, char *out) {
  static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  size_t o = 0, i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
    out[o++] = A[v >> 18 & 63];
    out[o++] = A[v >> 12 & 63];
    out[o++] = A[v >> 6 & 63];
    out[o++] = A[v & 63];
  }
  if (n - i == 1) {
    uint32_t v = (uint32_t)in[i] << 16;
    out[o++] = A[v >> 18 & 63];
    out[o++] = A[v >> 12 & 63];
  } else if (n - i == 2) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
    out[o++] = A[v >> 18 & 63];
    out[o++] = A[v >> 12 & 63];
    out[o++] = A[v >> 6 & 63];
  }
  out[o] = 0;
}

/* Ends the write with the store's message in err: a failed write loses the
 * batch (store.h), so it is rolled back here. */
static int store_failed(store *st, const char *what, char *err, size_t errlen) {
  util_seterr(err, errlen, "%s: %s", what, store_errmsg(st));
  store_rollback(st);
  return -1;
}

int token_create(store *st, const char *name, unsigned scopes, char *secret, char *err, size_t errlen) {
  return token_create_granted(st, name, scopes, NULL, secret, err, errlen);
}

int token_create_granted(store *st, const char *name, unsigned scopes, const char *grants, char *secret, char *err,
                         size_t errlen) {
  secret[0] = 0;
  if (token_check_name(name, err, errlen) != 0) return -1;
  unsigned all = SCOPE_READ | SCOPE_START | SCOPE_SIGNAL | SCOPE_APPROVE | SCOPE_CANCEL | SCOPE_ADMIN;
  if (scopes == 0 || (scopes & ~all)) {
    util_seterr(err, errlen, "token %s: scopes 0x%x are not a set of %s", name, scopes, SCOPES_VALID);
    return -1;
  }
  unsigned char raw[TOKEN_RANDOM_BYTES];
  if (RAND_bytes(raw, sizeof raw) != 1) {
    util_seterr(err, errlen, "token %s: the system's random generator failed", name);
    return -1;
  }
  char made[TOKEN_SECRET_MAX], hash[65];
  memcpy(made, TOKEN_PREFIX, sizeof TOKEN_PREFIX - 1);
  base64url(raw, sizeof raw, made + sizeof TOKEN_PREFIX - 1);
  OPENSSL_cleanse(raw, sizeof raw);
  util_sha256_hex(made, strlen(made), hash);
  int rc = store_token_put(st, name, hash, scopes, grants, util_now_ms());
  if (rc < 0) {
    OPENSSL_cleanse(made, sizeof made);
    return store_failed(st, "cannot store the token", err, errlen);
  }
  if (rc == 0) {
    OPENSSL_cleanse(made, sizeof made);
    store_rollback(st);
    util_seterr(err, errlen, "a live token named %s exists (revoke it first: engine token revoke %s)", name, name);
    return -1;
  }
  if (store_commit(st) != STORE_OK) {
    OPENSSL_cleanse(made, sizeof made);
    util_seterr(err, errlen, "cannot store the token: %s", store_errmsg(st));
    return -1;
  }
  memcpy(secret, made, strlen(made) + 1);
  OPENSSL_cleanse(made, sizeof made);
  return 0;
}

int token_revoke(store *st, const char *name, char *err, size_t errlen) {
  int rc = store_token_revoke(st, name, util_now_ms());
  if (rc < 0) return store_failed(st, "cannot revoke the token", err, errlen);
  if (rc == 0) {
    store_rollback(st); /* nothing was written */
    return 0;
  }
  if (store_commit(st) != STORE_OK) {
    util_seterr(err, errlen, "cannot revoke the token: %s", store_errmsg(st));
    return -1;
  }
  return 1;
}

typedef struct list_ctx {
  int (*cb)(void *ud, const token_info *t);
  void *ud;
} list_ctx;

static int on_listed(void *ud, const token_row *r) {
  list_ctx *c = ud;
  token_info t = {r->name, r->scopes, r->created_at, r->revoked_at, r->grants};
  return c->cb(c->ud, &t);
}

int token_list(store *st, int (*cb)(void *ud, const token_info *t), void *ud) {
  list_ctx c = {cb, ud};
  return store_token_list(st, on_listed, &c) == STORE_OK ? 0 : -1;
}

int64_t token_live_count(store *st) { return store_token_live_count(st); }

/* --------------------------------------------------------------- verify --- */

typedef struct verify_ctx {
  char hash[65];
  char name[TOKEN_NAME_MAX + 1];
  unsigned scopes;
  unsigned matched; /* 0 or all ones */
} verify_ctx;

/* Compares against one live token and keeps it when it matches, with the same
 * work whether it does or not: no branch on the comparison, every byte of the
 * name slot written through a mask. Never stops the scan. */
static int on_live(void *ud, const token_row *r) {
  verify_ctx *v = ud;
  char name[TOKEN_NAME_MAX + 1] = {0};
  size_t n = r->name ? strlen(r->name) : 0;
  memcpy(name, r->name ? r->name : "", n <= TOKEN_NAME_MAX ? n : TOKEN_NAME_MAX);
  /* a stored hash of another length (a damaged row) cannot match */
  int ok = r->hash && strlen(r->hash) == 64;
  int diff = CRYPTO_memcmp(v->hash, ok ? r->hash : v->hash, 64);
  unsigned eq = (unsigned)ok & (unsigned)(diff == 0);
  unsigned m = 0u - eq;
  unsigned char m8 = (unsigned char)m;
  for (size_t i = 0; i < sizeof name; i++)
    v->name[i] = (char)(((unsigned char)v->name[i] & (unsigned char)~m8) | ((unsigned char)name[i] & m8));
  v->scopes = (v->scopes & ~m) | (r->scopes & m);
  v->matched |= m;
  return 0;
}

/* The live tokens, through the cache when there is one (token_cache). */
struct token_cache {
  int64_t max_age_ms, read_at; /* read_at: util_mono_ms of the reading, 0 none */
  token_row *v;
  size_t n, cap;
};

static int scan_live(token_cache *c, store *st, store_token_cb cb, void *ud, int *fresh);

static int verify_in(token_cache *c, store *st, const char *secret, size_t len, char *name, unsigned *scopes) {
  name[0] = 0;
  *scopes = 0;
  /* what cannot be a token is no match, without a look at the store */
  if (!secret || len == 0 || len >= TOKEN_SECRET_MAX) return 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)secret[i];
    if (!is_alnum(c) && c != '-' && c != '_') return 0;
  }
  verify_ctx v = {.scopes = 0, .matched = 0};
  util_sha256_hex(secret, len, v.hash);
  int fresh = 0;
  if (scan_live(c, st, on_live, &v, &fresh) != STORE_OK) return -1;
  if (!v.matched && !fresh) { /* a token created since the cache's reading is good at once */
    c->read_at = 0;
    if (scan_live(c, st, on_live, &v, &fresh) != STORE_OK) return -1;
  }
  if (!v.matched) return 0;
  memcpy(name, v.name, sizeof v.name);
  *scopes = v.scopes;
  return 1;
}

/* --------------------------------------------------------------- grants --- */

int token_grants_check(const char *const *grants, int n, char **json, char *err, size_t errlen) {
  *json = NULL;
  lua_State *L = luaL_newstate();
  if (!L) {
    util_seterr(err, errlen, "out of memory");
    return -1;
  }
  luaL_openlibs(L);
  char *path = util_fmt("%s/grants.lua", engine_lua_dir());
  int rc = -1;
  if (luaL_dofile(L, path) != LUA_OK || !lua_istable(L, -1)) {
    util_seterr(err, errlen, "cannot load %s: %s", path, lua_isstring(L, -1) ? lua_tostring(L, -1) : "not a module");
    goto out;
  }
  lua_getfield(L, -1, "parse_list");
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushstring(L, grants[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushliteral(L, "--grant");
  if (lua_pcall(L, 2, 2, 0) != LUA_OK) {
    util_seterr(err, errlen, "checking the grants failed: %s", lua_tostring(L, -1));
    goto out;
  }
  if (lua_isnil(L, -2)) { /* the problems, each named */
    int problems = lua_gettop(L); /* before the buffer, which takes a slot of the stack */
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (lua_Integer i = 1; i <= (lua_Integer)luaL_len(L, problems); i++) {
      if (i > 1) luaL_addstring(&b, "; ");
      lua_rawgeti(L, problems, i);
      luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    util_seterr(err, errlen, "%s", lua_tostring(L, -1));
    goto out;
  }
  lua_pop(L, 1);
  int list = lua_gettop(L);
  lua_createtable(L, n, 0);
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, list, i);
    lua_getfield(L, -1, "text");
    lua_rawseti(L, -3, i);
    lua_pop(L, 1);
  }
  size_t len;
  const char *text = n > 0 ? json_encode(L, -1, &len) : "[]";
  if (n == 0) len = 2;
  *json = util_xmalloc(len + 1);
  memcpy(*json, text, len + 1);
  rc = 0;
out:
  free(path);
  lua_close(L);
  return rc;
}

typedef struct grants_ctx {
  const char *name;
  char *grants;
  int found;
} grants_ctx;

static int on_named(void *ud, const token_row *r) {
  grants_ctx *g = ud;
  if (!r->name || strcmp(r->name, g->name) != 0) return 0;
  g->found = 1;
  g->grants = util_strdup(r->grants && *r->grants ? r->grants : "[]");
  return 1;
}

static int grants_in(token_cache *c, store *st, const char *name, char **grants) {
  *grants = NULL;
  grants_ctx g = {name, NULL, 0};
  if (scan_live(c, st, on_named, &g, NULL) != STORE_OK) return -1;
  *grants = g.grants;
  return g.found;
}

int token_verify(store *st, const char *secret, size_t len, char *name, unsigned *scopes) {
  return verify_in(NULL, st, secret, len, name, scopes);
}

int token_grants_of(store *st, const char *name, char **grants) { return grants_in(NULL, st, name, grants); }

/* ---------------------------------------------------------------- cache --- */

token_cache *token_cache_new(int64_t max_age_ms) {
  token_cache *c = util_xcalloc(1, sizeof *c);
  c->max_age_ms = max_age_ms;
  return c;
}

static void cache_clear(token_cache *c) {
  for (size_t i = 0; i < c->n; i++) {
    free((char *)c->v[i].name);
    free((char *)c->v[i].hash);
    free((char *)c->v[i].grants);
  }
  c->n = 0;
  c->read_at = 0;
}

void token_cache_free(token_cache *c) {
  if (!c) return;
  cache_clear(c);
  free(c->v);
  free(c);
}

static int cache_add(void *ud, const token_row *r) {
  token_cache *c = ud;
  if (c->n == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 8;
    c->v = util_xrealloc(c->v, c->cap * sizeof *c->v);
  }
  c->v[c->n++] = (token_row){r->name ? util_strdup(r->name) : NULL, r->hash ? util_strdup(r->hash) : NULL, r->scopes,
                             r->created_at, r->revoked_at, r->grants ? util_strdup(r->grants) : NULL};
  return 0;
}

/* *fresh (when given): set when the store was read by this call. */
static int scan_live(token_cache *c, store *st, store_token_cb cb, void *ud, int *fresh) {
  if (fresh) *fresh = 1;
  if (!c) return store_token_live(st, cb, ud);
  int64_t now = util_mono_ms();
  if (fresh) *fresh = !c->read_at || now - c->read_at >= c->max_age_ms;
  if (!c->read_at || now - c->read_at >= c->max_age_ms) {
    cache_clear(c);
    if (store_token_live(st, cache_add, c) != STORE_OK) {
      cache_clear(c); /* a failed reading is not kept: the next request reads again */
      return STORE_ERR;
    }
    c->read_at = now ? now : 1;
  }
  for (size_t i = 0; i < c->n; i++)
    if (cb(ud, &c->v[i])) break;
  return STORE_OK;
}

static int count_one(void *ud, const token_row *r) {
  (void)r;
  ++*(int64_t *)ud;
  return 0;
}

int64_t token_live_count_cached(token_cache *c, store *st) {
  if (!c) return token_live_count(st);
  int64_t n = 0;
  return scan_live(c, st, count_one, &n, NULL) == STORE_OK ? n : -1;
}

int token_verify_cached(token_cache *c, store *st, const char *secret, size_t len, char *name, unsigned *scopes) {
  return verify_in(c, st, secret, len, name, scopes);
}

int token_grants_of_cached(token_cache *c, store *st, const char *name, char **grants) {
  return grants_in(c, st, name, grants);
}
