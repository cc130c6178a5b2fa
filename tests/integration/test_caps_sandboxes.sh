#!/usr/bin/env bash
# The engine-wide sandbox cap (limits file: sandboxes = 4): N agent sessions
# started at once never have more than 4 containers at a time (sampled from
# the Docker API every 100 ms while they run), the others show `queued` with
# their place in line, and all complete with no slot left behind. With
# model_calls = 2 the model server never has more than 2 requests at once.
# CAPS_SESSIONS=500 runs the issue's full burst (tests/bench); CI runs 40.
source "$(dirname "$0")/caps_lib.sh"
N="${CAPS_SESSIONS:-40}"
CAP=4
# each turn takes a while, so sandboxes overlap and the cap is what stops them
start_model_server <(echo "{\"default\":$FINAL}" | sed 's/"reply"/"delay":0.5,"reply"/')
limits "sessions = 6
sandboxes = $CAP
model_calls = { default = 8, openai = 2 }"
bg S engine serve 2>"$T/serve.err"
sleep 0.3

# the Docker API sampled every 100 ms, apart from the rest of the test
( while [ ! -e "$T/stop" ]; do containers >>"$T/samples"; sleep 0.1; done ) &
SAMPLER=$!
PIDS+=("$SAMPLER")
seq 1 "$N" | xargs -P 8 -I{} "$ENGINE" start "$WF" --input @"$(session_input)" --id "s{}" --detach >/dev/null 2>&1 || true
queued_seen="" show_seen=""
for _ in $(seq $((N * 30 > 1200 ? N * 30 : 1200))); do
  if [ -z "$show_seen" ]; then # a queued one, as list and show tell it (it may get its slot in between)
    line="$(engine list 2>/dev/null | grep -m1 ' queued' || true)"
    [ -n "$line" ] && queued_seen="$line"
    [ -n "$line" ] && show_seen="$(engine show "$(awk '{print $1}' <<<"$line")" 2>/dev/null | grep "slot '" || true)"
  fi
  [ "$(count_status completed)" -ge "$N" ] && break
  sleep 0.1
done
touch "$T/stop"
wait "$SAMPLER" 2>/dev/null || true
samples="$(grep -c . "$T/samples")"
max="$(sort -n "$T/samples" | tail -1)"
echo "# $samples samples, at most $max containers at once"
[ "$max" -le "$CAP" ] && pass "never more than $CAP containers at once (at most $max)" || fail "$max containers at once (cap $CAP)"
[ "$max" -ge 2 ] && pass "sandboxes did overlap ($max at once)" || fail "the sessions never overlapped: the test shows nothing"
assert_eq "all $N sessions completed" "$N" "$(count_status completed)"
if [ "$(count_status completed)" -lt "$N" ]; then # what the others wait on, for whoever reads the failure
  engine list 2>&1 | grep -v ' completed' | head -5 >&2
  for id in $(engine list 2>/dev/null | tail -n +2 | grep -v ' completed' | awk '{print $1}' | head -3); do
    engine show "$id" >&2 2>&1; engine history "$id" 2>&1 | tail -8 >&2
  done
  sqlite3 "$ENGINE_DB" "SELECT * FROM tasks; SELECT * FROM slots" >&2
  tail -20 "$T/serve.err" >&2
fi
assert_contains "engine list shows a queued session with its place in line" "queued" "$queued_seen"
waits="$(grep -oE "slot '(sessions|sandboxes|model-calls)'" <<<"$show_seen" | head -1 || true)"
[ -n "$waits" ] && pass "engine show names the cap it waits on ($waits)" || fail "engine show names no cap: $show_seen"
assert_contains "and its place in line" "in line of" "$show_seen"
peak="$(curl -sf "$MURL/_health" | jget peak_active)"
[ "$peak" -le 2 ] && pass "at most 2 model calls at once (the server saw $peak)" || fail "$peak model calls at once (cap 2)"
[ "$peak" -ge 2 ] && pass "model calls did overlap" || fail "model calls never overlapped: the test shows nothing"
assert_contains "sessions queue for the sessions cap first" '"name":"sessions"' \
  "$(engine history s1 --json | grep '"type":"SlotRequested"')"
assert_eq "no container left" 0 "$(containers)"
assert_eq "no slot left held or queued" 0 "$(slot_rows)"
kill "$S"; wait "$S" 2>/dev/null || true
finish
