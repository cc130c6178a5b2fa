#!/usr/bin/env bash
# Control an engine-on-PostgreSQL peer. One script for several peers, told
# apart by the name of the directory it is copied to (tests/bench/run_peers.sh
# copies it to <peers>/engine-pg, engine-pg1, engine-pg2, engine-pg3):
#   engine-pg    the engine embedded in its driver process, the one worker
#                (like DBOS: a library in the process that drives it)
#   engine-pgK   K `engine serve` workers sharing the database, the driver a
#                pure client beside them (starts and signals are transactions
#                of their own; it follows the workers' commits by LISTEN, as a
#                foreground `engine start` beside a serve does)
# The database lives in the harness's DBOS cluster (../dbos/ctl.sh fresh: a
# wiped PostgreSQL 15 on 127.0.0.1:5433, initdb defaults fsync=on,
# synchronous_commit=on), so the engine and DBOS run on the same server with
# the same settings, one peer at a time.
#   ctl.sh fresh   wipe + start the cluster, create the database engine_bench
#   ctl.sh stop    stop the workers (and a leftover driver), then the cluster
#   ctl.sh disk    bytes of the cluster's data directory
#   ctl.sh run W   run driver workload W (w1|w2|w3) with the workers started for it
#   ctl.sh w4      crash workload: engine-pg kills the driver (the worker) ~1 s
#                  in and starts it again; engine-pgK kills the worker holding
#                  the most leases (the first started when none holds any) and
#                  the client together ~1 s in; with K=1 the worker is started
#                  again, with K>1 the others take its workflows over; a fresh
#                  client starts what was never submitted and waits for all
# ENGINE_BUILD (default /work/main/build) has the engine and the driver.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PEERS="$(dirname "$HERE")"
PEER="$(basename "$HERE")"
DATA="$PEERS/data"
LOGS="$DATA/logs"
PGDATA="$DATA/pg"   # ../dbos/ctl.sh's cluster
PGPORT=5433
ENGINE_BUILD="${ENGINE_BUILD:-/work/main/build}"
DRIVER="$ENGINE_BUILD/tests/bench/engine_driver"
ENGINE="$ENGINE_BUILD/engine"
case "$PEER" in
  engine-pg) K=0 ;;
  engine-pg[1-9]) K="${PEER#engine-pg}" ;;
  *) echo "$0: cannot tell the worker count from the directory name $PEER (engine-pg or engine-pgK)" >&2; exit 2 ;;
esac
STATE="$DATA/$PEER"  # pid files, the engine's data directory (ENGINE_DATA_DIR)
export ENGINE_BENCH_DB="postgresql://postgres@127.0.0.1:$PGPORT/engine_bench"
export ENGINE_BENCH_PEER="$PEER" ENGINE_BENCH_PGDATA="$PGDATA" ENGINE_DATA_DIR="$STATE/engine-data"
unset ENGINE_SYNCHRONOUS ENGINE_DB
mkdir -p "$DATA" "$LOGS" "$STATE"

need() {
  for f in "$DRIVER" "$ENGINE"; do
    [ -x "$f" ] || { echo "$PEER: no $f (set ENGINE_BUILD, or build: cmake -B build && cmake --build build -j2)" >&2; exit 2; }
  done
}
alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }
q() { psql -XAtq -h 127.0.0.1 -p $PGPORT -U postgres engine_bench -c "$1"; }

# Starts worker number $1 (1..K); its pid is appended to $STATE/serves.pid.
start_serve() {
  local log="$LOGS/$PEER-serve$1.log"
  ENGINE_DB="$ENGINE_BENCH_DB" "$ENGINE" serve >>"$log" 2>&1 &
  local p=$!
  echo "$p" >>"$STATE/serves.pid"
  for _ in $(seq 1 200); do
    grep -q "serving .*(pid $p)" "$log" 2>/dev/null && return 0
    alive "$p" || break
    sleep 0.05
  done
  echo "$PEER: worker $1 (pid $p) did not start" >&2; tail -5 "$log" >&2; exit 1
}
start_serves() {
  rm -f "$STATE/serves.pid"
  for i in $(seq 1 "$K"); do start_serve "$i"; done
  ENGINE_BENCH_SERVE_PIDS="$(tr '\n' ' ' <"$STATE/serves.pid")"
  export ENGINE_BENCH_SERVE_PIDS ENGINE_BENCH_CLIENT=1
}
stop_serves() {
  [ -f "$STATE/serves.pid" ] || return 0
  local p
  for p in $(cat "$STATE/serves.pid"); do alive "$p" && kill "$p"; done
  for p in $(cat "$STATE/serves.pid"); do
    for _ in $(seq 1 100); do alive "$p" || break; sleep 0.05; done
    alive "$p" && kill -9 "$p"
  done
  rm -f "$STATE/serves.pid"
}
stop() {
  stop_serves
  if [ -f "$STATE/driver.pid" ]; then kill -9 "$(cat "$STATE/driver.pid")" 2>/dev/null || true; rm -f "$STATE/driver.pid"; fi
  "$PEERS/dbos/ctl.sh" stop
}
run_driver() { # args; the pid file lets stop kill a leftover one
  "$DRIVER" "$@" &
  echo $! >"$STATE/driver.pid"
  local rc=0
  wait $! || rc=$?
  rm -f "$STATE/driver.pid"
  return $rc
}

