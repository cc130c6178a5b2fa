-- Shapes of steps for test_durable_steps.sh: each step's body logs when it
-- begins and what it could read as committed (durable_acts.lua), so the test
-- can tell that no body began before the results it follows were durable.
local wf = require "workflow"

local function step(input, i, extra)
  local args = { step = i, yield = input.yield }
  for k, v in pairs(extra or {}) do args[k] = v end
  return wf.activity("durable_acts.step", args, { ["local"] = input["local"] or nil })
end

local shapes = {}

-- 1 -> 2 -> 3
function shapes.chain(input)
  local sum = 0
  for i = 1, 3 do sum = sum + step(input, i).step end
  return sum
end

-- 1, 2, 3 at once (wf.all), then 4 on their results
function shapes.futures(input)
  local fs = {}
  for i = 1, 3 do fs[i] = wf.start_activity("durable_acts.step", { step = i, yield = input.yield }) end
  local sum = 0
  for _, r in ipairs(wf.all(fs)) do sum = sum + r.step end
  return sum + step(input, 4, { after = sum }).step
end

-- 1, a durable timer, 2, 3
function shapes.timer(input)
  local sum = step(input, 1).step
  wf.sleep(0.05)
  return sum + step(input, 2).step + step(input, 3).step
end

-- 1, a signal, 2 (given the signal's payload), 3
function shapes.signal(input)
  local sum = step(input, 1).step
  local go = wf.wait_signal("go")
  return sum + step(input, 2, { go = go.n }).step + step(input, 3).step + go.n
end

return function(input) return shapes[input.shape](input) end
