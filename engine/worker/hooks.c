/* hooks: the worker's hooks in the Lua library. What a worker does besides
 * running workflows (load the policy set, sweep orphaned sandboxes, reload
 * policies on a change) is agent-session knowledge, so it lives in
 * lua/activities/worker.lua; the core knows only this contract:
 *
 *   worker.watches()      at start-up: {dirs = {...}} to watch; a change in
 *                         one calls worker.changed{dir = D}, debounced
 *   worker.start{live=, sandboxes=}  at start-up, after recovery: what
 *                         the worker loads before it is ready (the policy
 *                         set, the triggers); its end, whether it returned
 *                         or failed, is the worker's readiness (hooks_start)
 *   worker.sweep{live=, sandboxes=}  right after start, then every
 *                         ENGINE_SWEEP_INTERVAL_MS (default 5 min; 0: only
 *                         the first): another host may have taken a session
 *                         over and provisioned its sandbox again
 *   worker.changed{dir=}
 *   worker.reload{}       SIGHUP (engine serve): the policy set and the
 *                         triggers again (hooks_reload)
 *   worker.NAME{...}      a maintenance command (engine_maintenance), run on
 *                         a loop of its own: `engine gc`, `engine policy check`
 *
 * live lists the workflows that have not finished; sandboxes maps those with
 * a sandbox to their latest sandbox.ready or sandbox.reprovisioned payload
 * (its host). The engine logs each line of a result's `log` list (log.h:
 * a string, or {level = "warning"|"error"|"info", msg = ...}); the rest is
 * the hook's own. */
#include "home.h"
#include "worker.h"

#include "activity_modules.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "json.h"
#include "log.h"
#include "render.h"

#define HOOK_TIMEOUT_MS 120000
#define HOOK_MAX_WATCHES 8
#define WATCH_DEBOUNCE_MS 150
#define WATCH_POLL_MS 2000

typedef struct watch {
  struct hooks *h;
  int slot; /* its worker.changed call's place in hooks.calls */
  int closed; /* handles closed so far */
  char *dir;
  uv_fs_event_t fs;
  uv_timer_t debounce, poll; /* poll: only when inotify cannot watch dir */
  uint64_t stamp;            /* the polled directory's last look (names, sizes, mtimes) */
  int changing;              /* a worker.changed call is running: another change waits for it */
  int again;
} watch;

typedef struct hook_call hook_call;

/* The places of the pending hook calls in hooks.calls. */
enum { SLOT_START, SLOT_SWEEP, SLOT_RELOAD, SLOT_WATCH /* and one more per watch */ };

struct hooks {
  engine *e;
  hook_call *calls[SLOT_WATCH + HOOK_MAX_WATCHES]; /* pending hook calls, cancelled on free */
  void (*started)(engine *e);  /* told once when worker.start has ended */
  int start_ended;
  void (*reloaded)(engine *e); /* told when worker.reload has ended */
  int reload_again;            /* a SIGHUP came while it ran: once more after it */
  uv_timer_t *sweep;                      /* the periodic worker.sweep; NULL when off */
  watch *watches[HOOK_MAX_WATCHES];
  int nwatches;
};

/* ---------------------------------------------------------- live list --- */

typedef struct live_ctx {
  ubuf ids, sandboxes; /* a JSON list of ids; "id":payload members */
  int count, placed;
} live_ctx;

static int add_live(void *ud, const char *wf_id, const char *sandbox) {
  live_ctx *l = ud;
  char *q = json_quote(wf_id);
  if (l->count++) ubuf_add(&l->ids, ",", 1);
  ubuf_add(&l->ids, q, strlen(q));
  if (sandbox && *sandbox == '{') { /* a domain event's payload: an object the workflow encoded */
    if (l->placed++) ubuf_add(&l->sandboxes, ",", 1);
    ubuf_add(&l->sandboxes, q, strlen(q));
    ubuf_add(&l->sandboxes, ":", 1);
    ubuf_add(&l->sandboxes, sandbox, strlen(sandbox));
  }
  free(q);
  return 0;
}

