-- What `require "cjson"` and `require "json"` mean in the activity VM.
local M = {}

function M.probe(args)
  local out = {}
  for _, name in ipairs({ "json", "cjson" }) do
    local j = require(name)
    local n = j.decode(args.text)
    out[name] = {
      int_type = math.type(n.int), big = tostring(n.big), big_type = math.type(n.big),
      encoded = j.encode({ b = 1, a = { 3, 2.5 } }),
      same_module = j == require("json"),
    }
  end
  return out
end

return M
