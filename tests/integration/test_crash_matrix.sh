#!/usr/bin/env bash
# kill -9 at many points of a workflow with activities, a timer and a signal,
# then resume it: it completes with the same result, every activity's side
# effect happened at least once, each result was recorded exactly once, and the
# history and the domain events have no gap and no duplicate, and every hash
# chain is whole (engine verify --all).
#
# Part 1: fault injection. ENGINE_CRASH=point:n kills the engine with SIGKILL
#         the n-th time it passes a named point (mid-transaction, just before or
#         after a commit, around activity execution, when a timer fires, when a
#         signal is taken). Half the cases send the signal before the crash.
# Part 2: random delays. `engine serve` runs 12 workflows and is killed with
#         kill -9 at random moments, four times, then restarted to finish.
source "$(dirname "$0")/lib.sh"
HELLO="$SRC/workflows/hello.lua"
INPUT='{"name":"Ada","n":3,"sleep":0.1}'
WANT_HISTORY="events=23 activities_completed=4 open_commands=0 last=WorkflowCompleted"
WANT_EVENTS="session.created,agent.message,agent.message,agent.message,approval.requested,approval.decided,session.completed"

POINTS=""
for n in $(seq 1 22); do POINTS+=" append:$n"; done
# (odd cases signal late: a run with the signal already there commits only
# twice, so the third commits sit on odd cases)
POINTS+=" commit.before:1 commit.before:2 commit.before:3 commit.after:1 commit.after:3 commit.after:2"
POINTS+=" activity.start:1 activity.start:4 activity.end:2 activity.end:4 activity.record:1 activity.record:3"
POINTS+=" timer.fire:1 signal.take:1"

# Waits for the workflow's process (PID) to exit, sending the signal once the
# workflow waits for it (SIGNALLED=0: not sent yet; set to 1 once it is).
# Sets RC to the process's exit status. Looks at the history only while the
# signal is owed (each look is an engine process: 20 ms apart at first, then
# further, as every wait in lib.sh); after that it waits for the process.
run_until_exit() {
  local id="$1" pid="$2" look=0
  while [ "$SIGNALLED" == 0 ] && kill -0 "$pid" 2>/dev/null; do
    if engine history "$id" 2>/dev/null | tail -1 | has_line SignalWaitStarted; then
      engine signal "$id" approval '{"approved":true}' 2>/dev/null && SIGNALLED=1
    fi
    [ "$SIGNALLED" == 1 ] || { look=$((look + 1)); poll_pause "$look"; } # (a refused signal too)
  done
  set +e; wait "$pid" 2>/dev/null; RC=$?; set -e
}

cases=0 killed=0 extra=0 hit=0
for pt in $POINTS; do
  cases=$((cases + 1))
  id="c$cases"
  export HELLO_SIDE_EFFECTS="$T/effects.$id"
  SIGNALLED=0
  "$ENGINE" start "$HELLO" --id "$id" --detach --input "$INPUT" >/dev/null 2>&1 || true
  if [ $((cases % 2)) == 0 ]; then engine signal "$id" approval '{"approved":true}' 2>/dev/null; SIGNALLED=1; fi
  ENGINE_CRASH="$pt" "$ENGINE" start "$HELLO" --id "$id" --quiet >/dev/null 2>"$T/crash.err" &
  run_until_exit "$id" "$!"
  # the crash point was reached only if the kernel says SIGKILL ended the process
  if [ "$RC" == 137 ]; then hit=$((hit + 1)); else echo "# $pt: not reached (exit $RC)"; fi
  st="$(status "$id")"
  [ "$st" != completed ] && killed=$((killed + 1))
  # resume, as many times as it takes (a crash point may fire again: it does not here)
  for attempt in 1 2 3; do
    [ "$(status "$id")" == completed ] && break
    "$ENGINE" start "$HELLO" --id "$id" --quiet >/dev/null 2>"$T/resume.err" &
    run_until_exit "$id" "$!"
  done
  if [ "$(status "$id")" != completed ]; then
    fail "$pt: not completed after resume ($(status "$id")): $(cat "$T/resume.err")"
    continue
  fi
  res="$(engine show "$id" --json)"
  case "$res" in *'"summary":"3 greetings, approved=true"'*) ;; *) fail "$pt: wrong result: $res" ;; esac
  h="$(verify_history "$id" 2>&1)"; [ "$h" == "$WANT_HISTORY" ] || fail "$pt: history: $h"
  ev="$(verify_events "$id" 2>&1)"; [ "$ev" == "$WANT_EVENTS" ] || fail "$pt: events: $ev"
  for key in "4 greet" "7 greet" "10 greet" "20 summarize"; do # idempotency keys: id/seq or id/run/seq
    grep -Eq "^$id/([0-9]+/)?$key " "$T/effects.$id" || fail "$pt: side effect of $id/$key never happened"
  done
  runs=$(grep -c . "$T/effects.$id")
  extra=$((extra + runs - 4))
