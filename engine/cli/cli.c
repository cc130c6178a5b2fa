/* cli: the `engine` command line. Parses arguments, talks to the store and the
 * worker, or with --server URL to a running `engine serve --listen` through its
 * HTTP API (api_client.c), prints results. Both modes print from the same JSON
 * (session_view.c renders it), so they print the same lines. Exit codes: 0
 * success, 1 workflow failed, 2 usage or input error, 3 waiting (detached or
 * stuck). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


#include "api.h"
#include "api_client.h"
#include "approval.h"
#include "completion.h"
#include "engine.h"
#include "json.h"
#include "migrate.h"
#include "pretty.h"
#include "progress.h"
#include "render.h"
#include "schedules.h"
#include "session_view.h"
#include "store.h"
#include "tokens.h"
#include "util.h"
#include "wfvm.h"
#include "wftest.h"

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_WAITING = 3 };

/* ------------------------------------------------------------- helpers --- */

/* Every line for people goes out through render_line (render.h): what a
 * sandbox, a model or the log wrote never reaches the terminal raw. JSON goes
 * out through put_json. An error line is cut at DIE_MAX bytes. */
enum { DIE_MAX = 4096 };

static int die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int die(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
  va_end(ap);
  render_line(stderr, DIE_MAX, "engine: %s", msg ? msg : "out of memory");
  free(msg);
  return code;
}

/* Prints one line of JSON (freeing it) as strict JSON (json_for_output). */
static void put_json(FILE *f, char *json) {
  char *out = json_for_output(json ? json : "null", json ? strlen(json) : 4);
  fprintf(f, "%s\n", out);
  free(out);
  free(json);
}

typedef struct args {
  int argc;
  char **argv;
  int i;
} args;

/* Options common to every command. */
typedef struct common {
  const char *db;
  int json;
  int help;
  const char *db_default; /* db before any --db: a --db with --server is refused */
  const char *server;     /* --server URL or $ENGINE_SERVER: the command asks that API, NULL: the database */
  const char *token;      /* --token or $ENGINE_TOKEN, sent only as the bearer token */
  int server_from_env;
  const char *color; /* --color WHEN (global or after the command), NULL: auto */
} common;

static const char *default_db(void) {
  const char *e = getenv("ENGINE_DB");
  return e && *e ? e : "engine.db";
}

static int is_flag(const char *a, const char *name) { return strcmp(a, name) == 0; }

/* Takes the value of --flag VALUE or --flag=VALUE; returns NULL if a is not it. */
static const char *flag_value(args *a, const char *name, int *err) {
  const char *cur = a->argv[a->i];
  size_t n = strlen(name);
  if (strncmp(cur, name, n) != 0) return NULL;
  if (cur[n] == '=') return cur + n + 1;
  if (cur[n] != 0) return NULL;
  if (a->i + 1 >= a->argc) {
    fprintf(stderr, "engine: %s needs a value\n", name);
    *err = 1;
    return NULL;
  }
  return a->argv[++a->i];
}


/* --color WHEN into c->color: 0, or the exit code after naming the problem. */
static int check_color(const common *c) {
  pretty_color mode;
  if (!c->color || pretty_color_parse(c->color, &mode) == 0) return 0;
  return die(EXIT_USAGE, "--color must be auto, always or never, not '%s'", c->color);
}

/* Whether stdout gets the layout for people (pretty.h): a terminal, and no
 * --json. Anything else gets the bytes scripts read. */
static int human_stdout(const common *c) { return !c->json && isatty(STDOUT_FILENO); }

/* Whether what goes to fd is coloured: --color, else auto (pretty.h). */
static int color_on(const common *c, int fd) {
  pretty_color mode = PRETTY_COLOR_AUTO;
  if (c->color) pretty_color_parse(c->color, &mode);
  return pretty_color_on(mode, fd);
}

static pretty_opts stdout_layout(const common *c) {
  return pretty_defaults(pretty_width(STDOUT_FILENO), color_on(c, STDOUT_FILENO));
}

/* Why the database at db cannot be written, or NULL. SQLite says only "unable
 * to open database file" there, and the worker lock only that its file cannot
 * be opened: say which file or directory is read-only instead. */
static const char *unwritable(const char *db, char *why, size_t n) {
  if (store_is_url(db)) return NULL; /* PostgreSQL's own message says it */
  char *tmp = util_strdup(db);
  const char *dir = dirname(tmp);
  const char *out = why;
  if (access(db, F_OK) == 0 && access(db, W_OK) != 0)
    snprintf(why, n, "the database %s is read-only (%s)", db, strerror(errno));
  else if (access(dir, W_OK) != 0)
    snprintf(why, n, "the directory %s is not writable (%s): SQLite writes the database's -wal and -shm files and "
             "the engine its lock file there", dir, strerror(errno));
  else
    out = NULL;
  free(tmp);
  return out;
}

/* A read that failed is an error, never a shorter answer: a damaged page must
 * not print part of a history with exit 0. Closes st. */
static int read_failed(store *st, const char *what, const char *id) {
  char msg[600];
  snprintf(msg, sizeof msg, "%s", store_errmsg(st));
  store_close(st);
  return die(EXIT_USAGE, "cannot read %s of %s: %s", what, id, msg);
}

/* The workflow id names, found (1), or an exit code after saying why not. */
static int find_workflow(store *st, const char *id, wf_row *w) {
  int found = store_wf_get(st, id, w);
  if (found == 1) return 1;
  if (found < 0) return read_failed(st, "the workflow row", id);
  char err[512];
  engine_unknown_id(id, err, sizeof err);
  store_close(st);
  return die(EXIT_USAGE, "%s", err);
}

static int open_existing(const char *db, store **st) {
  char err[512], why[768];
  if (engine_db_missing(db)) return die(EXIT_USAGE, "no database at %s (start a workflow first, or pass --db)", db);
  if (store_open(db, 1, st, err, sizeof err) != STORE_OK) {
    if (unwritable(db, why, sizeof why)) return die(EXIT_USAGE, "cannot open database %s: %s", db, why);
    return die(EXIT_USAGE, "%s", err);
  }
  return 0;
}

/* ------------------------------------------------------------ --server --- */

/* The client of the API --server names, or NULL after saying why (exit 2). */
static api_client *server_client(common *c) {
  if (c->db != c->db_default) {
    die(EXIT_USAGE, "--db and --server cannot be used together: with --server the server's database is used");
    return NULL;
  }
  char err[600];
  api_client *api = api_client_new(c->server, c->token, err, sizeof err);
  if (!api) die(EXIT_USAGE, "%s", err);
  return api;
}

/* The JSON an answer holds, without the newline the server ends it with
 * (malloc'd, for put_json). */
static char *reply_json(const api_reply *r) {
  size_t n = r->len;
  while (n > 0 && (r->body[n - 1] == '\n' || r->body[n - 1] == '\r' || r->body[n - 1] == ' ')) n--;
  return util_fmt("%.*s", (int)n, r->body);
}

/* path with each %s an escaped segment: util_fmt for URLs. */
static char *api_path(const char *fmt, const char *a, const char *b) {
  char *ea = api_client_escape(a), *eb = b ? api_client_escape(b) : NULL;
  char *out = b ? util_fmt(fmt, ea, eb) : util_fmt(fmt, ea);
  free(ea);
  free(eb);
  return out;
}

/* One request; 0 with *r, or the exit code after printing the failure (the
 * server's message as it is; prefix before it when the server refused the
 * operation itself, as the local command words it). */
static int call_api(api_client *api, const char *method, const char *path, const char *body, api_reply *r,
                    const char *prefix) {
  if (api_client_call(api, method, path, body, r) == 0) return 0;
  int refused = r->status == 400 || r->status == 404 || r->status == 409;
  int rc = die(EXIT_USAGE, "%s%s", refused && prefix ? prefix : "", r->message);
  api_reply_free(r);
  return rc;
}

/* Reads --input @file into *text: a regular file, or a pipe or terminal
 * (`@/dev/stdin`, `@<(cmd)`), never more than the payload limit (a regular
 * file's size is known before a byte is read). Opened without blocking, so a
 * FIFO nobody writes to does not hang the open. */
static int read_input_file(const char *path, char **text, size_t *len) {
  size_t max = json_max_payload();
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return die(EXIT_USAGE, "--input: cannot read %s: %s", path, strerror(e));
  }
  int piped = S_ISFIFO(sb.st_mode) || S_ISCHR(sb.st_mode);
  if (!S_ISREG(sb.st_mode) && !piped) {
    close(fd);
    return die(EXIT_USAGE, "--input: %s is %s, not a file", path, util_file_kind(sb.st_mode));
  }
  if (S_ISREG(sb.st_mode) && (size_t)sb.st_size > max) {
    close(fd);
    return die(EXIT_USAGE, "--input %s is %lld bytes, more than the limit of %zu bytes (ENGINE_MAX_PAYLOAD_BYTES)", path,
               (long long)sb.st_size, max);
  }
  if (piped) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK); /* a pipe is read as it comes */
  ubuf b = {0};
  int e = util_read_fd(fd, max, &b);
  close(fd);
  if (e) {
    ubuf_free(&b);
    if (e == EFBIG)
      return die(EXIT_USAGE, "--input %s is more than the limit of %zu bytes (ENGINE_MAX_PAYLOAD_BYTES)", path, max);
    return die(EXIT_USAGE, "--input: cannot read %s: %s", path, strerror(e));
  }
  *len = b.n;
  *text = b.p ? b.p : util_strdup("");
  return 0;
}

/* Reads --input JSON or @file and checks it (size, UTF-8, no NUL byte, JSON):
 * *out is its canonical form. */
static int read_input(const char *spec, char **out) {
  char err[512];
  char *text = NULL;
  size_t len = 0;
  if (spec[0] == '@') {
    int rc = read_input_file(spec + 1, &text, &len);
    if (rc) return rc;
  } else {
    text = util_strdup(spec);
    len = strlen(text);
  }
  *out = json_accept(text, len, "--input", err, sizeof err);
  free(text);
  return *out ? 0 : die(EXIT_USAGE, "%s", err);
}

/* Who acts from this shell: "local:USER" (the identity a start records and
 * an approval names; the API's are "token:NAME"). */
static void local_identity(char *out, size_t n) {
  const char *user = getenv("USER");
  snprintf(out, n, "local:%s", user && *user ? user : "unknown");
}

static int exit_for_status(const char *status) {
  if (strcmp(status, "completed") == 0) return EXIT_OK;
  if (strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0) return EXIT_FAILED;
  return EXIT_WAITING;
}

/* --------------------------------------------------------------- events --- */

/* An event for people: its line, or with lay (a terminal, or --full) its
 * transcript rows. Both rendered: terminal-safe. */
static void print_event_human(FILE *f, const domain_event *e, const view_layout *lay) {
  if (lay) {
    char *rows = view_event_transcript(e, lay);
    fputs(rows, f);
    free(rows);
    return;
  }
  char *line = view_event_line(e);
  fprintf(f, "%s\n", line);
  free(line);
}

static void print_event_json(FILE *f, const domain_event *e) { put_json(f, view_event_json(e)); }

/* An event stream of the API (events --follow, a foreground start with
 * --server): each recorded event once, in order, as the local commands print
 * them; for people, also the text a model streams (agent.delta: never
 * recorded, so never in --json), on one line per model step. */
typedef struct remote_follow {
  FILE *out;
  int json, quiet;
  int64_t last; /* seq printed last */
  int live_open; /* a live line is being written */
  int64_t live_step;
  int bad; /* a frame that is not an event: the stream stops, the command fails */
  const view_layout *lay; /* transcript rows (print_event_human), or NULL for lines */
} remote_follow;

static void live_close(remote_follow *f) {
  if (!f->live_open) return;
  fputc('\n', f->out);
  f->live_open = 0;
}

/* The text of an agent.delta frame's data on the step's live line. */
static void live_show(remote_follow *f, const char *data, size_t len) {
  int64_t step = 0;
  char *text = f->json ? NULL : view_live_text(data, len, &step);
  if (!text) return;
  if (f->live_open && step != f->live_step) live_close(f);
  if (!f->live_open) {
    char *head = view_live_head(step);
    fputs(head, f->out);
    free(head);
    f->live_open = 1;
    f->live_step = step;
  }
  fputs(text, f->out);
  fflush(f->out);
  free(text);
}

static int on_remote_frame(void *ud, const sse_event *ev) {
  remote_follow *f = ud;
  if (strcmp(ev->type, "end") == 0) {
    live_close(f);
    fflush(f->out);
    return 1;
  }
  if (f->quiet) return 0;
  if (strcmp(ev->type, "agent.delta") == 0) {
    live_show(f, ev->data, ev->len);
    return 0;
  }
  if (strcmp(ev->type, "message") != 0) return 0; /* a kind of frame this client does not know */
  view_event e;
  if (view_event_parse(ev->data, ev->len, &e) != 0) {
    f->bad = 1; /* never skip one silently: what is printed would have a hole */
    return 1;
  }
  if (e.e.seq > f->last) { /* a resumed stream never repeats one, but say it once anyway */
    live_close(f);
    if (f->json) print_event_json(f->out, &e.e);
    else print_event_human(f->out, &e.e, f->lay);
    fflush(f->out);
    f->last = e.e.seq;
  }
  view_event_free(&e);
  return 0;
}

typedef struct follow {
  store *st;
  const char *id;
  int64_t last;
  int json;
  FILE *out;
  int failed; /* a read failed: --follow stops and says so */
  const view_layout *lay; /* transcript rows (print_event_human), or NULL for lines */
  progress *prog; /* a foreground start's status (which prints the events), or NULL */
} follow;

static int on_domain(void *ud, const domain_event *e) {
  follow *f = ud;
  if (f->prog)
    progress_event(f->prog, e);
  else if (f->json)
    print_event_json(f->out, e);
  else
    print_event_human(f->out, e, f->lay);
  f->last = e->seq;
  return 0;
}

/* Prints the events after the last one printed; STORE_OK or the read error. */
static int follow_flush(follow *f) {
  int rc = store_domain_list(f->st, f->id, f->last, on_domain, f);
  fflush(f->out);
  return rc;
}

/* ---------------------------------------------------------------- start --- */

