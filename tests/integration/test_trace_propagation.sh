#!/usr/bin/env bash
# W3C trace context propagation (docs/tracing.md, Trace context propagation), over real
# HTTP on loopback: a traceparent (and tracestate) on POST /v1/workflows, on
# a webhook delivery and on a signal is recorded in the log (the start's
# WorkflowStarted payload, the signal's signal.sent event); invalid ones are
# ignored and the request succeeds; tracestate is bounded; the same start
# again keeps what was recorded; a child starts in its parent's trace; an
# activity's outgoing requests carry its attempt's traceparent, computed here
# the way engine/base/trace_ids.c does (SHA-256), and only while tracing is
# on; a restart, a replay and a continue-as-new keep the trace; `engine start
# --traceparent` and TRACEPARENT; log lines carry the trace id.
# Workflow: tests/integration/wf/trace_prop.lua.
source "$(dirname "$0")/lib.sh"

TP="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACE="0af7651916cd43dd8448eb211c80319c"
mkdir -p "$T/wf/triggers"
cp "$SRC/tests/integration/wf/trace_prop.lua" "$SRC/tests/integration/wf/trace_prop_acts.lua" "$T/wf/"
export TEST_HOOK_TOKEN="hook-token-$RANDOM$RANDOM"
cat >"$T/wf/triggers/tp.lua" <<'EOF'
return {
  route = "tp",
  verify = { kind = "bearer", secret = "TEST_HOOK_TOKEN" },
  delivery_header = "X-Request-Id",
  map = function(req) return { workflow = "trace_prop.lua", id = "hook-" .. req.delivery, input = {} } end,
}
EOF

