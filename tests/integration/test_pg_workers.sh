#!/usr/bin/env bash
# Several workers on one PostgreSQL. Three `engine serve` processes run 250
# chain-of-10 workflows while each of them in turn is killed with -9 (and
# started again): every workflow completes with the right total, no event is
# recorded twice and every history is dense, each step's side effect ran at
# least once (the histogram of runs per step is printed), and the time the
# others took to take a killed worker's workflows over is printed (each
# worker runs at most ENGINE_MAX_LEASES at once: the survivors take the
# dead one's as their own finish). Then a
# worker cut off from the database while it holds leases (its backend
# terminated, then the process stopped past its lease): the others take its
# workflows over, and when it comes back it logs that it lost them and
# appends nothing stale.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/chain10.lua"
# the full size in the plain build; the sanitized one, slower by far, on
# fewer. Steps slow enough and few enough at once per worker that the drain
# lasts about half a minute (N / (3 * leases) * 10 steps): each kill, polled
# from this shell, finds every worker with a share in flight (with 256 at
# once and 10 ms steps the workers drained 2,000 in about 3 s). Two hundred
# and fifty, with half the leases per worker, drain as long as five hundred
# did: each start is a process (with its PostgreSQL backend), and two thousand
# of them were a minute of CPU (a thousand made this the costliest test of
# the suite, 140 CPU-seconds)
if [ "${ENGINE_SANITIZED:-0}" = 1 ]; then N=${WORKERS_WORKFLOWS:-150} STEP=0.5; export ENGINE_MAX_LEASES=12
else N=${WORKERS_WORKFLOWS:-250} STEP=0.5; export ENGINE_MAX_LEASES=12; fi
export ENGINE_LEASE_MS=10000 ENGINE_BUSY_TIMEOUT_MS=30000 ENGINE_NO_SWEEP=1 ENGINE_NO_POLICY_WATCH=1
export ENGINE_DATA_DIR="$T/data" TEST_SIDE_EFFECTS="$T/side"
: >"$TEST_SIDE_EFFECTS"

own_pg_database workers

declare -A W # worker number -> pid
worker() { "$ENGINE" serve 2>>"$T/worker$1.err" & W[$1]=$!; PIDS+=("${W[$1]}"); }
# a worker's owner id starts with its pid
owner_of() { q "SELECT substr(application_name, 15) FROM pg_stat_activity WHERE application_name LIKE 'engine worker $1-%'
  UNION SELECT owner FROM leases WHERE owner LIKE '$1-%' LIMIT 1"; }
leases_of() { q "SELECT count(*) FROM leases WHERE owner LIKE '$1-%'"; }

# ---- N chains while the workers are killed in turn ----
# queued first, so that each worker has many in hand when it is killed
seq "$N" | xargs -P 8 -I{} "$ENGINE" start "$WF" --id "c-{}" --detach --input "{\"seconds\":$STEP}" \
  >/dev/null 2>>"$T/start.err" || true
assert_eq "every start accepted" "" "$(cat "$T/start.err")"
for k in 1 2 3; do worker "$k"; done
# each one's owner id, known before the drain is under way: looked up after a
# threshold, it came so late that the worker had finished its share
declare -A O
for k in 1 2 3; do
  wait_true 30 'O[$k]="$(owner_of "${W[$k]}")"; [ -n "${O[$k]}" ]' || true
done
completed() { q "SELECT count(*) FROM workflows WHERE status='completed'"; }
TAKE=()
for k in 1 2 3; do
  # worker k dies when a fifth, two fifths, three fifths are done (early
  # enough that each still has a share in hand, however fast they drain)
  wait_true 75 '[ "$(completed)" -ge $((k * N / 5)) ]' || true
  pid="${W[$k]}" owner="${O[$k]}"
  # killed at once when it is seen holding some (near the end they come and go fast)
  held=0
  wait_true 30 'held="$(q "SELECT count(*) FROM leases WHERE owner='\''$owner'\''")"; [ "$held" -gt 0 ]' || true
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true
  t0="$(date +%s%N)" at_kill="$(completed)"
  # taken over: no lease of the dead worker's left (each one claimed by
  # another, or its workflow ended). Its session ended, so they are free at
  # once; the others take them as fast as their own ENGINE_MAX_LEASES allows
  wait_true 60 '[ "$(q "SELECT count(*) FROM leases WHERE owner='\''$owner'\''")" == 0 ]' || true
  t1="$(date +%s%N)"
  left="$(q "SELECT count(*) FROM leases WHERE owner='$owner'")"
  [ "$held" -gt 0 ] || fail "worker $k held no workflow when it was killed (nothing to take over)"
  assert_eq "worker $k killed: its $held workflows taken over" 0 "$left"
  TAKE+=("| worker $k (kill -9) | $held | $(( (t1 - t0) / 1000000 )) ms | $at_kill of $N |")
  worker "$k"
