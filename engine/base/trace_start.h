/* trace_start: the W3C trace context a workflow's start records, and the
 * trace each run of it belongs to.
 *
 * A caller that sends a traceparent (the HTTP API's and a webhook's
 * traceparent and tracestate headers, `engine start --traceparent` or
 * TRACEPARENT, a parent workflow starting a child) has it recorded in the
 * run's WorkflowStarted payload:
 *
 *   {"input":...,"seed":"...","traceparent":"00-...-...-01","tracestate":"k=v"}
 *
 * so a replay, a restart or another worker reads the same trace from the log.
 * A run without one has a trace of its own, trace_id_of_workflow(id)
 * (trace_ids.h). trace_of_run is the one place that reads it: the spans, the
 * outgoing requests, the children and the log lines all go through it. */
#ifndef ENGINE_TRACE_START_H
#define ENGINE_TRACE_START_H

#include <stddef.h>
#include <stdint.h>

#include "trace_ids.h"

/* A tracestate longer than this (once its optional spaces are out) is
 * dropped whole: the W3C spec asks a vendor to pass on at least 512
 * characters, and the log need not keep more. */
#define TRACESTATE_MAX 512

/* What a start records of its caller's trace; empty strings for none. */
typedef struct trace_start {
  char traceparent[TRACEPARENT_LEN]; /* version 00, lowercase, as re-formatted */
  char tracestate[TRACESTATE_MAX + 1];
} trace_start;

/* Reads a caller's traceparent and tracestate (either may be NULL) into
 * *out. 1 when traceparent is valid: it is kept (as version 00, its sampled
 * flag kept), and tracestate too when it is valid and at most TRACESTATE_MAX
 * bytes, else dropped with why in note ("" when kept or absent). 0 when
 * traceparent is absent (why "") or invalid (why says how): *out is empty
 * and tracestate is ignored with it, as the spec asks. */
int trace_start_read(const char *traceparent, const char *tracestate, trace_start *out, char *why, size_t whylen,
                     char *note, size_t notelen);

/* 1 when tracestate is a valid W3C list (at most 32 members, keys unique),
 * its normalized form (no optional spaces, no empty members) in
 * out[outlen]; 0 with why when it is not one or does not fit. */
int tracestate_normalize(const char *tracestate, char *out, size_t outlen, char *why, size_t whylen);

/* The members to add to a WorkflowStarted payload after "seed":
 * ,"traceparent":"...","tracestate":"..." (malloc'd; "" for none or NULL). */
char *trace_start_members(const trace_start *t);

/* What a WorkflowStarted payload recorded: 1 with *out when it holds a valid
 * traceparent (and its tracestate, if any), else 0 with *out empty. */
int trace_start_of_payload(const char *started_payload, trace_start *out);

/* The trace of run of workflow_id whose WorkflowStarted payload is
 * started_payload: 1 when the payload recorded a caller's traceparent (out
 * is its trace id, the caller's span as span_id, its sampled flag), else 0
 * with out the workflow's own trace (trace_id_of_workflow), span_id "" and
 * sampled -1. */
int trace_of_run(const char *workflow_id, const char *started_payload, trace_ctx *out);
/* The same from what the start recorded (trace_start_of_payload's answer;
 * empty: none), for a caller that wants both without reading the payload
 * twice. */
int trace_of_start(const char *workflow_id, const trace_start *recorded, trace_ctx *out);

/* The traceparent a step of a run hands on (an attempt's requests, a
 * child's start): 00-{run's trace id}-{span_id_of_step(workflow_id, run,
 * seq, kind)}-{flags}, flags the caller's recorded sampled flag, else 01.
 * out: TRACEPARENT_LEN bytes. */
void trace_step_parent(const trace_ctx *run_trace, const char *workflow_id, int64_t run, int64_t seq, const char *kind,
                       char *out);

/* Whether a run's steps hand their traceparent on in outgoing requests:
 * when tracing is on (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
 * OTEL_EXPORTER_OTLP_ENDPOINT set, as for the exporter) and OTEL_PROPAGATORS,
 * when set, names tracecontext. A user who never turned tracing on sends no
 * extra header to a model provider (docs/tracing.md, Trace context propagation). */
int trace_propagate_outgoing(void);

#endif
