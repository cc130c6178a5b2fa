-- Policies: policies/*.lua decide each tool request: allow, deny, or require
-- a human's approval, with a reason. Deny beats approval beats allow.
--
--   local policy = require "policy"
--   local set, err = policy.load_dir("policies")   -- nil, "policies/10-x.lua:3: ..." on a broken file
--   local d = policy.decide(set, req)
--   -- d = {decision = "allow"|"deny"|"approve", reason=, policy=, file=, hash=, votes={...}}
--   local ok, report = policy.check_dir("policies")
--
-- A policy file returns either a function(req) -> decision, reason, or a
-- table {name = "...", decide = function(req) -> decision, reason}. decision
-- is "allow", "deny", "approve" or nil (no opinion); reason is a string.
-- req = {tool, args, side, publishes, writes, permissions = {tools,
-- networkAllowlist, writablePaths, requiresApproval}, session_id, identity,
-- approval, mcp, grants (the session's, a list or "*"; nil in a session from
-- before grants), grant_needed (the grant this call needs, docs/grants.md)};
-- each policy gets its own copy.
--
-- Files run in a sandboxed environment with only pairs, ipairs, type,
-- tostring, tonumber, string (no dump), table, math (no random), next,
-- select, error, pcall, assert and policylib: no io, os, require, load or
-- debug, and a budget of instructions per call.
--
-- policylib is the policies' own read-only standard library (lua/policy_lib/,
-- loaded here with the real require), so a policy file reads as policy and
-- the parsers it relies on live in one tested place:
--   policylib.shell     split(line), commands(line), words(line): shell word splitting
--   policylib.commands  analyze(line, {cwd=, writable={roots}, test_runners=}) -> nil or the
--                       reason the line is not proven read-only or confined; READ_ONLY (the
--                       audited program table: name -> "any" | "checked"); exported_ok(name),
--                       shell_var_ok(name)
--   policylib.paths     normalize(p), resolve(p, cwd), under(p, root), confined(p, roots, cwd)
--   policylib.hosts     parse_url(url), normalize(host), match(host, pattern, port),
--                       allowed(host, list, port)
--   policylib.options   parse(words, spec): a command's options the way getopt_long reads them
-- Every table in it is a proxy: assigning to it raises an error and nothing a
-- policy does changes what the next policy sees (pairs works on it, next does not).
--
-- A file that fails to load is an error naming the file and line (and the whole set is refused); a policy that
-- raises, runs out of budget or returns anything else denies (fails closed)
-- naming the file and the error. When no policy decides, the request is
-- allowed only if req.tool is in req.permissions.tools.
--
-- set.hash is FNV-1a 64 (hex) over the sorted (filename, content) pairs of the
-- policy files and of policylib's own sources ("policy_lib/shell.lua", ...): it
-- is recorded with every decision, so a replay after an edit of either can
-- tell which set decided (and returns the recorded decision, not a new one).
local M = {}

local RANK = { allow = 1, approve = 2, deny = 3 }
local BUDGET = 5000000 -- VM instructions per file load and per decide call
local MAX_FILE = 1024 * 1024

local dbg = debug -- captured here: the policies' environment has no debug

-- ---------------------------------------------------------------- hash --

local FNV_OFFSET = 0xcbf29ce484222325
local FNV_PRIME = 0x100000001b3

local function fnv_feed(h, s)
  for i = 1, #s do
    h = (h ~ s:byte(i)) * FNV_PRIME
  end
  return h
end

function M.fnv1a64(s)
  return string.format("%016x", fnv_feed(FNV_OFFSET, s))
end

-- Hash of a list of {name=, content=} (sorted by name here). Each entry feeds
-- name, NUL, the content's length, NUL, the content: no two different sets
-- feed the same bytes.
function M.hash_sources(sources)
  local sorted = {}
  for i, s in ipairs(sources) do sorted[i] = s end
  table.sort(sorted, function(a, b) return a.name < b.name end)
  local h = FNV_OFFSET
  for _, s in ipairs(sorted) do
    h = fnv_feed(h, s.name .. "\0" .. #s.content .. "\0")
    h = fnv_feed(h, s.content)
  end
  return string.format("%016x", h)
end

-- ------------------------------------------------------------- sandbox --

local BUDGET_EXCEEDED = setmetatable({}, { __tostring = function() return "instruction budget exceeded" end })

local function copy(t, skip)
  local out = {}
  for k, v in pairs(t) do
    if not (skip and skip[k]) then out[k] = v end
  end
  return out
end

local function safe_rep(s, n, sep)
  local total = #tostring(s) * (tonumber(n) or 0) + #(sep and tostring(sep) or "") * math.max(0, (tonumber(n) or 0) - 1)
  if total > 16 * 1024 * 1024 then error("string.rep: result too large", 2) end
  return string.rep(s, n, sep)
end

-- The string functions a policy reaches, by name or as methods: no dump, rep
-- capped. Never handed out itself (each environment gets a copy), so no
-- policy can change what another sees.
local SANDBOX_STRING = copy(string, { dump = true })
SANDBOX_STRING.rep = safe_rep

-- Policies share the activity VM's lua_State, and with it the one metatable
-- of every string, whose __index is the real string table: ("x"):rep(1e9)
-- and ("").dump would get around the environment. While a policy runs, that
-- __index is SANDBOX_STRING, and it is put back however the run ends. This is
-- sound because a policy runs to completion inside one call (it cannot yield
-- to the loop), so no other code of this lua_State runs meanwhile, except
-- finalizers, which then find string methods without dump and with rep
-- capped. (A lua_State of their own would need a C binding per call; a hook
-- on string.rep would cover rep but not dump.)
local string_meta = getmetatable("")

local function with_sandbox_strings(f, ...)
  local saved = string_meta.__index
  string_meta.__index = SANDBOX_STRING
  local r = table.pack(pcall(f, ...))
  string_meta.__index = saved
  if not r[1] then error(r[2], 0) end
  return table.unpack(r, 2, r.n)
end

-- pcall inside a policy cannot swallow the budget error.
local function policy_pcall(f, ...)
  local r = table.pack(pcall(f, ...))
  if not r[1] and r[2] == BUDGET_EXCEEDED then error(BUDGET_EXCEEDED, 0) end
  return table.unpack(r, 1, r.n)
end

-- ------------------------------------------------------------ policylib --

-- every module of the library, each program family of programs too (the set
-- hash names the code that is loaded)
local LIB_MODULES = { "paths", "hosts", "options", "shell", "programs.lib", "programs.readers", "programs.builtins",
  "programs.git", "programs.writers", "programs.wrappers", "programs.shells", "programs.test_runners", "programs",
  "commands" }
local EXPOSED = { "paths", "hosts", "options", "shell", "commands" }

-- A read-only view of t: reads go through, writes raise, and every table
-- reachable from it is a view too (the tables behind them never reach a policy).
local function freeze(t, seen)
  if type(t) ~= "table" then return t end
  seen = seen or {}
  if seen[t] then return seen[t] end
  local view, inner = {}, {}
  seen[t] = view
  for k, v in pairs(t) do inner[k] = freeze(v, seen) end
  return setmetatable(view, {
    __index = inner,
    __newindex = function(_, k) error("policylib is read-only (cannot set '" .. tostring(k) .. "')", 2) end,
    __len = function() return #inner end,
    __pairs = function()
      local k
      return function()
        local v
        k, v = next(inner, k)
        return k, v
      end
    end,
    __metatable = "policylib is read-only",
  })
end

-- The library and its sources (for the set hash), read once: the hash names
-- the code that is loaded.
local lib_sources, policylib = {}, {}
do
  local modules = {}
  for _, m in ipairs(LIB_MODULES) do
    local modname = "policy_lib." .. m
    local path = package.searchpath(modname, package.path)
    if not path then error("policy: the policy library module " .. modname .. " is not on package.path", 0) end
    local f = assert(io.open(path, "rb"))
    local content = f:read("a")
    f:close()
    lib_sources[#lib_sources + 1] = { name = "policy_lib/" .. m:gsub("%.", "/") .. ".lua", content = content }
    modules[m] = require(modname)
  end
  local exposed = {}
  for _, m in ipairs(EXPOSED) do exposed[m] = modules[m] end
  policylib = freeze(exposed)
end

-- The library's sources, {{name = "policy_lib/shell.lua", content = ...}, ...}.
function M.library_sources()
  local out = {}
  for i, s in ipairs(lib_sources) do out[i] = { name = s.name, content = s.content } end
  return out
end

local function make_env()
  local s = copy(SANDBOX_STRING)
  return {
    pairs = pairs, ipairs = ipairs, type = type, tostring = tostring, tonumber = tonumber,
    next = next, select = select, error = error, pcall = policy_pcall, assert = assert,
    string = s, table = copy(table), math = copy(math, { random = true, randomseed = true }),
    policylib = policylib,
  }
end

-- Runs f(...) under the instruction budget, in a coroutine of its own: hooks
-- are per coroutine, so the caller's hook (the activity VM's deadline hook,
-- a C hook Lua could not restore) is never touched. Returns pcall-style results.
local function run_limited(f, ...)
  local co = coroutine.create(f)
  local spent = false
  if dbg and dbg.sethook then
    local function hook()
      if not spent then
        spent = true
        -- from now on at every instruction, so even a pcall loop cannot hold on to it
        dbg.sethook(co, hook, "", 1)
      end
      error(BUDGET_EXCEEDED, 0)
    end
    dbg.sethook(co, hook, "", BUDGET)
  end
  local r = table.pack(with_sandbox_strings(coroutine.resume, co, ...))
  if not r[1] then
    if r[2] == BUDGET_EXCEEDED or spent then
      return false, "instruction budget exceeded (" .. BUDGET .. " instructions)"
    end
    return false, r[2]
  end
  if coroutine.status(co) ~= "dead" then return false, "the policy yielded" end
  return table.unpack(r, 1, r.n)
end

local function errstr(e)
  if type(e) == "table" and e.message then return tostring(e.message) end
  return tostring(e)
end

-- ------------------------------------------------------------- loading --

local fs = require "fs"

-- The policy file names in dir, sorted (hidden files and non-.lua skipped).
function M.list_dir(dir)
  local entries = type(dir) == "string" and fs.list(dir)
  if not entries then return nil, tostring(dir) .. ": not a readable directory" end
  local names = {}
  for _, e in ipairs(entries) do
    if e.name:match("%.lua$") and e.name:sub(1, 1) ~= "." then names[#names + 1] = e.name end
  end
  table.sort(names)
  return names
end

-- Runs one file {name=, content=} of a directory labelled label in a fresh
-- sandbox: true, what it returned and its path, or false and the error naming the path.
local function load_one(src, label)
  local where = label and (label:gsub("/+$", "") .. "/" .. src.name) or src.name
  local chunk, err = load(src.content, "@" .. where, "t", make_env())
  if not chunk then return false, err end
  local ok, res = run_limited(chunk)
  if not ok then
    local msg = errstr(res)
    if not msg:find(where, 1, true) then msg = where .. ": " .. msg end
    return false, msg
  end
  return true, res, where
end

-- Builds a set from sources {{name = "10-shell.lua", content = "..."}};
-- label is the directory used in chunk names ("policies").
function M.load_sources(sources, label)
  local sorted = {}
  for i, s in ipairs(sources) do sorted[i] = s end
  table.sort(sorted, function(a, b) return a.name < b.name end)
  local hashed = {}
  for i, src in ipairs(sorted) do hashed[i] = src end
  for _, src in ipairs(lib_sources) do hashed[#hashed + 1] = src end
  local set = { hash = M.hash_sources(hashed), files = {}, policies = {}, dir = label }
  for _, src in ipairs(sorted) do
    local ok, res, where = load_one(src, label)
    if not ok then return nil, res end
    local p
    if type(res) == "function" then
      p = { name = src.name:gsub("%.lua$", ""), decide = res }
    elseif type(res) == "table" and type(res.decide) == "function" then
      p = { name = type(res.name) == "string" and res.name or src.name:gsub("%.lua$", ""), decide = res.decide }
    else
      return nil, where .. ": must return a function(req) or {name=, decide=function(req)}, got " .. type(res)
    end
    p.file = src.name
    set.files[#set.files + 1] = src.name
    set.policies[#set.policies + 1] = p
  end
  return set
end

-- The sources of every dir/*.lua, sorted by file name: {{name=, content=}}, or nil, err.
function M.read_dir(dir)
  local names, err = M.list_dir(dir)
  if not names then return nil, err end
  local sources = {}
  for _, name in ipairs(names) do
    local path = dir:gsub("/+$", "") .. "/" .. name
    local f, ferr = io.open(path, "rb")
    if not f then return nil, path .. ": " .. tostring(ferr) end
    local content = f:read(MAX_FILE + 1)
    f:close()
    content = content or ""
    if #content > MAX_FILE then return nil, path .. ": larger than " .. MAX_FILE .. " bytes" end
    sources[#sources + 1] = { name = name, content = content }
  end
  return sources
end

-- Loads every dir/*.lua, sorted by file name. nil, err on the first broken file.
function M.load_dir(dir)
  local sources, err = M.read_dir(dir)
  if not sources then return nil, err end
  return M.load_sources(sources, dir)
end

-- ------------------------------------------------------------ deciding --

local function deep_copy(v, depth)
  if type(v) ~= "table" then return v end
  if (depth or 0) > 30 then return nil end
  local out = {}
  for k, x in pairs(v) do out[k] = deep_copy(x, (depth or 0) + 1) end
  return out
end

local in_list = require("util").contains

-- Asks every policy; the strongest decision wins (the first policy, in file
-- order, among equals). set may be nil (no policies).
function M.decide(set, req)
  req = req or {}
  local hash = set and set.hash or M.hash_sources({})
  local votes = {}
  local best
  for _, p in ipairs(set and set.policies or {}) do
    local ok, decision, reason = run_limited(p.decide, deep_copy(req))
    local vote
    if not ok then
      vote = { policy = p.name, file = p.file, decision = "deny", error = true,
        reason = "policy " .. p.file .. " failed: " .. errstr(decision) }
    elseif decision == nil then
      vote = nil
    elseif not RANK[decision] or (reason ~= nil and type(reason) ~= "string") then
      vote = { policy = p.name, file = p.file, decision = "deny", error = true,
        reason = "policy " .. p.file .. " returned an invalid decision (" .. tostring(decision) .. ", " ..
          tostring(reason) .. "); expected \"allow\", \"deny\", \"approve\" or nil, and a string reason" }
    else
      vote = { policy = p.name, file = p.file, decision = decision,
        reason = reason or (p.name .. " decided " .. decision) }
    end
    if vote then
      votes[#votes + 1] = vote
      if not best or RANK[vote.decision] > RANK[best.decision] then best = vote end
    end
  end
  if not best then
    local tools = type(req.permissions) == "table" and req.permissions.tools or nil
    if in_list(tools, req.tool) then
      best = { decision = "allow", policy = "default", reason = "no policy objected; the tool is in permissions.tools" }
    else
      best = { decision = "deny", policy = "default",
        reason = "no policy allowed it and the tool '" .. tostring(req.tool) .. "' is not in permissions.tools" }
    end
  end
  return { decision = best.decision, reason = best.reason, policy = best.policy, file = best.file, hash = hash,
    votes = votes }
end

-- ------------------------------------------------------------ checking --

local PROBES = {
  { tool = "read_file", args = { path = "/workspace/input/a.txt" }, side = "sandbox" },
  { tool = "list_files", args = {}, side = "sandbox" },
  { tool = "search", args = { pattern = "TODO" }, side = "sandbox" },
  { tool = "shell", args = { command = "ls -la" }, side = "sandbox", writes = true },
  { tool = "shell", args = { command = "echo hi > /workspace/output/a.txt" }, side = "sandbox", writes = true },
  { tool = "write_file", args = { path = "/workspace/output/a.txt", content = "x" }, side = "sandbox", writes = true },
  { tool = "run_tests", args = {}, side = "sandbox", writes = true },
  { tool = "http_fetch", args = { url = "https://example.com/" }, side = "trusted" },
  { tool = "publish_review", args = { summary = "s", findings = {}, verdict = "comment" }, side = "trusted",
    publishes = true, writes = true },
  { tool = "no_such_tool", args = {}, side = "sandbox" },
}

-- Validates a policy directory: every file loads, and every policy answers a
-- set of sample requests without an error. Returns ok, report (text), set.
function M.check_dir(dir)
  local set, err = M.load_dir(dir)
  if not set then return false, "policy set rejected: " .. err end
  local lines = { string.format("%d policy file(s) in %s, hash %s", #set.files, dir, set.hash) }
  for _, p in ipairs(set.policies) do lines[#lines + 1] = "  " .. p.file .. (p.name ~= p.file:gsub("%.lua$", "") and (" (" .. p.name .. ")") or "") end
  local ok = true
  local permissions = { tools = { "read_file", "list_files", "search", "shell", "write_file", "run_tests", "http_fetch",
    "publish_review" }, networkAllowlist = { "example.com" }, writablePaths = { "/workspace/working", "/workspace/output" },
    requiresApproval = {} }
  for _, probe in ipairs(PROBES) do
    local req = deep_copy(probe)
    req.publishes = req.publishes or false
    req.writes = req.writes or false
    req.permissions = deep_copy(permissions)
    req.session_id = "policy-check"
    local d = M.decide(set, req)
    for _, v in ipairs(d.votes) do
      if v.error then
        ok = false
        lines[#lines + 1] = "error: " .. v.reason
      end
    end
  end
  lines[#lines + 1] = ok and "ok" or "policy set has errors (they would deny every request they touch)"
  return ok, table.concat(lines, "\n"), set
end


-- The set in force in this process. A worker reloads it when the policies
-- directory changes (lua/activities/worker.lua): a set that loads replaces
-- it; a broken one is refused with its error and the previous set stays in
-- force. Kept here, in the one instance require() gives, so every activity
-- module that asks sees the same set.
local in_force

function M.reload(dir)
  local set, err = M.load_dir(dir)
  if not set then
    return { ok = false, dir = dir, error = tostring(err), kept = in_force and in_force.hash or nil }
  end
  local replaced = in_force ~= nil and in_force.hash ~= set.hash
  in_force = set
  return { ok = true, dir = dir, hash = set.hash, replaced = replaced }
end

-- The set in force, loaded from dir at first use; nil, err when none loads.
function M.in_force(dir)
  if not in_force then
    local r = M.reload(dir)
    if not r.ok then return nil, r.error end
  end
  return in_force
end

-- The sandbox policies run in, for the other user scripts of its kind
-- (trigger scripts, lua/triggers.lua): a fresh environment, a budgeted call
-- (pcall-style results) and the text of an error.
M.sandbox = {
  env = function() return make_env() end,
  run = function(f, ...) return run_limited(f, ...) end,
  load = load_one,
  errstr = errstr,
  copy = function(v) return deep_copy(v) end,
}

return M
