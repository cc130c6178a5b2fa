-- What the sandbox interface (lua/sandbox.lua) and its drivers
-- (lua/sandbox/docker.lua, lua/sandbox/bwrap.lua) share: which worker and
-- host this is, the names a session's sandbox is known by, the sizes of its
-- scratch space, and host commands. Nothing here knows a driver.
local native = require "sandbox.native"

local C = {}

-- The sandbox's user inside, both drivers (uid:gid).
C.UID = "10001:10001"

-- Scratch space inside the sandbox, both drivers: /tmp and /dev/shm are
-- tmpfs of these sizes (RAM; in Docker charged to the memory limit).
C.TMP_BYTES = 64 * 1024 * 1024
C.SHM_BYTES = 16 * 1024 * 1024

-- A host program on the loop (mkfs, mount): ok, its output on failure.
function C.host_command(argv, timeout)
  local r = require("proc").run({ argv = argv, env = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C" },
    timeout = timeout or 60, max_output = 8192 })
  return r.exit_code == 0, (r.stderr ~= "" and r.stderr or r.stdout):gsub("%s+$", "")
end

-- Which worker this is (activity.worker()): its database's instance id and
-- directory; empty outside the engine.
local function worker()
  local ok, activity = pcall(require, "activity")
  return ok and activity.worker and activity.worker() or {}
end

-- Workspaces live beside the database unless ENGINE_WORKSPACES says otherwise.
function C.workspace_root()
  local db_dir = worker().db_dir
  return os.getenv("ENGINE_WORKSPACES") or (db_dir and db_dir .. "/workspaces") or "/tmp/engine-workspaces"
end

function C.safe_name(s) return (tostring(s):gsub("[^%w_.-]", "_")):sub(1, 100) end

-- Sandboxes are labelled with it: two databases on one Docker engine never
-- touch each other's.
function C.instance() return worker().instance or "default" end

-- The host this worker runs on (ENGINE_HOST_ID, else its host name): a
-- sandbox belongs to the host that made it, and only there can it be reached
-- (several workers on several hosts share a PostgreSQL store).
function C.host() return worker().host or "localhost" end

-- One name per (database, host, workflow id): a readable prefix of the id for
-- people, then a hash of all three, so ids that read alike ("pr:1", "pr_1",
-- two long ids with one prefix) never share a container or a workspace, two
-- databases on one Docker engine never touch each other's sandboxes, and a
-- session provisioned again by another host never takes the first one's name.
function C.sandbox_name(session_id)
  local id = tostring(session_id)
  return C.safe_name(id):sub(1, 24) .. "-" .. native.sha256(C.instance() .. "\0" .. C.host() .. "\0" .. id):sub(1, 24)
end

-- Whether the engine runs as root (asked once).
local root_user
function C.is_root()
  if root_user == nil then root_user = require("fs").getuid() == 0 end
  return root_user
end

return C
