-- What `require "cjson"` and `require "json"` mean in a VM: the workflow
-- requires this module and measures there; probe measures in the activity VM.
local M = {}

function M.measure(text)
  local out = {}
  for _, name in ipairs({ "json", "cjson" }) do
    local j = require(name)
    local n = j.decode(text)
    out[name] = {
      int_type = math.type(n.int), big = tostring(n.big),
      encoded = j.encode({ b = 1, a = { 3, 2.5 } }),
      same_module = j == require("json"),
    }
  end
  return out
end

function M.probe(args) return M.measure(args.text) end

return M
