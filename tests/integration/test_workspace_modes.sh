#!/usr/bin/env bash
# A workspace's writable directories belong to the sandbox's user alone
# (mode 0700, no world-writable directory on the host): 10001 with Docker, the
# session's own host uid with bubblewrap as root; the sandbox can still write
# there and the trusted side still reads what it wrote.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/sandbox_session.lua"
chmod 0711 "$T" # the sandbox's user must reach the workspace below it
printf '%s\n' '{"steps": [' \
  '{"op": "exec", "name": "write", "cmd": "echo w > /workspace/working/w.txt && echo o > /workspace/output/o.txt && id -u"},' \
  '{"op": "wait", "name": "hold", "signal": "go"},' \
  '{"op": "read", "name": "read_back", "path": "/workspace/working/w.txt"}]}' >"$T/in.json"

check_driver() { # DRIVER ID
  local driver="$1" id="$2"
  ENGINE_SANDBOX_DRIVER="$driver" "$ENGINE" start "$WF" --id "$id" --quiet --input @"$T/in.json" >"$T/$id.out" 2>"$T/$id.err" &
  local p=$!; PIDS+=("$p")
  wait_true 30 'engine history "$id" 2>/dev/null | tail -1 | has_line SignalWaitStarted' || true
  local ws; ws="$(ls -d "$T"/workspaces/*/ | sed -n 1p)"; ws="${ws%/}"
  local wmode omode wuid ouid fuid
  wmode="$(stat -c %a "$ws/working")"; omode="$(stat -c %a "$ws/output")"
  wuid="$(stat -c %u "$ws/working")"; ouid="$(stat -c %u "$ws/output")"; fuid="$(stat -c %u "$ws/working/w.txt")"
  assert_eq "$driver: working/ and output/ are 0700" "700 700" "$wmode $omode"
  assert_eq "$driver: both belong to the user the sandbox's files belong to" "$fuid $fuid" "$wuid $ouid"
  [ -z "$(find "$ws" -type d -perm -0002)" ] && pass "$driver: no world-writable directory in the workspace" ||
    fail "$driver: world-writable: $(find "$ws" -type d -perm -0002)"
  if [ "$driver" == docker ]; then
    assert_eq "docker: that user is 10001" 10001 "$fuid"
  else
    [ "$fuid" -ge 20000 ] && [ "$fuid" -lt 60000 ] && pass "bwrap: that user is the session's own host uid ($fuid)" ||
      fail "bwrap: the files belong to uid $fuid"
  fi
  engine signal "$id" go '{}' 2>/dev/null
  wait "$p" 2>/dev/null || true
  local res; res="$(cat "$T/$id.out")"
  assert_eq "$driver: the sandbox wrote both files" 0 "$(jget results.write.exit_code <<<"$res")"
  assert_eq "$driver: the trusted side reads what it wrote" "w" "$(jget results.read_back.content <<<"$res" | tr -d '\n')"
  [ ! -e "$ws" ] && pass "$driver: the workspace is gone" || fail "$driver: $ws left behind"
}

if curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  check_driver docker wm_docker
else
  fail "no Docker engine (scripts/start-dockerd)"
fi
if [ "$(id -u)" == 0 ] && command -v bwrap >/dev/null && [ -d "${ENGINE_SANDBOX_ROOTFS:-/var/cache/engine/sandbox-rootfs}/usr" ]; then
  check_driver bwrap wm_bwrap
else
  echo "# bwrap as root not available here: its check is skipped"
fi
finish
