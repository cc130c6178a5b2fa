#!/usr/bin/env bash
# Self-test of the scripted model server: every step kind, all three wire
# formats in both modes, byte-level goldens, control endpoints, and a load check
# (1,000 concurrent slow streams). Exit status is non-zero on any failure.
#
#   tests/model_server/selftest.sh            # everything
#   SKIP_LOAD=1 tests/model_server/selftest.sh
#   UPDATE_GOLDEN=1 tests/model_server/selftest.sh   # rewrite golden/*.golden
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
FIX=$(cd "$HERE/../fixtures/model" && pwd)
GOLDEN=$HERE/golden
SERVER=$HERE/server.py
CHECK=$HERE/check.py
TMP=$(mktemp -d "${TMPDIR:-/tmp}/model_server_selftest.XXXXXX")
source "$HERE/../debian_python.sh"
use_debian_python "$TMP/.bin"
PID=""
PORT=""
URL=""
PASS=0
FAIL=0

cleanup() {
    if [ -n "$PID" ]; then kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; fi
    rm -rf "$TMP"
}
trap cleanup EXIT

ok()   { PASS=$((PASS + 1)); echo "ok   $1"; }
bad()  { FAIL=$((FAIL + 1)); echo "FAIL $1"; }
# check DESCRIPTION COMMAND...: run the command, pass when it succeeds
check() { local d=$1; shift; if "$@"; then ok "$d"; else bad "$d"; fi; }
eq() {
    if [ "$1" = "$2" ]; then return 0; fi
    echo "     expected: $2"; echo "     got:      $1"; return 1
}
contains() { # FILE STRING
    if grep -qF -- "$2" "$1"; then return 0; fi
    echo "     $1 does not contain: $2"; head -c 600 "$1" | sed 's/^/     | /'; echo; return 1
}
lacks() { if grep -qF -- "$2" "$1"; then echo "     $1 contains: $2"; return 1; fi; return 0; }
py() { python3 -c "$@"; }

start_server() { # SCENARIO_FILE
    rm -f "$TMP/port"
    python3 "$SERVER" --scenario "$1" --port-file "$TMP/port" >"$TMP/server.out" 2>>"$TMP/server.err" &
    PID=$!
    for _ in $(seq 1 100); do
        [ -s "$TMP/port" ] && break
        sleep 0.05
    done
    if [ ! -s "$TMP/port" ]; then
        echo "server did not start:"; cat "$TMP/server.err"; exit 1
    fi
    PORT=$(cat "$TMP/port")
    URL="http://127.0.0.1:$PORT"
}
stop_server() { kill "$PID"; wait "$PID" 2>/dev/null; PID=""; }

# req NAME METHOD PATH [curl args...]: body -> NAME.body, headers -> NAME.hdr,
# "code starttransfer total num_connects" -> NAME.info, curl exit -> NAME.rc
req() {
    local name=$1 method=$2 path=$3; shift 3
    curl -sS -N -X "$method" -o "$TMP/$name.body" -D "$TMP/$name.hdr" \
        -w '%{http_code} %{time_starttransfer} %{time_total} %{num_connects}' \
        "$@" "$URL$path" >"$TMP/$name.info" 2>"$TMP/$name.err"
    echo $? >"$TMP/$name.rc"
}
post() { local name=$1 path=$2 json=$3; shift 3
    req "$name" POST "$path" -H 'content-type: application/json' --data-binary "$json" "$@"; }
code() { cut -d' ' -f1 "$TMP/$1.info"; }
rc()   { cat "$TMP/$1.rc"; }
hdr()  { grep -i "^$2:" "$TMP/$1.hdr" | tail -1 | cut -d: -f2- | sed 's/^ //; s/\r$//'; }
jget() { py "import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(eval(sys.argv[2]), separators=(',',':')) if not isinstance(eval(sys.argv[2]), str) else eval(sys.argv[2]))" "$TMP/$1.body" "$2"; }
turn() { python3 "$CHECK" "$1" "$2" "$TMP/$3.body"; }   # stream|json PROVIDER NAME
events() { python3 "$CHECK" events "$TMP/$1.body" | tr '\n' ' ' | sed 's/ $//'; }
golden() { # NAME GOLDEN_FILE: compare body bytes (timestamps zeroed) with golden/GOLDEN_FILE
    sed -E 's/"(created|created_at)":[0-9]+/"\1":0/g' "$TMP/$1.body" >"$TMP/$1.norm"
    if [ "${UPDATE_GOLDEN:-}" = 1 ]; then mkdir -p "$GOLDEN"; cp "$TMP/$1.norm" "$GOLDEN/$2"; return 0; fi
    if cmp -s "$TMP/$1.norm" "$GOLDEN/$2"; then return 0; fi
    diff "$GOLDEN/$2" "$TMP/$1.norm" | head -20 | sed 's/^/     /'; return 1
}

