#!/usr/bin/env bash
# One dispatch acts on many due tasks together on PostgreSQL: their lease
# claims, takes, rows and histories go in one round trip (store_task_start).
# N workflows each wait on a timer and a signal whose timeout falls at the
# same moment, so each has two tasks due in one dispatch; half of them are
# signalled about then (racing the timeout), and the serve is killed with -9
# in the middle of it and started again. Every workflow completes with a
# result that agrees with its log, each command has exactly one outcome,
# every history is dense, and no task or lease is left. Then a serve drains
# chain10 workflows and its loop's waits for the database
# (engine_store_round_trips_total) stay under two per workflow (each
# workflow has a dozen reads: before, each of them was one).
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf"
# (150: a dispatch still finds many workflows' tasks due at once; 300 cost
# twice the CPU, a process and a PostgreSQL backend per start)
if [ "${ENGINE_SANITIZED:-0}" = 1 ]; then N=100 SECS=6; else N=150 SECS=4; fi
export ENGINE_NO_SWEEP=1 ENGINE_NO_POLICY_WATCH=1 ENGINE_DATA_DIR="$T/data" ENGINE_BUSY_TIMEOUT_MS=30000
export ENGINE_LEASE_MS=3000
own_pg_cluster
q() { "$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U engine -d "$DBNAME" -XAtq -c "$1"; }

# ---- two tasks of each workflow due at once, signals racing them, a kill ----
# Each workflow's timer counts from its own first step: when the serve takes
# longer than SECS to bring all N to their wait (a busy machine), the first
# ones end before the last ones wait. Then the set-up is made again, on a
# fresh database, with SECS doubled.
for attempt in 1 2 3 4; do
  DBNAME="due$attempt"
  "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U engine "$DBNAME"
  export ENGINE_DB="postgres://engine@127.0.0.1:$PGPORT/$DBNAME"
  : >"$T/start.err"
  seq "$N" | xargs -P 8 -I{} "$ENGINE" start "$WF/due_together.lua" --id "d-{}" --detach \
    --input "{\"seconds\":$SECS,\"k\":{}}" >/dev/null 2>>"$T/start.err" || true
  assert_eq "every start accepted" "" "$(cat "$T/start.err")"
  bg S engine serve 2>>"$T/serve1.err"
  # until all wait, or one has gone past its wait (the set-up did not hold);
  # what the checks below assert is read in that same query (one snapshot),
  # since a moment later, on a busy machine, the first deadline may be past
  wait_true 120 'read -r waiting past pairs gap due_at < <(q "SELECT count(*) FILTER (WHERE status='\''waiting'\''),
    count(*) FILTER (WHERE status IN ('\''completed'\'','\''failed'\''))
      + (SELECT count(*) FROM history WHERE type IN ('\''TimerFired'\'','\''SignalTimedOut'\'')),
    (SELECT count(*) FROM (SELECT wf_id FROM tasks GROUP BY wf_id HAVING count(*)=2) x),
    (SELECT max(d) FROM (SELECT max(run_at)-min(run_at) d FROM tasks GROUP BY wf_id) x),
    (SELECT min(run_at) FROM tasks) FROM workflows" | tr "|" " ")
    [ "$waiting" = "$N" ] || [ "${past:-0}" -gt 0 ]' || true
  [ "$waiting" = "$N" ] && [ "${past:-0}" = 0 ] && break
  echo "# attempt $attempt: $waiting of $N waiting when a deadline of ${SECS} s passed; again with $((SECS * 2)) s"
  kill -9 "$S"; wait "$S" 2>/dev/null || true
  SECS=$((SECS * 2))
done
assert_eq "all $N wait on their timer and signal" "$N" "$waiting"
# each deadline is the clock when it was recorded: the two are a few ms apart
# (more on a busy machine), which is how far apart the dispatches may take them
assert_eq "two tasks each" "$N" "$pairs"
echo "# a workflow's two deadlines at most ${gap} ms apart"
now_ms() { date +%s%3N; }
while [ "$(now_ms)" -lt $((due_at - 300)) ]; do sleep 0.05; done # the wall clock to a time (no engine state), polled
# the even ones are signalled around the deadline; the serve dies half-way through
for i in $(seq 2 2 "$N"); do
  "$ENGINE" signal "d-$i" go "{\"k\":$i}" >/dev/null 2>&1 &
  if [ "$i" = $((N / 2)) ]; then kill -9 "$S"; fi
