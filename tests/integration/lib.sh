# Helpers for the integration tests: each test runs the real `engine` binary on
# real SQLite files in a fresh temporary directory.
set -euo pipefail

ENGINE="${ENGINE_BIN:?ENGINE_BIN must point at the engine binary}"
SRC="${ENGINE_SRC:?ENGINE_SRC must point at the source tree}"
export ENGINE_LUA_DIR="$SRC/lua"
export ENGINE_CONFIG=none # the host's /etc/engine/engine.conf is not the test's
T="$(mktemp -d "${TMPDIR:-/tmp}/engine-test.XXXXXX")"
export ENGINE_DB="$T/engine.db"
FAILS=0
PIDS=()
source "$SRC/tests/debian_python.sh"
use_debian_python "$T/.bin"

# Deadlines. Every wait in the tests polls for the state it needs and gives up
# at one generous deadline; TEST_TIMEOUT_SCALE (default 1; 3 in a sanitizer
# build) multiplies every one of them, for slow or busy machines. A deadline is
# written as `$(scaled N)` or through wait_for/wait_status/wait_until, never as
# a bare number.
if [ -z "${TEST_TIMEOUT_SCALE:-}" ]; then
  TEST_TIMEOUT_SCALE=1
  [ "${ENGINE_SANITIZED:-0}" = 1 ] && TEST_TIMEOUT_SCALE=3