/* The domain events that say where a session's sandbox is (the latest one's payload names its host). */
static const char *const SANDBOX_AT[] = {"sandbox.ready", "sandbox.reprovisioned", NULL};

/* {"args":{"live":[ids of workflows that have not finished],"sandboxes":{id:
 * its latest sandbox.ready or sandbox.reprovisioned payload}}}, or NULL when
 * the list cannot be read (a sweep must never take a live one for finished). */
static char *live_payload(store *st) {
  live_ctx l = {0};
  int rc = store_live_list(st, SANDBOX_AT, add_live, &l);
  char *out = NULL;
  if (rc == STORE_OK)
    out = util_fmt("{\"args\":{\"live\":[%.*s],\"sandboxes\":{%.*s}}}", (int)l.ids.n, l.ids.p ? l.ids.p : "",
                   (int)l.sandboxes.n, l.sandboxes.p ? l.sandboxes.p : "");
  ubuf_free(&l.ids);
  ubuf_free(&l.sandboxes);
  return out;
}

/* The instance id and the database's directory, for activity.worker(). */
static void tell_worker(actvm *act, store *st) {
  char id[64], dir[PATH_MAX];
  if (store_instance_id(st, id, sizeof id) != 0) *id = 0;
  engine_data_dir(store_path(st), dir);
  actvm_set_worker(act, *id ? id : NULL, *dir ? dir : NULL);
}

/* ------------------------------------------------------------ results --- */

/* Prints the lines of the result's "log" list; a failed hook is one line. */
static void print_log(const char *name, int ok, const char *json) {
  if (!ok) {
    log_msg(LOGL_ERROR, "%s failed: %s", name, json);
    return;
  }
  lua_State *L = luaL_newstate();
  if (!L) return;
  char err[128];
  if (json_decode_safe(L, json, strlen(json), err, sizeof err) == 0 && lua_istable(L, -1)) {
    lua_getfield(L, -1, "log");
    if (lua_istable(L, -1))
      for (lua_Integer i = 1;; i++, lua_pop(L, 1)) {
        int t = lua_rawgeti(L, -1, i);
        if (t == LUA_TSTRING) {
          log_msg(LOGL_INFO, "%s", lua_tostring(L, -1));
          continue;
        }
        if (t != LUA_TTABLE) break;
        lua_getfield(L, -1, "level");
        lua_getfield(L, -2, "msg");
        const char *lv = lua_tostring(L, -2), *msg = lua_tostring(L, -1);
        log_level level = !lv                          ? LOGL_INFO
                          : strcmp(lv, "error") == 0   ? LOGL_ERROR
                          : strcmp(lv, "warning") == 0 ? LOGL_WARNING
                                                       : LOGL_INFO;
        if (msg) log_msg(level, "%s", msg);
        lua_pop(L, 2);
      }
  }
  lua_close(L);
}

struct hook_call {
  hooks *h;
  int slot;
  char name[64];
  watch *w;      /* worker.changed: its watch */
  act_call *call; /* while pending */
};

static void changed_done(watch *w);
static void start_done(hooks *h);
static void reload_done(hooks *h);

static void hook_done(void *ud, act_call *call, int ok, const char *json) {
  (void)call;
  hook_call *c = ud;
  if (c->h->calls[c->slot] == c) c->h->calls[c->slot] = NULL;
  print_log(c->name, ok, json);
  if (c->w) changed_done(c->w);
  else if (c->slot == SLOT_START) start_done(c->h);
  else if (c->slot == SLOT_RELOAD) reload_done(c->h);
  free(c);
}

/* Calls worker.NAME with payload; slot keeps the pending call for free. */
static void call_hook(hooks *h, int slot, const char *name, const char *payload, watch *w) {
  hook_call *c = util_xcalloc(1, sizeof *c);
  c->h = h;
  c->slot = slot;
  c->w = w;
  snprintf(c->name, sizeof c->name, "worker.%s", name);
  act_info info = {"engine", 0, 1, c->name, NULL, HOOK_TIMEOUT_MS, 0, 0, NULL, NULL, 0};
  int ok = 0;
  char *json = NULL;
  act_call *pending = NULL;
  if (actvm_call(h->e->act, &info, payload, hook_done, c, &ok, &json, &pending)) {
    hook_done(c, NULL, ok, json);
    free(json);
  } else {
    c->call = pending;
    h->calls[slot] = c;
  }
}

