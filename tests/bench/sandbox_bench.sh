#!/usr/bin/env bash
# Sandbox overhead: N sessions in parallel (default 20), each provision + 10
# execs + destroy, through the engine (durable workflows, one activity per
# step) and through the docker CLI with the same container settings, in one
# run. Prints both wall times and the engine's time as a ratio of the CLI's.
#   tests/bench/sandbox_bench.sh [N]      (needs dockerd and the sandbox image)
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-20}"; EXECS=10
BUILD="${ENGINE_BUILD:-build}"
IMAGE="${ENGINE_SANDBOX_IMAGE:-engine-sandbox:latest}"
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT
export ENGINE_LUA_DIR="$PWD/lua" ENGINE_DB="$T/bench.db"
now() { date +%s.%N; }
elapsed() { awk -v a="$(now)" -v b="$1" 'BEGIN{print a-b}'; }

# --- the docker CLI, same hardening and limits, N sessions in parallel
cli_session() {
  local ws="$T/cli-ws-$1"; mkdir -p "$ws/input" "$ws/skills"; mkdir -p -m 0777 "$ws/working" "$ws/output"
  touch "$ws/task.md" "$ws/simple.md"
  local id
  id="$(docker create --network none --read-only --cap-drop ALL --security-opt no-new-privileges --user 10001:10001 \
    --memory 256m --memory-swap 256m --cpus 1 --pids-limit 64 --tmpfs /tmp:rw,nosuid,nodev,size=67108864 --init \
    -v "$ws/input:/workspace/input:ro" -v "$ws/working:/workspace/working:rw" -v "$ws/output:/workspace/output:rw" \
    -v "$ws/task.md:/workspace/task.md:ro" -v "$ws/simple.md:/workspace/simple.md:ro" -v "$ws/skills:/workspace/skills:ro" \
    -w /workspace/working --label engine.bench=cli "$IMAGE" sleep infinity)"
  docker start "$id" >/dev/null
  for i in $(seq $EXECS); do docker exec -u 10001:10001 "$id" echo "step $i" >/dev/null; done
  docker rm -f "$id" >/dev/null
  rm -rf "$ws"
}
t0="$(now)"
for s in $(seq "$N"); do cli_session "$s" & done
wait
cli_s="$(elapsed "$t0")"

# --- the engine: N workflows, the worker started once
"$BUILD/engine" serve >/dev/null 2>&1 &
SP=$!
sleep 0.5
t0="$(now)"
for s in $(seq "$N"); do "$BUILD/engine" start tests/bench/sandbox_bench.lua --id "sb$s" --detach >/dev/null 2>&1 || true; done
while [ "$("$BUILD/engine" list --status completed | tail -n +2 | wc -l)" -lt "$N" ]; do
  if [ "$("$BUILD/engine" list --status failed | tail -n +2 | wc -l)" -gt 0 ]; then "$BUILD/engine" list; break; fi
  sleep 0.05
done
eng_s="$(elapsed "$t0")"
kill "$SP"; wait "$SP" 2>/dev/null || true
printf '| sessions x (provision + %d execs + destroy) | docker CLI s | engine s | engine / CLI |\n|---|---|---|---|\n' "$EXECS"
printf '| %d in parallel | %.2f | %.2f | %.2f |\n' "$N" "$cli_s" "$eng_s" "$(awk -v a="$eng_s" -v b="$cli_s" 'BEGIN{print a/b}')"
