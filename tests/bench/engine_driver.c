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
 * Two modes. Embedded (the default): the driver process is the one worker,
 * on SQLite or on PostgreSQL (ENGINE_BENCH_DB a postgres:// URL; the worker
 * lock is then taken in the mode "serve", as `engine serve` takes it, so the
 * driver is a worker among others and not the database's only one).
 * Client (ENGINE_BENCH_CLIENT=1, PostgreSQL): no engine in this process;
 * `engine serve` processes started by the peer's ctl.sh run the workflows.
 * The driver writes as every client does (engine_create_workflow,
 * engine_send_signal: one committed transaction each) and learns what the
 * workers did the way a foreground `engine start` beside a serve follows its
 * workflow: dbwatch (LISTEN engine_commits, data version polled as the
 * safety net), then the workflows' rows (store_wf_get for a few, a range of
 * the id index, store_wf_ids, for many).
 *
 * Environment: ENGINE_BENCH_DB (database path or URL, default ./bench.db),
 * ENGINE_BENCH_PEER (the record's peer name, default "engine"),
 * ENGINE_BENCH_CLIENT (1: client mode), ENGINE_BENCH_SERVE_PIDS (client
 * mode, W3: the workers whose memory and CPU count), ENGINE_BENCH_PGDATA
 * (PostgreSQL, W3: the cluster's data directory: its postmaster.pid names the
 * server processes, du gives the disk), W4_KILL_TARGET / W4_KILLED_LEASES
 * (w4b: what ctl.sh killed, for the record),
 * ENGINE_BENCH_DIR (where chain10.lua and waiter.lua are; default: the source
 * directory), RESULTS_FILE (records are appended there too), STEP_COUNTER_FILE
 * (W4: read by the activity module and by w4b), RESTART_T0_MS (w4b),
 * DRIVER_TIMEOUT_S (watchdog).
 *
 * The engine's callbacks run inside engine_commit(); calling back into the
 * engine from there is not safe, so they only queue what they saw and kick a
 * uv_idle handle; the workload logic runs from that handle (or from timers). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <dirent.h>
#include <libpq-fe.h>
#include <signal.h>
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

#define STEPS 10
#define W1_CONC 50
#define W2_SETTLE_MS 20
#define W3_CONC 50
#define W4_CONC 50

/* ------------------------------------------------------------ helpers --- */

static const char *peer_name = "engine"; /* $ENGINE_BENCH_PEER */

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
  jb_str(&b, "peer", peer_name);
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
  int nproc;
} mem;

/* RSS from /proc/PID/status, PSS from /proc/PID/smaps_rollup, summed over
 * pids (lib/common.js procMem: RSS double-counts shared pages, PSS splits
 * them); a process that went away counts nothing. */
static mem procs_mem(const int *pids, int n) {
  mem m = {0, 0, 0};
  char line[256], path[64];
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "/proc/%d/status", pids[i]);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    m.nproc++;
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "VmRSS:", 6) == 0) m.rss_mib += strtod(line + 6, NULL) / 1024.0;
    fclose(f);
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", pids[i]);
    f = fopen(path, "r");
    if (!f) continue;
    while (fgets(line, sizeof line, f))
      if (strncmp(line, "Pss:", 4) == 0) m.pss_mib += strtod(line + 4, NULL) / 1024.0;
    fclose(f);
  }
  m.rss_mib = round(m.rss_mib * 10) / 10;
  m.pss_mib = round(m.pss_mib * 10) / 10;
  return m;
}

/* /proc/PID/stat read into buf: the fields after the command's name (the
 * state first), or NULL when the process is gone. */
static char *proc_stat(int pid, char *buf, size_t n) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  size_t len = fread(buf, 1, n - 1, f);
  fclose(f);
  buf[len] = 0;
  char *p = strrchr(buf, ')');
  return p && p[1] ? p + 2 : NULL;
}

/* CPU seconds (user+system, incl. reaped children) of pids (lib/common.js cpuSeconds). */
static double procs_cpu_s(const int *pids, int n) {
  double t = 0;
  for (int i = 0; i < n; i++) {
    char buf[2048];
    char *p = proc_stat(pids[i], buf, sizeof buf);
    if (!p) continue;
    for (int field = 0; field < 15 && p; field++) {
      if (field >= 11) t += strtod(p, NULL);
      p = strchr(p, ' ');
      if (p) p++;
    }
  }
  return t / (double)sysconf(_SC_CLK_TCK);
}

/* The processes of one PostgreSQL cluster: the postmaster named by
 * DATADIR/postmaster.pid and its children (only this cluster's: other
 * clusters may run on the machine). Returns how many went into pids. */
