#!/usr/bin/env bash
# Retries are classified by the error's own fields, the workflow sees one
# attempts (the engine's), and every duration is a finite number of seconds
# from 0 to 100 years: inf, NaN and negative numbers are refused with a clear
# error before anything is recorded, and a backoff that overflows is capped.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/numbers.lua"
export TEST_SIDE_EFFECTS="$T/effects"
run() { # run ID INPUT -> the result JSON (the workflow catches the error and completes)
  timeout 120 "$ENGINE" start "$WF" --id "$1" --quiet --input "$2" 2>"$T/$1.err" || true # a guard, not a timing
}
attempts() { grep -c "^$1 " "$T/effects" || true; }
no_inf() { # ID: the history holds no inf/nan (it would not even be JSON)
  if engine history "$1" --json | has_line -Ei '(:|,|\[)-?(inf|nan)'; then fail "$1: inf or nan in the history"
  else pass "$1: no inf or nan in the history"; fi
}

# --- classification: the error's own type and non_retryable, not a match inside it
out="$(run nested-type '{"case":"activity","args":{"error":{"type":"Transient","message":"m","detail":{"type":"Fatal"}}},"options":{"retry":{"initial_interval":0.01,"max_attempts":3,"non_retryable":["Fatal"]}}}')"
assert_contains "a nested type Fatal does not make Transient non-retryable" '"type":"Transient"' "$out"
assert_eq "it was tried 3 times" 3 "$(attempts nested-type)"
out="$(run nested-flag '{"case":"activity","args":{"error":{"type":"Transient","message":"m","cause":{"non_retryable":true}}},"options":{"retry":{"initial_interval":0.01,"max_attempts":3}}}')"
assert_eq "a nested non_retryable does not stop retries" 3 "$(attempts nested-flag)"
out="$(run listed '{"case":"activity","args":{"error":{"type":"Fatal","message":"m"}},"options":{"retry":{"initial_interval":0.01,"max_attempts":3,"non_retryable":["Fatal"]}}}')"
assert_eq "a listed type is not retried" 1 "$(attempts listed)"
out="$(run prefix '{"case":"activity","args":{"error":{"type":"FatalError","message":"m"}},"options":{"retry":{"initial_interval":0.01,"max_attempts":2,"non_retryable":["Fatal"]}}}')"
assert_eq "a type that only starts with a listed one is retried" 2 "$(attempts prefix)"
out="$(run flag-string '{"case":"activity","args":{"error":{"type":"X","message":"m","non_retryable":"yes"}},"options":{"retry":{"initial_interval":0.01,"max_attempts":2}}}')"
assert_eq "non_retryable counts only as the boolean true" 2 "$(attempts flag-string)"
out="$(run flag-true '{"case":"activity","args":{"error":{"type":"X","message":"m","non_retryable":true}},"options":{"retry":{"max_attempts":5}}}')"
assert_eq "non_retryable = true stops at once" 1 "$(attempts flag-true)"

# --- one attempts, the engine's, whatever the activity put in its error
out="$(run own-attempts '{"case":"activity","args":{"error":{"type":"Model","message":"m","attempts":99}},"options":{"retry":{"initial_interval":0.01,"max_attempts":2}}}')"
assert_contains "the workflow sees the engine's count" '"attempts":2' "$out"
payload="$(engine history own-attempts --json | grep '"type":"ActivityFailed"')"
assert_eq "the recorded error has one attempts" 1 "$(grep -o '"attempts"' <<<"$payload" | wc -l)"
assert_contains "and it is 2" '"attempts":2' "$payload"

# --- durations: finite, 0 to 100 years, else InvalidArgument / InvalidOptions
for s in inf nan -1 4e9; do
  out="$(run "sleep$s" "{\"case\":\"sleep\",\"seconds\":$([ "$s" == inf ] || [ "$s" == nan ] && echo "\"$s\"" || echo "$s")}")"
  assert_contains "wf.sleep($s) is refused" '"type":"InvalidArgument"' "$out"
  assert_contains "wf.sleep($s) names the bound" "seconds must be a finite number of seconds from 0 to 3155760000 (100 years)" "$out"
  no_inf "sleep$s"
done
assert_contains "wf.sleep(inf) says inf" "not inf" "$(run sleep-inf2 '{"case":"sleep","seconds":"inf"}')"
assert_contains "wf.sleep(-inf)" "not -inf" "$(run sleep-ninf '{"case":"sleep_neg_inf"}')"
out="$(run wait-inf '{"case":"wait_inf"}')"
assert_contains "wait_signal timeout inf is refused" '"type":"InvalidArgument"' "$out"
assert_contains "names the timeout" "wf.wait_signal: timeout must be a finite number" "$out"
no_inf wait-inf
assert_contains "wait_signal timeout -1 is refused" "not -1" "$(run wait-neg '{"case":"wait_neg"}')"

