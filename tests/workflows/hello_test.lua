-- Tests of workflows/hello.lua: `engine test tests/workflows/hello_test.lua`
local t = require "enginetest"

local function stubs(extra)
  local s = {
    ["hello_activities.greet"] = function(args) return "hello " .. args.name .. " #" .. args.i end,
    ["hello_activities.summarize"] = function(args) return #args.greetings .. " greetings" end,
    ["hello_activities.cleanup"] = true,
  }
  for k, v in pairs(extra or {}) do s[k] = v end
  return s
end

t.case("approved: completes with a summary", function()
  local run = t.start("workflows/hello.lua", { name = "Ada", n = 2 }, { activities = stubs() })
  run:wait_until("waiting")
  t.assert_eq(run:waits().kind, "timer")
  local w = run:wait_for_signal()
  t.assert_eq(w.name, "approval")
  run:signal("approval", { approved = true })
  t.assert_eq(run:status(), "completed")
  t.assert_eq(run:result(), { greetings = { "hello Ada #1", "hello Ada #2" }, approved = true,
    summary = "2 greetings" })
  t.assert_event(run, "approval.decided", { approved = true })
end)

t.case("the approval times out after 30 days, in virtual time", function()
  local t0 = t.now()
  local run = t.start("workflows/hello.lua", { name = "Ada", n = 1, approval_timeout = 30 * 86400 },
    { activities = stubs() })
  run:advance(0.2) -- the sleep
  t.assert_eq(run:waits().kind, "signal")
  run:advance(30 * 86400 - 1)
  t.assert_eq(run:status(), "waiting", "one second before the timeout")
  run:advance(1)
  t.assert_eq(run:status(), "completed")
  t.assert_event(run, "approval.decided", { approved = false, reason = "timed out" })
  t.assert_true(t.now() - t0 >= 30 * 86400, "the virtual clock moved 30 days")
  t.assert_eq(run:result().approved, false)
end)

t.case("a greeting that fails twice is retried, then succeeds", function()
  local run = t.start("workflows/hello.lua", { name = "Ada", n = 1 }, { activities = stubs({
    ["hello_activities.greet"] = function(args, info)
      if info.attempt < 3 then error({ type = "Flaky", message = "try again" }) end
      return "hello at attempt " .. info.attempt
    end }) })
  run:wait_until("waiting")
  t.assert_eq(#run:calls("hello_activities.greet"), 3)
  t.assert_event(run, "agent.message", { text = "hello at attempt 3" })
end)

t.case("a greeting that always fails fails the run, and cleanup runs", function()
  local run = t.start("workflows/hello.lua", { name = "Ada", n = 1 }, { activities = stubs({
    ["hello_activities.greet"] = function() error({ type = "Down", message = "the greeter is down" }) end }) })
  run:wait_until("failed")
  t.assert_eq(#run:calls("hello_activities.greet"), 3) -- max_attempts = 3
  t.assert_eq(#run:calls("hello_activities.cleanup"), 1)
  t.assert_match(run:error().message, "the greeter is down")
  t.assert_event(run, "session.failed")
end)

t.case("cancelled while waiting for approval: cleanup runs", function()
  local run = t.start("workflows/hello.lua", { name = "Ada", n = 1 }, { activities = stubs() })
  run:advance(1)
  run:cancel()
  t.assert_eq(run:status(), "cancelled")
  t.assert_eq(#run:calls("hello_activities.cleanup"), 1)
end)
