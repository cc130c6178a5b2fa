#!/usr/bin/env bash
# Context compaction of the agent session (lua/compaction.lua), end to end
# with the real engine, the Docker sandbox and the local model server: bad
# contextTokens values; a small context window compacts (the event's numbers,
# and the model's later requests carry the summary instead of the folded
# turns); a provider's context-length error compacts and retries once, a
# second one fails the session clearly (OpenAI and Anthropic wire formats);
# kill -9 in the middle of a compaction; 2,000 turns with a small window and
# bounded runs (continue-as-new), each run's history under a bound.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
WF="$SRC/workflows/agent_session.lua"
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_ARTIFACTS="$T/artifacts"
MARK="You are compacting the context" # the summariser's prompt (lua/compaction.lua)
SUMMARY='{"body_has":"'"$MARK"'","step":{"reply":{"text":"SUMMARY-7Q: the agent read task.md a few times."}}}'

# input_for MODEL_JSON [EXTRA_TOP_LEVEL_JSON_FIELDS] -> a session input file
CTX="$(python3 -c "print('lorem ipsum dolor ' * 80)")" # task.md is ~1.5 KB, so is each read of it
input_for() {
  local f="$T/input-$RANDOM$RANDOM.json"
  printf '{"objective":"Read the task file a few times, then answer.","context":{"text":"%s"},
    "permissions":{"tools":["read_file"]},"limits":{"maxModelTurns":30,"timeoutSeconds":300},
    "model":%s%s}' "$CTX" "$1" "${2:+,$2}" >"$f"
  echo "$f"
}
# steps N: N model turns that each read task.md (ids r1..rN), as scenario steps
reads() {
  python3 - "$1" <<'EOF'
import json, sys
print(",".join(json.dumps({"reply": {"text": "reading %d" % i, "tool_calls": [{"id": "r%d" % i, "name": "read_file",
      "arguments": "{\"path\":\"/workspace/task.md\"}"}], "usage": {"input_tokens": 0, "output_tokens": 0}}})
      for i in range(1, int(sys.argv[1]) + 1)))
EOF
}
FINAL='{"reply":{"text":"{\"summary\": \"done\", \"result\": {}}"}}'
CTXERR_OPENAI='{"status":400,"body":{"error":{"message":"This model'"'"'s maximum context length is 2048 tokens. However, your messages resulted in 3100 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}}'
CTXERR_ANTHROPIC='{"status":400,"body":{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210345 tokens > 200000 maximum"}}}'
types() { engine events "$1" --json | lua5.4 "$SRC/tests/integration/verify.lua" events; }
# the request log as one JSON document per request: step, then the body
bodies() { requests | lua5.4 -e 'local j = require "cjson"
  for _, r in ipairs(j.decode(io.read("a"))) do print(tostring(math.tointeger(r.step) or r.step) .. "\t" .. j.encode(r.body)) end'; }
# nth_line N PATTERN: the Nth line matching PATTERN (awk reads all: no SIGPIPE under pipefail)
nth() { awk -v n="$1" -v p="$2" '$0 ~ p && ++i == n'; }

echo '{"steps":[]}' >"$T/empty.json"
start_model_server "$T/empty.json"
OPENAI="{\"name\":\"m\",\"provider\":\"openai\",\"baseUrl\":\"$MURL/v1\""

# --- (d) bad values are refused before anything starts, each named
for bad in '0' '-5' '1.5' '"big"' 'true'; do
  assert_exit "contextTokens $bad is refused" 2 "$ENGINE" start "$WF" --quiet --id "bad$RANDOM" \
    --input @"$(input_for "$OPENAI,\"contextTokens\":$bad}")"
  assert_contains "  and named" "model.contextTokens must be a positive whole number of tokens" "$ERR"
done
assert_exit "bad compaction options are refused" 2 "$ENGINE" start "$WF" --quiet --id badc \
  --input @"$(input_for "$OPENAI}" '"compaction":{"threshold":2,"keepTurns":-1,"runEvents":10,"every":3}')"
for p in "compaction.threshold must be a number above 0 and at most 1 (got 2)" \
         "compaction.keepTurns must be a whole number from 0 to 1000 (got -1)" \
         "compaction.runEvents must be a whole number from 200 to 1000000 (got 10)" \
         "unknown field 'compaction.every'"; do
  assert_contains "names: $p" "$p" "$ERR"
done
assert_exit "a first run cannot pretend to be a continued one" 2 "$ENGINE" start "$WF" --quiet --id badcs \
  --input @"$(input_for "$OPENAI}" '"continuedSession":{"prep":{"ok":true}}')"
