-- Tests for lua/delegation.lua: a sub-session's permissions must be a subset
-- of its parent's (each thing asked that the parent lacks is named), and its
-- limits are reserved out of what the parent has left; its actual spend
-- replaces the reservation at its end, so a tree never spends past its root.
--   lua5.4 tests/unit/test_delegation.lua   (ctest runs it)
local script = arg and arg[0] or "tests/unit/test_delegation.lua"
local repo = script:match("^(.*)/tests/unit/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. package.path
local delegation = require "delegation"

local t = dofile(repo .. "/tests/lua_test.lua")
local ok, eq, has, test = t.ok, t.eq, t.has, t.test

local parent = { tools = { "read_file", "list_files", "delegate", "mcp__gh__issues" }, skills = { "code-review" },
  networkAllowlist = { "api.example.test", "*.docs.test", "svc.test:8443" },
  writablePaths = { "/workspace/working", "/workspace/output" } }

test("the parent's own permissions, or fewer, pass", function()
  eq(delegation.lacks(parent, { tools = { "read_file" } }), nil)
  eq(delegation.lacks(parent, { tools = {}, skills = {}, networkAllowlist = {}, writablePaths = {} }), nil)
  eq(delegation.lacks(parent, { tools = { "mcp__gh__issues", "list_files" }, skills = { "code-review" },
    networkAllowlist = { "api.example.test", "a.docs.test", "x.y.docs.test", "svc.test:8443" },
    writablePaths = { "/workspace/working", "/workspace/output/report", "/workspace/working/" } }), nil)
  eq(delegation.lacks(parent, {}), nil, "nothing asked: the parent's")
end)

test("each thing asked that the parent lacks is named", function()
  local why = delegation.lacks(parent, { tools = { "read_file", "shell", "http_fetch" }, skills = { "incident-investigation" },
    networkAllowlist = { "evil.test", "docs.test", "svc.test" }, writablePaths = { "/workspace/input", "/workspace/workingx" } })
  has(why, "refused: the sub-session asks for what this session lacks: ")
  for _, n in ipairs({ "tool 'shell'", "tool 'http_fetch'", "skill 'incident-investigation'", "network host 'evil.test'",
    "network host 'docs.test'", "network host 'svc.test'", "writable path '/workspace/input'",
    "writable path '/workspace/workingx'" }) do
    has(why, n)
  end
  t.hasnt(why, "read_file")
end)

test("a host wildcard covers its subdomains only; a path no '..'", function()
  has(delegation.lacks(parent, { networkAllowlist = { "*.test" } }), "network host '*.test'")
  eq(delegation.lacks(parent, { networkAllowlist = { "*.sub.docs.test" } }), nil, "a narrower wildcard")
  has(delegation.lacks(parent, { writablePaths = { "/workspace/working/../input" } }), "writable path")
  eq(delegation.lacks(parent, { networkAllowlist = { "API.Example.Test" } }), nil, "case does not matter")
end)

test("delegate is a tool like any other: a sub-session has it only when its parent does", function()
  eq(delegation.lacks(parent, { tools = { "delegate" } }), nil)
  has(delegation.lacks({ tools = { "read_file" } }, { tools = { "delegate" } }), "lacks: tool 'delegate'")
end)

test("depth: a root is 0, a sub-session its subSession.depth (absent: 1)", function()
  eq(delegation.depth({}), 0)
  eq(delegation.depth({ subSession = { parent = "p" } }), 1)
  eq(delegation.depth({ subSession = { parent = "p", depth = 3 } }), 3)
  eq(delegation.depth(nil), 0)
end)

test("deeper: a sub-session given delegate must be able to delegate within maxDepth", function()
  local o = { maxDepth = 2 }
  local with = { tools = { "read_file", "delegate" } }
  eq(delegation.deeper(0, o, with), nil, "a root's child at depth 1 may delegate to depth 2")
  has(delegation.deeper(1, o, with), "refused: the sub-session would be 2 levels below its root session")
  has(delegation.deeper(1, o, with), "(delegation.maxDepth 2)")
  eq(delegation.deeper(1, o, { tools = { "read_file" } }), nil, "without delegate any depth the engine allows")
  eq(delegation.deeper(5, { maxDepth = 1 }, {}), nil, "asking nothing inherits no delegate")
end)

test("sub_session and sub_options: the child's depth, and delegation only when it asks for the tool", function()
  eq(delegation.sub_session("p", { workspace = "own" }, 0).depth, nil, "a root's child: as before nesting")
  eq(delegation.sub_session("p", { workspace = "own" }, 1).depth, 2)
  local o = { maxSubSessions = 3, workspace = "parent", maxDepth = 2 }
  eq(delegation.sub_options(o, { tools = { "read_file" } }), nil)
  local d = delegation.sub_options(o, { tools = { "delegate" } })
  eq(d.enabled, true)
  eq(d.maxSubSessions, 3)
  eq(d.workspace, "parent")
  eq(d.maxDepth, 2)
  eq(delegation.options({ delegation = d }).maxDepth, 2, "the child's options are its parent's")
end)

local limits = { maxModelTurns = 11, maxToolCalls = 100, maxTokens = 100000, maxCostUsd = 2 }

test("left: the limits less the spend and the reservations", function()
  local left = delegation.left(limits, { turns = 1, calls = 4, tokens = 15, cost = 0.5 },
    { turns = 2, calls = 0, tokens = 0, cost = 0.25 })
  eq(left.maxModelTurns, 8)
  eq(left.maxToolCalls, 96)
  eq(left.maxTokens, 99985)
  eq(left.maxCostUsd, 1.25)
  eq(delegation.left(limits, { turns = 20, calls = 0, tokens = 0, cost = 0 }, {}).maxModelTurns, 0, "never below 0")
  eq(delegation.left({ maxModelTurns = 1, maxToolCalls = 1, maxTokens = 1, maxCostUsd = 0 }, {}, {}).maxCostUsd, 0,
    "no cost limit stays none")
end)

test("reserve: equal shares among the turn's calls and the parent, whole numbers", function()
  local left = { maxModelTurns = 10, maxToolCalls = 96, maxTokens = 99985, maxCostUsd = 1 }
  local r = assert(delegation.reserve(left, {}, 5))
  eq(r.maxModelTurns, 2)
  eq(r.maxToolCalls, 19)
  eq(r.maxTokens, 19997)
  eq(r.maxCostUsd, 0.2)
  eq(math.type(r.maxTokens), "integer")
end)

test("reserve: an asked limit is taken whole when there is that much left, else refused naming it", function()
  local left = { maxModelTurns = 10, maxToolCalls = 96, maxTokens = 59991, maxCostUsd = 0 }
  local r = assert(delegation.reserve(left, { maxModelTurns = 10, maxTokens = 100 }, 3))
  eq(r.maxModelTurns, 10)
  eq(r.maxTokens, 100)
  eq(r.maxCostUsd, 0, "the parent has no cost limit: none for the child")
  local none, why = delegation.reserve(left, { maxTokens = 1000000, maxModelTurns = 11 }, 2)
  eq(none, nil)
  has(why, "refused: this session has not enough budget left for the sub-session: ")
  has(why, "maxTokens 1000000 asked, 59991 left")
  has(why, "maxModelTurns 11 asked, 10 left")
  local _, short = delegation.reserve({ maxModelTurns = 1, maxToolCalls = 10, maxTokens = 10, maxCostUsd = 0 }, {}, 2)
  has(short, "maxModelTurns: 1 left to share")
end)

test("settle: the actual spend replaces the reservation (the whole one when unknown)", function()
  local totals, reserved = { turns = 0, calls = 0, tokens = 0, cost = 0 }, { turns = 0, calls = 0, tokens = 0, cost = 0 }
  local a = { maxModelTurns = 2, maxToolCalls = 19, maxTokens = 19997, maxCostUsd = 0.2 }
  local b = { maxModelTurns = 3, maxToolCalls = 10, maxTokens = 5000, maxCostUsd = 0.1 }
  for _, r in ipairs({ a, b }) do
    for _, x in ipairs(delegation.BUDGET) do reserved[x.counter] = reserved[x.counter] + r[x.limit] end
  end
  delegation.settle(totals, reserved, a, delegation.spend_of({ turns = 1, tool_calls = 2, tokens = 1100, cost_usd = 0.01 }))
  eq(totals.tokens, 1100)
  eq(totals.turns, 1)
  eq(totals.calls, 2)
  eq(reserved.tokens, 5000, "b's reservation is still held")
  delegation.settle(totals, reserved, b, nil)
  eq(totals.tokens, 6100, "b's spend is unknown (it failed without one): its whole reservation")
  eq(reserved.tokens, 0)
  eq(reserved.turns, 0)
end)

test("spend_of counts a child's own sub-sessions; a result without tokens is unknown", function()
  local s = delegation.spend_of({ turns = 2, tool_calls = 3, tokens = 500, sub_sessions = { turns = 4, tool_calls = 1 } })
  eq(s.turns, 6)
  eq(s.calls, 4)
  eq(s.cost, 0)
  eq(delegation.spend_of({ message = "boom" }), nil)
end)

test("a tree never spends past its root: reserve and settle, depth after depth", function()
  -- a root with 100,000 tokens; each level reserves a share for each of 3 children
  -- and every child spends its whole reservation
  local function run(lim, depth)
    if depth == 0 then return lim.maxTokens end
    local totals, reserved = { turns = 0, calls = 0, tokens = 0, cost = 0 }, { turns = 0, calls = 0, tokens = 0, cost = 0 }
    local kids = {}
    for k = 3, 1, -1 do
      local r = assert(delegation.reserve(delegation.left(lim, totals, reserved), {}, k + 1))
      for _, x in ipairs(delegation.BUDGET) do reserved[x.counter] = reserved[x.counter] + r[x.limit] end
      kids[#kids + 1] = r
    end
    for _, r in ipairs(kids) do
      local spent = run(r, depth - 1)
      delegation.settle(totals, reserved, r, { turns = 0, calls = 0, tokens = spent, cost = 0 })
    end
    return totals.tokens
  end
  local spent = run({ maxModelTurns = 1000, maxToolCalls = 1000, maxTokens = 100000, maxCostUsd = 0 }, 3)
  ok(spent <= 100000, "spent " .. spent)
end)

test("options: only with delegation.enabled, with the defaults", function()
  eq(delegation.options({}), nil)
  eq(delegation.options({ delegation = { enabled = false } }), nil)
  local o = delegation.options({ delegation = { enabled = true } })
  eq(o.maxSubSessions, 4)
  eq(o.workspace, "own")
  eq(o.maxDepth, 3)
  eq(delegation.options({ delegation = { enabled = true, workspace = "own" } }).workspace, "own")
  eq(delegation.options({ delegation = { enabled = true, workspace = "parent" } }).workspace, "parent")
end)

test("options: a workspace other than own or parent is refused, naming it", function()
  for _, bad in ipairs({ "read_only", "/etc", "", "Parent", 1, true, {} }) do
    local o, why = delegation.options({ delegation = { enabled = true, workspace = bad } })
    eq(o, nil, "workspace " .. tostring(bad))
    eq(why, 'delegation.workspace must be "own" or "parent" (got ' .. tostring(bad) .. ")")
  end
  -- not asked to delegate: nothing to refuse
  eq(select("#", delegation.options({ delegation = { enabled = false, workspace = "x" } })), 1)
end)

test("sub_session: the child's input names its parent, and the parent's view only when asked", function()
  local own = delegation.sub_session("p1", { workspace = "own" })
  eq(own.parent, "p1")
  eq(own.workspace, nil, "own: the input is as before the view was built")
  local view = delegation.sub_session("p1", { workspace = "parent" })
  eq(view.parent, "p1")
  eq(view.workspace, "parent")
end)

test("parent_view: only the parent the engine recorded, whatever the input names", function()
  eq(delegation.parent_view({}, nil), nil)
  eq(delegation.parent_view({ subSession = { parent = "p1" } }, "p1"), nil, "no view asked")
  eq(delegation.parent_view({ subSession = { parent = "p1", workspace = "own" } }, "p1"), nil)
  eq(delegation.parent_view({ subSession = { parent = "p1", workspace = "parent" } }, "p1"), "p1")
  -- started by a person (no parent), or by another workflow: refused, naming both
  local v, why = delegation.parent_view({ subSession = { parent = "victim", workspace = "parent" } }, nil)
  eq(v, nil)
  has(why, "this session was not started by session victim (its parent is none)")
  v, why = delegation.parent_view({ subSession = { parent = "victim", workspace = "parent" } }, "p1")
  eq(v, nil)
  has(why, "(its parent is p1)")
  v, why = delegation.parent_view({ subSession = { workspace = "parent" } }, "p1")
  eq(v, nil)
  has(why, "not started by session nil")
end)

t.finish()
