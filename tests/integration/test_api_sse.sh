#!/usr/bin/env bash
# The HTTP API's live streams and durability (tests/integration/sse_suite.py,
# real HTTP on loopback, real SQLite, the real binary): SSE framing, resume
# with Last-Event-ID and ?after=, the end, heartbeats; 100 clients on one
# session; the all-sessions feed; agent.delta from a slowly streaming model;
# kill -9 of serve under load; a reader that never reads.
source "$(dirname "$0")/lib.sh"
chmod 0711 "$T" # as root, the bwrap driver runs sandboxes as uid 10001, which must reach the workspace

# the agent.delta section needs a sandbox: bubblewrap when it has its rootfs, else Docker
if command -v bwrap >/dev/null && [ -d "${ENGINE_SANDBOX_ROOTFS:-/var/cache/engine/sandbox-rootfs}/usr" ]; then
  export SSE_SANDBOX_DRIVER=bwrap
elif curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  export SSE_SANDBOX_DRIVER=docker
fi

for section in ${SSE_SECTIONS:-framing fanout feed delta kill slow}; do
  echo "# $section"
  /usr/bin/python3 "$SRC/tests/integration/sse_suite.py" "$section" "$T" || fail "section $section"
done
finish
