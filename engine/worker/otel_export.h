/* otel_export: spans sent to an OpenTelemetry collector over OTLP/HTTP
 * (JSON encoding of ExportTraceServiceRequest, POST {endpoint}/v1/traces),
 * through the loop's own libcurl multi (vm/http.h): batched by size and by
 * delay, a bounded queue whose drops are counted, retries with backoff as the
 * OTLP spec asks (429/502/503/504, Retry-After), never blocking the loop.
 *
 * Configured by the standard variables (OTEL_EXPORTER_OTLP_ENDPOINT,
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS,
 * OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and its
 * _ARG, OTEL_BSP_*), or the configuration file's keys that set them. Off
 * when no endpoint is set: then otel_exporter_new returns NULL and every
 * producer checks for NULL before it builds anything, so tracing that is off
 * costs a pointer test.
 *
 * Span ids (engine/base/trace_ids.h), the one convention every producer
 * uses so a replay or another worker names a span the same:
 *   trace id       the traceparent recorded in the run's WorkflowStarted
 *                  payload ("traceparent"), else trace_id_of_workflow(id)
 *   run span       span_id_of_step(id, run, 0, "run"); its parent is the
 *                  recorded traceparent's span id, if any
 *   activity       span_id_of_step(id, run, seq, "attempt N"): one per
 *                  attempt (N from 1), seq the ActivityScheduled event's;
 *                  the parent is the run span; outgoing requests made by the
 *                  attempt (model, MCP, GitHub) carry it as traceparent
 *   approval wait  span_id_of_step(id, run, seq, "approval"), seq the wait's
 *   child run      a child's WorkflowStarted records the traceparent of
 *                  span_id_of_step(parent, run, seq, "child"), seq the
 *                  ChildStarted step's, so the child's trace is the parent's */
#ifndef ENGINE_OTEL_EXPORT_H
#define ENGINE_OTEL_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct otel_exporter otel_exporter;
struct http_ctx;

typedef struct otel_stats {
  uint64_t spans_queued;    /* accepted into the queue */
  uint64_t spans_exported;  /* in a request the collector answered 2xx (less its rejected_spans) */
  uint64_t spans_dropped_queue_full;
  uint64_t spans_dropped_export; /* in a batch given up on (a 4xx, retries spent, the stop's bound) */
  uint64_t spans_rejected;  /* partial_success.rejectedSpans */
  uint64_t spans_dropped_invalid; /* not one JSON object: dropped before the queue (a producer's bug) */
  uint64_t exports_ok, exports_failed, export_retries;
  size_t queue_len;         /* waiting for their batch */
  size_t in_flight;         /* in the batch being sent (or waiting for its retry) */
} otel_stats;

/* Reads the configuration from the environment. NULL with *err empty when
 * no endpoint is set (tracing off), NULL with err set when a variable is bad
 * (naming it and its value), else an exporter using http, or with http
 * NULL an HTTP client of its own on loop (a collector that hangs then holds
 * none of the activities' connections), freed with it. */
otel_exporter *otel_exporter_new(uv_loop_t *loop, struct http_ctx *http, char *err, size_t errlen);
/* Checks the configuration without starting anything: 0 when tracing is
 * off or configured right, -1 with err as otel_exporter_new's (the CLI
 * refuses to start with it, exit 2). */
int otel_config_check(char *err, size_t errlen);
/* Whether spans of this trace are kept (the sampler). parent_sampled: the
 * recorded traceparent's flag, or -1 with none (the parentbased samplers
 * follow it). */
int otel_sampled(const otel_exporter *x, const char *trace_id_hex, int parent_sampled);
/* Queues one span: span_json is one OTLP JSON Span object ({"traceId":...,
 * "spanId":..., "name":..., "kind":..., "startTimeUnixNano":"...",
 * "endTimeUnixNano":"...", "attributes":[...], ...}), copied. A full queue
 * drops it (counted). Never blocks. */
void otel_export_span(otel_exporter *x, const char *span_json, size_t len);
/* At a stop: sends what is queued at once, batch after batch, for at most
 * the export timeout (OTEL_BSP_EXPORT_TIMEOUT; spans it could not send are
 * counted dropped_export), then calls done(ud) once, from the loop (never
 * from inside this call): run the loop until then. Spans queued meanwhile
 * go too. Then otel_exporter_free. */
void otel_exporter_flush(otel_exporter *x, void (*done)(void *ud), void *ud);
/* Drops what is queued or in flight and frees the exporter; its handles
 * close on the loop (run it, as uvloop_drain does). NULL is fine. */
void otel_exporter_free(otel_exporter *x);
void otel_exporter_stats(const otel_exporter *x, otel_stats *out);

#endif
