#!/usr/bin/env bash
# Workers and the worker lock. A foreground `engine start` that holds the lock
# runs every workflow of the database, like serve: a second start follows it
# and completes while the first one waits for days. The lock belongs to the
# database file, whatever name it was opened by (a symlink, "x/../engine.db",
# a symlink to a database that does not exist yet): one worker per file.
# (`timeout -s KILL` only keeps a broken engine from hanging the suite.)
source "$(dirname "$0")/lib.sh"
HELLO="$SRC/workflows/hello.lua"
RETRY="$SRC/tests/integration/wf/retry.lua"
export TEST_SIDE_EFFECTS="$T/effects"

# --- A waits on a signal in the foreground; B, started from another process, completes
"$ENGINE" start "$HELLO" --id A --input '{"name":"A","n":1}' >"$T/A.out" 2>"$T/A.err" &
PA=$!; PIDS+=("$PA")
wait_true 30 'engine history A 2>/dev/null | tail -1 | has_line SignalWaitStarted' || true
assert_eq "A waits for its signal" waiting "$(status A)"
assert_exit "engine start B completes while A waits" 0 timeout -s KILL 60 "$ENGINE" start "$RETRY" --id B \
  --input '{"activity":"acts.echo","args":{"v":1}}'
assert_eq "with B's result" '{"ok":true,"value":{"v":1}}' "$OUT"
assert_contains "run by A's process" "engine start (pid $PA) runs it" "$ERR"
assert_eq "B's activity ran once" 1 "$(grep -c '^B/' "$T/effects")"
assert_eq "A still waits" waiting "$(status A)"
engine signal A approval '{"approved":true}' 2>/dev/null
wait "$PA" && pass "A completes once signalled" || fail "A: $(cat "$T/A.err")"

# --- one lock per database file, whatever its name
mkdir -p "$T/sub"
ln -s "$ENGINE_DB" "$T/link.db"
bg S engine serve
wait_true 30 '[ -e "$ENGINE_DB.lock" ] && grep -q serve "$ENGINE_DB.lock"' || true
assert_exit "a second serve through a symlink is refused" 2 timeout -s KILL 30 "$ENGINE" serve --db "$T/link.db"
assert_contains "naming the worker" "already served by engine serve (pid $S)" "$ERR"
assert_exit "and through x/../engine.db" 2 timeout -s KILL 30 "$ENGINE" serve --db "$T/sub/../engine.db"
assert_exit "a start through the symlink follows the worker instead of running it" 0 \
  timeout -s KILL 60 "$ENGINE" start "$RETRY" --id C --db "$T/link.db" --input '{"activity":"acts.echo","args":{"v":2}}'
assert_contains "(serve runs it)" "engine serve (pid $S) runs it" "$ERR"
assert_eq "C's activity ran once" 1 "$(grep -c '^C/' "$T/effects")"
kill "$S"; wait "$S" 2>/dev/null || true

# a symlink to a database that does not exist yet: its target's lock
ln -s "$T/later.db" "$T/dangling.db"
bg S2 engine serve --db "$T/dangling.db"
wait_true 30 '[ -e "$T/later.db.lock" ]' || true
assert_exit "the target by its own name is refused while the link is served" 2 timeout -s KILL 30 "$ENGINE" serve --db "$T/later.db"
kill "$S2"; wait "$S2" 2>/dev/null || true
finish
