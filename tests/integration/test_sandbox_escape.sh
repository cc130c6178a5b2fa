#!/usr/bin/env bash
# Escape and limit attempts, as a hostile model would make them, against both
# drivers (the table is tests/integration/escape_attempts.py), plus the ones
# that need the host's view: the engine's own descriptors, one sandbox per
# workflow id, and the workspace quota seen from the host. Prints
# "attempt | driver | result"; any "ESCAPED" row fails the test.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine answers on /var/run/docker.sock (scripts/start-dockerd starts one)"; finish
fi
WF="$SRC/tests/integration/wf/sandbox_session.lua"
ATT="$SRC/tests/integration/escape_attempts.py"
chmod 0711 "$T"
HOSTDIR="$T/hostdir"; mkdir -p "$HOSTDIR"; chmod 0777 "$HOSTDIR"
ROWS="$T/rows"; : >"$ROWS"
row() { # ATTEMPT DRIVER RESULT: one row of the table; RESULT other than "held" fails
  printf '| %-24s | %-6s | %s |\n' "$1" "$2" "$3" >>"$ROWS"
  if [ "$3" == held ]; then pass "$2 $1"; else fail "$2 $1: $3"; fi
}
containers() {
  local inst; inst="$(sqlite3 "$ENGINE_DB" "SELECT value FROM meta WHERE key='instance_id'" 2>/dev/null)"
  docker ps -q --filter label=engine.managed=true --filter "label=engine.instance=$inst" \
    --filter "label=engine.session=$1" | wc -l
}

# --- the table, inside each driver
for driver in docker bwrap; do
  python3 "$ATT" steps "$driver" "$HOSTDIR" >"$T/$driver.json"
  ENGINE_SANDBOX_DRIVER="$driver" "$ENGINE" start "$WF" --id "esc-$driver" --quiet --input @"$T/$driver.json" \
    >/dev/null 2>"$T/$driver.err" || true
  assert_eq "$driver: the attempts ran to the end" completed "$(status "esc-$driver")"
  engine show "esc-$driver" --json >"$T/$driver.shown"
  set +e
  python3 "$ATT" check "$driver" "$HOSTDIR" <"$T/$driver.shown" >>"$ROWS"
  rc=$?
  set -e
  [ "$rc" -eq 0 ] && pass "$driver: every attempt held" || fail "$driver: an attempt escaped (see the table)"
done
# a root container started through a leaked Docker socket would have made this
[ -e "$HOSTDIR/pwned" ] && row docker_api_host_file both "ESCAPED: $HOSTDIR/pwned exists" || row docker_api_host_file both held

