#!/usr/bin/env bash
# The hash chains of a workflow's history and of its domain events
# (docs/durability.md#the-hash-chain). workflows/hello.lua run to completion
# (and one left waiting for its approval) verifies clean; then, each on a
# fresh copy of that database, one kind of damage made with sqlite3 or psql:
# an event's payload altered, an event deleted, two events' seqs swapped, the
# last event cut off (and with the row's head position moved back too), a
# domain event altered and cut off, 1 KB of the SQLite page holding the
# history overwritten. Each makes `engine history`, `engine show` and `engine
# verify ID` (or `engine events` for the domain events) exit non-zero naming
# the problem; the API answers 500 naming it; a serve that is asked to run the
# damaged waiting workflow marks it stuck with the first bad seq and replays
# nothing of it. An upgraded database (made before the chain) verifies, its
# old events counted, not checked, and chains from the upgrade on. kill -9 of
# a serve during a burst of commits leaves every chain whole.
source "$(dirname "$0")/lib.sh"
HELLO="$SRC/workflows/hello.lua"

# --- a completed workflow and a waiting one
assert_exit "hello.lua to completion" 0 engine start "$HELLO" --id done --input '{"name":"Ada","n":3,"approval_timeout":0.1}'
serve_bg
assert_exit "hello.lua until it waits for its approval" 3 engine start "$HELLO" --id waits --detach --input '{"name":"Bo","n":2}'
wait_status waits waiting || fail "waits never waited"
wait_true 30 'engine history waits | tail -1 | grep -q SignalWaitStarted' || true
kill "$S"; wait "$S" 2>/dev/null || true
NDONE="$(sql "SELECT max(seq) FROM history WHERE wf_id='done'")"
assert_exit "an untouched database verifies" 0 engine verify --all
assert_contains "both ok" "2 workflows checked: 2 ok, 0 BAD" "$OUT"
assert_exit "verify ID" 0 engine verify done
assert_exit "verify --json" 0 engine verify --all --json
assert_contains "names the events checked" "\"id\":\"done\",\"ok\":true" "$OUT"
assert_exit "verify with neither ID nor --all" 2 engine verify
assert_exit "verify an unknown workflow" 2 engine verify nope
assert_contains "names it" "unknown workflow 'nope'" "$ERR"
heads="$(sql "SELECT hist_seq || ' ' || length(hist_head) || ' ' || dom_seq FROM chain_heads WHERE wf_id='done'")"
assert_eq "its head row holds both heads" "$NDONE 64 $(sql "SELECT max(seq) FROM domain_events WHERE session_id='done'")" \
  "$heads"

# The base database, whole; a fresh copy of it per case (SQLite: the file,
# its WAL copied in first; PostgreSQL: a database made from it as template).
COPIES=()
if on_postgres; then
  BASE="$ENGINE_DB"
else
  sqlite3 "$ENGINE_DB" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
  BASE="$T/base.db"
  cp "$ENGINE_DB" "$BASE"
