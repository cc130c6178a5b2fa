-- children_parent(input): input.n children of child_work.lua (default 10),
-- started together with wf.start_child and waited for with wf.all; child i
-- (1..n) gets x = input.x * n + i - 1. Returns the sum of their results.
local wf = require "workflow"

return function(input)
  local n = input.n or 10
  local futures = {}
  for i = 1, n do
    futures[i] = wf.start_child("child_work", { x = input.x * n + i - 1, steps = input.steps })
  end
  local sum = 0
  for _, r in ipairs(wf.all(futures)) do
    sum = sum + r
  end
  return sum
end