done
wait_true 300 '[ "$(completed)" -ge "$N" ]' || true
assert_eq "every workflow completed" "$N" "$(completed)"
assert_eq "with the right total (55)" "$N" "$(q "SELECT count(*) FROM workflows WHERE result LIKE '%\"total\":55%'")"
assert_eq "no history with a gap or a seq twice" 0 \
  "$(q "SELECT count(*) FROM (SELECT wf_id, run FROM history GROUP BY 1, 2 HAVING max(seq) <> count(*)) x")"
assert_eq "no activity with two outcomes" 0 \
  "$(q "SELECT count(*) FROM (SELECT wf_id, ref FROM history WHERE type IN ('ActivityCompleted', 'ActivityFailed')
        GROUP BY 1, 2 HAVING count(*) > 1) x")"
assert_eq "ten outcomes per workflow" "$((N * 10))" "$(q "SELECT count(*) FROM history WHERE type='ActivityCompleted'")"
steps="$(awk '$2 == "step" {print $1}' "$TEST_SIDE_EFFECTS" | sort -u | wc -l)"
assert_eq "every step's side effect ran at least once" "$((N * 10))" "$steps"
assert_eq "no lease left behind" 0 "$(q "SELECT count(*) FROM leases")"
echo
steps_histogram
echo
echo "| killed | its leases | taken over in | completed when killed |"
echo "|---|---|---|---|"
printf '%s\n' "${TAKE[@]}"
echo

# ---- a worker cut off while it holds leases ----
# chains of slow steps, so that worker 1 has attempts in flight when it is cut off
for k in 2 3; do kill "${W[$k]}"; wait "${W[$k]}" 2>/dev/null || true; done
echo "---- cut" >>"$T/worker1.err"
# (1 s steps: a chain lasts 10 s at least, so none ends before all 10 are
# leased; with 0.4 s ones on a loaded machine two had ended by the check)
owner="$(owner_of "${W[1]}")"
seq 10 | xargs -P 8 -I{} "$ENGINE" start "$WF" --id "cut-{}" --detach --input '{"seconds":1}' >/dev/null 2>&1 || true
# the 10 leased (of its 12 at most), all by worker 1: one snapshot, asserted as read
cut_leases() { q "SELECT count(*) FILTER (WHERE owner='$owner') || ' of ' || count(*) FROM leases WHERE wf_id LIKE 'cut-%'"; }
held_cut=""
wait_true 60 'held_cut="$(cut_leases)"; [ "$held_cut" == "10 of 10" ]' || true
assert_eq "worker 1 holds the 10 new workflows" "10 of 10" "$held_cut"
# cut off: its sessions ended by the server, and the process stalled past its lease
kill -STOP "${W[1]}"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'engine%(pid ${W[1]})'
   OR application_name IN ('engine worker $owner', 'engine starts $owner', 'engine api $owner')" >/dev/null
worker 2; worker 3
wait_true 30 '[ "$(q "SELECT count(*) FROM leases WHERE owner='\''$owner'\''")" == 0 ]' || true
assert_eq "the others took its workflows over" 0 "$(q "SELECT count(*) FROM leases WHERE owner='$owner'")"
# the others took its workflows over (above): its leases have run out, whatever it thinks
kill -CONT "${W[1]}"
cutdone() { q "SELECT count(*) FROM workflows WHERE id LIKE 'cut-%' AND status='completed'"; }
wait_true 60 '[ "$(cutdone)" -ge 10 ] && grep -q "lost the lease of workflow" "$T/worker1.err"' || true
assert_eq "the 10 workflows completed" 10 "$(cutdone)"
assert_contains "the returning worker logs that it lost its leases" "lost the lease of workflow cut-" "$(cat "$T/worker1.err")"
assert_eq "nothing stale appended: dense histories" 0 \
  "$(q "SELECT count(*) FROM (SELECT wf_id, run FROM history WHERE wf_id LIKE 'cut-%' GROUP BY 1, 2 HAVING max(seq) <> count(*)) x")"
assert_eq "and one outcome per activity" 0 \
  "$(q "SELECT count(*) FROM (SELECT wf_id, ref FROM history WHERE wf_id LIKE 'cut-%' AND type='ActivityCompleted'
        GROUP BY 1, 2 HAVING count(*) > 1) x")"
