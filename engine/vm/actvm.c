#include "actvm.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "http.h"
#include "json.h"
#include "child.h"
#include "crash.h"
#include "fatal.h"
#include "util.h"


#define REG_ACTVM "engine.actvm"
#define REG_CALLS "engine.act_calls"
#define REG_MODULES "engine.act_modules"
#define HOOK_EVERY 100000

struct actvm {
  uv_loop_t *loop;
  lua_State *L;
  char *lua_dir;
  const actvm_module *modules; /* the native modules of activity_modules.c, or another table */
  int pending;
  http_ctx *http;
  actvm_history_fn history; /* reads the calling workflow's own history */
  void *history_ud;
  actvm_workflow_fn workflow; /* reads another workflow: its row and domain events */
  void *workflow_ud;
  actvm_memory_fn memory; /* the memory entries (docs/memory.md) */
  void *memory_ud;
  act_call *running; /* the call being resumed: its coroutines' deadline */
  char *instance, *db_dir; /* activity.worker(): which database this worker serves */
  actvm_observer obs;      /* activity.live, activity.usage */
  /* the last options parsed and what they gave: a workflow's steps mostly
   * repeat theirs, and parsing them is a Lua decode per attempt */
  char *opts_text;
  act_opts opts;
  char *ended_span; /* activity.span{} of the attempt that ended last (actvm_take_span) */
};

struct act_call {
  actvm *a;
  lua_State *co;
  int co_ref;
  actvm_done_cb cb;
  void *ud;
  char *wf_id;
  char *name;
  int64_t seq;
  int64_t run;
  int attempt;
  char *traceparent, *tracestate; /* handed on in outgoing requests (lua_http.c), or NULL */
  int64_t deadline_mono; /* 0: none */
  int64_t start_to_close_ms, heartbeat_ms;
  uv_timer_t *deadline_timer, *hb_timer, *sleep_timer;
  int timed_out;
  void (*cancel_op)(void *op); /* what a suspended binding waits on */
  void *op;
  int traced;   /* act_info.traced */
  int span_ref; /* activity.span{}'s table in the registry, or LUA_NOREF */
};

/* ---------------------------------------------------------------- calls --- */

static void free_handle(uv_handle_t *h) { free(h); }

static void close_timer(uv_timer_t **t) {
  if (!*t) return;
  (*t)->data = NULL;
  uv_close((uv_handle_t *)*t, free_handle);
  *t = NULL;
}

/* Starts a one-shot timer of the call's in *t; returns 0, or a libuv error
 * with *t left NULL (nothing to close). */
static int start_timer(act_call *c, uv_timer_t **t, uv_timer_cb cb, uint64_t ms) {
  uv_timer_t *h = util_xmalloc(sizeof *h);
  int rc = uv_timer_init(c->a->loop, h);
  if (rc != 0) {
    free(h);
    return rc;
  }
  h->data = c;
  *t = h;
  rc = uv_timer_start(h, cb, ms, 0);
  if (rc != 0) close_timer(t);
  return rc;
}

static act_call *current_call(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, REG_CALLS);
  lua_pushthread(L);
  lua_rawget(L, -2);
  act_call *c = lua_touserdata(L, -1);
  lua_pop(L, 2);
  return c;
}

/* Releases everything a call holds (timers, coroutine) and frees it. */
static void call_free(act_call *c) {
  lua_State *L = c->a->L;
  if (c->cancel_op) {
    void (*cancel)(void *) = c->cancel_op;
    c->cancel_op = NULL;
    cancel(c->op);
  }
  close_timer(&c->deadline_timer);
  close_timer(&c->hb_timer);
  close_timer(&c->sleep_timer);
  if (c->co) {
    lua_getfield(L, LUA_REGISTRYINDEX, REG_CALLS);
    lua_pushthread(c->co);
    lua_xmove(c->co, L, 1);
    lua_pushnil(L);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    luaL_unref(L, LUA_REGISTRYINDEX, c->co_ref);
  }
  luaL_unref(L, LUA_REGISTRYINDEX, c->span_ref);
  free(c->wf_id);
  free(c->name);
  free(c->traceparent);
  free(c->tracestate);
  free(c);
}

/* {"message":...,"non_retryable":true?,"type":...} built in C: it needs
 * nothing of the Lua state, which may be what just failed. */
static char *error_json(lua_State *L, const char *type, const char *msg, int non_retryable) {
  (void)L;
  char *t = json_quote(type), *m = json_quote(msg ? msg : "");
  char *out = util_fmt("{\"message\":%s,%s\"type\":%s}", m, non_retryable ? "\"non_retryable\":true," : "", t);
  free(t);
  free(m);
  return out;
}

static int encode_protected(lua_State *L) {
  json_encode(L, 1, NULL);
  return 1;
}

/* Normalizes type and message of the error table at 1 and encodes it. Raw
 * access only: the table's metatable is the activity's code (a "strict class"
 * that raises on unknown fields, a __newindex that refuses), and nothing of it
 * may run here, on the engine's main thread. */
static int encode_error_table(lua_State *L) {
  static const char *const fields[2][2] = {{"type", "Error"},
                                           {"message", "error table without a 'message' string (its metatable is "
                                                       "not consulted)"}};
  for (int i = 0; i < 2; i++) {
    lua_pushstring(L, fields[i][0]);
    int t = lua_rawget(L, 1);
    lua_pop(L, 1);
    if (t != LUA_TSTRING && t != LUA_TNUMBER) {
      lua_pushstring(L, fields[i][0]);
      lua_pushstring(L, fields[i][1]);
      lua_rawset(L, 1);
    }
  }
  json_encode(L, 1, NULL);
  return 1;
}