CHAT=/v1/chat/completions
RESP=/v1/responses
ANTH=/v1/messages
TOOLS_REPLY='{"text":"Hi there","tool_calls":[{"id":"call_1","name":"read_file","arguments":"{\"path\":\"a.txt\"}"}],"usage":{"input_tokens":12,"output_tokens":7}}'
TOOLS_TURN='{"finish_reason":"tool_calls","text":"Hi there","tool_calls":[{"arguments":"{\"path\":\"a.txt\"}","id":"call_1","name":"read_file"}],"usage":{"input_tokens":12,"output_tokens":7}}'

echo "== fixtures are well-formed"
for f in openai_chat_stream.sse openai_chat_stream_tools.sse; do
    check "fixture $f parses as a chat stream" python3 "$CHECK" stream chat "$FIX/$f" >/dev/null
done
check "fixture openai_chat.json" python3 "$CHECK" json chat "$FIX/openai_chat.json" >/dev/null
check "fixture openai_responses.json" python3 "$CHECK" json responses "$FIX/openai_responses.json" >/dev/null
check "fixture openai_responses_stream_tools.sse" python3 "$CHECK" stream responses "$FIX/openai_responses_stream_tools.sse" >/dev/null
check "fixture anthropic.json" python3 "$CHECK" json anthropic "$FIX/anthropic.json" >/dev/null
check "fixture anthropic_stream.sse" python3 "$CHECK" stream anthropic "$FIX/anthropic_stream.sse" >/dev/null
check "fixture anthropic_stream_tools.sse" python3 "$CHECK" stream anthropic "$FIX/anthropic_stream_tools.sse" >/dev/null
check "fixture anthropic_stream.sse has a ping" contains "$FIX/anthropic_stream.sse" $'event: ping\ndata: {"type": "ping"}'
check "fixture chat tools: two parallel calls + usage chunk" eq \
    "$(python3 "$CHECK" stream chat "$FIX/openai_chat_stream_tools.sse" | py 'import json,sys; d=json.load(sys.stdin); print(len(d["tool_calls"]), d["usage"] is not None)')" "2 True"

echo "== rendered replies, byte for byte (golden/)"
cat >"$TMP/golden.json" <<EOF
{"steps":[
 {"reply":$TOOLS_REPLY}, {"reply":$TOOLS_REPLY}, {"reply":$TOOLS_REPLY},
 {"reply":$TOOLS_REPLY}, {"reply":$TOOLS_REPLY}, {"reply":$TOOLS_REPLY},
 {"reply":$TOOLS_REPLY}
]}
EOF
start_server "$TMP/golden.json"
post g_chat_s  $CHAT '{"model":"m","stream":true}'
post g_resp_s  $RESP '{"model":"m","stream":true}'
post g_anth_s  $ANTH '{"model":"m","stream":true}'
post g_chat_j  $CHAT '{"model":"m"}'
post g_resp_j  $RESP '{"model":"m","stream":false}'
post g_anth_j  $ANTH '{"model":"m"}'
post g_chat_su $CHAT '{"model":"m","stream":true,"stream_options":{"include_usage":true}}'
stop_server
for n in g_chat_s g_resp_s g_anth_s g_chat_j g_resp_j g_anth_j g_chat_su; do
    check "$n matches golden/$n.golden" golden $n $n.golden
