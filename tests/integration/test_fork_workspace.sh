#!/usr/bin/env bash
# The workspace goes with a fork (docs/forking.md, "The workspace"): the
# PR-review example (workflows/pr_review.lua against the GitHub stand-in,
# the real Docker sandbox, the local model server) whose first turn copies the
# checked-out repository into working/ and changes a file, whose second hashes
# the tree, and which then waits for the approval of its review. Forked:
#   - after the turn that copied and changed (its workspace.snapshot), with a
#     changed input: the fork's first tool call sees exactly the source's
#     files (the tree's hash, modes included); kill -9 of the worker while
#     the fork runs, and it completes once (one restore, one session.forked)
#   - before the first tool (--turn 1), with a changed input: the same tree
#   - before the approval, with a changed input: its own ending
#   - between the turn's write and its snapshot: refused by engine fork
#   - after a snapshot whose files are gone: the fork's session fails before
#     its first tool runs, saying why
# each with the prefix's events equal to the source's and the source
# unchanged. A session past its snapshot budget (limits.snapshotMb): a fork
# after it is refused by engine fork, naming the budget; one before it is made.
# kill -9 while a snapshot is taken: none recorded, then one whole.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
export ENGINE_SANDBOX_DRIVER=docker
source "$(dirname "$0")/pr_stub.sh"
export ENGINE_CREDENTIALS_FILE="$T/creds/credentials.json"
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_ARTIFACTS="$T/artifacts" ENGINE_PR_CHECKOUTS="$T/checkouts"
export ENGINE_POLICIES_DIR="$T/policies"
mkdir -p "$T/policies"
printf '%s\n' 'return { name = "all", decide = function() return "allow", "test" end }' >"$T/policies/00-all.lua"

# --- the model: a step per turn, chosen by what the request carries (below)
python3 - "$T/scenario.json" <<'PY'
import json, sys
def shell(i, cmd): return {"reply": {"text": "", "tool_calls": [{"id": i, "name": "shell", "arguments": {"command": cmd}}],
                                     "usage": {"input_tokens": 10, "output_tokens": 5}}}
copy = shell("c1", "cp -r /workspace/input/repo /workspace/working/repo && cd /workspace/working/repo && "
                   "mkdir -p empty notes && printf 'reviewed\\n' > notes/seen.txt && "
                   "sed -i 's/return True/return True  # checked/' src/bucket.py && chmod 755 src/bucket.py && "
                   "chmod 600 notes/seen.txt && printf 'draft\\n' > /workspace/output/draft.md")
# the tree: every entry's type, mode and path, then every file's bytes
tree = shell("c2", "cd /workspace && (find working output -printf '%y %m %p\\n' | sort; "
                   "find working output -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum")
answer = {"reply": {"text": json.dumps({"summary": "The cap is off by one.", "result": {"findings": [
    {"path": "src/bucket.py", "line": 7, "severity": "major", "body": "Off by one: use >=."}]}}),
    "usage": {"input_tokens": 10, "output_tokens": 5}}}
big = shell("b1", "head -c 4096 /dev/zero | tr '\\0' x > /workspace/working/big.txt")
done = {"reply": {"text": json.dumps({"summary": "done", "result": {}})}}
# A turn's step is chosen by the tool results its request carries (a
# route: the tool call's id), not by the order of the requests: a worker
# killed after the model answered and before the answer was recorded asks
# again, and must get the same step (by order it got the next one, and fork
# A answered without its tool call). A session's first request carries
# none: the source's, fork B's (before the first tool) and the budget's, in
# that order. Fork E (its snapshot gone) asks for the tree and fails.
routes = [{"body_has": '"c2"', "step": answer}, {"body_has": '"c1"', "step": tree},
          {"body_has": '"b1"', "step": done}]
steps = [copy, copy, big]
json.dump({"steps": steps, "routes": routes}, open(sys.argv[1], "w"))
PY
start_model_server "$T/scenario.json"
API="$API" MURL="$MURL" lua5.4 -e '
  local json = require "cjson"
  local s = json.decode(io.read("a"))
  s.input.github_api = os.getenv("API")
  s.input.model = { name = "m", provider = "openai", baseUrl = os.getenv("MURL") .. "/v1" }
  s.input.tools = { "read_file", "list_files", "shell" }
  s.input.limits = { timeoutSeconds = 600, maxModelTurns = 8, maxToolCalls = 10 }
  s.input.supersede = false
  io.write(json.encode(s.input))' <<<"$start_json" >"$T/input.json"
pending() { engine events "$1" --json | grep -c '"type":"approval.requested"' || true; }
wait_approval() {
  wait_true 120 '[ "$(pending "$1")" -ge 1 ]' '' "$@" && return 0
  fail "$1 never asked for approval (status $(status "$1")): $(engine events "$1" 2>&1 | tail -5)"; return 1
}
# the content of ID's Nth tool.result after seq FROM
tool_result() { engine events "$1" --json | tail -n +"$(($2 + 1))" | grep '"type":"tool.result"' | sed -n "${3:-1}p" | jget payload.content; }
count_type() { engine events "$1" --json | grep -c "\"type\":\"$2\"" || true; }

