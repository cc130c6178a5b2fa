#!/usr/bin/env bash
# Property: a run replays to what it did. Every test workflow in
# tests/integration/wf/ that ends without outside services (and
# workflows/hello.lua) runs live under `engine serve`; then `engine replay ID`,
# a fresh process, replays its whole history against its pinned code: it must
# issue every command the log holds (kind, name and argument hash, in order)
# and return the result the run returned (or fail as the run failed). A new
# workflow file must be listed here, with an input or a reason to skip it.
# Two negative controls show the check can fail: nondet.lua issues another
# command on replay, replay_result.lua returns another result.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf"
export TEST_SIDE_EFFECTS="$T/effects" HELLO_SIDE_EFFECTS="$T/hello-effects"

declare -A INPUT=(
  [tiny]='{"x":[1,2,{"y":"z"}],"s":"t"}'
  [counter]='{"n":0,"to":2}'
  [fork_cas]='{"to":1,"wait":0.05}'
  [retry]='{"activity":"acts.flaky","args":{"succeed_on":2},"options":{"retry":{"initial_interval":0.01}}}'
  [hostile_text]='{}'
  [nondet_fixed]='{}'
  [cancel_activity]='{}'
  [model_call]="{\"model\":{\"name\":\"replay:$SRC/tests/fixtures/replay/two_turns.jsonl\"}}"
  [strict_error]='{}'
  [budget]='{"rounds":4,"loop":1000}'
  [random_draws]='{}'
  [idem]='{}'
  [det_probe]='{}'
  [stale_retry]='{"interval":0.05}'
  [stale_signal]='{"timeout":0.05,"seconds":0.05}'
  [approvals]='{"requests":[{"id":"a","tool":"shell","timeout":0.05},{"id":"b","tool":"shell","timeout":0.05}]}'
  [store_faults]='{"retry":0.01,"sleep":0,"slow":0.01}'
  [numbers]='{"case":"activity","activity":"numbers_acts.ok"}'
  [json_meaning]='{"text":"{\"int\":3,\"big\":9007199254740993}"}'
  [many_events]='{"n":30}'
  [findings_text]='{}'
  [nondet]='{}'
  [replay_result]='{}'
  [limits_defaults]='{}'
  [futures]='{"mode":"spawn"}'
  [slots]='{"key":"det","limit":1,"hold":0.05,"rate":{"limit":5,"per":1},"pause":0.01,"release":true}'
  [sched_sleep]='{"seconds":0.05}'
  [migrate_mix]='{"i":1}'
  [chain10]='{"steps":3}'
  [timer_steps]='{"steps":2,"pause":0.01}'
  [due_together]='{"seconds":0.05,"k":1}'
  [child_parent]='{"mode":"all3"}'
  [child_worker]='{"n":1}'
  [child_nondet]='{}'
  [child_none]='{}'
  [child_chain]='{"to":2}'
  [trace_prop]='{"child":true,"print":"a line","again":1}'
  [otel_describe]='{"succeed_on":2}'
)
declare -A SKIP=(
  [acts]="activity module" [det_acts]="activity module" [hostile_text_acts]="activity module"
  [http_window_acts]="activity module" [timeout_acts]="activity module" [numbers_acts]="activity module"
  [json_meaning_acts]="activity module" [live_text_acts]="activity module" [durable_acts]="activity module"
  [trace_prop_acts]="activity module"
  [durable_steps]="its steps read the log through a query the test gives them (test_durable_steps.sh)"
  [live_text]="waits for a signal, then streams live text (test_cli_server.sh)"
  [transcript]="waits for an approval (test_terminal_progress.sh)"
  [sse_emitter]="waits for signals (sse_suite.py)"
  [http_window]="needs an HTTP server (test_http_window.sh)"
  [sandbox_session]="needs a sandbox driver (test_sandbox.sh)"
  [runaway]="never ends by itself: the budget stops it (test_runaway.sh)"
  [crash_engine]="crashes the engine on purpose (test_wf_errors.sh)"
  [start_race]="waits for a signal (test_pg_start_race.sh)"
)
NEGATIVE=" nondet replay_result "
# The shipped workflows (workflows/*.lua): hello runs here; the others need a
# sandbox or a service and are replayed by the test named
declare -A SHIPPED=(
  [hello]="runs here"
  [agent_session]="needs a sandbox (test_agent_session.sh, test_fork.sh replay its sessions)"
  [pr_review]="needs GitHub's stub and a sandbox (test_pr_review.sh: engine replay)"
  [eval_suite]="its cases are sandboxed sessions (test_eval.sh: engine replay of an eval run)"
  [one_call]="reads files under ENGINE_CONTEXT_ROOTS (test_one_call.sh: engine replay, kill -9 at eight points)"
  [chat]="an agent session in a sandbox (test_chat.sh: engine replay, kill -9 idle and mid-reply)"
  [specialist_loop]="a sandbox and recorded fixer and reviewer (test_specialist_loop.sh: engine replay, kill -9 at six points)"
)
for f in "$SRC"/workflows/*.lua; do
  name="$(basename "$f" .lua)"
  case "$name" in *_activities) continue ;; esac
  [ -n "${SHIPPED[$name]:-}" ] || fail "workflows/$name.lua is not in the property test: run it here or name the test that replays it"
done

ids=()
for f in "$WF"/*.lua; do
  name="$(basename "$f" .lua)"
  if [ -n "${SKIP[$name]:-}" ]; then echo "# skip $name: ${SKIP[$name]}"; continue; fi
  if [ -z "${INPUT[$name]:-}" ]; then fail "$name.lua is not in the property test: give it an input or a reason"; continue; fi
  assert_exit "start $name" 3 engine start "$f" --id "p-$name" --detach --input "${INPUT[$name]}"
  ids+=("$name")
done
assert_exit "start hello" 3 engine start "$SRC/workflows/hello.lua" --id p-hello --detach \
  --input '{"name":"Ada","n":2,"sleep":0}'
ids+=(hello)

bg S engine serve
# drive each run to its end: signals when it waits for one, a cancel while it runs its slow activity
for name in "${ids[@]}"; do
  id="p-$name"
  # drive: one step of driving the run, true once it has ended
  drive() {
    case "$(status "$id")" in completed | failed | cancelled | stuck) return 0 ;; esac
    case "$name:$(engine history "$id" 2>/dev/null | tail -1)" in
      hello:*SignalWaitStarted*) engine signal "$id" approval '{"approved":true}' 2>/dev/null || true ;;
      nondet*:*SignalWaitStarted*) engine signal "$id" go '"now"' 2>/dev/null || true ;;
      cancel_activity:*ActivityScheduled*) engine cancel "$id" >/dev/null 2>&1 || true ;;
    esac
    return 1
  }
  wait_for 60 "$id to end" drive 'engine history "$id" 2>/dev/null | tail -3' || true
  case "$(status "$id"):$NEGATIVE" in
    completed:* | failed:* | cancelled:* | stuck:*" $name "*) ;;
    *) fail "$id did not end: $(status "$id")" ;;
  esac
done
kill "$S"; wait "$S" 2>/dev/null || true

checked=0
for name in "${ids[@]}"; do
  id="p-$name"
  st="$(status "$id")"
  set +e
  out="$(engine replay "$id" 2>&1)"
  rc=$?
  set -e
  if [[ "$NEGATIVE" == *" $name "* ]]; then
    [ "$rc" == 1 ] && [[ "$out" == *diverges* ]] && pass "negative control $name is caught: ${out:0:140}" ||
      fail "negative control $name not caught (exit $rc): $out"
    continue
  fi
  case "$st" in
    completed) want="returns the same result" ;;
    failed) want="fails as the run did" ;;
    cancelled) want="ends cancelled as the run did" ;;
  esac
  if [ "$rc" == 0 ] && [[ "$out" == *"$want"* ]]; then
    checked=$((checked + 1))
    pass "$name ($st) replays: every command and the outcome"
  else
    fail "$name ($st) does not replay (exit $rc): $out"
  fi
done
[ "$checked" -ge 15 ] && pass "$checked workflows checked" || fail "only $checked workflows checked"
finish
