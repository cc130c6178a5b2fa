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

# the model: each turn answers at once; the session then waits for a message
cat >"$T/scenario.json" <<'JSON'
{"steps": [], "default": {"reply": {"text": "{\"summary\": \"hello\", \"result\": {\"said\": \"hello\"}}",
                                    "usage": {"input_tokens": 10, "output_tokens": 5}}}}
JSON
start_model_server "$T/scenario.json"
serve_api --workflows "$SRC/workflows"

set +e
WEB_URL="$URL" WEB_ADMIN="$ADMIN" WEB_MODEL="$MURL" WEB_ID=st-1 WEB_OUT="$OUTDIR" WEB_CHROME="$CHROME" \
  timeout "$(scaled 600)" node "$WEBT/web_start_test.js"
rc=$?
set -e
[ "$rc" -eq 0 ] && pass "the browser checks (tests/web/web_start_test.js)" || fail "the browser checks: exit $rc ($(tail -5 "$T/serve.log"))"

# the message typed in the browser arrived: a durable signal in the history, sent by the token
has_message() { engine history st-1 --json 2>/dev/null | grep -q 'hello from the form'; }
wait_for 60 "the message typed in the browser is in st-1's history" has_message || true
H="$(engine history st-1 --json)"
assert_contains "a SignalReceived of session:input" '"type":"SignalReceived"' "$(grep 'hello from the form' <<<"$H" | head -1)"
assert_contains "sent by the browser's token" 'token:alice' "$(grep 'hello from the form' <<<"$H" | head -1)"
assert_eq "started by the browser's token" "token:alice" "$(engine show st-1 --json | jget input.identity)"
# the chat-like session waits on: cancelled, so its sandbox goes before the test's files
curl -s -o /dev/null -X POST -H "Authorization: Bearer $ADMIN" "$URL/v1/workflows/st-1/cancel"
wait_status st-1 cancelled 120 || fail "st-1 was not cancelled: $(status st-1)"
finish
