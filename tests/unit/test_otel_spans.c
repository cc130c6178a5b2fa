/* Unit tests for engine/worker/otel_spans: the OTLP span JSON of each kind
 * of step, table-driven (an activity attempt that succeeds, fails before a
 * retry or for good; a model turn and a tool call as their activities
 * describe them; an approval answered or timed out; a run that completes,
 * fails as an agent session under a recorded traceparent, or continues; a
 * child), then the attribute values' OTLP encoding and the trace of a run. */
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

#include "json.h"
#include "otel_spans.h"
#include "util.h"

#define WF "pr-42"
#define TP_TRACE "0af7651916cd43dd8448eb211c80319c"
#define TP_SPAN "b7ad6b7169203331"
#define TRACEPARENT "00-" TP_TRACE "-" TP_SPAN "-01"

/* ------------------------------------------------------------ reading --- */

typedef struct find {
  const char *key;
  char *value;
} find;

static int find_attr(void *ud, const char *v, size_t vn) {
  find *f = ud;
  char *key = json_get_string(v, vn, "key");
  const char *val;
  size_t valn;
  if (key && strcmp(key, f->key) == 0 && json_get(v, vn, "value", &val, &valn) == 1)
    f->value = util_fmt("%.*s", (int)valn, val);
  free(key);
  return f->value != NULL;
}

/* The value JSON of attribute key (malloc'd), or NULL when the span has none. */
static char *attr_of(const char *span, const char *key) {
  const char *v;
  size_t vn;
  assert_int_equal(json_get(span, strlen(span), "attributes", &v, &vn), 1);
  find f = {key, NULL};
  json_each(v, vn, find_attr, &f);
  return f.value;
}

/* Member key of the span as text (a string decoded, anything else as it is), or NULL. */
static char *member(const char *span, const char *key) {
  const char *v;
  size_t vn;
  if (json_get(span, strlen(span), key, &v, &vn) != 1) return NULL;
  if (*v == '"') return json_string(v, vn);
  return util_fmt("%.*s", (int)vn, v);
}

/* ------------------------------------------------------------- cases --- */

typedef struct expect_attr {
  const char *key, *value; /* value NULL: the span must not have it */
} expect_attr;

typedef struct span_case {
  const char *what;
  char *(*build)(const otel_run_trace *t, size_t *len); /* the step's facts, built under trace t */
  const char *started;                                  /* the run's WorkflowStarted payload (its trace) */
  const char *name;
  int kind;
  const char *id_kind; /* span_id_of_step's kind, seq SEQ; NULL: the run span */
  const char *parent;  /* "run": the run span; a hex id; NULL: none */
  const char *status;  /* the status message; NULL: no status */
  expect_attr attrs[12];
} span_case;

#define SEQ 5

static char *ok_attempt(const otel_run_trace *t, size_t *len) {
  otel_attempt_facts f = {WF, 1, SEQ, 1, "acts.echo", 1, NULL, 0, NULL, NULL, 1000, 2000};
  return otel_attempt_span(t, &f, len);
}

static char *retried_attempt(const otel_run_trace *t, size_t *len) {
  otel_attempt_facts f = {
      WF, 1,    SEQ,  2,    "acts.flaky", 0, "{\"attempts\":2,\"message\":\"attempt 2 fails\",\"type\":\"Flaky\"}",
      1,  NULL, NULL, 1000, 2000};
  return otel_attempt_span(t, &f, len);
}

static char *failed_attempt(const otel_run_trace *t, size_t *len) {
  otel_attempt_facts f = {WF, 1, SEQ, 3, "acts.fail", 0, "{\"message\":\"no type\"}", 0, NULL, NULL, 1000, 2000};
  return otel_attempt_span(t, &f, len);
}

