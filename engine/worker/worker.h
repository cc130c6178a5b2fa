/* worker: the state a running engine shares among its own files, and only
 * them (engine.h is the interface for everyone else). From the bottom:
 *
 *   otel_config.c, otel_export.c  spans to an OpenTelemetry collector: the
 *               OTEL_* settings; the queue, batches, OTLP/HTTP and retries
 *   batch.c     the group commit, store incidents, which results are not
 *               durable yet, the lease checks of a write
 *   checkpoints.c  SQLite's WAL copied into the database file in the
 *               background, off the commits' path
 *   otel_spans.c  a step's facts -> its OTLP span (pure; otel_spans.h)
 *   otel_steps.c  the spans of the steps recorded, held with their batch
 *               and exported once it is committed (tracing: e->otel)
 *   tasks.c     the timer of the due tasks (tasks_put writes and arms)
 *   runs.c      the run cache: a workflow's VM, its history appends
 *               (run_append, run_outcome) and status; the commands it
 *               blocks on go to the handler of their kind (run_command);
 *               the scripts and chunks that starts and replays reuse
 *   attempts.c  activity attempts, their leases and retries ("activity")
 *   slots.c     durable limits: slots (concurrency, caps), counters, rates
 *   child_limits.c  how deep a tree of children goes and how many run
 *               at once under one parent (child_max_depth, child_max_fanout)
 *   children.c  child workflows: the "child" command, a child's end told to
 *               its parent, parent_close, a child's timeout, the limits' refusals
 *   dispatch.c  due tasks: workflow wake-ups, activity (re)tries, timers
 *   client.c    in-process clients: create, signal, cancel in the batch
 *   hooks.c     the worker's hooks in the Lua library (lua/activities/worker.lua)
 *   schedules.c schedules firing inside `engine serve`
 *   replay.c    the replay check of a run against a script
 *   wftest.c    `engine test`: workflows against stubs in virtual time
 *   engine.c    the composition root: open (wiring the callbacks above),
 *               run, stop, free; the lease heartbeat and the crash-loop guard
 *
 * Each part's state in struct engine is marked with its owner. */
#ifndef ENGINE_WORKER_H
#define ENGINE_WORKER_H

#include "actvm.h"
#include "engine.h"
#include "otel_export.h"
#include "trace_cache.h"
#include "util.h"
#include "uvloop.h"
#include "wfvm.h"

/* Tasks dispatched per call: bounded so that I/O is served in between. */
#define DISPATCH_BATCH 512

/* A workflow run kept in memory (engine.runs), with its VM. */
typedef struct wfrun {
  struct engine *e;
  char *id;
  int64_t run;
  char *script_dir;
  char *parent; /* the workflow that started it as a child, or NULL */
  char status[16];
  int cancel; /* 1 requested, 2 delivered, 3 terminate (children.c) */
  int64_t next_seq;
  wfvm *vm;
  char answer[128]; /* the payload of an outcome slots.c appended, until it is delivered */
  /* child_limits.c: upper bounds of its depth and of its children running,
   * each plus one (0: not measured yet in this run's life in the cache) */
  int64_t depth_bound, running_bound;
} wfrun;

/* One running activity attempt, keyed "wf_id/seq" in engine.attempts. */
typedef struct attempt {
  struct engine *e;
  char *wf_id;
  int64_t seq;
  int n;
  int64_t first_at;
  int64_t run; /* the workflow's run, for the idempotency key */
  char *name;
  char *payload;
  char *script_dir;
  act_opts opts;
  act_call *call;
  int64_t lease_ms; /* how long its lease lasts: renewed when a lost batch took it */
  int64_t started_mono; /* for engine_config.on_activity */
  /* the batch whose commit it waits for before its body begins (0: begun):
   * a step never acts on a result that is not durable (attempts.c) */
  int64_t after_batch;
  char key[160];
  /* its span, when tracing (otel_steps.c): when its body began (wall clock,
   * ns) and what it said of itself (activity.span{}) */
  int64_t begun_ns;
  char *span_note;
} attempt;

typedef struct codebuf {
  char *buf;
  size_t len;
} codebuf;

/* A status change, delivered to engine_config.on_status after its commit. */
typedef struct note {
  char *id, *status, *detail;
} note;

typedef struct hooks hooks;

