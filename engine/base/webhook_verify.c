/* webhook_verify: webhook signature checks (see webhook_verify.h).
 *
 * The received header is parsed in ordinary code (it is the sender's, not a
 * secret); only the comparison of a computed MAC or digest with a received one
 * must not depend on where they differ, hence CRYPTO_memcmp over fixed-size
 * buffers. */
#include "webhook_verify.h"

#include <lauxlib.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MAC_LEN 32 /* HMAC-SHA256 */
/* Unix seconds with at most 12 digits (until the year 33658): no overflow
 * when compared with now, and "huge" values are refused by name. */
#define TS_DIGITS_MAX 12
/* |now| bound so that now - ts cannot overflow */
#define NOW_ABS_MAX ((int64_t)1 << 61)

static int fail(char *err, size_t errlen, const char *msg) {
  if (errlen) snprintf(err, errlen, "%s", msg);
  return -1;
}

/* HMAC-SHA256 over the concatenation of parts, into out. 0, or -1 with err. */
static int hmac_sha256(const unsigned char *key, size_t keylen, const webhook_bytes *parts, size_t nparts,
                       unsigned char out[MAC_LEN], char *err, size_t errlen) {
  int rc = -1;
  EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
  EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0), OSSL_PARAM_END};
  size_t outlen = 0;
  if (!ctx || !EVP_MAC_init(ctx, key, keylen, params)) goto done;
  for (size_t i = 0; i < nparts; i++)
    if (parts[i].n && !EVP_MAC_update(ctx, (const unsigned char *)parts[i].p, parts[i].n)) goto done;
  if (!EVP_MAC_final(ctx, out, &outlen, MAC_LEN) || outlen != MAC_LEN) goto done;
  rc = 0;
done:
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
  if (rc) fail(err, errlen, "HMAC-SHA256 failed (OpenSSL)");
  return rc;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Exactly 2 * MAC_LEN hex digits (either case) into out: 0, or -1. */
static int hex_mac(const char *s, size_t n, unsigned char out[MAC_LEN]) {
  if (n != 2 * MAC_LEN) return -1;
  for (size_t i = 0; i < MAC_LEN; i++) {
    int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return -1;
    out[i] = (unsigned char)(hi << 4 | lo);
  }
  return 0;
}

static int b64val(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

/* Standard base64 (RFC 4648 section 4), padding optional but, when present,
 * complete; at most cap bytes decoded. Returns the length, or -1. */
static long b64_decode(const char *s, size_t n, unsigned char *out, size_t cap) {
  size_t pad = 0;
  while (n > 0 && s[n - 1] == '=' && pad < 2) n--, pad++;
  if (pad && (n + pad) % 4) return -1;
  if (n % 4 == 1) return -1;
  size_t len = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
  if (len > cap) return -1;
  unsigned acc = 0;
  int bits = 0;
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    int v = b64val(s[i]);
    if (v < 0) return -1;
    acc = (acc << 6 | (unsigned)v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (unsigned char)(acc >> bits);
    }
  }
  return (long)o;
}

/* A timestamp header: 1 to TS_DIGITS_MAX decimal digits. 0, or -1 with err
 * naming the header. */
static int parse_ts(const char *name, webhook_bytes ts, int64_t *out, char *err, size_t errlen) {
  if (ts.n == 0) {
    snprintf(err, errlen, "%s is empty", name);
    return -1;
  }
  int64_t v = 0;
  for (size_t i = 0; i < ts.n; i++) {
    if (ts.p[i] < '0' || ts.p[i] > '9') {
      snprintf(err, errlen, "%s is not a decimal unix time", name);
      return -1;
    }
    if (i >= TS_DIGITS_MAX) {
      snprintf(err, errlen, "%s has more than %d digits", name, TS_DIGITS_MAX);
      return -1;
    }
    v = v * 10 + (ts.p[i] - '0');
  }
  *out = v;
  return 0;
}

/* ts within tolerance of now, either way. 0, or -1 with err. */
static int check_age(const char *name, int64_t ts, int64_t now, int64_t tolerance, char *err, size_t errlen) {
  int64_t age = now - ts; /* both bounded: cannot overflow */
  if (age > tolerance) {
    snprintf(err, errlen, "%s is %lld s old, more than the tolerance of %lld s", name, (long long)age,
             (long long)tolerance);
    return -1;
  }
  if (-age > tolerance) {
    snprintf(err, errlen, "%s is %lld s in the future, more than the tolerance of %lld s", name, (long long)-age,
             (long long)tolerance);
    return -1;
  }
  return 0;
}

static int check_clock(int64_t now, int64_t tolerance, char *err, size_t errlen) {
  if (tolerance < 0 || tolerance > NOW_ABS_MAX) return fail(err, errlen, "tolerance must be 0 or more seconds");
  if (now > NOW_ABS_MAX || now < -NOW_ABS_MAX) return fail(err, errlen, "now is out of range");
  return 0;
}

/* ------------------------------------------------------------- GitHub --- */

