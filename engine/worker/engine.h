/* engine: the worker and its clients. A worker (engine_open/run) drives
 * workflow VMs, activity attempts, durable timers and the group commit of the
 * store on one libuv loop; the client operations (create, signal, cancel,
 * checks, replay) work on a database from any process. worker.h lists the
 * files that implement it, each with what it owns. */
#ifndef ENGINE_ENGINE_H
#define ENGINE_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "dbfile.h"
#include "fork.h"
#include "names.h"
#include "script_file.h"
#include "store.h"
#include "workflow_ops.h"

typedef struct engine engine;

/* The stages of one group commit (engine_config.on_commit_stages), in
 * uv_hrtime() nanoseconds: for benchmarks, which time a round trip's stages. */
typedef struct engine_commit_stages {
  uint64_t begin;         /* the commit began (the loop's batch tick, or engine_commit) */
  uint64_t done;          /* the store answered: the batch is durable (or lost) */
  uint64_t checkpoint_ns; /* of begin..done, a WAL checkpoint SQLite ran inside the commit */
  int64_t wal_frames;     /* frames in SQLite's WAL after it */
  int ok;                 /* the batch committed */
} engine_commit_stages;

typedef struct engine_config {
  const char *db_path;
  const char *lua_dir;
  /* Called after the commit that made a workflow reach status (any change). */
  void (*on_status)(void *ud, const char *wf_id, const char *status, const char *detail);
  /* Called after each commit (start uses it to print new domain events). */
  void (*on_commit)(void *ud);
  /* Called after each commit of the start lane (PostgreSQL: the API's
   * starts, committed on connections of their own), n starts in it. */
  void (*on_starts_commit)(void *ud, size_t n, int ok);
  /* Benchmarks only (NULL normally): each commit's stages, called when the
   * store answered, before the status notes of the batch are delivered. */
  void (*on_commit_stages)(void *ud, const engine_commit_stages *s);
  /* An ephemeral event of a running activity (activity.live: a model's text
   * as it streams, "agent.delta"): never in the log, for live watchers only. */
  void (*on_live)(void *ud, const char *wf_id, const char *type, const char *json);
  /* An activity attempt ended after seconds (ok: it returned a result). */
  void (*on_activity)(void *ud, const char *name, double seconds, int ok);
  /* A model turn's token counts (activity.usage), by provider. */
  void (*on_usage)(void *ud, const char *provider, double input_tokens, double output_tokens);
  /* `engine test`: runs every activity attempt in place of the activity VM,
   * synchronously: returns 1 with *json (malloc'd) the result, or 0 with *json
   * the error object {type, message, non_retryable?}. start_to_close_ms: the
   * attempt's deadline (0: none). NULL: the activity VM. */
  int (*call_activity)(void *ud, const char *wf_id, int64_t seq, int attempt, const char *name, const char *payload,
                       int64_t start_to_close_ms, char **json);
  /* 1: no span exporter even when OTEL_* configures one (engine test) */
  int no_tracing;
  void *ud;
} engine_config;

/* engine serve as a service (engine_serve_as_service): what the worker
 * tells the process that serves, on the loop's thread. The worker itself
 * speaks to systemd (sdnotify.h): READY=1 after ready, RELOADING=1 and
 * READY=1 around a SIGHUP's reload, STOPPING=1 at SIGTERM or SIGINT, and
 * WATCHDOG=1 from a timer on its loop when the manager asks for it. */
typedef struct engine_service {
  /* The worker is ready: recovery is done and worker.start has loaded the
   * policy set and the triggers. status gets what READY=1's STATUS= says. */
  void (*ready)(void *ud, char *status, size_t statuslen);
  /* SIGTERM or SIGINT: stop taking work (the API its requests) and answer
   * what is in flight. Returns 1 to be waited for: it calls engine_stop
   * once done; 0 stops at once. Within ENGINE_STOP_TIMEOUT_S (default 10)
   * the worker stops anyway, with what is committed. */
  int (*stopping)(void *ud);
  void *ud;
} engine_service;

/* Before engine_run: run as engine serve does (the above, SIGHUP reloads:
 * the configuration file's reloadable settings, the policy set, the
 * triggers; SIGTERM stops within the bound). Without it SIGTERM and SIGINT
 * stop at once and SIGHUP is not handled. */
void engine_serve_as_service(engine *e, const engine_service *svc);

/* Opens the store (creating it), the activity VM, the loop and, when the
 * OTEL_* variables configure one, the span exporter (otel_export.h; a bad
 * variable fails the open with err naming it). */
