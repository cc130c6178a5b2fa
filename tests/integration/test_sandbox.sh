#!/usr/bin/env bash
# Sandboxes against the real Docker engine and bubblewrap: every escape and
# limit check must fail inside the sandbox; the trusted side refuses traversal
# and symlinks; errors are typed and leave nothing behind; a kill -9 of the
# engine never leaks a container.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine answers on /var/run/docker.sock (scripts/start-dockerd starts one)"; finish
fi
IMAGE="${ENGINE_SANDBOX_IMAGE:-engine-sandbox:latest}"
if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then fail "image $IMAGE missing (scripts/build-sandbox-image)"; finish; fi
WF="$SRC/tests/integration/wf/sandbox_session.lua"
chmod 0711 "$T" # as root, the bwrap driver runs sandboxes as uid 10001, which must reach the workspace
export OPENAI_API_KEY="sk-test-NEVERINSANDBOX-42"
# containers of this test's database (its instance id) for session $1
containers() {
  local inst; inst="$(sqlite3 "$ENGINE_DB" "SELECT value FROM meta WHERE key='instance_id'" 2>/dev/null)"
  docker ps -aq --filter label=engine.managed=true --filter "label=engine.instance=$inst" \
    --filter "label=engine.session=$1" | wc -l
}

# a host-only secret and a server on the host: neither may be reachable
echo "host secret" >"$T/hostsecret"
python3 -m http.server 18099 --bind 0.0.0.0 >/dev/null 2>&1 &
PIDS+=($!)
HOSTIP="$(hostname -I | awk '{print $1}')"
wait_true 30 'curl -s -o /dev/null http://127.0.0.1:18099/' # it listens

# The steps, as JSON. (Written with printf, not a heredoc, so no line of it can
# ever end a heredoc early and run as a command.)
printf '%s\n' \
'{"limits": {"memoryMb": 64, "pids": 48, "cpu": 1},' \
' "files": [{"src": "'"$SRC"'/workflows/hello.lua", "dest": "hello.lua"}],' \
' "steps": [' \
'  {"op": "exec", "name": "whoami", "cmd": "id -u; grep CapEff /proc/self/status; grep NoNewPrivs /proc/self/status"},' \
'  {"op": "exec", "name": "net_loopback_host", "cmd": ["python3", "-c", "import socket; socket.create_connection((\"127.0.0.1\", 18099), 2)"]},' \
'  {"op": "exec", "name": "net_host_ip", "cmd": ["python3", "-c", "import socket; socket.create_connection((\"'"$HOSTIP"'\", 18099), 2)"]},' \
'  {"op": "exec", "name": "net_outside", "cmd": ["python3", "-c", "import socket; socket.create_connection((\"192.0.2.1\", 80), 2)"]},' \
'  {"op": "exec", "name": "w_input", "cmd": "echo x > /workspace/input/new.txt"},' \
'  {"op": "exec", "name": "w_task", "cmd": "echo x >> /workspace/task.md"},' \
'  {"op": "exec", "name": "w_skills", "cmd": "touch /workspace/skills/x"},' \
'  {"op": "exec", "name": "w_root", "cmd": "touch /usr/bin/evil"},' \
'  {"op": "exec", "name": "w_working", "cmd": "echo ok > /workspace/working/w.txt && echo result > /workspace/output/report.md && cat /workspace/working/w.txt"},' \
'  {"op": "exec", "name": "r_input", "cmd": "head -c 40 /workspace/input/hello.lua"},' \
'  {"op": "exec", "name": "host_path", "cmd": "cat '"$T"'/hostsecret"},' \
'  {"op": "exec", "name": "env", "cmd": "env"},' \
'  {"op": "exec", "name": "oom", "cmd": ["python3", "-c", "x = bytearray(512 * 1024 * 1024)"]},' \
'  {"op": "exec", "name": "forkbomb", "cmd": "i=0; while [ $i -lt 200 ]; do sleep 20 & i=$((i+1)); done; wait", "timeout": 5},' \
'  {"op": "exec", "name": "after_forkbomb", "cmd": "echo still fine"},' \
'  {"op": "exec", "name": "too_slow", "cmd": "sleep 60", "timeout": 1},' \
'  {"op": "exec", "name": "flood", "cmd": "head -c 104857600 /dev/zero | tr \"\\\\0\" x", "max_output": 65536, "timeout": 60},' \
'  {"op": "exec", "name": "symlink", "cmd": "ln -s /etc /workspace/working/etc && ln -s /workspace/input/hello.lua /workspace/output/link.lua"},' \
'  {"op": "write", "name": "tw_ok", "path": "/workspace/working/notes/a.md", "content": "written by the trusted side"},' \
'  {"op": "write", "name": "tw_traversal", "path": "/workspace/working/../../../tmp/evil", "content": "x"},' \
'  {"op": "write", "name": "tw_absolute", "path": "/etc/passwd", "content": "x"},' \
'  {"op": "write", "name": "tw_input", "path": "/workspace/input/hello.lua", "content": "x"},' \
'  {"op": "write", "name": "tw_symlink", "path": "/workspace/working/etc/evil", "content": "x"},' \
'  {"op": "read", "name": "tr_symlink", "path": "/workspace/output/link.lua"},' \
'  {"op": "read", "name": "tr_ok", "path": "/workspace/working/notes/a.md"},' \
'  {"op": "list", "name": "ls_working", "path": "/workspace/working"},' \
'  {"op": "copy_in", "name": "cp_in", "path": "/workspace/working", "files": [{"name": "copied/in.txt", "data": "through the archive API"}]},' \
'  {"op": "exec", "name": "cp_check", "cmd": "cat /workspace/working/copied/in.txt && echo made here > /workspace/working/copied/out.txt"},' \
'  {"op": "copy_out", "name": "cp_out", "path": "/workspace/working/copied/out.txt"}' \
' ]}' >"$T/in.json"
lua5.4 -e 'require"cjson".decode(io.read("a"))' <"$T/in.json" || fail "the test's own input is not JSON"

