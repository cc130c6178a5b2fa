#!/usr/bin/env bash
# Model streams as real servers send them, through the local model server:
# recorded provider streams (tests/fixtures/model/recorded/, see SOURCES) whose
# last event has no blank line after it; Ollama's index 0 for every tool call;
# llama.cpp's repeated tool names; a clean close after the finish reason with
# no [DONE]; finish_reason ""; a 200 that is not an event stream; bad JSON in a
# data: line; a stream cut in the middle of an event (TruncatedStream, with
# what was received); every stream split at odd byte boundaries and with CRLF or CR
# line ends. The exact splits (a CRLF cut between \r and \n, a UTF-8 character
# cut in two) are also checked without a network by
# tests/model_server/test_runner_streams.lua, run first.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/model_call.lua"

if lua5.4 "$SRC/tests/model_server/test_runner_streams.lua" >"$T/lua.out" 2>&1; then
  pass "runner streams at exact byte splits ($(tail -1 "$T/lua.out"))"
else
  fail "runner streams at exact byte splits:"; sed 's/^/    /' "$T/lua.out" | tail -30 >&2
fi

python3 "$SRC/tests/model_server/server.py" --scenario <(echo '{"steps":[]}') --port 0 --port-file "$T/port" \
  >/dev/null 2>"$T/server.log" &
PIDS+=($!)
wait_true 30 '[ -s "$T/port" ]' || true
PORT="$(cat "$T/port")"
BASE="http://127.0.0.1:$PORT/v1"
TOOLS='[{"name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}},{"name":"list_dir","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}]'

