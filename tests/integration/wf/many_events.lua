-- Emits input.n domain events (more than one page of the API's answers).
local wf = require "workflow"
return function(input)
  for i = 1, input.n do wf.emit("tick", { i = i }) end
  return { n = input.n }
end
