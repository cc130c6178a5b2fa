/* Prints a metrics registry (engine/server/metrics.c) that uses every feature of
 * the format: counters, gauges with NaN and infinities, histograms with
 * labels, escapes in help and label values, invalid UTF-8 and control
 * characters, and a family past the series cap. metrics_format.py parses the
 * output with the Prometheus client's parser and checks what it reads back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "metrics.h"

int main(void) {
  metrics *m = metrics_new();
  metrics_declare(m, "engine_activities_total", METRIC_COUNTER, "Activities finished, by name and status.", NULL, 0);
  metrics_declare(m, "engine_escapes", METRIC_GAUGE, "Help with a back\\slash, \"quotes\" and a\nsecond line.", NULL,
                  0);
  metrics_declare(m, "engine_values", METRIC_GAUGE, "Special values.", NULL, 0);
  metrics_declare(m, "engine_latency_seconds", METRIC_HISTOGRAM, "Latency, default buckets.", NULL, 0);
  metrics_declare(m, "engine_empty", METRIC_GAUGE, "Declared, never set.", NULL, 0);
  metrics_declare(m, "engine_capped_total", METRIC_COUNTER, "More label sets than the cap.", NULL, 0);

  const char *const ok[] = {"activity", "sandbox.provision", "status", "ok", NULL};
  const char *const tricky[] = {"activity", "quote\"back\\slash\nnewline", "status", "ok", NULL};
  const char *const bad_utf8[] = {"activity",
                                  "bad\xff\xfe"
                                  "end\xe2\x82",
                                  "status", "error", NULL};
  const char *const unicode[] = {"activity", "na\xc3\xafve \xe2\x9c\x93", "status", "ok", NULL};
  const char *const control[] = {"activity", "\x1b[31mred\x7f", "status", "ok", NULL};
  metrics_add(m, "engine_activities_total", ok, 3);
  metrics_add(m, "engine_activities_total", tricky, 1);
  metrics_add(m, "engine_activities_total", bad_utf8, 2);
  metrics_add(m, "engine_activities_total", unicode, 4);
  metrics_add(m, "engine_activities_total", control, 5);

  metrics_set(m, "engine_escapes", NULL, 1);

  const char *const names[][3] = {{"v", "nan", NULL}, {"v", "pinf", NULL}, {"v", "ninf", NULL},
                                  {"v", "neg", NULL}, {"v", "sum", NULL},  {"v", "big", NULL}};
  metrics_set(m, "engine_values", names[0], NAN);
  metrics_set(m, "engine_values", names[1], INFINITY);
  metrics_set(m, "engine_values", names[2], -INFINITY);
  metrics_set(m, "engine_values", names[3], -2.5);
  metrics_add(m, "engine_values", names[4], 0.1);
  metrics_add(m, "engine_values", names[4], 0.2);
  metrics_set(m, "engine_values", names[5], 1e300);

  const char *const model[] = {"kind", "model", NULL}, *const tool[] = {"kind", "tool", NULL};
  const double samples[] = {0.001, 0.0005, 0.3, 1, 60, 120};
  for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
    metrics_observe(m, "engine_latency_seconds", model, samples[i]);
  metrics_observe(m, "engine_latency_seconds", tool, 2.5);

  char name[32];
  for (int i = 0; i < METRICS_MAX_SERIES + 7; i++) {
    snprintf(name, sizeof name, "invented%04d", i);
    const char *const lbl[] = {"activity", name, NULL};
    metrics_add(m, "engine_capped_total", lbl, 1);
  }

  char *text = metrics_render(m);
  fputs(text, stdout);
  free(text);
  metrics_free(m);
  return ferror(stdout) ? 1 : 0;
}
