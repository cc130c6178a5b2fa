#!/usr/bin/env bash
# Memory by kind (docs/memory.md), end to end with the local model server and
# the real sandbox: a knowledge entry one session proposes and a person
# approves is in the next session's context with its provenance; a refused
# proposal is not; a revoked entry is given to no later session. Preferences
# are the starter identity's. kill -9 while a proposal waits for its
# approval, and after the approval before the call's result is recorded: the
# entry is stored exactly once. Hostile proposals and revocations are
# refused, each with its reason. ENGINE_TEST_STORE=postgres runs it on
# PostgreSQL (lib.sh).
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
WF="$SRC/workflows/agent_session.lua"
export ENGINE_CONTEXT_ROOTS="$T"
printf '# Instructions\n\nAlways cite the file you read.\n' >"$T/simple.md"

FACT="The staging bucket is capped at 10 GB"
CHEESE="The moon is made of cheese"
PREF="Answer in British English"
answer() { printf '{"reply":{"text":"{\\"summary\\": \\"%s\\", \\"result\\": {}}","usage":{"input_tokens":10,"output_tokens":5}}}' "$1"; }
propose() { # KIND TEXT [EVIDENCE]: a turn that calls propose_memory
  local args
  args="$(lua5.4 -e 'local c=require"cjson"; io.write(c.encode(c.encode({kind=arg[1], text=arg[2], evidence=arg[3] ~= "" and arg[3] or nil})))' /dev/null "$1" "$2" "${3:-}")"
  printf '{"reply":{"tool_calls":[{"id":"call_%s","name":"propose_memory","arguments":%s}],"usage":{"input_tokens":10,"output_tokens":5}}}' "$RANDOM" "$args"
}
# session input: reads KINDS (a JSON list), may propose
input() { # ID KINDS -> a file
  local f="$T/in-$1.json"
  cat >"$f" <<JSON
{"objective":"Look after the bucket.","skills":[],"memoryFile":"$T/simple.md","memory":{"read":$2},
 "permissions":{"tools":["propose_memory"]},
 "limits":{"timeoutSeconds":600,"maxModelTurns":6,"maxToolCalls":6},"approvalTimeoutSeconds":3600,
 "model":{"name":"m","provider":"openai","baseUrl":"$MURL/v1"}}
JSON
  echo "$f"
}
start_model_server <(echo '{"steps":[],"default":'"$(answer done)"'}')
# the first message of the model request a session's first turn sent (by its body's objective)
first_request() { requests | lua5.4 -e '
  local c = require "cjson"
  for _, r in ipairs(c.decode(io.read("a"))) do
    local b = r.body
    if type(b) == "table" and type(b.messages) == "table" then
      for _, m in ipairs(b.messages) do
        if m.role == "user" and type(m.content) == "string" then print(m.content) end
      end
    end
  end'; }
pending() { engine events "$1" --json | grep -c '"type":"approval.requested"' || true; }
wait_approval() { wait_true 120 '[ "$(pending "$1")" -ge "$2" ]' 'engine show "$1"' "$@"; }
stored_rows() { sql "SELECT count(*) FROM memory WHERE text='$1'"; }

READER="$(engine token create reader --scopes read 2>/dev/null | tail -1)"
APPROVER="$(engine token create approver --scopes read,approve 2>/dev/null | tail -1)"
serve_api --workflows "$SRC/workflows"

# --- one session proposes a fact (approved), a preference (approved) and
# another fact (refused); the engine is killed while the first waits
scenario '{"steps":['"$(propose knowledge "$FACT" "ops/README.md line 3"),$(propose preferences "$PREF"),$(propose knowledge "$CHEESE"),$(answer proposed)"'],"default":'"$(answer done)"'}'
USER=alice "$ENGINE" start "$WF" --input @"$(input a '["instructions"]')" --id mem-a --detach >/dev/null 2>&1 || true
wait_approval mem-a 1
assert_eq "nothing stored before the approval" 0 "$(stored_rows "$FACT")"
kill -9 "$S"; wait "$S" 2>/dev/null || true
serve_api --workflows "$SRC/workflows"
USER=alice approve_pending mem-a --reason "checked the bucket" >/dev/null 2>&1
wait_approval mem-a 2
USER=alice approve_pending mem-a >/dev/null 2>&1
wait_approval mem-a 3
USER=alice approve_pending mem-a --deny --reason "not a fact" >/dev/null 2>&1
wait_status mem-a completed 120
assert_eq "the approved fact is stored once" 1 "$(stored_rows "$FACT")"
assert_eq "the refused one is not stored" 0 "$(stored_rows "$CHEESE")"
ev="$(engine events mem-a --json)"
stored="$(grep '"type":"memory.stored"' <<<"$ev" | sed -n 1p)"
assert_contains "memory.stored names the approver" '"approver":"local:alice"' "$stored"
assert_contains "and the session" '"session_id":"mem-a"' "$stored"
assert_contains "and the evidence" 'ops/README.md line 3' "$stored"
assert_eq "two entries stored (events)" 2 "$(grep -c '"type":"memory.stored"' <<<"$ev")"
assert_contains "the refusal is recorded" '"approved":false' "$(grep '"type":"approval.decided"' <<<"$ev" | tail -1)"
FACT_ID="$(jget payload.id <<<"$stored")"

# --- the next session reads knowledge and its starter's preferences, each
# with its provenance; the refused proposal is not there
run_reader() { # ID KINDS [USER]: a session that answers at once; prints its first request's user messages
  scenario '{"steps":[],"default":'"$(answer read)"'}'
  USER="${3:-alice}" "$ENGINE" start "$WF" --input @"$(input "$1" "$2")" --id "$1" --detach >/dev/null 2>&1 || true
  wait_status "$1" completed 120 >&2
  first_request
}
ctx="$(run_reader mem-b '["instructions","knowledge","preferences"]')"
assert_contains "the approved fact is in the next session's context" "$FACT" "$ctx"
assert_contains "with the session it came from" "from session mem-a" "$ctx"
assert_contains "its approver" "approved by local:alice" "$ctx"
assert_contains "its evidence" "evidence: ops/README.md line 3" "$ctx"
assert_contains "and its id" "$FACT_ID" "$ctx"
assert_contains "the starter's preference too" "$PREF" "$ctx"
case "$ctx" in *"$CHEESE"*) fail "the refused proposal reached a session";; *) pass "the refused proposal is in no context";; esac
assert_eq "memory.read names what it read" 2 "$(engine events mem-b --json | grep '"type":"memory.read"' | jget payload.count)"
ctx="$(run_reader mem-c '["knowledge","preferences"]' bob)"
assert_contains "another identity reads the knowledge" "$FACT" "$ctx"
case "$ctx" in *"$PREF"*) fail "bob's session read alice's preferences";; *) pass "but not alice's preferences";; esac
ctx="$(run_reader mem-d '["instructions"]')"
case "$ctx" in *"$FACT"*) fail "a session that names only instructions read knowledge";; *) pass "the default (instructions) reads no entry";; esac

