# Sourced by selftest.sh and tests/integration/test_otel.sh. otel_node_deps:
# node, npm and tests/otel/package.json's exact versions (tests/node_deps.sh).
# Prints why and returns 1 when they cannot be had.
source "$(dirname "${BASH_SOURCE[0]}")/../node_deps.sh"
otel_node_deps() { node_deps "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"; }
