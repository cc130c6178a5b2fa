/* sandbox_native: seccomp program, names and disk usage for lua/sandbox.lua. */
#ifndef ENGINE_SANDBOX_NATIVE_H
#define ENGINE_SANDBOX_NATIVE_H

#include <lua.h>

int luaopen_engine_sandbox_native(lua_State *L);

#endif
