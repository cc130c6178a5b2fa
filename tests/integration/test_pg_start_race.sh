#!/usr/bin/env bash
# Starts racing on the same ids, on PostgreSQL, with no lock but the row's:
# two `engine serve --listen` workers on one database, 32 clients over real
# HTTP (start_race_client.py) working through 200 ids, each id's operations
# side by side so that several clients race on it: three starts with one
# input, two with another, a signal "go" and on every tenth id a cancel; one
# worker is killed with -9 while they run and started again (its clients
# send again to the other). Then: each id exists once; of its starts at most
# one was answered 201, every one with the input the id's workflow holds got
# 200 or 201 with the same run, every other one 409; every workflow ended
# exactly once (one WorkflowStarted and one WorkflowCompleted or
# WorkflowCancelled in its history, no gap), completed ones with their own
# input and signal; cancels only where they were sent. Nothing lost: every
# id ends. Waits on the database's state, never on time.
source "$(dirname "$0")/lib.sh"
N=${RACE_IDS:-200} CLIENTS=${RACE_CLIENTS:-32}
export ENGINE_LEASE_MS=5000 ENGINE_BUSY_TIMEOUT_MS=30000 ENGINE_NO_SWEEP=1 ENGINE_NO_POLICY_WATCH=1
export ENGINE_DATA_DIR="$T/data" TEST_SIDE_EFFECTS="$T/side"
: >"$TEST_SIDE_EFFECTS"
own_pg_database race

declare -A W A # worker number -> pid, API address
worker() {
  : >"$T/worker$1.err"
  "$ENGINE" serve --listen "${A[$1]:-127.0.0.1:0}" --workflows "$SRC/tests/integration/wf" 2>>"$T/worker$1.err" &
  W[$1]=$!
  PIDS+=("${W[$1]}")
  wait_for 30 "worker $1 to announce its API" 'grep -q "API on" "$T/worker$1.err"' 'cat "$T/worker$1.err"' "$1" || finish
  A[$1]="$(sed -n 's/.*API on http:\/\/\([^ ]*\).*/\1/p' "$T/worker$1.err" | tail -1)"
}
worker 1
worker 2
APIS="${A[1]},${A[2]}"

python3 "$SRC/tests/integration/start_race_client.py" "$APIS" "$N" "$CLIENTS" "$T/progress" >"$T/answers" 2>"$T/client.err" &
CLIENT=$!
PIDS+=("$CLIENT")
# worker 1 dies with a third of the ids started, and comes back on its port
wait_true 120 '[ "$(q "SELECT count(*) FROM workflows")" -ge $((N / 3)) ]' || true
kill -9 "${W[1]}"; wait "${W[1]}" 2>/dev/null || true
killed_at="$(q "SELECT count(*) FROM workflows")"
worker 1
wait "$CLIENT" || fail "the clients failed: $(tail -n 5 "$T/client.err")"
pass "worker 1 killed with -9 at $killed_at of $N ids started, and started again"

# every id ends (completed, or cancelled where a cancel was sent)
ended() { q "SELECT count(*) FROM workflows WHERE status IN ('completed','cancelled')"; }
wait_true 180 '[ "$(ended)" -ge "$N" ]' 'q "SELECT status, count(*) FROM workflows GROUP BY 1"' || true

assert_eq "every operation answered" "$((N * 6 + N / 10))" "$(wc -l <"$T/answers")"
assert_eq "each id exists once" "$N $N" "$(q "SELECT count(*) || ' ' || count(DISTINCT id) FROM workflows WHERE id LIKE 'r-%'")"
assert_eq "no other workflow" "$N" "$(q "SELECT count(*) FROM workflows")"
assert_eq "every id ended" "$N" "$(ended)"

# the variant each id's workflow holds, beside the answers to its starts
q "SELECT id, input::json->>'variant' FROM workflows" | tr '|' ' ' | sort >"$T/held"
awk '$1 == "start"' "$T/answers" | sort -k2,2 >"$T/starts"
bad="$(join -1 2 -2 1 "$T/starts" "$T/held" | awk '
  { id = $1; v = $3; st = $4; run = $5; at = $6; held = $8
    if (st == 201) n201[id]++
    if (v == held) { if (st != 200 && st != 201) print "same input answered " st ": " $0
                     else { key[id] = key[id] == "" ? run "@" at : key[id]; if (key[id] != run "@" at) print "another run: " $0 } }
    else if (st != 409) print "different input answered " st ": " $0 }
  END { for (i in n201) if (n201[i] > 1) print i " answered 201 " n201[i] " times" }')"
assert_eq "same input: 200/201 with one run; different input: 409; one 201 at most" "" "$bad"
assert_eq "every start answered 200, 201 or 409" "" "$(awk '$1 == "start" && $4 != 200 && $4 != 201 && $4 != 409' "$T/answers")"
assert_eq "every signal delivered, or refused as the workflow had ended" "" \
  "$(awk '$1 == "signal" && $4 != 200 && $4 != 202 && $4 != 409' "$T/answers")"
assert_eq "every cancel accepted, or refused as the workflow had ended" "" \
  "$(awk '$1 == "cancel" && $4 != 200 && $4 != 202 && $4 != 409' "$T/answers")"

# the histories: one start and one end each, dense
assert_eq "one WorkflowStarted per workflow" "" \
  "$(q "SELECT wf_id FROM history GROUP BY wf_id HAVING count(*) FILTER (WHERE type='WorkflowStarted') <> 1")"
assert_eq "one end per workflow (completed or cancelled, once)" "" \
  "$(q "SELECT w.id FROM workflows w LEFT JOIN history h ON h.wf_id=w.id AND h.type IN
        ('WorkflowCompleted','WorkflowCancelled','WorkflowFailed') GROUP BY w.id HAVING count(h.seq) <> 1")"
assert_eq "the end recorded is the row's status" "" \
  "$(q "SELECT w.id FROM workflows w JOIN history h ON h.wf_id=w.id AND h.type IN ('WorkflowCompleted','WorkflowCancelled')
        WHERE (h.type='WorkflowCompleted') <> (w.status='completed')")"
assert_eq "no history with a gap or a seq twice" 0 \
  "$(q "SELECT count(*) FROM (SELECT wf_id, run FROM history GROUP BY 1, 2 HAVING max(seq) <> count(*)) x")"
assert_eq "completed ones with their own input and signal" "" \
  "$(q "SELECT id FROM workflows WHERE status='completed' AND (result::json->>'n' <> substr(id, 3)
        OR result::json->>'go' <> id OR result::json->>'total' <> '1')")"
assert_eq "cancelled only where a cancel was sent" "" \
  "$(q "SELECT id FROM workflows WHERE status='cancelled' AND substr(id, 3)::int % 10 <> 0")"
assert_eq "no task left" 0 "$(q "SELECT count(*) FROM tasks")"
completed="$(q "SELECT count(*) FROM workflows WHERE status='completed'")"
echo "$completed completed, $((N - completed)) cancelled; answers: $(awk '{n[$1 " " $4]++} END {for (k in n) printf "%s: %d; ", k, n[k]}' "$T/answers")"
echo "retries (a connection lost or a 503): $(awk '$7 > 1 {n++} END {print n + 0}' "$T/answers")"
finish
