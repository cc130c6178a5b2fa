/* lua_proc: the `proc` module for activity code (see lua_proc.c). */
#ifndef ENGINE_LUA_PROC_H
#define ENGINE_LUA_PROC_H

#include <lua.h>

int luaopen_engine_proc(lua_State *L);

#endif
