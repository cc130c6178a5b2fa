-- Child workflows under engine test: a child's activities use the stubs of
-- the run it descends from (its id is the run's and ".N").
local t = require "enginetest"
t.case("two children, stubbed", function()
  local run = t.start("children.lua", {}, { activities = { ["x.a"] = function(a) return a.n * 10 end } })
  run:wait_until("completed")
  t.assert_eq(run:result(), { 10, 20 })
end)
