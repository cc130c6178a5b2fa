#!/usr/bin/env bash
# wf.random and wf.uuid are replay-stable: a workflow that draws outside and
# inside checkpoint functions, around an activity and a timer, is killed with
# SIGKILL at every crash point (ENGINE_CRASH=point:n) and resumed. Each case
# starts from a copy of one recorded start (the same seed), so every case must
# end with the uninterrupted run's result and history (every uuid, every
# activity's arguments), event for event but the times. And the idempotency
# key an activity sees names the run: two runs of one workflow
# (continue_as_new) never hand one key to two activities.
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf/random_draws.lua"
export TEST_SIDE_EFFECTS="$T/effects"

# the history without times (and the timer's due time, which is a time)
history_of() {
  ENGINE_DB="$1" engine history r --json | sed -e 's/"time":[0-9]*,//' -e 's/"fire_at":[0-9]*,//'
}

assert_exit "record the start (and its seed)" 3 engine start "$WF" --id r --detach
sqlite3 "$ENGINE_DB" ".backup '$T/base.db'"
cp "$T/base.db" "$T/ref.db"
assert_exit "the uninterrupted run" 0 env ENGINE_DB="$T/ref.db" "$ENGINE" start "$WF" --id r --quiet
WANT="$OUT"
WANT_HISTORY="$(history_of "$T/ref.db")"
events=$(echo "$WANT_HISTORY" | wc -l)
assert_eq "its history" 10 "$events"

POINTS="timer.fire:1 commit.before:1 commit.before:2 commit.before:3 commit.after:1 commit.after:2 commit.after:3"
POINTS+=" activity.start:1 activity.start:2 activity.end:1 activity.end:2 activity.record:1 activity.record:2"
for n in $(seq 1 "$events"); do POINTS+=" append:$n"; done
cases=0 killed=0
for pt in $POINTS; do
  cases=$((cases + 1))
  db="$T/case$cases.db"
  cp "$T/base.db" "$db"
  set +e
  ENGINE_DB="$db" ENGINE_CRASH="$pt" "$ENGINE" start "$WF" --id r --quiet >/dev/null 2>&1
  rc=$?
  set -e
  [ "$rc" == 137 ] && killed=$((killed + 1))
  for _ in 1 2 3; do
    case "$(ENGINE_DB="$db" status r)" in completed | failed | stuck) break ;; esac
    ENGINE_DB="$db" "$ENGINE" start "$WF" --id r --quiet >/dev/null 2>"$T/resume.err" || true
  done
  if [ "$(ENGINE_DB="$db" status r)" != completed ]; then
    fail "$pt: not completed after resume ($(ENGINE_DB="$db" status r)): $(cat "$T/resume.err")"
    continue
  fi
  got="$(ENGINE_DB="$db" engine show r --json)"
  [[ "$got" == *"\"result\":$WANT,"* ]] || fail "$pt: another result: $got (uninterrupted: $WANT)"
  h="$(history_of "$db")"
  [ "$h" == "$WANT_HISTORY" ] || fail "$pt: another history: $(diff <(echo "$WANT_HISTORY") <(echo "$h") | sed -n 1,5p)"
done
[ "$killed" -ge 18 ] && pass "$killed of $cases crash points killed the run; each resumed to the same result and history" ||
  fail "only $killed of $cases crash points were reached"

# ------------------------------------------------------ idempotency keys ---
assert_exit "a workflow of two runs" 0 engine start "$SRC/tests/integration/wf/idem.lua" --id idem --quiet
assert_eq "each run's activity has a key of its own, naming the run" '{"first":"idem/1/2","second":"idem/2/2"}' "$OUT"
finish
