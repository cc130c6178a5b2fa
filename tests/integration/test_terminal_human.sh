#!/usr/bin/env bash
# engine on a terminal (tmux, 120x40) and in a pipe. On a terminal, `engine
# start` ends with the outcome for people (status, summary, verdict, usage,
# the findings table, the artifacts) and `engine show` folds the input and the
# result to the terminal's width; with stdout piped, or with --json, both print
# the bytes they printed before: the stored result, the one-line fields.
# Colour is only the layout's SGR codes, on a terminal, never with NO_COLOR,
# TERM=dumb or --color=never (unless --color=always), never in a pipe; text a
# model wrote reaches the terminal as escapes. The README's main job (the
# PR review in the Docker sandbox, one approval) runs on the terminal (at 120,
# 80 and 160 columns: its transcript drawn for people, no line of raw JSON)
# and piped.
source "$(dirname "$0")/lib.sh"
command -v tmux >/dev/null || { fail "no tmux (scripts/install-deps)"; finish; }
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
cd "$SRC" # the example's paths are relative to the repository
export ENGINE_CONTEXT_ROOTS="$SRC:$T" ENGINE_REVIEWS_DIR="$T/reviews" ENGINE_ARTIFACTS="$T/artifacts"
unset NO_COLOR COLUMNS ENGINE_SERVER ENGINE_TOKEN
WF=workflows/agent_session.lua
MAIN="\$E start $WF --input @examples/pr-review.json"
TWF="$SRC/tests/integration/wf"

# this test's own tmux server: its socket is in $T, and it goes with the test
tm() { tmux -S "$T/tmux.sock" "$@"; }
trap 'EXIT_RC=$?; tm kill-server 2>/dev/null || true; cleanup' EXIT
tm new-session -d -s t -x 120 -y 40 -c "$SRC" "env PS1='$ ' E='$ENGINE' sh"

screen() { tm capture-pane -p -t t; }
N=0
# type LINE: types LINE in the terminal, then a marker line with its exit code
type_line() {
  N=$((N + 1))
  tm send-keys -t t "clear; $1; echo \"done-$N rc=\$?\"" Enter
}
# wait_done [SECONDS]: until the line typed last has finished; RC = its exit code
wait_done() {
  wait_for "${1:-30}" "line $N to finish" 'RC="$(screen | sed -n "s/^done-$N rc=\([0-9]*\).*/\1/p")"; [ -n "$RC" ]' screen && return 0
  RC=x
}
# raw LINE FILE: what LINE writes to the terminal, byte for byte (tmux
# pipe-pane), between two markers, the pty's \r\n as \n
raw() {
  : >"$T/pane"
  tm pipe-pane -t t -o "cat >>'$T/pane'"
  type_line "printf '\\074\\074out\\076\\076\\n'; $1; printf '\\074\\074/out\\076\\076\\n'"
  wait_done "${3:-30}"
  wait_true 30 'grep -q '\''<</out>>'\'' "$T/pane"' || true
  tm pipe-pane -t t
  python3 - "$T/pane" "$2" <<'PY'
import sys
d = open(sys.argv[1], "rb").read().replace(b"\r\n", b"\n")
a = d.index(b"<<out>>\n") + 8
open(sys.argv[2], "wb").write(d[a:d.index(b"<</out>>\n", a)])
PY
}
# sgr FILE: "none", "ours" (only ESC [ 0|1|2|31|32|33|36 m), or what else is there
sgr() {
  python3 - "$1" <<'PY'
import re, sys
d = open(sys.argv[1], "rb").read()
if b"\x1b" not in d:
    print("none")
else:
    rest = re.sub(rb"\x1b\[(0|1|2|31|32|33|36)m", b"", d)
    bad = re.findall(rb"[\x00-\x09\x0b-\x1f\x7f]|\xc2[\x80-\x9f]", rest)
    print("ours" if not bad else "OTHER %r" % bad[:3])
PY
}
# plain FILE: the text without our SGR codes
plain() { python3 -c 'import re,sys; sys.stdout.buffer.write(re.sub(rb"\x1b\[[0-9]+m", b"", open(sys.argv[1], "rb").read()))' "$1"; }
# widest FILE: the widest line, in characters, of the text without colour;
# a line that is one word (a stored artifact's path, never cut) does not count
widest() { plain "$1" | python3 -c 'import sys; print(max(len(l) for l in sys.stdin.buffer.read().decode().split("\n") if " " in l.strip()))'; }
# approve_when_asked ID: approves the session's request once it is asked
approve_when_asked() {
  wait_true 120 'engine events "$1" --json 2>/dev/null | has_line "\"type\":\"approval.requested\""' '' "$@" || true
  assert_exit "$1: engine approve" 0 approve_pending "$1"
}
stored() { sqlite3 "$ENGINE_DB" "SELECT $2 FROM workflows WHERE id='$1'"; }