typedef struct start_ctx {
  engine *e;
  const char *id;
  follow f;
  int quiet;
  progress *prog;     /* what the session does now, on stderr (progress.h); NULL with --quiet */
} start_ctx;

/* A foreground start is the worker: it hears its model's text as the API's
 * watchers do (activity.live): on a terminal above the status line, replaced
 * by the recorded message; elsewhere on "~ live" lines. */
static void start_on_live(void *ud, const char *id, const char *type, const char *json) {
  start_ctx *s = ud;
  if (!s->prog || strcmp(id, s->id) != 0 || strcmp(type, "agent.delta") != 0) return;
  progress_delta(s->prog, json);
}

/* What it waits on is shown by the status (start_on_commit): an approval or
 * a signal with the command that answers it. */
static void start_on_status(void *ud, const char *id, const char *status, const char *detail) {
  start_ctx *s = ud;
  (void)detail;
  if (strcmp(id, s->id) != 0) return;
  if (engine_status_terminal(status) || strcmp(status, "stuck") == 0) engine_stop(s->e);
}

/* After each commit: the new events, then what the run does now. */
static void start_on_commit(void *ud) {
  start_ctx *s = ud;
  if (s->quiet) return;
  follow_flush(&s->f);
  progress_refresh(s->prog);
}

/* Prints the outcome of a finished (or stuck) workflow; returns the exit code. */
static int is_invalid_input(const char *error) {
  char type[64];
  return strcmp(view_json_field(error, "type", type, sizeof type), "InvalidInput") == 0;
}

/* From the workflow's summary (view_summary_json, what GET /v1/workflows/ID
 * answers), so a start with --server ends with the same lines. */
static int report_summary_outcome(const char *id, const char *json, size_t n, const common *c) {
  char *status = json_get_string(json, n, "status");
  if (!status) return die(EXIT_USAGE, "the summary of %s has no status", id);
  const char *v;
  size_t vn;
  char *error = view_json_member(json, n, "error"); /* as the row holds it */
  int code = exit_for_status(status);
  if (strcmp(status, "completed") == 0) {
    pretty_opts o = stdout_layout(c);
    char *human = human_stdout(c) ? pretty_outcome(json, n, &o) : NULL;
    if (human) fputs(human, stdout);
    else put_json(stdout, json_get(json, n, "result", &v, &vn) == 1 ? util_fmt("%.*s", (int)vn, v) : NULL);
    free(human);
  } else if (strcmp(status, "stuck") == 0) {
    render_line(stderr, 0, "engine: %s is stuck: %s", id, error ? error : "");
    render_line(stderr, 0, "engine: fix the script, check it with: engine replay %s --script FILE, then add --apply", id);
  } else if (strcmp(status, "failed") == 0 && error && is_invalid_input(error)) {
    /* the workflow refused its input before doing anything: a usage error.
     * The message is decoded, not scanned: a problem may quote a value. */
    char msg[4096];
    view_json_field(error, "message", msg, sizeof msg);
    render_line(stderr, 0, "engine: %s: %s", id, *msg ? msg : "invalid input");
    code = EXIT_USAGE;
  } else if (engine_status_terminal(status)) {
    render_line(stderr, 0, "engine: %s %s: %s", id, status, error ? error : "");
  } else {
    render_line(stderr, 0, "engine: %s is %s", id, status);
  }
  free(status);
  free(error);
  return code;
}

static int report_outcome(store *st, const char *id, const common *c) {
  view_summary s;
  char err[700];
  int found = view_summary_load(st, id, &s, err, sizeof err);
  if (found == 0) return die(EXIT_USAGE, "workflow '%s' vanished", id);
  if (found < 0) return die(EXIT_USAGE, "%s", err);
  char *json = view_summary_json(&s);
  int code = report_summary_outcome(id, json, strlen(json), c);
  free(json);
  view_summary_free(&s);
  return code;
}

static void client_changed(void *ud) {
  start_ctx *s = ud;
  if (!s->quiet) follow_flush(&s->f); /* --quiet: the outcome only, as when this process is the worker */
  wf_row w;
  if (store_wf_get(s->f.st, s->id, &w) == 1) {
    if (engine_status_terminal(w.status) || strcmp(w.status, "stuck") == 0) uv_stop(uv_default_loop());
    wf_row_free(&w);
  }
}

typedef struct lockpoll {
  const char *db;
  int fd;
} lockpoll;

static void try_lock(uv_timer_t *t) {
  lockpoll *lp = t->data;
  char holder[256];
  lp->fd = engine_lock(lp->db, "start", holder, sizeof holder);
  if (lp->fd >= 0) uv_stop(t->loop);
}

/* Another process is the worker: follow the workflow through the database until
 * it ends, or take over as the worker when that process goes away. Returns -1
 * to take over (with *lockfd set), else an exit code. */
static int follow_as_client(const char *db, const char *id, int quiet, int *lockfd, const common *c) {
  store *st;
  char err[512];
  if (store_open(db, 1, &st, err, sizeof err) != STORE_OK) return die(EXIT_USAGE, "%s", err);
  start_ctx s = {NULL, id, {st, id, 0, 0, stderr, 0, NULL, NULL}, quiet, NULL};
  uv_loop_t *loop = uv_default_loop();
  dbwatch *w = dbwatch_start(loop, st, client_changed, &s);
  lockpoll lp = {db, -1};
  uv_timer_t lt;
  int uv = uv_timer_init(loop, &lt);
  if (uv != 0) {
    dbwatch_stop(w);
    uv_run(loop, UV_RUN_DEFAULT);
    store_close(st);
    return die(EXIT_USAGE, "cannot start the event loop: %s", uv_strerror(uv));
  }
  lt.data = &lp;
  uv_timer_start(&lt, try_lock, 250, 250);
  client_changed(&s);
  uv_run(loop, UV_RUN_DEFAULT);
  dbwatch_stop(w);
  uv_close((uv_handle_t *)&lt, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);
  int code = -1;
  if (lp.fd < 0) code = report_outcome(st, id, c);
  store_close(st);
  *lockfd = lp.fd;
  return code;
}

/* Whether the database at db, if there is one, holds workflow id: start
 * carries on a workflow whose id an older engine accepted. */
static int workflow_exists(const char *db, const char *id) {
  store *st;
  char err[256];
  wf_row w;
  if (engine_db_missing(db) || store_open(db, 1, &st, err, sizeof err) != STORE_OK) return 0;
  int found = store_wf_get(st, id, &w) == 1;
  if (found) wf_row_free(&w);
  store_close(st);
  return found;
}

/* A foreground start with --server checks now and then whether the run got
 * stuck: the stream ends only when the workflow does. */
typedef struct remote_start_watch {
  api_client *api;
  const char *path;
  int ticks;
} remote_start_watch;

typedef struct remote_start_ctx {
  remote_follow f;
  remote_start_watch w;
} remote_start_ctx;

static int remote_start_idle(void *ud) {
  remote_start_ctx *s = ud;
  if (++s->w.ticks % 3) return 0; /* every 3 s */
  api_reply r;
  int stuck = 0;
  if (api_client_call(s->w.api, "GET", s->w.path, NULL, &r) == 0) {
    char *status = json_get_string(r.body, r.len, "status");
    stuck = status && strcmp(status, "stuck") == 0;
    free(status);
  }
  api_reply_free(&r);
  return stuck;
}

/* The name of the process that runs workflows for the server: "engine serve
 * (pid N)", as its lock file says it to a local start. */
static void server_holder(api_client *api, char *out, size_t n) {
  api_reply r;
  int64_t pid = api_client_call(api, "GET", "/healthz", NULL, &r) == 0 ? json_get_int(r.body, r.len, "pid", 0) : 0;
  api_reply_free(&r);
  if (pid > 0) snprintf(out, n, "engine serve (pid %lld)", (long long)pid);
  else snprintf(out, n, "the server at %s", api_client_url(api));
}

/* start with --server: POST /v1/workflows, then follow its stream until the
 * workflow ends (or is stuck) and print the outcome from its summary, as a
 * local start that finds another worker does. Takes input. */
static int remote_start(common *c, const char *script, const char *id, char *input, int detach, int quiet) {
  api_client *api = server_client(c);
  if (!api) return free(input), EXIT_USAGE;
  char *qs = json_quote(script), *qi = id ? json_quote(id) : NULL;
  char *body = qi ? util_fmt("{\"script\":%s,\"id\":%s,\"input\":%s}", qs, qi, input)
                  : util_fmt("{\"script\":%s,\"input\":%s}", qs, input);
  free(qs);
  free(qi);
  free(input);
  api_reply r;
  int rc = call_api(api, "POST", "/v1/workflows", body, &r, NULL);
  free(body);
  if (rc) return api_client_free(api), rc;
  char *wid = json_get_string(r.body, r.len, "id");
  int existed = r.status == 200;
  api_reply_free(&r);
  if (!wid) {
    rc = die(EXIT_USAGE, "the server at %s answered the start without the workflow's id", api_client_url(api));
    api_client_free(api);
    return rc;
  }
  if (existed) render_line(stderr, DIE_MAX, "engine: %s already exists; following it", wid);
  if (detach) {
    render_line(stdout, 0, "%s", wid);
    free(wid);
    api_client_free(api);
    return EXIT_WAITING;
  }
  if (!quiet) {
    char holder[300];
    server_holder(api, holder, sizeof holder);
    render_line(stderr, DIE_MAX, "engine: %s started; %s runs it", wid, holder);
  }
  char *summary = api_path("/v1/workflows/%s", wid, NULL), *events = util_fmt("%s/events", summary);
  remote_start_ctx s = {{stderr, 0, quiet, 0, 0, 0, 0, NULL}, {api, summary, 0}};
  api_stream o = {on_remote_frame, remote_start_idle, &s, NULL, 0};
  int streamed = api_client_stream(api, events, &o, &r);
  live_close(&s.f);
  if (streamed < 0) rc = die(EXIT_USAGE, "%s", r.message);
  else if (s.f.bad) rc = die(EXIT_USAGE, "the server at %s sent an event this client cannot read", api_client_url(api));
  api_reply_free(&r);
  if (streamed > 0 && !s.f.bad && (rc = call_api(api, "GET", summary, NULL, &r, NULL)) == 0) {
    rc = report_summary_outcome(wid, r.body, r.len, c);
    api_reply_free(&r);
  }
  free(summary);
  free(events);
  free(wid);
  api_client_free(api);
  return rc;
}

static const char *START_HELP =
    "usage: engine start FILE.lua [--input JSON|@file] [--id ID] [--detach] [--quiet] [--json] [--color WHEN]\n"
    "                    [--db PATH]\n"
    "\n"
    "Starts a workflow and runs it in the foreground until it completes (exit 0),\n"
    "fails (exit 1) or is stuck (exit 3). While it waits for a signal or a timer it\n"
    "keeps running; `engine signal` from another terminal wakes it at once.\n"
    "With --id of an existing workflow, carries that workflow on from its log.\n"
    "An ID is 1-128 bytes of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit,\n"
    "without \"..\"; without --id one is made from the script's name and 8 hex digits.\n"
    "With --detach it only records the start (exit 3) for `engine serve` to run.\n"
    "Domain events are printed to stderr as they happen; the result goes to stdout:\n"
    "on a terminal as the outcome for people (status, summary, verdict, usage, the\n"
    "findings as a table, artifacts), else (a pipe, a file, or with --json) as the\n"
    "result's JSON on one line.\n"
    "When this process runs the workflow (not engine serve) and stderr is a\n"
    "terminal, the events read as a transcript (as engine events shows them) and\n"
    "a status line below them says what the session does now: a model turn\n"
    "streaming and its characters so far, a tool or an activity running and for\n"
    "how long, an approval or a signal it waits for since when, with the command\n"
    "that answers it. It is redrawn in place every second and erased before the\n"
    "result; the text a model streams shows above it until the turn's message is\n"
    "recorded. Elsewhere (a pipe, a file, TERM=dumb) the same goes out as plain\n"
    "lines, one each time it changes (\"~ model turn 2\", \"~ tool shell running\",\n"
    "\"engine: ID is waiting for approval RID; ...\"), the events one per line and\n"
    "the streamed text on lines that start with \"~ live (step N): \". Colour only\n"
    "on a terminal, never with NO_COLOR set. --quiet prints the outcome alone.\n"
    "\n"
    "With engine --server URL start ..., the server starts it: FILE.lua names a script\n"
    "in its workflows directory (serve --workflows), like hello.lua, and its token's\n"
    "identity is recorded as who started it. The events and the outcome print as\n"
    "when a local start finds engine serve running it (one line per event, no\n"
    "status line), and the text a model streams too, on lines that start with\n"
    "\"~ live\".\n";

