-- The same probe in the workflow VM and (json_meaning_acts.probe) the activity VM.
local wf = require "workflow"
return function(input)
  local here = {}
  for _, name in ipairs({ "json", "cjson" }) do
    local j = require(name)
    local n = j.decode(input.text)
    here[name] = {
      int_type = math.type(n.int), big = tostring(n.big), big_type = math.type(n.big),
      encoded = j.encode({ b = 1, a = { 3, 2.5 } }),
      same_module = j == require("json"),
    }
  end
  return { workflow = here, activity = wf.activity("json_meaning_acts.probe", { text = input.text }) }
end
