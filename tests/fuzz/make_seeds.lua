-- Writes the seed corpus of every fuzz target (tests/fuzz/corpus/<target>/seed-*)
-- from the project's own fixtures and tests, so the seeds are what the engine
-- really reads:
--   json               the JSON fixtures, every line of the replay recordings, every
--                      event payload of the recorded streams, examples/*.json, edge cases
--   sse_runners        every recorded and hand-written stream and JSON body in
--                      tests/fixtures/model/, the model server's golden bodies
--   docker_demux       those fixtures framed as a Docker exec stream would carry them
--   tar                tar.pack of fixture files, and GNU tar's ustar, gnu and pax
--                      archives of them (with a directory, a symlink, a long name)
--   skill_frontmatter  the shipped skills' SKILL.md and every text
--                      tests/skills/test_skills.lua hands to skills.parse
--   policy_input       every command line tests/policy/test_shell_policy.lua analyses
--                      or splits, every URL it parses, policy.lua's probe requests
--   safefs_paths       the escapes tests/unit/test_safefs.c and the sandbox tests try,
--                      written as the harness's operations
--   api_requests       the requests tests/integration/api_suite.py sends (its route
--                      table, tokens and scopes, limits), written as the harness's input,
--                      to the open server as there and with a token to the other
--   webhook_verify     the vectors of tests/unit/test_webhook_verify.c (GitHub's,
--                      Standard Webhooks', Stripe-style), as SECRET, ID, TS, HEADER lines
--                      and the body
--   triggers           octokit's recorded GitHub deliveries, the hostile trigger's
--                      requests, each verifier's route, signed and not
--   cron               the expressions tests/unit/test_cron.c parses and refuses,
--                      after instants around daylight-saving changes
-- Existing seed-* files are replaced; corpus entries libFuzzer added (named by
-- their SHA-1) stay.
--
--   cmake --build build && lua5.4 tests/fuzz/make_seeds.lua     (from the repository)
local repo = (arg and arg[0] or ""):match("^(.*)/tests/fuzz/[^/]+$") or "."
package.path = repo .. "/lua/?.lua;" .. repo .. "/lua/?/init.lua;" .. package.path
package.cpath = repo .. "/build/?.so;" .. package.cpath -- the engine's fs module
local cjson = require "cjson"
package.preload["json"] = function() return { encode = cjson.encode, decode = cjson.decode, null = cjson.null } end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function ls(dir, pattern)
  local out = {}
  local p = assert(io.popen("ls -1 " .. dir .. " 2>/dev/null"))
  for name in p:lines() do
    if name:match(pattern) then out[#out + 1] = dir .. "/" .. name end
  end
  p:close()
  table.sort(out)
  return out
end

local function fnv(s)
  local h = 0xcbf29ce484222325
  for i = 1, #s do h = (h ~ s:byte(i)) * 0x100000001b3 end
  return string.format("%016x", h)
end

local seeds = {} -- target -> {name -> content}
local function seed(target, label, content)
  if #content == 0 or #content > 64 * 1024 then return end
  seeds[target] = seeds[target] or {}
  seeds[target][label .. "-" .. fnv(content):sub(1, 8)] = content
end

-- Runs a plain-Lua test file with os.exit stubbed out (the recording wrappers
-- are in place by then).
local function run_test(path, ...)
  local exit = os.exit
  os.exit = function() error("exit", 0) end
  local saved_arg = arg
  arg = { [0] = path, ... }
  local ok, err = pcall(dofile, path)
  arg, os.exit = saved_arg, exit
  if not ok and err ~= "exit" then io.stderr:write("make_seeds: ", path, ": ", tostring(err), "\n") end
end

local MODEL = repo .. "/tests/fixtures/model"
local streams = {}
for _, dir in ipairs({ MODEL, MODEL .. "/recorded" }) do
  for _, p in ipairs(ls(dir, "%.sse$")) do streams[#streams + 1] = p end
end
local bodies = ls(MODEL, "%.json$")

-- ------------------------------------------------------------------ json --
for _, p in ipairs(bodies) do seed("json", "fixture", read(p)) end
for _, p in ipairs(ls(repo .. "/examples", "%.json$")) do seed("json", "example", read(p)) end
for _, p in ipairs(ls(repo .. "/tests/fixtures/replay", "%.jsonl$")) do
  for line in read(p):gmatch("[^\n]+") do seed("json", "replay", line) end
end
for _, p in ipairs(streams) do
  for data in read(p):gmatch("data: ?([^\r\n]*)") do
    if data:match("^[%[{]") then seed("json", "stream", data) end
  end
end
for i, s in ipairs({
  "0", "-0", "-0.0", "1.0", "1e3", "1E-7", "0.1", "123456789012345678", "9223372036854775807",
  "-9223372036854775808", "9223372036854775808", "-9223372036854775809", "1.7976931348623157e308", "5e-324",
  "1e999", "[]", "{}", "[[],{}]", "null", "true", "false", '""', '"\\u0000"', '"\\ud83d\\ude00"', '"\\ud800"',
  '"\\udc00\\ud800"', '"\\u00e9\\u2028\\u202e"', '"caf\xc3\xa9"', '"\xff\xfe"', '{"a":1,"a":2}', '{"1":1,"2":2}',
  '[1,2,3,null]', '{"k":[{"k":[{"k":[]}]}]}', string.rep("[", 64) .. string.rep("]", 64),
  string.rep("[", 65) .. string.rep("]", 65), ' \t\r\n{"a" : [ 1 , 2 ] }\n', '{"a":1}x', "[1,]", '{"a":}',
  '"\\x"', "01", "1.", ".5", "+1", "NaN", "Infinity", '"\t"', "\"\x7f\xc2\x85\"",
}) do
  seed("json", "edge" .. i, s)
end

-- ----------------------------------------------------------- sse_runners --
for _, p in ipairs(streams) do seed("sse_runners", "stream-" .. p:match("([^/]+)%.sse$"), read(p)) end
for _, p in ipairs(bodies) do seed("sse_runners", "body-" .. p:match("([^/]+)%.json$"), read(p)) end
-- each event of a stream on its own (small inputs mutate faster), the first 40 of each
for _, p in ipairs(streams) do
  local n = 0
  for block in (read(p):gsub("\r\n", "\n") .. "\n\n"):gmatch("(.-\n)\n+") do
    n = n + 1
    if n <= 40 and block:find("data:", 1, true) then seed("sse_runners", "event-" .. p:match("([^/]+)%.sse$"), block .. "\n") end
  end
end
-- the smallest bodies each runner reads as a whole answer
for i, s in ipairs({
  '{"content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t","name":"read_file","input":{}}],' ..
    '"usage":{"input_tokens":1,"output_tokens":1},"stop_reason":"tool_use"}',
  '{"output":[{"type":"message","content":[{"type":"output_text","text":"hi"}]},{"type":"function_call",' ..
    '"call_id":"c","name":"shell","arguments":"{}"}],"usage":{"input_tokens":1,"output_tokens":2},"status":"completed"}',
  '{"choices":[{"message":{"content":"hi","tool_calls":[{"id":"c","function":{"name":"shell","arguments":"{}"}}]},' ..
    '"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}',
}) do
  seed("sse_runners", "body-minimal" .. i, s)
end
for _, p in ipairs(ls(repo .. "/tests/model_server/golden", "%.golden$")) do
  seed("sse_runners", "golden-" .. p:match("([^/]+)%.golden$"), read(p))
end
for i, s in ipairs({
  "\239\187\191data: {}\n\n", "data: [DONE]\r\n\r\n", "data: a\rdata: b\r\r", ": keep-alive\n\nevent: ping\ndata: {}\n\n",
  'error: {"error":{"message":"boom","type":"server_error","code":500}}\n',
  '{"error":{"message":"rate limited","type":"rate_limit_error"}}', "<html>502 Bad Gateway</html>",
  'data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
}) do
  seed("sse_runners", "edge" .. i, s)
end

-- ---------------------------------------------------------- docker_demux --
local function frame(stream, payload)
  local n = #payload
  return string.char(stream, 0, 0, 0, (n >> 24) & 255, (n >> 16) & 255, (n >> 8) & 255, n & 255) .. payload
end
local function demux_seed(label, max, seedv, frames)
  seed("docker_demux", label, string.char(max & 255, (max >> 8) & 255, seedv & 255, (seedv >> 8) & 255, 7, 1)
    .. table.concat(frames))
end
do
  local a = read(MODEL .. "/anthropic.json")
  local b = read(repo .. "/tests/fixtures/replay/hostile_output.jsonl")
  demux_seed("stdout", 4096, 1, { frame(1, a) })
  demux_seed("both", 4096, 2, { frame(1, a:sub(1, 200)), frame(2, b), frame(1, a:sub(201)) })
  demux_seed("capped", 64, 3, { frame(1, a), frame(2, b) })
  demux_seed("zero", 0, 4, { frame(2, b) })
  demux_seed("stdin-and-unknown", 512, 5, { frame(0, "in"), frame(3, "x"), frame(1, "out"), frame(2, "err") })
  demux_seed("cut", 4096, 6, { frame(1, a):sub(1, 100) })
  demux_seed("empty-frames", 16, 7, { frame(1, ""), frame(2, ""), frame(1, "x") })
end

-- ------------------------------------------------------------------- tar --
do
  local tar = require "tar"
  local files = {
    { name = "a.txt", data = read(MODEL .. "/anthropic.json") },
    { name = "dir/b.sse", data = read(MODEL .. "/anthropic_stream.sse") },
  }
  seed("tar", "pack", tar.pack(files))
  seed("tar", "pack-owner", tar.pack({ { name = "copied/out.txt", data = "hello\n", mode = 384 }, { name = "d/", dir = true } },
    { uid = 10001, gid = 10001 }))
  -- GNU tar's formats, of a copy of two fixture files plus a directory, a
  -- symlink and a name longer than 100 bytes
  local tmp = io.popen("mktemp -d"):read("l")
  assert(tmp and tmp:match("^/tmp/"), "mktemp -d failed")
  local long = string.rep("d", 60) .. "/" .. string.rep("n", 60) .. ".txt"
  os.execute(string.format("mkdir -p %s/t/sub %s/t/%s && cp %s %s/t/sub/ && cp %s %s/t/%s && ln -s sub/anthropic.json %s/t/link",
    tmp, tmp, long:match("^(.*)/"), MODEL .. "/anthropic.json", tmp, MODEL .. "/openai_chat.json", tmp, long, tmp))
  for _, fmt in ipairs({ "ustar", "gnu", "pax" }) do
    local out = tmp .. "/" .. fmt .. ".tar"
    if os.execute(string.format("tar --format=%s --owner=0 --group=0 --mtime=@0 -C %s/t -cf %s . 2>/dev/null", fmt, tmp, out)) then
      seed("tar", "gnutar-" .. fmt, read(out))
    end
  end
  os.execute("rm -r -- " .. tmp)
end

-- ------------------------------------------------------ skill_frontmatter --
do
  local skills = require "skills"
  for _, p in ipairs(ls(repo .. "/skills", "^[%w-]+$")) do
    local f = io.open(p .. "/SKILL.md", "rb")
    if f then
      seed("skill_frontmatter", "shipped-" .. p:match("([^/]+)$"), f:read("a"))
      f:close()
    end
  end
  local parse = skills.parse
  skills.parse = function(text, ...)
    if type(text) == "string" then seed("skill_frontmatter", "test", text) end
    return parse(text, ...)
  end
  run_test(repo .. "/tests/skills/test_skills.lua")
  skills.parse = parse
end

-- ---------------------------------------------------------- policy_input --
do
  local shell = require "policy_lib.shell"
  local commands = require "policy_lib.commands"
  local hosts = require "policy_lib.hosts"
  local function wrap(t, name, record)
    local f = t[name]
    t[name] = function(x, ...)
      if type(x) == "string" then record(x) end
      return f(x, ...)
    end
  end
  local function line(l) seed("policy_input", "shell", "shell\n" .. l) end
  wrap(commands, "analyze", line)
  wrap(shell, "split", line)
  wrap(shell, "commands", line)
  wrap(shell, "words", line)
  wrap(hosts, "parse_url", function(u) seed("policy_input", "url", "http_fetch\n" .. cjson.encode({ url = u })) end)
  run_test(repo .. "/tests/policy/test_shell_policy.lua", repo .. "/policies")
  for i, probe in ipairs({
    { "read_file", { path = "/workspace/input/a.txt" } }, { "list_files", {} }, { "search", { pattern = "TODO" } },
    { "shell", { command = "ls -la" } }, { "shell", { command = "echo hi > /workspace/output/a.txt" } },
    { "write_file", { path = "/workspace/output/a.txt", content = "x" } }, { "run_tests", {} },
    { "http_fetch", { url = "https://api.example.test/v1?q=1" } },
    { "publish_review", { summary = "s", findings = {}, verdict = "comment" } }, { "no_such_tool", {} },
    { "shell", { command = { "ls" } } }, { "http_fetch", { url = 5 } }, { "shell", {} },
  }) do
    seed("policy_input", "probe" .. i, probe[1] .. "\n" .. cjson.encode(probe[2]))
  end
end

-- ---------------------------------------------------------- safefs_paths --
for i, script in ipairs({
  "f a.txt\nr a.txt\nr ./a.txt\nr a.txt/\nc a//b/./c",
  "r ../outside/secret\nr /etc/passwd\nc ..\nc /abs\nc .\nc a/../b",
  "l out\t@OUT\nr out/secret\nw out/secret\nW out/new\nL out",
  "l up\t..\nr up/outside/secret\nw up/outside/x\nL up",
  "l f\t@OUT/secret\nr f\nw f\nr f",
  "d working\nl working/link\t../../outside\nw working/link/secret\nL working",
  "d output\nd output/sub\nf output/sub/r.md\nl output/abs\t@ROOT/../outside\nL output\nL .",
  "l loop\tloop\nr loop\nw loop/x\nL loop",
  "d a\nd a/b\nl a/b/c\t../../../outside\nw a/b/c/d/e\nr a/b/c/secret\nL a",
  "w new/dir/file.txt\nr new/dir/file.txt\nL new\nW other/file",
  "f x\nw x/y\nl d\t/\nr d/etc/passwd\nL d",
}) do
  seed("safefs_paths", "escape" .. i, script)
end

-- ---------------------------------------------------------- api_requests --
do
  local S, J = "/v1/workflows", "Content-Type: application/json\n"
  -- {method, target, headers (lines), body}: api_suite.py's route table
  local cases = {
    { "GET", "/healthz" }, { "GET", "/v1/openapi.json" }, { "GET", "/metrics" },
    { "POST", S, J, '{"script":"tiny.lua","id":"g-1","input":{"a":1}}' },
    { "POST", S, J, '{"script":"tiny.lua"}' }, { "POST", S, J, '{"script":"sub/nested.lua","id":"g-nested"}' },
    { "POST", S, J, '{"script":"alias.lua","id":"g-alias"}' }, { "POST", S, J, "" }, { "POST", S, J, '{"script":' },
    { "POST", S, J, '{"script":"tiny.lua"} x' }, { "POST", S, J, '{"script":"tiny.lua","id":"\255"}' },
    { "POST", S, J, '{"script":"tiny.lua"}\0' },
    { "POST", S, J, '{"script":"tiny.lua","input":{"a":' .. ("["):rep(300) .. ("]"):rep(300) .. "}}" },
    { "POST", S, J, '[{"script":"tiny.lua"}]' }, { "POST", S, J, '"tiny.lua"' }, { "POST", S, J, "null" },
    { "POST", S, J, '{"script":"tiny.lua","priority":9}' }, { "POST", S, J, '{"script":"tiny.lua","identity":"root"}' },
    { "POST", S, J, '{"id":"x-1"}' }, { "POST", S, J, '{"script":5}' }, { "POST", S, J, '{"script":"tiny.lua","id":7}' },
    { "POST", S, J, '{"script":"tiny.lua","id":"bad id"}' }, { "POST", S, J, '{"script":"tiny.lua","id":"a..b"}' },
    { "POST", S, J, '{"script":"tiny.lua","id":"' .. ("a"):rep(129) .. '"}' },
    { "POST", S, J, '{"script":"tiny.lua","input":[1,2]}' }, { "POST", S, J, '{"script":"tiny.lua","input":null}' },
    { "POST", S, J, '{"script":"waiter.lua","id":"w-wait"}' }, { "POST", S, J, '{"script":"tiny.lua","id":"w-wait"}' },
    { "POST", S, J, '{"script":"../x.lua"}' }, { "POST", S, J, '{"script":"/etc/passwd"}' },
    { "POST", S, J, '{"script":"@WFDIR/tiny.lua"}' }, { "POST", S, J, '{"script":"sub/../tiny.lua"}' },
    { "POST", S, J, '{"script":"./tiny.lua"}' }, { "POST", S, J, '{"script":"..\\\\x.lua"}' },
    { "POST", S, J, '{"script":"tiny.lua\\u0000.lua"}' }, { "POST", S, J, '{"script":"notes.txt"}' },
    { "POST", S, J, '{"script":"nope.lua"}' }, { "POST", S, J, '{"script":"dangling.lua"}' },
    { "POST", S, J, '{"script":"escape.lua"}' }, { "POST", S, J, '{"script":"linkdir/evil.lua"}' },
    { "POST", S, J, '{"script":"dir.lua"}' },
    { "GET", S }, { "GET", S .. "?status=completed" }, { "GET", S .. "?script=approvals.lua" }, { "GET", S .. "?limit=1" },
    { "GET", S .. "?status=bogus" }, { "GET", S .. "?limit=ten" }, { "GET", S .. "?limit=99999999999999999999" },
    { "GET", S .. "?cursor=zzz" }, { "GET", S .. "?cursor=-1.x" }, { "GET", S .. "?limit=2&cursor=1.w-done" },
    { "GET", S .. "?status=%zz" }, { "GET", S .. "?status=wait%00ing" }, { "GET", S .. "?script=a%2" },
    { "GET", S .. "?status=%63ompleted" },
    { "GET", S .. "/w-done" }, { "GET", S .. "/w%2Ddone" }, { "GET", S .. "/w-appr2" }, { "GET", S .. "/w-fail" },
    { "GET", S .. "/w-cancel" }, { "GET", S .. "/nope-1" }, { "GET", S .. "/a%2Fb" }, { "GET", S .. "/a%00b" },
    { "GET", S .. "/ab%" }, { "GET", S .. "/" .. ("a"):rep(600) }, { "GET", S .. "/w-done/" }, { "GET", S .. "/.." },
    { "GET", S .. "/../../healthz" },
    { "GET", S .. "/w-done/events" }, { "GET", S .. "/w-appr/events?after=1" }, { "GET", S .. "/w-done/events?limit=1" },
    { "GET", S .. "/w-done/events?after=x" }, { "GET", S .. "/w-done/events?after=-5" },
    { "GET", S .. "/w-done/events?limit=10001" }, { "GET", S .. "/w-done/events", "Last-Event-ID: xyz\n" },
    { "GET", S .. "/w-done/events", "Last-Event-ID: 3 or 1=1\n" }, { "GET", S .. "/w-done/events", "Last-Event-ID: 4\n" },
    { "GET", S .. "/w-done/events", "Accept: text/event-stream\nLast-Event-ID: 2\n" },
    { "GET", S .. "/w-appr/events", "Accept: text/event-stream\n" },
    { "GET", S .. "/w-done/events", "Accept: text/event-stream\nLast-Event-ID: abc\n" },
    { "GET", "/v1/events?limit=1" }, { "GET", "/v1/events?after=3&limit=2" }, { "GET", "/v1/events", "Last-Event-ID: 1x\n" },
    { "GET", "/v1/events", "Accept: text/event-stream\nLast-Event-ID: 5\n" }, { "GET", "/v1/events?after=%zz" },
    { "GET", S .. "/w-done/history" }, { "GET", S .. "/w-done/history?run=1" }, { "GET", S .. "/w-done/history?run=9" },
    { "GET", S .. "/w-done/history?run=one" }, { "GET", S .. "/-x/history" },
    { "POST", S .. "/w-wait/signals/hello", J, '{"x":1}' }, { "POST", S .. "/w-wait/signals/go", J, '{"p":1}' },
    { "POST", S .. "/w-wait/signals/a%2Fb", nil, "1" }, { "POST", S .. "/w-wait/signals/hello", J, "{nope" },
    { "POST", S .. "/w-wait/signals/hello", J, '"\195"' }, { "POST", S .. "/w-wait/signals/a%01b", nil, "1" },
    { "POST", S .. "/w-appr/signals/approval:r1", J, '{"approved":true,"approver":"mallory"}' },
    { "POST", S .. "/w-appr/signals/approval%3Ar1", J, '{"approved":true}' },
    { "POST", S .. "/w-done/signals/go", J, "{}" }, { "POST", S .. "/w-wait/signals/", J, "{}" },
    { "POST", S .. "/w-wait/cancel" }, { "POST", S .. "/w-done/cancel" }, { "POST", S .. "/a%20b/cancel" },
    { "GET", "/v1/approvals" },
    { "POST", S .. "/w-appr/approvals/r1", J, '{"approved":true,"approver":"mallory"}' },
    { "POST", S .. "/w-appr/approvals/r1", J, '{"reason":"x"}' }, { "POST", S .. "/w-appr/approvals/r1", J, '{"approved":"yes"}' },
    { "POST", S .. "/w-appr/approvals/r1", J, '{"approved":true,"reason":5}' },
    { "POST", S .. "/w-appr/approvals/r9", J, '{"approved":true}' }, { "POST", S .. "/w-wait/approvals/r1", J, '{"approved":true}' },
    { "POST", S .. "/w-appr/approvals/r1", J, '{"approved":true,"reason":"fine"}' },
    { "POST", S .. "/w-appr2/approvals/r2", J, '{"approved":false,"reason":"no\\nthanks"}' },
    { "POST", S .. "/w-appr/approvals/r1", J, '{"approved":true,"reason":"\\u0007"}' },
    { "GET", "/nope" }, { "GET", "/v1" }, { "GET", "/V1/workflows" }, { "GET", "/v1%2Fworkflows" },
    { "DELETE", S .. "/w-done" }, { "PUT", S, J, "{}" }, { "POST", "/healthz" }, { "GET", S .. "/w-done/cancel" },
    { "HEAD", "/healthz" }, { "OPTIONS", "/metrics" }, { "PATCH", "/v1/events" },
  }
  local function text(c, extra)
    return c[1] .. " " .. c[2] .. "\n" .. (extra or "") .. (c[3] or "") .. (c[4] and "\n" .. c[4] or "")
  end
  for i, c in ipairs(cases) do
    seed("api_requests", "open" .. i, "open " .. text(c))
    seed("api_requests", "admin" .. i, text(c, "Authorization: Bearer @ADMIN\n"))
  end
  -- api_suite.py's anonymous cases: web pages and other host names
  for i, h in ipairs({ "Origin: http://evil.example\nContent-Type: text/plain\n", "Origin: null\n",
    "Host: evil.example:80\n", "Host: 127.0.0.1.evil.example\n", "Host: localhost.evil.example\n", "Host: 127.0.0.1:80x\n",
    "Host: localhost:7420\n", "Host: [::1]:7420\n", "Host: 127.0.0.2\n", "Host: @HOST\nOrigin: http://@HOST\n",
    "Host: @HOST\nOrigin: http://127.0.0.1:1\n", "Host: evil.example:1\nOrigin: http://evil.example:1\n",
    "Authorization: Bearer @ADMIN\n" }) do
    seed("api_requests", "anonymous" .. i, "open GET /v1/workflows\n" .. h)
    seed("api_requests", "anonymous-post" .. i, "open POST /v1/workflows\n" .. h .. '\n{"script":"tiny.lua","id":"csrf-1"}')
  end
  -- section_tokens: every scope against every route, and bad Authorization headers
  local routes = { { "GET", S .. "/w-wait" }, { "POST", S, nil, '{"script":"tiny.lua"}' },
    { "POST", S .. "/w-wait/signals/go", nil, "{}" }, { "POST", S .. "/w-wait/cancel" },
    { "POST", S .. "/w-appr/approvals/r1", nil, '{"approved":true}' }, { "GET", "/v1/approvals" }, { "GET", "/metrics" } }
  local auths = { "", "Authorization: Bearer @READ\n", "Authorization: Bearer @WRITE\n", "Authorization: Bearer @APPROVE\n",
    "Authorization: Bearer @REVOKED\n", "Authorization: Bearer eng_" .. ("A"):rep(43) .. "\n", "Authorization: Basic eDp5\n",
    "Authorization: Bearer \n", "Authorization: Bearer @ADMINx\n", "Authorization: bearer @READ\n",
    "Authorization: Bearer @READ\nOrigin: http://ui.example\n", "Authorization: Bearer   @ADMIN\n" }
  for i, r in ipairs(routes) do
    for k, a in ipairs(auths) do seed("api_requests", "scope" .. i .. "-" .. k, text(r, a)) end
  end
  -- section_body_and_headers: framing and limits (the harness's limits: 16 KiB of body, 4 KiB of head)
  local post = "POST " .. S .. "\nAuthorization: Bearer @ADMIN\n"
  for i, s in ipairs({
    post .. "Content-Length: 1000000000\n\n{{{{",
    post .. "Content-Length: 99999999999999999999999\n",
    post .. "Content-Length: 5\n\n" .. '{"script":"tiny.lua"}',
    post .. "Content-Length: 40\n\n" .. '{"script":"tiny.lua"}',
    post .. "Content-Length: 5\nContent-Length: 6\n\n{}",
    post .. "Content-Length: 2\nTransfer-Encoding: chunked\n\n{}",
    post .. "Content-Length: abc\n\n{}",
    post .. "\n" .. '{"script":"tiny.lua","input":{"pad":"' .. ("x"):rep(17000) .. '"}}',
    "GET /healthz\nX-Pad: " .. ("a"):rep(3000) .. "\n",
    "GET /healthz\nX-Pad: " .. ("a"):rep(9000) .. "\n",
    "GET /healthz?" .. ("q"):rep(5000) .. "\n",
    "GET /healthz\nHost: a\nHost: b\n",
  }) do
    seed("api_requests", "limits" .. i, s)
  end
end

-- -------------------------------------------------------- webhook_verify --
for i, fields in ipairs({
  { "It's a Secret to Everybody", "", "", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
    "Hello, World!" },
  { "It's a Secret to Everybody", "", "", "sha256=42125d1b3f19222538fab5c4107cfb8e0c46b370a675a45cc91be934baa1fe02",
    "Hello,\0World!" },
  { "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330",
    "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= "
      .. "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw==",
    '{"test": 2432232314}' },
  { "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", "msg.1", "99999999999999999999999", "v1,", "" },
  { "stripe-test-secret", "evt_1", "1700000000",
    "t=1700000000,v1=547fa21dcfac18668972bbd38f5ad5720cd289eec5c860106b67788af87707e2,"
      .. "v1=2d7b760a2bb243d837f804f20932b66a8c02b00456d31d1b58e1e25ef7ce03a9,v0=00",
    '{"id":"evt_1","object":"event"}' },
  { "tok-123", "", "hello", "Bearer tok-123", "" },
  { " lead", "id", "-5", "bearer  lead", "x\n" },
}) do
  seed("webhook_verify", "vector" .. i, table.concat(fields, "\n"))
end

-- ------------------------------------------------------------------ cron --
-- every expression tests/unit/test_cron.c parses or refuses, each after
-- instants around daylight-saving changes, in zones chosen by the index byte
do
  local src = read(repo .. "/tests/unit/test_cron.c")
  local exprs, seen = {}, {}
  for e in src:gmatch('{"([^"\n]+)",') do
    if not seen[e] then seen[e] = true; exprs[#exprs + 1] = e end
  end
  -- instant (UTC), zone index of fuzz_cron.c's ZONES
  local at = {
    { 1616893200, 1 }, -- 2021-03-28 01:00 UTC: Berlin springs forward
    { 1636261200, 2 }, -- 2021-11-07 05:00 UTC: New York falls back
    { 1633190400, 3 }, -- 2021-10-02 16:00 UTC: Sydney's gap
    { 1700000000, 0 }, { 951782400, 0 }, -- 2000-02-29
    { 1617458400, 5 }, -- Lord Howe's half-hour change
  }
  for i, e in ipairs(exprs) do
    local t = at[i % #at + 1]
    seed("cron", "expr" .. i, string.pack(">i8", t[1]) .. string.char(t[2]) .. e)
  end
end

-- -------------------------------------------------------------- triggers --
-- octokit's recorded GitHub deliveries (tests/fixtures/github/SOURCES) to the
-- shipped trigger and the test one, each signed and not; the hostile
-- trigger's requests (tests/integration/hooks_suite.py); a form-encoded
-- delivery, the other verifiers' routes, an unknown route
do
  local function delivery(route, flags, headers, body)
    return route .. "\n" .. flags .. "\n" .. table.concat(headers, "\n") .. "\n\n" .. body
  end
  for _, path in ipairs(ls(repo .. "/tests/fixtures/github", "%.payload%.json$")) do
    local body = read(path)
    local f = path:match("[^/]+$")
    local event = f:match("^([^.]+)")
    local hs = { "X-GitHub-Event: " .. event, "X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958",
      "Content-Type: application/json" }
    seed("triggers", "github-" .. f, delivery("github", "s", hs, body))
    seed("triggers", "github-unsigned-" .. f, delivery("github", "", hs, body))
  end
  for _, how in ipairs({ "error", "loop", "io", "os", "traversal", "badid", "longid", "utf8", "list", "number",
    "rep", "none" }) do
    seed("triggers", "hostile-" .. how, delivery("hostile", "s", { "X-GitHub-Delivery: h-" .. how },
      '{"how":"' .. how .. '"}'))
  end
  seed("triggers", "gh-key", delivery("gh", "s", { "X-GitHub-Event: push", "X-GitHub-Delivery: d-1" }, '{"key":"k1"}'))
  seed("triggers", "gh-ping", delivery("gh", "s", { "X-GitHub-Event: ping" }, '{"zen":"hi"}'))
  seed("triggers", "gh-form", delivery("gh", "s", { "Content-Type: application/x-www-form-urlencoded" },
    "payload=%7B%22key%22%3A%22k%2B2%22%7D&x=1"))
  seed("triggers", "gh-not-json", delivery("gh", "s", {}, "{nope"))
  seed("triggers", "std", delivery("std", "s", { "webhook-id: msg_1" }, '{"type":"invoice.paid"}'))
  seed("triggers", "std-unsigned", delivery("std", "", { "webhook-id: msg_1", "webhook-timestamp: 1700000000",
    "webhook-signature: v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=" }, '{"type":"x"}'))
  seed("triggers", "stripe", delivery("stripe", "s", {}, '{"id":"evt_1","object":"event","type":"charge"}'))
  seed("triggers", "ci", delivery("ci", "s", { "X-Request-Id: r-1", "X-Request-Id: r-2" }, ""))
  seed("triggers", "unknown-route", delivery("nope", "s", {}, "{}"))
end

-- ----------------------------------------------------------------- write --
for target, files in pairs(seeds) do
  local dir = repo .. "/tests/fuzz/corpus/" .. target
  os.execute("mkdir -p " .. dir .. " && rm -f " .. dir .. "/seed-*")
  local n = 0
  for name, content in pairs(files) do
    local f = assert(io.open(dir .. "/seed-" .. name, "wb"))
    f:write(content)
    f:close()
    n = n + 1
  end
  print(string.format("%-18s %4d seeds", target, n))
end
