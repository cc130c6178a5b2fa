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
local json = require "json"
local safefs = require "safefs"

local M = {}

M.UID = "10001:10001"
M.DEFAULT_IMAGE = os.getenv("ENGINE_SANDBOX_IMAGE") or "engine-sandbox:latest"
local WRITABLE = { "working", "output" }
local TOP = { input = true, working = true, output = true, ["task.md"] = true, ["simple.md"] = true, skills = true }

local util = require "util"
local raise, shell_quote = util.raise, util.shell_quote

local function run(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

function M.workspace_root()
  return os.getenv("ENGINE_WORKSPACES") or "/tmp/engine-workspaces"
end

local function safe_name(s) return (tostring(s):gsub("[^%w_.-]", "_")):sub(1, 100) end

-- Container names are per engine database (its instance id) and session, so
-- two databases on one Docker engine never touch each other's containers.
local function container_name(session_id)
  return "engine-" .. safe_name(os.getenv("ENGINE_INSTANCE") or "default") .. "-" .. safe_name(session_id)
end

-- A path the sandbox or the model named -> a path relative to the workspace.
-- Accepts "/workspace/x/y" or "x/y"; refuses anything outside the workspace.
function M.relative(path)
  if type(path) ~= "string" or path == "" then raise("InvalidPath", "a path is required") end
  local rel = path
  if rel:sub(1, 11) == "/workspace/" then rel = rel:sub(12)
  elseif rel == "/workspace" then raise("InvalidPath", "the path names the workspace itself")
  elseif rel:sub(1, 1) == "/" then raise("InvalidPath", "absolute path outside /workspace: " .. path) end
  local norm, err = safefs.check(rel)
  if not norm then raise("InvalidPath", path .. ": " .. err) end
  local top = norm:match("^[^/]+")
  if not TOP[top] then raise("InvalidPath", path .. ": not in the workspace (input, working, output, ...)") end
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
    User = M.UID,
    WorkingDir = "/workspace/working",
    Env = { "HOME=/tmp", "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8" },
    NetworkDisabled = true,
    Labels = { ["engine.managed"] = "true", ["engine.session"] = sb.session_id,
      ["engine.workspace"] = sb.workspace, ["engine.instance"] = os.getenv("ENGINE_INSTANCE") or "default" },
    HostConfig = {
      Binds = binds,
      NetworkMode = "none",
      ReadonlyRootfs = true,
      CapDrop = { "ALL" },
      SecurityOpt = { "no-new-privileges" },
      Tmpfs = { ["/tmp"] = "rw,nosuid,nodev,size=67108864" },
      Init = true,
      Memory = memory,
      MemorySwap = memory,
      NanoCpus = math.floor((limits.cpu or 1) * 1e9),
      PidsLimit = limits.pids or 256,
      AutoRemove = false,
    },
  }
end

local function remove_workspace(path)
  if path and path:find(M.workspace_root(), 1, true) == 1 and #path > #M.workspace_root() + 1 then
    run("rm -rf -- " .. shell_quote(path))
  end
end