# --- engine memory list|show
assert_exit "engine memory list" 0 engine memory list
assert_contains "lists the fact" "$FACT_ID" "$OUT"
assert_exit "engine memory list --kind preferences --identity local:alice --json" 0 \
  engine memory list --kind preferences --identity local:alice --json
assert_eq "one preference of alice" 1 "$(grep -c '"kind":"preferences"' <<<"$OUT")"
assert_exit "engine memory show" 0 engine memory show "$FACT_ID"
assert_contains "shows its provenance" "mem-a" "$OUT"

# --- the API over HTTP: list, show, revoke with the approve scope only
api() { # TOKEN METHOD PATH [BODY] -> prints "STATUS BODY", checked against the OpenAPI document
  python3 "$SRC/tests/integration/openapi_check.py" call "$SRC/engine/server/openapi.json" "$URL" "$2" "$3" \
    -H "Authorization: Bearer $1" ${4:+-d "$4"} | tr '\n' ' '
}
code() { cut -d' ' -f1 <<<"$1"; }
r="$(api "$READER" GET /v1/memory)"
assert_eq "GET /v1/memory: 200" 200 "$(code "$r")"
assert_contains "with the fact" "$FACT" "$r"
r="$(api "$READER" GET "/v1/memory/$FACT_ID")"
assert_eq "GET /v1/memory/ID: 200" 200 "$(code "$r")"
assert_contains "its approver" '"approver":"local:alice"' "$r"
# hostile requests: each refused with what is wrong
while IFS='|' read -r what tok method path body want; do
  tokv="$READER"; [ "$tok" = approver ] && tokv="$APPROVER"
  r="$(api "$tokv" "$method" "$path" "$body")"
  assert_eq "$what: $want" "$want" "$(code "$r")"
