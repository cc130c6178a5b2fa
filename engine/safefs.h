/* safefs: confined file access for the trusted side (see safefs.c). */
#ifndef ENGINE_SAFEFS_H
#define ENGINE_SAFEFS_H

#include <lua.h>

int luaopen_engine_safefs(lua_State *L);

#endif