done
check "chat stream content-type" eq "$(hdr g_chat_s content-type)" "text/event-stream; charset=utf-8"
check "chat stream is chunked" eq "$(hdr g_chat_s transfer-encoding)" "chunked"
check "chat json content-type" eq "$(hdr g_chat_j content-type)" "application/json"
check "chat stream assembles" eq "$(turn stream chat g_chat_su)" "$TOOLS_TURN"
check "chat stream w/o include_usage has no usage key" lacks "$TMP/g_chat_s.body" '"usage"'
check "chat stream with include_usage: usage:null on chunks" contains "$TMP/g_chat_su.body" '"finish_reason":null}],"usage":null}'
check "chat stream with include_usage: final usage chunk has choices:[]" contains "$TMP/g_chat_su.body" '"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19'
check "chat stream ends with data: [DONE]" eq "$(tail -c 14 "$TMP/g_chat_s.body" | od -An -c | tr -s ' ')" "$(printf 'data: [DONE]\n\n' | od -An -c | tr -s ' ')"
check "chat tool_call first delta: index,id,type,name, empty arguments" contains "$TMP/g_chat_s.body" '"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"read_file","arguments":""}}]}'
check "chat json assembles" eq "$(turn json chat g_chat_j | sed 's/"usage":{[^}]*}/U/')" "$(echo "$TOOLS_TURN" | sed 's/"usage":{[^}]*}/U/')"
check "chat json usage prompt/completion/total" eq "$(jget g_chat_j 'd["usage"]["prompt_tokens"],d["usage"]["completion_tokens"],d["usage"]["total_tokens"]')" "[12,7,19]"
check "responses stream assembles" eq "$(turn stream responses g_resp_s)" "$TOOLS_TURN"
check "responses stream event order" eq "$(events g_resp_s)" "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.output_item.added response.function_call_arguments.delta response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"
check "responses json assembles" eq "$(turn json responses g_resp_j)" "$TOOLS_TURN"
check "anthropic stream assembles" eq "$(turn stream anthropic g_anth_s)" "$TOOLS_TURN"
check "anthropic stream event order" eq "$(events g_anth_s)" "message_start content_block_start ping content_block_delta content_block_delta content_block_stop content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
check "anthropic json assembles" eq "$(turn json anthropic g_anth_j)" "$TOOLS_TURN"
check "anthropic json tool input is an object" eq "$(jget g_anth_j 'd["content"][1]["input"]')" '{"path":"a.txt"}'

echo "== finish reasons, errors, modifiers"
cat >"$TMP/main.json" <<'EOF'
{"steps":[
 {"reply":{"text":"cut short","finish_reason":"length"}},
 {"reply":{"text":"cut short","finish_reason":"length"}},
 {"reply":{"text":"cut short","finish_reason":"length"}},
 {"reply":{"text":"cut short","finish_reason":"length"}},
 {"reply":{"text":"plain answer"}},
 {"status":429,"headers":{"retry-after":"1"}},
 {"status":429,"headers":{"retry-after":"2"}},
 {"status":529},
 {"status":500},
 {"status":502,"body":"<html>bad gateway</html>","content_type":"text/html"},
 {"status":400,"body":{"error":{"message":"custom","type":"invalid_request_error","param":"messages","code":null}}},
 {"delay":1.0,"reply":{"text":"slow"}},
 {"chunk_delay":0.15,"reply":{"text":"a b c d e"}},
 {"cut_after_events":3,"reply":{"text":"one two three four five"}},
 {"cut_after_events":2,"reply":{"text":"one two three four five"}},
 {"cut_after_events":4,"reply":{"text":"one two three"}},
 {"cut_after_bytes":20,"reply":{"text":"truncated json"}},
 {"raw":"{\"id\": \"chatcmpl-x\", \"choices\": [ garbage"},
 {"raw":"data: {not json}\n\ndata: [DONE]\n\n"},
 {"bad_arguments":true,"reply":{"tool_calls":[{"id":"call_b","name":"read_file","arguments":"{\"path\": \"a.txt\"}"}]}},
 {"bad_arguments":true,"reply":{"tool_calls":[{"id":"toolu_b","name":"read_file","arguments":"{\"path\": \"a.txt\"}"}]}},
 {"bad_arguments":true,"reply":{"tool_calls":[{"id":"toolu_c","name":"read_file","arguments":"{\"path\": \"a.txt\"}"}]}},
 {"stream_error":{"after_events":2},"reply":{"text":"will fail midway"}},
 {"expect":{"path":"/v1/messages","has_header":"x-api-key","header":{"anthropic-version":"2023-06-01"},"stream":true,"model":"claude-x","body_contains":{"max_tokens":64}},"reply":{"text":"expected"}},
 {"expect":{"path":"/v1/messages","has_header":"x-api-key"},"reply":{"text":"never"}},
 {"reply":{"text":"after 100-continue"}},
 {"reply":{"text":"chunked request"}},
 {"reply":{"text":"keep-alive 1"}},
 {"reply":{"text":"keep-alive 2"}},
 {"reply":{"text":"ünïcödé ✓"}}
]}
EOF
start_server "$TMP/main.json"

