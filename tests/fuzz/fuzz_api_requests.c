/* fuzz_api_requests: the HTTP API on one request at a time, end to end: the
 * bytes go over a loopback socket to the real server (engine/server/httpd.c, then
 * engine/server/api.c's router, authentication, handlers and event streams) of a
 * real engine on a SQLite store, and the answer is read back and checked.
 * No seam: what is fuzzed is what `engine serve --listen` runs. The harness
 * drives the engine's loop itself, committing before each wait as the
 * worker's prepare hook does (engine_run's recovery and start-up hooks, which
 * sweep sandboxes, are left out).
 *
 * Two servers, each on a store in a scratch directory (in /dev/shm when it
 * can) built once from the workflows below, and put back the way it was
 * before an input when the previous one changed it (PRAGMA data_version of a
 * connection of ours), so every input meets the same store:
 *   tokens  tokens admin, read, write (start, signal, cancel), approve, and a
 *           revoked one; workflows w-wait (waits for "go"), w-cancel
 *           (cancelled), w-done (completed, with domain events), w-fail
 *           (failed), w-appr (waits on approval r1) and w-appr2 (on r2, with
 *           a deadline years away);
 *   open    the same workflows and no token: local programs are served
 *           anonymously (Host and Origin decide).
 *
 * The input (lines end with \n; a \r before it is dropped):
 *   [open ]METHOD TARGET       TARGET: the path and ?query as sent, or a URL
 *                              (http://HOST/path: the absolute form)
 *   Name: value                headers, up to a blank line
 *   @NOHOST                    (a line) no Host header is added
 *   ...
 *   (blank line)
 *   BODY                       the rest, bytes as they are
 * In every part @ADMIN, @READ, @WRITE, @APPROVE and @REVOKED become those
 * tokens, @HOST the server's host:port, @WFDIR the workflows directory, @BIG
 * 20,000 bytes of 'b' (a body past the limit within an input's reach). The
 * harness keeps the request well framed so that it reaches the engine: the
 * method keeps only token characters; control bytes and spaces of the target
 * are %-escaped; header names keep token characters, values lose CR, LF and
 * NUL; Connection, Keep-Alive, Expect, Upgrade and TE are dropped, and
 * Transfer-Encoding unless a Content-Length is there too (then the request is
 * ambiguous) or it is "chunked" (then one such header stays, the others go,
 * and the body is sent in chunks of 4096 bytes). Host is added when missing (unless @NOHOST), Content-Length when
 * the body is not empty and not chunked, and the body sent is cut or padded
 * with spaces to a Content-Length of digits within the body limit (none is
 * sent past it: the answer is 413). An absolute-form target without a path
 * gets "/" after its authority.
 *
 * Findings (the process aborts with the reason, so libFuzzer keeps the input):
 *   - no answer within ANSWER_MS (event streams: the backlog, then quiet);
 *   - a connection closed without an answer, for a request without a body,
 *     with headers within twice the limit and fewer query parameters than
 *     the library's memory holds (MAX_QUERY_PARTS);
 *   - HTTP/1.1 without Host answered other than 400 (or 413, 414, 431); a
 *     chunked body over the limit other than 413 (or 400, 414, 431);
 *   - a status engine/server/openapi.json does not give for the route (on any
 *     route 413, 414 and 431 too; where no route takes the request 404, 405,
 *     or 400 for a path segment that does not decode), any 503 (the store is
 *     healthy, the connections few), a 2xx on a path no route has;
 *   - a JSON answer that is not valid JSON (json_validate), an error whose
 *     body is not {"error":{"status":N,"message":"..."}} with N the status,
 *     405 without Allow, 401 of the token server without WWW-Authenticate;
 *     text only from GET /metrics, the web page's files (HTML, CSS,
 *     JavaScript, images; a 304 without a body) only from GET / and GET
 *     /web/NAME, bytes only from an artifact's download, an event stream only from the events
 *     routes, its data lines JSON and its ids above the resume point; an
 *     HTML answer of the HTTP library other than 400, 413, 414 and 431;
 *   - a 2xx on a route that needs a scope without a live token granting it
 *     in any Authorization header (token server), or with an Authorization
 *     header, an Origin not the server's own, or a Host (an absolute-form
 *     target's authority) that is clearly not a loopback name (open server);
 *   - events pages: seqs (feed ids) above Last-Event-ID or ?after=, rising,
 *     at most ?limit= of them, last_seq / last_id right; lists within limit;
 *   - a commit that fails while the request is served, a transaction still
 *     open (or a failed batch) after the answer and the commit after it;
 *   - a refused request (not 2xx; a webhook delivery, recorded, excepted) or a
 *     read that changed the store; a write
 *     answered 2xx (start 201, signal, cancel, approve) that is not durable
 *     by the time its answer arrives. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <lualib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "engine.h"
#include "json.h"
#include "store.h"
#include "tokens.h"
#include "util.h"
#include "fuzz_args.h"

#define MAX_BODY 16384  /* ENGINE_HTTP_MAX_BODY_BYTES here: 413 within an input's reach */
#define MAX_HEADER 4096 /* ENGINE_HTTP_MAX_HEADER_BYTES: 431 likewise */
#define MAX_HEADERS 48
/* The HTTP library keeps the request line and each query parameter (some 64
 * bytes apiece) in the connection's memory (httpd.c: twice the header limit
 * and 4 KiB), and closes the connection without a word when they do not
 * fit: with a line of twice the limit, past 64 or so here. Past this many a
 * closed connection is what is documented. */
#define MAX_QUERY_PARTS ((2 * MAX_HEADER + 4096) / 192)
#define ANSWER_MS 5000 /* a request not answered by then is a finding */
#define QUIET_MS 15    /* an event stream that sent nothing this long has sent its backlog */
#define SETUP_MS 20000 /* the fixture's workflows reach their states within this */

extern const unsigned char api_openapi_json[];
extern const unsigned long api_openapi_json_len;

static lua_State *L;
static char base[4096], wfdir[4200];
static int verbose; /* FUZZ_API_VERBOSE=1: a line per request (writing seeds) */

static void finding(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_api_requests: %s%s%.600s\n", what, detail ? ": " : "", detail ? detail : "");
  abort();
}

static void setup_failed(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_api_requests: setup: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(1);
}

/* ------------------------------------------------------------ tokens --- */

enum { T_ADMIN, T_READ, T_WRITE, T_APPROVE, T_REVOKED, NTOKENS };
static const char *const TOKEN_NAMES[NTOKENS] = {"admin", "reader", "writer", "approver", "old"};
static const char *const TOKEN_HOLES[NTOKENS] = {"@ADMIN", "@READ", "@WRITE", "@APPROVE", "@REVOKED"};
static const unsigned TOKEN_SCOPES[NTOKENS] = {SCOPE_ADMIN, SCOPE_READ, SCOPE_START | SCOPE_SIGNAL | SCOPE_CANCEL,
                                               SCOPE_APPROVE, SCOPE_ADMIN};
static char secrets[NTOKENS][TOKEN_SECRET_MAX];

