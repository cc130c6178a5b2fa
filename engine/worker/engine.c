/* engine: the worker's composition root. One libuv loop drives workflow VMs
 * (runs.c), activity attempts (attempts.c), due tasks and timers (dispatch.c,
 * tasks.c), the group commit (batch.c) and the worker's hooks (hooks.c).
 * This file owns the loop's life (open, run, stop, free) and wires the
 * callbacks by which the lower files reach the higher ones (what follows a
 * batch, the kinds of command, the task timer); besides, the lease
 * heartbeat, setting the leases right after an incident, the count of
 * crashes that stops a workflow from crash-looping the engine, and the
 * signals: engine serve's life as a service (readiness, SIGHUP's reload,
 * SIGTERM's stop within a bound, the watchdog's pings); the span exporter's
 * life (otel_export.c: opened with the engine, flushed at its stop). */
#include "home.h"
#include "worker.h"

#include "activity_modules.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "crash.h"
#include "fatal.h"
#include "json.h"
#include "log.h"
#include "sdnotify.h"

static void on_effects(uv_timer_t *t) { attempts_begin_deferred(t->data); }

/* A batch is durable and attempts wait for it: they begin at the loop's
 * next turn, not from inside the commit. */
static void on_settled(engine *e) { uv_timer_start(&e->effects_timer, on_effects, 0, 0); }

/* A lost batch (batch.c): memory may be ahead of the log, and the log is
 * the truth: the runs and attempts drop what it does not hold. */
static void on_batch_lost(engine *e) {
  runs_drop_all(e);
  attempts_drop_unlogged(e);
  otel_steps_forget(e); /* a run it started may be gone: its trace is read again */
}

/* After a lost batch the leases in the log may not match the attempts in
 * memory: void every lease of this engine and lease the running attempts
 * again, committed at once; then dispatch as usual. */
static void on_store_retry(engine *e) {
  if (e->stopping) return;
  int bad = store_task_release(e->st, e->owner) != STORE_OK;
  for (size_t i = 0; i < e->attempts.cap && !bad; i++) {
    if (!STRMAP_LIVE(&e->attempts, i)) continue;
    attempt *a = e->attempts.vals[i];
    int64_t now = util_now_ms();
    int next = a->after_batch ? a->n : a->n + 1; /* a deferred one has not begun: the same attempt */
    bad = store_task_put(e->st, a->wf_id, "activity", a->seq, now, next, a->first_at, e->owner,
                         now + a->lease_ms) != STORE_OK;
  }
  e->recovering = 0;
  if (engine_commit(e) == 0) dispatch_due(e); /* a failure has re-armed the retry */
}

void engine_dispatch_now(engine *e) { dispatch_due(e); }

int engine_begin_deferred(engine *e) {
  int n = (int)e->ndeferred;
  attempts_begin_deferred(e);
  return n;
}

void engine_watch_status(engine *e, void (*cb)(void *ud, const char *id, const char *status), void *ud) {
  e->status_watch = cb;
  e->status_watch_ud = ud;
}

/* Group commit: everything written during this loop iteration lands in one
 * transaction, just before the loop blocks for I/O. A failed commit is
 * retried with backoff (engine_store_incident), never half applied. */
static void on_prepare(uv_prepare_t *p) {
  engine *e = p->data;
  dispatch_poll(e); /* a dispatch's answer a store call waited for meanwhile */
  /* a dispatch due now goes before the commit, and its writes with it: one
   * commit a cycle rather than one it would wait for (once a batch) */
  if (e->dispatch_batch != e->batch) tasks_fire_due(e);
  batch_commit_nowait(e);
  starts_flush(e);
}

/* Another process committed: a start, a signal or a cancel may be due here.
 * Several workers commit hundreds of times a second between them, nearly
 * always for work of their own, and each wake-up is a dispatch with its
 * round trips on this loop; so the wake-ups are coalesced, to at most one
 * dispatch per gap of ten times the last dispatch's length, between
 * WAKE_GAP_MS and WAKE_GAP_MAX_MS: they take about a tenth of the loop
 * however far away the database is, and what comes sooner is taken at the
 * end of the gap. */
#define WAKE_GAP_MS 10
#define WAKE_GAP_MAX_MS 100
static void on_external(void *ud) {
  engine *e = ud;
  int64_t gap = 10 * e->dispatch_ms;
  gap = gap < WAKE_GAP_MS ? WAKE_GAP_MS : gap > WAKE_GAP_MAX_MS ? WAKE_GAP_MAX_MS : gap;
  int64_t wait = e->dispatched_at + gap - util_mono_ms();
  if (wait <= 0) dispatch_due(e);
  else tasks_arm(e, util_now_ms() + wait);
}

