/* wfvm_primitives: the `workflow` module a script requires (wf.activity,
 * wf.sleep, wf.wait_signal, wf.checkpoint, wf.emit, wf.patched, wf.now,
 * wf.random, wf.acquire, wf.rate, ..., futures, wf.all, wf.any, wf.spawn;
 * wf.child's own checks are in wfvm_child.c):
 * each checks its arguments before anything is recorded, then issues its
 * command (wfvm_commands.c) or reads what the log says. */
#include <lauxlib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"
#include "wfvm_internal.h"

/* ----------------------------------------------------------- primitives --- */

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
      wfvm_check_seconds(L, lua_tonumber(L, -1), "InvalidOptions", what);
    }
    lua_pop(L, 1);
  }
  lua_pushliteral(L, "local");
  int lt = lua_rawget(L, t);
  lua_pop(L, 1);
  if (lt != LUA_TNIL && lt != LUA_TBOOLEAN)
    wfvm_raise_error(L, "InvalidOptions", "activity option 'local' must be a boolean");
  lua_pushliteral(L, "retry");
  if (lua_rawget(L, t) == LUA_TTABLE) {
    int r = lua_gettop(L);
    for (const char *const *k = retry; *k; k++) {
      lua_pushstring(L, *k);
      if (lua_rawget(L, r) == LUA_TNUMBER) {
        snprintf(what, sizeof what, "activity option 'retry.%s'", *k);
        wfvm_check_seconds(L, lua_tonumber(L, -1), "InvalidOptions", what);
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
        wfvm_raise_error(L, "InvalidOptions", what);
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
  const char *name = wfvm_check_name(L, 1, what);
  if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
  if (!lua_isnoneornil(L, 3)) check_activity_options(L, 3);
  if (wait) wfvm_check_blocking(L, vm, what);
  else wfvm_check_primitive(L, vm, what);
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
  if (live(vm)) wfvm_check_size(L, alen, "the JSON of the activity's arguments"); /* a replay reads what was recorded */
  const char *payload = lua_tostring(L, -1);
  return wfvm_command(L, vm, wait, "activity", "ActivityScheduled", name, args, payload);
}

static int l_activity(lua_State *L) { return activity_command(L, 1); }
static int l_start_activity(lua_State *L) { return activity_command(L, 0); }

static int l_child(lua_State *L) { return wfvm_child_command(L, 1); }
static int l_start_child(lua_State *L) { return wfvm_child_command(L, 0); }

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
  wfvm_check_seconds(L, secs, "InvalidArgument", wait ? "wf.sleep: seconds" : "wf.start_timer: seconds");
  if (wait) wfvm_check_blocking(L, vm, "sleep");
  else wfvm_check_primitive(L, vm, "start_timer");
  char args[64], payload[128];
  fmt_num(args, sizeof args, secs);
  int64_t fire_at = util_now_ms() + seconds_to_ms(secs);
  snprintf(payload, sizeof payload, "{\"fire_at\":%lld,\"seconds\":%s}", (long long)fire_at, args);
  return wfvm_command(L, vm, wait, "timer", "TimerStarted", "sleep", args, payload);
}

static int l_sleep(lua_State *L) { return timer_command(L, 1); }
static int l_start_timer(lua_State *L) { return timer_command(L, 0); }

/* wf.wait_signal(name, {timeout=seconds}) -> payload | nil, "timeout";
 * wf.start_wait_signal(name, opts) its future. */
static int signal_command(lua_State *L, int wait) {
  wfvm *vm = get_vm(L);
  const char *name = wfvm_check_name(L, 1, wait ? "wait_signal" : "start_wait_signal");
  lua_Number timeout = -1;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    if (lua_getfield(L, 2, "timeout") != LUA_TNIL) {
      timeout = luaL_checknumber(L, -1);
      wfvm_check_seconds(L, timeout, "InvalidArgument", wait ? "wf.wait_signal: timeout" : "wf.start_wait_signal: timeout");
    }
    lua_pop(L, 1);
  }
  if (wait) wfvm_check_blocking(L, vm, "wait_signal");
  else wfvm_check_primitive(L, vm, "start_wait_signal");
  char args[64], payload[160];
  fmt_num(args, sizeof args, timeout);
  if (timeout >= 0)
    snprintf(payload, sizeof payload, "{\"deadline\":%lld,\"timeout\":%s}",
             (long long)(util_now_ms() + seconds_to_ms(timeout)), args);
  else
    snprintf(payload, sizeof payload, "{}");
  return wfvm_command(L, vm, wait, "signal", "SignalWaitStarted", name, args, payload);
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
  wfvm_raise_error(L, "InvalidArgument", msg);
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
    wfvm_raise_error(L, "InvalidArgument", msg);
  }
  return v;
}

