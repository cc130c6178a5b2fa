-- child_parent.lua's all3 edited (test_child.sh): the second child gets
-- another input, so a replay of a run of the old script diverges at its
-- ChildStarted.
local wf = require "workflow"

return function(input)
  local fs = {}
  for i = 1, 3 do
    fs[i] = wf.start_child("child_worker", { n = i * 10, fail = (i == 2) })
  end
  local ok = pcall(wf.all, fs)
  return { ok = ok }
end
