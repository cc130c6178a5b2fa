#!/usr/bin/env bash
# W5, a long agent session: workflows/agent_session.lua against the local model
# server (tests/model_server) answering at once, TURNS turns of 2 parallel
# read_file calls (the trusted side reads the workspace: no exec in the
# sandbox), an allow-all policy set, one `engine serve`. Prints one table:
#   - engine CPU per turn (the sum of /proc/PID/task/*/schedstat of `engine
#     serve`) over turns 2..WINDOW+1 and TURNS-WINDOW+1..TURNS, sampled while the
#     server holds the next model request (the engine idle), beside the bytes of
#     that request (the transcript the engine builds);
#   - history bytes per turn (sum of payload lengths in the history table, all
#     runs) over the same windows; the runs the session took (continue-as-new,
#     compaction.runEvents) and the current run's events;
#   - kill -9 at turn TURNS (turn TURNS+1's model call in flight), then: `engine
#     replay w5` of the current run (a process of its own: start, load, replay,
#     compare), and the time from starting `engine serve` again to the session's
#     next domain event;
#   - RSS of `engine serve` at turn TURNS (before the kill) and at the end.
#   tests/bench/w5_bench.sh     (BUILD=build TURNS=1000 WINDOW=10 DRIVER=bwrap|docker PAUSE=1)
set -euo pipefail
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${BUILD:-$SRC/build}"
TURNS="${TURNS:-1000}" WINDOW="${WINDOW:-10}" DRIVER="${DRIVER:-bwrap}" PAUSE="${PAUSE:-1}"
ENGINE="$BUILD/engine/engine"
[ -x "$ENGINE" ] || ENGINE="$BUILD/engine"
T="$(mktemp -d "${TMPDIR:-/tmp}/w5-bench.XXXXXX")"
SP="" S="" CL=""
cleanup() {
  [ -z "$CL" ] || kill "$CL" 2>/dev/null || true
  if [ -n "$S" ] && kill -0 "$S" 2>/dev/null; then # a session left running: let it destroy its sandbox
    "$ENGINE" cancel w5 >/dev/null 2>&1 || true
    for _ in $(seq 100); do [ "$(sqlite3 "$ENGINE_DB" "SELECT status FROM workflows WHERE id = 'w5'" 2>/dev/null)" = running ] || break; sleep 0.1; done
    sleep 1
  fi
  for p in $S $SP; do kill "$p" 2>/dev/null || true; done
  if [ -n "${KEEP:-}" ]; then echo "(kept $T)"; else rm -rf "$T"; fi
}
trap cleanup EXIT
export ENGINE_LUA_DIR="$SRC/lua" ENGINE_DB="$T/engine.db" ENGINE_CONTEXT_ROOTS="$T" ENGINE_ARTIFACTS="$T/artifacts"
export ENGINE_POLICIES_DIR="$T/policies" ENGINE_SANDBOX_DRIVER="$DRIVER"
chmod 755 "$T" # bubblewrap's sandbox user (not the engine's) reaches the workspace through it
mkdir -p "$T/policies"
echo 'return { name = "allow-all", decide = function() return "allow", "bench" end }' >"$T/policies/00-allow.lua"

# every turn: two read_file calls of the task file (the server makes up unique
# call ids). The model requests of turns 2, WINDOW+2 and TURNS-WINDOW+1 wait
# PAUSE s: the session holds still while the bench samples the engine; the
# request of turn TURNS+1 waits an hour (the session sits there for the kill).
# A compaction's summary request (only if the carried transcript grows past
# 1 MB) gets a fixed answer.
P1=2 P2=$((WINDOW + 2)) P3=$((TURNS - WINDOW + 1)) P4=$((TURNS + 1))
read_call='{"name": "read_file", "arguments": "{\"path\": \"/workspace/task.md\"}"}'
reply='"reply": {"text": "reading", "tool_calls": ['"$read_call, $read_call"'], "usage": {"input_tokens": 100, "output_tokens": 10}}'
summary='{"body_has": "You are compacting the context", "step": {"reply": {"text": "SUMMARY: reads."}}}'
{
  printf '{"routes": [%s], "steps": [' "$summary"
  for i in $(seq "$TURNS"); do
    case "$i" in "$P1" | "$P2" | "$P3") printf '{"delay": %s, %s}' "$PAUSE" "$reply" ;; *) printf '{%s}' "$reply" ;; esac
    [ "$i" -lt "$TURNS" ] && printf ,
  done
  printf '], "default": {"delay": 3600, "reply": {"text": "late"}}}'
} >"$T/scenario.json"
printf '{"routes": [%s], "default": {%s}}' "$summary" "$reply" >"$T/after.json"
python3 "$SRC/tests/model_server/server.py" --port 0 --port-file "$T/port" --scenario "$T/scenario.json" >/dev/null 2>"$T/server.log" &
SP=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
MURL="http://127.0.0.1:$(cat "$T/port")"
# maxModelTurns ends the session after TURNS + 2 turns (two after the restart)
printf '{"objective": "Read the task file twice per turn.", "context": {"text": "a short task"},
  "permissions": {"tools": ["read_file"]},
  "limits": {"maxModelTurns": %d, "maxToolCalls": %d, "timeoutSeconds": 3600},
  "model": {"name": "m", "provider": "openai", "baseUrl": "%s/v1"}}' \
  $((TURNS + 2)) $((2 * TURNS + 10)) "$MURL" >"$T/input.json"

