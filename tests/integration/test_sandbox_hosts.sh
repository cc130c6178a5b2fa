#!/usr/bin/env bash
# A session's sandbox belongs to the host that made it. Two workers on one
# PostgreSQL play two hosts (ENGINE_HOST_ID host-a and host-b; one Docker
# engine serves both here, so each leaves the other's containers alone by
# their engine.host label). A is killed with -9 in the middle of a shell
# call: B takes the session over, finds the sandbox out of reach, provisions
# it again and records that (sandbox.reprovisioned), and runs the call once
# more. A comes back while the session waits for an approval: its sweep at
# start-up removes its old sandbox (the session moved) and leaves B's. B is
# killed, A carries the session to its end (a third sandbox, recorded), and
# B's sweep at its return removes B's (the session is done). On SQLite, a
# sandbox whose container went away (as with a restart of the host) is
# provisioned again the same way, and the periodic sweep removes an orphan
# while the worker runs.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
cd "$SRC"
WF="$SRC/workflows/agent_session.lua"
export ENGINE_CONTEXT_ROOTS="$SRC:$T" ENGINE_REVIEWS_DIR="$T/reviews" ENGINE_ARTIFACTS="$T/artifacts"
export ENGINE_NO_POLICY_WATCH=1
python3 "$SRC/tests/integration/make_recordings.py" "$T/rec"
INPUT="$T/moved.json"
printf '{"model":{"name":"replay:%s"}}' "$T/rec/moved.jsonl" >"$T/over.json"
lua5.4 "$SRC/tests/integration/merge_json.lua" "$SRC/examples/pr-review.json" "@$T/over.json" >"$INPUT"

# containers of session $1 on host $2 (its engine.host label), of this test's databases
containers() {
  docker ps -aq --filter label=engine.managed=true --filter "label=engine.instance=$INSTANCE" \
    --filter "label=engine.session=$1" --filter "label=engine.host=$2" | wc -l
}
events() { engine events "$1" --json; }
count() { events "$1" | grep -c "\"type\":\"$2\"" || true; }
wait_event() { # ID TYPE N SECONDS
  wait_for "$4" "$3 $2 event(s) of $1" '[ "$(count "$1" "$2")" -ge "$3" ]' 'echo "status $(status "$1"), $(count "$1" "$2") $2"' "$@"
}
# waits for log file $1 to contain $2
wait_log() {
  wait_true 30 'grep -q "$2" "$1" 2>/dev/null' '' "$@" && return 0
  fail "never logged [$2] in $1: $(tail -5 "$1" 2>/dev/null)"; return 1
}

# ---- SQLite, one host: a container gone while its session waits ----
export ENGINE_SWEEP_INTERVAL_MS=500
bg S engine serve 2>>"$T/sqlite.log"
wait_serving "$T/sqlite.log"
INSTANCE="$(sqlite3 "$ENGINE_DB" "SELECT value FROM meta WHERE key='instance_id'")"
HOST="$(hostname)"
"$ENGINE" start "$WF" --input @"$INPUT" --id gone --detach >/dev/null 2>&1 || true
wait_event gone approval.requested 1 120
assert_eq "the sandbox records its host" "\"host\":\"$HOST\"" \
  "$(events gone | grep '"sandbox.ready"' | grep -o "\"host\":\"[^\"]*\"")"
docker rm -f $(docker ps -aq --filter "label=engine.instance=$INSTANCE" --filter label=engine.session=gone) >/dev/null
approve_pending gone --reason ok >/dev/null
wait_status gone completed 120
ev="$(events gone)"
assert_contains "provisioned again: its container was gone" '"reason":"its container is gone"' \
  "$(grep '"sandbox.reprovisioned"' <<<"$ev")"
assert_contains "the call ran in the new sandbox" "wrote" "$(grep '"id":"m3"' <<<"$ev" | grep tool.result)"
assert_contains "the model is told what was lost" "provisioned again" "$(grep '"id":"m3"' <<<"$ev" | grep tool.result)"
assert_eq "one result per call" "3 3" "$(count gone tool.requested) $(count gone tool.result)"
assert_eq "nothing left" 0 "$(containers gone "$HOST")"
# an orphan while the worker runs: the periodic sweep (every 500 ms here) takes it
docker create --label engine.managed=true --label "engine.instance=$INSTANCE" --label engine.session=ghost \
  --label "engine.host=$HOST" --network none engine-sandbox:latest sleep infinity >/dev/null
