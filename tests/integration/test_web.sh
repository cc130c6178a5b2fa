#!/usr/bin/env bash
# The web page (web/, served by `engine serve --listen`), against the real
# server, a real sandbox and the local model server streaming slowly:
# first over plain HTTP (content types, caching, the security headers, names
# that are not files, whoami, the list's filter, artifact downloads, a tree
# of sessions' roll-up), then in Debian's headless chromium driven by
# puppeteer-core (tests/web/web_test.js): the list, the live transcript with
# its deltas, the inbox, an approval given in the browser, a token without
# approve, hostile model text, a delegating session (each delegation one item
# that opens its sub-session, the child's link back, the tree's totals,
# children under their parent in the list), "Fork from here" on a transcript
# item (its form: the input patch and the model; a patch that is not JSON, a
# refusal of the API), a fork's parent and its source's forks, an eval run's
# cases as a table linking to each case's session, no console error, no
# request to another origin, axe-core on every page. Screenshots go to
# $ENGINE_WEB_ARTIFACTS (default: build/test-artifacts/web).
source "$(dirname "$0")/lib.sh"
chmod 0711 "$T" # as root, the bwrap driver runs sandboxes as uid 10001, which must reach the workspace

# slow (a browser, a sandbox, a streaming model): once, in the plain build
source "$(dirname "$0")/web_lib.sh"

export ENGINE_CONTEXT_ROOTS="$T" ENGINE_ARTIFACTS="$T/artifacts" ENGINE_REVIEWS_DIR="$T/reviews"
# the publish in the session the browser starts needs its grant (docs/grants.md): the token holds it
ADMIN="$(engine token create alice --scopes admin --grant review:publish)"
VIEWER="$(engine token create viewer --scopes read)"

# the model: turn 1 writes hostile markup, slowly, and asks for a shell call
# (which needs approval); turn 2 answers with findings
cat >"$T/scenario.json" <<'EOF'
{"steps": [{"reply": {"text": "Let me check. <img src=x onerror=\"window.__pwned=1\"> <a href=\"javascript:window.__pwned=2\">click</a> [x](javascript:window.__pwned=3) and now a slow, steady stream of words so that the page has to show them as they come in",
                      "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "echo hello > /workspace/output/note.txt"}},
                                     {"id": "c2", "name": "publish_review", "arguments": {"summary": "the bucket loses a token", "verdict": "request_changes",
                                       "findings": [{"title": "off by one", "severity": "major", "file": "src/bucket.py", "line": 42, "body": "<img src=x onerror=\"window.__pwned=5\">"}]}}],
                      "usage": {"input_tokens": 50, "output_tokens": 40}},
            "chunk_delay": 0.05, "hold": "w0", "hold_after_events": [{"events": 6, "gate": "w1"}, {"events": 12, "gate": "w2"}]}],
 "default": {"reply": {"text": "{\"summary\": \"one finding\", \"result\": {\"findings\": [{\"file\": \"src/bucket.py\", \"line\": 42, \"severity\": \"major\", \"title\": \"off by one\", \"body\": \"<script>window.__pwned=4</script> the last token is lost\"}]}}",
                       "usage": {"input_tokens": 60, "output_tokens": 30}},
             "chunk_delay": 0.05}}
EOF
start_model_server "$T/scenario.json"
WEB_MURL="$MURL"

# a tree of sessions, on a model server of its own: a parent delegates two
# sub-reviews in one turn (each child's one turn is a route, told apart by its
# first message), then answers; the model has prices, so each has a cost
cat >"$T/tree-scenario.json" <<'EOF'
{"steps": [
  {"reply": {"tool_calls": [
     {"id": "d1", "name": "delegate", "arguments": {"objective": "Review part A", "tools": ["read_file"]}},
     {"id": "d2", "name": "delegate", "arguments": {"objective": "Review part B", "tools": ["read_file", "list_files"]}}],
   "usage": {"input_tokens": 10, "output_tokens": 5}}},
  {"reply": {"text": "{\"summary\": \"both parts reviewed\", \"result\": {\"parts\": 2}}",
   "usage": {"input_tokens": 20, "output_tokens": 5}}}],
 "routes": [
  {"body_has": "Review part A\\n\\nThe full task", "step": {
   "reply": {"text": "{\"summary\": \"A is fine\", \"result\": {\"part\": \"A\"}}", "usage": {"input_tokens": 1000, "output_tokens": 100}}}},
  {"body_has": "Review part B\\n\\nThe full task", "step": {
   "reply": {"text": "{\"summary\": \"B is fine\", \"result\": {\"part\": \"B\"}}", "usage": {"input_tokens": 2000, "output_tokens": 200}}}}]}