/* what lua/otel_genai.lua has model.turn say (activity.span, merged, encoded) */
static char *model_turn(const otel_run_trace *t, size_t *len) {
  static const char *note =
      "{\"attributes\":{\"gen_ai.conversation.id\":\"pr-42\",\"gen_ai.operation.name\":\"chat\","
      "\"gen_ai.provider.name\":\"anthropic\",\"gen_ai.request.model\":\"claude-sonnet-4-5\","
      "\"gen_ai.request.stream\":true,\"gen_ai.request.temperature\":0.2,"
      "\"gen_ai.response.finish_reasons\":[\"tool_calls\"],\"gen_ai.response.id\":\"msg_01\","
      "\"gen_ai.response.model\":\"claude-sonnet-4-5-20250929\",\"gen_ai.usage.cache_read.input_tokens\":1000,"
      "\"gen_ai.usage.input_tokens\":1200,\"gen_ai.usage.output_tokens\":80},"
      "\"kind\":\"client\",\"name\":\"chat claude-sonnet-4-5\"}";
  otel_attempt_facts f = {WF, 1, SEQ, 1, "model.turn", 1, NULL, 0, NULL, note, 1000, 2000};
  return otel_attempt_span(t, &f, len);
}

/* a tool call that ran and failed (a result saying so), after an approval */
static char *tool_call(const otel_run_trace *t, size_t *len) {
  static const char *wattrs =
      "{\"engine.approval.approved\":true,\"engine.approval.approver\":\"alice\","
      "\"engine.policy.decision\":\"approve\",\"gen_ai.tool.name\":\"overridden\"}";
  static const char *note =
      "{\"attributes\":{\"gen_ai.operation.name\":\"execute_tool\",\"gen_ai.tool.call.id\":"
      "\"call_7\",\"gen_ai.tool.name\":\"shell\",\"gen_ai.tool.type\":\"function\"},"
      "\"error\":{\"message\":\"exit status 1\",\"type\":\"ToolError\"},"
      "\"kind\":\"internal\",\"name\":\"execute_tool shell\"}";
  otel_attempt_facts f = {WF, 1, SEQ, 1, "session.tool", 1, NULL, 0, wattrs, note, 1000, 2000};
  return otel_attempt_span(t, &f, len);
}

static char *approval_approved(const otel_run_trace *t, size_t *len) {
  otel_approval_facts f = {
      WF,         1,
      SEQ,        "call_7-1a2b3c4d",
      "approved", "{\"approved\":true,\"approver\":\"bob\",\"reason\":\"looks fine\",\"request_id\":\"x\"}",
      1000,       2000};
  return otel_approval_span(t, &f, len);
}

static char *approval_timeout(const otel_run_trace *t, size_t *len) {
  otel_approval_facts f = {WF, 1, SEQ, "memory-1-00ff", "timeout", NULL, 1000, 2000};
  return otel_approval_span(t, &f, len);
}

static char *run_completed(const otel_run_trace *t, size_t *len) {
  otel_run_facts f = {WF, 1, "/srv/workflows/hello.lua", "completed", "{\"ok\":true}", NULL, 1000, 2000};
  return otel_run_span(t, &f, len);
}

static char *agent_failed(const otel_run_trace *t, size_t *len) {
  static const char *note =
      "{\"attributes\":{\"gen_ai.agent.name\":\"agent_session\",\"gen_ai.conversation.id\":"
      "\"pr-42\",\"gen_ai.operation.name\":\"invoke_agent\",\"gen_ai.provider.name\":\"openai\"}}";
  otel_run_facts f = {WF,
                      1,
                      "agent_session.lua",
                      "failed",
                      "{\"message\":\"invalid input: objective is missing\",\"type\":\"InvalidInput\"}",
                      note,
                      1000,
                      2000};
  return otel_run_span(t, &f, len);
}

static char *run_continued(const otel_run_trace *t, size_t *len) {
  otel_run_facts f = {WF, 2, "agent_session.lua", "continued", "{}", "{\"name\":\"my session\"}", 1000, 2000};
  return otel_run_span(t, &f, len);
}

