#include "wfvm.h"

#include <lauxlib.h>
#include <lualib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fatal.h"
#include "json.h"
#include "util.h"

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
};

/* ---------------------------------------------------------------- memory --- */

/* Counting allocator: refuses growth past the limit, which raises LUA_ERRMEM in
 * the script; the hook then stops the run so pcall cannot swallow it. */
static void *vm_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  wfvm *vm = ud;
  size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    free(ptr);
    vm->mem_used -= old;
    return NULL;
  }
  /* the engine's own work after a stop gets a small reserve above the limit */
  size_t limit = vm->limit_on ? vm->cfg.mem_limit : vm->cfg.mem_limit + WFVM_MEM_RESERVE;
  if (nsize > old && vm->co && vm->mem_used + (nsize - old) > limit) {
    if (!vm->limit_on) return NULL;
    if (!vm->kill_reason)
      vm->kill_reason = util_fmt("memory limit exceeded (%zu MiB; set ENGINE_WF_MEMORY_MB)", vm->cfg.mem_limit >> 20);
    if (vm->current) lua_sethook(vm->current, lua_gethook(vm->current), LUA_MASKCOUNT, 1);
    return NULL;
  }
  /* Lua's allocator: NULL is how Lua learns it is out of memory (a script's
   * LUA_ERRMEM), so plain realloc, never the aborting util_xrealloc */
  void *np = realloc(ptr, nsize);
  if (np) vm->mem_used = vm->mem_used - old + nsize;
  return np;
}

static wfvm *get_vm(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, REG_VM);
  wfvm *vm = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return vm;
}

/* Instruction budget: a count hook that, once over budget (or out of memory),
 * yields the coroutine out from under any pcall. */
static void count_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  wfvm *vm = get_vm(L);
  vm->instr += HOOK_EVERY;
  if (!vm->kill_reason && vm->instr > vm->cfg.instr_limit)
    vm->kill_reason = util_fmt("instruction budget exceeded (%lld instructions; set ENGINE_WF_INSTRUCTIONS)",
                               (long long)vm->cfg.instr_limit);
  if (!vm->kill_reason) return;
  if (L == vm->current && lua_isyieldable(L)) {
    vm->engine_yield = 1;
    lua_yield(L, 0); /* in a hook this returns; the coroutine yields when we return */
    return;
  }
  luaL_error(L, "%s", vm->kill_reason);
}

/* The budget is per wake-up: it starts again at each outcome the run takes,
 * live (delivered) and on replay (read from the log) alike. Each resume of a
 * thread re-sets its hook, which restarts the countdown, so a wake-up counts
 * the same instructions live and on replay. A replay stays bounded: at most
 * one budget per recorded outcome, plus one. */
static void budget_restart(wfvm *vm) { vm->instr = 0; }

/* ------------------------------------------------------------ determinism --- */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Where in the script the current primitive was called from. */
static void script_where(lua_State *L, char *out, size_t n) {
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.currentline > 0) {
      snprintf(out, n, "%s:%d", ar.short_src, ar.currentline);
      return;
    }
  }
  snprintf(out, n, "?");
}

/* Identifies a command's arguments in the log: FNV-1a 64 over kind, name and
 * the canonical argument JSON. Only compared for equality on replay. */
static void command_hash(const char *kind, const char *name, const char *args, char out[17]) {
  uint64_t h = 1469598103934665603ull;
  const char *parts[3] = {kind, name, args};
  for (int i = 0; i < 3; i++) {
    for (const unsigned char *p = (const unsigned char *)parts[i]; *p; p++) h = (h ^ *p) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull; /* separator */
  }
  static const char hex[] = "0123456789abcdef";
  for (int i = 15; i >= 0; i--, h >>= 4) out[i] = hex[h & 15];
  out[16] = 0;
}

/* Stops the run as stuck: yields (so pcall cannot catch it) and never resumes. */
static int go_stuck(lua_State *L, wfvm *vm, const char *msg) {
  if (!vm->stuck_msg) vm->stuck_msg = util_strdup(msg);
  if (L == vm->current && lua_isyieldable(L)) {
    vm->engine_yield = 1;
    return lua_yield(L, 0);
  }
  return luaL_error(L, "%s", msg);
}

static int is_marker(const hist_event *e) { return strcmp(e->type, "PatchMarker") == 0; }

/* The next history event a command must match, or NULL when live. Patch markers
 * that the script no longer asks about are skipped (a removed patched() call). */
static const hist_event *peek(wfvm *vm) {
  while (vm->cursor < vm->hist.n && is_marker(&vm->hist.v[vm->cursor])) vm->cursor++;
  return vm->cursor < vm->hist.n ? &vm->hist.v[vm->cursor] : NULL;
}

/* Matches a command against history. Returns the matched event (consumed), or
 * NULL when the run is live. On mismatch the run goes stuck (does not return). */
static const hist_event *expect(lua_State *L, wfvm *vm, const char *type, const char *name, const char *hash) {
  const hist_event *e = peek(vm);
  if (!e) return NULL;
  if (strcmp(e->type, type) != 0 || strcmp(e->name ? e->name : "", name) != 0 ||
      strcmp(e->hash ? e->hash : "", hash) != 0) {
    char where[256], msg[1024];
    script_where(L, where, sizeof where);
    snprintf(msg, sizeof msg,
             "non-determinism at event #%lld: history has %s '%s' (args %s) but the script issued %s '%s' "
             "(args %s) at %s",
             (long long)e->seq, e->type, e->name ? e->name : "", e->hash ? e->hash : "-", type, name, hash, where);
    go_stuck(L, vm, msg);
    return NULL;
  }
  vm->cursor++;
  vm->now_ms = e->time;
  vm->last_seq = e->seq;
  return e;
}

static int live(wfvm *vm) { return peek(vm) == NULL; }

/* Appends a command event in a live run; in check-only mode stops the run. */
static int64_t append(lua_State *L, wfvm *vm, const char *type, int64_t ref, const char *name, const char *hash,
                      const char *payload) {
  if (vm->cfg.check_only) {
    vm->check_end = 1;
    vm->engine_yield = 1;
    lua_yield(L, 0);
    return -1; /* not reached */
  }
  int64_t time = 0;
  int64_t seq = vm->host.append(vm->host.ud, type, ref, name, hash, payload, &time);
  if (seq < 0) luaL_error(L, "engine: cannot append %s to the history", type);
  vm->now_ms = time; /* the time replay will see: the one in the log */
  vm->last_seq = seq;
  return seq;
}

static void check_primitive(lua_State *L, wfvm *vm, const char *what) {
  if (L != vm->current)
    luaL_error(L, "wf.%s must be called from the workflow itself or a wf.spawn coroutine, not from a coroutine "
               "the script created", what);
  if (vm->in_checkpoint) luaL_error(L, "wf.%s cannot be called inside a checkpoint function", what);
}

/* Blocking primitives yield: refuse before anything is appended when the
 * caller cannot yield (a table.sort comparator, a gsub callback, a metamethod). */
static void check_blocking(lua_State *L, wfvm *vm, const char *what) {
  check_primitive(L, vm, what);
  if (!lua_isyieldable(L))
    luaL_error(L, "wf.%s cannot be called here: it waits, and this caller (a C function such as table.sort or "
               "string.gsub) cannot wait", what);
}

/* ------------------------------------------------------------- outcomes --- */

/* Raises {type=, message=} as a workflow error (pcall-able, with __tostring). */
static int raise_error(lua_State *L, const char *type, const char *message) {
  lua_newtable(L);
  lua_pushstring(L, type);
  lua_setfield(L, -2, "type");
  lua_pushstring(L, message);
  lua_setfield(L, -2, "message");
  luaL_setmetatable(L, ERROR_MT);
  return lua_error(L);
}

static int error_tostring(lua_State *L) {
  lua_getfield(L, 1, "type");
  lua_getfield(L, 1, "message");
  lua_pushfstring(L, "%s: %s", luaL_optstring(L, -2, "Error"), luaL_optstring(L, -1, ""));
  return 1;
}

static void decode_or_nil(lua_State *L, const char *payload) {
  if (payload && *payload)
    json_decode(L, payload, strlen(payload));
  else
    lua_pushnil(L);
}

/* Turns the outcome event of a command into return values or an error. */
static int push_outcome(lua_State *L, const hist_event *e) {
  const char *t = e->type;
  if (strcmp(t, "ActivityCompleted") == 0 || strcmp(t, "SignalReceived") == 0 || strcmp(t, "SlotGranted") == 0 ||
      strcmp(t, "SlotReleased") == 0 || strcmp(t, "CounterUpdated") == 0 || strcmp(t, "RateGranted") == 0 ||
      strcmp(t, "RateCharged") == 0) {
    decode_or_nil(L, e->payload);
    return 1;
  }
  if (strcmp(t, "TimerFired") == 0) return 0;
  if (strcmp(t, "SignalTimedOut") == 0) {
    lua_pushnil(L);
    lua_pushliteral(L, "timeout");
    return 2;
  }
  if (strcmp(t, "SlotDropped") == 0) {
    lua_pushnil(L);
    lua_pushliteral(L, "dropped");
    return 2;
  }
  if (strcmp(t, "CommandCancelled") == 0) return raise_error(L, "Cancelled", "the workflow was cancelled");
  if (strcmp(t, "ActivityFailed") == 0) {
    decode_or_nil(L, e->payload);
    if (!lua_istable(L, -1)) return raise_error(L, "ActivityError", "activity failed");
    luaL_setmetatable(L, ERROR_MT);
    return lua_error(L);
  }
  return luaL_error(L, "engine: unexpected outcome event %s at #%lld", t, (long long)e->seq);
}

static int outcome_is_error(const char *t) {
  return strcmp(t, "CommandCancelled") == 0 || strcmp(t, "ActivityFailed") == 0;
}

static void free_cmd(wfvm_cmd *c) {
  free(c->name);
  free(c->payload);
  memset(c, 0, sizeof *c);
}

static pending *find_pending(const wfvm *vm, int64_t seq) {
  for (size_t i = 0; i < vm->npend; i++)
    if (vm->pend[i].cmd.seq == seq) return &vm->pend[i];
  return NULL;
}

/* ------------------------------------------------------------- futures --- */

static void add_thread(wfvm *vm, lua_State *co, int ref, int fut_ref, int nargs);

static future *check_future(lua_State *L, int idx) { return luaL_checkudata(L, idx, FUTURE_MT); }

/* A new unsettled future on top of L; its user value (what settled it) is
 * made when it settles. */
static future *new_future(lua_State *L, int64_t seq) {
  future *f = lua_newuserdatauv(L, sizeof *f, 1);
  f->seq = seq;
  f->settled = 0;
  f->order = 0;
  luaL_setmetatable(L, FUTURE_MT);
  return f;
}

