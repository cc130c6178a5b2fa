/* engine_driver: the engine as a peer of the durable-execution benchmark in
 * ../shared/peers. Like the DBOS peer (a library inside its driver process) it
 * embeds the engine: engine_open(), in-process clients
 * engine_submit() / engine_signal_local() whose writes join the engine's
 * current group-commit batch, and the on_status / on_commit callbacks to learn
 * what became durable. The workloads and their record fields are those of
 * lib/params.js and dbos/driver.js (same env overrides: W1_N, W2_N, ...).
 *
 *   engine_driver w1|w2|w3|w4a|w4b
 *
 * Environment: ENGINE_BENCH_DB (database path, default ./bench.db),
 * ENGINE_BENCH_DIR (where chain10.lua and waiter.lua are; default: the source
 * directory), RESULTS_FILE (records are appended there too), STEP_COUNTER_FILE
 * (W4: read by the activity module and by w4b), RESTART_T0_MS (w4b),
 * DRIVER_TIMEOUT_S (watchdog).
 *
 * The engine's callbacks run inside engine_commit(); calling back into the
 * engine from there is not safe, so they only queue what they saw and kick a
 * uv_idle handle; the workload logic runs from that handle (or from timers). */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"

#define PEER "engine"
#define STEPS 10
#define W1_CONC 50
#define W2_SETTLE_MS 20
#define W3_CONC 50
#define W4_CONC 50

/* ------------------------------------------------------------ helpers --- */

static double now_ms(void) { return (double)uv_hrtime() / 1e6; }

static int64_t epoch_ms(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static int env_int(const char *k, int d) {
  const char *v = getenv(k);
  return v && *v ? atoi(v) : d;
}

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "engine_driver: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

/* Math.round(x * 10^d) / 10^d, printed the shortest way (like JSON.stringify). */
static void fmt_num(char *out, size_t n, double v, int d) {
  if (!isfinite(v)) {
    snprintf(out, n, "null");
    return;
  }
  double p = pow(10, d);
  v = floor(v * p + 0.5) / p;
  snprintf(out, n, "%.*f", d, v);
  if (strchr(out, '.')) {
    char *e = out + strlen(out) - 1;
    while (*e == '0') *e-- = 0;
    if (*e == '.') *e = 0;
  }
  if (strcmp(out, "-0") == 0) snprintf(out, n, "0");
}

/* A tiny JSON object builder for the result records. */
typedef struct jbuf {
  char *s;
  size_t len, cap;
} jbuf;

static void jb_raw(jbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int need = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (b->len + (size_t)need + 1 > b->cap) {
    b->cap = (b->len + (size_t)need + 1) * 2;
    b->s = realloc(b->s, b->cap);
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)need;
}
static void jb_key(jbuf *b, const char *k) { jb_raw(b, "%s\"%s\":", b->len > 1 ? "," : "", k); }
static void jb_str(jbuf *b, const char *k, const char *v) {
  jb_key(b, k);
  jb_raw(b, "\"%s\"", v); /* only our own plain strings */
}
static void jb_int(jbuf *b, const char *k, long long v) {
  jb_key(b, k);
  jb_raw(b, "%lld", v);
}
static void jb_num(jbuf *b, const char *k, double v, int d) {
  char t[64];
  fmt_num(t, sizeof t, v, d);
  jb_key(b, k);
  jb_raw(b, "%s", t);
}
static void jb_null(jbuf *b, const char *k) {
  jb_key(b, k);
  jb_raw(b, "null");
}

static jbuf record_begin(const char *workload) {
  jbuf b = {0};
  char ts[64];
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  gmtime_r(&tv.tv_sec, &tm);
  size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(ts + n, sizeof ts - n, ".%03dZ", (int)(tv.tv_usec / 1000));
  jb_raw(&b, "{");
  jb_str(&b, "ts", ts);
  jb_str(&b, "peer", PEER);
  jb_str(&b, "workload", workload);
  return b;
}

/* Prints "RESULT {json}" and appends the line to $RESULTS_FILE (lib/common.js emit). */
static void record_emit(jbuf *b) {
  jb_raw(b, "}");
  printf("RESULT %s\n", b->s);
  fflush(stdout);
  const char *f = getenv("RESULTS_FILE");
  if (f && *f) {
    FILE *fp = fopen(f, "a");
    if (!fp) die("cannot append to %s: %s", f, strerror(errno));
    fprintf(fp, "%s\n", b->s);
    fclose(fp);
  }
  free(b->s);
}

typedef struct mem {
  double rss_mib, pss_mib;
} mem;

/* RSS from /proc/self/status, PSS from /proc/self/smaps_rollup (lib/common.js procMem). */
static mem self_mem(void) {
  mem m = {0, 0};
  char line[256];
  FILE *f = fopen("/proc/self/status", "r");
  if (f) {
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "VmRSS:", 6) == 0) m.rss_mib = strtod(line + 6, NULL) / 1024.0;
    fclose(f);
  }
  f = fopen("/proc/self/smaps_rollup", "r");
  if (f) {
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "Pss:", 4) == 0) m.pss_mib = strtod(line + 4, NULL) / 1024.0;
    fclose(f);
  }
  m.rss_mib = round(m.rss_mib * 10) / 10;
  m.pss_mib = round(m.pss_mib * 10) / 10;
  return m;
}

