#!/usr/bin/env bash
# MCP servers in agent sessions (lua/mcp.lua): a test server (tests/mcp_server)
# over stdio and Streamable HTTP; its tools listed at prepare time and called
# through the policies (one needs approval); the failures a server can cause
# (crash mid-call, JSON-RPC error, isError, a hang, garbage on stdout, a huge
# answer, invalid UTF-8) as tool results; credentials kept from the model, the
# history and the events; and a table of hostile listings refused at prepare.
source "$(dirname "$0")/lib.sh"
if ! curl -s --max-time 3 --unix-socket /var/run/docker.sock http://d/_ping >/dev/null 2>&1; then
  fail "no Docker engine (scripts/start-dockerd)"; finish
fi
WF="$SRC/workflows/agent_session.lua"
MCP="$SRC/tests/mcp_server/server.py"
PY="$(command -v python3)"
SECRET="s3cr3t-MCP-VALUE-4821"
TOKEN="tok-HTTP-VALUE-7719"
export ENGINE_CONTEXT_ROOTS="$T" ENGINE_ARTIFACTS="$T/artifacts" ENGINE_MCP_ALLOW="$PY,http://127.0.0.1:"
printf '{"MCP_SECRET_CRED": "%s", "MCP_TOKEN_CRED": "%s"}' "$SECRET" "$TOKEN" >"$T/creds.json"
export ENGINE_CREDENTIALS_FILE="$T/creds.json"

call() { # ID NAME ARGS_JSON -> one scenario step calling a tool
  printf '{"reply": {"tool_calls": [{"id": "%s", "name": "%s", "arguments": %s}]}}' "$1" "$2" "$3"
}
# the content of the tool message answering call ID in the model's last request
tool_msg() {
  CID="$1" lua5.4 -e 'local rs = require"cjson".decode(io.read("a")); local r = rs[#rs]
    for _, m in ipairs(r and r.body.messages or {}) do
      if m.role == "tool" and m.tool_call_id == os.getenv("CID") then io.write(m.content) end end' <<<"$(requests)"
}
# a call's timeout that a working call never meets, however busy the machine;
# the hangs under test are on servers of their own with a shorter one (a hang
# never answers, so that timeout is the only way it can end; it also bounds
# the server's start and tools/list at prepare: 3 s ran out at a load of 23)
CALL_TIMEOUT="$(scaled 60)" HANG_TIMEOUT="$(scaled 10)"
stdio_server() { # MODE [TIMEOUT] [LOG NAME] -> the mcpServers entry of the stdio test server
  printf '{"command": "%s", "args": ["%s", "--stdio", "--mode", "%s", "--log", "%s"], "timeoutSeconds": %s,
    "env_from_credentials": {"MCP_TEST_SECRET": "MCP_SECRET_CRED"}}' "$PY" "$MCP" "$1" "$T/stdio-${3:-$1}.log" "${2:-$CALL_TIMEOUT}"
}
input() { # MCPSERVERS_JSON [PERMISSIONS_JSON] -> the input file
  printf '{"objective": "use the MCP tools", "mcpServers": %s, "permissions": %s, "limits": {"maxModelTurns": 30},
    "model": {"name": "m", "provider": "openai", "baseUrl": "%s/v1"}}' "$1" "$2" "$MURL" >"$T/input.json"
  echo "$T/input.json"
}

