#!/usr/bin/env bash
# The agent session end to end, with the real Docker sandbox and the offline
# replay model: invalid input; the PR-review example with its approval; kill -9
# while waiting for the approval; a denial; a policy edited while a session
# waits; forbidden and hostile tool calls; limits; and the history of a
# 200-turn session staying linear.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
cd "$SRC" # the example's paths are relative to the repository
WF="$SRC/workflows/agent_session.lua"
export ENGINE_CONTEXT_ROOTS="$SRC:$T" ENGINE_REVIEWS_DIR="$T/reviews" ENGINE_ARTIFACTS="$T/artifacts"
python3 "$SRC/tests/integration/make_recordings.py" "$T/rec"
# containers of this test's database (its instance id) for session $1
containers() {
  local inst; inst="$(sqlite3 "$ENGINE_DB" "SELECT value FROM meta WHERE key='instance_id'" 2>/dev/null)"
  docker ps -aq --filter label=engine.managed=true --filter "label=engine.instance=$inst" \
    --filter "label=engine.session=$1" | wc -l
}
events() { engine events "$1" --json | lua5.4 "$SRC/tests/integration/verify.lua" events; }
pending() { engine events "$1" --json | grep -c '"type":"approval.requested"' || true; }
decided() { engine events "$1" --json | grep -c '"type":"approval.decided"' || true; }
# waits until session $1 has asked for approval number $2
wait_approval() {
  wait_true 60 '[ "$(pending "$1")" -ge "$2" ]' '' "$@" && return 0
  fail "$1 never asked for approval $2 (status $(status "$1"))"; return 1
}
# a session input: the example with overrides (jq-like merge in Lua)
input_with() { # OVERRIDES_JSON -> a file: the example with these overrides
  local f="$T/input-$RANDOM$RANDOM.json"
  printf '%s' "$1" >"$f.over"
  lua5.4 "$SRC/tests/integration/merge_json.lua" "$SRC/examples/pr-review.json" "@$f.over" >"$f"
  echo "$f"
}

# --- invalid input: every problem named, exit 2, nothing started
BAD="$(input_with '{"objective":"","permissions":{"tools":["shell","teleport"]},"skills":["no-such-skill"],"limits":{"maxModelTurns":-1},"context":{"files":["/etc/passwd"]}}')"
assert_exit "invalid input is refused" 2 "$ENGINE" start "$WF" --input @"$BAD" --id bad --quiet
for p in "objective is missing" "unknown tool 'teleport'" "no-such-skill" "maxModelTurns must be a positive number" \
         "/etc/passwd is outside the allowed roots"; do
  assert_contains "names: $p" "$p" "$ERR"
done
assert_eq "no sandbox was started" 0 "$(containers bad)"

serve_bg

# --- the PR-review example: one approval, then a completed review
"$ENGINE" start "$WF" --input @examples/pr-review.json --id pr1 --detach >/dev/null 2>&1 || true
wait_approval pr1 1
assert_contains "the session waits for approval" "WAITING_FOR_APPROVAL" "$(engine events pr1 --json | tail -2)"
assert_eq "a live sandbox while it waits" 1 "$(containers pr1)"
assert_exit "engine approve" 0 approve_pending pr1 --reason "looks right"
wait_status pr1 completed 120
res="$(engine show pr1 --json | jget result)"
assert_contains "the review's verdict" "request_changes" "$(jget result.verdict <<<"$res")"
assert_contains "its summary" "Request changes" "$(jget summary <<<"$res")"
assert_eq "four model turns" 4 "$(jget turns <<<"$res")"
ev="$(events pr1)"
assert_contains "the stream starts with the session" "session.created,session.status,sandbox.ready" "$ev"
assert_contains "the approval in the stream" "approval.requested,session.status,approval.decided" "$ev"
assert_contains "the stream ends with completion" "artifact.saved,session.status,session.completed" "$ev"
assert_contains "the review was published" "request changes" "$(cat "$T"/reviews/* 2>/dev/null)"
assert_contains "review.md was saved as an artifact" "review.md" "$(engine events pr1 --json | grep artifact.saved)"
assert_eq "the sandbox is gone" 0 "$(containers pr1)"
assert_eq "history dense, each step once" "ok" \
  "$(engine history pr1 --json | lua5.4 "$SRC/tests/integration/verify.lua" history >/dev/null && echo ok)"