/* CPU seconds (user+system, incl. reaped children) of this process (lib/common.js cpuSeconds). */
static double self_cpu_s(void) {
  char buf[2048];
  FILE *f = fopen("/proc/self/stat", "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  if (!p) return 0;
  p += 2;
  double t = 0;
  for (int field = 0; field < 15 && p; field++) {
    if (field >= 11) t += strtod(p, NULL);
    p = strchr(p, ' ');
    if (p) p++;
  }
  return t / (double)sysconf(_SC_CLK_TCK);
}

/* du -sb DIR in MiB (lib/common.js duMiB). */
static double du_mib(const char *dir) {
  char cmd[PATH_MAX + 32];
  snprintf(cmd, sizeof cmd, "du -sb '%s'", dir);
  FILE *p = popen(cmd, "r");
  if (!p) return NAN;
  double bytes = NAN;
  if (fscanf(p, "%lf", &bytes) != 1) bytes = NAN;
  pclose(p);
  return round(bytes / 1048576.0 * 10) / 10;
}

static double file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 ? (double)sb.st_size : 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double percentile(const double *sorted, size_t n, double p) {
  if (!n) return NAN;
  long idx = (long)ceil(p / 100.0 * (double)n) - 1;
  if (idx < 0) idx = 0;
  if (idx > (long)n - 1) idx = (long)n - 1;
  return sorted[idx];
}

/* ------------------------------------------------------------- driver --- */

enum { EV_PARKED = 1, EV_DONE = 2 };
typedef struct event {
  int kind;
  int idx;
} event;

static struct {
  engine *e;
  store *st;
  uv_loop_t *loop;
  uv_idle_t idle;
  uv_timer_t timer;
  uv_timer_t watchdog;
  const char *w;   /* workload */
  char prefix[8];  /* "w1-" ... */
  char chain[PATH_MAX], waiter[PATH_MAX];
  char db[PATH_MAX], data_dir[PATH_MAX];
  /* what the engine's callbacks saw, handled from the idle handle */
  event *evq;
  size_t nev, capev;
  long commits;      /* on_commit calls so far */
  int unacked;       /* submits/signals written since the last commit */
  int failed;        /* exit status */
} G;

static void on_idle(uv_idle_t *h);
static void kick(void) {
  if (!uv_is_active((uv_handle_t *)&G.idle)) uv_idle_start(&G.idle, on_idle);
}

static void on_status(void *ud, const char *id, const char *status, const char *detail) {
  (void)ud;
  (void)detail;
  size_t pl = strlen(G.prefix);
  if (strncmp(id, G.prefix, pl) != 0) return;
  int kind = 0;
  if (strcmp(status, "waiting") == 0) kind = EV_PARKED;
  else if (engine_status_terminal(status) || strcmp(status, "stuck") == 0) kind = EV_DONE;
  if (!kind) return;
  if (G.nev == G.capev) {
    G.capev = G.capev ? G.capev * 2 : 256;
    G.evq = realloc(G.evq, G.capev * sizeof *G.evq);
  }
  G.evq[G.nev++] = (event){kind, atoi(id + pl)};
  kick();
}

static int acked; /* submits/signals made durable by the commits so far */
static void on_commit(void *ud) {
  (void)ud;
  G.commits++;
  if (G.unacked) {
    acked += G.unacked;
    G.unacked = 0;
    kick();
  }
}

static void wf_id(char *out, size_t n, int i) { snprintf(out, n, "%s%d", G.prefix, i); }

static int submit(int i, const char *script, const char *input) {
  char id[64], err[512];
  wf_id(id, sizeof id, i);
  if (engine_submit(G.e, id, script, input, NULL, err, sizeof err) != 0) {
    fprintf(stderr, "engine_driver: submit %s: %s\n", id, err);
    return -1;
  }
  G.unacked++;
  return 0;
}

static int submit_chain(int i) {
  char input[32];
  snprintf(input, sizeof input, "%d", i);
  return submit(i, G.chain, input);
}

static int signal_go(int i) {
  char id[64], err[512];
  wf_id(id, sizeof id, i);
  if (engine_signal_local(G.e, id, "go", "\"go\"", NULL, err, sizeof err) != 0) {
    fprintf(stderr, "engine_driver: signal %s: %s\n", id, err);
    return -1;
  }
  G.unacked++;
  return 0;
}

/* Reads workflow i's result: 1 when it completed with exactly `want` (a JSON
 * text; for numbers compared by value), 0 otherwise. */
static int result_is(int i, const char *want, double want_num) {
  char id[64];
  wf_id(id, sizeof id, i);
  wf_row w;
  if (store_wf_get(G.st, id, &w) != 1) return 0;
  int ok = 0;
  if (strcmp(w.status, "completed") == 0 && w.result) {
    if (want) {
      ok = strcmp(w.result, want) == 0;
    } else {
      char *end;
      double v = strtod(w.result, &end);
      ok = end != w.result && *end == 0 && v == want_num;
    }
  }
  if (!ok)
    fprintf(stderr, "engine_driver: %s is %s with result %s error %s\n", id, w.status, w.result ? w.result : "null",
            w.error ? w.error : "null");
  wf_row_free(&w);
  return ok;
}

static void finish_run(void) {
  uv_idle_stop(&G.idle);
  uv_timer_stop(&G.timer);
  engine_stop(G.e);
}

/* ---------------------------------------------------------------- W1 --- */

static struct {
  int n, next, inflight, done, ok;
  double t0;
} W1;

static void w1_idle(void) {
  for (size_t k = 0; k < G.nev; k++) {
    if (G.evq[k].kind != EV_DONE) continue;
    int i = G.evq[k].idx;
    W1.ok += result_is(i, NULL, i + STEPS);
    W1.done++;
    W1.inflight--;
  }
  G.nev = 0;
  while (W1.inflight < W1_CONC && W1.next < W1.n) {
    int i = W1.next++;
    if (submit_chain(i) != 0) {
      W1.done++;
      continue;
    }
    W1.inflight++;
  }
  if (W1.done < W1.n) return;
  double s = (now_ms() - W1.t0) / 1000;
  jbuf b = record_begin("W1");
  jb_int(&b, "n", W1.n);
  jb_int(&b, "ok", W1.ok);
  jb_num(&b, "wall_s", s, 3);
  jb_num(&b, "wf_per_s", W1.ok / s, 1);
  jb_num(&b, "steps_per_s", (double)W1.ok * STEPS / s, 1);
  record_emit(&b);
  finish_run();
}

/* ---------------------------------------------------------------- W2 --- */

static struct {
  int n, warmup, i;
  int phase; /* 0 start, 1 wait parked, 2 settling, 3 wait result */
  double t0;
  double *lat;
  int nlat;
} W2;

static void w2_signal(uv_timer_t *t) {
  (void)t;
  W2.t0 = now_ms();
  if (signal_go(W2.i) != 0) die("W2: cannot signal");
  W2.phase = 3;
}

static void w2_idle(void) {
  for (size_t k = 0; k < G.nev; k++) {
    event ev = G.evq[k];
    if (ev.idx != W2.i) continue;
    if (ev.kind == EV_PARKED && W2.phase == 1) {
      /* the "ready" marker is durable and the workflow is parked; the result
       * wait is armed (this callback); settle, then signal */
      W2.phase = 2;
      uv_timer_start(&G.timer, w2_signal, W2_SETTLE_MS, 0);
    } else if (ev.kind == EV_DONE && W2.phase == 3) {
      if (!result_is(W2.i, "\"go\"", 0)) die("W2: bad result for w2-%d", W2.i);
      double dt = now_ms() - W2.t0;
      if (W2.i >= W2.warmup) W2.lat[W2.nlat++] = dt;
      W2.i++;
      W2.phase = 0;
    } else if (ev.kind == EV_DONE) {
      die("W2: w2-%d ended before it was signalled", W2.i);
    }
  }
  G.nev = 0;
  if (W2.phase == 0 && W2.i < W2.warmup + W2.n) {
    W2.phase = 1;
    if (submit(W2.i, G.waiter, "{}") != 0) die("W2: cannot start w2-%d", W2.i);
  }
  if (W2.i < W2.warmup + W2.n) return;
  qsort(W2.lat, (size_t)W2.nlat, sizeof(double), cmp_double);
  double sum = 0;
  for (int k = 0; k < W2.nlat; k++) sum += W2.lat[k];
  jbuf b = record_begin("W2");
  jb_int(&b, "n", W2.nlat);
  jb_num(&b, "p50_ms", percentile(W2.lat, (size_t)W2.nlat, 50), 2);
  jb_num(&b, "p99_ms", percentile(W2.lat, (size_t)W2.nlat, 99), 2);
  jb_num(&b, "max_ms", W2.nlat ? W2.lat[W2.nlat - 1] : NAN, 2);
  jb_num(&b, "mean_ms", W2.nlat ? sum / W2.nlat : NAN, 2);
  record_emit(&b);
  finish_run();
}

/* ---------------------------------------------------------------- W3 --- */

static struct {
  int n, settle_ms, late_s;
  int phase; /* 0 submitting/parking, 1 sampling, 2 signalling/draining */
  int next, inflight, parked, done, ok;
  char *seen; /* per workflow: 1 parked, 2 done */
  double t0, submit_s, park_s, t1, sent_s;
  double base_disk, base_db;
  mem m5, late;
  double cpu_pct;
  double disk5, db5, cpu0, tc0;
} W3;

static double db_files_mib(void) {
  char p[PATH_MAX + 8];
  double sz = file_size(G.db);
  snprintf(p, sizeof p, "%s-wal", G.db);
  sz += file_size(p);
  return round(sz / 1048576.0 * 10) / 10;
}

static void w3_late(uv_timer_t *t) {
  (void)t;
  W3.late = self_mem();
  W3.cpu_pct = 100.0 * (self_cpu_s() - W3.cpu0) / ((now_ms() - W3.tc0) / 1000.0);
  W3.phase = 2;
  W3.t1 = now_ms();
  kick();
}

static void w3_sample(uv_timer_t *t) {
  (void)t;
  W3.m5 = self_mem();
  W3.disk5 = du_mib(G.data_dir);
  W3.db5 = db_files_mib();
  W3.cpu0 = self_cpu_s();
  W3.tc0 = now_ms();
  long rest = (long)W3.late_s * 1000 - W3.settle_ms;
  uv_timer_start(&G.timer, w3_late, (uint64_t)(rest > 0 ? rest : 0), 0);
}

static void w3_idle(void) {
  for (size_t k = 0; k < G.nev; k++) {
    event ev = G.evq[k];
    if (ev.idx < 0 || ev.idx >= W3.n) continue;
    if (ev.kind == EV_PARKED && W3.seen[ev.idx] == 0) {
      W3.seen[ev.idx] = 1;
      W3.parked++;
    } else if (ev.kind == EV_DONE && W3.seen[ev.idx] != 2) {
      if (W3.seen[ev.idx] == 0) fprintf(stderr, "engine_driver: w3-%d ended without parking\n", ev.idx);
      W3.seen[ev.idx] = 2;
      W3.done++;
    }
  }
  G.nev = 0;
  /* lanes: a start or a signal counts as sent once the commit holding it is done */
  W3.inflight -= acked;
  acked = 0;
  if (W3.phase == 0) {
    while (W3.inflight < W3_CONC && W3.next < W3.n) {
      if (submit(W3.next++, G.waiter, "{}") != 0) die("W3: cannot start");
      W3.inflight++;
    }
    if (W3.next == W3.n && W3.inflight == 0 && W3.submit_s == 0) W3.submit_s = (now_ms() - W3.t0) / 1000;
    if (W3.parked == W3.n && W3.submit_s > 0) {
      W3.park_s = (now_ms() - W3.t0) / 1000;
      W3.phase = 1;
      W3.next = 0;
      uv_timer_start(&G.timer, w3_sample, (uint64_t)W3.settle_ms, 0);
    }
    return;
  }
  if (W3.phase != 2) return;
  while (W3.inflight < W3_CONC && W3.next < W3.n) {
    if (signal_go(W3.next++) != 0) die("W3: cannot signal");
    W3.inflight++;
  }
  if (W3.next == W3.n && W3.inflight == 0 && W3.sent_s == 0) W3.sent_s = (now_ms() - W3.t1) / 1000;
  if (W3.done < W3.n || W3.sent_s == 0) return;
  double drain_s = (now_ms() - W3.t1) / 1000;
  for (int i = 0; i < W3.n; i++) W3.ok += result_is(i, "\"go\"", 0);
  mem late = W3.late;
  jbuf b = record_begin("W3");
  jb_int(&b, "n", W3.n);
  jb_int(&b, "ok", W3.ok);
  jb_num(&b, "submit_s", W3.submit_s, 2);
  jb_num(&b, "all_parked_s", W3.park_s, 2);
  /* the engine is embedded: the driver process is the worker and the server */
  jb_num(&b, "worker_rss_mib", W3.m5.rss_mib, 1);
  jb_null(&b, "server_rss_mib");
  jb_null(&b, "server_pss_mib");
  jb_int(&b, "server_nproc", 0);
  jb_num(&b, "total_rss_mib", W3.m5.rss_mib, 1);
  jb_num(&b, "total_pss_mib", W3.m5.pss_mib, 1);
  jb_num(&b, "parked_cpu_pct", W3.cpu_pct, 1);
  jb_num(&b, "late_total_rss_mib", late.rss_mib, 1);
  jb_num(&b, "late_total_pss_mib", late.pss_mib, 1);
  jb_num(&b, "late_worker_rss_mib", late.rss_mib, 1);
  jb_null(&b, "late_server_rss_mib");
  jb_num(&b, "data_dir_mib", W3.disk5, 1);
  jb_num(&b, "sysdb_mib", W3.db5, 1);
  jb_num(&b, "data_dir_delta_mib", W3.disk5 - W3.base_disk, 1);
  jb_num(&b, "sysdb_delta_mib", W3.db5 - W3.base_db, 1);
  jb_num(&b, "signals_sent_s", W3.sent_s, 2);
  jb_num(&b, "drain_s", drain_s, 2);
  record_emit(&b);
  finish_run();
}

/* ---------------------------------------------------------------- W4 --- */

static struct {
  int n, next, inflight, done;
  char *done_flag;
  int *never;
  int nnever, submitted_all;
  char at_kill[512];
} W4;

/* Phase A: submit all (50 lanes, a start counts once committed), then wait;
 * ctl.sh kills this process ~1 s after SUBMITTING. */
static void w4a_idle(void) {
  for (size_t k = 0; k < G.nev; k++) {
    event ev = G.evq[k];
    if (ev.kind == EV_DONE && ev.idx >= 0 && ev.idx < W4.n && !W4.done_flag[ev.idx]) {
      W4.done_flag[ev.idx] = 1;
      W4.done++;
    }
  }
  G.nev = 0;
  W4.inflight -= acked;
  acked = 0;
  while (W4.inflight < W4_CONC && W4.next < W4.n) {
    if (W4.next == 0) {
      printf("SUBMITTING %lld\n", (long long)epoch_ms());
      fflush(stdout);
    }
    if (submit_chain(W4.next++) == 0) W4.inflight++;
  }
  if (!W4.submitted_all && W4.next == W4.n && W4.inflight == 0) {
    W4.submitted_all = 1;
    printf("SUBMITTED %lld\n", (long long)epoch_ms());
    fflush(stdout);
  }
  if (W4.done == W4.n) {
    printf("WAIT ENDED %lld\n", (long long)epoch_ms());
    fflush(stdout);
    finish_run();
  }
}

/* The durable state the killed process left, read before the engine recovers it. */
static void w4_snapshot(void) {
  sqlite3 *db = NULL;
  char *p = W4.at_kill;
  size_t left = sizeof W4.at_kill;
  int n = snprintf(p, left, "{");
  p += n, left -= (size_t)n;
  if (access(G.db, F_OK) == 0 && sqlite3_open_v2(G.db, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT status, count(*) FROM workflows WHERE id LIKE 'w4-%' GROUP BY status ORDER BY status",
                           -1, &st, NULL) == SQLITE_OK) {
      while (sqlite3_step(st) == SQLITE_ROW) {
        n = snprintf(p, left, "\"%s\":%d,", (const char *)sqlite3_column_text(st, 0), sqlite3_column_int(st, 1));
        p += n, left -= (size_t)n;
      }
      sqlite3_finalize(st);
    }
    int steps = 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT count(*) FROM history WHERE wf_id LIKE 'w4-%' AND type='ActivityCompleted'",
                           -1, &st, NULL) == SQLITE_OK) {
      if (sqlite3_step(st) == SQLITE_ROW) steps = sqlite3_column_int(st, 0);
      sqlite3_finalize(st);
    }
    n = snprintf(p, left, "\"steps_recorded\":%d}", steps);
  } else {
    snprintf(p, left, "\"steps_recorded\":0}");
  }
  sqlite3_close(db);
}

