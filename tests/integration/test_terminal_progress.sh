#!/usr/bin/env bash
# The CLI on a terminal, driven through tmux (each run in a session of its own
# size; capture-pane reads the screen): a foreground start keeps a status line
# below its events that changes while the session runs and is redrawn in
# place (a wait for a signal, a streaming model turn with its character count,
# an activity, the PR review's approval naming the command that answers it),
# shows the text a model streams and replaces it by the recorded message, and
# leaves no trace of itself once the result is printed. `engine events` on a
# terminal wraps to the width, folds a tool result taller than the screen with
# the exact count of bytes left out, and marks approvals (in colour unless
# NO_COLOR); --full prints everything. Piped, the same commands print the
# bytes they always printed (compared with golden files made before this
# existed, times set aside), and a start's stderr in a file is plain lines.
source "$(dirname "$0")/lib.sh"
command -v tmux >/dev/null || { fail "tmux is missing (scripts/install-deps installs it)"; finish; }
export USER=tester # the approver's name in what is compared
unset NO_COLOR
TWF="$SRC/tests/integration/wf"
GOLD="$SRC/tests/integration/golden"

SOCK="engine-test-$$"
tm() { tmux -L "$SOCK" -f /dev/null "$@"; }
trap 'EXIT_RC=$?; tm kill-server 2>/dev/null || true; cleanup' EXIT
tm new-session -d -s idle -x 80 -y 24 "sleep 3600"
tm set-option -g remain-on-exit on
tm set-option -g history-limit 5000

# pane NAME COLS ROWS COMMAND...: runs the command (a line of bash) in a new
# terminal of that size; its screen stays after it exits, its exit code goes
# to $T/NAME.rc (tmux does not always know it)
pane() {
  local name="$1" cols="$2" rows="$3"; shift 3
  { echo "cd '$SRC'"; echo "export ENGINE_DB='$ENGINE_DB' ENGINE_LUA_DIR='$ENGINE_LUA_DIR' USER=tester TERM=xterm-256color"
    echo "$*"; echo "echo \$? >'$T/$name.rc'"; } >"$T/$name.sh"
  tm new-session -d -s "$name" -x "$cols" -y "$rows" "bash --norc --noprofile $T/$name.sh"
}
screen() { tm capture-pane -p -t "=$1:"; }                # the visible rows
scrollback() { tm capture-pane -p -S - -t "=$1:"; }       # with what scrolled off
colours() { tm capture-pane -p -e -S - -t "=$1:"; }       # with the SGR sequences
dead() { [ -s "$T/$1.rc" ]; }
exit_of() { cat "$T/$1.rc"; }
# wait_screen NAME ERE [SECONDS]: until a visible row matches
wait_screen() {
  wait_for "${3:-20}" "$1: a row matching /$2/" 'screen "$1" | has_line -E -- "$2"' 'screen "$1"' "$@"
}
wait_dead() {
  wait_for "${2:-30}" "$1 to end" 'dead "$1"' 'screen "$1"' "$@"
}
# the status rows: they start with the spinner
status_rows() { grep -E '^[-\|/\\] ' || true; }
norm() { sed -E 's/^(#[0-9]+ +)[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z/\1HH:MM:SS.mmmZ/; s/"time":[0-9]+/"time":0/'; }

# --- a transcript to read: a long message, a 122-line tool result, an approval
python3 "$SRC/tests/integration/transcript_input.py" >"$T/tin.json"
"$ENGINE" start "$TWF/transcript.lua" --id TR --input @"$T/tin.json" >"$T/TR.out" 2>"$T/TR.err" & PTR=$!; PIDS+=("$PTR")
wait_true 30 'engine approve TR --request publish-1 --reason "fine by me" >/dev/null 2>&1' || true
wait "$PTR" || fail "the transcript workflow: $(cat "$T/TR.err")"

