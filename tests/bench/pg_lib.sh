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
