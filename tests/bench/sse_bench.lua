-- How the SSE parser's cost grows with the length of one line sent in many
-- chunks (lua/runners/common.lua sse_parser). Linear is the aim: each byte is
-- copied a few times, so 4x the line should cost about 4x. Prints a table.
--   lua5.4 tests/bench/sse_bench.lua        (from any directory)
local script = arg and arg[0] or "tests/bench/sse_bench.lua"
local repo = script:match("^(.*)/tests/bench/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. repo .. "/lua/?/init.lua;" .. package.path
local cjson = require "cjson"
package.preload["json"] = function() return { encode = cjson.encode, decode = cjson.decode, null = cjson.null } end
package.preload["activity"] = function() return { heartbeat = function() end, sleep = function() end } end
package.preload["http"] = function() return {} end
local C = require "runners.common"

local chunk = string.rep("x", 16384)
local function run(mib)
  local p = C.sse_parser()
  local t0 = os.clock()
  p.feed("data: ")
  for _ = 1, mib * 64 do p.feed(chunk) end
  local evs = p.feed("\n\n")
  assert(#evs == 1 and #evs[1].data == mib * 1024 * 1024)
  return os.clock() - t0
end

print("| line MiB (16 KiB chunks) | CPU s | s per MiB | vs 1 MiB |")
print("|---|---|---|---|")
local base
for _, mib in ipairs({ 1, 4, 8, 32 }) do
  local s = run(mib)
  base = base or s / mib
  print(string.format("| %d | %.3f | %.4f | %.2fx |", mib, s, s / mib, (s / mib) / base))
end
