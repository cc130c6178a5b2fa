/* model_bench: N concurrent streamed model completions through the engine
 * (each one a workflow whose model.turn activity streams from the local model
 * server), embedded like engine_driver. Prints requests/s, engine CPU per
 * request, peak RSS and threads as a table and one JSON line.
 *
 *   model_bench BASE_URL [N] [PROVIDER]     (see model_bench.sh) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine.h"
#include "home.h"
#include "util.h"

typedef struct bench {
  engine *e;
  int n, done, failed;
  int64_t t_end;
} bench;

static void on_status(void *ud, const char *id, const char *status, const char *detail) {
  (void)id;
  (void)detail;
  bench *b = ud;
  if (strcmp(status, "completed") == 0) b->done++;
  else if (strcmp(status, "failed") == 0) b->failed++;
  else return;
  if (b->done + b->failed == b->n) {
    b->t_end = util_mono_ms();
    engine_stop(b->e);
  }
}

static long status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  size_t n = strlen(key);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0) v = atol(line + n + 1);
  if (f) fclose(f);
  return v;
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: model_bench BASE_URL [N] [PROVIDER]\n");
    return 2;
  }
  const char *base = argv[1];
  int n = argc > 2 ? atoi(argv[2]) : 1000;
  const char *provider = argc > 3 ? argv[3] : "openai";
  const char *db = getenv("MODEL_BENCH_DB") ? getenv("MODEL_BENCH_DB") : "model_bench.db";
  char script[1024];
  snprintf(script, sizeof script, "%s/../tests/integration/wf/model_call.lua", engine_lua_dir());
  bench b = {0};
  b.n = n;
  engine_config cfg = {.db_path = db, .on_status = on_status, .ud = &b};
  char err[512];
  if (engine_open(&b.e, &cfg, err, sizeof err) != 0) {
    fprintf(stderr, "model_bench: %s\n", err);
    return 2;
  }
  long rss0 = status_kb("VmRSS");
  double cpu0 = cpu_seconds();
  int64_t t0 = util_mono_ms();
  char input[1024], id[64];
  snprintf(input, sizeof input,
           "{\"model\":{\"name\":\"bench\",\"provider\":\"%s\",\"baseUrl\":\"%s\"},\"options\":{\"stream\":true,"
           "\"timeout\":300,\"max_retries\":0},\"start_to_close\":300}",
           provider, base);
  for (int i = 0; i < n; i++) {
    snprintf(id, sizeof id, "mb-%d-%lld", i, (long long)t0);
    if (engine_submit(b.e, id, script, input, NULL, err, sizeof err) != 0) {
      fprintf(stderr, "model_bench: %s\n", err);
      return 2;
    }
  }
  engine_run(b.e);
  double cpu = cpu_seconds() - cpu0;
  double wall = (double)(b.t_end - t0) / 1000.0;
  long hwm = status_kb("VmHWM"), threads = status_kb("Threads");
  printf("| requests | ok | failed | wall s | requests/s | engine CPU ms/request | RSS MiB idle | peak RSS MiB | threads |\n");
  printf("|---|---|---|---|---|---|---|---|---|\n");
  printf("| %d | %d | %d | %.2f | %.0f | %.3f | %.1f | %.1f | %ld |\n", n, b.done, b.failed, wall, b.done / wall,
         cpu * 1000.0 / n, rss0 / 1024.0, hwm / 1024.0, threads);
  printf("RESULT {\"bench\":\"model_stream\",\"provider\":\"%s\",\"n\":%d,\"ok\":%d,\"wall_s\":%.3f,\"req_per_s\":%.1f,"
         "\"cpu_ms_per_req\":%.3f,\"rss_idle_mib\":%.1f,\"rss_peak_mib\":%.1f,\"threads\":%ld}\n",
         provider, n, b.done, wall, b.done / wall, cpu * 1000.0 / n, rss0 / 1024.0, hwm / 1024.0, threads);
  engine_free(b.e);
  return b.failed ? 1 : 0;
}
