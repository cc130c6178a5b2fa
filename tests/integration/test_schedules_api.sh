#!/usr/bin/env bash
# Schedules over the HTTP API (/v1/schedules): create, read, pause, resume,
# trigger and delete as `engine schedule` does, each answered once committed;
# a schedule created over HTTP fires at once (serve plans again after its own
# write); bad input named; scopes enforced.
source "$(dirname "$0")/lib.sh"
WFD="$T/workflows"
mkdir -p "$WFD"
cp "$SRC/tests/integration/wf/sched_sleep.lua" "$WFD/"
serve_api --workflows "$WFD"
call() { # call METHOD PATH [BODY]: prints the body, then the status on its own line
  curl -s -w '\n%{http_code}' -X "$1" "$URL$2" ${3:+-H 'Content-Type: application/json' --data-binary "$3"}
}
code() { tail -n 1 <<<"$1"; }
body() { sed '$d' <<<"$1"; }

out="$(call POST /v1/schedules '{"name":"tick","cron":"* * * * * *","workflow":"sched_sleep.lua","input":{"seconds":0}}')"
assert_eq "create: 201" 201 "$(code "$out")"
assert_contains "create answers the schedule" '"name":"tick"' "$(body "$out")"
assert_contains "with its next fire" '"next_fire_at":"20' "$(body "$out")"
wait_true 30 '[ "$(engine list | awk '\''$1 ~ /^sched:tick:2/'\'' | wc -l)" -ge 2 ]' || true
assert_eq "a schedule created over HTTP fires at once, every second" 1 \
  "$([ "$(engine list | awk '$1 ~ /^sched:tick:2/' | wc -l)" -ge 2 ] && echo 1 || echo 0)"
assert_contains "fires carry the schedule's identity" '"identity":"schedule:tick"' \
  "$(engine show "$(engine list | awk '$1 ~ /^sched:tick:2/ {print $1; exit}')" --json)"

assert_eq "the same name again: 409" 409 "$(code "$(call POST /v1/schedules '{"name":"tick","cron":"@daily","workflow":"sched_sleep.lua"}')")"
out="$(call POST /v1/schedules '{"name":"bad","cron":"0 24 * * *","workflow":"sched_sleep.lua"}')"
assert_eq "a bad expression: 400" 400 "$(code "$out")"
assert_contains "naming the field" "hour: 24 is out of range 0-23" "$out"
out="$(call POST /v1/schedules '{"name":"bad","cron":"@daily","workflow":"../etc/passwd.lua"}')"
assert_eq "a script outside the workflows directory: 400" 400 "$(code "$out")"
out="$(call POST /v1/schedules '{"name":"bad","cron":"@daily","workflow":"sched_sleep.lua","tz":"Mars/Olympus"}')"
assert_contains "an unknown zone" "unknown time zone" "$out"
assert_eq "an unknown field: 400" 400 "$(code "$(call POST /v1/schedules '{"name":"bad","cron":"@daily","workflow":"sched_sleep.lua","every":"day"}')")"
assert_eq "no name: 400" 400 "$(code "$(call POST /v1/schedules '{"cron":"@daily","workflow":"sched_sleep.lua"}')")"
assert_eq "a bad jitter: 400" 400 "$(code "$(call POST /v1/schedules '{"name":"bad","cron":"@daily","workflow":"sched_sleep.lua","jitter":"soon"}')")"
assert_contains "none of them was created" '"schedules":[{"name":"tick"' "$(body "$(call GET /v1/schedules)")"
assert_eq "only tick exists" 1 "$(body "$(call GET /v1/schedules)" | grep -o '"name":' | wc -l)"

# fires_after EPOCH: tick's fires whose FIRETIME (in the id) is after EPOCH
fires_after() {
  engine list | awk '$1 ~ /^sched:tick:2/ {print $1}' | while read -r id; do
    t="${id##*:}"; [ "$(date -u -d "${t:0:8} ${t:9:2}:${t:11:2}:${t:13:2}" +%s)" -gt "$1" ] && echo "$id"
  done | wc -l
}
out="$(call POST /v1/schedules/tick/pause)"
PAUSED_AT="$(date +%s)"
assert_eq "pause: 200" 200 "$(code "$out")"
assert_contains "paused" '"paused":true' "$out"
n1="$(engine list | awk '$1 ~ /^sched:tick:2/' | wc -l)"
sleep 2 # an observation window (nothing may fire in it), not a wait
assert_eq "no fires while paused" 0 "$(fires_after "$PAUSED_AT")"
assert_contains "the CLI sees it paused" "paused" "$(engine schedule list | grep '^tick')"
out="$(call POST /v1/schedules/tick/trigger)"
assert_eq "trigger: 202" 202 "$(code "$out")"
assert_contains "it starts a manual run" '"id":"sched:tick:manual-' "$out"
assert_contains "with the caller's identity" '"identity":"anonymous"' \
  "$(engine show "$(engine list | awk '$1 ~ /^sched:tick:manual-/ {print $1; exit}')" --json)"
assert_contains "resume: 200, not paused" '"paused":false' "$(call POST /v1/schedules/tick/resume)"
wait_true 30 '[ "$(engine list | awk '\''$1 ~ /^sched:tick:2/'\'' | wc -l)" -gt "$n1" ]' || true
assert_eq "fires again after resume" 1 "$([ "$(engine list | awk '$1 ~ /^sched:tick:2/' | wc -l)" -gt "$n1" ] && echo 1 || echo 0)"
assert_contains "GET one" '"cron":"* * * * * *"' "$(call GET /v1/schedules/tick)"
out="$(call DELETE /v1/schedules/tick)"
assert_eq "delete: 200" 200 "$(code "$out")"
assert_contains "deleted" '"deleted":true' "$out"
assert_eq "then it is unknown" 404 "$(code "$(call GET /v1/schedules/tick)")"
assert_eq "and deleting it again is 404" 404 "$(code "$(call DELETE /v1/schedules/tick)")"
assert_eq "pausing an unknown one is 404" 404 "$(code "$(call POST /v1/schedules/nosuch/pause)")"
DELETED_AT="$(date +%s)"
sleep 1.5 # an observation window (nothing may fire in it), not a wait
assert_eq "no fires after delete" 0 "$(fires_after "$DELETED_AT")"
kill "$S"; wait "$S" 2>/dev/null || true

# --- scopes: reading is not scheduling
rd="$(engine token create reader --scopes read)"
st="$(engine token create starter --scopes start)"
serve_api --workflows "$WFD"
assert_eq "a read token cannot create" 403 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/schedules" \
  -H "Authorization: Bearer $rd" -H 'Content-Type: application/json' --data-binary '{"name":"t2","cron":"@daily","workflow":"sched_sleep.lua"}')"
assert_eq "a start token can" 201 "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/schedules" \
  -H "Authorization: Bearer $st" -H 'Content-Type: application/json' --data-binary '{"name":"t2","cron":"@daily","workflow":"sched_sleep.lua"}')"
assert_eq "and a read token lists it" 200 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/schedules" -H "Authorization: Bearer $rd")"
assert_eq "no token: 401" 401 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/schedules")"
kill "$S"; wait "$S" 2>/dev/null || true
finish