struct engine {
  /* ---- engine.c: the composition root (open, run, stop, free) ---- */
  uv_loop_t loop;
  store *st;
  actvm *act;
  wfvm_config vmcfg;
  engine_config cfg;
  char *lua_dir;
  char owner[40];
  dbwatch *watch;
  uv_signal_t sigint, sigterm, sighup;
  int stopping;
  /* engine_serve_as_service: the service's callbacks, READY=1's status, the
   * watchdog's pings and the bound of a stop */
  engine_service svc;
  int service, ready;
  int draining; /* SIGTERM: stopping, and the loop runs on until the API is drained or the bound */
  int64_t stop_began; /* util_mono_ms() when the stop began: the span flush has what is left of the bound */
  char status[256];
  uv_timer_t watchdog_timer, stop_timer;
  uv_timer_t effects_timer; /* begins the deferred attempts once their commit is answered */
  /* several workers share the store (PostgreSQL): each workflow is run under
   * a lease of lease_ms (ENGINE_LEASE_MS), renewed by lease_timer */
  int shared;
  int64_t lease_ms;
  int64_t max_leases; /* workflows it runs at once at most (ENGINE_MAX_LEASES): the rest are the others' */
  uv_timer_t lease_timer;
  hooks *hooks; /* hooks.c */
  /* spans to an OpenTelemetry collector (otel_export.c), NULL when tracing
   * is off: every producer checks it first */
  otel_exporter *otel;

  /* ---- batch.c: the group commit ---- */
  uv_prepare_t prep;
  note *notes; /* status changes, told after their commit */
  size_t nnotes, capnotes;
  /* engine_watch_status: a second observer of the status notes (schedules.c) */
  void (*status_watch)(void *ud, const char *id, const char *status);
  void *status_watch_ud;
  struct waiter *waiters; /* engine_when_committed */
  size_t nwaiters, capwaiters;
  struct inflight *inflight; /* a group commit whose answer is still to come */
  struct start_lane *lane;   /* starts_sent.c: the API's starts, on a connection of their own */
  int failed_commit; /* the store could not be written and has not recovered yet */
  /* a store incident (a lost batch, a failed query): retried with backoff */
  uv_timer_t retry_timer;
  int64_t backoff_ms, incident_since, recovered_at;
  int incident_failures;
  int recovering; /* dispatch waits until our leases are set right again */
  /* A step acts only on durable results: batches are numbered as they are
   * written; a workflow with a result in a batch not yet committed keeps the
   * effects it issues after it (activity bodies) until that commit. */
  int64_t batch;    /* the batch being written, from 1 */
  int64_t durable;  /* the last batch whose commit was answered */
  int64_t losses;   /* batches lost so far: what a read on its way answers for a lost one does not hold */
  strmap unsettled; /* id -> unsettled*: its first result that is not durable yet */
  /* what follows a batch, wired by engine.c at open: */
  void (*on_settled)(engine *e); /* it is durable and attempts wait for it */
  void (*on_lost)(engine *e);    /* it is lost: drop what the log does not hold */
  void (*on_retry)(engine *e);   /* the backoff is over, or the store is writable again */
  void (*on_committed)(engine *e); /* a commit was answered: it wrote */
  uint64_t commit_began; /* uv_hrtime() when the last commit began (engine_config.on_commit_stages) */

  /* ---- checkpoints.c: SQLite's WAL copied into the database file on a
   * thread of its own (store_checkpoint), off the commits' path ---- */
  uv_thread_t ckpt_tid;
  uv_mutex_t ckpt_mu; /* guards ckpt_asked, ckpt_quit and the answer below */
  uv_cond_t ckpt_cv;
  uv_async_t ckpt_done; /* the thread's answer, heard on the loop */
  int ckpt_thread;      /* 1: the thread runs; -1: it could not be started */
  int ckpt_asked, ckpt_quit;
  uv_timer_t ckpt_timer; /* starts one once the loop pauses */
  int ckpt_running;
  int64_t wal_frames;    /* in the WAL after the last commit */
  int64_t wal_copied;    /* of them, copied by the last background checkpoint */
  int64_t wal_restarts;  /* times the WAL was seen starting over */
  int64_t ckpt_restarts; /* wal_restarts when the running checkpoint began */
  int64_t ckpt_copied; /* its answer (written by the thread) */
  int ckpt_rc;
  int64_t ckpt_background, ckpt_in_commit; /* how many ran, for /metrics */

  /* ---- otel_steps.c: spans held until their outcome is committed ---- */
  strmap otel_traces;             /* "id/run" -> the run's trace, read once from its WorkflowStarted */
  struct held_spans *otel_open;   /* the spans of the batch being written */
  struct held_spans *otel_held;   /* every batch's spans still waiting for its commit's answer */

