#!/usr/bin/env bash
# Child workflows beside independent ones, same engine settings, one process
# per store: PARENTS parents each starting CHILDREN children (wf.start_child,
# then wf.all), and the same child work as PARENTS x CHILDREN independent
# workflows started with engine_submit as the parents are. Each child (and
# each independent workflow) runs STEPS sequential activity steps
# (child_work.lua). LANES parents at once, LANES x CHILDREN independents at
# once: the same child work in flight (by default 200, within the worker's
# run cache, ENGINE_MAX_CACHED_RUNS=256; past it independents waiting for
# their start's commit are evicted and replayed). Medians of ROUNDS
# interleaved rounds, each on fresh databases; every result is checked.
# Instructions per child-work workflow from callgrind (SQLite): (Ir at
# 3*CG_N parents - Ir at CG_N) / (2*CG_N*CHILDREN), so opening the engine
# drops out (CG_N >= LANES keeps both at full concurrency). The issue's
# target: children cost at most 1.5x.
#   tests/bench/children_bench.sh   (BUILD=build PARENTS=1000 CHILDREN=10 LANES=20 STEPS=1 ROUNDS=3
#                                    CG_N=20 (0 skips callgrind) STORES="sqlite postgres")
set -euo pipefail
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD:-$SRC/build}"
PARENTS="${PARENTS:-1000}" CHILDREN="${CHILDREN:-10}" LANES="${LANES:-20}" STEPS="${STEPS:-1}"
ROUNDS="${ROUNDS:-3}" CG_N="${CG_N:-20}" STORES="${STORES:-sqlite postgres}"
BIN="$BUILD/tests/bench/children_bench"
export ENGINE_LUA_DIR="$SRC/lua"
# every parent runs its CHILDREN at once: the fan-out limit (default 8) lets them
export ENGINE_CHILD_MAX_FANOUT="$(( CHILDREN > 8 ? CHILDREN : 8 ))"
T="$(mktemp -d "${TMPDIR:-/tmp}/children-bench.XXXXXX")"
trap '[ -d "$T/pg" ] && "$SRC/scripts/start-postgres" --stop "$T/pg" >/dev/null 2>&1; rm -rf "$T"' EXIT
chmod 711 "$T" # the PostgreSQL server may run as nobody (scripts/start-postgres)

run_store() { # store -> $T/rate.store
  local spec
  case "$1" in
    sqlite) mkdir -p "$T/sqlite"; spec="$T/sqlite/" ;;
    postgres)
      local url base r
      url="$("$SRC/scripts/start-postgres" "$T/pg")"
      base="${url%/*}"
      for r in $(seq 0 $((ROUNDS - 1))); do
        psql -XAtq "$url" -c "CREATE DATABASE cb_p$r" -c "CREATE DATABASE cb_i$r" >/dev/null
      done
      spec="$base/cb_" ;;
    *) echo "children_bench.sh: unknown store $1 (sqlite, postgres)" >&2; exit 2 ;;
  esac
  "$BIN" "$spec" "$PARENTS" "$CHILDREN" "$LANES" "$STEPS" "$ROUNDS" >"$T/rate.$1"
}

# instructions of the whole process for n parents' worth of one mode (SQLite)
ir() {
  local out="$T/cg.$1.$2"
  mkdir -p "$T/db.$1.$2"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN" "$T/db.$1.$2/" "$2" "$CHILDREN" "$LANES" "$STEPS" 1 "$1" \
    >/dev/null 2>"$out.log"
  awk '/^summary:/ {print $2}' "$out"
}
per_unit() { # mode -> M instructions per child-work workflow
  local a b
  a="$(ir "$1" "$CG_N")"; b="$(ir "$1" $((3 * CG_N)))"
  awk -v a="$a" -v b="$b" -v n="$((CG_N * CHILDREN))" 'BEGIN{printf "%.2f", (b - a) / (2 * n) / 1e6}'
}

for s in $STORES; do run_store "$s"; done
if [ "$CG_N" -gt 0 ] && command -v valgrind >/dev/null; then
  cg_p="$(per_unit parents)"; cg_i="$(per_unit independent)"
  cg_r="$(awk -v p="$cg_p" -v i="$cg_i" 'BEGIN{printf "%.2f", p / i}')"
else
  cg_p="-" cg_i="-" cg_r="-"
fi

get() { awk -v k="$2" '$1 == k {print $2}' "$T/rate.$1"; }
printf '| %d parents x %d children (%d step%s each), %d parents at once | store | seconds | workflows/s | CPU s | commits | writes | events | round trips | M instructions |\n' \
  "$PARENTS" "$CHILDREN" "$STEPS" "$([ "$STEPS" = 1 ] || echo s)" "$LANES"
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for s in $STORES; do
  for m in parents independent; do
    c="-" t="-"
    if [ "$m" = parents ]; then label="parents with children (per child)"; [ "$s" = sqlite ] && c="$cg_p"
    else label="$((PARENTS * CHILDREN)) independent workflows"; [ "$s" = sqlite ] && c="$cg_i"; fi
    [ "$s" = postgres ] && t="$(get "$s" ${m}_round_trips_per_unit)"
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$s" "$(get "$s" ${m}_secs)" \
      "$(get "$s" ${m}_units_per_s)" "$(get "$s" ${m}_cpu_secs)" "$(get "$s" ${m}_commits_per_unit)" \
      "$(get "$s" ${m}_writes_per_unit)" "$(get "$s" ${m}_events_per_unit)" "$t" "$c"
  done
  c="-"; [ "$s" = sqlite ] && c="$cg_r"
  printf '| **children / independent** (target <= 1.5) | %s | **%s** | | %s | | | | | %s |\n' "$s" \
    "$(get "$s" ratio_wall)" "$(get "$s" ratio_cpu)" "$c"
done
if [ -n "${KEEP_CALLGRIND:-}" ] && [ "$cg_p" != - ]; then cp "$T"/cg.*.$((3 * CG_N)) "$KEEP_CALLGRIND"/; fi
