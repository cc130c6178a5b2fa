-- Activities of design 1, one call (workflows/one_call.lua; named one_call_steps.*
-- since one_call.* would be the workflow script beside it): the input
-- checked and resolved, the context computed by code (files, text, the
-- artifacts of earlier sessions), the validated result kept as an artifact.
-- They run on the trusted side, with the engine's bindings.
local activity = require "activity"
local fs = require "fs"
local json = require "json"
local session = require "activities.session"
local util = require "util"

local M = {}

local MAX_FILES = 2000 -- files of one call's context, directories' trees included


-- The input's schema (lua/util.lua: read at each prepare).
function M.input_schema() return util.input_schema("one_call") end

-- The system prompt: answer with one JSON object matching the schema.
local function system_prompt(input)
  local lines = {
    "You answer one request in one reply. The request and everything you need to know are in the user's message:",
    "nothing else is available to you, and you have no tools. Answer with a single JSON object matching this JSON",
    "schema, and nothing else (no prose, no code fence):",
    "",
    json.encode(input.resultSchema),
  }
  if type(input.instructions) == "string" and input.instructions ~= "" then
    lines[#lines + 1] = ""
    lines[#lines + 1] = input.instructions
  end
  return table.concat(lines, "\n")
end

-- Checks OneCallInput, naming every problem, and resolves it: the files
-- (real paths under ENGINE_CONTEXT_ROOTS), the limits with their defaults,
-- the model's provider and the engine's caps, the system prompt. Returns
-- {ok=false, problems={...}} or the prepared call.
function M.prepare(args)
  local input = args.input
  local problems, schema = util.check_input("one_call", input)
  local jsonschema = require "jsonschema"
  local function problem(fmt, ...) problems[#problems + 1] = string.format(fmt, ...) end
  if type(input) ~= "table" then return { ok = false, problems = problems } end
  if type(input.resultSchema) == "table" then
    local ok, errs = jsonschema.check_schema(input.resultSchema, "resultSchema")
    if not ok then for _, e in ipairs(errs) do problem("%s", e) end end
  end
  local limits = {}
  for k, p in pairs(schema.properties.limits.properties) do limits[k] = p.default end
  if type(input.limits) == "table" then for k, v in pairs(input.limits) do limits[k] = v end end
  -- the spine's limits: the first call and its repairs are the model turns
  limits.maxModelTurns = 1 + (math.tointeger(limits.maxRepairs) or 0)
  local ctx = type(input.context) == "table" and input.context or {}
  local roots = session.allowed_roots()
  local files = {}
  for _, f in ipairs(type(ctx.files) == "table" and ctx.files or {}) do
    local rp = type(f) == "string" and fs.realpath(f)
    if type(f) ~= "string" then -- named by the schema
    elseif not rp then problem("context file %s does not exist", f)
    elseif not session.under(rp, roots) then
      problem("context file %s is outside the allowed roots (%s)", f, table.concat(roots, ":"))
    elseif (fs.lstat(rp) or {}).type == "dir" then
      local n0 = #files
      local ok, err = session.walk_dir(rp, rp:match("[^/]+$"), files, MAX_FILES)
      if not ok then problem("context directory %s: %s", f, err) end
      if #files == n0 then problem("context directory %s holds no files", f) end
    else
      files[#files + 1] = { src = rp, dest = rp:match("[^/]+$") }
    end
  end
  local provider, caps = session.provider_and_caps(input.model, input.identity, problem)
  if #problems > 0 then return { ok = false, problems = problems } end
  table.sort(files, function(a, b) return a.dest < b.dest end)
  return { ok = true, model = input.model, limits = limits, provider = provider, caps = caps,
    system = system_prompt(input), result_schema = input.resultSchema, files = files,
    text = type(ctx.text) == "string" and ctx.text or nil, artifacts = ctx.artifacts }
end

-- ------------------------------------------------------ the context --

-- A path pattern: * is any run of characters but /, everything else itself.
local function glob_match(pattern, path)
  local lua = "^" .. pattern:gsub("[%^%$%(%)%%%.%[%]%+%-%?]", "%%%0"):gsub("%*", "[^/]*") .. "$"
  return path:match(lua) ~= nil
end

-- The artifacts of earlier sessions a query names: {session, path, sha256,
-- size} in the order of its sessions (and, in one session, of its
-- artifact.saved events); its last `latest` when it says so. A session that
-- does not exist is a problem of the call, named.
local function query_artifacts(q)
  local found = {}
  for _, id in ipairs(q.sessions) do
    local ok, w = pcall(activity.workflow, id)
    if not ok then util.raise("ArtifactQuery", "context.artifacts: there is no session " .. id, { non_retryable = true }) end
    for _, e in ipairs(w.events or {}) do
      local p = e.payload
      if e.type == "artifact.saved" and type(p) == "table" and type(p.path) == "string"
          and glob_match(q.path or "*", p.path) then
        found[#found + 1] = { session = id, path = p.path, sha256 = p.sha256, size = p.size }
      end
    end
  end
  if q.latest and #found > q.latest then
    local last = {}
    for i = #found - q.latest + 1, #found do last[#last + 1] = found[i] end
    found = last
  end
  return found
end

-- Reads up to max bytes of a file: its text, and whether it was cut.
local function read_part(path, max)
  local f, err = io.open(path, "rb")
  if not f then util.raise("ContextUnreadable", "cannot read " .. path .. ": " .. tostring(err), { non_retryable = true }) end
  local data = f:read(max + 1) or ""
  f:close()
  return data:sub(1, max), #data > max
end

-- Text as it is, or a note for bytes that are not text (never given to the model).
local function as_text(data)
  if utf8.len(data) and not data:find("%z") then return data end
  return nil
end

-- The context computed by code: the objective, the text, each file and each
-- artifact the queries found, in that order, within maxContextBytes (a part
-- past it is cut, or left out, and said). Returns {message (the model's one
-- message), sources = {{kind, path, session, bytes, sha256, cut, skipped}}, bytes}.
function M.context(args)
  local prep, objective = args.prep, args.objective
  local budget = prep.limits.maxContextBytes
  local parts, sources = { "# Task\n\n" .. objective .. "\n" }, {}
  if prep.text and prep.text ~= "" then parts[#parts + 1] = "\n## Context\n\n" .. prep.text .. "\n" end
  local used = 0
  for _, p in ipairs(parts) do used = used + #p end
  local function add(src, title, path)
    local left = budget - used
    if left <= 0 then
      src.skipped = "maxContextBytes"
      sources[#sources + 1] = src
      return
    end
    local data, cut = read_part(path, left)
    local text = as_text(data)
    if not text then
      src.skipped = "not text"
      sources[#sources + 1] = src
      return
    end
    src.bytes, src.cut = #text, cut or nil
    local block = "\n## " .. title .. (cut and " (cut at maxContextBytes)" or "") .. "\n\n```\n" .. text ..
      (text:sub(-1) == "\n" and "" or "\n") .. "```\n"
    parts[#parts + 1] = block
    used = used + #text
    sources[#sources + 1] = src
  end
  for _, f in ipairs(prep.files or {}) do
    add({ kind = "file", path = f.dest }, "File " .. f.dest, f.src)
  end
  local root
  for _, q in ipairs(prep.artifacts or {}) do
    for _, a in ipairs(query_artifacts(q)) do
      root = root or require("artifacts").root()
      local stored = root .. "/" .. tostring(a.sha256)
      -- the stored bytes are what the event says, or the artifact is not given
      if type(a.sha256) ~= "string" or not a.sha256:match("^%x+$") or fs.sha256_file(stored) ~= a.sha256 then
        sources[#sources + 1] = { kind = "artifact", session = a.session, path = a.path, sha256 = a.sha256,
          skipped = "not in the artifact store" }
      else
        add({ kind = "artifact", session = a.session, path = a.path, sha256 = a.sha256 },
          "Artifact " .. a.path .. " of session " .. a.session, stored)
      end
    end
  end
  local message = table.concat(parts)
  return { message = message, sources = sources, bytes = #message }
end

-- ------------------------------------------------------ the result --

-- The validated result kept as an artifact (result.json), its content never
-- in the event log: {saved = {entry}, skipped = {}}.
function M.persist(args)
  local artifacts = require "artifacts"
  return { saved = { artifacts.store(artifacts.root(), "result.json", json.encode(args.result)) }, skipped = {} }
end

return M
