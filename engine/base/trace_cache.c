/* trace_cache: see trace_cache.h. */
#include "trace_cache.h"

#include <stdlib.h>
#include <string.h>

#include "trace_start.h"
#include "util.h"

static strmap cache; /* workflow id -> run_trace* */
static int ready;

static void free_entry(void *p) {
  run_trace *t = p;
  if (!t) return;
  free(t->tracestate);
  free(t);
}

void trace_cache_put(const char *id, int64_t run, const char *started_payload) {
  if (!ready) {
    strmap_init(&cache);
    ready = 1;
  }
  run_trace *t = strmap_get(&cache, id);
  if (!t) {
    if (cache.len >= TRACE_CACHE_MAX) strmap_clear(&cache, free_entry); /* start over: the loads refill it */
    t = util_xcalloc(1, sizeof *t);
    strmap_put(&cache, id, t);
  }
  free(t->tracestate);
  t->tracestate = NULL;
  t->run = run;
  trace_start rec;
  trace_start_of_payload(started_payload, &rec); /* one read of the payload, however big its input */
  if (trace_of_start(id, &rec, &t->ctx) && rec.tracestate[0]) t->tracestate = util_strdup(rec.tracestate);
  span_id_of_step(id, run, 0, "run", t->run_span);
}

const run_trace *trace_cache_get(const char *id, int64_t run) {
  if (!ready || !id) return NULL;
  const run_trace *t = strmap_get(&cache, id);
  return t && (run == 0 || t->run == run) ? t : NULL;
}

void trace_cache_clear(void) {
  if (ready) strmap_clear(&cache, free_entry);
}
