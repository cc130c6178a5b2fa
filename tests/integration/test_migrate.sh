#!/usr/bin/env bash
# engine migrate: a SQLite database of 100 finished and 20 waiting
# workflows (random draws, checkpoints, activities, timers, domain events,
# buffered signals, a cancelled one, a token, a schedule, memory entries) copied to a private
# PostgreSQL (scripts/start-postgres) and back to a new SQLite file: every
# workflow's `show --json` and `history --json` identical at each step, every
# table's rows identical after the round trip, and the waiting workflows carry
# on after the move on both copies with the same results. Refusals: a
# non-empty target, the same database twice, a missing source, a serve on
# the source, half a pair of flags; a copy killed with -9 mid-way or failing
# on a write leaves the target empty, and a second try succeeds. `engine
# migrate --db` applies the schema; a newer schema is refused.
source "$(dirname "$0")/lib.sh"
MIX="$SRC/tests/integration/wf/migrate_mix.lua"
A="$T/a.db" B="$T/b.db"
export ENGINE_BUSY_TIMEOUT_MS=30000
export ENGINE_DATA_DIR="$T/data"
# 100 and 20 (the history table still spans two of migrate's 1,000-row
# pages): each workflow's show and history are read three times, one process
# each, which took over 10 minutes for 1,100, and for 330, on a busy 2-core
# machine. MIGRATE_DONE=1000 MIGRATE_WAITING=100 is the full size.
NDONE=${MIGRATE_DONE:-100} NWAIT=${MIGRATE_WAITING:-20}

