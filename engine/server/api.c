/* api: the routes of the HTTP API (see api.h), their authentication, the
 * acknowledgement of writes after the group commit, the live event streams
 * and /metrics.
 *
 * Every answer is JSON (errors {"error":{"status":N,"message":...}}), every
 * JSON text goes out through json_for_output. What a route does is the same
 * operation the CLI performs (client.c, approval.c, session_view.c); only
 * where the identity comes from differs: the token, never the body.
 *
 * The routes are in files by resource (api_internal.h lists them); this one
 * has the table that routes a request to them, the worker's callbacks and
 * the server's life. */
#include "api.h"

#include <errno.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_internal.h"
#include "web_static.h"

extern const unsigned char api_openapi_json[];
extern const unsigned long api_openapi_json_len;

/* ------------------------------------------------------------ routes --- */

static void h_health(api *a, httpd_req *r, ctx *c) {
  (void)c;
  int64_t v = store_data_version(a->rd);
  if (v < 0) return api_reply_store_error(a, r, a->rd);
  api_reply_json(r, 200, util_fmt("{\"ok\":true,\"pid\":%d}", (int)getpid()), NULL);
}

static void h_openapi(api *a, httpd_req *r, ctx *c) {
  (void)a;
  (void)c;
  char *body = util_xmalloc(api_openapi_json_len + 1);
  memcpy(body, api_openapi_json, api_openapi_json_len + 1);
  httpd_respond(r, 200, "application/json", body, api_openapi_json_len, NULL);
}

/* The web page (web_static.c): its files need no token. */
static void h_web_index(api *a, httpd_req *r, ctx *c) {
  (void)c;
  web_static_serve(r, a->web_dir, "index.html");
}

static void h_web_file(api *a, httpd_req *r, ctx *c) { web_static_serve(r, a->web_dir, c->p1); }

/* ------------------------------------------------------------ router --- */

typedef struct route {
  const char *method, *pattern;
  unsigned scope; /* 0: no token needed */
  void (*fn)(api *, httpd_req *, ctx *);
} route;

static const route ROUTES[] = {
    {"GET", "/", 0, h_web_index},
    {"GET", "/web/{name}", 0, h_web_file},
    {"GET", "/healthz", 0, h_health},
    {"GET", "/metrics", SCOPE_READ, api_h_metrics},
    {"GET", "/v1/openapi.json", 0, h_openapi},
    {"POST", "/v1/workflows", SCOPE_START, api_h_start},
    {"GET", "/v1/workflow-scripts", SCOPE_READ, api_h_scripts},
    {"GET", "/v1/workflow-scripts/{name}", SCOPE_READ, api_h_script},
    {"GET", "/v1/workflows", SCOPE_READ, api_h_list},
    {"GET", "/v1/workflows/{id}", SCOPE_READ, api_h_show},
    {"GET", "/v1/workflows/{id}/events", SCOPE_READ, api_h_events},
    {"GET", "/v1/workflows/{id}/history", SCOPE_READ, api_h_history},
    {"GET", "/v1/workflows/{id}/audit", SCOPE_READ, api_h_audit},
    {"POST", "/v1/workflows/{id}/signals/{name}", SCOPE_SIGNAL, api_h_signal},
    {"POST", "/v1/workflows/{id}/cancel", SCOPE_CANCEL, api_h_cancel},
    {"POST", "/v1/workflows/{id}/fork", SCOPE_START, api_h_fork},
    {"POST", "/v1/workflows/{id}/messages", SCOPE_SIGNAL, api_h_message},
    {"GET", "/v1/approvals", SCOPE_READ, api_h_approvals},
    {"POST", "/v1/workflows/{id}/approvals/{request_id}", SCOPE_APPROVE, api_h_approve},
    {"GET", "/v1/events", SCOPE_READ, api_h_all_events},
    {"GET", "/v1/memory", SCOPE_READ, api_h_memory_list},
    {"GET", "/v1/memory/{id}", SCOPE_READ, api_h_memory_show},
    {"POST", "/v1/memory/{id}/revoke", SCOPE_APPROVE, api_h_memory_revoke},
    {"GET", "/v1/whoami", 0, api_h_whoami}, /* authenticates itself: see h_whoami */
    {"GET", "/v1/workflows/{id}/artifacts", SCOPE_READ, api_h_artifacts},
    {"GET", "/v1/workflows/{id}/artifacts/{sha256}", SCOPE_READ, api_h_artifact},
    /* no token: each trigger verifies its sender's signature (lua/triggers.lua) */
    {"POST", "/hooks/{name}", 0, api_h_hook},
    {"GET", "/v1/triggers/{name}/deliveries", SCOPE_READ, api_h_deliveries},
    {"GET", "/v1/schedules", SCOPE_READ, api_h_schedules},
    {"POST", "/v1/schedules", SCOPE_START, api_h_schedule_create},
    {"GET", "/v1/schedules/{name}", SCOPE_READ, api_h_schedule},
    {"DELETE", "/v1/schedules/{name}", SCOPE_START, api_h_schedule_delete},
    {"POST", "/v1/schedules/{name}/pause", SCOPE_START, api_h_schedule_pause},
    {"POST", "/v1/schedules/{name}/resume", SCOPE_START, api_h_schedule_resume},
    {"POST", "/v1/schedules/{name}/trigger", SCOPE_START, api_h_schedule_trigger},
};
#define NROUTES (sizeof ROUTES / sizeof *ROUTES)

