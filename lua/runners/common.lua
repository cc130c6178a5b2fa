-- Shared by the model runners: typed errors, the request loop with retries and
-- backoff (honouring retry-after-ms, Retry-After and x-should-retry), an
-- incremental SSE parser, credentials and redaction. Only the runner files know
-- a wire format; nothing here does.
local http = require "http"
local json = require "json"
local activity = require "activity"

local M = {}

-- Errors are tables {type=, message=, status=, non_retryable=} so activities
-- and workflows can branch on err.type.
function M.error(type_, message, extra)
  local e = { type = type_, message = message }
  for k, v in pairs(extra or {}) do e[k] = v end
  return e
end

M.raise = require("util").raise

-- ---------------------------------------------------------------- secrets --

-- The API key for a provider, from the engine's environment (or the file named
-- by ENGINE_CREDENTIALS_FILE, a JSON object {"OPENAI_API_KEY": "..."}). Never
-- from workflow input: the model spec carries only the variable's name.
function M.api_key(model, default_env)
  for _, k in ipairs({ "apiKey", "api_key", "key", "token" }) do
    if model[k] ~= nil then
      M.raise("InvalidModelSpec", "API keys are not accepted in the model spec (field '" .. k ..
        "'); set " .. (model.api_key_env or default_env) .. " in the engine's environment", { non_retryable = true })
    end
  end
  local name = model.api_key_env or default_env
  local v = os.getenv(name)
  if (not v or v == "") and os.getenv("ENGINE_CREDENTIALS_FILE") then
    local f = io.open(os.getenv("ENGINE_CREDENTIALS_FILE"), "r")
    if f then
      local ok, t = pcall(json.decode, f:read("a"))
      f:close()
      if ok and type(t) == "table" and type(t[name]) == "string" then v = t[name] end
    end
  end
  if v == "" then v = nil end
  return v, name
end

local function escape_pattern(s) return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")) end

-- Removes a secret (and anything shaped like a bearer token) from a message.
function M.redact(text, secret)
  if type(text) ~= "string" then return text end
  if secret and #secret >= 4 then text = text:gsub(escape_pattern(secret), "[redacted]") end
  text = text:gsub("sk%-[%w%-_]+", "sk-[redacted]")
  return text
end

-- ----------------------------------------------------------------- SSE --

