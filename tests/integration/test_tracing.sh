#!/usr/bin/env bash
# Tracing's wiring into the engine (docs/tracing.md; the exporter itself is
# unit_otel_export's): a bad OTEL_* variable stops `engine start` and
# `engine serve` with exit 2 and the variable named, before anything is
# written; the configuration file's otel_* keys set the standard variables
# and the environment wins; /metrics has the exporter's families while
# tracing is on (read by the Prometheus client's parser) and none while it
# is off; a collector that never answers holds up no workflow, its spans
# past the queue's bound are dropped and counted, and the serve still stops.
source "$(dirname "$0")/lib.sh"
cd "$T"
printf 'return function(input) return input end\n' >"$T/echo.lua"
for v in $(env | sed -n 's/^\(OTEL_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
SINK=http://127.0.0.1:9 # nothing answers: no span is produced by these runs anyway

# --- a bad variable: refused at start, exit 2, nothing written
while IFS='|' read -r var value want; do
  [ -n "$var" ] || continue
  rm -f "$T/bad.db"
  env OTEL_EXPORTER_OTLP_ENDPOINT="$SINK" "$var=$value" "$ENGINE" start "$T/echo.lua" --db "$T/bad.db" >/dev/null \
    2>"$T/stderr" && rc=0 || rc=$?
  assert_eq "start refuses $var=$value" 2 "$rc"
  assert_contains "names it" "$want" "$(cat "$T/stderr")"
  [ -e "$T/bad.db" ] && fail "a refused start still wrote $T/bad.db"
  env OTEL_EXPORTER_OTLP_ENDPOINT="$SINK" "$var=$value" "$ENGINE" serve --db "$T/bad.db" >/dev/null 2>"$T/stderr" \
    && rc=0 || rc=$?
  assert_eq "serve refuses $var=$value" 2 "$rc"
  assert_contains "names it" "$want" "$(cat "$T/stderr")"
  [ -e "$T/bad.db" ] && fail "a refused serve still wrote $T/bad.db"
done <<'ROWS'
OTEL_EXPORTER_OTLP_ENDPOINT|localhost:4318|OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL, not "localhost:4318"
OTEL_TRACES_SAMPLER|sometimes|OTEL_TRACES_SAMPLER must be one of always_on
OTEL_BSP_MAX_QUEUE_SIZE|lots|OTEL_BSP_MAX_QUEUE_SIZE must be a whole number from 1 to 1000000, not "lots"
OTEL_EXPORTER_OTLP_PROTOCOL|grpc|OTLP over HTTP in JSON only
OTEL_EXPORTER_OTLP_HEADERS|Authorization Bearer s3cret|OTEL_EXPORTER_OTLP_HEADERS: member 1 has no '='
ROWS
[[ "$(cat "$T/stderr")" == *s3cret* ]] && fail "a header's value is shown in the error"
# with --server the start runs elsewhere: the variables are not this process's business
env OTEL_TRACES_SAMPLER=sometimes OTEL_EXPORTER_OTLP_ENDPOINT="$SINK" "$ENGINE" --server http://127.0.0.1:9 start \
  "$T/echo.lua" >/dev/null 2>"$T/stderr" || true
[[ "$(cat "$T/stderr")" == *OTEL_TRACES_SAMPLER* ]] && fail "start --server read the OTEL_* variables"
# engine test runs no exporter: its spans would be of stubs in virtual time
cat >"$T/echo_test.lua" <<'LUA'
local t = require "enginetest"
t.case("echo", function()
  local run = t.start("echo.lua", { x = 1 })
  t.assert_eq(run:status(), "completed")
  t.assert_eq(run:result().x, 1)
end)
LUA
# (a bad variable does not stop it either: nothing reads them there)
OTEL_EXPORTER_OTLP_ENDPOINT="$SINK" OTEL_BSP_MAX_QUEUE_SIZE=lots \
  assert_exit "engine test ignores the OTEL_* variables" 0 engine test "$T/echo_test.lua"

# --- the configuration file's keys are the standard variables
CONF="$T/engine.conf"
cat >"$CONF" <<CONF
otel_exporter_otlp_endpoint = "$SINK"
otel_exporter_otlp_headers = "x-api-key=s3cret"
otel_traces_sampler = "TraceIdRatio"
otel_traces_sampler_arg = "0.5"
otel_bsp_max_queue_size = 100
CONF
J="$(engine --config "$CONF" config --json)"
src() { K="$1" lua5.4 -e 'local c=require"cjson"; local j=c.decode(io.read("a")); for _,s in ipairs(j.settings) do if s.key==os.getenv("K") then io.write(s.env, "|", s.source, "|", s.value == c.null and "nil" or s.value) end end' <<<"$J"; }
assert_eq "the endpoint from the file" "OTEL_EXPORTER_OTLP_ENDPOINT|$CONF:1|$SINK" "$(src otel_exporter_otlp_endpoint)"
assert_eq "headers are a secret" "OTEL_EXPORTER_OTLP_HEADERS|$CONF:2|(set)" "$(src otel_exporter_otlp_headers)"
assert_eq "a sampler in its own spelling" "OTEL_TRACES_SAMPLER|$CONF:3|traceidratio" "$(src otel_traces_sampler)"
J="$(OTEL_BSP_MAX_QUEUE_SIZE=7 engine --config "$CONF" config --json)"
assert_eq "the environment over the file" "OTEL_BSP_MAX_QUEUE_SIZE|environment (over the file)|7" "$(src otel_bsp_max_queue_size)"
printf 'otel_bsp_max_queue_size = 0\n' >"$CONF"
assert_exit "a key out of range in the file" 2 engine --config "$CONF" start "$T/echo.lua" --db "$T/bad.db"
assert_contains "names the line and key" "engine.conf:1: otel_bsp_max_queue_size = 0 is out of range (1 to 1000000)" "$ERR"
printf 'otel_exporter_otlp_endpoint = "%s"\notel_bsp_max_export_batch_size = 500\notel_bsp_max_queue_size = 100\n' "$SINK" >"$CONF"
assert_exit "the file's values are checked together at start" 2 engine --config "$CONF" start "$T/echo.lua" --db "$T/bad.db"
assert_contains "as the variables" "OTEL_BSP_MAX_EXPORT_BATCH_SIZE (500) must not be more than OTEL_BSP_MAX_QUEUE_SIZE (100)" "$ERR"

# --- a run with tracing on: done, it ends at once (the stop's flush has
# nothing to wait for). The exporter's schedule is a minute here, so a stop
# that waited for it would take a minute: the bound (20 s) is that wait's
# absence, far from how fast a busy machine starts
t0="$(now_ms)"
OTEL_BSP_SCHEDULE_DELAY=60000 OTEL_EXPORTER_OTLP_ENDPOINT="$SINK" assert_exit "start with tracing on" 0 \
  engine start "$T/echo.lua" --input '{"a":1}' --quiet
took=$(( $(now_ms) - t0 ))
[ "$took" -lt "$(( $(scaled 20) * 1000 ))" ] || fail "a traced start took ${took} ms: its stop waited for the exporter's schedule"

# --- /metrics: the exporter's families while tracing is on, none while off
metric_families() {
  curl -sf "$URL/metrics" | python3 -c '
import sys
from prometheus_client.parser import text_string_to_metric_families
for f in text_string_to_metric_families(sys.stdin.read()):
    if f.name.startswith("engine_otel_"):
        for s in f.samples:
            print(f.type, s.name, ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())), s.value)'
}
OTEL_EXPORTER_OTLP_ENDPOINT="$SINK" serve_api --db "$T/m.db"
got="$(metric_families | sort)"
want="counter engine_otel_exports_total result=failed 0.0
counter engine_otel_exports_total result=ok 0.0
counter engine_otel_exports_total result=retry 0.0
counter engine_otel_spans_total outcome=dropped_export 0.0
counter engine_otel_spans_total outcome=dropped_invalid 0.0
counter engine_otel_spans_total outcome=dropped_queue_full 0.0
counter engine_otel_spans_total outcome=exported 0.0
counter engine_otel_spans_total outcome=rejected 0.0
gauge engine_otel_queue_spans  0.0"
assert_eq "/metrics with tracing on (Prometheus' parser)" "$want" "$got"
kill -TERM "$S"
wait_for 60 "serve with tracing on to stop" '! kill -0 "$S" 2>/dev/null' || true
wait "$S" 2>/dev/null && rc=0 || rc=$?
assert_eq "serve with tracing on stops cleanly" 0 "$rc"
serve_api --db "$T/m2.db"
assert_eq "/metrics with tracing off has no engine_otel_*" "" "$(metric_families)"
kill -TERM "$S"
wait "$S" 2>/dev/null || true