# --- kill -9 while waiting for the approval: the same session carries on
"$ENGINE" start "$WF" --input @examples/pr-review.json --id pr2 --detach >/dev/null 2>&1 || true
wait_approval pr2 1
kill -9 "$S"; wait "$S" 2>/dev/null || true
assert_eq "its sandbox survives the crash" 1 "$(containers pr2)"
serve_bg
assert_exit "approve after the restart" 0 approve_pending pr2
wait_status pr2 completed 120
assert_eq "same result as without the crash" "$(jget summary <<<"$res")" "$(engine show pr2 --json | jget result.summary)"
assert_eq "same event stream" "$(events pr1)" "$(events pr2)"
assert_eq "its sandbox is gone" 0 "$(containers pr2)"

# --- a denial reaches the model as a denial, and the session completes
"$ENGINE" start "$WF" --input @examples/pr-review.json --id pr3 --detach >/dev/null 2>&1 || true
wait_approval pr3 1
assert_exit "engine approve --deny" 0 approve_pending pr3 --deny --reason "not today"
wait_status pr3 completed 120
assert_contains "the tool result says denied" "denied: not today" "$(engine events pr3 --json | grep tool.result)"
assert_exit "nothing left to approve" 2 engine approve pr3

# --- a policy edited while a session waits
cp -r "$SRC/policies" "$T/policies"
export ENGINE_POLICIES_DIR="$T/policies"
kill "$S"; wait "$S" 2>/dev/null || true
bg S engine serve
PE="$(input_with "{\"model\":{\"name\":\"replay:$T/rec/policy_edit.jsonl\"}}")"
"$ENGINE" start "$WF" --input @"$PE" --id pe --detach >/dev/null 2>&1 || true
wait_approval pe 1
printf '%s\n' '-- test: shell is now forbidden' 'return function(req)' \
  '  if req.tool == "shell" then return "deny", "shell is off for now" end' 'end' >"$T/policies/05-no-shell.lua"
