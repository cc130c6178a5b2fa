-- For the HTTP API's stream tests (sse_suite.py): emits events on command.
-- Signal "cmd" {op = "emit", n = N, pad = BYTES, tag = T} emits N "tick"
-- events (each with a pad of BYTES x's); {op = "stop"} ends the workflow.
local wf = require "workflow"

return function(input)
  local total = 0
  while true do
    local cmd = wf.wait_signal("cmd") or {}
    if cmd.op == "stop" then break end
    local pad = string.rep("x", cmd.pad or input.pad or 0)
    for _ = 1, cmd.n or 1 do
      total = total + 1
      wf.emit("tick", { n = total, tag = cmd.tag, pad = pad })
    end
  end
  return { total = total }
end