static char *child_failed(const otel_run_trace *t, size_t *len) {
  otel_child_facts f = {WF,
                        1,
                        SEQ,
                        "pr-42.1",
                        "child_worker",
                        "ChildFailed",
                        "{\"child\":\"pr-42.1\",\"message\":\"boom\",\"type\":\"ChildBoom\"}",
                        1000,
                        2000};
  return otel_child_span(t, &f, len);
}

static const span_case CASES[] = {
    {"an activity attempt that succeeds",
     ok_attempt,
     NULL,
     "acts.echo",
     1,
     "attempt 1",
     "run",
     NULL,
     {{"engine.workflow.id", "{\"stringValue\":\"pr-42\"}"},
      {"engine.workflow.run", "{\"intValue\":\"1\"}"},
      {"engine.step.seq", "{\"intValue\":\"5\"}"},
      {"engine.activity.name", "{\"stringValue\":\"acts.echo\"}"},
      {"engine.activity.attempt", "{\"intValue\":\"1\"}"},
      {"engine.activity.idempotency_key", "{\"stringValue\":\"pr-42/1/5\"}"},
      {"error.type", NULL},
      {"engine.activity.retry_scheduled", NULL}}},
    {"an attempt that fails before a retry",
     retried_attempt,
     NULL,
     "acts.flaky",
     1,
     "attempt 2",
     "run",
     "attempt 2 fails",
     {{"engine.activity.attempt", "{\"intValue\":\"2\"}"},
      {"error.type", "{\"stringValue\":\"Flaky\"}"},
      {"engine.activity.retry_scheduled", "{\"boolValue\":true}"}}},
    {"an attempt that fails for good with no error type",
     failed_attempt,
     NULL,
     "acts.fail",
     1,
     "attempt 3",
     "run",
     "no type",
     {{"error.type", "{\"stringValue\":\"_OTHER\"}"}, {"engine.activity.retry_scheduled", "{\"boolValue\":false}"}}},
    {"a model turn (chat, CLIENT)",
     model_turn,
     NULL,
     "chat claude-sonnet-4-5",
     3,
     "attempt 1",
     "run",
     NULL,
     {{"gen_ai.operation.name", "{\"stringValue\":\"chat\"}"},
      {"gen_ai.provider.name", "{\"stringValue\":\"anthropic\"}"},
      {"gen_ai.request.model", "{\"stringValue\":\"claude-sonnet-4-5\"}"},
      {"gen_ai.response.model", "{\"stringValue\":\"claude-sonnet-4-5-20250929\"}"},
      {"gen_ai.response.id", "{\"stringValue\":\"msg_01\"}"},
      {"gen_ai.response.finish_reasons", "{\"arrayValue\":{\"values\":[{\"stringValue\":\"tool_calls\"}]}}"},
      {"gen_ai.usage.input_tokens", "{\"intValue\":\"1200\"}"},
      {"gen_ai.usage.output_tokens", "{\"intValue\":\"80\"}"},
      {"gen_ai.usage.cache_read.input_tokens", "{\"intValue\":\"1000\"}"},
      {"gen_ai.request.temperature", "{\"doubleValue\":0.2}"},
      {"gen_ai.request.stream", "{\"boolValue\":true}"},
      {"gen_ai.conversation.id", "{\"stringValue\":\"pr-42\"}"}}},
    {"a tool call that ran after an approval and failed",
     tool_call,
     NULL,
     "execute_tool shell",
     1,
     "attempt 1",
     "run",
     "exit status 1",
     {{"gen_ai.operation.name", "{\"stringValue\":\"execute_tool\"}"},
      {"gen_ai.tool.name", "{\"stringValue\":\"shell\"}"}, /* the activity's word over the workflow's */
      {"gen_ai.tool.call.id", "{\"stringValue\":\"call_7\"}"},
      {"engine.policy.decision", "{\"stringValue\":\"approve\"}"},
      {"engine.approval.approved", "{\"boolValue\":true}"},
      {"engine.approval.approver", "{\"stringValue\":\"alice\"}"},
      {"error.type", "{\"stringValue\":\"ToolError\"}"}}},
    {"an approval answered",
     approval_approved,
     NULL,
     "await_approval",
     1,
     "approval",
     "run",
     NULL,
     {{"engine.approval.request_id", "{\"stringValue\":\"call_7-1a2b3c4d\"}"},
      {"engine.approval.outcome", "{\"stringValue\":\"approved\"}"},
      {"engine.approval.approver", "{\"stringValue\":\"bob\"}"},
      {"engine.approval.reason", "{\"stringValue\":\"looks fine\"}"},
      {"engine.step.seq", "{\"intValue\":\"5\"}"}}},
    {"an approval that timed out",
     approval_timeout,
     NULL,
     "await_approval",
     1,
     "approval",
     "run",
     NULL,
     {{"engine.approval.outcome", "{\"stringValue\":\"timeout\"}"}, {"engine.approval.approver", NULL}}},
    {"a run that completes, started with no traceparent",
     run_completed,
     "{\"input\":{},\"seed\":\"00ff\"}",
     "invoke_workflow hello",
     1,
     NULL,
     NULL,
     NULL,
     {{"gen_ai.operation.name", "{\"stringValue\":\"invoke_workflow\"}"},
      {"gen_ai.workflow.name", "{\"stringValue\":\"hello\"}"},
      {"engine.workflow.status", "{\"stringValue\":\"completed\"}"},
      {"engine.step.seq", NULL},
      {"error.type", NULL}}},
    {"an agent session that fails, under a recorded traceparent",
     agent_failed,
     "{\"input\":{\"traceparent\":\"nested, not ours\"},\"seed\":\"00ff\",\"traceparent\":\"" TRACEPARENT "\"}",
     "invoke_agent agent_session",
     1,
     NULL,
     TP_SPAN,
     "invalid input: objective is missing",
     {{"gen_ai.operation.name", "{\"stringValue\":\"invoke_agent\"}"},
      {"gen_ai.agent.name", "{\"stringValue\":\"agent_session\"}"},
      {"gen_ai.provider.name", "{\"stringValue\":\"openai\"}"},
      {"gen_ai.conversation.id", "{\"stringValue\":\"pr-42\"}"},
      {"error.type", "{\"stringValue\":\"InvalidInput\"}"},
      {"engine.workflow.status", "{\"stringValue\":\"failed\"}"}}},
    {"a run that continues as new, named by the workflow",
     run_continued,
     "{\"input\":{},\"seed\":\"00ff\"}",
     "my session",
     1,
     NULL,
     NULL,
     NULL,
     {{"engine.workflow.run", "{\"intValue\":\"2\"}"}, {"engine.workflow.status", "{\"stringValue\":\"continued\"}"}}},
    {"a child that failed",
     child_failed,
     NULL,
     "child child_worker",
     1,
     "child",
     "run",
     "boom",
     {{"engine.child.id", "{\"stringValue\":\"pr-42.1\"}"},
      {"engine.child.outcome", "{\"stringValue\":\"ChildFailed\"}"},
      {"error.type", "{\"stringValue\":\"ChildBoom\"}"}}},
};

