-- An activity that fails once and is retried after input.interval seconds; a
-- cancellation runs a cleanup activity: the cancel-plus-due-retry reproduction.
local wf = require "workflow"
return function(input)
  local ok, err = pcall(wf.activity, "acts.flaky", { succeed_on = 2 },
    { retry = { initial_interval = input.interval or 2, max_attempts = 3 } })
  if not ok then
    wf.activity("acts.echo", { cleanup = err.type })
    error(err, 0)
  end
  return "not cancelled"
end
