-- The tool registry: an explicit list of the tools that exist. A session
-- offers the model only the tools named in permissions.tools (the
-- allowlist); every call is validated against the tool's JSON schema before
-- anything runs, trusted-side results are sanitized and sandbox-side results
-- redacted (common.redact).
--
--   local tools = require "tools"
--   tools.load_all()                     -> {name = tool}  (raises on a broken tool module)
--   tools.names()                        -> every tool name, in registry order
--   tools.definitions(allowlist)         -> {{name, description, parameters}} in allowlist order
--   tools.validate(name, args, allowlist)-> tool | nil, err_type, message
--                                           err_type: "UnknownTool" | "NotAllowed" | "InvalidArguments"
--   tools.run(name, ctx, args)           -> {ok=true, content=, data=} | {ok=false, error={type=, message=}, content=}
--   tools.policy_request(name, args, ctx)-> the request policies decide on (see lua/policy.lua)
--
-- A tool module (lua/tools/<name>.lua) returns {name, description, parameters
-- (a JSON schema of type object, additionalProperties false), side =
-- "sandbox"|"trusted", publishes = bool, writes = bool, run = function(ctx,
-- args) -> {content = "text for the model", data = optional}, execs = true
-- when it runs a process in the sandbox}. Calls of tools that exec run one at
-- a time in a session, the others of a turn at once: each exec's clean-up
-- ends every process of the sandbox's user (lua/docker.lua), a concurrent
-- exec's too. ctx =
-- {sandbox, permissions = {tools, networkAllowlist, writablePaths,
-- requiresApproval}, limits, session_id, config = {reviews_dir, publish_url}}.
-- Tools raise {type=, message=} tables for errors.
local jsonschema = require "jsonschema"
local common = require "tools.common"

local M = {}

-- The allowlist of tools that exist at all; nothing else is ever loaded.
M.NAMES = { "read_file", "list_files", "search", "shell", "write_file", "run_tests", "http_fetch", "publish_review",
  "propose_memory" }

local loaded

