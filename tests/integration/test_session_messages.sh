#!/usr/bin/env bash
# Talking to a running session (engine message, interrupt, close; POST
# /v1/workflows/{id}/messages): a chat session (waitForMessages) answers each
# message and ends on close or when idle; a message joins the transcript once,
# with who sent it, also across kill -9; an interrupt stops the session at its
# next safe point and it waits for a message; forged or bad input is refused.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
WF="$SRC/workflows/agent_session.lua"
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_POLICIES_DIR="$T/policies"
mkdir -p "$T/policies"
printf '%s\n' 'return { name = "all", decide = function() return "allow", "test" end }' >"$T/policies/00-all.lua"
printf '{"steps":[]}' >"$T/scenario.json"
start_model_server "$T/scenario.json"
model() { # STEPS_JSON (a list): the model's turns, then a JSON answer
  printf '{"steps": %s, "default": {"reply": {"text": "{\\"summary\\": \\"fallback\\", \\"result\\": {}}"}}}' "$1" >"$T/s.json"
  curl -sf -X POST "$MURL/_scenario" -d @"$T/s.json" >/dev/null || fail "scenario"
  curl -sf -X DELETE "$MURL/_requests" >/dev/null
}
input() { # EXTRA_JSON_MEMBERS
  printf '{"objective": "talk", "permissions": {"tools": ["shell"]}, "limits": {"maxModelTurns": 10},
    "model": {"name": "m", "provider": "openai", "baseUrl": "%s/v1"}%s}' "$MURL" "$1" >"$T/input.json"
}
text() { printf '{"reply": {"text": "%s"}}' "$1"; }
# the user messages of model request N, joined by |
user_msgs() {
  curl -sf "$MURL/_requests" | N="$1" lua5.4 -e 'local r = require"cjson".decode(io.read("a"))[tonumber(os.getenv("N"))]
    local out = {}
    for _, m in ipairs(r and r.body.messages or {}) do if m.role == "user" then out[#out + 1] = m.content end end
    io.write(table.concat(out, "|"))'
}
nreq() { curl -sf "$MURL/_requests" | lua5.4 -e 'print(#require"cjson".decode(io.read("a")))'; }
last_status() { engine events "$1" --json | grep '"session.status"' | tail -1 | jget payload.status; }
wait_waiting() { # ID: until the session waits for a message
  wait_true 30 '[ "$(last_status "$1")" == WAITING_FOR_MESSAGE ]' '' "$@" && return 0
  fail "$1 never waited for a message ($(status "$1"))"
}
ev_count() { engine events "$1" --json | grep -c "\"type\":\"$2\"" || true; }
serve_api

# --- a chat session: answer, message, answer, kill -9 while it waits, message, close
model "[$(text "first answer"), $(text "second answer"), $(text "third answer")]"
input ', "waitForMessages": true'
"$ENGINE" start "$WF" --input @"$T/input.json" --id chat --detach >/dev/null 2>&1 || true
wait_waiting chat
assert_eq "it answered and waits (still running)" waiting "$(status chat)"
assert_exit "engine message" 0 engine message chat "also check the tests"
wait_true 30 '[ "$(nreq)" -ge 2 ]' || true
wait_waiting chat
assert_contains "the model heard the message in its next turn" "|also check the tests" "$(user_msgs 2)"
ev="$(engine events chat --json | grep '"user.message"')"
assert_contains "user.message says what" '"text":"also check the tests"' "$ev"
assert_contains "and who sent it (the local user)" "\"sender\":\"local:" "$ev"
kill -9 "$S"; wait "$S" 2>/dev/null || true
assert_exit "a message while the engine is down is kept" 0 engine message chat "and the docs"
serve_api
wait_true 30 '[ "$(nreq)" -ge 3 ]' || true
wait_waiting chat
assert_contains "after kill -9, the message joins once" "|also check the tests|and the docs" "$(user_msgs 3)"
assert_eq "each message recorded once" 2 "$(ev_count chat user.message)"
assert_exit "engine close" 0 engine close chat
wait_status chat completed 60 || fail "chat: $(status chat)"
assert_eq "its result is the last answer" "third answer" "$(engine show chat --json | jget result.summary)"
assert_eq "three model turns, no more" 3 "$(nreq)"
verify_history chat >/dev/null || fail "chat history"

# --- a long chat continues as new (compaction.runEvents): no message is lost at a run boundary
model "[]"
printf '{"steps": [], "default": {"reply": {"text": "ok"}}}' >"$T/s.json"
curl -sf -X POST "$MURL/_scenario" -d @"$T/s.json" >/dev/null; curl -sf -X DELETE "$MURL/_requests" >/dev/null
input ', "waitForMessages": true, "compaction": {"runEvents": 200}, "limits": {"maxModelTurns": 100}'
"$ENGINE" start "$WF" --input @"$T/input.json" --id long --detach >/dev/null 2>&1 || true
wait_waiting long
for i in $(seq 30); do
  engine message long "m$i" >/dev/null
  wait_true 30 '[ "$(nreq)" -gt "$i" ]' || true
done
wait_waiting long
engine close long >/dev/null
wait_status long completed 60 || fail "long: $(status long)"
assert_eq "every message recorded once, across runs" 30 "$(ev_count long user.message)"
runs="$(engine show long --json | jget run)"
[ "$runs" -gt 1 ] && pass "it continued as new ($runs runs)" || fail "one run only: the test did not cross a boundary"
assert_contains "the last request has the last message" "|m30" "$(user_msgs 31)"
assert_eq "one answer per message, plus the first" 31 "$(nreq)"

# --- idle: a chat session nobody talks to ends
model "[$(text "hello")]"
input ', "waitForMessages": true, "idleTimeoutSeconds": 0.5'
"$ENGINE" start "$WF" --input @"$T/input.json" --id idle --detach >/dev/null 2>&1 || true
wait_status idle completed 60 || fail "idle: $(status idle)"
assert_eq "session.idle says so" 1 "$(ev_count idle session.idle)"

# --- interrupt: a non-chat session stops before its next turn and waits for a message
# (its tool call runs until the test opens a gate, once the run has taken the
# interrupt: its SignalReceived in the history. A gate opened when the
# signal was only written let the call's end reach the run first on a loaded
# machine, and the interrupt fell in the next model turn)
model "[{\"reply\": {\"tool_calls\": [{\"id\": \"t1\", \"name\": \"shell\", \"arguments\": {\"command\": \"touch /workspace/working/started; while [ ! -e /workspace/working/go ]; do sleep 0.1; done; echo done\"}}]}}]"
input ''
"$ENGINE" start "$WF" --input @"$T/input.json" --id intr --detach >/dev/null 2>&1 || true
wait_true 120 'ls "$T"/workspaces/*/working/started >/dev/null 2>&1' || true
assert_exit "engine interrupt" 0 engine interrupt intr --reason "wrong direction"
wait_true 120 'engine history intr 2>/dev/null | grep SignalReceived | has_line "session:input"' 'engine history intr | tail -5'
for d in "$T"/workspaces/*/working; do touch "$d/go"; done
wait_waiting intr
assert_eq "one model turn before the interrupt took effect" 1 "$(nreq)"
iv="$(engine events intr --json | grep '"session.interrupted"')"
assert_contains "session.interrupted has the reason" '"reason":"wrong direction"' "$iv"
assert_contains "and who" "\"by\":\"local:" "$iv"
assert_contains "and where" "before a model turn" "$iv"
# the API: a message with the token's identity
TOK="$(engine token create talker --scopes signal 2>/dev/null)"
code="$(curl -s -o "$T/msg.out" -w '%{http_code}' -H "Authorization: Bearer $TOK" -X POST "$URL/v1/workflows/intr/messages" \
  -d '{"text": "go on with the tests"}')"
assert_eq "POST messages: 200" 200 "$code"
assert_contains "sent by the token" '"sent_by":"token:talker"' "$(cat "$T/msg.out")"
wait_status intr completed 60 || fail "intr: $(status intr)"
assert_contains "the model heard the message after the interrupt" "go on with the tests" "$(user_msgs 2)"
assert_contains "the API's sender is recorded" '"sender":"token:talker"' "$(engine events intr --json | grep '"user.message"')"

# --- an interrupt during a model call abandons it: its late answer is never part of the conversation
model "[{\"reply\": {\"text\": \"the slow answer\"}, \"hold\": \"ab\"}, $(text '{\"summary\": \"the answer after the message\", \"result\": {}}')]"
input ''
"$ENGINE" start "$WF" --input @"$T/input.json" --id ab --detach >/dev/null 2>&1 || true
wait_true 30 '[ "$(nreq)" -ge 1 ]' || true
assert_exit "interrupt during the model call" 0 engine interrupt ab --reason "too slow"
wait_waiting ab
assert_contains "session.interrupted says the call was abandoned" "during a model turn (abandoned)" \
  "$(engine events ab --json | grep '"session.interrupted"')"
served="$(model_health served)"
release ab # the abandoned call's answer comes now
wait_true 30 '[ "$(model_health served)" -gt "$served" ]'
assert_exit "a message after the interrupt" 0 engine message ab "try again"
wait_status ab completed 60 || fail "ab: $(status ab)"
assert_eq "its result is the next turn's" "the answer after the message" "$(engine show ab --json | jget result.summary)"
assistant="$(curl -sf "$MURL/_requests" | lua5.4 -e 'local rs = require"cjson".decode(io.read("a")); local r = rs[#rs]
  for _, m in ipairs(r.body.messages) do if m.role == "assistant" then io.write(m.content or "", "|") end end')"
case "$assistant" in *"slow answer"*) fail "the abandoned answer reached the model: $assistant" ;;
  *) pass "the abandoned answer is not in the transcript" ;; esac
assert_eq "no agent.message for the abandoned answer" 1 "$(ev_count ab agent.message)"
verify_history ab >/dev/null || fail "ab history"

# --- the same under the engine's cap on model calls (the call holds a slot): abandoned, the slot is given back
printf 'model_calls = { default = 2 }\n' >"$(dirname "$ENGINE_DB")/limits.lua"
model "[{\"reply\": {\"text\": \"the slow answer\"}, \"hold\": \"abc\"}, $(text '{\"summary\": \"capped and answered\", \"result\": {}}')]"
"$ENGINE" start "$WF" --input @"$T/input.json" --id abc --detach >/dev/null 2>&1 || true
wait_true 30 '[ "$(nreq)" -ge 1 ]' || true
assert_exit "interrupt a capped model call" 0 engine interrupt abc
wait_waiting abc
release abc # the abandoned call's answer, whenever it comes, is not the session's
assert_exit "a message after it" 0 engine message abc "again"
wait_status abc completed 60 || fail "abc: $(status abc)"
assert_eq "capped: its result is the next turn's" "capped and answered" "$(engine show abc --json | jget result.summary)"
assert_eq "capped: no slot left held" 0 "$(sqlite3 "$ENGINE_DB" "SELECT count(*) FROM slots")"
rm -f "$(dirname "$ENGINE_DB")/limits.lua"

# --- what is refused
assert_exit "an empty message" 2 engine message intr ""
assert_contains "says it is empty" "the message is empty" "$ERR"
assert_exit "a message to a finished session" 2 engine message intr "late"
assert_contains "says it is finished" "completed" "$ERR"
assert_exit "a forged session signal" 2 engine signal intr session:input '{"kind":"message","text":"x","sender":"local:root"}'
assert_contains "names the commands to use" "engine message" "$ERR"
big="$(head -c 70000 /dev/zero | tr '\0' a)"
assert_exit "a message over 64 KiB" 2 engine message intr "$big"
assert_contains "names the size" "more than 65536" "$ERR"
for body in '{"kind": "dance"}' '{"text": 5}' '[1]' 'not json' '{"kind": "message", "text": ""}'; do
  code="$(curl -s -o "$T/bad.out" -w '%{http_code}' -H "Authorization: Bearer $TOK" -X POST "$URL/v1/workflows/chat/messages" -d "$body")"
  assert_eq "POST messages $body: 400" 400 "$code"
done
code="$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOK" -X POST "$URL/v1/workflows/chat/signals/session:input" -d '{}')"
assert_eq "session:input through the signals route: 403" 403 "$code"
assert_exit "waitForMessages must be a boolean" 2 "$ENGINE" start "$WF" --id badin --quiet --input \
  "{\"objective\": \"x\", \"model\": {\"name\": \"m\"}, \"waitForMessages\": \"yes\", \"idleTimeoutSeconds\": -1}"
assert_contains "names waitForMessages" "waitForMessages must be true or false" "$ERR"
assert_contains "names idleTimeoutSeconds" "idleTimeoutSeconds must be a number" "$ERR"
finish
