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
assert_exit "serve --listen with an address that is not HOST:PORT" 2 engine serve --listen nonsense
assert_contains "naming it" "expected HOST:PORT" "$ERR"
assert_eq "database unchanged by all of the above" "$before" "$(db_sum)"
assert_eq "no workflow was half-created" "" "$(engine list | grep -w bad || true)"

# --- a second serve on the same database
serve_bg
assert_exit "second engine serve" 2 engine serve
assert_contains "names the holder" "already served by engine serve (pid $S)" "$ERR"; one_line "second serve"
kill "$S"; wait "$S" 2>/dev/null || true

# --- a database locked by another process
sync
before="$(db_sum)"
python3 "$SRC/tests/integration/hold_lock.py" "$ENGINE_DB" 4 >"$T/lock.out" &
L=$!; PIDS+=("$L")
wait_true 30 'grep -q locked "$T/lock.out"'
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

# --- payload limits: checked before anything is written (ENGINE_MAX_PAYLOAD_BYTES, default 4 MiB)
fresh="$T/fresh.db"
head -c $((50 * 1024 * 1024)) /dev/zero | tr '\0' 'x' | sed 's/^/"/; s/$/"/' >"$T/big.json"
assert_exit "a 50 MB --input @file" 2 engine start "$HELLO" --db "$fresh" --detach --input @"$T/big.json"
assert_contains "names size and limit" "is 52428802 bytes, more than the limit of 4194304 bytes (ENGINE_MAX_PAYLOAD_BYTES)" "$ERR"
one_line "50 MB input"
assert_eq "no database was created for it" no "$([ -e "$fresh" ] && echo yes || echo no)"
assert_exit "a 50 MB --input from a pipe" 2 engine start "$HELLO" --db "$fresh" --detach --input @<(cat "$T/big.json")
assert_contains "a pipe is cut at the limit" "more than the limit of 4194304 bytes" "$ERR"
assert_exit "a small --input from a pipe is fine" 0 engine start "$HELLO" --db "$fresh" --id piped \
  --input @<(echo '{"n":1,"sleep":0,"approval_timeout":0}')
rm -f "$fresh"*
before="$(db_sum)"
big="\"$(head -c 3000 /dev/zero | tr '\0' 'y')\""
ENGINE_MAX_PAYLOAD_BYTES=2048 assert_exit "--input over ENGINE_MAX_PAYLOAD_BYTES" 2 \
  env ENGINE_MAX_PAYLOAD_BYTES=2048 "$ENGINE" start "$HELLO" --detach --input "$big"
assert_contains "names the configured limit" "--input is 3002 bytes, more than the limit of 2048 bytes" "$ERR"
bg W engine start "$HELLO" --id sig-target --input '{"n":1,"sleep":0,"approval_timeout":600}'
wait_status sig-target waiting:signal 30 || fail "sig-target never waited"
kill "$W"; wait "$W" 2>/dev/null || true
sync
before="$(db_sum)"
assert_exit "signal payload over the limit" 2 env ENGINE_MAX_PAYLOAD_BYTES=2048 "$ENGINE" signal sig-target approval "$big"
assert_contains "names the signal payload" "the signal payload is 3002 bytes, more than the limit of 2048 bytes" "$ERR"
one_line "big signal"
assert_exit "a bad ENGINE_MAX_PAYLOAD_BYTES" 2 env ENGINE_MAX_PAYLOAD_BYTES=lots "$ENGINE" signal sig-target approval '{}'
assert_contains "names the variable" "ENGINE_MAX_PAYLOAD_BYTES must be a number of bytes" "$ERR"