# --- the main job on the terminal: it ends with the verdict and the findings table
type_line "$MAIN --id tty1"
approve_when_asked tty1
wait_done 300
assert_eq "start on a terminal: exit 0" 0 "$RC"
S="$(screen)"
for want in "status:    completed" \
  "summary:   Request changes: the refill is no longer capped (blocker), the last token cannot be spent, validation was" \
  "verdict:   request_changes" "usage:     4 model turns, 4 tool calls, 11,719 tokens" \
  "findings:  4 (1 blocker, 2 major, 1 minor)" \
  "  SEVERITY  FILE:LINE               TITLE" \
  "  blocker   ratelimit/bucket.py:15  Refill no longer capped at capacity" \
  "  major     ratelimit/bucket.py:20  Off-by-one: the last token can never be spent" \
  "  minor     ratelimit/bucket.py:25  wait_time() can be negative and is untested" \
  "artifacts: output/review.md (740 bytes) at" "(all of it as JSON: engine show tty1 --json)"; do
  assert_contains "the final screen shows: $want" "$want" "$S"
done
[[ "$S" != *'{"artifacts":'* ]] && pass "no line of JSON on the screen" || fail "the result's JSON is on the screen: $S"

# --- the transcript for people (web/event_kinds.json), at 80 and 160 columns: each
# kind drawn, no line of raw JSON; the JSON stays one command away (engine events --json)
for cols in 80 160; do
  tm resize-window -t t -x "$cols" -y 40
  # the operator answers once the request is there (the main line's checks fail if it never is)
  (wait_true 120 'engine events "k$cols" --json 2>/dev/null | has_line "\"type\":\"approval.requested\""' >/dev/null 2>&1
  approve_pending "k$cols" >/dev/null 2>&1) &
  tm clear-history -t t
  type_line "$MAIN --id k$cols"
  wait_done 300
  wait
  # the screen and its scrollback as a person reads them (wrapped rows joined:
  # a row tmux had to wrap shows as longer than the terminal)
  tm capture-pane -p -J -S - -t t >"$T/k$cols.tty"
  K="$(cat "$T/k$cols.tty")"
  assert_eq "$cols columns: the session completed" 0 "$RC"
  for want in "sandbox ready: docker container " "  -> shell \$ git clone -q -b feature" \
    "  -> write_file /workspace/output/review.md (740 bytes, 8" "    # Review: Add wait_time(); simplify refill" \
    "  -> publish_review" "args: a review with 4 findings, verdict request_changes" "assistant: the final answer:"; do
    assert_contains "$cols columns, the transcript shows: $want" "$want" "$K"
  done
  assert_eq "$cols columns: the findings as a table, under the call and under the final answer" 3 \
    "$(grep -c 'blocker   ratelimit/bucket.py:15  Refill no longer capped' <<<"$K")"
  json="$(grep -E '\{"[A-Za-z_]+"|"[A-Za-z_]+": ?[\[{"0-9]' <<<"$K" | sed -n 1,3p || true)"
  [ -z "$json" ] && pass "$cols columns: no line of raw JSON" || fail "$cols columns: raw JSON on the screen: $json"
  assert_eq "$cols columns: each line fits" yes "$([ "$(widest "$T/k$cols.tty")" -le "$cols" ] && echo yes || widest "$T/k$cols.tty")"
done
tm resize-window -t t -x 120 -y 40
EV="$(engine events k80 --json | grep '"type":"tool.requested"' | tail -1)"
assert_contains "the JSON behind it: engine events --json" '"tool":"publish_review"' "$EV"

# --- the same command piped: exactly the JSON it printed before (the stored result)
type_line "$MAIN --id pipe1 2>/dev/null | cat >'$T/piped.json'"
approve_when_asked pipe1
wait_done 300
stored pipe1 result >"$T/stored.json"
grep -q '"verdict":"request_changes"' "$T/stored.json" && pass "the piped session completed" || fail "no result: $(status pipe1)"
cmp -s "$T/piped.json" "$T/stored.json" && pass "start piped: the stored result, byte for byte" \
  || fail "start piped differs: $(head -c 300 "$T/piped.json")"
cmp -s <(stored tty1 result) "$T/stored.json" && pass "both sessions have the same result" || fail "the results differ"
# --json on the terminal: the same bytes
raw "\$E start $WF --id pipe1 --json 2>/dev/null" "$T/tty.json"
cmp -s "$T/tty.json" "$T/piped.json" && pass "start --json on a terminal: the piped bytes" \
  || fail "start --json on a terminal differs: $(head -c 300 "$T/tty.json")"

# --- show: folded on the terminal, the one-line fields piped
raw "\$E show tty1" "$T/show.tty"
assert_eq "show on a terminal: exit 0" 0 "$RC"
SH="$(plain "$T/show.tty")"
assert_contains "show folds the input" $'input:     {\n             "approvalTimeoutSeconds": 3600,\n             "context": {' "$SH"
assert_contains "a long string is cut with the bytes left out" \
  '"objective": "Review the pull request in /workspace/input/repo.bundle (branch' "$SH"
