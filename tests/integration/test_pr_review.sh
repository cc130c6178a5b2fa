#!/usr/bin/env bash
# The GitHub pull-request review end to end (workflows/pr_review.lua) against a
# stand-in for the GitHub API on loopback (github_stub.py: the PR's metadata
# and files, a private git repository over git http-backend, the reviews),
# with the real Docker sandbox and a replayed model. GitHub's own
# pull_request.opened example payload (tests/fixtures/github/SOURCES), signed,
# is delivered over HTTP to the shipped trigger (workflows/triggers/github.lua),
# which starts the review (later ones are started directly). Checks: the review
# posted once, in GitHub's documented request shape; findings outside the
# diff dropped into the summary; the token nowhere in the sandbox, the log or
# the events; a kill -9 after the POST and before its record posts no second
# review.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
source "$(dirname "$0")/pr_stub.sh"
ID="$(jget id <<<"$start_json")"
assert_eq "the trigger's workflow id names the repository, PR and head" "pr:Codertocat:Hello-World:2@${HEAD:0:12}" "$ID"

# --- the model: looks at the checkout, then answers with five findings, of
# which two name a changed line (src/bucket.py:7 added, tests/test_bucket.py:1
# added) and three do not (a line outside the hunks, a file the PR does not
# change, no line)
mkdir -p "$T/rec"
python3 - "$T/rec/review.jsonl" <<'PY'
import json, sys
findings = [
    {"path": "src/bucket.py", "line": 7, "severity": "major", "body": "Off by one: `>` lets the bucket hold capacity + 1 items; use `>=`."},
    {"path": "tests/test_bucket.py", "line": 1, "severity": "nit", "body": "Import from the package, not from src. \u001b[31mAlso: ghp_abcdefghijklmnopqrstuvwxyz0123 is a key."},
    {"path": "src/bucket.py", "line": 1, "severity": "minor", "body": "OUTSIDE-HUNK: the class has no docstring."},
    {"path": "README.md", "line": 1, "severity": "minor", "body": "UNCHANGED-FILE: the README says nothing about capacity."},
    {"path": "src/bucket.py", "severity": "minor", "body": "NO-LINE: drain() is not tested."},
]
turns = [
    {"turn": {"text": "Looking at the checkout.", "tool_calls": [{"id": "c1", "name": "list_files", "arguments": {"path": "/workspace/input/repo"}}]}},
    {"after": {"role": "tool", "name": "list_files"}, "turn": {"text": "Reading.", "tool_calls": [{"id": "c2", "name": "read_file", "arguments": {"path": "/workspace/input/repo/src/bucket.py"}}]}},
    {"after": {"role": "tool", "name": "read_file"}, "turn": {"text": "Reading the task.", "tool_calls": [{"id": "c3", "name": "read_file", "arguments": {"path": "/workspace/task.md"}}]}},
    {"after": {"role": "tool", "name": "read_file"}, "turn": {"text": json.dumps({"summary": "The cap is off by one.", "result": {"findings": findings}})}},
]
with open(sys.argv[1], "w") as f:
    for t in turns:
        t["turn"].setdefault("usage", {"input_tokens": 100, "output_tokens": 20})
        f.write(json.dumps(t) + "\n")
PY
# the start: the trigger's input, pointed at the stub and the recording
input_for() {
  lua5.4 -e '
    local json = require "cjson"
    local s = json.decode(io.read("a"))
    s.input.github_api = os.getenv("API")
    s.input.model = { name = "replay:" .. os.getenv("REC") }
    s.input.limits = { timeoutSeconds = 600, maxModelTurns = 8, maxToolCalls = 10 }
    io.write(json.encode(s.input))' <<<"$start_json"
}
API="$API" REC="$T/rec/review.jsonl" input_for >"$T/input.json"
posts() { [ -f "$GH/posted.jsonl" ] && wc -l <"$GH/posted.jsonl" | tr -d ' ' || echo 0; }
pending() { engine events "$1" --json | grep -c '"type":"approval.requested"' || true; }
wait_approval() {
  wait_true 90 '[ "$(pending "$1")" -ge 1 ]' '' "$@" && return 0
  fail "$1 never asked for approval (status $(status "$1")): $(engine events "$1" 2>&1 | tail -5)"; return 1
}

