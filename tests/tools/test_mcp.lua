-- Tests for lua/mcp.lua (the MCP client) with a fake `proc`: the lifecycle
-- and message order, a server's own requests and notifications, pagination,
-- messages split across reads, refusals (protocol version, cursors), config
-- checks, tool names and schemas. Plain Lua 5.4 with lua-cjson.
--
--   lua5.4 tests/tools/test_mcp.lua        (from any directory)
local script = arg and arg[0] or "tests/tools/test_mcp.lua"
local repo = script:match("^(.*)/tests/tools/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. repo .. "/lua/?/init.lua;" .. package.path
local cjson = require "cjson"
package.preload["json"] = function() return { encode = cjson.encode, decode = cjson.decode, null = cjson.null } end
package.cpath = package.cpath .. ";" .. repo .. "/build/?.so" -- the native fs module
package.preload["http"] = function() return {} end
package.preload["sandbox"] = function() return {} end
package.preload["activity"] = function() return { heartbeat = function() end } end

-- The fake program: each line the client writes goes to `script.on(msg)`,
-- which returns the lines the server writes back; `chunk` splits them into
-- reads of that many bytes (so a message can arrive in pieces).
local script_ = {}
local written, opened = {}, nil
package.preload["proc"] = function()
  return { open = function(opts)
    opened = opts
    local out, closed = "", false
    local h = {}
    function h:write(data)
      for line in data:gmatch("([^\n]*)\n") do
        local msg = cjson.decode(line)
        written[#written + 1] = msg
        for _, reply in ipairs(script_.on(msg) or {}) do out = out .. reply .. "\n" end
      end
      return true
    end
    function h:read()
      if out == "" then return nil, script_.hang and "timeout" or "eof" end
      local n = script_.chunk or #out
      local c = out:sub(1, n)
      out = out:sub(n + 1)
      return c
    end
    function h:stderr() return "last words\n" end
    function h:close() closed = true; script_.closed = true end
    return h
  end }
end

local mcp = require "mcp"
local FAILS, N = 0, 0
local function check(what, cond, detail)
  N = N + 1
  if cond then print("ok - " .. what) else FAILS = FAILS + 1; print("FAIL: " .. what .. (detail and (": " .. tostring(detail)) or "")) end
end
local function raises(fn)
  local ok, e = pcall(fn)
  if ok then return nil end
  return type(e) == "table" and e.message or tostring(e)
end

local function server(pages, extra)
  return function(msg)
    if msg.method == "initialize" then
      return { cjson.encode({ jsonrpc = "2.0", id = msg.id, result = { protocolVersion = (extra and extra.version) or
        "2025-06-18", capabilities = {}, serverInfo = { name = "t" } } }) }
    elseif msg.method == "tools/list" then
      script_.pages = (script_.pages or 0) + 1
      local i = script_.pages
      local r = { tools = pages[i] }
      if pages[i + 1] then r.nextCursor = (extra and extra.cursor) or tostring(i + 1) end
      return {
        -- before the answer: a notification and a request of the server's own
        cjson.encode({ jsonrpc = "2.0", method = "notifications/message", params = { level = "info" } }),
        cjson.encode({ jsonrpc = "2.0", id = "srv-1", method = "ping" }),
        cjson.encode({ jsonrpc = "2.0", id = msg.id, result = r }) }
    end
  end
end
local CFG = { command = "/usr/bin/srv", args = { "--x" }, timeoutSeconds = 5 }
local T1 = { name = "a", inputSchema = { type = "object" } }
local T2 = { name = "b", inputSchema = { type = "object" } }

-- the lifecycle, a server's ping answered, notifications skipped, two pages
written, script_ = {}, { on = server({ { T1 }, { T2 } }) }
local tools = mcp.list_tools("srv", CFG)
check("two pages of tools", #tools == 2 and tools[1].name == "a" and tools[2].name == "b")
local methods = {}
for _, m in ipairs(written) do methods[#methods + 1] = m.method or ("reply:" .. tostring(m.id)) end
check("initialize, initialized, then the pages; the server's ping answered",
  table.concat(methods, " ") == "initialize notifications/initialized tools/list reply:srv-1 tools/list reply:srv-1",
  table.concat(methods, " "))
check("the ping's answer is an empty result", written[4].result and next(written[4].result) == nil)
check("initialize names the protocol version", written[1].params.protocolVersion == "2025-06-18")
check("the initialized notification has no id", written[2].id == nil)
check("the second page asks for the cursor", written[5].params.cursor == "2")
check("the program was stopped", script_.closed)
check("argv is the command and its args", opened.argv[1] == "/usr/bin/srv" and opened.argv[2] == "--x")
check("env holds PATH and nothing else", #opened.env == 1 and opened.env[1]:match("^PATH="))

-- messages cut into 7-byte reads
written, script_ = {}, { on = server({ { T1 } }), chunk = 7 }
check("a message split across reads is joined", #mcp.list_tools("srv", CFG) == 1)

-- refusals
written, script_ = {}, { on = server({ { T1 } }, { version = "1999-01-01" }) }
check("an unknown protocol version is refused", (raises(function() mcp.list_tools("srv", CFG) end) or ""):find(
  "speaks protocol version 1999-01-01", 1, true))
check("... and the program stopped", script_.closed)
written, script_ = {}, { on = server({ { T1 }, { T2 }, { T1 } }, { cursor = "same" }) }
check("a repeated cursor is refused", (raises(function() mcp.list_tools("srv", CFG) end) or ""):find(
  "bad or repeated nextCursor", 1, true))
written, script_ = {}, { on = function() return {} end, hang = true }
check("a silent server times out", (raises(function() mcp.list_tools("srv", CFG) end) or ""):find(
  "did not answer in time", 1, true))
written, script_ = {}, { on = function() return {} end }
local e = raises(function() mcp.list_tools("srv", CFG) end) or ""
check("a server that ends says so, with its stderr", e:find("exited before it answered", 1, true) and e:find("last words", 1, true), e)
written, script_ = {}, { on = function(m)
  return { cjson.encode({ jsonrpc = "2.0", id = m.id, error = { code = -32602, message = "no" } }) } end }
check("a JSON-RPC error names the method, code and message", (raises(function() mcp.list_tools("srv", CFG) end) or ""):find(
  "answered initialize with JSON-RPC error -32602: no", 1, true))

written, script_ = {}, { on = function()
  return { cjson.encode({ jsonrpc = "2.0", id = cjson.null, error = { code = -32700, message = "parse error" } }) } end }
check("an error with a null id is the request's", (raises(function() mcp.list_tools("srv", CFG) end) or ""):find(
  "JSON-RPC error -32700: parse error", 1, true))

-- tool calls: content kinds
written, script_ = {}, { on = function(m)
  if m.method == "initialize" then return server({})(m) end
  if m.method == "tools/call" then
    return { cjson.encode({ jsonrpc = "2.0", id = m.id, result = { isError = true, content = {
      { type = "text", text = "one" }, { type = "image", mimeType = "image/png", data = "AAAA" },
      { type = "resource_link", uri = "file:///x" }, { type = "resource", resource = { uri = "u", text = "inline" } },
      { type = "video" } } } }) }
  end
end }
local r = mcp.call_tool("srv", CFG, "t", {})
check("isError is kept", r.is_error == true)
check("text items as they are, others summarised", r.text == "one\n[image image/png, 4 bytes base64]\n[resource link file:///x]\ninline\n[content of type video]", r.text)
check("tools/call names the tool, arguments an object", written[3].params.name == "t" and cjson.encode(written[3].params.arguments) == "{}")

-- configuration
local old_getenv = os.getenv
os.getenv = function(k)
  if k == "ENGINE_MCP_ALLOW" then return "/usr/bin/srv, https://mcp.example/" end
  if k == "GOOD_CRED" then return "value-of-good-cred" end
  return old_getenv(k)
end
local servers, problems = mcp.check_servers({ ok = { command = "/usr/bin/srv", env_from_credentials = { TOKEN = "GOOD_CRED" } },
  web = { url = "https://mcp.example/mcp", headers_from_credentials = { Authorization = "Bearer ${GOOD_CRED}" } } })
check("valid servers pass", #problems == 0, table.concat(problems, "; "))
check("the config keeps the credential's name", servers.ok.env.TOKEN == "GOOD_CRED")
check("secrets() gives the values to redact", table.concat(mcp.secrets(servers.web)) == "value-of-good-cred")
local function problems_of(t) local _, p = mcp.check_servers(t); return table.concat(p, "; ") end
check("not allowed", problems_of({ s = { command = "/bin/sh" } }):find("/bin/sh is not allowed by ENGINE_MCP_ALLOW", 1, true))
check("a URL prefix ending at a boundary matches", mcp.allowed("https://mcp.example:8443/x", "https://mcp.example")
  and mcp.allowed("https://mcp.example/mcp", "https://mcp.example") and mcp.allowed("http://127.0.0.1:99/", "http://127.0.0.1:"))
check("a URL prefix does not stretch to a longer host name", not mcp.allowed("https://mcp.example.evil/", "https://mcp.example"))
check("commands match exactly", not mcp.allowed("/usr/bin/srv2", "/usr/bin/srv") and mcp.allowed("/usr/bin/srv", "/usr/bin/srv"))
check("no ENGINE_MCP_ALLOW allows nothing", not mcp.allowed("/usr/bin/srv", ""))
check("a URL prefix does not stretch to another host",
  problems_of({ s = { url = "https://mcp.example.evil/" } }):find("not allowed", 1, true))
check("an unset credential", problems_of({ s = { command = "/usr/bin/srv", env_from_credentials = { X = "NOPE" } } })
  :find("credential NOPE is not set", 1, true))
check("PATH cannot be set", problems_of({ s = { command = "/usr/bin/srv", env_from_credentials = { PATH = "GOOD_CRED" } } })
  :find("'PATH' is not VAR: CREDENTIAL", 1, true))
check("unknown field", problems_of({ s = { command = "/usr/bin/srv", cwd = "/" } }):find("unknown field 'mcpServers.s.cwd'", 1, true))
check("names with '__'", problems_of({ ["a__b"] = { command = "/usr/bin/srv" } }):find("no '__'", 1, true))
check("userinfo in a URL", problems_of({ s = { url = "https://u:p@mcp.example/" } }):find("must not carry credentials", 1, true))
os.getenv = old_getenv

-- tool names and schemas
local d = mcp.check_tool("srv", { name = "admin.tools.list", inputSchema = { type = "object", required = {} } })
check("a dotted name becomes mcp__srv__admin_tools_list", d and d.name == "mcp__srv__admin_tools_list")
check("an empty required list is dropped", d and d.parameters.required == nil)
local _, why = mcp.check_tool("srv", { name = string.rep("x", 60), inputSchema = { type = "object" } })
check("a name too long for model APIs", why and why:find("longer than 64 bytes", 1, true), why)
_, why = mcp.check_tool("srv", { name = "a b", inputSchema = { type = "object" } })
check("a name with a space", why and why:find("is not letters", 1, true))
_, why = mcp.check_tool("srv", { name = "a", inputSchema = { type = "array" } })
check("a schema that is not of type object", why and why:find("not a JSON schema of type object", 1, true))
_, why = mcp.check_tool("srv", { name = "a", inputSchema = { type = "object", description = string.rep("x", 70000) } })
check("a schema too large", why and why:find("at most 65536 bytes", 1, true))
check("invalid UTF-8 is replaced", mcp.utf8_clean("a\255b\226\130") == "a\u{FFFD}b\u{FFFD}\u{FFFD}")

-- the policies see an MCP tool as trusted-side and writing, with its server
local req = require("tools").policy_request("mcp__srv__echo", {}, {})
check("policy request of an MCP tool", req.side == "trusted" and req.writes == true and req.mcp.server == "srv")

print(string.format("%d checks, %d failed", N, FAILS))
os.exit(FAILS == 0 and 0 or 1)
