#!/usr/bin/env bash
# Child workflows (wf.child, wf.start_child; tests/integration/wf/child_parent.lua
# and child_worker.lua): a parent starting three children with wf.all, one
# failing, gets the right result; kill -9 of the engine at the crash points of
# the new paths (a child's start, its end told to the parent, the parent
# taking it) and around them leaves every child created once with one
# outcome, and the parent's result equal to an uninterrupted run's; the three
# parent_close modes; cancelling a parent cancels its child (whose clean-up
# runs); a child's timeout; kill -9 while a parent's end applies
# parent_close and at a timeout; an id in use and a missing script; replay
# of parent and children (a child's code pinned when its file changes);
# non-determinism; what show, show --json, list --tree and the reserved
# signal names say. The limits: a chain one deeper than child_max_depth,
# a parent starting more children at once than child_max_fanout (ChildLimit,
# recorded, no child row; a new start once one ended), a call's max_depth
# and max_fanout, replay under other limits, kill -9 at the refusal. On
# PostgreSQL also: two workers, one killed -9 while the children wait, the
# other carries parent and children on.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/child_parent.lua"
export TEST_SIDE_EFFECTS="$T/effects"
result() { engine show "$1" --json | jget "result${2:+.$2}"; }
start() { "$ENGINE" start "$WF" --id "$1" --detach --input "$2" >/dev/null 2>&1 || true; }
# the result field by field, the parent's id taken out (children's ids carry it)
norm() { echo "$(result "$1" ok) $(result "$1" error_type) $(result "$1" child) $(result "$1" sum) $(result "$1" first) $(result "$1" error_message)" | sed "s/\b$1\./P./g"; }
nchildren() { engine show "$1" --json | lua5.4 -e 'print(#require"cjson".decode(io.read("a")).children)'; }

# --- uninterrupted: three children with wf.all, the second failing
engine start "$WF" --id ref --input '{"mode":"all3"}' --quiet >/dev/null 2>"$T/ref.err" || fail "ref: $(cat "$T/ref.err")"
assert_eq "ref completed" completed "$(status ref)"
assert_eq "wf.all raised the failed child's error" "false ChildBoom ref.2" \
  "$(result ref ok) $(result ref error_type) $(result ref child)"
assert_eq "its message" "child 2 failed on purpose" "$(result ref error_message)"
assert_eq "the others' results, and a blocking wf.child after them" "4 10" "$(result ref sum) $(result ref first)"
assert_eq "four children, each once" "ref.1 ref.2 ref.3 ref.4" \
  "$(sql "SELECT id FROM workflows WHERE parent='ref' ORDER BY id" | tr '\n' ' ' | sed 's/ $//')"
assert_eq "each child's activity ran once" 4 "$(grep -c '^ref\.' "$T/effects")"
assert_contains "the parent's history" "ChildStarted ChildStarted ChildStarted ChildCompleted ChildFailed ChildCompleted ChildStarted ChildCompleted WorkflowCompleted" \
  "$(engine history ref | awk '{printf "%s ", $3}')"
assert_contains "each command one outcome" "open_commands=0 last=WorkflowCompleted" "$(verify_history ref)"
REF="$(norm ref)"

# --- show: the children and their status, a child's parent
SH="$(engine show ref)"
assert_contains "show lists the children" "children:  4" "$SH"
assert_contains "with their status" "ref.2                            failed" "$SH"
assert_contains "a child shows its parent" "parent:    ref" "$(engine show ref.1)"
assert_eq "show --json: children and parent" "4 nil ref" \
  "$(nchildren ref) $(engine show ref --json | jget parent) $(engine show ref.3 --json | jget parent)"
assert_eq "a child's item" "ref.2 failed terminate" \
  "$(engine show ref --json | jget children.2.id) $(engine show ref --json | jget children.2.status) $(engine show ref --json | jget children.2.parent_close)"