/* Marks the future at idx settled; the table on top of L (popped) is what
 * settled it: {t=type, p=payload, s=seq, time=} for a command, {v=values}
 * or {e=error} for wf.spawn. */
static void settle(wfvm *vm, lua_State *L, int idx) {
  future *f = lua_touserdata(L, idx);
  lua_setiuservalue(L, idx, 1);
  f->settled = 1;
  f->order = ++vm->settles;
}

/* The outcome event of a pending command (live: delivered; replay: read from
 * the log) settles its future; the run's clock is now the event's. */
static void take_outcome(wfvm *vm, const hist_event *e) {
  pending *p = find_pending(vm, e->ref);
  if (!p) return;
  lua_State *L = vm->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, p->fut_ref);
  int f = lua_gettop(L);
  lua_createtable(L, 0, 4);
  lua_pushstring(L, e->type);
  lua_setfield(L, -2, "t");
  lua_pushstring(L, e->payload ? e->payload : "");
  lua_setfield(L, -2, "p");
  lua_pushinteger(L, e->seq);
  lua_setfield(L, -2, "s");
  lua_pushinteger(L, e->time);
  lua_setfield(L, -2, "time");
  settle(vm, L, f);
  lua_pop(L, 1);
  luaL_unref(L, LUA_REGISTRYINDEX, p->fut_ref);
  free_cmd(&p->cmd);
  size_t i = (size_t)(p - vm->pend);
  memmove(vm->pend + i, vm->pend + i + 1, (vm->npend - i - 1) * sizeof *vm->pend);
  vm->npend--;
  vm->now_ms = e->time;
  vm->last_seq = e->seq;
  budget_restart(vm);
}

/* The settled future at idx as the values its command returns (or raises). */
static int push_result(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_getiuservalue(L, idx, 1);
  int t = lua_gettop(L);
  if (lua_getfield(L, t, "e") != LUA_TNIL) return lua_error(L); /* wf.spawn raised */
  lua_pop(L, 1);
  if (lua_getfield(L, t, "v") == LUA_TTABLE) { /* wf.spawn returned */
    int v = lua_gettop(L);
    lua_getfield(L, v, "n");
    int n = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    luaL_checkstack(L, n, "too many results");
    for (int i = 1; i <= n; i++) lua_rawgeti(L, v, i);
    lua_rotate(L, t, n);
    lua_settop(L, t + n - 1);
    return n;
  }
  lua_pop(L, 1);
  lua_getfield(L, t, "t");
  lua_getfield(L, t, "p");
  lua_getfield(L, t, "s");
  lua_getfield(L, t, "time");
  hist_event e = {lua_tointeger(L, -2), lua_tostring(L, -4), 0, NULL, NULL, lua_tostring(L, -3), lua_tointeger(L, -1)};
  int n = push_outcome(L, &e); /* the strings it reads stay on the stack meanwhile */
  lua_rotate(L, t, n);         /* the results below the user value and its four fields */
  lua_settop(L, t + n - 1);
  return n;
}

static int future_is_error(lua_State *L, int idx) {
  lua_getiuservalue(L, idx, 1);
  int err = lua_getfield(L, -1, "e") != LUA_TNIL;
  lua_pop(L, 1);
  if (!err) {
    if (lua_getfield(L, -1, "t") == LUA_TSTRING) err = outcome_is_error(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return err;
}

/* Whether what a thread waits on (at idx: a future or a table of them) has
 * settled; for WAIT_ANY, *which gets the index of the first settled. */
static int wait_done(lua_State *L, int idx, int mode, lua_Integer *which) {
  if (mode == WAIT_ONE) return ((future *)lua_touserdata(L, idx))->settled;
  lua_Integer n = (lua_Integer)lua_rawlen(L, idx), best = 0;
  int64_t order = INT64_MAX;
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, i);
    future *f = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (mode == WAIT_ALL && !f->settled) return 0;
    if (mode == WAIT_ANY && f->settled && f->order < order) {
      order = f->order;
      best = i;
    }
  }
  if (which) *which = best;
  return mode == WAIT_ALL || best > 0;
}

/* What a finished wait returns: the future's values; for wf.all a table of
 * each first value in order (the first error, in order, raised instead); for
 * wf.any the index of the first settled and its values. */
static int wait_results(lua_State *L, int idx, int mode) {
  idx = lua_absindex(L, idx);
  if (mode == WAIT_ONE) return push_result(L, idx);
  lua_Integer which = 0;
  wait_done(L, idx, mode, &which);
  if (mode == WAIT_ANY) {
    lua_pushinteger(L, which);
    lua_rawgeti(L, idx, which);
    int n = push_result(L, -1);
    lua_remove(L, -n - 1);
    return n + 1;
  }
  lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, i);
    if (future_is_error(L, -1)) return push_result(L, -1);
    lua_pop(L, 1);
  }
  lua_createtable(L, (int)n, 0);
  int out = lua_gettop(L);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, idx, i);
    int got = push_result(L, -1);
    if (got == 0) lua_pushnil(L);
    else if (got > 1) lua_pop(L, got - 1);
    lua_rawseti(L, out, i);
    lua_pop(L, 1);
  }
  return 1;
}

static vthread *current_thread(wfvm *vm) {
  for (size_t i = 0; i < vm->nthreads; i++)
    if (vm->threads[i].L == vm->current) return &vm->threads[i];
  return NULL;
}

static int wait_k(lua_State *L, int status, lua_KContext mode) {
  (void)status;
  return wait_results(L, lua_gettop(L), (int)mode);
}

/* Waits until what is at idx (a future, or a table of them for wf.all and
 * wf.any) has settled: at once when it has, else the thread yields to the
 * scheduler, which resumes it when an outcome settles it. */
static int wait_on(lua_State *L, wfvm *vm, int idx, int mode, const char *what) {
  idx = lua_absindex(L, idx);
  if (wait_done(L, idx, mode, NULL)) return wait_results(L, idx, mode);
  check_blocking(L, vm, what);
  vthread *t = current_thread(vm);
  lua_pushvalue(L, idx);
  t->wait_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  t->wait_mode = mode;
  t->checked = vm->settles;
  lua_settop(L, idx);
  vm->engine_yield = 1;
  return lua_yieldk(L, 0, (lua_KContext)mode, wait_k);
}

/* Issues a command and pushes its future: on replay the command must match
 * the next event of the log, live it is appended. Either way it is pending
 * until its outcome settles the future. */
static void issue(lua_State *L, wfvm *vm, const char *kind, const char *type, const char *name, const char *args_json,
                  const char *payload_live) {
  char hash[17];
  command_hash(kind, name, args_json, hash);
  future *f = new_future(L, 0); /* before anything is recorded: it may run out of memory */
  if (vm->npend == vm->cappend) {
    size_t cap = vm->cappend ? vm->cappend * 2 : 8;
    pending *np = realloc(vm->pend, cap * sizeof *np);
    if (!np) luaL_error(L, "not enough memory");
    vm->pend = np;
    vm->cappend = cap;
  }
  pending p = {0};
  const hist_event *e = expect(L, vm, type, name, hash);
  if (e) {
    p.cmd.seq = e->seq;
    p.cmd.payload = util_strdup(e->payload);
    p.cmd.time = e->time;
  } else {
    p.cmd.seq = append(L, vm, type, 0, name, hash, payload_live);
    p.cmd.payload = util_strdup(payload_live);
    p.cmd.is_new = 1;
    p.cmd.time = vm->now_ms;
  }
  snprintf(p.cmd.kind, sizeof p.cmd.kind, "%s", kind);
  vm->issued_slot |= strcmp(kind, "slot") == 0;
  p.cmd.name = util_strdup(name);
  f->seq = p.cmd.seq;
  lua_pushvalue(L, -1);
  p.fut_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  vm->pend[vm->npend++] = p;
}

/* A blocking command: issued, then waited on. */
static int block_on(lua_State *L, wfvm *vm, const char *kind, const char *type, const char *name,
                    const char *args_json, const char *payload_live) {
  issue(L, vm, kind, type, name, args_json, payload_live);
  return wait_on(L, vm, -1, WAIT_ONE, kind);
}

/* A command that waits (wait) or returns its future. */
static int command(lua_State *L, wfvm *vm, int wait, const char *kind, const char *type, const char *name,
                   const char *args_json, const char *payload_live) {
  if (wait) return block_on(L, vm, kind, type, name, args_json, payload_live);
  issue(L, vm, kind, type, name, args_json, payload_live);
  return 1;
}

/* ----------------------------------------------------------- primitives --- */

/* Arguments are checked before anything is recorded. A name is a C string in
 * the log, so one with a NUL byte would be cut there: it is refused. */
static const char *check_name(lua_State *L, int arg, const char *what) {
  size_t n;
  const char *s = luaL_checklstring(L, arg, &n);
  if (strlen(s) != n) {
    char msg[128];
    snprintf(msg, sizeof msg, "wf.%s: the name contains a NUL byte at byte %zu", what, strlen(s) + 1);
    raise_error(L, "InvalidArgument", msg);
  }
  size_t fn;
  char *fixed = util_utf8_repair(s, n, &fn);
  if (fixed) { /* the log's text is UTF-8 (PostgreSQL holds nothing else): U+FFFD, live and on replay alike */
    lua_pushlstring(L, fixed, fn);
    free(fixed);
    lua_replace(L, arg);
    s = lua_tostring(L, arg);
  }
  return s;
}

/* Durations: inf, NaN, negative or past 100 years would be an undefined
 * conversion to milliseconds and "inf" in the log; they are refused. */
static void check_seconds(lua_State *L, lua_Number v, const char *type, const char *what) {
  char msg[200];
  if (util_check_seconds(v, what, msg, sizeof msg) != 0) raise_error(L, type, msg);
}

/* A value the log would hold: at most the payload limit (json.h). Checked on
 * the live path where a replay reads the recorded value instead, so a changed
 * limit does not change those replays. */
static void check_size(lua_State *L, size_t len, const char *what) {
  char msg[200];
  if (json_check_size(len, what, msg, sizeof msg) != 0) raise_error(L, "PayloadTooLarge", msg);
}

/* The activity options JSON cannot hold (inf, NaN), and durations out of
 * range, as the InvalidOptions the activity VM gives for the rest; checked
 * in a fixed order, so the message is the same in a run and its replay. */
