/* api_bench: what the HTTP API costs, measured against the same work done
 * in-process, in one run (tests/bench/api_bench.sh prints the table).
 *
 *   api_bench inproc DB N LANES            starts acknowledged durably in-process
 *   api_bench starts URL N LANES [TOKEN]   the same through POST /v1/workflows
 *   api_bench sse URL CLIENTS N            CLIENTS streams of one session of N events
 *   api_bench idle URL CONNECTIONS PID     RSS of PID with CONNECTIONS idle streams
 *   api_bench hooks URL N LANES            signed 10 KB GitHub-shaped deliveries to POST
 *                                          /hooks/bench (tests/bench/triggers/bench.lua)
 *
 * A start is acknowledged durably when the engine_when_committed callback
 * (in-process) or the 201 (HTTP) says so; each lane starts one workflow at a
 * time. The SSE lag is from the event's time (when the workflow emitted it,
 * just before its commit) to its arrival at a client: an upper bound of
 * commit-to-delivery. Output: one line "key value" per figure. */
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "engine.h"

static double mono_ms(void) { return (double)uv_hrtime() / 1e6; }

static double epoch_ms(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return (double)tv.tv_sec * 1000.0 + (double)tv.tv_usec / 1000.0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pct(double *v, size_t n, double p) {
  if (!n) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i];
}

static void report_latencies(const char *what, double *lat, size_t n, double secs) {
  printf("%s_per_s %.0f\n", what, (double)n / secs);
  printf("%s_p50_ms %.2f\n", what, pct(lat, n, 0.50));
  printf("%s_p90_ms %.2f\n", what, pct(lat, n, 0.90));
  printf("%s_p99_ms %.2f\n", what, pct(lat, n, 0.99));
  printf("%s_max_ms %.2f\n", what, pct(lat, n, 1.0));
}

/* ------------------------------------------------------------ inproc --- */

typedef struct lane {
  struct inproc *b;
  int busy;
  double t0;
} lane;

typedef struct inproc {
  engine *e;
  const char *script;
  int n, started, done, lanes;
  double *lat;
  lane *lane;
  uv_idle_t idle;
} inproc;

static void start_next(inproc *b, lane *l);

static void on_durable(void *ud, int ok) {
  lane *l = ud;
  inproc *b = l->b;
  if (!ok) {
    fprintf(stderr, "api_bench: a batch was lost\n");
    exit(1);
  }
  b->lat[b->done++] = mono_ms() - l->t0;
  l->busy = 0;
  if (b->done == b->n) engine_stop(b->e);
}

static void start_next(inproc *b, lane *l) {
  char id[64], err[512];
  snprintf(id, sizeof id, "inproc-%d", b->started++);
  l->t0 = mono_ms();
  l->busy = 1;
  if (engine_submit(b->e, id, b->script, "{}", NULL, err, sizeof err) != 0) {
    fprintf(stderr, "api_bench: %s\n", err);
    exit(1);
  }
  engine_when_committed(b->e, on_durable, l);
}

/* The next starts go from an idle handle: never from inside a commit. */
static void on_idle(uv_idle_t *h) {
  inproc *b = h->data;
  for (int i = 0; i < b->lanes && b->started < b->n; i++)
    if (!b->lane[i].busy) start_next(b, &b->lane[i]);
  if (b->started == b->n) uv_idle_stop(h);
}

static int run_inproc(const char *db, int n, int lanes) {
  inproc b = {0};
  b.n = n;
  b.lanes = lanes;
  b.lat = calloc((size_t)n, sizeof(double));
  b.lane = calloc((size_t)lanes, sizeof(lane));
  for (int i = 0; i < lanes; i++) b.lane[i].b = &b;
  static char script[4096];
  snprintf(script, sizeof script, "%s/api_noop.lua", ENGINE_BENCH_DIR);
  b.script = script;
  engine_config cfg = {.db_path = db};
  char err[512];
  if (engine_open(&b.e, &cfg, err, sizeof err) != 0) {
    fprintf(stderr, "api_bench: %s\n", err);
    return 1;
  }
  uv_idle_init(engine_loop(b.e), &b.idle);
  b.idle.data = &b;
  uv_idle_start(&b.idle, on_idle);
  double t0 = mono_ms();
  engine_run(b.e);
  double secs = (mono_ms() - t0) / 1000.0;
  report_latencies("inproc_starts", b.lat, (size_t)b.done, secs);
  engine_free(b.e);
  return 0;
}

