#!/usr/bin/env bash
# Grants (docs/grants.md) end to end, over loopback HTTP, with the real
# Docker sandbox, a replayed model and the GitHub stub (github_stub.py; its
# token is a canary planted as the GITHUB_TOKEN credential):
#   - a review started with github:repo/.../pr.review.draft only drafts and,
#     approved, is still not posted (grant.denied names the publish grant);
#     with the publish grant it is posted
#   - a session's http_fetch never carries the GitHub token, and the token is
#     nowhere in the history, the events or the workspace
#   - hostile: a model asking for a host it has no grant for, an expired
#     grant, a grant used up (counted from the history: across a kill -9),
#     an API start asking for more than its token holds (and claiming
#     starterGrants), a trigger's map asking for more than its file allows
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
CANARY="ghp_canary$RANDOM${RANDOM}grantsvalue$RANDOM"
GH="$T/gh"
mkdir -p "$GH/git/Codertocat" "$T/creds" "$T/rec"
MSECRET="mcp-canary-$RANDOM${RANDOM}value"
printf '{"GITHUB_TOKEN": "%s", "MCP_SECRET_CRED": "%s"}' "$CANARY" "$MSECRET" >"$T/creds/credentials.json"
export ENGINE_CREDENTIALS_FILE="$T/creds/credentials.json"
PY="$(command -v python3)"
export ENGINE_MCP_ALLOW="$PY"
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_ARTIFACTS="$T/artifacts" ENGINE_PR_CHECKOUTS="$T/checkouts"
export ENGINE_REVIEWS_DIR="$T/reviews"
unset GITHUB_TOKEN GH_TOKEN ENGINE_GITHUB_API_URL ENGINE_PUBLISH_TOKEN ENGINE_PUBLISH_URL

# --- a public repository and its pull request, served by the stub
W="$T/work"
g() { git -C "$W" -c user.name=t -c user.email=t@t.invalid "$@"; }
mkdir -p "$W" && git init -q -b main "$W"
printf 'a = 1\n' >"$W/a.py"
g add -A && g commit -qm base
BASE="$(g rev-parse HEAD)"
printf 'a = 1\nb = 2\n' >"$W/a.py"
g add -A && g commit -qm "add b"
HEAD="$(g rev-parse HEAD)"
git clone -q --bare "$W" "$GH/git/Codertocat/Hello-World.git"
git -C "$GH/git/Codertocat/Hello-World.git" config uploadpack.allowAnySHA1InWant true
python3 "$SRC/tests/integration/github_stub.py" "$GH" "$CANARY" 2>"$T/stub.log" &
PIDS+=("$!")
wait_true 30 '[ -s "$GH/port" ]' || true
GPORT="$(cat "$GH/port")"
API="http://127.0.0.1:$GPORT"
python3 - "$SRC/tests/fixtures/github/pull_request.opened.payload.json" "$GH" "$W" "$BASE" "$HEAD" "$API" <<'PY'
import json, subprocess, sys
src, gh, work, base, head, api = sys.argv[1:]
pr = json.load(open(src))["pull_request"]
pr["head"]["sha"], pr["base"]["sha"] = head, base
pr["head"]["repo"]["clone_url"] = api + "/git/Codertocat/Hello-World.git"
json.dump(pr, open(gh + "/pr.json", "w"))
diff = subprocess.run(["git", "-C", work, "diff", base, head, "--", "a.py"], capture_output=True, text=True).stdout
patch = diff[diff.index("@@"):].rstrip("\n")
json.dump([{"sha": "0" * 40, "filename": "a.py", "status": "modified", "additions": 1, "deletions": 0,
            "changes": 1, "patch": patch}], open(gh + "/files.json", "w"))
PY
posts() { [ -f "$GH/posted.jsonl" ] && wc -l <"$GH/posted.jsonl" | tr -d ' ' || echo 0; }
events() { engine events "$1" --json; }
wait_event() { # wait_event ID TYPE [N]: until ID has N (default 1) events of TYPE
  wait_true 120 '[ "$(events "$1" | grep -c "\"type\":\"$2\"")" -ge "${3:-1}" ]' '' "$@" ||
    fail "$1 has no $2 event (status $(status "$1")): $(engine events "$1" 2>&1 | tail -4)"
}

# --- the review's model: one answer, one finding on the added line
python3 - "$T/rec/review.jsonl" <<'PY'
import json, sys
ans = {"summary": "b is new.", "result": {"findings": [{"path": "a.py", "line": 2, "severity": "minor", "body": "Name b better."}]}}
with open(sys.argv[1], "w") as f:
    f.write(json.dumps({"turn": {"text": json.dumps(ans), "usage": {"input_tokens": 10, "output_tokens": 5}}}) + "\n")
