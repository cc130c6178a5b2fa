#!/usr/bin/env bash
# Delegation (workflows/agent_session.lua, lua/delegation.lua): an agent
# session against the local model server delegates two sub-reviews in one
# turn. Both sub-sessions run at once (each held at the model server's gate
# while the test looks), each in a sandbox of its own; their tokens count in
# the parent's total; a third delegate call asking for a tool the parent
# lacks, and a fourth asking for more tokens than the parent has left, are
# refused before anything starts (the error names the tool, the limit; no
# child row). A kill -9 of the engine while the two run: after the restart the
# parent ends with the same result, each child started once.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
WF="$SRC/workflows/agent_session.lua"
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_ARTIFACTS="$T/artifacts"
mkdir -p "$T/code"
printf 'int a(void) { return 1; }\n' >"$T/code/a.c"
printf 'int b(void) { return 2; }\n' >"$T/code/b.c"

printf '{"steps":[]}' >"$T/scenario.json"
start_model_server "$T/scenario.json"

# The parent's two turns are the scenario's steps; each child's one turn is
# a route, told apart by its first message (its objective, then the line the
# session adds), held at gate $1 / $2 until the test opens it.
scenario_with_gates() {
  cat >"$T/scenario.json" <<EOF
{"steps": [
  {"reply": {"tool_calls": [
     {"id": "d1", "name": "delegate", "arguments": {"objective": "Review part A", "tools": ["read_file"]}},
     {"id": "d2", "name": "delegate", "arguments": {"objective": "Review part B", "tools": ["read_file", "list_files"]}},
     {"id": "d3", "name": "delegate", "arguments": {"objective": "Review part C", "tools": ["read_file", "shell"]}},
     {"id": "d4", "name": "delegate", "arguments": {"objective": "Review part D", "limits": {"maxTokens": 1000000}}}],
   "usage": {"input_tokens": 10, "output_tokens": 5}}},
  {"reply": {"text": "{\"summary\": \"both parts reviewed\", \"result\": {\"parts\": 2}}",
   "usage": {"input_tokens": 20, "output_tokens": 5}}}],
 "routes": [
  {"body_has": "Review part A\\\\n\\\\nThe full task", "step": {"hold": "$1",
   "reply": {"text": "{\"summary\": \"A is fine\", \"result\": {\"part\": \"A\"}}", "usage": {"input_tokens": 1000, "output_tokens": 100}}}},
  {"body_has": "Review part B\\\\n\\\\nThe full task", "step": {"hold": "$2",
   "reply": {"text": "{\"summary\": \"B is fine\", \"result\": {\"part\": \"B\"}}", "usage": {"input_tokens": 2000, "output_tokens": 200}}}}]}
EOF
  curl -sf -X POST "$MURL/_scenario" -d @"$T/scenario.json" >/dev/null || fail "scenario"
  curl -sf -X DELETE "$MURL/_requests" >/dev/null
}
cat >"$T/input.json" <<EOF
{"objective": "Review the code in two parts", "context": {"files": ["$T/code"]},
 "permissions": {"tools": ["read_file", "list_files"]}, "delegation": {"enabled": true, "maxSubSessions": 3},
 "limits": {"maxModelTurns": 11, "maxTokens": 100000},
 "model": {"name": "m", "provider": "openai", "baseUrl": "$MURL/v1"}}
