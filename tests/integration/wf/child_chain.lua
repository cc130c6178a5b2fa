-- A chain of child workflows (test_child.sh, the depth limit): each starts
-- itself as the next, one deeper, until input.to; a start that is refused
-- ends the chain there, its error in the result. input.opts goes to each
-- wf.child (max_depth, max_fanout).
local wf = require "workflow"

return function(input)
  local depth = input.depth or 0
  if depth >= input.to then return { depth = depth } end
  local ok, r = pcall(wf.child, "child_chain", { depth = depth + 1, to = input.to, opts = input.opts }, input.opts)
  if ok then return { depth = depth, below = r } end
  return { depth = depth, refused = r.type, message = r.message, limit = r.limit, max = r.max, child_depth = r.depth,
           child = r.child }
end
