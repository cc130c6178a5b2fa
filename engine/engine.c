#include "engine.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actvm.h"
#include "crash.h"
#include "fatal.h"
#include "json.h"
#include "render.h"
#include "util.h"
#include "wfvm.h"

#define DISPATCH_BATCH 512

typedef struct wfrun {
  struct engine *e;
  char *id;
  int64_t run;
  char *script_dir;
  char status[16];
  int cancel;
  int64_t next_seq;
  wfvm *vm;
} wfrun;

/* One running activity attempt, keyed "wf_id/seq" in engine.attempts. */
typedef struct attempt {
  struct engine *e;
  char *wf_id;
  int64_t seq;
  int n;
  int64_t first_at;
  char *name;
  char *payload;
  char *script_dir;
  act_opts opts;
  act_call *call;
  int64_t lease_ms; /* how long its lease lasts: renewed when a lost batch took it */
  char key[160];
} attempt;

typedef struct codebuf {
  char *buf;
  size_t len;
} codebuf;

typedef struct scriptbuf {
  int64_t mtime_ns, size;
  char *src;
  size_t len;
  char hash[65];
} scriptbuf;

typedef struct sweep_ctx {
  int done, ok;
  char *json;
  int quiet_unavailable;
  act_call *call; /* while pending */
} sweep_ctx;

typedef struct note {
  char *id, *status, *detail;
} note;

struct engine {
  uv_loop_t loop;
  store *st;
  actvm *act;
  wfvm_config vmcfg;
  engine_config cfg;
  char *lua_dir;
  char *only_wf;
  char owner[40];
  strmap runs;     /* id -> wfrun*, live runs kept in memory */
  strmap bytecode; /* code hash -> compiled chunk (codebuf*): replays skip the parser */
  strmap scripts;  /* path -> scriptbuf*: engine_submit skips re-reading unchanged files */
  strmap attempts; /* "id/seq" -> attempt* */
  uv_prepare_t prep;
  uv_timer_t task_timer;
  int64_t task_timer_at;
  dbwatch *watch;
  uv_signal_t sigint, sigterm;
  note *notes;
  size_t nnotes, capnotes;
  int stopping;
  int failed_commit; /* the store could not be written and has not recovered yet */
  /* a store incident (a lost batch, a failed query): retried with backoff */
  uv_timer_t retry_timer;
  int64_t backoff_ms, incident_since, recovered_at;
  int incident_failures;
  int recovering; /* dispatch waits until our leases are set right again */
  size_t max_cached; /* runs kept in memory while their activity runs (ENGINE_MAX_CACHED_RUNS) */
  sweep_ctx sweep;
  uv_fs_event_t *policy_watch; /* policies/: reloaded on change */
  uv_timer_t *policy_debounce;
  char *policy_dir;
  int policy_reloading;
};

struct dbwatch {
  uv_loop_t *loop;
  store *st;
  uv_fs_event_t fs;
  uv_timer_t poll;
  int64_t version;
  char base[256];
  void (*cb)(void *ud);
  void *ud;
  int closing;
};

static void dispatch_due(engine *e);
static void store_incident(engine *e);
static void on_store_retry(uv_timer_t *t);
static void walk_close(uv_handle_t *h, void *arg);
static void export_instance(store *st);
static void handle_state(wfrun *r, wfvm_state st);

const char *engine_lua_dir(void) {
  const char *d = getenv("ENGINE_LUA_DIR");
  return d && *d ? d : ENGINE_DEFAULT_LUA_DIR;
}

int engine_status_terminal(const char *s) {
  return strcmp(s, "completed") == 0 || strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0;
}

static void log_err(engine *e, const char *what) {
  /* a lost batch is one incident, reported once when it is handled (batch_lost) */
  if (store_batch_failed(e->st)) return;
  render_line(stderr, 0, "engine: %s: %s", what, store_errmsg(e->st));
}

/* Queues a status notification, delivered after the commit that makes it true. */
static void notify(engine *e, const char *id, const char *status, const char *detail) {
  if (!e->cfg.on_status) return;
  if (e->nnotes == e->capnotes) {
    e->capnotes = e->capnotes ? e->capnotes * 2 : 16;
    e->notes = realloc(e->notes, e->capnotes * sizeof(note));
  }
  e->notes[e->nnotes++] = (note){util_strdup(id), util_strdup(status), util_strdup(detail)};
}

/* ------------------------------------------------------------ history --- */

static int64_t run_append(wfrun *r, const char *type, int64_t ref, const char *name, const char *hash,
                          const char *payload, hist_event *out) {
  hist_event ev = {r->next_seq, type, ref, name, hash, payload, util_now_ms()};
  if (store_hist_append(r->e->st, r->id, r->run, &ev) != STORE_OK) {
    log_err(r->e, "append");
    return -1;
  }
  crash_point("append");
  r->next_seq++;
  if (out) *out = ev;
  return ev.seq;
}

static void set_status(wfrun *r, const char *status, const char *result, const char *error, const char *detail) {
  if (strcmp(r->status, status) == 0 && !result && !error) {
    if (detail) notify(r->e, r->id, status, detail); /* waiting on something else now */
    return;
  }
  if (store_wf_set_status(r->e->st, r->id, status, result, error) != STORE_OK) log_err(r->e, "status");
  snprintf(r->status, sizeof r->status, "%s", status);
  notify(r->e, r->id, status, detail);
}

/* -------------------------------------------------------------- host --- */

static int64_t host_append(void *ud, const char *type, int64_t ref, const char *name, const char *hash,
                           const char *payload, int64_t *time) {
  hist_event ev;
  int64_t seq = run_append(ud, type, ref, name, hash, payload, &ev);
  if (time) *time = seq >= 0 ? ev.time : 0; /* ev is unset when the append failed */
  return seq;
}

static int64_t host_emit(void *ud, const char *type, const char *payload) {
  wfrun *r = ud;
  return store_domain_append(r->e->st, r->id, type, util_now_ms(), payload);
}

static void host_print(void *ud, const char *msg) {
  wfrun *r = ud;
  render_line(stderr, 0, "[%s] %s", r->id, msg); /* a script's print may carry model text */
}

/* A module file's source, or NULL when there is no regular file at path (a
 * FIFO named like a module must not hang the loop). */
static char *read_module_file(const char *path, size_t *len) {
  char err[8]; /* not found is the usual case: the next place is tried */
  return engine_read_script(path, len, err, sizeof err);
}

/* Finds a module's source on disk: beside the script, then in the Lua library. */
static char *find_module(const char *script_dir, const char *lua_dir, const char *name, size_t *len, char **path) {
  char rel[512];
  snprintf(rel, sizeof rel, "%s", name);
  for (char *p = rel; *p; p++)
    if (*p == '.') *p = '/';
  const char *dirs[] = {script_dir, script_dir, lua_dir, lua_dir};
  const char *fmts[] = {"%s/%s.lua", "%s/%s/init.lua", "%s/%s.lua", "%s/%s/init.lua"};
  for (int i = 0; i < 4; i++) {
    if (!dirs[i]) continue;
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, fmts[i], dirs[i], rel);
    char *src = read_module_file(buf, len);
    if (src) {
      *path = util_strdup(buf);
      return src;
    }
  }
  return NULL;
}

typedef struct modhost {
  store *st;
  const char *wf_id;
  int64_t run;
  const char *script_dir;
  const char *lua_dir;
  int pin; /* 0: replay check against the code on disk, nothing written */
} modhost;

/* A run's modules are pinned by content hash the first time it requires them. */
static char *load_module_common(modhost *m, const char *name, size_t *len, char **chunkname, char *err,
                                size_t errlen) {
  if (m->pin) {
    char *hash = store_module_get(m->st, m->wf_id, m->run, name);
    if (hash) {
      char *src = store_code_get(m->st, hash, len);
      *chunkname = util_fmt("@%s.lua", name);
      free(hash);
      if (src) return src;
      util_seterr(err, errlen, "pinned code for module is missing from the store");
      return NULL;
    }
  }
  char *path = NULL;
  char *src = find_module(m->script_dir, m->lua_dir, name, len, &path);
  if (!src) {
    util_seterr(err, errlen, "module not found beside the workflow (%s) or in %s", m->script_dir, m->lua_dir);
    return NULL;
  }
  if (m->pin) {
    char hash[65];
    util_sha256_hex(src, *len, hash);
    if (store_code_put(m->st, hash, name, src, *len) != STORE_OK ||
        store_module_pin(m->st, m->wf_id, m->run, name, hash) != STORE_OK) {
      util_seterr(err, errlen, "cannot pin module: %s", store_errmsg(m->st));
      free(src);
      free(path);
      return NULL;
    }
  }
  *chunkname = util_fmt("@%s", path);
  free(path);
  return src;
}

static char *host_load_module(void *ud, const char *name, size_t *len, char **chunkname, char *err, size_t errlen) {
  wfrun *r = ud;
  modhost m = {r->e->st, r->id, r->run, r->script_dir, r->e->lua_dir, 1};
  return load_module_common(&m, name, len, chunkname, err, errlen);
}

/* -------------------------------------------------------------- runs --- */

static void run_free(wfrun *r) {
  wfvm_free(r->vm);
  free(r->id);
  free(r->script_dir);
  free(r);
}

static void run_evict(wfrun *r) {
  if (strmap_get(&r->e->runs, r->id) == r) strmap_del(&r->e->runs, r->id);
  run_free(r);
}

static void engine_clear_codecache(engine *e) {
  for (size_t i = 0; i < e->bytecode.cap; i++)
    if (STRMAP_LIVE(&e->bytecode, i)) {
      codebuf *cb = e->bytecode.vals[i];
      free(cb->buf);
      free(cb);
    }
  strmap_free(&e->bytecode);
  strmap_init(&e->bytecode);
  for (size_t i = 0; i < e->scripts.cap; i++)
    if (STRMAP_LIVE(&e->scripts, i)) {
      scriptbuf *sb = e->scripts.vals[i];
      free(sb->src);
      free(sb);
    }
  strmap_free(&e->scripts);
  strmap_init(&e->scripts);
}