done
wait_signals() { for p in $(jobs -p); do [ "$p" = "$S" ] || wait "$p" 2>/dev/null || true; done; }
wait_signals
bg S engine serve 2>>"$T/serve2.err"
wait_true 120 '[ "$(q "SELECT count(*) FROM workflows WHERE status='\''completed'\''")" = "$N" ]' || true
assert_eq "all $N completed after the kill" "$N" "$(q "SELECT count(*) FROM workflows WHERE status='completed'")"
assert_eq "each command has exactly one outcome" "0" "$(q "SELECT count(*) FROM (SELECT wf_id, run, ref FROM history
  WHERE ref>0 GROUP BY 1,2,3 HAVING count(*)<>1) x")"
assert_eq "every command of every run answered" "0" "$(q "SELECT count(*) FROM history c WHERE c.type IN
  ('TimerStarted','SignalWaitStarted','ActivityScheduled') AND NOT EXISTS (SELECT 1 FROM history o WHERE
  o.wf_id=c.wf_id AND o.run=c.run AND o.ref=c.seq)")"
assert_eq "every history is dense" "0" "$(q "SELECT count(*) FROM (SELECT wf_id, run FROM history GROUP BY 1,2
  HAVING max(seq)<>count(*)) x")"
# the result says what the log says: the signal's payload, or "timeout"
# (one query over all of them: a look per workflow cost a minute of processes)
read -r bad signalled < <(q "SELECT count(*) FILTER (WHERE NOT ok), count(*) FILTER (WHERE sig) FROM (
  SELECT sig, coalesce(r->>'k' = k AND CASE WHEN sig THEN r->>'signal' = k ELSE r->>'signal' = 'timeout' END, false) ok
  FROM (SELECT substr(id, 3) k, result::jsonb r, EXISTS (SELECT 1 FROM history h WHERE h.wf_id=w.id
        AND h.type='SignalReceived') sig FROM workflows w) x) y" | tr '|' ' ')
assert_eq "every result agrees with its log" 0 "$bad"
echo "# $signalled of $N took the signal, the others timed out"
[ "$signalled" -le $((N / 2)) ] || fail "more signals taken ($signalled) than sent ($((N / 2)))"
assert_eq "no task left" 0 "$(q "SELECT count(*) FROM tasks")"
wait_true 30 '[ "$(q "SELECT count(*) FROM leases")" = 0 ]' || true
assert_eq "no lease left" 0 "$(q "SELECT count(*) FROM leases")"
[ "$(q "SELECT count(*) FROM leases")" = 0 ] || q "SELECT wf_id, owner, epoch FROM leases LIMIT 10" >&2
kill "$S"; wait "$S" 2>/dev/null || true

# ---- the loop's waits per workflow ----
M=$N
"$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U engine chains
export ENGINE_DB="postgres://engine@127.0.0.1:$PGPORT/chains" DBNAME=chains
seq "$M" | xargs -P 8 -I{} "$ENGINE" start "$WF/chain10.lua" --id "c-{}" --detach --input '{"seconds":0}' \
  >/dev/null 2>>"$T/start2.err" || true
serve_api
wait_true 120 '[ "$(q "SELECT count(*) FROM workflows WHERE status='\''completed'\''")" = "$M" ]' || true
assert_eq "all $M chains completed" "$M" "$(q "SELECT count(*) FROM workflows WHERE status='completed'")"
rt="$(curl -sf "$URL/metrics" | awk '$1 == "engine_store_round_trips_total" { print int($2) }')"
echo "# $rt round trips waited for by the loop for $M chain10 workflows"
[ -n "$rt" ] && [ "$rt" -gt 0 ] || fail "engine_store_round_trips_total missing or 0: '$rt'"
[ -n "$rt" ] && [ "$rt" -lt $((2 * M)) ] || fail "the loop waited $rt times for $M workflows (want under $((2 * M)))"
kill "$S"; wait "$S" 2>/dev/null || true
finish