post len_chat $CHAT '{"stream":true}'
post len_resp $RESP '{"stream":true}'
post len_anth $ANTH '{"stream":true}'
post len_anthj $ANTH '{}'
check "length -> chat finish_reason length" eq "$(turn stream chat len_chat | py 'import json,sys; print(json.load(sys.stdin)["finish_reason"])')" "length"
check "length -> responses response.incomplete (reason max_output_tokens)" eq "$(events len_resp | awk '{print $NF}')" "response.incomplete"
check "length -> responses assembles as length" eq "$(turn stream responses len_resp | py 'import json,sys; print(json.load(sys.stdin)["finish_reason"])')" "length"
check "length -> anthropic stop_reason max_tokens (stream)" contains "$TMP/len_anth.body" '"stop_reason":"max_tokens"'
check "length -> anthropic stop_reason max_tokens (json)" eq "$(jget len_anthj 'd["stop_reason"]')" "max_tokens"
post stop_anth $ANTH '{}'
check "stop -> anthropic end_turn" eq "$(jget stop_anth 'd["stop_reason"]')" "end_turn"

post e429 $CHAT '{}'
check "429 status" eq "$(code e429)" "429"
check "429 retry-after header" eq "$(hdr e429 retry-after)" "1"
check "429 OpenAI error shape" eq "$(jget e429 '[d["error"]["type"], d["error"]["code"], "param" in d["error"], bool(d["error"]["message"])]')" '["requests","rate_limit_exceeded",true,true]'
post e429a $ANTH '{}'
check "429 anthropic: rate_limit_error + retry-after 2" eq "$(code e429a) $(hdr e429a retry-after) $(jget e429a 'd["type"]+"/"+d["error"]["type"]')" "429 2 error/rate_limit_error"
post e529 $ANTH '{"stream":true}'
check "529 anthropic overloaded_error" eq "$(code e529) $(jget e529 'd["error"]["type"]')" "529 overloaded_error"
check "529 has request-id" eq "$(hdr e529 request-id | cut -c1-8)" "req_mock"
post e500 $RESP '{}'
check "500 responses: server_error" eq "$(code e500) $(jget e500 'd["error"]["type"]')" "500 server_error"
post e502 $CHAT '{}'
check "502 raw text body + content_type" eq "$(code e502) $(hdr e502 content-type) $(cat "$TMP/e502.body")" "502 text/html <html>bad gateway</html>"
post e400 $CHAT '{}'
check "400 custom JSON body verbatim" eq "$(jget e400 'd["error"]["param"]')" "messages"

post slow $CHAT '{}'
check "delay 1.0s before the status line" py "import sys; t=float(open('$TMP/slow.info').read().split()[1]); sys.exit(0 if t >= 0.95 else 1)"
post cdelay $ANTH '{"stream":true}'
check "chunk_delay 0.15s between events (>= 1.5s for 11 events)" py "import sys; t=float(open('$TMP/cdelay.info').read().split()[2]); sys.exit(0 if t >= 1.45 else 1)"
check "chunk_delay stream still complete" eq "$(turn stream anthropic cdelay | py 'import json,sys; print(json.load(sys.stdin)["text"])')" "a b c d e"

