#!/usr/bin/env bash
# Schedules (engine schedule ...): bad input refused with the problem named;
# the next fire in a time zone shown as the right UTC instant (DST included);
# an every-second schedule fires under engine serve with ids sched:NAME:TIME;
# pause stops the fires, resume starts again without catching up, trigger
# runs now; the overlap policies with a workflow that outlives its interval;
# kill -9 of serve: fires missed within the catch-up window run once, older
# ones are skipped and counted, none starts twice. Real time, short intervals;
# what is checked is read from the fires' own ids and rows (when each fired,
# started and ended), never counted over a stretch of wall-clock time, so a
# busy machine changes how many fires there are, not whether the checks hold.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/sched_sleep.lua"
q() { sqlite3 "$ENGINE_DB" "$1"; }
# started NAME: how many workflows schedule NAME's fires started
started() { q "SELECT count(*) FROM workflows WHERE id GLOB 'sched:$1:2*'"; }
skipped() { q "SELECT skipped_count FROM schedules WHERE name='$1'"; }
notdone() { q "SELECT count(*) FROM workflows WHERE id GLOB 'sched:$1:*' AND status <> 'completed'"; }
# id_secs ID: the UTC instant in an id's FIRETIME, in epoch seconds
id_secs() { local t="${1##*:}"; date -u -d "${t:0:8} ${t:9:2}:${t:11:2}:${t:13:2}" +%s; }
serve() { bg S engine serve 2>>"$T/serve.log"; wait_true 30 'grep -q "serving" "$T/serve.log"' || true; }
stop_serve() { kill "$S"; wait "$S" 2>/dev/null || true; }

# --- bad input: exit 2, the problem named, nothing written
assert_exit "a bad cron expression" 2 engine schedule create x --cron '0 25 * * *' --workflow "$WF"
assert_contains "the parser's message" "hour: 25 is out of range 0-23" "$ERR"
assert_exit "an unknown zone" 2 engine schedule create x --cron '0 9 * * *' --tz Mars/Olympus --workflow "$WF"
assert_contains "names the zone" "unknown time zone 'Mars/Olympus'" "$ERR"
assert_exit "an unknown workflow file" 2 engine schedule create x --cron '0 9 * * *' --workflow "$T/nope.lua"
assert_contains "names the file" "$T/nope.lua: no such workflow file" "$ERR"
printf 'return 42\n' >"$T/notwf.lua"
assert_exit "a script that is not a workflow" 2 engine schedule create x --cron '0 9 * * *' --workflow "$T/notwf.lua"
assert_exit "an unknown overlap policy" 2 engine schedule create x --cron '0 9 * * *' --workflow "$WF" --overlap queue
assert_contains "lists the policies" "skip, buffer_one, allow_all or cancel_other" "$ERR"
assert_exit "a bad duration" 2 engine schedule create x --cron '0 9 * * *' --workflow "$WF" --jitter 5x
assert_contains "says how durations look" "30s, 5m, 2h, 1d" "$ERR"
assert_exit "a name with a colon" 2 engine schedule create a:b --cron '0 9 * * *' --workflow "$WF"
assert_exit "no --cron" 2 engine schedule create x --workflow "$WF"
assert_exit "an unknown subcommand" 2 engine schedule rename x
assert_exit "bad input is not JSON" 2 engine schedule create x --cron '0 9 * * *' --workflow "$WF" --input '{bad'
assert_eq "no database was created" no "$([ -e "$ENGINE_DB" ] && echo yes || echo no)"

# --- time zones: the next fire as a UTC instant (now is before these dates or the test says so)
assert_exit "create in Europe/Berlin" 0 engine schedule create ber --cron '30 9 * * *' --tz Europe/Berlin --workflow "$WF"
assert_exit "a duplicate name" 2 engine schedule create ber --cron '* * * * *' --workflow "$WF"
assert_contains "says it exists" "a schedule named ber exists already" "$ERR"
# 09:30 in Berlin is 08:30Z in winter and 07:30Z in summer
NEXT="$(engine schedule list --json | lua5.4 -e 'for l in io.lines() do local j=require"cjson".decode(l); if j.name=="ber" then print(j.next_fire_at) end end')"
BERLIN_NOW="$(TZ=Europe/Berlin date +%z)"
case "$BERLIN_NOW" in
  +0100) WANT_H=08 ;; +0200) WANT_H=07 ;; *) WANT_H=?? ;;