/* lib/common.js stepHistogram over "<wfid> <step>" lines. */
static void w4_histogram(jbuf *b, const char *file) {
  int *counts = calloc((size_t)W4.n * (STEPS + 1), sizeof(int));
  long total = 0;
  FILE *f = file ? fopen(file, "r") : NULL;
  char line[256];
  size_t pl = strlen(G.prefix);
  while (f && fgets(line, sizeof line, f)) {
    if (strncmp(line, G.prefix, pl) != 0) continue;
    total++;
    char *end;
    long i = strtol(line + pl, &end, 10);
    if (*end != ' ') continue;
    long s = strtol(end + 1, NULL, 10);
    if (i >= 0 && i < W4.n && s >= 1 && s <= STEPS) counts[i * (STEPS + 1) + s]++;
  }
  if (f) fclose(f);
  int maxc = 0;
  for (int i = 0; i < W4.n; i++)
    for (int s = 1; s <= STEPS; s++)
      if (counts[i * (STEPS + 1) + s] > maxc) maxc = counts[i * (STEPS + 1) + s];
  long *hist = calloc((size_t)maxc + 1, sizeof(long));
  int reexec = 0;
  for (int i = 0; i < W4.n; i++) {
    int re = 0;
    for (int s = 1; s <= STEPS; s++) {
      int c = counts[i * (STEPS + 1) + s];
      hist[c]++;
      re |= c > 1;
    }
    reexec += re;
  }
  jb_key(b, "step_exec_hist");
  jb_raw(b, "{");
  int first = 1;
  for (int c = 0; c <= maxc; c++) {
    if (!hist[c]) continue;
    jb_raw(b, "%s\"%d\":%ld", first ? "" : ",", c, hist[c]);
    first = 0;
  }
  jb_raw(b, "}");
  jb_int(b, "workflows_with_reexecuted_steps", reexec);
  jb_int(b, "step_bodies_total", total);
  free(hist);
  free(counts);
}

