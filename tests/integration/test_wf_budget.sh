#!/usr/bin/env bash
# The instruction budget (ENGINE_WF_INSTRUCTIONS) is per wake-up: a workflow
# whose every wake-up stays under it completes, live and after a kill -9 and a
# restart, although the work of all its wake-ups together exceeds it (a replay
# runs them all in one go); one wake-up over the budget is still stopped.
source "$(dirname "$0")/lib.sh"
export ENGINE_WF_INSTRUCTIONS=1000000
WF="$SRC/tests/integration/wf/budget.lua"
# about 450,000 instructions per wake-up, 4 wake-ups: 1.8 M in all
IN='{"rounds":4,"loop":150000}'
WANT='"result":{"rounds":4,"x":1799992}'

assert_exit "a workflow of 4 wake-ups under the budget completes" 0 engine start "$WF" --id live --quiet --input "$IN"
assert_contains "with its result" "$WANT" "$(engine show live --json)"

# killed at its first timer, then carried on from the log (a replay of the rounds before)
assert_exit "start the same workflow" 3 engine start "$WF" --id crashed --detach --input "$IN"
set +e
ENGINE_CRASH=timer.fire:1 "$ENGINE" start "$WF" --id crashed --quiet >/dev/null 2>&1
rc=$?
set -e
assert_eq "killed by SIGKILL at the first timer" 137 "$rc"
assert_eq "...mid-run, at its timer" waiting "$(status crashed)"
assert_exit "the restart replays and completes it" 0 engine start "$WF" --id crashed --quiet
assert_contains "with the same result" "$WANT" "$(engine show crashed --json)"
assert_exit "the log replays in a fresh process, under the same budget" 0 engine replay crashed

assert_exit "one wake-up over the budget is stopped" 1 engine start "$WF" --id over --quiet \
  --input '{"rounds":1,"loop":400000}'
assert_contains "...as a runaway script" '"type":"RunawayScript"' "$(engine show over --json)"
finish