# --- invalid UTF-8 and NUL bytes in inputs, payloads and signal names (RFC 8259: JSON text is UTF-8)
assert_exit "--input with invalid UTF-8" 2 engine start "$HELLO" --detach --input $'{"name":"\xff"}'
assert_contains "says not UTF-8" "--input is not UTF-8: byte 10 (0xff)" "$ERR"; one_line "invalid UTF-8"
printf '{"name":"a\xc0\xafb"}' >"$T/overlong.json"
assert_exit "--input @file with an overlong sequence" 2 engine start "$HELLO" --detach --input @"$T/overlong.json"
assert_contains "overlong is not UTF-8" "not UTF-8: byte 11 (0xc0)" "$ERR"
printf '{"n":1}\0{"garbage":' >"$T/nul.json"
assert_exit "--input @file with a NUL byte" 2 engine start "$HELLO" --detach --input @"$T/nul.json"
assert_contains "names the NUL byte" "--input contains a NUL byte at byte 8" "$ERR"; one_line "NUL input"
assert_exit "--input with a number JSON allows but no double holds" 2 engine start "$HELLO" --detach --input '{"n":1e999}'
assert_contains "says out of range" "out of range" "$ERR"
assert_exit "signal payload with invalid UTF-8" 2 engine signal sig-target approval $'"\xed\xa0\x80"'
assert_contains "payload not UTF-8" "the signal payload is not UTF-8" "$ERR"
assert_exit "signal name with invalid UTF-8" 2 engine signal sig-target $'appr\xffoval' '{}'
assert_contains "names the rule" "invalid signal name" "$ERR"; one_line "bad signal name"
assert_exit "signal name with an escape" 2 engine signal sig-target $'approval\e[2J' '{}'
assert_contains "a control character" "a control character at byte 9" "$ERR"
assert_exit "signal name with a newline" 2 engine signal sig-target $'approval\nx' '{}'
assert_exit "empty signal name" 2 engine signal sig-target '' '{}'
assert_exit "signal name over 256 bytes" 2 engine signal sig-target "$(printf 'n%.0s' $(seq 300))" '{}'
assert_contains "says how long" "300 bytes, more than 256" "$ERR"
assert_exit "approve --reason with invalid UTF-8" 2 engine approve sig-target --reason $'ok \xfe'
assert_contains "names the reason" "approve: invalid reason: byte 4 is not UTF-8" "$ERR"
assert_exit "approve --reason with an escape sequence" 2 engine approve sig-target --reason $'ok \e[2J'
assert_contains "names the control character" "approve: invalid reason: a control character at byte 4" "$ERR"
assert_exit "approve --reason of 5,000 bytes" 2 engine approve sig-target --reason "$(head -c 5000 /dev/zero | tr '\0' x)"
assert_contains "names the size" "the reason is 5000 bytes, more than 4096" "$ERR"
assert_exit "an approver name with a control character" 2 env USER=$'eve\rmallory' "$ENGINE" approve sig-target --db "$ENGINE_DB" --reason ok
assert_contains "names the approver" "approve: invalid approver: a control character at byte 10" "$ERR"
assert_eq "database unchanged by the refused payloads and names" "$before" "$(db_sum)"
# an escaped NUL is legal JSON: carried by length, never cut at it
printf 'return function(input) return input end\n' >"$T/echo.lua"
assert_exit "an escaped NUL in --input" 0 env USER=ada "$ENGINE" start "$T/echo.lua" --id echo-nul --input '{"s":"a\u0000b","e":"\u00e9"}'
assert_eq "the workflow gets it whole (and who started it, with what grants)" '{"e":"é","identity":"local:ada","s":"a\u0000b","starterGrants":"*"}' "$OUT"

