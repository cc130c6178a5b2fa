-- The Docker sandbox driver (lua/sandbox.lua is the interface): one
-- long-lived, hardened container per session over its workspace, spoken to
-- through the Docker engine's socket (lua/docker.lua). Commands run in it
-- with docker exec as the sandbox's user.
local common = require "sandbox.common"
local docker = require "docker"

local D = {}

-- The container's name: the database's instance, then the sandbox's name.
local function container_name(session_id)
  return "engine-" .. common.safe_name(common.instance()):sub(1, 40) .. "-" .. common.sandbox_name(session_id)
end

-- The container create body for a session.
function D.container_spec(sb, opts)
  local limits = opts.limits or {}
  local binds = {
    sb.workspace .. "/input:/workspace/input:ro",
    sb.workspace .. "/working:/workspace/working:rw",
    sb.workspace .. "/output:/workspace/output:rw",
    sb.workspace .. "/task.md:/workspace/task.md:ro",
    sb.workspace .. "/simple.md:/workspace/simple.md:ro",
    sb.workspace .. "/skills:/workspace/skills:ro",
  }
  for _, s in ipairs(opts.skills or {}) do
    binds[#binds + 1] = s.dir .. ":/workspace/skills/" .. common.safe_name(s.name) .. ":ro"
  end
  if sb.parent_view then -- a sub-session's view of its parent's working/, read-only
    binds[#binds + 1] = sb.parent_view.workspace .. "/working:/workspace/parent:ro"
  end
  local memory = math.floor((limits.memoryMb or 512) * 1024 * 1024)
  return {
    Image = sb.image,
    Cmd = { "sleep", "infinity" },
    -- init and keep-alive run as another user than the commands (common.UID), so
    -- an exec's clean-up (kill -9 -1 as common.UID, lua/docker.lua) spares them
    User = "10002:10002",
    WorkingDir = "/workspace/working",
    Env = { "HOME=/tmp", "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8" },
    NetworkDisabled = true,
    Labels = { ["engine.managed"] = "true", ["engine.session"] = sb.session_id,
      ["engine.workspace"] = sb.workspace, ["engine.instance"] = common.instance(), ["engine.host"] = sb.host },
    HostConfig = {
      Binds = binds,
      NetworkMode = "none",
      ReadonlyRootfs = true,
      CapDrop = { "ALL" },
      SecurityOpt = { "no-new-privileges" },
      Tmpfs = { ["/tmp"] = "rw,nosuid,nodev,size=" .. common.TMP_BYTES },
      ShmSize = common.SHM_BYTES,
      Init = true,
      Memory = memory,
      MemorySwap = memory,
      NanoCpus = math.floor((limits.cpu or 1) * 1e9),
      PidsLimit = limits.pids or 256,
      AutoRemove = false,
    },
  }
end

-- The handle as provision made it needs nothing more before the workspace.
function D.new(_, _) end

-- An earlier attempt of the same provision (the name is this session's alone)
-- may have left its container.
function D.clear(session_id) pcall(docker.remove, container_name(session_id)) end

-- Who owns working/ and output/ on the host, and their mode: the sandbox's
-- user, 10001 (as root); without root nothing can be given away, and 10001
-- gets in only by mode 0777.
function D.owner(_)
  if common.is_root() then return common.UID, "0700" end
  return nil, "0777"
end

-- Starts the session's container over its workspace.
function D.start(sb, opts)
  sb.container_id = docker.create(D.container_spec(sb, opts), container_name(sb.session_id))
  docker.start(sb.container_id)
end

-- A provision that failed part-way: its container goes.
function D.abort(sb)
  if sb.container_id then pcall(docker.remove, sb.container_id) end
end

function D.exec(sb, argv, opts)
  return docker.exec(sb.container_id, argv, { user = common.UID, workdir = opts.workdir or "/workspace/working",
    timeout = opts.timeout or 60, max_output = opts.max_output or 256 * 1024 })
end

-- Copies files into the running container through the Docker archive API.
function D.copy_in(sb, dest, files)
  local tar = require "tar"
  -- owned by the sandbox's user, so the sandbox can work with what it was given
  docker.put_archive(sb.container_id, dest, tar.pack(files, { uid = 10001, gid = 10001 }))
  return { files = #files }
end

function D.copy_out(sb, path, max_bytes)
  local tar = require "tar"
  return tar.unpack(docker.get_archive(sb.container_id, path, max_bytes or 16 * 1024 * 1024), max_bytes)
end

-- Removes the container (by its id, and by its name in case another was made
-- under it). Returns whether the container was there.
function D.destroy(sb)
  local removed = false
  if sb.container_id then removed = docker.remove(sb.container_id) end
  pcall(docker.remove, container_name(sb.session_id))
  return removed
end

-- true, or false and why (its container is gone or stopped). A Docker engine
-- that cannot be asked is an error: the sandbox may be fine.
function D.reachable(sb)
  local ok, info = pcall(docker.inspect, sb.container_id)
  if not ok then
    if type(info) == "table" and info.type == "NoSuchContainer" then return false, "its container is gone" end
    error(info, 0)
  end
  if not (info.State and info.State.Running) then return false, "its container is not running" end
  return true
end

-- The container a provision cut short may have left, found by its name. A
-- create Docker took before the cut may still be under way, so a miss is
-- looked at again a moment later (pause(seconds)). Returns whether one went.
function D.destroy_session(session_id, pause)
  for look = 1, 2 do
    local ok, gone = pcall(docker.remove, container_name(session_id))
    if ok and gone then return true end
    if look == 1 and pause then pause(0.5) end
  end
  return false
end

-- Removes every labelled container of this database (running or not) whose
-- session does not want it (unwanted(session, host) -> why, or nil), and its
-- workspace (remove_workspace); appends them to removed. Without a Docker
-- engine there is nothing to sweep.
function D.sweep(unwanted, remove_workspace, removed)
  local mine = { ["engine.managed"] = "true", ["engine.instance"] = common.instance() }
  local okl, list = pcall(docker.list, mine)
  if not okl then
    if type(list) == "table" and list.type == "DockerUnavailable" then return end
    error(list, 0)
  end
  for _, c in ipairs(list) do
    local labels = c.Labels or {}
    local session = labels["engine.session"]
    local why = unwanted(session, labels["engine.host"])
    if why then
      docker.remove(c.Id)
      remove_workspace(labels["engine.workspace"])
      removed[#removed + 1] = { id = c.Id, session = session, reason = why }
    end
  end
end

return D