# --- list --tree: each child under its parent
TREE="$(engine list --tree)"
assert_contains "list --tree puts the children under their parent" "ref  " "$(echo "$TREE" | grep -A4 '^ref ' | sed -n 1p)"
assert_eq "the four children right under it, indented" "- ref.1 - ref.2 - ref.3 - ref.4" \
  "$(echo "$TREE" | grep -A4 '^ref ' | tail -4 | awk '{printf "%s %s ", $1, $2}' | sed 's/ $//')"
assert_contains "list --json items name their parent" '"parent":"ref"' "$(engine list --json | grep '"id":"ref.1"')"

# --- replay: the parent and every child replay their pinned code
for id in ref ref.1 ref.2 ref.3 ref.4; do
  engine replay "$id" >"$T/replay.out" 2>&1 && pass "replay of $id" || fail "replay of $id: $(cat "$T/replay.out")"
done

# --- the child's code is pinned at its start: an edit of its file later does not change its replay
mkdir -p "$T/wfcopy"
cp "$WF" "$SRC/tests/integration/wf/child_worker.lua" "$SRC/tests/integration/wf/acts.lua" "$T/wfcopy/"
engine start "$T/wfcopy/child_parent.lua" --id cp --input '{"mode":"all3"}' --quiet >/dev/null 2>"$T/cp.err" || fail "cp: $(cat "$T/cp.err")"
assert_eq "a copy beside its children completes" completed "$(status cp)"
sed -i 's/acts.echo/acts.fail/' "$T/wfcopy/child_worker.lua"
engine replay cp.1 >"$T/replay.out" 2>&1 && pass "the child replays its pinned code after its file changed" \
  || fail "replay of cp.1 after its file changed: $(cat "$T/replay.out")"
assert_exit "the edited file itself diverges" 1 engine replay cp.1 --script "$T/wfcopy/child_worker.lua"

# --- non-determinism: another child, or none, where the log has ChildStarted
assert_exit "a script starting another child diverges" 1 engine replay ref --script "$SRC/tests/integration/wf/child_nondet.lua"
assert_contains "named at the ChildStarted" "history has ChildStarted 'ref.1'" "$OUT$ERR"
assert_exit "a script starting none diverges" 1 engine replay ref --script "$SRC/tests/integration/wf/child_none.lua"
assert_contains "named at the first ChildStarted" "ChildStarted 'ref.1'" "$OUT$ERR"

# --- kill -9 at the crash points of the new paths and around them
POINTS="child.start:1 child.start:2 child.start:4 child.end:1 child.end:2 child.end:3 child.end:4"
POINTS+=" child.take:1 child.take:2 child.take:4 append:3 append:6 append:12 append:18 append:21"
POINTS+=" commit.before:2 commit.after:2 commit.before:4 commit.after:4"
cases=0 hit=0
for pt in $POINTS; do
  cases=$((cases + 1))
  id="k$cases"
  set +e
  ENGINE_CRASH="$pt" "$ENGINE" start "$WF" --id "$id" --input '{"mode":"all3"}' --quiet >/dev/null 2>"$T/crash.err"
  rc=$?
  set -e
  [ "$rc" == 137 ] && hit=$((hit + 1)) || echo "# $pt: not reached (exit $rc)"
  for attempt in 1 2 3; do # resume in the foreground: the one process runs parent and children
    [ "$(status "$id")" == completed ] && break
    "$ENGINE" start "$WF" --id "$id" --quiet >/dev/null 2>"$T/resume.err" || true
  done
  if [ "$(status "$id")" != completed ]; then
    fail "$pt: not completed after resume ($(status "$id")): $(cat "$T/resume.err")"
    continue
  fi
  assert_eq "$pt: the parent's result is the uninterrupted run's" "$REF" "$(norm "$id")"
  kids="$(sql "SELECT id || ':' || status FROM workflows WHERE parent='$id' ORDER BY id" | tr '\n' ' ' | sed 's/ $//')"
  assert_eq "$pt: each child created once, each ended" "$id.1:completed $id.2:failed $id.3:completed $id.4:completed" "$kids"
  assert_contains "$pt: the parent has one outcome per child" "open_commands=0 last=WorkflowCompleted" "$(verify_history "$id")"
  assert_eq "$pt: four ChildStarted" 4 "$(engine history "$id" | grep -c ChildStarted)"
  for k in 1 2 3 4; do
    assert_eq "$pt: child $k started once" 1 "$(engine history "$id.$k" | grep -c WorkflowStarted)"
    grep -q "^$id\.$k/" "$T/effects" || fail "$pt: the side effect of child $k never happened"
  done
