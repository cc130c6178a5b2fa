/* api: the routes of the HTTP API (see api.h), their authentication, the
 * acknowledgement of writes after the group commit, the live event streams
 * and /metrics.
 *
 * Every answer is JSON (errors {"error":{"status":N,"message":...}}), every
 * JSON text goes out through json_for_output. What a route does is the same
 * operation the CLI performs (client.c, approval.c, session_view.c); only
 * where the identity comes from differs: the token, never the body. */
#include "api.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <lualib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_stream.h"
#include "approval.h"
#include "httpd.h"
#include "json.h"
#include "metrics.h"
#include "schedules.h"
#include "session_view.h"
#include "store.h"
#include "tokens.h"
#include "util.h"
#include "web_static.h"

extern const unsigned char api_openapi_json[];
extern const unsigned long api_openapi_json_len;


struct api {
  engine *e;
  store *rd; /* read-only: sees only what is committed */
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

/* ------------------------------------------------------------ answers --- */

static void reply(httpd_req *r, int status, char *json, const char *const *headers) {
  char *out = json_for_output(json, strlen(json));
  free(json);
  size_t n = strlen(out);
  out = util_xrealloc(out, n + 2);
  out[n] = '\n';
  httpd_respond(r, status, "application/json", out, n + 1, headers);
}

static void reply_verror(httpd_req *r, int status, const char *const *headers, const char *fmt, va_list ap) {
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
  char *q = json_quote(msg ? msg : "out of memory");
  free(msg);
  static const char *retry[] = {"Retry-After: 1", NULL};
  reply(r, status, util_fmt("{\"error\":{\"status\":%d,\"message\":%s}}", status, q),
        headers ? headers : status == 503 ? retry : NULL);
  free(q);
}

static void reply_error(httpd_req *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reply_error(httpd_req *r, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  reply_verror(r, status, NULL, fmt, ap);
  va_end(ap);
}

static void reply_error_h(httpd_req *r, int status, const char *const *headers, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void reply_error_h(httpd_req *r, int status, const char *const *headers, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  reply_verror(r, status, headers, fmt, ap);
  va_end(ap);
}

static void reply_store_error(api *a, httpd_req *r, store *st) {
  (void)a;
  reply_error(r, 503, "the store cannot be read or written now (%s); nothing was changed, retry", store_errmsg(st));
}

/* ------------------------------------------------------------ request --- */

typedef struct ctx {
  char identity[TOKEN_NAME_MAX + 16];
  unsigned scopes;
  char p1[512], p2[512]; /* the path's parameters, percent-decoded */
} ctx;

/* Percent-decodes a path segment or query value into out: -1 for a bad
 * escape, a NUL byte or more than n - 1 bytes. */
static int pct_decode(const char *s, size_t len, char *out, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < len; i++) {
    int c = (unsigned char)s[i];
    if (c == '%') {
      if (i + 2 >= len || !isxdigit((unsigned char)s[i + 1]) || !isxdigit((unsigned char)s[i + 2])) return -1;
      char hex[3] = {s[i + 1], s[i + 2], 0};
      c = (int)strtol(hex, NULL, 16);
      i += 2;
    }
    if (c == 0 || k + 1 >= n) return -1;
    out[k++] = (char)c;
  }
  out[k] = 0;
  return 0;
}

/* A query parameter decoded into out: 1 found, 0 absent, -1 malformed (answered 400). */
static int query(httpd_req *r, const char *name, char *out, size_t n) {
  const char *v = httpd_query(r, name);
  if (!v) return 0;
  if (pct_decode(v, strlen(v), out, n) != 0) {
    reply_error(r, 400, "query parameter '%s' is not valid (a bad %%-escape, a NUL byte or too long)", name);
    return -1;
  }
  return 1;
}

/* A non-negative integer query parameter: 0 ok (dflt when absent), -1 answered 400. */
static int query_int(httpd_req *r, const char *name, int64_t dflt, int64_t max, int64_t *out) {
  char buf[32];
  int got = query(r, name, buf, sizeof buf);
  if (got < 0) return -1;
  *out = dflt;
  if (got == 0) return 0;
  char *end;
  long long v = strtoll(buf, &end, 10);
  if (!*buf || *end || v < 0 || v > max) {
    reply_error(r, 400, "query parameter '%s' must be a whole number from 0 to %lld", name, (long long)max);
    return -1;
  }
  *out = v;
  return 0;
}

/* The body decoded as a JSON object of only the allowed keys, left on top of
 * a->L. An empty body is {}. Returns 0, or -1 answered 400. */
static int body_object(api *a, httpd_req *r, const char *const *allowed) {
  size_t len;
  const char *body = httpd_body(r, &len);
  char err[512];
  lua_settop(a->L, 0);
  if (len == 0) {
    lua_newtable(a->L);
    return 0;
  }
  if (json_check_text(body, len, "the request body", err, sizeof err) != 0 ||
      json_decode_safe(a->L, body, len, err, sizeof err) != 0) {
    reply_error(r, 400, "the request body is not valid JSON: %s", err);
    return -1;
  }
  const char *first = body + strspn(body, " \t\r\n");
  if (!lua_istable(a->L, -1) || *first != '{') {
    reply_error(r, 400, "the request body must be a JSON object");
    return -1;
  }
  lua_pushnil(a->L);
  while (lua_next(a->L, -2)) {
    lua_pop(a->L, 1);
    const char *k = lua_type(a->L, -1) == LUA_TSTRING ? lua_tostring(a->L, -1) : "?";
    int ok = 0;
    for (size_t i = 0; allowed[i]; i++) ok |= strcmp(allowed[i], k) == 0;
    if (!ok) {
      char shown[80];
      snprintf(shown, sizeof shown, "%.60s", k);
      char list[200] = "";
      for (size_t i = 0; allowed[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", allowed[i]);
      reply_error(r, 400, "unknown field '%s' in the request body (known: %s)", shown, list);
      lua_settop(a->L, 0);
      return -1;
    }
  }
  return 0;
}

static int encode_top(lua_State *L) {
  size_t len;
  json_encode(L, 1, &len);
  return 1;
}

/* Field key of the object on top of a->L as JSON text (malloc'd), NULL when
 * absent. */
static char *field_json(api *a, const char *key) {
  lua_State *L = a->L;
  int top = lua_gettop(L);
  lua_pushcfunction(L, encode_top);
  lua_getfield(L, top, key);
  if (lua_isnil(L, -1)) {
    lua_settop(L, top);
    return NULL;
  }
  char *out = NULL;
  if (lua_pcall(L, 1, 1, 0) == LUA_OK) out = util_strdup(lua_tostring(L, -1));
  lua_settop(L, top);
  return out;
}

/* -1: absent, 0/1 a boolean, -2 another type. */
static int field_bool(api *a, const char *key) {
  int t = lua_getfield(a->L, -1, key), v = t == LUA_TNIL ? -1 : t == LUA_TBOOLEAN ? lua_toboolean(a->L, -1) : -2;
  lua_pop(a->L, 1);
  return v;
}

/* A string field copied into out: 1, 0 absent, -1 not a string (or too long). */
static int field_string(api *a, const char *key, char *out, size_t n) {
  int t = lua_getfield(a->L, -1, key), rc = 0;
  if (t == LUA_TSTRING) {
    size_t len;
    const char *s = lua_tolstring(a->L, -1, &len);
    rc = len < n && strlen(s) == len ? 1 : -1;
    if (rc == 1) memcpy(out, s, len + 1);
  } else if (t != LUA_TNIL) {
    rc = -1;
  }
  lua_pop(a->L, 1);
  return rc;
}

/* ------------------------------------------------------ writes, durably --- */

typedef struct pending {
  api *a;
  httpd_req *r;
  int status;
  char *body;   /* the answer once committed; NULL: the workflow's summary */
  char *id;     /* for the summary */
  char *headers[2];
} pending;

static char *summary_json(api *a, const char *id) {
  view_summary s;
  char err[600];
  if (view_summary_load(a->rd, id, &s, err, sizeof err) != 1) return NULL;
  char *json = view_summary_json(&s);
  view_summary_free(&s);
  return json;
}

static void on_committed(void *ud, int ok) {
  pending *p = ud;
  if (!ok) {
    reply_error(p->r, 503, "the store could not be written (%s); nothing was recorded, retry",
                store_errmsg(engine_store(p->a->e)));
  } else {
    char *body = p->body ? p->body : summary_json(p->a, p->id);
    p->body = NULL;
    if (body) reply(p->r, p->status, body, (const char *const *)p->headers);
    else reply_error(p->r, 503, "the workflow was written but cannot be read back now; GET it to see it");
  }
  free(p->body);
  free(p->id);
  free(p->headers[0]);
  free(p);
}

/* Answers r once what was written so far is committed. */
static void answer_when_committed(api *a, httpd_req *r, int status, char *body, const char *id, const char *location) {
  pending *p = util_xcalloc(1, sizeof *p);
  p->a = a;
  p->r = r;
  p->status = status;
  p->body = body;
  p->id = id ? util_strdup(id) : NULL;
  if (location) p->headers[0] = util_fmt("Location: %s", location);
  engine_when_committed(a->e, on_committed, p);
}

/* A write refused: a store that failed is 503 (nothing was recorded). */
static int store_down(api *a, httpd_req *r) {
  store *st = engine_store(a->e);
  if (!store_batch_failed(st)) return 0;
  reply_store_error(a, r, st);
  return 1;
}

/* The workflow a write is about, from the worker's own view (its batch
 * included): 1 found (and w filled), else answered 404 or 503. */
static int find_for_write(api *a, httpd_req *r, const char *id, wf_row *w) {
  int found = store_wf_get(engine_store(a->e), id, w);
  if (found == 1) return 1;
  if (found < 0) {
    reply_store_error(a, r, engine_store(a->e));
    return 0;
  }
  char err[512];
  engine_unknown_id(id, err, sizeof err);
  reply_error(r, 404, "%s", err);
  return 0;
}

/* ---------------------------------------------------------- scripts --- */

/* The script a start names, inside the workflows directory: a relative path
 * of plain names ending in .lua, whose real path (symlinks followed) stays
 * inside. Returns 0 with path, or -1 answered 400. */
/* The script's path in the workflows directory, or -1 with status (400 or,
 * for a server without the directory, 400 too) and msg saying why. */
static int script_path(api *a, const char *script, char *path, size_t n, char *msg, size_t msgn) {
  size_t len = strlen(script);
  const char *why = NULL;
  if (len == 0) why = "it is empty";
  else if (len > 200) why = "it is longer than 200 bytes";
  else if (script[0] == '/') why = "it is an absolute path";
  else if (len < 5 || strcmp(script + len - 4, ".lua") != 0) why = "it does not end in .lua";
  for (size_t i = 0; i < len && !why; i++) {
    unsigned char c = (unsigned char)script[i];
    if (!(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9') && !strchr("._-/", c))
      why = "only A-Z a-z 0-9 . _ - and / are allowed";
  }
  if (!why) {
    char tmp[256];
    snprintf(tmp, sizeof tmp, "/%s/", script);
    if (strstr(tmp, "/../") || strstr(tmp, "/./") || strstr(tmp, "//")) why = "it has a '.', '..' or empty segment";
  }
  if (why) {
    char shown[80];
    snprintf(shown, sizeof shown, "%.60s", script);
    snprintf(msg, msgn, "invalid script '%s': %s (name a file in the workflows directory, like agent_session.lua)",
             shown, why);
    return -1;
  }
  char joined[PATH_MAX], real[PATH_MAX];
  if (!a->workflows_dir) {
    snprintf(msg, msgn, "this server has no workflows directory (./workflows did not exist when it started: "
             "restart it with --workflows DIR)");
    return -1;
  }
  snprintf(joined, sizeof joined, "%s/%s", a->workflows_dir, script);
  if (!realpath(joined, real)) {
    snprintf(msg, msgn, "unknown workflow script '%s': no such file in the workflows directory %s", script,
             a->workflows_dir);
    return -1;
  }
  size_t dl = strlen(a->workflows_dir);
  if (strncmp(real, a->workflows_dir, dl) != 0 || real[dl] != '/') {
    snprintf(msg, msgn, "invalid script '%s': it resolves outside the workflows directory", script);
    return -1;
  }
  snprintf(path, n, "%s", joined);
  return 0;
}

static int resolve_script(api *a, httpd_req *r, const char *script, char *path, size_t n) {
  char msg[PATH_MAX + 256];
  if (script_path(a, script, path, n, msg, sizeof msg) == 0) return 0;
  reply_error(r, 400, "%s", msg);
  return -1;
}

/* ------------------------------------------------------------ routes --- */

static void h_health(api *a, httpd_req *r, ctx *c) {
  (void)c;
  int64_t v = store_data_version(a->rd);
  if (v < 0) return reply_store_error(a, r, a->rd);
  reply(r, 200, util_fmt("{\"ok\":true,\"pid\":%d}", (int)getpid()), NULL);
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

static int authenticate(api *a, httpd_req *r, ctx *c);

/* Who the presented token is and what it may do: the page shows only what
 * the scopes allow (approve buttons only with approve). Asked without a token
 * while tokens exist, it says so (identity null, no scopes) instead of 401:
 * the page learns that it must ask for one without a failed request. */
static void h_whoami(api *a, httpd_req *r, ctx *c) {
  static const struct {
    unsigned bit;
    const char *name;
  } ALL[] = {{SCOPE_READ, "read"},     {SCOPE_START, "start"},   {SCOPE_SIGNAL, "signal"},
             {SCOPE_APPROVE, "approve"}, {SCOPE_CANCEL, "cancel"}, {SCOPE_ADMIN, "admin"}};
  int64_t live = token_live_count(a->rd);
  if (live < 0) return reply_store_error(a, r, a->rd);
  if (live > 0 && !httpd_header(r, "Authorization"))
    return reply(r, 200, util_strdup("{\"identity\":null,\"tokens\":true,\"scopes\":[]}"), NULL);
  if (authenticate(a, r, c) != 0) return;
  ubuf b = {0};
  char *who = json_quote(c->identity);
  char *head = util_fmt("{\"identity\":%s,\"tokens\":%s,\"scopes\":[", who, live > 0 ? "true" : "false");
  ubuf_add(&b, head, strlen(head));
  free(head);
  free(who);
  int n = 0;
  for (size_t i = 0; i < sizeof ALL / sizeof *ALL; i++) {
    if (!token_allows(c->scopes, ALL[i].bit)) continue;
    char *q = util_fmt("%s\"%s\"", n++ ? "," : "", ALL[i].name);
    ubuf_add(&b, q, strlen(q));
    free(q);
  }
  ubuf_add(&b, "]}", 3);
  reply(r, 200, b.p, NULL);
}

/* The summary of workflow id into *s: 1, or 0 once answered 404 (unknown)
 * or 503 (the store could not be read). */
static int load_summary(api *a, httpd_req *r, const char *id, view_summary *s) {
  char err[700];
  int found = view_summary_load(a->rd, id, s, err, sizeof err);
  if (found < 0) reply_error(r, 503, "%s", err);
  if (found == 0) {
    engine_unknown_id(id, err, sizeof err);
    reply_error(r, 404, "%s", err);
  }
  return found == 1;
}

/* ---- artifacts: the files a session saved (artifact.saved events), stored
 * by content hash (lua/activities/session.lua) ---- */

static void h_artifacts(api *a, httpd_req *r, ctx *c) {
  (void)a;
  view_summary s;
  if (!load_summary(a, r, c->p1, &s)) return;
  reply(r, 200, util_fmt("{\"artifacts\":%s}", s.artifacts ? s.artifacts : "[]"), NULL);
  view_summary_free(&s);
}

typedef struct artifact_find {
  const char *sha;
  char *stored, *path;
} artifact_find;

static int artifact_item(void *ud, const char *v, size_t vn) {
  artifact_find *f = ud;
  char *sha = json_get_string(v, vn, "sha256");
  int hit = sha && strcmp(sha, f->sha) == 0;
  free(sha);
  if (!hit) return 0;
  f->stored = json_get_string(v, vn, "stored");
  f->path = json_get_string(v, vn, "path");
  return 1;
}

/* A name for Content-Disposition: the artifact's base name with anything
 * but A-Z a-z 0-9 . _ - replaced, so no header can be forged from it. */
static void download_name(const char *path, char *out, size_t n) {
  const char *base = path ? strrchr(path, '/') : NULL;
  base = base ? base + 1 : path && *path ? path : "artifact";
  size_t k = 0;
  for (; *base && k + 1 < n; base++)
    out[k++] = (isalnum((unsigned char)*base) || strchr("._-", *base)) ? *base : '_';
  out[k] = 0;
  if (!k || out[0] == '.') snprintf(out, n, "artifact");
}

#define ARTIFACT_MAX_DOWNLOAD (256u << 20)

static void h_artifact(api *a, httpd_req *r, ctx *c) {
  if (strlen(c->p2) != 64 || strspn(c->p2, "0123456789abcdef") != 64)
    return reply_error(r, 400, "an artifact is named by its sha256: 64 lowercase hex digits");
  view_summary s;
  if (!load_summary(a, r, c->p1, &s)) return;
  artifact_find f = {c->p2, NULL, NULL};
  if (s.artifacts) json_each(s.artifacts, strlen(s.artifacts), artifact_item, &f);
  view_summary_free(&s);
  /* only a file this session saved, at the place the store put it, with the
   * content its hash names: the path in the event is never trusted alone */
  const char *slash = f.stored ? strrchr(f.stored, '/') : NULL;
  struct stat st;
  char *body = NULL;
  size_t len = 0;
  if (f.stored && slash && strcmp(slash + 1, c->p2) == 0 && lstat(f.stored, &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_size <= (off_t)ARTIFACT_MAX_DOWNLOAD)
    body = util_read_file(f.stored, &len);
  char hash[65] = "";
  if (body) util_sha256_hex(body, len, hash);
  if (!body || strcmp(hash, c->p2) != 0) {
    free(body);
    int saved = f.stored != NULL;
    free(f.stored);
    free(f.path);
    if (!saved) return reply_error(r, 404, "workflow '%s' saved no artifact %s", c->p1, c->p2);
    return reply_error(r, 404, "artifact %s of workflow '%s' is no longer stored (or not as saved)", c->p2, c->p1);
  }
  char name[120], disp[200];
  download_name(f.path, name, sizeof name);
  snprintf(disp, sizeof disp, "Content-Disposition: attachment; filename=\"%s\"", name);
  const char *headers[] = {disp, "Content-Security-Policy: default-src 'none'; sandbox", NULL};
  free(f.stored);
  free(f.path);
  httpd_respond(r, 200, "application/octet-stream", body, len, headers);
}

static const char *START_KEYS[] = {"script", "id", "input", NULL};

static void h_start(api *a, httpd_req *r, ctx *c) {
  if (body_object(a, r, START_KEYS) != 0) return;
  char script[256], id[ENGINE_ID_MAX + 1], err[1024], path[PATH_MAX];
  int got = field_string(a, "script", script, sizeof script);
  if (got != 1) return reply_error(r, 400, "\"script\" is required: a string naming a file in the workflows directory");
  got = field_string(a, "id", id, sizeof id);
  if (got < 0) return reply_error(r, 400, "\"id\" must be a string of at most %d bytes", ENGINE_ID_MAX);
  char *input = field_json(a, "input");
  if (resolve_script(a, r, script, path, sizeof path) != 0) return free(input);
  if (got == 0) engine_generate_id(script, id, sizeof id);
  else if (engine_check_id(id, err, sizeof err) != 0) {
    free(input);
    return reply_error(r, 400, "%s", err);
  }
  char *with = engine_input_with_identity(input ? input : "{}", c->identity, 1, err, sizeof err);
  free(input);
  if (!with) return reply_error(r, 400, "%s", err);
  char location[ENGINE_ID_MAX + 32];
  snprintf(location, sizeof location, "/v1/workflows/%s", id);
  wf_row w;
  int found = store_wf_get(engine_store(a->e), id, &w);
  if (found < 0) {
    free(with);
    return reply_store_error(a, r, engine_store(a->e));
  }
  if (found == 1) {
    /* idempotent: the same script and input (whoever asks) is the run that exists */
    char *mine = engine_input_with_identity(with, "", 0, err, sizeof err),
         *theirs = engine_input_with_identity(w.input ? w.input : "null", "", 0, err, sizeof err);
    int same_input = mine && theirs && strcmp(mine, theirs) == 0, same_script = strcmp(w.script_name, path) == 0;
    free(mine);
    free(theirs);
    free(with);
    /* the workflow may be in the batch not yet committed: the conflict is
     * told once it is durable too (a lost batch makes it a 503) */
    char *msg = NULL;
    if (!same_script)
      msg = util_fmt("workflow '%s' exists with another script (%s)", id, w.script_name);
    else if (!same_input)
      msg = util_fmt("workflow '%s' exists with a different input; choose another id, or send the same input", id);
    if (msg) {
      char *q = json_quote(msg);
      answer_when_committed(a, r, 409, util_fmt("{\"error\":{\"status\":409,\"message\":%s}}", q), NULL, NULL);
      free(q);
      free(msg);
    } else {
      answer_when_committed(a, r, 200, NULL, id, location);
    }
    wf_row_free(&w);
    return;
  }
  int existed = 0;
  int rc = engine_submit(a->e, id, path, with, &existed, err, sizeof err);
  free(with);
  if (rc != 0) {
    if (store_down(a, r)) return;
    return reply_error(r, 400, "%s", err);
  }
  answer_when_committed(a, r, 201, NULL, id, location);
}

static const char *STATUSES[] = {"running", "waiting", "queued", "completed", "failed", "cancelled", "stuck", NULL};

/* A filtered page reads at most this many workflows: with 100,000 of them
 * and a text few match, the answer comes quickly, short, with a next_cursor
 * to read on from. */
#define LIST_SCAN_MAX 20000

typedef struct page {
  store *st;
  ubuf b;
  int n, limit;
  const char *q; /* the text filter, or NULL */
  int session;   /* fields=session: each item with the session's numbers */
  int scanned;
  int64_t last_created;
  char last_id[ENGINE_ID_MAX * 2 + 1];
} page;

/* The string member key of JSON object text, decoded and cut to at most max
 * bytes (on a UTF-8 boundary), or NULL. */
static char *member_text(const char *text, const char *key, size_t max) {
  const char *v;
  size_t vn;
  if (!text || json_get(text, strlen(text), key, &v, &vn) != 1 || vn == 0 || *v != '"') return NULL;
  char *out = json_string(v, vn);
  if (out && strlen(out) > max) {
    size_t k = max;
    while (k > 0 && ((unsigned char)out[k] & 0xC0) == 0x80) k--;
    out[k] = 0;
  }
  return out;
}

/* The member key of a result object when it is a number: appended as
 * ,"key":N to b. */
static void add_number(ubuf *b, const char *result, const char *key) {
  const char *v;
  size_t vn;
  if (!result || json_get(result, strlen(result), key, &v, &vn) != 1 || vn == 0 || vn > 40) return;
  if (!(*v == '-' || (*v >= '0' && *v <= '9'))) return;
  char *part = util_fmt(",\"%s\":%.*s", key, (int)vn, v);
  ubuf_add(b, part, strlen(part));
  free(part);
}

/* A list item with fields=session: what `engine list --json` prints (the
 * item without it, so `list --server` prints the same), plus what the web
 * page's table shows of a session: its objective and who started it
 * (from the input), and once it ended its turns, tool calls, tokens and cost
 * (from the result). */
static char *list_item(store *st, const wf_row *w, const char *objective, const char *by) {
  char *base = view_list_item_json(st, w);
  ubuf b = {0};
  ubuf_add(&b, base, strlen(base) - 1); /* without its closing brace */
  free(base);
  if (objective) {
    char *q = json_quote(objective);
    ubuf_add(&b, ",\"objective\":", 13);
    ubuf_add(&b, q, strlen(q));
    free(q);
  }
  if (by) {
    char *q = json_quote(by);
    ubuf_add(&b, ",\"started_by\":", 14);
    ubuf_add(&b, q, strlen(q));
    free(q);
  }
  static const char *const COUNTS[] = {"turns", "tool_calls", "tokens", "cost_usd", NULL};
  for (const char *const *k = COUNTS; *k; k++) add_number(&b, w->result, *k);
  ubuf_add(&b, "}", 2); /* with the NUL */
  return b.p;
}

static int page_row(void *ud, const wf_row *w) {
  page *p = ud;
  if (p->n == p->limit) {
    p->n++; /* there is more */
    return 1;
  }
  if (p->q && p->scanned == LIST_SCAN_MAX) {
    p->n = p->limit + 1; /* read on from the cursor */
    return 1;
  }
  p->scanned++;
  p->last_created = w->created_at; /* the cursor: the last row read, shown or not */
  snprintf(p->last_id, sizeof p->last_id, "%s", w->id);
  char *objective = member_text(w->input, "objective", 300), *by = member_text(w->input, "identity", 100);
  int shown = !p->q || strcasestr(w->id, p->q) || strcasestr(w->script_name, p->q) ||
              (objective && strcasestr(objective, p->q)) || (by && strcasestr(by, p->q));
  if (shown) {
    char *item = p->session ? list_item(p->st, w, objective, by) : view_list_item_json(p->st, w);
    if (p->n) ubuf_add(&p->b, ",", 1);
    ubuf_add(&p->b, item, strlen(item));
    free(item);
    p->n++;
  }
  free(objective);
  free(by);
  return 0;
}

static void h_list(api *a, httpd_req *r, ctx *c) {
  (void)c;
  char status[32], script[256], cursor[ENGINE_ID_MAX + 40], path[PATH_MAX], text[201];
  int64_t limit;
  int hs = query(r, "status", status, sizeof status), hc = hs < 0 ? -1 : query(r, "script", script, sizeof script);
  int hk = hc < 0 ? -1 : query(r, "cursor", cursor, sizeof cursor);
  int hq = hk < 0 ? -1 : query(r, "q", text, sizeof text);
  char order[16] = "", fields[16] = "";
  int ho = hq < 0 ? -1 : query(r, "order", order, sizeof order);
  int hf = ho < 0 ? -1 : query(r, "fields", fields, sizeof fields);
  if (hf < 0 || query_int(r, "limit", 100, 1000, &limit) != 0) return;
  if (hf == 1 && strcmp(fields, "session") != 0)
    return reply_error(r, 400, "unknown fields '%.16s' (session)", fields);
  if (ho == 1 && strcmp(order, "newest") != 0 && strcmp(order, "oldest") != 0)
    return reply_error(r, 400, "unknown order '%.16s' (oldest, newest)", order);
  int newest = ho == 1 && strcmp(order, "newest") == 0;
  if (hs == 1) {
    int ok = 0;
    for (const char **k = STATUSES; *k; k++) ok |= strcmp(*k, status) == 0;
    if (!ok) return reply_error(r, 400, "unknown status '%.32s' (running, waiting, completed, failed, cancelled, stuck)",
                                status);
  }
  if (hc == 1) snprintf(path, sizeof path, "%s/%s", a->workflows_dir ? a->workflows_dir : ".", script);
  int64_t after_created = newest ? INT64_MAX : -1;
  const char *after_id = "";
  if (hk == 1) {
    /* the cursor is "CREATED_AT.ID" of the last row of the previous page */
    char *dot = strchr(cursor, '.'), *end;
    long long v = dot ? strtoll(cursor, &end, 10) : -1;
    if (!dot || end != dot || v < 0) return reply_error(r, 400, "invalid cursor (use next_cursor of a previous page)");
    after_created = v;
    after_id = dot + 1;
  }
  if (limit == 0) limit = 1;
  page p = {a->rd, {0}, 0, (int)limit, hq == 1 && *text ? text : NULL, hf == 1, 0, 0, ""};
  ubuf_add(&p.b, "{\"workflows\":[", 14);
  /* filtered: rows are read until the page is full (or LIST_SCAN_MAX) */
  int rows = p.q ? LIST_SCAN_MAX + 1 : (int)limit + 1;
  if (store_wf_page(a->rd, hs == 1 ? status : NULL, hc == 1 ? path : NULL, after_created, after_id, newest, rows,
                    page_row, &p) != STORE_OK) {
    ubuf_free(&p.b);
    return reply_store_error(a, r, a->rd);
  }
  char next[ENGINE_ID_MAX * 2 + 64] = "null";
  if (p.n > p.limit) {
    char raw[ENGINE_ID_MAX * 2 + 40];
    snprintf(raw, sizeof raw, "%lld.%s", (long long)p.last_created, p.last_id);
    char *q = json_quote(raw);
    snprintf(next, sizeof next, "%s", q);
    free(q);
  }
  char *tail = util_fmt("],\"next_cursor\":%s}", next);
  ubuf_add(&p.b, tail, strlen(tail) + 1);
  free(tail);
  reply(r, 200, p.b.p, NULL);
}

/* The workflow a read is about (committed state): 1, or answered 404/503. */
static int find_for_read(api *a, httpd_req *r, const char *id, wf_row *w) {
  int found = store_wf_get(a->rd, id, w);
  if (found == 1) return 1;
  if (found < 0) {
    reply_store_error(a, r, a->rd);
    return 0;
  }
  char err[512];
  engine_unknown_id(id, err, sizeof err);
  reply_error(r, 404, "%s", err);
  return 0;
}

static void h_show(api *a, httpd_req *r, ctx *c) {
  view_summary s;
  if (!load_summary(a, r, c->p1, &s)) return;
  reply(r, 200, view_summary_json(&s), NULL);
  view_summary_free(&s);
}

static void h_history(api *a, httpd_req *r, ctx *c) {
  wf_row w;
  int64_t run;
  if (query_int(r, "run", 0, INT64_MAX / 2, &run) != 0 || !find_for_read(a, r, c->p1, &w)) return;
  if (run == 0) run = w.run;
  if (run > w.run) {
    int64_t last = w.run;
    wf_row_free(&w);
    return reply_error(r, 404, "workflow '%s' has no run %lld (its runs are 1 to %lld)", c->p1, (long long)run,
                       (long long)last);
  }
  hist_list h = {0};
  if (store_hist_load(a->rd, c->p1, run, &h) != STORE_OK) {
    hist_list_free(&h);
    wf_row_free(&w);
    return reply_store_error(a, r, a->rd);
  }
  ubuf b = {0};
  char *qid = json_quote(c->p1);
  char *head = util_fmt("{\"id\":%s,\"run\":%lld,\"events\":[", qid, (long long)run);
  free(qid);
  ubuf_add(&b, head, strlen(head));
  free(head);
  for (size_t i = 0; i < h.n; i++) {
    char *item = view_hist_item_json(&h.v[i]); /* what `engine history --json` prints */
    if (i) ubuf_add(&b, ",", 1);
    ubuf_add(&b, item, strlen(item));
    free(item);
  }
  ubuf_add(&b, "]}", 3);
  hist_list_free(&h);
  wf_row_free(&w);
  reply(r, 200, b.p, NULL);
}

/* ------------------------------------------------------------ events --- */

/* Last-Event-ID (a reconnecting EventSource), else ?after=, else 0. */
static int resume_point(httpd_req *r, int64_t *after) {
  const char *last = httpd_header(r, "Last-Event-ID");
  if (last && *last) {
    char *end;
    long long v = strtoll(last, &end, 10);
    if (*end || v < 0) {
      reply_error(r, 400, "Last-Event-ID must be the id of an event this stream sent (a whole number)");
      return -1;
    }
    *after = v;
    return 0;
  }
  return query_int(r, "after", 0, INT64_MAX / 2, after);
}

static int wants_stream(httpd_req *r) {
  const char *acc = httpd_header(r, "Accept");
  return acc && strstr(acc, "text/event-stream") != NULL;
}

typedef struct json_page {
  ubuf b;
  int n, limit;
  int64_t last;
} json_page;

static int page_event(void *ud, const domain_event *e) {
  json_page *p = ud;
  if (p->n == p->limit) return 1;
  char *json = view_event_json(e);
  if (p->n) ubuf_add(&p->b, ",", 1);
  ubuf_add(&p->b, json, strlen(json));
  free(json);
  p->n++;
  p->last = e->seq;
  return 0;
}

static int page_feed(void *ud, int64_t id, const domain_event *e) {
  json_page *p = ud;
  char *json = view_event_json(e);
  /* the feed position rides along: it is what ?after= takes */
  char *item = util_fmt("%s{\"id\":%lld,\"event\":%s}", p->n ? "," : "", (long long)id, json);
  ubuf_add(&p->b, item, strlen(item));
  free(item);
  free(json);
  p->n++;
  p->last = id;
  return 0;
}

static void h_events(api *a, httpd_req *r, ctx *c) {
  wf_row w;
  int64_t after, limit;
  if (resume_point(r, &after) != 0 || query_int(r, "limit", 1000, 10000, &limit) != 0) return;
  if (!find_for_read(a, r, c->p1, &w)) return;
  if (!wants_stream(r)) {
    json_page p = {{0}, 0, limit ? (int)limit : 1, after};
    ubuf_add(&p.b, "{\"events\":[", 11);
    if (store_domain_list(a->rd, c->p1, after, page_event, &p) != STORE_OK) {
      ubuf_free(&p.b);
      wf_row_free(&w);
      return reply_store_error(a, r, a->rd);
    }
    char *tail = util_fmt("],\"last_seq\":%lld,\"status\":\"%s\"}", (long long)p.last, w.status);
    ubuf_add(&p.b, tail, strlen(tail) + 1);
    free(tail);
    wf_row_free(&w);
    return reply(r, 200, p.b.p, NULL);
  }
  streams_open(a->streams, r, c->p1, after, engine_status_terminal(w.status) ? w.status : NULL);
  wf_row_free(&w);
}

static void h_all_events(api *a, httpd_req *r, ctx *c) {
  (void)c;
  int64_t after, limit;
  if (resume_point(r, &after) != 0 || query_int(r, "limit", 1000, 10000, &limit) != 0) return;
  if (!wants_stream(r)) {
    json_page p = {{0}, 0, 0, after};
    ubuf_add(&p.b, "{\"events\":[", 11);
    if (store_feed_after(a->rd, after, limit ? (int)limit : 1, page_feed, &p) != STORE_OK) {
      ubuf_free(&p.b);
      return reply_store_error(a, r, a->rd);
    }
    /* end_id: where a client that wants only what comes next streams from */
    int64_t end = store_feed_last(a->rd);
    if (end < 0) {
      ubuf_free(&p.b);
      return reply_store_error(a, r, a->rd);
    }
    char *tail = util_fmt("],\"last_id\":%lld,\"end_id\":%lld}", (long long)p.last, (long long)end);
    ubuf_add(&p.b, tail, strlen(tail) + 1);
    free(tail);
    return reply(r, 200, p.b.p, NULL);
  }
  streams_open(a->streams, r, NULL, after, NULL);
}

/* ------------------------------------------------------------ writes --- */

static void h_signal(api *a, httpd_req *r, ctx *c) {
  char err[512];
  if (approval_request_of(c->p2))
    return reply_error(r, 403,
                       "approval signals cannot be sent here: answer the request with POST "
                       "/v1/workflows/{id}/approvals/{request_id} (scope approve)");
  if (engine_reserved_signal(c->p2, err, sizeof err)) return reply_error(r, 403, "%s", err);
  if (engine_check_signal_name(c->p2, err, sizeof err) != 0) return reply_error(r, 400, "%s", err);
  size_t len;
  const char *body = httpd_body(r, &len);
  char *payload = json_accept(len ? body : "null", len ? len : 4, "the signal payload", err, sizeof err);
  if (!payload) return reply_error(r, 400, "%s", err);
  wf_row w;
  if (!find_for_write(a, r, c->p1, &w)) return free(payload);
  int done = engine_status_terminal(w.status);
  if (done) reply_error(r, 409, "workflow '%s' is %s; signal not delivered", c->p1, w.status);
  wf_row_free(&w);
  if (done) return free(payload);
  int rc = engine_signal_local(a->e, c->p1, c->p2, payload, c->identity, err, sizeof err);
  free(payload);
  if (rc != 0) {
    if (store_down(a, r)) return;
    return reply_error(r, 409, "%s", err);
  }
  char *qi = json_quote(c->p1), *qn = json_quote(c->p2), *qs = json_quote(c->identity);
  answer_when_committed(a, r, 200, util_fmt("{\"id\":%s,\"signal\":%s,\"sent_by\":%s}", qi, qn, qs), NULL, NULL);
  free(qi);
  free(qn);
  free(qs);
}

/* POST /v1/workflows/{id}/messages {"kind": "message"|"interrupt"|"close",
 * "text": ...}: what a person tells a running session, sent by the token's
 * identity (the session records it as the sender). */
static void h_message(api *a, httpd_req *r, ctx *c) {
  char err[512];
  size_t len;
  const char *body = httpd_body(r, &len);
  char *canon = json_accept(len ? body : "", len, "the message", err, sizeof err);
  if (!canon) return reply_error(r, 400, "%s", err);
  size_t n = strlen(canon);
  const char *v;
  size_t vn;
  if (canon[0] != '{') {
    free(canon);
    return reply_error(r, 400, "the message must be a JSON object {\"kind\", \"text\"}");
  }
  char *kind = json_get(canon, n, "kind", &v, &vn) == 1 ? json_get_string(canon, n, "kind") : util_strdup("message");
  char *text = json_get_string(canon, n, "text");
  int typed = (json_get(canon, n, "kind", &v, &vn) != 1 || kind) && (json_get(canon, n, "text", &v, &vn) != 1 || text);
  free(canon);
  char *payload = typed ? engine_session_input(kind, text, c->identity, err, sizeof err) : NULL;
  if (!typed) snprintf(err, sizeof err, "'kind' and 'text' must be strings");
  free(text);
  if (!payload) {
    free(kind);
    return reply_error(r, 400, "%s", err);
  }
  wf_row w;
  if (!find_for_write(a, r, c->p1, &w)) {
    free(kind);
    return free(payload);
  }
  int done = engine_status_terminal(w.status);
  if (done) reply_error(r, 409, "workflow '%s' is %s; %s not delivered", c->p1, w.status, kind);
  wf_row_free(&w);
  if (done) {
    free(kind);
    return free(payload);
  }
  int rc = engine_signal_local(a->e, c->p1, ENGINE_SESSION_SIGNAL, payload, c->identity, err, sizeof err);
  free(payload);
  if (rc != 0) {
    free(kind);
    if (store_down(a, r)) return;
    return reply_error(r, 409, "%s", err);
  }
  char *qi = json_quote(c->p1), *qk = json_quote(kind), *qs = json_quote(c->identity);
  answer_when_committed(a, r, 200, util_fmt("{\"id\":%s,\"kind\":%s,\"sent_by\":%s}", qi, qk, qs), NULL, NULL);
  free(qi);
  free(qk);
  free(qs);
  free(kind);
}

static void h_cancel(api *a, httpd_req *r, ctx *c) {
  char err[512];
  wf_row w;
  if (!find_for_write(a, r, c->p1, &w)) return;
  int done = engine_status_terminal(w.status);
  if (done) reply_error(r, 409, "workflow '%s' is %s; cancellation not delivered", c->p1, w.status);
  wf_row_free(&w);
  if (done) return;
  if (engine_cancel_local(a->e, c->p1, c->identity, err, sizeof err) != 0) {
    if (store_down(a, r)) return;
    return reply_error(r, 409, "%s", err);
  }
  char *qi = json_quote(c->p1);
  answer_when_committed(a, r, 202, util_fmt("{\"id\":%s,\"cancel\":\"requested\"}", qi), NULL, NULL);
  free(qi);
}

typedef struct approvals_ctx {
  api *a;
  ubuf b;
  int n, failed;
} approvals_ctx;

static int first_event(void *ud, const domain_event *e) {
  char **out = ud;
  *out = util_strdup(e->payload ? e->payload : "null");
  return 1;
}

/* Member key of the JSON object text as it is written there (malloc'd),
 * "null" when absent: the event's own bytes, not decoded and encoded again. */
static char *json_member(const char *text, const char *key) {
  const char *v;
  size_t vn;
  if (json_get(text, strlen(text), key, &v, &vn) != 1) return util_strdup("null");
  char *out = util_xmalloc(vn + 1);
  memcpy(out, v, vn);
  out[vn] = 0;
  return out;
}

typedef struct pending_of {
  approvals_ctx *x;
  const char *id;
} pending_of;

static int pending_item(void *ud, const approval_request *p) {
  pending_of *o = ud;
  approvals_ctx *x = o->x;
  char *event = NULL;
  if (p->event_seq > 0) store_domain_list(x->a->rd, o->id, p->event_seq - 1, first_event, &event);
  if (!event) event = util_strdup("null");
  char *args = json_member(event, "args"), *reason = json_member(event, "reason");
  char *qi = json_quote(o->id), *qr = json_quote(p->request_id), *qt = json_quote(p->tool), *qk = json_quote(p->kind);
  char dl[32] = "null";
  if (p->deadline >= 0) snprintf(dl, sizeof dl, "%lld", (long long)p->deadline);
  char *item = util_fmt("%s{\"session_id\":%s,\"request_id\":%s,\"tool\":%s,\"kind\":%s,\"arguments\":%s,"
                        "\"reason\":%s,\"since\":%lld,\"deadline\":%s,\"request\":%s}",
                        x->n ? "," : "", qi, qr, qt, qk, args, reason, (long long)p->since, dl, event);
  ubuf_add(&x->b, item, strlen(item));
  x->n++;
  free(item);
  free(qi);
  free(qr);
  free(qt);
  free(qk);
  free(args);
  free(reason);
  free(event);
  return 0;
}

/* Every pending request of a session (several when a turn asked together). */
static int pending_row(void *ud, const wf_row *w) {
  approvals_ctx *x = ud;
  char err[512];
  pending_of o = {x, w->id};
  if (approval_each_pending(x->a->rd, w->id, pending_item, &o, err, sizeof err) != 0) {
    x->failed = 1;
    return 1;
  }
  return 0;
}

static void h_approvals(api *a, httpd_req *r, ctx *c) {
  (void)c;
  approvals_ctx x = {a, {0}, 0, 0};
  ubuf_add(&x.b, "{\"approvals\":[", 14);
  if (store_wf_list(a->rd, "waiting", pending_row, &x) != STORE_OK || x.failed) {
    ubuf_free(&x.b);
    return reply_store_error(a, r, a->rd);
  }
  ubuf_add(&x.b, "]}", 3);
  reply(r, 200, x.b.p, NULL);
}

/* A JSON list being built from a store scan: items joined by commas. */
typedef struct json_items {
  ubuf b;
  int n;
} json_items;

static void items_add(json_items *x, char *json) {
  if (x->n++) ubuf_add(&x->b, ",", 1);
  ubuf_add(&x->b, json, strlen(json));
  free(json);
}

/* Answers {"KEY":[items]} when the scan succeeded (rc), else the store's error. */
static void reply_items(api *a, httpd_req *r, const char *key, json_items *x, int rc) {
  if (rc != STORE_OK) {
    ubuf_free(&x->b);
    return reply_store_error(a, r, a->rd);
  }
  char *out = util_fmt("{\"%s\":[%.*s]}", key, (int)x->b.n, x->b.p ? x->b.p : "");
  ubuf_free(&x->b);
  reply(r, 200, out, NULL);
}

static int delivery_item(void *ud, const delivery_row *d) {
  items_add(ud, view_delivery_json(d));
  return 0;
}

/* GET /v1/triggers/{name}/deliveries: the newest first ("*": requests to no trigger). */
static void h_deliveries(api *a, httpd_req *r, ctx *c) {
  int64_t limit;
  if (query_int(r, "limit", 50, 1000, &limit) != 0) return;
  if (limit == 0) limit = 50;
  json_items x = {{0}, 0};
  reply_items(a, r, "deliveries", &x, store_delivery_list(a->rd, c->p1, (int)limit, delivery_item, &x));
}

/* ----------------------------------------------------------- schedules --- */

static int schedule_item(void *ud, const schedule_row *r) {
  items_add(ud, schedule_json(r));
  return 0;
}

static void h_schedules(api *a, httpd_req *r, ctx *c) {
  (void)c;
  json_items x = {{0}, 0};
  reply_items(a, r, "schedules", &x, store_schedule_list(a->rd, schedule_item, &x));
}

static void h_schedule(api *a, httpd_req *r, ctx *c) {
  json_items x = {{0}, 0};
  int found = store_schedule_get(a->rd, c->p1, schedule_item, &x);
  if (found < 0) return reply_store_error(a, r, a->rd);
  if (found == 0) return reply_error(r, 404, "unknown schedule '%.80s'", c->p1);
  ubuf_add(&x.b, "", 1);
  reply(r, 200, x.b.p, NULL);
}

/* A schedule write answered once committed: the schedule as it is then. */
static void schedule_written(api *a, httpd_req *r, int status, const char *name, int rc, const char *err) {
  if (rc != 0) {
    if (store_down(a, r)) return;
    if (rc == SCHEDULE_UNKNOWN) return reply_error(r, 404, "unknown schedule '%.80s'", name);
    return reply_error(r, rc == SCHEDULE_TAKEN ? 409 : 400, "%s", err);
  }
  schedules_poke(a->schedules);
  json_items x = {{0}, 0};
  store_schedule_get(engine_store(a->e), name, schedule_item, &x); /* from the batch: not committed yet */
  ubuf_add(&x.b, "", 1);
  char location[SCHEDULE_NAME_MAX + 32];
  snprintf(location, sizeof location, "/v1/schedules/%s", name);
  answer_when_committed(a, r, status, x.n ? x.b.p : util_fmt("{\"name\":\"%s\",\"deleted\":true}", name), NULL,
                        status == 201 ? location : NULL);
  if (!x.n) ubuf_free(&x.b);
}

static const char *SCHEDULE_KEYS[] = {"name", "cron", "tz", "workflow", "input", "overlap", "catchup_window",
                                      "jitter", NULL};

static void h_schedule_create(api *a, httpd_req *r, ctx *c) {
  (void)c;
  if (body_object(a, r, SCHEDULE_KEYS) != 0) return;
  char name[SCHEDULE_NAME_MAX + 1], cron[256], tz[128], workflow[256], overlap[32], catchup[32], jitter[32], err[1024];
  char path[PATH_MAX], why[PATH_MAX + 256];
  struct {
    const char *key;
    char *out;
    size_t n;
    int required;
  } f[] = {{"name", name, sizeof name, 1},   {"cron", cron, sizeof cron, 1},
           {"tz", tz, sizeof tz, 0},         {"workflow", workflow, sizeof workflow, 1},
           {"overlap", overlap, sizeof overlap, 0}, {"catchup_window", catchup, sizeof catchup, 0},
           {"jitter", jitter, sizeof jitter, 0}};
  for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
    int got = field_string(a, f[i].key, f[i].out, f[i].n);
    if (got < 0 || (got == 0 && f[i].required))
      return reply_error(r, 400, "\"%s\" %s a string of at most %zu bytes", f[i].key,
                         got == 0 ? "is required:" : "must be", f[i].n - 1);
    if (got == 0) *f[i].out = 0;
  }
  if (script_path(a, workflow, path, sizeof path, why, sizeof why) != 0) return reply_error(r, 400, "%s", why);
  char *input = field_json(a, "input");
  schedule_spec sp = {name, cron, *tz ? tz : NULL, path, input ? input : "{}", *overlap ? overlap : NULL,
                      SCHEDULE_DEFAULT_CATCHUP_MS, 0};
  const char *bad = *catchup && schedule_parse_duration(catchup, &sp.catchup_window_ms, err, sizeof err) != 0
                        ? "catchup_window"
                    : *jitter && schedule_parse_duration(jitter, &sp.jitter_ms, err, sizeof err) != 0 ? "jitter"
                                                                                                        : NULL;
  if (bad) {
    free(input);
    return reply_error(r, 400, "%s: %s", bad, err);
  }
  int64_t now = util_now_ms();
  int rc = schedule_check(&sp, now, err, sizeof err);
  if (rc == 0) rc = schedule_create_in(engine_store(a->e), &sp, now, err, sizeof err);
  free(input);
  schedule_written(a, r, 201, name, rc, err);
}

static void h_schedule_action(api *a, httpd_req *r, ctx *c, const char *action) {
  char err[1024], id[ENGINE_ID_MAX + 1];
  int64_t now = util_now_ms();
  store *st = engine_store(a->e);
  if (strcmp(action, "trigger") == 0) {
    int rc = schedule_trigger_in(a->e, c->p1, c->identity, now, id, sizeof id, err, sizeof err);
    if (rc != 0) return schedule_written(a, r, 202, c->p1, rc, err);
    char location[ENGINE_ID_MAX + 32];
    snprintf(location, sizeof location, "/v1/workflows/%s", id);
    return answer_when_committed(a, r, 202, NULL, id, location);
  }
  int rc = strcmp(action, "delete") == 0 ? schedule_delete_in(st, c->p1, err, sizeof err)
                                         : schedule_set_paused_in(st, c->p1, strcmp(action, "pause") == 0, now, err,
                                                                  sizeof err);
  schedule_written(a, r, 200, c->p1, rc, err);
}

static void h_schedule_pause(api *a, httpd_req *r, ctx *c) { h_schedule_action(a, r, c, "pause"); }
static void h_schedule_resume(api *a, httpd_req *r, ctx *c) { h_schedule_action(a, r, c, "resume"); }
static void h_schedule_trigger(api *a, httpd_req *r, ctx *c) { h_schedule_action(a, r, c, "trigger"); }
static void h_schedule_delete(api *a, httpd_req *r, ctx *c) { h_schedule_action(a, r, c, "delete"); }

static const char *APPROVE_KEYS[] = {"approved", "reason", NULL};

static void h_approve(api *a, httpd_req *r, ctx *c) {
  if (body_object(a, r, APPROVE_KEYS) != 0) return;
  int approved = field_bool(a, "approved");
  if (approved < 0) return reply_error(r, 400, "\"approved\" is required: true or false");
  char reason[APPROVAL_REASON_MAX + 1] = "";
  if (field_string(a, "reason", reason, sizeof reason) < 0)
    return reply_error(r, 400, "\"reason\" must be a string of at most %d bytes", APPROVAL_REASON_MAX);
  wf_row w;
  if (!find_for_write(a, r, c->p1, &w)) return;
  wf_row_free(&w);
  /* the approver is the token's identity, never anything the body says */
  approval_decision d = {c->p2, approved, c->identity, reason};
  approval_request done;
  char err[1024];
  if (approval_answer_in_batch(engine_store(a->e), c->p1, &d, &done, err, sizeof err) != 0) {
    if (store_down(a, r)) return;
    int bad = strncmp(err, "invalid", 7) == 0 || strncmp(err, "the reason", 10) == 0;
    return reply_error(r, bad ? 400 : 409, "%s", err);
  }
  engine_dispatch_now(a->e);
  char *qi = json_quote(c->p1), *qr = json_quote(done.request_id), *qa = json_quote(c->identity),
       *qt = json_quote(done.tool), *qk = json_quote(done.kind);
  answer_when_committed(a, r, 200,
                        util_fmt("{\"session_id\":%s,\"request_id\":%s,\"approved\":%s,\"approver\":%s,\"tool\":%s,"
                                 "\"kind\":%s}",
                                 qi, qr, approved ? "true" : "false", qa, qt, qk),
                        NULL, NULL);
  free(qi);
  free(qr);
  free(qa);
  free(qt);
  free(qk);
}

/* ----------------------------------------------------------- metrics --- */

/* ------------------------------------------------------------ webhooks --- */

typedef struct headers_json {
  ubuf b;
  int n;
  const char *bad; /* a header whose name or value is not UTF-8 */
} headers_json;

static int add_header(void *ud, const char *name, const char *value) {
  headers_json *h = ud;
  char err[8];
  if (json_check_text(name, strlen(name), "h", err, sizeof err) || json_check_text(value, strlen(value), "h", err, sizeof err)) {
    h->bad = name;
    return 1;
  }
  /* a repeated header reaches the trigger as one list (RFC 9110): a second
   * signature header makes the pair fail verification, never pick one */
  char lower[256];
  size_t i = 0;
  for (; name[i] && i < sizeof lower - 1; i++) lower[i] = (char)tolower((unsigned char)name[i]);
  lower[i] = 0;
  char *k = json_quote(lower), *v = json_quote(value);
  if (h->n++) ubuf_add(&h->b, ",", 1);
  ubuf_add(&h->b, "[", 1);
  ubuf_add(&h->b, k, strlen(k));
  ubuf_add(&h->b, ",", 1);
  ubuf_add(&h->b, v, strlen(v));
  ubuf_add(&h->b, "]", 1);
  free(k);
  free(v);
  return 0;
}

typedef struct delivery_found {
  char wf_id[ENGINE_ID_MAX + 1];
} delivery_found;

static int found_delivery(void *ud, const delivery_row *d) {
  delivery_found *f = ud;
  snprintf(f->wf_id, sizeof f->wf_id, "%s", d->wf_id ? d->wf_id : "");
  return 1;
}

/* Records the delivery and answers once that is committed. */
static void hook_answer(api *a, httpd_req *r, delivery_row *d, const char *message) {
  d->received_at = util_now_ms();
  if (!d->detail && strcmp(d->outcome, "started") != 0) d->detail = message; /* why, in the record too */
  if (store_delivery_put(engine_store(a->e), d) < 0 && store_down(a, r)) return;
  char *qo = json_quote(d->outcome), *qm = json_quote(message ? message : ""), *qt = json_quote(d->trigger);
  char *qd = d->delivery && *d->delivery ? json_quote(d->delivery) : util_strdup("null");
  char *qw = d->wf_id ? json_quote(d->wf_id) : util_strdup("null");
  char *body = d->status >= 400
                   ? util_fmt("{\"error\":{\"status\":%d,\"message\":%s},\"outcome\":%s,\"trigger\":%s,\"delivery\":%s}",
                              d->status, qm, qo, qt, qd)
                   : util_fmt("{\"outcome\":%s,\"trigger\":%s,\"delivery\":%s,\"workflow_id\":%s,\"message\":%s}", qo, qt,
                              qd, qw, qm);
  char location[ENGINE_ID_MAX + 32];
  if (d->wf_id) snprintf(location, sizeof location, "/v1/workflows/%s", d->wf_id);
  answer_when_committed(a, r, d->status, body, NULL, d->wf_id && d->status < 300 ? location : NULL);
  free(qo), free(qm), free(qt), free(qd), free(qw);
}

/* A string field of the hook's answer on the api's Lua stack top into out
 * ("" when absent). Returns 1 when it had to be cut, at a UTF-8 boundary (a
 * record PostgreSQL takes, an id never silently shortened). */
static int answer_field(lua_State *L, const char *key, char *out, size_t n) {
  lua_getfield(L, -1, key);
  size_t len = 0;
  const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : "";
  size_t k = len < n ? len : n - 1;
  if (k < len)
    while (k > 0 && ((unsigned char)v[k] & 0xC0) == 0x80) k--;
  memcpy(out, v, k);
  out[k] = 0;
  lua_pop(L, 1);
  return k < len;
}

/* POST /hooks/{name}: the trigger verifies the exact bytes and maps the
 * delivery (worker.trigger, lua/triggers.lua); here it is deduplicated and the
 * workflow started, the delivery recorded in the same batch, and the sender
 * answered only once that is durable: an accepted delivery is never lost and
 * never started twice. */
static void h_hook(api *a, httpd_req *r, ctx *c) {
  delivery_row d = {0};
  d.trigger = c->p1;
  size_t nl = strlen(c->p1), ok_chars = strspn(c->p1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-");
  if (nl > 64 || ok_chars != nl) { /* no trigger can have it: kept with the others to no trigger */
    d.trigger = "*", d.outcome = "rejected", d.status = 404;
    return hook_answer(a, r, &d, "no trigger answers this path (trigger routes are 1-64 of A-Z a-z 0-9 _ -)");
  }
  if (!a->triggers_dir) {
    d.outcome = "rejected", d.status = 404;
    return hook_answer(a, r, &d, "no trigger answers this: the server has no workflows directory (--workflows DIR) "
                                 "and so no triggers/ in it");
  }
  size_t len;
  const char *body = httpd_body(r, &len);
  char err[512];
  if (json_check_text(body, len, "the body", err, sizeof err) != 0) {
    d.outcome = "rejected", d.status = 400;
    return hook_answer(a, r, &d, err);
  }
  headers_json h = {0};
  httpd_each_header(r, add_header, &h);
  if (h.bad) {
    ubuf_free(&h.b);
    d.outcome = "rejected", d.status = 400;
    return hook_answer(a, r, &d, "a header is not UTF-8 text");
  }
  ubuf_add(&h.b, "", 1);
  /* the call's args, appended (not formatted: the body may be 25 MB); the
   * headers as [name, value] pairs, which Lua joins when one repeats */
  char *qdir = json_quote(a->triggers_dir), *qname = json_quote(c->p1), *qbody = json_quote(body), now[64];
  snprintf(now, sizeof now, "],\"now\":%lld,\"body\":", (long long)(util_now_ms() / 1000));
  ubuf p = {0};
  const char *parts[] = {"{\"args\":{\"dir\":", qdir, ",\"name\":", qname, ",\"header_list\":[", h.b.p ? h.b.p : "", now,
                         qbody, "}}", NULL};
  for (const char **q = parts; *q; q++) ubuf_add(&p, *q, strlen(*q));
  ubuf_add(&p, "", 1);
  free(qdir), free(qname), free(qbody);
  ubuf_free(&h.b);
  int ok = 0;
  char *json = NULL;
  int done = engine_hook_now(a->e, "trigger", p.p, &ok, &json);
  ubuf_free(&p);
  lua_State *L = a->L;
  lua_settop(L, 0);
  if (!done || !ok || json_decode_safe(L, json, strlen(json), err, sizeof err) != 0 || !lua_istable(L, -1)) {
    d.outcome = "rejected", d.status = 500;
    char *msg = util_fmt("the trigger could not run: %s", !done ? "it waited for something" : json ? json : err);
    hook_answer(a, r, &d, msg);
    free(msg);
    free(json);
    lua_settop(L, 0);
    return;
  }
  free(json);
  char outcome[16], detail[1024], delivery[256], workflow[256], id[ENGINE_ID_MAX + 1];
  answer_field(L, "outcome", outcome, sizeof outcome);
  answer_field(L, "detail", detail, sizeof detail);
  answer_field(L, "delivery", delivery, sizeof delivery); /* at most 200 bytes (lua/triggers.lua) */
  int long_name = answer_field(L, "workflow", workflow, sizeof workflow);
  int long_id = answer_field(L, "id", id, sizeof id);
  lua_getfield(L, -1, "status");
  d.status = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  char *input = field_json(a, "input");
  lua_settop(L, 0);
  d.delivery = delivery;
  if (strcmp(outcome, "start") != 0) {
    d.outcome = strcmp(outcome, "ignored") == 0 ? "ignored" : "rejected";
    /* deliveries to no trigger are kept together under "*" (no route has that
     * name), so a sender guessing names cannot spread rows over many keys */
    if (d.status == 404) d.trigger = "*";
    if (d.status < 200 || d.status > 599) d.status = 500;
    d.detail = detail;
    free(input);
    return hook_answer(a, r, &d, detail);
  }
  store *st = engine_store(a->e);
  delivery_found f = {""};
  int seen = *delivery ? store_delivery_find(st, c->p1, delivery, found_delivery, &f) : 0;
  if (seen < 0) {
    free(input);
    return reply_store_error(a, r, st);
  }
  if (seen == 1) {
    free(input);
    d.outcome = "duplicate", d.status = 200, d.wf_id = f.wf_id;
    char *msg = util_fmt("delivery %s was accepted before (workflow %s): this one starts nothing", delivery, f.wf_id);
    hook_answer(a, r, &d, msg);
    return free(msg);
  }
  char path[PATH_MAX], why[PATH_MAX + 256];
  if (long_name || long_id) snprintf(why, sizeof why, "its %s is too long", long_id ? "id" : "workflow name");
  if (long_name || long_id || script_path(a, workflow, path, sizeof path, why, sizeof why) != 0 ||
      (*id && engine_check_id(id, why, sizeof why) != 0)) {
    free(input);
    d.outcome = "rejected", d.status = 500;
    char *msg = util_fmt("the trigger's answer cannot start: %s", why);
    d.detail = msg;
    hook_answer(a, r, &d, msg);
    return free(msg);
  }
  if (!*id) engine_generate_id(workflow, id, sizeof id);
  char identity[sizeof c->p1 + 16];
  snprintf(identity, sizeof identity, "trigger:%s", c->p1);
  char *with = engine_input_with_identity(input ? input : "{}", identity, 1, err, sizeof err);
  free(input);
  if (!with) {
    d.outcome = "rejected", d.status = 500;
    char *msg = util_fmt("the trigger's input cannot start: %s", err);
    d.detail = msg;
    hook_answer(a, r, &d, msg);
    return free(msg);
  }
  d.wf_id = id;
  wf_row w;
  int exists = store_wf_get(st, id, &w);
  if (exists < 0) {
    free(with);
    return reply_store_error(a, r, st);
  }
  if (exists == 1) {
    /* the same work (a PR head delivered twice under two ids) runs once */
    wf_row_free(&w);
    free(with);
    d.outcome = "existing", d.status = 200;
    char *msg = util_fmt("workflow %s exists: this delivery starts nothing", id);
    hook_answer(a, r, &d, msg);
    return free(msg);
  }
  int existed = 0;
  int rc = engine_submit(a->e, id, path, with, &existed, err, sizeof err);
  free(with);
  if (rc != 0) {
    if (store_down(a, r)) return;
    d.outcome = "rejected", d.status = 500, d.wf_id = NULL;
    d.detail = err;
    return hook_answer(a, r, &d, err);
  }
  d.outcome = "started", d.status = 202;
  hook_answer(a, r, &d, "accepted: the workflow starts");
  (void)c;
}

static const double COMMIT_BUCKETS[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000};

static void declare_metrics(metrics *m) {
  metrics_declare(m, "engine_workflows", METRIC_GAUGE, "Workflows by status.", NULL, 0);
  metrics_declare(m, "engine_activity_duration_seconds", METRIC_HISTOGRAM,
                  "Activity attempts by name and outcome, from start to end.", NULL, 0);
  metrics_declare(m, "engine_tasks", METRIC_GAUGE, "Durable tasks queued, by kind (workflow, activity, timer, ...).",
                  NULL, 0);
  metrics_declare(m, "engine_timers_pending", METRIC_GAUGE, "Durable timers not yet fired.", NULL, 0);
  metrics_declare(m, "engine_commits_total", METRIC_COUNTER, "Group commits of the store.", NULL, 0);
  metrics_declare(m, "engine_store_round_trips_total", METRIC_COUNTER,
                  "Round trips the worker's loop waited for the database server (PostgreSQL; 0 on SQLite).", NULL, 0);
  metrics_declare(m, "engine_commit_writes", METRIC_HISTOGRAM, "Rows written per group commit.", COMMIT_BUCKETS,
                  sizeof COMMIT_BUCKETS / sizeof *COMMIT_BUCKETS);
  metrics_declare(m, "engine_http_connections", METRIC_GAUGE, "Open HTTP connections.", NULL, 0);
  metrics_declare(m, "engine_sse_streams", METRIC_GAUGE, "Open Server-Sent Events streams.", NULL, 0);
  metrics_declare(m, "engine_sandboxes_live", METRIC_GAUGE, "Sandboxes of unfinished sessions.", NULL, 0);
  metrics_declare(m, "engine_model_tokens_total", METRIC_COUNTER, "Model tokens by provider and kind.", NULL, 0);
  metrics_declare(m, "engine_approvals_pending", METRIC_GAUGE, "Approval requests waiting for an answer.", NULL, 0);
  metrics_declare(m, "engine_slots", METRIC_GAUGE, "Slots of concurrency limits and caps, held or queued, by pool.",
                  NULL, 0);
}

typedef struct group_ctx {
  metrics *m;
  const char *family, *label;
  int64_t timers;
} group_ctx;

static int set_group(void *ud, const char *key, int64_t n) {
  group_ctx *g = ud;
  if (g->label) {
    const char *labels[] = {g->label, key ? key : "", NULL};
    metrics_set(g->m, g->family, labels, (double)n);
  } else {
    metrics_set(g->m, g->family, NULL, (double)n);
  }
  if (key && strcmp(key, "timer") == 0) g->timers = n;
  return 0;
}

/* key "POOL\x1fSTATE" (store_group_count) */
static int set_slots(void *ud, const char *key, int64_t n) {
  metrics *m = ud;
  const char *us = key ? strrchr(key, '\x1f') : NULL;
  if (!us) return 0;
  char pool[160];
  snprintf(pool, sizeof pool, "%.*s", (int)(us - key), key);
  const char *labels[] = {"pool", pool, "state", us + 1, NULL};
  metrics_set(m, "engine_slots", labels, (double)n);
  return 0;
}

static int count_one(void *ud, const approval_request *p) {
  (void)p;
  ((approvals_ctx *)ud)->n++;
  return 0;
}

static int count_pending(void *ud, const wf_row *w) {
  approvals_ctx *x = ud;
  char err[256];
  approval_each_pending(x->a->rd, w->id, count_one, x, err, sizeof err);
  return 0;
}

static void h_metrics(api *a, httpd_req *r, ctx *c) {
  (void)c;
  metrics *m = a->m;
  metrics_clear(m, "engine_workflows");
  metrics_clear(m, "engine_tasks");
  metrics_clear(m, "engine_slots");
  group_ctx g = {m, "engine_workflows", "status", 0};
  int bad = store_group_count(a->rd, STORE_GROUP_STATUS, NULL, set_group, &g) != STORE_OK;
  g = (group_ctx){m, "engine_tasks", "kind", 0};
  bad |= store_group_count(a->rd, STORE_GROUP_TASKS, NULL, set_group, &g) != STORE_OK;
  metrics_set(m, "engine_timers_pending", NULL, (double)g.timers);
  /* the unfinished sessions that reported a sandbox ready (it is destroyed before they finish) */
  static const char *const sandbox_ready[] = {"sandbox.ready", NULL};
  group_ctx sb = {m, "engine_sandboxes_live", NULL, 0};
  bad |= store_group_count(a->rd, STORE_GROUP_LIVE_WITH, sandbox_ready, set_group, &sb) != STORE_OK;
  bad |= store_group_count(a->rd, STORE_GROUP_SLOTS, NULL, set_slots, m) != STORE_OK;
  approvals_ctx x = {a, {0}, 0, 0};
  bad |= store_wf_list(a->rd, "waiting", count_pending, &x) != STORE_OK;
  if (bad) return reply_store_error(a, r, a->rd);
  metrics_set(m, "engine_approvals_pending", NULL, x.n);
  httpd_stats hs;
  httpd_get_stats(a->http, &hs);
  metrics_set(m, "engine_http_connections", NULL, hs.connections);
  metrics_set(m, "engine_sse_streams", NULL, hs.streams);
  metrics_set(m, "engine_store_round_trips_total", NULL, (double)store_round_trips(engine_store(a->e)));
  char *text = metrics_render(m);
  httpd_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text), NULL);
}

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
    {"GET", "/metrics", SCOPE_READ, h_metrics},
    {"GET", "/v1/openapi.json", 0, h_openapi},
    {"POST", "/v1/workflows", SCOPE_START, h_start},
    {"GET", "/v1/workflows", SCOPE_READ, h_list},
    {"GET", "/v1/workflows/{id}", SCOPE_READ, h_show},
    {"GET", "/v1/workflows/{id}/events", SCOPE_READ, h_events},
    {"GET", "/v1/workflows/{id}/history", SCOPE_READ, h_history},
    {"POST", "/v1/workflows/{id}/signals/{name}", SCOPE_SIGNAL, h_signal},
    {"POST", "/v1/workflows/{id}/cancel", SCOPE_CANCEL, h_cancel},
    {"POST", "/v1/workflows/{id}/messages", SCOPE_SIGNAL, h_message},
    {"GET", "/v1/approvals", SCOPE_READ, h_approvals},
    {"POST", "/v1/workflows/{id}/approvals/{request_id}", SCOPE_APPROVE, h_approve},
    {"GET", "/v1/events", SCOPE_READ, h_all_events},
    {"GET", "/v1/whoami", 0, h_whoami}, /* authenticates itself: see h_whoami */
    {"GET", "/v1/workflows/{id}/artifacts", SCOPE_READ, h_artifacts},
    {"GET", "/v1/workflows/{id}/artifacts/{sha256}", SCOPE_READ, h_artifact},
    /* no token: each trigger verifies its sender's signature (lua/triggers.lua) */
    {"POST", "/hooks/{name}", 0, h_hook},
    {"GET", "/v1/triggers/{name}/deliveries", SCOPE_READ, h_deliveries},
    {"GET", "/v1/schedules", SCOPE_READ, h_schedules},
    {"POST", "/v1/schedules", SCOPE_START, h_schedule_create},
    {"GET", "/v1/schedules/{name}", SCOPE_READ, h_schedule},
    {"DELETE", "/v1/schedules/{name}", SCOPE_START, h_schedule_delete},
    {"POST", "/v1/schedules/{name}/pause", SCOPE_START, h_schedule_pause},
    {"POST", "/v1/schedules/{name}/resume", SCOPE_START, h_schedule_resume},
    {"POST", "/v1/schedules/{name}/trigger", SCOPE_START, h_schedule_trigger},
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
      if (np > 1 || pct_decode(path, sl, dst, sizeof c->p1) != 0) return -1;
      np++;
    } else if (pl != sl || strncmp(pattern, path, pl) != 0) {
      return 0;
    }
    pattern += pl;
    path += sl;
  }
  return *pattern == 0 && *path == 0;
}

/* Anonymous access is for programs on this machine (curl, scripts), not for
 * web pages its user visits: a browser sends Origin with every cross-site
 * POST (one of text/plain needs no preflight, so the page never has to read
 * the answer to start or approve something), and a page that reaches us by
 * DNS rebinding names its own host in Host. A page of this server's own
 * origin (the web page it serves) is local like its Host. */
static int local_client(httpd_req *r) {
  const char *host = httpd_host(r), *origin = httpd_header(r, "Origin");
  /* a page this server itself served (same origin, a loopback Host) may ask */
  if (origin && (!host || strncmp(origin, "http://", 7) != 0 || strcmp(origin + 7, host) != 0)) return 0;
  if (!host) return 1; /* HTTP/1.0 */
  const char *from = host, *to, *port;
  if (host[0] == '[') { /* "[::1]:7420" */
    from = host + 1;
    to = strchr(from, ']');
    if (!to) return 0;
    port = to + 1;
  } else {
    to = strchr(host, ':');
    if (!to) to = host + strlen(host);
    port = to;
  }
  if (*port && (*port != ':' || strspn(port + 1, "0123456789") != strlen(port + 1))) return 0;
  char name[64];
  if ((size_t)(to - from) >= sizeof name) return 0;
  memcpy(name, from, (size_t)(to - from));
  name[to - from] = 0;
  struct in_addr v4;
  struct in6_addr v6;
  if (strcasecmp(name, "localhost") == 0) return 1;
  if (inet_pton(AF_INET, name, &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  return inet_pton(AF_INET6, name, &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

/* Who is asking: the token's identity and scopes, or (with no token in the
 * database, on loopback only) "anonymous" with every scope. 0, or -1 answered. */
static int authenticate(api *a, httpd_req *r, ctx *c) {
  int64_t live = token_live_count(a->rd);
  if (live < 0) {
    reply_store_error(a, r, a->rd);
    return -1;
  }
  const char *auth = httpd_header(r, "Authorization");
  static const char *challenge[] = {"WWW-Authenticate: Bearer realm=\"engine\"", NULL};
  if (live == 0 && !auth) {
    if (!a->loopback) {
      reply_error(r, 401, "no API token exists: create one with engine token create NAME --scopes ...");
      return -1;
    }
    if (!local_client(r)) {
      reply_error(r, 401,
                  "without a token only local programs are served, and this request came from a web page "
                  "(an Origin header) or for another host name (Host): create a token with engine token create "
                  "NAME --scopes ...");
      return -1;
    }
    snprintf(c->identity, sizeof c->identity, "anonymous");
    c->scopes = SCOPE_ADMIN;
    return 0;
  }
  if (!auth || strncasecmp(auth, "Bearer ", 7) != 0) {
    reply_error_h(r, 401, challenge, "a token is required: Authorization: Bearer TOKEN");
    return -1;
  }
  const char *tok = auth + 7;
  while (*tok == ' ') tok++;
  char name[TOKEN_NAME_MAX + 1];
  int ok = token_verify(a->rd, tok, strlen(tok), name, &c->scopes);
  if (ok < 0) {
    reply_store_error(a, r, a->rd);
    return -1;
  }
  if (ok == 0) {
    reply_error_h(r, 401, challenge, "the token is not valid (or revoked)");
    return -1;
  }
  snprintf(c->identity, sizeof c->identity, "token:%s", name);
  return 0;
}

static const char *scope_name(unsigned scope) {
  switch (scope) {
  case SCOPE_READ: return "read";
  case SCOPE_START: return "start";
  case SCOPE_SIGNAL: return "signal";
  case SCOPE_APPROVE: return "approve";
  case SCOPE_CANCEL: return "cancel";
  default: return "admin";
  }
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
      return reply_error_h(r, 405, headers, "method %.16s is not allowed on %.200s (allowed: %s)", method, path, allow);
    }
    if (bad_param) return reply_error(r, 400, "a path segment is not valid (a bad %%-escape, a NUL byte or too long)");
    return reply_error(r, 404, "no such route: %s %.200s (see GET /v1/openapi.json)", method, path);
  }
  if (found->scope) {
    if (authenticate(a, r, &c) != 0) return;
    if (!token_allows(c.scopes, found->scope))
      return reply_error(r, 403, "this token lacks the '%s' scope", scope_name(found->scope));
  } else {
    snprintf(c.identity, sizeof c.identity, "anonymous");
  }
  /* an id no workflow can have is a bad request, not an unknown workflow */
  char err[512];
  if (strstr(found->pattern, "{id}") && engine_check_id(c.p1, err, sizeof err) != 0)
    return reply_error(r, 400, "%s", err);
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
  declare_metrics(a->m);
  return a;
}

void api_engine_config(api *a, engine_config *cfg) {
  cfg->on_status = on_status;
  cfg->on_commit = on_commit;
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
  if (store_open(store_path(engine_store(e)), 1, &a->rd, err, errlen) != STORE_OK) return -1;
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
  if (a->L) lua_close(a->L);
  metrics_free(a->m);
  free(a->workflows_dir);
  free(a->triggers_dir);
  free(a);
}