static int pg_cluster_pids(const char *datadir, int *pids, int max) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/postmaster.pid", datadir);
  FILE *f = fopen(path, "r");
  int pm = 0, n = 0;
  if (!f) return 0;
  if (fscanf(f, "%d", &pm) != 1) pm = 0;
  fclose(f);
  if (pm <= 0) return 0;
  pids[n++] = pm;
  DIR *d = opendir("/proc");
  struct dirent *de;
  while (d && (de = readdir(d)) && n < max) {
    int pid = atoi(de->d_name);
    if (pid <= 0) continue;
    char buf[512];
    char *p = proc_stat(pid, buf, sizeof buf);
    int ppid = 0;
    if (p && sscanf(p, "%*c %d", &ppid) == 1 && ppid == pm) pids[n++] = pid;
  }
  if (d) closedir(d);
  return n;
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
  engine *e;       /* embedded mode: the worker in this process */
  store *st;       /* the worker's store, or the client's own */
  int client;      /* client mode: no engine here (ENGINE_BENCH_CLIENT=1) */
  int pg;          /* the database is a PostgreSQL URL */
  uv_loop_t *loop;
  uv_idle_t idle;
  uv_timer_t timer;
  uv_timer_t watchdog;
  const char *w;   /* workload */
  char prefix[8];  /* "w1-" ... */
  char chain[PATH_MAX], waiter[PATH_MAX];
  char db[PATH_MAX], data_dir[PATH_MAX];
  /* what the engine's callbacks (or the client's reads) saw, handled from the idle handle */
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

static void push_event(int kind, int idx) {
  if (G.nev == G.capev) {
    G.capev = G.capev ? G.capev * 2 : 256;
    G.evq = realloc(G.evq, G.capev * sizeof *G.evq);
  }
  G.evq[G.nev++] = (event){kind, idx};
  kick();
}

static int status_kind(const char *status) {
  if (strcmp(status, "waiting") == 0) return EV_PARKED;
  if (engine_status_terminal(status) || strcmp(status, "stuck") == 0) return EV_DONE;
  return 0;
}

static void w2_saw_done(int idx);
static void on_status(void *ud, const char *id, const char *status, const char *detail) {
  (void)ud;
  (void)detail;
  size_t pl = strlen(G.prefix);
  if (strncmp(id, G.prefix, pl) != 0) return;
  int kind = status_kind(status);
  if (kind == EV_DONE && G.w[1] == '2') w2_saw_done(atoi(id + pl));
  if (kind) push_event(kind, atoi(id + pl));
}

/* ns this thread has waited on a run queue for a CPU so far (the second
 * field of /proc/thread-self/schedstat; 0 when it cannot be read): a stage's
 * time minus its share of it is the stage's own (CPU and I/O). */
static uint64_t run_delay_ns(void) {
  static int fd = -2;
  if (fd == -2) fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  char buf[128];
  ssize_t n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : -1;
  if (n <= 0) return 0;
  buf[n] = 0;
  unsigned long long cpu = 0, wait = 0;
  return sscanf(buf, "%llu %llu", &cpu, &wait) == 2 ? wait : 0;
}

/* The last commit's stages (engine_config.on_commit_stages), how many so
 * far, and the run-queue wait when it was answered. */