/* ----------------------------------------------------------- servers --- */

typedef struct server {
  const char *name;
  int tokens; /* the store holds tokens */
  char db[4300];
  char *pristine; /* the store's file as the fixture left it */
  size_t pristine_len;
  engine *e;
  api *a;
  char host[64]; /* "127.0.0.1:PORT" */
  int port;
  sqlite3 *watch; /* ours: its data_version moves when the engine commits */
  int64_t version;
  int dirty; /* the last input changed the store */
} server;

static server servers[2] = {{.name = "tokens", .tokens = 1}, {.name = "open", .tokens = 0}};

static int64_t data_version(server *sv) {
  sqlite3_stmt *st;
  int64_t v = -1;
  if (sqlite3_prepare_v2(sv->watch, "PRAGMA data_version", -1, &st, NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  if (v < 0) finding("cannot read PRAGMA data_version", sqlite3_errmsg(sv->watch));
  return v;
}

static void stop_server(server *sv) {
  if (!sv->e) return;
  if (sv->watch) sqlite3_close(sv->watch);
  sv->watch = NULL;
  api_stop(sv->a);
  engine_free(sv->e);
  api_free(sv->a);
  sv->e = NULL;
  sv->a = NULL;
}

static void remove_db(const char *db) {
  char p[4400];
  unlink(db);
  snprintf(p, sizeof p, "%s-wal", db);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", db);
  unlink(p);
}

static void write_file(const char *path, const char *data, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || write(fd, data, n) != (ssize_t)n) setup_failed("cannot write", path);
  close(fd);
}

/* The server again on its pristine store: a new engine and API, listening. */
static void restart_server(server *sv) {
  stop_server(sv);
  remove_db(sv->db);
  write_file(sv->db, sv->pristine, sv->pristine_len);
  char err[1024];
  sv->a = api_new();
  engine_config cfg = {.db_path = sv->db};
  api_engine_config(sv->a, &cfg);
  if (engine_open(&sv->e, &cfg, err, sizeof err) != 0) finding("engine_open", err);
  api_options o = {"127.0.0.1:0", wfdir, 0};
  if (api_listen(sv->a, sv->e, &o, err, sizeof err) != 0) finding("api_listen", err);
  const char *url = api_url(sv->a), *colon = strrchr(url, ':');
  snprintf(sv->host, sizeof sv->host, "%s", url + 7);
  sv->port = colon ? atoi(colon + 1) : 0;
  if (sqlite3_open_v2(sv->db, &sv->watch, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
    finding("cannot open the store to watch it", sv->db);
  sv->version = data_version(sv);
  sv->dirty = 0;
}

/* ----------------------------------------------------------- fixture --- */

static const char WAITER[] =
    "-- waits for the signal \"go\" and returns what it carried, and who started it\n"
    "local wf = require \"workflow\"\n"
    "return function(input)\n"
    "  local got = wf.wait_signal(\"go\")\n"
    "  wf.emit(\"waiter.got\", { got = got })\n"
    "  return { got = got, identity = input.identity }\n"
    "end\n";
static const char TINY[] = "return function(input) return { echo = input } end\n";
static const char APPROVALS[] =
    "-- asks for the approvals in input.requests one after another, as agent_session.lua does\n"
    "local wf = require \"workflow\"\n"
    "return function(input)\n"
    "  local out = {}\n"
    "  for _, r in ipairs(input.requests) do\n"
    "    wf.emit(\"approval.requested\", { request_id = r.id, tool = r.tool, args = r.args, reason = r.reason })\n"
    "    local answer, why = wf.wait_signal(\"approval:\" .. r.id, { timeout = r.timeout })\n"
    "    local approved = type(answer) == \"table\" and answer.approved == true\n"
    "    wf.emit(\"approval.decided\", { request_id = r.id, approved = approved })\n"
    "    out[#out + 1] = { id = r.id, approved = approved, why = why }\n"
    "  end\n"
    "  return out\n"
    "end\n";
static const char EVENTS[] =
    "-- domain events of the shapes the views render, then a result\n"
    "local wf = require \"workflow\"\n"
    "return function(input)\n"
    "  wf.emit(\"tick\", { i = 1 })\n"
    "  wf.emit(\"note\", { text = \"h\\195\\169llo \\226\\128\\174 <b>\\\"q\\\"</b>\\n\",\n"
    "    list = { 1, 2.5, true, false } })\n"
    "  wf.emit(\"sandbox.created\", { driver = \"native\", id = \"sb-1\" })\n"
    "  wf.emit(\"artifact.saved\", { path = \"out/report.md\", bytes = 12 })\n"
    "  for i = 2, 6 do wf.emit(\"tick\", { i = i }) end\n"
    "  return { echo = input, n = 9 }\n"
    "end\n";
static const char FAILS[] = "return function() error(\"boom\") end\n";
static const char EVIL[] = "return function() return 'escaped' end\n";

static void mkdir_or_die(const char *path) {
  if (mkdir(path, 0755) != 0) setup_failed("cannot create", path);
}

/* The workflows directory, with the traps tests/integration/api_suite.py sets
 * around it (symlinks out, a directory named .lua, a file that is no script). */
static void make_workflows_dir(void) {
  char p[4400], q[4400];
  snprintf(wfdir, sizeof wfdir, "%s/wf", base);
  mkdir_or_die(wfdir);
  snprintf(p, sizeof p, "%s/sub", wfdir);
  mkdir_or_die(p);
  snprintf(p, sizeof p, "%s/dir.lua", wfdir);
  mkdir_or_die(p);
  snprintf(p, sizeof p, "%s/outside", base);
  mkdir_or_die(p);
  const struct {
    const char *name, *text;
  } files[] = {{"wf/waiter.lua", WAITER},          {"wf/tiny.lua", TINY},     {"wf/sub/nested.lua", TINY},
               {"wf/approvals.lua", APPROVALS},    {"wf/events.lua", EVENTS}, {"wf/fails.lua", FAILS},
               {"wf/notes.txt", "not a script\n"}, {"outside/evil.lua", EVIL}};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    snprintf(p, sizeof p, "%s/%s", base, files[i].name);
    write_file(p, files[i].text, strlen(files[i].text));
  }
  const struct {
    const char *to, *name;
  } links[] = {{"../outside/evil.lua", "escape.lua"},
               {"../outside", "linkdir"},
               {"waiter.lua", "alias.lua"},
               {"../nowhere.lua", "dangling.lua"}};
  for (size_t i = 0; i < sizeof links / sizeof *links; i++) {
    snprintf(q, sizeof q, "%s/%s", wfdir, links[i].name);
    if (symlink(links[i].to, q) != 0) setup_failed("cannot create the symlink", q);
  }
}

static const char *status_of(engine *e, const char *id, char *out, size_t n) {
  wf_row w;
  out[0] = 0;
  if (store_wf_get(engine_store(e), id, &w) == 1) {
    snprintf(out, n, "%s", w.status);
    wf_row_free(&w);
  }
  return out;
}

/* Runs the loop (committing as the worker does) until workflow id has status. */
static void settle_status(engine *e, const char *id, const char *status) {
  char now[32];
  int64_t until = util_mono_ms() + SETUP_MS;
  while (strcmp(status_of(e, id, now, sizeof now), status) != 0) {
    if (util_mono_ms() > until) {
      char msg[200];
      snprintf(msg, sizeof msg, "%s is '%s', not %s", id, now, status);
      setup_failed("a fixture workflow did not get there", msg);
    }
    engine_commit(e);
    uv_run(engine_loop(e), UV_RUN_NOWAIT);
    usleep(1000);
  }
}

static void submit(engine *e, const char *id, const char *script, const char *input) {
  char path[4400], err[1024];
  snprintf(path, sizeof path, "%s/%s", wfdir, script);
  if (engine_submit(e, id, path, input, NULL, err, sizeof err) != 0) setup_failed("engine_submit", err);
}

/* The store of sv as every input will find it. */
static void make_store(server *sv) {
  char err[1024];
  snprintf(sv->db, sizeof sv->db, "%s/%s.db", base, sv->name);
  if (sv->tokens) {
    store *st;
    if (store_open(sv->db, 0, &st, err, sizeof err) != STORE_OK) setup_failed("store_open", err);
    for (int i = 0; i < NTOKENS; i++) {
      char fresh[TOKEN_SECRET_MAX];
      if (token_create(st, TOKEN_NAMES[i], TOKEN_SCOPES[i], fresh, err, sizeof err) != 0)
        setup_failed("token_create", err);
      /* the same secrets in both stores' inputs: the first store's */
      if (sv == &servers[0]) memcpy(secrets[i], fresh, sizeof fresh);
    }
    if (token_revoke(st, TOKEN_NAMES[T_REVOKED], err, sizeof err) != 1) setup_failed("token_revoke", err);
    store_close(st);
  }
  engine *e;
  engine_config cfg = {.db_path = sv->db};
  if (engine_open(&e, &cfg, err, sizeof err) != 0) setup_failed("engine_open", err);
  submit(e, "w-wait", "waiter.lua", "{}");
  submit(e, "w-cancel", "waiter.lua", "{}");
  submit(e, "w-done", "events.lua", "{\"n\":1}");
  submit(e, "w-fail", "fails.lua", "{}");
  submit(e, "w-appr", "approvals.lua",
         "{\"requests\":[{\"id\":\"r1\",\"tool\":\"shell\",\"args\":{\"command\":\"ls\"}}]}");
  submit(e, "w-appr2", "approvals.lua",
         "{\"requests\":[{\"id\":\"r2\",\"tool\":\"http_fetch\",\"reason\":\"a \\\"quoted\\\" reason\","
         "\"timeout\":315360000}]}");
  settle_status(e, "w-done", "completed");
  settle_status(e, "w-fail", "failed");
  settle_status(e, "w-wait", "waiting");
  settle_status(e, "w-appr", "waiting");
  settle_status(e, "w-appr2", "waiting");
  settle_status(e, "w-cancel", "waiting");
  if (engine_cancel_local(e, "w-cancel", "local:fuzz", err, sizeof err) != 0) setup_failed("cancel", err);
  settle_status(e, "w-cancel", "cancelled");
  engine_commit(e);
  engine_free(e);
  char wal[4400];
  snprintf(wal, sizeof wal, "%s-wal", sv->db);
  struct stat stt;
  if (stat(wal, &stt) == 0 && stt.st_size > 0) setup_failed("the store's WAL was not checkpointed at close", wal);
  sv->pristine = util_read_file(sv->db, &sv->pristine_len);
  if (!sv->pristine) setup_failed("cannot read", sv->db);
}

/* The scratch directory goes with this process however it ends: a finding
 * aborts, and libFuzzer leaves with _exit after a crash, past atexit. A child
 * waits for the end of a pipe only we hold, then removes the directory. */
static void remove_scratch_when_gone(void) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) setup_failed("pipe2", strerror(errno));
  pid_t pid = fork();
  if (pid < 0) setup_failed("fork", strerror(errno));
  if (pid == 0) {
    signal(SIGINT, SIG_IGN); /* ^C stops the fuzzer; this one still cleans up */
    close(p[1]);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC); /* not holding the fuzzer's output open (ctest waits for it) */
    if (null >= 0) dup2(null, 1), dup2(null, 2);
    char c;
    while (read(p[0], &c, 1) < 0 && errno == EINTR) {
    }
    execlp("rm", "rm", "-rf", "--", base, (char *)NULL);
    _exit(127);
  }
  close(p[0]); /* p[1] stays open until we are gone */
}

