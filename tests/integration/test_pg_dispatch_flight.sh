#!/usr/bin/env bash
# A dispatch's reads on PostgreSQL are answered on the socket's readiness,
# with the worker's batch held open meanwhile (engine/worker/dispatch.c).
# The database is put 20 ms away each way (tests/bench/delay_proxy.py), so a
# dispatch's answer is on its way for a while, and 24 workflows of eight
# steps, each after a durable timer (a task a dispatch takes), are drained
# by serves that are stopped or killed at a dispatch's moments:
# - SIGTERM right after a dispatch's read is sent (ENGINE_STOP=dispatch.sent:N):
#   the serve waits for the answer and acts on what it took before its last
#   commit, and exits 0;
# - kill -9 right after it is sent, and right after its answer came in
#   before anything of it was acted on (ENGINE_CRASH=dispatch.sent:N,
#   dispatch.landed:N): nothing of that batch was committed.
# Then one serve drains the rest. Every workflow completes with its total,
# and its history is exact: eight timers fired, eight activities completed,
# each once, nothing left open.
source "$(dirname "$0")/lib.sh"
export ENGINE_NO_SWEEP=1 ENGINE_NO_POLICY_WATCH=1 ENGINE_DATA_DIR="$T/data"
export TEST_SIDE_EFFECTS="$T/side"
: >"$TEST_SIDE_EFFECTS"
own_pg_database flight
python3 "$SRC/tests/bench/delay_proxy.py" "$T/proxy.port" 127.0.0.1 "$PGPORT" 20 & PIDS+=($!)
wait_true 30 '[ -s "$T/proxy.port" ]' || fail "the delay proxy did not start"
FAR="postgres://engine@127.0.0.1:$(cat "$T/proxy.port")/flight"

N=24 # (their timers of 10 to 90 ms fall due apart: a dispatch for nearly each)
for i in $(seq "$N"); do
  engine start "$SRC/tests/integration/wf/timer_steps.lua" --id "f-$i" --detach \
    --input "{\"steps\":8,\"pause\":0.0$((i % 9 + 1))}" >/dev/null || true
done
assert_eq "$N workflows queued" "$N" "$(q "SELECT count(*) FROM workflows WHERE id LIKE 'f-%'")"
completed() { q "SELECT count(*) FROM workflows WHERE id LIKE 'f-%' AND status='completed'"; }

# round ENV=POINT:N EXPECTED-EXIT: a serve on the far database until the
# point stops it (or every workflow has completed first: then it is
# stopped, and the round says so)
round() {
  local log="$T/round.$1.log" rc
  ENGINE_DB="$FAR" ENGINE_LOG_LEVEL=debug env "$1" "$ENGINE" serve 2>"$log" & local s=$!
  PIDS+=("$s")
  wait_true 120 '! kill -0 "$s" 2>/dev/null || [ "$(completed)" = "$N" ]' || true
  if kill -0 "$s" 2>/dev/null; then
    kill -TERM "$s"
    wait "$s" 2>/dev/null || true
    pass "$1: every workflow completed before the point was passed"
    return
  fi
  set +e; wait "$s"; rc=$?; set -e
  assert_eq "$1: the serve exited as the point says" "$2" "$rc"
  if [ "$2" = 0 ]; then
    assert_contains "$1: it stopped gracefully" "engine: stopped" "$(cat "$log")"
    # what the stop met (the signal is heard at the loop's next turn: the
    # read sent then, or the one after it, is on its way)
    local met
    met="$(sed -n '/stopping (SIGTERM)/,$p' "$log" | grep -o "a dispatch's [a-z ]* are on their way" | head -1 || true)"
    [ -n "$met" ] || met="no read of a dispatch on its way"
    echo "# $1: the stop met $met"
    [ -z "$met" ] || MET=$((MET + 1))
  fi
  grep -v "^engine: \(debug\|serving\|stopping\|stopped\)" "$log" | grep -i "error" && fail "$1: errors in its log" || true
}
MET=0
round ENGINE_STOP=dispatch.sent:8 0
round ENGINE_CRASH=dispatch.landed:6 137
round ENGINE_STOP=dispatch.sent:4 0
round ENGINE_CRASH=dispatch.sent:4 137
round ENGINE_STOP=dispatch.sent:5 0
round ENGINE_CRASH=dispatch.landed:3 137
# (the first two sends of a serve are its start-up dispatch, answered
# before its loop runs: the stops are sent later, in the loop)
[ "$MET" -ge 1 ] && pass "$MET stop(s) met a dispatch's read on its way, waited for it and acted on it" ||
  fail "no stop met a dispatch's read on its way"

# the rest, on the far database
ENGINE_DB="$FAR" "$ENGINE" serve 2>"$T/last.log" & S=$!
PIDS+=("$S")
wait_true 300 '[ "$(completed)" = "$N" ]' || true
kill -TERM "$S"
wait "$S" 2>/dev/null || true
assert_eq "every workflow completed" "$N" "$(completed)"
bad=""
for i in $(seq "$N"); do
  r="$(q "SELECT result FROM workflows WHERE id='f-$i'")"
  [[ "$r" == *'"total":36'* ]] || bad="$bad f-$i:result=$r"
  h="$(verify_history "f-$i")"
  [[ "$h" == *"activities_completed=8 open_commands=0 last=WorkflowCompleted"* ]] || bad="$bad f-$i:$h"
  t="$(q "SELECT count(*) FROM history WHERE wf_id='f-$i' AND type='TimerFired'")"
  [ "$t" = 8 ] || bad="$bad f-$i:timers=$t"
done
assert_eq "each has its total, eight timers fired and eight activities completed, each once" "" "$bad"
finish
