-- The JSON Schema `pattern` subset (lua/jsonschema.lua): what matches as ECMA
-- regular expressions match, and what is refused rather than read another way.
--   lua5.4 tests/integration/schema_patterns.lua SRC
package.path = arg[1] .. "/lua/?.lua;" .. package.path
local js = require "jsonschema"
local bad = 0
local function check(what, got, want)
  if got ~= want then
    bad = bad + 1
    print(string.format("FAIL: %s: got %s, want %s", what, tostring(got), tostring(want)))
  end
end

-- pattern, string, matches (as an ECMA RegExp's test() would say)
local MATCHES = {
  { "^[a-z0-9-]+$", "pr-12", true }, { "^[a-z0-9-]+$", "PR-12", false }, { "^[a-z0-9-]+$", "", false },
  { "a+", "xay", true }, { "a+", "xyz", false }, { "", "anything", true },
  { "^\\d{4}-\\d{2}-\\d{2}$", "2024-01-31", true }, { "^\\d{4}-\\d{2}-\\d{2}$", "2024-1-31", false },
  { "^\\d{4}-\\d{2}-\\d{2}$", "2024-01-311", false },
  { "^a{2,3}$", "a", false }, { "^a{2,3}$", "aa", true }, { "^a{2,3}$", "aaa", true }, { "^a{2,3}$", "aaaa", false },
  { "^a{2,}$", "aaaaa", true }, { "^a{2,}$", "a", false }, { "^ab?c$", "ac", true }, { "^ab?c$", "abbc", false },
  { "^a.c$", "abc", true }, { "^a.c$", "a\nc", false }, { "^a.c$", "aéc", true }, { "^.{3}$", "héé", true },
  { "^\\w+$", "snake_case9", true }, { "^\\w+$", "kebab-case", false }, { "^\\W$", "-", true },
  { "^\\s*$", " \t\n", true }, { "\\S", "   ", false }, { "^\\D+$", "abc", true }, { "^\\D+$", "a1", false },
  { "^[^0-9]+$", "abc", true }, { "^[^0-9]+$", "ab1", false }, { "^[\\d.]+$", "1.2.3", true },
  { "^[a\\-z]$", "-", true }, { "^[a\\-z]$", "b", false }, { "^[-a]$", "-", true }, { "^[a-]$", "-", true },
  { "^\\$\\d+\\.\\d\\d$", "$10.50", true }, { "^\\$\\d+\\.\\d\\d$", "10.50", false },
  { "^\\u00e9$", "é", true }, { "^\\x41$", "A", true }, { "^a+?$", "aaa", true },
  { "%d", "%d", true }, { "%d", "5", false }, -- not a Lua pattern: "%" is a literal
  { "^[%w]+$", "w%", true }, { "^[%w]+$", "abc", false },
  { "b$", "ab", true }, { "b$", "ba", false }, { "^b", "ba", true }, { "^b", "ab", false },
}
for _, c in ipairs(MATCHES) do
  if c[2] ~= nil then
    check(string.format("/%s/.test(%q)", c[1], c[2]), js.pattern_find(c[1], c[2]), c[3])
  end
end

-- refused, with the reason
local REFUSED = {
  { "(a|b)", "groups are not supported" }, { "^(?:x)$", "groups are not supported" },
  { "a|b", "alternation (|) is not supported" }, { "(\\w)\\1", "groups are not supported" },
  { "\\1", "backreferences" }, { "\\bword\\b", "word boundaries" }, { "a^b", "^ is supported only at the start" },
  { "a$b", "$ is supported only at the end" }, { "*a", "nothing to repeat" }, { "[abc", "a [ without its ]" },
  { "[]", "an empty class" }, { "[z-a]", "a range out of order" }, { "a{1001}", "a repeat count above 1000" },
  { "a{3,2}", "m < n" }, { "a{x}", "a { must be a repeat count" }, { "\\p{L}", "the escape \\p is not supported" },
  { "a}", "a lone }" }, { "\\", "ends with a lone" }, { "[\\d-z]", "a range cannot start or end with a class escape" },
}
for _, c in ipairs(REFUSED) do
  local m, why = js.pattern_find(c[1], "x")
  check(string.format("/%s/ is refused", c[1]), m, nil)
  check(string.format("/%s/: why", c[1]), why and why:find(c[2], 1, true) ~= nil, true)
end

-- no backtracking: a pattern that takes exponential time in a backtracking
-- matcher answers at once (the count of instructions is bounded, not timed)
local evil = string.rep("a?", 30) .. string.rep("a", 30)
local steps = 0
debug.sethook(function() steps = steps + 1 end, "", 1000)
check("a?^30 a^30 against a^30", js.pattern_find("^" .. evil .. "$", string.rep("a", 30)), true)
check("a?^30 a^30 against a^29", js.pattern_find("^" .. evil .. "$", string.rep("a", 29)), false)
debug.sethook()
check("a?^30 a^30 took a bounded number of steps", steps < 20000, true)

-- check_schema: the schema itself
local ok, errs = js.check_schema({ type = "object", properties = { id = { type = "string", pattern = "^[a-z]+$",
  minLength = 3.0 } }, required = { "id" } }, "resultSchema")
check("a schema of supported keywords (a length as the float 3.0, as JSON gives it)", ok, true)
ok, errs = js.check_schema({ type = "object", properties = { d = { type = "string", format = "date" },
  e = { type = "string", pattern = "(x|y)" } }, items = { { type = "string" } } }, "resultSchema")
check("a schema with unknown keywords and patterns is refused", ok, nil)
local all = table.concat(errs or {}, "\n")
for _, want in ipairs({ "resultSchema.properties.d.format: unsupported keyword",
  "resultSchema.properties.e.pattern: unsupported pattern \"(x|y)\": groups are not supported",
  "resultSchema.items: must be one schema" }) do
  check("names: " .. want, all:find(want, 1, true) ~= nil, true)
end
-- validate(): a value against an ECMA pattern
local vok, verrs = js.validate({ type = "string", pattern = "^\\d+$" }, "12a", "result")
check("validate: a string that does not match", vok, nil)
check("validate: says so", (verrs or {})[1], "result: does not match the pattern ^\\d+$")
check("validate: a string that matches", (js.validate({ type = "string", pattern = "^\\d+$" }, "12")), true)

if bad > 0 then print(bad .. " pattern check(s) failed") os.exit(1) end
print("all pattern checks passed")
