/* api_request: what a route reads of its request: the path's and the query's
 * parameters (percent-decoded), the JSON body (only known keys), the script a
 * start names (inside the workflows directory), the workflow it is about, the
 * caller's trace context. */
#include <ctype.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api_internal.h"
#include "json.h"
#include "log.h"

/* ------------------------------------------------------------ request --- */

/* Percent-decodes a path segment or query value into out: -1 for a bad
 * escape, a NUL byte or more than n - 1 bytes. */
int api_pct_decode(const char *s, size_t len, char *out, size_t n) {
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
int api_query(httpd_req *r, const char *name, char *out, size_t n) {
  const char *v = httpd_query(r, name);
  if (!v) return 0;
  if (api_pct_decode(v, strlen(v), out, n) != 0) {
    api_reply_error(r, 400, "query parameter '%s' is not valid (a bad %%-escape, a NUL byte or too long)", name);
    return -1;
  }
  return 1;
}

/* A non-negative integer query parameter: 0 ok (dflt when absent), -1 answered 400. */
int api_query_int(httpd_req *r, const char *name, int64_t dflt, int64_t max, int64_t *out) {
  char buf[32];
  int got = api_query(r, name, buf, sizeof buf);
  if (got < 0) return -1;
  *out = dflt;
  if (got == 0) return 0;
  char *end;
  long long v = strtoll(buf, &end, 10);
  if (!*buf || *end || v < 0 || v > max) {
    api_reply_error(r, 400, "query parameter '%s' must be a whole number from 0 to %lld", name, (long long)max);
    return -1;
  }
  *out = v;
  return 0;
}

/* The body decoded as a JSON object of only the allowed keys, left on top of
 * a->L. An empty body is {}. Returns 0, or -1 answered 400. */
int api_body_object(api *a, httpd_req *r, const char *const *allowed) {
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
    api_reply_error(r, 400, "the request body is not valid JSON: %s", err);
    return -1;
  }
  const char *first = body + strspn(body, " \t\r\n");
  if (!lua_istable(a->L, -1) || *first != '{') {
    api_reply_error(r, 400, "the request body must be a JSON object");
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
      api_reply_error(r, 400, "unknown field '%s' in the request body (known: %s)", shown, list);
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
char *api_field_json(api *a, const char *key) {
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
int api_field_bool(api *a, const char *key) {
  int t = lua_getfield(a->L, -1, key), v = t == LUA_TNIL ? -1 : t == LUA_TBOOLEAN ? lua_toboolean(a->L, -1) : -2;
  lua_pop(a->L, 1);
  return v;
}

/* A string field copied into out: 1, 0 absent, -1 not a string (or too long). */
int api_field_string(api *a, const char *key, char *out, size_t n) {
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

/* ---------------------------------------------------------- scripts --- */

/* The script a start names, inside the workflows directory: a relative path
 * of plain names ending in .lua, whose real path (symlinks followed) stays
 * inside. Returns 0 with path, -2 when there is no such file, or -1 for a
 * name that is not valid (or a server without the directory), with msg
 * saying why. */
int api_script_path(api *a, const char *script, char *path, size_t n, char *msg, size_t msgn) {
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
    return -2;
  }
  size_t dl = strlen(a->workflows_dir);
  if (strncmp(real, a->workflows_dir, dl) != 0 || real[dl] != '/') {
    snprintf(msg, msgn, "invalid script '%s': it resolves outside the workflows directory", script);
    return -1;
  }
  snprintf(path, n, "%s", joined);
  return 0;
}

int api_resolve_script(api *a, httpd_req *r, const char *script, char *path, size_t n) {
  char msg[PATH_MAX + 256];
  if (api_script_path(a, script, path, n, msg, sizeof msg) == 0) return 0;
  api_reply_error(r, 400, "%s", msg);
  return -1;
}

/* --------------------------------------- the workflow a route is about --- */

/* The workflow a write is about, from the worker's own view (its batch
 * included): 1 found (and w filled), else answered 404 or 503. */
int api_find_for_write(api *a, httpd_req *r, const char *id, wf_row *w) {
  int found = store_wf_get(engine_store(a->e), id, w);
  if (found == 1) return 1;
  if (found < 0) {
    api_reply_store_error(a, r, engine_store(a->e));
    return 0;
  }
  char err[512];
  engine_unknown_id(id, err, sizeof err);
  api_reply_error(r, 404, "%s", err);
  return 0;
}

/* The workflow a read is about (committed state): 1, or answered 404/503. */
int api_find_for_read(api *a, httpd_req *r, const char *id, wf_row *w) {
  int found = store_wf_get(a->rd, id, w);
  if (found == 1) return 1;
  if (found < 0) {
    api_reply_store_error(a, r, a->rd);
    return 0;
  }
  char err[512];
  engine_unknown_id(id, err, sizeof err);
  api_reply_error(r, 404, "%s", err);
  return 0;
}

/* The summary of workflow id into *s: 1, or 0 once answered 404 (unknown)
 * or 503 (the store could not be read). */
int api_load_summary(api *a, httpd_req *r, const char *id, view_summary *s) {
  char err[700];
  int found = view_summary_load(a->rd, id, s, err, sizeof err);
  if (found < 0) api_reply_error(r, found == STORE_ECORRUPT ? 500 : 503, "%s", err); /* a damaged log is no retry */
  if (found == 0) {
    engine_unknown_id(id, err, sizeof err);
    api_reply_error(r, 404, "%s", err);
  }
  return found == 1;
}

/* ---------------------------------------------------------- trace context --- */

typedef struct trace_headers {
  const char *traceparent;
  int ntraceparent;
  ubuf tracestate; /* repeated headers joined by commas, as HTTP reads them */
} trace_headers;

static int trace_header(void *ud, const char *name, const char *value) {
  trace_headers *t = ud;
  if (strcasecmp(name, "traceparent") == 0) {
    if (!t->ntraceparent++) t->traceparent = value;
  } else if (strcasecmp(name, "tracestate") == 0) {
    if (t->tracestate.n) ubuf_add(&t->tracestate, ",", 1);
    ubuf_add(&t->tracestate, value, strlen(value));
  }
  return 0;
}

int api_trace_context(httpd_req *r, trace_start *out) {
  trace_headers t = {NULL, 0, {0}};
  httpd_each_header(r, trace_header, &t);
  ubuf_add(&t.tracestate, "", 1);
  char why[160] = "", note[160] = "";
  int ok = 0;
  if (t.ntraceparent > 1) /* two parents: which one is the caller's cannot be told */
    snprintf(why, sizeof why, "%d traceparent headers", t.ntraceparent);
  else
    ok = trace_start_read(t.traceparent, t.tracestate.n > 1 ? t.tracestate.p : NULL, out, why, sizeof why, note,
                          sizeof note);
  if (!ok) memset(out, 0, sizeof *out);
  /* the W3C spec: an invalid header is ignored, the request goes on, and the
   * workflow starts a trace of its own */
  if (*why) log_msg(LOGL_DEBUG, "%s %s: ignored its traceparent: %s", httpd_method(r), httpd_path(r), why);
  if (*note) log_msg(LOGL_DEBUG, "%s %s: dropped its tracestate: %s", httpd_method(r), httpd_path(r), note);
  ubuf_free(&t.tracestate);
  return ok;
}