static int cmd_start(args *a, common *c) {
  char shown[1024]; /* c->db in messages (engine_db_shown) */
  const char *script = NULL, *input_spec = "{}", *id = NULL;
  int detach = 0, quiet = 0, bad = 0, rc;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = flag_value(a, "--input", &bad))) input_spec = v;
    else if ((v = flag_value(a, "--id", &bad))) id = v;
    else if ((v = flag_value(a, "--db", &bad))) c->db = v;
    else if (is_flag(cur, "--detach")) detach = 1;
    else if (is_flag(cur, "--quiet") || is_flag(cur, "-q")) quiet = 1;
    else if (is_flag(cur, "--json")) c->json = 1;
    else if ((v = flag_value(a, "--color", &bad))) c->color = v;
    else if (is_flag(cur, "--help") || is_flag(cur, "-h")) return fputs(START_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return die(EXIT_USAGE, "start: unknown option %s (see engine start --help)", cur);
    else if (!script) script = cur;
    else return die(EXIT_USAGE, "start: unexpected argument %s", cur);
    if (bad) return EXIT_USAGE;
  }
  if (!script) return die(EXIT_USAGE, "start: missing FILE.lua (see engine start --help)");
  if ((rc = check_color(c))) return rc;
  char *input = NULL;
  rc = read_input(input_spec, &input);
  if (rc) return rc;
  /* the server records its token's identity, and checks the script in its own directory */
  if (c->server) return remote_start(c, script, id, input, detach, quiet);
  {
    /* who started it goes into an object input's "identity" (what the API
     * does with the token's identity) */
    char who[300], ierr[512];
    local_identity(who, sizeof who);
    char *with = engine_input_with_identity(input, who, 0, ierr, sizeof ierr);
    if (!with) {
      free(input);
      return die(EXIT_USAGE, "--input: %s", ierr);
    }
    free(input);
    input = with;
  }
  {
    /* check the script before the database is touched (or created) */
    char serr[1024];
    size_t len;
    char *src = engine_read_script(script, &len, serr, sizeof serr);
    int bad = !src || engine_check_script(script, src, len, serr, sizeof serr) != 0;
    free(src);
    if (bad) {
      free(input);
      return die(EXIT_USAGE, "%s", serr);
    }
  }
  char genid[ENGINE_ID_MAX + 1], err[1024], holder[256];
  if (unwritable(c->db, err, sizeof err)) {
    free(input);
    return die(EXIT_USAGE, "start: cannot write %s: %s", engine_db_shown(c->db, shown, sizeof shown), err);
  }
  if (!id) {
    engine_generate_id(script, genid, sizeof genid);
    id = genid;
  } else if (engine_check_id(id, err, sizeof err) != 0 && !workflow_exists(c->db, id)) {
    free(input); /* refused before the database is touched (or created) */
    return die(EXIT_USAGE, "%s", err);
  }
  int lockfd = detach ? -1 : engine_lock(c->db, "start", holder, sizeof holder);
  if (lockfd < 0) {
    /* Not the worker: record the start and follow it (or return when detached). */
    store *st;
    if (store_open(c->db, 0, &st, err, sizeof err) != STORE_OK) {
      free(input);
      return die(EXIT_USAGE, "%s", err);
    }
    int existed = 0;
    rc = engine_create_workflow(st, id, script, input, &existed, err, sizeof err);
    store_close(st);
    free(input);
    if (rc) return die(EXIT_USAGE, "%s", err);
    if (existed) render_line(stderr, DIE_MAX, "engine: %s already exists; following it", id);
    if (detach) {
      render_line(stdout, 0, "%s", id);
      return EXIT_WAITING;
    }
    if (!quiet) render_line(stderr, DIE_MAX, "engine: %s started; %s runs it", id, holder);
    rc = follow_as_client(c->db, id, quiet, &lockfd, c);
    if (rc >= 0) return rc;
    if (!quiet) render_line(stderr, DIE_MAX, "engine: the worker went away; carrying %s on here", id);
    input = util_strdup("{}");
  }
  start_ctx s = {NULL, id, {NULL, id, 0, 0, stderr, 0, NULL, NULL}, quiet, NULL};
  /* the worker runs every workflow of the database, not only this one: a
   * start that follows it must not wait for a worker that never runs it */
  engine_config cfg = {.db_path = c->db, .on_status = start_on_status, .on_commit = start_on_commit,
                       .on_live = start_on_live, .ud = &s};
  engine *e;
  if (engine_open(&e, &cfg, err, sizeof err) != 0) {
    engine_unlock(lockfd);
    free(input);
    return die(EXIT_USAGE, "%s", err);
  }
  s.e = e;
  s.f.st = engine_store(e);
  if (!quiet) {
    /* in place on a terminal that can move its cursor; plain lines elsewhere */
    const char *term = getenv("TERM");
    int tty = isatty(STDERR_FILENO) && !(term && strcmp(term, "dumb") == 0);
    s.f.prog = s.prog = progress_new(stderr, engine_store(e), id, tty, color_on(c, STDERR_FILENO));
  }
  int existed = 0;
  rc = engine_create_workflow(engine_store(e), id, script, input, &existed, err, sizeof err);
  free(input);
  if (rc) {
    engine_free(e);
    engine_unlock(lockfd);
    return die(EXIT_USAGE, "%s", err);
  }
  wf_row w;
  store_wf_get(engine_store(e), id, &w);
  int done = engine_status_terminal(w.status);
  if (existed && !quiet)
    render_line(stderr, DIE_MAX, "engine: %s exists (%s); %s", id, w.status,
                done ? "it has finished" : "carrying it on from its log (its own script and input)");
  else if (!quiet)
    render_line(stderr, DIE_MAX, "engine: started %s", id);
  wf_row_free(&w);
  if (!done) {
    if (existed && !quiet) {
      /* show what happened so far, then only what is new */
      follow_flush(&s.f);
    }
    if (s.prog) {
      progress_start(s.prog, engine_loop(e)); /* without its timer it still shows every change */
      progress_refresh(s.prog);
    }
    int failed = engine_run(e) != 0;
    if (s.prog) progress_stop(s.prog);
    if (failed) fprintf(stderr, "engine: the worker stopped after a store error\n");
  }
  if (!quiet) follow_flush(&s.f);
  if (s.prog) progress_stop(s.prog);
  rc = report_outcome(engine_store(e), id, c);
  store_wf_get(engine_store(e), id, &w);
  if (rc == EXIT_WAITING && strcmp(w.status, "stuck") != 0)
    render_line(stderr, DIE_MAX, "engine: interrupted; `engine start %s --id %s` or `engine serve` carries it on",
                script, id);
  wf_row_free(&w);
  engine_free(e); /* drains the loop: the status timer's close runs */
  progress_free(s.prog);
  engine_unlock(lockfd);
  return rc;
}

/* ---------------------------------------------------------------- serve --- */

static const char *SERVE_HELP =
    "usage: engine serve [--db PATH] [--listen ADDR] [--workflows DIR]\n"
    "\n"
    "Runs the worker for every workflow in the database: recovers whatever a crash\n"
    "interrupted, runs activities and timers, and wakes workflows when `engine\n"
    "signal` or `engine cancel` write to the database. One worker per SQLite\n"
    "database; on PostgreSQL several share it, each workflow under a lease.\n"
    "Stop it with Ctrl-C or SIGTERM; nothing is lost.\n"
    "\n"
    "--listen ADDR also answers the HTTP API on ADDR (127.0.0.1:7420, [::1]:7420;\n"
    "port 0 picks a free one, printed at start). An address that is not loopback\n"
    "needs an API token first (engine token create). POST /v1/workflows starts\n"
    "scripts of --workflows DIR (default ./workflows). No TLS: put a reverse proxy\n"
    "in front for that.\n";

/* Raises the open-file limit to its hard limit: each HTTP connection is one. */
static void raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

static int cmd_serve(args *a, common *c) {
  char shown[1024]; /* c->db in messages (engine_db_shown) */
  int bad = 0;
  const char *listen = NULL, *workflows = "workflows";
  int workflows_default = 1;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = flag_value(a, "--db", &bad))) c->db = v;
    else if ((v = flag_value(a, "--listen", &bad))) listen = v;
    else if ((v = flag_value(a, "--workflows", &bad))) workflows = v, workflows_default = 0;
    else if (is_flag(cur, "--help") || is_flag(cur, "-h")) return fputs(SERVE_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else return die(EXIT_USAGE, "serve: unknown argument %s (see engine serve --help)", cur);
  }
  char err[1024], holder[256], why[768];
  if (unwritable(c->db, why, sizeof why)) return die(EXIT_USAGE, "serve: cannot serve %s: %s", engine_db_shown(c->db, shown, sizeof shown), why);
  int lockfd = engine_lock(c->db, "serve", holder, sizeof holder);
  if (lockfd < 0) return die(EXIT_USAGE, "serve: %s is already served by %s", engine_db_shown(c->db, shown, sizeof shown), holder);
  api *http = listen ? api_new() : NULL;
  engine_config cfg = {.db_path = c->db};
  if (http) api_engine_config(http, &cfg);
  engine *e;
  if (engine_open(&e, &cfg, err, sizeof err) != 0) {
    api_free(http);
    engine_unlock(lockfd);
    return die(EXIT_USAGE, "%s", err);
  }
  if (http) {
    raise_nofile();
    api_options o = {listen, workflows, workflows_default};
    if (api_listen(http, e, &o, err, sizeof err) != 0) {
      api_stop(http);
      engine_free(e);
      api_free(http);
      engine_unlock(lockfd);
      return die(EXIT_USAGE, "serve: %s", err);
    }
    render_line(stderr, DIE_MAX, "engine: serving %s (pid %d), API on %s", engine_db_shown(c->db, shown, sizeof shown), (int)getpid(), api_url(http));
  } else {
    render_line(stderr, DIE_MAX, "engine: serving %s (pid %d)", engine_db_shown(c->db, shown, sizeof shown), (int)getpid());
  }
  schedules *sched = schedules_start(e);
  if (http) api_set_schedules(http, sched);
  int rc = engine_run(e);
  schedules_stop(sched);
  api_stop(http);
  engine_free(e);
  api_free(http);
  engine_unlock(lockfd);
  fprintf(stderr, "engine: stopped\n");
  return rc == 0 ? EXIT_OK : EXIT_FAILED;
}

/* ------------------------------------------------------- signal / cancel --- */

static int parse_simple(args *a, common *c, const char *help, const char **pos, int npos, int minpos) {
  int bad = 0, n = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = flag_value(a, "--db", &bad))) c->db = v;
    else if (is_flag(cur, "--json")) c->json = 1;
    else if ((v = flag_value(a, "--color", &bad))) c->color = v;
    else if (is_flag(cur, "--help") || is_flag(cur, "-h")) {
      fputs(help, stdout);
      c->help = 1;
      return EXIT_OK;
    } else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1]) return die(EXIT_USAGE, "unknown option %s (see --help)", cur);
    else if (n < npos) pos[n++] = cur;
    else return die(EXIT_USAGE, "unexpected argument %s (see --help)", cur);
  }
  if (n < minpos) {
    fputs(help, stderr);
    return EXIT_USAGE;
  }
  return check_color(c);
}

static const char *SIGNAL_HELP =
    "usage: engine signal ID NAME [JSON] [--db PATH]\n"
    "\n"
    "Sends signal NAME with a JSON payload (default null) to workflow ID. A signal\n"
    "that arrives before the workflow waits for it is buffered. Exit 2 when the\n"
    "workflow is unknown or already finished.\n";

static int cmd_signal(args *a, common *c) {
  const char *pos[3] = {NULL, NULL, "null"};
  int rc = parse_simple(a, c, SIGNAL_HELP, pos, 3, 2);
  if (rc || c->help) return rc;
  char err[512];
  /* both checked before the database is opened */
  if (engine_check_signal_name(pos[1], err, sizeof err) != 0 || engine_reserved_signal(pos[1], err, sizeof err))
    return die(EXIT_USAGE, "%s", err);
  char *canon = json_accept(pos[2], strlen(pos[2]), "the signal payload", err, sizeof err);
  if (!canon) return die(EXIT_USAGE, "%s", err);
  if (c->server) {
    api_client *api = server_client(c);
    char *path = api ? api_path("/v1/workflows/%s/signals/%s", pos[0], pos[1]) : NULL;
    api_reply r;
    rc = api ? call_api(api, "POST", path, canon, &r, NULL) : EXIT_USAGE;
    free(canon);
    free(path);
    api_client_free(api);
    if (rc) return rc;
    api_reply_free(&r);
    render_line(stderr, DIE_MAX, "engine: signal '%s' sent to %s", pos[1], pos[0]);
    return EXIT_OK;
  }
  free(canon);
  store *st;
  if ((rc = open_existing(c->db, &st))) return rc;
  char who[300];
  local_identity(who, sizeof who);
  rc = engine_send_signal(st, pos[0], pos[1], pos[2], who, err, sizeof err);
  store_close(st);
  if (rc) return die(EXIT_USAGE, "%s", err);
  render_line(stderr, DIE_MAX, "engine: signal '%s' sent to %s", pos[1], pos[0]);
  return EXIT_OK;
}

static const char *MESSAGE_HELP =
    "usage: engine message ID TEXT [--db PATH]\n"
    "       engine interrupt ID [--reason TEXT] [--db PATH]\n"
    "       engine close ID [--db PATH]\n"
    "\n"
    "Tells a running agent session something, recorded with who sent it.\n"
    "message: TEXT joins the transcript before the session's next model turn\n"
    "(event user.message). interrupt: the session stops at its next safe point\n"
    "(before a model turn, before a turn's tool calls run), says so\n"
    "(session.interrupted) and waits for a message. close: a session started\n"
    "with waitForMessages ends after its current answer. Exit 2 when the\n"
    "workflow is unknown or finished, or TEXT is empty or over 64 KiB.\n";

/* message / interrupt / close: the signal session:input with the sender this
 * side knows (the local user; with --server, the token's identity). */
static int cmd_session_input(args *a, common *c, const char *kind) {
  const char *pos[2] = {NULL, NULL}, *reason = NULL;
  int bad = 0, n = 0, want = strcmp(kind, "message") == 0 ? 2 : 1;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = flag_value(a, "--db", &bad))) c->db = v;
    else if (strcmp(kind, "interrupt") == 0 && (v = flag_value(a, "--reason", &bad))) reason = v;
    else if (is_flag(cur, "--help") || is_flag(cur, "-h")) {
      fputs(MESSAGE_HELP, stdout);
      return EXIT_OK;
    } else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1]) return die(EXIT_USAGE, "unknown option %s (see --help)", cur);
    else if (n < want) pos[n++] = cur;
    else return die(EXIT_USAGE, "unexpected argument %s (see --help)", cur);
  }
  if (n < want) {
    fputs(MESSAGE_HELP, stderr);
    return EXIT_USAGE;
  }
  const char *text = want == 2 ? pos[1] : reason;
  char err[512], who[300];
  local_identity(who, sizeof who);
  char *payload = engine_session_input(kind, text, who, err, sizeof err); /* checked before anything is opened */
  if (!payload) return die(EXIT_USAGE, "%s: %s", kind, err);
  int rc;
  if (c->server) {
    api_client *api = server_client(c);
    char *path = api ? api_path("/v1/workflows/%s/messages", pos[0], NULL) : NULL;
    char *qk = json_quote(kind), *qt = json_quote(text ? text : "");
    char *body = util_fmt("{\"kind\":%s,\"text\":%s}", qk, qt);
    api_reply r;
    rc = api ? call_api(api, "POST", path, body, &r, NULL) : EXIT_USAGE;
    if (rc == EXIT_OK) api_reply_free(&r);
    free(qk);
    free(qt);
    free(body);
    free(path);
    api_client_free(api);
  } else {
    store *st;
    rc = open_existing(c->db, &st);
    if (rc == EXIT_OK) {
      if (engine_send_signal(st, pos[0], ENGINE_SESSION_SIGNAL, payload, who, err, sizeof err) != 0)
        rc = die(EXIT_USAGE, "%s", err);
      store_close(st);
    }
  }
  free(payload);
  if (rc == EXIT_OK) render_line(stderr, DIE_MAX, "engine: %s sent to %s", kind, pos[0]);
  return rc;
}

