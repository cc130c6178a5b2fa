-- The limits primitives with their defaults (wf.acquire, wf.release,
-- wf.rate with and without a charge, wf.counter add and read), for the
-- determinism property (test_determinism.sh): each records its outcome, and
-- a replay returns the same. Names carry the run's id: runs never share them.
local wf = require "workflow"

return function()
  local id = wf.info().id
  local got = wf.acquire("det-pool", { key = id })
  local waited = wf.rate("det-rate:" .. id, { limit = 5 })
  local charged = wf.rate("det-rate:" .. id, { charge = 2, pause = 0 })
  local total = wf.counter("det:" .. id, 3)
  local read = wf.counter("det:" .. id)
  local released = wf.release("det-pool", { key = id })
  local again = wf.release("det-pool", { key = id })
  return { got = got, waited = waited >= 0, charged = charged, total = total, read = read, released = released,
    again = again }
end
