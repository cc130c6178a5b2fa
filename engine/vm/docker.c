/* docker: what the Docker client needs in C.
 *
 *   native.socket_path() -> the Engine's unix socket: $DOCKER_HOST (unix://
 *     only) or /var/run/docker.sock; nil, err for other schemes.
 *   native.demuxer(max_bytes) -> d: d:feed(bytes) splits the multiplexed
 *     stream of a non-TTY exec (8-byte headers: stream type, 3 zero bytes, a
 *     big-endian length) into stdout and stderr; past max_bytes in total it
 *     keeps counting but stops storing, so a command that prints 100 MiB costs
 *     the engine max_bytes. d:result() -> stdout, stderr, truncated, total.
 *     d:stderr_tail() -> the last bytes of stderr (up to 128, kept past the
 *     cap: where the exec wrapper reports), and how many stderr bytes came.
 *     A demuxer is an http sink: stream:read_into(d) feeds it with no Lua
 *     string in between. */
#include "docker.h"

#include <lauxlib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lua_http.h"
#include "util.h"

#define DEMUX_MT "engine.docker_demux"
#define TAIL 128

typedef struct demux {
  capped_output o;
  unsigned char hdr[8];
  size_t hdr_have;
  int stream; /* 1 stdout, 2 stderr, 0 stdin/unknown: dropped */
  size_t left; /* bytes left in the current frame */
  char tail[TAIL]; /* the last stderr bytes, whatever the cap */
  size_t tail_n, err_total;
} demux;

static void tail_add(demux *d, const char *p, size_t n) {
  d->err_total += n;
  if (n >= TAIL) {
    memcpy(d->tail, p + n - TAIL, TAIL);
    d->tail_n = TAIL;
    return;
  }
  size_t keep = d->tail_n + n > TAIL ? TAIL - n : d->tail_n;
  memmove(d->tail, d->tail + d->tail_n - keep, keep);
  memcpy(d->tail + keep, p, n);
  d->tail_n = keep + n;
}

static void demux_feed(void *self, const char *p, size_t len) {
  demux *d = self;
  while (len > 0) {
    if (d->left == 0) {
      size_t take = 8 - d->hdr_have;
      if (take > len) take = len;
      memcpy(d->hdr + d->hdr_have, p, take);
      d->hdr_have += take;
      p += take;
      len -= take;
      if (d->hdr_have < 8) break;
      d->hdr_have = 0;
      d->stream = d->hdr[0];
      d->left = ((size_t)d->hdr[4] << 24) | ((size_t)d->hdr[5] << 16) | ((size_t)d->hdr[6] << 8) | d->hdr[7];
      continue;
    }
    size_t take = d->left < len ? d->left : len;
    capped_add(&d->o, d->stream, p, take);
    if (d->stream == 2) tail_add(d, p, take);
    d->left -= take;
    p += take;
    len -= take;
  }
}

static http_sink demux_sink = {demux_feed};

static int l_feed(lua_State *L) {
  demux *d = luaL_checkudata(L, 1, DEMUX_MT);
  size_t len;
  const char *p = luaL_checklstring(L, 2, &len);
  demux_feed(d, p, len);
  return 0;
}

static int l_stderr_tail(lua_State *L) {
  demux *d = luaL_checkudata(L, 1, DEMUX_MT);
  lua_pushlstring(L, d->tail, d->tail_n);
  lua_pushinteger(L, (lua_Integer)d->err_total);
  return 2;
}

static int l_result(lua_State *L) {
  demux *d = luaL_checkudata(L, 1, DEMUX_MT);
  lua_pushlstring(L, d->o.out.p ? d->o.out.p : "", d->o.out.n);
  lua_pushlstring(L, d->o.err.p ? d->o.err.p : "", d->o.err.n);
  lua_pushboolean(L, d->o.truncated);
  lua_pushinteger(L, (lua_Integer)d->o.total);
  return 4;
}

static int l_gc(lua_State *L) {
  demux *d = luaL_checkudata(L, 1, DEMUX_MT);
  capped_free(&d->o);
  memset(d, 0, sizeof *d);
  return 0;
}

static int l_demuxer(lua_State *L) {
  lua_Integer max = luaL_optinteger(L, 1, 1 << 20);
  luaL_argcheck(L, max >= 0, 1, "max_bytes must be >= 0");
  demux *d = lua_newuserdatauv(L, sizeof(demux), 0);
  memset(d, 0, sizeof *d);
  d->o.max = (size_t)max;
  luaL_setmetatable(L, DEMUX_MT);
  return 1;
}

static int l_socket_path(lua_State *L) {
  const char *h = getenv("DOCKER_HOST");
  if (!h || !*h) {
    lua_pushliteral(L, "/var/run/docker.sock");
    return 1;
  }
  if (strncmp(h, "unix://", 7) == 0 && h[7]) {
    lua_pushstring(L, h + 7);
    return 1;
  }
  lua_pushnil(L);
  lua_pushfstring(L, "DOCKER_HOST=%s: only unix:// sockets are supported", h);
  return 2;
}

int luaopen_engine_docker(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"feed", l_feed}, {"result", l_result}, {"stderr_tail", l_stderr_tail}, {NULL, NULL}};
  if (luaL_newmetatable(L, DEMUX_MT)) {
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushlightuserdata(L, &demux_sink);
    lua_setfield(L, -2, HTTP_SINK_FIELD);
  }
  lua_pop(L, 1);
  static const luaL_Reg lib[] = {{"socket_path", l_socket_path}, {"demuxer", l_demuxer}, {NULL, NULL}};
  luaL_newlib(L, lib);
  return 1;
}
