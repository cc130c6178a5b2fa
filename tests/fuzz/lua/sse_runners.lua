-- fuzz_sse_runners: lua/runners/common.lua's SSE parser and each runner's
-- assembly of a model server's answer (openai_chat, openai_responses,
-- anthropic) on arbitrary bytes at arbitrary chunk boundaries. The model
-- server is outside the engine's trust: whatever it sends, a turn either
-- comes out in the shape the agent loop relies on or fails with a typed error.
--
-- The input is the response body. Chunk boundaries come from a hash of it.
-- Properties:
--   - sse_parser gives the same events fed whole, in pieces and byte by byte;
--   - each runner, reading the body as a stream (labelled text/event-stream,
--     whole and in pieces; unlabelled, in pieces) and as a plain JSON body,
--     returns a turn or raises a typed error {type = string, message = string}
--     (an error of the stream reader's own is an InvalidResponse by design:
--     common.request turns it into one, and it is retried like garbage);
--   - whole and in pieces give the same turn or the same error;
--   - a turn has text (string), usage.input_tokens and
--     usage.output_tokens (numbers) and tool_calls, a list of calls that each
--     carry either error = {type, message} or a string id, a string name, an
--     arguments table and arguments_json (string): what agent_session.lua reads.
local fuzz = require "fuzz"

package.preload["activity"] = function() return { heartbeat = function() end, sleep = function() end } end