int engine_open(engine **out, const engine_config *cfg, char *err, size_t errlen);
/* Recovers every due task and runs the loop until engine_stop(). */
int engine_run(engine *e);
void engine_stop(engine *e);
void engine_free(engine *e);
store *engine_store(engine *e);
/* This worker's name among the workers of one database (its leases'
 * owner; "engine worker OWNER" in PostgreSQL's pg_stat_activity). */
const char *engine_owner(engine *e);
uv_loop_t *engine_loop(engine *e);
/* The span exporter, or NULL when tracing is off (/metrics reads its stats). */
struct otel_exporter *engine_otel(engine *e);
/* SQLite's WAL copied into the database file so far: by the worker in the
 * background (checkpoints.c), and inside a commit that reached the bound. */
void engine_wal_checkpoints(engine *e, int64_t *background, int64_t *in_commit);
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

/* ---- clients inside the worker (workflow_ops.h has the same on a database) ---- */

/* In-process clients of a running engine (benchmarks, embedding, the HTTP
 * API on SQLite; on PostgreSQL its starts are engine_start_sent's): the writes join the engine's current batch and the workflow runs at
 * once; engine_when_committed tells when they are durable. With existed
 * NULL, an existing id is an error; else *existed is set and nothing written. */
int engine_submit(engine *e, const char *id, const char *script_path, const char *input_json, int *existed,
                  char *err, size_t errlen);
int engine_signal_local(engine *e, const char *id, const char *name, const char *payload, const char *identity,
                        char *err, size_t errlen);
/* The same with the caller's trace context (NULL: none): a start records it
 * in its WorkflowStarted, a signal in its signal.sent event (trace_start.h,
 * workflow_ops.h). */
int engine_submit_traced(engine *e, const char *id, const char *script_path, const char *input_json,
                         const trace_start *trace, int *existed, char *err, size_t errlen);
int engine_signal_traced(engine *e, const char *id, const char *name, const char *payload, const char *identity,
                         const trace_start *trace, char *err, size_t errlen);
/* A start from outside the process (a webhook's delivery, a schedule's
 * fire): on a shared store (PostgreSQL) it is queued, as an API start is,
 * its first task due at once, and whichever worker is free runs it, so such
 * starts spread by where they are due rather than where they arrive; on a
 * store of its own, engine_submit_traced. An embedding process's own starts
 * (engine_submit) run in it, as a library's do. */
int engine_submit_queued(engine *e, const char *id, const char *script_path, const char *input_json,
                         const trace_start *trace, int *existed, char *err, size_t errlen);
/* A start that tells what it found: 1 started (as engine_submit_traced), 0
 * when id exists (its row into *existing when given, to be freed; nothing
 * written), -1 with err. One insert that writes or finds (store_wf_start). */
int engine_start_or_find(engine *e, const char *id, const char *script_path, const char *input_json,
                         const trace_start *trace, wf_row *existing, char *err, size_t errlen);
/* A start the loop does not wait for (PostgreSQL: store_can_send_starts):
 * its insert goes out with the batch's other writes, and cb is told once the
 * batch committed: rc 1 started (w: its row as written, queued: a dispatch
 * runs it), 0 id exists (w: its row; nothing written), -1 nothing was
 * acknowledged (err says why: the batch was lost, retry). Returns 0 (cb will
 * be called), or -1 with err and cb never called (a script that cannot be
 * read, a bad input). */
typedef void (*engine_started_fn)(void *ud, int rc, const wf_row *w, const char *err);
int engine_start_sent(engine *e, const char *id, const char *script_path, const char *input_json,
                      const trace_start *trace, engine_started_fn cb, void *ud, char *err, size_t errlen);
int engine_cancel_local(engine *e, const char *id, const char *identity, char *err, size_t errlen);
/* A fork (fork.h) written into the current batch, run at once: 0 with
 * *made, or -1 with *why and err, nothing written. */
int engine_fork(engine *e, const fork_req *req, fork_made *made, int *why, char *err, size_t errlen);

/* Replays workflow id's current run against script_path (NULL: its pinned
 * code) without side effects. Returns 0 when it replays cleanly, 1 when it
 * diverges (report says where), -1 on error. With apply and a clean replay the
 * run moves to that code, and a stuck run is queued to resume. */
int engine_replay_check(store *st, const char *id, const char *script_path, int apply, char *report,
                        size_t reportlen);

/* How long a worker's lease on a workflow lasts on PostgreSQL (ENGINE_LEASE_MS,
 * at least 100; default 10000): a worker renews its leases well within it. */
int64_t engine_lease_ms(void);

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

#endif
