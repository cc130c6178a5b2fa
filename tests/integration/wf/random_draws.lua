-- Draws random values and uuids outside and inside checkpoint functions, with
-- an activity and a timer in between (a replay point after each).
local wf = require "workflow"
return function(input)
  local a = wf.uuid()
  local c = wf.checkpoint("inside", function() return { r = wf.random(1000000000), u = wf.uuid() } end)
  local b = wf.uuid()
  local act = wf.activity("acts.echo", { b = b, r = wf.random(1000000) })
  wf.sleep(0)
  local d = wf.uuid()
  local c2 = wf.checkpoint("again", function() return wf.uuid() end)
  local act2 = wf.activity("acts.echo", { d = d })
  return { a = a, b = b, c = c, c2 = c2, d = d, e = wf.uuid(), act = act, act2 = act2, f = wf.random(1000000) }
end
