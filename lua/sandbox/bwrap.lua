-- The bubblewrap sandbox driver (lua/sandbox.lua is the interface), for
-- hosts where no Docker engine runs: each command runs in a fresh sandbox
-- over the same workspace (read-only rootfs and input, writable
-- working/output, a sub-session's read-only view of its parent's working/ at
-- /workspace/parent, no network, new pid/ipc/uts/user namespaces and no further
-- user namespaces, a seccomp filter, a new session, no capabilities, an empty
-- environment), as an unprivileged host user, under rlimits for address space
-- (memory), processes and CPU time. /tmp and /dev/shm are sized tmpfs; /dev
-- and the /workspace mount points are read-only. Nothing outlives a command.
local common = require "sandbox.common"
local native = require "sandbox.native"
local util = require "util"
local raise = util.raise

local D = {}

-- A host uid for a bubblewrap session: 20000-59999, from its name's hash.
local function host_uid(name)
  return 20000 + tonumber(name:sub(-8), 16) % 40000
end

-- No image: the rootfs (ENGINE_SANDBOX_ROOTFS), the session's own host uid,
-- and the skills it binds in. A sub-session that sees its parent's working/
-- (sb.parent_view) runs as its parent's host uid: as root that directory is
-- the parent's uid's alone (mode 0700), and the view is read-only by its
-- mount, whoever reads it. They share that uid's process limit.
function D.new(sb, opts)
  sb.image = nil
  sb.host_uid = host_uid(common.sandbox_name(sb.parent_view and sb.parent_view.session or opts.session_id))
  sb.rootfs = opts.rootfs or os.getenv("ENGINE_SANDBOX_ROOTFS") or "/var/cache/engine/sandbox-rootfs"
  sb.skills = {}
  for _, sk in ipairs(opts.skills or {}) do sb.skills[#sb.skills + 1] = { name = common.safe_name(sk.name), dir = sk.dir } end
end

-- Nothing outlives a command: nothing is left from an earlier attempt.
function D.clear(_) end

-- Who owns working/ and output/ on the host, and their mode: as root, the
-- session's own host uid (see sandbox_user_prefix); without root, the engine's
-- user, who runs the commands and owns them already.
function D.owner(sb)
  if common.is_root() then return sb.host_uid .. ":" .. sb.host_uid, "0700" end
  return nil, "0700"
end

-- As root, rlimits on processes would not bind: run as an unprivileged host
-- user of the session's own (sb.host_uid), so that the process limit counts
-- this sandbox's processes only, not every sandbox's (nor a Docker
-- container's, whose user 10001 is the host's 10001 too). Inside, it is 10001.
local function sandbox_user_prefix(sb)
  if not common.is_root() then return {} end
  local uid = tostring(sb.host_uid or 10001)
  return { "/usr/bin/setpriv", "--reuid", uid, "--regid", uid, "--clear-groups" }
end

function D.exec(sb, argv, opts)
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
    "--size", tostring(common.SHM_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
    "--size", tostring(common.TMP_BYTES), "--tmpfs", "/tmp",
    "--size", "65536", "--tmpfs", "/workspace", -- mount points for the binds below, over the read-only rootfs
    "--ro-bind", ws .. "/input", "/workspace/input", "--bind", ws .. "/working", "/workspace/working",
    "--bind", ws .. "/output", "/workspace/output", "--ro-bind", ws .. "/task.md", "/workspace/task.md",
    "--ro-bind", ws .. "/simple.md", "/workspace/simple.md", "--ro-bind", ws .. "/skills", "/workspace/skills" }) do
    a[#a + 1] = x
  end
  for _, sk in ipairs(sb.skills or {}) do
    for _, x in ipairs({ "--ro-bind", sk.dir, "/workspace/skills/" .. sk.name }) do a[#a + 1] = x end
  end
  if sb.parent_view then -- a sub-session's view of its parent's working/, read-only
    for _, x in ipairs({ "--ro-bind", sb.parent_view.workspace .. "/working", "/workspace/parent" }) do a[#a + 1] = x end
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

-- There is nothing to start: a first command shows that bubblewrap can run
-- over this rootfs.
function D.start(sb, _)
  local probe = D.exec(sb, { "true" }, { timeout = 30 })
  if probe.exit_code ~= 0 then
    raise("SandboxUnavailable", "bubblewrap cannot start a sandbox (rootfs " .. sb.rootfs .. "): " ..
      (probe.stderr ~= "" and probe.stderr or ("exit " .. tostring(probe.exit_code))), { non_retryable = true })
  end
end

function D.abort(_) end

function D.copy_in(_, _, _)
  raise("Unsupported", "copy_in needs the docker driver (bwrap shares the workspace)")
end

function D.copy_out(_, _, _)
  raise("Unsupported", "copy_out needs the docker driver (read the workspace instead)")
end

-- Nothing but the workspace (removed by the interface).
function D.destroy(_) return false end

-- Reachable while its workspace is there (the interface looks).
function D.reachable(_) return true end

function D.destroy_session(_, _) return false end

function D.sweep(_, _, _) end

return D
