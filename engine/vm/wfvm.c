/* wfvm: one workflow run as a Lua coroutine in a sandboxed VM (wfvm.h): its
 * life (created, started, resumed with each outcome, freed), the scheduler
 * of its threads, and the checks and compilation of a script. The parts it
 * is made of are listed in wfvm_internal.h. */
#include "wfvm.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

#include "fatal.h"
#include "json.h"
#include "util.h"
#include "wfvm_internal.h"

/* ------------------------------------------------------------ lifecycle --- */

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
  vm->forks_ref = LUA_NOREF;
  vm->L = lua_newstate(wfvm_alloc, vm);
  if (!vm->L) {
    wfvm_free(vm);
    return NULL;
  }
  /* unreachable while every entry is protected (enter); if it ever runs, it
   * names the workflow before Lua aborts the process */
  lua_atpanic(vm->L, fatal_lua_panic);
  lua_pushcfunction(vm->L, wfvm_build_sandbox);
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
  for (size_t i = 0; i < vm->npend; i++) wfvm_free_cmd(&vm->pend[i].cmd);
  free(vm->pend);
  free(vm->threads);
  hist_list_free(&vm->hist);
  free(vm->wf_id);
  free(vm->parent);
  free(vm->output);
  free(vm->kill_reason);
  free(vm->stuck_msg);
  free(vm->span);
  for (size_t i = 0; i < vm->nforks; i++) free(vm->forks[i].id);
  free(vm->forks);
  free(vm);
}

int64_t wfvm_check_append(void *ud, const char *type, int64_t ref, const char *name, const char *hash,
                          const char *payload, int64_t *time) {
  (void)ud, (void)type, (void)ref, (void)name, (void)hash, (void)payload, (void)time;
  return -1;
}

int64_t wfvm_check_emit(void *ud, const char *type, const char *payload) {
  (void)ud, (void)type, (void)payload;
  return -1;
}

void wfvm_set_parent(wfvm *vm, const char *parent) {
  free(vm->parent);
  vm->parent = parent ? util_strdup(parent) : NULL;
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
  wfvm_settle(vm, L, f);
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
  int done = wfvm_wait_done(L, lua_gettop(L), t->wait_mode, NULL);
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
  if (!vm->kill_reason) lua_sethook(co, wfvm_count_hook, LUA_MASKCOUNT, HOOK_EVERY);
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
    if (e && e->ref > 0 && wfvm_find_pending(vm, e->ref)) {
      vm->cursor++;
      wfvm_take_outcome(vm, e);
      continue;
    }
    if (e) {
      char where[256] = "?", msg[1024];
      if (vm->nthreads) wfvm_script_where(vm->threads[0].L, where, sizeof where);
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
  if (wfvm_read_forks(vm, vm->co) != 0) {
    set_output(vm, message_json("EngineError", "the WorkflowStarted event's forks are not a list of {id, at}"));
    return WFVM_FAILED;
  }
  lua_pushliteral(vm->co, "seed");
  lua_rawget(vm->co, -2);
  vm->rng = strtoull(lua_tostring(vm->co, -1) ? lua_tostring(vm->co, -1) : "0", NULL, 16);
  lua_pop(vm->co, 1);
  lua_pushliteral(vm->co, "input");
  lua_rawget(vm->co, -2);
  lua_remove(vm->co, -2);
  wfvm_add_thread(vm, vm->co, vm->co_ref, LUA_NOREF, 2);
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
  wfvm_take_outcome(c->vm, c->outcome);
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

int wfvm_waits_on(const wfvm *vm, int64_t seq) { return wfvm_find_pending(vm, seq) != NULL; }
int wfvm_issued_slot(const wfvm *vm) { return vm->issued_slot; }
int64_t wfvm_children_started(const wfvm *vm) { return vm->nchildren; }
size_t wfvm_pending_count(const wfvm *vm) { return vm->npend; }
const wfvm_cmd *wfvm_pending_at(const wfvm *vm, size_t i) { return i < vm->npend ? &vm->pend[i].cmd : NULL; }
const char *wfvm_output(const wfvm *vm) { return vm->output ? vm->output : "null"; }
const char *wfvm_span(const wfvm *vm) { return vm->span; }
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
                        NULL, NULL, util_strdup("{\"input\":null,\"seed\":\"0\"}"), 0, NULL};
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