# a page of one file: the second file comes only by following the Link header
echo 1 >"$GH/page_size"
# the first review comes the way GitHub starts one: the payload signed and
# delivered to the shipped trigger over HTTP (the model from the server's
# ENGINE_PR_REVIEW_MODEL, the API from ENGINE_GITHUB_API_URL: a delivery
# names neither)
export GITHUB_WEBHOOK_SECRET="webhook secret $RANDOM" ENGINE_GITHUB_API_URL="$API"
export ENGINE_PR_REVIEW_MODEL="{\"name\":\"replay:$T/rec/review.jsonl\"}"
serve_api --workflows "$SRC/workflows"
deliver_pr() { # deliver_pr DELIVERY: prints the status, then the answer
  curl -s -w '\n%{http_code}' -X POST "$URL/hooks/github" -H 'Content-Type: application/json' \
    -H 'X-GitHub-Event: pull_request' -H "X-GitHub-Delivery: $1" \
    -H "X-Hub-Signature-256: sha256=$(openssl dgst -sha256 -hmac "$GITHUB_WEBHOOK_SECRET" -r <"$T/payload.json" | cut -d' ' -f1)" \
    --data-binary @"$T/payload.json"
}
out="$(deliver_pr delivery-1)"
assert_eq "the signed pull_request.opened delivery is accepted" 202 "$(tail -n 1 <<<"$out")"
assert_contains "and starts the review of its head" "\"workflow_id\":\"$ID\"" "$out"
assert_eq "GitHub's redelivery starts nothing" 200 "$(deliver_pr delivery-1 | tail -n 1)"
assert_contains "another delivery of the same head starts nothing either" '"outcome":"existing"' "$(deliver_pr delivery-2)"
assert_contains "the review knows who started it" '"identity":"trigger:github"' "$(engine show "$ID" --json)"
wait_approval "$ID"
ev="$(engine events "$ID" --json)"
draft="$(grep '"type":"review.draft"' <<<"$ev" || true)"
assert_contains "a review.draft event" '"type":"review.draft"' "$draft"
assert_contains "the draft requests changes (a major finding)" '"event":"REQUEST_CHANGES"' "$draft"
assert_contains "two comments kept" '"comments":2' "$draft"
assert_contains "three findings dropped" '"dropped":3' "$draft"
assert_contains "the draft is an artifact" '"path":"review-draft.json"' "$(grep artifact.saved <<<"$ev")"
assert_contains "the sandbox saw the checkout" "def drain" "$(grep '"tool.result"' <<<"$ev")"
assert_contains "the whole tree" "/workspace/input/repo/tests/test_bucket.py" "$(grep '"tool":"list_files"' <<<"$ev" | grep tool.result)"
assert_eq "without .git" "" "$(grep '"tool":"list_files"' <<<"$ev" | grep tool.result | grep -o '\.git' || true)"
assert_contains "task.md has the PR's title" "Update the README with new information" "$(grep '"tool.result"' <<<"$ev")"
assert_contains "task.md has its description" "pretty simple change" "$(grep '"tool.result"' <<<"$ev")"
assert_contains "task.md lists the changed files" "tests/test_bucket.py (added" "$(grep '"tool.result"' <<<"$ev")"
assert_eq "nothing posted before the approval" 0 "$(posts)"
assert_contains "the files' second page was fetched" "files?per_page=100&page=2 token=yes" "$(cat "$GH/requests.log")"
assert_contains "git fetched with the token (private repository)" "git-upload-pack token=yes" "$(cat "$GH/requests.log")"

# --- approve, while the stub holds its answer to the POST: kill -9 then,
# after GitHub has the review and before the engine recorded it
touch "$GH/hold"
assert_exit "engine approve" 0 approve_pending "$ID" --reason "ship it"
wait_true 30 '[ "$(posts)" -ge 1 ]' || true
assert_eq "the review was posted" 1 "$(posts)"
kill -9 "$S"; wait "$S" 2>/dev/null || true
rm -f "$GH/hold"
assert_eq "the engine had not recorded it" "" "$(engine events "$ID" --json | grep '"type":"review.published"' || true)"
bg S engine serve 2>>"$T/serve.log"
wait_status "$ID" completed 120 || fail "not completed after the restart: $(engine events "$ID" 2>&1 | tail -3)"
assert_eq "still one review after the retry" 1 "$(posts)"
assert_contains "the retry found the first review" '"already":true' \
  "$(engine events "$ID" --json | grep '"type":"review.published"')"
assert_eq "the result names it" "1001" "$(engine show "$ID" --json | jget result.review_id)"