# CPU time of a process in ns: the sum over its threads of the time on a CPU
# (/proc/PID/task/*/schedstat, ns, where /proc/PID/stat counts 10 ms ticks)
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{t += $1} END {printf "%.0f", t}'; }
rss_kib() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }
hist_bytes() { sqlite3 "$ENGINE_DB" "SELECT coalesce(sum(length(payload)), 0) FROM history WHERE wf_id = 'w5'"; }
# compact JSON bytes of the last model request in the server's log
req_bytes() { curl -sf "$MURL/_requests" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(len(json.dumps(r[-1]["body"], separators=(",", ":"))) if r else "?")'; }
sql() { sqlite3 "$ENGINE_DB" "$1"; }

"$ENGINE" serve >"$T/serve.log" 2>&1 &
S=$!
"$ENGINE" start "$SRC/workflows/agent_session.lua" --input @"$T/input.json" --id w5 --detach >/dev/null 2>"$T/start.err" || true
# the server keeps every request: clear its log while no request is held
( while sleep 1; do curl -sf "$MURL/_health" | grep -q '"active": *0' && curl -sf -X DELETE "$MURL/_requests" >/dev/null; done ) &
CL=$!
t0="$(date +%s%N)"
# hold P: wait until the server holds the model request of turn P (every turn
# before it done, the engine idle), then one line "P cpu_ns history_bytes request_bytes"
: >"$T/samples"
hold() {
  local a; a="$(date +%s%N)"
  local h
  until h="$(curl -sf "$MURL/_health")" && [[ "$h" =~ \"active\":\ *1, ]] && [[ "$h" =~ \"served\":\ *$(($1 - 1))[,}] ]]; do
    [ $(( ($(date +%s%N) - a) / 1000000000 )) -lt 120 ] || { echo "w5_bench: no model request of turn $1 in 120 s:" >&2; "$ENGINE" show w5 >&2; exit 1; }
    sleep 0.005
  done
  echo "$1 $(cpu_ns "$S") $(hist_bytes) $(req_bytes)" >>"$T/samples"
}
hold $P1; hold $P2; hold $P3; hold $P4
t1="$(date +%s%N)"
kill "$CL" 2>/dev/null || true
rss_before="$(rss_kib "$S" VmRSS)" hwm_before="$(rss_kib "$S" VmHWM)"
kill -9 "$S"; wait "$S" 2>/dev/null || true
S=""
run="$(sql "SELECT run FROM workflows WHERE id = 'w5'")"
run_events="$(sql "SELECT count(*) FROM history WHERE wf_id = 'w5' AND run = $run")"
all_events="$(sql "SELECT count(*) FROM history WHERE wf_id = 'w5'")"
last_seq="$(sql "SELECT max(seq) FROM domain_events WHERE session_id = 'w5'")"

# the current run replayed in a process of its own (best of 3)
best=""
for _ in 1 2 3; do
  a="$(date +%s%N)"; "$ENGINE" replay w5 >"$T/replay.out" 2>&1 || { echo "replay failed:"; cat "$T/replay.out"; exit 1; }
  ms=$(( ($(date +%s%N) - a) / 1000000 )); { [ -z "$best" ] || [ "$ms" -lt "$best" ]; } && best="$ms"
done
curl -sf -X POST "$MURL/_scenario" --data-binary @"$T/after.json" >/dev/null # answer at once again
# restart: time to the next domain event of the session (start-up, recovery,
# replay of the current run, turn TURNS+1's model call answered at once with
# the whole transcript, its agent.message committed)
a="$(date +%s%N)"
"$ENGINE" serve >>"$T/serve.log" 2>&1 &
S=$!
until [ "$(sql "SELECT max(seq) FROM domain_events WHERE session_id = 'w5'" 2>/dev/null || echo 0)" -gt "$last_seq" ]; do
  [ $(( ($(date +%s%N) - a) / 1000000000 )) -lt 60 ] || { echo "w5_bench: no event 60 s after the restart" >&2; exit 1; }
  sleep 0.002
done
resume_ms=$(( ($(date +%s%N) - a) / 1000000 ))
next_type="$(sql "SELECT type FROM domain_events WHERE session_id = 'w5' AND seq = $((last_seq + 1))")"
for _ in $(seq 600); do
  st="$(sql "SELECT status FROM workflows WHERE id = 'w5'")"
  [ "$st" = completed ] || [ "$st" = failed ] && break; sleep 0.1
done
rss_end="$(rss_kib "$S" VmRSS)" hwm_end="$(rss_kib "$S" VmHWM)"
runs_end="$(sql "SELECT run FROM workflows WHERE id = 'w5'")"
turns_done="$(sql "SELECT count(*) FROM domain_events WHERE session_id = 'w5' AND type = 'agent.message'")"
calls_done="$(sql "SELECT count(*) FROM domain_events WHERE session_id = 'w5' AND type = 'tool.result'")"
limit="$(sql "SELECT payload FROM domain_events WHERE session_id = 'w5' AND type = 'limit.exceeded'")"

s() { awk -v t="$1" '$1 == t {print $'"$2"'}' "$T/samples"; }
per_turn_ms() { awk -v a="$(s "$1" 2)" -v b="$(s "$2" 2)" -v n="$(($2 - $1))" 'BEGIN{printf "%.2f", (b - a) / 1e6 / n}'; }
hb_turn() { awk -v a="$(s "$1" 3)" -v b="$(s "$2" 3)" -v n="$(($2 - $1))" 'BEGIN{printf "%.0f", (b - a) / n}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", (a > 0 ? b / a : 0)}'; }
e1="$(per_turn_ms $P1 $P2)" e2="$(per_turn_ms $P3 $P4)" h1="$(hb_turn $P1 $P2)" h2="$(hb_turn $P3 $P4)"
echo "status $st, $turns_done turns, $calls_done tool results, $runs_end runs, ${limit:-no limit event}; sandbox driver $DRIVER; $(nproc) cores"
echo "$TURNS turns in $(( (t1 - t0) / 1000000 )) ms (with 3 pauses of $PAUSE s)"
printf '| W5: %d turns x 2 parallel read_file, model answers at once | turns %d-%d | turns %d-%d | late / early |\n|---|---|---|---|\n' \
  "$TURNS" "$P1" "$((P2 - 1))" "$P3" "$((P4 - 1))"
printf '| engine CPU ms per turn | %s | %s | %s |\n' "$e1" "$e2" "$(ratio "$e1" "$e2")"
printf '| history payload bytes per turn | %s | %s | %s |\n' "$h1" "$h2" "$(ratio "$h1" "$h2")"
printf '| bytes of the model request at the window'"'"'s end (the transcript) | %s | %s | |\n' "$(s $P2 4)" "$(s $P4 4)"
printf '\n| at turn %d | |\n|---|---|\n' "$TURNS"
printf '| runs so far (continue-as-new) / events of the current run / of all runs | %s / %s / %s |\n' "$run" "$run_events" "$all_events"
printf '| engine replay w5 (current run, own process, best of 3) | %s ms |\n' "$best"
printf '| kill -9, engine serve again -> next session event (%s) | %s ms |\n' "$next_type" "$resume_ms"
printf '| engine RSS at turn %d / peak | %.1f / %.1f MiB |\n' "$TURNS" "$(awk -v k="$rss_before" 'BEGIN{print k/1024}')" "$(awk -v k="$hwm_before" 'BEGIN{print k/1024}')"
printf '| engine RSS after the restart, session ended / peak | %.1f / %.1f MiB |\n' "$(awk -v k="$rss_end" 'BEGIN{print k/1024}')" "$(awk -v k="$hwm_end" 'BEGIN{print k/1024}')"
