-- Activities of the agent session (workflows/agent_session.lua): prepare the
-- session from its input, run a tool, persist artifacts, apply an approved
-- memory update. They run on the trusted side, with the engine's bindings.
local activity = require "activity"
local fs = require "fs"
local json = require "json"

local M = {}

local util = require "util"
local raise = util.raise

-- The canonical absolute path of p (nil when it does not exist).
local function realpath(p) return (fs.realpath(p)) end

local function lua_dir() return activity.worker().lua_dir end -- ENGINE_LUA_DIR or the build default
local function repo_dir() return lua_dir():gsub("/lua/?$", "") end

function M.skills_root() return os.getenv("ENGINE_SKILLS_DIR") or (repo_dir() .. "/skills") end
function M.policies_dir() return os.getenv("ENGINE_POLICIES_DIR") or (repo_dir() .. "/policies") end

-- Roots that context files and the memory file must live under
-- (ENGINE_CONTEXT_ROOTS, colon-separated; default: the engine's working directory).
local function allowed_roots()
  local roots = {}
  local spec = os.getenv("ENGINE_CONTEXT_ROOTS") or os.getenv("PWD") or "."
  for r in spec:gmatch("[^:]+") do
    local rp = realpath(r)
    if rp then roots[#roots + 1] = rp end
  end
  return roots
end

local function under(path, roots)
  for _, r in ipairs(roots) do
    if path == r or path:sub(1, #r + 1) == r .. "/" then return true end
  end
  return false
end
M.allowed_roots, M.under = allowed_roots, under -- also one_call_steps.lua's

-- The regular files under dir (recursively, .git and anything not a
-- regular file or directory left out) appended to out as {src, dest=prefix/rel};
-- false and why past max files.
local MAX_DIR_FILES = 20000
function M.walk_dir(dir, prefix, out, max)
  local entries, err = fs.list(dir)
  if not entries then return false, tostring(err) end
  for _, e in ipairs(entries) do
    if e.name ~= ".git" then
      local path, dest = dir .. "/" .. e.name, prefix .. "/" .. e.name
      if e.type == "dir" then
        local ok, why = M.walk_dir(path, dest, out, max)
        if not ok then return false, why end
      elseif e.type == "file" then
        if #out >= max then return false, "more than " .. max .. " files" end
        out[#out + 1] = { src = path, dest = dest }
      end
    end
  end
  return true
end

local function is_list(v) return type(v) == "table" and (next(v) == nil or v[1] ~= nil) end

-- ------------------------------------------------------------ the input --
-- AgentSessionInput is declared once, as data, in
-- lua/types/agent_session_input.schema.json: its fields, their defaults, and
-- the problem each bad value is named by (errorMessage). prepare checks an
-- input against it (lua/jsonschema.lua), then checks in Lua what a schema
-- cannot say: lengths in bytes (JSON Schema counts characters), tools and
-- skills that must exist, writable paths (under working/ or output/, no ".."),
-- context and memory files on this host, the model's provider, the engine's
-- limits file, the MCP servers, and the result schema itself.

-- The input's schema (lua/util.lua: read at each prepare).
function M.input_schema() return require("util").input_schema("agent_session") end

-- The requested tools that exist (MCP tools are checked once their servers
-- have listed theirs).
local function effective_tools(input, requested, known, problem)
  local effective = {}
  if not is_list(requested) then return effective end
  for _, name in ipairs(requested) do
    if type(name) == "string" and name:match("^mcp__") and input.mcpServers ~= nil then
      -- an MCP tool: checked once its server has listed its tools
    elseif name == "delegate" then
      -- the delegation's (added with the others' definitions), not the registry's
      local on, bad = require("delegation").options(input)
      if not on and not bad then problem("the tool 'delegate' needs delegation.enabled") end
    elseif not known[name] then problem("unknown tool '%s'", tostring(name)) else effective[#effective + 1] = name end
  end
  return effective
end

local function check_writable(writable, problem)
  for _, p in ipairs(is_list(writable) and writable or {}) do
    if type(p) ~= "string" or not (p:match("^/workspace/working") or p:match("^/workspace/output")) or p:find("%.%.") then
      problem("writable path %s is not under /workspace/working or /workspace/output", tostring(p))
    end
  end
end

-- The context files, under the allowed roots: {{src=, dest=}} (a directory:
-- its tree under its name, without .git, symlinks or special files).
local function context_files(ctx, roots, problem)
  local files = {}
  for _, f in ipairs(is_list(ctx.files) and ctx.files or {}) do
    local rp = type(f) == "string" and realpath(f)
    if not rp then problem("context file %s does not exist", tostring(f))
    elseif not under(rp, roots) then problem("context file %s is outside the allowed roots (%s)", f, table.concat(roots, ":"))
    elseif (fs.lstat(rp) or {}).type == "dir" then
      local n0 = #files
      local ok, err = M.walk_dir(rp, rp:match("[^/]+$"), files, MAX_DIR_FILES)
      if not ok then problem("context directory %s: %s", f, err) end
      if #files == n0 then problem("context directory %s holds no files", f) end
    else files[#files + 1] = { src = rp, dest = rp:match("[^/]+$") } end
  end
  return files
end

local function load_skills(names, problem)
  local selected = {}
  if not is_list(names) then return selected end
  local skills = require "skills"
  for _, name in ipairs(names) do
    local s, err = skills.load(M.skills_root(), tostring(name))
    if not s then problem("%s", tostring(err)) else selected[#selected + 1] = s end
  end
  return selected
end

-- The memory file's text ("" when it does not exist yet), under the allowed roots.
local function read_memory(memory_file, roots, problem)
  if memory_file == nil then return "" end
  local mf = type(memory_file) == "string" and memory_file
  local dir = mf and realpath(mf:match("^(.*)/[^/]*$") or ".")
  if not mf or not dir or not under(dir, roots) then
    problem("memoryFile %s is outside the allowed roots", tostring(memory_file))
    return ""
  end
  local f = io.open(mf, "r")
  if not f then return "" end
  local memory = f:read("a")
  f:close()
  return memory
end

-- concurrency = {key=, limit=, strategy=} with its defaults: at most limit
-- sessions with this key at once.
local function concurrency_of(c, props, problem)
  if type(c) ~= "table" then return nil end
  if type(c.key) == "string" and #c.key > 256 then
    problem("concurrency.key must be a string of 1-256 bytes (got %s)", c.key)
  end
  local limit = c.limit or props.limit.default
  return { key = c.key, limit = math.tointeger(limit) or limit, strategy = c.strategy or props.strategy.default }
end

-- The provider the model's calls count against, and the engine's limits that
-- apply (recorded with the prepared session, so the workflow replays them).
local function provider_and_caps(model, identity, problem)
  local provider, caps
  if type(model) == "table" and type(model.name) == "string" and model.name ~= "" then
    local okp, p = pcall(require("runners").provider_of, model)
    if okp then provider = p else problem("%s", type(p) == "table" and tostring(p.message) or tostring(p)) end
  end
  local lim = require "caps"
  local limits_file = lim.path(activity.worker().db_dir)
  if limits_file then
    local cfg, lerr = lim.load(limits_file)
    if not cfg then problem("%s", lerr) else caps = lim.caps(cfg, provider, identity or "anonymous") end
  end
  return provider, caps
end
M.provider_and_caps = provider_and_caps

-- A sub-session's view of its parent's working/ (subSession.workspace
-- "parent"; the workflow checks that its parent is the one named).
local function views_parent(input)
  return type(input.subSession) == "table" and input.subSession.workspace == "parent"
end

-- task.md: the objective, the context's text and references, the files in
-- input/, a sub-session's view of its parent's files.
local function task_text(input, ctx, files)
  local task = "# Task\n\n" .. input.objective .. "\n"
  if type(ctx.text) == "string" and ctx.text ~= "" then task = task .. "\n## Context\n\n" .. ctx.text .. "\n" end
  if is_list(ctx.references) and #ctx.references > 0 then
    task = task .. "\n## References\n\n"
    for _, r in ipairs(ctx.references) do task = task .. "- " .. tostring(r) .. "\n" end
  end
  if #files > 0 then
    task = task .. "\n## Files\n\n"
    local listed = {}
    for _, f in ipairs(files) do
      local top = f.dest:match("^[^/]+") -- a directory's tree is listed once, by its name
      local entry = top == f.dest and top or (top .. "/")
      if not listed[entry] then
        listed[entry] = true
        task = task .. "- /workspace/input/" .. entry .. "\n"
      end
    end
  end
  if views_parent(input) then
    task = task .. "\n## The delegating session's files\n\n/workspace/parent is the working directory of the " ..
      "session that delegated this task (" .. tostring(input.subSession.parent) .. "), as it is now: read-only. " ..
      "Write your own files under /workspace/working and /workspace/output.\n"
  end
  return task
end

local function system_prompt(selected, parent_view)
  local skills_text = #selected > 0 and require("skills").prompt_section(selected) or ""
  local lines = {
    "You are an agent working in a sandbox on one task. Your tools run inside the sandbox, which has no network:",
    "/workspace/task.md is the task, /workspace/input holds the context (read-only), /workspace/working and",
    "/workspace/output are yours to write, /workspace/simple.md is the memory of earlier sessions (read-only),",
    "/workspace/skills holds skills. Some tools need a human's approval; a denied call comes back as denied.",
  }
  if parent_view then
    lines[#lines + 1] = "/workspace/parent holds the working files of the session that delegated this task to you " ..
      "(read-only)."
  end
  for _, l in ipairs({
    "When you are done, answer with a single JSON object: {\"summary\": \"...\", \"result\": {...},",
    "\"memory_updates\": [\"facts worth remembering\"]} and nothing else.",
    skills_text,
  }) do lines[#lines + 1] = l end
  return table.concat(lines, "\n")
end

-- Checks AgentSessionInput, naming every problem; resolves files, skills and
-- the memory file; computes the effective permissions (requested tools that
-- exist) and the limits; builds the system prompt, task.md and the first
-- message. Returns {ok=false, problems={...}} or the prepared session.
function M.prepare(args)
  local input, problems = args.input, {}
  local function problem(fmt, ...) problems[#problems + 1] = string.format(fmt, ...) end
  local schema = M.input_schema()
  local _, errors = require("jsonschema").validate(schema, input, "input")
  for _, e in ipairs(errors or {}) do problems[#problems + 1] = e end
  if type(input) ~= "table" then return { ok = false, problems = problems } end
  local P = schema.properties
  -- what the schema cannot say
  if type(input.identity) == "string" and #input.identity > 300 then
    problem("identity must be a string of at most 300 bytes")
  end
  -- each bad grant named (lua/grants.lua reads them, as the workflow does)
  if type(input.grants) == "table" or input.starterGrants ~= nil then
    local _, bad = require("grants").of_input(input)
    if type(bad) == "table" then for _, p in ipairs(bad) do problem("%s", p) end end
  end
  local model = input.model
  local compaction = require("compaction").options(model, input.compaction)
  local limits = {}
  for k, p in pairs(P.limits.properties) do limits[k] = p.default end
  if type(input.limits) == "table" then
    for k, v in pairs(input.limits) do limits[k] = v end
  end
  local tools = require "tools"
  local perms = type(input.permissions) == "table" and input.permissions or {}
  local PP = P.permissions.properties
  local requested = perms.tools or PP.tools.default
  local effective = effective_tools(input, requested, tools.load_all(), problem)
  local mcp_defs, mcp
  if input.mcpServers ~= nil and #problems == 0 then
    mcp_defs, mcp = M.mcp_prepare(input.mcpServers, is_list(requested) and requested or {}, problem)
  end
  local delegation, bad_delegation = require("delegation").options(input)
  -- the schema names a workspace that is neither own nor parent already
  if bad_delegation and not require("util").contains(problems, bad_delegation) then problem("%s", bad_delegation) end
  if delegation and not require("util").contains(effective, "delegate") then effective[#effective + 1] = "delegate" end
  local writable = perms.writablePaths or PP.writablePaths.default
  check_writable(writable, problem)
  local roots = allowed_roots()
  local ctx = type(input.context) == "table" and input.context or {}
  local files = context_files(ctx, roots, problem)
  local selected = load_skills(input.skills, problem)
  local mem = require "memory"
  local kinds = mem.read_kinds(input)
  -- instructions: the operator's file, when the input reads them (the default)
  local memory = kinds.instructions and read_memory(input.memoryFile, roots, problem) or ""
  local concurrency = concurrency_of(input.concurrency, P.concurrency.properties, problem)
  local provider, caps = provider_and_caps(model, input.identity, problem)
  -- the result schema is checked now, not when the answer comes back
  if input.resultSchema ~= nil then
    local ok, errs = require("jsonschema").check_schema(input.resultSchema, "resultSchema")
    if not ok then
      for _, e in ipairs(errs) do problem("%s", e) end
    end
  end
  if #problems > 0 then return { ok = false, problems = problems } end
  -- knowledge and the starter's preferences, when the input names them: into
  -- the first message and task.md, each entry with its provenance
  local entries = mem.read(kinds, input.identity)
  local section = mem.section(entries)
  local read_ids
  if kinds.knowledge or kinds.preferences then
    read_ids = {}
    for i, e in ipairs(entries) do read_ids[i] = e.id end
  end

  local skill_list = {}
  for i, s in ipairs(selected) do skill_list[i] = { name = s.name, dir = s.dir } end
  local defs = M.with_mcp(tools.definitions(effective), effective, mcp_defs)
  if delegation then
    local d = require "tools.delegate"
    defs[#defs + 1] = { name = d.name, description = delegation.workspace == "parent" and d.description ..
      " " .. d.parent_view or d.description, parameters = d.parameters }
    -- what a sub-session's input is made from (kept with the prepared
    -- session: a continued run has only part of its input)
    delegation.from = { context_files = ctx.files, skills = input.skills or {}, model = model,
      modelOptions = input.modelOptions, mcpServers = input.mcpServers, compaction = input.compaction,
      approvalTimeoutSeconds = input.approvalTimeoutSeconds, limits = limits }
  end
  return {
    ok = true, session_id = args.session_id, system = system_prompt(selected, views_parent(input)),
    task = task_text(input, ctx, files) .. (section ~= "" and "\n" .. section or ""),
    simple = memory,
    first_message = { role = "user", content = input.objective .. "\n\nThe full task is in /workspace/task.md." ..
      (section ~= "" and "\n\n" .. section or "") },
    -- what it read (the workflow's memory.read event): nil when it named neither kind
    memory_read = read_ids and { kinds = input.memory.read, entries = read_ids, count = #read_ids,
      identity = input.identity } or nil,
    files = files, skills = skill_list, limits = limits, model = model,
    permissions = { tools = effective, networkAllowlist = perms.networkAllowlist or PP.networkAllowlist.default,
      writablePaths = writable, requiresApproval = perms.requiresApproval or PP.requiresApproval.default },
    tool_definitions = defs, delegation = delegation,
    exclusive_tools = M.exclusive_tools(tools, effective),
    mcp = mcp,
    memory_file = input.memoryFile, result_schema = input.resultSchema,
    approval_timeout = input.approvalTimeoutSeconds or P.approvalTimeoutSeconds.default,
    chat = input.waitForMessages == true and { idle = input.idleTimeoutSeconds or P.idleTimeoutSeconds.default } or nil,
    provider = provider, caps = caps, concurrency = concurrency, compaction = compaction,
  }
end

-- The allowed tools whose calls run one at a time ({name = true}): those
-- that run a process in the sandbox.
function M.exclusive_tools(tools, effective)
  local all, out = tools.load_all(), {}
  for _, name in ipairs(effective) do
    if all[name] and all[name].execs then out[name] = true end
  end
  return out
end

-- MCP servers (input.mcpServers): each lists its tools now, on the trusted
-- side; they join the allowlist as mcp__SERVER__TOOL with their schemas. A
-- server that cannot be started, cannot list, or lists a tool the engine
-- refuses (name, schema) is a problem naming it. Returns the definitions and
-- {servers = {name = config}, tools = {full name = {server, tool,
-- parameters}}}: what a call needs, recorded with the prepared session (names
-- of credentials only, never their values).
function M.mcp_prepare(spec, requested, problem)
  local mcp = require "mcp"
  local servers, problems = mcp.check_servers(spec)
  for _, p in ipairs(problems) do problem("%s", p) end
  if #problems > 0 then return nil end
  local names = {}
  for n in pairs(servers) do names[#names + 1] = n end
  table.sort(names)
  if #names > mcp.MAX_SERVERS then
    problem("mcpServers names %d servers; at most %d", #names, mcp.MAX_SERVERS)
    return nil
  end
  -- prepare has 60 s in all: the servers share a budget of 40 for listing
  local budget_end = os.time() + mcp.LIST_BUDGET
  local defs, by_name = {}, {}
  for _, server in ipairs(names) do
    local cfg = servers[server]
    local left = budget_end - os.time()
    local ok, listed = false, { message = string.format("not listed: the %d s for listing MCP servers ran out",
      mcp.LIST_BUDGET) }
    if left >= 1 then ok, listed = pcall(mcp.list_tools, server, cfg, left) end
    if not ok then
      local msg = type(listed) == "table" and tostring(listed.message) or tostring(listed)
      problem("MCP server %s cannot list its tools: %s", server,
        require("tools.common").sanitize(msg, mcp.secrets(cfg)))
    else
      local wanted
      if cfg.tools then
        wanted = {}
        for _, t in ipairs(cfg.tools) do wanted[tostring(t)] = false end
      end
      for _, t in ipairs(listed) do
        local name = type(t) == "table" and t.name
        if not wanted or wanted[name] ~= nil then
          if wanted then wanted[name] = true end
          local def, why = mcp.check_tool(server, t)
          if not def then problem("MCP server %s: %s", server, why)
          elseif by_name[def.name] then problem("MCP server %s: two tools are named %s", server, def.name)
          else
            by_name[def.name] = { server = server, tool = def.tool, parameters = def.parameters,
              checked = def.checked or nil }
            defs[#defs + 1] = { name = def.name, description = def.description, parameters = def.parameters }
          end
        end
      end
      for t, found in pairs(wanted or {}) do
        if not found then problem("MCP server %s lists no tool '%s' (mcpServers.%s.tools)", server, t, server) end
      end
    end
  end
  for _, name in ipairs(requested) do
    if type(name) == "string" and name:match("^mcp__") and not by_name[name] then
      problem("unknown tool '%s' (no MCP server lists it)", name)
    end
  end
  return defs, { servers = servers, tools = by_name }
end

-- The built-in definitions, then the MCP ones; their names join the allowlist.
function M.with_mcp(defs, effective, mcp_defs)
  for _, d in ipairs(mcp_defs or {}) do
    if not require("util").contains(effective, d.name) then effective[#effective + 1] = d.name end
    defs[#defs + 1] = d
  end
  return defs
end

-- One MCP tool call: the arguments checked against the tool's schema, the
-- call made on the trusted side, the result sanitised (control characters,
-- anything shaped like a secret, and the literal values of the credentials
-- this server was given). Failures are results: {ok=false, content=}.
local function mcp_tool(args)
  local m, name = args.mcp, args.tool
  local allow = args.permissions and args.permissions.tools or {}
  local function fail(type_, msg, secrets)
    msg = require("tools.common").sanitize(require("mcp").utf8_clean(msg), secrets)
    return { ok = false, content = type_ .. ": " .. msg, error = { type = type_, message = msg:sub(1, 4096) } }
  end
  if not require("util").contains(allow, name) then
    return fail("NotAllowed", "the tool '" .. tostring(name) .. "' is not allowed in this session")
  end
  local a = args.args
  if type(a) == "string" then
    local ok, d = pcall(json.decode, a == "" and "{}" or a)
    if not ok then return fail("InvalidArguments", name .. ": the arguments are not valid JSON") end
    a = d
  end
  if a == nil then a = {} end
  if m.checked then
    local okv, errs = require("jsonschema").validate(m.parameters, a, "args")
    if not okv then return fail("InvalidArguments", name .. ": " .. table.concat(errs, "; ")) end
  elseif type(a) ~= "table" or (next(a) ~= nil and a[1] ~= nil) then
    return fail("InvalidArguments", name .. ": the arguments must be a JSON object")
  end
  local mcp = require "mcp"
  local config = m.config
  -- the server's credentials go only with a grant of this server's (docs/grants.md)
  if not require("grants").may_use(nil, args.grant, m.server) then
    config = {}
    for k, v in pairs(m.config or {}) do config[k] = v end
    config.env_from_credentials, config.headers_from_credentials = nil, nil
  end
  m = { server = m.server, tool = m.tool, parameters = m.parameters, checked = m.checked, config = config }
  local secrets = mcp.secrets(m.config)
  local ok, r = pcall(mcp.call_tool, m.server, m.config, m.tool, a)
  if not ok then
    local e = type(r) == "table" and r or { type = "McpError", message = tostring(r) }
    return fail(tostring(e.type or "McpError"), tostring(e.message), secrets)
  end
  local text = require("tools.common").sanitize(r.text, secrets)
  if r.is_error then return { ok = false, content = "tool error: " .. text, error = { type = "ToolError",
    message = text:sub(1, 4096) } } end
  return { ok = true, content = text }
end

-- Runs one tool call (validated against its schema first) on the trusted side
-- or in the sandbox. Tool failures come back as results, not errors.
function M.tool(args)
  local tools = require "tools"
  local genai = activity.traced() and require "otel_genai" -- its span in a trace: execute_tool NAME
  if genai then activity.span(genai.tool(args.tool, args.tool_call_id, args.mcp)) end
  local ctx = { sandbox = args.sandbox, permissions = args.permissions or {}, limits = args.limits or {},
    session_id = args.session_id, grant = args.grant, grants = args.grants, memory = args.memory, config = { reviews_dir = os.getenv("ENGINE_REVIEWS_DIR") or
      ((require("sandbox").workspace_root():match("^(.*)/[^/]+/?$") or ".") .. "/reviews"),
      publish_url = os.getenv("ENGINE_PUBLISH_URL") } }
  -- the sandbox may be out of reach: the session was taken over by a worker on
  -- another host, or its container went with a restart of this one. The
  -- workflow provisions it again and calls the tool once more (agent_session.lua).
  local def = not args.mcp and args.sandbox and tools.load_all()[args.tool]
  -- a fork's copy of its source's sandbox handle: lost to it (the workflow
  -- provisions one of its own and calls the tool again)
  local foreign = not args.mcp and args.sandbox and require("sandbox").foreign(args.sandbox, args.session_id)
  if foreign then
    if genai then activity.span({ error = { type = "SandboxLost", message = foreign } }) end
    return { ok = false, sandbox_lost = foreign, content = "SandboxLost: " .. foreign, tool = args.tool,
      tool_call_id = args.tool_call_id }
  end
  if def and def.side == "sandbox" then
    -- a Docker engine that cannot be asked: the tool says so itself, below
    local okr, here, why = pcall(require("sandbox").reachable, args.sandbox)
    if okr and not here then
      if genai then activity.span({ error = { type = "SandboxLost", message = tostring(why) } }) end
      return { ok = false, sandbox_lost = why, content = "SandboxLost: " .. why, tool = args.tool,
        tool_call_id = args.tool_call_id }
    end
  end
  local r = args.mcp and mcp_tool(args) or tools.run(args.tool, ctx, args.args or {})
  if genai and type(r.error) == "table" then -- a failed call is a result, and an error in the span
    activity.span({ error = { type = tostring(r.error.type or "ToolError"), message = tostring(r.error.message or "") } })
  end
  local content = r.content or (r.error and ("error: " .. tostring(r.error.message or r.error.type)) or "")
  if #content > 20000 then content = content:sub(1, 20000) .. "\n[truncated]" end
  -- An earlier attempt of this call was cut short (the engine died, or it
  -- timed out) and the sandbox kept what it did: without this note the model
  -- reads "already exists" as its own mistake.
  local attempt = activity.info().attempt
  if attempt > 1 then content = M.retry_note(attempt) .. "\n" .. content end
  if args.note then content = args.note .. "\n" .. content end -- the workflow's (a sandbox provisioned again)
  -- a full workspace ends the session with limit.exceeded (diskMb), like the other limits
  local disk_full = (type(r.data) == "table" and r.data.disk_full) or (type(r.error) == "table" and r.error.type == "DiskFull")
  return { ok = r.ok ~= false and r.error == nil, content = content, error = r.error, tool = args.tool,
    tool_call_id = args.tool_call_id, disk_full = disk_full or nil,
    -- propose_memory's entry as recorded: the workflow's memory.stored event
    memory = args.tool == "propose_memory" and type(r.data) == "table" and r.data.memory_entry or nil,
    attempt = attempt > 1 and attempt or nil, retried_after_interruption = attempt > 1 or nil }
end

-- The first line of a tool result that ran again after an interrupted attempt.
function M.retry_note(attempt)
  return string.format("[note: this tool call ran again (attempt %d) after an earlier attempt was interrupted; "
    .. "the workspace may already hold that attempt's effects]", attempt)
end

-- Reloads the policy set in force (lua/policy.lua keeps it) from args.dir.
function M.policy_reload(args)
  return require("policy").reload(args.dir or M.policies_dir())
end

-- The policy decision for a tool call, with the policy set's hash (recorded in
-- the history, so a replay after an edit gives the same answer).
function M.decide(args)
  local policy = require "policy"
  -- a fork's own policy set (engine fork --policies), read for each decision; else the set in force
  local current, err
  if type(args.policies) == "string" then current, err = policy.load_dir(args.policies)
  else current, err = policy.in_force(M.policies_dir()) end
  if not current then
    return { decision = "deny", reason = "no valid policy set: " .. tostring(err), hash = "none" }
  end
  -- a memory proposal that could never be stored is refused before anyone is asked
  if args.tool == "propose_memory" then
    local problem = require("memory").check_proposal(args.args, args.identity)
    if problem then return { decision = "deny", reason = problem, hash = current.hash } end
  end
  -- what the tool is (sandbox or trusted side, publishes, writes) comes from its
  -- definition, never from the model
  -- a session with grants (docs/grants.md): the grant the call needs, which
  -- the policies see (req.grants, req.grant_needed) and the workflow checks
  local need, no_need
  if args.grants ~= nil then need, no_need = require("tools").grant_need(args.tool, args.args, args.mcp_tool) end
  local req = require("tools").policy_request(args.tool, args.args, { permissions = args.permissions,
    session_id = args.session_id, identity = args.identity, approval = args.approval, grants = args.grants,
    need = need or nil })
  local d = policy.decide(current, req)
  d.votes = nil -- the decision and its reason are what the history needs
  if need then d.need = need end
  if need == false then d.need_problem = no_need end
  return d
end

-- `engine policy check`: loads a policy set as decisions would.
function M.policy_check(args)
  local policy = require "policy"
  local dir = args.dir or M.policies_dir()
  local set, err = policy.load_dir(dir)
  if not set then return { ok = false, dir = dir, error = tostring(err) } end
  local files = {}
  for i, f in ipairs(set.files or {}) do files[i] = type(f) == "table" and (f.name or f.file) or f end
  return { ok = true, dir = dir, hash = set.hash, files = files }
end

-- persistArtifacts: collects output/ (sandbox.collect: its caps and the
-- reasons an entry is skipped) and stores each file byte-exact by content hash
-- (ENGINE_ARTIFACTS, default beside the workspaces), one file at a time.
-- Contents never enter the history, only their metadata. Returns {saved =
-- {{path, sha256, size, stored}}, skipped = {{path, reason, ...}}}. A run
-- that started before collection moved here passes {files = sandbox.collect's
-- list} and gets the saved list back, as it did then.
function M.persist(args)
  local artifacts = require "artifacts"
  local root = artifacts.root()
  local saved = {}
  local function store(f)
    local entry = artifacts.store(root, f.path, f.content)
    entry.truncated = f.truncated or nil
    saved[#saved + 1] = entry
    activity.heartbeat()
  end
  if args.files then
    -- never an empty artifact for a file that could not be read
    for _, f in ipairs(args.files) do
      if type(f.content) == "string" and not f.reason then store(f) end
    end
    return saved
  end
  local skipped = {}
  -- a sandbox out of reach (on another host, or gone) has nothing to collect: said, not guessed;
  -- nor has one of another session (a fork that made none of its own: its source's)
  local foreign = require("sandbox").foreign(args.sandbox, activity.info().workflow_id)
  if foreign then return { saved = saved, skipped = { { path = "output/", reason = "sandbox_lost", detail = foreign } } } end
  local here, why = require("sandbox").reachable(args.sandbox)
  if not here then return { saved = saved, skipped = { { path = "output/", reason = "sandbox_lost", detail = why } } } end
  for _, e in ipairs(require("sandbox").collect(args.sandbox, args.max_bytes, { on_file = store })) do
    if e.reason then skipped[#skipped + 1] = e end
  end
  return { saved = saved, skipped = skipped }
end

-- Appends an approved memory update to the memory file, with its provenance.
-- Activities run at least once (a crash after the write runs it again), so the
-- entry carries the attempt's idempotency key and is written only if no entry
-- with that key is in the file yet.
function M.apply_memory(args)
  local key = activity.info().idempotency_key
  local marker = " key " .. key .. " -->"
  local f = io.open(args.memory_file, "r")
  local text = f and f:read("a") or ""
  if f then f:close() end
  if text:find(marker, 1, true) then return { applied = true } end
  f = io.open(args.memory_file, "a")
  if not f then raise("MemoryError", "cannot open the memory file " .. tostring(args.memory_file)) end
  f:write(string.format("\n- %s <!-- session %s, approved by %s,%s\n", tostring(args.update):gsub("\n", " "),
    tostring(args.session_id), tostring(args.approver), marker))
  f:close()
  return { applied = true }
end

-- The transcript the next model turn would see, rebuilt from this run's
-- history up to this step (lua/transcript.lua).
local function transcript_so_far()
  return require("transcript").from_history(activity.history(1, activity.info().seq - 1))
end

-- Context compaction (lua/compaction.lua): the older turns of the transcript
-- summarised by one call of the session's model, the most recent keep_turns
-- turns kept verbatim (a tool call never apart from its results). Returns
-- the transcript from here on (lua/transcript.lua reads it from this
-- result) and its numbers, or {skipped = true} when there is nothing to fold.
function M.compact(args)
  local compaction = require "compaction"
  local system, tools, messages, previous = transcript_so_far()
  local ct = args.context_tokens
  local first = #messages > 0 and compaction.split(messages, args.keep_turns or compaction.KEEP_TURNS,
    ct and ct * 4 * compaction.KEEP_SHARE or nil)
  if not first then return { skipped = true, reason = "nothing to fold" } end
  local task = previous and previous.task or messages[1].content
  local folded = {}
  for i = 2, first - 1 do folded[#folded + 1] = messages[i] end
  local prompt = compaction.render(task, previous and previous.summary, folded,
    ct and math.floor(ct * 4 * 0.6) or compaction.FOLD_BYTES)
  local opts = {}
  for k, v in pairs(args.options or {}) do opts[k] = v end
  opts.on_delta = function() activity.heartbeat() end
  local runners = require "runners"
  local turn = runners.turn(args.model or {}, { system = compaction.SUMMARISER,
    messages = { { role = "user", content = prompt } } }, opts)
  local usage = turn.usage or {}
  activity.usage(turn.provider or "openai", tonumber(usage.input_tokens) or 0, tonumber(usage.output_tokens) or 0)
  local summary = tostring(turn.text or "")
  if not summary:match("%S") then raise("InvalidResponse", "the model's summary for the compaction is empty") end
  local out = { { role = "user", content = tostring(task) .. "\n\n" .. compaction.SUMMARY_HEADER .. summary } }
  for i = first, #messages do out[#out + 1] = messages[i] end
  local turns_folded = 0
  for _, m in ipairs(folded) do
    if m.role == "assistant" then turns_folded = turns_folded + 1 end
  end
  local bytes_after = compaction.transcript_bytes(system, tools, out)
  return { messages = out, task = task, summary = summary, turns_folded = turns_folded,
    messages_folded = #folded, messages_kept = #messages - first + 1, bytes_after = bytes_after,
    tokens_after = compaction.tokens_of(bytes_after), tokens_before = args.tokens_before,
    usage = { input_tokens = usage.input_tokens, output_tokens = usage.output_tokens } }
end

-- The transcript so far, for the next run of a session that continues as
-- new (lua/compaction.lua): recorded there as its "transcript" checkpoint.
function M.transcript(_)
  local system, tools, messages, compacted = transcript_so_far()
  return { system = system, tools = tools or {}, messages = messages, compacted = compacted }
end

function M.validate_result(args)
  if not args.schema then return { ok = true } end
  local ok, errs = require("jsonschema").validate(args.schema, args.result)
  return { ok = ok == true, errors = errs }
end

return M
