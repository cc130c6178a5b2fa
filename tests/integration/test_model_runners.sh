#!/usr/bin/env bash
# The model runners against a local server that speaks each provider's real
# wire format (JSON and SSE), scripted per case: tool calls over several turns,
# retries with Retry-After, errors, cut streams, garbage, timeouts; the
# recorded fixtures; credentials that never reach the database or the output.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/model_call.lua"
python3 "$SRC/tests/model_server/server.py" --scenario <(echo '{"steps":[]}') --port 0 --port-file "$T/port" \
  >/dev/null 2>"$T/server.log" &
PIDS+=($!)
wait_true 30 '[ -s "$T/port" ]' || true
PORT="$(cat "$T/port")"
BASE="http://127.0.0.1:$PORT/v1"
export OPENAI_API_KEY="sk-test-OPENAIKEY-0123456789" ANTHROPIC_API_KEY="ant-test-ANTHROPICKEY-0123456789"
TOOLS='[{"name":"read_file","description":"read a file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}},{"name":"list_files","description":"list","parameters":{"type":"object","properties":{}}},{"name":"list_dir","description":"list a directory","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}]'

call() { # (runs in a subshell: the id comes from the clock, not a counter)
  local provider="$1" name="$2" stream="$3" extra="${4:-}"
  "$ENGINE" start "$WF" --id "m$(date +%s%N)" --quiet --input \
    "{\"model\":{\"name\":\"$name\",\"provider\":\"$provider\",\"baseUrl\":\"$BASE\"},\"tools\":$TOOLS,\"options\":{\"stream\":$stream,\"max_retries\":2}$extra}" \
    2>>"$T/engine.err"
}

REPLY='{"steps":[{"reply":{"text":"Reading it.","tool_calls":[{"id":"call_7","name":"read_file","arguments":{"path":"src/a.c"}},{"id":"call_8","name":"list_files","arguments":{}}],"usage":{"input_tokens":31,"output_tokens":12}}}]}'
for provider in openai openai-responses anthropic; do
  for stream in true false; do
    scenario "$REPLY"
    out="$(call "$provider" m-1 "$stream")"
    what="$provider stream=$stream"
    assert_eq "$what: ok" true "$(jget ok <<<"$out")"
    assert_eq "$what: text" "Reading it." "$(jget turn.text <<<"$out")"
    assert_eq "$what: first tool" "read_file" "$(jget turn.tool_calls.1.name <<<"$out")"
    assert_eq "$what: its id" "call_7" "$(jget turn.tool_calls.1.id <<<"$out")"
    assert_eq "$what: its arguments" '{"path":"src/a.c"}' "$(jget turn.tool_calls.1.arguments <<<"$out")"
    assert_eq "$what: second tool" "list_files" "$(jget turn.tool_calls.2.name <<<"$out")"
    assert_eq "$what: finish" "tool_calls" "$(jget turn.finish_reason <<<"$out")"
    assert_eq "$what: tokens in" 31 "$(jget turn.usage.input_tokens <<<"$out")"
    assert_eq "$what: tokens out" 12 "$(jget turn.usage.output_tokens <<<"$out")"
    r="$(requests)"
    case "$provider" in
      anthropic) assert_contains "$what: x-api-key sent" "$ANTHROPIC_API_KEY" "$(jget 1.headers.x-api-key <<<"$r")"
                 assert_eq "$what: anthropic-version" "2023-06-01" "$(jget 1.headers.anthropic-version <<<"$r")"
                 assert_eq "$what: tools as input_schema" "object" "$(jget 1.body.tools.1.input_schema.type <<<"$r")" ;;
      openai) assert_eq "$what: bearer" "Bearer $OPENAI_API_KEY" "$(jget 1.headers.authorization <<<"$r")"
              [ "$stream" == true ] && assert_eq "$what: include_usage" true "$(jget 1.body.stream_options.include_usage <<<"$r")" ;;
      openai-responses) assert_eq "$what: function tool" "function" "$(jget 1.body.tools.1.type <<<"$r")" ;;
    esac
  done
done

