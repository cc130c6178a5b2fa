-- Activities for the error-boundary, budget and determinism tests.
local activity = require "activity"
local M = {}

-- An error object in the "strict class" idiom: reading a field it does not
-- have raises.
function M.strict_error()
  error(setmetatable({}, { __index = function(_, k) error("no field " .. k) end }))
end

-- Kills the engine running it with SIGABRT, as a crash in the engine would.
function M.crash_engine()
  local f = assert(io.open("/proc/self/stat"))
  local pid = f:read("n")
  f:close()
  os.execute("kill -ABRT " .. pid)
  return "still alive"
end

function M.key() return activity.info().idempotency_key end

return M
