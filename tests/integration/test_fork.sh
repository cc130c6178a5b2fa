#!/usr/bin/env bash
# engine fork and POST /v1/workflows/{id}/fork (docs/forking.md): a new
# workflow from a point of another's history, which runs on live from there.
#   - hello.lua forked at its approval.requested with an input patch: the
#     fork's events up to the point are the source's, the patch changes how it
#     ends (a timeout), a signalled fork ends as its signal says; the source's
#     history, events and row are byte for byte what they were
#   - a patch or a script that makes the copied history replay differently is
#     refused naming the event; a script that does not is the fork's code
#   - a fork of a fork; a source that continued as new is forked in the run
#     that recorded the point; engine replay of every fork is clean
#   - the API's status codes, table-driven; a retry of the same request
#   - crash safety: kill -9 at the fork's crash points and at random moments
#     of many forks: each fork is whole or absent, never half written
#   - hash chains: every fork's are its own (a link hashes its workflow's
#     id) and verify, its source's still verify; a source whose log is
#     damaged is never forked (refused naming its first bad seq, exit 2 and
#     the API's 500, nothing written)
#   - migrate brings a database from before forked_from and the hash chains
#     up to date (a fork of a source whose events predate the chain builds
#     its own whole chain); with no worker running a fork runs in the
#     foreground
#   - an agent session (Docker sandbox, the local model server) forked
#     --turn 1 with another model and policy set: its transcript's prefix is
#     the source's, it calls the model again (with the fork's model), the
#     new policies decide, it never uses the source's sandbox; a fork of that
#     fork --turn 2 replays the first fork's turns and keeps its model
source "$(dirname "$0")/lib.sh"
HELLO="$SRC/workflows/hello.lua"
WF="$SRC/tests/integration/wf"
cd "$T"

count_rows() { # ID: its rows in every table a fork writes
  echo "$(sql "SELECT count(*) FROM workflows WHERE id='$1'") $(sql "SELECT count(*) FROM history WHERE wf_id='$1'") $(sql "SELECT count(*) FROM domain_events WHERE session_id='$1'") $(sql "SELECT count(*) FROM tasks WHERE wf_id='$1'")"
}

serve_api
export HELLO_SIDE_EFFECTS="$T/hello-effects"

# ---------------------------------------------------------------- hello.lua
"$ENGINE" start "$HELLO" --id src --detach --input '{"name":"Ada","n":2,"sleep":0.1,"approval_timeout":3600}' >/dev/null 2>&1 || true
wait_status src waiting:signal 30 || fail "the source never waited for its approval"
AT="$(seq_of src approval.requested)"
assert_eq "the source asked for approval at its 4th event" 4 "$AT"
engine signal src approval '{"approved":true}' >/dev/null
wait_status src completed 30 || fail "the source never completed"
assert_eq "the source approved" true "$(engine show src --json | jget result.approved)"
BEFORE="$(rows_of src)"

# --- the patch changes how it ends: the approval times out
assert_exit "fork --at the approval with an input patch" 3 engine fork src --at "$AT" --id f-timeout \
  --input-patch '{"approval_timeout":1}' --detach
assert_eq "--detach prints the fork's id" f-timeout "$OUT"
assert_contains "and says where it forked" "forked src at #4 (run 1" "$ERR"
wait_status f-timeout completed 60 || fail "f-timeout never completed"
res="$(engine show f-timeout --json)"
assert_eq "the patched input is the fork's" 1 "$(jget input.approval_timeout <<<"$res")"
assert_eq "its approval timed out" false "$(jget result.approved <<<"$res")"
assert_contains "as its event says" '"reason":"timed out"' "$(engine events f-timeout --json | grep approval.decided)"
assert_eq "its events up to the point are the source's" "$(events_upto src "$AT")" "$(events_upto f-timeout "$AT")"
forked="$(engine events f-timeout --json | sed -n "$((AT + 1))p")"
assert_contains "then who forked it" '"type":"session.forked"' "$forked"
assert_contains "by whom" '"by":"local:' "$forked"
assert_contains "from where" '"from":"src"' "$forked"
assert_eq "forked_from in show --json" "src 1 4" \
  "$(jget forked_from.id <<<"$res") $(jget forked_from.run <<<"$res") $(jget forked_from.seq <<<"$res")"
