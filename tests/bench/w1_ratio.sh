#!/usr/bin/env bash
# W1 (chain10, 50 lanes, embedded: engine_driver w1) of two builds, run
# interleaved on the same machine: each round runs the build before, then
# this one, on a fresh database; prints each run (workflows/s, user and
# system CPU seconds, database size) and the medians and their ratios. CPU
# time counts what the process did, so it wanders less than wall time on a
# shared machine; neither is a timing assertion, only a measurement.
#   BEFORE=/tmp/before tests/bench/w1_ratio.sh [ROUNDS] [N]
# BEFORE: a source tree of the earlier commit with its build in BEFORE/build
# (cmake --build BEFORE/build --target engine_driver); AFTER (default: this
# tree) likewise. ROUNDS 5, N (W1_N) 2000 by default.
set -euo pipefail
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
BEFORE="${BEFORE:?BEFORE=source tree of the build before (with build/)}"
AFTER="${AFTER:-$SRC}"
ROUNDS="${1:-5}" N="${2:-2000}"
T="$(mktemp -d "${TMPDIR:-/tmp}/w1-ratio.XXXXXX")"
trap 'rm -rf "$T"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for which in before after; do
    if [ "$which" = before ]; then S="$BEFORE"; else S="$AFTER"; fi
    rm -f "$T"/w1.db*
    /usr/bin/time -f "%U %S" -o "$T/time" env W1_N="$N" ENGINE_BENCH_DIR="$S/tests/bench" ENGINE_LUA_DIR="$S/lua" \
      ENGINE_BENCH_DB="$T/w1.db" RESULTS_FILE=/dev/null "$S/build/tests/bench/engine_driver" w1 >"$T/out" 2>&1
    wf="$(grep -o '"wf_per_s":[0-9.]*' "$T/out" | cut -d: -f2)"
    read -r u s <"$T/time"
    echo "$which $r wf_per_s=$wf user=$u sys=$s cpu=$(awk -v u="$u" -v s="$s" 'BEGIN{print u+s}') db_bytes=$(stat -c %s "$T/w1.db")" |
      tee -a "$T/runs"
  done
done
med() { grep "^$1 " "$T/runs" | sed "s/.* $2=\([0-9.]*\).*/\1/" | sort -n | awk '{a[NR]=$1} END{print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
for k in wf_per_s cpu db_bytes; do
  b="$(med before $k)" a="$(med after $k)"
  printf '%-9s median before %s, after %s, ratio %s\n' "$k" "$b" "$a" \
    "$(awk -v a="$a" -v b="$b" -v k="$k" 'BEGIN{printf "%.2f", k=="wf_per_s" ? a/b : b/a}')"
done
