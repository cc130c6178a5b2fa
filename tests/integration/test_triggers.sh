#!/usr/bin/env bash
# Webhook triggers: signed deliveries start workflows exactly once (dedup by
# delivery id and by workflow id, a redelivery storm), every bad delivery is
# refused with its status and recorded, a hostile trigger script starts
# nothing, the trigger set reloads on a change (a broken file keeps the old
# set), and a kill -9 in the middle of accepting never half-starts or starts
# twice. The deliveries: tests/integration/hooks_suite.py.
source "$(dirname "$0")/lib.sh"
HOOKS="$T/hooks"
cp -r "$SRC/tests/integration/hooks" "$HOOKS"
export TEST_GH_SECRET="It's a Secret to Everybody"
export TEST_STD_SECRET="whsec_$(printf 'the standard webhooks key for this test' | base64 -w0)"
export TEST_STRIPE_SECRET="whsec_stripe_style_secret"
export TEST_BEARER_TOKEN="ci-token-$RANDOM$RANDOM"
unset ENGINE_TRIGGERS_DIR

# --- engine trigger check / test, no server
out="$(engine trigger check "$HOOKS/triggers")"
assert_contains "check lists the routes" '"path":"/hooks/gh"' "$out"
assert_contains "and says whether each secret is set" '"secret_set":true' "$out"
printf 'return { verify = { kind = "github" }, map = 42 }\n' >"$T/bad.lua"
mkdir -p "$T/badset" && cp "$T/bad.lua" "$T/badset/x.lua"
assert_exit "a broken trigger file is refused" 2 engine trigger check "$T/badset"
assert_contains "naming the file and the problem" "x.lua: map must be a function" "$ERR"
printf 'return { verify = { kind = "github", secret = "hunter2 is my password" }, map = function() end }\n' >"$T/badset/x.lua"
assert_exit "a secret written into the script is refused" 2 engine trigger check "$T/badset"
assert_contains "it must name a credential" "must name a credential" "$ERR"
printf '{"key":"t1"}' >"$T/body.json"
sig="sha256=$(printf '{"key":"t1"}' | openssl dgst -sha256 -hmac "$TEST_GH_SECRET" -r | cut -d' ' -f1)"
printf 'X-GitHub-Event: push\r\nX-GitHub-Delivery: t-1\r\nX-Hub-Signature-256: %s\r\n' "$sig" >"$T/headers.txt"
out="$(engine trigger test gh --dir "$HOOKS/triggers" --body "$T/body.json" --headers "$T/headers.txt")"
assert_contains "test shows what would start" '"id":"gh:t1"' "$out"
assert_contains "and that it would start" '"outcome":"start"' "$out"
printf 'X-Hub-Signature-256: sha256=00\n' >"$T/badheaders.txt"
assert_exit "test with a bad signature exits 2" 2 engine trigger test gh --dir "$HOOKS/triggers" --body "$T/body.json" --headers "$T/badheaders.txt"
assert_contains "and says it was rejected" '"status":401' "$OUT"
assert_eq "test started nothing" "" "$(engine list 2>/dev/null | tail -n +2)"

# --- the shipped GitHub trigger, on real recorded payloads (tests/fixtures/github/SOURCES)
GHFIX="$SRC/tests/fixtures/github"
gh_headers() { # gh_headers EVENT FILE DELIVERY: signed with GITHUB_WEBHOOK_SECRET
  printf 'X-GitHub-Event: %s\nX-GitHub-Delivery: %s\nContent-Type: application/json\nX-Hub-Signature-256: sha256=%s\n' \
    "$1" "$3" "$(openssl dgst -sha256 -hmac "$GITHUB_WEBHOOK_SECRET" -r <"$2" | cut -d' ' -f1)" >"$T/gh.txt"
}
export GITHUB_WEBHOOK_SECRET="the shipped trigger's secret"
gh_headers pull_request "$GHFIX/pull_request.opened.payload.json" real-1
out="$(engine trigger test github --dir "$SRC/workflows/triggers" --body "$GHFIX/pull_request.opened.payload.json" --headers "$T/gh.txt")"
assert_contains "a real pull_request.opened starts a review of its head" '"id":"pr:Codertocat:Hello-World:2@ec26c3e57ca3"' "$out"
assert_contains "of pr_review.lua" '"workflow":"pr_review.lua"' "$out"
assert_contains "with the clone URL from the payload" '"clone_url":"https://github.com/Codertocat/Hello-World.git"' "$out"
gh_headers pull_request "$GHFIX/pull_request.synchronize.payload.json" real-2
assert_contains "synchronize starts one too" '"outcome":"start"' \
  "$(engine trigger test github --dir "$SRC/workflows/triggers" --body "$GHFIX/pull_request.synchronize.payload.json" --headers "$T/gh.txt")"