wait_true 30 '[ "$(containers ghost "$HOST")" == 0 ]' || true
assert_eq "the periodic sweep removed an orphan" 0 "$(containers ghost "$HOST")"
kill "$S"; wait "$S" 2>/dev/null || true
unset ENGINE_SWEEP_INTERVAL_MS

# ---- PostgreSQL, two hosts ----
own_pg_cluster
"$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U engine hosts
export ENGINE_DB="postgres://engine@127.0.0.1:$PGPORT/hosts" ENGINE_DATA_DIR="$T/data" ENGINE_LEASE_MS=3000
export ENGINE_BUSY_TIMEOUT_MS=10000
worker() { # HOST VAR: a worker of that host in the background, its log in $T/HOST.log
  ENGINE_HOST_ID="$1" "$ENGINE" serve 2>>"$T/$1.log" & printf -v "$2" '%s' "$!"
  PIDS+=("$!")
}
worker host-a A
wait_true 30 'INSTANCE="$("$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U engine -d hosts -XAtqc \
  "SELECT value FROM meta WHERE key='\''instance_id'\''" 2>/dev/null || true)"; [ -n "$INSTANCE" ]' || true
"$ENGINE" start "$WF" --input @"$INPUT" --id mv --detach >/dev/null 2>&1 || true
wait_event mv tool.requested 1 120
wait_true 60 'pgrep -f "sleep 4; echo slept" >/dev/null' # the slow command runs in host-a's sandbox now
assert_eq "host-a made the sandbox" 1 "$(containers mv host-a)"
worker host-b B
kill -9 "$A"; wait "$A" 2>/dev/null || true
wait_event mv approval.requested 1 120
ev="$(events mv)"
re="$(grep '"sandbox.reprovisioned"' <<<"$ev")"
assert_contains "host-b provisioned it again" '"host":"host-b"' "$re"
assert_contains "  from host-a's" '"from_host":"host-a"' "$re"
assert_contains "  and says why" 'the sandbox is on host host-a' "$re"
m1="$(grep '"id":"m1"' <<<"$ev" | grep tool.result)"
assert_contains "the interrupted call ran again" "slept" "$m1"
assert_contains "  with the note for the model" "provisioned again" "$m1"
assert_eq "host-a's sandbox is still there (no one on host-a to remove it)" 1 "$(containers mv host-a)"
assert_eq "host-b's sandbox" 1 "$(containers mv host-b)"

# host-a returns: its sweep at start-up removes its sandbox of the moved session, not host-b's
worker host-a A
wait_log "$T/host-a.log" "removed orphaned sandboxes"
assert_contains "  because the session moved" "moved to host-b" "$(cat "$T/host-a.log")"
assert_eq "host-a's old sandbox is gone" 0 "$(containers mv host-a)"
assert_eq "host-b's sandbox of the live session stays" 1 "$(containers mv host-b)"

# host-b dies while the session waits; host-a carries it to its end
kill -9 "$B"; wait "$B" 2>/dev/null || true
approve_pending mv --reason ok >/dev/null
wait_status mv completed 120
ev="$(events mv)"
assert_eq "two moves recorded" 2 "$(count mv sandbox.reprovisioned)"
assert_contains "the transcript says so" "sandbox provisioned again on host-b" "$(engine events mv)"
assert_contains "  the second back to host-a" '"from_host":"host-b"' "$(grep '"sandbox.reprovisioned"' <<<"$ev" | tail -1)"
m3="$(grep '"id":"m3"' <<<"$ev" | grep tool.result)"
assert_contains "the last call ran in host-a's new sandbox" "wrote" "$m3"
assert_contains "  where the first sandbox's file is not" "No such file" "$m3"
assert_eq "one result per call" "3 3" "$(count mv tool.requested) $(count mv tool.result)"
assert_contains "after.txt is an artifact" '"path":"output/after.txt"' "$(grep '"artifact.saved"' <<<"$ev")"
assert_eq "dense event stream" ok "$(events mv | lua5.4 "$SRC/tests/integration/verify.lua" events >/dev/null && echo ok)"
assert_eq "host-a destroyed its sandbox at the end" 0 "$(containers mv host-a)"
assert_eq "host-b's is left for host-b" 1 "$(containers mv host-b)"
worker host-b B
wait_log "$T/host-b.log" "removed orphaned sandboxes"
assert_eq "host-b's sweep removed it (the session is done)" 0 "$(containers mv host-b)"
kill "$A" "$B"; wait "$A" "$B" 2>/dev/null || true
finish
