-- Activities of the API benchmark's workflows.
local activity = require "activity"

local M = {}

-- A step that ends on a later loop iteration (a 1 ms timer), so each event
-- of api_ticks.lua lands in its own commit and the lag is one delivery's.
function M.tick(args)
  activity.sleep(0.001)
  return args.i
end

return M
