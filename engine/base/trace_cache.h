/* trace_cache: the trace of each workflow's current run as this process last
 * read it from the log (trace_start.h), so that a log line, an activity's
 * outgoing request or a child's start names it without reading the log
 * again. The worker puts a run's trace each time it loads the run; anyone
 * gets it. Bounded: past TRACE_CACHE_MAX workflows it starts over, and the
 * next load of each run puts it back. One map per process, used on the
 * loop's thread only. */
#ifndef ENGINE_TRACE_CACHE_H
#define ENGINE_TRACE_CACHE_H

#include <stdint.h>

#include "trace_ids.h"

#define TRACE_CACHE_MAX 65536

/* What is kept of a run. */
typedef struct run_trace {
  int64_t run;
  trace_ctx ctx;              /* trace_of_run's answer: span_id the caller's, "" for none */
  char run_span[SPAN_ID_HEX]; /* span_id_of_step(id, run, 0, "run") */
  char *tracestate;           /* the caller's, or NULL */
} run_trace;

/* Keeps the trace of run of workflow id (from its WorkflowStarted payload,
 * trace_of_run), replacing what was kept of an earlier run. */
void trace_cache_put(const char *id, int64_t run, const char *started_payload);
/* What is kept of workflow id: of run (0: whichever run was put last), or
 * NULL. The pointer lasts until the next put or clear. */
const run_trace *trace_cache_get(const char *id, int64_t run);
void trace_cache_clear(void);

#endif