gh_headers pull_request "$GHFIX/pull_request.closed.payload.json" real-3
assert_contains "closed is ignored, saying why" '"detail":"pull_request closed starts nothing"' \
  "$(engine trigger test github --dir "$SRC/workflows/triggers" --body "$GHFIX/pull_request.closed.payload.json" --headers "$T/gh.txt")"
gh_headers ping "$GHFIX/ping.payload.json" real-4
assert_contains "ping is ignored" '"outcome":"ignored"' \
  "$(engine trigger test github --dir "$SRC/workflows/triggers" --body "$GHFIX/ping.payload.json" --headers "$T/gh.txt")"
GITHUB_WEBHOOK_SECRET=wrong assert_exit "signed with another secret: refused" 2 env GITHUB_WEBHOOK_SECRET=wrong "$ENGINE" trigger test github \
  --dir "$SRC/workflows/triggers" --body "$GHFIX/ping.payload.json" --headers "$T/gh.txt"

# --- the deliveries, over HTTP
export ENGINE_HTTP_MAX_HOOK_BODY_BYTES=65536
serve_api --workflows "$HOOKS"
python3 "$SRC/tests/integration/hooks_suite.py" "$URL" || fail "hooks_suite.py"
code="$(head -c 70000 /dev/zero | tr '\0' 'a' | curl -s -o "$T/big.out" -w '%{http_code}' -X POST --data-binary @- "$URL/hooks/gh")"
assert_eq "a body over the hook limit is 413" "413" "$code"
wait_status gh:k1 completed
assert_contains "the started workflow got the trigger's input and identity" '"identity":"trigger:gh"' "$(engine show gh:k1 --json)"
assert_eq "the storm started one workflow" "1" "$(engine list | awk '$1 == "gh:storm"' | wc -l)"
for id in gh:k1 std:msg_1 std:msg_2 stripe:evt_1; do wait_status "$id" completed 30 || fail "$id did not complete"; done
started="$(engine list | tail -n +2 | wc -l)"
assert_eq "exactly the accepted deliveries started workflows (gh:k1, storm, std x2, stripe, ci)" "6" "$started"
dl="$(engine trigger deliveries gh --limit 1000 --json)"
n_started="$(printf '%s' "$dl" | lua5.4 -e 'local n=0 for _,d in ipairs(require"cjson".decode(io.read("a"))) do if d.outcome=="started" then n=n+1 end end print(n)')"
assert_eq "deliveries records the two gh starts" "2" "$n_started"
assert_contains "and the rejected ones with their reason" '"outcome":"rejected","status":401' "$dl"
assert_contains "deliveries prints a table" "duplicate" "$(engine trigger deliveries gh)"
assert_contains "requests to no trigger are kept under *" '"trigger":"*"' "$(engine trigger deliveries '*' --json)"
if engine history gh:k1 --json | has_line "$TEST_GH_SECRET"; then fail "the secret reached the history"; else pass "no secret in the history"; fi
if sqlite3 "$ENGINE_DB" .dump | has_line -F "$TEST_GH_SECRET"; then fail "the secret is in the database"; else pass "no secret in the database"; fi

