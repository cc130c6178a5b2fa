/* safefs: confined file access for the trusted side (see safefs.c). */
#ifndef ENGINE_SAFEFS_H
#define ENGINE_SAFEFS_H

#include <stddef.h>

#include <lua.h>

int luaopen_engine_safefs(lua_State *L);

/* s[0..len) made fit for a log line, an event or a terminal, bounded: at most
 * max bytes of it (cut at a character boundary), printable ASCII and
 * well-formed UTF-8 as they are, a backslash as \\, control characters and
 * bytes that are not UTF-8 as \xNN, C1 controls and bidirectional overrides as
 * \uNNNN; a cut value ends in "... (LEN bytes)". Returns a malloc'd string
 * (NULL when out of memory). Deterministic: the same input gives the same text. */
char *safefs_render(const char *s, size_t len, size_t max);

#endif