esac
assert_contains "09:30 Berlin is ${WANT_H}:30Z now" "T${WANT_H}:30:00Z" "$NEXT"
# the DST changes: 02:30 on 28 March and on 31 October in Berlin. In a year where
# that day is a Sunday it is the change day (the last Sunday of the month):
# spring-forward skips 02:30, so it fires at 03:00 CEST = 01:00Z; fall-back has
# 02:30 twice, and it fires at the first, 02:30 CEST = 00:30Z. Other years: the
# plain conversion.
engine schedule create spring --cron '30 2 28 3 *' --tz Europe/Berlin --workflow "$WF" 2>/dev/null
engine schedule create autumn --cron '30 2 31 10 *' --tz Europe/Berlin --workflow "$WF" 2>/dev/null
LIST="$(engine schedule list --json)"
nxt() { printf '%s\n' "$LIST" | lua5.4 -e "for l in io.lines() do local j=require'cjson'.decode(l); if j.name=='$1' then print(j.next_fire_at) end end"; }
# want MMDD CHANGE_DAY_UTC: the expected next fire of 02:30 Berlin on that day
want() {
  local y m d; y="$(date -u +%Y)"; m="${1:0:2}"; d="${1:2:2}"
  [ "$(date -u +%m%d)" \< "$1" ] || y=$((y + 1))
  if [ "$(date -u -d "$y-$m-$d" +%u)" == 7 ]; then echo "$y-$m-${d}T$2"
  else date -u -d "TZ=\"Europe/Berlin\" $y-$m-$d 02:30" +%Y-%m-%dT%H:%M:%SZ; fi
}
assert_eq "02:30 Berlin on 28 March (spring-forward when a Sunday)" "$(want 0328 01:00:00Z)" "$(nxt spring)"
assert_eq "02:30 Berlin on 31 October (fall-back when a Sunday)" "$(want 1031 00:30:00Z)" "$(nxt autumn)"
for n in ber spring autumn; do engine schedule delete "$n" 2>/dev/null; done
assert_exit "delete an unknown schedule" 2 engine schedule delete ber
assert_contains "says so" "no schedule named ber" "$ERR"

# --- every second: fires with the right ids
assert_exit "create tick" 0 engine schedule create tick --cron '* * * * * *' --workflow "$WF" --input '{"seconds":0}'
serve
wait_true 60 '[ "$(started tick)" -ge 3 ]' 'started tick; tail -n 3 "$T/serve.log"' || true
# fire_secs NAME: its fires' instants (epoch seconds, from the ids), in order
fire_secs() { for id in $(q "SELECT id FROM workflows WHERE id GLOB 'sched:$1:2*' ORDER BY id"); do id_secs "$id"; done; }
N="$(started tick)" SPAN="$(fire_secs tick | awk 'NR == 1 {f = $1} {l = $1} END {print l - f + 1}')"
if [ "$N" -ge 3 ] && [ "$N" -le "$SPAN" ]; then pass "tick fired $N times, at most once a second ($SPAN s)"; else fail "tick fired $N times over $SPAN s"; fi
BAD="$(q "SELECT id FROM workflows WHERE id GLOB 'sched:tick:*' AND id NOT GLOB 'sched:tick:[0-9][0-9][0-9][0-9][0-1][0-9][0-3][0-9]T[0-2][0-9][0-5][0-9][0-5][0-9]Z'")"
assert_eq "every id is sched:tick:YYYYMMDDTHHMMSSZ" "" "$BAD"
FIRST="$(q "SELECT id FROM workflows WHERE id GLOB 'sched:tick:*' ORDER BY id LIMIT 1")"
CREATED="$(q "SELECT created_at/1000 FROM workflows WHERE id='$FIRST'")"
D=$((CREATED - $(id_secs "$FIRST")))
if [ "$D" -ge 0 ] && [ "$D" -le "$(scaled 10)" ]; then pass "a fire starts at its FIRETIME, not before"; else fail "$FIRST started $D s after its time"; fi
wait_status "$FIRST" completed 10 && pass "a fire runs to completion" || fail "$FIRST did not complete"
assert_eq "the input has the schedule as identity" "schedule:tick" "$(engine show "$FIRST" --json | jget result.by)"

