#!/usr/bin/env bash
# `engine approve` answers what the operator named, or, on a terminal, the one
# request that is pending once the operator saw it and said y; an answer is never buffered for a request nobody
# waits on: one that timed out (with or without a worker running), one that
# was answered already, one of many operators approving at once.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/approvals.lua"
signals() { sqlite3 "$ENGINE_DB" "SELECT count(*) FROM signals WHERE wf_id='$1'"; }
requested() { engine events "$1" --json 2>/dev/null | grep -c "\"type\":\"approval.requested\"" || true; }
wait_requests() { # ID N: until the workflow has asked N times and waits
  wait_for 30 "$1 to ask for approval $2" \
    '[ "$(requested "$1")" -ge "$2" ] && engine history "$1" 2>/dev/null | tail -1 | has_line SignalWaitStarted' \
    'engine history "$1" 2>/dev/null | tail -3' "$@"
}

# --- the request the operator saw timed out; another one is pending now
"$ENGINE" start "$WF" --id ap1 --input '{"requests":[{"id":"r1","tool":"shell","timeout":0.5},{"id":"r2","tool":"publish_review","timeout":3600}]}' \
  >"$T/ap1.out" 2>"$T/ap1.err" &
P=$!; PIDS+=("$P")
wait_requests ap1 1
assert_contains "start shows the safe form of approve" "engine approve ap1 --request r1" "$(cat "$T/ap1.err")"
wait_requests ap1 2
assert_exit "approving the request that timed out is refused" 2 engine approve ap1 --request r1
assert_contains "it says what is pending instead" "request 'r1' of ap1 is not pending" "$ERR"
assert_contains "and which request that is" "it waits on request 'r2' for tool publish_review" "$ERR"
assert_eq "nothing was buffered" 0 "$(signals ap1)"
# the operator read r1; off a terminal an approval without --request would
# land on r2, which nobody saw: refused, naming r2
assert_exit "off a terminal, approve without --request is refused" 2 engine approve ap1
assert_contains "naming the request pending" "--request is required when not on a terminal: ap1 waits on request 'r2' for tool publish_review" "$ERR"
assert_eq "nothing was buffered" 0 "$(signals ap1)"
# on a terminal (script(1) gives it one) it shows r2 and asks: n sends nothing
assert_exit "on a terminal, n answers nothing" 1 on_tty n "$ENGINE" approve ap1
assert_contains "it showed the request it asked about" "ap1 waits on approval request r2 (tool publish_review" "$OUT"
assert_contains "and sent nothing" "nothing sent" "$OUT"
assert_eq "nothing was buffered" 0 "$(signals ap1)"
assert_exit "on a terminal, y answers the request it showed" 0 on_tty y "$ENGINE" approve ap1
assert_contains "and says which it answered" "approved request r2 (tool publish_review) of ap1" "$OUT"
wait "$P"
res="$(cat "$T/ap1.out")"
assert_eq "r1 ended by its timeout" "false timeout" "$(jget 1.approved <<<"$res") $(jget 1.why <<<"$res")"
assert_eq "r2 was approved" true "$(jget 2.approved <<<"$res")"
assert_exit "nothing to approve in a finished session" 2 engine approve ap1
assert_contains "says so" "workflow 'ap1' is completed" "$ERR"

# --- the deadline passed while no worker ran: refused, the restart times it out
# t1's deadline is long enough to see the request before it passes on a busy
# machine (scaled), and wait_due waits it out after the kill
"$ENGINE" start "$WF" --id ap2 --input "{\"requests\":[{\"id\":\"t1\",\"tool\":\"shell\",\"timeout\":$(scaled 5)}]}" >/dev/null 2>&1 &
P=$!; PIDS+=("$P")
wait_requests ap2 1
kill -9 "$P"; wait "$P" 2>/dev/null || true
wait_due ap2 # past t1's deadline
assert_exit "approving after the deadline is refused" 2 engine approve ap2 --request t1
assert_contains "names the timeout" "request 't1' of ap2 timed out" "$ERR"
assert_eq "nothing was buffered" 0 "$(signals ap2)"
assert_exit "the restart carries it on" 0 "$ENGINE" start "$WF" --id ap2 --quiet
assert_eq "t1 ended by its timeout" "false timeout" "$(jget 1.approved <<<"$OUT") $(jget 1.why <<<"$OUT")"

# --- answered already; and many operators at once: one answer, the rest refused
"$ENGINE" start "$WF" --id ap3 --input '{"requests":[{"id":"a1","tool":"shell","timeout":3600}]}' >/dev/null 2>&1 &
P=$!; PIDS+=("$P")
wait_requests ap3 1
kill -9 "$P"; wait "$P" 2>/dev/null || true
for i in $(seq 8); do
  USER="op$i" "$ENGINE" approve ap3 --request a1 >/dev/null 2>"$T/op$i.err" &
  OPS+=($!)
done
ok=0; refused=0
for p in "${OPS[@]}"; do if wait "$p"; then ok=$((ok + 1)); else refused=$((refused + 1)); fi; done
assert_eq "eight operators at once: one answer, seven refused" "1 7" "$ok $refused"
assert_contains "a refusal says it is answered already" "already answered" "$(cat "$T"/op*.err)"
assert_eq "one answer is buffered" 1 "$(signals ap3)"
assert_exit "approve again" 2 engine approve ap3 --request a1
assert_contains "is refused the same way" "request 'a1' of ap3 is already answered" "$ERR"
assert_exit "the restart takes the one answer" 0 "$ENGINE" start "$WF" --id ap3 --quiet
assert_eq "a1 approved" true "$(jget 1.approved <<<"$OUT")"
assert_contains "by one of the operators" "op" "$(jget 1.approver <<<"$OUT")"
assert_eq "no answer left over" 0 "$(signals ap3)"

# --- a workflow that waits on something else; a request never asked
"$ENGINE" start "$SRC/workflows/hello.lua" --id ap4 --input '{"name":"x","n":1}' >/dev/null 2>&1 &
P=$!; PIDS+=("$P")
wait_true 30 'engine history ap4 2>/dev/null | tail -1 | has_line SignalWaitStarted' || true
assert_exit "nothing pending while it waits on a plain signal" 2 engine approve ap4
assert_contains "says so" "no approval is pending for ap4" "$ERR"
assert_exit "a request it never asked" 2 engine approve ap4 --request zz
assert_contains "names it" "ap4 has no pending approval request 'zz'" "$ERR"
engine signal ap4 approval '{"approved":true}' 2>/dev/null
wait "$P" || true
finish
