-- Skills in the open Agent Skills format: skills/<name>/SKILL.md with YAML
-- frontmatter, plus optional scripts/, references/ and assets/.
--
--   ---
--   name: code-review                 1-64 of a-z, 0-9 and single hyphens; = directory name
--   description: What it does and when to use it.     1-1024 characters
--   license: Apache-2.0               optional
--   compatibility: Needs git.         optional, 1-500 characters
--   metadata:                         optional map of string -> string
--     version: "1.0"
--   allowed-tools: Read Bash(git:*)   optional; space-separated string or a list
--   ---
--   Markdown body: the instructions the agent reads on demand.
--
-- Selected skills are mounted read-only at /workspace/skills/<name>/ and only
-- their names and descriptions go into the system prompt (progressive
-- disclosure): the agent reads SKILL.md and the files it points to when a task
-- matches. Plain Lua 5.4, standard library only.
--
-- The frontmatter parser is a strict subset of YAML: anything it accepts means
-- the same thing to a full YAML parser (except that plain scalars such as 1.0
-- or true stay strings), and anything else is refused with the line number.
local M = {}

M.MAX_NAME = 64
M.MAX_DESCRIPTION = 1024
M.MAX_COMPATIBILITY = 500
M.MAX_BYTES = 5 * 1024 * 1024
M.MAX_FILES = 1000
M.MOUNT = "/workspace/skills"

local FIELDS = {
  name = "scalar", description = "scalar", license = "scalar", compatibility = "scalar",
  metadata = "map", ["allowed-tools"] = "tools",
}
local FIELD_ORDER = { "name", "description", "license", "compatibility", "metadata", "allowed-tools" }

-- ---------------------------------------------------------------------------
-- Frontmatter parsing
-- ---------------------------------------------------------------------------

local function perr(lineno, msg) error({ skills_parse = true, msg = "line " .. lineno .. ": " .. msg }, 0) end

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

local function indent_of(line) return #line:match("^ *") end

local function is_blank(line) return line:match("^%s*$") ~= nil end

local function is_comment(line) return line:match("^%s*#") ~= nil end

-- Removes a trailing " # comment" from the text after a closing quote or a
-- flow collection; anything else there is an error.
local function only_comment_after(rest, lineno, what)
  if rest:match("^%s*$") or rest:match("^%s+#") then return end
  perr(lineno, "unexpected text after " .. what .. ": '" .. trim(rest) .. "'")
end

local function utf8_char(cp, lineno)
  if cp >= 0xD800 and cp <= 0xDFFF then perr(lineno, "invalid escape: surrogate code point") end
  if cp > 0x10FFFF then perr(lineno, "invalid escape: code point out of range") end
  return utf8.char(cp)
end

local DQ_ESCAPES = { ["\\"] = "\\", ['"'] = '"', ["/"] = "/", n = "\n", t = "\t", r = "\r", ["0"] = "\0",
  a = "\a", b = "\b", f = "\f", v = "\v", e = "\27", [" "] = " ", ["\t"] = "\t" }