assert_contains "and in show" "forked:    from src at #4 (run 1" "$(engine show f-timeout)"

# --- a signalled fork ends as its signal says (the source approved)
assert_exit "a second fork of the same point" 3 engine fork src --at "$AT" --id f-sig \
  --input-patch '{"approval_timeout":600}' --detach
wait_status f-sig waiting:signal 30 || fail "f-sig never waited for its approval"
assert_exit "signal the fork" 0 engine signal f-sig approval '{"approved":false}'
wait_status f-sig completed 30 || fail "f-sig never completed"
assert_eq "the fork's result differs as its signal says" false "$(engine show f-sig --json | jget result.approved)"
assert_eq "its input is patched" 600 "$(engine show f-sig --json | jget input.approval_timeout)"

# --- refused: a patch or a script that does not replay the copied history
assert_exit "a patch the history does not replay with" 2 engine fork src --at "$AT" --id f-bad \
  --input-patch '{"name":"Bob"}' --detach
assert_contains "names the flag" "--input-patch" "$ERR"
assert_contains "and the event where it diverges" "non-determinism at event #3" "$ERR"
assert_eq "nothing was written" "0 0 0 0" "$(count_rows f-bad)"
mkdir -p "$T/wf2"
cp "$SRC/workflows/hello_activities.lua" "$T/wf2/"
sed 's/wf.emit("session.created"/wf.emit("session.begun"/' "$HELLO" >"$T/wf2/renamed.lua"
assert_exit "a script that diverges" 2 engine fork src --at "$AT" --id f-bad --script "$T/wf2/renamed.lua" --detach
assert_contains "names --script" "--script" "$ERR"
assert_contains "and the divergence" "non-determinism at event #3" "$ERR"
assert_contains "with its line" "renamed.lua:17" "$ERR"
assert_eq "nothing was written for it either" "0 0 0 0" "$(count_rows f-bad)"
# a change after the point replays: the fork runs the new code from there
sed 's/return { greetings = greetings, approved = decision.approved == true, summary = summary }/return { greetings = greetings, approved = decision.approved == true, summary = summary, v2 = true }/' \
  "$HELLO" >"$T/wf2/v2.lua"
assert_exit "a script that replays the copied history" 3 engine fork src --at "$AT" --id f-v2 --script "$T/wf2/v2.lua" --detach
engine signal f-v2 approval '{"approved":true}' >/dev/null 2>&1 || true
wait_status f-v2 completed 30 || fail "f-v2 never completed"
assert_eq "the fork ran the new code" true "$(engine show f-v2 --json | jget result.v2)"

# --- points that are not one
assert_exit "at beyond the last event" 2 engine fork src --at 99 --detach
assert_contains "says so" "#99 is beyond the last" "$ERR"
assert_exit "at 0" 2 engine fork src --at 0 --detach
assert_exit "both --at and --turn" 2 engine fork src --at 1 --turn 1 --detach
SENT="$(seq_of src signal.sent)"
assert_exit "a client's event is no fork point" 2 engine fork src --at "$SENT" --detach
assert_contains "names the one before it" "fork at #$AT" "$ERR"
assert_exit "--turn of a workflow with no model turns" 2 engine fork src --turn 1 --detach
assert_exit "an unknown source" 2 engine fork nosuch --at 1 --detach
assert_contains "is named" "unknown workflow 'nosuch'" "$ERR"
assert_exit "an id that exists" 2 engine fork src --at 1 --id f-sig --detach
assert_contains "is refused" "workflow 'f-sig' exists" "$ERR"
assert_exit "a made id" 3 engine fork src --at 1 --detach
assert_eq "is SOURCE.fork-N" src.fork-1 "$OUT"
assert_exit "the next one" 3 engine fork src --at 1 --detach
assert_eq "the next N" src.fork-2 "$OUT"

