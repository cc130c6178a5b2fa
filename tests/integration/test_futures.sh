#!/usr/bin/env bash
# Futures under the real engine (tests/integration/wf/futures.lua): activities
# started together run at once and come back in list order; a kill -9 while
# three run resumes with the finished one recorded once; a signal wins a race
# against an activity still running in memory; wf.spawn coroutines interleave
# the same way after kill -9 at every crash point, and replay exactly;
# cancelling settles every pending future.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/futures.lua"
export TEST_SIDE_EFFECTS="$T/effects"
result() { engine show "$1" --json | jget "result${2:+.$2}"; }
serve() { "$ENGINE" serve 2>>"$T/serve.err" & S=$!; PIDS+=("$S"); }
start() { "$ENGINE" start "$WF" --id "$1" --detach --input "$2" >/dev/null 2>&1 || true; }

# --- three activities at once: every start is logged before any end
serve
start fan '{"mode":"fanout","n":3,"seconds":0.5}'
wait_status fan completed 30 || fail "fan: $(status fan)"
assert_eq "results in list order" '[1,2,3]' "$(result fan results)"
marks="$(grep ' window-' "$T/effects" | awk '{print $2}' | tr '\n' ' ')"
assert_eq "the three ran at once (every start before the first end)" \
  "window-start window-start window-start window-end window-end window-end " "$marks"
h="$(verify_history fan)"
assert_contains "each activity completed once" "activities_completed=3 open_commands=0" "$h"
# the three commands are logged before any outcome
types="$(engine history fan | awk '{printf "%s ", $3}')"
assert_contains "scheduled together" "WorkflowStarted ActivityScheduled ActivityScheduled ActivityScheduled ActivityCompleted" "$types"

# --- kill -9 while two of three run: the quick one is not run again
: >"$T/effects"
rm -f "$T/gate"
# the two windows end once $T/gate exists: after the kill and the restart
start mix "{\"mode\":\"mixed\",\"gate\":\"$T/gate\"}"
wait_true 30 '[ "$(grep -c '\'' window-start'\'' "$T/effects")" -ge 2 ] && grep -q '\'' echo '\'' "$T/effects"' || true
wait_true 30 'engine history mix | has_line ActivityCompleted' || true
kill -9 "$S"; wait "$S" 2>/dev/null || true
assert_eq "killed with two still running" 0 "$(grep -c ' window-end' "$T/effects")"
serve
touch "$T/gate"
wait_status mix completed 30 || fail "mix after restart: $(status mix)"
assert_eq "mixed: result" 'true [1,2]' "$(result mix quick) $(result mix slow)"
assert_eq "the finished one ran once" 1 "$(grep -c ' echo ' "$T/effects")"
assert_eq "the unfinished ones ran again (two starts each)" 4 "$(grep -c ' window-start' "$T/effects")"
assert_contains "mixed: each completed once" "activities_completed=3 open_commands=0" "$(verify_history mix)"

# --- a signal beats an activity that runs in memory; the activity is stopped
start race '{"mode":"race","seconds":30}'
wait_true 30 'grep -q "^race/.* window-start" "$T/effects"' || true
engine signal race go '{"won":"signal"}' >/dev/null
wait_status race completed 10 || fail "race: $(status race)"
assert_eq "the signal settled first" '1 signal' "$(result race first) $(result race value.won)"
assert_eq "no task left behind" 0 "$(sql "SELECT count(*) FROM tasks WHERE wf_id='race'")"

# --- cancel: both pending futures are cancelled, the clean-up runs
start can '{"mode":"cancel"}'
wait_true 30 'engine history can | has_line TimerStarted' || true
engine cancel can >/dev/null
wait_status can cancelled 10 || fail "can: $(status can)"
assert_eq "a CommandCancelled for each pending future" 2 "$(engine history can | grep -c CommandCancelled)"
assert_contains "the clean-up ran" "cleanup" "$(engine history can --json)"
kill "$S"; wait "$S" 2>/dev/null || true

# --- wf.spawn: kill -9 at every crash point, resume, replay
POINTS=""
for n in $(seq 2 16); do POINTS+=" append:$n"; done
POINTS+=" activity.start:2 activity.end:1 activity.end:3 activity.record:2 timer.fire:1 timer.fire:3 commit.after:2"
cases=0 hit=0
for pt in $POINTS; do
  cases=$((cases + 1)); id="sp$cases"
  start "$id" '{"mode":"spawn"}'
  set +e; ENGINE_CRASH="$pt" "$ENGINE" start "$WF" --id "$id" --quiet >/dev/null 2>"$T/crash.err"; rc=$?; set -e
  [ "$rc" == 137 ] && hit=$((hit + 1)) || echo "# $pt: not reached (exit $rc)"
  for _ in 1 2 3; do
    [ "$(status "$id")" == completed ] && break
    "$ENGINE" start "$WF" --id "$id" --quiet >/dev/null 2>"$T/resume.err" || true
  done
  r="$(result "$id")"
  case "$r" in '["x:1,2","y:1,2",'*) ;; *) fail "$pt: result $r ($(status "$id"): $(cat "$T/resume.err"))"; continue ;; esac
  h="$(verify_history "$id")"
  case "$h" in *"activities_completed=4 open_commands=0 last=WorkflowCompleted"*) ;; *) fail "$pt: history $h" ;; esac
  engine replay "$id" >"$T/replay.out" 2>&1 || fail "$pt: replay: $(cat "$T/replay.out")"
done
[ "$hit" -ge $((cases - 2)) ] && pass "crash points reached: $hit of $cases" || fail "only $hit of $cases crash points reached"
finish
