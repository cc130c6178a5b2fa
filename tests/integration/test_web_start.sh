#!/usr/bin/env bash
# The web page's start form and a session's message form (web/app.js,
# #/start; docs/web-page.md) in Debian's headless chromium driven by
# puppeteer-core (tests/web/web_start_test.js), against the real server, a
# real sandbox and the local model server: the PR review's form generated from
# its declared schema (nested fieldsets, a one-per-line list, defaults,
# descriptions, required marks), the schema's own errorMessage words for a
# missing field and a pattern, the raw JSON and back, the server's 400 shown
# verbatim, an agent session started as the token's identity and opened, a
# message typed into its form that arrives (the history's SignalReceived),
# axe-core on both.
source "$(dirname "$0")/lib.sh"
chmod 0711 "$T"
source "$(dirname "$0")/web_lib.sh"
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_ARTIFACTS="$T/artifacts"
ADMIN="$(engine token create alice --scopes admin)"

# allow every call, except shell commands that mention needs-ok: those ask a person
export ENGINE_POLICIES_DIR="$T/policies"
policy_needs_ok "$T/policies"
# the model: each turn answers at once; the session then waits for a message.
# The chat's turns answer by what its conversation holds (newest first): a
# reply that streams, stopped mid-way at the gate chat-stream until the
# browser test opens it; a tool call that needs approval.
cat >"$T/scenario.json" <<'JSON'
{"steps": [], "default": {"reply": {"text": "{\"summary\": \"hello\", \"result\": {\"said\": \"hello\"}}",
                                    "usage": {"input_tokens": 10, "output_tokens": 5}}},
 "routes": [
  {"body_has": "one more thing", "step": {"reply": {"text": "still here"}}},
  {"body_has": "TOOL-RAN-42", "step": {"reply": {"text": "the tool said TOOL-RAN-42"}}},
  {"body_has": "please run the tool", "step": {"reply": {"tool_calls": [{"id": "c1", "name": "shell",
     "arguments": {"command": "echo needs-ok && echo TOOL-RAN-$((6*7))"}}]}}},
  {"body_has": "stream me a reply", "step": {"reply": {"text": "these words stream in one by one"},
     "hold_after_events": {"events": 3, "gate": "chat-stream"}}},
  {"body_has": "chat-first", "step": {"reply": {"text": "chat reply one"}}}
 ]}
JSON
start_model_server "$T/scenario.json"
serve_api --workflows "$SRC/workflows"

set +e
WEB_URL="$URL" WEB_ADMIN="$ADMIN" WEB_MODEL="$MURL" WEB_ID=st-1 WEB_CHAT_ID=chat-1 WEB_OUT="$OUTDIR" WEB_CHROME="$CHROME" \
  timeout "$(scaled 600)" node "$WEBT/web_start_test.js"
rc=$?
set -e
[ "$rc" -eq 0 ] && pass "the browser checks (tests/web/web_start_test.js)" || fail "the browser checks: exit $rc ($(tail -5 "$T/serve.log"))"

# the message typed in the browser arrived: a durable signal in the history, sent by the token
has_message() { engine history st-1 --json 2>/dev/null | has_line 'hello from the form'; }
wait_for 60 "the message typed in the browser is in st-1's history" has_message || true
H="$(engine history st-1 --json)"
assert_contains "a SignalReceived of session:input" '"type":"SignalReceived"' "$(grep 'hello from the form' <<<"$H" | sed -n 1p)"
assert_contains "sent by the browser's token" 'token:alice' "$(grep 'hello from the form' <<<"$H" | sed -n 1p)"
assert_eq "started by the browser's token" "token:alice" "$(engine show st-1 --json | jget input.identity)"
# the chat started by the form: every message answered once, the tool approved in the browser
assert_eq "the chat was started by the browser's token" "token:alice" "$(engine show chat-1 --json | jget input.identity)"
CE="$(engine events chat-1 --json)"
assert_eq "three messages typed, each recorded once" 3 "$(grep -c '"type":"user.message"' <<<"$CE")"
assert_contains "the tool call approved by the browser's token" '"approver":"token:alice"' "$(grep '"approval.decided"' <<<"$CE")"
assert_exit "engine close ends the chat" 0 engine close chat-1
wait_status chat-1 completed 120 || fail "chat-1 did not complete: $(status chat-1)"
assert_eq "its result is its last reply" "still here" "$(engine show chat-1 --json | jget result.summary)"
# the PR review the form started: its input as typed, by the browser's token
assert_eq "the PR review started from the form" "pr_review.lua octo-org/api 2 token:alice" \
  "$(engine show pr-web-1 --json | lua5.4 -e 'local w = require"cjson".decode(io.read("a"))
    print(table.concat({w.script:match("[^/]*$"), w.input.pr.repo, math.tointeger(w.input.pr.number) or "?", w.input.identity}, " "))')"
# the chat-like session waits on: cancelled, so its sandbox goes before the test's files
curl -s -o /dev/null -X POST -H "Authorization: Bearer $ADMIN" "$URL/v1/workflows/st-1/cancel"
wait_status st-1 cancelled 120 || fail "st-1 was not cancelled: $(status st-1)"
finish