int webhook_verify_github(webhook_bytes secret, webhook_bytes sig, webhook_bytes body, char *err, size_t errlen) {
  static const char prefix[] = "sha256=";
  const size_t plen = sizeof prefix - 1;
  unsigned char want[MAC_LEN], got[MAC_LEN];
  if (!secret.p || secret.n == 0) return fail(err, errlen, "secret is empty");
  if (!sig.p) return fail(err, errlen, "X-Hub-Signature-256 is missing");
  if (sig.n == 0) return fail(err, errlen, "X-Hub-Signature-256 is empty");
  if (sig.n < plen || memcmp(sig.p, prefix, plen) != 0)
    return fail(err, errlen, "X-Hub-Signature-256 does not start with sha256=");
  if (hex_mac(sig.p + plen, sig.n - plen, got) != 0)
    return fail(err, errlen, "X-Hub-Signature-256 is not sha256= and 64 hex digits");
  if (hmac_sha256((const unsigned char *)secret.p, secret.n, &body, 1, want, err, errlen) != 0) return -1;
  if (CRYPTO_memcmp(want, got, MAC_LEN) != 0) return fail(err, errlen, "signature does not match");
  return 0;
}

/* --------------------------------------------------- Standard Webhooks --- */

int webhook_verify_standard(webhook_bytes secret, webhook_bytes id, webhook_bytes ts, webhook_bytes sig,
                            webhook_bytes body, int64_t now, int64_t tolerance, char *err, size_t errlen) {
  unsigned char key[WEBHOOK_KEY_MAX], want[MAC_LEN], got[MAC_LEN + 1];
  int64_t t = 0;
  if (check_clock(now, tolerance, err, errlen) != 0) return -1;
  if (!secret.p) return fail(err, errlen, "secret is not a valid whsec_ base64 key");
  webhook_bytes s = secret;
  if (s.n >= 6 && memcmp(s.p, "whsec_", 6) == 0) s.p += 6, s.n -= 6;
  long keylen = b64_decode(s.p, s.n, key, sizeof key);
  if (keylen <= 0) return fail(err, errlen, "secret is not a valid whsec_ base64 key");
  if (!id.p) return fail(err, errlen, "webhook-id is missing");
  if (id.n == 0) return fail(err, errlen, "webhook-id is empty");
  /* the spec: neither may hold a '.', which would shift the signed fields */
  if (memchr(id.p, '.', id.n)) return fail(err, errlen, "webhook-id contains '.'");
  if (!ts.p) return fail(err, errlen, "webhook-timestamp is missing");
  if (parse_ts("webhook-timestamp", ts, &t, err, errlen) != 0) return -1;
  if (!sig.p) return fail(err, errlen, "webhook-signature is missing");
  if (hmac_sha256(key, (size_t)keylen, (webhook_bytes[]){id, {".", 1}, ts, {".", 1}, body}, 5, want, err, errlen) !=
      0) {
    OPENSSL_cleanse(key, sizeof key);
    return -1;
  }
  OPENSSL_cleanse(key, sizeof key);
  int v1 = 0, match = 0;
  for (size_t i = 0; i < sig.n;) {
    while (i < sig.n && sig.p[i] == ' ') i++;
    size_t start = i;
    while (i < sig.n && sig.p[i] != ' ') i++;
    const char *e = sig.p + start;
    size_t n = i - start;
    if (n < 3 || memcmp(e, "v1,", 3) != 0) continue; /* another version (v1a, v2) or no entry */
    v1 = 1;
    /* got has room for one more byte, so a longer signature cannot pass */
    long len = b64_decode(e + 3, n - 3, got, sizeof got);
    if (len == MAC_LEN && CRYPTO_memcmp(want, got, MAC_LEN) == 0) match = 1;
  }
  if (!v1) return fail(err, errlen, "webhook-signature has no v1 signature");
  if (!match) return fail(err, errlen, "signature does not match");
  return check_age("webhook-timestamp", t, now, tolerance, err, errlen);
}

/* -------------------------------------------------------- Stripe-style --- */

