-- chain10 with every step a local activity ({local = true}): the fast path,
-- run in the batch of its scheduling; a crash before that batch commits runs
-- the steps again with it. The benchmark's row beside the durable default.
local wf = require "workflow"

return function(x)
  local v = x
  for s = 1, 10 do
    v = wf.activity("bench_activities.step", { x = v, step = s }, { ["local"] = true })
  end
  return v
end
