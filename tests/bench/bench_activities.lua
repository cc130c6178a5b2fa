-- Activities of the benchmark workflows (run by the engine's activity VM).
local activity = require "activity"

local M = {}

-- $STEP_COUNTER_FILE (W4 only): one line "<workflow id> <step>" per execution of
-- a step body, written unbuffered so it reaches the kernel before the step
-- returns and survives kill -9 of the process (like the peers' appendFileSync).
local counter
local counter_path = os.getenv("STEP_COUNTER_FILE")
if counter_path and counter_path ~= "" then
  counter = assert(io.open(counter_path, "a"))
  counter:setvbuf("no")
end

function M.step(args)
  if counter then
    -- one write: with several workers appending to the file, a line written
    -- in pieces (an unbuffered write per argument) interleaves with theirs
    counter:write(activity.info().workflow_id .. " " .. tostring(args.step) .. "\n")
  end
  return args.x + 1
end

return M
