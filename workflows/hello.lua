-- hello.lua: the example workflow. It uses every durable primitive once:
-- activity (with retries), checkpoint, emit, sleep, wait_signal (with timeout),
-- patched, and a cleanup path that runs when the workflow is cancelled.
--
--   engine start workflows/hello.lua --input '{"name":"Ada","n":3}'
--   engine signal <ID> approval '{"approved":true}'   -- from another terminal
local wf = require "workflow"

return function(input)
  local name = input.name or "world"
  local n = input.n or 3

  -- recorded once; replays return the recorded value without running it again
  local started = wf.checkpoint("started", function()
    return { at = wf.now(), ticket = wf.uuid() }
  end)
  wf.emit("session.created", { name = name, ticket = started.ticket })

  local ok, err = pcall(function()
    local greetings = {}
    for i = 1, n do
      -- each call is its own activity; a crash resumes after the last completed one
      greetings[i] = wf.activity("hello_activities.greet", { name = name, i = i },
        { start_to_close = 10, retry = { max_attempts = 3, initial_interval = 0.1 } })
      wf.emit("agent.message", { text = greetings[i] })
    end

    wf.sleep(input.sleep or 0.2)  -- a durable timer: survives restarts

    wf.emit("approval.requested", { what = "publish greetings" })
    local decision, why = wf.wait_signal("approval", { timeout = input.approval_timeout or 3600 })
    if why == "timeout" then
      decision = { approved = false, reason = "timed out" }
    end
    wf.emit("approval.decided", decision)

    local summary
    if wf.patched("summary-v2") then
      summary = wf.activity("hello_activities.summarize", { greetings = greetings, approved = decision.approved })
    else
      summary = table.concat(greetings, " ")
    end
    return { greetings = greetings, approved = decision.approved == true, summary = summary }
  end)

  if not ok then
    -- cancellation (or any failure) comes here: clean up, then end the same way
    wf.activity("hello_activities.cleanup", { ticket = started.ticket })
    wf.emit("session.failed", { error = tostring(err) })
    error(err, 0)
  end
  wf.emit("session.completed", { summary = err.summary })
  return err
end
