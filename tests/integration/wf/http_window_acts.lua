-- A streamed GET whose reader stops for a while after the first bytes (as an
-- activity busy elsewhere would), then reads the rest: with read_into=true,
-- through a Docker demuxer as a byte sink instead of Lua strings.
local http = require "http"
local activity = require "activity"
local M = {}

function M.read_slowly(a)
  local res = http.request { url = a.url, stream = true, idle_timeout = a.idle_timeout, timeout = 60 }
  local n = #(res:read() or "")
  activity.sleep(a.pause)
  local sink = a.read_into and require("docker.native").demuxer(0)
  while true do
    local got = sink and res:read_into(sink) or (not sink and res:read())
    if not got then break end
    n = n + (sink and got or #got)
  end
  return { bytes = n, status = res.status }
end

return M
