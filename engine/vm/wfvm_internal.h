/* wfvm_internal.h: what the files of the workflow VM share, and only them
 * (wfvm.h is the interface for everyone else). From the bottom:
 *
 *   wfvm_commands.c    commands matched against the history (replay) or
 *                      appended (live), their outcomes and the futures they
 *                      settle, the threads' waits
 *   wfvm_limits.c      what stops a runaway script: the memory limit, the
 *                      instruction budget, the payload size; their defaults
 *   wfvm_child.c       wf.child and wf.start_child: their options, the
 *                      child's id, the ChildStarted command
 *   wfvm_primitives.c  the `workflow` module a script requires (wf.activity,
 *                      wf.sleep, ..., futures and wf.spawn)
 *   wfvm_sandbox.c     the environment a script sees: the safe globals and
 *                      libraries, the deterministic replacements
 *   wfvm.c             a VM's life: created, started, resumed by the
 *                      scheduler with each outcome, freed (the public API) */
#ifndef ENGINE_WFVM_INTERNAL_H
#define ENGINE_WFVM_INTERNAL_H

#include <lauxlib.h>
#include <lua.h>
#include <string.h>

#include "wfvm.h"

#define HOOK_EVERY 10000
#define REG_VM "engine.wfvm"
#define ERROR_MT "engine.wf_error"
#define FUTURE_MT "wf.future"

/* A command issued and not yet answered: its outcome settles its future. */
typedef struct pending {
  wfvm_cmd cmd;
  int fut_ref; /* the future (registry) */
  int handed;  /* given to the engine by wfvm_next_command */
} pending;

/* A durable coroutine: the workflow body (threads[0]) or one of wf.spawn.
 * Only the scheduler resumes them, one at a time, in a fixed order. */
typedef struct vthread {
  lua_State *L;
  int ref;      /* keeps the thread alive */
  int fut_ref;  /* wf.spawn: the future of its result; LUA_NOREF for the body */
  int ready;    /* to be resumed (not started yet, or what it waits on settled) */
  int nargs;    /* values on its stack to resume it with */
  int wait_ref; /* what it waits on: a future, or a table of them */
  int wait_mode;
  int64_t checked; /* vm->settles when its wait was last found unsatisfied */
} vthread;

enum { WAIT_ONE, WAIT_ALL, WAIT_ANY };

/* The userdata behind a future; what settled it is in its user value. */
typedef struct future {
  int64_t seq;   /* the command; 0 for wf.spawn */
  int settled;
  int64_t order; /* when it settled, in settle order (wf.any) */
} future;

struct wfvm {
  char error_type[64]; /* the type of the error the script raised (WFVM_FAILED) */
  lua_State *L;  /* the VM */
  lua_State *co; /* the workflow coroutine */
  int co_ref;
  int env_ref; /* sandbox environment table */
  wfvm_config cfg;
  wfvm_host host;
  char *wf_id;
  char *parent; /* the workflow that started it as a child (wfvm_set_parent), or NULL */
  int64_t run;

  hist_list hist;
  size_t cursor; /* next history event to consume */
  int64_t last_seq; /* the last event the script has seen (consumed or appended) */
  int64_t now_ms;
  uint64_t rng;    /* the run's stream: seeded from the log, never advanced inside a checkpoint fn */
  uint64_t ck_rng; /* draws inside a checkpoint function (run live only) */

  size_t mem_used;
  int64_t instr;
  int in_checkpoint;
  int limit_on; /* the memory limit applies while the script runs, not to the engine's own work */

  pending *pend; /* commands issued and not answered, in issue order */
  size_t npend, cappend;
  int issued_slot; /* a command of kind slot was issued (replayed or live) */
  int64_t nchildren; /* wf.child commands issued (replayed or live): numbers the ids made for them */
  vthread *threads; /* in creation order: the order they are resumed in */
  size_t nthreads, capthreads;
  lua_State *current; /* the thread running now, NULL between resumes */
  int64_t settles;    /* futures settled so far */
  char *output;
  char *kill_reason;
  char *stuck_msg;
  int check_end;
  int cas;          /* continue_as_new requested */
  int engine_yield; /* the last yield was the engine's own (a primitive, a stop), not the script's */
  int broken;       /* an error in the engine's own work in this VM: never entered again */
  char *span;       /* wf.span's description of the run's span (JSON), or NULL */
  /* A fork's steps (engine fork; the "forks" of its WorkflowStarted), oldest
   * first: the events up to #at were recorded as workflow id, and from #at
   * on the step's entry is wf.info().fork. forks_ref: the decoded list. */
  struct fork_step {
    char *id;
    int64_t at;
  } *forks;
  size_t nforks;
  int forks_ref;
};

/* The VM of a Lua state (any of its threads). */
static inline wfvm *get_vm(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, REG_VM);
  wfvm *vm = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return vm;
}

/* The budget is per wake-up: it starts again at each outcome the run takes,
 * live (delivered) and on replay (read from the log) alike. Each resume of a
 * thread re-sets its hook, which restarts the countdown, so a wake-up counts
 * the same instructions live and on replay. A replay stays bounded: at most
 * one budget per recorded outcome, plus one. */
