#!/usr/bin/env bash
# The Debian package (cmake/package.cmake, packaging/debian/), installed into
# a fresh Debian 12 root: a copy of the debootstrap root the sandbox image is
# made from (scripts/build-sandbox-image), used as a chroot, where apt installs
# the package's declared dependencies first. There, with no source or build
# tree: dpkg -i succeeds; the engine user, /var/lib/engine (engine's, 0750),
# /etc/engine/engine.conf and the unit (enabled, not started); nothing
# installed names the source or build tree; the PR-review example runs from
# /usr/share/engine alone with the Docker sandbox and one approval. Then an
# upgrade while a session waits for its approval (a package of a higher
# version over it, with the engine stopped and started again as the unit
# would be): the state is untouched and the session completes. Last, remove
# keeps the state and purge deletes it. Root only (chroot, mounts); labelled
# long (tests/integration/CMakeLists.txt).
#
# The Docker engine is the host's, reached through its socket bound into the
# root, and it resolves a container's bind mounts on the host's file system:
# the root is also mounted inside itself at its own host path ($R), so a path
# under $R names the same file inside and outside it, and the session's
# workspaces and skills, which Docker binds, are named that way
# (ENGINE_WORKSPACES, ENGINE_SKILLS_DIR); everything else is the installed
# default.

# every mount in a private mount namespace of this test's own, so none leaks to
# the host's, whatever ends the test
if [ -z "${ENGINE_TEST_DEB_NS:-}" ] && [ "$(id -u)" -eq 0 ]; then
  exec env ENGINE_TEST_DEB_NS=1 unshare --mount --propagation private bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
trap 'exit 143' TERM INT HUP # the EXIT trap runs (unmounts) on these too

ROOTFS="${ENGINE_ROOTFS_CACHE:-/var/cache/engine/sandbox-rootfs}"
BUILD="$(dirname "$ENGINE")"
R="$T/root"
MOUNTS=()
SERVE_PID=""

[ "$(id -u)" -eq 0 ] || { fail "test_deb.sh needs root (chroot, mount)"; finish; }
[ -n "$(ls "$ROOTFS"/.complete-* 2>/dev/null)" ] || {
  fail "no debootstrap root in $ROOTFS (scripts/build-sandbox-image makes it; scripts/test runs it first)"; finish; }
[ -f "$BUILD/CPackConfig.cmake" ] || { fail "no $BUILD/CPackConfig.cmake (cmake/package.cmake, included by CMakeLists.txt)"; finish; }
curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping 2>/dev/null | has_line OK || {
  fail "no Docker engine on /var/run/docker.sock (scripts/start-dockerd)"; finish; }
docker image inspect engine-sandbox:latest >/dev/null 2>&1 || {
  fail "no engine-sandbox:latest image (scripts/build-sandbox-image)"; finish; }

# --- tear-down: the engine processes, the session containers, then every
# mount; $T is removed (lib.sh's cleanup) only when nothing is mounted under it
# any more (a bound /dev under $T must never meet rm -rf)
# the sandbox containers of this test's sessions (of session $1, else all):
# those whose workspace is in this root
containers() {
  docker ps -a --filter label=engine.managed=true ${1:+--filter "label=engine.session=$1"} \
    --format '{{.ID}} {{.Label "engine.workspace"}}' | awk -v r="$R/" 'index($2, r) == 1 {print $1}'
}
teardown() {
  local p m i
  # every process whose root is the chroot's (the engines, whatever started them)
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$R" ] && kill -9 "${p#/proc/}" 2>/dev/null
  done
  for p in "${PIDS[@]:-}"; do if [ -n "$p" ]; then wait "$p" 2>/dev/null || true; fi; done
  containers | xargs -r docker rm -f >/dev/null 2>&1 || true
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
    m="${MOUNTS[$i]}"
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  if awk '{print $2}' /proc/self/mounts | has_line -F "$T/"; then
    echo "test_deb: still mounted under $T, kept:" >&2
    awk '{print $2}' /proc/self/mounts | grep -F "$T/" >&2
    KEEP=1
  fi
}
trap 'EXIT_RC=$?; teardown; cleanup' EXIT
mnt() { # mnt TARGET mount-args...: mounts, and remembers it for teardown
  local target="$1"; shift
  mount "$@" "$target" && MOUNTS+=("$target")
}

# in_root CMD...: CMD in the root, as root, with a clean environment (nothing
# of this test's: no ENGINE_* variable, no source tree), plus a proxy if the
# host uses one
ROOT_ENV=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root USER=root LOGNAME=root
          LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive)
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [ -n "${!v:-}" ] && ROOT_ENV+=("$v=${!v}")
done
in_root() { chroot "$R" /usr/bin/env -i "${ROOT_ENV[@]}" "$@"; }

