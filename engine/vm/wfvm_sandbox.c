/* wfvm_sandbox: the environment a workflow script sees. Only safe globals and
 * libraries (no io, os, debug, package), and in place of what would differ
 * between a run and its replay deterministic versions: tostring and
 * string.format without addresses, pairs in a fixed order, a stable
 * table.sort, no collectgarbage, no __gc or __mode; print only live,
 * require of the run's pinned modules. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "wfvm_internal.h"

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

static const char *SAFE_GLOBALS[] = {"assert", "error",    "ipairs", "next",     "pcall",  "rawequal",
                                     "rawget", "rawlen",   "rawset", "select",   "getmetatable",
                                     "tonumber", "type", "xpcall", "_VERSION", NULL};
static const char *SAFE_LIBS[] = {"table", "string", "utf8", "coroutine", NULL};

int wfvm_build_sandbox(lua_State *L) {
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
  lua_pushcfunction(L, wfvm_error_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  wfvm_future_metatable(L);

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
  wfvm_open_workflow(L);
  lua_setfield(L, -2, "workflow");
  luaopen_engine_json(L);
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, "json");
  lua_setfield(L, -2, "cjson");
  lua_setfield(L, LUA_REGISTRYINDEX, "engine.wf_loaded");
  return 0;
}

