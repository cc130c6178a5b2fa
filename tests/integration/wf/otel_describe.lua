-- Describes its run and its steps' spans in a trace (test_otel_spans.sh):
-- wf.span names the run, an activity describes its own span (acts.describe)
-- beside what the workflow adds (the option span_attributes); then a flaky
-- activity, and, when the input asks, an approval wait and an activity held
-- by a gate file (for a restart or a kill -9 in between).
local wf = require "workflow"
return function(input)
  wf.span({ attributes = { ["gen_ai.operation.name"] = "invoke_agent", ["gen_ai.agent.name"] = "tester" } })
  local traced = wf.activity("acts.describe", {},
    { span_attributes = { ["test.who"] = "the workflow", ["test.workflow"] = "yes" } })
  local flaky = wf.activity("acts.flaky", { succeed_on = input.succeed_on or 2 },
    { retry = { initial_interval = 0.01 } })
  local approved
  if input.approval then
    local answer = wf.wait_signal("approval:" .. input.approval)
    approved = type(answer) == "table" and answer.approved == true
  end
  local gated = input.gate and wf.activity("acts.window", { n = 7, gate = input.gate }, { start_to_close = 120 })
  return { traced = traced, flaky = flaky, approved = approved, gated = gated }
end