# --- pause, resume, trigger
assert_exit "pause" 0 engine schedule pause tick
P0="$(started tick)"; PAUSED_AT="$(date +%s)"
sleep 2.2 # an observation window (nothing may fire in it), not a wait
assert_eq "no fire while paused" "$P0" "$(started tick)"
assert_contains "list says paused" "paused" "$(engine schedule list | grep '^tick ')"
assert_exit "resume" 0 engine schedule resume tick
RESUMED_AT="$(date +%s)"
wait_true 60 '[ "$(started tick)" -gt "$P0" ]' || true
P1="$(started tick)"
if [ "$P1" -gt "$P0" ]; then pass "fires again after resume ($P0 -> $P1)"; else fail "no fire after resume ($P0 -> $P1)"; fi
INPAUSE=0
for id in $(q "SELECT id FROM workflows WHERE id GLOB 'sched:tick:2*'"); do
  s="$(id_secs "$id")"; [ "$s" -gt "$PAUSED_AT" ] && [ "$s" -lt "$RESUMED_AT" ] && INPAUSE=$((INPAUSE + 1))
done
assert_eq "fires while paused are not caught up" 0 "$INPAUSE"
assert_exit "trigger" 0 engine schedule trigger tick
TID="$OUT"
if [[ "$TID" =~ ^sched:tick:manual-[0-9]{8}T[0-9]{6}\.[0-9]{3}Z$ ]]; then pass "trigger prints its id ($TID)"; else fail "trigger printed [$TID]"; fi
wait_status "$TID" completed 10 && pass "the triggered run completes" || fail "$TID did not complete"
assert_exit "trigger an unknown schedule" 2 engine schedule trigger nope
assert_exit "pause an unknown schedule" 2 engine schedule pause nope
engine schedule delete tick 2>/dev/null
D0="$(started tick)"; sleep 1.5 # an observation window (nothing may fire in it), not a wait
assert_eq "a deleted schedule fires no more" "$D0" "$(started tick)"

