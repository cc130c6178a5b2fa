#!/usr/bin/env bash
# The HTTP API under attack (tests/integration/api_suite.py): every route with
# good and bad input, 50 racing identical starts, tokens and scopes, the
# approver and the starter taken from the token and never from the body, a
# non-loopback listen address, and the limits (body, headers, connections,
# idle and slow clients). Real HTTP over loopback to the real engine serve.
source "$(dirname "$0")/lib.sh"
# /usr/bin/python3: the suite needs only Debian's interpreter and its stdlib
if /usr/bin/python3 "$SRC/tests/integration/api_suite.py" --engine "$ENGINE" --src "$SRC" --dir "$T"; then
  pass "api_suite.py"
else
  fail "api_suite.py (see the FAIL lines above; servers' logs in $T/serve-*.log)"
fi

# serve --listen without --workflows where ./workflows does not exist: it
# serves the engine's own workflows (its home's, as an installed engine
# does); a --workflows that is missing is refused at once
mkdir -p "$T/nowf"
(cd "$T/nowf" && exec "$ENGINE" serve --db "$T/nowf/n.db" --listen 127.0.0.1:0 2>"$T/nowf/serve.err") &
NS=$!; PIDS+=("$NS")
wait_true 30 'grep -q "API on" "$T/nowf/serve.err" 2>/dev/null' || true
U="$(grep -o 'http://[0-9.:]*' "$T/nowf/serve.err")"
assert_contains "no ./workflows: the engine's own workflows" "\"script\":\"$SRC/workflows/hello.lua\"" \
  "$(curl -s -X POST "$U/v1/workflows" -d '{"script":"hello.lua"}')"
kill "$NS"; wait "$NS" 2>/dev/null || true
assert_exit "a --workflows that does not exist is refused" 2 engine serve --db "$T/nowf/m.db" --listen 127.0.0.1:0 \
  --workflows "$T/nowf/missing"
assert_contains "naming it" "--workflows $T/nowf/missing: No such file or directory" "$ERR"
finish
