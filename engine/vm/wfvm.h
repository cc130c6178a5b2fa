/* wfvm: one workflow run as a Lua coroutine in a sandboxed VM, replayed from its
 * history. Primitives either find their result in the history (replay: no side
 * effect) or append a command through the host and block. The VM knows nothing of
 * SQL or the event loop; the engine drives it through this interface. */
#ifndef ENGINE_WFVM_H
#define ENGINE_WFVM_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

typedef struct wfvm wfvm;

typedef struct wfvm_host {
  void *ud;
  /* Appends a history event for this run; returns its seq (and the time
   * recorded with it in *time) or -1 on error. */
  int64_t (*append)(void *ud, const char *type, int64_t ref, const char *name, const char *hash,
                    const char *payload, int64_t *time);
  /* Appends a domain event; returns its per-session seq or -1. */
  int64_t (*emit)(void *ud, const char *type, const char *payload);
  /* Returns the malloc'd source of a required module (pinned for this run);
   * *chunkname gets a malloc'd display name. NULL with err set when not found. */
  char *(*load_module)(void *ud, const char *name, size_t *len, char **chunkname, char *err, size_t errlen);
  /* Output of print() in a live (not replaying) workflow. */
  void (*print)(void *ud, const char *msg);
} wfvm_host;

/* A replay check's append and emit (check_only): they write nothing, and
 * are never reached, the check ending where the history does. */
int64_t wfvm_check_append(void *ud, const char *type, int64_t ref, const char *name, const char *hash,
                          const char *payload, int64_t *time);
int64_t wfvm_check_emit(void *ud, const char *type, const char *payload);

/* Memory the engine may use in a VM beyond its limit, to report a stop. */
#define WFVM_MEM_RESERVE ((size_t)1 << 20)

typedef struct wfvm_config {
  size_t mem_limit;      /* bytes; ENGINE_WF_MEMORY_MB */
  int64_t instr_limit;   /* per resume; ENGINE_WF_INSTRUCTIONS */
  int check_only;        /* replay check: stop at the end of history instead of appending */
  int load_only;         /* wfvm_check_main: run the main chunk only, not the function it returns */
} wfvm_config;

typedef enum wfvm_state {
  WFVM_BLOCKED,  /* every thread waits: on the pending commands (wfvm_pending_at) */
  WFVM_DONE,     /* returned; wfvm_output() is the result JSON */
  WFVM_FAILED,   /* raised; wfvm_output() is the error JSON {type,message,stack} */
  WFVM_STUCK,    /* non-determinism; wfvm_output() is the message */
  WFVM_KILLED,   /* runaway script: budget or memory; wfvm_output() is the message */
  WFVM_CONTINUE, /* continue_as_new; wfvm_output() is the new input JSON */
  WFVM_END       /* check_only: reached the end of the history cleanly */
} wfvm_state;

typedef struct wfvm_cmd {
  char kind[16]; /* activity | timer | signal | slot | release | counter | rate | ratecharge | child */
  int64_t seq;
  char *name;
  char *payload;
  int is_new; /* appended by this resume (live), not found in history */
  int64_t time; /* when the command was recorded (epoch ms) */
} wfvm_cmd;

/* Reads the config defaults from the environment. */
void wfvm_config_default(wfvm_config *c);

/* Creates a VM for a run. Takes ownership of *history (emptied). */
wfvm *wfvm_new(const wfvm_config *cfg, const wfvm_host *host, const char *wf_id, int64_t run,
               hist_list *history);
void wfvm_free(wfvm *vm);
/* The workflow that started this one as a child (the workflows row's parent,
 * set by the engine at the start and never changed), or NULL: wf.info().parent.
 * Call before wfvm_start. */
void wfvm_set_parent(wfvm *vm, const char *parent);

/* Loads the main script (which must return function(input)) and runs it from
 * the first history event (WorkflowStarted) until it blocks or ends. */
wfvm_state wfvm_start(wfvm *vm, const char *src, size_t len, const char *chunkname);
/* The same with a load mode: "b" for bytecode made by wfvm_compile. */
wfvm_state wfvm_start_mode(wfvm *vm, const char *src, size_t len, const char *chunkname, const char *mode);
/* Compiles source to bytecode (with line info) for wfvm_start_mode(..., "b");
 * returns a malloc'd buffer or NULL when it does not compile. */
char *wfvm_compile(const char *src, size_t len, const char *chunkname, size_t *outlen);

/* Resumes a blocked VM with the outcome event of one of its pending commands
 * (outcome->ref is its seq): its future settles and whatever waited on it
 * runs. Outcomes must be delivered in the order they are logged. An outcome
 * of no pending command changes nothing. */
wfvm_state wfvm_deliver(wfvm *vm, const hist_event *outcome);

/* Commands issued and not answered, in issue order (futures the script
 * started, and what its threads wait on). Pointers are valid until the next
 * call into the VM. */
size_t wfvm_pending_count(const wfvm *vm);
const wfvm_cmd *wfvm_pending_at(const wfvm *vm, size_t i);
/* 1 when the command at seq is pending. */
int wfvm_waits_on(const wfvm *vm, int64_t seq);
/* 1 when the run asked for a slot (wf.limit's concurrency or cap), replayed
 * or live: only then can it hold or queue for one. */
int wfvm_issued_slot(const wfvm *vm);
/* How many wf.child commands the run issued (replayed or live). */
int64_t wfvm_children_started(const wfvm *vm);
/* The next pending command not handed out before by this VM, or NULL: each
 * is given to the engine once per VM (live ones to start, replayed ones to
 * look at again). */
const wfvm_cmd *wfvm_next_command(wfvm *vm);
/* The last pending command (an empty one when none): for a script that does
 * one thing at a time, the one it waits on. */
const wfvm_cmd *wfvm_blocked(const wfvm *vm);
const char *wfvm_output(const wfvm *vm);
/* What the script said of its run's span with wf.span{} (JSON: {name?,
 * attributes?}), the last call's, or NULL. Never recorded: a replay makes the
 * same calls, so a run in memory knows it whenever it ends. */
const char *wfvm_span(const wfvm *vm);
/* The top-level type of the error the script raised (WFVM_FAILED), read
 * without metamethods; "" otherwise. */
const char *wfvm_error_type(const wfvm *vm);
/* Number of history events consumed, and whether the VM ran past the history. */
size_t wfvm_cursor(const wfvm *vm);
size_t wfvm_history_len(const wfvm *vm);
size_t wfvm_mem_used(const wfvm *vm);

/* Checks a script for syntax errors without running it. */
int wfvm_check_syntax(const char *src, size_t len, const char *chunkname, char *err, size_t errlen);
/* Runs a script's main chunk alone in a throwaway VM (modules through
 * host->load_module; nothing else of the host is used) and checks that it
 * returns function(input). Returns 0, or -1 with err ("must return a
 * function(input), but it returns a number", "fails while loading: ...").
 * A chunk that calls a primitive while loading passes: only a run can tell. */
int wfvm_check_main(const wfvm_host *host, const char *src, size_t len, const char *chunkname, char *err,
                    size_t errlen);

#endif
