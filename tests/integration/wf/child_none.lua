-- child_parent.lua edited to start no child (test_child.sh): a replay of a
-- run that started children diverges at the first ChildStarted.
local wf = require "workflow"

return function(input)
  return wf.activity("acts.echo", { none = true })
end
