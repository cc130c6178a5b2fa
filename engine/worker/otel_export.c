/* otel_export: see otel_export.h. The batch span processor and the OTLP/HTTP
 * exporter of an SDK in one, on the loop:
 *
 *   queue   a ring of span objects (JSON text, copied), OTEL_BSP_MAX_QUEUE_SIZE
 *           at most; a span that finds it full is dropped and counted
 *   batch   the oldest spans, OTEL_BSP_MAX_EXPORT_BATCH_SIZE at most, leave
 *           when there are that many or OTEL_BSP_SCHEDULE_DELAY after the
 *           oldest was queued; one export in flight at a time
 *   export  one POST of an ExportTraceServiceRequest in OTLP's JSON encoding;
 *           2xx is done (partialSuccess.rejectedSpans counted), 429, 502,
 *           503, 504 and a failed connection or a timeout are tried again
 *           after an exponential backoff with jitter, or after Retry-After,
 *           while the batch's time (OTEL_BSP_EXPORT_TIMEOUT) lasts; any other
 *           answer drops the batch (protocol/exporter.md, and OTLP's
 *           "Failures" for OTLP/HTTP)
 *
 * Nothing waits: a collector that never answers only keeps one batch in
 * flight until its time runs out, while the queue fills and its drops are
 * counted. Drops are logged at most once a minute. */
#include "otel_export.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "json.h"
#include "log.h"
#include "otel_config.h"
#include "util.h"

/* The backoff before the first retry, doubled each time up to the cap; the
 * wait is drawn from its upper half (jitter), so exporters that failed
 * together do not come back together. */
#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS 16000
/* Drops are logged at most this often; the others are counted in the next line. */
#define REPORT_EVERY_MS 60000
/* A collector's answer at most (the spec's default Max Response Size). */
#define RESPONSE_MAX_BYTES ((size_t)4 << 20)
/* How much of a refusal's body the log shows. */
#define BODY_SHOWN 200

typedef struct queued {
  char *json;
  size_t len;
  uint64_t at; /* loop time it was queued */
} queued;

struct otel_exporter {
  uv_loop_t *loop;
  http_ctx *http;
  int own_http;
  otel_config cfg;
  char *prefix; /* the request's JSON up to the spans: resource and scope */
  /* the queue: ring[(head + i) % max_queue], i < len */
  queued *ring;
  size_t head, len;
  /* the batch being exported (batch_n 0: none) */
  ubuf body;
  size_t batch_n;
  int attempts;
  uint64_t deadline; /* loop time its export must end by; 0: no limit */
  http_call *call;   /* the request in flight, or NULL while it waits for a retry */
  int retry_pending;
  /* batch_timer: the next batch is due; retry_timer: a retry; flush_timer: a flush's bound */
  uv_timer_t batch_timer, retry_timer, flush_timer;
  int open_handles; /* freed when the last of them is closed */
  /* otel_exporter_flush */
  int flushing;
  void (*flush_done)(void *ud);
  void *flush_ud;
  uint64_t flush_deadline; /* 0: none */
  otel_stats st;
  /* the log's rate of drop reports */
  int reported;
  int64_t reported_at;
  uint64_t unreported; /* spans dropped or rejected since, not told */
};

static void send_batch(otel_exporter *x);

/* ------------------------------------------------------------ report --- */

/* A warning about spans lost (n of them), at most once a minute: what
 * happened in between is added up in the next one. */
