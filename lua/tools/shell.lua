-- shell (sandbox side): runs a command with sh -c inside the sandbox (no
-- network, no credentials, read-only root). The policies in policies/ decide
-- beforehand whether a command needs a human's approval.
local common = require "tools.common"

local DEFAULT_TIMEOUT = 60
local MAX_TIMEOUT = 600 -- lowered by limits.shellTimeoutSeconds / limits.toolTimeoutSeconds

local M = {
  name = "shell",
  description = "Run a shell command (sh -c) in the sandbox, in /workspace/working. No network. " ..
    "Returns the exit code, stdout and stderr (truncated when long).",
  parameters = {
    type = "object",
    properties = {
      command = { type = "string", minLength = 1, maxLength = 16384, description = "the command line" },
      timeout = { type = "integer", minimum = 1, maximum = MAX_TIMEOUT, description = "seconds (default 60)" },
    },
    required = { "command" },
    additionalProperties = false,
  },
  side = "sandbox",
  execs = true, -- runs a process in the sandbox: one at a time (lua/tools/init.lua)
  publishes = false,
  writes = true,
}

function M.timeout(ctx, args)
  local limits = ctx and ctx.limits or {}
  local cap = MAX_TIMEOUT
  for _, k in ipairs({ "shellTimeoutSeconds", "toolTimeoutSeconds" }) do
    if type(limits[k]) == "number" and limits[k] > 0 and limits[k] < cap then cap = limits[k] end
  end
  return math.max(1, math.min(args.timeout or DEFAULT_TIMEOUT, cap))
end

-- The text the model sees for an exec result (shared with run_tests).
function M.format(r, max)
  local parts = { "exit code: " .. tostring(r.exit_code) }
  if r.error then parts[#parts + 1] = "error: " .. r.error end
  local out = r.stdout or ""
  local err = r.stderr or ""
  if out ~= "" then parts[#parts + 1] = "--- stdout ---\n" .. (common.cap(out, max or 64 * 1024, "stdout")) end
  if err ~= "" then parts[#parts + 1] = "--- stderr ---\n" .. (common.cap(err, 16 * 1024, "stderr")) end
  if out == "" and err == "" then parts[#parts + 1] = "(no output)" end
  return table.concat(parts, "\n")
end

function M.run(ctx, args)
  local sandbox = require "sandbox"
  local timeout = M.timeout(ctx, args)
  local r = sandbox.exec(ctx.sandbox, { "sh", "-c", args.command },
    { timeout = timeout, max_output = 512 * 1024, workdir = common.WORKDIR })
  return { content = M.format(r),
    data = { exit_code = r.exit_code, timed_out = r.timed_out or false, oom_killed = r.oom_killed or false,
      disk_full = r.disk_full or nil } }
end

return M