static void check_activity_options(lua_State *L, int t) {
  static const char *const top[] = {"start_to_close", "schedule_to_close", "heartbeat", NULL};
  static const char *const retry[] = {"initial_interval", "max_interval", NULL};
  char what[64];
  for (const char *const *k = top; *k; k++) {
    lua_pushstring(L, *k);
    if (lua_rawget(L, t) == LUA_TNUMBER) {
      snprintf(what, sizeof what, "activity option '%s'", *k);
      check_seconds(L, lua_tonumber(L, -1), "InvalidOptions", what);
    }
    lua_pop(L, 1);
  }
  lua_pushliteral(L, "local");
  int lt = lua_rawget(L, t);
  lua_pop(L, 1);
  if (lt != LUA_TNIL && lt != LUA_TBOOLEAN) raise_error(L, "InvalidOptions", "activity option 'local' must be a boolean");
  lua_pushliteral(L, "retry");
  if (lua_rawget(L, t) == LUA_TTABLE) {
    int r = lua_gettop(L);
    for (const char *const *k = retry; *k; k++) {
      lua_pushstring(L, *k);
      if (lua_rawget(L, r) == LUA_TNUMBER) {
        snprintf(what, sizeof what, "activity option 'retry.%s'", *k);
        check_seconds(L, lua_tonumber(L, -1), "InvalidOptions", what);
      }
      lua_pop(L, 1);
    }
    static const char *const counts[] = {"backoff", "max_attempts", NULL};
    for (const char *const *k = counts; *k; k++) {
      lua_pushstring(L, *k);
      lua_Number v = lua_rawget(L, r) == LUA_TNUMBER ? lua_tonumber(L, -1) : 0;
      lua_pop(L, 1);
      if (v - v != 0) { /* inf or NaN: only they are not 0 when subtracted from themselves */
        snprintf(what, sizeof what, "activity option 'retry.%s' must be a finite number", *k);
        raise_error(L, "InvalidOptions", what);
      }
    }
  }
  lua_pop(L, 1);
}

/* wf.activity(name, args, options) -> result | error{type,message} */
/* wf.activity (wait) and wf.start_activity (a future): the same command. */
static int activity_command(lua_State *L, int wait) {
  wfvm *vm = get_vm(L);
  const char *what = wait ? "activity" : "start_activity";
  const char *name = check_name(L, 1, what);
  if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
  if (!lua_isnoneornil(L, 3)) check_activity_options(L, 3);
  if (wait) check_blocking(L, vm, what);
  else check_primitive(L, vm, what);
  lua_settop(L, 3);
  if (lua_isnoneornil(L, 2)) {
    lua_newtable(L);
    lua_replace(L, 2);
  }
  size_t alen, olen = 0;
  const char *args = json_encode(L, 2, &alen); /* 4: args json */
  const char *opts = lua_isnoneornil(L, 3) ? NULL : json_encode(L, 3, &olen);
  /* payload {"args":...,"options":...}: canonical key order, built without re-encoding */
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "{\"args\":");
  luaL_addlstring(&b, args, alen);
  if (opts) {
    luaL_addstring(&b, ",\"options\":");
    luaL_addlstring(&b, opts, olen);
  }
  luaL_addchar(&b, '}');
  luaL_pushresult(&b);
  if (live(vm)) check_size(L, alen, "the JSON of the activity's arguments"); /* a replay reads what was recorded */
  const char *payload = lua_tostring(L, -1);
  return command(L, vm, wait, "activity", "ActivityScheduled", name, args, payload);
}

static int l_activity(lua_State *L) { return activity_command(L, 1); }
static int l_start_activity(lua_State *L) { return activity_command(L, 0); }

/* Shortest decimal form of a number that reads back the same. */
static void fmt_num(char *out, size_t n, lua_Number v) {
  snprintf(out, n, "%.15g", (double)v);
  if (strtod(out, NULL) != (double)v) snprintf(out, n, "%.17g", (double)v);
}

/* Rounded up: a timer computed from a deadline (deadline - wf.now()) must
 * not fire the millisecond before it, where the script would still see time left. */
static int64_t seconds_to_ms(lua_Number secs) { return (int64_t)ceil(secs * 1000.0); }

/* wf.sleep(seconds): a durable timer; wf.start_timer(seconds) its future. */
static int timer_command(lua_State *L, int wait) {
  wfvm *vm = get_vm(L);
  lua_Number secs = luaL_checknumber(L, 1);
  check_seconds(L, secs, "InvalidArgument", wait ? "wf.sleep: seconds" : "wf.start_timer: seconds");
  if (wait) check_blocking(L, vm, "sleep");
  else check_primitive(L, vm, "start_timer");
  char args[64], payload[128];
  fmt_num(args, sizeof args, secs);
  int64_t fire_at = util_now_ms() + seconds_to_ms(secs);
  snprintf(payload, sizeof payload, "{\"fire_at\":%lld,\"seconds\":%s}", (long long)fire_at, args);
  return command(L, vm, wait, "timer", "TimerStarted", "sleep", args, payload);
}

static int l_sleep(lua_State *L) { return timer_command(L, 1); }
static int l_start_timer(lua_State *L) { return timer_command(L, 0); }

/* wf.wait_signal(name, {timeout=seconds}) -> payload | nil, "timeout";
 * wf.start_wait_signal(name, opts) its future. */
static int signal_command(lua_State *L, int wait) {
  wfvm *vm = get_vm(L);
  const char *name = check_name(L, 1, wait ? "wait_signal" : "start_wait_signal");
  lua_Number timeout = -1;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    if (lua_getfield(L, 2, "timeout") != LUA_TNIL) {
      timeout = luaL_checknumber(L, -1);
      check_seconds(L, timeout, "InvalidArgument", wait ? "wf.wait_signal: timeout" : "wf.start_wait_signal: timeout");
    }
    lua_pop(L, 1);
  }
  if (wait) check_blocking(L, vm, "wait_signal");
  else check_primitive(L, vm, "start_wait_signal");
  char args[64], payload[160];
  fmt_num(args, sizeof args, timeout);
  if (timeout >= 0)
    snprintf(payload, sizeof payload, "{\"deadline\":%lld,\"timeout\":%s}",
             (long long)(util_now_ms() + seconds_to_ms(timeout)), args);
  else
    snprintf(payload, sizeof payload, "{}");
  return command(L, vm, wait, "signal", "SignalWaitStarted", name, args, payload);
}

static int l_wait_signal(lua_State *L) { return signal_command(L, 1); }
static int l_start_wait_signal(lua_State *L) { return signal_command(L, 0); }

/* ------------------------------------------------- limits: slots, rates --- */

/* Optional string field k of the options table at t (0..max bytes, no NUL);
 * the table keeps the string alive. */
static const char *opt_string(lua_State *L, int t, const char *k, const char *dflt, size_t max, const char *what) {
  if (lua_isnoneornil(L, t)) return dflt;
  int type = lua_getfield(L, t, k);
  size_t n = 0;
  const char *v = type == LUA_TNIL ? dflt : type == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
  lua_pop(L, 1);
  char msg[160];
  if (!v) snprintf(msg, sizeof msg, "%s: '%s' must be a string", what, k);
  else if (type != LUA_TNIL && (n > max || strlen(v) != n))
    snprintf(msg, sizeof msg, "%s: '%s' must be at most %zu bytes, without NUL", what, k, max);
  else return v;
  raise_error(L, "InvalidArgument", msg);
  return NULL;
}

/* Optional number field k of the options table at t, within [lo, hi]
 * (integer when integral is set). */
static lua_Number opt_number(lua_State *L, int t, const char *k, lua_Number dflt, lua_Number lo, lua_Number hi,
                             int integral, const char *what) {
  lua_Number v = dflt;
  if (lua_isnoneornil(L, t)) return v;
  if (lua_getfield(L, t, k) == LUA_TNIL) {
    lua_pop(L, 1); /* an absent field leaves the stack as it was: callers push right after */
    return v;
  }
  int isnum = lua_type(L, -1) == LUA_TNUMBER;
  v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  if (!isnum || !(v >= lo && v <= hi) || (integral && v != (lua_Number)(int64_t)v)) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s: '%s' must be %s from %.15g to %.15g", what, k,
             integral ? "a whole number" : "a number", (double)lo, (double)hi);
    raise_error(L, "InvalidArgument", msg);
  }
  return v;
}

/* Blocks on a limits command whose arguments are the table on top of the
 * stack (encoded in canonical key order: the same bytes live and on replay). */
static int block_on_table(lua_State *L, wfvm *vm, const char *kind, const char *type, const char *name) {
  size_t len;
  const char *args = json_encode(L, lua_gettop(L), &len);
  return block_on(L, vm, kind, type, name, args, args);
}

#define SLOT_KEY_MAX 256
#define LIMIT_MAX 1000000

/* wf.acquire(pool, {key=, limit=, strategy=}) -> true | nil, "dropped":
 * at most limit runs hold (pool, key) at once; the others wait in line
 * (queue), or the newest cancels the others (cancel_in_progress), or a
 * start that finds it full is refused (drop). Held until wf.release or the
 * end of the run. */
static int l_acquire(lua_State *L) {
  wfvm *vm = get_vm(L);
  const char *pool = check_name(L, 1, "acquire");
  if (!*pool || strlen(pool) > 128) raise_error(L, "InvalidArgument", "wf.acquire: the pool name must be 1-128 bytes");
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  const char *key = opt_string(L, 2, "key", "", SLOT_KEY_MAX, "wf.acquire");
  lua_Number limit = opt_number(L, 2, "limit", 1, 1, LIMIT_MAX, 1, "wf.acquire");
  const char *strategy = opt_string(L, 2, "strategy", "queue", 32, "wf.acquire");
  if (strcmp(strategy, "queue") && strcmp(strategy, "cancel_in_progress") && strcmp(strategy, "drop"))
    raise_error(L, "InvalidArgument", "wf.acquire: 'strategy' must be queue, cancel_in_progress or drop");
  check_blocking(L, vm, "acquire");
  lua_createtable(L, 0, 4);
  lua_pushstring(L, key);
  lua_setfield(L, -2, "key");
  lua_pushinteger(L, (lua_Integer)limit);
  lua_setfield(L, -2, "limit");
  lua_pushstring(L, pool);
  lua_setfield(L, -2, "pool");
  lua_pushstring(L, strategy);
  lua_setfield(L, -2, "strategy");
  return block_on_table(L, vm, "slot", "SlotRequested", pool);
}

/* wf.release(pool, {key=}) -> true when this run held it */
static int l_release(lua_State *L) {
  wfvm *vm = get_vm(L);
  const char *pool = check_name(L, 1, "release");
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  const char *key = opt_string(L, 2, "key", "", SLOT_KEY_MAX, "wf.release");
  check_blocking(L, vm, "release");
  lua_createtable(L, 0, 2);
  lua_pushstring(L, key);
  lua_setfield(L, -2, "key");
  lua_pushstring(L, pool);
  lua_setfield(L, -2, "pool");
  return block_on_table(L, vm, "release", "SlotReleaseRequested", pool);
}

/* wf.counter(name, delta) -> the total after adding delta (0 reads it): a
 * total kept by the engine across runs and restarts (quotas). */