post cut_anth $ANTH '{"stream":true}'
check "cut_after_events: curl sees a truncated transfer (exit 18)" eq "$(rc cut_anth)" "18"
check "cut_after_events 3: exactly 3 events arrived" eq "$(grep -c '^event: ' "$TMP/cut_anth.body")" "3"
check "cut_after_events: no message_stop" lacks "$TMP/cut_anth.body" "message_stop"
post cut_chat $CHAT '{"stream":true}'
check "cut_after_events on chat: 2 chunks, no [DONE]" eq "$(rc cut_chat) $(grep -c '^data: ' "$TMP/cut_chat.body") $(grep -c DONE "$TMP/cut_chat.body")" "18 2 0"
post cut_resp $RESP '{"stream":true}'
check "cut_after_events on responses: 4 events, no response.completed" eq "$(rc cut_resp) $(grep -c '^event: ' "$TMP/cut_resp.body") $(grep -c response.completed "$TMP/cut_resp.body")" "18 4 0"
post cut_json $CHAT '{}'
check "cut_after_bytes: 20 bytes of a longer JSON body, then close" eq "$(rc cut_json) $(wc -c <"$TMP/cut_json.body")" "18 20"

post raw_json $CHAT '{}'
check "raw: status 200, JSON content type, bytes verbatim" eq "$(code raw_json) $(hdr raw_json content-type) $(cat "$TMP/raw_json.body")" '200 application/json {"id": "chatcmpl-x", "choices": [ garbage'
post raw_sse $CHAT '{"stream":true}'
check "raw on a stream request: SSE content type, bytes verbatim" eq "$(hdr raw_sse content-type)|$(od -An -c "$TMP/raw_sse.body" | tr -s ' \n' ' ')" "text/event-stream; charset=utf-8|$(printf 'data: {not json}\n\ndata: [DONE]\n\n' | od -An -c | tr -s ' \n' ' ')"

post badargs_chat $CHAT '{"stream":true}'
check "bad_arguments (chat stream): assembled arguments are invalid JSON" eq \
    "$(turn stream chat badargs_chat | py 'import json,sys; a=json.load(sys.stdin)["tool_calls"][0]["arguments"]; print(a)')" '{"path": "a.txt"'
post badargs_anth $ANTH '{"stream":true}'
check "bad_arguments (anthropic stream): partial_json concatenates to invalid JSON" eq \
    "$(turn stream anthropic badargs_anth | py 'import json,sys; print(json.load(sys.stdin)["tool_calls"][0]["arguments"])')" '{"path": "a.txt"'
post badargs_anthj $ANTH '{}'
check "bad_arguments (anthropic json): input is the broken string" eq "$(jget badargs_anthj 'd["content"][0]["input"]')" '{"path": "a.txt"'

post serr $ANTH '{"stream":true}'
check "stream_error: anthropic error event after 2 events" eq "$(events serr)" "message_start content_block_start error"
check "stream_error: error payload" contains "$TMP/serr.body" '"error":{"type":"overloaded_error","message":"Overloaded"}'

post exp_ok $ANTH '{"model":"claude-x","stream":true,"max_tokens":64}' -H 'x-api-key: k' -H 'anthropic-version: 2023-06-01'
check "expect: all checks pass -> 200" eq "$(code exp_ok) $(rc exp_ok)" "200 0"
post exp_bad $CHAT '{}' -H 'authorization: Bearer k'
check "expect mismatch -> 400" eq "$(code exp_bad) $(hdr exp_bad x-model-server-error)" "400 expectation-failed"
check "expect mismatch names the path" contains "$TMP/exp_bad.body" "path is '/v1/chat/completions', expected '/v1/messages'"
check "expect mismatch names the header" contains "$TMP/exp_bad.body" "header 'x-api-key' missing"

big=$(py 'import json; print(json.dumps({"messages":[{"role":"user","content":"x"*5000}]}))')
post cont $CHAT "$big" -H 'Expect: 100-continue'
check "Expect: 100-continue answered at once (no 1s curl wait)" py "import sys; i=open('$TMP/cont.info').read().split(); sys.exit(0 if i[0]=='200' and float(i[2]) < 0.9 else 1)"
post chunked $RESP '{"model":"m"}' -H 'Transfer-Encoding: chunked'
check "chunked request body is read" eq "$(code chunked) $(jget chunked 'd["output"][0]["content"][0]["text"]')" "200 chunked request"

curl -sS -o "$TMP/ka.body" -w '%{num_connects}\n' -H 'content-type: application/json' --data-binary '{}' "$URL$CHAT" \
     --next -o "$TMP/ka2.body" -w '%{num_connects}\n' -H 'content-type: application/json' --data-binary '{}' "$URL$ANTH" >"$TMP/ka.info" 2>&1
