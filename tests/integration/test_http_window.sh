#!/usr/bin/env bash
# A streamed HTTP response holds a bounded window in the engine: a reader that
# lags (or a flood it cannot keep up with) pauses the transfer instead of
# buffering it, the idle timeout does not fire while the engine is the slow
# side, and every byte still arrives, through res:read() and res:read_into().
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/http_window.lua"
BYTES=40000000
mkdir -p "$T/www"; head -c "$BYTES" /dev/zero >"$T/www/big"
python3 -m http.server 0 --bind 127.0.0.1 --directory "$T/www" >"$T/http.log" 2>&1 &
PIDS+=($!)
wait_true 30 'PORT="$(grep -o '\''port [0-9]*'\'' "$T/http.log" | grep -o '\''[0-9]*$'\'' || true)"; [ -n "$PORT" ]' || true
[ -n "$PORT" ] || { fail "the test's HTTP server did not start"; finish; }

serve_bg
before="$(awk '$1 == "VmRSS:" {print $2}' "/proc/$S/status")"
# the reader stops three times as long as the idle timeout: only a paused
# transfer keeps it from firing. The timeout is seconds, scaled: it also
# bounds the test's HTTP server, which a busy machine can leave unscheduled
# for longer than half a second (it fired so under ASan and load)
IDLE="$(scaled 3)" PAUSE="$(( $(scaled 3) * 3 ))"
for how in read read_into; do
  into=false; [ "$how" == read_into ] && into=true
  engine start "$WF" --id "w-$how" --detach \
    --input "{\"url\": \"http://127.0.0.1:$PORT/big\", \"pause\": $PAUSE, \"idle_timeout\": $IDLE, \"read_into\": $into}" >/dev/null || true
  wait_status "w-$how" completed 60 || engine show "w-$how" | grep -i error >&2 || true
  assert_eq "$how: every byte arrived after the reader lagged" "$BYTES" \
    "$(engine show "w-$how" --json | lua5.4 "$SRC/tests/integration/jget.lua" result.bytes)"
done
peak="$(awk '$1 == "VmHWM:" {print $2}' "/proc/$S/status")"
kill "$S"; wait "$S" 2>/dev/null || true
grow=$(( (peak - before) / 1024 ))
echo "# engine RSS before $((before / 1024)) MiB, peak $((peak / 1024)) MiB with a $((BYTES / 1000000)) MB response behind a lagging reader"
if [ "${ENGINE_SANITIZED:-0}" == 1 ]; then
  pass "memory not judged under ASan (+$grow MiB)"
else
  [ "$grow" -le 16 ] && pass "the engine held a window, not the response (+$grow MiB)" ||
    fail "the engine buffered the response: +$grow MiB for $((BYTES / 1000000)) MB"
fi
finish
