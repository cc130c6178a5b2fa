/* session_view_internal.h: what the files of the session views share, and
 * only them (session_view.h is the interface for everyone else):
 *
 *   session_view.c             an event as a line or as JSON, and the lines of
 *                              what the HTTP API answers (a summary, a list, a
 *                              history); the Lua state that decodes payloads
 *   session_view_summary.c     a workflow's summary read from the store, what
 *                              it waits on now, and its tree's cost and tokens
 *   session_view_transcript.c  events laid out for a terminal (wrapped,
 *                              folded, approvals marked, each kind of event
 *                              as web/event_kinds.json describes it)
 *
 * The other two use session_view.c; it uses neither. */
#ifndef ENGINE_SESSION_VIEW_INTERNAL_H
#define ENGINE_SESSION_VIEW_INTERNAL_H

#include <lua.h>
#include <stddef.h>

#include "session_view.h"

/* The process's Lua state for decoding payloads, emptied; NULL when there is
 * no memory for it. */
lua_State *view_fmt_state(void);
/* Pushes the decoded JSON text (NULL: null); 0, or -1 with nothing pushed. */
int view_decode_payload(lua_State *L, const char *text);
/* Field k of the table at t as one rendered line in out (at most max - 1
 * bytes), "" when absent; returns out. */
const char *view_field(lua_State *L, int t, const char *k, char *out, size_t max);

#endif
