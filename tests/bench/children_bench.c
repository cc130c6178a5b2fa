/* children_bench: PARENTS parent workflows, each starting CHILDREN children
 * (children_parent.lua: wf.start_child x CHILDREN, then wf.all), beside the
 * same child work done by PARENTS x CHILDREN independent workflows
 * (child_work.lua, started with engine_submit as the parents are), on the
 * same engine settings in one process (tests/bench/children_bench.sh prints
 * the table).
 *
 *   children_bench SPEC PARENTS CHILDREN LANES STEPS ROUNDS
 *       ROUNDS interleaved rounds, each the parents then the independents,
 *       each on a fresh database named SPEC + p0, i0, p1, i1, ... (SPEC
 *       "DIR/" for SQLite files DIR/p0.db ..., or a PostgreSQL URL up to
 *       the database name, whose databases must exist); LANES parents at
 *       once, and LANES x CHILDREN independents at once, so the same child
 *       work is in flight; checks every result, the children's included
 *   children_bench SPEC PARENTS CHILDREN LANES STEPS 1 parents|independent
 *       one mode, one round (what callgrind counts)
 *
 * Output: one line "key value" per figure, keys prefixed parents_ /
 * independent_; per_unit figures are per child-work workflow (a child, or
 * an independent workflow), the parents' own share included. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "engine.h"
#include "store.h"

#define MAXROUNDS 15

static double mono_ms(void) { return (double)uv_hrtime() / 1e6; }

static double cpu_s(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const double *v, int n) {
  double s[MAXROUNDS];
  memcpy(s, v, (size_t)n * sizeof *v);
  qsort(s, (size_t)n, sizeof *s, cmp_double);
  return s[n / 2];
}

typedef struct bench {
  engine *e;
  int parents;  /* 1: parents mode, 0: independents */
  int children, steps;
  char script[4096];
  int n, started, done, bad, nfree;
  int64_t commits, writes;
  uv_idle_t idle;
} bench;

/* One round's figures. */
typedef struct figures {
  double secs, cpu, commits, writes, events, trips;
} figures;

static int terminal(const char *status) {
  return !strcmp(status, "completed") || !strcmp(status, "failed") || !strcmp(status, "stuck") ||
         !strcmp(status, "cancelled");
}

static void on_status(void *ud, const char *id, const char *status, const char *detail) {
  (void)detail;
  bench *b = ud;
  if (!terminal(status)) return;
  b->bad += strcmp(status, "completed") != 0;
  if (strchr(id, '.')) return; /* a child ("p-K.I"): its parent holds the lane */
  b->done++;
  b->nfree++; /* the lane starts its next workflow from the idle handle */
  if (b->done == b->n) engine_stop(b->e);
}

/* What each commit wrote: statements that wrote, for writes per workflow. */
static void on_commit(void *ud) {
  bench *b = ud;
  b->commits++;
  b->writes += store_batch_writes(engine_store(b->e));
}

/* Starts go from an idle handle: never from inside a commit. */
static void on_idle(uv_idle_t *h) {
  bench *b = h->data;
  while (b->nfree > 0 && b->started < b->n) {
    b->nfree--;
    char id[64], input[128], err[512];
    int k = b->started++;
    snprintf(id, sizeof id, "%s-%d", b->parents ? "p" : "i", k);
    if (b->parents) snprintf(input, sizeof input, "{\"n\":%d,\"steps\":%d,\"x\":%d}", b->children, b->steps, k);
    else snprintf(input, sizeof input, "{\"steps\":%d,\"x\":%d}", b->steps, k);
    if (engine_submit(b->e, id, b->script, input, NULL, err, sizeof err) != 0) {
      fprintf(stderr, "children_bench: %s\n", err);
      exit(1);
    }
  }
  if (b->started == b->n) uv_idle_stop(h);
}

/* Workflow id completed with result want; its events are added to *events. */
static int check_one(store *st, const char *id, const char *parent, long long want, double *events) {
  wf_row w = {0};
  int ok = store_wf_get(st, id, &w) == 1 && strcmp(w.status, "completed") == 0 && w.result &&
           strtoll(w.result, NULL, 10) == want && (!parent || (w.parent && strcmp(w.parent, parent) == 0));
  if (!ok) fprintf(stderr, "children_bench: %s is %s with %s, want %lld\n", id, w.status ? w.status : "missing",
                   w.result ? w.result : "no result", want);
  wf_row_free(&w);
  hist_list h = {0};
  if (store_hist_load(st, id, 1, &h) == STORE_OK) *events += (double)h.n;
  hist_list_free(&h);
  return ok;
}

/* Every result: an independent workflow j returns j + steps; child i (1..n)
 * of parent k returns k*n + i - 1 + steps, and the parent their sum. */
static int check_results(bench *b, double *events) {
  store *st = engine_store(b->e);
  int ok = 1;
  long long n = b->children, s = b->steps;
  for (int k = 0; k < b->n; k++) {
    char id[64];
    snprintf(id, sizeof id, "%s-%d", b->parents ? "p" : "i", k);
    if (!b->parents) {
      ok &= check_one(st, id, NULL, k + s, events);
      continue;
    }
    ok &= check_one(st, id, NULL, n * n * k + n * (n - 1) / 2 + n * s, events);
    for (int i = 1; i <= n; i++) {
      char child[80];
      snprintf(child, sizeof child, "%s.%d", id, i);
      ok &= check_one(st, child, id, n * k + i - 1 + s, events);
    }
  }
  return ok ? 0 : -1;
}

