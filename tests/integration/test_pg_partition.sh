#!/usr/bin/env bash
# A network partition between a worker and PostgreSQL. Three `engine serve`
# workers share one database: two over loopback, one inside a network
# namespace that reaches the server over a veth pair. While that one holds
# leases its link is brought down: its TCP connections hang (no RST, no FIN,
# unlike a terminated backend), so neither it nor the server can tell at
# once. The others take its workflows over once its leases expire, and
# every workflow completes with the right total. When the link comes back
# the cut-off worker logs that it lost the lease, nothing stale is appended
# (dense histories, one outcome per activity), every step's side effect ran
# at least once (the histogram of runs per step is printed), and it goes on
# as a worker. Needs root (CAP_NET_ADMIN) and iproute2; skipped otherwise.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/chain10.lua"
# steps slow enough that the leases held at the cut are still held after it
# (with 0.1 s steps under ASan and load, a worker seen with 8 leases had
# released all of them in the commit in flight at the cut: nothing was taken
# from it, so it had nothing to log; with 0.05 s steps on a busy machine,
# one seen with 10 held none a moment later at the cut)
# (150: each start is a process with its PostgreSQL backend; 300 cost twice
# the CPU and tested nothing more)
if [ "${ENGINE_SANITIZED:-0}" = 1 ]; then N=${PARTITION_WORKFLOWS:-100} STEP=0.3
else N=${PARTITION_WORKFLOWS:-150} STEP=0.3; fi
# a short lease, so that the takeover is quick; few leases per worker, so
# that the cut falls in the middle of the run
export ENGINE_LEASE_MS=3000 ENGINE_MAX_LEASES=20 ENGINE_BUSY_TIMEOUT_MS=5000 ENGINE_NO_SWEEP=1 ENGINE_NO_POLICY_WATCH=1
export ENGINE_DATA_DIR="$T/data" TEST_SIDE_EFFECTS="$T/side"
: >"$TEST_SIDE_EFFECTS"
# The cut-off worker runs with the engine's own connection settings (the
# server ends a transaction idle past the lease and probes idle clients;
# libpq fails a call on a silent link in about 10 s): without them the server
# kept its open transaction (row locks on the tasks it was dispatching and
# the leases it was renewing, the order lock if it had it) until TCP told it
# the client was gone, two hours by default, and the others skipped those
# tasks or timed out on those locks. PARTITION_PG_PARAMS adds URL parameters.
PG_PARAMS="${PARTITION_PG_PARAMS-}"

NS="engpart$$" HOSTIF="engp$$h" NSIF="engp$$n"
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  echo "skip: a network namespace needs root and iproute2 (ip)"; exit 0
fi
if ! ip netns add "$NS" 2>"$T/netns.err"; then
  echo "skip: network namespaces not permitted here: $(cat "$T/netns.err")"; exit 0
fi
# the veth goes with the namespace; deleted by name too, in case it never moved there
net_cleanup() { ip netns del "$NS" 2>/dev/null || true; ip link del "$HOSTIF" 2>/dev/null || true; }
trap 'EXIT_RC=$?; net_cleanup; cleanup' EXIT
if ! ip link add "$HOSTIF" type veth peer name "$NSIF" netns "$NS" 2>"$T/netns.err"; then
  echo "skip: no veth pair here: $(cat "$T/netns.err")"; exit 0
fi
# a /30 in 10.213.0.0/16 that nothing on this machine uses yet
NET=""
for i in $(seq 0 63); do
  c="10.213.$(( ($$ + i) % 256 ))"
  { ip -4 route show table all; ip -4 addr show; ip -4 neigh show; } | has_line -F "$c." && continue
  NET="$c"; break
done
[ -n "$NET" ] || { fail "no free /30 in 10.213.0.0/16"; finish; }
HOSTIP="$NET.1" NSIP="$NET.2"
ip addr add "$HOSTIP/30" dev "$HOSTIF"
ip link set "$HOSTIF" up
ip -n "$NS" addr add "$NSIP/30" dev "$NSIF"
ip -n "$NS" link set "$NSIF" up
ip -n "$NS" link set lo up

own_pg_cluster
# own_pg_cluster set its own EXIT trap: the workers go first (one of them
# may hang on a dead link), then the namespace, then the server
trap 'EXIT_RC=$?; for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done; net_cleanup;
  "$SRC/scripts/start-postgres" --stop "$T/pg" >/dev/null 2>&1 || true; cleanup' EXIT
