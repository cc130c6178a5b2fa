/* client_http: client_ops.h through the HTTP API of a running `engine serve
 * --listen` (api_client.c), as the identity of the token it sends. The
 * answers are the JSON the local implementation builds (session_view.c
 * renders both), so the commands print the same from either. A failed
 * request gives the server's message as it is (refused: its 400, 404 or
 * 409) or why no answer came. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "api_client.h"
#include "client_ops.h"
#include "json.h"
#include "util.h"

typedef struct http_client {
  client base;
  api_client *api;
} http_client;

enum { PAGE = 1000 }; /* the items a page of a list or of events asks for */

static int say(client_err *err, int refused, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(client_err *err, int refused, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  err->refused = refused;
  return -1;
}

/* path with each %s an escaped segment: util_fmt for URLs. */
static char *api_path(const char *fmt, const char *a, const char *b) {
  char *ea = api_client_escape(a), *eb = b ? api_client_escape(b) : NULL;
  char *out = b ? util_fmt(fmt, ea, eb) : util_fmt(fmt, ea);
  free(ea);
  free(eb);
  return out;
}

/* One request with more headers (NULL: none): 0 with *r (api_reply_free
 * it), or -1 with err. */
static int call_h(http_client *h, const char *method, const char *path, const char *body, const char *const *headers,
                  api_reply *r, client_err *err) {
  if (api_client_call_h(h->api, method, path, body, headers, r) == 0) return 0;
  say(err, r->status == 400 || r->status == 404 || r->status == 409, "%s", r->message);
  api_reply_free(r);
  return -1;
}

static int call(http_client *h, const char *method, const char *path, const char *body, api_reply *r,
                client_err *err) {
  return call_h(h, method, path, body, NULL, r, err);
}

/* The same, for a request whose answer is not read. */
static int post(http_client *h, const char *path, const char *body, client_err *err) {
  api_reply r;
  if (call(h, "POST", path, body, &r, err) != 0) return -1;
  api_reply_free(&r);
  return 0;
}

/* Each item of the list member key of an answer, or -1 with err saying the
 * answer was not what was asked (what). */
static int each_item(http_client *h, const api_reply *r, const char *key, int (*fn)(void *, const char *, size_t),
                     void *ud, const char *what, client_err *err) {
  const char *items;
  size_t n;
  if (json_get(r->body, r->len, key, &items, &n) != 1 || json_each(items, n, fn, ud) != 0)
    return say(err, 0, "the server at %s answered %s", api_client_url(h->api), what);
  return 0;
}

/* ---------------------------------------------------------------- start --- */

/* The name of the process that runs workflows for the server: "engine serve
 * (pid N)", as its lock file says it to a local start. */
static void server_holder(http_client *h, char *out, size_t n) {
  api_reply r;
  int64_t pid = api_client_call(h->api, "GET", "/healthz", NULL, &r) == 0 ? json_get_int(r.body, r.len, "pid", 0) : 0;
  api_reply_free(&r);
  if (pid > 0) snprintf(out, n, "engine serve (pid %lld)", (long long)pid);
  else snprintf(out, n, "the server at %s", api_client_url(h->api));
}

/* POST /v1/workflows: the server checks the script in its own directory and
 * records its token's identity as who started it, and the caller's trace
 * from the traceparent and tracestate headers. */
static int http_start(client *cl, const client_start_req *req, client_started *out, client_err *err) {
  http_client *h = (http_client *)cl;
  memset(out, 0, sizeof *out);
  char *qs = json_quote(req->script), *qi = req->id ? json_quote(req->id) : NULL;
  char *body = qi ? util_fmt("{\"script\":%s,\"id\":%s,\"input\":%s}", qs, qi, req->input)
                  : util_fmt("{\"script\":%s,\"input\":%s}", qs, req->input);
  free(qs);
  free(qi);
  char tp[TRACEPARENT_LEN + 16] = "", ts[TRACESTATE_MAX + 16] = "";
  const char *headers[3] = {NULL, NULL, NULL};
  if (req->trace && req->trace->traceparent[0]) {
    snprintf(tp, sizeof tp, "traceparent: %s", req->trace->traceparent);
    headers[0] = tp;
    if (req->trace->tracestate[0]) {
      snprintf(ts, sizeof ts, "tracestate: %s", req->trace->tracestate);
      headers[1] = ts;
    }
  }
  api_reply r;
  int rc = call_h(h, "POST", "/v1/workflows", body, headers, &r, err);
  free(body);
  if (rc) return -1;
  out->id = json_get_string(r.body, r.len, "id");
  out->existed = r.status == 200;
  api_reply_free(&r);
  if (!out->id) return say(err, 0, "the server at %s answered the start without the workflow's id", api_client_url(h->api));
  if (!req->detach && !req->quiet) server_holder(h, out->runner, sizeof out->runner);
  return 0;
}

/* ----------------------------------------------------------------- fork --- */

static void add_member(ubuf *b, const char *key, const char *json) {
  char *part = util_fmt("%s\"%s\":%s", b->n > 1 ? "," : "", key, json);
  ubuf_add(b, part, strlen(part));
  free(part);
}

static int http_fork(client *cl, const client_fork_req *req, client_started *out, fork_made *made, client_err *err) {
  http_client *h = (http_client *)cl;
  const fork_req *q = req->fork;
  memset(out, 0, sizeof *out);
  memset(made, 0, sizeof *made);
  if (q->policies)
    return say(err, 0, "fork: --policies names a directory on the engine's host: run engine fork there, "
               "without --server");
  if (q->script)
    return say(err, 0, "fork: with --server, --script names a script of the server's workflows directory: "
               "not supported yet; run engine fork on the engine's host");
  ubuf b = {0};
  ubuf_add(&b, "{", 1);
  char num[32];
  if (q->at_given) snprintf(num, sizeof num, "%lld", (long long)q->at), add_member(&b, "at", num);
  if (q->turn_given) snprintf(num, sizeof num, "%lld", (long long)q->turn), add_member(&b, "turn", num);
  if (q->id) {
    char *qi = json_quote(q->id);
    add_member(&b, "id", qi);
    free(qi);
  }
  if (q->input_patch) add_member(&b, "input_patch", q->input_patch);
  if (q->model) add_member(&b, "model", q->model);
  ubuf_add(&b, "}", 2);
  char *enc = api_client_escape(q->source), *path = util_fmt("/v1/workflows/%s/fork", enc);
  free(enc);
  api_reply r;
  int rc = call(h, "POST", path, b.p, &r, err);
  free(path);
  ubuf_free(&b);
  if (rc) return -1;
  out->id = json_get_string(r.body, r.len, "id");
  out->existed = r.status == 200;
  const char *v;
  size_t vn;
  if (json_get(r.body, r.len, "forked_from", &v, &vn) == 1 && vn && *v == '{') {
    made->run = json_get_int(v, vn, "run", 0);
    made->seq = json_get_int(v, vn, "seq", 0);
    made->at = json_get_int(v, vn, "at", 0);
    made->asked = json_get_int(v, vn, "asked", 0);
  }
  api_reply_free(&r);
  if (!out->id) return say(err, 0, "the server at %s answered the fork without the workflow's id", api_client_url(h->api));
  snprintf(made->id, sizeof made->id, "%s", out->id);
  if (!req->detach && !req->quiet) server_holder(h, out->runner, sizeof out->runner);
  return 0;
}

/* --------------------------------------------------------------- follow --- */

/* An event stream of the API: each recorded event once, in order, and the
 * text a model streams (agent.delta: never recorded). A foreground start
 * checks now and then whether the run got stuck: the stream ends only when
 * the workflow does. */
typedef struct stream {
  const client_sink *sink;
  int64_t last; /* the seq given last */
  int bad;      /* a frame that is not an event: the stream stops, the follow fails */
  http_client *h;
  const char *summary; /* a start's: GET it every 3 s for its status; NULL: no check */
  int ticks;
} stream;

static int on_frame(void *ud, const sse_event *ev) {
  stream *f = ud;
  if (strcmp(ev->type, "end") == 0) return 1;
  if (strcmp(ev->type, "agent.delta") == 0) {
    if (f->sink->live) f->sink->live(f->sink->ud, ev->data, ev->len);
    return 0;
  }
  if (strcmp(ev->type, "message") != 0 || !f->sink->event) return 0; /* a kind of frame this client does not know */
  view_event e;
  if (view_event_parse(ev->data, ev->len, &e) != 0) {
    f->bad = 1; /* never skip one silently: what is printed would have a hole */
    return 1;
  }
  if (e.e.seq > f->last) { /* a resumed stream never repeats one, but say it once anyway */
    f->sink->event(f->sink->ud, &e.e);
    f->last = e.e.seq;
  }
  view_event_free(&e);
  return 0;
}

static int stuck_yet(void *ud) {
  stream *f = ud;
  if (++f->ticks % 3) return 0; /* every 3 s */
  api_reply r;
  int stuck = 0;
  if (api_client_call(f->h->api, "GET", f->summary, NULL, &r) == 0) {
    char *status = json_get_string(r.body, r.len, "status");
    stuck = status && strcmp(status, "stuck") == 0;
    free(status);
  }
  api_reply_free(&r);
  return stuck;
}

static int http_follow(client *cl, const char *id, enum client_follow_mode mode, const client_sink *sink,
                       int *took_over, client_err *err) {
  http_client *h = (http_client *)cl;
  if (took_over) *took_over = 0; /* the server's worker runs it */
  char *summary = api_path("/v1/workflows/%s", id, NULL), *events = util_fmt("%s/events", summary);
  int start = mode == CLIENT_FOLLOW_START;
  stream f = {sink, 0, 0, h, start ? summary : NULL, 0};
  api_stream o = {on_frame, start ? stuck_yet : NULL, &f, NULL, 0};
  api_reply r;
  int rc = 0;
  if (api_client_stream(h->api, events, &o, &r) < 0) rc = say(err, 0, "%s", r.message);
  else if (f.bad) rc = say(err, 0, "the server at %s sent an event this client cannot read", api_client_url(h->api));
  api_reply_free(&r);
  free(summary);
  free(events);
  return rc;
}

/* --------------------------------------------------------------- writes --- */

static int http_signal(client *cl, const char *id, const char *name, const char *payload, client_err *err) {
  char *path = api_path("/v1/workflows/%s/signals/%s", id, name);
  int rc = post((http_client *)cl, path, payload, err);
  free(path);
  return rc;
}

static int http_session_input(client *cl, const char *id, const char *kind, const char *text, client_err *err) {
  char *path = api_path("/v1/workflows/%s/messages", id, NULL);
  char *qk = json_quote(kind), *qt = json_quote(text ? text : "");
  char *body = util_fmt("{\"kind\":%s,\"text\":%s}", qk, qt);
  int rc = post((http_client *)cl, path, body, err);
  free(qk);
  free(qt);
  free(body);
  free(path);
  return rc;
}

static int http_cancel(client *cl, const char *id, client_err *err) {
  char *path = api_path("/v1/workflows/%s/cancel", id, NULL);
  int rc = post((http_client *)cl, path, "", err);
  free(path);
  return rc;
}

/* ---------------------------------------------------------------- reads --- */

/* GET /v1/workflows, a page of it. */
static int http_list(client *cl, const char *status, const char *cursor, client_item_fn each, void *ud, char **next,
                     client_err *err) {
  http_client *h = (http_client *)cl;
  *next = NULL;
  char *es = status ? api_client_escape(status) : NULL, *ec = cursor ? api_client_escape(cursor) : NULL;
  char *path = util_fmt("/v1/workflows?limit=%d%s%s%s%s", PAGE, es ? "&status=" : "", es ? es : "",
                        ec ? "&cursor=" : "", ec ? ec : "");
  free(es);
  free(ec);
  api_reply r;
  int rc = call(h, "GET", path, NULL, &r, err);
  free(path);
  if (rc) return -1;
  rc = each_item(h, &r, "workflows", each, ud, "the list with something else than a list of workflows", err);
  if (rc == 0) *next = json_get_string(r.body, r.len, "next_cursor");
  api_reply_free(&r);
  return rc;
}

static int http_summary(client *cl, const char *id, char **json, client_err *err) {
  http_client *h = (http_client *)cl;
  *json = NULL;
  char *path = api_path("/v1/workflows/%s", id, NULL);
  api_reply r;
  int rc = call(h, "GET", path, NULL, &r, err);
  free(path);
  if (rc) return -1;
  size_t n = r.len; /* without the newline the server ends it with */
  while (n > 0 && (r.body[n - 1] == '\n' || r.body[n - 1] == '\r' || r.body[n - 1] == ' ')) n--;
  *json = util_fmt("%.*s", (int)n, r.body);
  api_reply_free(&r);
  return 0;
}

static int http_audit(client *cl, const char *id, char **out, size_t *len, client_err *err) {
  http_client *h = (http_client *)cl;
  *out = NULL;
  char *path = api_path("/v1/workflows/%s/audit", id, NULL);
  api_reply r;
  int rc = call(h, "GET", path, NULL, &r, err);
  free(path);
  if (rc) return -1;
  *out = util_xmalloc(r.len + 1);
  memcpy(*out, r.body, r.len);
  (*out)[r.len] = 0;
  *len = r.len;
  api_reply_free(&r);
  return 0;
}

static int http_memory_list(client *cl, const char *kind, const char *identity, client_item_fn each, void *ud,
                            client_err *err) {
  http_client *h = (http_client *)cl;
  char *ek = kind ? api_client_escape(kind) : NULL, *ei = identity ? api_client_escape(identity) : NULL;
  char *path = util_fmt("/v1/memory%s%s%s%s", ek ? "?kind=" : "", ek ? ek : "", ei ? (ek ? "&identity=" : "?identity=") : "",
                        ei ? ei : "");
  free(ek);
  free(ei);
  api_reply r;
  int rc = call(h, "GET", path, NULL, &r, err);
  free(path);
  if (rc) return -1;
  rc = each_item(h, &r, "memory", each, ud, "with something else than a list of memory entries", err);
  api_reply_free(&r);
  return rc;
}

/* The answer's body as a string, without the newline the server ends it with. */
static char *body_text(const api_reply *r) {
  size_t n = r->len;
  while (n > 0 && (r->body[n - 1] == '\n' || r->body[n - 1] == '\r' || r->body[n - 1] == ' ')) n--;
  return util_fmt("%.*s", (int)n, r->body);
}

static int http_memory_show(client *cl, const char *id, char **json, client_err *err) {
  http_client *h = (http_client *)cl;
  *json = NULL;
  char *path = api_path("/v1/memory/%s", id, NULL);
  api_reply r;
  int rc = call(h, "GET", path, NULL, &r, err);
  free(path);
  if (rc) return -1;
  *json = body_text(&r);
  api_reply_free(&r);
  return 0;
}

static int http_memory_revoke(client *cl, const char *id, const char *reason, char **json, client_err *err) {
  http_client *h = (http_client *)cl;
  *json = NULL;
  char *path = api_path("/v1/memory/%s/revoke", id, NULL);
  char *q = reason ? json_quote(reason) : NULL;
  char *body = q ? util_fmt("{\"reason\":%s}", q) : util_strdup("{}");
  free(q);
  api_reply r;
  int rc = call(h, "POST", path, body, &r, err);
  free(path);
  free(body);
  if (rc) return -1;
  *json = body_text(&r);
  api_reply_free(&r);
  return 0;
}

static int http_history(client *cl, const char *id, int64_t run, client_item_fn each, void *ud, client_err *err) {
  http_client *h = (http_client *)cl;
  char *base = api_path("/v1/workflows/%s/history", id, NULL);
  char *path = util_fmt("%s?run=%lld", base, (long long)(run > 0 ? run : 0));
  api_reply r;
  int rc = call(h, "GET", path, NULL, &r, err);
  free(base);
  free(path);
  if (rc) return -1;
  rc = each_item(h, &r, "events", each, ud, "with something else than a history", err);
  api_reply_free(&r);
  return rc;
}

typedef struct events_page {
  void (*each)(void *ud, const domain_event *e);
  void *ud;
  int n;
} events_page;

static int page_event(void *ud, const char *json, size_t n) {
  events_page *p = ud;
  view_event e;
  if (view_event_parse(json, n, &e) != 0) return 1;
  p->each(p->ud, &e.e);
  p->n++;
  view_event_free(&e);
  return 0;
}

/* GET /v1/workflows/ID/events, a page of it. */
static int http_events(client *cl, const char *id, int64_t after, void (*each)(void *ud, const domain_event *e),
                       void *ud, int *more, client_err *err) {
  http_client *h = (http_client *)cl;
  *more = 0;
  char *base = api_path("/v1/workflows/%s/events", id, NULL);
  char *path = util_fmt("%s?after=%lld&limit=%d", base, (long long)after, PAGE);
  api_reply r;
  int rc = call(h, "GET", path, NULL, &r, err);
  free(base);
  free(path);
  if (rc) return -1;
  events_page p = {each, ud, 0};
  rc = each_item(h, &r, "events", page_event, &p, "with something else than events", err);
  api_reply_free(&r);
  *more = rc == 0 && p.n == PAGE;
  return rc;
}

/* ------------------------------------------------------------ approvals --- */

/* An approval request as the API says it: an item of GET /v1/approvals, or
 * the waits of a summary ({kind: "approval", request_id, tool, about, ...}). */
static void request_of(const char *json, size_t n, const char *kind_key, approval_request *r) {
  memset(r, 0, sizeof *r);
  char *rid = json_get_string(json, n, "request_id"), *tool = json_get_string(json, n, "tool"),
       *kind = json_get_string(json, n, kind_key);
  snprintf(r->request_id, sizeof r->request_id, "%s", rid ? rid : "");
  snprintf(r->tool, sizeof r->tool, "%s", tool ? tool : "");
  snprintf(r->kind, sizeof r->kind, "%s", kind ? kind : "");
  r->deadline = json_get_int(json, n, "deadline", -1);
  r->since = json_get_int(json, n, "since", 0);
  free(rid);
  free(tool);
  free(kind);
}

typedef struct pending_of {
  const char *id;
  int (*each)(void *ud, const approval_request *r);
  void *ud;
  int n, stop;
} pending_of;

static int pending_item(void *ud, const char *json, size_t n) {
  pending_of *p = ud;
  char *session = json_get_string(json, n, "session_id");
  int mine = session && strcmp(session, p->id) == 0;
  free(session);
  if (!mine || p->stop) return 0;
  approval_request r;
  request_of(json, n, "kind", &r);
  p->n++;
  p->stop = p->each(p->ud, &r) != 0;
  return 0;
}

static int http_approver(client *cl, client_err *err) {
  (void)cl;
  (void)err;
  return 0; /* the server's: its token's identity */
}

/* The status from the workflow's summary; the requests from GET /v1/approvals
 * (every request of every waiting workflow, oldest first), else, when the
 * workflow is not listed there (it runs an activity beside its wait), the one
 * its summary's waits names. */
static int http_pending(client *cl, const char *id, char *status, int (*each)(void *ud, const approval_request *r),
                        void *ud, client_err *err) {
  http_client *h = (http_client *)cl;
  *status = 0;
  char *path = api_path("/v1/workflows/%s", id, NULL);
  api_reply s;
  int rc = call(h, "GET", path, NULL, &s, err);
  free(path);
  if (rc) return -1;
  char *st = json_get_string(s.body, s.len, "status");
  snprintf(status, 32, "%s", st ? st : "");
  pending_of p = {id, each, ud, 0, 0};
  if (st && strcmp(st, "waiting") == 0) {
    api_reply r;
    rc = call(h, "GET", "/v1/approvals", NULL, &r, err);
    if (rc == 0) {
      rc = each_item(h, &r, "approvals", pending_item, &p, "with something else than approval requests", err);
      api_reply_free(&r);
    }
  }
  const char *w;
  size_t wn;
  char *kind = NULL;
  if (rc == 0 && p.n == 0 && st && !engine_status_terminal(st) && json_get(s.body, s.len, "waits", &w, &wn) == 1 &&
      (kind = json_get_string(w, wn, "kind")) && strcmp(kind, "approval") == 0) {
    approval_request r;
    request_of(w, wn, "about", &r);
    if (*r.request_id) each(ud, &r);
  }
  free(kind);
  free(st);
  api_reply_free(&s);
  return rc;
}

/* POST /v1/workflows/ID/approvals/RID: the server names the approver (its
 * token's identity) and checks that the request is still pending. */
static int http_answer(client *cl, const char *id, const char *request_id, int approved, const char *reason,
                       approval_request *done, client_err *err) {
  http_client *h = (http_client *)cl;
  char *qr = json_quote(reason ? reason : ""),
       *body = util_fmt("{\"approved\":%s,\"reason\":%s}", approved ? "true" : "false", qr);
  char *path = api_path("/v1/workflows/%s/approvals/%s", id, request_id);
  api_reply r;
  int rc = call(h, "POST", path, body, &r, err);
  free(qr);
  free(body);
  free(path);
  if (rc) return -1;
  request_of(r.body, r.len, "kind", done);
  if (!*done->request_id) snprintf(done->request_id, sizeof done->request_id, "%s", request_id);
  api_reply_free(&r);
  return 0;
}

static void http_close(client *cl) {
  http_client *h = (http_client *)cl;
  api_client_free(h->api);
  free(h);
}

static const client_ops HTTP = {
    .start = http_start,
    .fork = http_fork,
    .follow = http_follow,
    .run_here = NULL, /* the server's worker runs what it starts */
    .signal = http_signal,
    .session_input = http_session_input,
    .cancel = http_cancel,
    .list = http_list,
    .summary = http_summary,
    .audit = http_audit,
    .memory_list = http_memory_list,
    .memory_show = http_memory_show,
    .memory_revoke = http_memory_revoke,
    .history = http_history,
    .events = http_events,
    .approver = http_approver,
    .pending = http_pending,
    .answer = http_answer,
    .close = http_close,
};

client *client_http_new(const char *url, const char *token, char *err, size_t errlen) {
  api_client *api = api_client_new(url, token, err, errlen);
  if (!api) return NULL;
  http_client *h = util_xmalloc(sizeof *h);
  *h = (http_client){{&HTTP}, api};
  return &h->base;
}
