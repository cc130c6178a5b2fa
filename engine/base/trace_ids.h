/* trace_ids: the W3C trace context (traceparent) and the ids of a workflow's
 * spans, derived from what the log records (the workflow id, its run, a
 * step's seq), never drawn at random: a replay, a restart or another worker
 * taking the workflow over names every span the same, so an exporter can
 * never send one span under two ids.
 *
 *   traceparent: "00-" 32 hex trace id "-" 16 hex parent id "-" 2 hex flags
 *   (https://www.w3.org/TR/trace-context/), lowercase; an all-zero id is
 *   invalid. */
#ifndef ENGINE_TRACE_IDS_H
#define ENGINE_TRACE_IDS_H

#include <stddef.h>
#include <stdint.h>

#define TRACE_ID_HEX 33 /* 32 hex digits and the NUL */
#define SPAN_ID_HEX 17  /* 16 hex digits and the NUL */
#define TRACEPARENT_LEN 56 /* "00-" 32 "-" 16 "-" 2, and the NUL */

typedef struct trace_ctx {
  char trace_id[TRACE_ID_HEX];
  char span_id[SPAN_ID_HEX]; /* the caller's span: the parent of ours */
  int sampled;               /* flags bit 0 */
} trace_ctx;

/* Parses a traceparent header's value (surrounding spaces and tabs allowed).
 * Version 00 exactly as specified; a later version's first four fields are
 * read and the rest ignored, as the spec asks. 0 when it is not one, with
 * why in err. */
int traceparent_parse(const char *s, trace_ctx *out, char *err, size_t errlen);
/* out: TRACEPARENT_LEN bytes */
void traceparent_format(const char *trace_id, const char *span_id, int sampled, char *out);
/* 1 when s is lowercase hex of exactly len digits, not all zero */
int trace_hex_valid(const char *s, size_t len);

/* The trace of a workflow started with no traceparent: from its id. */
void trace_id_of_workflow(const char *workflow_id, char out[TRACE_ID_HEX]);
/* A span of a workflow: the run's own span is (run, 0, "run"); a step's is
 * (run, seq, kind) with kind naming what the span is ("activity", "attempt
 * 3", "approval", ...), so two spans of one step differ. */
void span_id_of_step(const char *workflow_id, int64_t run, int64_t seq, const char *kind, char out[SPAN_ID_HEX]);

#endif
