/* fatal: what the engine was running when it died of a crash.
 *
 * A worker arms it for its database. While the code of a workflow (its VM) or
 * of one of its activities runs, the engine names that workflow here; a crash
 * then (a fatal signal, or a Lua panic, which aborts) leaves a note beside the
 * database naming it, so the next start can tell a workflow that keeps
 * crashing the engine from one that was merely interrupted (kill -9 and power
 * loss leave no note). The handler only calls async-signal-safe functions and
 * then lets the signal take its course: nothing longjmps out of a crash. */
#ifndef ENGINE_FATAL_H
#define ENGINE_FATAL_H

#include <lua.h>
#include <stddef.h>

/* Installs the handlers; a crash writes note_path ("owner\nworkflow\nwhat\n"). */
void fatal_arm(const char *note_path, const char *owner);
void fatal_disarm(void);

/* The workflow whose code runs from now on (NULL: the engine's own), with an
 * optional detail (the activity); returns the previous one, to restore. The
 * strings must outlive the call that restores. */
const char *fatal_enter(const char *wf_id);
void fatal_detail(const char *detail);

/* A lua_atpanic handler: records Lua's message for the note and returns, so
 * Lua aborts the process. */
int fatal_lua_panic(lua_State *L);
/* What the note names instead of the signal, for an abort() that follows
 * (util.c's "out of memory (N bytes)"). Only plain copying: it may run when
 * nothing can be allocated. */
void fatal_reason(const char *what);

/* Reads a note a crash left: 1 with its fields, 0 when there is none. */
int fatal_read_note(const char *note_path, char *owner, size_t ownerlen, char *wf_id, size_t idlen, char *what,
                    size_t whatlen);
void fatal_clear_note(const char *note_path);

#endif