# --- piped: the bytes of before, whatever the environment says of a terminal
engine events TR | norm >"$T/ev.txt"
cmp -s "$GOLD/transcript_events.txt" "$T/ev.txt" && pass "events piped: the same bytes" || fail "events piped differ: $(diff "$GOLD/transcript_events.txt" "$T/ev.txt" | sed -n 1,5p)"
COLUMNS=30 LINES=5 engine events TR | norm >"$T/ev.txt"
cmp -s "$GOLD/transcript_events.txt" "$T/ev.txt" && pass "... with COLUMNS and LINES set" || fail "COLUMNS changed piped events"
engine events TR --follow | norm >"$T/ev.txt"
cmp -s "$GOLD/transcript_events.txt" "$T/ev.txt" && pass "events --follow piped: the same bytes" || fail "events --follow piped differ"
engine events TR --json | norm >"$T/ev.json"
cmp -s "$GOLD/transcript_events.json" "$T/ev.json" && pass "events --json: the same bytes" || fail "events --json differs: $(diff "$GOLD/transcript_events.json" "$T/ev.json" | sed -n 1,5p)"
engine events TR --json --full | norm >"$T/ev.json"
cmp -s "$GOLD/transcript_events.json" "$T/ev.json" && pass "--json --full is --json" || fail "--full changed --json"
engine events TR --full >"$T/full.txt"
assert_contains "--full piped: the whole tool result, a line a row" "                          line 120: xxxxxxxxxxxxxxxxxxxx" "$(cat "$T/full.txt")"
assert_eq "--full piped: nothing folded, no colour" "0 0" "$(grep -c 'bytes more' "$T/full.txt") $(grep -c $'\033' "$T/full.txt")"
# inside a terminal, with stdout a file
pane evfile 80 24 "\"$ENGINE\" events TR >'$T/evfile.txt'; \"$ENGINE\" events TR --json >'$T/evfile.json'"
wait_dead evfile
assert_eq "stdout a file, stderr a terminal: the same bytes" "same same" \
  "$(norm <"$T/evfile.txt" | cmp -s - "$GOLD/transcript_events.txt" && echo same) $(norm <"$T/evfile.json" | cmp -s - "$GOLD/transcript_events.json" && echo same)"

# --- events on a terminal of 80 x 24: wrapped, folded, approvals marked
pane ev 80 24 "\"$ENGINE\" events TR"
wait_dead ev
EV="$(scrollback ev)"
assert_eq "events on a terminal exits 0" 0 "$(exit_of ev)"
# the message wraps under its own start (32 columns in), which the terminal's own wrapping never does
assert_contains "a long message wraps under its start" $'\n                                The change splits' "$EV"
assert_contains "its second paragraph on a row of its own" $'\n\n                                Second paragraph: the refill path is not tested.' "$EV"
# 12 rows (half the screen) of the result, then the bytes left out, counted exactly
MORE="$(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["content"].encode()
print(len(c) - sum(len(l) + 1 for l in c.split(b"\n")[:12]))' "$T/tin.json")"
assert_contains "a tool result taller than the screen is folded" \
  $'line 012: xxxxxxxxxxxx\n                          [... '"$MORE"' bytes more: engine events TR --full]' "$EV"
assert_eq "only its first rows show" "0 0" "$(grep -c 'line 013' <<<"$EV") $(grep -c 'line 120' <<<"$EV")"
assert_contains "an approval request stands out" \
  $'?? APPROVAL NEEDED publish_review (request publish-1)\n                        reason: publishing needs a person\n                        args: {"body":"LGTM with two nits"}' "$EV"
assert_contains "its answer, with who gave it" \
  $'ok APPROVED by local:tester (request publish-1)\n                        reason: fine by me' "$EV"
row="$(colours ev | grep 'APPROVAL NEEDED')"
[[ "$row" == *$'\033['*"?? APPROVAL NEEDED"* ]] && pass "in colour on a terminal" || fail "no colour in: $(printf %q "$row")"
pane evnc 80 24 "NO_COLOR=1 \"$ENGINE\" events TR"
wait_dead evnc
row="$(colours evnc | grep 'APPROVAL NEEDED')"
[[ "$row" != *$'\033'* && "$row" == *"?? APPROVAL NEEDED"* ]] && pass "NO_COLOR: marked, without colour" || fail "NO_COLOR: $(printf %q "$row")"
pane evfull 80 24 "\"$ENGINE\" events TR --full"
wait_dead evfull
FULL="$(scrollback evfull)"
assert_contains "--full on a terminal: everything" "line 120: xxxxxxxxxxxxxxxxxxxx" "$FULL"
assert_contains "... an escape in it shown, not obeyed" 'indented\x1b[2J after a tab' "$FULL"
assert_eq "... folded nowhere" 0 "$(grep -c 'bytes more' <<<"$FULL")"

