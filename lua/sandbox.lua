-- Sandboxes: one ephemeral, hardened container per session, with its workspace
-- on the host as the trust boundary.
--
--   /workspace/input     ro   context files copied in
--   /workspace/working   rw
--   /workspace/output    rw   collected as artifacts
--   /workspace/task.md   ro   /workspace/simple.md ro   /workspace/skills/<name> ro
--   /workspace/parent    ro   a sub-session's view of its parent's working/
--                             (delegation.workspace "parent"; provision's opts.parent_view)
--
-- No network, all capabilities dropped, no-new-privileges, read-only root, a
-- non-root user, pids/cpu/memory limits, tmpfs /tmp, an init process, labels
-- for orphan clean-up, and no credentials: the container's environment is
-- built here from nothing. The untrusted model's commands run only there;
-- files are read and written by the trusted side through safefs (no "..", no
-- absolute paths, no symlinks, only under the writable paths).
--
-- This file is the interface and the workspace (on the host, the same for
-- every driver); what runs the commands is a driver, one file each, chosen
-- by name (provision's opts.driver, else ENGINE_SANDBOX_DRIVER, else docker)
-- and recorded in the handle (sb.driver):
--
--   lua/sandbox/docker.lua   a hardened container per session (Docker Engine)
--   lua/sandbox/bwrap.lua    bubblewrap, a fresh sandbox per command
--
-- A driver D provides:
--   D.new(sb, opts)          the handle's driver fields, before the workspace exists
--   D.clear(session_id)      removes what an earlier attempt of this provision left
--   D.owner(sb)              owner ("uid:gid" or nil) and mode of working/ and output/
--   D.start(sb, opts)        starts the sandbox over its workspace (raises on failure)
--   D.abort(sb)              undoes D.start after a failure part-way
--   D.exec(sb, argv, opts)   runs a command: {exit_code, stdout, stderr, timed_out,
--                            oom_killed, truncated, output_bytes, ...}
--   D.copy_in(sb, dest, files), D.copy_out(sb, path, max_bytes)
--   D.destroy(sb)            removes the sandbox (not the workspace): whether it was there
--   D.reachable(sb)          true, or false and why (the workspace is known to be there)
--   D.destroy_session(session_id, pause)  what a provision cut short left: whether any went
--   D.sweep(unwanted, remove_workspace, removed)  removes what no live session wants
local fs = require "fs"
local safefs = require "safefs"
local common = require "sandbox.common"

local M = {}

M.UID = common.UID
M.DEFAULT_IMAGE = os.getenv("ENGINE_SANDBOX_IMAGE") or "engine-sandbox:latest"
local WRITABLE = { "working", "output" }
local TOP = { input = true, working = true, output = true, ["task.md"] = true, ["simple.md"] = true, skills = true,
  parent = true }

local util = require "util"
local raise = util.raise

local native = require "sandbox.native"
local is_root = common.is_root -- whether the engine runs as root
local host = common.host_command
local safe_name = common.safe_name
local instance = common.instance

-- The drivers by name; the message lists them in this order.
local DRIVERS = { docker = "sandbox.docker", bwrap = "sandbox.bwrap" }
local DRIVER_NAMES = { "docker", "bwrap" }

local function driver(name)
  local mod = DRIVERS[name]
  if not mod then
    raise("InvalidInput", "unknown sandbox driver '" .. tostring(name) .. "' (" .. table.concat(DRIVER_NAMES, ", ") .. ")",
      { non_retryable = true })
  end
  return require(mod)
end

-- The driver names, and the one a provision without opts.driver uses.
M.DRIVER_NAMES = DRIVER_NAMES
function M.default_driver() return os.getenv("ENGINE_SANDBOX_DRIVER") or "docker" end

-- The driver of a handle (a handle from before drivers were named is Docker's).
local function driver_of(sb) return driver(sb.driver or "docker") end

M.workspace_root = common.workspace_root
M.host = common.host
M.sandbox_name = common.sandbox_name

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

-- Where a workspace path (M.relative's) is read from on the host: the
-- directory and the path under it. parent/... is the parent's working/ (a
-- sub-session's read-only view of it, sb.parent_view); the rest the sandbox's
-- own workspace. Reads only: nothing is ever written under parent/.
local function source(sb, rel, path)
  local top, rest = rel:match("^([^/]+)/?(.*)$")
  if top ~= "parent" then return sb.workspace, rel end
  if not sb.parent_view then
    raise("InvalidPath", q(path) .. ": not in the workspace (this session has no view of a parent's workspace)")
  end
  return sb.parent_view.workspace, rest == "" and "working" or ("working/" .. rest)
end

local function writable_roots(sb)
  local roots = {}
  for _, p in ipairs(sb.writable or WRITABLE) do
    local rel = M.relative(p:sub(1, 1) == "/" and p or ("/workspace/" .. p))
    roots[#roots + 1] = rel
  end
  return roots
end

-- The container create body for a session (the Docker driver's).
function M.container_spec(sb, opts) return driver("docker").container_spec(sb, opts) end

-- Scratch space inside the sandbox, both drivers: /tmp and /dev/shm are
-- tmpfs of these sizes (RAM; in Docker charged to the memory limit).
M.TMP_BYTES = common.TMP_BYTES
M.SHM_BYTES = common.SHM_BYTES
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

-- A sub-session's view of its parent's workspace: {session = the parent's
-- id, workspace = its workspace on this host}. The directory is never taken
-- from a caller: it is the one this host gives the parent's id
-- (M.sandbox_name), and its marker (mark_owner) must name this database, this
-- host and that session, with working/ a directory in it (not a symlink).
-- The parent's sandbox on another host (several workers) has no workspace
-- here: refused, naming it.
function M.parent_view(parent)
  if type(parent) ~= "string" or parent == "" then
    raise("InvalidInput", "parent_view must be the parent session's id", { non_retryable = true })
  end
  local ws = M.workspace_root() .. "/" .. M.sandbox_name(parent)
  local function missing(why)
    raise("ParentWorkspaceMissing", "the workspace of the parent session " .. q(parent) .. " is not on this host (" ..
      M.host() .. "): " .. why, { non_retryable = true })
  end
  local st = fs.lstat(ws)
  if not (st and st.type == "dir") then missing("no workspace") end
  local f = io.open(ws .. ".session", "r")
  local marker = f and f:read("a") or ""
  if f then f:close() end
  if marker ~= instance() .. "\n" .. "host=" .. M.host() .. "\n" .. parent then
    missing("its workspace's marker names another session, host or database")
  end
  local w = fs.lstat(ws .. "/working")
  if not (w and w.type == "dir") then missing("its working/ is not a directory") end
  return { session = parent, workspace = ws }
end

-- Builds the workspace on the host and starts the sandbox (its driver). opts: {session_id, driver,
-- image, limits={cpu, memoryMb, pids, diskMb}, writable={"working","output"},
-- task, simple, files={{src=host path, dest=relative path under input/}},
-- skills={{name=, dir=host path}}, parent_view=the parent session's id (a
-- sub-session that sees its parent's working/ read-only at /workspace/parent;
-- see M.parent_view)}. Returns the sandbox handle (a plain table,
-- stored in the workflow's history). Nothing is left behind on failure.
function M.provision(opts)
  if type(opts.session_id) ~= "string" or opts.session_id == "" then raise("InvalidInput", "session_id is required") end
  local limits = opts.limits or {}
  local name = opts.driver or M.default_driver()
  local d = driver(name)
  local sb = { session_id = opts.session_id, image = opts.image or M.DEFAULT_IMAGE, driver = name, host = M.host(),
    workspace = M.workspace_root() .. "/" .. M.sandbox_name(opts.session_id), writable = opts.writable or WRITABLE,
    memory_mb = limits.memoryMb or 512, cpu = limits.cpu or 1, pids = limits.pids or 256,
    disk_mb = limits.diskMb or M.DEFAULT_DISK_MB }
  for k, v in pairs({ memoryMb = limits.memoryMb, cpu = limits.cpu, pids = limits.pids, diskMb = limits.diskMb }) do
    if type(v) ~= "number" or v <= 0 then
      raise("InvalidInput", "limits." .. k .. " must be a positive number", { non_retryable = true })
    end
  end
  sb.disk_mb = math.ceil(sb.disk_mb)
  if opts.parent_view ~= nil then sb.parent_view = M.parent_view(opts.parent_view) end
  for _, p in ipairs(writable_roots(sb)) do
    if not (p:match("^working") or p:match("^output")) then
      raise("InvalidInput", "writable paths must be under working/ or output/: " .. q(p), { non_retryable = true })
    end
  end
  -- an earlier attempt of this same step (the names are this session's alone) may have left its sandbox
  d.clear(opts.session_id)
  remove_workspace(sb.workspace)
  d.new(sb, opts)
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
    -- the sandbox's user and no one else (the driver says who that is on the host)
    local owner, mode = d.owner(sb)
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
    d.start(sb, opts)
  end)
  if not ok then
    d.abort(sb)
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
  local r = driver_of(sb).exec(sb, argv, opts)
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

-- Runs argv under bubblewrap, as exec does with the bwrap driver, without
-- exec's reading of the result.
function M.bwrap_exec(sb, argv, opts) return driver("bwrap").exec(sb, argv, opts) end

-- Reads a workspace file on the trusted side (no symlinks followed).
function M.read_file(sb, path, max_bytes)
  local root, rel = source(sb, M.relative(path), path)
  local data, err, truncated = safefs.read(root, rel, max_bytes or 1024 * 1024)
  if not data then raise("FileError", q(path) .. ": " .. err) end
  return { content = data, truncated = truncated }
end

-- Writes a file, only under the sandbox's writable paths.
function M.write_file(sb, path, content)
  local rel = M.relative(path)
  if rel:match("^parent/") or rel == "parent" then
    raise("PermissionDenied", q(path) .. " is read-only (the parent session's workspace)")
  end
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

-- Lists the files of a workspace directory (the whole workspace: with a
-- parent's view, its files under parent/ too).
function M.list_files(sb, path)
  local rel = path and path ~= "/workspace" and M.relative(path) or "."
  local root, at = source(sb, rel, path)
  local entries, err = safefs.list(root, at)
  if not entries then raise("FileError", q(path) .. ": " .. err) end
  local function from_parent(list)
    -- the parent's paths as the sandbox names them: working/x -> parent/x
    for _, e in ipairs(list) do
      if type(e.path) == "string" and e.path:sub(1, 8) == "working/" then e.path = "parent/" .. e.path:sub(9)
      elseif e.path == "working" then e.path = "parent" end
    end
    return list
  end
  if root ~= sb.workspace then
    from_parent(entries)
  elseif rel == "." and sb.parent_view then
    local more = safefs.list(sb.parent_view.workspace, "working")
    if more then
      entries[#entries + 1] = { path = "parent", type = "dir", size = 0 }
      for _, e in ipairs(from_parent(more)) do entries[#entries + 1] = e end
    end
  end
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
function M.copy_in(sb, dest, files) return driver_of(sb).copy_in(sb, dest, files) end

-- Copies a path out of the running container: {{name=, data=, type=, size=}}.
function M.copy_out(sb, path, max_bytes) return driver_of(sb).copy_out(sb, path, max_bytes) end

-- Removes the container and the workspace. Safe to call again.
function M.destroy(sb)
  -- another host's sandbox cannot be reached from here: its host's sweep
  -- removes it once the session has ended
  if not M.here(sb) then return { removed = false, elsewhere = sb.host } end
  local removed = driver_of(sb).destroy(sb)
  remove_workspace(sb.workspace)
  return { removed = removed }
end

-- Why sb is another session's, or nil: a fork (engine fork) copies its
-- source's history, the sandbox handle in it too, and the source's sandbox
-- is never the fork's to use, read or remove (docs/forking.md). session_id:
-- the session asking (its workflow's id). A handle without a session is
-- nobody's in particular.
function M.foreign(sb, session_id)
  if type(sb) ~= "table" or type(sb.session_id) ~= "string" or type(session_id) ~= "string" then return nil end
  if sb.session_id == session_id then return nil end
  return "the sandbox is session " .. sb.session_id .. "'s, not " .. session_id .. "'s (a fork does not use its "
    .. "source's sandbox)"
end

-- Who owns a sandbox's working/ and output/ on the host ("uid:gid", or nil:
-- the engine's user), as its driver says: what a restored snapshot is given.
function M.workspace_owner(sb) return (driver_of(sb).owner(sb)) end

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
  return driver_of(sb).reachable(sb)
end

-- What a provision cut short (cancelled, or failed part-way) may have left:
-- the session's sandbox (each driver's, by the names provision gives them)
-- and workspace. A create Docker took before the cut may still be under way,
-- so a miss is looked at again a moment later. Returns {removed = bool}.
function M.destroy_session(session_id, pause)
  local removed = false
  for _, name in ipairs(DRIVER_NAMES) do
    if driver(name).destroy_session(session_id, pause) then removed = true end
  end
  remove_workspace(M.workspace_root() .. "/" .. M.sandbox_name(session_id))
  return { removed = removed }
end

-- Removes what belongs to no live session here: every sandbox a driver
-- keeps (Docker's labelled containers, running or not) and every workspace of this database whose session is not
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
  for _, name in ipairs(DRIVER_NAMES) do driver(name).sweep(unwanted, remove_workspace, removed) end
  return removed
end

return M
