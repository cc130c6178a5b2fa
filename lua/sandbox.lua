-- Sandboxes: one ephemeral, hardened container per session, with its workspace
-- on the host as the trust boundary.
--
--   /workspace/input     ro   context files copied in
--   /workspace/working   rw
--   /workspace/output    rw   collected as artifacts
--   /workspace/task.md   ro   /workspace/simple.md ro   /workspace/skills/<name> ro
--
-- No network, all capabilities dropped, no-new-privileges, read-only root, a
-- non-root user, pids/cpu/memory limits, tmpfs /tmp, an init process, labels
-- for orphan clean-up, and no credentials: the container's environment is
-- built here from nothing. The untrusted model's commands run only there;
-- files are read and written by the trusted side through safefs (no "..", no
-- absolute paths, no symlinks, only under the writable paths).
local docker = require "docker"
local fs = require "fs"
local json = require "json"
local safefs = require "safefs"

local M = {}

M.UID = "10001:10001"
M.DEFAULT_IMAGE = os.getenv("ENGINE_SANDBOX_IMAGE") or "engine-sandbox:latest"
local WRITABLE = { "working", "output" }
local TOP = { input = true, working = true, output = true, ["task.md"] = true, ["simple.md"] = true, skills = true }

local util = require "util"
local raise = util.raise

local native = require "sandbox.native"
local is_root -- whether the engine runs as root (below, with the bubblewrap driver)

-- A host program on the loop (mkfs, mount): ok, its output on failure.
local function host(argv, timeout)
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
function M.workspace_root()
  local db_dir = worker().db_dir
  return os.getenv("ENGINE_WORKSPACES") or (db_dir and db_dir .. "/workspaces") or "/tmp/engine-workspaces"
end

local function safe_name(s) return (tostring(s):gsub("[^%w_.-]", "_")):sub(1, 100) end

-- Sandboxes are labelled with it: two databases on one Docker engine never
-- touch each other's.
local function instance() return worker().instance or "default" end

-- The host this worker runs on (ENGINE_HOST_ID, else its host name): a
-- sandbox belongs to the host that made it, and only there can it be reached
-- (several workers on several hosts share a PostgreSQL store).
function M.host() return worker().host or "localhost" end

-- One name per (database, host, workflow id): a readable prefix of the id for
-- people, then a hash of all three, so ids that read alike ("pr:1", "pr_1",
-- two long ids with one prefix) never share a container or a workspace, two
-- databases on one Docker engine never touch each other's sandboxes, and a
-- session provisioned again by another host never takes the first one's name.
function M.sandbox_name(session_id)
  local id = tostring(session_id)
  return safe_name(id):sub(1, 24) .. "-" .. native.sha256(instance() .. "\0" .. M.host() .. "\0" .. id):sub(1, 24)
end

-- A host uid for a bubblewrap session: 20000-59999, from its name's hash.
local function host_uid(name)
  return 20000 + tonumber(name:sub(-8), 16) % 40000
end

local function container_name(session_id)
  return "engine-" .. safe_name(instance()):sub(1, 40) .. "-" .. M.sandbox_name(session_id)
end

-- A path as errors quote it: bounded and safe to print (the sandbox made it).
local function q(path) return safefs.render(tostring(path)) end

-- A path the sandbox or the model named -> a path relative to the workspace.
-- Accepts "/workspace/x/y" or "x/y"; refuses anything outside the workspace.
function M.relative(path)
  if type(path) ~= "string" or path == "" then raise("InvalidPath", "a path is required") end
  local rel = path
  if rel:sub(1, 11) == "/workspace/" then rel = rel:sub(12)
  elseif rel == "/workspace" then raise("InvalidPath", "the path names the workspace itself")
  elseif rel:sub(1, 1) == "/" then raise("InvalidPath", "absolute path outside /workspace: " .. q(path)) end
  local norm, err = safefs.check(rel)
  if not norm then raise("InvalidPath", q(path) .. ": " .. err) end
  local top = norm:match("^[^/]+")
  if not TOP[top] then raise("InvalidPath", q(path) .. ": not in the workspace (input, working, output, ...)") end
  return norm
