#!/usr/bin/env bash
# An install that stands alone: `cmake --install` into a fresh prefix, then,
# with the source and build trees hidden (a private mount namespace puts empty
# folders over them), the installed binary runs the PR-review example from
# its installed files only, `engine serve --listen` from a configuration
# file, `engine doctor` and the manual page (the sandbox: bubblewrap). Nothing installed names the
# source or build tree.
source "$(dirname "$0")/lib.sh"
# The sandbox is bubblewrap's: it runs inside the test's mount namespace, where
# the workspaces' file systems are mounted (dockerd, outside it, would not see
# them). Its root file system is the sandbox image's (scripts/build-sandbox-image).
ROOTFS="${ENGINE_SANDBOX_ROOTFS:-/var/cache/engine/sandbox-rootfs}"
if ! command -v bwrap >/dev/null || [ ! -d "$ROOTFS/usr" ]; then
  fail "no bubblewrap or no sandbox root file system at $ROOTFS (scripts/install-deps, scripts/build-sandbox-image)"; finish
fi
BUILD="$(cd "$(dirname "$ENGINE")" && pwd)"
P="$T/prefix"
assert_exit "cmake --install" 0 cmake --install "$BUILD" --prefix "$P"
for f in bin/engine share/engine/lua/sandbox.lua share/engine/workflows/agent_session.lua \
         share/engine/policies share/engine/skills share/engine/web/index.html share/engine/examples/pr-review.json \
         share/bash-completion/completions/engine share/zsh/vendor-completions/_engine share/man/man1/engine.1 \
         share/doc/engine/operations.md; do
  [ -e "$P/$f" ] && pass "installed: $f" || fail "not installed: $f"
done
# (a sanitizer build is never installed: its instrumentation names each source file)
if [ "${ENGINE_SANITIZED:-0}" != 1 ]; then
  assert_eq "the binary names neither the source nor the build tree" 0 \
    "$(strings "$P/bin/engine" | grep -c -e "$SRC" -e "$BUILD" || true)"
  assert_eq "no installed file names them" "" "$(grep -rl -e "$SRC" -e "$BUILD" "$P" 2>/dev/null | sed -n 1,3p)"
fi
case "$T/" in "$SRC/"*|"$BUILD/"*) fail "the test's folder $T is inside the tree it hides"; finish ;; esac

# --- what runs with the trees hidden (no lib.sh there: it is in the source tree)
unset ENGINE_LUA_DIR ENGINE_DB ENGINE_CONFIG
cat >"$T/engine.conf" <<CONF
-- the test's engine: a database and an API address, nothing else
db = "$T/var/engine.db"
listen = "127.0.0.1:0"
sandbox_driver = "bwrap"
sandbox_rootfs = "$ROOTFS"
CONF
mkdir -p "$T/var"
chmod 711 "$T" # bubblewrap's sandbox user reaches its workspace through it
cat >"$T/inside.sh" <<'INSIDE'
set -u
P="$1" T="$2"; shift 2
for d in "$@"; do mount -t tmpfs -o size=1m hidden "$d" || { echo "FAIL: cannot hide $d"; exit 1; }; done
E="$P/bin/engine"
ok() { echo "ok - $*"; }
no() { echo "FAIL: $*"; }
[ -z "$(ls -A "$1")" ] && ok "the source tree is hidden ($1 is empty)" || no "$1 still shows its files"
# wait_until SECONDS CONDITION: polls CONDITION (scaled like the tests' deadlines)
# (or until the session failed: nothing more will come)
wait_until() {
  local end=$(( SECONDS + $1 * ${TEST_TIMEOUT_SCALE:-1} ))
  while ! eval "$2" >/dev/null 2>&1; do
    [ $SECONDS -ge $end ] && return 1
    "$E" "${C[@]}" show inst --json 2>/dev/null | grep -q '"status":"failed"' && return 1
    sleep 0.1
  done
}
C=(--config "$T/engine.conf")
v="$("$E" --version)" && ok "engine --version: $(head -1 <<<"$v")" || no "engine --version failed"
cd "$P/share/engine" # the example's context files are relative: the worker resolves them in its own folder
"$E" "${C[@]}" serve 2>"$T/serve.log" &
S=$!
wait_until 60 'grep -q "API on" "$T/serve.log"' && ok "serve --listen from the configuration file" || { no "serve did not listen: $(tail -5 "$T/serve.log")"; exit 1; }
URL="$(sed -n 's/.*API on \(http:[^ ]*\).*/\1/p' "$T/serve.log")"
grep -q "serving $T/var/engine.db" "$T/serve.log" && ok "it serves the file's database" || no "not the file's database: $(cat "$T/serve.log")"
"$E" "${C[@]}" start workflows/agent_session.lua --input @examples/pr-review.json --id inst --detach >"$T/start.out" 2>&1
pending() { "$E" "${C[@]}" events inst --json | grep -c '"type":"approval.requested"'; }
if wait_until 120 '[ "$(pending)" -ge 1 ]'; then ok "the example asks for approval"
else no "the example never asked for approval: $("$E" "${C[@]}" show inst 2>&1 | sed -n 1,5p) $(tail -5 "$T/serve.log")"; fi
rid="$("$E" "${C[@]}" show inst --json | lua5.4 -e 'io.write(require"cjson".decode(io.read("a")).waits.request_id)')"
"$E" --server "$URL" approve inst --request "$rid" --reason "from the installed binary" >/dev/null 2>"$T/approve.err" && ok "approved over the API" || no "approve: $(cat "$T/approve.err")"
status() { "$E" "${C[@]}" show inst --json | lua5.4 -e 'io.write(require"cjson".decode(io.read("a")).status)'; }
if wait_until 180 '[ "$(status)" = completed ]'; then ok "the example completed"
else no "the example did not complete: $(status) $(tail -5 "$T/serve.log")"; fi
"$E" "${C[@]}" show inst --json | grep -q request_changes && ok "its verdict" || no "no verdict in $("$E" "${C[@]}" show inst --json | head -c 400)"
ls "$T/var/reviews/"*.md >/dev/null 2>&1 && ok "the review beside the database" || no "no review in $T/var/reviews"
if "$E" "${C[@]}" doctor >"$T/doctor.out" 2>&1; then ok "engine doctor passes"; else no "engine doctor failed: $(cat "$T/doctor.out")"; fi
grep -q "installed" "$T/doctor.out" && ok "doctor finds the installed files" || no "doctor's files row: $(grep -i files "$T/doctor.out")"
MANPATH="$P/share/man" man -P cat engine 2>/dev/null | grep -q "engine --version" && ok "man engine" || no "man engine shows nothing"
kill "$S"; wait "$S"
echo "serve exit $?"
INSIDE
HIDE=("$SRC")
case "$BUILD/" in "$SRC/"*) ;; *) HIDE+=("$BUILD") ;; esac
unshare --mount --propagation private bash "$T/inside.sh" "$P" "$T" "${HIDE[@]}" >"$T/inside.out" 2>&1 || true
cat "$T/inside.out"
grep -q '^ok - the example completed' "$T/inside.out" || log_tail
FAILS=$((FAILS + $(grep -c '^FAIL' "$T/inside.out" || true)))
assert_eq "serve stopped cleanly" "serve exit 0" "$(grep '^serve exit' "$T/inside.out")"
finish