static void test_steps(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    const span_case *c = &CASES[i];
    int64_t run = strstr(c->what, "continues") ? 2 : 1;
    otel_run_trace t;
    otel_run_trace_of(WF, run, c->started, &t);
    size_t len = 0;
    char *span = c->build(&t, &len);
    if (!span || len != strlen(span)) fail_msg("%s: no span, or its length is wrong", c->what);
    char err[200];
    if (json_validate(span, err, sizeof err) != 0) fail_msg("%s: not JSON (%s): %s", c->what, err, span);
    char *v = member(span, "name");
    if (strcmp(v, c->name) != 0) fail_msg("%s: named \"%s\", not \"%s\"", c->what, v, c->name);
    free(v);
    v = member(span, "kind");
    if (atoi(v) != c->kind) fail_msg("%s: kind %s, not %d", c->what, v, c->kind);
    free(v);
    /* ids: from the log alone (otel_export.h) */
    char want[SPAN_ID_HEX];
    if (c->id_kind)
      span_id_of_step(WF, run, SEQ, c->id_kind, want);
    else
      span_id_of_step(WF, run, 0, "run", want);
    v = member(span, "spanId");
    if (strcmp(v, want) != 0) fail_msg("%s: span id %s, not %s", c->what, v, want);
    free(v);
    char trace[TRACE_ID_HEX];
    if (c->started && strstr(c->started, TRACEPARENT))
      snprintf(trace, sizeof trace, "%s", TP_TRACE);
    else
      trace_id_of_workflow(WF, trace);
    v = member(span, "traceId");
    if (strcmp(v, trace) != 0) fail_msg("%s: trace id %s, not %s", c->what, v, trace);
    free(v);
    v = member(span, "parentSpanId");
    const char *parent = c->parent && strcmp(c->parent, "run") == 0 ? t.run_span : c->parent;
    if ((parent == NULL) != (v == NULL) || (v && strcmp(v, parent) != 0))
      fail_msg("%s: parent %s, not %s", c->what, v ? v : "(none)", parent ? parent : "(none)");
    free(v);
    v = member(span, "startTimeUnixNano");
    assert_string_equal(v, "1000"); /* a decimal string, as OTLP/JSON writes 64-bit integers */
    free(v);
    v = member(span, "status");
    if (c->status) {
      char *want_status = json_quote(c->status), *text = util_fmt("{\"code\":2,\"message\":%s}", want_status);
      if (!v || strcmp(v, text) != 0) fail_msg("%s: status %s, not %s", c->what, v ? v : "(none)", text);
      free(want_status);
      free(text);
    } else if (v) {
      fail_msg("%s: a status %s on a step that went well", c->what, v);
    }
    free(v);
    for (size_t k = 0; k < sizeof c->attrs / sizeof c->attrs[0] && c->attrs[k].key; k++) {
      char *got = attr_of(span, c->attrs[k].key);
      if (!c->attrs[k].value && got) fail_msg("%s: %s = %s, expected none", c->what, c->attrs[k].key, got);
      if (c->attrs[k].value && (!got || strcmp(got, c->attrs[k].value) != 0))
        fail_msg("%s: %s = %s, not %s", c->what, c->attrs[k].key, got ? got : "(none)", c->attrs[k].value);
      free(got);
    }
    free(span);
  }
}

