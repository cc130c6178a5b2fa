-- Deliberately non-deterministic: takes another branch when replaying.
local wf = require "workflow"
return function(input)
  if wf.is_replaying() then
    wf.sleep(1)
  else
    wf.activity("acts.echo", { first = true })
  end
  local s = wf.wait_signal("go")
  return { got = s }
end