static engine_commit_stages last_commit;
static uint64_t last_commit_wait;
static long stage_commits;
static void on_commit_stages(void *ud, const engine_commit_stages *cs) {
  (void)ud;
  last_commit = *cs;
  last_commit_wait = run_delay_ns();
  stage_commits++;
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

/* ---- client mode: following workflows that other processes run ---- */

/* Each workflow the client waits on, by index: FOL_NONE (not followed),
 * FOL_OPEN (written, nothing seen yet), FOL_PARKED (seen waiting), FOL_DONE
 * (seen ended). The open and parked ones are in fol.list. */
enum { FOL_NONE = 0, FOL_OPEN, FOL_PARKED, FOL_DONE };
#define FEW 64 /* up to this many followed: one read each; more: a range of the id index */
static struct {
  char *state;
  int n;
  int *list;
  int nlist;
  dbwatch *watch;
  uv_timer_t scan_timer;
  int scan_due;       /* a change was heard since the last read */
  double next_scan;   /* not before (ms): reads take at most a third of the time */
  long scans, rows;   /* for the log line at the end */
  double scan_ms, write_ms;
  long writes;
} fol;

static void follow_init(int n) {
  fol.n = n;
  fol.state = calloc((size_t)n, 1);
  fol.list = calloc((size_t)n, sizeof(int));
}

static void follow(int i) {
  if (!G.client || i < 0 || i >= fol.n || fol.state[i] != FOL_NONE) return;
  fol.state[i] = FOL_OPEN;
  fol.list[fol.nlist++] = i;
}

/* What a read saw of workflow idx: events for what is new. */
static void follow_saw(int idx, const char *status) {
  if (idx < 0 || idx >= fol.n || fol.state[idx] == FOL_NONE || fol.state[idx] == FOL_DONE) return;
  int kind = status_kind(status);
  if (kind == EV_PARKED && fol.state[idx] == FOL_OPEN) {
    fol.state[idx] = FOL_PARKED;
    push_event(EV_PARKED, idx);
  } else if (kind == EV_DONE) {
    fol.state[idx] = FOL_DONE;
    push_event(EV_DONE, idx);
  }
}

static int scan_row(void *ud, const wf_row *w) {
  (void)ud;
  size_t pl = strlen(G.prefix);
  fol.rows++;
  if (strncmp(w->id, G.prefix, pl) == 0) follow_saw(atoi(w->id + pl), w->status);
  return 0;
}

static void follow_scan(void) {
  double t0 = now_ms();
  fol.scan_due = 0;
  fol.scans++;
  /* drop what ended from the list first */
  int k = 0;
  for (int j = 0; j < fol.nlist; j++)
    if (fol.state[fol.list[j]] != FOL_DONE) fol.list[k++] = fol.list[j];
  fol.nlist = k;
  if (fol.nlist == 0) return;
  if (fol.nlist <= FEW) {
    int copy[FEW], n = fol.nlist;
    memcpy(copy, fol.list, (size_t)n * sizeof(int));
    for (int j = 0; j < n; j++) {
      char id[64];
      wf_row w;
      wf_id(id, sizeof id, copy[j]);
      fol.rows++;
      if (store_wf_get(G.st, id, &w) == 1) {
        follow_saw(copy[j], w.status);
        wf_row_free(&w);
      }
    }
  } else {
    /* parked ones are read again only while some are not parked yet */
    int open = 0;
    for (int j = 0; j < fol.nlist && !open; j++) open = fol.state[fol.list[j]] == FOL_OPEN;
    store_wf_ids(G.st, G.prefix, open ? "waiting,completed,failed,cancelled,stuck" : "completed,failed,cancelled,stuck",
                 fol.n + 16, scan_row, NULL);
  }
  double d = now_ms() - t0;
  fol.scan_ms += d;
  fol.next_scan = now_ms() + 2 * d;
}

static void on_scan_timer(uv_timer_t *t) {
  (void)t;
  if (fol.scan_due) follow_scan();
}

/* Something was committed (by a worker, or by this client): read soon. */
static void follow_changed(void *ud) {
  (void)ud;
  fol.scan_due = 1;
  if (uv_is_active((uv_handle_t *)&fol.scan_timer)) return;
  double wait = fol.next_scan - now_ms();
  if (wait <= 0) {
    follow_scan();
  } else {
    uv_timer_start(&fol.scan_timer, on_scan_timer, (uint64_t)ceil(wait), 0);
  }
}

/* ---- writes ---- */

static int submit(int i, const char *script, const char *input) {
  char id[64], err[512];
  wf_id(id, sizeof id, i);
  if (G.client) {
    /* a client's start: one transaction, committed on return */
    int existed = 0;
    double t0 = now_ms();
    int rc = engine_create_workflow(G.st, id, script, input, NULL, &existed, err, sizeof err);
    fol.write_ms += now_ms() - t0;
    fol.writes++;
    if (rc != 0 || existed) {
      fprintf(stderr, "engine_driver: submit %s: %s\n", id, existed ? "exists already" : err);
      return -1;
    }
    follow(i);
    acked++;
    kick();
    return 0;
  }
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
  if (G.client) {
    double t0 = now_ms();
    int rc = engine_send_signal(G.st, id, "go", "\"go\"", NULL, err, sizeof err);
    fol.write_ms += now_ms() - t0;
    fol.writes++;
    if (rc != 0) {
      fprintf(stderr, "engine_driver: signal %s: %s\n", id, err);
      return -1;
    }
    acked++;
    kick();
    return 0;
  }
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
  if (!G.client) {
    engine_stop(G.e);
    return;
  }
  fprintf(stderr, "engine_driver: client: %ld writes in %.0f ms, %ld rows read in %ld reads, %.0f ms\n", fol.writes,
          fol.write_ms, fol.rows, fol.scans, fol.scan_ms);
  if (fol.watch) dbwatch_stop(fol.watch);
  fol.watch = NULL;
  uv_close((uv_handle_t *)&fol.scan_timer, NULL);
  uv_close((uv_handle_t *)&G.idle, NULL);
  uv_close((uv_handle_t *)&G.timer, NULL);
  uv_close((uv_handle_t *)&G.watchdog, NULL);
  uv_stop(G.loop);
}

/* A query of the benchmark's own (the state at a kill, the database size),
 * outside the engine's store API, as the DBOS driver reads its system
 * database: one connection per call. Returns the first value as a number. */
static double pg_value(const char *sql) {
  PGconn *c = PQconnectdb(G.db);
  double v = NAN;
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) v = atof(PQgetvalue(r, 0, 0));
    PQclear(r);
  }
  PQfinish(c);
  return v;
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

/* The stages of one signal's round trip (embedded mode), in ms: the call
 * (the signal written, the workflow loaded, replayed and resumed to its end,
 * all in the open batch), the wait for the batch's commit to begin, the
 * commit (COMMIT: the WAL written and fdatasync'd), a checkpoint SQLite ran
 * inside it, the status note's delivery, and the client's turn (the loop's
 * next idle tick, the result read and checked). */
enum { ST_TOTAL, ST_WAIT, ST_CALL, ST_TO_COMMIT, ST_COMMIT, ST_COMMIT_WAIT, ST_CHECKPOINT, ST_NOTIFY, ST_CLIENT, ST__N };
static const char *const stage_names[ST__N] = {"round trip",
                                               "  of it waiting for a CPU (run queue)",
                                               "signal call (write, load, replay, resume)",
                                               "wait for the commit to begin",
                                               "commit (WAL write + fdatasync), own time",
                                               "commit: waiting for a CPU (run queue)",
                                               "checkpoint inside the commit",
                                               "status note delivered",
                                               "client turn (idle tick, result read)"};
