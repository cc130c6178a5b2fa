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

# sessions of N domain events each (tests/integration/wf/many_events.lua), run to the end here
for n in $SIZES; do
  "$ENGINE" start "$SRC/tests/integration/wf/many_events.lua" --id "ev-$n" --input "{\"n\":$n}" --quiet >/dev/null
done
: >"$T/serve.err"
"$ENGINE" serve --listen 127.0.0.1:0 --workflows "$SRC/workflows" 2>"$T/serve.err" &
SERVER=$!
URL=""
for _ in $(seq 200); do
  URL="$(grep -o 'API on http://[0-9.:]*' "$T/serve.err" | cut -c8- || true)"
  [ -n "$URL" ] && break
  sleep 0.05
done
[ -n "$URL" ] || { echo "engine serve did not start: $(cat "$T/serve.err")" >&2; exit 1; }
WEB_URL="$URL" WEB_SIZES="$SIZES" WEB_RUNS="$RUNS" WEB_CHROME="${ENGINE_CHROMIUM:-/usr/bin/chromium}" \
  node "$SRC/tests/web/web_bench.js"