EOF
containers() { # live containers of session $1 (this test's database)
  local inst; inst="$(sqlite3 "$ENGINE_DB" "SELECT value FROM meta WHERE key='instance_id'" 2>/dev/null)"
  docker ps -q --filter label=engine.managed=true --filter "label=engine.instance=$inst" \
    --filter "label=engine.session=$1" | wc -l
}
children() { engine show "$1" --json | lua5.4 -e 'local j = require"cjson".decode(io.read("a")); local out = {}
  for _, c in ipairs(j.children or {}) do out[#out + 1] = c.id end io.write(table.concat(out, " "))'; }
count() { engine history "$1" --json | TYPE="$2" NAME="${3:-}" lua5.4 -e 'local n = 0
  for l in io.lines() do local e = require"cjson".decode(l)
    if e.type == os.getenv("TYPE") and (os.getenv("NAME") == "" or e.name == os.getenv("NAME")) then n = n + 1 end
  end print(n)'; }
# the tool messages the parent's last model request carried, as id:content
# (the children's requests are in the model server's log too)
tool_msgs() {
  curl -sf "$MURL/_requests" | lua5.4 -e 'local last
    for _, r in ipairs(require"cjson".decode(io.read("a"))) do
      local m = r.body and r.body.messages or {}
      if m[2] and tostring(m[2].content):find("^Review the code") then last = m end
    end
    for _, m in ipairs(last or {}) do
      if m.role == "tool" then io.write(m.tool_call_id, ":", m.content, "\n") end
    end'
}
# what an uninterrupted run and another must agree on
outcome() { engine show "$1" --json | lua5.4 -e 'local r = require"cjson".decode(io.read("a")).result
  print(r.outcome, r.summary, r.result.parts, r.turns, r.tool_calls, r.tokens, r.sub_sessions.count,
    r.sub_sessions.turns, r.sub_sessions.tokens)'; }
both_running() { [ "$(status "$1.1")" = running ] && [ "$(status "$1.2")" = running ] && [ "$(model_health held)" -ge 2 ]; }

serve_api

# --- two sub-sessions at once, a third refused
scenario_with_gates a1 b1
engine start "$WF" --input @"$T/input.json" --id p1 --detach >/dev/null 2>&1 || true
wait_true 120 'both_running p1' 'statuses; model_health held' || true
assert_eq "both sub-sessions are running at the same time, each held at its model turn" "running running 2" \
  "$(status p1.1) $(status p1.2) $(model_health held)"
assert_eq "each has a sandbox of its own, live at once" "1 1" "$(containers p1.1) $(containers p1.2)"
c1="$(engine events p1.1 --json | grep '"sandbox.ready"' | jget payload.container)"
c2="$(engine events p1.2 --json | grep '"sandbox.ready"' | jget payload.container)"
[ -n "$c1" ] && [ "$c1" != "$c2" ] && pass "two different containers" || fail "containers: [$c1] [$c2]"
assert_eq "the parent has two children, no third" "p1.1 p1.2" "$(children p1)"
assert_exit "no child row for the refused calls" 2 engine show p1.3
assert_contains "the child records its parent" "p1" "$(engine show p1.1 --json | jget parent)"
release a1; release b1
wait_status p1 completed 120 || fail "p1: $(status p1)"
msgs="$(tool_msgs 2)"
assert_contains "the refusal names the tool the parent lacks" \
  "d3:refused: the sub-session asks for what this session lacks: tool 'shell'" "$msgs"
assert_contains "a budget over what the parent has left (99985 less the two reservations of 19997) is refused, naming it" \
  "d4:refused: this session has not enough budget left for the sub-session: maxTokens 1000000 asked, 59991 left" "$msgs"
assert_contains "the first child's answer is the first call's result" 'd1:sub-session p1.1 (completed): ' "$msgs"
assert_contains "with its result" '"part":"A"' "$(grep '^d1:' <<<"$msgs")"
assert_contains "the second child's answer is the second call's result" '"part":"B"' "$(grep '^d2:' <<<"$msgs")"
res="$(engine show p1 --json | jget result)"
assert_eq "the parent's tokens: its own 40 and its children's 1100 + 2200" 3340 "$(jget tokens <<<"$res")"
assert_eq "its children's spend, apart" "2 3300 2" \
  "$(jget sub_sessions.count <<<"$res") $(jget sub_sessions.tokens <<<"$res") $(jget sub_sessions.turns <<<"$res")"
assert_eq "each child's own tokens" "1100 2200" \
  "$(engine show p1.1 --json | jget result.tokens) $(engine show p1.2 --json | jget result.tokens)"
lim="$(engine events p1 --json | grep '"delegation.started"' | sed -n 1p | jget payload.limits)"
assert_eq "a child's limits are a share of what the parent had left (10 turns among 4 calls and itself)" 2 \
  "$(jget maxModelTurns <<<"$lim")"
assert_eq "the sandboxes are gone" "0 0" "$(containers p1.1) $(containers p1.2)"
verify_history p1 >/dev/null || fail "p1 history"

# --- kill -9 while both run: the same result, each child started once
scenario_with_gates a2 b2
engine start "$WF" --input @"$T/input.json" --id p2 --detach >/dev/null 2>&1 || true
wait_true 120 'both_running p2' 'statuses; model_health held' || true
kill -9 "$S"; wait "$S" 2>/dev/null || true
serve_api
release a2; release b2
wait_status p2 completed 180 || fail "p2: $(status p2)"
assert_eq "the same result as without the crash" "$(outcome p1)" "$(outcome p2)"
assert_eq "two children, each started once" "p2.1 p2.2 2" "$(children p2) $(count p2 ChildStarted)"
assert_eq "each child answered once" "1 1" "$(count p2.1 ActivityCompleted model.turn) $(count p2.2 ActivityCompleted model.turn)"
assert_eq "each child's tokens counted once" 3340 "$(engine show p2 --json | jget result.tokens)"
assert_eq "the sandboxes are gone" "0 0" "$(containers p2.1) $(containers p2.2)"
verify_history p2 >/dev/null || fail "p2 history"
for id in p1 p1.1 p2 p2.2; do # the parent's log and its children's replay against the script
  engine replay "$id" >"$T/replay.out" 2>&1 && pass "replay of $id" || fail "replay of $id: $(cat "$T/replay.out")"
done

# --- the parent cancelled while both run: the children are cancelled, their clean-up runs
scenario_with_gates a4 b4
engine start "$WF" --input @"$T/input.json" --id p4 --detach >/dev/null 2>&1 || true
wait_true 120 'both_running p4' 'statuses; model_health held' || true
assert_exit "engine cancel of the parent" 0 engine cancel p4
wait_status p4 cancelled 120 || fail "p4: $(status p4)"
wait_true 120 '[ "$(status p4.1) $(status p4.2)" = "cancelled cancelled" ]' 'statuses' || true
wait_true 120 '[ "$(containers p4) $(containers p4.1) $(containers p4.2)" = "0 0 0" ]' || true
assert_eq "no sandbox is left" "0 0 0" "$(containers p4) $(containers p4.1) $(containers p4.2)"

# --- a sub-session's approval: in the same inbox, naming its parent. The
# parent's requiresApproval is the child's too.
cat >"$T/scenario.json" <<'EOF'
{"steps": [
  {"reply": {"tool_calls": [{"id": "e1", "name": "delegate", "arguments": {"objective": "Read part E", "tools": ["read_file"]}}]}},
  {"reply": {"text": "{\"summary\": \"E done\", \"result\": {}}"}}],
 "routes": [
  {"body_has": "return 1; }", "step": {"reply": {"text": "{\"summary\": \"E read\", \"result\": {}}"}}},
  {"body_has": "Read part E\\n\\nThe full task", "step": {"reply": {"tool_calls": [
     {"id": "r1", "name": "read_file", "arguments": {"path": "/workspace/input/code/a.c"}}]}}}]}
EOF
curl -sf -X POST "$MURL/_scenario" -d @"$T/scenario.json" >/dev/null || fail "scenario"
lua5.4 "$SRC/tests/integration/merge_json.lua" "$T/input.json" \
  '{"permissions": {"tools": ["read_file", "list_files"], "requiresApproval": ["read_file"]}}' >"$T/input3.json"
engine start "$WF" --input @"$T/input3.json" --id p3 --detach >/dev/null 2>&1 || true
inbox() { curl -sf "$URL/v1/approvals" | lua5.4 -e 'for _, a in ipairs(require"cjson".decode(io.read("a")).approvals) do
  io.write(a.session_id, " ", tostring(a.parent), " ", tostring(a.request.parent_session), " ", a.tool, "\n") end'; }
wait_true 120 '[ -n "$(inbox)" ]' 'inbox; statuses' || true
assert_eq "the child's approval is in the inbox, naming its parent" "p3.1 p3 p3 read_file" "$(inbox)"
assert_exit "approved like any session's" 0 approve_pending p3.1 --reason "fine"
wait_status p3 completed 120 || fail "p3: $(status p3)"
assert_contains "the child's answer came back after the approval" '"summary":"E read"' "$(tool_msgs)"

# --- the engine-wide caps at one session and one sandbox, held by the
# parent: its sub-sessions run in its slots (waiting for slots of their own
# while it waits for them would never end)
printf 'sessions = 1\nsandboxes = 1\n' >"$T/limits.lua"
scenario_with_gates a5 b5
held0="$(model_health held)" # the cancelled p4's children's turns are still held there
engine start "$WF" --input @"$T/input.json" --id p5 --detach >/dev/null 2>&1 || true
wait_true 120 '[ "$(status p5.1) $(status p5.2) $(( $(model_health held) - held0 ))" = "running running 2" ]' \
  'statuses; model_health held' || true
assert_eq "under caps of one session and one sandbox, both sub-sessions run beside their parent" "running running 2" \
  "$(status p5.1) $(status p5.2) $(( $(model_health held) - held0 ))"
release a5; release b5
wait_status p5 completed 120 || fail "p5: $(status p5)"
assert_eq "and the parent completes with their answers" "$(outcome p1)" "$(outcome p5)"
finish
