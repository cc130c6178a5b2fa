-- waiter(): records a durable "ready" marker, then waits for the signal "go"
-- and returns its payload (the peers: DBOS setEvent + recv, Restate promises).
local wf = require "workflow"

return function()
  wf.emit("ready", { ready = 1 })
  local v, why = wf.wait_signal("go", { timeout = 3600 })
  if why == "timeout" then error("no signal within 3600 s") end
  return v
end