  /* ---- tasks.c: the timer of the due tasks ---- */
  uv_timer_t task_timer;
  int64_t task_timer_at;
  int64_t dispatched_at, dispatch_ms; /* the last dispatch's start and how long it took (on_external's gap) */
  void (*on_due)(engine *e); /* dispatch_due, registered by dispatch_init */

  /* ---- dispatch.c ---- */
  /* while a dispatch acts on the tasks it started together: the workflows
   * written to since, whose rows and history read with the tasks are stale
   * (engine_touch, batch.c) */
  int dispatching;
  int touching; /* from the start of a dispatch's tasks to the end of its acting */
  strmap touched;
  struct due_ctx *flight; /* a dispatch whose read's answer is still to come */
  int due_after_commit;   /* a dispatch waits for the answer of the commit on its way */
  int64_t dispatch_batch; /* the batch the last dispatch began in */

  /* ---- runs.c: the run cache ---- */
  strmap runs;     /* id -> wfrun*, live runs kept in memory */
  strmap bytecode; /* code hash -> compiled chunk (codebuf*): replays skip the parser */
  strmap scripts;  /* path -> scriptbuf*: starts skip re-reading and re-checking unchanged files */
  size_t max_cached; /* runs kept in memory while their activity runs (ENGINE_MAX_CACHED_RUNS) */
  /* the kinds of command runs answer (runs_register), and what a run's end
   * releases (slots.c) */
  const struct run_command *commands[16];
  size_t ncommands;
  void (*on_run_end)(engine *e, const char *wf_id);
  /* a run closed: status terminal, or "continued" (children.c) */
  void (*on_close)(struct wfrun *r, const char *status, const char *result, const char *error);

  /* ---- attempts.c ---- */
  strmap attempts; /* "id/seq" -> attempt* */
  char **deferred; /* keys of attempts waiting for a commit */
  size_t ndeferred, capdeferred;
};

/* batch.c */
/* The loop's group commit: the open batch sent without waiting. */
void batch_commit_nowait(engine *e);
/* At engine_free: the commit on its way answered and dropped; then, once
 * the loop is closed, the notes, waiters and marks freed. */
void batch_abandon(engine *e);
/* starts_sent.c: the lane's queued starts go (at the end of a loop
 * iteration); at engine_free, its connection closes */
void starts_flush(engine *e);
void starts_free(engine *e);
void batch_free(engine *e);
void engine_log_err(engine *e, const char *what);
void engine_notify(engine *e, const char *id, const char *status, const char *detail);
void engine_store_incident(engine *e);
/* Whether this worker may run workflow id now: on a shared store it claims
 * the lease (in the batch) unless it holds it, and fences the batch on it;
 * 0 when another worker holds it. Always 1 on SQLite. */
int engine_owns(engine *e, const char *id);
/* Workflow id was written to: a dispatch under way reads it again (touched). */
void engine_touch(engine *e, const char *id);
/* Workflow id recorded a result at (run, seq) in the open batch. */
void engine_unsettle(engine *e, const char *id, int64_t run, int64_t seq);
/* The batch to wait for before an effect issued at (run, seq) of workflow
 * id may begin: one that holds a result recorded before it; 0 when every
 * result before it is durable. */
int64_t engine_unsettled(engine *e, const char *id, int64_t run, int64_t seq);

/* checkpoints.c */
/* Arms the idle timer (at open; a libuv error number, 0 when it could). */
int checkpoints_init(engine *e);
/* After each commit that wrote: starts a background checkpoint when due. */
void checkpoints_after_commit(engine *e);
/* At engine_free, before the loop is closed: the thread ends (a checkpoint
 * under way finishes first) and is joined, so the store may be closed. */
void checkpoints_stop(engine *e);

/* otel_steps.c: each step's span, built where its outcome is appended and
 * exported only once that batch is committed (dropped with a lost one);
 * never for a replayed step, which appends nothing. Every hook is called
 * only when e->otel is set: tracing that is off costs a pointer test. */
struct wfrun;
/* Whether spans of workflow id's run are exported (its trace is sampled):
 * what an attempt tells its activity (activity.traced()). */
int otel_steps_traced(engine *e, const char *id, int64_t run);
/* An event appended to run r's log (run_append): its end, an approval's
 * answer, a child's end make their span. */
