#!/usr/bin/env bash
# Design 2, the specialist loop (workflows/specialist_loop.lua on
# lua/spine.lua), end to end in a real Docker sandbox: the shipped example
# offline (the PR-review repository's failing test fixed in two revisions: the
# first patch fails the tests, the second passes and the reviewer approves);
# bad input named; the reviewer's reasons fed back; the patch and verdict
# schemas as structured output over the OpenAI wire format; hostile patch
# paths refused (table-driven); against the local GitHub stub, the gates (approval by
# default) before the push and before the draft pull request, the branch
# pushed to the stub's repository and the draft opened with the right
# head/base/title; a refused approval stopping before the push; a patch that
# does not apply fed back; maxRevisions exhausted naming it; kill -9 during a
# tests run, while waiting for an approval and at recorded steps, each
# resuming to the same result; engine replay in a fresh process; the start
# form's schema and the events as the API serves them to the page.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
cd "$SRC" # the example's paths are relative to the repository
unset OPENAI_API_KEY ANTHROPIC_API_KEY GITHUB_TOKEN ENGINE_GITHUB_API_URL # offline: model.live stays unused
WF="$SRC/workflows/specialist_loop.lua"
EXAMPLE="$SRC/examples/specialist-loop.json"
export ENGINE_CONTEXT_ROOTS="$SRC:$T" ENGINE_ARTIFACTS="$T/artifacts" ENGINE_PR_CHECKOUTS="$T/checkouts"
export ENGINE_WORKSPACES="$T/workspaces" # (on PostgreSQL there is no database directory to put them beside)
input_with() { # OVERRIDES_JSON -> a file: the example with these overrides
  local f="$T/input-$RANDOM$RANDOM.json"
  printf '%s' "$1" >"$f.over"
  lua5.4 "$SRC/tests/integration/merge_json.lua" "$EXAMPLE" "@$f.over" >"$f"
  echo "$f"
}
types_of() { engine events "$1" --json | lua5.4 "$SRC/tests/integration/verify.lua" events; }
ev() { engine events "$1" --json | grep "\"type\":\"$2\"" || true; }
pending() { engine events "$1" --json | grep -c '"type":"approval.requested"' || true; }
sandboxes() { docker ps -aq --filter "label=engine.session=$1" | wc -l; }
artifact() { # ID PATH -> the stored file
  local sha
  sha="$(engine show "$1" --json | jget result.artifacts | P="$2" lua5.4 -e '
    for _, a in ipairs(require"cjson".decode(io.read("a"))) do if a.path == os.getenv("P") then print(a.sha256) end end')"
  echo "$T/artifacts/$sha"
}
# what two runs of one input share (the commit's id has the run's date in it):
# the counters, the summary, the draft without its commit, the diff's hash, the event types
outcome_of() {
  local res
  res="$(engine show "$1" --json | jget result)"
  echo "$(jget revisions <<<"$res") $(jget turns <<<"$res") $(jget tokens <<<"$res") $(jget summary <<<"$res")"
  jget pull_request <<<"$res" | lua5.4 -e 'local t = require"cjson".decode(io.read("a")); t.commit = nil
    local k = {} for n in pairs(t) do k[#k + 1] = n end table.sort(k)
    for _, n in ipairs(k) do print(n, tostring(t[n])) end'
  sha256sum <"$(artifact "$1" fix.patch)" | cut -c1-16
  types_of "$1"
}

# --- the shipped example, with the command the docs give
assert_exit "engine start workflows/specialist_loop.lua --input @examples/specialist-loop.json" 0 \
  engine start workflows/specialist_loop.lua --input @examples/specialist-loop.json --id ex --quiet
res="$(engine show ex --json | jget result)"
assert_eq "two revisions, three model calls" "2 3" "$(jget revisions <<<"$res") $(jget turns <<<"$res")"
assert_eq "the stream: the spine's events and the loop's" \
  "session.created,session.status,sandbox.ready,session.status,context.built,session.status,agent.message,session.status,tests.ran,session.status,agent.message,session.status,tests.ran,session.status,agent.message,review.verdict,session.status,branch.committed,artifact.saved,artifact.saved,artifact.saved,session.status,session.completed" \
  "$(types_of ex)"
assert_contains "the base's tests fail first" '"passed":false' "$(ev ex context.built)"
ran="$(ev ex tests.ran)"
assert_contains "revision 1: the tests still fail" '"passed":false,"revision":1' "$ran"
assert_contains "naming the assertion" "assert b.allow() and b.allow()" "$(head -1 <<<"$ran")"
assert_contains "revision 2: they pass" '"passed":true,"revision":2' "$ran"
assert_contains "only the patch's file is in it" '1 file changed' "$(tail -1 <<<"$ran")"
assert_contains "the reviewer approves" '"verdict":"approve"' "$(ev ex review.verdict)"
assert_contains "the failure went back to the fixer" "exits 1" \
  "$(engine history ex --json | grep ActivityScheduled | grep model.turn | tail -2 | sed -n 1p)"
assert_contains "the diff kept: fix.patch" "+        if self.tokens >= cost:" "$(cat "$(artifact ex fix.patch)")"
git clone -q "$(artifact ex branch.bundle)" -b fix/bucket-capacity "$T/fixed" 2>/dev/null || fail "branch.bundle is not the branch"
assert_contains "the branch holds the fix" "self.tokens >= cost" "$(cat "$T/fixed/ratelimit/bucket.py")"
assert_eq "its commit is the result's" "$(jget commit <<<"$res")" "$(git -C "$T/fixed" rev-parse HEAD)"
assert_eq "on the base (the bundle's feature branch)" \
  "$(git bundle list-heads "$SRC/examples/pr-review/repo.bundle" refs/heads/feature | cut -d' ' -f1)" \
  "$(git -C "$T/fixed" rev-parse HEAD~1)"
assert_eq "the draft kept, not opened (no github in the input)" "false fix/bucket-capacity feature" \
  "$(jget opened <"$(artifact ex pull-request.json)") $(jget head <"$(artifact ex pull-request.json)") $(jget base <"$(artifact ex pull-request.json)")"
assert_eq "no sandbox left" 0 "$(sandboxes ex)"
assert_exit "engine replay ex (a fresh process)" 0 engine replay ex
assert_contains "replays and returns the same result" "returns the same result" "$OUT"

# --- bad input: every problem named, exit 2, nothing started
BAD="$(input_with '{"objective":" ","colour":"red","maxRevisions":11,"repo":{"bundle":"/etc/passwd","base":"a..b"},"github":{"owner":"o"},"limits":{"testTimeoutSeconds":0}}')"
assert_exit "invalid input is refused" 2 engine start "$WF" --input @"$BAD" --id bad --quiet
for p in "objective is missing" "unknown field 'colour'" "maxRevisions must be a whole number from 1 to 10" \
    "repo.base is not a valid branch name" "/etc/passwd is outside the allowed roots" "github.name is missing" \
    "github.remote is missing" "limits.testTimeoutSeconds must be a whole number from 1 to 3600"; do
  assert_contains "names: $p" "$p" "$ERR"
done
assert_exit "no testCommand, no reviewer" 2 engine start "$WF" --input '{"objective":"x","repo":{"bundle":"examples/pr-review/repo.bundle"},"fixer":{"name":"replay:x"}}' --id bad2 --quiet
assert_contains "names testCommand" "testCommand is missing" "$ERR"
assert_contains "names the reviewer" "reviewer.name is missing" "$ERR"

assert_eq "the input's schema is one lua/jsonschema.lua accepts" "true" \
  "$(F="$SRC/lua/types/specialist_loop_input.schema.json" LUA_PATH="$SRC/lua/?.lua;;" lua5.4 -e 'local j=require"cjson"; local ok,e=require"jsonschema".check_schema(j.decode(io.open(os.getenv("F")):read("a"))); io.write(tostring(ok), e and table.concat(e,"; ") or "")')"

# --- maxRevisions exhausted: fails naming it and each revision's failure
N1="$(input_with '{"maxRevisions":1}')"
assert_exit "maxRevisions 1: the session fails" 1 engine start "$WF" --input @"$N1" --id n1 --quiet
err="$(engine show n1 --json | jget error)"
assert_eq "MaxRevisions" "MaxRevisions" "$(jget type <<<"$err")"
assert_contains "naming the limit" "maxRevisions 1 reached without a patch that passes the tests and the review" "$(jget message <<<"$err")"
assert_contains "and why" "revision 1: the tests fail (exit 1)" "$(jget message <<<"$err")"
assert_eq "one fixer call, no reviewer" 1 "$(ev n1 agent.message | wc -l)"
assert_eq "no commit" "" "$(ev n1 branch.committed)"
assert_eq "no sandbox left" 0 "$(sandboxes n1)"

# --- a patch that does not apply: fed back, the next one applies
python3 - "$SRC/examples/specialist-loop/fixer.jsonl" "$T/noapply.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
bad = json.loads(lines[1]["turn"]["text"])
bad["files"][0]["diff"] = bad["files"][0]["diff"].replace("now = self.clock()", "now = time.time()")
with open(sys.argv[2], "w") as f:
    f.write(json.dumps({"turn": {"text": json.dumps(bad), "usage": {"input_tokens": 100, "output_tokens": 10}}}) + "\n")
    f.write(json.dumps(lines[1]) + "\n")
PY
NA="$(input_with "{\"fixer\":{\"name\":\"replay:$T/noapply.jsonl\"}}")"
assert_exit "a patch that does not apply, then one that does" 0 engine start "$WF" --input @"$NA" --id na --quiet
rej="$(ev na patch.rejected)"
assert_contains "patch.rejected for revision 1" '"revision":1' "$rej"
assert_contains "git apply --check's words" "patch does not apply" "$rej"
assert_contains "fed back to the fixer" "The patch does not apply to the base commit" \
  "$(engine history na --json | grep ActivityScheduled | grep model.turn | sed -n 2p)"
assert_eq "revision 2 approved" 2 "$(engine show na --json | jget result.revisions)"

# --- the reviewer asks for a revision: its reasons go back to the fixer
python3 - "$SRC/examples/specialist-loop/fixer.jsonl" "$T" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
t = sys.argv[2]
with open(t + "/fixer-rev.jsonl", "w") as f:
    f.write(json.dumps(lines[1]) + "\n")
    f.write(json.dumps(lines[1]) + "\n")
revise = {"verdict": "revise", "reasons": ["Say in the summary why the refill must be capped."]}
approve = {"verdict": "approve", "reasons": ["Good."]}
with open(t + "/reviewer-rev.jsonl", "w") as f:
    f.write(json.dumps({"turn": {"text": json.dumps(revise)}}) + "\n")
    f.write(json.dumps({"turn": {"text": json.dumps(approve)}}) + "\n")
# the same conversation over the OpenAI wire format (tests/model_server): fixer, then reviewer
good = lines[1]["turn"]["text"]
json.dump({"steps": [{"reply": {"text": good, "usage": {"input_tokens": 900, "output_tokens": 80}}},
                     {"reply": {"text": json.dumps(approve), "usage": {"input_tokens": 700, "output_tokens": 20}}}]},
          open(t + "/wire.json", "w"))
PY
RV="$(input_with "{\"fixer\":{\"name\":\"replay:$T/fixer-rev.jsonl\"},\"reviewer\":{\"name\":\"replay:$T/reviewer-rev.jsonl\"}}")"
assert_exit "revise, then approve" 0 engine start "$WF" --input @"$RV" --id rv --quiet
assert_eq "two verdicts" "revise approve" "$(ev rv review.verdict | grep -o '"verdict":"[a-z]*"' | cut -d'"' -f4 | tr '\n' ' ' | sed 's/ $//')"
assert_contains "the reasons went back to the fixer" "the reviewer asks for a revision:\\n- Say in the summary why" \
  "$(engine history rv --json | grep ActivityScheduled | grep model.turn | grep 'You fix a repository' | sed -n 2p)"
assert_eq "the reviewer's second call sees its first verdict" 1 \
  "$(engine history rv --json | grep ActivityScheduled | grep model.turn | grep 'You review a patch' | tail -1 | grep -c 'Say in the summary' || true)"
assert_eq "revision 2 approved, four calls" "2 4" "$(engine show rv --json | jget result.revisions) $(engine show rv --json | jget result.turns)"

# --- over the real wire format: each role's schema as structured output
start_model_server "$T/wire.json"
WI="$(input_with "{\"fixer\":{\"name\":\"gpt-test\",\"provider\":\"openai\",\"baseUrl\":\"$MURL/v1\"},\"reviewer\":{\"name\":\"gpt-test\",\"provider\":\"openai\",\"baseUrl\":\"$MURL/v1\"}}")"
assert_exit "over OpenAI Chat Completions" 0 engine start "$WF" --input @"$WI" --id wire --quiet
reqs="$(requests)"
assert_eq "two requests: the fixer's, the reviewer's" 2 "$(nreq)"
assert_eq "the patch schema as response_format" "patch json_schema" \
  "$(jget 1.body.response_format.json_schema.name <<<"$reqs") $(jget 1.body.response_format.type <<<"$reqs")"
assert_eq "the verdict schema" "verdict approve" \
  "$(jget 2.body.response_format.json_schema.name <<<"$reqs") $(jget 2.body.response_format.json_schema.schema.properties.verdict.enum.1 <<<"$reqs")"
assert_contains "the fixer saw the repository" "## File ratelimit/bucket.py" "$(jget 1.body.messages <<<"$reqs")"
assert_contains "and the failing tests" "AssertionError" "$(jget 1.body.messages <<<"$reqs")"
assert_contains "the reviewer saw the diff" "+        if self.tokens >= cost:" "$(jget 2.body.messages <<<"$reqs")"
assert_eq "one revision" 1 "$(engine show wire --json | jget result.revisions)"

# --- hostile patches, table-driven: each refused before git applies anything, named, fed back
python3 - "$SRC/examples/specialist-loop/fixer.jsonl" "$T/hostile.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
good = json.loads(lines[1]["turn"]["text"])
hunk = good["files"][0]["diff"]
bad = [("../outside.py", hunk), ("/etc/passwd", hunk), (".git/config", hunk), ("ratelimit/../../x.py", hunk),
       ("ratelimit/bucket.py", "--- a/../../etc/x\n+++ b/../../etc/x\n" + hunk)]
with open(sys.argv[2], "w") as f:
    for path, diff in bad:
        f.write(json.dumps({"turn": {"text": json.dumps({"files": [{"path": path, "diff": diff}]})}}) + "\n")
    f.write(json.dumps(lines[1]) + "\n")
PY
HO="$(input_with "{\"maxRevisions\":6,\"fixer\":{\"name\":\"replay:$T/hostile.jsonl\"}}")"
assert_exit "five hostile patches, then a good one" 0 engine start "$WF" --input @"$HO" --id ho --quiet
rej="$(ev ho patch.rejected)"
i=0
for want in "the path ../outside.py leaves the repository" "the path /etc/passwd is absolute" \
    "the path .git/config is inside .git" "the path ratelimit/../../x.py leaves the repository" "../../etc/x"; do
  i=$((i + 1))
  assert_contains "revision $i refused: $want" "$want" "$(sed -n "${i}p" <<<"$rej")"
done
assert_eq "the sixth approved" 6 "$(engine show ho --json | jget result.revisions)"
assert_contains "the commit has the fix alone" "ratelimit/bucket.py | 4 ++--" "$(ev ho branch.committed)"

# --- against the GitHub stub: the gates, the push, the draft pull request
TOKEN="ghp_test$RANDOM${RANDOM}secretvalue$RANDOM"
GH="$T/gh"
mkdir -p "$GH/git/Codertocat" "$T/creds"
printf '{"GITHUB_TOKEN": "%s"}' "$TOKEN" >"$T/creds/credentials.json"
export ENGINE_CREDENTIALS_FILE="$T/creds/credentials.json"
BARE="$GH/git/Codertocat/private-ratelimit.git"
git clone -q --bare "$SRC/examples/pr-review/repo.bundle" "$BARE"
git -C "$BARE" config http.receivepack true
printf '{"number": 1, "base": {"repo": {"name": "private-ratelimit", "owner": {"login": "Codertocat"}}}}' >"$GH/pr.json"
printf '[]' >"$GH/files.json"
python3 "$SRC/tests/integration/github_stub.py" "$GH" "$TOKEN" 2>"$T/stub.log" &
STUB=$!; PIDS+=("$STUB")
wait_true 30 '[ -s "$GH/port" ]' || true
API="http://127.0.0.1:$(cat "$GH/port")"
gh_input() { # BRANCH -> an input that pushes BRANCH and opens its draft at the stub
  input_with "{\"repo\":{\"branch\":\"$1\"},\"github\":{\"owner\":\"Codertocat\",\"name\":\"private-ratelimit\",\"remote\":\"$API/git/Codertocat/private-ratelimit.git\",\"api\":\"$API\"}}"
}
pulls() { [ -f "$GH/pulls.jsonl" ] && wc -l <"$GH/pulls.jsonl" || echo 0; }
remote_head() { git -C "$BARE" rev-parse --verify -q "refs/heads/$1" || true; }

bg S engine serve 2>>"$T/serve.log"
GH1="$(gh_input fix/bucket-capacity)"
engine start "$WF" --input @"$GH1" --id gh1 --detach >/dev/null 2>&1 || true
wait_true 120 '[ "$(pending gh1)" -ge 1 ]' || true
req="$(ev gh1 approval.requested)"
assert_contains "a gate before the push" '"tool":"push"' "$req"
assert_contains "policies/20-publish asks" "publishes outside the session" "$req"
assert_eq "nothing pushed before the approval" "" "$(remote_head fix/bucket-capacity)"
assert_exit "approve the push" 0 approve_pending gh1 --reason "push it"
wait_true 120 '[ "$(pending gh1)" -ge 2 ]' || true
commit="$(ev gh1 branch.committed | jget payload.commit)"
assert_eq "the branch pushed to the stub's repository" "$commit" "$(remote_head fix/bucket-capacity)"
assert_contains "with the token (a private repository)" "git-receive-pack token=yes" "$(cat "$GH/requests.log")"
assert_contains "a gate before the pull request" '"tool":"open_pull_request"' "$(ev gh1 approval.requested | tail -1)"
assert_eq "no pull request before its approval" 0 "$(pulls)"
# kill -9 while it waits for the approval: the answer reaches the restarted engine
kill -9 "$S"; wait "$S" 2>/dev/null || true
assert_exit "approve the pull request (the engine down)" 0 approve_pending gh1
bg S engine serve 2>>"$T/serve.log"
wait_status gh1 completed 120 || fail "gh1 not completed: $(engine events gh1 2>&1 | tail -3)"
assert_eq "one draft pull request opened" 1 "$(pulls)"
pr="$(head -1 "$GH/pulls.jsonl")"
assert_eq "its head, base, title, draft" "fix/bucket-capacity feature Fix TokenBucket: allow up to capacity, cap the refill true" \
  "$(jget head.ref <<<"$pr") $(jget base.ref <<<"$pr") $(jget title <<<"$pr") $(jget draft <<<"$pr")"
assert_contains "the API call carried the token" "POST /repos/Codertocat/private-ratelimit/pulls token=yes" "$(cat "$GH/requests.log")"
res="$(engine show gh1 --json | jget result)"
assert_eq "the result names it" "100 true" "$(jget pull_request.number <<<"$res") $(jget pull_request.opened <<<"$res")"
assert_contains "the draft kept" '"number":100' "$(cat "$(artifact gh1 pull-request.json)")"
assert_eq "the token never in the history" 0 "$(engine history gh1 --json | grep -c "$TOKEN" || true)"
assert_eq "no sandbox left" 0 "$(sandboxes gh1)"
assert_exit "engine replay gh1" 0 engine replay gh1

# --- a refused approval stops before the push
GH2="$(gh_input fix/refused)"
engine start "$WF" --input @"$GH2" --id gh2 --detach >/dev/null 2>&1 || true
wait_true 120 '[ "$(pending gh2)" -ge 1 ]' || true
assert_exit "refuse the push" 0 approve_pending gh2 --deny --reason "not this way"
wait_status gh2 failed 120 || fail "gh2 did not fail"
assert_contains "ApprovalRefused, naming the gate and the reason" "the push was not approved" "$(engine show gh2 --json | jget error.message)"
assert_contains "and the reason" "not this way" "$(engine show gh2 --json | jget error.message)"
assert_eq "nothing pushed" "" "$(remote_head fix/refused)"
assert_eq "no pull request" 1 "$(pulls)"
assert_contains "the diff is kept all the same" "fix.patch" "$(ev gh2 artifact.saved)"
assert_eq "no sandbox left" 0 "$(sandboxes gh2)"

# --- kill -9 during a tests run (revision 2's, held until the engine is down)
KT="$(input_with "{\"testCommand\":\"if grep -q 'tokens >= cost' ratelimit/bucket.py; then touch /workspace/working/started; while [ ! -e /workspace/working/go ]; do sleep 0.1; done; fi; $(jget testCommand <"$EXAMPLE" | sed 's/["\\]/\\&/g')\"}")"
engine start "$WF" --input @"$KT" --id kt --detach >/dev/null 2>&1 || true
wait_true 120 'ls "$T"/workspaces/kt-*/working/started' || true
assert_eq "the tests run when the engine is killed" 1 "$(ev kt tests.ran | wc -l)"
kill -9 "$S"; wait "$S" 2>/dev/null || true
touch "$(dirname "$(ls "$T"/workspaces/kt-*/working/started)")/go"
bg S engine serve 2>>"$T/serve.log"
wait_status kt completed 180 || fail "kt not completed: $(engine events kt 2>&1 | tail -3)"
assert_eq "kill -9 during the tests: the same outcome as the example" "$(outcome_of ex)" "$(outcome_of kt)"
h="$(verify_history kt 2>&1)"
assert_contains "each step once" "open_commands=0 last=WorkflowCompleted" "$h"
assert_eq "no sandbox left" 0 "$(sandboxes kt)"
assert_exit "engine replay kt" 0 engine replay kt
kill "$S"; wait "$S" 2>/dev/null || true

# --- as the page reads it: the script's declared input (the start form), the events, how it draws them
TOK="$(engine token create reader --scopes read 2>/dev/null)"
serve_api --workflows "$SRC/workflows"
L="$(curl -sf -H "Authorization: Bearer $TOK" "$URL/v1/workflow-scripts")"
item="$(NAME=specialist_loop.lua lua5.4 -e 'local j=require"cjson".decode(io.read("a")); for _,s in ipairs(j.scripts) do if s.name==os.getenv("NAME") then io.write(require"cjson".encode(s)) end end' <<<"$L")"
assert_eq "the start form gets its declared schema" "SpecialistLoopInput repo.bundle is missing (a git bundle under ENGINE_CONTEXT_ROOTS)" \
  "$(jget input_schema.title <<<"$item") $(jget input_schema.properties.repo.errorMessage.required <<<"$item")"
page="$(curl -sf -H "Authorization: Bearer $TOK" "$URL/v1/workflows/gh1/events?after=0")"
for ty in context.built tests.ran review.verdict branch.committed approval.requested branch.pushed pull_request.opened; do
  assert_contains "GET .../events has $ty" "\"$ty\"" "$page"
done
kinds="$(curl -sf "$URL/web/event_kinds.json")"
for ty in tests.ran patch.rejected review.verdict branch.committed branch.pushed pull_request.opened; do
  assert_contains "the page draws $ty" "\"$ty\"" "$kinds"
done
kill "$S"; wait "$S" 2>/dev/null || true

# --- kill -9 at recorded steps of the example: the same outcome
want="$(outcome_of ex)"
n=0
# the setup, the first tests run, the reviewer's call, the commit, the persist
for pt in activity.record:4 activity.start:6 commit.after:9 activity.record:10 activity.start:12; do
  n=$((n + 1))
  id="k$n"
  rc="$( (ENGINE_CRASH="$pt" "$ENGINE" start "$WF" --input @"$EXAMPLE" --id "$id" --quiet >/dev/null 2>"$T/crash.err"
    echo $?) 2>/dev/null)"
  [ "$rc" == 137 ] || fail "$pt: the engine was not killed there (exit $rc: $(tail -2 "$T/crash.err"))"
  tries=0
  while [ "$(status "$id")" != completed ] && [ $tries -lt 3 ]; do
    tries=$((tries + 1))
    "$ENGINE" start "$WF" --id "$id" --quiet >/dev/null 2>"$T/resume.err" || true
  done
  assert_eq "kill -9 at $pt: completed" completed "$(status "$id")"
  assert_eq "kill -9 at $pt: the same outcome" "$want" "$(outcome_of "$id")"
  h="$(verify_history "$id" 2>&1)"
  assert_contains "kill -9 at $pt: each step once" "open_commands=0 last=WorkflowCompleted" "$h"
  assert_eq "kill -9 at $pt: no sandbox left" 0 "$(sandboxes "$id")"
  assert_exit "kill -9 at $pt: engine replay" 0 engine replay "$id"
done

finish