# --- a fork of a fork, from an event the first fork recorded live
DEC="$(seq_of f-sig approval.decided)"
assert_exit "fork a fork" 3 engine fork f-sig --at "$DEC" --id ff --detach
wait_status ff completed 30 || fail "ff never completed"
assert_eq "it ends as its source decided" false "$(engine show ff --json | jget result.approved)"
assert_eq "its events are its source's to the point" "$(events_upto f-sig "$DEC")" "$(events_upto ff "$DEC")"
assert_eq "which are src's to src's point" "$(events_upto src "$AT")" "$(events_upto ff "$AT")"

# --- a source that continued as new: the run that recorded the point
"$ENGINE" start "$WF/fork_cas.lua" --id cas --detach --input '{"to":2,"wait":3600}' >/dev/null 2>&1 || true
wait_status cas waiting:signal 30 || fail "cas never waited"
assert_eq "the source is in its third run" 3 "$(engine show cas --json | jget run)"
STEP2="$(engine events cas --json | grep '"type":"step"' | sed -n 2p | jget seq)"
assert_exit "fork the second run's step" 3 engine fork cas --at "$STEP2" --id cas-f --input-patch '{"tag":"forked"}' --detach
assert_eq "the fork continues run 2" 2 "$(engine show cas-f --json | jget forked_from.run)"
wait_status cas-f waiting:signal 30 || fail "cas-f never waited"
assert_eq "and continued as new itself" 3 "$(engine show cas-f --json | jget run)"
engine signal cas-f go '"now"' >/dev/null
wait_status cas-f completed 30 || fail "cas-f never completed"
assert_eq "with the patched input carried on" "forked 2 now" \
  "$(engine show cas-f --json | jget result.tag) $(engine show cas-f --json | jget result.n) $(engine show cas-f --json | jget result.go)"
assert_eq "its events from the first run are the source's" "$(events_upto cas "$STEP2")" "$(events_upto cas-f "$STEP2")"
engine signal cas go '"x"' >/dev/null

# --- replay of each fork is clean; the source never changed
for id in f-timeout f-sig f-v2 ff cas-f; do
  assert_exit "engine replay $id" 0 engine replay "$id"
done
assert_contains "replay says so" "ok: its pinned code replays" "$OUT"
assert_eq "the source's history, events and row are as they were" "$BEFORE" "$(rows_of src)"
# --- each fork's hash chains are its own and check, and so do its sources'
assert_exit "engine verify: the forks and their sources" 0 engine verify src f-timeout f-sig f-v2 ff cas cas-f
assert_contains "every one ok" "7 workflows checked: 7 ok, 0 BAD" "$OUT"
assert_eq "a fork's copied event has a link of its own" 1 \
  "$(sql "SELECT count(*) FROM history a JOIN history b ON b.run=a.run AND b.seq=a.seq WHERE a.wf_id='src' AND b.wf_id='f-sig' AND a.seq=2 AND a.chain<>b.chain AND a.payload=b.payload")"

