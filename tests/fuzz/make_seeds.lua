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