# no workspace (directory, image or mount) left in $T/workspaces
no_workspace_left() {
  local left; left="$(ls -A "$T/workspaces" 2>/dev/null | wc -l) $(grep -c " $T/workspaces/" /proc/self/mountinfo || true)"
  assert_eq "$1: no workspace, image or mount left behind" "0 0" "$left"
}

check_session() { # DRIVER ID
  local driver="$1" id="$2"
  ENGINE_SANDBOX_DRIVER="$driver" "$ENGINE" start "$WF" --id "$id" --quiet --input @"$T/in.json" >/dev/null 2>"$T/$id.err" || true
  assert_eq "$driver: the session completed" completed "$(status "$id")"
  out="$(engine show "$id" --json | jget result)"
  r() { jget "results.$1" <<<"$out"; }
  assert_contains "$driver: runs as a non-root user" "10001" "$(r whoami.stdout)"
  assert_contains "$driver: no capabilities" "CapEff:	0000000000000000" "$(r whoami.stdout)"
  for n in net_loopback_host net_host_ip net_outside; do
    [ "$(r $n.exit_code)" != 0 ] && pass "$driver $n: no network" || fail "$driver $n: the sandbox reached the network"
  done
  for n in w_input w_task w_skills w_root; do
    [ "$(r $n.exit_code)" != 0 ] && pass "$driver $n: write refused" || fail "$driver $n: the sandbox wrote there"
  done
  assert_contains "$driver: input/ is read-only" "Read-only file system" "$(r w_input.stderr)"
  assert_eq "$driver: working/ is writable" "ok" "$(r w_working.stdout | tr -d '\n')"
  assert_contains "$driver: input/ holds the context file" "hello.lua" "$(r r_input.stdout)"
  assert_contains "$driver: a host path is not there" "No such file" "$(r host_path.stderr)"
  case "$(r env.stdout)" in *NEVERINSANDBOX*|*OPENAI*) fail "$driver: a credential reached the sandbox" ;; *) pass "$driver: no credential in the environment" ;; esac
  assert_eq "$driver: memory limit hit and reported" true "$(r oom.oom_killed)"
  assert_contains "$driver: the engine says so" "ran out of memory" "$(r oom.error)"
  assert_contains "$driver: fork bomb stopped by the process limit" "fork" "$(r forkbomb.stderr)"
  assert_eq "$driver: the sandbox still works after it" "still fine" "$(r after_forkbomb.stdout | tr -d '\n')"
  assert_eq "$driver: exec time limit" "true" "$(r too_slow.timed_out)"
  assert_eq "$driver: 100 MiB of output truncated" "true 104857600" "$(r flood.truncated) $(r flood.output_bytes)"
  assert_contains "$driver: and says so" "output truncated" "$(r flood.stdout | tail -c 100)"
  assert_eq "$driver: trusted write under working/" 27 "$(r tw_ok.bytes)"
  assert_eq "$driver: traversal refused" InvalidPath "$(r tw_traversal.error.type)"
  assert_eq "$driver: absolute path refused" InvalidPath "$(r tw_absolute.error.type)"
  assert_eq "$driver: write to input/ refused" PermissionDenied "$(r tw_input.error.type)"
  assert_contains "$driver: write through a symlink refused" "symlink" "$(r tw_symlink.error.message)"
  assert_contains "$driver: read of a symlink refused" "symlink" "$(r tr_symlink.error.message)"
  assert_eq "$driver: trusted read" "written by the trusted side" "$(r tr_ok.content)"
  assert_contains "$driver: list" "notes/a.md" "$(r ls_working)"
  assert_contains "$driver: collected output/" "report.md" "$(r collected)"
  [ -f /tmp/evil ] && fail "$driver: traversal wrote /tmp/evil" || pass "$driver: nothing written outside the workspace"
  assert_eq "$driver: no container left" 0 "$(containers "$id")"
  no_workspace_left "$driver"
  if [ "$driver" == docker ]; then
    assert_eq "$driver: a file copied in (archive PUT)" "through the archive API" "$(r cp_check.stdout | sed -n 1p)"
    assert_eq "$driver: a file copied out (archive GET)" "made here" "$(r cp_out.1.data | tr -d '\n')"
  else
    assert_eq "$driver: archive copies need docker" Unsupported "$(r cp_in.error.type)"
  fi
  assert_contains "$driver: engine show names the driver" "\"driver\":\"$driver\"" "$(engine show "$id")"
}
check_session docker sb1
if command -v bwrap >/dev/null && [ -d "${ENGINE_SANDBOX_ROOTFS:-/var/cache/engine/sandbox-rootfs}/usr" ]; then
  check_session bwrap sbw
