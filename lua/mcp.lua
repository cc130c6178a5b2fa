-- An MCP (Model Context Protocol) client for activities: JSON-RPC 2.0 over
-- stdio (a child process on the loop, proc.open) or Streamable HTTP (http,
-- POST per message; a JSON or an SSE answer; Mcp-Session-Id kept), the
-- lifecycle (initialize, notifications/initialized) and the tools methods.
-- It runs on the trusted side only: never in the sandbox.
--
--   local mcp = require "mcp"
--   mcp.check_servers(t)                 -> {name = config}, problems
--   mcp.list_tools(name, config)         -> {{name, description, inputSchema}} (raises {type=, message=})
--   mcp.call_tool(name, config, tool, args) -> {text=, is_error=} (raises {type=, message=})
--   mcp.secrets(config)                  -> the credential values the config uses (for redaction)
--
-- One connection per operation: listing at prepare time and each tool call
-- start the server (or an HTTP session), initialize, do their one thing and
-- stop it. Activities run at least once, on any worker and after any crash,
-- and a session can wait days for an approval between two calls; a
-- connection that outlived its activity would need liveness checks and
-- reconnection to be right, and a per-call child can never leak or carry
-- state from one call into another. The price is a start-up per call.
local json = require "json"

local M = {}

M.PROTOCOL_VERSION = "2025-06-18"
M.SUPPORTED = { ["2025-11-25"] = true, ["2025-06-18"] = true, ["2025-03-26"] = true, ["2024-11-05"] = true }
M.MAX_MESSAGE = 8 << 20 -- bytes of one message from a server
M.MAX_TOOLS = 256       -- tools of one server
M.MAX_PAGES = 64        -- tools/list pages
M.MAX_NAME = 64         -- bytes of mcp__SERVER__TOOL (what model APIs accept)
M.DEFAULT_TIMEOUT = 60  -- seconds per request
M.LIST_TIMEOUT = 15     -- seconds per request while listing (prepare has 60 s for every server)
M.MAX_SCHEMA = 64 << 10 -- bytes of one tool's input schema
M.MAX_SERVERS = 8       -- servers of one session
M.LIST_BUDGET = 40      -- seconds for listing every server at prepare time

local SERVER_FIELDS = { command = 1, args = 1, env_from_credentials = 1, url = 1, headers_from_credentials = 1,
  timeoutSeconds = 1, tools = 1 }

local function raise(type_, message) error({ type = type_, message = message }, 0) end