assert_contains "  named" "unknown field 'continuedSession'" "$ERR"
assert_eq "no model request was made" 0 "$(nreq)"

# --- (a) a small context window: the session compacts before the turn that would not fit
scenario "{\"routes\":[$SUMMARY],\"steps\":[$(reads 10),$FINAL]}"
A="$(input_for "$OPENAI,\"contextTokens\":3000}" '"compaction":{"keepTurns":2}')"
assert_exit "a session with a 3,000-token window completes" 0 "$ENGINE" start "$WF" --quiet --id ca --input @"$A"
assert_eq "its result" done "$(jget summary <<<"$OUT")"
comp="$(engine events ca --json | grep '"type":"context.compacted"')"
ncomp="$(grep -c . <<<"$comp")"
[ "$ncomp" -ge 2 ] && pass "it compacted more than once ($ncomp)" || fail "it compacted $ncomp times"
first="$(head -1 <<<"$comp" | jget payload)"
lua5.4 - "$first" <<'EOF' | tee "$T/checks"
  local e = require("cjson").decode(arg[1])
  local function check(ok, what) print((ok and "ok - " or "FAIL: ") .. what) end
  check(e.reason == "threshold", "the reason is the threshold (" .. tostring(e.reason) .. ")")
  check(e.tokens_before >= 0.8 * 3000 and e.tokens_before < 3000, "tokens_before is at 80-100% of the window: " .. e.tokens_before)
  check(e.tokens_after > 0 and e.tokens_after < e.tokens_before, "tokens_after is smaller: " .. e.tokens_after)
  check(e.tokens_saved == e.tokens_before - e.tokens_after, "tokens_saved = before - after: " .. e.tokens_saved)
  check(e.turns_folded >= 1 and e.messages_folded == 2 * e.turns_folded and e.messages_kept == 4,
    "whole turns (call + result) folded, the last two kept: " .. e.turns_folded .. "/" .. e.messages_folded .. "/" .. e.messages_kept)
  check(e.context_tokens == 3000, "the window is named")
EOF
FAILS=$((FAILS + $(grep -c '^FAIL' "$T/checks" || true)))
b="$(bodies)"
summ="$(nth 1 '^routes' <<<"$b")"
assert_contains "the summariser read the folded turns" 'reading 1\n' "$summ"
after="$(awk 'f { print; exit } /^routes/ { f = 1 }' <<<"$b")" # the first turn after the compaction
k="$(awk '/^routes/ { print prev; exit } { prev = $1 }' <<<"$b")" # the step of the turn before it (0-based)
assert_contains "the next turn carries the summary" "SUMMARY-7Q" "$after"
[[ "$after" != *'"reading 1"'* && "$after" != *'"r1"'* ]] && pass "and not the folded turns (nor their tool results)" ||
  fail "a folded turn is still in the transcript: $after"
assert_contains "the kept turns are verbatim: the one before the compaction" "\"reading $((k + 1))\"" "$after"
assert_contains "  and the one before it" "\"reading $k\"" "$after"
last="$(grep -v "^routes" <<<"$b" | tail -1)"
assert_contains "the last turn carries the second summary" "SUMMARY-7Q" "$last"
assert_contains "whose input held the first one" "SUMMARY-7Q" "$(nth 2 '^routes' <<<"$b")"
assert_exit "engine replay of the compacted session" 0 engine replay ca
assert_contains "  gives the same result" "returns the same result" "$OUT"
verify_events ca >/dev/null && pass "dense event stream" || fail "event stream of ca"

# --- (b) the provider's context-length error: one compaction, the turn again
scenario "{\"routes\":[$SUMMARY],\"steps\":[$(reads 3),$CTXERR_OPENAI,$FINAL]}"
B="$(input_for "$OPENAI}")" # no contextTokens: only the provider's word
assert_exit "OpenAI context_length_exceeded: the session goes on" 0 "$ENGINE" start "$WF" --quiet --id cb --input @"$B"
assert_contains "compacted for it" '"reason":"context_length"' "$(engine events cb --json | grep context.compacted)"
assert_eq "one agent.message per answered turn" 4 "$(engine events cb --json | grep -c '"type":"agent.message"')"
b="$(bodies)"
assert_eq "five model requests and one summary" "5 1" "$(grep -vc "^routes" <<<"$b") $(grep -c "^routes" <<<"$b")"
assert_contains "the retried turn carries the summary" "SUMMARY-7Q" "$(grep -v "^routes" <<<"$b" | tail -1)"
assert_exit "replay" 0 engine replay cb

