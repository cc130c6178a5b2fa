-- A small JSON Schema validator for tool arguments (and other inputs we define
-- ourselves). Plain Lua 5.4; no dependency at load time.
--
--   local jsonschema = require "jsonschema"
--   local ok, errors = jsonschema.validate(schema, value [, root])
--   -- ok == true, or ok == nil and errors = {"args.path: expected string, got number", ...}
--   local ok, errors = jsonschema.check_schema(schema)   -- is the schema itself well formed?
--
-- Supported keywords: type (a name or a list of names: null, boolean, integer,
-- number, string, array, object), properties, required, additionalProperties
-- (false or a schema), enum, const, items (one schema for every element),
-- minItems, maxItems, minLength, maxLength (in UTF-8 characters), minimum,
-- maximum, pattern. Annotation keywords (description, default, title,
-- examples, $schema) are accepted and ignored; any other keyword is refused by
-- check_schema, so a typo never silently validates nothing.
--
-- `pattern` is a *Lua pattern* (string.find), not an ECMA regex: it is meant
-- only for the schemas this project writes, never for schemas from outside.
--
-- Lua tables stand for both JSON objects and arrays: a table whose keys are
-- exactly 1..n is an array, a table with string keys is an object, and an
-- empty table matches both. JSON null is nil or json.null (when the "json"
-- module is loaded).
local M = {}

local null_value -- json.null, looked up lazily (the module may not exist in tests)
local function is_null(v)
  if v == nil then return true end
  if null_value == nil then
    local json = package.loaded["json"]
    if type(json) == "table" and json.null ~= nil then null_value = json.null end
  end
  return null_value ~= nil and v == null_value
end

-- "array", "object", "empty" (matches both) or "table" (mixed keys: neither).
local function table_kind(t)
  local n, max, strings, others = 0, 0, 0, 0
  for k in pairs(t) do
    n = n + 1
    if math.type(k) == "integer" and k >= 1 then
      if k > max then max = k end
    elseif type(k) == "string" then
      strings = strings + 1
    else
      others = others + 1
    end
  end
  if n == 0 then return "empty" end
  if strings == 0 and others == 0 and max == n then return "array" end
  if strings == n then return "object" end
  return "table"
end

-- The JSON type name of a Lua value, for messages.
local function type_name(v)
  if is_null(v) then return "null" end
  local t = type(v)
  if t == "boolean" or t == "string" then return t end
  if t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then return "non-finite number" end
    return "number"
  end
  if t == "table" then
    local k = table_kind(v)
    if k == "empty" then return "object" end
    if k == "table" then return "table with mixed keys" end
    return k
  end
  return t
end
M.type_name = type_name

local function has_type(v, name)
  if name == "null" then return is_null(v) end
  if name == "boolean" then return type(v) == "boolean" end
  if name == "string" then return type(v) == "string" end
  if name == "number" or name == "integer" then
    if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then return false end
    return name == "number" or math.type(v) == "integer" or v == math.floor(v)
  end
  if name == "array" or name == "object" then
    if type(v) ~= "table" or is_null(v) then return false end
    local k = table_kind(v)
    return k == "empty" or k == name
  end
  return false
end