/* The message of a non-table error value, without running any of its code. */
static int error_message(lua_State *L) {
  int t = lua_type(L, 1);
  lua_pushstring(L, t == LUA_TSTRING || t == LUA_TNUMBER ? lua_tostring(L, 1) : luaL_typename(L, 1));
  return 1;
}

/* Turns the error value on top of co (a dead coroutine: nothing may run on it)
 * into error JSON, and pops it. The work happens on the main thread under a
 * protected call, so no error value can reach Lua's panic. */
static char *error_from_value(act_call *c) {
  lua_State *L = c->a->L, *co = c->co;
  if (c->timed_out) {
    lua_pop(co, 1);
    return error_json(L, "Timeout", "activity exceeded its start_to_close timeout", 0);
  }
  int table = lua_type(co, -1) == LUA_TTABLE; /* the whole table travels (tool=, status=, ...) */
  lua_pushcfunction(L, table ? encode_error_table : error_message);
  lua_xmove(co, L, 1);
  int rc = lua_pcall(L, 1, 1, 0);
  const char *text = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "(no message)";
  char *out = rc == LUA_OK && table ? util_strdup(text) : error_json(L, "Error", text, 0); /* or fields JSON cannot hold */
  lua_pop(L, 1);
  return out;
}

/* Resumes the call's coroutine. Returns 1 when the attempt finished (*ok,
 * *json set), 0 when it yielded on an async binding. */
static int step(act_call *c, int nargs, int *ok, char **json) {
  int nres = 0;
  /* the engine's own calls (policy reload, sweeps) have no seq: no workflow to blame */
  const char *was = fatal_enter(c->seq > 0 ? c->wf_id : NULL);
  fatal_detail(c->name);
  act_call *outer = c->a->running;
  c->a->running = c;
  int st = lua_resume(c->co, c->a->L, nargs, &nres);
  c->a->running = outer;
  fatal_enter(was);
  if (st == LUA_YIELD) return 0; /* timed out and yielding anyway: on_deadline ends it */
  if (st == LUA_OK && c->timed_out) {
    /* the activity caught its timeout and returned: the timeout stands */
    lua_settop(c->co, 0);
    *ok = 0;
    *json = error_json(c->a->L, "Timeout", "activity exceeded its start_to_close timeout", 0);
    return 1;
  }
  if (st == LUA_OK) {
    lua_State *L = c->a->L;
    lua_pushcfunction(L, encode_protected);
    if (nres == 0) {
      lua_pushnil(L);
    } else {
      lua_pushvalue(c->co, -nres); /* the first result */
      lua_xmove(c->co, L, 1);
    }
    lua_settop(c->co, 0);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
      *ok = 0;
      char msg[512];
      snprintf(msg, sizeof msg, "activity result cannot be stored: %s", lua_tostring(L, -1));
      lua_pop(L, 1);
      *json = error_json(L, "ResultError", msg, 1);
      return 1;
    }
    size_t len;
    const char *text = lua_tolstring(L, -1, &len);
    char msg[200];
    if (json_check_size(len, "the activity's result", msg, sizeof msg) != 0) { /* before the log holds it */
      lua_pop(L, 1);
      *ok = 0;
      *json = error_json(L, "PayloadTooLarge", msg, 1);
      return 1;
    }
    *ok = 1;
    *json = util_strdup(text);
    lua_pop(L, 1);
    return 1;
  }
  *ok = 0;
  *json = error_from_value(c);
  return 1;
}

static void keep_span(act_call *c);

static void finish_async(act_call *c, int ok, char *json) {
  actvm_done_cb cb = c->cb;
  void *ud = c->ud;
  c->a->pending--;
  keep_span(c);
  call_free(c);
  cb(ud, c, ok, json); /* c is dangling here: identity only */
  free(json);
}

static void resume_call(act_call *c, int nargs) {
  int ok;
  char *json;
  c->cancel_op = NULL;
  c->op = NULL;
  if (step(c, nargs, &ok, &json)) finish_async(c, ok, json);
}

act_call *actvm_current(lua_State *L) { return current_call(L); }
lua_State *actvm_thread(act_call *c) { return c->co; }
const char *actvm_traceparent(const act_call *c) { return c ? c->traceparent : NULL; }
const char *actvm_tracestate(const act_call *c) { return c ? c->tracestate : NULL; }
void actvm_set_pending(act_call *c, void (*cancel)(void *op), void *op) {
  c->cancel_op = cancel;
  c->op = op;
}
void actvm_resume(act_call *c, int nargs) { resume_call(c, nargs); }

static actvm *vm_of(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, REG_ACTVM);
  actvm *a = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return a;
}
uv_loop_t *actvm_loop_of(lua_State *L) { return vm_of(L)->loop; }
/* Created on first use: libcurl and its TLS library cost memory only when an
 * activity actually makes a request. */
http_ctx *actvm_http_of(lua_State *L, char *err, size_t errlen) {
  actvm *a = vm_of(L);
  if (!a->http) a->http = http_new(a->loop, err, errlen);
  return a->http;
}

static void on_deadline(uv_timer_t *t) {
  act_call *c = t->data;
  if (!c) return;
  finish_async(c, 0, error_json(c->a->L, "Timeout", "activity exceeded its start_to_close timeout", 0));
}

