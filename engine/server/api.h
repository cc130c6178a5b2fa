/* api: the HTTP API of `engine serve --listen` (routes under /v1, /healthz,
 * /metrics), on the worker's own loop: writes join the worker's batch and are
 * answered once committed; reads come from a read-only connection, so they
 * see only what is durable; live event streams (SSE) are fed after each
 * commit, and model text as it streams (agent.delta). */
#ifndef ENGINE_API_H
#define ENGINE_API_H

#include <stddef.h>

#include "engine.h"

typedef struct api api;

typedef struct api_options {
  const char *listen;        /* "127.0.0.1:7420" */
  const char *workflows_dir; /* where POST /v1/workflows finds scripts */
  int workflows_default;     /* it was not named: missing, the server runs without it */
} api_options;

/* The API's half of the worker's configuration (status, commit, live,
 * activity and usage callbacks): created before the worker, so that it hears
 * from its first commit on. */
api *api_new(void);
void api_engine_config(api *a, engine_config *cfg);

/* Opens the read connection and listens. Refuses a non-loopback address
 * while no API token exists. Returns 0, or -1 with err. */
int api_listen(api *a, engine *e, const api_options *o, char *err, size_t errlen);
/* The schedules serve fires, told to plan again after the API wrote one. */
struct schedules;
void api_set_schedules(api *a, struct schedules *s);
/* "http://127.0.0.1:7420" once listening. */
const char *api_url(const api *a);
/* A graceful stop begins (SIGTERM): no new connection or request, streams
 * end, the requests in flight are answered. 0 when none is in flight,
 * else 1 and drained(ud) runs once they have been answered. */
int api_drain(api *a, void (*drained)(void *ud), void *ud);
/* Ends every stream and closes the server; before engine_free. */
void api_stop(api *a);
void api_free(api *a);

/* The span exporter's counts (otel_export.h) into m, declaring their
 * families on first use: engine_otel_spans_total{outcome},
 * engine_otel_exports_total{result}, engine_otel_queue_spans. GET /metrics
 * calls it only while tracing is on, so an engine that does not trace shows
 * none of them (public for its unit test). */
struct metrics;
struct otel_stats;
void api_metrics_otel(struct metrics *m, const struct otel_stats *s);

/* The routes the server answers, for the OpenAPI check: method and path
 * pattern ("/v1/workflows/{id}") of route i, 0 past the last one. */
int api_route(size_t i, const char **method, const char **pattern);

#endif
