/* fuzz_lua: one libFuzzer driver for the harnesses written in Lua.
 *
 * Built once per target (FUZZ_TARGET, FUZZ_LUA_ENTRY = tests/fuzz/lua/<target>.lua).
 * The VM is set up as the activity VM sets itself up: the standard libraries,
 * the engine's json (also as cjson), fs, safefs, docker.native and
 * webhook.verify modules,
 * package.path to lua/ (and tests/fuzz/lua/ for the harnesses' helpers); http
 * and activity are for the entry file to stub. The entry file returns
 * function(data); it is called with each input.
 *
 * A finding (the process aborts, so libFuzzer keeps the input):
 *   - any Lua error that leaves the entry function (the harness catches what
 *     the code under test is allowed to raise, and raises for the rest);
 *   - more than FUZZ_BUDGET VM instructions for one input (a hang), even when
 *     some pcall swallowed the budget error;
 *   - more than FUZZ_MEM_MB of Lua memory at once (a memory blow-up).
 *
 * Coverage: libFuzzer sees the C code's edges, and through a line hook the Lua
 * lines run (pairs of consecutive lines, hashed into libFuzzer's extra
 * counters), so new paths through the Lua code count as progress. */
#include <lauxlib.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker.h"
#include "json.h"
#include "lua_fs.h"
#include "safefs.h"
#include "webhook_verify.h"
#include "fuzz_args.h"

#define FUZZ_BUDGET 20000000LL /* VM instructions per input: 2 s or so with the line hook and ASan, 4x the largest seed */
#define FUZZ_MEM_MB 512
#define COUNT_STEP 1000

#define LUA_COUNTERS (1 << 16)
__attribute__((used, section("__libfuzzer_extra_counters"))) static uint8_t lua_counters[LUA_COUNTERS];

static lua_State *L;
static int entry_ref = LUA_NOREF;
static long long spent;
static int budget_hit, mem_hit;
static size_t mem_used;
static uintptr_t prev_loc;

static void *counting_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud;
  if (!ptr) osize = 0;
  if (nsize == 0) {
    free(ptr);
    mem_used -= osize;
    return NULL;
  }
  if (nsize > osize && mem_used + (nsize - osize) > (size_t)FUZZ_MEM_MB << 20) {
    mem_hit = 1;
    return NULL;
  }
  void *p = realloc(ptr, nsize);
  if (p) mem_used = mem_used - osize + nsize;
  return p;
}

static void hook(lua_State *S, lua_Debug *ar) {
  if (ar->event == LUA_HOOKLINE) {
    if (lua_getinfo(S, "S", ar)) {
      uintptr_t loc = ((uintptr_t)ar->source * 31u) ^ ((uintptr_t)ar->currentline * 2654435761u);
      uint8_t *c = &lua_counters[(loc ^ (prev_loc >> 1)) % LUA_COUNTERS];
      if (*c < 255) (*c)++;
      prev_loc = loc;
    }
    return;
  }
  spent += COUNT_STEP;
  if (spent > FUZZ_BUDGET) {
    budget_hit = 1;
    /* from now on at every instruction: a pcall loop cannot outlast it */
    lua_sethook(S, hook, LUA_MASKCOUNT, 1);
    luaL_error(S, "fuzz: instruction budget exceeded (%d million)", (int)(FUZZ_BUDGET / 1000000));
  }
}

static int traceback(lua_State *S) {
  const char *msg = lua_tostring(S, 1);
  if (!msg) {
    if (luaL_callmeta(S, 1, "__tostring") && lua_type(S, -1) == LUA_TSTRING)
      msg = lua_tostring(S, -1);
    else
      msg = lua_pushfstring(S, "(a %s value)", luaL_typename(S, 1));
  }
  luaL_traceback(S, S, msg, 1);
  return 1;
}

/* fuzz.fail(msg): a finding the harness names itself. */
static int l_fail(lua_State *S) {
  fprintf(stderr, "fuzz_%s: %s\n", FUZZ_TARGET, luaL_checkstring(S, 1));
  luaL_traceback(S, S, NULL, 1);
  fprintf(stderr, "%s\n", lua_tostring(S, -1));
  abort();
}

/* fuzz.hmac_sha256(key, data): the raw 32 bytes, for harnesses that sign
 * what they deliver (the verifiers' own code is not used to sign). */