static void on_heartbeat_timeout(uv_timer_t *t) {
  act_call *c = t->data;
  if (!c) return;
  finish_async(c, 0, error_json(c->a->L, "HeartbeatTimeout", "activity did not heartbeat in time", 0));
}

/* CPU-bound activities never return to the loop, so the deadline is also
 * checked from a count hook; coroutines the activity makes inherit it and
 * belong to the call being resumed. Past the deadline the hook raises at
 * every instruction, so a pcall can catch the error but not go on running;
 * and step() records the timeout whatever the coroutine returns. */
static void act_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  act_call *c = current_call(L);
  if (!c) c = vm_of(L)->running;
  if (!c || !c->deadline_mono || util_mono_ms() < c->deadline_mono) return;
  c->timed_out = 1;
  lua_sethook(L, act_hook, LUA_MASKCOUNT, 1);
  luaL_error(L, "activity exceeded its start_to_close timeout");
}

/* ------------------------------------------------------------- bindings --- */

static int l_heartbeat(lua_State *L) {
  act_call *c = current_call(L);
  if (!c) return luaL_error(L, "activity.heartbeat called outside an activity");
  int rc = c->hb_timer ? uv_timer_start(c->hb_timer, on_heartbeat_timeout, (uint64_t)c->heartbeat_ms, 0) : 0;
  if (rc != 0) return luaL_error(L, "activity.heartbeat: cannot restart the heartbeat timer: %s", uv_strerror(rc));
  return 0;
}

static void on_sleep(uv_timer_t *t) {
  act_call *c = t->data;
  if (!c) return;
  close_timer(&c->sleep_timer);
  resume_call(c, 0);
}

/* activity.sleep(seconds): yields the activity without blocking the engine. */
static int l_sleep(lua_State *L) {
  double s = luaL_checknumber(L, 1);
  char err[160];
  if (util_check_seconds(s, "activity.sleep: seconds", err, sizeof err) != 0) return luaL_error(L, "%s", err);
  act_call *c = current_call(L);
  if (!c) return luaL_error(L, "activity.sleep called outside an activity");
  if (!lua_isyieldable(L)) return luaL_error(L, "activity.sleep cannot be called here (not yieldable)");
  int rc = start_timer(c, &c->sleep_timer, on_sleep, (uint64_t)(s * 1000.0));
  if (rc != 0) return luaL_error(L, "activity.sleep: cannot start a timer: %s", uv_strerror(rc));
  return lua_yield(L, 0);
}

static int l_info(lua_State *L) {
  act_call *c = current_call(L);
  if (!c) return luaL_error(L, "activity.info called outside an activity");
  lua_newtable(L);
  lua_pushstring(L, c->wf_id);
  lua_setfield(L, -2, "workflow_id");
  lua_pushinteger(L, c->seq);
  lua_setfield(L, -2, "seq");
  lua_pushinteger(L, c->attempt);
  lua_setfield(L, -2, "attempt");
  lua_pushstring(L, c->name);
  lua_setfield(L, -2, "name");
  /* the run too: each run of a workflow (continue_as_new) numbers its commands from 1 */
  lua_pushfstring(L, "%s/%I/%I", c->wf_id, (lua_Integer)c->run, (lua_Integer)c->seq);
  lua_setfield(L, -2, "idempotency_key");
  /* what its http requests carry, for a request made another way (a tool's process) */
  if (c->traceparent) lua_pushstring(L, c->traceparent), lua_setfield(L, -2, "traceparent");
  if (c->tracestate) lua_pushstring(L, c->tracestate), lua_setfield(L, -2, "tracestate");
  return 1;
}

/* activity.history(from_seq, to_seq) -> the calling workflow's own history
 * events (current run) as {seq, type, name, ref, payload (decoded)}: how a step
 * refers to what came before by position instead of copying it into its args. */
static int l_history(lua_State *L) {
  act_call *c = current_call(L);
  if (!c) return luaL_error(L, "activity.history called outside an activity");
  lua_Integer from = luaL_optinteger(L, 1, 1), to = luaL_optinteger(L, 2, c->seq);
  lua_getfield(L, LUA_REGISTRYINDEX, REG_ACTVM);
  actvm *a = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (!a->history) return luaL_error(L, "activity.history is not available here");
  char *json = a->history(a->history_ud, c->wf_id, from, to);
  if (!json) return luaL_error(L, "activity.history: cannot read the history of %s", c->wf_id);
  char err[256];
  int rc = json_decode_safe(L, json, strlen(json), err, sizeof err);
  free(json);
  if (rc != 0) return luaL_error(L, "activity.history: %s", err);
  return 1;
}

/* activity.workflow(id) -> workflow id as {id, status, result, error (both
 * decoded, or absent), events = its domain events {seq, type, time, payload
 * (decoded)}}: any workflow of the database (activities are trusted code;
 * the eval's scorers, which are not, see only what the activity hands
 * them). How an eval scores a session it ran. Raises when there is none. */
static int l_workflow(lua_State *L) {
  if (!current_call(L)) return luaL_error(L, "activity.workflow called outside an activity");
  const char *id = luaL_checkstring(L, 1);
  actvm *a = vm_of(L);
  if (!a->workflow) return luaL_error(L, "activity.workflow is not available here");
  char *json = a->workflow(a->workflow_ud, id);
  if (!json) return luaL_error(L, "activity.workflow: no workflow '%s', or it cannot be read", id);
  char err[256];
  int rc = json_decode_safe(L, json, strlen(json), err, sizeof err);
  free(json);
  if (rc != 0) return luaL_error(L, "activity.workflow: %s", err);
  return 1;
}

