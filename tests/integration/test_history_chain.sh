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
# a serve during a burst of commits leaves every chain whole. SQLite's WAL cut
# inside its last commit, or a committed frame damaged, recovers to one
# earlier commit that verifies and is served on; damaged after a checkpoint,
# its history past the head row is named and never replayed.
source "$(dirname "$0")/lib.sh"
HELLO="$SRC/workflows/hello.lua"

# --- a completed workflow and a waiting one
assert_exit "hello.lua to completion" 0 engine start "$HELLO" --id done --input '{"name":"Ada","n":3,"approval_timeout":0.1}'
serve_bg
assert_exit "hello.lua until it waits for its approval" 3 engine start "$HELLO" --id waits --detach --input '{"name":"Bo","n":2}'
wait_status waits waiting:signal || fail "waits never waited"
wait_true 30 'engine history waits | tail -1 | has_line SignalWaitStarted' || true
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

# the other damages stop the replay too: a row deleted, two rows' seqs swapped
stops_replay() { # NAME SQL WANT: the waiting workflow, damaged so, goes stuck naming WANT, nothing appended
  local db n
  db="$(copy_db "$1")"
  sql_on "$db" "$2" >/dev/null
  n="$(sql_on "$db" "SELECT count(*) FROM history WHERE wf_id='waits'")"
  ENGINE_DB="$db" serve_api
  ENGINE_DB="$db" engine signal waits approval '{"approved":true}' >/dev/null 2>&1
  wait_for 60 "$1: the damaged workflow stuck" '[ "$(sql_on "$db" "SELECT status FROM workflows WHERE id='"'waits'"'")" == stuck ]' \
    'sql_on "$db" "SELECT status, error FROM workflows WHERE id='"'waits'"'"' || true
  assert_contains "$1: stuck, its error naming it" "stuck|the history of waits is damaged: $3" \
    "$(sql_on "$db" "SELECT status, error FROM workflows WHERE id='waits'")"
  assert_eq "$1: nothing appended to its log (nothing replayed)" "$n" \
    "$(sql_on "$db" "SELECT count(*) FROM history WHERE wf_id='waits'")"
  kill "$S"; wait "$S" 2>/dev/null || true
}
stops_replay delete_waits "DELETE FROM history WHERE wf_id='waits' AND seq=3" "event #3 is missing"
stops_replay swap_waits "UPDATE history SET seq=1000 WHERE wf_id='waits' AND seq=2; UPDATE history SET seq=2 WHERE
  wf_id='waits' AND seq=3; UPDATE history SET seq=3 WHERE wf_id='waits' AND seq=1000" "event #2 does not match"

# --- the SQLite WAL cut or damaged before its recovery (SQLite only). A serve
# answers the waiting workflow and is killed with -9, so its commits are only in
# the -wal file; each case is a copy of that database and -wal, cut or damaged,
# then opened. SQLite's recovery keeps the WAL's frames up to the last commit
# frame before the first frame that is missing or fails its checksum, and drops
# the rest: what remains is the state of one commit, history and head row
# together (one transaction), so it verifies, shows no part of a later commit,
# and a serve carries on from it. What the chain cannot tell is that commits
# were lost with their heads (docs/durability.md#the-hash-chain).
if ! on_postgres; then
  db="$T/wal.db"
  cp "$BASE" "$db"
  export ENGINE_DB="$db"
  serve_bg
  assert_exit "wal: the approval is accepted" 0 engine signal waits approval '{"approved":true}'
  wait_status waits completed 60 || fail "wal: waits did not complete"
  kill -9 "$S"; wait "$S" 2>/dev/null || true
  cp "$db" "$T/wal.full"; cp "$db-wal" "$T/wal.full-wal"
  # walcut.py WAL: the WAL's page size and its committed transactions (valid
  # salts and checksums, as SQLite's recovery reads them), as "first last"
  # frame numbers, one a line after the page size
  cat >"$T/walcut.py" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
