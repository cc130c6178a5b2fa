/* engine: the worker and its clients. A worker (engine_open/run) drives
 * workflow VMs, activity attempts, durable timers and the group commit of the
 * store on one libuv loop; the client operations (create, signal, cancel,
 * checks, replay) work on a database from any process. worker.h lists the
 * files that implement it, each with what it owns. */
#ifndef ENGINE_ENGINE_H
#define ENGINE_ENGINE_H

#include <stdint.h>
#include <uv.h>

#include "store.h"

typedef struct engine engine;

typedef struct engine_config {
  const char *db_path;
  const char *lua_dir;
  /* Called after the commit that made a workflow reach status (any change). */
  void (*on_status)(void *ud, const char *wf_id, const char *status, const char *detail);
  /* Called after each commit (start uses it to print new domain events). */
  void (*on_commit)(void *ud);
  /* An ephemeral event of a running activity (activity.live: a model's text
   * as it streams, "agent.delta"): never in the log, for live watchers only. */
  void (*on_live)(void *ud, const char *wf_id, const char *type, const char *json);
  /* An activity attempt ended after seconds (ok: it returned a result). */
  void (*on_activity)(void *ud, const char *name, double seconds, int ok);
  /* A model turn's token counts (activity.usage), by provider. */
  void (*on_usage)(void *ud, const char *provider, double input_tokens, double output_tokens);
  /* `engine test`: runs every activity attempt in place of the activity VM,
   * synchronously: returns 1 with *json (malloc'd) the result, or 0 with *json
   * the error object {type, message, non_retryable?}. NULL: the activity VM. */
  int (*call_activity)(void *ud, const char *wf_id, int64_t seq, int attempt, const char *name, const char *payload,
                       char **json);
  void *ud;
} engine_config;

/* Opens the store (creating it), the activity VM and the loop. */
int engine_open(engine **out, const engine_config *cfg, char *err, size_t errlen);
/* Recovers every due task and runs the loop until engine_stop(). */
int engine_run(engine *e);
void engine_stop(engine *e);
void engine_free(engine *e);
store *engine_store(engine *e);
uv_loop_t *engine_loop(engine *e);
/* Commits pending writes now (the loop does so every iteration). */
int engine_commit(engine *e);
/* cb(ud, 1) runs after the commit that makes what was written so far durable
 * (the next one, or at once from within it), cb(ud, 0) when that batch is
 * lost instead (nothing of it was written): how a client inside the worker
 * (the HTTP API) acknowledges a write only once it is on disk. */
void engine_when_committed(engine *e, void (*cb)(void *ud, int ok), void *ud);
/* Dispatches due tasks now (after a client wrote one into the batch). */
void engine_dispatch_now(engine *e);
/* Begins the activity attempts that waited for a commit now answered (the
 * loop does so on its next turn; a driver without the loop, engine test,
 * calls it after engine_commit). How many waited. */
int engine_begin_deferred(engine *e);
/* cb runs after each commit for every workflow whose status it changed, as
 * cfg.on_status does: a second observer for a module inside the worker
 * (schedules.c); NULL removes it. */
void engine_watch_status(engine *e, void (*cb)(void *ud, const char *id, const char *status), void *ud);

/* Where the engine's Lua library lives: ENGINE_LUA_DIR or the build default. */
const char *engine_lua_dir(void);

/* ---- client operations: each is one transaction, committed on return ---- */

/* Workflow ids: 1 to ENGINE_ID_MAX bytes of A-Z a-z 0-9 . _ : @ -, the first a
 * letter or a digit, without "..". Returns 0, or -1 with err naming the
 * problem (the id escaped and cut short). Creating a workflow requires it;
 * every operation that finds no workflow for an id explains the id with it,
 * so ids stored before the rule stay addressable. */
#define ENGINE_ID_MAX 128
int engine_check_id(const char *id, char *err, size_t errlen);
/* What is wrong with name as a name of 1 to max bytes of A-Z a-z 0-9 and the
 * bytes of punct, the first a letter or a digit (ids, token names): -1 with
 * what ("a space at byte 3"), or 0. */
int engine_name_problem(const char *name, size_t max, const char *punct, char *what, size_t n);
/* An id for a start that names none (ENGINE_ID_MAX + 1 bytes): the script's
 * base name made to follow the rules, '-' and 8 random hex digits. */
void engine_generate_id(const char *script, char *out, size_t n);
/* The error for an id that names no workflow: what is wrong with the id, or
 * "unknown workflow 'ID'". */
void engine_unknown_id(const char *id, char *err, size_t errlen);

/* Signal names (what `engine signal` and the API send): 1 to
 * ENGINE_SIGNAL_NAME_MAX bytes of UTF-8 without control characters (C0, DEL,
 * C1) or bidi controls. Returns 0, or -1 with err naming the problem. */
#define ENGINE_SIGNAL_NAME_MAX 256
int engine_check_signal_name(const char *name, char *err, size_t errlen);

/* Reads a workflow script: a regular file only (a FIFO, a device or a
 * directory is refused by name, never read). Returns the malloc'd source
 * (NUL-terminated, *len without it), or NULL with err. */
char *engine_read_script(const char *path, size_t *len, char *err, size_t errlen);
/* Checks a script read from path as a start would run it: it compiles, and its
 * main chunk, run alone in a throwaway sandbox (modules from beside it),
 * returns function(input). Returns 0, or -1 with err. */
