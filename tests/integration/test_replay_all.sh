#!/usr/bin/env bash
# `engine replay --all --script FILE`: an edited script checked against every
# live run started from it (however its path was spelled), one line per run,
# a summary and an exit code; it reads only and never applies.
source "$(dirname "$0")/lib.sh"
mkdir -p "$T/wf"
cp "$SRC/tests/integration/wf/acts.lua" "$T/wf/"
cat > "$T/wf/w.lua" <<'LUA'
local wf = require "workflow"
return function(input)
  local a = wf.activity("acts.echo", { n = input.n })
  local s = wf.wait_signal("go")
  return { a = a, got = s }
end
LUA
cp "$T/wf/w.lua" "$T/wf/other.lua"
cp "$T/wf/w.lua" "$T/wf/w_orig.lua"

bg S engine serve
# three live runs of w.lua, started with three spellings of its path
assert_exit "start r1 (absolute path)" 3 engine start "$T/wf/w.lua" --id r1 --detach --input '{"n":1}'
(cd "$T" && assert_exit "start r2 (relative path)" 3 engine start wf/w.lua --id r2 --detach --input '{"n":2}')
(cd "$T/wf" && assert_exit "start r3 (./ path)" 3 engine start ./w.lua --id r3 --detach --input '{"n":3}')
assert_exit "start o1 (another script)" 3 engine start "$T/wf/other.lua" --id o1 --detach --input '{"n":4}'
assert_exit "start done1 (finishes)" 3 engine start "$T/wf/w.lua" --id done1 --detach --input '{"n":5}'
for id in r1 r2 r3 o1 done1; do
  wait_status "$id" waiting:signal
  wait_true 30 'engine history "$id" | tail -1 | has_line SignalWaitStarted' || true
done
engine signal done1 go '"x"'
wait_status done1 completed
kill "$S"; wait "$S" 2>/dev/null || true
# what was written: the file's bytes, or PostgreSQL's count of committed writes
db_sum() { if on_postgres; then sql "SELECT n FROM commits"; else sha256sum "$ENGINE_DB" | cut -d' ' -f1; fi; }
sum_before="$(db_sum)"

# --- an edit that keeps the command sequence: a comment and a changed result
sed -i 's/^local wf = require "workflow"$/local wf = require "workflow" -- edited/' "$T/wf/w.lua"
sed -i 's/return { a = a, got = s }/return { a = a, got = s, edited = true }/' "$T/wf/w.lua"
assert_exit "a compatible edit replays every live run" 0 engine replay --all --script "$T/wf/w.lua"
assert_contains "r1 replays" "r1  replays" "$OUT"
assert_contains "r2 replays" "r2  replays" "$OUT"
assert_contains "r3 replays" "r3  replays" "$OUT"
assert_contains "summary" "3 runs checked: 3 replay, 0 diverge" "$OUT"
assert_eq "one line per run and a summary" 4 "$(printf '%s\n' "$OUT" | wc -l)"
case "$OUT" in *o1*) fail "a run of another script was checked" ;; *) pass "another script's run is not checked" ;; esac
case "$OUT" in *done1*) fail "a finished run was checked" ;; *) pass "a finished run is not checked" ;; esac
(cd "$T" && assert_exit "a relative spelling matches the same runs" 0 engine replay --all --script wf/w.lua &&
  assert_contains "relative: summary" "3 runs checked: 3 replay" "$OUT")
(cd "$T/wf" && assert_exit "a ./ spelling matches the same runs" 0 engine replay --all --script ./w.lua &&
  assert_contains "./: summary" "3 runs checked: 3 replay" "$OUT")
ln -s "$T/wf" "$T/link"
assert_exit "a path through a symlink matches by realpath" 0 engine replay --all --script "$T/link/w.lua"
assert_contains "symlink: summary" "3 runs checked: 3 replay" "$OUT"

# --- an edit that adds an activity before the wait: every run diverges at event 4
sed -i 's/^  local s = wf.wait_signal("go")$/  wf.activity("acts.echo", { extra = true })\n  local s = wf.wait_signal("go")/' "$T/wf/w.lua"
assert_exit "an added activity diverges" 1 engine replay --all --script "$T/wf/w.lua"
for id in r1 r2 r3; do
  line="$(printf '%s\n' "$OUT" | grep "^$id  " || true)"
  assert_contains "$id diverges at the event" "$id  diverges at event 4: history has SignalWaitStarted 'go'" "$line"
  assert_contains "$id names the new command and line" "issued ActivityScheduled 'acts.echo'" "$line"
  assert_contains "$id names the script line" "w.lua:4" "$line"
done
assert_contains "summary counts divergences" "3 runs checked: 0 replay, 3 diverge" "$OUT"
assert_exit "--json with a divergence" 1 engine replay --all --script "$T/wf/w.lua" --json
assert_eq "--json: one object per run, nothing else" 3 "$(printf '%s\n' "$OUT" | wc -l)"
first="$(printf '%s\n' "$OUT" | sed -n 1p)"
assert_eq "--json: id" r1 "$(jget id <<<"$first")"
assert_eq "--json: status" waiting "$(jget status <<<"$first")"
assert_eq "--json: replays" false "$(jget replays <<<"$first")"
assert_contains "--json: report" "non-determinism at event #4" "$(jget report <<<"$first")"

# --- --status narrows
assert_exit "--status running: none of them" 0 engine replay --all --script "$T/wf/w.lua" --status running
assert_contains "says no live run uses it" "no live run uses $T/wf/w.lua" "$OUT"
assert_exit "--status stuck,waiting" 1 engine replay --all --script "$T/wf/w.lua" --status stuck,waiting
assert_contains "--status stuck,waiting: all three" "3 runs checked: 0 replay, 3 diverge" "$OUT"
cp "$T/wf/w_orig.lua" "$T/wf/other.lua"
assert_exit "--json of the other script (unchanged)" 0 engine replay --all --script "$T/wf/other.lua" --json
assert_eq "--json: the other run replays" "o1 true" "$(jget id <<<"$OUT") $(jget replays <<<"$OUT")"
cp "$T/wf/w_orig.lua" "$T/wf/unused.lua"
assert_exit "a script no run uses" 0 engine replay --all --script "$T/wf/unused.lua"
assert_contains "says so" "no live run uses" "$OUT"

# --- usage errors
assert_exit "--all without --script" 2 engine replay --all
assert_contains "names --script" "--script" "$ERR"
assert_exit "--all with an ID" 2 engine replay r1 --all --script "$T/wf/w.lua"
assert_exit "--all with --apply is refused" 2 engine replay --all --script "$T/wf/w.lua" --apply
assert_contains "says it never applies" "never applies" "$ERR"
assert_exit "an unknown status" 2 engine replay --all --script "$T/wf/w.lua" --status waiting,sleeping
assert_contains "names the status" "'sleeping'" "$ERR"
assert_exit "a finished status is not live" 2 engine replay --all --script "$T/wf/w.lua" --status completed
assert_exit "a missing script" 2 engine replay --all --script "$T/wf/nope.lua"
assert_exit "--status without --all" 2 engine replay r1 --script "$T/wf/w.lua" --status waiting

# --- it read only
assert_eq "the database is unchanged" "$sum_before" "$(db_sum)"
assert_eq "r1 still waiting on its own code" waiting "$(status r1)"
finish