check "keep-alive: second request reuses the connection" eq "$(tr '\n' ' ' <"$TMP/ka.info")" "1 0 "
check "keep-alive: both answered" eq "$(py 'import json,sys; print(json.load(open(sys.argv[1]))["choices"][0]["message"]["content"], json.load(open(sys.argv[2]))["content"][0]["text"])' "$TMP/ka.body" "$TMP/ka2.body")" "keep-alive 1 keep-alive 2"

post utf8 $ANTH '{"stream":true}'
check "UTF-8 text passes through raw" eq "$(turn stream anthropic utf8 | py 'import json,sys; print(json.load(sys.stdin)["text"])')" "ünïcödé ✓"
check "UTF-8 sent unescaped like the providers" contains "$TMP/utf8.body" "ünïcödé"

post exhausted $CHAT '{}'
check "steps exhausted, no default -> 500" eq "$(code exhausted) $(hdr exhausted x-model-server-error)" "500 scenario-exhausted"
check "exhausted message is clear" contains "$TMP/exhausted.body" "scenario exhausted"

post notjson $CHAT 'this is not json'
check "invalid JSON request -> 400, no step consumed" eq "$(code notjson)" "400"
req wrongm GET $CHAT
check "GET on a model endpoint -> 405" eq "$(code wrongm)" "405"
req nope POST /v1/embeddings -d '{}'
check "unknown path -> 404" eq "$(code nope)" "404"

echo "== startup errors"
echo '{"steps":[{"reply":{"txt":"typo"}}]}' >"$TMP/invalid.json"
python3 "$SERVER" --scenario "$TMP/invalid.json" >"$TMP/inv.out" 2>"$TMP/inv.err"
check "invalid scenario file: exit 2 and a reason" eq "$? $(grep -c "reply has unknown key(s) \['txt'\]" "$TMP/inv.err")" "2 1"

echo "== control endpoints"
req health GET /_health
check "/_health" eq "$(jget health '[d["ok"], d["cursor"], d["steps"]]')" "[true,30,30]"
req reqs GET /_requests
check "/_requests: one entry per non-control request (34)" eq "$(jget reqs 'len(d)')" "34"
check "/_requests: method, path, lower-cased headers, parsed body" eq \
    "$(jget reqs '[e for e in d if e["step"]==23][0]' | py 'import json,sys; e=json.load(sys.stdin); print(e["method"], e["path"], e["headers"]["x-api-key"], e["headers"]["anthropic-version"], e["body"]["max_tokens"], e["body"]["stream"])')" \
    "POST /v1/messages k 2023-06-01 64 True"
check "/_requests: invalid JSON body kept raw" eq "$(jget reqs '[e for e in d if e["body"] is None and e.get("body_raw")][0]["body_raw"]')" "this is not json"
check "/_requests: exhausted request recorded with step null" eq "$(jget reqs '[d[-4]["step"], d[-4]["path"]]')" '[null,"/v1/chat/completions"]'
check "/_requests: 404/405 requests are logged too" eq "$(jget reqs '[d[-2]["method"], d[-1]["path"]]')" '["GET","/v1/embeddings"]'

cat >"$TMP/fix.json" <<'EOF'
{"steps":[
 {"fixture":"openai_chat.json"},
 {"fixture":"openai_chat_stream.sse"},
 {"fixture":"openai_chat_stream_tools.sse"},
 {"fixture":"openai_responses.json"},
 {"fixture":"openai_responses_stream_tools.sse"},
 {"fixture":"anthropic.json"},
 {"fixture":"anthropic_stream.sse"},
 {"fixture":"anthropic_stream_tools.sse", "chunk_delay": 0.01},
 {"fixture":"anthropic_stream_tools.sse", "cut_after_events": 5}
],"default":{"chunk_delay":0.1,"reply":{"text":"default step"}}}
EOF
req setsc POST /_scenario -H 'content-type: application/json' --data-binary @"$TMP/fix.json"
check "POST /_scenario replaces the scenario" eq "$(code setsc) $(jget setsc 'd["steps"]')" "200 9"
req badsc POST /_scenario --data-binary '{"steps":[{"fixture":"no_such_file.json"}]}'
check "POST /_scenario rejects a bad scenario with a reason" eq "$(code badsc) $(jget badsc '"does not exist" in d["error"]')" "400 true"
i=0
for f in openai_chat.json openai_chat_stream.sse openai_chat_stream_tools.sse openai_responses.json \
         openai_responses_stream_tools.sse anthropic.json anthropic_stream.sse anthropic_stream_tools.sse; do
    case $f in openai_chat*) p=$CHAT;; openai_resp*) p=$RESP;; *) p=$ANTH;; esac
    case $f in *.sse) s=true; ct="text/event-stream; charset=utf-8";; *) s=false; ct="application/json";; esac
    post "fx$i" $p "{\"stream\":$s}"
    check "fixture $f served byte for byte ($ct)" eq "$(cmp -s "$FIX/$f" "$TMP/fx$i.body" && echo same) $(hdr fx$i content-type)" "same $ct"
    i=$((i + 1))