int api_route(size_t i, const char **method, const char **pattern) {
  if (i >= NROUTES) return 0;
  *method = ROUTES[i].method;
  *pattern = ROUTES[i].pattern;
  return 1;
}

/* Matches path against pattern segment by segment; {x} takes one segment,
 * decoded into the next parameter. 1 match, 0 no match, -1 a parameter that
 * does not decode. */
static int match(const char *pattern, const char *path, ctx *c) {
  int np = 0;
  while (*pattern && *path) {
    if (*pattern != '/' || *path != '/') return 0;
    pattern++;
    path++;
    const char *pe = strchr(pattern, '/'), *se = strchr(path, '/');
    size_t pl = pe ? (size_t)(pe - pattern) : strlen(pattern), sl = se ? (size_t)(se - path) : strlen(path);
    if (pattern[0] == '{') {
      if (sl == 0) return 0;
      char *dst = np == 0 ? c->p1 : c->p2;
      if (np > 1 || api_pct_decode(path, sl, dst, sizeof c->p1) != 0) return -1;
      np++;
    } else if (pl != sl || strncmp(pattern, path, pl) != 0) {
      return 0;
    }
    pattern += pl;
    path += sl;
  }
  return *pattern == 0 && *path == 0;
}

static void on_request(void *ud, httpd_req *r) {
  api *a = ud;
  ctx c;
  memset(&c, 0, sizeof c);
  const char *method = httpd_method(r), *path = httpd_path(r);
  /* HEAD is GET without the body (RFC 9110 9.3.2): the library sends the
   * head of the GET's answer, Content-Length included, and drops its body */
  const char *as = strcmp(method, "HEAD") == 0 ? "GET" : method;
  const route *found = NULL;
  char allow[64] = "";
  int bad_param = 0;
  for (size_t i = 0; i < NROUTES; i++) {
    int m = match(ROUTES[i].pattern, path, &c);
    if (m < 0) bad_param = 1;
    if (m != 1) continue;
    if (strcmp(ROUTES[i].method, as) == 0) {
      found = &ROUTES[i];
      break;
    }
    snprintf(allow + strlen(allow), sizeof allow - strlen(allow), "%s%s%s", *allow ? ", " : "", ROUTES[i].method,
             strcmp(ROUTES[i].method, "GET") == 0 ? ", HEAD" : "");
  }
  if (!found) {
    if (*allow) {
      char hdr[80];
      snprintf(hdr, sizeof hdr, "Allow: %s", allow);
      const char *headers[] = {hdr, NULL};
      return api_reply_error_h(r, 405, headers, "method %.16s is not allowed on %.200s (allowed: %s)", method, path,
                               allow);
    }
    if (bad_param)
      return api_reply_error(r, 400, "a path segment is not valid (a bad %%-escape, a NUL byte or too long)");
    return api_reply_error(r, 404, "no such route: %s %.200s (see GET /v1/openapi.json)", method, path);
  }
  if (found->scope) {
    if (api_authenticate(a, r, &c) != 0) return;
    if (!token_allows(c.scopes, found->scope))
      return api_reply_error(r, 403, "this token lacks the '%s' scope", api_scope_name(found->scope));
  } else {
    snprintf(c.identity, sizeof c.identity, "anonymous");
  }
  /* an id no workflow can have is a bad request, not an unknown workflow */
  char err[512];
  if (strstr(found->pattern, "{id}") && engine_check_id(c.p1, err, sizeof err) != 0)
    return api_reply_error(r, 400, "%s", err);
  found->fn(a, r, &c);
}

/* ------------------------------------------------- worker callbacks --- */

static void on_status(void *ud, const char *id, const char *status, const char *detail) {
  (void)detail;
  api *a = ud;
  if (a->streams && engine_status_terminal(status)) streams_finished(a->streams, id, status);
}

static void on_commit(void *ud) {
  api *a = ud;
  metrics_add(a->m, "engine_commits_total", NULL, 1);
  metrics_observe(a->m, "engine_commit_writes", NULL, (double)store_batch_writes(engine_store(a->e)));
  if (a->streams) streams_committed(a->streams);
}

static void on_starts_commit(void *ud, size_t n, int ok) {
  api *a = ud;
  const char *labels[] = {"outcome", ok ? "committed" : "failed", NULL};
  metrics_add(a->m, "engine_start_commits_total", labels, 1);
  if (ok) metrics_observe(a->m, "engine_start_commit_starts", NULL, (double)n);
}

