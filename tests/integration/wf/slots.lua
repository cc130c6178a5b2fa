-- Holds a slot of pool "p" (key, limit, strategy from the input) for `hold`
-- seconds (or, with `until_signal`, until that signal comes; with `gate`, it
-- waits for that signal before it asks for the slot) and reports what it saw: how many held it with it (a counter the
-- holders move), in which order it got it, and what the counters and rates say.
local wf = require "workflow"

return function(input)
  local key = input.key or ""
  if input.gate then wf.wait_signal(input.gate) end
  local ok, why = wf.acquire("p", { key = key, limit = input.limit or 1, strategy = input.strategy })
  if not ok then return { dropped = why } end
  local with = wf.counter("holding:" .. key, 1)
  local order = wf.counter("order:" .. key, 1)
  local waited
  if input.rate then waited = wf.rate("r:" .. key, input.rate) end
  if input.pause then wf.rate("r:" .. key, { per = input.rate and input.rate.per or 1, charge = 0, pause = input.pause }) end
  if (input.hold or 0) > 0 then wf.sleep(input.hold) end
  if input.until_signal then wf.wait_signal(input.until_signal) end
  wf.counter("holding:" .. key, -1)
  local released = input.release and wf.release("p", { key = key }) or nil
  if input.after then wf.sleep(input.after) end
  return { with = with, order = order, waited = waited, granted_at = wf.now(), released = released }
end