int engine_check_script(const char *path, const char *src, size_t len, char *err, size_t errlen);

/* Creates workflow id from script (stored by content hash) with input JSON and
 * queues it. *existed is set (and nothing written) when id already exists. */
int engine_create_workflow(store *st, const char *id, const char *script_path, const char *input_json,
                           int *existed, char *err, size_t errlen);
/* In-process clients of a running engine (benchmarks, embedding, the HTTP
 * API): the writes join the engine's current batch and the workflow runs at
 * once; engine_when_committed tells when they are durable. With existed
 * NULL, an existing id is an error; else *existed is set and nothing written. */
int engine_submit(engine *e, const char *id, const char *script_path, const char *input_json, int *existed,
                  char *err, size_t errlen);
int engine_signal_local(engine *e, const char *id, const char *name, const char *payload, const char *identity,
                        char *err, size_t errlen);
int engine_cancel_local(engine *e, const char *id, const char *identity, char *err, size_t errlen);

/* input_json (an object) with its top-level "identity" set to identity (who
 * or what starts the workflow: "token:NAME", "local:USER"), canonical,
 * malloc'd; whatever identity the input claimed is replaced. Input that is
 * not an object: NULL with err when required, else a canonical copy. */
char *engine_input_with_identity(const char *input_json, const char *identity, int required, char *err,
                                 size_t errlen);

/* A signal and a cancellation record who asked (identity, e.g. "local:ada",
 * "token:ci") as the session's domain event signal.sent {name, by} or
 * cancel.requested {by}, in the same transaction; NULL records nothing. */
int engine_send_signal(store *st, const char *id, const char *name, const char *payload, const char *identity,
                       char *err, size_t errlen);
int engine_request_cancel(store *st, const char *id, const char *identity, char *err, size_t errlen);

/* What a person tells a running session (workflows/agent_session.lua): kind
 * "message" (text 1-ENGINE_MESSAGE_MAX bytes, required), "interrupt" (text:
 * an optional reason) or "close", delivered as the signal
 * ENGINE_SESSION_SIGNAL with the sender the engine knows (never one the
 * caller claims). Returns the payload {"kind","sender","text"} (malloc'd),
 * or NULL with err naming what is wrong. */
#define ENGINE_SESSION_SIGNAL "session:input"
#define ENGINE_MESSAGE_MAX 65536
char *engine_session_input(const char *kind, const char *text, const char *sender, char *err, size_t errlen);
/* 1 when name is a session signal (session:*), which only
 * engine_session_input's callers send, with err saying how. */
int engine_reserved_signal(const char *name, char *err, size_t errlen);
int engine_status_terminal(const char *status);

/* Replays workflow id's current run against script_path (NULL: its pinned
 * code) without side effects. Returns 0 when it replays cleanly, 1 when it
 * diverges (report says where), -1 on error. With apply and a clean replay the
 * run moves to that code, and a stuck run is queued to resume. */
int engine_replay_check(store *st, const char *id, const char *script_path, int apply, char *report,
                        size_t reportlen);

/* Runs the maintenance hook worker.NAME of the Lua library (see hooks.c) on a
 * loop of its own and waits for it: `engine gc` ("gc": sandboxes of finished
 * or unknown sessions), `engine policy check` ("policy_check"). args_json is
 * the hook's args; NULL means {live = [ids of st's unfinished workflows]}.
 * report gets the hook's result JSON, or its error. Returns 0 or -1. */
int engine_maintenance(store *st, const char *name, const char *args_json, char *report, size_t reportlen);

/* Calls worker.NAME (lua/activities/worker.lua) on the running worker's own
 * activity VM, for a hook that never waits (the webhook mapping: no IO that
 * yields). Returns 1 with *ok and *json (malloc'd: the result, or the error
 * JSON), or 0 when the hook would have waited (abandoned). */
int engine_hook_now(engine *e, const char *name, const char *payload, int *ok, char **json);

/* ---- the worker lock: one worker per database ---- */
/* Returns an fd holding the lock, or -1 with *holder describing the holder.
 * The lock is <the database's resolved path>.lock, so every name of one
 * database file (a symlink, "x/../engine.db") shares it. */
int engine_lock(const char *db_path, const char *mode, char *holder, size_t holderlen);
void engine_unlock(int fd);
/* 0 when the database at db may exist (a file that exists, or a PostgreSQL
 * URL: only connecting tells), -1 when there is no such file. */
int engine_db_missing(const char *db);
/* db as messages show it: a URL without its password (buf, n bytes), a path as it is. */
const char *engine_db_shown(const char *db, char *buf, size_t n);
/* The directory of the engine's files that live beside the database (limits.lua,
 * workspaces, the crash note): the database file's directory, resolved; for a
 * PostgreSQL URL $ENGINE_DATA_DIR, else ./engine-data, created if missing.
 * out has PATH_MAX bytes; returns 0, or -1 with out empty. */
int engine_data_dir(const char *db, char *out);

/* ---- watching a database for commits by other processes ---- */
typedef struct dbwatch dbwatch;
/* cb runs (on loop) soon after another process commits to st's database. */
dbwatch *dbwatch_start(uv_loop_t *loop, store *st, void (*cb)(void *ud), void *ud);
void dbwatch_stop(dbwatch *w);

#endif
