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
-- matches. Lua 5.4; the frontmatter is read by libYAML through Debian's
-- lua-yaml (lyaml), and every error names the line.
local yaml = require "yaml" -- lyaml's libYAML binding: yaml.parser(text) yields events

local M = {}

M.MAX_NAME = 64
M.MAX_DESCRIPTION = 1024
M.MAX_COMPATIBILITY = 500
M.MAX_BYTES = 5 * 1024 * 1024
M.MAX_FRONTMATTER = 64 * 1024 -- bytes between the '---' lines, checked before libYAML parses them
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

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

local function quote_name(s)
  if type(s) ~= "string" then return tostring(s) end
  return "'" .. (s:gsub("[%c']", function(c) return string.format("\\x%02x", c:byte()) end)) .. "'"
end

-- A parse error: error() with this table, turned into nil, msg by M.parse.
local function perr(msg) error({ skills_parse = true, msg = msg }, 0) end

-- The frontmatter text starts on line 2 of SKILL.md (after the opening '---').
local FIRST_LINE = 2

local function line_at(src, pos)
  local n = FIRST_LINE
  for _ in src:sub(1, pos - 1):gmatch("\n") do n = n + 1 end
  return n
end

-- libYAML reports "<problem> at document: D, line: L, column: C", maybe
-- followed by "\nwhile <context> at line: L, column: C", counting lines of the
-- frontmatter text from 1; errors from its reader carry no position.
local function yaml_error(msg)
  msg = tostring(msg)
  local problem, l, c, rest = msg:match("^(.-) at document: %d+, line: (%d+), column: (%d+)(.*)$")
  if not problem then return "invalid YAML: " .. (msg:gsub(" at document: %d+.*$", "")) end
  -- The stream libYAML reads is the frontmatter, so its end is the closing '---'.
  problem = problem:gsub("end of stream", "end of the frontmatter")
  local out = "line " .. (FIRST_LINE - 1 + tonumber(l)) .. ", column " .. c .. ": invalid YAML: " .. problem
  local context, cl = rest:match("^%s*while (.-) at line: (%d+)")
  if context then out = out .. " (while " .. context .. " from line " .. (FIRST_LINE - 1 + tonumber(cl)) .. ")" end
  if problem == "mapping values are not allowed in this context" then
    out = out .. "; if the value contains ': ' or ends with ':', quote it"
  end
  return out
end

local KIND_NAME = { MAPPING_START = "a map", SEQUENCE_START = "a list", SCALAR = "a string" }

-- YAML's spellings of "no value" for a plain scalar.
local NULLS = { [""] = true, ["~"] = true, null = true, Null = true, NULL = true }

local function show_tag(tag)
  local short = tag:match("^tag:yaml%.org,2002:(.*)$")
  return short and "!!" .. short or tag
end

