/* webhook_verify: checks that a webhook delivery comes from who holds the
 * secret, for the HTTP handler of triggers (issue 11). Four schemes:
 *
 *   GitHub            X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>
 *   Standard Webhooks webhook-id, webhook-timestamp, webhook-signature
 *                     ("v1,<base64>" entries, space-separated), secret whsec_<base64>,
 *                     HMAC-SHA256 over "id.timestamp.body"
 *   Stripe-style      Stripe-Signature: t=<ts>,v1=<hex>[,v1=<hex>...], HMAC-SHA256
 *                     over "t.body"
 *   Bearer            Authorization: Bearer <token>
 *
 * Every check runs over the exact received bytes (a body may hold NUL bytes)
 * and compares MACs and digests in constant time (CRYPTO_memcmp). Each
 * function returns 0 when the delivery is valid, or -1 with err naming the
 * problem ("signature does not match", "X-Hub-Signature-256 is missing", ...).
 * A header the request lacks is a webhook_bytes with p == NULL.
 *
 * In Lua (activity VM only; trigger scripts never see secrets):
 *   local verify = require "webhook.verify"
 *   verify.github(secret, sig_header, body)
 *   verify.standard(secret, id, ts, sig_header, body, now, tolerance)
 *   verify.stripe(secret, header, body, now, tolerance)
 *   verify.bearer(expected, authorization_header)
 * each returns true, or false and the message; nil headers are missing ones,
 * tolerance defaults to WEBHOOK_TOLERANCE_DEFAULT. */
#ifndef ENGINE_WEBHOOK_VERIFY_H
#define ENGINE_WEBHOOK_VERIFY_H

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

/* Seconds a signed timestamp may lie before or after now. */
#define WEBHOOK_TOLERANCE_DEFAULT 300
/* Longest Standard Webhooks key, decoded (the spec's keys are 24 to 64 bytes). */
#define WEBHOOK_KEY_MAX 512

/* Bytes received or configured; p == NULL means absent (a missing header). */
typedef struct webhook_bytes {
  const char *p;
  size_t n;
} webhook_bytes;

/* Secret and sig_header as received; sig_header is X-Hub-Signature-256:
 * "sha256=" and 64 hex digits (either case). */
int webhook_verify_github(webhook_bytes secret, webhook_bytes sig_header, webhook_bytes body, char *err, size_t errlen);

/* secret is "whsec_<base64>" or bare base64 (padding optional, as the
 * reference libraries accept); ts is decimal unix seconds, within tolerance
 * of now either way; any one v1 entry of sig_header matching passes (key
 * rotation), entries of other versions (v1a, v2) are ignored. */
int webhook_verify_standard(webhook_bytes secret, webhook_bytes id, webhook_bytes ts, webhook_bytes sig_header,
                            webhook_bytes body, int64_t now, int64_t tolerance, char *err, size_t errlen);

/* header is "t=<ts>,v1=<hex>[,v1=<hex>...]" (other keys such as v0 ignored);
 * any v1 matching passes; t within tolerance of now either way. */
int webhook_verify_stripe(webhook_bytes secret, webhook_bytes header, webhook_bytes body, int64_t now,
                          int64_t tolerance, char *err, size_t errlen);

/* authorization is the Authorization header ("Bearer <token>", scheme in any
 * case); the token is compared with expected through their SHA-256 digests,
 * so neither the content nor the length of expected leaks through timing. */
int webhook_verify_bearer(webhook_bytes expected, webhook_bytes authorization, char *err, size_t errlen);

/* require "webhook.verify" (registered by actvm.c). */
int luaopen_engine_webhook_verify(lua_State *L);

#endif
