-- fuzz_triggers: lua/triggers.lua's dispatch of a webhook delivery (what
-- POST /hooks/{name} hands it: the route, the headers as received, the body)
-- through the shipped trigger (workflows/triggers/github.lua) and the test
-- triggers (tests/integration/hooks/triggers/: github, Standard Webhooks,
-- Stripe-style and Bearer checks, and one that misbehaves on request).
--
-- The input: a line with the route, a line of flags ("s": the harness signs
-- the delivery with the trigger's secret, replacing any signature header the
-- input has), then "Name: value" header lines up to an empty line, then the
-- body (every byte). Properties:
--   - deliver never raises and answers {status, outcome, trigger, ...} with a
--     status of the route's set and the outcome it implies (202 start, 200
--     ignored, else rejected with a detail); a start has a workflow name, an
--     id that is nil or a string, an input that is nil or a plain JSON object,
--     a delivery id of at most 200 bytes;
--   - unsigned, nothing passes verification: the secrets are the harness's
--     (no forgery through header or body parsing);
--   - signed, the answer is the one without verification (verification
--     changes nothing but the gate);
--   - the same delivery twice gives the same answer (map is pure), and so do
--     the header names in upper case, and the headers as a name -> value map
--     instead of the received list when no name repeats.
-- FUZZ_VERBOSE=1 prints each delivery's answer.
local fuzz = require "fuzz"
local json = require "json"
-- runners.common (the credentials) loads http: a trigger never reaches it
package.preload["http"] = function()
  return { request = function() fuzz.fail("a delivery made an HTTP request") end }
end
package.preload["activity"] = function() return { heartbeat = function() end, sleep = function() end } end
local triggers = require "triggers"
local common = require "runners.common"

local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]+$")
local repo = here .. "/../../.."
local TEST_DIR = repo .. "/tests/integration/hooks/triggers"
local SHIPPED_DIR = repo .. "/workflows/triggers"
local NOW = 1700000000
local VERBOSE = os.getenv("FUZZ_VERBOSE") == "1" -- one line per delivery

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function base64(s)
  return (s:gsub("..?.?", function(c)
    local a, b, d = c:byte(1, 3)
    local n = a << 16 | (b or 0) << 8 | (d or 0)
    local out = {}
    for i = 1, 4 do
      local k = (n >> (6 * (4 - i))) & 63
      out[i] = B64:sub(k + 1, k + 1)
    end
    if not b then out[3], out[4] = "=", "=" elseif not d then out[4] = "=" end
    return table.concat(out)
  end))
end
local function hex(s) return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end)) end

-- what runners.common.credential finds: secrets no input can contain
local STD_KEY = "fuzz-std-key-7c1f0e9a55d2b3"
local SECRETS = {
  TEST_GH_SECRET = "fuzz-gh-secret-19d0c2f7a4",
  GITHUB_WEBHOOK_SECRET = "fuzz-shipped-secret-5be01d",
  TEST_STD_SECRET = "whsec_" .. base64(STD_KEY),
  TEST_STRIPE_SECRET = "fuzz-stripe-secret-a8e3",
  TEST_BEARER_TOKEN = "fuzz-bearer-token-31f9c6",
}
common.credential = function(name) return SECRETS[name] end

local ROUTES = { gh = TEST_DIR, hostile = TEST_DIR, std = TEST_DIR, stripe = TEST_DIR, ci = TEST_DIR,
  github = SHIPPED_DIR }
for _, dir in ipairs({ TEST_DIR, SHIPPED_DIR }) do
  local set, err = triggers.in_force(dir)
  if not set then error("fuzz_triggers: the triggers in " .. dir .. " do not load: " .. tostring(err)) end
end

