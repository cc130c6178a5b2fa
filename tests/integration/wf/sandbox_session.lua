-- Provisions a sandbox, runs the input's steps against it (exec, read, write,
-- list, copy in/out, wait for a signal), collects output/ and destroys the
-- sandbox on every path (success, failure, cancellation). Each step's result
-- or typed error is returned under its name.
local wf = require "workflow"

local OPS = { exec = "sandbox.exec", read = "sandbox.read_file", write = "sandbox.write_file", list = "sandbox.list_files",
  copy_in = "sandbox.copy_in", copy_out = "sandbox.copy_out" }

return function(input)
  local sb = wf.activity("sandbox.provision", {
    session_id = wf.info().id, image = input.image, task = input.task or "# task\n", simple = input.simple or "",
    limits = input.limits or { memoryMb = 128, pids = 64, cpu = 1 }, files = input.files, skills = input.skills,
  }, { start_to_close = 120, retry = { max_attempts = 1 } })
  wf.emit("sandbox.ready", { driver = sb.driver, container = sb.container_id })
  local results = {}
  local ok, err = pcall(function()
    for _, s in ipairs(input.steps or {}) do
      if s.op == "wait" then
        results[s.name] = wf.wait_signal(s.signal or "go")
      else
        local args = { sandbox = sb, cmd = s.cmd, timeout = s.timeout, max_output = s.max_output, path = s.path,
          content = s.content, files = s.files }
        local okc, r = pcall(wf.activity, OPS[s.op], args, { start_to_close = 300, retry = { max_attempts = 1 } })
        results[s.name] = okc and r or { error = r }
      end
    end
    results.collected = wf.activity("sandbox.collect", { sandbox = sb })
  end)
  wf.activity("sandbox.destroy", { sandbox = sb }, { retry = { max_attempts = 10, initial_interval = 0.5 } })
  if not ok then error(err, 0) end
  return { sandbox = sb, results = results }
end
