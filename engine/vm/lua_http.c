/* lua_http: `local http = require "http"` in activities.
 *
 *   local res = http.request{url=..., method=, headers={name=value}, body=,
 *                            timeout=, connect_timeout=, idle_timeout= (seconds),
 *                            max_bytes=, unix_socket=, stream=false}
 *   -- res.status, res.headers (lower-case names), res.body
 *   -- with stream=true, returns once the headers are in; res:read() then
 *   -- yields until the next bytes (a string) or the end (nil); res:close().
 *   -- res:read_into(sink) hands the bytes to a C sink (a userdata whose
 *   -- metatable names an http_sink, e.g. a Docker demuxer) instead: no Lua
 *   -- string; it returns the byte count, or nil at the end.
 *
 * A stream holds at most STREAM_WINDOW unread bytes: past that the transfer
 * pauses until the reader takes them, so a slow reader (or a flood) costs a
 * window, not the flood.
 *
 * A request an activity makes carries its attempt's traceparent (and the
 * run's tracestate) when the worker gave it one (actvm_traceparent: tracing
 * is on), unless the script sets its own, so every model, MCP or GitHub call
 * joins the workflow's trace without its caller remembering; never over a
 * unix socket (the Docker engine's API is no service of the trace).
 *
 * HTTP error statuses are responses, not errors. Transport failures raise
 * {type=, message=}: ConnectionError, Timeout, IdleTimeout, ResponseTooLarge,
 * TransferError (the connection broke mid-response). The calling coroutine
 * yields while it waits; no thread per request. */
#include "lua_http.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "actvm.h"
#include "http.h"
#include "util.h"

#define RESPONSE_MT "engine.http_response"
#define STREAM_WINDOW ((size_t)256 << 10)

enum { W_NONE, W_HEADERS, W_DONE, W_READ, W_READ_INTO };

typedef struct hreq {
  http_call *call;
  act_call *ac; /* the activity attempt waiting on us, while W_* != W_NONE */
  int wait;
  int stream;
  int closed;
  const http_sink *sink; /* W_READ_INTO: where the bytes go (the userdata stays on the waiting stack) */
  void *sink_self;
} hreq;

static const char *error_type(int err) {
  switch (err) {
    case HTTP_ECONNECT: return "ConnectionError";
    case HTTP_ETIMEOUT: return "Timeout";
    case HTTP_EIDLE: return "IdleTimeout";
    case HTTP_ETOOLARGE: return "ResponseTooLarge";
    case HTTP_ECANCEL: return "Cancelled";
    default: return "TransferError";
  }
}

static void push_error(lua_State *L, int err, const char *msg) {
  lua_newtable(L);
  lua_pushstring(L, error_type(err));
  lua_setfield(L, -2, "type");
  lua_pushstring(L, msg);
  lua_setfield(L, -2, "message");
}

static void push_headers(lua_State *L, http_call *c) {
  lua_newtable(L);
  for (size_t i = 0; i < http_header_count(c); i++) {
    const char *n, *v;
    http_header_at(c, i, &n, &v);
    lua_pushstring(L, v);
    lua_setfield(L, -2, n);
  }
}

/* Takes what is buffered into the coroutine (a string), then lets the transfer go on. */
static void push_taken(lua_State *L, http_call *c) {
  size_t len;
  const char *data = http_take(c, &len);
  lua_pushlstring(L, data, len);
  http_resume(c);
}

/* The same into a sink, with no Lua string: pushes the byte count. */
static void feed_taken(lua_State *L, http_call *c, const http_sink *sink, void *self) {
  size_t len;
  const char *data = http_take(c, &len);
  sink->feed(self, data, len);
  lua_pushinteger(L, (lua_Integer)len);
  http_resume(c);
}

/* The attempt was abandoned (timeout, cancel): stop the transfer, resume nobody. */
static void cancel_op(void *op) {
  hreq *r = op;
  r->ac = NULL;
  r->wait = W_NONE;
  if (r->call) {
    http_release(r->call);
    r->call = NULL;
  }
}

/* Called by http.c outside curl callbacks; resumes the waiting coroutine when
 * what it waits for is there. The coroutine gets (true, value) or (false, err). */
