/* api_metrics: GET /metrics, the engine's metrics in the Prometheus text
 * format (metrics.c): what the worker's callbacks counted (api.c), what is
 * read from the store when asked, and the span exporter's counts while
 * tracing is on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "approval.h"
#include "otel_export.h"

/* ----------------------------------------------------------- metrics --- */

static const double COMMIT_BUCKETS[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000};

void api_declare_metrics(metrics *m) {
  metrics_declare(m, "engine_workflows", METRIC_GAUGE, "Workflows by status.", NULL, 0);
  metrics_declare(m, "engine_activity_duration_seconds", METRIC_HISTOGRAM,
                  "Activity attempts by name and outcome, from start to end.", NULL, 0);
  metrics_declare(m, "engine_tasks", METRIC_GAUGE, "Durable tasks queued, by kind (workflow, activity, timer, ...).",
                  NULL, 0);
  metrics_declare(m, "engine_timers_pending", METRIC_GAUGE, "Durable timers not yet fired.", NULL, 0);
  metrics_declare(m, "engine_commits_total", METRIC_COUNTER, "Group commits of the worker's batches.", NULL, 0);
  metrics_declare(m, "engine_store_round_trips_total", METRIC_COUNTER,
                  "Round trips the worker's loop waited for the database server (PostgreSQL; 0 on SQLite).", NULL, 0);
  metrics_declare(m, "engine_wal_checkpoints_total", METRIC_COUNTER,
                  "SQLite's WAL copied into the database file: in the background (off the commits' path), or "
                  "in_commit (a commit reached the WAL's bound and waited for it). 0 on PostgreSQL.",
                  NULL, 0);
  metrics_declare(m, "engine_commit_writes", METRIC_HISTOGRAM, "Rows written per group commit.", COMMIT_BUCKETS,
                  sizeof COMMIT_BUCKETS / sizeof *COMMIT_BUCKETS);
  metrics_declare(m, "engine_start_commits_total", METRIC_COUNTER,
                  "Commits of the start lane by outcome (PostgreSQL: the API's starts, committed on connections of "
                  "their own; engine_commits_total counts the worker's).",
                  NULL, 0);
  metrics_declare(m, "engine_start_commit_starts", METRIC_HISTOGRAM, "Starts per commit of the start lane.",
                  COMMIT_BUCKETS, sizeof COMMIT_BUCKETS / sizeof *COMMIT_BUCKETS);
  metrics_declare(m, "engine_http_connections", METRIC_GAUGE, "Open HTTP connections.", NULL, 0);
  metrics_declare(m, "engine_sse_streams", METRIC_GAUGE, "Open Server-Sent Events streams.", NULL, 0);
  metrics_declare(m, "engine_sandboxes_live", METRIC_GAUGE, "Sandboxes of unfinished sessions.", NULL, 0);
  metrics_declare(m, "engine_model_tokens_total", METRIC_COUNTER, "Model tokens by provider and kind.", NULL, 0);
  metrics_declare(m, "engine_approvals_pending", METRIC_GAUGE, "Approval requests waiting for an answer.", NULL, 0);
  metrics_declare(m, "engine_slots", METRIC_GAUGE, "Slots of concurrency limits and caps, held or queued, by pool.",
                  NULL, 0);
}

void api_metrics_otel(metrics *m, const otel_stats *s) {
  metrics_declare(m, "engine_otel_spans_total", METRIC_COUNTER,
                  "Spans of the OpenTelemetry exporter by outcome: exported (the collector took them), "
                  "dropped_queue_full, dropped_export (their batch was given up on), rejected (by the collector), "
                  "dropped_invalid (not one JSON object).",
                  NULL, 0);
  metrics_declare(m, "engine_otel_exports_total", METRIC_COUNTER,
                  "Export requests of the OpenTelemetry exporter: ok (a batch taken), failed (a batch given up on), "
                  "retry (a request tried again).",
                  NULL, 0);
  metrics_declare(m, "engine_otel_queue_spans", METRIC_GAUGE,
                  "Spans waiting for their batch (OTEL_BSP_MAX_QUEUE_SIZE at most).", NULL, 0);
  const struct {
    const char *label;
    uint64_t n;
  } spans[] = {{"exported", s->spans_exported},
               {"dropped_queue_full", s->spans_dropped_queue_full},
               {"dropped_export", s->spans_dropped_export},
               {"rejected", s->spans_rejected},
               {"dropped_invalid", s->spans_dropped_invalid}},
    exports[] = {{"ok", s->exports_ok}, {"failed", s->exports_failed}, {"retry", s->export_retries}};
  for (size_t i = 0; i < sizeof spans / sizeof *spans; i++) {
    const char *labels[] = {"outcome", spans[i].label, NULL};
    metrics_set(m, "engine_otel_spans_total", labels, (double)spans[i].n); /* mirrored from the exporter's count */
  }
  for (size_t i = 0; i < sizeof exports / sizeof *exports; i++) {
    const char *labels[] = {"result", exports[i].label, NULL};
    metrics_set(m, "engine_otel_exports_total", labels, (double)exports[i].n);
  }
  metrics_set(m, "engine_otel_queue_spans", NULL, (double)s->queue_len);
}

