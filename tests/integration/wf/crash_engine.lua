-- Its activity crashes the engine (SIGABRT) every time it runs.
local wf = require "workflow"
return function(input)
  return wf.activity("det_acts.crash_engine", {})
end