/* Builds a VM for the workflow's current run and replays it; the run then
 * continues live (handle_state) and may finish or be evicted before return. */
static void run_load(engine *e, const wf_row *w) {
  if (strmap_get(&e->runs, w->id)) return;
  wfrun *r = calloc(1, sizeof *r);
  r->e = e;
  r->id = util_strdup(w->id);
  r->run = w->run;
  r->script_dir = util_strdup(w->script_dir);
  r->cancel = w->cancel;
  snprintf(r->status, sizeof r->status, "%s", w->status);
  hist_list h = {0};
  if (store_hist_load(e->st, w->id, w->run, &h) != STORE_OK) {
    log_err(e, "load history");
    hist_list_free(&h);
    run_free(r);
    return;
  }
  r->next_seq = h.n ? h.v[h.n - 1].seq + 1 : 1;
  char *chunk = util_fmt("@%s", w->script_name);
  codebuf *cb = strmap_get(&e->bytecode, w->code_hash);
  if (!cb) {
    size_t srclen = 0;
    char *src = store_code_get(e->st, w->code_hash, &srclen);
    if (src) {
      cb = calloc(1, sizeof *cb);
      cb->buf = wfvm_compile(src, srclen, chunk, &cb->len);
      if (!cb->buf) { /* does not compile: keep the source, the VM reports the error */
        cb->buf = src;
        cb->len = srclen;
        src = NULL;
      }
      if (e->bytecode.len >= 1024) { /* bound the cache: start over */
        engine_clear_codecache(e);
      }
      strmap_put(&e->bytecode, w->code_hash, cb);
      free(src);
    }
  }
  wfvm_host host = {r, host_append, host_emit, host_load_module, host_print};
  r->vm = wfvm_new(&e->vmcfg, &host, w->id, w->run, &h);
  hist_list_free(&h);
  strmap_put(&e->runs, r->id, r);
  if (!cb || !r->vm) {
    set_status(r, "stuck", NULL, !cb ? "the workflow's code is missing from the store" : "cannot create a VM",
               NULL);
    free(chunk);
    run_evict(r);
    return;
  }
  int binary = cb->len > 0 && cb->buf[0] == '\x1b'; /* LUA_SIGNATURE */
  wfvm_state st = wfvm_start_mode(r->vm, cb->buf, cb->len, chunk, binary ? "b" : "t");
  free(chunk);
  handle_state(r, st);
}

static void run_load_id(engine *e, const char *id) {
  wf_row w;
  int found = store_wf_get(e->st, id, &w);
  if (found == 1 && !engine_status_terminal(w.status) && strcmp(w.status, "stuck") != 0) run_load(e, &w);
  if (found == 1) wf_row_free(&w);
}

/* Hands the outcome event of the command a run waits on to the run: directly
 * when it is in memory, else by replaying it (the outcome is already logged). */
static void deliver(engine *e, const char *id, const hist_event *ev) {
  wfrun *r = strmap_get(&e->runs, id);
  if (r && wfvm_blocked(r->vm)->seq == ev->ref) {
    handle_state(r, wfvm_deliver(r->vm, ev));
    return;
  }
  if (r) run_evict(r);
  run_load_id(e, id);
}

static int64_t json_int_field(const char *json, const char *key, int64_t dflt) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = json ? strstr(json, pat) : NULL;
  return p ? strtoll(p + strlen(pat), NULL, 10) : dflt;
}

/* ---------------------------------------------------------- activities --- */

static void attempt_free(attempt *a) {
  free(a->wf_id);
  free(a->name);
  free(a->payload);
  free(a->script_dir);
  free(a);
}

/* Whether the command at seq of the workflow's current run has its outcome in
 * the log already (cancelled meanwhile, or a stale task): then it gets no
 * second one. Also 1 when the log cannot be read: nothing may be recorded. */
static int command_answered(engine *e, const char *id, wfrun *r, int64_t seq) {
  int64_t run = r ? r->run : -1;
  wf_row w;
  if (!r) {
    if (store_wf_get(e->st, id, &w) != 1) return 1;
    run = w.run;
    wf_row_free(&w);
  }
  return store_hist_outcome(e->st, id, run, seq) != 0;
}

/* The wait after attempt n: initial_interval * backoff^(n-1), at most
 * max_interval, and never more than UTIL_MAX_SECONDS whatever the options:
 * pow overflows to inf (backoff 2 by attempt 1,025) and 0 * inf is NaN,
 * neither of which may reach an integer. */
static int64_t retry_delay_ms(const act_opts *o, int n) {
  double cap = o->max_interval > 0 && o->max_interval < UTIL_MAX_SECONDS ? o->max_interval : UTIL_MAX_SECONDS;
  double d = o->initial_interval > 0 ? o->initial_interval * pow(o->backoff, n - 1) : 0;
  if (!(d <= cap)) d = cap; /* inf or NaN too */
  return (int64_t)(d * 1000.0);
}

/* Whether a failed attempt is tried again, from its error's own fields. */
static int should_retry(const attempt *a, const act_failure *why, int64_t *run_at) {
  if (why->non_retryable) return 0;
  for (int i = 0; i < a->opts.n_non_retryable && !why->type_too_long; i++)
    if (strcmp(why->type, a->opts.non_retryable[i]) == 0) return 0;
  if (a->opts.max_attempts > 0 && a->n >= a->opts.max_attempts) return 0;
  *run_at = util_now_ms() + retry_delay_ms(&a->opts, a->n);
  if (a->opts.schedule_to_close > 0 && *run_at >= a->first_at + (int64_t)(a->opts.schedule_to_close * 1000.0))
    return 0;
  return 1;
}

/* Records the end of an attempt. Returns 1 with *ev set when the activity has
 * an outcome (completed, or failed for good); 0 when a retry is scheduled. */
static int attempt_record(attempt *a, wfrun *r, int ok, const char *json, hist_event *ev) {
  engine *e = a->e;
  if (command_answered(e, a->wf_id, r, a->seq)) {
    store_task_del(e->st, a->wf_id, "activity", a->seq);
    return 0;
  }
  int64_t retry_at = 0;
  act_failure why;
  /* the error as the workflow sees it: one attempts, the engine's count */
  char *payload = ok ? NULL : actvm_failure(e->act, json, a->n, &why);
  if (!ok && should_retry(a, &why, &retry_at)) {
    free(payload);
    if (store_task_put(e->st, a->wf_id, "activity", a->seq, retry_at, a->n + 1, a->first_at, NULL, 0) != STORE_OK)
      log_err(e, "retry");
    return 0;
  }
  crash_point("activity.record");
  store_task_del(e->st, a->wf_id, "activity", a->seq);
  wfrun tmp = {0};
  if (!r) {
    /* the run is not in memory: append with the next seq from the store */
    wf_row w;
    if (store_wf_get(e->st, a->wf_id, &w) != 1) {
      free(payload);
      return 0;
    }
    tmp.e = e;
    tmp.id = a->wf_id;
    tmp.run = w.run;
    tmp.next_seq = store_hist_max_seq(e->st, a->wf_id, w.run) + 1;
    wf_row_free(&w);
    r = &tmp;
  }
  static char type_ok[] = "ActivityCompleted", type_fail[] = "ActivityFailed";
  int64_t seq = run_append(r, ok ? type_ok : type_fail, a->seq, a->name, NULL, ok ? json : payload, ev);
  if (seq >= 0) {
    /* the event's strings must outlive this call: keep copies on the attempt */
    free(a->payload);
    a->payload = util_strdup(ok ? json : payload);
    ev->payload = a->payload;
    ev->name = a->name;
  }
  free(payload);
  return seq >= 0;
}

static void attempt_done(void *ud, act_call *call, int ok, const char *json) {
  (void)call;
  attempt *a = ud;
  engine *e = a->e;
  strmap_del(&e->attempts, a->key);
  crash_point("activity.done");
  wfrun *r = strmap_get(&e->runs, a->wf_id);
  hist_event ev;
  if (attempt_record(a, r, ok, json, &ev)) {
    deliver(e, a->wf_id, &ev);
  } else if (r && wfvm_blocked(r->vm)->seq == a->seq) {
    run_evict(r); /* waits for its retry; replayed when that ends */
  }
  attempt_free(a);
  dispatch_due(e);
}

/* Starts attempt n of the activity scheduled at seq. Returns 1 with *ev when it
 * ended synchronously with an outcome; 0 when pending or a retry is scheduled. */
static int attempt_start(engine *e, wfrun *r, const char *wf_id, const char *script_dir, int64_t seq, int n,
                         int64_t first_at, const char *name, const char *payload, hist_event *ev, attempt **keep) {
  attempt *a = calloc(1, sizeof *a);
  a->e = e;
  a->wf_id = util_strdup(wf_id);
  a->seq = seq;
  a->n = n;
  a->first_at = first_at;
  a->name = util_strdup(name);
  a->payload = util_strdup(payload);
  a->script_dir = util_strdup(script_dir);
  snprintf(a->key, sizeof a->key, "%s/%lld", wf_id, (long long)seq);
  *keep = NULL;
  char err[512];
  int ok = 0;
  char *json = NULL;
  if (actvm_parse_options(e->act, payload, &a->opts, err, sizeof err) != 0) {
    char *q = json_quote(err);
    json = util_fmt("{\"message\":%s,\"non_retryable\":true,\"type\":\"InvalidOptions\"}", q);
    free(q);
  } else {
    int64_t stc = (int64_t)(a->opts.start_to_close * 1000.0);
    if (a->opts.schedule_to_close > 0) {
      int64_t left = first_at + (int64_t)(a->opts.schedule_to_close * 1000.0) - util_now_ms();
      if (left < 1) left = 1;
      if (stc == 0 || left < stc) stc = left;
    }
    int64_t run = r ? r->run : 0; /* for the idempotency key */
    wf_row w;
    if (!r && store_wf_get(e->st, wf_id, &w) == 1) {
      run = w.run;
      wf_row_free(&w);
    }
    act_info info = {wf_id, seq, n, name, script_dir, stc, (int64_t)(a->opts.heartbeat * 1000.0), run};
    act_call *call = NULL;
    crash_point("activity.start");
    if (!actvm_call(e->act, &info, payload, attempt_done, a, &ok, &json, &call)) {
      a->call = call;
      a->lease_ms = stc + 60000;
      strmap_put(&e->attempts, a->key, a);
      /* leased by this engine until it ends; a crash voids the lease, and the
       * attempt it cut short counts: the next one is n + 1 (activity.info) */
      store_task_put(e->st, wf_id, "activity", seq, util_now_ms(), n + 1, first_at, e->owner,
                     util_now_ms() + stc + 60000);
      *keep = a;
      return 0;
    }
  }
  crash_point("activity.end");
  int outcome = attempt_record(a, r, ok, json, ev);
  free(json);
  if (outcome) {
    /* ev points into a: hand a to the caller to free after delivery */
    *keep = a;
    return 1;
  }
  attempt_free(a);
  return 0;
}