done
post fxcut $ANTH '{"stream":true}'
check "fixture + cut_after_events 5: 5 events then a dropped connection" eq "$(rc fxcut) $(grep -c '^event: ' "$TMP/fxcut.body")" "18 5"
post dflt1 $RESP '{}'
post dflt2 $RESP '{}'
check "default step answers once steps run out (repeatedly)" eq "$(jget dflt1 'd["output"][0]["content"][0]["text"]')|$(jget dflt2 'd["output"][0]["content"][0]["text"]')" "default step|default step"
post abort $ANTH '{"stream":true}' --max-time 0.3
check "client abort mid-stream: curl timed out (exit 28)" eq "$(rc abort)" "28"
sleep 0.3
req health3 GET /_health
check "client abort: server healthy, nothing left active" eq "$(code health3) $(jget health3 'd["active"]')" "200 0"
req clr DELETE /_requests
req reqs2 GET /_requests
check "DELETE /_requests clears the log" eq "$(jget reqs2 'len(d)')" "0"
stop_server

echo "== raw byte streams: chunk_bytes, line_endings, end_after_events, recorded/"
cat >"$TMP/bytes.json" <<'EOF'
{"steps":[
 {"fixture":"recorded/anthropic_basic.sse","chunk_bytes":7},
 {"fixture":"recorded/anthropic_basic.sse","chunk_bytes":[1,13]},
 {"fixture":"anthropic_stream.sse","line_endings":"crlf"},
 {"fixture":"anthropic_stream.sse","line_endings":"cr","chunk_bytes":3},
 {"fixture":"recorded/openai_chat_text.sse","end_after_events":16},
 {"reply":{"text":"a b c"},"end_after_events":2,"chunk_bytes":2}
]}
EOF
start_server "$TMP/bytes.json"
post raw7 $ANTH '{"stream":true}' --raw
check "chunk_bytes 7: every HTTP chunk but the last is 7 bytes" eq "$(py '
import sys
b, sizes, i = open(sys.argv[1], "rb").read(), [], 0
while True:
    j = b.index(b"\r\n", i); n = int(b[i:j], 16); sizes.append(n); i = j + 2 + n + 2
    if n == 0: break
print(set(sizes[:-2]), sizes[-1])' "$TMP/raw7.body")" "{7} 0"
post raw113 $ANTH '{"stream":true}'
check "chunk_bytes [1,13]: the body is the fixture, byte for byte" eq "$(cmp -s "$FIX/recorded/anthropic_basic.sse" "$TMP/raw113.body" && echo same)" "same"
post crlf $ANTH '{"stream":true}'
check "line_endings crlf: every LF is CRLF" eq "$(cmp -s <(sed 's/$/\r/' "$FIX/anthropic_stream.sse") "$TMP/crlf.body" && echo same)" "same"
post cr $ANTH '{"stream":true}'
check "line_endings cr: every LF is CR" eq "$(cmp -s <(tr '\n' '\r' <"$FIX/anthropic_stream.sse") "$TMP/cr.body" && echo same)" "same"
post endev $CHAT '{"stream":true}'
check "end_after_events 16: 16 events, then a clean end (curl exit 0)" eq "$(rc endev) $(grep -c '^data: ' "$TMP/endev.body") $(grep -c DONE "$TMP/endev.body")" "0 16 0"
post endrep $CHAT '{"stream":true}'
check "end_after_events on a reply" eq "$(rc endrep) $(grep -c '^data: ' "$TMP/endrep.body")" "0 2"
req badcb POST /_scenario --data-binary '{"steps":[{"reply":{},"chunk_bytes":0}]}'
check "chunk_bytes 0 is refused" eq "$(code badcb) $(jget badcb '"chunk_bytes must be" in d["error"]')" "400 true"
req badle POST /_scenario --data-binary '{"steps":[{"reply":{},"line_endings":"lfcr"}]}'
check "an unknown line_endings is refused" eq "$(code badle) $(jget badle '"line_endings must be" in d["error"]')" "400 true"
req badfx POST /_scenario --data-binary '{"steps":[{"fixture":"../model/anthropic.json"}]}'
check "a fixture path out of the fixtures directory is refused" eq "$(code badfx) $(jget badfx '"fixture must be" in d["error"]')" "400 true"
stop_server

