#!/usr/bin/env bash
# The example workflow end to end: activities, checkpoint, emit, timer, signal,
# patched; list/show/history/events/replay; a buffered early signal; a timer
# that falls due while no engine runs; events --follow.
source "$(dirname "$0")/lib.sh"
HELLO="$SRC/workflows/hello.lua"
export HELLO_SIDE_EFFECTS="$T/effects"

# --- foreground start, woken by a signal from "another terminal"
bg P engine start "$HELLO" --id h1 --input '{"name":"Ada","n":3}' >"$T/h1.out" 2>"$T/h1.err"
wait_status h1 waiting:signal
# the timer comes first, then the signal wait
wait_true 30 'engine history h1 | tail -1 | has_line SignalWaitStarted' 'engine history h1 | tail -3'
assert_exit "signal a waiting workflow" 0 engine signal h1 approval '{"approved":true}'
set +e; wait "$P"; rc=$?; set -e
assert_eq "foreground start exits 0 on completion" 0 "$rc"
assert_contains "result on stdout" '"approved":true' "$(cat "$T/h1.out")"
assert_contains "start says how to send the signal" "engine signal h1 approval" "$(cat "$T/h1.err")"
assert_eq "history is dense and complete" \
  "events=23 activities_completed=4 open_commands=0 last=WorkflowCompleted" "$(verify_history h1)"
assert_eq "domain events in order, once each" \
  "session.created,agent.message,agent.message,agent.message,approval.requested,approval.decided,session.completed" \
  "$(verify_events h1)"
assert_contains "the signal records who sent it" '"type":"signal.sent"' "$(engine events h1 --json | grep '"by":"local:')"
assert_eq "each activity ran once" 4 "$(grep -c . "$T/effects")"

# --- inspection commands
assert_exit "list" 0 engine list
assert_contains "list shows it completed" "completed" "$OUT"
assert_exit "list --status completed" 0 engine list --status completed --json
assert_contains "list --json" '"id":"h1"' "$OUT"
assert_exit "show --json" 0 engine show h1 --json
assert_contains "show has the result" '"summary":"3 greetings, approved=true"' "$OUT"
assert_exit "replay with the pinned code" 0 engine replay h1
assert_contains "replay reports clean" "ok:" "$OUT"

# --- starting a finished workflow again runs nothing
assert_exit "start --id of a finished workflow" 0 engine start "$HELLO" --id h1
assert_contains "prints its result" '"approved":true' "$OUT"
assert_eq "no activity ran again" 4 "$(grep -c . "$T/effects")"

# --- a signal sent before the workflow waits is buffered
assert_exit "detached start" 3 engine start "$HELLO" --id h2 --detach --input '{"n":1,"sleep":0.5}'
assert_eq "detached start prints the id" "h2" "$OUT"
assert_exit "early signal is accepted" 0 engine signal h2 approval '{"approved":false}'
bg S engine serve
wait_status h2 completed
assert_contains "the early signal was delivered" '"approved":false' "$(engine show h2 --json)"
assert_contains "it never had to wait for it" "SignalReceived" "$(engine history h2)"

# --- a timer that falls due while the engine is down fires after the restart
# (on a loaded machine the timer can fire before the kill: then the set-up is
# made again on a new workflow with twice the sleep, until the kill came first)
H3=h3 SLEEP=1.5
for try in 1 2 3 4 5 6; do
  assert_exit "start a sleeper" 3 engine start "$HELLO" --id "$H3" --detach --input "{\"n\":1,\"sleep\":$SLEEP}"
  wait_true 30 'engine history "$H3" | has_line TimerStarted' || true
  kill -9 "$S"; wait "$S" 2>/dev/null || true
  engine history "$H3" | has_line TimerFired || break
  [ "$try" = 6 ] && { fail "every sleeper's timer fired before the kill (the last slept ${SLEEP}s)"; break; }
  H3="h3-$try" SLEEP="$(awk -v s="$SLEEP" 'BEGIN { print s * 2 }')"
  bg S engine serve
done
wait_due "$H3" # the due time passes while nothing runs
bg S engine serve
wait_true 30 'engine history "$H3" | has_line SignalWaitStarted' || true
assert_contains "timer fired after the restart" "TimerFired" "$(engine history "$H3")"
# --- events --follow sees the rest of the session live, then returns
bg F sh -c "'$ENGINE' events $H3 --follow >'$T/follow.out'"
wait_true 30 'grep -q session.created "$T/follow.out"' # it follows
engine signal "$H3" approval '{"approved":true}'
wait "$F"
assert_contains "follow printed events up to completion" "session.completed" "$(cat "$T/follow.out")"
assert_contains "the human format reads like a transcript" "assistant: Hello, Ada" "$(engine events h1)"
assert_eq "TimerFired recorded once" 1 "$(engine history "$H3" | grep -c TimerFired)"
assert_eq "history of the sleeper is dense" "events=17 activities_completed=2 open_commands=0 last=WorkflowCompleted" "$(verify_history "$H3")"
kill "$S" 2>/dev/null || true; wait "$S" 2>/dev/null || true
finish
