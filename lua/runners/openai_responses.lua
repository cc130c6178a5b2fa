-- OpenAI Responses API (POST {baseUrl}/responses): function_call items out,
-- function_call_output items in.
local json = require "json"
local C = require "runners.common"

local M = { name = "openai_responses" }

local function wire_input(req)
  local out = {}
  for _, m in ipairs(req.messages or {}) do
    if m.role == "assistant" then
      if m.content and m.content ~= "" then out[#out + 1] = { role = "assistant", content = m.content } end
      for _, c in ipairs(m.tool_calls or {}) do
        out[#out + 1] = { type = "function_call", call_id = c.id, name = c.name,
          arguments = c.arguments_json or json.encode(c.arguments or {}) }
      end
    elseif m.role == "tool" then
      out[#out + 1] = { type = "function_call_output", call_id = m.tool_call_id, output = m.content or "" }
    else
      out[#out + 1] = { role = m.role or "user", content = m.content or "" }
    end
  end
  return out
end

local function wire_tools(tools)
  if not tools or #tools == 0 then return nil end
  local out = {}
  for i, t in ipairs(tools) do
    out[i] = { type = "function", name = t.name, description = t.description or "",
      parameters = t.parameters or { type = "object", properties = {} } }
  end
  return out
end


-- Builds the normalized turn from a complete response object.
local function from_response(r)
  local turn = { text = "", tool_calls = {}, usage = { input_tokens = 0, output_tokens = 0 }, model = r.model }
  local text = {}
  for _, item in ipairs(type(r.output) == "table" and r.output or {}) do
    local kind = type(item) == "table" and item.type -- anything but an item is skipped
    if kind == "message" then
      for _, part in ipairs(type(item.content) == "table" and item.content or {}) do
        if type(part) == "table" and part.type == "output_text" and type(part.text) == "string" then
          text[#text + 1] = part.text
        end
      end
    elseif kind == "function_call" then
      turn.tool_calls[#turn.tool_calls + 1] = { id = item.call_id or item.id, name = item.name,
        arguments_json = item.arguments }
    end
  end
  turn.text = table.concat(text)
  if type(r.usage) == "table" then
    turn.usage = { input_tokens = C.count(r.usage.input_tokens), output_tokens = C.count(r.usage.output_tokens) }
    -- the cache's share of input_tokens, when the API says it (a trace shows it)
    local d = type(r.usage.input_tokens_details) == "table" and r.usage.input_tokens_details or {}
    if d.cached_tokens ~= nil then turn.usage.cache_read_input_tokens = C.count(d.cached_tokens) end
  end
  if type(r.id) == "string" then turn.id = r.id end
  if r.status == "incomplete" then
    local reason = type(r.incomplete_details) == "table" and r.incomplete_details.reason
    turn.finish_reason = reason == "max_output_tokens" and "length" or (reason or "incomplete")
  elseif #turn.tool_calls > 0 then
    turn.finish_reason = "tool_calls"
  else
    turn.finish_reason = "stop"
  end
  return turn
end

function M.turn(model, req, opts)
  opts = opts or {}
  local base = C.trim_base(model.baseUrl or "https://api.openai.com/v1")
  local key = C.api_key(model, "OPENAI_API_KEY")
  local headers = { ["content-type"] = "application/json" }
  if key then headers["authorization"] = "Bearer " .. key end
  local stream = opts.stream ~= false
  local body = { model = model.name, instructions = req.system, input = wire_input(req), tools = wire_tools(req.tools),
    max_output_tokens = model.max_tokens, temperature = model.temperature, stream = stream or nil, store = false }
  -- structured output: the answer constrained to a JSON schema (opts.response_schema = {name=, schema=})
  local rs = opts.response_schema
  if type(rs) == "table" and type(rs.schema) == "table" then
    body.text = { format = { type = "json_schema", name = rs.name or "result", schema = rs.schema, strict = false } }
  end
  local on_delta = opts.on_delta or function() end

  local function from_stream(res)
    local final, failed
    C.read_sse(res, function(ev)
      local e = C.decode_event(ev)
      local t = e.type or ev.event
      if t == "response.output_text.delta" and type(e.delta) == "string" then
        on_delta({ type = "text", text = e.delta })
      elseif t == "response.function_call_arguments.delta" and type(e.delta) == "string" then
        on_delta({ type = "tool_call", id = e.item_id, arguments = e.delta })
      elseif t == "response.completed" or t == "response.incomplete" then
        final = e.response
      elseif t == "response.failed" then
        failed = e.response and e.response.error or {}
      elseif t == "error" then
        failed = e.error or e
      end
    end, function() return final ~= nil or failed ~= nil end)
    if failed then
      C.raise(C.error_type(failed), "the model reported an error: " ..
        tostring(failed.message or failed.code or failed.type))
    end
    return final
  end

  local result = C.post(base .. "/responses", headers, body, stream, opts, key, from_stream)
  if type(result) ~= "table" or type(result.output) ~= "table" then
    C.raise("InvalidResponse", "the response has no output list")
  end
  local turn = from_response(result)
  turn.provider = "openai_responses"
  return C.check_tool_calls(turn, req.tools, opts.lenient_tools)
end

return M
