#!/usr/bin/env bash
# engine eval (docs/evals.md): the shipped suite evals/pr-review offline (the
# real sessions in the Docker sandbox, the recorded models): every case
# passes, the table on a terminal and the JSON in a pipe, suite_result.json
# as an artifact; a bad suite named by file and field with nothing written;
# kill -9 during an eval, and the same command carries it on with every case
# run and scored once; --baseline names a planted regression; --fork
# --variants runs one fork point with two models side by side.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
cd "$SRC" # the suite's bundles lie under the working directory, the default context root
export ENGINE_CONTEXT_ROOTS="$SRC:$T" ENGINE_ARTIFACTS="$T/artifacts"
SUITE="$SRC/evals/pr-review"
CASES="correct_change leaked_secret missing_validation off_by_one race too_large"
ncases=6

# jlua EXPR < JSON: prints a Lua expression of the decoded JSON (r)
jlua() { lua5.4 -e "local r = require'cjson'.decode(io.read('a')); io.write(tostring($1))"; }

# --- a bad suite: every problem named by its file and field; nothing written
mkdir -p "$T/bad/cases" "$T/bad/scorers"
echo '{"name": "bad", "concurrency": 0, "colour": "red"}' >"$T/bad/suite.json"
echo '{"model": {"name": "replay:missing.jsonl"}, "expect": 3}' >"$T/bad/cases/one.json"
echo 'return {score = "yes"}' >"$T/bad/scorers/broken.lua"
assert_exit "a bad suite is refused" 2 engine eval "$T/bad"
for p in "suite.json: colour: unknown field" "suite.json: concurrency: must be a whole number" \
         "cases/one.json: model: the recording missing.jsonl is not a file" "cases/one.json: expect: must be an object" \
         "scorers/broken.lua: score: must be a function"; do
  assert_contains "names: $p" "$p" "$ERR"
done
assert_eq "nothing was written" "no database" "$([ -e "$ENGINE_DB" ] && echo "a database" || echo "no database")"
assert_exit "a missing suite is refused" 2 engine eval "$T/none"
assert_contains "it says so" "not a suite folder" "$ERR"
assert_exit "an unknown option is refused" 2 engine eval "$SUITE" --bogus

# --- the suite, piped: the result's JSON, every case passes
assert_exit "engine eval evals/pr-review passes" 0 engine eval "$SUITE" --id ev1
res="$OUT"
assert_eq "six cases" "$ncases" "$(jlua '#r.cases' <<<"$res")"
assert_eq "all passed" "true $ncases 0" "$(jlua 'string.format("%s %d %d", r.pass, r.totals.passed, r.totals.failed)' <<<"$res")"
assert_eq "each case ran as a session of its own" "ev1.off_by_one completed" \
  "$(jlua 'r.cases[4].session .. " " .. r.cases[4].status' <<<"$res")"
assert_eq "the off-by-one is found" "pass" "$(jlua 'r.cases[4].scores.finds_expected.result' <<<"$res")"
assert_eq "the correct change is not flagged" "pass" "$(jlua 'r.cases[1].scores.no_false_alarm.result' <<<"$res")"
assert_eq "the secret stays out of the record" "pass" "$(jlua 'r.cases[2].scores.no_secret_leaked.result' <<<"$res")"
assert_eq "the large change stops at the budget" "limit pass" \
  "$(jlua 'r.cases[6].outcome .. " " .. r.cases[6].scores.outcome.result' <<<"$res")"
assert_eq "the model-graded scorer answered from its recording" "pass" \
  "$(jlua 'r.cases[5].scores.summary_graded.result' <<<"$res")"
assert_eq "a scorer that does not apply is skipped" "skip" "$(jlua 'r.cases[6].scores.finds_expected.result' <<<"$res")"
assert_eq "turns, tokens and cost are counted" "true" \
  "$(jlua 'r.totals.turns >= 12 and r.totals.tokens > 0 and r.totals.cost_usd > 0 and r.cases[1].wall_seconds > 0' <<<"$res")"
stored="$(jlua 'r.artifact.stored' <<<"$res")"
assert_eq "suite_result.json is an artifact" "pr-review" "$(jget suite <"$stored")"
assert_contains "and an artifact.saved event of the run" '"path":"suite_result.json"' \
  "$(engine events ev1 --json | grep artifact.saved)"
assert_eq "the eval's history is whole" "ok" \
  "$(engine history ev1 --json | lua5.4 "$SRC/tests/integration/verify.lua" history >/dev/null && echo ok)"
assert_exit "the eval run replays: every command and its result (test_determinism's property)" 0 engine replay ev1
assert_contains "it says so" "returns the same result" "$OUT$ERR"

# --- on a terminal: the table
if command -v script >/dev/null; then
  script -qc "$ENGINE eval $SUITE --id ev1 --quiet --color never" /dev/null >"$T/table.txt" 2>&1 </dev/null || true
  table="$(cat "$T/table.txt")"
  # (the wall column is as wide as its widest value: "wall" alone when every case took under 10 s)
  [[ "$table" =~ turns\ \ tokens\ \ \ \ \ cost\ \ +wall\ \ result ]] && pass "the table's header" ||
    fail "the table's header: not in [$table]"
  assert_contains "a case's row" "off_by_one" "$table"
  assert_contains "the totals" "$ncases/$ncases" "$table"
  assert_contains "the scorers' legend" "s1 = finds_expected" "$table"
else
  fail "no script(1) to give engine eval a terminal (util-linux)"
fi

