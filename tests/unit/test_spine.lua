-- Tests for lua/spine.lua, the stages every session design runs on: their
-- order, the events said once, the clean-up on every path after acquire
-- (a failure, a cancel in a stage, a cancel during the clean-up), a refused
-- input, admission and the limits. A fake `wf` records each durable call.
-- Plain lua5.4:   lua5.4 tests/unit/test_spine.lua   (from any directory)

local script = arg and arg[0] or "tests/unit/test_spine.lua"
local repo = script:match("^(.*)/tests/unit/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. package.path
local spine = require "spine"

local t = dofile(repo .. "/tests/lua_test.lua")
local ok, eq, has, test = t.ok, t.eq, t.has, t.test

-- A workflow API that records what is called: log = {"emit session.status RUNNING", ...}
local function fake_wf(opts)
  opts = opts or {}
  local w = { log = {}, clock = 1000, acquired = {} }
  local function say(s) w.log[#w.log + 1] = s end
  function w.emit(ty, p) say("emit " .. ty .. (p and p.status and (" " .. p.status) or "")) w.last = p end
  function w.now() return w.clock end
  function w.info() return { id = "s1" } end
  function w.span() end
  function w.acquire(pool, o) say("acquire " .. pool) return opts.drop ~= true end
  function w.release(pool) say("release " .. pool) end
  function w.counter() return 0 end
  function w.activity(name) say("activity " .. name)
    if opts.activity then return opts.activity(name) end
    return { saved = { { path = "a" } }, skipped = { { path = "b", reason = "symlink" } } }
  end
  return w
end

local function stages(w, S, over)
  local d = { name = "test" }
  d.prepare = function(input)
    w.log[#w.log + 1] = "prepare"
    local s = { prep = { model = { name = "m" } }, caps = over.caps or {}, limits = { timeoutSeconds = 10 } }
    S.start_clock(s)
    return s
  end
  for _, n in ipairs({ "acquire", "context", "model" }) do
    d[n] = function(s) w.log[#w.log + 1] = n if over[n] then over[n](s) end end
  end
  d.validate = function(s) w.log[#w.log + 1] = "validate" return { summary = "done" } end
  d.persist = function(s, r) w.log[#w.log + 1] = "persist" return { summary = r.summary, outcome = "completed", turns = 1 } end
  d.release = function(s, okk, res) w.log[#w.log + 1] = "release" if over.release then return over.release(s, okk, res) end
    return okk, res end
  d.admission = over.admission
  return d
end

test("the stages in order, session.completed with the result", function()
  local w = fake_wf()
  local S = spine.new(w)
  local res = S.run(stages(w, S, {}), {})
  eq(res.summary, "done")
  eq(table.concat(w.log, ","), "prepare,acquire,context,model,validate,persist,release,emit session.completed")
  eq(w.last.outcome, "completed")
end)

test("a failure in a stage: the clean-up runs, session.failed, the error raised again", function()
  local w = fake_wf()
  local S = spine.new(w)
  local d = stages(w, S, { model = function() error({ type = "Boom", message = "the model broke" }, 0) end })
  local okk, err = pcall(S.run, d, {})
  ok(not okk, "raised")
  eq(err.type, "Boom")
  eq(table.concat(w.log, ","), "prepare,acquire,context,model,release,emit session.failed")
  eq(w.last.error, "the model broke")
end)

test("a cancel in the context stage: the clean-up runs too", function()
  local w = fake_wf()
  local S = spine.new(w)
  local d = stages(w, S, { context = function() error({ type = "Cancelled", message = "cancelled" }, 0) end })
  local okk, err = pcall(S.run, d, {})
  ok(not okk and err.type == "Cancelled", "Cancelled raised")
  has(table.concat(w.log, ","), "context,release,emit session.failed")
end)

test("the clean-up turns success into failure (a cancel while it ran)", function()
  local w = fake_wf()
  local S = spine.new(w)
  local d = stages(w, S, { release = function() return false, { type = "Cancelled", message = "cancelled" } end })
  local okk, err = pcall(S.run, d, {})
  ok(not okk and err.type == "Cancelled", "the run ends cancelled")
  eq(w.log[#w.log], "emit session.failed")
end)

test("a failure before the guarded part: no clean-up, no session.failed from the spine", function()
  local w = fake_wf()
  local S = spine.new(w)
  local d = stages(w, S, { acquire = function() error({ type = "NoSandbox", message = "x" }, 0) end })
  local okk = pcall(S.run, d, {})
  ok(not okk, "raised")
  eq(table.concat(w.log, ","), "prepare,acquire")
end)

test("refuse names every problem", function()
  local w = fake_wf()
  local S = spine.new(w)
  local okk, err = pcall(S.refuse, { "objective is missing", "unknown field 'x'" })
  ok(not okk, "raised")
  eq(err.type, "InvalidInput")
  eq(err.message, "invalid input: objective is missing; unknown field 'x'")
  eq(w.log[1], "emit session.failed")
  eq(w.last.reason, "invalid input")
end)

test("admission: the caps held, the status between, the sandboxes' slot given back at the end", function()
  local w = fake_wf()
  local S = spine.new(w)
  local d = stages(w, S, { caps = { sessions = 2, sandboxes = 1 }, admission = { status = "PROVISIONING", sandboxes = true } })
  S.run(d, {})
  eq(table.concat(w.log, ","), "prepare,acquire sessions,emit session.status PROVISIONING,acquire sandboxes,acquire," ..
    "context,model,validate,persist,release,release sandboxes,emit session.completed")
end)

test("persist says each artifact saved and skipped", function()
  local w = fake_wf()
  local S = spine.new(w)
  local saved = S.persist("x.persist", {}, {})
  eq(#saved, 1)
  eq(table.concat(w.log, ","), "activity x.persist,emit artifact.saved,emit artifact.skipped")
end)

test("limits: checked before the call that would pass them, said once", function()
  local w = fake_wf()
  local S = spine.new(w)
  local s = { limits = { timeoutSeconds = 10, maxModelTurns = 3, maxTokens = 100, maxCostUsd = 0 },
    turns = 0, tokens = 0, cost = 0 }
  S.start_clock(s)
  ok(not S.limit_reached(s), "nothing reached")
  S.spend(s, { input_tokens = 60, output_tokens = 40 })
  ok(S.limit_reached(s), "maxTokens reached")
  eq(s.exceeded.limit, "maxTokens")
  eq(s.outcome, "limit")
  s.exceeded, s.tokens = nil, 0
  w.clock = w.clock + 11
  ok(S.limit_reached(s), "time is up")
  eq(s.exceeded.limit, "timeoutSeconds")
  eq(S.remaining(s), -1.0)
end)

test("step_opts, in_time: a step's Timeout once the session's time is used up is nil; other errors are raised", function()
  local w = fake_wf()
  local S = spine.new(w)
  local s = { limits = { timeoutSeconds = 10 } }
  S.start_clock(s)
  local o = S.step_opts(s, 600, { retry = { max_attempts = 3 } })
  eq(o.start_to_close, 10, "an attempt: bounded by the time left")
  eq(o.schedule_to_close, 10, "its retries too")
  eq(o.retry.max_attempts, 3, "the step's own options kept")
  eq(S.step_opts(s, 5, {}).start_to_close, 5, "or by the step's own cap")
  local a, b = S.in_time(s, function(x, y) return x + 1, y end, 1, "two")
  eq(a, 2) eq(b, "two")
  local timeout = { type = "Timeout", message = "activity exceeded its start_to_close timeout" }
  local raised, err = pcall(S.in_time, s, function() error(timeout, 0) end)
  ok(not raised and err == timeout, "time left: the step's Timeout is raised as it is")
  w.clock = w.clock + 10
  eq(S.step_opts(s, 600, {}).start_to_close, 1, "at least a second")
  eq(S.step_opts(s, 600, {}).schedule_to_close, 1)
  eq(S.in_time(s, function() error(timeout, 0) end), nil, "time up: the step timed out with the session")
  local other = { type = "ActivityError", message = "boom" }
  raised, err = pcall(S.in_time, s, function() error(other, 0) end)
  ok(not raised and err == other, "time up, another error: raised")
  raised, err = pcall(S.in_time, s, function() error("a string", 0) end)
  ok(not raised and err == "a string", "and a string error")
  eq(#w.log, 0, "it says nothing: the caller says over_time")
end)

t.finish()