# eng ARGS...: the installed engine in the root, as the engine user with the
# groups the package gave it (as the unit runs it), in /usr/share/engine, on
# /var/lib/engine/x.db, with the Docker bind sources named by their host paths;
# eng_exec ARGS... the same, replacing the shell that runs it: for `eng_exec
# ... &`, whose $! is then the engine itself (chroot, env, setpriv and sh all exec)
AS_ENGINE=(setpriv --reuid=engine --regid=engine --init-groups
           /usr/bin/env HOME=/var/lib/engine USER=engine LOGNAME=engine ENGINE_DB=/var/lib/engine/x.db
           ENGINE_WORKSPACES="$R/var/lib/engine/workspaces" ENGINE_SKILLS_DIR="$R/usr/share/engine/skills"
           sh -c 'cd /usr/share/engine && exec engine "$@"' engine)
eng() { in_root "${AS_ENGINE[@]}" "$@"; }
eng_exec() { exec chroot "$R" /usr/bin/env -i "${ROOT_ENV[@]}" "${AS_ENGINE[@]}" "$@"; }
status_of() { eng show "$1" --json 2>/dev/null | lua5.4 -e 'local ok,j=pcall(require"cjson".decode,io.read("a")); io.write(ok and j.status or "")' 2>/dev/null || true; }
# the request id the session waits on (show --json: waits.request_id)
waiting_request() { eng show "$1" --json 2>/dev/null | lua5.4 -e '
  local ok, j = pcall(require"cjson".decode, io.read("a"))
  local w = ok and type(j.waits) == "table" and j.waits or {}
  io.write(w.kind == "approval" and w.request_id or "")' 2>/dev/null || true; }
wait_root_status() { # ID STATUS SECONDS
  wait_for "$3" "$1 to be $2" '[ "$(status_of "$1")" = "$2" ]' 'eng show "$1" 2>&1 | sed -n 1,20p' "$1" "$2"
}
# engine processes running from the root's /usr/bin/engine, by any parent
root_engines() {
  local p n=0
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/exe" 2>/dev/null)" = "$R/usr/bin/engine" ] && n=$((n + 1))
  done
  echo "$n"
}

# --- the packages: this build's, and the same build again as a newer version
t0=$(now_ms)
mkdir -p "$T/pkg1" "$T/pkg2"
cpack --config "$BUILD/CPackConfig.cmake" -G DEB -B "$T/pkg1" >"$T/cpack1.log" 2>&1 ||
  { fail "cpack: $(tail -5 "$T/cpack1.log")"; finish; }
DEB1="$(ls "$T"/pkg1/engine_*.deb)"
V1="$(dpkg-deb -f "$DEB1" Version)"
if [[ "$V1" =~ ^(.*\.)?([0-9]+)$ ]]; then V2="${BASH_REMATCH[1]}$((BASH_REMATCH[2] + 1))"; else V2="$V1.1"; fi
dpkg --compare-versions "$V2" gt "$V1" || { fail "the upgrade's version $V2 is not above $V1"; finish; }
# the newer version: the same package with its control file's Version raised
# (what a second cpack with CPACK_PACKAGE_VERSION made, without its minute of
# install and compression on a busy machine)
DEB2="$T/pkg2/engine_${V2}_$(dpkg --print-architecture).deb"
{ dpkg-deb -R "$DEB1" "$T/pkg2/tree" && sed -i "s/^Version: .*/Version: $V2/" "$T/pkg2/tree/DEBIAN/control" &&
  dpkg-deb -b "$T/pkg2/tree" "$DEB2"; } >"$T/repack.log" 2>&1 ||
  { fail "the newer package (dpkg-deb): $(tail -5 "$T/repack.log")"; finish; }
