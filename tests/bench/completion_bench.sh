#!/usr/bin/env bash
# How long `engine __complete ids` (what a Tab on an id runs) takes on a
# database of N workflows (default 10,001): the median of R runs (default 5)
# for each prefix, as a table. (test_completion.sh checks what it offers on
# the same kind of database; how fast is measured here, not there.)
#   tests/bench/completion_bench.sh [N] [R]
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-10001}"; R="${2:-5}"
BUILD="${ENGINE_BUILD:-build}"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
export ENGINE_LUA_DIR="$PWD/lua"
B="$T/bulk.db"
printf 'return function() return 1 end\n' >"$T/tiny.lua"
"$BUILD/engine" start "$T/tiny.lua" --id seed --db "$B" >/dev/null 2>&1
sqlite3 "$B" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $((N - 1)))
  INSERT INTO workflows(id,run,status,script_name,script_dir,code_hash,input,result,error,cancel,created_at,updated_at)
  SELECT printf('bulk-%05d', i), run, CASE i % 3 WHEN 0 THEN 'waiting' ELSE 'completed' END, script_name,
         script_dir, code_hash, input, result, error, cancel, created_at + i, updated_at + i
  FROM n, workflows WHERE id = 'seed'"
now_ns() { date +%s%N; }
printf '| prefix | ids offered | median ms of %s |\n|---|---|---|\n' "$R"
for p in "" bulk-0 bulk-05 bulk-077 bulk-0999 bulk-1 seed x; do
  ms=()
  for _ in $(seq "$R"); do
    t0=$(now_ns)
    n=$("$BUILD/engine" __complete ids --db "$B" $p | wc -l)
    ms+=($((($(now_ns) - t0) / 1000000)))
  done
  med=$(printf '%s\n' "${ms[@]}" | sort -n | sed -n "$(((R + 1) / 2))p")
  printf '| %s | %s | %s |\n' "${p:-(none)}" "$n" "$med"
done