static int l_counter(lua_State *L) {
  wfvm *vm = get_vm(L);
  const char *name = check_name(L, 1, "counter");
  if (!*name || strlen(name) > 256) raise_error(L, "InvalidArgument", "wf.counter: the name must be 1-256 bytes");
  lua_Number delta = luaL_optnumber(L, 2, 0);
  if (!(delta >= -1e15 && delta <= 1e15)) raise_error(L, "InvalidArgument", "wf.counter: delta must be a finite number");
  check_blocking(L, vm, "counter");
  lua_createtable(L, 0, 1);
  lua_pushnumber(L, delta);
  if (delta == (lua_Number)(int64_t)delta) {
    lua_pop(L, 1);
    lua_pushinteger(L, (lua_Integer)delta);
  }
  lua_setfield(L, -2, "delta");
  return block_on_table(L, vm, "counter", "CounterRequested", name);
}

/* wf.rate(name, {limit=, per=, cost=}) -> seconds waited: waits until the
 * window of per seconds (shared by every run) has room for cost more of its
 * limit, and takes it. wf.rate(name, {per=, charge=, pause=}) adds charge to
 * the window without waiting (tokens known after a call) and, with pause,
 * lets nothing through for that many seconds (a provider's 429). */
static int l_rate(lua_State *L) {
  wfvm *vm = get_vm(L);
  const char *name = check_name(L, 1, "rate");
  if (!*name || strlen(name) > 256) raise_error(L, "InvalidArgument", "wf.rate: the name must be 1-256 bytes");
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_Number per = opt_number(L, 2, "per", 60, 0.001, 86400, 0, "wf.rate");
  lua_getfield(L, 2, "charge");
  int charging = !lua_isnil(L, -1);
  lua_pop(L, 1);
  check_blocking(L, vm, "rate");
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, (lua_Integer)ceil(per * 1000));
  lua_setfield(L, -2, "per_ms");
  if (charging) {
    lua_pushnumber(L, opt_number(L, 2, "charge", 0, 0, 1e15, 0, "wf.rate"));
    lua_setfield(L, -2, "charge");
    lua_pushinteger(L, (lua_Integer)ceil(opt_number(L, 2, "pause", 0, 0, 86400, 0, "wf.rate") * 1000));
    lua_setfield(L, -2, "pause_ms");
    return block_on_table(L, vm, "ratecharge", "RateChargeRequested", name);
  }
  lua_pushnumber(L, opt_number(L, 2, "limit", 1, 1, 1e15, 0, "wf.rate"));
  lua_setfield(L, -2, "limit");
  lua_pushnumber(L, opt_number(L, 2, "cost", 1, 0, 1e15, 0, "wf.rate"));
  lua_setfield(L, -2, "cost");
  return block_on_table(L, vm, "rate", "RateRequested", name);
}

static int checkpoint_k(lua_State *L, int status, lua_KContext replaying) {
  wfvm *vm = get_vm(L);
  vm->in_checkpoint--;
  if (status != LUA_OK && status != LUA_YIELD) return lua_error(L);
  /* stack: name fn result */
  char hash[17];
  command_hash("checkpoint", lua_tostring(L, 1), "", hash);
  size_t len;
  const char *value = json_encode(L, 3, &len);
  /* past the payload limit it raises, live and on replay alike: nothing was recorded */
  check_size(L, len, "the checkpoint's value");
  if (replaying) {
    /* it raised live (nothing was recorded) but returns a value now */
    expect(L, vm, "CheckpointRecorded", lua_tostring(L, 1), hash);
    return luaL_error(L, "engine: checkpoint replay diverged"); /* expect went stuck */
  }
  append(L, vm, "CheckpointRecorded", 0, lua_tostring(L, 1), hash, value);
  json_decode(L, value, len); /* return what replay would return */
  return 1;
}

/* wf.checkpoint(name, fn): runs fn once and records its value. */
static int l_checkpoint(lua_State *L) {
  wfvm *vm = get_vm(L);
  const char *name = check_name(L, 1, "checkpoint");
  luaL_checktype(L, 2, LUA_TFUNCTION);
  check_primitive(L, vm, "checkpoint");
  lua_settop(L, 2);
  char hash[17];
  command_hash("checkpoint", name, "", hash);
  const hist_event *next = peek(vm);
  if (next && strcmp(next->type, "CheckpointRecorded") == 0 && strcmp(next->name ? next->name : "", name) == 0 &&
      strcmp(next->hash ? next->hash : "", hash) == 0) {
    const hist_event *e = expect(L, vm, "CheckpointRecorded", name, hash);
    decode_or_nil(L, e->payload);
    return 1;
  }
  /* Live, the function runs and its value is recorded. Replaying with another
   * event next, it runs again: a function that raised live recorded nothing,
   * and raises the same way now; if it returns instead, the run diverged. */
  lua_KContext replaying = next != NULL;
  vm->in_checkpoint++;
  /* its draws come from a stream of its own: the run's stream must not move
   * live where replay does not run the function */
  uint64_t mix = vm->rng ^ ((uint64_t)vm->last_seq << 32) ^ 0x5DEECE66Dull;
  vm->ck_rng = splitmix(&mix);
  lua_pushvalue(L, 2);
  int st = lua_pcallk(L, 0, 1, 0, replaying, checkpoint_k);
  return checkpoint_k(L, st, replaying);
}

/* wf.emit(type, payload): one domain event, exactly once per run. */
static int l_emit(lua_State *L) {
  wfvm *vm = get_vm(L);
  const char *type = check_name(L, 1, "emit");
  check_primitive(L, vm, "emit");
  if (lua_isnoneornil(L, 2)) {
    lua_newtable(L);
    lua_replace(L, 2);
  }
  lua_settop(L, 2);
  size_t plen;
  const char *payload = json_encode(L, 2, &plen);
  if (live(vm)) check_size(L, plen, "the event's payload");
  char hash[17];
  command_hash("emit", type, payload, hash);
  if (expect(L, vm, "EventEmitted", type, hash)) return 0;
  if (vm->cfg.check_only) append(L, vm, "EventEmitted", 0, type, hash, NULL);
  int64_t dseq = vm->host.emit(vm->host.ud, type, payload);
  if (dseq < 0) return luaL_error(L, "engine: cannot record event %s", type);
  char ref[48];
  snprintf(ref, sizeof ref, "{\"seq\":%lld}", (long long)dseq);
  append(L, vm, "EventEmitted", 0, type, hash, ref);
  return 0;
}

/* wf.patched(id): true for runs that reach this point with the new code. */
static int l_patched(lua_State *L) {
  wfvm *vm = get_vm(L);
  const char *id = check_name(L, 1, "patched");
  check_primitive(L, vm, "patched");
  if (vm->cursor < vm->hist.n) {
    const hist_event *e = &vm->hist.v[vm->cursor];
    if (is_marker(e) && strcmp(e->name, id) == 0) {
      vm->cursor++;
      vm->now_ms = e->time;
      vm->last_seq = e->seq;
      lua_pushboolean(L, 1);
    } else {
      lua_pushboolean(L, 0); /* an old run that took the old branch here */
    }
    return 1;
  }
  append(L, vm, "PatchMarker", 0, id, "", NULL);
  lua_pushboolean(L, 1);
  return 1;
}

/* wf.continue_as_new(input): ends this run; a new run starts with input. */
static int l_continue_as_new(lua_State *L) {
  wfvm *vm = get_vm(L);
  check_blocking(L, vm, "continue_as_new");
  if (lua_isnoneornil(L, 1)) {
    lua_newtable(L);
    lua_replace(L, 1);
  }
  size_t ilen;
  const char *input = json_encode(L, 1, &ilen);
  if (live(vm)) check_size(L, ilen, "the next run's input");
  if (!live(vm)) {
    char where[256], msg[512];
    script_where(L, where, sizeof where);
    snprintf(msg, sizeof msg, "non-determinism at event #%lld: history has %s but the script called "
             "continue_as_new at %s", (long long)peek(vm)->seq, peek(vm)->type, where);
    return go_stuck(L, vm, msg);
  }
  vm->engine_yield = 1;
  if (vm->cfg.check_only) {
    vm->check_end = 1;
    return lua_yield(L, 0);
  }
  free(vm->output);
  vm->output = util_strdup(input);
  vm->cas = 1;
  return lua_yield(L, 0);
}

static int l_now(lua_State *L) {
  wfvm *vm = get_vm(L);
  lua_pushnumber(L, (lua_Number)vm->now_ms / 1000.0);
  return 1;
}

/* The stream a draw comes from: the run's own, except inside a checkpoint
 * function (which replay does not run). */
static uint64_t *draw_stream(wfvm *vm) { return vm->in_checkpoint ? &vm->ck_rng : &vm->rng; }

/* wf.random([m [, n]]): like math.random, from a seed recorded in the log. */
static int l_random(lua_State *L) {
  wfvm *vm = get_vm(L);
  uint64_t r = splitmix(draw_stream(vm));
  int n = lua_gettop(L);
  if (n == 0) {
    lua_pushnumber(L, (lua_Number)(r >> 11) * (1.0 / 9007199254740992.0));
    return 1;
  }
  lua_Integer lo = 1, hi;
  if (n == 1) {
    hi = luaL_checkinteger(L, 1);
  } else {
    lo = luaL_checkinteger(L, 1);
    hi = luaL_checkinteger(L, 2);
  }
  luaL_argcheck(L, lo <= hi, n, "interval is empty");
  uint64_t span = (uint64_t)hi - (uint64_t)lo + 1;
  lua_pushinteger(L, (lua_Integer)((uint64_t)lo + (span ? r % span : r)));
  return 1;
}

static int l_uuid(lua_State *L) {
  wfvm *vm = get_vm(L);
  uint64_t *g = draw_stream(vm);
  uint64_t a = splitmix(g), b = splitmix(g);
  a = (a & 0xFFFFFFFFFFFF0FFFull) | 0x4000ull;
  b = (b & 0x3FFFFFFFFFFFFFFFull) | 0x8000000000000000ull;
  char buf[40];
  snprintf(buf, sizeof buf, "%08llx-%04llx-%04llx-%04llx-%012llx", (unsigned long long)(a >> 32),
           (unsigned long long)((a >> 16) & 0xFFFF), (unsigned long long)(a & 0xFFFF),
           (unsigned long long)(b >> 48), (unsigned long long)(b & 0xFFFFFFFFFFFFull));
  lua_pushstring(L, buf);
  return 1;
}

static int l_info(lua_State *L) {
  wfvm *vm = get_vm(L);
  lua_newtable(L);
  lua_pushstring(L, vm->wf_id);
  lua_setfield(L, -2, "id");
  lua_pushinteger(L, vm->run);
  lua_setfield(L, -2, "run");
  lua_pushboolean(L, !live(vm));
  lua_setfield(L, -2, "replaying");
  lua_pushinteger(L, (lua_Integer)vm->last_seq); /* events up to here: the same live and on replay */
  lua_setfield(L, -2, "history_length");
  return 1;
}