-- Bytes of text that are not UTF-8 become U+FFFD: history and the model get
-- valid text whatever the server wrote.
function M.utf8_clean(s)
  if utf8.len(s) then return s end
  local out, i, n = {}, 1, #s
  while i <= n do
    local len, bad = utf8.len(s, i)
    if len then out[#out + 1] = s:sub(i); break end
    out[#out + 1] = s:sub(i, bad - 1) .. "\u{FFFD}"
    i = bad + 1
  end
  return table.concat(out)
end

local function excerpt(s, n)
  n = n or 200
  s = M.utf8_clean(tostring(s)):gsub("[%c]", " ")
  if #s > n then s = s:sub(1, n) .. "..." end
  return s
end

-- ---------------------------------------------------------- configuration --

local function credential(name) return require("runners.common").credential(name) end

-- A header or env value: "${NAME}" parts are replaced by credential NAME; a
-- value without "${" is the name of a credential used as it is.
local function expand(template)
  if not template:find("${", 1, true) then return credential(template), { template } end
  local names = {}
  local v = template:gsub("%${([%w_%-%.]+)}", function(n) names[#names + 1] = n; return credential(n) or "" end)
  return v, names
end

local strip_empty_lists

local function is_list(v) return type(v) == "table" and (next(v) == nil or v[1] ~= nil) end

-- Validates input.mcpServers; returns the configs (copied, nothing but
-- names of credentials in them) and a list of problems.
function M.check_servers(t)
  local problems, out = {}, {}
  local function bad(fmt, ...) problems[#problems + 1] = string.format(fmt, ...) end
  if type(t) ~= "table" or is_list(t) and next(t) ~= nil then
    return {}, { "mcpServers must be an object {name: {command=, args=} | {url=}}" }
  end
  local allowed = os.getenv("ENGINE_MCP_ALLOW") or ""
  for name, c in pairs(t) do
    local where = "mcpServers." .. tostring(name)
    if type(name) ~= "string" or not name:match("^[%w][%w_%-]*$") or name:find("__", 1, true) or name:sub(-1) == "_"
        or #name > 32 then
      bad("MCP server name '%s' must be 1-32 letters, digits, '-' or '_' (no '__', not ending in '_')", excerpt(name, 40))
    elseif type(c) ~= "table" then
      bad("%s must be an object", where)
    else
      for k in pairs(c) do
        if not SERVER_FIELDS[k] then bad("unknown field '%s.%s'", where, tostring(k)) end
      end
      local cfg = { timeoutSeconds = c.timeoutSeconds or M.DEFAULT_TIMEOUT }
      if type(cfg.timeoutSeconds) ~= "number" or cfg.timeoutSeconds <= 0 or cfg.timeoutSeconds > 900 then
        bad("%s.timeoutSeconds must be a number of seconds from 0 to 900", where)
      end
      if (c.command ~= nil) == (c.url ~= nil) then
        bad("%s needs either command (stdio) or url (Streamable HTTP)", where)
      elseif c.command ~= nil then
        if type(c.command) ~= "string" or c.command == "" then bad("%s.command must be a string", where) end
        if c.args ~= nil and (not is_list(c.args) or #c.args > 64) then bad("%s.args must be a list of strings", where) end
        for _, a in ipairs(is_list(c.args) and c.args or {}) do
          if type(a) ~= "string" then bad("%s.args must be a list of strings", where) break end
        end
        cfg.command, cfg.args = c.command, c.args or {}
        local env = c.env_from_credentials
        if env ~= nil then
          if type(env) ~= "table" then bad("%s.env_from_credentials must be {VAR: CREDENTIAL}", where) else
            cfg.env = {}
            for k, v in pairs(env) do
              if is_list(env) then k = v end -- a list of names: the variable is named like its credential
              if type(k) ~= "string" or not k:match("^[%a_][%w_]*$") or k == "PATH" or type(v) ~= "string" then
                bad("%s.env_from_credentials: '%s' is not VAR: CREDENTIAL", where, excerpt(k, 40))
              else
                cfg.env[k] = v
                if not expand(v) then bad("%s: credential %s is not set", where, excerpt(v, 60)) end
              end
            end
          end
        end
      else
        if type(c.url) ~= "string" or not c.url:match("^https?://[^%s]+$") then
          bad("%s.url must be an http(s) URL", where)
        elseif c.url:match("^https?://[^/]*@") then
          bad("%s.url must not carry credentials (use headers_from_credentials)", where)
        end
        cfg.url = c.url
        local h = c.headers_from_credentials
        if h ~= nil then
          if type(h) ~= "table" or is_list(h) and next(h) ~= nil then
            bad("%s.headers_from_credentials must be {Header: CREDENTIAL or template}", where)
          else
            cfg.headers = {}
            for k, v in pairs(h) do
              if type(k) ~= "string" or not k:match("^[%w%-]+$") or type(v) ~= "string" then
                bad("%s.headers_from_credentials: '%s' is not Header: CREDENTIAL", where, excerpt(k, 40))
              else
                cfg.headers[k] = v
                if not expand(v) then bad("%s: credential %s is not set", where, excerpt(v, 60)) end
              end
            end
          end
        end
      end
      if c.tools ~= nil then
        if not is_list(c.tools) then bad("%s.tools must be a list of tool names", where) else cfg.tools = c.tools end
      end
      -- the engine's operator decides which programs and hosts a session may name
      local target = cfg.command or cfg.url
      if type(target) == "string" and not M.allowed(target, allowed) then
        bad("%s: %s is not allowed by ENGINE_MCP_ALLOW", where, excerpt(target, 120))
      end
      out[name] = cfg
    end
  end
  return out, problems
end

-- ENGINE_MCP_ALLOW: comma-separated commands (exact) and URL prefixes; "*" allows any.
-- Without it no server can be named: a session's input must not be able to
-- run programs or reach hosts on the trusted side unless the operator says so.
function M.allowed(target, spec)
  for entry in spec:gmatch("[^,]+") do
    entry = entry:match("^%s*(.-)%s*$")
    if entry == "*" or entry == target then return true end
    -- a URL prefix ends at a boundary: "https://mcp.example" is not "https://mcp.example.evil"
    if entry:match("^https?://") and target:sub(1, #entry) == entry and
        (entry:match("[/:]$") or target:sub(#entry + 1, #entry + 1):match("^[/:?#]?$")) then
      return true
    end
  end
  return false
end

function M.secrets(cfg)
  local out = {}
  for _, t in ipairs({ cfg.env or {}, cfg.headers or {} }) do
    for _, v in pairs(t) do
      local _, names = expand(v)
      for _, n in ipairs(names) do
        local s = credential(n)
        if s then out[#out + 1] = s end
      end
    end
  end
  return out
end

-- ------------------------------------------------------------- transports --

local function message_of(obj)
  local ok, s = pcall(json.encode, obj)
  if not ok then raise("McpError", "cannot encode a request: " .. tostring(s)) end
  return s
end

local function too_large(name)
  raise("McpError", string.format("MCP server %s sent a message larger than %d bytes; it was dropped",
    name, M.MAX_MESSAGE))
end

-- A stdio connection: newline-delimited JSON-RPC on the child's stdin/stdout.
local function stdio_open(name, cfg)
  local env = { "PATH=" .. (os.getenv("PATH") or "/usr/bin:/bin") }
  for k, v in pairs(cfg.env or {}) do env[#env + 1] = k .. "=" .. (expand(v) or "") end
  table.sort(env)
  local argv = { cfg.command }
  for _, a in ipairs(cfg.args or {}) do argv[#argv + 1] = a end
  local ok, h = pcall(require("proc").open, { argv = argv, env = env, max_buffer = 1 << 20 })
  if not ok then
    raise("McpError", "MCP server " .. name .. ": " .. (type(h) == "table" and tostring(h.message) or tostring(h)))
  end
  local conn, buf = { name = name }, ""
  local function died(what)
    local tail = h:stderr():match("([^\n]+)\n?$")
    return "MCP server " .. name .. " " .. what .. (tail and ("; its stderr ends: " .. excerpt(tail)) or "")
  end
  function conn.send(msg)
    local okw, why = h:write(message_of(msg) .. "\n")
    if not okw then raise("McpError", died("cannot be written to (" .. tostring(why) .. ")")) end
  end
  -- The next message, or raises: garbage, too large, the end, the deadline.
  function conn.receive(deadline)
    while true do
      local nl = buf:find("\n", 1, true)
      if nl then
        local line = buf:sub(1, nl - 1)
        buf = buf:sub(nl + 1)
        if line:match("%S") then
          local okd, msg = pcall(json.decode, line)
          if not okd or type(msg) ~= "table" or msg.jsonrpc ~= "2.0" then
            raise("McpError", "MCP server " .. name .. " wrote something that is not JSON-RPC on stdout: " ..
              excerpt(line, 120))
          end
          return msg
        end
      else
        -- A partial line: its chunks are kept apart and joined once it ends,
        -- and only the new chunk is searched: appending to buf and searching
        -- it all again was quadratic (0.25 s of copying for 8 MB in 64 KB
        -- reads, several times that under ASan, inside the server's timeout).
        local parts, size = { buf }, #buf
        repeat
          if size > M.MAX_MESSAGE then too_large(name) end
          local left = deadline - os.time()
          if left <= 0 then raise("McpTimeout", "MCP server " .. name .. " did not answer in time; it was stopped") end
          local chunk, why = h:read(left)
          if not chunk and why == "timeout" then
            raise("McpTimeout", "MCP server " .. name .. " did not answer in time; it was stopped")
          elseif not chunk then
            raise("McpError", died("exited before it answered"))
          end
          parts[#parts + 1], size = chunk, size + #chunk
        until chunk:find("\n", 1, true)
        buf = table.concat(parts)
      end
    end
  end
  function conn.close() h:close() end
  return conn
end

-- A Streamable HTTP connection: each message is a POST; a request's answer
-- is one JSON object or an SSE stream that carries it.
local function http_open(name, cfg)
  local http = require "http"
  local sse = require("runners.common").sse_parser
  local conn, session_id, version, inbox = { name = name }, nil, nil, {}
  local function headers()
    local h = { ["Content-Type"] = "application/json", ["Accept"] = "application/json, text/event-stream" }
    for k, v in pairs(cfg.headers or {}) do h[k] = expand(v) end
    if session_id then h["Mcp-Session-Id"] = session_id end
    if version then h["MCP-Protocol-Version"] = version end
    return h
  end
  local deadline_of = os.time() + cfg.timeoutSeconds
  function conn.send(msg, deadline)
    deadline = deadline or deadline_of
    local left = math.max(1, deadline - os.time())
    local ok, res = pcall(http.request, { url = cfg.url, method = "POST", headers = headers(), body = message_of(msg),
      timeout = left, connect_timeout = math.min(left, 10), stream = true })
    if not ok then
      local e = type(res) == "table" and res or { type = "McpError", message = tostring(res) }
      raise(e.type == "Timeout" and "McpTimeout" or "McpError", "MCP server " .. name .. ": " .. tostring(e.message))
    end
    local sid = res.headers["mcp-session-id"]
    if sid and not session_id then session_id = sid end
    if msg.method == "initialize" and not sid then session_id = nil end
    local ctype = (res.headers["content-type"] or ""):lower()
    local function read_all()
      local parts, n = {}, 0
      while true do
        local okr, chunk = pcall(res.read, res)
        if not okr then raise("McpError", "MCP server " .. name .. ": " .. tostring(type(chunk) == "table" and chunk.message or chunk)) end
        if not chunk then break end
        n = n + #chunk
        if n > M.MAX_MESSAGE then
          res:close()
          too_large(name)
        end
        parts[#parts + 1] = chunk
      end
      return table.concat(parts)
    end
    local function take(text)
      local okd, m = pcall(json.decode, text)
      if not okd or type(m) ~= "table" then
        raise("McpError", "MCP server " .. name .. " answered something that is not JSON-RPC: " .. excerpt(text, 120))
      end
      if m[1] ~= nil then for _, x in ipairs(m) do inbox[#inbox + 1] = x end else inbox[#inbox + 1] = m end
    end
    if res.status == 202 then res:close() return end
    if res.status >= 400 then
      local body = read_all()
      raise("McpError", string.format("MCP server %s answered HTTP %d: %s", name, res.status, excerpt(body, 200)))
    end
    if ctype:find("text/event-stream", 1, true) then
      local p, total = sse(), 0
      while true do
        local okr, chunk = pcall(res.read, res)
        if not okr then raise("McpError", "MCP server " .. name .. ": the stream broke: " .. tostring(type(chunk) == "table" and chunk.message or chunk)) end
        if not chunk then break end
        total = total + #chunk
        if total > M.MAX_MESSAGE then
          res:close()
          too_large(name)
        end
        local got = false
        for _, ev in ipairs(p.feed(chunk)) do
          if ev.data ~= "" then take(ev.data) got = true end
        end
        -- the answer to this request ends what we need of the stream
        if got and msg.id ~= nil then
          for _, m in ipairs(inbox) do if m.id == msg.id and m.method == nil then res:close() return end end
        end
      end
      for _, ev in ipairs(p.finish()) do if ev.data ~= "" then take(ev.data) end end
    else
      local body = read_all()
      if body:match("%S") then take(body) end
    end
  end
  function conn.receive()
    local m = table.remove(inbox, 1)
    if not m then raise("McpError", "MCP server " .. name .. " ended its answer without a JSON-RPC response") end
    if type(m) ~= "table" or m.jsonrpc ~= "2.0" then
      raise("McpError", "MCP server " .. name .. " answered something that is not JSON-RPC")
    end
    return m
  end
  function conn.set_version(v) version = v end
  function conn.close()
    -- ends the server's session; its answer does not matter
    if session_id then pcall(http.request, { url = cfg.url, method = "DELETE", headers = headers(), timeout = 5 }) end
  end
  conn.http = true
  return conn
end

-- ---------------------------------------------------------------- JSON-RPC --

local Client = {}
Client.__index = Client

local function open(name, cfg)
  local conn = cfg.command and stdio_open(name, cfg) or http_open(name, cfg)
  return setmetatable({ conn = conn, name = name, cfg = cfg, next_id = 0 }, Client)
end

-- Sends a request and returns its result; the server's own requests are
-- answered (ping: {}, anything else: method not found) and its
-- notifications ignored meanwhile. A JSON-RPC error raises McpError naming
-- the code and the message.
function Client:request(method, params)
  self.next_id = self.next_id + 1
  local id = self.next_id
  local deadline = math.min(os.time() + math.ceil(self.cfg.timeoutSeconds), self.deadline or math.huge)
  local msg = { jsonrpc = "2.0", id = id, method = method, params = params }
  self.conn.send(msg, deadline)
  while true do
    local m = self.conn.receive(deadline)
    if m.method ~= nil and m.id ~= nil then
      local reply = m.method == "ping" and { jsonrpc = "2.0", id = m.id, result = {} }
        or { jsonrpc = "2.0", id = m.id, error = { code = -32601, message = "method not found" } }
      self.conn.send(reply, deadline)
    elseif m.method == nil and (m.id == id or (m.id == json.null and m.error ~= nil)) then
      -- an error with a null id: the server could not read the request
      if m.error ~= nil then
        local e = type(m.error) == "table" and m.error or {}
        raise("McpError", string.format("MCP server %s answered %s with JSON-RPC error %s: %s", self.name, method,
          tostring(math.tointeger(e.code) or e.code), excerpt(e.message or "", 500)))
      end
      if type(m.result) ~= "table" then
        raise("McpError", "MCP server " .. self.name .. " answered " .. method .. " without a result object")
      end
      return m.result
    end
    -- notifications (progress, logging) and stray answers: not ours
  end
end

function Client:notify(method, params)
  self.conn.send({ jsonrpc = "2.0", method = method, params = params })
end

function Client:initialize()
  local r = self:request("initialize", { protocolVersion = M.PROTOCOL_VERSION, capabilities = {},
    clientInfo = { name = "engine", version = "1" } })
  if type(r.protocolVersion) ~= "string" or not M.SUPPORTED[r.protocolVersion] then
    raise("McpError", "MCP server " .. self.name .. " speaks protocol version " .. excerpt(r.protocolVersion, 40) ..
      ", which the engine does not")
  end
  if self.conn.set_version then self.conn.set_version(r.protocolVersion) end
  self:notify("notifications/initialized")
end

function Client:close() pcall(self.conn.close) end

-- Runs fn(client) on an initialized connection, which is closed on every path.
local function with_client(name, cfg, fn)
  local c = open(name, cfg)
  -- every request of the operation shares the time: a server answering each
  -- page just in time cannot stretch a listing past it
  c.deadline = os.time() + math.ceil(cfg.timeoutSeconds)
  local ok, r = pcall(function()
    c:initialize()
    return fn(c)
  end)
  c:close()
  if not ok then error(r, 0) end
  return r
end

-- --------------------------------------------------------------- the tools --

-- Every tool of a server (tools/list, following nextCursor), checked: names,
-- count, input schemas.
function M.list_tools(name, cfg, budget)
  local quick = setmetatable({ timeoutSeconds = math.min(cfg.timeoutSeconds or M.LIST_TIMEOUT, budget or M.LIST_TIMEOUT,
    M.LIST_TIMEOUT) }, { __index = cfg })
  return with_client(name, quick, function(c)
    local out, cursor, seen = {}, nil, {}
    for _ = 1, M.MAX_PAGES do
      local r = c:request("tools/list", cursor and { cursor = cursor } or {})
      if not is_list(r.tools) then raise("McpError", "MCP server " .. name .. ": tools/list gave no list of tools") end
      for _, t in ipairs(r.tools) do
        if #out >= M.MAX_TOOLS then
          raise("McpError", string.format("MCP server %s lists more than %d tools", name, M.MAX_TOOLS))
        end
        out[#out + 1] = t
      end
      cursor = r.nextCursor
      if cursor == nil or cursor == json.null then return out end
      if type(cursor) ~= "string" or seen[cursor] then
        raise("McpError", "MCP server " .. name .. ": tools/list gave a bad or repeated nextCursor")
      end
      seen[cursor] = true
    end
    raise("McpError", string.format("MCP server %s: tools/list has more than %d pages", name, M.MAX_PAGES))
  end)
end

-- The session-level name of a server's tool (dots, which model APIs refuse, become '_').
function M.full_name(server, tool) return "mcp__" .. server .. "__" .. tool:gsub("%.", "_") end

-- A decoded empty JSON list is an empty table, which encodes as {}: a schema
-- with "required": [] would reach the model API as "required": {}, which it
-- refuses. Empty lists are dropped (they constrain nothing).
local LIST_KEYS = { required = true, examples = true, enum = false }
strip_empty_lists = function(v, depth)
  if type(v) ~= "table" or depth > 32 then return v end
  local out = {}
  for k, x in pairs(v) do
    if not (LIST_KEYS[k] and type(x) == "table" and next(x) == nil) then out[k] = strip_empty_lists(x, depth + 1) end
  end
  return out
end

-- Checks a listed tool; returns the definition the model is offered (and the
-- call needs), or nil and the problem.
function M.check_tool(server, t)
  if type(t) ~= "table" then return nil, "a listed tool is not an object" end
  local n = t.name
  if type(n) ~= "string" or not n:match("^[%w_%-%.]+$") then
    return nil, "tool name '" .. excerpt(n, 60) .. "' is not letters, digits, '_', '-' or '.'"
  end
  local full = M.full_name(server, n)
  if #full > M.MAX_NAME then
    return nil, string.format("tool name '%s' makes %s, longer than %d bytes", n, full, M.MAX_NAME)
  end
  local s = t.inputSchema
  if type(s) ~= "table" or s.type ~= "object" then
    return nil, "tool " .. n .. ": inputSchema is not a JSON schema of type object"
  end
  local oke, encoded = pcall(json.encode, s)
  if not oke or #encoded > M.MAX_SCHEMA or not utf8.len(encoded) then
    return nil, string.format("tool %s: inputSchema is not valid UTF-8 JSON of at most %d bytes", n, M.MAX_SCHEMA)
  end
  s = strip_empty_lists(s, 0)
  -- The engine's validator knows a subset of JSON Schema; a schema beyond it
  -- (anyOf, $ref: common in servers' generated schemas) is still offered,
  -- the arguments must then be an object and the server checks the rest.
  local checked = require("jsonschema").check_schema(s, "inputSchema") == true
  local desc = type(t.description) == "string" and t.description or ""
  desc = require("tools.common").sanitize(M.utf8_clean(desc))
  if #desc > 4000 then desc = desc:sub(1, 4000) end
  return { name = full, description = "[MCP server " .. server .. "] " .. desc, parameters = s, tool = n,
    server = server, checked = checked }
end

-- The text of a tools/call result: text items as they are, other kinds
-- summarised; structuredContent when there is no text.
local function result_text(r)
  local parts = {}
  for _, item in ipairs(is_list(r.content) and r.content or {}) do
    local kind = type(item) == "table" and item.type or nil
    if kind == "text" and type(item.text) == "string" then
      parts[#parts + 1] = item.text
    elseif kind == "image" or kind == "audio" then
      parts[#parts + 1] = string.format("[%s %s, %d bytes base64]", kind, excerpt(item.mimeType or "?", 60),
        type(item.data) == "string" and #item.data or 0)
    elseif kind == "resource_link" then
      parts[#parts + 1] = string.format("[resource link %s]", excerpt(item.uri or "?", 300))
    elseif kind == "resource" and type(item.resource) == "table" then
      local res = item.resource
      if type(res.text) == "string" then parts[#parts + 1] = res.text
      else parts[#parts + 1] = string.format("[resource %s]", excerpt(res.uri or "?", 300)) end
    else
      parts[#parts + 1] = "[content of type " .. excerpt(kind, 40) .. "]"
    end
  end
  if #parts == 0 and type(r.structuredContent) == "table" then
    local ok, s = pcall(json.encode, r.structuredContent)
    if ok then parts[1] = s end
  end
  return table.concat(parts, "\n")
end

function M.call_tool(name, cfg, tool, args)
  return with_client(name, cfg, function(c)
    local r = c:request("tools/call", { name = tool, arguments = args or {} })
    return { text = M.utf8_clean(result_text(r)), is_error = r.isError == true }
  end)
end

return M
