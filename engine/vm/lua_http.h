/* lua_http: the `http` module for activity code (see lua_http.c). */
#ifndef ENGINE_LUA_HTTP_H
#define ENGINE_LUA_HTTP_H

#include <lua.h>
#include <stddef.h>

/* A C consumer of streamed bytes for res:read_into(sink): sink is a full
 * userdata whose metatable holds, under HTTP_SINK_FIELD, a light userdata
 * pointing to a static http_sink; feed gets the userdata's block. */
typedef struct http_sink {
  void (*feed)(void *self, const char *data, size_t len);
} http_sink;
#define HTTP_SINK_FIELD "__http_sink"

int luaopen_engine_http(lua_State *L);

#endif
