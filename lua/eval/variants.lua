-- The variants of `engine eval --fork ID --at SEQ --variants FILE`
-- (docs/evals.md): the same fork point run once per variant, side by side.
--
--   {
--     "suite": "evals/pr-review", "case": "off_by_one",   -- optional: the scorers and
--                                                         -- expectations to score with
--     "variants": [
--       {"name": "recorded", "model": {"name": "replay:a.jsonl"}},
--       {"name": "strict", "policies": "policies-strict/", "input_patch": {...}, "script": "x.lua"}
--     ]
--   }
--
-- Each variant is what `engine fork` may change: model, input_patch,
-- policies (a folder) and script (a file), paths relative to the file.
-- load(file, {repo=}) returns them checked and absolute, or nil and the
-- problems, each naming the file and the field. Activities side only.
local fs = require "fs"
local json = require "json"

local M = {}

local MAX_VARIANTS = 8 -- they run at once, as one workflow's forks
local FIELDS = { name = true, model = true, input_patch = true, policies = true, script = true }

local function is_object(v) return type(v) == "table" and (next(v) == nil or v[1] == nil) end

local function absolute(dir, p)
  if p:sub(1, 1) == "/" then return p end
  return dir .. "/" .. p
end

function M.load(file, opts)
  local problems = {}
  local real = fs.realpath(file)
  if not real or (fs.lstat(real) or {}).type ~= "file" then return nil, { "not a file" } end
  local dir = real:match("^(.*)/[^/]*$")
  local shown = real:match("([^/]+)$")
  local function problem(field, msg) problems[#problems + 1] = shown .. ": " .. field .. ": " .. msg end
  local text = require("util").read_file(real)
  local okj, doc = pcall(json.decode, text or "")
  if not okj or not is_object(doc) then return nil, { shown .. ": must be a JSON object {variants = [...]}" } end
  for k in pairs(doc) do
    if k ~= "suite" and k ~= "case" and k ~= "variants" then problem(tostring(k), "unknown field (known: suite, case, variants)") end
  end
  local out = { variants = {} }
  if doc.suite ~= nil then
    if type(doc.suite) ~= "string" then
      problem("suite", "must be a suite's folder")
    else
      local suite, sp = require("eval.suite").load(absolute(dir, doc.suite), { repo = opts.repo })
      if not suite then
        for _, p in ipairs(sp) do problem("suite", p) end
      else
        out.suite = suite.dir
        local found = false
        for _, c in ipairs(suite.cases) do if c.name == doc.case then found = true end end
        if type(doc.case) ~= "string" then problem("case", "with a suite, name the case whose expectations score the variants")
        elseif not found then problem("case", "the suite has no case '" .. doc.case .. "'") end
        out.case = doc.case
      end
    end
  elseif doc.case ~= nil then
    problem("case", "needs a suite")
  end
  if type(doc.variants) ~= "table" or #doc.variants == 0 then
    problem("variants", "must be a list of at least one variant")
  elseif #doc.variants > MAX_VARIANTS then
    problem("variants", "at most " .. MAX_VARIANTS .. " variants")
  else
    local seen = {}
    for i, v in ipairs(doc.variants) do
      local at = string.format("variants[%d]", i)
      if not is_object(v) then
        problem(at, "must be an object {name, model, input_patch, policies, script}")
      else
        for k in pairs(v) do
          if not FIELDS[k] then problem(at .. "." .. tostring(k), "unknown field (known: name, model, input_patch, policies, script)") end
        end
        local n = v.name
        if type(n) ~= "string" or not n:match("^[A-Za-z0-9][A-Za-z0-9_-]*$") or #n > 40 then
          problem(at .. ".name", "must be 1-40 of A-Z a-z 0-9 _ - (it names the fork RUN.NAME)")
        elseif seen[n] then
          problem(at .. ".name", "'" .. n .. "' is taken by another variant")
        end
        seen[n or i] = true
        local o = { name = n }
        if v.model ~= nil then
          if not is_object(v.model) then problem(at .. ".model", "must be an object ({name, provider, baseUrl, prices})")
          else
            o.model = {}
            for k, x in pairs(v.model) do o.model[k] = x end
            if type(o.model.name) == "string" and o.model.name:match("^replay:") then
              local path = absolute(dir, o.model.name:sub(#"replay:" + 1))
              if (fs.lstat(path) or {}).type ~= "file" then problem(at .. ".model.name", path .. " is not a file") end
              o.model.name = "replay:" .. path
            end
          end
        end
        if v.input_patch ~= nil then
          if not is_object(v.input_patch) then problem(at .. ".input_patch", "must be an object (a JSON merge patch)")
          else o.input_patch = v.input_patch end
        end
        for _, k in ipairs({ "policies", "script" }) do
          if v[k] ~= nil then
            local want = k == "policies" and "dir" or "file"
            local p = type(v[k]) == "string" and fs.realpath(absolute(dir, v[k]))
            if not p or (fs.lstat(p) or {}).type ~= want then problem(at .. "." .. k, "must name a " .. (want == "dir" and "folder" or "file"))
            else o[k] = p end
          end
        end
        out.variants[#out.variants + 1] = o
      end
    end
  end
  if #problems > 0 then return nil, problems end
  return out
end

return M