call() { # PROVIDER [TOOLS]: one streamed turn, up to 2 retries
  local tools="${2:+,\"tools\":$2}"
  "$ENGINE" start "$WF" --id "s$(date +%s%N)" --quiet --input \
    "{\"model\":{\"name\":\"m\",\"provider\":\"$1\",\"baseUrl\":\"$BASE\"}$tools,\"options\":{\"stream\":true,\"max_retries\":2}}" \
    2>>"$T/engine.err"
}
# summary of a turn: text|finish|calls (name id arguments; ...)|tokens in/out
summary() {
  lua5.4 -e '
    local cjson = require "cjson"
    local function canon(v) -- JSON with sorted keys
      if type(v) ~= "table" then return (cjson.encode(v):gsub("\\/", "/")) end
      local keys = {}
      for k in pairs(v) do keys[#keys + 1] = k end
      table.sort(keys)
      local out = {}
      for _, k in ipairs(keys) do out[#out + 1] = cjson.encode(k) .. ":" .. canon(v[k]) end
      return "{" .. table.concat(out, ",") .. "}"
    end
    local t = cjson.decode(io.read("a"))
    if not t.ok then io.write("error ", tostring(t.err.type), ": ", tostring(t.err.message)) return end
    t = t.turn
    local calls = {}
    for _, c in ipairs(t.tool_calls) do calls[#calls + 1] = c.name .. " " .. c.id .. " " .. canon(c.arguments) end
    io.write(t.text, "|", t.finish_reason, "|", table.concat(calls, "; "), "|", t.usage.input_tokens, "/", t.usage.output_tokens)'
}

# --- the last event with no blank line after it (Anthropic's own SDK fixtures end so)
scenario '{"steps":[{"fixture":"recorded/anthropic_basic.sse"},{"reply":{"text":"a retry"}}]}'
out="$(call anthropic)"
assert_eq "recorded Anthropic text stream ending in message_stop and no newline" "Hello there!|stop||11/6" "$(summary <<<"$out")"
assert_eq "... is not retried as truncated" 1 "$(nreq)"
scenario '{"steps":[{"fixture":"recorded/anthropic_tool_use.sse"},{"reply":{"text":"a retry"}}]}'
out="$(call anthropic)"
assert_eq "recorded Anthropic tool_use stream" \
  "I'll check the current weather in Paris for you.|tool_calls|get_weather toolu_01NRLabsLyVHZPKxbKvkfSMn {\"location\":\"Paris\"}|377/65" \
  "$(summary <<<"$out")"
assert_eq "... in one request" 1 "$(nreq)"
scenario '{"steps":[{"raw":"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"no blank line\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]"},{"reply":{"text":"a retry"}}]}'
assert_eq "a chat stream whose [DONE] has no newline" "no blank line|stop||0/0 1" "$(call openai | summary) $(nreq)"

# --- Ollama: index 0 for every tool call, each with its own id
scenario '{"steps":[{"fixture":"recorded/ollama_index0_tools.sse"}]}'
assert_eq "Ollama's calls at index 0 with distinct ids stay two calls" \
  '|tool_calls|read_file call_k3x9qf2a {"path":"hello.py"}; list_dir call_7dm2wz8r {"path":"src"}|183/41' "$(call openai "$TOOLS" | summary)"
scenario '{"steps":[{"raw":"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_a\",\"index\":0,\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{}\"}},{\"id\":\"call_b\",\"index\":0,\"type\":\"function\",\"function\":{\"name\":\"list_dir\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"}]}'
assert_eq "... also when both come in one chunk" '|tool_calls|read_file call_a {}; list_dir call_b {}|0/0' "$(call openai "$TOOLS" | summary)"
# --- llama.cpp: the name again (and longer) in a later delta of the same call
scenario '{"steps":[{"fixture":"recorded/llamacpp_tool_name_repeated.sse"}]}'
assert_eq "llama.cpp's repeated, growing tool name is set, not appended" \
  '|tool_calls|read_file QjbR0sM4yJwLd1Gx8VnKc2PeT5ZfHa7o {"path":"src/a.c"}; list_dir Xw2cN9tLq4Hs7Rb0PmE5kVyJ1aDgU3Zi {"path":"src"}|212/38' \
  "$(call openai "$TOOLS" | summary)"

# --- a clean close after the finish reason, without [DONE] (recorded OpenAI stream)
TWO='|tool_calls|GetWeatherArgs call_JMW1whyEaYG438VE1OIflxA2 {"city":"Edinburgh","country":"GB","units":"c"}; get_stock_price call_DNYTawLBoN8fj3KN6qU9N1Ou {"exchange":"NASDAQ","ticker":"AAPL"}'
scenario '{"steps":[{"fixture":"recorded/openai_chat_two_tools.sse","end_after_events":25},{"reply":{"text":"a retry"}}]}'
assert_eq "recorded chat stream closed cleanly before [DONE]" "$TWO|149/60 1" "$(call openai | summary) $(nreq)"
scenario '{"steps":[{"fixture":"recorded/openai_chat_two_tools.sse","end_after_events":24},{"reply":{"text":"a retry"}}]}'
assert_eq "... and before its usage chunk" "$TWO|0/0 1" "$(call openai | summary) $(nreq)"
scenario '{"steps":[{"fixture":"recorded/anthropic_tool_use.sse","end_after_events":14},{"reply":{"text":"a retry"}}]}'
assert_eq "recorded Anthropic stream closed cleanly after message_delta, no message_stop" "tool_calls 1" \
  "$(call anthropic | jget turn.finish_reason) $(nreq)"
scenario '{"default":{"fixture":"recorded/openai_chat_two_tools.sse","end_after_events":23}}'
out="$(call openai)"
assert_eq "a clean close before the finish reason is still truncated" "TruncatedStream 3" "$(jget err.type <<<"$out") $(nreq)"

# --- finish_reason "" is not a finish reason
EMPTY_FR='data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"\"}]}\n\n'
scenario "{\"steps\":[{\"raw\":\"${EMPTY_FR}data: {\\\"choices\\\":[{\\\"index\\\":0,\\\"delta\\\":{},\\\"finish_reason\\\":\\\"stop\\\"}]}\n\ndata: {\\\"choices\\\":[{\\\"index\\\":0,\\\"delta\\\":{},\\\"finish_reason\\\":\\\"\\\"}],\\\"usage\\\":{\\\"prompt_tokens\\\":3,\\\"completion_tokens\\\":1}}\n\ndata: [DONE]\n\n\"}]}"
assert_eq 'finish_reason "" after the real one does not replace it' "Hi|stop||3/1" "$(call openai | summary)"
scenario "{\"default\":{\"raw\":\"${EMPTY_FR}\"}}"
out="$(call openai)"
assert_eq 'a clean close after only finish_reason "" is truncated (retried)' "TruncatedStream 3" "$(jget err.type <<<"$out") $(nreq)"

# --- a 200 that is not an event stream
scenario '{"default":{"raw":"<html><body>502 Bad Gateway</body></html>","content_type":"text/html"}}'
out="$(call openai)"
assert_eq "HTML on a streaming call: InvalidResponse, retried" "InvalidResponse 3" "$(jget err.type <<<"$out") $(nreq)"
assert_contains "... says so, with the body's start" \
  "the server answered a streaming request with a non-SSE body (content-type text/html): <html><body>502 Bad Gateway" "$(jget err.message <<<"$out")"
scenario '{"default":{"raw":"{\"error\":{\"message\":\"Rate limit reached for gpt-4o\",\"type\":\"requests\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}","content_type":"application/json"}}'
out="$(call openai)"
assert_eq "a JSON rate-limit error on a 200: RateLimited, retried" "RateLimited 3" "$(jget err.type <<<"$out") $(nreq)"
assert_contains "... with the provider's message" \
  "non-SSE body (content-type application/json): Rate limit reached for gpt-4o (rate_limit_exceeded)" "$(jget err.message <<<"$out")"
scenario '{"default":{"raw":"{\"error\":{\"message\":\"model \\\"llama9\\\" not found\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}","content_type":"application/json"}}'
out="$(call openai)"
assert_eq "a JSON invalid_request_error on a 200: BadRequest, not retried" "BadRequest 1 true" \
  "$(jget err.type <<<"$out") $(nreq) $(jget err.non_retryable <<<"$out")"
scenario '{"default":{"raw":"{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}","content_type":"application/json"}}'
assert_eq "Anthropic's error shape on a 200: Overloaded" Overloaded "$(call anthropic | jget err.type)"
scenario '{"default":{"raw":"{\"error\":{\"message\":\"upstream busy\",\"type\":\"server_error\"}}"}}'
out="$(call openai)"
assert_eq "a JSON error labelled text/event-stream: ServerError" "ServerError" "$(jget err.type <<<"$out")"
assert_contains "... names the label" "(content-type text/event-stream; charset=utf-8): upstream busy" "$(jget err.message <<<"$out")"
scenario '{"default":{"raw":"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"par\"}}]}\n\nerror: {\"code\":500,\"message\":\"context shift is disabled\",\"type\":\"server_error\"}\n\n"}}'
out="$(call openai)"
assert_eq "llama.cpp's error: line ending a stream: ServerError" ServerError "$(jget err.type <<<"$out")"
assert_contains "... with its message" "context shift is disabled" "$(jget err.message <<<"$out")"

# --- bad JSON in a data: line is retried like a garbage body
scenario '{"steps":[{"raw":"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}\n\n"},{"reply":{"text":"second try"}}]}'
assert_eq "bad JSON in a data: line: retried" "second try 2" "$(call openai | jget turn.text) $(nreq)"
scenario '{"default":{"raw":"event: message_start\ndata: {\"type\":\"message_start\",\n\n"}}'
out="$(call anthropic)"
assert_eq "... every time: InvalidResponse after the retries" "InvalidResponse 3" "$(jget err.type <<<"$out") $(nreq)"
assert_contains "... naming the event" "a stream event is not JSON" "$(jget err.message <<<"$out")"

# --- a stream cut in the middle of an event is named truncated, not "not JSON"
# (framing close: the body ends with the connection, so the client sees a
# clean end; chunked: curl sees the transfer broken)
for p in openai openai-responses anthropic; do
  for framing in close chunked; do
    scenario "{\"default\":{\"reply\":{\"text\":\"an answer long enough to be cut in the middle of an event\"},\"cut_after_bytes\":700,\"framing\":\"$framing\"}}"
    out="$(call $p)"
    assert_eq "$p, cut mid-event ($framing): TruncatedStream, retried" "TruncatedStream 3" "$(jget err.type <<<"$out") $(nreq)"
    msg="$(jget err.message <<<"$out")"
    assert_contains "... naming the bytes and events received, and no final event" "700 bytes and " "$msg"
    assert_contains "... (events)" " events received, no final event" "$msg"
    [[ "$msg" != *"not JSON"* ]] || fail "$p ($framing): the message still blames the format: $msg"
  done
  assert_contains "$p: the close named as such" "cut off in the middle of an event (the connection closed)" \
    "$(scenario "{\"default\":{\"reply\":{\"text\":\"an answer long enough to be cut\"},\"cut_after_bytes\":700,\"framing\":\"close\"}}"; call $p | jget err.message)"
  scenario "{\"steps\":[{\"reply\":{\"text\":\"cut\"},\"cut_after_bytes\":500,\"framing\":\"close\"},{\"reply\":{\"text\":\"whole\"}}]}"
  assert_eq "$p: the retry after a cut gets the answer" "whole 2" "$(call $p | jget turn.text) $(nreq)"
done
scenario '{"default":{"fixture":"recorded/openai_chat_two_tools.sse","end_after_events":25,"framing":"close"}}'
assert_eq "a close after the finish reason (framing close) is still a whole answer" "$TWO|149/60 1" "$(call openai | summary) $(nreq)"

# --- every stream at odd byte boundaries, and with CRLF or CR line ends
splits() { # PROVIDER FIXTURE [TOOLS]: the turn is the same whole, split, CRLF and CR
  local p="$1" f="$2" tools="${3:-}" want got mod
  scenario "{\"steps\":[{\"fixture\":\"$f\"}]}"
  want="$(call "$p" "$tools" | summary)"
  case "$want" in error*) fail "$f whole: $want"; return ;; esac
  for mod in '"chunk_bytes":1' '"chunk_bytes":2' '"chunk_bytes":3' '"chunk_bytes":7' '"chunk_bytes":13' \
             '"chunk_bytes":[1,13,2,7,3]' '"line_endings":"crlf","chunk_bytes":[2,1,3]' '"line_endings":"cr","chunk_bytes":7' \
             '"line_endings":"crlf"' '"line_endings":"cr"'; do
    scenario "{\"steps\":[{\"fixture\":\"$f\",$mod}]}"
    got="$(call "$p" "$tools" | summary)"
    [ "$got" == "$want" ] || { fail "$f with {$mod}: [$got], whole: [$want]"; return; }
  done
  pass "$f: the same turn at 1, 2, 3, 7, 13 byte chunks, CRLF and CR"
}
splits anthropic recorded/anthropic_basic.sse
splits anthropic recorded/anthropic_tool_use.sse
splits openai recorded/openai_chat_text.sse
splits openai recorded/openai_chat_two_tools.sse
splits openai recorded/ollama_index0_tools.sse "$TOOLS"
splits openai recorded/llamacpp_tool_name_repeated.sse "$TOOLS"
splits openai openai_chat_stream_tools.sse "$TOOLS"
splits openai-responses openai_responses_stream_tools.sse "$TOOLS"
splits anthropic anthropic_stream_tools.sse "$TOOLS"
# a multi-byte character (°, 2 bytes) cut in two by 1- and 7-byte chunks
scenario '{"steps":[{"fixture":"recorded/openai_chat_utf8.sse","chunk_bytes":1},{"fixture":"recorded/openai_chat_utf8.sse","chunk_bytes":7,"line_endings":"crlf"}]}'
a="$(call openai | jget turn.text)"; b="$(call openai | jget turn.text)"
assert_contains "recorded UTF-8 stream in 1-byte chunks keeps its characters" '"temperature": "18°C"' "$a"
assert_eq "... and in 7-byte chunks with CRLF" "$a" "$b"
finish
