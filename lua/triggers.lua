-- Triggers: the scripts in the triggers directory (workflows/triggers/ of the
-- served workflows directory, or ENGINE_TRIGGERS_DIR) turn a webhook delivery
-- into a workflow start. Each file returns
--
--   {
--     route = "github",                -- answers POST /hooks/github (default: the file's name)
--     verify = { kind = "github", secret = "GITHUB_WEBHOOK_SECRET" },
--     delivery_header = "x-github-delivery",  -- optional: where the delivery id is
--     grants = { "github:repo/acme/*:pr.review.draft" },  -- optional: what its starts may hold
--     map = function(req) ... end,
--   }
--
-- grants (docs/grants.md) is the most the workflows a trigger starts may
-- hold, fixed when the file loads: the start's input.grants (what map asks
-- for, from the delivery) is cut down to it, and a trigger without grants
-- starts sessions that hold none.
--
-- verify.kind is one of
--   github    X-Hub-Signature-256: sha256=HMAC-SHA256(secret, body), hex
--   standard  Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature
--             ("v1,<base64>" entries, any one may match: key rotation), a whsec_ key
--   stripe    Stripe-Signature: t=<ts>,v1=<hex>[,v1=...], HMAC of "t.body"
--   bearer    Authorization: Bearer <secret>
-- verify.secret names a credential (the engine's environment, else the
-- credentials file: runners/common.credential), never the secret itself: a
-- trigger script, like the log, never holds one. verify.tolerance (seconds,
-- default 300) bounds a signed timestamp's age either way (standard, stripe).
-- The delivery id is webhook-id (standard), X-GitHub-Delivery (github), the
-- event's "id" (stripe), or the delivery_header named; a redelivery of an
-- accepted id starts nothing (engine/server/api.c records it in one transaction with
-- the start).
--
-- map(req) gets a copy of {trigger, headers (lower-case names), body (the
-- exact bytes), json (the parsed body, nil when it is not JSON), delivery} and
-- returns {workflow = "file.lua", id = "...", input = {...}} (id optional: a
-- generated one), or nil, "why it is ignored". It runs in the policies'
-- sandbox (no io, os, require or load; an instruction budget); an error or a
-- malformed answer is the trigger's failure (500), never a start.
local policy = require "policy"
local json = require "json"

local M = {}

local KINDS = { github = true, standard = true, stripe = true, bearer = true }
local DEFAULT_SECRET = { github = "GITHUB_WEBHOOK_SECRET" }
local DEFAULT_TOLERANCE = 300
local sandbox = policy.sandbox

local function bad(where, fmt, ...) return nil, where .. ": " .. string.format(fmt, ...) end

-- One trigger from the table a file returned, or nil, err.
local function trigger_of(t, where, file)
  if type(t) ~= "table" then return bad(where, "must return a table {route=, verify=, map=}, got %s", type(t)) end
  for k in pairs(t) do
    if k ~= "route" and k ~= "verify" and k ~= "delivery_header" and k ~= "map" and k ~= "description" and
        k ~= "grants" then
      return bad(where, "unknown field '%s' (fields: route, verify, delivery_header, grants, map, description)",
        tostring(k))
    end
  end
  local route = t.route
  if route == nil then route = file:gsub("%.lua$", "") end
  if type(route) ~= "string" or not route:match("^[%w][%w_%-]*$") or #route > 64 then
    return bad(where, "route must be 1-64 characters of A-Z a-z 0-9 _ -, starting with a letter or digit")
  end
  local v = t.verify
  if type(v) ~= "table" then return bad(where, "verify is required: {kind = \"github\"|\"standard\"|\"stripe\"|\"bearer\", secret = CREDENTIAL}") end
  if not KINDS[v.kind] then
    return bad(where, "verify.kind must be github, standard, stripe or bearer, not %s", tostring(v.kind))
  end
  local secret = v.secret or DEFAULT_SECRET[v.kind]
  if type(secret) ~= "string" or not secret:match("^[%w_%-%.]+$") then
    return bad(where, "verify.secret must name a credential (like MY_WEBHOOK_SECRET), not hold the secret")
  end
  local tolerance = v.tolerance or DEFAULT_TOLERANCE
  if math.type(tolerance) ~= "integer" or tolerance < 1 or tolerance > 86400 then
    return bad(where, "verify.tolerance must be whole seconds from 1 to 86400")
  end
  if t.delivery_header ~= nil and (type(t.delivery_header) ~= "string" or not t.delivery_header:match("^[%w%-]+$")) then
    return bad(where, "delivery_header must be a header name")
  end
  if type(t.map) ~= "function" then return bad(where, "map must be a function(req)") end
  local held = {}
  if t.grants ~= nil then
    local list, problems = require("grants").parse_list(t.grants, "grants")
    if not list then return bad(where, "%s", table.concat(problems, "; ")) end
    for i, g in ipairs(list) do held[i] = g.text end
  end
  return { route = route, file = file, kind = v.kind, secret = secret, tolerance = tolerance,
    delivery_header = t.delivery_header and t.delivery_header:lower(), map = t.map, grants = held }