static int l_is_replaying(lua_State *L) {
  lua_pushboolean(L, !live(get_vm(L)));
  return 1;
}

/* ---------------------------------------------------- futures, threads --- */

/* future:wait() -> what the command returns (or raises) once it settles */
static int l_future_wait(lua_State *L) {
  check_future(L, 1);
  lua_settop(L, 1);
  return wait_on(L, get_vm(L), 1, WAIT_ONE, "wait");
}

/* future:ready() -> true once it has settled (nothing waits) */
static int l_future_ready(lua_State *L) {
  lua_pushboolean(L, check_future(L, 1)->settled);
  return 1;
}

static int l_future_tostring(lua_State *L) {
  future *f = check_future(L, 1);
  if (f->seq) lua_pushfstring(L, "wf.future (command #%I, %s)", (lua_Integer)f->seq, f->settled ? "settled" : "pending");
  else lua_pushfstring(L, "wf.future (wf.spawn, %s)", f->settled ? "settled" : "pending");
  return 1;
}

/* The futures of the list at arg 1, as a new sequence on top: a table of
 * futures 1..n and nothing else (the order results come back in). */
static void check_futures(lua_State *L, const char *what) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 1);
  lua_createtable(L, (int)(n > 0 && n < 100000 ? n : 0), 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 1, i);
    if (!luaL_testudata(L, -1, FUTURE_MT))
      raise_error(L, "InvalidArgument", lua_pushfstring(L, "wf.%s: item %I is a %s, not a future (from wf.start_activity, "
                                                           "wf.start_timer, wf.start_wait_signal or wf.spawn)",
                                                        what, (lua_Integer)i, luaL_typename(L, -1)));
    lua_rawseti(L, -2, i);
  }
}

/* wf.all({f1, f2, ...}) -> {r1, r2, ...} (each first value; a nil leaves a
 * hole) once every one settled; the first error in list order is raised instead */
static int l_all(lua_State *L) {
  check_futures(L, "all");
  return wait_on(L, get_vm(L), -1, WAIT_ALL, "all");
}

/* wf.any({f1, f2, ...}) -> i, results of the first to settle */
static int l_any(lua_State *L) {
  check_futures(L, "any");
  if (lua_rawlen(L, -1) == 0) raise_error(L, "InvalidArgument", "wf.any: the list of futures is empty");
  return wait_on(L, get_vm(L), -1, WAIT_ANY, "any");
}

/* wf.spawn(fn, ...) -> future: fn(...) runs as a durable coroutine of the
 * workflow, from when the caller next waits; the future settles with what it
 * returns or raises. */
static int l_spawn(lua_State *L) {
  wfvm *vm = get_vm(L);
  luaL_checktype(L, 1, LUA_TFUNCTION);
  check_primitive(L, vm, "spawn");
  int n = lua_gettop(L);
  new_future(L, 0);
  lua_pushvalue(L, -1);
  int fut_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_State *co = lua_newthread(L);
  int ref = luaL_ref(L, LUA_REGISTRYINDEX);
  for (int i = 1; i <= n; i++) lua_pushvalue(L, i);
  lua_xmove(L, co, n); /* fn and its arguments */
  add_thread(vm, co, ref, fut_ref, n - 1);
  return 1;
}

static const luaL_Reg future_methods[] = {{"wait", l_future_wait}, {"ready", l_future_ready}, {NULL, NULL}};

static const luaL_Reg workflow_lib[] = {
    {"activity", l_activity},   {"sleep", l_sleep},
    {"wait_signal", l_wait_signal}, {"checkpoint", l_checkpoint},
    {"emit", l_emit},           {"patched", l_patched},
    {"continue_as_new", l_continue_as_new}, {"now", l_now},
    {"random", l_random},       {"uuid", l_uuid},
    {"info", l_info},           {"is_replaying", l_is_replaying},
    {"acquire", l_acquire},     {"release", l_release},
    {"counter", l_counter},     {"rate", l_rate},
    {"start_activity", l_start_activity}, {"start_timer", l_start_timer},
    {"start_wait_signal", l_start_wait_signal}, {"all", l_all},
    {"any", l_any},             {"spawn", l_spawn},
    {NULL, NULL}};

static int open_workflow(lua_State *L) {
  luaL_newlib(L, workflow_lib);
  return 1;
}

/* -------------------------------------------------------------- sandbox --- */

/* The text of the value at idx, pushed, without addresses: a table, function
 * or coroutine shows as its __name or its type ("table"), because addresses
 * differ between a run and its replay. __tostring is honoured. */
static const char *safe_tolstring(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (luaL_callmeta(L, idx, "__tostring")) {
    if (!lua_isstring(L, -1)) luaL_error(L, "'__tostring' must return a string");
    return lua_tostring(L, -1);
  }
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
    case LUA_TBOOLEAN:
    case LUA_TNUMBER:
    case LUA_TSTRING: return luaL_tolstring(L, idx, NULL);
    default: {
      int t = luaL_getmetafield(L, idx, "__name"); /* pushed unless nil */
      if (t == LUA_TSTRING) return lua_tostring(L, -1);
      if (t != LUA_TNIL) lua_pop(L, 1);
      lua_pushstring(L, luaL_typename(L, idx));
      return lua_tostring(L, -1);
    }
  }
}

static int l_tostring(lua_State *L) {
  luaL_checkany(L, 1);
  safe_tolstring(L, 1);
  return 1;
}

/* string.format without addresses: '%p' is refused, and '%s' of a table,
 * function or coroutine gives what tostring gives. The real format (upvalue 1)
 * does the rest, with its own checks of the format. */
static int l_format(lua_State *L) {
  size_t flen;
  const char *p = luaL_checklstring(L, 1, &flen), *end = p + flen;
  int top = lua_gettop(L), arg = 1;
  for (; p < end; p++) {
    if (*p != '%') continue;
    if (++p >= end || *p == '%') continue;
    arg++;
    while (p < end && *p && strchr("-+ #0", *p)) p++;
    while (p < end && *p >= '0' && *p <= '9') p++;
    if (p < end && *p == '.')
      for (p++; p < end && *p >= '0' && *p <= '9';) p++;
    if (p >= end) break;
    if (*p == 'p')
      return luaL_error(L, "string.format: '%%p' is not available to workflows (addresses differ between a run and "
                        "its replay)");
    int t = arg <= top ? lua_type(L, arg) : LUA_TNONE;
    if (*p == 's' && (t == LUA_TTABLE || t == LUA_TFUNCTION || t == LUA_TTHREAD || t == LUA_TUSERDATA ||
                      t == LUA_TLIGHTUSERDATA)) {
      safe_tolstring(L, arg);
      lua_replace(L, arg);
    }
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, top, 1);
  return 1;
}

/* print() in workflows: shown once, not again on replay. */
static int l_print(lua_State *L) {
  wfvm *vm = get_vm(L);
  if (!live(vm) || !vm->host.print) return 0;
  int n = lua_gettop(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 1; i <= n; i++) {
    if (i > 1) luaL_addchar(&b, '\t');
    safe_tolstring(L, i);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  vm->host.print(vm->host.ud, lua_tostring(L, -1));
  return 0;
}

static int valid_module_name(const char *s) {
  if (!*s || *s == '.') return 0;
  for (const char *p = s; *p; p++) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
          *p == '-' || *p == '.'))
      return 0;
    if (p[0] == '.' && p[1] == '.') return 0;
  }
  return 1;
}

/* require(name) inside the sandbox: built-ins, else the run's pinned code. */
static int l_require(lua_State *L) {
  wfvm *vm = get_vm(L);
  const char *name = luaL_checkstring(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, "engine.wf_loaded");
  if (lua_getfield(L, -1, name) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  if (!valid_module_name(name)) return luaL_error(L, "require: invalid module name '%s'", name);
  char err[512] = "";
  size_t len = 0;
  char *chunkname = NULL;
  char *src = vm->host.load_module(vm->host.ud, name, &len, &chunkname, err, sizeof err);
  if (!src) return luaL_error(L, "require '%s': %s", name, err);
  int rc = luaL_loadbufferx(L, src, len, chunkname, "t");
  free(src);
  free(chunkname);
  if (rc != LUA_OK) return lua_error(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, vm->env_ref);
  lua_setupvalue(L, -2, 1);
  lua_pushstring(L, name);
  lua_call(L, 1, 1);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_pushboolean(L, 1);
  }
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, name);
  return 1;
}

/* The collector runs when allocation decides, which differs between a run and
 * its replay: nothing of it is visible to workflows, memory use included. */
static int l_collectgarbage(lua_State *L) {
  const char *opt = luaL_optstring(L, 1, "collect");
  return luaL_error(L, "collectgarbage('%s') is not available to workflows (the collector runs at other moments "
                    "on replay)", opt);
}

/* setmetatable that refuses what acts when the collector runs: __gc (a
 * finalizer, which would also run on the engine's thread with no budget) and
 * __mode (a weak table loses entries at each collection). Lua marks an object
 * for finalization only when its metatable has __gc at setmetatable, so a
 * __gc added later is inert. */
static int l_setmetatable(lua_State *L) {
  int t = lua_type(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
  if (t == LUA_TTABLE) {
    lua_pushliteral(L, "__gc"); /* raw: a metatable's own fields are what Lua reads */
    if (lua_rawget(L, 2) != LUA_TNIL)
      return luaL_error(L, "setmetatable: __gc (a finalizer) is not available to workflows: it runs when the "
                        "collector decides, which differs between a run and its replay");
    lua_pushliteral(L, "__mode");
    if (lua_rawget(L, 2) != LUA_TNIL)
      return luaL_error(L, "setmetatable: __mode (a weak table) is not available to workflows: its entries go "
                        "when the collector decides, which differs between a run and its replay");
    lua_pop(L, 2);
  }
  if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL) return luaL_error(L, "cannot change a protected metatable");
  lua_settop(L, 2);
  lua_setmetatable(L, 1);
  return 1;
}

/* a < b for table.sort: the comparator at index 2, else Lua's < */
static int sort_less(lua_State *L, int a, int b) {
  a = lua_absindex(L, a);
  b = lua_absindex(L, b);
  if (lua_isnil(L, 2)) return lua_compare(L, a, b, LUA_OPLT);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, a);
  lua_pushvalue(L, b);
  lua_call(L, 2, 1);
  int r = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return r;
}

/* table.sort as a stable merge sort: equal elements keep their order, so the
 * result is the same in every run. (Lua's own quicksort picks its pivot from
 * clock() and time() when a partition is unbalanced: elements that compare
 * equal could come out in another order on replay.) */
