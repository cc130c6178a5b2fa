#!/usr/bin/env bash
# Several workers on one PostgreSQL beside the engine on SQLite, one run:
# N chain10 workflows (10 sequential steps, the peers' W1 shape) are queued
# first, then K `engine serve` processes drain them; the time from the first
# worker's start to the last completion gives workflows/s, printed with the
# ratio to SQLite's single worker. Then, with three workers on chains of
# 10 ms steps (tests/integration/wf/chain10.lua), the busiest is killed
# with -9 while it holds workflows: how long until the others hold every one
# of them (its session's liveness lock goes with it), and how many steps ran
# twice.
# BASE_BUILD=another build directory adds a row for its engine on
# PostgreSQL with one worker (an earlier commit beside this one, one run).
# DELAY_MS puts the database "across the network" for the workers (not for
# the set-up and the polling): delay_proxy.py delays every chunk that much
# each way, where what bounds a worker is its waits, not this machine's CPUs.
#   tests/bench/pg_workers_bench.sh    (BUILD=build N=2000 BASE_BUILD= DELAY_MS=0)
set -euo pipefail
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD:-$SRC/build}"
N="${N:-2000}"
source "$SRC/tests/bench/pg_lib.sh"
DELAY_MS="${DELAY_MS:-0}" DBPORT="$PORT"
if [ "$DELAY_MS" != 0 ]; then
  python3 "$SRC/tests/bench/delay_proxy.py" "$T/proxy.port" 127.0.0.1 "$PORT" "$DELAY_MS" & PIDS+=($!)
  for _ in $(seq 100); do [ -s "$T/proxy.port" ] && break; sleep 0.05; done
  DBPORT="$(cat "$T/proxy.port")"
fi

done_count() { # db (PostgreSQL: on the connection poll_open opened to it)
  if [[ "$1" == postgres* ]]; then
    poll_q "SELECT count(*) FROM workflows WHERE status='completed'"
  else
    sqlite3 "$1" "SELECT count(*) FROM workflows WHERE status='completed'" 2>/dev/null || echo 0
  fi
}
fresh() { # name -> a database with the queue in it
  if [ "$1" == sqlite ]; then cp "$T/queue.db" "$T/sqlite.db"; echo "$T/sqlite.db"; return; fi
  "$PGBIN/createdb" -h 127.0.0.1 -p "$PORT" -U engine "$1"
  "$ENGINE" migrate --from "$T/queue.db" --to "postgres://engine@127.0.0.1:$PORT/$1" >/dev/null
  echo "postgres://engine@127.0.0.1:$PORT/$1"
}
# drain DB K [ENGINE]: K workers until N are done; prints the seconds it took
drain() {
  local db="$1" k="$2" bin="${3:-$ENGINE}" t0 t1 w=()
  t0="$(ms)"
  local via="${db/:$PORT\//:$DBPORT/}" # the workers' way to the database (through the proxy)
  [[ "$db" == postgres* ]] && poll_open "$db"
  for i in $(seq "$k"); do ENGINE_DB="$via" "$bin" serve 2>>"$T/serve.err" & w+=($!); PIDS+=($!); done
  while [ "$(done_count "$db")" -lt "$N" ]; do sleep 0.05; done
  t1="$(ms)"
  [[ "$db" == postgres* ]] && poll_close
  kill "${w[@]}"; wait "${w[@]}" 2>/dev/null || true
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", (b - a) / 1000}'
}

ROWS=()
base="" pg1=""
CFGS=("sqlite 1" "pg 1" "pg 2" "pg 3")
[ -n "${BASE_BUILD:-}" ] && CFGS+=("pgbase 1")
for cfg in "${CFGS[@]}"; do
  set -- $cfg
  db="$(fresh "$1$2")"
  bin="$ENGINE" name=PostgreSQL
  [ "$1" == sqlite ] && name=SQLite
  [ "$1" == pgbase ] && bin="$BASE_BUILD/engine" name="PostgreSQL, $(basename "$BASE_BUILD")"
  secs="$(drain "$db" "$2" "$bin")"
  echo "$1 x $2: $N in $secs s" >&2
  rate="$(awk -v n="$N" -v s="$secs" 'BEGIN {printf "%d", n / s}')"
  [ -z "$base" ] && base="$rate"
  [ "$1" == pg ] && [ -z "$pg1" ] && pg1="$rate"
  vs1="-"; [ "$1" == pg ] && vs1="$(awk -v r="$rate" -v b="$pg1" 'BEGIN {printf "%.2f", r / b}')"
  ROWS+=("| $name | $2 | $secs s | $rate | $(awk -v r="$rate" -v b="$base" 'BEGIN {printf "%.2f", r / b}') | $vs1 |")
done

# takeover: three workers, the busiest killed with -9 halfway, on chains
# whose steps take 10 ms (the bench's steps end at once, so a workflow ends
# within one batch and no lease is ever seen held)
seq "$N" | xargs -P 8 -I{} "$ENGINE" start "$SRC/tests/integration/wf/chain10.lua" --db "$T/slow.db" --id "s-{}" \
  --detach --input '{"seconds":0.01}' >/dev/null 2>&1 || true
"$PGBIN/createdb" -h 127.0.0.1 -p "$PORT" -U engine takeover
db="postgres://engine@127.0.0.1:$PORT/takeover"
"$ENGINE" migrate --from "$T/slow.db" --to "$db" >/dev/null
export TEST_SIDE_EFFECTS="$T/steps"
: >"$TEST_SIDE_EFFECTS"
w=()
poll_open "$db"
for i in 1 2 3; do ENGINE_DB="${db/:$PORT\//:$DBPORT/}" "$ENGINE" serve 2>>"$T/serve.err" & w+=($!); PIDS+=($!); done
while [ "$(done_count "$db")" -lt $((N / 2)) ]; do sleep 0.05; done
q() { poll_q "$1"; }
victim=""
while [ -z "$victim" ] && [ "$(done_count "$db")" -lt "$N" ]; do
  victim="$(q "SELECT split_part(owner, '-', 1) FROM leases GROUP BY 1 ORDER BY count(*) DESC LIMIT 1")"
done
[ -n "$victim" ] || { echo "no worker held a workflow at N/2: use a larger N" >&2; exit 1; }
held="$(q "SELECT count(*) FROM leases WHERE owner LIKE '$victim-%'")"
kill -9 "$victim"
t0="$(ms)"
while [ "$(q "SELECT count(*) FROM leases WHERE owner LIKE '$victim-%'")" != 0 ]; do sleep 0.01; done
t1="$(ms)"
while [ "$(done_count "$db")" -lt "$N" ]; do sleep 0.05; done
poll_close
kill "${w[@]}" 2>/dev/null || true; wait "${w[@]}" 2>/dev/null || true
twice="$(awk '$2 == "step" {print $1}' "$TEST_SIDE_EFFECTS" | sort | uniq -c | awk '$1 > 1' | wc -l)"

echo "chain10, $N workflows queued, then drained by K workers on one database, PostgreSQL $DELAY_MS ms away each way (one run, $(nproc) CPUs)"
echo
echo "| store | workers | drained in | workflows/s | vs SQLite | vs 1 worker |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${ROWS[@]}"
echo
echo "| takeover (3 workers, the busiest killed with -9 at N/2) | |"
echo "|---|---|"
echo "| workflows it held | $held |"
echo "| until the others held them all | $((t1 - t0)) ms |"
echo "| steps that ran twice | $twice of $((N * 10)) |"
