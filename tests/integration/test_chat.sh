#!/usr/bin/env bash
# A chat (workflows/chat.lua): started with its first message, each message
# sent with engine message is a durable signal answered once in the same
# transcript (agent.message), as is one posted to the API; started without a
# message it waits for one holding no sandbox (across kill -9); a message that
# leads to a tool call needing approval waits for it and the chat goes on;
# kill -9 while idle and while a reply is on its way loses nothing and answers
# nothing twice; compaction bounds a long conversation; a close ends it; its
# input is checked.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
WF="$SRC/workflows/chat.lua"
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_POLICIES_DIR="$T/policies"
# allow every call, except shell commands that mention needs-ok: those ask a person
policy_needs_ok "$T/policies"
# The model answers by what the conversation holds (routes, newest first):
# the reply to each message whatever turn it comes at; the fourth is held at
# the gate g4 until the test opens it.
cat >"$T/scenario.json" <<'JSON'
{"steps": [], "default": {"reply": {"text": "reply one"}},
 "routes": [
  {"body_has": "compacting the context", "step": {"reply": {"text": "summary of the earlier conversation"}}},
  {"body_has": "fifth, over HTTP", "step": {"reply": {"text": "reply five"}}},
  {"body_has": "fourth message", "step": {"hold": "g4", "reply": {"text": "reply four"}}},
  {"body_has": "TOOL-RAN-42", "step": {"reply": {"text": "reply three"}}},
  {"body_has": "please run the tool", "step": {"reply": {"tool_calls": [{"id": "c1", "name": "shell",
     "arguments": {"command": "echo needs-ok && echo TOOL-RAN-$((6*7))"}}]}}},
  {"body_has": "second message", "step": {"reply": {"text": "reply two"}}}
 ]}
JSON
start_model_server "$T/scenario.json"
input() { # FIRST_MESSAGE [EXTRA_JSON_MEMBERS [EXTRA_MODEL_MEMBERS]]
  printf '{"message": "%s", "permissions": {"tools": ["shell"]}, "model": {"name": "m", "provider": "openai", "baseUrl": "%s/v1"%s}%s}' \
    "$1" "$MURL" "${3:-}" "${2:-}" >"$T/input.json"
}
last_status() { engine events "$1" --json | grep '"session.status"' | tail -1 | jget payload.status; }
waiting() { [ "$(last_status "$1")" == WAITING_FOR_MESSAGE ] && [ "$(status "$1")" == waiting ]; }
wait_idle() { wait_for 60 "$1 waits for a message" 'waiting "$1"' 'last_status "$1"; status "$1"' "$1"; }
# the texts of ID's agent.message events with text, one a line
replies() {
  engine events "$1" --json | grep '"agent.message"' | lua5.4 -e 'local cjson = require "cjson"
    for line in io.lines() do local t = cjson.decode(line).payload.text
      if type(t) == "string" and t ~= "" then print(t) end end'
}
count() { engine events "$1" --json | grep '"type":"'"$2"'"' | grep -c -- "$3" || true; }
held() { model_health held; }
serve_api

# --- bad input is named before anything starts (INPUT|WHAT THE ERROR SAYS)
while IFS='|' read -r in want; do
  rc=0; out="$("$ENGINE" start "$WF" --input "$in" 2>&1)" || rc=$?
  assert_eq "refused with exit 2: $in" 2 "$rc"
  assert_contains "names the problem: $want" "$want" "$out"