static const char *CANCEL_HELP =
    "usage: engine cancel ID [--db PATH]\n"
    "\n"
    "Requests cancellation: the command the workflow waits on raises a Cancelled\n"
    "error in the script, which can run its cleanup (activities included) and then\n"
    "ends as cancelled.\n";

static int cmd_cancel(args *a, common *c) {
  const char *pos[1] = {NULL};
  int rc = parse_simple(a, c, CANCEL_HELP, pos, 1, 1);
  if (rc || c->help) return rc;
  if (c->server) {
    api_client *api = server_client(c);
    char *path = api ? api_path("/v1/workflows/%s/cancel", pos[0], NULL) : NULL;
    api_reply r;
    rc = api ? call_api(api, "POST", path, "", &r, NULL) : EXIT_USAGE;
    free(path);
    api_client_free(api);
    if (rc) return rc;
    api_reply_free(&r);
    render_line(stderr, DIE_MAX, "engine: cancellation of %s requested", pos[0]);
    return EXIT_OK;
  }
  store *st;
  if ((rc = open_existing(c->db, &st))) return rc;
  char err[512];
  char who[300];
  local_identity(who, sizeof who);
  rc = engine_request_cancel(st, pos[0], who, err, sizeof err);
  store_close(st);
  if (rc) return die(EXIT_USAGE, "%s", err);
  render_line(stderr, DIE_MAX, "engine: cancellation of %s requested", pos[0]);
  return EXIT_OK;
}

/* ----------------------------------------------------------- list / show --- */

/* One workflow of a list, from its JSON (view_list_item_json, an item of
 * GET /v1/workflows): both modes print the same. */
static int print_list_item(void *ud, const char *item, size_t n) {
  common *c = ud;
  if (c->json) {
    put_json(stdout, util_fmt("%.*s", (int)n, item));
  } else {
    char *line = view_list_line(item, n);
    printf("%s\n", line);
    free(line);
  }
  return 0;
}

typedef struct list_ctx {
  common *c;
  store *st;
} list_ctx;

static int list_row(void *ud, const wf_row *w) {
  list_ctx *l = ud;
  char *item = view_list_item_json(l->st, w);
  print_list_item(l->c, item, strlen(item));
  free(item);
  return 0;
}

/* list with --server: every page of GET /v1/workflows. */
static int remote_list(common *c, const char *status) {
  api_client *api = server_client(c);
  if (!api) return EXIT_USAGE;
  char *cursor = NULL;
  int rc = EXIT_OK, first = 1;
  do {
    char *es = status ? api_client_escape(status) : NULL, *ec = cursor ? api_client_escape(cursor) : NULL;
    char *path = util_fmt("/v1/workflows?limit=1000%s%s%s%s", es ? "&status=" : "", es ? es : "",
                          ec ? "&cursor=" : "", ec ? ec : "");
    free(es);
    free(ec);
    free(cursor);
    cursor = NULL;
    api_reply r;
    rc = call_api(api, "GET", path, NULL, &r, NULL);
    free(path);
    if (rc) break;
    if (first && !c->json) printf("%-36s %-10s %4s  %-24s  %s\n", "ID", "STATUS", "RUN", "UPDATED", "SCRIPT");
    first = 0;
    const char *items;
    size_t n;
    if (json_get(r.body, r.len, "workflows", &items, &n) != 1 || json_each(items, n, print_list_item, c) != 0)
      rc = die(EXIT_USAGE, "the server at %s answered the list with something else than a list of workflows",
               api_client_url(api));
    else
      cursor = json_get_string(r.body, r.len, "next_cursor");
    api_reply_free(&r);
  } while (cursor && rc == EXIT_OK);
  free(cursor);
  fflush(stdout);
  api_client_free(api);
  return rc;
}

static const char *LIST_HELP =
    "usage: engine list [--status S] [--json] [--db PATH]\n"
    "\n"
    "Lists workflows (S: running, waiting, queued, completed, failed, cancelled, stuck).\n";

static int cmd_list(args *a, common *c) {
  const char *status = NULL;
  int bad = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = flag_value(a, "--db", &bad))) c->db = v;
    else if ((v = flag_value(a, "--status", &bad))) status = v;
    else if (is_flag(cur, "--json")) c->json = 1;
    else if (is_flag(cur, "--help") || is_flag(cur, "-h")) return fputs(LIST_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else return die(EXIT_USAGE, "list: unknown argument %s", cur);
  }
  static const char *known[] = {"running", "waiting", "queued", "completed", "failed", "cancelled", "stuck", NULL};
  if (status) {
    int ok = 0;
    for (const char **k = known; *k; k++) ok |= strcmp(*k, status) == 0;
    if (!ok) return die(EXIT_USAGE, "list: unknown status '%s'", status);
  }
  if (c->server) return remote_list(c, status);
  store *st;
  int rc = open_existing(c->db, &st);
  if (rc) return rc;
  if (!c->json) printf("%-36s %-10s %4s  %-24s  %s\n", "ID", "STATUS", "RUN", "UPDATED", "SCRIPT");
  list_ctx l = {c, st};
  if (store_wf_list(st, status, list_row, &l) != STORE_OK) return read_failed(st, "the workflows", c->db);
  store_close(st);
  return EXIT_OK;
}

/* A JSON value of `show` laid out for a terminal (view_fold). */
static char *fold_json(const char *json, size_t n, size_t col, void *ud) {
  ubuf b = {0};
  if (pretty_json(&b, json, n, col, ud) != 0) return ubuf_free(&b), NULL;
  ubuf_add(&b, "", 1);
  return b.p;
}

/* What a session's event stream says about it: its sandbox (latest sandbox.*
 * event) and the artifacts it saved (artifact.saved events, as a JSON list). */
static const char *SHOW_HELP =
    "usage: engine show ID [--json] [--color WHEN] [--db PATH]\n"
    "\n"
    "Shows a workflow: status, what it waits on, input, result or error, counts.\n"
    "On a terminal the input, result, sandbox and artifacts are indented JSON folded\n"
    "to its width (long strings cut, with the number of bytes left out); piped, each\n"
    "is one line. --json prints the summary as one JSON object.\n";

static int cmd_show(args *a, common *c) {
  const char *pos[1] = {NULL};
  int rc = parse_simple(a, c, SHOW_HELP, pos, 1, 1);
  if (rc || c->help) return rc;
  char *json = NULL;
  if (c->server) {
    api_client *api = server_client(c);
    char *path = api ? api_path("/v1/workflows/%s", pos[0], NULL) : NULL;
    api_reply r;
    rc = api ? call_api(api, "GET", path, NULL, &r, NULL) : EXIT_USAGE;
    free(path);
    api_client_free(api);
    if (rc) return rc;
    json = reply_json(&r);
    api_reply_free(&r);
  } else {
    store *st;
    if ((rc = open_existing(c->db, &st))) return rc;
    view_summary s;
    char err[700];
    int found = view_summary_load(st, pos[0], &s, err, sizeof err);
    store_close(st);
    if (found != 1) {
      if (found == 0) engine_unknown_id(pos[0], err, sizeof err);
      return die(EXIT_USAGE, "%s", err);
    }
    json = view_summary_json(&s); /* what the API answers: one printer for both */
    view_summary_free(&s);
  }
  if (c->json) {
    put_json(stdout, json);
    return EXIT_OK;
  }
  pretty_opts o = stdout_layout(c);
  char *text = human_stdout(c) ? view_summary_text_folded(json, strlen(json), fold_json, &o)
                               : view_summary_text(json, strlen(json));
  free(json);
  if (!text) return die(EXIT_USAGE, "the summary of %s is not a workflow's summary", pos[0]);
  fputs(text, stdout);
  free(text);
  return EXIT_OK;
}

/* -------------------------------------------------------------- history --- */

static const char *HISTORY_HELP =
    "usage: engine history ID [--run N] [--json] [--db PATH]\n"
    "\n"
    "Prints the engine's event log of a workflow run (default: the current run).\n";

/* One event of a history, from its JSON (view_hist_item_json, an item of
 * GET /v1/workflows/ID/history). */
static int print_hist_item(void *ud, const char *item, size_t n) {
  common *c = ud;
  if (c->json) {
    put_json(stdout, util_fmt("%.*s", (int)n, item));
  } else {
    char *line = view_hist_line(item, n);
    printf("%s\n", line);
    free(line);
  }
  return 0;
}

static int cmd_history(args *a, common *c) {
  const char *id = NULL;
  int64_t run = 0;
  int bad = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = flag_value(a, "--db", &bad))) c->db = v;
    else if ((v = flag_value(a, "--run", &bad))) run = atoll(v);
    else if (is_flag(cur, "--json")) c->json = 1;
    else if (is_flag(cur, "--help") || is_flag(cur, "-h")) return fputs(HISTORY_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return die(EXIT_USAGE, "history: unknown option %s", cur);
    else if (!id) id = cur;
    else return die(EXIT_USAGE, "history: unexpected argument %s", cur);
  }
  if (!id) return die(EXIT_USAGE, "history: missing ID (see engine history --help)");
  if (c->server) {
    api_client *api = server_client(c);
    if (!api) return EXIT_USAGE;
    char *base = api_path("/v1/workflows/%s/history", id, NULL), *path = util_fmt("%s?run=%lld", base,
                                                                                   (long long)(run > 0 ? run : 0));
    api_reply r;
    int rc = call_api(api, "GET", path, NULL, &r, NULL);
    free(base);
    free(path);
    const char *items;
    size_t n;
    if (rc == EXIT_OK) {
      if (json_get(r.body, r.len, "events", &items, &n) != 1 || json_each(items, n, print_hist_item, c) != 0)
        rc = die(EXIT_USAGE, "the server at %s answered with something else than a history", api_client_url(api));
      api_reply_free(&r);
    }
    api_client_free(api);
    return rc;
  }
  store *st;
  int rc = open_existing(c->db, &st);
  if (rc) return rc;
  wf_row w;
  if ((rc = find_workflow(st, id, &w)) != 1) return rc;
  hist_list h = {0};
  if (store_hist_load(st, id, run > 0 ? run : w.run, &h) != STORE_OK) { /* nothing printed: all or an error */
    hist_list_free(&h);
    wf_row_free(&w);
    return read_failed(st, "the history", id);
  }
  for (size_t i = 0; i < h.n; i++) {
    char *item = view_hist_item_json(&h.v[i]); /* what the API answers: one printer for both */
    print_hist_item(c, item, strlen(item));
    free(item);
  }
  hist_list_free(&h);
  wf_row_free(&w);
  store_close(st);
  return EXIT_OK;
}

/* --------------------------------------------------------------- events --- */

static const char *EVENTS_HELP =
    "usage: engine events ID [--follow] [--full] [--json] [--color WHEN] [--db PATH]\n"
    "\n"
    "Prints the workflow's domain events (what wf.emit recorded), one per line.\n"
    "On a terminal they read as a transcript: each event wrapped to the width,\n"
    "text with newlines on rows of its own, approvals marked (?? APPROVAL NEEDED,\n"
    "ok APPROVED by WHO, !! DENIED by WHO; in colour unless NO_COLOR is set), and\n"
    "an event taller than the screen (a long tool result) folded to its first\n"
    "rows and \"[... N bytes more: engine events ID --full]\".\n"
    "--full prints every event whole in that form, folded nowhere and cut nowhere\n"
    "(piped too, without wrapping; --json has every byte anyway). Piped without\n"
    "--full, the lines stay one per event, long fields cut, as scripts read them.\n"
    "--follow keeps printing new events until the workflow ends.\n"
    "--json prints one JSON object per line: session_id, seq, type, time, payload.\n"
    "With engine --server URL events ID --follow, the text a model writes as it\n"
    "streams (agent.delta, never recorded) shows too, on one line per model step\n"
    "starting with \"~ live (step N): \"; --json leaves it out, so its lines are the\n"
    "recorded events, the same as without --server. A dropped stream resumes where\n"
    "it stopped (Last-Event-ID); after 6 failed attempts (about 16 s) it exits 2.\n";

static void events_changed(void *ud) {
  follow *f = ud;
  wf_row w;
  int found = follow_flush(f) == STORE_OK ? store_wf_get(f->st, f->id, &w) : -1;
  if (found == 1) {
    if (engine_status_terminal(w.status)) {
      if (follow_flush(f) != STORE_OK) f->failed = 1;
      uv_stop(uv_default_loop());
    }
    wf_row_free(&w);
  } else if (found < 0) {
    f->failed = 1;
    uv_stop(uv_default_loop());
  }
}

typedef struct events_page {
  common *c;
  int n, bad;
  int64_t last;
  const view_layout *lay;
} events_page;

static int print_page_event(void *ud, const char *json, size_t n) {
  events_page *p = ud;
  view_event e;
  if (view_event_parse(json, n, &e) != 0) return p->bad = 1;
  if (p->c->json) print_event_json(stdout, &e.e);
  else print_event_human(stdout, &e.e, p->lay);
  p->last = e.e.seq;
  p->n++;
  view_event_free(&e);
  return 0;
}

/* events with --server: the pages of GET /v1/workflows/ID/events, or with
 * --follow its event stream, which begins with every event so far and ends
 * when the workflow does. */
