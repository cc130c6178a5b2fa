-- The idempotency key an activity sees, in two runs of one workflow.
local wf = require "workflow"
return function(input)
  local k = wf.activity("det_acts.key", {})
  if not input.first then wf.continue_as_new({ first = k }) end
  return { first = input.first, second = k }
end