static inline void budget_restart(wfvm *vm) { vm->instr = 0; }

static inline int is_marker(const hist_event *e) { return strcmp(e->type, "PatchMarker") == 0; }

/* The next history event a command must match, or NULL when live. Patch markers
 * that the script no longer asks about are skipped (a removed patched() call). */
static inline const hist_event *peek(wfvm *vm) {
  while (vm->cursor < vm->hist.n && is_marker(&vm->hist.v[vm->cursor])) vm->cursor++;
  return vm->cursor < vm->hist.n ? &vm->hist.v[vm->cursor] : NULL;
}

/* Whether the script is past its recorded history. A question, not a step:
 * it moves no cursor, so a patch marker is still there for the wf.patched()
 * that comes after (wf.info() before it made a replay take the old branch). */
static inline int live(const wfvm *vm) {
  size_t c = vm->cursor;
  while (c < vm->hist.n && is_marker(&vm->hist.v[c])) c++;
  return c >= vm->hist.n;
}

/* What each file gives the others; each is described where it is defined. */

/* ----------------------------------------------------- wfvm_commands.c --- */

/* Checks a name argument (no NUL; repaired to UTF-8 in place), and a
 * duration in seconds (raising type with what named); both raise before
 * anything is recorded. */
const char *wfvm_check_name(lua_State *L, int arg, const char *what);
void wfvm_check_seconds(lua_State *L, lua_Number v, const char *type, const char *what);
void wfvm_script_where(lua_State *L, char *out, size_t n);
void wfvm_command_hash(const char *kind, const char *name, const char *args, char out[17]);
int wfvm_go_stuck(lua_State *L, wfvm *vm, const char *msg);
const hist_event *wfvm_expect(lua_State *L, wfvm *vm, const char *type, const char *kind, const char *name,
                              const char *args, const char *hash);
/* Whether e records the command (type; kind, name and args, hashed as hash): its
 * type, name and hash; for an event a fork copied (recorded as another
 * workflow: wfvm_recorded_as), the same with this workflow's id, where the
 * name or an argument says it, read as that one's. */
int wfvm_event_is(const wfvm *vm, const hist_event *e, const char *type, const char *kind, const char *name,
                  const char *args, const char *hash);
/* The id of the workflow that recorded the event at seq when it is not this
 * one (a fork's copied prefix), else NULL. */
const char *wfvm_recorded_as(const wfvm *vm, int64_t seq);
/* A fork's steps read from its WorkflowStarted payload (the table on top of
 * L): 0, or -1 when they are not a list of {id, at, ...}. */
int wfvm_read_forks(wfvm *vm, lua_State *L);
/* Pushes wf.info().fork: the fork step in force at the run's place in its
 * history, or nil. */
void wfvm_push_fork(lua_State *L, const wfvm *vm);
int64_t wfvm_append(lua_State *L, wfvm *vm, const char *type, int64_t ref, const char *name, const char *hash,
                    const char *payload);
void wfvm_check_primitive(lua_State *L, wfvm *vm, const char *what);
void wfvm_check_blocking(lua_State *L, wfvm *vm, const char *what);
int wfvm_raise_error(lua_State *L, const char *type, const char *message);
int wfvm_error_tostring(lua_State *L);
void wfvm_decode_or_nil(lua_State *L, const char *payload);
void wfvm_free_cmd(wfvm_cmd *c);
pending *wfvm_find_pending(const wfvm *vm, int64_t seq);
future *wfvm_new_future(lua_State *L, int64_t seq);
void wfvm_settle(wfvm *vm, lua_State *L, int idx);
void wfvm_take_outcome(wfvm *vm, const hist_event *e);
int wfvm_wait_done(lua_State *L, int idx, int mode, lua_Integer *which);
int wfvm_wait_on(lua_State *L, wfvm *vm, int idx, int mode, const char *what);
int wfvm_block_on(lua_State *L, wfvm *vm, const char *kind, const char *type, const char *name,
                  const char *args_json, const char *payload_live);
int wfvm_command(lua_State *L, wfvm *vm, int wait, const char *kind, const char *type, const char *name,
                 const char *args_json, const char *payload_live);
void wfvm_add_thread(wfvm *vm, lua_State *co, int ref, int fut_ref, int nargs);

/* ------------------------------------------------------- wfvm_limits.c --- */

void *wfvm_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
void wfvm_count_hook(lua_State *L, lua_Debug *ar);
void wfvm_check_size(lua_State *L, size_t len, const char *what);

/* --------------------------------------------------- wfvm_primitives.c --- */

int wfvm_open_workflow(lua_State *L);
/* Makes the metatable of futures (FUTURE_MT) in a new VM. */
void wfvm_future_metatable(lua_State *L);

/* ------------------------------------------------------- wfvm_child.c --- */

/* wf.child (wait) and wf.start_child (its future). */
int wfvm_child_command(lua_State *L, int wait);

/* ------------------------------------------------------ wfvm_sandbox.c --- */

/* Fills a new VM's state (the VM as light userdata at 1): the sandbox
 * environment (env_ref), the metatables, the built-in modules. */
int wfvm_build_sandbox(lua_State *L);

#endif
