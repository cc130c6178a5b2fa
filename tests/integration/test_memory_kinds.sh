#!/usr/bin/env bash
# Memory by kind (docs/memory.md), end to end with the local model server and
# the real sandbox: a knowledge entry one session proposes and a person
# approves is in the next session's context with its provenance; a refused
# proposal is not; a revoked entry is given to no later session. Preferences
# are the starter identity's. kill -9 while a proposal waits for its
# approval, and after the approval before the call's result is recorded: the
# entry is stored exactly once. Hostile proposals and revocations are
# refused, each with its reason. ENGINE_TEST_STORE=postgres runs it on
# PostgreSQL.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
if [ "${ENGINE_TEST_STORE:-}" = postgres ]; then
  own_pg_cluster
  export ENGINE_DB="$URL"
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

serve_bg

# --- one session proposes a fact (approved), a preference (approved) and
# another fact (refused); the engine is killed while the first waits
scenario '{"steps":['"$(propose knowledge "$FACT" "ops/README.md line 3"),$(propose preferences "$PREF"),$(propose knowledge "$CHEESE"),$(answer proposed)"'],"default":'"$(answer done)"'}'
"$ENGINE" start "$WF" --input @"$(input a '["instructions"]')" --id mem-a --detach >/dev/null 2>&1 || true
wait_approval mem-a 1
assert_eq "nothing stored before the approval" 0 "$(stored_rows "$FACT")"
kill -9 "$S"; wait "$S" 2>/dev/null || true
serve_bg
USER=alice approve_pending mem-a --reason "checked the bucket" >/dev/null 2>&1
wait_approval mem-a 2
USER=alice approve_pending mem-a >/dev/null 2>&1
wait_approval mem-a 3
USER=alice approve_pending mem-a --deny --reason "not a fact" >/dev/null 2>&1
wait_status mem-a completed 120
assert_eq "the approved fact is stored once" 1 "$(stored_rows "$FACT")"
assert_eq "the refused one is not stored" 0 "$(stored_rows "$CHEESE")"
ev="$(engine events mem-a --json)"
stored="$(grep '"type":"memory.stored"' <<<"$ev" | head -1)"
assert_contains "memory.stored names the approver" '"approver":"local:alice"' "$stored"
assert_contains "and the session" '"session_id":"mem-a"' "$stored"
assert_contains "and the evidence" 'ops/README.md line 3' "$stored"
assert_eq "two entries stored (events)" 2 "$(grep -c '"type":"memory.stored"' <<<"$ev")"
assert_contains "the refusal is recorded" '"approved":false' "$(grep '"type":"approval.decided"' <<<"$ev" | tail -1)"
FACT_ID="$(jget payload.id <<<"$stored")"

finish