end

-- A set from sources {{name=, content=}}: {hash, files, routes = {route = trigger}}, or nil, err.
function M.load_sources(sources, label)
  local sorted = {}
  for i, s in ipairs(sources) do sorted[i] = s end
  table.sort(sorted, function(a, b) return a.name < b.name end)
  local set = { hash = policy.hash_sources(sorted), files = {}, routes = {}, dir = label }
  for _, src in ipairs(sorted) do
    local ok, res, where = sandbox.load(src, label)
    if not ok then return nil, res end
    local t, terr = trigger_of(res, where, src.name)
    if not t then return nil, terr end
    local other = set.routes[t.route]
    if other then
      return nil, string.format("%s: route '%s' is answered by %s already", where, t.route, other.file)
    end
    set.routes[t.route] = t
    set.files[#set.files + 1] = src.name
  end
  return set
end

function M.load_dir(dir)
  local sources, err = policy.read_dir(dir)
  if not sources then return nil, err end
  return M.load_sources(sources, dir)
end

-- ------------------------------------------------------------ in force --

-- The set in force per directory: a reload that loads replaces it; a broken
-- one is refused with its error and the previous set stays (as policies do).
local in_force = {}

function M.reload(dir)
  local set, err = M.load_dir(dir)
  if not set then
    return { ok = false, dir = dir, error = tostring(err), kept = in_force[dir] and in_force[dir].hash or nil }
  end
  local prev = in_force[dir]
  in_force[dir] = set
  return { ok = true, dir = dir, hash = set.hash, files = set.files, replaced = prev ~= nil and prev.hash ~= set.hash }
end

function M.in_force(dir)
  if not in_force[dir] then
    local r = M.reload(dir)
    if not r.ok then return nil, r.error end
  end
  return in_force[dir]
end

-- ------------------------------------------------------------ delivery --

local function verify(t, headers, body, now)
  local v = require "webhook.verify"
  local secret = require("runners.common").credential(t.secret)
  if not secret then
    return 500, "the trigger's secret " .. t.secret .. " is not set (the engine's environment or its credentials file)"
  end
  local ok, why
  if t.kind == "github" then
    ok, why = v.github(secret, headers["x-hub-signature-256"], body)
  elseif t.kind == "standard" then
    ok, why = v.standard(secret, headers["webhook-id"], headers["webhook-timestamp"], headers["webhook-signature"],
      body, now, t.tolerance)
  elseif t.kind == "stripe" then
    ok, why = v.stripe(secret, headers["stripe-signature"], body, now, t.tolerance)
  else
    ok, why = v.bearer(secret, headers["authorization"])
  end
  if ok then return nil end
  return 401, why or "the signature does not verify"
end

local function url_decode(s)
  return (s:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- The body as JSON: the body itself, or a form's payload field (GitHub's
-- application/x-www-form-urlencoded deliveries). nil, err when it is neither.
local function parse_body(headers, body)
  local ctype = (headers["content-type"] or ""):lower()
  local text = body
  if ctype:find("application/x-www-form-urlencoded", 1, true) then
    -- no payload field: a JSON body sent with a form's type (curl -d does that)
    local payload = ("&" .. body):match("&payload=([^&]*)")
    if payload then text = url_decode(payload) end
  end
  if text == "" then return nil end
  local ok, v = pcall(json.decode, text)
  if not ok then return nil, "the body is not valid JSON: " .. tostring(v):gsub("^.-: ", "") end
  return v
end

local function delivery_id(t, headers, parsed)
  local h = t.delivery_header
  if h then return headers[h] end
  if t.kind == "github" then return headers["x-github-delivery"] end
  if t.kind == "standard" then return headers["webhook-id"] end
  if t.kind == "stripe" and type(parsed) == "table" and type(parsed.id) == "string" then return parsed.id end
  return headers["idempotency-key"]
end

local function result(status, outcome, t, fields)
  fields = fields or {}
  fields.status, fields.outcome, fields.trigger = status, outcome, t and t.route or fields.trigger
  return fields
end

-- One delivery: args = {dir, name, headers = {name = value} or header_list =
-- {{name, value}, ...} (as received), body, now (epoch
-- seconds), verify (false: skip, for `engine trigger test --no-verify`)}.
-- Returns {status, outcome = "start"|"ignored"|"rejected", trigger, delivery,
-- workflow, id, input, detail}; the engine does the rest (dedup, the start).
function M.deliver(args)
  if not require("fs").realpath(args.dir) then
    return result(404, "rejected", nil, { trigger = args.name,
      detail = "no trigger answers /hooks/" .. tostring(args.name) .. " (there is no triggers directory " .. args.dir .. ")" })
  end
  local set, err = M.in_force(args.dir)
  if not set then return result(503, "rejected", nil, { trigger = args.name, detail = "no valid trigger set: " .. err }) end
  local t = set.routes[args.name]
  if not t then
    return result(404, "rejected", nil, { trigger = args.name,
      detail = "no trigger answers /hooks/" .. tostring(args.name) .. " (triggers in " .. args.dir .. ")" })
  end
  local headers = {}
  for k, v in pairs(args.headers or {}) do headers[k:lower()] = v end
  for _, pair in ipairs(args.header_list or {}) do -- as received: a repeated header is one list (RFC 9110)
    local k = pair[1]:lower()
    headers[k] = headers[k] and (headers[k] .. ", " .. pair[2]) or pair[2]
  end
  local body = args.body or ""
  if args.verify ~= false then
    local status, why = verify(t, headers, body, args.now)
    if status then return result(status, "rejected", t, { detail = why }) end
  end
  local parsed, perr = parse_body(headers, body)
  if perr then return result(400, "rejected", t, { detail = perr }) end
  local delivery = delivery_id(t, headers, parsed)
  if delivery ~= nil and (type(delivery) ~= "string" or #delivery > 200) then
    return result(400, "rejected", t, { detail = "the delivery id is longer than 200 bytes" })
  end
  local req = { trigger = t.route, headers = headers, body = body, json = parsed, delivery = delivery }
  local ok, out, why = sandbox.run(t.map, sandbox.copy(req))
  local where = "trigger " .. t.file
  if not ok then return result(500, "rejected", t, { delivery = delivery, detail = where .. " failed: " .. sandbox.errstr(out) }) end
  if out == nil then
    return result(200, "ignored", t, { delivery = delivery,
      detail = type(why) == "string" and why or (where .. " ignored it (map returned nil)") })
  end
  local function malformed(what) return result(500, "rejected", t, { delivery = delivery, detail = where .. ": map returned " .. what }) end
  if type(out) ~= "table" then return malformed("a " .. type(out) .. "; expected {workflow=, id=, input=} or nil, reason") end
  if type(out.workflow) ~= "string" then return malformed("no workflow (a script name in the workflows directory)") end
  if out.id ~= nil and type(out.id) ~= "string" then return malformed("an id that is not a string") end
  if out.input ~= nil and type(out.input) ~= "table" then return malformed("an input that is not a table") end
  local eok, encoded = pcall(json.encode, out.input or {})
  if not eok then return malformed("an input that is not JSON: " .. tostring(encoded)) end
  if out.input ~= nil and next(out.input) ~= nil and encoded:sub(1, 1) ~= "{" then
    return malformed("an input that is a list, not an object")
  end
  local input = out.input ~= nil and next(out.input) ~= nil and json.decode(encoded) or nil -- a plain copy
  -- what its starts may hold: the file's, never what map or the delivery says
  return result(202, "start", t, { delivery = delivery, workflow = out.workflow, id = out.id, input = input,
    starter_grants = #t.grants > 0 and json.encode(t.grants) or "[]" })
end

-- `engine trigger check [DIR]`: the set loads; {ok, dir, hash, routes = {{route, file, kind, secret, secret_set}}}.
function M.check(dir)
  local set, err = M.load_dir(dir)
  if not set then return { ok = false, dir = dir, error = tostring(err) } end
  local routes = {}
  local credential = require("runners.common").credential
  for _, f in ipairs(set.files) do
    for _, t in pairs(set.routes) do
      if t.file == f then
        routes[#routes + 1] = { route = t.route, path = "/hooks/" .. t.route, file = f, kind = t.kind,
          secret = t.secret, secret_set = credential(t.secret) ~= nil, grants = t.grants }
      end
    end
  end
  return { ok = true, dir = dir, hash = set.hash, routes = routes }
end

return M
