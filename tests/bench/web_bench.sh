#!/usr/bin/env bash
# The web page's speed, in the browser's own performance timings (headless
# Debian chromium driven by puppeteer-core, tests/web/web_bench.js): for
# sessions of 10, 1,000 and 20,000 events, the time from navigation to the
# first transcript item drawn, to the whole transcript loaded (every event
# received over SSE, its window drawn), and to the engine-history tab loaded
# (every history event fetched, its visible rows drawn). Each is the median of
# RUNS page loads. Printed as a table; never a timed test.
#
#   tests/bench/web_bench.sh        (BUILD=build, SIZES="10 1000 20000", RUNS=5)
set -euo pipefail
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD:-$SRC/build}"
SIZES="${SIZES:-10 1000 20000}" RUNS="${RUNS:-5}"
ENGINE="$BUILD/engine"
export ENGINE_LUA_DIR="$SRC/lua"
T="$(mktemp -d "${TMPDIR:-/tmp}/web-bench.XXXXXX")"
export ENGINE_DB="$T/bench.db"
SERVER=""
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$T"' EXIT
(cd "$SRC/tests/web" && node -e 'require("puppeteer-core"); require("axe-core")' 2>/dev/null) ||
  (cd "$SRC/tests/web" && npm install --no-package-lock --no-audit --no-fund --loglevel=error >/dev/null)

# the base URL the serve writing to $T/serve.err announces (waits up to 10 s)
api_url() {
  local u="" i
  for i in $(seq 200); do
    u="$(grep -o 'API on http://[0-9.:]*' "$T/serve.err" | cut -c8- || true)"
    [ -n "$u" ] && break
    sleep 0.05
  done
  echo "$u"
}

# sessions of N domain events each (tests/integration/wf/many_events.lua), run to the end here
for n in $SIZES; do
  "$ENGINE" start "$SRC/tests/integration/wf/many_events.lua" --id "ev-$n" --input "{\"n\":$n}" --quiet >/dev/null
done
: >"$T/serve.err"
"$ENGINE" serve --listen 127.0.0.1:0 --workflows "$SRC/workflows" 2>"$T/serve.err" &
SERVER=$!
URL="$(api_url)"
[ -n "$URL" ] || { echo "engine serve did not start: $(cat "$T/serve.err")" >&2; exit 1; }
WEB_URL="$URL" WEB_SIZES="$SIZES" WEB_RUNS="$RUNS" WEB_CHROME="${ENGINE_CHROMIUM:-/usr/bin/chromium}" \
  node "$SRC/tests/web/web_bench.js"

# the sessions list with LIST_N workflows (copies of one session's row, written
# straight into the database: the list reads rows, it does not run them)
LIST_N="${LIST_N:-100000}"
kill "$SERVER" && wait "$SERVER" 2>/dev/null || true
SERVER=""
sqlite3 "$ENGINE_DB" "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $LIST_N)
  INSERT INTO workflows(id, run, status, script_name, script_dir, code_hash, input, result, error, cancel, created_at, updated_at)
  SELECT printf('list-%06d', i), run, status, script_name, script_dir, code_hash,
         json_object('objective', printf('objective number %d', i), 'identity', 'token:bench'), result, error, cancel,
         created_at + i, updated_at + i FROM workflows, c WHERE id = 'ev-10'"
: >"$T/serve.err"
"$ENGINE" serve --listen 127.0.0.1:0 --workflows "$SRC/workflows" 2>"$T/serve.err" &
SERVER=$!
URL="$(api_url)"
t() { # the median of 5 answers' total time, in ms
  for _ in 1 2 3 4 5; do curl -s -o /dev/null -w '%{time_total}\n' "$@"; done | sort -n | sed -n 3p |
    awk '{printf "%.1f ms", $1 * 1000}'
}
CUR="$(curl -s "$URL/v1/workflows?order=newest&limit=50&q=number%205" | lua5.4 -e 'io.write(require"cjson".decode(io.read("a")).next_cursor)')"
rows() { curl -s "$@" | lua5.4 -e 'io.write(#require"cjson".decode(io.read("a")).workflows)'; }
[ "$(rows "$URL/v1/workflows?order=newest&limit=50&fields=session")" == 50 ] || { echo "the list's first page is not 50 rows" >&2; exit 1; }
echo
echo "| sessions list, $LIST_N workflows | answer (median of 5) |"
echo "|---|---:|"
echo "| first page, newest first (50) | $(t "$URL/v1/workflows?order=newest&limit=50&fields=session") |"
echo "| a page 20,000 rows in (its cursor) | $(t --get --data-urlencode "cursor=${CUR}" "$URL/v1/workflows?order=newest&limit=50&fields=session") |"
echo "| text filter, the newest rows match (\"number 9\") | $(t "$URL/v1/workflows?order=newest&limit=50&fields=session&q=number%209") |"
echo "| text filter matching none (reads 20,000, then a cursor) | $(t "$URL/v1/workflows?order=newest&limit=50&fields=session&q=nothing-like-this") |"
