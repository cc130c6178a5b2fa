/* trace_ids: W3C traceparent parsing and formatting, and span ids derived
 * from a workflow's id, run and seq (trace_ids.h says why). */
#include "trace_ids.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int trace_hex_valid(const char *s, size_t len) {
  int nonzero = 0;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
    if (c != '0') nonzero = 1;
  }
  return nonzero;
}

static int hex_val(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

int traceparent_parse(const char *s, trace_ctx *out, char *err, size_t errlen) {
  if (!s) {
    snprintf(err, errlen, "no traceparent");
    return 0;
  }
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
  /* version(2) - trace id(32) - parent id(16) - flags(2) */
  if (n < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-') {
    snprintf(err, errlen, "traceparent is not version-traceid-parentid-flags (55 characters)");
    return 0;
  }
  char ver[3] = {s[0], s[1], 0};
  if (!trace_hex_valid(ver, 2) && strcmp(ver, "00") != 0) {
    snprintf(err, errlen, "traceparent's version is not two lowercase hex digits");
    return 0;
  }
  if (strcmp(ver, "ff") == 0) {
    snprintf(err, errlen, "traceparent version ff is invalid");
    return 0;
  }
  /* version 00 has exactly 55 characters; a later one may add "-..." */
  if ((strcmp(ver, "00") == 0 && n != 55) || (strcmp(ver, "00") != 0 && n > 55 && s[55] != '-')) {
    snprintf(err, errlen, "traceparent has characters after its flags");
    return 0;
  }
  if (!trace_hex_valid(s + 3, 32)) {
    snprintf(err, errlen, "traceparent's trace id is not 32 lowercase hex digits, not all zero");
    return 0;
  }
  if (!trace_hex_valid(s + 36, 16)) {
    snprintf(err, errlen, "traceparent's parent id is not 16 lowercase hex digits, not all zero");
    return 0;
  }
  char fl[3] = {s[53], s[54], 0};
  if (!trace_hex_valid(fl, 2) && strcmp(fl, "00") != 0) {
    snprintf(err, errlen, "traceparent's flags are not two lowercase hex digits");
    return 0;
  }
  memcpy(out->trace_id, s + 3, 32);
  out->trace_id[32] = 0;
  memcpy(out->span_id, s + 36, 16);
  out->span_id[16] = 0;
  out->sampled = (hex_val(fl[1]) & 1) != 0;
  return 1;
}

void traceparent_format(const char *trace_id, const char *span_id, int sampled, char *out) {
  snprintf(out, TRACEPARENT_LEN, "00-%.32s-%.16s-%s", trace_id, span_id, sampled ? "01" : "00");
}

/* the first len hex digits of SHA-256(text), never all zero (the spec's
 * invalid id): a zero hash prefix, as unlikely as it is, takes a 1 last */
static void derive(const char *text, size_t len, char *out) {
  char hex[65];
  util_sha256_hex(text, strlen(text), hex);
  memcpy(out, hex, len);
  out[len] = 0;
  if (!trace_hex_valid(out, len)) out[len - 1] = '1';
}

void trace_id_of_workflow(const char *workflow_id, char out[TRACE_ID_HEX]) {
  char *text = util_fmt("engine trace\n%s", workflow_id);
  derive(text, 32, out);
  free(text);
}

void span_id_of_step(const char *workflow_id, int64_t run, int64_t seq, const char *kind, char out[SPAN_ID_HEX]) {
  char *text = util_fmt("engine span\n%s\n%" PRId64 "\n%" PRId64 "\n%s", workflow_id, run, seq, kind);
  derive(text, 16, out);
  free(text);
}