fi
copy_db() { # NAME: prints the copy's path or URL
  if on_postgres; then
    "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U engine -T "$PG_TEST_DB" "${PG_TEST_DB}_$1"
    COPIES+=("${PG_TEST_DB}_$1")
    echo "postgres://engine@127.0.0.1:$PG_PORT/${PG_TEST_DB}_$1"
  else
    cp "$BASE" "$T/$1.db"
    echo "$T/$1.db"
  fi
}
sql_on() { # DB SQL
  if on_postgres; then "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U engine -d "${1##*/}" -Atqc "$2"
  else sqlite3 "$1" "$2"; fi
}

# damaged NAME SQL WANT [events]: on a copy with SQL applied, history, show
# and verify ID (events, show and verify for a domain event) exit non-zero
# and name WANT
damaged() {
  local name="$1" change="$2" want="$3" reads="history show" db
  [ "${4:-}" == events ] && reads="events show"
  db="$(copy_db "$name")"
  sql_on "$db" "$change" >/dev/null
  for cmd in $reads; do
    assert_exit "$name: $cmd refuses" 2 engine "$cmd" done --db "$db"
    assert_contains "$name: $cmd names it" "$want" "$ERR"
    assert_eq "$name: $cmd prints nothing of it" "" "$OUT"
  done
  assert_exit "$name: verify says BAD" 1 engine verify done --db "$db"
  assert_contains "$name: verify names it" "BAD: $want" "$OUT"
  assert_exit "$name: verify --all too" 1 engine verify --all --db "$db"
  assert_contains "$name: the other one is ok" "1 ok, 1 BAD" "$OUT"
}
damaged alter "UPDATE history SET payload='{\"args\":{\"i\":9,\"name\":\"Eve\"}}' WHERE wf_id='done' AND seq=4" \
  "the history of done is damaged: event #4 does not match its hash"
damaged delete "DELETE FROM history WHERE wf_id='done' AND seq=7" "the history of done is damaged: event #7 is missing"
damaged swap "UPDATE history SET seq=1000 WHERE wf_id='done' AND seq=5; UPDATE history SET seq=5 WHERE wf_id='done' AND
  seq=6; UPDATE history SET seq=6 WHERE wf_id='done' AND seq=1000" "the history of done is damaged: event #5 does not match"
damaged truncate "DELETE FROM history WHERE wf_id='done' AND seq=$NDONE" \
  "the history of done is damaged: event #$NDONE is missing (the history ends at #$((NDONE - 1)); the head recorded for its workflow is #$NDONE)"
damaged truncate_head "DELETE FROM history WHERE wf_id='done' AND seq=$NDONE; UPDATE chain_heads SET hist_seq=hist_seq-1
  WHERE wf_id='done'" "the history of done is damaged: event #$((NDONE - 1)) is not the head recorded for its workflow"
damaged nohead "DELETE FROM chain_heads WHERE wf_id='done'" "the history of done is damaged: no head is recorded for its workflow"
damaged unlinked "UPDATE history SET chain=NULL WHERE wf_id='done' AND seq=2" \
  "the history of done is damaged: event #2 has no hash"
damaged dalter "UPDATE domain_events SET payload='{\"text\":\"forged\"}' WHERE session_id='done' AND seq=2" \
  "the events of done are damaged: event #2 does not match its hash" events
damaged dcut "DELETE FROM domain_events WHERE session_id='done' AND seq=(SELECT max(seq) FROM domain_events
  WHERE session_id='done')" "the events of done are damaged" events

# --- 1 KB of the SQLite page holding the first history rows overwritten
if ! on_postgres; then
  db="$(copy_db page)"
  pg="$(sqlite3 "$db" "SELECT pageno FROM dbstat WHERE name='history' AND pagetype='leaf' ORDER BY path LIMIT 1")"
  psize="$(sqlite3 "$db" 'PRAGMA page_size')"
  # from the start of the page's cells (its header's bytes 5-6), so it lands on rows
  python3 - "$db" "$pg" "$psize" <<'PY'
import random, struct, sys
path, page, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "r+b") as f:
    base = (page - 1) * size
    f.seek(base + (100 if page == 1 else 0) + 5)
    start = struct.unpack(">H", f.read(2))[0] or 65536
    start = min(start, size - 1024)
    f.seek(base + start)
    f.write(random.Random(33).randbytes(1024))
PY
  for cmd in history show; do
    assert_exit "page: $cmd refuses" 2 engine "$cmd" done --db "$db"
    assert_contains "page: $cmd says the history is damaged" "the history of done is damaged" "$ERR"
    assert_eq "page: $cmd prints no shorter history" "" "$OUT"
  done
  assert_exit "page: verify says BAD" 1 engine verify done --db "$db"
  assert_contains "page: verify names it" "BAD: the history of done is damaged" "$OUT"
fi

# --- the API answers 500 naming the damage; a serve asked to run the damaged
# waiting workflow marks it stuck with the first bad seq and replays nothing
db="$(copy_db serve)"
sql_on "$db" "UPDATE history SET payload='{\"args\":{\"i\":9,\"name\":\"Eve\"}}' WHERE wf_id='waits' AND seq=4"
nwaits="$(sql_on "$db" "SELECT count(*) FROM history WHERE wf_id='waits'")"
export ENGINE_DB="$db"
serve_api
code="$(curl -s -o "$T/hist.json" -w '%{http_code}' "$URL/v1/workflows/waits/history")"
assert_eq "GET history of a damaged log: 500" 500 "$code"
assert_contains "naming the first bad seq" "event #4 does not match its hash" "$(cat "$T/hist.json")"
code="$(curl -s -o "$T/wf.json" -w '%{http_code}' "$URL/v1/workflows/waits")"
assert_eq "GET the workflow: 500" 500 "$code"
code="$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/workflows/done/history")"
assert_eq "an intact one still reads" 200 "$code"
assert_exit "the approval is accepted (the workflow waits)" 0 engine signal waits approval '{"approved":true}'
wait_for 60 "the damaged workflow stuck" '[ "$(sql_on "$db" "SELECT status FROM workflows WHERE id='"'waits'"'")" == stuck ]' \
  'sql_on "$db" "SELECT status, error FROM workflows WHERE id='"'waits'"'"' || true
