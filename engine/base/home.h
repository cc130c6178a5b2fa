/* home: where the engine's own files are (its Lua library, workflows,
 * policies, skills, web page and examples), found at run time so that an
 * installed binary names no build or source tree. */
#ifndef ENGINE_HOME_H
#define ENGINE_HOME_H

#include <stddef.h>

/* The engine's home, the first of:
 *   $ENGINE_HOME (the `home` setting);
 *   ../share/engine beside the binary (resolved from /proc/self/exe), when it
 *     holds lua/: an installed engine;
 *   the source tree of the build directory the binary is in (CMakeCache.txt's
 *     CMAKE_HOME_DIRECTORY, up to three folders up): a development build.
 * NULL when none is found (engine_home_error says why). Computed once. */
const char *engine_home(void);

/* What engine_home looked at, for an error or for `engine doctor`. */
const char *engine_home_error(void);

/* Where the home was found: "ENGINE_HOME", "installed" or "build tree". */
const char *engine_home_source(void);

/* out = the home's SUB (lua, workflows, ...): "" when there is no home.
 * Returns out. */
char *engine_home_path(const char *sub, char *out, size_t n);

/* The engine's Lua library: $ENGINE_LUA_DIR, else HOME/lua ("lua" relative
 * to the working directory when no home is found, so the error names it). */
const char *engine_lua_dir(void);

#endif