/* activity.memory(op, args) -> the answer (decoded): ops/memory.h's
 * memory_call on the worker's database, in the batch that records the
 * activity's own result. How propose_memory records an approved entry and
 * a session's prepare reads the entries its input names (lua/memory.lua).
 * Raises {type = "MemoryError"} when the call is refused. */
static int l_memory(lua_State *L) {
  if (!current_call(L)) return luaL_error(L, "activity.memory called outside an activity");
  const char *op = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  actvm *a = vm_of(L);
  if (!a->memory) return luaL_error(L, "activity.memory is not available here");
  size_t n;
  const char *args = json_encode(L, 2, &n);
  char err[1024] = "";
  char *json = a->memory(a->memory_ud, op, args, n, err, sizeof err);
  lua_pop(L, 1); /* the encoded args */
  if (!json) {
    lua_createtable(L, 0, 2);
    lua_pushliteral(L, "MemoryError");
    lua_setfield(L, -2, "type");
    lua_pushstring(L, err);
    lua_setfield(L, -2, "message");
    return lua_error(L);
  }
  char derr[256];
  int rc = json_decode_safe(L, json, strlen(json), derr, sizeof derr);
  free(json);
  if (rc != 0) return luaL_error(L, "activity.memory: %s", derr);
  return 1;
}

/* activity.worker(): {lua_dir, instance, db_dir, host} of the worker this VM
 * runs in (instance and db_dir are nil in a VM of its own, e.g. `policy
 * check`). host names the machine whose sandboxes this worker reaches:
 * ENGINE_HOST_ID, else the host name. */
static int l_worker(lua_State *L) {
  actvm *a = vm_of(L);
  lua_createtable(L, 0, 4);
  const char *host = getenv("ENGINE_HOST_ID");
  char name[256];
  if (!host || !*host) {
    if (gethostname(name, sizeof name) != 0) snprintf(name, sizeof name, "localhost");
    name[sizeof name - 1] = 0;
    host = name;
  }
  lua_pushstring(L, host);
  lua_setfield(L, -2, "host");
  lua_pushstring(L, a->lua_dir);
  lua_setfield(L, -2, "lua_dir");
  if (a->instance) lua_pushstring(L, a->instance), lua_setfield(L, -2, "instance");
  if (a->db_dir) lua_pushstring(L, a->db_dir), lua_setfield(L, -2, "db_dir");
  return 1;
}

void actvm_set_worker(actvm *a, const char *instance, const char *db_dir) {
  free(a->instance);
  free(a->db_dir);
  a->instance = instance ? util_strdup(instance) : NULL;
  a->db_dir = db_dir ? util_strdup(db_dir) : NULL;
}

void actvm_set_observer(actvm *a, const actvm_observer *o) { a->obs = *o; }

/* activity.crash_point(name): the crash tests' fault injection (crash.h,
 * ENGINE_CRASH) at a named point of activity code; nothing without it. */
static int l_crash_point(lua_State *L) {
  crash_point(luaL_checkstring(L, 1));
  return 0;
}

/* activity.live(type, value): an ephemeral event of the calling workflow for
 * whoever watches it live (a model's text as it streams); never logged, so a
 * retried attempt may repeat what an earlier one showed. */
static int l_live(lua_State *L) {
  act_call *c = current_call(L);
  if (!c) return luaL_error(L, "activity.live called outside an activity");
  const char *type = luaL_checkstring(L, 1);
  luaL_checkany(L, 2);
  actvm *a = vm_of(L);
  if (!a->obs.live) return 0;
  size_t len;
  const char *json = json_encode(L, 2, &len);
  a->obs.live(a->obs.ud, c->wf_id, type, json);
  return 0;
}

/* activity.usage(provider, input_tokens, output_tokens): counted in /metrics. */
static int l_usage(lua_State *L) {
  if (!current_call(L)) return luaL_error(L, "activity.usage called outside an activity");
  const char *provider = luaL_checkstring(L, 1);
  double in = luaL_optnumber(L, 2, 0), out = luaL_optnumber(L, 3, 0);
  actvm *a = vm_of(L);
  if (a->obs.usage) a->obs.usage(a->obs.ud, provider, in, out);
  return 0;
}

/* ------------------------------------------------------------- its span --- */

/* activity.traced() -> whether this attempt's span is exported (tracing is
 * on and its trace sampled): what to describe is worth building only then. */
static int l_traced(lua_State *L) {
  act_call *c = current_call(L);
  lua_pushboolean(L, c && c->traced);
  return 1;
}

/* Copies t[key] (absent: left as it is) into the description d. */
static void copy_field(lua_State *L, int t, int d, const char *key) {
  if (lua_getfield(L, t, key) != LUA_TNIL) lua_setfield(L, d, key);
  else lua_pop(L, 1);
}

/* activity.span{name=, kind="client"|"internal", attributes={...},
 * error={type=, message=}}: how this attempt's span describes it (a model
 * turn is a CLIENT span "chat MODEL" with the GenAI attributes). Calls add
 * up: a later name, kind or error replaces the earlier, attributes merge key
 * by key. A no-op unless activity.traced(). */
