-- Waits for a signal with a timeout, then runs an activity that yields (the run
-- stays in memory while it runs): the stale-timeout reproduction.
local wf = require "workflow"
return function(input)
  local sig, why = wf.wait_signal("approval", { timeout = input.timeout or 2 })
  local after = wf.activity("acts.slow", { seconds = input.seconds or 0.3 })
  return { signal = sig, why = why, after = after }
end
