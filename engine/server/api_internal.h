/* api_internal.h: what the files of the HTTP API share, and only them (api.h
 * is the interface for everyone else). From the bottom:
 *
 *   api_reply.c      how a route answers: JSON, errors, a write answered once
 *                    it is committed
 *   api_request.c    what a route reads: path and query parameters, the JSON
 *                    body, the script a start names, the workflow it is about
 *   api_auth.c       who asks and what they may do: tokens, scopes, the
 *                    loopback rule; GET /v1/whoami
 *   api_workflows.c  /v1/workflows: start, list, show, history, signals,
 *                    messages, cancel, fork, artifacts
 *   api_events.c     event pages and streams (SSE) of a workflow and of all
 *   api_approvals.c  /v1/approvals and the answer to an approval request
 *   api_memory.c     /v1/memory: list, show and revoke memory entries
 *   api_schedules.c  /v1/schedules
 *   api_webhooks.c   POST /hooks/{name} and the deliveries of a trigger
 *   api_metrics.c    GET /metrics
 *   api_scripts.c    /v1/workflow-scripts: the scripts a start may name,
 *                    their descriptions and declared input schemas
 *   api.c            the router (the table of routes), the worker's
 *                    callbacks, the server's life (the public API) */
#ifndef ENGINE_API_INTERNAL_H
#define ENGINE_API_INTERNAL_H

#include <limits.h>
#include <lua.h>
#include <stdint.h>

#include "api.h"
#include "api_stream.h"
#include "httpd.h"
#include "metrics.h"
#include "schedules.h"
#include "session_view.h"
#include "store.h"
#include "tokens.h"
#include "trace_start.h"
#include "util.h"

struct api {
  engine *e;
  store *rd; /* read-only: sees only what is committed */
  token_cache *tokens; /* the live tokens, read at most a second ago (PostgreSQL's); NULL: read each time */
  httpd *http;
  lua_State *L; /* decodes request bodies */
  metrics *m;
  char *workflows_dir;
  char *triggers_dir; /* where /hooks/NAME finds its trigger script (lua/triggers.lua) */
  char url[100];
  int loopback;
  streams *streams; /* the event streams (api_stream.c) */
  schedules *schedules; /* serve's, poked after a schedule write */
  char web_dir[PATH_MAX]; /* the web page's files (web_static.c) */
};

/* A request being routed: who asks (api_auth.c) and the path's parameters. */
typedef struct ctx {
  char identity[TOKEN_NAME_MAX + 16];
  unsigned scopes;
  char p1[512], p2[512]; /* the path's parameters, percent-decoded */
} ctx;

/* Pending approvals being listed (api_approvals.c) or counted (api_metrics.c). */
typedef struct approvals_ctx {
  api *a;
  ubuf b;
  int n, failed;
} approvals_ctx;

/* A JSON list being built from a store scan: items joined by commas. */
typedef struct json_items {
  ubuf b;
  int n;
} json_items;

/* What each file gives the others; each is described where it is defined.
 * A route's handler is api_h_NAME (the table in api.c). */

/* --------------------------------------------------------- api_reply.c --- */

