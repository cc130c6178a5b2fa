/* wftest: the engine side of `engine test` (see wftest.h). A case's
 * environment is a real engine (engine_open) over a database in a temporary
 * directory, never run as a loop: the test drives it step by step through the
 * in-process client calls (engine_submit, engine_signal_local) and dispatch,
 * so workflows go through the same code as under `engine serve`. Two seams
 * make it a test: every activity attempt goes to the test's stubs
 * (engine_config.call_activity), and util_now_ms reads a virtual clock that
 * only the test moves (util_set_clock), so a 30-day timer fires as soon as
 * the test advances the clock past it. The test file's Lua state is a full
 * one (the author's code, like an activity's); its API is lua/enginetest.lua
 * over the module "enginetest.core" defined here. */
#include "wftest.h"

#include <errno.h>
#include <ftw.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "home.h"
#include "json.h"
#include "render.h"
#include "store.h"
#include "util.h"

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2 };

/* Dispatch rounds one settle may take at one instant: a workflow that keeps
 * making work due now (a zero-second timer in a loop) is stopped here. */
#define SETTLE_MAX_ROUNDS 100000

/* ------------------------------------------------------- environment --- */

typedef struct env {
  engine *e;
  char dir[256]; /* the temporary directory of the database; "" once removed */
  int64_t now;   /* the virtual clock, epoch ms */
  lua_State *L;  /* the state calling in, for the activity stubs */
  int stub_ref;  /* registry ref of fn(wf_id, seq, attempt, name, payload) -> ok, json */
  int in_stub;   /* a stub runs: the engine is inside dispatch and may not be driven */
} env;

#define ENV_MT "enginetest.env"

/* Only one environment owns the process's clock at a time. */
static env *clock_owner;

static int64_t virtual_now(void *ud) { return ((env *)ud)->now; }

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path) != 0 && errno != ENOENT ? -1 : 0;
}

/* Frees the engine, gives the clock back and removes the directory (only
 * the one this environment made). Safe to call twice. */