/* ------------------------------------------------------------ commands --- */

/* Cancellation is delivered as the outcome of the command the run waits on. */
static int cancel_blocked(wfrun *r, hist_event *ev) {
  engine *e = r->e;
  const wfvm_cmd *c = wfvm_blocked(r->vm);
  char key[160];
  snprintf(key, sizeof key, "%s/%lld", r->id, (long long)c->seq);
  attempt *a = strmap_del(&e->attempts, key);
  if (a) {
    actvm_cancel(a->call);
    attempt_free(a);
  }
  store_task_del(e->st, r->id, "activity", c->seq);
  store_task_del(e->st, r->id, "timer", c->seq);
  store_task_del(e->st, r->id, "signal_timeout", c->seq);
  store_wf_set_cancel(e->st, r->id, 2);
  r->cancel = 2;
  return run_append(r, "CommandCancelled", c->seq, c->name, NULL, NULL, ev) >= 0;
}

static void finish(wfrun *r, const char *status, const char *event, const char *result, const char *error) {
  engine *e = r->e;
  if (event) run_append(r, event, 0, NULL, NULL, result ? result : error, NULL);
  store_task_del_wf(e->st, r->id);
  store_signal_del_wf(e->st, r->id);
  set_status(r, status, result, error, NULL);
  run_evict(r);
}

/* Drives a run from a VM state until it waits on something external. */
static void handle_state(wfrun *r, wfvm_state st) {
  engine *e = r->e;
  for (;;) {
    switch (st) {
      case WFVM_DONE: {
        char msg[200];
        if (json_check_size(strlen(wfvm_output(r->vm)), "the workflow's result", msg, sizeof msg) != 0) {
          /* the log never holds a result past the payload limit: the run fails instead */
          char *q = json_quote(msg), *error = util_fmt("{\"message\":%s,\"type\":\"PayloadTooLarge\"}", q);
          finish(r, "failed", "WorkflowFailed", NULL, error);
          free(q);
          free(error);
          return;
        }
        finish(r, "completed", "WorkflowCompleted", wfvm_output(r->vm), NULL);
        return;
      }
      case WFVM_FAILED: {
        const char *out = wfvm_output(r->vm);
        int cancelled = r->cancel == 2 && strstr(out, "\"type\":\"Cancelled\"");
        finish(r, cancelled ? "cancelled" : "failed", cancelled ? "WorkflowCancelled" : "WorkflowFailed", NULL, out);
        return;
      }
      case WFVM_KILLED: finish(r, "failed", "WorkflowFailed", NULL, wfvm_output(r->vm)); return;
      case WFVM_STUCK:
        render_line(stderr, 0, "engine: workflow %s is stuck: %s", r->id, wfvm_output(r->vm));
        set_status(r, "stuck", NULL, wfvm_output(r->vm), NULL);
        run_evict(r);
        return;
      case WFVM_END: run_evict(r); return;
      case WFVM_CONTINUE: {
        char *input = util_strdup(wfvm_output(r->vm));
        run_append(r, "ContinuedAsNew", 0, NULL, NULL, input, NULL);
        int64_t next = r->run + 1;
        char seed[17];
        snprintf(seed, sizeof seed, "%016llx", (unsigned long long)util_random64());
        char *payload = util_fmt("{\"input\":%s,\"seed\":\"%s\"}", input, seed);
        hist_event ev = {1, "WorkflowStarted", 0, NULL, NULL, payload, util_now_ms()};
        store_modules_copy(e->st, r->id, r->run, next);
        store_wf_new_run(e->st, r->id, next, input);
        store_hist_append(e->st, r->id, next, &ev);
        store_task_del_wf(e->st, r->id);
        store_task_put(e->st, r->id, "workflow", 0, util_now_ms(), 0, 0, NULL, 0);
        free(payload);
        free(input);
        notify(e, r->id, "running", "continued as new");
        run_evict(r);
        return;
      }
      case WFVM_BLOCKED: break;
    }
    const wfvm_cmd *c = wfvm_blocked(r->vm);
    hist_event ev;
    if (r->cancel == 1) {
      if (!cancel_blocked(r, &ev)) return;
      st = wfvm_deliver(r->vm, &ev);
      continue;
    }
    if (strcmp(c->kind, "activity") == 0) {
      char key[160];
      snprintf(key, sizeof key, "%s/%lld", r->id, (long long)c->seq);
      if (!c->is_new) {
        /* scheduled before a restart: its task runs it; stay loaded only while it runs */
        set_status(r, "running", NULL, NULL, NULL);
        if (!strmap_get(&e->attempts, key) || e->runs.len > e->max_cached) run_evict(r);
        return;
      }
      attempt *a = NULL;
      set_status(r, "running", NULL, NULL, NULL);
      if (attempt_start(e, r, r->id, r->script_dir, c->seq, 1, util_now_ms(), c->name, c->payload, &ev, &a)) {
        st = wfvm_deliver(r->vm, &ev);
        attempt_free(a);
        continue;
      }
      /* failed once and waits for a retry, or too many runs in memory: the
       * outcome will replay it (bounded memory, whatever the number waiting) */
      if (!a || e->runs.len > e->max_cached) run_evict(r);
      return;
    }
    if (strcmp(c->kind, "timer") == 0) {
      if (c->is_new)
        store_task_put(e->st, r->id, "timer", c->seq, json_int_field(c->payload, "fire_at", util_now_ms()), 0, 0, NULL,
                       0);
      set_status(r, "waiting", NULL, NULL, "timer");
      run_evict(r);
      return;
    }
    /* signal */
    char *payload = NULL;
    int got = store_signal_take(e->st, r->id, c->name, &payload);
    if (got == 1) {
      crash_point("signal.take");
      store_task_del(e->st, r->id, "signal_timeout", c->seq);
      set_status(r, "running", NULL, NULL, NULL);
      int64_t seq = run_append(r, "SignalReceived", c->seq, c->name, NULL, payload, &ev);
      if (seq < 0) {
        free(payload);
        return;
      }
      st = wfvm_deliver(r->vm, &ev);
      free(payload);
      continue;
    }
    if (c->is_new) {
      int64_t deadline = json_int_field(c->payload, "deadline", -1);
      if (deadline >= 0) store_task_put(e->st, r->id, "signal_timeout", c->seq, deadline, 0, 0, NULL, 0);
    }
    char detail[300];
    snprintf(detail, sizeof detail, "signal %s", c->name);
    set_status(r, "waiting", NULL, NULL, detail);
    run_evict(r);
    return;
  }
}

/* ------------------------------------------------------------ dispatch --- */

/* A run's timer or signal timeout fired: its outcome is appended, then
 * delivered; only if the log shows the command still waiting (a signal may
 * have answered it, in memory or not, earlier in this very batch). */
static void fire_timer(engine *e, const char *id, const char *kind, int64_t seq) {
  wf_row w;
  if (store_wf_get(e->st, id, &w) != 1) return;
  wfrun *r = strmap_get(&e->runs, id);
  wfrun tmp = {0};
  if (!r) {
    tmp.e = e;
    tmp.id = (char *)id;
    tmp.run = w.run;
    tmp.next_seq = store_hist_max_seq(e->st, id, w.run) + 1;
    r = &tmp;
  }
  hist_event ev;
  crash_point("timer.fire");
  if (r->next_seq > 0 && !command_answered(e, id, r, seq) &&
      run_append(r, strcmp(kind, "timer") == 0 ? "TimerFired" : "SignalTimedOut", seq, NULL, NULL, NULL, &ev) >= 0) {
    wf_row_free(&w);
    deliver(e, id, &ev);
    return;
  }
  wf_row_free(&w);
}

typedef struct due_ctx {
  engine *e;
  int n;
} due_ctx;

/* Tasks are collected before they run, so one may be stale by its turn
 * (taken by a step earlier in this dispatch): each acts only if deleting its
 * row here deleted something. An activity's task is put back as its lease. */
