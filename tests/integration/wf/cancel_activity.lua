local wf = require "workflow"
return function(input)
  local ok, err = pcall(wf.activity, "acts.slow", { seconds = 30 })
  if not ok then
    wf.activity("acts.echo", { cleanup = err.type })
    error(err, 0)
  end
  return "not cancelled"
end
