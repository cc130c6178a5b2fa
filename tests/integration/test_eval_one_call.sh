#!/usr/bin/env bash
# engine eval over design 1 (docs/evals.md, docs/runtime-designs.md): the
# shipped suite evals/incident-triage offline (one_call.lua sessions from
# recordings): every case passes with the table's numbers; a case whose input
# does not match the one-call input schema is named before anything starts;
# a planted regression (a recording whose answers never match the schema)
# fails that case, naming the violation, and --baseline calls it a regression.
source "$(dirname "$0")/lib.sh"
cd "$SRC" # the suite's bundles lie under the working directory, the default context root
unset OPENAI_API_KEY ANTHROPIC_API_KEY
export ENGINE_CONTEXT_ROOTS="$SRC:$T" ENGINE_ARTIFACTS="$T/artifacts"
SUITE="$SRC/evals/incident-triage"
jlua() { lua5.4 -e "local r = require'cjson'.decode(io.read('a')); io.write(tostring($1))"; }

# --- the shipped suite: every case passes
assert_exit "engine eval evals/incident-triage passes" 0 engine eval "$SUITE" --id ev1
res="$OUT"
assert_eq "three cases, all passed" "3 3 0" \
  "$(jlua 'string.format("%d %d %d", #r.cases, r.totals.passed, r.totals.failed)' <<<"$res")"
assert_eq "the repaired case counts its repair" "cert_expired 2 pass" \
  "$(jlua 'string.format("%s %d %s", r.cases[1].case, r.cases[1].turns, r.cases[1].scores.repairs.result)' <<<"$res")"
assert_eq "severities as expected" "pass pass pass" \
  "$(jlua 'r.cases[1].scores.severity.result .. " " .. r.cases[2].scores.severity.result .. " " .. r.cases[3].scores.severity.result' <<<"$res")"
assert_eq "no tool calls: one call each, and a repair" "0 4" "$(jlua 'string.format("%d %d", r.totals.tool_calls, r.totals.turns)' <<<"$res")"
assert_eq "each case a one_call session" "one_call" \
  "$(engine events ev1.disk_full --json | sed -n 1p | jget payload.design)"

# --- a case whose input the one-call schema refuses: named, nothing started
cp -r "$SUITE" "$T/bad"
printf '{"input": {"resultSchema": 3, "limits": {"maxRepairs": -1}}, "model": {"name": "replay:recordings/db_pool.jsonl"}}\n' \
  >"$T/bad/cases/broken.json"
assert_exit "a case the input schema refuses" 2 engine eval "$T/bad" --id evbad
assert_contains "names the schema" "cases/broken.json: input: resultSchema must be a JSON schema" "$ERR"
assert_contains "and the limit" "cases/broken.json: input: limits.maxRepairs must be a whole number from 0 to 10" "$ERR"

# --- a planted regression: the cert case's answers never match the schema
cp -r "$SUITE" "$T/reg"
head -1 "$SUITE/recordings/cert_expired.jsonl" >"$T/reg/recordings/cert_expired.jsonl"
head -1 "$SUITE/recordings/cert_expired.jsonl" >>"$T/reg/recordings/cert_expired.jsonl"
head -1 "$SUITE/recordings/cert_expired.jsonl" >>"$T/reg/recordings/cert_expired.jsonl"
assert_exit "the regressed suite fails" 1 engine eval "$T/reg" --id ev2 --baseline ev1
res="$OUT"
assert_eq "that case failed, the others passed" "false true true" \
  "$(jlua 'tostring(r.cases[1].pass) .. " " .. tostring(r.cases[2].pass) .. " " .. tostring(r.cases[3].pass)' <<<"$res")"
assert_contains "its session failed naming the violation" "result.severity" \
  "$(jlua 'r.cases[1].scores.matches_schema.detail' <<<"$res")"
assert_contains "after its repairs" "after 2 repairs" "$(jlua 'r.cases[1].scores.matches_schema.detail' <<<"$res")"
assert_contains "the baseline names the regression" "cert_expired" "$(jlua 'r.baseline.regressions[1].case' <<<"$res")"
finish