kill -9 "$S"; wait "$S" 2>/dev/null || true  # the restart replays the first decision from the log
serve_bg
approve_pending pe >/dev/null 2>&1
wait_status pe completed 120
results="$(engine events pe --json | grep '"type":"tool.result"')"
assert_eq "three tool results" 3 "$(grep -c . <<<"$results")"
assert_contains "the first shell call stayed allowed" '"ok":true' "$(sed -n 1p <<<"$results")"
assert_contains "the one after the edit was denied by the new policy" "shell is off for now" "$(sed -n 3p <<<"$results")"
hashes="$(engine history pe --json | grep '"name":"session.decide"' | grep ActivityCompleted | grep -o '"hash":"[0-9a-f][^"]*"' | sort -u | wc -l)"
assert_eq "decisions recorded with two different policy-set hashes" 2 "$hashes"
rm "$T/policies/05-no-shell.lua"

# --- serve watches the policies: a broken edit is refused, the set in force stays
kill "$S"; wait "$S" 2>/dev/null || true
"$ENGINE" serve 2>"$T/serve.log" &
S=$!; PIDS+=("$S")
wait_serving "$T/serve.log"
# the serve loads its policy set in its start hook, after "serving": a harmless
# edit it reports as reloaded shows a set is in force before the broken one
# comes (if the start hook loads after the edit, there is no line to see, but
# a set is in force all the same once the deadline passes). Polled through
# the serve's own log.
printf '%s\n' '-- test: a harmless edit' 'return function(req) end' >"$T/policies/05-noop.lua"
noop_end=$(( $(now_ms) + $(scaled 20) * 1000 )) # no failure when the line never comes (said above)
until grep -q "policies reloaded" "$T/serve.log" || [ "$(now_ms)" -ge "$noop_end" ]; do sleep 0.05; done
printf '%s\n' 'return function(req) this is not lua end' >"$T/policies/06-broken.lua"
wait_true 30 'grep -q "policies rejected" "$T/serve.log"' || true
assert_contains "a broken policy file is refused with its error" "06-broken.lua" "$(cat "$T/serve.log")"
"$ENGINE" start "$WF" --input @"$PE" --id pe2 --detach >/dev/null 2>&1 || true
wait_approval pe2 1
assert_contains "sessions still decide with the previous set" '"ok":true' \
  "$(engine events pe2 --json | grep '"type":"tool.result"' | sed -n 1p)"
rm "$T/policies/06-broken.lua"
good="$(grep -c "policies reloaded" "$T/serve.log" || true)"
printf '%s\n' '-- test: publishing is allowed outright' 'return function(req)' \
  '  if req.tool == "publish_review" then return "allow", "test" end' 'end' >"$T/policies/07-publish-ok.lua"
wait_true 30 '[ "$(grep -c "policies reloaded" "$T/serve.log")" -gt "$good" ]' || true
[ "$(grep -c "policies reloaded" "$T/serve.log")" -gt "$good" ] && pass "a good edit is loaded" ||
  fail "a good edit is loaded: no new 'policies reloaded' in $T/serve.log"
approve_pending pe2 >/dev/null 2>&1
wait_status pe2 completed 60
rm "$T/policies/07-publish-ok.lua" "$T/policies/05-noop.lua"

# --- the policies see who started a session and who approved: no self-approval
reloads="$(grep -c "policies reloaded" "$T/serve.log" || true)"
printf '%s\n' '-- test: four eyes' 'return function(req)' \
  '  if req.approval and req.approval.approver == req.identity then' \
  '    return "deny", "self-approval: " .. req.identity end' 'end' >"$T/policies/08-four-eyes.lua"
wait_true 30 '[ "$(grep -c "policies reloaded" "$T/serve.log")" -gt "$reloads" ]' || true
USER=alice "$ENGINE" start "$WF" --input @examples/pr-review.json --id fe1 --detach >/dev/null 2>&1 || true
USER=alice "$ENGINE" start "$WF" --input @examples/pr-review.json --id fe2 --detach >/dev/null 2>&1 || true
wait_approval fe1 1
wait_approval fe2 1
assert_contains "the session records who started it" '"identity":"local:alice"' \
  "$(engine events fe1 --json | grep '"type":"session.created"')"
USER=alice approve_pending fe1 >/dev/null 2>&1
USER=bob approve_pending fe2 >/dev/null 2>&1
wait_status fe1 completed 120
wait_status fe2 completed 120
assert_contains "approving one's own session is overruled by the policy" "self-approval: local:alice" \
  "$(engine events fe1 --json | grep '"type":"approval.overruled"')"
assert_contains "and the tool does not run" '"denied":true' \
  "$(engine events fe1 --json | grep '"type":"tool.result"' | grep publish_review)"
assert_eq "another approver's approval stands" 0 "$(engine events fe2 --json | grep -c approval.overruled || true)"
assert_contains "the approval names the approver" '"approver":"local:bob"' \
  "$(engine events fe2 --json | grep '"type":"approval.decided"')"
rm "$T/policies/08-four-eyes.lua"

# --- forbidden and hostile tool calls come back to the model as results
HO="$(input_with "{\"model\":{\"name\":\"replay:$T/rec/hostile.jsonl\"}}")"
"$ENGINE" start "$WF" --input @"$HO" --id ho --detach >/dev/null 2>&1 || true
wait_status ho completed 120
hr="$(engine events ho --json | grep '"type":"tool.result"')"
assert_contains "a tool outside the allowlist is denied" "denied" "$(grep http_fetch <<<"$hr")"
assert_contains "a path traversal is refused" "write_file" "$(grep -i -e invalid -e traversal -e outside <<<"$hr")"
assert_contains "a huge output is truncated" '"truncated":true' "$(grep '"tool":"shell"' <<<"$hr")"
[ -e /etc/evil ] && fail "the traversal wrote /etc/evil" || pass "nothing written outside the workspace"

# --- limits end the session with a partial result, never a crash
LT="$(input_with '{"limits":{"maxModelTurns":2}}')"
"$ENGINE" start "$WF" --input @"$LT" --id lt --detach >/dev/null 2>&1 || true
wait_status lt completed 120
assert_contains "maxModelTurns: limit.exceeded" '"limit":"maxModelTurns"' "$(engine events lt --json | grep limit.exceeded)"
assert_eq "partial result says so" limit "$(engine show lt --json | jget result.outcome)"
assert_eq "its sandbox is gone" 0 "$(containers lt)"
LC="$(input_with '{"limits":{"maxToolCalls":1}}')"
"$ENGINE" start "$WF" --input @"$LC" --id lc --detach >/dev/null 2>&1 || true
wait_status lc completed 120
assert_contains "maxToolCalls: limit.exceeded" '"limit":"maxToolCalls"' "$(engine events lc --json | grep limit.exceeded)"
LTO="$(input_with '{"limits":{"timeoutSeconds":3}}')"
"$ENGINE" start "$WF" --input @"$LTO" --id lto --detach >/dev/null 2>&1 || true
wait_status lto completed 120
# where the three seconds run out (the sandbox's start, a tool, the approval
# wait) depends on the machine's speed; the end is the same wherever it is
assert_contains "timeoutSeconds: the session ends when its time runs out" '"limit":"timeoutSeconds"' \
  "$(engine events lto --json | grep limit.exceeded)"
assert_eq "with its partial result" limit "$(engine show lto --json | jget result.outcome)"
assert_eq "its sandbox is gone" 0 "$(containers lto)"
# the time runs out while a tool runs (sleep 600): the step is bounded by the
# session's time, so its timeout is that limit, not a failed session
LTS="$(input_with "{\"limits\":{\"timeoutSeconds\":10},\"model\":{\"name\":\"replay:$SRC/tests/fixtures/replay/slow_tool.jsonl\"}}")"
"$ENGINE" start "$WF" --input @"$LTS" --id lts --detach >/dev/null 2>&1 || true
wait_status lts completed 120
assert_eq "a tool outlives the time: the partial result" limit "$(engine show lts --json | jget result.outcome)"
assert_eq "limit.exceeded, once" 1 "$(engine events lts --json | grep -c '"limit":"timeoutSeconds"')"
if engine events lts --json | has_line '"type":"tool.requested"'; then
  assert_contains "the call says the time ran out under it" "the session's time ran out while the call ran" \
    "$(engine events lts --json | grep '"type":"tool.result"')"
else # a machine slow enough to spend the ten seconds before the call
  echo "# the time ran out before the call; tests/workflows/agent_session_test.lua covers the call's path"
fi
assert_eq "its sandbox is gone" 0 "$(containers lts)"

LTK="$(input_with '{"limits":{"maxTokens":3000}}')"
"$ENGINE" start "$WF" --input @"$LTK" --id ltk --detach >/dev/null 2>&1 || true
wait_status ltk completed 120
assert_contains "maxTokens: limit.exceeded" '"limit":"maxTokens"' "$(engine events ltk --json | grep limit.exceeded)"

LCO="$(input_with '{"limits":{"maxCostUsd":0.01},"model":{"prices":{"input":3,"output":15}}}')"
"$ENGINE" start "$WF" --input @"$LCO" --id lco --detach >/dev/null 2>&1 || true
wait_status lco completed 120
assert_contains "maxCostUsd with prices: limit.exceeded" '"limit":"maxCostUsd"' "$(engine events lco --json | grep limit.exceeded)"
assert_contains "the cost is reported" '"cost_usd"' "$(engine show lco --json)"

# --- kill -9 during a tool execution: the tool runs again, the session completes once
ST="$(input_with "{\"model\":{\"name\":\"replay:$T/rec/slow_tool.jsonl\"}}")"
"$ENGINE" start "$WF" --input @"$ST" --id st --detach >/dev/null 2>&1 || true
wait_true 30 'engine events st --json 2>/dev/null | has_line '\''"type":"tool.requested"'\''' || true
wait_true 60 'pgrep -f "sleep 3; echo slept" >/dev/null' # the shell command runs in the sandbox now
kill -9 "$S"; wait "$S" 2>/dev/null || true
bg S engine serve
wait_status st completed 120
assert_contains "resumed after the crash mid-tool" "slept" "$(engine events st --json | grep tool.result)"
assert_eq "one tool.requested, one tool.result in the stream" "1 1" \
  "$(engine events st --json | grep -c tool.requested) $(engine events st --json | grep -c tool.result)"
assert_eq "dense event stream" ok "$(engine events st --json | lua5.4 "$SRC/tests/integration/verify.lua" events >/dev/null && echo ok)"

# --- kill -9 during a model call (a slow local model server): the call is made again
python3 "$SRC/tests/model_server/server.py" --port 0 --port-file "$T/mport" --scenario <(echo \
  '{"steps":[{"hold":"mc","reply":{"text":"{\"summary\": \"answered by the slow model\", \"result\": {}}","usage":{"input_tokens":10,"output_tokens":5}}}],"default":{"reply":{"text":"{\"summary\": \"answered by the slow model\", \"result\": {}}","usage":{"input_tokens":10,"output_tokens":5}}}}') \
  >/dev/null 2>"$T/mserver.log" &
PIDS+=($!)
wait_true 30 '[ -s "$T/mport" ]' || true
MURL="http://127.0.0.1:$(cat "$T/mport")"
MC="$(input_with "{\"model\":{\"name\":\"m\",\"provider\":\"openai\",\"baseUrl\":\"http://127.0.0.1:$(cat "$T/mport")/v1\"}}")"
"$ENGINE" start "$WF" --input @"$MC" --id mc --detach >/dev/null 2>&1 || true
wait_true 30 'engine events mc --json 2>/dev/null | has_line '\''"RUNNING"'\''' || true
wait_true 60 '[ "$(model_health held)" -ge 1 ]' # the model call is in flight (held until released)
kill -9 "$S"; wait "$S" 2>/dev/null || true
release mc
bg S engine serve
wait_status mc completed 120
assert_eq "the session completed with the model's answer" "answered by the slow model" "$(engine show mc --json | jget result.summary)"
nreq="$(curl -sf "http://127.0.0.1:$(cat "$T/mport")/_requests" | lua5.4 -e 'print(#require"cjson".decode(io.read("a")))')"
assert_eq "the interrupted call was made again" 2 "$nreq"
assert_eq "one agent.message in the stream" 1 "$(engine events mc --json | grep -c agent.message)"

# --- a memory update is applied only after its approval, with provenance
printf '# Memory\n' >"$T/simple.md"
ME="$(input_with "{\"model\":{\"name\":\"replay:$T/rec/memory.jsonl\"},\"memoryFile\":\"$T/simple.md\"}")"
"$ENGINE" start "$WF" --input @"$ME" --id me --detach >/dev/null 2>&1 || true
wait_approval me 1
assert_eq "not applied before the approval" "# Memory" "$(cat "$T/simple.md")"
USER=reviewer approve_pending me >/dev/null 2>&1
wait_status me completed 60
assert_contains "applied after it" "the bucket must stay capped" "$(cat "$T/simple.md")"
assert_contains "with its provenance in the file" "approved by local:reviewer" "$(cat "$T/simple.md")"
assert_contains "and in the store" '"approver":"local:reviewer"' "$(engine events me --json | grep memory.updated)"

# --- history stays linear: 200 turns over a large context
big="$(head -c 200000 /dev/zero | tr '\0' 'c')"
mk_long() { input_with "{\"model\":{\"name\":\"replay:$T/rec/long.jsonl\"},\"permissions\":{\"tools\":[\"read_file\"]},\"skills\":[],\"context\":{\"text\":\"$big\",\"files\":[]},\"limits\":{\"maxModelTurns\":$1,\"maxToolCalls\":1000,\"timeoutSeconds\":3600}}"; }
"$ENGINE" start "$WF" --input @"$(mk_long 50)" --id long50 --detach >/dev/null 2>&1 || true
"$ENGINE" start "$WF" --input @"$(mk_long 300)" --id long200 --detach >/dev/null 2>&1 || true
wait_status long50 completed 300
wait_status long200 completed 600
b50="$(engine history long50 --json | wc -c)"; b200="$(engine history long200 --json | wc -c)"
echo "# history bytes: 50 turns $b50, 200 turns $b200 (the 200 KB context is stored once)"
[ "$b200" -lt $((b50 * 6)) ] && pass "history grows linearly with turns ($b50 -> $b200)" ||
  fail "history grows faster than linearly: $b50 -> $b200"
[ "$b200" -lt 4000000 ] && pass "the context is not copied into every turn" || fail "history of 200 turns is $b200 bytes"
kill "$S"; wait "$S" 2>/dev/null || true
finish
