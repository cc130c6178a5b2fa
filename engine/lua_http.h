/* lua_http: the `http` module for activity code (see lua_http.c). */
#ifndef ENGINE_LUA_HTTP_H
#define ENGINE_LUA_HTTP_H

#include <lua.h>

int luaopen_engine_http(lua_State *L);

#endif