static int l_span(lua_State *L) {
  act_call *c = current_call(L);
  if (!c) return luaL_error(L, "activity.span called outside an activity");
  luaL_checktype(L, 1, LUA_TTABLE);
  if (!c->traced) return 0;
  lua_settop(L, 1);
  if (c->span_ref == LUA_NOREF) {
    lua_createtable(L, 0, 4);
    lua_newtable(L);
    lua_setfield(L, -2, "attributes");
    c->span_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->span_ref); /* 2: the description */
  copy_field(L, 1, 2, "name");
  copy_field(L, 1, 2, "kind");
  copy_field(L, 1, 2, "error");
  if (lua_getfield(L, 1, "attributes") == LUA_TTABLE) { /* 3 */
    lua_getfield(L, 2, "attributes"); /* 4 */
    lua_pushnil(L);
    while (lua_next(L, 3)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_settable(L, 4);
    }
  }
  lua_settop(L, 1);
  return 0;
}

static int encode_span(lua_State *L) {
  json_encode(L, 1, NULL);
  return 1;
}

/* The ending call's description becomes the VM's ended_span (a description
 * JSON cannot hold is dropped: telemetry never fails an attempt). */
static void keep_span(act_call *c) {
  actvm *a = c->a;
  free(a->ended_span);
  a->ended_span = NULL;
  if (c->span_ref == LUA_NOREF) return;
  lua_State *L = a->L;
  lua_pushcfunction(L, encode_span);
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->span_ref);
  if (lua_pcall(L, 1, 1, 0) == LUA_OK) a->ended_span = util_strdup(lua_tostring(L, -1));
  lua_pop(L, 1);
}

char *actvm_take_span(actvm *a) {
  char *s = a->ended_span;
  a->ended_span = NULL;
  return s;
}

static const luaL_Reg activity_lib[] = {{"heartbeat", l_heartbeat}, {"sleep", l_sleep},   {"info", l_info},
                                        {"history", l_history},     {"worker", l_worker}, {"live", l_live},
                                        {"workflow", l_workflow},   {"crash_point", l_crash_point},
                                        {"memory", l_memory},
                                        {"usage", l_usage},         {"traced", l_traced}, {"span", l_span},
                                        {NULL, NULL}};

void actvm_set_history(actvm *a, actvm_history_fn fn, void *ud) {
  a->history = fn;
  a->history_ud = ud;
}

void actvm_set_workflow(actvm *a, actvm_workflow_fn fn, void *ud) {
  a->workflow = fn;
  a->workflow_ud = ud;
}

void actvm_set_memory(actvm *a, actvm_memory_fn fn, void *ud) {
  a->memory = fn;
  a->memory_ud = ud;
}

static int open_activity(lua_State *L) {
  luaL_newlib(L, activity_lib);
  return 1;
}

static int setup(lua_State *L) {
  actvm *a = lua_touserdata(L, 1);
  luaL_openlibs(L);
  child_harden_lua(L); /* os.execute, io.popen: children get only fds 0-2 */
  lua_pushlightuserdata(L, a);
  lua_setfield(L, LUA_REGISTRYINDEX, REG_ACTVM);
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, REG_CALLS);
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, REG_MODULES);
  luaL_requiref(L, "activity", open_activity, 0);
  luaL_requiref(L, "json", luaopen_engine_json, 0);
  /* "cjson" is the same module as "json" (as in the workflow VM): one number
   * meaning everywhere, integers kept exact, one canonical encoding */
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, "cjson");
  lua_pop(L, 1);
  lua_pushvalue(L, -1); /* in place of the module requiref would have left */
  lua_pop(L, 3);
  /* the native modules its creator hands in (activity_modules.c): they call
   * back into this VM's yield and resume, so it does not name them itself */
  for (const actvm_module *m = a->modules; m && m->name; m++) {
    luaL_requiref(L, m->name, m->open, 0);
    lua_pop(L, 1);
  }
  /* require() for activity modules also finds the engine's Lua library */
  lua_getglobal(L, "package");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", a->lua_dir, a->lua_dir);
  lua_getfield(L, -2, "path");
  lua_concat(L, 2);
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
  return 0;
}

actvm *actvm_new(uv_loop_t *loop, const char *lua_dir, const actvm_module *modules, char *err, size_t errlen) {
  actvm *a = util_xcalloc(1, sizeof *a);
  a->loop = loop;
  a->modules = modules;
  a->lua_dir = util_strdup(lua_dir);
  a->L = luaL_newstate();
  if (!a->L) {
    util_seterr(err, errlen, "activity VM: out of memory");
    actvm_free(a);
    return NULL;
  }
  /* unreachable while every use of an activity's values is protected; if it
   * ever runs, it names the workflow before Lua aborts the process */
  lua_atpanic(a->L, fatal_lua_panic);
  lua_pushcfunction(a->L, setup);
  lua_pushlightuserdata(a->L, a);
  if (lua_pcall(a->L, 1, 0, 0) != LUA_OK) {
    util_seterr(err, errlen, "activity VM: %s", lua_tostring(a->L, -1));
    actvm_free(a);
    return NULL;
  }
  return a;
}

void actvm_free(actvm *a) {
  if (!a) return;
  if (a->L) lua_close(a->L); /* finalizers release their requests first */
  if (a->http) http_free(a->http);
  free(a->lua_dir);
  free(a->instance);
  free(a->db_dir);
  free(a->opts_text);
  free(a->ended_span);
  free(a);
}


/* ------------------------------------------------------------- modules --- */

static int valid_name(const char *s) {
  if (!*s || *s == '.') return 0;
  for (const char *p = s; *p; p++) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
          *p == '.'))
      return 0;
    if (p[0] == '.' && (p[1] == '.' || p[1] == 0)) return 0;
  }
  return 1;
}