end

local function writable_roots(sb)
  local roots = {}
  for _, p in ipairs(sb.writable or WRITABLE) do
    local rel = M.relative(p:sub(1, 1) == "/" and p or ("/workspace/" .. p))
    roots[#roots + 1] = rel
  end
  return roots
end

-- The container create body for a session.
function M.container_spec(sb, opts)
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
    binds[#binds + 1] = s.dir .. ":/workspace/skills/" .. safe_name(s.name) .. ":ro"
  end
  local memory = math.floor((limits.memoryMb or 512) * 1024 * 1024)
  return {
    Image = sb.image,
    Cmd = { "sleep", "infinity" },
    -- init and keep-alive run as another user than the commands (M.UID), so
    -- an exec's clean-up (kill -9 -1 as M.UID, lua/docker.lua) spares them
    User = "10002:10002",
    WorkingDir = "/workspace/working",
    Env = { "HOME=/tmp", "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8" },
    NetworkDisabled = true,
    Labels = { ["engine.managed"] = "true", ["engine.session"] = sb.session_id,
      ["engine.workspace"] = sb.workspace, ["engine.instance"] = instance(), ["engine.host"] = sb.host },
    HostConfig = {
      Binds = binds,
      NetworkMode = "none",
      ReadonlyRootfs = true,
      CapDrop = { "ALL" },
      SecurityOpt = { "no-new-privileges" },
      Tmpfs = { ["/tmp"] = "rw,nosuid,nodev,size=" .. M.TMP_BYTES },
      ShmSize = M.SHM_BYTES,
      Init = true,
      Memory = memory,
      MemorySwap = memory,
      NanoCpus = math.floor((limits.cpu or 1) * 1e9),
      PidsLimit = limits.pids or 256,
      AutoRemove = false,
    },
  }
end

-- Scratch space inside the sandbox, both drivers: /tmp and /dev/shm are
-- tmpfs of these sizes (RAM; in Docker charged to the memory limit).
M.TMP_BYTES = 64 * 1024 * 1024
M.SHM_BYTES = 16 * 1024 * 1024
M.DEFAULT_DISK_MB = 1024

-- ---------------------------------------------------------- workspace --
-- Each workspace is a file system of its own, limits.diskMb in size, so a
-- sandbox that fills it gets "No space left on device" and never fills the
-- host's disk (where the database lives). As root: a sparse ext4 image
-- (<name>.img beside the directory) loop-mounted on the directory, or when no
-- loop device can be had, a tmpfs of that size. Without root there is no way
-- to mount one: the workspace is a plain directory and sb.disk says "none".

local function mounted(path)
  local f = io.open("/proc/self/mountinfo", "r")
  if not f then return false end
  for line in f:lines() do
    local mp = line:match("^%S+ %S+ %S+ %S+ (%S+)")
    if mp and mp:gsub("\\040", " ") == path then f:close() return true end
  end
  f:close()
  return false
end

local function sparse_file(path, bytes)
  local f, err = io.open(path, "wb")
  if not f then return nil, err end
  local ok = f:seek("set", bytes - 1) and f:write("\0")
  f:close()
  return ok
end

local function mount_workspace(ws, disk_mb)
  if not is_root() then return "none" end
  local img = ws .. ".img"
  local ok, why = sparse_file(img, disk_mb * 1024 * 1024)
  if ok then
    -- no journal and no reserved blocks: an ephemeral scratch file system
    ok, why = host({ "mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "nodiscard", img }, 120)
    if ok then ok, why = host({ "mount", "-o", "loop,nosuid,nodev", img, ws }) end
    if ok then
      os.remove(ws .. "/lost+found") -- not part of the workspace
      return "ext4-loop"
    end
  end
  os.remove(img)
  ok, why = host({ "mount", "-t", "tmpfs", "-o", "size=" .. disk_mb .. "m,nosuid,nodev,mode=0755", "tmpfs", ws })
  if ok then return "tmpfs" end
  raise("WorkspaceError", "cannot give the workspace a file system of " .. disk_mb .. " MB: " .. tostring(why))
end

local function remove_workspace(path)
  local root = M.workspace_root()
  if not (path and path:find(root, 1, true) == 1 and #path > #root + 1) then return end
  if mounted(path) and not host({ "umount", path }) then host({ "umount", "-l", path }) end
  host({ "rm", "-rf", "--", path })
  os.remove(path .. ".img")
  os.remove(path .. ".session")
end

-- Beside each workspace, <name>.session names its database, host and session
-- (one per line), so a sweep finds the workspaces of bubblewrap sessions too
-- (they have no container). The session id is last: it may hold newlines.
local function mark_owner(sb)
  local f = io.open(sb.workspace .. ".session", "w")
  if not f then raise("WorkspaceError", "cannot write " .. sb.workspace .. ".session") end
  f:write(instance(), "\n", "host=", sb.host, "\n", sb.session_id)
  f:close()
end

-- Who owns working/ and output/ on the host, and their mode: the sandbox's
-- user and no one else. In Docker that is 10001; under bubblewrap as root, the
-- session's own host uid (sandbox_user_prefix). Without root nothing can be
-- given away: bubblewrap then runs as the engine's user, who owns them
-- already, but Docker's 10001 gets in only by mode 0777.
local function workspace_owner(sb)
  if is_root() then return sb.driver == "bwrap" and (sb.host_uid .. ":" .. sb.host_uid) or M.UID, "0700" end
  return nil, sb.driver == "bwrap" and "0700" or "0777"
end

-- Builds the workspace on the host and starts the container. opts: {session_id,
-- image, limits={cpu, memoryMb, pids, diskMb}, writable={"working","output"},
-- task, simple, files={{src=host path, dest=relative path under input/}},
-- skills={{name=, dir=host path}}}. Returns the sandbox handle (a plain table,
-- stored in the workflow's history). Nothing is left behind on failure.
function M.provision(opts)
  if type(opts.session_id) ~= "string" or opts.session_id == "" then raise("InvalidInput", "session_id is required") end
  local limits = opts.limits or {}
  local driver = opts.driver or os.getenv("ENGINE_SANDBOX_DRIVER") or "docker"
  if driver ~= "docker" and driver ~= "bwrap" then
    raise("InvalidInput", "unknown sandbox driver '" .. tostring(driver) .. "' (docker, bwrap)", { non_retryable = true })
  end
  local sb = { session_id = opts.session_id, image = opts.image or M.DEFAULT_IMAGE, driver = driver, host = M.host(),
    workspace = M.workspace_root() .. "/" .. M.sandbox_name(opts.session_id), writable = opts.writable or WRITABLE,
    memory_mb = limits.memoryMb or 512, cpu = limits.cpu or 1, pids = limits.pids or 256,
    disk_mb = limits.diskMb or M.DEFAULT_DISK_MB }
  for k, v in pairs({ memoryMb = limits.memoryMb, cpu = limits.cpu, pids = limits.pids, diskMb = limits.diskMb }) do
    if type(v) ~= "number" or v <= 0 then
      raise("InvalidInput", "limits." .. k .. " must be a positive number", { non_retryable = true })
    end
  end
  sb.disk_mb = math.ceil(sb.disk_mb)
  for _, p in ipairs(writable_roots(sb)) do
    if not (p:match("^working") or p:match("^output")) then
      raise("InvalidInput", "writable paths must be under working/ or output/: " .. q(p), { non_retryable = true })
    end
  end
  local name = container_name(opts.session_id)
  -- an earlier attempt of this same step (the name is this session's alone) may have left its container
  if driver == "docker" then pcall(docker.remove, name) end
  remove_workspace(sb.workspace)
  if driver == "bwrap" then
    sb.image = nil
    sb.host_uid = host_uid(M.sandbox_name(opts.session_id))
    sb.rootfs = opts.rootfs or os.getenv("ENGINE_SANDBOX_ROOTFS") or "/var/cache/engine/sandbox-rootfs"
    sb.skills = {}
    for _, sk in ipairs(opts.skills or {}) do sb.skills[#sb.skills + 1] = { name = safe_name(sk.name), dir = sk.dir } end
  end
  local ok, err = pcall(function()
    if not host({ "mkdir", "-p", "-m", "0711", "--", sb.workspace }) then
      raise("WorkspaceError", "cannot create the workspace " .. sb.workspace)
    end
    mark_owner(sb)
    -- the image is sparse: refuse a size the host cannot hold now, rather than fail later
    local size, free = native.disk_usage(M.workspace_root())
    if size and is_root() and free < sb.disk_mb * 1024 * 1024 then
      raise("WorkspaceError", string.format("limits.diskMb is %d MB but the workspaces' file system (%s) has %d MB free",
        sb.disk_mb, M.workspace_root(), free // (1024 * 1024)))
    end
    sb.disk = mount_workspace(sb.workspace, sb.disk_mb)
    local owner, mode = workspace_owner(sb)
    local working, output = sb.workspace .. "/working", sb.workspace .. "/output"
    local dirs = { "mkdir", "-p", "--", sb.workspace .. "/input", sb.workspace .. "/skills" }
    for _, s in ipairs(opts.skills or {}) do dirs[#dirs + 1] = sb.workspace .. "/skills/" .. safe_name(s.name) end
    if not (host(dirs) and host({ "mkdir", "-p", "-m", mode, "--", working, output })) then
      raise("WorkspaceError", "cannot create the workspace " .. sb.workspace)
    end
    if owner then
      local okc, why = host({ "chown", "--", owner, working, output })
      if not okc then raise("WorkspaceError", "cannot give the workspace to the sandbox's user " .. owner .. ": " .. why) end
    end
    assert(safefs.write(sb.workspace, "task.md", opts.task or ""))
    assert(safefs.write(sb.workspace, "simple.md", opts.simple or ""))
    for _, f in ipairs(opts.files or {}) do
      local src = io.open(f.src, "rb")
      if not src then raise("InvalidInput", "context file not readable: " .. tostring(f.src), { non_retryable = true }) end
      local data = src:read("a")
      src:close()
      local rel = M.relative("/workspace/input/" .. (f.dest or f.src:match("[^/]+$")))
      local okw, werr = safefs.write(sb.workspace, rel, data)
      if not okw then raise("InvalidInput", "cannot place " .. f.src .. ": " .. werr, { non_retryable = true }) end
    end
    if driver == "docker" then
      sb.container_id = docker.create(M.container_spec(sb, opts), name)
      docker.start(sb.container_id)
    else
      local probe = M.exec(sb, { "true" }, { timeout = 30 })
      if probe.exit_code ~= 0 then
        raise("SandboxUnavailable", "bubblewrap cannot start a sandbox (rootfs " .. sb.rootfs .. "): " ..
          (probe.stderr ~= "" and probe.stderr or ("exit " .. tostring(probe.exit_code))), { non_retryable = true })
      end
    end
  end)
  if not ok then
    if sb.container_id then pcall(docker.remove, sb.container_id) end
    remove_workspace(sb.workspace)
    error(err, 0)
  end
  return sb
end

-- Whether the workspace's file system is full (or nearly: less than 1% or
-- 1 MB left), after a command said "No space left on device".
local function workspace_full(sb, r)
  local said = ((r.stderr or "") .. (r.stdout or "")):find("No space left on device", 1, true)
  if not said then return false end
  local size, free = native.disk_usage(sb.workspace)
  if not size then return false end
  return sb.disk ~= "none" and free <= math.max(1024 * 1024, size // 100)
end

-- Runs a command (argv list, or a string run by sh -c) in the sandbox as its
-- non-root user. opts: {timeout=, max_output=, workdir=}.
function M.exec(sb, cmd, opts)
  opts = opts or {}
  local argv = type(cmd) == "string" and { "sh", "-c", cmd } or cmd
  if type(argv) ~= "table" or #argv == 0 then raise("InvalidInput", "a command is required") end
  local r
  if sb.driver == "bwrap" then
    r = M.bwrap_exec(sb, argv, opts)
  else
    r = docker.exec(sb.container_id, argv, { user = M.UID, workdir = opts.workdir or "/workspace/working",
      timeout = opts.timeout or 60, max_output = opts.max_output or 256 * 1024 })
  end
  if r.oom_killed then
    r.error = "the command was killed: the sandbox ran out of memory (limit " .. tostring(sb.memory_mb or "?") .. " MB)"
  elseif r.timed_out then
    r.error = "the command was killed after " .. tostring(opts.timeout or 60) .. " s (time limit)"
  elseif workspace_full(sb, r) then
    r.disk_full = true
    r.error = "the workspace is full (limits.diskMb = " .. tostring(sb.disk_mb) .. " MB): No space left on device"
  end
  if r.truncated then
    r.stdout = r.stdout .. string.format("\n[output truncated: %d bytes in all, %d kept]", r.output_bytes,
      opts.max_output or 256 * 1024)
  end
  return r
end

-- The bubblewrap driver: each command runs in a fresh sandbox over the same
-- workspace (read-only rootfs and input, writable working/output, no network,
-- new pid/ipc/uts/user namespaces and no further user namespaces, a seccomp
-- filter, a new session, no capabilities, an empty environment), as an
-- unprivileged host user, under rlimits for address space (memory), processes
-- and CPU time. /tmp and /dev/shm are sized tmpfs; /dev and the /workspace
-- mount points are read-only. Nothing outlives a command.
local root_user
is_root = function()
  if root_user == nil then root_user = fs.getuid() == 0 end
  return root_user
end

-- As root, rlimits on processes would not bind: run as an unprivileged host
-- user of the session's own (sb.host_uid), so that the process limit counts
-- this sandbox's processes only, not every sandbox's (nor a Docker
-- container's, whose user 10001 is the host's 10001 too). Inside, it is 10001.
local function sandbox_user_prefix(sb)
  if not is_root() then return {} end
  local uid = tostring(sb.host_uid or 10001)
  return { "/usr/bin/setpriv", "--reuid", uid, "--regid", uid, "--clear-groups" }
end


function M.bwrap_exec(sb, argv, opts)
  local proc = require "proc"
  local ws = sb.workspace
  local mem = math.floor((sb.memory_mb or 512) * 1024 * 1024)
  local timeout = opts.timeout or 60
  local seccomp, serr = native.seccomp_program()
  if not seccomp then raise("SandboxUnavailable", "no seccomp filter for bubblewrap: " .. tostring(serr)) end
  local a = sandbox_user_prefix(sb)
  for _, x in ipairs({ "/usr/bin/prlimit", "--as=" .. mem, "--nproc=" .. (sb.pids or 256),
    "--cpu=" .. math.ceil(timeout + 1), "--fsize=" .. (1024 * 1024 * 1024), "--",
    "bwrap", "--ro-bind", sb.rootfs, "/", "--proc", "/proc", "--dev", "/dev",
    "--size", tostring(M.SHM_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
    "--size", tostring(M.TMP_BYTES), "--tmpfs", "/tmp",
    "--size", "65536", "--tmpfs", "/workspace", -- mount points for the binds below, over the read-only rootfs
    "--ro-bind", ws .. "/input", "/workspace/input", "--bind", ws .. "/working", "/workspace/working",
    "--bind", ws .. "/output", "/workspace/output", "--ro-bind", ws .. "/task.md", "/workspace/task.md",
    "--ro-bind", ws .. "/simple.md", "/workspace/simple.md", "--ro-bind", ws .. "/skills", "/workspace/skills" }) do
    a[#a + 1] = x
  end
  for _, sk in ipairs(sb.skills or {}) do
    for _, x in ipairs({ "--ro-bind", sk.dir, "/workspace/skills/" .. sk.name }) do a[#a + 1] = x end
  end
  for _, x in ipairs({ "--remount-ro", "/workspace", "--unshare-all", "--unshare-user", "--disable-userns", "--uid", "10001", "--gid", "10001",
    "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--seccomp", "3", "--clearenv",
    "--setenv", "HOME", "/tmp", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8",
    "--chdir", opts.workdir or "/workspace/working", "--" }) do a[#a + 1] = x end
  for _, x in ipairs(argv) do a[#a + 1] = tostring(x) end
  local r = proc.run({ argv = a, env = { "PATH=/usr/bin:/bin" }, timeout = timeout, fd3 = seccomp,
    max_output = opts.max_output or 256 * 1024 })
  -- prlimit's address-space cap shows as MemoryError / ENOMEM / SIGKILL by the kernel
  if (r.stderr or ""):find("MemoryError") or (r.stderr or ""):find("Cannot allocate memory") then
    r.oom_killed = true
  end
  -- the process rlimit shows as fork failing with EAGAIN
  local err = r.stderr or ""
  if r.exit_code ~= 0 and (err:find("Cannot fork", 1, true) or err:find("Resource temporarily unavailable", 1, true)) then
    r.pids_limit_hit, r.pids_limit = true, sb.pids or 256
    r.error = "a process could not be created: the sandbox's pids limit (" .. r.pids_limit .. ") was reached"
  end
  return r
end

-- Reads a workspace file on the trusted side (no symlinks followed).
function M.read_file(sb, path, max_bytes)
  local rel = M.relative(path)
  local data, err, truncated = safefs.read(sb.workspace, rel, max_bytes or 1024 * 1024)
  if not data then raise("FileError", q(path) .. ": " .. err) end
  return { content = data, truncated = truncated }
end

-- Writes a file, only under the sandbox's writable paths.
function M.write_file(sb, path, content)
  local rel = M.relative(path)
  local allowed = false
  for _, root in ipairs(writable_roots(sb)) do
    if rel == root or rel:sub(1, #root + 1) == root .. "/" then allowed = true end
  end
  if not allowed then raise("PermissionDenied", q(path) .. " is not under a writable path (" ..
    table.concat(sb.writable or WRITABLE, ", ") .. ")") end
  local ok, err = safefs.write(sb.workspace, rel, content or "")
  if not ok and tostring(err):find("No space left", 1, true) then
    raise("DiskFull", q(path) .. ": the workspace is full (limits.diskMb = " .. tostring(sb.disk_mb) .. " MB)")
  end
  if not ok then raise("FileError", q(path) .. ": " .. err) end
  return { bytes = ok }
end

-- Lists the files of a workspace directory.
function M.list_files(sb, path)
  local rel = path and path ~= "/workspace" and M.relative(path) or "."
  local entries, err = safefs.list(sb.workspace, rel)
  if not entries then raise("FileError", q(path) .. ": " .. err) end
  table.sort(entries, function(a, b) return a.path < b.path end)
  return entries
end

-- The files the session produced in output/, and every entry that was not
-- collected: {path, size, content} per file, {path, reason, ...} per skipped
-- entry, shallowest first and then by path (a flood in a subdirectory cannot
-- crowd out output/report.md). Reasons: too_deep (a directory at the depth
-- limit, its contents unread), path_too_long (4 KiB or more), symlink,
-- special_file (fifo, socket, device; with its type), too_large (over
-- max_bytes, 8 MiB, or over the total; a file is never collected cut short),
-- unreadable, too_many. Caps: opts.max_files (1000) files, opts.max_name_bytes
-- (256 KiB) of their paths, opts.max_total_bytes (256 MiB) of contents. At
-- most opts.max_skipped (100) skipped entries are named one by one; the rest,
-- and every too_many, are counted in one last entry {path = "output", reason =
-- "too_many", count = N, reasons = {reason = n}}. Skipped paths are rendered by
-- safefs.render (at most 200 bytes, control characters escaped). With
-- opts.on_file, each file goes to on_file(file) instead of the list, so
-- output/ is never held in memory at once.
function M.collect(sb, max_bytes, opts)
  opts = opts or {}
  max_bytes = max_bytes or 8 * 1024 * 1024
  local max_files, max_names = opts.max_files or 1000, opts.max_name_bytes or 256 * 1024
  local max_total, max_skipped = opts.max_total_bytes or 256 * 1024 * 1024, opts.max_skipped or 100
  local out, files, names, total = {}, 0, 0, 0
  local named, folded, reasons = 0, 0, {}
  local function skip(e, reason, extra)
    if reason ~= "too_many" and named < max_skipped then
      named = named + 1
      -- a path_too_long entry comes from safefs already rendered
      local s = { path = e.skipped == "path_too_long" and e.path or safefs.render(e.path), reason = reason }
      for k, v in pairs(extra or {}) do s[k] = v end
      out[#out + 1] = s
    else
      folded = folded + (e.count or 1)
      reasons[reason] = (reasons[reason] or 0) + (e.count or 1)
    end
  end
  -- the listing's own cap leaves room for the files, the named skips, the
  -- directories and what is past the caps (counted, not read)
  local entries, err = safefs.list(sb.workspace, "output", { max_entries = 10 * (max_files + max_skipped) })
  if not entries then return { { path = "output", reason = "unreadable", error = err } } end
  local depth = {}
  for _, e in ipairs(entries) do depth[e] = select(2, e.path:gsub("/", "")) end
  table.sort(entries, function(a, b)
    if depth[a] ~= depth[b] then return depth[a] < depth[b] end
    return a.path < b.path
  end)
  for _, e in ipairs(entries) do
    if e.skipped then
      skip(e, e.skipped, { path_bytes = e.path_bytes })
    elseif e.type == "symlink" then
      skip(e, "symlink")
    elseif e.type == "file" then
      if e.size > max_bytes or total + e.size > max_total then
        skip(e, "too_large", { size = e.size })
      elseif files >= max_files or names + #e.path > max_names then
        skip(e, "too_many")
      else
        local data, rerr, truncated = safefs.read(sb.workspace, e.path, max_bytes)
        if not data then
          skip(e, "unreadable", { error = rerr })
        elseif truncated or total + #data > max_total then -- it grew since it was listed
          skip(e, "too_large", { size = #data })
        else
          files, names, total = files + 1, names + #e.path, total + #data
          local f = { path = e.path, size = #data, content = data }
          if opts.on_file then opts.on_file(f) else out[#out + 1] = f end
        end
      end
    elseif e.type ~= "dir" then
      skip(e, "special_file", { type = e.type })
    end
  end
  if folded > 0 then out[#out + 1] = { path = "output", reason = "too_many", count = folded, reasons = reasons } end
  return out
end

-- Copies files into the running container through the Docker archive API
-- (for paths that are not part of the workspace, e.g. /tmp). files:
-- {{name = "rel/path", data = "...", mode = 420}}; dest: an absolute directory.
function M.copy_in(sb, dest, files)
  if sb.driver ~= "docker" then raise("Unsupported", "copy_in needs the docker driver (bwrap shares the workspace)") end
  local tar = require "tar"
  -- owned by the sandbox's user, so the sandbox can work with what it was given
  docker.put_archive(sb.container_id, dest, tar.pack(files, { uid = 10001, gid = 10001 }))
  return { files = #files }
end

-- Copies a path out of the running container: {{name=, data=, type=, size=}}.
function M.copy_out(sb, path, max_bytes)
  if sb.driver ~= "docker" then raise("Unsupported", "copy_out needs the docker driver (read the workspace instead)") end
  local tar = require "tar"
  return tar.unpack(docker.get_archive(sb.container_id, path, max_bytes or 16 * 1024 * 1024), max_bytes)
end

-- Removes the container and the workspace. Safe to call again.
function M.destroy(sb)
  -- another host's sandbox cannot be reached from here: its host's sweep
  -- removes it once the session has ended
  if not M.here(sb) then return { removed = false, elsewhere = sb.host } end
  local removed = false
  if sb.driver ~= "bwrap" then
    if sb.container_id then removed = docker.remove(sb.container_id) end
    pcall(docker.remove, container_name(sb.session_id))
  end
  remove_workspace(sb.workspace)
  return { removed = removed }
end

-- Whether sb was made on this host (a handle from before hosts were recorded was).
function M.here(sb) return sb.host == nil or sb.host == M.host() end

-- Whether sb can be used from here: true, or false and why (it belongs to
-- another host; its container or workspace is gone, or the container stopped,
-- as after the host restarted). A Docker engine that cannot be asked is an
-- error: the sandbox may be fine, and provisioning again would lose its work.
function M.reachable(sb)
  if not M.here(sb) then return false, "the sandbox is on host " .. tostring(sb.host) .. ", not on this one" end
  local st = sb.workspace and fs.lstat(sb.workspace)
  if not (st and st.type == "dir") then return false, "its workspace is gone" end
  if sb.driver == "bwrap" then return true end
  local ok, info = pcall(docker.inspect, sb.container_id)
  if not ok then
    if type(info) == "table" and info.type == "NoSuchContainer" then return false, "its container is gone" end
    error(info, 0)
  end
  if not (info.State and info.State.Running) then return false, "its container is not running" end
  return true
end

-- What a provision cut short (cancelled, or failed part-way) may have left:
-- the session's container and workspace, found by the names provision gives
-- them. A create Docker took before the cut may still be under way, so a miss
-- is looked at again a moment later. Returns {removed = bool}.
function M.destroy_session(session_id, pause)
  local removed = false
  for look = 1, 2 do
    local ok, gone = pcall(docker.remove, container_name(session_id))
    if ok and gone then removed = true break end
    if look == 1 and pause then pause(0.5) end
  end
  remove_workspace(M.workspace_root() .. "/" .. M.sandbox_name(session_id))
  return { removed = removed }
end

-- Removes what belongs to no live session here: every labelled container
-- (running or not) and every workspace of this database whose session is not
-- in live (a set of workflow ids), or whose session is live but has its
-- sandbox on another host now (sandboxes: session id -> the payload of its
-- latest sandbox.ready or sandbox.reprovisioned event, which names the
-- host). Another host's sandboxes of live sessions are left to that host.
-- Returns what it removed. Without a Docker engine only workspaces are swept.
function M.sweep(live, sandboxes)
  sandboxes = sandboxes or {}
  local me = M.host()
  -- why the sandbox of session on host is not wanted, or nil
  local function unwanted(session, host)
    if not session or not live[session] then return "done" end
    if host and host ~= me then return nil end -- another host's own, while its session is live
    local now = sandboxes[session] and sandboxes[session].host
    if now and now ~= me then return "moved to " .. now end
  end
  local removed = {}
  local root = M.workspace_root()
  for _, e in ipairs(fs.list(root) or {}) do -- no directory yet: nothing to sweep
    local name = e.name
    local ws = name:match("^(.+)%.session$")
    local f = ws and io.open(root .. "/" .. name, "r")
    if f then
      local inst, session = f:read("l"), f:read("a")
      f:close()
      local host = session and session:match("^host=([^\n]*)\n")
      if host then session = session:sub(#"host=" + #host + 2) end
      -- only this database's sandboxes: another engine's sessions are not ours to judge
      local why = inst == instance() and unwanted(session, host)
      if why then
        remove_workspace(root .. "/" .. ws)
        removed[#removed + 1] = { workspace = ws, session = session, reason = why }
      end
    end
  end
  local mine = { ["engine.managed"] = "true", ["engine.instance"] = instance() }
  local okl, list = pcall(docker.list, mine)
  if not okl then
    if type(list) == "table" and list.type == "DockerUnavailable" then return removed end
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
  return removed
end

return M
