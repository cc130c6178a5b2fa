/* otel_config: the span exporter's settings (otel_export.c), read from the
 * standard OpenTelemetry SDK variables, which the configuration file's
 * otel_* keys set when the environment does not (settings.c):
 *
 *   on or off        OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER (otlp, none),
 *                    and an endpoint: none set means off
 *   where            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else
 *                    OTEL_EXPORTER_OTLP_ENDPOINT + "/v1/traces"
 *   how              _HEADERS, _TIMEOUT, _PROTOCOL (each with its _TRACES_
 *                    form, which wins); http/json only
 *   what it says     OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, and the
 *                    SDK's own attributes (telemetry.sdk.*, service.version)
 *   which traces     OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG
 *   when             OTEL_BSP_SCHEDULE_DELAY, _MAX_QUEUE_SIZE,
 *                    _MAX_EXPORT_BATCH_SIZE, _EXPORT_TIMEOUT
 *
 * An empty variable is an unset one (the spec's rule). A bad value is an
 * error naming the variable and its value, shown terminal-safe: the engine
 * refuses to start rather than run untraced without a word (the spec would
 * warn and ignore; an operator who set tracing up wants to know). */
#ifndef ENGINE_OTEL_CONFIG_H
#define ENGINE_OTEL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

/* The sampler of a trace without a parent (a root), or of every trace
 * without parent_based. */
typedef enum { OTEL_ROOT_ALWAYS_ON, OTEL_ROOT_ALWAYS_OFF, OTEL_ROOT_RATIO } otel_root_sampler;

typedef struct otel_config {
  char *url;         /* where a batch is POSTed */
  char *url_shown;   /* url for the log: without a user:password@ or a ?query (either may hold a key) */
  char **headers;    /* "Name: value" lines: the configured ones, Content-Type, User-Agent */
  size_t nheaders;
  long timeout_ms;   /* one request at most (OTEL_EXPORTER_OTLP_TIMEOUT); 0: no limit */
  char *resource;    /* the resource's attributes: an OTLP JSON array of KeyValue */
  char *version;     /* the engine's, the scope's version */
  otel_root_sampler root;
  int parent_based;  /* the parentbased_* samplers: a parent's flag decides */
  double ratio;      /* traceidratio's */
  uint64_t threshold; /* ratio's rejection threshold on a trace id's last 56 bits */
  long schedule_delay_ms, export_timeout_ms; /* export_timeout 0: no limit */
  size_t max_queue, max_batch;
} otel_config;

/* Reads the variables into *c: 1 when tracing is on (c filled, to be freed
 * with otel_config_free), 0 when it is off, -1 with err when a variable is
 * bad. */
int otel_config_read(otel_config *c, char *err, size_t errlen);
void otel_config_free(otel_config *c);

#endif
