#!/usr/bin/env bash
# The user's resultSchema is checked when the session starts, not when the
# answer comes back: an unknown keyword, or a pattern outside the supported
# ECMA subset, is named among the input's problems and `engine start` exits
# 2 before anything runs. The subset itself: tests/integration/schema_patterns.lua.
source "$(dirname "$0")/lib.sh"
cd "$SRC"
WF="$SRC/workflows/agent_session.lua"
out="$(lua5.4 "$SRC/tests/integration/schema_patterns.lua" "$SRC" 2>&1)" && pass "pattern subset: $out" ||
  fail "pattern subset: $out"

base='"objective":"review","model":{"name":"replay:examples/pr-review/model.jsonl"},"permissions":{"tools":["read_file"]}'
BAD="{$base,\"resultSchema\":{\"type\":\"object\",\"properties\":{\"when\":{\"type\":\"string\",\"format\":\"date\"},\"id\":{\"type\":\"string\",\"pattern\":\"^(pr|issue)-\\\\d+$\"}},\"requird\":[\"id\"]}}"
assert_exit "a result schema with unknown keywords is refused" 2 "$ENGINE" start "$WF" --id rs1 --quiet --input "$BAD"
for p in "resultSchema.properties.when.format: unsupported keyword" "resultSchema.requird: unsupported keyword" \
         "resultSchema.properties.id.pattern: unsupported pattern" "groups are not supported"; do
  assert_contains "names: $p" "$p" "$ERR"
done
assert_eq "nothing ran: no sandbox was provisioned" 0 "$(engine history rs1 | grep -c sandbox.provision || true)"

# the same check, directly: a schema of supported keywords passes it
PREP="$SRC/tests/integration/wf/retry.lua"
prep_with() { # a JSON string literal: the pattern -> session.prepare's input for the workflow retry.lua
  printf '{"activity":"session.prepare","args":{"session_id":"rs","input":{%s,"resultSchema":{"type":"object","properties":{"id":{"type":"string","pattern":%s}}}}}}' "$base" "$1"
}
assert_exit "prepare runs" 0 "$ENGINE" start "$PREP" --id rs2 --quiet --input "$(prep_with '"^(?:x)"')"
assert_contains "a non-capturing group is refused too" '"ok":false' "$OUT"
assert_exit "prepare runs" 0 "$ENGINE" start "$PREP" --id rs3 --quiet --input "$(prep_with '"^[a-z]+-\\d{1,6}$"')"
assert_contains "a schema of supported keywords and an ECMA pattern is accepted" '"ok":true' "$OUT"
finish