# --- several turns: the tool result goes back in each provider's own shape
HIST=',"messages":[{"role":"user","content":"read a"},{"role":"assistant","content":"","tool_calls":[{"id":"call_1","name":"read_file","arguments":{"path":"a"}}]},{"role":"tool","tool_call_id":"call_1","name":"read_file","content":"file body"}]'
for provider in openai openai-responses anthropic; do
  scenario '{"steps":[{"reply":{"text":"The file says: file body","usage":{"input_tokens":50,"output_tokens":6}}}]}'
  out="$(call "$provider" m-2 true "$HIST")"
  assert_eq "$provider second turn: final text" "The file says: file body" "$(jget turn.text <<<"$out")"
  assert_eq "$provider second turn: stop" "stop" "$(jget turn.finish_reason <<<"$out")"
  r="$(requests)"
  case "$provider" in
    openai) assert_eq "chat: tool message" "tool" "$(jget 1.body.messages.3.role <<<"$r")"
            assert_eq "chat: tool_call_id" "call_1" "$(jget 1.body.messages.3.tool_call_id <<<"$r")"
            assert_eq "chat: assistant tool_calls kept" "read_file" "$(jget 1.body.messages.2.tool_calls.1.function.name <<<"$r")" ;;
    openai-responses) assert_eq "responses: function_call item" "function_call" "$(jget 1.body.input.2.type <<<"$r")"
            assert_eq "responses: function_call_output" "function_call_output" "$(jget 1.body.input.3.type <<<"$r")"
            assert_eq "responses: output" "file body" "$(jget 1.body.input.3.output <<<"$r")" ;;
    anthropic) assert_eq "anthropic: tool_use block" "tool_use" "$(jget 1.body.messages.2.content.1.type <<<"$r")"
            assert_eq "anthropic: tool_result in a user turn" "user" "$(jget 1.body.messages.3.role <<<"$r")"
            assert_eq "anthropic: tool_result" "tool_result" "$(jget 1.body.messages.3.content.1.type <<<"$r")" ;;
  esac
done

# --- failures done right
scenario '{"steps":[{"status":429,"headers":{"retry-after":"1"}},{"reply":{"text":"ok"}}]}'
out="$(call openai m-3 true)"
assert_eq "429 with Retry-After, then success" ok "$(jget turn.text <<<"$out")"
assert_eq "two requests" 2 "$(nreq)"
gap="$(requests | lua5.4 -e 'local r=require"cjson".decode(io.read("a")); print(r[2].time - r[1].time >= 0.9 and "waited" or ("only "..(r[2].time-r[1].time)))')"
assert_eq "honoured Retry-After (1 s)" waited "$gap"
assert_eq "the turn reports the retry-after it waited out" 1 "$(jget turn.rate_limited <<<"$out")"
# the engine's rate limits wait out a 429 themselves (durably, and for every
# session on the provider): with defer_rate_limit the runner raises it at once
scenario '{"steps":[{"status":429,"headers":{"retry-after":"7"}},{"reply":{"text":"not asked"}}]}'
out="$("$ENGINE" start "$WF" --id "m-defer" --quiet --input \
  "{\"model\":{\"name\":\"m\",\"provider\":\"openai\",\"baseUrl\":\"$BASE\"},\"options\":{\"defer_rate_limit\":true}}" 2>>"$T/engine.err")"
