#!/usr/bin/env bash
# engine/server/openapi.json describes the server as it answers: GET /v1/openapi.json
# serves that file; it is a valid OpenAPI 3.1 document; every operation it
# names is a route (never 405, a 404 only for an unknown workflow) and every
# other method on its paths is 405 with Allow naming exactly its methods; the
# real answers of a session's life (start, show, list, events as a page and as
# a stream, history, signals, cancel, approvals, the feed, metrics, the
# limits) match its schemas field for field; every operation needs exactly the
# scope it documents. tests/unit/test_api_routes.c holds engine/server/api.c's route
# table against the same file. The checks: tests/integration/openapi_check.py.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3 # Debian's interpreter: python3-jsonschema is installed for it
CHECK="$SRC/tests/integration/openapi_check.py"
DOC="$T/openapi.json"
export ENGINE_SSE_HEARTBEAT_MS=200 ENGINE_HTTP_MAX_BODY_BYTES=2048
$PY -c 'import jsonschema' 2>/dev/null || { fail "python3-jsonschema is missing for $PY (scripts/install-deps)"; finish; }

# serve_api [ENV=VALUE...]: engine serve --listen on a free port, its base URL in URL
serve_api() {
  : >"$T/serve.err"
  bg SERVE env "$@" "$ENGINE" serve --listen 127.0.0.1:0 --workflows "$SRC/workflows" 2>"$T/serve.err"
  URL="$(api_url "$T/serve.err")"
  [ -n "$URL" ] && return 0
  fail "engine serve did not start: $(cat "$T/serve.err")"
  finish
}
stop_api() { kill -TERM "$SERVE"; wait "$SERVE" 2>/dev/null || true; }

# api METHOD PATH [-H 'Name: value']... [-d BODY]: the answer in STATUS and
# BODY; a failure when it is not as the document describes it
api() {
  local out rc
  set +e
  out="$($PY "$CHECK" call "$DOC" "$URL" "$@" 2>"$T/check.err")"
  rc=$?
  set -e
  STATUS="${out%%$'\n'*}"
  BODY="${out#*$'\n'}"
  [ "$rc" -eq 0 ] || fail "$1 $2 is not answered as documented: $(cat "$T/check.err")"
}
# sse PATH [-H ...] [--seconds N] [--until-heartbeat]: the stream's frames, one
# line each, checked against the document
sse() { $PY "$CHECK" sse "$DOC" "$URL" "$@"; }
summary_field() { api GET "/v1/workflows/$1"; jget "$2" <<<"$BODY"; }
wait_field() { # ID FIELD VALUE: until the summary's FIELD is VALUE
  wait_true 30 '[ "$(summary_field "$1" "$2")" == "$3" ]' '' "$@" && return 0
  fail "$1: $2 never became $3 (is: $(summary_field "$1" "$2"))"
}

# --- a pending approval request, asked by a CLI worker that then dies
"$ENGINE" start "$SRC/tests/integration/wf/approvals.lua" --id ap1 \
  --input '{"requests":[{"id":"r1","tool":"shell","timeout":3600}]}' >/dev/null 2>&1 &
P=$!
PIDS+=("$P")
wait_true 30 'engine history ap1 2>/dev/null | tail -1 | has_line SignalWaitStarted' || true
kill -9 "$P"
wait "$P" 2>/dev/null || true

# --- the document, served and valid
serve_api
if curl -sf "$URL/v1/openapi.json" -o "$DOC"; then pass "GET /v1/openapi.json"; else fail "GET /v1/openapi.json"; fi
if cmp -s "$DOC" "$SRC/engine/server/openapi.json"; then pass "the server serves engine/server/openapi.json"
else fail "the served document is not engine/server/openapi.json (re-run cmake)"; fi
assert_exit "a valid OpenAPI 3.1 document" 0 $PY "$CHECK" validate "$DOC"
echo "   $OUT"
api GET /v1/openapi.json
assert_eq "served as documented" 200 "$STATUS"
# the checker refuses a document that breaks a rule (so that its yes means something)
broken() { # WHAT EXPECTED-MESSAGE PYTHON-EDIT-OF-d
  $PY -c "import json, sys; d = json.load(open(sys.argv[1])); $3; json.dump(d, open(sys.argv[2], 'w'))" \
    "$DOC" "$T/broken.json"
  assert_exit "refused: $1" 1 $PY "$CHECK" validate "$T/broken.json"
  assert_contains "says why" "$2" "$ERR"
}
broken "OpenAPI 3.0" "not 3.1.x" "d['openapi'] = '3.0.3'"
broken "a path template without its parameter" "path template {id} has no path parameter" \
  "d['paths']['/v1/workflows/{id}']['parameters'] = []"
broken "a schema that is not JSON Schema" "not a valid JSON Schema 2020-12" \
  "d['components']['schemas']['Error']['type'] = 'obj'"
