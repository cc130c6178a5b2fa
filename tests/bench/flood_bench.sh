#!/usr/bin/env bash
# Engine memory under output floods: N sessions at once (default 20), each one
# exec printing BYTES (default 200,000,000) with 64 KiB kept, through the
# docker driver and the bwrap driver. Prints the engine's RSS before the
# floods and its peak (VmHWM of the `engine serve` process that runs every
# activity), and the wall time.
#   tests/bench/flood_bench.sh [N] [BYTES]   (needs dockerd, the sandbox image, bwrap and its rootfs)
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-20}"; BYTES="${2:-200000000}"
BUILD="${ENGINE_BUILD:-build}"
T="$(mktemp -d)"; chmod 0711 "$T" # bwrap sandboxes run as uid 10001 and must reach their workspace
SP=
trap '[ -n "$SP" ] && kill "$SP" 2>/dev/null; rm -rf "$T"' EXIT
export ENGINE_LUA_DIR="$PWD/lua" ENGINE_WORKSPACES="$T/ws"
now() { date +%s.%N; }
kib() { awk '$1 == "'"$2"':" {print $2; exit}' "/proc/$1/status"; }

printf '| driver | sessions x bytes flooded | engine RSS MiB before | engine peak RSS MiB (VmHWM) | wall s |\n|---|---|---|---|---|\n'
for driver in docker bwrap; do
  export ENGINE_DB="$T/$driver.db"
  ENGINE_SANDBOX_DRIVER="$driver" "$BUILD/engine" serve >"$T/serve-$driver.log" 2>&1 &
  SP=$!
  for _ in $(seq 100); do [ -e "$ENGINE_DB" ] && break; sleep 0.05; done
  sleep 0.5
  before="$(kib "$SP" VmRSS)"
  t0="$(now)"
  for s in $(seq "$N"); do
    "$BUILD/engine" start tests/bench/flood_bench.lua --id "fl$s" --detach --input "{\"bytes\": $BYTES}" >/dev/null 2>&1 || true
  done
  while :; do
    done_n="$("$BUILD/engine" list --status completed | tail -n +2 | wc -l)"
    failed_n="$("$BUILD/engine" list --status failed | tail -n +2 | wc -l)"
    [ $((done_n + failed_n)) -ge "$N" ] && break
    sleep 0.2
  done
  wall="$(awk -v a="$(now)" -v b="$t0" 'BEGIN{print a-b}')"
  peak="$(kib "$SP" VmHWM)"
  kill "$SP"; wait "$SP" 2>/dev/null || true; SP=
  note=""
  if [ "$failed_n" -gt 0 ]; then
    f="$("$BUILD/engine" list --status failed | awk 'NR == 2 {print $1}')"
    note=" ($failed_n failed, $f: $("$BUILD/engine" show "$f" --json | lua5.4 -e 'local j = require"cjson".decode(io.read("a")); io.write(tostring(j.error and (j.error.message or j.error)):sub(1, 200))'))"
  fi
  printf '| %s | %d x %d | %.1f | %.1f | %.1f%s |\n' "$driver" "$N" "$BYTES" "$(awk -v k="$before" 'BEGIN{print k/1024}')" \
    "$(awk -v k="$peak" 'BEGIN{print k/1024}')" "$wall" "$note"
done