assert_eq "deferred: RateLimited at once" RateLimited "$(jget err.type <<<"$out")"
assert_eq "with the retry-after" 7 "$(jget err.retry_after <<<"$out")"
assert_eq "not retried here" "true 1" "$(jget err.non_retryable <<<"$out") $(nreq)"
scenario '{"steps":[{"status":429,"headers":{"retry-after-ms":"50"}},{"status":500},{"reply":{"text":"third time"}}]}'
out="$(call anthropic m-3b true)"
assert_eq "429 (retry-after-ms) then 500 then success" "third time" "$(jget turn.text <<<"$out")"
scenario '{"steps":[{"status":529},{"reply":{"text":"after overload"}}]}'
out="$(call anthropic m-3c false)"
assert_eq "529 overloaded is retried" "after overload" "$(jget turn.text <<<"$out")"
scenario '{"steps":[{"status":500},{"status":500},{"status":500},{"reply":{"text":"too late"}}]}'
out="$(call openai m-4 true)"
assert_eq "500s beyond max_retries: typed error" ServerError "$(jget err.type <<<"$out")"
assert_eq "after 3 requests" 3 "$(nreq)"
scenario '{"steps":[{"status":500,"headers":{"x-should-retry":"false"}},{"reply":{"text":"no"}}]}'
out="$(call openai m-4b true)"
assert_eq "x-should-retry: false stops retries" "1 ServerError" "$(nreq) $(jget err.type <<<"$out")"
scenario '{"steps":[{"status":409,"headers":{"x-should-retry":"true"}},{"reply":{"text":"conflict resolved"}}]}'
out="$(call openai-responses m-4c true)"
assert_eq "409 is retried" "conflict resolved" "$(jget turn.text <<<"$out")"
for code in 400 401 403 404; do
  scenario "{\"steps\":[{\"status\":$code},{\"reply\":{\"text\":\"no\"}}]}"
  out="$(call anthropic "m-$code" true)"
  assert_eq "$code is not retried" 1 "$(nreq)"
  assert_eq "$code non_retryable" true "$(jget err.non_retryable <<<"$out")"
  assert_contains "$code carries the provider's message" "HTTP $code" "$(jget err.message <<<"$out")"
done
assert_eq "401 type" Unauthorized "$(scenario '{"steps":[{"status":401}]}'; call openai m-401b true | jget err.type)"
scenario '{"steps":[{"reply":{"text":"cut short, never finished"},"cut_after_events":2},{"reply":{"text":"complete"}}]}'
out="$(call openai m-5 true)"
assert_eq "a cut stream is retried" complete "$(jget turn.text <<<"$out")"
scenario '{"default":{"reply":{"text":"a b c d e f"},"cut_after_events":3}}'
for provider in openai openai-responses anthropic; do
  out="$(call "$provider" m-5b true)"
  assert_eq "$provider: a stream cut every time is a TruncatedStream" TruncatedStream "$(jget err.type <<<"$out")"
done
scenario '{"default":{"raw":"this is { not json"}}'
out="$(call openai m-6 false)"
assert_eq "garbage body: InvalidResponse" InvalidResponse "$(jget err.type <<<"$out")"
out="$(call anthropic m-6b true)"
assert_eq "garbage stream: InvalidResponse or truncated" "false" "$(jget ok <<<"$out")"
scenario '{"steps":[{"reply":{"text":"slow"},"delay":3}]}'
out="$(call openai m-7 true ',"options":{"timeout":0.5,"max_retries":0}')"
assert_eq "slower than the timeout: Timeout" Timeout "$(jget err.type <<<"$out")"
scenario '{"steps":[{"reply":{"tool_calls":[{"id":"c1","name":"read_file","arguments":{"path":"x"}}]},"bad_arguments":true}]}'
out="$(call openai m-8 true)"
assert_eq "invalid JSON in tool arguments" InvalidToolArguments "$(jget err.type <<<"$out")"
scenario '{"steps":[{"reply":{"tool_calls":[{"id":"c1","name":"rm_rf","arguments":{}}]}}]}'
out="$(call anthropic m-9 true)"
assert_eq "unknown tool name" UnknownTool "$(jget err.type <<<"$out")"
assert_eq "names the tool" rm_rf "$(jget err.tool <<<"$out")"
scenario '{"steps":[{"reply":{"text":"x y z"},"stream_error":{"after_events":2,"type":"overloaded_error","message":"busy"}},{"reply":{"text":"recovered"}}]}'
out="$(call anthropic m-9b true)"
assert_eq "an error event mid-stream is retried" recovered "$(jget turn.text <<<"$out")"