# --- overlap policies: runs of 2.5 s (3.5 s for cancel) on an every-second schedule
engine schedule create oskip --cron '* * * * * *' --workflow "$WF" --input '{"seconds":2.5}' --overlap skip 2>/dev/null
engine schedule create obuf --cron '* * * * * *' --workflow "$WF" --input '{"seconds":2.5}' --overlap buffer_one 2>/dev/null
engine schedule create oall --cron '* * * * * *' --workflow "$WF" --input '{"seconds":2.5}' --overlap allow_all 2>/dev/null
engine schedule create ocan --cron '*/2 * * * * *' --workflow "$WF" --input '{"seconds":30}' --overlap cancel_other 2>/dev/null
# until each policy has shown itself (the number of fires that takes depends
# on the machine's pace, not the checks)
overlap_seen() {
  [ "$(started oskip)" -ge 2 ] && [ "$(skipped oskip)" -ge 3 ] && [ "$(started obuf)" -ge 2 ] &&
    [ "$(skipped obuf)" -ge 1 ] && [ "$(started oall)" -ge 5 ] && [ "$(started ocan)" -ge 3 ]
}
wait_true 120 overlap_seen 'for n in oskip obuf oall ocan; do echo "$n: $(started $n) started, $(skipped $n) skipped"; done' || true
for n in oskip obuf oall ocan; do engine schedule pause "$n" 2>/dev/null; done
NS="$(started oskip)" NB="$(started obuf)" NA="$(started oall)" NC="$(started ocan)"
# overlaps SCHEDULE: how many of its runs started before the one before it ended
overlaps() { q "SELECT count(*) FROM workflows a JOIN workflows b ON b.id = (SELECT min(id) FROM workflows WHERE id GLOB 'sched:$1:2*' AND id > a.id) WHERE a.id GLOB 'sched:$1:2*' AND b.created_at < a.updated_at"; }
[ "$NS" -ge 2 ] && pass "skip: $NS runs" || fail "skip: $NS runs"
assert_eq "skip: no run started before the one before it ended" 0 "$(overlaps oskip)"
if [ "$(skipped oskip)" -ge 3 ]; then pass "skip counts the skipped fires ($(skipped oskip))"; else fail "skip counted $(skipped oskip)"; fi
if [ "$NA" -ge 5 ]; then pass "allow_all: $NA runs"; else fail "allow_all: $NA runs"; fi
assert_eq "allow_all skips nothing" 0 "$(skipped oall)"
[ "$(overlaps oall)" -ge 1 ] && pass "allow_all: runs overlap ($(overlaps oall))" || fail "allow_all: no two runs overlapped"
[ "$NB" -ge 2 ] && pass "buffer_one: $NB runs" || fail "buffer_one: $NB runs"
if [ "$(skipped obuf)" -ge 1 ]; then pass "buffer_one skips beyond the one buffered ($(skipped obuf))"; else fail "buffer_one skipped none"; fi
# a buffered run starts only once the one before it has ended, and at once
# (within 1.5 s, scaled: the scheduler's reaction, on a busy machine too)
OVER="$(q "SELECT count(*) FROM workflows a JOIN workflows b ON b.id = (SELECT min(id) FROM workflows WHERE id GLOB 'sched:obuf:2*' AND id > a.id) WHERE a.id GLOB 'sched:obuf:2*' AND (b.created_at < a.updated_at OR b.created_at > a.updated_at + $(scaled 1.5)000)")"
assert_eq "buffer_one: each run starts when the previous ends" 0 "$OVER"
RUNNING_OBUF="$(q "SELECT count(*) FROM workflows WHERE id GLOB 'sched:obuf:*' AND status IN ('running','waiting')")"
if [ "$RUNNING_OBUF" -le 1 ]; then pass "buffer_one: never two at once"; else fail "buffer_one: $RUNNING_OBUF running"; fi
wait_true 60 '[ "$(q "SELECT count(*) FROM workflows WHERE id GLOB '\''sched:ocan:*'\'' AND status='\''cancelled'\''")" -ge $((NC - 1)) ]' || true
CANCELLED="$(q "SELECT count(*) FROM workflows WHERE id GLOB 'sched:ocan:*' AND status='cancelled'")"
LIVE="$(q "SELECT count(*) FROM workflows WHERE id GLOB 'sched:ocan:*' AND status IN ('running','waiting')")"
if [ "$NC" -ge 3 ] && [ "$CANCELLED" -eq $((NC - 1)) ]; then pass "cancel_other: $CANCELLED of $NC cancelled"; else fail "cancel_other: $CANCELLED of $NC cancelled"; fi
assert_eq "cancel_other: one runs" 1 "$LIVE"
for n in oskip obuf oall ocan; do engine schedule delete "$n" 2>/dev/null; done

# --- kill -9 of serve: catch-up within the window, older fires skipped and counted, none twice
engine schedule create cu --cron '* * * * * *' --workflow "$WF" --input '{"seconds":0}' --overlap allow_all --catchup-window 3s 2>/dev/null
wait_true 60 '[ "$(started cu)" -ge 2 ]' || true
kill -9 "$S"; wait "$S" 2>/dev/null || true
KILLED_AT="$(date +%s)"; SK0="$(skipped cu)"
sleep 7 # serve stays down for 7 s (pacing the outage past the 3 s window), not a wait
C0="$(started cu)"
serve
# the window is counted back from the restarted serve's first look at its
# schedules, which follows its "serving" line: taken before the start, a
# loaded machine's slow start-up put every missed fire outside it
RESTART_AT="$(date +%s)"
wait_true 60 '[ "$(started cu)" -gt "$C0" ] && [ "$(skipped cu)" -gt "$SK0" ] && [ "$(notdone cu)" == 0 ]' \
  'echo "started $(started cu), skipped $(skipped cu), not completed $(notdone cu)"' || true
stop_serve
MISSED=0; TOO_OLD=0
for id in $(q "SELECT id FROM workflows WHERE id GLOB 'sched:cu:2*'"); do
  s="$(id_secs "$id")"
  if [ "$s" -gt "$KILLED_AT" ] && [ "$s" -lt "$RESTART_AT" ]; then
    MISSED=$((MISSED + 1)); [ "$s" -lt $((RESTART_AT - 4)) ] && TOO_OLD=$((TOO_OLD + 1))
  fi