# --- one session over stdio: every tool, and every way a call can fail
{
  echo '{"steps": ['
  call e1 mcp__srv__echo '{"text": "hello mcp"}'; echo ,
  call a1 mcp__srv__add '{"a": 2, "b": 40}'; echo ,
  call v1 mcp__srv__echo '{"text": 5}'; echo ,
  call f1 mcp__srv__fail '{}'; echo ,
  call r1 mcp__srv__rpcerror '{}'; echo ,
  call c1 mcp__srv__crash '{}'; echo ,
  call s1 mcp__hang__slow '{"seconds": -1}'; echo ,
  call g1 mcp__srv__garbage '{}'; echo ,
  call k1 mcp__srv__secret '{}'; echo ,
  call b1 mcp__srv__big '{"bytes": 100000}'; echo ,
  call h1 mcp__srv__big '{"bytes": 50000000}'; echo ,
  call u1 mcp__srv__badutf8 '{}'; echo ,
  call d1 mcp__srv__admin_tools_list '{}'; echo ,
  call o1 mcp__srv__fds '{}'; echo ,
  call y1 mcp__srv__fancy '{"v": "anything"}'; echo ,
  call y2 mcp__srv__fancy '[1]'; echo ,
  call n1 mcp__other__echo '{"text": "x"}'
  echo '], "default": {"reply": {"text": "{\"summary\": \"done\", \"result\": {}}"}}}'
} >"$T/scenario.json"
start_model_server "$T/scenario.json"
serve_bg
IN="$(input "{\"srv\": $(stdio_server ok "$CALL_TIMEOUT"), \"hang\": $(stdio_server ok "$HANG_TIMEOUT" hang)}" \
  '{"tools": [], "requiresApproval": ["mcp__srv__add"]}')"
"$ENGINE" start "$WF" --input @"$IN" --id m1 --detach >/dev/null 2>&1 || true
wait_for 60 "m1 to ask for the approval of add" 'engine events m1 --json 2>/dev/null | has_line approval.requested' \
  'engine show m1' || true
assert_contains "the MCP tools are offered under mcp__srv__ names" "mcp__srv__echo" \
  "$(engine events m1 --json | grep session.created)"
assert_contains "the model saw echo's schema" '"text"' "$(requests | lua5.4 -e 'local r=require"cjson".decode(io.read("a"))[1]
  for _,t in ipairs(r.body.tools) do if t["function"].name=="mcp__srv__echo" then io.write(require"cjson".encode(t["function"].parameters)) end end')"
assert_contains "echo ran before the approval" "echo: hello mcp" "$(tool_msg e1)"
assert_contains "add waits for approval" "mcp__srv__add" "$(engine events m1 --json | grep approval.requested)"
assert_exit "approve the MCP call" 0 approve_pending m1 --reason ok
wait_status m1 completed 180
assert_eq "the approved add ran" "42" "$(CID=a1 lua5.4 -e 'local rs=require"cjson".decode(io.read("a"))
  for _,r in ipairs(rs) do for _,m in ipairs(r.body.messages) do if m.tool_call_id==os.getenv("CID") and m.role=="tool" then io.write(m.content) return end end end' <<<"$(requests)")"
assert_contains "arguments are checked against the server's schema" "InvalidArguments" "$(tool_msg v1)"
assert_contains "isError is a failed result the model reads" "tool error: the thing failed" "$(tool_msg f1)"
assert_contains "a JSON-RPC error names its code" "JSON-RPC error -32000: the backend is down" "$(tool_msg r1)"
assert_contains "a crash mid-call is a tool error" "exited before it answered" "$(tool_msg c1)"
assert_contains "... with its last stderr line" "crashing on purpose" "$(tool_msg c1)"
assert_contains "a hang times out" "did not answer in time; it was stopped" "$(tool_msg s1)"
assert_contains "garbage on stdout is a tool error" "not JSON-RPC on stdout: this is not json" "$(tool_msg g1)"
assert_contains "a big text is truncated" "[truncated]" "$(tool_msg b1)"
assert_eq "... to the tool result limit" 1 "$(( $(tool_msg b1 | wc -c) < 21000 ))"
assert_contains "a 50 MB answer is dropped, bounded" "larger than 8388608 bytes" "$(tool_msg h1)"
assert_contains "invalid UTF-8 becomes U+FFFD" $'bad \xef\xbf\xbd' "$(tool_msg u1)"
assert_contains "an unlisted server's tool is refused" "a tool that was not offered: mcp__other__echo" "$(tool_msg n1)"
assert_eq "the child starts with fds 0-2 only" "fds: 0 1 2" "$(tool_msg o1)"
assert_contains "a dotted tool name is offered with '_'" "dotted ok" "$(tool_msg d1)"
assert_contains "a schema beyond the engine's validator: the server checks, structuredContent is read" \
  '{"got":{"v":"anything"}}' "$(tool_msg y1)"