int webhook_verify_stripe(webhook_bytes secret, webhook_bytes header, webhook_bytes body, int64_t now,
                          int64_t tolerance, char *err, size_t errlen) {
  unsigned char want[MAC_LEN], got[MAC_LEN];
  webhook_bytes ts = {NULL, 0};
  int64_t t = 0;
  if (check_clock(now, tolerance, err, errlen) != 0) return -1;
  if (!secret.p || secret.n == 0) return fail(err, errlen, "secret is empty");
  if (!header.p) return fail(err, errlen, "Stripe-Signature is missing");
  if (header.n == 0) return fail(err, errlen, "Stripe-Signature is empty");
  /* first pass: the timestamp, needed for the signed payload */
  for (size_t i = 0; i < header.n;) {
    size_t start = i;
    while (i < header.n && header.p[i] != ',') i++;
    if (i - start >= 2 && memcmp(header.p + start, "t=", 2) == 0) {
      if (ts.p) return fail(err, errlen, "Stripe-Signature has more than one t=");
      ts.p = header.p + start + 2;
      ts.n = i - start - 2;
    }
    i++;
  }
  if (!ts.p) return fail(err, errlen, "Stripe-Signature has no t= timestamp");
  if (parse_ts("Stripe-Signature t=", ts, &t, err, errlen) != 0) return -1;
  if (hmac_sha256((const unsigned char *)secret.p, secret.n, (webhook_bytes[]){ts, {".", 1}, body}, 3, want, err,
                  errlen) != 0)
    return -1;
  int v1 = 0, match = 0;
  for (size_t i = 0; i < header.n;) {
    size_t start = i;
    while (i < header.n && header.p[i] != ',') i++;
    const char *e = header.p + start;
    size_t n = i - start;
    i++;
    if (n < 3 || memcmp(e, "v1=", 3) != 0) continue; /* t=, v0= (test mode), other schemes */
    v1 = 1;
    if (hex_mac(e + 3, n - 3, got) == 0 && CRYPTO_memcmp(want, got, MAC_LEN) == 0) match = 1;
  }
  if (!v1) return fail(err, errlen, "Stripe-Signature has no v1 signature");
  if (!match) return fail(err, errlen, "signature does not match");
  return check_age("Stripe-Signature t=", t, now, tolerance, err, errlen);
}

/* -------------------------------------------------------------- Bearer --- */

static int sha256(const char *p, size_t n, unsigned char out[MAC_LEN]) {
  unsigned int len = 0;
  return EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) && len == MAC_LEN ? 0 : -1;
}

int webhook_verify_bearer(webhook_bytes expected, webhook_bytes auth, char *err, size_t errlen) {
  unsigned char want[MAC_LEN], got[MAC_LEN];
  if (!expected.p || expected.n == 0) return fail(err, errlen, "expected token is empty");
  if (!auth.p) return fail(err, errlen, "Authorization is missing");
  if (auth.n < 7 || strncasecmp(auth.p, "Bearer ", 7) != 0)
    return fail(err, errlen, "Authorization is not a Bearer token");
  size_t i = 7;
  while (i < auth.n && auth.p[i] == ' ') i++;
  if (i == auth.n) return fail(err, errlen, "Authorization has an empty Bearer token");
  if (sha256(expected.p, expected.n, want) != 0 || sha256(auth.p + i, auth.n - i, got) != 0)
    return fail(err, errlen, "SHA-256 failed (OpenSSL)");
  if (CRYPTO_memcmp(want, got, MAC_LEN) != 0) return fail(err, errlen, "bearer token does not match");
  return 0;
}

/* ----------------------------------------------------------------- Lua --- */

/* Argument i as bytes: a string, or nil/none for a missing header. */
static webhook_bytes opt_bytes(lua_State *L, int i) {
  webhook_bytes b = {NULL, 0};
  if (!lua_isnoneornil(L, i)) b.p = luaL_checklstring(L, i, &b.n);
  return b;
}

static webhook_bytes check_bytes(lua_State *L, int i) {
  webhook_bytes b;
  b.p = luaL_checklstring(L, i, &b.n);
  return b;
}

/* true, or false and err. */
static int result(lua_State *L, int rc, const char *err) {
  lua_pushboolean(L, rc == 0);
  if (rc == 0) return 1;
  lua_pushstring(L, err);
  return 2;
}

static int l_github(lua_State *L) {
  char err[256] = "";
  int rc = webhook_verify_github(check_bytes(L, 1), opt_bytes(L, 2), check_bytes(L, 3), err, sizeof err);
  return result(L, rc, err);
}

static int l_standard(lua_State *L) {
  char err[256] = "";
  webhook_bytes secret = check_bytes(L, 1), id = opt_bytes(L, 2), ts = opt_bytes(L, 3), sig = opt_bytes(L, 4),
                body = check_bytes(L, 5);
  lua_Integer now = luaL_checkinteger(L, 6), tol = luaL_optinteger(L, 7, WEBHOOK_TOLERANCE_DEFAULT);
  int rc = webhook_verify_standard(secret, id, ts, sig, body, (int64_t)now, (int64_t)tol, err, sizeof err);
  return result(L, rc, err);
}

static int l_stripe(lua_State *L) {
  char err[256] = "";
  webhook_bytes secret = check_bytes(L, 1), header = opt_bytes(L, 2), body = check_bytes(L, 3);
  lua_Integer now = luaL_checkinteger(L, 4), tol = luaL_optinteger(L, 5, WEBHOOK_TOLERANCE_DEFAULT);
  int rc = webhook_verify_stripe(secret, header, body, (int64_t)now, (int64_t)tol, err, sizeof err);
  return result(L, rc, err);
}

static int l_bearer(lua_State *L) {
  char err[256] = "";
  int rc = webhook_verify_bearer(check_bytes(L, 1), opt_bytes(L, 2), err, sizeof err);
  return result(L, rc, err);
}

static const luaL_Reg verify_lib[] = {
    {"github", l_github}, {"standard", l_standard}, {"stripe", l_stripe}, {"bearer", l_bearer}, {NULL, NULL}};

int luaopen_engine_webhook_verify(lua_State *L) {
  luaL_newlib(L, verify_lib);
  return 1;
}