assert_eq "stuck" stuck "$(sql_on "$db" "SELECT status FROM workflows WHERE id='waits'")"
assert_contains "its error names the first bad seq" "event #4 does not match its hash" \
  "$(sql_on "$db" "SELECT error FROM workflows WHERE id='waits'")"
assert_eq "nothing appended to its log (nothing replayed)" "$nwaits" \
  "$(sql_on "$db" "SELECT count(*) FROM history WHERE wf_id='waits'")"
assert_contains "the serve says why" "workflow waits is stuck: the history of waits is damaged: event #4" \
  "$(cat "$T/serve.log")"
kill "$S"; wait "$S" 2>/dev/null || true

# --- kill -9 of a serve during a burst of commits: every chain whole
db="$(copy_db burst)"
export ENGINE_DB="$db"
serve_bg
for i in $(seq 1 30); do
  engine start "$HELLO" --id "b$i" --detach --input '{"name":"K","n":4,"sleep":0.05,"approval_timeout":0.05}' \
    >/dev/null 2>&1 || true
done
sleep 0.5
kill -9 "$S"; wait "$S" 2>/dev/null || true
assert_exit "after kill -9 mid-burst: verify --all" 0 engine verify --all
assert_contains "every one ok" "0 BAD" "$OUT"
serve_bg
wait_for 120 "the burst completed after the restart" \
  '[ "$(sql_on "$db" "SELECT count(*) FROM workflows WHERE id LIKE '"'b%'"' AND status='"'completed'"'")" -ge 30 ]' \
  'sql_on "$db" "SELECT status, count(*) FROM workflows GROUP BY status"' || true
kill "$S"; wait "$S" 2>/dev/null || true
assert_exit "and after it completed: verify --all" 0 engine verify --all
assert_contains "every one ok" "0 BAD" "$OUT"

# --- a database made before the chain: `engine migrate` adds the columns and
# records where each chain starts; the old events are counted, not checked
db="$(copy_db old)"
export ENGINE_DB="$db"
if on_postgres; then
  sql_on "$db" "ALTER TABLE history DROP COLUMN chain; ALTER TABLE domain_events DROP COLUMN chain;
    ALTER TABLE workflows DROP COLUMN hist_from_run, DROP COLUMN hist_from_seq, DROP COLUMN dom_from;
    DROP TABLE chain_heads; UPDATE meta SET value='8' WHERE key='schema_version'"
else
  for c in hist_from_run hist_from_seq dom_from; do
    sqlite3 "$db" "ALTER TABLE workflows DROP COLUMN $c"
  done
  sqlite3 "$db" "ALTER TABLE history DROP COLUMN chain; ALTER TABLE domain_events DROP COLUMN chain;
    DROP TABLE chain_heads; UPDATE meta SET value='6' WHERE key='schema_version'"
fi
assert_exit "migrate --db upgrades it" 0 engine migrate --db "$db"
assert_eq "the upgrade recorded: the waiting one's chain starts at its next event" \
  "1 $((nwaits + 1))" "$(sql_on "$db" "SELECT hist_from_run || ' ' || hist_from_seq FROM workflows WHERE id='waits'")"
assert_exit "an upgraded database verifies" 0 engine verify --all
assert_contains "its old events counted, not checked" "before the chain" "$OUT"
assert_exit "its waiting one is answered" 0 engine signal waits approval '{"approved":true}'
serve_bg
wait_status waits completed 60 || fail "the upgraded workflow did not complete"
kill "$S"; wait "$S" 2>/dev/null || true
assert_exit "its events since the upgrade verify" 0 engine verify waits
checked="$(engine verify waits --json | jget events)"
[ "$checked" -gt 0 ] && pass "the events since the upgrade are checked ($checked)" || fail "no event checked after the upgrade"
sql_on "$db" "UPDATE history SET payload='{}' WHERE wf_id='waits' AND seq=$((nwaits + 2))"
assert_exit "an event after the upgrade altered: BAD" 1 engine verify waits
assert_contains "names it" "event #$((nwaits + 2)) does not match its hash" "$OUT"

for c in "${COPIES[@]}"; do "$PG_BIN/dropdb" -h 127.0.0.1 -p "$PG_PORT" -U engine --force "$c" 2>/dev/null || true; done
finish