EOF
start_model_server "$T/tree-scenario.json"
TREE_MURL="$MURL"
MURL="$WEB_MURL"

# a stuck workflow: started here, replayed by serve into another branch (tests/integration/wf/nondet.lua)
mkdir -p "$T/wf" && cp "$SRC/tests/integration/wf/nondet.lua" "$SRC/tests/integration/wf/acts.lua" "$T/wf/"
engine start "$T/wf/nondet.lua" --id nd --detach >/dev/null 2>&1 || true

"$ENGINE" serve --listen 127.0.0.1:0 --workflows "$SRC/workflows" 2>"$T/serve.err" &
SERVE=$!
PIDS+=("$SERVE")
URL="$(api_url "$T/serve.err")"
[ -n "$URL" ] || { fail "engine serve did not start: $(cat "$T/serve.err")"; finish; }

engine signal nd go '"now"' >/dev/null # wakes it: the replay takes the other branch
wait_status nd stuck || fail "nd did not get stuck"

# the tree: started before the browser, to its end (the page reads it after)
cat >"$T/tree-input.json" <<EOF
{"script": "agent_session.lua", "id": "tree-1", "input": {"objective": "Review the code in two parts", "context": {"files": []},
 "permissions": {"tools": ["read_file", "list_files"]}, "delegation": {"enabled": true, "maxSubSessions": 2},
 "limits": {"maxModelTurns": 6, "maxTokens": 100000, "memoryMb": 256, "timeoutSeconds": 300},
 "model": {"name": "m", "provider": "openai", "baseUrl": "$TREE_MURL/v1", "prices": {"input": 100, "output": 100}}}}
EOF
assert_eq "the tree's parent started" 201 \
  "$(curl -s -o "$T/tree-start.json" -w '%{http_code}' -H "Authorization: Bearer $ADMIN" -X POST "$URL/v1/workflows" -d @"$T/tree-input.json")"
wait_status tree-1 completed 180 || fail "tree-1: $(status tree-1) $(status tree-1.1) $(status tree-1.2) $(cat "$T/tree-start.json")"
TJ="$(curl -s -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows/tree-1")"
assert_eq "the tree: two sub-sessions, each one's own spend once (40 + 1100 + 2200 tokens, at \$100 per million)" \
  "3 3340 0.334 0" "$(jget tree.sessions <<<"$TJ") $(jget tree.tokens <<<"$TJ") $(jget tree.cost_usd <<<"$TJ") $(jget tree.running <<<"$TJ")"

# a workflow to fork in the browser: hello.lua waiting for its approval
engine start "$SRC/workflows/hello.lua" --id fk-src --input '{"name":"Ada","n":1}' --detach >/dev/null 2>&1 || true
wait_status fk-src waiting:signal || fail "fk-src did not wait: $(status fk-src)"

# an eval run (docs/evals.md): two cases of the shipped suite, offline, recorded for serve and followed
mkdir -p "$T/suite/cases"
cp -r "$SRC/evals/pr-review/"{suite.json,base.json,bundles,graders,recordings,scorers} "$T/suite/"
cp "$SRC/evals/pr-review/cases/"{off_by_one,correct_change}.json "$T/suite/cases/"
assert_exit "an eval run of two cases passes" 0 engine eval "$T/suite" --id ev-web

# ---- plain HTTP: the files, their headers, names that are not files
hdr() { curl -s -D - -o /dev/null "$@" | tr -d '\r'; }
H="$(hdr "$URL/")"
assert_contains "GET / is the page" "Content-Type: text/html; charset=utf-8" "$H"
assert_contains "a strict CSP" "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'" "$H"
assert_contains "nosniff" "X-Content-Type-Options: nosniff" "$H"
assert_contains "no referrer" "Referrer-Policy: no-referrer" "$H"
assert_contains "revalidated, not stored blindly" "Cache-Control: no-cache" "$H"
assert_eq "one Cache-Control only" 1 "$(grep -c '^Cache-Control:' <<<"$H")"
assert_contains "no token needed for the page" "HTTP/1.1 200" "$H"
for f in app.js:text/javascript style.css:text/css favicon.svg:image/svg+xml; do
  assert_contains "/web/${f%%:*} is ${f#*:}" "Content-Type: ${f#*:}" "$(hdr "$URL/web/${f%%:*}")"
