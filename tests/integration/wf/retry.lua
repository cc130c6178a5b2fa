-- Runs one activity with the options given in the input and reports how it ended.
local wf = require "workflow"
return function(input)
  local ok, r = pcall(wf.activity, input.activity, input.args or {}, input.options)
  if ok then return { ok = true, value = r } end
  return { ok = false, type = r.type, message = r.message, attempts = r.attempts }
end
