#!/usr/bin/env bash
# The CLI as a client: `engine --server URL COMMAND` (or $ENGINE_SERVER) asks
# a running `engine serve --listen` instead of opening the database, and
# prints what the local command prints: the same stdout, stderr and exit code
# for every read (compared against the same database, which the local CLI
# reads while serve runs), the same lines and effect for every write. Tokens
# go only into the Authorization header: the server's 401 and 403 are shown
# as they are and the token never is. A dead server is exit 2 with one clear
# line; an event stream that drops resumes where it stopped (Last-Event-ID)
# and prints every event once.
source "$(dirname "$0")/lib.sh"
unset ENGINE_SERVER ENGINE_TOKEN
WF="$SRC/workflows"
TWF="$SRC/tests/integration/wf"
one_line() { [ "$(printf '%s' "$ERR" | grep -c .)" == 1 ] && pass "$1: one line" || fail "$1: stderr is not one line: $ERR"; }

# serve [PORT]: engine serve --listen on 127.0.0.1:PORT (0: a free one); sets SERVE and URL
serve() {
  : >"$T/serve.log"
  bg SERVE engine serve --listen "127.0.0.1:${1:-0}" --workflows "$WF" 2>>"$T/serve.log"
  wait_true 30 'grep -q "API on" "$T/serve.log"' || true
  URL="$(sed -n 's/.*API on \(http:[^ ]*\).*/\1/p' "$T/serve.log")"
  [ -n "$URL" ] || { fail "serve did not start: $(cat "$T/serve.log")"; finish; }
}
remote() { "$ENGINE" --server "$URL" "$@"; }

# run WHAT command...: stdout, stderr and exit code of one command, in one text
run() { set +e; "$@" >"$T/o" 2>"$T/e"; local rc=$?; set -e; printf '%s\n--stderr--\n%s\n--exit %d--\n' "$(cat "$T/o")" "$(cat "$T/e")" "$rc"; }
# same WHAT args...: `engine args` and `engine --server URL args` print the same
same() {
  local what="$1"; shift
  local here there
  here="$(run "$ENGINE" "$@")"; there="$(run remote "$@")"
  if [ "$here" == "$there" ]; then pass "$what: the same as without --server"
  else fail "$what differs:"$'\n'"--- local ---"$'\n'"$here"$'\n'"--- --server ---"$'\n'"$there"; fi
}
# shape TEXT ID: TEXT with the workflow id, times and uuids made general
# who asked differs by mode (local:USER, or the server's token identity)
shape() { sed -e "s/\b$2\b/ID/g" -e 's/[0-9][0-9]:[0-9][0-9]:[0-9][0-9]\.[0-9]\{3\}Z/TIME/g' \
  -e 's/\(sent\|requested\) by [^ ]*$/\1 by WHO/' \
  -e 's/[0-9a-f]\{8\}-[0-9a-f-]\{27\}/UUID/g' -e 's/pid [0-9]*/pid N/g' <<<"$1"; }
waits_on() { # ID TEXT: until `show` says it waits on TEXT
  wait_true 30 'engine show "$1" 2>/dev/null | has_line "waits on:  $2"' '' "$@" && return 0
  fail "$1 never waited on $2: $(engine show "$1" 2>&1)"
}
streams() { curl -s "$URL/metrics" | sed -n 's/^engine_sse_streams \([0-9]*\)$/\1/p'; }
wait_streams() { wait_true 30 '[ "$(streams)" == "$1" ]' '' "$@" && return 0; fail "never $1 open streams"; }

serve

# --- refused before anything is sent
assert_exit "a URL that is not http(s)" 2 "$ENGINE" --server "ftp://127.0.0.1:1" list
assert_eq "says what a URL must be" "engine: --server ftp://127.0.0.1:1: the URL must start with http:// or https://" "$ERR"
assert_exit "--server without a value" 2 "$ENGINE" --server
assert_exit "--db with --server" 2 remote list --db "$ENGINE_DB"
assert_contains "says they do not go together" "--db and --server cannot be used together" "$ERR"
for cmd in "serve" "replay x" "gc" "policy check" "token list" "quota list"; do
  assert_exit "$cmd with --server" 2 remote $cmd
  assert_eq "says $cmd does not work with --server" "engine: ${cmd%% *} does not work with --server (yet)" "$ERR"