-- Builds the frontmatter from libYAML's events (lyaml's "yaml" binding), in
-- one pass that stops at the first problem. No YAML 1.1 implicit typing: a
-- scalar is the text as written, so `name: no`, `version: 1.10`, `license:
-- true` or a date stay the strings the author wrote; a null (an empty value,
-- ~ or null) is "" (the validator then says which field is empty), or an empty
-- map or list for metadata and allowed-tools. Only the shapes the format
-- allows are built (fields of strings, metadata a flat map, allowed-tools a
-- string or a list), so nothing nests deeper than that. Anchors, aliases and
-- tags are refused (no alias expansion, no constructors), and so are
-- duplicate keys and a second document.
local function build(src)
  local next_event = yaml.parser(src)
  local function line(ev) return "line " .. (FIRST_LINE + ev.start_mark.line) .. ": " end
  local function fail(ev, msg) perr(line(ev) .. msg) end
  local function pull()
    local ok, ev = pcall(next_event)
    if not ok then perr(yaml_error(ev)) end
    if ev.type == "ALIAS" then
      fail(ev, "aliases ('*" .. ev.anchor .. "') are not allowed in SKILL.md frontmatter")
    end
    if ev.anchor then fail(ev, "anchors ('&" .. ev.anchor .. "') are not allowed in SKILL.md frontmatter") end
    if ev.tag then fail(ev, "tags ('" .. show_tag(ev.tag) .. "') are not allowed in SKILL.md frontmatter") end
    if (ev.type == "DOCUMENT_START" or ev.type == "DOCUMENT_END") and not ev.implicit then
      fail(ev, "document markers ('---', '...') and directives are not allowed inside the frontmatter")
    end
    return ev
  end
  local function is_null(ev) return ev.type == "SCALAR" and ev.style == "PLAIN" and NULLS[ev.value] end

  local function string_value(ev) return is_null(ev) and "" or ev.value end

  local function string_field(ev, key)
    if ev.type ~= "SCALAR" then fail(ev, "'" .. key .. "' must be a string, not " .. KIND_NAME[ev.type]) end
    return string_value(ev)
  end

  local function metadata_field(ev)
    if is_null(ev) then return {} end
    if ev.type == "SEQUENCE_START" then fail(ev, "'metadata' must be a map, not a list") end
    if ev.type ~= "MAPPING_START" then fail(ev, "'metadata' must be a map of 'key: value' lines") end
    local map = {}
    while true do
      local k = pull()
      if k.type == "MAPPING_END" then return map end
      if k.type ~= "SCALAR" then fail(k, "metadata keys must be strings, not " .. KIND_NAME[k.type]) end
      if map[k.value] ~= nil then fail(k, "duplicate key " .. quote_name(k.value) .. " in 'metadata'") end
      local v = pull()
      if v.type ~= "SCALAR" then -- named at the key's line: a nested block map starts below it
        fail(k, "'metadata." .. k.value .. "' must be a string, not " .. KIND_NAME[v.type]
          .. " (metadata is a flat map of strings)")
      end
      map[k.value] = string_value(v)
    end
  end

  local function tools_field(ev)
    if ev.type == "SCALAR" then
      local list = {}
      for w in string_value(ev):gmatch("%S+") do list[#list + 1] = w end
      return list
    end
    if ev.type ~= "SEQUENCE_START" then fail(ev, "'allowed-tools' must be a space-separated string or a list") end
    local list = {}
    while true do
      local item = pull()
      if item.type == "SEQUENCE_END" then return list end
      if item.type ~= "SCALAR" then
        fail(item, "allowed-tools[" .. (#list + 1) .. "] must be a string, not " .. KIND_NAME[item.type])
      end
      list[#list + 1] = string_value(item)
    end
  end

  local READ = { scalar = string_field, map = metadata_field, tools = tools_field }
  local meta = {}
  pull() -- STREAM_START
  local ev = pull()
  if ev.type == "STREAM_END" then return meta end -- only blank lines and comments
  local root = pull() -- after DOCUMENT_START
  if root.type == "SEQUENCE_START" then fail(root, "expected 'key: value', not a list item") end
  if root.type ~= "MAPPING_START" then fail(root, "expected 'key: value'") end
  while true do
    local k = pull()
    if k.type == "MAPPING_END" then break end
    if k.type ~= "SCALAR" then fail(k, "field names must be strings, not " .. KIND_NAME[k.type]) end
    local key = k.value
    local kind = FIELDS[key]
    if not kind then
      fail(k, "unknown field " .. quote_name(key) .. " (allowed: " .. table.concat(FIELD_ORDER, ", ") .. ")")
    end
    if meta[key] ~= nil then fail(k, "duplicate field '" .. key .. "'") end
    meta[key] = READ[kind](pull(), key)
  end
  pull() -- DOCUMENT_END
  ev = pull()
  if ev.type ~= "STREAM_END" then fail(ev, "only one YAML document is allowed in the frontmatter") end
  return meta
end

-- Parses SKILL.md text. Returns meta (YAML field names; "allowed-tools" is
-- always a list, "metadata" always a map) and the markdown body, or nil and
-- an error naming the line.
function M.parse(text)
  if type(text) ~= "string" then return nil, "SKILL.md content must be a string" end
  if #text > M.MAX_BYTES then return nil, "SKILL.md is " .. #text .. " bytes (at most " .. M.MAX_BYTES .. ")" end
  if text:sub(1, 3) == "\239\187\191" then text = text:sub(4) end
  text = text:gsub("\r\n", "\n")
  local first_nl = text:find("\n", 1, true)
  local first = first_nl and text:sub(1, first_nl - 1) or text
  if not first:match("^%-%-%-%s*$") then
    return nil, "line 1: SKILL.md must start with YAML frontmatter (a '---' line)"
  end
  if not first_nl then return nil, "frontmatter is not terminated (no closing '---' line)" end
  -- The frontmatter runs up to the first line that is '---' (trailing spaces
  -- allowed); it is bounded before libYAML sees it.
  local start, pos, close, close_end = first_nl + 1, first_nl + 1, nil, nil
  while pos <= #text do
    if pos - start > M.MAX_FRONTMATTER then
      return nil, "frontmatter is longer than " .. M.MAX_FRONTMATTER .. " bytes"
    end
    local nl = text:find("\n", pos, true)
    local line = text:sub(pos, (nl or #text + 1) - 1)
    if line:match("^%-%-%-%s*$") then close, close_end = pos, (nl or #text) + 1; break end
    if not nl then break end
    pos = nl + 1
  end
  if not close then return nil, "frontmatter is not terminated (no closing '---' line)" end
  local src = text:sub(start, close - 1)
  -- libYAML would guess UTF-16 from a leading BOM and reports bad bytes
  -- without a position, so encoding problems are named here with their line.
  local _, bad = utf8.len(src)
  if bad then return nil, "line " .. line_at(src, bad) .. ": frontmatter is not valid UTF-8" end
  local ctl = src:find("[%z\1-\8\11\12\14-\31\127]")
  if ctl then
    return nil, string.format("line %d: control character 0x%02x is not allowed in the frontmatter",
      line_at(src, ctl), src:byte(ctl))
  end
  local ok, res = pcall(build, src)
  if not ok then
    if type(res) == "table" and res.skills_parse then return nil, res.msg end
    error(res, 0)
  end
  res.metadata = res.metadata or {}
  res["allowed-tools"] = res["allowed-tools"] or {}
  return res, text:sub(close_end)
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