static int l_hmac_sha256(lua_State *S) {
  size_t kn, dn;
  const char *k = luaL_checklstring(S, 1, &kn), *d = luaL_checklstring(S, 2, &dn);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!HMAC(EVP_sha256(), k, (int)kn, (const unsigned char *)d, dn, out, &n)) return luaL_error(S, "HMAC failed");
  lua_pushlstring(S, (const char *)out, n);
  return 1;
}

static int open_fuzz(lua_State *S) {
  lua_newtable(S);
  lua_pushcfunction(S, l_fail);
  lua_setfield(S, -2, "fail");
  lua_pushcfunction(S, l_hmac_sha256);
  lua_setfield(S, -2, "hmac_sha256");
  lua_pushstring(S, FUZZ_TARGET);
  lua_setfield(S, -2, "target");
  return 1;
}

static void preload(lua_State *S, const char *name, lua_CFunction open) {
  luaL_getsubtable(S, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(S, open);
  lua_setfield(S, -2, name);
  lua_pop(S, 1);
}

static int setup(lua_State *S) {
  luaL_openlibs(S);
  preload(S, "json", luaopen_engine_json);
  preload(S, "cjson", luaopen_engine_json);
  preload(S, "fs", luaopen_engine_fs);
  preload(S, "safefs", luaopen_engine_safefs);
  preload(S, "docker.native", luaopen_engine_docker);
  preload(S, "webhook.verify", luaopen_engine_webhook_verify);
  preload(S, "fuzz", open_fuzz);
  lua_getglobal(S, "package");
  lua_pushfstring(S, "%s/?.lua;%s/?/init.lua;%s/?.lua;", ENGINE_DEFAULT_LUA_DIR, ENGINE_DEFAULT_LUA_DIR,
                  FUZZ_LUA_HELPERS);
  lua_getfield(S, -2, "path");
  lua_concat(S, 2);
  lua_setfield(S, -2, "path");
  lua_pop(S, 1);
  /* one json module, as in the activity VM: "cjson" is the same table */
  lua_getglobal(S, "require");
  lua_pushliteral(S, "json");
  lua_call(S, 1, 1);
  luaL_getsubtable(S, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_pushvalue(S, -2);
  lua_setfield(S, -2, "cjson");
  lua_pop(S, 2);
  if (luaL_loadfile(S, FUZZ_LUA_ENTRY) != LUA_OK) lua_error(S);
  lua_call(S, 0, 1);
  if (lua_type(S, -1) != LUA_TFUNCTION) luaL_error(S, "%s must return function(data)", FUZZ_LUA_ENTRY);
  return 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  no_leak_check_per_input(argc, argv);
  L = lua_newstate(counting_alloc, NULL);
  if (!L) abort();
  lua_pushcfunction(L, traceback);
  lua_pushcfunction(L, setup);
  if (lua_pcall(L, 0, 1, 1) != LUA_OK) {
    fprintf(stderr, "fuzz_%s: setup failed: %s\n", FUZZ_TARGET, lua_tostring(L, -1));
    exit(1);
  }
  entry_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_settop(L, 0);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  spent = 0;
  budget_hit = mem_hit = 0;
  prev_loc = 0;
  lua_sethook(L, hook, LUA_MASKCOUNT | LUA_MASKLINE, COUNT_STEP);
  lua_pushcfunction(L, traceback);
  lua_rawgeti(L, LUA_REGISTRYINDEX, entry_ref);
  lua_pushlstring(L, (const char *)data, size);
  int rc = lua_pcall(L, 1, 0, 1);
  lua_sethook(L, NULL, 0, 0);
  if (budget_hit) {
    fprintf(stderr, "fuzz_%s: hang: more than %lld VM instructions for one input\n%s\n", FUZZ_TARGET,
            (long long)FUZZ_BUDGET, rc != LUA_OK ? lua_tostring(L, -1) : "(the budget error was swallowed)");
    abort();
  }
  if (mem_hit) {
    fprintf(stderr, "fuzz_%s: memory: more than %d MiB of Lua memory for one input\n%s\n", FUZZ_TARGET, FUZZ_MEM_MB,
            rc != LUA_OK ? lua_tostring(L, -1) : "(the memory error was swallowed)");
    abort();
  }
  if (rc != LUA_OK) {
    fprintf(stderr, "fuzz_%s: a Lua error left the harness:\n%s\n", FUZZ_TARGET, lua_tostring(L, -1));
    abort();
  }
  lua_settop(L, 0);
  /* keep garbage from one input out of the next one's memory bound */
  lua_gc(L, LUA_GCSTEP, 0);
  return 0;
}