done
assert_exit "ENGINE_SERVER set: serve refused too" 2 env ENGINE_SERVER="$URL" "$ENGINE" serve
assert_contains "and says how to run it here" "unset it to run it on this machine" "$ERR"
assert_exit "gc --help works with --server" 0 remote gc --help
free_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
assert_exit "a server nobody runs" 2 "$ENGINE" --server "http://127.0.0.1:$free_port" show x
assert_contains "says it cannot reach it" "engine: cannot reach the server at http://127.0.0.1:$free_port: " "$ERR"; one_line "dead server"
assert_eq "prints nothing on stdout" "" "$OUT"
assert_exit "a dead server: list" 2 "$ENGINE" --server "http://127.0.0.1:$free_port" list
assert_eq "not even list's header" "" "$OUT"
assert_exit "a dead server: events --follow" 2 "$ENGINE" --server "http://127.0.0.1:$free_port" events x --follow
assert_contains "says it at once" "cannot reach the server" "$ERR"

# --- start in the foreground: the same lines as a local start that finds serve
"$ENGINE" start "$WF/hello.lua" --id L1 --input '{"name":"Ada","n":2}' >"$T/L1.out" 2>"$T/L1.err" & PL=$!; PIDS+=("$PL")
remote start hello.lua --id R1 --input '{"name":"Ada","n":2}' >"$T/R1.out" 2>"$T/R1.err" & PR=$!; PIDS+=("$PR")
waits_on L1 "signal 'approval'"; waits_on R1 "signal 'approval'"
# approve without --request: nothing is pending that way (hello waits on a plain signal)
assert_exit "approve a plain signal wait (local)" 2 engine approve L1
local_err="$ERR"
assert_exit "approve a plain signal wait (--server)" 2 remote approve R1
assert_eq "the same refusal" "$(shape "$local_err" L1)" "$(shape "$ERR" R1)"
assert_eq "it is the local message" "engine: approve: no approval is pending for R1" "$ERR"
assert_exit "signal (local)" 0 engine signal L1 approval '{"approved":true}'
local_err="$ERR"
assert_exit "signal (--server)" 0 remote signal R1 approval '{"approved":true}'
assert_eq "the same line" "$(shape "$local_err" L1)" "$(shape "$ERR" R1)"
set +e; wait "$PL"; rl=$?; wait "$PR"; rr=$?; set -e
assert_eq "start exits alike" "0 0" "$rl $rr"
assert_eq "start prints the same result" "$(cat "$T/L1.out")" "$(cat "$T/R1.out")"
assert_eq "start prints the same events and lines" "$(shape "$(cat "$T/L1.err")" L1)" "$(shape "$(cat "$T/R1.err")" R1)"
assert_contains "it names the server process" "engine: R1 started; engine serve (pid" "$(cat "$T/R1.err")"
assert_contains "and shows the events" "assistant: Hello, Ada! (2)" "$(cat "$T/R1.err")"

# --- reads: the very same bytes, both ways
same "list" list
same "list --json" list --json
same "list --status completed" list --status completed
same "list --status stuck (none)" list --status stuck
same "list --status bogus" list --status bogus
for id in L1 R1; do
  same "show $id" show "$id"
  same "show $id --json" show "$id" --json
  same "events $id" events "$id"
  same "events $id --json" events "$id" --json
  same "events $id --follow (finished)" events "$id" --follow
  same "history $id" history "$id"
  same "history $id --json" history "$id" --json
done
same "history --run 1" history R1 --run 1 --json
same "show an unknown id" show nope
same "events of an unknown id" events nope
same "events --follow of an unknown id" events nope --follow --json
same "history of an unknown id" history nope
same "show an invalid id" show "a b"
same "show --help" show --help
# more than one page: 2,100 events, 1,100 more workflows (rows copied in SQL)
"$ENGINE" start "$TWF/many_events.lua" --id MANY --detach --input '{"n":2100}' >/dev/null 2>&1 || true
wait_status MANY completed 60
same "events over three pages" events MANY --json
same "events over three pages, for people" events MANY
sqlite3 -cmd ".timeout 5000" "$ENGINE_DB" "WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < 1100)
  INSERT INTO workflows(id, run, status, script_name, script_dir, code_hash, input, result, error, cancel, created_at,
    updated_at) SELECT 'copy.' || i, run, status, script_name, script_dir, code_hash, input, result, error,
    cancel, created_at + i % 7, updated_at FROM workflows, k WHERE id = 'MANY'"
