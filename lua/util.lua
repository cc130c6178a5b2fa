-- Small helpers shared by the engine's Lua library (activities side).
local M = {}

-- Raises a typed error {type=, message=, ...extra} that activities and
-- workflows can branch on (err.type).
function M.raise(type_, message, extra)
  local e = { type = type_, message = message }
  for k, v in pairs(extra or {}) do e[k] = v end
  error(e, 0)
end

-- A workflow's declared input schema, lua/types/NAME_input.schema.json,
-- decoded; read at each call (an edit applies to the next session).
function M.input_schema(name)
  local path = require("activity").worker().lua_dir .. "/types/" .. name .. "_input.schema.json"
  local f, err = io.open(path, "rb")
  if not f then M.raise("InputSchemaMissing", "cannot read the input's schema: " .. tostring(err)) end
  local text = f:read("a")
  f:close()
  return require("json").decode(text)
end

-- input checked against workflow NAME's declared schema: every problem named
-- (a list, maybe empty, with an identity past 300 bytes among them), and the
-- schema.
function M.check_input(name, input)
  local schema, problems = M.input_schema(name), {}
  local _, errors = require("jsonschema").validate(schema, input, "input")
  for _, e in ipairs(errors or {}) do problems[#problems + 1] = e end
  if type(input) == "table" and type(input.identity) == "string" and #input.identity > 300 then
    problems[#problems + 1] = "identity must be a string of at most 300 bytes"
  end
  return problems, schema
end

-- s quoted for /bin/sh as one word.
function M.shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- A file's whole text, or nil and why (a missing file, a folder, no permission).
function M.read_file(path)
  local f, err = io.open(path, "r")
  if not f then return nil, err end
  local s, rerr = f:read("a")
  f:close()
  return s, rerr
end

-- Whether list (a sequence; anything else counts as empty) holds value.
function M.contains(list, value)
  if type(list) ~= "table" then return false end
  for _, v in ipairs(list) do
    if v == value then return true end
  end
  return false
end

return M