broken "a \$ref to nothing" "does not resolve" \
  "d['components']['schemas']['Event']['properties']['time'] = {'\$ref': '#/components/schemas/Nope'}"
broken "an x-scope that is not the security role" "x-scope 'admin' but security is" \
  "d['paths']['/metrics']['get']['x-scope'] = 'admin'"
broken "an unknown field of an operation" "unknown field 'response'" "d['paths']['/healthz']['get']['response'] = {}"
broken "a response without a description" "required field 'description'" \
  "del d['paths']['/healthz']['get']['responses']['200']['description']"

# --- the document's operations against the routes the server answers, both ways
assert_exit "documented operations are routes; their other methods are 405 with Allow" 0 \
  $PY "$CHECK" routes "$DOC" "$URL"
echo "   $OUT"

# --- a session's life, each answer checked against its schema
api POST /v1/workflows -d '{"script":"hello.lua","id":"h1","input":{"name":"Ada","identity":"root"}}'
assert_eq "start: 201" 201 "$STATUS"
assert_eq "the server sets the identity" anonymous "$(jget input.identity <<<"$BODY")"
api POST /v1/workflows -d '{"script":"hello.lua","id":"h1","input":{"name":"Ada"}}'
assert_eq "the same start again: 200" "200 h1" "$STATUS $(jget id <<<"$BODY")"
api POST /v1/workflows -d '{"script":"hello.lua","id":"h1","input":{"name":"Bob"}}'
assert_eq "another input for the id: 409" 409 "$STATUS"
api POST /v1/workflows -d '{"script":"hello.lua","nope":1}'
assert_eq "an unknown field: 400" 400 "$STATUS"
assert_contains "names it" "unknown field 'nope'" "$BODY"
api POST /v1/workflows -d '{"script":"../hello.lua"}'
assert_eq "a script outside the directory: 400" 400 "$STATUS"
api POST /v1/workflows -d "{\"script\":\"hello.lua\",\"input\":{\"pad\":\"$(head -c 3000 /dev/zero | tr '\0' x)\"}}"
assert_eq "a body over ENGINE_HTTP_MAX_BODY_BYTES: 413" 413 "$STATUS"
api GET /healthz -H "X-Pad: $(head -c 40000 /dev/zero | tr '\0' x)"
assert_eq "headers over the limit: 431" 431 "$STATUS"

wait_field h1 waits.kind signal
api GET /v1/workflows/h1
assert_eq "show: waits on the signal" "200 approval" "$STATUS $(jget waits.signal <<<"$BODY")"
api GET /v1/workflows/nope
assert_eq "an unknown workflow: 404" 404 "$STATUS"
assert_contains "says so" "unknown workflow 'nope'" "$BODY"
api GET /v1/workflows/a%ZZ
assert_eq "a path segment that does not decode: 400" 400 "$STATUS"

api GET "/v1/workflows?status=waiting&limit=1"
assert_eq "list: a page of one" "200 1" "$STATUS $(jget workflows <<<"$BODY" | lua5.4 -e 'print(#require"cjson".decode(io.read("a")))')"
first="$(jget workflows.1.id <<<"$BODY")"
cursor="$(jget next_cursor <<<"$BODY")"
api GET "/v1/workflows?status=waiting&limit=1&cursor=$cursor"
second="$(jget workflows.1.id <<<"$BODY")"
assert_eq "the next page has the other one" "ap1 h1" "$(printf '%s\n' "$first" "$second" | sort | tr '\n' ' ' | sed 's/ $//')"
assert_eq "and is the last" nil "$(jget next_cursor <<<"$BODY")"
api GET "/v1/workflows?status=sleeping"
assert_eq "an unknown status: 400" 400 "$STATUS"

api GET /v1/workflows/h1/history
assert_eq "history" "200 WorkflowStarted" "$STATUS $(jget events.1.type <<<"$BODY")"
api GET "/v1/workflows/h1/events?limit=2"
assert_eq "an events page" "200 2 waiting" "$STATUS $(jget last_seq <<<"$BODY") $(jget status <<<"$BODY")"
api GET "/v1/workflows/h1/events?after=x"
assert_eq "a bad after: 400" 400 "$STATUS"

api GET /v1/approvals
assert_eq "the pending approval is listed" "200 ap1 r1 shell" \
  "$STATUS $(jget approvals.1.session_id <<<"$BODY") $(jget approvals.1.request_id <<<"$BODY") $(jget approvals.1.tool <<<"$BODY")"
api POST /v1/workflows/ap1/signals/approval:r1 -d '{"approved":true}'
assert_eq "an approval signal: 403" 403 "$STATUS"
api POST /v1/workflows/ap1/approvals/r1 -d '{"approved":"yes"}'
assert_eq "approved not a boolean: 400" 400 "$STATUS"
api POST /v1/workflows/ap1/approvals/r9 -d '{"approved":true}'
assert_eq "another request than the pending one: 409" 409 "$STATUS"
api POST /v1/workflows/ap1/approvals/r1 -d '{"approved":true,"reason":"fine"}'
assert_eq "approve" "200 r1 anonymous shell" \
  "$STATUS $(jget request_id <<<"$BODY") $(jget approver <<<"$BODY") $(jget tool <<<"$BODY")"