done
assert_eq "every crash point was reached (killed by SIGKILL)" "$cases" "$hit"
echo "# child activity executions beyond one each, over all cases: $(( $(grep -c '^k[0-9]*\.' "$T/effects") - 4 * cases ))"

# --- depth: with child_max_depth 2 (the setting, from the environment), a
# chain asked to go 5 deep is refused at depth 3, in the workflow at depth 2;
# the rest of the tree completes, and the refused child has no row
CHAIN="$SRC/tests/integration/wf/child_chain.lua"
chain() { # ID INPUT [ENV...]: a chain in the foreground, to its end
  local id="$1" input="$2"; shift 2
  env "$@" "$ENGINE" start "$CHAIN" --id "$id" --input "$input" --quiet >/dev/null 2>"$T/$id.err" \
    || fail "$id: $(cat "$T/$id.err")"
}
leaf() { # ID: the refusal the chain's last workflow returned, field by field
  echo "$(result "$1" depth) $(result "$1" refused) $(result "$1" limit) $(result "$1" max) $(result "$1" child_depth) $(result "$1" child)"
}
chain dc '{"to":5}' ENGINE_CHILD_MAX_DEPTH=2
assert_eq "the tree completed" "completed completed completed" "$(status dc) $(status dc.1) $(status dc.1.1)"
assert_eq "refused at depth 3, in the workflow at depth 2" "2 ChildLimit child_max_depth 2 3 dc.1.1.1" "$(leaf dc.1.1)"
assert_eq "the message names the limit, its value and the depth asked" \
  "child depth 3 is over child_max_depth 2 (its parent dc.1.1 is at depth 2)" "$(result dc.1.1 message)"
assert_eq "the refused child has no row" 0 "$(sql "SELECT count(*) FROM workflows WHERE id LIKE 'dc.1.1.%'")"
assert_contains "the refusal is the child's recorded outcome" "ChildStarted ChildFailed WorkflowCompleted" \
  "$(engine history dc.1.1 | awk '{printf "%s ", $3}')"
assert_contains "one outcome per command" "open_commands=0 last=WorkflowCompleted" "$(verify_history dc.1.1)"
assert_eq "the parents got their child's result" "0 1 2" \
  "$(result dc depth) $(engine show dc --json | jget result.below.depth) $(engine show dc --json | jget result.below.below.depth)"
for id in dc dc.1 dc.1.1; do # the operator's limit changed since: the replay takes the recorded refusal
  ENGINE_CHILD_MAX_DEPTH=10 engine replay "$id" >"$T/replay.out" 2>&1 && pass "replay of $id under another limit" \
    || fail "replay of $id under another limit: $(cat "$T/replay.out")"
done
chain dd '{"to":9}'
assert_eq "the default child_max_depth is 3" "3 ChildLimit child_max_depth 3 4 dd.1.1.1.1" "$(leaf dd.1.1.1)"
printf 'child_max_depth = 1\n' >"$T/depth.conf"
chain dconf '{"to":9}' ENGINE_CONFIG="$T/depth.conf"
assert_eq "the configuration file's child_max_depth" "1 ChildLimit child_max_depth 1 2 dconf.1.1" "$(leaf dconf.1)"
chain dopt '{"to":9,"opts":{"max_depth":1}}' ENGINE_CHILD_MAX_DEPTH=2
assert_eq "a call's max_depth asks for less" "1 ChildLimit max_depth 1 2 dopt.1.1" "$(leaf dopt.1)"
assert_eq "named as the call's" "child depth 2 is over the call's max_depth 1 (its parent dopt.1 is at depth 1)" \
  "$(result dopt.1 message)"
