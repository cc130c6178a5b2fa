#!/usr/bin/env bash
# Control the engine peer. The engine is a library embedded in its driver
# process (like DBOS): there is no server to start; the driver opens the SQLite
# database under ../data/engine (WAL, synchronous=FULL: the engine's defaults).
#   ctl.sh fresh   wipe the database directory
#   ctl.sh stop    nothing runs between workloads (kills a leftover driver, if any)
#   ctl.sh disk    bytes of the database directory
#   ctl.sh run W   run driver workload W (w1|w2|w3)
#   ctl.sh w4      crash workload (kill -9 the driver ~1 s in, restart it, wait)
# The driver is $ENGINE_BUILD/tests/bench/engine_driver (ENGINE_BUILD defaults to
# /work/main/build; build it with `cmake -B build && cmake --build build -j2`).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PEERS="$(dirname "$HERE")"
DATA="$PEERS/data"
LOGS="$DATA/logs"
DBDIR="$DATA/engine"
ENGINE_BUILD="${ENGINE_BUILD:-/work/main/build}"
DRIVER="$ENGINE_BUILD/tests/bench/engine_driver"
export ENGINE_BENCH_DB="$DBDIR/bench.db"
# installed as engine-local too: the same engine with every chain step a local
# activity ({local = true}, chain10_local.lua), its own database and records
if [ "$(basename "$HERE")" = engine-local ]; then
  DBDIR="$DATA/engine-local"
  export ENGINE_BENCH_DB="$DBDIR/bench.db" ENGINE_BENCH_CHAIN=chain10_local.lua ENGINE_BENCH_PEER=engine-local
fi
# installed as engine-before too: the same workloads on an earlier build of the
# engine (ENGINE_BEFORE_BUILD, a build directory of another commit), so a
# change is measured against the build before it in one run
if [ "$(basename "$HERE")" = engine-before ]; then
  DRIVER="${ENGINE_BEFORE_BUILD:?engine-before needs ENGINE_BEFORE_BUILD (a build directory of the earlier commit)}/tests/bench/engine_driver"
  DBDIR="$DATA/engine-before"
  export ENGINE_BENCH_DB="$DBDIR/bench.db" ENGINE_BENCH_PEER=engine-before
fi
# durability stays the engine's default (synchronous=FULL)
unset ENGINE_SYNCHRONOUS
mkdir -p "$DATA" "$LOGS" "$DBDIR"

need_driver() {
  if [ ! -x "$DRIVER" ]; then
    echo "engine peer: no driver at $DRIVER (set ENGINE_BUILD, or build: cmake -B build && cmake --build build -j2)" >&2
    exit 2
  fi
}

stop() {
  # the driver takes the engine's worker lock: a leftover one would hold the database
  if [ -f "$DBDIR/driver.pid" ]; then
    kill -9 "$(cat "$DBDIR/driver.pid")" 2>/dev/null || true
    rm -f "$DBDIR/driver.pid"
  fi
}

case "${1:-}" in
  fresh) stop; rm -rf "$DBDIR"; mkdir -p "$DBDIR" ;;
  stop) stop ;;
  disk) du -sb "$DBDIR" | cut -f1 ;;
  run)
    shift; need_driver
    "$DRIVER" "$@" &
    echo $! > "$DBDIR/driver.pid"
    rc=0; wait $! || rc=$?
    rm -f "$DBDIR/driver.pid"
    exit $rc
    ;;
  w4)
    need_driver
    NAME="$(basename "$HERE")"
    export STEP_COUNTER_FILE="$DATA/$NAME-w4-steps.txt"; rm -f "$STEP_COUNTER_FILE"; touch "$STEP_COUNTER_FILE"
    rm -f "$LOGS/$NAME-w4a.log"
    "$DRIVER" w4a > "$LOGS/$NAME-w4a.log" 2>&1 &
    W=$!
    # kill ~1 s after the first workflow is submitted (W4_KILL_AFTER_S)
    for _ in $(seq 1 600); do grep -q SUBMITTING "$LOGS/$NAME-w4a.log" 2>/dev/null && break; sleep 0.05; done
    sleep "${W4_KILL_AFTER_S:-1}"
    kill -9 "$W" 2>/dev/null || echo "NOTE: worker had already exited before the kill"; wait "$W" 2>/dev/null || true
    echo "killed worker pid $W; $(wc -l < "$STEP_COUNTER_FILE") step bodies had run"
    export RESTART_T0_MS=$(date +%s%3N)
    "$DRIVER" w4b
    ;;
  *) echo "usage: $0 fresh|stop|disk|run W|w4" >&2; exit 2 ;;
esac
