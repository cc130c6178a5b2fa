#!/usr/bin/env bash
# A turn with several tool calls (workflows/agent_session.lua run_calls): the
# calls policy allows run at once (those that exec in the sandbox one after
# another: each exec's clean-up ends the sandbox user's processes); the ones
# that need approval are asked
# together and answered in any order (naming the request); the results go
# back to the model in call order; a kill -9 while three run resumes with the
# finished call recorded once and only the unfinished ones run again.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
WF="$SRC/workflows/agent_session.lua"
MCP="$SRC/tests/mcp_server/server.py"
PY="$(command -v python3)"
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_POLICIES_DIR="$T/policies" ENGINE_MCP_ALLOW="$PY"
# allow every call, except shell commands that mention needs-ok: those ask a person
policy_needs_ok "$T/policies"
model() { # STEP_JSON: one turn of tool calls, then the answer
  printf '{"steps": [%s], "default": {"reply": {"text": "{\\"summary\\": \\"done\\", \\"result\\": {}}"}}}' "$1" >"$T/scenario.json"
  curl -sf -X POST "$MURL/_scenario" -d @"$T/scenario.json" >/dev/null || fail "scenario"
  curl -sf -X DELETE "$MURL/_requests" >/dev/null
}
printf '{"steps":[]}' >"$T/scenario.json"
start_model_server "$T/scenario.json"
input() { printf '{"objective": "run three", "permissions": {"tools": ["shell"]}, "limits": {"maxModelTurns": 5},
  "mcpServers": {"srv": {"command": "%s", "args": ["%s", "--stdio", "--mode", "ok", "--log", "%s"], "timeoutSeconds": 20}},
  "model": {"name": "m", "provider": "openai", "baseUrl": "%s/v1"}}' "$PY" "$MCP" "$T/mcp.log" "$MURL"; }
input >"$T/input.json"
call() { printf '{"id": "%s", "name": "shell", "arguments": {"command": "%s"}}' "$1" "$2"; }
slow() { printf '{"id": "%s", "name": "mcp__srv__slow", "arguments": {"seconds": %s}}' "$1" "$2"; }
mcp_calls() { grep -c 'tools/call' "$T/mcp.log" 2>/dev/null || true; }
# the tool messages of model request N, as id:first-line-of-content
tool_msgs() {
  curl -sf "$MURL/_requests" | N="$1" lua5.4 -e 'local r = require"cjson".decode(io.read("a"))[tonumber(os.getenv("N"))]
    local out = {}
    for _, m in ipairs(r and r.body.messages or {}) do
      if m.role == "tool" then -- the first line after a re-run note
        out[#out + 1] = m.tool_call_id .. ":" .. (m.content:gsub("^%[note:[^\n]*\n+", ""):match("[^\n]*") or "")
      end
    end
    io.write(table.concat(out, " "))'
}
ev_types() { engine events "$1" --json | lua5.4 -e 'for l in io.lines() do local e = require"cjson".decode(l)
  if e.type:match("^tool%.") or e.type:match("^approval%.") then io.write(e.type, ":", e.payload.id or e.payload.request_id or "", " ") end end'; }

serve_api
READ="$(engine token create reader --scopes read 2>/dev/null)"

# --- three allowed calls: they overlap, and come back in call order
model "{\"reply\": {\"tool_calls\": [$(slow c1 1.5), $(call c2 'echo two'), $(slow c3 0.7)]}}"
"$ENGINE" start "$WF" --input @"$T/input.json" --id p1 --detach >/dev/null 2>&1 || true
wait_status p1 completed 120 || fail "p1: $(status p1)"
assert_eq "the model heard the results in call order" "c1:slept c2:exit code: 0 c3:slept" "$(tool_msgs 2)"
types="$(ev_types p1)"
assert_eq "requested together, results in call order" \
  "tool.requested:c1 tool.requested:c2 tool.requested:c3 tool.result:c1 tool.result:c2 tool.result:c3 " "$types"
order="$(engine history p1 | awk '$3 ~ /Activity/ && $0 ~ /session.tool/ {printf "%s ", $3}')"
assert_eq "the three tool activities were scheduled before any finished" \
  "ActivityScheduled ActivityScheduled ActivityScheduled ActivityCompleted ActivityCompleted ActivityCompleted " "$order"
done_order="$(engine history p1 --json | lua5.4 -e 'for l in io.lines() do local e = require"cjson".decode(l)
  if e.type == "ActivityCompleted" and e.name == "session.tool" then io.write(e.payload.tool_call_id, " ") end end')"
assert_eq "they ran at once: the shell call, the short and then the long MCP call finished in that order" "c2 c3 c1 " "$done_order"

# --- two shell calls exec one after the other, in call order
model "{\"reply\": {\"tool_calls\": [$(call s1 'sleep 0.5; echo first'), $(call s2 'echo second')]}}"
"$ENGINE" start "$WF" --input @"$T/input.json" --id ps --detach >/dev/null 2>&1 || true
wait_status ps completed 120 || fail "ps: $(status ps)"
assert_eq "neither exec ended the other" "s1:exit code: 0 s2:exit code: 0" "$(tool_msgs 2)"
done_order="$(engine history ps --json | lua5.4 -e 'for l in io.lines() do local e = require"cjson".decode(l)
  if e.type == "ActivityCompleted" and e.name == "session.tool" then io.write(e.payload.tool_call_id, " ") end end')"
assert_eq "the execs ran in call order" "s1 s2 " "$done_order"

# --- two need approval: asked together, answered in any order
model "{\"reply\": {\"tool_calls\": [$(call a1 'echo needs-ok-1'), $(call a2 'echo needs-ok-2'), $(call a3 'echo free')]}}"
"$ENGINE" start "$WF" --input @"$T/input.json" --id p2 --detach >/dev/null 2>&1 || true
wait_true 30 '[ "$(engine events p2 --json | grep -c '\''"approval.requested"'\'')" -ge 2 ]' || true
wait_true 30 '[ "$(engine history p2 | grep -c '\''SignalWaitStarted'\'')" -ge 2 ]' || true
assert_eq "both requests asked before any answer" "tool.requested:a1 tool.requested:a2 tool.requested:a3 approval.requested:" \
  "$(ev_types p2 | sed 's/approval.requested:[^ ]* approval.requested:[^ ]* $/approval.requested:/')"
