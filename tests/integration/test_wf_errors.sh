#!/usr/bin/env bash
# The workflow VM's error boundary: workflow code cannot take the engine down.
#
# Part 1: an error object whose metatable raises on unknown fields (the
#         "strict class" idiom), raised by a workflow and by an activity, fails
#         that one workflow with a clear error; `engine serve` keeps running
#         the others.
# Part 2: a workflow whose activity crashes the engine (SIGABRT) every time it
#         runs is failed with EngineCrash after 3 crashes in a row without
#         progress, instead of crashing every restart; another workflow then
#         completes. A kill -9 is no crash of the workflow's making: it is not
#         counted.
source "$(dirname "$0")/lib.sh"
ulimit -c 0
WF="$SRC/tests/integration/wf"

# wait_end ID PID: until ID is failed or completed, or the process PID died
wait_end() {
  wait_true 20 'case "$(status "$1")" in failed | completed) true ;; *) ! kill -0 "$2" 2>/dev/null ;; esac' '' "$@" || return 1
  case "$(status "$1")" in failed | completed) return 0 ;; *) return 1 ;; esac
}

# ---------------------------------------------------------------- part 1 ---
"$ENGINE" serve 2>"$T/serve.err" &
S=$!; PIDS+=("$S")
assert_exit "start a workflow raising a strict error object" 3 engine start "$WF/strict_error.lua" --id strict-wf --detach
assert_exit "start one whose activity raises it" 3 engine start "$WF/strict_error.lua" --id strict-act --detach \
  --input '{"in_activity":true}'
assert_exit "start a bystander" 3 engine start "$WF/nondet_fixed.lua" --id bystander --detach
wait_end strict-wf "$S" || fail "strict-wf did not fail while serve ran ($(status strict-wf)); serve: $(tail -3 "$T/serve.err")"
wait_end strict-act "$S" || fail "strict-act did not fail while serve ran ($(status strict-act))"
kill -0 "$S" 2>/dev/null && pass "serve survived both" || fail "serve died: $(tail -3 "$T/serve.err")"
assert_eq "the workflow failed" failed "$(status strict-wf)"
err="$(engine show strict-wf --json)"
assert_contains "with a clear error" "error table without a 'message' string (its metatable is not consulted)" "$err"
assert_contains "...naming the line" "strict_error.lua:9" "$err"
assert_eq "the workflow of the activity failed" failed "$(status strict-act)"
assert_contains "with the activity's error" "error table without a 'message' string" "$(engine show strict-act --json)"
engine signal bystander go '"on"'
wait_end bystander "$S" || true
assert_eq "serve still runs the others" completed "$(status bystander)"
kill "$S" 2>/dev/null || true; wait "$S" 2>/dev/null || true

# ---------------------------------------------------------------- part 2 ---
assert_exit "start a workflow that crashes the engine" 3 engine start "$WF/crash_engine.lua" --id crasher --detach
assert_exit "start another" 3 engine start "$WF/tiny.lua" --id other --detach --input '{"n":1}'
crashes=0
for round in 1 2 3 4 5 6; do
  "$ENGINE" serve 2>"$T/serve.$round.err" &
  p=$!
  wait_for 60 "serve $round to crash, or crasher to be failed" '! kill -0 "$p" 2>/dev/null || [ "$(status crasher)" == failed ]' \
    'tail -n 3 "$T/serve.$round.err"' || true
  kill -0 "$p" 2>/dev/null && break
  set +e; wait "$p"; rc=$?; set -e
  [ "$rc" == 134 ] || fail "serve $round ended with exit $rc, not SIGABRT: $(tail -2 "$T/serve.$round.err")"
  crashes=$((crashes + 1))
done
PIDS+=("$p")
assert_eq "the engine crashed 3 times, then stopped running the crashing workflow" 3 "$crashes"
assert_eq "the crashing workflow failed" failed "$(status crasher)"
err="$(engine show crasher --json)"
assert_contains "as EngineCrash" '"type":"EngineCrash"' "$err"
assert_contains "naming the crash" "crashed 3 times in a row" "$err"
assert_contains "...and where" "signal 6 (SIGABRT) in det_acts.crash_engine" "$err"
assert_contains "serve said which workflow crashed it" "while running workflow crasher (3 of 3" "$(cat "$T/serve.$((crashes + 1)).err" 2>/dev/null || true)"
wait_end other "$p" || true
assert_eq "the other workflow completed" completed "$(status other)"
kill -0 "$p" 2>/dev/null && pass "serve keeps running" || fail "serve died"
kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true

# kill -9 is not counted: a workflow interrupted that way three times carries on
assert_exit "start a workflow that waits" 3 engine start "$WF/nondet_fixed.lua" --id killed --detach
for round in 1 2 3 4; do
  "$ENGINE" serve 2>/dev/null &
  p=$!
  wait_true 30 'engine history killed 2>/dev/null | has_line SignalWaitStarted' || true
  kill -9 "$p"; wait "$p" 2>/dev/null || true
done
bg S engine serve
engine signal killed go '"after kills"'
wait_end killed "$S" || true
assert_eq "a workflow interrupted by kill -9 four times completes" completed "$(status killed)"
kill "$S" 2>/dev/null || true; wait "$S" 2>/dev/null || true
finish
