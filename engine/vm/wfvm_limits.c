/* wfvm_limits: what stops a runaway workflow script, which neither pcall nor
 * a loop can get around: the memory limit (a counting allocator), the
 * instruction budget (a count hook), the size of a value the log would hold;
 * and their defaults from the environment. (The limits a script asks for,
 * wf.acquire and wf.rate, are primitives: wfvm_primitives.c.) */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"
#include "wfvm_internal.h"

/* ---------------------------------------------------------------- memory --- */

/* Counting allocator: refuses growth past the limit, which raises LUA_ERRMEM in
 * the script; the hook then stops the run so pcall cannot swallow it. */
void *wfvm_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
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

/* Instruction budget: a count hook that, once over budget (or out of memory),
 * yields the coroutine out from under any pcall. */
void wfvm_count_hook(lua_State *L, lua_Debug *ar) {
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

/* ------------------------------------------------------------ payloads --- */

/* A value the log would hold: at most the payload limit (json.h). Checked on
 * the live path where a replay reads the recorded value instead, so a changed
 * limit does not change those replays. */
void wfvm_check_size(lua_State *L, size_t len, const char *what) {
  char msg[200];
  if (json_check_size(len, what, msg, sizeof msg) != 0) wfvm_raise_error(L, "PayloadTooLarge", msg);
}

/* ------------------------------------------------------------ defaults --- */

void wfvm_config_default(wfvm_config *c) {
  memset(c, 0, sizeof *c);
  const char *m = getenv("ENGINE_WF_MEMORY_MB");
  c->mem_limit = (size_t)(m && atoi(m) > 0 ? atoi(m) : 64) << 20;
  const char *i = getenv("ENGINE_WF_INSTRUCTIONS");
  c->instr_limit = i && atoll(i) > 0 ? atoll(i) : 200000000;
}