/* ------------------------------------------------------------- HTTP --- */

typedef struct hlane {
  CURL *h;
  char *body;
  struct curl_slist *hdr; /* the delivery's own headers (hooks) */
  double t0;
  long status;
} hlane;

#define HOOK_SECRET "bench webhook secret"
#define HOOK_BODY_BYTES 10240

/* Request i of a run: a start's JSON, or a delivery's 10 KB body and its
 * signed headers (a fresh delivery id and workflow key each). */
static void http_request(hlane *x, int i, int hooks, struct curl_slist *common) {
  free(x->body);
  curl_slist_free_all(x->hdr);
  x->hdr = NULL;
  if (!hooks) {
    x->body = malloc(256);
    snprintf(x->body, 256, "{\"script\":\"api_noop.lua\",\"id\":\"http-%d\",\"input\":{}}", i);
    curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, common);
  } else {
    x->body = malloc(HOOK_BODY_BYTES + 1);
    int k = snprintf(x->body, HOOK_BODY_BYTES + 1,
                     "{\"action\":\"opened\",\"key\":\"hook-%d\",\"number\":%d,\"pull_request\":{\"title\":\"bench\","
                     "\"body\":\"",
                     i, i);
    while (k < HOOK_BODY_BYTES - 4) x->body[k++] = 'x';
    memcpy(x->body + k, "\"}}", 4);
    unsigned char mac[32];
    unsigned maclen = 0;
    HMAC(EVP_sha256(), HOOK_SECRET, (int)strlen(HOOK_SECRET), (unsigned char *)x->body, strlen(x->body), mac, &maclen);
    char sig[128] = "X-Hub-Signature-256: sha256=", dl[96];
    for (unsigned j = 0; j < maclen; j++) snprintf(sig + strlen(sig), 3, "%02x", mac[j]);
    snprintf(dl, sizeof dl, "X-GitHub-Delivery: bench-%d", i);
    x->hdr = curl_slist_append(NULL, "Content-Type: application/json");
    x->hdr = curl_slist_append(x->hdr, "X-GitHub-Event: pull_request");
    x->hdr = curl_slist_append(x->hdr, sig);
    x->hdr = curl_slist_append(x->hdr, dl);
    curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hdr);
  }
  curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, x->body);
  x->t0 = mono_ms();
}

static size_t discard(char *p, size_t s, size_t n, void *ud) {
  (void)p;
  (void)ud;
  return s * n;
}