static void env_close(env *v) {
  if (v->e) {
    engine_free(v->e);
    v->e = NULL;
  }
  if (clock_owner == v) {
    util_set_clock(NULL, NULL);
    clock_owner = NULL;
  }
  if (v->dir[0]) {
    nftw(v->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    v->dir[0] = 0;
  }
  if (v->L && v->stub_ref != LUA_NOREF) luaL_unref(v->L, LUA_REGISTRYINDEX, v->stub_ref);
  v->stub_ref = LUA_NOREF;
}

static env *check_env(lua_State *L) {
  env *v = luaL_checkudata(L, 1, ENV_MT);
  if (!v->e) luaL_error(L, "enginetest: the environment is closed");
  if (!v->in_stub) v->L = L;
  return v;
}

/* The same for the methods that drive the engine: never from inside a stub,
 * where the engine is in the middle of an attempt. */
static env *check_driving(lua_State *L) {
  env *v = check_env(L);
  if (v->in_stub) luaL_error(L, "an activity stub cannot drive the engine (start, signal, cancel, advance)");
  return v;
}

/* The engine's activity hook: calls the stub dispatcher of the test (lua/
 * enginetest.lua), in protected mode so that nothing unwinds through the
 * engine. Returns 1 with the result JSON, 0 with an error object. A stub
 * that takes time (t.taking: the dispatcher's third value, ms) moves the
 * virtual clock on by it; past the attempt's start_to_close it ends there,
 * as Timeout, as the activity VM ends a real one. */
static int call_stub(void *ud, const char *wf_id, int64_t seq, int attempt, const char *name, const char *payload,
                     int64_t start_to_close_ms, char **json) {
  env *v = ud;
  lua_State *L = v->L;
  int top = lua_gettop(L);
  int ok = 0;
  lua_rawgeti(L, LUA_REGISTRYINDEX, v->stub_ref);
  lua_pushstring(L, wf_id);
  lua_pushinteger(L, (lua_Integer)seq);
  lua_pushinteger(L, attempt);
  lua_pushstring(L, name);
  lua_pushstring(L, payload ? payload : "null");
  v->in_stub = 1;
  int called = lua_pcall(L, 5, 3, 0);
  v->in_stub = 0;
  if (called == LUA_OK && lua_isstring(L, -2)) {
    ok = lua_toboolean(L, -3);
    int64_t took = (int64_t)lua_tointeger(L, -1);
    if (took > 0 && start_to_close_ms > 0 && took >= start_to_close_ms) {
      v->now += start_to_close_ms;
      ok = 0;
      *json = util_strdup("{\"message\":\"activity exceeded its start_to_close timeout\",\"type\":\"Timeout\"}");
    } else {
      if (took > 0) v->now += took;
      *json = util_strdup(lua_tostring(L, -2));
    }
  } else {
    char *q = json_quote(lua_isstring(L, -1) ? lua_tostring(L, -1) : "the stub dispatcher returned no JSON");
    *json = util_fmt("{\"message\":%s,\"non_retryable\":true,\"type\":\"EngineError\"}", q);
    free(q);
  }
  lua_settop(L, top);
  return ok;
}

/* core.env(stub_dispatcher) -> env: a fresh engine over a throwaway database,
 * its clock at the current wall time. */
static int l_env(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  if (clock_owner) return luaL_error(L, "enginetest: another environment is open (one case at a time)");
  env *v = lua_newuserdatauv(L, sizeof *v, 0);
  memset(v, 0, sizeof *v);
  v->stub_ref = LUA_NOREF;
  luaL_setmetatable(L, ENV_MT);
  const char *tmp = getenv("TMPDIR");
  snprintf(v->dir, sizeof v->dir, "%s/engine-wftest.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(v->dir)) {
    v->dir[0] = 0;
    return luaL_error(L, "enginetest: cannot make a temporary directory: %s", strerror(errno));
  }
  lua_pushvalue(L, 1);
  v->stub_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  v->L = L;
  v->now = util_now_ms();
  util_set_clock(virtual_now, v);
  clock_owner = v;
  char db[300], err[512];
  snprintf(db, sizeof db, "%s/engine.db", v->dir);
  engine_config cfg = {0};
  cfg.db_path = db;
  cfg.call_activity = call_stub;
  cfg.no_tracing = 1; /* stubs in virtual time: no spans for a collector */
  cfg.ud = v;
  if (engine_open(&v->e, &cfg, err, sizeof err) != 0) {
    env_close(v);
    return luaL_error(L, "enginetest: cannot open an engine: %s", err);
  }
  return 1;
}

static int l_env_gc(lua_State *L) {
  env *v = luaL_checkudata(L, 1, ENV_MT);
  env_close(v);
  return 0;
}

/* Commits what the last step wrote; raises when the store refused it. */
static void commit_or_raise(lua_State *L, env *v) {
  if (engine_commit(v->e) != 0) luaL_error(L, "enginetest: the store failed: %s", store_errmsg(engine_store(v->e)));
}

/* env:settle(): runs every task due at the virtual now (wake-ups, activity
 * attempts and retries, timers, signal timeouts) until none is, committing
 * each round as the loop would. */
static int l_settle(lua_State *L) {
  env *v = check_driving(L);
  store *st = engine_store(v->e);
  commit_or_raise(L, v);
  for (int i = 0;; i++) {
    /* steps that waited for the commit just made begin first, as on the loop */
    int deferred = engine_begin_deferred(v->e);
    int64_t next = deferred ? v->now : store_task_next_at(st, "");
    if (next == -2) return luaL_error(L, "enginetest: cannot read the tasks: %s", store_errmsg(st));
    if (next < 0 || next > v->now) break;
    if (i == SETTLE_MAX_ROUNDS)
      return luaL_error(L, "the workflows keep making work due at the same instant (%d rounds): a loop without "
                           "a wait?", SETTLE_MAX_ROUNDS);
    if (!deferred) engine_dispatch_now(v->e);
    commit_or_raise(L, v);
  }
  return 0;
}

/* env:now() -> epoch ms of the virtual clock; env:set_now(ms): moves it
 * forward (never back: the log's time only grows). */
static int l_now(lua_State *L) {
  env *v = check_env(L);
  lua_pushinteger(L, (lua_Integer)v->now);
  return 1;
}

static int l_set_now(lua_State *L) {
  env *v = check_driving(L);
  lua_Integer ms = luaL_checkinteger(L, 2);
  if (ms < v->now) return luaL_error(L, "enginetest: the clock cannot go back");
  v->now = (int64_t)ms;
  return 0;
}

/* env:next_due() -> epoch ms of the earliest task, or nil. */
static int l_next_due(lua_State *L) {
  env *v = check_env(L);
  int64_t next = store_task_next_at(engine_store(v->e), "");
  if (next < 0) lua_pushnil(L);
  else lua_pushinteger(L, (lua_Integer)next);
  return 1;
}

/* env:start(id, script, input_json, identity) -> nil | error message. The
 * input's identity is set to identity, as `engine start` sets it to
 * local:USER (a workflow that reads input.identity sees one). */
static int l_start(lua_State *L) {
  env *v = check_driving(L);
  const char *id = luaL_checkstring(L, 2), *script = luaL_checkstring(L, 3), *input = luaL_checkstring(L, 4);
  const char *identity = luaL_checkstring(L, 5);
  char err[1024];
  char *with = engine_input_with_starter(input, identity, "\"*\"", 0, err, sizeof err); /* a local run: every grant */
  if (!with || engine_check_id(id, err, sizeof err) != 0 ||
      engine_submit(v->e, id, script, with, NULL, err, sizeof err) != 0) {
    free(with);
    engine_commit(v->e); /* nothing of it is written; an open batch goes */
    lua_pushstring(L, err);
    return 1;
  }
  free(with);
  commit_or_raise(L, v);
  return 0;
}

/* env:signal(id, name, payload_json) -> nil | error message. */
static int l_signal(lua_State *L) {
  env *v = check_driving(L);
  const char *id = luaL_checkstring(L, 2), *name = luaL_checkstring(L, 3), *payload = luaL_checkstring(L, 4);
  char err[1024];
  if (engine_signal_local(v->e, id, name, payload, "local:test", err, sizeof err) != 0) {
    engine_commit(v->e);
    lua_pushstring(L, err);
    return 1;
  }
  commit_or_raise(L, v);
  return 0;
}

/* env:cancel(id) -> nil | error message. */
static int l_cancel(lua_State *L) {
  env *v = check_driving(L);
  const char *id = luaL_checkstring(L, 2);
  char err[1024];
  if (engine_cancel_local(v->e, id, "local:test", err, sizeof err) != 0) {
    engine_commit(v->e);
    lua_pushstring(L, err);
    return 1;
  }
  commit_or_raise(L, v);
  return 0;
}

/* env:status(id) -> status, result_json|nil, error_json|nil, run */
static int l_status(lua_State *L) {
  env *v = check_env(L);
  wf_row w;
  int found = store_wf_get(engine_store(v->e), luaL_checkstring(L, 2), &w);
  if (found != 1) return luaL_error(L, "enginetest: no workflow '%s'", lua_tostring(L, 2));
  lua_pushstring(L, w.status);
  if (w.result) lua_pushstring(L, w.result);
  else lua_pushnil(L);
  if (w.error) lua_pushstring(L, w.error);
  else lua_pushnil(L);
  lua_pushinteger(L, (lua_Integer)w.run);
  wf_row_free(&w);
  return 4;
}

static void set_str(lua_State *L, const char *k, const char *s) {
  if (!s) return;
  lua_pushstring(L, s);
  lua_setfield(L, -2, k);
}

static void set_int(lua_State *L, const char *k, int64_t n) {
  lua_pushinteger(L, (lua_Integer)n);
  lua_setfield(L, -2, k);
}

/* env:history(id) -> {{seq, type, ref, name, payload (JSON text), time}...}
 * of the current run. */
static int l_history(lua_State *L) {
  env *v = check_env(L);
  const char *id = luaL_checkstring(L, 2);
  store *st = engine_store(v->e);
  wf_row w;
  if (store_wf_get(st, id, &w) != 1) return luaL_error(L, "enginetest: no workflow '%s'", id);
  hist_list h = {0};
  int rc = store_hist_load(st, id, w.run, &h);
  wf_row_free(&w);
  if (rc != STORE_OK) {
    hist_list_free(&h);
    return luaL_error(L, "enginetest: cannot read the history: %s", store_errmsg(st));
  }
  lua_createtable(L, (int)h.n, 0);
  for (size_t i = 0; i < h.n; i++) {
    lua_createtable(L, 0, 6);
    set_int(L, "seq", h.v[i].seq);
    set_str(L, "type", h.v[i].type);
    set_int(L, "ref", h.v[i].ref);
    set_str(L, "name", h.v[i].name);
    set_str(L, "payload", h.v[i].payload);
    set_int(L, "time", h.v[i].time);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  hist_list_free(&h);
  return 1;
}

static int push_domain(void *ud, const domain_event *e) {
  lua_State *L = ud;
  lua_createtable(L, 0, 4);
  set_int(L, "seq", e->seq);
  set_str(L, "type", e->type);
  set_str(L, "payload", e->payload);
  set_int(L, "time", e->time);
  lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
  return 0;
}

/* env:events(id) -> {{seq, type, payload (JSON text), time}...}: the
 * session's domain events (wf.emit and the engine's own). */
static int l_events(lua_State *L) {
  env *v = check_env(L);
  const char *id = luaL_checkstring(L, 2);
  lua_newtable(L);
  if (store_domain_list(engine_store(v->e), id, 0, push_domain, L) != STORE_OK)
    return luaL_error(L, "enginetest: cannot read the events: %s", store_errmsg(engine_store(v->e)));
  return 1;
}

/* env:replay(id [, script]) -> rc, report: engine_replay_check, the check of
 * `engine replay ID [--script FILE]` (0 replays, 1 diverges, -1 error). */
static int l_replay(lua_State *L) {
  env *v = check_env(L);
  const char *id = luaL_checkstring(L, 2), *script = luaL_optstring(L, 3, NULL);
  char report[2048];
  int rc = engine_replay_check(engine_store(v->e), id, script, 0, report, sizeof report);
  lua_pushinteger(L, rc);
  lua_pushstring(L, report);
  return 2;
}

static int l_close(lua_State *L) {
  env *v = luaL_checkudata(L, 1, ENV_MT);
  if (v->in_stub) return luaL_error(L, "an activity stub cannot close the environment");
  env_close(v);
  return 0;
}

/* core.say(line): one line for people, through render_line (a workflow's
 * error may carry anything). core.say_json(text): one line of JSON. */
static int l_say(lua_State *L) {
  render_line(stdout, 0, "%s", luaL_checkstring(L, 1));
  fflush(stdout);
  return 0;
}

static int l_say_json(lua_State *L) {
  size_t n;
  const char *s = luaL_checklstring(L, 1, &n);
  char *out = json_for_output(s, n);
  fputs(out, stdout);
  fputc('\n', stdout);
  fflush(stdout);
  free(out);
  return 0;
}

/* core.clock() -> seconds of monotonic time, for the report's durations. */
static int l_clock(lua_State *L) {
  lua_pushnumber(L, (lua_Number)util_mono_ms() / 1000.0);
  return 1;
}

/* core.generate_id(script) -> an id as `engine start` makes one. */
static int l_generate_id(lua_State *L) {
  char id[ENGINE_ID_MAX + 1];
  engine_generate_id(luaL_checkstring(L, 1), id, sizeof id);
  lua_pushstring(L, id);
  return 1;
}

static int luaopen_core(lua_State *L) {
  static const luaL_Reg env_methods[] = {
      {"settle", l_settle}, {"now", l_now},         {"set_now", l_set_now}, {"next_due", l_next_due},
      {"start", l_start},   {"signal", l_signal},   {"cancel", l_cancel},   {"status", l_status},
      {"history", l_history}, {"events", l_events}, {"replay", l_replay},   {"close", l_close},
      {NULL, NULL}};
  static const luaL_Reg funcs[] = {{"env", l_env},     {"say", l_say},
                                   {"say_json", l_say_json}, {"clock", l_clock},
                                   {"generate_id", l_generate_id}, {NULL, NULL}};
  luaL_newmetatable(L, ENV_MT);
  luaL_newlib(L, env_methods);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, l_env_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, l_env_gc);
  lua_setfield(L, -2, "__close");
  lua_pop(L, 1);
  luaL_newlib(L, funcs);
  return 1;
}

/* ------------------------------------------------------------ command --- */

static const char *TEST_HELP =
    "usage: engine test [--json] [--run TEXT] FILE_test.lua...\n"
    "\n"
    "Runs workflow tests: each t.case of a test file starts workflows on a real\n"
    "engine over a throwaway database, with the activities stubbed by the case and a\n"
    "virtual clock that skips timers (a 30-day timeout takes milliseconds). After\n"
    "each case every run it started must replay its history (the determinism check\n"
    "of engine replay). A test file:\n"
    "\n"
    "  local t = require \"enginetest\"\n"
    "  t.case(\"times out\", function()\n"
    "    local run = t.start(\"workflows/hello.lua\", { name = \"Ada\" }, {\n"
    "      activities = { [\"hello_activities.greet\"] = function(args) return \"hi \" .. args.name end } })\n"
    "    run:wait_until(\"waiting\")          -- blocks on a timer or a signal\n"
    "    run:advance(3600)                  -- fires what is due, in order, at once\n"
    "    t.assert_event(run, \"approval.decided\", { approved = false })\n"
    "  end)\n"
    "\n"
    "An activity without a stub fails the case naming it. Scripts are found from the\n"
    "current directory, else from the test file's. The API: lua/enginetest.lua.\n"
    "--run TEXT runs only the cases whose name contains TEXT; --json prints one\n"
    "object per case {file, case, ok, message, location, seconds} and a summary.\n"
    "Prints ok - NAME or FAIL - NAME: message (file:line) per case, then a summary.\n"
    "Exit codes: 0 all cases pass, 1 a case fails, 2 usage error or a file that does not load\n";

/* The message handler of loading: the error with the traceback's first line. */
static int load_error(lua_State *L, const char *what, const char *path) {
  render_line(stderr, 0, "engine: test: %s %s: %s", what, path, lua_isstring(L, -1) ? lua_tostring(L, -1) : "(error)");
  return EXIT_USAGE;
}

/* Runs one test file in a Lua state of its own. *passed and *failed count
 * its cases. Returns EXIT_USAGE when it does not load, else 0. */
static int run_file(const char *path, int json, const char *filter, int *passed, int *failed) {
  lua_State *L = luaL_newstate();
  if (!L) return EXIT_USAGE;
  luaL_openlibs(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_core);
  lua_setfield(L, -2, "enginetest.core");
  lua_pushcfunction(L, luaopen_engine_json);
  lua_setfield(L, -2, "json");
  lua_pop(L, 1);
  /* require "enginetest" finds lua/enginetest.lua first; then the test
   * file's own helpers beside it */
  char *dir = util_strdup(path), *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  lua_getglobal(L, "package");
  lua_pushfstring(L, "%s/?.lua;%s/?.lua;", engine_lua_dir(), slash ? dir : ".");
  free(dir);
  lua_getfield(L, -2, "path");
  lua_concat(L, 2);
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
  int rc = 0;
  char *chunk = util_fmt("@%s", path);
  size_t len = 0;
  char err[512];
  char *src = engine_read_script(path, &len, err, sizeof err);
  if (!src) {
    render_line(stderr, 0, "engine: test: %s", err);
    rc = EXIT_USAGE;
    goto done;
  }
  if (luaL_loadbufferx(L, src, len, chunk, "t") != LUA_OK) {
    rc = load_error(L, "cannot load", path);
    goto done;
  }
  /* stack: chunk. The runner loads it (cases register) and runs the cases. */
  lua_getglobal(L, "require");
  lua_pushliteral(L, "enginetest");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    rc = load_error(L, "cannot load the test API for", path);
    goto done;
  }
  lua_getfield(L, -1, "_run_file");
  lua_pushstring(L, path);
  lua_pushvalue(L, -4); /* the chunk */
  lua_pushboolean(L, json);
  if (filter) lua_pushstring(L, filter);
  else lua_pushnil(L);
  if (lua_pcall(L, 4, 2, 0) != LUA_OK) {
    rc = load_error(L, "cannot run", path);
    goto done;
  }
  if (lua_isnil(L, -2)) { /* nil, message: the file did not load */
    rc = load_error(L, "cannot load", path);
    goto done;
  }
  *passed += (int)lua_tointeger(L, -2);
  *failed += (int)lua_tointeger(L, -1);
done:
  free(src);
  free(chunk);
  lua_close(L);
  return rc;
}