# --- hot reload: a broken edit keeps the set in force, a good one replaces it
printf 'return {' >"$HOOKS/triggers/zz_broken.lua"
wait_true 30 'grep -q "triggers rejected" "$T/serve.log"' || true
assert_contains "a broken edit is refused and said" "triggers rejected, the previous set stays in force" "$(cat "$T/serve.log")"
b='{"key":"after-broken"}'
code="$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/hooks/gh" -H "X-GitHub-Delivery: ab-1" \
  -H "X-Hub-Signature-256: sha256=$(printf '%s' "$b" | openssl dgst -sha256 -hmac "$TEST_GH_SECRET" -r | cut -d' ' -f1)" --data-binary "$b")"
assert_eq "the previous set still answers" "202" "$code"
rm "$HOOKS/triggers/zz_broken.lua"
sed 's/"gh:" .. req.json.key/"gh2:" .. req.json.key/' "$HOOKS/triggers/gh.lua" >"$HOOKS/triggers/gh.lua.new" && mv "$HOOKS/triggers/gh.lua.new" "$HOOKS/triggers/gh.lua"
wait_true 30 'grep -q "triggers reloaded" "$T/serve.log"' || true
b='{"key":"after-fix"}'
out="$(curl -s -X POST "$URL/hooks/gh" -H "X-GitHub-Delivery: af-1" \
  -H "X-Hub-Signature-256: sha256=$(printf '%s' "$b" | openssl dgst -sha256 -hmac "$TEST_GH_SECRET" -r | cut -d' ' -f1)" --data-binary "$b")"
assert_contains "the fixed set is in force" '"workflow_id":"gh2:after-fix"' "$out"
kill "$S"; wait "$S" 2>/dev/null || true

# --- kill -9 while deliveries are being accepted: each is either recorded and
# started, or was never acknowledged and its redelivery starts it; never twice
: >"$T/acked"
serve_api --workflows "$HOOKS"
deliver() { # deliver KEY: prints the HTTP status (000 when the connection died)
  local b="{\"key\":\"crash-$1\"}"
  curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X POST "$URL/hooks/gh" -H "X-GitHub-Delivery: crash-d-$1" \
    -H "X-Hub-Signature-256: sha256=$(printf '%s' "$b" | openssl dgst -sha256 -hmac "$TEST_GH_SECRET" -r | cut -d' ' -f1)" \
    --data-binary "$b" || true
}
for round in 1 2 3; do
  for k in $(seq $((round * 100)) $((round * 100 + 29))); do
    (c="$(deliver "$k")"; [ "$c" == 202 ] && echo "$k" >>"$T/acked") &
  done
  sleep "0.$((RANDOM % 4 + 1))$((RANDOM % 10))"
  kill -9 "$S"; wait "$S" 2>/dev/null || true
  wait
  serve_api --workflows "$HOOKS"
  for k in $(seq $((round * 100)) $((round * 100 + 29))); do
    c="$(deliver "$k")"
    if grep -qx "$k" "$T/acked"; then
      [ "$c" == 200 ] || fail "round $round: $k was acknowledged, and its redelivery answered $c, not 200 (duplicate)"
    else
      [ "$c" == 202 ] || [ "$c" == 200 ] || fail "round $round: the redelivery of unacknowledged $k answered $c"
    fi
  done
done
n_acked="$(sort -u "$T/acked" | wc -l)"
n_wf="$(engine list | awk '$1 ~ /^gh2:crash-/' | wc -l)"
assert_eq "after three kill -9s every delivery started exactly one workflow" "90" "$n_wf"
echo "# acknowledged before a kill: $n_acked of 90"
n_started="$(engine trigger deliveries gh --limit 10000 --json | lua5.4 -e 'local n=0 for _,d in ipairs(require"cjson".decode(io.read("a"))) do if d.outcome=="started" and type(d.delivery)=="string" and d.delivery:match("^crash%-d%-") then n=n+1 end end print(n)')"
assert_eq "and each has one started delivery on record" "90" "$n_started"
kill "$S"; wait "$S" 2>/dev/null || true
finish