else
  fail "bubblewrap or its rootfs is missing (scripts/build-sandbox-image keeps the rootfs)"
fi
bg S engine serve

# --- errors are typed and leave nothing behind
engine start "$WF" --id sb2 --detach --input '{"image": "engine-no-such-image:0", "steps": []}' >/dev/null 2>&1 || true
wait_status sb2 failed 60
assert_contains "missing image: typed error" '"type":"ImageMissing"' "$(engine show sb2 --json)"
assert_eq "no container for it" 0 "$(containers sb2)"
no_workspace_left "failed provision"
engine start "$WF" --id sb3 --detach --input '{"limits": {"memoryMb": 1, "pids": 10, "cpu": 1}, "steps": []}' >/dev/null 2>&1 || true
wait_status sb3 failed 60
assert_contains "create refused: typed error" '"type":"CreateRefused"' "$(engine show sb3 --json)"
assert_eq "no container for it" 0 "$(containers sb3)"
kill "$S"; wait "$S" 2>/dev/null || true
DOCKER_HOST=unix:///nonexistent.sock "$ENGINE" start "$WF" --id sb4 --quiet --input '{"steps":[]}' >/dev/null 2>&1 || true
assert_contains "Docker engine down: typed error" '"type":"DockerUnavailable"' "$(engine show sb4 --json)"
no_workspace_left "Docker engine down"

# --- cancellation destroys the sandbox
bg S engine serve
engine start "$WF" --id sb5 --detach --input '{"steps":[{"op":"wait","name":"w","signal":"go"}]}' >/dev/null 2>&1 || true
wait_true 30 '[ "$(containers sb5)" == 1 ] && engine history sb5 | tail -1 | has_line SignalWaitStarted' || true
assert_eq "a live sandbox" 1 "$(containers sb5)"
engine cancel sb5
wait_status sb5 cancelled 60
assert_eq "cancel removed the container" 0 "$(containers sb5)"

# --- kill -9 while a container runs: the live session keeps it, then finishes
engine start "$WF" --id sb6 --detach --input '{"steps":[{"op":"exec","name":"long","cmd":"sleep 3; echo done","timeout":30}]}' >/dev/null 2>&1 || true
wait_true 30 '[ "$(containers sb6)" == 1 ] && engine history sb6 | has_line "sandbox.exec"' || true
kill -9 "$S"; wait "$S" 2>/dev/null || true
assert_eq "the container outlives the engine" 1 "$(containers sb6)"
# an orphan: a labelled container of this database whose session is unknown
INSTANCE="$(sqlite3 "$ENGINE_DB" "SELECT value FROM meta WHERE key='instance_id'")"
docker create --label engine.managed=true --label "engine.instance=$INSTANCE" --label engine.session=ghost \
  --network none "$IMAGE" sleep infinity >/dev/null
docker create --label engine.managed=true --label engine.instance=someone-else --label engine.session=ghost2 \
  --network none "$IMAGE" sleep infinity >/dev/null
bg S engine serve
wait_status sb6 completed 120
assert_eq "the live session re-attached and finished" "done" "$(engine show sb6 --json | jget result.results.long.stdout | tr -d '\n')"
assert_eq "its container removed at the end" 0 "$(containers sb6)"
wait_true 30 '[ "$(containers ghost)" == 0 ]' || true
assert_eq "the orphan of an unknown session was swept at start-up" 0 "$(containers ghost)"
assert_eq "another database's container was left alone" 1 \
  "$(docker ps -aq --filter label=engine.instance=someone-else --filter label=engine.session=ghost2 | wc -l)"
docker rm -f $(docker ps -aq --filter label=engine.session=ghost2) >/dev/null
assert_exit "engine gc" 0 engine gc
kill "$S"; wait "$S" 2>/dev/null || true
finish
