-- continue_as_new: counts to input.to, one run per step, bounding each history.
local wf = require "workflow"
return function(input)
  local n = input.n or 0
  wf.activity("acts.echo", { n = n })
  if n < input.to then wf.continue_as_new({ n = n + 1, to = input.to }) end
  return { done = n, run = wf.info().run }
end
