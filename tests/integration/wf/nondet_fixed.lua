-- The fix for nondet.lua: always the branch the run took.
local wf = require "workflow"
return function(input)
  wf.activity("acts.echo", { first = true })
  local s = wf.wait_signal("go")
  return { got = s, fixed = true }
end