# --- the review's signed audit export (docs/audit.md) verifies; one byte changed does not
engine audit export "$ID" >"$T/review.audit.jsonl" || fail "engine audit export $ID"
PUB="$(engine audit key | sed -n 1p)"
assert_exit "the review's audit export verifies" 0 engine audit verify "$T/review.audit.jsonl" --key "$PUB"
for kind in decision approval artifact; do
  [ "$(grep -c "\"kind\":\"$kind\"" "$T/review.audit.jsonl")" -ge 1 ] && pass "it holds the review's ${kind}s" ||
    fail "no $kind line in the export"
done
assert_contains "the approval with who approved it and why" '"reason":"ship it"' \
  "$(grep '"kind":"approval"' "$T/review.audit.jsonl")"
assert_contains "the policy decision with its policy set's hash" '"hash":"' "$(grep '"kind":"decision"' "$T/review.audit.jsonl" | sed -n 1p)"
# the first digit of the first "seq" of the first decision line, one more (mod 10)
mid="$(grep -n '"kind":"decision"' "$T/review.audit.jsonl" | sed -n 1p | cut -d: -f1)"
sed "${mid}s/\"seq\":\([0-9]\)/\"seq\":X\1/" "$T/review.audit.jsonl" | sed "${mid}s/X0/1/;${mid}s/X1/2/;${mid}s/X2/3/;${mid}s/X3/4/;${mid}s/X4/5/;${mid}s/X5/6/;${mid}s/X6/7/;${mid}s/X7/8/;${mid}s/X8/9/;${mid}s/X9/0/" >"$T/changed.jsonl"
assert_eq "one byte changed" 1 "$(cmp -l "$T/review.audit.jsonl" "$T/changed.jsonl" | wc -l)"
assert_exit "the changed export does not verify" 1 engine audit verify "$T/changed.jsonl" --key "$PUB"
assert_contains "naming the line" "line $((mid + 1)): its \"prev\" is not the hash of the line before: line $mid was changed" "$ERR"

# --- the review's request body, as GitHub documents it
python3 - "$GH/posted.jsonl" "$HEAD" "$ID" <<'PY' && pass "the review's JSON matches GitHub's request shape" || fail "the review's JSON shape"
import json, sys
path, head, wfid = sys.argv[1:]
r = json.loads(open(path).readline())["request"]
assert set(r) == {"commit_id", "body", "event", "comments"}, sorted(r)
assert r["commit_id"] == head, r["commit_id"]
assert r["event"] in ("COMMENT", "REQUEST_CHANGES") and r["event"] == "REQUEST_CHANGES", r["event"]
assert isinstance(r["body"], str) and ("<!-- engine:review:%s -->" % wfid) in r["body"], r["body"]
assert "The cap is off by one." in r["body"]
for marker in ("OUTSIDE-HUNK", "UNCHANGED-FILE", "NO-LINE"):
    assert marker in r["body"], marker  # dropped findings move to the summary
cs = r["comments"]
assert isinstance(cs, list) and len(cs) == 2, cs
for c in cs:
    assert set(c) == {"path", "line", "side", "body"}, sorted(c)
    assert isinstance(c["line"], int) and c["side"] == "RIGHT" and isinstance(c["body"], str)
assert [(c["path"], c["line"]) for c in cs] == [("src/bucket.py", 7), ("tests/test_bucket.py", 1)], cs
for c in cs:
    for marker in ("OUTSIDE-HUNK", "UNCHANGED-FILE", "NO-LINE"):
        assert marker not in c["body"]
# sanitized on the way out: no escape sequences, nothing shaped like a secret
assert "\x1b" not in cs[1]["body"] and "ghp_abcdefghijklmnopqrstuvwxyz0123" not in cs[1]["body"], cs[1]["body"]
assert "ghp_[redacted] is a key" in cs[1]["body"], cs[1]["body"]
PY

# --- the token: sent to the API and git, found nowhere else
assert_eq "every API call carried the token" "" "$(grep '/repos/' "$GH/requests.log" | grep 'token=no' || true)"
sqlite3 "$ENGINE_DB" .dump >"$T/dump.sql"
assert_eq "the token is not in the database" 0 "$(grep -c "$TOKEN" "$T/dump.sql" || true)"
assert_eq "nor in the engine's log" 0 "$(grep -c "$TOKEN" "$T/serve.log" || true)"
assert_eq "nor in the artifacts" "" "$(grep -rl "$TOKEN" "$T/artifacts" 2>/dev/null || true)"
assert_eq "the checkout is removed" "" "$(ls "$T/checkouts" 2>/dev/null || true)"
assert_eq "no sandbox left" 0 "$(docker ps -aq --filter "label=engine.session=$ID" | wc -l)"