static const char *const stage_keys[ST__N] = {"total",  "cpu_wait",   "call",   "to_commit", "commit",
                                              "commit_cpu_wait", "checkpoint", "notify", "client"};
typedef struct w2sample {
  double ms[ST__N];
  long commits; /* commits from the call's return to the completion's note */
  int64_t wal_frames;
} w2sample;

static struct {
  int n, warmup, i;
  int phase; /* 0 start, 1 wait parked, 2 settling, 3 wait result */
  double t0;
  double *lat;
  int nlat;
  uint64_t h0, h1, hdone; /* uv_hrtime: signal call, its return, the completion's note */
  uint64_t w0, w1, wdone;  /* run_delay_ns at the call, its return, the completion's commit */
  long commits_at_call;
  engine_commit_stages done_commit; /* the commit whose note said completed */
  w2sample *samples;
} W2;

static void w2_saw_done(int idx) {
  if (idx != W2.i || W2.phase != 3) return;
  W2.hdone = uv_hrtime();
  W2.done_commit = last_commit;
  W2.wdone = last_commit_wait;
  W2.commits_at_call = stage_commits - W2.commits_at_call;
}

static void w2_signal(uv_timer_t *t) {
  (void)t;
  W2.t0 = now_ms();
  W2.w0 = run_delay_ns();
  W2.h0 = uv_hrtime();
  if (signal_go(W2.i) != 0) die("W2: cannot signal");
  W2.h1 = uv_hrtime();
  W2.w1 = run_delay_ns();
  W2.commits_at_call = stage_commits;
  W2.phase = 3;
}

static double ns_ms(uint64_t a, uint64_t b) { return b > a ? (double)(b - a) / 1e6 : 0; }

static void w2_sample(w2sample *x, uint64_t hend, uint64_t wend) {
  const engine_commit_stages *c = &W2.done_commit;
  memset(x, 0, sizeof *x);
  x->ms[ST_TOTAL] = ns_ms(W2.h0, hend);
  x->ms[ST_WAIT] = ns_ms(W2.w0, wend);
  x->ms[ST_CALL] = ns_ms(W2.h0, W2.h1);
  x->commits = W2.commits_at_call;
  if (!G.client && c->done) {
    x->ms[ST_TO_COMMIT] = ns_ms(W2.h1, c->begin);
    x->ms[ST_CHECKPOINT] = (double)c->checkpoint_ns / 1e6;
    x->ms[ST_COMMIT_WAIT] = ns_ms(W2.w1, W2.wdone);
    x->ms[ST_COMMIT] = ns_ms(c->begin, c->done) - x->ms[ST_CHECKPOINT] - x->ms[ST_COMMIT_WAIT];
    if (x->ms[ST_COMMIT] < 0) x->ms[ST_COMMIT] = 0;
    x->ms[ST_NOTIFY] = ns_ms(c->done, W2.hdone);
    x->wal_frames = c->wal_frames;
  }
  x->ms[ST_CLIENT] = ns_ms(W2.hdone ? W2.hdone : W2.h1, hend);
}

static int cmp_sample_desc(const void *a, const void *b) {
  double x = ((const w2sample *)a)->ms[ST_TOTAL], y = ((const w2sample *)b)->ms[ST_TOTAL];
  return x > y ? -1 : x < y;
}

/* Column k of stage st over n samples: sorted copy into v. */
static void stage_values(const w2sample *s, size_t n, int st, double *v) {
  for (size_t k = 0; k < n; k++) v[k] = s[k].ms[st];
  qsort(v, n, sizeof(double), cmp_double);
}

/* The stage table of the slowest 2% of the round trips beside all of them,
 * and their histogram (how many of the slowest fell in each bucket, per
 * stage); the slowest 2%'s mean per stage goes into the record. */