assert_eq "the package's file name" "engine_${V1}_$(dpkg --print-architecture).deb" "$(basename "$DEB1")"
assert_eq "the newer package's version" "$V2" "$(dpkg-deb -f "$DEB2" Version)"
DEPENDS="$(dpkg-deb -f "$DEB1" Depends)"
for d in liblua5.4-0 libuv1 libsqlite3-0 libssl3 libcurl4 libseccomp2 libmicrohttpd12 libpq5 lua-yaml git; do
  [[ ", $DEPENDS," == *", $d"[\ ,]* ]] || fail "Depends lacks $d: $DEPENDS"
done
assert_contains "Recommends a sandbox driver" "docker.io | bubblewrap" "$(dpkg-deb -f "$DEB1" Recommends)"
for s in postinst prerm postrm; do
  [ -n "$(dpkg-deb --ctrl-tarfile "$DEB1" | tar -tvf - "./$s" 2>/dev/null | grep '^-rwxr-xr-x')" ] ||
    fail "the maintainer script $s is not in the package, mode 0755"
done
pkg_files="$(dpkg-deb -c "$DEB1" | awk '{print $6}')"
assert_contains "the binary under /usr" "./usr/bin/engine" "$pkg_files"
assert_contains "the Lua library under /usr/share/engine" "./usr/share/engine/lua/" "$pkg_files"
echo "# packages built in $(( ($(now_ms) - t0) / 1000 )) s: $(basename "$DEB1"), $(basename "$DEB2")"

# --- a fresh Debian 12 root, from the sandbox image's debootstrap
t0=$(now_ms)
cp -a "$ROOTFS" "$R"
rm -f "$R"/.complete-*
assert_eq "the root is Debian 12" "12" "$(. "$R/etc/os-release"; echo "$VERSION_ID")"
# the root inside itself at its host path (see the top), before anything else
# is mounted in it (a plain bind does not carry those)
mkdir -p "$R$R"
mnt "$R$R" --bind "$R"
mnt "$R/proc" -t proc proc
mnt "$R/dev" --bind /dev
[ -d "$R/run" ] && [ ! -L "$R/run" ] || { fail "$R/run is not a directory"; finish; }
touch "$R/run/docker.sock"
mnt "$R/run/docker.sock" --bind /var/run/docker.sock
rm -f "$R/etc/resolv.conf" && cp /etc/resolv.conf "$R/etc/resolv.conf"
# nothing that apt installs starts a service here (the usual chroot guard)
printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d" && chmod 755 "$R/usr/sbin/policy-rc.d"
# a docker group, as docker.io makes one, with the gid of the host's socket:
# the postinst puts the engine user in it, and that is how the engine reaches
# the socket
DOCKER_GID="$(stat -c %g /var/run/docker.sock)"
in_root groupadd --non-unique --gid "$DOCKER_GID" docker || { fail "groupadd docker in the root"; finish; }
assert_eq "no source tree in the root" "absent" "$([ -e "$R$SRC" ] || [ -e "$R$BUILD" ] || echo absent)"

# the declared dependencies, from the archive debootstrap configured (the
# root's own sources.list); an alternative's first choice
mapfile -t deps < <(tr ',' '\n' <<<"$DEPENDS" | sed 's/|.*//; s/(.*)//; s/[[:space:]]//g' | grep .)
if ! in_root apt-get update -qq >"$T/apt.log" 2>&1; then
  fail "apt-get update in the root (can it reach the archive in its /etc/apt/sources.list?): $(tail -5 "$T/apt.log")"; finish
fi
if ! in_root apt-get install -y -qq --no-install-recommends "${deps[@]}" >>"$T/apt.log" 2>&1; then
  fail "apt-get install ${deps[*]}: $(tail -5 "$T/apt.log")"; finish
fi
pass "the declared dependencies installed (${deps[*]})"
echo "# root ready in $(( ($(now_ms) - t0) / 1000 )) s"

# --- dpkg -i
cp "$DEB1" "$DEB2" "$R/tmp/"
assert_exit "dpkg -i $(basename "$DEB1")" 0 in_root dpkg -i "/tmp/$(basename "$DEB1")"
echo "$OUT$ERR" >"$T/dpkg-install.log"
assert_eq "the package is installed" "install ok installed $V1" \
  "$(in_root dpkg-query -W -f '${Status} ${Version}' engine 2>&1)"
