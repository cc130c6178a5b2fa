-- Spends most of the instruction budget (the test sets ENGINE_WF_INSTRUCTIONS)
-- in each of several wake-ups: each one is under the budget, their sum is not.
local wf = require "workflow"
return function(input)
  local x = 0
  for round = 1, input.rounds do
    for i = 1, input.loop do x = x + i % 7 end
    if round % 2 == 0 then wf.sleep(0) else wf.activity("acts.echo", { round = round }) end
  end
  return { x = x, rounds = input.rounds }
end
