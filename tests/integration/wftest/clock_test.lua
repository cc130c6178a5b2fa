-- Virtual time: every case here passes, and the file runs in milliseconds.
local t = require "enginetest"

local DAY = 86400

t.case("a 30-day timer fires when the clock passes it, not before", function()
  local t0 = t.now()
  local run = t.start("timers.lua", { timeout = 3600 }, { activities = { ["acts.finish"] = "ok" } })
  local w = run:waits()
  t.assert_eq(w.kind, "timer")
  t.assert_eq(w.seconds, 30 * DAY)
  run:advance(30 * DAY - 0.001)
  t.assert_eq(run:waits().kind, "timer", "1 ms before it fires")
  run:advance(0.001)
  t.assert_eq(run:waits().kind, "signal", "fired on time")
  t.assert_eq(t.now() - t0, 30 * DAY)
end)

t.case("wf.now() follows the virtual clock", function()
  local run = t.start("timers.lua", { timeout = 3600 }, { activities = { ["acts.finish"] = "ok" } })
  run:advance(30 * DAY + 100)
  run:signal("go", { n = 1 })
  t.assert_eq(run:status(), "completed")
  t.assert_eq(run:result().slept, 30 * DAY)
  t.assert_eq(run:result().waited, 100)
  t.assert_eq(run:result().answer, { n = 1 })
end)

t.case("a signal wait times out at its deadline", function()
  local run = t.start("timers.lua", { timeout = 7 * DAY }, { activities = { ["acts.finish"] = "ok" } })
  local w = run:wait_for_signal("go")
  t.assert_eq(w.timeout, 7 * DAY)
  t.assert_eq(w.remaining, 7 * DAY)
  run:advance(7 * DAY)
  t.assert_eq(run:result(), { slept = 30 * DAY, waited = 7 * DAY, why = "timeout", r = "ok" })
end)

t.case("wait_until skips the clock through timers and timeouts", function()
  local run = t.start("timers.lua", { timeout = 7 * DAY }, { activities = { ["acts.finish"] = "ok" } })
  t.assert_eq(run:wait_until("completed"), "completed")
  t.assert_eq(run:result().why, "timeout")
end)

t.case("a stub that raises is retried with backoff in virtual time, then the run fails", function()
  local at = {}
  local run = t.start("timers.lua", { timeout = 1 }, { activities = {
    ["acts.finish"] = function(args, info)
      at[#at + 1] = t.now()
      t.assert_eq(args.slept, 30 * DAY)
      error({ type = "Unavailable", message = "attempt " .. info.attempt .. " fails" })
    end } })
  run:wait_until("failed")
  t.assert_eq(#run:calls("acts.finish"), 4, "max_attempts")
  t.assert_eq({ at[2] - at[1], at[3] - at[2], at[4] - at[3] }, { 60, 120, 240 })
  t.assert_eq(run:error().type, "Unavailable")
  t.assert_eq(run:error().message, "attempt 4 fails")
end)

t.case("a stub that raises once is retried and the run completes", function()
  local run = t.start("timers.lua", { timeout = 1 }, { activities = {
    ["acts.finish"] = function(_, info)
      if info.attempt == 1 then error("flaky") end
      return "second time"
    end } })
  run:wait_until("completed")
  t.assert_eq(run:result().r, "second time")
end)

t.case("a stub that takes time moves the clock by it", function()
  local run = t.start("timers.lua", { timeout = 1 }, { activities = { ["acts.finish"] = t.taking(90, "done") } })
  run:wait_for_signal("go")
  local t0 = t.now()
  run:wait_until("completed")
  t.assert_eq(run:result().r, "done")
  t.assert_eq(t.now() - t0, 1 + 90, "the signal's timeout, then the attempt's 90 s")
end)

t.case("an attempt past its start_to_close ends as Timeout at that deadline, and is retried", function()
  local at = {}
  local run = t.start("timers.lua", { timeout = 1 }, { activities = {
    ["acts.finish"] = t.taking(400, function() at[#at + 1] = t.now() return "never seen" end) } })
  run:wait_until("failed")
  t.assert_eq(run:error().type, "Timeout")
  t.assert_eq(#run:calls("acts.finish"), 4, "max_attempts")
  -- each attempt ends at the default 300 s, then its backoff
  t.assert_eq({ at[2] - at[1], at[3] - at[2], at[4] - at[3] }, { 300 + 60, 300 + 120, 300 + 240 })
end)

t.case("a non-retryable error is not retried", function()
  local run = t.start("timers.lua", { timeout = 1 }, { activities = {
    ["acts.finish"] = function() error({ type = "Bad", message = "no", non_retryable = true }) end } })
  run:wait_until("failed")
  t.assert_eq(#run:calls("acts.finish"), 1)
end)

t.case("an edit that keeps the history replays; one that changes it does not", function()
  local run = t.start("timers.lua", { timeout = 1 }, { activities = { ["acts.finish"] = "ok" } })
  run:wait_until("completed")
  t.assert_replays(run)
  t.assert_replays(run, "timers.lua")
  local ok, report = run:replay("timers_edited.lua")
  t.assert_eq(ok, false)
  t.assert_match(report, "non%-determinism at event #2")
end)
