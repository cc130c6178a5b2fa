#!/usr/bin/env bash
# continue_as_new ends a run and starts the next with fresh history, same id.
source "$(dirname "$0")/lib.sh"
out="$("$ENGINE" start "$SRC/tests/integration/wf/counter.lua" --id cnt --quiet --input '{"n":0,"to":3}')"
assert_eq "the last run returns" '{"done":3,"run":4}' "$out"
assert_eq "the current run's history is short" "events=4 activities_completed=1 open_commands=0 last=WorkflowCompleted" "$(verify_history cnt)"
assert_contains "an earlier run ended with ContinuedAsNew" "ContinuedAsNew" "$(engine history cnt --run 2)"
assert_exit "replay of the current run" 0 engine replay cnt
finish
