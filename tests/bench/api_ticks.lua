-- api_bench: input.n durable steps, each followed by a domain event that
-- carries the time it was emitted (what the SSE lag is measured from),
-- once signalled "go".
local wf = require "workflow"

return function(input)
  wf.wait_signal("go", { timeout = 3600 }) -- once the watchers are connected
  for i = 1, input.n do
    local v = wf.activity("api_activities.tick", { i = i })
    wf.emit("tick", { i = v, at = wf.now() })
  end
  return input.n
end
