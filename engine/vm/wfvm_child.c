/* wfvm_child: wf.child(script, input, opts) and wf.start_child, a workflow
 * started by this one. The command is ChildStarted, named by the child's id
 * and hashed over its script, input and options, so a replay that starts
 * another child (or none) where the log has one is non-determinism like any
 * other command. The worker creates the child in the same commit as the
 * event, and answers it with ChildCompleted, ChildFailed or ChildCancelled
 * when the child ends (engine/worker/children.c). */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "names.h"
#include "util.h"
#include "wfvm_internal.h"

static const char *const option_names[] = {"id", "max_depth", "max_fanout", "parent_close", "timeout", NULL};

static int known_option(const char *k) {
  for (const char *const *o = option_names; *o; o++)
    if (strcmp(k, *o) == 0) return 1;
  return 0;
}

/* Refuses an options table with a key it does not know; of several, the
 * least (the message is the same in a run and its replay). */
static void check_option_names(lua_State *L, int t, const char *what) {
  char worst[64] = "";
  int found = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) {
      lua_pop(L, 1);
      wfvm_raise_error(L, "InvalidOptions", lua_pushfstring(L, "wf.%s: option names are strings", what));
    }
    const char *k = lua_tostring(L, -1);
    if (!known_option(k) && (!found || strcmp(k, worst) < 0)) {
      snprintf(worst, sizeof worst, "%s", k);
      found = 1;
    }
  }
  if (found)
    wfvm_raise_error(L, "InvalidOptions",
                     lua_pushfstring(L, "wf.%s: unknown option '%s' (id, max_depth, max_fanout, parent_close, timeout)",
                                     what, worst));
}

/* A limit the call asks for (max_depth, max_fanout): a whole number, 1 or
 * more. Whether it is within the engine's limit the worker decides, and
 * records, so that a replay does not depend on the setting. */
static void check_limit_option(lua_State *L, const char *what, const char *key) {
  if (lua_getfield(L, 3, key) != LUA_TNIL) {
    lua_Number v = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : 0;
    if (lua_type(L, -1) != LUA_TNUMBER || v != v || v < 1 || v > 1e9 || v != (lua_Number)(long long)v)
      wfvm_raise_error(L, "InvalidOptions",
                       lua_pushfstring(L, "wf.%s: option '%s' must be a whole number from 1 to 1000000000", what, key));
  }
  lua_pop(L, 1);
}

/* The id of the n-th child of this run: the parent's id and the number, so
 * the same on replay; a later run of the same id (continue-as-new) numbers
 * its children apart. */
static void derived_id(const wfvm *vm, int64_t n, char *out, size_t len) {
  if (vm->run <= 1) snprintf(out, len, "%s.%lld", vm->wf_id, (long long)n);
  else snprintf(out, len, "%s.r%lld.%lld", vm->wf_id, (long long)vm->run, (long long)n);
}

/* wf.child(script, input, opts) -> the child's result, or raises its error
 * {type, message, child}; wf.start_child(...) -> its future. opts: id (the
 * child's workflow id), parent_close (terminate | request_cancel | abandon:
 * what this run's end does to a child still running), timeout (seconds: the
 * child is cancelled past it and the wait raises Timeout), max_depth and
 * max_fanout (less than the engine's child_max_depth, child_max_fanout). */
int wfvm_child_command(lua_State *L, int wait) {
  wfvm *vm = get_vm(L);
  const char *what = wait ? "child" : "start_child";
  const char *script = wfvm_check_name(L, 1, what);
  if (!*script || strlen(script) > 1024)
    wfvm_raise_error(L, "InvalidArgument",
                     lua_pushfstring(L, "wf.%s: the script must be 1-1024 bytes (a name like \"child.lua\" or a path)",
                                     what));
  if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2))
    wfvm_raise_error(L, "InvalidArgument",
                     lua_pushfstring(L, "wf.%s: the input must be a table (the child's input object), not a %s", what,
                                     luaL_typename(L, 2)));
  if (!lua_isnoneornil(L, 3) && !lua_istable(L, 3))
    wfvm_raise_error(L, "InvalidOptions",
                     lua_pushfstring(L, "wf.%s: the options must be a table, not a %s", what, luaL_typename(L, 3)));
  lua_settop(L, 3);
  if (lua_isnil(L, 2)) {
    lua_newtable(L);
    lua_replace(L, 2);
  }
  if (lua_isnil(L, 3)) {
    lua_newtable(L);
    lua_replace(L, 3);
  }
  check_option_names(L, 3, what);
  char id[ENGINE_ID_MAX * 2 + 64], err[256];
  int given = lua_getfield(L, 3, "id") != LUA_TNIL;
  if (given && lua_type(L, -1) != LUA_TSTRING)
    wfvm_raise_error(L, "InvalidOptions", lua_pushfstring(L, "wf.%s: option 'id' must be a string", what));
  if (given) snprintf(id, sizeof id, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  int pc = lua_getfield(L, 3, "parent_close");
  const char *close = pc == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  if (pc != LUA_TNIL && (!close || (strcmp(close, "terminate") && strcmp(close, "request_cancel") &&
                                    strcmp(close, "abandon"))))
    wfvm_raise_error(L, "InvalidOptions",
                     lua_pushfstring(L, "wf.%s: option 'parent_close' must be terminate, request_cancel or abandon",
                                     what));
  lua_pop(L, 1);
  if (lua_getfield(L, 3, "timeout") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TNUMBER)
      wfvm_raise_error(L, "InvalidOptions", lua_pushfstring(L, "wf.%s: option 'timeout' must be a number", what));
    char w[64];
    snprintf(w, sizeof w, "wf.%s: option 'timeout'", what);
    wfvm_check_seconds(L, lua_tonumber(L, -1), "InvalidOptions", w);
  }
  lua_pop(L, 1);
  check_limit_option(L, what, "max_depth");
  check_limit_option(L, what, "max_fanout");
  if (wait) wfvm_check_blocking(L, vm, what);
  else wfvm_check_primitive(L, vm, what);
  /* numbered whether or not it has an id of its own: the next derived one
   * stays the same when a script gives one child an id */
  int64_t n = ++vm->nchildren;
  if (!given) derived_id(vm, n, id, sizeof id);
  if (engine_check_id(id, err, sizeof err) != 0)
    wfvm_raise_error(L, "InvalidArgument",
                     lua_pushfstring(L, "wf.%s: the child's id: %s%s", what, err,
                                     given ? "" : " (the id made from this workflow's: pass opts.id)"));
  if (strcmp(id, vm->wf_id) == 0)
    wfvm_raise_error(L, "InvalidArgument", lua_pushfstring(L, "wf.%s: a workflow cannot be its own child", what));
  /* {input, options, script}: canonical key order, the command's arguments
   * and the event's payload alike */
  lua_createtable(L, 0, 3);
  lua_pushvalue(L, 2);
  lua_setfield(L, -2, "input");
  lua_pushvalue(L, 3);
  lua_setfield(L, -2, "options");
  lua_pushstring(L, script);
  lua_setfield(L, -2, "script");
  size_t len;
  const char *args = json_encode(L, lua_gettop(L), &len);
  if (live(vm)) wfvm_check_size(L, len, "the child's input"); /* a replay reads what was recorded */
  return wfvm_command(L, vm, wait, "child", "ChildStarted", id, args, args);
}
