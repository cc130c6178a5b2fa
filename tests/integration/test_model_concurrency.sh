#!/usr/bin/env bash
# 500 model calls in flight at once against a slow streaming server: all
# complete, and the engine's thread count and memory stay flat (curl multi on
# the event loop: no thread per request, workflow VMs evicted past a bound).
# The server holds every answer until all 500 requests are in (a gate the
# test opens, not a delay): the overlap is a count, not a race with the clock.
source "$(dirname "$0")/lib.sh"
N="${CONCURRENCY_N:-500}"
start_model_server <(echo \
  '{"default":{"hold":"all","reply":{"text":"one two three four five six seven eight","usage":{"input_tokens":5,"output_tokens":8}},"chunk_delay":0.05}}')
BASE="$MURL/v1"
export ENGINE_MAX_CACHED_RUNS=64
# 8 starters and a serve committing 500 runs contend for the write lock; under
# ASan on a loaded machine a start can wait past lib.sh's 2 s and be refused
export ENGINE_BUSY_TIMEOUT_MS=30000
serve_bg
field() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$S/status"; }
base_threads="$(field Threads)"; base_rss="$(field VmRSS)"
# submit in parallel, detached: the server holds them all, so all of them overlap
seq 1 "$N" | xargs -P 8 -I{} "$ENGINE" start "$SRC/tests/integration/wf/model_call.lua" --id "c{}" --detach \
  --input "{\"model\":{\"name\":\"m\",\"provider\":\"openai\",\"baseUrl\":\"$BASE\"},\"options\":{\"timeout\":$(scaled 300)},\"start_to_close\":$(scaled 300)}" \
  >/dev/null 2>>"$T/start.err" || true
max_threads=0; max_rss=0
# sample: the engine's threads and memory, polled while the calls are in flight
sample() {
  local t r
  t="$(field Threads)"; r="$(field VmRSS)"
  [ "$t" -gt "$max_threads" ] && max_threads=$t
  [ "$r" -gt "$max_rss" ] && max_rss=$r
  return 0
}
wait_for 240 "all $N model calls held at the server at once" 'sample; [ "$(model_health held)" -ge "$N" ]' \
  'echo "held: $(model_health held), runs: $(statuses)"' || true
release all
wait_for 240 "all $N model calls completed" 'sample; [ "$(engine list --status completed | tail -n +2 | wc -l)" -ge "$N" ]' \
  'statuses' || true
peak_active="$(model_health peak_active)"
kill "$S"; wait "$S" 2>/dev/null || true
if [ "$(engine list --status completed | tail -n +2 | wc -l)" -ne "$N" ]; then
  # say which run did not complete and why, so a failure here can be understood from the log
  echo "# start errors:"; sed 's/^/#   /' "$T/start.err"
  engine list | tail -n +2 | awk '$2 != "completed"' | sed -n 1,5p | while read -r id _; do
    echo "# $id:"; engine show "$id" 2>&1 | sed 's/^/#   /' | sed -n 1,30p
  done
fi
assert_eq "all $N model calls completed" "$N" "$(engine list --status completed | tail -n +2 | wc -l)"
echo "# threads: idle $base_threads, peak $max_threads; RSS KiB: idle $base_rss, peak $max_rss; server saw $peak_active requests at once"
assert_eq "all $N requests were in flight at once (the server held them all)" "$N" "$peak_active"
if [ "${ENGINE_SANITIZED:-0}" == 1 ]; then
  # ASan makes every process slow and every allocation big: only correctness counts here
  [ "$max_threads" -le $((base_threads + 1)) ] && pass "thread count flat" || fail "threads grew: $base_threads -> $max_threads"
  finish
  exit 0
fi
[ "$max_threads" -le $((base_threads + 1)) ] && pass "thread count flat ($base_threads -> $max_threads)" ||
  fail "threads grew with requests: $base_threads -> $max_threads"
grow=$(( (max_rss - base_rss) / 1024 ))
[ "$grow" -le 48 ] && pass "memory flat: +$grow MiB for $N requests in flight" || fail "RSS grew by $grow MiB"
finish
