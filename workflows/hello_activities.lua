-- Activities of hello.lua. They run outside the workflow sandbox (io, os and the
-- engine's bindings are available) and may run more than once: at-least-once.
local activity = require "activity"

local M = {}

-- Appends a line to $HELLO_SIDE_EFFECTS (when set) so tests can count
-- executions (the non-empty lines). Each begins with a newline of its own: a
-- kill -9 can cut a write short where it crosses a page of the file, and the
-- torn line must not swallow the start of the next one.
local function side_effect(what)
  local path = os.getenv("HELLO_SIDE_EFFECTS")
  if not path then return end
  local f = assert(io.open(path, "a"))
  local info = activity.info()
  f:write(string.format("\n%s %s %d\n", info.idempotency_key, what, info.attempt))
  f:close()
end

function M.greet(args)
  side_effect("greet")
  if os.getenv("HELLO_FAIL_FIRST") and activity.info().attempt == 1 then
    error({ type = "Flaky", message = "first attempt fails on purpose" })
  end
  return string.format("Hello, %s! (%d)", args.name, args.i)
end

function M.summarize(args)
  side_effect("summarize")
  return string.format("%d greetings, approved=%s", #args.greetings, tostring(args.approved))
end

function M.cleanup(args)
  side_effect("cleanup")
  return { cleaned = args.ticket }
end

return M