/* Stops the servers and removes the scratch directory (its files are ours alone). */
static void cleanup(void) {
  if (!base[0]) return;
  for (int i = 0; i < 2; i++) {
    stop_server(&servers[i]);
    if (servers[i].db[0]) remove_db(servers[i].db);
  }
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", base); /* mkdtemp's name: no quote in it */
  if (system(cmd) != 0) fprintf(stderr, "fuzz_api_requests: could not remove %s\n", base);
  base[0] = 0;
}

/* ---------------------------------------------------- the documented --- */

#define MAX_OPS 64

typedef struct op {
  char method[8];
  char pattern[128];
  unsigned scope; /* 0: public */
  unsigned char status[600];
} op;

static op ops[MAX_OPS];
static size_t nops;

/* engine/server/openapi.json as built into the server: each operation, its
 * statuses and the scope its bearer requirement names. */
static void load_openapi(void) {
  char err[512];
  if (json_decode_safe(L, (const char *)api_openapi_json, api_openapi_json_len, err, sizeof err) != 0)
    setup_failed("openapi.json", err);
  static const char *const METHODS[] = {"get", "put", "post", "delete", "options", "head", "patch", "trace"};
  lua_getfield(L, -1, "paths");
  lua_pushnil(L);
  while (lua_next(L, -2)) { /* stack: doc paths pattern item */
    for (size_t m = 0; m < sizeof METHODS / sizeof *METHODS; m++) {
      if (lua_getfield(L, -1, METHODS[m]) != LUA_TTABLE) {
        lua_pop(L, 1);
        continue;
      }
      if (nops == MAX_OPS) setup_failed("more operations than MAX_OPS", NULL);
      op *o = &ops[nops++];
      memset(o, 0, sizeof *o);
      for (size_t k = 0; METHODS[m][k]; k++) o->method[k] = (char)toupper((unsigned char)METHODS[m][k]);
      snprintf(o->pattern, sizeof o->pattern, "%s", lua_tostring(L, -3));
      lua_getfield(L, -1, "responses");
      lua_pushnil(L);
      while (lua_next(L, -2)) {
        int code = atoi(lua_tostring(L, -2));
        if (code >= 100 && code < 600) o->status[code] = 1;
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
      lua_getfield(L, -1, "security");
      if (lua_rawgeti(L, -1, 1) == LUA_TTABLE) { /* [{"bearer": ["read"]}] */
        lua_getfield(L, -1, "bearer");
        lua_rawgeti(L, -1, 1);
        if (!lua_isstring(L, -1) || token_scopes_parse(lua_tostring(L, -1), &o->scope, err, sizeof err) != 0)
          setup_failed("an operation's bearer requirement names no scope", o->pattern);
        lua_pop(L, 2);
      }
      lua_pop(L, 3);
    }
    lua_pop(L, 1);
  }
  lua_settop(L, 0);
  if (nops == 0) setup_failed("openapi.json has no operation", NULL);
}

/* Whether path (without the query) fits pattern: the same segments, {x} any
 * non-empty one. */
static int fits(const char *pattern, const char *path, size_t pathlen) {
  const char *p = pattern, *s = path, *end = path + pathlen;
  while (*p && s < end) {
    if (*p != '/' || *s != '/') return 0;
    p++;
    s++;
    const char *pe = strchr(p, '/'), *se = memchr(s, '/', (size_t)(end - s));
    size_t pl = pe ? (size_t)(pe - p) : strlen(p), sl = se ? (size_t)(se - s) : (size_t)(end - s);
    if (*p == '{') {
      if (sl == 0) return 0;
    } else if (pl != sl || memcmp(p, s, pl) != 0) {
      return 0;
    }
    p += pl;
    s += sl;
  }
  return !*p && s == end;
}

/* ----------------------------------------------------------- request --- */

typedef struct header {
  char name[64];
  char *value;
} header;

typedef struct request {
  server *sv;
  char method[24];
  ubuf target;    /* as sent */
  size_t path_at; /* where the path starts in target (after an absolute form's authority) */
  size_t pathlen; /* the path: from path_at up to '?' */
  char authority[256]; /* an absolute-form target's, else empty */
  int no_host, chunked, chunked_over;
  header h[MAX_HEADERS];
  int nh;
  ubuf body; /* as sent */
  int has_length, has_host, length_over, header_bytes;
  ubuf wire;
} request;

static void request_free(request *q) {
  ubuf_free(&q->target);
  ubuf_free(&q->body);
  ubuf_free(&q->wire);
  for (int i = 0; i < q->nh; i++) free(q->h[i].value);
}

/* The path the server routes by (pathlen bytes), and its query after it. */
static const char *qpath(const request *q) {
  return q->target.p + q->path_at;
}

/* The first value of header name, or NULL. */
static const char *hdr(const request *q, const char *name) {
  for (int i = 0; i < q->nh; i++)
    if (strcasecmp(q->h[i].name, name) == 0) return q->h[i].value;
  return NULL;
}

/* s[0..n) with the placeholders filled in, into out. */
static void expand(ubuf *out, const char *s, size_t n, const server *sv) {
  for (size_t i = 0; i < n;) {
    int done = 0;
    if (s[i] == '@') {
      for (int k = 0; k < NTOKENS && !done; k++) {
        size_t hl = strlen(TOKEN_HOLES[k]);
        if (n - i >= hl && memcmp(s + i, TOKEN_HOLES[k], hl) == 0) {
          ubuf_add(out, secrets[k], strlen(secrets[k]));
          i += hl;
          done = 1;
        }
      }
      if (!done && n - i >= 5 && memcmp(s + i, "@HOST", 5) == 0) {
        ubuf_add(out, sv->host, strlen(sv->host));
        i += 5;
        done = 1;
      }
      if (!done && n - i >= 6 && memcmp(s + i, "@WFDIR", 6) == 0) {
        ubuf_add(out, wfdir, strlen(wfdir));
        i += 6;
        done = 1;
      }
      if (!done && n - i >= 4 && memcmp(s + i, "@BIG", 4) == 0) {
        for (int k = 0; k < 20000; k += 100)
          ubuf_add(out, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
                   100);
        i += 4;
        done = 1;
      }
    }
    if (!done) ubuf_add(out, s + i++, 1);
  }
}

static int tchar(int c) {
  return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int all_digits(const char *s, size_t max) {
  size_t n = strlen(s);
  return n > 0 && n <= max && strspn(s, "0123456789") == n;
}

static void wire_add(request *q, const char *s) {
  ubuf_add(&q->wire, s, strlen(s));
}

/* One line of the input: [s, e) without its \n (and \r). */
static const char *next_line(const char **cur, const char *end, size_t *len) {
  if (*cur >= end) return NULL;
  const char *s = *cur, *nl = memchr(s, '\n', (size_t)(end - s));
  const char *e = nl ? nl : end;
  *cur = nl ? nl + 1 : end;
  if (e > s && e[-1] == '\r') e--;
  *len = (size_t)(e - s);
  return s;
}

/* The server an input is for: "open " before its request line says which. */
static server *server_of(const char *data, size_t size) {
  return size >= 5 && memcmp(data, "open ", 5) == 0 ? &servers[1] : &servers[0];
}

/* The input as a request to sv (running: its address fills @HOST). */
static void parse_request(const char *data, size_t size, server *sv, request *q) {
  memset(q, 0, sizeof *q);
  const char *cur = data, *end = data + size, *line;
  size_t n = 0;
  q->sv = sv;
  line = next_line(&cur, end, &n);
  if (!line) line = "";
  if (sv == &servers[1]) {
    line += 5;
    n -= 5;
  }
  const char *sp = memchr(line, ' ', n);
  size_t ml = sp ? (size_t)(sp - line) : n, k = 0;
  for (size_t i = 0; i < ml && k + 1 < sizeof q->method; i++)
    if (tchar((unsigned char)line[i])) q->method[k++] = line[i];
  q->method[k] = 0;
  if (!k) snprintf(q->method, sizeof q->method, "GET");
  ubuf raw = {0};
  if (sp) expand(&raw, sp + 1, n - ml - 1, q->sv);
  static const char HEX[] = "0123456789ABCDEF";
  for (size_t i = 0; i < raw.n; i++) {
    unsigned char c = (unsigned char)raw.p[i];
    if (c <= 0x20 || c == 0x7f) {
      char esc[3] = {'%', HEX[c >> 4], HEX[c & 15]};
      ubuf_add(&q->target, esc, 3);
    } else {
      ubuf_add(&q->target, raw.p + i, 1);
    }
  }
  ubuf_free(&raw);
  size_t scheme = q->target.n >= 7 && strncasecmp(q->target.p, "http://", 7) == 0     ? 7
                  : q->target.n >= 8 && strncasecmp(q->target.p, "https://", 8) == 0 ? 8
                                                                                      : 0;
  if (scheme) { /* the absolute form: the path starts after the authority ("/" when there is none) */
    size_t a = scheme;
    while (a < q->target.n && q->target.p[a] != '/' && q->target.p[a] != '?') a++;
    snprintf(q->authority, sizeof q->authority, "%.*s", (int)(a - scheme), q->target.p + scheme);
    if (a == q->target.n || q->target.p[a] != '/') {
      ubuf t = {0};
      ubuf_add(&t, q->target.p, a);
      ubuf_add(&t, "/", 1);
      ubuf_add(&t, q->target.p + a, q->target.n - a);
      ubuf_free(&q->target);
      q->target = t;
    }
    q->path_at = a;
  } else if (q->target.n == 0 || q->target.p[0] != '/') { /* else a path, always: an origin-form target */
    ubuf t = {0};
    ubuf_add(&t, "/", 1);
    if (q->target.n) ubuf_add(&t, q->target.p, q->target.n);
    ubuf_free(&q->target);
    q->target = t;
  }
  ubuf_add(&q->target, "", 1);
  q->target.n--;
  const char *qm = memchr(qpath(q), '?', q->target.n - q->path_at);
  q->pathlen = qm ? (size_t)(qm - qpath(q)) : q->target.n - q->path_at;

  int has_te = 0;
  while ((line = next_line(&cur, end, &n)) && n > 0) {
    if (n == 7 && memcmp(line, "@NOHOST", 7) == 0) {
      q->no_host = 1;
      continue;
    }
    const char *colon = memchr(line, ':', n);
    if (!colon || q->nh == MAX_HEADERS) continue;
    header *h = &q->h[q->nh];
    size_t hk = 0;
    for (const char *c = line; c < colon && hk + 1 < sizeof h->name; c++)
      if (tchar((unsigned char)*c)) h->name[hk++] = *c;
    h->name[hk] = 0;
    static const char *const DROPPED[] = {"Connection", "Keep-Alive", "Expect", "Upgrade", "TE", NULL};
    int drop = hk == 0;
    for (size_t d = 0; DROPPED[d]; d++) drop |= strcasecmp(h->name, DROPPED[d]) == 0;
    if (drop) continue;
    ubuf v = {0};
    expand(&v, colon + 1, (size_t)(line + n - colon - 1), q->sv);
    ubuf clean = {0};
    for (size_t i = 0; i < v.n; i++)
      if (v.p[i] != '\r' && v.p[i] != '\n' && v.p[i] != 0) ubuf_add(&clean, v.p + i, 1);
    ubuf_free(&v);
    /* trimmed as the server's library trims it, so that we see what it sees */
    size_t a = 0, b = clean.n;
    while (a < b && (clean.p[a] == ' ' || clean.p[a] == '\t')) a++;
    while (b > a && (clean.p[b - 1] == ' ' || clean.p[b - 1] == '\t')) b--;
    h->value = util_xmalloc(b - a + 1);
    memcpy(h->value, clean.p ? clean.p + a : "", b - a);
    h->value[b - a] = 0;
    ubuf_free(&clean);
    if (strcasecmp(h->name, "Transfer-Encoding") == 0) {
      has_te = 1;
      q->chunked |= strcasecmp(h->value, "chunked") == 0;
    }
    q->nh++;
  }
  if (cur < end) expand(&q->body, cur, (size_t)(end - cur), q->sv);

  const char *cl = hdr(q, "Content-Length");
  q->has_length = cl != NULL;
  q->has_host = hdr(q, "Host") != NULL;
  if (cl) q->chunked = 0;
  if (has_te && !cl) { /* framing the body does not have: the request would never end */
    int w = 0, kept = 0;
    for (int i = 0; i < q->nh; i++) {
      /* one "Transfer-Encoding: chunked" stays when the body is chunked; any
       * other (another coding, a second one) is dropped */
      if (strcasecmp(q->h[i].name, "Transfer-Encoding") == 0 &&
          (!q->chunked || kept || strcasecmp(q->h[i].value, "chunked") != 0)) {
        free(q->h[i].value);
        continue;
      }
      if (strcasecmp(q->h[i].name, "Transfer-Encoding") == 0) kept = 1;
      q->h[w++] = q->h[i];
    }
    q->nh = w;
  }
  if (cl && all_digits(cl, 12)) {
    size_t want = (size_t)strtoull(cl, NULL, 10);
    if (want > MAX_BODY) {
      q->length_over = 1;
      q->body.n = 0; /* answered 413 from the header: a body would only be reset */
    } else {
      while (q->body.n < want) ubuf_add(&q->body, " ", 1);
      q->body.n = want;
    }
  }

  /* on the wire */
  wire_add(q, q->method);
  wire_add(q, " ");
  ubuf_add(&q->wire, q->target.p, q->target.n);
  wire_add(q, " HTTP/1.1\r\n");
  if (!q->has_host && !q->no_host) {
    wire_add(q, "Host: ");
    wire_add(q, q->sv->host);
    wire_add(q, "\r\n");
  }
  for (int i = 0; i < q->nh; i++) {
    wire_add(q, q->h[i].name);
    wire_add(q, ": ");
    wire_add(q, q->h[i].value);
    wire_add(q, "\r\n");
  }
  q->chunked_over = q->chunked && q->body.n > MAX_BODY && strncmp(qpath(q), "/hooks/", 7) != 0; /* hooks: 25 MiB */
  if (!q->has_length && q->body.n && !q->chunked) {
    char len[48];
    snprintf(len, sizeof len, "Content-Length: %zu\r\n", q->body.n);
    wire_add(q, len);
  }
  wire_add(q, "Connection: close\r\n\r\n");
  q->header_bytes = (int)q->wire.n;
  for (size_t i = 0; q->chunked && i < q->body.n; i += 4096) {
    size_t k = q->body.n - i < 4096 ? q->body.n - i : 4096;
    char size[24];
    snprintf(size, sizeof size, "%zx\r\n", k);
    wire_add(q, size);
    ubuf_add(&q->wire, q->body.p + i, k);
    wire_add(q, "\r\n");
  }
  if (q->chunked) wire_add(q, "0\r\n\r\n");
  else if (q->body.n) ubuf_add(&q->wire, q->body.p, q->body.n);
}

/* ------------------------------------------------------------ answer --- */

typedef struct answer {
  ubuf raw;
  int status;
  int complete;  /* the whole head arrived */
  int streaming; /* text/event-stream */
  int chunked;
  long long length; /* Content-Length, -1 when none */
  char ctype[128];
  int allow, www_auth;
  size_t body_at;
  ubuf body; /* de-chunked */
} answer;

/* The head of the answer, once it is all there. */
static void parse_head(answer *an) {
  if (an->complete) return;
  char *p = an->raw.p, *end = p ? memmem(p, an->raw.n, "\r\n\r\n", 4) : NULL;
  if (!end) return;
  an->complete = 1;
  an->body_at = (size_t)(end - p) + 4;
  an->length = -1;
  if (an->raw.n < 12 || memcmp(p, "HTTP/1.", 7) != 0) finding("the answer does not start with a status line", NULL);
  an->status = atoi(p + 9);
  for (char *line = memchr(p, '\n', (size_t)(end - p)); line && line < end;
       line = memchr(line + 1, '\n', (size_t)(end - line))) {
    char *s = line + 1, *eol = memchr(s, '\r', (size_t)(end + 2 - s));
    if (!eol) break;
    char *colon = memchr(s, ':', (size_t)(eol - s));
    if (!colon) continue;
    size_t nl = (size_t)(colon - s);
    char *v = colon + 1;
    while (v < eol && *v == ' ') v++;
    size_t vl = (size_t)(eol - v);
    if (nl == 12 && strncasecmp(s, "Content-Type", 12) == 0)
      snprintf(an->ctype, sizeof an->ctype, "%.*s", (int)vl, v);
    else if (nl == 14 && strncasecmp(s, "Content-Length", 14) == 0)
      an->length = atoll(v);
    else if (nl == 17 && strncasecmp(s, "Transfer-Encoding", 17) == 0)
      an->chunked = vl >= 7 && strncasecmp(v, "chunked", 7) == 0;
    else if (nl == 5 && strncasecmp(s, "Allow", 5) == 0)
      an->allow = 1;
    else if (nl == 16 && strncasecmp(s, "WWW-Authenticate", 16) == 0)
      an->www_auth = 1;
  }
  an->streaming = strncmp(an->ctype, "text/event-stream", 17) == 0;
}

/* The body as the client reads it: de-chunked (as far as the chunks came). */
static void take_body(answer *an) {
  const char *p = an->raw.p + an->body_at, *end = an->raw.p + an->raw.n;
  if (!an->chunked) {
    size_t n = (size_t)(end - p);
    if (an->length >= 0 && (size_t)an->length < n) n = (size_t)an->length;
    ubuf_add(&an->body, p, n);
  } else {
    while (p < end) {
      char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
      if (!eol) break;
      size_t size = (size_t)strtoull(p, NULL, 16);
      p = eol + 2;
      if (size == 0) break;
      size_t have = (size_t)(end - p) < size ? (size_t)(end - p) : size;
      ubuf_add(&an->body, p, have);
      if (have < size) break;
      p += size + 2;
    }
  }
  ubuf_add(&an->body, "", 1);
  an->body.n--;
}

/* Sends q and reads the answer, running the engine's loop meanwhile.
 * Returns 1 with an answer, 0 when the server closed without one. */
static int exchange(request *q, answer *an) {
  server *sv = q->sv;
  uv_loop_t *loop = engine_loop(sv->e);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) finding("socket", strerror(errno));
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)sv->port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) finding("connect", strerror(errno));
  size_t sent = 0;
  int64_t start = util_mono_ms(), last = start;
  int eof = 0;
  for (;;) {
    if (engine_commit(sv->e) != 0)
      finding("a commit failed while a request was served", store_errmsg(engine_store(sv->e)));
    uv_run(loop, UV_RUN_NOWAIT);
    if (sent < q->wire.n) {
      ssize_t w = send(fd, q->wire.p + sent, q->wire.n - sent, MSG_NOSIGNAL);
      if (w > 0)
        sent += (size_t)w;
      else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINPROGRESS && errno != ENOTCONN)
        sent = q->wire.n; /* the server has closed: read what it said */
    }
    char buf[65536];
    ssize_t r;
    while ((r = recv(fd, buf, sizeof buf, 0)) > 0) {
      ubuf_add(&an->raw, buf, (size_t)r);
      last = util_mono_ms();
    }
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN)) eof = 1;
    parse_head(an);
    int64_t now = util_mono_ms();
    if (eof) break;
    if (an->streaming && now - last > QUIET_MS) break;
    if (now - start > ANSWER_MS) {
      char what[160];
      snprintf(what, sizeof what, "no answer within %d ms (%zu of %zu bytes sent, %zu received)", ANSWER_MS, sent,
               q->wire.n, an->raw.n);
      finding(what, q->target.p);
    }
    struct pollfd pf[2] = {{fd, (short)(POLLIN | (sent < q->wire.n ? POLLOUT : 0)), 0},
                           {uv_backend_fd(loop), POLLIN, 0}};
    int t = uv_backend_timeout(loop), cap = an->streaming ? QUIET_MS : 50;
    poll(pf, 2, t < 0 || t > cap ? cap : t);
  }
  close(fd);
  if (!an->complete) return 0;
  take_body(an);
  return 1;
}