assert_contains "... but the arguments must be an object" "the arguments must be a JSON object" "$(tool_msg y2)"
assert_eq "an empty required list is not sent to the model as {}" 0 "$(requests | grep -c '"required":{}' || true)"
sec="$(tool_msg k1)"
assert_contains "the server got its credential, redacted in its answer" "my secret is [redacted]" "$sec"
assert_contains "the child's env: only what it is given plus PATH" "HOME is unset" "$sec"
wait_for 10 "the hung server to be stopped" '! pgrep -f "stdio-hang.log"' 'pgrep -af "stdio-hang.log"' || true
assert_eq "the hung server was killed" "" "$(pgrep -f "stdio-hang.log" || true)"
assert_eq "... and the other one ended with the session" "" "$(pgrep -f "stdio-ok.log" || true)"
assert_eq "initialize, initialized, tools/list pages" "initialize notifications/initialized tools/list tools/list tools/list tools/list tools/list" \
  "$(head -7 "$T/stdio-ok.log" | tr '\n' ' ' | sed 's/ $//')"
# the credential never left the trusted side
engine events m1 --json >"$T/events.json"; engine history m1 --json >"$T/history.json"
assert_eq "the secret is in no event" 0 "$(grep -c "$SECRET" "$T/events.json" || true)"
assert_eq "the secret is in no history event" 0 "$(grep -c "$SECRET" "$T/history.json" || true)"
assert_eq "the secret is nowhere in the database files" 0 "$(cat "$ENGINE_DB"* | grep -ac "$SECRET" || true)"
assert_eq "the model never saw it" 0 "$(requests | grep -c "$SECRET" || true)"
assert_contains "the history names the credential, not its value" "MCP_SECRET_CRED" "$(cat "$T/history.json")"

# --- Streamable HTTP: a session id, the protocol version, a bearer token from the credentials, SSE answers
rm -f "$T/hport"
MCP_TEST_TOKEN="$TOKEN" python3 "$MCP" --http --port-file "$T/hport" --log "$T/http.log" 2>"$T/http.err" &
PIDS+=($!)
wait_for 10 "the MCP HTTP server's port" '[ -s "$T/hport" ]' 'cat "$T/http.err"' 
HURL="http://127.0.0.1:$(cat "$T/hport")/mcp"
scenario "{\"steps\": [$(call he mcp__web__echo '{"text": "over http"}'), $(call hr mcp__web__rpcerror '{}'),
  $(call hs mcp__webhang__slow '{"seconds": -1}'), $(call hf mcp__web__fail '{}')],
  \"default\": {\"reply\": {\"text\": \"{\\\"summary\\\": \\\"done\\\", \\\"result\\\": {}}\"}}}"
web_server() { # TIMEOUT -> the mcpServers entry of the HTTP test server
  printf '{"url": "%s", "timeoutSeconds": %s, "headers_from_credentials": {"Authorization": "Bearer ${MCP_TOKEN_CRED}"}}' "$HURL" "$1"
}
IN="$(input "{\"web\": $(web_server "$CALL_TIMEOUT"), \"webhang\": $(web_server "$HANG_TIMEOUT")}" '{"tools": []}')"
"$ENGINE" start "$WF" --input @"$IN" --id h1 --detach >/dev/null 2>&1 || true
wait_status h1 completed 120
assert_contains "an MCP tool over HTTP (an SSE answer)" "echo: over http" "$(tool_msg he)"
assert_contains "a JSON-RPC error over HTTP" "JSON-RPC error -32000" "$(tool_msg hr)"
assert_contains "a call that hangs over HTTP times out" "McpTimeout" "$(tool_msg hs)"
assert_contains "isError over HTTP" "tool error: the thing failed" "$(tool_msg hf)"
assert_contains "requests after initialize carry the session id and version" "tools/list sid=yes version=2025-06-18" \
  "$(cat "$T/http.log")"
