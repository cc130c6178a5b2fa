-- Uses what the sandbox makes deterministic (tostring, string.format, pairs,
-- table.sort with ties, its own coroutines, history_length, draws in and out
-- of checkpoints) around an activity and a timer, and returns what it saw.
local wf = require "workflow"
return function(input)
  local seen = {}
  local t = { b = 1, a = 2, [3] = "x", [1.5] = "y", [true] = "z", [{}] = "table key" }
  for k in pairs(t) do seen[#seen + 1] = tostring(k) end
  local rows = {}
  for i = 1, 200 do rows[i] = { k = i % 4, id = i } end
  table.sort(rows, function(x, y) return x.k < y.k end)
  local order = {}
  for i = 1, 200, 25 do order[#order + 1] = rows[i].id end
  local gen = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i * i) end end)
  local squares = { gen(), gen(), gen() }
  local lens = { wf.info().history_length }
  local ck = wf.checkpoint("ck", function() return { wf.uuid(), tostring({}) } end)
  wf.activity("acts.echo", { u = wf.uuid(), s = string.format("%s %5.1f %q", print, 2.25, "q") })
  lens[#lens + 1] = wf.info().history_length
  wf.sleep(0)
  lens[#lens + 1] = wf.info().history_length
  return { keys = table.concat(seen, " "), order = table.concat(order, ","), squares = squares,
    lens = lens, ck = ck, after = wf.uuid(), r = wf.random(1000000), fn = tostring(function() end) }
end