# --- the workflow file: a regular file returning a function, checked before anything is written
rm -f "$T/nodb.db"*
mkfifo "$T/fifo.lua"
assert_exit "a FIFO as the workflow file (no hang)" 2 timeout 20 "$ENGINE" start "$T/fifo.lua" --db "$T/nodb.db"
assert_contains "says FIFO" "workflow script $T/fifo.lua is a FIFO, not a file" "$ERR"; one_line "FIFO script"
assert_exit "a FIFO as replay --script (no hang)" 2 timeout 20 "$ENGINE" replay done --script "$T/fifo.lua"
assert_contains "replay says FIFO" "is a FIFO, not a file" "$ERR"
mkdir -p "$T/modfifo" && mkfifo "$T/modfifo/helper.lua"
printf 'local h = require "helper"\nreturn function() return h end\n' >"$T/modfifo/main.lua"
assert_exit "a FIFO where a module is (no hang)" 2 timeout 20 "$ENGINE" start "$T/modfifo/main.lua" --db "$T/nodb.db"
assert_contains "the module's place is named as a FIFO" "require 'helper': $T/modfifo/helper.lua is a FIFO, not a file" "$ERR"
mkdir "$T/dir.lua"
assert_exit "a directory as the workflow file" 2 engine start "$T/dir.lua" --db "$T/nodb.db"
assert_contains "says directory" "is a directory, not a file" "$ERR"
assert_exit "a directory as --input" 2 engine start "$HELLO" --detach --db "$T/nodb.db" --input @"$T/dir.lua"
assert_contains "says directory (input)" "--input: $T/dir.lua is a directory" "$ERR"
printf 'local wf = require "workflow"\nreturn 42\n' >"$T/number.lua"
assert_exit "a script returning a number" 2 engine start "$T/number.lua" --db "$T/nodb.db"
assert_contains "says what it returns" "must return a function(input), but it returns a number" "$ERR"
one_line "non-function"
printf 'local helper = require "no_such_helper"\nreturn function() end\n' >"$T/missing_mod.lua"
assert_exit "a script whose require fails while loading" 2 engine start "$T/missing_mod.lua" --db "$T/nodb.db"
assert_contains "says it fails while loading" "fails while loading" "$ERR"
assert_eq "no database for any of them" no "$([ -e "$T/nodb.db" ] && echo yes || echo no)"
before="$(db_sum)"
assert_exit "a non-function script with a database" 2 engine start "$T/number.lua" --id numbered
assert_eq "no failed row left" "" "$(engine list | grep -w numbered || true)"
assert_eq "database unchanged by the bad scripts" "$before" "$(db_sum)"

# --- a damaged page: every read is all or an error, never a shorter answer with exit 0
printf 'local wf = require "workflow"\nreturn function(input)\n  for i = 1, input.n do\n    wf.checkpoint("c" .. i, function() return string.rep("h", 300) end)\n    wf.emit("agent.message", {text = string.rep("e", 300)})\n  end\n  return "done"\nend\n' >"$T/long.lua"
engine start "$T/long.lua" --db "$T/damaged.db" --id long --input '{"n":200}' >/dev/null 2>&1
sqlite3 "$T/damaged.db" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null
page() { sqlite3 "$T/damaged.db" "SELECT pageno FROM dbstat WHERE name='$1' AND pagetype='leaf' ORDER BY pageno LIMIT 1 OFFSET 5"; }
psize="$(sqlite3 "$T/damaged.db" 'PRAGMA page_size')"
hp="$(page history)"; dp="$(page domain_events)"
[ -n "$hp" ] && [ -n "$dp" ] && pass "history and events span pages ($hp, $dp)" || fail "no leaf pages to damage"
for p in $hp $dp; do
  python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(($p-1)*$psize+8); f.write(b'\xde\xad\xbe\xef'*64)" "$T/damaged.db"
done
assert_exit "history of a damaged database" 2 engine history long --db "$T/damaged.db"
assert_eq "prints no partial history" "" "$OUT"
assert_contains "says the read failed" "cannot read the history of long: the history of long is damaged: load history: database disk image is malformed" "$ERR"
one_line "damaged history"
assert_exit "history --json of a damaged database" 2 engine history long --json --db "$T/damaged.db"
assert_exit "show of a damaged database" 2 engine show long --db "$T/damaged.db"
assert_eq "show prints no short count" "" "$OUT"
assert_contains "show says the read failed" "malformed" "$ERR"
assert_exit "events of a damaged database" 2 engine events long --db "$T/damaged.db"
assert_contains "events says the read failed" "cannot read the events of long" "$ERR"