done
if [ "$MISSED" -ge 1 ] && [ "$MISSED" -le 4 ]; then pass "fires missed within the window ran ($MISSED)"; else fail "missed fires run: $MISSED"; fi
assert_eq "fires older than the window did not run" 0 "$TOO_OLD"
SK1="$(skipped cu)"
if [ $((SK1 - SK0)) -ge 2 ]; then pass "older fires are counted skipped ($SK0 -> $SK1)"; else fail "skipped $SK0 -> $SK1"; fi
assert_eq "each fire started once" "$(q "SELECT count(DISTINCT id) FROM workflows WHERE id GLOB 'sched:*'")" "$(q "SELECT count(*) FROM workflows WHERE id GLOB 'sched:*'")"
NOTDONE="$(notdone cu)"
assert_eq "every catch-up run completed, none failed" 0 "$NOTDONE"
ATTEMPTS="$(q "SELECT count(*) FROM history WHERE wf_id GLOB 'sched:cu:*' AND type='WorkflowStarted'")"
assert_eq "one start in each history" "$(started cu)" "$ATTEMPTS"
if grep -q "cannot start\|already exists" "$T/serve.log"; then fail "serve logged: $(grep "cannot start\|already exists" "$T/serve.log")"; else pass "no start failed or repeated"; fi

# --- a crash inside the batch of a fire (ENGINE_CRASH, crash.h) and right after its commit:
# after a restart the fires form an unbroken run of seconds, each started once
engine schedule delete cu 2>/dev/null
engine schedule create cr --cron '* * * * * *' --workflow "$WF" --input '{"seconds":0}' --overlap allow_all --catchup-window 10s 2>/dev/null
for point in schedule.fired:3 schedule.committed:3; do
  : >"$T/serve.log"
  bg S env ENGINE_CRASH="$point" "$ENGINE" serve 2>>"$T/serve.log"
  set +e; wait "$S"; RC=$?; set -e
  assert_eq "serve died at $point" 137 "$RC"
  C0="$(started cr)"
  serve
  wait_true 60 '[ "$(started cr)" -ge $((C0 + 2)) ] && [ "$(notdone cr)" == 0 ]' || true
  stop_serve
  IDS="$(q "SELECT id FROM workflows WHERE id GLOB 'sched:cr:2*' ORDER BY id")"
  FIRST_S="$(id_secs "$(printf '%s\n' "$IDS" | sed -n 1p)")" LAST_S="$(id_secs "$(printf '%s\n' "$IDS" | tail -1)")"
  NIDS="$(printf '%s\n' "$IDS" | grep -c .)"
  assert_eq "after $point: every second fired once, none lost" $((LAST_S - FIRST_S + 1)) "$NIDS"
  assert_eq "after $point: one start in each history" "$NIDS" "$(q "SELECT count(*) FROM history WHERE wf_id GLOB 'sched:cr:*' AND type='WorkflowStarted'")"
  assert_eq "after $point: all completed" 0 "$(notdone cr)"
done
# a write of a schedule that fails (ENGINE_STORE_FAIL) loses its batch, fires included: retried, each once
: >"$T/serve.log"
C0="$(started cr)"
bg S env ENGINE_STORE_FAIL=schedule:3 "$ENGINE" serve 2>>"$T/serve.log"
wait_true 60 'grep -q "writable again" "$T/serve.log" && [ "$(started cr)" -ge $((C0 + 3)) ]' 'tail -n 3 "$T/serve.log"' || true
stop_serve
assert_contains "the failed write was reported" "cannot write to the store" "$(cat "$T/serve.log")"
IDS="$(q "SELECT id FROM workflows WHERE id GLOB 'sched:cr:2*' ORDER BY id")"
FIRST_S="$(id_secs "$(printf '%s\n' "$IDS" | sed -n 1p)")" LAST_S="$(id_secs "$(printf '%s\n' "$IDS" | tail -1)")"
NIDS="$(printf '%s\n' "$IDS" | grep -c .)"
assert_eq "after a lost batch: every second fired once, none lost" $((LAST_S - FIRST_S + 1)) "$NIDS"
assert_eq "after a lost batch: one start in each history" "$NIDS" "$(q "SELECT count(*) FROM history WHERE wf_id GLOB 'sched:cr:*' AND type='WorkflowStarted'")"

finish
