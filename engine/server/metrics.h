/* metrics: a small registry of counters, gauges and histograms, rendered on
 * request in the Prometheus text exposition format 0.0.4 (GET /metrics).
 *
 * A family is a metric name with its type and help; a series is one set of
 * label values in it. Label values are escaped when rendered (\\, \", \n);
 * label names and metric names are the caller's constants. Everything runs on
 * the engine's loop thread: no locks.
 *
 * Bounded memory: label values can come from scripts (an activity's name), so
 * a family holds at most METRICS_MAX_SERIES label sets; past that, a new label
 * set is counted in one series whose label values are all "_other" (the
 * existing series go on counting). A label value keeps at most
 * METRICS_MAX_VALUE_BYTES bytes (cut at a character boundary); invalid UTF-8
 * in it is shown as U+FFFD, and so is every control character but newline
 * (escaped \n), so the output is valid UTF-8 and inert on a terminal.
 *
 * Misuse by the caller (a name that is not a Prometheus name, a label named
 * "le" on a histogram, a counter going down, observe on a counter, ...) drops
 * that use and says so once per family on stderr ("engine: metrics: ..."):
 * an invalid line would spoil the whole scrape. */
#ifndef ENGINE_METRICS_H
#define ENGINE_METRICS_H

#include <stddef.h>

#define METRICS_MAX_SERIES 1000
#define METRICS_MAX_VALUE_BYTES 256

typedef struct metrics metrics;

typedef enum { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM } metric_type;

metrics *metrics_new(void);
void metrics_free(metrics *m);

/* Declares family name (once; a second call with the same name is ignored).
 * Histograms get buckets (upper bounds, increasing; +Inf is implied), or the
 * default latency buckets 1 ms .. 60 s when nbuckets is 0. A family without
 * series is rendered as its # HELP and # TYPE lines alone: a series appears
 * once a value is recorded for it (metrics_add(m, name, labels, 0) shows a
 * counter at 0). A use of an undeclared name declares it untyped-as-gauge
 * (observe: a histogram with the default buckets), without help; a later
 * declaration of that name takes effect (keeping its series when their shape
 * fits).
 * Bounds that are not finite and increasing are reported; the default
 * buckets stand in for them (a trailing +Inf is fine: it is implied). */
void metrics_declare(metrics *m, const char *name, metric_type type, const char *help, const double *buckets,
                     size_t nbuckets);

/* labels: NULL, or a NULL-terminated list of name, value, name, value, ... */
void metrics_add(metrics *m, const char *name, const char *const *labels, double delta); /* counter or gauge */
/* gauge; or a counter mirrored from a count kept elsewhere (the store) */
void metrics_set(metrics *m, const char *name, const char *const *labels, double value);
void metrics_observe(metrics *m, const char *name, const char *const *labels, double value); /* histogram */
/* Drops every series of a family, keeping its declaration (scrape-time
 * gauges are set afresh; on a counter it reads as a reset). */
void metrics_clear(metrics *m, const char *name);

/* The whole registry as text format 0.0.4 (# HELP, # TYPE, series sorted by
 * family then labels; histograms as _bucket{le=...} cumulative, _sum, _count).
 * Malloc'd. */
char *metrics_render(const metrics *m);

#endif