# the server listens on the host's end of the veth too, and trusts its /30
# as it trusts loopback (initdb --auth=trust); start-postgres gives
# listen_addresses on the command line, so a restart with it replaced
PGDATA_DIR="$T/pg/data"
echo "host all all $NET.0/30 trust" >>"$PGDATA_DIR/pg_hba.conf"
runuser -u nobody -- "$PGBIN/pg_ctl" restart -D "$PGDATA_DIR" -m fast -w -t 30 -l "$PGDATA_DIR/server.log" \
  -o "-c listen_addresses=127.0.0.1,$HOSTIP -c port=$PGPORT -c unix_socket_directories=''" >/dev/null ||
  { fail "the server did not restart on $HOSTIP too: $(tail -n 5 "$PGDATA_DIR/server.log")"; finish; }
"$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U engine part
export ENGINE_DB="postgres://engine@127.0.0.1:$PGPORT/part"
NSDB="postgres://engine@$HOSTIP:$PGPORT/part${PG_PARAMS:+?$PG_PARAMS}"
q() { "$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U engine -d part -XAtq -c "$1"; }
ns_q() { PGCONNECT_TIMEOUT=5 timeout 10 ip netns exec "$NS" "$PGBIN/psql" "$NSDB" -XAtq -c "$1"; }
assert_eq "the namespace reaches the server over the veth, with those parameters" 1 "$(ns_q 'SELECT 1' 2>&1)"

declare -A W # worker number -> pid
worker() { "$ENGINE" serve 2>>"$T/worker$1.err" & W[$1]=$!; PIDS+=("${W[$1]}"); }
# ip netns exec and env exec the engine: $! is its pid, its owner id's prefix
ns_worker() { ip netns exec "$NS" env ENGINE_DB="$NSDB" "$ENGINE" serve 2>>"$T/worker$1.err" & W[$1]=$!; PIDS+=("${W[$1]}"); }
leases_of() { q "SELECT count(*) FROM leases WHERE owner LIKE '$1-%'"; }
completed() { q "SELECT count(*) FROM workflows WHERE id LIKE 'p-%' AND status='completed'"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# a failure's evidence: what the cut-off worker holds on the server, and where it waits
diagnose() {
  echo "# its sessions on the server (pid, name, state, transaction age, wait, query):" >&2
  q "SELECT pid, application_name, state, now() - xact_start, wait_event_type || ':' || wait_event, left(query, 60)
     FROM pg_stat_activity WHERE client_addr = '$NSIP'" >&2 || true
  echo "# the locks those sessions hold:" >&2
  q "SELECT l.locktype, l.relation::regclass, l.mode, count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
     WHERE a.client_addr = '$NSIP' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3" >&2 || true
  echo "# the cut-off worker's stack (kernel, then user space):" >&2
  cat "/proc/$CUT/stack" >&2 2>/dev/null || true
  if command -v gdb >/dev/null; then
    timeout 60 gdb -p "$CUT" -batch -ex 'thread apply all bt' 2>/dev/null | grep '^#\|^Thread' | cut -c1-200 >&2 || true
  fi
}

# queued first, so that every worker finds many to claim when it starts
seq "$N" | xargs -P 8 -I{} "$ENGINE" start "$WF" --id "p-{}" --detach --input "{\"seconds\":$STEP}" \
  >/dev/null 2>>"$T/start.err" || true
assert_eq "every start accepted" "" "$(cat "$T/start.err")"
# the namespaced one alone first, cut off while it holds leases, and the
# others only then: started beside it, on a loaded machine they were seen
# to take every workflow while it held none (ran all before it started, or
# claimed all it finished), and there was nothing to cut off.
ns_worker 3
CUT=${W[3]} ts="$(now_ms)"
wait_true 30 '[ "$(leases_of "$CUT")" -ge 10 ]' || true
echo "# the namespaced worker held $(leases_of "$CUT") leases $(( $(now_ms) - ts )) ms after it started"
# What it holds at the cut is read from the server once the link is down:
# when the commit in flight had released them all, the link comes back at
# once (well within a lease) and the cut is made again
mine() { q "SELECT count(*) FROM leases WHERE owner='$owner'"; }
for try in 1 2 3 4 5; do
  wait_true 30 '[ "$(leases_of "$CUT")" -ge 1 ]' || true
  owner="$(q "SELECT owner FROM leases WHERE owner LIKE '$CUT-%' LIMIT 1")"
  [ -n "$owner" ] || fail "the namespaced worker held no lease to cut off (it logged: $(tail -n 3 "$T/worker3.err"))"
  done_at_cut="$(completed)"
  echo "---- cut" >>"$T/worker3.err"
  ip link set "$HOSTIF" down
  t0="$(now_ms)"
  held="$(mine)" # what the server still gives it once the link is down
  [ "$held" -gt 0 ] && break
  echo "# cut $try fell when it held none: the link up again, and another cut"
  ip link set "$HOSTIF" up
done
echo "# cut off holding $held leases, $done_at_cut of $N completed"
worker 1; worker 2 # the others take its workflows over, and run the rest
[ "$held" -gt 0 ] || fail "the namespaced worker held no lease once cut off: the test shows nothing"
wait_true 30 '[ "$(mine)" == 0 ]' || true
t1="$(now_ms)" left="$(mine)"
assert_eq "cut off holding $held leases: the others took them over" 0 "$left"
[ "$left" == 0 ] || diagnose
wait_true 30 '[ "$(completed)" -ge "$N" ]' || true
t2="$(now_ms)"
assert_eq "every workflow completed while it was cut off" "$N" "$(completed)"
# down for two leases at least: it has had time to notice, and to retry
while [ $(( $(now_ms) - t0 )) -lt $((2 * ENGINE_LEASE_MS)) ]; do sleep 0.1; done # the wall clock past two leases (no engine state), polled
ip link set "$HOSTIF" up
t3="$(now_ms)"
wait_true 30 'grep -q "lost the lease of workflow p-" "$T/worker3.err"' || true
t4="$(now_ms)"
if grep -q "lost the lease of workflow p-" "$T/worker3.err"; then
  pass "back on the link, it logs that it lost the lease ($((t4 - t3)) ms after)"
else
  fail "back on the link, it did not log that it lost the lease within 30 s: $(sed -n '/^---- cut/,$p' "$T/worker3.err" | tail -n 5)"
  diagnose
fi
kill -0 "$CUT" 2>/dev/null || fail "the cut-off worker is gone: $(tail -n 3 "$T/worker3.err")"

assert_eq "with the right totals (55)" "$N" \
  "$(q "SELECT count(*) FROM workflows WHERE id LIKE 'p-%' AND result LIKE '%\"total\":55%'")"
assert_eq "nothing stale appended: no history with a gap or a seq twice" 0 \
  "$(q "SELECT count(*) FROM (SELECT wf_id, run FROM history GROUP BY 1, 2 HAVING max(seq) <> count(*)) x")"
assert_eq "and no activity with two outcomes" 0 \
  "$(q "SELECT count(*) FROM (SELECT wf_id, ref FROM history WHERE type IN ('ActivityCompleted', 'ActivityFailed')
        GROUP BY 1, 2 HAVING count(*) > 1) x")"
assert_eq "ten outcomes per workflow" "$((N * 10))" \
  "$(q "SELECT count(*) FROM history WHERE wf_id LIKE 'p-%' AND type='ActivityCompleted'")"
steps="$(awk '$2 == "step" {print $1}' "$TEST_SIDE_EFFECTS" | sort -u | wc -l)"
assert_eq "every step's side effect ran at least once" "$((N * 10))" "$steps"

# it goes on as a worker over the link it got back: alone now, it runs a new one
for k in 1 2; do kill "${W[$k]}"; wait "${W[$k]}" 2>/dev/null || true; done
"$ENGINE" start "$WF" --id after --detach --input '{"steps":3}' >/dev/null 2>&1 || true
if wait_status after completed 30; then pass "alone, the returning worker runs a new workflow"
else fail "the returning worker did not run a new workflow: $(status after); $(tail -n 3 "$T/worker3.err")"; fi
kill "$CUT"
wait_for 30 "the returning worker to stop on SIGTERM" '! kill -0 "$CUT" 2>/dev/null' 'tail -n 3 "$T/worker3.err"' || true
wait "$CUT" 2>/dev/null || true
assert_eq "a clean stop leaves no lease" 0 "$(q "SELECT count(*) FROM leases")"

echo
steps_histogram
echo
echo "| cut off | its leases | taken over in | all done in | completed then | lost lease logged |"
echo "|---|---|---|---|---|---|"
echo "| worker 3 (link down, lease $ENGINE_LEASE_MS ms) | $held | $((t1 - t0)) ms | $((t2 - t0)) ms | $done_at_cut of $N | $((t4 - t3)) ms after the link came back |"
echo
finish