# --- a foreground start waiting for a signal: the status line, redrawn in place
pane H1 100 30 "\"$ENGINE\" start workflows/hello.lua --id H1 --input '{\"name\":\"Ada\",\"n\":2}'"
wait_screen H1 "waiting for signal 'approval' since [0-9:]{8} \([0-9]+ s\)"
A="$(screen H1 | status_rows)"
wait_true 30 '[ "$(screen H1 | status_rows)" != "$A" ]' 'screen H1' || true # its clock ticks
B="$(screen H1 | status_rows)"
assert_contains "the status says what it waits on" "waiting for signal 'approval' since" "$A"
[ -n "$A" ] && [ "$A" != "$B" ] && pass "the status line changes while it waits ($(cut -c1-60 <<<"$B"))" || fail "status did not change: [$A] [$B]"
assert_eq "... in place: one status row on the whole screen" 1 "$(scrollback H1 | status_rows | wc -l)"
assert_contains "... with the command that answers it" "  send it from another terminal: engine signal H1 approval '{...}'" "$(screen H1)"
engine signal H1 approval '{"approved":true}' >/dev/null 2>&1
wait_dead H1
H1S="$(scrollback H1)"
assert_eq "it ends as before (exit 0)" 0 "$(exit_of H1)"
assert_contains "the events above it" "assistant: Hello, Ada! (2)" "$H1S"
assert_eq "the status is gone once it ends: no status row, no wait line" "0 0" \
  "$(status_rows <<<"$H1S" | wc -l) $(grep -c 'waiting for signal' <<<"$H1S")"
# on a terminal the result is the outcome for people (pretty.c), its first row "id: H1"
assert_eq "the result starts a row of its own" 1 "$(grep -cE '^id: +H1 *$' <<<"$H1S")"

# --- streamed text above the status, then the recorded message in its place
python3 -c 'import json; print(json.dumps({"parts": ["word%d " % i for i in range(50)]}))' >"$T/parts.json"
pane LT 100 30 "\"$ENGINE\" start '$TWF/live_text.lua' --id LT --input @'$T/parts.json'"
wait_screen LT "waiting for signal 'go'"
engine signal LT go >/dev/null 2>&1
wait_screen LT "^word0 word1 word2 word3 word4 word5"
S="$(screen LT)"
assert_contains "the status names the activity while text streams" "activity live_text_acts.stream running for" "$S"
assert_eq "the text shows before it is recorded" 0 "$(grep -c 'assistant:' <<<"$S")"
wait_dead LT
S="$(scrollback LT)"
assert_contains "the recorded message takes its place" "assistant: word0 word1 word2" "$S"
assert_eq "no streamed row is left, no ~ live line" "0 0" "$(grep -c '^word0' <<<"$S") $(grep -c '~ live' <<<"$S")"

# --- a model turn streaming: its characters counted as they come
start_model_server <(echo '{"steps":[]}')
TEXT="$(python3 -c "print(' '.join('token%d' % i for i in range(120)))")"
scenario "{\"steps\":[{\"reply\":{\"text\":\"$TEXT\"},\"fragment_size\":6,\"chunk_delay\":0.04}]}"
pane MT 100 30 "\"$ENGINE\" start '$TWF/model_call.lua' --id MT --input '{\"model\":{\"name\":\"m\",\"provider\":\"openai\",\"baseUrl\":\"$MURL/v1\"},\"options\":{\"stream\":true}}'"
wait_screen MT "model turn 1 streaming: [0-9]+ characters so far"
n1="$(screen MT | grep -Eo 'streaming: [0-9]+' | grep -Eo '[0-9]+')"
wait_true 30 'n2="$(screen MT | grep -Eo "streaming: [0-9]+" | grep -Eo "[0-9]+" || echo 0)"; [ "$n2" -gt "$n1" ]' 'screen MT' || true
[ -n "$n1" ] && [ "$n2" -gt "$n1" ] && pass "model turn 1 streaming: $n1, then $n2 characters so far" || fail "no growing count: $n1 $n2 $(screen MT)"
wait_dead MT
assert_eq "... and gone when it ends" 0 "$(scrollback MT | status_rows | wc -l)"