/* ------------------------------------------------------------ service --- */

void engine_serve_as_service(engine *e, const engine_service *svc) {
  e->svc = *svc;
  e->service = 1;
  sdnotify_init(); /* takes NOTIFY_SOCKET from the environment before a thread or a child starts */
}

static void notify_ready(engine *e) {
  char *msg = util_fmt("READY=1\nSTATUS=%s", *e->status ? e->status : "ready");
  sdnotify(msg);
  free(msg);
}

/* worker.start has ended: the policy set and the triggers are loaded. */
static void on_started(engine *e) {
  if (!e->service || e->stopping) return;
  *e->status = 0;
  if (e->svc.ready) e->svc.ready(e->svc.ud, e->status, sizeof e->status);
  for (char *p = e->status; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' '; /* STATUS= is one line of the datagram */
  e->ready = 1;
  notify_ready(e);
}

static void on_watchdog(uv_timer_t *t) {
  (void)t;
  sdnotify("WATCHDOG=1");
}

/* SIGHUP, part one: the configuration file's reloadable settings. */
static void reload_config(void) {
  char changed[2048], restart[2048], err[1024];
  if (config_reload(changed, sizeof changed, restart, sizeof restart, err, sizeof err) != 0) {
    log_msg(LOGL_ERROR, "cannot reload the configuration: %s (the settings in force stay)", err);
    return;
  }
  if (*changed) log_msg(LOGL_INFO, "reloaded the configuration: changed %s", changed);
  if (*restart) log_msg(LOGL_WARNING, "reloaded the configuration: needs a restart: %s", restart);
  if (!*changed && !*restart) log_msg(LOGL_INFO, "reloaded the configuration: nothing changed");
}

/* SIGHUP, the end: worker.reload has reloaded the policy set and the triggers. */
static void on_reloaded(engine *e) {
  if (e->ready && !e->stopping) notify_ready(e);
}

static void reload(engine *e) {
  if (e->stopping) return;
  if (e->ready) { /* before it, READY=1 is still to come and says it all */
    char msg[96];
    snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading",
             (unsigned long long)sdnotify_monotonic_usec());
    sdnotify(msg);
  }
  reload_config();
  hooks_reload(e, on_reloaded);
}

/* How long a stop may take (ENGINE_STOP_TIMEOUT_S), in seconds. */
static long stop_bound_s(void) {
  const char *v = getenv("ENGINE_STOP_TIMEOUT_S");
  char *end;
  long s = v && *v ? strtol(v, &end, 10) : -1;
  return v && *v && !*end && s >= 0 && s <= 3600 ? s : 10;
}

static void on_stop_bound(uv_timer_t *t) {
  engine *e = t->data;
  log_msg(LOGL_WARNING, "the stop took longer than %ld s (ENGINE_STOP_TIMEOUT_S): stopping with what is committed; "
                        "requests still open are cut off",
          stop_bound_s());
  engine_stop(e);
}

/* SIGTERM or SIGINT to a service: no new work, what is in flight answered,
 * within the bound; a second one stops at once. Activities still running
 * are abandoned: their tasks stay due and run again at the next start. */
static void stop_as_service(engine *e, int signum) {
  const char *name = signum == SIGINT ? "SIGINT" : "SIGTERM";
  if (e->stopping) {
    log_msg(LOGL_WARNING, "a second %s: stopping now", name);
    engine_stop(e);
    return;
  }
  e->stopping = e->draining = 1; /* no dispatch, no attempt begins (dispatch.c, attempts.c) */
  e->stop_began = util_mono_ms();
  sdnotify("STOPPING=1\nSTATUS=stopping");
  long bound = stop_bound_s();
  log_msg(LOGL_INFO, "stopping (%s): no new requests; answering those in flight within %ld s", name, bound);
  if (!e->svc.stopping || !e->svc.stopping(e->svc.ud)) {
    engine_stop(e);
    return;
  }
  uv_timer_start(&e->stop_timer, on_stop_bound, (uint64_t)bound * 1000, 0);
}

static void on_signal(uv_signal_t *s, int signum) {
  engine *e = s->data;
  if (signum == SIGHUP) reload(e);
  else if (e->service) stop_as_service(e, signum);
  else engine_stop(e);
}

/* ------------------------------------------------------------- leases --- */

/* Another worker took a workflow over (this one was cut off, or stalled past
 * its lease): what runs of it here stops at once, without a write. */
