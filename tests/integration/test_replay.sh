#!/usr/bin/env bash
# Code is history: a run keeps the code it started with after its script is
# edited; `engine replay --script` tells whether an edit replays a run cleanly;
# a run whose replay diverges goes stuck with an error naming the event, both
# commands and the script line, and resumes once fixed.
source "$(dirname "$0")/lib.sh"
mkdir -p "$T/wf"
cp "$SRC/workflows/hello.lua" "$SRC/workflows/hello_activities.lua" "$T/wf/"
cp "$SRC/tests/integration/wf/"*.lua "$T/wf/"
export HELLO_SIDE_EFFECTS="$T/effects"

# --- pinned code after an edit
bg S engine serve
assert_exit "start a run" 3 engine start "$T/wf/hello.lua" --id p1 --detach --input '{"n":2,"sleep":0}'
wait_status p1 waiting:signal
wait_true 30 'engine history p1 | tail -1 | has_line SignalWaitStarted' || true
# the edit adds an activity in front of the greetings and changes the result
sed -i 's/local greetings = {}/local greetings = {}; wf.activity("hello_activities.cleanup", {ticket = "edit"})/' "$T/wf/hello.lua"
sed -i 's/return { greetings = greetings,/return { edited = true, greetings = greetings,/' "$T/wf/hello.lua"
assert_exit "replay check of the edit" 1 engine replay p1 --script "$T/wf/hello.lua"
assert_contains "names the event" "non-determinism at event #4" "$OUT"
assert_contains "names the expected command" "history has ActivityScheduled 'hello_activities.greet'" "$OUT"
assert_contains "names the new command" "issued ActivityScheduled 'hello_activities.cleanup'" "$OUT"
assert_contains "names the script line" "hello.lua:20" "$OUT"
engine signal p1 approval '{"approved":true}'
wait_status p1 completed
res="$(engine show p1 --json)"
assert_contains "the run finished with its original code" '"summary":"2 greetings, approved=true"' "$res"
case "$res" in *edited*) fail "edited code leaked into a run in flight" ;; *) pass "edit did not reach the run" ;; esac
assert_exit "pinned code replays its own history" 0 engine replay p1
assert_exit "the original file replays cleanly" 0 engine replay p1 --script "$SRC/workflows/hello.lua"
# a compatible edit: a comment and a new branch behind patched()
cp "$SRC/workflows/hello.lua" "$T/wf/hello2.lua"
sed -i 's/^local wf = require "workflow"$/local wf = require "workflow" -- edited/' "$T/wf/hello2.lua"
assert_exit "a compatible edit replays cleanly" 0 engine replay p1 --script "$T/wf/hello2.lua"
assert_contains "reports ok" "ok:" "$OUT"

# --- replay determinism: a new run replays to the same result in a fresh VM
assert_exit "start a second run" 3 engine start "$SRC/workflows/hello.lua" --id p2 --detach --input '{"n":1,"sleep":0}'
wait_status p2 waiting:signal
wait_true 30 'engine history p2 | tail -1 | has_line SignalWaitStarted' || true
kill "$S"; wait "$S" 2>/dev/null || true   # evicted and the process gone: next wake replays from the log
before="$(engine history p2 --json | sed -n 1,3p)"
bg S engine serve
engine signal p2 approval '{"approved":true}'
wait_status p2 completed
assert_eq "replayed prefix identical (checkpoint, uuid, now)" "$before" "$(engine history p2 --json | sed -n 1,3p)"
assert_eq "p2 complete" "events=17 activities_completed=2 open_commands=0 last=WorkflowCompleted" "$(verify_history p2)"

# --- non-determinism detected on replay: stuck, then fixed
assert_exit "start a non-deterministic run" 3 engine start "$T/wf/nondet.lua" --id nd --detach
wait_status nd waiting:signal
engine signal nd go '"now"'   # wakes it: replay takes the other branch
wait_status nd stuck
err="$(engine show nd --json)"
assert_contains "stuck error names the event" "non-determinism at event #2" "$err"
assert_contains "stuck error names the expected command" "history has ActivityScheduled 'acts.echo'" "$err"
assert_contains "stuck error names the actual command" "issued TimerStarted 'sleep'" "$err"
assert_contains "stuck error names the line" "nondet.lua:5" "$err"
assert_eq "history untouched by the stuck replay" "events=4 activities_completed=1 open_commands=1 last=SignalWaitStarted" \
  "$(verify_history nd)"
assert_exit "the fix replays cleanly" 0 engine replay nd --script "$T/wf/nondet_fixed.lua"
assert_exit "apply the fix" 0 engine replay nd --script "$T/wf/nondet_fixed.lua" --apply
assert_contains "apply resumes it" "resuming" "$OUT"
wait_status nd completed
assert_contains "resumed with the buffered signal" '"got":"now"' "$(engine show nd --json)"
assert_contains "...under the fixed code" '"fixed":true' "$(engine show nd --json)"

# --- a stuck run that is cancelled ends at once (its clean-up cannot replay)
assert_exit "start another non-deterministic run" 3 engine start "$T/wf/nondet.lua" --id nd2 --detach
wait_status nd2 waiting:signal
engine signal nd2 go '"now"'
wait_status nd2 stuck
assert_exit "cancel the stuck run" 0 engine cancel nd2
wait_status nd2 cancelled 10 || fail "nd2: $(status nd2)"
assert_contains "says its clean-up did not run" "cancelled while stuck" "$(engine show nd2 --json)"
assert_eq "ends with WorkflowCancelled, nothing left" "WorkflowCancelled 0 0" \
  "$(engine history nd2 | tail -1 | awk '{print $3}') $(sql "SELECT count(*) FROM tasks WHERE wf_id='nd2'") $(sql "SELECT count(*) FROM signals WHERE wf_id='nd2'")"
kill "$S"; wait "$S" 2>/dev/null || true
finish
