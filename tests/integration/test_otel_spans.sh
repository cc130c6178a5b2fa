#!/usr/bin/env bash
# Spans (issue 35): one OTLP span per recorded step, exported once its
# outcome is committed and never for a replayed step; ids from the log, so
# no span id is exported twice whatever replays, restarts or kills happen.
#   1. an activity that fails twice, then succeeds: three attempt spans (the
#      failures with error.type and the retry) under the run's span; then
#      `engine replay` exports nothing
#   2. what the workflow (wf.span, the option span_attributes) and the
#      activity (activity.span) say of their spans; tracing off: nothing,
#      and the activity is told so (activity.traced())
#   3. `engine serve` stopped and started again mid-workflow, an approval
#      answered after: each step's span once, the approval's from its wait
#   4. kill -9 while an attempt runs: the attempt cut short has no span; the
#      one that ran after it (attempt 2) has
#   5. on PostgreSQL (the pg flavour), two workers and a workflow waiting for
#      its approval: one worker is killed, the other ends the workflow
# The spans are read from one file, one span's JSON per line, written by
# the tests' OTLP/HTTP receiver (tests/otel/receiver.py --spans-out) that
# OTEL_EXPORTER_OTLP_ENDPOINT names; each command ends (a serve is stopped)
# before its spans are read, and a stop sends what is queued. The end-to-end
# test with the PR-review example and a real collector is another test's.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf"
export TEST_SIDE_EFFECTS="$T/effects"
SPANS="$T/spans.jsonl"
python3 "$SRC/tests/otel/receiver.py" --spans-out "$SPANS" --port-file "$T/sink.port" 2>"$T/sink.err" &
PIDS+=($!)
wait_true 30 '[ -s "$T/sink.port" ]' 'cat "$T/sink.err"'
export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$(cat "$T/sink.port")" OTEL_BSP_SCHEDULE_DELAY=50

