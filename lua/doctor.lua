-- `engine doctor`'s checks that only the Lua library can make: the sandbox
-- driver (Docker and its image, or bubblewrap, user namespaces and the
-- rootfs), the workspaces' file system and the model providers' keys. The
-- command (engine/cli/cmd_doctor.c) holds the list of every check and calls
-- worker.doctor{checks = {NAME, ...}} (lua/activities/worker.lua) once for
-- the names it finds here; each check returns its rows (in order), each
-- {check=, state= "ok"|"warn"|"FAIL", detail=, fix=}. Nothing here changes
-- anything, and no key is ever part of a row: only whether it is set.
local json = require "json"
local sandbox = require "sandbox"

local M = {}

local function row(check, state, detail, fix) return { check = check, state = state, detail = detail, fix = fix } end

local function message(e) return type(e) == "table" and tostring(e.message or json.encode(e)) or tostring(e) end

local readable = require("util").read_file

local function exists(path) return require("fs").lstat(path) ~= nil end

-- The driver sessions get, and nil with a row when it is not one the engine has.
local function driver_name()
  local name = sandbox.default_driver()
  for _, n in ipairs(sandbox.DRIVER_NAMES) do if n == name then return name end end
  return nil
end

-- A row that says the check is for the other driver.
local function not_used(check, want)
  local name = sandbox.default_driver()
  if name == want then return nil end
  return { row(check, "ok", "not used (the sandbox driver is " .. tostring(name) .. ")", "") }
end

