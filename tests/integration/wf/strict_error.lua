-- Fails with an error object whose metatable raises on unknown fields (the
-- "strict class" idiom): in the workflow itself, or in an activity.
local wf = require "workflow"
return function(input)
  if input.in_activity then
    return wf.activity("det_acts.strict_error", {}, { retry = { max_attempts = 1 } })
  end
  wf.activity("acts.echo", { before = true })
  error(setmetatable({}, { __index = function(_, k) error("no field " .. k) end }))
end
