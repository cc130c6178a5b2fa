-- Tests for lua/types/agent_session_input.schema.json, the AgentSessionInput
-- format declared as data, as lua/jsonschema.lua checks it: each bad value is
-- named by the message session.prepare has always given (the integration
-- tests look for them), and the defaults are those the engine uses.
--   lua5.4 tests/unit/test_session_input.lua   (ctest runs it)
local script = arg and arg[0] or "tests/unit/test_session_input.lua"
local repo = script:match("^(.*)/tests/unit/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. package.path
local cjson = require "cjson"
package.loaded.json = cjson -- json.null is JSON's null, as in the engine
local jsonschema = require "jsonschema"
local compaction = require "compaction"

local t = dofile(repo .. "/tests/lua_test.lua")
local ok, eq, test = t.ok, t.eq, t.test

local f = assert(io.open(repo .. "/lua/types/agent_session_input.schema.json", "rb"))
local schema = cjson.decode(f:read("a"))
f:close()

local function with(over)
  local input = { objective = "do it", model = { name = "m" } }
  for k, v in pairs(over) do input[k] = v end
  return input
end

local function problems(input)
  local okv, errs = jsonschema.validate(schema, input, "input")
  if okv then return {} end
  return errs
end

-- exactly these problems, in any order
local function named(input, want, label)
  local got = problems(input)
  local set = {}
  for _, p in ipairs(got) do set[p] = true end
  for _, w in ipairs(want) do ok(set[w], (label or "") .. ": expected " .. w .. " among: " .. table.concat(got, " | ")) end
  eq(#got, #want, (label or "") .. ": " .. table.concat(got, " | "))
end

test("the schema is one the validator takes", function()
  local okc, errs = jsonschema.check_schema(schema)
  ok(okc, table.concat(errs or {}, "; "))
end)

test("a small valid input, and a full one", function()
  named(with({}), {})
  named(with({ sessionId = "s", context = { text = "t", files = { "/x" }, references = { "r" } }, skills = { "a" },
    memoryFile = "/m", permissions = { tools = { "shell" }, networkAllowlist = {}, writablePaths = { "/workspace/output" },
      requiresApproval = { "shell" } },
    limits = { timeoutSeconds = 60, maxModelTurns = 3, maxToolCalls = 4, maxTokens = 5, maxCostUsd = 0, cpu = 0.5,
      memoryMb = 256, diskMb = 100 },
    model = { name = "m", baseUrl = "http://x", prices = { input = 1, output = 2 }, contextTokens = 8000,
      apiKey = false },
    resultSchema = { type = "object" }, approvalTimeoutSeconds = 10, modelOptions = { stream = true },
    identity = "local:me", concurrency = { key = "k", limit = 2, strategy = "drop" }, mcpServers = {},
    compaction = { threshold = 0.5, keepTurns = 2, runEvents = 300 }, waitForMessages = true,
    idleTimeoutSeconds = 60 }), {})
end)

test("the input itself", function()
  named("text", { "the input must be a JSON object" })
  named(42, { "the input must be a JSON object" })
  named({ objective = "x", model = { name = "m" }, continuedSession = {} }, { "unknown field 'continuedSession'" })
  named({}, { "objective is missing", "model.name is missing" })
end)

test("objective, waitForMessages, idleTimeoutSeconds, identity", function()
  named(with({ objective = "" }), { "objective is missing" })
  named(with({ objective = " \t\n" }), { "objective is missing" })
  named(with({ objective = 5 }), { "objective is missing" })
  named(with({ objective = cjson.null }), { "objective is missing" })
  named(with({ objective = "\u{a0}" }), {}, "as %S: a byte that is not ASCII space")
  named(with({ waitForMessages = "yes" }), { "waitForMessages must be true or false" })
  for _, bad in ipairs({ 0, -1, 30 * 86400 + 1, "60" }) do
    named(with({ idleTimeoutSeconds = bad }), { "idleTimeoutSeconds must be a number of seconds above 0, at most 30 days" },
      "idle " .. tostring(bad))
  end
  named(with({ idleTimeoutSeconds = 30 * 86400 }), {})
  named(with({ identity = 5 }), { "identity must be a string of at most 300 bytes" })
end)

test("memory.read names each kind once", function()
  named(with({ memory = { read = { "knowledge", "knowledge" } } }), { "memory.read names each kind once" })
  named(with({ memory = { read = { "knowledge", "preferences" } } }), {})
end)

test("model", function()
  named(with({ model = "gpt" }), { "model.name is missing" })
  named(with({ model = {} }), { "model.name is missing" })
  named(with({ model = { name = "" } }), { "model.name is missing" })
  named(with({ model = { name = "m", apiKey = "sk-1" } }),
    { "model must not carry an API key (the engine reads keys from its environment)" })
  named(with({ model = { name = "m", api_key = cjson.null } }),
    { "model must not carry an API key (the engine reads keys from its environment)" })
  named(with({ model = { name = "m", prices = { input = -1 } } }),
    { "model.prices must be {input=, output=}: USD per million tokens, >= 0" })
  for _, bad in ipairs({ "gemini", "OpenAI", "", 5 }) do
    named(with({ model = { name = "m", provider = bad } }),
      { "model.provider must be openai, openai-chat, openai-responses or anthropic" }, "provider " .. tostring(bad))
  end
  for _, bad in ipairs({ "file:///etc/passwd", "127.0.0.1:8080/v1", "javascript:alert(1)", "", 80 }) do
    named(with({ model = { name = "m", baseUrl = bad } }), { "model.baseUrl must be an http:// or https:// URL" },
      "baseUrl " .. tostring(bad))
  end
  named(with({ model = { name = "m", provider = "anthropic", baseUrl = "http://127.0.0.1:8080/v1" } }), {})
  named(with({ model = { name = "m", prices = "cheap" } }),
    { "model.prices must be {input=, output=}: USD per million tokens, >= 0" })
  for _, bad in ipairs({ 0, -5, 1.5, "big", true, 1e12 }) do
    named(with({ model = { name = "m", contextTokens = bad } }),
      { "model.contextTokens must be a positive whole number of tokens, at most 100000000 (got " .. tostring(bad) .. ")" },
      "contextTokens " .. tostring(bad))
  end
end)

test("limits", function()
  named(with({ limits = "many" }), { "limits must be an object" })
  named(with({ limits = { maxModelTurns = -1, maxCostUsd = -2, cpu = 0, turns = 3 } }),
    { "limits.maxModelTurns must be a positive number (got -1)", "limits.maxCostUsd must be a positive number (got -2)",
      "limits.cpu must be a positive number (got 0)", "unknown limit 'turns'" })
  named(with({ limits = { maxCostUsd = 0, timeoutSeconds = "1h" } }),
    { "limits.timeoutSeconds must be a positive number (got 1h)" })
end)

test("permissions, context, skills", function()
  named(with({ permissions = "all" }), { "permissions must be an object" })
  named(with({ permissions = { tools = "shell", networkAllowlist = "x", writablePaths = 1, requiresApproval = true } }),
    { "permissions.tools must be a list", "permissions.networkAllowlist must be a list",
      "permissions.writablePaths must be a list", "permissions.requiresApproval must be a list" })
  named(with({ context = "see above" }), { "context must be an object" })
  named(with({ context = { files = "a.txt" } }), { "context.files must be a list" })
  named(with({ skills = "review" }), { "skills must be a list of names" })
end)

test("concurrency", function()
  named(with({ concurrency = "k" }), { "concurrency must be an object {key=, limit=, strategy=}" })
  named(with({ concurrency = { "k" } }), { "concurrency must be an object {key=, limit=, strategy=}" })
  named(with({ concurrency = { key = "", limit = 0, strategy = "newest", when = 1 } }),
    { "concurrency.key must be a string of 1-256 bytes (got )", "concurrency.limit must be a whole number from 1 to 1000000 (got 0)",
      "concurrency.strategy must be queue, cancel_in_progress or drop (got newest)", "unknown field 'concurrency.when' (key, limit, strategy)" })
  named(with({ concurrency = {} }), { "concurrency.key must be a string of 1-256 bytes (got nil)" })
  named(with({ concurrency = { key = "k", limit = 2.5 } }),
    { "concurrency.limit must be a whole number from 1 to 1000000 (got 2.5)" })
  named(with({ concurrency = { key = "k", limit = 3.0 } }), {}, "3.0 is a whole number")
end)

test("compaction", function()
  named(with({ compaction = "often" }), { "compaction must be an object {threshold=, keepTurns=, runEvents=}" })
  named(with({ compaction = { threshold = 2, keepTurns = -1, runEvents = 10, every = 3 } }),
    { "compaction.threshold must be a number above 0 and at most 1 (got 2)",
      "compaction.keepTurns must be a whole number from 0 to 1000 (got -1)",
      "compaction.runEvents must be a whole number from 200 to 1000000 (got 10)",
      "unknown field 'compaction.every' (threshold, keepTurns, runEvents)" })
  named(with({ compaction = { threshold = 0, keepTurns = 1.5, runEvents = 199 } }),
    { "compaction.threshold must be a number above 0 and at most 1 (got 0)",
      "compaction.keepTurns must be a whole number from 0 to 1000 (got 1.5)",
      "compaction.runEvents must be a whole number from 200 to 1000000 (got 199)" })
end)

test("delegation and subSession", function()
  named(with({ delegation = { enabled = true } }), {})
  named(with({ delegation = { enabled = true, maxSubSessions = 8, workspace = "own" } }), {})
  named(with({ delegation = true }), { "delegation must be an object {enabled=, maxSubSessions=, workspace=, maxDepth=}" })
  named(with({ delegation = { maxSubSessions = 0, workspace = "read_only", depth = 2 } }),
    { "delegation.enabled must be true or false",
      "delegation.maxSubSessions must be a whole number from 1 to 100 (got 0)",
      "delegation.workspace must be \"own\" or \"parent\" (got read_only)",
      "unknown field 'delegation.depth' (enabled, maxSubSessions, workspace, maxDepth)" })
  named(with({ delegation = { enabled = true, maxDepth = 0 } }),
    { "delegation.maxDepth must be a whole number from 1 to 10 (got 0)" })
  named(with({ delegation = { enabled = true, maxDepth = 2 } }), {})
  named(with({ delegation = { enabled = true, workspace = "parent" } }), {})
  named(with({ subSession = { parent = "p1" } }), {})
  named(with({ subSession = { parent = "p1", workspace = "parent" } }), {})
  named(with({ subSession = { parent = "" } }), { "subSession.parent must be a session id" })
  named(with({ subSession = { id = 1 } }), { "subSession.parent must be a session id",
    "unknown field 'subSession.id' (parent, workspace, depth)" })
  named(with({ subSession = { parent = "p1", depth = 2 } }), {})
  named(with({ subSession = { parent = "p1", depth = 1 } }),
    { "subSession.depth must be a whole number from 2 to 100 (absent: 1, a root session's sub-session)" })
  named(with({ subSession = { parent = "p1", workspace = "/etc" } }),
    { "subSession.workspace must be \"own\" or \"parent\" (got /etc)" })
  eq(schema.properties.delegation.properties.maxSubSessions.default, require("delegation").DEFAULT_MAX_SUB_SESSIONS)
  eq(schema.properties.delegation.properties.maxDepth.default, require("delegation").DEFAULT_MAX_DEPTH)
end)

test("the schema's defaults are the engine's", function()
  local P = schema.properties
  local o = compaction.options({ name = "m" })
  local C = P.compaction.properties
  eq(C.threshold.default, o.threshold)
  eq(C.keepTurns.default, o.keep_turns)
  eq(C.runEvents.default, o.run_events)
  local L = P.limits.properties
  local n = 0
  for _ in pairs(L) do n = n + 1 end
  eq(n, 9, "the nine limits")
  eq(L.snapshotMb.default, 256) -- docs/forking.md, docs/agent-sessions.md
  eq(L.timeoutSeconds.default, 3600)
  eq(L.maxModelTurns.default, 40)
  eq(P.concurrency.properties.limit.default, 1)
  eq(P.concurrency.properties.strategy.default, "queue")
end)

t.finish()