static int remote_events(common *c, const char *id, int follow_mode, const view_layout *lay) {
  enum { PAGE = 1000 };
  api_client *api = server_client(c);
  if (!api) return EXIT_USAGE;
  char *base = api_path("/v1/workflows/%s/events", id, NULL);
  api_reply r;
  int rc = EXIT_OK;
  if (follow_mode) {
    remote_follow f = {stdout, c->json, 0, 0, 0, 0, 0, lay};
    api_stream o = {on_remote_frame, NULL, &f, NULL, 0};
    int streamed = api_client_stream(api, base, &o, &r);
    live_close(&f);
    if (streamed < 0) rc = die(EXIT_USAGE, "%s", r.message);
    else if (f.bad) rc = die(EXIT_USAGE, "the server at %s sent an event this client cannot read", api_client_url(api));
    api_reply_free(&r);
  } else {
    events_page p = {c, PAGE, 0, 0, lay};
    while (rc == EXIT_OK && p.n == PAGE) {
      char *path = util_fmt("%s?after=%lld&limit=%d", base, (long long)p.last, PAGE);
      rc = call_api(api, "GET", path, NULL, &r, NULL);
      free(path);
      if (rc) break;
      const char *items;
      size_t n;
      p.n = 0;
      if (json_get(r.body, r.len, "events", &items, &n) != 1 || json_each(items, n, print_page_event, &p) != 0)
        rc = die(EXIT_USAGE, "the server at %s answered with something else than events", api_client_url(api));
      api_reply_free(&r);
    }
  }
  fflush(stdout);
  free(base);
  api_client_free(api);
  return rc;
}

/* How events are laid out for people on stdout: a transcript on a terminal
 * (its width and height) or with --full (folded nowhere), else NULL: the
 * lines scripts read, byte for byte as they always were. more gets the
 * command a folded event names (freed by the caller). */
static const view_layout *events_layout(const common *c, view_layout *lay, const char *id, int full, char **more) {
  int cols, rows, tty = view_terminal_size(STDOUT_FILENO, &cols, &rows);
  *more = NULL;
  if (c->json || (!tty && !full)) return NULL;
  *more = util_fmt("engine events %s --full", id);
  *lay = (view_layout){tty ? cols : 0, tty ? rows : 0, full, color_on(c, STDOUT_FILENO), *more};
  return lay;
}

static int cmd_events(args *a, common *c) {
  const char *id = NULL;
  int rc0;
  int follow_mode = 0, full = 0, bad = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = flag_value(a, "--db", &bad))) c->db = v;
    else if (is_flag(cur, "--json")) c->json = 1;
    else if (is_flag(cur, "--follow") || is_flag(cur, "-f")) follow_mode = 1;
    else if (is_flag(cur, "--full")) full = 1;
    else if ((v = flag_value(a, "--color", &bad))) c->color = v;
    else if (is_flag(cur, "--help") || is_flag(cur, "-h")) return fputs(EVENTS_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return die(EXIT_USAGE, "events: unknown option %s", cur);
    else if (!id) id = cur;
    else return die(EXIT_USAGE, "events: unexpected argument %s", cur);
  }
  if (!id) return die(EXIT_USAGE, "events: missing ID (see engine events --help)");
  view_layout layout;
  char *more;
  if ((rc0 = check_color(c))) return rc0;
  const view_layout *lay = events_layout(c, &layout, id, full, &more);
  if (c->server) {
    int rc = remote_events(c, id, follow_mode, lay);
    free(more);
    return rc;
  }
  store *st;
  int rc = open_existing(c->db, &st);
  if (rc) return free(more), rc;
  wf_row w;
  if ((rc = find_workflow(st, id, &w)) != 1) return free(more), rc;
  int done = engine_status_terminal(w.status);
  wf_row_free(&w);
  follow f = {st, id, 0, c->json, stdout, 0, lay, NULL};
  if (follow_flush(&f) != STORE_OK) return free(more), read_failed(st, "the events", id);
  if (follow_mode && !done) {
    uv_loop_t *loop = uv_default_loop();
    dbwatch *dw = dbwatch_start(loop, st, events_changed, &f);
    events_changed(&f);
    uv_run(loop, UV_RUN_DEFAULT);
    dbwatch_stop(dw);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    if (f.failed) return free(more), read_failed(st, "the events", id);
  }
  free(more);
  store_close(st);
  return EXIT_OK;
}

/* --------------------------------------------------------------- replay --- */

static const char *REPLAY_HELP =
    "usage: engine replay ID [--script FILE] [--apply] [--db PATH]\n"
    "       engine replay --all --script FILE [--status S,...] [--json] [--db PATH]\n"
    "\n"
    "Replays the workflow's history against FILE (default: the code the run is\n"
    "pinned to) with no side effects, and reports whether it replays cleanly\n"
    "(exit 0) or where it diverges (exit 1). Use it to check an edit before rollout.\n"
    "--apply moves the run to FILE when it replays cleanly, and resumes a stuck run.\n"
    "--all checks FILE against every live run (running, waiting, queued, stuck; --status\n"
    "narrows it) started from the same script path, one line per run and a summary;\n"
    "exit 0 only when all replay. It never applies and never writes to the database.\n"
    "--json prints one object per run: {id, status, replays, report}.\n";

/* The path as the start recorded it: its directory resolved (script_dir) and
 * its file name. */
static char *script_abs(const char *dir, const char *path) {
  char *tmp = util_strdup(path), *abs = util_fmt("%s/%s", dir, basename(tmp));
  free(tmp);
  return abs;
}

/* The runs of one script, collected before any of them is replayed. */
typedef struct replay_pick {
  const char *script, *statuses; /* statuses: ",a,b," or NULL for every live one */
  char *abs, *real;              /* the script as start records it, and its realpath */
  char **ids, **status;
  size_t n, cap;
} replay_pick;

static int same_script(const replay_pick *p, const wf_row *w) {
  if (strcmp(w->script_name, p->script) == 0) return 1;
  char *abs = script_abs(w->script_dir, w->script_name), real[PATH_MAX];
  int same = strcmp(abs, p->abs) == 0 || (p->real && realpath(abs, real) && strcmp(real, p->real) == 0);
  free(abs);
  return same;
}

static int pick_run(void *ud, const wf_row *w) {
  replay_pick *p = ud;
  if (engine_status_terminal(w->status)) return 0;
  if (p->statuses) {
    char *needle = util_fmt(",%s,", w->status);
    int named = strstr(p->statuses, needle) != NULL;
    free(needle);
    if (!named) return 0;
  }
  if (!same_script(p, w)) return 0;
  if (p->n == p->cap) {
    p->cap = p->cap ? 2 * p->cap : 16;
    p->ids = util_xrealloc(p->ids, p->cap * sizeof *p->ids);
    p->status = util_xrealloc(p->status, p->cap * sizeof *p->status);
  }
  p->ids[p->n] = util_strdup(w->id);
  p->status[p->n++] = util_strdup(w->status);
  return 0;
}

/* "diverges: non-determinism at event #N: ..." as "diverges at event N: ...". */
static char *divergence_line(const char *report) {
  static const char pre[] = "diverges: non-determinism at event #";
  if (strncmp(report, pre, sizeof pre - 1) == 0) {
    char *end;
    long long ev = strtoll(report + sizeof pre - 1, &end, 10);
    if (end[0] == ':' && end[1] == ' ') return util_fmt("diverges at event %lld: %s", ev, end + 2);
  }
  return util_strdup(report);
}

/* `engine replay --all --script FILE`: reads only, on a query_only connection. */
static int replay_all(common *c, const char *script, const char *statuses) {
  static const char *live[] = {"running", "waiting", "queued", "stuck", NULL};
  char *among = NULL;
  if (statuses) {
    among = util_fmt(",%s,", statuses);
    char *list = util_strdup(statuses), *save = NULL;
    for (char *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
      int ok = 0;
      for (const char **k = live; *k; k++) ok |= strcmp(*k, s) == 0;
      if (!ok) {
        int rc = die(EXIT_USAGE, "replay: unknown status '%s' for --all (live runs are running, waiting, queued, stuck)", s);
        free(list);
        free(among);
        return rc;
      }
    }
    free(list);
  }
  char err[512];
  size_t len;
  char *src = engine_read_script(script, &len, err, sizeof err); /* a missing script is a usage error, once */
  if (!src) return free(among), die(EXIT_USAGE, "%s", err);
  free(src);
  if (engine_db_missing(c->db))
    return free(among), die(EXIT_USAGE, "no database at %s (start a workflow first, or pass --db)", c->db);
  const char *btm = getenv("ENGINE_BUSY_TIMEOUT_MS");
  store *st;
  if (store_open_readonly(c->db, btm ? atoi(btm) : 5000, &st, err, sizeof err) != STORE_OK)
    return free(among), die(EXIT_USAGE, "%s", err);
  replay_pick p = {script, among, NULL, NULL, NULL, NULL, 0, 0};
  char absdir[PATH_MAX], real[PATH_MAX], *tmp = util_strdup(script);
  if (!realpath(dirname(tmp), absdir)) snprintf(absdir, sizeof absdir, "."); /* as start records it */
  free(tmp);
  p.abs = script_abs(absdir, script);
  p.real = realpath(script, real) ? util_strdup(real) : NULL;
  int rc = EXIT_OK;
  if (store_wf_list(st, NULL, pick_run, &p) != STORE_OK) {
    rc = read_failed(st, "the workflows", c->db);
    st = NULL;
  }
  size_t ok = 0, diverged = 0, unchecked = 0;
  for (size_t i = 0; st && i < p.n; i++) {
    char report[2048];
    int r = engine_replay_check(st, p.ids[i], script, 0, report, sizeof report);
    if (r == 0) ok++;
    else if (r > 0) diverged++;
    else unchecked++;
    char *line = r == 0 ? util_strdup("replays") : r > 0 ? divergence_line(report) : util_fmt("cannot check: %s", report);
    if (c->json) {
      char *id = json_quote(p.ids[i]), *status = json_quote(p.status[i]), *rep = json_quote(report);
      put_json(stdout, util_fmt("{\"id\":%s,\"status\":%s,\"replays\":%s,\"report\":%s}", id, status,
                                r == 0 ? "true" : "false", rep));
      free(id), free(status), free(rep);
    } else {
      render_line(stdout, 0, "%s  %s", p.ids[i], line);
    }
    free(line);
  }
  if (st && !p.n) {
    if (c->json) render_line(stderr, 0, "engine: no live run uses %s", script);
    else render_line(stdout, 0, "no live run uses %s", script);
  } else if (st && !c->json) {
    printf("%zu run%s checked: %zu replay, %zu diverge", p.n, p.n == 1 ? "" : "s", ok, diverged);
    if (unchecked) printf(", %zu cannot be checked", unchecked);
    printf("\n");
  }
  if (st) {
    store_close(st);
    rc = unchecked ? EXIT_USAGE : diverged ? EXIT_FAILED : EXIT_OK;
  }
  for (size_t i = 0; i < p.n; i++) free(p.ids[i]), free(p.status[i]);
  free(p.ids), free(p.status), free(p.abs), free(p.real), free(among);
  return rc;
}

static int cmd_replay(args *a, common *c) {
  const char *id = NULL, *script = NULL, *statuses = NULL;
  int apply = 0, all = 0, bad = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = flag_value(a, "--db", &bad))) c->db = v;
    else if ((v = flag_value(a, "--script", &bad))) script = v;
    else if ((v = flag_value(a, "--status", &bad))) statuses = v;
    else if (is_flag(cur, "--apply")) apply = 1;
    else if (is_flag(cur, "--all")) all = 1;
    else if (is_flag(cur, "--json")) c->json = 1;
    else if (is_flag(cur, "--help") || is_flag(cur, "-h")) return fputs(REPLAY_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return die(EXIT_USAGE, "replay: unknown option %s", cur);
    else if (!id) id = cur;
    else return die(EXIT_USAGE, "replay: unexpected argument %s", cur);
  }
  if (all) {
    if (id) return die(EXIT_USAGE, "replay: --all checks every live run: give no ID with it");
    if (apply)
      return die(EXIT_USAGE, "replay: --all never applies: check with --all, then apply run by run with "
                             "engine replay ID --script FILE --apply");
    if (!script) return die(EXIT_USAGE, "replay: --all needs --script FILE (the edited script to check)");
    return replay_all(c, script, statuses);
  }
  if (statuses || c->json) return die(EXIT_USAGE, "replay: --status and --json go with --all");
  if (!id) return die(EXIT_USAGE, "replay: missing ID (see engine replay --help)");
  store *st;
  int rc = open_existing(c->db, &st);
  if (rc) return rc;
  char report[2048];
  rc = engine_replay_check(st, id, script, apply, report, sizeof report);
  store_close(st);
  if (rc < 0) return die(EXIT_USAGE, "%s", report);
  char *shown = render_str(report, RENDER_MULTILINE, 0); /* a divergence quotes the script's error */
  printf("%s\n", shown);
  free(shown);
  return rc == 0 ? EXIT_OK : EXIT_FAILED;
}

/* -------------------------------------------------------------- approve --- */

static const char *APPROVE_HELP =
    "usage: engine approve ID [--request RID] [--deny] [--reason TEXT] [--db PATH]\n"
    "\n"
    "Answers the approval request session ID waits on (delivered as the signal\n"
    "approval:RID) and says which one it answered. With --request RID it answers\n"
    "only that request: when another one is pending instead (RID timed out or was\n"
    "answered meanwhile) nothing is sent and it exits 2, as it does when nothing\n"
    "is pending, the request's deadline passed or it is answered already.\n"
    "When the session waits on several (a turn with several calls that need one),\n"
    "--request says which: without it nothing is sent and it names them.\n"
    "With --server the approver recorded is the token's identity (token:NAME).\n";

/* approve with --server: the request the session waits on (from its
 * summary's waits, unless --request names it), answered with POST
 * /v1/workflows/ID/approvals/RID; the server names the approver (its token's
 * identity). Refusals read as the local command's. */
