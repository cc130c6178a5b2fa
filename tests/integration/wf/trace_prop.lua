-- W3C trace context (test_trace_propagation.sh): its activity's requests
-- carry the attempt's traceparent (input.url; attempt 1 of input.flaky
-- fails after its request, so attempt 2 sends another; input.own sets a
-- traceparent of the script's own), a wait for the signal "go" lets a
-- restart come between two requests, input.child starts a child in this
-- trace, input.print prints a line (the log carries the trace), input.again
-- continues as new that many times.
local wf = require "workflow"

return function(input)
  local out = {}
  local function call(tag, extra)
    local args = { url = input.url, tag = tag }
    for k, v in pairs(extra or {}) do args[k] = v end
    return wf.activity("trace_prop_acts.call", args, { retry = { max_attempts = 3, initial_interval = 0.01 } })
  end
  if input.print then print(input.print) end
  if input.url then out.first = call("first", { flaky = input.flaky, own = input.own }) end
  if input.wait then
    wf.wait_signal("go")
    if input.url then out.second = call("second") end
  end
  if input.child then out.child = wf.child("trace_prop", { print = input.child_print }) end
  if (input.again or 0) > 0 then wf.continue_as_new({ again = input.again - 1, url = input.url }) end
  return out
end