-- Builds the workspace on the host and starts the container. opts: {session_id,
-- image, limits={cpu, memoryMb, pids}, writable={"working","output"}, task,
-- simple, files={{src=host path, dest=relative path under input/}},
-- skills={{name=, dir=host path}}}. Returns the sandbox handle (a plain table,
-- stored in the workflow's history). Nothing is left behind on failure.
function M.provision(opts)
  if type(opts.session_id) ~= "string" or opts.session_id == "" then raise("InvalidInput", "session_id is required") end
  local limits = opts.limits or {}
  local driver = opts.driver or os.getenv("ENGINE_SANDBOX_DRIVER") or "docker"
  if driver ~= "docker" and driver ~= "bwrap" then
    raise("InvalidInput", "unknown sandbox driver '" .. tostring(driver) .. "' (docker, bwrap)", { non_retryable = true })
  end
  local sb = { session_id = opts.session_id, image = opts.image or M.DEFAULT_IMAGE, driver = driver,
    workspace = M.workspace_root() .. "/" .. safe_name(opts.session_id), writable = opts.writable or WRITABLE,
    memory_mb = limits.memoryMb or 512, cpu = limits.cpu or 1, pids = limits.pids or 256 }
  for k, v in pairs({ memoryMb = limits.memoryMb, cpu = limits.cpu, pids = limits.pids }) do
    if type(v) ~= "number" or v <= 0 then
      raise("InvalidInput", "limits." .. k .. " must be a positive number", { non_retryable = true })
    end
  end
  for _, p in ipairs(writable_roots(sb)) do
    if not (p:match("^working") or p:match("^output")) then
      raise("InvalidInput", "writable paths must be under working/ or output/: " .. p, { non_retryable = true })
    end
  end
  local name = container_name(opts.session_id)
  -- an earlier attempt of this same step may have left its container: start clean
  if driver == "docker" then pcall(docker.remove, name) end
  remove_workspace(sb.workspace)
  if driver == "bwrap" then
    sb.image = nil
    sb.rootfs = opts.rootfs or os.getenv("ENGINE_SANDBOX_ROOTFS") or "/var/cache/engine/sandbox-rootfs"
    sb.skills = {}
    for _, sk in ipairs(opts.skills or {}) do sb.skills[#sb.skills + 1] = { name = safe_name(sk.name), dir = sk.dir } end
  end
  local ok, err = pcall(function()
    if not run("mkdir -p -- " .. shell_quote(sb.workspace .. "/input") .. " " .. shell_quote(sb.workspace .. "/skills")
        .. " && mkdir -p -m 0777 -- " .. shell_quote(sb.workspace .. "/working") .. " "
        .. shell_quote(sb.workspace .. "/output")
        .. " && chmod 0777 -- " .. shell_quote(sb.workspace .. "/working") .. " " .. shell_quote(sb.workspace .. "/output")) then
      raise("WorkspaceError", "cannot create the workspace " .. sb.workspace)
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
    for _, s in ipairs(opts.skills or {}) do
      run("mkdir -p -- " .. shell_quote(sb.workspace .. "/skills/" .. safe_name(s.name)))
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
  end
  if r.truncated then
    r.stdout = r.stdout .. string.format("\n[output truncated: %d bytes in all, %d kept]", r.output_bytes,
      opts.max_output or 256 * 1024)
  end
  return r
end

-- The bubblewrap driver: each command runs in a fresh sandbox over the same
-- workspace (read-only rootfs and input, writable working/output, no network,
-- new pid/ipc/uts/user namespaces, a new session, no capabilities, an empty
-- environment), as an unprivileged host user, under rlimits for address space
-- (memory), processes and CPU time. Nothing outlives a command.
local is_root
local function sandbox_user_prefix()
  if is_root == nil then
    local f = io.popen("id -u")
    is_root = f and f:read("l") == "0"
    if f then f:close() end
  end
  -- as root, rlimits on processes would not bind: run as an unprivileged user
  if is_root then return { "setpriv", "--reuid", "10001", "--regid", "10001", "--clear-groups" } end
  return {}
end

function M.bwrap_exec(sb, argv, opts)
  local proc = require "proc"
  local ws = sb.workspace
  local mem = math.floor((sb.memory_mb or 512) * 1024 * 1024)
  local timeout = opts.timeout or 60
  local a = sandbox_user_prefix()
  for _, x in ipairs({ "/usr/bin/prlimit", "--as=" .. mem, "--nproc=" .. (sb.pids or 256),
    "--cpu=" .. math.ceil(timeout + 1), "--fsize=" .. (1024 * 1024 * 1024), "--",
    "bwrap", "--ro-bind", sb.rootfs, "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
    "--tmpfs", "/workspace", -- mount points for the binds below, over the read-only rootfs
    "--ro-bind", ws .. "/input", "/workspace/input", "--bind", ws .. "/working", "/workspace/working",
    "--bind", ws .. "/output", "/workspace/output", "--ro-bind", ws .. "/task.md", "/workspace/task.md",
    "--ro-bind", ws .. "/simple.md", "/workspace/simple.md", "--ro-bind", ws .. "/skills", "/workspace/skills" }) do
    a[#a + 1] = x
  end
  for _, sk in ipairs(sb.skills or {}) do
    for _, x in ipairs({ "--ro-bind", sk.dir, "/workspace/skills/" .. sk.name }) do a[#a + 1] = x end
  end
  for _, x in ipairs({ "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv",
    "--setenv", "HOME", "/tmp", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8",
    "--chdir", opts.workdir or "/workspace/working", "--" }) do a[#a + 1] = x end
  for _, x in ipairs(argv) do a[#a + 1] = tostring(x) end
  if a[1] == "setpriv" then a[1] = "/usr/bin/setpriv" end
  local r = proc.run({ argv = a, env = { "PATH=/usr/bin:/bin" }, timeout = timeout,
    max_output = opts.max_output or 256 * 1024 })
  -- prlimit's address-space cap shows as MemoryError / ENOMEM / SIGKILL by the kernel
  if (r.stderr or ""):find("MemoryError") or (r.stderr or ""):find("Cannot allocate memory") then
    r.oom_killed = true
  end
  return r
end

-- Reads a workspace file on the trusted side (no symlinks followed).
function M.read_file(sb, path, max_bytes)
  local rel = M.relative(path)
  local data, err, truncated = safefs.read(sb.workspace, rel, max_bytes or 1024 * 1024)
  if not data then raise("FileError", path .. ": " .. err) end
  return { content = data, truncated = truncated }
end

-- Writes a file, only under the sandbox's writable paths.
function M.write_file(sb, path, content)
  local rel = M.relative(path)
  local allowed = false
  for _, root in ipairs(writable_roots(sb)) do
    if rel == root or rel:sub(1, #root + 1) == root .. "/" then allowed = true end
  end
  if not allowed then raise("PermissionDenied", path .. " is not under a writable path (" ..
    table.concat(sb.writable or WRITABLE, ", ") .. ")") end
  local ok, err = safefs.write(sb.workspace, rel, content or "")
  if not ok then raise("FileError", path .. ": " .. err) end
  return { bytes = ok }
end

-- Lists the files of a workspace directory.
function M.list_files(sb, path)
  local rel = path and path ~= "/workspace" and M.relative(path) or "."
  local entries, err = safefs.list(sb.workspace, rel)
  if not entries then raise("FileError", tostring(path) .. ": " .. err) end
  table.sort(entries, function(a, b) return a.path < b.path end)
  return entries
end

-- The files the session produced in output/ (contents up to max_bytes each).
function M.collect(sb, max_bytes)
  local out = {}
  for _, e in ipairs(safefs.list(sb.workspace, "output") or {}) do
    if e.type == "file" then
      local data, _, truncated = safefs.read(sb.workspace, e.path, max_bytes or 8 * 1024 * 1024)
      out[#out + 1] = { path = e.path, size = e.size, content = data, truncated = truncated }
    end
  end
  table.sort(out, function(a, b) return a.path < b.path end)
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
  local removed = false
  if sb.driver ~= "bwrap" then
    if sb.container_id then removed = docker.remove(sb.container_id) end
    pcall(docker.remove, container_name(sb.session_id))
  end
  remove_workspace(sb.workspace)
  return { removed = removed }
end

-- Removes every labelled container (running or not) whose session is not in
-- live (a set of workflow ids), with its workspace. Returns what it removed.
function M.sweep(live)
  local removed = {}
  -- only this database's sandboxes: another engine's sessions are not ours to judge
  local mine = { ["engine.managed"] = "true", ["engine.instance"] = os.getenv("ENGINE_INSTANCE") or "default" }
  for _, c in ipairs(docker.list(mine)) do
    local labels = c.Labels or {}
    local session = labels["engine.session"]
    if not session or not live[session] then
      docker.remove(c.Id)
      remove_workspace(labels["engine.workspace"])
      removed[#removed + 1] = { id = c.Id, session = session }
    end
  end
  return removed
end

return M