assert_exit "the review replays against its history" 0 engine replay "$ID"
assert_exit "its history is dense, each step once" 0 verify_history "$ID"

# --- a public repository: git gets no token; a denial posts nothing
ID2="pr:Codertocat:Hello-World:2@denied"
lua5.4 -e '
  local json = require "cjson"
  local i = json.decode(io.read("a"))
  i.pr.private = false
  i.pr.owner, i.pr.name = nil, nil -- "repo": "owner/name" alone names it
  i.pr.clone_url = i.pr.clone_url:gsub("private%-", "")
  io.write(json.encode(i))' <"$T/input.json" >"$T/input-public.json"
"$ENGINE" start "$WF" --input @"$T/input-public.json" --id "$ID2" --detach >/dev/null 2>&1 || true
wait_approval "$ID2"
assert_exit "engine approve --deny" 0 approve_pending "$ID2" --deny --reason "not now"
wait_status "$ID2" completed 120 || fail "$ID2 not completed"
assert_eq "a denied review is not posted" 1 "$(posts)"
assert_contains "it says so" '"published":false' "$(engine show "$ID2" --json | jget result)"
assert_contains "the public checkout was fetched" "POST /git/Codertocat/Hello-World.git/git-upload-pack token=no" \
  "$(cat "$GH/requests.log")"
assert_eq "without the token" "" "$(grep ' /git/Codertocat/Hello-World.git' "$GH/requests.log" | grep 'token=yes' || true)"
assert_contains "and reviewed" '"comments":2' "$(engine events "$ID2" --json | grep '"type":"review.draft"')"

# --- GitHub refuses the line comments (422): the review goes out once, with
# the comments in its body
touch "$GH/reject_comments"
ID3="pr:Codertocat:Hello-World:2@folded"
"$ENGINE" start "$WF" --input @"$T/input-public.json" --id "$ID3" --detach >/dev/null 2>&1 || true
wait_approval "$ID3"
assert_exit "approve the third review" 0 approve_pending "$ID3"
wait_status "$ID3" completed 120 || fail "$ID3 not completed: $(engine events "$ID3" 2>&1 | tail -3)"
rm -f "$GH/reject_comments"
assert_eq "one more review posted" 2 "$(posts)"
python3 - "$GH/posted.jsonl" "$ID3" <<'PY' && pass "the refused comments went into its body" || fail "the folded review"
import json, sys
r = json.loads(open(sys.argv[1]).readlines()[1])["request"]
assert "comments" not in r, r["comments"]
assert set(r) == {"commit_id", "body", "event"}, sorted(r)
assert "`src/bucket.py:7` **major**: Off by one" in r["body"], r["body"]
assert r["body"].endswith("<!-- engine:review:%s -->" % sys.argv[2]), r["body"]
PY
assert_contains "the event says so" '"inline":false' "$(engine events "$ID3" --json | grep '"type":"review.published"')"

# --- a newer head of the same pull request supersedes the review in flight
IDA="pr:Codertocat:Hello-World:2@older" IDB="pr:Codertocat:Hello-World:2@newer"
"$ENGINE" start "$WF" --input @"$T/input-public.json" --id "$IDA" --detach >/dev/null 2>&1 || true
wait_approval "$IDA"
"$ENGINE" start "$WF" --input @"$T/input-public.json" --id "$IDB" --detach >/dev/null 2>&1 || true
wait_status "$IDA" cancelled 60 || fail "the older review was not cancelled"
wait_approval "$IDB"
assert_exit "nothing left to approve on the older one" 2 engine approve "$IDA"
assert_exit "the newer one is answered" 0 approve_pending "$IDB" --deny
wait_status "$IDB" completed 60 || fail "$IDB not completed"
assert_eq "neither posted" 2 "$(posts)"

# --- bad input names its problem before anything runs
assert_exit "a start without pr is refused" 2 engine start "$WF" --input '{}' --id bad1 --quiet
assert_contains "it names input.pr" "input.pr is missing" "$ERR"
assert_exit "a repository name that is not one is refused" 2 engine start "$WF" --id bad2 --quiet \
  --input '{"pr":{"owner":"../etc","name":"..","number":1,"clone_url":"http://127.0.0.1:1/x.git"},"github_api":"'"$API"'"}'
assert_contains "it names the field" "pr.owner must be a GitHub name" "$ERR"
assert_contains "and the other" "pr.name must be a GitHub name" "$ERR"
assert_eq "and asked GitHub nothing" "" "$(grep -F '../etc' "$GH/requests.log" || true)"
finish