scenario "{\"routes\":[$SUMMARY],\"steps\":[$(reads 3),$CTXERR_ANTHROPIC,$FINAL]}"
AN="{\"name\":\"claude-x\",\"provider\":\"anthropic\",\"baseUrl\":\"$MURL/v1\"}"
assert_exit "Anthropic 'prompt is too long': the session goes on" 0 "$ENGINE" start "$WF" --quiet --id cb2 \
  --input @"$(input_for "$AN")"
assert_contains "compacted for it" '"reason":"context_length"' "$(engine events cb2 --json | grep context.compacted)"
assert_contains "the retried turn carries the summary" "SUMMARY-7Q" "$(bodies | grep -v "^routes" | tail -1)"

scenario "{\"routes\":[$SUMMARY],\"steps\":[$(reads 3),$CTXERR_OPENAI,$CTXERR_OPENAI,$FINAL]}"
assert_exit "a second context-length error right after compaction fails the session" 1 \
  "$ENGINE" start "$WF" --quiet --id cb3 --input @"$B"
assert_contains "with a clear error" "the model's context is too small for this session: the transcript is still too long after compaction" "$ERR"
assert_contains "  naming the provider's words" "maximum context length is 2048 tokens" "$ERR"
assert_contains "session.failed in the stream" "context is too small" "$(engine events cb3 --json | grep session.failed)"
assert_eq "one compaction, not a loop" 1 "$(engine events cb3 --json | grep -c context.compacted)"

scenario "{\"routes\":[$SUMMARY],\"steps\":[$CTXERR_OPENAI,$FINAL]}"
assert_exit "a context-length error with nothing to fold fails" 1 "$ENGINE" start "$WF" --quiet --id cb4 --input @"$B"
assert_contains "  and says so" "there is nothing left to compact" "$ERR"

# --- kill -9 while the summary is being written: the session resumes, one compaction
SLOW='{"body_has":"'"$MARK"'","step":{"hold":"summary","reply":{"text":"SUMMARY-7Q: the agent read task.md a few times."}}}'
scenario "{\"routes\":[$SLOW],\"steps\":[$(reads 10),$FINAL]}"
bg S engine serve
"$ENGINE" start "$WF" --input @"$A" --id ck --detach >/dev/null 2>&1 || true
wait_true 30 '[ "$(bodies | grep -c '\''^routes'\'')" -ge 1 ]' || true
wait_true 60 '[ "$(model_health held)" -ge 1 ]' # the summariser's request is in flight (held until released)
kill -9 "$S"; wait "$S" 2>/dev/null || true
release summary
bg S engine serve
wait_status ck completed 120 || fail "ck did not complete"
assert_eq "the interrupted summary was asked for again" 3 "$(bodies | grep -c '^routes')"
assert_eq "the same event stream as without the crash" "$(types ca)" "$(types ck)"
assert_eq "the same result" "$(engine show ca --json | jget result.summary)" "$(engine show ck --json | jget result.summary)"
kill "$S"; wait "$S" 2>/dev/null || true
assert_exit "replay after the crash" 0 engine replay ck

# --- (c) 2,000 turns, a 1,500-token window, runs of at most ~1,000 events
N="${COMPACTION_TURNS:-2000}"
python3 - "$N" "$MARK" >"$T/long.json" <<'EOF'
import json, sys
n, mark = int(sys.argv[1]), sys.argv[2]
steps = [{"reply": {"text": "step %d" % i, "tool_calls": [{"id": "t%d" % i, "name": "noop", "arguments": "{}"}]}}
         for i in range(1, n)]
steps.append({"reply": {"text": json.dumps({"summary": "%d turns done" % n, "result": {"turns": n}})}})
print(json.dumps({"routes": [{"body_has": mark, "step": {"reply": {"text": "SUMMARY: no-op steps so far."}}}],
                  "steps": steps}))
EOF
curl -sf -X POST "$MURL/_scenario" --data-binary @"$T/long.json" >/dev/null || fail "long scenario"
curl -sf -X DELETE "$MURL/_requests" >/dev/null
L="$(input_for "$OPENAI,\"contextTokens\":1500}" '"compaction":{"keepTurns":3,"runEvents":1000}')"
sed -i "s/\"maxModelTurns\":30/\"maxModelTurns\":$((N + 10))/" "$L"
t0=$(date +%s%N)
assert_exit "$N turns with a small window complete" 0 "$ENGINE" start "$WF" --quiet --id long --input @"$L"
echo "# $N turns in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
assert_eq "the result" "$N turns done" "$(jget summary <<<"$OUT")"
assert_eq "every turn counted" "$N" "$(jget turns <<<"$OUT")"
runs="$(engine show long --json | jget run)"
echo "# runs: $runs; history events per run:$(for r in $(seq "$runs"); do printf ' %s' "$(engine history long --run "$r" --json | wc -l)"; done)"
[ "$runs" -ge $((N / 200)) ] && pass "it continued as new ($runs runs)" || fail "only $runs runs for $N turns"
maxev=0
for r in $(seq "$runs"); do
  n="$(engine history long --run "$r" --json | wc -l)"; [ "$n" -gt "$maxev" ] && maxev="$n"