# --- not a terminal: plain lines, only when the state changes
"$ENGINE" start "$TWF/live_text.lua" --id LP >"$T/LP.out" 2>"$T/LP.err" & PLP=$!; PIDS+=("$PLP")
wait_true 30 'grep -q "waiting for signal" "$T/LP.err" 2>/dev/null' || true
engine signal LP go >/dev/null 2>&1
wait "$PLP"
LP="$(cat "$T/LP.err")"
assert_contains "plain: the wait, with its command" "engine: LP is waiting for signal 'go'; send it with: engine signal LP go '{...}'" "$LP"
assert_contains "plain: the activity, once" "~ activity live_text_acts.stream running" "$LP"
assert_eq "... once" 1 "$(grep -c '^~ activity' <<<"$LP")"
assert_eq "plain: the streamed text on ~ live lines" "Hello, world" "$(grep '^~ live (step [0-9]*): ' <<<"$LP" | sed 's/^~ live (step [0-9]*): //' | tr -d '\n')"
assert_eq "plain: no escape sequence, no carriage return" "0 0" "$(grep -c $'\033' "$T/LP.err") $(grep -c $'\r' "$T/LP.err")"
assert_eq "the result on stdout as before" '{"text":"Hello, world"}' "$(cat "$T/LP.out")"

# --- the main job, typed into a shell: the PR review, its status, its approval
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
export ENGINE_CONTEXT_ROOTS="$SRC:$T" ENGINE_REVIEWS_DIR="$T/reviews" ENGINE_ARTIFACTS="$T/artifacts"
tm new-session -d -s PR -x 100 -y 40 "env -u NO_COLOR bash --norc --noprofile"
tm send-keys -t "=PR:" "PS1='$ '; cd '$SRC'; export TERM=xterm-256color; clear" Enter
tm send-keys -t "=PR:" "\"$ENGINE\" start workflows/agent_session.lua --id PR --input @examples/pr-review.json; echo \"exit=\$?\"" Enter
seen="$T/PR.status"; : >"$seen"
# the status rows sampled as it goes (every 50 ms), until the approval prompt
wait_for 120 "the approval prompt" 'screen PR | status_rows | cut -c3- | sed -E "s/[0-9]+ (s|min)\b.*//" >>"$seen"
  screen PR | has_line "waiting for approval of publish_review"' 'screen PR' || true
RID="$(engine show PR --json | jget waits.request_id)"
S="$(screen PR)"
assert_contains "the approval prompt: what it waits for" "waiting for approval of publish_review since" "$S"
assert_contains "... and the command that answers it" "answer from another terminal: engine approve PR --request $RID" "$S"
kinds="$(sort -u "$seen" | sed -E 's/ (running|since|streaming|:).*//' | sort -u | tr '\n' ',')"
# the replay model answers at once: on a loaded machine (ASan) its turns can
# fall between two samples, so the states sure to be seen are the sandbox's
# provisioning and the approval; two different ones is the status changing
[ "$(sort -u "$seen" | wc -l)" -ge 2 ] && pass "the status changed as the session ran: $kinds" || fail "too few states seen: $(sort -u "$seen")"
assert_contains "... through its activities" "activity " "$kinds"
engine approve PR --request "$RID" --reason "ship it" >/dev/null 2>&1
wait_true 60 'screen PR | has_line '\''^exit='\''' || true
S="$(scrollback PR)"
assert_contains "it ends as documented" "exit=0" "$S"
assert_contains "the answer stands out in its transcript" "ok APPROVED by local:tester (request $RID)" "$S"
assert_eq "no status row is left behind" 0 "$(status_rows <<<"$S" | wc -l)"
finish
