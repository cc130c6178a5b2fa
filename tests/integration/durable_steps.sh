# durable_steps.sh: the kill -9 matrix of test_durable_steps.sh and
# test_durable_steps_waits.sh (two tests, so each takes half the time on a
# busy machine), for the shapes in DURABLE_SHAPES; sourced after lib.sh. Ends
# with every hash chain checked (engine verify --all).
WF="$SRC/tests/integration/wf/durable_steps.lua"
export TEST_SIDE_EFFECTS="$T/effects"
: >"$TEST_SIDE_EFFECTS"
if on_postgres; then export STEP_SQL="$PG_BIN/psql -h 127.0.0.1 -p $PG_PORT -U engine -d $PG_TEST_DB -Atqc"
else export STEP_SQL="sqlite3 -readonly $ENGINE_DB"; fi

# committed_steps ID: the steps whose completion is in the log, one a line
committed_steps() {
  sql "select payload from history where wf_id = '$1' and type = 'ActivityCompleted'" |
    { grep -o '"step":[0-9]*' || true; } | cut -d: -f2 | sort -n
}
# what a step of shape must read as committed when it begins
needs() { if [ "$1" == futures ]; then [ "$2" == 4 ] && echo 3 || echo 0; else echo $(($2 - 1)); fi; }
want_result() { case "$1" in chain | timer) echo 6 ;; futures) echo 10 ;; signal) echo 11 ;; esac; }

# signal_when_waiting ID PID: sends the signal once the log shows the wait
# (or not, when process PID ended first: killed, or the signal is in already)
has_event() { [ -n "$(sql "select 1 from history where wf_id = '$1' and type = '$2' limit 1")" ]; }
waits_or_ended() { has_event "$1" SignalWaitStarted || ! kill -0 "$2" 2>/dev/null; }
signal_when_waiting() {
  local id="$1" p="$2"
  has_event "$id" SignalReceived && return
  wait_for 60 "$id waits for its signal, or its run ended" 'waits_or_ended "$1" "$2"' "" "$id" "$p" || return 0
  if has_event "$id" SignalWaitStarted; then
    engine signal "$id" go '{"n":5}' >/dev/null 2>&1 && early=1 # sent once
  fi
}

cases=0 hit=0 reran=0
run_case() {
  local shape="$1" yield="$2" pt="$3"
  cases=$((cases + 1))
  local id="d$cases-$shape" input="{\"shape\":\"$shape\",\"yield\":$yield}"
  "$ENGINE" start "$WF" --id "$id" --detach --input "$input" >/dev/null || true # 3: not finished
  # a signal sent before the wait (even cases) or while the run waits on it (odd)
  local early=0
  [ "$shape" == signal ] && [ $((cases % 2)) == 0 ] && early=1 && engine signal "$id" go '{"n":5}' >/dev/null
  ENGINE_CRASH="$pt" "$ENGINE" start "$WF" --id "$id" --quiet >/dev/null 2>"$T/crash.err" &
  local p=$! rc
  [ "$shape" == signal ] && [ "$early" == 0 ] && signal_when_waiting "$id" "$p"
  set +e; wait "$p"; rc=$?; set -e
  [ "$rc" == 137 ] && hit=$((hit + 1))
  local mark committed
  mark="$(wc -l <"$TEST_SIDE_EFFECTS")"
  committed="$(committed_steps "$id" | tr '\n' ' ')"
  local tries=0
  while [ "$(status "$id")" != completed ] && [ $tries -lt 4 ]; do
    tries=$((tries + 1))
    "$ENGINE" start "$WF" --id "$id" --quiet >/dev/null 2>"$T/resume.err" &
    p=$!
    [ "$shape" == signal ] && [ "$early" == 0 ] && signal_when_waiting "$id" "$p"
    wait "$p" || true
  done
  local what="$shape yield=$yield $pt"
  if [ "$(status "$id")" != completed ]; then
    fail "$what: not completed ($(status "$id")): $(tail -3 "$T/resume.err")"
    return
  fi
  local res
  res="$(engine show "$id" --json | jget result)"
  [ "$res" == "$(want_result "$shape")" ] || fail "$what: result $res"
  local h
  h="$(verify_history "$id" 2>&1)"
  case "$h" in *"open_commands=0 last=WorkflowCompleted") ;; *) fail "$what: history: $h" ;; esac
  # every body began after the completions it follows were committed
  local line step n
  while read -r _ _ step n; do
    [ "$n" -ge "$(needs "$shape" "$step")" ] ||
      fail "$what: step $step began with $n completions committed (needs $(needs "$shape" "$step"))"
  done < <(grep "^$id begin " "$TEST_SIDE_EFFECTS")
  # after the restart, only bodies whose completion was not committed ran
  while read -r _ _ step _; do
    case " $committed" in *" $step "*) fail "$what: step $step ran again after the restart, its completion was committed" ;; esac
  done < <(tail -n +"$((mark + 1))" "$TEST_SIDE_EFFECTS" | grep "^$id begin ")
  local twice
  twice="$(grep "^$id begin " "$TEST_SIDE_EFFECTS" | awk '{n[$3]++} END {for (s in n) if (n[s] > 1) c++; print c + 0}')"
  reran=$((reran + twice))
  [ "$shape" == futures ] || [ "$twice" -le 1 ] || fail "$what: $twice steps of one chain ran again"
}

POINTS="commit.before:1 commit.before:2 commit.before:3 commit.after:1 commit.after:2 activity.start:2"
N_END="2"
# every point on SQLite; the commit points on PostgreSQL and under ASan (slower: the same paths)
if ! on_postgres && [ "${ENGINE_SANITIZED:-0}" != 1 ]; then
  POINTS+=" commit.before:4 commit.after:3 activity.start:1 activity.start:3 activity.record:1 activity.record:2"
  POINTS+=" append:3 append:5"
  N_END="1 2 3"
fi
for shape in $DURABLE_SHAPES; do
  for yield in false true; do
    [ "$shape" != chain ] && [ "$yield" == false ] && continue # the others yield once anyway (a timer, a signal, wf.all)
    pts="$POINTS"
    for n in $N_END; do [ "$yield" == false ] && pts+=" activity.end:$n" || pts+=" activity.done:$n"; done
    for pt in $pts; do run_case "$shape" "$yield" "$pt"; done
  done
done
echo "# $cases cases, $hit killed at their crash point; steps that ran again: $reran"
[ "$hit" -ge $((cases * 3 / 4)) ] && pass "$hit of $cases crash points were reached" || fail "only $hit of $cases crash points reached"

assert_exit "every case's hash chains whole after its kill and resume (engine verify --all)" 0 engine verify --all