assert_eq "with the right totals" 10 "$(q "SELECT count(*) FROM workflows WHERE id LIKE 'cut-%' AND result LIKE '%\"total\":55%'")"
assert_exit "every hash chain whole after the takeovers (engine verify --all)" 0 engine verify --all
# it goes on as a worker: a new workflow may run on any of the three
for k in 1 2 3; do kill -0 "${W[$k]}" 2>/dev/null || fail "worker $k is gone: $(tail -3 "$T/worker$k.err")"; done
"$ENGINE" start "$WF" --id after --detach --input '{"steps":3}' >/dev/null 2>&1 || true
wait_status after completed 30 || fail "after: $(status after)"
for k in 1 2 3; do kill "${W[$k]}"; wait "${W[$k]}" 2>/dev/null || true; done
assert_eq "a clean stop leaves no lease" 0 "$(q "SELECT count(*) FROM leases")"

# ---- a webhook's start runs on whichever worker is free, not only on the
# one that received it: worker 1 takes the deliveries and may hold one
# workflow at a time; each holds its lease through a 2 s step, so worker 2
# takes up the others as they come due (before, the receiver ran every start
# itself, past its ENGINE_MAX_LEASES). Each workflow says which worker ran it.
mkdir -p "$T/spread/triggers"
cat >"$T/spread/where.lua" <<'LUA'
local wf = require "workflow"
return function(input)
  return wf.activity("where_acts.where", { seconds = input.seconds }, { start_to_close = 60 })
end
LUA
cat >"$T/spread/where_acts.lua" <<'LUA'
local activity = require "activity"
return { where = function(args) activity.sleep(args.seconds); return { worker = os.getenv("TEST_WORKER") } end }
LUA
cat >"$T/spread/triggers/spread.lua" <<'LUA'
return {
  verify = { kind = "bearer", secret = "TEST_SPREAD_TOKEN" },
  delivery_header = "X-Request-Id",
  map = function(req) return { workflow = "where.lua", input = { seconds = 2 } } end,
}
LUA
export TEST_SPREAD_TOKEN="spread-$RANDOM$RANDOM"
TEST_WORKER=receiver ENGINE_MAX_LEASES=1 serve_api --workflows "$T/spread"
TEST_WORKER=other "$ENGINE" serve --workflows "$T/spread" 2>>"$T/worker2.err" & W[2]=$!; PIDS+=("${W[2]}")
for k in 1 2 3 4 5 6; do
  code="$(curl -s -o "$T/hook.out" -w '%{http_code}' -X POST -H "Authorization: Bearer $TEST_SPREAD_TOKEN" \
    -H "X-Request-Id: spread-$k" --data '{}' "$URL/hooks/spread")"
  assert_eq "delivery $k is accepted" 202 "$code"
done
spread_done() { q "SELECT count(*) FROM workflows WHERE script_name LIKE '%where.lua' AND status='completed'"; }
wait_true 120 '[ "$(spread_done)" -ge 6 ]' || true
assert_eq "the six webhook starts completed" 6 "$(spread_done)"
ran_on() { q "SELECT count(*) FROM workflows WHERE script_name LIKE '%where.lua' AND result LIKE '%\"worker\":\"$1\"%'"; }
on_other="$(ran_on other)" on_receiver="$(ran_on receiver)"
echo "webhook starts: $on_receiver ran on the worker that received them, $on_other on the other"
assert_eq "each ran once, on one of the two" 6 "$((on_other + on_receiver))"
[ "$on_other" -ge 1 ] || fail "every webhook start ran on the worker that received it ($on_receiver of 6)"
kill "$S" "${W[2]}"; wait "$S" "${W[2]}" 2>/dev/null || true

# ---- commits are announced (LISTEN/NOTIFY): with its safety-net poll ten
# minutes apart, a worker still hears of a start and a signal from other processes
ENGINE_PG_POLL_MS=600000 worker 1
wait_true 30 '[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name='\''engine (listening)'\''")" -ge 1 ]' || true
"$ENGINE" start "$WF" --id heard --detach --input '{"steps":2}' >/dev/null 2>&1 || true
wait_status heard completed 20 || fail "a start from another process was not heard: $(status heard)"
"$ENGINE" start "$SRC/tests/integration/wf/migrate_mix.lua" --id heard-signal --detach --input '{"i":1,"wait":true}' \
  >/dev/null 2>&1 || true
wait_status heard-signal waiting:signal 20 || fail "heard-signal: $(status heard-signal)"
"$ENGINE" signal heard-signal go '{"n":1}' >/dev/null
wait_status heard-signal completed 20 || fail "a signal from another process was not heard: $(status heard-signal)"
kill "${W[1]}"; wait "${W[1]}" 2>/dev/null || true
finish