static int l_sort(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 1);
  if (n < 2) return 0;
  luaL_argcheck(L, n < INT32_MAX, 1, "array too big");
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_settop(L, 2);
  lua_createtable(L, (int)n, 0); /* 3 and 4: the runs, merged back and forth */
  lua_createtable(L, (int)n, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, 1, i);
    lua_rawseti(L, 3, i);
  }
  int src = 3, dst = 4;
  for (lua_Integer width = 1; width < n; width *= 2) {
    for (lua_Integer lo = 1; lo <= n; lo += 2 * width) {
      lua_Integer mid = lo + width < n + 1 ? lo + width : n + 1, hi = lo + 2 * width < n + 1 ? lo + 2 * width : n + 1;
      lua_Integer i = lo, j = mid;
      for (lua_Integer k = lo; k < hi; k++) {
        int take_right = 0;
        if (i < mid && j < hi) {
          lua_rawgeti(L, src, i);
          lua_rawgeti(L, src, j);
          take_right = sort_less(L, -1, -2); /* only a strictly smaller right element goes first */
          lua_pop(L, 2);
        } else {
          take_right = i >= mid;
        }
        lua_rawgeti(L, src, take_right ? j++ : i++);
        lua_rawseti(L, dst, k);
      }
    }
    int t = src;
    src = dst;
    dst = t;
  }
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, src, i);
    lua_seti(L, 1, i);
  }
  return 0;
}

/* coroutine.yield in the workflow body itself is not a way to wait (the
 * engine's primitives are); in the script's own coroutines it is Lua's. */
static int l_co_yield(lua_State *L) {
  if (L == get_vm(L)->current)
    return luaL_error(L, "coroutine.yield outside a coroutine the workflow created: the workflow waits through "
                      "wf.activity, wf.sleep and wf.wait_signal");
  return lua_yield(L, lua_gettop(L));
}

static int l_co_isyieldable(lua_State *L) {
  lua_State *co = lua_isnone(L, 1) ? L : lua_tothread(L, 1);
  luaL_argexpected(L, co, 1, "thread");
  wfvm *vm = get_vm(L);
  int engines = 0;
  for (size_t i = 0; i < vm->nthreads; i++) engines |= vm->threads[i].L == co;
  lua_pushboolean(L, !engines && lua_isyieldable(co));
  return 1;
}

/* Deterministic pairs(): keys in a fixed order (numbers, then strings, then
 * booleans, then one key of another type), since Lua's hash order varies
 * between VMs (string hashes are seeded per state) and replay must take the
 * same path. Keys that are tables, functions or coroutines can only be
 * ordered by address: a table with two of them is refused. */
typedef struct pkey {
  int rank;
  int isint;
  lua_Integer i;
  lua_Number n;
  const char *s;
  size_t len;
  int b;
  lua_Integer idx; /* position in the raw key list */
} pkey;

static int cmp_pkey(const void *pa, const void *pb) {
  const pkey *a = pa, *b = pb;
  if (a->rank != b->rank) return a->rank - b->rank;
  switch (a->rank) {
    case 1:
      if (a->isint && b->isint) return (a->i > b->i) - (a->i < b->i);
      return (a->n > b->n) - (a->n < b->n);
    case 2: {
      size_t n = a->len < b->len ? a->len : b->len;
      int c = memcmp(a->s, b->s, n);
      return c ? c : (a->len > b->len) - (a->len < b->len);
    }
    case 3: return a->b - b->b;
    default: return (a->idx > b->idx) - (a->idx < b->idx);
  }
}

static int pairs_iter(lua_State *L) {
  lua_Integer i = lua_tointeger(L, lua_upvalueindex(2)) + 1;
  lua_pushinteger(L, i);
  lua_replace(L, lua_upvalueindex(2));
  if (lua_rawgeti(L, lua_upvalueindex(1), i) == LUA_TNIL) return 1;
  lua_pushvalue(L, -1);
  lua_rawget(L, 1);
  return 2;
}

static int l_pairs(lua_State *L) {
  if (luaL_getmetafield(L, 1, "__pairs") != LUA_TNIL) {
    lua_pushvalue(L, 1);
    lua_call(L, 1, 3);
    return 3;
  }
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_newtable(L); /* 2: raw keys in table order */
  lua_Integer n = 0;
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_rawseti(L, 2, ++n);
  }
  pkey *v = lua_newuserdatauv(L, n > 0 ? (size_t)n * sizeof(pkey) : 1, 0); /* 3 */
  int others = 0;
  for (lua_Integer j = 1; j <= n; j++) {
    pkey *k = &v[j - 1];
    memset(k, 0, sizeof *k);
    k->idx = j;
    int t = lua_rawgeti(L, 2, j);
    if (t == LUA_TNUMBER) {
      k->rank = 1;
      k->isint = lua_isinteger(L, -1);
      k->i = lua_tointeger(L, -1);
      k->n = lua_tonumber(L, -1);
    } else if (t == LUA_TSTRING) {
      k->rank = 2;
      k->s = lua_tolstring(L, -1, &k->len); /* anchored in the raw key list */
    } else if (t == LUA_TBOOLEAN) {
      k->rank = 3;
      k->b = lua_toboolean(L, -1);
    } else {
      k->rank = 4; /* ordered by address: one such key has a fixed place (last), two do not */
      others++;
    }
    lua_pop(L, 1);
  }
  if (others > 1)
    return luaL_error(L, "pairs: the table has %d keys that are tables, functions or coroutines; their order "
                      "differs between a run and its replay (use string or number keys)", others);
  qsort(v, (size_t)n, sizeof(pkey), cmp_pkey);
  lua_createtable(L, (int)n, 0); /* 4: sorted keys */
  for (lua_Integer j = 0; j < n; j++) {
    lua_rawgeti(L, 2, v[j].idx);
    lua_rawseti(L, 4, j + 1);
  }
  lua_pushinteger(L, 0);
  lua_pushcclosure(L, pairs_iter, 2);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

/* The coroutine body: runs the chunk, calls the function it returns. */
static const char *BOOT_LUA =
    "local chunk, input = ...\n"
    "local main = chunk()\n"
    "if type(main) ~= 'function' then\n"
    "  error({type = 'ScriptError', message = 'the workflow script must return a function(input), got ' .. type(main)})\n"
    "end\n"
    "return main(input)\n";

/* wfvm_check_main's body: the chunk alone, raising when it returns no function. */
static const char *LOAD_BOOT_LUA =
    "local chunk = ...\n"
    "local main = chunk()\n"
    "if type(main) ~= 'function' then\n"
    "  error({type = 'NotAFunction', message = 'must return a function(input), but it returns ' ..\n"
    "    (main == nil and 'nil' or 'a ' .. type(main))})\n"
    "end\n";

static const char *SAFE_GLOBALS[] = {"assert", "error",    "ipairs", "next",     "pcall",  "rawequal",
                                     "rawget", "rawlen",   "rawset", "select",   "getmetatable",
                                     "tonumber", "type", "xpcall", "_VERSION", NULL};
static const char *SAFE_LIBS[] = {"table", "string", "utf8", "coroutine", NULL};

static int build_sandbox(lua_State *L) {
  wfvm *vm = lua_touserdata(L, 1);
  lua_pushlightuserdata(L, vm);
  lua_setfield(L, LUA_REGISTRYINDEX, REG_VM);
  /* only the libraries the sandbox copies from (io, os, debug, package never exist) */
  static const luaL_Reg libs[] = {{"_G", luaopen_base},          {LUA_TABLIBNAME, luaopen_table},
                                  {LUA_STRLIBNAME, luaopen_string}, {LUA_MATHLIBNAME, luaopen_math},
                                  {LUA_UTF8LIBNAME, luaopen_utf8},  {LUA_COLIBNAME, luaopen_coroutine},
                                  {NULL, NULL}};
  for (const luaL_Reg *lib = libs; lib->func; lib++) {
    luaL_requiref(L, lib->name, lib->func, 1);
    lua_pop(L, 1);
  }
  /* ("").dump reaches the real string table through the string metatable */
  lua_getglobal(L, "string");
  lua_pushnil(L);
  lua_setfield(L, -2, "dump");
  /* the same goes for the functions replaced here, in the real tables: what
   * shows addresses, sorts by the clock, or yields past the engine */
  lua_getfield(L, -1, "format");
  lua_pushcclosure(L, l_format, 1);
  lua_setfield(L, -2, "format");
  lua_pop(L, 1);
  lua_getglobal(L, "table");
  lua_pushcfunction(L, l_sort);
  lua_setfield(L, -2, "sort");
  lua_pop(L, 1);
  lua_getglobal(L, "coroutine");
  lua_pushcfunction(L, l_co_yield);
  lua_setfield(L, -2, "yield");
  lua_pushcfunction(L, l_co_isyieldable);
  lua_setfield(L, -2, "isyieldable");
  lua_pop(L, 1);
  luaL_newmetatable(L, ERROR_MT);
  lua_pushcfunction(L, error_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  luaL_newmetatable(L, FUTURE_MT);
  luaL_newlib(L, future_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_future_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, "wf.future");
  lua_setfield(L, -2, "__metatable"); /* getmetatable cannot reach the methods */
  lua_pop(L, 1);

  lua_newtable(L); /* env */
  for (const char **g = SAFE_GLOBALS; *g; g++) {
    lua_getglobal(L, *g);
    lua_setfield(L, -2, *g);
  }
  /* Each workflow has a VM of its own, so the sandbox can hand out the real
   * library tables (what a script changes there, only it sees); the few
   * functions that break the sandbox or determinism are removed from them. */
  for (const char **g = SAFE_LIBS; *g; g++) {
    lua_getglobal(L, *g);
    lua_setfield(L, -2, *g);
  }
  lua_getglobal(L, "math");
  lua_pushnil(L);
  lua_setfield(L, -2, "random");
  lua_pushnil(L);
  lua_setfield(L, -2, "randomseed");
  lua_setfield(L, -2, "math");
  lua_pushcfunction(L, l_print);
  lua_setfield(L, -2, "print");
  lua_pushcfunction(L, l_require);
  lua_setfield(L, -2, "require");
  lua_pushcfunction(L, l_collectgarbage);
  lua_setfield(L, -2, "collectgarbage");
  lua_pushcfunction(L, l_pairs);
  lua_setfield(L, -2, "pairs");
  lua_pushcfunction(L, l_tostring);
  lua_setfield(L, -2, "tostring");
  lua_pushcfunction(L, l_setmetatable);
  lua_setfield(L, -2, "setmetatable");
  lua_pushvalue(L, -1);
  lua_setfield(L, -2, "_G");
  vm->env_ref = luaL_ref(L, LUA_REGISTRYINDEX);

  /* built-in modules */
  lua_newtable(L);
  open_workflow(L);
  lua_setfield(L, -2, "workflow");
  luaopen_engine_json(L);
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, "json");
  lua_setfield(L, -2, "cjson");
  lua_setfield(L, LUA_REGISTRYINDEX, "engine.wf_loaded");
  return 0;
}

