#!/usr/bin/env bash
# Concurrency keys from the session's input (concurrency = {key, limit,
# strategy}): five pushes to one pull request with cancel_in_progress leave
# one completed review and four cancelled sessions, none with a container;
# with drop, a second start on a busy key fails ConcurrencyDropped before any
# sandbox. Bad concurrency fields are refused with each problem named.
source "$(dirname "$0")/caps_lib.sh"
# every model turn waits at the server's gate "push" until the test opens it:
# each push is still at work when the next one comes, however busy the machine
# (with turns of 1.5 s, a busy machine's pushes finished before the next began)
start_model_server <(echo "{\"default\":$(sed 's/^{/{"hold":"push",/' <<<"$FINAL")}")
serve_bg
PR='{"concurrency":{"key":"repo/pr-7","strategy":"cancel_in_progress"}}'

# --- cancel_in_progress: pushes 1-3 once the one before is at work, 4 and 5 back to back
for i in 1 2 3; do
  start_session "push-$i" "$PR"
  wait_until 60 "push-$i has its sandbox" history_has "push-$i" '"sandbox.ready"'
done
start_session push-4 "$PR"
wait_until 20 "push-4 is in line for the key" history_has push-4 '"SlotRequested"'
start_session push-5 "$PR"
for i in 1 2 3 4; do wait_status "push-$i" cancelled 60 || true; done
release push # push-5's turn (and those the cancelled ones abandoned) go on
wait_status push-5 completed 60 || true
assert_eq "the newest push completed" completed "$(status push-5)"
assert_eq "the four before it were cancelled" "cancelled cancelled cancelled cancelled" \
  "$(for i in 1 2 3 4; do printf '%s ' "$(status "push-$i")"; done | sed 's/ $//')"
# each was cancelled at work (its sandbox destroyed) or in line (push-4 may
# have been either, by a few ms): none leaves anything behind
at_work=0
for i in 1 2 3 4; do
  h="$(engine history "push-$i" --json)"
  if ! grep -q '"name":"sandbox.provision"' <<<"$h"; then continue; fi
  at_work=$((at_work + 1))
  grep '"type":"ActivityCompleted"' <<<"$h" | has_line -E '"name":"sandbox.destroy(_session)?"' ||
    fail "push-$i had a sandbox and did not destroy it"
done
[ "$at_work" -ge 3 ] && pass "$at_work of them were cancelled at work and destroyed their sandbox" ||
  fail "only $at_work were cancelled at work"
assert_contains "the cancellation says who asked" '"by":"engine:concurrency:push-2"' "$(engine events push-1 --json | grep cancel.requested)"
assert_eq "no container left" 0 "$(containers)"

# --- queue: the second waits in line (queued, its place shown); cancelled there, it leaves nothing
# q-1's model turn waits at the server's gate "q1" until q-2 has been seen in
# line and cancelled there (with a turn of 1.5 s, a busy machine's q-1 had
# finished before q-2 started)
Q='{"concurrency":{"key":"repo/pr-8"}}'
scenario "{\"default\":$(sed 's/"reply"/"delay":1.5,"reply"/' <<<"$FINAL"),
  \"routes\":[{\"body_has\":\"hold q-1\",\"step\":$(sed 's/^{/{"hold":"q1",/' <<<"$FINAL")}]}"
start_session q-1 '{"concurrency":{"key":"repo/pr-8"},"objective":"hold q-1"}'
wait_until 30 "q-1 holds the key" history_has q-1 '"SlotGranted"'
wait_for 60 "q-1's model turn held at the gate" '[ "$(model_health held)" -ge 1 ]' 'model_health held' || true
start_session q-2 "$Q"
wait_status q-2 queued 30 || true
assert_contains "engine show names the key and the place in line" "slot 'session-key' key 'repo/pr-8': #1 in line of 1, 1 of 1 held" \
  "$(engine show q-2 --json)"
assert_contains "engine list shows it queued" "queued" "$(engine list | grep '^q-2 ')"
assert_exit "engine cancel while in line" 0 engine cancel q-2
wait_status q-2 cancelled 30 || true
assert_eq "q-2 cancelled" cancelled "$(status q-2)"
assert_eq "q-2 never had a sandbox" 0 "$(engine history q-2 --json | grep -c '"name":"sandbox.provision"' || true)"
release q1
wait_status q-1 completed 30 || true
assert_eq "q-1 completed" completed "$(status q-1)"

# --- drop: a busy key refuses the new start
DROP='{"concurrency":{"key":"repo/pr-9","strategy":"drop"}}'
start_session drop-1 "$DROP"
wait_until 30 "drop-1 holds the key" history_has drop-1 '"SlotGranted"'
assert_exit "a second start on the busy key fails" 1 "$ENGINE" start "$WF" --input @"$(session_input "$DROP")" --id drop-2
assert_eq "drop-2 failed" failed "$(status drop-2)"
err="$(engine show drop-2 --json | jget error)"
assert_eq "its error type" ConcurrencyDropped "$(jget type <<<"$err")"
assert_contains "the error names the key and the limit" "concurrency key 'repo/pr-9' is at its limit of 1" "$(jget message <<<"$err")"
assert_contains "the session's stream says so" '"reason":"concurrency"' "$(engine events drop-2 --json | grep session.failed)"
assert_eq "drop-2 never had a sandbox" 0 "$(engine history drop-2 --json | grep -c '"name":"sandbox.provision"' || true)"
wait_status drop-1 completed 30 || true
assert_eq "drop-1 carried on" completed "$(status drop-1)"
start_session drop-3 "$DROP"
wait_status drop-3 completed 30 || true
assert_eq "once the key is free, a new start runs" completed "$(status drop-3)"

# --- bad concurrency fields: every problem named, nothing started
assert_exit "bad concurrency is refused" 2 "$ENGINE" start "$WF" --id bad-c \
  --input @"$(session_input '{"concurrency":{"key":"","limit":0,"strategy":"newest","when":1}}')"
for p in "concurrency.key must be a string of 1-256 bytes" "concurrency.limit must be a whole number from 1 to 1000000 (got 0)" \
         "concurrency.strategy must be queue, cancel_in_progress or drop (got newest)" "unknown field 'concurrency.when'"; do
  assert_contains "names: $p" "$p" "$ERR"
done
assert_eq "no slot left held or queued" 0 "$(slot_rows)"
kill "$S"; wait "$S" 2>/dev/null || true
finish