static int remote_approve(common *c, const char *id, const char *request, int approved, const char *reason) {
  char err[1024];
  if (approval_check_reason(reason, err, sizeof err) != 0) return die(EXIT_USAGE, "approve: %s", err);
  api_client *api = server_client(c);
  if (!api) return EXIT_USAGE;
  char *rid = request ? util_strdup(request) : NULL, *path = NULL;
  api_reply r;
  int rc = EXIT_OK;
  if (!rid) {
    char *summary = api_path("/v1/workflows/%s", id, NULL);
    rc = call_api(api, "GET", summary, NULL, &r, "approve: ");
    free(summary);
    if (rc == EXIT_OK) {
      const char *w;
      size_t wn;
      char *status = json_get_string(r.body, r.len, "status"), *kind = NULL;
      if (json_get(r.body, r.len, "waits", &w, &wn) == 1 && (kind = json_get_string(w, wn, "kind")) &&
          strcmp(kind, "approval") == 0)
        rid = json_get_string(w, wn, "request_id");
      if (status && engine_status_terminal(status))
        rc = die(EXIT_USAGE, "approve: workflow '%s' is %s: no approval is pending", id, status);
      else if (!rid)
        rc = die(EXIT_USAGE, "approve: no approval is pending for %s", id);
      free(status);
      free(kind);
      api_reply_free(&r);
    }
  }
  if (rc == EXIT_OK) {
    char *qr = json_quote(reason), *body = util_fmt("{\"approved\":%s,\"reason\":%s}", approved ? "true" : "false", qr);
    path = api_path("/v1/workflows/%s/approvals/%s", id, rid);
    rc = call_api(api, "POST", path, body, &r, "approve: ");
    free(qr);
    free(body);
  }
  if (rc == EXIT_OK) {
    char *tool = json_get_string(r.body, r.len, "tool"), *kind = json_get_string(r.body, r.len, "kind"),
         *done = json_get_string(r.body, r.len, "request_id"), about[300] = "";
    if (tool && *tool) snprintf(about, sizeof about, " (tool %.200s)", tool);
    else if (kind && *kind) snprintf(about, sizeof about, " (%.200s)", kind);
    render_line(stderr, DIE_MAX, "engine: %s request %s%s of %s", approved ? "approved" : "denied", done ? done : rid,
                about, id);
    free(tool);
    free(kind);
    free(done);
    api_reply_free(&r);
  }
  free(rid);
  free(path);
  api_client_free(api);
  return rc;
}

static int cmd_approve(args *a, common *c) {
  const char *id = NULL, *request = NULL, *reason = "";
  int deny = 0, bad = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = flag_value(a, "--db", &bad))) c->db = v;
    else if ((v = flag_value(a, "--request", &bad))) request = v;
    else if ((v = flag_value(a, "--reason", &bad))) reason = v;
    else if (is_flag(cur, "--deny")) deny = 1;
    else if (is_flag(cur, "--help") || is_flag(cur, "-h")) return fputs(APPROVE_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return die(EXIT_USAGE, "approve: unknown option %s", cur);
    else if (!id) id = cur;
    else return die(EXIT_USAGE, "approve: unexpected argument %s", cur);
  }
  if (!id) return die(EXIT_USAGE, "approve: missing ID (see engine approve --help)");
  if (c->server) return remote_approve(c, id, request, !deny, reason);
  store *st;
  int rc = open_existing(c->db, &st);
  if (rc) return rc;
  char who[APPROVAL_APPROVER_MAX + 1];
  local_identity(who, sizeof who);
  approval_decision ans = {request, !deny, who, reason};
  approval_request done;
  char err[1024];
  rc = approval_answer(st, id, &ans, &done, err, sizeof err);
  store_close(st);
  if (rc) return die(EXIT_USAGE, "approve: %s", err);
  char about[200] = "";
  if (*done.tool) snprintf(about, sizeof about, " (tool %s)", done.tool);
  else if (*done.kind) snprintf(about, sizeof about, " (%s)", done.kind);
  render_line(stderr, DIE_MAX, "engine: %s request %s%s of %s", deny ? "denied" : "approved", done.request_id, about, id);
  return EXIT_OK;
}

/* --------------------------------------------------------------- policy --- */

static const char *POLICY_HELP =
    "usage: engine policy check [DIR]\n"
    "\n"
    "Loads the policy set (DIR, else $ENGINE_POLICIES_DIR, else policies/) the way\n"
    "sessions do and reports its hash and files, or the file and line of the first\n"
    "error (exit 2). A broken set is never used: sessions keep the last good one.\n";

static int cmd_policy(args *a, common *c) {
  const char *pos[2] = {NULL, NULL};
  int rc = parse_simple(a, c, POLICY_HELP, pos, 2, 1);
  if (rc || c->help) return rc;
  if (strcmp(pos[0], "check") != 0) return die(EXIT_USAGE, "policy: unknown subcommand '%s' (see --help)", pos[0]);
  char report[8192];
  char *q = json_quote(pos[1] ? pos[1] : ""), *args = util_fmt("{\"dir\":%s}", pos[1] ? q : "null");
  rc = engine_maintenance(NULL, "policy_check", args, report, sizeof report);
  free(q);
  free(args);
  char ok[8];
  if (rc || strcmp(view_json_field(report, "ok", ok, sizeof ok), "true") != 0)
    return die(EXIT_USAGE, "policy check: %s", report);
  put_json(stdout, util_strdup(report));
  return EXIT_OK;
}

/* -------------------------------------------------------------- trigger --- */

static const char *TRIGGER_HELP =
    "usage: engine trigger check [DIR]\n"
    "       engine trigger test NAME --body FILE [--headers FILE] [--dir DIR] [--no-verify]\n"
    "       engine trigger deliveries [NAME] [--limit N] [--json] [--db PATH]\n"
    "\n"
    "check: loads the trigger scripts (DIR, else $ENGINE_TRIGGERS_DIR, else\n"
    "  workflows/triggers) the way `engine serve --listen` does and lists their routes\n"
    "  (POST /hooks/NAME), verifiers and whether each secret is set; the file and line\n"
    "  of the first error exit 2.\n"
    "test: what a delivery of FILE's bytes (and the headers in --headers, one\n"
    "  \"Name: value\" per line) to /hooks/NAME would do, verified with the secret in\n"
    "  the environment unless --no-verify, without starting anything.\n"
    "deliveries: the newest deliveries (of NAME; \"*\" is every request to no trigger)\n"
    "  with their outcome: started, existing, duplicate, ignored or rejected.\n";

static int asks_help(const args *a);

static const char *default_triggers_dir(void) {
  const char *d = getenv("ENGINE_TRIGGERS_DIR");
  return d && *d ? d : "workflows/triggers";
}

/* "Name: value" lines as a JSON list of [name, value] pairs, or NULL with err. */
static char *header_pairs(const char *path, char *err, size_t errlen) {
  size_t len;
  char *text = util_read_file(path, &len);
  if (!text) {
    util_seterr(err, errlen, "--headers %s: %s", path, strerror(errno));
    return NULL;
  }
  ubuf b = {0};
  ubuf_add(&b, "[", 1);
  int n = 0, lineno = 0;
  for (char *line = text, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    lineno++;
    size_t l = strlen(line);
    if (l && line[l - 1] == '\r') line[--l] = 0;
    if (!l || strncmp(line, "HTTP/", 5) == 0 || strncmp(line, "POST ", 5) == 0) continue; /* a status or request line */
    char *colon = strchr(line, ':');
    if (!colon || colon == line) {
      util_seterr(err, errlen, "--headers %s:%d: not a \"Name: value\" line", path, lineno);
      free(text);
      ubuf_free(&b);
      return NULL;
    }
    *colon = 0;
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    char *qk = json_quote(line), *qv = json_quote(v), *pair = util_fmt("%s[%s,%s]", n++ ? "," : "", qk, qv);
    ubuf_add(&b, pair, strlen(pair));
    free(qk), free(qv), free(pair);
  }
  ubuf_add(&b, "]", 2);
  free(text);
  return b.p;
}

static int trigger_test(args *a, common *c) {
  const char *name = NULL, *body_file = NULL, *headers_file = NULL, *dir = default_triggers_dir();
  int bad = 0, verify = 1;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = flag_value(a, "--body", &bad))) body_file = v;
    else if ((v = flag_value(a, "--headers", &bad))) headers_file = v;
    else if ((v = flag_value(a, "--dir", &bad))) dir = v;
    else if (is_flag(cur, "--no-verify")) verify = 0;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1]) return die(EXIT_USAGE, "trigger test: unknown option %s (see --help)", cur);
    else if (!name) name = cur;
    else return die(EXIT_USAGE, "trigger test: unexpected argument %s", cur);
  }
  (void)c;
  if (!name || !body_file) return die(EXIT_USAGE, "trigger test: NAME and --body FILE are required (see --help)");
  char err[1024];
  size_t len;
  char *body = util_read_file(body_file, &len);
  if (!body) return die(EXIT_USAGE, "trigger test: --body %s: %s", body_file, strerror(errno));
  if (json_check_text(body, len, "the body", err, sizeof err) != 0) {
    free(body);
    return die(EXIT_USAGE, "trigger test: %s (a webhook body is UTF-8 text)", err);
  }
  char *pairs = headers_file ? header_pairs(headers_file, err, sizeof err) : util_strdup("[]");
  if (!pairs) {
    free(body);
    return die(EXIT_USAGE, "trigger test: %s", err);
  }
  char *qd = json_quote(dir), *qn = json_quote(name), *qb = json_quote(body);
  char *args_json = util_fmt("{\"dir\":%s,\"name\":%s,\"header_list\":%s,\"body\":%s,\"now\":%lld,\"verify\":%s}", qd,
                             qn, pairs, qb, (long long)(util_now_ms() / 1000), verify ? "true" : "false");
  free(qd), free(qn), free(qb), free(pairs), free(body);
  enum { REPORT_BIG = 4 << 20 };
  char *report = util_xmalloc(REPORT_BIG);
  int rc = engine_maintenance(NULL, "trigger_test", args_json, report, REPORT_BIG);
  free(args_json);
  if (rc) {
    int code = die(EXIT_USAGE, "trigger test: %s", report);
    free(report);
    return code;
  }
  char outcome[16];
  view_json_field(report, "outcome", outcome, sizeof outcome);
  put_json(stdout, util_strdup(report));
  free(report);
  return strcmp(outcome, "rejected") == 0 ? EXIT_USAGE : EXIT_OK;
}

typedef struct delivery_out {
  int json, n;
} delivery_out;

static int print_delivery(void *ud, const delivery_row *d) {
  delivery_out *o = ud;
  if (o->json) {
    char *j = view_delivery_json(d), *out = json_for_output(j, strlen(j));
    printf("%s%s", o->n ? "," : "", out);
    free(j);
    free(out);
  } else {
    char when[40];
    view_time(d->received_at, when, sizeof when);
    if (!o->n) printf("%-24s  %-12s %-38s %-9s %6s  %-30s %s\n", "RECEIVED", "TRIGGER", "DELIVERY", "OUTCOME", "STATUS", "WORKFLOW", "DETAIL");
    char line[2048];
    snprintf(line, sizeof line, "%-24s  %-12s %-38s %-9s %6d  %-30s %s", when, d->trigger, *d->delivery ? d->delivery : "-",
             d->outcome, d->status, d->wf_id ? d->wf_id : "-", d->detail ? d->detail : "");
    render_line(stdout, 0, "%s", line); /* the sender chose the delivery id and the text: shown inert */
  }
  o->n++;
  return 0;
}

static int trigger_deliveries(args *a, common *c) {
  const char *name = NULL;
  int bad = 0;
  int64_t limit = 50;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = flag_value(a, "--db", &bad))) c->db = v;
    else if (is_flag(cur, "--json")) c->json = 1;
    else if ((v = flag_value(a, "--limit", &bad))) {
      char *end;
      limit = strtoll(v, &end, 10);
      if (*end || limit < 1 || limit > 10000) return die(EXIT_USAGE, "trigger deliveries: --limit must be 1 to 10000");
    } else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1]) return die(EXIT_USAGE, "trigger deliveries: unknown option %s (see --help)", cur);
    else if (!name) name = cur;
    else return die(EXIT_USAGE, "trigger deliveries: unexpected argument %s", cur);
  }
  store *st;
  int rc;
  if ((rc = open_existing(c->db, &st))) return rc;
  delivery_out o = {c->json, 0};
  if (c->json) fputs("[", stdout);
  rc = store_delivery_list(st, name, (int)limit, print_delivery, &o);
  if (c->json) fputs("]\n", stdout);
  if (rc != STORE_OK) {
    int code = die(EXIT_USAGE, "trigger deliveries: %s", store_errmsg(st));
    store_close(st);
    return code;
  }
  store_close(st);
  if (!c->json && !o.n) fprintf(stderr, "no deliveries%s%s\n", name ? " for trigger " : "", name ? name : "");
  return EXIT_OK;
}

static int cmd_trigger(args *a, common *c) {
  if (a->i >= a->argc || asks_help(a)) {
    fputs(TRIGGER_HELP, a->i >= a->argc ? stderr : stdout);
    return a->i >= a->argc ? EXIT_USAGE : EXIT_OK;
  }
  const char *sub = a->argv[a->i++];
  if (strcmp(sub, "test") == 0) return trigger_test(a, c);
  if (strcmp(sub, "deliveries") == 0) return trigger_deliveries(a, c);
  if (strcmp(sub, "check") != 0) return die(EXIT_USAGE, "trigger: unknown subcommand '%s' (see --help)", sub);
  const char *pos[1] = {NULL};
  int rc = parse_simple(a, c, TRIGGER_HELP, pos, 1, 0);
  if (rc || c->help) return rc;
  char report[16384];
  char *q = json_quote(pos[0] ? pos[0] : default_triggers_dir()), *args_json = util_fmt("{\"dir\":%s}", q);
  rc = engine_maintenance(NULL, "trigger_check", args_json, report, sizeof report);
  free(q);
  free(args_json);
  char ok[8];
  if (rc || strcmp(view_json_field(report, "ok", ok, sizeof ok), "true") != 0)
    return die(EXIT_USAGE, "trigger check: %s", report);
  put_json(stdout, util_strdup(report));
  return EXIT_OK;
}

/* ------------------------------------------------------------------- gc --- */

static const char *GC_HELP =
    "usage: engine gc [--db PATH]\n"
    "\n"
    "Removes sandbox containers (running or not) of this database whose session has\n"
    "finished or is unknown to it, with their workspaces. `serve` and `start` do\n"
    "this at start-up too. Prints what it removed (JSON).\n";

static int cmd_gc(args *a, common *c) {
  const char *pos[1] = {NULL};
  int rc = parse_simple(a, c, GC_HELP, pos, 0, 0);
  if (rc || c->help) return rc;
  store *st;
  if ((rc = open_existing(c->db, &st))) return rc;
  char report[8192];
  rc = engine_maintenance(st, "gc", NULL, report, sizeof report);
  store_close(st);
  if (rc) return die(EXIT_USAGE, "gc: %s", report);
  put_json(stdout, util_strdup(report));
  return EXIT_OK;
}

