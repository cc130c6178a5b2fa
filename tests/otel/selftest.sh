#!/usr/bin/env bash
# The tracing tests' harness, tested on its own, with no engine (ctest
# otel_harness, label script): the receiver's behaviours (test_receiver.py),
# check_trace.py against good and broken traces (test_check_trace.py), and
# decode.mjs on what the receiver stored when curl posted our fixtures: the
# one shaped like the OTLP spec's example (fixtures/trace_minimal.json) and an
# agent trace (fixtures/trace_agent.json, gzipped) pass; each broken copy of
# fixtures/bad_payloads.json is stored by the lenient receiver and rejected by
# decode.mjs with a message naming its fault.
#
#   bash tests/otel/selftest.sh
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
T="$(mktemp -d "${TMPDIR:-/tmp}/otel-selftest.XXXXXX")"
source "$HERE/../debian_python.sh"
use_debian_python "$T/.bin"
SCALE="${TEST_TIMEOUT_SCALE:-1}"
PASS=0 FAIL=0 RPID=""
ok() { PASS=$((PASS + 1)); echo "ok - $1"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL: $1"; }
cleanup() {
  [ -n "$RPID" ] && kill "$RPID" 2>/dev/null && wait "$RPID" 2>/dev/null
  if [ "$FAIL" -eq 0 ]; then rm -rf "$T"; else echo "(files kept in $T)"; fi
}
trap cleanup EXIT
finish() { echo "$PASS passed, $FAIL failed"; [ "$FAIL" -eq 0 ]; exit; }

# node and the pinned packages (tests/otel/node_deps.sh)
source "$HERE/node_deps.sh"
why="$(otel_node_deps)" || { bad "$why"; finish; }

# ---- the Python pieces' own tests
for t in test_receiver.py test_check_trace.py; do
  if python3 "$HERE/$t" >"$T/$t.log" 2>&1; then ok "$t ($(grep -o 'Ran [0-9]* tests' "$T/$t.log"))"
  else bad "$t:"; tail -n 30 "$T/$t.log" | sed 's/^/  /'; fi
done

# ---- the receiver, fed by curl, judged by decode.mjs
OUT="$T/received.jsonl"
python3 "$HERE/receiver.py" --port 0 --port-file "$T/port" --out "$OUT" 2>"$T/receiver.log" &
RPID=$!
end=$((SECONDS + 30 * SCALE))
until [ -s "$T/port" ] || [ "$SECONDS" -ge "$end" ] || ! kill -0 "$RPID" 2>/dev/null; do sleep 0.05; done
[ -s "$T/port" ] || { bad "the receiver did not start: $(cat "$T/receiver.log")"; finish; }
URL="http://127.0.0.1:$(cat "$T/port")"
# post FILE [curl args...]: prints the HTTP status, then the answer's body
post() { local f="$1"; shift; curl -s -w '\n%{http_code}' -X POST -H 'Content-Type: application/json' "$@" --data-binary @"$f" "$URL/v1/traces"; }
stored() { curl -s "$URL/_health" | python3 -c 'import json,sys; print(json.load(sys.stdin)["stored"])'; }

r="$(post "$HERE/fixtures/trace_minimal.json")"
[ "$(tail -n 1 <<<"$r")" == 200 ] && [ "$(head -n 1 <<<"$r")" == '{"partialSuccess":{}}' ] &&
  ok "the spec example's shape is answered 200 {\"partialSuccess\":{}}" || bad "posting trace_minimal.json: $r"
gzip -c "$HERE/fixtures/trace_agent.json" >"$T/agent.json.gz"
r="$(post "$T/agent.json.gz" -H 'Content-Encoding: gzip')"
[ "$(tail -n 1 <<<"$r")" == 200 ] && ok "a gzipped request is answered 200" || bad "posting trace_agent.json gzipped: $r"
if node "$HERE/decode.mjs" "$OUT" >"$T/decode.out" 2>&1 && [ "$(grep -c ': ok (' "$T/decode.out")" == 2 ]; then
  ok "decode.mjs: both stored requests are valid ExportTraceServiceRequests"
else
  bad "decode.mjs on the good requests:"; sed 's/^/  /' "$T/decode.out"
fi
grep -q "request seq 2: ok (1 resource(s), 5 span(s)" "$T/decode.out" && ok "decode.mjs read the unzipped agent trace: 5 spans" ||
  bad "decode.mjs did not report the agent trace's 5 spans: $(cat "$T/decode.out")"

# each broken payload: stored by the receiver (a collector is lenient), rejected by decode.mjs
python3 "$HERE/bad_payloads.py" "$T/bad" >"$T/bad.list" || { bad "bad_payloads.py"; finish; }
ncases=0
while IFS=$'\t' read -r n name; do
  ncases=$((ncases + 1))
  r="$(post "$T/bad/$n.json")"
  [ "$(tail -n 1 <<<"$r")" == 200 ] || { bad "the receiver refused broken payload '$name': $r"; continue; }
  seq="$(stored)"
  out="$(node "$HERE/decode.mjs" --seq "$seq" "$OUT" 2>&1)"
  rc=$?
  missing=""
  while IFS= read -r frag; do [[ "$out" == *"$frag"* ]] || missing="$missing [$frag]"; done <"$T/bad/$n.expect"
  if [ "$rc" -eq 1 ] && [ -z "$missing" ]; then ok "decode.mjs rejects $name: $(sed -n 2p <<<"$out" | cut -c5-)"
  else bad "decode.mjs on $name: exit $rc, wanted 1; missing$missing in:"; sed 's/^/  /' <<<"$out"; fi
done <"$T/bad.list"
[ "$ncases" -ge 5 ] || bad "only $ncases broken payloads in fixtures/bad_payloads.json"
out="$(node "$HERE/decode.mjs" --quiet "$OUT" 2>&1)"
[ $? -eq 1 ] && [ "$(grep -c 'INVALID' <<<"$out")" == "$ncases" ] &&
  ok "decode.mjs on the whole file: exit 1, the $ncases broken requests named, the 2 good ones not" ||
  bad "decode.mjs on the whole file: $out"
node "$HERE/decode.mjs" "$T/nothing.jsonl" >/dev/null 2>&1
[ $? -eq 2 ] && ok "decode.mjs on a missing file: exit 2" || bad "decode.mjs on a missing file: not exit 2"
: >"$T/empty.jsonl"
node "$HERE/decode.mjs" "$T/empty.jsonl" >/dev/null 2>&1
[ $? -eq 1 ] && ok "decode.mjs on no requests at all: exit 1 (nothing proven)" || bad "decode.mjs on an empty file: not exit 1"
finish
