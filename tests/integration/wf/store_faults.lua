-- A little of everything a batch writes: domain events, a synchronous
-- activity, a retried one, a durable timer, an activity that yields, a
-- checkpoint. The store-fault tests fail writes under it.
local wf = require "workflow"
return function(input)
  wf.emit("agent.message", { step = 1 })
  local echo = wf.activity("acts.echo", { n = 1 })
  local flaky = wf.activity("acts.flaky", { succeed_on = 2 },
    { retry = { initial_interval = input.retry or 0.05, max_attempts = 5 } })
  wf.sleep(input.sleep or 0.05)
  local slow = wf.activity("acts.slow", { seconds = input.slow or 0.05, gate = input.gate })
  wf.emit("agent.message", { step = 2 })
  local c = wf.checkpoint("c", function() return 7 end)
  return { echo = echo.n, flaky = flaky, slow = slow, c = c }
end
