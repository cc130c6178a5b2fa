#!/usr/bin/env bash
# Quotas per identity kept by the engine across sessions and restarts: kill
# -9 mid-session, restart, and the identity's counter equals the sum of the
# turns' tokens in the log; the session over quota ends with limit.exceeded
# naming the quota, and the next session of that identity makes no model
# call at all. `engine quota list` shows use and limits. Without a limits
# file a session issues no limits command; a broken file is refused naming
# the file, the field and the value.
source "$(dirname "$0")/caps_lib.sh"
start_model_server <(echo "{\"default\":$AGAIN}" | sed 's/"reply"/"delay":0.4,"reply"/')
serve_bg

# --- no limits file: the session's history is what it was
start_session plain '{"limits":{"maxModelTurns":1}}'
wait_status plain completed 60 || true
assert_eq "no limits file, no limits commands in the history" 0 \
  "$(engine history plain --json | grep -cE '"type":"(Slot|Rate|Counter)' || true)"

# --- a broken limits file: refused at prepare, with the file, the field and the value
limits "sandboxes = 4
quotas = { ['local:qa'] = { tokens_per_day = 'lots' } }"
assert_exit "a session is refused while the limits file is broken" 2 "$ENGINE" start "$WF" --id broken \
  --input @"$(session_input)"
assert_contains "the error names the file, the field and the value" \
  "limits file $T/limits.lua: quotas[\"local:qa\"].tokens_per_day must be a number >= 0 (got \"lots\")" "$ERR"
assert_eq "no sandbox was started" 0 "$(engine history broken --json | grep -c sandbox.provision || true)"
assert_exit "quota list still answers" 0 engine quota list
assert_contains "and says why it shows no limits" "limits not shown" "$ERR"

# --- 50 tokens a turn against 150 a day: three turns, then the quota
limits "quotas = { ['local:qa'] = { tokens_per_day = 150 }, default = { tokens_per_day = 1000000 } }"
USER=qa start_session q1 '{"limits":{"maxModelTurns":10}}'
wait_until 60 "q1 has done two turns" sh -c "[ \$('$ENGINE' events q1 --json | grep -c '\"agent.message\"') -ge 2 ]"
kill -9 "$S"; wait "$S" 2>/dev/null || true
bg S engine serve
wait_status q1 completed 60 || true
res="$(engine show q1 --json | jget result)"
assert_eq "q1 ended at its quota" limit "$(jget outcome <<<"$res")"
ex="$(engine events q1 --json | grep '"type":"limit.exceeded"')"
for f in '"limit":"quota"' '"quota":"tokens_per_day"' '"identity":"local:qa"' '"max":150' '"value":150'; do
  assert_contains "limit.exceeded names $f" "$f" "$ex"
done
logged="$(engine events q1 --json | grep '"type":"agent.message"' | lua5.4 -e '
  local n = 0
  for l in io.lines() do
    local u = require"cjson".decode(l).payload.usage
    n = n + u.input_tokens + u.output_tokens
  end
  print(math.floor(n))')"
day="$(date -u +%Y-%m-%d)"
row="$(engine quota list --json | grep '"identity":"local:qa"' | grep '"quota":"tokens_per_day"')"
assert_eq "after the crash the counter is the sum of the turns in the log" "$logged" "$(jget used <<<"$row")"
assert_eq "that is three turns" 150 "$logged"
assert_eq "the row's period is today (UTC)" "$day" "$(jget period <<<"$row")"
assert_eq "the row's limit" 150 "$(jget limit <<<"$row")"

# --- the same identity again: over quota before its first model call
before="$(nreq)"
USER=qa start_session q2
wait_status q2 completed 60 || true
assert_eq "q2 ended at the quota" limit "$(engine show q2 --json | jget result.outcome)"
assert_eq "q2 made no model call" 0 "$(engine show q2 --json | jget result.turns)"
assert_eq "the model server saw nothing from it" "$before" "$(nreq)"
# --- another identity has its own (default) budget
USER=other start_session o1 '{"limits":{"maxModelTurns":1}}'
wait_status o1 completed 60 || true
assert_eq "another identity is not held by qa's quota" maxModelTurns "$(engine show o1 --json | jget result.limit.limit)"

# --- engine quota list for people
out="$(engine quota list)"
assert_contains "the header" "IDENTITY                     QUOTA                PERIOD               USED          LIMIT" "$out"
assert_contains "qa's row: used and limit" "$(printf '%-28s %-20s %-10s %14s %14s' local:qa tokens_per_day "$day" 150 150)" "$out"
assert_contains "other's row, under the default" "$(printf '%-28s %-20s %-10s %14s %14s' local:other tokens_per_day "$day" 50 1000000)" "$out"
assert_exit "an unknown subcommand" 2 engine quota show
assert_contains "is named" "quota: unknown subcommand 'show'" "$ERR"
kill "$S"; wait "$S" 2>/dev/null || true
assert_eq "no container left" 0 "$(containers)"
finish