assert_contains "the engine user" "engine:x:" "$(in_root getent passwd engine)"
assert_contains "its home is the state directory, no login" ":/var/lib/engine:/usr/sbin/nologin" "$(in_root getent passwd engine)"
assert_contains "the engine group" "engine:x:" "$(in_root getent group engine)"
assert_contains "the engine user is in group docker" " docker" " $(in_root id -nG engine)"
assert_eq "/var/lib/engine: engine's, 0750" "engine:engine 750" "$(in_root stat -c '%U:%G %a' /var/lib/engine 2>&1)"
assert_eq "/etc/engine/engine.conf: root:engine 0640" "root:engine 640" "$(in_root stat -c '%U:%G %a' /etc/engine/engine.conf 2>&1)"
assert_eq "engine.conf sets nothing (comments only)" "" "$(grep -v '^[[:space:]]*\(--.*\)\?$' "$R/etc/engine/engine.conf" || true)"
if [ -f "$SRC/packaging/engine.service" ]; then
  unit=""
  for d in /lib/systemd/system /usr/lib/systemd/system; do [ -f "$R$d/engine.service" ] && unit="$d/engine.service"; done
  [ -n "$unit" ] && pass "the unit is installed ($unit)" || fail "no engine.service in /lib/systemd/system or /usr/lib/systemd/system"
  [ -f "$R/var/lib/systemd/deb-systemd-helper-enabled/engine.service.dsh-also" ] &&
    pass "enabled: deb-systemd-helper's record" || fail "enabled: no deb-systemd-helper record of engine.service"
  for target in $(sed -n 's/^WantedBy=//p' "$R$unit"); do
    [ -L "$R/etc/systemd/system/$target.wants/engine.service" ] && pass "enabled: the $target.wants link" ||
      fail "enabled: no /etc/systemd/system/$target.wants/engine.service"
  done
else
  echo "# SKIP the unit's checks: packaging/engine.service is not in this source tree (the service part of issue 31)"
fi
assert_eq "the engine was not started" 0 "$(root_engines)"
assert_exit "engine --help runs" 0 in_root engine --help
assert_contains "its help" "usage" "$OUT$ERR"
assert_eq "the binary does not name the source tree" 0 "$(strings "$R/usr/bin/engine" | grep -cF "$SRC" || true)"
assert_eq "nor the build tree" 0 "$(strings "$R/usr/bin/engine" | grep -cF "$BUILD" || true)"
assert_eq "no installed file names the source tree" "" "$(in_root dpkg -L engine | while read -r f; do
  [ -f "$R$f" ] && grep -lF "$SRC" "$R$f"; done || true)"

# --- the PR-review example, from the installed paths, in the foreground as the README runs it
t0=$(now_ms)
eng_exec start workflows/agent_session.lua --input @examples/pr-review.json --db /var/lib/engine/x.db --id pr1 \
  >"$T/pr1.out" 2>"$T/pr1.err" &
START_PID=$!
PIDS+=("$START_PID")
wait_for 120 "pr1 to wait for the approval of publish_review" '[ -n "$(waiting_request pr1)" ]' \
  'tail -5 "$T/pr1.err"; eng show pr1 2>&1 | sed -n 1,20p'
RID="$(waiting_request pr1)"
assert_contains "it waits for publish_review" '"tool":"publish_review"' "$(eng show pr1 --json)"
assert_exit "engine approve pr1 --request $RID" 0 eng approve pr1 --request "$RID" --reason "looks right"
wait_for 120 "engine start to end" '! kill -0 "$START_PID" 2>/dev/null' 'tail -5 "$T/pr1.err"'
rc=0; wait "$START_PID" || rc=$?
assert_eq "engine start exits 0" 0 "$rc"
assert_eq "pr1 completed" completed "$(status_of pr1)"
assert_contains "its verdict" "request_changes" "$(cat "$T/pr1.out")"
assert_contains "the review beside the database" "request changes" "$(cat "$R"/var/lib/engine/reviews/* 2>/dev/null)"
assert_eq "its sandbox is gone" "" "$(containers pr1)"
echo "# the example ran in $(( ($(now_ms) - t0) / 1000 )) s"