chain dmore '{"to":9,"opts":{"max_depth":4}}' ENGINE_CHILD_MAX_DEPTH=2
assert_eq "a call cannot ask for more: InvalidOptions naming both numbers" \
  "InvalidOptions option 'max_depth' is 4, more than the engine's child_max_depth 2" \
  "$(result dmore refused) $(result dmore message)"
assert_eq "and starts no child" 0 "$(sql "SELECT count(*) FROM workflows WHERE parent='dmore'")"
ENGINE_CHILD_MAX_DEPTH=deep assert_exit "a bad ENGINE_CHILD_MAX_DEPTH stops the command" 2 engine list
assert_contains "naming the variable, its range and the value" \
  'ENGINE_CHILD_MAX_DEPTH must be a whole number from 0 to 100, not "deep"' "$ERR"
ENGINE_CHILD_MAX_FANOUT=0 assert_exit "so does a child_max_fanout out of range" 2 engine list

# --- kill -9 at the refusal (child.limit, before its commit): after the
# restart the depth is read again from the store, and the tree ends as before
set +e
ENGINE_CRASH=child.limit:1 ENGINE_CHILD_MAX_DEPTH=2 "$ENGINE" start "$CHAIN" --id kl --input '{"to":5}' --quiet \
  >/dev/null 2>"$T/kl.err"
rc=$?
set -e
assert_eq "child.limit was reached (killed by SIGKILL)" 137 "$rc"
for attempt in 1 2 3; do
  [ "$(status kl)" == completed ] && break
  ENGINE_CHILD_MAX_DEPTH=2 "$ENGINE" start "$CHAIN" --id kl --quiet >/dev/null 2>"$T/resume.err" || true
done
assert_eq "after the kill: the same refusal at the same depth" "2 ChildLimit child_max_depth 2 3 kl.1.1.1" "$(leaf kl.1.1)"
assert_eq "the tree completed, each once" "kl.1:completed kl.1.1:completed" \
  "$(sql "SELECT id || ':' || status FROM workflows WHERE id LIKE 'kl.%' ORDER BY id" | tr '\n' ' ' | sed 's/ $//')"
assert_eq "one refusal recorded" 1 "$(engine history kl.1.1 | grep -c ChildFailed)"

# --- with engine serve: the API's tree, parent_close, cancel, timeout, start errors
: >"$T/serve.log"
serve_api
cnt() { lua5.4 -e 'print(#require"cjson".decode(io.read("a")).children)'; }
assert_eq "GET /v1/workflows/ref: its children" 4 "$(curl -sf "$URL/v1/workflows/ref" | cnt)"
assert_eq "GET /v1/workflows/ref.2: its parent" ref "$(curl -sf "$URL/v1/workflows/ref.2" | jget parent)"
assert_eq "a child's item of its parent" "ref.2 failed" \
  "$(curl -sf "$URL/v1/workflows/ref" | jget children.2.id) $(curl -sf "$URL/v1/workflows/ref" | jget children.2.status)"
assert_eq "the API refuses a signal named child:*" 403 \
  "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/workflows/ref/signals/child:ref.1" -d '{}')"
