#!/usr/bin/env bash
# The worker's hooks (lua/activities/worker.lua, contract in engine/worker/hooks.c):
# a user's broken edit of them, or hooks that fail, are said on stderr by name
# and the worker goes on running workflows; `gc` and `policy check` say what
# failed and exit 2. A hook that returns log lines has them printed
# terminal-safe.
source "$(dirname "$0")/lib.sh"
export ENGINE_NO_SWEEP=1
printf '%s\n' 'local wf = require "workflow"' \
  'return function() return { n = wf.activity("acts.echo", { n = 1 }).n } end' >"$T/w.lua"
printf '%s\n' 'return { echo = function(a) return a end }' >"$T/acts.lua"

# --- a syntax error in worker.lua: named, and workflows still run
cp -r "$SRC/lua" "$T/lua"
printf '%s\n' 'return {  -- an edit that broke it' 'watches = function() end end' >"$T/lua/activities/worker.lua"
export ENGINE_LUA_DIR="$T/lua"
bg S engine serve 2>"$T/serve1.log"
wait_serving "$T/serve1.log"
assert_exit "a workflow runs beside broken hooks" 0 engine start "$T/w.lua" --id w1 --quiet
log="$(cat "$T/serve1.log")"
assert_contains "worker.watches is named" "engine: error: worker.watches failed" "$log"
assert_contains "worker.start is named" "engine: error: worker.start failed" "$log"
assert_contains "with the syntax error's place" "worker.lua:2:" "$log"
assert_exit "gc says the hook failed" 2 engine gc
assert_contains "gc names it" "worker.lua:2:" "$ERR"
assert_exit "policy check says the hook failed" 2 engine policy check
kill "$S"; wait "$S" 2>/dev/null || true

# --- hooks that fail at run time and hooks whose log carries escapes
printf '%s\n' 'return {' \
  '  watches = function() return { dirs = { "/nonexistent/dir" } } end,' \
  '  start = function() return { log = { "hello \27[2J from start" } } end,' \
  '  gc = function() error({ type = "Boom", message = "gc broke" }) end,' \
  '}' >"$T/lua/activities/worker.lua"
bg S engine serve 2>"$T/serve2.log"
wait_serving "$T/serve2.log"
assert_exit "a workflow runs beside failing hooks" 0 engine start "$T/w.lua" --id w2 --quiet
log="$(cat "$T/serve2.log")"
assert_contains "a directory that cannot be watched is named" "/nonexistent/dir" "$log"
assert_contains "start's log line is printed" "engine: hello" "$log"
assert_contains "rendered: the escape is shown, not sent" 'hello \x1b[2J from start' "$log"
assert_exit "gc's error reaches the user" 2 engine gc
assert_contains "by its message" "gc broke" "$ERR"
kill "$S"; wait "$S" 2>/dev/null || true
finish