-- Replaces (or adds) header name in the list.
local function set_header(list, name, value)
  for i = #list, 1, -1 do
    if list[i][1]:lower() == name then table.remove(list, i) end
  end
  list[#list + 1] = { name, value }
end

local function sign(route, list, body)
  local kind = route == "std" and "standard" or route == "stripe" and "stripe" or route == "ci" and "bearer"
    or "github"
  if kind == "github" then
    local secret = route == "github" and SECRETS.GITHUB_WEBHOOK_SECRET or SECRETS.TEST_GH_SECRET
    set_header(list, "x-hub-signature-256", "sha256=" .. hex(fuzz.hmac_sha256(secret, body)))
  elseif kind == "stripe" then
    local mac = fuzz.hmac_sha256(SECRETS.TEST_STRIPE_SECRET, NOW .. "." .. body)
    set_header(list, "stripe-signature", "t=" .. NOW .. ",v1=" .. hex(mac))
  elseif kind == "standard" then
    local id
    for _, h in ipairs(list) do
      if h[1]:lower() == "webhook-id" then id = h[2] end
    end
    id = (id and id ~= "" and not id:find(".", 1, true)) and id or "msg_fuzz"
    set_header(list, "webhook-id", id)
    set_header(list, "webhook-timestamp", tostring(NOW))
    set_header(list, "webhook-signature", "v1," .. base64(fuzz.hmac_sha256(STD_KEY, id .. "." .. NOW .. "." .. body)))
  else
    set_header(list, "authorization", "Bearer " .. SECRETS.TEST_BEARER_TOKEN)
  end
end

-- A canonical text of a Lua value (sorted keys), to compare answers.
local function canon(v, depth)
  depth = depth or 0
  if depth > 40 then fuzz.fail("an answer nested deeper than 40") end
  local t = type(v)
  if t == "table" then
    if getmetatable(v) ~= nil then fuzz.fail("an answer holds a table with a metatable") end
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    local out = {}
    for i, k in ipairs(keys) do out[i] = canon(k, depth + 1) .. "=" .. canon(v[k], depth + 1) end
    return "{" .. table.concat(out, ",") .. "}"
  elseif t == "string" then
    return string.format("%q", v)
  elseif t == "number" or t == "boolean" then
    return tostring(v)
  elseif v == nil or v == json.null then
    return "null"
  end
  fuzz.fail("an answer holds a " .. t)
end

local OUTCOME = { [202] = "start", [200] = "ignored" }
local STATUSES = { [200] = true, [202] = true, [400] = true, [401] = true, [404] = true, [500] = true }

local function deliver(args)
  local ok, r = pcall(triggers.deliver, args)
  if not ok then fuzz.fail("triggers.deliver raised: " .. tostring(r)) end
  if type(r) ~= "table" then fuzz.fail("triggers.deliver returned a " .. type(r)) end
  if not STATUSES[r.status] then fuzz.fail("status " .. tostring(r.status)) end
  if r.outcome ~= (OUTCOME[r.status] or "rejected") then
    fuzz.fail("status " .. r.status .. " with outcome " .. tostring(r.outcome))
  end
  if type(r.trigger) ~= "string" then fuzz.fail("no trigger in the answer") end
  if r.outcome ~= "start" and (type(r.detail) ~= "string" or r.detail == "") then
    fuzz.fail("a " .. r.outcome .. " delivery without a detail")
  end
  if r.delivery ~= nil and (type(r.delivery) ~= "string" or #r.delivery > 200) then
    fuzz.fail("a delivery id that is not a string of at most 200 bytes")
  end
  if r.outcome == "start" then
    if type(r.workflow) ~= "string" then fuzz.fail("a start without a workflow") end
    if r.id ~= nil and type(r.id) ~= "string" then fuzz.fail("a start with an id that is a " .. type(r.id)) end
    if r.input ~= nil then
      if type(r.input) ~= "table" then fuzz.fail("a start with an input that is a " .. type(r.input)) end
      local eok, text = pcall(json.encode, r.input)
      if not eok or text:sub(1, 1) ~= "{" then fuzz.fail("a start with an input that is no JSON object") end
    end
  end
  return r, canon(r)
end

return function(data)
  local route, flags, rest = data:match("^([^\n]*)\n([^\n]*)\n(.*)$")
  if not route then return end
  local list, pos = {}, 1
  while true do
    local line_end = rest:find("\n", pos, true)
    if not line_end then rest = rest:sub(pos); pos = nil; break end
    local line = rest:sub(pos, line_end - 1)
    pos = line_end + 1
    if line == "" then break end
    local name, value = line:match("^([!#$%%&'*+%-.^_`|~%w]+):[ \t]*(.-)[ \t]*$")
    if name and #list < 64 then list[#list + 1] = { name, value } end
  end
  local body = pos and rest:sub(pos) or ""
  local dir = ROUTES[route] or TEST_DIR
  local signed = flags:find("s", 1, true) ~= nil
  if signed and ROUTES[route] then sign(route, list, body) end

  local function args(header_list, verify, headers)
    return { dir = dir, name = route, header_list = header_list, headers = headers, body = body, now = NOW,
      verify = verify }
  end
  local r, text = deliver(args(list, true))
  if VERBOSE then io.stderr:write(string.format("fuzz_triggers: %s -> %d %s %s\n", route, r.status, r.outcome,
    tostring(r.detail or r.workflow))) end
  if ROUTES[route] == nil then
    if r.status ~= 404 then fuzz.fail("route " .. string.format("%q", route) .. " answered " .. r.status) end
    return
  end
  if not signed and r.status ~= 401 then
    fuzz.fail("an unsigned delivery passed verification: " .. r.status .. " " .. tostring(r.detail))
  end
  local _, again = deliver(args(list, true))
  if again ~= text then fuzz.fail("the same delivery twice gave two answers:\n" .. text .. "\n" .. again) end
  if not signed then return end
  if r.status == 401 then fuzz.fail("a delivery the harness signed was refused: " .. tostring(r.detail)) end

  local _, unverified = deliver(args(list, false))
  if unverified ~= text then fuzz.fail("verification changed the answer:\n" .. text .. "\n" .. unverified) end
  local upper, map, repeated = {}, {}, false
  for i, h in ipairs(list) do
    upper[i] = { h[1]:upper(), h[2] }
    local k = h[1]:lower()
    if map[k] then repeated = true end
    map[k] = h[2]
  end
  local _, cased = deliver(args(upper, true))
  if cased ~= text then fuzz.fail("header names in upper case gave another answer:\n" .. text .. "\n" .. cased) end
  if not repeated then
    local _, mapped = deliver(args(nil, true, map))
    if mapped ~= text then fuzz.fail("the headers as a map gave another answer:\n" .. text .. "\n" .. mapped) end
  end
end
