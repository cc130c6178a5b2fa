#!/usr/bin/env bash
# A tool call that runs again after the engine died in the middle of it: the
# sandbox kept what the first attempt did (here a directory it made, as a
# `git clone` would), so the second attempt fails with "File exists". The
# model must hear that this is a re-run, and the event stream must say so; a
# call that ran once carries no such note.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
WF="$SRC/workflows/agent_session.lua"
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_POLICIES_DIR="$T/policies"
mkdir -p "$T/policies"
printf '%s\n' 'return { name = "all", decide = function() return "allow", "test" end }' >"$T/policies/00-all.lua"

# the model: a shell call that makes a directory and then takes long (the crash
# lands in it), a second, quick shell call, then the answer
printf '%s\n' '{"steps": [' \
  '{"reply": {"tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "mkdir /workspace/working/repo && touch /workspace/working/started && sleep 60 && echo made"}}]}},' \
  '{"reply": {"tool_calls": [{"id": "c2", "name": "shell", "arguments": {"command": "echo second"}}]}}],' \
  '"default": {"reply": {"text": "{\"summary\": \"done\", \"result\": {}}"}}}' >"$T/scenario.json"
start_model_server "$T/scenario.json"
printf '{"objective": "make the repo", "permissions": {"tools": ["shell"]}, "limits": {"maxModelTurns": 5},
  "model": {"name": "m", "provider": "openai", "baseUrl": "%s/v1"}}' "$MURL" >"$T/input.json"

bg S engine serve
"$ENGINE" start "$WF" --input @"$T/input.json" --id tr --detach >/dev/null 2>&1 || true
# the first attempt is inside its command once its marker exists in the workspace
wait_true 30 'ls "$WORKSPACES"/*/working/started >/dev/null 2>&1' || true
ls "$WORKSPACES"/*/working/started >/dev/null 2>&1 || fail "the first attempt never started its command"
kill -9 "$S"; wait "$S" 2>/dev/null || true
bg S engine serve
wait_status tr completed 120

# what the model saw: the tool message of its second request, and of its third
reqs="$(curl -sf "$MURL/_requests")"
tool_msg() { # REQUEST_INDEX -> the content of the last tool message in that request
  IDX="$1" lua5.4 -e 'local r = require"cjson".decode(io.read("a"))[tonumber(os.getenv("IDX"))]
    local last; for _, m in ipairs(r and r.body.messages or {}) do if m.role == "tool" then last = m.content end end
    io.write(tostring(last))' <<<"$reqs"
}
assert_eq "three model requests (turn 1 was not repeated)" 3 \
  "$(lua5.4 -e 'print(#require"cjson".decode(io.read("a")))' <<<"$reqs")"
first="$(tool_msg 2)"
assert_contains "the model hears the call ran again, with the attempt number" \
  "[note: this tool call ran again (attempt 2) after an earlier attempt was interrupted; the workspace may already hold that attempt's effects]" \
  "$(head -1 <<<"$first")"
assert_contains "and then what the re-run said" "File exists" "$first"
second="$(tool_msg 3)"
assert_contains "the quick call's own output" "second" "$second"
case "$second" in *"[note:"*) fail "a call that ran once carries a retry note: $second" ;;
  *) pass "a call that ran once carries no retry note" ;; esac

results="$(engine events tr --json | grep '"type":"tool.result"')"
assert_eq "two tool.result events" 2 "$(grep -c . <<<"$results")"
r1="$(sed -n 1p <<<"$results" | jget payload)"
assert_eq "the re-run is marked in the stream: attempt" 2 "$(jget attempt <<<"$r1")"
assert_eq "the re-run is marked in the stream: retried_after_interruption" true \
  "$(jget retried_after_interruption <<<"$r1")"
r2="$(sed -n 2p <<<"$results" | jget payload)"
assert_eq "the quick call is not marked" "nil" "$(jget retried_after_interruption <<<"$r2")"
kill "$S"; wait "$S" 2>/dev/null || true
finish
