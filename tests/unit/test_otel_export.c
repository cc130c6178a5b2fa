/* Unit tests for engine/worker/otel_export.c and otel_config.c: the span
 * exporter on a real libuv loop against a real HTTP receiver over loopback
 * (otlp_receiver.py, a stand-in collector that records every export and
 * answers as a test plans): batches by size and by delay; the body is an
 * ExportTraceServiceRequest in OTLP's JSON with the resource, the service
 * name and the scope; the configured headers are sent; a 503 (and a 429
 * with an HTTP-date) with Retry-After is tried again and the spans are
 * exported once; a 400 drops its batch, counted, and the log says so once a
 * minute; a partial success's rejected spans are counted; an endpoint that
 * never answers leaves the loop running, fills the queue, counts the drops,
 * and a stop's flush ends within its bound; the samplers (always_off,
 * parentbased_*, traceidratio deterministic by trace id and monotonic in
 * the ratio); every bad variable's error, table-driven.
 *
 * Waits poll a state (the receiver's count of exports, the exporter's
 * counts) until a deadline scaled by TEST_TIMEOUT_SCALE; none sleeps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off: cmocka.h needs the headers above first */
#include <cmocka.h>
/* clang-format on */

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "http.h"
#include "json.h"
#include "otel_export.h"
#include "trace_ids.h"
#include "util.h"

extern char **environ;

/* ---------------------------------------------------------- harness --- */

typedef struct harness {
  uv_loop_t loop;
  http_ctx *ctl;     /* the test's own client, to plan and read the receiver */
  pid_t receiver;
  int port;
  uv_timer_t tick;   /* wakes the loop while a wait polls */
  int ticks;         /* how often tick fired: the loop kept running */
  otel_exporter *x;
} harness;

static harness H;

static double scale(void) {
  const char *s = getenv("TEST_TIMEOUT_SCALE");
  double v = s ? atof(s) : 1;
  return v > 0 ? v : 1;
}

