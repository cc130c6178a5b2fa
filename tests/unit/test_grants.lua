-- Tests for lua/grants.lua: the grammar (every bad grant refused, naming its
-- problem), matching a concrete need, attenuation (a session never holds
-- more than its starter), conditions (until, uses), and the credentials a
-- grant may use. Table-driven, with hostile inputs that try to widen.
--   lua5.4 tests/unit/test_grants.lua   (ctest runs it)
local script = arg and arg[0] or "tests/unit/test_grants.lua"
local repo = script:match("^(.*)/tests/unit/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. package.path
local grants = require "grants"

local t = dofile(repo .. "/tests/lua_test.lua")
local ok, eq, has, test = t.ok, t.eq, t.has, t.test

test("good grants parse to their canonical form", function()
  for _, c in ipairs({
    { "github:repo/acme/api:pr.review.draft", "github:repo/acme/api:pr.review.draft" },
    { "github:repo/Acme/*:pr.review.publish", "github:repo/acme/*:pr.review.publish" },
    { "http:API.example.test:GET", "http:api.example.test:GET" },
    { "mcp:linear:issues.read", "mcp:linear:issues.read" },
    { "sandbox:shell", "sandbox:shell" },
    { "review:publish;uses=1", "review:publish;uses=1" },
    { "http:*.docs.test:GET;uses=3;until=2027-01-01T00:00:00Z", "http:*.docs.test:GET;until=2027-01-01T00:00:00Z;uses=3" },
  }) do
    local g, why = grants.parse(c[1])
    ok(g, c[1] .. ": " .. tostring(why))
    eq(g.text, c[2])
  end
end)

test("bad and hostile grants are refused, naming the problem", function()
  local long = "github:repo/" .. string.rep("a", 600) .. ":x"
  for _, c in ipairs({
    { "", "it is empty" },
    { "github", "KIND:ACTION" },
    { "github:repo/acme/api:pr:draft", "has 3 ':'" },
    { ":repo:x", "its kind is empty" },
    { "*:repo/acme/api:pr.review.publish", "its kind" },
    { "GitHub:repo:x", "its kind" },
    { "github:repo/acme/api:*", "'*' in its action" },
    { "github:repo/acme/api:pr.*", "'*' in its action" },
    { "github:repo/acme/api:pr..draft", "an empty name in its action" },
    { "github:repo/acme/api:", "its action is empty" },
    { "github:repo/../api:pr.review.draft", "a '..' part" },
    { "github:repo/./api:pr.review.draft", "a '.' part" },
    { "github:repo//api:pr.review.draft", "an empty part" },
    { "github:repo/acme/:pr.review.draft", "an empty part" },
    { "github:/repo:x", "an empty part" },
    { "github::x", "an empty part" },
    { "github:repo/**:pr.review.draft", "'**'" },
    { "github:repo/acme api:x", "character" },
    { "github:repo/acme%2fapi:x", "character" },
    { "http:bücher.test:GET", "byte 0xc3 at 7" },
    { "http:api.example.test:GET\n", "byte 0x0a" },
    { "http:api.example.test:GET\0", "byte 0x00" },
    { long, "bytes" },
    { "github:repo/" .. string.rep("a", 520) .. ":x", "longer than 512" },
    { "github:repo/a:" .. string.rep("x", 65), "longer than 64" },
    { "review:publish;uses=0", "uses must be" },
    { "review:publish;uses=-1", "uses must be" },
    { "review:publish;uses=1e3", "uses must be" },
    { "review:publish;uses=99999999", "uses must be" },
    { "review:publish;uses=1;uses=2", "twice" },
    { "review:publish;until=tomorrow", "until must be" },
    { "review:publish;until=2026-02-30T00:00:00Z", "not a valid time" },
    { "review:publish;until=2026-12-31T00:00:00+01:00", "until must be" },
    { "review:publish;scope=all", "unknown condition" },
    { "review:publish;", "unknown condition" },
  }) do
    local g, why = grants.parse(c[1])
    ok(not g, "accepted: " .. c[1])
    has(why, c[2], c[1])
    has(why, "invalid grant", c[1])
  end
  local _, why = grants.parse(42)
  has(why, "must be a string")
end)

test("a list names each bad entry by its place", function()
  local l, problems = grants.parse_list({ "sandbox:shell", "x", "github:repo/a:*" }, "input.grants")
  eq(l, nil)
  eq(#problems, 2)
  has(problems[1], "input.grants[2]")
  has(problems[2], "input.grants[3]")
  local _, p = grants.parse_list("sandbox:shell", "input.grants")
  has(p[1], "must be a list")
end)

local function need(k, r, a)
  local n, why = grants.need(k, r, a)
  assert(n, why)
  return n
end

test("matching a concrete need", function()
  local G = function(s) return assert(grants.parse(s)) end
  for _, c in ipairs({
    { "github:repo/acme/api:pr.review.draft", need("github", "repo/acme/api", "pr.review.draft"), true },
    { "github:repo/acme/api:pr.review.draft", need("github", "repo/Acme/API", "pr.review.draft"), true },
    { "github:repo/acme/api:pr.review.draft", need("github", "repo/acme/api", "pr.review.publish"), false },
    { "github:repo/acme/*:pr.review.publish", need("github", "repo/acme/web", "pr.review.publish"), true },
    { "github:repo/acme/*:pr.review.publish", need("github", "repo/acme/web/x", "pr.review.publish"), false },
    { "github:repo/acme/*:pr.review.publish", need("github", "repo/acmex/web", "pr.review.publish"), false },
    { "github:repo/acme/api:pr.review", need("github", "repo/acme/api", "pr.review.draft"), false },
    { "http:*.docs.test:GET", need("http", "a.docs.test", "GET"), true },
    { "http:*.docs.test:GET", need("http", "docs.test", "GET"), false },
    { "http:*.docs.test:GET", need("http", "evil.test", "GET"), false },
    { "http:*.docs.test:GET", need("http", "a.docs.test.evil", "GET"), false },
    { "http:api.example.test:GET", need("http", "api.example.test", "POST"), false },
    { "sandbox:shell", need("sandbox", nil, "shell"), true },
    { "sandbox:shell", need("sandbox", "x", "shell"), false },
    { "mcp:linear:issues.read", need("mcp", "linear", "issues.read"), true },
    { "mcp:linear:issues.read", need("mcp", "linear", "issues.write"), false },
  }) do
    eq(grants.covers(G(c[1]), c[2]), c[3], c[1] .. " vs " .. c[2].text)
  end
end)

test("a need that names more than one thing is refused", function()
  for _, c in ipairs({ { "github", "repo/acme/*", "pr.review.publish" }, { "http", "*", "GET" },
    { "http", "api.test", "*" }, { "github", "repo/../x", "a" }, { "http", "a.test;uses=9", "GET" } }) do
    local n, why = grants.need(c[1], c[2], c[3])
    eq(n, nil, table.concat(c, ":"))
    ok(why)
  end
end)

test("attenuation: a session holds only what its starter holds", function()
  local starter = { "github:repo/acme/*:pr.review.draft", "http:*.docs.test:GET;uses=5", "review:publish;until=2027-01-01T00:00:00Z" }
  local eff, dropped = grants.attenuate({
    "github:repo/acme/api:pr.review.draft",       -- within acme/*
    "github:repo/acme/api:pr.review.publish",     -- another action
    "github:repo/*/api:pr.review.draft",          -- wider than acme/*
    "github:repo/acme/*:pr.review.draft",         -- the same
    "github:repo/acme/*x:pr.review.draft",        -- narrower
    "http:a.docs.test:GET;uses=9",                -- fewer uses than asked
    "http:*.test:GET",                            -- wider
    "review:publish;uses=2",                      -- the starter's time limit joins
    "sandbox:shell",                              -- not held
  }, starter)
  eq(table.concat(eff, " "), "github:repo/acme/api:pr.review.draft github:repo/acme/*:pr.review.draft " ..
    "github:repo/acme/*x:pr.review.draft http:a.docs.test:GET;uses=5 review:publish;until=2027-01-01T00:00:00Z;uses=2")
  local names = {}
  for _, d in ipairs(dropped) do names[#names + 1] = d.grant end
  eq(table.concat(names, " "), "github:repo/acme/api:pr.review.publish github:repo/*/api:pr.review.draft " ..
    "http:*.test:GET sandbox:shell")
end)

test("attenuation: ALL, nothing asked, no starter", function()
  eq(grants.attenuate(nil, grants.ALL), grants.ALL)
  eq(table.concat(grants.attenuate({ "sandbox:shell" }, grants.ALL), " "), "sandbox:shell")
  eq(table.concat(grants.attenuate(nil, { "sandbox:shell" }), " "), "sandbox:shell")
  eq(#grants.attenuate({ "sandbox:shell" }, {}), 0, "a starter holding nothing gives nothing")
  local r = grants.of_input({ grants = { "sandbox:shell" } })
  eq(#r.effective, 0, "no starterGrants: nothing")
  eq(#r.dropped, 1)
  local bad, problems = grants.of_input({ grants = { "x" }, starterGrants = { "y:*" } })
  eq(bad, nil)
  eq(#problems, 2)
  local _, p2 = grants.of_input({ starterGrants = "everything" })
  has(p2[1], "starterGrants")
  -- a hostile input cannot claim ALL in its asked grants
  local _, p3 = grants.attenuate({ "*" }, { "sandbox:shell" })
  has(p3[1], "grants[1]")
end)

test("check: the matched grant, or the missing one named; until and uses", function()
  local n = need("github", "repo/acme/api", "pr.review.publish")
  local g, why = grants.check({ "github:repo/acme/api:pr.review.draft" }, n, 0, {})
  eq(g, nil)
  eq(why, "missing grant github:repo/acme/api:pr.review.publish")
  eq(grants.check({ "github:repo/acme/*:pr.review.publish" }, n, 0, {}), "github:repo/acme/*:pr.review.publish")
  eq(grants.check(grants.ALL, n, 0, {}), grants.ALL)
  local t0 = grants.parse_time("2027-01-01T00:00:00Z")
  eq(t0, 1798761600000)
  local eff = { "github:repo/acme/api:pr.review.publish;until=2027-01-01T00:00:00Z" }
  ok(grants.check(eff, n, t0 - 1, {}))
  g, why = grants.check(eff, n, t0, {})
  eq(g, nil)
  has(why, "expired at 2027-01-01T00:00:00Z")
  eff = { "github:repo/acme/api:pr.review.publish;uses=2", "github:repo/acme/*:pr.review.publish;uses=1" }
  eq(grants.check(eff, n, 0, { [eff[1]] = 1 }), eff[1])
  eq(grants.check(eff, n, 0, { [eff[1]] = 2 }), eff[2], "the next grant covering it")
  g, why = grants.check(eff, n, 0, { [eff[1]] = 2, [eff[2]] = 1 })
  eq(g, nil)
  has(why, "used up (2 of 2 uses)")
end)

test("credentials go only with a grant of their kind", function()
  ok(grants.may_use("GITHUB_TOKEN", "github:repo/acme/api:pr.review.draft"))
  ok(not grants.may_use("GITHUB_TOKEN", "http:api.github.com:GET"))
  ok(not grants.may_use("GITHUB_TOKEN", "review:publish"))
  ok(grants.may_use("ENGINE_PUBLISH_TOKEN", "review:publish"))
  ok(not grants.may_use("OPENAI_API_KEY", "review:publish"), "a credential bound to no kind")
  ok(grants.may_use("LINEAR_KEY", "mcp:linear:issues.read", "linear"))
  ok(not grants.may_use("LINEAR_KEY", "mcp:other:issues.read", "linear"))
  ok(not grants.may_use("GITHUB_TOKEN", "not a grant"))
  ok(grants.may_use("GITHUB_TOKEN", grants.ALL))
end)

test("long and repeated input stays cheap", function()
  local star = "http:" .. string.rep("*a", 200) .. ":GET"
  local g = assert(grants.parse(star))
  local n = need("http", string.rep("a", 511), "GET")
  eq(grants.covers(g, n), true, "400 symbols of pattern over 511 bytes, without backtracking")
  eq(grants.covers(g, need("http", string.rep("a", 399), "GET")), false)
  local b = assert(grants.parse("http:" .. string.rep("a*", 200) .. ":GET"))
  eq(grants.within(g, g), true)
  eq(grants.within(b, g), false, "a*... starts with a byte *a... need not")
  eq(grants.within(assert(grants.parse("http:" .. string.rep("a", 400) .. ":GET")), g), true)
  local list = {}
  for i = 1, 300 do list[i] = "sandbox:shell" end
  local l, p = grants.parse_list(list)
  eq(l, nil)
  has(p[1], "more than 256")
end)

t.finish()
