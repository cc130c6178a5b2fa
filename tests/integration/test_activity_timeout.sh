#!/usr/bin/env bash
# A start_to_close timeout cannot be caught by the activity itself: a pcall
# around a CPU-bound loop, a loop of such pcalls, a loop in a coroutine of
# the activity's own; each attempt ends as Timeout and is retried as one.
# (`timeout -s KILL 120` only keeps a broken engine from hanging the suite:
# one spinning in Lua never gets to its SIGTERM handler.)
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/retry.lua"
run() { # ID ACTIVITY -> the workflow's result
  timeout -s KILL 120 "$ENGINE" start "$WF" --id "$1" --quiet \
    --input "{\"activity\":\"timeout_acts.$2\",\"options\":{\"start_to_close\":0.3,\"retry\":{\"initial_interval\":0.01,\"max_attempts\":2}}}" \
    2>"$T/$1.err" || true
}
for act in caught caught_loop nested; do
  out="$(run "t_$act" "$act")"
  assert_contains "$act: the attempt ends as Timeout" '"type":"Timeout"' "$out"
  assert_contains "$act: and is retried like one" '"attempts":2' "$out"
done
assert_eq "an activity within its time completes" '{"ok":true,"value":"in time"}' "$(run t_quick quick)"
finish
