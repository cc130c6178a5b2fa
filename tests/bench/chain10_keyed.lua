-- chain10 under a concurrency limit: the 10 steps of chain10.lua while holding
-- a slot of pool "bench" (input.key, input.limit; W1 gives each workflow its
-- own key, so the limit is never waited for and what is measured is its cost).
local wf = require "workflow"

return function(input)
  wf.acquire("bench", { key = input.key, limit = input.limit or 1 })
  local v = input.x or 0
  for s = 1, 10 do
    v = wf.activity("bench_activities.step", { x = v, step = s })
  end
  return v
end