# ------------------------------------------------------------------- the API
TOK="$(engine token create forker --scopes start,read 2>/dev/null)"
NOREAD="$(engine token create starter --scopes start 2>/dev/null)"
api_fork() { # WHAT STATUS SOURCE BODY [TOKEN]: POST .../fork, checks the status; the body in $BODY
  local tok="${5-$TOK}" code
  code="$(curl -s -o "$T/api.out" -w '%{http_code}' -X POST ${tok:+-H "Authorization: Bearer $tok"} \
    -H 'Content-Type: application/json' --data-binary "$4" "$URL/v1/workflows/$3/fork")"
  BODY="$(cat "$T/api.out")"
  assert_eq "POST fork: $1" "$2" "$code"
}
api_fork "bad JSON" 400 src '{"at":'
api_fork "an unknown field" 400 src '{"at":4,"colour":"red"}'
assert_contains "names it" "unknown field 'colour'" "$BODY"
api_fork "at beyond the last event" 400 src '{"at":1000}'
assert_contains "names the field" '"field":"at"' "$BODY"
api_fork "a negative at" 400 src '{"at":-1}'
api_fork "a fractional at" 400 src '{"at":1.5}'
api_fork "neither at nor turn" 400 src '{}'
api_fork "a patch that diverges" 400 src '{"at":4,"input_patch":{"name":"Bob"}}'
assert_contains "names input_patch" '"field":"input_patch"' "$BODY"
assert_contains "and the event" "event #3" "$BODY"
api_fork "policies over the API" 400 src '{"at":4,"policies":"/tmp"}'
api_fork "an unknown source" 404 nosuch '{"at":1}'
api_fork "an id that exists" 409 src '{"at":4,"id":"f-sig"}'
api_fork "no token" 401 src '{"at":4}' ""
api_fork "a token without read" 403 src '{"at":4}' "$NOREAD"
api_fork "a fork" 201 src '{"at":4,"id":"f-api","input_patch":{"approval_timeout":900}}'
assert_eq "answers the new workflow" f-api "$(jget id <<<"$BODY")"
assert_eq "forked from src" src "$(jget forked_from.id <<<"$BODY")"
assert_eq "by the token" token:forker "$(jget forked_from.by <<<"$BODY")"
assert_eq "patched" 900 "$(jget input.approval_timeout <<<"$BODY")"
api_fork "the same request again" 200 src '{"at":4,"id":"f-api","input_patch":{"approval_timeout":900}}'
api_fork "another request for that id" 409 src '{"at":4,"id":"f-api"}'
wait_status f-api waiting:signal 30 || fail "f-api never waited for its approval"
engine signal f-api approval '{"approved":true}' >/dev/null
wait_status f-api completed 30 || fail "f-api never completed"
assert_exit "engine replay f-api" 0 engine replay f-api
assert_exit "engine --server fork" 3 engine --server "$URL" --token "$TOK" fork src --at 4 --id f-cli --detach
assert_eq "prints its id" f-cli "$OUT"
assert_eq "the source is still as it was" "$BEFORE" "$(rows_of src)"

# ------------------------------------------------------------- crash safety
# the fork's own crash points: the process dies inside its transaction
for pt in fork.row:1 fork.copy:1 fork.done:1; do
  id="crash-${pt%%:*}"; id="${id//./-}"
  set +e
  ENGINE_CRASH="$pt" "$ENGINE" fork src --at 4 --id "$id" --detach >/dev/null 2>&1
  rc=$?
  set -e
  assert_eq "killed at $pt" 137 "$rc"
  assert_eq "no half of $id was written" "0 0 0 0" "$(count_rows "$id")"
done
# kill -9 at random moments of forks made one after another: each is whole or absent
whole=0 absent=0 broken=0
SRC_EVENTS="$(events_upto src "$AT")"
# the kills land anywhere in a fork's life: up to one and a half times as long as one takes here
t0="$(now_ms)"
"$ENGINE" fork src --at "$AT" --id k0 --detach >/dev/null 2>&1 || true
span=$(( ($(now_ms) - t0) * 3 / 2 + 1 ))
for i in $(seq 1 20); do
  id="k$i"
  "$ENGINE" fork src --at "$AT" --id "$id" --input-patch '{"approval_timeout":3600}' --detach >/dev/null 2>&1 &
  p=$!
  sleep "$(awk -v ms=$((RANDOM % span)) 'BEGIN { printf "%.3f", ms / 1000 }')"
  kill -9 "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
  c="$(count_rows "$id")"
  if [ "$c" == "0 0 0 0" ]; then
    absent=$((absent + 1))
  else
    set -- $c
    # whole: its row, its history to the point (or on from it: serve runs it), its events and a task or an end
    if [ "$1" == 1 ] && [ "$2" -ge 12 ] && [ "$3" -ge 5 ] && [ "$(events_upto "$id" "$AT")" == "$SRC_EVENTS" ] &&
       [ "$(engine show "$id" --json | jget forked_from.seq)" == 4 ]; then
      whole=$((whole + 1))
    else
      broken=$((broken + 1)); echo "# $id half written: $c"
    fi
  fi
done
echo "# kill -9 during forks: $whole whole, $absent absent"
assert_eq "no fork was half written" 0 "$broken"
assert_eq "the source is still as it was after the kills" "$BEFORE" "$(rows_of src)"
assert_exit "and every chain of the database verifies after the kills" 0 engine verify --all