done
[ "$maxev" -le 1020 ] && pass "each run's history stays under 1,020 events (largest $maxev)" ||
  fail "a run's history has $maxev events"
ev="$(engine events long --json)"
assert_eq "one session in the stream: created once, completed once, every turn" "1 1 $N" \
  "$(grep -c '"type":"session.created"' <<<"$ev") $(grep -c '"type":"session.completed"' <<<"$ev") $(grep -c '"type":"agent.message"' <<<"$ev")"
verify_events long >/dev/null && pass "the stream is dense across runs" || fail "event stream of long"
nc="$(grep -c '"type":"context.compacted"' <<<"$ev")"
[ "$nc" -ge $((N / 50)) ] && pass "it compacted again and again ($nc times)" || fail "$nc compactions in $N turns"
lastreq="$(bodies | grep -v '^routes' | tail -1)"
# what the model reads stays within the window: the messages' JSON in at most 4 bytes a token
mbytes="$(cut -f2 <<<"$lastreq" | jget messages | wc -c)"
[ "$mbytes" -le $((1500 * 4)) ] && pass "the last turn's transcript fits the window ($mbytes bytes of messages)" ||
  fail "the last turn sent $mbytes bytes of messages"
assert_contains "  and starts from a summary" "SUMMARY: no-op steps" "$lastreq"
assert_exit "the last run replays" 0 engine replay long
assert_eq "its history is dense" ok "$(verify_history long >/dev/null && echo ok)"

# --- kill -9 across run boundaries: 600 turns (a no-op tool call each, then
# maxModelTurns ends the session), runs of ~300 events, the engine killed twice
scenario "{\"routes\":[$SUMMARY],\"default\":{\"reply\":{\"text\":\"again\",\"tool_calls\":[{\"name\":\"noop\",\"arguments\":\"{}\"}]}}}"
K="$(input_for "$OPENAI,\"contextTokens\":1500}" '"compaction":{"keepTurns":3,"runEvents":300}')"
sed -i 's/"maxModelTurns":30/"maxModelTurns":600/' "$K"
bg S engine serve
"$ENGINE" start "$WF" --input @"$K" --id kk --detach >/dev/null 2>&1 || true
for kill_at in 150 400; do
  wait_true 30 '[ "$(engine events kk --json 2>/dev/null | grep -c '\''"type":"agent.message"'\'' || true)" -ge "$kill_at" ]' || true
  kill -9 "$S"; wait "$S" 2>/dev/null || true
  echo "# killed at $(engine events kk --json | grep -c '"type":"agent.message"') turns, run $(engine show kk --json | jget run)"
  bg S engine serve
done
wait_status kk completed 120 || fail "kk did not complete"
kill "$S"; wait "$S" 2>/dev/null || true
ev="$(engine events kk --json)"
assert_eq "after two crashes: one session, every turn once" "1 1 600" \
  "$(grep -c '"type":"session.created"' <<<"$ev") $(grep -c '"type":"session.completed"' <<<"$ev") $(grep -c '"type":"agent.message"' <<<"$ev")"
assert_eq "  the turns in order" "$(seq -s, 1 600)" "$(grep '"type":"agent.message"' <<<"$ev" | grep -o '"turn":[0-9]*' | cut -d: -f2 | paste -sd,)"
assert_contains "  ended by maxModelTurns" '"limit":"maxModelTurns"' "$(grep limit.exceeded <<<"$ev")"
verify_events kk >/dev/null && pass "  the stream is dense" || fail "event stream of kk"
runs="$(engine show kk --json | jget run)"
maxev=0
for r in $(seq "$runs"); do
  n="$(engine history kk --run "$r" --json | wc -l)"; [ "$n" -gt "$maxev" ] && maxev="$n"
done
[ "$runs" -ge 6 ] && [ "$maxev" -le 320 ] && pass "  $runs runs, the largest history $maxev events" ||
  fail "$runs runs, the largest history $maxev events"
assert_eq "  the sandbox is gone" 0 "$(docker ps -aq --filter label=engine.session=kk --filter "label=engine.instance=$(sqlite3 "$ENGINE_DB" "SELECT value FROM meta WHERE key='instance_id'")" | wc -l)"
finish