static void on_live(void *ud, const char *wf_id, const char *type, const char *json) {
  api *a = ud;
  if (a->streams) streams_live(a->streams, wf_id, type, json);
}

static void on_activity(void *ud, const char *name, double seconds, int ok) {
  api *a = ud;
  const char *labels[] = {"name", name, "outcome", ok ? "completed" : "failed", NULL};
  metrics_observe(a->m, "engine_activity_duration_seconds", labels, seconds);
}

static void on_usage(void *ud, const char *provider, double in, double out) {
  api *a = ud;
  const char *li[] = {"provider", provider, "kind", "input", NULL}, *lo[] = {"provider", provider, "kind", "output",
                                                                             NULL};
  if (in > 0) metrics_add(a->m, "engine_model_tokens_total", li, in);
  if (out > 0) metrics_add(a->m, "engine_model_tokens_total", lo, out);
}

/* ------------------------------------------------------------- life --- */

api *api_new(void) {
  api *a = util_xcalloc(1, sizeof *a);
  a->m = metrics_new();
  api_declare_metrics(a->m);
  return a;
}

void api_engine_config(api *a, engine_config *cfg) {
  cfg->on_status = on_status;
  cfg->on_commit = on_commit;
  cfg->on_starts_commit = on_starts_commit;
  cfg->on_live = on_live;
  cfg->on_activity = on_activity;
  cfg->on_usage = on_usage;
  cfg->ud = a;
}

int api_listen(api *a, engine *e, const api_options *o, char *err, size_t errlen) {
  a->e = e;
  web_static_dir(a->web_dir, sizeof a->web_dir);
  char real[PATH_MAX];
  if (realpath(o->workflows_dir, real)) {
    a->workflows_dir = util_strdup(real);
  } else if (!o->workflows_default) {
    util_seterr(err, errlen, "--workflows %s: %s", o->workflows_dir, strerror(errno));
    return -1;
  } /* else: no ./workflows here; starts through the API say so */
  /* the worker's hooks watch and load the triggers from here (lua/activities/worker.lua) */
  const char *td = getenv("ENGINE_TRIGGERS_DIR");
  if (td && *td) a->triggers_dir = util_strdup(td);
  else if (a->workflows_dir) {
    a->triggers_dir = util_fmt("%s/triggers", a->workflows_dir);
    setenv("ENGINE_TRIGGERS_DIR", a->triggers_dir, 1); /* before the loop and its threads start */
  }
  httpd_limits lim;
  if (httpd_limits_default(&lim, err, errlen) != 0) return -1;
  char who[96]; /* pg_stat_activity tells it from the worker's and the start lane's */
  snprintf(who, sizeof who, "engine api %s", engine_owner(e));
  if (store_open_as(store_path(engine_store(e)), 1, who, &a->rd, err, errlen) != STORE_OK) return -1;
  /* on PostgreSQL every request's token check would wait for an answer on
   * the loop: the live tokens are read again at most once a second (a
   * revocation is refused from then on, docs/http-api.md) */
  if (store_shared(a->rd)) a->tokens = token_cache_new(1000);
  a->L = luaL_newstate();
  if (!a->L) {
    util_seterr(err, errlen, "out of memory");
    return -1;
  }
  a->http = httpd_start(engine_loop(e), o->listen, &lim, on_request, a, &a->loopback, err, errlen);
  if (!a->http) return -1;
  if (!a->loopback && token_live_count(a->rd) <= 0) {
    util_seterr(err, errlen,
                "--listen %s is not a loopback address, and no API token exists: create one first (engine token "
                "create NAME --scopes ...), or listen on 127.0.0.1",
                o->listen);
    httpd_stop(a->http);
    a->http = NULL;
    return -1;
  }
  snprintf(a->url, sizeof a->url, "http://%s", httpd_address(a->http));
  a->streams = streams_new(engine_loop(e), a->rd);
  return 0;
}

const char *api_url(const api *a) { return a->url; }

void api_set_schedules(api *a, struct schedules *s) { a->schedules = s; }

int api_drain(api *a, void (*drained)(void *ud), void *ud) {
  return a && a->http ? httpd_drain(a->http, drained, ud) : 0;
}

void api_stop(api *a) {
  if (!a) return;
  if (a->http) httpd_stop(a->http); /* ends the streams: their subscribers go */
  a->http = NULL;
  streams_free(a->streams);
  a->streams = NULL;
}

void api_free(api *a) {
  if (!a) return;
  api_stop(a);
  if (a->rd) store_close(a->rd);
  token_cache_free(a->tokens);
  if (a->L) lua_close(a->L);
  metrics_free(a->m);
  free(a->workflows_dir);
  free(a->triggers_dir);
  free(a);
}