# --- a collector that takes every request and never answers: the workflows
# run on, the queue stays at its bound, the spans past it are dropped and
# counted, and the serve still stops (its flush bounded)
python3 "$SRC/tests/otel/receiver.py" --port-file "$T/hang.port" --script '{"hang": true, "count": -1}' \
  2>"$T/hang.err" &
PIDS+=($!)
wait_for 30 "the hanging collector's port" '[ -s "$T/hang.port" ]' 'cat "$T/hang.err"' || true
OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$(cat "$T/hang.port")" OTEL_BSP_MAX_QUEUE_SIZE=4 \
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE=2 OTEL_BSP_SCHEDULE_DELAY=10 serve_api --db "$T/h.db"
for i in $(seq 10); do
  engine start "$SRC/tests/integration/wf/otel_describe.lua" --db "$T/h.db" --id "h$i" --detach --input '{"succeed_on":1}' \
    >/dev/null 2>>"$T/h.err" || true # (3: started, not ended yet)
done
wait_for 120 "the 10 workflows to complete beside a collector that never answers" \
  '[ "$(sqlite3 "$T/h.db" "SELECT count(*) FROM workflows WHERE status='\''completed'\''")" = 10 ]' \
  'sqlite3 "$T/h.db" "SELECT id, status FROM workflows"' || true
m="$(metric_families)"
dropped="$(awk '$2 == "engine_otel_spans_total" && $3 == "outcome=dropped_queue_full" { print int($4) }' <<<"$m")"
queued="$(awk '$2 == "engine_otel_queue_spans" { print int($4) }' <<<"$m")"
[ "${dropped:-0}" -gt 0 ] && pass "the spans past the queue's bound are dropped and counted ($dropped)" ||
  fail "no span counted as dropped: $m"
[ "${queued:-99}" -le 4 ] && pass "the queue stays at its bound ($queued of 4)" || fail "the queue holds $queued spans (bound 4)"
kill -TERM "$S"
wait_for 60 "serve beside a hanging collector to stop" '! kill -0 "$S" 2>/dev/null' || true
wait "$S" 2>/dev/null && rc=0 || rc=$?
assert_eq "serve beside a hanging collector stops cleanly (its flush bounded)" 0 "$rc"
finish