static int run_starts(const char *url, int n, int lanes, const char *token, int hooks) {
  CURLM *m = curl_multi_init();
  hlane *l = calloc((size_t)lanes, sizeof *l);
  double *lat = calloc((size_t)n, sizeof(double));
  char endpoint[512], auth[256];
  snprintf(endpoint, sizeof endpoint, hooks ? "%s/hooks/bench" : "%s/v1/workflows", url);
  struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
  if (token) {
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    hdr = curl_slist_append(hdr, auth);
  }
  int started = 0, done = 0, failed = 0;
  double t0 = mono_ms();
  for (int i = 0; i < lanes && started < n; i++) {
    l[i].h = curl_easy_init();
    curl_easy_setopt(l[i].h, CURLOPT_URL, endpoint);
    curl_easy_setopt(l[i].h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(l[i].h, CURLOPT_PRIVATE, &l[i]);
  }
  for (int i = 0; i < lanes && started < n; i++) {
    http_request(&l[i], started++, hooks, hdr);
    curl_multi_add_handle(m, l[i].h);
  }
  while (done < n) {
    int running;
    curl_multi_perform(m, &running);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m, &left))) {
      if (msg->msg != CURLMSG_DONE) continue;
      hlane *x;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
      curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &x->status);
      if (msg->data.result != CURLE_OK || x->status != (hooks ? 202 : 201)) failed++;
      lat[done++] = mono_ms() - x->t0;
      curl_multi_remove_handle(m, x->h);
      if (started < n) {
        http_request(x, started++, hooks, hdr);
        curl_multi_add_handle(m, x->h); /* the same handle: its connection is kept alive */
      }
    }
    if (done < n) curl_multi_poll(m, NULL, 0, 100, NULL);
  }
  double secs = (mono_ms() - t0) / 1000.0;
  const char *what = hooks ? "hook_starts" : "http_starts";
  report_latencies(what, lat, (size_t)done, secs);
  printf("%s_failed %d\n", what, failed);
  return failed ? 1 : 0;
}

/* -------------------------------------------------------------- SSE --- */

typedef struct sse_client {
  CURL *h;
  char line[8192];
  size_t len;
  int events, ended;
} sse_client;

static double *g_lag;
static size_t g_nlag, g_caplag;

/* Counts "id:" frames; the lag from the event's "time" field. */
static size_t sse_write(char *p, size_t s, size_t n, void *ud) {
  sse_client *c = ud;
  size_t total = s * n;
  for (size_t i = 0; i < total; i++) {
    if (p[i] != '\n') {
      if (c->len < sizeof c->line - 1) c->line[c->len++] = p[i];
      continue;
    }
    c->line[c->len] = 0;
    if (strncmp(c->line, "event: end", 10) == 0) c->ended = 1;
    const char *t = strncmp(c->line, "data: ", 6) == 0 ? strstr(c->line, "\"type\":\"tick\"") : NULL;
    const char *tm = t ? strstr(c->line, "\"time\":") : NULL;
    if (tm) {
      c->events++;
      if (g_nlag == g_caplag) {
        g_caplag = g_caplag ? g_caplag * 2 : 4096;
        g_lag = realloc(g_lag, g_caplag * sizeof *g_lag);
      }
      g_lag[g_nlag++] = epoch_ms() - atof(tm + 7);
    }
    c->len = 0;
  }
  return total;
}

static CURL *stream_handle(const char *url, sse_client *c, struct curl_slist *hdr) {
  CURL *h = curl_easy_init();
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sse_write);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
  return h;
}

static long post(const char *url, const char *body) {
  CURL *h = curl_easy_init();
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
  long status = 0;
  if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(h);
  return status;
}

static int run_sse(const char *url, int clients, int n) {
  char body[256], stream[512];
  snprintf(body, sizeof body, "{\"script\":\"api_ticks.lua\",\"id\":\"ticks\",\"input\":{\"n\":%d}}", n);
  snprintf(stream, sizeof stream, "%s/v1/workflows/ticks/events", url);
  struct curl_slist *hdr = curl_slist_append(NULL, "Accept: text/event-stream");
  CURLM *m = curl_multi_init();
  sse_client *c = calloc((size_t)clients, sizeof *c);
  /* the session waits for "go" until every stream is open: the lag is of
   * live delivery, never of a replayed backlog */
  char endpoint[512], go[512];
  snprintf(endpoint, sizeof endpoint, "%s/v1/workflows", url);
  snprintf(go, sizeof go, "%s/v1/workflows/ticks/signals/go", url);
  if (post(endpoint, body) != 201) {
    fprintf(stderr, "api_bench: cannot start the ticks workflow\n");
    return 1;
  }
  for (int i = 0; i < clients; i++) curl_multi_add_handle(m, c[i].h = stream_handle(stream, &c[i], hdr));
  int running = 1;
  for (double until = mono_ms() + 1500; mono_ms() < until;) {
    curl_multi_perform(m, &running);
    curl_multi_poll(m, NULL, 0, 50, NULL);
  }
  double t0 = mono_ms();
  if (post(go, "null") != 200) {
    fprintf(stderr, "api_bench: cannot signal the ticks workflow\n");
    return 1;
  }
  while (running) {
    curl_multi_perform(m, &running);
    if (running) curl_multi_poll(m, NULL, 0, 100, NULL);
  }
  double secs = (mono_ms() - t0) / 1000.0;
  long total = 0, short_clients = 0;
  for (int i = 0; i < clients; i++) {
    total += c[i].events;
    if (c[i].events != n || !c[i].ended) short_clients++;
  }
  printf("sse_events_delivered %ld\n", total);
  printf("sse_events_per_s %.0f\n", (double)total / secs);
  printf("sse_lag_p50_ms %.2f\n", pct(g_lag, g_nlag, 0.50));
  printf("sse_lag_p99_ms %.2f\n", pct(g_lag, g_nlag, 0.99));
  printf("sse_clients_short %ld\n", short_clients);
  return short_clients ? 1 : 0;
}

