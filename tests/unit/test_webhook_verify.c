/* Unit tests for engine/webhook_verify: published test vectors (GitHub's docs,
 * the Standard Webhooks reference libraries; tests/unit/SOURCES names them),
 * Stripe-style vectors made with openssl, hostile inputs for each scheme, and
 * the Lua binding as the activity VM registers it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <string.h>

#include "webhook_verify.h"

/* A literal's bytes, NULs included; MISSING is an absent header. */
#define B(s) ((webhook_bytes){(s), sizeof(s) - 1})
#define MISSING ((webhook_bytes){NULL, 0})

/* err must contain want (NULL: the call must succeed). */
static void expect(const char *name, int rc, const char *err, const char *want) {
  if (!want) {
    if (rc != 0) fail_msg("%s: expected valid, got -1: %s", name, err);
    return;
  }
  if (rc != -1) fail_msg("%s: expected -1 (%s), got %d", name, want, rc);
  if (!strstr(err, want)) fail_msg("%s: error \"%s\" lacks \"%s\"", name, err, want);
}

/* ------------------------------------------------------------- GitHub --- */

/* GitHub's documented vector ("Validating webhook deliveries", "Testing the
 * webhook payload validation"); the NUL-body one is
 *   printf 'Hello,\0World!' | openssl dgst -sha256 -hmac "It's a Secret to Everybody" */
#define GH_SECRET "It's a Secret to Everybody"
#define GH_SIG "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
#define GH_SIG_UPPER "sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17"
#define GH_SIG_NUL "sha256=42125d1b3f19222538fab5c4107cfb8e0c46b370a675a45cc91be934baa1fe02"

typedef struct gh_case {
  const char *name;
  webhook_bytes secret, sig, body;
  const char *err; /* NULL: valid */
} gh_case;