/* Each attempt of a step has its own span id; a replay of the same facts
 * gives the same bytes. */
static void test_attempts_distinct_and_stable(void **state) {
  (void)state;
  otel_run_trace t;
  otel_run_trace_of(WF, 1, NULL, &t);
  char *a = retried_attempt(&t, NULL), *b = retried_attempt(&t, NULL), *c = ok_attempt(&t, NULL);
  assert_string_equal(a, b);
  char *ida = member(a, "spanId"), *idc = member(c, "spanId");
  assert_string_not_equal(ida, idc);
  assert_string_not_equal(ida, t.run_span);
  free(ida);
  free(idc);
  free(a);
  free(b);
  free(c);
}

/* ---------------------------------------------------- attribute values --- */

static void test_attribute_values(void **state) {
  (void)state;
  otel_attrs a = {0};
  otel_attrs_str(&a, "s", "first");
  otel_attrs_int(&a, "i", -7);
  otel_attrs_bool(&a, "b", 0);
  otel_attrs_str(&a, "none", NULL); /* nothing */
  const char *obj =
      "{\"s\":\"second\",\"big\":9007199254740993,\"d\":1.5e3,\"t\":true,\"n\":null,"
      "\"arr\":[1,\"x\",2.5,null,[3]],\"o\":{\"k\":[1]},\"bad\":\"\\u00e9\\ud800\"}";
  assert_int_equal(otel_attrs_json(&a, obj, strlen(obj)), 0);
  assert_int_equal(otel_attrs_json(&a, "{\"x\":", 5), -1); /* cut: nothing added */
  assert_int_equal(otel_attrs_json(&a, "[1]", 3), -1);
  static const char *const want[][2] = {
      {"s", "{\"stringValue\":\"second\"}"}, /* a later value replaces, in the first's place */
      {"i", "{\"intValue\":\"-7\"}"},
      {"b", "{\"boolValue\":false}"},
      {"big", "{\"intValue\":\"9007199254740993\"}"}, /* past a double's integers, exact */
      {"d", "{\"doubleValue\":1.5e3}"},
      {"t", "{\"boolValue\":true}"},
      {"arr",
       "{\"arrayValue\":{\"values\":[{\"intValue\":\"1\"},{\"stringValue\":\"x\"},{\"doubleValue\":2.5},"
       "{\"stringValue\":\"[3]\"}]}}"},
      {"o", "{\"stringValue\":\"{\\\"k\\\":[1]}\"}"},        /* an object: its JSON text */
      {"bad", "{\"stringValue\":\"\xc3\xa9\xef\xbf\xbd\"}"}, /* a lone surrogate: U+FFFD */
  };
  assert_int_equal(a.n, sizeof want / sizeof want[0]);
  for (size_t i = 0; i < a.n; i++) {
    assert_string_equal(a.keys[i], want[i][0]);
    assert_string_equal(a.values[i], want[i][1]);
  }
  assert_string_equal(otel_attrs_text(&a, "s"), "second");
  assert_null(otel_attrs_text(&a, "i"));
  assert_null(otel_attrs_text(&a, "n"));
  otel_attrs_free(&a);
}