-- A program run the way the drivers run theirs (proc: child.c's child_spawn).
local function run(argv, opts)
  opts = opts or {}
  local ok, r = pcall(require("proc").run, { argv = argv, env = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C" },
    timeout = opts.timeout or 20, max_output = 8192, fd3 = opts.fd3 })
  if not ok then return { exit_code = -1, stdout = "", stderr = message(r) } end
  return r
end

local function output_of(r)
  local s = (r.stderr ~= "" and r.stderr or r.stdout or ""):gsub("%s+$", "")
  if s == "" then s = r.timed_out and "timed out" or ("exit " .. tostring(r.exit_code)) end
  return s:sub(1, 300)
end

M.CHECKS = {}

M.CHECKS["sandbox driver"] = function(check)
  local name = driver_name()
  if not name then
    return { row(check, "FAIL", "ENGINE_SANDBOX_DRIVER=" .. sandbox.default_driver() .. " is no sandbox driver ("
      .. table.concat(sandbox.DRIVER_NAMES, ", ") .. ")", "ENGINE_SANDBOX_DRIVER=docker (or bwrap)") }
  end
  local from = os.getenv("ENGINE_SANDBOX_DRIVER") and "ENGINE_SANDBOX_DRIVER" or "the default"
  return { row(check, "ok", name .. " (" .. from .. ")", "") }
end

M.CHECKS.docker = function(check)
  local other = not_used(check, "docker")
  if other then return other end
  local docker = require "docker"
  local sock, serr = require("docker.native").socket_path()
  if not sock then return { row(check, "FAIL", serr, "DOCKER_HOST=unix:///var/run/docker.sock (a unix socket)") } end
  local ok, v = pcall(docker.server_version)
  if not ok then
    local why = message(v)
    local fix = "start the Docker engine (systemctl start docker), or point DOCKER_HOST at its socket " ..
      "(unix:///PATH); without Docker: ENGINE_SANDBOX_DRIVER=bwrap"
    if why:find("[Pp]ermission denied") then
      fix = "give the engine's user access to " .. sock .. " (usermod -aG docker USER, then log in again)"
    end
    return { row(check, "FAIL", why, fix) }
  end
  return { row(check, "ok", string.format("Docker %s, API %s, at %s", tostring(v.Version or "?"),
    tostring(v.ApiVersion or "?"), sock), "") }
end

M.CHECKS["sandbox image"] = function(check)
  local other = not_used(check, "docker")
  if other then return other end
  local name = sandbox.DEFAULT_IMAGE
  local ok, img = pcall(require("docker").image, name)
  if not ok and type(img) == "table" and img.type == "DockerUnavailable" then
    return { row(check, "warn", "not checked: no Docker engine answers (" .. name .. ")", "see the docker row") }
  elseif not ok then
    return { row(check, "FAIL", "cannot ask the Docker engine for " .. name .. ": " .. message(img), "") }
  end
  if not img then
    return { row(check, "FAIL", "image " .. name .. " is not in the Docker engine (ENGINE_SANDBOX_IMAGE)",
      "scripts/build-sandbox-image (builds and tags it), or set ENGINE_SANDBOX_IMAGE to an image that is there") }
  end
  local size = tonumber(img.Size)
  return { row(check, "ok", string.format("%s (%s%s)", name, tostring(img.Id or "?"):sub(1, 19),
    size and string.format(", %d MiB", math.floor(size / 1048576)) or ""), "") }
end

-- bubblewrap as the driver starts it: the namespaces, no further user
-- namespaces, the seccomp filter, as an unprivileged user when the engine
-- runs as root (lua/sandbox/bwrap.lua), over the host's root read-only.
M.CHECKS.bubblewrap = function(check)
  local other = not_used(check, "bwrap")
  if other then return other end
  local install = "apt-get install bubblewrap util-linux"
  for _, p in ipairs({ "/usr/bin/bwrap", "/usr/bin/prlimit" }) do
    if not exists(p) then return { row(check, "FAIL", p .. " is missing (the bwrap driver runs it)", install) } end
  end
  local seccomp, serr = require("sandbox.native").seccomp_program()
  if not seccomp then return { row(check, "FAIL", "no seccomp filter for bubblewrap: " .. tostring(serr), "") } end
  local argv = {}
  if require("sandbox.common").is_root() then argv = { "/usr/bin/setpriv", "--reuid", "20000", "--regid", "20000", "--clear-groups" } end
  for _, a in ipairs({ "/usr/bin/bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-all",
    "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
    "--seccomp", "3", "--", "true" }) do argv[#argv + 1] = a end
  local r = run(argv, { fd3 = seccomp })
  if r.exit_code ~= 0 then
    return { row(check, "FAIL", "bwrap cannot start a sandbox: " .. output_of(r),
      "see the user namespaces row; bubblewrap 0.8 or newer (--disable-userns): " .. install) }
  end
  local v = run({ "/usr/bin/bwrap", "--version" })
  return { row(check, "ok", (v.exit_code == 0 and output_of(v) or "bwrap") .. " starts a sandbox", "") }
end

M.CHECKS["user namespaces"] = function(check)
  local other = not_used(check, "bwrap")
  if other then return other end
  local clone = readable("/proc/sys/kernel/unprivileged_userns_clone")
  if clone and clone:match("^%s*0") then
    return { row(check, "FAIL", "kernel.unprivileged_userns_clone is 0: bubblewrap cannot make its namespaces",
      "sysctl -w kernel.unprivileged_userns_clone=1 (and in /etc/sysctl.d to keep it)") }
  end
  local max = readable("/proc/sys/user/max_user_namespaces")
  if max and tonumber(max:match("%d+")) == 0 then
    return { row(check, "FAIL", "user.max_user_namespaces is 0: no user namespace can be made",
      "sysctl -w user.max_user_namespaces=15000 (and in /etc/sysctl.d to keep it)") }
  end
  local aa = readable("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
  if aa and aa:match("^%s*1") then
    return { row(check, "warn", "AppArmor restricts unprivileged user namespaces (apparmor_restrict_unprivileged_userns=1)",
      "an AppArmor profile for /usr/bin/bwrap that allows userns, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0") }
  end
  return { row(check, "ok", "unprivileged user namespaces allowed (max " .. tostring(max and max:match("%d+") or "?") .. ")", "") }
end

M.CHECKS["sandbox rootfs"] = function(check)
  local other = not_used(check, "bwrap")
  if other then return other end
  local root = os.getenv("ENGINE_SANDBOX_ROOTFS") or "/var/cache/engine/sandbox-rootfs"
  local st = require("fs").lstat(root)
  local fix = "scripts/build-sandbox-image (keeps its rootfs in /var/cache/engine/sandbox-rootfs), or set " ..
    "ENGINE_SANDBOX_ROOTFS to a Debian root file system"
  if not (st and (st.type == "dir" or st.type == "link")) then
    return { row(check, "FAIL", root .. " is not a folder (ENGINE_SANDBOX_ROOTFS)", fix) }
  end
  if not (exists(root .. "/bin/sh") or exists(root .. "/usr/bin/sh")) then
    return { row(check, "FAIL", root .. " has no /bin/sh: not a root file system", fix) }
  end
  return { row(check, "ok", root, "") }
end

-- How lua/sandbox.lua gives a workspace its size limit: as root an ext4
-- image on a loop device (else a tmpfs in RAM); without root none.
M.CHECKS["workspace file system"] = function(check)
  if not require("sandbox.common").is_root() then
    return { row(check, "ok", "plain folders: the engine is not root, so a session's disk use has no limit of its own", "") }
  end
  if not exists("/dev/loop-control") then
    return { row(check, "warn", "no /dev/loop-control: each workspace is a tmpfs, its limits.diskMb held in RAM",
      "modprobe loop (a container needs the host's /dev/loop-control and loop devices)") }
  end
  local mkfs = exists("/usr/sbin/mkfs.ext4") or exists("/sbin/mkfs.ext4")
  if not mkfs then
    return { row(check, "warn", "mkfs.ext4 is missing: each workspace is a tmpfs, its limits.diskMb held in RAM",
      "apt-get install e2fsprogs") }
  end
  return { row(check, "ok", "an ext4 image on a loop device per workspace (limits.diskMb)", "") }
end

-- One row per key the model runners read (lua/runners/init.lua), saying
-- where it is set, never what it is.
M.CHECKS.credentials = function(check)
  local keys, providers = {}, {}
  for provider, env in pairs(require("runners").KEY_ENV) do
    if not providers[env] then keys[#keys + 1] = env; providers[env] = {} end
    table.insert(providers[env], provider)
  end
  table.sort(keys)
  local file, file_err = os.getenv("ENGINE_CREDENTIALS_FILE"), nil
  local in_file = {}
  if file and file ~= "" then
    local text = readable(file)
    local ok, t = pcall(json.decode, text or "")
    if not text then file_err = "ENGINE_CREDENTIALS_FILE " .. file .. " cannot be read"
    elseif not ok or type(t) ~= "table" then file_err = "ENGINE_CREDENTIALS_FILE " .. file .. " is not a JSON object"
    else for k, v in pairs(t) do if type(v) == "string" and v ~= "" then in_file[k] = true end end end
  end
  local rows = {}
  for _, env in ipairs(keys) do
    table.sort(providers[env], function(a, b) return #a < #b or (#a == #b and a < b) end)
    local name = check .. ": " .. providers[env][1] -- openai for openai-chat and openai-responses too
    local v = os.getenv(env)
    if v and v ~= "" then
      rows[#rows + 1] = row(name, "ok", env .. " set (environment)", "")
    elseif in_file[env] then
      rows[#rows + 1] = row(name, "ok", env .. " set (credentials file)", "")
    else
      rows[#rows + 1] = row(name, "warn", env .. " not set" ..
        (file_err and ("; " .. file_err) or "") .. ": such models fail; replay models need no key",
        "set " .. env .. " in the engine's environment, or in the JSON file ENGINE_CREDENTIALS_FILE names")
    end
  end
  return rows
end

-- args.checks: the names asked for. Returns {checks = {NAME = its rows}}.
function M.run(args)
  local out = {}
  for _, name in ipairs(args.checks or {}) do
    local f = M.CHECKS[name]
    local ok, got
    if f then ok, got = pcall(f, name) else ok, got = false, "no such check in lua/doctor.lua" end
    if not ok then got = { row(name, "FAIL", "the check failed: " .. message(got), "") } end
    out[name] = got
  end
  return { checks = out }
end

return M