done <<'ROWS'
"hi"|the input must be a JSON object
{"message": "  ", "model": {"name": "m"}}|message must be text
{"message": 5, "model": {"name": "m"}}|message must be text
{"model": {"name": "m"}, "idleTimeoutSeconds": "soon"}|idleTimeoutSeconds must be
{"message": "hi", "objective": "x", "model": {"name": "m"}}|a chat has no objective
{"message": "hi", "waitForMessages": false, "model": {"name": "m"}}|a chat always waits for messages
{"message": "hi"}|model.name is missing
{"message": "hi", "model": {"name": "m"}, "idleTimeoutSeconds": 0}|idleTimeoutSeconds must be
{"message": "hi", "model": {"name": "m"}, "limits": "x"}|limits must be an object
{"message": "hi", "model": {"name": "m"}, "permissions": {"tools": "shell"}}|permissions.tools must be a list
{"message": "hi", "model": {"name": "m"}, "bogus": 1}|unknown field 'bogus'
{"message": "hi", "model": {"name": "m"}, "continuedSession": {}}|unknown field 'continuedSession'
ROWS

# --- started without a message: it waits for one, holding no sandbox; a close first ends it
printf '{"permissions": {"tools": ["shell"]}, "model": {"name": "m", "provider": "openai", "baseUrl": "%s/v1"}}' "$MURL" >"$T/input.json"
"$ENGINE" start "$WF" --input @"$T/input.json" --id quiet --detach >/dev/null 2>&1 || true
wait_idle quiet
assert_eq "no sandbox while it waits for its first message" 0 "$(count quiet sandbox.ready .)"
assert_exit "engine close" 0 engine close quiet
wait_status quiet completed 60 || fail "quiet: $(status quiet)"
assert_eq "closed before any message" closed "$(engine show quiet --json | jget result.outcome)"
assert_eq "no model call" 0 "$(nreq)"
"$ENGINE" start "$WF" --input @"$T/input.json" --id later --detach >/dev/null 2>&1 || true
wait_idle later
kill -9 "$S"; wait "$S" 2>/dev/null || true
assert_exit "its first message, later, while the engine is down" 0 engine message later "hello from later"
serve_api
wait_for 60 "the first reply" '[ "$(replies later)" == "reply one" ]' 'replies later' || true
wait_idle later
assert_contains "the message is the session's objective" '"objective":"hello from later"' "$(engine events later --json | grep '"session.created"')"
assert_eq "recorded once (user.message)" 1 "$(count later user.message 'hello from later')"
assert_exit "engine close" 0 engine close later
wait_status later completed 60 || fail "later: $(status later)"
engine replay later >/dev/null 2>&1 || fail "later does not replay: $(engine replay later 2>&1 | tail -3)"

# --- a chat: the first message answered, then it waits
input "hello chat"
"$ENGINE" start "$WF" --input @"$T/input.json" --id chat --detach >/dev/null 2>&1 || true
wait_idle chat
assert_eq "the first message is answered" "reply one" "$(replies chat)"
assert_contains "it is a chat session (session.created)" '"objective":"hello chat"' "$(engine events chat --json | grep '"session.created"')"

# --- a second message with engine message: its reply in the same transcript
assert_exit "engine message" 0 engine message chat "second message"
wait_for 60 "the second reply" '[ "$(replies chat | tail -1)" == "reply two" ]' 'replies chat' || true
wait_idle chat

# --- kill -9 while idle; a message sent while the engine is down is kept
kill -9 "$S"; wait "$S" 2>/dev/null || true
assert_exit "a message while the engine is down is kept" 0 engine message chat "please run the tool"
serve_api
# it leads to a tool call that needs approval: the chat waits for it, then goes on
wait_for 60 "the tool call waits for approval" '[ "$(engine show chat --json | jget waits.request_id)" != "" ]' \
  'engine show chat' || true
assert_exit "approved" 0 approve_pending chat
wait_for 60 "the third reply, after the tool ran" '[ "$(replies chat | tail -1)" == "reply three" ]' 'replies chat' || true
wait_idle chat
assert_contains "the tool ran once, approved" '"ok":true' "$(engine events chat --json | grep '"tool.result"')"
assert_eq "one tool result" 1 "$(count chat tool.result '"id":"c1"')"