static void on_event(void *ud) {
  hreq *r = ud;
  if (!r->ac || !r->call) return;
  http_call *c = r->call;
  act_call *ac = r->ac;
  lua_State *co = actvm_thread(ac);
  const char *msg;
  int err = http_done(c) ? http_error(c, &msg) : 0;
  switch (r->wait) {
    case W_HEADERS:
      if (!http_headers_done(c) && !http_done(c)) return;
      if (err && !http_headers_done(c)) {
        lua_pushboolean(co, 0);
        push_error(co, err, msg);
      } else {
        lua_pushboolean(co, 1);
        lua_pushnil(co); /* the continuation returns the response userdata */
      }
      break;
    case W_DONE:
      if (!http_done(c)) return;
      if (err) {
        lua_pushboolean(co, 0);
        push_error(co, err, msg);
      } else {
        size_t len;
        const char *body = http_take(c, &len);
        lua_pushboolean(co, 1);
        lua_createtable(co, 0, 3);
        lua_pushinteger(co, http_status(c));
        lua_setfield(co, -2, "status");
        push_headers(co, c);
        lua_setfield(co, -2, "headers");
        lua_pushlstring(co, body ? body : "", len);
        lua_setfield(co, -2, "body");
      }
      break;
    case W_READ:
    case W_READ_INTO:
      if (http_buffered(c) > 0) {
        lua_pushboolean(co, 1);
        if (r->wait == W_READ_INTO)
          feed_taken(co, c, r->sink, r->sink_self);
        else
          push_taken(co, c);
      } else if (http_done(c)) {
        if (err) {
          lua_pushboolean(co, 0);
          push_error(co, err, msg);
        } else {
          lua_pushboolean(co, 1);
          lua_pushnil(co);
        }
      } else {
        return;
      }
      break;
    default: return;
  }
  r->wait = W_NONE;
  r->ac = NULL;
  actvm_resume(ac, 2);
}

static hreq *check_response(lua_State *L) { return luaL_checkudata(L, 1, RESPONSE_MT); }

static int headers_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  int self = (int)ctx;
  if (!lua_toboolean(L, -2)) return lua_error(L);
  lua_pop(L, 2);
  hreq *r = lua_touserdata(L, self);
  /* status and headers become plain fields of a uservalue table */
  lua_createtable(L, 0, 2);
  lua_pushinteger(L, http_status(r->call));
  lua_setfield(L, -2, "status");
  push_headers(L, r->call);
  lua_setfield(L, -2, "headers");
  lua_setiuservalue(L, self, 1);
  lua_pushvalue(L, self);
  return 1;
}

static int done_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  int self = (int)ctx;
  if (!lua_toboolean(L, -2)) return lua_error(L);
  hreq *r = lua_touserdata(L, self);
  if (r->call) {
    http_release(r->call);
    r->call = NULL;
  }
  return 1;
}

static int read_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  if (!lua_toboolean(L, -2)) return lua_error(L);
  return 1;
}

/* The sink at index i: a userdata whose metatable holds an http_sink. */
static const http_sink *check_sink(lua_State *L, int i) {
  luaL_checktype(L, i, LUA_TUSERDATA);
  if (luaL_getmetafield(L, i, HTTP_SINK_FIELD) != LUA_TLIGHTUSERDATA) luaL_argerror(L, i, "not a byte sink");
  const http_sink *s = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return s;
}

/* res:read() -> next bytes, or nil at the end; raises on a broken transfer.
 * res:read_into(sink) -> the count of bytes fed to sink, or nil at the end. */
static int read_common(lua_State *L, const http_sink *sink) {
  hreq *r = check_response(L);
  if (!r->call || r->closed) {
    lua_pushnil(L);
    return 1;
  }
  if (http_buffered(r->call) > 0) {
    if (sink)
      feed_taken(L, r->call, sink, lua_touserdata(L, 2));
    else
      push_taken(L, r->call);
    return 1;
  }
  if (http_done(r->call)) {
    const char *msg;
    int err = http_error(r->call, &msg);
    if (err) {
      push_error(L, err, msg);
      return lua_error(L);
    }
    lua_pushnil(L);
    return 1;
  }
  act_call *ac = actvm_current(L);
  if (!ac) return luaL_error(L, "http: must be called inside an activity");
  if (!lua_isyieldable(L)) return luaL_error(L, "http: cannot wait here (not yieldable)");
  r->ac = ac;
  r->wait = sink ? W_READ_INTO : W_READ;
  r->sink = sink;
  r->sink_self = sink ? lua_touserdata(L, 2) : NULL;
  actvm_set_pending(ac, cancel_op, r);
  return lua_yieldk(L, 0, 0, read_k);
}

static int l_read(lua_State *L) {
  lua_settop(L, 1);
  return read_common(L, NULL);
}

static int l_read_into(lua_State *L) {
  const http_sink *sink = check_sink(L, 2);
  lua_settop(L, 2);
  return read_common(L, sink);
}

static int l_close(lua_State *L) {
  hreq *r = check_response(L);
  r->closed = 1;
  if (r->call) {
    http_release(r->call);
    r->call = NULL;
  }
  return 0;
}

static int l_gc(lua_State *L) {
  hreq *r = lua_touserdata(L, 1);
  if (r->call) {
    http_release(r->call);
    r->call = NULL;
  }
  return 0;
}

static int l_index(lua_State *L) {
  const char *k = luaL_checkstring(L, 2);
  if (strcmp(k, "read") == 0) {
    lua_pushcfunction(L, l_read);
    return 1;
  }
  if (strcmp(k, "read_into") == 0) {
    lua_pushcfunction(L, l_read_into);
    return 1;
  }
  if (strcmp(k, "close") == 0) {
    lua_pushcfunction(L, l_close);
    return 1;
  }
  if (lua_getiuservalue(L, 1, 1) != LUA_TTABLE) return 0;
  lua_getfield(L, -1, k);
  return 1;
}