/* Pushes the module table for "mod" (a.b -> a/b.lua), loading it again when
 * the file changed: a retry runs the current version of an activity. */
static int load_module(actvm *a, const char *script_dir, const char *mod, char *err, size_t errlen) {
  lua_State *L = a->L;
  char rel[512];
  snprintf(rel, sizeof rel, "%s", mod);
  for (char *p = rel; *p; p++)
    if (*p == '.') *p = '/';
  const char *dirs[3] = {script_dir, script_dir, a->lua_dir};
  const char *subs[3] = {"", "activities/", "activities/"};
  char path[1024];
  struct stat sb;
  int found = 0;
  for (int i = 0; i < 3 && !found; i++) {
    if (!dirs[i]) continue;
    snprintf(path, sizeof path, "%s/%s%s.lua", dirs[i], subs[i], rel);
    found = stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
  }
  if (!found) {
    util_seterr(err, errlen, "no activity module '%s' (looked for %s.lua beside the workflow, in its activities/ "
                "and in %s/activities/)", mod, rel, a->lua_dir);
    return -1;
  }
  int64_t mtime = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
  lua_getfield(L, LUA_REGISTRYINDEX, REG_MODULES);
  if (lua_getfield(L, -1, path) == LUA_TTABLE) {
    lua_getfield(L, -1, "mtime");
    int same = lua_tointeger(L, -1) == mtime;
    lua_pop(L, 1);
    if (same) {
      lua_getfield(L, -1, "mod");
      lua_replace(L, -3);
      lua_pop(L, 1);
      return 0;
    }
  }
  lua_pop(L, 1);
  if (luaL_loadfilex(L, path, "t") != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK) {
    util_seterr(err, errlen, "loading activity module '%s': %s", mod, lua_tostring(L, -1));
    lua_pop(L, 2);
    return -1;
  }
  if (!lua_istable(L, -1)) {
    util_seterr(err, errlen, "activity module %s must return a table of functions", path);
    lua_pop(L, 2);
    return -1;
  }
  lua_newtable(L);
  lua_pushinteger(L, mtime);
  lua_setfield(L, -2, "mtime");
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, "mod");
  lua_setfield(L, -3, path);
  lua_replace(L, -2);
  return 0;
}

/* --------------------------------------------------------------- calls --- */

static int get_protected(lua_State *L) {
  lua_gettable(L, 1);
  return 1;
}

int actvm_call(actvm *a, const act_info *info, const char *payload, actvm_done_cb cb, void *ud, int *ok,
               char **json, act_call **out) {
  lua_State *L = a->L;
  *out = NULL;
  free(a->ended_span); /* an attempt that fails before it runs said nothing */
  a->ended_span = NULL;
  char err[1024];
  const char *dot = strrchr(info->name, '.');
  if (!valid_name(info->name) || !dot) {
    *ok = 0;
    snprintf(err, sizeof err, "activity name '%s' must be module.function", info->name);
    *json = error_json(L, "ActivityNotFound", err, 1);
    return 1;
  }
  char mod[256];
  snprintf(mod, sizeof mod, "%.*s", (int)(dot - info->name), info->name);
  if (load_module(a, info->script_dir, mod, err, sizeof err) != 0) {
    *ok = 0;
    *json = error_json(L, "ActivityNotFound", err, 1);
    return 1;
  }
  /* module[function], protected: a module table's __index is the module's code */
  lua_pushcfunction(L, get_protected);
  lua_pushvalue(L, -2);
  lua_pushstring(L, dot + 1);
  if (lua_pcall(L, 2, 1, 0) != LUA_OK || lua_type(L, -1) != LUA_TFUNCTION) {
    lua_pop(L, 2);
    *ok = 0;
    snprintf(err, sizeof err, "activity module '%s' has no function '%s'", mod, dot + 1);
    *json = error_json(L, "ActivityNotFound", err, 1);
    return 1;
  }
  lua_remove(L, -2); /* module */
  act_call *c = util_xcalloc(1, sizeof *c);
  c->a = a;
  c->cb = cb;
  c->ud = ud;
  c->wf_id = util_strdup(info->workflow_id);
  c->name = util_strdup(info->name);
  c->seq = info->seq;
  c->run = info->run;
  c->attempt = info->attempt;
  c->traceparent = info->traceparent ? util_strdup(info->traceparent) : NULL;
  c->tracestate = info->traceparent && info->tracestate ? util_strdup(info->tracestate) : NULL;
  c->start_to_close_ms = info->start_to_close_ms;
  c->heartbeat_ms = info->heartbeat_ms;
  c->traced = info->traced;
  c->span_ref = LUA_NOREF;
  if (c->start_to_close_ms > 0) c->deadline_mono = util_mono_ms() + c->start_to_close_ms;
  c->co = lua_newthread(L);
  c->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_getfield(L, LUA_REGISTRYINDEX, REG_CALLS);
  lua_pushthread(c->co);
  lua_xmove(c->co, L, 1);
  lua_pushlightuserdata(L, c);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  lua_xmove(L, c->co, 1); /* the function */
  lua_sethook(c->co, act_hook, LUA_MASKCOUNT, HOOK_EVERY);
  /* args from the payload */
  char derr[256];
  if (json_decode_safe(c->co, payload, strlen(payload), derr, sizeof derr) != 0) {
    *ok = 0;
    *json = error_json(L, "EngineError", derr, 1);
    call_free(c);
    return 1;
  }
  lua_getfield(c->co, -1, "args");
  lua_remove(c->co, -2);
  /* the timers start before any of the activity's code runs: a call that
   * cannot be timed is not started (they fire from the loop, never inside step) */
  int rc = c->start_to_close_ms > 0
               ? start_timer(c, &c->deadline_timer, on_deadline, (uint64_t)c->start_to_close_ms)
               : 0;
  if (rc == 0 && c->heartbeat_ms > 0)
    rc = start_timer(c, &c->hb_timer, on_heartbeat_timeout, (uint64_t)c->heartbeat_ms);
  if (rc != 0) {
    *ok = 0;
    snprintf(err, sizeof err, "cannot start the activity's timers: %s", uv_strerror(rc));
    *json = error_json(L, "EngineError", err, 0);
    call_free(c);
    return 1;
  }
  if (step(c, 1, ok, json)) {
    keep_span(c);
    call_free(c);
    return 1;
  }
  a->pending++;
  *out = c;
  return 0;
}

