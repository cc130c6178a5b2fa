# web_lib.sh: what the browser tests (test_web.sh, test_web_start.sh) need
# before they drive the page, sourced after lib.sh: skipped under ASan (the
# plain build runs them), Debian's chromium ($CHROME), node and npm, a
# sandbox driver (bubblewrap with its rootfs, else Docker), the driver's npm
# packages in tests/web ($WEBT) exactly as its package.json pins them (no
# lock file: it would name a registry), and $OUTDIR for screenshots.
if [ "${ENGINE_SANITIZED:-0}" == 1 ]; then
  echo "ok - skipped under ASan (the plain build runs it)"; finish; exit 0
fi
CHROME="${ENGINE_CHROMIUM:-/usr/bin/chromium}"
[ -x "$CHROME" ] || { fail "no chromium at $CHROME (scripts/install-deps installs Debian's chromium)"; finish; }
command -v node >/dev/null && command -v npm >/dev/null || { fail "no node/npm (scripts/install-deps)"; finish; }
if command -v bwrap >/dev/null && [ -d "${ENGINE_SANDBOX_ROOTFS:-/var/cache/engine/sandbox-rootfs}/usr" ]; then
  export ENGINE_SANDBOX_DRIVER=bwrap
elif curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  export ENGINE_SANDBOX_DRIVER=docker
else
  fail "no sandbox driver (bubblewrap with its rootfs, or Docker)"; finish
fi
WEBT="$SRC/tests/web"
source "$SRC/tests/node_deps.sh"
why="$(node_deps "$WEBT")" || { fail "$why"; finish; }
OUTDIR="${ENGINE_WEB_ARTIFACTS:-$(dirname "$ENGINE")/test-artifacts/web}"
mkdir -p "$OUTDIR"