same "list over two pages" list
same "list --json over two pages" list --json
same "list --status over two pages" list --status completed --json
assert_eq "all of them" 1100 "$(remote list --json | grep -c '"copy\.')"
assert_exit "ENGINE_SERVER instead of --server" 0 env ENGINE_SERVER="$URL" "$ENGINE" show R1 --json
assert_eq "asks the server" "$(engine show R1 --json)" "$OUT"

# --- writes: the same refusals, then the same lines and effect
same "signal a finished workflow" signal R1 approval '{}'
same "signal an unknown workflow" signal nope approval '{}'
same "a payload that is not JSON" signal R1 approval '{nope'
same "an invalid signal name" signal R1 "$(printf 'a\tb')"
same "cancel a finished workflow" cancel R1
same "cancel an unknown workflow" cancel nope
same "approve a finished workflow" approve R1
same "approve an unknown workflow" approve nope
same "a reason with a control character" approve R1 --reason "$(printf 'a\033b')"
assert_exit "start an unknown script" 2 remote start nope.lua
assert_contains "the server says why" "unknown workflow script 'nope.lua'" "$ERR"; one_line "unknown script"
assert_exit "start the same id with another input" 2 remote start hello.lua --id R1 --input '{"name":"Bo"}'
assert_contains "the server's 409" "workflow 'R1' exists with a different input" "$ERR"

assert_exit "start --detach (local)" 3 engine start "$WF/hello.lua" --id L2 --detach
local_out="$OUT"; local_err="$ERR"
assert_exit "start --detach (--server)" 3 remote start hello.lua --id R2 --detach
assert_eq "prints the id alone" "R2" "$OUT"
assert_eq "like the local one" "$(shape "$local_out" L2)|$(shape "$local_err" L2)" "$(shape "$OUT" R2)|$(shape "$ERR" R2)"
assert_exit "the same start again" 3 remote start hello.lua --id R2 --detach
assert_eq "says it exists" "engine: R2 already exists; following it" "$ERR"
assert_exit "start --detach without --id" 3 remote start hello.lua --detach
[[ "$OUT" =~ ^hello-[0-9a-f]{8}$ ]] && pass "the server made an id: $OUT" || fail "the id is [$OUT]"
waits_on L2 "signal 'approval'"; waits_on R2 "signal 'approval'"
assert_exit "cancel (local)" 0 engine cancel L2
local_err="$ERR"
assert_exit "cancel (--server)" 0 remote cancel R2
assert_eq "the same line" "$(shape "$local_err" L2)" "$(shape "$ERR" R2)"
wait_status R2 cancelled; wait_status L2 cancelled
assert_eq "the same effect" "$(shape "$(engine events L2)" L2)" "$(shape "$(engine events R2)" R2)"
same "show a cancelled workflow" show R2

# a foreground start that ends cancelled: exit 1 and the same outcome line
"$ENGINE" start "$WF/hello.lua" --id L3 >"$T/L3.out" 2>"$T/L3.err" & PL=$!; PIDS+=("$PL")
remote start hello.lua --id R3 >"$T/R3.out" 2>"$T/R3.err" & PR=$!; PIDS+=("$PR")
waits_on L3 "signal 'approval'"; waits_on R3 "signal 'approval'"
engine cancel L3 2>/dev/null; remote cancel R3 2>/dev/null
set +e; wait "$PL"; rl=$?; wait "$PR"; rr=$?; set -e
assert_eq "a cancelled start exits 1 both ways" "1 1" "$rl $rr"
assert_eq "with the same lines" "$(shape "$(cat "$T/L3.err")" L3)" "$(shape "$(cat "$T/R3.err")" R3)"
assert_contains "the outcome line" "engine: R3 cancelled: " "$(cat "$T/R3.err")"
# --quiet: the outcome only
remote start hello.lua --id R4 --quiet --input '{"approval_timeout":0.3}' >"$T/R4.out" 2>"$T/R4.err" || true
assert_eq "--quiet prints no event" "" "$(cat "$T/R4.err")"
assert_eq "and the result" false "$(jget approved <"$T/R4.out")"