void actvm_cancel(act_call *c) {
  if (!c) return;
  c->a->pending--;
  call_free(c);
}

/* ------------------------------------------------------------ failures --- */

typedef struct failure_args {
  const char *json;
  int attempts;
  act_failure *why;
} failure_args;

/* Raw access only: the object is decoded JSON (no metatable), and its nested
 * values are details, not the error's own fields. */
static int failure_protected(lua_State *L) {
  failure_args *f = lua_touserdata(L, 1);
  json_decode(L, f->json, strlen(f->json));
  if (!lua_istable(L, -1)) luaL_error(L, "not an error object");
  int t = lua_gettop(L);
  size_t len = 0;
  lua_pushliteral(L, "type");
  const char *type = lua_rawget(L, t) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : "Error";
  if (len >= sizeof f->why->type) f->why->type_too_long = 1;
  else snprintf(f->why->type, sizeof f->why->type, "%s", type);
  lua_pushliteral(L, "non_retryable");
  f->why->non_retryable = lua_rawget(L, t) == LUA_TBOOLEAN && lua_toboolean(L, -1);
  lua_settop(L, t);
  lua_pushliteral(L, "attempts");
  lua_pushinteger(L, f->attempts);
  lua_rawset(L, t);
  json_encode(L, t, NULL);
  return 1;
}

char *actvm_failure(actvm *a, const char *err_json, int attempts, act_failure *why) {
  memset(why, 0, sizeof *why);
  lua_State *L = a->L;
  int top = lua_gettop(L);
  failure_args f = {err_json, attempts, why};
  lua_pushcfunction(L, failure_protected);
  lua_pushlightuserdata(L, &f);
  char *out = NULL;
  if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
    out = util_strdup(lua_tostring(L, -1));
  } else { /* never expected: actvm made the JSON; the workflow still gets an error object */
    snprintf(why->type, sizeof why->type, "EngineError");
    why->non_retryable = 1;
    char *m = json_quote(lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "unreadable activity error");
    out = util_fmt("{\"attempts\":%d,\"message\":%s,\"non_retryable\":true,\"type\":\"EngineError\"}", attempts, m);
    free(m);
  }
  lua_settop(L, top);
  return out;
}

/* ------------------------------------------------------------- options --- */

/* Option kinds: a duration in seconds (util_check_seconds), the backoff
 * factor, a count of attempts. Every number is checked before it is used:
 * none may become inf or an integer it does not fit. */
enum { OPT_SECONDS, OPT_FACTOR, OPT_COUNT };
#define MAX_ATTEMPTS_LIMIT 1000000
#define BACKOFF_LIMIT 1e6

static int num_field(lua_State *L, int t, const char *where, const char *k, int kind, double *out, char *err,
                     size_t errlen) {
  int ty = lua_getfield(L, t, k);
  double v = ty == LUA_TNUMBER ? lua_tonumber(L, -1) : 0;
  lua_pop(L, 1);
  if (ty == LUA_TNIL) return 0;
  char name[64];
  snprintf(name, sizeof name, "activity option '%s%s'", where, k);
  if (ty != LUA_TNUMBER) {
    util_seterr(err, errlen, "%s must be a number, not a %s", name, lua_typename(L, ty));
    return -1;
  }
  if (kind == OPT_SECONDS && util_check_seconds(v, name, err, errlen) != 0) return -1;
  if (kind == OPT_FACTOR && !(v >= 1 && v <= BACKOFF_LIMIT)) {
    util_seterr(err, errlen, "%s must be a number from 1 to %.0f, not %.15g", name, BACKOFF_LIMIT, v);
    return -1;
  }
  if (kind == OPT_COUNT && !(v >= 0 && v <= MAX_ATTEMPTS_LIMIT && v == (double)(int)v)) {
    util_seterr(err, errlen, "%s must be a whole number from 0 (unlimited) to %d, not %.15g", name,
                MAX_ATTEMPTS_LIMIT, v);
    return -1;
  }
  *out = v;
  return 0;
}

static int check_keys(lua_State *L, int t, const char *const *allowed, const char *where, char *err, size_t errlen) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    int ok = 0;
    if (lua_type(L, -1) == LUA_TSTRING)
      for (const char *const *k = allowed; *k; k++) ok |= strcmp(*k, lua_tostring(L, -1)) == 0;
    if (!ok) {
      util_seterr(err, errlen, "unknown %s option '%s'", where, lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?");
      lua_pop(L, 1);
      return -1;
    }
  }
  return 0;
}