/* Every OTEL_* variable unset, then the pairs of kv (NULL-terminated) set. */
static void set_env(const char *const *kv) {
  for (;;) {
    char name[256] = "";
    for (char **e = environ; *e; e++)
      if (strncmp(*e, "OTEL_", 5) == 0) {
        snprintf(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
        break;
      }
    if (!*name) break;
    unsetenv(name);
  }
  for (size_t i = 0; kv && kv[i]; i += 2) setenv(kv[i], kv[i + 1], 1);
}

/* The receiver's base URL plus path, malloc'd. */
static char *url(const char *path) { return util_fmt("http://127.0.0.1:%d%s", H.port, path); }

typedef struct ctl_call {
  http_call *call;
  int done;
} ctl_call;

static void on_ctl(void *ud) {
  ctl_call *c = ud;
  if (http_done(c->call)) c->done = 1;
}

/* One request to the receiver, its answer's body (malloc'd). */
static char *ctl(const char *method, const char *path, const char *body) {
  char *u = url(path), err[256];
  const char *headers[] = {"Content-Type: application/json"};
  http_req r = {.method = method, .url = u, .headers = headers, .nheaders = 1, .body = body,
                .body_len = body ? strlen(body) : 0, .timeout_ms = 10000};
  ctl_call c = {0};
  c.call = http_start(H.ctl, &r, on_ctl, &c, err, sizeof err);
  if (!c.call) fail_msg("cannot reach the receiver: %s", err);
  while (!c.done) uv_run(&H.loop, UV_RUN_ONCE);
  const char *msg;
  if (http_error(c.call, &msg) != HTTP_OK || http_status(c.call) != 200)
    fail_msg("the receiver answered %s %s with %ld: %s", method, path, http_status(c.call), msg);
  size_t n;
  const char *b = http_take(c.call, &n);
  char *out = util_fmt("%.*s", (int)n, b ? b : "");
  http_release(c.call);
  free(u);
  return out;
}

/* The receiver forgets its exports and follows plan (a JSON array). */
static void plan(const char *answers) {
  char *body = util_fmt("{\"reset\":true,\"plan\":%s}", answers);
  free(ctl("POST", "/control", body));
  free(body);
}

static char *exports(void) { return ctl("GET", "/exports", NULL); }

static int64_t export_count(void) {
  char *e = exports();
  int64_t n = json_get_int(e, strlen(e), "count", -1);
  free(e);
  return n;
}

typedef struct nth {
  size_t want, i;
  char *text;
} nth;

static int take_nth(void *ud, const char *v, size_t vn) {
  nth *n = ud;
  if (n->i++ == n->want) n->text = util_fmt("%.*s", (int)vn, v);
  return 0;
}

/* Export i (from 0) as the receiver recorded it (malloc'd JSON object). */
static char *export_at(size_t i) {
  char *e = exports();
  const char *v;
  size_t vn;
  nth n = {i, 0, NULL};
  if (json_get(e, strlen(e), "exports", &v, &vn) == 1) json_each(v, vn, take_nth, &n);
  free(e);
  if (!n.text) fail_msg("the receiver has no export %zu", i);
  return n.text;
}

/* A member of an object, as raw JSON text (malloc'd); "" when absent. */
static char *member(const char *obj, const char *key) {
  const char *v;
  size_t vn;
  return json_get(obj, strlen(obj), key, &v, &vn) == 1 ? util_fmt("%.*s", (int)vn, v) : util_strdup("");
}

/* obj.outer.inner as a string (malloc'd), NULL when absent. */
static char *string_at(const char *obj, const char *outer, const char *inner) {
  char *o = member(obj, outer), *s = json_get_string(o, strlen(o), inner);
  free(o);
  return s;
}

static void expect_field(const char *obj, const char *outer, const char *inner, const char *want) {
  char *got = string_at(obj, outer, inner);
  if (!got || strcmp(got, want) != 0) fail_msg("%s.%s is \"%s\", not \"%s\" in %s", outer, inner, got ? got : "(none)", want, obj);
  free(got);
}

/* Runs the loop until cond(arg) holds, for at most seconds (scaled); 1 when it did. */
static int wait_until(int (*cond)(void *arg), void *arg, double seconds) {
  uint64_t end = uv_now(&H.loop) + (uint64_t)(seconds * 1000 * scale());
  while (!cond(arg)) {
    uv_update_time(&H.loop);
    if (uv_now(&H.loop) >= end) return 0;
    uv_run(&H.loop, UV_RUN_ONCE); /* the tick wakes it within 20 ms */
  }
  return 1;
}

static int has_exports(void *arg) { return export_count() >= *(int64_t *)arg; }
static void wait_exports(int64_t n) {
  if (!wait_until(has_exports, &n, 10)) fail_msg("the receiver has %lld exports, not %lld", (long long)export_count(), (long long)n);
}

typedef struct stat_want {
  size_t offset; /* of a uint64_t in otel_stats */
  uint64_t n;
} stat_want;
#define STAT(field) offsetof(otel_stats, field)

static uint64_t stat_of(size_t offset) {
  otel_stats s;
  otel_exporter_stats(H.x, &s);
  return *(uint64_t *)((char *)&s + offset);
}
static int stat_reached(void *arg) {
  stat_want *w = arg;
  return stat_of(w->offset) >= w->n;
}
static void wait_stat(size_t offset, uint64_t n, const char *what) {
  stat_want w = {offset, n};
  if (!wait_until(stat_reached, &w, 10)) fail_msg("%s is %llu, not %llu", what, (unsigned long long)stat_of(offset), (unsigned long long)n);
}

static int flushed_flag;
static void on_flushed(void *ud) { *(int *)ud = 1; }
static int is_set(void *arg) { return *(int *)arg; }

/* Flushes and waits for done; returns how long it took (ms). */
static uint64_t flush(double seconds) {
  flushed_flag = 0;
  uv_update_time(&H.loop);
  uint64_t t0 = uv_now(&H.loop);
  otel_exporter_flush(H.x, on_flushed, &flushed_flag);
  if (!wait_until(is_set, &flushed_flag, seconds)) fail_msg("the flush did not end within %.1f s", seconds * scale());
  uv_update_time(&H.loop);
  return uv_now(&H.loop) - t0;
}

/* A test span: trace t, span id s (both small numbers). */
static void export_span(uint64_t t, uint64_t s) {
  char *json = util_fmt("{\"traceId\":\"%032llx\",\"spanId\":\"%016llx\",\"name\":\"test\",\"kind\":1,"
                        "\"startTimeUnixNano\":\"1\",\"endTimeUnixNano\":\"2\"}",
                        (unsigned long long)t + 1, (unsigned long long)s);
  otel_export_span(H.x, json, strlen(json));
  free(json);
}

/* The span ids of export i, as the receiver's JSON list. */
static void expect_span_ids(size_t i, const char *want) {
  char *e = export_at(i), *ids = member(e, "span_ids"), *problems = member(e, "problems");
  if (strcmp(problems, "[]") != 0) fail_msg("export %zu is not a well-formed request: %s", i, problems);
  if (strcmp(ids, want) != 0) fail_msg("export %zu has spans %s, not %s", i, ids, want);
  free(e);
  free(ids);
  free(problems);
}

/* An exporter configured by kv (OTEL_EXPORTER_OTLP_ENDPOINT is the receiver
 * unless kv names an endpoint). */
static void start(const char *const *kv) {
  set_env(kv);
  if (!getenv("OTEL_EXPORTER_OTLP_ENDPOINT") && !getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
    char *u = url("");
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", u, 1);
    free(u);
  }
  char err[512];
  H.x = otel_exporter_new(&H.loop, NULL, err, sizeof err);
  if (!H.x) fail_msg("no exporter: %s", *err ? err : "tracing is off");
}

static void stop(void) {
  otel_exporter_free(H.x);
  H.x = NULL;
  for (int i = 0; i < 10; i++) uv_run(&H.loop, UV_RUN_NOWAIT); /* its handles close */
}

static void on_tick(uv_timer_t *t) { ((harness *)t->data)->ticks++; }

static int group_setup(void **state) {
  (void)state;
  int fds[2];
  if (pipe(fds) != 0) return -1;
  H.receiver = fork();
  if (H.receiver == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM); /* a test that crashes takes its receiver along */
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl("/usr/bin/python3", "python3", OTLP_RECEIVER, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char line[32] = "";
  size_t n = 0;
  while (n < sizeof line - 1 && read(fds[0], line + n, 1) == 1 && line[n] != '\n') n++;
  close(fds[0]);
  H.port = atoi(line);
  if (H.port <= 0) {
    print_error("the receiver (%s) did not start\n", OTLP_RECEIVER);
    return -1;
  }
  uv_loop_init(&H.loop);
  char err[256];
  H.ctl = http_new(&H.loop, err, sizeof err);
  uv_timer_init(&H.loop, &H.tick);
  H.tick.data = &H;
  uv_timer_start(&H.tick, on_tick, 20, 20);
  return H.ctl ? 0 : -1;
}

static int group_teardown(void **state) {
  (void)state;
  uv_close((uv_handle_t *)&H.tick, NULL);
  http_free(H.ctl);
  uv_run(&H.loop, UV_RUN_DEFAULT);
  uv_loop_close(&H.loop);
  kill(H.receiver, SIGTERM);
  waitpid(H.receiver, NULL, 0);
  set_env(NULL);
  return 0;
}

/* ---------------------------------------------------------- batches --- */

static void test_batch_by_size(void **state) {
  (void)state;
  plan("[]");
  const char *const kv[] = {"OTEL_BSP_SCHEDULE_DELAY", "600000", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2", NULL};
  start(kv);
  for (int i = 1; i <= 5; i++) export_span(0, (uint64_t)i);
  wait_exports(2);
  wait_stat(STAT(spans_exported), 4, "spans_exported");
  expect_span_ids(0, "[\"0000000000000001\",\"0000000000000002\"]");
  expect_span_ids(1, "[\"0000000000000003\",\"0000000000000004\"]");
  otel_stats s;
  otel_exporter_stats(H.x, &s);
  assert_int_equal(s.queue_len, 1); /* the fifth waits for its batch or the delay: ten minutes */
  assert_int_equal(s.spans_queued, 5);
  assert_int_equal(s.exports_ok, 2);
  /* the stop's flush sends it at once */
  flush(10);
  assert_int_equal(export_count(), 3);
  expect_span_ids(2, "[\"0000000000000005\"]");
  otel_exporter_stats(H.x, &s);
  assert_int_equal(s.spans_exported, 5);
  assert_int_equal(s.queue_len, 0);
  assert_int_equal(s.exports_failed + s.export_retries + s.spans_dropped_export + s.spans_dropped_queue_full, 0);
  stop();
}

static void test_batch_by_delay(void **state) {
  (void)state;
  plan("[]");
  const char *const kv[] = {"OTEL_BSP_SCHEDULE_DELAY", "400", NULL};
  start(kv);
  uv_update_time(&H.loop);
  uint64_t t0 = uv_now(&H.loop);
  for (int i = 1; i <= 3; i++) export_span(0, (uint64_t)i);
  wait_exports(1);
  uv_update_time(&H.loop);
  uint64_t took = uv_now(&H.loop) - t0;
  if (took < 390) fail_msg("the batch left after %llu ms, before its delay of 400", (unsigned long long)took);
  expect_span_ids(0, "[\"0000000000000001\",\"0000000000000002\",\"0000000000000003\"]");
  wait_stat(STAT(exports_ok), 1, "exports_ok");
  /* the next batch's delay runs from its own first span */
  uv_update_time(&H.loop);
  t0 = uv_now(&H.loop);
  export_span(0, 4);
  wait_exports(2);
  uv_update_time(&H.loop);
  took = uv_now(&H.loop) - t0;
  if (took < 390) fail_msg("the second batch left after %llu ms, before its delay", (unsigned long long)took);
  expect_span_ids(1, "[\"0000000000000004\"]");
  stop();
}

/* ------------------------------------------------------ the request --- */

static void test_body_resource_scope_headers(void **state) {
  (void)state;
  plan("[]");
  char *endpoint = url("/custom/path");
  const char *const kv[] = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint,
                            /* the base endpoint is not used when the traces one is set */
                            "OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1",
                            "OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s%3Dcret%2C1 , x-tenant = acme,,",
                            "OTEL_SERVICE_NAME", "svc-a",
                            "OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test,service.name=ignored,team=a%2Cb,k%3D=v",
                            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1",
                            NULL};
  start(kv);
  export_span(0, 7);
  wait_exports(1);
  expect_span_ids(0, "[\"0000000000000007\"]");
  char *e = export_at(0), *path = json_get_string(e, strlen(e), "path");
  assert_string_equal(path, "/custom/path");
  free(path);
  expect_field(e, "headers", "content-type", "application/json");
  expect_field(e, "headers", "x-api-key", "s=cret,1");
  expect_field(e, "headers", "x-tenant", "acme");
  char *agent = string_at(e, "headers", "user-agent");
  assert_non_null(agent);
  char *want_agent = util_fmt("engine-otlp-exporter/%s", ENGINE_VERSION_EXPECTED);
  assert_string_equal(agent, want_agent);
  free(agent);
  free(want_agent);
  expect_field(e, "resource", "service.name", "svc-a"); /* OTEL_SERVICE_NAME over the attributes */
  expect_field(e, "resource", "service.version", ENGINE_VERSION_EXPECTED);
  expect_field(e, "resource", "deployment.environment", "test");
  expect_field(e, "resource", "team", "a,b");
  expect_field(e, "resource", "k=", "v");
  expect_field(e, "resource", "telemetry.sdk.name", "engine");
  expect_field(e, "resource", "telemetry.sdk.language", "c");
  expect_field(e, "resource", "telemetry.sdk.version", ENGINE_VERSION_EXPECTED);
  expect_field(e, "scope", "name", "engine");
  expect_field(e, "scope", "version", ENGINE_VERSION_EXPECTED);
  free(e);
  stop();

  /* the _TRACES_ headers replace the general ones; a base endpoint with a
   * slash gets v1/traces after it */
  plan("[]");
  char *base = url("/collector/");
  const char *const kv2[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", base, "OTEL_EXPORTER_OTLP_HEADERS", "x-general=1",
                             "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-traces=2", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1",
                             NULL};
  start(kv2);
  export_span(0, 8);
  wait_exports(1);
  e = export_at(0);
  path = json_get_string(e, strlen(e), "path");
  assert_string_equal(path, "/collector/v1/traces");
  expect_field(e, "headers", "x-traces", "2");
  char *general = string_at(e, "headers", "x-general");
  assert_null(general);
  expect_field(e, "resource", "service.name", "engine"); /* the default */
  free(path);
  free(e);
  free(base);
  free(endpoint);
  stop();
}

/* ----------------------------------------------------------- answers --- */

static void test_retry_after_then_ok(void **state) {
  (void)state;
  plan("[{\"status\":503,\"headers\":{\"Retry-After\":\"1\"}},{\"status\":429,\"retry_after_date\":1},"
       "{\"status\":200,\"body\":\"{}\"}]");
  const char *const kv[] = {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2", NULL};
  start(kv);
  export_span(0, 1);
  export_span(0, 2);
  wait_stat(STAT(exports_ok), 1, "exports_ok");
  assert_int_equal(export_count(), 3);
  for (size_t i = 0; i < 3; i++) expect_span_ids(i, "[\"0000000000000001\",\"0000000000000002\"]");
  /* Retry-After: 1 (seconds) was waited for; the HTTP-date's second too (to within its resolution) */
  char *a = export_at(0), *b = export_at(1), *c = export_at(2), *ta = member(a, "t"), *tb = member(b, "t"),
       *tc = member(c, "t");
  double gap1 = atof(tb) - atof(ta), gap2 = atof(tc) - atof(tb);
  if (gap1 < 0.95) fail_msg("the retry after a 503 with Retry-After: 1 came after %.3f s", gap1);
  if (gap2 < 0.0 || gap2 > 2.5 * scale()) fail_msg("the retry after a 429 with an HTTP-date came after %.3f s", gap2);
  free(a), free(b), free(c), free(ta), free(tb), free(tc);
  otel_stats s;
  otel_exporter_stats(H.x, &s);
  assert_int_equal(s.spans_exported, 2); /* once */
  assert_int_equal(s.export_retries, 2);
  assert_int_equal(s.exports_ok, 1);
  assert_int_equal(s.exports_failed, 0);
  assert_int_equal(s.spans_dropped_export, 0);
  stop();
}

/* What the test wrote to stderr between stderr_capture and stderr_release. */
static int saved_stderr = -1;
static char stderr_path[256];
static void stderr_capture(void) {
  fflush(stderr);
  snprintf(stderr_path, sizeof stderr_path, "%s/otel-test-stderr-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
           (int)getpid());
  int fd = open(stderr_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  saved_stderr = dup(2);
  dup2(fd, 2);
  close(fd);
}
static char *stderr_release(void) {
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  size_t n;
  char *text = util_read_file(stderr_path, &n);
  unlink(stderr_path);
  return text ? text : util_strdup("");
}

static size_t occurrences(const char *text, const char *what) {
  size_t n = 0;
  for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

static void test_refused_batch_dropped(void **state) {
  (void)state;
  plan("[{\"status\":400,\"body\":\"{\\\"code\\\":3,\\\"message\\\":\\\"bad span\\\"}\"},{\"status\":400},"
       "{\"status\":401}]");
  /* credentials in the URL stay out of the log */
  char *endpoint = util_fmt("http://user:pw@127.0.0.1:%d/v1/traces?key=k3y#f", H.port);
  const char *const kv[] = {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint, NULL};
  start(kv);
  free(endpoint);
  stderr_capture();
  for (int i = 1; i <= 3; i++) export_span(0, (uint64_t)i);
  wait_stat(STAT(exports_failed), 3, "exports_failed");
  char *log = stderr_release();
  assert_int_equal(export_count(), 3); /* each once: no retry */
  otel_stats s;
  otel_exporter_stats(H.x, &s);
  assert_int_equal(s.spans_dropped_export, 3);
  assert_int_equal(s.export_retries, 0);
  assert_int_equal(s.spans_exported, 0);
  if (occurrences(log, "tracing: dropped a batch") != 1)
    fail_msg("three dropped batches made %zu reports, not one a minute:\n%s", occurrences(log, "tracing: dropped a batch"), log);
  if (!strstr(log, "HTTP 400") || !strstr(log, "bad span")) fail_msg("the report does not say why: %s", log);
  char *shown = util_fmt("for http://***@127.0.0.1:%d/v1/traces:", H.port);
  if (!strstr(log, shown) || strstr(log, "pw") || strstr(log, "k3y")) fail_msg("the report shows the URL's secrets: %s", log);
  free(shown);
  free(log);
  /* the plan is spent: the next one goes through */
  export_span(0, 4);
  wait_stat(STAT(exports_ok), 1, "exports_ok");
  assert_int_equal(stat_of(STAT(spans_exported)), 1);
  stop();
}

static void test_partial_success(void **state) {
  (void)state;
  plan("[{\"status\":200,\"body\":\"{\\\"partialSuccess\\\":{\\\"rejectedSpans\\\":\\\"2\\\","
       "\\\"errorMessage\\\":\\\"too old\\\"}}\"}]");
  const char *const kv[] = {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "3", NULL};
  start(kv);
  stderr_capture();
  for (int i = 1; i <= 3; i++) export_span(0, (uint64_t)i);
  wait_stat(STAT(exports_ok), 1, "exports_ok");
  char *log = stderr_release();
  otel_stats s;
  otel_exporter_stats(H.x, &s);
  assert_int_equal(s.spans_exported, 1);
  assert_int_equal(s.spans_rejected, 2);
  if (!strstr(log, "rejected 2 of 3 spans: too old")) fail_msg("the log does not say what was rejected: %s", log);
  free(log);
  stop();
}

static void test_unreachable_is_retried(void **state) {
  (void)state;
  /* a port nothing listens on (the receiver's, after it is gone, would
   * do too): connection refused is transient, retried with backoff until
   * the batch's time runs out, then dropped */
  const char *const kv[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_BSP_EXPORT_TIMEOUT", "1200",
                            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1", NULL};
  start(kv);
  stderr_capture();
  export_span(0, 1);
  wait_stat(STAT(exports_failed), 1, "exports_failed");
  free(stderr_release());
  otel_stats s;
  otel_exporter_stats(H.x, &s);
  assert_true(s.export_retries >= 1);
  assert_int_equal(s.spans_dropped_export, 1);
  stop();
}

/* ------------------------------------------------- a hanging endpoint --- */

static void test_hanging_endpoint(void **state) {
  (void)state;
  char hangs[600] = "[";
  for (int i = 0; i < 40; i++) strcat(hangs, i ? ",{\"hang\":true}" : "{\"hang\":true}");
  strcat(hangs, "]");
  plan(hangs); /* every request it gets */
  const char *const kv[] = {"OTEL_EXPORTER_OTLP_TIMEOUT", "300", "OTEL_BSP_EXPORT_TIMEOUT", "1500",
                            "OTEL_BSP_MAX_QUEUE_SIZE", "4", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2",
                            "OTEL_BSP_SCHEDULE_DELAY", "10", NULL};
  start(kv);
  stderr_capture();
  export_span(0, 1);
  export_span(0, 2);
  wait_exports(1); /* the batch is in flight, and hangs */
  /* every export call returns at once; the queue takes 4, the rest is dropped */
  uv_update_time(&H.loop);
  uint64_t t0 = uv_now(&H.loop);
  int ticks0 = H.ticks;
  for (int i = 3; i <= 12; i++) export_span(0, (uint64_t)i);
  otel_stats s;
  otel_exporter_stats(H.x, &s);
  assert_int_equal(s.queue_len, 4);
  assert_int_equal(s.in_flight, 2);
  assert_int_equal(s.spans_dropped_queue_full, 6);
  /* the request times out (300 ms), is tried again after a backoff, and the
   * batch is given up on when its 1.5 s are spent; the loop ran all along */
  wait_stat(STAT(exports_failed), 1, "exports_failed");
  uv_update_time(&H.loop);
  uint64_t took = uv_now(&H.loop) - t0;
  if (H.ticks - ticks0 < (int)(took / 20 / 3))
    fail_msg("the loop's 20 ms timer fired %d times in %llu ms: the loop was held", H.ticks - ticks0, (unsigned long long)took);
  otel_exporter_stats(H.x, &s);
  assert_true(s.export_retries >= 1);
  assert_true(export_count() >= 2); /* tried again */
  /* a stop: the flush ends within the export timeout however the endpoint hangs */
  uint64_t flush_ms = flush(10);
  if (flush_ms > (uint64_t)(1500 + 1000 * scale())) fail_msg("the flush took %llu ms, over its bound of 1500", (unsigned long long)flush_ms);
  free(stderr_release());
  otel_exporter_stats(H.x, &s);
  assert_int_equal(s.spans_exported, 0);
  assert_int_equal(s.queue_len + s.in_flight, 0);
  assert_int_equal(s.spans_queued, 6);
  assert_int_equal(s.spans_dropped_export, 6); /* every span queued is accounted for */
  stop();
}

/* ---------------------------------------------------------- samplers --- */

static void trace_of(int i, char out[TRACE_ID_HEX]) {
  char id[32];
  snprintf(id, sizeof id, "wf-%d", i);
  trace_id_of_workflow(id, out);
}

static otel_exporter *exporter_with(const char *sampler, const char *arg) {
  const char *const kv[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_TRACES_SAMPLER", sampler,
                            arg ? "OTEL_TRACES_SAMPLER_ARG" : NULL, arg, NULL};
  set_env(kv);
  char err[256];
  otel_exporter *x = otel_exporter_new(&H.loop, NULL, err, sizeof err);
  if (!x) fail_msg("%s: %s", sampler, err);
  return x;
}

static void drop_exporter(otel_exporter *x) {
  otel_exporter_free(x);
  for (int i = 0; i < 10; i++) uv_run(&H.loop, UV_RUN_NOWAIT);
}

static void test_samplers(void **state) {
  (void)state;
  char t[TRACE_ID_HEX];
  trace_of(1, t);
  static const struct {
    const char *sampler;
    int root, parent_on, parent_off;
  } table[] = {
      {"always_on", 1, 1, 1},
      {"always_off", 0, 0, 0},
      {"parentbased_always_on", 1, 1, 0},
      {"parentbased_always_off", 0, 1, 0},
      {"PARENTBASED_ALWAYS_OFF", 0, 1, 0}, /* enums are case-insensitive */
  };
  for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
    otel_exporter *x = exporter_with(table[i].sampler, "0.5"); /* the argument: ignored by these */
    if (otel_sampled(x, t, -1) != table[i].root || otel_sampled(x, t, 1) != table[i].parent_on ||
        otel_sampled(x, t, 0) != table[i].parent_off)
      fail_msg("%s decided %d %d %d", table[i].sampler, otel_sampled(x, t, -1), otel_sampled(x, t, 1), otel_sampled(x, t, 0));
    drop_exporter(x);
  }
  /* the default: parentbased_always_on */
  otel_exporter *x = exporter_with("", NULL);
  assert_int_equal(otel_sampled(x, t, -1), 1);
  assert_int_equal(otel_sampled(x, t, 0), 0);
  drop_exporter(x);
  assert_int_equal(otel_sampled(NULL, t, 1), 0); /* tracing off */

  /* always_off exports nothing: a producer asks first, and the flush has nothing to send */
  plan("[]");
  const char *const kv[] = {"OTEL_TRACES_SAMPLER", "always_off", NULL};
  start(kv);
  for (int i = 0; i < 1000; i++) {
    trace_of(i, t);
    if (otel_sampled(H.x, t, -1)) fail_msg("always_off kept trace %s", t);
  }
  flush(10);
  assert_int_equal(export_count(), 0);
  assert_int_equal(stat_of(STAT(spans_queued)), 0);
  stop();
}

static void test_traceidratio(void **state) {
  (void)state;
  otel_exporter *half = exporter_with("traceidratio", "0.5"), *again = exporter_with("traceidratio", "0.5"),
                *quarter = exporter_with("traceidratio", "0.25"), *none = exporter_with("traceidratio", "0"),
                *all = exporter_with("traceidratio", "1"), *parent = exporter_with("parentbased_traceidratio", "0.5");
  /* R, the last 56 bits, against T = (1 - 0.5) * 2^56 = 0x80000000000000 */
  assert_int_equal(otel_sampled(half, "ffffffffffffffffff80000000000000", -1), 1);
  assert_int_equal(otel_sampled(half, "0000000000000000007fffffffffffff", -1), 0);
  assert_int_equal(otel_sampled(half, "00000000000000000080000000000000", -1), 1); /* the bits before count for nothing */
  assert_int_equal(otel_sampled(all, "00000000000000000000000000000001", -1), 1);
  assert_int_equal(otel_sampled(none, "ffffffffffffffffffffffffffffffff", -1), 0);
  assert_int_equal(otel_sampled(half, "not a trace id", -1), 0);
  /* traceidratio ignores a parent's flag; parentbased_traceidratio follows it */
  assert_int_equal(otel_sampled(half, "0000000000000000007fffffffffffff", 1), 0);
  assert_int_equal(otel_sampled(parent, "0000000000000000007fffffffffffff", 1), 1);
  assert_int_equal(otel_sampled(parent, "ffffffffffffffffff80000000000000", 0), 0);
  assert_int_equal(otel_sampled(parent, "ffffffffffffffffff80000000000000", -1), 1);
  int kept = 0;
  char t[TRACE_ID_HEX];
  for (int i = 0; i < 4000; i++) {
    trace_of(i, t);
    int h = otel_sampled(half, t, -1);
    kept += h;
    if (h != otel_sampled(again, t, -1) || h != otel_sampled(half, t, -1)) fail_msg("trace %s decided twice differently", t);
    if (otel_sampled(quarter, t, -1) && !h) fail_msg("trace %s kept at 0.25 and not at 0.5", t);
    if (!otel_sampled(all, t, -1) || otel_sampled(none, t, -1)) fail_msg("ratio 1 or 0 wrong for %s", t);
  }
  if (kept < 1800 || kept > 2200) fail_msg("ratio 0.5 kept %d of 4000 traces", kept);
  drop_exporter(half), drop_exporter(again), drop_exporter(quarter), drop_exporter(none), drop_exporter(all),
      drop_exporter(parent);
}

/* ------------------------------------------------------ configuration --- */

static void test_off(void **state) {
  (void)state;
  static const char *const cases[][7] = {
      {NULL},
      {"OTEL_EXPORTER_OTLP_ENDPOINT", "", NULL}, /* empty is unset */
      {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_SDK_DISABLED", "TRUE", NULL},
      {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER", "none", NULL},
      /* nothing else is read without an endpoint */
      {"OTEL_TRACES_SAMPLER", "bogus", "OTEL_BSP_MAX_QUEUE_SIZE", "x", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    set_env(cases[i]);
    char err[256] = "x";
    otel_exporter *x = otel_exporter_new(&H.loop, NULL, err, sizeof err);
    if (x || *err) fail_msg("case %zu: tracing is not off (%s)", i, err);
    assert_int_equal(otel_config_check(err, sizeof err), 0);
  }
  /* and on, with every variable at its limits */
  const char *const edge[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "HTTPS://collector.example", "OTEL_SDK_DISABLED", "false",
                              "OTEL_TRACES_EXPORTER", "OTLP", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/json",
                              "OTEL_EXPORTER_OTLP_TIMEOUT", "0", "OTEL_BSP_EXPORT_TIMEOUT", "0",
                              "OTEL_BSP_SCHEDULE_DELAY", "0", "OTEL_BSP_MAX_QUEUE_SIZE", "10",
                              /* the default batch (512) under a smaller queue becomes the queue's size */
                              "OTEL_TRACES_SAMPLER", "traceidratio", "OTEL_TRACES_SAMPLER_ARG", " 0.25", NULL};
  set_env(edge);
  char err[256];
  otel_exporter *x = otel_exporter_new(&H.loop, NULL, err, sizeof err);
  if (!x) fail_msg("refused: %s", err);
  drop_exporter(x);
}

static void test_bad_variables(void **state) {
  (void)state;
  static const struct {
    const char *name, *value, *said;
  } bad[] = {
      {"OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://x", "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL, not \"ftp://x\""},
      {"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318", "must be an http:// or https:// URL, not \"collector:4318\""},
      {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be a URL with a host"},
      {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://a b", "without spaces or control characters, not \"http://a b\""},
      {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x\x1b[31m", "not \"http://x\\x1b[31m\""}, /* shown terminal-safe */
      {"OTEL_EXPORTER_OTLP_HEADERS", "a=1,Bearer s3cret", "OTEL_EXPORTER_OTLP_HEADERS: member 2 has no '='"},
      {"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x y=1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS: member 1 has no header name"},
      {"OTEL_EXPORTER_OTLP_HEADERS", "=1", "member 1 has no header name"},
      {"OTEL_EXPORTER_OTLP_HEADERS", "a=%zz", "the value of header a is not percent-encoded right"},
      {"OTEL_EXPORTER_OTLP_HEADERS", "a=%4", "the value of header a is not percent-encoded right"},
      {"OTEL_EXPORTER_OTLP_HEADERS", "a=x%0d%0aEvil: 1", "the value of header a holds a control character"},
      {"OTEL_EXPORTER_OTLP_TIMEOUT", "abc", "OTEL_EXPORTER_OTLP_TIMEOUT must be a whole number from 0 to 2147483647, not \"abc\""},
      {"OTEL_EXPORTER_OTLP_TIMEOUT", "-1", "OTEL_EXPORTER_OTLP_TIMEOUT must be a whole number from 0 to 2147483647, not \"-1\""},
      {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "10s", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT must be a whole number"},
      {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL is \"grpc\": this engine is built with OTLP over HTTP in JSON only"},
      {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL is \"http/protobuf\""},
      {"OTEL_EXPORTER_OTLP_PROTOCOL", "thrift", "OTEL_EXPORTER_OTLP_PROTOCOL must be http/json"},
      {"OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ca.pem", "OTEL_EXPORTER_OTLP_CERTIFICATE is set"},
      {"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "/k.pem", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY is set"},
      {"OTEL_TRACES_SAMPLER", "jaeger_remote", "OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio"},
      {"OTEL_TRACES_SAMPLER_ARG", "1.5", "OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1 (the ratio of traces kept), not \"1.5\""},
      {"OTEL_TRACES_SAMPLER_ARG", "half", "OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1"},
      {"OTEL_TRACES_SAMPLER_ARG", "nan", "OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1"},
      {"OTEL_TRACES_SAMPLER_ARG", "-0.1", "OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1"},
      {"OTEL_BSP_SCHEDULE_DELAY", "-5", "OTEL_BSP_SCHEDULE_DELAY must be a whole number from 0 to 2147483647, not \"-5\""},
      {"OTEL_BSP_SCHEDULE_DELAY", "1e3", "OTEL_BSP_SCHEDULE_DELAY must be a whole number"},
      {"OTEL_BSP_MAX_QUEUE_SIZE", "0", "OTEL_BSP_MAX_QUEUE_SIZE must be a whole number from 1 to 1000000, not \"0\""},
      {"OTEL_BSP_MAX_QUEUE_SIZE", "99999999", "OTEL_BSP_MAX_QUEUE_SIZE must be a whole number from 1 to 1000000"},
      {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "0", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE must be a whole number from 1"},
      {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4096", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE (4096) must not be more than OTEL_BSP_MAX_QUEUE_SIZE (2048)"},
      {"OTEL_BSP_EXPORT_TIMEOUT", "soon", "OTEL_BSP_EXPORT_TIMEOUT must be a whole number from 0 to 2147483647, not \"soon\""},
      {"OTEL_RESOURCE_ATTRIBUTES", "team", "OTEL_RESOURCE_ATTRIBUTES: \"team\" has no '='"},
      {"OTEL_RESOURCE_ATTRIBUTES", "a=1,=v", "OTEL_RESOURCE_ATTRIBUTES: the key of \"=v\" is empty"},
      {"OTEL_RESOURCE_ATTRIBUTES", "k%G1=v", "OTEL_RESOURCE_ATTRIBUTES: the key of \"k%G1=v\" is not percent-encoded right"},
      {"OTEL_RESOURCE_ATTRIBUTES", "k=%", "OTEL_RESOURCE_ATTRIBUTES: the value of \"k=%\" is not percent-encoded right"},
      {"OTEL_SDK_DISABLED", "yes", "OTEL_SDK_DISABLED must be true or false, not \"yes\""},
      {"OTEL_TRACES_EXPORTER", "zipkin", "OTEL_TRACES_EXPORTER must be otlp or none"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    /* the traces sampler's argument is read only for a ratio sampler */
    const char *const kv[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_TRACES_SAMPLER", "traceidratio",
                              bad[i].name, bad[i].value, NULL};
    set_env(kv);
    char err[512] = "", err2[512] = "";
    otel_exporter *x = otel_exporter_new(&H.loop, NULL, err, sizeof err);
    if (x) fail_msg("%s=%s was accepted", bad[i].name, bad[i].value);
    if (!strstr(err, bad[i].said)) fail_msg("%s=%s said \"%s\", not \"%s\"", bad[i].name, bad[i].value, err, bad[i].said);
    if (strchr(err, '\x1b')) fail_msg("%s: the error holds a raw escape: %s", bad[i].name, err);
    if (otel_config_check(err2, sizeof err2) != -1 || strcmp(err, err2) != 0)
      fail_msg("otel_config_check said \"%s\", not \"%s\"", err2, err);
  }
  /* a header's value is never shown: it is a secret as often as not */
  const char *const kv[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_HEADERS",
                            "authorization=Bearer%20s3cret%0a", NULL};
  set_env(kv);
  char err[512];
  assert_null(otel_exporter_new(&H.loop, NULL, err, sizeof err));
  if (strstr(err, "s3cret")) fail_msg("the error shows the header's value: %s", err);
}

/* Spans that are not one JSON object are dropped before the queue: one
 * would spoil its whole batch. */
static void test_invalid_span_dropped(void **state) {
  (void)state;
  plan("[]");
  const char *const kv[] = {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1", NULL};
  start(kv);
  stderr_capture();
  static const char *const broken[] = {"", "[1]", "{\"a\":1", "{\"a\":1}{\"b\":2}", "{\"a\":1},", "null"};
  for (size_t i = 0; i < sizeof broken / sizeof *broken; i++) otel_export_span(H.x, broken[i], strlen(broken[i]));
  free(stderr_release());
  const char *good = " {\"traceId\":\"00000000000000000000000000000001\",\"spanId\":\"0000000000000009\"}\n";
  otel_export_span(H.x, good, strlen(good));
  wait_exports(1);
  expect_span_ids(0, "[\"0000000000000009\"]");
  otel_stats s;
  otel_exporter_stats(H.x, &s);
  assert_int_equal(s.spans_dropped_invalid, sizeof broken / sizeof *broken);
  assert_int_equal(s.spans_queued, 1);
  stop();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batch_by_size),
      cmocka_unit_test(test_batch_by_delay),
      cmocka_unit_test(test_body_resource_scope_headers),
      cmocka_unit_test(test_retry_after_then_ok),
      cmocka_unit_test(test_refused_batch_dropped),
      cmocka_unit_test(test_partial_success),
      cmocka_unit_test(test_unreachable_is_retried),
      cmocka_unit_test(test_hanging_endpoint),
      cmocka_unit_test(test_samplers),
      cmocka_unit_test(test_traceidratio),
      cmocka_unit_test(test_off),
      cmocka_unit_test(test_bad_variables),
      cmocka_unit_test(test_invalid_span_dropped),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
