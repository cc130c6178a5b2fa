-- The same measure in the workflow VM and (json_meaning_acts.probe) the activity VM.
local wf = require "workflow"
local acts = require "json_meaning_acts"
return function(input)
  return { workflow = acts.measure(input.text), activity = wf.activity("json_meaning_acts.probe", { text = input.text }) }
end