# --- the engine's own descriptors are all close-on-exec (while it holds a
# Docker connection, a database and a live sandbox)
bg S engine serve
engine start "$WF" --id esc-fds --detach --input '{"steps":[{"op":"exec","name":"a","cmd":"true"},{"op":"wait","name":"w","signal":"go"}]}' >/dev/null || true
wait_true 30 'engine history esc-fds 2>/dev/null | has_line SignalWaitStarted' || true
leaked=""
for f in /proc/"$S"/fdinfo/*; do
  fd="${f##*/}"; [ "$fd" -le 2 ] && continue
  flags="$(awk '/^flags:/ {print $2}' "$f" 2>/dev/null)" || continue
  [ -n "$flags" ] || continue
  (( (8#$flags & 8#2000000) == 0 )) && leaked="$leaked $fd:$(readlink /proc/"$S"/fd/"$fd")"
done
[ -z "$leaked" ] && row engine_fds_cloexec host held || row engine_fds_cloexec host "ESCAPED: not close-on-exec:$leaked"
engine signal esc-fds go '{}' >/dev/null 2>&1 || true
wait_status esc-fds completed 60 || true

# --- one sandbox per workflow id: ids that once mapped to one container and
# workspace (the same first 100 characters) each keep their own
P="$(printf 'a%.0s' $(seq 100))"
for driver in docker bwrap; do
  for who in one two; do
    ENGINE_SANDBOX_DRIVER="$driver" engine start "$WF" --id "$P-$driver-$who" --detach --input '{"steps":[
      {"op":"exec","name":"mark","cmd":"echo '"$who"' > /workspace/working/who"},
      {"op":"wait","name":"w","signal":"go"},
      {"op":"exec","name":"who","cmd":"cat /workspace/working/who"}]}' >/dev/null || true
    wait_true 30 'engine history "$P-$driver-$who" 2>/dev/null | has_line SignalWaitStarted' || true
  done
  for who in one two; do engine signal "$P-$driver-$who" go '{}' >/dev/null 2>&1 || true; done
  got=""
  for who in one two; do
    wait_status "$P-$driver-$who" completed 60 || true
    got="$got $(engine show "$P-$driver-$who" --json | jget result.results.who.stdout | tr -d '\n')"
  done
  [ "$got" == " one two" ] && row same_prefix_ids "$driver" held ||
    row same_prefix_ids "$driver" "ESCAPED: one session reached the other's sandbox (got:$got)"
done

# --- the quota seen from the host: a full workspace costs the host diskMb at most
for driver in docker bwrap; do
  before="$(df -Pk "$T" | awk 'NR==2 {print $3}')"
  ENGINE_SANDBOX_DRIVER="$driver" engine start "$WF" --id "quota-$driver" --detach --input '{"limits":{"memoryMb":128,"pids":64,"cpu":1,"diskMb":16},"steps":[
    {"op":"exec","name":"fill","cmd":"head -c 100M /dev/zero > /workspace/working/f; ls -l /workspace/working/f"},
    {"op":"wait","name":"w","signal":"go"}]}' >/dev/null || true
  wait_true 30 'engine history "quota-$driver" 2>/dev/null | has_line SignalWaitStarted' || true
  after="$(df -Pk "$T" | awk 'NR==2 {print $3}')"
  grown=$(( (after - before) / 1024 ))
  [ "$grown" -lt 40 ] && row host_disk_under_quota "$driver" held ||
    row host_disk_under_quota "$driver" "ESCAPED: the host's disk grew by $grown MB for diskMb=16"
  engine signal "quota-$driver" go '{}' >/dev/null 2>&1 || true
  wait_status "quota-$driver" completed 60 || true
done
kill "$S" 2>/dev/null; wait "$S" 2>/dev/null || true

# --- an agent session whose tool fills its workspace ends with limit.exceeded (diskMb)
printf '%s\n' '{"objective": "Make a scratch file.", "permissions": {"tools": ["shell"]},' \
  ' "limits": {"timeoutSeconds": 600, "maxModelTurns": 4, "maxToolCalls": 4, "memoryMb": 256, "cpu": 1, "diskMb": 16},' \
  ' "model": {"name": "replay:'"$SRC"'/tests/fixtures/replay/disk_fill.jsonl"}}' >"$T/disk_session.json"
for driver in docker bwrap; do
  ENGINE_SANDBOX_DRIVER="$driver" ENGINE_POLICIES_DIR="$SRC/policies" engine start "$SRC/workflows/agent_session.lua" \
    --id "disk-$driver" --quiet --input @"$T/disk_session.json" >/dev/null 2>&1 || true
  ev="$(engine events "disk-$driver" --json 2>/dev/null | grep '"limit.exceeded"' || true)"
  [[ "$ev" == *'"limit":"diskMb"'* ]] && row agent_session_disk_limit "$driver" held ||
    row agent_session_disk_limit "$driver" "ESCAPED: no limit.exceeded diskMb (status $(status "disk-$driver"))"
done
assert_eq "no sandbox left" 0 "$(ls -A "$T/workspaces" 2>/dev/null | wc -l)"
assert_eq "no workspace mount left" 0 "$(grep -c " $T/workspaces/" /proc/self/mountinfo || true)"

echo "| attempt                  | driver | result |"
cat "$ROWS"
finish