static int on_due(void *ud, const task_row *t) {
  due_ctx *d = ud;
  engine *e = d->e;
  d->n++;
  if (e->stopping || store_batch_failed(e->st)) return 1;
  if (strcmp(t->kind, "activity") == 0) {
    char key[160];
    snprintf(key, sizeof key, "%s/%lld", t->wf_id, (long long)t->seq);
    if (strmap_get(&e->attempts, key)) return 0; /* running here */
  }
  int took = store_task_take(e->st, t->wf_id, t->kind, t->seq);
  if (took != 1) return took < 0;
  if (strcmp(t->kind, "workflow") == 0) {
    wf_row w;
    if (store_wf_get(e->st, t->wf_id, &w) != 1) return 0;
    wfrun *r = strmap_get(&e->runs, t->wf_id);
    if (r) {
      r->cancel = w.cancel;
      if (w.cancel == 1) {
        hist_event ev;
        if (cancel_blocked(r, &ev)) handle_state(r, wfvm_deliver(r->vm, &ev));
      }
    } else if (!engine_status_terminal(w.status) && strcmp(w.status, "stuck") != 0) {
      run_load(e, &w);
    }
    wf_row_free(&w);
  } else if (strcmp(t->kind, "activity") == 0) {
    wf_row w;
    if (store_wf_get(e->st, t->wf_id, &w) != 1) return 0;
    hist_list h = {0};
    wfrun *r = strmap_get(&e->runs, t->wf_id);
    /* still scheduled and without an outcome (else the task was an orphan) */
    if (store_hist_get(e->st, t->wf_id, w.run, t->seq, &h) == 1 && strcmp(h.v[0].type, "ActivityScheduled") == 0 &&
        store_hist_outcome(e->st, t->wf_id, w.run, t->seq) == 0) {
      hist_event ev;
      attempt *a = NULL;
      if (attempt_start(e, r, t->wf_id, w.script_dir, t->seq, t->attempt > 0 ? t->attempt : 1,
                        t->first_at ? t->first_at : util_now_ms(), h.v[0].name, h.v[0].payload, &ev, &a)) {
        deliver(e, t->wf_id, &ev);
        attempt_free(a);
      }
    }
    hist_list_free(&h);
    wf_row_free(&w);
  } else {
    fire_timer(e, t->wf_id, t->kind, t->seq);
  }
  return 0;
}

static void on_task_timer(uv_timer_t *t) {
  engine *e = t->data;
  e->task_timer_at = 0;
  dispatch_due(e);
}

/* Runs every due task (bounded per call), then arms the timer for the next.
 * While the store is failing the retry timer calls it instead (backoff). */
static void dispatch_due(engine *e) {
  if (e->stopping || e->recovering) return;
  due_ctx d = {e, 0};
  int64_t next = -2;
  if (store_task_due(e->st, util_now_ms(), e->only_wf, e->owner, DISPATCH_BATCH, on_due, &d) == STORE_OK &&
      !store_batch_failed(e->st))
    next = d.n >= DISPATCH_BATCH ? util_now_ms() : store_task_next_at(e->st, e->only_wf, e->owner);
  if (next == -2) { /* the batch is lost (the commit handles it) or a query failed */
    if (!store_batch_failed(e->st)) store_incident(e);
    return;
  }
  if (next < 0) {
    uv_timer_stop(&e->task_timer);
    e->task_timer_at = 0;
    return;
  }
  /* at least 1 ms: libuv (1.44) runs a 0 ms timer started from its own
   * callback again at once, without polling for I/O or signals */
  int64_t delay = next - util_now_ms();
  if (delay < 1) delay = 1;
  if (e->task_timer_at && e->task_timer_at <= next && uv_is_active((uv_handle_t *)&e->task_timer)) return;
  e->task_timer_at = next;
  uv_timer_start(&e->task_timer, on_task_timer, (uint64_t)delay, 0);
}

/* ---------------------------------------------------- history for steps --- */

/* activity.history(): events of the workflow's current run as a JSON array
 * (payloads are JSON already and go in as they are). */
static char *history_json(void *ud, const char *wf_id, int64_t from, int64_t to) {
  engine *e = ud;
  wf_row w;
  if (store_wf_get(e->st, wf_id, &w) != 1) return NULL;
  hist_list h = {0};
  int rc = store_hist_load(e->st, wf_id, w.run, &h);
  wf_row_free(&w);
  if (rc != STORE_OK) {
    hist_list_free(&h);
    return NULL;
  }
  ubuf b = {0};
  ubuf_add(&b, "[", 1);
  int first = 1;
  for (size_t i = 0; i < h.n; i++) {
    const hist_event *ev = &h.v[i];
    if (ev->seq < from || ev->seq > to) continue;
    char *type = json_quote(ev->type), *name = json_quote(ev->name ? ev->name : "");
    char *item = util_fmt("%s{\"name\":%s,\"payload\":%s,\"ref\":%lld,\"seq\":%lld,\"type\":%s}", first ? "" : ",",
                          name, ev->payload && *ev->payload ? ev->payload : "null", (long long)ev->ref,
                          (long long)ev->seq, type);
    ubuf_add(&b, item, strlen(item));
    free(item);
    free(type);
    free(name);
    first = 0;
  }
  ubuf_add(&b, "]", 2); /* with the NUL */
  hist_list_free(&h);
  return b.p;
}

/* ------------------------------------------------------------- sweep --- */

typedef struct live_ctx {
  char *buf;
  size_t n, cap;
  int count;
} live_ctx;

static int add_live(void *ud, const wf_row *w) {
  live_ctx *l = ud;
  if (engine_status_terminal(w->status)) return 0;
  char *q = json_quote(w->id);
  size_t need = strlen(q) + 2;
  if (l->n + need + 64 > l->cap) {
    l->cap = (l->cap + need + 64) * 2;
    l->buf = realloc(l->buf, l->cap);
  }
  l->n += (size_t)sprintf(l->buf + l->n, "%s%s", l->count++ ? "," : "", q);
  free(q);
  return 0;
}

/* {"args":{"live":[ids of workflows that have not finished]}} */
static char *sweep_payload(store *st) {
  live_ctx l = {0};
  l.cap = 256;
  l.buf = malloc(l.cap);
  l.n = (size_t)sprintf(l.buf, "{\"args\":{\"live\":[");
  store_wf_list(st, NULL, add_live, &l);
  char *out = util_fmt("%s]}}", l.buf);
  free(l.buf);
  return out;
}

/* Sandboxes are labelled with the database's instance id (ENGINE_INSTANCE), and
 * workspaces live beside the database unless ENGINE_WORKSPACES says otherwise. */
static void export_instance(store *st) {
  char id[64];
  if (store_instance_id(st, id, sizeof id) == 0) setenv("ENGINE_INSTANCE", id, 1);
  if (!getenv("ENGINE_WORKSPACES")) {
    char abs[PATH_MAX];
    char *tmp = util_strdup(store_path(st));
    if (realpath(dirname(tmp), abs)) {
      char *ws = util_fmt("%s/workspaces", abs);
      setenv("ENGINE_WORKSPACES", ws, 1);
      free(ws);
    }
    free(tmp);
  }
}

static int docker_socket_present(void) {
  const char *h = getenv("DOCKER_HOST");
  const char *path = h && strncmp(h, "unix://", 7) == 0 ? h + 7 : "/var/run/docker.sock";
  return access(path, F_OK) == 0;
}

static void sweep_report(sweep_ctx *s, int ok, const char *json) {
  s->done = 1;
  s->call = NULL;
  s->ok = ok;
  free(s->json);
  s->json = util_strdup(json);
  if (s->quiet_unavailable == 2) return; /* a maintenance command prints its own report */
  if (ok && strcmp(json, "{}") != 0 && strcmp(json, "[]") != 0)
    render_line(stderr, 0, "engine: removed orphaned sandboxes: %s", json);
  else if (!ok && !(s->quiet_unavailable && strstr(json, "DockerUnavailable")))
    render_line(stderr, 0, "engine: sandbox sweep failed: %s", json);
}

static void sweep_done(void *ud, act_call *call, int ok, const char *json) {
  (void)call;
  sweep_report(ud, ok, json);
}

/* Starts the sweep of labelled containers whose session is finished or unknown. */
static void start_sweep(actvm *act, store *st, sweep_ctx *s) {
  char *payload = sweep_payload(st);
  act_info info = {"engine", 0, 1, "sandbox.sweep", NULL, 120000, 0, 0};
  int ok = 0;
  char *json = NULL;
  act_call *call = NULL;
  if (actvm_call(act, &info, payload, sweep_done, s, &ok, &json, &call)) {
    sweep_report(s, ok, json);
    free(json);
  } else {
    s->call = call;
  }
  free(payload);
}

/* Runs one activity function outside any workflow, on a loop of its own, and
 * waits for it: for maintenance commands (gc, policy check). */
static int run_standalone(const char *name, const char *payload, char *report, size_t reportlen) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  char err[512];
  actvm *act = actvm_new(&loop, engine_lua_dir(), err, sizeof err);
  if (!act) {
    util_seterr(report, reportlen, "%s", err);
    uv_loop_close(&loop);
    return -1;
  }
  sweep_ctx s = {0};
  s.quiet_unavailable = 2; /* report, do not print */
  act_info info = {"engine", 0, 1, name, NULL, 120000, 0, 0};
  int ok = 0;
  char *json = NULL;
  act_call *call = NULL;
  if (actvm_call(act, &info, payload, sweep_done, &s, &ok, &json, &call)) {
    s.done = 1;
    s.ok = ok;
    s.json = json;
  }
  while (!s.done && uv_run(&loop, UV_RUN_ONCE)) {
  }
  actvm_free(act);
  uv_walk(&loop, walk_close, NULL);
  do {
    uv_run(&loop, UV_RUN_NOWAIT);
  } while (uv_loop_close(&loop) == UV_EBUSY);
  util_seterr(report, reportlen, "%s", s.json ? s.json : "no result");
  free(s.json);
  return s.ok ? 0 : -1;
}

int engine_gc(store *st, char *report, size_t reportlen) {
  export_instance(st);
  char *payload = sweep_payload(st);
  int rc = run_standalone("sandbox.sweep", payload, report, reportlen);
  free(payload);
  return rc;
}

int engine_policy_check(const char *dir, char *report, size_t reportlen) {
  char *q = json_quote(dir ? dir : "");
  char *payload = util_fmt("{\"args\":{\"dir\":%s}}", dir ? q : "null");
  int rc = run_standalone("session.policy_check", payload, report, reportlen);
  free(payload);
  free(q);
  return rc;
}

/* ------------------------------------------------------------ policies --- */

static void policy_reloaded(void *ud, act_call *call, int ok, const char *json) {
  (void)call;
  engine *e = ud;
  e->policy_reloading = 0;
  if (!ok || strstr(json, "\"ok\":false"))
    render_line(stderr, 0, "engine: policies rejected, the previous set stays in force: %s", json);
  else if (strstr(json, "\"replaced\":true"))
    render_line(stderr, 0, "engine: policies reloaded: %s", json);
}

