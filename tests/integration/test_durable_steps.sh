#!/usr/bin/env bash
# A step never acts on an unrecorded result: kill -9 at every crash point of
# chains of steps that finish at once and that yield, and of futures
# (wf.all); then resume in a fresh process (test_durable_steps_waits.sh: a
# timer and a signal between steps; the matrix itself is durable_steps.sh).
#
# Each step's body logs, as it begins, how many completions of its workflow
# another connection reads as committed (wf/durable_acts.lua). Checked:
# - no body began before the completions it follows were committed;
# - after the restart, the only bodies that run again are those whose own
#   completion was not committed at the kill (a chain re-runs at most one);
# - the result is right and the history dense, one outcome per activity.
# Then {local = true}: the fast path runs a chain's steps in the batch of
# their scheduling, so a crash before the commit runs them all again (what
# the reference says of local activities).
source "$(dirname "$0")/lib.sh"
DURABLE_SHAPES="chain futures"
source "$(dirname "$0")/durable_steps.sh"

# The local fast path: all three steps run in the batch of the start's
# dispatch; a kill before its commit runs them again.
id=local-chain
"$ENGINE" start "$WF" --id "$id" --detach --input '{"shape":"chain","yield":false,"local":true}' >/dev/null || true
set +e; ENGINE_CRASH=commit.before:1 "$ENGINE" start "$WF" --id "$id" --quiet >/dev/null 2>&1; rc=$?; set -e
assert_eq "a local chain is killed before its first commit" 137 "$rc"
assert_eq "its three steps all ran before that commit" 3 "$(grep -c "^$id begin" "$TEST_SIDE_EFFECTS")"
assert_eq "and none of their completions is in the log" "" "$(committed_steps "$id")"
"$ENGINE" start "$WF" --id "$id" --quiet >/dev/null
assert_eq "after the restart it completes" completed "$(status "$id")"
assert_eq "running all three again" 6 "$(grep -c "^$id begin" "$TEST_SIDE_EFFECTS")"
assert_exit "a local option that is not a boolean is refused" 1 \
  "$ENGINE" start "$WF" --id bad-local --input '{"shape":"chain","yield":false,"local":"yes"}'
assert_contains "naming the option" "'local' must be a boolean" "$ERR$OUT"
finish
