#!/usr/bin/env bash
# engine serve as a systemd service (packaging/engine.service), run the way
# systemd runs it: the unit's ExecStart with its WorkingDirectory and
# Environment, NOTIFY_SOCKET on a datagram socket this test holds
# (notify_socket.py records every datagram), WATCHDOG_USEC and WATCHDOG_PID.
# READY=1 comes once it serves, WATCHDOG=1 keeps coming, SIGHUP reloads (the
# configuration, an edited policy set, the triggers) between RELOADING=1 and
# READY=1, and SIGTERM exits 0 with STOPPING=1 while a session waits for an
# approval, which completes after a restart (an activity still running is
# abandoned and runs again then). --log-format json and the
# journal's level prefixes too. No systemd runs here; where systemd-analyze
# is installed, the unit is verified with it.
source "$(dirname "$0")/lib.sh"
UNIT="$SRC/packaging/engine.service"
export ENGINE_NO_SWEEP=1 # no Docker to ask here
export TEST_SIDE_EFFECTS="$T/effects"

# --- the unit file
unit_value() { sed -n "s/^$1=//p" "$UNIT"; }
assert_eq "Type=notify" notify "$(unit_value Type)"
assert_eq "a watchdog" 30 "$(unit_value WatchdogSec)"
assert_eq "SIGHUP reloads" '/bin/kill -HUP $MAINPID' "$(unit_value ExecReload)"
assert_eq "its own user" engine "$(unit_value User)"
assert_eq "the state directory" engine "$(unit_value StateDirectory)"
assert_eq "runs in it" /var/lib/engine "$(unit_value WorkingDirectory)"
assert_eq "SIGTERM to the engine alone (activities' processes are killed after it)" mixed "$(unit_value KillMode)"
for opt in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes; do
  assert_contains "hardening: $opt" "$opt" "$(grep -x "$opt" "$UNIT" || true)"
done
EXECSTART="$(unit_value ExecStart)"
assert_contains "ExecStart serves the API on 127.0.0.1:8420" "/usr/bin/engine serve --listen 127.0.0.1:8420" "$EXECSTART"
if command -v systemd-analyze >/dev/null; then
  mkdir -p "$T/unit"
  sed "s#/usr/bin/engine#$ENGINE#" "$UNIT" >"$T/unit/engine.service"
  assert_exit "systemd-analyze verify accepts the unit" 0 systemd-analyze verify "$T/unit/engine.service"
  assert_eq "and says nothing about it" "" "$ERR"
else
  echo "(systemd-analyze is not installed: the unit is not verified)"
fi

# --- ExecStart as systemd would run it
STATE="$T/var/lib/engine" # StateDirectory=engine
mkdir -p "$STATE"
read -r -a ARGV <<<"$EXECSTART"
[ "${ARGV[0]}" == /usr/bin/engine ] || fail "ExecStart does not run /usr/bin/engine: $EXECSTART"
ARGV[0]="$ENGINE"
# tests run side by side: a free port in place of 8420
for i in "${!ARGV[@]}"; do
  if [ "${ARGV[$i]}" == 127.0.0.1:8420 ]; then ARGV[$i]=127.0.0.1:0; fi
done
UNIT_ENV=()
while read -r -a kv; do
  for a in "${kv[@]}"; do UNIT_ENV+=("${a//\/var\/lib\/engine/$STATE}"); done
done < <(unit_value Environment)
# the default database is the one under WorkingDirectory (the unit names none)
unset ENGINE_DB
DB="$STATE/engine.db"
# the shipped workflows and triggers, where the unit's --workflows default finds them
cp -r "$SRC/workflows" "$STATE/workflows"
cp -r "$SRC/policies" "$T/policies"
export ENGINE_POLICIES_DIR="$T/policies"