void api_reply_json(httpd_req *r, int status, char *json, const char *const *headers);
void api_reply_error(httpd_req *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void api_reply_error_h(httpd_req *r, int status, const char *const *headers, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void api_reply_store_error(api *a, httpd_req *r, store *st);
/* A read that failed with rc: a damaged log (STORE_ECORRUPT) is 500 naming it, else as api_reply_store_error. */
void api_reply_read_error(api *a, httpd_req *r, store *st, int rc);
void api_answer_when_committed(api *a, httpd_req *r, int status, char *body, const char *id, const char *location);
int api_store_down(api *a, httpd_req *r);
void api_items_add(json_items *x, char *json);
void api_reply_items(api *a, httpd_req *r, const char *key, json_items *x, int rc);

/* ------------------------------------------------------- api_request.c --- */

int api_pct_decode(const char *s, size_t len, char *out, size_t n);
int api_query(httpd_req *r, const char *name, char *out, size_t n);
int api_query_int(httpd_req *r, const char *name, int64_t dflt, int64_t max, int64_t *out);
int api_body_object(api *a, httpd_req *r, const char *const *allowed);
char *api_field_json(api *a, const char *key);
int api_field_bool(api *a, const char *key);
int api_field_string(api *a, const char *key, char *out, size_t n);
int api_script_path(api *a, const char *script, char *path, size_t n, char *msg, size_t msgn);
int api_resolve_script(api *a, httpd_req *r, const char *script, char *path, size_t n);
int api_find_for_write(api *a, httpd_req *r, const char *id, wf_row *w);
int api_find_for_read(api *a, httpd_req *r, const char *id, wf_row *w);
int api_load_summary(api *a, httpd_req *r, const char *id, view_summary *s);
/* The caller's traceparent and tracestate headers into *out: 1 when they
 * are kept, 0 with *out empty when there is no traceparent or it is invalid
 * (said at debug level, and otherwise ignored, as the W3C spec asks). */
int api_trace_context(httpd_req *r, trace_start *out);

/* ---------------------------------------------------------- api_auth.c --- */

int api_authenticate(api *a, httpd_req *r, ctx *c);
const char *api_scope_name(unsigned scope);
void api_h_whoami(api *a, httpd_req *r, ctx *c);

/* ----------------------------------------------------- api_workflows.c --- */

void api_h_start(api *a, httpd_req *r, ctx *c);
void api_h_list(api *a, httpd_req *r, ctx *c);
void api_h_show(api *a, httpd_req *r, ctx *c);
void api_h_history(api *a, httpd_req *r, ctx *c);
void api_h_signal(api *a, httpd_req *r, ctx *c);
void api_h_message(api *a, httpd_req *r, ctx *c);
void api_h_cancel(api *a, httpd_req *r, ctx *c);
void api_h_fork(api *a, httpd_req *r, ctx *c);
void api_h_artifacts(api *a, httpd_req *r, ctx *c);
void api_h_artifact(api *a, httpd_req *r, ctx *c);
void api_h_audit(api *a, httpd_req *r, ctx *c);

/* -------------------------------------------------------- api_events.c --- */

void api_h_events(api *a, httpd_req *r, ctx *c);
void api_h_all_events(api *a, httpd_req *r, ctx *c);

/* ----------------------------------------------------- api_approvals.c --- */

void api_h_approvals(api *a, httpd_req *r, ctx *c);
void api_h_approve(api *a, httpd_req *r, ctx *c);

/* -------------------------------------------------------- api_memory.c --- */

void api_h_memory_list(api *a, httpd_req *r, ctx *c);
void api_h_memory_show(api *a, httpd_req *r, ctx *c);
void api_h_memory_revoke(api *a, httpd_req *r, ctx *c);

/* ----------------------------------------------------- api_schedules.c --- */

void api_h_schedules(api *a, httpd_req *r, ctx *c);
void api_h_schedule(api *a, httpd_req *r, ctx *c);
void api_h_schedule_create(api *a, httpd_req *r, ctx *c);
void api_h_schedule_pause(api *a, httpd_req *r, ctx *c);
void api_h_schedule_resume(api *a, httpd_req *r, ctx *c);
void api_h_schedule_trigger(api *a, httpd_req *r, ctx *c);
void api_h_schedule_delete(api *a, httpd_req *r, ctx *c);

/* ------------------------------------------------------ api_webhooks.c --- */

void api_h_hook(api *a, httpd_req *r, ctx *c);
void api_h_deliveries(api *a, httpd_req *r, ctx *c);

/* ------------------------------------------------------- api_scripts.c --- */

void api_h_scripts(api *a, httpd_req *r, ctx *c);
void api_h_script(api *a, httpd_req *r, ctx *c);

/* ------------------------------------------------------- api_metrics.c --- */

void api_declare_metrics(metrics *m);
void api_h_metrics(api *a, httpd_req *r, ctx *c);

#endif
