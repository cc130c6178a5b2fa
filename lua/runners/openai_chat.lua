-- OpenAI Chat Completions (POST {baseUrl}/chat/completions), also spoken by
-- Ollama, vLLM, llama.cpp server, LM Studio and OpenRouter.
local json = require "json"
local C = require "runners.common"

local M = { name = "openai_chat" }

local function wire_messages(req)
  local out = {}
  if req.system and req.system ~= "" then out[#out + 1] = { role = "system", content = req.system } end
  for _, m in ipairs(req.messages or {}) do
    if m.role == "assistant" then
      local msg = { role = "assistant", content = m.content or json.null }
      if m.tool_calls and #m.tool_calls > 0 then
        msg.tool_calls = {}
        for i, c in ipairs(m.tool_calls) do
          msg.tool_calls[i] = { id = c.id, type = "function",
            ["function"] = { name = c.name, arguments = c.arguments_json or json.encode(c.arguments or {}) } }
        end
      end
      out[#out + 1] = msg
    elseif m.role == "tool" then
      out[#out + 1] = { role = "tool", tool_call_id = m.tool_call_id, content = m.content or "" }
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
    out[i] = { type = "function", ["function"] = { name = t.name, description = t.description or "",
      parameters = t.parameters or { type = "object", properties = {} } } }
  end
  return out
end

local FINISH = { stop = "stop", tool_calls = "tool_calls", length = "length", content_filter = "content_filter",
  function_call = "tool_calls" }


local function usage_of(u)
  if type(u) ~= "table" then return { input_tokens = 0, output_tokens = 0 } end
  local out = { input_tokens = C.count(u.prompt_tokens), output_tokens = C.count(u.completion_tokens) }
  -- the cache's share of prompt_tokens, when the API says it (a trace shows it)
  local d = type(u.prompt_tokens_details) == "table" and u.prompt_tokens_details or {}
  if d.cached_tokens ~= nil then out.cache_read_input_tokens = C.count(d.cached_tokens) end
  return out
end

-- The call a streamed tool_calls delta belongs to: the one being built at its
-- index, unless the delta brings another id. Ollama sends index 0 for every
-- call of a turn, each with its own id, so a new id starts a new call; a delta
-- with no index continues the last call, or starts one when its id is new.
function M.tool_call_for(calls, at_index, tc)
  local id = type(tc.id) == "string" and tc.id ~= "" and tc.id or nil
  local index = type(tc.index) == "number" and math.tointeger(tc.index) or nil
  local c
  if index then c = at_index[index] else c = calls[#calls] end
  if not c or (id and c.id and id ~= c.id) then
    c = { id = id, name = "", args = {} }
    calls[#calls + 1] = c
    if index then at_index[index] = c end
  end
  c.id = c.id or id
  return c
end

-- turn(model, req, opts) -> normalized turn; see runners/README in model.lua.
function M.turn(model, req, opts)
  opts = opts or {}
  local base = C.trim_base(model.baseUrl or "https://api.openai.com/v1")
  local key = C.api_key(model, "OPENAI_API_KEY")
  local headers = { ["content-type"] = "application/json" }
  if key then headers["authorization"] = "Bearer " .. key end
  local stream = opts.stream ~= false
  local body = {
    model = model.name, messages = wire_messages(req), tools = wire_tools(req.tools),
    max_tokens = model.max_tokens, temperature = model.temperature,
    stream = stream or nil, stream_options = stream and { include_usage = true } or nil,
  }
  -- structured output: the answer constrained to a JSON schema (opts.response_schema = {name=, schema=})
  local rs = opts.response_schema
  if type(rs) == "table" and type(rs.schema) == "table" then
    body.response_format = { type = "json_schema", json_schema = { name = rs.name or "result", schema = rs.schema,
      strict = false } }
  end
  local on_delta = opts.on_delta or function() end

  local function from_stream(res)
    local text, calls, finish, usage, model_name, done, id = {}, {}, nil, nil, nil, false, nil
    local at_index = {} -- the call each tool_calls index is building now
    C.read_sse(res, function(ev)
      if ev.data == "[DONE]" then done = true return end
      local chunk = C.decode_event(ev)
      if chunk.error ~= nil and chunk.error ~= json.null then
        -- an error without a message: the event itself (tostring of a table would name an address)
        local e = C.provider_error(ev.data) or { type = "ServerError", message = C.excerpt(ev.data) }
        C.raise(e.type, "the stream reported an error: " .. e.message, { non_retryable = e.non_retryable })
      end
      model_name = chunk.model or model_name
      if type(chunk.id) == "string" then id = chunk.id end
      if type(chunk.usage) == "table" then usage = usage_of(chunk.usage) end
      for _, choice in ipairs(type(chunk.choices) == "table" and chunk.choices or {}) do
        if type(choice) == "table" and (type(choice.index) ~= "number" or choice.index == 0) then -- the first answer
          local d = type(choice.delta) == "table" and choice.delta or {}
          if type(d.content) == "string" and d.content ~= "" then
            text[#text + 1] = d.content
            on_delta({ type = "text", text = d.content })
          end
          for _, tc in ipairs(type(d.tool_calls) == "table" and d.tool_calls or {}) do
            local c = M.tool_call_for(calls, at_index, tc)
            local fn = type(tc["function"]) == "table" and tc["function"] or {}
            -- every delta that names the call names it whole (llama.cpp repeats
            -- the name, and sends the longer one when its parse of it grows)
            if type(fn.name) == "string" and fn.name ~= "" then c.name = fn.name end
            if type(fn.arguments) == "string" and fn.arguments ~= "" then
              c.args[#c.args + 1] = fn.arguments
              on_delta({ type = "tool_call", id = c.id, name = c.name, arguments = fn.arguments })
            end
          end
          -- some servers send "" for "not yet"
          if type(choice.finish_reason) == "string" and choice.finish_reason ~= "" then finish = choice.finish_reason end
        end
      end
    end, function()
      -- [DONE] ends the stream; a server that closes it cleanly after the
      -- finish reason without one (the usage chunk then may be missing too)
      -- has still sent the whole answer
      return done or finish ~= nil
    end)
    local turn = { text = table.concat(text), tool_calls = {}, finish_reason = FINISH[finish] or finish or "stop",
      usage = usage or { input_tokens = 0, output_tokens = 0 }, model = model_name, id = id }
    for i, c in ipairs(calls) do
      turn.tool_calls[i] = { id = c.id or ("call_" .. i), name = c.name, arguments_json = table.concat(c.args) }
    end
    return turn
  end

  local result = C.post(base .. "/chat/completions", headers, body, stream, opts, key, from_stream)
  local turn = result
  if not stream then
    local choice = type(result.choices) == "table" and result.choices[1]
    if type(choice) ~= "table" or type(choice.message) ~= "table" then
      C.raise("InvalidResponse", "the response has no choices[1].message")
    end
    local msg = choice.message
    turn = { text = type(msg.content) == "string" and msg.content or "", tool_calls = {},
      finish_reason = FINISH[choice.finish_reason] or choice.finish_reason or "stop",
      usage = usage_of(result.usage), model = result.model, id = type(result.id) == "string" and result.id or nil }
    for _, tc in ipairs(type(msg.tool_calls) == "table" and msg.tool_calls or {}) do
      if type(tc) == "table" then -- anything else is no call
        local fn = type(tc["function"]) == "table" and tc["function"] or {}
        turn.tool_calls[#turn.tool_calls + 1] = { id = tc.id, name = fn.name, arguments_json = fn.arguments }
      end
    end
  end
  if #turn.tool_calls > 0 and turn.finish_reason == "stop" then turn.finish_reason = "tool_calls" end
  turn.provider = "openai_chat"
  return C.check_tool_calls(turn, req.tools, opts.lenient_tools)
end

return M
