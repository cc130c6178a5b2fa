-- The OpenTelemetry GenAI description of a model turn and of a tool call:
-- what lua/activities/model.lua and session.tool hand to activity.span{}
-- (engine/worker/otel_spans.h builds the span from it). Pure functions of
-- their arguments and the environment.
--
--   M.chat_request(model, opts, conversation_id)  before the call: the span
--       "chat MODEL", CLIENT, with gen_ai.operation.name, provider.name,
--       request.* and conversation.id
--   M.chat_response(turn)                         after it: response.model,
--       response.id, response.finish_reasons, usage.* (the cache's share when
--       the provider reports it)
--   M.chat_content(system, messages, turn)        gen_ai.system_instructions,
--       gen_ai.input.messages, gen_ai.output.messages, as JSON text in the
--       conventions' parts format, each text redacted as tool results are
--       (lua/tools/common.lua); only when M.capture_content()
--   M.tool(name, call_id, mcp)                    "execute_tool NAME"
--
-- Conventions: https://opentelemetry.io/docs/specs/semconv/gen-ai/
local M = {}

-- Each text part at most this many bytes in a captured message.
M.PART_MAX = 16384

-- OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true: the messages go
-- into the spans (off by default: they hold what users and tools said).
function M.capture_content()
  local v = os.getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
  return v ~= nil and v:lower() == "true"
end

-- The provider as gen_ai.provider.name says it: the API the runner speaks
-- to (lua/runners/init.lua: openai, anthropic), or "replay" for a recording.
function M.provider_name(model)
  local ok, p = pcall(function() return require("runners").provider_of(model) end)
  return ok and p or "openai"
end

-- host and port of a base URL ("https://api.example.com:8443/v1"), or nil.
local function server_of(url)
  if type(url) ~= "string" then return nil end
  local scheme, host, port = url:match("^(%a[%w+.-]*)://%[?([^/:%]@]+)%]?:?(%d*)")
  if not host then return nil end
  port = tonumber(port) or (scheme == "http" and 80 or 443)
  return host, port
end

function M.chat_request(model, opts, conversation_id)
  model = type(model) == "table" and model or {}
  opts = opts or {}
  local ok, resolved = pcall(function() return require("runners").resolve(model) end)
  model = ok and type(resolved) == "table" and resolved or model -- model.live, when its key is set
  local name = type(model.name) == "string" and model.name or "unknown"
  local a = {
    ["gen_ai.operation.name"] = "chat",
    ["gen_ai.provider.name"] = M.provider_name(model),
    ["gen_ai.request.model"] = name,
    ["gen_ai.conversation.id"] = conversation_id,
    ["gen_ai.request.max_tokens"] = math.type(model.max_tokens) == "integer" and model.max_tokens or nil,
    ["gen_ai.request.temperature"] = type(model.temperature) == "number" and model.temperature + 0.0 or nil,
    ["gen_ai.request.stream"] = opts.stream ~= false,
  }
  local host, port = server_of(model.baseUrl)
  if host then a["server.address"], a["server.port"] = host, port end
  return { name = "chat " .. name, kind = "client", attributes = a }
end

local function count(v) return math.type(v) == "integer" and v or (type(v) == "number" and math.floor(v)) or nil end

function M.chat_response(turn)
  if type(turn) ~= "table" then return { attributes = {} } end
  local u = type(turn.usage) == "table" and turn.usage or {}
  return { attributes = {
    ["gen_ai.response.model"] = type(turn.model) == "string" and turn.model or nil,
    ["gen_ai.response.id"] = type(turn.id) == "string" and turn.id or nil,
    ["gen_ai.response.finish_reasons"] = type(turn.finish_reason) == "string" and { turn.finish_reason } or nil,
    ["gen_ai.usage.input_tokens"] = count(u.input_tokens),
    ["gen_ai.usage.output_tokens"] = count(u.output_tokens),
    ["gen_ai.usage.cache_read.input_tokens"] = count(u.cache_read_input_tokens),
    ["gen_ai.usage.cache_creation.input_tokens"] = count(u.cache_creation_input_tokens),
  } }
end

-- ---------------------------------------------------- message content --

local function text(s)
  local redact = require("tools.common").redact
  s = redact(type(s) == "string" and s or (s == nil and "" or tostring(s)))
  if #s > M.PART_MAX then s = s:sub(1, M.PART_MAX) .. "...[truncated]" end
  return s
end

-- A call's arguments as the model sent them: decoded when they are JSON.
local function arguments(c)
  if type(c.arguments) == "table" then return c.arguments end
  local ok, v = pcall(require("json").decode, c.arguments_json or "")
  if ok and type(v) == "table" then return v end
  return text(c.arguments_json)
end

-- Redacted copies of every string in a value (a tool call's arguments).
local function redact_value(v, depth)
  if type(v) == "string" then return text(v) end
  if type(v) ~= "table" or (depth or 0) > 16 then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = redact_value(x, (depth or 0) + 1) end
  return out
end

-- One transcript message (lua/transcript.lua) in the conventions' format.
local function message(m)
  local parts = {}
  if m.role == "tool" then
    parts[1] = { type = "tool_call_response", id = m.tool_call_id, response = text(m.content) }
  else
    if m.content ~= nil and m.content ~= "" then parts[1] = { type = "text", content = text(m.content) } end
    for _, c in ipairs(type(m.tool_calls) == "table" and m.tool_calls or {}) do
      parts[#parts + 1] = { type = "tool_call", id = c.id, name = c.name, arguments = redact_value(arguments(c)) }
    end
    if #parts == 0 then parts[1] = { type = "text", content = "" } end
  end
  return { role = m.role, parts = parts }
end

function M.chat_content(system, messages, turn)
  local json = require "json"
  local a = {}
  if type(system) == "string" and system ~= "" then
    a["gen_ai.system_instructions"] = json.encode({ { type = "text", content = text(system) } })
  end
  local input = {}
  for i, m in ipairs(type(messages) == "table" and messages or {}) do input[i] = message(m) end
  if #input > 0 then a["gen_ai.input.messages"] = json.encode(input) end
  if type(turn) == "table" then
    local out = message({ role = "assistant", content = turn.text, tool_calls = turn.tool_calls })
    out.finish_reason = turn.finish_reason or "stop"
    a["gen_ai.output.messages"] = json.encode({ out })
  end
  return { attributes = a }
end

-- ---------------------------------------------------------- tools --

-- A tool call (session.tool): mcp is the call's MCP server and tool, or nil.
function M.tool(name, call_id, mcp)
  name = type(name) == "string" and name or "unknown"
  local a = {
    ["gen_ai.operation.name"] = "execute_tool",
    ["gen_ai.tool.name"] = name,
    ["gen_ai.tool.call.id"] = type(call_id) == "string" and call_id or nil,
    -- the model asks, the engine runs it (function calling)
    ["gen_ai.tool.type"] = "function",
  }
  if type(mcp) == "table" then
    a["mcp.method.name"] = "tools/call"
    a["engine.tool.mcp_server"] = mcp.server
  end
  return { name = "execute_tool " .. name, kind = "internal", attributes = a }
end

return M