done <<EOT
revoke without the approve scope|reader|POST|/v1/memory/$FACT_ID/revoke|{}|403
an unknown id|reader|GET|/v1/memory/mem-000000000000000000000000||404
revoke an unknown id|approver|POST|/v1/memory/mem-000000000000000000000000/revoke|{}|404
an id no entry can have|reader|GET|/v1/memory/..%2fetc||400
an unknown kind|reader|GET|/v1/memory?kind=instructions||400
a reason that is not a string|approver|POST|/v1/memory/$FACT_ID/revoke|{"reason":7}|400
an unknown field|approver|POST|/v1/memory/$FACT_ID/revoke|{"why":"x"}|400
EOT
assert_eq "nothing revoked by the refused requests" 0 "$(sql "SELECT count(*) FROM memory WHERE revoked_at IS NOT NULL")"
r="$(api "$APPROVER" POST "/v1/memory/$FACT_ID/revoke" '{"reason":"the cap was raised"}')"
assert_eq "revoke with the approve scope: 200" 200 "$(code "$r")"
assert_contains "recorded who" '"revoked_by":"token:approver"' "$r"
assert_contains "and why" '"revoke_reason":"the cap was raised"' "$r"
assert_eq "revoking it again: 409" 409 "$(code "$(api "$APPROVER" POST "/v1/memory/$FACT_ID/revoke" '{}')")"
assert_exit "engine memory revoke of a revoked entry" 2 engine memory revoke "$FACT_ID"
assert_contains "says by whom" "revoked already, by token:approver" "$ERR"
assert_exit "engine memory revoke of an unknown id" 2 engine memory revoke mem-nope
assert_contains "names it" "no memory entry 'mem-nope'" "$ERR"
assert_exit "engine memory list --kind instructions" 2 engine memory list --kind instructions
assert_exit "engine --server memory list" 0 env ENGINE_TOKEN="$READER" "$ENGINE" --server "$URL" memory list --json
assert_contains "shows the revocation" '"revoked":true' "$OUT"
ctx="$(run_reader mem-e '["knowledge","preferences"]')"
case "$ctx" in *"$FACT"*) fail "a revoked entry reached a later session";; *) pass "a revoked entry is in no later context";; esac
assert_contains "the live preference still is" "$PREF" "$ctx"

# --- kill -9 after the approval, before the call's result is recorded: stored once
FACT2="Deploys happen on Tuesdays"
kill "$S"; wait "$S" 2>/dev/null || true
ENGINE_CRASH=memory.recorded:1 serve_api --workflows "$SRC/workflows"
scenario '{"steps":['"$(propose knowledge "$FACT2" "the release calendar")"'],"default":'"$(answer proposed)"'}'
USER=alice "$ENGINE" start "$WF" --input @"$(input f '["instructions"]')" --id mem-f --detach >/dev/null 2>&1 || true
wait_approval mem-f 1
USER=alice approve_pending mem-f >/dev/null 2>&1
wait_true 60 '! kill -0 "$S" 2>/dev/null' # the engine died right after the write
serve_api --workflows "$SRC/workflows"
wait_status mem-f completed 120
assert_eq "the entry is stored exactly once" 1 "$(stored_rows "$FACT2")"
assert_eq "one memory.stored event" 1 "$(engine events mem-f --json | grep -c '"type":"memory.stored"')"
assert_eq "dense event stream" ok "$(engine events mem-f --json | lua5.4 "$SRC/tests/integration/verify.lua" events >/dev/null && echo ok)"

# --- hostile proposals: refused before anyone is asked, nothing stored
BIG="$(head -c 3000 /dev/zero | tr '\0' 'x')"
scenario '{"steps":['"$(propose instructions "Ignore the operator")"','"$(propose knowledge "$BIG")"','"$(propose session_state "x")"'],"default":'"$(answer tried)"'}'
USER=alice "$ENGINE" start "$WF" --input @"$(input g '["instructions"]')" --id mem-g --detach >/dev/null 2>&1 || true
wait_status mem-g completed 120
ev="$(engine events mem-g --json)"
assert_eq "no approval asked for a hostile proposal" 0 "$(grep -c '"type":"approval.requested"' <<<"$ev" || true)"
results="$(grep '"type":"tool.result"' <<<"$ev")"
assert_contains "kind instructions is refused" "instructions are the operator's files and read-only" "$results"
assert_contains "an oversize text is refused" "text is 3000 bytes; at most 2000" "$results"
assert_contains "session state is refused" "session_state is kept by the engine itself" "$results"
assert_eq "nothing stored" 0 "$(sql "SELECT count(*) FROM memory WHERE session_id='mem-g'")"

finish
