#!/usr/bin/env bash
# Runs the peer benchmark (../shared/peers) with the engine as a third peer and
# prints the table.
#   tests/bench/run_peers.sh                         engine, DBOS, Restate; all workloads (~8 min)
#   PEERS_LIST=engine tests/bench/run_peers.sh       the engine alone
#   WORKLOADS="w1 w2" W3_N=2000 tests/bench/run_peers.sh   (any run.sh/params.js override)
# PEERS_SRC (default /work/shared/peers) is read-only: it is copied once to the
# writable PEERS_DIR (default /tmp/peers) and set up there (setup.sh: apt + npm ci).
# ENGINE_BUILD (default <repo>/build) is where the driver is built; SKIP_BUILD=1 skips it.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PEERS_SRC="${PEERS_SRC:-/work/shared/peers}"
PEERS_DIR="${PEERS_DIR:-/tmp/peers}"
export ENGINE_BUILD="${ENGINE_BUILD:-$ROOT/build}"

if [ ! -x "$PEERS_DIR/run.sh" ]; then
  echo "copying $PEERS_SRC to $PEERS_DIR"
  mkdir -p "$PEERS_DIR"
  cp -r "$PEERS_SRC"/. "$PEERS_DIR"/
fi
if [ ! -d "$PEERS_DIR/dbos/node_modules" ] || [ ! -d "$PEERS_DIR/restate/node_modules" ]; then
  echo "setting up $PEERS_DIR (setup.sh)"
  (cd "$PEERS_DIR" && if [ "$(id -u)" = 0 ]; then ./setup.sh; else sudo ./setup.sh; fi)
fi

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  if ! { [ -f "$ENGINE_BUILD/CMakeCache.txt" ] || cmake -S "$ROOT" -B "$ENGINE_BUILD" >/dev/null; } ||
     ! cmake --build "$ENGINE_BUILD" --target engine_driver -j2; then
    DRV="$ENGINE_BUILD/tests/bench/engine_driver"
    [ -x "$DRV" ] || { echo "cannot build $DRV" >&2; exit 1; }
    echo "WARNING: the build failed; using the existing driver ($(date -r "$DRV" '+%F %T'))" >&2
  fi
fi

mkdir -p "$PEERS_DIR/engine"
cp "$HERE/engine/ctl.sh" "$PEERS_DIR/engine/ctl.sh"
chmod +x "$PEERS_DIR/engine/ctl.sh"

cd "$PEERS_DIR"
PEERS_LIST="${PEERS_LIST:-engine dbos restate}" ./run.sh