# --- kill -9 after a message was accepted, before its reply
assert_exit "the fourth message" 0 engine message chat "fourth message"
wait_for 60 "the fourth message's model call is on its way" '[ "$(held)" -ge 1 ]' 'model_health held' || true
assert_eq "the message was accepted (user.message)" 1 "$(count chat user.message 'fourth message')"
kill -9 "$S"; wait "$S" 2>/dev/null || true
serve_api
wait_for 60 "the model call is made again after the restart" '[ "$(held)" -ge 2 ]' 'model_health held' || true
release g4
wait_for 60 "the fourth reply" '[ "$(replies chat | tail -1)" == "reply four" ]' 'replies chat' || true
wait_idle chat

# --- a message posted to the API (what the page's form sends)
code="$(curl -s -o "$T/posted" -w '%{http_code}' -X POST "$URL/v1/workflows/chat/messages" \
  -H 'Content-Type: application/json' -d '{"kind": "message", "text": "fifth, over HTTP"}')"
assert_eq "POST /v1/workflows/chat/messages" 200 "$code"
wait_for 60 "the fifth reply" '[ "$(replies chat | tail -1)" == "reply five" ]' 'replies chat' || true
wait_idle chat

# --- close ends it, with the last reply as its result
assert_exit "engine close" 0 engine close chat
wait_status chat completed 60 || fail "chat: $(status chat)"
assert_eq "each message answered once, in order" "reply one|reply two|reply three|reply four|reply five" "$(replies chat | paste -sd'|')"
for m in "second message" "please run the tool" "fourth message" "fifth, over HTTP"; do
  assert_eq "'$m' recorded once" 1 "$(count chat user.message "\"text\":\"$m\"")"
done
assert_eq "its result is the last reply" "reply five" "$(engine show chat --json | jget result.summary)"
assert_eq "session.closing said once" 1 "$(count chat session.closing .)"
verify_history chat >/dev/null || fail "chat history"
verify_events chat >/dev/null || fail "chat events"
engine replay chat >/dev/null 2>&1 || fail "chat does not replay: $(engine replay chat 2>&1 | tail -3)"

# --- compaction bounds a long conversation: many messages, a small context
curl -sf -X DELETE "$MURL/_requests" >/dev/null
PAD="$(printf 'filler %.0s' $(seq 40))"
input "hello again" ', "compaction": {"keepTurns": 2, "runEvents": 200}' ', "contextTokens": 600'
"$ENGINE" start "$WF" --input @"$T/input.json" --id long --detach >/dev/null 2>&1 || true
wait_idle long
N=30
for i in $(seq $N); do
  engine message long "m$i $PAD" >/dev/null 2>&1
  wait_for 60 "the reply to m$i" '[ "$(count long user.message "\"text\":\"m$i ")" == 1 ] && waiting long' 'last_status long' || break
done
assert_eq "every message was answered ($N and the first)" $((N + 1)) "$(replies long | wc -l)"
compacted="$(count long context.compacted .)"
[ "$compacted" -ge 2 ] && pass "the conversation was compacted ($compacted times)" || fail "compacted $compacted times"
runs="$(engine show long --json | jget run)"
[ "${runs:-1}" -ge 2 ] && pass "a long chat continues as new ($runs runs)" || fail "runs: $runs"
last_msgs="$(requests | lua5.4 -e 'local r = require"cjson".decode(io.read("a"))
  for i = #r, 1, -1 do local b = r[i].body
    if b and not require"cjson".encode(b):find("compacting the context", 1, true) then print(#b.messages) return end end')"
[ "$last_msgs" -lt $((N * 2)) ] && pass "the last turn saw $last_msgs messages, not the whole conversation" \
  || fail "the last turn saw $last_msgs messages"
assert_contains "its last message is the last one sent" "m$N filler" "$(requests | lua5.4 -e 'local r = require"cjson".decode(io.read("a"))
  for i = #r, 1, -1 do local m = r[i].body.messages; local u = m[#m]
    if u.role == "user" and not tostring(u.content):find("compacting", 1, true) then print(u.content) return end end')"
assert_exit "close the long chat" 0 engine close long
wait_status long completed 60 || fail "long: $(status long)"
finish
