-- Docker Engine API client for activities: REST over the engine's unix socket
-- through the async http module (the calling coroutine yields; no thread, no
-- `docker` CLI). The API version is negotiated once from GET /version and
-- pinned in every path. Errors are typed: DockerUnavailable, ImageMissing,
-- CreateRefused, NoSuchContainer, DockerError.
local http = require "http"
local json = require "json"
local native = require "docker.native"

local M = {}
local MAX_API = { 1, 45 } -- the newest API this client was written against
local pinned -- "/v1.41"

local raise = require("util").raise

local function socket()
  local path, err = native.socket_path()
  if not path then raise("DockerUnavailable", err, { non_retryable = true }) end
  return path
end

-- One request to the Engine. path is unversioned ("/containers/json").
local function request(method, path, body, opts)
  opts = opts or {}
  local sock = socket()
  local url = "http://docker" .. (opts.unversioned and "" or M.version_prefix()) .. path
  local headers = { ["content-type"] = "application/json" }
  local ok, res = pcall(http.request, {
    url = url, unix_socket = sock, method = method, headers = headers,
    body = type(body) == "table" and json.encode(body) or body,
    timeout = opts.timeout or 120, connect_timeout = 5, stream = opts.stream, max_bytes = opts.max_bytes,
  })
  if not ok then
    local e = type(res) == "table" and res or { message = tostring(res) }
    if e.type == "ConnectionError" then
      raise("DockerUnavailable", "cannot reach the Docker engine at " .. sock .. ": " .. tostring(e.message))
    end
    raise(e.type or "DockerError", "Docker " .. method .. " " .. path .. ": " .. tostring(e.message))
  end
  return res
end

local function message_of(res)
  local ok, v = pcall(json.decode, res.body or "")
  if ok and type(v) == "table" and v.message then return v.message end
  return (res.body or ""):sub(1, 300)
end

local function expect(res, want, what)
  for _, s in ipairs(want) do if res.status == s then return res end end
  if res.status == 404 then raise("NoSuchContainer", what .. ": " .. message_of(res), { status = 404 }) end
  raise("DockerError", string.format("%s: HTTP %d: %s", what, res.status, message_of(res)), { status = res.status })
end

local function decode(res)
  local ok, v = pcall(json.decode, res.body or "")
  if not ok then raise("DockerError", "Docker returned a body that is not JSON") end
  return v
end

function M.ping()
  local res = request("GET", "/_ping", nil, { unversioned = true, timeout = 10 })
  return res.status == 200
end

-- Negotiates the API version once per activity VM: the server's, capped at ours.
function M.version_prefix()
  if pinned then return pinned end
  local res = request("GET", "/version", nil, { unversioned = true, timeout = 10 })
  local v = decode(expect(res, { 200 }, "version"))
  local maj, min = tostring(v.ApiVersion or "1.41"):match("^(%d+)%.(%d+)$")
  maj, min = tonumber(maj) or 1, tonumber(min) or 41
  if maj > MAX_API[1] or (maj == MAX_API[1] and min > MAX_API[2]) then maj, min = MAX_API[1], MAX_API[2] end
  pinned = string.format("/v%d.%d", maj, min)
  return pinned
end

function M.server_version()
  local res = request("GET", "/version", nil, { unversioned = true, timeout = 10 })
  return decode(expect(res, { 200 }, "version"))
end