echo "== hold_after_events: a stream held mid-way until its gate opens"
cat >"$TMP/mid.json" <<'EOF'
{"steps":[{"reply":{"text":"one two three four five six"},"fragment_size":4,"hold_after_events":[{"events":3,"gate":"mid"},{"events":5,"gate":"mid2"}]}]}
EOF
start_server "$TMP/mid.json"
held() { curl -s "$URL/_health" | py 'import json,sys; print(json.load(sys.stdin)["held"])'; }
req mid POST /v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}' &
CURL=$!
# held until released, however slow the machine: looked for up to 60 s
for _ in $(seq 1 1200); do [ "$(held)" = 1 ] && [ "$(grep -c '^data: ' "$TMP/mid.body" 2>/dev/null)" = 3 ] && break; sleep 0.05; done
check "held after 3 events: held is 1, the body so far has 3 events" eq \
    "$(held) $(grep -c '^data: ' "$TMP/mid.body")" "1 3"
curl -s -X POST "$URL/_release?gate=mid" >/dev/null
for _ in $(seq 1 1200); do [ "$(held)" = 1 ] && [ "$(grep -c '^data: ' "$TMP/mid.body" 2>/dev/null)" = 5 ] && break; sleep 0.05; done
check "then held again after 5 events (the second gate)" eq "$(held) $(grep -c '^data: ' "$TMP/mid.body")" "1 5"
curl -s -X POST "$URL/_release?gate=mid2" >/dev/null
wait "$CURL"
check "released: the rest follows, and the turn is whole" eq "$(turn stream chat mid | py 'import json,sys; print(json.load(sys.stdin)["text"])')" \
    "one two three four five six"
req midbad POST /_scenario --data-binary '{"steps":[{"reply":{"text":"x"},"hold_after_events":{"events":0,"gate":"g"}}]}'
check "hold_after_events of 0 events is refused" eq "$(code midbad)" "400"
req midbad2 POST /_scenario --data-binary '{"steps":[{"reply":{"text":"x"},"hold_after_events":[{"events":4,"gate":"g"},{"events":2,"gate":"h"}]}]}'
check "holds out of order are refused" eq "$(code midbad2)" "400"
stop_server

if [ "${SKIP_LOAD:-}" != 1 ]; then
    echo "== load: 1,000 concurrent slow streams"
    cat >"$TMP/load.json" <<'EOF'
{"steps":[],"default":{"chunk_delay":0.2,"reply":{"text":"one two three four five six seven eight","tool_calls":[{"name":"read_file","arguments":{"path":"a.txt"}}]}}}
EOF
    start_server "$TMP/load.json"
    if python3 "$HERE/loadtest.py" --port "$PORT" --n 1000 --timeout 120 >"$TMP/load.out" 2>&1; then
        ok "$(cat "$TMP/load.out")"
    else
        bad "load test"; sed 's/^/     /' "$TMP/load.out"
    fi
    req health2 GET /_health
    check "server still healthy after the load" eq "$(code health2) $(jget health2 'd["served"]')" "200 1000"
    stop_server
fi

if [ -s "$TMP/server.err" ] && grep -q Traceback "$TMP/server.err"; then
    bad "server logged a traceback"; sed 's/^/     /' "$TMP/server.err"
fi
echo "== $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
