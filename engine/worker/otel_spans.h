/* otel_spans: the OTLP span (JSON encoding) of one recorded step, built
 * from that step's facts alone: pure functions, no store, no clock, so a
 * unit test states exactly what a step exports. otel_steps.c gathers the
 * facts where the worker appends an outcome and hands the spans to the
 * exporter once that outcome is committed.
 *
 * The spans of a run (ids: trace_ids.h, the convention otel_export.h states):
 *
 *   invoke_workflow {script}   the run, INTERNAL, from its WorkflowStarted to
 *     or invoke_agent {name}   its end; the workflow may describe itself with
 *                              wf.span{} (an agent session does)
 *   {activity} | chat {model}  one per activity attempt, child of the run,
 *     | execute_tool {tool}    from the attempt's begin to its result; the
 *                              activity may describe it with activity.span{},
 *                              the workflow with the option span_attributes
 *   await_approval             a wait on the signal approval:RID, from the
 *                              wait to its answer (or timeout, or cancel)
 *   child {script}             a child workflow, from ChildStarted to its end
 *                              as the parent learns it; the child's own run
 *                              span is its child in the trace
 *
 * Attribute values follow OTLP/JSON: strings as stringValue, integers as
 * intValue (a decimal string), other numbers as doubleValue, booleans as
 * boolValue, arrays as arrayValue; an object is recorded as its JSON text (a
 * string), as the GenAI conventions allow on spans. Every string is made
 * valid UTF-8 (json_quote). */
#ifndef ENGINE_OTEL_SPANS_H
#define ENGINE_OTEL_SPANS_H

#include <stddef.h>
#include <stdint.h>

#include "trace_ids.h"

#define OTEL_KIND_INTERNAL 1
#define OTEL_KIND_CLIENT 3

/* ---- attributes: an ordered set, a later value of a key replacing the earlier ---- */
typedef struct otel_attrs {
  char **keys;
  char **values; /* the OTLP AnyValue JSON: {"stringValue":"..."} */
  char **texts;  /* a string value as it is (NULL for the other types): names read it */
  size_t n, cap;
} otel_attrs;

void otel_attrs_str(otel_attrs *a, const char *key, const char *v); /* v NULL: nothing */
void otel_attrs_int(otel_attrs *a, const char *key, int64_t v);
void otel_attrs_bool(otel_attrs *a, const char *key, int v);
/* Each member of the JSON object obj[0..n) as an attribute (null members
 * skipped). 0, or -1 when obj is not a well-formed object (nothing added). */
int otel_attrs_json(otel_attrs *a, const char *obj, size_t n);
/* The string value of key, or NULL. */
const char *otel_attrs_text(const otel_attrs *a, const char *key);
void otel_attrs_free(otel_attrs *a);

/* ---- one span ---- */
typedef struct otel_span {
  const char *trace_id, *span_id;
  const char *parent_id; /* NULL or "": a root span */
  const char *name;
  int kind;
  int64_t start_ns, end_ns;
  /* status: ERROR with this message when error_type is set (and error.type
   * among the attributes), else unset */
  const char *error_type, *error_message;
  const otel_attrs *attrs;
} otel_span;
/* The span as one OTLP JSON Span object, malloc'd (its length in *len). */
char *otel_span_json(const otel_span *s, size_t *len);

/* ---- the trace a run's spans belong to ---- */
typedef struct otel_run_trace {
  char trace_id[TRACE_ID_HEX];
  char run_span[SPAN_ID_HEX];
  char parent[SPAN_ID_HEX]; /* the recorded traceparent's span id, or "" */
  int parent_sampled;       /* its flag, or -1 with none (otel_sampled) */
} otel_run_trace;
/* From the run's WorkflowStarted payload: its "traceparent" when it holds a
 * valid one, else the workflow's own trace (trace_id_of_workflow). */
void otel_run_trace_of(const char *wf_id, int64_t run, const char *started_payload, otel_run_trace *out);

/* ---- the steps: each returns the span JSON, malloc'd ---- */

/* A run's end: completed, failed, cancelled, or continued as new. */
typedef struct otel_run_facts {
  const char *wf_id;
  int64_t run;
  const char *script;          /* the script's file name: "agent_session.lua" */
  const char *status;          /* completed | failed | cancelled | continued */
  const char *result_or_error; /* the terminal event's payload: the error of a failed run */
  const char *annotation;      /* what the workflow said with wf.span{} (JSON), or NULL */
  int64_t start_ns, end_ns;
} otel_run_facts;
char *otel_run_span(const otel_run_trace *t, const otel_run_facts *f, size_t *len);

/* An activity attempt's end: its outcome, or its failure before a retry. */
typedef struct otel_attempt_facts {
  const char *wf_id;
  int64_t run, seq;
  int attempt; /* from 1 */
  const char *name;
  int ok;
  const char *error;          /* the failure's JSON {"type":..,"message":..} when !ok */
  int retry_scheduled;        /* it failed and another attempt follows */
  const char *workflow_attrs; /* the command's option span_attributes (a JSON object), or NULL */
  const char *annotation;     /* what the activity said with activity.span{} (JSON), or NULL */
  int64_t start_ns, end_ns;
} otel_attempt_facts;
char *otel_attempt_span(const otel_run_trace *t, const otel_attempt_facts *f, size_t *len);

/* A wait on the signal approval:RID ended. */
typedef struct otel_approval_facts {
  const char *wf_id;
  int64_t run, seq; /* the wait's (SignalWaitStarted) */
  const char *request_id;
  const char *outcome; /* approved | denied | timeout | cancelled */
  const char *answer;  /* the signal's payload {approved, approver, reason} when answered, or NULL */
  int64_t start_ns, end_ns;
} otel_approval_facts;
char *otel_approval_span(const otel_run_trace *t, const otel_approval_facts *f, size_t *len);

/* A child workflow's end, as its parent records it. */
typedef struct otel_child_facts {
  const char *wf_id;
  int64_t run, seq;    /* the parent's, and its ChildStarted's seq */
  const char *child;   /* the child's id */
  const char *script;  /* its script as the command names it, or NULL */
  const char *outcome; /* ChildCompleted | ChildFailed | ChildCancelled */
  const char *payload; /* the outcome's payload (the error of a failed one) */
  int64_t start_ns, end_ns;
} otel_child_facts;
char *otel_child_span(const otel_run_trace *t, const otel_child_facts *f, size_t *len);

#endif