-- Incremental Server-Sent Events parser: feed(bytes) returns the complete
-- events in them, each {event=, data=}; partial lines wait for the next feed.
function M.sse_parser()
  local buf, data, event = "", {}, nil
  local p = {}
  function p.feed(chunk)
    buf = buf .. chunk
    local out = {}
    while true do
      local s, e = buf:find("\r?\n")
      if not s then
        -- a lone \r line ending
        s, e = buf:find("\r")
        if not s or s == #buf then break end
      end
      local line = buf:sub(1, s - 1)
      buf = buf:sub(e + 1)
      if line == "" then
        if #data > 0 then out[#out + 1] = { event = event or "message", data = table.concat(data, "\n") } end
        data, event = {}, nil
      elseif line:sub(1, 1) ~= ":" then
        local field, value = line:match("^([^:]*):? ?(.*)$")
        if field == "data" then data[#data + 1] = value
        elseif field == "event" then event = value end
      end
    end
    return out
  end
  function p.pending() return #buf > 0 or #data > 0 end
  return p
end

-- --------------------------------------------------------------- HTTP --

-- Parses Retry-After: delta seconds or an HTTP date.
local MONTHS = { Jan = 1, Feb = 2, Mar = 3, Apr = 4, May = 5, Jun = 6, Jul = 7, Aug = 8, Sep = 9, Oct = 10, Nov = 11, Dec = 12 }
local function days_from_civil(y, m, d) -- days since 1970-01-01 (proleptic Gregorian)
  y = m <= 2 and y - 1 or y
  local era = (y >= 0 and y or y - 399) // 400
  local yoe = y - era * 400
  local doy = (153 * (m + (m > 2 and -3 or 9)) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  return era * 146097 + doe - 719468
end
function M.retry_after_seconds(headers, now)
  local ms = tonumber(headers["retry-after-ms"] or "")
  if ms then return ms / 1000 end
  local ra = headers["retry-after"]
  if not ra then return nil end
  local secs = tonumber(ra)
  if secs then return secs end
  local d, mon, y, hh, mm, ss = ra:match("%a+, (%d+) (%a+) (%d+) (%d+):(%d+):(%d+) GMT")
  if d and MONTHS[mon] then
    local t = days_from_civil(tonumber(y), MONTHS[mon], tonumber(d)) * 86400 + hh * 3600 + mm * 60 + ss
    return math.max(0, t - (now or os.time()))
  end
  return nil
end

local RETRY_STATUS = { [408] = true, [409] = true, [429] = true }
local STATUS_TYPE = {
  [400] = "BadRequest", [401] = "Unauthorized", [403] = "Forbidden", [404] = "NotFound",
  [408] = "Timeout", [409] = "Conflict", [413] = "BadRequest", [422] = "BadRequest", [429] = "RateLimited",
  [529] = "Overloaded",
}

local function status_error(status, message, retryable)
  local t = STATUS_TYPE[status] or (status >= 500 and "ServerError" or "HttpError")
  return M.error(t, message, { status = status, non_retryable = not retryable or nil })
end

-- Sends one model request with retries. spec: {url, headers, body, stream,
-- timeout, idle_timeout, connect_timeout, max_retries, secret, error_message =
-- function(status, body) -> string, on_stream = function(res) -> result}.
-- Returns on_stream(res) for a 2xx streamed response, or the decoded JSON body.
function M.request(spec)
  local max_retries = spec.max_retries or 2
  local attempt = 0
  while true do
    attempt = attempt + 1
    local ok, res = pcall(http.request, {
      url = spec.url, method = "POST", headers = spec.headers, body = spec.body, stream = spec.stream,
      timeout = spec.timeout or 600, connect_timeout = spec.connect_timeout or 10,
      idle_timeout = spec.idle_timeout or 120, max_bytes = spec.max_bytes or 32 * 1024 * 1024,
    })
    local err, retryable, delay
    if not ok then
      local e = res
      local t = type(e) == "table" and e.type or "ConnectionError"
      if t == "Timeout" or t == "IdleTimeout" then t = "Timeout" end
      err = M.error(t == "ConnectionError" and "ConnectionError" or t,
        M.redact(type(e) == "table" and e.message or tostring(e), spec.secret))
      retryable = true
    elseif res.status >= 200 and res.status < 300 then
      if spec.stream then
        local okk, result = pcall(spec.on_stream, res)
        if okk then return result end
        err = type(result) == "table" and result or M.error("InvalidResponse", tostring(result))
        err.message = M.redact(err.message, spec.secret)
        retryable = err.type == "TruncatedStream" or err.type == "Timeout" or err.type == "TransferError"
          or err.type == "Overloaded" or err.type == "ServerError" or err.type == "RateLimited"
        if err.type == "TransferError" then err.type = "TruncatedStream" end
      else
        local okd, body = pcall(json.decode, res.body)
        if okd and type(body) == "table" then return body end
        err = M.error("InvalidResponse", "the model API returned a body that is not a JSON object: " ..
          M.redact(res.body:sub(1, 200), spec.secret), { non_retryable = nil })
        retryable = true
      end
    else
      local body = res.body
      if spec.stream then -- read the error body of a streamed request
        local parts = {}
        while true do
          local okr, chunk = pcall(res.read, res)
          if not okr or not chunk then break end
          parts[#parts + 1] = chunk
        end
        body = table.concat(parts)
      end
      local msg = spec.error_message and spec.error_message(res.status, body) or nil
      msg = M.redact(msg or ("HTTP " .. res.status .. ": " .. (body or ""):sub(1, 300)), spec.secret)
      retryable = RETRY_STATUS[res.status] or res.status >= 500
      local should = res.headers["x-should-retry"]
      if should == "true" then retryable = true elseif should == "false" then retryable = false end
      err = status_error(res.status, msg, retryable)
      delay = M.retry_after_seconds(res.headers)
    end
    if not retryable or attempt > max_retries then
      if not retryable then err.non_retryable = true end
      err.attempts = attempt
      error(err, 0)
    end
    if not delay or delay < 0 or delay > 60 then
      local base = math.min(8, 0.5 * 2 ^ (attempt - 1))
      delay = base * (0.75 + math.random() * 0.25) -- jitter
    end
    activity.heartbeat()
    activity.sleep(delay)
  end
end

-- Reads a streamed response as SSE, calling on_event(ev) for each event.
-- Raises TruncatedStream when the body ends before done() says it is complete.
function M.read_sse(res, on_event, done)
  local parser = M.sse_parser()
  while true do
    local chunk = res:read()
    if not chunk then break end
    activity.heartbeat()
    for _, ev in ipairs(parser.feed(chunk)) do on_event(ev) end
  end
  if not done() then M.raise("TruncatedStream", "the model's stream ended before its final event") end
end

function M.decode_event(ev)
  local ok, v = pcall(json.decode, ev.data)
  if not ok or type(v) ~= "table" then
    M.raise("InvalidResponse", "a stream event is not JSON: " .. tostring(ev.data):sub(1, 120))
  end
  return v
end

-- Checks the model's tool calls against the tools offered: unknown names and
-- arguments that are not a JSON object become typed errors. With lenient (the
-- agent loop), the call carries the error (call.error = {type, message})
-- instead, so it can go back to the model as a failed tool result.
function M.check_tool_calls(turn, tools, lenient)
  local known = {}
  for _, t in ipairs(tools or {}) do known[t.name] = true end
  local function bad(c, type_, message, extra)
    if lenient then
      c.error = { type = type_, message = message }
      return
    end
    local e = { tool_call_id = c.id, tool = c.name, turn = turn, non_retryable = true }
    for k, v in pairs(extra or {}) do e[k] = v end
    M.raise(type_, message, e)
  end
  for _, c in ipairs(turn.tool_calls) do
    if type(c.arguments) ~= "table" then
      local raw = c.arguments_json or ""
      local ok, v = pcall(json.decode, raw ~= "" and raw or "{}")
      if not ok or type(v) ~= "table" then
        bad(c, "InvalidToolArguments", "the model called " .. tostring(c.name) ..
          " with arguments that are not a JSON object: " .. raw:sub(1, 200))
        v = nil
      end
      c.arguments = v
    end
    if c.arguments then c.arguments_json = c.arguments_json or json.encode(c.arguments) end
    if tools and not known[c.name] and not c.error then
      bad(c, "UnknownTool", "the model called a tool that was not offered: " .. tostring(c.name))
    end
  end
  return turn
end

function M.trim_base(url) return (url:gsub("/+$", "")) end

-- The provider's own message from an error body {"error": {"message", "type"}}
-- (OpenAI and Anthropic both use this shape), or nil.
function M.provider_message(status, body)
  local ok, v = pcall(json.decode, body or "")
  if ok and type(v) == "table" and type(v.error) == "table" and v.error.message then
    local t = v.error.type
    return string.format("HTTP %d: %s%s", status, v.error.message, t and t ~= json.null and (" (" .. tostring(t) .. ")") or "")
  end
  return nil
end

-- POSTs one model request (see M.request) with the options every runner shares.
function M.post(url, headers, body, stream, opts, key, on_stream)
  return M.request({
    url = url, headers = headers, body = json.encode(body), stream = stream,
    timeout = opts.timeout, idle_timeout = opts.idle_timeout, max_retries = opts.max_retries, secret = key,
    error_message = M.provider_message, on_stream = on_stream,
  })
end

return M