static void test_span_json(void **state) {
  (void)state;
  otel_attrs a = {0};
  otel_attrs_str(&a, "k", "line\nbreak \"quoted\" \x01 and \xff");
  /* an end before the start (an event's ms beside the wall clock's ns) is the start */
  otel_span s = {TP_TRACE, TP_SPAN, "", "n\"ame", OTEL_KIND_INTERNAL, 5000, 4000, NULL, NULL, &a};
  size_t len;
  char *j = otel_span_json(&s, &len);
  assert_string_equal(j, "{\"traceId\":\"" TP_TRACE "\",\"spanId\":\"" TP_SPAN
                         "\",\"name\":\"n\\\"ame\",\"kind\":1,"
                         "\"startTimeUnixNano\":\"5000\",\"endTimeUnixNano\":\"5000\",\"attributes\":[{\"key\":\"k\","
                         "\"value\":{\"stringValue\":\"line\\nbreak \\\"quoted\\\" \\u0001 and \xef\xbf\xbd\"}}]}");
  assert_int_equal(len, strlen(j));
  free(j);
  otel_attrs_free(&a);
}

/* ------------------------------------------------------- a run's trace --- */

static void test_run_trace(void **state) {
  (void)state;
  otel_run_trace t;
  char id[TRACE_ID_HEX], run[SPAN_ID_HEX];
  trace_id_of_workflow(WF, id);
  span_id_of_step(WF, 3, 0, "run", run);
  otel_run_trace_of(WF, 3, "{\"input\":{},\"seed\":\"00\",\"traceparent\":\"00-" TP_TRACE "-" TP_SPAN "-00\"}", &t);
  assert_string_equal(t.trace_id, TP_TRACE);
  assert_string_equal(t.parent, TP_SPAN);
  assert_int_equal(t.parent_sampled, 0);
  assert_string_equal(t.run_span, run);
  static const char *const own[] = {NULL, "{\"input\":{}}", "{\"traceparent\":\"00-zz\"}", "{\"traceparent\":7}",
                                    "not json"};
  for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
    otel_run_trace_of(WF, 3, own[i], &t);
    assert_string_equal(t.trace_id, id); /* the workflow's own trace */
    assert_string_equal(t.parent, "");
    assert_int_equal(t.parent_sampled, -1);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_steps),
      cmocka_unit_test(test_attempts_distinct_and_stable),
      cmocka_unit_test(test_attribute_values),
      cmocka_unit_test(test_span_json),
      cmocka_unit_test(test_run_trace),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
