-- The worker's hooks: what an engine worker does besides running workflows.
-- The engine calls these by name in the activity VM (engine/worker/hooks.c has the
-- contract); each returns a table whose `log` lines the engine prints.
--   watches()        at start-up: the directories whose changes matter
--   start{live=, sandboxes=}  at start-up, after recovery: load the policy
--                    set and the triggers; the worker is ready once it returns
--   sweep{live=, sandboxes=}  right after start (sandboxes orphaned by a
--                    crash), then now and then (ENGINE_SWEEP_INTERVAL_MS):
--                    another host may have taken sessions over
--   changed{dir=}    a watched directory changed (debounced)
--   reload{}         SIGHUP to `engine serve`: the policy set and the triggers
--                    again, one log line each
--   gc{live=}        `engine gc`
--   policy_check{dir=}  `engine policy check`
--   quota_list{counters=}  `engine quota list`: the quota counters with their limits
--   trigger{dir=, name=, headers=, body=, now=}  a webhook delivery (lua/triggers.lua)
--   trigger_check{dir=}  `engine trigger check`; trigger_test{...} `engine trigger test`
--   doctor{checks=}  `engine doctor`: the checks lua/doctor.lua makes
--   eval_check{dir=, live=, baseline=}  `engine eval`: the suite checked before
--                    anything starts, and the eval workflow's script
--   eval_table{result=}  `engine eval` on a terminal: the result's lines
--   eval_variants_check{file=}  `engine eval --fork`: the variants file checked
-- live lists the workflows that have not finished: their sandboxes stay,
-- unless sandboxes (id -> its latest sandbox event) says it is on another host now.
-- ENGINE_NO_POLICY_WATCH=1 and ENGINE_NO_SWEEP=1 turn the start-up work off.
local json = require "json"
local session = require "activities.session"

local M = {}

local function off(name) local v = os.getenv(name); return v ~= nil and v ~= "" and v ~= "0" end

local function set_of(list)
  local s = {}
  for _, id in ipairs(list or {}) do s[id] = true end
  return s
end

-- A log line the engine prints at a level (engine/worker/hooks.c).
local function warning(msg) return { level = "warning", msg = msg } end

local function policy_line(r)
  if not r.ok then return warning("policies rejected, the previous set stays in force: " .. json.encode(r)) end
  if r.replaced then return "policies reloaded: " .. json.encode(r) end
end