/* One round of one mode on database SPEC + name: 0, or -1 (told why). */
static int run_one(const char *spec, int parents_mode, int round, int parents, int children, int lanes, int steps,
                   figures *f) {
  bench b = {.parents = parents_mode, .children = children, .steps = steps};
  b.n = parents_mode ? parents : parents * children;
  b.nfree = parents_mode ? lanes : lanes * children;
  char db[4096], err[512];
  snprintf(db, sizeof db, "%s%c%d%s", spec, parents_mode ? 'p' : 'i', round, store_is_url(spec) ? "" : ".db");
  const char *script = parents_mode ? "children_parent.lua" : "child_work.lua";
  snprintf(b.script, sizeof b.script, "%s/%s", ENGINE_BENCH_DIR, script);
  engine_config cfg = {.db_path = db, .on_status = on_status, .on_commit = on_commit, .ud = &b};
  if (engine_open(&b.e, &cfg, err, sizeof err) != 0) {
    fprintf(stderr, "children_bench: %s\n", err);
    return -1;
  }
  uv_idle_init(engine_loop(b.e), &b.idle);
  b.idle.data = &b;
  uv_idle_start(&b.idle, on_idle);
  int64_t trips = store_round_trips(engine_store(b.e));
  double t0 = mono_ms(), c0 = cpu_s();
  engine_run(b.e);
  f->secs = (mono_ms() - t0) / 1000.0;
  f->cpu = cpu_s() - c0;
  f->trips = (double)(store_round_trips(engine_store(b.e)) - trips);
  f->commits = (double)b.commits;
  f->writes = (double)b.writes;
  f->events = 0;
  int wrong = check_results(&b, &f->events);
  uv_close((uv_handle_t *)&b.idle, NULL);
  engine_free(b.e);
  if (b.bad || wrong) {
    fprintf(stderr, "children_bench: %s round %d: %d ended other than completed, results %s\n",
            parents_mode ? "parents" : "independent", round, b.bad, wrong ? "wrong" : "ok");
    return -1;
  }
  return 0;
}

/* The median over the rounds of one field of figures (its offset). */
static double med(const figures *f, int rounds, size_t off) {
  double v[MAXROUNDS];
  for (int r = 0; r < rounds; r++) memcpy(&v[r], (const char *)&f[r] + off, sizeof v[r]);
  return median(v, rounds);
}

/* Medians over the rounds, per child-work workflow where it says per_unit. */
static void print_mode(const char *key, const figures *f, int rounds, double units) {
  double secs = med(f, rounds, offsetof(figures, secs));
  printf("%s_secs %.3f\n%s_units_per_s %.0f\n", key, secs, key, units / secs);
  printf("%s_cpu_secs %.3f\n", key, med(f, rounds, offsetof(figures, cpu)));
  printf("%s_commits_per_unit %.3f\n", key, med(f, rounds, offsetof(figures, commits)) / units);
  printf("%s_writes_per_unit %.2f\n", key, med(f, rounds, offsetof(figures, writes)) / units);
  printf("%s_events_per_unit %.2f\n", key, med(f, rounds, offsetof(figures, events)) / units);
  printf("%s_round_trips_per_unit %.2f\n", key, med(f, rounds, offsetof(figures, trips)) / units);
}

int main(int argc, char **argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: children_bench SPEC PARENTS CHILDREN LANES STEPS ROUNDS [parents|independent]\n");
    return 2;
  }
  const char *spec = argv[1];
  int parents = atoi(argv[2]), children = atoi(argv[3]), lanes = atoi(argv[4]), steps = atoi(argv[5]);
  int rounds = atoi(argv[6]);
  if (parents <= 0 || children <= 0 || lanes <= 0 || steps <= 0 || rounds <= 0 || rounds > MAXROUNDS) {
    fprintf(stderr, "children_bench: PARENTS, CHILDREN, LANES and STEPS must be > 0, ROUNDS 1..%d\n", MAXROUNDS);
    return 2;
  }
  figures f;
  if (argc > 7) return run_one(spec, strcmp(argv[7], "parents") == 0, 0, parents, children, lanes, steps, &f) != 0;
  figures par[MAXROUNDS], ind[MAXROUNDS];
  double wall[MAXROUNDS], cpu[MAXROUNDS];
  for (int r = 0; r < rounds; r++) { /* interleaved, so drift hits both alike */
    if (run_one(spec, 1, r, parents, children, lanes, steps, &par[r]) != 0) return 1;
    if (run_one(spec, 0, r, parents, children, lanes, steps, &ind[r]) != 0) return 1;
    wall[r] = par[r].secs / ind[r].secs;
    cpu[r] = par[r].cpu / ind[r].cpu;
  }
  double units = (double)parents * children;
  print_mode("parents", par, rounds, units);
  print_mode("independent", ind, rounds, units);
  /* each round's pair ran back to back: the median of their ratios */
  printf("ratio_wall %.2f\nratio_cpu %.2f\n", median(wall, rounds), median(cpu, rounds));
  return 0;
}
