#!/usr/bin/env bash
# The HTTP API's cost, as ratios measured in one run (never a timed test):
#   starts/s acknowledged durably through POST /v1/workflows vs engine_submit in-process
#   (the same noop workflow, the same number of lanes), their p50/p99 latency;
#   webhook deliveries/s accepted durably through POST /hooks/bench (signed GitHub-shaped
#   10 KB bodies: verified, mapped by tests/bench/triggers/bench.lua, recorded, started);
#   SSE: events/s delivered to CLIENTS streams of one session and the lag p99;
#   the server's RSS with IDLE idle SSE connections.
#
#   tests/bench/api_bench.sh            (BUILD=build-me, N=3000 LANES=32 CLIENTS=100 TICKS=300 IDLE=1000)
set -euo pipefail
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD:-$SRC/build}"
N="${N:-3000}" LANES="${LANES:-32}" CLIENTS="${CLIENTS:-100}" TICKS="${TICKS:-300}" IDLE="${IDLE:-1000}"
BIN="$BUILD/tests/bench/api_bench" ENGINE="$BUILD/engine"
export ENGINE_LUA_DIR="$SRC/lua" BENCH_WEBHOOK_SECRET="bench webhook secret" ENGINE_TRIGGERS_DIR="$SRC/tests/bench/triggers"
T="$(mktemp -d "${TMPDIR:-/tmp}/api-bench.XXXXXX")"
SERVER=""
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$T"' EXIT
ulimit -n "$(ulimit -Hn)"

serve() { # starts a server on a fresh database; sets URL and SERVER
  local db="$T/$1.db"
  : >"$T/$1.err" # before the server writes it: the loop below reads it at once
  "$ENGINE" serve --db "$db" --listen 127.0.0.1:0 --workflows "$SRC/tests/bench" 2>"$T/$1.err" &
  SERVER=$!
  for _ in $(seq 100); do
    URL="$(grep -o 'http://[0-9.:]*' "$T/$1.err" || true)"
    [ -n "$URL" ] && return 0
    sleep 0.05
  done
  echo "api_bench: the server did not start: $(cat "$T/$1.err")" >&2
  exit 1
}
stop() { kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=""; }

"$BIN" inproc "$T/inproc.db" "$N" "$LANES" >"$T/out"
serve starts
"$BIN" starts "$URL" "$N" "$LANES" >>"$T/out"
stop
serve hooks
"$BIN" hooks "$URL" "$N" "$LANES" >>"$T/out"
stop
serve sse
"$BIN" sse "$URL" "$CLIENTS" "$TICKS" >>"$T/out"
stop
serve idle
"$BIN" idle "$URL" "$IDLE" "$SERVER" >>"$T/out"
stop

v() { awk -v k="$1" '$1 == k { print $2 }' "$T/out"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
printf '%-44s %12s %12s %8s\n' "measure ($N starts, $LANES lanes)" "in-process" "HTTP API" "ratio"
printf '%-44s %12s %12s %8s\n' "starts/s acknowledged durably" "$(v inproc_starts_per_s)" "$(v http_starts_per_s)" \
  "$(ratio "$(v http_starts_per_s)" "$(v inproc_starts_per_s)")"
printf '%-44s %12s %12s %8s\n' "start latency p50 (ms)" "$(v inproc_starts_p50_ms)" "$(v http_starts_p50_ms)" \
  "$(ratio "$(v http_starts_p50_ms)" "$(v inproc_starts_p50_ms)")"
printf '%-44s %12s %12s %8s\n' "start latency p99 (ms)" "$(v inproc_starts_p99_ms)" "$(v http_starts_p99_ms)" \
  "$(ratio "$(v http_starts_p99_ms)" "$(v inproc_starts_p99_ms)")"
printf '%-44s %12s %12s %8s\n' "webhooks: deliveries/s accepted durably" "" "$(v hook_starts_per_s)" \
  "$(ratio "$(v hook_starts_per_s)" "$(v http_starts_per_s)")"
printf '%-44s %12s %12s %8s\n' "webhooks: time to the 202 p50 (ms)" "" "$(v hook_starts_p50_ms)" \
  "$(ratio "$(v hook_starts_p50_ms)" "$(v http_starts_p50_ms)")"
printf '%-44s %12s %12s %8s\n' "webhooks: time to the 202 p99 (ms)" "" "$(v hook_starts_p99_ms)" \
  "$(ratio "$(v hook_starts_p99_ms)" "$(v http_starts_p99_ms)")"
echo "(the webhook ratios are to the HTTP API's start route, not to in-process)"
echo
printf '%-44s %12s\n' "SSE: $CLIENTS clients x $TICKS events, delivered" "$(v sse_events_delivered)"
printf '%-44s %12s\n' "SSE: events/s delivered (all clients)" "$(v sse_events_per_s)"
printf '%-44s %12s\n' "SSE: lag emit -> client p50 (ms)" "$(v sse_lag_p50_ms)"
printf '%-44s %12s\n' "SSE: lag emit -> client p99 (ms)" "$(v sse_lag_p99_ms)"
printf '%-44s %12s\n' "SSE: clients that missed events" "$(v sse_clients_short)"
echo
b="$(v idle_rss_before_kib)" a="$(v idle_rss_after_kib)"
printf '%-44s %12s\n' "idle SSE streams open" "$(v idle_streams_open)"
printf '%-44s %12s\n' "server RSS before (MiB)" "$(awk -v k="$b" 'BEGIN { printf "%.1f", k / 1024 }')"
printf '%-44s %12s\n' "server RSS with them (MiB)" "$(awk -v k="$a" 'BEGIN { printf "%.1f", k / 1024 }')"
printf '%-44s %12s\n' "per idle stream (KiB)" "$(awk -v a="$a" -v b="$b" -v n="$IDLE" 'BEGIN { printf "%.1f", (a - b) / n }')"