/* ------------------------------------------------------------ checks --- */

static void explain(const request *q, const answer *an, const char *what) {
  fprintf(stderr, "fuzz_api_requests: %s %s %.300s -> %d %s\n%.800s\n", q->sv->name, q->method, q->target.p, an->status,
          an->ctype, an->body.p ? an->body.p : "");
  finding(what, NULL);
}

/* A query parameter as the server's library finds it (the first one of that
 * name, still %-encoded), malloc'd, or NULL. */
static char *query_param(const request *q, const char *name) {
  if (q->path_at + q->pathlen >= q->target.n) return NULL;
  const char *s = qpath(q) + q->pathlen + 1, *end = q->target.p + q->target.n;
  size_t nl = strlen(name);
  while (s <= end) {
    const char *amp = memchr(s, '&', (size_t)(end - s)), *e = amp ? amp : end;
    const char *eq = memchr(s, '=', (size_t)(e - s));
    size_t kl = eq ? (size_t)(eq - s) : (size_t)(e - s);
    if (kl == nl && memcmp(s, name, nl) == 0) {
      const char *v = eq ? eq + 1 : e;
      char *out = util_xmalloc((size_t)(e - v) + 1);
      memcpy(out, v, (size_t)(e - v));
      out[e - v] = 0;
      return out;
    }
    if (!amp) break;
    s = amp + 1;
  }
  return NULL;
}