/* Blocks on a limits command whose arguments are the table on top of the
 * stack (encoded in canonical key order: the same bytes live and on replay). */
static int block_on_table(lua_State *L, wfvm *vm, const char *kind, const char *type, const char *name) {
  size_t len;
  const char *args = json_encode(L, lua_gettop(L), &len);
  return wfvm_block_on(L, vm, kind, type, name, args, args);
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
  const char *pool = wfvm_check_name(L, 1, "acquire");
  if (!*pool || strlen(pool) > 128)
    wfvm_raise_error(L, "InvalidArgument", "wf.acquire: the pool name must be 1-128 bytes");
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  const char *key = opt_string(L, 2, "key", "", SLOT_KEY_MAX, "wf.acquire");
  lua_Number limit = opt_number(L, 2, "limit", 1, 1, LIMIT_MAX, 1, "wf.acquire");
  const char *strategy = opt_string(L, 2, "strategy", "queue", 32, "wf.acquire");
  if (strcmp(strategy, "queue") && strcmp(strategy, "cancel_in_progress") && strcmp(strategy, "drop"))
    wfvm_raise_error(L, "InvalidArgument", "wf.acquire: 'strategy' must be queue, cancel_in_progress or drop");
  wfvm_check_blocking(L, vm, "acquire");
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
  const char *pool = wfvm_check_name(L, 1, "release");
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TTABLE);
  const char *key = opt_string(L, 2, "key", "", SLOT_KEY_MAX, "wf.release");
  wfvm_check_blocking(L, vm, "release");
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
  const char *name = wfvm_check_name(L, 1, "counter");
  if (!*name || strlen(name) > 256) wfvm_raise_error(L, "InvalidArgument", "wf.counter: the name must be 1-256 bytes");
  lua_Number delta = luaL_optnumber(L, 2, 0);
  if (!(delta >= -1e15 && delta <= 1e15))
    wfvm_raise_error(L, "InvalidArgument", "wf.counter: delta must be a finite number");
  wfvm_check_blocking(L, vm, "counter");
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
  const char *name = wfvm_check_name(L, 1, "rate");
  if (!*name || strlen(name) > 256) wfvm_raise_error(L, "InvalidArgument", "wf.rate: the name must be 1-256 bytes");
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_Number per = opt_number(L, 2, "per", 60, 0.001, 86400, 0, "wf.rate");
  lua_getfield(L, 2, "charge");
  int charging = !lua_isnil(L, -1);
  lua_pop(L, 1);
  wfvm_check_blocking(L, vm, "rate");
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

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int checkpoint_k(lua_State *L, int status, lua_KContext replaying) {
  wfvm *vm = get_vm(L);
  vm->in_checkpoint--;
  if (status != LUA_OK && status != LUA_YIELD) return lua_error(L);
  /* stack: name fn result */
  char hash[17];
  wfvm_command_hash("checkpoint", lua_tostring(L, 1), "", hash);
  size_t len;
  const char *value = json_encode(L, 3, &len);
  /* past the payload limit it raises, live and on replay alike: nothing was recorded */
  wfvm_check_size(L, len, "the checkpoint's value");
  if (replaying) {
    /* it raised live (nothing was recorded) but returns a value now */
    wfvm_expect(L, vm, "CheckpointRecorded", "checkpoint", lua_tostring(L, 1), "", hash);
    return luaL_error(L, "engine: checkpoint replay diverged"); /* expect went stuck */
  }
  wfvm_append(L, vm, "CheckpointRecorded", 0, lua_tostring(L, 1), hash, value);
  json_decode(L, value, len); /* return what replay would return */
  return 1;
}