# --- approvals: the request the session waits on, found through its summary
"$ENGINE" start "$TWF/approvals.lua" --id AP --detach \
  --input '{"requests":[{"id":"r1","tool":"shell","timeout":3600},{"id":"r2","tool":"publish_review","timeout":3600}]}' >/dev/null 2>&1 || true
waits_on AP "signal 'approval:r1'"
assert_exit "approve --request of another request" 2 remote approve AP --request r9
assert_contains "the server's refusal, worded as locally" "engine: approve: request 'r9' of AP is not pending" "$ERR"
assert_contains "naming the pending one" "it waits on request 'r1' for tool shell" "$ERR"
assert_exit "approve without --request, off a terminal" 2 remote approve AP --reason "looks fine"
assert_contains "names the request to name" "AP waits on request 'r1' for tool shell; pass --request r1" "$ERR"
assert_exit "approve without --request on a terminal, confirmed" 0 \
  on_tty y "$ENGINE" --server "$URL" approve AP --reason "looks fine"
assert_contains "says which it answered" "engine: approved request r1 (tool shell) of AP" "$OUT"
waits_on AP "signal 'approval:r2'"
assert_exit "deny with --request" 0 remote approve AP --request r2 --deny
assert_eq "says so" "engine: denied request r2 (tool publish_review) of AP" "$ERR"
wait_status AP completed
assert_eq "the approver is the server's identity" "anonymous" "$(engine show AP --json | lua5.4 -e 'local j=require"cjson".decode(io.read("a")); io.write(j.result[1].approver)')"
assert_eq "r1 approved, r2 denied" "true false" "$(engine show AP --json | lua5.4 -e 'local j=require"cjson".decode(io.read("a")); io.write(tostring(j.result[1].approved)," ",tostring(j.result[2].approved))')"
same "show after approvals" show AP
same "events after approvals" events AP

# --- events --follow: every event once, then the end; --json as locally
assert_exit "start F1" 3 remote start hello.lua --id F1 --detach
remote events F1 --follow --json >"$T/F1.json" 2>"$T/F1.jerr" & PJ=$!; PIDS+=("$PJ")
remote events F1 --follow >"$T/F1.txt" 2>"$T/F1.terr" & PT=$!; PIDS+=("$PT")
waits_on F1 "signal 'approval'"
remote signal F1 approval '{"approved":true}' 2>/dev/null
set +e; wait "$PJ"; rj=$?; wait "$PT"; rt=$?; set -e
assert_eq "both followers end when the workflow does" "0 0" "$rj $rt"
assert_eq "--follow --json is events --json" "$(engine events F1 --json)" "$(cat "$T/F1.json")"
assert_eq "--follow is events" "$(engine events F1)" "$(cat "$T/F1.txt")"
assert_eq "nothing on stderr" "" "$(cat "$T/F1.jerr")$(cat "$T/F1.terr")"

# --- the text a model streams: on one line for people, never in --json
"$ENGINE" start "$TWF/live_text.lua" --id LV --detach >/dev/null 2>&1 || true
remote events LV --follow >"$T/LV.txt" 2>&1 & PT=$!; PIDS+=("$PT")
remote events LV --follow --json >"$T/LV.json" 2>&1 & PJ=$!; PIDS+=("$PJ")
wait_streams 2
remote signal LV go 2>/dev/null
set +e; wait "$PT"; rt=$?; wait "$PJ"; rj=$?; set -e
assert_eq "live followers end" "0 0" "$rt $rj"
# one line, unless an event (the signal's signal.sent) lands while the text streams
live="$(grep '^~ live (step [0-9]*): ' "$T/LV.txt" | sed 's/^~ live (step [0-9]*): //' | tr -d '\n')"
[ "$live" == "Hello, world" ] && pass "the live text, as it streamed" || fail "no live line in: $(cat "$T/LV.txt")"
assert_eq "the live line comes before the recorded message, the rest as locally" "$(engine events LV)" \
  "$(grep -v '^~ live' "$T/LV.txt")"
assert_eq "--json has no delta: it is events --json" "$(engine events LV --json)" "$(cat "$T/LV.json")"