start pc '{"mode":"close","prefix":"pc-","modes":["terminate","request_cancel","abandon"]}'
wait_status pc completed 30 || fail "pc: $(status pc)"
wait_status pc-terminate cancelled 30 || fail "terminate: $(status pc-terminate)"
assert_eq "terminate: ended as Terminated" "Terminated" "$(engine show pc-terminate --json | jget error.type)"
assert_eq "terminate: no clean-up ran" 0 "$(engine history pc-terminate --json | grep -c child_cleanup || true)"
wait_status pc-request_cancel cancelled 30 || fail "request_cancel: $(status pc-request_cancel)"
assert_eq "request_cancel: ended as Cancelled" "Cancelled" "$(engine show pc-request_cancel --json | jget error.type)"
assert_contains "request_cancel: who asked" "engine:parent:pc" "$(engine events pc-request_cancel --json)"
wait_status pc-abandon waiting 30 || fail "abandon: $(status pc-abandon)"
assert_eq "a child's signals are the engine's own" 2 "$(set +e; engine signal pc-abandon child:x '{}' >/dev/null 2>&1; echo $?)"
engine signal pc-abandon go '{}' >/dev/null
wait_status pc-abandon completed 30 || fail "abandon after its signal: $(status pc-abandon)"
assert_eq "the abandoned child ran on to its end" "3" "$(result pc-abandon n)"

start pcan '{"mode":"cancel"}'
wait_status pcan.1 waiting 30 || fail "pcan.1: $(status pcan.1)"
engine cancel pcan >/dev/null
wait_status pcan cancelled 30 || fail "pcan: $(status pcan)"
wait_status pcan.1 cancelled 30 || fail "pcan.1 after its parent's cancel: $(status pcan.1)"
assert_contains "the child's clean-up ran" "child_cleanup" "$(engine history pcan.1 --json)"
assert_contains "the parent's clean-up ran" "parent_cleanup" "$(engine history pcan --json)"

start pto '{"mode":"timeout","timeout":0.5}'
wait_status pto completed 30 || fail "pto: $(status pto)"
assert_eq "a child past its timeout: Timeout" "Timeout pto.1" "$(result pto type) $(result pto child)"
wait_status pto.1 cancelled 30 || fail "pto.1: $(status pto.1)"
assert_contains "and it was cancelled (its clean-up ran)" "child_cleanup" "$(engine history pto.1 --json)"

start pid '{"mode":"idinuse","id":"ref"}'
wait_status pid completed 30 || fail "pid: $(status pid)"
assert_eq "an id in use: WorkflowIdInUse" "WorkflowIdInUse" "$(result pid type)"
assert_contains "naming the id" "workflow id 'ref' is already in use" "$(result pid message)"
start pns '{"mode":"noscript"}'
wait_status pns completed 30 || fail "pns: $(status pns)"
assert_eq "a missing script: ChildStartFailed" "ChildStartFailed" "$(result pns type)"
assert_contains "naming the file" "no_such_child.lua" "$(result pns message)"

# --- cost and tokens rolled up over the tree: two children report spend as
# sessions do, the parent's totals hold theirs (as a delegating session's
# do); the tree counts each one's own spend once (10 + 100 + 200, not 610)
start sp '{"mode":"spend"}'
wait_status sp.1 completed 30 || fail "sp.1: $(status sp.1)"
wait_status sp.2 waiting 30 || fail "sp.2: $(status sp.2)"
J="$(curl -sf "$URL/v1/workflows/sp")"
assert_eq "while a child runs: the tree counts what ended, and how many run" "3 100 0.01 2" \
  "$(jget tree.sessions <<<"$J") $(jget tree.tokens <<<"$J") $(jget tree.cost_usd <<<"$J") $(jget tree.running <<<"$J")"
assert_contains "show says so under the children" "tree:      3 sessions, 100 tokens, \$0.0100, 2 running" "$(engine show sp)"
engine signal sp.2 go '{}' >/dev/null
wait_status sp completed 30 || fail "sp: $(status sp)"
J="$(curl -sf "$URL/v1/workflows/sp")"
assert_eq "the parent's own total holds its children's" 310 "$(jget result.tokens <<<"$J")"
assert_eq "GET /v1/workflows/sp: the tree, each session's own spend once" "3 310 0.031 0" \
  "$(jget tree.sessions <<<"$J") $(jget tree.tokens <<<"$J") $(jget tree.cost_usd <<<"$J") $(jget tree.running <<<"$J")"