static void w2_stage_table(jbuf *b) {
  size_t n = (size_t)W2.nlat, slow = (n + 49) / 50;
  if (!n || G.client) return;
  qsort(W2.samples, n, sizeof *W2.samples, cmp_sample_desc);
  double *v = malloc(n * sizeof(double));
  static const double edges[] = {0.25, 0.5, 1, 2, 4, 8, 16, 32};
  enum { NB = sizeof edges / sizeof edges[0] + 1 };
  printf("\nW2 stages: the slowest 2%% (%zu of %zu round trips) beside all (ms)\n", slow, n);
  printf("| %-41s | all p50 | all p99 | slow p50 | slow mean | slow max | share of slow |\n", "stage");
  printf("|%s|---------|---------|----------|-----------|----------|---------------|\n",
         "-------------------------------------------");
  double slow_total = 0;
  for (size_t k = 0; k < slow; k++) slow_total += W2.samples[k].ms[ST_TOTAL];
  jb_key(b, "slowest_2pct_stage_mean_ms");
  jb_raw(b, "{");
  for (int st = 0; st < ST__N; st++) {
    double sum = 0;
    for (size_t k = 0; k < slow; k++) sum += W2.samples[k].ms[st];
    stage_values(W2.samples, n, st, v);
    double ap50 = percentile(v, n, 50), ap99 = percentile(v, n, 99);
    stage_values(W2.samples, slow, st, v);
    printf("| %-41s | %7.2f | %7.2f | %8.2f | %9.2f | %8.2f | %12.0f%% |\n", stage_names[st], ap50, ap99,
           percentile(v, slow, 50), sum / (double)slow, v[slow - 1], slow_total > 0 ? 100 * sum / slow_total : 0);
    char num[32];
    fmt_num(num, sizeof num, sum / (double)slow, 2);
    jb_raw(b, "%s\"%s\":%s", st ? "," : "", stage_keys[st], num);
  }
  jb_raw(b, "}");
  printf("\nW2 stages of the slowest 2%%: how many fell in each bucket (ms)\n| %-41s |", "stage");
  for (int k = 0; k < NB; k++) {
    char h[16];
    if (k < NB - 1) snprintf(h, sizeof h, "<%g", edges[k]);
    else snprintf(h, sizeof h, ">=%g", edges[NB - 2]);
    printf(" %5s |", h);
  }
  printf("\n|-------------------------------------------|");
  for (int k = 0; k < NB; k++) printf("-------|");
  printf("\n");
  for (int st = 0; st < ST__N; st++) {
    int cnt[NB] = {0};
    for (size_t k = 0; k < slow; k++) {
      int bk = 0;
      while (bk < NB - 1 && W2.samples[k].ms[st] >= edges[bk]) bk++;
      cnt[bk]++;
    }
    printf("| %-41s |", stage_names[st]);
    for (int k = 0; k < NB; k++) printf(" %5d |", cnt[k]);
    printf("\n");
  }
  int ckpt_slow = 0, ckpt_all = 0;
  long more_slow = 0;
  for (size_t k = 0; k < n; k++) {
    ckpt_all += W2.samples[k].ms[ST_CHECKPOINT] > 0;
    if (k < slow) ckpt_slow += W2.samples[k].ms[ST_CHECKPOINT] > 0, more_slow += W2.samples[k].commits > 1;
  }
  printf("\ncommits with a checkpoint inside: %d of the slowest %zu, %d of all %zu; slowest with more than one commit: "
         "%ld\n\n",
         ckpt_slow, slow, ckpt_all, n, more_slow);
  jb_int(b, "slowest_with_checkpoint", ckpt_slow);
  jb_int(b, "all_with_checkpoint", ckpt_all);
  free(v);
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
      if (W2.i >= W2.warmup) w2_sample(&W2.samples[W2.nlat], uv_hrtime(), run_delay_ns()), W2.lat[W2.nlat++] = dt;
      W2.hdone = 0;
      memset(&W2.done_commit, 0, sizeof W2.done_commit);
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
  w2_stage_table(&b);
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
  mem w5, s5, wlate, slate; /* worker(s) and server, at +5 s and at the late sample */
  double cpu_pct;
  double disk5, db5, cpu0, tc0;
} W3;

/* The processes that count (lib/common.js: the DBOS worker is the driver, its
 * server the postgres processes): the workers are this process and, in client
 * mode, the serves ($ENGINE_BENCH_SERVE_PIDS); the server is this cluster's
 * postgres processes ($ENGINE_BENCH_PGDATA), none on SQLite. */
#define MAXPIDS 512
static int worker_pids(int *pids) {
  int n = 0;
  pids[n++] = (int)getpid();
  const char *s = getenv("ENGINE_BENCH_SERVE_PIDS");
  while (G.client && s && *s && n < MAXPIDS) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s) break;
    if (v > 0) pids[n++] = (int)v;
    s = end;
  }
  return n;
}
static int server_pids(int *pids) {
  const char *d = getenv("ENGINE_BENCH_PGDATA");
  return G.pg && d && *d ? pg_cluster_pids(d, pids, MAXPIDS) : 0;
}
static double all_cpu_s(void) {
  int p[2 * MAXPIDS];
  int n = worker_pids(p);
  n += server_pids(p + n);
  return procs_cpu_s(p, n);
}
static void sample_mem(mem *worker, mem *server) {
  int p[MAXPIDS];
  *worker = procs_mem(p, worker_pids(p));
  *server = procs_mem(p, server_pids(p));
}

/* The database's own size: SQLite's file and WAL; PostgreSQL's
 * pg_database_size (DBOS's sysdb_mib). */
static double db_files_mib(void) {
  if (G.pg) return round(pg_value("SELECT pg_database_size(current_database())") / 1048576.0 * 10) / 10;
  char p[PATH_MAX + 8];
  double sz = file_size(G.db);
  snprintf(p, sizeof p, "%s-wal", G.db);
  sz += file_size(p);
  return round(sz / 1048576.0 * 10) / 10;
}

static void w3_late(uv_timer_t *t) {
  (void)t;
  sample_mem(&W3.wlate, &W3.slate);
  W3.cpu_pct = 100.0 * (all_cpu_s() - W3.cpu0) / ((now_ms() - W3.tc0) / 1000.0);
  W3.phase = 2;
  W3.t1 = now_ms();
  kick();
}

