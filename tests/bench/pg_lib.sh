# The PostgreSQL benches' setup (sourced after SRC, BUILD and N are set): a
# private cluster in a temporary folder (T, URL, PGBIN, PORT), stopped with
# every process in PIDS at exit; ms(); and the queue: N chain10 workflows
# made once on SQLite without a worker ($T/queue.db), for engine migrate to
# copy into each database.
ENGINE="$BUILD/engine"
export ENGINE_LUA_DIR="$SRC/lua" LUA_CPATH_5_4="$BUILD/?.so;;"
export ENGINE_NO_SWEEP=1 ENGINE_NO_POLICY_WATCH=1 ENGINE_BUSY_TIMEOUT_MS=30000
T="$(mktemp -d "${TMPDIR:-/tmp}/$(basename "$0" .sh).XXXXXX")"
export ENGINE_DATA_DIR="$T/data"
PIDS=()
trap 'for p in "${PIDS[@]:-}"; do [ -n "$p" ] && { kill -9 "$p" 2>/dev/null || true; }; done; "$SRC/scripts/start-postgres" --stop "$T/pg" >/dev/null 2>&1 || true; rm -rf "$T"' EXIT
chmod 711 "$T" # the server may run as nobody (scripts/start-postgres)
URL="$("$SRC/scripts/start-postgres" "$T/pg")"
PGBIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
PORT="$(echo "$URL" | sed 's#.*:\([0-9]*\)/.*#\1#')"
ms() { date +%s%3N; }
seq "$N" | xargs -P 8 -I{} "$ENGINE" start "$SRC/tests/bench/chain10.lua" --db "$T/queue.db" --id "c-{}" \
  --detach --input '0' >/dev/null 2>&1 || true
# poll_open URL: one psql kept open for a run's polls (poll_q SQL: one
# value, empty for no row, read on it; a psql of its own if that one does
# not answer within 30 s); poll_close ends it. A psql and a server backend
# started 20 times a second (100 for the takeover) took about a quarter of a
# CPU from the drain they timed, counted as the server's (its ended
# backends' CPU).
poll_open() { POLL_URL="$1"; coproc POLL { "$PGBIN/psql" "$1" -XAtq 2>/dev/null; }; }
poll_q() {
  local v=""
  { echo "SELECT ($1);" >&"${POLL[1]}" && read -t 30 -r v <&"${POLL[0]}"; } 2>/dev/null ||
    v="$("$PGBIN/psql" "$POLL_URL" -XAtqc "SELECT ($1)")"
  echo "$v"
}
poll_close() { local p="$POLL_PID"; exec {POLL[1]}>&-; wait "$p" 2>/dev/null || true; }
# Where the CPU went over a window: cpu_mark VAR ENGINE-PID [PROXY-PID]
# keeps the jiffies of the engine, of the cluster (its processes, and the
# backends that ended: postmaster's cutime), of the delay proxy and of the
# machine (/proc/stat); cpu_since VAR prints "engine postgres proxy machine"
# between the mark and now, in percent of one CPU (the machine's: busy, of
# all its CPUs), so a run shows whether the CPUs or the waits bound it.
cpu_of() { local t=0 p; for p in "$@"; do [ "$p" -gt 0 ] && [ -r "/proc/$p/stat" ] && t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
cpu_pg() { local pm; pm="$(head -1 "$T/pg/data/postmaster.pid")"; echo $(( $(cpu_of "$pm" $(pgrep -P "$pm")) + $(awk '{print $16 + $17}' "/proc/$pm/stat") )); }
cpu_machine() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8}' /proc/stat; }
cpu_mark() { printf -v "$1" '%s ' "$(cpu_of "$2")" "$(cpu_pg)" "$(cpu_of "${3:-0}")" "$(cpu_machine)" "$(ms)" "$2" "${3:-0}"; }
cpu_since() {
  local -a m=(${!1}) now=($(cpu_machine))
  awk -v e="$(( $(cpu_of "${m[6]}") - m[0] ))" -v p="$(( $(cpu_pg) - m[1] ))" -v x="$(( $(cpu_of "${m[7]}") - m[2] ))" \
      -v b="$(( now[0] - m[3] ))" -v t="$(( now[1] - m[4] ))" -v s="$(( $(ms) - m[5] ))" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { f = 100 / hz / (s / 1000); printf "%.0f %.0f %.0f %.0f", e * f, p * f, x * f, 100 * b / t }'
}