void otel_steps_appended(struct wfrun *r, const hist_event *ev);
/* Attempt a ended: ok with its result, or failed with error (the error as
 * the workflow sees it); retry: another attempt follows, recorded in this
 * batch too. */
void otel_steps_attempt(engine *e, const attempt *a, int ok, const char *error, int retry);
/* The wall clock in ns: when an attempt began (only when tracing). */
int64_t otel_steps_now_ns(void);
/* A lost batch: the traces kept are read again from the log. */
void otel_steps_forget(engine *e);
/* At engine_free: what still waits for a commit is dropped. */
void otel_steps_free(engine *e);

/* runs.c */
/* A kind of command a run blocks on (wfvm_cmd.kind), and what answers it.
 * runs.c has timer and signal; attempts.c and slots.c register theirs at
 * start-up, so the runs call none of them by name. */
typedef struct run_command {
  const char *kind;
  /* 1 with its outcome appended into *ev (deliver it; *keep holds what ev
   * points at until then), 0 when it waits, -1 when the batch failed */
  int (*start)(wfrun *r, const wfvm_cmd *c, hist_event *ev, void **keep);
  void (*release)(void *keep);         /* after delivery (NULL: free) */
  void (*drop)(wfrun *r, int64_t seq); /* the command is cancelled or its run ended: stop what runs for it */
} run_command;
void runs_init(engine *e);
void runs_register(engine *e, const run_command *k);
/* A lost batch: every cached run goes (replayed from the log when needed). */
void runs_drop_all(engine *e);
/* An outcome from outside a run's step (an attempt, a timer, a timeout)
 * appended to workflow id's log, the run in memory or not: 1 with *ev, 0
 * when it is not this worker's to write, -1 when the batch failed. */
int run_outcome(engine *e, const char *id, const char *type, int64_t ref, const char *name, const char *payload,
                hist_event *ev);
int64_t run_append(wfrun *r, const char *type, int64_t ref, const char *name, const char *hash, const char *payload,
                   hist_event *out);
void run_set_status(wfrun *r, const char *status, const char *result, const char *error, const char *detail);
void run_free(wfrun *r);
void run_evict(wfrun *r);
void run_clear_codecache(engine *e);
/* The workflow script at path read, checked (engine_check_script) and
 * hashed once, again only when its file changes (mtime, size): what a start
 * in the worker writes (engine_submit, a child's start). NULL with err. */
const scriptbuf *run_script(engine *e, const char *path, char *err, size_t errlen);
void run_load(engine *e, const wf_row *w, hist_list *loaded);
void run_load_id(engine *e, const char *id);
/* The log of workflow w is damaged (store_hist_load's STORE_ECORRUPT: a
 * broken hash chain, a damaged page): nothing is replayed from it; it is
 * stuck with why (which names the first bad seq). */
void run_damaged(engine *e, const wf_row *w, const char *why);
/* The trace of run of workflow id (trace_cache.h): kept since the run was
 * loaded, else read once from its WorkflowStarted event; NULL when the log
 * has none. The pointer lasts until the next load of a run. */
const run_trace *run_trace_of(engine *e, const char *id, int64_t run);
void run_deliver(engine *e, const char *id, const hist_event *ev);
int run_cancel_pending(wfrun *r, wfvm_state *st);
void run_finish(wfrun *r, const char *status, const char *event, const char *result, const char *error);
void run_handle_state(wfrun *r, wfvm_state st);
/* A stand-in for the current run of workflow id when it is not in memory,
 * without a VM: appends go after its last event. NULL when the workflow is
 * not found. run_free (or run_finish) releases it; it is never cached. */
wfrun *run_detached(engine *e, const char *id);

/* attempts.c */
/* Registers the "activity" command with the runs. */
void attempts_init(engine *e);
/* A lost batch: the attempts whose command the log does not show waiting go. */
void attempts_drop_unlogged(engine *e);
/* Another worker took workflow id over: its attempts here stop. */
void attempts_drop_wf(engine *e, const char *id);
void attempt_free(attempt *a);
int attempt_start(engine *e, wfrun *r, const char *wf_id, const char *script_dir, int64_t seq, int n,
                  int64_t first_at, const char *name, const char *payload, hist_event *ev, attempt **keep);
/* Whether the command at seq of the workflow's current run has its outcome in the log. */
int attempt_answered(engine *e, const char *id, wfrun *r, int64_t seq);
/* Whether the activity at seq is still scheduled without an outcome: its
 * ActivityScheduled event into *h (the caller frees it). */