# listen ADDR NAME: a notify socket at ADDR recording into $T/NAME.notify
# (with the size of $T/NAME.log at each datagram); sets LP
listen() {
  python3 "$SRC/tests/integration/notify_socket.py" "$1" "$T/$2.notify" "$T/$2.log" 2>"$T/$2.listener.err" &
  LP=$!
  PIDS+=("$LP")
  wait_for 30 "the notify socket $1 to listen" 'grep -q listening "$T/$1.notify" 2>/dev/null' 'cat "$T/$1.listener.err"' "$2"
}
# unit NAME NOTIFY_ADDR [ARGS...]: ExecStart (+ ARGS) in the unit's working
# directory and environment, its stderr in $T/NAME.log; WATCHDOG_PID is its
# own pid, as systemd sets it; sets S
unit() {
  local name="$1" addr="$2"
  shift 2
  bg S env -u ENGINE_DB -C "$STATE" "${UNIT_ENV[@]}" NOTIFY_SOCKET="$addr" WATCHDOG_USEC=400000 \
    sh -c 'WATCHDOG_PID=$$ exec "$@"' sh "${ARGV[@]}" "$@" 2>>"$T/$name.log"
}
# states NAME: the datagrams received, one per line ("\n" inside shown as |)
states() {
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if "state" in r: print(r["state"].replace("\n", "|"))' "$T/$1.notify"
}
count() { states "$1" | grep -c -- "$2" || true; }
# gone PID: the process has exited (not a zombie of ours still running)
gone() { ! kill -0 "$1" 2>/dev/null; }
# exit_of PID: its exit status, once it has exited
exit_of() { local rc=0; wait "$1" 2>/dev/null || rc=$?; echo "$rc"; }

listen "$T/notify.sock" s1
unit s1 "$T/notify.sock"
wait_for 60 "READY=1 from the unit's ExecStart" '[ "$(count s1 "^READY=1")" -ge 1 ]' 'states s1; tail -n 5 "$T/s1.log"'
URL="$(api_url "$T/s1.log")"
ready_at="$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("state", "").startswith("READY=1"): print(r["log_bytes"]); break' "$T/s1.notify")"
assert_contains "READY=1 only after it said it serves" "engine: serving engine.db (pid $S), API on http://127.0.0.1:" \
  "$(head -c "$ready_at" "$T/s1.log")"
assert_contains "after the triggers loaded" "engine: triggers: 1 file(s) in $STATE/workflows/triggers" "$(head -c "$ready_at" "$T/s1.log")"
assert_contains "READY=1 says what it serves" "READY=1|STATUS=serving engine.db, API on $URL" "$(states s1)"
assert_contains "the database is under the state directory" "$DB" "$(ls "$DB")"
w0="$(count s1 "^WATCHDOG=1$")"
wait_for 30 "WATCHDOG=1 to keep coming" '[ "$(count s1 "^WATCHDOG=1$")" -ge $((w0 + 3)) ]' 'states s1 | tail -n 3'
pass "WATCHDOG=1 keeps coming ($(count s1 "^WATCHDOG=1$") so far)"

# a session that waits for an approval, started through the API
export ENGINE_DB="$DB" # the CLI's commands below, on the unit's database
assert_exit "a session starts through the API" 3 engine --server "$URL" start hello.lua --id H1 --input '{"name":"svc","sleep":0}' --detach
wait_status H1 waiting 60 || fail "H1 does not wait for its approval"

# --- SIGHUP: the configuration, an edited policy set, the triggers
printf '\n-- edited for the reload test\n' >>"$T/policies/10-shell.lua"
want_hash="$(engine policy check "$T/policies" | jget hash)"
kill -HUP "$S"
wait_for 30 "RELOADING=1, then READY=1" 'states s1 | grep -v WATCHDOG | tail -n 2 | tr "\n" " " | has_line "^RELOADING=1|MONOTONIC_USEC=[0-9]*|STATUS=reloading READY=1|STATUS=serving"' \
  'states s1 | grep -v WATCHDOG'