# --- a source whose log is damaged is never forked: refused naming its first bad seq
"$ENGINE" start "$HELLO" --id dmg --detach --input '{"name":"Ada","n":2,"sleep":0.1,"approval_timeout":3600}' >/dev/null 2>&1 || true
wait_status dmg waiting:signal 30 || fail "dmg never waited for its approval"
sql "UPDATE history SET time = time + 1 WHERE wf_id='dmg' AND seq=2" >/dev/null
assert_exit "a fork of a damaged source" 2 engine fork dmg --at 4 --id f-dmg --detach
assert_contains "names its first bad seq" "the history of dmg is damaged: event #2 does not match its hash" "$ERR"
assert_eq "nothing of the fork was written" "0 0 0 0" "$(count_rows f-dmg)"
api_fork "a damaged source over the API" 500 dmg '{"at":4,"id":"f-dmg"}'
assert_contains "names it too" "event #2 does not match its hash" "$BODY"
assert_eq "still nothing written" "0 0 0 0" "$(count_rows f-dmg)"

# -------------------------------------------------------------------- migrate
kill "$S" 2>/dev/null || true; wait "$S" 2>/dev/null || true
if on_postgres; then old=7; else old=5; fi
# as an engine before forked_from and the hash chains left it
sql "DROP INDEX IF EXISTS workflows_forked; ALTER TABLE workflows DROP COLUMN forked_from; ALTER TABLE history DROP COLUMN chain;
  ALTER TABLE domain_events DROP COLUMN chain; DROP TABLE chain_heads;
  UPDATE meta SET value='$old' WHERE key='schema_version'" >/dev/null
for c in hist_from_run hist_from_seq dom_from; do
  sql "ALTER TABLE workflows DROP COLUMN $c" >/dev/null
done
assert_exit "migrate a database from before forked_from and the chains" 0 engine migrate --db "$ENGINE_DB"
if on_postgres; then new="$("$ENGINE" --version | sed -n 's/.*PostgreSQL \([0-9]*\).*/\1/p')"; has="$(sql "SELECT count(*) FROM information_schema.columns WHERE table_name IN ('workflows','history') AND column_name IN ('forked_from','chain')")"
else new="$("$ENGINE" --version | sed -n 's/.*SQLite \([0-9]*\).*/\1/p')"; has="$(sql "SELECT count(*) FROM pragma_table_info('workflows') WHERE name='forked_from'")$(sql "SELECT count(*) FROM pragma_table_info('history') WHERE name='chain'")"; fi
if on_postgres; then heads="SELECT count(*) FROM pg_tables WHERE tablename='chain_heads'"
else heads="SELECT count(*) FROM sqlite_master WHERE name='chain_heads'"; fi
assert_eq "with the hash chains' heads" 1 "$(sql "$heads")"
assert_eq "it is brought to its version" "$new" "$(sql "SELECT value FROM meta WHERE key='schema_version'")"
if on_postgres; then assert_eq "with the columns" 2 "$has"; else assert_eq "with the columns" 11 "$has"; fi
if on_postgres; then idx="$(sql "SELECT count(*) FROM pg_indexes WHERE indexname='workflows_forked'")"
else idx="$(sql "SELECT count(*) FROM sqlite_master WHERE type='index' AND name='workflows_forked'")"; fi
assert_eq "and the index of a workflow's forks" 1 "$idx"
assert_exit "and forks again" 3 engine fork src --at 4 --id after-migrate --detach
assert_exit "the fork of a source from before the chain has a whole chain of its own" 0 engine verify after-migrate src
assert_eq "every event of the fork checked" "true 0" \
  "$(engine verify after-migrate --json | jget ok) $(engine verify after-migrate --json | jget unchained)"
assert_contains "the source's older events counted, not checked" "before the chain" "$(engine verify src)"
# with no worker running, the fork runs in the foreground, as a start does
assert_exit "a fork in the foreground" 0 engine fork src --at 4 --id fg --input-patch '{"approval_timeout":1}'
assert_eq "prints its result" false "$(jget approved <<<"$OUT")"
assert_contains "its events on stderr, the copied ones first" "approval.requested" "$ERR"