static void on_lease_lost(void *ud, const char *id) {
  engine *e = ud;
  log_msg(LOGL_WARNING, "lost the lease of workflow %s: another worker runs it now; stopped here", id);
  wfrun *r = strmap_get(&e->runs, id);
  if (r) run_evict(r);
  attempts_drop_wf(e, id);
}

/* The heartbeat: every lease of this worker is extended by lease_ms, three
 * times a lease, in the batch this loop iteration commits. */
static void on_lease_timer(uv_timer_t *t) {
  engine *e = t->data;
  if ((e->stopping && !e->draining) || e->recovering) return; /* a service's stop still holds them while it drains */
  if (store_lease_renew(e->st, e->owner, util_now_ms() + e->lease_ms, on_lease_lost, e) != STORE_OK)
    engine_log_err(e, "renew leases");
}

/* -------------------------------------------------------------- setup --- */

int64_t engine_lease_ms(void) {
  const char *lm = getenv("ENGINE_LEASE_MS");
  return lm && atoll(lm) >= 100 ? atoll(lm) : 10000;
}

int engine_open(engine **out, const engine_config *cfg, char *err, size_t errlen) {
  *out = NULL;
  /* a bad OTEL_* variable stops the open before the store is touched */
  if (!cfg->no_tracing && otel_config_check(err, errlen) != 0) return -1;
  engine *e = util_xcalloc(1, sizeof *e);
  e->cfg = *cfg;
  e->lua_dir = util_strdup(cfg->lua_dir ? cfg->lua_dir : engine_lua_dir());
  snprintf(e->owner, sizeof e->owner, "%d-%016llx", (int)getpid(), (unsigned long long)util_random64());
  wfvm_config_default(&e->vmcfg);
  const char *mc = getenv("ENGINE_MAX_CACHED_RUNS");
  e->max_cached = mc && atoi(mc) >= 0 ? (size_t)atoi(mc) : 256;
  strmap_init(&e->runs);
  strmap_init(&e->attempts);
  strmap_init(&e->touched);
  strmap_init(&e->bytecode);
  strmap_init(&e->scripts);
  strmap_init(&e->unsettled);
  strmap_init(&e->otel_traces);
  e->batch = 1;
  int uv = uv_loop_init(&e->loop);
  if (uv != 0) {
    util_seterr(err, errlen, "cannot start the event loop: %s", uv_strerror(uv));
    free(e->lua_dir);
    free(e);
    return -1;
  }
  if (store_open(cfg->db_path, 0, &e->st, err, errlen) != STORE_OK) {
    uv_loop_close(&e->loop);
    free(e->lua_dir);
    free(e);
    return -1;
  }
  e->shared = store_shared(e->st);
  e->lease_ms = engine_lease_ms();
  const char *ml = getenv("ENGINE_MAX_LEASES");
  e->max_leases = ml && atoll(ml) > 0 ? atoll(ml) : 256;
  e->act = actvm_new(&e->loop, e->lua_dir, activity_modules, err, errlen);
  if (!e->act) {
    engine_free(e);
    return -1;
  }
  actvm_set_history(e->act, attempt_history_json, e);
  actvm_set_workflow(e->act, attempt_workflow_json, e);
  actvm_set_memory(e->act, attempt_memory_json, e);
  actvm_observer obs = {cfg->on_live, cfg->on_usage, cfg->ud};
  actvm_set_observer(e->act, &obs);
  /* its own HTTP client: a collector that hangs holds none of the activities' connections */
  if (!cfg->no_tracing && !(e->otel = otel_exporter_new(&e->loop, NULL, err, errlen)) && *err) {
    engine_free(e);
    return -1;
  }
  if ((uv = uv_prepare_init(&e->loop, &e->prep)) != 0 || (uv = uv_timer_init(&e->loop, &e->task_timer)) != 0 ||
      (uv = uv_timer_init(&e->loop, &e->retry_timer)) != 0 ||
      (uv = uv_timer_init(&e->loop, &e->lease_timer)) != 0 || (uv = uv_timer_init(&e->loop, &e->effects_timer)) != 0 ||
      (uv = uv_signal_init(&e->loop, &e->sigint)) != 0 || (uv = uv_signal_init(&e->loop, &e->sigterm)) != 0 ||
      (uv = uv_signal_init(&e->loop, &e->sighup)) != 0 || (uv = uv_timer_init(&e->loop, &e->watchdog_timer)) != 0 ||
      (uv = uv_timer_init(&e->loop, &e->stop_timer)) != 0 || (uv = checkpoints_init(e)) != 0) {
    util_seterr(err, errlen, "cannot start the event loop: %s", uv_strerror(uv));
    engine_free(e);
    return -1;
  }
  e->prep.data = e->task_timer.data = e->retry_timer.data = e->sigint.data = e->sigterm.data = e->lease_timer.data =
      e->effects_timer.data = e->sighup.data = e->watchdog_timer.data = e->stop_timer.data = e;
  runs_init(e); /* the kinds of command, then who answers the others */
  attempts_init(e);
  slots_init(e);
  children_init(e);
  dispatch_init(e);
  e->on_settled = on_settled; /* what follows a batch (batch.c) */
  e->on_lost = on_batch_lost;
  e->on_retry = on_store_retry;
  e->on_committed = checkpoints_after_commit;
  hooks_open(e);
  *out = e;
  return 0;
}

