-- child_work(input): the work of one child in children_bench, and of one
-- independent workflow beside it: input.steps (default 1) sequential steps of
-- chain10's activity, each returns its input + 1, so the result is x + steps.
local wf = require "workflow"

return function(input)
  local v = input.x
  for s = 1, input.steps or 1 do
    v = wf.activity("bench_activities.step", { x = v, step = s })
  end
  return v
end
