/* fanout_bench: W1's sequential chain (chain10.lua) beside the same 10 steps
 * started together (fanout10.lua: wf.start_activity x 10, then wf.all), on the
 * same engine settings in one process (tests/bench/fanout_bench.sh prints the
 * table).
 *
 *   fanout_bench DIR N LANES ROUNDS  ROUNDS rounds, each chain10 then fanout10
 *       in a fresh database under DIR: LANES lanes, each starts a workflow and
 *       waits for its completion, N workflows in all; checks every result
 *   fanout_bench DIR N LANES 1 SCRIPT  one script only, one round (what
 *       callgrind counts)
 *
 * Output: one line "key value" per figure, keys prefixed chain_ / fanout_. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "store.h"

static double mono_ms(void) { return (double)uv_hrtime() / 1e6; }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

typedef struct bench {
  engine *e;
  char script[4096];
  int n, started, done, bad, nfree;
  uv_idle_t idle;
} bench;

static void on_status(void *ud, const char *id, const char *status, const char *detail) {
  (void)id, (void)detail;
  bench *b = ud;
  int done = strcmp(status, "completed") == 0;
  if (!done && strcmp(status, "failed") != 0 && strcmp(status, "stuck") != 0) return;
  b->bad += !done;
  b->done++;
  b->nfree++; /* the lane starts its next workflow from the idle handle */
  if (b->done == b->n) engine_stop(b->e);
}

/* Starts go from an idle handle: never from inside a commit. */
static void on_idle(uv_idle_t *h) {
  bench *b = h->data;
  while (b->nfree > 0 && b->started < b->n) {
    b->nfree--;
    char id[64], input[32], err[512];
    int k = b->started++;
    snprintf(id, sizeof id, "w-%d", k);
    snprintf(input, sizeof input, "%d", k);
    if (engine_submit(b->e, id, b->script, input, NULL, err, sizeof err) != 0) {
      fprintf(stderr, "fanout_bench: %s\n", err);
      exit(1);
    }
  }
  if (b->started == b->n) uv_idle_stop(h);
}

/* Every result: chain10 returns x + 10, fanout10 x + 1 (each step adds 1 to x). */
static int check_results(engine *e, int n, int add) {
  int ok = 0;
  for (int k = 0; k < n; k++) {
    char id[64];
    wf_row w = {0};
    snprintf(id, sizeof id, "w-%d", k);
    if (store_wf_get(engine_store(e), id, &w) == 1 && w.result && atoi(w.result) == k + add) ok++;
    wf_row_free(&w);
  }
  return ok == n ? 0 : -1;
}

/* One round of SCRIPT: workflows per second, or -1. */
static double run_one(const char *dir, const char *script, int round, int n, int lanes) {
  bench b = {.n = n, .nfree = lanes};
  char db[4096], err[512];
  snprintf(db, sizeof db, "%s/%s-%d.db", dir, script, round);
  snprintf(b.script, sizeof b.script, "%s/%s", ENGINE_BENCH_DIR, script);
  engine_config cfg = {.db_path = db, .on_status = on_status, .ud = &b};
  if (engine_open(&b.e, &cfg, err, sizeof err) != 0) {
    fprintf(stderr, "fanout_bench: %s\n", err);
    return -1;
  }
  uv_idle_init(engine_loop(b.e), &b.idle);
  b.idle.data = &b;
  uv_idle_start(&b.idle, on_idle);
  double t0 = mono_ms();
  engine_run(b.e);
  double secs = (mono_ms() - t0) / 1000.0;
  int wrong = check_results(b.e, n, strcmp(script, "chain10.lua") == 0 ? 10 : 1);
  uv_close((uv_handle_t *)&b.idle, NULL);
  engine_free(b.e);
  if (b.bad || wrong) {
    fprintf(stderr, "fanout_bench: %s round %d: %d failed, results %s\n", script, round, b.bad, wrong ? "wrong" : "ok");
    return -1;
  }
  return (double)n / secs;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: fanout_bench DIR N LANES ROUNDS [SCRIPT]\n");
    return 2;
  }
  const char *dir = argv[1];
  int n = atoi(argv[2]), lanes = atoi(argv[3]), rounds = atoi(argv[4]);
  if (n <= 0 || lanes <= 0 || rounds <= 0 || rounds > 15) {
    fprintf(stderr, "fanout_bench: N and LANES must be > 0, ROUNDS 1..15\n");
    return 2;
  }
  if (argc > 5) return run_one(dir, argv[5], 1, n, lanes) < 0;
  double chain[15], fan[15];
  for (int r = 0; r < rounds; r++) { /* interleaved, so drift hits both alike */
    if ((chain[r] = run_one(dir, "chain10.lua", r, n, lanes)) < 0) return 1;
    if ((fan[r] = run_one(dir, "fanout10.lua", r, n, lanes)) < 0) return 1;
  }
  double c = median(chain, rounds), f = median(fan, rounds);
  printf("chain_workflows_per_s %.0f\nchain_activities_per_s %.0f\n", c, c * 10);
  printf("fanout_workflows_per_s %.0f\nfanout_activities_per_s %.0f\n", f, f * 10);
  printf("fanout_vs_chain %.2f\n", f / c);
  return 0;
}