serve_bg --workflows "$SRC/workflows"
"$ENGINE" start "$WF" --input @"$T/input.json" --id pr-src --detach >/dev/null 2>&1 || true
wait_approval pr-src
TREE="$(tool_result pr-src 0 2)"
[[ "$TREE" == *" -"* ]] && pass "the source hashed its tree" || fail "no tree hash: $TREE $(engine events pr-src | tail -5)"
assert_eq "the source's snapshots: its sandbox as provisioned, after the copy, after the hash (a shell could write)" "0 1 2" \
  "$(engine events pr-src --json | grep '"type":"workspace.snapshot"' | sed 's/.*"turn":\([0-9]*\).*/\1/' | tr '\n' ' ' | sed 's/ $//')"
SNAP="$(engine events pr-src --json | grep '"type":"workspace.snapshot"' | sed -n 2p)"
SNAP_SEQ="$(jget seq <<<"$SNAP")"
assert_eq "the hash changed nothing: the same tree, nothing stored again" "$(jget payload.tree <<<"$SNAP") 0" \
  "$(engine events pr-src --json | grep '"type":"workspace.snapshot"' | sed -n 3p | jget payload.tree) $(engine events pr-src --json | grep '"type":"workspace.snapshot"' | sed -n 3p | jget payload.new_bytes)"
SRC_ROWS="$(rows_of pr-src)"

# --- A: after the turn that copied and changed, with a changed input; the worker killed while it runs
assert_exit "fork after the copy" 3 engine fork pr-src --at "$SNAP_SEQ" --id fa --input-patch '{"approvalTimeoutSeconds": 3600}' --detach
kill -9 "$S"; wait "$S" 2>/dev/null || true
serve_bg --workflows "$SRC/workflows"
wait_approval fa
D="$(engine show fa --json | jget forked_from.seq)"
assert_eq "the fork is at the snapshot" "$SNAP_SEQ" "$D"
assert_eq "its events to there are the source's" "$(events_upto pr-src "$D")" "$(events_upto fa "$D")"
assert_eq "its first tool call sees exactly the source's files (the tree's hash)" "$TREE" "$(tool_result fa "$D" 1)"
RESTORED="$(engine events fa --json | grep '"type":"workspace.restored"')"
assert_eq "restored once, from the source's snapshot, though the worker was killed" "1 $(jget payload.tree <<<"$SNAP")" \
  "$(count_type fa workspace.restored) $(jget payload.tree <<<"$RESTORED")"
assert_eq "forked once" 1 "$(count_type fa session.forked)"
SRC_BOX="$(engine events pr-src --json | grep '"type":"sandbox.ready"' | jget payload.container)"
FA_BOX="$(jget payload.container <<<"$RESTORED")"
[ -n "$FA_BOX" ] && [ "$FA_BOX" != nil ] && [ "$FA_BOX" != "$SRC_BOX" ] && pass "in a sandbox of its own" ||
  fail "the fork's sandbox: $FA_BOX, the source's: $SRC_BOX"
assert_eq "the patched input is the fork's" 3600 "$(engine show fa --json | jget input.approvalTimeoutSeconds)"
assert_eq "the source is unchanged" "$SRC_ROWS" "$(rows_of pr-src)"

# --- B: before the first tool, with a changed input: the same tree
assert_exit "fork --turn 1" 3 engine fork pr-src --turn 1 --id fb --input-patch '{"approvalTimeoutSeconds": 7200}' --detach
wait_approval fb
D="$(engine show fb --json | jget forked_from.seq)"
assert_eq "its events to there are the source's" "$(events_upto pr-src "$D")" "$(events_upto fb "$D")"
assert_eq "restored from the sandbox as provisioned (its context files are gone by now)" \
  "$(engine events pr-src --json | grep '"type":"workspace.snapshot"' | sed -n 1p | jget payload.tree)" \
  "$(engine events fb --json | grep '"type":"workspace.restored"' | jget payload.tree)"
assert_eq "its copy and change make the source's tree" "$TREE" "$(tool_result fb "$D" 2)"
assert_eq "the source is unchanged" "$SRC_ROWS" "$(rows_of pr-src)"

# --- C: before the approval, with a changed input: its own ending, no model call
AP="$(seq_of pr-src approval.requested)"
assert_exit "fork at the approval" 3 engine fork pr-src --at "$AP" --id fc --input-patch '{"approvalTimeoutSeconds": 1}' --detach
wait_status fc completed 120 || fail "fc did not complete"
assert_eq "its events to there are the source's" "$(events_upto pr-src "$AP")" "$(events_upto fc "$AP")"
assert_contains "the patched timeout ended it" '"published":false' "$(engine show fc --json)"
assert_eq "the source is unchanged" "$SRC_ROWS" "$(rows_of pr-src)"