# --- a database on a read-only file system: say so, not "already served by cannot open ..."
mkdir -p "$T/ro"
if mount -t tmpfs -o size=8m tmpfs "$T/ro" 2>/dev/null; then
  cp "$ENGINE_DB" "$T/ro/engine.db"
  mount -o remount,ro "$T/ro"
  assert_exit "serve on a read-only file system" 2 engine serve --db "$T/ro/engine.db"
  assert_contains "says read-only" "serve: cannot serve $T/ro/engine.db: the database $T/ro/engine.db is read-only (Read-only file system)" "$ERR"
  one_line "read-only serve"
  assert_exit "start into a read-only directory" 2 engine start "$HELLO" --detach --db "$T/ro/new.db"
  assert_contains "names the directory" "the directory $T/ro is not writable (Read-only file system)" "$ERR"
  assert_exit "show on a read-only file system" 2 engine show done --db "$T/ro/engine.db"
  assert_contains "show says read-only" "read-only" "$ERR"
  umount "$T/ro"
else
  echo "skip - read-only file system checks (mounting a tmpfs needs root)"
fi

# --- results, events and arguments past the limit: an error, never a row that big
cat >"$T/sizes.lua" <<'LUA'
local wf = require "workflow"
return function(input)
  local function try(f, ...) local ok, e = pcall(f, ...); return ok and "ok" or (e.type .. ": " .. e.message) end
  local out = {
    result = try(wf.activity, "sizes_acts.big", {bytes = input.bytes}, {retry = {max_attempts = 3}}),
    args = try(wf.activity, "sizes_acts.big", {pad = string.rep("a", input.bytes)}),
    emit = try(wf.emit, "agent.message", {text = string.rep("e", input.bytes)}),
    checkpoint = try(wf.checkpoint, "big", function() return string.rep("c", input.bytes) end),
  }
  if input.big_result then return string.rep("r", input.bytes) end
  return out
end
LUA
printf 'local M = {}\nfunction M.big(a) return string.rep("x", a.bytes or 1) end\nreturn M\n' >"$T/sizes_acts.lua"
out="$(env ENGINE_MAX_PAYLOAD_BYTES=65536 "$ENGINE" start "$T/sizes.lua" --id sizes --quiet --input '{"bytes":100000}' 2>/dev/null)"
assert_contains "an activity result past the limit is PayloadTooLarge, not retried" \
  "\"result\":\"PayloadTooLarge: the activity's result is 100002 bytes, more than the limit of 65536 bytes (ENGINE_MAX_PAYLOAD_BYTES)\"" "$out"
assert_eq "tried once" 1 "$(engine history sizes --json | grep -c '"type":"ActivityFailed"')"
assert_contains "arguments past the limit" "\"args\":\"PayloadTooLarge: the JSON of the activity's arguments is" "$out"
assert_contains "an event payload past the limit" "\"emit\":\"PayloadTooLarge: the event's payload is" "$out"
assert_contains "a checkpoint value past the limit" "\"checkpoint\":\"PayloadTooLarge: the checkpoint's value is" "$out"
assert_exit "the run replays the same (a fresh process)" 0 engine replay sizes
big_rows="$(sqlite3 "$ENGINE_DB" "SELECT count(*) FROM history WHERE length(payload) > 65536")"
assert_eq "no history row past the limit" 0 "$big_rows"
assert_exit "a workflow result past the limit" 1 env ENGINE_MAX_PAYLOAD_BYTES=65536 "$ENGINE" start "$T/sizes.lua" --id sizes-result --quiet --input '{"bytes":100000,"big_result":true}'
assert_contains "fails with PayloadTooLarge" "the workflow's result is 100002 bytes" "$(engine show sizes-result)"
assert_eq "no row past the limit" 0 "$(sqlite3 "$ENGINE_DB" "SELECT count(*) FROM workflows WHERE length(result) > 65536")"

# --- every command answers --help with exit 0
for cmd in start serve signal cancel list show events history replay; do
  assert_exit "$cmd --help" 0 engine $cmd --help
  assert_contains "$cmd --help prints usage" "usage: engine $cmd" "$OUT"
done
finish