local function urlencode(s)
  return (tostring(s):gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

-- The image NAME (repo:tag, or an id) as the Engine has it, or nil when it has none.
function M.image(name)
  local path = "/images/" .. (tostring(name):gsub("[^%w%-%._~/:@]", function(c) return string.format("%%%02X", c:byte()) end))
  local res = request("GET", path .. "/json", nil, { timeout = 10 })
  if res.status == 404 then return nil end
  return decode(expect(res, { 200 }, "image " .. tostring(name)))
end

-- Creates a container; spec is the Engine's create body. Returns its id.
function M.create(spec, name)
  local path = "/containers/create" .. (name and ("?name=" .. urlencode(name)) or "")
  local res = request("POST", path, spec)
  if res.status == 404 then
    raise("ImageMissing", "image " .. tostring(spec.Image) .. " is not present in the Docker engine (build it: " ..
      "scripts/build-sandbox-image): " .. message_of(res), { non_retryable = true })
  end
  if res.status ~= 201 then
    raise("CreateRefused", string.format("the Docker engine refused the container (HTTP %d): %s", res.status,
      message_of(res)), { status = res.status, non_retryable = res.status < 500 or nil })
  end
  return decode(res).Id
end

function M.start(id)
  expect(request("POST", "/containers/" .. id .. "/start"), { 204, 304 }, "start " .. id)
end

function M.inspect(id)
  return decode(expect(request("GET", "/containers/" .. id .. "/json"), { 200 }, "inspect " .. id))
end

function M.stop(id, seconds)
  local res = request("POST", "/containers/" .. id .. "/stop?t=" .. math.floor(seconds or 5), nil,
    { timeout = (seconds or 5) + 30 })
  if res.status == 404 then return false end
  expect(res, { 204, 304 }, "stop " .. id)
  return true
end

-- Removes a container (running or not). false when it was already gone.
function M.remove(id)
  local res = request("DELETE", "/containers/" .. id .. "?force=true&v=true", nil, { timeout = 60 })
  if res.status == 404 then return false end
  expect(res, { 204 }, "remove " .. id)
  return true
end

-- Containers (running or not) with all the given labels {k = v}.
function M.list(labels)
  local f = {}
  for k, v in pairs(labels or {}) do f[#f + 1] = k .. "=" .. v end
  local filters = #f > 0 and ("&filters=" .. urlencode(json.encode({ label = f }))) or ""
  return decode(expect(request("GET", "/containers/json?all=true" .. filters), { 200 }, "list"))
end

-- Every exec runs in this wrapper (sh -c WRAPPER <time limit> <command...>).
-- The time limit is enforced inside the container, where the process lives
-- (timeout(1): SIGTERM at the limit, SIGKILL 2 s later). Around the command,
-- reap() ends every process the command's user may signal: the container's
-- init and keep-alive run as another user (lua/sandbox/docker.lua), so
-- `kill -9 -1` as the command's user takes setsid'd, nohup'd, double-forked
-- and disowned processes and a fork bomb's children, and spares the
-- container; kill(-1) signals them all in one call, so none forks away. It
-- runs before the command too, for whatever an exec whose wrapper was killed
-- left. Only shell builtins run around it, so a full pids limit cannot stop
-- it. The last stderr line reports to the host (and is stripped): whether
-- the clean-up ran (0) or was skipped (1: a container whose init runs as the
-- command's user, from before this rule), the pids cgroup's "max" event count
-- before and after the command, and the limit.
local WRAPPER = [[
e=/sys/fs/cgroup/pids.events; [ -r $e ] || e=/sys/fs/cgroup/pids/pids.events
reap() {
  [ -O /proc/1 ] && return 1
  kill -9 -1 2>/dev/null
  i=0
  while [ $i -lt 2000 ]; do
    i=$((i + 1)); left=
    for d in /proc/[0-9]*; do [ "$d" != /proc/$$ ] && [ -O "$d" ] && left=1 && break; done
    [ -z "$left" ] && return 0
  done
  return 0
}
reap
b=-; { read -r _ b <$e; } 2>/dev/null
timeout -k 2 "$0" "$@" & p=$!; wait $p; rc=$?; kill -9 -$p 2>/dev/null
reap; c=$?
a=-; { read -r _ a <$e; } 2>/dev/null
l=-; { read -r l <${e%events}max; } 2>/dev/null
printf '\036engine-exec-end %s %s %s %s\n' $c "$b" "$a" "$l" >&2
exit $rc
]]
local REPORT = "\30engine%-exec%-end (%d) (%S+) (%S+) (%S+)\n$"
local REPORT_ROOM = 128 -- kept beyond max_output for the report line

-- out, err, truncated, total and the wrapper's report (nil when it did not
-- finish), from a demuxer that kept max + REPORT_ROOM bytes.
local function exec_output(demux, max)
  local out, err, _, total = demux:result()
  local tail, err_total = demux:stderr_tail()
  local at, _, status, before, after, limit = tail:find(REPORT)
  local report
  if at then
    local len = #tail - at + 1
    local from = err_total - len -- where the report starts in the stderr stream
    if #err > from then err = err:sub(1, from) end
    total = total - len
    report = { cleaned = status == "0", before = tonumber(before), after = tonumber(after),
      limit = tonumber(limit) or limit }
  end
  local over = #out + #err - max -- the room kept for the report, used by output
  if over > 0 then
    local cut = math.min(over, #err)
    err = err:sub(1, #err - cut)
    out = out:sub(1, #out - (over - cut))
  end
  return out, err, #out + #err < total, total, report
end

-- One wrapped exec: create, start, read the stream into the demuxer (no Lua
-- string per chunk: the http stream feeds it directly, a window at a time).
local function exec_once(id, cmd, opts)
  local timeout = opts.timeout or 60
  local max = opts.max_output or 1024 * 1024
  local argv = { "sh", "-c", WRAPPER, tostring(timeout) }
  for _, a in ipairs(cmd) do argv[#argv + 1] = tostring(a) end
  local body = { AttachStdout = true, AttachStderr = true, AttachStdin = false, Tty = false, Cmd = argv,
    User = opts.user, WorkingDir = opts.workdir }
  if opts.env and #opts.env > 0 then body.Env = opts.env end
  local res = request("POST", "/containers/" .. id .. "/exec", body)
  if res.status == 409 then raise("DockerError", "the container is not running", { status = 409 }) end
  local exec_id = decode(expect(res, { 201 }, "exec create")).Id
  local demux = native.demuxer(max + REPORT_ROOM)
  local timed_out = false
  -- no cap on the stream itself: the demuxer keeps max_output and counts the rest
  local stream = request("POST", "/exec/" .. exec_id .. "/start", { Detach = false, Tty = false },
    { stream = true, timeout = timeout + 30, max_bytes = math.maxinteger })
  if stream.status ~= 200 then expect({ status = stream.status, body = "" }, { 200 }, "exec start") end
  while true do
    local ok, n = pcall(stream.read_into, stream, demux)
    if not ok then
      if type(n) == "table" and (n.type == "Timeout" or n.type == "IdleTimeout") then timed_out = true end
      break
    end
    if not n then break end
  end
  stream:close()
  local info = decode(expect(request("GET", "/exec/" .. exec_id .. "/json"), { 200 }, "exec inspect"))
  local out, err, truncated, total, report = exec_output(demux, max)
  local code = info.ExitCode
  if code == 124 then timed_out = true end
  return { exit_code = code, stdout = out, stderr = err, truncated = truncated, output_bytes = total,
    timed_out = timed_out }, report
end

local REAP_WAIT = 10 -- seconds the host waits for processes it reaped to be gone

-- A pause that yields the activity (false outside one: no waiting there).
local function pause(seconds)
  return type(activity) == "table" and pcall(activity.sleep, seconds)
end

local FORK_FAILED = { "Cannot fork", "Resource temporarily unavailable", "fork: retry" }

-- The container's processes, as the Engine lists them from the host
-- (GET top: no exec, so it works whatever the sandbox did to its pids).
function M.top(id, ps_args)
  local q = ps_args and ("?ps_args=" .. urlencode(ps_args)) or ""
  return decode(expect(request("GET", "/containers/" .. id .. "/top" .. q), { 200 }, "top " .. id))
end

-- The container's processes as {pid, effective uid} read on this host from
-- its pids cgroup, or nil where that is not visible (another host or pid
-- namespace than the Docker engine's): no request, no process started.
local CGROUPS = { "/sys/fs/cgroup/pids/docker/%s/cgroup.procs", "/sys/fs/cgroup/docker/%s/cgroup.procs",
  "/sys/fs/cgroup/system.slice/docker-%s.scope/cgroup.procs" }
local function local_procs(id)
  if not tostring(id):match("^%x+$") or #id ~= 64 then return nil end
  for _, pattern in ipairs(CGROUPS) do
    local f = io.open(pattern:format(id), "r")
    if f then
      local procs = {}
      for pid in f:lines() do
        local st = io.open("/proc/" .. pid .. "/status", "r")
        local uid = st and st:read("a"):match("\nUid:%s+%d+%s+(%d+)")
        if st then st:close() end
        if uid then procs[#procs + 1] = { pid, uid } end
      end
      f:close()
      -- the container's init is always there: none seen means other pid numbers than ours
      return #procs > 0 and procs or nil
    end
  end
  return nil
end

-- Whether a process of the numeric user ("10001:10001") still runs in the container.
local function user_left(id, user)
  local uid = tostring(user or ""):match("^(%d+)")
  if not uid then return false end
  local procs = local_procs(id)
  if procs then
    for _, p in ipairs(procs) do if p[2] == uid then return true end end
    return false
  end
  local ok, t = pcall(M.top, id, "-o pid,uid")
  if not ok or type(t) ~= "table" then return false end
  local col
  for i, title in ipairs(t.Titles or {}) do if title == "UID" then col = i end end
  for _, p in ipairs(t.Processes or {}) do
    if col and tostring(p[col]) == uid then return true end
  end
  return false
end

-- Runs cmd in a running container. opts: {user=, workdir=, env={"K=V"},
-- timeout= seconds (the process is killed), max_output= bytes kept (the rest is
-- counted and dropped)}. Returns {exit_code, stdout, stderr, truncated,
-- output_bytes, timed_out, oom_killed, pids_limit_hit, pids_limit, error,
-- survivors (true: processes of the command were still there REAP_WAIT s on)}.
-- Nothing the command started outlives it (see WRAPPER); the Engine's
-- process list confirms it after each exec. This assumes one exec at a time
-- per container and user: an exec's clean-up also ends another exec of the
-- same user still running there (an abandoned attempt).
function M.exec(id, cmd, opts)
  opts = opts or {}
  local r, report = exec_once(id, cmd, opts)
  local hit
  if report then
    hit = report.before and report.after and report.after > report.before
  end
  -- the wrapper did not finish (killed, the stream cut) or something of the
  -- user is still there (the command forged the report, a reaper that could
  -- not start): a fresh wrapper reaps it, and the host looks again. A process
  -- already SIGKILLed may take the kernel a while to tear down (stuck in IO
  -- on a loaded machine), so the exec returns only once the host sees none.
  local left = not report or (report.cleaned and user_left(id, opts.user))
  local reaped = false
  for _ = 1, REAP_WAIT / 0.2 do
    if not left then break end
    if not reaped then -- again only while no reaper could run: what one killed just has to go
      local ok, _, again = pcall(exec_once, id, { "true" }, { user = opts.user, timeout = 10, max_output = 0 })
      reaped = ok and again ~= nil
      if reaped and not report then
        report = again
        local said = false
        for _, s in ipairs(FORK_FAILED) do
          if r.stderr:find(s, 1, true) or r.stdout:find(s, 1, true) then said = true end
        end
        hit = said and (again.after or 0) > 0
      end
    end
    left = user_left(id, opts.user)
    if left and not pause(0.2) then break end
  end
  -- still there after REAP_WAIT s: said, never silent (the next exec's wrapper reaps first)
  if left then r.survivors = true end
  if hit then
    r.pids_limit_hit, r.pids_limit = true, report.limit
    r.error = string.format("a process could not be created: the sandbox's pids limit (%s) was reached",
      tostring(report.limit))
  end
  if r.exit_code == 137 and not r.timed_out then r.oom_killed = M.oom_killed(id) end
  return r
end

-- Whether the kernel's OOM killer has fired in the container's memory cgroup
-- (cgroup v2 memory.events or v1 memory.oom_control). Docker's OOMKilled only
-- covers the main process, not an exec'd one.
function M.oom_killed(id)
  local okc, c = pcall(M.inspect, id)
  if okc and c.State and c.State.OOMKilled then return true end
  local body = { AttachStdout = true, AttachStderr = false, Tty = false,
    Cmd = { "sh", "-c", "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null" } }
  local ok, res = pcall(request, "POST", "/containers/" .. id .. "/exec", body)
  if not ok or res.status ~= 201 then return false end
  local exec_id = decode(res).Id
  local demux = native.demuxer(4096)
  local s = request("POST", "/exec/" .. exec_id .. "/start", { Detach = false, Tty = false }, { stream = true, timeout = 10 })
  while true do
    local okr, n = pcall(s.read_into, s, demux)
    if not okr or not n then break end
  end
  s:close()
  local out = demux:result()
  local n = tonumber(out:match("oom_kill (%d+)") or "0")
  return n > 0
end

-- Copies a tar archive into the container at path (PUT archive).
function M.put_archive(id, path, tar)
  expect(request("PUT", "/containers/" .. id .. "/archive?path=" .. urlencode(path), tar, { timeout = 120 }),
    { 200 }, "put archive")
end

-- A tar archive of path in the container (GET archive).
function M.get_archive(id, path, max_bytes)
  local res = request("GET", "/containers/" .. id .. "/archive?path=" .. urlencode(path), nil,
    { timeout = 120, max_bytes = max_bytes })
  return expect(res, { 200 }, "get archive").body
end

return M
