-- A scheduled workflow that sleeps input.seconds on a durable timer (0: none),
-- so that a run can outlive its schedule's interval (test_schedules.sh).
local wf = require "workflow"
return function(input)
  local s = input.seconds or 0
  if s > 0 then wf.sleep(s) end
  return { slept = s, by = input.identity }
end