static void report(otel_exporter *x, uint64_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(otel_exporter *x, uint64_t n, const char *fmt, ...) {
  int64_t now = util_mono_ms();
  if (x->reported && now - x->reported_at < REPORT_EVERY_MS) {
    x->unreported += n;
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  char *msg = util_vfmt(fmt, ap);
  va_end(ap);
  if (x->unreported)
    log_msg(LOGL_WARNING, "tracing: %s (and %llu more spans lost since the last report; counted on /metrics)", msg,
            (unsigned long long)x->unreported);
  else
    log_msg(LOGL_WARNING, "tracing: %s (at most one report a minute; counted on /metrics)", msg);
  free(msg);
  x->reported = 1;
  x->reported_at = now;
  x->unreported = 0;
}

/* ----------------------------------------------------------- batches --- */

static uint64_t now_ms(const otel_exporter *x) { return uv_now(x->loop); }

/* The loop time the batch in flight must be done by (its own time, and a
 * flush's bound), 0 for none. */
static uint64_t batch_deadline(const otel_exporter *x) {
  uint64_t d = x->deadline;
  if (x->flushing && x->flush_deadline && (!d || x->flush_deadline < d)) d = x->flush_deadline;
  return d;
}

/* The batch timer fires after ms (0: on the loop's next turn). */
static void arm(otel_exporter *x, uint64_t ms);

/* What follows the end of a batch, or a span queued while none is in
 * flight: the next batch now when one is full (or a flush is on), at the
 * oldest span's delay otherwise. */
static void schedule(otel_exporter *x) {
  if (x->batch_n) return; /* its end schedules again */
  if (x->flushing || x->len >= x->cfg.max_batch) {
    arm(x, 0);
  } else if (x->len) {
    uint64_t due = x->ring[x->head].at + (uint64_t)x->cfg.schedule_delay_ms, now = now_ms(x);
    arm(x, due > now ? due - now : 0);
  } else {
    uv_timer_stop(&x->batch_timer);
  }
}

static void end_batch(otel_exporter *x) {
  ubuf_free(&x->body);
  x->batch_n = 0;
  x->attempts = 0;
  x->deadline = 0;
  schedule(x);
}

/* The batch is given up on: its spans are lost. */
static void give_up(otel_exporter *x, const char *why) {
  x->st.exports_failed++;
  x->st.spans_dropped_export += x->batch_n;
  report(x, x->batch_n, "dropped a batch of %zu spans for %s: %s", x->batch_n, x->cfg.url_shown, why);
  end_batch(x);
}

/* The oldest spans, a batch at most, into one request's body; sent. */
static void start_batch(otel_exporter *x) {
  size_t n = x->len < x->cfg.max_batch ? x->len : x->cfg.max_batch;
  if (!n) return;
  ubuf_add(&x->body, x->prefix, strlen(x->prefix));
  for (size_t i = 0; i < n; i++) {
    queued *q = &x->ring[x->head];
    if (i) ubuf_add(&x->body, ",", 1);
    ubuf_add(&x->body, q->json, q->len);
    free(q->json);
    q->json = NULL;
    x->head = (x->head + 1) % x->cfg.max_queue;
    x->len--;
  }
  static const char SUFFIX[] = "]}]}]}";
  ubuf_add(&x->body, SUFFIX, sizeof SUFFIX - 1);
  x->batch_n = n;
  x->attempts = 0;
  x->deadline = x->cfg.export_timeout_ms ? now_ms(x) + (uint64_t)x->cfg.export_timeout_ms : 0;
  send_batch(x);
}

static void flush_finished(otel_exporter *x) {
  if (!x->flush_done) return;
  void (*done)(void *) = x->flush_done;
  x->flush_done = NULL;
  uv_timer_stop(&x->flush_timer);
  done(x->flush_ud);
}

static void on_batch_due(uv_timer_t *t) {
  otel_exporter *x = t->data;
  if (x->batch_n) return;
  if (x->len) start_batch(x);
  else if (x->flushing) flush_finished(x);
}

static void arm(otel_exporter *x, uint64_t ms) { uv_timer_start(&x->batch_timer, on_batch_due, ms, 0); }

/* ------------------------------------------------------------- export --- */

/* A Retry-After value in ms: delay-seconds, or an HTTP-date (IMF-fixdate,
 * or the obsolete RFC 850 and asctime forms RFC 9110 asks a recipient to
 * read); -1 when it is neither. */
static int64_t parse_retry_after(const char *v) {
  while (*v == ' ' || *v == '\t') v++;
  if (*v >= '0' && *v <= '9') {
    char *end;
    unsigned long long s = strtoull(v, &end, 10);
    while (*end == ' ' || *end == '\t') end++;
    if (*end) return -1;
    return s > 86400 ? 86400000 : (int64_t)s * 1000; /* a day is "never" within any export's time */
  }
  static const char MONTHS[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
  int day = 0, year = 0, hh = 0, mm = 0, ss = 0, n = 0;
  char mon[4] = "";
  if (sscanf(v, "%*[A-Za-z], %d %3s %d %d:%d:%d GMT%n", &day, mon, &year, &hh, &mm, &ss, &n) == 6 && n) {
  } else if (n = 0, sscanf(v, "%*[A-Za-z], %d-%3s-%d %d:%d:%d GMT%n", &day, mon, &year, &hh, &mm, &ss, &n) == 6 && n) {
    if (year < 100) year += year < 70 ? 2000 : 1900;
  } else if (n = 0, sscanf(v, "%*3s %3s %d %d:%d:%d %d%n", mon, &day, &hh, &mm, &ss, &year, &n) == 6 && n) {
  } else {
    return -1;
  }
  const char *m = strlen(mon) == 3 ? strstr(MONTHS, mon) : NULL;
  if (!m || (m - MONTHS) % 3 || day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 60 || year < 1970 || year > 9999)
    return -1;
  struct tm tm = {0};
  tm.tm_year = year - 1900;
  tm.tm_mon = (int)((m - MONTHS) / 3);
  tm.tm_mday = day;
  tm.tm_hour = hh;
  tm.tm_min = mm;
  tm.tm_sec = ss;
  time_t at = timegm(&tm), now = time(NULL);
  return at <= now ? 0 : at - now > 86400 ? 86400000 : (int64_t)(at - now) * 1000;
}

static int64_t retry_after(const http_call *c) {
  for (size_t i = 0; i < http_header_count(c); i++) {
    const char *name, *value;
    http_header_at(c, i, &name, &value); /* names are lower case */
    if (strcmp(name, "retry-after") == 0) return parse_retry_after(value);
  }
  return -1;
}

/* partialSuccess.rejectedSpans of a 2xx answer's body (an int64: a string
 * in proto3's JSON, a number from some servers), and its errorMessage
 * into msg; 0 when there is none. */
static uint64_t rejected_spans(const char *body, size_t n, char *msg, size_t msglen) {
  const char *ps, *v;
  size_t psn, vn;
  *msg = 0;
  if (!n || (json_get(body, n, "partialSuccess", &ps, &psn) != 1 &&
             json_get(body, n, "partial_success", &ps, &psn) != 1))
    return 0;
  int64_t r = 0;
  if (json_get(ps, psn, "rejectedSpans", &v, &vn) == 1 || json_get(ps, psn, "rejected_spans", &v, &vn) == 1) {
    char *s = *v == '"' ? json_string(v, vn) : NULL;
    if (s) r = strtoll(s, NULL, 10);
    else if (json_int(v, vn, &r) != 0) r = 0;
    free(s);
  }
  char *m = json_get_string(ps, psn, "errorMessage");
  if (!m) m = json_get_string(ps, psn, "error_message");
  if (m) snprintf(msg, msglen, "%s", m);
  free(m);
  return r > 0 ? (uint64_t)r : 0;
}

/* The wait before retry number `attempts` (from 1): exponential, capped,
 * drawn from its upper half. */
static uint64_t backoff_ms(int attempts) {
  uint64_t b = BACKOFF_FIRST_MS;
  for (int i = 1; i < attempts && b < BACKOFF_MAX_MS; i++) b *= 2;
  if (b > BACKOFF_MAX_MS) b = BACKOFF_MAX_MS;
  return b / 2 + util_random64() % (b / 2 + 1);
}

static void on_retry(uv_timer_t *t) {
  otel_exporter *x = t->data;
  x->retry_pending = 0;
  send_batch(x);
}

/* A transient failure: the batch goes again after after_ms (a
 * Retry-After), or the backoff (after_ms < 0), if that is within its time. */
static void retry(otel_exporter *x, int64_t after_ms, const char *why) {
  uint64_t wait = after_ms >= 0 ? (uint64_t)after_ms : backoff_ms(x->attempts), end = batch_deadline(x);
  if (end && now_ms(x) + wait >= end) {
    char *msg = util_fmt("%s, %d attempts, and no time left for another (OTEL_BSP_EXPORT_TIMEOUT)", why, x->attempts);
    give_up(x, msg);
    free(msg);
    return;
  }
  x->st.export_retries++;
  x->retry_pending = 1;
  uv_timer_start(&x->retry_timer, on_retry, wait, 0);
}

/* The answer to the batch's request (http.h's on_event: read when done). */
static void on_response(void *ud) {
  otel_exporter *x = ud;
  http_call *c = x->call;
  if (!c || !http_done(c)) return;
  const char *errmsg;
  int err = http_error(c, &errmsg);
  long status = http_status(c);
  int answered = err == HTTP_OK || (err == HTTP_ETOOLARGE && http_headers_done(c)); /* its status stands */
  int64_t after = retry_after(c);
  size_t n;
  const char *body = http_take(c, &n);
  char why[512], partial[256], shown[BODY_SHOWN + 1];
  snprintf(why, sizeof why, "%s", answered ? "" : errmsg);
  uint64_t rejected = answered && status >= 200 && status < 300 ? rejected_spans(body, n, partial, sizeof partial) : 0;
  snprintf(shown, sizeof shown, "%.*s", (int)(n < BODY_SHOWN ? n : BODY_SHOWN), body ? body : "");
  http_release(c);
  x->call = NULL;
  if (!answered) {
    retry(x, -1, why); /* no connection, a timeout, a broken transfer */
  } else if (status >= 200 && status < 300) {
    if (rejected > x->batch_n) rejected = x->batch_n;
    x->st.exports_ok++;
    x->st.spans_exported += x->batch_n - rejected;
    x->st.spans_rejected += rejected;
    if (rejected) report(x, rejected, "the collector at %s rejected %llu of %zu spans: %s", x->cfg.url_shown,
                         (unsigned long long)rejected, x->batch_n, *partial ? partial : "(no message)");
    end_batch(x);
  } else if (status == 429 || status == 502 || status == 503 || status == 504) {
    char msg[64];
    snprintf(msg, sizeof msg, "HTTP %ld", status);
    retry(x, after, msg);
  } else {
    char *msg = util_fmt("the collector answered HTTP %ld%s%s", status, *shown ? ": " : "", shown);
    give_up(x, msg);
    free(msg);
  }
}

/* Sends the batch (again), within its time. */
static void send_batch(otel_exporter *x) {
  long timeout = x->cfg.timeout_ms; /* 0: none */
  uint64_t end = batch_deadline(x), now = now_ms(x);
  if (end) {
    if (now >= end) {
      give_up(x, "its time (OTEL_BSP_EXPORT_TIMEOUT) ran out");
      return;
    }
    if (!timeout || end - now < (uint64_t)timeout) timeout = (long)(end - now);
  }
  http_req r = {0};
  r.method = "POST";
  r.url = x->cfg.url;
  r.headers = (const char *const *)x->cfg.headers;
  r.nheaders = x->cfg.nheaders;
  r.body = x->body.p;
  r.body_len = x->body.n;
  r.timeout_ms = timeout;
  r.connect_timeout_ms = timeout && timeout < 10000 ? timeout : 0;
  r.max_bytes = RESPONSE_MAX_BYTES;
  char err[256];
  x->attempts++;
  x->call = http_start(x->http, &r, on_response, x, err, sizeof err);
  if (!x->call) give_up(x, err);
}

/* ---------------------------------------------------------------- api --- */

int otel_config_check(char *err, size_t errlen) {
  otel_config c;
  int rc = otel_config_read(&c, err, errlen);
  if (rc > 0) otel_config_free(&c);
  return rc < 0 ? -1 : 0;
}

static void on_closed(uv_handle_t *h) {
  otel_exporter *x = h->data;
  if (--x->open_handles == 0) free(x);
}

otel_exporter *otel_exporter_new(uv_loop_t *loop, struct http_ctx *http, char *err, size_t errlen) {
  if (errlen) *err = 0;
  otel_config cfg;
  if (otel_config_read(&cfg, err, errlen) <= 0) return NULL;
  otel_exporter *x = util_xcalloc(1, sizeof *x);
  x->loop = loop;
  x->cfg = cfg;
  x->ring = util_xcalloc(cfg.max_queue, sizeof *x->ring);
  char *version = json_quote(cfg.version);
  x->prefix = util_fmt("{\"resourceSpans\":[{\"resource\":{\"attributes\":%s},\"scopeSpans\":[{\"scope\":{\"name\":"
                       "\"engine\",\"version\":%s},\"spans\":[",
                       cfg.resource, version);
  free(version);
  x->batch_timer.data = x->retry_timer.data = x->flush_timer.data = x;
  uv_timer_init(loop, &x->batch_timer); /* cannot fail: no system resource behind a timer */
  uv_timer_init(loop, &x->retry_timer);
  uv_timer_init(loop, &x->flush_timer);
  x->open_handles = 3;
  x->http = http;
  if (!x->http) {
    char why[256];
    x->http = http_new(loop, why, sizeof why);
    if (!x->http) {
      util_seterr(err, errlen, "tracing: %s", why);
      otel_exporter_free(x);
      return NULL;
    }
    x->own_http = 1;
  }
  return x;
}

int otel_sampled(const otel_exporter *x, const char *trace_id_hex, int parent_sampled) {
  if (!x) return 0;
  if (x->cfg.parent_based && parent_sampled >= 0) return parent_sampled > 0;
  if (x->cfg.root != OTEL_ROOT_RATIO) return x->cfg.root == OTEL_ROOT_ALWAYS_ON;
  /* R: the trace id's rightmost 56 bits (14 hex digits) */
  if (!trace_id_hex || strlen(trace_id_hex) != 32) return 0;
  uint64_t r = 0;
  for (const char *p = trace_id_hex + 18; *p; p++) {
    int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
            : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10 : -1;
    if (d < 0) return 0;
    r = r << 4 | (uint64_t)d;
  }
  return r >= x->cfg.threshold;
}

void otel_export_span(otel_exporter *x, const char *span_json, size_t len) {
  if (!x) return;
  const char *s = span_json, *end = span_json + len, *after = NULL;
  while (s < end && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) s++;
  if (s < end && *s == '{') after = json_skip(s, end);
  while (after && after < end && (*after == ' ' || *after == '\t' || *after == '\n' || *after == '\r')) after++;
  if (after != end) { /* one broken span would spoil its whole batch (a 400) */
    x->st.spans_dropped_invalid++;
    report(x, 1, "dropped a span that is not one JSON object (a bug of the engine's: please report it)");
    return;
  }
  if (x->len == x->cfg.max_queue) {
    x->st.spans_dropped_queue_full++;
    report(x, 1, "the span queue is full (%zu, OTEL_BSP_MAX_QUEUE_SIZE; %s is slow or away): dropping new spans",
           x->cfg.max_queue, x->cfg.url_shown);
    return;
  }
  queued *q = &x->ring[(x->head + x->len) % x->cfg.max_queue];
  q->json = util_xmalloc((size_t)(end - s));
  memcpy(q->json, s, (size_t)(end - s));
  q->len = (size_t)(end - s);
  q->at = now_ms(x);
  x->len++;
  x->st.spans_queued++;
  /* the first span of a batch arms its delay; a full batch goes at once */
  if (!x->batch_n && (x->len == 1 || x->len >= x->cfg.max_batch)) schedule(x);
}

static void on_flush_bound(uv_timer_t *t) {
  otel_exporter *x = t->data;
  if (x->call) http_release(x->call);
  x->call = NULL;
  uv_timer_stop(&x->retry_timer);
  x->retry_pending = 0;
  size_t lost = x->batch_n + x->len;
  if (x->batch_n) x->st.exports_failed++;
  x->st.spans_dropped_export += lost;
  for (; x->len; x->len--, x->head = (x->head + 1) % x->cfg.max_queue) {
    free(x->ring[x->head].json);
    x->ring[x->head].json = NULL;
  }
  ubuf_free(&x->body);
  x->batch_n = 0;
  if (lost) report(x, lost, "stopping: %zu spans not sent to %s within OTEL_BSP_EXPORT_TIMEOUT", lost, x->cfg.url_shown);
  flush_finished(x);
}

void otel_exporter_flush(otel_exporter *x, void (*done)(void *ud), void *ud) {
  x->flushing = 1;
  x->flush_done = done;
  x->flush_ud = ud;
  if (x->cfg.export_timeout_ms) {
    x->flush_deadline = now_ms(x) + (uint64_t)x->cfg.export_timeout_ms;
    uv_timer_start(&x->flush_timer, on_flush_bound, (uint64_t)x->cfg.export_timeout_ms, 0);
  }
  if (!x->batch_n) arm(x, 0); /* sends what is queued, or tells done: from the loop either way */
}

void otel_exporter_free(otel_exporter *x) {
  if (!x) return;
  if (x->call) http_release(x->call);
  x->call = NULL;
  if (x->own_http) http_free(x->http);
  for (; x->len; x->len--, x->head = (x->head + 1) % x->cfg.max_queue) free(x->ring[x->head].json);
  free(x->ring);
  ubuf_free(&x->body);
  free(x->prefix);
  otel_config_free(&x->cfg);
  uv_close((uv_handle_t *)&x->batch_timer, on_closed);
  uv_close((uv_handle_t *)&x->retry_timer, on_closed);
  uv_close((uv_handle_t *)&x->flush_timer, on_closed);
}

void otel_exporter_stats(const otel_exporter *x, otel_stats *out) {
  memset(out, 0, sizeof *out);
  if (!x) return;
  *out = x->st;
  out->queue_len = x->len;
  out->in_flight = x->batch_n;
}
