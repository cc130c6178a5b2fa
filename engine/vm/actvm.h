/* actvm: the activity VM. One full Lua state (io, os, json, async bindings) that
 * runs named activity functions ("module.func") as coroutines, outside the
 * workflow sandbox. One attempt per call; retries are the engine's business.
 * Async bindings yield the coroutine; a libuv callback resumes it. */
#ifndef ENGINE_ACTVM_H
#define ENGINE_ACTVM_H

#include <stdint.h>
#include <lua.h>
#include <uv.h>

typedef struct actvm actvm;
typedef struct act_call act_call;

typedef struct act_info {
  const char *workflow_id;
  int64_t seq;
  int attempt;
  const char *name;
  const char *script_dir;   /* where the workflow's own activity modules live */
  int64_t start_to_close_ms; /* 0: none */
  int64_t heartbeat_ms;      /* 0: none */
  int64_t run;               /* the workflow's run: part of the idempotency key */
  const char *traceparent;   /* what its outgoing requests carry (trace_start.h), or NULL: none */
  const char *tracestate;    /* the run's caller's, handed on with it, or NULL */
  int traced;                /* its span is exported: activity.traced(), activity.span{} kept */
} act_info;

/* Called once when a pending attempt ends: ok=1 with the result JSON, or ok=0
 * with the error JSON {type,message,non_retryable?}. Not called after cancel. */
typedef void (*actvm_done_cb)(void *ud, act_call *call, int ok, const char *json);

/* Retry policy and timeouts parsed from an ActivityScheduled payload. */
#define ACT_MAX_NON_RETRYABLE 8
#define ACT_TYPE_MAX 64 /* bytes of an error type, with its NUL */
typedef struct act_opts {
  double start_to_close, schedule_to_close, heartbeat; /* seconds; 0 = none */
  double initial_interval, backoff, max_interval;
  int max_attempts; /* 0 = unlimited */
  int local; /* {local = true}: runs in the batch of its scheduling, before the results it acts on are durable */
  char non_retryable[ACT_MAX_NON_RETRYABLE][ACT_TYPE_MAX];
  int n_non_retryable;
} act_opts;

/* A native module an activity can require (name, its luaopen function). */
typedef struct actvm_module {
  const char *name;
  lua_CFunction open;
} actvm_module;
/* The activity VM, on loop, with the Lua library at lua_dir and the native
 * modules of the table (ended by a {NULL, NULL}; activity_modules for the
 * engine's own: activity_modules.h) besides activity and json. */
actvm *actvm_new(uv_loop_t *loop, const char *lua_dir, const actvm_module *modules, char *err, size_t errlen);

/* Returns a malloc'd JSON array of the workflow's history events from..to. */
typedef char *(*actvm_history_fn)(void *ud, const char *wf_id, int64_t from, int64_t to);
void actvm_set_history(actvm *a, actvm_history_fn fn, void *ud);
/* Returns workflow wf_id as a malloc'd JSON object {id, status, result,
 * error, events: its domain events as engine events --json prints them}, or
 * NULL when there is no such workflow or it cannot be read (activity.workflow). */
typedef char *(*actvm_workflow_fn)(void *ud, const char *wf_id);
void actvm_set_workflow(actvm *a, actvm_workflow_fn fn, void *ud);
/* activity.memory(op, args): the database's memory entries (ops/memory.h's
 * memory_call): args is JSON; returns malloc'd JSON, or NULL with err. */
typedef char *(*actvm_memory_fn)(void *ud, const char *op, const char *args, size_t n, char *err, size_t errlen);
void actvm_set_memory(actvm *a, actvm_memory_fn fn, void *ud);
/* What activity.worker() tells activities: the database's instance id (it
 * labels sandboxes) and the directory the database lives in. */
void actvm_set_worker(actvm *a, const char *instance, const char *db_dir);
/* Who hears activity.live(type, value) and activity.usage(provider, in, out). */
typedef struct actvm_observer {
  void (*live)(void *ud, const char *wf_id, const char *type, const char *json);
  void (*usage)(void *ud, const char *provider, double input_tokens, double output_tokens);
  void *ud;
} actvm_observer;
void actvm_set_observer(actvm *a, const actvm_observer *o);
void actvm_free(actvm *a);

/* Starts one attempt of the activity in payload {"args":...,"options":...}.
 * Returns 1 when it finished synchronously (*ok and *json set; json malloc'd),
 * 0 when pending (*call set; cb fires later). */
int actvm_call(actvm *a, const act_info *info, const char *payload, actvm_done_cb cb, void *ud, int *ok,
               char **json, act_call **call);
/* Abandons a pending attempt: its callback will not fire. */
void actvm_cancel(act_call *call);
/* What the attempt that ended last said of its span with activity.span{}
 * (JSON {name?, kind?, attributes?, error?}), or NULL: malloc'd, the
 * caller's. Take it in the attempt's callback, or right after actvm_call
 * returned 1, before another attempt can end. */
char *actvm_take_span(actvm *a);

/* Parses options (defaults filled in); returns -1 with err on invalid options. */
int actvm_parse_options(actvm *a, const char *payload, act_opts *o, char *err, size_t errlen);

/* What the retry policy reads of a failed attempt: the error object's own
 * top-level type and non_retryable (true only as a boolean), never a match
 * somewhere in its text (a nested {type=...} in a detail is not the error's). */
typedef struct act_failure {
  char type[ACT_TYPE_MAX];
  int type_too_long; /* longer than any non_retryable entry can be: matches none */
  int non_retryable;
} act_failure;
/* Reads the error JSON of a failed attempt into *why and returns (malloc'd)
 * the error as the workflow sees it: the same object with attempts set to the
 * engine's count, whatever the activity put there. */
char *actvm_failure(actvm *a, const char *err_json, int attempts, act_failure *why);

/* ---- for async bindings (lua_http.c, ...) ---- */
typedef struct http_ctx http_ctx;
/* The activity call whose coroutine is L, or NULL outside an activity. */
act_call *actvm_current(lua_State *L);
/* The traceparent and tracestate a call's outgoing requests carry (NULL:
 * none): what act_info gave it. */
const char *actvm_traceparent(const act_call *c);
const char *actvm_tracestate(const act_call *c);
/* The coroutine of a call: bindings push results onto it before resuming. */
lua_State *actvm_thread(act_call *c);
/* Records the operation a suspended call waits on; cancel(op) runs if the
 * attempt is abandoned (timeout, cancellation) instead of resuming it. */
void actvm_set_pending(act_call *c, void (*cancel)(void *op), void *op);
/* Resumes a suspended call with nargs values already pushed on its thread. */
void actvm_resume(act_call *c, int nargs);
uv_loop_t *actvm_loop_of(lua_State *L);
/* The activity VM's HTTP client, started on first use; NULL with err set
 * when it cannot be started. */
http_ctx *actvm_http_of(lua_State *L, char *err, size_t errlen);

#endif