static long rss_kib(const char *pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%s/status", pid);
  FILE *f = fopen(path, "r");
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) kib = atol(line + 6);
  if (f) fclose(f);
  return kib;
}

static int run_idle(const char *url, int conns, const char *pid) {
  char body[256], stream[512], endpoint[512];
  snprintf(endpoint, sizeof endpoint, "%s/v1/workflows", url);
  snprintf(body, sizeof body, "{\"script\":\"api_idle.lua\",\"id\":\"idle\",\"input\":{}}");
  if (post(endpoint, body) != 201) {
    fprintf(stderr, "api_bench: cannot start the idle workflow\n");
    return 1;
  }
  long before = rss_kib(pid);
  snprintf(stream, sizeof stream, "%s/v1/workflows/idle/events", url);
  struct curl_slist *hdr = curl_slist_append(NULL, "Accept: text/event-stream");
  CURLM *m = curl_multi_init();
  curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L);
  sse_client *c = calloc((size_t)conns, sizeof *c);
  for (int i = 0; i < conns; i++) {
    c[i].h = stream_handle(stream, &c[i], hdr);
    curl_easy_setopt(c[i].h, CURLOPT_FORBID_REUSE, 1L);
    curl_multi_add_handle(m, c[i].h);
  }
  double until = mono_ms() + 3000; /* every stream opened and idle */
  int running;
  while (mono_ms() < until) {
    curl_multi_perform(m, &running);
    curl_multi_poll(m, NULL, 0, 100, NULL);
  }
  long after = rss_kib(pid);
  printf("idle_streams_open %d\n", running);
  printf("idle_rss_before_kib %ld\n", before);
  printf("idle_rss_after_kib %ld\n", after);
  return 0;
}

int main(int argc, char **argv) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  if (argc >= 5 && strcmp(argv[1], "inproc") == 0) return run_inproc(argv[2], atoi(argv[3]), atoi(argv[4]));
  if (argc >= 5 && strcmp(argv[1], "starts") == 0)
    return run_starts(argv[2], atoi(argv[3]), atoi(argv[4]), argc > 5 ? argv[5] : NULL, 0);
  if (argc >= 5 && strcmp(argv[1], "hooks") == 0) return run_starts(argv[2], atoi(argv[3]), atoi(argv[4]), NULL, 1);
  if (argc >= 5 && strcmp(argv[1], "sse") == 0) return run_sse(argv[2], atoi(argv[3]), atoi(argv[4]));
  if (argc >= 5 && strcmp(argv[1], "idle") == 0) return run_idle(argv[2], atoi(argv[3]), argv[4]);
  fprintf(stderr, "usage: api_bench inproc DB N LANES | starts URL N LANES [TOKEN] | sse URL CLIENTS N | "
                  "idle URL CONNECTIONS PID | hooks URL N LANES\n");
  return 2;
}
