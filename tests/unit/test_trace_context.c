/* Unit tests for the trace context a start records and hands on
 * (engine/base/trace_start.c), the cache of each run's trace
 * (trace_cache.c) and the trace ids log lines carry (log.c): tracestate as
 * the W3C Trace Context grammar (Level 1, section 3.3) reads it, what a
 * WorkflowStarted payload gives, the traceparent a step hands on, and when
 * outgoing requests carry one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off: cmocka.h needs the headers above first */
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "trace_cache.h"
#include "trace_start.h"
#include "util.h"

static const char *TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
static const char *TRACE = "0af7651916cd43dd8448eb211c80319c";

static void test_tracestate(void **state) {
  (void)state;
  static const struct {
    const char *in, *out, *why; /* out NULL: invalid, why in the error */
  } cases[] = {
      {"congo=t61rcWkgMzE", "congo=t61rcWkgMzE", NULL},
      {" congo=t61rcWkgMzE ,\trojo=00f067aa0ba902b7 ", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", NULL},
      {"a=1,,  ,b=2,", "a=1,b=2", NULL}, /* empty members are allowed and dropped */
      {"", "", NULL},
      {"t@sys=x y", "t@sys=x y", NULL},     /* a multi-tenant key; a space inside a value */
      {"7t@s_-*/9=1", "7t@s_-*/9=1", NULL}, /* a tenant id may begin with a digit */
      {"z*/_-9=~!", "z*/_-9=~!", NULL},
      {"Congo=1", NULL, "member 'Congo=1'"},
      {"1a=1", NULL, "member '1a=1'"}, /* a simple key begins with a letter */
      {"congo", NULL, "member 'congo'"},
      {"a=", NULL, "member 'a='"},
      {"a=b=c", NULL, "member 'a=b=c'"},
      {"a=\x01", NULL, "member"},
      {"a=caf\xc3\xa9", NULL, "member"},
      {"t@Sys=1", NULL, "member"},
      {"t@abcdefghijklmno=1", NULL, "member"}, /* a system id of 15 */
      {"@sys=1", NULL, "member"},
      {"a=1,a=2", NULL, "names key 'a' twice"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[TRACESTATE_MAX + 1] = "", why[200] = "";
    int ok = tracestate_normalize(cases[i].in, out, sizeof out, why, sizeof why);
    if (cases[i].out) {
      if (!ok) fail_msg("refused \"%s\": %s", cases[i].in, why);
      if (strcmp(out, cases[i].out) != 0) fail_msg("\"%s\" gave \"%s\", not \"%s\"", cases[i].in, out, cases[i].out);
    } else {
      if (ok) fail_msg("accepted \"%s\"", cases[i].in);
      if (!strstr(why, cases[i].why)) fail_msg("\"%s\": said \"%s\", not \"%s\"", cases[i].in, why, cases[i].why);
    }
  }
}

/* 32 members fit, 33 do not; 512 bytes fit, 513 do not */
static void test_tracestate_bounds(void **state) {
  (void)state;
  char in[2048], out[TRACESTATE_MAX + 1], why[200];
  size_t n = 0;
  for (int i = 0; i < 32; i++) n += (size_t)snprintf(in + n, sizeof in - n, "%sk%d=v", i ? "," : "", i);
  assert_true(tracestate_normalize(in, out, sizeof out, why, sizeof why));
  snprintf(in + n, sizeof in - n, ",k32=v");
  assert_false(tracestate_normalize(in, out, sizeof out, why, sizeof why));
  assert_non_null(strstr(why, "more than 32 members"));
  /* a=<250>,b=<250>,c=<4>: 512 bytes */
  char v250[251];
  memset(v250, 'v', 250);
  v250[250] = 0;
  snprintf(in, sizeof in, "a=%s,b=%s,c=vvvv", v250, v250);
  assert_int_equal(strlen(in), 512);
  assert_true(tracestate_normalize(in, out, sizeof out, why, sizeof why));
  assert_string_equal(out, in);
  snprintf(in, sizeof in, "a=%s,b=%s,c=vvvvv", v250, v250);
  assert_false(tracestate_normalize(in, out, sizeof out, why, sizeof why));
  assert_non_null(strstr(why, "longer than 512 bytes"));
  /* the spaces around members do not count */
  snprintf(in, sizeof in, "  a=%s ,  b=%s , c=vvvv  ", v250, v250);
  assert_true(tracestate_normalize(in, out, sizeof out, why, sizeof why));
  assert_int_equal(strlen(out), 512);
  /* a value of 256 is the most */
  char v[300];
  memset(v, 0, sizeof v);
  memcpy(v, "a=", 2);
  memset(v + 2, 'x', 256);
  assert_true(tracestate_normalize(v, out, sizeof out, why, sizeof why));
  v[258] = 'x';
  assert_false(tracestate_normalize(v, out, sizeof out, why, sizeof why));
}

static void test_read(void **state) {
  (void)state;
  trace_start t;
  char why[200], note[200];
  assert_true(trace_start_read(TP, "a=1 , b=2", &t, why, sizeof why, note, sizeof note));
  assert_string_equal(t.traceparent, TP);
  assert_string_equal(t.tracestate, "a=1,b=2");
  assert_string_equal(why, "");
  assert_string_equal(note, "");
  /* a bad tracestate is dropped, the traceparent kept */
  assert_true(trace_start_read(TP, "A=1", &t, why, sizeof why, note, sizeof note));
  assert_string_equal(t.traceparent, TP);
  assert_string_equal(t.tracestate, "");
  assert_non_null(strstr(note, "member 'A=1'"));
  /* a later version is kept as version 00; its sampled flag stays */
  assert_true(trace_start_read("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03-x", NULL, &t, why, sizeof why,
                               note, sizeof note));
  assert_string_equal(t.traceparent, TP);
  assert_true(trace_start_read("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-02", NULL, &t, why, sizeof why,
                               note, sizeof note));
  assert_string_equal(t.traceparent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
  /* an invalid traceparent: nothing kept, its tracestate ignored with it */
  assert_false(trace_start_read("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", "a=1", &t, why, sizeof why,
                                note, sizeof note));
  assert_string_equal(t.traceparent, "");
  assert_string_equal(t.tracestate, "");
  assert_non_null(strstr(why, "trace id"));
  assert_false(trace_start_read(NULL, "a=1", &t, why, sizeof why, note, sizeof note));
  assert_string_equal(why, "");
}

static void test_members_and_payload(void **state) {
  (void)state;
  trace_start t, back;
  char why[200], note[200];
  char *m = trace_start_members(NULL);
  assert_string_equal(m, "");
  free(m);
  assert_true(trace_start_read(TP, "k=v", &t, why, sizeof why, note, sizeof note));
  m = trace_start_members(&t);
  assert_string_equal(m, ",\"traceparent\":\"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\","
                         "\"tracestate\":\"k=v\"");
  char *payload = util_fmt("{\"input\":{},\"seed\":\"1\"%s}", m);
  free(m);
  assert_true(trace_start_of_payload(payload, &back));
  assert_string_equal(back.traceparent, TP);
  assert_string_equal(back.tracestate, "k=v");
  trace_ctx c;
  assert_int_equal(trace_of_run("wf-1", payload, &c), 1);
  assert_string_equal(c.trace_id, TRACE);
  assert_string_equal(c.span_id, "b7ad6b7169203331");
  assert_int_equal(c.sampled, 1);
  free(payload);
  /* none recorded, or one that is not valid: the workflow's own trace */
  static const char *const own[] = {"{\"input\":{},\"seed\":\"1\"}",
                                    "{\"input\":{},\"seed\":\"1\",\"traceparent\":\"00-zz\",\"tracestate\":\"k=v\"}",
                                    "{\"input\":{},\"seed\":\"1\",\"traceparent\":7}", "not json", NULL};
  char mine[TRACE_ID_HEX];
  trace_id_of_workflow("wf-1", mine);
  for (const char *const *p = own; *p; p++) {
    assert_int_equal(trace_of_run("wf-1", *p, &c), 0);
    assert_string_equal(c.trace_id, mine);
    assert_string_equal(c.span_id, "");
    assert_int_equal(c.sampled, -1);
    assert_false(trace_start_of_payload(*p, &back));
  }
}

static void test_step_parent(void **state) {
  (void)state;
  trace_ctx c;
  char out[TRACEPARENT_LEN], span[SPAN_ID_HEX], want[TRACEPARENT_LEN];
  span_id_of_step("wf-1", 2, 9, "attempt 3", span);
  /* a caller that samples, one that does not, none: flags 01, 00, 01 */
  static const struct {
    const char *payload;
    const char *flags;
  } cases[] = {
      {"{\"traceparent\":\"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"}", "01"},
      {"{\"traceparent\":\"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00\"}", "00"},
      {"{}", "01"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    trace_of_run("wf-1", cases[i].payload, &c);
    trace_step_parent(&c, "wf-1", 2, 9, "attempt 3", out);
    snprintf(want, sizeof want, "00-%s-%s-%s", c.trace_id, span, cases[i].flags);
    assert_string_equal(out, want);
  }
}

static void test_cache(void **state) {
  (void)state;
  trace_cache_clear();
  assert_null(trace_cache_get("wf-1", 0));
  char *payload = util_fmt("{\"input\":{},\"seed\":\"1\",\"traceparent\":\"%s\",\"tracestate\":\"k=v\"}", TP);
  trace_cache_put("wf-1", 1, payload);
  const run_trace *t = trace_cache_get("wf-1", 0);
  assert_non_null(t);
  assert_string_equal(t->ctx.trace_id, TRACE);
  assert_string_equal(t->tracestate, "k=v");
  char span[SPAN_ID_HEX];
  span_id_of_step("wf-1", 1, 0, "run", span);
  assert_string_equal(t->run_span, span);
  assert_non_null(trace_cache_get("wf-1", 1));
  assert_null(trace_cache_get("wf-1", 2)); /* another run's is not this one's */
  trace_cache_put("wf-1", 2, "{\"input\":{},\"seed\":\"2\"}");
  t = trace_cache_get("wf-1", 2);
  assert_non_null(t);
  assert_null(t->tracestate);
  assert_int_equal(t->ctx.sampled, -1);
  free(payload);
  /* bounded: past TRACE_CACHE_MAX it starts over */
  char id[32];
  for (int i = 0; i < TRACE_CACHE_MAX; i++) {
    snprintf(id, sizeof id, "many-%d", i);
    trace_cache_put(id, 1, "{}");
  }
  assert_null(trace_cache_get("wf-1", 0));
  assert_non_null(trace_cache_get(id, 1));
  trace_cache_clear();
}

static void test_propagate_outgoing(void **state) {
  (void)state;
  static const struct {
    const char *traces, *all, *propagators;
    int on;
  } cases[] = {
      {NULL, NULL, NULL, 0},
      {"", "", NULL, 0},
      {NULL, "http://collector:4318", NULL, 1},
      {"http://collector:4318/v1/traces", NULL, NULL, 1},
      {NULL, "http://c", "tracecontext,baggage", 1},
      {NULL, "http://c", "baggage, tracecontext", 1},
      {NULL, "http://c", "", 1},
      {NULL, "http://c", "none", 0},
      {NULL, "http://c", "b3,baggage", 0},
      {NULL, "http://c", "tracecontexts", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *names[] = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_PROPAGATORS"};
    const char *values[] = {cases[i].traces, cases[i].all, cases[i].propagators};
    for (int k = 0; k < 3; k++) {
      if (values[k]) setenv(names[k], values[k], 1);
      else unsetenv(names[k]);
    }
    if (trace_propagate_outgoing() != cases[i].on) fail_msg("case %zu: not %d", i, cases[i].on);
  }
}

/* Runs fn with stderr going to a file; returns what it wrote (malloc'd). */
static char *stderr_of(void (*fn)(void)) {
  const char *dir = getenv("TMPDIR");
  char *tmpl = util_fmt("%s/trace_log_XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkstemp(tmpl);
  assert_true(fd >= 0);
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  fn();
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  size_t len;
  char *out = util_read_file(tmpl, &len);
  unlink(tmpl);
  free(tmpl);
  return out;
}

static void write_lines(void) {
  log_workflow("wf-log", "printed");
  log_wf(LOGL_WARNING, "wf-log", "workflow %s is stuck", "wf-log");
  log_wf(LOGL_WARNING, "wf-unknown", "a workflow this process did not load");
  log_msg(LOGL_DEBUG, "hidden unless asked for");
}

static void test_log_lines(void **state) {
  (void)state;
  char err[200];
  trace_cache_clear();
  char *payload = util_fmt("{\"input\":{},\"seed\":\"1\",\"traceparent\":\"%s\"}", TP);
  trace_cache_put("wf-log", 3, payload);
  free(payload);
  char span[SPAN_ID_HEX];
  span_id_of_step("wf-log", 3, 0, "run", span);
  unsetenv("ENGINE_LOG_LEVEL");
  assert_int_equal(log_configure("json", err, sizeof err), 0);
  char *out = stderr_of(write_lines);
  char *want =
      util_fmt("\"workflow\":\"wf-log\",\"trace_id\":\"%s\",\"span_id\":\"%s\",\"msg\":\"printed\"}", TRACE, span);
  if (!strstr(out, want)) fail_msg("no %s in:\n%s", want, out);
  free(want);
  want = util_fmt("\"level\":\"warning\",\"pid\":%ld,\"workflow\":\"wf-log\",\"trace_id\":\"%s\",\"span_id\":\"%s\","
                  "\"msg\":\"workflow wf-log is stuck\"}",
                  (long)getpid(), TRACE, span);
  if (!strstr(out, want)) fail_msg("no %s in:\n%s", want, out);
  free(want);
  /* not loaded here: no trace, and no read of the log for one */
  assert_non_null(strstr(out, "\"workflow\":\"wf-unknown\",\"msg\":"));
  assert_null(strstr(out, "hidden"));
  free(out);
  assert_int_equal(log_configure("text", err, sizeof err), 0);
  out = stderr_of(write_lines);
  want = util_fmt("[wf-log trace=%s] printed\n", TRACE);
  if (!strstr(out, want)) fail_msg("no %s in:\n%s", want, out);
  free(want);
  want = util_fmt("engine: warning: workflow wf-log is stuck trace=%s\n", TRACE);
  if (!strstr(out, want)) fail_msg("no %s in:\n%s", want, out);
  free(want);
  assert_non_null(strstr(out, "engine: warning: a workflow this process did not load\n"));
  free(out);
  /* ENGINE_LOG_LEVEL=debug shows debug lines; a bad level is refused */
  setenv("ENGINE_LOG_LEVEL", "debug", 1);
  assert_int_equal(log_configure("text", err, sizeof err), 0);
  out = stderr_of(write_lines);
  assert_non_null(strstr(out, "engine: hidden unless asked for\n"));
  free(out);
  setenv("ENGINE_LOG_LEVEL", "error", 1);
  assert_int_equal(log_configure("text", err, sizeof err), 0);
  out = stderr_of(write_lines);
  assert_string_equal(out, "");
  free(out);
  setenv("ENGINE_LOG_LEVEL", "loud", 1);
  assert_int_equal(log_configure("text", err, sizeof err), -1);
  assert_string_equal(err, "ENGINE_LOG_LEVEL must be error, warning, info or debug, not 'loud'");
  unsetenv("ENGINE_LOG_LEVEL");
  assert_int_equal(log_configure("text", err, sizeof err), 0);
  trace_cache_clear();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tracestate),         cmocka_unit_test(test_tracestate_bounds),
      cmocka_unit_test(test_read),               cmocka_unit_test(test_members_and_payload),
      cmocka_unit_test(test_step_parent),        cmocka_unit_test(test_cache),
      cmocka_unit_test(test_propagate_outgoing), cmocka_unit_test(test_log_lines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