fi
export TEST_TIMEOUT_SCALE
# how long a command waits for the database's write lock: 10 s, scaled. On a
# busy machine eight parallel starts beside a serve waited longer than 2 s,
# and one failed; a test of a locked database sets its own, shorter one
export ENGINE_BUSY_TIMEOUT_MS="${ENGINE_BUSY_TIMEOUT_MS:-$((10000 * TEST_TIMEOUT_SCALE))}"
# scaled SECONDS: SECONDS x TEST_TIMEOUT_SCALE, rounded up to whole seconds
scaled() { awk -v s="$1" -v k="$TEST_TIMEOUT_SCALE" 'BEGIN { v = s * k; i = int(v); if (i < v) i++; print i }'; }
# now_ms: the wall clock in milliseconds
now_ms() { local t="$EPOCHREALTIME"; echo $(( ${t%.*} * 1000 + 10#${t#*.} / 1000 )); }
# poll_pause N: the pause before a wait's N-th look (N from 1): 20 ms, growing
# by half each time to 500 ms (about 1.5 s on); from the 21st look (about 7 s
# on) a second. A look runs processes (`engine show`, sqlite3, psql) that take
# CPU from the engine under test: on a busy 2-core machine a wait that looked
# every 20 ms for a minute starved what it waited for, and the suite's long
# waits were a large part of its CPU time (each process costs some 20 ms of
# CPU, its PostgreSQL backend as much again); a wait that lasts has a second
# to spare.
poll_pause() {
  local ms=20 i=1
  if [ "$1" -gt 20 ]; then sleep 1; return; fi
  while [ "$i" -lt "$1" ] && [ "$ms" -lt 500 ]; do ms=$(( ms * 3 / 2 )); i=$((i + 1)); done
  [ "$ms" -le 500 ] || ms=500
  sleep "0.$(printf '%03d' "$ms")"
}

# ENGINE_TEST_STORE=postgres (the pg_ flavour of the core tests, CMakeLists):
# ENGINE_DB is a fresh database of its own on one private cluster shared by
# the run (scripts/start-postgres, started under a lock by the first test),
# dropped when the test passes; files beside it go to $T/data.
PG_TEST_DB=""
if [ "${ENGINE_TEST_STORE:-sqlite}" = postgres ]; then
  PG_CLUSTER="${ENGINE_TEST_PG_DIR:-${TMPDIR:-/tmp}/engine-test-pg-$(id -u)}"
  PG_BIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
  mkdir -p "$PG_CLUSTER"
  # one test starts it, the others wait and reuse it; the server must not
  # inherit the lock's descriptor (it would hold the lock for its life)
  exec {pg_lock}>"$PG_CLUSTER.lock"
  flock "$pg_lock"
  PG_BASE="$("$SRC/scripts/start-postgres" "$PG_CLUSTER" {pg_lock}>&-)" || {
    echo "FAIL: no PostgreSQL cluster for the pg flavour (scripts/start-postgres $PG_CLUSTER)" >&2; exit 1; }
  PG_PORT="$(echo "$PG_BASE" | sed 's#.*:\([0-9]*\)/.*#\1#')"
  # the cluster is the tests' alone and never crashes (no test stops it): no
  # autovacuum worker visiting each database every minute (each is a process,
  # and the databases live a test's length), and commits that do not wait for
  # their WAL flush beside the I/O burner (the engine's batches, what the
  # tests check, are the same)
  if [ ! -e "$PG_CLUSTER/test-settings" ]; then
    "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U engine -d postgres -Atqc "ALTER SYSTEM SET autovacuum = off" \
      -c "ALTER SYSTEM SET synchronous_commit = off" -c "SELECT pg_reload_conf()" >/dev/null &&
      touch "$PG_CLUSTER/test-settings"
  fi
  exec {pg_lock}>&-
  PG_TEST_DB="t_$(basename "$T" | tr -c 'a-zA-Z0-9\n' '_' | tr 'A-Z' 'a-z')"
  "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U engine "$PG_TEST_DB"
  export ENGINE_DB="postgres://engine@127.0.0.1:$PG_PORT/$PG_TEST_DB" ENGINE_DATA_DIR="$T/data"
  # a start or signal beside a busy serve may wait for the write lock longer on a loaded machine
  export ENGINE_BUSY_TIMEOUT_MS=10000
fi
# where the sessions' workspaces are: beside a database file, or in ENGINE_DATA_DIR
WORKSPACES="$T/workspaces"
[ -n "$PG_TEST_DB" ] && WORKSPACES="$T/data/workspaces"
# api_url FILE: the base URL `engine serve --listen` announces on its stderr,
# written to FILE (waits up to 30 s, scaled; empty when it never does)
api_url() {
  local u="" end n=0
  end=$(( $(now_ms) + $(scaled 30) * 1000 ))
  while [ "$(now_ms)" -lt "$end" ]; do
    u="$(grep -o 'API on http://[0-9.:]*' "$1" 2>/dev/null | cut -c8- || true)"
    [ -n "$u" ] && break
    n=$((n + 1)); poll_pause "$n"
  done
  echo "$u"
}
# sqlite3: the test's own reads wait for the write lock like the engine does
# (a bare sqlite3 answers "database is locked" at once: beside a busy serve the
# test read an empty instance id and counted 0 containers)
sqlite3() { command sqlite3 -cmd ".timeout $ENGINE_BUSY_TIMEOUT_MS" "$@"; }
# sql QUERY: one value-per-line answer from the test's database, either store
sql() {
  if [ -n "$PG_TEST_DB" ]; then "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U engine -d "$PG_TEST_DB" -Atqc "$1"
  else sqlite3 "$ENGINE_DB" "$1"; fi
}
on_postgres() { [ -n "$PG_TEST_DB" ]; }
# own_pg_cluster: a private cluster in $T/pg for this test alone (stopped at
# its end); sets URL (its engine database), PGBIN and PGPORT
own_pg_cluster() {
  chmod 711 "$T" # the server may run as nobody (scripts/start-postgres)
  if ! URL="$("$SRC/scripts/start-postgres" "$T/pg" 2>"$T/pg.err")"; then
    fail "no PostgreSQL cluster: $(cat "$T/pg.err") (is postgresql-15 installed? scripts/install-deps)"
    finish
  fi
  trap 'EXIT_RC=$?; "$SRC/scripts/start-postgres" --stop "$T/pg" >/dev/null 2>&1 || true; cleanup' EXIT
  PGBIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
  PGPORT="$(echo "$URL" | sed 's#.*:\([0-9]*\)/.*#\1#')"
}

# own_pg_database NAME: own_pg_cluster with a database NAME in it, which
# ENGINE_DB names; q SQL answers one query there (values one per line)
own_pg_database() {
  own_pg_cluster
  PG_DB_NAME="$1"
  "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U engine "$PG_DB_NAME"
  export ENGINE_DB="postgres://engine@127.0.0.1:$PGPORT/$PG_DB_NAME"
  q() { "$PGBIN/psql" -h 127.0.0.1 -p "$PGPORT" -U engine -d "$PG_DB_NAME" -XAtq -c "$1"; }
}

# How many steps ran once, twice, ...: a table of the "<wf> step ..." lines
# that chain10.lua's steps append to $TEST_SIDE_EFFECTS.
steps_histogram() {
  echo "| runs of a step | steps |"
  echo "|---|---|"
  awk '$2 == "step" {n[$1]++} END {for (k in n) h[n[k]]++; for (r in h) printf "| %d | %d |\n", r, h[r]}' \
    "$TEST_SIDE_EFFECTS" | sort -n -t'|' -k2
}

# log_tail: the last lines of the engine's logs in $T (the newest *.log and
# *.err files), on stderr: what a failure's reader needs beside the check
log_tail() {
  local f
  for f in $(ls -t "$T"/*.log "$T"/*.err "$T"/*/*.log "$T"/*/*.err 2>/dev/null | sed -n 1,4p); do
    [ -s "$f" ] || continue
    echo "--- the last lines of $f:" >&2
    tail -n 15 "$f" | cut -c1-400 >&2
  done
}

# wait_for SECONDS WHAT CONDITION [SHOW [ARGS...]]: evaluates the shell text
# CONDITION (in this shell: what it assigns stays; ARGS are its $1, $2, ...)
# (20 ms apart at first, then further: poll_pause) until it holds, for at most SECONDS x TEST_TIMEOUT_SCALE. On
# timeout it fails, printing WHAT, what it saw last (the output of the shell
# text SHOW, else CONDITION's own) and the engine logs' tail, and returns 1.
wait_for() {
  local __wf_secs __wf_what="$2" __wf_cond="$3" __wf_show="${4:-}" __wf_end __wf_seen __wf_n=0
  __wf_secs="$(scaled "$1")"
  shift $(($# < 4 ? $# : 4))
  __wf_end=$(( $(now_ms) + __wf_secs * 1000 ))
  while :; do
    if eval "$__wf_cond" >"$T/.wait_seen" 2>&1; then return 0; fi
    [ "$(now_ms)" -ge "$__wf_end" ] && break
    __wf_n=$((__wf_n + 1)); poll_pause "$__wf_n"
  done
  if [ -n "$__wf_show" ]; then __wf_seen="$(eval "$__wf_show" 2>&1 | tail -c 2000)"; else __wf_seen="$(tail -c 2000 "$T/.wait_seen")"; fi
  [ "$__wf_what" == "$__wf_cond" ] || __wf_what="$__wf_what
  (until: $__wf_cond)"
  [ $# -eq 0 ] || __wf_what="$__wf_what (with \$@: $*)"
  fail "timeout after ${__wf_secs}s waiting for: $__wf_what
  last seen: ${__wf_seen:-(nothing)}"
  log_tail
  return 1
}

# wait_true SECONDS CONDITION [SHOW [ARGS...]]: wait_for, named by its condition
wait_true() { local __wt_c="$2"; wait_for "$1" "$__wt_c" "$__wt_c" "${@:3}"; }
# try_until SECONDS CONDITION [ARGS...]: as wait_true, but the deadline is no
# failure: 1 when it passed (a set-up that is made again when it did not hold)
try_until() {
  local __tu_c="$2" __tu_end __tu_n=0
  __tu_end=$(( $(now_ms) + $(scaled "$1") * 1000 ))
  shift 2
  while ! eval "$__tu_c" >/dev/null 2>&1; do
    [ "$(now_ms)" -ge "$__tu_end" ] && return 1
    __tu_n=$((__tu_n + 1)); poll_pause "$__tu_n"
  done
}

# cleanup: the EXIT trap (a test's own trap sets EXIT_RC=$? first, then calls it)
cleanup() {
  local rc="${EXIT_RC:-$?}"
  [ "$FAILS" -ne 0 ] || [ "$rc" -ne 0 ] && log_tail
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  if [ -n "$PG_TEST_DB" ] && [ "$FAILS" -eq 0 ] && [ -z "${KEEP:-}" ]; then
    "$PG_BIN/dropdb" -h 127.0.0.1 -p "$PG_PORT" -U engine --force "$PG_TEST_DB" 2>/dev/null || true
  fi
  if [ "$FAILS" -eq 0 ] && [ "$rc" -eq 0 ] && [ -z "${KEEP:-}" ]; then rm -rf "$T"; else echo "(test files kept in $T)"; fi
}
trap cleanup EXIT
# A command that stops the test (set -e) names itself and where: a test that
# ended on one said nothing of why (test_api_start_batch, on a SIGPIPE)
# (bash runs the trap under set +e too, where nothing stops)
trap '__rc=$?; [[ $- != *e* ]] || echo "FAIL: the test stopped at ${BASH_SOURCE[0]##*/} line $LINENO, exit $__rc of: $BASH_COMMAND" >&2' ERR

engine() { "$ENGINE" "$@"; }

# ... | has_line [GREP OPTIONS] PATTERN: grep -q, reading its input to the end.
# grep -q stops at its first match, and a writer cut off there (SIGPIPE, 141)
# fails the whole pipeline under pipefail: a match read as none. (The same
# with head: tests take lines with sed -n 1,Np, which reads on.)
has_line() { local rc=1; grep -q "$@" && rc=0; cat >/dev/null; return "$rc"; }
fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
pass() { echo "ok - $*"; }

# assert_eq WHAT EXPECTED ACTUAL
assert_eq() {
  if [ "$2" == "$3" ]; then pass "$1"; else fail "$1: expected [$2], got [$3]"; fi
}
# assert_contains WHAT NEEDLE HAYSTACK
assert_contains() {
  if [[ "$3" == *"$2"* ]]; then pass "$1"; else fail "$1: [$2] not found in [$3]"; fi
}
# assert_exit WHAT CODE command...: runs command, checks its exit code
assert_exit() {
  local what="$1" want="$2"; shift 2
  set +e
  OUT="$("$@" 2>"$T/stderr")"
  local rc=$?
  set -e
  ERR="$(cat "$T/stderr")"
  if [ "$rc" -eq "$want" ]; then pass "$what (exit $rc)"; else fail "$what: exit $rc, wanted $want; stderr: $ERR"; fi
}

# jget PATH < JSON: prints the value at a dotted path
jget() { lua5.4 "$SRC/tests/integration/jget.lua" "$1"; }

# start_model_server SCENARIO_FILE: the local model server on a free port,
# in the background; sets PORT and MURL (its base URL).
start_model_server() {
  rm -f "$T/mport"
  python3 "$SRC/tests/model_server/server.py" --port 0 --port-file "$T/mport" --scenario "$1" \
    >/dev/null 2>"$T/mserver.log" &
  PIDS+=($!)
  wait_for 30 "the model server's port" '[ -s "$T/mport" ]' 'cat "$T/mserver.log"'
  PORT="$(cat "$T/mport")"
  MURL="http://127.0.0.1:$PORT"
}

# The local model server on $PORT (tests/model_server): scenario JSON loads a
# scenario and clears the request log; requests prints the log, nreq its length.
scenario() { curl -sf -X POST "http://127.0.0.1:$PORT/_scenario" -d "$1" >/dev/null || fail "bad scenario: $1"; curl -sf -X DELETE "http://127.0.0.1:$PORT/_requests" >/dev/null; }
requests() { curl -sf "http://127.0.0.1:$PORT/_requests"; }
nreq() { requests | lua5.4 -e 'print(#require"cjson".decode(io.read("a")))'; }
# model_health FIELD: one field of its /_health (held, active, peak_active, ...);
# release GATE: the requests held at GATE (a step's "hold") go on
model_health() { curl -sf "$MURL/_health" | jget "$1"; }
release() { curl -sf -X POST "$MURL/_release?gate=$1" >/dev/null || fail "the model server did not open gate $1"; }

# status ID [waits] -> prints the workflow's status; with "waits", and what it
# waits on (engine show's waits.kind), as "waiting:signal": a durable sleep
# before a signal is "waiting" too
status() {
  engine show "$1" --json 2>/dev/null | WITH_WAITS="${2:-}" lua5.4 -e 'local ok,j=pcall(require"cjson".decode,io.read("a"))
    local w = ok and os.getenv("WITH_WAITS") == "waits" and type(j.waits) == "table" and ":" .. tostring(j.waits.kind) or ""
    io.write(ok and type(j.status) == "string" and j.status .. w or "")' 2>/dev/null
}

# on_tty LINE CMD...: CMD on a terminal of its own (script(1)), LINE typed
# into it; its terminal's output (what it printed, the line echoed) on stdout
on_tty() { printf '%s\n' "$1" | script -qec "$(printf '%q ' "${@:2}")" /dev/null; }
# approve_pending ID [ARGS...]: engine approve for the request ID waits on
# now, named with --request as a script must (off a terminal an approval
# answers only the request its caller names: it saw that one)
approve_pending() {
  local id="$1" rid
  shift
  rid="$(engine show "$id" --json 2>/dev/null | jget waits.request_id)"
  engine approve "$id" --request "$rid" "$@"
}
# policy_needs_ok DIR: a policy in DIR that allows every call but shell
# commands mentioning needs-ok: those ask a person (approve_pending answers)
policy_needs_ok() {
  mkdir -p "$1"
  cat >"$1/00-test.lua" <<'LUA'
return { name = "test", decide = function(req)
  local cmd = type(req.args) == "table" and req.args.command or ""
  if type(cmd) == "string" and cmd:find("needs-ok", 1, true) then return "approve", "asks a person" end
  return "allow", "test"
end }
LUA
}
# statuses: how many workflows have each status, on one line (for a wait's "last seen")
statuses() { engine list 2>/dev/null | tail -n +2 | awk '{n[$2]++} END {for (k in n) printf "%s %d; ", k, n[k]; print ""}'; }

# wait_status ID STATUS [SECONDS]: polls until the workflow has STATUS (for at
# most SECONDS x TEST_TIMEOUT_SCALE); STATUS "waiting:signal" (or :timer,
# :child, ...) also names what it waits on. On timeout says what it saw
# (engine show) and returns 1, for the caller's check to fail
wait_status() {
  local id="$1" want="$2" secs s="" end n=0 with=""
  [[ "$want" == *:* ]] && with=waits
  secs="$(scaled "${3:-20}")"
  end=$(( $(now_ms) + secs * 1000 ))
  while :; do
    s="$(status "$id" $with || true)"
    [ "$s" == "$want" ] && return 0
    [ "$(now_ms)" -ge "$end" ] && break
    n=$((n + 1)); poll_pause "$n"
  done
  echo "timeout after ${secs}s waiting for $id to be $want (is: $s); engine show $id:" >&2
  engine show "$id" 2>&1 | sed -n 1,20p | sed 's/^/  /' >&2 || true
  return 1
}

# wait_due ID: until the clock has passed the due time of every durable task
# of the workflow (its timers, retries, wake-ups), for the tests in which that
# time passes while no engine runs
wait_due() {
  local due
  due="$(sql "SELECT coalesce(max(run_at), 0) FROM tasks WHERE wf_id='$1'")"
  wait_for 120 "the clock past the due time of $1's tasks ($due)" '[ "$(now_ms)" -gt "$due" ]' 'now_ms'
}

# bg VAR command...: starts command in the background, its pid in VAR
bg() {
  local __v="$1"; shift
  if [ "$1" == engine ]; then shift; set -- "$ENGINE" "$@"; fi # the real process, so kill -9 hits it
  "$@" & local p=$!
  PIDS+=("$p"); printf -v "$__v" '%s' "$p"
}

# serve_api [ARGS...]: `engine serve --listen` on a free loopback port in the
# background (its log in $T/serve.log); sets S (its pid) and URL.
serve_api() {
  : >"$T/serve.log"
  bg S engine serve --listen 127.0.0.1:0 "$@" 2>>"$T/serve.log"
  wait_for 30 "engine serve --listen to announce its API" 'grep -q "API on" "$T/serve.log"' || true
  URL="$(sed -n 's/.*API on \(http:[^ ]*\).*/\1/p' "$T/serve.log")"
  [ -n "$URL" ] || fail "engine serve --listen did not start: $(cat "$T/serve.log")"
}

# verify ID: the history is dense (seq 1..n), each command has at most one
# outcome, each activity completed exactly once; prints a summary line.
verify_history() {
  engine history "$1" --json | lua5.4 "$SRC/tests/integration/verify.lua" history
}
verify_events() {
  engine events "$1" --json | lua5.4 "$SRC/tests/integration/verify.lua" events
}

# serve_bg [ARGS...]: `engine serve` in the background (its log in
# $T/serve.log), returning once it says it serves; sets S (its pid)
serve_bg() {
  local before
  before="$(grep -c "engine: serving" "$T/serve.log" 2>/dev/null || true)"
  bg S engine serve "$@" 2>>"$T/serve.log"
  wait_serving "$T/serve.log" "$before"
}
# wait_serving LOG [BEFORE]: until the `engine serve` whose stderr goes to LOG
# says it serves (more than BEFORE such lines there, default 0)
wait_serving() {
  wait_for 30 "engine serve to start serving ($1)" '[ "$(grep -c "engine: serving" "$1" 2>/dev/null)" -gt "${2:-0}" ]' 'tail -n 5 "$1"' "$@"
}

# forks (test_fork.sh, test_fork_workspace.sh):
# the events of ID (--json: dense from 1, in order) up to seq N, as the log
# holds them but for the session id (a fork's are its own)
events_upto() {
  engine events "$1" --json | sed -n "1,${2}p" | sed 's/^{"session_id":"[^"]*",//'
}
# the source's durable rows, as a text to compare before and after
rows_of() {
  sql "SELECT run,seq,type,ref,coalesce(name,''),coalesce(hash,''),coalesce(payload,''),time FROM history WHERE wf_id='$1' ORDER BY run,seq"
  sql "SELECT seq,type,time,coalesce(payload,'') FROM domain_events WHERE session_id='$1' ORDER BY seq"
  sql "SELECT status,run,coalesce(result,''),coalesce(error,''),updated_at,coalesce(forked_from,'') FROM workflows WHERE id='$1'"
}
seq_of() { # ID TYPE: the seq of the first domain event of TYPE
  engine events "$1" --json | grep "\"type\":\"$2\"" | sed -n 1p | jget seq
}
finish() {
  if [ "$FAILS" -ne 0 ]; then echo "$FAILS check(s) failed"; exit 1; fi
  echo "all checks passed"
}
