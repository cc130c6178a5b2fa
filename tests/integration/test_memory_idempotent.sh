#!/usr/bin/env bash
# session.apply_memory runs at least once like every activity: killed after
# its write and before its result is recorded, it runs again on the restart.
# The memory file must still hold the update once.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/retry.lua"
printf '# Memory\n' >"$T/simple.md"
IN="{\"activity\":\"session.apply_memory\",\"args\":{\"memory_file\":\"$T/simple.md\",\"update\":\"the bucket must stay capped\",\"session_id\":\"m1\",\"approver\":\"reviewer\"}}"

# activity.end: the activity has run (the file is written), nothing is committed yet
ENGINE_CRASH=activity.end:1 "$ENGINE" start "$WF" --id m1 --quiet --input "$IN" >/dev/null 2>&1 || true
assert_eq "the first run wrote the update before the kill" 1 "$(grep -c 'the bucket must stay capped' "$T/simple.md")"
assert_eq "and was killed before recording it" running "$(status m1)"
assert_exit "the restart completes the workflow" 0 "$ENGINE" start "$WF" --id m1 --quiet
assert_contains "the restart got the activity's result" '"ok":true' "$OUT"
assert_eq "the update is in the file once" 1 "$(grep -c 'the bucket must stay capped' "$T/simple.md")"
assert_contains "with its provenance" "approved by reviewer" "$(cat "$T/simple.md")"

# a second, different update (another activity, another key) is appended
IN2="${IN/stay capped/be drained}"
assert_exit "another update" 0 "$ENGINE" start "$WF" --id m2 --quiet --input "$IN2"
assert_eq "both updates are in the file, once each" "1 1" \
  "$(grep -c 'stay capped' "$T/simple.md") $(grep -c 'be drained' "$T/simple.md")"
finish
