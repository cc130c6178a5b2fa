#!/usr/bin/env bash
# `engine test FILE_test.lua`: workflow tests with stubbed activities and a
# virtual clock. The project's own workflow tests (tests/workflows/) pass;
# tests/integration/wftest/ holds a file of cases that pass on virtual time
# (a 30-day timer, signal timeouts, retries with backoff) and one of cases
# that fail, each reported with its message and its line; a file that does
# not load is a usage error naming its line.
source "$(dirname "$0")/lib.sh"
W="$SRC/tests/integration/wftest"
export TMPDIR="$T/tmp" # the cases' throwaway databases: checked gone at the end
mkdir -p "$TMPDIR"

# --- the project's workflow tests, run from the source tree as an author would
cd "$SRC"
assert_exit "tests/workflows pass" 0 engine test tests/workflows/*_test.lua
assert_contains "the 30-day approval timeout of hello.lua" \
  "ok - the approval times out after 30 days, in virtual time" "$OUT"
assert_contains "agent_session's approval timeout" \
  "ok - an approval nobody answers times out after 30 days: the tool is denied" "$OUT"
case "$OUT" in *FAIL*) fail "a FAIL line: $OUT" ;; *) pass "no FAIL line" ;; esac

# --- virtual time: 30 days and more in milliseconds of wall time
cd "$W"
t0=$(date +%s%N)
assert_exit "clock_test passes" 0 engine test clock_test.lua
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
assert_eq "every case passes" "10 cases: 10 passed, 0 failed" "$(tail -1 <<<"$OUT" | sed 's/ (.*//')"
# a speed is not asserted (a busy machine must pass): the virtual days are the
# clock's, checked by the cases themselves; the wall time is a note
echo "# 10 cases over 30 virtual days in $ms ms of wall time"
assert_exit "futures_test passes" 0 engine test futures_test.lua
assert_eq "futures: both cases" "2 cases: 2 passed, 0 failed" "$(tail -1 <<<"$OUT" | sed 's/ (.*//')"
assert_exit "children_test passes (a child's activities use its root's stubs)" 0 engine test children_test.lua
assert_exit "clock_test passes" 0 engine test clock_test.lua
assert_contains "retries back off in virtual time" \
  "ok - a stub that raises is retried with backoff in virtual time, then the run fails" "$OUT"

# --- failures: each with its message and the test file's line
assert_exit "failing_test fails" 1 engine test failing_test.lua
assert_contains "a passing case among them" "ok - passes" "$OUT"
assert_contains "an assertion names both values and its line" \
  "FAIL - an assertion fails: arithmetic: expected 3, got 2 (failing_test.lua:9)" "$OUT"
assert_contains "an activity without a stub is named" \
  "FAIL - an activity without a stub: activity 'acts.finish' has no stub (give it one in t.start's activities) (failing_test.lua:14)" "$OUT"
assert_contains "the determinism check at the end of a case" \
  "FAIL - a nondeterministic workflow: run nondet-" "$OUT"
assert_contains "reports the engine's non-determinism message with the script line" \
  "does not replay its own history: diverges: non-determinism at event #2: history has ActivityScheduled 'acts.step'" "$OUT"
assert_contains "... at the line of the start" "TimerStarted 'sleep' (args bb4ba603a97f3429) at nondet.lua:7 (failing_test.lua:18)" "$OUT"
assert_contains "an edited script that does not replay" \
  "FAIL - an edited script that does not replay: diverges: non-determinism at event #2: history has TimerStarted 'sleep'" "$OUT"
assert_contains "... naming the edited line" "at timers_edited.lua:5 (failing_test.lua:25)" "$OUT"
assert_contains "a Lua error in the test" \
  "FAIL - an error in the test itself: attempt to index a nil value (local 'x') (failing_test.lua:30)" "$OUT"
assert_contains "a wait that nothing can end" \
  "never reaches completed: it is waiting on signal go, with nothing due (send it a signal?) (failing_test.lua:35)" "$OUT"
