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
finish
