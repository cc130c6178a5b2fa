-- The activity of live_text.lua: each part as an agent.delta of the step, a
-- tool-call delta among them (a watcher shows only text), then the whole text.
local activity = require "activity"
local M = {}

function M.stream(args)
  local step = activity.info()
  for i, part in ipairs(args.parts) do
    activity.live("agent.delta", { step = step.seq, attempt = step.attempt, n = i, delta = { type = "text", text = part } })
    if i == 1 then
      activity.live("agent.delta", { step = step.seq, attempt = step.attempt, n = i,
        delta = { type = "tool_call", id = "c1", arguments = "{\"x\":" } })
    end
    activity.sleep(0.05)
  end
  return table.concat(args.parts)
end

return M