/* wf.checkpoint(name, fn): runs fn once and records its value. */
static int l_checkpoint(lua_State *L) {
  wfvm *vm = get_vm(L);
  const char *name = wfvm_check_name(L, 1, "checkpoint");
  luaL_checktype(L, 2, LUA_TFUNCTION);
  wfvm_check_primitive(L, vm, "checkpoint");
  lua_settop(L, 2);
  char hash[17];
  wfvm_command_hash("checkpoint", name, "", hash);
  const hist_event *next = peek(vm);
  if (next && wfvm_event_is(vm, next, "CheckpointRecorded", "checkpoint", name, "", hash)) {
    const hist_event *e = wfvm_expect(L, vm, "CheckpointRecorded", "checkpoint", name, "", hash);
    wfvm_decode_or_nil(L, e->payload);
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
  const char *type = wfvm_check_name(L, 1, "emit");
  wfvm_check_primitive(L, vm, "emit");
  if (lua_isnoneornil(L, 2)) {
    lua_newtable(L);
    lua_replace(L, 2);
  }
  lua_settop(L, 2);
  size_t plen;
  const char *payload = json_encode(L, 2, &plen);
  if (live(vm)) wfvm_check_size(L, plen, "the event's payload");
  char hash[17];
  wfvm_command_hash("emit", type, payload, hash);
  if (wfvm_expect(L, vm, "EventEmitted", "emit", type, payload, hash)) return 0;
  if (vm->cfg.check_only) wfvm_append(L, vm, "EventEmitted", 0, type, hash, NULL);
  int64_t dseq = vm->host.emit(vm->host.ud, type, payload);
  if (dseq < 0) return luaL_error(L, "engine: cannot record event %s", type);
  char ref[48];
  snprintf(ref, sizeof ref, "{\"seq\":%lld}", (long long)dseq);
  wfvm_append(L, vm, "EventEmitted", 0, type, hash, ref);
  return 0;
}

/* wf.span{name=, attributes={...}}: how the run's span in a trace describes
 * it (an agent session says invoke_agent and its gen_ai.agent.* attributes).
 * Telemetry only: nothing is recorded and the script's course does not
 * change, so it may be called, changed or removed in any version of a
 * script; the last call wins. */
#define WF_SPAN_MAX 16384
static int l_span(lua_State *L) {
  wfvm *vm = get_vm(L);
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  size_t n;
  const char *json = json_encode(L, 1, &n);
  if (n > WF_SPAN_MAX) return wfvm_raise_error(L, "InvalidArgument", "wf.span: the description is over 16 KiB");
  char *copy = malloc(n + 1);
  if (!copy) return luaL_error(L, "not enough memory");
  memcpy(copy, json, n + 1);
  free(vm->span);
  vm->span = copy;
  return 0;
}

/* wf.patched(id): true for runs that reach this point with the new code. */
static int l_patched(lua_State *L) {
  wfvm *vm = get_vm(L);
  const char *id = wfvm_check_name(L, 1, "patched");
  wfvm_check_primitive(L, vm, "patched");
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
  wfvm_append(L, vm, "PatchMarker", 0, id, "", NULL);
  lua_pushboolean(L, 1);
  return 1;
}

/* wf.continue_as_new(input): ends this run; a new run starts with input. */
static int l_continue_as_new(lua_State *L) {
  wfvm *vm = get_vm(L);
  wfvm_check_blocking(L, vm, "continue_as_new");
  if (lua_isnoneornil(L, 1)) {
    lua_newtable(L);
    lua_replace(L, 1);
  }
  size_t ilen;
  const char *input = json_encode(L, 1, &ilen);
  if (live(vm)) wfvm_check_size(L, ilen, "the next run's input");
  if (!live(vm)) {
    char where[256], msg[512];
    wfvm_script_where(L, where, sizeof where);
    snprintf(msg, sizeof msg, "non-determinism at event #%lld: history has %s but the script called "
             "continue_as_new at %s", (long long)peek(vm)->seq, peek(vm)->type, where);
    return wfvm_go_stuck(L, vm, msg);
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
  if (vm->parent) { /* the engine's record of who started it (wf.child): never the input's word */
    lua_pushstring(L, vm->parent);
    lua_setfield(L, -2, "parent");
  }
  lua_pushboolean(L, !live(vm));
  lua_setfield(L, -2, "replaying");
  lua_pushinteger(L, (lua_Integer)vm->last_seq); /* events up to here: the same live and on replay */
  lua_setfield(L, -2, "history_length");
  /* a fork (engine fork): {id, run, seq, at, with} of the step whose fork
   * point the run has passed; nil in its copied prefix, as it was there */
  wfvm_push_fork(L, vm);
  lua_setfield(L, -2, "fork");
  return 1;
}

static int l_is_replaying(lua_State *L) {
  lua_pushboolean(L, !live(get_vm(L)));
  return 1;
}

/* ---------------------------------------------------- futures, threads --- */

static future *check_future(lua_State *L, int idx) { return luaL_checkudata(L, idx, FUTURE_MT); }

/* future:wait() -> what the command returns (or raises) once it settles */
static int l_future_wait(lua_State *L) {
  check_future(L, 1);
  lua_settop(L, 1);
  return wfvm_wait_on(L, get_vm(L), 1, WAIT_ONE, "wait");
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
      wfvm_raise_error(L, "InvalidArgument",
                       lua_pushfstring(L,
                                       "wf.%s: item %I is a %s, not a future (from wf.start_activity, "
                                       "wf.start_timer, wf.start_wait_signal, wf.start_child or wf.spawn)",
                                       what, (lua_Integer)i, luaL_typename(L, -1)));
    lua_rawseti(L, -2, i);
  }
}

/* wf.all({f1, f2, ...}) -> {r1, r2, ...} (each first value; a nil leaves a
 * hole) once every one settled; the first error in list order is raised instead */
static int l_all(lua_State *L) {
  check_futures(L, "all");
  return wfvm_wait_on(L, get_vm(L), -1, WAIT_ALL, "all");
}

/* wf.any({f1, f2, ...}) -> i, results of the first to settle */
static int l_any(lua_State *L) {
  check_futures(L, "any");
  if (lua_rawlen(L, -1) == 0) wfvm_raise_error(L, "InvalidArgument", "wf.any: the list of futures is empty");
  return wfvm_wait_on(L, get_vm(L), -1, WAIT_ANY, "any");
}

/* wf.spawn(fn, ...) -> future: fn(...) runs as a durable coroutine of the
 * workflow, from when the caller next waits; the future settles with what it
 * returns or raises. */
static int l_spawn(lua_State *L) {
  wfvm *vm = get_vm(L);
  luaL_checktype(L, 1, LUA_TFUNCTION);
  wfvm_check_primitive(L, vm, "spawn");
  int n = lua_gettop(L);
  wfvm_new_future(L, 0);
  lua_pushvalue(L, -1);
  int fut_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_State *co = lua_newthread(L);
  int ref = luaL_ref(L, LUA_REGISTRYINDEX);
  for (int i = 1; i <= n; i++) lua_pushvalue(L, i);
  lua_xmove(L, co, n); /* fn and its arguments */
  wfvm_add_thread(vm, co, ref, fut_ref, n - 1);
  return 1;
}

static const luaL_Reg future_methods[] = {{"wait", l_future_wait}, {"ready", l_future_ready}, {NULL, NULL}};

/* The metatable of futures, made once per VM (wfvm_build_sandbox). */
void wfvm_future_metatable(lua_State *L) {
  luaL_newmetatable(L, FUTURE_MT);
  luaL_newlib(L, future_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_future_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pushliteral(L, "wf.future");
  lua_setfield(L, -2, "__metatable"); /* getmetatable cannot reach the methods */
  lua_pop(L, 1);
}

static const luaL_Reg workflow_lib[] = {
    {"activity", l_activity},   {"sleep", l_sleep},
    {"wait_signal", l_wait_signal}, {"checkpoint", l_checkpoint},
    {"emit", l_emit},           {"patched", l_patched},
    {"continue_as_new", l_continue_as_new}, {"now", l_now},
    {"random", l_random},       {"uuid", l_uuid},
    {"info", l_info},           {"is_replaying", l_is_replaying},
    {"span", l_span},
    {"acquire", l_acquire},     {"release", l_release},
    {"counter", l_counter},     {"rate", l_rate},
    {"start_activity", l_start_activity}, {"start_timer", l_start_timer},
    {"start_wait_signal", l_start_wait_signal}, {"all", l_all},
    {"any", l_any},             {"spawn", l_spawn},
    {"child", l_child},         {"start_child", l_start_child},
    {NULL, NULL}};

int wfvm_open_workflow(lua_State *L) {
  luaL_newlib(L, workflow_lib);
  return 1;
}