-- s starts with a quote. Returns the string value and the text after the closing quote.
local function quoted(s, lineno)
  local q = s:sub(1, 1)
  local out, i = {}, 2
  while true do
    local c = s:sub(i, i)
    if c == "" then
      perr(lineno, "unterminated " .. (q == "'" and "single" or "double") .. "-quoted string"
        .. " (quoted strings must end on the same line; use a '>' block for long text)")
    end
    if q == "'" then
      if c == "'" then
        if s:sub(i + 1, i + 1) == "'" then out[#out + 1] = "'"; i = i + 2
        else return table.concat(out), s:sub(i + 1) end
      else out[#out + 1] = c; i = i + 1 end
    else
      if c == '"' then return table.concat(out), s:sub(i + 1)
      elseif c == "\\" then
        local e = s:sub(i + 1, i + 1)
        if DQ_ESCAPES[e] then out[#out + 1] = DQ_ESCAPES[e]; i = i + 2
        elseif e == "x" or e == "u" or e == "U" then
          local n = (e == "x" and 2) or (e == "u" and 4) or 8
          local hex = s:sub(i + 2, i + 1 + n)
          if #hex ~= n or not hex:match("^%x+$") then perr(lineno, "invalid \\" .. e .. " escape in double-quoted string") end
          out[#out + 1] = utf8_char(tonumber(hex, 16), lineno)
          i = i + 2 + n
        else
          perr(lineno, "unknown escape '\\" .. e .. "' in double-quoted string")
        end
      else out[#out + 1] = c; i = i + 1 end
    end
  end
end

-- Checks a plain (unquoted) scalar in block context and strips a trailing comment.
local function plain(s, lineno, flow)
  s = s:gsub("%s+#.*$", "")
  s = trim(s)
  if s == "" then return "" end
  local c = s:sub(1, 1)
  if c == "#" then return "" end
  if c:match("[&*!%%@`|>]") or c == "]" or c == "}" or (not flow and (c == "[" or c == "{"))
    or s:match("^[-?:]%s") or s == "-" or s == "?" or s == ":" then
    perr(lineno, "a value may not start with '" .. c .. "' unless quoted")
  end
  if s:find(": ", 1, true) or s:sub(-1) == ":" or s:find(":\t", 1, true) then
    perr(lineno, "a plain value may not contain ': ' or end with ':'; quote it")
  end
  if flow and s:find("[%[%]{},]") then perr(lineno, "'" .. s .. "': quote items that contain , [ ] { }") end
  if s:find("\t", 1, true) then perr(lineno, "tab characters are not allowed in unquoted values; quote the value") end
  return s
end

-- One scalar on a single line (plain or quoted).
local function inline_scalar(s, lineno, flow)
  s = s:gsub("^%s+", "")
  local c = s:sub(1, 1)
  if c == "'" or c == '"' then
    local v, rest = quoted(s, lineno)
    only_comment_after(rest, lineno, "a quoted string")
    return v
  end
  return plain(s, lineno, flow)
end

-- Lines of a block (more indented than the key's column 0): returns the
-- index of the first line after the block.
local function block_end(lines, i, min_indent)
  while i <= #lines do
    local l = lines[i]
    if not is_blank(l) and indent_of(l) < min_indent then break end
    i = i + 1
  end
  return i
end

-- A '|' or '>' block scalar whose header is on line i-1; returns value, next index.
local function block_scalar(lines, i, header, header_lineno, base)
  local style = header:sub(1, 1)
  local h = header:sub(2)
  local chomp, explicit = h:match("^([-+]?)([1-9]?)$")
  if not chomp then explicit, chomp = h:match("^([1-9])([-+])$") end
  if not chomp then perr(header_lineno, "invalid block scalar header '" .. header .. "'") end
  if explicit == "" then explicit = nil end
  local indent
  if explicit then indent = tonumber(explicit)
  else
    for j = i, #lines do
      local l = lines[j]
      if not is_blank(l) then indent = indent_of(l); break end
    end
    if not indent or indent <= 0 then indent = 1 end
  end
  local stop = i
  while stop <= #lines do
    local l = lines[stop]
    if l:match("^ *$") then stop = stop + 1
    elseif indent_of(l) >= indent then stop = stop + 1
    elseif l:match("^ *\t") and indent_of(l) < indent then perr(base + stop, "tabs are not allowed for indentation")
    else break end
  end
  -- Content lines with the block indentation removed (blank lines become "").
  local content = {}
  for j = i, stop - 1 do
    local l = lines[j]
    if l:match("^ *$") then content[#content + 1] = "" else content[#content + 1] = l:sub(indent + 1) end
  end
  -- Trailing blank lines belong to chomping, not to the content.
  local last = #content
  while last > 0 and content[last] == "" do last = last - 1 end
  local trailing = #content - last
  local body
  if style == "|" then
    body = table.concat(content, "\n", 1, last)
  else
    local out, prev_kind, empties = {}, nil, 0
    for j = 1, last do
      local l = content[j]
      if l == "" then empties = empties + 1
      else
        local kind = l:match("^[ \t]") and "more" or "text"
        if prev_kind == nil then out[#out + 1] = string.rep("\n", empties)
        elseif prev_kind == "text" and kind == "text" then
          out[#out + 1] = empties == 0 and " " or string.rep("\n", empties)
        else
          out[#out + 1] = string.rep("\n", empties + 1)
        end
        out[#out + 1] = l
        prev_kind, empties = kind, 0
      end
    end
    body = table.concat(out)
  end
  if last == 0 then
    body = (chomp == "+") and string.rep("\n", trailing) or ""
  elseif chomp == "-" then -- strip
  elseif chomp == "+" then body = body .. "\n" .. string.rep("\n", trailing)
  else body = body .. "\n" end
  return body, stop
end

-- A scalar value for a top-level key: inline (maybe continued on indented
-- lines, which fold with spaces), or a block scalar. Returns value, next index.
local function scalar_value(lines, i, rest, lineno, base, key)
  local r = trim(rest)
  if r:match("^[|>]") then
    local header = trim((r:gsub("%s+#.*$", "")))
    return block_scalar(lines, i, header, lineno, base)
  end
  if r:match("^%[") or r:match("^{") then
    perr(lineno, "'" .. key .. "' must be a string, not a flow collection")
  end
  local v = inline_scalar(rest, lineno, false)
  local stop = block_end(lines, i, 1)
  if stop > i then
    -- Continuation lines of a multi-line plain scalar.
    local has_text = false
    for j = i, stop - 1 do if not is_blank(lines[j]) then has_text = true end end
    if has_text then
      -- A plain value may continue on more indented lines (folded with
      -- spaces; a blank line is a newline), or start on the next line after
      -- an empty "key:". A comment ends it.
      local c = r:sub(1, 1)
      local ended = false
      if c == "'" or c == '"' then ended = true
      elseif v ~= "" and rest:match("%s#") then ended = true end
      local parts, empties, started = {}, 0, v ~= ""
      if started then parts[1] = v end
      for j = i, stop - 1 do
        local l = lines[j]
        if is_blank(l) then empties = empties + 1
        elseif is_comment(l) then ended = true
        else
          if ended then perr(base + j, "unexpected indented line (a value ended before it)") end
          if l:match("^ *\t") then perr(base + j, "tabs are not allowed for indentation") end
          local t = plain(l, base + j, false)
          if l:find("%s#") then ended = true end
          if started then parts[#parts + 1] = empties == 0 and " " or string.rep("\n", empties) end
          parts[#parts + 1] = t
          started, empties = true, 0
        end
      end
      v = table.concat(parts)
    end
  end
  return v, stop
end

local function flow_sequence(s, lineno)
  s = trim(s)
  if s:sub(1, 1) ~= "[" then perr(lineno, "expected a list") end
  local items, i = {}, 2
  local expect_item = true
  while true do
    while s:sub(i, i):match("^%s$") do i = i + 1 end
    local c = s:sub(i, i)
    if c == "" then perr(lineno, "unterminated '[' list (flow lists must end on the same line)") end
    if c == "]" then
      only_comment_after(s:sub(i + 1), lineno, "']'")
      return items
    end
    if not expect_item then
      if c ~= "," then perr(lineno, "expected ',' or ']' in list") end
      i = i + 1
      expect_item = true
    else
      if c == "," then perr(lineno, "empty item in list") end
      if c == "'" or c == '"' then
        local v, rest = quoted(s:sub(i), lineno)
        items[#items + 1] = v
        i = #s - #rest + 1
      else
        local j = i
        while j <= #s and not s:sub(j, j):match("[,%]]") do j = j + 1 end
        local raw = s:sub(i, j - 1)
        if raw:find("%s#") then perr(lineno, "comments are not allowed inside a '[...]' list") end
        local v = plain(raw, lineno, true)
        if v == "" then perr(lineno, "empty item in list") end
        items[#items + 1] = v
        i = j
      end
      expect_item = false
    end
  end
end

-- `- item` lines starting at index i (indent >= 0). Returns list, next index.
local function block_sequence(lines, i, base)
  local items, indent = {}, nil
  while i <= #lines do
    local l = lines[i]
    if is_blank(l) or is_comment(l) then i = i + 1
    else
      local ind = indent_of(l)
      if l:match("^ *\t") then perr(base + i, "tabs are not allowed for indentation") end
      if not l:match("^ *%-%s") and not l:match("^ *%-$") then
        if ind == 0 then break end
        perr(base + i, "expected a '- item' line")
      end
      indent = indent or ind
      if ind ~= indent then perr(base + i, "list items must all have the same indentation") end
      local rest = l:sub(ind + 2)
      local r = trim(rest)
      if r == "" or r:match("^#") then perr(base + i, "empty list item") end
      if r:match("^[|>]") or r:match("^%[") or r:match("^{") then perr(base + i, "list items must be plain or quoted strings") end
      items[#items + 1] = inline_scalar(rest, base + i, false)
      i = i + 1
      -- An item continued on a more indented line is not supported.
      if i <= #lines and not is_blank(lines[i]) and not is_comment(lines[i]) and indent_of(lines[i]) > indent then
        perr(base + i, "unexpected indentation (list items must fit on one line)")
      end
    end
  end
  return items, i
end

local function block_map(lines, i, base, key)
  local map, seen, indent = {}, {}, nil
  local stop = block_end(lines, i, 1)
  for j = i, stop - 1 do
    local l = lines[j]
    if not (is_blank(l) or is_comment(l)) then
      if l:match("^ *\t") then perr(base + j, "tabs are not allowed for indentation") end
      local ind = indent_of(l)
      indent = indent or ind
      if ind ~= indent then
        perr(base + j, "'" .. key .. "' must be a flat map of strings (unexpected indentation)")
      end
      local k, rest = l:match("^ *([%w_.%-/]+):(.*)$")
      if k and rest ~= "" and not rest:match("^%s") then k = nil end
      if k and rest:match("^ *\t") then perr(base + j, "use a space after ':', not a tab") end
      if not k then
        if l:match("^ *%-") then perr(base + j, "'" .. key .. "' must be a map, not a list") end
        perr(base + j, "expected 'key: value' under '" .. key .. "' (keys use letters, digits, '_', '.', '-', '/')")
      end
      if seen[k] then perr(base + j, "duplicate key '" .. k .. "' in '" .. key .. "'") end
      seen[k] = true
      local r = trim(rest)
      if r == "" or r:match("^#") then
        perr(base + j, "'" .. key .. "." .. k .. "' has no value (nested maps are not supported; use a string)")
      end
      if r:match("^[|>]") or r:match("^%[") or r:match("^{") then
        perr(base + j, "'" .. key .. "." .. k .. "' must be a one-line string")
      end
      map[k] = inline_scalar(rest, base + j, false)
    end
  end
  return map, stop
end

-- Parses SKILL.md text. Returns meta (YAML field names; "allowed-tools" is
-- always a list, "metadata" always a map) and the markdown body, or nil and
-- an error naming the line.
function M.parse(text)
  if type(text) ~= "string" then return nil, "SKILL.md content must be a string" end
  if text:sub(1, 3) == "\239\187\191" then text = text:sub(4) end
  text = text:gsub("\r\n", "\n")
  local first_nl = text:find("\n", 1, true)
  local first = first_nl and text:sub(1, first_nl - 1) or text
  if not first:match("^%-%-%-%s*$") then
    return nil, "line 1: SKILL.md must start with YAML frontmatter (a '---' line)"
  end
  if not first_nl then return nil, "frontmatter is not terminated (no closing '---' line)" end
  -- Collect the frontmatter lines up to the closing '---'.
  local lines, pos, close_end = {}, first_nl + 1, nil
  while pos <= #text + 1 do
    local nl = text:find("\n", pos, true)
    local line = text:sub(pos, (nl or #text + 1) - 1)
    if line:match("^%-%-%-%s*$") then close_end = nl and nl + 1 or #text + 1; break end
    lines[#lines + 1] = line
    if not nl then break end
    pos = nl + 1
  end
  if not close_end then return nil, "frontmatter is not terminated (no closing '---' line)" end
  local body = text:sub(close_end)
  local base = 1 -- line number of lines[i] is base + i

  local ok, res = pcall(function()
    local meta, seen, i = {}, {}, 1
    while i <= #lines do
      local l = lines[i]
      local lineno = base + i
      if is_blank(l) or is_comment(l) then i = i + 1
      elseif l:match("^ *\t") then perr(lineno, "tabs are not allowed for indentation")
      elseif indent_of(l) > 0 then perr(lineno, "unexpected indentation")
      elseif l:match("^%-%s") or l:match("^%-$") then perr(lineno, "expected 'key: value', not a list item")
      else
        local key, rest = l:match("^([^%s:#][^:]*):(.*)$")
        if key and rest ~= "" and not rest:match("^%s") then key = nil end
        if not key then
          if l:match("^%-") then perr(lineno, "expected 'key: value', not a list item") end
          perr(lineno, "expected 'key: value'")
        end
        if key:match("%s$") then perr(lineno, "no space allowed before ':' in '" .. key .. "'") end
        local kind = FIELDS[key]
        if not kind then
          perr(lineno, "unknown field '" .. key .. "' (allowed: " .. table.concat(FIELD_ORDER, ", ") .. ")")
        end
        if seen[key] then perr(lineno, "duplicate field '" .. key .. "'") end
        seen[key] = true
        i = i + 1
        if rest:match("^ *\t") then perr(lineno, "use a space after ':', not a tab") end
        local r = trim((rest:gsub("^%s+#.*$", "")))
        if kind == "scalar" then
          meta[key], i = scalar_value(lines, i, rest, lineno, base, key)
        elseif kind == "map" then
          if r == "{}" then meta[key] = {}
          elseif r ~= "" then perr(lineno, "'metadata' must be an indented map of 'key: value' lines")
          else meta[key], i = block_map(lines, i, base, key) end
        else -- allowed-tools
          if r == "" then
            meta[key], i = block_sequence(lines, i, base)
          elseif r:match("^%[") then
            meta[key] = flow_sequence(rest, lineno)
          elseif r:match("^[|>]") or r:match("^{") then
            perr(lineno, "'allowed-tools' must be a space-separated string or a list")
          else
            local s
            s, i = scalar_value(lines, i, rest, lineno, base, key)
            local list = {}
            for w in s:gmatch("%S+") do list[#list + 1] = w end
            meta[key] = list
          end
        end
      end
    end
    meta.metadata = meta.metadata or {}
    meta["allowed-tools"] = meta["allowed-tools"] or {}
    return meta
  end)
  if not ok then
    if type(res) == "table" and res.skills_parse then return nil, res.msg end
    error(res, 0)
  end
  return res, body
end

-- ---------------------------------------------------------------------------
-- Validation
-- ---------------------------------------------------------------------------

local NAME_RULE = "1-64 characters of a-z, 0-9 and single hyphens, not starting or ending with a hyphen"

-- Returns nil when s is a valid skill name, else the reason.
function M.name_problem(s)
  if type(s) ~= "string" then return "must be a string" end
  if s == "" then return "is empty (" .. NAME_RULE .. ")" end
  if #s > M.MAX_NAME then return "is " .. #s .. " characters long (" .. NAME_RULE .. ")" end
  if s:find("[^a-z0-9-]") then
    if s:find("[A-Z]") then return "has uppercase letters (" .. NAME_RULE .. ")" end
    return "has characters other than a-z, 0-9 and '-' (" .. NAME_RULE .. ")"
  end
  if s:sub(1, 1) == "-" then return "starts with a hyphen (" .. NAME_RULE .. ")" end
  if s:sub(-1) == "-" then return "ends with a hyphen (" .. NAME_RULE .. ")" end
  if s:find("--", 1, true) then return "has consecutive hyphens (" .. NAME_RULE .. ")" end
  return nil
end

local function quote_name(s)
  if type(s) ~= "string" then return tostring(s) end
  return "'" .. (s:gsub("[%c']", function(c) return string.format("\\x%02x", c:byte()) end)) .. "'"
end

local function char_len(s)
  local n = utf8.len(s)
  return n
end

-- Validates parsed frontmatter (YAML field names). dirname, when given, must
-- equal the name. Returns true, or nil and one error naming the skill and
-- every problem.
function M.validate(meta, dirname)
  if type(meta) ~= "table" then
    return nil, "invalid skill " .. quote_name(dirname or "?") .. ": frontmatter must be a map"
  end
  local problems = {}
  local function add(p) problems[#problems + 1] = p end
  for k in pairs(meta) do
    if not FIELDS[k] then add("unknown field " .. quote_name(k)) end
  end
  local name = meta.name
  if name == nil then add("name is required")
  else
    local p = M.name_problem(name)
    if p then add("name " .. (type(name) == "string" and quote_name(name) .. " " or "") .. p)
    elseif dirname ~= nil and name ~= dirname then
      add("name " .. quote_name(name) .. " does not match its directory " .. quote_name(dirname))
    end
  end
  local d = meta.description
  if d == nil then add("description is required")
  elseif type(d) ~= "string" then add("description must be a string")
  elseif not char_len(d) then add("description is not valid UTF-8")
  elseif trim(d) == "" then add("description is empty (say what the skill does and when to use it)")
  elseif char_len(d) > M.MAX_DESCRIPTION then
    add("description is " .. char_len(d) .. " characters long (at most " .. M.MAX_DESCRIPTION .. ")")
  end
  if meta.license ~= nil then
    if type(meta.license) ~= "string" then add("license must be a string")
    elseif trim(meta.license) == "" then add("license is empty") end
  end
  local c = meta.compatibility
  if c ~= nil then
    if type(c) ~= "string" then add("compatibility must be a string")
    elseif not char_len(c) then add("compatibility is not valid UTF-8")
    elseif trim(c) == "" then add("compatibility is empty (omit it or say what the skill needs)")
    elseif char_len(c) > M.MAX_COMPATIBILITY then
      add("compatibility is " .. char_len(c) .. " characters long (at most " .. M.MAX_COMPATIBILITY .. ")")
    end
  end
  local md = meta.metadata
  if md ~= nil then
    if type(md) ~= "table" then add("metadata must be a map of strings")
    else
      local keys = {}
      for k, v in pairs(md) do
        if type(k) ~= "string" then keys[#keys + 1] = "metadata key " .. tostring(k) .. " must be a string"
        elseif type(v) ~= "string" then keys[#keys + 1] = "metadata." .. k .. " must be a string" end
      end
      table.sort(keys)
      for _, p in ipairs(keys) do add(p) end
    end
  end
  local at = meta["allowed-tools"]
  if at ~= nil then
    if type(at) ~= "table" then add("allowed-tools must be a list of strings")
    else
      local n = 0
      for _ in pairs(at) do n = n + 1 end
      if n ~= #at then add("allowed-tools must be a list of strings") end
      for i, v in ipairs(at) do
        if type(v) ~= "string" or trim(v) == "" then add("allowed-tools[" .. i .. "] must be a non-empty string") end
      end
    end
  end
  if #problems == 0 then return true end
  local who = (type(name) == "string" and name ~= "") and name or dirname or "?"
  return nil, "invalid skill " .. quote_name(who) .. ": " .. table.concat(problems, "; ")
end

-- ---------------------------------------------------------------------------
-- Loading from disk
-- ---------------------------------------------------------------------------

local fs = require "fs"

local function clean_root(root)
  local r = root:gsub("/+$", "")
  if r == "" then r = "/" end
  return r
end

local function file_size(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local n = f:seek("end")
  f:close()
  return n
end

-- Every entry below dir, never following a symlink, as paths relative to
-- dir: the symlinks, the other files that are neither regular files nor
-- directories, and the regular files. nil when a directory cannot be listed.
local function walk(dir)
  local links, others, regular = {}, {}, {}
  local pending = { "" }
  while #pending > 0 do
    local rel = table.remove(pending)
    local entries = fs.list(rel == "" and dir or dir .. "/" .. rel)
    if not entries then return nil end
    for _, e in ipairs(entries) do
      local r = rel == "" and e.name or rel .. "/" .. e.name
      if e.type == "dir" then pending[#pending + 1] = r
      elseif e.type == "link" then links[#links + 1] = r
      elseif e.type == "file" then regular[#regular + 1] = r
      else others[#others + 1] = r end
    end
  end
  return links, others, regular
end

-- Loads and checks one skill. Returns {name, description, dir, license,
-- compatibility, metadata, allowed_tools, files, bytes} or nil, err.
function M.load(root, name)
  local function fail(msg) return nil, "skill " .. quote_name(name) .. ": " .. msg end
  local p = M.name_problem(name)
  if p then return nil, "invalid skill name " .. quote_name(name) .. ": " .. p end
  if type(root) ~= "string" or root == "" then return fail("the skills root must be a path") end
  if root:find("%z") then return fail("the skills root contains a NUL byte") end
  local r = clean_root(root)
  local dir = (r == "/" and "" or r) .. "/" .. name
  -- what the directory is (lstat: a symlink is not followed), its canonical
  -- absolute path, then every entry below it
  local st = fs.lstat(dir)
  if not st then return fail("not found (no directory " .. dir .. ")") end
  if st.type == "link" then return fail(dir .. " is a symlink (skills must be real directories)") end
  if st.type ~= "dir" then return fail(dir .. " is not a directory") end
  local canonical = fs.realpath(dir)
  local links, others, regular = walk(dir)
  if not canonical or not links then return fail("cannot list " .. dir) end
  if #links > 0 then
    table.sort(links)
    return fail("symlinks are not allowed in a skill: " .. table.concat(links, ", "))
  end
  if #others > 0 then
    table.sort(others)
    return fail("only regular files and directories are allowed in a skill: " .. table.concat(others, ", "))
  end
  if #regular > M.MAX_FILES then
    return fail("has " .. #regular .. " files (at most " .. M.MAX_FILES .. ")")
  end
  local files, bytes, has_skill_md, near_miss = {}, 0, false, nil
  for _, r in ipairs(regular) do
    if r == "SKILL.md" then has_skill_md = true
    elseif r:upper() == "SKILL.MD" then near_miss = r end
    local n = file_size(dir .. "/" .. r)
    if not n then return fail("cannot read " .. r) end
    bytes = bytes + n
    files[#files + 1] = r
  end
  if not has_skill_md then
    return fail("missing SKILL.md in " .. dir
      .. (near_miss and (" (found " .. near_miss .. "; the file name is case-sensitive)") or ""))
  end
  if bytes > M.MAX_BYTES then
    return fail("is " .. bytes .. " bytes (at most " .. M.MAX_BYTES .. ", 5 MiB)")
  end
  table.sort(files)
  local f = io.open(dir .. "/SKILL.md", "rb")
  if not f then return fail("cannot read SKILL.md") end
  local text = f:read("a")
  f:close()
  local meta, body = M.parse(text)
  if not meta then return fail("SKILL.md " .. body) end
  local vok, verr = M.validate(meta, name)
  if not vok then return nil, verr end
  local md = {}
  for k, v in pairs(meta.metadata or {}) do md[k] = v end
  local tools = {}
  for i, v in ipairs(meta["allowed-tools"] or {}) do tools[i] = v end
  return {
    name = meta.name, description = meta.description, dir = canonical,
    license = meta.license, compatibility = meta.compatibility,
    metadata = md, allowed_tools = tools, files = files, bytes = bytes,
  }
end

-- Loads the named skills in order, without duplicates. Returns the list, or
-- nil and one error listing every problem.
function M.select(root, names)
  if names == nil then return {} end
  if type(names) ~= "table" then return nil, "skills must be a list of skill names" end
  local out, seen, problems = {}, {}, {}
  local n = 0
  for _ in pairs(names) do n = n + 1 end
  if n ~= #names then problems[#problems + 1] = "skills must be a list of skill names" end
  for i, name in ipairs(names) do
    if type(name) ~= "string" then
      problems[#problems + 1] = "skills[" .. i .. "] must be a string"
    elseif not seen[name] then
      seen[name] = true
      local s, err = M.load(root, name)
      if s then out[#out + 1] = s else problems[#problems + 1] = err end
    end
  end
  if #problems > 0 then return nil, table.concat(problems, "\n") end
  return out
end

-- Every skill directory under root (sorted; hidden entries skipped). Returns
-- the valid skills and {{name=, error=}} for the refused ones.
function M.list(root)
  if type(root) ~= "string" or root == "" then return {}, { { name = "", error = "the skills root must be a path" } } end
  local r = clean_root(root)
  local entries = fs.list(r) -- a symlinked root is followed
  if not entries then
    return {}, { { name = "", error = "skills root " .. root .. " is not a readable directory" } }
  end
  local names = {}
  for _, e in ipairs(entries) do
    if (e.type == "dir" or e.type == "link") and e.name:sub(1, 1) ~= "." then names[#names + 1] = e.name end
  end
  table.sort(names)
  local skills, errors = {}, {}
  for _, name in ipairs(names) do
    local s, err = M.load(r, name)
    if s then skills[#skills + 1] = s else errors[#errors + 1] = { name = name, error = err } end
  end
  return skills, errors
end

-- The system-prompt section for the selected skills: names and descriptions
-- only. "" when there are none.
function M.prompt_section(list)
  if type(list) ~= "table" or #list == 0 then return "" end
  local out = {
    "## Skills",
    "",
    "Skills are mounted read-only at " .. M.MOUNT .. "/<name>/; when a task matches a skill's description,"
      .. " read its SKILL.md (and the files it points to) before you start.",
    "",
  }
  for _, s in ipairs(list) do
    local d = tostring(s.description or ""):gsub("%s+", " ")
    out[#out + 1] = "- " .. tostring(s.name) .. ": " .. trim(d)
  end
  return table.concat(out, "\n") .. "\n"
end

return M
