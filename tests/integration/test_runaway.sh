#!/usr/bin/env bash
# Runaway workflow scripts (an endless loop, a memory blow-up) are stopped with a
# clear error that pcall cannot swallow, and the engine carries on with others.
source "$(dirname "$0")/lib.sh"
export ENGINE_WF_INSTRUCTIONS=5000000 ENGINE_WF_MEMORY_MB=16
WF="$SRC/tests/integration/wf/runaway.lua"
bg S engine serve
engine start "$WF" --id loop --detach --input '{"kind":"loop"}' >/dev/null 2>&1 || true
engine start "$WF" --id mem --detach --input '{"kind":"memory"}' >/dev/null 2>&1 || true
engine start "$SRC/workflows/hello.lua" --id fine --detach --input '{"n":2,"sleep":0,"approval_timeout":0}' >/dev/null 2>&1 || true
wait_status loop failed
wait_status mem failed
wait_status fine completed
assert_contains "endless loop stopped by the instruction budget" "instruction budget exceeded" "$(engine show loop --json)"
assert_contains "...as a RunawayScript error" '"type":"RunawayScript"' "$(engine show loop --json)"
assert_contains "memory blow-up stopped by the allocator limit" "memory limit exceeded" "$(engine show mem --json)"
assert_contains "the other workflow completed" '"approved":false' "$(engine show fine --json)"
kill "$S"; wait "$S" 2>/dev/null || true
finish
