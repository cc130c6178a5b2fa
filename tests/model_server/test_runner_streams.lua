-- The model runners' stream parsing at exact byte splits, without a network:
-- lua/runners/ with a fake http module that hands each response to the runner
-- in chunks of the sizes given. Every recorded stream (tests/fixtures/model/
-- recorded/) and every SSE fixture must give the same turn whole, in 1, 2, 3,
-- 7 and 13 byte chunks, with CRLF and CR line ends; plus the parser's edge
-- cases (a CRLF cut between \r and \n, a UTF-8 character cut in two, a BOM,
-- the last event with no blank line). Plain Lua 5.4 with lua-cjson.
--
--   lua5.4 tests/model_server/test_runner_streams.lua     (from any directory)
local script = arg and arg[0] or "tests/model_server/test_runner_streams.lua"
local repo = script:match("^(.*)/tests/model_server/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. repo .. "/lua/?/init.lua;" .. package.path
local FIX = repo .. "/tests/fixtures/model/"

local cjson = require "cjson"
package.preload["json"] = function() return { encode = cjson.encode, decode = cjson.decode, null = cjson.null } end
package.preload["activity"] = function() return { heartbeat = function() end, sleep = function() end } end

-- http.request answers from `responses`, one {status, headers, body, sizes} per request
local responses, requests = {}, 0
package.preload["http"] = function()
  return {
    request = function(spec)
      requests = requests + 1
      local r = table.remove(responses, 1) or error({ type = "ConnectionError", message = "no response scripted" }, 0)
      local pos, k = 1, 0
      local res = { status = r.status or 200, headers = r.headers or { ["content-type"] = "text/event-stream" } }
      if not spec.stream then res.body = r.body return res end
      function res.read()
        if pos > #r.body then return nil end
        k = k + 1
        local n = r.sizes and r.sizes[(k - 1) % #r.sizes + 1] or #r.body
        local chunk = r.body:sub(pos, pos + n - 1)
        pos = pos + n
        return chunk
      end
      function res.close() pos = #r.body + 1 end
      return res
    end,
  }
end

local C = require "runners.common"
local runners = require "runners"

local passed, failed = 0, 0
local function check(what, cond, detail)
  if cond then passed = passed + 1 else
    failed = failed + 1
    io.stderr:write("FAIL ", what, detail and (": " .. detail) or "", "\n")
  end
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function split(s, sizes)
  local out, pos, k = {}, 1, 0
  while pos <= #s do
    k = k + 1
    local n = sizes[(k - 1) % #sizes + 1]
    out[#out + 1] = s:sub(pos, pos + n - 1)
    pos = pos + n
  end
  return out
end

-- the events of body fed in pieces, as one comparable string
local function parse(body, sizes)
  local p, evs = C.sse_parser(), {}
  local function add(list) for _, e in ipairs(list) do evs[#evs + 1] = e.event .. "=" .. e.data end end
  for _, piece in ipairs(sizes and split(body, sizes) or { body }) do add(p.feed(piece)) end
  add(p.finish())
  return table.concat(evs, "\0"), #evs
end

local function eol(body, e) return (body:gsub("\r\n", "\n"):gsub("\n", e)) end

-- ---------------------------------------------------------------- parser --

local SIZES = { { 1 }, { 2 }, { 3 }, { 7 }, { 13 }, { 1, 13, 2, 7, 3 } }

do
  local p = C.sse_parser()
  local a, b, c, d = p.feed("data: a\r"), p.feed("\n\r"), p.feed("\n"), p.feed("data: b\r\n\r\n")
  check("a CRLF cut between \\r and \\n", #a == 0 and #b == 0 and #c == 1 and c[1].data == "a" and #d == 1 and d[1].data == "b")
end
check("a lone CR ends a line", parse("data: a\r\rdata: b\r\r") == "message=a\0message=b")
check("a CR at the end of a feed, then another CR", parse("data: a\r\r", { 8, 1 }) == "message=a")
check("LF, CRLF and CR mixed", parse("data: a\n\r\ndata: b\r\rdata: c\r\n\n") == "message=a\0message=b\0message=c")
check("multi-line data joined with LF", parse("data: a\ndata:b\ndata\n\n") == "message=a\nb\n")
check("comments, id and retry ignored; event names kept",
  parse(": ping\nid: 7\nretry: 10\nevent: x\ndata: 1\n\n") == "x=1")
check("an event with no data is not dispatched, and resets the name",
  parse("event: x\n\ndata: 2\n\n") == "message=2")
check("a leading BOM is dropped, split or not", parse("\239\187\191data: a\n\n", { 1 }) == "message=a")
check("the last event with no blank line counts at the end", parse("data: a\n\ndata: b\n") == "message=a\0message=b")
check("... and an unterminated last line", parse("data: a\n\ndata: b", { 3 }) == "message=a\0message=b")
do
  local p = C.sse_parser()
  local got = {}
  for _, piece in ipairs(split('data: {"t":"18\194\176C"}\n\n', { 1 })) do
    for _, e in ipairs(p.feed(piece)) do got[#got + 1] = e.data end
  end
  check("a 2-byte UTF-8 character cut in two arrives whole", got[1] == '{"t":"18\194\176C"}', got[1])
end

-- a long line in many chunks arrives whole (how its cost grows with its
-- length is measured by tests/bench/sse_bench.lua, not asserted here)
do
  local p, chunk = C.sse_parser(), string.rep("x", 16384)
  p.feed("data: ")
  for _ = 1, 512 do p.feed(chunk) end
  local evs = p.feed("\n\n")
  check("an 8 MiB line in 16 KiB chunks: one event, whole", #evs == 1 and #evs[1].data == 8 * 1024 * 1024)
end

local recorded = {}
for name in io.popen('ls "' .. FIX .. 'recorded"'):lines() do
  if name:match("%.sse$") then recorded[#recorded + 1] = "recorded/" .. name end
end
check("recorded fixtures found", #recorded >= 7, tostring(#recorded))
local streams = {}
for _, f in ipairs(recorded) do streams[#streams + 1] = f end
for _, f in ipairs({ "openai_chat_stream.sse", "openai_chat_stream_tools.sse", "openai_responses_stream_tools.sse",
  "anthropic_stream.sse", "anthropic_stream_tools.sse" }) do streams[#streams + 1] = f end

for _, f in ipairs(streams) do
  local body = read(FIX .. f)
  local want, n = parse(body)
  check(f .. ": has events", n > 3, tostring(n))
  for _, sizes in ipairs(SIZES) do
    for _, e in ipairs({ "\n", "\r\n", "\r" }) do
      local got = parse(eol(body, e), sizes)
      check(f .. " at " .. table.concat(sizes, ",") .. " byte chunks, line end " .. e:gsub("\r", "CR"):gsub("\n", "LF"),
        got == want)
    end
  end
end

-- --------------------------------------------------------------- runners --

local function canon(v) -- JSON-like, keys sorted
  if type(v) ~= "table" then return cjson.encode(v) end
  local out = {}
  if #v > 0 then
    for i = 1, #v do out[i] = canon(v[i]) end
    return "[" .. table.concat(out, ",") .. "]"
  end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do out[#out + 1] = k .. ":" .. canon(v[k]) end
  return "{" .. table.concat(out, ",") .. "}"
end
local function summary(t)
  local calls = {}
  for _, c in ipairs(t.tool_calls) do calls[#calls + 1] = c.name .. " " .. c.id .. " " .. canon(c.arguments) end
  return table.concat({ t.text, t.finish_reason, table.concat(calls, "; "), string.format("%d/%d", t.usage.input_tokens, t.usage.output_tokens) }, "|")
end
local function turn(provider, body, sizes, headers, opts)
  responses = { { body = body, sizes = sizes, headers = headers } }
  requests = 0
  local ok, t = pcall(runners.turn, { name = "m", provider = provider, baseUrl = "http://model.invalid/v1" },
    { messages = { { role = "user", content = "hi" } } }, opts or { max_retries = 0 })
  if not ok then return "error " .. tostring(type(t) == "table" and t.type) .. ": " .. tostring(type(t) == "table" and t.message or t) end
  return summary(t)
end
local function provider_of(f)
  if f:match("anthropic") then return "anthropic" elseif f:match("responses") then return "openai-responses" end
  return "openai"
end

local EXPECT = {
  ["recorded/anthropic_basic.sse"] = "Hello there!|stop||11/6",
  ["recorded/anthropic_tool_use.sse"] = 'I\'ll check the current weather in Paris for you.|tool_calls|get_weather toolu_01NRLabsLyVHZPKxbKvkfSMn {location:"Paris"}|377/65',
  ["recorded/ollama_index0_tools.sse"] = '|tool_calls|read_file call_k3x9qf2a {path:"hello.py"}; list_dir call_7dm2wz8r {path:"src"}|183/41',
  ["recorded/llamacpp_tool_name_repeated.sse"] = '|tool_calls|read_file QjbR0sM4yJwLd1Gx8VnKc2PeT5ZfHa7o {path:"src\\/a.c"}; list_dir Xw2cN9tLq4Hs7Rb0PmE5kVyJ1aDgU3Zi {path:"src"}|212/38',
  ["recorded/openai_chat_two_tools.sse"] = '|tool_calls|GetWeatherArgs call_JMW1whyEaYG438VE1OIflxA2 {city:"Edinburgh",country:"GB",units:"c"}; get_stock_price call_DNYTawLBoN8fj3KN6qU9N1Ou {exchange:"NASDAQ",ticker:"AAPL"}|149/60',
}
for _, f in ipairs(streams) do
  local body = read(FIX .. f)
  local p = provider_of(f)
  local want = turn(p, body)
  check(f .. ": a turn", not want:match("^error"), want)
  if EXPECT[f] then check(f .. ": the turn", want == EXPECT[f], want) end
  for _, sizes in ipairs(SIZES) do
    for _, e in ipairs({ "\n", "\r\n", "\r" }) do
      local got = turn(p, eol(body, e), sizes)
      check(f .. ": the same turn at " .. table.concat(sizes, ",") .. " byte chunks", got == want, got)
    end
  end
end
check("recorded UTF-8 stream at 1-byte chunks keeps its characters",
  turn("openai", read(FIX .. "recorded/openai_chat_utf8.sse"), { 1 }):find('"temperature": "18\194\176C"', 1, true) ~= nil)

-- a body that is not an event stream
local got = turn("openai", '{"error":{"message":"no such model","type":"invalid_request_error","code":"model_not_found"}}',
  { 5 }, { ["content-type"] = "application/json" })
check("a JSON error on a 200 stream: typed, with its message", got ==
  "error NotFound: the server answered a streaming request with a non-SSE body (content-type application/json): no such model (model_not_found)", got)
got = turn("openai", "<!DOCTYPE html>\n<html>\255 \1</html>", { 1 }, { ["content-type"] = "text/html; charset=utf-8" })
check("HTML on a 200 stream", got == "error InvalidResponse: the server answered a streaming request with a non-SSE body" ..
  " (content-type text/html; charset=utf-8): <!DOCTYPE html> <html>\255  </html>", got)
got = turn("openai", "", nil, { ["content-type"] = "application/json" })
check("an empty non-SSE body", got:find("non%-SSE body %(content%-type application/json%): an empty body") ~= nil, got)
got = turn("openai", 'data: {"choices":[{"index":0,"delta":{"content":"plain"},"finish_reason":"stop"}]}\n\n', { 2 },
  { ["content-type"] = "text/plain" })
check("SSE sent as text/plain is still read", got == "plain|stop||0/0", got)
got = turn("openai", 'data: {"choices":[{"index":0,"delta":{"content":"none"},"finish_reason":"stop"}]}\n\n', { 3 }, {})
check("SSE with no content type is still read", got == "none|stop||0/0", got)
got = turn("openai", 'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n', nil)
check("no finish reason, no [DONE]: truncated", got:match("^error TruncatedStream") ~= nil, got)
got = turn("openai", 'data: {"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":""}]}\n\n', nil)
check('finish_reason "" is no finish reason', got:match("^error TruncatedStream") ~= nil, got)
got = turn("openai", 'data: {"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"first"},"finish_reason":"stop"}]}\n\n', nil)
check("only the first choice is the answer", got == "first|stop||0/0", got)

-- found by tests/fuzz/fuzz_sse_runners: a tool call the server sent without an
-- id gets one ("call_<n>"), as openai_chat always gave it: the agent loop
-- builds the call's approval id from it, and a nil there ended the session
-- with "attempt to concatenate a nil value"
local function first_call_id(provider, body, opts)
  responses = { { body = body, sizes = { 5 } } }
  local okt, t = pcall(runners.turn, { name = "m", provider = provider, baseUrl = "http://model.invalid/v1" },
    { messages = { { role = "user", content = "hi" } } }, opts or { max_retries = 0 })
  if not okt then return "error " .. tostring(type(t) == "table" and t.message or t) end
  return t.tool_calls[1] and t.tool_calls[1].id
end
got = first_call_id("anthropic", '{"type":"message","role":"assistant","model":"m","content":[{"type":"tool_use",' ..
  '"name":"read_file","input":{"path":"a"}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}',
  { stream = false, max_retries = 0 })
check("an Anthropic tool_use without an id gets one", got == "call_1", tostring(got))
got = first_call_id("openai-responses", 'data: {"type":"response.completed","response":{"status":"completed",' ..
  '"output":[{"type":"function_call","name":"read_file","arguments":"{}"}]}}\n\n')
check("a Responses function_call without a call_id gets one", got == "call_1", tostring(got))
-- one that would take the id another call of the turn has gets another
responses = { { body = '{"type":"message","role":"assistant","model":"m","content":[' ..
  '{"type":"tool_use","name":"read_file","input":{"path":"a"}},' ..
  '{"type":"tool_use","id":"call_1","name":"read_file","input":{"path":"b"}}],' ..
  '"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}', sizes = { 5 } } }
local okt, t2 = pcall(runners.turn, { name = "m", provider = "anthropic", baseUrl = "http://model.invalid/v1" },
  { messages = { { role = "user", content = "hi" } } }, { stream = false, max_retries = 0 })
check("a generated id never repeats one the server sent",
  okt and t2.tool_calls[1].id ~= t2.tool_calls[2].id and t2.tool_calls[2].id == "call_1",
  okt and (tostring(t2.tool_calls[1].id) .. " " .. tostring(t2.tool_calls[2].id)) or tostring(t2))
-- ... and an error event whose error has no message is named by the event, not
-- by a table's address (which differed on every run)
got = turn("openai", 'data: {"error":{"code":17}}\n\n', nil)
check("a stream error without a message", got == 'error ServerError: the stream reported an error: {"error":{"code":17}}', got)

-- found by tests/fuzz/fuzz_sse_runners: answers whose parts have another shape
-- than the API's (a JSON body here) give a turn or a typed error, never a Lua
-- error; a null token count (JSON null is a truthy value in Lua, so `n or 0`
-- kept it) counts 0, where the agent loop's sum of tokens raised
local function json_turn(provider, body)
  responses = { { body = body } }
  local okt, t = pcall(runners.turn, { name = "m", provider = provider, baseUrl = "http://model.invalid/v1" },
    { messages = { { role = "user", content = "hi" } } }, { stream = false, max_retries = 0, lenient_tools = true })
  if not okt then return "error " .. (type(t) == "table" and tostring(t.type) .. ": " .. tostring(t.message) or "(untyped) " .. tostring(t)) end
  local calls = {}
  for _, c in ipairs(t.tool_calls) do
    calls[#calls + 1] = tostring(c.name) .. " " .. (c.error and c.error.type or canon(c.arguments))
  end
  return string.format("%s|%s|%g/%g", t.text, table.concat(calls, "; "), t.usage.input_tokens, t.usage.output_tokens)
end
got = json_turn("openai", '{"choices":[{"message":{"content":"x","tool_calls":[5,{"id":"c","function":' ..
  '{"name":"shell","arguments":"{}"}}]}}],"usage":{"prompt_tokens":null,"completion_tokens":"7"}}')
check("Chat Completions: a tool call that is no object is skipped, null and string counts are 0", got == "x|shell {}|0/0", got)
got = json_turn("anthropic", '{"content":[5,"s",{"type":"text","text":7},{"type":"text","text":"hi"}],' ..
  '"usage":{"input_tokens":null,"cache_read_input_tokens":2,"output_tokens":3}}')
check("Anthropic: content that is no block is skipped, a text that is no string is empty", got == "hi||2/3", got)
got = json_turn("openai-responses", '{"output":[5,{"type":"message","content":[5,{"type":"output_text","text":"t"}]},' ..
  '{"type":"function_call","call_id":"c","name":"shell","arguments":{"command":"ls"}},' ..
  '{"type":"function_call","call_id":"d","name":"shell","arguments":5}],"usage":{"input_tokens":null,"output_tokens":1}}')
check("Responses: items that are no object are skipped, arguments sent as JSON are read as JSON",
  got == 't|shell {command:"ls"}; shell InvalidToolArguments|0/1', got)

-- retries: bad JSON in a data: line is retried like a garbage body
responses = { { body = "data: {not json\n\n", sizes = { 4 } },
  { body = 'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n' } }
requests = 0
local ok, t = pcall(runners.turn, { name = "m", provider = "openai", baseUrl = "http://model.invalid/v1" }, { messages = {} },
  { max_retries = 1 })
check("bad JSON in a data: line is retried", ok and t.text == "ok" and requests == 2, ok and t.text or tostring(t and t.message))

print(string.format("%d passed, %d failed", passed, failed))
os.exit(failed == 0 and 0 or 1)