typedef struct group_ctx {
  metrics *m;
  const char *family, *label;
  int64_t timers;
} group_ctx;

static int set_group(void *ud, const char *key, int64_t n) {
  group_ctx *g = ud;
  if (g->label) {
    const char *labels[] = {g->label, key ? key : "", NULL};
    metrics_set(g->m, g->family, labels, (double)n);
  } else {
    metrics_set(g->m, g->family, NULL, (double)n);
  }
  if (key && strcmp(key, "timer") == 0) g->timers = n;
  return 0;
}

/* key "POOL\x1fSTATE" (store_group_count) */
static int set_slots(void *ud, const char *key, int64_t n) {
  metrics *m = ud;
  const char *us = key ? strrchr(key, '\x1f') : NULL;
  if (!us) return 0;
  char pool[160];
  snprintf(pool, sizeof pool, "%.*s", (int)(us - key), key);
  const char *labels[] = {"pool", pool, "state", us + 1, NULL};
  metrics_set(m, "engine_slots", labels, (double)n);
  return 0;
}

static int count_one(void *ud, const approval_request *p) {
  (void)p;
  ((approvals_ctx *)ud)->n++;
  return 0;
}

static int count_pending(void *ud, const wf_row *w) {
  approvals_ctx *x = ud;
  char err[256];
  approval_each_pending(x->a->rd, w->id, count_one, x, err, sizeof err);
  return 0;
}

void api_h_metrics(api *a, httpd_req *r, ctx *c) {
  (void)c;
  metrics *m = a->m;
  metrics_clear(m, "engine_workflows");
  metrics_clear(m, "engine_tasks");
  metrics_clear(m, "engine_slots");
  group_ctx g = {m, "engine_workflows", "status", 0};
  int bad = store_group_count(a->rd, STORE_GROUP_STATUS, NULL, set_group, &g) != STORE_OK;
  g = (group_ctx){m, "engine_tasks", "kind", 0};
  bad |= store_group_count(a->rd, STORE_GROUP_TASKS, NULL, set_group, &g) != STORE_OK;
  metrics_set(m, "engine_timers_pending", NULL, (double)g.timers);
  /* the unfinished sessions that reported a sandbox ready (it is destroyed before they finish) */
  static const char *const sandbox_ready[] = {"sandbox.ready", NULL};
  group_ctx sb = {m, "engine_sandboxes_live", NULL, 0};
  bad |= store_group_count(a->rd, STORE_GROUP_LIVE_WITH, sandbox_ready, set_group, &sb) != STORE_OK;
  bad |= store_group_count(a->rd, STORE_GROUP_SLOTS, NULL, set_slots, m) != STORE_OK;
  approvals_ctx x = {a, {0}, 0, 0};
  bad |= store_wf_list(a->rd, "waiting", count_pending, &x) != STORE_OK;
  if (bad) return api_reply_store_error(a, r, a->rd);
  metrics_set(m, "engine_approvals_pending", NULL, x.n);
  httpd_stats hs;
  httpd_get_stats(a->http, &hs);
  metrics_set(m, "engine_http_connections", NULL, hs.connections);
  metrics_set(m, "engine_sse_streams", NULL, hs.streams);
  metrics_set(m, "engine_store_round_trips_total", NULL, (double)store_round_trips(engine_store(a->e)));
  int64_t ckpt[2];
  engine_wal_checkpoints(a->e, &ckpt[0], &ckpt[1]);
  static const char *const where[] = {"background", "in_commit"};
  for (int i = 0; i < 2; i++) {
    const char *labels[] = {"where", where[i], NULL};
    metrics_set(m, "engine_wal_checkpoints_total", labels, (double)ckpt[i]); /* mirrored from the worker's count */
  }
  otel_exporter *otel = engine_otel(a->e);
  if (otel) {
    otel_stats os;
    otel_exporter_stats(otel, &os);
    api_metrics_otel(m, &os);
  }
  char *text = metrics_render(m);
  httpd_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text), NULL);
}