# --- the upgrade while a session waits for its approval. The worker runs in
# /usr/share/engine: a session's relative context paths (the example's) are
# resolved in the worker's working directory.
t0=$(now_ms)
eng_exec serve --db /var/lib/engine/x.db 2>"$T/serve1.log" &
SERVE_PID=$!
PIDS+=("$SERVE_PID")
wait_serving "$T/serve1.log"
assert_exit "engine start pr2 --detach records it (exit 3)" 3 eng start workflows/agent_session.lua --input @examples/pr-review.json --id pr2 --detach
wait_for 120 "pr2 to wait for its approval" '[ -n "$(waiting_request pr2)" ]' 'tail -5 "$T/serve1.log"; eng show pr2 2>&1 | sed -n 1,20p'
RID2="$(waiting_request pr2)"
C2="$(containers pr2)"
[ -n "$C2" ] && pass "pr2's sandbox runs while it waits" || fail "pr2 has no sandbox container while it waits"
# as the package's prerm does where systemd runs: the service stops (SIGTERM)
# before the files are replaced, and starts again after
kill -TERM "$SERVE_PID"
wait_for 30 "engine serve to stop on SIGTERM" '! kill -0 "$SERVE_PID" 2>/dev/null' 'tail -5 "$T/serve1.log"'
wait "$SERVE_PID" 2>/dev/null || true
echo "-- edited before the upgrade" >>"$R/etc/engine/engine.conf"
conf_before="$(md5sum <"$R/etc/engine/engine.conf")"
db_before="$(md5sum <"$R/var/lib/engine/x.db")"
state_before="$(cd "$R/var/lib/engine" && find . -printf '%p %U:%G %m %s %T@\n' | sort)"
assert_exit "dpkg -i $(basename "$DEB2") over $V1" 0 in_root dpkg -i "/tmp/$(basename "$DEB2")"
echo "$OUT$ERR" >"$T/dpkg-upgrade.log"
assert_eq "the newer version is installed" "install ok installed $V2" \
  "$(in_root dpkg-query -W -f '${Status} ${Version}' engine 2>&1)"
assert_eq "x.db untouched by the upgrade" "$db_before" "$(md5sum <"$R/var/lib/engine/x.db")"
assert_eq "/var/lib/engine untouched (names, owners, modes, sizes, times)" "$state_before" \
  "$(cd "$R/var/lib/engine" && find . -printf '%p %U:%G %m %s %T@\n' | sort)"
assert_eq "the edited engine.conf kept" "$conf_before" "$(md5sum <"$R/etc/engine/engine.conf")"
assert_eq "not started by the upgrade" 0 "$(root_engines)"
assert_eq "pr2 still waits for the same request" "$RID2" "$(waiting_request pr2)"
assert_eq "its sandbox too" "$C2 true" "$(containers pr2) $(docker inspect -f '{{.State.Running}}' "$C2" 2>&1)"
eng_exec serve --db /var/lib/engine/x.db 2>"$T/serve2.log" &
SERVE_PID=$!
PIDS+=("$SERVE_PID")
wait_serving "$T/serve2.log"
assert_exit "engine approve pr2 --request $RID2 after the upgrade" 0 eng approve pr2 --request "$RID2"
wait_root_status pr2 completed 120
assert_contains "pr2's verdict" "request_changes" "$(eng show pr2 --json)"
assert_eq "pr2's sandbox is gone" "" "$(containers pr2)"
assert_eq "both sessions in x.db" "pr1 completed,pr2 completed" \
  "$(eng list 2>/dev/null | awk 'NR > 1 && ($1 == "pr1" || $1 == "pr2") {print $1 " " $2}' | sort | paste -sd,)"
kill -TERM "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true
echo "# the upgrade case ran in $(( ($(now_ms) - t0) / 1000 )) s"

# --- remove keeps the state and the configuration; purge deletes them
assert_exit "dpkg -r engine" 0 in_root dpkg -r engine
assert_eq "the binary is gone" absent "$([ -e "$R/usr/bin/engine" ] || echo absent)"
assert_eq "remove keeps x.db" present "$([ -f "$R/var/lib/engine/x.db" ] && echo present)"
assert_eq "remove keeps engine.conf" "$conf_before" "$(md5sum <"$R/etc/engine/engine.conf")"
assert_contains "remove keeps the user" "engine:x:" "$(in_root getent passwd engine)"
assert_exit "dpkg -P engine" 0 in_root dpkg -P engine
assert_eq "purge deletes /var/lib/engine" absent "$([ -e "$R/var/lib/engine" ] || echo absent)"
assert_eq "purge deletes /etc/engine" absent "$([ -e "$R/etc/engine" ] || echo absent)"
assert_eq "purge leaves no wants link" "" "$(ls "$R"/etc/systemd/system/*.wants/engine.service 2>/dev/null || true)"
finish
