-- One sandbox session for the sandbox benchmark: provision, 10 execs, destroy.
local wf = require "workflow"
return function(input)
  local sb = wf.activity("sandbox.provision", { session_id = wf.info().id, limits = { memoryMb = 256, pids = 64, cpu = 1 } },
    { start_to_close = 300, retry = { max_attempts = 1 } })
  for i = 1, input.execs or 10 do
    local r = wf.activity("sandbox.exec", { sandbox = sb, cmd = { "echo", "step " .. i }, timeout = 30 },
      { start_to_close = 120, retry = { max_attempts = 1 } })
    if r.exit_code ~= 0 then error("exec " .. i .. " failed: " .. tostring(r.stderr)) end
  end
  wf.activity("sandbox.destroy", { sandbox = sb }, { retry = { max_attempts = 3 } })
  return "ok"
end
