-- Writes text the way a hostile sandbox or model would: terminal escapes, C1
-- controls, bidi overrides, invalid UTF-8 and NUL, in every field the CLI
-- shows (event payloads, an event type, a signal name, the result, an error).
-- input.fail: end with an activity error carrying the text; input.wait: wait
-- for a signal named with it (until cancelled).
local wf = require "workflow"
return function(input)
  local t = wf.activity("hostile_text_acts.texts", {})
  wf.emit("session.created", { objective = t.all })
  wf.emit("sandbox.ready", { driver = "bwrap", container = t.all })
  wf.emit("agent.message", { text = t.all })
  wf.emit("tool.requested", { tool = t.name, args = { cmd = t.all } })
  wf.emit("tool.result", { tool = t.name, content = t.all })
  wf.emit("artifact.saved", { path = "output/" .. t.name, size = 3 })
  wf.emit(t.name, { note = t.all })
  wf.emit("tool.result", { tool = "shell", content = t.long })
  if input.wait then wf.wait_signal(t.name) end
  if input.fail then
    wf.activity("hostile_text_acts.fail", { message = t.all }, { retry = { max_attempts = 1 } })
  end
  return { text = t.all, long = t.long }
end
