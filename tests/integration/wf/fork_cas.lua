-- fork_cas.lua: a domain event in each run, continued as new up to input.to,
-- then a wait for the signal "go" (test_fork.sh forks a later run of it).
local wf = require "workflow"
return function(input)
  local n = input.n or 0
  wf.emit("step", { n = n, run = wf.info().run })
  wf.activity("acts.echo", { n = n })
  if n < input.to then wf.continue_as_new({ n = n + 1, to = input.to, wait = input.wait, tag = input.tag }) end
  local go = wf.wait_signal("go", { timeout = input.wait or 3600 })
  return { n = n, run = wf.info().run, go = go, tag = input.tag }
end
