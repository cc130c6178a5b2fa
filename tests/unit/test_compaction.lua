-- Tests for lua/compaction.lua in plain lua5.4: where the transcript is cut
-- (a tool call never apart from its results), what the summariser reads, the
-- compaction options (the schema checks them: test_session_input.lua), the token
-- estimate, and the context-length retry, with a stand-in for the workflow
-- API that records what the session would ask of the engine.
--   lua5.4 tests/unit/test_compaction.lua   (ctest runs it)
local script = arg and arg[0] or "tests/unit/test_compaction.lua"
local repo = script:match("^(.*)/tests/unit/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. package.path
package.loaded.json = require "cjson" -- the engine's json module in the workflow VM
local C = require "compaction"

local t = dofile(repo .. "/tests/lua_test.lua")
local ok, eq, has, test = t.ok, t.eq, t.has, t.test

local function msg(role, content, calls) return { role = role, content = content, tool_calls = calls } end
local function call(id) return { { id = id, name = "read_file", arguments_json = "{}" } } end

test("split keeps whole turns: a tool call and its results stay together", function()
  local m = { msg("user", "task"), msg("assistant", "a1", call("1")), msg("tool", "r1"), msg("tool", "r1b"),
    msg("assistant", "a2", call("2")), msg("tool", "r2"), msg("user", "repair"), msg("assistant", "a3") }
  eq(C.split(m, 2, nil), 7, "the last two groups (the repair message, a3) are kept")
  eq(C.split(m, 3, nil), 5, "three groups: a2 with its result")
  eq(C.split(m, 10, nil), 5, "at least one group is folded")
  eq(C.split(m, 0, nil), #m + 1, "keepTurns 0 folds everything")
  for keep = 0, 4 do
    local first = C.split(m, keep, nil)
    ok(first > #m or m[first].role ~= "tool", "the kept part never starts with a tool result (keep " .. keep .. ")")
  end
end)

test("split keeps fewer turns when they would not fit their share", function()
  local big = string.rep("x", 4000)
  local m = { msg("user", "task"), msg("assistant", "a1", call("1")), msg("tool", big), msg("assistant", "a2", call("2")),
    msg("tool", big), msg("assistant", "a3") }
  eq(C.split(m, 2, 10000), 4, "two groups fit in 10,000 bytes")
  eq(C.split(m, 2, 3000), 6, "one fits in 3,000")
  eq(C.split(m, 2, 10), 7, "none fits in 10 bytes: everything is folded")
end)

test("split has nothing to fold with the task alone", function()
  eq(C.split({ msg("user", "task") }, 4, nil), nil)
  eq(C.split({ msg("user", "task"), msg("assistant", "a") }, 4, nil), 3, "a single turn is folded")
end)

test("render: the task, the previous summary, tool results cut, the oldest left out", function()
  local folded = { msg("assistant", "first", call("1")), msg("tool", string.rep("y", 5000)), msg("assistant", "last") }
  local r = C.render("the task", "earlier summary", folded, 100000)
  has(r, "The task:\nthe task")
  has(r, "The summary of the part before:\nearlier summary")
  has(r, "[calls read_file {}]")
  has(r, "[... cut]")
  ok(#r < 3000, "a 5,000-byte tool result is cut to 2,000: " .. #r)
  local small = C.render("the task", nil, folded, 200)
  has(small, "[... 2 earlier messages left out ...]")
  has(small, "last")
end)

test("options: the defaults, then the model's and the input's values", function()
  -- the bad values are named by the input's schema (tests/unit/test_session_input.lua)
  local o = C.options({ name = "m" }, nil)
  eq(o.context_tokens, nil)
  eq(o.threshold, 0.8)
  eq(o.keep_turns, 4)
  eq(o.run_events, 5000)
  o = C.options({ contextTokens = 8000 }, { threshold = 0.5, keepTurns = 2, runEvents = 300 })
  eq(math.type(o.context_tokens), "integer")
  eq(o.context_tokens, 8000)
  eq(o.threshold, 0.5)
  eq(o.keep_turns, 2)
  eq(o.run_events, 300)
  o = C.options({ contextTokens = 8000.0 }, { keepTurns = 2.0, runEvents = 300.0 })
  eq(math.type(o.context_tokens), "integer", "a whole float is the integer")
  eq(math.type(o.keep_turns), "integer")
  eq(math.type(o.run_events), "integer")
  o = C.options({ contextTokens = "8000" }, "often")
  eq(o.context_tokens, nil, "what the schema refuses is left out")
  eq(o.threshold, 0.8)
end)

-- a stand-in for the workflow API: activities answered by handlers, events kept
local function fake_wf(handlers, history_length)
  local wf = { events = {}, calls = {} }
  function wf.activity(name, args)
    wf.calls[#wf.calls + 1] = name
    return handlers[name](args)
  end
  function wf.emit(ty, payload) wf.events[#wf.events + 1] = { type = ty, payload = payload } end
  function wf.info() return { run = 1, history_length = history_length or 0 } end
  function wf.checkpoint(_, fn) return fn() end
  function wf.continue_as_new(input) wf.continued = input; error("continued", 0) end
  return wf
end
local PREP = { system = string.rep("s", 400), tool_definitions = {}, first_message = msg("user", "task"),
  model = { name = "m" } }

local compact_result = { messages = {}, task = "task", summary = "S", turns_folded = 3, messages_folded = 6,
  messages_kept = 2, bytes_after = 800, tokens_after = 200, usage = { input_tokens = 50, output_tokens = 10 } }

test("the estimate: the provider's prompt tokens plus bytes/4 added, or bytes/4 of it all", function()
  local wf = fake_wf({})
  local s = C.session({ wf = wf, prep = PREP })
  eq(s:estimate(), C.tokens_of(400 + C.bytes(PREP.first_message)), "before the first turn: bytes/4")
  s:turned({ text = "hi", usage = { input_tokens = 5000, output_tokens = 20 } })
  eq(s:estimate(), 5020, "the provider's count when it is larger")
  s:add(string.rep("z", 4000))
  eq(s:estimate(), 5020 + C.tokens_of(4016), "plus what was added since")
end)

test("before_turn compacts at the threshold, once, and emits the numbers", function()
  local used = {}
  local wf = fake_wf({ ["session.compact"] = function() return compact_result end })
  local prep = setmetatable({ compaction = { context_tokens = 1000, threshold = 0.8, keep_turns = 2,
    run_events = 5000 } }, { __index = PREP })
  local s = C.session({ wf = wf, prep = prep, on_usage = function(u) used[#used + 1] = u end })
  s:before_turn()
  eq(#wf.calls, 0, "under the threshold: no compaction")
  s:turned({ text = "", usage = { input_tokens = 790, output_tokens = 20 } })
  s:before_turn()
  eq(#wf.calls, 1, "at 810 of 1000: compacted")
  local e = wf.events[1]
  eq(e.type, "context.compacted")
  eq(e.payload.tokens_before, 810)
  eq(e.payload.tokens_after, 200)
  eq(e.payload.tokens_saved, 610)
  eq(e.payload.turns_folded, 3)
  eq(e.payload.reason, "threshold")
  eq(#used, 1, "the summary's tokens are counted")
  eq(s:estimate(), 200, "the estimate starts again from the compacted transcript")
  s:before_turn()
  eq(#wf.calls, 1, "not again before anything was added")
end)

test("a context-length error compacts and retries once; a second one fails clearly", function()
  local wf = fake_wf({ ["session.compact"] = function() return compact_result end })
  local s = C.session({ wf = wf, prep = PREP })
  local n = 0
  local turn = s:turn(function()
    n = n + 1
    if n == 1 then error({ type = "ContextTooLong", message = "maximum context length is 10" }, 0) end
    return { text = "ok", usage = {} }
  end)
  eq(turn.text, "ok")
  eq(n, 2, "the turn ran again")
  eq(wf.events[1].payload.reason, "context_length")
  local okc, err = pcall(s.turn, s, function() error({ type = "ContextTooLong", message = "still 10" }, 0) end)
  ok(not okc)
  eq(err.type, "ContextTooLong")
  has(err.message, "the transcript is still too long after compaction")
  has(err.message, "still 10")
  eq(#wf.events, 2, "one more compaction, not a loop")
  local okx, other = pcall(s.turn, s, function() error({ type = "ServerError", message = "boom" }, 0) end)
  ok(not okx)
  eq(other.type, "ServerError", "other errors pass through")
  eq(#wf.events, 2)
end)

test("nothing to fold: the context-length error says so", function()
  local wf = fake_wf({ ["session.compact"] = function() return { skipped = true } end })
  local s = C.session({ wf = wf, prep = PREP })
  local okc, err = pcall(s.turn, s, function() error({ type = "ContextTooLong", message = "x" }, 0) end)
  ok(not okc)
  has(err.message, "there is nothing left to compact")
end)

test("a run continues as new at runEvents, carrying the transcript and the estimate", function()
  local prep = setmetatable({ compaction = { threshold = 0.8, keep_turns = 2, run_events = 300 } }, { __index = PREP })
  local wf = fake_wf({ ["session.transcript"] = function() return { messages = { msg("user", "task") } } end }, 299)
  local s = C.session({ wf = wf, prep = prep })
  s:maybe_continue({ counters = { turns = 7 } })
  eq(wf.continued, nil, "299 events: the run goes on")
  wf = fake_wf({ ["session.transcript"] = function() return { messages = { msg("user", "task") } } end }, 300)
  s = C.session({ wf = wf, prep = prep })
  s:add("abc")
  local okc = pcall(s.maybe_continue, s, { counters = { turns = 7 } })
  ok(not okc and wf.continued, "300 events: continued as new")
  local c = wf.continued[C.CARRIED]
  eq(c.counters.turns, 7)
  eq(c.transcript.messages[1].content, "task")
  eq(c.context.total, s.total)
  local s2 = C.session({ wf = wf, prep = prep, state = c.context })
  eq(s2:estimate(), s:estimate(), "the next run starts from the same estimate")
end)

t.finish()