PY
review_input() { # review_input GRANT...: a review of the PR asking for these grants
  python3 - "$API" "$HEAD" "$T/rec/review.jsonl" "$@" <<'PY'
import json, sys
api, head, rec, *grants = sys.argv[1:]
print(json.dumps({"pr": {"owner": "Codertocat", "name": "Hello-World", "number": 2, "head_sha": head,
                         "clone_url": api + "/git/Codertocat/Hello-World.git", "private": False},
                  "github_api": api, "model": {"name": "replay:" + rec},
                  "limits": {"timeoutSeconds": 300, "maxModelTurns": 4, "maxToolCalls": 4},
                  "supersede": False, "grants": grants}))
PY
}
serve_bg

# --- draft only: drafted, approved, never posted
DRAFT="github:repo/codertocat/hello-world:pr.review.draft"
PUBLISH="github:repo/codertocat/hello-world:pr.review.publish"
review_input "$DRAFT" >"$T/draft.json"
assert_exit "a review with the draft grant only starts" 3 engine start "$SRC/workflows/pr_review.lua" --id r-draft \
  --input @"$T/draft.json" --detach
wait_event r-draft approval.requested
assert_contains "it read the pull request with its draft grant" "\"grant\":\"$DRAFT\"" "$(events r-draft | grep grant.used)"
assert_exit "a person approves publishing" 0 approve_pending r-draft --reason "ship it"
wait_status r-draft completed 120 || fail "r-draft: $(status r-draft)"
denied="$(events r-draft | grep '"type":"grant.denied"' || true)"
assert_contains "publishing is denied: a grant.denied event" '"tool":"github.publish"' "$denied"
assert_contains "naming the missing grant" "missing grant $PUBLISH" "$denied"
assert_contains "the review is discarded, saying why" "grant: missing grant $PUBLISH" "$(events r-draft | grep review.discarded)"
assert_eq "nothing was posted" 0 "$(posts)"
assert_contains "the result says it was not published" '"published":false' "$(engine show r-draft --json)"
out="$(engine grants r-draft)"
assert_contains "engine grants prints the session's grants" "$DRAFT" "$out"
assert_contains "and the denial" "denied  github.publish: missing grant $PUBLISH" "$out"
assert_contains "and each use" "used    github.fetch_pr: $DRAFT by grant $DRAFT (use 1)" "$out"
assert_contains "--json too" "\"grants\":[\"$DRAFT\"]" "$(engine grants r-draft --json)"

# --- with the publish grant: posted once
review_input "$DRAFT" "github:repo/codertocat/*:pr.review.publish" >"$T/pub.json"
assert_exit "a review with the publish grant starts" 3 engine start "$SRC/workflows/pr_review.lua" --id r-pub \
  --input @"$T/pub.json" --detach
wait_event r-pub approval.requested
assert_exit "approved" 0 approve_pending r-pub
wait_status r-pub completed 120 || fail "r-pub: $(status r-pub)"
assert_eq "the review was posted" 1 "$(posts)"
assert_contains "with the publish grant" "\"grant\":\"github:repo/codertocat/*:pr.review.publish\"" \
  "$(events r-pub | grep grant.used)"
assert_contains "the stub saw the token on the POST" "POST /repos/Codertocat/Hello-World/pulls/2/reviews token=yes" \
  "$(cat "$GH/requests.log")"

# --- an agent session: http_fetch with grants, hostile calls, a use counted
# across a kill -9 (the model's calls: evil.test, which it has no grant for;
# localhost, whose grant expired; 127.0.0.1 twice, granted once; then
# publish_review, asked of a person while the engine is killed; then
# 127.0.0.1 again, after the restart: still used up)
python3 - "$T/rec/agent.jsonl" "$GPORT" <<'PY'
import json, sys
path, port = sys.argv[1], sys.argv[2]
def fetch(i, url): return {"id": "f%d" % i, "name": "http_fetch", "arguments": {"url": url}}
turns = [
    {"text": "Fetching.", "tool_calls": [fetch(1, "http://evil.test/x"), fetch(2, "http://localhost:%s/old" % port),
                                         fetch(3, "http://127.0.0.1:%s/repos/Codertocat/Hello-World/pulls/2" % port),
                                         fetch(4, "http://127.0.0.1:%s/second" % port)]},
    {"text": "Publishing.", "tool_calls": [{"id": "p1", "name": "publish_review", "arguments":
        {"summary": "ok", "findings": [], "verdict": "comment"}}]},
    {"text": "Once more.", "tool_calls": [fetch(5, "http://127.0.0.1:%s/third" % port)]},
    {"text": json.dumps({"summary": "done", "result": {}})},
]
with open(path, "w") as f:
    for t in turns:
        t["usage"] = {"input_tokens": 10, "output_tokens": 5}
        f.write(json.dumps({"turn": t}) + "\n")