/* The parameters of the query ('&' splits them, empty ones count). */
static size_t query_parts(const request *q) {
  if (q->path_at + q->pathlen >= q->target.n) return 0;
  size_t n = 1;
  for (size_t i = q->path_at + q->pathlen + 1; i < q->target.n; i++) n += q->target.p[i] == '&';
  return n;
}

/* A whole-number query parameter written in plain digits: 1 with *v, else 0. */
static int query_number(const request *q, const char *name, long long *v) {
  char *s = query_param(q, name);
  int ok = s && all_digits(s, 15);
  if (ok) *v = atoll(s);
  free(s);
  return ok;
}

/* Where an events route resumes when the request says so plainly: 1 with *after. */
static int resume_after(const request *q, long long *after) {
  const char *last = hdr(q, "Last-Event-ID");
  if (last && *last) {
    if (!all_digits(last, 15)) return 0;
    *after = atoll(last);
    return 1;
  }
  return query_number(q, "after", after);
}

/* The live tokens in the request's Authorization headers: their scopes. */
static unsigned granted(const request *q) {
  unsigned m = 0;
  for (int i = 0; i < q->nh; i++) {
    if (strcasecmp(q->h[i].name, "Authorization") != 0) continue;
    for (int k = 0; k < NTOKENS; k++)
      if (k != T_REVOKED && strstr(q->h[i].value, secrets[k])) m |= TOKEN_SCOPES[k];
  }
  return m;
}