# --- recorded fixtures, each provider
for f in openai_chat.json openai_chat_stream.sse openai_chat_stream_tools.sse openai_responses.json \
         openai_responses_stream_tools.sse anthropic.json anthropic_stream.sse anthropic_stream_tools.sse; do
  case "$f" in openai_chat*) p=openai ;; openai_responses*) p=openai-responses ;; anthropic*) p=anthropic ;; esac
  case "$f" in *.sse) s=true ;; *) s=false ;; esac
  scenario "{\"steps\":[{\"fixture\":\"$f\"}]}"
  out="$(call "$p" m-fixture "$s")"
  assert_eq "fixture $f parses" true "$(jget ok <<<"$out")"
  t="$(jget turn.text <<<"$out")$(jget turn.tool_calls.1.name <<<"$out")"
  [ -n "$t" ] && [ "$t" != nilnil ] && pass "fixture $f has content" || fail "fixture $f: empty turn: $out"
  if [ "$f" != openai_chat_stream.sse ]; then # that recording was made without stream_options.include_usage
    [ "$(jget turn.usage.output_tokens <<<"$out")" -gt 0 ] 2>/dev/null && pass "fixture $f usage" || fail "fixture $f: no usage: $out"
  fi
done

# --- the offline replay runner: no server, no key
REC="$SRC/tests/fixtures/replay/two_turns.jsonl"
rcall() { "$ENGINE" start "$WF" --id "r$(date +%s%N)" --quiet --input "{\"model\":{\"name\":\"replay:$REC\"},\"tools\":$TOOLS$1}"; }
out="$(rcall '')"
assert_eq "replay: first turn" read_file "$(jget turn.tool_calls.1.name <<<"$out")"
assert_eq "replay: usage" 9 "$(jget turn.usage.output_tokens <<<"$out")"
out="$(rcall "$HIST")"
assert_eq "replay: second turn after the tool result" "It says: file body." "$(jget turn.text <<<"$out")"
out="$(rcall ',"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]')"
assert_eq "replay: a conversation that diverges" ReplayDiverged "$(jget err.type <<<"$out")"
assert_contains "replay: says how" "recorded after a tool message" "$(jget err.message <<<"$out")"
out="$(rcall "$(echo "$HIST" | sed 's/"role":"tool","tool_call_id":"call_1","name":"read_file","content":"file body"/"role":"tool","tool_call_id":"call_1","name":"read_file","content":"x"},{"role":"assistant","content":"y"},{"role":"user","content":"z"/')")"
assert_contains "replay: past the end of the recording" "has 2 turns" "$(jget err.message <<<"$out")"
out="$("$ENGINE" start "$WF" --id "r$(date +%s%N)" --quiet --input '{"model":{"name":"replay:/nonexistent.jsonl"}}')"
assert_contains "replay: a missing recording" "cannot open the recording" "$(jget err.message <<<"$out")"

# --- credentials: never from input, never in the database, errors or output
out="$("$ENGINE" start "$WF" --id "k$(date +%s%N)" --quiet --input "{\"model\":{\"name\":\"m\",\"baseUrl\":\"$BASE\",\"apiKey\":\"sk-from-input\"}}")"
assert_eq "a key in the model spec is refused" InvalidModelSpec "$(jget err.type <<<"$out")"
scenario "{\"steps\":[{\"status\":401,\"body\":{\"error\":{\"message\":\"Incorrect API key provided: $OPENAI_API_KEY\",\"type\":\"invalid_request_error\"}}}]}"
out="$(call openai m-key true)"
assert_eq "401 echoing the key" Unauthorized "$(jget err.type <<<"$out")"
case "$out" in *OPENAIKEY*) fail "the key leaked into the error" ;; *) pass "the key is redacted from the error" ;; esac
sync
for f in "$ENGINE_DB" "$ENGINE_DB-wal"; do
  [ -f "$f" ] || continue
  if grep -aq -e "OPENAIKEY" -e "ANTHROPICKEY" "$f"; then fail "an API key reached $(basename "$f")"; else pass "no API key in $(basename "$f")"; fi
done
if grep -aq -e "OPENAIKEY" -e "ANTHROPICKEY" "$T/engine.err"; then fail "an API key reached stderr"; else pass "no API key on stderr"; fi
finish
