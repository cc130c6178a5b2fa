/* trace_start: what a start records of its caller's trace, and the trace of
 * a run (trace_start.h says why). tracestate follows the W3C Trace Context
 * grammar (Level 1, section 3.3). */
#include "trace_start.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

#define TRACESTATE_MEMBERS_MAX 32

static int is_lcalpha(char c) { return c >= 'a' && c <= 'z'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_key_char(char c) { return is_lcalpha(c) || is_digit(c) || c == '_' || c == '-' || c == '*' || c == '/'; }
static int is_ows(char c) { return c == ' ' || c == '\t'; }

/* simple-key = lcalpha 0*255(keychar); multi-tenant-key = tenant-id "@"
 * system-id, tenant-id (lcalpha / DIGIT) 0*240(keychar), system-id lcalpha
 * 0*13(keychar) */
static int key_valid(const char *k, size_t n) {
  const char *at = memchr(k, '@', n);
  if (!at) {
    if (n < 1 || n > 256 || !is_lcalpha(k[0])) return 0;
    for (size_t i = 1; i < n; i++)
      if (!is_key_char(k[i])) return 0;
    return 1;
  }
  size_t tn = (size_t)(at - k), sn = n - tn - 1;
  if (tn < 1 || tn > 241 || !(is_lcalpha(k[0]) || is_digit(k[0]))) return 0;
  if (sn < 1 || sn > 14 || !is_lcalpha(at[1])) return 0;
  for (size_t i = 1; i < n; i++)
    if (i != tn && !is_key_char(k[i])) return 0;
  return 1;
}

/* value = 0*255(chr) nblk-chr: printable ASCII but "," and "=", spaces
 * inside only */
static int value_valid(const char *v, size_t n) {
  if (n < 1 || n > 256 || v[n - 1] == ' ') return 0;
  for (size_t i = 0; i < n; i++)
    if (v[i] < 0x20 || v[i] > 0x7e || v[i] == ',' || v[i] == '=') return 0;
  return 1;
}

int tracestate_normalize(const char *tracestate, char *out, size_t outlen, char *why, size_t whylen) {
  struct {
    const char *p;
    size_t n;
  } keys[TRACESTATE_MEMBERS_MAX];
  size_t nkeys = 0, len = 0;
  const char *s = tracestate;
  for (;;) {
    const char *end = strchr(s, ',');
    if (!end) end = s + strlen(s);
    while (s < end && is_ows(*s)) s++;
    const char *e = end;
    while (e > s && is_ows(e[-1])) e--;
    if (e > s) { /* a member; an empty one is allowed and dropped */
      const char *eq = memchr(s, '=', (size_t)(e - s));
      if (!eq || !key_valid(s, (size_t)(eq - s)) || !value_valid(eq + 1, (size_t)(e - eq - 1))) {
        util_seterr(why, whylen, "tracestate member '%.*s' is not key=value as the W3C spec writes them",
                    (int)((e - s) > 60 ? 60 : (e - s)), s);
        return 0;
      }
      if (nkeys == TRACESTATE_MEMBERS_MAX) {
        util_seterr(why, whylen, "tracestate has more than %d members", TRACESTATE_MEMBERS_MAX);
        return 0;
      }
      for (size_t i = 0; i < nkeys; i++)
        if (keys[i].n == (size_t)(eq - s) && memcmp(keys[i].p, s, keys[i].n) == 0) {
          util_seterr(why, whylen, "tracestate names key '%.*s' twice", (int)keys[i].n, s);
          return 0;
        }
      keys[nkeys].p = s;
      keys[nkeys++].n = (size_t)(eq - s);
      size_t add = (size_t)(e - s) + (len ? 1 : 0);
      if (len + add >= outlen) {
        util_seterr(why, whylen, "tracestate is longer than %zu bytes", outlen - 1);
        return 0;
      }
      if (len) out[len++] = ',';
      memcpy(out + len, s, (size_t)(e - s));
      len += (size_t)(e - s);
    }
    if (!*end) break;
    s = end + 1;
  }
  out[len] = 0;
  return 1;
}

int trace_start_read(const char *traceparent, const char *tracestate, trace_start *out, char *why, size_t whylen,
                     char *note, size_t notelen) {
  memset(out, 0, sizeof *out);
  if (whylen) *why = 0;
  if (notelen) *note = 0;
  if (!traceparent) return 0;
  trace_ctx t;
  if (!traceparent_parse(traceparent, &t, why, whylen)) return 0;
  /* a later version's first four fields, handed on as version 00 */
  traceparent_format(t.trace_id, t.span_id, t.sampled, out->traceparent);
  if (tracestate && !tracestate_normalize(tracestate, out->tracestate, sizeof out->tracestate, note, notelen))
    out->tracestate[0] = 0;
  return 1;
}

char *trace_start_members(const trace_start *t) {
  if (!t || !t->traceparent[0]) return util_strdup("");
  char *qp = json_quote(t->traceparent);
  char *qs = t->tracestate[0] ? json_quote(t->tracestate) : NULL;
  char *out = qs ? util_fmt(",\"traceparent\":%s,\"tracestate\":%s", qp, qs) : util_fmt(",\"traceparent\":%s", qp);
  free(qp);
  free(qs);
  return out;
}

int trace_start_of_payload(const char *started_payload, trace_start *out) {
  memset(out, 0, sizeof *out);
  if (!started_payload) return 0;
  size_t n = strlen(started_payload);
  char *tp = json_get_string(started_payload, n, "traceparent");
  char *ts = tp ? json_get_string(started_payload, n, "tracestate") : NULL;
  char why[8], note[8];
  /* checked again: a payload is read as the log holds it, whoever wrote it */
  int ok = tp && trace_start_read(tp, ts, out, why, sizeof why, note, sizeof note);
  free(tp);
  free(ts);
  return ok;
}

int trace_of_start(const char *workflow_id, const trace_start *recorded, trace_ctx *out) {
  char why[8];
  if (recorded->traceparent[0] && traceparent_parse(recorded->traceparent, out, why, sizeof why)) return 1;
  trace_id_of_workflow(workflow_id, out->trace_id);
  out->span_id[0] = 0;
  out->sampled = -1;
  return 0;
}

int trace_of_run(const char *workflow_id, const char *started_payload, trace_ctx *out) {
  trace_start rec;
  trace_start_of_payload(started_payload, &rec);
  return trace_of_start(workflow_id, &rec, out);
}

void trace_step_parent(const trace_ctx *run_trace, const char *workflow_id, int64_t run, int64_t seq, const char *kind,
                       char *out) {
  char span[SPAN_ID_HEX];
  span_id_of_step(workflow_id, run, seq, kind, span);
  traceparent_format(run_trace->trace_id, span, run_trace->sampled != 0, out);
}

/* OTEL_PROPAGATORS is a comma-separated list: "tracecontext,baggage",
 * "none", ... */
static int names_tracecontext(const char *list) {
  const char *s = list;
  while (*s) {
    while (*s == ' ' || *s == ',') s++;
    size_t n = strcspn(s, ", ");
    if (n == 12 && strncmp(s, "tracecontext", 12) == 0) return 1;
    s += n;
  }
  return 0;
}

int trace_propagate_outgoing(void) {
  const char *traces = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), *all = getenv("OTEL_EXPORTER_OTLP_ENDPOINT");
  if (!(traces && *traces) && !(all && *all)) return 0;
  const char *propagators = getenv("OTEL_PROPAGATORS");
  return !propagators || !*propagators || names_tracecontext(propagators);
}