rids="$(engine events p2 --json | lua5.4 -e 'for l in io.lines() do local e = require"cjson".decode(l)
  if e.type == "approval.requested" then io.write(e.payload.request_id, " ") end end')"
r1="${rids%% *}"; r2="$(echo "$rids" | awk '{print $2}')"
inbox="$(curl -sf -H "Authorization: Bearer $READ" "$URL/v1/approvals" | lua5.4 -e 'local n = 0
  for _, a in ipairs(require"cjson".decode(io.read("a")).approvals) do if a.session_id == "p2" then n = n + 1 end end print(n)')"
assert_eq "GET /v1/approvals lists both requests of the turn" 2 "$inbox"
assert_contains "and the metric counts both" "engine_approvals_pending 2" \
  "$(curl -sf -H "Authorization: Bearer $READ" "$URL/metrics")"
assert_exit "approve without naming one of two" 2 engine approve p2
assert_contains "says there are two to choose from" "waits on 2 approval requests" "$ERR"
assert_exit "approve the second first" 0 engine approve p2 --request "$r2" --reason "second ok"
# (answers that come together are taken in the order the session asked them)
wait_true 30 '[ "$(engine events p2 --json | grep -c '\''"approval.decided"'\'')" -ge 1 ]' || true
assert_exit "deny the first" 0 engine approve p2 --request "$r1" --deny --reason "not this one"
wait_status p2 completed 120 || fail "p2: $(status p2)"
tm="$(tool_msgs 2)"
assert_contains "the denied call is answered as denied, in its place" "a1:denied: not this one" "$tm"
case "$tm" in "a1:denied"*" a2:exit code: 0 a3:exit code: 0") pass "call order kept: $tm" ;; *) fail "call order: $tm" ;; esac
R2="$r2"; export R2
decided="$(engine events p2 --json | lua5.4 -e 'for l in io.lines() do local e = require"cjson".decode(l)
  if e.type == "approval.decided" then io.write(e.payload.request_id == os.getenv("R2") and "second" or "first", " ") end end')"
assert_eq "decided in the order answered" "second first " "$decided"
verify_history p2 >/dev/null || fail "p2 history"

# --- kill -9 while three run: the finished one is not run again
: >"$T/mcp.log"
model "{\"reply\": {\"tool_calls\": [$(call k1 'echo quick'), $(slow k2 3), $(slow k3 3)]}}"
"$ENGINE" start "$WF" --input @"$T/input.json" --id p3 --detach >/dev/null 2>&1 || true
wait_true 30 'engine history p3 --json 2>/dev/null | grep "\"ActivityCompleted\"" | has_line "\"tool_call_id\":\"k1\"" &&
  [ "$(mcp_calls)" -ge 2 ]' || true
assert_eq "both slow calls were running at the kill" 2 "$(mcp_calls)"
kill -9 "$S"; wait "$S" 2>/dev/null || true
serve_api
wait_status p3 completed 120 || fail "p3: $(status p3)"
attempts="$(engine events p3 --json | lua5.4 -e 'for l in io.lines() do local e = require"cjson".decode(l)
  if e.type == "tool.result" then io.write(e.payload.id, ":", tostring(math.tointeger(e.payload.attempt)), ":",
    tostring(e.payload.retried_after_interruption == true), " ") end end')"
assert_eq "the finished call ran once; the unfinished ones again, marked so" "k1:nil:false k2:2:true k3:2:true " "$attempts"
assert_eq "the two unfinished calls ran again (four calls in all)" 4 "$(mcp_calls)"
assert_eq "after the restart, the model heard all three in call order" "k1:exit code: 0 k2:slept k3:slept" "$(tool_msgs 2)"
verify_history p3 >/dev/null || fail "p3 history"
finish
