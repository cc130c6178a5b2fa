/* fuzz_webhook_verify: engine/base/webhook_verify.c on arbitrary headers, secrets
 * and bodies.
 *
 * The input is four lines and the body: SECRET, ID, TS, HEADER, then the rest
 * (NUL bytes and all). Properties (a violation aborts with the reason):
 *   - each verifier on the raw fields returns 0 or -1, and -1 comes with a
 *     non-empty message; never a crash;
 *   - none passes with a secret the input cannot know (no forgery through
 *     parsing: the headers are the fuzzer's, the key is not);
 *   - a delivery signed here with the input's secret passes exactly when its
 *     fields are well formed (GitHub, Stripe-style with the fuzzed header's
 *     entries in front, Standard Webhooks after the fuzzed header's entries,
 *     Bearer), and fails once one body byte changes. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "webhook_verify.h"

#define HIDDEN "fuzz-hidden-secret-0123456789"
#define HIDDEN_B64 "whsec_ZnV6ei1oaWRkZW4tc2VjcmV0LTAxMjM0NTY3ODk="
#define NOW 1700000000
#define BUF 8192

static void finding(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_webhook_verify: %s%s%.300s\n", what, detail ? ": " : "", detail ? detail : "");
  abort();
}

/* rc is 0, or -1 with a message. */
static int checked(int rc, const char *err, const char *who) {
  if (rc != 0 && rc != -1) finding("a verifier returned neither 0 nor -1", who);
  if (rc == -1 && !err[0]) finding("-1 without a message", who);
  return rc;
}

/* The next line of in (without its '\n'); the whole rest when there is none. */
static webhook_bytes next_line(const char **p, const char *end) {
  webhook_bytes b = {*p, 0};
  const char *nl = memchr(*p, '\n', (size_t)(end - *p));
  b.n = (size_t)((nl ? nl : end) - *p);
  *p = nl ? nl + 1 : end;
  return b;
}

static void mac(const void *key, size_t keylen, const webhook_bytes *parts, int n, unsigned char out[32]) {
  unsigned char buf[3 * BUF];
  size_t len = 0;
  for (int i = 0; i < n; i++) {
    memcpy(buf + len, parts[i].p, parts[i].n);
    len += parts[i].n;
  }
  unsigned int outlen = 0;
  if (!HMAC(EVP_sha256(), key, (int)keylen, buf, len, out, &outlen)) finding("HMAC failed", NULL);
}

static size_t hex(const unsigned char *m, char *out) {
  for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", m[i]);
  return 64;
}