/* ---------------------------------------------------------------- token --- */

static const char *TOKEN_HELP =
    "usage: engine token create NAME --scopes SCOPE[,SCOPE...] [--db PATH]\n"
    "       engine token list [--json] [--db PATH]\n"
    "       engine token revoke NAME [--db PATH]\n"
    "\n"
    "API tokens for the HTTP API of `engine serve --listen`. create prints the new\n"
    "token on stdout, once: the database keeps only its SHA-256, so it cannot be\n"
    "shown again. A request presents it as \"Authorization: Bearer TOKEN\" and acts\n"
    "as token:NAME. Scopes: read (every GET), start, signal, approve, cancel, admin\n"
    "(all of them). A NAME is 1-64 bytes of A-Z a-z 0-9 . _ @ -, starting with a\n"
    "letter or digit; the name of a revoked token can be given to a new one.\n"
    "list shows every token (name, scopes, created, live or revoked), never a secret.\n"
    "create creates the database if there is none; list and revoke need one.\n";

static int token_list_row(void *ud, const token_info *t) {
  common *c = ud;
  char scopes[128], ct[40], rt[40] = "";
  token_scopes_format(t->scopes, scopes, sizeof scopes);
  view_time(t->created_at, ct, sizeof ct);
  if (t->revoked_at) view_time(t->revoked_at, rt, sizeof rt);
  if (c->json) {
    ubuf list = {0};
    for (char *p = scopes, *next; p && *p; p = next) {
      next = strchr(p, ',');
      if (next) *next++ = 0;
      ubuf_add(&list, list.n ? ",\"" : "\"", list.n ? 2 : 1);
      ubuf_add(&list, p, strlen(p)); /* scope names are plain ASCII words */
      ubuf_add(&list, "\"", 1);
    }
    ubuf_add(&list, "", 1);
    char *name = json_quote(t->name), *revoked = t->revoked_at ? util_fmt("%lld", (long long)t->revoked_at) : NULL;
    put_json(stdout, util_fmt("{\"name\":%s,\"scopes\":[%s],\"created_at\":%lld,\"revoked_at\":%s,\"status\":\"%s\"}",
                              name, list.p, (long long)t->created_at, revoked ? revoked : "null",
                              t->revoked_at ? "revoked" : "live"));
    free(name);
    free(revoked);
    ubuf_free(&list);
  } else if (t->revoked_at) {
    render_line(stdout, 0, "%-24s %-40s %-24s revoked %s", t->name, scopes, ct, rt);
  } else {
    render_line(stdout, 0, "%-24s %-40s %-24s live", t->name, scopes, ct);
  }
  return 0;
}

/* list and revoke need a database (open_existing, with a hint for tokens). */
static int open_tokens_db(const char *db, store **st) {
  if (engine_db_missing(db))
    return die(EXIT_USAGE, "no database at %s (engine token create makes one, or pass --db)", db);
  return open_existing(db, st);
}

static int cmd_token(args *a, common *c) {
  const char *sub = a->i < a->argc ? a->argv[a->i++] : NULL, *name = NULL, *scopes_csv = NULL;
  if (!sub) return fputs(TOKEN_HELP, stderr), EXIT_USAGE;
  if (is_flag(sub, "--help") || is_flag(sub, "-h")) return fputs(TOKEN_HELP, stdout), EXIT_OK;
  int create = strcmp(sub, "create") == 0, list = strcmp(sub, "list") == 0, revoke = strcmp(sub, "revoke") == 0;
  if (!create && !list && !revoke)
    return die(EXIT_USAGE, "token: unknown subcommand '%s' (create, list or revoke; see engine token --help)", sub);
  int bad = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = flag_value(a, "--db", &bad))) c->db = v;
    else if (create && (v = flag_value(a, "--scopes", &bad))) scopes_csv = v;
    else if (list && is_flag(cur, "--json")) c->json = 1;
    else if (is_flag(cur, "--help") || is_flag(cur, "-h")) return fputs(TOKEN_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1])
      return die(EXIT_USAGE, "token %s: unknown option %s (see engine token --help)", sub, cur);
    else if (!list && !name) name = cur;
    else return die(EXIT_USAGE, "token %s: unexpected argument %s", sub, cur);
  }
  if (bad) return EXIT_USAGE;
  char err[1024];
  store *st;
  int rc;
  if (list) {
    if ((rc = open_tokens_db(c->db, &st))) return rc;
    if (!c->json) printf("%-24s %-40s %-24s %s\n", "NAME", "SCOPES", "CREATED", "STATUS");
    if (token_list(st, token_list_row, c) != 0) return read_failed(st, "the tokens", c->db);
    store_close(st);
    return EXIT_OK;
  }
  if (!name) return die(EXIT_USAGE, "token %s: missing NAME (see engine token --help)", sub);
  /* everything is checked before the database is touched (or created) */
  if (token_check_name(name, err, sizeof err) != 0) return die(EXIT_USAGE, "%s", err);
  if (revoke) {
    if ((rc = open_tokens_db(c->db, &st))) return rc;
    rc = token_revoke(st, name, err, sizeof err);
    store_close(st);
    if (rc < 0) return die(EXIT_USAGE, "token revoke: %s", err);
    if (rc == 0) return die(EXIT_USAGE, "token revoke: no live token named %s (see engine token list)", name);
    render_line(stderr, DIE_MAX, "engine: token %s revoked; requests with it are refused from now on", name);
    return EXIT_OK;
  }
  unsigned scopes;
  if (!scopes_csv)
    return die(EXIT_USAGE, "token create: --scopes is required (a comma-separated list of read, start, signal, "
                           "approve, cancel, admin)");
  if (token_scopes_parse(scopes_csv, &scopes, err, sizeof err) != 0) return die(EXIT_USAGE, "token create: %s", err);
  if (unwritable(c->db, err, sizeof err)) return die(EXIT_USAGE, "token create: cannot write %s: %s", c->db, err);
  if (store_open(c->db, 0, &st, err, sizeof err) != STORE_OK) return die(EXIT_USAGE, "%s", err);
  char secret[TOKEN_SECRET_MAX], shown[128];
  rc = token_create(st, name, scopes, secret, err, sizeof err);
  store_close(st);
  if (rc) return die(EXIT_USAGE, "token create: %s", err);
  printf("%s\n", secret); /* the token's alphabet is plain ASCII: nothing to render */
  fflush(stdout);
  memset(secret, 0, sizeof secret);
  token_scopes_format(scopes, shown, sizeof shown);
  render_line(stderr, DIE_MAX,
              "engine: created token %s (scopes %s); it is not shown again: keep it now. Requests with it act as "
              "token:%s",
              name, shown, name);
  return EXIT_OK;
}

/* ------------------------------------------------------------- schedule --- */

static const char *SCHEDULE_HELP =
    "usage: engine schedule create NAME --cron EXPR [--tz ZONE] --workflow FILE\n"
    "                              [--input JSON] [--overlap POLICY]\n"
    "                              [--catchup-window DUR] [--jitter DUR] [--db PATH]\n"
    "       engine schedule list [--json] [--db PATH]\n"
    "       engine schedule pause|resume|trigger|delete NAME [--db PATH]\n"
    "\n"
    "Starts workflow FILE whenever cron expression EXPR fires in time zone ZONE (an\n"
    "IANA name, default UTC), while `engine serve` runs. EXPR has five fields\n"
    "(minute hour day-of-month month day-of-week) or six with a leading second;\n"
    "@daily and the like work too. Each fire starts the workflow with id\n"
    "sched:NAME:FIRETIME (20261201T090000Z, the fire's UTC time), so a fire never\n"
    "starts twice, also across a crash.\n"
    "\n"
    "--overlap says what a fire does while the schedule's previous workflow still\n"
    "runs: skip (the default; counted in SKIPPED), buffer_one (starts when the\n"
    "previous one ends; at most one waits), allow_all, cancel_other (cancels the\n"
    "running one and starts). --catchup-window (default 1m): fires missed while no\n"
    "engine served, or while one waited, run when at most this late; older ones are\n"
    "skipped and counted. --jitter delays each fire by a fixed offset below DUR,\n"
    "the same on every restart. DUR: 30s, 5m, 2h, 1d.\n"
    "\n"
    "pause stops the fires; resume starts again from now (fires while paused are\n"
    "not caught up); trigger starts the workflow now as sched:NAME:manual-TIME\n"
    "whatever the overlap policy; delete removes the schedule (its workflows stay).\n";

/* ms as 2026-12-01T09:00:00Z, or "-" for 0. */
static void iso_utc(int64_t ms, char *out, size_t n) {
  if (!ms) {
    snprintf(out, n, "-");
    return;
  }
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int schedule_list_row(void *ud, const schedule_row *r) {
  common *c = ud;
  char next[40], last[40];
  iso_utc(r->next_fire_at ? schedule_fire_at(r->name, r->next_fire_at, r->jitter_ms) : 0, next, sizeof next);
  iso_utc(r->last_fire_at, last, sizeof last);
  if (c->json) {
    put_json(stdout, schedule_json(r));
  } else {
    render_line(stdout, 0, "%-20s %-18s %-16s %-12s %-7s %-21s %-21s %7lld %s", r->name, r->cron, r->tz, r->overlap,
                r->paused ? "paused" : "active", r->paused ? "-" : next, last, (long long)r->skipped_count,
                r->script);
  }
  return 0;
}

static int cmd_schedule(args *a, common *c) {
  const char *sub = a->i < a->argc ? a->argv[a->i++] : NULL, *name = NULL;
  if (!sub) return fputs(SCHEDULE_HELP, stderr), EXIT_USAGE;
  if (is_flag(sub, "--help") || is_flag(sub, "-h")) return fputs(SCHEDULE_HELP, stdout), EXIT_OK;
  static const char *const subs[] = {"create", "list", "pause", "resume", "trigger", "delete", NULL};
  int known = 0;
  for (const char *const *k = subs; *k; k++) known |= strcmp(*k, sub) == 0;
  if (!known)
    return die(EXIT_USAGE, "schedule: unknown subcommand '%s' (create, list, pause, resume, trigger or delete; see "
                           "engine schedule --help)", sub);
  int create = strcmp(sub, "create") == 0, list = strcmp(sub, "list") == 0, bad = 0;
  schedule_spec sp = {.tz = "UTC", .overlap = "skip", .catchup_window_ms = SCHEDULE_DEFAULT_CATCHUP_MS};
  const char *input_spec = "{}", *catchup = NULL, *jitter = NULL;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = flag_value(a, "--db", &bad))) c->db = v;
    else if (create && (v = flag_value(a, "--cron", &bad))) sp.cron = v;
    else if (create && (v = flag_value(a, "--tz", &bad))) sp.tz = v;
    else if (create && (v = flag_value(a, "--workflow", &bad))) sp.script = v;
    else if (create && (v = flag_value(a, "--input", &bad))) input_spec = v;
    else if (create && (v = flag_value(a, "--overlap", &bad))) sp.overlap = v;
    else if (create && (v = flag_value(a, "--catchup-window", &bad))) catchup = v;
    else if (create && (v = flag_value(a, "--jitter", &bad))) jitter = v;
    else if (list && is_flag(cur, "--json")) c->json = 1;
    else if (is_flag(cur, "--help") || is_flag(cur, "-h")) return fputs(SCHEDULE_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1])
      return die(EXIT_USAGE, "schedule %s: unknown option %s (see engine schedule --help)", sub, cur);
    else if (!list && !name) name = cur;
    else return die(EXIT_USAGE, "schedule %s: unexpected argument %s", sub, cur);
  }
  if (bad) return EXIT_USAGE;
  char err[1024], shown[1024];
  store *st;
  int rc;
  if (list) {
    if (engine_db_missing(c->db))
      return die(EXIT_USAGE, "no database at %s (engine schedule create makes one, or pass --db)", c->db);
    if ((rc = open_existing(c->db, &st))) return rc;
    if (!c->json)
      printf("%-20s %-18s %-16s %-12s %-7s %-21s %-21s %7s %s\n", "NAME", "CRON", "TZ", "OVERLAP", "STATE",
             "NEXT (UTC)", "LAST (UTC)", "SKIPPED", "WORKFLOW");
    if (store_schedule_list(st, schedule_list_row, c) != 0) return read_failed(st, "the schedules", c->db);
    store_close(st);
    return EXIT_OK;
  }
  if (!name) return die(EXIT_USAGE, "schedule %s: missing NAME (see engine schedule --help)", sub);
  if (schedule_check_name(name, err, sizeof err) != 0) return die(EXIT_USAGE, "%s", err);
  int64_t now = util_now_ms();
  if (create) {
    sp.name = name;
    if (!sp.cron) return die(EXIT_USAGE, "schedule create: --cron EXPR is required (see engine schedule --help)");
    if (!sp.script) return die(EXIT_USAGE, "schedule create: --workflow FILE is required");
    if (catchup && schedule_parse_duration(catchup, &sp.catchup_window_ms, err, sizeof err) != 0)
      return die(EXIT_USAGE, "--catchup-window: %s", err);
    if (jitter && schedule_parse_duration(jitter, &sp.jitter_ms, err, sizeof err) != 0)
      return die(EXIT_USAGE, "--jitter: %s", err);
    char *input = NULL;
    if ((rc = read_input(input_spec, &input))) return rc;
    sp.input = input;
    if (schedule_check(&sp, now, err, sizeof err) != 0) { /* before the database is touched (or created) */
      free(input);
      return die(EXIT_USAGE, "schedule create: %s", err);
    }
    if (unwritable(c->db, err, sizeof err)) {
      free(input);
      return die(EXIT_USAGE, "schedule create: cannot write %s: %s", engine_db_shown(c->db, shown, sizeof shown), err);
    }
    if (store_open(c->db, 0, &st, err, sizeof err) != STORE_OK) {
      free(input);
      return die(EXIT_USAGE, "%s", err);
    }
    rc = schedule_create(st, &sp, now, err, sizeof err);
    free(input);
    store_close(st);
    if (rc) return die(EXIT_USAGE, "schedule create: %s", err);
    render_line(stderr, DIE_MAX, "engine: schedule %s created; engine serve starts its fires", name);
    return EXIT_OK;
  }
  if ((rc = open_existing(c->db, &st))) return rc;
  char id[ENGINE_ID_MAX + 1] = "", who[300];
  if (strcmp(sub, "pause") == 0 || strcmp(sub, "resume") == 0) {
    rc = schedule_set_paused(st, name, strcmp(sub, "pause") == 0, now, err, sizeof err);
  } else if (strcmp(sub, "trigger") == 0) {
    local_identity(who, sizeof who);
    rc = schedule_trigger(st, name, who, now, id, sizeof id, err, sizeof err);
  } else {
    rc = schedule_delete(st, name, err, sizeof err);
  }
  store_close(st);
  if (rc) return die(EXIT_USAGE, "schedule %s: %s", sub, err);
  if (*id) render_line(stdout, 0, "%s", id);
  else render_line(stderr, DIE_MAX, "engine: schedule %s: %s", name,
                   strcmp(sub, "pause") == 0 ? "paused" : strcmp(sub, "resume") == 0 ? "resumed" : "deleted");
  return EXIT_OK;
}