static int parse_options(lua_State *L) {
  act_opts *o = lua_touserdata(L, 1);
  size_t n;
  const char *text = lua_tolstring(L, 2, &n); /* the options' own JSON */
  char *err = lua_touserdata(L, 3);
  size_t errlen = (size_t)lua_tointeger(L, 4);
  json_decode(L, text, n);
  if (!lua_istable(L, -1)) return 0;
  int t = lua_gettop(L);
  /* span_attributes: what the workflow adds to the spans of the activity's
   * attempts (a tool call's policy decision and approval): telemetry only */
  static const char *const top[] = {"start_to_close", "schedule_to_close", "heartbeat", "retry", "local",
                                    "span_attributes", NULL};
  static const char *const retry[] = {"initial_interval", "backoff", "max_interval", "max_attempts",
                                      "non_retryable", NULL};
  if (check_keys(L, t, top, "activity", err, errlen) ||
      num_field(L, t, "", "start_to_close", OPT_SECONDS, &o->start_to_close, err, errlen) ||
      num_field(L, t, "", "schedule_to_close", OPT_SECONDS, &o->schedule_to_close, err, errlen) ||
      num_field(L, t, "", "heartbeat", OPT_SECONDS, &o->heartbeat, err, errlen)) {
    lua_pushboolean(L, 0);
    return 1;
  }
  int lt = lua_getfield(L, t, "local");
  if (lt != LUA_TNIL && lt != LUA_TBOOLEAN) {
    util_seterr(err, errlen, "activity option 'local' must be a boolean");
    lua_pushboolean(L, 0);
    return 1;
  }
  o->local = lua_toboolean(L, -1);
  lua_pop(L, 1);
  int st = lua_getfield(L, t, "span_attributes");
  lua_pop(L, 1);
  if (st != LUA_TNIL && st != LUA_TTABLE) {
    util_seterr(err, errlen, "activity option 'span_attributes' must be a table");
    lua_pushboolean(L, 0);
    return 1;
  }
  if (lua_getfield(L, t, "retry") == LUA_TTABLE) {
    int r = lua_gettop(L);
    double max_attempts = o->max_attempts;
    if (check_keys(L, r, retry, "retry", err, errlen) ||
        num_field(L, r, "retry.", "initial_interval", OPT_SECONDS, &o->initial_interval, err, errlen) ||
        num_field(L, r, "retry.", "backoff", OPT_FACTOR, &o->backoff, err, errlen) ||
        num_field(L, r, "retry.", "max_interval", OPT_SECONDS, &o->max_interval, err, errlen) ||
        num_field(L, r, "retry.", "max_attempts", OPT_COUNT, &max_attempts, err, errlen)) {
      lua_pushboolean(L, 0);
      return 1;
    }
    o->max_attempts = (int)max_attempts;
    /* types are compared whole with the error's type: none may be cut short */
    int nt = lua_getfield(L, r, "non_retryable");
    lua_Integer n = nt == LUA_TTABLE ? (lua_Integer)lua_rawlen(L, -1) : 0;
    int bad = nt != LUA_TTABLE && nt != LUA_TNIL;
    bad |= n > ACT_MAX_NON_RETRYABLE;
    for (lua_Integer i = 1; i <= n && !bad; i++) {
      size_t len = 0;
      const char *type = lua_rawgeti(L, -1, i) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
      if (!type || len == 0 || len >= ACT_TYPE_MAX) bad = 1;
      else memcpy(o->non_retryable[o->n_non_retryable++], type, len + 1);
      lua_pop(L, 1);
    }
    if (bad) {
      util_seterr(err, errlen, "activity option 'retry.non_retryable' must be a list of at most %d error types, each "
                  "a string of 1 to %d bytes", ACT_MAX_NON_RETRYABLE, ACT_TYPE_MAX - 1);
      lua_pushboolean(L, 0);
      return 1;
    }
  }
  return 0;
}

int actvm_parse_options(actvm *a, const char *payload, act_opts *o, char *err, size_t errlen) {
  memset(o, 0, sizeof *o);
  o->start_to_close = 300;
  o->initial_interval = 1;
  o->backoff = 2;
  o->max_interval = 100;
  o->max_attempts = 5;
  /* the payload is {"args":...,"options":...}: without options, the defaults stand */
  const char *v;
  size_t vn;
  if (!strstr(payload, "\"options\":") || json_get(payload, strlen(payload), "options", &v, &vn) != 1) return 0;
  if (a->opts_text && strlen(a->opts_text) == vn && memcmp(a->opts_text, v, vn) == 0) {
    *o = a->opts;
    return 0;
  }
  lua_State *L = a->L;
  int top = lua_gettop(L);
  lua_pushcfunction(L, parse_options);
  lua_pushlightuserdata(L, o);
  lua_pushlstring(L, v, vn);
  lua_pushlightuserdata(L, err);
  lua_pushinteger(L, (lua_Integer)errlen);
  int rc = lua_pcall(L, 4, 1, 0);
  int bad = rc != LUA_OK || (lua_isboolean(L, -1) && !lua_toboolean(L, -1));
  if (rc != LUA_OK) util_seterr(err, errlen, "invalid activity payload: %s", lua_tostring(L, -1));
  lua_settop(L, top);
  if (!bad) { /* only what parsed is kept */
    free(a->opts_text);
    a->opts_text = util_xmalloc(vn + 1);
    memcpy(a->opts_text, v, vn);
    a->opts_text[vn] = 0;
    a->opts = *o;
  }
  return bad ? -1 : 0;
}
