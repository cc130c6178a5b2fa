#!/usr/bin/env bash
# Activity retries and timeouts: errors reach the workflow as {type, message}
# that pcall catches; retries follow the policy; a retried activity's result is
# still recorded exactly once; start-to-close, heartbeat and schedule-to-close
# timeouts; a CPU-bound activity is stopped too.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/retry.lua"
export TEST_SIDE_EFFECTS="$T/effects"
run() { # run ID INPUT -> prints the result JSON (the workflow itself always completes)
  "$ENGINE" start "$WF" --id "$1" --quiet --input "$2" 2>"$T/$1.err"
}
attempts() { grep -cE "^$1/([0-9]+/)?2 " "$T/effects" || true; } # idempotency key id/run/seq

out="$(run flaky '{"activity":"acts.flaky","args":{"succeed_on":3},"options":{"retry":{"initial_interval":0.05,"max_attempts":5}}}')"
assert_eq "flaky activity succeeds on attempt 3" '{"ok":true,"value":"ok after 3"}' "$out"
assert_eq "it ran 3 times" 3 "$(attempts flaky)"
assert_eq "its result was recorded once, no failure recorded" \
  "events=4 activities_completed=1 open_commands=0 last=WorkflowCompleted" "$(verify_history flaky)"

out="$(run boom '{"activity":"acts.fail","options":{"retry":{"initial_interval":0.02,"max_attempts":3}}}')"
assert_eq "failure after max_attempts reaches pcall with type and message" \
  '{"attempts":3,"message":"failed on purpose","ok":false,"type":"Boom"}' "$out"
assert_eq "3 attempts" 3 "$(attempts boom)"

out="$(run nonretry '{"activity":"acts.fail","args":{"type":"Fatal"},"options":{"retry":{"initial_interval":0.02,"max_attempts":5,"non_retryable":["Fatal"]}}}')"
assert_contains "non-retryable type fails at once" '"type":"Fatal"' "$out"
assert_eq "1 attempt" 1 "$(attempts nonretry)"

out="$(run flagged '{"activity":"acts.fail","args":{"non_retryable":true},"options":{"retry":{"max_attempts":5}}}')"
assert_eq "error marked non_retryable by the activity: 1 attempt" 1 "$(attempts flagged)"

out="$(run strerr '{"activity":"acts.fail_string","options":{"retry":{"max_attempts":1}}}')"
assert_contains "a plain error string becomes type Error" '"type":"Error"' "$out"
assert_contains "with its message" 'plain string error' "$out"

for t in inf -inf nan -1 1e300; do
  out="$(run "proc_$t" "{\"activity\":\"acts.proc_run\",\"args\":{\"timeout\":\"$t\"},\"options\":{\"retry\":{\"max_attempts\":1}}}")"
  assert_contains "proc.run timeout $t is refused by name" "proc.run: timeout must be a finite number of seconds" "$out"
done
out="$(run proc_ok '{"activity":"acts.proc_run","args":{"timeout":5}}')"
assert_contains "proc.run with a finite timeout runs" '"stdout":"ran\n"' "$out"

out="$(run missing '{"activity":"acts.nope"}')"
assert_contains "unknown activity function" '"type":"ActivityNotFound"' "$out"
out="$(run missingmod '{"activity":"nomodule.f"}')"
assert_contains "unknown activity module" '"type":"ActivityNotFound"' "$out"

out="$(run stc '{"activity":"acts.slow","args":{"seconds":30},"options":{"start_to_close":0.2,"retry":{"initial_interval":0.01,"max_attempts":2}}}')"
assert_contains "start_to_close timeout" '"type":"Timeout"' "$out"
assert_contains "after 2 attempts" '"attempts":2' "$out"

out="$(run spin '{"activity":"acts.spin","options":{"start_to_close":0.2,"retry":{"max_attempts":1}}}')"
assert_contains "a CPU-bound activity is stopped at its deadline" '"type":"Timeout"' "$out"

out="$(run hb '{"activity":"acts.slow","args":{"seconds":30},"options":{"heartbeat":0.2,"retry":{"max_attempts":1}}}')"
assert_contains "heartbeat timeout" '"type":"HeartbeatTimeout"' "$out"
out="$(run hbok '{"activity":"acts.heartbeating","args":{"beats":8,"every":0.05},"options":{"heartbeat":0.2}}')"
assert_eq "an activity that heartbeats in time completes" '{"ok":true,"value":"beat"}' "$out"

out="$(run s2c '{"activity":"acts.fail","options":{"schedule_to_close":0.3,"retry":{"initial_interval":0.1,"backoff":1,"max_attempts":100}}}')"
assert_contains "schedule_to_close ends the retries" '"ok":false' "$out"
n="$(attempts s2c)"
[ "$n" -ge 2 ] && [ "$n" -le 4 ] && pass "schedule_to_close allowed $n attempts" || fail "schedule_to_close: $n attempts"

out="$(run badopt '{"activity":"acts.echo","options":{"start_to_closee":1}}')"
assert_contains "a misspelt option is refused by name" "unknown activity option 'start_to_closee'" "$out"

# a retry waiting for its backoff survives a restart and runs once it is due.
# The kill must fall inside the backoff: when a busy machine let the retry
# run first, the set-up is made again on a fresh workflow with twice the time
later=""
for backoff in 1.5 3 6 12; do
  later="later-$backoff"
  "$ENGINE" start "$WF" --id "$later" --detach --input '{"activity":"acts.flaky","args":{"succeed_on":2},"options":{"retry":{"initial_interval":'"$backoff"'}}}' >/dev/null 2>&1 || true
  bg S engine serve
  wait_true 30 '[ "$(attempts "$later")" -ge 1 ]' || true
  kill -9 "$S"; wait "$S" 2>/dev/null || true
  [ "$(attempts "$later")" = 1 ] && break
  echo "# the retry ran before the kill with a backoff of $backoff s: again with twice that"
done
assert_eq "first attempt failed before the kill" 1 "$(attempts "$later")"
wait_due "$later" # its retry falls due while no engine runs
bg S engine serve
wait_status "$later" completed
assert_contains "the retry ran after the restart" '"result":{"ok":true,"value":"ok after 2"}' "$(engine show "$later" --json)"
kill "$S"; wait "$S" 2>/dev/null || true
finish