/* Phase B (a fresh process): engine_run() has recovered everything due; start
 * what was never submitted, wait for all, check the results. */
static void w4b_idle(void) {
  for (size_t k = 0; k < G.nev; k++) {
    event ev = G.evq[k];
    if (ev.kind == EV_DONE && ev.idx >= 0 && ev.idx < W4.n && !W4.done_flag[ev.idx]) {
      W4.done_flag[ev.idx] = 1;
      W4.done++;
    }
  }
  G.nev = 0;
  W4.inflight -= acked;
  acked = 0;
  while (W4.inflight < W4_CONC && W4.next < W4.nnever) {
    if (submit_chain(W4.never[W4.next++]) == 0) W4.inflight++;
  }
  if (W4.done < W4.n) return;
  const char *t0 = getenv("RESTART_T0_MS");
  double recovery_s = t0 ? (double)(epoch_ms() - atoll(t0)) / 1000.0 : NAN;
  int correct = 0;
  for (int i = 0; i < W4.n; i++) correct += result_is(i, NULL, i + STEPS);
  jbuf b = record_begin("W4");
  jb_str(&b, "kill_target", "engine-worker(driver)");
  jb_int(&b, "n", W4.n);
  jb_int(&b, "completed", correct);
  jb_key(&b, "at_kill");
  jb_raw(&b, "%s", W4.at_kill);
  jb_int(&b, "never_submitted", W4.nnever);
  jb_num(&b, "recovery_s", recovery_s, 2);
  w4_histogram(&b, getenv("STEP_COUNTER_FILE"));
  record_emit(&b);
  finish_run();
}