assert_contains "a stub may not drive the engine" \
  "FAIL - a stub that drives the engine: run:signal inside an activity stub: a stub only returns or raises (failing_test.lua:41)" "$OUT"
assert_eq "the summary" "8 cases: 1 passed, 7 failed" "$(tail -1 <<<"$OUT" | sed 's/ (.*//')"

# --- --json: one object per case and a summary
assert_exit "--json" 1 engine test --json failing_test.lua
python3 - "$OUT" <<'PY' && pass "--json objects" || fail "--json objects: $OUT"
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines()]
cases, summary = lines[:-1], lines[-1]["summary"]
assert len(cases) == 8 and summary["passed"] == 1 and summary["failed"] == 7, lines
bad = [c for c in cases if c["case"] == "an assertion fails"][0]
assert bad["ok"] is False and bad["location"] == "failing_test.lua:9" and bad["file"] == "failing_test.lua", bad
assert bad["message"] == "arithmetic: expected 3, got 2", bad
good = [c for c in cases if c["case"] == "passes"][0]
assert good["ok"] is True and "message" not in good and good["seconds"] >= 0, good
PY
assert_exit "--run picks cases by name" 1 engine test --run "without a stub" failing_test.lua
assert_eq "only that case" "1 case: 0 passed, 1 failed" "$(tail -1 <<<"$OUT" | sed 's/ (.*//')"

# --- a test file's helper modules are found beside it, from any directory
mkdir -p "$T/h"
printf 'return { finish = function() return "from the helper" end }\n' >"$T/h/helper.lua"
cat >"$T/h/uses_helper_test.lua" <<LUA
local t = require "enginetest"
local helper = require "helper"
t.case("a helper module", function()
  local run = t.start("$W/timers.lua", { timeout = 1 }, { activities = { ["acts.finish"] = helper.finish } })
  t.assert_eq(run:wait_until("completed"), "completed")
  t.assert_eq(run:result().r, "from the helper")
end)
LUA
cd "$T"
assert_exit "a helper beside the test file" 0 engine test h/uses_helper_test.lua
cd "$W"

# --- files that do not load, and usage errors: exit 2
assert_exit "a syntax error" 2 engine test syntax_test.lua
assert_contains "names the file and line" "cannot load syntax_test.lua: syntax_test.lua:3: ')' expected near 'function'" "$ERR"
assert_exit "an error while loading" 2 engine test load_error_test.lua
assert_contains "names the file and line" "load_error_test.lua:3: cannot set up" "$ERR"
assert_exit "a file that does not load stops the run" 2 engine test clock_test.lua syntax_test.lua
assert_exit "no file" 2 engine test
assert_contains "prints the usage" "usage: engine test" "$ERR"
assert_exit "a missing file" 2 engine test "$T/none_test.lua"
assert_exit "an unknown option" 2 engine test --nope clock_test.lua
assert_contains "names it" "unknown option --nope" "$ERR"
assert_exit "--run matching nothing" 2 engine test --run "no such case" clock_test.lua
assert_contains "says so" "no case ran (none matches --run)" "$ERR"
printf 'local t = require "enginetest"\n' >"$T/empty_test.lua"
assert_exit "a file without cases" 2 engine test "$T/empty_test.lua"
assert_contains "says so" "defines no cases" "$ERR"
assert_exit "--help" 0 engine test --help
assert_contains "the usage" "usage: engine test [--json] [--run TEXT] FILE_test.lua..." "$OUT"
assert_exit "ENGINE_SERVER does not matter: no server, no database" 0 env ENGINE_SERVER=http://127.0.0.1:9 \
  "$ENGINE" test --run "30-day" clock_test.lua
assert_eq "every throwaway database is removed" "" "$(ls -A "$TMPDIR")"
[ -e "$ENGINE_DB" ] && fail "a database at \$ENGINE_DB" || pass "nothing written to \$ENGINE_DB"

exit "$FAILS"