/* ------------------------------------------------------------ watches --- */

static void on_debounce(uv_timer_t *t) {
  watch *w = t->data;
  if (w->changing) {
    w->again = 1; /* a reload is running: one more once it ends */
    return;
  }
  w->changing = 1;
  char *q = json_quote(w->dir), *payload = util_fmt("{\"args\":{\"dir\":%s}}", q);
  call_hook(w->h, w->slot, "changed", payload, w);
  free(q);
  free(payload);
}

static void changed_done(watch *w) {
  w->changing = 0;
  if (w->again) {
    w->again = 0;
    uv_timer_start(&w->debounce, on_debounce, WATCH_DEBOUNCE_MS, 0);
  }
}

/* an editor writes a file in several steps: react once they settle */
static void on_change(uv_fs_event_t *fs, const char *filename, int events, int status) {
  (void)filename, (void)events, (void)status;
  watch *w = fs->data;
  uv_timer_start(&w->debounce, on_debounce, WATCH_DEBOUNCE_MS, 0);
}

/* Without inotify: the directory's entries (names, sizes, mtimes) are looked
 * at every WATCH_POLL_MS, and a difference is a change. */
static uint64_t dir_stamp(const char *dir) {
  uv_fs_t req;
  uv_dirent_t ent;
  uint64_t h = 1469598103934665603ULL; /* FNV-1a over names, sizes and mtimes */
  if (uv_fs_scandir(NULL, &req, dir, 0, NULL) < 0) {
    uv_fs_req_cleanup(&req);
    return 0;
  }
  while (uv_fs_scandir_next(&req, &ent) != UV_EOF) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, ent.name);
    uv_fs_t st;
    int64_t m = 0, n = 0;
    if (uv_fs_stat(NULL, &st, path, NULL) == 0) {
      m = (int64_t)st.statbuf.st_mtim.tv_sec * 1000000000 + st.statbuf.st_mtim.tv_nsec;
      n = (int64_t)st.statbuf.st_size;
    }
    uv_fs_req_cleanup(&st);
    for (const char *p = ent.name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    h = (h ^ (uint64_t)m) * 1099511628211ULL;
    h = (h ^ (uint64_t)n) * 1099511628211ULL;
  }
  uv_fs_req_cleanup(&req);
  return h;
}

static void on_poll(uv_timer_t *t) {
  watch *w = t->data;
  uint64_t s = dir_stamp(w->dir);
  if (s != w->stamp) {
    w->stamp = s;
    uv_timer_start(&w->debounce, on_debounce, WATCH_DEBOUNCE_MS, 0);
  }
}

static void watch_closed(uv_handle_t *handle) {
  watch *w = handle->data;
  if (++w->closed == 3) {
    free(w->dir);
    free(w);
  }
}

static void watch_dir(hooks *h, const char *dir) {
  if (h->nwatches == HOOK_MAX_WATCHES) {
    log_msg(LOGL_WARNING, "more than %d directories to watch; %s is not watched", HOOK_MAX_WATCHES, dir);
    return;
  }
  uv_loop_t *loop = &h->e->loop;
  watch *w = util_xcalloc(1, sizeof *w);
  w->h = h;
  w->dir = util_strdup(dir);
  w->fs.data = w->debounce.data = w->poll.data = w;
  uv_handle_t *handles[3] = {(uv_handle_t *)&w->fs, (uv_handle_t *)&w->debounce, (uv_handle_t *)&w->poll};
  int inited = 0, rc = uv_fs_event_init(loop, &w->fs);
  if (rc == 0 && ++inited && (rc = uv_timer_init(loop, &w->debounce)) == 0 && ++inited &&
      (rc = uv_timer_init(loop, &w->poll)) == 0)
    ++inited;
  if (rc != 0) { /* the handles that were put on the loop come off it; the last one frees w */
    log_msg(LOGL_WARNING, "cannot watch %s: %s", dir, uv_strerror(rc));
    w->closed = 3 - inited;
    for (int i = 0; i < inited; i++) uv_close(handles[i], watch_closed);
    if (!inited) {
      free(w->dir);
      free(w);
    }
    return;
  }
  w->slot = SLOT_WATCH + h->nwatches;
  h->watches[h->nwatches++] = w;
  rc = uv_fs_event_start(&w->fs, on_change, dir, 0);
  if (rc != 0) {
    /* inotify exhausted (its instance or watch limit) or unsupported here */
    log_msg(LOGL_WARNING, "cannot watch %s with inotify (%s); polling it every %d ms instead", dir,
            uv_strerror(rc), WATCH_POLL_MS);
    w->stamp = dir_stamp(dir);
    uv_timer_start(&w->poll, on_poll, WATCH_POLL_MS, WATCH_POLL_MS);
  }
}

