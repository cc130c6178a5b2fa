-- Activities used by the integration tests.
local activity = require "activity"
local M = {}

-- One line "<key> <what> <attempt>" in $TEST_SIDE_EFFECTS, begun with a
-- newline of its own: a kill -9 can cut a write short where it crosses a
-- page of the file (Linux stops a write between pages for a fatal signal),
-- and the torn line must not swallow the start of the next writer's (a CI
-- run lost a step's mark so: "c-472/1/12 sc-483/1/12 step 1"). Readers match
-- whole lines, so the empty ones count for nothing.
local function mark(what)
  local path = os.getenv("TEST_SIDE_EFFECTS")
  if not path then return end
  local f = assert(io.open(path, "a"))
  local i = activity.info()
  f:write(string.format("\n%s %s %d\n", i.idempotency_key, what, i.attempt))
  f:close()
end

function M.echo(args) mark("echo"); return args end

-- proc.run with a timeout given as a number or as "inf" / "-inf" / "nan".
function M.proc_run(args)
  local t = ({ inf = math.huge, ["-inf"] = -math.huge, nan = 0 / 0 })[args.timeout] or args.timeout
  local r = require("proc").run({ argv = { "/bin/echo", "ran" }, timeout = t })
  return { exit_code = r.exit_code, stdout = r.stdout }
end

function M.fail(args)
  mark("fail")
  error({ type = args.type or "Boom", message = "failed on purpose", non_retryable = args.non_retryable })
end

function M.fail_string(args) mark("fail_string"); error("plain string error") end

function M.flaky(args)
  mark("flaky")
  if activity.info().attempt < (args.succeed_on or 2) then
    error({ type = "Flaky", message = "attempt " .. activity.info().attempt .. " fails" })
  end
  return "ok after " .. activity.info().attempt
end

-- one step of a chain (chain10.lua): adds i, optionally after a pause
function M.step(args)
  mark("step")
  if args.seconds then activity.sleep(args.seconds) end
  return { total = args.total + args.i }
end

-- describes its own span when the engine exports it (test_otel_spans.sh):
-- two calls, merged; its word wins over the workflow's for the same key
function M.describe(args)
  mark("describe")
  if activity.traced() then
    activity.span({ name = "described", kind = "client", attributes = { ["test.who"] = "the activity" } })
    activity.span({ attributes = { ["test.count"] = 7 } })
  end
  return activity.traced()
end

-- until the file gate exists (polled; the activity yields meanwhile), else
-- for seconds: a test holds an activity in flight as long as it needs to,
-- however slow the machine is
local function pause(gate, seconds)
  if not gate then return activity.sleep(seconds) end
  local f = io.open(gate)
  while not f do activity.sleep(0.05); f = io.open(gate) end
  f:close()
end

-- with args.gate, it ends once the test creates that file
function M.slow(args) mark("slow"); pause(args.gate, args.seconds or 5); return "slept" end

-- marks its start and its end: activities that overlap show every start
-- before an end. With args.gate (a file) it ends once the test creates it,
-- so a kill in between finds it running however slow the machine is.
function M.window(args)
  mark("window-start")
  pause(args.gate, args.seconds or 0.5)
  mark("window-end")
  return args.n
end

function M.spin(args) mark("spin"); while true do end end

function M.heartbeating(args)
  mark("heartbeating")
  for _ = 1, args.beats or 5 do activity.heartbeat(); activity.sleep(args.every or 0.05) end
  return "beat"
end
return M