static void w3_sample(uv_timer_t *t) {
  (void)t;
  sample_mem(&W3.w5, &W3.s5);
  W3.disk5 = du_mib(G.data_dir);
  W3.db5 = db_files_mib();
  W3.cpu0 = all_cpu_s();
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
  jbuf b = record_begin("W3");
  jb_int(&b, "n", W3.n);
  jb_int(&b, "ok", W3.ok);
  jb_num(&b, "submit_s", W3.submit_s, 2);
  jb_num(&b, "all_parked_s", W3.park_s, 2);
  /* embedded: the driver process is the worker (and on SQLite the server);
   * client mode: the workers are the serves and this client */
  jb_num(&b, "worker_rss_mib", W3.w5.rss_mib, 1);
  jb_int(&b, "worker_nproc", W3.w5.nproc);
  if (G.pg) {
    jb_num(&b, "server_rss_mib", W3.s5.rss_mib, 1);
    jb_num(&b, "server_pss_mib", W3.s5.pss_mib, 1);
  } else {
    jb_null(&b, "server_rss_mib");
    jb_null(&b, "server_pss_mib");
  }
  jb_int(&b, "server_nproc", W3.s5.nproc);
  jb_num(&b, "total_rss_mib", W3.w5.rss_mib + W3.s5.rss_mib, 1);
  jb_num(&b, "total_pss_mib", W3.w5.pss_mib + W3.s5.pss_mib, 1);
  jb_num(&b, "parked_cpu_pct", W3.cpu_pct, 1);
  jb_num(&b, "late_total_rss_mib", W3.wlate.rss_mib + W3.slate.rss_mib, 1);
  jb_num(&b, "late_total_pss_mib", W3.wlate.pss_mib + W3.slate.pss_mib, 1);
  jb_num(&b, "late_worker_rss_mib", W3.wlate.rss_mib, 1);
  if (G.pg) jb_num(&b, "late_server_rss_mib", W3.slate.rss_mib, 1);
  else jb_null(&b, "late_server_rss_mib");
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
  char *unfinished; /* w4b: written before the kill and not ended when this process started */
  int nunfinished, unfinished_left;
  double takeover_s;
  /* w4b, embedded: step bodies begun before the kill whose completion the
   * log did not hold (-1: not counted, in client mode the others ran on) */
  int steps_in_flight, workflows_in_flight;
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

/* The durable state the killed process left, read before the engine
 * recovers it (client mode: while the surviving workers carry on). */
static void w4_snapshot_pg(void) {
  PGconn *c = PQconnectdb(G.db);
  char *p = W4.at_kill;
  size_t left = sizeof W4.at_kill;
  int n = snprintf(p, left, "{");
  p += n, left -= (size_t)n;
  int steps = 0;
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult *r = PQexec(c, "SELECT status, count(*) FROM workflows WHERE id LIKE 'w4-%' GROUP BY status ORDER BY status");
    for (int i = 0; PQresultStatus(r) == PGRES_TUPLES_OK && i < PQntuples(r); i++) {
      n = snprintf(p, left, "\"%s\":%s,", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
      p += n, left -= (size_t)n;
    }
    PQclear(r);
    r = PQexec(c, "SELECT count(*) FROM history WHERE wf_id LIKE 'w4-%' AND type='ActivityCompleted'");
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) steps = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
  }
  PQfinish(c);
  snprintf(p, left, "\"steps_recorded\":%d}", steps);
}