/* TS as the verifiers accept it: 1 to 12 digits. */
static int ts_ok(webhook_bytes ts, int64_t *v) {
  if (ts.n == 0 || ts.n > 12) return 0;
  *v = 0;
  for (size_t i = 0; i < ts.n; i++) {
    if (ts.p[i] < '0' || ts.p[i] > '9') return 0;
    *v = *v * 10 + (ts.p[i] - '0');
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > BUF) return 0;
  const char *p = (const char *)data, *end = p + size;
  webhook_bytes secret = next_line(&p, end), id = next_line(&p, end), ts = next_line(&p, end),
                header = next_line(&p, end), body = {p, (size_t)(end - p)};
  char err[256];
  static char sig[2 * BUF + 256];
  unsigned char m[32];
  int64_t t = 0;
  int tsv = ts_ok(ts, &t);

  /* the raw fields, with the hidden secret: never valid */
  err[0] = 0;
  if (checked(webhook_verify_github(((webhook_bytes){HIDDEN, sizeof HIDDEN - 1}), header, body, err, sizeof err), err,
              "github") == 0)
    finding("GitHub passed without the secret", NULL);
  err[0] = 0;
  if (checked(
          webhook_verify_stripe(((webhook_bytes){HIDDEN, sizeof HIDDEN - 1}), header, body, NOW, 300, err, sizeof err),
          err, "stripe") == 0)
    finding("Stripe-style passed without the secret", NULL);
  err[0] = 0;
  webhook_bytes hidden64 = {HIDDEN_B64, sizeof HIDDEN_B64 - 1};
  if (checked(webhook_verify_standard(hidden64, id, ts, header, body, NOW, 300, err, sizeof err), err, "standard") == 0)
    finding("Standard Webhooks passed without the secret", NULL);
  err[0] = 0;
  if (checked(webhook_verify_bearer(((webhook_bytes){HIDDEN, sizeof HIDDEN - 1}), header, err, sizeof err), err,
              "bearer") == 0)
    finding("Bearer passed without the token", NULL);
  /* the raw fields with the input's own secret: any answer, no crash */
  err[0] = 0;
  checked(webhook_verify_standard(secret, id, ts, header, body, NOW, 300, err, sizeof err), err, "standard raw");

  /* GitHub, signed here */
  mac(secret.p, secret.n, &body, 1, m);
  memcpy(sig, "sha256=", 7);
  webhook_bytes gh = {sig, 7 + hex(m, sig + 7)};
  err[0] = 0;
  int rc = checked(webhook_verify_github(secret, gh, body, err, sizeof err), err, "github signed");
  if ((rc == 0) != (secret.n > 0)) finding("GitHub: a signed delivery's verdict is wrong", err);

  /* Stripe-style: the fuzzed header's entries, then t= and v1= (its own t= makes two) */
  if (tsv && !memchr(header.p, '\0', header.n)) {
    mac(secret.p, secret.n, (webhook_bytes[]){ts, {".", 1}, body}, 3, m);
    size_t n = 0;
    memcpy(sig, header.p, header.n);
    n += header.n;
    n += (size_t)sprintf(sig + n, ",t=%.*s,v1=", (int)ts.n, ts.p);
    n += hex(m, sig + n);
    int own_t = 0;
    for (size_t i = 0; i < header.n; i++)
      if ((i == 0 || header.p[i - 1] == ',') && i + 1 < header.n && header.p[i] == 't' && header.p[i + 1] == '=')
        own_t = 1;
    err[0] = 0;
    rc = checked(webhook_verify_stripe(secret, (webhook_bytes){sig, n}, body, t, 300, err, sizeof err), err,
                 "stripe signed");
    if ((rc == 0) != (secret.n > 0 && !own_t)) finding("Stripe-style: a signed delivery's verdict is wrong", err);
  }

  /* Standard Webhooks: the key base64-encoded, the fuzzed entries then ours */
  if (secret.n <= WEBHOOK_KEY_MAX) {
    static char key64[6 + 4 * WEBHOOK_KEY_MAX / 3 + 8];
    memcpy(key64, "whsec_", 6);
    int k = EVP_EncodeBlock((unsigned char *)key64 + 6, (const unsigned char *)secret.p, (int)secret.n);
    mac(secret.p, secret.n, (webhook_bytes[]){id, {".", 1}, ts, {".", 1}, body}, 5, m);
    size_t n = 0;
    memcpy(sig, header.p, header.n);
    n += header.n;
    memcpy(sig + n, " v1,", 4);
    n += 4;
    n += (size_t)EVP_EncodeBlock((unsigned char *)sig + n, m, 32);
    err[0] = 0;
    rc = checked(webhook_verify_standard((webhook_bytes){key64, 6 + (size_t)k}, id, ts, (webhook_bytes){sig, n}, body,
                                         tsv ? t : NOW, 300, err, sizeof err),
                 err, "standard signed");
    int ok = secret.n > 0 && id.n > 0 && !memchr(id.p, '.', id.n) && tsv;
    if ((rc == 0) != ok) finding("Standard Webhooks: a signed delivery's verdict is wrong", err);
    if (rc == 0 && body.n > 0) {
      static char changed[BUF];
      memcpy(changed, body.p, body.n);
      changed[body.n / 2] ^= 1;
      err[0] = 0;
      if (checked(webhook_verify_standard((webhook_bytes){key64, 6 + (size_t)k}, id, ts, (webhook_bytes){sig, n},
                                          (webhook_bytes){changed, body.n}, t, 300, err, sizeof err),
                  err, "standard changed") == 0)
        finding("Standard Webhooks passed a changed body", NULL);
    }
  }

  /* Bearer with the secret as the token */
  memcpy(sig, "Bearer ", 7);
  memcpy(sig + 7, secret.p, secret.n);
  err[0] = 0;
  rc =
      checked(webhook_verify_bearer(secret, (webhook_bytes){sig, 7 + secret.n}, err, sizeof err), err, "bearer signed");
  if ((rc == 0) != (secret.n > 0 && secret.p[0] != ' ')) finding("Bearer: the token's verdict is wrong", err);
  return 0;
}
