-- Anthropic Messages API (POST {baseUrl}/messages): tool_use / tool_result
-- content blocks and its SSE event types.
local json = require "json"
local C = require "runners.common"

local M = { name = "anthropic" }

local function wire_messages(req)
  local out = {}
  local function push(role, block)
    local last = out[#out]
    if last and last.role == role then
      last.content[#last.content + 1] = block -- consecutive tool results share one user turn
    else
      out[#out + 1] = { role = role, content = { block } }
    end
  end
  for _, m in ipairs(req.messages or {}) do
    if m.role == "assistant" then
      if m.content and m.content ~= "" then push("assistant", { type = "text", text = m.content }) end
      for _, c in ipairs(m.tool_calls or {}) do
        local input = c.arguments
        if type(input) ~= "table" then
          local ok, v = pcall(json.decode, c.arguments_json or "{}")
          input = ok and type(v) == "table" and v or {}
        end
        push("assistant", { type = "tool_use", id = c.id, name = c.name, input = input })
      end
    elseif m.role == "tool" then
      push("user", { type = "tool_result", tool_use_id = m.tool_call_id, content = m.content or "",
        is_error = m.is_error or nil })
    else
      push("user", { type = "text", text = m.content or "" })
    end
  end
  return out
end

local function wire_tools(tools)
  if not tools or #tools == 0 then return nil end
  local out = {}
  for i, t in ipairs(tools) do
    out[i] = { name = t.name, description = t.description or "",
      input_schema = t.parameters or { type = "object", properties = {} } }
  end
  return out
end

local STOP = { end_turn = "stop", stop_sequence = "stop", tool_use = "tool_calls", max_tokens = "length",
  refusal = "content_filter", pause_turn = "pause" }


local function from_message(msg)
  local turn = { text = "", tool_calls = {}, model = msg.model }
  local text = {}
  for _, b in ipairs(type(msg.content) == "table" and msg.content or {}) do
    local kind = type(b) == "table" and b.type -- anything but a block is skipped
    if kind == "text" then text[#text + 1] = type(b.text) == "string" and b.text or ""
    elseif kind == "tool_use" then
      turn.tool_calls[#turn.tool_calls + 1] = { id = b.id, name = b.name,
        arguments = type(b.input) == "table" and b.input or nil,
        arguments_json = type(b.input) ~= "table" and tostring(b.input) or nil }
    end
  end
  turn.text = table.concat(text)
  turn.finish_reason = STOP[msg.stop_reason] or msg.stop_reason or "stop"
  local u = type(msg.usage) == "table" and msg.usage or {}
  turn.usage = { input_tokens = C.count(u.input_tokens) + C.count(u.cache_read_input_tokens)
    + C.count(u.cache_creation_input_tokens), output_tokens = C.count(u.output_tokens) }
  -- the cache's share of input_tokens, when the API says it (a trace shows it)
  if u.cache_read_input_tokens ~= nil then turn.usage.cache_read_input_tokens = C.count(u.cache_read_input_tokens) end
  if u.cache_creation_input_tokens ~= nil then
    turn.usage.cache_creation_input_tokens = C.count(u.cache_creation_input_tokens)
  end
  if type(msg.id) == "string" then turn.id = msg.id end
  return turn
end

function M.turn(model, req, opts)
  opts = opts or {}
  local base = C.trim_base(model.baseUrl or "https://api.anthropic.com/v1")
  local key = C.api_key(model, "ANTHROPIC_API_KEY")
  local headers = { ["content-type"] = "application/json", ["anthropic-version"] = model.version or "2023-06-01" }
  if key then headers["x-api-key"] = key end
  local stream = opts.stream ~= false
  local body = { model = model.name, system = req.system, messages = wire_messages(req), tools = wire_tools(req.tools),
    max_tokens = model.max_tokens or 4096, temperature = model.temperature, stream = stream or nil }
  local on_delta = opts.on_delta or function() end

  local function from_stream(res)
    local msg, blocks, parts, stopped, err = nil, {}, {}, false, nil
    C.read_sse(res, function(ev)
      local e = C.decode_event(ev)
      local t = e.type or ev.event
      if t == "message_start" then
        msg = e.message or {}
        msg.content = {}
      elseif t == "content_block_start" then
        local i = (e.index or #blocks) + 1
        blocks[i] = e.content_block or {}
        parts[i] = {}
      elseif t == "content_block_delta" then
        local i = (e.index or 0) + 1
        local d = e.delta or {}
        parts[i] = parts[i] or {}
        if d.type == "text_delta" then
          parts[i][#parts[i] + 1] = d.text
          on_delta({ type = "text", text = d.text })
        elseif d.type == "input_json_delta" then
          parts[i][#parts[i] + 1] = d.partial_json
          on_delta({ type = "tool_call", id = blocks[i] and blocks[i].id, arguments = d.partial_json })
        end
      elseif t == "message_delta" then
        if msg then
          if e.delta and e.delta.stop_reason then msg.stop_reason = e.delta.stop_reason end
          if type(e.usage) == "table" then
            msg.usage = msg.usage or {}
            for k, v in pairs(e.usage) do msg.usage[k] = v end
          end
        end
      elseif t == "message_stop" then
        stopped = true
      elseif t == "error" then
        err = e.error or {}
      end
    end, function()
      -- message_stop ends the stream; a server that closes it cleanly after
      -- the stop_reason (message_delta) has still sent the whole answer
      return stopped or err ~= nil or (msg ~= nil and type(msg.stop_reason) == "string")
    end)
    if err then
      C.raise(C.error_type(err), "the model reported an error: " .. tostring(err.message))
    end
    if not msg then C.raise("InvalidResponse", "the stream had no message_start") end
    for i, b in ipairs(blocks) do
      if b.type == "text" then
        msg.content[#msg.content + 1] = { type = "text", text = table.concat(parts[i] or {}) }
      elseif b.type == "tool_use" then
        local raw = table.concat(parts[i] or {})
        local ok, input = pcall(json.decode, raw ~= "" and raw or "{}")
        if ok and type(input) == "table" then
          msg.content[#msg.content + 1] = { type = "tool_use", id = b.id, name = b.name, input = input }
        else
          msg.content[#msg.content + 1] = { type = "tool_use", id = b.id, name = b.name, input = raw }
        end
      end
    end
    return msg
  end

  local result = C.post(base .. "/messages", headers, body, stream, opts, key, from_stream)
  if type(result) ~= "table" or type(result.content) ~= "table" then
    C.raise("InvalidResponse", "the response has no content list")
  end
  local turn = from_message(result)
  turn.provider = "anthropic"
  return C.check_tool_calls(turn, req.tools, opts.lenient_tools)
end

return M
