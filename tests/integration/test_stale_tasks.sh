#!/usr/bin/env bash
# A task that is due in the same dispatch as another task that made it stale
# acts only if this dispatch claimed it (deleted its row), and nothing gives a
# command a second outcome:
#   1. a signal sent while no worker runs (before its wait's deadline), then
#      the deadline passes: on restart the signal wakes the wait; the stale
#      timeout must not land too.
#   2. a cancel while no worker runs, then the activity's retry falls due: on
#      restart the cancellation wins; the cancelled activity must not run again.
#   3. the same, the cancel asked for after the retry fell due (so the retry's
#      task comes first in the dispatch): the cancellation still wins.
source "$(dirname "$0")/lib.sh"
export TEST_SIDE_EFFECTS="$T/effects"
WF="$SRC/tests/integration/wf"

now_ms() { date +%s%3N; }
# wait_past MS: until the clock is past MS (a deadline the log recorded)
wait_past() { while [ "$(now_ms)" -le "$1" ]; do sleep 0.05; done; } # the wall clock past a time (no engine state)
# serve_until ID STATUS: one serve run until ID has STATUS (or a timeout)
serve_until() {
  bg S engine serve
  wait_status "$1" "$2" 20 || true
  kill "$S"; wait "$S" 2>/dev/null || true
}

# Each case kills the serve once the log has the wait (or the retry) and
# before its deadline: on a busy machine the deadline can pass first, and the
# serve act on it before the kill. Then the case is set up again with a
# deadline twice as far (a new workflow), up to five times.
# set_up VAR PREFIX SETUP: runs SETUP ID SECONDS for ids PREFIX1, PREFIX2, ...
# with 1, 2, 4, ... seconds until it returns 0 (at most five); the id in VAR
set_up() {
  local __v="$1" t=1 k
  for k in 1 2 3 4 5; do
    printf -v "$__v" '%s' "$2$k"
    "$3" "$2$k" "$t" && return 0
    echo "# $2$k: its deadline came first; set up again with twice the time"
    t=$((t * 2))
  done
}

# ---------------------------------------------------------------- 1 ---
# set_up_sig ID TIMEOUT: the wait open at the kill and the signal in before
# its deadline (0), or the timeout or the deadline came first (1). (A signal
# that arrives after the deadline loses to the timeout, as it should.)
wait_deadline() { engine history "$1" --json | lua5.4 -e 'for l in io.lines() do local e=require"cjson".decode(l)
  if e.type=="SignalWaitStarted" then io.write(e.payload.deadline) end end'; }
set_up_sig() {
  engine start "$WF/stale_signal.lua" --id "$1" --detach --input "{\"timeout\":$2}" >/dev/null || true
  bg S engine serve
  # until it waits, or has gone past its wait (its deadline came first)
  try_until 30 'engine history "$1" 2>/dev/null | has_line -E "SignalWaitStarted|SignalTimedOut"' "$1" || true
  kill -9 "$S"; wait "$S" 2>/dev/null || true
  engine history "$1" | tail -1 | has_line SignalWaitStarted || return 1
  assert_exit "signal while no worker runs" 0 engine signal "$1" approval '{"approved":true}'
  [ "$(sql "SELECT time FROM signals WHERE wf_id='$1'")" -lt "$(wait_deadline "$1")" ]
}
set_up sig sig set_up_sig
deadline="$(wait_deadline "$sig")"
wait_past "$((deadline + 100))"
serve_until "$sig" completed
assert_eq "the signal won, the stale timeout did not land" completed "$(status "$sig")"
assert_contains "the workflow got the signal" '"approved":true' "$(engine show "$sig" --json)"
assert_eq "one outcome per command" "events=6 activities_completed=1 open_commands=0 last=WorkflowCompleted" \
  "$(verify_history "$sig" 2>&1)"
assert_eq "no SignalTimedOut in the log" 0 "$(engine history "$sig" | grep -c SignalTimedOut || true)"
assert_exit "the log replays" 0 engine replay "$sig"

# ---------------------------------------------------------------- 2 ---
# set_up_ret ID INTERVAL: killed while the retry waits (0), or it ran first (1)
retry_task() { sql "SELECT run_at FROM tasks WHERE wf_id='$1' AND kind='activity' AND attempt=2" 2>/dev/null; }
set_up_ret() {
  engine start "$WF/stale_retry.lua" --id "$1" --detach --input "{\"interval\":$2}" >/dev/null || true
  bg S engine serve
  # until the retry waits, or has run (its interval came first)
  try_until 30 '[ -n "$(retry_task "$1")" ] || [ "$(grep -c "^$1/.* flaky " "$T/effects")" -ge 2 ]' "$1" || true
  kill -9 "$S"; wait "$S" 2>/dev/null || true
  [ -n "$(retry_task "$1")" ] && [ "$(grep -c "^$1/.* flaky " "$T/effects")" == 1 ]
}
set_up ret ret set_up_ret
assert_eq "the first attempt failed" 1 "$(grep -c "^$ret/.* flaky 1$" "$T/effects")"
assert_exit "cancel while no worker runs" 0 engine cancel "$ret"
retry_at="$(retry_task "$ret")"
wait_past "$((retry_at + 100))"
serve_until "$ret" cancelled
assert_eq "cancelled" cancelled "$(status "$ret")"
assert_eq "the cancelled activity did not run again" 1 "$(grep -c "^$ret/.* flaky " "$T/effects")"
assert_eq "the cleanup ran once" 1 "$(grep -c "^$ret/.* echo 1$" "$T/effects")"
assert_eq "one outcome per command" "events=6 activities_completed=1 open_commands=0 last=WorkflowCancelled" \
  "$(verify_history "$ret" 2>&1)"

# ---------------------------------------------------------------- 3 ---
set_up late late set_up_ret
wait_past "$(( $(retry_task "$late") + 100 ))"
assert_exit "cancel after the retry fell due, while no worker runs" 0 engine cancel "$late"
serve_until "$late" cancelled
assert_eq "cancelled, though the retry was due first" cancelled "$(status "$late")"
assert_eq "and the activity did not run again" 1 "$(grep -c "^$late/.* flaky " "$T/effects")"
assert_eq "one outcome per command, the cleanup's too" \
  "events=6 activities_completed=1 open_commands=0 last=WorkflowCancelled" "$(verify_history "$late" 2>&1)"
finish
