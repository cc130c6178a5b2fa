-- The worker's hooks: what an engine worker does besides running workflows.
-- The engine calls these by name in the activity VM (engine/hooks.c has the
-- contract); each returns a table whose `log` lines the engine prints.
--   watches()        at start-up: the directories whose changes matter
--   start{live=}     at start-up, after recovery: load the policy set, then
--                    sweep sandboxes orphaned by a crash
--   changed{dir=}    a watched directory changed (debounced)
--   gc{live=}        `engine gc`
--   policy_check{dir=}  `engine policy check`
-- live lists the workflows that have not finished: their sandboxes stay.
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

local function policy_line(r)
  if not r.ok then return "policies rejected, the previous set stays in force: " .. json.encode(r) end
  if r.replaced then return "policies reloaded: " .. json.encode(r) end
end

-- Removes what belongs to no live session; quiet when there is no Docker
-- engine to ask (only workspaces are swept then).
local function sweep(live)
  local ok, removed = pcall(require("sandbox").sweep, set_of(live))
  if not ok then return nil, removed end
  return removed
end

function M.watches()
  if off("ENGINE_NO_POLICY_WATCH") then return { dirs = {} } end
  local dir = session.policies_dir()
  local fs = require "fs"
  local real = fs.realpath(dir) -- the directory may be reached through a symlink
  local st = real and fs.lstat(real)
  local isdir = st and st.type == "dir"
  return { dirs = isdir and { dir } or {} }
end

function M.start(args)
  local log = {}
  if not off("ENGINE_NO_POLICY_WATCH") then
    log[#log + 1] = policy_line(session.policy_reload({}))
  end
  if not off("ENGINE_NO_SWEEP") then
    local removed, err = sweep(args.live)
    if not removed then
      log[#log + 1] = "sandbox sweep failed: " .. (type(err) == "table" and json.encode(err) or tostring(err))
    elseif #removed > 0 then
      log[#log + 1] = "removed orphaned sandboxes: " .. json.encode(removed)
    end
  end
  return { log = log }
end

function M.changed(args)
  if args.dir ~= session.policies_dir() then return { log = {} } end
  return { log = { policy_line(session.policy_reload({ dir = args.dir })) } }
end

function M.gc(args)
  local removed, err = sweep(args.live)
  if not removed then error(err, 0) end
  return removed
end

function M.policy_check(args) return session.policy_check(args) end

return M