local function check_tool(name, t)
  local problems = {}
  local function bad(msg) problems[#problems + 1] = msg end
  if type(t) ~= "table" then return { "the module does not return a table" } end
  if t.name ~= name then bad("name is " .. tostring(t.name) .. ", expected " .. name) end
  if type(t.description) ~= "string" or t.description == "" then bad("description is missing") end
  if t.side ~= "sandbox" and t.side ~= "trusted" then bad("side must be \"sandbox\" or \"trusted\"") end
  if type(t.publishes) ~= "boolean" then bad("publishes must be a boolean") end
  if type(t.writes) ~= "boolean" then bad("writes must be a boolean") end
  if t.execs ~= nil and type(t.execs) ~= "boolean" then bad("execs must be a boolean") end
  if type(t.run) ~= "function" then bad("run must be a function") end
  local p = t.parameters
  if type(p) ~= "table" or p.type ~= "object" then
    bad("parameters must be a JSON schema of type object")
  else
    if p.additionalProperties ~= false then bad("parameters.additionalProperties must be false") end
    local ok, errs = jsonschema.check_schema(p, "parameters")
    if not ok then bad(table.concat(errs, "; ")) end
  end
  return problems
end
M.check_tool = check_tool

-- Loads (once) and checks every tool module. Returns {name = tool}.
function M.load_all()
  if loaded then return loaded end
  local all = {}
  for _, name in ipairs(M.NAMES) do
    local ok, t = pcall(require, "tools." .. name)
    if not ok then error({ type = "ToolLoadError", message = "tools/" .. name .. ".lua: " .. tostring(t) }, 0) end
    local problems = check_tool(name, t)
    if #problems > 0 then
      error({ type = "ToolLoadError", message = "tools/" .. name .. ".lua: " .. table.concat(problems, "; ") }, 0)
    end
    all[name] = t
  end
  loaded = all
  return all
end

function M.get(name)
  return M.load_all()[name]
end

function M.names()
  local out = {}
  for i, n in ipairs(M.NAMES) do out[i] = n end
  return out
end

local in_list = require("util").contains

-- The definitions the model is offered, in allowlist order. Names that are not
-- tools are skipped and returned as the second value; nil offers nothing.
function M.definitions(allowlist)
  local all = M.load_all()
  local defs, unknown, seen = {}, {}, {}
  for _, name in ipairs(allowlist or {}) do
    local t = all[name]
    if not t then
      unknown[#unknown + 1] = tostring(name)
    elseif not seen[name] then
      seen[name] = true
      defs[#defs + 1] = { name = t.name, description = t.description, parameters = t.parameters }
    end
  end
  return defs, unknown
end

-- Checks a call before anything runs. args may be a table or a JSON string.
-- allowlist nil skips the allowlist check (the caller checked it).
function M.validate(name, args, allowlist)
  local all = M.load_all()
  local t = type(name) == "string" and all[name] or nil
  if not t then return nil, "UnknownTool", "unknown tool '" .. tostring(name) .. "'" end
  if allowlist ~= nil and not in_list(allowlist, name) then
    return nil, "NotAllowed", "the tool '" .. name .. "' is not allowed in this session"
  end
  if type(args) == "string" then
    local okj, json = pcall(require, "json")
    local ok, decoded = false, nil
    if okj then ok, decoded = pcall(json.decode, args == "" and "{}" or args) end
    if not ok then return nil, "InvalidArguments", name .. ": the arguments are not valid JSON" end
    args = decoded
  end
  if args == nil then args = {} end
  local ok, errs = jsonschema.validate(t.parameters, args, "args")
  if not ok then return nil, "InvalidArguments", name .. ": " .. table.concat(errs, "; ") end
  return t, args
end

local MAX_ERROR = 4096 -- bytes of a tool's error message kept

-- A failure's message is kept to MAX_ERROR bytes, whatever the model sent (a
-- tool name or a path of any length): it is recorded and shown.
local function failure(type_, message)
  message = (common.cap(message, MAX_ERROR, "error"))
  return { ok = false, error = { type = type_, message = message }, content = type_ .. ": " .. message }
end

-- Validates (against ctx.permissions.tools), runs, and shapes the result.
-- Never raises for a tool's own failure.
function M.run(name, ctx, args)
  ctx = ctx or {}
  local allowlist = ctx.permissions and ctx.permissions.tools or {}
  local t, err_type, message = M.validate(name, args, allowlist)
  if not t then return failure(err_type, message) end
  args = err_type -- validate returns the decoded arguments second
  if t.side == "sandbox" and ctx.sandbox == nil then
    return failure("NoSandbox", "the tool '" .. name .. "' needs a sandbox and the session has none")
  end
  local ok, res = pcall(t.run, ctx, args)
  if not ok then
    local e = res
    local etype = type(e) == "table" and tostring(e.type or "ToolError") or "ToolError"
    local emsg = type(e) == "table" and tostring(e.message or "") or tostring(e)
    -- redacted before it is cut, so no cut can leave half a secret behind
    emsg = t.side == "trusted" and common.sanitize(emsg) or common.redact(emsg)
    return failure(etype, emsg)
  end
  if type(res) ~= "table" or type(res.content) ~= "string" then
    return failure("ToolError", "the tool '" .. name .. "' returned no content")
  end
  local out = { ok = true, content = res.content, data = res.data }
  if t.side == "trusted" then
    out.content = common.sanitize(out.content)
    out.data = common.sanitize_value(out.data)
  else
    -- sandbox-side results are recorded (history, tool.result) and shown
    -- (engine events): credential-shaped strings a repository holds are
    -- redacted here, once, and the model reads the same redacted text
    out.content = common.redact(out.content)
    out.data = common.redact_value(out.data)
  end
  return out
end

-- The grant a call needs (docs/grants.md), from the tool's definition and
-- the call's arguments, never from the model's say: a need {kind, resource,
-- action, text}; nil when the tool needs none (the sandbox's tools, which
-- touch no credential); or false and why when the call names no one thing
-- a grant could cover (a URL that is not one host). An MCP tool
-- (mcp__SERVER__TOOL) needs mcp:SERVER:TOOL, TOOL as its server names it
-- (mcp_tool: "issues.read" where the model sees mcp__linear__issues_read).
function M.grant_need(name, args, mcp_tool)
  local grants = require "grants"
  local server, tool = type(name) == "string" and name:match("^mcp__(.-)__(.+)$")
  if server then return grants.need("mcp", server, mcp_tool or tool) end
  local t = M.load_all()[name]
  if not t or type(t.grant) ~= "function" then return nil end
  if type(args) == "string" then
    local ok, decoded = pcall(require("json").decode, args == "" and "{}" or args)
    args = ok and decoded or {}
  end
  local ok, kind, resource, action = pcall(t.grant, type(args) == "table" and args or {})
  if not ok then return false, type(kind) == "table" and tostring(kind.message) or tostring(kind) end
  local need, why = grants.need(kind, resource, action)
  if not need then return false, why end
  return need
end

-- The request the policies decide on (lua/policy.lua).
-- An MCP tool (mcp__SERVER__TOOL, lua/mcp.lua) runs on the trusted side and
-- may do anything its server does: it counts as writing, and req.mcp names
-- its server. A session with grants (ctx.grants) shows them as req.grants
-- (a list, or "*" for every grant) and the call's need as req.grant_needed.
function M.policy_request(name, args, ctx)
  -- delegate is the workflow's own (lua/tools/delegate.lua): not in the registry
  local t = M.load_all()[name] or (name == "delegate" and require("tools.delegate")) or {}
  ctx = ctx or {}
  local server = type(name) == "string" and name:match("^mcp__(.-)__.") or nil
  if server then t = { side = "trusted", writes = true } end
  return { tool = name, args = args, side = t.side, publishes = t.publishes or false, writes = t.writes or false,
    permissions = ctx.permissions or {}, session_id = ctx.session_id, identity = ctx.identity,
    approval = ctx.approval, mcp = server and { server = server } or nil, grants = ctx.grants,
    grant_needed = ctx.grants ~= nil and ctx.need and ctx.need.text or nil }
end

return M