/* Whether the open server must refuse the anonymous request: an Origin that
 * is not the server's own page (http:// and the Host), or a Host whose name
 * is plainly not loopback (not localhost, 127.*, or an IPv6 literal). */
static int foreign(const request *q) {
  const char *host = q->authority[0] ? q->authority : q->has_host ? hdr(q, "Host") : q->sv->host;
  const char *origin = hdr(q, "Origin");
  if (origin && (strncmp(origin, "http://", 7) != 0 || strcmp(origin + 7, host) != 0)) return 1;
  if (host[0] == '[') return 0;
  char name[256];
  size_t n = strcspn(host, ":");
  snprintf(name, sizeof name, "%.*s", (int)(n < 255 ? n : 255), host);
  if (strcasecmp(name, "localhost") == 0) return 0;
  if (strncmp(name, "127.", 4) == 0 && strspn(name, "0123456789.") == strlen(name)) return 0;
  return 1;
}

static const op *route_of(const request *q, int *path_known) {
  *path_known = 0;
  const op *found = NULL;
  for (size_t i = 0; i < nops; i++) {
    if (!fits(ops[i].pattern, qpath(q), q->pathlen)) continue;
    *path_known = 1;
    if (strcmp(ops[i].method, q->method) == 0) found = &ops[i];
  }
  return found;
}

