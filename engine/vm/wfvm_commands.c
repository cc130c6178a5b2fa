/* wfvm_commands: what a primitive does with the history. On replay a command
 * must match the log's next event, live it is appended; either way it is
 * pending until its outcome settles its future, and a thread that waits on
 * a future yields to the scheduler (wfvm.c) until then. */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"
#include "wfvm_internal.h"

/* ------------------------------------------------------------ determinism --- */

/* Where in the script the current primitive was called from. */
void wfvm_script_where(lua_State *L, char *out, size_t n) {
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
void wfvm_command_hash(const char *kind, const char *name, const char *args, char out[17]) {
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

/* Arguments are checked before anything is recorded. A name is a C string in
 * the log, so one with a NUL byte would be cut there: it is refused. */
const char *wfvm_check_name(lua_State *L, int arg, const char *what) {
  size_t n;
  const char *s = luaL_checklstring(L, arg, &n);
  if (strlen(s) != n) {
    char msg[128];
    snprintf(msg, sizeof msg, "wf.%s: the name contains a NUL byte at byte %zu", what, strlen(s) + 1);
    wfvm_raise_error(L, "InvalidArgument", msg);
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
void wfvm_check_seconds(lua_State *L, lua_Number v, const char *type, const char *what) {
  char msg[200];
  if (util_check_seconds(v, what, msg, sizeof msg) != 0) wfvm_raise_error(L, type, msg);
}

/* Stops the run as stuck: yields (so pcall cannot catch it) and never resumes. */
int wfvm_go_stuck(lua_State *L, wfvm *vm, const char *msg) {
  if (!vm->stuck_msg) vm->stuck_msg = util_strdup(msg);
  if (L == vm->current && lua_isyieldable(L)) {
    vm->engine_yield = 1;
    return lua_yield(L, 0);
  }
  return luaL_error(L, "%s", msg);
}

/* ------------------------------------------------------------------ forks --- */

const char *wfvm_recorded_as(const wfvm *vm, int64_t seq) {
  for (size_t i = 0; i < vm->nforks; i++)
    if (seq <= vm->forks[i].at) return strcmp(vm->forks[i].id, vm->wf_id) != 0 ? vm->forks[i].id : NULL;
  return NULL;
}

/* A fork's steps from its WorkflowStarted payload (the table on top of L):
 * "forks", a list of {id, run, seq, at, with}, oldest first (ops/fork.c
 * writes it); kept in vm->forks and the list in the registry. 0, or -1 when
 * it is there and not such a list. */
int wfvm_read_forks(wfvm *vm, lua_State *L) {
  lua_pushliteral(L, "forks");
  lua_rawget(L, -2);
  int rc = 0;
  if (lua_istable(L, -1)) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    vm->forks = util_xcalloc(n ? (size_t)n : 1, sizeof *vm->forks);
    for (lua_Integer i = 1; i <= n && rc == 0; i++) {
      if (lua_rawgeti(L, -1, i) != LUA_TTABLE) {
        lua_pop(L, 1);
        rc = -1;
        break;
      }
      lua_pushliteral(L, "id");
      int tid = lua_rawget(L, -2);
      lua_pushliteral(L, "at");
      lua_rawget(L, -3);
      int whole = 0;
      lua_Integer v = lua_tointegerx(L, -1, &whole); /* a float with a whole value too (the JSON decoder's) */
      int64_t at = whole ? (int64_t)v : -1;
      if (tid != LUA_TSTRING || at < 1 || (vm->nforks && at < vm->forks[vm->nforks - 1].at)) {
        rc = -1;
      } else {
        vm->forks[vm->nforks].id = util_strdup(lua_tostring(L, -2));
        vm->forks[vm->nforks++].at = at;
      }
      lua_pop(L, 3);
    }
    if (rc == 0) {
      lua_pushvalue(L, -1);
      vm->forks_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
  } else if (!lua_isnil(L, -1)) {
    rc = -1;
  }
  lua_pop(L, 1);
  return rc;
}

/* The fork step in force at the run's place in its history (the last one
 * whose fork point it has passed), pushed, or nil: what wf.info().fork says.
 * The same live and on replay: it depends on the history read so far. */
void wfvm_push_fork(lua_State *L, const wfvm *vm) {
  size_t k = 0;
  for (size_t i = 0; i < vm->nforks; i++)
    if (vm->last_seq >= vm->forks[i].at) k = i + 1;
  if (!k || vm->forks_ref == LUA_NOREF) {
    lua_pushnil(L);
    return;
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, vm->forks_ref);
  lua_rawgeti(L, -1, (lua_Integer)k);
  lua_remove(L, -2);
}

/* Whether s[0..n) is an id made from self for a child: self.N or self.rR.N
 * (wfvm_child.c), of which `rest` is what follows self. */
static int derived_rest(const char *rest, size_t n) {
  if (n < 2 || rest[0] != '.') return 0;
  size_t i = 1;
  if (rest[i] == 'r') {
    size_t d = ++i;
    while (i < n && rest[i] >= '0' && rest[i] <= '9') i++;
    if (i == d || i >= n || rest[i] != '.') return 0;
    i++;
  }
  size_t d = i;
  while (i < n && rest[i] >= '0' && rest[i] <= '9') i++;
  return i > d && i == n;
}

/* text with this workflow's id (self) read as other's: the whole text when
 * it is self or an id made from it for a child (a command's name); in JSON
 * (json), every string that is. Malloc'd. An id is of A-Z a-z 0-9 . _ : @ -
 * only, so a JSON string holding one has no escapes. */
static char *read_as(const char *text, const char *self, const char *other, int json) {
  size_t sn = strlen(self), on = strlen(other), tn = strlen(text);
  if (!json) {
    if (strncmp(text, self, sn) == 0 && (text[sn] == 0 || derived_rest(text + sn, tn - sn)))
      return util_fmt("%s%s", other, text + sn);
    return util_strdup(text);
  }
  ubuf b = {0};
  const char *p = text;
  while (*p) {
    const char *q = strchr(p, '"');
    if (!q) break;
    /* a string starts at q (JSON text: quotes inside strings are escaped) */
    const char *end = q + 1;
    while (*end && *end != '"') end += end[0] == '\\' && end[1] ? 2 : 1;
    ubuf_add(&b, p, (size_t)(q - p) + 1);
    size_t n = (size_t)(end - q - 1);
    if (n >= sn && strncmp(q + 1, self, sn) == 0 && (n == sn || derived_rest(q + 1 + sn, n - sn))) {
      ubuf_add(&b, other, on);
      ubuf_add(&b, q + 1 + sn, n - sn);
    } else {
      ubuf_add(&b, q + 1, n);
    }
    if (!*end) {
      p = end;
      break;
    }
    ubuf_add(&b, "\"", 1);
    p = end + 1;
  }
  ubuf_add(&b, p, strlen(p) + 1); /* with the NUL */
  return b.p;
}

int wfvm_event_is(const wfvm *vm, const hist_event *e, const char *type, const char *kind, const char *name,
                  const char *args, const char *hash) {
  if (strcmp(e->type, type) != 0) return 0;
  if (strcmp(e->name ? e->name : "", name) == 0 && strcmp(e->hash ? e->hash : "", hash) == 0) return 1;
  const char *other = wfvm_recorded_as(vm, e->seq);
  if (!other) return 0;
  char *n2 = read_as(name, vm->wf_id, other, 0), *a2 = read_as(args, vm->wf_id, other, 1), h2[17];
  wfvm_command_hash(kind, n2, a2, h2);
  int same = strcmp(e->name ? e->name : "", n2) == 0 && strcmp(e->hash ? e->hash : "", h2) == 0;
  free(n2);
  free(a2);
  return same;
}

/* Matches a command against history. Returns the matched event (consumed), or
 * NULL when the run is live. On mismatch the run goes stuck (does not return). */
const hist_event *wfvm_expect(lua_State *L, wfvm *vm, const char *type, const char *kind, const char *name,
                              const char *args, const char *hash) {
  const hist_event *e = peek(vm);
  if (!e) return NULL;
  if (!wfvm_event_is(vm, e, type, kind, name, args, hash)) {
    char where[256], msg[1024];
    wfvm_script_where(L, where, sizeof where);
    snprintf(msg, sizeof msg,
             "non-determinism at event #%lld: history has %s '%s' (args %s) but the script issued %s '%s' "
             "(args %s) at %s",
             (long long)e->seq, e->type, e->name ? e->name : "", e->hash ? e->hash : "-", type, name, hash, where);
    wfvm_go_stuck(L, vm, msg);
    return NULL;
  }
  vm->cursor++;
  vm->now_ms = e->time;
  vm->last_seq = e->seq;
  return e;
}

/* Appends a command event in a live run; in check-only mode stops the run. */
int64_t wfvm_append(lua_State *L, wfvm *vm, const char *type, int64_t ref, const char *name, const char *hash,
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

void wfvm_check_primitive(lua_State *L, wfvm *vm, const char *what) {
  if (L != vm->current)
    luaL_error(L, "wf.%s must be called from the workflow itself or a wf.spawn coroutine, not from a coroutine "
               "the script created", what);
  if (vm->in_checkpoint) luaL_error(L, "wf.%s cannot be called inside a checkpoint function", what);
}

/* Blocking primitives yield: refuse before anything is appended when the
 * caller cannot yield (a table.sort comparator, a gsub callback, a metamethod). */
void wfvm_check_blocking(lua_State *L, wfvm *vm, const char *what) {
  wfvm_check_primitive(L, vm, what);
  if (!lua_isyieldable(L))
    luaL_error(L, "wf.%s cannot be called here: it waits, and this caller (a C function such as table.sort or "
               "string.gsub) cannot wait", what);
}

/* ------------------------------------------------------------- outcomes --- */

/* Raises {type=, message=} as a workflow error (pcall-able, with __tostring). */
int wfvm_raise_error(lua_State *L, const char *type, const char *message) {
  lua_newtable(L);
  lua_pushstring(L, type);
  lua_setfield(L, -2, "type");
  lua_pushstring(L, message);
  lua_setfield(L, -2, "message");
  luaL_setmetatable(L, ERROR_MT);
  return lua_error(L);
}

int wfvm_error_tostring(lua_State *L) {
  lua_getfield(L, 1, "type");
  lua_getfield(L, 1, "message");
  lua_pushfstring(L, "%s: %s", luaL_optstring(L, -2, "Error"), luaL_optstring(L, -1, ""));
  return 1;
}

void wfvm_decode_or_nil(lua_State *L, const char *payload) {
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
      strcmp(t, "RateCharged") == 0 || strcmp(t, "ChildCompleted") == 0) {
    wfvm_decode_or_nil(L, e->payload);
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
  if (strcmp(t, "CommandCancelled") == 0) return wfvm_raise_error(L, "Cancelled", "the workflow was cancelled");
  if (strcmp(t, "ActivityFailed") == 0 || strcmp(t, "ChildFailed") == 0 || strcmp(t, "ChildCancelled") == 0) {
    wfvm_decode_or_nil(L, e->payload);
    if (!lua_istable(L, -1))
      return wfvm_raise_error(L, t[0] == 'A' ? "ActivityError" : "ChildError", t[0] == 'A' ? "activity failed" : "child failed");
    luaL_setmetatable(L, ERROR_MT);
    return lua_error(L);
  }
  return luaL_error(L, "engine: unexpected outcome event %s at #%lld", t, (long long)e->seq);
}

static int outcome_is_error(const char *t) {
  return strcmp(t, "CommandCancelled") == 0 || strcmp(t, "ActivityFailed") == 0 || strcmp(t, "ChildFailed") == 0 ||
         strcmp(t, "ChildCancelled") == 0;
}

void wfvm_free_cmd(wfvm_cmd *c) {
  free(c->name);
  free(c->payload);
  memset(c, 0, sizeof *c);
}

pending *wfvm_find_pending(const wfvm *vm, int64_t seq) {
  for (size_t i = 0; i < vm->npend; i++)
    if (vm->pend[i].cmd.seq == seq) return &vm->pend[i];
  return NULL;
}

/* ------------------------------------------------------------- futures --- */

/* A new unsettled future on top of L; its user value (what settled it) is
 * made when it settles. */
future *wfvm_new_future(lua_State *L, int64_t seq) {
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
void wfvm_settle(wfvm *vm, lua_State *L, int idx) {
  future *f = lua_touserdata(L, idx);
  lua_setiuservalue(L, idx, 1);
  f->settled = 1;
  f->order = ++vm->settles;
}

/* The outcome event of a pending command (live: delivered; replay: read from
 * the log) settles its future; the run's clock is now the event's. */
void wfvm_take_outcome(wfvm *vm, const hist_event *e) {
  pending *p = wfvm_find_pending(vm, e->ref);
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
  wfvm_settle(vm, L, f);
  lua_pop(L, 1);
  luaL_unref(L, LUA_REGISTRYINDEX, p->fut_ref);
  wfvm_free_cmd(&p->cmd);
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
  hist_event e = {lua_tointeger(L, -2), lua_tostring(L, -4), 0, NULL, NULL, lua_tostring(L, -3), lua_tointeger(L, -1),
                  NULL};
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
int wfvm_wait_done(lua_State *L, int idx, int mode, lua_Integer *which) {
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
  wfvm_wait_done(L, idx, mode, &which);
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
int wfvm_wait_on(lua_State *L, wfvm *vm, int idx, int mode, const char *what) {
  idx = lua_absindex(L, idx);
  if (wfvm_wait_done(L, idx, mode, NULL)) return wait_results(L, idx, mode);
  wfvm_check_blocking(L, vm, what);
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
  wfvm_command_hash(kind, name, args_json, hash);
  future *f = wfvm_new_future(L, 0); /* before anything is recorded: it may run out of memory */
  if (vm->npend == vm->cappend) {
    size_t cap = vm->cappend ? vm->cappend * 2 : 8;
    pending *np = realloc(vm->pend, cap * sizeof *np);
    if (!np) luaL_error(L, "not enough memory");
    vm->pend = np;
    vm->cappend = cap;
  }
  pending p = {0};
  const hist_event *e = wfvm_expect(L, vm, type, kind, name, args_json, hash);
  if (e) {
    p.cmd.seq = e->seq;
    p.cmd.payload = util_strdup(e->payload);
    p.cmd.time = e->time;
  } else {
    p.cmd.seq = wfvm_append(L, vm, type, 0, name, hash, payload_live);
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
int wfvm_block_on(lua_State *L, wfvm *vm, const char *kind, const char *type, const char *name,
                  const char *args_json, const char *payload_live) {
  issue(L, vm, kind, type, name, args_json, payload_live);
  return wfvm_wait_on(L, vm, -1, WAIT_ONE, kind);
}

/* A command that waits (wait) or returns its future. */
int wfvm_command(lua_State *L, wfvm *vm, int wait, const char *kind, const char *type, const char *name,
                 const char *args_json, const char *payload_live) {
  if (wait) return wfvm_block_on(L, vm, kind, type, name, args_json, payload_live);
  issue(L, vm, kind, type, name, args_json, payload_live);
  return 1;
}

/* Adds a thread to the scheduler, ready to run with the nargs values on its stack. */
void wfvm_add_thread(wfvm *vm, lua_State *co, int ref, int fut_ref, int nargs) {
  if (vm->nthreads == vm->capthreads) {
    vm->capthreads = vm->capthreads ? vm->capthreads * 2 : 4;
    vm->threads = util_xrealloc(vm->threads, vm->capthreads * sizeof *vm->threads);
  }
  vthread t = {co, ref, fut_ref, 1, nargs, LUA_NOREF, WAIT_ONE, -1};
  vm->threads[vm->nthreads++] = t;
}
