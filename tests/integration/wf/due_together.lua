-- A timer and a signal's timeout due at the same moment: two tasks of one
-- workflow in one dispatch (test_pg_dispatch.sh).
local wf = require "workflow"

return function(input)
  local t = wf.start_timer(input.seconds)
  local s = wf.start_wait_signal("go", { timeout = input.seconds })
  t:wait()
  local v, why = s:wait()
  local echo = wf.activity("acts.echo", { k = input.k })
  return { signal = v and v.k or why, k = echo.k }
end