# --- kill -9 during an eval: the same command carries it on; each case once
bg E engine eval "$SUITE" --id ev2 --quiet
wait_true 120 '[ "$(engine events ev2 --json 2>/dev/null | grep -c eval.case.scored)" -ge 1 ]' || true
kill -9 "$E"; wait "$E" 2>/dev/null || true
scored="$(engine events ev2 --json | grep -c eval.case.scored || true)"
[ "$scored" -lt "$ncases" ] && pass "killed with cases left ($scored of $ncases scored)" ||
  fail "the eval ended before the kill ($scored of $ncases scored): nothing was interrupted"
assert_exit "engine eval --id ev2 carries it on" 0 engine eval "$SUITE" --id ev2
assert_eq "every case in the result" "$ncases true" "$(jlua '#r.cases .. " " .. tostring(r.pass)' <<<"$OUT")"
assert_eq "each case scored once" "$ncases" "$(engine events ev2 --json | grep -c eval.case.scored)"
assert_eq "each case started once" "$ncases" "$(engine history ev2 --json | grep -c '"type":"ChildStarted"')"
assert_eq "each case's session once" "$ncases" "$(engine list --json | grep -c '"id":"ev2\.[a-z_]*"')"
for c in $CASES; do
  n="$(engine events "ev2.$c" --json | grep -c '"type":"session.completed"' || true)"
  [ "$n" = 1 ] || fail "session ev2.$c completed $n times"
done
assert_eq "the eval's history is whole after the crash" "ok" \
  "$(engine history ev2 --json | lua5.4 "$SRC/tests/integration/verify.lua" history >/dev/null && echo ok)"
same() { jlua '(function() local t = {} for _, c in ipairs(r.cases) do t[#t+1] = c.case .. "=" .. tostring(c.pass) .. ":" .. c.turns .. ":" .. c.tokens end return table.concat(t, " ") end)()'; }
assert_eq "the same scores as without the crash" "$(same <<<"$res")" "$(same <<<"$OUT")"
assert_exit "the resumed run replays" 0 engine replay ev2

# --- --baseline: a planted regression is named
cp -r "$SUITE" "$T/suite"
# the off-by-one's review now names the wrong line
sed -i 's/line\\": 18/line\\": 17/' "$T/suite/recordings/off_by_one.jsonl"
grep -q 'line\\": 17' "$T/suite/recordings/off_by_one.jsonl" || fail "the regression was not planted"
assert_exit "a regression fails the run" 1 engine eval "$T/suite" --id ev3 --baseline ev1
assert_eq "the regression names the case and the scorer" "off_by_one finds_expected fail" \
  "$(jlua 'r.baseline.regressions[1].case .. " " .. r.baseline.regressions[1].scorers[1].scorer .. " " .. r.baseline.regressions[1].scorers[1].now' <<<"$OUT")"
assert_eq "only that case regressed" "1" "$(jlua '#r.baseline.regressions' <<<"$OUT")"
assert_exit "against a baseline file, no regression" 0 engine eval "$SUITE" --id ev4 --baseline "@$stored"
assert_eq "none named" "0 false" "$(jlua '#r.baseline.regressions .. " " .. tostring(r.regressed)' <<<"$OUT")"
assert_exit "a baseline that is not an eval run is refused" 2 engine eval "$SUITE" --baseline ev1.off_by_one
assert_contains "it says why" "not an eval run's result" "$ERR"
assert_exit "an unknown baseline is refused" 2 engine eval "$SUITE" --baseline nope

# --- --fork --variants: one fork point, two models side by side
mkdir -p "$T/var"
cp "$SUITE/recordings/off_by_one.jsonl" "$T/var/finds.jsonl"
cp "$T/suite/recordings/off_by_one.jsonl" "$T/var/misses.jsonl"
cat >"$T/var/variants.json" <<EOF
{"suite": "$SUITE", "case": "off_by_one",
 "variants": [{"name": "finds", "model": {"name": "replay:finds.jsonl", "prices": {"input": 2, "output": 8}}},
              {"name": "misses", "model": {"name": "replay:misses.jsonl", "prices": {"input": 2, "output": 8}}}]}
EOF
assert_exit "variants of ev1.off_by_one before its second turn" 0 \
  engine eval --fork ev1.off_by_one --turn 2 --variants "$T/var/variants.json" --id vs
assert_eq "the table compares them" "finds=pass misses=fail" \
  "$(jlua 'r.cases[1].case .. "=" .. r.cases[1].scores.finds_expected.result .. " " .. r.cases[2].case .. "=" .. r.cases[2].scores.finds_expected.result' <<<"$OUT")"
assert_contains "each variant is a fork of the source" "from ev1.off_by_one at #" "$(engine show vs.misses | grep forked:)"
assert_exit "the same command again finds its forks" 0 \
  engine eval --fork ev1.off_by_one --turn 2 --variants "$T/var/variants.json" --id vs
assert_eq "no fork was made twice" "2" "$(engine list --json | grep -c '"id":"vs\.[a-z]*"')"
echo '{"variants": [{"name": "x y", "model": 3}]}' >"$T/var/bad.json"
assert_exit "a bad variants file is refused" 2 engine eval --fork ev1.off_by_one --at 3 --variants "$T/var/bad.json"
assert_contains "naming the field" "bad.json: variants[1].model: must be an object" "$ERR"
assert_contains "and the name" "bad.json: variants[1].name: must be" "$ERR"
assert_exit "--fork without a point is refused" 2 engine eval --fork ev1.off_by_one --variants "$T/var/variants.json"
finish
