-- fuzz_skill_frontmatter: lua/skills.lua's M.parse (SKILL.md text: the '---'
-- lines, UTF-8 and control checks, libYAML through lyaml) and M.validate on
-- arbitrary text, as M.load reads a skill directory someone else wrote.
--
-- Properties: parse returns (meta, body) or (nil, message) and never raises;
-- meta has only the format's fields, each of the shape the parser promises
-- (strings; metadata a flat map of strings; allowed-tools a list of strings);
-- body is a string. validate returns true or (nil, message naming the skill)
-- and never raises, for what parse gave and with a directory name. Both run
-- within the instruction budget (the frontmatter is bounded before libYAML).
local fuzz = require "fuzz"
local skills = require "skills"

local SCALARS = { name = true, description = true, license = true, compatibility = true }

local function check_meta(meta)
  for k, v in pairs(meta) do
    if SCALARS[k] then
      if type(v) ~= "string" then fuzz.fail("field " .. tostring(k) .. " is a " .. type(v)) end
    elseif k == "metadata" then
      if type(v) ~= "table" then fuzz.fail("metadata is a " .. type(v)) end
      for mk, mv in pairs(v) do
        if type(mk) ~= "string" or type(mv) ~= "string" then fuzz.fail("metadata has a non-string key or value") end
      end
    elseif k == "allowed-tools" then
      if type(v) ~= "table" then fuzz.fail("allowed-tools is a " .. type(v)) end
      local n = 0
      for _ in pairs(v) do n = n + 1 end
      if n ~= #v then fuzz.fail("allowed-tools is not a list") end
      for _, t in ipairs(v) do
        if type(t) ~= "string" then fuzz.fail("allowed-tools has a " .. type(t)) end
      end
    else
      fuzz.fail("parse kept an unknown field " .. string.format("%q", tostring(k)))
    end
  end
  if type(meta.metadata) ~= "table" or type(meta["allowed-tools"]) ~= "table" then
    fuzz.fail("metadata and allowed-tools are not always there")
  end
end

local function validate(meta, dirname)
  local ok, vok, verr = pcall(skills.validate, meta, dirname)
  if not ok then fuzz.fail("skills.validate raised: " .. tostring(vok)) end
  if vok ~= true and (vok ~= nil or type(verr) ~= "string" or not verr:find("^invalid skill ")) then
    fuzz.fail("skills.validate returned " .. tostring(vok) .. ", " .. tostring(verr))
  end
end

return function(data)
  local ok, meta, body = pcall(skills.parse, data)
  if not ok then fuzz.fail("skills.parse raised: " .. tostring(meta)) end
  if meta == nil then
    if type(body) ~= "string" or body == "" then fuzz.fail("skills.parse failed without a message") end
    return
  end
  if type(meta) ~= "table" then fuzz.fail("skills.parse returned a " .. type(meta)) end
  if type(body) ~= "string" then fuzz.fail("skills.parse returned a body that is a " .. type(body)) end
  check_meta(meta)
  validate(meta, nil)
  validate(meta, "code-review")
  validate(meta, type(meta.name) == "string" and meta.name or nil)
end