case "${1:-}" in
  fresh)
    stop_serves
    rm -rf "$STATE"; mkdir -p "$STATE"
    "$PEERS/dbos/ctl.sh" fresh
    psql -XAtq -h 127.0.0.1 -p $PGPORT -U postgres postgres -c "CREATE DATABASE engine_bench" >/dev/null
    ;;
  stop) stop ;;
  disk) du -sb "$PGDATA" | cut -f1 ;;
  run)
    shift; need
    [ "$K" -gt 0 ] && start_serves
    rc=0; run_driver "$@" || rc=$?
    stop_serves
    exit $rc
    ;;
  w4)
    need
    export STEP_COUNTER_FILE="$DATA/$PEER-w4-steps.txt"; rm -f "$STEP_COUNTER_FILE"; touch "$STEP_COUNTER_FILE"
    A="$LOGS/$PEER-w4a.log"; rm -f "$A"
    [ "$K" -gt 0 ] && start_serves   # with the step counter in their environment
    "$DRIVER" w4a >"$A" 2>&1 &
    D=$!
    # kill ~1 s after the first workflow is submitted
    for _ in $(seq 1 600); do grep -q SUBMITTING "$A" 2>/dev/null && break; sleep 0.05; done
    sleep "${W4_KILL_AFTER_S:-1}"
    if [ "$K" = 0 ]; then
      kill -9 "$D" 2>/dev/null || echo "NOTE: worker had already exited before the kill"; wait "$D" 2>/dev/null || true
      echo "killed worker pid $D; $(wc -l <"$STEP_COUNTER_FILE") step bodies had run"
      export RESTART_T0_MS=$(date +%s%3N)
      export W4_KILL_TARGET="engine-worker(driver)"
      "$DRIVER" w4b
      exit
    fi
    # the worker holding the most leases (a lease's owner is "<pid>-<random>")
    mapfile -t serves <"$STATE/serves.pid"
    V="" HELD=0
    read -r V HELD < <(q "SELECT split_part(owner, '-', 1), count(*) FROM leases GROUP BY 1 ORDER BY 2 DESC LIMIT 1" | tr '|' ' ') || true
    case " ${serves[*]} " in *" $V "*) ;; *) V="${serves[0]}" HELD=0 ;; esac
    n=0; for i in "${!serves[@]}"; do [ "${serves[$i]}" = "$V" ] && n=$((i + 1)); done
    # a session opened before the kill reads the state at the kill in one round
    # trip after it (the others carry on meanwhile): the counts, and the
    # workflows the kill interrupted (written, not ended), whose takeover w4b times
    coproc PQ { psql -XAtq -h 127.0.0.1 -p $PGPORT -U postgres engine_bench; }
    echo "SELECT 1;" >&"${PQ[1]}"; read -r _ <&"${PQ[0]}"
    kill -9 "$V" "$D" 2>/dev/null || echo "NOTE: the worker or the client had already exited before the kill"
    export RESTART_T0_MS=$(date +%s%3N)
    cat >&"${PQ[1]}" <<'SQL'
SELECT (SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM (SELECT status, count(*) n FROM workflows
  WHERE id LIKE 'w4-%' GROUP BY status) s) || jsonb_build_object('steps_recorded', (SELECT count(*) FROM history
  WHERE wf_id LIKE 'w4-%' AND type = 'ActivityCompleted'));
SELECT id FROM workflows WHERE id LIKE 'w4-%' AND status NOT IN ('completed', 'failed', 'cancelled');
SELECT 'END';
SQL
    read -r W4_AT_KILL <&"${PQ[0]}"; export W4_AT_KILL
    export W4_UNFINISHED_FILE="$STATE/w4-unfinished.txt"
    while read -r line <&"${PQ[0]}"; do [ "$line" = END ] && break; echo "$line"; done >"$W4_UNFINISHED_FILE"
    echo "\q" >&"${PQ[1]}"; wait "$PQ_PID" 2>/dev/null || true
    wait "$D" "$V" 2>/dev/null || true
    echo "killed worker $n of $K (pid $V, $HELD leases) and the client (pid $D); $(wc -l <"$STEP_COUNTER_FILE") step bodies had run; at the kill: $W4_AT_KILL, $(wc -l <"$W4_UNFINISHED_FILE") unfinished"
    # the victim's pid goes from the list of workers that count
    grep -vx "$V" "$STATE/serves.pid" >"$STATE/serves.tmp" || true; mv "$STATE/serves.tmp" "$STATE/serves.pid"
    if [ "$K" = 1 ]; then
      start_serve 1
      export W4_KILL_TARGET="engine serve 1/1 + client; serve restarted"
    else
      if [ "$HELD" -gt 0 ]; then why="most leases"; else why="none held leases: the first started"; fi
      export W4_KILL_TARGET="engine serve $n/$K ($why) + client; $((K - 1)) take over"
    fi
    export W4_KILLED_LEASES="$HELD"
    ENGINE_BENCH_SERVE_PIDS="$(tr '\n' ' ' <"$STATE/serves.pid")"
    rc=0; run_driver w4b || rc=$?
    stop_serves
    exit $rc
    ;;
  *) echo "usage: $0 fresh|stop|disk|run W|w4" >&2; exit 2 ;;
esac