/* The directories worker.watches() names: called synchronously at start-up
 * (the hook must not wait on anything). */
static void start_watches(hooks *h) {
  act_info info = {"engine", 0, 1, "worker.watches", NULL, HOOK_TIMEOUT_MS, 0, 0, NULL, NULL, 0};
  int ok = 0;
  char *json = NULL;
  act_call *pending = NULL;
  if (!actvm_call(h->e->act, &info, "{\"args\":{}}", NULL, NULL, &ok, &json, &pending)) {
    actvm_cancel(pending);
    log_msg(LOGL_WARNING, "worker.watches did not return at once; nothing is watched");
    return;
  }
  lua_State *L = luaL_newstate();
  char err[128];
  if (!ok) log_msg(LOGL_ERROR, "worker.watches failed: %s", json);
  else if (L && json_decode_safe(L, json, strlen(json), err, sizeof err) == 0 && lua_istable(L, -1)) {
    lua_getfield(L, -1, "dirs");
    if (lua_istable(L, -1))
      for (lua_Integer i = 1; lua_rawgeti(L, -1, i) == LUA_TSTRING; i++, lua_pop(L, 1)) watch_dir(h, lua_tostring(L, -1));
  }
  if (L) lua_close(L);
  free(json);
}

/* -------------------------------------------------------------- worker --- */

void hooks_open(engine *e) {
  e->hooks = util_xcalloc(1, sizeof *e->hooks);
  e->hooks->e = e;
  tell_worker(e->act, e->st);
}

int engine_hook_now(engine *e, const char *name, const char *payload, int *ok, char **json) {
  char fn[80];
  snprintf(fn, sizeof fn, "worker.%s", name);
  act_info info = {"engine", 0, 1, fn, NULL, HOOK_TIMEOUT_MS, 0, 0, NULL, NULL, 0};
  act_call *pending = NULL;
  *json = NULL;
  if (actvm_call(e->act, &info, payload, NULL, NULL, ok, json, &pending)) return 1;
  actvm_cancel(pending);
  return 0;
}

/* Calls worker.NAME{live=, sandboxes=} in slot, unless one is still running. */
static void call_live_hook(hooks *h, int slot, const char *name) {
  if (h->calls[slot]) return;
  char *payload = live_payload(h->e->st);
  if (!payload) {
    log_msg(LOGL_ERROR, "cannot list live workflows for worker.%s: %s", name, store_errmsg(h->e->st));
    return;
  }
  call_hook(h, slot, name, payload, NULL);
  free(payload);
}

static void on_sweep(uv_timer_t *t) { call_live_hook(t->data, SLOT_SWEEP, "sweep"); }

static void start_sweeps(hooks *h) {
  const char *v = getenv("ENGINE_SWEEP_INTERVAL_MS");
  long long ms = v && *v ? atoll(v) : 300000;
  if (ms <= 0) return;
  h->sweep = util_xcalloc(1, sizeof *h->sweep);
  if (uv_timer_init(&h->e->loop, h->sweep) != 0) {
    free(h->sweep);
    h->sweep = NULL;
    return;
  }
  h->sweep->data = h;
  uv_timer_start(h->sweep, on_sweep, (uint64_t)ms, (uint64_t)ms);
  uv_unref((uv_handle_t *)h->sweep); /* never what keeps the loop running */
}

/* worker.start has ended (or could not be called): the worker is ready;
 * then the first sweep. */
