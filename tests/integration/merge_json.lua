-- merge_json.lua BASE.json OVERRIDES: prints BASE with OVERRIDES (a JSON
-- object) merged in: objects merge key by key, anything else replaces.
local cjson = require "cjson"
local f = assert(io.open(arg[1]))
local base = cjson.decode(f:read("a"))
f:close()
local spec = arg[2]
if spec:sub(1, 1) == "@" then
  local o = assert(io.open(spec:sub(2)))
  spec = o:read("a")
  o:close()
end
local over = cjson.decode(spec)
local function is_object(t) return type(t) == "table" and next(t) ~= nil and #t == 0 end
local function merge(a, b)
  for k, v in pairs(b) do
    if is_object(v) and is_object(a[k]) then merge(a[k], v) else a[k] = v end
  end
end
merge(base, over)
io.write((cjson.encode(base):gsub("\\/", "/")))
