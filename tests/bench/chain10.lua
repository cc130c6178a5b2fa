-- chain10(x): 10 sequential durable steps, each returns its input + 1.
-- The same shape as the peers' chain10 (DBOS runStep / Restate ctx.run).
local wf = require "workflow"

return function(x)
  local v = x
  for s = 1, 10 do
    v = wf.activity("bench_activities.step", { x = v, step = s })
  end
  return v
end
