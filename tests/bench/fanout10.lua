-- fanout10(x): the 10 steps of chain10 started together (wf.start_activity)
-- and waited for with wf.all; each returns its input + 1, so the result is x + 1.
local wf = require "workflow"

return function(x)
  local futures = {}
  for s = 1, 10 do
    futures[s] = wf.start_activity("bench_activities.step", { x = x, step = s })
  end
  local results = wf.all(futures)
  return results[10]
end
