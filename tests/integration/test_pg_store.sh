#!/usr/bin/env bash
# The engine on PostgreSQL (engine/store/pg.c): a private cluster
# (scripts/start-postgres) in the test's directory, a fresh database per case,
# real workflows through `engine start` and `engine serve`: activities,
# signals, timers, cancel, continue-as-new, futures (fanout, spawn), a kill -9
# of serve mid-run and the resume, each compared with the same workflow on a
# SQLite file (results and verify_history identical, list/show/history/events
# --json of the same shape); the worker lock; bad URLs; a newer schema.
source "$(dirname "$0")/lib.sh"
SQLITE_DB="$ENGINE_DB"
export TEST_SIDE_EFFECTS="$T/effects" HELLO_SIDE_EFFECTS="$T/hello_effects"
export ENGINE_DATA_DIR="$T/data" # files beside a URL's database (limits.lua, workspaces)
HELLO="$SRC/workflows/hello.lua"
WF="$SRC/tests/integration/wf"

own_pg_cluster
psql_on() { "$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U engine -d "$1" -Atqc "$2"; }
# fresh NAME: a new database NAME; ENGINE_DB points at it
fresh() {
  "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U engine "$1"
  export ENGINE_DB="postgres://engine@127.0.0.1:$PGPORT/$1"
}
on_sqlite() { export ENGINE_DB="$SQLITE_DB"; }
result() { engine show "$1" --json | jget "result${2:+.$2}"; }
serve() { "$ENGINE" serve 2>>"$T/serve.err" & S=$!; PIDS+=("$S"); }
stop_serve() { kill "$S" 2>/dev/null || true; wait "$S" 2>/dev/null || true; }
start() { "$ENGINE" start "$1" --id "$2" --detach --input "$3" >/dev/null 2>&1 || true; }
# the shape of a JSON document: every key path, sorted (values left out)
shape() {
  lua5.4 -e '
    local cjson = require "cjson"
    local seen = {}
    local function walk(v, path)
      if type(v) ~= "table" then seen[path] = true return end
      if #v > 0 or next(v) == nil then
        seen[path .. "[]"] = true
        if v[1] ~= nil then walk(v[1], path .. "[]") end
      else
        for k, x in pairs(v) do walk(x, path .. "." .. k) end
      end
    end
    for line in io.read("a"):gmatch("[^\n]+") do walk(cjson.decode(line), "") end
    local out = {}
    for k in pairs(seen) do out[#out + 1] = k end
    table.sort(out)
    print(table.concat(out, " "))'
}

# --- activities, a timer, a signal: a foreground start woken by `engine signal`
run_hello() {
  bg P engine start "$HELLO" --id h1 --input '{"name":"Ada","n":2}' >"$T/h1.out" 2>"$T/h1.err"
  wait_status h1 waiting:signal || fail "h1 never waited ($ENGINE_DB): $(cat "$T/h1.err")"
  wait_true 30 'engine history h1 | tail -1 | has_line SignalWaitStarted' 'engine history h1 | tail -3' || true
  engine signal h1 approval '{"approved":true}' >/dev/null
  set +e; wait "$P"; rc=$?; set -e
  echo "rc=$rc $(cat "$T/h1.out") $(verify_history h1) $(verify_events h1)"
}
on_sqlite
want="$(run_hello)"
fresh hello
got="$(run_hello)"
assert_contains "hello on SQLite completes" "rc=0" "$want"
assert_eq "hello on PostgreSQL: same exit, result, history and events as on SQLite" "$want" "$got"
assert_contains "the database is the URL's" "$PGPORT/hello" "$ENGINE_DB"
assert_eq "the rows are in PostgreSQL" "1" "$(psql_on hello "SELECT count(*) FROM workflows WHERE id='h1'")"
assert_eq "history rows in PostgreSQL" "$(engine history h1 --json | wc -l)" \
  "$(psql_on hello "SELECT count(*) FROM history WHERE wf_id='h1'")"

# --- list/show/history/events --json: the same shape as SQLite's
for cmd in "list" "show h1" "history h1" "events h1"; do
  on_sqlite; a="$(engine $cmd --json | shape)"
  export ENGINE_DB="postgres://engine@127.0.0.1:$PGPORT/hello"; b="$(engine $cmd --json | shape)"
  assert_eq "engine $cmd --json: the same shape on both stores" "$a" "$b"
done
assert_exit "completion reads the URL read-only" 0 engine __complete ids h
assert_contains "completion lists the workflow" "h1" "$OUT"

# --- continue-as-new
fresh can
out="$("$ENGINE" start "$WF/counter.lua" --id cnt --quiet --input '{"n":0,"to":3}')"
assert_eq "continue_as_new: the last run returns" '{"done":3,"run":4}' "$out"
assert_eq "continue_as_new: the last run's history" "events=4 activities_completed=1 open_commands=0 last=WorkflowCompleted" \
  "$(verify_history cnt)"
assert_contains "an earlier run ended with ContinuedAsNew" "ContinuedAsNew" "$(engine history cnt --run 2)"
assert_exit "replay of the current run" 0 engine replay cnt

# --- cancel while an activity runs, and while a timer waits
fresh cancel
serve
start "$WF/cancel_activity.lua" c2 '{}'
wait_true 30 'grep -Eq "^c2/([0-9]+/)?2 slow" "$T/effects" 2>/dev/null' || true
engine cancel c2 >/dev/null
wait_status c2 cancelled 10 || fail "c2: $(status c2)"
assert_contains "cleanup saw the Cancelled error" '"cleanup":"Cancelled"' "$(engine history c2 --json)"
start "$HELLO" c3 '{"n":1,"sleep":3600}'
wait_true 30 'engine history c3 | tail -1 | has_line TimerStarted' || true
engine cancel c3 >/dev/null
wait_status c3 cancelled 10 || fail "c3: $(status c3)"
assert_contains "a cancelled timer ends the run cancelled" "last=WorkflowCancelled" "$(verify_history c3)"

# --- the worker lock: workers share it (each workflow runs under its lease,
# test_pg_workers.sh); migrate needs it alone and is refused beside a serve
n_serving="$(grep -c "engine: serving" "$T/serve.err" || true)"
"$ENGINE" serve 2>>"$T/serve.err" & S2=$!; PIDS+=("$S2")
wait_serving "$T/serve.err" "$n_serving" || true
assert_eq "a second serve runs beside the first" "" "$(kill -0 "$S2" 2>&1)"
kill "$S2"; wait "$S2" 2>/dev/null || true
assert_exit "migrate is refused beside a serve" 2 env ENGINE_DB="${ENGINE_DB/engine@/engine:s3cret@}" \
  "$ENGINE" migrate --from "${ENGINE_DB/engine@/engine:s3cret@}" --to "$T/moved.db"
assert_contains "it names the holder" "engine serve (pid $S)" "$ERR"
assert_eq "the URL's password is not shown" "" "$(echo "$ERR" | grep -o s3cret || true)"
stop_serve

# --- futures: fanout and spawn, compared with SQLite
run_futures() {
  serve
  start "$WF/futures.lua" fan '{"mode":"fanout","n":3,"seconds":0.3}'
  start "$WF/futures.lua" sp '{"mode":"spawn"}'
  wait_status fan completed 30 || echo "fan: $(status fan)"
  wait_status sp completed 30 || echo "sp: $(status sp)"
  stop_serve
  echo "$(result fan results) $(verify_history fan) $(result sp | cut -c1-17) $(verify_history sp)"
}
on_sqlite; want="$(run_futures)"
fresh futures; got="$(run_futures)"
assert_contains "futures on SQLite" '[1,2,3] events=' "$want"
assert_eq "futures on PostgreSQL: results and histories as on SQLite" "$want" "$got"

# --- kill -9 of serve while two of three activities run, then resume
run_killed() {
  : >"$T/effects"
  rm -f "$T/gate"
  serve
  # the two windows end once $T/gate exists: after the kill and the restart
  start "$WF/futures.lua" mix "{\"mode\":\"mixed\",\"gate\":\"$T/gate\"}"
  wait_true 30 '[ "$(grep -c '\'' window-start'\'' "$T/effects")" -ge 2 ] && grep -q '\'' echo '\'' "$T/effects"' || true
  wait_true 30 'engine history mix | has_line ActivityCompleted' || true
  kill -9 "$S"; wait "$S" 2>/dev/null || true
  local ended; ended="$(grep -c ' window-end' "$T/effects" || true)"
  serve
  touch "$T/gate"
  wait_status mix completed 30 || echo "mix: $(status mix)"
  stop_serve
  echo "ended_before_kill=$ended $(result mix quick) $(result mix slow) echo_runs=$(grep -c ' echo ' "$T/effects")" \
    "$(verify_history mix)"
  engine replay mix >/dev/null 2>&1 && echo "replay ok"
}
on_sqlite; want="$(run_killed)"
fresh killed; got="$(run_killed)"
assert_contains "kill -9 on SQLite: resumed" "ended_before_kill=0 true [1,2] echo_runs=1" "$want"
assert_eq "kill -9 on PostgreSQL: resumed the same way as on SQLite" "$want" "$got"
[ -d "$T/data" ] && pass "ENGINE_DATA_DIR holds the files beside a URL's database" || fail "no $T/data"

# --- store faults: a write lock held longer than the busy timeout, and
# injected write failures (BEGIN and COMMIT among them): the batch is rolled
# back, the engine retries, each run completes once with dense streams
FWF="$WF/store_faults.lua"
F_HISTORY="events=13 activities_completed=3 open_commands=0 last=WorkflowCompleted"
F_RESULT='"result":{"c":7,"echo":1,"flaky":"ok after 2","slow":"slept"}'
check_faulted() {
  [ "$(status "$1")" == completed ] || { fail "$1 ($2) is $(status "$1")"; return; }
  [ "$(verify_history "$1")" == "$F_HISTORY" ] || fail "$1 ($2) history: $(verify_history "$1")"
  [ "$(verify_events "$1")" == "agent.message,agent.message" ] || fail "$1 ($2) events: $(verify_events "$1")"
  [[ "$(engine show "$1" --json)" == *"$F_RESULT"* ]] || fail "$1 ($2) result"
}
fresh faults
export ENGINE_NO_SWEEP=1 ENGINE_NO_POLICY_WATCH=1
# its slow step ends once the lock is taken (a gate the test opens), so the
# write of its end meets the lock however slow the machine is
start "$FWF" lk "{\"retry\":0.3,\"sleep\":0.5,\"gate\":\"$T/lk-gate\"}"
# the serve's busy timeout is 2 s whatever TEST_TIMEOUT_SCALE says: the lock is held longer
ENGINE_BUSY_TIMEOUT_MS=2000 "$ENGINE" serve 2>"$T/lock.err" & S=$!; PIDS+=("$S")
wait_true 30 '[ "$(engine history lk 2>/dev/null | wc -l)" -ge 3 ]' || true
# another session holds the event feed's order lock (the workflow's next
# write after its slow step is a domain event; the busy timeout is 2 s)
# until the serve says it cannot write, then lets go
psql_on faults "BEGIN; SELECT pg_advisory_xact_lock(1701734246, hashtext('')); SELECT pg_sleep($(scaled 120)); COMMIT;" \
  >/dev/null 2>&1 &
LOCKER=$!; PIDS+=("$LOCKER")
feed_lock_held() { psql_on faults "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
  AND classid = 1701734246 AND objid = hashtext('')::oid"; }
wait_true 60 '[ "$(feed_lock_held)" == 1 ]' || true
touch "$T/lk-gate"
wait_true 60 'grep -q "cannot write to the store" "$T/lock.err"' || true
psql_on faults "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()
  AND query LIKE '%pg_sleep%' AND pid <> pg_backend_pid()" >/dev/null
wait "$LOCKER" 2>/dev/null || true
wait_status lk completed 30 || true
# the recovery is told once the store has stayed writable a while: wait for it
wait_true 30 'grep -q "writable again" "$T/lock.err"' || true
stop_serve
assert_contains "the held lock is reported" "cannot write to the store" "$(cat "$T/lock.err")"
assert_contains "and the recovery" "the store is writable again" "$(cat "$T/lock.err")"
check_faulted lk "lock held"
cases=0
for n in 1 2 3 4 6 9 13 17; do
  id="inj$n"
  start "$FWF" "$id" '{}'
  ENGINE_STORE_FAIL="write:$n" "$ENGINE" serve 2>"$T/inject.err" & S=$!; PIDS+=("$S")
  wait_status "$id" completed 30 || true
  stop_serve
  grep -q "cannot write to the store" "$T/inject.err" || { fail "write:$n: no incident reported"; continue; }
  check_faulted "$id" "write:$n"
  cases=$((cases + 1))
done
assert_eq "every injected write failure recovered" 8 "$cases"
# --- the worker lock's check, sent in a batch's pipeline after its BEGIN,
# finds the lock not held (workerlock:N asks for a session holding nothing):
# that batch is refused and nothing of it is written (the history is exactly
# the expected one, each event once), the next batch asks again (with a
# round trip: the lock is held) and the workflow completes
cases=0
for n in 1 3 5; do
  id="wlk$n"
  start "$FWF" "$id" '{}'
  ENGINE_STORE_FAIL="workerlock:$n" "$ENGINE" serve 2>"$T/wlock.err" & S=$!; PIDS+=("$S")
  wait_status "$id" completed 30 || true
  stop_serve
  grep -q "no longer held it when the batch began" "$T/wlock.err" || { fail "workerlock:$n: the refused batch was not reported: $(tail -3 "$T/wlock.err")"; continue; }
  check_faulted "$id" "workerlock:$n"
  cases=$((cases + 1))
done
assert_eq "every batch refused by the worker lock's check left nothing" 3 "$cases"
unset ENGINE_NO_SWEEP ENGINE_NO_POLICY_WATCH

# --- the server restarts under a running serve: it reconnects and finishes
# the run; a second serve started right after the restart runs beside it,
# and each workflow runs on one of them (rs_after runs once, with a dense
# history)
fresh restart
export ENGINE_NO_SWEEP=1 ENGINE_NO_POLICY_WATCH=1
start "$FWF" rs '{"retry":0.3,"sleep":1.5,"slow":0.5}'
"$ENGINE" serve 2>"$T/rs1.err" & S1=$!; PIDS+=("$S1")
wait_true 30 '[ "$(engine history rs 2>/dev/null | wc -l)" -ge 3 ]' || true
"$SRC/scripts/start-postgres" --stop "$T/pg"
sleep 1 # the server stays down for a second (pacing the outage, not a wait)
[ "$("$SRC/scripts/start-postgres" "$T/pg")" == "$URL" ] && pass "the cluster restarts on its URL" || fail "restart: another URL"
"$ENGINE" serve 2>"$T/rs2.err" & S2=$!; PIDS+=("$S2")
wait_status rs completed 30 || fail "rs after the restart: $(status rs)"
# a new run: both serves see it, only the one holding the lock may write
start "$FWF" rs_after '{"retry":0.3,"sleep":0.2,"slow":0.2}'
wait_status rs_after completed 30 || fail "rs_after: $(status rs_after)"
# a serve takes its lock again at its next batch after the restart (its
# lease heartbeat makes one every few seconds when it has nothing else to do)
holders() {
  psql_on restart "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid=l.pid
    WHERE l.locktype='advisory' AND l.granted AND l.objid=1 AND a.datname='restart' ORDER BY 1" | tr '\n' ' '
}
wait_true 30 'holders="$(holders)"; [[ "$holders" == *"(pid $S1)"* && "$holders" == *"(pid $S2)"* ]]' || true
assert_contains "both serves hold the shared worker lock" "engine serve (pid $S1)" "$holders"
assert_contains "the second one too" "engine serve (pid $S2)" "$holders"
assert_contains "the first serve saw the server go" "cannot write to the store" "$(cat "$T/rs1.err")"
check_faulted rs "server restart"
check_faulted rs_after "after the restart"
kill "$S1" "$S2" 2>/dev/null || true; wait "$S1" "$S2" 2>/dev/null || true
unset ENGINE_NO_SWEEP ENGINE_NO_POLICY_WATCH

# --- the limits file of a URL's database is $ENGINE_DATA_DIR/limits.lua
export ENGINE_DB="postgres://engine@127.0.0.1:$PGPORT/hello"
mkdir -p "$ENGINE_DATA_DIR"
echo "quotas = { ['local:qa'] = { tokens_per_day = 150 } }" >"$ENGINE_DATA_DIR/limits.lua"
assert_exit "quota list on a URL" 0 engine quota list --json
assert_contains "reads the limits file in ENGINE_DATA_DIR" '"identity":"local:qa","limit":150' "$OUT"
rm "$ENGINE_DATA_DIR/limits.lua"

# --- bad URLs name the problem, never a password
export ENGINE_DB="postgres://engine:s3cret@127.0.0.1:1/engine"
assert_exit "a closed port" 2 engine list
assert_contains "names where it tried" "127.0.0.1:1" "$ERR"
assert_contains "and libpq's reason" "refused" "$ERR"
assert_eq "no password printed" "" "$(echo "$ERR" | grep -o s3cret || true)"
export ENGINE_DB="postgres://engine@127.0.0.1:$PGPORT/nosuchdb"
assert_exit "an unknown database" 2 engine list
assert_contains "names the database" 'database "nosuchdb" does not exist' "$ERR"
assert_exit "start on an unknown database" 2 engine start "$HELLO" --id x --detach
assert_contains "start names it too" "nosuchdb" "$ERR"

# --- a newer schema version is refused, nothing changed
fresh newer
assert_exit "create the schema" 3 engine start "$HELLO" --id n1 --detach --input '{"n":1,"sleep":3600}'
# an older one (5, before tasks_leased) is brought up to date by the next open
psql_on newer "UPDATE meta SET value='5' WHERE key='schema_version'; DROP INDEX tasks_leased; DROP INDEX workflows_parent; ALTER TABLE workflows DROP COLUMN forked_from; ALTER TABLE workflows DROP COLUMN parent_close; ALTER TABLE workflows DROP COLUMN parent; ALTER TABLE workflows DROP COLUMN hist_from_run, DROP COLUMN hist_from_seq, DROP COLUMN dom_from; DROP TABLE chain_heads; ALTER TABLE history DROP COLUMN chain; ALTER TABLE domain_events DROP COLUMN chain; ALTER TABLE tokens DROP COLUMN grants; DROP TABLE memory"
assert_exit "migrate --db applies what a version 5 schema lacks" 0 engine migrate --db "$ENGINE_DB"
CUR="$("$ENGINE" --version | sed -n 's/.*PostgreSQL \([0-9]*\).*/\1/p')"
assert_eq "and is brought to this engine's version ($CUR)" "$CUR" "$(psql_on newer "SELECT value FROM meta WHERE key='schema_version'")"
assert_eq "with the index version 6 adds" "1" "$(psql_on newer "SELECT count(*) FROM pg_indexes WHERE indexname='tasks_leased'")"
assert_eq "and the columns version 7 adds" "2" "$(psql_on newer "SELECT count(*) FROM information_schema.columns WHERE table_name='workflows' AND column_name IN ('parent','parent_close')")"
assert_eq "and the column version 8 adds" "1" "$(psql_on newer "SELECT count(*) FROM information_schema.columns WHERE table_name='workflows' AND column_name='forked_from'")"
assert_eq "and the hash chains' version 9 adds" "5 1" "$(psql_on newer "SELECT count(*) FROM information_schema.columns WHERE table_name IN ('workflows','history','domain_events') AND column_name IN ('hist_from_run','hist_from_seq','dom_from','chain')") $(psql_on newer "SELECT count(*) FROM pg_tables WHERE tablename='chain_heads'")"
assert_eq "the upgrade recorded: n1's chain starts at its next event" "1" "$(psql_on newer "SELECT count(*) FROM workflows WHERE id='n1' AND hist_from_seq=(SELECT max(seq)+1 FROM history WHERE wf_id='n1')")"
assert_eq "and the column version 10 adds" "1" "$(psql_on newer "SELECT count(*) FROM information_schema.columns WHERE table_name='tokens' AND column_name='grants'")"
assert_eq "and the index version 11 adds" "1" "$(psql_on newer "SELECT count(*) FROM pg_indexes WHERE indexname='workflows_forked'")"
assert_eq "and the table version 12 adds" "1" "$(psql_on newer "SELECT count(*) FROM pg_tables WHERE tablename='memory'")"
assert_exit "and it verifies" 0 engine verify --all
psql_on newer "UPDATE meta SET value='$((CUR + 1))' WHERE key='schema_version'"
assert_exit "a newer schema is refused" 2 engine list
assert_contains "with the version message" "has schema version $((CUR + 1)); this engine knows up to $CUR" "$ERR"
assert_exit "serve refuses it too" 2 timeout 10 "$ENGINE" serve
assert_contains "serve says why" "schema version $((CUR + 1))" "$ERR"
assert_eq "left as it was" "$((CUR + 1))" "$(psql_on newer "SELECT value FROM meta WHERE key='schema_version'")"

# --- a database with someone else's tables is not ours
fresh foreign
psql_on foreign "CREATE TABLE users(name TEXT)"
assert_exit "a foreign database is refused" 2 engine start "$HELLO" --id f1 --detach
assert_contains "as not an engine database" "not an engine database" "$ERR"
assert_eq "none of our tables added" "0" "$(psql_on foreign "SELECT count(*) FROM pg_tables WHERE tablename='workflows'")"

# --- the API's list on PostgreSQL (the web page's table): both orders, the cursor, the text filter
fresh pages
for i in 1 2 3; do start "$HELLO" "pg-$i" "{\"name\":\"Ada $i\",\"n\":1}"; sleep 0.01; done # paced: distinct creation times
: >"$T/serve-api.err"
"$ENGINE" serve --listen 127.0.0.1:0 --workflows "$SRC/workflows" 2>"$T/serve-api.err" & S=$!; PIDS+=("$S")
API="$(api_url "$T/serve-api.err")"
ids() { lua5.4 -e 'local c=require"cjson" local j=c.decode(io.read("a")) local t={} for _,w in ipairs(j.workflows) do t[#t+1]=w.id end io.write(table.concat(t," "),"|",j.next_cursor~=c.null and j.next_cursor or "")'; }
P1="$(curl -s "$API/v1/workflows?order=newest&limit=2" | ids)"
assert_eq "postgres: newest first" "pg-3 pg-2" "${P1%%|*}"
assert_eq "postgres: its cursor reads on" "pg-1" "$(curl -s --get --data-urlencode "cursor=${P1#*|}" "$API/v1/workflows?order=newest&limit=2" | ids | cut -d'|' -f1)"
assert_eq "postgres: oldest first by default" "pg-1 pg-2" "$(curl -s "$API/v1/workflows?limit=2" | ids | cut -d'|' -f1)"
assert_contains "postgres: the rows carry who started them (from the input)" '"started_by":"local:' "$(curl -s "$API/v1/workflows?limit=1&fields=session")"
assert_eq "postgres: the text filter" "pg-2" "$(curl -s "$API/v1/workflows?q=pg-2" | ids | cut -d'|' -f1)"
stop_serve
finish
