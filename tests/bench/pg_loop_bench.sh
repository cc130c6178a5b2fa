#!/usr/bin/env bash
# How long the worker's loop is away while it works on PostgreSQL: one
# `engine serve --listen` drains N chain10 workflows (the peers' W1 shape)
# while a client asks it for GET /v1/openapi.json (answered from memory, so
# its latency is the loop's) one request after another, at most one each
# 2 ms; the latency's
# p50/p99/max with and without the load, the drain's workflows/s and the
# round trips its loop waited for per workflow (engine_store_round_trips_total). Then
# starts through POST /v1/workflows from LANES clients at once (api_bench
# starts: each acknowledged once committed), where a commit the loop does
# not wait for lets the next requests in meanwhile.
# BASE_BUILD=another build directory runs the same beside it (an earlier
# commit: the commit answered on a uv_poll, or not), in one run. DELAY_MS
# puts the database "across the network": a proxy (delay_proxy.py) delays
# every chunk by that much each way (0: straight to the server).
# PARKED=K adds K timers an hour away to both databases' queues (workflows
# asleep), which the dispatch's queries should pass over rather than read;
# LANES=1 then shows what each start's dispatch costs. Each row says where
# the CPU went meanwhile (percent of one CPU; the machine's of all of them).
#   tests/bench/pg_loop_bench.sh     (BUILD=build N=3000 BASE_BUILD= DELAY_MS=0 PARKED=0)
set -euo pipefail
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD:-$SRC/build}"
N="${N:-3000}" STARTS="${STARTS:-2000}" LANES="${LANES:-32}" PARKED="${PARKED:-0}"
source "$SRC/tests/bench/pg_lib.sh"
DELAY_MS="${DELAY_MS:-0}" DBPORT="$PORT" PROXY=0
if [ "$DELAY_MS" != 0 ]; then
  python3 "$SRC/tests/bench/delay_proxy.py" "$T/proxy.port" 127.0.0.1 "$PORT" "$DELAY_MS" & PROXY=$!
  PIDS+=("$PROXY")
  for _ in $(seq 100); do [ -s "$T/proxy.port" ] && break; sleep 0.05; done
  DBPORT="$(cat "$T/proxy.port")"
fi

# the client: sequential GETs on one connection until the file $1 exists (or
# for $2 seconds); prints "p50 p99 max count" in ms
cat >"$T/probe.py" <<'EOF'
import http.client, os, sys, time
host, port = sys.argv[1].rsplit(":", 1)
stop, secs = sys.argv[2], float(sys.argv[3])
c = http.client.HTTPConnection(host, int(port))
lat, t_end = [], time.monotonic() + secs
while not os.path.exists(stop) and time.monotonic() < t_end:
    t0 = time.perf_counter()
    c.request("GET", "/v1/openapi.json")
    c.getresponse().read()
    lat.append((time.perf_counter() - t0) * 1000)
    # paced (a request every 2 ms at most): a loop that answers sooner does
    # not buy the probe more of the CPUs the drain shares
    time.sleep(max(0.0, 0.002 - (time.perf_counter() - t0)))
if not lat:  # the drain ended before the first answer
    print("- - - 0")
    sys.exit(0)
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print("%.2f %.2f %.2f %d" % (q(0.5), q(0.99), lat[-1], len(lat)))
EOF

