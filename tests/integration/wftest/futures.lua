local wf = require "workflow"
return function(input)
  local a = wf.start_activity("x.a", { n = 1 })
  local b = wf.start_activity("x.b", { n = 2 })
  local s = wf.start_wait_signal("go", { timeout = 3600 })
  local r = wf.all({ a, b })
  local i, v = wf.any({ s, wf.start_timer(7200) })
  return { r[1], r[2], i, v }
end