static void w4_snapshot(void) {
  if (G.pg) {
    w4_snapshot_pg();
    return;
  }
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

/* The step bodies of each workflow begun so far ("<wfid> <step>" lines):
 * counts[i * (STEPS + 1) + step]. */
static int *w4_step_counts(const char *file, long *total) {
  int *counts = calloc((size_t)W4.n * (STEPS + 1), sizeof(int));
  FILE *f = file ? fopen(file, "r") : NULL;
  char line[256];
  size_t pl = strlen(G.prefix);
  *total = 0;
  while (f && fgets(line, sizeof line, f)) {
    if (strncmp(line, G.prefix, pl) != 0) continue;
    (*total)++;
    char *end;
    long i = strtol(line + pl, &end, 10);
    if (*end != ' ') continue;
    long s = strtol(end + 1, NULL, 10);
    if (i >= 0 && i < W4.n && s >= 1 && s <= STEPS) counts[i * (STEPS + 1) + s]++;
  }
  if (f) fclose(f);
  return counts;
}

/* Before recovery: the steps in flight at the kill, begun (a counter line)
 * and without a committed completion (a chain's k-th ActivityCompleted is
 * its step k). */
static void w4_in_flight(void) {
  long total;
  int *counts = w4_step_counts(getenv("STEP_COUNTER_FILE"), &total);
  for (int i = 0; i < W4.n; i++) {
    char id[64];
    wf_id(id, sizeof id, i);
    wf_row w;
    int done = 0, any = 0;
    if (store_wf_get(G.st, id, &w) == 1) {
      hist_list h = {0};
      if (store_hist_load(G.st, id, w.run, &h) == STORE_OK)
        for (size_t k = 0; k < h.n; k++) done += strcmp(h.v[k].type, "ActivityCompleted") == 0;
      hist_list_free(&h);
      wf_row_free(&w);
    }
    for (int s = done + 1; s <= STEPS; s++)
      if (counts[i * (STEPS + 1) + s]) W4.steps_in_flight++, any = 1;
    W4.workflows_in_flight += any;
  }
  free(counts);
}

/* lib/common.js stepHistogram over "<wfid> <step>" lines. */
static void w4_histogram(jbuf *b, const char *file) {
  long total;
  int *counts = w4_step_counts(file, &total);
  int maxc = 0;
  for (int i = 0; i < W4.n; i++)
    for (int s = 1; s <= STEPS; s++)
      if (counts[i * (STEPS + 1) + s] > maxc) maxc = counts[i * (STEPS + 1) + s];
  long *hist = calloc((size_t)maxc + 1, sizeof(long));
  int reexec = 0;
  long twice = 0; /* executions beyond the first, over all steps */
  for (int i = 0; i < W4.n; i++) {
    int re = 0;
    for (int s = 1; s <= STEPS; s++) {
      int c = counts[i * (STEPS + 1) + s];
      hist[c]++;
      re |= c > 1;
      twice += c > 1 ? c - 1 : 0;
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
  jb_int(b, "steps_run_twice", twice);
  if (W4.steps_in_flight >= 0) {
    /* a step may run again only if it was in flight (its body begun, its
     * completion not committed): at most one per workflow of a chain */
    jb_int(b, "steps_in_flight_at_kill", W4.steps_in_flight);
    jb_int(b, "workflows_in_flight_at_kill", W4.workflows_in_flight);
  }
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
      if (W4.unfinished[ev.idx] && --W4.unfinished_left == 0) {
        const char *t0 = getenv("RESTART_T0_MS");
        W4.takeover_s = t0 ? (double)(epoch_ms() - atoll(t0)) / 1000.0 : NAN;
      }
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
  const char *target = getenv("W4_KILL_TARGET");
  jb_str(&b, "kill_target", target && *target ? target : "engine-worker(driver)");
  const char *held = getenv("W4_KILLED_LEASES");
  if (held && *held) jb_int(&b, "killed_worker_leases", atoll(held));
  jb_int(&b, "n", W4.n);
  jb_int(&b, "completed", correct);
  jb_key(&b, "at_kill");
  jb_raw(&b, "%s", W4.at_kill);
  jb_int(&b, "never_submitted", W4.nnever);
  jb_num(&b, "recovery_s", recovery_s, 2);
  /* what the kill interrupted (written, not ended): from the kill until this
   * client saw the restarted worker or the others end it all (an upper bound:
   * this process's start-up is in it when they were quicker); the fresh
   * client's starts of the never-submitted come on top, in recovery_s */
  jb_int(&b, "unfinished_at_restart", W4.nunfinished);
  jb_num(&b, "takeover_s", W4.nunfinished ? W4.takeover_s : 0, 2);
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
  fprintf(stderr, "WATCHDOG: %s %s exceeded its time, aborting\n", peer_name, G.w);
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
  /* ENGINE_BENCH_CHAIN: chain10_local.lua for the row of local activities */
  const char *chain = getenv("ENGINE_BENCH_CHAIN");
  snprintf(G.chain, sizeof G.chain, "%s/%s", dir, chain && *chain ? chain : "chain10.lua");
  snprintf(G.waiter, sizeof G.waiter, "%s/waiter.lua", dir);
  const char *db = getenv("ENGINE_BENCH_DB");
  snprintf(G.db, sizeof G.db, "%s", db && *db ? db : "bench.db");
  const char *peer = getenv("ENGINE_BENCH_PEER");
  if (peer && *peer) peer_name = peer;
  G.pg = store_is_url(G.db);
  G.client = env_int("ENGINE_BENCH_CLIENT", 0) != 0;
  if (G.client && !G.pg) die("client mode (ENGINE_BENCH_CLIENT=1) needs a PostgreSQL URL in ENGINE_BENCH_DB");
  if (G.pg) {
    /* what du measures: the cluster's data directory, as for DBOS */
    const char *pgdata = getenv("ENGINE_BENCH_PGDATA");
    snprintf(G.data_dir, sizeof G.data_dir, "%s", pgdata && *pgdata ? pgdata : ".");
  } else {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", G.db);
    snprintf(G.data_dir, sizeof G.data_dir, "%s", dirname(tmp));
  }

  if (strcmp(G.w, "w4b") == 0) {
    W4.n = env_int("W4_N", 1000);
    /* taken by ctl.sh at the kill while other workers carry on (client mode), or here */
    const char *at = getenv("W4_AT_KILL");
    if (at && *at) snprintf(W4.at_kill, sizeof W4.at_kill, "%s", at);
    else w4_snapshot();
  }

  char err[512], holder[256];
  int lockfd = -1;
  if (G.client) {
    /* a client takes no worker lock (as `engine start --detach` takes none) */
    if (store_open(G.db, 0, &G.st, err, sizeof err) != STORE_OK) die("%s", err);
    G.loop = uv_default_loop();
  } else {
    /* the one worker of a SQLite file; on PostgreSQL a worker among any
     * others, holding the lock shared as `engine serve` does */
    lockfd = engine_lock(G.db, G.pg ? "serve" : "bench", holder, sizeof holder);
    if (lockfd < 0) die("%s is in use: %s", G.db, holder);
    engine_config cfg = {.db_path = G.db, .on_status = on_status, .on_commit = on_commit};
    if (strcmp(G.w, "w2") == 0) cfg.on_commit_stages = on_commit_stages;
    if (engine_open(&G.e, &cfg, err, sizeof err) != 0) die("%s", err);
    G.st = engine_store(G.e);
    G.loop = engine_loop(G.e);
  }
  uv_idle_init(G.loop, &G.idle);
  uv_timer_init(G.loop, &G.timer);
  uv_timer_init(G.loop, &G.watchdog);
  int timeout_s = env_int("DRIVER_TIMEOUT_S", strcmp(G.w, "w3") == 0 ? 2400 : 600);
  uv_timer_start(&G.watchdog, on_watchdog, (uint64_t)timeout_s * 1000, 0);
  uv_unref((uv_handle_t *)&G.watchdog);

  int nwf = 0;
  if (strcmp(G.w, "w1") == 0) {
    nwf = W1.n = env_int("W1_N", 1000);
    W1.t0 = now_ms();
  } else if (strcmp(G.w, "w2") == 0) {
    W2.n = env_int("W2_N", 200);
    W2.warmup = env_int("W2_WARMUP", 5);
    nwf = W2.n + W2.warmup;
    W2.lat = calloc((size_t)W2.n + 1, sizeof(double));
    W2.samples = calloc((size_t)W2.n + 1, sizeof *W2.samples);
  } else if (strcmp(G.w, "w3") == 0) {
    nwf = W3.n = env_int("W3_N", 10000);
    W3.settle_ms = env_int("W3_SETTLE_MS", 5000);
    W3.late_s = env_int("W3_LATE_SAMPLE_S", 70);
    W3.seen = calloc((size_t)W3.n, 1);
    W3.base_disk = du_mib(G.data_dir);
    W3.base_db = db_files_mib();
    W3.t0 = now_ms();
  } else if (strcmp(G.w, "w4a") == 0) {
    nwf = W4.n = env_int("W4_N", 1000);
    W4.done_flag = calloc((size_t)W4.n, 1);
  } else {
    nwf = W4.n;
  }
  if (G.client) {
    follow_init(nwf);
    uv_timer_init(G.loop, &fol.scan_timer);
    fol.watch = dbwatch_start(G.loop, G.st, follow_changed, NULL);
  }
  if (strcmp(G.w, "w4b") == 0) {
    W4.steps_in_flight = -1;
    if (!G.client) {
      W4.steps_in_flight = 0;
      w4_in_flight();
    }
    W4.done_flag = calloc((size_t)W4.n, 1);
    W4.never = calloc((size_t)W4.n, sizeof(int));
    W4.unfinished = calloc((size_t)W4.n, 1);
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
        } else {
          W4.unfinished[i] = 1;
          W4.nunfinished++;
          follow(i); /* client mode: run by a worker, followed from here */
        }
        wf_row_free(&w);
      }
    }
    /* the workflows the kill interrupted, as ctl.sh read them at the kill
     * (client mode: the other workers may have ended them before this
     * process started; their takeover is timed from the kill all the same) */
    const char *uf = getenv("W4_UNFINISHED_FILE");
    FILE *f = uf && *uf ? fopen(uf, "r") : NULL;
    char line[256];
    size_t pl = strlen(G.prefix);
    while (f && fgets(line, sizeof line, f)) {
      int i = strncmp(line, G.prefix, pl) == 0 ? atoi(line + pl) : -1;
      if (i < 0 || i >= W4.n || W4.unfinished[i]) continue;
      W4.unfinished[i] = 1;
      W4.nunfinished++;
    }
    if (f) fclose(f);
    W4.unfinished_left = W4.nunfinished;
    for (int i = 0; i < W4.n; i++)
      if (W4.unfinished[i] && W4.done_flag[i]) W4.unfinished_left--; /* ended before this process looked */
    if (W4.nunfinished && !W4.unfinished_left) {
      const char *t0 = getenv("RESTART_T0_MS");
      W4.takeover_s = t0 ? (double)(epoch_ms() - atoll(t0)) / 1000.0 : NAN;
    }
    if (G.client) follow_changed(NULL); /* some may have ended since */
  }
  /* the workload starts from the loop (embedded: after engine_run's recovery pass) */
  uv_idle_start(&G.idle, on_idle);
  if (G.client) {
    uv_run(G.loop, UV_RUN_DEFAULT);
    uv_run(G.loop, UV_RUN_NOWAIT); /* the closes */
    store_close(G.st);
    return G.failed;
  }
  if (engine_run(G.e) != 0) {
    fprintf(stderr, "engine_driver: the engine stopped after a store error\n");
    G.failed = 1;
  }
  engine_free(G.e);
  engine_unlock(lockfd);
  return G.failed;
}
