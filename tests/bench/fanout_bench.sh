#!/usr/bin/env bash
# W1 (chain10: 10 sequential steps) beside fanout10 (the same 10 steps started
# together with wf.start_activity, then wf.all), same engine settings, one run:
# workflows/s and activities/s (medians of ROUNDS interleaved rounds of N
# workflows, LANES lanes each waiting for its workflow), their ratio, and the
# instructions per workflow callgrind counts: (Ir at 3*CG_N - Ir at CG_N) / (2*CG_N),
# so the fixed cost of opening the engine and loading Lua drops out.
#   tests/bench/fanout_bench.sh    (BUILD=build N=5000 LANES=50 ROUNDS=3 CG_N=100; CG_N=0 skips callgrind)
set -euo pipefail
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD:-$SRC/build}"
N="${N:-5000}" LANES="${LANES:-50}" ROUNDS="${ROUNDS:-3}" CG_N="${CG_N:-100}"
BIN="$BUILD/tests/bench/fanout_bench"
export ENGINE_LUA_DIR="$SRC/lua"
T="$(mktemp -d "${TMPDIR:-/tmp}/fanout-bench.XXXXXX")"
trap 'rm -rf "$T"' EXIT
get() { awk -v k="$1" '$1 == k {print $2}' "$T/rate"; }

"$BIN" "$T" "$N" "$LANES" "$ROUNDS" >"$T/rate"

# instructions of the whole process for n workflows of a script
ir() {
  local out="$T/cg.$1.$2"
  mkdir -p "$T/db.$1.$2"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN" "$T/db.$1.$2" "$2" "$LANES" 1 "$1" >/dev/null 2>"$out.log"
  awk '/^summary:/ {print $2}' "$out"
}
per_wf() { # script
  local a b
  a="$(ir "$1" "$CG_N")"; b="$(ir "$1" $((3 * CG_N)))"
  awk -v a="$a" -v b="$b" -v n="$CG_N" 'BEGIN{printf "%.2f", (b - a) / (2 * n) / 1e6}'
}
if [ "$CG_N" -gt 0 ] && command -v valgrind >/dev/null; then
  ci="$(per_wf chain10.lua)"; fi="$(per_wf fanout10.lua)"
else
  ci="-" fi="-"
fi

printf '| %d workflows x 10 steps, %d lanes | workflows/s | activities/s | vs chain10 | M instructions / workflow (callgrind) |\n' "$N" "$LANES"
printf '|---|---|---|---|---|\n'
printf '| chain10 (sequential wf.activity) | %s | %s | 1.00 | %s |\n' "$(get chain_workflows_per_s)" "$(get chain_activities_per_s)" "$ci"
printf '| fanout10 (start_activity x 10, wf.all) | %s | %s | %s | %s |\n' "$(get fanout_workflows_per_s)" "$(get fanout_activities_per_s)" "$(get fanout_vs_chain)" "$fi"
if [ -n "${KEEP_CALLGRIND:-}" ]; then cp "$T"/cg.*.$((3 * CG_N)) "$KEEP_CALLGRIND"/; fi