/* Loads the policy set into the activity VM (session.policy_reload). */
static void reload_policies(engine *e) {
  if (e->policy_reloading) return;
  char *q = json_quote(e->policy_dir);
  char *payload = util_fmt("{\"args\":{\"dir\":%s}}", q);
  free(q);
  act_info info = {"engine", 0, 1, "session.policy_reload", NULL, 30000, 0, 0};
  int ok = 0;
  char *json = NULL;
  act_call *call = NULL;
  e->policy_reloading = 1;
  if (actvm_call(e->act, &info, payload, policy_reloaded, e, &ok, &json, &call)) {
    policy_reloaded(e, NULL, ok, json);
    free(json);
  }
  free(payload);
}

static void on_policy_debounce(uv_timer_t *t) { reload_policies(t->data); }

static void on_policy_change(uv_fs_event_t *h, const char *filename, int events, int status) {
  (void)filename, (void)events, (void)status;
  engine *e = h->data;
  /* an editor writes a file in several steps: reload once they settle */
  uv_timer_start(e->policy_debounce, on_policy_debounce, 150, 0);
}

static void free_handle_cb(uv_handle_t *h) { free(h); }

/* Watches the policies directory (ENGINE_POLICIES_DIR, else policies/ beside
 * the Lua library) when there is one, and loads the set once now. */
static void watch_policies(engine *e) {
  const char *env = getenv("ENGINE_POLICIES_DIR");
  char *dir = env && *env ? util_strdup(env) : util_fmt("%s/../policies", e->lua_dir);
  if (access(dir, F_OK) != 0) {
    free(dir);
    return;
  }
  e->policy_dir = dir;
  e->policy_watch = calloc(1, sizeof(uv_fs_event_t));
  e->policy_debounce = calloc(1, sizeof(uv_timer_t));
  uv_fs_event_init(&e->loop, e->policy_watch);
  uv_timer_init(&e->loop, e->policy_debounce);
  e->policy_watch->data = e->policy_debounce->data = e;
  uv_fs_event_start(e->policy_watch, on_policy_change, dir, 0);
  reload_policies(e);
}

/* ------------------------------------------------------------- commit --- */

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 5000

static void drop_notes(engine *e) {
  for (size_t i = 0; i < e->nnotes; i++) {
    free(e->notes[i].id);
    free(e->notes[i].status);
    free(e->notes[i].detail);
  }
  e->nnotes = 0;
}

/* The store failed (a lost batch, a failed query): said once per incident,
 * then retried after a growing pause (50 ms doubling up to 5 s) while the
 * loop goes on serving I/O and signals. Dispatch waits for the retry. The
 * incident is over once commits have succeeded for a calm period (1 s, or
 * twice the pause reached): a nearly full disk takes small batches and fails
 * big ones, and that is one incident, not one per batch. */
static void store_incident(engine *e) {
  e->recovered_at = 0;
  if (!e->incident_since) {
    e->incident_since = util_mono_ms();
    render_line(stderr, 0, "engine: cannot write to the store: %s; retrying with backoff (nothing is lost)",
                store_errmsg(e->st));
  }
  e->incident_failures++;
  e->failed_commit = 1;
  e->recovering = 1;
  e->backoff_ms = e->backoff_ms ? e->backoff_ms * 2 : BACKOFF_MIN_MS;
  if (e->backoff_ms > BACKOFF_MAX_MS) e->backoff_ms = BACKOFF_MAX_MS;
  uv_timer_stop(&e->task_timer);
  e->task_timer_at = 0;
  uv_timer_start(&e->retry_timer, on_store_retry, (uint64_t)e->backoff_ms, 0);
}

/* The batch was rolled back: memory may be ahead of the log, and the log is
 * the truth. Cached runs go (a task, a signal or an attempt's outcome brings
 * each back, replayed from the log); an attempt in flight stays only if the
 * log still shows its command waiting, else it is abandoned (its command, or
 * the start of this attempt, was in the lost batch and comes again). */
static void batch_lost(engine *e) {
  store_rollback(e->st);
  drop_notes(e);
  for (size_t i = 0; i < e->runs.cap; i++)
    if (STRMAP_LIVE(&e->runs, i)) run_free(e->runs.vals[i]);
  strmap_free(&e->runs);
  strmap_init(&e->runs);
  for (size_t i = 0; i < e->attempts.cap; i++) {
    if (!STRMAP_LIVE(&e->attempts, i)) continue;
    attempt *a = e->attempts.vals[i];
    wf_row w;
    hist_list h = {0};
    int open = store_wf_get(e->st, a->wf_id, &w) == 1;
    if (open) {
      open = store_hist_get(e->st, a->wf_id, w.run, a->seq, &h) == 1 && strcmp(h.v[0].type, "ActivityScheduled") == 0 &&
             store_hist_outcome(e->st, a->wf_id, w.run, a->seq) == 0;
      wf_row_free(&w);
    }
    hist_list_free(&h);
    if (open) continue;
    strmap_del(&e->attempts, a->key);
    actvm_cancel(a->call);
    attempt_free(a);
  }
  store_incident(e);
}

/* After a lost batch the leases in the log may not match the attempts in
 * memory: void every lease of this engine and lease the running attempts
 * again, committed at once; then dispatch as usual. */
static void on_store_retry(uv_timer_t *t) {
  engine *e = t->data;
  if (e->stopping) return;
  int bad = store_task_release(e->st, e->owner) != STORE_OK;
  for (size_t i = 0; i < e->attempts.cap && !bad; i++) {
    if (!STRMAP_LIVE(&e->attempts, i)) continue;
    attempt *a = e->attempts.vals[i];
    int64_t now = util_now_ms();
    bad = store_task_put(e->st, a->wf_id, "activity", a->seq, now, a->n + 1, a->first_at, e->owner,
                         now + a->lease_ms) != STORE_OK;
  }
  e->recovering = 0;
  if (engine_commit(e) == 0) dispatch_due(e); /* a failure has re-armed the retry */
}

static void on_store_calm(uv_timer_t *t) {
  engine *e = t->data;
  render_line(stderr, 0, "engine: the store is writable again (%d failed attempt%s over %.1f s)",
              e->incident_failures, e->incident_failures == 1 ? "" : "s",
              (double)(e->recovered_at - e->incident_since) / 1000.0);
  e->incident_since = e->recovered_at = e->backoff_ms = 0;
  e->incident_failures = 0;
}

int engine_commit(engine *e) {
  if (!store_in_txn(e->st) && !store_batch_failed(e->st)) return 0;
  crash_point("commit.before");
  if (store_commit(e->st) != STORE_OK) {
    batch_lost(e);
    return -1;
  }
  crash_point("commit.after");
  if (e->recovering) {
    /* writable again: set the leases right now rather than after the backoff */
    uv_timer_start(&e->retry_timer, on_store_retry, 1, 0);
  } else if (e->incident_since && !e->recovered_at) {
    e->recovered_at = util_mono_ms();
    e->failed_commit = 0;
    int64_t calm = 2 * e->backoff_ms < 1000 ? 1000 : 2 * e->backoff_ms;
    uv_timer_start(&e->retry_timer, on_store_calm, (uint64_t)calm, 0);
  }
  /* callbacks may start work that queues new notes: deliver from a detached array */
  note *notes = e->notes;
  size_t nnotes = e->nnotes;
  e->notes = NULL;
  e->nnotes = e->capnotes = 0;
  for (size_t i = 0; i < nnotes; i++) {
    e->cfg.on_status(e->cfg.ud, notes[i].id, notes[i].status, notes[i].detail);
    free(notes[i].id);
    free(notes[i].status);
    free(notes[i].detail);
  }
  free(notes);
  if (e->cfg.on_commit) e->cfg.on_commit(e->cfg.ud);
  return 0;
}

/* Group commit: everything written during this loop iteration lands in one
 * transaction, just before the loop blocks for I/O. A failed commit is
 * retried with backoff (store_incident), never half applied. */
static void on_prepare(uv_prepare_t *p) { engine_commit(p->data); }

static void on_external(void *ud) { dispatch_due(ud); }

static void on_signal(uv_signal_t *s, int signum) {
  (void)signum;
  engine_stop(s->data);
}

/* -------------------------------------------------------------- setup --- */

