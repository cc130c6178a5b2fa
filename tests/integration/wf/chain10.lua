-- Ten activities one after another, each adding its step to the total the
-- one before returned (test_pg_workers.sh: several workers, killed in turn).
local wf = require "workflow"

return function(input)
  local total = 0
  for i = 1, input.steps or 10 do
    local r = wf.activity("acts.step", { i = i, total = total, seconds = input.seconds },
      { start_to_close = 30, retry = { initial_interval = 0.1 } })
    total = r.total
  end
  return { total = total }
end