# --- between the copy's result and its snapshot: refused by engine fork
WROTE="$(engine events pr-src --json | grep '"type":"tool.result"' | sed -n 1p | jget seq)"
assert_exit "fork between a write and its snapshot" 2 engine fork pr-src --at "$WROTE" --id fd --detach
assert_contains "it says why" "cannot be rebuilt: the tools of turn 1 wrote it (#$WROTE) after its last snapshot" "$ERR"
assert_contains "and where a fork may be" "fork it at that turn's workspace.snapshot or before its tool calls" "$ERR"
assert_eq "nothing was made" "" "$(engine list 2>/dev/null | grep '^fd ' || true)"

# --- a snapshot whose files are gone: the fork's session fails before its first tool runs
mv "$T/artifacts/$(jget payload.tree <<<"$SNAP")" "$T/manifest.kept"
assert_exit "fork after the copy, its snapshot gone" 3 engine fork pr-src --at "$SNAP_SEQ" --id fe --detach
wait_status fe failed 120 || fail "fe did not fail"
assert_contains "it says why" "WorkspaceNotRebuildable" "$(engine show fe --json | jget error)"
assert_contains "naming the snapshot" "the workspace snapshot $(jget payload.tree <<<"$SNAP") is not in" "$(engine show fe --json | jget error)"
assert_eq "no tool ran in it" 0 "$(engine events fe --json | tail -n +"$((SNAP_SEQ + 1))" | grep -c '"type":"tool.result"' || true)"
mv "$T/manifest.kept" "$T/artifacts/$(jget payload.tree <<<"$SNAP")"
assert_eq "the source is unchanged" "$SRC_ROWS" "$(rows_of pr-src)"
assert_exit "engine replay fa" 0 engine replay fa
assert_exit "engine replay pr-src" 0 engine replay pr-src
assert_eq "replaying the source took no snapshot again" 3 "$(count_type pr-src workspace.snapshot)"

# --- a session past its snapshot budget
printf '{"objective": "write", "permissions": {"tools": ["shell"]}, "limits": {"maxModelTurns": 4, "snapshotMb": 0.002},
  "model": {"name": "m", "provider": "openai", "baseUrl": "%s/v1"}}' "$MURL" >"$T/budget.json"
"$ENGINE" start "$SRC/workflows/agent_session.lua" --input @"$T/budget.json" --id b-src --detach >/dev/null 2>&1 || true
wait_status b-src completed 120 || fail "b-src did not complete"
U="$(seq_of b-src workspace.unrebuildable)"
[ -n "$U" ] && [ "$U" != nil ] && pass "past the budget: a workspace.unrebuildable event (#$U)" || fail "no workspace.unrebuildable: $(engine events b-src | tail -8)"
LAST="$(engine events b-src --json | tail -1 | jget seq)"
assert_exit "a fork after it is refused" 2 engine fork b-src --at "$LAST" --detach
assert_contains "naming the budget" "limits.snapshotMb" "$ERR"
assert_contains "and where a fork may be" "fork it before the tool calls of turn 1" "$ERR"
assert_eq "nothing was made" "" "$(engine list 2>/dev/null | grep b-src.fork || true)"
assert_exit "a fork before it is made" 3 engine fork b-src --turn 1 --id b-ok --detach
engine cancel b-ok >/dev/null 2>&1 || true # (it would ask the model server for turns the next part has)
wait_true 60 '[[ "$(status b-ok)" =~ ^(cancelled|failed|completed)$ ]]' || fail "b-ok did not end: $(status b-ok)"

# --- kill -9 while a snapshot is taken (its blobs stored, its manifest not):
# none recorded; the attempt again records one whole
kill -9 "$S"; wait "$S" 2>/dev/null || true
printf '{"steps": [%s, %s]}' \
  '{"reply": {"text": "", "tool_calls": [{"id": "k1", "name": "shell", "arguments": {"command": "printf kept > /workspace/working/k.txt"}}]}}' \
  '{"reply": {"text": "{\"summary\": \"ok\", \"result\": {}}"}}' >"$T/crash-scenario.json"
scenario "$(cat "$T/crash-scenario.json")"
printf '{"objective": "write", "permissions": {"tools": ["shell"]}, "limits": {"maxModelTurns": 4},
  "model": {"name": "m", "provider": "openai", "baseUrl": "%s/v1"}}' "$MURL" >"$T/crash.json"
"$ENGINE" start "$SRC/workflows/agent_session.lua" --input @"$T/crash.json" --id k-src --detach >/dev/null 2>&1 || true
# the second snapshot (turn 1's, after the write) is killed part-way
set +e
ENGINE_CRASH="snapshot_blobs:2" timeout "$(scaled 120)" "$ENGINE" serve 2>>"$T/serve.log"
rc=$?
set -e
assert_eq "the worker was killed in the snapshot" 137 "$rc"
assert_eq "none recorded for turn 1" 1 "$(count_type k-src workspace.snapshot)"
serve_bg
wait_status k-src completed 120 || fail "k-src did not complete after the kill"
assert_eq "then one whole, for each of turns 0 and 1" "0 1" \
  "$(engine events k-src --json | grep '"type":"workspace.snapshot"' | sed 's/.*"turn":\([0-9]*\).*/\1/' | tr '\n' ' ' | sed 's/ $//')"
finish
