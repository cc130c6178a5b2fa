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
-- minItems, maxItems, uniqueItems, minLength, maxLength (in UTF-8 characters), minimum,
-- maximum, exclusiveMinimum, exclusiveMaximum (numbers, as since draft 6),
-- pattern. Annotation keywords (description, default, title, examples,
-- $schema, $id, $comment) are accepted and ignored; any other keyword is
-- refused by check_schema, so a typo never silently validates nothing.
--
-- errorMessage (as ajv-errors names it; a subset) words the errors of one
-- schema node for people: a string stands for every error the node raises
-- itself (said once), a table {keyword = message} for the errors of the
-- keywords it names (the others keep the wording below). Its `required` may
-- be one message or {property = message}. The errors of the node's
-- subschemas (properties, items, additionalProperties) are theirs to word. A
-- message is used as it is, without the path in front; in it, {value} is the
-- value (as Lua's tostring writes it; nil for a missing property) and {key}
-- the property's name (required, additionalProperties).
--
-- `pattern` is an ECMA-262 regular expression, as JSON Schema says, of this
-- subset; check_schema refuses anything else, so no pattern is ever read with
-- another meaning:
--   literal characters, "." (any character but a line break), classes
--   [abc] [^a-z] (with ranges), escapes \d \D \w \W \s \S \t \n \r \f \v
--   \xHH \uXXXX and "\" before any of ^ $ \ . * + ? ( ) [ ] { } | / -,
--   quantifiers * + ? {n} {n,} {n,m} (n, m at most 1000; a lazy "?" after
--   one is accepted: it does not change whether a string matches), "^" only
--   first and "$" only last. No groups, alternation (|), backreferences,
--   lookaround or \b. Unanchored, as in JSON Schema: "a+" matches "xay".
-- It matches characters (code points), and runs as an automaton: time grows
-- with the string's length times the pattern's, and nothing backtracks.
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
    local json = type(package) == "table" and package.loaded["json"] or nil -- a workflow's VM has no package
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

-- A value's text, the same for JSON-equal values (1 and 1.0 are one number,
-- an object's keys in any order) and different for all others (a string is
-- written with its length), into out.
local function canonical(v, out)
  if is_null(v) then
    out[#out + 1] = "null"
  elseif type(v) == "number" then
    out[#out + 1] = v == math.floor(v) and math.abs(v) < 2^63 and string.format("%d", math.tointeger(v))
      or string.format("%.17g", v)
  elseif type(v) == "string" then
    out[#out + 1] = "s" .. #v .. ":" .. v
  elseif type(v) == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    out[#out + 1] = "{"
    for _, k in ipairs(keys) do
      canonical(k, out)
      out[#out + 1] = "="
      canonical(v[k], out)
      out[#out + 1] = ","
    end
    out[#out + 1] = "}"
  else
    out[#out + 1] = tostring(v)
  end
end

-- The first two positions of an array that hold equal values, or nil: one
-- pass, each item keyed by its canonical text (a hostile list of a hundred
-- thousand objects costs its size, not its size squared).
local function repeated_item(list, n)
  local seen = {}
  for i = 1, n do
    local out = {}
    canonical(list[i], out)
    local key = table.concat(out)
    if seen[key] then return seen[key], i end
    seen[key] = i
  end
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

-- ------------------------------------------------------------ pattern --

local function is_digit(c) return c >= 48 and c <= 57 end
local function is_word(c) return is_digit(c) or (c >= 65 and c <= 90) or (c >= 97 and c <= 122) or c == 95 end
local function is_space(c) -- ECMA's WhiteSpace and LineTerminator
  return (c >= 9 and c <= 13) or c == 32 or c == 0xA0 or c == 0x1680 or (c >= 0x2000 and c <= 0x200A)
    or c == 0x2028 or c == 0x2029 or c == 0x202F or c == 0x205F or c == 0x3000 or c == 0xFEFF
end
local function is_dot(c) return c ~= 10 and c ~= 13 and c ~= 0x2028 and c ~= 0x2029 end
local CLASS_ESCAPES = { d = is_digit, w = is_word, s = is_space }
local CONTROL_ESCAPES = { t = 9, n = 10, r = 13, f = 12, v = 11 }
local SYNTAX = {}
for c in ("^$\\.*+?()[]{}|/-"):gmatch(".") do SYNTAX[c] = true end
local MAX_REPEAT, MAX_NODES = 1000, 10000

-- Parses an ECMA pattern of the subset above into {start, finish, nodes},
-- each node {test = function(code point), kind = "one" | "opt" | "star"};
-- or nil and the reason it is refused.
local function compile_pattern(src)
  if not utf8.len(src) then return nil, "the pattern is not valid UTF-8" end
  local cps = {}
  for _, c in utf8.codes(src) do cps[#cps + 1] = c end
  local i, n = 1, #cps
  local function ch(k) return cps[k] and utf8.char(cps[k]) end
  local function refuse(why) error({ refused = why .. " (at character " .. i .. ")" }, 0) end

  local function hex(count)
    local v = 0
    for _ = 1, count do
      local d = ch(i) and tonumber(ch(i), 16)
      if not d then refuse("expected " .. count .. " hex digits") end
      v, i = v * 16 + d, i + 1
    end
    return v
  end
  -- at a backslash: a code point, or a predicate (\d \w \s and their negations)
  local function escape()
    i = i + 1
    local c = ch(i)
    if not c then refuse("the pattern ends with a lone \\") end
    i = i + 1
    if CLASS_ESCAPES[c:lower()] then
      local f = CLASS_ESCAPES[c:lower()]
      if c == c:lower() then return nil, f end
      return nil, function(x) return not f(x) end
    end
    if CONTROL_ESCAPES[c] then return CONTROL_ESCAPES[c] end
    if c == "x" then return hex(2) end
    if c == "u" then return hex(4) end
    if SYNTAX[c] then return cps[i - 1] end
    if c:match("%d") then refuse("backreferences (\\" .. c .. ") are not supported") end
    if c == "b" or c == "B" then refuse("word boundaries (\\" .. c .. ") are not supported") end
    refuse("the escape \\" .. c .. " is not supported")
  end
  local function class()
    i = i + 1
    local neg = ch(i) == "^"
    if neg then i = i + 1 end
    if ch(i) == "]" then refuse("an empty class") end
    local ranges, preds = {}, {}
    while ch(i) ~= "]" do
      if i > n then refuse("a [ without its ]") end
      local lo, pred
      if ch(i) == "\\" then lo, pred = escape() else lo, i = cps[i], i + 1 end
      if ch(i) == "-" and ch(i + 1) and ch(i + 1) ~= "]" then
        i = i + 1
        local hi, hpred
        if ch(i) == "\\" then hi, hpred = escape() else hi, i = cps[i], i + 1 end
        if pred or hpred then refuse("a range cannot start or end with a class escape") end
        if lo > hi then refuse("a range out of order") end
        ranges[#ranges + 1] = { lo, hi }
      elseif pred then
        preds[#preds + 1] = pred
      else
        ranges[#ranges + 1] = { lo, lo }
      end
    end
    i = i + 1
    return function(c)
      local hit = false
      for _, r in ipairs(ranges) do
        if c >= r[1] and c <= r[2] then hit = true break end
      end
      if not hit then
        for _, f in ipairs(preds) do
          if f(c) then hit = true break end
        end
      end
      return hit ~= neg
    end
  end
  local function number()
    local start = i
    while ch(i) and ch(i):match("%d") do i = i + 1 end
    if i == start then return nil end
    local digits = {}
    for k = start, i - 1 do digits[#digits + 1] = utf8.char(cps[k]) end
    local v = tonumber(table.concat(digits))
    if v > MAX_REPEAT then refuse("a repeat count above " .. MAX_REPEAT) end
    return v
  end
  -- after an atom: min, max (nil: unbounded)
  local function quantifier()
    local c = ch(i)
    local min, max
    if c == "*" then min, max, i = 0, nil, i + 1
    elseif c == "+" then min, max, i = 1, nil, i + 1
    elseif c == "?" then min, max, i = 0, 1, i + 1
    elseif c == "{" then
      i = i + 1
      min = number()
      if not min then refuse("a { must be a repeat count: {n}, {n,} or {n,m}") end
      max = min
      if ch(i) == "," then
        i = i + 1
        max = number()
        if max and max < min then refuse("a repeat count {n,m} with m < n") end
      end
      if ch(i) ~= "}" then refuse("a { must be a repeat count: {n}, {n,} or {n,m}") end
      i = i + 1
    else
      return 1, 1
    end
    if ch(i) == "?" then i = i + 1 end -- lazy: the same strings match
    return min, max
  end

  local ok, res = pcall(function()
    local re = { nodes = {} }
    if ch(1) == "^" then re.start, i = true, 2 end
    while i <= n do
      local c = ch(i)
      if c == "$" then
        if i ~= n then refuse("$ is supported only at the end") end
        re.finish, i = true, i + 1
        break
      end
      if c == "^" then refuse("^ is supported only at the start") end
      if c == "(" or c == ")" then refuse("groups are not supported") end
      if c == "|" then refuse("alternation (|) is not supported") end
      if c == "*" or c == "+" or c == "?" or c == "{" then refuse("nothing to repeat before " .. c) end
      if c == "}" or c == "]" then refuse("a lone " .. c .. " (write \\" .. c .. ")") end
      local test
      if c == "." then
        test, i = is_dot, i + 1
      elseif c == "[" then
        test = class()
      elseif c == "\\" then
        local cp, pred = escape()
        test = pred or function(x) return x == cp end
      else
        local cp = cps[i]
        test, i = function(x) return x == cp end, i + 1
      end
      local min, max = quantifier()
      if #re.nodes + math.max(min, max or min + 1) > MAX_NODES then refuse("the pattern is too large") end
      for _ = 1, min do re.nodes[#re.nodes + 1] = { test = test, kind = "one" } end
      if max == nil then
        re.nodes[#re.nodes + 1] = { test = test, kind = "star" }
      else
        for _ = min + 1, max do re.nodes[#re.nodes + 1] = { test = test, kind = "opt" } end
      end
    end
    return re
  end)
  if ok then return res end
  if type(res) == "table" and res.refused then return nil, res.refused end
  error(res, 0)
end

-- Adds node j to the set, and every node after it that may be skipped.
local function closure(nodes, set, j)
  while not set[j] do
    set[j] = true
    local nd = nodes[j]
    if not nd or nd.kind == "one" then return end
    j = j + 1
  end
end

-- Whether the compiled pattern matches somewhere in s: the set of automaton
-- states is advanced one character at a time (a string that is not UTF-8 is
-- read byte by byte).
local function pattern_find(re, s)
  local nodes = re.nodes
  local accept = #nodes + 1
  local cur = {}
  closure(nodes, cur, 1)
  if cur[accept] and not re.finish then return true end
  local function step(c)
    local nxt = {}
    for j in pairs(cur) do
      local nd = nodes[j]
      if nd and nd.test(c) then closure(nodes, nxt, nd.kind == "star" and j or j + 1) end
    end
    if not re.start then closure(nodes, nxt, 1) end
    cur = nxt
    return cur[accept] and not re.finish
  end
  if utf8.len(s) then
    for _, c in utf8.codes(s) do
      if step(c) then return true end
    end
  else
    for k = 1, #s do
      if step(s:byte(k)) then return true end
    end
  end
  return cur[accept] == true
end

local compiled = {} -- pattern source -> compiled pattern (or false, why)
local ncompiled = 0
local function pattern(src)
  local c = compiled[src]
  if c == nil then
    local re, why = compile_pattern(src)
    if ncompiled >= 256 then compiled, ncompiled = {}, 0 end
    c = re or { refused = why }
    compiled[src], ncompiled = c, ncompiled + 1
  end
  if c.refused then return nil, c.refused end
  return c
end
M.pattern_find = function(src, s)
  local re, why = pattern(src)
  if not re then return nil, why end
  return pattern_find(re, s)
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

local validate_node

-- An errorMessage template with its {value} and {key} filled in.
local function render(template, value, key)
  return (template:gsub("{(%a+)}", function(name)
    if name == "value" then return tostring(value) end
    if name == "key" then return tostring(key) end
  end))
end

-- The function that adds the errors a node raises itself: fail(keyword,
-- default message, value, key), worded by the node's errorMessage if it has one.
local function reporter(schema, errors)
  local em = schema.errorMessage
  if em == nil then
    return function(_, default) errors[#errors + 1] = default end
  end
  local said = false
  return function(keyword, default, value, key)
    if type(em) == "string" then
      if not said then errors[#errors + 1] = render(em, value, key) end
      said = true
      return
    end
    local t = em[keyword]
    if type(t) == "table" then t = t[key] end
    errors[#errors + 1] = type(t) == "string" and render(t, value, key) or default
  end
end

local function check_type(schema, value, path, fail)
  local t = schema.type
  if t == nil then return true end
  local names = type(t) == "table" and t or { t }
  for _, name in ipairs(names) do
    if has_type(value, name) then return true end
  end
  fail("type", string.format("%s: expected %s, got %s", path, table.concat(names, " or "), type_name(value)), value)
  return false
end

function validate_node(schema, value, path, errors)
  if schema == true or schema == nil then return end
  if schema == false then
    errors[#errors + 1] = path .. ": no value is allowed here"
    return
  end
  local fail = reporter(schema, errors)
  if not check_type(schema, value, path, fail) then return end

  if schema.const ~= nil and not deep_equal(schema.const, value) then
    fail("const", string.format("%s: must be %s", path, show(schema.const)), value)
  end
  if schema.enum ~= nil then
    local found = false
    for _, e in ipairs(schema.enum) do
      if deep_equal(e, value) then found = true break end
    end
    if not found then
      local opts = {}
      for i, e in ipairs(schema.enum) do opts[i] = show(e) end
      fail("enum", string.format("%s: must be one of %s, got %s", path, table.concat(opts, ", "), show(value)), value)
    end
  end

  if type(value) == "string" then
    local n = str_len(value)
    if schema.minLength and n < schema.minLength then
      fail("minLength", string.format("%s: must be at least %d characters long", path, schema.minLength), value)
    end
    if schema.maxLength and n > schema.maxLength then
      fail("maxLength", string.format("%s: must be at most %d characters long", path, schema.maxLength), value)
    end
    if schema.pattern then
      local re, why = pattern(schema.pattern)
      if not re then
        fail("pattern", string.format("%s: the schema's pattern is not supported (%s)", path, why), value)
      elseif not pattern_find(re, value) then
        fail("pattern", string.format("%s: does not match the pattern %s", path, schema.pattern), value)
      end
    end
  elseif type(value) == "number" then
    if schema.minimum and value < schema.minimum then
      fail("minimum", string.format("%s: must be >= %s", path, tostring(schema.minimum)), value)
    end
    if schema.maximum and value > schema.maximum then
      fail("maximum", string.format("%s: must be <= %s", path, tostring(schema.maximum)), value)
    end
    if schema.exclusiveMinimum and value <= schema.exclusiveMinimum then
      fail("exclusiveMinimum", string.format("%s: must be > %s", path, tostring(schema.exclusiveMinimum)), value)
    end
    if schema.exclusiveMaximum and value >= schema.exclusiveMaximum then
      fail("exclusiveMaximum", string.format("%s: must be < %s", path, tostring(schema.exclusiveMaximum)), value)
    end
  elseif type(value) == "table" and not is_null(value) then
    local kind = table_kind(value)
    if kind == "array" or (kind == "empty" and (schema.items ~= nil or schema.minItems or schema.maxItems
        or schema.uniqueItems)
        and not schema.properties and not schema.required) then
      local n = #value
      if schema.minItems and n < schema.minItems then
        fail("minItems", string.format("%s: must have at least %d items", path, schema.minItems), value)
      end
      if schema.maxItems and n > schema.maxItems then
        fail("maxItems", string.format("%s: must have at most %d items", path, schema.maxItems), value)
      end
      if schema.uniqueItems == true then
        local first, again = repeated_item(value, n)
        if first then
          fail("uniqueItems", string.format("%s: items %d and %d are the same", path, first, again), value)
        end
      end
      if schema.items ~= nil then
        for i = 1, n do validate_node(schema.items, value[i], child_path(path, i), errors) end
      end
    end
    if kind == "object" or kind == "empty" then
      local props = schema.properties or {}
      for _, name in ipairs(schema.required or {}) do
        if value[name] == nil then
          fail("required", child_path(path, name) .. ": is required", nil, name)
        end
      end
      for _, k in ipairs(sorted_keys(value)) do
        local v = value[k]
        local p = child_path(path, k)
        if props[k] ~= nil then
          validate_node(props[k], v, p, errors)
        elseif schema.additionalProperties == false then
          fail("additionalProperties", p .. ": unexpected property", v, k)
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
local ANNOTATIONS = { description = true, default = true, title = true, examples = true, ["$schema"] = true,
  ["$id"] = true, ["$comment"] = true }
-- the keywords whose errors an errorMessage table may word
local WORDED = { type = true, const = true, enum = true, minLength = true, maxLength = true, pattern = true,
  minimum = true, maximum = true, exclusiveMinimum = true, exclusiveMaximum = true, minItems = true, maxItems = true,
  uniqueItems = true, required = true, additionalProperties = true }

local function check_error_message(v, p, errors)
  if type(v) == "string" then return end
  if type(v) ~= "table" or table_kind(v) == "array" or table_kind(v) == "table" then
    errors[#errors + 1] = p .. ": must be a message or a table {keyword = message}"
    return
  end
  for _, k in ipairs(sorted_keys(v)) do
    local m = v[k]
    if not WORDED[k] then
      errors[#errors + 1] = p .. ": " .. show(k) .. " is not a keyword whose errors it can word"
    elseif k == "required" and type(m) == "table" then
      for _, name in ipairs(sorted_keys(m)) do
        if type(name) ~= "string" or type(m[name]) ~= "string" then
          errors[#errors + 1] = child_path(p .. ".required", name) .. ": must be a message"
        end
      end
    elseif type(m) ~= "string" then
      errors[#errors + 1] = child_path(p, k) .. ": must be a message"
    end
  end
end

-- JSON has one kind of number: 3 may arrive as the float 3.0
local function is_nonneg_int(v) return type(v) == "number" and v >= 0 and v == math.floor(v) and v < math.huge end

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
    elseif (k == "additionalProperties" or k == "items") and type(v) == "table" and table_kind(v) == "array" then
      errors[#errors + 1] = p .. ": must be one schema (a list of schemas is not supported)"
    elseif k == "additionalProperties" or k == "items" then
      check_node(v, p, errors)
    elseif k == "enum" then
      if type(v) ~= "table" or #v == 0 then errors[#errors + 1] = p .. ": must be a non-empty list" end
    elseif k == "const" then
      -- any value
    elseif k == "uniqueItems" then
      if type(v) ~= "boolean" then errors[#errors + 1] = p .. ": must be true or false" end
    elseif k == "minItems" or k == "maxItems" or k == "minLength" or k == "maxLength" then
      if not is_nonneg_int(v) then errors[#errors + 1] = p .. ": must be a non-negative integer" end
    elseif k == "minimum" or k == "maximum" or k == "exclusiveMinimum" or k == "exclusiveMaximum" then
      if type_name(v) ~= "number" then errors[#errors + 1] = p .. ": must be a number" end
    elseif k == "errorMessage" then
      check_error_message(v, p, errors)
    elseif k == "pattern" then
      if type(v) ~= "string" then
        errors[#errors + 1] = p .. ": must be a string (a regular expression)"
      else
        local re, why = pattern(v)
        if not re then errors[#errors + 1] = p .. ": unsupported pattern " .. show(v) .. ": " .. why end
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