/* ------------------------------------------------------------ lifecycle --- */

void wfvm_config_default(wfvm_config *c) {
  memset(c, 0, sizeof *c);
  const char *m = getenv("ENGINE_WF_MEMORY_MB");
  c->mem_limit = (size_t)(m && atoi(m) > 0 ? atoi(m) : 64) << 20;
  const char *i = getenv("ENGINE_WF_INSTRUCTIONS");
  c->instr_limit = i && atoll(i) > 0 ? atoll(i) : 200000000;
}

wfvm *wfvm_new(const wfvm_config *cfg, const wfvm_host *host, const char *wf_id, int64_t run, hist_list *history) {
  wfvm *vm = util_xcalloc(1, sizeof *vm);
  vm->cfg = *cfg;
  vm->host = *host;
  vm->wf_id = util_strdup(wf_id);
  vm->run = run;
  vm->hist = *history;
  memset(history, 0, sizeof *history);
  vm->co_ref = LUA_NOREF;
  vm->env_ref = LUA_NOREF;
  vm->L = lua_newstate(vm_alloc, vm);
  if (!vm->L) {
    wfvm_free(vm);
    return NULL;
  }
  /* unreachable while every entry is protected (enter); if it ever runs, it
   * names the workflow before Lua aborts the process */
  lua_atpanic(vm->L, fatal_lua_panic);
  lua_pushcfunction(vm->L, build_sandbox);
  lua_pushlightuserdata(vm->L, vm);
  if (lua_pcall(vm->L, 1, 0, 0) != LUA_OK) {
    wfvm_free(vm);
    return NULL;
  }
  return vm;
}

void wfvm_free(wfvm *vm) {
  if (!vm) return;
  vm->co = NULL;
  if (vm->L) lua_close(vm->L);
  for (size_t i = 0; i < vm->npend; i++) free_cmd(&vm->pend[i].cmd);
  free(vm->pend);
  free(vm->threads);
  hist_list_free(&vm->hist);
  free(vm->wf_id);
  free(vm->output);
  free(vm->kill_reason);
  free(vm->stuck_msg);
  free(vm);
}

static void set_output(wfvm *vm, char *s) {
  free(vm->output);
  vm->output = s;
}

/* Pushes field key of the table at t as a string, read raw (the value's
 * metatable is the script's code, and nothing of the script runs outside its
 * coroutine, where no budget applies), or dflt. */
static void push_raw_string(lua_State *L, int t, const char *key, const char *dflt) {
  lua_pushstring(L, key);
  if (lua_rawget(L, t) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER) {
    lua_pushstring(L, lua_tostring(L, -1));
    lua_remove(L, -2);
    return;
  }
  lua_pop(L, 1);
  lua_pushstring(L, dflt);
}

/* Builds the error JSON {type, message, stack} of a failed run from the error
 * value on top of co (a dead coroutine: nothing may run on it). */
static char *error_json(wfvm *vm, lua_State *co) {
  lua_State *L = vm->L;
  lua_xmove(co, L, 1);
  int v = lua_gettop(L);
  lua_newtable(L);
  int t = v + 1;
  if (lua_type(L, v) == LUA_TTABLE) {
    push_raw_string(L, v, "type", "Error");
    snprintf(vm->error_type, sizeof vm->error_type, "%s", lua_tostring(L, -1));
    lua_setfield(L, t, "type");
    push_raw_string(L, v, "message", "error table without a 'message' string (its metatable is not consulted)");
    lua_setfield(L, t, "message");
  } else {
    snprintf(vm->error_type, sizeof vm->error_type, "Error");
    lua_pushliteral(L, "Error");
    lua_setfield(L, t, "type");
    int ty = lua_type(L, v);
    lua_pushstring(L, ty == LUA_TSTRING || ty == LUA_TNUMBER ? lua_tostring(L, v) : luaL_typename(L, v));
    lua_setfield(L, t, "message");
  }
  luaL_traceback(L, co, NULL, 0);
  lua_setfield(L, t, "stack");
  char *out = util_strdup(json_encode(L, t, NULL));
  lua_settop(L, v - 1);
  return out;
}

/* {"message":...,"type":...} built in C: it works in a VM whose memory is full. */
static char *message_json(const char *type, const char *msg) {
  char *t = json_quote(type), *m = json_quote(msg ? msg : "");
  char *out = util_fmt("{\"message\":%s,\"type\":%s}", m, t);
  free(t);
  free(m);
  return out;
}

/* Adds a thread to the scheduler, ready to run with the nargs values on its stack. */
static void add_thread(wfvm *vm, lua_State *co, int ref, int fut_ref, int nargs) {
  if (vm->nthreads == vm->capthreads) {
    vm->capthreads = vm->capthreads ? vm->capthreads * 2 : 4;
    vm->threads = util_xrealloc(vm->threads, vm->capthreads * sizeof *vm->threads);
  }
  vthread t = {co, ref, fut_ref, 1, nargs, LUA_NOREF, WAIT_ONE, -1};
  vm->threads[vm->nthreads++] = t;
}

/* The body returned (its values on co): the result, unless the log has more. */
static wfvm_state body_returned(wfvm *vm, lua_State *co, int nres) {
  const hist_event *more = peek(vm);
  if (more && !vm->cfg.check_only) {
    char msg[512];
    snprintf(msg, sizeof msg, "non-determinism at event #%lld: history has %s '%s' but the script returned",
             (long long)more->seq, more->type, more->name ? more->name : "");
    set_output(vm, util_strdup(msg));
    return WFVM_STUCK;
  }
  if (more) {
    char msg[512];
    snprintf(msg, sizeof msg, "history has %s '%s' at event #%lld but the script returned", more->type,
             more->name ? more->name : "", (long long)more->seq);
    set_output(vm, util_strdup(msg));
    return WFVM_STUCK;
  }
  lua_State *L = vm->L;
  if (nres == 0) lua_pushnil(co);
  lua_xmove(co, L, 1);
  lua_pop(co, nres > 0 ? nres - 1 : 0);
  /* encode in protected mode: a result JSON cannot hold is a workflow failure.
   * A replay check encodes it too, for comparing with the run's result. */
  int top = lua_gettop(L);
  lua_pushcfunction(L, luaopen_engine_json);
  lua_call(L, 0, 1);
  lua_getfield(L, -1, "encode");
  lua_pushvalue(L, top);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    set_output(vm, message_json("ResultError", lua_tostring(L, -1)));
    lua_settop(L, top - 1);
    return WFVM_FAILED;
  }
  set_output(vm, util_strdup(lua_tostring(L, -1)));
  lua_settop(L, top - 1);
  if (vm->cfg.check_only) vm->check_end = 1;
  return WFVM_DONE;
}

/* A wf.spawn thread ended: its future settles with what it returned (ok) or
 * the error it raised, and the thread is gone. */
static void spawned_ended(wfvm *vm, size_t i, int ok, int nres) {
  lua_State *L = vm->L, *co = vm->threads[i].L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, vm->threads[i].fut_ref);
  int f = lua_gettop(L);
  lua_createtable(L, 0, 1);
  int uv = f + 1;
  if (ok) {
    lua_xmove(co, L, nres);
    lua_createtable(L, nres, 1);
    for (int k = 1; k <= nres; k++) {
      lua_pushvalue(L, uv + k);
      lua_rawseti(L, -2, k);
    }
    lua_pushinteger(L, nres);
    lua_setfield(L, -2, "n");
    lua_setfield(L, uv, "v");
  } else {
    lua_xmove(co, L, 1);
    lua_setfield(L, uv, "e");
  }
  lua_settop(L, uv);
  settle(vm, L, f);
  lua_pop(L, 1);
  luaL_unref(L, LUA_REGISTRYINDEX, vm->threads[i].fut_ref);
  luaL_unref(L, LUA_REGISTRYINDEX, vm->threads[i].ref);
  memmove(vm->threads + i, vm->threads + i + 1, (vm->nthreads - i - 1) * sizeof *vm->threads);
  vm->nthreads--;
}

/* A waiting thread is ready once what it waits on has settled (looked at
 * again only after a settle). */
static int thread_ready(wfvm *vm, vthread *t) {
  if (t->ready) return 1;
  if (t->wait_ref == LUA_NOREF || t->checked == vm->settles) return 0;
  lua_State *L = vm->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->wait_ref);
  int done = wait_done(L, lua_gettop(L), t->wait_mode, NULL);
  lua_pop(L, 1);
  t->checked = vm->settles;
  if (!done) return 0;
  luaL_unref(L, LUA_REGISTRYINDEX, t->wait_ref); /* its own stack still holds it */
  t->wait_ref = LUA_NOREF;
  t->ready = 1;
  return 1;
}

/* Resumes thread i until it waits or ends. Returns 1 with *out when that
 * decides the run's state, 0 when the scheduler goes on. */
static int run_thread(wfvm *vm, size_t i, wfvm_state *out) {
  lua_State *co = vm->threads[i].L;
  int nargs = vm->threads[i].nargs, nres = 0;
  vm->threads[i].nargs = 0;
  vm->threads[i].ready = 0;
  vm->current = co;
  vm->engine_yield = 0;
  if (!vm->kill_reason) lua_sethook(co, count_hook, LUA_MASKCOUNT, HOOK_EVERY);
  vm->limit_on = 1;
  int st = lua_resume(co, vm->L, nargs, &nres);
  vm->limit_on = 0;
  vm->current = NULL;
  if (vm->kill_reason) {
    set_output(vm, message_json("RunawayScript", vm->kill_reason));
    return *out = WFVM_KILLED, 1;
  }
  if (vm->stuck_msg) {
    set_output(vm, util_strdup(vm->stuck_msg));
    return *out = WFVM_STUCK, 1;
  }
  if (st == LUA_YIELD) {
    if (!vm->engine_yield) { /* not a primitive: a yield the sandbox's coroutine.yield should have refused */
      lua_pop(co, nres);
      set_output(vm, message_json("ScriptError", "the workflow yielded outside the engine's primitives"));
      return *out = WFVM_FAILED, 1;
    }
    if (vm->check_end) return *out = WFVM_END, 1;
    if (vm->cas) return *out = WFVM_CONTINUE, 1;
    return 0; /* waits */
  }
  if (st == LUA_ERRMEM && !vm->kill_reason) {
    set_output(vm, message_json("RunawayScript", "memory limit exceeded"));
    return *out = WFVM_KILLED, 1;
  }
  if (i > 0) {
    spawned_ended(vm, i, st == LUA_OK, nres);
    return 0;
  }
  if (st == LUA_OK) return *out = body_returned(vm, co, nres), 1;
  set_output(vm, error_json(vm, co));
  return *out = WFVM_FAILED, 1;
}

