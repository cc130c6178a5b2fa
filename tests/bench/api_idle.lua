-- api_bench: a session that waits (its SSE watchers idle) until signalled.
local wf = require "workflow"

return function()
  wf.emit("ready", {})
  return wf.wait_signal("go", { timeout = 3600 })
end