own_pg_cluster
newdb() { "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U engine "$1"; echo "postgres://engine@127.0.0.1:$PGPORT/$1"; }
P="$(newdb moved)"

# serve DB until WANT of its workflows have STATUS (and, with a fifth
# argument, WANT2 have STATUS2: a short timer shows as waiting too)
settle() {
  local db="$1" want="$2" status="$3" want2="${4:-}" status2="${5:-}"
  ENGINE_DB="$db" "$ENGINE" serve 2>>"$T/serve.err" &
  local s=$!
  PIDS+=("$s")
  local n=0 n2=0
  wait_for 300 "$want workflows $status${want2:+ and $want2 $status2} on $(basename "$db")" \
    'n="$(count "$db" "$status")"; [ -z "$want2" ] || n2="$(count "$db" "$status2")"
    [ "$n" -ge "$want" ] && { [ -z "$want2" ] || [ "$n2" -ge "$want2" ]; }' 'echo "$n $status, $n2 $status2"' || true
  kill "$s"; wait "$s" 2>/dev/null || true
  assert_eq "$want workflows $status on $(basename "$db")" "$want" "$n"
  [ -z "$want2" ] || assert_eq "$want2 workflows $status2 on $(basename "$db")" "$want2" "$n2"
}
# every workflow's row as engine list shows it, and the show and history of
# one in six (both kinds, the cancelled one among them), one file per
# database: each read is a process, and all of them took 720 (the tables'
# own rows are compared whole, below)
snapshot() {
  local db="$1" out="$2"
  ENGINE_DB="$db" "$ENGINE" list --json | sort >"$out"
  sed 's/^{"id":"\([^"]*\)".*/\1/' "$out" >"$out.ids"
  while read -r id; do
    { echo "== $id"; ENGINE_DB="$db" "$ENGINE" show "$id" --json; echo; ENGINE_DB="$db" "$ENGINE" history "$id" --json; echo; } >>"$out"
  done < <(sed -n "1~6p" "$out.ids"; grep -x "wait-$NWAIT" "$out.ids")
}
TABLES="meta code workflows chain_heads history run_modules tasks signals domain_events event_feed tokens slots counters deliveries schedules memory"
# every table of a SQLite database as text, key order (what the round trip must keep)
tables() {
  local t key cols
  for t in $TABLES; do
    echo "== $t"
    key=rowid cols='*'
    case $t in history) key="wf_id,run,seq" ;; run_modules) key="wf_id,run,module" ;; domain_events) key="session_id,seq" ;;
      meta) key=key ;; code) key=hash ;; workflows) key=id ;; chain_heads) key=wf_id ;; tokens|counters|schedules) key=name ;; memory) key=id ;; tasks) cols='rowid,*' ;; esac
    sqlite3 -header "$1" "SELECT $cols FROM $t ORDER BY $key"
  done
}
# same_json A B: the two JSON texts mean the same (key order aside)
same_json() {
  lua5.4 - "$1" "$2" <<'LUA'
local c = require "cjson"
local function eq(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then return a == b end
  for k, v in pairs(a) do if not eq(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end
os.exit(eq(c.decode(arg[1]), c.decode(arg[2])) and 0 or 1)
LUA
}
result_of() { ENGINE_DB="$1" "$ENGINE" show "$2" --json | jget result; }
# list --json prints a JSON object a line
count() { ENGINE_DB="$1" "$ENGINE" list --status "$2" --json | grep -c '^{' || true; }

# ---- the database to move ----
# a detached start exits 3 (the workflow is running); its errors go to start.err
seq "$NDONE" | xargs -P 4 -I{} "$ENGINE" start "$MIX" --db "$A" --id "done-{}" --detach --input '{"i":{}}' \
  >/dev/null 2>>"$T/start.err" || true
seq "$NWAIT" | xargs -P 4 -I{} "$ENGINE" start "$MIX" --db "$A" --id "wait-{}" --detach --input '{"i":{},"wait":true}' \
  >/dev/null 2>>"$T/start.err" || true
assert_eq "every start accepted" "" "$(cat "$T/start.err")"
settle "$A" "$NDONE" completed "$NWAIT" waiting
for i in 1 2 3; do engine signal "wait-$i" other "{\"buffered\":$i}" --db "$A" >/dev/null 2>&1; done
engine cancel "wait-$NWAIT" --db "$A" >/dev/null 2>&1
engine token create mover --scopes read --db "$A" >/dev/null 2>&1
assert_exit "a schedule" 0 engine schedule create nightly --cron '0 3 * * *' --workflow "$MIX" --input '{"i":0}' --db "$A"
# memory entries (docs/memory.md): a live one and a revoked one, NULLs and all
sqlite3 "$A" "INSERT INTO memory VALUES('mem-1','knowledge',NULL,'a fact',NULL,'s1','r1','local:a',1000,NULL,NULL,NULL),
  ('mem-2','preferences','local:a','terse answers','said so','s2','r2','local:b',2000,3000,'token:ops','stale')"
settle "$A" 1 cancelled
snapshot "$A" "$T/a.snap"
assert_eq "snapshot has every workflow" "$((NDONE + NWAIT))" "$(wc -l <"$T/a.snap.ids")"

# ---- refusals ----
assert_exit "half a pair of flags" 2 engine migrate --from "$A"
assert_contains "names the pair" "--from and --to go together" "$ERR"
assert_exit "the same database twice" 2 engine migrate --from "$A" --to "$T/./a.db"
assert_contains "says so" "the same database" "$ERR"
assert_exit "a missing source" 2 engine migrate --from "$T/nope.db" --to "$P"
assert_contains "names it" "no database at $T/nope.db" "$ERR"
n_serving="$(grep -c "engine: serving" "$T/serve.err" || true)"
ENGINE_DB="$A" "$ENGINE" serve 2>>"$T/serve.err" & S=$!; PIDS+=("$S")
wait_serving "$T/serve.err" "$n_serving"
assert_exit "a serve holds the source" 2 engine migrate --from "$A" --to "$P"
assert_contains "says who" "in use" "$ERR"
kill "$S"; wait "$S" 2>/dev/null || true
assert_eq "the refused target is still empty" "0" \
  "$("$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U engine -d moved -Atqc 'SELECT count(*) FROM workflows' 2>/dev/null || echo 0)"

# ---- a copy cut short: kill -9 mid-way, an injected write failure ----
assert_exit "killed after 200 rows" 137 env ENGINE_CRASH=migrate.row:200 "$ENGINE" migrate --from "$A" --to "$P"
assert_eq "nothing of it in the target" "0" \
  "$("$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U engine -d moved -Atqc 'SELECT count(*) FROM history')"
assert_exit "killed before the commit" 137 env ENGINE_CRASH=migrate.copied:1 "$ENGINE" migrate --from "$A" --to "$P"
assert_eq "nothing of it in the target" "0" \
  "$("$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U engine -d moved -Atqc 'SELECT count(*) FROM workflows')"
