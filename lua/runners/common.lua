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
  return M.credential(name), name
end

-- A credential by name: the engine's environment, else the file named by
-- ENGINE_CREDENTIALS_FILE. nil when unset or empty. (MCP servers' env and
-- headers come from here too: lua/mcp.lua.)
function M.credential(name)
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
  return v
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

-- Incremental Server-Sent Events parser (the WHATWG "event stream" format):
-- feed(bytes) returns the events the bytes complete, each {event=, data=};
-- finish() returns the last one at the end of the body. Lines end in CRLF, LF
-- or a lone CR, split anywhere between feeds (a CR at the end of a feed waits
-- for the next byte: it may be half of a CRLF). Bytes are never decoded, so a
-- UTF-8 character split between feeds is joined before anyone reads it.
function M.sse_parser()
  local buf, pos, data, event, started = "", 1, nil, nil, false
  local pending = {} -- chunks with no line end, joined once their line ends
  local p = { ignored = nil } -- the first line that is no SSE field we use (for error messages)

  local function line_of(final)
    local s = buf:find("[\r\n]", pos)
    if not s then
      if final and pos <= #buf then
        local line = buf:sub(pos)
        pos = #buf + 1
        return line
      end
      return nil
    end
    local e = s
    if buf:byte(s) == 13 then
      if s == #buf and not final then return nil end
      if buf:byte(s + 1) == 10 then e = s + 1 end
    end
    local line = buf:sub(pos, s - 1)
    pos = e + 1
    return line
  end

  local function take(out, line)
    if line == "" then -- the blank line: dispatch the event, if it has data
      if data then
        out[#out + 1] = { event = (event and event ~= "") and event or "message", data = table.concat(data, "\n") }
      end
      data, event = nil, nil
      return
    end
    if line:byte(1) == 58 then return end -- ":" comment (keep-alive)
    local field, value = line:match("^([^:]*):(.*)$")
    if field then
      if value:byte(1) == 32 then value = value:sub(2) end
    else
      field, value = line, ""
    end
    if field == "data" then
      data = data or {}
      data[#data + 1] = value
    elseif field == "event" then
      event = value
    elseif field ~= "id" and field ~= "retry" then
      p.ignored = p.ignored or line:sub(1, 65536)
    end
  end

  local function run(chunk, final)
    -- a chunk that ends no line is only kept: copying the line so far on
    -- every chunk made a long line (a server may send 32 MiB without a
    -- newline) cost time quadratic in its length, with the event loop stalled
    if started and not final and not chunk:find("[\r\n]") and buf:byte(-1) ~= 13 then
      pending[#pending + 1] = chunk
      return {}
    end
    buf = buf:sub(pos) .. table.concat(pending) .. chunk
    pending = {}
    pos = 1
    if not started then -- one leading UTF-8 BOM is not part of the stream
      if #buf < 3 and not final and ("\239\187\191"):sub(1, #buf) == buf then return {} end
      if buf:sub(1, 3) == "\239\187\191" then buf = buf:sub(4) end
      started = true
    end
    local out = {}
    while true do
      local line = line_of(final)
      if not line then break end
      take(out, line)
    end
    return out
  end

  function p.feed(chunk) return run(chunk, false) end

  -- At the end of a body that ended cleanly (the HTTP framing says nothing is
  -- missing), the last event counts even without its blank line, and so does
  -- an unterminated last line. The WHATWG algorithm discards that event, but
  -- the blank line only delimits events, and providers' own SDK fixtures end
  -- without it (Anthropic's end in "data: {"type":"message_stop"}" and no
  -- newline): dropping it would retry a complete answer as truncated. That
  -- event is marked unterminated: if it was really cut short (its JSON does
  -- not parse), read_sse names the stream truncated.
  function p.finish()
    local out = run("", true)
    local n = #out
    take(out, "")
    if #out > n then out[#out].unterminated = true end
    return out
  end

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

-- The providers' error vocabularies (OpenAI's error.type/error.code,
-- Anthropic's error.type) mapped to our types; a type not listed is a
-- ServerError, retried like a 5xx.
local ERROR_TYPES = {
  rate_limit_error = "RateLimited", rate_limit_exceeded = "RateLimited", requests = "RateLimited", tokens = "RateLimited",
  overloaded_error = "Overloaded", api_error = "ServerError", server_error = "ServerError",
  authentication_error = "Unauthorized", invalid_api_key = "Unauthorized", permission_error = "Forbidden",
  not_found_error = "NotFound", model_not_found = "NotFound",
  invalid_request_error = "BadRequest", request_too_large = "BadRequest",
}
-- Types a retry cannot fix.
local NOT_RETRIED = { BadRequest = true, Unauthorized = true, Forbidden = true, NotFound = true, ContextTooLong = true }

-- Our type for a provider's error object {type=, code=, message=}: by its
-- code, then its type, then a numeric code or status (llama.cpp sends
-- {"code": 500, "type": "server_error"}).
function M.error_type(e)
  for _, k in ipairs({ "code", "type" }) do
    local t = type(e[k]) == "string" and ERROR_TYPES[e[k]]
    if t then return t end
  end
  local status = tonumber(e.code) or tonumber(e.status)
  if status and status >= 400 and status <= 599 then
    status = math.floor(status)
    return STATUS_TYPE[status] or (status >= 500 and "ServerError" or "BadRequest")
  end
  return "ServerError"
end

-- A typed error {type, message, non_retryable} from a provider's JSON error
-- body ({"error": {...}} from OpenAI, vLLM and Ollama; {"type": "error",
-- "error": {...}} from Anthropic; {"message", "type"} or "error: {...}" from
-- llama.cpp), or nil when text is not one.
function M.provider_error(text)
  if type(text) ~= "string" then return nil end
  local ok, v = pcall(json.decode, text:match("^%s*error:%s*(.-)%s*$") or text)
  if not ok or type(v) ~= "table" then return nil end
  local e = v.error
  if type(e) == "string" then e = { message = e } end
  if type(e) ~= "table" then e = type(v.message) == "string" and v or nil end
  if not e or e.message == nil then return nil end
  local t = M.error_type(e)
  if t == "BadRequest" and M.context_too_long(e) then t = "ContextTooLong" end
  local detail = type(e.code) == "string" and e.code or type(e.type) == "string" and e.type or nil
  return { type = t, message = tostring(e.message) .. (detail and (" (" .. detail .. ")") or ""),
    non_retryable = NOT_RETRIED[t] or nil }
end

-- Whether a provider's error object {type=, code=, message=} says the
-- prompt is longer than the model's context: OpenAI's (and the Responses
-- API's) code context_length_exceeded, llama.cpp's exceed_context_size_error,
-- Anthropic's invalid_request_error "prompt is too long: ...", vLLM's
-- "maximum context length". The session compacts and retries on these
-- (ContextTooLong, lua/compaction.lua).
local CONTEXT_MESSAGES = { "prompt is too long", "maximum context length", "context_length_exceeded",
  "exceeds the available context size", "exceeds the context window", "context window exceeds" }
function M.context_too_long(e)
  if type(e) ~= "table" then return false end
  if e.code == "context_length_exceeded" or e.type == "exceed_context_size_error" then return true end
  local msg = type(e.message) == "string" and e.message:lower() or ""
  for _, m in ipairs(CONTEXT_MESSAGES) do
    if msg:find(m, 1, true) then return true end
  end
  return false
end

-- The provider's error object of an error body, or nil.
local function error_object(body)
  local ok, v = pcall(json.decode, body or "")
  if ok and type(v) == "table" and type(v.error) == "table" then return v.error end
  return nil
end

-- The first bytes of a body for an error message: control characters as
-- spaces, no UTF-8 sequence cut in half.
function M.excerpt(body, n)
  n = n or 200
  local s = body:sub(1, n):gsub("%c", " ")
  local len, bad = utf8.len(s)
  if not len and bad > #s - 3 then s = s:sub(1, bad - 1) end
  if #body > n then s = s .. " ..." end
  return s
end

-- Sends one model request with retries. spec: {url, headers, body, stream,
-- timeout, idle_timeout, connect_timeout, max_retries, secret, error_message =
-- function(status, body) -> string, on_stream = function(res) -> result,
-- on_rate_limited = function(seconds), defer_rate_limit = bool}.
-- Returns on_stream(res) for a 2xx streamed response, or the decoded JSON body.
-- A 429 with a retry-after is waited out here and reported through
-- on_rate_limited(seconds); with defer_rate_limit it is raised at once
-- instead (RateLimited, non_retryable, retry_after = seconds) for the caller
-- to wait durably. A RateLimited error carries the retry_after it was given.
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
        -- a cut or garbled stream is retried like a garbage body; a provider's
        -- error is retried unless it is one a retry cannot fix
        retryable = not err.non_retryable and not NOT_RETRIED[err.type]
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
      if res.status == 400 and M.context_too_long(error_object(body)) then
        err.type, retryable = "ContextTooLong", false -- a retry of the same prompt cannot fit
      end
      delay = M.retry_after_seconds(res.headers)
      if res.status == 429 and delay and delay >= 0 then
        err.retry_after = delay -- the provider's own word on when to come back
        -- the caller waits it out durably and makes every session sharing
        -- the provider's budget wait with it (workflows/agent_session.lua)
        if spec.defer_rate_limit and retryable and delay <= 86400 then
          err.non_retryable, err.requests = true, attempt
          error(err, 0)
        end
      end
    end
    if not retryable or attempt > max_retries then
      if not retryable then err.non_retryable = true end
      err.requests = attempt -- HTTP requests made; the error's attempts is the engine's count of activity attempts
      error(err, 0)
    end
    if not delay or delay < 0 or delay > 60 then
      local base = math.min(8, 0.5 * 2 ^ (attempt - 1))
      delay = base * (0.75 + math.random() * 0.25) -- jitter
    elseif err.retry_after and spec.on_rate_limited then
      spec.on_rate_limited(delay) -- a retry-after honoured here, reported to the caller
    end
    activity.heartbeat()
    activity.sleep(delay)
  end
end

local HEAD_MAX = 64 * 1024 -- what is kept of a body to explain why it is not a stream
local SSE_FIELDS = { data = true, event = true, id = true, retry = true }

-- Whether a body starting with these bytes is an event stream: true, false,
-- or nil when too few bytes have come to tell (and more may come).
local function looks_like_sse(bytes, final)
  local s = bytes:gsub("^\239\187\191", "", 1):gsub("^[\r\n]+", "", 1)
  if s == "" then return not final and nil or false end
  if s:byte(1) == 58 then return true end -- a ":" comment
  local first = s:match("^[^\r\n]*")
  local whole = #first < #s or final
  local name = first:match("^(%w+):") or (whole and first:match("^(%w+)$"))
  if name then return SSE_FIELDS[name] == true end
  if whole then return false end
  for f in pairs(SSE_FIELDS) do
    if (f .. ":"):sub(1, #first) == first then return nil end
  end
  return false
end

-- A 200 whose body is not an event stream (a JSON error, an HTML page from a
-- proxy): says so, with the provider's own message and type when the body is
-- its JSON error object.
local function non_sse(res, ctype, head)
  local parts, n = head.parts, head.n
  while n < HEAD_MAX do -- the rest of a JSON error body, within bounds
    local ok, chunk = pcall(res.read, res)
    if not ok or not chunk then break end
    parts[#parts + 1] = chunk
    n = n + #chunk
  end
  pcall(res.close, res)
  local body = table.concat(parts):sub(1, HEAD_MAX)
  local what = "the server answered a streaming request with a non-SSE body (content-type " ..
    (type(ctype) == "string" and ctype or "none") .. "): "
  local e = M.provider_error(body)
  if e then M.raise(e.type, what .. e.message, { non_retryable = e.non_retryable }) end
  M.raise("InvalidResponse", what .. (body == "" and "an empty body" or M.excerpt(body)))
end

-- Whether an unterminated last event was cut short: its data neither JSON
-- nor the [DONE] sentinel. A stream cut there (a connection closed by a
-- proxy, a body delimited by the close) is the network's doing, not the
-- provider's format: it is named so, not "not JSON".
local function cut_short(ev)
  if not (ev and ev.unterminated) or ev.data == "[DONE]" then return false end
  local ok, v = pcall(json.decode, ev.data)
  return not ok or type(v) ~= "table"
end

-- Reads a streamed response as SSE, calling on_event(ev) for each event, and
-- done() once the body has ended cleanly. Raises TruncatedStream when the
-- transfer broke (res:read() raised TransferError), or the body ended in the
-- middle of an event or before done() says the answer is complete: its
-- message names the bytes and events received and whether the final event
-- had come. A body labelled otherwise is still read as SSE when it starts
-- like one (some servers send text/plain).
function M.read_sse(res, on_event, done)
  local ctype = res.headers and res.headers["content-type"]
  local labelled = type(ctype) == "string" and ctype:lower():find("^%s*text/event%-stream") ~= nil
  local parser = M.sse_parser()
  local head = { parts = {}, n = 0 } -- the body's first bytes, kept until its first event
  local events, bytes, sniffing = 0, 0, not labelled
  local function truncated(how)
    M.raise("TruncatedStream", string.format("the model's stream %s: %d bytes and %d events received, %s", how, bytes,
      events, done() and "its final event among them" or "no final event"))
  end
  local function dispatch(list)
    for _, ev in ipairs(list) do
      events = events + 1
      head = nil
      on_event(ev)
    end
  end
  while true do
    local ok, chunk = pcall(res.read, res)
    if not ok then
      if type(chunk) == "table" and chunk.type == "TransferError" then
        truncated("was cut off (" .. tostring(chunk.message) .. ")")
      end
      error(chunk, 0)
    end
    if not chunk then break end
    bytes = bytes + #chunk
    activity.heartbeat()
    if head and head.n < HEAD_MAX then
      head.parts[#head.parts + 1] = chunk
      head.n = head.n + #chunk
    end
    if sniffing then
      local bytes = table.concat(head.parts)
      local verdict = looks_like_sse(bytes, false)
      if verdict == nil and head.n >= HEAD_MAX then verdict = false end
      if verdict == false then non_sse(res, ctype, head) end
      if verdict then
        sniffing = false
        dispatch(parser.feed(bytes))
      end
    else
      dispatch(parser.feed(chunk))
    end
  end
  if sniffing then -- the body ended before it showed what it is
    local bytes = table.concat(head.parts)
    if not looks_like_sse(bytes, true) then non_sse(res, ctype, head) end
    dispatch(parser.feed(bytes))
  end
  local tail = parser.finish()
  local cut = cut_short(tail[#tail])
  if cut then tail[#tail] = nil end
  dispatch(tail)
  if done() then return end
  if events == 0 and head and head.n > 0 and not looks_like_sse(table.concat(head.parts), true) then
    non_sse(res, ctype, head) -- labelled an event stream, but it is not one
  end
  local e = parser.ignored and M.provider_error(parser.ignored)
  if e then -- llama.cpp ends a failed stream with "error: {...}"
    M.raise(e.type, "the model's stream ended with an error: " .. e.message, { non_retryable = e.non_retryable })
  end
  truncated(cut and "was cut off in the middle of an event (the connection closed)" or "ended before its final event")
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
  local ids = {}
  for _, c in ipairs(turn.tool_calls) do
    if type(c.id) == "string" and c.id ~= "" then ids[c.id] = true end
  end
  for i, c in ipairs(turn.tool_calls) do
    -- a call the server sent without an id gets one (never one another call
    -- has): the agent loop names the call's result and approval by it
    if type(c.id) ~= "string" or c.id == "" then
      local id = "call_" .. i
      while ids[id] do id = id .. "_" end
      ids[id], c.id = true, id
    end
    if type(c.arguments) ~= "table" then
      local raw = c.arguments_json or ""
      -- arguments sent as JSON itself, not as a string of it (a number, an object)
      if type(raw) ~= "string" then
        raw = json.encode(raw)
        c.arguments_json = raw
      end
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

-- A token count from the server's answer: a number, or 0 for anything else
-- (null, a string): the agent loop adds them up.
function M.count(v) return type(v) == "number" and v or 0 end

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
    on_rate_limited = opts.on_rate_limited, defer_rate_limit = opts.defer_rate_limit,
  })
end

return M
