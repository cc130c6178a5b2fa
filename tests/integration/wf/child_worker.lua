-- A child workflow (test_child.sh, started by child_parent.lua): one
-- activity (its side effect marks each run), then it fails, waits for a
-- signal, or returns (with the tokens and cost it was given, as a session's
-- result has them). A cancelled one runs its clean-up activity.
local wf = require "workflow"

return function(input)
  local r = wf.activity("acts.echo", { child = input.n })
  if input.fail then error({ type = "ChildBoom", message = "child " .. input.n .. " failed on purpose" }) end
  if input.wait then
    local ok, err = pcall(wf.wait_signal, "go")
    if not ok then
      wf.activity("acts.echo", { child_cleanup = input.n })
      error(err)
    end
  end
  -- spend as a session's result reports it (the tree's roll-up reads it)
  return { n = r.child, id = wf.info().id, tokens = input.tokens, cost_usd = input.cost_usd }
end
