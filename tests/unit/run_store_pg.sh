#!/usr/bin/env bash
# unit_store_pg: unit_store's cases on PostgreSQL: a private cluster
# (scripts/start-postgres) in a temporary directory, a fresh database per case
# (ENGINE_TEST_PG_URL), the cluster stopped and removed at the end.
set -euo pipefail
BIN="${1:?usage: run_store_pg.sh UNIT_STORE_BINARY SOURCE_DIR [bugs]}"
SRC="${2:?usage: run_store_pg.sh UNIT_STORE_BINARY SOURCE_DIR [bugs]}"
D="$(mktemp -d "${TMPDIR:-/tmp}/engine-unit-pg.XXXXXX")"
chmod 711 "$D" # the server may run as nobody (scripts/start-postgres)
stop() { "$SRC/scripts/start-postgres" --stop "$D/pg" >/dev/null 2>&1 || true; rm -rf "$D"; }
trap stop EXIT
URL="$("$SRC/scripts/start-postgres" "$D/pg")" || { echo "FAIL: no PostgreSQL cluster (is postgresql-15 installed?)"; exit 1; }
# each case creates and drops a database: with fsync on, each one waited on
# the disk's flushes (beside stress-ng's I/O worker the 21 s run passed 300 s).
# These cases check the store's SQL, not what survives a power cut.
psql "$URL" -Atqc "ALTER SYSTEM SET fsync = off" >/dev/null && psql "$URL" -Atqc "SELECT pg_reload_conf()" >/dev/null
ENGINE_TEST_PG_URL="$URL" "$BIN" "${@:3}" # "bugs": the regression group