# --- a dropped stream resumes: kill -9 the server, start it again on its port
assert_exit "start F2" 3 remote start hello.lua --id F2 --detach
waits_on F2 "signal 'approval'"
remote events F2 --follow --json >"$T/F2.json" 2>"$T/F2.err" & PJ=$!; PIDS+=("$PJ")
wait_streams 1
port="${URL##*:}"
kill -9 "$SERVE"; wait "$SERVE" 2>/dev/null || true
wait_true 30 '! curl -s -o /dev/null "$URL/healthz"' # nothing answers there now
serve "$port"
engine signal F2 approval '{"approved":true}' 2>/dev/null
set +e; wait "$PJ"; rj=$?; set -e
assert_eq "the follower carried on" 0 "$rj"
assert_eq "every event once, in order" "$(engine events F2 --json)" "$(cat "$T/F2.json")"
# ... and gives up when the server stays away
assert_exit "start F3" 3 remote start hello.lua --id F3 --detach
waits_on F3 "signal 'approval'"
remote events F3 --follow >"$T/F3.txt" 2>"$T/F3.err" & PJ=$!; PIDS+=("$PJ")
wait_streams 1
kill -9 "$SERVE"; wait "$SERVE" 2>/dev/null || true
set +e; wait "$PJ"; rj=$?; set -e
assert_eq "a stream that cannot resume exits 2" 2 "$rj"
assert_contains "saying so" "engine: lost the event stream from $URL and could not resume it (6 attempts): " "$(cat "$T/F3.err")"
assert_eq "after what it had printed" "$(engine events F3)" "$(cat "$T/F3.txt")"
serve "$port"

# --- tokens: the server's 401 and 403 as they are; the token never printed
READER="$(engine token create reader --scopes read 2>/dev/null)"
ADMIN="$(engine token create ops --scopes admin 2>/dev/null)"
assert_exit "no token once tokens exist" 2 remote list
assert_eq "the server's 401" "engine: a token is required: Authorization: Bearer TOKEN" "$ERR"
assert_exit "a wrong token" 2 remote --token "eng_wrongwrongwrongwrongwrongwrongwrongwrongwro" show R1
assert_eq "the server's 401 for it" "engine: the token is not valid (or revoked)" "$ERR"
[[ "$OUT$ERR" != *wrongwrong* ]] && pass "the wrong token is not printed" || fail "the token was printed"
assert_exit "a read token can read" 0 env ENGINE_TOKEN="$READER" "$ENGINE" --server "$URL" show R1 --json
assert_eq "what the database holds" "$(engine show R1 --json)" "$OUT"
assert_exit "a read token cannot signal" 2 env ENGINE_TOKEN="$READER" "$ENGINE" --server "$URL" signal R1 approval '{}'
assert_eq "the server's 403" "engine: this token lacks the 'signal' scope" "$ERR"
assert_exit "nor start" 2 remote --token "$READER" start hello.lua --detach
assert_eq "the server's 403 for start" "engine: this token lacks the 'start' scope" "$ERR"
[[ "$OUT$ERR" != *"${READER#eng_}"* ]] && pass "the read token is not printed" || fail "the token was printed"
"$ENGINE" start "$TWF/approvals.lua" --id AP2 --detach --input '{"requests":[{"id":"q1","tool":"shell","timeout":3600}]}' >/dev/null 2>&1 || true
waits_on AP2 "signal 'approval:q1'"
assert_exit "a read token cannot approve" 2 remote --token "$READER" approve AP2 --request q1
assert_eq "the server's 403 for approve" "engine: this token lacks the 'approve' scope" "$ERR"
assert_exit "off a terminal, an approval that names no request is refused" 2 \
  env ENGINE_TOKEN="$ADMIN" "$ENGINE" --server "$URL" approve AP2
assert_contains "naming the request pending, to be named" "--request is required when not on a terminal: AP2 waits on request 'q1' for tool shell" "$ERR"
assert_exit "an admin token approves the request it names" 0 env ENGINE_TOKEN="$ADMIN" "$ENGINE" --server "$URL" approve AP2 --request q1
wait_status AP2 completed
assert_eq "the approver is the token" "token:ops" "$(engine show AP2 --json | lua5.4 -e 'local j=require"cjson".decode(io.read("a")); io.write(j.result[1].approver)')"
export ENGINE_TOKEN="$READER"
same "list with a token" list
same "history with a token" history AP2
unset ENGINE_TOKEN

finish
