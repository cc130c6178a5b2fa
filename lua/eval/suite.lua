-- An eval suite read from its folder and checked (docs/evals.md):
--
--   SUITE/suite.json      {name, description, workflow, base, concurrency,
--                          timeoutSeconds, expect, scorers}
--   SUITE/cases/*.json    one case each: {description, input, model, expect,
--                          scorers, timeoutSeconds}; the case's name is the
--                          file's, without .json
--   SUITE/scorers/*.lua   one scorer each (lua/eval/scoring.lua), named by
--                          its file
--
-- load(dir, {live=}) returns the suite as the eval workflow runs it: every
-- case's whole input (the base with the case's input merged on it, its
-- relative paths made absolute, its model the recording or, live, the
-- model's live one) and every scorer's source, so a run that resumes scores
-- with what it started with. Or nil and the problems, each naming the file
-- and the field: "cases/off_by_one.json: expect.findings[1].line: must be a
-- whole number". Activities side only (files).
local fs = require "fs"
local json = require "json"

local M = {}

local NAME = "^[A-Za-z0-9][A-Za-z0-9._-]*$" -- a case's or a suite's name: part of a workflow id
local MAX_NAME = 64
local MAX_CONCURRENCY = 8 -- the engine's child_max_fanout default: more would be refused as ChildLimit

local SUITE_FIELDS = { name = true, description = true, workflow = true, base = true, concurrency = true,
  timeoutSeconds = true, expect = true, scorers = true }
local CASE_FIELDS = { description = true, input = true, model = true, expect = true, scorers = true,
  timeoutSeconds = true }

local function is_object(v) return type(v) == "table" and (next(v) == nil or v[1] == nil) end
local function is_list(v) return type(v) == "table" and (next(v) == nil or v[1] ~= nil) end

local function read_json(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, "cannot be read: " .. tostring(err) end
  local text = f:read("a")
  f:close()
  local ok, v = pcall(json.decode, text)
  if not ok then return nil, "is not JSON: " .. tostring(v):gsub("^.-json: ", "") end
  return v
end

-- An RFC 7386 merge patch of patch on target (copies; target is not changed).
function M.merge(target, patch)
  if not is_object(patch) or patch == json.null then return patch end
  local out = {}
  if is_object(target) then for k, v in pairs(target) do out[k] = v end end
  for k, v in pairs(patch) do
    if v == json.null then out[k] = nil else out[k] = M.merge(out[k], v) end
  end
  return out
end

local function absolute(dir, p)
  if type(p) ~= "string" or p == "" or p:sub(1, 1) == "/" then return p end
  return dir .. "/" .. p
end

-- A name a workflow id can carry: nil, or why not.
local function bad_name(v)
  if type(v) ~= "string" or v == "" then return "must be a non-empty string" end
  if #v > MAX_NAME then return "is longer than " .. MAX_NAME .. " bytes" end
  if not v:match(NAME) or v:find("..", 1, true) then
    return "may hold only A-Z a-z 0-9 . _ - (starting with a letter or digit, no '..')"
  end
end

local function check_timeout(v, problem)
  if v ~= nil and (math.type(v) == nil or v <= 0 or v > 86400) then problem("must be a number of seconds from 1 to 86400") end
end

-- The scorer names a list gives, checked against the known ones.
local function check_scorer_list(v, known, problem)
  if v == nil then return end
  if not is_list(v) then return problem("must be a list of scorer names") end
  for i, n in ipairs(v) do
    if type(n) ~= "string" or not known[n] then
      problem(string.format("[%d]: no scorer '%s' (scorers/%s.lua)", i, tostring(n), tostring(n)))
    end
  end
end

-- The suite's own file: its fields, checked.
local function read_suite(dir, problems)
  local function problem(field, msg) problems[#problems + 1] = "suite.json: " .. field .. ": " .. msg end
  local s, err = read_json(dir .. "/suite.json")
  if not s then
    problems[#problems + 1] = "suite.json " .. err
    return nil
  end
  if not is_object(s) then
    problems[#problems + 1] = "suite.json: must be a JSON object"
    return nil
  end
  for k in pairs(s) do
    if not SUITE_FIELDS[k] then problem(tostring(k), "unknown field (known: name, description, workflow, base, " ..
      "concurrency, timeoutSeconds, expect, scorers)") end
  end
  s.name = s.name or dir:match("([^/]+)/*$")
  local why = bad_name(s.name)
  if why then problem("name", why) end
  if s.description ~= nil and type(s.description) ~= "string" then problem("description", "must be a string") end
  if s.concurrency ~= nil and (math.type(s.concurrency) ~= "integer" or s.concurrency < 1 or s.concurrency > MAX_CONCURRENCY) then
    problem("concurrency", "must be a whole number from 1 to " .. MAX_CONCURRENCY)
  end
  check_timeout(s.timeoutSeconds, function(m) problem("timeoutSeconds", m) end)
  if s.expect ~= nil and not is_object(s.expect) then problem("expect", "must be an object") end
  return s
end

-- The session script the cases run: a bare name is one of the engine's
-- workflows (default agent_session), anything else a path from the suite.
local function workflow_path(dir, s, repo, problems)
  local w = s.workflow or "agent_session"
  if type(w) ~= "string" or w == "" then
    problems[#problems + 1] = "suite.json: workflow: must be a script's name or path"
    return nil
  end
  local path = (w:find("/", 1, true) or w:match("%.lua$")) and absolute(dir, w) or (repo .. "/workflows/" .. w .. ".lua")
  local real = fs.realpath(path)
  if not real or (fs.lstat(real) or {}).type ~= "file" then
    problems[#problems + 1] = "suite.json: workflow: " .. path .. " is not a file"
    return nil
  end
  return real
end

-- The scorers: every scorers/*.lua, compiled and checked (scoring.lua).
local function read_scorers(dir, problems)
  local scoring = require "eval.scoring"
  local list, known = {}, {}
  local entries = fs.list(dir .. "/scorers")
  if not entries then
    problems[#problems + 1] = "scorers/: missing (a suite needs at least one scorer, scorers/NAME.lua)"
    return list, known
  end
  for _, e in ipairs(entries) do
    local name = e.name:match("^(.+)%.lua$")
    if name and e.type == "file" then
      local why = bad_name(name)
      local file = "scorers/" .. e.name
      local src, err = require("util").read_file(dir .. "/" .. file)
      if why then
        problems[#problems + 1] = file .. ": the file's name " .. why
      elseif not src then
        problems[#problems + 1] = file .. ": cannot be read: " .. tostring(err)
      else
        local sc, perr = scoring.compile(name, file, src)
        if not sc then
          problems[#problems + 1] = perr
        else
          list[#list + 1] = { name = name, file = file, source = src, kind = sc.kind, description = sc.description }
          known[name] = true
        end
      end
    end
  end
  if #list == 0 and #problems == 0 then problems[#problems + 1] = "scorers/: no scorer (scorers/NAME.lua)" end
  return list, known
end

-- The model a case's session uses, offline or live: nil and why when --live
-- has none to use.
local function case_model(model, dir, live)
  if not is_object(model) then return model end
  local m = {}
  for k, v in pairs(model) do m[k] = v end
  if live then
    if not is_object(m.live) then return nil, "has no live member (--live runs each case's model.live)" end
    local l = {}
    for k, v in pairs(m.live) do l[k] = v end
    l.prices = l.prices or m.prices
    return l
  end
  m.live = nil -- offline means the recording, whatever keys the environment holds
  if type(m.name) == "string" and m.name:match("^replay:") then
    local path = absolute(dir, m.name:sub(#"replay:" + 1))
    if (fs.lstat(path) or {}).type ~= "file" then
      return nil, "the recording " .. m.name:sub(#"replay:" + 1) .. " is not a file of the suite"
    end
    m.name = "replay:" .. path
  end
  return m
end

-- Paths in a session input are the suite's: made absolute.
local function absolute_paths(input, dir)
  if is_object(input.context) and is_list(input.context.files) then
    for i, f in ipairs(input.context.files) do input.context.files[i] = absolute(dir, f) end
  end
  if type(input.memoryFile) == "string" then input.memoryFile = absolute(dir, input.memoryFile) end
end

-- The input schema a workflow script declares: a line `-- input schema: PATH`
-- in its opening comment block, PATH relative to the script's folder (as the
-- API's /v1/workflow-scripts reads it: docs/workflows.md "Declaring the
-- input"), or nil.
local function declared_schema(script)
  local f = io.open(script, "rb")
  if not f then return nil end
  local found
  for line in f:lines() do
    if not line:match("^%-%-") then break end
    local p = line:match("^%-%-%s*input schema:%s*(%S.-)%s*$")
    if p then found = p break end
  end
  f:close()
  if not found then return nil end
  return found:sub(1, 1) == "/" and found or (script:match("^(.*)/[^/]*$") or ".") .. "/" .. found
end

-- The input's problems as the session's own check would name them (its
-- workflow's declared schema: AgentSessionInput, OneCallInput), before anything starts.
local function session_problems(input, schema_path)
  local f = io.open(schema_path, "rb")
  if not f then return {} end
  local schema = json.decode(f:read("a"))
  f:close()
  local ok, errs = require("jsonschema").validate(schema, input)
  return ok and {} or (errs or {})
end

local function read_case(dir, file, s, base, known, opts, problems)
  local name = file:match("^(.+)%.json$")
  local where = "cases/" .. file
  local function problem(field, msg) problems[#problems + 1] = where .. ": " .. field .. ": " .. msg end
  local why = bad_name(name)
  if why then
    problems[#problems + 1] = where .. ": the file's name " .. why
    return nil
  end
  local c, err = read_json(dir .. "/" .. where)
  if not c then
    problems[#problems + 1] = where .. " " .. err
    return nil
  end
  if not is_object(c) then
    problems[#problems + 1] = where .. ": must be a JSON object"
    return nil
  end
  for k in pairs(c) do
    if not CASE_FIELDS[k] then problem(tostring(k), "unknown field (known: description, input, model, expect, " ..
      "scorers, timeoutSeconds)") end
  end
  if c.description ~= nil and type(c.description) ~= "string" then problem("description", "must be a string") end
  if c.input ~= nil and not is_object(c.input) then problem("input", "must be an object (merged onto the suite's base)") end
  if c.model ~= nil and not is_object(c.model) then problem("model", "must be an object ({name, prices, live})") end
  if c.expect ~= nil and not is_object(c.expect) then problem("expect", "must be an object") end
  check_timeout(c.timeoutSeconds, function(m) problem("timeoutSeconds", m) end)
  check_scorer_list(c.scorers, known, function(m) problem("scorers", m) end)
  local input = M.merge(base or {}, is_object(c.input) and c.input or {})
  if is_object(c.model) then input.model = M.merge(input.model, c.model) end
  if input.model == nil then
    problem("model", "missing: neither the case nor the suite's base gives the session a model")
  else
    local m, merr = case_model(input.model, dir, opts.live)
    if not m then problem("model", merr) else input.model = m end
  end
  absolute_paths(input, dir)
  if opts.check_input then
    for _, e in ipairs(session_problems(input, opts.check_input)) do problem("input", e) end
  end
  return { name = name, description = c.description, input = input,
    expect = M.merge(is_object(s.expect) and s.expect or {}, is_object(c.expect) and c.expect or {}),
    scorers = c.scorers, timeout = c.timeoutSeconds or s.timeoutSeconds or 900 }
end

-- dir: the suite's folder (any path; made absolute). opts: {live = bool,
-- repo = the engine's home (its workflows/ and lua/types/)}.
function M.load(dir, opts)
  opts = opts or {}
  local problems = {}
  local real = fs.realpath(dir)
  if not real or (fs.lstat(real) or {}).type ~= "dir" then
    return nil, { "not a suite folder (no such directory)" }
  end
  dir = real
  local s = read_suite(dir, problems)
  if not s then return nil, problems end
  local workflow = workflow_path(dir, s, opts.repo, problems)
  local scorers, known = read_scorers(dir, problems)
  check_scorer_list(s.scorers, known, function(m) problems[#problems + 1] = "suite.json: scorers: " .. m end)
  if is_list(s.scorers) then
    local keep, by = {}, {}
    for _, sc in ipairs(scorers) do by[sc.name] = sc end
    for _, n in ipairs(s.scorers) do keep[#keep + 1] = by[n] end
    scorers = keep
  end
  local base
  if s.base ~= nil then
    if type(s.base) ~= "string" then
      problems[#problems + 1] = "suite.json: base: must be the path of a JSON file"
    else
      local b, err = read_json(absolute(dir, s.base))
      if not b then problems[#problems + 1] = "suite.json: base: " .. s.base .. " " .. err
      elseif not is_object(b) then problems[#problems + 1] = "suite.json: base: " .. s.base .. " must hold a JSON object"
      else base = b end
    end
  end
  local cases = {}
  local entries = fs.list(dir .. "/cases")
  if not entries then
    problems[#problems + 1] = "cases/: missing (a suite needs at least one case, cases/NAME.json)"
  else
    -- a workflow that declares its input's schema: the cases' inputs are checked against it
    local schema = workflow and declared_schema(workflow)
    local copts = { live = opts.live, repo = opts.repo,
      check_input = schema and (fs.lstat(schema) or {}).type == "file" and schema or nil }
    for _, e in ipairs(entries) do
      if e.type == "file" and e.name:match("%.json$") then
        local c = read_case(dir, e.name, s, base, known, copts, problems)
        if c then cases[#cases + 1] = c end
      end
    end
    if #cases == 0 and #problems == 0 then problems[#problems + 1] = "cases/: no case (cases/NAME.json)" end
  end
  if #problems > 0 then return nil, problems end
  return { name = s.name, description = s.description, dir = dir, workflow = workflow, live = opts.live or false,
    concurrency = s.concurrency or 3, cases = cases, scorers = scorers }
end

return M
