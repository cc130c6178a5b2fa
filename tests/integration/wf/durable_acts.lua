-- The step of durable_steps.lua. Its body appends "<id> begin <step>
-- <committed>" to $TEST_SIDE_EFFECTS when it begins, where committed is how
-- many ActivityCompleted events of its workflow another connection reads from
-- the database ($STEP_SQL runs the query): only what is committed. Then
-- "<id> end <step>" when it returns (after a pause that yields, with yield).
local activity = require "activity"
local M = {}

-- begun with a newline of its own: a kill -9 can cut a write short where it
-- crosses a page of the file, and the torn line must not swallow the start
-- of the next one (readers match whole lines; empty ones count for nothing)
local function append(line)
  local f = assert(io.open(assert(os.getenv("TEST_SIDE_EFFECTS")), "a"))
  f:setvbuf("no")
  f:write("\n" .. line .. "\n")
  f:close()
end

local function committed(id)
  local q = "select count(*) from history where wf_id = '" .. id .. "' and type = 'ActivityCompleted'"
  local p = assert(io.popen(os.getenv("STEP_SQL") .. ' "' .. q .. '"'))
  local n = tonumber(p:read("a"):match("%d+"))
  p:close()
  return n or -1
end

function M.step(args)
  local id = activity.info().workflow_id
  append(string.format("%s begin %d %d", id, args.step, committed(id)))
  if args.yield then activity.sleep(0.02) end
  append(string.format("%s end %d", id, args.step))
  return { step = args.step }
end

return M