# the ids trace_ids.c derives: SHA-256 of its text, cut (never all zero)
derive() { python3 -c 'import hashlib,sys
h = hashlib.sha256(sys.argv[1].encode()).hexdigest()[:int(sys.argv[2])]
print(h if h.strip("0") else h[:-1] + "1")' "$1" "$2"; }
trace_of_wf() { derive "engine trace
$1" 32; }
span_of() { derive "engine span
$1
$2
$3
$4" 16; } # ID RUN SEQ KIND
# started ID FIELD [RUN]: a member of the run's WorkflowStarted payload
started() { engine history "$1" --json ${3:+--run "$3"} | sed -n 1p | jget "payload.$2"; }
# seq_of ID TYPE: the seq of the current run's first event of TYPE
seq_of() { engine history "$1" --json | python3 -c 'import json,sys
print(next(e["seq"] for e in map(json.loads, sys.stdin) if e["type"] == sys.argv[1]))' "$2"; }
# header_of PATH NAME: the header NAME of the request the server got for PATH ("none" without one)
header_of() { requests | python3 -c 'import json,sys
for r in json.load(sys.stdin):
    if r["path"] == sys.argv[1]:
        print(r["headers"].get(sys.argv[2], "none")); break
else: print("no request")' "$1" "$2"; }
# post ID [CURL ARGS...]: POST /v1/workflows for trace_prop.lua with id ID; prints the status
post() { local id="$1"; shift; curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/workflows" "$@" \
  -d "{\"script\":\"trace_prop.lua\",\"id\":\"$id\",\"input\":{}}"; }

echo '{"steps":[]}' >"$T/scenario.json"
start_model_server "$T/scenario.json"
# tracing on: an endpoint where nothing listens (the export fails, propagation does not care)
export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9"
ENGINE_LOG_LEVEL=debug serve_api --workflows "$T/wf" --log-format json
URL="${URL%%\"*}" # the json line's quote and brace after it

# --- a start with a traceparent and a tracestate records both
assert_eq "a start with a traceparent" 201 \
  "$(post s1 -H "traceparent: $TP" -H 'tracestate: congo=t61rcWkgMzE,  rojo=00f067aa0ba902b7 ,')"
assert_eq "its WorkflowStarted records the traceparent" "$TP" "$(started s1 traceparent)"
assert_eq "and the tracestate, without its optional spaces and empty members" "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7" \
  "$(started s1 tracestate)"
assert_eq "a header's name in any case" 201 "$(post s1b -H "TraceParent: $TP")"
assert_eq "is read" "$TP" "$(started s1b traceparent)"
assert_eq "a later version is read and kept as version 00" 201 \
  "$(post s1c -H "traceparent: cc-$TRACE-b7ad6b7169203331-09-more")"
assert_eq "its first four fields" "00-$TRACE-b7ad6b7169203331-01" "$(started s1c traceparent)"
assert_eq "a start without one" 201 "$(post s0)"
assert_eq "records none" "nil" "$(started s0 traceparent)"

# --- invalid traceparents: ignored, the start succeeds with a trace of its own
i=0
while IFS='|' read -r why value; do
  i=$((i + 1))
  assert_eq "$why: the start succeeds" 201 "$(post "bad$i" -H "traceparent: $value" -H 'tracestate: k=v')"
  assert_eq "$why: nothing is recorded (nor its tracestate)" "nil nil" \
    "$(started "bad$i" traceparent) $(started "bad$i" tracestate)"
done <<'EOF'
uppercase hex|00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01
an all-zero trace id|00-00000000000000000000000000000000-b7ad6b7169203331-01
an all-zero parent id|00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01
version ff|ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01
too short|00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01
garbage|hello there
version 00 with more after its flags|00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x
EOF
assert_eq "two traceparent headers: ignored" 201 \
  "$(post bad2tp -H "traceparent: $TP" -H "traceparent: 00-$TRACE-1111111111111111-01")"
assert_eq "nothing recorded" "nil" "$(started bad2tp traceparent)"
assert_contains "an ignored one is logged at debug level, saying why" \
  "POST /v1/workflows: ignored its traceparent: traceparent's trace id is not 32 lowercase hex digits" \
  "$(grep '"level":"debug"' "$T/serve.log")"

# --- tracestate: at most 512 bytes, valid members only; else dropped, the traceparent kept
v250="$(printf 'v%.0s' $(seq 1 250))"
long="a=$v250,b=$v250" # 505 bytes: two members with 250-byte values (a value may have 256)
assert_eq "a 512-byte tracestate" 201 "$(post ts512 -H "traceparent: $TP" -H "tracestate: $long,c=vvvv")"
assert_eq "is kept" 512 "$(started ts512 tracestate | tr -d '\n' | wc -c)"
assert_eq "a 514-byte one" 201 "$(post ts514 -H "traceparent: $TP" -H "tracestate: $long,c=vvvvvv")"
assert_eq "is dropped, the traceparent kept" "$TP nil" "$(started ts514 traceparent) $(started ts514 tracestate)"
assert_contains "saying so at debug level" "dropped its tracestate: tracestate is longer than 512 bytes" \
  "$(grep '"level":"debug"' "$T/serve.log")"
while IFS='|' read -r why value; do
  i=$((i + 1))
  post "ts$i" -H "traceparent: $TP" -H "tracestate: $value" >/dev/null
  assert_eq "tracestate with $why: dropped" "$TP nil" "$(started "ts$i" traceparent) $(started "ts$i" tracestate)"
done <<'EOF'
an uppercase key|Congo=t61rcWkgMzE
no equals sign|congo
a key twice|a=1,a=2
an equals sign in a value|a=b=c
an empty value|a=
a system id too long|t@abcdefghijklmno=1
33 members|a0=1,a1=1,a2=1,a3=1,a4=1,a5=1,a6=1,a7=1,a8=1,a9=1,b0=1,b1=1,b2=1,b3=1,b4=1,b5=1,b6=1,b7=1,b8=1,b9=1,c0=1,c1=1,c2=1,c3=1,c4=1,c5=1,c6=1,c7=1,c8=1,c9=1,d0=1,d1=1,d2=1
EOF
post tsmt -H "traceparent: $TP" -H "tracestate: 7t@sys=a b,z*/_-=1" >/dev/null
assert_eq "multi-tenant keys and inner spaces are valid" "7t@sys=a b,z*/_-=1" "$(started tsmt tracestate)"
post tsmulti -H "traceparent: $TP" -H "tracestate: a=1" -H "tracestate: b=2" >/dev/null
assert_eq "two tracestate headers are one list" "a=1,b=2" "$(started tsmulti tracestate)"

# --- the same start again (idempotent 200) keeps the trace it recorded
assert_eq "the same start with another traceparent" 200 \
  "$(post s1 -H "traceparent: 00-11111111111111111111111111111111-2222222222222222-01")"
assert_eq "keeps the first" "$TP" "$(started s1 traceparent)"
assert_eq "the same start of one that had none" 200 "$(post s0 -H "traceparent: $TP")"
assert_eq "still has none" "nil" "$(started s0 traceparent)"

# --- a webhook delivery's start
code="$(curl -s -o "$T/hook.json" -w '%{http_code}' -X POST "$URL/hooks/tp" -H "Authorization: Bearer $TEST_HOOK_TOKEN" \
  -H 'X-Request-Id: d1' -H "traceparent: $TP" -H 'tracestate: gh=1' -d '{}')"
assert_eq "a webhook delivery with a traceparent starts its workflow" 202 "$code"
wait_true 30 '[ "$(status hook-d1)" == completed ]'
assert_eq "whose start records it" "$TP gh=1" "$(started hook-d1 traceparent) $(started hook-d1 tracestate)"
curl -s -o /dev/null -X POST "$URL/hooks/tp" -H "Authorization: Bearer $TEST_HOOK_TOKEN" -H 'X-Request-Id: d2' \
  -H 'traceparent: nonsense' -d '{}'
wait_true 30 '[ "$(status hook-d2)" == completed ]'
assert_eq "an invalid one is ignored there too" "nil" "$(started hook-d2 traceparent)"

# --- a signal: its signal.sent event records the sender's trace
assert_eq "a start that waits" 201 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/workflows" \
  -d '{"script":"trace_prop.lua","id":"sig1","input":{"wait":true}}')"
wait_status sig1 waiting:signal 30 || fail "sig1 never waited for its signal"
assert_eq "a signal with a traceparent" 200 "$(curl -s -o /dev/null -w '%{http_code}' -X POST \
  "$URL/v1/workflows/sig1/signals/go" -H "traceparent: $TP" -H 'tracestate: s=1' -d '"now"')"
wait_true 30 '[ "$(status sig1)" == completed ]'
sent="$(engine events sig1 --json | grep '"type":"signal.sent"')"
assert_contains "signal.sent records the traceparent" "\"traceparent\":\"$TP\"" "$sent"
assert_contains "and the tracestate" '"tracestate":"s=1"' "$sent"
assert_contains "beside who sent it" '"by":"anonymous","name":"go"' "$sent"

# --- a child starts in its parent's trace, parented by the ChildStarted step's span
curl -s -o /dev/null -X POST "$URL/v1/workflows" -H "traceparent: $TP" -H 'tracestate: p=1' \
  -d '{"script":"trace_prop.lua","id":"par1","input":{"child":true}}'
curl -s -o /dev/null -X POST "$URL/v1/workflows" -d '{"script":"trace_prop.lua","id":"par0","input":{"child":true}}'
wait_status par1 completed 60 || fail "par1 did not complete"
wait_status par0 completed 60 || fail "par0 did not complete"
for p in par1 par0; do
  child="$(engine history "$p" --json | grep '"type":"ChildStarted"' | jget name)"
  seq="$(seq_of "$p" ChildStarted)"
  [ "$p" == par1 ] && t="$TRACE" || t="$(trace_of_wf "$p")"
  assert_eq "$p's child records 00-{parent's trace}-{span of its ChildStarted (seq $seq)}-01" \
    "00-$t-$(span_of "$p" 1 "$seq" child)-01" "$(started "$child" traceparent)"
done
assert_eq "and the parent's tracestate" "p=1" "$(started "$(engine history par1 --json | grep '"type":"ChildStarted"' | jget name)" tracestate)"

# --- an activity's outgoing request carries its attempt's traceparent
curl -s -o /dev/null -X POST "$URL/v1/workflows" -H "traceparent: $TP" -H 'tracestate: a=1' \
  -d "{\"script\":\"trace_prop.lua\",\"id\":\"out1\",\"input\":{\"url\":\"$MURL/out1\",\"flaky\":true,\"wait\":true}}"
wait_status out1 waiting:signal 60 || fail "out1 never waited for its signal"
seq="$(seq_of out1 ActivityScheduled)"
assert_eq "attempt 1: 00-{trace}-{span of attempt 1 of seq $seq}-01" "00-$TRACE-$(span_of out1 1 "$seq" "attempt 1")-01" \
  "$(header_of /out1/trace/first/1 traceparent)"
assert_eq "attempt 2 (a retry): its own span" "00-$TRACE-$(span_of out1 1 "$seq" "attempt 2")-01" \
  "$(header_of /out1/trace/first/2 traceparent)"
assert_eq "with the run's tracestate" "a=1" "$(header_of /out1/trace/first/2 tracestate)"
assert_eq "activity.info() tells it too" "00-$TRACE-$(span_of out1 1 "$seq" "attempt 2")-01" \
  "$(engine history out1 --json | grep '"type":"ActivityCompleted"' | jget payload.traceparent)"
curl -s -o /dev/null -X POST "$URL/v1/workflows" \
  -d "{\"script\":\"trace_prop.lua\",\"id\":\"out0\",\"input\":{\"url\":\"$MURL/out0\"}}"
wait_status out0 completed 60 || fail "out0 did not complete"
assert_eq "a run without a caller's trace: its own" \
  "00-$(trace_of_wf out0)-$(span_of out0 1 "$(seq_of out0 ActivityScheduled)" "attempt 1")-01" \
  "$(header_of /out0/trace/first/1 traceparent)"
assert_eq "and no tracestate" none "$(header_of /out0/trace/first/1 tracestate)"
curl -s -o /dev/null -X POST "$URL/v1/workflows" -H "traceparent: 00-$TRACE-b7ad6b7169203331-00" \
  -d "{\"script\":\"trace_prop.lua\",\"id\":\"out00\",\"input\":{\"url\":\"$MURL/out00\"}}"
wait_status out00 completed 60 || fail "out00 did not complete"
h="$(header_of /out00/trace/first/1 traceparent)"
assert_eq "a caller that does not sample: its flags handed on" "00-$TRACE -00" "${h:0:35} ${h: -3}"
curl -s -o /dev/null -X POST "$URL/v1/workflows" -H "traceparent: $TP" \
  -d "{\"script\":\"trace_prop.lua\",\"id\":\"own1\",\"input\":{\"url\":\"$MURL/own1\",\"own\":\"00-$TRACE-1234567890abcdef-01\"}}"
wait_status own1 completed 60 || fail "own1 did not complete"
assert_eq "a traceparent the script sets is its own (no second one)" "00-$TRACE-1234567890abcdef-01" \
  "$(header_of /own1/trace/first/1 traceparent)"

# --- JSON log lines about a workflow carry its trace id and its run's span
curl -s -o /dev/null -X POST "$URL/v1/workflows" -H "traceparent: $TP" \
  -d '{"script":"trace_prop.lua","id":"log1","input":{"print":"a line to find"}}'
wait_status log1 completed 30 || fail "log1 did not complete"
line="$(grep '"msg":"a line to find"' "$T/serve.log" | sed -n 1p)"
assert_contains "a workflow's print names it" '"workflow":"log1"' "$line"
assert_contains "with its trace id" "\"trace_id\":\"$TRACE\"" "$line"
assert_contains "and its run's span" "\"span_id\":\"$(span_of log1 1 0 run)\"" "$line"

# --- a restart and a replay keep the trace
kill -TERM "$S"
wait_true 30 '! kill -0 "$S" 2>/dev/null'
serve_api --workflows "$T/wf"
curl -s -o /dev/null -X POST "$URL/v1/workflows/out1/signals/go" -d '"go"'
wait_status out1 completed 60 || fail "out1 did not complete after the restart"
seq2="$(engine history out1 --json | grep '"type":"ActivityScheduled"' | tail -1 | jget seq)"
assert_eq "after a restart, the next request is in the recorded trace" \
  "00-$TRACE-$(span_of out1 1 "$seq2" "attempt 1")-01" "$(header_of /out1/trace/second/1 traceparent)"
assert_exit "engine replay replays it" 0 engine replay out1
assert_eq "which leaves the recorded trace as it was" "$TP" "$(started out1 traceparent)"
curl -s -o /dev/null -X POST "$URL/v1/workflows" -H "traceparent: $TP" -H 'tracestate: c=1' \
  -d "{\"script\":\"trace_prop.lua\",\"id\":\"can1\",\"input\":{\"again\":1,\"url\":\"$MURL/can1\"}}"
wait_status can1 completed 60 || fail "can1 did not complete"
assert_eq "a continue-as-new: the next run records the same trace" "$TP c=1" \
  "$(started can1 traceparent 2) $(started can1 tracestate 2)"
assert_eq "its request is in it, its span of run 2" \
  "00-$TRACE-$(span_of can1 2 "$(seq_of can1 ActivityScheduled)" "attempt 1")-01" \
  "$(requests | python3 -c 'import json,sys
print([r["headers"].get("traceparent") for r in json.load(sys.stdin) if r["path"] == "/can1/trace/first/1"][-1])')"

# --- tracing off: no header on outgoing requests
kill -TERM "$S"
wait_true 30 '! kill -0 "$S" 2>/dev/null'
OTEL_EXPORTER_OTLP_ENDPOINT="" serve_api --workflows "$T/wf"
curl -s -o /dev/null -X POST "$URL/v1/workflows" -H "traceparent: $TP" \
  -d "{\"script\":\"trace_prop.lua\",\"id\":\"off1\",\"input\":{\"url\":\"$MURL/off1\"}}"
wait_status off1 completed 60 || fail "off1 did not complete"
assert_eq "with no OTLP endpoint set, requests carry no traceparent" none "$(header_of /off1/trace/first/1 traceparent)"
assert_eq "though the start still records the caller's" "$TP" "$(started off1 traceparent)"
kill -TERM "$S"
wait_true 30 '! kill -0 "$S" 2>/dev/null'
OTEL_PROPAGATORS=baggage serve_api --workflows "$T/wf"
curl -s -o /dev/null -X POST "$URL/v1/workflows" \
  -d "{\"script\":\"trace_prop.lua\",\"id\":\"off2\",\"input\":{\"url\":\"$MURL/off2\"}}"
wait_status off2 completed 60 || fail "off2 did not complete"
assert_eq "nor with OTEL_PROPAGATORS naming no tracecontext" none "$(header_of /off2/trace/first/1 traceparent)"

# --- engine --server URL start --traceparent: sent as the request's headers
OUT="$(engine --server "$URL" start trace_prop.lua --id cli-srv --traceparent "$TP" --tracestate 'x=1' --quiet 2>&1)" ||
  fail "start --server: $OUT"
assert_eq "start --server records the flag's trace" "$TP x=1" "$(started cli-srv traceparent) $(started cli-srv tracestate)"
kill -TERM "$S"
wait_true 30 '! kill -0 "$S" 2>/dev/null'

# --- engine start --traceparent, TRACEPARENT
WF="$T/wf/trace_prop.lua"
while IFS='|' read -r why value; do
  assert_exit "--traceparent with $why is refused" 2 engine start "$WF" --id cli-bad --traceparent "$value"
  assert_contains "saying why" "engine: start: --traceparent: traceparent" "$ERR"
done <<'EOF'
uppercase hex|00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01
an all-zero trace id|00-00000000000000000000000000000000-b7ad6b7169203331-01
garbage|nope
EOF
assert_eq "nothing was started" "" "$(engine list 2>/dev/null | grep cli-bad || true)"
assert_exit "a bad --tracestate is refused" 2 engine start "$WF" --id cli-bad --traceparent "$TP" --tracestate 'A=1'
assert_contains "saying why" "engine: start: --tracestate: tracestate member 'A=1'" "$ERR"
assert_exit "--tracestate alone is refused" 2 engine start "$WF" --id cli-bad --tracestate 'a=1'
assert_exit "a start with --traceparent" 0 engine start "$WF" --id cli1 --traceparent "$TP" --input '{"print":"cli line"}'
assert_eq "records it" "$TP" "$(started cli1 traceparent)"
assert_contains "a text log line carries trace=ID" "[cli1 trace=$TRACE] cli line" "$ERR"
assert_exit "a detached start with --traceparent and --tracestate" 3 engine start "$WF" --id cli2 --detach \
  --traceparent "$TP" --tracestate 'b=2'
assert_eq "records both" "$TP b=2" "$(started cli2 traceparent) $(started cli2 tracestate)"
assert_exit "TRACEPARENT from the environment" 0 env TRACEPARENT="$TP" TRACESTATE="e=1" "$ENGINE" start "$WF" \
  --id cli3 --quiet
assert_eq "is recorded, with TRACESTATE" "$TP e=1" "$(started cli3 traceparent) $(started cli3 tracestate)"
assert_exit "the flag wins over the environment" 0 env TRACEPARENT="00-$TRACE-1111111111111111-01" "$ENGINE" start "$WF" \
  --id cli4 --quiet --traceparent "$TP"
assert_eq "its traceparent is recorded" "$TP nil" "$(started cli4 traceparent) $(started cli4 tracestate)"
assert_exit "an invalid TRACEPARENT does not stop the start" 0 env TRACEPARENT=garbage "$ENGINE" start "$WF" --id cli5 --quiet
assert_contains "it is ignored with a warning" "engine: warning: TRACEPARENT is ignored: traceparent is not" "$ERR"
assert_eq "and nothing is recorded" "nil" "$(started cli5 traceparent)"
assert_exit "the same start again with another traceparent" 0 engine start "$WF" --id cli1 --quiet \
  --traceparent "00-11111111111111111111111111111111-2222222222222222-01"
assert_eq "keeps the first" "$TP" "$(started cli1 traceparent)"
finish