# spans ID: one line per span of workflow ID, in export order:
#   NAME kind=K attempt=N parent=run|ID|- error=TYPE|- retry=true|false|- [KEY=VALUE of the test.* attributes]
spans() {
  python3 - "$SPANS" "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def attrs(s): return {a["key"]: list(a["value"].values())[0] for a in s["attributes"]}
runs = {s["spanId"] for s in rows if attrs(s).get("engine.step.seq") is None}
for s in rows:
    a = attrs(s)
    if a.get("engine.workflow.id") != sys.argv[2]: continue
    p = s.get("parentSpanId")
    parent = "-" if not p else ("run" if p in runs else p)
    extra = " ".join(f"{k}={v}" for k, v in sorted(a.items()) if k.startswith("test.") or k.startswith("engine.approval.o"))
    print(f'{s["name"]} kind={s["kind"]} attempt={a.get("engine.activity.attempt", "-")} parent={parent} '
          f'error={a.get("error.type", "-")} retry={str(a.get("engine.activity.retry_scheduled", "-")).lower()}'
          + (" " + extra if extra else ""))
PY
}
# dup_ids: the span ids exported more than once (none, ever)
dup_ids() { [ -s "$SPANS" ] || return 0; python3 -c '
import json, sys, collections
c = collections.Counter(json.loads(l)["spanId"] for l in open(sys.argv[1]) if l.strip())
print(" ".join(k for k, n in c.items() if n > 1))' "$SPANS"; }
# trace_ids ID: the distinct trace ids of workflow ID's spans
trace_ids() { python3 -c '
import json, sys
print(" ".join(sorted({s["traceId"] for s in map(json.loads, open(sys.argv[1])) if any(a["key"] == "engine.workflow.id" and a["value"]["stringValue"] == sys.argv[2] for a in s["attributes"])})))' "$SPANS" "$1"; }
lines() { [ -f "$SPANS" ] && wc -l <"$SPANS" || echo 0; }

# ---------------------------------------------------------------- 1 ---
engine start "$WF/retry.lua" --id flaky --quiet \
  --input '{"activity":"acts.flaky","args":{"succeed_on":3},"options":{"retry":{"initial_interval":0.01}}}' >/dev/null
assert_eq "a failing, then succeeding activity: an attempt span each, then the run's" \
  "acts.flaky kind=1 attempt=1 parent=run error=Flaky retry=true
acts.flaky kind=1 attempt=2 parent=run error=Flaky retry=true
acts.flaky kind=1 attempt=3 parent=run error=- retry=-
invoke_workflow retry kind=1 attempt=- parent=- error=- retry=-" "$(spans flaky)"
assert_eq "one trace for the run, its id the workflow's" 1 "$(trace_ids flaky | wc -w)"
assert_contains "a failed attempt's span has the error's status" '"status":{"code":2,"message":"attempt 1 fails"}' \
  "$(head -1 "$SPANS")"
before="$(lines)"
assert_exit "engine replay replays the run" 0 engine replay flaky
assert_eq "a replay exports no span" "$before" "$(lines)"

# ---------------------------------------------------------------- 2 ---
out="$(engine start "$WF/otel_describe.lua" --id described --quiet --input '{"succeed_on":2}')"
assert_contains "the activity is told its span is exported" '"traced":true' "$out"
assert_eq "the spans as the workflow and the activity describe them" \
  "described kind=3 attempt=1 parent=run error=- retry=- test.count=7 test.who=the activity test.workflow=yes
acts.flaky kind=1 attempt=1 parent=run error=Flaky retry=true
acts.flaky kind=1 attempt=2 parent=run error=- retry=-
invoke_agent tester kind=1 attempt=- parent=- error=- retry=-" "$(spans described)"
before="$(lines)"
out="$(OTEL_EXPORTER_OTLP_ENDPOINT= engine start "$WF/otel_describe.lua" --id untraced --quiet --input '{"succeed_on":1}')"
assert_contains "tracing off: the activity is told so" '"traced":false' "$out"
assert_eq "tracing off: no span" "$before" "$(lines)"

# ---------------------------------------------------------------- 3 ---
engine start "$WF/otel_describe.lua" --id restarted --detach --input '{"succeed_on":2,"approval":"r1"}' \
  >/dev/null 2>&1 || true
bg S engine serve
wait_status restarted waiting:approval 60 || fail "restarted: never waited for its approval"
kill "$S"; wait "$S" 2>/dev/null || true # a graceful stop mid-workflow
bg S engine serve
assert_exit "the approval is answered" 0 approve_pending restarted --reason fine
wait_status restarted completed 60 || fail "restarted: not completed after the approval"
kill "$S"; wait "$S" 2>/dev/null || true
bg S engine serve # once more: a completed workflow is not replayed into spans
sleep 0.5 # the serve's start-up sweep, nothing for it to do; no state to wait for
kill "$S"; wait "$S" 2>/dev/null || true
assert_eq "a restart mid-workflow: each step's span once, the approval's from its wait" \
  "described kind=3 attempt=1 parent=run error=- retry=- test.count=7 test.who=the activity test.workflow=yes
acts.flaky kind=1 attempt=1 parent=run error=Flaky retry=true
acts.flaky kind=1 attempt=2 parent=run error=- retry=-
await_approval kind=1 attempt=- parent=run error=- retry=- engine.approval.outcome=approved
invoke_agent tester kind=1 attempt=- parent=- error=- retry=-" "$(spans restarted)"
before="$(lines)"
assert_exit "engine replay after the restarts" 0 engine replay restarted
assert_eq "and it exports nothing" "$before" "$(lines)"

# ---------------------------------------------------------------- 4 ---
engine start "$WF/otel_describe.lua" --id killed --detach --input "{\"succeed_on\":1,\"gate\":\"$T/gate\"}" \
  >/dev/null 2>&1 || true
bg S engine serve
# the gated attempt runs, and its lease (the task row saying the next attempt is 2) is committed;
# the steps before it were exported (a span leaves after its batch's commit, and a kill -9 before
# the exporter sent it would lose it: exported at most once)
wait_true 60 '[ "$(sql "SELECT attempt FROM tasks WHERE wf_id='"'killed'"' AND kind='"'activity'"' AND lease_owner IS NOT NULL")" == 2 ] && grep -q "^killed/.* window-start 1$" "$T/effects" && [ "$(spans killed | grep -c -E "^(described|acts.flaky) ")" == 2 ]'
kill -9 "$S"; wait "$S" 2>/dev/null || true
bg S engine serve
wait_true 60 'grep -q "^killed/.* window-start 2$" "$T/effects"'
touch "$T/gate"
wait_status killed completed 60 || fail "killed: not completed after the restart"
kill "$S"; wait "$S" 2>/dev/null || true
assert_eq "kill -9 mid-attempt: the attempt cut short has no span, the one after it has" \
  "described kind=3 attempt=1 parent=run error=- retry=- test.count=7 test.who=the activity test.workflow=yes
acts.flaky kind=1 attempt=1 parent=run error=- retry=-
acts.window kind=1 attempt=2 parent=run error=- retry=-
invoke_agent tester kind=1 attempt=- parent=- error=- retry=-" "$(spans killed)"

# ---------------------------------------------------------------- 5 ---
# PostgreSQL: two workers share the workflow; one is killed while it waits
# for its approval, the other takes it up when the answer comes
if on_postgres; then
  bg S1 engine serve
  bg S2 engine serve
  engine start "$WF/otel_describe.lua" --id taken --detach --input '{"succeed_on":2,"approval":"t1"}' \
    >/dev/null 2>&1 || true
  wait_status taken waiting:approval 60 || fail "taken: never waited for its approval"
  kill -9 "$S1"; wait "$S1" 2>/dev/null || true
  assert_exit "the approval is answered with one worker left" 0 approve_pending taken --reason fine
  wait_status taken completed 60 || fail "taken: the other worker did not end it"
  kill "$S2"; wait "$S2" 2>/dev/null || true
  assert_eq "another worker took it over: each step's span once" \
    "described kind=3 attempt=1 parent=run error=- retry=- test.count=7 test.who=the activity test.workflow=yes
acts.flaky kind=1 attempt=1 parent=run error=Flaky retry=true
acts.flaky kind=1 attempt=2 parent=run error=- retry=-
await_approval kind=1 attempt=- parent=run error=- retry=- engine.approval.outcome=approved
invoke_agent tester kind=1 attempt=- parent=- error=- retry=-" "$(spans taken)"
fi

assert_eq "no span id was exported twice" "" "$(dup_ids)"
finish