PY
cat >"$T/agent.json" <<EOF2
{"objective": "Fetch and publish.", "model": {"name": "replay:$T/rec/agent.jsonl"},
 "permissions": {"tools": ["http_fetch", "publish_review"], "networkAllowlist": ["evil.test", "localhost", "127.0.0.1"]},
 "limits": {"timeoutSeconds": 300, "maxModelTurns": 6, "maxToolCalls": 10},
 "grants": ["http:127.0.0.1:GET;uses=1", "http:localhost:GET;until=2020-01-01T00:00:00Z", "review:publish"]}
EOF2
assert_exit "an agent session with grants starts" 3 engine start "$SRC/workflows/agent_session.lua" --id s1 \
  --input @"$T/agent.json" --detach
wait_event s1 approval.requested
ev="$(events s1)"
assert_contains "session.created records its grants" '"grants":["http:127.0.0.1:GET;uses=1"' "$(grep session.created <<<"$ev")"
assert_contains "a host without a grant is denied, named" "missing grant http:evil.test:GET" "$(grep '"id":"f1"' <<<"$ev" | grep grant.denied)"
assert_contains "an expired grant is denied" "expired at 2020-01-01T00:00:00Z" "$(grep '"id":"f2"' <<<"$ev" | grep grant.denied)"
assert_contains "a granted host is fetched" '"grant":"http:127.0.0.1:GET;uses=1"' "$(grep '"id":"f3"' <<<"$ev" | grep grant.used)"
assert_contains "its second use is denied" "used up (1 of 1 uses)" "$(grep '"id":"f4"' <<<"$ev" | grep grant.denied)"
assert_contains "the model hears why" "denied: grant: missing grant http:evil.test:GET" "$(grep '"id":"f1"' <<<"$ev" | grep tool.result)"
assert_eq "the policies were asked for the granted call only (publish: approval)" 1 "$(grep -c approval.requested <<<"$ev")"
assert_contains "http_fetch's request carried no token" "GET /repos/Codertocat/Hello-World/pulls/2 token=no" "$(cat "$GH/requests.log")"
# the engine dies while the session waits for the approval; the use count
# comes back from the history
kill -9 "$S"; wait "$S" 2>/dev/null || true
serve_bg
assert_exit "publishing approved after the restart" 0 approve_pending s1
wait_status s1 completed 120 || fail "s1: $(status s1) $(engine events s1 2>&1 | tail -3)"
ev="$(events s1)"
assert_contains "publish_review ran with its grant" '"grant":"review:publish"' "$(grep '"id":"p1"' <<<"$ev" | grep grant.used)"
assert_contains "after the kill -9 the used-up grant stays used up" "used up (1 of 1 uses)" "$(grep '"id":"f5"' <<<"$ev" | grep grant.denied)"
assert_exit "the session replays against its history" 0 engine replay s1
assert_exit "the reviews replay too" 0 engine replay r-draft

# --- the canary: nowhere but in the stub's log of what it was sent
for id in r-draft r-pub s1; do
  assert_eq "$id: the token is not in the history" "" "$(engine history "$id" --json | grep -o "$CANARY" || true)"
  assert_eq "$id: nor in the events" "" "$(events "$id" | grep -o "$CANARY" || true)"
done
assert_eq "nor in any workspace, checkout, artifact or review" "" \
  "$(grep -rl "$CANARY" "$T" --exclude-dir=creds --exclude=requests.log --exclude=stub.log 2>/dev/null | grep -v "$T/creds" || true)"

# --- MCP: a tool without its grant never runs, so its server's credential
# never reaches it
python3 - "$T/rec/mcp.jsonl" <<'PY'
import json, sys
turns = [{"text": "Calling.", "tool_calls": [{"id": "m1", "name": "mcp__srv__echo", "arguments": {"text": "hi"}},
                                             {"id": "m2", "name": "mcp__srv__secret", "arguments": {}}]},
         {"text": json.dumps({"summary": "done", "result": {}})}]
with open(sys.argv[1], "w") as f:
    for t in turns:
        t["usage"] = {"input_tokens": 10, "output_tokens": 5}
        f.write(json.dumps({"turn": t}) + "\n")
PY
cat >"$T/mcp.json" <<EOF2
{"objective": "Use MCP.", "model": {"name": "replay:$T/rec/mcp.jsonl"},
 "mcpServers": {"srv": {"command": "$PY", "args": ["$SRC/tests/mcp_server/server.py", "--stdio", "--log", "$T/mcp.log"],
                        "env_from_credentials": {"MCP_TEST_SECRET": "MCP_SECRET_CRED"}}},
 "permissions": {"tools": ["mcp__srv__echo", "mcp__srv__secret"]},
 "limits": {"timeoutSeconds": 300, "maxModelTurns": 4, "maxToolCalls": 4},
 "grants": ["mcp:srv:echo"]}
