/* metrics: a small registry of counters, gauges and histograms, rendered on
 * request in the Prometheus text exposition format 0.0.4 (GET /metrics).
 *
 * A family is a metric name with its type and help; a series is one set of
 * label values in it. Label values are escaped when rendered (\\, \", \n);
 * label names and metric names are the caller's constants. Everything runs on
 * the engine's loop thread: no locks. */
#ifndef ENGINE_METRICS_H
#define ENGINE_METRICS_H

#include <stddef.h>

typedef struct metrics metrics;

typedef enum { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM } metric_type;

metrics *metrics_new(void);
void metrics_free(metrics *m);

/* Declares family name (once; a second call with the same name is ignored).
 * Histograms get buckets (upper bounds, increasing; +Inf is implied), or the
 * default latency buckets 1 ms .. 60 s when nbuckets is 0. Series of a family
 * appear in the output even before a value is recorded only if declared with
 * a value. A use of an undeclared name declares it untyped-as-gauge. */
void metrics_declare(metrics *m, const char *name, metric_type type, const char *help, const double *buckets,
                     size_t nbuckets);

/* labels: NULL, or a NULL-terminated list of name, value, name, value, ... */
void metrics_add(metrics *m, const char *name, const char *const *labels, double delta);   /* counter or gauge */
void metrics_set(metrics *m, const char *name, const char *const *labels, double value);   /* gauge */
void metrics_observe(metrics *m, const char *name, const char *const *labels, double value); /* histogram */
/* Drops every series of a gauge family (scrape-time gauges are set afresh). */
void metrics_clear(metrics *m, const char *name);

/* The whole registry as text format 0.0.4 (# HELP, # TYPE, series sorted by
 * family then labels; histograms as _bucket{le=...} cumulative, _sum, _count).
 * Malloc'd. */
char *metrics_render(const metrics *m);

#endif