assert_eq "the shown part and the bytes left out make the objective" ok "$(python3 - "$T/show.tty" <<'PY'
import json, re, sys
text = re.sub(r"\x1b\[[0-9]+m", "", open(sys.argv[1], encoding="utf-8").read())
m = re.search(r'"objective": "(.*)\.\.\." \((\d+) more bytes\)', text)
whole = json.load(open("examples/pr-review.json"))["objective"].encode()
if not m: print("not cut: " + text[:200])
elif not whole.startswith(m.group(1).encode()): print("not its start: " + m.group(1))
else: print("ok" if len(m.group(1).encode()) + int(m.group(2)) == len(whole) else "counted %s" % m.group(2))
PY
)"
assert_contains "show folds the result" $'result:    {\n             "artifacts": [' "$SH"
assert_contains "a finding, one field a line" '"title": "Refill no longer capped at capacity"' "$SH"
assert_eq "each line fits 120 columns" yes "$([ "$(widest "$T/show.tty")" -le 120 ] && echo yes || widest "$T/show.tty")"
assert_contains "the screen ends with the summary's last lines" 'history:   ' "$(screen)"
type_line "\$E show tty1 >'$T/show.piped'"
wait_done
assert_contains "show piped: the input on one line, as stored" "input:     $(stored tty1 input)" "$(cat "$T/show.piped")"
assert_contains "show piped: the result on one line, as stored" "result:    $(stored tty1 result)" "$(cat "$T/show.piped")"
type_line "\$E show tty1 --color=always | cat >'$T/show.always'; \$E show tty1 --json >'$T/show.json'"
wait_done
cmp -s "$T/show.piped" "$T/show.always" && pass "show piped: --color=always changes nothing" || fail "show piped with --color=always differs"
engine show tty1 --json >"$T/show.json.here"
cmp -s "$T/show.json" "$T/show.json.here" && pass "show --json: the same bytes on the terminal's shell and here" \
  || fail "show --json differs"
assert_eq "show --json is one line" 1 "$(wc -l <"$T/show.json")"

# --- colour: our SGR codes on a terminal, none when asked not to
assert_eq "colour on a terminal: only our SGR codes" ours "$(sgr "$T/show.tty")"
raw "NO_COLOR=1 \$E show tty1" "$T/show.nocolor"
assert_eq "NO_COLOR=1: no colour" none "$(sgr "$T/show.nocolor")"
cmp -s <(plain "$T/show.tty") "$T/show.nocolor" && pass "colour adds only SGR codes" || fail "the text differs with colour"
raw "\$E --color=never show tty1" "$T/show.never"
assert_eq "--color=never (global): no colour" none "$(sgr "$T/show.never")"
raw "TERM=dumb \$E show tty1" "$T/show.dumb"
assert_eq "TERM=dumb: no colour" none "$(sgr "$T/show.dumb")"
raw "NO_COLOR=1 \$E show tty1 --color=always" "$T/show.forced"
assert_eq "--color=always beats NO_COLOR" ours "$(sgr "$T/show.forced")"
raw "NO_COLOR= \$E start $WF --id tty1 2>/dev/null" "$T/start.tty"
assert_eq "an empty NO_COLOR: colour" ours "$(sgr "$T/start.tty")"
assert_exit "--color=sometimes is refused" 2 engine show tty1 --color=sometimes
assert_contains "and named" "--color must be auto, always or never, not 'sometimes'" "$ERR"
assert_exit "start --color with no value" 2 engine start "$WF" --id tty1 --color

# --- another width: the ioctl's, after the window changes
tm resize-window -t t -x 80 -y 40
raw "\$E start $WF --id tty1 2>/dev/null" "$T/start.80"
assert_eq "at 80 columns each line fits" yes "$([ "$(widest "$T/start.80")" -le 80 ] && echo yes || widest "$T/start.80")"
assert_contains "titles wrap in their column" $'  major     ratelimit/bucket.py:20  Off-by-one: the last token can never be\n                                    spent' "$(plain "$T/start.80")"
raw "\$E show tty1" "$T/show.80"
assert_eq "show at 80 columns: each line fits" yes "$([ "$(widest "$T/show.80")" -le 80 ] && echo yes || widest "$T/show.80")"
tm resize-window -t t -x 120 -y 40

# --- what a model wrote: escapes on the screen, never control sequences
raw "\$E start $TWF/findings_text.lua --id hf 2>/dev/null" "$T/hf.tty"
assert_eq "hostile findings: exit 0" 0 "$RC"
assert_eq "hostile findings: only our SGR codes reach the terminal" ours "$(sgr "$T/hf.tty")"
S="$(screen)"
assert_contains "a title's OSC and clear are shown" '\x1b]0;pwned\x07title set \x1b[2J and cleared' "$S"
assert_contains "a file name's SGR is shown" 'src/a\x1b[31m.c:7' "$S"
assert_contains "the summary's clear is shown" 'summary:   Two findings.\x1b[2J The screen was not cleared.' "$S"
assert_contains "the verdict" "verdict:   comment" "$S"
type_line "\$E start $TWF/findings_text.lua --id hf 2>/dev/null | cat >'$T/hf.piped'"
wait_done
cmp -s "$T/hf.piped" <(stored hf result) && pass "hostile findings piped: the stored (escaped) JSON" \
  || fail "hostile findings piped: $(cat "$T/hf.piped")"
finish
