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

-- Runs cmd in a running container. opts: {user=, workdir=, env={"K=V"},
-- timeout= seconds (the process is killed), max_output= bytes kept (the rest is
-- counted and dropped)}. Returns {exit_code, stdout, stderr, truncated,
-- output_bytes, timed_out, oom_killed}.
function M.exec(id, cmd, opts)
  opts = opts or {}
  local timeout = opts.timeout or 60
  -- The time limit is enforced inside the container, where the process lives:
  -- timeout(1) puts the command in a process group of its own (SIGTERM at the
  -- limit, SIGKILL 2 s later); whatever the command left running in that group
  -- (background jobs, a fork bomb's children) is killed when it ends, so it
  -- cannot hold the pids limit. The host side only guards the stream.
  local argv = { "sh", "-c", 'timeout -k 2 "$0" "$@" & p=$!; wait $p; rc=$?; kill -KILL -$p 2>/dev/null; exit $rc',
    tostring(timeout) }
  for _, a in ipairs(cmd) do argv[#argv + 1] = tostring(a) end
  local body = { AttachStdout = true, AttachStderr = true, AttachStdin = false, Tty = false, Cmd = argv,
    User = opts.user, WorkingDir = opts.workdir }
  if opts.env and #opts.env > 0 then body.Env = opts.env end
  local res = request("POST", "/containers/" .. id .. "/exec", body)
  if res.status == 409 then raise("DockerError", "the container is not running", { status = 409 }) end
  local exec_id = decode(expect(res, { 201 }, "exec create")).Id
  local demux = native.demuxer(opts.max_output or 1024 * 1024)
  local timed_out = false
  -- no cap on the stream itself: the demuxer keeps max_output and counts the rest
  local stream = request("POST", "/exec/" .. exec_id .. "/start", { Detach = false, Tty = false },
    { stream = true, timeout = timeout + 30, max_bytes = math.maxinteger })
  if stream.status ~= 200 then expect({ status = stream.status, body = "" }, { 200 }, "exec start") end
  while true do
    local ok, chunk = pcall(stream.read, stream)
    if not ok then
      if type(chunk) == "table" and (chunk.type == "Timeout" or chunk.type == "IdleTimeout") then timed_out = true end
      break
    end
    if not chunk then break end
    demux:feed(chunk)
  end
  stream:close()
  local info = decode(expect(request("GET", "/exec/" .. exec_id .. "/json"), { 200 }, "exec inspect"))
  local out, err, truncated, total = demux:result()
  local code = info.ExitCode
  if code == 124 then timed_out = true end
  local r = { exit_code = code, stdout = out, stderr = err, truncated = truncated, output_bytes = total,
    timed_out = timed_out }
  if code == 137 and not timed_out then r.oom_killed = M.oom_killed(id) end
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
    local okr, chunk = pcall(s.read, s)
    if not okr or not chunk then break end
    demux:feed(chunk)
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
