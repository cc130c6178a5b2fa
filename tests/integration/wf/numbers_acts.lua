-- Activities of test_retry_numbers.sh: each attempt is marked in
-- $TEST_SIDE_EFFECTS, then raises the error given in args.
local activity = require "activity"
local M = {}

local function mark()
  local path = os.getenv("TEST_SIDE_EFFECTS")
  if not path then return end
  local f = assert(io.open(path, "a"))
  local i = activity.info()
  f:write(string.format("%s %d\n", i.workflow_id, i.attempt))
  f:close()
end

function M.raise(args) mark(); error(args.error or { type = "Boom", message = "fails" }, 0) end

function M.ok() mark(); return "ok" end

function M.big(args) mark(); return string.rep("x", args.bytes) end

return M
