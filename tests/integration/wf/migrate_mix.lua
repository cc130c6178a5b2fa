-- A workflow with a bit of every durable thing engine migrate copies: random
-- draws, a checkpoint, an activity, a domain event, a timer, and (wait=true)
-- a signal it waits for, or one buffered before it waits (test_migrate.sh).
local wf = require "workflow"

return function(input)
  local drawn = wf.checkpoint("drawn", function() return { u = wf.uuid(), r = wf.random(1, 1000000) } end)
  local echoed = wf.activity("acts.echo", { i = input.i })
  wf.emit("step", { i = input.i, u = drawn.u })
  wf.sleep(input.sleep or 0)
  if input.wait then
    local v, why = wf.wait_signal("go", { timeout = 86400 })
    return { i = input.i, drawn = drawn, echoed = echoed, go = v, why = why, r = wf.random(1, 1000000) }
  end
  return { i = input.i, drawn = drawn, echoed = echoed, r = wf.random(1, 1000000) }
end
