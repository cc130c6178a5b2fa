-- Tests for lua/otel_genai.lua in plain lua5.4: what a model turn and a
-- tool call say of their spans (the GenAI conventions' names and values),
-- and the messages captured only on request, redacted, in the conventions'
-- parts format.
--   lua5.4 tests/unit/test_otel_genai.lua   (ctest runs it)
local script = arg and arg[0] or "tests/unit/test_otel_genai.lua"
local repo = script:match("^(.*)/tests/unit/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. repo .. "/lua/?/init.lua;" .. package.path
local cjson = require "cjson"
package.loaded.json = cjson -- the engine's json module in the activity VM
local G = require "otel_genai"

local t = dofile(repo .. "/tests/lua_test.lua")
local eq, test, ok = t.eq, t.test, t.ok

test("a request: chat MODEL, CLIENT, provider from the runner, the model's settings", function()
  local d = G.chat_request({ name = "claude-sonnet-4-5", max_tokens = 2048, temperature = 0,
    baseUrl = "https://llm.internal:8443/anthropic/v1" }, { stream = false }, "sess-1")
  eq(d.name, "chat claude-sonnet-4-5")
  eq(d.kind, "client")
  local a = d.attributes
  eq(a["gen_ai.operation.name"], "chat")
  eq(a["gen_ai.provider.name"], "anthropic")
  eq(a["gen_ai.request.model"], "claude-sonnet-4-5")
  eq(a["gen_ai.conversation.id"], "sess-1")
  eq(a["gen_ai.request.max_tokens"], 2048)
  eq(math.type(a["gen_ai.request.temperature"]), "float") -- a double in the span, even when 0
  eq(a["gen_ai.request.stream"], false)
  eq(a["server.address"], "llm.internal")
  eq(a["server.port"], 8443)
end)

test("the provider: openai for both of its APIs, replay for a recording", function()
  eq(G.provider_name({ name = "gpt-4o" }), "openai")
  eq(G.provider_name({ name = "gpt-4o", provider = "openai-responses" }), "openai")
  eq(G.provider_name({ name = "x", provider = "anthropic" }), "anthropic")
  eq(G.provider_name({ name = "replay:/tmp/r.jsonl" }), "replay")
  eq(G.chat_request({ name = "gpt-4o" }, {}, "s").attributes["server.address"], nil) -- no base URL: none
  eq(G.chat_request({ name = "gpt-4o" }, {}, "s").attributes["gen_ai.request.stream"], true)
end)

test("a response: model, id, finish reasons, usage with the cache's share when reported", function()
  local a = G.chat_response({ model = "gpt-4o-2024-08-06", id = "chatcmpl-9", finish_reason = "tool_calls",
    usage = { input_tokens = 1200, output_tokens = 80, cache_read_input_tokens = 1024 } }).attributes
  eq(a["gen_ai.response.model"], "gpt-4o-2024-08-06")
  eq(a["gen_ai.response.id"], "chatcmpl-9")
  eq(a["gen_ai.response.finish_reasons"][1], "tool_calls")
  eq(a["gen_ai.usage.input_tokens"], 1200)
  eq(a["gen_ai.usage.output_tokens"], 80)
  eq(a["gen_ai.usage.cache_read.input_tokens"], 1024)
  eq(a["gen_ai.usage.cache_creation.input_tokens"], nil)
  local none = G.chat_response({ text = "hi" }).attributes
  eq(next(none), nil)
end)

test("message content: only on request", function()
  local saved = os.getenv
  os.getenv = function(k) if k == "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" then return "TRUE" end end
  ok(G.capture_content())
  os.getenv = function() return nil end
  ok(not G.capture_content())
  os.getenv = function(k) if k == "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" then return "1" end end
  ok(not G.capture_content(), "only the word true turns it on")
  os.getenv = saved
end)

test("message content: the conventions' parts, redacted like tool results", function()
  local key = "sk-" .. string.rep("a1", 12)
  local a = G.chat_content("You review code.", {
    { role = "user", content = "use the key " .. key },
    { role = "assistant", content = "", tool_calls = { { id = "c1", name = "read_file",
      arguments_json = '{"path":"a.c","token":"' .. key .. '"}' } } },
    { role = "tool", tool_call_id = "c1", name = "read_file", content = "int main() {}" },
  }, { text = "Done.", finish_reason = "stop", tool_calls = {} }).attributes
  local sys = cjson.decode(a["gen_ai.system_instructions"])
  eq(sys[1].type, "text")
  eq(sys[1].content, "You review code.")
  local input = cjson.decode(a["gen_ai.input.messages"])
  eq(#input, 3)
  eq(input[1].role, "user")
  eq(input[1].parts[1].type, "text")
  eq(input[1].parts[1].content, "use the key sk-[redacted]")
  eq(input[2].parts[1].type, "tool_call") -- no empty text part before it
  eq(input[2].parts[1].name, "read_file")
  eq(input[2].parts[1].arguments.path, "a.c")
  eq(input[2].parts[1].arguments.token, "sk-[redacted]")
  eq(input[3].parts[1].type, "tool_call_response")
  eq(input[3].parts[1].id, "c1")
  eq(input[3].parts[1].response, "int main() {}")
  local out = cjson.decode(a["gen_ai.output.messages"])
  eq(out[1].role, "assistant")
  eq(out[1].finish_reason, "stop")
  eq(out[1].parts[1].content, "Done.")
  t.hasnt(a["gen_ai.input.messages"], key)
end)

test("message content: a long text is cut", function()
  local a = G.chat_content(nil, { { role = "user", content = string.rep("x", G.PART_MAX + 10) } }, nil).attributes
  local input = cjson.decode(a["gen_ai.input.messages"])
  eq(#input[1].parts[1].content, G.PART_MAX + #"...[truncated]")
  eq(a["gen_ai.system_instructions"], nil)
  eq(a["gen_ai.output.messages"], nil)
end)

test("a tool call: execute_tool NAME with its call id; an MCP tool names its server", function()
  local d = G.tool("read_file", "call_7")
  eq(d.name, "execute_tool read_file")
  eq(d.kind, "internal")
  eq(d.attributes["gen_ai.operation.name"], "execute_tool")
  eq(d.attributes["gen_ai.tool.name"], "read_file")
  eq(d.attributes["gen_ai.tool.call.id"], "call_7")
  eq(d.attributes["gen_ai.tool.type"], "function")
  local m = G.tool("mcp__gh__search", "c2", { server = "gh", tool = "search" })
  eq(m.attributes["engine.tool.mcp_server"], "gh")
  eq(m.attributes["mcp.method.name"], "tools/call")
end)

t.finish()
