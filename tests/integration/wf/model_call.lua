-- Calls the model.turn activity once with the input's model, messages, tools
-- and options; reports the turn or the typed error.
local wf = require "workflow"
return function(input)
  local ok, r = pcall(wf.activity, "model.turn", {
    model = input.model, system = input.system, messages = input.messages or { { role = "user", content = "hi" } },
    tools = input.tools, options = input.options,
  }, { start_to_close = input.start_to_close or 60, retry = { max_attempts = 1 } })
  if ok then return { ok = true, turn = r } end
  return { ok = false, err = r }
end