int wftest_main(int argc, char **argv) {
  int json = 0;
  const char *filter = NULL;
  const char **files = util_xcalloc((size_t)argc + 1, sizeof *files);
  int nfiles = 0, rc = EXIT_OK;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(TEST_HELP, stdout);
      free(files);
      return EXIT_OK;
    } else if (strcmp(a, "--json") == 0) {
      json = 1;
    } else if (strcmp(a, "--run") == 0 || strncmp(a, "--run=", 6) == 0) {
      filter = a[5] == '=' ? a + 6 : i + 1 < argc ? argv[++i] : NULL;
      if (!filter || !*filter) {
        render_line(stderr, 0, "engine: test: --run needs the TEXT of the case names to run");
        free(files);
        return EXIT_USAGE;
      }
    } else if (a[0] == '-' && a[1]) {
      render_line(stderr, 0, "engine: test: unknown option %s (see engine test --help)", a);
      free(files);
      return EXIT_USAGE;
    } else {
      files[nfiles++] = a;
    }
  }
  if (nfiles == 0) {
    fputs(TEST_HELP, stderr);
    free(files);
    return EXIT_USAGE;
  }
  /* the throwaway databases need no fsync: faster, and nothing is lost that matters */
  if (!getenv("ENGINE_SYNCHRONOUS")) setenv("ENGINE_SYNCHRONOUS", "OFF", 1);
  int passed = 0, failed = 0;
  double t0 = (double)util_mono_ms() / 1000.0;
  for (int i = 0; i < nfiles && rc != EXIT_USAGE; i++) {
    if (run_file(files[i], json, filter, &passed, &failed) != 0) rc = EXIT_USAGE;
  }
  double secs = (double)util_mono_ms() / 1000.0 - t0;
  if (rc != EXIT_USAGE) {
    if (json)
      printf("{\"summary\":{\"failed\":%d,\"passed\":%d,\"seconds\":%.3f}}\n", failed, passed, secs);
    else
      printf("%d case%s: %d passed, %d failed (%.2f s)\n", passed + failed, passed + failed == 1 ? "" : "s", passed,
             failed, secs);
    if (passed + failed == 0) {
      render_line(stderr, 0, "engine: test: no case ran%s", filter ? " (none matches --run)" : "");
      rc = EXIT_USAGE;
    } else if (failed) {
      rc = EXIT_FAILED;
    }
  }
  free(files);
  return rc;
}