done
ETAG="$(grep -i '^ETag:' <<<"$(hdr "$URL/web/app.js")" | cut -d' ' -f2)"
assert_eq "If-None-Match with the ETag: 304" 304 "$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $ETAG" "$URL/web/app.js")"
for bad in '..%2Fapi.c' '..%2F..%2Fengine%2Fapi.c' '.hidden.js' 'nothing.js' 'index.html%00.js' 'x.sh' '%2Fetc%2Fpasswd'; do
  code="$(curl -s -o "$T/body" -w '%{http_code}' "$URL/web/$bad")"
  [ "$code" == 404 ] || [ "$code" == 400 ] && ! grep -q '#include' "$T/body" && pass "/web/$bad refused ($code)" ||
    fail "/web/$bad: $code $(head -c 200 "$T/body")"
done
assert_eq "/web/../ normalised by no one: not a route" 404 "$(curl -s --path-as-is -o /dev/null -w '%{http_code}' "$URL/web/../engine/server/api.c")"
assert_eq "POST / is 405" 405 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/")"

# ---- whoami: the token's identity and scopes
assert_contains "whoami without a token: no identity (the page asks for a token, no failed request)" \
  '{"identity":null,"tokens":true,"scopes":[]}' "$(curl -s "$URL/v1/whoami")"
assert_eq "whoami with a token that is not valid: 401" 401 \
  "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer eng_nope' "$URL/v1/whoami")"
W="$(curl -s -H "Authorization: Bearer $VIEWER" "$URL/v1/whoami")"
assert_eq "whoami: the viewer's identity" "token:viewer" "$(jget identity <<<"$W")"
assert_contains "whoami: read only" '"scopes":["read"]' "$W"
W="$(curl -s -H "Authorization: Bearer $ADMIN" "$URL/v1/whoami")"
assert_contains "whoami: admin is every scope" '"scopes":["read","start","signal","approve","cancel","admin"]' "$W"

# ---- the browser: the driver starts the session itself, once the list is open
INPUT="$(cat <<EOF
{"objective": "Check the bucket <b>code</b> and say what is wrong", "context": {"files": []}, "skills": [],
 "permissions": {"tools": ["shell", "publish_review"], "requiresApproval": ["shell"], "writablePaths": ["/workspace/working", "/workspace/output"]},
 "limits": {"maxModelTurns": 4, "memoryMb": 256, "timeoutSeconds": 300},
 "model": {"name": "m", "provider": "openai", "baseUrl": "$MURL/v1"}}
EOF
)"
set +e
WEB_URL="$URL" WEB_MODEL="$MURL" WEB_TREE=tree-1 WEB_FORK_SRC=fk-src WEB_EVAL=ev-web WEB_ADMIN="$ADMIN" WEB_VIEWER="$VIEWER" WEB_INPUT="$INPUT" WEB_OUT="$OUTDIR" WEB_CHROME="$CHROME" \
  timeout "$(scaled 900)" node "$WEBT/web_test.js"
rc=$?
set -e
[ "$rc" -eq 0 ] && pass "the browser checks (tests/web/web_test.js)" || fail "the browser checks: exit $rc (serve log: $(tail -5 "$T/serve.err"))"
assert_exit "the audit export the page downloaded verifies" 0 \
  engine audit verify "$OUTDIR/downloads/web-1.audit.jsonl" --key "$(engine audit key | sed -n 1p)"

# ---- the fork made in the browser, as the API and the CLI tell it
FJ="$(curl -s -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows/fk-src")"
assert_eq "the source's forks: the one made in the browser, by its token" "fk-web token:alice completed" \
  "$(jget forks.1.id <<<"$FJ") $(jget forks.1.by <<<"$FJ") $(jget forks.1.status <<<"$FJ")"
assert_eq "at the source's event it was forked at" "$(curl -s -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows/fk-web" | jget forked_from.seq)" \
  "$(jget forks.1.seq <<<"$FJ")"
assert_eq "a workflow that was never forked has none" 0 \
  "$(curl -s -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows/tree-1" | lua5.4 -e 'io.write(#require"cjson".decode(io.read("a")).forks)')"