/* ------------------------------------------------------ crash loops --- */

/* Crashes of the engine in a row, while running one workflow's code with no
 * progress of that workflow in between, after which it fails instead. */
#define ENGINE_CRASH_LIMIT 3

/* The previous worker died of a crash while running a workflow's code (its
 * VM or one of its activities; see fatal.h): count it against that workflow.
 * The count (meta "crashes:ID" = "owner run last_seq n") starts again when the
 * run has moved on since the last crash; at ENGINE_CRASH_LIMIT the workflow
 * fails with EngineCrash, so recovery does not crash the engine forever. */
static void recover_crashed(engine *e, const char *note) {
  char owner[64], id[256], what[700];
  if (!fatal_read_note(note, owner, sizeof owner, id, sizeof id, what, sizeof what)) return;
  wf_row w;
  int found = store_wf_get(e->st, id, &w);
  if (found == 1 && !engine_status_terminal(w.status)) {
    char key[300], *prev = NULL, pown[64] = "";
    long long prun = -1, pat = -1;
    int n = 0;
    snprintf(key, sizeof key, "crashes:%s", id);
    if (store_meta_get(e->st, key, &prev) == 1) sscanf(prev, "%63s %lld %lld %d", pown, &prun, &pat, &n);
    free(prev);
    int64_t at = store_hist_max_seq(e->st, id, w.run);
    if (strcmp(pown, owner) != 0) { /* not counted yet (a crash right after counting leaves the note) */
      n = prun == w.run && pat == at ? n + 1 : 1;
      log_msg(LOGL_ERROR, "the engine crashed (%s) while running workflow %s (%d of %d in a row)", what, id,
              n, ENGINE_CRASH_LIMIT);
      char val[160];
      snprintf(val, sizeof val, "%s %lld %lld %d", owner, (long long)w.run, (long long)at, n);
      if (store_meta_put(e->st, key, n >= ENGINE_CRASH_LIMIT ? NULL : val) != STORE_OK)
        engine_log_err(e, "crash count");
      if (n >= ENGINE_CRASH_LIMIT) {
        char *msg = util_fmt("the engine crashed %d times in a row while running this workflow's code, with no "
                             "progress in between (last: %s); failed so that it does not crash the engine again",
                             n, what);
        char *q = json_quote(msg);
        char *err = util_fmt("{\"message\":%s,\"type\":\"EngineCrash\"}", q);
        wfrun *r = run_detached(e, id);
        if (r) run_finish(r, "failed", "WorkflowFailed", NULL, err);
        free(err);
        free(q);
        free(msg);
      }
    }
  }
  if (found == 1) wf_row_free(&w);
  if (engine_commit(e) == 0) fatal_clear_note(note);
}

/* The spans still queued go to the collector before the engine stops: the
 * loop runs on until they are sent, within what is left of the stop's
 * bound (ENGINE_STOP_TIMEOUT_S from the stop's beginning: a service's drain
 * and this flush together stay inside systemd's TimeoutStopSec) and the
 * exporter's own (OTEL_BSP_EXPORT_TIMEOUT); a second signal ends it. No
 * work begins meanwhile (stopping); what was in flight may still end and
 * is committed after. */
static void on_spans_flushed(void *ud) { uv_stop(&((engine *)ud)->loop); }
static void on_flush_bound(uv_timer_t *t) { uv_stop(&((engine *)t->data)->loop); }

static void flush_spans(engine *e) {
  if (!e->otel) return;
  int64_t left = stop_bound_s() * 1000 - (e->stop_began ? util_mono_ms() - e->stop_began : 0);
  otel_exporter_flush(e->otel, on_spans_flushed, e);
  uv_timer_start(&e->stop_timer, on_flush_bound, left > 0 ? (uint64_t)left : 0, 0);
  uv_run(&e->loop, UV_RUN_DEFAULT);
  uv_timer_stop(&e->stop_timer);
}

