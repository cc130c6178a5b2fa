-- Deliberately non-deterministic in its result only: the same commands live
-- and on replay, another value returned (the property test's negative control).
local wf = require "workflow"
return function(input)
  local replaying = wf.is_replaying()
  wf.activity("acts.echo", {})
  return { replaying = replaying }
end
