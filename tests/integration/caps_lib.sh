# Helpers for the tests of the engine's limits file (test_caps_*.sh): agent
# sessions against the local model server, in real Docker sandboxes, with
# $T/limits.lua beside the test's database (found there as sessions start).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
unset ENGINE_LIMITS
WF="$SRC/workflows/agent_session.lua"
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_REVIEWS_DIR="$T/reviews" ENGINE_ARTIFACTS="$T/artifacts"
FINAL='{"reply":{"text":"{\"summary\":\"done\",\"result\":{}}","usage":{"input_tokens":30,"output_tokens":20}}}'
# a tool the session does not offer: the call goes back to the model and the session takes another turn
AGAIN='{"reply":{"tool_calls":[{"id":"c1","name":"nope","arguments":"{}"}],"usage":{"input_tokens":30,"output_tokens":20}}}'

# limits TEXT: the engine's limits file for the sessions that start from now on
limits() { printf '%s\n' "$1" >"$T/limits.lua"; }

# session_input [OVERRIDES_JSON]: a file with a small agent session's input
# against the model server at $MURL, with these overrides merged in
session_input() {
  local f="$T/input-$RANDOM$RANDOM.json"
  printf '{"objective":"caps test","model":{"name":"m","provider":"openai","baseUrl":"%s/v1"},"limits":{"maxModelTurns":4,"timeoutSeconds":300}}' \
    "$MURL" >"$f.base"
  local over="${1:-}"
  printf '%s' "${over:-"{}"}" >"$f.over"
  lua5.4 "$SRC/tests/integration/merge_json.lua" "$f.base" "@$f.over" >"$f"
  echo "$f"
}

# start_session ID [OVERRIDES_JSON]: starts it for `engine serve` to run
start_session() {
  "$ENGINE" start "$WF" --input @"$(session_input "${2:-}")" --id "$1" --detach >/dev/null 2>&1 || true
}

instance() { sqlite3 "$ENGINE_DB" "SELECT value FROM meta WHERE key='instance_id'" 2>/dev/null; }

# containers [SESSION]: how many containers (running or not) this database's
# sessions have now, from the Docker API with the engine's labels
containers() {
  local f="[\"engine.managed=true\",\"engine.instance=$(instance)\"${1:+,\"engine.session=$1\"}]"
  curl -sf --unix-socket /var/run/docker.sock -G "http://d/containers/json" --data-urlencode all=1 \
    --data-urlencode "filters={\"label\":$f}" | lua5.4 -e 'print(#require"cjson".decode(io.read("a")))'
}

# count_status STATUS: workflows with it
count_status() { engine list --status "$1" 2>/dev/null | tail -n +2 | grep -c . || true; }

# history_has ID TEXT: whether the workflow's history holds TEXT
history_has() { engine history "$1" --json 2>/dev/null | has_line -- "$2"; }

# wait_until SECONDS WHAT COMMAND...: polls COMMAND every 50 ms (wait_for)
wait_until() {
  local secs="$1" what="$2"; shift 2
  wait_for "$secs" "$what" "$(printf '%q ' "$@")"
}

# slot rows left in the database (held or queued): 0 once every run has ended
slot_rows() { sqlite3 "$ENGINE_DB" "SELECT count(*) FROM slots" 2>/dev/null; }
