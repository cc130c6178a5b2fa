-- Streams text to whoever watches it live, the way a model turn does
-- (activity.live "agent.delta", lua/activities/model.lua), once the signal
-- "go" arrives, then records the whole text as agent.message.
local wf = require "workflow"
return function(input)
  wf.wait_signal("go", { timeout = 600 })
  local text = wf.activity("live_text_acts.stream", { parts = input.parts or { "Hel", "lo, ", "world" } })
  wf.emit("agent.message", { text = text })
  return { text = text }
end