for opt in start_to_close schedule_to_close heartbeat retry.initial_interval retry.max_interval retry.backoff retry.max_attempts; do
  out="$(run "inf-$opt" "{\"case\":\"activity\",\"activity\":\"numbers_acts.ok\",\"inf\":\"$opt\"}")"
  assert_contains "$opt = inf is InvalidOptions" '"type":"InvalidOptions"' "$out"
  assert_contains "$opt = inf names the option" "activity option '$opt'" "$out"
  no_inf "inf-$opt"
done
bad_opt() { # WHAT OPTIONS NEEDLE
  local id="opt-$(echo "$1" | tr -c 'a-z0-9' -)"
  out="$(run "$id" "{\"case\":\"activity\",\"activity\":\"numbers_acts.ok\",\"options\":$2}")"
  assert_contains "$1 is InvalidOptions" '"type":"InvalidOptions"' "$out"
  assert_contains "$1: the message" "$3" "$out"
  assert_eq "$1: the activity never ran" 0 "$(attempts "$id")"
}
bad_opt "negative start_to_close" '{"start_to_close":-1}' "activity option 'start_to_close' must be a finite number of seconds from 0 to 3155760000 (100 years), not -1"
bad_opt "start_to_close past 100 years" '{"start_to_close":1e10}' "not 10000000000"
bad_opt "negative initial_interval" '{"retry":{"initial_interval":-0.5}}' "'retry.initial_interval' must be"
bad_opt "backoff below 1" '{"retry":{"backoff":0.5}}' "'retry.backoff' must be a number from 1 to 1000000, not 0.5"
bad_opt "backoff of 1e300" '{"retry":{"backoff":1e300}}' "'retry.backoff' must be a number from 1 to 1000000"
bad_opt "fractional max_attempts" '{"retry":{"max_attempts":2.5}}' "'retry.max_attempts' must be a whole number from 0 (unlimited) to 1000000, not 2.5"
bad_opt "max_attempts past int" '{"retry":{"max_attempts":1e12}}' "'retry.max_attempts' must be a whole number"
bad_opt "a duration that is a string" '{"heartbeat":"10"}' "'heartbeat' must be a number, not a string"
bad_opt "non_retryable not a list of strings" '{"retry":{"non_retryable":[1]}}' "'retry.non_retryable' must be a list of at most 8 error types"
bad_opt "non_retryable type too long" "{\"retry\":{\"non_retryable\":[\"$(printf 'T%.0s' $(seq 70))\"]}}" "each a string of 1 to 63 bytes"

# --- names with a NUL byte would be cut in the log: refused
assert_contains "an activity name with a NUL" "the name contains a NUL byte at byte 16" "$(run name-nul '{"case":"name_nul"}')"
assert_contains "a signal name with a NUL" "wf.wait_signal: the name contains a NUL byte" "$(run sig-nul '{"case":"signal_name_nul"}')"

# --- a backoff that overflows is capped at 100 years: attempt 2000 of backoff 2
engine start "$WF" --id cap --detach --input '{"case":"activity","options":{"retry":{"initial_interval":3600,"max_interval":0,"max_attempts":0}}}' >/dev/null || true
task() { sqlite3 "$ENGINE_DB" "SELECT attempt || ' ' || run_at FROM tasks WHERE wf_id='cap' AND kind='activity'"; }
bg S engine serve
wait_true 30 '[ "$(task | cut -d'\'' '\'' -f1)" == 2 ]' || true
kill "$S"; wait "$S" 2>/dev/null || true
assert_eq "attempt 1 failed, attempt 2 waits an hour" 2 "$(task | cut -d' ' -f1)"
assert_eq "show: it waits on attempt 2" 2 "$(engine show cap --json | jget waits.attempt)"
# while an attempt runs, its task holds the next one's number: show names the running one
bg S engine serve
engine start "$SRC/tests/integration/wf/chain10.lua" --id slow --detach --input '{"steps":1,"seconds":20}' >/dev/null || true
wait_true 30 '[ "$(engine show slow --json | jget waits.kind)" == activity ]' || true
assert_eq "show: attempt 1 runs" 1 "$(engine show slow --json | jget waits.attempt)"
engine cancel slow >/dev/null
kill "$S"; wait "$S" 2>/dev/null || true
sqlite3 "$ENGINE_DB" "UPDATE tasks SET attempt=2000, run_at=0 WHERE wf_id='cap' AND kind='activity'"
bg S engine serve
wait_true 30 '[ "$(task | cut -d'\'' '\'' -f1)" == 2001 ]' || true
kill "$S"; wait "$S" 2>/dev/null || true
assert_eq "attempt 2000 failed once and attempt 2001 is scheduled" 2001 "$(task | cut -d' ' -f1)"
assert_eq "attempt 2000 ran once (not again at once: 3600 * 2^1999 is inf)" 2 "$(attempts cap)"
years="$(python3 -c 'import sys, time; print("%.3f" % ((int(sys.argv[1]) / 1000 - time.time()) / (365.25 * 86400)))' "$(task | cut -d' ' -f2)")"
python3 -c 'import sys; sys.exit(not 99.9 < float(sys.argv[1]) <= 100.001)' "$years" &&
  pass "max_interval 0 (none): the retry waits 100 years, the cap ($years)" || fail "the retry waits $years years"
no_inf cap
finish
