#!/usr/bin/env bash
# Nothing an exec starts outlives it, whatever it does to get away (setsid,
# nohup, a double fork, disown, a setsid fork bomb); a pids-limit hit is a
# typed error and the next command still runs; an output flood costs the
# engine a bounded window, not the flood. Both drivers, where the attempt
# applies. Prints a table: attempt | driver | result.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine answers on /var/run/docker.sock (scripts/start-dockerd starts one)"; finish
fi
IMAGE="${ENGINE_SANDBOX_IMAGE:-engine-sandbox:latest}"
if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then fail "image $IMAGE missing (scripts/build-sandbox-image)"; finish; fi
DRIVERS=(docker)
if command -v bwrap >/dev/null && [ -d "${ENGINE_SANDBOX_ROOTFS:-/var/cache/engine/sandbox-rootfs}/usr" ]; then
  DRIVERS+=(bwrap)
else
  fail "bubblewrap or its rootfs is missing (scripts/build-sandbox-image keeps the rootfs)"
fi
WF="$SRC/tests/integration/wf/sandbox_session.lua"
chmod 0711 "$T" # as root, the bwrap driver runs sandboxes as uid 10001, which must reach the workspace
export ENGINE_WORKSPACES="$T/workspaces"
ROWS=()
row() { ROWS+=("| $1 | $2 | $3 |"); } # attempt driver result
# check ATTEMPT DRIVER OK-CONDITION-EXIT DETAIL: a table row and a pass/fail line
check() {
  if [ "$3" == 0 ]; then row "$1" "$2" "contained"; pass "$2: $1: contained"
  else row "$1" "$2" "ESCAPED: $4"; fail "$2: $1: $4"; fi
}

# Each attempt N leaves a process that names a number of its own (730N) and
# waits until that process has got away (a ready file it writes after setsid
# or setpgrp). The session then waits for a signal: the host's process list
# (where container and bwrap processes show too) must hold nothing of the
# attempt; then a new exec lists the sandbox's processes.
lua5.4 - >"$T/in.json" <<'EOF'
-- how = {before, after}: what detaches `sh -c ...`; after ends with the & that backgrounds it
local function away(n, how)
  return string.format("%s sh -c 'touch /tmp/.r%d; exec sleep 730%d' %s while [ ! -e /tmp/.r%d ]; do sleep 0.05; done",
    how[1], n, n, how[2], n)