local body, ctype, sizes -- the response http.request hands out next
package.preload["http"] = function()
  return {
    request = function(spec)
      local res = { status = 200, headers = { ["content-type"] = ctype } }
      if not spec.stream then
        res.body = body
        return res
      end
      local pos, k = 1, 0
      function res.read()
        if pos > #body then return nil end
        k = k + 1
        local n = sizes and sizes[(k - 1) % #sizes + 1] or #body
        local chunk = body:sub(pos, pos + n - 1)
        pos = pos + n
        return chunk
      end
      function res.close() pos = #body + 1 end
      return res
    end,
  }
end

local C = require "runners.common"
local RUNNERS = {
  { name = "openai_chat", mod = require "runners.openai_chat" },
  { name = "openai_responses", mod = require "runners.openai_responses" },
  { name = "anthropic", mod = require "runners.anthropic" },
}

local MODEL = { name = "fuzz-model", baseUrl = "http://model.invalid/v1" }
local REQUEST = {
  system = "system prompt",
  messages = { { role = "user", content = "hello" } },
  tools = {
    { name = "read_file", description = "read", parameters = { type = "object", properties = { path = { type = "string" } } } },
    { name = "shell", description = "run", parameters = { type = "object", properties = { command = { type = "string" } } } },
  },
}

-- A deterministic rendering of a value (sorted keys), for comparing outcomes.
local function show(v, depth)
  depth = depth or 0
  if type(v) ~= "table" then return type(v) == "string" and string.format("%q", v) or tostring(v) end
  if depth > 20 then return "{...}" end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return show(a) < show(b) end)
  local out = {}
  for _, k in ipairs(keys) do out[#out + 1] = show(k) .. "=" .. show(v[k], depth + 1) end
  return "{" .. table.concat(out, ",") .. "}"
end

local function check_turn(who, t)
  local function bad(what) fuzz.fail(who .. ": the turn's " .. what .. "\n" .. show(t):sub(1, 2000)) end
  if type(t) ~= "table" then bad("value is a " .. type(t)) end
  if type(t.text) ~= "string" then bad("text is a " .. type(t.text)) end
  if type(t.usage) ~= "table" then bad("usage is a " .. type(t.usage)) end
  for _, k in ipairs({ "input_tokens", "output_tokens" }) do
    if type(t.usage[k]) ~= "number" then bad("usage." .. k .. " is a " .. type(t.usage[k])) end
  end
  if type(t.tool_calls) ~= "table" then bad("tool_calls is a " .. type(t.tool_calls)) end
  local n = 0
  for _ in pairs(t.tool_calls) do n = n + 1 end
  if n ~= #t.tool_calls then bad("tool_calls is not a list") end
  for i, c in ipairs(t.tool_calls) do
    if type(c) ~= "table" then bad("tool_calls[" .. i .. "] is a " .. type(c)) end
    if c.error ~= nil then
      if type(c.error) ~= "table" or type(c.error.type) ~= "string" or type(c.error.message) ~= "string" then
        bad("tool_calls[" .. i .. "].error is not {type, message}")
      end
    else
      if type(c.id) ~= "string" then bad("tool_calls[" .. i .. "].id is a " .. type(c.id)) end
      if type(c.name) ~= "string" then bad("tool_calls[" .. i .. "].name is a " .. type(c.name)) end
      if type(c.arguments) ~= "table" then bad("tool_calls[" .. i .. "].arguments is a " .. type(c.arguments)) end
      if type(c.arguments_json) ~= "string" then
        bad("tool_calls[" .. i .. "].arguments_json is a " .. type(c.arguments_json))
      end
    end
  end
end

-- Runs one runner on the body; returns the outcome's rendering.
local function run(r, stream, label, lenient)
  ctype = label
  local deltas_ok = true
  local opts = { stream = stream, max_retries = 0, lenient_tools = lenient,
    on_delta = function(d) if type(d) ~= "table" or type(d.type) ~= "string" then deltas_ok = false end end }
  local ok, t = pcall(r.mod.turn, MODEL, REQUEST, opts)
  local who = r.name .. (stream and " (stream" .. (sizes and ", in pieces" or ", whole") .. ", " .. tostring(label) .. ")"
    or " (JSON body)")
  if not deltas_ok then fuzz.fail(who .. ": on_delta got something that is not {type=...}") end
  if not ok then
    if type(t) ~= "table" or type(t.type) ~= "string" or type(t.message) ~= "string" then
      fuzz.fail(who .. ": an untyped error: " .. show(t):sub(1, 2000))
    end
    return "error " .. t.type .. ": " .. t.message
  end
  check_turn(who, t)
  return show(t)
end

local function parse(data, pieces)
  local p = C.sse_parser()
  local events = {}
  local pos, k = 1, 0
  while pos <= #data do
    k = k + 1
    local n = pieces and pieces[(k - 1) % #pieces + 1] or #data
    for _, e in ipairs(p.feed(data:sub(pos, pos + n - 1))) do events[#events + 1] = e end
    pos = pos + n
  end
  for _, e in ipairs(p.finish()) do events[#events + 1] = e end
  for _, e in ipairs(events) do
    if type(e.event) ~= "string" or type(e.data) ~= "string" then fuzz.fail("sse_parser gave an event without strings") end
  end
  return show(events)
end

-- Piece sizes from the input's hash: a quarter of them 1-3 bytes (a CRLF or
-- a UTF-8 character cut in two), the rest up to 256 bytes, now and then 4 KiB.
local function pieces_for(data)
  local h = 2166136261
  for i = 1, math.min(#data, 256) do h = ((h ~ data:byte(i)) * 16777619) & 0xffffffff end
  h = (h ~ #data) & 0xffffffff
  local out = {}
  for i = 1, 17 do
    h = (h * 1103515245 + 12345) & 0x7fffffff
    local r = h >> 8
    out[i] = r % 4 == 0 and r // 4 % 3 + 1 or r % 32 == 1 and r // 32 % 4096 + 1 or r // 4 % 256 + 1
  end
  return out
end

return function(data)
  local pieces = pieces_for(data)
  local whole = parse(data, nil)
  if parse(data, pieces) ~= whole then fuzz.fail("sse_parser: the events depend on where the body was split") end
  if #data <= 1024 and parse(data, { 1 }) ~= whole then
    fuzz.fail("sse_parser: the events fed byte by byte differ from the events fed whole")
  end

  body = data
  for _, r in ipairs(RUNNERS) do
    sizes = nil
    local a = run(r, true, "text/event-stream", true)
    sizes = pieces
    local b = run(r, true, "text/event-stream", true)
    if a ~= b then
      fuzz.fail(r.name .. ": the outcome depends on where the stream was split\nwhole:     " .. a:sub(1, 1000) ..
        "\nin pieces: " .. b:sub(1, 1000))
    end
    run(r, true, "text/plain", false)
    sizes = nil
    run(r, false, "application/json", true)
  end
end
