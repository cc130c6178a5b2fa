-- Tests for lua/jsonschema.lua, lua/tools/ and lua/policy.lua with the default
-- policies/. Plain Lua 5.4 with lua-cjson; the engine's sandbox and http
-- modules are replaced by recording fakes, so nothing here needs Docker or a
-- network.
--
--   lua5.4 tests/tools/test_tools.lua        (from any directory)
local script = arg and arg[0] or "tests/tools/test_tools.lua"
local repo = script:match("^(.*)/tests/tools/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. repo .. "/lua/?/init.lua;" .. package.path
-- the native fs module: build/fs.so (ctest sets LUA_CPATH_5_4 to its build directory)
package.cpath = package.cpath .. ";" .. repo .. "/build/?.so"

package.preload["json"] = function()
  local cjson = require "cjson"
  return { encode = cjson.encode, decode = cjson.decode, null = cjson.null }
end

-- --------------------------------------------------------------- fakes --

local calls = {}
local fake_sandbox = { files = {}, entries = {} }
local function record(fn, t) t.fn = fn; calls[#calls + 1] = t end
function fake_sandbox.reset()
  calls = {}
  fake_sandbox.files = {}
  fake_sandbox.entries = {}
  fake_sandbox.exec_result = function() return { exit_code = 0, stdout = "", stderr = "" } end
end
function fake_sandbox.exec(sb, argv, opts)
  record("exec", { argv = argv, opts = opts })
  return fake_sandbox.exec_result(argv, opts)
end
function fake_sandbox.read_file(sb, path, max)
  record("read_file", { path = path, max = max })
  local c = fake_sandbox.files[path]
  if not c then error({ type = "FileError", message = path .. ": no such file" }, 0) end
  return { content = c, truncated = false }
end
function fake_sandbox.write_file(sb, path, content)
  record("write_file", { path = path, content = content })
  return { bytes = #content }
end
function fake_sandbox.list_files(sb, path)
  record("list_files", { path = path })
  return fake_sandbox.entries
end
fake_sandbox.reset()
package.preload["sandbox"] = function() return fake_sandbox end

local http_calls = {}
local fake_http = { responses = {} }
function fake_http.request(req)
  http_calls[#http_calls + 1] = req
  local r = fake_http.responses[req.url]
  if not r then error({ type = "ConnectionError", message = "no route to " .. req.url }, 0) end
  if not req.stream then return { status = r.status, headers = r.headers or {}, body = r.body or "" } end
  local body, pos = r.body or "", 1
  return {
    status = r.status, headers = r.headers or {},
    read = function()
      if pos > #body then return nil end
      local chunk = body:sub(pos, pos + 65535)
      pos = pos + #chunk
      return chunk
    end,
    close = function() end,
  }
end
package.preload["http"] = function() return fake_http end

local real_getenv = os.getenv
local function with_env(vars, fn)
  os.getenv = function(k)
    if vars[k] ~= nil then return vars[k] end
    return real_getenv(k)
  end
  local ok, err = pcall(fn)
  os.getenv = real_getenv
  if not ok then error(err, 0) end
end

-- ------------------------------------------------------------ harness --

local passed, failed = 0, 0
local function test(name, fn)
  fake_sandbox.reset()
  http_calls = {}
  fake_http.responses = {}
  local ok, err = pcall(fn)
  if ok then
    passed = passed + 1
  else
    failed = failed + 1
    io.stderr:write("FAIL ", name, "\n  ", tostring(type(err) == "table" and (err.message or err.type) or err), "\n")
  end
end

local function fail(msg) error(msg, 3) end
local function ok(cond, msg) if not cond then fail(msg or "expected a true value") end end
local function eq(a, b, msg)
  if a ~= b then fail((msg and (msg .. ": ") or "") .. "expected " .. tostring(b) .. ", got " .. tostring(a)) end
end
local function has(s, sub, msg)
  if type(s) ~= "string" or not s:find(sub, 1, true) then
    fail((msg and (msg .. ": ") or "") .. "expected " .. string.format("%q", tostring(s)) .. " to contain " .. string.format("%q", sub))
  end
end
local function lacks(s, sub, msg)
  if type(s) == "string" and s:find(sub, 1, true) then
    fail((msg and (msg .. ": ") or "") .. "did not expect " .. string.format("%q", sub) .. " in " .. string.format("%q", s))
  end
end


-- fixture directories under $TMPDIR (tests/lua_test.lua), removed at the end
local lua_test = dofile(repo .. "/tests/lua_test.lua")
local function tempdir() return lua_test.tmpdir("test_tools") end
local function write(path, content)
  local f = assert(io.open(path, "wb"))
  f:write(content)
  f:close()
end
local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local c = f:read("a")
  f:close()
  return c
end
local function dump(v)
  if type(v) ~= "table" then return tostring(v) end
  local parts = {}
  for k, x in pairs(v) do parts[#parts + 1] = tostring(k) .. "=" .. dump(x) end
  table.sort(parts)
  return "{" .. table.concat(parts, ",") .. "}"
end

local jsonschema = require "jsonschema"
local json = require "json"
local tools = require "tools"
local common = require "tools.common"
local policy = require "policy"

local ALL = tools.names()
local function perms(over)
  local p = { tools = ALL, networkAllowlist = { "example.com", "*.docs.example.org" },
    writablePaths = { "/workspace/working", "/workspace/output" }, requiresApproval = {} }
  for k, v in pairs(over or {}) do p[k] = v end
  return p
end
local function ctx(over)
  local c = { sandbox = { session_id = "s1" }, permissions = perms(), limits = {}, session_id = "s1", config = {} }
  for k, v in pairs(over or {}) do c[k] = v end
  return c
end

-- ---------------------------------------------------------- jsonschema --

local S = {
  type = "object",
  properties = {
    path = { type = "string", minLength = 1, maxLength = 5 },
    n = { type = "integer", minimum = 1, maximum = 10 },
    x = { type = "number" },
    opt = { type = { "string", "null" } },
    mode = { enum = { "a", "b" } },
    fixed = { const = "yes" },
    list = { type = "array", items = { type = "string", pattern = "^[a-z]+$" }, minItems = 1, maxItems = 3 },
    nested = { type = "object", properties = { title = { type = "string" } }, required = { "title" },
      additionalProperties = false },
  },
  required = { "path" },
  additionalProperties = false,
}

test("jsonschema: a valid value", function()
  local r, errs = jsonschema.validate(S, { path = "abc", n = 3, x = 1.5, opt = "s", mode = "a", fixed = "yes",
    list = { "ab", "c" }, nested = { title = "t" } }, "args")
  ok(r, errs and table.concat(errs, "; "))
end)

test("jsonschema: type errors name the path", function()
  local r, errs = jsonschema.validate(S, { path = 42 }, "args")
  eq(r, nil)
  eq(errs[1], "args.path: expected string, got number")
  local _, e2 = jsonschema.validate({ type = "integer" }, 3.5, "args")
  eq(e2[1], "args: expected integer, got number")
  ok(jsonschema.validate({ type = "integer" }, 3.0), "3.0 is an integer")
  ok(jsonschema.validate({ type = "number" }, 3), "an integer is a number")
  ok(not jsonschema.validate({ type = "number" }, 0 / 0), "NaN is not a number")
  local _, e3 = jsonschema.validate(S, {}, "value")
  eq(e3[1], "value.path: is required")
end)

test("jsonschema: lists of types and null", function()
  ok(jsonschema.validate(S, { path = "a", opt = json.null }))
  ok(jsonschema.validate(S, { path = "a" }))
  local _, errs = jsonschema.validate(S, { path = "a", opt = 1 }, "args")
  eq(errs[1], "args.opt: expected string or null, got number")
end)

test("jsonschema: additionalProperties false and as a schema", function()
  local _, errs = jsonschema.validate(S, { path = "a", extra = 1 }, "args")
  eq(errs[1], "args.extra: unexpected property")
  local s2 = { type = "object", additionalProperties = { type = "integer" } }
  ok(jsonschema.validate(s2, { a = 1, b = 2 }))
  local _, e2 = jsonschema.validate(s2, { a = "x" }, "args")
  eq(e2[1], "args.a: expected integer, got string")
end)

test("jsonschema: uniqueItems, by JSON's equality", function()
  local s = { type = "array", uniqueItems = true }
  ok(jsonschema.check_schema(s))
  ok(jsonschema.validate(s, { "a", "b", 1, "1", true, { x = 1 }, { x = 2 }, json.null }))
  ok(jsonschema.validate(s, {}), "an empty list")
  for _, c in ipairs({
    { { "a", "b", "a" }, "args: items 1 and 3 are the same" },
    { { 1, 1.0 }, "args: items 1 and 2 are the same" },
    { { 0.5, 2, 0.5 }, "args: items 1 and 3 are the same" },
    { { { x = { 1, 2 } }, { y = 1 }, { x = { 1, 2 } } }, "args: items 1 and 3 are the same" },
    { { json.null, false, json.null }, "args: items 1 and 3 are the same" },
    { { true, "true", true }, "args: items 1 and 3 are the same" },
  }) do
    local _, errs = jsonschema.validate(s, c[1], "args")
    eq(errs and errs[1], c[2])
  end
  ok(jsonschema.validate({ type = "array", uniqueItems = false }, { 1, 1 }), "false allows repeats")
  local bad, why = jsonschema.check_schema({ type = "array", uniqueItems = "yes" })
  ok(not bad and why[1]:find("uniqueItems: must be true or false", 1, true), "uniqueItems takes a boolean")
end)

test("jsonschema: exclusiveMinimum and exclusiveMaximum", function()
  local s = { type = "number", exclusiveMinimum = 0, exclusiveMaximum = 10 }
  ok(jsonschema.validate(s, 0.5))
  local _, e1 = jsonschema.validate(s, 0, "args")
  eq(e1[1], "args: must be > 0")
  local _, e2 = jsonschema.validate(s, 10, "args")
  eq(e2[1], "args: must be < 10")
  ok(jsonschema.check_schema(s))
  ok(not jsonschema.check_schema({ exclusiveMinimum = "0" }), "a number")
end)

test("jsonschema: errorMessage words a node's own errors", function()
  local s = {
    type = "object", additionalProperties = false, required = { "a", "b" },
    errorMessage = { additionalProperties = "unknown field '{key}'", required = { a = "a is missing" } },
    properties = {
      a = { type = "string", minLength = 1, pattern = "x", errorMessage = "a must be a string with an x (got {value})" },
      b = { type = "integer", minimum = 1, errorMessage = { minimum = "b is {value}, below 1" } },
    },
  }
  ok(jsonschema.check_schema(s))
  local _, e1 = jsonschema.validate(s, { z = 1 }, "in")
  eq(table.concat(e1, "|"), "a is missing|in.b: is required|unknown field 'z'", "a string, a table without b, the default")
  local _, e2 = jsonschema.validate(s, { a = "", b = 0 }, "in")
  eq(table.concat(e2, "|"), "a must be a string with an x (got )|b is 0, below 1", "a node's message is said once")
  local _, e3 = jsonschema.validate(s, { a = 5, b = "1" }, "in")
  eq(table.concat(e3, "|"), "a must be a string with an x (got 5)|in.b: expected integer, got string")
  local bad, errs = jsonschema.check_schema({ errorMessage = { nope = "x", type = 5, required = { a = 1 } } })
  ok(not bad)
  eq(#errs, 3, table.concat(errs, "; "))
  ok(not jsonschema.check_schema({ errorMessage = { "x" } }), "a list is not a table of messages")
end)

test("jsonschema: enum and const", function()
  local _, errs = jsonschema.validate(S, { path = "a", mode = "c" }, "args")
  has(errs[1], "args.mode: must be one of \"a\", \"b\"")
  local _, e2 = jsonschema.validate(S, { path = "a", fixed = "no" }, "args")
  eq(e2[1], "args.fixed: must be \"yes\"")
  ok(jsonschema.validate({ enum = { { a = 1 }, 2 } }, { a = 1 }), "deep-equal enum member")
end)

test("jsonschema: items, minItems, maxItems, pattern", function()
  local _, errs = jsonschema.validate(S, { path = "a", list = { "ab", 3 } }, "args")
  eq(errs[1], "args.list[2]: expected string, got number")
  local _, e2 = jsonschema.validate(S, { path = "a", list = { "a", "b", "c", "d" } }, "args")
  eq(e2[1], "args.list: must have at most 3 items")
  local _, e3 = jsonschema.validate({ type = "array", minItems = 1 }, {}, "args")
  eq(e3[1], "args: must have at least 1 items")
  local _, e4 = jsonschema.validate(S, { path = "a", list = { "AB" } }, "args")
  has(e4[1], "args.list[1]: does not match the pattern")
end)

test("jsonschema: minLength/maxLength count characters, minimum/maximum", function()
  ok(jsonschema.validate(S, { path = "ééééé" }), "5 two-byte characters fit maxLength 5")
  local _, errs = jsonschema.validate(S, { path = "" }, "args")
  eq(errs[1], "args.path: must be at least 1 characters long")
  local _, e2 = jsonschema.validate(S, { path = "abcdef" }, "args")
  eq(e2[1], "args.path: must be at most 5 characters long")
  local _, e3 = jsonschema.validate(S, { path = "a", n = 11 }, "args")
  eq(e3[1], "args.n: must be <= 10")
  local _, e4 = jsonschema.validate(S, { path = "a", n = 0 }, "args")
  eq(e4[1], "args.n: must be >= 1")
end)

test("jsonschema: empty table is an object and an array; mixed tables are neither", function()
  ok(jsonschema.validate({ type = "object" }, {}))
  ok(jsonschema.validate({ type = "array" }, {}))
  ok(not jsonschema.validate({ type = "object" }, { 1, 2 }))
  ok(not jsonschema.validate({ type = "array" }, { a = 1 }))
  local _, errs = jsonschema.validate({ type = "object" }, { 1, a = 2 }, "args")
  eq(errs[1], "args: expected object, got table with mixed keys")
end)

test("jsonschema: nested paths and several errors at once", function()
  local _, errs = jsonschema.validate(S, { path = 1, nested = { extra = true } }, "args")
  eq(#errs, 3, table.concat(errs or {}, "; "))
  -- within an object: missing required properties first, then properties by name
  eq(errs[1], "args.nested.title: is required")
  eq(errs[2], "args.nested.extra: unexpected property")
  eq(errs[3], "args.path: expected string, got number")
end)

test("jsonschema: check_schema refuses unknown keywords and types", function()
  ok(jsonschema.check_schema(S))
  local _, errs = jsonschema.check_schema({ type = "object", properties = { a = { type = "strin" } }, requird = {} })
  eq(#errs, 2)
  has(errs[1], "schema.properties.a.type: unknown type \"strin\"")
  has(errs[2], "schema.requird: unsupported keyword")
  ok(not jsonschema.check_schema({ type = "string", pattern = "[" }), "invalid Lua pattern")
end)

-- ------------------------------------------------------------- tools --

test("tools: every tool loads with a valid schema", function()
  local all = tools.load_all()
  eq(#ALL, 9) -- propose_memory the ninth (docs/memory.md)
  for _, name in ipairs(ALL) do
    local t = all[name]
    ok(t, name .. " loaded")
    eq(#tools.check_tool(name, t), 0, name .. ": " .. table.concat(tools.check_tool(name, t), "; "))
    eq(t.parameters.type, "object")
    eq(t.parameters.additionalProperties, false)
  end
  eq(all.http_fetch.side, "trusted")
  eq(all.publish_review.side, "trusted")
  eq(all.publish_review.publishes, true)
  eq(all.shell.side, "sandbox")
  eq(all.write_file.writes, true)
  eq(all.read_file.writes, false)
end)

test("tools: definitions() in allowlist order, with only name/description/parameters", function()
  local defs, unknown = tools.definitions({ "shell", "read_file", "no_such_tool", "shell" })
  eq(#defs, 2)
  eq(defs[1].name, "shell")
  eq(defs[2].name, "read_file")
  eq(unknown[1], "no_such_tool")
  for _, d in ipairs(defs) do
    local keys = {}
    for k in pairs(d) do keys[#keys + 1] = k end
    table.sort(keys)
    eq(table.concat(keys, ","), "description,name,parameters")
    ok(type(d.description) == "string" and #d.description > 10)
  end
  eq(#tools.definitions(nil), 0)
  -- the definitions survive a JSON round trip (they are sent to the model)
  ok(json.decode(json.encode(defs))[1].parameters.properties.command)
end)

test("tools: validate() error types", function()
  local t, et, msg = tools.validate("nope", {}, ALL)
  eq(t, nil); eq(et, "UnknownTool"); has(msg, "nope")
  t, et, msg = tools.validate("shell", { command = "ls" }, { "read_file" })
  eq(t, nil); eq(et, "NotAllowed"); has(msg, "shell")
  t, et, msg = tools.validate("read_file", { path = 42 }, ALL)
  eq(t, nil); eq(et, "InvalidArguments"); has(msg, "args.path: expected string, got number")
  t, et, msg = tools.validate("read_file", { path = "a", bogus = 1 }, ALL)
  eq(et, "InvalidArguments"); has(msg, "args.bogus: unexpected property")
  t, et = tools.validate("read_file", "{not json", ALL)
  eq(et, "InvalidArguments")
  t = tools.validate("read_file", '{"path": "a.txt"}', ALL)
  eq(t and t.name, "read_file")
  t = tools.validate("read_file", { path = "a.txt" })
  eq(t and t.name, "read_file", "nil allowlist skips the allowlist check")
end)

test("tools: run() returns typed failures and never raises", function()
  local r = tools.run("read_file", ctx(), { path = 1 })
  eq(r.ok, false); eq(r.error.type, "InvalidArguments")
  r = tools.run("read_file", ctx({ permissions = perms({ tools = { "shell" } }) }), { path = "a" })
  eq(r.error.type, "NotAllowed")
  local no_sandbox = ctx()
  no_sandbox.sandbox = nil
  calls = {}
  r = tools.run("read_file", no_sandbox, { path = "a" })
  eq(r.error.type, "NoSandbox"); eq(#calls, 0)
  r = tools.run("read_file", ctx(), { path = "missing.txt" })
  eq(r.ok, false); eq(r.error.type, "FileError"); has(r.content, "FileError")
  fake_sandbox.files["/workspace/working/a.txt"] = "hello"
  r = tools.run("read_file", ctx(), { path = "a.txt" })
  eq(r.ok, true); eq(r.content, "hello")
end)

test("read_file: paths resolve under /workspace, nothing outside", function()
  fake_sandbox.files["/workspace/input/b.txt"] = "l1\nl2\nl3\n"
  local r = tools.run("read_file", ctx(), { path = "/workspace/input/b.txt", start_line = 2, end_line = 3 })
  eq(r.content, "l2\nl3")
  for _, p in ipairs({ "../../etc/passwd", "/etc/passwd", "/workspace/../etc/passwd" }) do
    calls = {}
    r = tools.run("read_file", ctx(), { path = p })
    eq(r.ok, false, p); eq(r.error.type, "InvalidPath", p)
    eq(#calls, 0, "no sandbox call for " .. p)
  end
  fake_sandbox.files["/workspace/working/bin"] = "\0\1\2"
  r = tools.run("read_file", ctx(), { path = "bin" })
  has(r.content, "binary")
end)

test("write_file: outside writablePaths refused before any sandbox call", function()
  for _, p in ipairs({ "/etc/passwd", "../../etc/passwd", "/workspace/input/x.txt", "/workspace/task.md",
    "../output/../input/x", "/workspace/workingX/a" }) do
    calls = {}
    local r = tools.run("write_file", ctx(), { path = p, content = "x" })
    eq(r.ok, false, p)
    eq(r.error.type, p:find("^%.%./%.%./") and "PermissionDenied" or "PermissionDenied", p)
    eq(#calls, 0, "no sandbox call for " .. p)
  end
  calls = {}
  local r = tools.run("write_file", ctx({ permissions = perms({ writablePaths = { "output" } }) }),
    { path = "notes.md", content = "x" })
  eq(r.error.type, "PermissionDenied"); eq(#calls, 0)
  r = tools.run("write_file", ctx(), { path = "/workspace/output/report.md", content = "hello" })
  eq(r.ok, true)
  eq(#calls, 1); eq(calls[1].fn, "write_file"); eq(calls[1].path, "/workspace/output/report.md")
  calls = {}
  r = tools.run("write_file", ctx(), { path = "sub/../notes.md", content = "" })
  eq(r.ok, true); eq(calls[1].path, "/workspace/working/notes.md")
end)

test("search: argv only, never a shell; the pattern cannot become an option", function()
  fake_sandbox.exec_result = function() return { exit_code = 0, stdout = "/workspace/working/a.py:3:hit\n", stderr = "" } end
  local nasty = "-rf; rm -rf / $(reboot) `id`"
  local r = tools.run("search", ctx(), { pattern = nasty, path = "src", glob = "*.py" })
  eq(r.ok, true, r.error and r.error.message)
  eq(#calls, 1)
  local argv = calls[1].argv
  eq(type(argv), "table")
  eq(argv[1], "rg")
  for _, a in ipairs(argv) do
    ok(a ~= "sh" and a ~= "-c" and a ~= "bash", "no shell in argv")
  end
  local e_at, dd_at
  for i, a in ipairs(argv) do
    if a == "-e" then e_at = i end
    if a == "--" then dd_at = i end
  end
  eq(argv[e_at + 1], nasty, "the pattern is one argument right after -e")
  eq(argv[dd_at + 1], "/workspace/working/src")
  eq(dd_at, #argv - 1)
  has(table.concat(argv, " "), "--fixed-strings")
  has(r.content, "a.py:3:hit")
  calls = {}
  tools.run("search", ctx(), { pattern = "a.*b", regex = true })
  lacks(table.concat(calls[1].argv, " "), "--fixed-strings")
  eq(calls[1].argv[#calls[1].argv], "/workspace")
  calls = {}
  r = tools.run("search", ctx(), { pattern = "x", path = "/etc" })
  eq(r.error.type, "InvalidPath"); eq(#calls, 0)
end)

test("search: max_results and no matches", function()
  local lines = {}
  for i = 1, 30 do lines[i] = "/workspace/a.txt:" .. i .. ":x" end
  fake_sandbox.exec_result = function() return { exit_code = 0, stdout = table.concat(lines, "\n"), stderr = "" } end
  local r = tools.run("search", ctx(), { pattern = "x", max_results = 10 })
  has(r.content, "[20 more matching lines not shown")
  eq(r.data.shown, 10)
  fake_sandbox.exec_result = function() return { exit_code = 1, stdout = "", stderr = "" } end
  r = tools.run("search", ctx(), { pattern = "zzz" })
  has(r.content, "no matches")
  fake_sandbox.exec_result = function(argv)
    if argv[1] == "rg" then return { exit_code = 127, stdout = "", stderr = "rg: not found" } end
    return { exit_code = 0, stdout = "/workspace/b:1:y", stderr = "" }
  end
  calls = {}
  r = tools.run("search", ctx(), { pattern = "y" })
  eq(calls[2].argv[1], "grep", "falls back to grep")
  has(r.content, "/workspace/b:1:y")
end)

test("shell: sh -c with the command as one argument; timeout capped", function()
  fake_sandbox.exec_result = function() return { exit_code = 3, stdout = "out", stderr = "err" } end
  local r = tools.run("shell", ctx({ limits = { shellTimeoutSeconds = 20 } }), { command = "ls -la; echo hi", timeout = 500 })
  eq(r.ok, true)
  eq(calls[1].argv[1], "sh"); eq(calls[1].argv[2], "-c"); eq(calls[1].argv[3], "ls -la; echo hi"); eq(#calls[1].argv, 3)
  eq(calls[1].opts.timeout, 20)
  eq(calls[1].opts.workdir, "/workspace/working")
  has(r.content, "exit code: 3"); has(r.content, "out"); has(r.content, "err")
  r = tools.run("shell", ctx(), { command = "x", timeout = 100000 })
  eq(r.error.type, "InvalidArguments")
end)

test("run_tests: detects make, pytest and npm from the files", function()
  fake_sandbox.files["/workspace/working/Makefile"] = "all:\n\tcc x.c\ntest: all\n\t./run\n"
  local r = tools.run("run_tests", ctx(), {})
  eq(r.ok, true, r.error and r.error.message)
  eq(r.data.command, "make test")
  eq(r.data.passed, true)
  local last = calls[#calls]
  eq(last.fn, "exec"); eq(last.argv[1], "make"); eq(last.argv[2], "test"); eq(last.opts.workdir, "/workspace/working")

  fake_sandbox.reset()
  fake_sandbox.entries = { { path = "working/tests/test_app.py", type = "file", size = 10 } }
  fake_sandbox.exec_result = function() return { exit_code = 1, stdout = "1 failed", stderr = "" } end
  r = tools.run("run_tests", ctx(), {})
  eq(r.data.command, "pytest -q"); eq(r.data.passed, false); has(r.content, "FAILED")

  fake_sandbox.reset()
  fake_sandbox.files["/workspace/working/package.json"] = '{"scripts": {"test": "jest"}}'
  r = tools.run("run_tests", ctx(), {})
  eq(r.data.command, "npm test")

  fake_sandbox.reset()
  fake_sandbox.files["/workspace/working/package.json"] = '{"scripts": {"test": "echo \\"Error: no test specified\\" && exit 1"}}'
  r = tools.run("run_tests", ctx(), {})
  eq(r.ok, false); eq(r.error.type, "NoTestRunner")
end)

-- --------------------------------------------------------- http_fetch --

test("http_fetch: refuses hosts off the allowlist, other schemes and userinfo, without a request", function()
  local cases = {
    { "https://evil.com/", "HostNotAllowed" },
    { "https://example.com.evil.com/", "HostNotAllowed" },
    { "https://evilexample.com/", "HostNotAllowed" },
    { "https://docs.example.org/", "HostNotAllowed" },        -- "*.docs.example.org" does not match the bare suffix
    { "ftp://example.com/x", "InvalidURL" },
    { "file:///etc/passwd", "InvalidURL" },
    { "gopher://example.com/", "InvalidURL" },
    { "https://user:pw@example.com/", "InvalidURL" },
    { "https://example.com@evil.com/", "InvalidURL" },
    { "https://example.com\\@evil.com/", "InvalidURL" },
    { "https://exa mple.com/", "InvalidURL" },
    { "example.com/path", "InvalidURL" },
    { "https://example.com:99999/", "InvalidURL" },
  }
  for _, c in ipairs(cases) do
    local r = tools.run("http_fetch", ctx(), { url = c[1] })
    eq(r.ok, false, c[1])
    eq(r.error.type, c[2], c[1])
  end
  eq(#http_calls, 0, "no request was made")
  ok(common.host_allowed("a.docs.example.org", { "*.docs.example.org" }))
  ok(common.host_allowed("x.y.docs.example.org", { "*.docs.example.org" }))
  ok(common.host_allowed("EXAMPLE.com", { "example.com" }))
  ok(not common.host_allowed("sub.example.com", { "example.com" }))
end)

test("http_fetch: GET without credentials; the body is sanitized", function()
  local token = "sk-proj-" .. string.rep("A1b2", 8)
  local gh = "ghp_" .. string.rep("x9", 18)
  fake_http.responses["https://example.com/page"] = { status = 200, headers = { ["content-type"] = "text/plain; charset=utf-8" },
    body = "hello\27[31m red\27[0m\0 bell\7\nkey: " .. token .. "\ngh " .. gh ..
      "\nAuthorization: Bearer abcdefghijklmnopqrstuvwxyz012345\npassword=hunter22\n" ..
      "author: Jane\nmax_tokens: 100\n" }
  local r = tools.run("http_fetch", ctx(), { url = "https://example.com/page" })
  eq(r.ok, true, r.error and r.error.message)
  eq(#http_calls, 1)
  local req = http_calls[1]
  eq(req.method, "GET")
  for k in pairs(req.headers or {}) do
    ok(k ~= "authorization" and k ~= "cookie" and k ~= "proxy-authorization", "no credential header " .. k)
  end
  eq(req.body, nil)
  lacks(r.content, token); lacks(r.content, gh); lacks(r.content, "abcdefghijklmnopqrstuvwxyz012345")
  lacks(r.content, "hunter22")
  lacks(r.content, "\27"); lacks(r.content, "\0"); lacks(r.content, "\7")
  has(r.content, "[redacted]")
  has(r.content, "hello red")
  has(r.content, "author: Jane"); has(r.content, "max_tokens: 100")
end)

test("http_fetch: text-like types only, 256 KiB cap, redirects checked again", function()
  fake_http.responses["https://example.com/img"] = { status = 200, headers = { ["content-type"] = "image/png" }, body = "\137PNG" }
  local r = tools.run("http_fetch", ctx(), { url = "https://example.com/img" })
  eq(r.ok, true); has(r.content, "is not text"); lacks(r.content, "PNG")
  fake_http.responses["https://example.com/big"] = { status = 200, headers = { ["content-type"] = "application/json" },
    body = string.rep("a", 300 * 1024) }
  r = tools.run("http_fetch", ctx(), { url = "https://example.com/big" })
  eq(r.data.truncated, true)
  ok(#r.content < 256 * 1024 + 500, "capped")
  fake_http.responses["https://example.com/r"] = { status = 302, headers = { location = "https://evil.com/x" } }
  r = tools.run("http_fetch", ctx(), { url = "https://example.com/r" })
  eq(r.ok, false); eq(r.error.type, "HostNotAllowed")
  fake_http.responses["https://example.com/r2"] = { status = 301, headers = { location = "/final" } }
  fake_http.responses["https://example.com/final"] = { status = 200, headers = { ["content-type"] = "text/html" }, body = "<p>ok</p>" }
  r = tools.run("http_fetch", ctx(), { url = "https://example.com/r2" })
  eq(r.ok, true); has(r.content, "<p>ok</p>")
  r = tools.run("http_fetch", ctx(), { url = "https://a.docs.example.org/x" })
  eq(r.error.type, "ConnectionError", "allowed by *.suffix, then the fake has no route")
end)

test("sanitize: control characters and secrets", function()
  eq(common.sanitize("a\27[1mb\r\nc\0d"), "ab\ncd")
  has(common.sanitize("AKIAABCDEFGHIJKLMNOP"), "AKIA[redacted]")
  has(common.sanitize("x eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc y"), "[redacted jwt]")
  has(common.sanitize("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----"), "[redacted private key]")
  has(common.sanitize('{"api_key": "0123456789abcdef"}'), '"api_key": "[redacted]"')
  has(common.sanitize("https://bob:secret@host/x"), "https://[redacted]@host/x")
  eq(common.sanitize("plain text with a token word"), "plain text with a token word")
  lacks(common.sanitize("my literal s3cr3t-value", { "s3cr3t-value" }), "s3cr3t-value")
end)

-- ------------------------------------------------------ publish_review --

local REVIEW = { summary = "Looks fine overall.", verdict = "request_changes",
  findings = { { title = "SQL built by concatenation", severity = "high", file = "app/db.py", line = 42,
    detail = "Use parameters." }, { title = "Typo" } } }

test("publish_review: writes markdown to reviews_dir/<session>.md without the token", function()
  local dir = tempdir() .. "/nested/reviews"
  local token = "pubtok-" .. string.rep("Z7", 12)
  local r
  with_env({ ENGINE_PUBLISH_TOKEN = token }, function()
    local review = { summary = REVIEW.summary .. " (token " .. token .. ")", verdict = REVIEW.verdict, findings = REVIEW.findings }
    r = tools.run("publish_review", ctx({ session_id = "sess-1", config = { reviews_dir = dir } }), review)
  end)
  eq(r.ok, true, r.error and r.error.message)
  local md = read(dir .. "/sess-1.md")
  ok(md, "the review file exists")
  has(md, "# Review: sess-1"); has(md, "**Verdict:** request changes"); has(md, "Looks fine overall.")
  has(md, "1. **[high]** SQL built by concatenation (`app/db.py:42`)"); has(md, "   Use parameters.")
  has(md, "2. **[info]** Typo")
  lacks(md, token, "file"); lacks(r.content, token, "content"); lacks(dump(r.data), token, "data")
  eq(#http_calls, 0)
  ok(not read(dir .. "/sess-1.md.tmp"), "no temporary file left")
end)

test("publish_review: refuses unsafe session ids", function()
  local dir = tempdir()
  for _, id in ipairs({ "../escape", "a/b", "", ".hidden", "x..y", "a b" }) do
    local r = tools.run("publish_review", ctx({ session_id = id, config = { reviews_dir = dir } }), REVIEW)
    eq(r.ok, false, id); eq(r.error.type, "InvalidSessionId", id)
  end
  ok(not read(dir .. "/../escape.md"))
end)

test("publish_review: POSTs JSON with the token, which never comes back", function()
  local token = "pubtok-" .. string.rep("Q4", 12)
  fake_http.responses["https://reviews.example.net/hook"] = { status = 201, body = "stored, auth was " .. token }
  local r
  with_env({ ENGINE_PUBLISH_TOKEN = token }, function()
    r = tools.run("publish_review", ctx({ session_id = "s-2", config = { publish_url = "https://reviews.example.net/hook" } }), REVIEW)
  end)
  eq(r.ok, true, r.error and r.error.message)
  local req = http_calls[1]
  eq(req.method, "POST")
  eq(req.headers.authorization, "Bearer " .. token)
  eq(req.headers["idempotency-key"], "review/s-2")
  local body = json.decode(req.body)
  eq(body.session_id, "s-2"); eq(body.verdict, "request_changes"); eq(#body.findings, 2)
  lacks(req.body, token)
  lacks(r.content, token); lacks(dump(r.data), token)
  fake_http.responses["https://reviews.example.net/hook"] = { status = 500, body = "failed for token " .. token }
  with_env({ ENGINE_PUBLISH_TOKEN = token }, function()
    r = tools.run("publish_review", ctx({ session_id = "s-2", config = { publish_url = "https://reviews.example.net/hook" } }), REVIEW)
  end)
  eq(r.ok, false); eq(r.error.type, "PublishFailed")
  has(r.error.message, "HTTP 500"); lacks(r.error.message, token); lacks(r.content, token)
end)

test("tools.policy_request carries the tool's flags", function()
  local req = tools.policy_request("publish_review", REVIEW, ctx())
  eq(req.tool, "publish_review"); eq(req.side, "trusted"); eq(req.publishes, true); eq(req.writes, true)
  eq(req.session_id, "s1"); ok(req.permissions.tools)
end)

-- ------------------------------------------------------------ policies --

local default_set, load_err = policy.load_dir(repo .. "/policies")

local function decide(tool, args, over)
  local req = tools.policy_request(tool, args, { permissions = perms(over), session_id = "s1" })
  return policy.decide(default_set, req)
end

test("policies: the default set loads and checks", function()
  ok(default_set, load_err)
  eq(#default_set.files, 5)
  eq(default_set.files[1], "00-allowlist.lua")
  ok(default_set.hash:match("^%x+$") and #default_set.hash == 16)
  local good, report = policy.check_dir(repo .. "/policies")
  ok(good, report)
  has(report, default_set.hash)
end)

test("policies: default decisions", function()
  local cases = {
    -- shell: read-only or confined -> allow
    { "shell", { command = "cat /workspace/input/a.txt" }, "allow" },
    { "shell", { command = "ls -la | grep foo | head -5" }, "allow" },
    { "shell", { command = "echo x > /workspace/output/a.txt" }, "allow" },
    { "shell", { command = "echo x >> notes.md 2>&1" }, "allow" },
    { "shell", { command = "ls 2>/dev/null; pwd" }, "allow" },
    { "shell", { command = "git log --oneline -5 && git diff HEAD~1 -- src" }, "allow" },
    { "shell", { command = "git --no-pager status" }, "allow" },
    { "shell", { command = "rg -n TODO src" }, "allow" },
    { "shell", { command = "pytest -q tests/" }, "allow" },
    { "shell", { command = "python3 -m pytest -x" }, "allow" },
    { "shell", { command = "rm -rf /workspace/working/build" }, "allow" },
    { "shell", { command = "mkdir -p /workspace/output/reports && touch /workspace/output/reports/a" }, "allow" },
    { "shell", { command = "cp /workspace/input/a.txt /workspace/output/" }, "allow" },
    { "shell", { command = "cp -r /workspace/input/src ." }, "allow" },
    { "shell", { command = "mv a.txt b.txt" }, "allow" },
    { "shell", { command = "cd /workspace/output && touch done.txt" }, "allow" },
    { "shell", { command = "echo hi | tee out.txt" }, "allow" },
    { "shell", { command = "sed -n '1,5p' a.txt" }, "allow" },
    { "shell", { command = "sed -i 's/foo/bar/g' notes.md" }, "allow" },
    { "shell", { command = "find . -name '*.py' | xargs grep -n import" }, "allow" },
    { "shell", { command = "awk '{print $1}' a.txt | sort | uniq -c" }, "allow" },
    { "shell", { command = "bash -c 'ls -la'" }, "allow" },
    { "shell", { command = "echo 'rm -rf / > /etc/passwd'" }, "allow" },
    { "shell", { command = "for f in *.py; do wc -l \"$f\"; done" }, "allow" },
    { "shell", { command = "tar -tzf /workspace/input/a.tgz" }, "allow" },
    { "shell", { command = "chmod +x /workspace/working/run.sh" }, "allow" },
    -- shell: may write outside working/output, or cannot be analysed -> approve
    { "shell", { command = "echo x > /etc/passwd" }, "approve" },
    { "shell", { command = "echo x>/etc/passwd" }, "approve" },
    { "shell", { command = "cat a 2> /tmp/err" }, "approve" },
    { "shell", { command = "ls &> /workspace/input/x" }, "approve" },
    { "shell", { command = "rm -rf /" }, "approve" },
    { "shell", { command = "rm -rf ../input" }, "approve" },
    { "shell", { command = "cd .. && rm -rf input" }, "approve" },
    { "shell", { command = "cd / && rm x" }, "approve" },
    { "shell", { command = "cd && touch x" }, "approve" },
    { "shell", { command = "cp a.txt /etc/" }, "approve" },
    { "shell", { command = "mv /workspace/input/a.txt ." }, "approve" },
    { "shell", { command = "ln -s /etc/passwd link" }, "approve" },
    { "shell", { command = "chmod 777 /usr/bin/env" }, "approve" },
    { "shell", { command = "touch ~/x" }, "approve" },
    { "shell", { command = "echo hi > $HOME/x" }, "approve" },
    { "shell", { command = "echo hi > \"$OUT\"" }, "approve" },
    { "shell", { command = "tee /tmp/x < a" }, "approve" },
    { "shell", { command = "sed -i 's/a/b/' /etc/hosts" }, "approve" },
    { "shell", { command = "sed 's/a/b/w /etc/x' a.txt" }, "approve" },
    { "shell", { command = "sed -n '1p;w /tmp/o' a.txt" }, "approve" },
    { "shell", { command = "sed 's/x/date/e' a.txt" }, "approve" },
    { "shell", { command = "awk '{print > \"/etc/x\"}' a.txt" }, "approve" },
    { "shell", { command = "awk 'BEGIN{system(\"id\")}'" }, "approve" },
    { "shell", { command = "git commit -am wip" }, "approve" },
    { "shell", { command = "git push origin main" }, "approve" },
    { "shell", { command = "git -c core.pager=sh log" }, "approve" },
    { "shell", { command = "git diff --output=/etc/x" }, "approve" },
    { "shell", { command = "dd if=/dev/zero of=/etc/x bs=1 count=1" }, "approve" },
    { "shell", { command = "find / -delete" }, "approve" },
    { "shell", { command = "find . -exec rm {} \\;" }, "approve" },
    { "shell", { command = "xargs rm < list.txt" }, "approve" },
    { "shell", { command = "echo $(rm x)" }, "approve" },
    { "shell", { command = "echo `id`" }, "approve" },
    { "shell", { command = "cat <<EOF > /etc/x\nhi\nEOF" }, "approve" },
    { "shell", { command = "diff <(ls a) <(ls b)" }, "approve" },
    { "shell", { command = "sh -c 'echo hi > /etc/x'" }, "approve" },
    { "shell", { command = "sh script.sh" }, "approve" },
    { "shell", { command = "curl -o /workspace/output/x https://example.com" }, "approve" },
    { "shell", { command = "python3 -c 'open(\"/etc/x\",\"w\")'" }, "approve" },
    { "shell", { command = "./configure" }, "approve" },
    { "shell", { command = "make install" }, "approve" },
    { "shell", { command = "sudo ls" }, "approve" },
    { "shell", { command = "eval \"$CMD\"" }, "approve" },
    { "shell", { command = "$CMD /etc/x" }, "approve" },
    { "shell", { command = "tar -xzf a.tgz -C /" }, "approve" },
    { "shell", { command = "echo 'unterminated" }, "approve" },
    { "shell", { command = "touch {a,/etc/x}" }, "approve" },
    { "shell", { command = "echo hi >" }, "approve" },
    -- other tools
    { "read_file", { path = "/workspace/input/a.txt" }, "allow" },
    { "write_file", { path = "/workspace/output/a.txt", content = "x" }, "allow" },
    { "search", { pattern = "x" }, "allow" },
    { "run_tests", {}, "allow" },
    { "publish_review", REVIEW, "approve" },
    { "http_fetch", { url = "https://example.com/a" }, "allow" },
    { "http_fetch", { url = "https://api.docs.example.org/a" }, "allow" },
    { "http_fetch", { url = "https://evil.com/a" }, "deny" },
    { "http_fetch", { url = "https://user@example.com/a" }, "deny" },
    { "http_fetch", { url = "file:///etc/passwd" }, "deny" },
    { "http_fetch", { url = "https://example.com.evil.com/" }, "deny" },
    -- the allowlist, and the session's approval list
    { "shell", { command = "ls" }, "deny", { tools = { "read_file" } } },
    { "publish_review", REVIEW, "deny", { tools = { "read_file" } } },
    { "no_such_tool", {}, "deny" },
    { "read_file", { path = "a" }, "approve", { requiresApproval = { "read_file" } } },
    { "search", { pattern = "a" }, "approve", { requiresApproval = { "*" } } },
    { "http_fetch", { url = "https://evil.com/" }, "deny", { requiresApproval = { "http_fetch" } } },
  }
  local bad = {}
  for _, c in ipairs(cases) do
    local d = decide(c[1], c[2], c[4])
    if d.decision ~= c[3] then
      bad[#bad + 1] = string.format("%s %s: expected %s, got %s (%s)", c[1], c[2].command or c[2].url or c[2].path or "",
        c[3], d.decision, tostring(d.reason))
    end
    eq(d.hash, default_set.hash)
    ok(type(d.reason) == "string" and d.reason ~= "", "a reason")
  end
  ok(#bad == 0, "\n    " .. table.concat(bad, "\n    "))
end)

test("policies: shell tricks that write outside working/output need approval", function()
  local approve = {
    "echo hi > /workspace/working/../input/x", "ls >| /etc/x", "cat a 1<>/etc/x", "exec 3>/etc/x",
    "echo > '/etc/x'", "touch /workspace/output/../../etc/x", "cp -t /etc a", "cp --target-directory=/etc a",
    "mv -t /etc a", "rm -rf -- /", "rm -rf $(pwd)", "echo x | tee -a /etc/x", "sort -o/etc/x a",
    "sort --output=/etc/x a", "sort -T /tmp a", "git log > /etc/x", "env rm -rf /", "env -i sh -c 'rm /x'",
    "timeout 5 rm -rf /", "nice -n 5 rm /x", "command rm /x", "if true; then rm -rf /; fi",
    "while read f; do rm \"$f\"; done < list", "{ rm /x; }", "(rm /x)", "! rm /x", "a=1 rm /x", "ls; rm /x",
    "ls && rm /x", "ls || rm /x", "ls & rm /x", "ls | rm /x", "ls\nrm /x", "cat a;#\nrm /x", "/bin/rm /x",
    "/tmp/rm x", "r\\m /x", "'r''m' /x", "${RM} /x", "ls > /dev/sda", "ln -s /etc x", "install -m 755 a /usr/local/bin/a",
    "chmod -R 777 /", "chmod --reference=a /etc/x", "truncate -s 0 /etc/x", "mkdir -m 777 /x", "touch -d yesterday /x",
    "tar cf /workspace/output/a.tar .", "awk -f prog.awk", "sed -e 's/a/b/' -i /etc/x",
    "sed --in-place=.bak 's/a/b/' /etc/x", "sed -ni 's/a/b/p' /etc/x", "sed 's/a/b/' a > /etc/x",
    "find . -fprint /etc/x", "git apply x.patch", "git checkout .", "git stash", "wget https://example.com",
    ": > /etc/x", "> /etc/x", "cat a >& /etc/x", "ls |& tee /etc/x", "exec 1>/etc/x", "xargs -I{} cp {} /etc/",
    "xargs sh -c 'rm $1'", "find . -print0 | xargs -0 rm -f", "time rm /x", "nohup rm /x &", "yes > /etc/x",
    "bash -c \"rm -rf /\"", "bash -c", "sh -c 'cd /; rm x'", "cat x | bash", "source x.sh", ". x.sh",
    "alias ls='rm -rf /'; ls", "function f { rm /x; }; f", "f() { rm /x; }; f", "PATH=.:$PATH ls",
    "export PATH=/tmp:$PATH; ls", "env PATH=/tmp ls", "LD_PRELOAD=/tmp/x.so ls", "CDPATH=/ cd etc; rm x",
    "GIT_EXTERNAL_DIFF=./x git diff", "trap 'rm /x' EXIT", "cd -P /; rm x", "pushd /tmp; rm x", "cd ~; rm x",
    "cd \"$D\"; rm x", "uniq a /etc/x", "xxd -r a /etc/x", "rg --pre ./x foo", "echo a | xargs uniq a",
    "case x in *) rm /x;; esac", "(( i++ ))", "echo $((1+1)) > /etc/x", "cat a > /workspace/input/a",
    "rm /workspace/task.md", "sed 'r /etc/shadow' a", "echo hi >> /workspace/skills/x/SKILL.md",
    "cp a /workspace/outputs/x", "tee /workspace/working2/x", "PATH=\"/tmp\" ls", "'PATH=/tmp' ls",
    "pip install x", "python3 script.py", "npm install", "make",
    -- startup files, and variables a program may read: not known to be harmless
    "bash -lc 'ls'", "export FOO=bar", "X=\"a b\" ls",
  }
  local allow = {
    "cat /etc/passwd > /workspace/output/p", "cat a >&2", "cat a 2>&-", "ls &>/dev/null", "xargs -0 grep x",
    "cd /workspace/output; sh -c 'rm x'", "bash -c 'ls'", "cat a # ; rm /x", "echo a\\\nrm /x",
    "sed '1!G;h;$!d' a.txt", "find . -newer x -print", "git diff > /workspace/output/d.patch",
    "git show HEAD:file > out", "echo ${x:-default}", "cd sub && rm -f *.o", "cd /workspace/output; tee a b < c",
    "dd if=/workspace/input/a of=/workspace/output/b", "chmod u+x,g-w run.sh", "command -v python3",
    "export LC_ALL=C", "mkdir -p build/tmp && cd build && touch x", "head -n 5 a.txt; tail -n 5 a.txt",
    "grep -rn 'rm -rf' .", "wc -l a", "truncate -s 0 log.txt",
    "sort -o sorted.txt a.txt", "git --no-pager log -p -- src/", "test -f a && echo yes",
    "x=\"a b\"; ls \"$x\"", "LC_ALL=C sort a.txt", "npm test", "make test",
  }
  local bad = {}
  for _, c in ipairs(approve) do
    local d = decide("shell", { command = c })
    if d.decision ~= "approve" then bad[#bad + 1] = "expected approve: " .. c .. " (" .. tostring(d.reason) .. ")" end
  end
  for _, c in ipairs(allow) do
    local d = decide("shell", { command = c })
    if d.decision ~= "allow" then bad[#bad + 1] = "expected allow: " .. c .. " (" .. tostring(d.reason) .. ")" end
  end
  ok(#bad == 0, "\n    " .. table.concat(bad, "\n    "))
end)

test("policies: the reason names the policy and the problem", function()
  local d = decide("shell", { command = "echo x > /etc/passwd" })
  eq(d.policy, "shell"); eq(d.file, "10-shell.lua"); has(d.reason, "/etc/passwd")
  d = decide("http_fetch", { url = "https://evil.com/" })
  eq(d.policy, "network"); has(d.reason, "evil.com")
  d = decide("shell", { command = "ls" }, { tools = { "read_file" } })
  eq(d.policy, "allowlist"); has(d.reason, "permissions.tools")
end)

-- synthetic policy directories
local function policy_dir(files)
  local dir = tempdir()
  for name, content in pairs(files) do write(dir .. "/" .. name, content) end
  return dir
end

local ALLOW = "return function(req) return 'allow', 'ok by me' end\n"
local APPROVE = "return function(req) return 'approve', 'ask a human' end\n"
local DENY = "return function(req) return 'deny', 'no' end\n"
local ABSTAIN = "return function(req) return nil end\n"

test("policies: deny beats approve beats allow, in any file order", function()
  local req = { tool = "shell", args = { command = "ls" }, permissions = { tools = { "shell" } } }
  for _, order in ipairs({ { ALLOW, APPROVE, DENY }, { DENY, APPROVE, ALLOW }, { APPROVE, DENY, ALLOW } }) do
    local set = assert(policy.load_dir(policy_dir({ ["a.lua"] = order[1], ["b.lua"] = order[2], ["c.lua"] = order[3] })))
    local d = policy.decide(set, req)
    eq(d.decision, "deny"); eq(d.reason, "no"); eq(#d.votes, 3)
  end
  local set = assert(policy.load_dir(policy_dir({ ["a.lua"] = ALLOW, ["b.lua"] = APPROVE, ["c.lua"] = ABSTAIN })))
  local d = policy.decide(set, req)
  eq(d.decision, "approve"); eq(d.reason, "ask a human"); eq(d.file, "b.lua")
  set = assert(policy.load_dir(policy_dir({ ["a.lua"] = ABSTAIN, ["b.lua"] = ALLOW })))
  eq(policy.decide(set, req).decision, "allow")
end)

test("policies: when nobody decides, allow only tools in permissions.tools", function()
  local set = assert(policy.load_dir(policy_dir({ ["a.lua"] = ABSTAIN })))
  eq(policy.decide(set, { tool = "shell", permissions = { tools = { "shell" } } }).decision, "allow")
  eq(policy.decide(set, { tool = "shell", permissions = { tools = { "read_file" } } }).decision, "deny")
  eq(policy.decide(set, { tool = "shell" }).decision, "deny")
  local empty = assert(policy.load_dir(policy_dir({})))
  eq(#empty.files, 0)
  eq(policy.decide(empty, { tool = "shell", permissions = { tools = { "shell" } } }).decision, "allow")
  eq(policy.decide(nil, { tool = "x", permissions = { tools = {} } }).decision, "deny")
end)

test("policies: a file that fails to load is named, with its line", function()
  local cases = {
    { "return function(req)\n  return 'allow'\n", "broken.lua:3:" },        -- syntax error (missing end)
    { "local x = 1\nerror('boom at load')\nreturn function() end\n", "broken.lua:2: boom at load" },
    { "return 42\n", "broken.lua: must return a function" },
    { "local f = io.open('/etc/passwd')\nreturn function() end\n", "broken.lua:1:" },
    { "os.execute('true')\nreturn function() end\n", "broken.lua:1:" },
    { "local m = require 'os'\nreturn function() end\n", "broken.lua:1:" },
    { "while true do end\n", "instruction budget" },
    { "return {name = 'x'}\n", "broken.lua: must return" },
  }
  for _, c in ipairs(cases) do
    local dir = policy_dir({ ["00-good.lua"] = ALLOW, ["broken.lua"] = c[1] })
    local set, err = policy.load_dir(dir)
    eq(set, nil, c[1])
    has(err, c[2], c[1])
    local good, report = policy.check_dir(dir)
    eq(good, false); has(report, "broken.lua")
  end
  local set, err = policy.load_dir("/nonexistent/policies-dir")
  eq(set, nil); ok(err)
end)

test("policies: a policy that errors or returns garbage fails closed, naming the file", function()
  local cases = {
    { "return function(req) error('kaput') end\n", "kaput" },
    { "return function(req) local t = nil; return t.x end\n", "bad.lua:1:" },
    { "return function(req) return 'maybe', 'hmm' end\n", "invalid decision" },
    { "return function(req) return 'allow', 42 end\n", "invalid decision" },
    { "return function(req) return {} end\n", "invalid decision" },
    { "return function(req) return io.open('/etc/passwd') end\n", "global 'io'" },
    { "return function(req) return os.getenv('HOME') end\n", "global 'os'" },
    { "return function(req) return load('return 1')() end\n", "global 'load'" },
    { "return function(req) return math.random() end\n", "random" },
    { "return function(req) return string.dump(print) end\n", "dump" },
    { "return function(req) while true do end end\n", "instruction budget" },
    { "return function(req) while true do pcall(function() while true do end end) end end\n", "instruction budget" },
  }
  for _, c in ipairs(cases) do
    local set = assert(policy.load_dir(policy_dir({ ["00-allow.lua"] = ALLOW, ["bad.lua"] = c[1] })))
    local d = policy.decide(set, { tool = "shell", permissions = { tools = { "shell" } } })
    eq(d.decision, "deny", c[1])
    eq(d.file, "bad.lua", c[1])
    has(d.reason, "bad.lua", c[1])
    has(d.reason, c[2], c[1])
  end
end)

test("policies: the caller's own debug hook survives a decision", function()
  local fired = 0
  local function my_hook() fired = fired + 1 end
  debug.sethook(my_hook, "", 1000)
  local set = assert(policy.load_dir(policy_dir({ ["a.lua"] = "return function(req) while true do end end\n" })))
  local d = policy.decide(set, { tool = "t", permissions = { tools = { "t" } } })
  local h, mask, count = debug.gethook()
  debug.sethook()
  eq(d.decision, "deny")
  ok(h == my_hook and mask == "" and count == 1000, "the hook is still the caller's")
end)

test("policies: each policy gets its own copy of the request", function()
  local set = assert(policy.load_dir(policy_dir({
    ["a.lua"] = "return function(req) req.tool = 'evil'; req.permissions.tools[1] = 'evil' end\n",
    ["b.lua"] = "return function(req) if req.tool ~= 'shell' or req.permissions.tools[1] ~= 'shell' then return 'deny', 'tampered' end end\n",
  })))
  local req = { tool = "shell", permissions = { tools = { "shell" } } }
  eq(policy.decide(set, req).decision, "allow")
  eq(req.tool, "shell")
  eq(req.permissions.tools[1], "shell")
end)

test("policies: a policy cannot change the libraries of the others", function()
  local set = assert(policy.load_dir(policy_dir({
    ["a.lua"] = "string.find = function() return 1 end; table.concat = nil\nreturn function(req) end\n",
    ["b.lua"] = "return function(req) if not table.concat or string.find('abc', 'z') then return 'deny', 'x' end end\n",
  })))
  eq(policy.decide(set, { tool = "t", permissions = { tools = { "t" } } }).decision, "allow")
  ok(string.find("abc", "z") == nil, "the real string library is untouched")
end)

test("policies: hash is FNV-1a 64, stable unless a file changes", function()
  eq(policy.fnv1a64(""), "cbf29ce484222325")
  eq(policy.fnv1a64("a"), "af63dc4c8601ec8c")
  eq(policy.fnv1a64("foobar"), "85944171f73967e8")
  local files = { ["10-a.lua"] = ALLOW, ["20-b.lua"] = APPROVE }
  local d1, d2 = policy_dir(files), policy_dir(files)
  local s1, s2 = assert(policy.load_dir(d1)), assert(policy.load_dir(d2))
  eq(s1.hash, s2.hash, "same files, same hash")
  eq(assert(policy.load_dir(d1)).hash, s1.hash, "reloading gives the same hash")
  write(d2 .. "/20-b.lua", APPROVE .. "-- edited\n")
  local s3 = assert(policy.load_dir(d2))
  ok(s3.hash ~= s1.hash, "an edit changes the hash")
  write(d2 .. "/30-c.lua", ABSTAIN)
  ok(assert(policy.load_dir(d2)).hash ~= s3.hash, "a new file changes the hash")
  local d4 = policy_dir({ ["10-a.lua"] = APPROVE, ["20-b.lua"] = ALLOW })
  ok(assert(policy.load_dir(d4)).hash ~= s1.hash, "swapped contents change the hash")
  write(d1 .. "/notes.txt", "not a policy")
  write(d1 .. "/.hidden.lua", "syntax error here")
  eq(assert(policy.load_dir(d1)).hash, s1.hash, "non-policy files are ignored")
  eq(policy.decide(s1, { tool = "x" }).hash, s1.hash)
end)

-- ------------------------------------------------------------- cleanup --

lua_test.remove_tmpdirs()

print(string.format("%d passed, %d failed", passed, failed))
os.exit(failed == 0 and 0 or 1)