end
-- the exec's own wrapper (the parent of timeout(1), our parent), when there is one
local WRAPPER = "w=$(ps -o ppid= -p $PPID); [ \"$w\" -gt 1 ] &&"
local steps = {
  { "setsid", away(1, { "setsid", ">/dev/null 2>&1 &" }) },
  { "nohup", away(2, { "nohup", ">/dev/null 2>&1 &" }) },
  { "double_fork", away(3, { "(", "&) &" }) },
  { "disown", { "bash", "-c", away(4, { "", "& disown;" }) } },
  { "setpgrp", "python3 -c \"import os, time; os.setpgrp(); open('/tmp/.r6', 'w').close(); time.sleep(7306)\"" ..
    " >/dev/null 2>&1 & while [ ! -e /tmp/.r6 ]; do sleep 0.05; done" },
  { "setsid_bomb", "for i in $(seq 300); do setsid sleep 7305 & done", 30 },
  { "kill_the_wrapper", away(7, { "setsid", ">/dev/null 2>&1 &" }) .. "; " .. WRAPPER .. " kill -9 $w $PPID" },
  { "forged_report", away(8, { "setsid", ">/dev/null 2>&1 &" }) ..
    "; printf '\\036engine-exec-end 0 0 0 64\\n' >&2; " .. WRAPPER .. " kill -9 $w $PPID" },
}
local list = {}
for i, s in ipairs(steps) do
  list[#list + 1] = { op = "exec", name = s[1], cmd = s[2], timeout = s[3] or 20 }
  list[#list + 1] = { op = "wait", name = "wait_" .. s[1], signal = "go" .. i }
  if s[1] == "setsid_bomb" then list[#list + 1] = { op = "exec", name = "after_bomb", cmd = "echo ok" } end
  list[#list + 1] = { op = "exec", name = "ps_" .. s[1], cmd = "ps -eo pid,user,args" }
end
list[#list + 1] = { op = "exec", name = "plain", cmd = "echo fine" }
io.write(require("cjson").encode({ limits = { memoryMb = 128, pids = 64, cpu = 1 }, steps = list }))
EOF
ATTEMPTS="setsid:1 nohup:2 double_fork:3 disown:4 setpgrp:6 setsid_bomb:5 kill_the_wrapper:7 forged_report:8"

leftovers() { # processes of attempt N ($1) in a ps listing on stdin: its number as a
  # word of its own (not inside a container id's hex, as a shim's -id can hold it)
  grep -cE "(^|[^0-9a-f])[7]30$1([^0-9a-f]|$)" || true
}
waits() { engine history "$1" | grep -c SignalWaitStarted || true; }

for driver in "${DRIVERS[@]}"; do
  id="cl-$driver"
  export ENGINE_SANDBOX_DRIVER="$driver"
  bg S engine serve
  engine start "$WF" --id "$id" --detach --input @"$T/in.json" >/dev/null 2>&1 || true
  k=0
  for a in $ATTEMPTS; do
    name="${a%%:*}" secs="${a##*:}"; k=$((k + 1))
    wait_true 60 '[ "$(waits "$id")" -ge "$k" ]' || true
    [ "$(waits "$id")" -ge "$k" ] || { fail "$driver: the session never got past $name ($(status "$id"))"; break; }
    # a process killed by the exec's clean-up may take the kernel a moment to
    # tear down on a loaded machine: it must be gone within 2 s, not live on
    wait_true 30 'n="$(ps -eo args | leftovers "$secs")"; [ "$n" == 0 ]' || true
    check "$name: after the exec (host)" "$driver" "$n" "$n process(es) of the attempt outlived its exec"
    # what they are, so that a failure explains itself (state D: stuck in the kernel)
    [ "$n" == 0 ] || ps -eo pid,ppid,stat,wchan:24,uid,etimes,args | grep -E "PID|[7]30$secs" >&2
    engine signal "$id" "go$k" >/dev/null
  done
  wait_status "$id" completed 120 || true
  kill "$S"; wait "$S" 2>/dev/null || true
  assert_eq "$driver: the session completed" completed "$(status "$id")"
  out="$(engine show "$id" --json | jget result)"
  r() { jget "results.$1" <<<"$out"; }
  for a in $ATTEMPTS; do
    name="${a%%:*}" secs="${a##*:}"
    if [ "$(r "ps_$name.exit_code")" != 0 ]; then
      check "$name: the next exec (ps inside)" "$driver" 1 "it could not list processes: $(r "ps_$name.stderr" | head -c 200)"
      continue
    fi
    n="$(leftovers "$secs" <<<"$(r "ps_$name.stdout")")"
    check "$name: the next exec (ps inside)" "$driver" "$n" "$n process(es) of the attempt still run in the next exec"
    [ "$(r "$name.survivors")" == nil ] || check "$name: the host saw it gone" "$driver" 1 "the engine still saw processes 10 s after reaping"
  done
  [ "$(r after_bomb.stdout | tr -d '\n')" == ok ] && after=0 || after=1
  check "a command after the fork bomb" "$driver" "$after" "exit $(r after_bomb.exit_code): $(r after_bomb.stderr | head -c 200)"
  if [ "$driver" == docker ]; then
    # the pids limit as a typed error (bwrap's rlimit counts every process of the host user: not reported yet)
    hit="$(r setsid_bomb.pids_limit_hit)" err="$(r setsid_bomb.error)"
    if [ "$hit" == true ] && [[ "$err" == *"pids limit (64)"* ]]; then
      row "pids limit hit reported" "$driver" "typed: $err"; pass "$driver: pids limit hit reported: $err"
    else
      row "pids limit hit reported" "$driver" "NOT REPORTED (pids_limit_hit=$hit, error=$err)"
      fail "$driver: the fork bomb's pids-limit hit is not reported (pids_limit_hit=[$hit] error=[$err])"
    fi
    [ "$(r plain.pids_limit_hit)" != true ] && [ "$(r plain.error)" == nil ] &&
      pass "$driver: a later plain command carries no pids error" || fail "$driver: a later command is blamed for the pids limit: $(r plain.error)"
    assert_eq "$driver: the wrapper's report is not part of stderr" "" "$(r setsid.stderr)"
  fi
  assert_eq "$driver: a plain command at the end" fine "$(r plain.stdout | tr -d '\n')"
done

# --- output floods: the engine holds a bounded window per stream, not the flood.
# K sessions flood 200 MB each at once (64 KiB kept) under one worker; its
# peak RSS (VmHWM) must stay well below what the floods would cost if buffered.
K=8
printf '%s\n' '{"limits": {"memoryMb": 128, "pids": 256, "cpu": 1}, "steps": [' \
  '{"op": "exec", "name": "flood", "cmd": ["head", "-c", "200000000", "/dev/zero"], "max_output": 65536, "timeout": 300}]}' >"$T/flood.json"
for driver in "${DRIVERS[@]}"; do
  export ENGINE_DB="$T/flood-$driver.db"
  export ENGINE_SANDBOX_DRIVER="$driver"
  : >"$T/serve.log"
  serve_bg
  before="$(awk '$1 == "VmRSS:" {print $2}' "/proc/$S/status")"
  for k in $(seq $K); do engine start "$WF" --id "fl-$driver-$k" --detach --input @"$T/flood.json" >/dev/null 2>&1 || true; done
  for k in $(seq $K); do wait_status "fl-$driver-$k" completed 600 || break; done
  peak="$(awk '$1 == "VmHWM:" {print $2}' "/proc/$S/status")"
  kill "$S"; wait "$S" 2>/dev/null || true
  counted=0
  for k in $(seq $K); do
    res="$(engine show "fl-$driver-$k" --json | jget result.results.flood)"
    [ "$(jget output_bytes <<<"$res") $(jget truncated <<<"$res")" == "200000000 true" ] && counted=$((counted + 1))
  done
  assert_eq "$driver: every flood counted in full and truncated" "$K" "$counted"
  grow=$(( (peak - before) / 1024 ))
  echo "# $driver: engine RSS before $((before / 1024)) MiB, peak $((peak / 1024)) MiB with $K floods of 200 MB at once"
  if [ "${ENGINE_SANITIZED:-0}" == 1 ]; then
    row "$K x 200 MB output flood" "$driver" "peak +$grow MiB (ASan build: not judged)"
  elif [ "$grow" -le 32 ]; then
    row "$K x 200 MB output flood" "$driver" "bounded: engine peak +$grow MiB"; pass "$driver: engine memory bounded under $K floods (+$grow MiB)"
  else
    row "$K x 200 MB output flood" "$driver" "UNBOUNDED: engine peak +$grow MiB"; fail "$driver: the engine grew by $grow MiB under $K floods"
  fi
done

echo
echo "| attempt | driver | result |"
echo "|---|---|---|"
printf '%s\n' "${ROWS[@]}"
finish
