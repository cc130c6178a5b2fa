-- timers.lua edited: an activity before the timer (it does not replay runs of timers.lua).
local wf = require "workflow"

return function(input)
  wf.activity("acts.prepare", {})
  wf.sleep(30 * 86400)
  return wf.wait_signal("go", { timeout = input.timeout })
end
