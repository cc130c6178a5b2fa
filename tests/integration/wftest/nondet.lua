-- A workflow that takes another path when it is replayed: engine test's
-- determinism check must catch it.
local wf = require "workflow"

return function()
  if wf.is_replaying() then
    wf.sleep(1)
  else
    wf.activity("acts.step", {})
  end
  return "done"
end
