#!/usr/bin/env bash
# What a concurrency limit costs and how it shares, as ratios from one run
# (never a timed test):
#   W1 (chain10, LANES lanes each waiting for its workflow) without a limit,
#   with a key per workflow (acquire + release, never waited for), and with one
#   key for all limited to CAP at once;
#   fairness: A, B and C workflows of keys a, b, c (unequal load) started at once,
#   LIMIT per key: each key's share of the completions while all three had work.
#
#   tests/bench/caps_bench.sh     (medians of 3 rounds; BUILD=build, N=2000 LANES=50 CAP=8, A/B/C=300/100/30 LIMIT=2)
set -euo pipefail
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD:-$SRC/build}"
N="${N:-2000}" LANES="${LANES:-50}" CAP="${CAP:-8}" A="${A:-300}" B="${B:-100}" C="${C:-30}" LIMIT="${LIMIT:-2}"
BIN="$BUILD/tests/bench/caps_bench"
export ENGINE_LUA_DIR="$SRC/lua"
T="$(mktemp -d "${TMPDIR:-/tmp}/caps-bench.XXXXXX")"
trap 'rm -rf "$T"' EXIT
get() { awk -v k="$2" '$1 == k {print $2}' "$T/$1"; }

# three rounds, interleaved: each figure is the median of its three
for round in 1 2 3; do
  "$BIN" w1 "$T/plain$round.db" "$N" "$LANES" chain10.lua >"$T/plain$round"
  "$BIN" w1 "$T/keyed$round.db" "$N" "$LANES" chain10_keyed.lua >"$T/keyed$round"
  "$BIN" w1 "$T/capped$round.db" "$N" "$LANES" chain10_keyed.lua "$CAP" >"$T/capped$round"
done
for f in plain keyed capped; do
  for k in workflows_per_s p50_ms p99_ms; do
    echo "$k $(for r in 1 2 3; do get "$f$r" "$k"; done | sort -n | sed -n 2p)"
  done >"$T/$f"
done
"$BIN" fair "$T/fair.db" "$A" "$B" "$C" "$LIMIT" >"$T/fair"

base="$(get plain workflows_per_s)"
printf '| W1 chain10, %d workflows, %d lanes | workflows/s | vs no limit | p50 ms | p99 ms |\n|---|---|---|---|---|\n' "$N" "$LANES"
for r in "plain:no limit" "keyed:a key per workflow (limit 1)" "capped:one key, $CAP at once"; do
  f="${r%%:*}"
  printf '| %s | %s | %.2f | %s | %s |\n' "${r#*:}" "$(get "$f" workflows_per_s)" \
    "$(awk -v a="$(get "$f" workflows_per_s)" -v b="$base" 'BEGIN{print a/b}')" "$(get "$f" p50_ms)" "$(get "$f" p99_ms)"
done
printf '\n| fairness: keys a, b, c with %d, %d, %d workflows, %d at once per key | share a | share b | share c | completions counted |\n|---|---|---|---|---|\n' "$A" "$B" "$C" "$LIMIT"
printf '| while every key had work queued | %s | %s | %s | %s |\n' "$(get fair share_a)" "$(get fair share_b)" "$(get fair share_c)" "$(get fair counted)"
