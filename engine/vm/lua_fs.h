/* lua_fs: `local fs = require "fs"` -- native file-system calls for activity
 * code, which runs on the loop thread (see lua_fs.c). */
#ifndef ENGINE_LUA_FS_H
#define ENGINE_LUA_FS_H

#include <lua.h>

int luaopen_engine_fs(lua_State *L);

/* The same module under the name require() looks for when lua_fs.c is built
 * as a loadable module (build/fs.so) for plain lua5.4. */
int luaopen_fs(lua_State *L);

#endif