int engine_run(engine *e) {
  /* a crash while a workflow's code runs leaves a note naming it (fatal.h) */
  /* beside the database; for a URL, in the data directory (engine_data_dir) */
  char dir[PATH_MAX];
  char *note = !store_is_url(store_path(e->st)) ? util_fmt("%s.crash", store_path(e->st))
               : engine_data_dir(store_path(e->st), dir) == 0 ? util_fmt("%s/engine.crash", dir)
                                                             : util_strdup("engine.crash");
  recover_crashed(e, note);
  fatal_arm(note, e->owner);
  free(note);
  int uv;
  if ((uv = uv_prepare_start(&e->prep, on_prepare)) != 0 || (uv = uv_signal_start(&e->sigint, on_signal, SIGINT)) != 0 ||
      (uv = uv_signal_start(&e->sigterm, on_signal, SIGTERM)) != 0 ||
      (e->service && (uv = uv_signal_start(&e->sighup, on_signal, SIGHUP)) != 0)) {
    log_msg(LOGL_ERROR, "cannot start the event loop: %s", uv_strerror(uv));
    fatal_disarm();
    return -1;
  }
  if (e->service) {
    sdnotify("STATUS=starting: recovering, then loading the policy set and the triggers");
    /* systemd watches from READY=1 on; a loop that is stuck stops the pings */
    uint64_t ms = sdnotify_watchdog_usec() / 2000;
    if (sdnotify_watchdog_usec()) uv_timer_start(&e->watchdog_timer, on_watchdog, ms ? ms : 1, ms ? ms : 1);
  }
  e->watch = dbwatch_start(&e->loop, e->st, on_external, e);
  if (e->shared) uv_timer_start(&e->lease_timer, on_lease_timer, (uint64_t)e->lease_ms / 3, (uint64_t)e->lease_ms / 3);
  dispatch_due(e); /* recovery: everything due, including attempts a crash cut short */
  dispatch_settle(e); /* acted on before the first commit, as when the dispatch waits */
  engine_commit(e);
  hooks_start(e, on_started); /* the Lua library's own start-up work: policies, triggers, then the sandbox sweep */
  if (!e->stopping) uv_run(&e->loop, UV_RUN_DEFAULT);
  flush_spans(e);
  dispatch_settle(e); /* what a dispatch took is acted on before the batch commits */
  engine_commit(e);
  /* a clean stop hands this worker's workflows to the others at once */
  if (e->shared && !store_batch_failed(e->st) && store_lease_release(e->st, e->owner, NULL) == STORE_OK)
    engine_commit(e);
  fatal_disarm();
  return e->failed_commit ? -1 : 0;
}

void engine_stop(engine *e) {
  if (!e->stop_began) e->stop_began = util_mono_ms();
  e->stopping = 1;
  uv_stop(&e->loop);
}

store *engine_store(engine *e) { return e->st; }
const char *engine_owner(engine *e) { return e->owner; }
uv_loop_t *engine_loop(engine *e) { return &e->loop; }
otel_exporter *engine_otel(engine *e) { return e->otel; }

void engine_free(engine *e) {
  if (!e) return;
  dispatch_abandon(e); /* a dispatch's read on its way: answered, and dropped with its batch */
  batch_abandon(e); /* the commit on its way: answered, and no one is told any more */
  for (size_t i = 0; i < e->attempts.cap; i++) {
    if (!STRMAP_LIVE(&e->attempts, i)) continue;
    attempt *a = e->attempts.vals[i];
    actvm_cancel(a->call);
    attempt_free(a);
  }
  strmap_free(&e->attempts);
  attempts_clear_deferred(e);
  free(e->deferred);
  strmap_free(&e->touched);
  for (size_t i = 0; i < e->runs.cap; i++)
    if (STRMAP_LIVE(&e->runs, i)) run_free(e->runs.vals[i]);
  strmap_free(&e->runs);
  run_clear_codecache(e);
  strmap_free(&e->bytecode);
  strmap_free(&e->scripts);
  if (e->watch) dbwatch_stop(e->watch);
  hooks_free(e);
  otel_exporter_free(e->otel); /* what it still holds is dropped: the stop's flush had its chance */
  actvm_free(e->act); /* closes its own handles (HTTP) while the loop still runs */
  checkpoints_stop(e); /* before the store is closed */
  starts_free(e);
  uvloop_drain(&e->loop);
  batch_free(e); /* a client still waiting is gone with the loop */
  otel_steps_free(e); /* spans whose commit was never answered */
  store_close(e->st);
  free(e->lua_dir);
  free(e);
}

