-- Child workflows under engine test (children_test.lua): two children with
-- wf.all, each calling a stubbed activity.
local wf = require "workflow"
return function(input)
  if input.n then return wf.activity("x.a", { n = input.n }) end
  return wf.all({ wf.start_child("children", { n = 1 }), wf.start_child("children", { n = 2 }) })
end
