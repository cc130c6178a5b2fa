#!/usr/bin/env bash
# Design 1, one call (workflows/one_call.lua on lua/spine.lua), end to end:
# the shipped incident-triage example offline; bad input named; an invalid
# first answer repaired on the second (over the real OpenAI wire format too:
# the result schema as response_format, the violations sent back); an answer
# that never validates failing after its repairs, naming the violation; the
# artifacts of an earlier session as context; kill -9 at several points with
# the resumed run's result and events identical; engine replay in a fresh
# process; the events as the API serves them to the page.
source "$(dirname "$0")/lib.sh"
cd "$SRC" # the example's paths are relative to the repository
unset OPENAI_API_KEY ANTHROPIC_API_KEY # offline: the example's model.live stays unused
WF="$SRC/workflows/one_call.lua"
export ENGINE_CONTEXT_ROOTS="$SRC:$T" ENGINE_ARTIFACTS="$T/artifacts"
EXAMPLE="$SRC/examples/one-call.json"
# input_with OVERRIDES_JSON -> a file: the example with these overrides
input_with() {
  local f="$T/input-$RANDOM$RANDOM.json"
  printf '%s' "$1" >"$f.over"
  lua5.4 "$SRC/tests/integration/merge_json.lua" "$EXAMPLE" "@$f.over" >"$f"
  echo "$f"
}
# canon: JSON on stdin (one value a line) with its keys sorted, one a line
# (session_id and time left out: what differs between two runs of the same input)
canon() {
  lua5.4 -e '
    local cjson = require "cjson"
    local function enc(v)
      if type(v) ~= "table" then return cjson.encode(v) end
      if #v > 0 or next(v) == nil then
        local out = {}
        for i, x in ipairs(v) do out[i] = enc(x) end
        return "[" .. table.concat(out, ",") .. "]"
      end
      local keys = {}
      for k in pairs(v) do keys[#keys + 1] = k end
      table.sort(keys)
      local out = {}
      for _, k in ipairs(keys) do out[#out + 1] = cjson.encode(k) .. ":" .. enc(v[k]) end
      return "{" .. table.concat(out, ",") .. "}"
    end
    for line in io.lines() do
      local v = cjson.decode(line)
      if type(v) == "table" then v.time, v.session_id = nil, nil end
      print(enc(v))
    end'
}
# events_of ID: its domain events, canonical, one a line
events_of() { engine events "$1" --json | canon; }
types_of() { engine events "$1" --json | lua5.4 "$SRC/tests/integration/verify.lua" events; }
# recordings: one answer per line ({"turn": {...}}), as lua/runners/replay.lua reads them
answer() { # TEXT_JSON -> a recording line
  printf '%s' "$1" | lua5.4 -e 'local cjson = require "cjson"; print(cjson.encode({turn = {text = io.read("a"),
    usage = {input_tokens = 2500, output_tokens = 300}}}))'
}
json_string() { printf '%s' "$1" | lua5.4 -e 'print(require"cjson".encode(io.read("a")))'; }
GOOD='{"severity":"sev1","component":"checkout-api","summary":"POST /v1/checkout fails since 13:58Z: the pool change of v2.32.0 exhausts orders-db-primary connections.","next_steps":["Roll back checkout-api to v2.31.0"]}'
BAD1='{"severity":"critical","component":"checkout-api","summary":"checkout is failing because the database refuses new connections"}'
BAD2='```json
{"severity":"urgent","component":"","summary":"db","next_steps":[]}
```'
{ answer "$BAD1"; answer "$GOOD"; } >"$T/repair.jsonl"
{ answer "$BAD1"; answer "$BAD2"; answer "$BAD1"; } >"$T/never.jsonl"

# --- the shipped example, with the command the docs give
assert_exit "engine start workflows/one_call.lua --input @examples/one-call.json" 0 \
  engine start workflows/one_call.lua --input @examples/one-call.json --id ex --quiet
res="$(engine show ex --json | jget result)"
assert_eq "severity" "sev1" "$(jget result.severity <<<"$res")"
assert_contains "component" "checkout-api" "$(jget result.component <<<"$res")"
assert_contains "its summary cites the evidence" "db.pool.max_size from 40 to 120" "$(jget summary <<<"$res")"
assert_contains "next steps: the rollback first" "Roll checkout-api back" "$(jget result.next_steps <<<"$res")"
assert_eq "one model call, no repair" "1 0" "$(jget turns <<<"$res") $(jget repairs <<<"$res")"
assert_eq "its tokens" "3122" "$(jget tokens <<<"$res")"
assert_eq "the stream: the spine's events and the design's" \
  "session.created,session.status,context.built,session.status,agent.message,artifact.saved,session.completed" \
  "$(types_of ex)"
ctx="$(engine events ex --json | grep '"context.built"')"
assert_contains "the context: the five files of the bundle" '"files":5' "$ctx"
assert_contains "each named" "incident/postgres.log" "$ctx"
sha="$(jget artifacts.1.sha256 <<<"$res")"
assert_eq "result.json kept as an artifact: the result" "$(jget result <<<"$res" | canon)" "$(canon <"$T/artifacts/$sha")"
assert_exit "engine replay ex (a fresh process)" 0 engine replay ex
assert_contains "replays and returns the same result" "returns the same result" "$OUT"

# --- bad input: every problem named, exit 2, nothing called
BAD="$(input_with '{"objective":" ","resultSchema":{"type":"object","anyOf":[]},"colour":"red","limits":{"maxRepairs":11},"context":{"files":["/etc/passwd","examples/nope"],"artifacts":[{"path":"x"}]}}')"
assert_exit "invalid input is refused" 2 engine start "$WF" --input @"$BAD" --id bad --quiet
for p in "objective is missing" "unknown field 'colour'" "limits.maxRepairs must be a whole number from 0 to 10" \
         "/etc/passwd is outside the allowed roots" "context file examples/nope does not exist" \
         "each entry needs sessions" "anyOf"; do
  assert_contains "names: $p" "$p" "$ERR"
done
assert_exit "no resultSchema" 2 engine start "$WF" --input '{"objective":"x","model":{"name":"replay:x"}}' --id bad2 --quiet
assert_contains "names it" "resultSchema is missing" "$ERR"

# --- an invalid first answer, repaired on the second
REP="$(input_with "{\"model\":{\"name\":\"replay:$T/repair.jsonl\"}}")"
assert_exit "repaired" 0 engine start "$WF" --input @"$REP" --id rep --quiet
res="$(engine show rep --json | jget result)"
assert_eq "two calls, one repair" "2 1" "$(jget turns <<<"$res") $(jget repairs <<<"$res")"
assert_eq "the second answer is the result" "sev1" "$(jget result.severity <<<"$res")"
inv="$(engine events rep --json | grep '"result.invalid"')"
assert_contains "result.invalid names the enum violation" "result.severity" "$inv"
assert_contains "and the missing field" "next_steps" "$inv"
assert_eq "the stream" "session.created,session.status,context.built,session.status,agent.message,result.invalid,session.status,agent.message,artifact.saved,session.completed" \
  "$(types_of rep)"
assert_contains "the repair message tells the model the violations" "Your answer does not match the result schema" \
  "$(engine history rep --json | grep CheckpointRecorded | tail -1)"

# --- an answer that never validates: fails after maxRepairs, naming the violation
NEV="$(input_with "{\"model\":{\"name\":\"replay:$T/never.jsonl\"}}")"
assert_exit "never valid: the session fails" 1 engine start "$WF" --input @"$NEV" --id nev --quiet
err="$(engine show nev --json | jget error)"
assert_eq "InvalidResult" "InvalidResult" "$(jget type <<<"$err")"
assert_contains "after its 2 repairs" "after 2 repairs" "$(jget message <<<"$err")"
assert_contains "naming the violation" "result.severity" "$(jget message <<<"$err")"
assert_contains "session.failed says it" "does not match the result schema after 2 repairs" \
  "$(engine events nev --json | grep session.failed)"
assert_eq "three calls, no more" 3 "$(engine events nev --json | grep -c '"agent.message"')"
assert_eq "nothing kept" 0 "$(engine events nev --json | grep -c '"artifact.saved"' || true)"
NEV0="$(input_with "{\"model\":{\"name\":\"replay:$T/never.jsonl\"},\"limits\":{\"maxRepairs\":0}}")"
assert_exit "maxRepairs 0: one call" 1 engine start "$WF" --input @"$NEV0" --id nev0 --quiet
assert_contains "fails after 0 repairs" "after 0 repairs" "$(engine show nev0 --json | jget error.message)"

# --- the artifacts of earlier sessions as context
Q="$(input_with '{"context":{"files":[],"artifacts":[{"sessions":["ex","rep"],"path":"*.json","latest":1}]}}')"
assert_exit "a query against earlier sessions' artifacts" 0 engine start "$WF" --input @"$Q" --id q1 --quiet
ctx="$(engine events q1 --json | grep '"context.built"')"
assert_contains "one artifact (latest 1: rep's)" '"artifacts":1' "$ctx"
assert_contains "named by its session" '"session":"rep"' "$ctx"
assert_contains "its content is in the model's message" "Artifact result.json of session rep" \
  "$(engine history q1 --json | grep CheckpointRecorded | grep message)"
Q2="$(input_with '{"context":{"artifacts":[{"sessions":["no-such-session"]}]}}')"
assert_exit "a query naming no session fails" 1 engine start "$WF" --input @"$Q2" --id q2 --quiet
assert_contains "naming it" "there is no session no-such-session" "$(engine show q2 --json | jget error.message)"

# --- the real wire format: the schema as response_format, the violations sent back
cat >"$T/scenario.json" <<EOF
{"steps": [{"reply": {"text": $(json_string "$BAD1"), "usage": {"input_tokens": 900, "output_tokens": 40}}},
           {"reply": {"text": $(json_string "$GOOD"), "usage": {"input_tokens": 1000, "output_tokens": 60}}}]}
EOF
start_model_server "$T/scenario.json"
WIRE="$(input_with "{\"model\":{\"name\":\"gpt-test\",\"provider\":\"openai\",\"baseUrl\":\"$MURL/v1\"}}")"
assert_exit "over OpenAI Chat Completions" 0 engine start "$WF" --input @"$WIRE" --id wire --quiet
reqs="$(requests)"
assert_eq "two requests" 2 "$(nreq)"
assert_eq "the result schema as response_format" "json_schema" "$(jget 1.body.response_format.type <<<"$reqs")"
assert_eq "its schema" "sev1" "$(jget 1.body.response_format.json_schema.schema.properties.severity.enum.1 <<<"$reqs")"
assert_contains "the second request sends the violation back" "result.severity" "$(jget 2.body.messages <<<"$reqs")"
assert_contains "after the first answer" "critical" "$(jget 2.body.messages <<<"$reqs")"
assert_eq "the result" "sev1" "$(engine show wire --json | jget result.result.severity)"

# --- kill -9 at several points of the repaired run: the same result and events
want_res="$(engine show rep --json | jget result | canon)"
want_ev="$(events_of rep)"
n=0
# the prepare, the context, each model call and the persist: before they run,
# after they ran and before their record, around commits and appends
for pt in activity.start:1 activity.record:1 commit.after:3 activity.record:3 append:12 activity.start:4 \
    activity.record:5 commit.after:5; do
  n=$((n + 1))
  id="k$n"
  # (in a subshell: the shell's "Killed" line goes with its stderr)
  rc="$( (ENGINE_CRASH="$pt" "$ENGINE" start "$WF" --input @"$REP" --id "$id" --quiet >/dev/null 2>"$T/crash.err"
    echo $?) 2>/dev/null)"
  [ "$rc" == 137 ] || fail "$pt: the engine was not killed there (exit $rc: $(tail -2 "$T/crash.err"))"
  tries=0
  while [ "$(status "$id")" != completed ] && [ $tries -lt 3 ]; do
    tries=$((tries + 1))
    "$ENGINE" start "$WF" --id "$id" --quiet >/dev/null 2>"$T/resume.err" || true
  done
  assert_eq "kill -9 at $pt: completed" completed "$(status "$id")"
  assert_eq "kill -9 at $pt: the same result" "$want_res" "$(engine show "$id" --json | jget result | canon)"
  assert_eq "kill -9 at $pt: the same events" "$want_ev" "$(events_of "$id")"
  h="$(verify_history "$id" 2>&1)"
  assert_contains "kill -9 at $pt: each step once" "open_commands=0 last=WorkflowCompleted" "$h"
  assert_exit "kill -9 at $pt: engine replay" 0 engine replay "$id"
done

# --- the events as the page reads them (the API), and how the page shows the new kinds
TOK="$(engine token create reader --scopes read 2>/dev/null)"
serve_api
page="$(curl -sf -H "Authorization: Bearer $TOK" "$URL/v1/workflows/rep/events?after=0")"
for ty in context.built result.invalid agent.message artifact.saved session.completed; do
  assert_contains "GET .../events has $ty" "\"$ty\"" "$page"
done
kinds="$(curl -sf "$URL/web/event_kinds.json")"
assert_contains "the page draws context.built" '"context.built"' "$kinds"
assert_contains "and result.invalid" '"result.invalid"' "$kinds"
arts="$(curl -sf -H "Authorization: Bearer $TOK" "$URL/v1/workflows/ex/artifacts")"
assert_contains "GET .../artifacts lists result.json" "result.json" "$arts"
kill "$S"; wait "$S" 2>/dev/null || true

finish