tree_of() { lua5.4 -e 'local t = require"cjson".decode(io.read("a")).tree print(t.sessions, t.tokens, t.cost_usd, t.running)'; }
assert_eq "show --json has the same tree" "$(tree_of <<<"$J")" "$(engine show sp --json | tree_of)"
assert_contains "engine show: the tree's line" "tree:      3 sessions, 310 tokens, \$0.0310" "$(engine show sp)"
assert_eq "a child's tree is itself" "1 200 0" \
  "$(curl -sf "$URL/v1/workflows/sp.2" | jget tree.sessions) $(curl -sf "$URL/v1/workflows/sp.2" | jget tree.tokens) $(curl -sf "$URL/v1/workflows/sp.2" | jget tree.running)"
[[ "$(engine show sp.2)" != *tree:* ]] && pass "no tree line for a workflow without children" || fail "sp.2 shows a tree line"
assert_eq "a tree without spend: tokens 0, cost null" "5 0 nil" \
  "$(curl -sf "$URL/v1/workflows/ref" | jget tree.sessions) $(curl -sf "$URL/v1/workflows/ref" | jget tree.tokens) $(curl -sf "$URL/v1/workflows/ref" | jget tree.cost_usd)"
kill "$S" 2>/dev/null || true
wait "$S" 2>/dev/null || true

# --- kill -9 while a parent's end applies parent_close, and at a child's timeout
crash_serve() { # POINT: engine serve until the point kills it (at most 60 s, scaled)
  set +e
  ENGINE_CRASH="$1" timeout "$(scaled 60)" "$ENGINE" serve 2>>"$T/serve.log" &
  local p=$!
  wait "$p"; local rc=$?
  set -e
  assert_eq "$1 was reached (killed by SIGKILL)" 137 "$rc"
}
start cc '{"mode":"close","prefix":"cc-","modes":["terminate","request_cancel","abandon"]}'
crash_serve child.close:2
start ct '{"mode":"timeout","timeout":0.5}'
crash_serve child.timeout:1
serve_bg
wait_status cc completed 30 || fail "cc: $(status cc)"
wait_status cc-terminate cancelled 30 || fail "cc-terminate: $(status cc-terminate)"
wait_status cc-request_cancel cancelled 30 || fail "cc-request_cancel: $(status cc-request_cancel)"
assert_eq "after the kill: terminated, cancelled, abandoned" "Terminated Cancelled waiting" \
  "$(engine show cc-terminate --json | jget error.type) $(engine show cc-request_cancel --json | jget error.type) $(status cc-abandon)"
wait_status ct completed 30 || fail "ct: $(status ct)"
assert_eq "after the kill: the timeout" "Timeout" "$(result ct type)"
wait_status ct.1 cancelled 30 || fail "ct.1: $(status ct.1)"
assert_contains "the parent has one outcome per child" "open_commands=0 last=WorkflowCompleted" "$(verify_history ct)"
kill "$S" 2>/dev/null || true
wait "$S" 2>/dev/null || true

