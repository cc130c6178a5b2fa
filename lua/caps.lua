-- The engine's limits file: caps, rate limits and quotas that hold across
-- sessions, kept by the engine as durable counters (wf.acquire, wf.rate,
-- wf.counter). Its path is $ENGINE_LIMITS, else limits.lua in the database's
-- directory when there is one; without a file nothing is limited. It is a Lua
-- data file, read in an environment with no globals at all:
--
--   sessions    = 20                              -- agent sessions at once; the others queue
--   sandboxes   = 8                               -- live sandboxes, engine-wide
--   model_calls = { default = 4, anthropic = 2 }  -- model calls at once, per provider
--   rate = { openai = { requests_per_minute = 500, tokens_per_minute = 200000,
--                       window_seconds = 60 } }   -- shared by every session
--   quotas = { ["token:ci"] = { tokens_per_day = 2e6, cost_usd_per_month = 50 },
--              default = { tokens_per_day = 5e5 } } -- per identity, UTC day and month
--
-- (or the same fields in a returned table). A rate is counted in fixed
-- windows of window_seconds (default 60): each window admits
-- requests_per_minute * window_seconds / 60 requests (rounded down, at least
-- one) and as many tokens. Providers are the model's API: openai (Chat and
-- Responses), anthropic, replay (recordings). `default` in quotas applies to
-- each identity that has no entry of its own (its own budget, not a shared one).
--
-- Sessions read the file at session.prepare, so an edit applies to the
-- sessions that start after it. This module is plain Lua (tests/unit/test_caps.lua):
-- activities read the file with it (M.load, M.caps), and workflows keep to
-- what session.prepare recorded with its workflow side (the end of this file:
-- slots, quotas, and a model call under the provider's caps).
local M = {}

local TOP = { sessions = true, sandboxes = true, model_calls = true, rate = true, quotas = true }
local RATE = { requests_per_minute = true, tokens_per_minute = true, window_seconds = true }
M.QUOTAS = { "tokens_per_day", "tokens_per_month", "cost_usd_per_day", "cost_usd_per_month" }
local QUOTA = {}
for _, k in ipairs(M.QUOTAS) do QUOTA[k] = true end
local COUNT_MAX = 1000000 -- wf.acquire's largest limit
local BUDGET = 100000 -- instructions: a data file has no business looping

local function show(v)
  if type(v) == "string" then return string.format("%q", v) end
  return tostring(v)
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

-- Checks a loaded table; returns the normalized config or nil, "FIELD must ... (got VALUE)".
local function check(t)
  local function count(path, v)
    if math.type(v) ~= "integer" and not (type(v) == "number" and v == math.floor(v)) then
      return nil, path .. " must be a whole number from 1 to " .. COUNT_MAX .. " (got " .. show(v) .. ")"
    end
    if v < 1 or v > COUNT_MAX then
      return nil, path .. " must be a whole number from 1 to " .. COUNT_MAX .. " (got " .. show(v) .. ")"
    end
    return math.tointeger(v)
  end
  local function positive(path, v, zero_ok)
    if type(v) ~= "number" or v ~= v or v == math.huge or v < 0 or (v == 0 and not zero_ok) then
      return nil, path .. " must be a " .. (zero_ok and "number >= 0" or "positive number") .. " (got " .. show(v) .. ")"
    end
    return v
  end
  local function name_ok(path, k)
    if type(k) ~= "string" or k == "" or #k > 200 then
      return nil, path .. " has a key that is not a name of 1-200 bytes: " .. show(k)
    end
    return true
  end
  local out = {}
  for _, k in ipairs(sorted_keys(t)) do
    if not TOP[k] then return nil, "unknown field " .. show(k) .. " (sessions, sandboxes, model_calls, rate, quotas)" end
  end
  for _, k in ipairs({ "sessions", "sandboxes" }) do
    if t[k] ~= nil then
      local v, err = count(k, t[k])
      if not v then return nil, err end
      out[k] = v
    end
  end
  if t.model_calls ~= nil then
    if type(t.model_calls) ~= "table" then
      return nil, "model_calls must be a table {default = N, PROVIDER = N} (got " .. show(t.model_calls) .. ")"
    end
    out.model_calls = {}
    for _, p in ipairs(sorted_keys(t.model_calls)) do
      local okn, err = name_ok("model_calls", p)
      if not okn then return nil, err end
      local v, cerr = count("model_calls." .. p, t.model_calls[p])
      if not v then return nil, cerr end
      out.model_calls[p] = v
    end
  end
  if t.rate ~= nil then
    if type(t.rate) ~= "table" then
      return nil, "rate must be a table {PROVIDER = {requests_per_minute =, tokens_per_minute =}} (got " .. show(t.rate) .. ")"
    end
    out.rate = {}
    for _, p in ipairs(sorted_keys(t.rate)) do
      local okn, err = name_ok("rate", p)
      if not okn then return nil, err end
      local r = t.rate[p]
      if type(r) ~= "table" then return nil, "rate." .. p .. " must be a table (got " .. show(r) .. ")" end
      local o = {}
      for _, k in ipairs(sorted_keys(r)) do
        if not RATE[k] then
          return nil, "rate." .. p .. ": unknown field " .. show(k) .. " (requests_per_minute, tokens_per_minute, window_seconds)"
        end
        local v, perr = positive("rate." .. p .. "." .. tostring(k), r[k])
        if not v then return nil, perr end
        o[k] = v
      end
      if o.window_seconds and o.window_seconds > 86400 then
        return nil, "rate." .. p .. ".window_seconds must be at most 86400 (got " .. show(o.window_seconds) .. ")"
      end
      out.rate[p] = o
    end
  end
  if t.quotas ~= nil then
    if type(t.quotas) ~= "table" then
      return nil, "quotas must be a table {IDENTITY = {tokens_per_day =, ...}, default = {...}} (got " .. show(t.quotas) .. ")"
    end
    out.quotas = {}
    for _, id in ipairs(sorted_keys(t.quotas)) do
      local okn, err = name_ok("quotas", id)
      if not okn then return nil, err end
      local q = t.quotas[id]
      local path = "quotas[" .. show(id) .. "]"
      if type(q) ~= "table" then return nil, path .. " must be a table (got " .. show(q) .. ")" end
      local o = {}
      for _, k in ipairs(sorted_keys(q)) do
        if not QUOTA[k] then return nil, path .. ": unknown field " .. show(k) .. " (" .. table.concat(M.QUOTAS, ", ") .. ")" end
        local v, perr = positive(path .. "." .. k, q[k], true)
        if not v then return nil, perr end
        o[k] = v
      end
      out.quotas[id] = o
    end
  end
  return out
end

-- Parses the text of a limits file. Returns the config, or nil and the
-- problem (a syntax error with its line, or the field and the value).
function M.parse(text, chunkname)
  local env = {}
  local fn, err = load(text, chunkname or "=limits", "t", env)
  if not fn then return nil, err end
  -- run under a count hook: the file is data, and a loop in it must not hang prepare
  local co = coroutine.create(fn)
  if debug and debug.sethook then
    debug.sethook(co, function() error("the file runs too long (more than " .. BUDGET .. " instructions)", 0) end, "",
      BUDGET)
  end
  local ok, ret = coroutine.resume(co)
  if not ok then return nil, tostring(ret) end
  if coroutine.status(co) ~= "dead" then return nil, "the file yields" end
  local t = env
  if ret ~= nil then
    if type(ret) ~= "table" then return nil, "the file returns " .. type(ret) .. ", not a table" end
    if next(env) ~= nil then return nil, "the file both sets fields and returns a table: use one or the other" end
    t = ret
  end
  return check(t)
end

-- The limits file in force: $ENGINE_LIMITS when set (it must exist), else
-- DB_DIR/limits.lua when it exists, else nil (no limits).
function M.path(db_dir)
  local env = os.getenv("ENGINE_LIMITS")
  if env and env ~= "" then return env end
  if db_dir then
    local p = db_dir .. "/limits.lua"
    local f = io.open(p, "r")
    if f then
      f:close()
      return p
    end
  end
  return nil
end

-- Loads the limits file at path. Returns the config, or nil and
-- "limits file PATH: PROBLEM".
function M.load(path)
  local f, err = io.open(path, "r")
  if not f then return nil, "limits file " .. path .. ": cannot read it: " .. tostring(err) end
  local text = f:read("a")
  f:close()
  local cfg, perr = M.parse(text, "@" .. path)
  if not cfg then
    perr = tostring(perr):gsub("^" .. path:gsub("%p", "%%%0") .. ":", "line ")
    return nil, "limits file " .. path .. ": " .. perr
  end
  return cfg
end

-- The quota entry for identity: its own, else the default one, else nil.
function M.quota_for(cfg, identity)
  local q = cfg.quotas
  if not q then return nil end
  return q[identity] or q.default
end

-- What applies to one session, as session.prepare records it for the
-- workflow (so replay sees the same caps): {sessions=, sandboxes=,
-- model_calls=, rate={requests=, tokens=, window=}, quota={identity=, ...}},
-- or nil when nothing does.
function M.caps(cfg, provider, identity)
  if not cfg then return nil end
  local caps, any = {}, false
  if cfg.sessions then caps.sessions, any = cfg.sessions, true end
  if cfg.sandboxes then caps.sandboxes, any = cfg.sandboxes, true end
  local mc = cfg.model_calls and (cfg.model_calls[provider] or cfg.model_calls.default)
  if mc then caps.model_calls, any = mc, true end
  local r = cfg.rate and cfg.rate[provider]
  if r and (r.requests_per_minute or r.tokens_per_minute) then
    local w = r.window_seconds or 60
    caps.rate = { window = w,
      requests = r.requests_per_minute and math.max(1, math.floor(r.requests_per_minute * w / 60)) or nil,
      tokens = r.tokens_per_minute and r.tokens_per_minute * w / 60 or nil }
    any = true
  end
  local q = M.quota_for(cfg, identity)
  if q and next(q) then
    caps.quota = { identity = identity }
    for k, v in pairs(q) do caps.quota[k] = v end
    any = true
  end
  return any and caps or nil
end

-- Days since 1970-01-01 to a civil date (proleptic Gregorian, H. Hinnant's
-- algorithm): integer arithmetic only, for the workflow VM, which has no os.date.
local function civil(days)
  local z = days + 719468
  local era = (z >= 0 and z or z - 146096) // 146097
  local doe = z - era * 146097
  local yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
  local mp = (5 * doy + 2) // 153
  local d = doy - (153 * mp + 2) // 5 + 1
  local m = mp < 10 and mp + 3 or mp - 9
  if m <= 2 then y = y + 1 end
  return y, m, d
end

-- The UTC day "YYYY-MM-DD" and month "YYYY-MM" of epoch seconds t.
function M.period(t)
  local y, m, d = civil(math.floor(t) // 86400)
  return string.format("%04d-%02d-%02d", y, m, d), string.format("%04d-%02d", y, m)
end

-- The counter a quota is kept in (wf.counter; `engine quota list` reads them
-- back): quota:IDENTITY:QUOTA:PERIOD. Identities too long for a counter name
-- keep their first bytes and a digest of the whole.
function M.counter_name(identity, quota, t)
  local day, month = M.period(t)
  if #identity > 180 then
    local h = 5381
    for i = 1, #identity do h = (h * 33 + identity:byte(i)) % 4294967296 end
    identity = identity:sub(1, 170) .. string.format("~%08x", h)
  end
  return "quota:" .. identity .. ":" .. quota .. ":" .. (quota:match("_day$") and day or month)
end

-- The parts of a counter name made by counter_name: identity, quota, period.
function M.parse_counter_name(name)
  return name:match("^quota:(.+):([%a_]+):(%d%d%d%d%-%d%d[%-%d]*)$")
end

-- ------------------------------------------------------- workflow side --
-- What a workflow does with the caps that session.prepare recorded (M.caps's
-- table, or nil when nothing applies). wf is the workflow module: every call
-- below is durable (wf.acquire, wf.release, wf.rate, wf.counter), so a
-- workflow makes them at the same points on replay; none is made for a cap
-- that is not set.

-- Holds a slot of the engine-wide cap `what` ("sessions" or "sandboxes") when
-- it is set, waiting in line for one (the slot is held until M.release or the
-- run's end). Returns whether it held one.
function M.hold(wf, caps, what)
  if not (caps and caps[what]) then return false end
  wf.acquire(what, { limit = caps[what] })
  return true
end

-- Gives back the slot M.hold took (nothing when the cap is not set).
function M.release(wf, caps, what)
  if caps and caps[what] then wf.release(what) end
end

-- Quotas (caps.quota = {identity=, tokens_per_day=, ...}): the identity's use
-- this UTC day and month, kept by the engine across sessions and restarts.
-- The first quota already used up, as {quota=, limit=, used=, identity=}, or
-- nil (also without a quota).
function M.quota_reached(wf, quota)
  if not quota then return nil end
  local t = wf.now()
  for _, q in ipairs(M.QUOTAS) do
    if quota[q] then
      local used = wf.counter(M.counter_name(quota.identity, q, t), 0)
      if used >= quota[q] then return { quota = q, limit = quota[q], used = used, identity = quota.identity } end
    end
  end
  return nil
end

-- Counts tokens and cost (USD) against the quotas that are set.
function M.count_quota(wf, quota, tokens, cost)
  if not quota then return end
  local t = wf.now()
  for _, q in ipairs(M.QUOTAS) do
    local delta = q:match("^tokens") and tokens or cost
    if quota[q] and delta > 0 then wf.counter(M.counter_name(quota.identity, q, t), delta) end
  end
end

-- Model calls under the provider's caps: a slot of its concurrent calls
-- (caps.model_calls), then room in its shared rate windows (caps.rate). With
-- a rate set, a 429 with a retry-after comes back at once (the call's option
-- defer_rate_limit) and pauses the shared window, so every session on this
-- provider waits it out (durably) rather than meeting 429s of its own. A
-- turn's tokens are known once it is done: it reserves what the last turn
-- through this gate took (sessions that start together in a window then do
-- not all pass it) and is charged the rest afterwards. last_tokens is that
-- count (0 for a first turn; a session carries it across its runs).
local Gate = {}
Gate.__index = Gate

function M.gate(wf, caps, provider, last_tokens)
  return setmetatable({ wf = wf, caps = caps or {}, provider = provider, last_tokens = last_tokens or 0 }, Gate)
end

-- Whether any cap applies to the calls (else Gate:turn only calls).
function Gate:capped()
  return (self.caps.model_calls or self.caps.rate) and true or false
end

-- Pauses the provider's shared rate window for seconds (at most a day).
function Gate:pause(seconds)
  local rate = self.caps.rate
  local name = rate.requests and "requests:" or "tokens:"
  self.wf.rate(name .. self.provider, { per = rate.window, charge = 0, pause = math.min(86400, seconds) })
end

-- One model call: call(opts) -> the turn, or nil when it was abandoned;
-- remaining() -> the seconds the caller has left. Returns the turn, or nil
-- when the call was abandoned or the time ran out waiting for a slot or the
-- rate. A rate-limited call (RateLimited with retry_after) is paused for and
-- made again, at most 5 times; any other error is raised.
function Gate:turn(opts, call, remaining)
  local wf, caps, provider = self.wf, self.caps, self.provider
  if not self:capped() then return call(opts) end
  local rate = caps.rate
  if rate then opts.defer_rate_limit = true end
  local rate_limited, reserved = 0, 0
  while true do
    if caps.model_calls then wf.acquire("model-calls", { key = provider, limit = caps.model_calls }) end
    if rate and rate.requests then wf.rate("requests:" .. provider, { limit = rate.requests, per = rate.window }) end
    if rate and rate.tokens then
      wf.rate("tokens:" .. provider, { limit = rate.tokens, per = rate.window, cost = self.last_tokens })
      reserved = reserved + self.last_tokens
    end
    if remaining() <= 0 then
      if caps.model_calls then wf.release("model-calls", { key = provider }) end
      return nil
    end
    local ok, turn = pcall(call, opts)
    if caps.model_calls then wf.release("model-calls", { key = provider }) end
    if ok and not turn then return nil end -- abandoned
    if ok then
      local u = turn.usage or {}
      self.last_tokens = (u.input_tokens or 0) + (u.output_tokens or 0)
      if rate and rate.tokens and self.last_tokens > reserved then
        wf.rate("tokens:" .. provider, { per = rate.window, charge = self.last_tokens - reserved })
      end
      return turn
    end
    if rate and type(turn) == "table" and turn.type == "RateLimited" and turn.retry_after and rate_limited < 5 then
      rate_limited = rate_limited + 1
      self:pause(turn.retry_after)
    else
      error(turn, 0)
    end
  end
end

return M