int attempt_open(engine *e, const char *id, int64_t run, int64_t seq, hist_list *h);
char *attempt_history_json(void *ud, const char *wf_id, int64_t from, int64_t to);
/* activity.workflow(id): another workflow's row and domain events (actvm_workflow_fn). */
char *attempt_workflow_json(void *ud, const char *wf_id);
/* activity.memory: ops/memory.h's memory_call on this worker's database. */
char *attempt_memory_json(void *ud, const char *op, const char *args, size_t n, char *err, size_t errlen);
/* Begins the attempts that waited for a commit that is now answered. */
void attempts_begin_deferred(engine *e);
/* Forgets the deferred attempts' keys (a lost batch or a stop dropped them). */
void attempts_clear_deferred(engine *e);

/* tasks.c */
/* A task due at `at` was written: the task timer fires by then (a run woken
 * by an in-process client, not by dispatch, writes its timers too). */
void tasks_arm(engine *e, int64_t at);
/* Writes task (wf_id, kind, seq) due at `at` into the batch and arms the
 * timer for it: 0, or -1 when the write failed. */
int tasks_put(engine *e, const char *wf_id, const char *kind, int64_t seq, int64_t at);
void tasks_disarm(engine *e);

/* answer_wait.c: the answer of st's request on its way (store_commit_start,
 * a dispatch's read), heard on the loop: done(ud, rc) once it is in, after
 * the wait has ended itself. NULL when the socket cannot be polled: the
 * caller waits for it (store_commit_wait). answer_wait_end drops one whose
 * answer is no longer wanted (its request is answered elsewhere). */
typedef struct answer_wait answer_wait;
answer_wait *answer_wait_start(uv_loop_t *loop, store *st, void (*done)(void *ud, int rc), void *ud);
void answer_wait_end(answer_wait *w);
void tasks_fire_due(engine *e);
/* fn runs when the timer fires (dispatch_init registers dispatch_due). */
void tasks_on_due(engine *e, void (*fn)(engine *));

/* dispatch.c */
void dispatch_due(engine *e);
/* Registers dispatch_due with the task timer: once, at start-up. */
void dispatch_init(engine *e);
/* A dispatch's read on its way (PostgreSQL): dispatch_poll goes on with it
 * if its answer came in meanwhile (before the loop blocks), dispatch_settle
 * waits for it and goes on (before the last commit of a run),
 * dispatch_abandon waits and drops it (engine_free). */
void dispatch_poll(engine *e);
void dispatch_settle(engine *e);
void dispatch_abandon(engine *e);

/* slots.c */
/* Registers the kinds slot, release, counter, rate and ratecharge with the
 * runs (each answers with its outcome at once, or the run waits queued) and
 * what a run's end releases. */
void slots_init(engine *e);
/* A run ended: what it held or queued for goes to the next in line. */
void slots_release_all(engine *e, const char *wf_id);

/* child_limits.c */
/* Whether run r may start child id, with the options of its command (its
 * "options" object as JSON): 0 yes; 1 no, *refusal (malloc'd) the error to
 * record as the child's outcome: ChildLimit over child_max_depth or
 * child_max_fanout (or the call's max_depth, max_fanout), InvalidOptions for
 * an option over the engine's limit; -1 when the store failed. */
int child_limits_check(engine *e, wfrun *r, const char *id, const char *options, char **refusal);

/* children.c */
/* Registers the "child" command with the runs, and what a run's close
 * does for its parent and its children. */
void children_init(engine *e);
/* A wake-up of workflow w (r: its run in memory, or NULL) whose parent's
 * close terminates it (cancel 3): it ends now as cancelled (Terminated), no
 * clean-up. 1 when it was that, 0 when not. */
int children_terminate(engine *e, wfrun *r, const wf_row *w);
/* The "child_timeout" task of workflow id's command at seq (run): the wait
 * raises Timeout unless the child ended first, and the child is cancelled. */
void children_timeout(engine *e, const char *id, int64_t run, int64_t seq);

/* hooks.c */
void hooks_open(engine *e);
/* Starts the watches and calls worker.start; started(e) runs once it has
 * ended (at once, or later on the loop), before the first sweep. */
void hooks_start(engine *e, void (*started)(engine *e));
/* Calls worker.reload (SIGHUP); reloaded(e) runs once it has ended. */
void hooks_reload(engine *e, void (*reloaded)(engine *e));
void hooks_free(engine *e);

#endif