# --- fan-out: with child_max_fanout 3, a parent starting five children at
# once gets ChildLimit for the fourth and fifth (no rows) while three run;
# once one of them ended, a new start succeeds. The first such parent is
# killed -9 at its first refusal (child.limit): the serve after it counts
# the running children again from the store
fanlimit_ids() { sql "SELECT id FROM workflows WHERE parent='$1' ORDER BY id" | tr '\n' ' ' | sed 's/ $//'; }
waiting_children() { sql "SELECT count(*) FROM workflows WHERE parent='$1' AND status='waiting'"; }
start fk '{"mode":"fanlimit","n":5}'
ENGINE_CHILD_MAX_FANOUT=3 crash_serve child.limit:1
ENGINE_CHILD_MAX_FANOUT=3 serve_bg
start fl '{"mode":"fanlimit","n":5}'
for p in fl fk; do
  wait_for 60 "three children of $p waiting" '[ "$(waiting_children "$1")" == 3 ]' 'fanlimit_ids "$1"' "$p"
  wait_status "$p" waiting 30 || fail "$p: $(status "$p")"
  assert_eq "$p: three run, the refused ones have no row" "$p.1 $p.2 $p.3" "$(fanlimit_ids "$p")"
  assert_eq "$p: two refusals recorded" 2 "$(engine history "$p" | grep ChildFailed | grep -c ChildLimit || true)"
  engine signal "$p.1" go '{}' >/dev/null
  wait_status "$p.6" completed 30 || fail "$p.6, the start after one ended: $(status "$p.6")"
  assert_eq "$p: started while two still run" "waiting waiting" "$(status "$p.2") $(status "$p.3")"
  engine signal "$p.2" go '{}' >/dev/null
  engine signal "$p.3" go '{}' >/dev/null
  wait_status "$p" completed 30 || fail "$p: $(status "$p")"
  assert_eq "$p: the refusals name the limit, its value and the children running" \
    "$p.4 ChildLimit: parent $p has 3 children running, child_max_fanout is 3 (child_max_fanout 3, running 3)" \
    "$(result "$p" refused.1)"
  assert_eq "$p: the fifth too; three ran, and the one after" "$p.5 ChildLimit 3 100" \
    "$(result "$p" refused.2 | cut -d: -f1) $(engine show "$p" --json | jget result.running | lua5.4 -e 'print(#require"cjson".decode(io.read("a")))') $(result "$p" extra)"
  assert_contains "$p: one outcome per command" "open_commands=0 last=WorkflowCompleted" "$(verify_history "$p")"
  for lim in 1 8; do # the operator's limit changed since: the replay takes the recorded refusals
    ENGINE_CHILD_MAX_FANOUT=$lim engine replay "$p" >"$T/replay.out" 2>&1 && pass "$p: replay under child_max_fanout $lim" \
      || fail "$p: replay under child_max_fanout $lim: $(cat "$T/replay.out")"
  done
done
for k in 1 2 3 6; do assert_eq "fk.$k started once" 1 "$(engine history "fk.$k" | grep -c WorkflowStarted)"; done
start flo '{"mode":"fanlimit","n":3,"opts":{"max_fanout":2}}'
wait_for 60 "two children of flo waiting" '[ "$(waiting_children flo)" == 2 ]' 'fanlimit_ids flo'
wait_status flo waiting 30 || fail "flo: $(status flo)"
engine signal flo.1 go '{}' >/dev/null
engine signal flo.2 go '{}' >/dev/null
wait_status flo completed 30 || fail "flo: $(status flo)"
assert_eq "a call's max_fanout asks for less" \
  "flo.3 ChildLimit: parent flo has 2 children running, the call's max_fanout is 2 (max_fanout 2, running 2)" \
  "$(result flo refused.1)"
kill "$S" 2>/dev/null || true
wait "$S" 2>/dev/null || true

# --- PostgreSQL: two workers, one killed -9 while the children wait: the
# other carries parent and children on (any worker may run either)
if on_postgres; then
  serve_bg; S1=$S
  serve_bg; S2=$S
  start fan '{"mode":"fan","n":6}'
  wait_for 60 "six children waiting" \
    '[ "$(sql "SELECT count(*) FROM workflows WHERE parent='"'"'fan'"'"' AND status='"'"'waiting'"'"'")" == 6 ]'
  wait_status fan waiting 30 || fail "fan: $(status fan)"
  kill -9 "$S1"; wait "$S1" 2>/dev/null || true
  for i in 1 2 3 4 5 6; do engine signal "fan.$i" go '{}' >/dev/null; done
  wait_status fan completed 60 || fail "fan after a worker's kill: $(status fan)"
  assert_eq "the other worker carried parent and children on" 21 "$(result fan sum)"
  assert_contains "one outcome per child" "open_commands=0 last=WorkflowCompleted" "$(verify_history fan)"
  kill "$S2" 2>/dev/null || true
  wait "$S2" 2>/dev/null || true
fi

finish
