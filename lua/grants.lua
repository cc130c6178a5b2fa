-- Grants: what a session may do on the trusted side, as data (docs/grants.md).
-- Pure (no IO, no clock): workflows, activities, policies' callers and the
-- tests share this one reading of a grant.
--
--   grant      = kind ":" [resource ":"] action *( ";" condition )
--   kind       = a lower-case letter, then [a-z0-9_-], at most 32 bytes
--   resource   = part *( "/" part ), at most 512 bytes; a part is 1+ of
--                [A-Za-z0-9._~-] and "*" (one "*" matches 1 or more bytes
--                within its part, never a "/"), never "." or "..", never "**"
--   action     = name *( "." name ), name = 1+ of [A-Za-z0-9_-]; no "*":
--                an action is always named whole
--   condition  = "until=" YYYY-MM-DDTHH:MM:SSZ   (usable before that time, UTC)
--              | "uses=" N                     (1..1000000 uses in a session)
--
-- Only ASCII, at most 700 bytes in all. Resources compare without case (a
-- host, a GitHub repository); kinds and actions are exact. Examples:
--   github:repo/acme/api:pr.review.draft     github:repo/acme/*:pr.review.publish
--   http:api.example.test:GET                mcp:linear:issues.read
--   review:publish;uses=1                    http:*.docs.test:GET;until=2027-01-01T00:00:00Z
--
-- A holder of every grant (the local CLI, an API without tokens) is ALL
-- ("*"), never a grant in a list. A session's grants are what it asked for
-- (input.grants) that its starter holds (input.starterGrants, set by the
-- engine): attenuate keeps an asked grant only when one of the starter's
-- covers it (same kind and action, its resource pattern within the
-- starter's), with the tighter of their conditions.
local M = {}

M.ALL = "*"
M.MAX_BYTES = 700
M.MAX_RESOURCE = 512
M.MAX_USES = 1000000
M.MAX_LIST = 256

local function shown(s)
  s = tostring(s)
  if #s > 80 then s = s:sub(1, 80) .. "..." end
  return (s:gsub("[^\32-\126]", function(c) return string.format("\\x%02x", c:byte()) end))
end

-- Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
local function days_from_civil(y, m, d)
  y = m <= 2 and y - 1 or y
  local era = (y >= 0 and y or y - 399) // 400
  local yoe = y - era * 400
  local doy = (153 * (m + (m > 2 and -3 or 9)) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  return era * 146097 + doe - 719468
end

local function leap(y) return (y % 4 == 0 and y % 100 ~= 0) or y % 400 == 0 end
local MDAYS = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }

-- "2026-12-31T23:59:59Z" -> epoch ms, or nil, why.
function M.parse_time(text)
  local y, mo, d, h, mi, s = tostring(text):match("^(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d):(%d%d)Z$")
  if not y then return nil, "until must be a UTC time like 2026-12-31T23:59:59Z" end
  y, mo, d, h, mi, s = tonumber(y), tonumber(mo), tonumber(d), tonumber(h), tonumber(mi), tonumber(s)
  local dim = mo >= 1 and mo <= 12 and (mo == 2 and leap(y) and 29 or MDAYS[mo]) or 0
  if y < 1970 or mo < 1 or mo > 12 or d < 1 or d > dim or h > 23 or mi > 59 or s > 59 then
    return nil, "until is not a valid time (" .. shown(text) .. ")"
  end
  return ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000 + s * 1000
end

local function check_part(p, where)
  if p == "" then return "an empty part in its resource" .. where end
  if p == "." or p == ".." then return "a '" .. p .. "' part in its resource" .. where end
  if p:find("**", 1, true) then return "'**' in its resource ('*' matches within one part)" .. where end
  local bad = p:match("[^%w%._~%-%*]")
  if bad then return "the character " .. shown(bad) .. " in its resource" .. where end
  return nil
end

-- A grant's text -> {kind, resource (lower case, or nil), action, until_ms,
-- until, uses, text = its canonical form}, or nil and the problem, naming it.
function M.parse(text)
  if type(text) ~= "string" then return nil, "a grant must be a string (got " .. type(text) .. ")" end
  local function bad(why) return nil, "invalid grant \"" .. shown(text) .. "\": " .. why end
  if text == "" then return bad("it is empty") end
  if #text > M.MAX_BYTES then return bad("it is " .. #text .. " bytes, more than " .. M.MAX_BYTES) end
  local nonascii = text:find("[^\32-\126]")
  if nonascii then
    return bad(string.format("byte 0x%02x at %d is not allowed (grants are printable ASCII; a host is written in "
      .. "its xn-- form)", text:byte(nonascii), nonascii))
  end
  local body, conds = text:match("^([^;]*)(.*)$")
  local fields = {}
  for f in (body .. ":"):gmatch("([^:]*):") do fields[#fields + 1] = f end
  if #fields < 2 then return bad("it needs KIND:ACTION or KIND:RESOURCE:ACTION") end
  if #fields > 3 then return bad("it has " .. (#fields - 1) .. " ':' (KIND:RESOURCE:ACTION has at most 2)") end
  local kind, action, resource = fields[1], fields[#fields], fields[3] and fields[2] or nil
  if kind == "" then return bad("its kind is empty") end
  if not kind:match("^[a-z][a-z0-9_%-]*$") or #kind > 32 then
    return bad("its kind \"" .. shown(kind) .. "\" is not 1-32 of a-z 0-9 _ - starting with a letter")
  end
  if action == "" then return bad("its action is empty") end
  if action:find("*", 1, true) then return bad("'*' in its action (an action is named whole)") end
  for name in (action .. "."):gmatch("([^.]*)%.") do
    if name == "" then return bad("an empty name in its action \"" .. shown(action) .. "\"") end
    if not name:match("^[%w_%-]+$") then return bad("its action \"" .. shown(action) .. "\" is not names of "
      .. "A-Z a-z 0-9 _ - joined by '.'") end
  end
  if #action > 64 then return bad("its action is longer than 64 bytes") end
  if resource then
    if #resource > M.MAX_RESOURCE then return bad("its resource is longer than " .. M.MAX_RESOURCE .. " bytes") end
    for p in (resource .. "/"):gmatch("([^/]*)/") do
      local why = check_part(p, "")
      if why then return bad(why) end
    end
    resource = resource:lower()
  end
  local g = { kind = kind, resource = resource, action = action }
  for c in conds:gmatch(";([^;]*)") do
    local k, v = c:match("^([a-z]+)=(.*)$")
    if k == "until" then
      if g.expires then return bad("until is given twice") end
      local ms, why = M.parse_time(v)
      if not ms then return bad(why) end
      g.expires, g.expires_ms = v, ms
    elseif k == "uses" then
      if g.uses then return bad("uses is given twice") end
      local n = v:match("^[1-9]%d*$") and #v <= 7 and tonumber(v)
      if not n or n > M.MAX_USES then return bad("uses must be a whole number from 1 to " .. M.MAX_USES) end
      g.uses = math.tointeger(n)
    else
      return bad("unknown condition \"" .. shown(c) .. "\" (until=TIME, uses=N)")
    end
  end
  if conds ~= "" and not conds:match("^;") then return bad("conditions follow ';'") end
  g.pattern = kind .. ":" .. (resource and (resource .. ":") or "") .. action
  g.text = g.pattern .. (g.expires and (";until=" .. g.expires) or "") .. (g.uses and (";uses=" .. g.uses) or "")
  return g
end

-- A list of grants (strings) -> parsed, or nil and every problem (named
-- with where, e.g. "input.grants[2]").
function M.parse_list(list, where)
  where = where or "grants"
  if type(list) ~= "table" then return nil, { where .. " must be a list of grants" } end
  if #list > M.MAX_LIST then return nil, { where .. " has " .. #list .. " grants, more than " .. M.MAX_LIST } end
  local out, problems = {}, {}
  for i, text in ipairs(list) do
    local g, why = M.parse(text)
    if g then out[#out + 1] = g else problems[#problems + 1] = where .. "[" .. i .. "]: " .. why end
  end
  if #problems > 0 then return nil, problems end
  return out
end

-- Does the glob part p (with "*") match the literal part s? A table of
-- positions, O(#p * #s): no backtracking, whatever the pattern.
local function part_matches(p, s)
  if not p:find("*", 1, true) then return p == s end
  local cur = { [0] = true } -- cur[j]: p[1..i] matches s[1..j]
  for i = 1, #p do
    local c, nxt = p:sub(i, i), {}
    if c == "*" then
      local seen = false
      for j = 0, #s do
        if seen then nxt[j] = true end -- a star takes one byte or more
        if cur[j] then seen = true end
      end
    else
      for j = 1, #s do nxt[j] = cur[j - 1] and s:sub(j, j) == c or nil end
    end
    cur = nxt
  end
  return cur[#s] == true
end

-- Is every string the pattern part a matches also matched by b? a's "*"
-- can only be covered by a "*" of b (which takes 1 or more symbols). The
-- same table, over a's symbols.
local function part_within(a, b)
  local cur = { [0] = true }
  for i = 1, #b do
    local c, nxt = b:sub(i, i), {}
    if c == "*" then
      local seen = false
      for j = 0, #a do
        if seen then nxt[j] = true end
        if cur[j] then seen = true end
      end
    else
      for j = 1, #a do
        local x = a:sub(j, j)
        nxt[j] = cur[j - 1] and x ~= "*" and x == c or nil
      end
    end
    cur = nxt
  end
  return cur[#a] == true
end

local function parts(r)
  local out = {}
  for p in (r .. "/"):gmatch("([^/]*)/") do out[#out + 1] = p end
  return out
end

-- Does grant g cover the concrete need n ({kind, resource, action}), its conditions aside?
function M.covers(g, n)
  if g.kind ~= n.kind or g.action ~= n.action then return false end
  if (g.resource == nil) ~= (n.resource == nil) then return false end
  if not g.resource then return true end
  local gp, np = parts(g.resource), parts(n.resource)
  if #gp ~= #np then return false end
  for i = 1, #gp do
    if not part_matches(gp[i], np[i]) then return false end
  end
  return true
end

-- Is everything grant a allows also allowed by grant b (patterns only)?
function M.within(a, b)
  if a.kind ~= b.kind or a.action ~= b.action then return false end
  if (a.resource == nil) ~= (b.resource == nil) then return false end
  if not a.resource then return true end
  local ap, bp = parts(a.resource), parts(b.resource)
  if #ap ~= #bp then return false end
  for i = 1, #ap do
    if not part_within(ap[i], bp[i]) then return false end
  end
  return true
end

-- A concrete need: what a tool asks for, with no "*" anywhere. Returns
-- {kind, resource, action, text} or nil, why (a tool asked for a wider
-- resource than one thing is refused, never matched).
function M.need(kind, resource, action)
  local text = tostring(kind) .. ":" .. (resource ~= nil and (tostring(resource) .. ":") or "") .. tostring(action)
  if text:find("*", 1, true) then return nil, "a tool cannot ask for \"" .. shown(text) .. "\": '*' names no one thing" end
  local g, why = M.parse(text)
  if not g then return nil, why end
  if text:find(";", 1, true) then return nil, "a need has no conditions (" .. shown(text) .. ")" end
  return { kind = g.kind, resource = g.resource, action = g.action, text = g.pattern }
end

local function tighter(a, b)
  if a == nil then return b end
  if b == nil then return a end
  return math.min(a, b)
end

-- What a session may use: the asked grants (a list of strings, or nil: all
-- the starter holds) within the starter's (ALL, or a list of strings).
-- Returns effective (ALL or a list of canonical strings), dropped (the asked
-- ones the starter does not hold, with why), or nil and the problems.
function M.attenuate(asked, starter)
  local problems = {}
  local held
  if starter ~= M.ALL then
    local why
    held, why = M.parse_list(starter or {}, "starterGrants")
    if not held then for _, p in ipairs(why) do problems[#problems + 1] = p end end
  end
  local want
  if asked ~= nil then
    local why
    want, why = M.parse_list(asked, "grants")
    if not want then for _, p in ipairs(why) do problems[#problems + 1] = p end end
  end
  if #problems > 0 then return nil, problems end
  if starter == M.ALL then
    if asked == nil then return M.ALL, {} end
    local out = {}
    for i, g in ipairs(want) do out[i] = g.text end
    return out, {}
  end
  if asked == nil then
    local out = {}
    for i, g in ipairs(held) do out[i] = g.text end
    return out, {}
  end
  local out, dropped, seen = {}, {}, {}
  for _, a in ipairs(want) do
    local best
    for _, h in ipairs(held) do
      if M.within(a, h) then
        local until_ms, uses = tighter(a.expires_ms, h.expires_ms), tighter(a.uses, h.uses)
        -- the loosest of the starter's grants that cover it
        if not best or (best.expires_ms and (not until_ms or until_ms > best.expires_ms)) or
            (best.uses and (not uses or uses > best.uses)) then
          best = { expires_ms = until_ms, expires = until_ms == a.expires_ms and a.expires or h.expires, uses = uses }
        end
      end
    end
    if best then
      local text = a.pattern .. (best.expires and (";until=" .. best.expires) or "") .. (best.uses and (";uses=" .. best.uses) or "")
      if not seen[text] then
        seen[text] = true
        out[#out + 1] = text
      end
    else
      dropped[#dropped + 1] = { grant = a.text, reason = "the starter holds no grant covering it" }
    end
  end
  return out, dropped
end

-- The first grant of effective (ALL or a list of strings) that may be used
-- for need now: its text, or nil and why (the missing grant named; an
-- expired one; one whose uses are spent). uses: {[grant text] = times used}.
function M.check(effective, need, now_ms, uses)
  if effective == M.ALL then return M.ALL end
  local why
  for _, text in ipairs(effective or {}) do
    local g = M.parse(text)
    if g and M.covers(g, need) then
      if g.expires_ms and now_ms >= g.expires_ms then
        why = why or ("the grant " .. g.text .. " expired at " .. g.expires)
      elseif g.uses and ((uses or {})[g.text] or 0) >= g.uses then
        why = why or string.format("the grant %s is used up (%d of %d uses)", g.text, (uses or {})[g.text] or 0, g.uses)
      else
        return g.text
      end
    end
  end
  return nil, why or ("missing grant " .. need.text)
end

-- Credentials and the grants that may use them: a credential's value is
-- handed to a tool only when the grant its call was allowed by (granted)
-- has that kind (and, for an MCP server's, that server as its resource).
M.CREDENTIAL_KINDS = { GITHUB_TOKEN = "github", GH_TOKEN = "github", ENGINE_PUBLISH_TOKEN = "review" }

-- May a call allowed by granted (a grant's text, ALL, or nil: a session
-- recorded before grants) use the credential name? For an MCP server's
-- credentials, server names it.
function M.may_use(name, granted, server)
  if granted == nil or granted == M.ALL then return true end
  local g = M.parse(granted)
  if not g then return false end
  if server then return g.kind == "mcp" and g.resource == tostring(server):lower() end
  local kind = M.CREDENTIAL_KINDS[name]
  return kind ~= nil and g.kind == kind
end

-- What a session's sub-session may hold (its starterGrants): the session's
-- grants without those limited in uses (counted by the session alone).
function M.handed_down(effective)
  if effective == M.ALL then return M.ALL end
  local out = {}
  for _, text in ipairs(effective or {}) do
    local g = M.parse(text)
    if g and not g.uses then out[#out + 1] = g.text end
  end
  return out
end

-- The session's grants from its input (AgentSessionInput, pr_review's):
-- {effective, dropped, asked} or nil, problems. A session whose starter is
-- unknown (input.starterGrants absent: a script's child) holds nothing it did
-- not get from the script that started it.
function M.of_input(input)
  local starter = input.starterGrants
  if starter ~= nil and starter ~= M.ALL and type(starter) ~= "table" then
    return nil, { "starterGrants must be \"*\" or a list of grants" }
  end
  local effective, dropped = M.attenuate(input.grants, starter or {})
  if not effective then return nil, dropped end
  return { effective = effective, dropped = dropped }
end

return M