# ------------------------------------------------------------ an agent session
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd): the agent session's fork is not checked"; finish
fi
AS="$SRC/workflows/agent_session.lua"
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_POLICIES_DIR="$T/policies" ENGINE_ARTIFACTS="$T/artifacts"
mkdir -p "$T/policies" "$T/noshell"
printf '%s\n' 'return { name = "all", decide = function() return "allow", "test" end }' >"$T/policies/00-all.lua"
printf '%s\n' 'return { name = "noshell", decide = function(req) if req.tool == "shell" then return "deny", "no shell in this fork" end end }' \
  >"$T/noshell/00-noshell.lua"
# the model's turns, in order, whoever asks: the source's two, the first fork's two, the second fork's one
call='{"reply": {"text": "", "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "echo hi > /workspace/output/a.txt"}}]}}'
answer() { printf '{"reply": {"text": "{\\"summary\\": \\"%s\\", \\"result\\": {}}"}}' "$1"; }
printf '{"steps": [%s, %s, %s, %s, %s]}' "$call" "$(answer source)" "$call" "$(answer fork)" "$(answer fork2)" >"$T/scenario.json"
start_model_server "$T/scenario.json"
printf '{"objective": "fork me", "permissions": {"tools": ["shell"]}, "limits": {"maxModelTurns": 10},
  "model": {"name": "m1", "provider": "openai", "baseUrl": "%s/v1"}}' "$MURL" >"$T/agent.json"
serve_bg
models() { curl -sf "$MURL/_requests" | lua5.4 -e 'local out = {}
  for _, r in ipairs(require"cjson".decode(io.read("a"))) do out[#out + 1] = r.body.model end
  io.write(table.concat(out, " "))'; }
"$ENGINE" start "$AS" --input @"$T/agent.json" --id a-src --detach >/dev/null 2>&1 || true
wait_status a-src completed 120 || fail "the agent session never completed"
assert_eq "the source's summary" source "$(engine show a-src --json | jget result.summary)"
assert_eq "two model turns" "m1 m1" "$(models)"
A_BEFORE="$(rows_of a-src)"
assert_exit "fork --turn 1 with another model and policy set" 3 engine fork a-src --turn 1 --id a-f \
  --model "{\"name\": \"m2\", \"provider\": \"openai\", \"baseUrl\": \"$MURL/v1\"}" --policies "$T/noshell" --detach
wait_status a-f completed 120 || fail "the fork never completed"
D="$(engine show a-f --json | jget forked_from.seq)"
types="$(engine events a-f --json | sed -n "$((D + 1)),$((D + 2))p" | sed 's/^{"session_id":"[^"]*","seq":[0-9]*,"type":"\([^"]*\)".*/\1/' | tr '\n' ' ')"
assert_eq "the fork starts just before the first model turn" "session.forked agent.message " "$types"
assert_eq "its transcript to there is the source's" "$(events_upto a-src "$D")" "$(events_upto a-f "$D")"
assert_eq "it called the model again, with its own model" "m1 m1 m2 m2" "$(models)"
assert_contains "its policies decided the tool call" "no shell in this fork" \
  "$(engine events a-f --json | grep '"type":"tool.result"')"
assert_contains "it never used its source's sandbox" "a fork does not use its source's sandbox" \
  "$(engine events a-f --json | grep artifact.skipped)"
assert_eq "its answer" fork "$(engine show a-f --json | jget result.summary)"
assert_exit "engine replay a-f" 0 engine replay a-f
# a fork of that fork, before its second turn: the first fork's turn and its decision replay
assert_exit "fork the fork --turn 2" 3 engine fork a-f --turn 2 --id a-ff --detach
wait_status a-ff completed 120 || fail "the fork of the fork never completed"
D2="$(engine show a-ff --json | jget forked_from.seq)"
assert_eq "its transcript to there is the first fork's" "$(events_upto a-f "$D2")" "$(events_upto a-ff "$D2")"
assert_eq "it called the model once more, with the first fork's model" "m1 m1 m2 m2 m2" "$(models)"
assert_eq "its answer" fork2 "$(engine show a-ff --json | jget result.summary)"
assert_exit "engine replay a-ff" 0 engine replay a-ff
assert_eq "the agent session's source is as it was" "$A_BEFORE" "$(rows_of a-src)"
finish