/* -------------------------------------------------------------- main --- */

static void on_idle(uv_idle_t *h) {
  uv_idle_stop(h);
  if (strcmp(G.w, "w1") == 0) w1_idle();
  else if (strcmp(G.w, "w2") == 0) w2_idle();
  else if (strcmp(G.w, "w3") == 0) w3_idle();
  else if (strcmp(G.w, "w4a") == 0) w4a_idle();
  else w4b_idle();
}

static void on_watchdog(uv_timer_t *t) {
  (void)t;
  fprintf(stderr, "WATCHDOG: %s %s exceeded its time, aborting\n", PEER, G.w);
  fflush(stderr);
  _exit(3);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  G.w = argc > 1 ? argv[1] : "";
  if (strcmp(G.w, "w1") && strcmp(G.w, "w2") && strcmp(G.w, "w3") && strcmp(G.w, "w4a") && strcmp(G.w, "w4b")) {
    fprintf(stderr, "usage: engine_driver w1|w2|w3|w4a|w4b\n");
    return 2;
  }
  snprintf(G.prefix, sizeof G.prefix, "w%c-", G.w[1]);
  const char *dir = getenv("ENGINE_BENCH_DIR");
  if (!dir || !*dir) dir = ENGINE_BENCH_DIR;
  snprintf(G.chain, sizeof G.chain, "%s/chain10.lua", dir);
  snprintf(G.waiter, sizeof G.waiter, "%s/waiter.lua", dir);
  const char *db = getenv("ENGINE_BENCH_DB");
  snprintf(G.db, sizeof G.db, "%s", db && *db ? db : "bench.db");
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", G.db);
  snprintf(G.data_dir, sizeof G.data_dir, "%s", dirname(tmp));

  if (strcmp(G.w, "w4b") == 0) {
    W4.n = env_int("W4_N", 1000);
    w4_snapshot();
  }

  char err[512], holder[256];
  int lockfd = engine_lock(G.db, "bench", holder, sizeof holder);
  if (lockfd < 0) die("%s is in use: %s", G.db, holder);
  engine_config cfg = {.db_path = G.db, .on_status = on_status, .on_commit = on_commit};
  if (engine_open(&G.e, &cfg, err, sizeof err) != 0) die("%s", err);
  G.st = engine_store(G.e);
  G.loop = engine_loop(G.e);
  uv_idle_init(G.loop, &G.idle);
  uv_timer_init(G.loop, &G.timer);
  uv_timer_init(G.loop, &G.watchdog);
  int timeout_s = env_int("DRIVER_TIMEOUT_S", strcmp(G.w, "w3") == 0 ? 2400 : 600);
  uv_timer_start(&G.watchdog, on_watchdog, (uint64_t)timeout_s * 1000, 0);
  uv_unref((uv_handle_t *)&G.watchdog);

  if (strcmp(G.w, "w1") == 0) {
    W1.n = env_int("W1_N", 1000);
    W1.t0 = now_ms();
  } else if (strcmp(G.w, "w2") == 0) {
    W2.n = env_int("W2_N", 200);
    W2.warmup = env_int("W2_WARMUP", 5);
    W2.lat = calloc((size_t)W2.n + 1, sizeof(double));
  } else if (strcmp(G.w, "w3") == 0) {
    W3.n = env_int("W3_N", 10000);
    W3.settle_ms = env_int("W3_SETTLE_MS", 5000);
    W3.late_s = env_int("W3_LATE_SAMPLE_S", 70);
    W3.seen = calloc((size_t)W3.n, 1);
    W3.base_disk = du_mib(G.data_dir);
    W3.base_db = db_files_mib();
    W3.t0 = now_ms();
  } else if (strcmp(G.w, "w4a") == 0) {
    W4.n = env_int("W4_N", 1000);
    W4.done_flag = calloc((size_t)W4.n, 1);
  } else {
    W4.done_flag = calloc((size_t)W4.n, 1);
    W4.never = calloc((size_t)W4.n, sizeof(int));
    for (int i = 0; i < W4.n; i++) {
      char id[64];
      wf_id(id, sizeof id, i);
      wf_row w;
      int found = store_wf_get(G.st, id, &w);
      if (found == 0) W4.never[W4.nnever++] = i;
      if (found == 1) {
        if (engine_status_terminal(w.status)) {
          W4.done_flag[i] = 1;
          W4.done++;
        }
        wf_row_free(&w);
      }
    }
  }
  /* the workload starts from the loop, after engine_run's recovery pass */
  uv_idle_start(&G.idle, on_idle);
  if (engine_run(G.e) != 0) {
    fprintf(stderr, "engine_driver: the engine stopped after a store error\n");
    G.failed = 1;
  }
  engine_free(G.e);
  engine_unlock(lockfd);
  return G.failed;
}