EOF2
assert_exit "a session with an MCP grant for one tool" 3 engine start "$SRC/workflows/agent_session.lua" --id m1 \
  --input @"$T/mcp.json" --detach
wait_status m1 completed 120 || fail "m1: $(status m1) $(engine events m1 2>&1 | tail -3)"
ev="$(events m1)"
assert_contains "the granted tool ran" '"grant":"mcp:srv:echo"' "$(grep '"id":"m1"' <<<"$ev" | grep grant.used)"
assert_contains "the other is denied, its grant named" "missing grant mcp:srv:secret" "$(grep '"id":"m2"' <<<"$ev" | grep grant.denied)"
assert_eq "the server was called once (echo), never for its secret" 1 "$(grep -c 'tools/call' "$T/mcp.log")"
assert_eq "the MCP credential is not in the history" "" "$(engine history m1 --json | grep -o "$MSECRET" || true)"

# --- a fork holds its source's grants: its input patch cannot change them
assert_exit "a fork asking for other grants is refused" 2 engine fork s1 --at 2 --id s1-fork \
  --input-patch '{"grants":["github:repo/acme/api:pr.review.publish"]}'
assert_contains "saying why" "cannot change grants or starterGrants" "$ERR"
assert_exit "so is one claiming its starter's" 2 engine fork s1 --at 2 --id s1-fork --input-patch '{"starterGrants":"*"}'

# --- starts over HTTP: a token's grants bound what a session may ask for
kill "$S" 2>/dev/null; wait "$S" 2>/dev/null || true
assert_exit "a token with a bad grant is refused" 2 engine token create bad --scopes start --grant 'http:a.test:*'
assert_contains "naming the problem" "'*' in its action" "$ERR"
TOK="$(engine token create ci --scopes start,read --grant 'http:127.0.0.1:GET' --grant 'github:repo/acme/*:pr.review.draft')"
assert_contains "token list shows its grants" 'http:127.0.0.1:GET' "$(engine token list)"
cat >"$T/probe.lua" <<'EOF2'
-- what a start's input holds, as the sessions read it (lua/grants.lua)
local grants = require "grants"
return function(input)
  local g, problems = grants.of_input(input)
  return { starter = input.starterGrants, effective = g and g.effective, dropped = g and g.dropped,
    problems = problems }
end
EOF2
mkdir -p "$T/wf/triggers"
cp "$T/probe.lua" "$T/wf/probe.lua"
cat >"$T/wf/triggers/deploys.lua" <<'EOF2'
return {
  verify = { kind = "bearer", secret = "DEPLOYS_SECRET" },
  grants = { "http:127.0.0.1:GET" },
  map = function(req)
    -- a trigger script that adds grants from the delivery: cut to the file's
    return { workflow = "probe.lua", id = "hook-1", input = { grants = { "http:127.0.0.1:GET", "review:publish" },
      starterGrants = "*" } }
  end,
}
EOF2
export DEPLOYS_SECRET="deploys-secret-$RANDOM"
serve_api --workflows "$T/wf"
H="Authorization: Bearer $TOK"
curl -s -H "$H" -X POST "$URL/v1/workflows" -d '{"script":"probe.lua","id":"api-1","input":{"grants":["http:127.0.0.1:GET","github:repo/acme/api:pr.review.draft","github:repo/*/api:pr.review.draft","review:publish"],"starterGrants":"*"}}' >/dev/null
wait_status api-1 completed 60 || fail "api-1: $(status api-1)"
res="$(engine show api-1 --json | jget result)"
assert_contains "the engine sets the starter's grants (the token's), whatever the input claims" \
  '"starter":["http:127.0.0.1:GET","github:repo/acme/*:pr.review.draft"]' "$res"
assert_contains "what the token holds is kept" '"effective":["http:127.0.0.1:GET","github:repo/acme/api:pr.review.draft"]' "$res"
assert_contains "a wider resource is not held" '"grant":"github:repo/*/api:pr.review.draft"' "$res"
assert_contains "nor another grant" '"grant":"review:publish"' "$res"
code="$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/hooks/deploys" -H "Authorization: Bearer $DEPLOYS_SECRET" \
  -H 'Idempotency-Key: d1' -H 'Content-Type: application/json' -d '{"a":1}')"
assert_eq "the trigger's delivery is accepted" 202 "$code"
wait_status hook-1 completed 60 || fail "hook-1: $(status hook-1)"
res="$(engine show hook-1 --json | jget result)"
assert_contains "a trigger's start holds at most its file's grants" '"effective":["http:127.0.0.1:GET"]' "$res"
assert_contains "what its map added is not held" '"grant":"review:publish"' "$res"
assert_contains "trigger check shows the grants" 'http:127.0.0.1:GET' "$(engine trigger check "$T/wf/triggers" 2>&1)"
finish