static long seconds_ms(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  double v = luaL_optnumber(L, -1, 0);
  lua_pop(L, 1);
  char what[64], err[200];
  snprintf(what, sizeof what, "http.request: %s", k);
  if (util_check_seconds(v, what, err, sizeof err) != 0) luaL_error(L, "%s", err);
  return (long)(v * 1000.0);
}

/* http.request{...}: see the top of the file. */
static int l_request(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  act_call *ac = actvm_current(L);
  if (!ac) return luaL_error(L, "http.request must be called inside an activity");
  if (!lua_isyieldable(L)) return luaL_error(L, "http.request cannot wait here (not yieldable)");
  http_req q;
  memset(&q, 0, sizeof q);
  lua_getfield(L, 1, "url");
  q.url = luaL_checkstring(L, -1);
  lua_getfield(L, 1, "method");
  q.method = luaL_optstring(L, -1, NULL);
  lua_getfield(L, 1, "unix_socket");
  q.unix_socket = luaL_optstring(L, -1, NULL);
  lua_getfield(L, 1, "body");
  size_t blen = 0;
  q.body = luaL_optlstring(L, -1, NULL, &blen);
  q.body_len = blen;
  lua_getfield(L, 1, "stream");
  int stream = lua_toboolean(L, -1);
  q.timeout_ms = seconds_ms(L, 1, "timeout");
  q.connect_timeout_ms = seconds_ms(L, 1, "connect_timeout");
  q.idle_timeout_ms = seconds_ms(L, 1, "idle_timeout");
  lua_getfield(L, 1, "max_bytes");
  q.max_bytes = (size_t)luaL_optinteger(L, -1, 0);
  if (stream) q.window = STREAM_WINDOW;
  /* headers: {name = value}; "Name: value" lines live on the Lua stack */
  const char *lines[64 + 2]; /* and the trace's two */
  size_t n = 0;
  int own_traceparent = 0, own_tracestate = 0;
  if (lua_getfield(L, 1, "headers") == LUA_TTABLE) {
    int ht = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, ht) && n < 64) {
      if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
        return luaL_error(L, "http.request: headers must map names to strings");
      const char *v = lua_tostring(L, -1);
      if (strpbrk(v, "\r\n") || strpbrk(lua_tostring(L, -2), "\r\n: "))
        return luaL_error(L, "http.request: header %s has a forbidden character", lua_tostring(L, -2));
      own_traceparent |= strcasecmp(lua_tostring(L, -2), "traceparent") == 0;
      own_tracestate |= strcasecmp(lua_tostring(L, -2), "tracestate") == 0;
      lua_pushfstring(L, "%s: %s", lua_tostring(L, -2), v);
      lines[n++] = lua_tostring(L, -1);
      lua_insert(L, ht); /* keep the string alive below the iteration */
      ht++;
      lua_pop(L, 1);
    }
  }
  /* the attempt's trace, unless the script hands on one of its own */
  const char *traceparent = q.unix_socket || own_traceparent ? NULL : actvm_traceparent(ac);
  const char *tracestate = traceparent && !own_tracestate ? actvm_tracestate(ac) : NULL;
  if (traceparent) lines[n++] = lua_pushfstring(L, "traceparent: %s", traceparent);
  if (tracestate) lines[n++] = lua_pushfstring(L, "tracestate: %s", tracestate);
  q.headers = lines;
  q.nheaders = n;
  hreq *r = lua_newuserdatauv(L, sizeof(hreq), 1);
  memset(r, 0, sizeof *r);
  luaL_setmetatable(L, RESPONSE_MT);
  int self = lua_gettop(L);
  r->stream = stream;
  char err[256];
  http_ctx *h = actvm_http_of(L, err, sizeof err);
  r->call = h ? http_start(h, &q, on_event, r, err, sizeof err) : NULL;
  if (!r->call) {
    push_error(L, HTTP_ECONNECT, err);
    return lua_error(L);
  }
  r->ac = ac;
  r->wait = stream ? W_HEADERS : W_DONE;
  actvm_set_pending(ac, cancel_op, r);
  /* keep only the userdata below the yield so the continuation finds it at 1.. */
  lua_settop(L, self);
  lua_replace(L, 1);
  lua_settop(L, 1);
  return lua_yieldk(L, 0, 1, stream ? headers_k : done_k);
}

int luaopen_engine_http(lua_State *L) {
  static const luaL_Reg lib[] = {{"request", l_request}, {NULL, NULL}};
  if (luaL_newmetatable(L, RESPONSE_MT)) {
    lua_pushcfunction(L, l_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, l_close);
    lua_setfield(L, -2, "__close");
  }
  lua_pop(L, 1);
  luaL_newlib(L, lib);
  return 1;
}
