#!/usr/bin/env bash
# Bad input gets one clear line on stderr, exit code 2, and leaves the database
# exactly as it was.
source "$(dirname "$0")/lib.sh"
HELLO="$SRC/workflows/hello.lua"
db_sum() { if [ -f "$ENGINE_DB" ]; then sha256sum "$ENGINE_DB" | cut -c1-64; else echo none; fi; }
one_line() { [ "$(printf '%s' "$ERR" | grep -c .)" == 1 ] && pass "$1: one line" || fail "$1: stderr is not one line: $ERR"; }

# --- before any database exists
assert_exit "malformed --input" 2 engine start "$HELLO" --input '{"n": 3,'
assert_contains "names the problem" "--input is not valid JSON" "$ERR"; one_line "malformed --input"
assert_eq "no database was created" none "$(db_sum)"
assert_exit "--input @missing-file" 2 engine start "$HELLO" --input @"$T/nope.json"
assert_exit "missing script" 2 engine start "$T/nope.lua"
assert_contains "names the script" "nope.lua" "$ERR"; one_line "missing script"
printf 'local wf = require "workflow"\nreturn function(input)\n  local x = = 1\nend\n' >"$T/bad.lua"
assert_exit "script with a syntax error" 2 engine start "$T/bad.lua"
assert_contains "names file and line" "bad.lua:3:" "$ERR"; one_line "syntax error"
assert_exit "unknown command" 2 engine frobnicate
assert_exit "unknown option" 2 engine start "$HELLO" --frob
assert_exit "show without a database" 2 engine show x
assert_contains "says there is no database" "no database" "$ERR"

# --- with a database holding one finished workflow
engine start "$HELLO" --id done --input '{"n":1,"sleep":0,"approval_timeout":0}' >/dev/null 2>&1 || true
assert_eq "setup workflow completed" completed "$(status done)"
before="$(db_sum)"
for cmd in "show nope" "history nope" "events nope" "replay nope" "cancel nope" "signal nope approval"; do
  assert_exit "unknown workflow: $cmd" 2 engine $cmd
  assert_contains "unknown workflow named ($cmd)" "unknown workflow 'nope'" "$ERR"
done
assert_exit "signal to a finished workflow" 2 engine signal done approval '{}'
assert_contains "says it is finished" "is completed" "$ERR"; one_line "signal to finished"
assert_exit "cancel a finished workflow" 2 engine cancel done
assert_exit "signal payload that is not JSON" 2 engine signal done approval '{nope'
assert_exit "syntax error with a database" 2 engine start "$T/bad.lua" --id bad
assert_exit "list --status bogus" 2 engine list --status bogus
assert_exit "serve --listen (not built yet)" 2 engine serve --listen 127.0.0.1:9
assert_eq "database unchanged by all of the above" "$before" "$(db_sum)"
assert_eq "no workflow was half-created" "" "$(engine list | grep -w bad || true)"

# --- a second serve on the same database
bg S engine serve
sleep 0.3
assert_exit "second engine serve" 2 engine serve
assert_contains "names the holder" "already served by engine serve (pid $S)" "$ERR"; one_line "second serve"
kill "$S"; wait "$S" 2>/dev/null || true

# --- a database locked by another process
sync
before="$(db_sum)"
( echo "BEGIN EXCLUSIVE; SELECT 1;"; sleep 4; echo "COMMIT;" ) | sqlite3 "$ENGINE_DB" >/dev/null &
L=$!; PIDS+=("$L")
sleep 0.5
ENGINE_BUSY_TIMEOUT_MS=300 assert_exit "locked database" 2 env ENGINE_BUSY_TIMEOUT_MS=300 "$ENGINE" signal done approval '{}'
assert_contains "says it is locked" "locked" "$ERR"; one_line "locked database"
wait "$L" 2>/dev/null || true

# --- a corrupt database and a foreign SQLite database are refused, untouched
head -c 8192 /dev/urandom >"$T/corrupt.db"
sum="$(sha256sum "$T/corrupt.db")"
assert_exit "corrupt database: start" 2 engine start "$HELLO" --db "$T/corrupt.db"
assert_contains "says corrupt" "corrupt or not an engine database" "$ERR"; one_line "corrupt"
assert_exit "corrupt database: list" 2 engine list --db "$T/corrupt.db"
assert_eq "corrupt file unchanged" "$sum" "$(sha256sum "$T/corrupt.db")"
sqlite3 "$T/foreign.db" "CREATE TABLE notes(x); INSERT INTO notes VALUES ('mine');"
sum="$(sha256sum "$T/foreign.db")"
assert_exit "foreign SQLite database" 2 engine start "$HELLO" --db "$T/foreign.db"
assert_contains "says not an engine database" "not an engine database" "$ERR"
assert_eq "foreign file unchanged" "$sum" "$(sha256sum "$T/foreign.db")"

# --- every command answers --help with exit 0
for cmd in start serve signal cancel list show events history replay; do
  assert_exit "$cmd --help" 0 engine $cmd --help
  assert_contains "$cmd --help prints usage" "usage: engine $cmd" "$OUT"
done
finish