static void test_github(void **state) {
  (void)state;
  const gh_case cases[] = {
      {"documented vector", B(GH_SECRET), B(GH_SIG), B("Hello, World!"), NULL},
      {"uppercase hex", B(GH_SECRET), B(GH_SIG_UPPER), B("Hello, World!"), NULL},
      {"NUL byte in the body", B(GH_SECRET), B(GH_SIG_NUL), B("Hello,\0World!"), NULL},
      {"body cut at the NUL", B(GH_SECRET), B(GH_SIG_NUL), B("Hello,"), "signature does not match"},
      {"wrong secret", B("It's a Secret to Everybody!"), B(GH_SIG), B("Hello, World!"), "signature does not match"},
      {"body changed by one byte", B(GH_SECRET), B(GH_SIG), B("Hello, World?"), "signature does not match"},
      {"body with trailing newline", B(GH_SECRET), B(GH_SIG), B("Hello, World!\n"), "signature does not match"},
      {"last hex digit changed", B(GH_SECRET),
       B("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e18"), B("Hello, World!"),
       "signature does not match"},
      {"truncated hex", B(GH_SECRET), B("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1"),
       B("Hello, World!"), "not sha256= and 64 hex digits"},
      {"one hex digit too many", B(GH_SECRET),
       B("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e170"), B("Hello, World!"),
       "not sha256= and 64 hex digits"},
      {"non-hex character", B(GH_SECRET), B("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1g"),
       B("Hello, World!"), "not sha256= and 64 hex digits"},
      {"trailing space", B(GH_SECRET), B(GH_SIG " "), B("Hello, World!"), "not sha256= and 64 hex digits"},
      {"no sha256= prefix", B(GH_SECRET), B("757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),
       B("Hello, World!"), "does not start with sha256="},
      {"sha1= (the legacy header)", B(GH_SECRET), B("sha1=757107ea0eb2509fc211221cce984b8a37570b6d"),
       B("Hello, World!"), "does not start with sha256="},
      {"SHA256= prefix", B(GH_SECRET), B("SHA256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),
       B("Hello, World!"), "does not start with sha256="},
      {"only sha256=", B(GH_SECRET), B("sha256="), B("Hello, World!"), "not sha256= and 64 hex digits"},
      {"empty header", B(GH_SECRET), B(""), B("Hello, World!"), "X-Hub-Signature-256 is empty"},
      {"missing header", B(GH_SECRET), MISSING, B("Hello, World!"), "X-Hub-Signature-256 is missing"},
      {"empty secret", B(""), B(GH_SIG), B("Hello, World!"), "secret is empty"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char err[256] = "";
    const gh_case *c = &cases[i];
    expect(c->name, webhook_verify_github(c->secret, c->sig, c->body, err, sizeof err), err, c->err);
  }
}

/* -------------------------------------------------- Standard Webhooks --- */

/* The reference libraries' vector (libraries/python/tests/test_webhooks.py,
 * test_sign_function; see SOURCES); the others, with KEY the hex of the
 * base64-decoded secret:
 *   printf 'msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"a":"x\0y"}' \
 *     | openssl dgst -sha256 -mac HMAC -macopt hexkey:KEY -binary | base64
 * and the same over the default payload with the 23-byte key of the
 * unpadded secret MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS. */
#define SW_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SW_ID "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define SW_TS "1614265330"
#define SW_NOW 1614265330
#define SW_BODY "{\"test\": 2432232314}"
#define SW_SIG "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
/* the libraries' "invalid signature": the vector with its last character changed */
#define SW_BAD "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="
#define SW_OTHER "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
#define SW_SIG_NUL "v1,b7yfkE975KEsGlQiHxnQrLz34m6HOYWs0DQUR7rnvP0="
#define SW_SIG_23 "v1,LVOXivKoo4FWasi/IaHvzhE/u+7/cu2AME+zS/nXqzk="

typedef struct sw_case {
  const char *name;
  webhook_bytes secret, id, ts, sig, body;
  int64_t now, tolerance;
  const char *err;
} sw_case;

static void test_standard(void **state) {
  (void)state;
  const int64_t tol = WEBHOOK_TOLERANCE_DEFAULT;
  const sw_case cases[] = {
      {"reference vector", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW, tol, NULL},
      {"secret without whsec_", B("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY),
       SW_NOW, tol, NULL},
      {"unpadded secret", B("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS"), B(SW_ID), B(SW_TS), B(SW_SIG_23), B(SW_BODY),
       SW_NOW, tol, NULL},
      {"padded secret", B("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS="), B(SW_ID), B(SW_TS), B(SW_SIG_23), B(SW_BODY), SW_NOW,
       tol, NULL},
      {"libraries' multi-signature header", B(SW_SECRET), B(SW_ID), B(SW_TS),
       B(SW_OTHER " v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= " SW_SIG " " SW_OTHER), B(SW_BODY), SW_NOW, tol,
       NULL},
      {"only the second signature valid (rotation)", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_BAD " " SW_SIG), B(SW_BODY),
       SW_NOW, tol, NULL},
      {"v1a entry ignored", B(SW_SECRET), B(SW_ID), B(SW_TS), B("v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw== " SW_SIG),
       B(SW_BODY), SW_NOW, tol, NULL},
      {"NUL byte in the body", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_SIG_NUL), B("{\"a\":\"x\0y\"}"), SW_NOW, tol,
       NULL},
      {"body cut at the NUL", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_SIG_NUL), B("{\"a\":\"x"), SW_NOW, tol,
       "signature does not match"},
      {"300 s old", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW + 300, tol, NULL},
      {"300 s ahead", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW - 300, tol, NULL},
      {"301 s old", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW + 301, tol,
       "webhook-timestamp is 301 s old, more than the tolerance of 300 s"},
      {"3600 s old", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW + 3600, tol,
       "webhook-timestamp is 3600 s old, more than the tolerance of 300 s"},
      {"301 s in the future", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW - 301, tol,
       "webhook-timestamp is 301 s in the future, more than the tolerance of 300 s"},
      {"tolerance 0, same second", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW, 0, NULL},
      {"tolerance 0, a second later", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW + 1, 0,
       "is 1 s old, more than the tolerance of 0 s"},
      {"negative tolerance", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW, -1,
       "tolerance must be 0 or more seconds"},
      {"invalid signature", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_BAD), B(SW_BODY), SW_NOW, tol,
       "signature does not match"},
      {"partial signature v1,", B(SW_SECRET), B(SW_ID), B(SW_TS), B("v1,"), B(SW_BODY), SW_NOW, tol,
       "signature does not match"},
      {"signature not base64", B(SW_SECRET), B(SW_ID), B(SW_TS), B("v1,g0hM9SsE*OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
       B(SW_BODY), SW_NOW, tol, "signature does not match"},
      {"signature with a byte appended", B(SW_SECRET), B(SW_ID), B(SW_TS),
       B("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OEA"), B(SW_BODY), SW_NOW, tol, "signature does not match"},
      {"only v1a and v2 entries", B(SW_SECRET), B(SW_ID), B(SW_TS),
       B("v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw== v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="), B(SW_BODY), SW_NOW,
       tol, "webhook-signature has no v1 signature"},
      {"empty signature header", B(SW_SECRET), B(SW_ID), B(SW_TS), B(""), B(SW_BODY), SW_NOW, tol,
       "webhook-signature has no v1 signature"},
      {"wrong secret", B("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSx"), B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW,
       tol, "signature does not match"},
      {"body changed by one byte", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_SIG), B("{\"test\": 2432232315}"), SW_NOW,
       tol, "signature does not match"},
      {"body with trailing newline", B(SW_SECRET), B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY "\n"), SW_NOW, tol,
       "signature does not match"},
      {"signature for a different id", B(SW_SECRET), B("msg_p5jXN8AQM9LWM0D4loKWxJel"), B(SW_TS), B(SW_SIG), B(SW_BODY),
       SW_NOW, tol, "signature does not match"},
      {"another timestamp in range", B(SW_SECRET), B(SW_ID), B("1614265331"), B(SW_SIG), B(SW_BODY), SW_NOW, tol,
       "signature does not match"},
      {"timestamp not numeric", B(SW_SECRET), B(SW_ID), B("hello"), B(SW_SIG), B(SW_BODY), SW_NOW, tol,
       "webhook-timestamp is not a decimal unix time"},
      {"timestamp negative", B(SW_SECRET), B(SW_ID), B("-1614265330"), B(SW_SIG), B(SW_BODY), SW_NOW, tol,
       "webhook-timestamp is not a decimal unix time"},
      {"timestamp huge", B(SW_SECRET), B(SW_ID), B("99999999999999999999999"), B(SW_SIG), B(SW_BODY), SW_NOW, tol,
       "webhook-timestamp has more than 12 digits"},
      {"timestamp empty", B(SW_SECRET), B(SW_ID), B(""), B(SW_SIG), B(SW_BODY), SW_NOW, tol,
       "webhook-timestamp is empty"},
      {"id with a dot", B(SW_SECRET), B("msg.1"), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW, tol,
       "webhook-id contains '.'"},
      {"empty id", B(SW_SECRET), B(""), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW, tol, "webhook-id is empty"},
      {"secret with partial padding", B("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwBr="), B(SW_ID), B(SW_TS), B(SW_SIG),
       B(SW_BODY), SW_NOW, tol, "secret is not a valid whsec_ base64 key"},
      {"secret of 4k+1 characters", B("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwB"), B(SW_ID), B(SW_TS), B(SW_SIG),
       B(SW_BODY), SW_NOW, tol, "secret is not a valid whsec_ base64 key"},
      {"missing id", B(SW_SECRET), MISSING, B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW, tol, "webhook-id is missing"},
      {"missing timestamp", B(SW_SECRET), B(SW_ID), MISSING, B(SW_SIG), B(SW_BODY), SW_NOW, tol,
       "webhook-timestamp is missing"},
      {"missing signature", B(SW_SECRET), B(SW_ID), B(SW_TS), MISSING, B(SW_BODY), SW_NOW, tol,
       "webhook-signature is missing"},
      {"secret whsec_ only", B("whsec_"), B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW, tol,
       "secret is not a valid whsec_ base64 key"},
      {"secret not base64", B("whsec_not*base64!"), B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW, tol,
       "secret is not a valid whsec_ base64 key"},
      {"secret missing", MISSING, B(SW_ID), B(SW_TS), B(SW_SIG), B(SW_BODY), SW_NOW, tol,
       "secret is not a valid whsec_ base64 key"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char err[256] = "";
    const sw_case *c = &cases[i];
    int rc = webhook_verify_standard(c->secret, c->id, c->ts, c->sig, c->body, c->now, c->tolerance, err, sizeof err);
    expect(c->name, rc, err, c->err);
  }
}

