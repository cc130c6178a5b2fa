#!/usr/bin/env bash
# `engine cancel` runs the workflow's cleanup path: the command it waits on
# raises a Cancelled error, cleanup activities still run, the run ends cancelled.
source "$(dirname "$0")/lib.sh"
export HELLO_SIDE_EFFECTS="$T/effects" TEST_SIDE_EFFECTS="$T/effects"

bg P engine start "$SRC/workflows/hello.lua" --id c1 --input '{"n":1,"sleep":0}'
wait_true 30 'engine history c1 2>/dev/null | tail -1 | has_line SignalWaitStarted' || true
assert_exit "cancel a waiting workflow" 0 engine cancel c1
set +e; wait "$P"; rc=$?; set -e
assert_eq "foreground start exits 1 (cancelled)" 1 "$rc"
assert_eq "status cancelled" cancelled "$(status c1)"
assert_contains "cleanup activity ran" "cleanup" "$(cat "$T/effects")"
assert_contains "cleanup emitted its event" "session.failed" "$(verify_events c1)"
assert_eq "history ends cancelled, no command left open" \
  "events=15 activities_completed=2 open_commands=0 last=WorkflowCancelled" "$(verify_history c1)"
assert_exit "cancel again" 2 engine cancel c1

# cancelling while an activity runs abandons the attempt at once
bg S engine serve
assert_exit "start a long activity" 3 engine start "$SRC/tests/integration/wf/cancel_activity.lua" --id c2 --detach
wait_true 30 'grep -Eq "^c2/([0-9]+/)?2 slow" "$T/effects" 2>/dev/null' || true
engine cancel c2
wait_status c2 cancelled 5
assert_contains "cleanup saw the Cancelled error" '"cleanup":"Cancelled"' "$(engine history c2 --json)"
# cancelling a workflow waiting on a timer
assert_exit "start a sleeper" 3 engine start "$SRC/workflows/hello.lua" --id c3 --detach --input '{"n":1,"sleep":3600}'
wait_true 30 'engine history c3 | tail -1 | has_line TimerStarted' || true
engine cancel c3
wait_status c3 cancelled 5
assert_eq "no timer task left behind" 0 "$(engine show c3 --json | lua5.4 -e 'io.write(require"cjson".decode(io.read("a")).tasks)')"
kill "$S"; wait "$S" 2>/dev/null || true
finish