magic, _, psize, _, s1, s2, c1, c2 = struct.unpack(">8I", b[:32])
def ck(data, a, c):
    w = struct.unpack(("<>"[magic & 1]) + "%dI" % (len(data) // 4), data)
    for i in range(0, len(w), 2):
        a = (a + w[i] + c) & 0xFFFFFFFF
        c = (c + w[i + 1] + a) & 0xFFFFFFFF
    return a, c
a, c = ck(b[:24], 0, 0)
print(psize)
off, n, first = 32, 0, 1
while off + 24 + psize <= len(b):
    _, commit, f1, f2, k1, k2 = struct.unpack(">6I", b[off:off + 24])
    a, c = ck(b[off:off + 8], a, c)
    a, c = ck(b[off + 24:off + 24 + psize], a, c)
    if (f1, f2) != (s1, s2) or (a, c) != (k1, k2):
        break
    n += 1
    off += 24 + psize
    if commit:
        print(first, n)
        first = n + 1
PY
  mapfile -t TXN < <(python3 "$T/walcut.py" "$T/wal.full-wal")
  PSIZE="${TXN[0]}"; TXN=("${TXN[@]:1}")
  NTX="${#TXN[@]}"
  [ "$NTX" -ge 3 ] && pass "wal: the serve's commits are in the -wal ($NTX)" || fail "wal: $NTX commits in the -wal"
  frame_end() { echo $((32 + $1 * (24 + PSIZE))); } # the WAL's size up to frame N's end
  wal_copy() { # NAME: a copy of the killed serve's database and -wal
    cp "$T/wal.full" "$T/$1.db"; cp "$T/wal.full-wal" "$T/$1.db-wal"; rm -f "$T/$1.db-shm"
    echo "$T/$1.db"
  }
  # the durable state, as a text to compare (read after engine verify made the recovery)
  state_of() {
    sqlite3 "$1" "SELECT wf_id,run,seq,type,chain FROM history ORDER BY 1,2,3; SELECT * FROM chain_heads ORDER BY 1;
      SELECT id,status,run FROM workflows ORDER BY 1; SELECT session_id,seq,chain FROM domain_events ORDER BY 1,2;
      SELECT wf_id,kind,seq FROM tasks ORDER BY 1,2,3"
  }
  # the state when the WAL ends with transaction K (1-based): SQLite's recovery of a clean cut
  state_at() {
    local c; c="$(wal_copy "at$1")"
    truncate -s "$(frame_end "${TXN[$(($1 - 1))]#* }")" "$c-wal"
    engine verify --all --db "$c" >/dev/null || fail "wal: the clean cut after commit $1 does not verify"
    state_of "$c"
  }
  full="$(c="$(wal_copy whole)"; engine verify --all --db "$c" >/dev/null; state_of "$c")"
  read -r lf ll <<<"${TXN[$((NTX - 1))]}"
  [ "$ll" -gt "$lf" ] || fail "wal: the last commit is one frame ($lf); no frame boundary inside it"
  before_last="$(state_at $((NTX - 1)))"
  [ "$before_last" != "$full" ] && pass "wal: the last commit changes the state" || fail "wal: the last commit changed nothing"
  # wal_case NAME WANT-STATE: the copy as it is verifies, and holds exactly WANT
  wal_case() {
    assert_exit "wal $1: verify --all" 0 engine verify --all --db "$T/$1.db"
    assert_contains "wal $1: every chain ok" "0 BAD" "$OUT"
    assert_eq "wal $1: the state of the last whole commit before the cut, nothing of the one cut" "$2" \
      "$(state_of "$T/$1.db")"
  }
  c="$(wal_copy boundary)"; truncate -s "$(frame_end "$lf")" "$c-wal"
  wal_case boundary "$before_last"
  c="$(wal_copy midframe)"; truncate -s $(( $(frame_end $((ll - 1))) + PSIZE / 2 )) "$c-wal"
  wal_case midframe "$before_last"
  # a frame of a committed transaction (the one before the last) damaged:
  # its checksum fails, so it and every frame after it are dropped
  read -r df _ <<<"${TXN[$((NTX - 2))]}"
  flip_frame() { # WAL FRAME: 8 bytes of the frame's page inverted
    python3 - "$1" "$(( $(frame_end $(($2 - 1))) + 24 + PSIZE / 2 ))" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2])); b = f.read(8); f.seek(int(sys.argv[2])); f.write(bytes(x ^ 0xFF for x in b))
PY
  }
  before_damage="$(state_at $((NTX - 2)))"
  c="$(wal_copy flipped)"; flip_frame "$c-wal" "$df"
  wal_case flipped "$before_damage"
  # the same after the whole WAL was copied into the database (a checkpoint
  # that ran before the crash, the WAL not started over yet): the frames before
  # the damaged one are older than the database's pages they cover, and the
  # pages only later commits wrote are the database's: the waiting workflow's
  # newer history beside its older head row. Named, and nothing of it shown.
  c="$(wal_copy checkpointed)"; cp "$c-wal" "$T/ck.wal"
  sqlite3 "$c" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
  cp "$T/ck.wal" "$c-wal"; flip_frame "$c-wal" "$df"
  assert_exit "wal checkpointed: verify says BAD" 1 engine verify --all --db "$c"
  assert_contains "wal checkpointed: names the history past its head" \
    "BAD: the history of waits is damaged: event #$(( $(sqlite3 "$T/at$((NTX - 2)).db" \
      "SELECT hist_seq FROM chain_heads WHERE wf_id='waits'") + 1 )) is past the head recorded for its workflow" "$OUT"
  assert_exit "wal checkpointed: history refuses" 2 engine history waits --db "$c"
  assert_contains "wal checkpointed: history names it" "is past the head recorded for its workflow" "$ERR"
  assert_eq "wal checkpointed: history prints nothing of it" "" "$OUT"
  # such a log is never replayed: the state after the commit before the last
  # (the workflow running) with the head row of the commit before that
  c="$(wal_copy stale)"; truncate -s "$(frame_end "${TXN[$((NTX - 2))]#* }")" "$c-wal"
  engine verify --all --db "$c" >/dev/null || fail "wal stale: the clean cut does not verify"
  old="$(sqlite3 "$T/at$((NTX - 2)).db" "SELECT hist_head || ' ' || hist_seq FROM chain_heads WHERE wf_id='waits'")"
  sqlite3 "$c" "UPDATE chain_heads SET hist_head='${old% *}', hist_seq=${old#* } WHERE wf_id='waits'"
  nstale="$(sqlite3 "$c" "SELECT count(*) FROM history WHERE wf_id='waits'")"
  [ "$(sqlite3 "$c" "SELECT status FROM workflows WHERE id='waits'")" != completed ] || fail "wal stale: waits completed"
  assert_exit "wal stale: verify says BAD" 1 engine verify waits --db "$c"
  assert_contains "wal stale: names it" "event #$(( ${old#* } + 1 )) is past the head recorded" "$OUT"
  export ENGINE_DB="$c"
  serve_bg
  wait_for 60 "wal stale: the workflow stuck" '[ "$(sqlite3 "$c" "SELECT status FROM workflows WHERE id='"'waits'"'")" == stuck ]' \
    'sqlite3 "$c" "SELECT status, error FROM workflows WHERE id='"'waits'"'"' || true
  kill "$S"; wait "$S" 2>/dev/null || true
  assert_contains "wal stale: stuck, its error naming the first event past the head" \
    "stuck|the history of waits is damaged: event #$(( ${old#* } + 1 )) is past the head" \
    "$(sqlite3 "$c" "SELECT status || '|' || error FROM workflows WHERE id='waits'")"
  assert_eq "wal stale: nothing appended (nothing replayed)" "$nstale" \
    "$(sqlite3 "$c" "SELECT count(*) FROM history WHERE wf_id='waits'")"
  # a serve carries on from the recovered state: the cut one completes
  export ENGINE_DB="$T/boundary.db"
  serve_bg
  wait_status waits completed 60 || fail "wal boundary: waits did not complete when served again"
  kill "$S"; wait "$S" 2>/dev/null || true
  assert_exit "wal boundary: served again, verify --all" 0 engine verify --all
  assert_contains "wal boundary: every chain ok" "0 BAD" "$OUT"
fi

# --- kill -9 of a serve during a burst of commits: every chain whole
db="$(copy_db burst)"
export ENGINE_DB="$db"
serve_bg
for i in $(seq 1 30); do
  engine start "$HELLO" --id "b$i" --detach --input '{"name":"K","n":4,"sleep":0.05,"approval_timeout":0.05}' \
    >/dev/null 2>&1 || true
done
sleep 0.5 # paces the kill, not a wait for a state: any moment of the burst will do
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
