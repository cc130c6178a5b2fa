-- One session of the output-flood benchmark: provision, one exec that prints
-- input.bytes bytes (kept: 64 KiB), destroy.
local wf = require "workflow"
return function(input)
  local sb = wf.activity("sandbox.provision", { session_id = wf.info().id, limits = { memoryMb = 256, pids = 256, cpu = 1 } },
    { start_to_close = 300, retry = { max_attempts = 1 } })
  local ok, r = pcall(wf.activity, "sandbox.exec", { sandbox = sb, cmd = { "head", "-c", tostring(input.bytes), "/dev/zero" },
    timeout = 600, max_output = 65536 }, { start_to_close = 900, retry = { max_attempts = 1 } })
  wf.activity("sandbox.destroy", { sandbox = sb }, { retry = { max_attempts = 3 } })
  if not ok then error(r, 0) end
  if r.output_bytes ~= input.bytes then error("counted " .. tostring(r.output_bytes) .. " bytes of " .. input.bytes) end
  return { output_bytes = r.output_bytes, kept = #r.stdout }
end
