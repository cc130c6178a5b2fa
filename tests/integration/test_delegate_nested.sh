#!/usr/bin/env bash
# Nested delegation (workflows/agent_session.lua, lua/delegation.lua): against
# the local model server, a root session with delegation.maxDepth 2 delegates
# to a sub-session that asks for the delegate tool itself; that sub-session
# delegates again (a grandchild, two levels below the root) and, in the same
# turn, asks for a sub-session that could delegate a third level: refused
# before anything starts, naming the depth and the limit. The grandchild's
# tokens count in its parent's and so in the root's; the tree is three
# sessions, each naming its parent; each replays clean. A delegate tool asked
# for by a session that lacks it is refused as any tool is.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
WF="$SRC/workflows/agent_session.lua"
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_ARTIFACTS="$T/artifacts"

# The root's two turns are the scenario's steps; the others are routes, told
# apart by their first message (an objective and the line the session adds),
# the second turn of the middle session by its child's answer (listed first:
# that request holds its objective too).
cat >"$T/scenario.json" <<'EOF'
{"steps": [
  {"reply": {"tool_calls": [
     {"id": "d1", "name": "delegate", "arguments": {"objective": "Level one", "tools": ["read_file", "delegate"]}}],
   "usage": {"input_tokens": 10, "output_tokens": 5}}},
  {"reply": {"text": "{\"summary\": \"root done\", \"result\": {}}", "usage": {"input_tokens": 20, "output_tokens": 5}}}],
 "routes": [
  {"body_has": "two done", "step": {"reply": {"text": "{\"summary\": \"one done\", \"result\": {}}",
   "usage": {"input_tokens": 100, "output_tokens": 10}}}},
  {"body_has": "Level two\\n\\nThe full task", "step": {"reply": {"text": "{\"summary\": \"two done\", \"result\": {}}",
   "usage": {"input_tokens": 300, "output_tokens": 30}}}},
  {"body_has": "Level one\\n\\nThe full task", "step": {"reply": {"tool_calls": [
     {"id": "g1", "name": "delegate", "arguments": {"objective": "Level two", "tools": ["read_file"]}},
     {"id": "g2", "name": "delegate", "arguments": {"objective": "Level deep", "tools": ["read_file", "delegate"]}}],
   "usage": {"input_tokens": 50, "output_tokens": 5}}}}]}
EOF
start_model_server "$T/scenario.json"
cat >"$T/input.json" <<EOF
{"objective": "Review in levels", "permissions": {"tools": ["read_file"]},
 "delegation": {"enabled": true, "maxDepth": 2},
 "limits": {"maxModelTurns": 10, "maxTokens": 100000},
 "model": {"name": "m", "provider": "openai", "baseUrl": "$MURL/v1"}}
EOF
# the tool messages of the model request whose first user message begins with $1, as id:content
tool_msgs() {
  curl -sf "$MURL/_requests" | OBJ="$1" lua5.4 -e 'local last
    for _, r in ipairs(require"cjson".decode(io.read("a"))) do
      local m = r.body and r.body.messages or {}
      if m[2] and tostring(m[2].content):sub(1, #os.getenv("OBJ")) == os.getenv("OBJ") then last = m end
    end
    for _, m in ipairs(last or {}) do
      if m.role == "tool" then io.write(m.tool_call_id, ":", (tostring(m.content):gsub("\n", "|")), "\n") end
    end'
}

bg S engine serve
engine start "$WF" --input @"$T/input.json" --id n1 --detach >/dev/null 2>&1 || true
wait_status n1 completed 240 || fail "n1: $(status n1)"
assert_eq "three sessions, each completed" "completed completed completed" "$(status n1) $(status n1.1) $(status n1.1.1)"
assert_exit "no session for the refused call" 2 engine show n1.1.2
assert_eq "each names its parent" "n1 n1.1" "$(engine show n1.1 --json | jget parent) $(engine show n1.1.1 --json | jget parent)"
mid="$(tool_msgs "Level one")"
assert_contains "the middle session's call that could delegate past maxDepth is refused, naming the depth and the limit" \
  "g2:refused: the sub-session would be 2 levels below its root session and could not delegate (delegation.maxDepth 2)" "$mid"
assert_contains "its other call ran: the grandchild's answer is its result" 'g1:sub-session n1.1.1 (completed): ' "$mid"
# how many of the model requests of the session whose objective is $1 offered the delegate tool
offered_delegate() {
  curl -sf "$MURL/_requests" | OBJ="$1" lua5.4 -e 'local n = 0
    for _, r in ipairs(require"cjson".decode(io.read("a"))) do
      local m = r.body and r.body.messages or {}
      if m[2] and tostring(m[2].content):sub(1, #os.getenv("OBJ")) == os.getenv("OBJ") then
        for _, t in ipairs(r.body.tools or {}) do if (t["function"] or t).name == "delegate" then n = n + 1 end end
      end
    end print(n)'
}
assert_eq "the middle session was offered delegate at both its turns, the grandchild never" "2 0" \
  "$(offered_delegate "Level one") $(offered_delegate "Level two")"
assert_eq "the tokens: the grandchild's 330, the middle's own 165 and its child's, the root's own 40 and its child's" \
  "330 495 535" \
  "$(engine show n1.1.1 --json | jget result.tokens) $(engine show n1.1 --json | jget result.tokens) $(engine show n1 --json | jget result.tokens)"
assert_eq "the root's tree is three sessions" 3 "$(engine show n1 --json | jget tree.sessions)"
assert_contains "the root's answer holds its child's" '"summary":"one done"' "$(tool_msgs "Review in levels")"
for id in n1 n1.1 n1.1.1; do
  verify_history "$id" >/dev/null || fail "$id history"
  engine replay "$id" >"$T/replay.out" 2>&1 && pass "replay of $id" || fail "replay of $id: $(cat "$T/replay.out")"
done
kill "$S" 2>/dev/null || true; wait "$S" 2>/dev/null || true
finish