int engine_open(engine **out, const engine_config *cfg, char *err, size_t errlen) {
  *out = NULL;
  engine *e = calloc(1, sizeof *e);
  e->cfg = *cfg;
  e->lua_dir = util_strdup(cfg->lua_dir ? cfg->lua_dir : engine_lua_dir());
  e->only_wf = util_strdup(cfg->only_wf);
  snprintf(e->owner, sizeof e->owner, "%d-%016llx", (int)getpid(), (unsigned long long)util_random64());
  wfvm_config_default(&e->vmcfg);
  const char *mc = getenv("ENGINE_MAX_CACHED_RUNS");
  e->max_cached = mc && atoi(mc) >= 0 ? (size_t)atoi(mc) : 256;
  strmap_init(&e->runs);
  strmap_init(&e->attempts);
  strmap_init(&e->bytecode);
  strmap_init(&e->scripts);
  uv_loop_init(&e->loop);
  if (store_open(cfg->db_path, 0, &e->st, err, errlen) != STORE_OK) {
    uv_loop_close(&e->loop);
    free(e->lua_dir);
    free(e->only_wf);
    free(e);
    return -1;
  }
  export_instance(e->st);
  e->act = actvm_new(&e->loop, e->lua_dir, err, errlen);
  if (!e->act) {
    engine_free(e);
    return -1;
  }
  actvm_set_history(e->act, history_json, e);
  uv_prepare_init(&e->loop, &e->prep);
  e->prep.data = e;
  uv_timer_init(&e->loop, &e->task_timer);
  e->task_timer.data = e;
  uv_timer_init(&e->loop, &e->retry_timer);
  e->retry_timer.data = e;
  uv_signal_init(&e->loop, &e->sigint);
  e->sigint.data = e;
  uv_signal_init(&e->loop, &e->sigterm);
  e->sigterm.data = e;
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
      render_line(stderr, 0, "engine: the engine crashed (%s) while running workflow %s (%d of %d in a row)", what, id,
                  n, ENGINE_CRASH_LIMIT);
      char val[160];
      snprintf(val, sizeof val, "%s %lld %lld %d", owner, (long long)w.run, (long long)at, n);
      if (store_meta_put(e->st, key, n >= ENGINE_CRASH_LIMIT ? NULL : val) != STORE_OK) log_err(e, "crash count");
      if (n >= ENGINE_CRASH_LIMIT) {
        char *msg = util_fmt("the engine crashed %d times in a row while running this workflow's code, with no "
                             "progress in between (last: %s); failed so that it does not crash the engine again",
                             n, what);
        char *q = json_quote(msg);
        char *err = util_fmt("{\"message\":%s,\"type\":\"EngineCrash\"}", q);
        wfrun *r = calloc(1, sizeof *r);
        r->e = e;
        r->id = util_strdup(id);
        r->run = w.run;
        r->script_dir = util_strdup(w.script_dir);
        r->next_seq = at + 1;
        snprintf(r->status, sizeof r->status, "%s", w.status);
        finish(r, "failed", "WorkflowFailed", NULL, err);
        free(err);
        free(q);
        free(msg);
      }
    }
  }
  if (found == 1) wf_row_free(&w);
  if (engine_commit(e) == 0) fatal_clear_note(note);
}

int engine_run(engine *e) {
  /* a crash while a workflow's code runs leaves a note naming it (fatal.h) */
  char *note = util_fmt("%s.crash", store_path(e->st));
  recover_crashed(e, note);
  fatal_arm(note, e->owner);
  free(note);
  uv_prepare_start(&e->prep, on_prepare);
  uv_signal_start(&e->sigint, on_signal, SIGINT);
  uv_signal_start(&e->sigterm, on_signal, SIGTERM);
  e->watch = dbwatch_start(&e->loop, e->st, on_external, e);
  dispatch_due(e); /* recovery: everything due, including attempts a crash cut short */
  engine_commit(e);
  if (!getenv("ENGINE_NO_POLICY_WATCH")) watch_policies(e);
  /* containers orphaned by a crash (their session finished or unknown) go */
  if (docker_socket_present() && !getenv("ENGINE_NO_SWEEP")) {
    e->sweep.quiet_unavailable = 1;
    start_sweep(e->act, e->st, &e->sweep);
  }
  if (!e->stopping) uv_run(&e->loop, UV_RUN_DEFAULT);
  engine_commit(e);
  fatal_disarm();
  return e->failed_commit ? -1 : 0;
}

void engine_stop(engine *e) {
  e->stopping = 1;
  uv_stop(&e->loop);
}

store *engine_store(engine *e) { return e->st; }
uv_loop_t *engine_loop(engine *e) { return &e->loop; }