-- The triggers directory a server with --listen answers for (engine/server/api.c
-- sets ENGINE_TRIGGERS_DIR to its workflows directory's triggers/ when unset).
local function triggers_dir() return os.getenv("ENGINE_TRIGGERS_DIR") end

local function trigger_line(r)
  if not r.ok then return warning("triggers rejected, the previous set stays in force: " .. json.encode(r)) end
  if r.replaced then return "triggers reloaded: " .. json.encode(r) end
end

local function is_dir(dir)
  local fs = require "fs"
  local real = dir and fs.realpath(dir) -- the directory may be reached through a symlink
  local st = real and fs.lstat(real)
  return st and st.type == "dir"
end

-- Removes what belongs to no live session; quiet when there is no Docker
-- engine to ask (only workspaces are swept then).
local function sweep(args)
  local ok, removed = pcall(require("sandbox").sweep, set_of(args.live), args.sandboxes)
  if not ok then return nil, removed end
  return removed
end

-- The engine's limits file, as sessions will read it (lua/caps.lua):
-- config, path, or nil, path, error.
local function limits_in_force()
  local limits = require "caps"
  local path = limits.path(require("activity").worker().db_dir)
  if not path then return nil end
  local cfg, err = limits.load(path)
  return cfg, path, err
end

function M.watches()
  local dirs = {}
  if not off("ENGINE_NO_POLICY_WATCH") and is_dir(session.policies_dir()) then dirs[#dirs + 1] = session.policies_dir() end
  if is_dir(triggers_dir()) then dirs[#dirs + 1] = triggers_dir() end
  return { dirs = dirs }
end

function M.start(args)
  local log = {}
  if not off("ENGINE_NO_POLICY_WATCH") then
    log[#log + 1] = policy_line(session.policy_reload({}))
  end
  -- the limits file is read by each session as it starts; a broken one is
  -- said here too, so it is seen before a session is refused for it
  if is_dir(triggers_dir()) then
    local r = require("triggers").reload(triggers_dir())
    log[#log + 1] = r.ok and ("triggers: " .. #r.files .. " file(s) in " .. r.dir) or trigger_line(r)
  end
  local _, _, lerr = limits_in_force()
  if lerr then log[#log + 1] = warning(lerr .. " (sessions are refused until it is fixed)") end
  return { log = log }
end

-- SIGHUP: a line for each set, said even when nothing changed (the
-- operator asked; "replaced" tells), the policy set even with the watch off;
-- a set that does not load leaves the one in force.
function M.reload()
  local function line(what, r, ok_text)
    if not r.ok then return warning(what .. " rejected on SIGHUP, the previous set stays in force: " .. json.encode(r)) end
    return what .. " reloaded on SIGHUP: " .. ok_text
  end
  local log = {}
  local p = session.policy_reload({})
  log[#log + 1] = line("policies", p, json.encode(p))
  if is_dir(triggers_dir()) then
    local t = require("triggers").reload(triggers_dir())
    log[#log + 1] = line("triggers", t, t.ok and json.encode({ dir = t.dir, files = #t.files, hash = t.hash,
      replaced = t.replaced }))
  end
  return { log = log }
end

function M.sweep(args)
  if off("ENGINE_NO_SWEEP") then return { log = {} } end
  local removed, err = sweep(args)
  if not removed then
    return { log = { "sandbox sweep failed: " .. (type(err) == "table" and json.encode(err) or tostring(err)) } }
  end
  return { log = { #removed > 0 and "removed orphaned sandboxes: " .. json.encode(removed) or nil } }
end

function M.changed(args)
  if args.dir == triggers_dir() then return { log = { trigger_line(require("triggers").reload(args.dir)) } } end
  if args.dir ~= session.policies_dir() then return { log = {} } end
  return { log = { policy_line(session.policy_reload({ dir = args.dir })) } }
end

function M.trigger(args) return require("triggers").deliver(args) end
function M.trigger_check(args) return require("triggers").check(args.dir) end
function M.trigger_test(args) return require("triggers").deliver(args) end

function M.gc(args)
  local removed, err = sweep(args)
  if not removed then error(err, 0) end
  return removed
end

function M.policy_check(args) return session.policy_check(args) end
function M.doctor(args) return require("doctor").run(args) end

-- `engine eval SUITE`: the suite as the eval workflow will load it (every
-- problem named, by file and field) and the baseline's shape, before
-- anything is written.
function M.eval_check(args)
  local repo = (require("activity").worker().lua_dir:gsub("/lua/?$", ""))
  local suite, problems = require("eval.suite").load(args.dir, { live = args.live, repo = repo })
  problems = problems or {}
  local b = args.baseline
  if b == json.null then b = nil end
  if b ~= nil and (type(b) ~= "table" or type(b.result) ~= "table" or type(b.result.cases) ~= "table"
      or type(b.result.suite) ~= "string") then
    problems[#problems + 1] = "--baseline: " .. tostring(type(b) == "table" and b.run or b) ..
      " is not an eval run's result (suite_result.json)"
  end
  if #problems > 0 then return { ok = false, problems = problems } end
  return { ok = true, suite = suite.name, dir = suite.dir, cases = #suite.cases, scorers = #suite.scorers,
    script = repo .. "/workflows/eval_suite.lua" }
end

-- `engine eval --fork ID --variants FILE`: the variants, checked, and the
-- eval workflow's script.
function M.eval_variants_check(args)
  local repo = (require("activity").worker().lua_dir:gsub("/lua/?$", ""))
  local v, problems = require("eval.variants").load(args.file, { repo = repo })
  if not v then return { ok = false, problems = problems } end
  v.ok, v.script = true, repo .. "/workflows/eval_suite.lua"
  return v
end

function M.eval_table(args) return { lines = require("eval.table").render(args.result or {}) } end

local function fmt_amount(quota, v)
  if v == nil then return "-" end
  if quota:match("^cost") then return string.format("%.4f", v) end
  return string.format("%.0f", v)
end

-- `engine quota list`: args.counters = {{name = "total:quota:...", value =}}
-- (the store's quota counters). Returns {rows = {{identity, quota, period,
-- used, limit}}, lines = the table for people, warning = a limits file that
-- cannot be read}. Every counter is a row (earlier days and months too); an
-- identity named in the limits file with nothing used this period is a row
-- with used 0. Limits come from the file in force now.
function M.quota_list(args)
  local limits = require "caps"
  local cfg, path, err = limits_in_force()
  local rows, seen = {}, {}
  for _, c in ipairs(args.counters or {}) do
    local name = (c.name or ""):gsub("^total:", "")
    local id, q, period = limits.parse_counter_name(name)
    if id then
      local own = cfg and limits.quota_for(cfg, id)
      rows[#rows + 1] = { identity = id, quota = q, period = period, used = c.value, limit = own and own[q] or nil }
      seen[id .. "\0" .. q .. "\0" .. period] = true
    end
  end
  local now = os.time()
  for id, own in pairs(cfg and cfg.quotas or {}) do
    if id ~= "default" then
      for _, q in ipairs(limits.QUOTAS) do
        local name = limits.counter_name(id, q, now)
        local _, _, period = limits.parse_counter_name(name)
        if own[q] and not seen[id .. "\0" .. q .. "\0" .. period] then
          rows[#rows + 1] = { identity = id, quota = q, period = period, used = 0, limit = own[q] }
        end
      end
    end
  end
  table.sort(rows, function(a, b)
    if a.identity ~= b.identity then return a.identity < b.identity end
    if a.quota ~= b.quota then return a.quota < b.quota end
    return a.period > b.period -- the newest first
  end)
  local lines = { string.format("%-28s %-20s %-10s %14s %14s", "IDENTITY", "QUOTA", "PERIOD", "USED", "LIMIT") }
  for _, r in ipairs(rows) do
    lines[#lines + 1] = string.format("%-28s %-20s %-10s %14s %14s", r.identity, r.quota, r.period,
      fmt_amount(r.quota, r.used), fmt_amount(r.quota, r.limit))
  end
  local warning
  if err then warning = err .. " (limits not shown)"
  elseif not path then warning = "no limits file (ENGINE_LIMITS, or limits.lua beside the database): no quotas apply" end
  return { rows = rows, lines = lines, warning = warning, limits_file = path }
end

return M
