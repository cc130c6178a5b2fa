#!/usr/bin/env bash
# Runs the peer benchmark (../shared/peers) with the engine as a third peer and
# prints the table.
#   tests/bench/run_peers.sh                         engine (durable steps, and every step local),
#                                                    DBOS, Restate; all workloads (~10 min)
#   PEERS_LIST=engine tests/bench/run_peers.sh       the engine alone
#   PEERS_LIST="engine engine-pg engine-pg1 engine-pg2 engine-pg3 dbos" tests/bench/run_peers.sh
#                                                    the engine on SQLite, on PostgreSQL embedded
#                                                    (engine-pg) and with 1-3 `engine serve`
#                                                    workers (engine-pgK), beside DBOS on the
#                                                    same PostgreSQL (engine-pg/ctl.sh)
#   WORKLOADS="w1 w2" W3_N=2000 tests/bench/run_peers.sh   (any run.sh/params.js override)
#   ENGINE_BEFORE_BUILD=/path/to/build-of-an-earlier-commit PEERS_LIST="engine engine-before" \
#     WORKLOADS=w1 tests/bench/run_peers.sh      this build against the build before it, in one run
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
     ! cmake --build "$ENGINE_BUILD" --target engine_driver engine -j2; then
    DRV="$ENGINE_BUILD/tests/bench/engine_driver"
    for f in "$DRV" "$ENGINE_BUILD/engine"; do [ -x "$f" ] || { echo "cannot build $f" >&2; exit 1; }; done
    echo "WARNING: the build failed; using the existing driver ($(date -r "$DRV" '+%F %T')) and engine" >&2
  fi
fi

for p in engine engine-local engine-before; do
  mkdir -p "$PEERS_DIR/$p"
  cp "$HERE/engine/ctl.sh" "$PEERS_DIR/$p/ctl.sh"
  chmod +x "$PEERS_DIR/$p/ctl.sh"
done
# the PostgreSQL peers: one script, the worker count taken from its directory's name
for p in engine-pg engine-pg1 engine-pg2 engine-pg3; do
  mkdir -p "$PEERS_DIR/$p"
  cp "$HERE/engine-pg/ctl.sh" "$PEERS_DIR/$p/ctl.sh"
  chmod +x "$PEERS_DIR/$p/ctl.sh"
done

cd "$PEERS_DIR"
export RESULTS_FILE="${RESULTS_FILE:-$PEERS_DIR/results/$(date -u +%Y%m%dT%H%M%SZ).jsonl}"
# W4's kill lands mid-run (at 1 s every engine workflow has finished)
export W4_KILL_AFTER_S="${W4_KILL_AFTER_S:-0.1}"
# W2's p99 from 1,000 round trips (the harness's 200 give it from the two slowest)
export W2_N="${W2_N:-1000}"
PEERS_LIST="${PEERS_LIST:-engine engine-local dbos restate}" ./run.sh
# what the harness's W4 table has no column for: the engine peers' takeover
# (from the kill until the workflows it interrupted had ended) beside the
# harness's recovery (until all had ended, the never-submitted started anew)
node -e '
const fs = require("fs");
const rows = fs.readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l))
  .filter((r) => r.workload === "W4" && r.takeover_s !== undefined);
if (!rows.length) process.exit(0);
const head = ["peer", "killed", "its leases", "unfinished at kill", "takeover s", "recovery s"];
const body = rows.map((r) => [r.peer, r.kill_target, r.killed_worker_leases ?? "-", r.unfinished_at_restart, r.takeover_s, r.recovery_s].map(String));
const w = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
const line = (c) => "| " + c.map((x, i) => x.padEnd(w[i])).join(" | ") + " |";
console.log("\nW4 takeover (engine peers: kill -9 until every workflow it interrupted had ended)");
console.log(line(head));
console.log("|" + w.map((x) => "-".repeat(x + 2)).join("|") + "|");
for (const b of body) console.log(line(b));
' "$RESULTS_FILE"
# steps run again after W4's kill, every peer: executions beyond the first
# (from its histogram of step-body runs), beside the steps the engine peers
# had in flight at the kill (begun, completion not committed): the bound
node -e '
const fs = require("fs");
const rows = fs.readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l))
  .filter((r) => r.workload === "W4" && r.step_exec_hist);
if (!rows.length) process.exit(0);
const twice = (r) => r.steps_run_twice ?? Object.entries(r.step_exec_hist).reduce((a, [c, n]) => a + Math.max(0, c - 1) * n, 0);
const head = ["peer", "killed", "steps run twice", "workflows with a re-run", "steps in flight at kill", "workflows in flight"];
const body = rows.map((r) => [r.peer, r.kill_target ?? "-", twice(r), r.workflows_with_reexecuted_steps ?? "-",
  r.steps_in_flight_at_kill ?? "-", r.workflows_in_flight_at_kill ?? "-"].map(String));
const w = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
const line = (c) => "| " + c.map((x, i) => x.padEnd(w[i])).join(" | ") + " |";
console.log("\nW4 steps run again (kill at W4_KILL_AFTER_S=" + (process.env.W4_KILL_AFTER_S || "1") + " s)");
console.log(line(head));
console.log("|" + w.map((x) => "-".repeat(x + 2)).join("|") + "|");
for (const b of body) console.log(line(b));
' "$RESULTS_FILE"
