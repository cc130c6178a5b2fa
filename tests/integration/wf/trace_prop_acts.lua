-- The activity of trace_prop.lua: one GET of URL/trace/TAG/ATTEMPT (the
-- test's server records its headers), with a traceparent of the script's
-- own when given; attempt 1 of a flaky call fails after its request.
local http = require "http"
local activity = require "activity"
local M = {}

function M.call(a)
  local info = activity.info()
  local res = http.request {
    url = a.url .. "/trace/" .. a.tag .. "/" .. info.attempt,
    headers = a.own and { TraceParent = a.own } or nil,
    timeout = 30,
  }
  if a.flaky and info.attempt == 1 then error({ type = "Flaky", message = "the first attempt fails" }) end
  return { status = res.status, traceparent = info.traceparent }
end

return M
