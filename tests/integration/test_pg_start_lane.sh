#!/usr/bin/env bash
# API starts on PostgreSQL go on connections of their own (the start lane,
# engine/worker/starts_sent.c), not with the worker's batch. Over real HTTP
# to one `engine serve --listen`:
# - 40 starts at once are each answered 201 and every workflow completes;
#   the serve holds a connection for starts (application_name "engine
#   starts OWNER", opened at the first start) beside its worker's ("engine
#   worker OWNER") and its API's ("engine api OWNER"), and /metrics counts
#   the lane's commits and the 40 starts in them;
# - a start of an id that exists is answered from the row found: 200 with
#   the same input, 409 with another; two starts of one new id with two
#   inputs at once: one 201, one 409;
# - the lane's connections are ended by the server (pg_terminate_backend):
#   a start sent on a dead connection goes again on one opened again (201),
#   or, after three sends, is answered 503 (nothing recorded); never lost
#   or made twice: sent again with the same id it is 201 or 200, and a
#   later start is 201.
# Every id exists once with one WorkflowStarted, and every workflow ends.
source "$(dirname "$0")/lib.sh"
export ENGINE_NO_SWEEP=1 ENGINE_NO_POLICY_WATCH=1 ENGINE_DATA_DIR="$T/data" ENGINE_BUSY_TIMEOUT_MS=30000
export TEST_SIDE_EFFECTS="$T/side"
: >"$TEST_SIDE_EFFECTS"
own_pg_database lane
serve_api --workflows "$SRC/tests/integration/wf"

# start ID INPUT: the answer's status (its body in $T/body.ID)
start() {
  curl -s -o "$T/body.$1" -w '%{http_code}\n' -X POST "$URL/v1/workflows" -H 'Content-Type: application/json' \
    -d "{\"script\":\"chain10.lua\",\"id\":\"$1\",\"input\":$2}"
}

# ---- many at once ----
# the serve's own connections are open now (its worker's, its API's reads...):
# those that begin after this are the lane's
since="$(q "SELECT now()")"
# (the starts' own pids: a bare wait would wait for the serve too)
C=()
for i in $(seq 40); do start "l-$i" '{"steps":1}' >"$T/code.l-$i" & C+=($!); done
wait "${C[@]}"
codes="$(cat "$T"/code.l-* | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')"
assert_eq "40 starts at once, each answered 201" "201:40 " "$codes"
assert_eq "the first answer's page is the workflow started" "l-1 running" \
  "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["id"], d["status"])' "$T/body.l-1")"
owner="$(q "SELECT substr(application_name, 15) FROM pg_stat_activity WHERE datname='lane'
  AND application_name LIKE 'engine worker %'")"
lanes_sql="FROM pg_stat_activity WHERE datname='lane' AND application_name='engine starts $owner' AND backend_start > '$since'"
lanes="$(q "SELECT count(*) $lanes_sql")"
[ -n "$owner" ] && [ "$lanes" -ge 1 ] && pass "the serve holds $lanes connection(s) for starts, named for worker $owner" ||
  fail "no connection for starts: $(q "SELECT application_name FROM pg_stat_activity WHERE datname='lane'" | tr '\n' ',')"
assert_eq "its API's reads have a connection named for it too" "1" \
  "$(q "SELECT count(*) FROM pg_stat_activity WHERE datname='lane' AND application_name='engine api $owner'")"
metric() { curl -sf "$URL/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }
assert_eq "/metrics: the lane's commits carried the 40 starts" "40" "$(metric engine_start_commit_starts_sum)"
commits="$(metric 'engine_start_commits_total{outcome="committed"}')"
[ "${commits:-0}" -ge 1 ] && [ "$commits" -le 40 ] && pass "in $commits commit(s) of the lane" ||
  fail "engine_start_commits_total{outcome=\"committed\"} is '$commits'"
wait_true 120 '[ "$(q "SELECT count(*) FROM workflows WHERE id LIKE '\''l-%'\'' AND status='\''completed'\''")" = 40 ]' || true
pass "the 40 completed"

# ---- an id that exists; one new id started twice at once ----
assert_eq "the same id and input again: 200" "200" "$(start l-1 '{"steps":1}')"
assert_eq "the same id with another input: 409" "409" "$(start l-1 '{"steps":2}')"
start twin '{"steps":1}' >"$T/code.twin1" & C=($!)
start twin '{"steps":2}' >"$T/code.twin2" & C+=($!)
wait "${C[@]}"
assert_eq "one new id started twice at once, with two inputs: one 201, one 409" "201 409" \
  "$(cat "$T/code.twin1" "$T/code.twin2" | sort | tr '\n' ' ' | sed 's/ $//')"

# ---- the lane's connections ended by the server ----
ended="$(q "SELECT count(pg_terminate_backend(pid)) $lanes_sql")"
pass "$ended connection(s) for starts ended by the server"
C=()
for i in $(seq 10); do start "k-$i" '{"steps":1}' >"$T/code.k-$i" & C+=($!); done
wait "${C[@]}"
first="$(cat "$T"/code.k-* | sort | uniq -c | awk '{printf "%s:%s ", $2, $1}')"
echo "# answers on the ended connections: $first"
bad="$(cat "$T"/code.k-* | grep -cvE '^(201|503)$' || true)"
assert_eq "each start on an ended connection is answered 201 or 503" "0" "$bad"
for i in $(seq 10); do
  c="$(cat "$T/code.k-$i")"
  for _ in 1 2 3 4 5; do [ "$c" = 503 ] || break; c="$(start "k-$i" '{"steps":1}')"; done
  echo "$c" >"$T/again.k-$i"
done
bad="$(cat "$T"/again.k-* | grep -cvE '^(200|201)$' || true)"
assert_eq "sent again with its id, each is 201 or 200" "0" "$bad"
assert_eq "a later start is 201 (the lane connected again)" "201" "$(start after '{"steps":1}')"

# ---- nothing lost, nothing twice ----
wait_true 120 '[ "$(q "SELECT count(*) FROM workflows WHERE status <> '\''completed'\''")" = 0 ]' \
  'q "SELECT id, status FROM workflows WHERE status <> '\''completed'\''"' || true
assert_eq "every id once: 40 + twin + 10 + after" "52" "$(q "SELECT count(*) FROM workflows")"
assert_eq "one WorkflowStarted each" "52" "$(q "SELECT count(DISTINCT wf_id) FROM history WHERE type='WorkflowStarted'")"
assert_eq "no WorkflowStarted twice" "0" \
  "$(q "SELECT count(*) FROM (SELECT wf_id FROM history WHERE type='WorkflowStarted' GROUP BY wf_id HAVING count(*) > 1) x")"
assert_eq "the twin holds the input of its 201" "$(grep -l 201 "$T"/code.twin* | sed 's/.*twin//')" \
  "$(q "SELECT input::jsonb->>'steps' FROM workflows WHERE id='twin'")"
finish