log="$(cat "$T/s1.log")"
assert_contains "the configuration reload is logged" "engine: reloaded the configuration" "$log"
assert_contains "the edited policy set is in force" "\"hash\":\"$want_hash\"" "$(grep "policies reloaded on SIGHUP" "$T/s1.log")"
assert_contains "the triggers are reloaded" "engine: triggers reloaded on SIGHUP: {\"dir\":\"$STATE/workflows/triggers\",\"files\":1" "$log"
# a policy edit that does not load: the set in force stays
printf 'return {  -- broken\n' >"$T/policies/99-broken.lua"
kill -HUP "$S"
wait_for 30 "the second reload's READY=1" '[ "$(count s1 "^RELOADING=1")" -ge 2 ] && [ "$(count s1 "^READY=1")" -ge 3 ]' 'states s1 | grep -v WATCHDOG'
assert_contains "a broken policy set is refused on SIGHUP, the previous kept" "\"kept\":\"$want_hash\"" \
  "$(grep "engine: warning: policies rejected on SIGHUP, the previous set stays in force" "$T/s1.log")"
rm "$T/policies/99-broken.lua"
assert_eq "still waiting" waiting "$(status H1)"

# --- SIGTERM: exit 0 within the bound, the session waits on
curl -sN -H "Accept: text/event-stream" "$URL/v1/events" -o "$T/stream.out" 2>"$T/stream.err" &
CURL=$!
wait_for 30 "the event stream to be open" '[ "$(curl -s "$URL/metrics" | sed -n "s/^engine_sse_streams \([0-9]*\)$/\1/p")" == 1 ]'
kill -TERM "$S"
wait_for 30 "the service to exit after SIGTERM" 'gone "$S"' 'tail -n 3 "$T/s1.log"'
assert_eq "it exits 0" 0 "$(exit_of "$S")"
assert_contains "having said STOPPING=1" "STOPPING=1" "$(states s1 | tail -n 2)"
assert_contains "its log says it stops" "engine: stopping (SIGTERM)" "$(cat "$T/s1.log")"
assert_eq "and that it stopped" "engine: stopped" "$(tail -n 1 "$T/s1.log")"
assert_eq "an open event stream was ended, not cut off" 0 "$(exit_of "$CURL")"
assert_eq "the session still waits" waiting "$(status H1)"
kill "$LP"

# --- restarted (Restart=, or systemctl start): the session completes
listen "$T/notify.sock2" s2
unit s2 "$T/notify.sock2"
wait_for 60 "READY=1 after the restart" '[ "$(count s2 "^READY=1")" -ge 1 ]' 'states s2; tail -n 5 "$T/s2.log"'
assert_exit "the approval is sent" 0 engine signal H1 approval '{"approved":true}'
wait_status H1 completed 60 || fail "H1 did not complete after the restart"
assert_eq "approved" true "$(engine show H1 --json | jget result.approved)"

# --- an activity still running at SIGTERM is abandoned, and runs again at the next start
mkdir -p "$T/gate"
printf '%s\n' 'local activity = require "activity"' 'return { wait = function(a)' \
  '  local f = assert(io.open(os.getenv("TEST_SIDE_EFFECTS"), "a")); f:write("gate ", activity.info().attempt, "\n"); f:close()' \
  '  while not io.open(a.file) do activity.sleep(0.05) end' '  return "opened"' 'end }' >"$T/gate/gate_acts.lua"
printf '%s\n' 'local wf = require "workflow"' \
  'return function(input) return wf.activity("gate_acts.wait", { file = input.file }, { start_to_close = 3600 }) end' \
  >"$T/gate/gate.lua"
assert_exit "a session whose activity waits for a gate" 3 engine start "$T/gate/gate.lua" --id G1 --detach \
  --input "{\"file\":\"$T/gate.open\"}"
