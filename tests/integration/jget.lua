-- jget.lua PATH: prints the value at a dotted PATH of the JSON on stdin
-- ("turn.tool_calls.1.name"); tables are printed as JSON, nil as "nil".
local cjson = require "cjson"
local v = cjson.decode(io.read("a"))
for part in (arg[1] or ""):gmatch("[^%.]+") do
  if type(v) ~= "table" then v = nil break end
  local n = tonumber(part)
  v = v[n or part]
  if v == nil and n then v = nil end
end
if type(v) == "table" then io.write((cjson.encode(v):gsub("\\/", "/")))
elseif v == nil or v == cjson.null then io.write("nil")
elseif math.type(v) == "float" and v == math.floor(v) then io.write(string.format("%d", v))
else io.write(tostring(v)) end