/* ------------------------------------------------------- Stripe-style --- */

/* printf '%s' '1700000000.{"id":"evt_1","object":"event"}' | openssl dgst -sha256 -hmac 'stripe-test-secret'
 * and the same with -hmac 'old-rotated-secret' (ST_OLD). */
#define ST_SECRET "stripe-test-secret"
#define ST_BODY "{\"id\":\"evt_1\",\"object\":\"event\"}"
#define ST_NOW 1700000000
#define ST_HEX "2d7b760a2bb243d837f804f20932b66a8c02b00456d31d1b58e1e25ef7ce03a9"
#define ST_HEX_UPPER "2D7B760A2BB243D837F804F20932B66A8C02B00456D31D1B58E1E25EF7CE03A9"
#define ST_OLD "547fa21dcfac18668972bbd38f5ad5720cd289eec5c860106b67788af87707e2"

typedef struct st_case {
  const char *name;
  webhook_bytes secret, header, body;
  int64_t now, tolerance;
  const char *err;
} st_case;

static void test_stripe(void **state) {
  (void)state;
  const int64_t tol = WEBHOOK_TOLERANCE_DEFAULT;
  const st_case cases[] = {
      {"openssl vector", B(ST_SECRET), B("t=1700000000,v1=" ST_HEX), B(ST_BODY), ST_NOW, tol, NULL},
      {"uppercase hex", B(ST_SECRET), B("t=1700000000,v1=" ST_HEX_UPPER), B(ST_BODY), ST_NOW, tol, NULL},
      {"v1 before t, v0 after", B(ST_SECRET), B("v1=" ST_HEX ",t=1700000000,v0=00"), B(ST_BODY), ST_NOW, tol, NULL},
      {"only the second v1 valid (rotation)", B(ST_SECRET), B("t=1700000000,v1=" ST_OLD ",v1=" ST_HEX), B(ST_BODY),
       ST_NOW, tol, NULL},
      {"old secret's signature alone", B(ST_SECRET), B("t=1700000000,v1=" ST_OLD), B(ST_BODY), ST_NOW, tol,
       "signature does not match"},
      {"the old secret still verifies its own", B("old-rotated-secret"), B("t=1700000000,v1=" ST_OLD), B(ST_BODY),
       ST_NOW, tol, NULL},
      {"valid signature as v0 only", B(ST_SECRET), B("t=1700000000,v0=" ST_HEX), B(ST_BODY), ST_NOW, tol,
       "Stripe-Signature has no v1 signature"},
      {"wrong secret", B("stripe-test-secreT"), B("t=1700000000,v1=" ST_HEX), B(ST_BODY), ST_NOW, tol,
       "signature does not match"},
      {"body changed by one byte", B(ST_SECRET), B("t=1700000000,v1=" ST_HEX),
       B("{\"id\":\"evt_2\",\"object\":\"event\"}"), ST_NOW, tol, "signature does not match"},
      {"body with trailing newline", B(ST_SECRET), B("t=1700000000,v1=" ST_HEX), B(ST_BODY "\n"), ST_NOW, tol,
       "signature does not match"},
      {"NUL byte appended to the body", B(ST_SECRET), B("t=1700000000,v1=" ST_HEX), B(ST_BODY "\0"), ST_NOW, tol,
       "signature does not match"},
      {"truncated hex", B(ST_SECRET),
       B("t=1700000000,v1=2d7b760a2bb243d837f804f20932b66a8c02b00456d31d1b58e1e25ef7ce03a"), B(ST_BODY), ST_NOW, tol,
       "signature does not match"},
      {"non-hex character", B(ST_SECRET),
       B("t=1700000000,v1=2d7b760a2bb243d837f804f20932b66a8c02b00456d31d1b58e1e25ef7ce03aZ"), B(ST_BODY), ST_NOW, tol,
       "signature does not match"},
      {"another timestamp", B(ST_SECRET), B("t=1700000001,v1=" ST_HEX), B(ST_BODY), ST_NOW, tol,
       "signature does not match"},
      {"3600 s old", B(ST_SECRET), B("t=1700000000,v1=" ST_HEX), B(ST_BODY), ST_NOW + 3600, tol,
       "Stripe-Signature t= is 3600 s old, more than the tolerance of 300 s"},
      {"301 s in the future", B(ST_SECRET), B("t=1700000000,v1=" ST_HEX), B(ST_BODY), ST_NOW - 301, tol,
       "Stripe-Signature t= is 301 s in the future, more than the tolerance of 300 s"},
      {"wider tolerance", B(ST_SECRET), B("t=1700000000,v1=" ST_HEX), B(ST_BODY), ST_NOW + 3600, 3600, NULL},
      {"timestamp not numeric", B(ST_SECRET), B("t=17000000x0,v1=" ST_HEX), B(ST_BODY), ST_NOW, tol,
       "Stripe-Signature t= is not a decimal unix time"},
      {"timestamp huge", B(ST_SECRET), B("t=1700000000000000000000,v1=" ST_HEX), B(ST_BODY), ST_NOW, tol,
       "Stripe-Signature t= has more than 12 digits"},
      {"two t=", B(ST_SECRET), B("t=1700000000,t=1700000000,v1=" ST_HEX), B(ST_BODY), ST_NOW, tol,
       "Stripe-Signature has more than one t="},
      {"no t=", B(ST_SECRET), B("v1=" ST_HEX), B(ST_BODY), ST_NOW, tol, "Stripe-Signature has no t= timestamp"},
      {"no v1=", B(ST_SECRET), B("t=1700000000"), B(ST_BODY), ST_NOW, tol, "Stripe-Signature has no v1 signature"},
      {"empty header", B(ST_SECRET), B(""), B(ST_BODY), ST_NOW, tol, "Stripe-Signature is empty"},
      {"missing header", B(ST_SECRET), MISSING, B(ST_BODY), ST_NOW, tol, "Stripe-Signature is missing"},
      {"empty secret", B(""), B("t=1700000000,v1=" ST_HEX), B(ST_BODY), ST_NOW, tol, "secret is empty"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char err[256] = "";
    const st_case *c = &cases[i];
    expect(c->name, webhook_verify_stripe(c->secret, c->header, c->body, c->now, c->tolerance, err, sizeof err), err,
           c->err);
  }
}

/* -------------------------------------------------------------- Bearer --- */

typedef struct br_case {
  const char *name;
  webhook_bytes expected, auth;
  const char *err;
} br_case;

static void test_bearer(void **state) {
  (void)state;
  const br_case cases[] = {
      {"matching token", B("tok-123"), B("Bearer tok-123"), NULL},
      {"scheme in another case", B("tok-123"), B("bearer tok-123"), NULL},
      {"token with a NUL byte",
       B("tok\0"
         "123"),
       B("Bearer tok\0"
         "123"),
       NULL},
      {"token cut at the NUL",
       B("tok\0"
         "123"),
       B("Bearer tok"), "bearer token does not match"},
      {"wrong token", B("tok-123"), B("Bearer tok-124"), "bearer token does not match"},
      {"prefix of the token", B("tok-123"), B("Bearer tok-12"), "bearer token does not match"},
      {"token with more after it", B("tok-123"), B("Bearer tok-1234"), "bearer token does not match"},
      {"trailing newline", B("tok-123"), B("Bearer tok-123\n"), "bearer token does not match"},
      {"Basic scheme", B("tok-123"), B("Basic dG9rLTEyMw=="), "Authorization is not a Bearer token"},
      {"token without scheme", B("tok-123"), B("tok-123"), "Authorization is not a Bearer token"},
      {"Bearer and nothing", B("tok-123"), B("Bearer "), "Authorization has an empty Bearer token"},
      {"empty header", B("tok-123"), B(""), "Authorization is not a Bearer token"},
      {"missing header", B("tok-123"), MISSING, "Authorization is missing"},
      {"no expected token", B(""), B("Bearer "), "expected token is empty"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char err[256] = "";
    const br_case *c = &cases[i];
    expect(c->name, webhook_verify_bearer(c->expected, c->auth, err, sizeof err), err, c->err);
  }
}

/* ----------------------------------------------------------------- Lua --- */

/* The binding as actvm.c registers it: true, or false and the message; nil
 * headers missing; bodies with NUL bytes; the default tolerance. */
static void test_lua_binding(void **state) {
  (void)state;
  static const char chunk[] =
      "local v = require 'webhook.verify'\n"
      "local function no(want, ok, err)\n"
      "  assert(ok == false, 'expected false, got ' .. tostring(ok))\n"
      "  assert(type(err) == 'string' and err:find(want, 1, true), tostring(err))\n"
      "end\n"
      "assert(v.github(\"It's a Secret to Everybody\", "
      "'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17', 'Hello, World!') == true)\n"
      "assert(select('#', v.github(\"It's a Secret to Everybody\", "
      "'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17', 'Hello, World!')) == 1)\n"
      "assert(v.github(\"It's a Secret to Everybody\", "
      "'sha256=42125d1b3f19222538fab5c4107cfb8e0c46b370a675a45cc91be934baa1fe02', 'Hello,\\0World!') == true)\n"
      "no('signature does not match', v.github(\"It's a Secret to Everybody\", "
      "'sha256=42125d1b3f19222538fab5c4107cfb8e0c46b370a675a45cc91be934baa1fe02', 'Hello,'))\n"
      "no('X-Hub-Signature-256 is missing', v.github('s', nil, 'body'))\n"
      "local sw = {'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', '1614265330',\n"
      "  'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=', '{\"test\": 2432232314}'}\n"
      "assert(v.standard(sw[1], sw[2], sw[3], sw[4], sw[5], 1614265330) == true)\n"
      "assert(v.standard(sw[1], sw[2], sw[3], sw[4], sw[5], 1614265630) == true)\n"
      "no('is 301 s old, more than the tolerance of 300 s', v.standard(sw[1], sw[2], sw[3], sw[4], sw[5], "
      "1614265631))\n"
      "assert(v.standard(sw[1], sw[2], sw[3], sw[4], sw[5], 1614265631, 301) == true)\n"
      "no('webhook-id is missing', v.standard(sw[1], nil, sw[3], sw[4], sw[5], 1614265330))\n"
      "no('webhook-signature is missing', v.standard(sw[1], sw[2], sw[3], nil, sw[5], 1614265330))\n"
      "local st = 't=1700000000,v1=2d7b760a2bb243d837f804f20932b66a8c02b00456d31d1b58e1e25ef7ce03a9'\n"
      "local sb = '{\"id\":\"evt_1\",\"object\":\"event\"}'\n"
      "assert(v.stripe('stripe-test-secret', st, sb, 1700000000) == true)\n"
      "no('t= is 301 s old', v.stripe('stripe-test-secret', st, sb, 1700000301))\n"
      "no('Stripe-Signature is missing', v.stripe('stripe-test-secret', nil, sb, 1700000000))\n"
      "assert(v.bearer('tok', 'Bearer tok') == true)\n"
      "no('bearer token does not match', v.bearer('tok', 'Bearer tok2'))\n"
      "no('Authorization is missing', v.bearer('tok', nil))\n"
      "assert(not pcall(v.github, nil, 'sha256=', 'b'), 'a nil secret is a programming error')\n"
      "assert(not pcall(v.standard, sw[1], sw[2], sw[3], sw[4], sw[5]), 'now is required')\n"
      "return 'done'\n";
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "webhook.verify", luaopen_engine_webhook_verify, 0);
  lua_pop(L, 1);
  if (luaL_loadbuffer(L, chunk, sizeof chunk - 1, "=webhook_verify_binding") != LUA_OK ||
      lua_pcall(L, 0, 1, 0) != LUA_OK)
    fail_msg("Lua: %s", lua_tostring(L, -1));
  assert_string_equal(lua_tostring(L, -1), "done");
  lua_close(L);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_github), cmocka_unit_test(test_standard),    cmocka_unit_test(test_stripe),
      cmocka_unit_test(test_bearer), cmocka_unit_test(test_lua_binding),
  };
  return cmocka_run_group_tests_name("unit_webhook_verify", tests, NULL, NULL);
}