local function deep_equal(a, b)
  if is_null(a) and is_null(b) then return true end
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then return a == b end
  for k, v in pairs(a) do
    if not deep_equal(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end

local function show(v)
  if type(v) == "string" then
    local s = v
    if #s > 40 then s = s:sub(1, 37) .. "..." end
    return string.format("%q", s)
  end
  if is_null(v) then return "null" end
  if type(v) == "table" then return type_name(v) end
  return tostring(v)
end

local function child_path(path, key)
  if type(key) == "string" and key:match("^[%a_][%w_]*$") then return path .. "." .. key end
  if type(key) == "string" then return path .. "[" .. string.format("%q", key) .. "]" end
  return path .. "[" .. tostring(key) .. "]"
end

local function str_len(s)
  return utf8.len(s) or #s
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

local validate_node

local function check_type(schema, value, path, errors)
  local t = schema.type
  if t == nil then return true end
  local names = type(t) == "table" and t or { t }
  for _, name in ipairs(names) do
    if has_type(value, name) then return true end
  end
  errors[#errors + 1] = string.format("%s: expected %s, got %s", path, table.concat(names, " or "), type_name(value))
  return false
end

function validate_node(schema, value, path, errors)
  if schema == true or schema == nil then return end
  if schema == false then
    errors[#errors + 1] = path .. ": no value is allowed here"
    return
  end
  if not check_type(schema, value, path, errors) then return end

  if schema.const ~= nil and not deep_equal(schema.const, value) then
    errors[#errors + 1] = string.format("%s: must be %s", path, show(schema.const))
  end
  if schema.enum ~= nil then
    local found = false
    for _, e in ipairs(schema.enum) do
      if deep_equal(e, value) then found = true break end
    end
    if not found then
      local opts = {}
      for i, e in ipairs(schema.enum) do opts[i] = show(e) end
      errors[#errors + 1] = string.format("%s: must be one of %s, got %s", path, table.concat(opts, ", "), show(value))
    end
  end

  if type(value) == "string" then
    local n = str_len(value)
    if schema.minLength and n < schema.minLength then
      errors[#errors + 1] = string.format("%s: must be at least %d characters long", path, schema.minLength)
    end
    if schema.maxLength and n > schema.maxLength then
      errors[#errors + 1] = string.format("%s: must be at most %d characters long", path, schema.maxLength)
    end
    if schema.pattern then
      local ok, found = pcall(string.find, value, schema.pattern)
      if not ok then
        errors[#errors + 1] = string.format("%s: the schema's pattern is invalid (%s)", path, tostring(found))
      elseif not found then
        errors[#errors + 1] = string.format("%s: does not match the pattern %s", path, schema.pattern)
      end
    end
  elseif type(value) == "number" then
    if schema.minimum and value < schema.minimum then
      errors[#errors + 1] = string.format("%s: must be >= %s", path, tostring(schema.minimum))
    end
    if schema.maximum and value > schema.maximum then
      errors[#errors + 1] = string.format("%s: must be <= %s", path, tostring(schema.maximum))
    end
  elseif type(value) == "table" and not is_null(value) then
    local kind = table_kind(value)
    if kind == "array" or (kind == "empty" and (schema.items ~= nil or schema.minItems or schema.maxItems)
        and not schema.properties and not schema.required) then
      local n = #value
      if schema.minItems and n < schema.minItems then
        errors[#errors + 1] = string.format("%s: must have at least %d items", path, schema.minItems)
      end
      if schema.maxItems and n > schema.maxItems then
        errors[#errors + 1] = string.format("%s: must have at most %d items", path, schema.maxItems)
      end
      if schema.items ~= nil then
        for i = 1, n do validate_node(schema.items, value[i], child_path(path, i), errors) end
      end
    end
    if kind == "object" or kind == "empty" then
      local props = schema.properties or {}
      for _, name in ipairs(schema.required or {}) do
        if value[name] == nil then
          errors[#errors + 1] = child_path(path, name) .. ": is required"
        end
      end
      for _, k in ipairs(sorted_keys(value)) do
        local v = value[k]
        local p = child_path(path, k)
        if props[k] ~= nil then
          validate_node(props[k], v, p, errors)
        elseif schema.additionalProperties == false then
          errors[#errors + 1] = p .. ": unexpected property"
        elseif type(schema.additionalProperties) == "table" then
          validate_node(schema.additionalProperties, v, p, errors)
        end
      end
    end
  end
end

-- validate(schema, value [, root]) -> true | nil, errors. root names the value
-- in messages ("value" unless given, e.g. "args").
function M.validate(schema, value, root)
  local errors = {}
  validate_node(schema, value, root or "value", errors)
  if #errors > 0 then return nil, errors end
  return true
end

-- ------------------------------------------------------------ schemas --

local TYPES = { null = true, boolean = true, integer = true, number = true, string = true, array = true, object = true }
local ANNOTATIONS = { description = true, default = true, title = true, examples = true, ["$schema"] = true, ["$comment"] = true }

local function is_nonneg_int(v) return type(v) == "number" and math.type(v) == "integer" and v >= 0 end

local function check_node(s, path, errors)
  if s == true or s == false then return end
  if type(s) ~= "table" then
    errors[#errors + 1] = path .. ": a schema must be a table or a boolean"
    return
  end
  for _, k in ipairs(sorted_keys(s)) do
    local v = s[k]
    local p = path .. "." .. tostring(k)
    if ANNOTATIONS[k] then
      -- ignored
    elseif k == "type" then
      local names = type(v) == "table" and v or { v }
      if type(v) == "table" and #v == 0 then errors[#errors + 1] = p .. ": an empty list of types" end
      for _, n in ipairs(names) do
        if not TYPES[n] then errors[#errors + 1] = p .. ": unknown type " .. show(n) end
      end
    elseif k == "properties" then
      if type(v) ~= "table" then
        errors[#errors + 1] = p .. ": must be a table of schemas"
      else
        for _, name in ipairs(sorted_keys(v)) do
          if type(name) ~= "string" then errors[#errors + 1] = p .. ": property names must be strings" end
          check_node(v[name], child_path(p, name), errors)
        end
      end
    elseif k == "required" then
      if type(v) ~= "table" then
        errors[#errors + 1] = p .. ": must be a list of property names"
      else
        for _, name in ipairs(v) do
          if type(name) ~= "string" then errors[#errors + 1] = p .. ": property names must be strings" end
        end
      end
    elseif k == "additionalProperties" or k == "items" then
      check_node(v, p, errors)
    elseif k == "enum" then
      if type(v) ~= "table" or #v == 0 then errors[#errors + 1] = p .. ": must be a non-empty list" end
    elseif k == "const" then
      -- any value
    elseif k == "minItems" or k == "maxItems" or k == "minLength" or k == "maxLength" then
      if not is_nonneg_int(v) then errors[#errors + 1] = p .. ": must be a non-negative integer" end
    elseif k == "minimum" or k == "maximum" then
      if type(v) ~= "number" then errors[#errors + 1] = p .. ": must be a number" end
    elseif k == "pattern" then
      if type(v) ~= "string" then
        errors[#errors + 1] = p .. ": must be a string (a Lua pattern)"
      else
        local ok, err = pcall(string.find, "", v)
        if not ok then errors[#errors + 1] = p .. ": invalid Lua pattern: " .. tostring(err) end
      end
    else
      errors[#errors + 1] = p .. ": unsupported keyword"
    end
  end
end

-- check_schema(schema [, root]) -> true | nil, errors: the schema uses only
-- the keywords above, with values of the right kinds.
function M.check_schema(schema, root)
  local errors = {}
  check_node(schema, root or "schema", errors)
  if #errors > 0 then return nil, errors end
  return true
end

return M