/* The decoded JSON body on top of L, or abort. */
static void decode_body(const request *q, const answer *an) {
  char err[512];
  lua_settop(L, 0);
  if (json_decode_safe(L, an->body.p, an->body.n, err, sizeof err) != 0)
    explain(q, an, "a JSON answer does not decode");
}

static long long int_field(lua_State *S, int idx, const char *key, int *ok) {
  lua_getfield(S, idx, key);
  *ok = lua_isinteger(S, -1);
  long long v = *ok ? (long long)lua_tointeger(S, -1) : 0;
  lua_pop(S, 1);
  return v;
}

/* An events page: items in the array key, each seq (or feed id) at seqkey of
 * the item, above after, rising, at most limit; last at lastkey. */
static void check_page(const request *q, const answer *an, const char *lastkey, const char *seqkey, int feed) {
  long long after = 0, limit = 1000;
  int know_after = resume_after(q, &after);
  if (query_number(q, "limit", &limit) && limit == 0) limit = 1;
  decode_body(q, an);
  if (lua_getfield(L, 1, "events") != LUA_TTABLE) explain(q, an, "an events page without events");
  lua_Integer n = (lua_Integer)luaL_len(L, -1);
  if (n > limit) explain(q, an, "an events page longer than its limit");
  long long prev = know_after ? after : -1;
  int ok;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, -1, i);
    long long seq = int_field(L, -1, seqkey, &ok);
    if (!ok) explain(q, an, "an event without its seq or id");
    if (seq <= prev)
      explain(q, an, know_after ? "an event at or before the resume point, or out of order" : "events out of order");
    if (!feed && q->pathlen > 14 && !memchr(qpath(q), '%', q->pathlen)) { /* its own session's events */
      lua_getfield(L, -1, "session_id");
      const char *sid = lua_tostring(L, -1), *id = qpath(q) + 14; /* "/v1/workflows/" */
      size_t idl = (size_t)((const char *)memchr(id, '/', q->pathlen - 14) - id);
      if (!sid || strlen(sid) != idl || memcmp(sid, id, idl) != 0) explain(q, an, "an event of another session");
      lua_pop(L, 1);
    }
    prev = seq;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  long long last = int_field(L, 1, lastkey, &ok);
  if (!ok) explain(q, an, "an events page without its last position");
  if (n > 0 && last != prev) explain(q, an, "the last position is not the last event's");
  if (n == 0 && know_after && last != after) explain(q, an, "an empty page's last position is not the resume point");
  lua_settop(L, 0);
}

/* The frames that came of an event stream: ids above the resume point and
 * rising, data lines JSON. */
static void check_stream(const request *q, const answer *an) {
  long long after = -1, prev;
  if (!resume_after(q, &after)) after = -1;
  prev = after;
  const char *p = an->body.p, *end = p + an->body.n;
  while (p < end) {
    const char *fe = memmem(p, (size_t)(end - p), "\n\n", 2);
    if (!fe) break; /* a frame still coming when we hung up */
    for (const char *line = p; line < fe + 1;) {
      const char *nl = memchr(line, '\n', (size_t)(fe + 1 - line));
      size_t ll = (size_t)(nl - line);
      char *text = util_xmalloc(ll + 1);
      memcpy(text, line, ll);
      text[ll] = 0;
      char err[256];
      if (strncmp(text, "id: ", 4) == 0) {
        if (!all_digits(text + 4, 18)) explain(q, an, "an event stream id that is no number");
        long long id = atoll(text + 4);
        if (id <= prev) explain(q, an, "an event stream id at or before the resume point, or out of order");
        prev = id;
      } else if (strncmp(text, "data: ", 6) == 0) {
        if (json_validate(text + 6, err, sizeof err) != 0) explain(q, an, "an event stream data line that is not JSON");
      } else if (ll && text[0] != ':' && strncmp(text, "event: ", 7) != 0 && strncmp(text, "retry: ", 7) != 0) {
        explain(q, an, "an event stream line of no known field");
      }
      free(text);
      line = nl + 1;
    }
    p = fe + 2;
  }
}

static int is_2xx(int status) {
  return status >= 200 && status < 300;
}