assert_contains "engine show lists the forks" "fk-web" "$(engine show fk-src | sed -n '/^forks: *1$/,$p')"

# ---- after the session: who approved, its artifacts, the list's numbers and filter
EV="$(curl -s -H "Authorization: Bearer $ADMIN" "$URL/v1/workflows/web-1/events")"
assert_contains "the approver is the browser's token" '"approver":"token:alice"' "$EV"
assert_contains "with the reason typed in the browser" '"reason":"typed in the browser"' "$EV"
ARTS="$(curl -s -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows/web-1/artifacts")"
SHA="$(lua5.4 -e 'local j=require"cjson".decode(io.read("a")); for _,a in ipairs(j.artifacts) do if a.path:match("note.txt$") then io.write(a.sha256) end end' <<<"$ARTS")"
[ ${#SHA} -eq 64 ] && pass "the artifact is listed with its hash" || fail "no note.txt artifact: $ARTS"
curl -s -D "$T/dl.h" -o "$T/dl" -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows/web-1/artifacts/$SHA"
assert_eq "the download is the file" "hello" "$(cat "$T/dl")"
assert_contains "as an attachment" 'Content-Disposition: attachment; filename="note.txt"' "$(tr -d '\r' <"$T/dl.h")"
assert_eq "a hash that is not 64 hex digits: 400" 400 \
  "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows/web-1/artifacts/..%2F..%2Fetc%2Fpasswd")"
assert_eq "a hash the session did not save: 404" 404 \
  "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows/web-1/artifacts/$(printf '%064d' 0)")"
cp "$T/artifacts/$SHA" "$T/keep" && printf 'tampered' >"$T/artifacts/$SHA"
assert_eq "a stored file that no longer has its hash: 404" 404 \
  "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows/web-1/artifacts/$SHA")"
cp "$T/keep" "$T/artifacts/$SHA"
L="$(curl -s -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows?q=BUCKET&fields=session")"
assert_contains "the list filters by text (objective, any case)" '"id":"web-1"' "$L"
assert_contains "with who started it" '"started_by":"token:alice"' "$L"
assert_contains "and its numbers" '"turns":2,"tool_calls":2,"tokens":180' "$L"
assert_contains "the review was published after its approval" "the bucket loses a token" "$(cat "$T/reviews/web-1.md" 2>&1)"
L="$(curl -s -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows?q=BUCKET")"
[[ "$L" == *'"id":"web-1"'* && "$L" != *started_by* ]] && pass "without fields=session, the items of list --json" ||
  fail "a plain page has the session's fields: $L"
assert_eq "an unknown fields value is 400" 400 "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows?fields=all")"
assert_eq "a text nothing has: an empty page" '[]' \
  "$(curl -s -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows?q=no-such-text-anywhere" | lua5.4 -e 'local j=require"cjson".decode(io.read("a")); io.write(#j.workflows == 0 and "[]" or "some")')"
# newest first, paged with the cursor: three more workflows, two per page
for i in 1 2 3; do
  curl -s -o /dev/null -H "Authorization: Bearer $ADMIN" -X POST "$URL/v1/workflows" -d "{\"script\":\"hello.lua\",\"id\":\"h-$i\",\"input\":{\"name\":\"n$i\"}}"
  sleep 0.01 # paced: distinct creation times
done
ids() { lua5.4 -e 'local j=require"cjson".decode(io.read("a")); local t={} for _,w in ipairs(j.workflows) do t[#t+1]=w.id end io.write(table.concat(t," "), "|", tostring(j.next_cursor ~= require"cjson".null and j.next_cursor or "")) '; }
P1="$(curl -s -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows?order=newest&limit=2" | ids)"
assert_eq "order=newest: the newest first" "h-3 h-2" "${P1%%|*}"
P2="$(curl -s -H "Authorization: Bearer $VIEWER" --get --data-urlencode "cursor=${P1#*|}" "$URL/v1/workflows?order=newest&limit=2" | ids)"
assert_eq "and its cursor reads on, older (the fork made in the browser came after web-1)" "h-1 fk-web" "${P2%%|*}"
assert_eq "the default order is still the oldest first" "nd tree-1" \
  "$(curl -s -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows?limit=2" | ids | cut -d'|' -f1)"
assert_eq "an unknown order is 400" 400 "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $VIEWER" "$URL/v1/workflows?order=sideways")"
echo "# screenshots: $OUTDIR"
finish
