-- Steps each after a short durable timer (test_pg_dispatch_flight.sh): every
-- timer is a task a dispatch takes, so a drain of these dispatches often.
local wf = require "workflow"

return function(input)
  local total = 0
  for i = 1, input.steps or 4 do
    wf.sleep(input.pause or 0.01)
    total = wf.activity("acts.step", { i = i, total = total }, { start_to_close = 30 }).total
  end
  return { total = total }
end
