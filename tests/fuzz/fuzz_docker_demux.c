/* fuzz_docker_demux: the Docker exec stream demultiplexer (engine/vm/docker.c,
 * "docker.native".demuxer(max_bytes)) on arbitrary bytes.
 *
 * Input: byte 0-1 choose max_bytes (0 to 65535, little-endian), bytes 2-5
 * seed the split points, the rest is the stream. The stream is fed whole, in
 * pieces at the derived split points, and byte by byte; properties:
 *   - stdout + stderr kept never exceed max_bytes; truncated is set exactly
 *     when a payload byte of stream 1 or 2 was dropped;
 *   - total counts every payload byte (all streams);
 *   - the three feedings give the same result and stderr tail, which match a
 *     reference demultiplexer written here from the format (8-byte header:
 *     stream, 3 bytes, big-endian length). */
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker.h"

static lua_State *L;

static void finding(const char *what) {
  fprintf(stderr, "fuzz_docker_demux: %s\n", what);
  abort();
}

typedef struct result {
  char *out, *err, *tail;
  size_t out_n, err_n, tail_n;
  int truncated;
  lua_Integer total, err_total;
} result;

static char *dup_field(int idx, size_t *n) {
  const char *s = lua_tolstring(L, idx, n);
  char *p = malloc(*n + 1);
  memcpy(p, s, *n);
  p[*n] = 0;
  return p;
}

/* Feeds stream[0..n) to a new demuxer (mode 0: whole, 1: at split points
 * from seed, 2: byte by byte) and reads it back. */
static void run(const char *stream, size_t n, lua_Integer max, uint32_t seed, int mode, result *r) {
  lua_settop(L, 0);
  lua_getglobal(L, "native");
  lua_getfield(L, 1, "demuxer");
  lua_pushinteger(L, max);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) finding(lua_tostring(L, -1));
  int d = lua_gettop(L);
  size_t pos = 0;
  uint32_t x = seed | 1;
  while (pos < n) {
    size_t len = n - pos;
    if (mode == 1) { /* xorshift: mostly short pieces, some long */
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      size_t cut = (x & 0x100) ? (x % 4096) : (x % 17);
      if (cut + 1 < len) len = cut + 1;
    } else if (mode == 2) {
      len = 1;
    }
    lua_getfield(L, d, "feed");
    lua_pushvalue(L, d);
    lua_pushlstring(L, stream + pos, len);
    if (lua_pcall(L, 2, 0, 0) != LUA_OK) finding(lua_tostring(L, -1));
    pos += len;
  }
  lua_getfield(L, d, "result");
  lua_pushvalue(L, d);
  if (lua_pcall(L, 1, 4, 0) != LUA_OK) finding(lua_tostring(L, -1));
  r->out = dup_field(-4, &r->out_n);
  r->err = dup_field(-3, &r->err_n);
  r->truncated = lua_toboolean(L, -2);
  r->total = lua_tointeger(L, -1);
  lua_pop(L, 4);
  lua_getfield(L, d, "stderr_tail");
  lua_pushvalue(L, d);
  if (lua_pcall(L, 1, 2, 0) != LUA_OK) finding(lua_tostring(L, -1));
  r->tail = dup_field(-2, &r->tail_n);
  r->err_total = lua_tointeger(L, -1);
  lua_settop(L, 0);
}

static void free_result(result *r) {
  free(r->out);
  free(r->err);
  free(r->tail);
}

static int same(const result *a, const result *b) {
  return a->out_n == b->out_n && a->err_n == b->err_n && a->tail_n == b->tail_n && a->truncated == b->truncated &&
         a->total == b->total && a->err_total == b->err_total && memcmp(a->out, b->out, a->out_n) == 0 &&
         memcmp(a->err, b->err, a->err_n) == 0 && memcmp(a->tail, b->tail, a->tail_n) == 0;
}

/* A state of its own for each input, closed at the end (libFuzzer's leak
 * check then sees a leak of the demuxer itself). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 6) return 0;
  L = luaL_newstate();
  if (!L) abort();
  luaopen_engine_docker(L);
  lua_setglobal(L, "native");
  lua_Integer max = data[0] | (data[1] << 8);
  uint32_t seed = (uint32_t)data[2] | (uint32_t)data[3] << 8 | (uint32_t)data[4] << 16 | (uint32_t)data[5] << 24;
  const char *stream = (const char *)data + 6;
  size_t n = size - 6;

  /* the reference: frames as the format defines them */
  size_t kept = 0, pos = 0, out_n = 0, err_n = 0;
  lua_Integer total = 0, err_total = 0;
  int truncated = 0;
  char *out = malloc(n + 1), *err = malloc(n + 1), *err_all = malloc(n + 1);
  while (pos + 8 <= n) {
    const unsigned char *h = (const unsigned char *)stream + pos;
    size_t len = (size_t)h[4] << 24 | (size_t)h[5] << 16 | (size_t)h[6] << 8 | h[7];
    pos += 8;
    size_t take = len < n - pos ? len : n - pos;
    total += (lua_Integer)take;
    if (h[0] == 1 || h[0] == 2) {
      size_t room = kept < (size_t)max ? (size_t)max - kept : 0;
      size_t keep = take < room ? take : room;
      if (keep < take) truncated = 1;
      memcpy(h[0] == 1 ? out + out_n : err + err_n, stream + pos, keep);
      if (h[0] == 1)
        out_n += keep;
      else
        err_n += keep;
      kept += keep;
    }
    if (h[0] == 2) {
      memcpy(err_all + err_total, stream + pos, take);
      err_total += (lua_Integer)take;
    }
    pos += take;
  }

  result r[3];
  for (int mode = 0; mode < 3; mode++) {
    run(stream, n, max, seed, mode, &r[mode]);
    if (r[mode].out_n + r[mode].err_n > (size_t)max) finding("more than max_bytes kept");
    if (r[mode].tail_n > 128) finding("the stderr tail is longer than 128 bytes");
  }
  if (!same(&r[0], &r[1]) || !same(&r[0], &r[2])) finding("the result depends on where the stream was split");
  if (r[0].out_n != out_n || memcmp(r[0].out, out, out_n) != 0) finding("stdout differs from the reference");
  if (r[0].err_n != err_n || memcmp(r[0].err, err, err_n) != 0) finding("stderr differs from the reference");
  if (r[0].truncated != truncated) finding("truncated differs from the reference");
  if (r[0].total != total) finding("total differs from the reference");
  if (r[0].err_total != err_total) finding("the stderr count differs from the reference");
  /* the tail: the last stderr payload bytes, whatever the cap */
  size_t want_tail = err_total < 128 ? (size_t)err_total : 128;
  if (r[0].tail_n != want_tail) finding("the stderr tail has the wrong length");
  if (memcmp(r[0].tail, err_all + err_total - want_tail, want_tail) != 0)
    finding("the stderr tail is not the last stderr bytes");
  for (int mode = 0; mode < 3; mode++) free_result(&r[mode]);
  free(out);
  free(err);
  free(err_all);
  lua_close(L);
  return 0;
}
