-- A workflow with long waits, for engine test's virtual clock: a 30-day
-- durable timer, a signal wait with a timeout, an activity retried with backoff.
local wf = require "workflow"

return function(input)
  local t0 = wf.now()
  wf.sleep(30 * 86400)
  local slept = wf.now() - t0
  local answer, why = wf.wait_signal("go", { timeout = input.timeout })
  local waited = wf.now() - t0 - slept
  local r = wf.activity("acts.finish", { slept = slept },
    { retry = { max_attempts = 4, initial_interval = 60, backoff = 2, max_interval = 3600 } })
  return { slept = slept, waited = waited, why = why, answer = answer, r = r }
end
