-- Cases that fail, one way each: test_engine_test.sh checks each report.
local t = require "enginetest"

t.case("passes", function()
  t.assert_eq({ a = { 1, 2 } }, { a = { 1, 2 } })
end)

t.case("an assertion fails", function()
  t.assert_eq(1 + 1, 3, "arithmetic")
end)

t.case("an activity without a stub", function()
  t.start("timers.lua", { timeout = 1 }, { activities = {} })
  t.advance(30 * 86400 + 1)
end)

t.case("a nondeterministic workflow", function()
  local run = t.start("nondet.lua", {}, { activities = { ["acts.step"] = {} } })
  t.assert_eq(run:status(), "completed")
end)

t.case("an edited script that does not replay", function()
  local run = t.start("timers.lua", { timeout = 1 }, { activities = { ["acts.finish"] = "ok" } })
  run:wait_until("completed")
  t.assert_replays(run, "timers_edited.lua")
end)

t.case("an error in the test itself", function()
  local x = nil
  x.y = 1
end)

t.case("waits for what never comes", function()
  local run = t.start("timers.lua", {}, { activities = { ["acts.finish"] = "ok" } })
  run:wait_until("completed")
end)

t.case("a stub that drives the engine", function()
  local run
  run = t.start("timers.lua", { timeout = 1 }, { activities = {
    ["acts.finish"] = function() run:signal("go", {}) end } })
  t.advance(30 * 86400 + 1)
end)
