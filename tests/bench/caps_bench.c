/* caps_bench: what a concurrency limit costs, and how it shares, measured in
 * one run (tests/bench/caps_bench.sh prints the table).
 *
 *   caps_bench w1 DB N LANES SCRIPT [LIMIT]  W1's shape: LANES lanes, each starts a
 *       workflow and waits for its completion; SCRIPT chain10.lua (no limit) or
 *       chain10_keyed.lua (a key per workflow, LIMIT 0; or one key for all with
 *       LIMIT > 0, so at most LIMIT run at once)
 *   caps_bench fair DB A B C LIMIT  A, B and C workflows of keys a, b, c started at
 *       once, each key limited to LIMIT: each key's share of the completions while
 *       every key still has work queued
 *
 * Output: one line "key value" per figure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static double mono_ms(void) { return (double)uv_hrtime() / 1e6; }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pct(double *v, size_t n, double p) {
  if (!n) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  return v[(size_t)(p * (double)(n - 1) + 0.5)];
}

typedef struct bench {
  engine *e;
  char script[4096];
  int n, lanes, limit, keyed, started, done, failed;
  double *t0, *lat; /* by workflow number */
  int *free_lanes, nfree;
  uv_idle_t idle;
  /* fair */
  int per_key[3], left[3], share[3], all_busy_done;
} bench;

static int number_of(const char *id) { return atoi(strchr(id, '-') + 1); }

static void on_status(void *ud, const char *id, const char *status, const char *detail) {
  (void)detail;
  bench *b = ud;
  int done = strcmp(status, "completed") == 0, failed = strcmp(status, "failed") == 0 || strcmp(status, "stuck") == 0;
  if (!done && !failed) return;
  b->failed += failed;
  int k = number_of(id);
  if (b->lat) b->lat[b->done] = mono_ms() - b->t0[k];
  b->done++;
  if (id[0] >= 'a' && id[0] <= 'c') { /* fair: counted while every key has work left */
    int key = id[0] - 'a';
    int all = b->left[0] > 0 && b->left[1] > 0 && b->left[2] > 0;
    b->left[key]--;
    if (all) b->share[key]++, b->all_busy_done++;
  }
  if (b->lanes) b->free_lanes[b->nfree++] = 1;
  if (b->done == b->n) engine_stop(b->e);
}

static void submit(bench *b, const char *id, const char *input) {
  char err[512];
  b->t0[number_of(id)] = mono_ms();
  if (engine_submit(b->e, id, b->script, input, NULL, err, sizeof err) != 0) {
    fprintf(stderr, "caps_bench: %s\n", err);
    exit(1);
  }
}

/* Starts go from an idle handle: never from inside a commit. */
static void on_idle(uv_idle_t *h) {
  bench *b = h->data;
  while (b->nfree > 0 && b->started < b->n) {
    b->nfree--;
    char id[64], input[160];
    int k = b->started++;
    snprintf(id, sizeof id, "w1-%d", k);
    if (!b->keyed) snprintf(input, sizeof input, "%d", k); /* chain10.lua takes a number */
    else if (b->limit > 0) snprintf(input, sizeof input, "{\"key\":\"all\",\"limit\":%d,\"x\":%d}", b->limit, k);
    else snprintf(input, sizeof input, "{\"key\":\"w1-%d\",\"x\":%d}", k, k);
    submit(b, id, input);
  }
  if (b->started == b->n) uv_idle_stop(h);
}

static int open_bench(bench *b, const char *db) {
  engine_config cfg = {.db_path = db, .on_status = on_status, .ud = b};
  char err[512];
  if (engine_open(&b->e, &cfg, err, sizeof err) != 0) {
    fprintf(stderr, "caps_bench: %s\n", err);
    return -1;
  }
  return 0;
}

static int run_w1(const char *db, int n, int lanes, const char *script, int limit) {
  bench b = {0};
  b.n = n;
  b.lanes = lanes;
  b.limit = limit;
  b.keyed = strcmp(script, "chain10.lua") != 0;
  b.t0 = calloc((size_t)n, sizeof(double));
  b.lat = calloc((size_t)n, sizeof(double));
  b.free_lanes = calloc((size_t)lanes, sizeof(int));
  b.nfree = lanes;
  snprintf(b.script, sizeof b.script, "%s/%s", ENGINE_BENCH_DIR, script);
  if (open_bench(&b, db) != 0) return 1;
  uv_idle_init(engine_loop(b.e), &b.idle);
  b.idle.data = &b;
  uv_idle_start(&b.idle, on_idle);
  double t0 = mono_ms();
  engine_run(b.e);
  double secs = (mono_ms() - t0) / 1000.0;
  printf("workflows_per_s %.0f\n", (double)b.done / secs);
  printf("p50_ms %.2f\n", pct(b.lat, (size_t)b.done, 0.50));
  printf("p99_ms %.2f\n", pct(b.lat, (size_t)b.done, 0.99));
  printf("failed %d\n", b.failed);
  engine_free(b.e);
  return b.failed != 0;
}

static void on_fair_idle(uv_idle_t *h) {
  bench *b = h->data;
  /* interleaved, as pushes to three repositories would come */
  for (int i = 0; b->started < b->n; i++) {
    int key = i % 3;
    if (b->per_key[key] == 0) continue;
    int k = b->started++;
    char id[64], input[160];
    snprintf(id, sizeof id, "%c-%d", 'a' + key, k);
    snprintf(input, sizeof input, "{\"key\":\"%c\",\"limit\":%d,\"x\":%d}", 'a' + key, b->limit, k);
    submit(b, id, input);
    b->per_key[key]--;
  }
  uv_idle_stop(h);
}

static int run_fair(const char *db, int a, int bb, int c, int limit) {
  bench b = {0};
  b.n = a + bb + c;
  b.limit = limit;
  b.per_key[0] = b.left[0] = a;
  b.per_key[1] = b.left[1] = bb;
  b.per_key[2] = b.left[2] = c;
  b.t0 = calloc((size_t)b.n, sizeof(double));
  snprintf(b.script, sizeof b.script, "%s/chain10_keyed.lua", ENGINE_BENCH_DIR);
  if (open_bench(&b, db) != 0) return 1;
  uv_idle_init(engine_loop(b.e), &b.idle);
  b.idle.data = &b;
  uv_idle_start(&b.idle, on_fair_idle);
  engine_run(b.e);
  for (int k = 0; k < 3; k++)
    printf("share_%c %.3f\n", 'a' + k, b.all_busy_done ? (double)b.share[k] / b.all_busy_done : 0);
  printf("counted %d\nfailed %d\n", b.all_busy_done, b.failed);
  engine_free(b.e);
  return b.failed != 0;
}

int main(int argc, char **argv) {
  if (argc >= 6 && strcmp(argv[1], "w1") == 0)
    return run_w1(argv[2], atoi(argv[3]), atoi(argv[4]), argv[5], argc > 6 ? atoi(argv[6]) : 0);
  if (argc >= 7 && strcmp(argv[1], "fair") == 0)
    return run_fair(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
  fprintf(stderr, "usage: caps_bench w1 DB N LANES SCRIPT [LIMIT] | fair DB A B C LIMIT\n");
  return 2;
}