static void check_answer(request *q, answer *an, int64_t version_at_answer) {
  int path_known;
  const op *o = route_of(q, &path_known);
  int st = an->status;
  char why[200];

  /* the status, as documented */
  int documented = st == 413 || st == 414 || st == 431;
  if (o)
    documented |= o->status[st];
  else if (path_known)
    documented |= st == 405 || st == 400; /* 400: a parameter that does not decode */
  else
    documented |= st == 404 || st == 400;
  if (!documented) {
    snprintf(why, sizeof why, "status %d is not documented for %s of this path", st, q->method);
    explain(q, an, why);
  }
  if (st == 503) explain(q, an, "503 from a healthy store");
  int sized = st == 413 || st == 414 || st == 431; /* refused before anything else is looked at */
  if (q->no_host && !q->has_host && st != 400 && !sized) explain(q, an, "HTTP/1.1 without Host not refused 400");
  if (q->chunked_over && st != 400 && !sized) explain(q, an, "a chunked body over the limit not refused 413");
  if (is_2xx(st) && !o) explain(q, an, "a 2xx where no route is documented");

  /* who may */
  if (is_2xx(st) && o && o->scope) {
    if (q->sv->tokens && !token_allows(granted(q), o->scope))
      explain(q, an, "a 2xx without a live token that grants the route's scope");
    if (!q->sv->tokens && (hdr(q, "Authorization") || foreign(q)))
      explain(q, an, "an anonymous 2xx for a web page, another host name or a token no store has");
  }

  /* what came back */
  int head = strcmp(q->method, "HEAD") == 0;
  /* the web page's files (engine/server/web_static.c): only from its two routes */
  int web = o && (strcmp(o->pattern, "/") == 0 || strcmp(o->pattern, "/web/{name}") == 0);
  if (!an->ctype[0]) {
    if (st == 304 && web) {
      /* revalidated with the file's ETag: no body */
    } else if (st != 400 && st != 413 && st != 414 && st != 431)
      explain(q, an, "the HTTP library answered itself, with a status not documented for it");
  } else if (strncmp(an->ctype, "application/json", 16) == 0) {
    char err[512];
    if (!head) {
      if (memchr(an->body.p, 0, an->body.n)) explain(q, an, "a NUL byte in a JSON answer");
      if (json_validate(an->body.p, err, sizeof err) != 0) explain(q, an, "a JSON answer that is not valid JSON");
      if (st >= 400) {
        decode_body(q, an);
        int ok = 0, msg = 0;
        long long s = -1;
        if (lua_getfield(L, 1, "error") == LUA_TTABLE) {
          s = int_field(L, -1, "status", &ok);
          msg = lua_getfield(L, -1, "message") == LUA_TSTRING;
        }
        lua_settop(L, 0);
        if (!ok || s != st || !msg)
          explain(q, an, "an error answer not of the form {\"error\":{\"status\":N,\"message\":...}}");
      } else if (an->body.n && an->body.p[strspn(an->body.p, " \t\r\n")] != '{') {
        explain(q, an, "a 2xx JSON answer that is not an object");
      }
    }
    if (st == 200 && o && !head) {
      if (strcmp(o->pattern, "/v1/workflows/{id}/events") == 0)
        check_page(q, an, "last_seq", "seq", 0);
      else if (strcmp(o->pattern, "/v1/events") == 0)
        check_page(q, an, "last_id", "id", 1);
      else if (strcmp(o->pattern, "/v1/workflows") == 0 && strcmp(o->method, "GET") == 0) {
        long long limit = 100;
        if (query_number(q, "limit", &limit) && limit == 0) limit = 1;
        decode_body(q, an);
        if (lua_getfield(L, 1, "workflows") != LUA_TTABLE || (long long)luaL_len(L, -1) > limit)
          explain(q, an, "a list of workflows longer than its limit, or none");
        lua_settop(L, 0);
      }
    }
  } else if (strncmp(an->ctype, "text/plain; version=0.0.4", 25) == 0) {
    if (!(st == 200 && o && strcmp(o->pattern, "/metrics") == 0))
      explain(q, an, "text from a route other than /metrics");
  } else if (strncmp(an->ctype, "text/html", 9) == 0 || strncmp(an->ctype, "text/css", 8) == 0 ||
             strncmp(an->ctype, "text/javascript", 15) == 0 || strncmp(an->ctype, "text/plain", 10) == 0 ||
             strncmp(an->ctype, "image/", 6) == 0) {
    if (!(st == 200 && web)) explain(q, an, "a file of the web page from a route other than / and /web/{name}");
  } else if (strcmp(an->ctype, "application/octet-stream") == 0) {
    if (!(st == 200 && o && strcmp(o->pattern, "/v1/workflows/{id}/artifacts/{sha256}") == 0))
      explain(q, an, "bytes from a route other than an artifact's download");
  } else if (an->streaming) {
    if (!(st == 200 && o &&
          (strcmp(o->pattern, "/v1/events") == 0 || strcmp(o->pattern, "/v1/workflows/{id}/events") == 0)))
      explain(q, an, "an event stream from a route that has none");
    check_stream(q, an);
  } else {
    explain(q, an, "an answer of an unexpected Content-Type");
  }
  if (st == 405 && !an->allow) explain(q, an, "405 without Allow");
  if (st == 401 && q->sv->tokens && !an->www_auth) explain(q, an, "401 without WWW-Authenticate");

  /* the store: acknowledged writes are durable, nothing else writes */
  int wrote = version_at_answer != q->sv->version;
  int is_start = o && strcmp(o->pattern, "/v1/workflows") == 0;
  if (is_2xx(st) && o && strcmp(o->method, "POST") == 0 && !(is_start && st == 200) && !wrote)
    explain(q, an, "a write answered 2xx before it was durable");
}

/* --------------------------------------------------------------- run --- */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  no_leak_check_per_input(argc, argv);
  verbose = getenv("FUZZ_API_VERBOSE") && atoi(getenv("FUZZ_API_VERBOSE")) > 0;
  signal(SIGPIPE, SIG_IGN); /* as engine/main.c: a client gone must not kill the server */
  char lim[32];
  snprintf(lim, sizeof lim, "%d", MAX_BODY);
  setenv("ENGINE_HTTP_MAX_BODY_BYTES", lim, 1);
  snprintf(lim, sizeof lim, "%d", MAX_HEADER);
  setenv("ENGINE_HTTP_MAX_HEADER_BYTES", lim, 1);
  /* streams we hung up on end at the next heartbeat they cannot send */
  setenv("ENGINE_SSE_HEARTBEAT_MS", "50", 1);
  const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  snprintf(base, sizeof base, "%s/fuzz_api_requests.XXXXXX", tmp);
  if (!mkdtemp(base)) setup_failed("mkdtemp", strerror(errno));
  remove_scratch_when_gone();
  atexit(cleanup);
  L = luaL_newstate();
  if (!L) abort();
  load_openapi();
  make_workflows_dir();
  for (int i = 0; i < 2; i++) make_store(&servers[i]);
  for (int i = 0; i < 2; i++) restart_server(&servers[i]);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  server *sv = server_of((const char *)data, size);
  if (sv->dirty) restart_server(sv);
  request q;
  parse_request((const char *)data, size, sv, &q);
  answer an;
  memset(&an, 0, sizeof an);
  int got = exchange(&q, &an);
  int64_t at_answer = data_version(sv);
  /* what the request left in the batch goes out with the next commit */
  if (engine_commit(sv->e) != 0) finding("the commit after an answer failed", store_errmsg(engine_store(sv->e)));
  if (store_in_txn(engine_store(sv->e)) || store_batch_failed(engine_store(sv->e)))
    finding("a transaction is still open (or the batch failed) after the answer and its commit", q.target.p);
  int64_t after = data_version(sv);
  if (verbose)
    fprintf(stderr, "fuzz_api_requests: %s %s %.200s -> %d %s (%zu bytes)%s [line %zu, %zu parameters]\n", sv->name,
            q.method, q.target.p, got ? an.status : 0, an.ctype, an.body.n, after != sv->version ? " (wrote)" : "",
            q.target.n, query_parts(&q));
  if (!got) {
    if (!q.body.n && q.header_bytes <= 2 * MAX_HEADER && query_parts(&q) <= MAX_QUERY_PARTS)
      finding("the server closed the connection without an answer", q.target.p);
  } else {
    check_answer(&q, &an, at_answer);
    int reads = strcmp(q.method, "GET") == 0 || strcmp(q.method, "HEAD") == 0;
    /* a refused webhook delivery is recorded by design (engine trigger
     * deliveries); that it starts nothing is tests/integration/hooks_suite.py's */
    int recorded = strncmp(qpath(&q), "/hooks/", 7) == 0 && !reads;
    if (after != sv->version && ((!is_2xx(an.status) && !recorded) || reads))
      explain(&q, &an, reads ? "a read changed the store" : "a refused request changed the store");
  }
  if (after != sv->version) sv->dirty = 1;
  ubuf_free(&an.raw);
  ubuf_free(&an.body);
  request_free(&q);
  return 0;
}
