-- A parent of child workflows (test_child.sh): wf.child, wf.start_child with
-- wf.all, parent_close, cancel, timeout, an id in use, the fan-out limit,
-- spend rolled up over the tree.
local wf = require "workflow"

local modes = {}

-- three children at once, the second failing: the error, then each one's result
function modes.all3(input)
  local fs = {}
  for i = 1, 3 do
    fs[i] = wf.start_child("child_worker", { n = i, fail = (i == 2) })
  end
  local ok, err = pcall(wf.all, fs)
  local out = { ok = ok, error_type = err.type, error_message = err.message, child = err.child }
  local a, b = fs[1]:wait(), fs[3]:wait()
  out.sum = a.n + b.n
  out.first = wf.child("child_worker", { n = 10 }).n -- blocking form, after the others
  return out
end

-- two children that report spend as sessions do (the second waits for its
-- signal "go"); the parent's own spend is 10 tokens and $0.001, and its
-- result's totals include its children's, as a delegating session's do
function modes.spend(input)
  local a = wf.start_child("child_worker", { n = 1, tokens = 100, cost_usd = 0.01 })
  local b = wf.start_child("child_worker", { n = 2, tokens = 200, cost_usd = 0.02, wait = true })
  local ra, rb = a:wait(), b:wait()
  local sub = { count = 2, tokens = ra.tokens + rb.tokens, cost_usd = ra.cost_usd + rb.cost_usd }
  return { tokens = 10 + sub.tokens, cost_usd = 0.001 + sub.cost_usd, sub_sessions = sub }
end

-- n children that each wait for their signal "go": the sum of their numbers
function modes.fan(input)
  local fs = {}
  for i = 1, input.n do fs[i] = wf.start_child("child_worker", { n = i, wait = true }) end
  local sum = 0
  for _, r in ipairs(wf.all(fs)) do sum = sum + r.n end
  return { sum = sum }
end

-- n children at once, more than the fan-out limit allows: the refused ones
-- settle at once (their refusal is their outcome); once the first accepted
-- one ended (the test signals it), one more start fits; then the rest end
function modes.fanlimit(input)
  local fs = {}
  for i = 1, input.n do fs[i] = wf.start_child("child_worker", { n = i, wait = true }, input.opts) end
  pcall(fs[input.n].wait, fs[input.n]) -- the refusals come in one commit: after the last, all have settled
  local out = { refused = {}, running = {} }
  for i, f in ipairs(fs) do
    if f:ready() then
      local _, err = pcall(f.wait, f)
      out.refused[#out.refused + 1] = string.format("%s %s: %s (%s %s, running %s)", err.child, err.type, err.message,
        err.limit, err.max, err.running)
    else
      out.running[#out.running + 1] = i
    end
  end
  fs[out.running[1]]:wait()
  out.extra = wf.child("child_worker", { n = 100 }, input.opts).n
  for k = 2, #out.running do fs[out.running[k]]:wait() end
  return out
end

-- children waiting for a signal; the parent ends at once (completes)
function modes.close(input)
  for i, mode in ipairs(input.modes) do
    wf.start_child("child_worker", { n = i, wait = true }, { parent_close = mode, id = input.prefix .. mode })
  end
  wf.activity("acts.echo", { parent_done = true })
  return { started = #input.modes }
end

-- waits on a child that waits: cancelled meanwhile, the clean-up runs
function modes.cancel(input)
  local ok, err = pcall(wf.child, "child_worker", { n = 1, wait = true })
  wf.activity("acts.echo", { parent_cleanup = true, error = err.type })
  error(err)
end

-- a child that waits past its timeout
function modes.timeout(input)
  local ok, err = pcall(wf.child, "child_worker", { n = 1, wait = true }, { timeout = input.timeout or 1 })
  return { ok = ok, type = err.type, message = err.message, child = err.child }
end

-- an id that a workflow has already
function modes.idinuse(input)
  local ok, err = pcall(wf.child, "child_worker", { n = 1 }, { id = input.id })
  return { ok = ok, type = err.type, message = err.message }
end

-- a script that does not exist
function modes.noscript(input)
  local ok, err = pcall(wf.child, "no_such_child", {})
  return { ok = ok, type = err.type, message = err.message }
end

return function(input)
  local m = modes[input.mode or "all3"]
  if not m then error("unknown mode " .. tostring(input.mode)) end
  return m(input)
end