api POST /v1/workflows/ap1/approvals/r1 -d '{"approved":true}'
assert_eq "answered already: 409" 409 "$STATUS"

# the stream, resumed after event 5 (approval.requested), while the signal ends the workflow
sse /v1/workflows/h1/events -H "Last-Event-ID: 5" --seconds 15 >"$T/sse.h1" 2>"$T/sse.h1.err" &
S=$!
PIDS+=("$S")
wait_true 30 'curl -s "$URL/metrics" | has_line "^engine_sse_streams 1"' # the stream is open
api POST /v1/workflows/h1/signals/approval -d '{"approved":true}'
assert_eq "signal" "200 approval anonymous" "$STATUS $(jget signal <<<"$BODY") $(jget sent_by <<<"$BODY")"
if wait "$S"; then pass "the stream's frames are as documented"; else fail "the stream: $(cat "$T/sse.h1.err")"; fi
frames="$(cat "$T/sse.h1")"
assert_eq "retry first" "retry 2000" "$(head -1 <<<"$frames")"
assert_eq "the events after 5, live, then the end" \
  "message 6 signal.sent|message 7 approval.decided|message 8 session.completed|end completed|closed" \
  "$(grep -v -e heartbeat -e retry <<<"$frames" | paste -sd'|')"
api POST /v1/workflows/h1/signals/approval
assert_eq "a signal to a finished workflow: 409" 409 "$STATUS"
api POST /v1/workflows/h1/cancel
assert_eq "cancel a finished workflow: 409" 409 "$STATUS"
assert_eq "a finished workflow's stream ends at once" "retry 2000|message 8 session.completed|end completed|closed" \
  "$(sse "/v1/workflows/h1/events?after=7" --seconds 5 | paste -sd'|')"

api POST /v1/workflows -d '{"script":"hello.lua","id":"h2"}'
wait_field h2 waits.kind signal
api POST /v1/workflows/h2/cancel
assert_eq "cancel" "202 h2 requested" "$STATUS $(jget id <<<"$BODY") $(jget cancel <<<"$BODY")"
wait_field h2 status cancelled
api GET /v1/workflows/h2
assert_eq "the summary of a cancelled workflow" "200 cancelled" "$STATUS $(jget status <<<"$BODY")"
api GET /v1/approvals
assert_eq "nothing pending now" "200 nil" "$STATUS $(jget approvals.1 <<<"$BODY")"

api GET "/v1/events?limit=3"
assert_eq "a page of the feed" "200 3" "$STATUS $(jget last_id <<<"$BODY")"
frames="$(sse "/v1/events?after=3" --seconds 10 --until-heartbeat)" || fail "the feed's stream is not as documented"
assert_eq "the feed's stream resumes after 3" "message 4" "$(grep message <<<"$frames" | sed -n 1p | cut -d' ' -f1-2)"
assert_contains "and beats" "heartbeat" "$frames"
api GET /metrics
assert_eq "metrics" 200 "$STATUS"
assert_contains "in the text format" "# TYPE engine_workflows gauge" "$BODY"

# --- scopes: once tokens exist, each operation needs the scope it documents
TOKENS="{"
for s in read start signal approve cancel admin; do
  tok="$("$ENGINE" token create "t-$s" --scopes "$s" 2>/dev/null)"
  TOKENS="$TOKENS\"$s\":\"$tok\","
  [ "$s" == start ] && START_TOKEN="$tok"
  [ "$s" == read ] && READ_TOKEN="$tok"
done
TOKENS="${TOKENS%,}}"
assert_exit "every operation needs exactly its documented scope" 0 $PY "$CHECK" scopes "$DOC" "$URL" "$TOKENS"
echo "   $OUT"
api POST /v1/workflows -H "Authorization: Bearer $START_TOKEN" -d '{"script":"hello.lua","id":"h3"}'
assert_eq "a start with a token" "201 token:t-start" "$STATUS $(jget input.identity <<<"$BODY")"
api GET /healthz
assert_eq "healthz needs no token" 200 "$STATUS"
stop_api

# --- past ENGINE_HTTP_MAX_CONNECTIONS: 503, as documented
serve_api ENGINE_HTTP_MAX_CONNECTIONS=1
curl -sN -H "Accept: text/event-stream" -H "Authorization: Bearer $READ_TOKEN" "$URL/v1/events" >/dev/null &
HOLD=$!
PIDS+=("$HOLD")
wait_true 30 'api GET /healthz; [ "$STATUS" == 503 ]' || true # until the stream holds the one connection
assert_eq "a connection past the limit: 503" 503 "$STATUS"
kill "$HOLD"
wait "$HOLD" 2>/dev/null || true
stop_api

finish