/* ---------------------------------------------------------------- quota --- */

static const char *QUOTA_HELP =
    "usage: engine quota list [--json] [--db PATH]\n"
    "\n"
    "Shows the quotas of the engine's limits file ($ENGINE_LIMITS, else limits.lua\n"
    "beside the database) and what each identity used: identity, quota, period (the\n"
    "UTC day or month), used and limit, one row per counter the sessions kept\n"
    "(earlier periods too) and one for each identity the file names that has used\n"
    "nothing this period. --json prints one object per row: {identity, quota,\n"
    "period, used, limit} (no limit when the file sets none). A session over a\n"
    "quota ends with limit.exceeded.\n";

typedef struct counters {
  ubuf b;
  int n;
} counters;

static int add_counter(void *ud, const counter_row *r) {
  counters *l = ud;
  char *name = json_quote(r->name), num[40];
  snprintf(num, sizeof num, "%.17g", r->value);
  char *item = util_fmt("%s{\"name\":%s,\"value\":%s}", l->n++ ? "," : "", name, num);
  ubuf_add(&l->b, item, strlen(item));
  free(item);
  free(name);
  return 0;
}

static int print_quota_json(void *ud, const char *v, size_t n) {
  (void)ud;
  put_json(stdout, util_fmt("%.*s", (int)n, v));
  return 0;
}

static int print_quota_line(void *ud, const char *v, size_t n) {
  (void)ud;
  char *line = json_string(v, n);
  if (line) render_line(stdout, 0, "%s", line);
  free(line);
  return 0;
}

/* The counters come from the store (prefix total:quota:); the limits and the
 * table from the worker's quota_list hook (lua/activities/worker.lua), which
 * reads the limits file as sessions do. */
static int cmd_quota(args *a, common *c) {
  const char *pos[1] = {NULL};
  int rc = parse_simple(a, c, QUOTA_HELP, pos, 1, 1);
  if (rc || c->help) return rc;
  if (strcmp(pos[0], "list") != 0) return die(EXIT_USAGE, "quota: unknown subcommand '%s' (list; see --help)", pos[0]);
  store *st;
  if ((rc = open_existing(c->db, &st))) return rc;
  counters l = {{0}, 0};
  ubuf_add(&l.b, "{\"counters\":[", 13);
  if (store_counter_list(st, "total:quota:", add_counter, &l) != STORE_OK) {
    ubuf_free(&l.b);
    return read_failed(st, "the quota counters", c->db);
  }
  ubuf_add(&l.b, "]}", 3); /* with the NUL */
  enum { REPORT_MAX = 8 << 20 };
  char *report = util_xmalloc(REPORT_MAX);
  rc = engine_maintenance(st, "quota_list", l.b.p, report, REPORT_MAX);
  store_close(st);
  ubuf_free(&l.b);
  const char *v;
  size_t vn, n = strlen(report);
  if (rc == 0 && n + 1 >= REPORT_MAX) { /* cut short: never print part of the list */
    util_seterr(report, REPORT_MAX, "the list is longer than %d bytes", REPORT_MAX);
    rc = -1;
  }
  if (rc) {
    rc = die(EXIT_USAGE, "quota list: %s", report);
    free(report);
    return rc;
  }
  char *warning = json_get_string(report, n, "warning");
  if (warning) render_line(stderr, 0, "engine: quota list: %s", warning);
  free(warning);
  if (c->json) {
    if (json_get(report, n, "rows", &v, &vn) == 1 && *v == '[') json_each(v, vn, print_quota_json, NULL);
  } else if (json_get(report, n, "lines", &v, &vn) == 1 && *v == '[') {
    json_each(v, vn, print_quota_line, NULL);
  }
  free(report);
  return EXIT_OK;
}

/* -------------------------------------------------------------- migrate --- */

static const char *MIGRATE_HELP =
    "usage: engine migrate [--db PATH|URL]\n"
    "       engine migrate --from PATH|URL --to PATH|URL\n"
    "\n"
    "The first form brings the database's schema up to this engine's version (what\n"
    "every command does when it opens one) and prints the version; a database of a\n"
    "newer engine is refused, naming both versions.\n"
    "The second copies a whole database to another, SQLite to PostgreSQL or back:\n"
    "every workflow with its history, code, tasks, timers, buffered signals, domain\n"
    "events, tokens, slots, counters, deliveries, schedules and the engine's own\n"
    "values (its instance id too: sandboxes stay their sessions'). The target must\n"
    "be empty (it is created when missing); no worker may run on either; the copy is\n"
    "one transaction of the target, so a failure leaves it as it was. Afterwards\n"
    "both are read back and every table's row count and SHA-256 compared; a table\n"
    "a line. Serve the target from then on; the source is left as it was.\n";

static int cmd_migrate(args *a, common *c) {
  const char *from = NULL, *to = NULL;
  int bad = 0, db_given = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = flag_value(a, "--db", &bad))) c->db = v, db_given = 1;
    else if ((v = flag_value(a, "--from", &bad))) from = v;
    else if ((v = flag_value(a, "--to", &bad))) to = v;
    else if (is_flag(cur, "--help") || is_flag(cur, "-h")) return fputs(MIGRATE_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1]) return die(EXIT_USAGE, "migrate: unknown option %s (see engine migrate --help)", cur);
    else return die(EXIT_USAGE, "migrate: unexpected argument %s", cur);
  }
  if (bad) return EXIT_USAGE;
  char err[1024] = "";
  if (from || to) {
    if (!from || !to) return die(EXIT_USAGE, "migrate: --from and --to go together (see engine migrate --help)");
    if (db_given) return die(EXIT_USAGE, "migrate: --db is for the first form; the copy takes --from and --to");
    if (migrate_copy(from, to, stdout, err, sizeof err) != 0) return die(EXIT_USAGE, "migrate: %s", err);
    return EXIT_OK;
  }
  if (migrate_schema(c->db, stdout, err, sizeof err) != 0) return die(EXIT_USAGE, "migrate: %s", err);
  return EXIT_OK;
}

/* ----------------------------------------------------------------- main --- */

static const char *MAIN_HELP =
    "engine: durable workflows for long-running agent sessions\n"
    "\n"
    "usage: engine [--server URL] [--token TOKEN] [--color WHEN] COMMAND [options]   (engine COMMAND --help)\n"
    "\n"
    "  start FILE.lua [--input JSON|@file] [--id ID] [--detach]   run until done or waiting\n"
    "  serve [--listen ADDR] [--workflows DIR]   worker for every workflow; --listen: the HTTP API\n"
    "  signal ID NAME [JSON]              send a signal\n"
    "  approve ID [--request RID] [--deny] [--reason TEXT]   answer an approval request\n"
    "  message ID TEXT, interrupt ID, close ID   talk to a running session\n"
    "  cancel ID                          cancel (the script's cleanup runs)\n"
    "  list [--status S]                  list workflows\n"
    "  show ID                            one workflow\n"
    "  events ID [--follow] [--full] [--json]   its domain events\n"
    "  history ID                         its event log\n"
    "  replay ID [--script FILE]          check that code replays a run's history\n"
    "  replay --all --script FILE         check an edited script against every live run of it\n"
    "  test FILE_test.lua...              workflow tests: stubbed activities, a clock that skips timers\n"
    "  gc                                 remove sandboxes of finished or unknown sessions\n"
    "  policy check [DIR]                 validate a policy set\n"
    "  trigger check|test|deliveries      webhook trigger scripts: validate, try a delivery, see deliveries\n"
    "  token create|list|revoke           API tokens for the HTTP API\n"
    "  quota list                         quotas of the limits file: use and limits\n"
    "  schedule create|list|pause|resume|trigger|delete   cron schedules that engine serve starts\n"
    "  migrate [--from DB --to DB]        schema up to date; or copy a database (SQLite <-> PostgreSQL)\n"
    "  completion bash|zsh                a shell completion script: source <(engine completion bash)\n"
    "\n"
    "Database: --db PATH, else $ENGINE_DB, else ./engine.db; a postgres:// URL is a PostgreSQL\n"
    "  database (its limits.lua and workspaces are in $ENGINE_DATA_DIR, else ./engine-data)\n"
    "Server: --server URL (else $ENGINE_SERVER; http:// or https://) before the command sends start,\n"
    "  list, show, events, history, signal, approve and cancel to `engine serve --listen` there\n"
    "  instead of opening a database, with the same output and exit codes; the token is\n"
    "  --token TOKEN, else $ENGINE_TOKEN (sent as Authorization: Bearer, never printed)\n"
    "Output: on a terminal, start and show print for people; piped, or with --json, what\n"
    "  scripts read. --color auto|always|never (before or after the command): auto colours\n"
    "  a terminal's output unless NO_COLOR is set (not empty) or TERM is dumb\n"
    "Exit codes: 0 success, 1 workflow failed, 2 usage or input error, 3 waiting or stuck\n";

/* Whether the arguments after the command ask for its help. */
static int asks_help(const args *a) {
  for (int i = a->i; i < a->argc; i++)
    if (is_flag(a->argv[i], "--help") || is_flag(a->argv[i], "-h")) return 1;
  return 0;
}

int cli_main(int argc, char **argv) {
  const char *server = getenv("ENGINE_SERVER"), *token = getenv("ENGINE_TOKEN");
  common c = {default_db(), 0, 0, NULL, server && *server ? server : NULL, token, server && *server, NULL};
  c.db_default = c.db;
  /* the options before the command: where the command goes */
  args a = {argc, argv, 1};
  for (; a.i < argc; a.i++) {
    int bad = 0;
    const char *v;
    if ((v = flag_value(&a, "--server", &bad))) {
      c.server = v;
      c.server_from_env = 0;
    } else if ((v = flag_value(&a, "--token", &bad))) {
      c.token = v;
    } else if ((v = flag_value(&a, "--color", &bad))) {
      c.color = v;
    } else if (bad) {
      return EXIT_USAGE;
    } else {
      break;
    }
  }
  if (a.i >= argc || is_flag(argv[a.i], "--help") || is_flag(argv[a.i], "-h") || is_flag(argv[a.i], "help")) {
    fputs(MAIN_HELP, a.i >= argc ? stderr : stdout);
    return a.i >= argc ? EXIT_USAGE : EXIT_OK;
  }
  const char *cmd = argv[a.i++];
  if (strcmp(cmd, "completion") == 0) return completion_script(argc - a.i, argv + a.i);
  if (strcmp(cmd, "__complete") == 0) return completion_query(argc - a.i, argv + a.i); /* for the scripts */
  if (strcmp(cmd, "test") == 0) return wftest_main(argc - a.i, argv + a.i); /* no database, no server */
  char err[256];
  if (json_max_payload_check(err, sizeof err) != 0) return die(EXIT_USAGE, "%s", err);
  if (check_color(&c)) return EXIT_USAGE;
  if (c.server && !asks_help(&a)) {
    static const char *local_only[] = {"serve", "replay", "gc", "policy", "trigger", "token", "quota", "schedule",
                                         "migrate", NULL};
    for (const char **k = local_only; *k; k++)
      if (strcmp(cmd, *k) == 0)
        return die(EXIT_USAGE, "%s does not work with --server (yet)%s", cmd,
                   c.server_from_env ? "; ENGINE_SERVER is set: unset it to run it on this machine" : "");
  }
  if (strcmp(cmd, "start") == 0) return cmd_start(&a, &c);
  if (strcmp(cmd, "serve") == 0) return cmd_serve(&a, &c);
  if (strcmp(cmd, "signal") == 0) return cmd_signal(&a, &c);
  if (strcmp(cmd, "cancel") == 0) return cmd_cancel(&a, &c);
  if (strcmp(cmd, "message") == 0 || strcmp(cmd, "interrupt") == 0 || strcmp(cmd, "close") == 0)
    return cmd_session_input(&a, &c, cmd);
  if (strcmp(cmd, "list") == 0) return cmd_list(&a, &c);
  if (strcmp(cmd, "show") == 0) return cmd_show(&a, &c);
  if (strcmp(cmd, "events") == 0) return cmd_events(&a, &c);
  if (strcmp(cmd, "history") == 0) return cmd_history(&a, &c);
  if (strcmp(cmd, "replay") == 0) return cmd_replay(&a, &c);
  if (strcmp(cmd, "gc") == 0) return cmd_gc(&a, &c);
  if (strcmp(cmd, "approve") == 0) return cmd_approve(&a, &c);
  if (strcmp(cmd, "policy") == 0) return cmd_policy(&a, &c);
  if (strcmp(cmd, "trigger") == 0) return cmd_trigger(&a, &c);
  if (strcmp(cmd, "token") == 0) return cmd_token(&a, &c);
  if (strcmp(cmd, "quota") == 0) return cmd_quota(&a, &c);
  if (strcmp(cmd, "schedule") == 0) return cmd_schedule(&a, &c);
  if (strcmp(cmd, "migrate") == 0) return cmd_migrate(&a, &c);
  return die(EXIT_USAGE, "unknown command '%s' (see engine --help)", cmd);
}