done
assert_eq "every crash point was reached (killed by SIGKILL)" "$cases" "$hit"
[ "$cases" -ge 20 ] && pass "at least 20 crash points ($cases)" || fail "only $cases crash points"
[ "$killed" -ge 20 ] && pass "$killed cases were really killed before completing" || fail "only $killed kills landed"
echo "# activity executions beyond one per activity, over all cases: $extra (at-least-once)"
assert_exit "every case's hash chains whole after its kill at every crash point (engine verify --all)" 0 engine verify --all

# ---------------------------------------------------------------- part 2 ---
export HELLO_SIDE_EFFECTS="$T/effects.serve"
N=12
declare -A SENT=() # the workflows signalled: one signal each, looked at no more
for i in $(seq 1 $N); do
  "$ENGINE" start "$HELLO" --id "s$i" --detach --input '{"n":5,"sleep":0.05}' >/dev/null 2>&1 || true
  [ $((i % 3)) == 0 ] && engine signal "s$i" approval '{"approved":true}' 2>/dev/null && SENT[$i]=1
done
signal_waiting() {
  for i in $(seq 1 $N); do
    [ -z "${SENT[$i]:-}" ] || continue
    if engine history "s$i" 2>/dev/null | tail -1 | has_line SignalWaitStarted &&
      engine signal "s$i" approval '{"approved":true}' 2>/dev/null; then SENT[$i]=1; fi
  done
}
for round in 1 2 3 4; do
  "$ENGINE" serve >/dev/null 2>&1 &
  p=$!
  sleep "0.0$((RANDOM % 9 + 1))"
  signal_waiting
  sleep "0.0$((RANDOM % 9))"
  kill -9 "$p"; wait "$p" 2>/dev/null || true
done
"$ENGINE" serve >/dev/null 2>&1 &
p=$!; PIDS+=("$p")
wait_for 60 "all $N runs completed (signalling the waiting ones)" \
  'signal_waiting; [ "$(engine list --status completed | tail -n +2 | grep -c "^s[0-9]")" -ge $N ]' statuses || true
kill "$p"; wait "$p" 2>/dev/null || true
for i in $(seq 1 $N); do
  [ "$(status "s$i")" == completed ] || { fail "s$i not completed after random kills: $(status "s$i")"; continue; }
  h="$(verify_history "s$i" 2>&1)"
  [ "$h" == "events=29 activities_completed=6 open_commands=0 last=WorkflowCompleted" ] || fail "s$i history: $h"
  [ "$(verify_events "s$i")" == "session.created,agent.message,agent.message,agent.message,agent.message,agent.message,approval.requested,approval.decided,session.completed" ] ||
    fail "s$i events: $(verify_events "s$i")"
done
pass "$N workflows survived 4 random kill -9 of serve"
assert_exit "their hash chains whole (engine verify --all)" 0 engine verify --all
echo "# side-effect executions in part 2: $(grep -c . "$T/effects.serve") for $((N * 6)) activities"
finish