/* The scheduler: runs every ready thread, first created first, until all
 * wait; then the log's next outcome settles a future and it goes on. At the
 * end of the log the run is blocked (live). Threads run only between
 * outcomes, so live and on replay they run in the same order and issue the
 * same commands. */
static wfvm_state resume(wfvm *vm) {
  for (;;) {
    size_t i = 0;
    while (i < vm->nthreads && !thread_ready(vm, &vm->threads[i])) i++;
    if (i < vm->nthreads) {
      wfvm_state st;
      if (run_thread(vm, i, &st)) return st;
      continue;
    }
    const hist_event *e = peek(vm);
    if (e && e->ref > 0 && find_pending(vm, e->ref)) {
      vm->cursor++;
      take_outcome(vm, e);
      continue;
    }
    if (e) {
      char where[256] = "?", msg[1024];
      if (vm->nthreads) script_where(vm->threads[0].L, where, sizeof where);
      snprintf(msg, sizeof msg, "non-determinism at event #%lld: history has %s '%s' but the script waits (at %s)",
               (long long)e->seq, e->type, e->name ? e->name : "", where);
      set_output(vm, util_strdup(msg));
      return WFVM_STUCK;
    }
    if (vm->npend == 0) {
      set_output(vm, message_json("DeadlockError", "every coroutine of the workflow waits on another (wf.spawn "
                                                   "futures) and no command is pending: nothing can wake them"));
      return WFVM_FAILED;
    }
    return WFVM_BLOCKED;
  }
}

static wfvm_state start_unprotected(wfvm *vm, const char *src, size_t len, const char *chunkname, const char *mode) {
  lua_State *L = vm->L;
  if (vm->hist.n == 0 || strcmp(vm->hist.v[0].type, "WorkflowStarted") != 0) {
    set_output(vm, message_json("EngineError", "history does not begin with WorkflowStarted"));
    return WFVM_FAILED;
  }
  const hist_event *start = &vm->hist.v[0];
  vm->cursor = 1;
  vm->now_ms = start->time;
  vm->last_seq = start->seq;
  vm->co = lua_newthread(L);
  vm->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);

  const char *boot = vm->cfg.load_only ? LOAD_BOOT_LUA : BOOT_LUA;
  if (luaL_loadbufferx(vm->co, boot, strlen(boot), "=engine.boot", "t") != LUA_OK ||
      luaL_loadbufferx(vm->co, src, len, chunkname, mode) != LUA_OK) {
    set_output(vm, message_json("ScriptError", lua_tostring(vm->co, -1)));
    return WFVM_FAILED;
  }
  lua_rawgeti(vm->co, LUA_REGISTRYINDEX, vm->env_ref);
  lua_setupvalue(vm->co, -2, 1);
  /* WorkflowStarted payload: {"input":..., "seed":"hex"} */
  char err[256];
  if (json_decode_safe(vm->co, start->payload, strlen(start->payload), err, sizeof err) != 0) {
    set_output(vm, message_json("EngineError", err));
    return WFVM_FAILED;
  }
  lua_pushliteral(vm->co, "seed");
  lua_rawget(vm->co, -2);
  vm->rng = strtoull(lua_tostring(vm->co, -1) ? lua_tostring(vm->co, -1) : "0", NULL, 16);
  lua_pop(vm->co, 1);
  lua_pushliteral(vm->co, "input");
  lua_rawget(vm->co, -2);
  lua_remove(vm->co, -2);
  add_thread(vm, vm->co, vm->co_ref, LUA_NOREF, 2);
  return resume(vm);
}

/* Every entry into the VM runs under one protected call on the main thread:
 * an error in the engine's own work there (out of memory while reporting, a
 * value that cannot be encoded) fails this one workflow instead of reaching
 * Lua's panic, which would abort the engine. A VM that failed so is not used
 * again. */
typedef struct vm_entry {
  wfvm *vm;
  const char *src, *chunkname, *mode;
  size_t len;
  wfvm_state st;
  const hist_event *outcome;
} vm_entry;

static int start_entry(lua_State *L) {
  vm_entry *c = lua_touserdata(L, 1);
  c->st = start_unprotected(c->vm, c->src, c->len, c->chunkname, c->mode);
  return 0;
}

static int deliver_entry(lua_State *L) {
  vm_entry *c = lua_touserdata(L, 1);
  take_outcome(c->vm, c->outcome);
  c->st = resume(c->vm);
  return 0;
}

static wfvm_state enter(wfvm *vm, lua_CFunction fn, vm_entry *c) {
  if (vm->broken) {
    set_output(vm, message_json("EngineError", "the workflow VM failed earlier and cannot be resumed"));
    return WFVM_FAILED;
  }
  const char *was = fatal_enter(vm->wf_id);
  lua_State *L = vm->L;
  int top = lua_gettop(L);
  lua_pushcfunction(L, fn);
  lua_pushlightuserdata(L, c);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    vm->limit_on = 0;
    vm->broken = 1;
    char *msg = util_fmt("the workflow VM failed in the engine's own code: %s",
                         lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "(no message)");
    set_output(vm, message_json("EngineError", msg));
    free(msg);
    c->st = WFVM_FAILED;
  }
  lua_settop(L, top);
  fatal_enter(was);
  return c->st;
}

wfvm_state wfvm_start(wfvm *vm, const char *src, size_t len, const char *chunkname) {
  return wfvm_start_mode(vm, src, len, chunkname, "t");
}

wfvm_state wfvm_start_mode(wfvm *vm, const char *src, size_t len, const char *chunkname, const char *mode) {
  vm_entry c = {vm, src, chunkname, mode, len, WFVM_FAILED, NULL};
  return enter(vm, start_entry, &c);
}

wfvm_state wfvm_deliver(wfvm *vm, const hist_event *outcome) {
  vm_entry c = {vm, NULL, NULL, NULL, 0, WFVM_FAILED, outcome};
  return enter(vm, deliver_entry, &c);
}

const wfvm_cmd *wfvm_blocked(const wfvm *vm) {
  static const wfvm_cmd none;
  return vm->npend ? &vm->pend[vm->npend - 1].cmd : &none;
}

const wfvm_cmd *wfvm_next_command(wfvm *vm) {
  for (size_t i = 0; i < vm->npend; i++)
    if (!vm->pend[i].handed) {
      vm->pend[i].handed = 1;
      return &vm->pend[i].cmd;
    }
  return NULL;
}

int wfvm_waits_on(const wfvm *vm, int64_t seq) { return find_pending(vm, seq) != NULL; }
int wfvm_issued_slot(const wfvm *vm) { return vm->issued_slot; }
size_t wfvm_pending_count(const wfvm *vm) { return vm->npend; }
const wfvm_cmd *wfvm_pending_at(const wfvm *vm, size_t i) { return i < vm->npend ? &vm->pend[i].cmd : NULL; }
const char *wfvm_output(const wfvm *vm) { return vm->output ? vm->output : "null"; }
const char *wfvm_error_type(const wfvm *vm) { return vm->error_type; }
size_t wfvm_cursor(const wfvm *vm) { return vm->cursor; }
size_t wfvm_history_len(const wfvm *vm) { return vm->hist.n; }
size_t wfvm_mem_used(const wfvm *vm) { return vm->mem_used; }

int wfvm_check_syntax(const char *src, size_t len, const char *chunkname, char *err, size_t errlen) {
  lua_State *L = luaL_newstate();
  if (!L) {
    util_seterr(err, errlen, "out of memory");
    return -1;
  }
  int rc = luaL_loadbufferx(L, src, len, chunkname, "t");
  if (rc != LUA_OK) util_seterr(err, errlen, "%s", lua_tostring(L, -1));
  lua_close(L);
  return rc == LUA_OK ? 0 : -1;
}

/* What wfvm_check_main says of a failed load, from the error JSON (decoded in
 * a fresh state: the VM that made it may be out of memory). */
static void load_error(const char *json, char *err, size_t errlen) {
  lua_State *L = luaL_newstate();
  char derr[64];
  if (L && json_decode_safe(L, json, strlen(json), derr, sizeof derr) == 0 && lua_istable(L, -1) &&
      lua_getfield(L, -1, "message") == LUA_TSTRING && lua_getfield(L, -2, "type") == LUA_TSTRING)
    util_seterr(err, errlen, "%s%s", strcmp(lua_tostring(L, -1), "NotAFunction") == 0 ? "" : "fails while loading: ",
                lua_tostring(L, -2));
  else
    util_seterr(err, errlen, "fails while loading: %s", json);
  if (L) lua_close(L);
}

int wfvm_check_main(const wfvm_host *host, const char *src, size_t len, const char *chunkname, char *err,
                    size_t errlen) {
  wfvm_config cfg;
  wfvm_config_default(&cfg);
  cfg.check_only = 1; /* a primitive at load time ends the check: nothing is appended */
  cfg.load_only = 1;
  hist_list h = {util_xcalloc(1, sizeof(hist_event)), 1, 1};
  h.v[0] = (hist_event){1, util_strdup("WorkflowStarted"), 0,
                        NULL, NULL, util_strdup("{\"input\":null,\"seed\":\"0\"}"), 0};
  wfvm *vm = wfvm_new(&cfg, host, "(script check)", 1, &h);
  if (!vm) {
    hist_list_free(&h);
    util_seterr(err, errlen, "out of memory");
    return -1;
  }
  wfvm_state st = wfvm_start(vm, src, len, chunkname);
  /* END, DONE: it returned a function; BLOCKED: it called a primitive while
   * loading, which only a run can judge */
  int rc = st == WFVM_FAILED || st == WFVM_KILLED ? -1 : 0;
  if (rc) load_error(wfvm_output(vm), err, errlen);
  wfvm_free(vm);
  return rc;
}

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud) {
  (void)L;
  char **buf = ((char ***)ud)[0];
  size_t *len = ((size_t **)ud)[1];
  char *nb = realloc(*buf, *len + sz);
  if (!nb) return 1; /* no bytecode: the caller keeps the source, which compiles again */
  memcpy(nb + *len, p, sz);
  *buf = nb;
  *len += sz;
  return 0;
}

char *wfvm_compile(const char *src, size_t len, const char *chunkname, size_t *outlen) {
  lua_State *L = luaL_newstate();
  if (!L) return NULL;
  char *buf = NULL;
  *outlen = 0;
  if (luaL_loadbufferx(L, src, len, chunkname, "t") == LUA_OK) {
    void *ud[2] = {&buf, outlen};
    if (lua_dump(L, dump_writer, ud, 0) != 0) {
      free(buf);
      buf = NULL;
    }
  }
  lua_close(L);
  return buf;
}