wait_for 60 "the gate activity to run" 'grep -q "^gate" "$TEST_SIDE_EFFECTS" 2>/dev/null'
kill -TERM "$S"
wait_for 30 "the second run to exit" 'gone "$S"'
assert_eq "it exits 0 with the activity still running" 0 "$(exit_of "$S")"
assert_eq "the session has not finished" running "$(status G1)"
kill "$LP"
touch "$T/gate.open"
listen "$T/notify.sock3" s3
unit s3 "$T/notify.sock3"
wait_for 60 "READY=1 of the third run" '[ "$(count s3 "^READY=1")" -ge 1 ]' 'states s3; tail -n 5 "$T/s3.log"'
wait_status G1 completed 60 || fail "G1 did not complete after the restart"
assert_eq "the activity ran again, as after a crash" 2 "$(grep -c "^gate" "$TEST_SIDE_EFFECTS")"
assert_eq "and its outcome is recorded once" 1 "$(engine history G1 --json | grep -o '"type":"ActivityCompleted"' | wc -l)"
kill -TERM "$S"
wait_for 30 "the third run to exit" 'gone "$S"'
assert_eq "it exits 0 too" 0 "$(exit_of "$S")"
kill "$LP"

# --- --log-format json, notified on an abstract socket
addr="@engine-test-$$-$RANDOM"
listen "$addr" json2
unit json2 "$addr" --log-format json
wait_for 60 "READY=1 on the abstract socket" '[ "$(count json2 "^READY=1")" -ge 1 ]' 'states json2; tail -n 5 "$T/json2.log"'
wait_for 30 "WATCHDOG=1 on it" '[ "$(count json2 "^WATCHDOG=1$")" -ge 1 ]'
kill -TERM "$S"
wait_for 30 "the json run to exit" 'gone "$S"'
assert_eq "it exits 0" 0 "$(exit_of "$S")"
out="$(python3 -c 'import json,sys
n = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    assert set(r) >= {"ts", "level", "pid", "msg"}, r
    assert r["level"] in ("error", "warning", "info", "debug"), r
    n += 1
    if r["msg"].startswith("serving "): print("serving", r["level"], r["pid"] == int(sys.argv[2]))
print("lines", n)' "$T/json2.log" "$S" 2>&1)"
assert_contains "every line is a JSON object with ts, level, pid and msg; serving is info, with the pid" "serving info True" "$out"
assert_contains "the stop is logged too" '"msg":"stopped"' "$(tail -n 1 "$T/json2.log")"
assert_contains "the same way" '"level":"info"' "$(tail -n 1 "$T/json2.log")"
kill "$LP"

# --- the bound: a request that never arrives whole does not hold the stop
ENGINE_STOP_TIMEOUT_S=1 serve_api --db "$T/bound.db"
port="${URL##*:}"
exec 9<>"/dev/tcp/127.0.0.1/$port"
printf 'POST /v1/workflows HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"half":' >&9
# another request answered after it was sent: the server has read its head
curl -sf "$URL/healthz" >/dev/null || fail "no answer beside the half request"
kill -TERM "$S"
wait_for 30 "the stop to give up on the half request" 'gone "$S"' 'tail -n 3 "$T/serve.log"'
assert_eq "it exits 0 all the same" 0 "$(exit_of "$S")"
assert_contains "saying the bound passed" "engine: warning: the stop took longer than 1 s (ENGINE_STOP_TIMEOUT_S)" "$(cat "$T/serve.log")"
exec 9>&-

# --- ENGINE_LOG_FORMAT, and the journal's levels
assert_exit "an unknown ENGINE_LOG_FORMAT is refused" 2 env ENGINE_LOG_FORMAT=xml "$ENGINE" serve --db "$T/other.db"
assert_contains "saying so" "ENGINE_LOG_FORMAT must be text or json, not 'xml'" "$ERR"
: >"$T/journal.log"
bg S env JOURNAL_STREAM="$(stat -c '%d:%i' "$T/journal.log")" "$ENGINE" serve --db "$T/other.db" 2>>"$T/journal.log"
wait_for 30 "serve with its stderr the journal to serve" 'grep -q "engine: serving" "$T/journal.log"'
kill -TERM "$S"
wait_for 30 "it to exit" 'gone "$S"'
assert_eq "it exits 0" 0 "$(exit_of "$S")"
assert_contains "a line to the journal begins with its syslog level" "<6>engine: serving $T/other.db" "$(cat "$T/journal.log")"
assert_eq "every line has one" "" "$(grep -v '^<[0-7]>' "$T/journal.log" || true)"
finish