assert_exit "a write fails" 2 env ENGINE_STORE_FAIL=workflow:5 "$ENGINE" migrate --from "$A" --to "$P"
assert_contains "names the failure" "injected" "$ERR"
assert_contains "and what it left" "nothing was written to" "$ERR"
# text an old engine recorded that is not UTF-8: the copy stops, naming it,
# rather than store U+FFFD where the source holds other bytes
cp "$A" "$T/bad.db"
sqlite3 "$T/bad.db" "UPDATE workflows SET script_name = CAST(X'2f6eff2e6c7561' AS TEXT) WHERE id = (SELECT min(id) FROM workflows)"
assert_exit "text that is not UTF-8" 2 engine migrate --from "$T/bad.db" --to "$P"
assert_contains "names the problem" "not UTF-8" "$ERR"
assert_eq "nothing of it in the target" "0" \
  "$("$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U engine -d moved -Atqc 'SELECT count(*) FROM workflows')"

# ---- SQLite -> PostgreSQL ----
assert_exit "migrate to PostgreSQL" 0 engine migrate --from "$A" --to "$P"
assert_contains "every table checked" "every table's count and SHA-256 match" "$OUT"
assert_contains "history rows counted" "history" "$OUT"
assert_exit "a second copy into it is refused" 2 engine migrate --from "$A" --to "$P"
assert_contains "not empty" "is not empty" "$ERR"
assert_eq "a buffered signal moved with its workflow" "1" "$(ENGINE_DB="$P" "$ENGINE" show wait-2 --json | jget buffered_signals)"
snapshot "$P" "$T/p.snap"
if cmp -s "$T/a.snap" "$T/p.snap"; then pass "show and history of every workflow identical on PostgreSQL"
else fail "PostgreSQL differs: $(diff "$T/a.snap" "$T/p.snap" | sed -n 1,5p)"; fi

# ---- PostgreSQL -> SQLite ----
assert_exit "migrate back to SQLite" 0 engine migrate --from "$P" --to "$B"
snapshot "$B" "$T/b.snap"
if cmp -s "$T/a.snap" "$T/b.snap"; then pass "show and history of every workflow identical after the round trip"
else fail "the round trip differs: $(diff "$T/a.snap" "$T/b.snap" | sed -n 1,5p)"; fi
# a table the schema gained must be in engine/store/store.c's list (and here), or it is not moved
assert_eq "the tables compared are the schema's" "$(echo $TABLES | tr ' ' '\n' | sort | tr '\n' ' ')" \
  "$(sqlite3 "$A" "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name" | tr '\n' ' ')"
tables "$A" >"$T/a.tables"; tables "$B" >"$T/b.tables"
if cmp -s "$T/a.tables" "$T/b.tables"; then pass "every table's rows identical after the round trip ($(wc -l <"$T/a.tables") lines)"
else fail "tables differ: $(diff "$T/a.tables" "$T/b.tables" | sed -n 1,5p)"; fi

# ---- the waiting ones carry on after the move, alike on both copies ----
for db in "$P" "$B"; do
  seq $((NWAIT - 1)) | xargs -P 4 -I{} env ENGINE_DB="$db" "$ENGINE" signal "wait-{}" go '{"n":{}}' >/dev/null 2>&1 \
    || fail "signals to $db: $(ENGINE_DB="$db" "$ENGINE" signal wait-1 go '{"n":1}' 2>&1)"
  settle "$db" $((NDONE + NWAIT - 1)) completed
done
r_p="$(result_of "$P" wait-7)"
assert_contains "a moved workflow finished with its signal" '"n":7' "$r_p"
same=1
for i in $(seq $((NWAIT - 1))); do
  same_json "$(result_of "$P" "wait-$i")" "$(result_of "$B" "wait-$i")" || { same=0; echo "# wait-$i differs"; }
done
assert_eq "every moved workflow's result the same on both copies" 1 "$same"
assert_contains "the token moved" "mover" "$(ENGINE_DB="$B" "$ENGINE" token list 2>&1)"
assert_contains "the schedule moved" "nightly" "$(ENGINE_DB="$P" "$ENGINE" schedule list 2>&1)"

# ---- engine migrate --db: the schema ----
assert_exit "migrate --db a new file" 0 engine migrate --db "$T/new.db"
assert_contains "prints the version" "schema version" "$OUT"
sqlite3 "$T/new.db" "UPDATE meta SET value='99' WHERE key='schema_version'"
assert_exit "a newer schema is refused" 2 engine migrate --db "$T/new.db"
assert_contains "naming the versions" "99" "$ERR"
finish