static void walk_close(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

void engine_free(engine *e) {
  if (!e) return;
  for (size_t i = 0; i < e->attempts.cap; i++) {
    if (!STRMAP_LIVE(&e->attempts, i)) continue;
    attempt *a = e->attempts.vals[i];
    actvm_cancel(a->call);
    attempt_free(a);
  }
  strmap_free(&e->attempts);
  for (size_t i = 0; i < e->runs.cap; i++)
    if (STRMAP_LIVE(&e->runs, i)) run_free(e->runs.vals[i]);
  strmap_free(&e->runs);
  engine_clear_codecache(e);
  strmap_free(&e->bytecode);
  strmap_free(&e->scripts);
  if (e->watch) dbwatch_stop(e->watch);
  if (e->sweep.call) actvm_cancel(e->sweep.call);
  if (e->policy_watch) {
    uv_close((uv_handle_t *)e->policy_watch, free_handle_cb);
    uv_close((uv_handle_t *)e->policy_debounce, free_handle_cb);
  }
  free(e->policy_dir);
  actvm_free(e->act); /* closes its own handles (HTTP) while the loop still runs */
  /* handles owned by the engine are embedded: close them, then drain the loop;
   * a pending uv_stop makes the first uv_run return at once, hence the loop */
  uv_walk(&e->loop, walk_close, NULL);
  do {
    uv_run(&e->loop, UV_RUN_NOWAIT);
  } while (uv_loop_close(&e->loop) == UV_EBUSY);
  for (size_t i = 0; i < e->nnotes; i++) {
    free(e->notes[i].id);
    free(e->notes[i].status);
    free(e->notes[i].detail);
  }
  free(e->notes);
  free(e->sweep.json);
  store_close(e->st);
  free(e->lua_dir);
  free(e->only_wf);
  free(e);
}

/* ------------------------------------------------------------- clients --- */

/* Workflow ids are checked here and only here, for every client (CLI, API):
 * when a workflow is created, and when an id names no workflow (so ids an
 * older engine stored stay addressable). */
int engine_check_id(const char *id, char *err, size_t errlen) {
  static const char *rule =
      "ids are 1-128 bytes of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit, without \"..\"";
  size_t n = strlen(id);
  char shown[48], what[64] = "";
  render_buf(shown, sizeof shown, id, n, 0);
  if (n == 0) snprintf(what, sizeof what, "it is empty");
  else if (n > ENGINE_ID_MAX) snprintf(what, sizeof what, "it is %zu bytes, more than %d", n, ENGINE_ID_MAX);
  for (size_t i = 0; i < n && !*what; i++) {
    unsigned char c = (unsigned char)id[i];
    int alnum = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    if (!alnum && !strchr("._:@-", c)) {
      char ch[16];
      uint32_t cp;
      size_t bad, len = util_utf8_decode(id + i, n - i, &cp, &bad);
      render_buf(ch, sizeof ch, id + i, len ? len : 1, 0); /* the whole character */
      if (c == ' ') snprintf(what, sizeof what, "a space at byte %zu", i + 1);
      else snprintf(what, sizeof what, "'%s' at byte %zu is not allowed", ch, i + 1);
    } else if (i == 0 && !alnum) {
      snprintf(what, sizeof what, "it must start with a letter or a digit");
    }
  }
  if (!*what && strstr(id, "..")) snprintf(what, sizeof what, "it contains \"..\"");
  if (!*what) return 0;
  util_seterr(err, errlen, "invalid workflow id \"%s\": %s (%s)", shown, what, rule);
  return -1;
}

void engine_unknown_id(const char *id, char *err, size_t errlen) {
  if (engine_check_id(id, err, errlen) == 0) util_seterr(err, errlen, "unknown workflow '%s'", id);
}

int engine_check_signal_name(const char *name, char *err, size_t errlen) {
  size_t n = strlen(name);
  char shown[48], what[64] = "";
  render_buf(shown, sizeof shown, name, n, 0);
  if (n == 0) snprintf(what, sizeof what, "it is empty");
  else if (n > ENGINE_SIGNAL_NAME_MAX) snprintf(what, sizeof what, "it is %zu bytes, more than %d", n, ENGINE_SIGNAL_NAME_MAX);
  for (size_t i = 0; i < n && !*what;) {
    uint32_t cp;
    size_t bad, len = util_utf8_decode(name + i, n - i, &cp, &bad);
    if (!len) snprintf(what, sizeof what, "byte %zu is not UTF-8", i + 1);
    else if (util_unsafe_codepoint(cp)) snprintf(what, sizeof what, "a control character at byte %zu", i + 1);
    i += len;
  }
  if (!*what) return 0;
  util_seterr(err, errlen, "invalid signal name \"%s\": %s (signal names are 1-%d bytes of UTF-8 without control "
              "characters)", shown, what, ENGINE_SIGNAL_NAME_MAX);
  return -1;
}

/* Scripts are regular files: opened without blocking, so a FIFO in their place
 * is refused instead of hanging the read, and a directory is named as one. */
char *engine_read_script(const char *path, size_t *len, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    util_seterr(err, errlen, "cannot read workflow script %s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return NULL;
  }
  if (!S_ISREG(sb.st_mode)) {
    util_seterr(err, errlen, "workflow script %s is %s, not a file", path, util_file_kind(sb.st_mode));
    close(fd);
    return NULL;
  }
  ubuf b = {0};
  int e = util_read_fd(fd, 0, &b);
  close(fd);
  if (e) {
    util_seterr(err, errlen, "cannot read workflow script %s: %s", path, strerror(e));
    ubuf_free(&b);
    return NULL;
  }
  if (ubuf_add(&b, "", 1) != 0) { /* NUL-terminated for the callers that print it */
    ubuf_free(&b);
    util_seterr(err, errlen, "cannot read workflow script %s: %s", path, strerror(ENOMEM));
    return NULL;
  }
  *len = b.n - 1;
  return b.p;
}

static char *script_check_load(void *ud, const char *name, size_t *len, char **chunkname, char *err,
                               size_t errlen) {
  return load_module_common(ud, name, len, chunkname, err, errlen);
}

int engine_check_script(const char *path, const char *src, size_t len, char *err, size_t errlen) {
  char chunk[PATH_MAX + 2], absdir[PATH_MAX], why[768];
  snprintf(chunk, sizeof chunk, "@%s", path);
  if (wfvm_check_syntax(src, len, chunk, err, errlen) != 0) return -1;
  /* before anything is written: a script that cannot start leaves no failed row */
  char *tmp = util_strdup(path);
  if (!realpath(dirname(tmp), absdir)) snprintf(absdir, sizeof absdir, ".");
  free(tmp);
  modhost m = {NULL, NULL, 0, absdir, engine_lua_dir(), 0};
  wfvm_host host = {&m, NULL, NULL, script_check_load, NULL};
  if (wfvm_check_main(&host, src, len, chunk, why, sizeof why) == 0) return 0;
  util_seterr(err, errlen, "workflow script %s %s", path, why);
  return -1;
}

static int commit_or_fail(store *st, char *err, size_t errlen) {
  if (store_commit(st) != STORE_OK) {
    util_seterr(err, errlen, "%s", store_errmsg(st));
    return -1;
  }
  return 0;
}

static int abort_with(store *st, char *err, size_t errlen) {
  util_seterr(err, errlen, "%s", store_errmsg(st));
  store_rollback(st);
  return -1;
}

/* Writes a new workflow (row, code, WorkflowStarted, and a task when queue is
 * set) into the open transaction. Nothing is written when the script cannot be
 * read or parsed, or when id exists (*existed). */
static int write_workflow(store *st, const char *id, const char *script_path, const char *input_json, int queue,
                          const scriptbuf *pre, int *existed, char *err, size_t errlen) {
  *existed = 0;
  size_t len = 0;
  char *src;
  char hash[65];
  if (pre) { /* read, hashed and checked before, unchanged since */
    src = malloc(pre->len + 1);
    memcpy(src, pre->src, pre->len + 1);
    len = pre->len;
    memcpy(hash, pre->hash, sizeof hash);
  } else {
    src = engine_read_script(script_path, &len, err, errlen);
    if (!src) return -1;
    if (engine_check_script(script_path, src, len, err, errlen) != 0) {
      free(src);
      return -1;
    }
    util_sha256_hex(src, len, hash);
  }
  /* the log holds the input in canonical form: one line, stable bytes; a bad
   * one is refused before the transaction begins */
  char *canon = json_accept(input_json, strlen(input_json), "the workflow input", err, errlen);
  if (!canon) {
    free(src);
    return -1;
  }
  char absdir[PATH_MAX];
  char *tmp = util_strdup(script_path);
  if (!realpath(dirname(tmp), absdir)) snprintf(absdir, sizeof absdir, ".");
  free(tmp);
  if (store_begin(st) != STORE_OK) {
    free(src);
    free(canon);
    util_seterr(err, errlen, "%s", store_errmsg(st));
    return -1;
  }
  wf_row w;
  int found = store_wf_get(st, id, &w);
  if (found == 1) {
    wf_row_free(&w);
    free(src);
    free(canon);
    *existed = 1;
    return 0;
  }
  if (engine_check_id(id, err, errlen) != 0) {
    free(src);
    free(canon);
    return -1;
  }
  int64_t now = util_now_ms();
  wf_row row = {(char *)id, 1, (char *)"running", (char *)script_path, absdir, hash, (char *)input_json,
                NULL, NULL, 0, now, now};
  char seed[17];
  snprintf(seed, sizeof seed, "%016llx", (unsigned long long)util_random64());
  row.input = canon;
  char *payload = util_fmt("{\"input\":%s,\"seed\":\"%s\"}", canon, seed);
  hist_event ev = {1, "WorkflowStarted", 0, NULL, NULL, payload, now};
  int bad = found < 0 || store_code_put(st, hash, script_path, src, len) != STORE_OK ||
            store_wf_insert(st, &row) != STORE_OK || store_hist_append(st, id, 1, &ev) != STORE_OK ||
            (queue && store_task_put(st, id, "workflow", 0, now, 0, 0, NULL, 0) != STORE_OK);
  free(payload);
  free(canon);
  free(src);
  if (bad) {
    util_seterr(err, errlen, "%s", store_errmsg(st));
    return -1;
  }
  return 0;
}

int engine_create_workflow(store *st, const char *id, const char *script_path, const char *input_json,
                           int *existed, char *err, size_t errlen) {
  if (write_workflow(st, id, script_path, input_json, 1, NULL, existed, err, errlen) != 0) {
    store_rollback(st);
    return -1;
  }
  if (*existed) {
    store_rollback(st);
    return 0;
  }
  return commit_or_fail(st, err, errlen);
}

/* The script at path, read once and re-read only when the file changes. */
static const scriptbuf *cached_script(engine *e, const char *path, char *err, size_t errlen) {
  struct stat sb;
  if (stat(path, &sb) != 0) {
    util_seterr(err, errlen, "cannot read workflow script %s: %s", path, strerror(errno));
    return NULL;
  }
  int64_t mt = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
  scriptbuf *s = strmap_get(&e->scripts, path);
  if (s && s->mtime_ns == mt && s->size == (int64_t)sb.st_size) return s;
  size_t len;
  char *src = engine_read_script(path, &len, err, errlen);
  if (!src) return NULL;
  if (engine_check_script(path, src, len, err, errlen) != 0) {
    free(src);
    return NULL;
  }
  if (!s) {
    s = calloc(1, sizeof *s);
    strmap_put(&e->scripts, path, s);
  }
  free(s->src);
  s->src = src;
  s->len = len;
  s->mtime_ns = mt;
  s->size = (int64_t)sb.st_size;
  util_sha256_hex(src, len, s->hash);
  return s;
}

int engine_submit(engine *e, const char *id, const char *script_path, const char *input_json, char *err,
                  size_t errlen) {
  int existed = 0;
  const scriptbuf *pre = cached_script(e, script_path, err, errlen);
  if (!pre) return -1;
  if (write_workflow(e->st, id, script_path, input_json, 0, pre, &existed, err, errlen) != 0) return -1;
  if (existed) {
    util_seterr(err, errlen, "workflow '%s' already exists", id);
    return -1;
  }
  run_load_id(e, id);
  return 0;
}

int engine_signal_local(engine *e, const char *id, const char *name, const char *payload, char *err,
                        size_t errlen) {
  if (engine_check_signal_name(name, err, errlen) != 0) return -1;
  char *canon = json_accept(payload, strlen(payload), "the signal payload", err, errlen);
  if (!canon) return -1;
  wf_row w;
  int found = store_wf_get(e->st, id, &w);
  if (found != 1) {
    free(canon);
    engine_unknown_id(id, err, errlen);
    return -1;
  }
  int live = !engine_status_terminal(w.status);
  wf_row_free(&w);
  if (!live) {
    free(canon);
    util_seterr(err, errlen, "workflow '%s' has finished; signal not delivered", id);
    return -1;
  }
  int rc = store_signal_put(e->st, id, name, canon, util_now_ms());
  free(canon);
  if (rc != STORE_OK) {
    util_seterr(err, errlen, "%s", store_errmsg(e->st));
    return -1;
  }
  if (!strmap_get(&e->runs, id)) run_load_id(e, id); /* a waiting run is not in memory */
  return 0;
}

/* Loads a workflow that must exist and not be finished, inside a transaction. */
static int begin_live(store *st, const char *id, const char *what, char *err, size_t errlen) {
  if (store_begin(st) != STORE_OK) return abort_with(st, err, errlen);
  wf_row w;
  int found = store_wf_get(st, id, &w);
  if (found != 1) {
    if (found == 0) engine_unknown_id(id, err, errlen);
    else util_seterr(err, errlen, "%s", store_errmsg(st));
    store_rollback(st);
    return -1;
  }
  if (engine_status_terminal(w.status)) {
    util_seterr(err, errlen, "workflow '%s' is %s; %s not delivered", id, w.status, what);
    wf_row_free(&w);
    store_rollback(st);
    return -1;
  }
  wf_row_free(&w);
  return 0;
}

int engine_send_signal(store *st, const char *id, const char *name, const char *payload, char *err, size_t errlen) {
  if (engine_check_signal_name(name, err, errlen) != 0) return -1;
  char *canon = json_accept(payload, strlen(payload), "the signal payload", err, errlen);
  if (!canon) return -1;
  if (begin_live(st, id, "signal", err, errlen) != 0) {
    free(canon);
    return -1;
  }
  int64_t now = util_now_ms();
  int rc = store_signal_put(st, id, name, canon, now);
  free(canon);
  if (rc != STORE_OK ||
      store_task_put(st, id, "workflow", 0, now, 0, 0, NULL, 0) != STORE_OK)
    return abort_with(st, err, errlen);
  return commit_or_fail(st, err, errlen);
}

int engine_request_cancel(store *st, const char *id, char *err, size_t errlen) {
  if (begin_live(st, id, "cancellation", err, errlen) != 0) return -1;
  wf_row w;
  store_wf_get(st, id, &w);
  int already = w.cancel != 0;
  wf_row_free(&w);
  if (!already && (store_wf_set_cancel(st, id, 1) != STORE_OK ||
                   store_task_put(st, id, "workflow", 0, util_now_ms(), 0, 0, NULL, 0) != STORE_OK))
    return abort_with(st, err, errlen);
  return commit_or_fail(st, err, errlen);
}

/* ---------------------------------------------------------------- lock --- */

/* The database file's own path in out (PATH_MAX bytes): symlinks followed (a
 * dangling one too: the database may not exist yet), "." and ".." resolved,
 * so every name of one file gives one lock. Returns 0, or -1 with errno. */
static int canonical_db_path(const char *db_path, char *out) {
  char cur[PATH_MAX];
  if (snprintf(cur, sizeof cur, "%s", db_path) >= (int)sizeof cur) return errno = ENAMETOOLONG, -1;
  for (int hops = 0; hops < 40; hops++) {
    if (realpath(cur, out)) return 0;
    if (errno != ENOENT) return -1;
    char link[PATH_MAX], *d = util_strdup(cur), *b = util_strdup(cur);
    const char *dir = dirname(d), *base = basename(b);
    ssize_t n = readlink(cur, link, sizeof link - 1);
    int rc = 1; /* 1: follow the link */
    if (n < 0) {
      /* no such file yet: its directory resolved, its name kept */
      char rdir[PATH_MAX];
      rc = !realpath(dir, rdir) ? -1
           : snprintf(out, PATH_MAX, "%s/%s", strcmp(rdir, "/") ? rdir : "", base) >= PATH_MAX
               ? (errno = ENAMETOOLONG, -1)
               : 0;
    } else {
      link[n] = 0;
      char next[PATH_MAX];
      if (snprintf(next, sizeof next, "%s%s%s", link[0] == '/' ? "" : dir, link[0] == '/' ? "" : "/", link) >=
          (int)sizeof next)
        rc = (errno = ENAMETOOLONG, -1);
      else
        memcpy(cur, next, sizeof cur);
    }
    free(d);
    free(b);
    if (rc <= 0) return rc;
  }
  return errno = ELOOP, -1;
}

int engine_lock(const char *db_path, const char *mode, char *holder, size_t holderlen) {
  /* beside the file itself: a symlink or "x/../engine.db" to the same
   * database must find the same lock, or two workers run one workflow */
  char real[PATH_MAX], path[PATH_MAX + 8];
  if (canonical_db_path(db_path, real) != 0) {
    util_seterr(holder, holderlen, "cannot resolve %s: %s", db_path, strerror(errno));
    return -1;
  }
  snprintf(path, sizeof path, "%s.lock", real);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    util_seterr(holder, holderlen, "cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[128] = "";
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    buf[strcspn(buf, "\n")] = 0;
    util_seterr(holder, holderlen, "%s", *buf ? buf : "another engine process");
    close(fd);
    return -1;
  }
  char buf[128];
  int n = snprintf(buf, sizeof buf, "engine %s (pid %d)\n", mode, (int)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) { /* informational only */
  }
  return fd;
}

void engine_unlock(int fd) {
  if (fd >= 0) close(fd);
}

/* ---------------------------------------------------------------- watch --- */

static void watch_check(dbwatch *w) {
  int64_t v = store_data_version(w->st);
  if (v != w->version) {
    w->version = v;
    w->cb(w->ud);
  }
}

static void on_fs(uv_fs_event_t *h, const char *filename, int events, int status) {
  (void)events;
  dbwatch *w = h->data;
  if (status < 0 || !filename || strncmp(filename, w->base, strlen(w->base)) == 0) watch_check(w);
}

static void on_poll(uv_timer_t *t) { watch_check(t->data); }

dbwatch *dbwatch_start(uv_loop_t *loop, store *st, void (*cb)(void *ud), void *ud) {
  dbwatch *w = calloc(1, sizeof *w);
  w->loop = loop;
  w->st = st;
  w->cb = cb;
  w->ud = ud;
  w->version = store_data_version(st);
  /* the directory the WAL is written in, whatever name the database was opened by */
  char real[PATH_MAX];
  const char *path = canonical_db_path(store_path(st), real) == 0 ? real : store_path(st);
  char *p1 = util_strdup(path), *p2 = util_strdup(path);
  snprintf(w->base, sizeof w->base, "%s", basename(p1));
  uv_fs_event_init(loop, &w->fs);
  w->fs.data = w;
  /* inotify on the directory sees every write to the WAL of any process */
  uv_fs_event_start(&w->fs, on_fs, dirname(p2), 0);
  free(p1);
  free(p2);
  uv_timer_init(loop, &w->poll);
  w->poll.data = w;
  uv_timer_start(&w->poll, on_poll, 1000, 1000); /* safety net where inotify is unavailable */
  return w;
}

static void watch_closed(uv_handle_t *h) {
  dbwatch *w = h->data;
  if (++w->closing == 3) free(w);
}

void dbwatch_stop(dbwatch *w) {
  w->closing = 1;
  uv_close((uv_handle_t *)&w->fs, watch_closed);
  uv_close((uv_handle_t *)&w->poll, watch_closed);
}

/* --------------------------------------------------------------- replay --- */

static int64_t check_append(void *ud, const char *type, int64_t ref, const char *name, const char *hash,
                            const char *payload, int64_t *time) {
  (void)ud, (void)type, (void)ref, (void)name, (void)hash, (void)payload, (void)time;
  return -1;
}
static int64_t check_emit(void *ud, const char *type, const char *payload) {
  (void)ud, (void)type, (void)payload;
  return -1;
}
static char *check_load_module(void *ud, const char *name, size_t *len, char **chunkname, char *err, size_t errlen) {
  return load_module_common(ud, name, len, chunkname, err, errlen);
}

static int is_terminal_event(const char *t) {
  return strcmp(t, "WorkflowCompleted") == 0 || strcmp(t, "WorkflowFailed") == 0 ||
         strcmp(t, "WorkflowCancelled") == 0 || strcmp(t, "ContinuedAsNew") == 0;
}

int engine_replay_check(store *st, const char *id, const char *script_path, int apply, char *report,
                        size_t reportlen) {
  wf_row w;
  int found = store_wf_get(st, id, &w);
  if (found != 1) {
    if (found == 0) engine_unknown_id(id, report, reportlen);
    else util_seterr(report, reportlen, "cannot read workflow '%s'", id);
    return -1;
  }
  int rc = -1;
  char *src = NULL, *tmp = NULL;
  char *terminal = NULL, *terminal_payload = NULL; /* the run's end, compared with the script's */
  size_t len = 0;
  char absdir[PATH_MAX], hash[65];
  hist_list h = {0};
  if (script_path) {
    src = engine_read_script(script_path, &len, report, reportlen); /* a FIFO would hang the read */
    if (!src) goto done;
    tmp = util_strdup(script_path);
    if (!realpath(dirname(tmp), absdir)) snprintf(absdir, sizeof absdir, ".");
    util_sha256_hex(src, len, hash);
  } else {
    src = store_code_get(st, w.code_hash, &len);
    snprintf(absdir, sizeof absdir, "%s", w.script_dir);
    snprintf(hash, sizeof hash, "%s", w.code_hash);
    if (!src) {
      util_seterr(report, reportlen, "the pinned code of '%s' is missing from the store", id);
      goto done;
    }
  }
  if (store_hist_load(st, id, w.run, &h) != STORE_OK) {
    util_seterr(report, reportlen, "%s", store_errmsg(st));
    goto done;
  }
  while (h.n && is_terminal_event(h.v[h.n - 1].type)) {
    free(terminal);
    free(terminal_payload);
    terminal = util_strdup(h.v[h.n - 1].type);
    terminal_payload = util_strdup(h.v[h.n - 1].payload ? h.v[h.n - 1].payload : "null");
    h.n--;
    free((char *)h.v[h.n].type);
    free((char *)h.v[h.n].name);
    free((char *)h.v[h.n].hash);
    free((char *)h.v[h.n].payload);
  }
  size_t total = h.n;
  wfvm_config cfg;
  wfvm_config_default(&cfg);
  cfg.check_only = 1;
  modhost m = {st, id, w.run, absdir, engine_lua_dir(), script_path == NULL};
  wfvm_host host = {&m, check_append, check_emit, check_load_module, NULL};
  wfvm *vm = wfvm_new(&cfg, &host, id, w.run, &h);
  char *chunk = util_fmt("@%s", script_path ? script_path : w.script_name);
  wfvm_state s = vm ? wfvm_start(vm, src, len, chunk) : WFVM_FAILED;
  free(chunk);
  const char *label = script_path ? script_path : "its pinned code";
  switch (s) {
    case WFVM_END:
    case WFVM_BLOCKED:
      util_seterr(report, reportlen, "ok: %s replays all %zu events of %s (run %lld)", label, total, id,
                  (long long)w.run);
      rc = 0;
      break;
    case WFVM_DONE: /* the script returned: the same result as the run's, if it has one */
      if (terminal && strcmp(terminal, "WorkflowCompleted") != 0) {
        util_seterr(report, reportlen, "diverges: the script returns after all %zu events, but the run ended with %s",
                    total, terminal);
        rc = 1;
      } else if (terminal && strcmp(wfvm_output(vm), terminal_payload) != 0) {
        util_seterr(report, reportlen, "diverges: the script returns %.300s but the run returned %.300s",
                    wfvm_output(vm), terminal_payload);
        rc = 1;
      } else {
        util_seterr(report, reportlen, "ok: %s replays all %zu events of %s (run %lld)%s", label, total, id,
                    (long long)w.run, terminal ? " and returns the same result" : "");
        rc = 0;
      }
      break;
    case WFVM_FAILED:
      if (terminal && (strcmp(terminal, "WorkflowFailed") == 0 || strcmp(terminal, "WorkflowCancelled") == 0) &&
          wfvm_cursor(vm) >= total) {
        util_seterr(report, reportlen, "ok: %s replays all %zu events of %s and %s as the run did", label, total, id,
                    strcmp(terminal, "WorkflowFailed") == 0 ? "fails" : "ends cancelled");
        rc = 0;
      } else {
        util_seterr(report, reportlen, "diverges: the script raises after %zu of %zu events: %s", wfvm_cursor(vm),
                    total, vm ? wfvm_output(vm) : "cannot create a VM");
        rc = 1;
      }
      break;
    default:
      util_seterr(report, reportlen, "diverges: %s", vm ? wfvm_output(vm) : "cannot create a VM");
      rc = 1;
  }
  wfvm_free(vm);
  if (rc == 0 && apply) {
    int bad = store_begin(st) != STORE_OK;
    if (!bad && script_path)
      bad = store_code_put(st, hash, script_path, src, len) != STORE_OK ||
            store_wf_set_code(st, id, hash, script_path, absdir) != STORE_OK ||
            store_modules_clear(st, id, w.run) != STORE_OK;
    if (!bad && strcmp(w.status, "stuck") == 0)
      bad = store_wf_set_status(st, id, "running", NULL, NULL) != STORE_OK ||
            store_task_put(st, id, "workflow", 0, util_now_ms(), 0, 0, NULL, 0) != STORE_OK;
    if (bad || store_commit(st) != STORE_OK) {
      util_seterr(report, reportlen, "cannot apply: %s", store_errmsg(st));
      store_rollback(st);
      rc = -1;
    } else {
      size_t n = strlen(report);
      util_seterr(report + n, reportlen - n, "; applied%s", strcmp(w.status, "stuck") == 0 ? ", resuming" : "");
    }
  }
done:
  hist_list_free(&h);
  free(terminal);
  free(terminal_payload);
  free(src);
  free(tmp);
  wf_row_free(&w);
  return rc;
}
