#!/usr/bin/env bash
# A provider's rate limit shared by every session, measured at the local
# model server: 20 sessions of 2 turns against 300 requests/min counted in
# 2 s windows (10 per window) never put more than the limit plus one burst
# in any 2 s at the server, and are spread over the windows they need; a
# tokens-per-minute limit of one 50-token turn per window spreads turns over
# windows. Then a
# 429 with retry-after that one session meets pauses the shared window: the
# sessions started after it send nothing until the pause is over.
# eight starts at once beside a serve: each may wait its turn for the write lock
export ENGINE_BUSY_TIMEOUT_MS=30000
source "$(dirname "$0")/caps_lib.sh"
N=20 LIMIT=10 WINDOW=2
start_model_server <(echo "{\"default\":$AGAIN}")
limits "rate = { openai = { requests_per_minute = $((LIMIT * 60 / WINDOW)), window_seconds = $WINDOW } }"
serve_bg

# --- requests per window, across sessions
seq 1 "$N" | xargs -P 8 -I{} "$ENGINE" start "$WF" --input @"$(session_input '{"limits":{"maxModelTurns":2}}')" \
  --id "r{}" --detach >/dev/null 2>>"$T/starts.err" || true
[ -s "$T/starts.err" ] && fail "every start was taken: $(head -3 "$T/starts.err")"
wait_for 120 "all $N sessions completed" '[ "$(count_status completed)" -ge "$N" ]' statuses || true
assert_eq "all $N sessions completed" "$N" "$(count_status completed)"
assert_contains "each ended at its own turn limit" '"limit":"maxModelTurns"' "$(engine show r1 --json | jget result.limit)"
requests | LIMIT=$LIMIT WINDOW=$WINDOW lua5.4 -e '
  local limit, window = tonumber(os.getenv("LIMIT")), tonumber(os.getenv("WINDOW"))
  local t = {}
  for _, r in ipairs(require"cjson".decode(io.read("a"))) do t[#t + 1] = r.time end
  table.sort(t)
  local worst, aligned = 0, {}
  for i = 1, #t do -- the most requests in any window of that length (sliding)
    local j = i
    while j < #t and t[j + 1] < t[i] + window do j = j + 1 end
    if j - i + 1 > worst then worst = j - i + 1 end
    local w = math.floor(t[i] / window) -- the engine counts windows from the epoch
    aligned[w] = (aligned[w] or 0) + 1
  end
  local most = 0
  for _, n in pairs(aligned) do if n > most then most = n end end
  print(#t, worst, most, string.format("%.2f", t[#t] - t[1]))' >"$T/rate"
read -r total worst most span <"$T/rate"
# what the server saw is a note, not a check: a request granted at the end
# of a window reaches it later on a busy machine (the engine's own log below
# is what holds the limit)
echo "# $total requests over ${span}s; at most $worst in any ${WINDOW}s, $most in one of the engine's windows, at the server"
assert_eq "the server saw every turn" $((N * 2)) "$total"
# The invariant, from the engine's own log: the grants of each of its windows
# (RateGranted of requests:openai, stamped when granted) never pass the limit.
granted="$(for i in $(seq "$N"); do engine history "r$i" --json; done | WINDOW=$WINDOW lua5.4 -e '
  local w, per, most = {}, tonumber(os.getenv("WINDOW")) * 1000, 0
  local req = {}
  for l in io.lines() do
    local e = require"cjson".decode(l)
    if e.type == "RateRequested" and e.name == "requests:openai" then req[e.seq] = true end
    if e.type == "RateGranted" and req[e.ref] then
      local k = math.floor(e.time / per); w[k] = (w[k] or 0) + 1; if w[k] > most then most = w[k] end
    end
    if e.type == "WorkflowStarted" then req = {} end
  end
  print(most)')"
[ "$granted" -gt 0 ] && [ "$granted" -le "$LIMIT" ] && pass "the engine granted at most $granted in one of its windows" ||
  fail "the engine granted $granted in one window (limit $LIMIT)"
# 40 requests at 10 per window touch at least 4 windows: more than 2 whole
# ones apart (a lower bound: a busy machine only spreads them more)
awk -v s="$span" -v w="$WINDOW" -v n="$total" -v l="$LIMIT" 'BEGIN { exit !(s >= (n / l - 2) * w) }' &&
  pass "the requests were spread over the windows they need (${span}s)" || fail "all requests within ${span}s: nothing was limited"
assert_eq "no slot left held or queued" 0 "$(slot_rows)"

# --- tokens per window: 50 a turn against 50 a window. Two sessions of two
# turns: their first turns may share a window (nothing is known of them
# yet), after that each turn reserves what its last one took, so the second
# turns cannot share one: at least three windows
limits "rate = { openai = { tokens_per_minute = $((50 * 60 / WINDOW)), window_seconds = $WINDOW } }"
scenario "{\"default\":$AGAIN}"
for i in 1 2; do start_session "t$i" '{"limits":{"maxModelTurns":2}}'; done
for i in 1 2; do wait_status "t$i" completed 60 || true; done
assert_eq "both completed" "completed completed" "$(for i in 1 2; do printf '%s ' "$(status "t$i")"; done | sed 's/ $//')"
# the windows of the engine's grants (RateGranted of tokens:openai, stamped when granted)
windows="$(for i in 1 2; do engine history "t$i" --json; done | WINDOW=$WINDOW lua5.4 -e '
  local per, req, seen, n = tonumber(os.getenv("WINDOW")) * 1000, {}, {}, 0
  for l in io.lines() do
    local e = require"cjson".decode(l)
    if e.type == "WorkflowStarted" then req = {} end
    if e.type == "RateRequested" and e.name == "tokens:openai" then req[e.seq] = true end
    if e.type == "RateGranted" and req[e.ref] then
      local k = math.floor(e.time / per)
      if not seen[k] then seen[k], n = true, n + 1 end
    end
  end
  print(n)')"
[ "$windows" -ge 3 ] && pass "the engine granted the four turns in $windows windows" || fail "the engine granted the four turns in only $windows windows"
assert_contains "the second turn reserved the first one's tokens" '"cost":50' \
  "$(engine history t1 --json | grep '"type":"RateRequested"' | tail -1)"

# --- a 429 with retry-after pauses every session on that provider
PAUSE=4
limits "rate = { openai = { requests_per_minute = 6000 } }"
scenario "{\"steps\":[{\"status\":429,\"headers\":{\"retry-after\":\"$PAUSE\"}}],\"default\":$FINAL}"
start_session p1
seen() { [ "$(nreq)" -ge "$1" ]; }
wait_until 30 "p1 met the 429" seen 1
t429="$(requests | jget 1.time)"
# p1 itself waits out the pause it set (retry-after), from the moment its turn
# fails until the pause ends: engine show names it, polled until it does
wait_for 30 "engine show p1 to name the paused rate" 'engine show p1 | has_line "waits on: *rate .requests:openai."' \
  'engine show p1' && pass "engine show names the paused rate"
for i in 2 3 4 5; do start_session "p$i"; done
for i in 1 2 3 4 5; do wait_status "p$i" completed 60 || true; done
assert_eq "all five completed" "completed completed completed completed completed" \
  "$(for i in 1 2 3 4 5; do printf '%s ' "$(status "p$i")"; done | sed 's/ $//')"
after="$(requests | T0="$t429" lua5.4 -e '
  local t0 = tonumber(os.getenv("T0"))
  local gaps = {}
  for i, r in ipairs(require"cjson".decode(io.read("a"))) do if i > 1 then gaps[#gaps + 1] = r.time - t0 end end
  table.sort(gaps)
  print(#gaps, string.format("%.2f", gaps[1] or -1))')"
read -r n_after first_after <<<"$after"
assert_eq "p1 retried once and the four others asked once" 5 "$n_after"
awk -v g="$first_after" -v p="$PAUSE" 'BEGIN { exit !(g >= p - 0.3) }' &&
  pass "nothing reached the server for ${PAUSE}s after the 429 (next after ${first_after}s)" ||
  fail "a request came ${first_after}s after the 429 (retry-after $PAUSE)"
assert_contains "p1's turn met the 429 and waited in the engine" '"retry_after":4' \
  "$(engine history p1 --json | grep '"type":"ActivityFailed"' | grep model.turn)"
assert_eq "p1 still counts one turn" 1 "$(engine show p1 --json | jget result.turns)"
kill "$S"; wait "$S" 2>/dev/null || true
finish
