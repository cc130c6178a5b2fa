-- Started by many clients at once (test_pg_start_race.sh): waits for "go",
-- runs one step (acts.step marks it), and returns which start it was.
local wf = require "workflow"

return function(input)
  local go = wf.wait_signal("go")
  local r = wf.activity("acts.step", { i = 1, total = 0 }, { start_to_close = 30, retry = { initial_interval = 0.1 } })
  return { n = input.n, variant = input.variant, go = go and go.k, total = r.total }
end