static void start_done(hooks *h) {
  if (h->start_ended) return;
  h->start_ended = 1;
  if (h->started) h->started(h->e);
  call_live_hook(h, SLOT_SWEEP, "sweep");
}

void hooks_start(engine *e, void (*started)(engine *e)) {
  hooks *h = e->hooks;
  h->started = started;
  start_watches(h);
  call_live_hook(h, SLOT_START, "start");
  if (!h->calls[SLOT_START]) start_done(h); /* it returned at once, or the live list could not be read */
  start_sweeps(h);
}

static void call_reload(hooks *h) { call_hook(h, SLOT_RELOAD, "reload", "{\"args\":{}}", NULL); }

static void reload_done(hooks *h) {
  if (h->reload_again) {
    h->reload_again = 0;
    call_reload(h);
    return;
  }
  if (h->reloaded) h->reloaded(h->e);
}

void hooks_reload(engine *e, void (*reloaded)(engine *e)) {
  hooks *h = e->hooks;
  h->reloaded = reloaded;
  if (h->calls[SLOT_RELOAD]) h->reload_again = 1; /* the one running may have read the files before the edit */
  else call_reload(h);
}

void hooks_free(engine *e) {
  hooks *h = e->hooks;
  if (!h) return;
  for (size_t i = 0; i < sizeof h->calls / sizeof h->calls[0]; i++)
    if (h->calls[i]) { /* a cancelled call's callback never runs: its context goes here */
      actvm_cancel(h->calls[i]->call);
      free(h->calls[i]);
    }
  if (h->sweep) uv_close((uv_handle_t *)h->sweep, uvloop_free_handle);
  for (int i = 0; i < h->nwatches; i++) {
    watch *w = h->watches[i];
    uv_close((uv_handle_t *)&w->fs, watch_closed);
    uv_close((uv_handle_t *)&w->debounce, watch_closed);
    uv_close((uv_handle_t *)&w->poll, watch_closed);
  }
  free(h);
  e->hooks = NULL;
}

/* -------------------------------------------------------- maintenance --- */

typedef struct standalone {
  int done, ok;
  char *json;
} standalone;

static void standalone_done(void *ud, act_call *call, int ok, const char *json) {
  (void)call;
  standalone *s = ud;
  s->done = 1;
  s->ok = ok;
  s->json = util_strdup(json);
}

int engine_maintenance(store *st, const char *name, const char *args_json, char *report, size_t reportlen) {
  char *payload = NULL;
  if (!args_json) {
    payload = live_payload(st);
    if (!payload) {
      util_seterr(report, reportlen, "cannot list the workflows: %s", store_errmsg(st));
      return -1;
    }
  } else {
    payload = util_fmt("{\"args\":%s}", args_json);
  }
  uv_loop_t loop;
  int rc = uv_loop_init(&loop);
  if (rc != 0) {
    util_seterr(report, reportlen, "cannot start an event loop: %s", uv_strerror(rc));
    free(payload);
    return -1;
  }
  char err[512], fn[80];
  actvm *act = actvm_new(&loop, engine_lua_dir(), activity_modules, err, sizeof err);
  if (!act) {
    util_seterr(report, reportlen, "%s", err);
    uv_loop_close(&loop);
    free(payload);
    return -1;
  }
  if (st) tell_worker(act, st);
  snprintf(fn, sizeof fn, "worker.%s", name);
  standalone s = {0};
  act_info info = {"engine", 0, 1, fn, NULL, HOOK_TIMEOUT_MS, 0, 0, NULL, NULL, 0};
  int ok = 0;
  char *json = NULL;
  act_call *call = NULL;
  if (actvm_call(act, &info, payload, standalone_done, &s, &ok, &json, &call)) {
    s.done = 1;
    s.ok = ok;
    s.json = json;
  }
  while (!s.done && uv_run(&loop, UV_RUN_ONCE)) {
  }
  actvm_free(act);
  uvloop_drain(&loop);
  util_seterr(report, reportlen, "%s", s.json ? s.json : "no result");
  free(s.json);
  free(payload);
  return s.ok ? 0 : -1;
}