assert_contains "the session is ended with DELETE" "DELETE" "$(cat "$T/http.log")"
assert_eq "the token is in no event or database file" 0 \
  "$( (engine events h1 --json; cat "$ENGINE_DB"*; requests) | grep -ac "$TOKEN" || true)"
# a wrong token: listing fails, named
printf '{"MCP_SECRET_CRED": "%s", "MCP_TOKEN_CRED": "wrong-token-123"}' "$SECRET" >"$T/creds.json"
assert_exit "an HTTP server that refuses the token fails prepare" 2 "$ENGINE" start "$WF" --input @"$IN" --id h2 --quiet
assert_contains "... named" "MCP server web cannot list its tools: MCP server web answered HTTP 401" "$ERR"
printf '{"MCP_SECRET_CRED": "%s", "MCP_TOKEN_CRED": "%s"}' "$SECRET" "$TOKEN" >"$T/creds.json"

# --- hostile or broken servers and configurations: refused at prepare, each problem named
hostile() { # ID MCPSERVERS_JSON EXPECTED_PROBLEM
  IN="$(input "$2" '{"tools": []}')"
  assert_exit "prepare refuses: $1" 2 "$ENGINE" start "$WF" --input @"$IN" --id "hostile-$1" --quiet
  assert_contains "... $1 named" "$3" "$ERR"
}
hostile pathname "{\"srv\": $(stdio_server pathname)}" "tool name '../../etc/passwd' is not letters"
hostile many "{\"srv\": $(stdio_server many)}" "MCP server srv lists more than 256 tools"
hostile schema "{\"srv\": $(stdio_server schema)}" "tool weird: inputSchema is not a JSON schema of type object"
hostile garbage "{\"srv\": $(stdio_server garbage)}" "not JSON-RPC on stdout"
hostile listerror "{\"srv\": $(stdio_server listerror)}" "JSON-RPC error -32001: listing is broken"
hostile hanglist "{\"srv\": $(stdio_server hanglist 60)}" "did not answer in time"
hostile noinit "{\"srv\": $(stdio_server noinit)}" "refusing to start"
hostile notallowed '{"srv": {"command": "/bin/sh", "args": ["-c", "true"]}}' "/bin/sh is not allowed by ENGINE_MCP_ALLOW"
hostile nocred "{\"srv\": {\"command\": \"$PY\", \"env_from_credentials\": {\"X\": \"NO_SUCH_CRED\"}}}" "credential NO_SUCH_CRED is not set"
hostile both '{"srv": {"command": "x", "url": "http://127.0.0.1:1/"}}' "needs either command (stdio) or url"
hostile badname '{"a/b": {"url": "http://127.0.0.1:1/"}}' "MCP server name 'a/b' must be"
hostile unreachable '{"srv": {"url": "http://127.0.0.1:1/mcp"}}' "MCP server srv cannot list its tools"
hostile filter "{\"srv\": $(stdio_server ok | sed 's/"timeoutSeconds"/"tools": ["nope"], "timeoutSeconds"/')}" "lists no tool 'nope'"
nine="$(for i in 1 2 3 4 5 6 7 8 9; do printf '"s%d": {"url": "http://127.0.0.1:1/"},' $i; done)"
hostile nine "{${nine%,}}" "mcpServers names 9 servers; at most 8"
assert_eq "the hostile sessions started no sandbox" 0 \
  "$(docker ps -aq --filter label=engine.managed=true --filter label=engine.session=hostile-many | wc -l)"
finish