# park DB-URL: PARKED timers an hour away, as workflows asleep leave them
# (rows only: no workflow behind them is ever due within the run)
park() {
  [ "$PARKED" = 0 ] || "$PGBIN/psql" "$1" -XAtqc "INSERT INTO tasks(wf_id,kind,seq,run_at) SELECT
    'parked-' || md5(g::text), 'timer', 1, (extract(epoch FROM now()) * 1000)::bigint + 3600000
    FROM generate_series(1, $PARKED) g; ANALYZE tasks"
}
run() { # name engine-binary -> a table row
  local name="$1" bin="$2" db="postgres://engine@127.0.0.1:$DBPORT/$1" direct="postgres://engine@127.0.0.1:$PORT/$1"
  "$PGBIN/createdb" -h 127.0.0.1 -p "$PORT" -U engine "$1"
  "$bin" migrate --from "$T/queue.db" --to "$direct" >/dev/null
  park "$direct"
  : >"$T/$1.err"
  ENGINE_DB="$db" "$bin" serve --listen 127.0.0.1:0 2>"$T/$1.err" &
  local s=$! api="" t0 t1 idle busy
  PIDS+=("$s")
  for _ in $(seq 200); do api="$(grep -o 'API on http://[0-9.:]*' "$T/$1.err" | cut -c15- || true)"; [ -n "$api" ] && break; sleep 0.05; done
  t0="$(ms)"
  local cpu used
  poll_open "$direct"
  cpu_mark cpu "$s" "$PROXY"
  rm -f "$T/stop"
  busy="$(python3 "$T/probe.py" "$api" "$T/stop" 600 & p=$!
    while [ "$(poll_q "SELECT count(*) FROM workflows WHERE status='completed'")" -lt "$N" ]; do sleep 0.05; done
    touch "$T/stop"; wait "$p")"
  t1="$(ms)"
  used="$(cpu_since cpu | sed 's/ / | /g')"
  poll_close
  idle="$(python3 "$T/probe.py" "$api" "$T/never" 3)"
  # the loop's waits for the database per workflow (a build without the metric: -)
  local waits
  waits="$(curl -sf "http://$api/metrics" | awk -v n="$N" '$1 == "engine_store_round_trips_total" { printf "%.2f", $2 / n }')"
  kill "$s"; wait "$s" 2>/dev/null || true
  set -- $busy
  local b50="$1" b99="$2" bmax="$3" bn="$4"
  set -- $idle
  echo "| $name | $(awk -v n="$N" -v a="$t0" -v b="$t1" 'BEGIN {printf "%d", n / ((b - a) / 1000)}') | ${waits:--} | $b50 | $b99 | $bmax | $bn | $1 | $2 | $used |"
}

# starts/s through the API on a fresh database: a table row
starts() { # name engine-binary
  local db="postgres://engine@127.0.0.1:$DBPORT/$1" api=""
  "$PGBIN/createdb" -h 127.0.0.1 -p "$PORT" -U engine "$1"
  if [ "$PARKED" != 0 ]; then # the schema first, then the parked timers
    "$2" migrate --db "postgres://engine@127.0.0.1:$PORT/$1" >/dev/null
    park "postgres://engine@127.0.0.1:$PORT/$1"
  fi
  : >"$T/$1.err"
  ENGINE_DB="$db" "$2" serve --listen 127.0.0.1:0 --workflows "$SRC/tests/bench" 2>"$T/$1.err" &
  local s=$!
  PIDS+=("$s")
  for _ in $(seq 200); do api="$(grep -o 'API on http://[0-9.:]*' "$T/$1.err" | cut -c8- || true)"; [ -n "$api" ] && break; sleep 0.05; done
  local cpu used
  cpu_mark cpu "$s" "$PROXY"
  "$BUILD/tests/bench/api_bench" starts "$api" "$STARTS" "$LANES" >"$T/$1.starts"
  used="$(cpu_since cpu | sed 's/ / | /g')"
  # the loop's waits for the database per start (and for the runs the starts began)
  local waits
  waits="$(curl -sf "$api/metrics" | awk -v n="$STARTS" '$1 == "engine_store_round_trips_total" { printf "%.2f", $2 / n }')"
  kill "$s"; wait "$s" 2>/dev/null || true
  v() { awk -v k="$1" '$1 == k { print $2 }' "$T/$2.starts"; }
  echo "| ${1%_starts} | $(v http_starts_per_s "$1") | ${waits:--} | $(v http_starts_p50_ms "$1") | $(v http_starts_p99_ms "$1") | $used |"
}

echo "chain10 x $N drained by one serve on PostgreSQL ($DELAY_MS ms each way, $PARKED timers parked an hour away); GET /v1/openapi.json latency (ms) meanwhile (one run, $(nproc) CPUs)"
echo
echo "| engine | workflows/s | waits/workflow | busy p50 | busy p99 | busy max | requests | idle p50 | idle p99 | engine CPU % | postgres CPU % | proxy CPU % | machine busy % |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
run this "$BUILD/engine"
[ -n "${BASE_BUILD:-}" ] && run base "$BASE_BUILD/engine"
echo
echo "$STARTS starts through POST /v1/workflows, $LANES clients at once"
echo
echo "| engine | starts/s | waits/start | p50 ms | p99 ms | engine CPU % | postgres CPU % | proxy CPU % | machine busy % |"
echo "|---|---|---|---|---|---|---|---|---|"
starts this_starts "$BUILD/engine"
[ -n "${BASE_BUILD:-}" ] && starts base_starts "$BASE_BUILD/engine"
exit 0
