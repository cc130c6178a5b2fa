-- Tests for lua/skills.lua and the shipped skills.
--   lua5.4 tests/skills/test_skills.lua      (from any directory; exits non-zero on failure)
-- Fixtures live in one directory made with mktemp -d, removed at the end.

local function script_path()
  local src = debug.getinfo(1, "S").source
  if src:sub(1, 1) == "@" then return src:sub(2) end
  return arg and arg[0] or "tests/skills/test_skills.lua"
end

local function dir_of(p) return p:match("^(.*)/[^/]*$") or "." end
-- the harness, beside this file's parent directory
local t = dofile(dir_of(dir_of(script_path())) .. "/lua_test.lua")
local shell_quote, capture, sh = t.shell_quote, t.capture, t.sh
local fail, ok, show, eq, has, hasnt, same_list, test = t.fail, t.ok, t.show, t.eq, t.has, t.hasnt, t.same_list, t.test

local function repo_root()
  local p = script_path()
  if p:sub(1, 1) ~= "/" then p = capture("pwd -P") .. "/" .. p end
  local dir = p:match("^(.*)/[^/]*$") -- tests/skills
  return capture("cd " .. shell_quote(dir .. "/../..") .. " && pwd -P")
end

local ROOT = repo_root()
package.path = ROOT .. "/lua/?.lua;" .. package.path
-- the native fs module: build/fs.so (ctest sets LUA_CPATH_5_4 to its build directory)
package.cpath = package.cpath .. ";" .. ROOT .. "/build/?.so"
local skills = require "skills"
local SHIPPED = ROOT .. "/skills"

-- ---------------------------------------------------------------------------
-- Fixtures

local TMP = t.tmpdir("skills-test")

local function mkdir(p) sh("mkdir -p -- " .. shell_quote(p)) end

local made = {} -- the folders write has made: one `mkdir -p` each, not one per file (2,000 files below)
local function write(path, content)
  local dir = path:match("^(.*)/[^/]*$")
  if not made[dir] then mkdir(dir); made[dir] = true end
  local f = assert(io.open(path, "wb"))
  f:write(content)
  f:close()
end

local n_roots = 0
-- A fresh skills root with the given skills: {name = SKILL.md text or {files}}.
local function root_with(tree)
  n_roots = n_roots + 1
  local root = TMP .. "/root" .. n_roots
  mkdir(root)
  for dir, content in pairs(tree) do
    if type(content) == "string" then write(root .. "/" .. dir .. "/SKILL.md", content)
    else
      mkdir(root .. "/" .. dir)
      for rel, text in pairs(content) do write(root .. "/" .. dir .. "/" .. rel, text) end
    end
  end
  return root
end

local function skill_md(name, description, extra)
  return "---\nname: " .. name .. "\ndescription: " .. description .. "\n" .. (extra or "") .. "---\n# " .. name .. "\n\nBody text.\n"
end

local function parse_ok(text)
  local meta, body = skills.parse(text)
  if not meta then fail("parse failed: " .. tostring(body), 2) end
  return meta, body
end

local function parse_err(text, ...)
  local meta, err = skills.parse(text)
  if meta then fail("parse should have failed", 2) end
  for _, sub in ipairs({ ... }) do
    if not err:find(sub, 1, true) then fail("expected parse error " .. show(err) .. " to contain " .. show(sub), 2) end
  end
  return err
end

local function fm(lines) return "---\n" .. lines .. "---\nbody\n" end

-- ---------------------------------------------------------------------------
-- Shipped skills

test("shipped skills load and validate", function()
  for _, name in ipairs({ "code-review", "incident-investigation" }) do
    local s, err = skills.load(SHIPPED, name)
    ok(s, err)
    eq(s.name, name)
    eq(s.dir, SHIPPED .. "/" .. name, "dir is absolute")
    ok(#s.description > 100 and #s.description <= 1024, "description length " .. #s.description)
    has(s.description, "Use when", name .. " description says when to use it")
    has(s.description, "/workspace/output/", name .. " description names the output")
    eq(s.metadata.version, "1.0")
    eq(type(s.allowed_tools), "table")
    ok(s.bytes > 1000, "bytes counted")
    local sorted = {}
    for i, f in ipairs(s.files) do sorted[i] = f end
    table.sort(sorted)
    same_list(s.files, sorted, "files sorted")
    local f = assert(io.open(SHIPPED .. "/" .. name .. "/SKILL.md", "rb"))
    local meta, body = skills.parse(f:read("a"))
    f:close()
    ok(meta, body)
    local vok, verr = skills.validate(meta, name)
    ok(vok, verr)
    ok(#body > 2000, name .. " has a substantial body")
  end
end)

test("shipped skills ship their files", function()
  local cr = assert(skills.load(SHIPPED, "code-review"))
  same_list(cr.files, { "SKILL.md", "references/checklist.md", "scripts/diff_summary.py" })
  local ii = assert(skills.load(SHIPPED, "incident-investigation"))
  same_list(ii.files, { "SKILL.md", "references/failure-patterns.md", "references/timeline-template.md",
    "scripts/log_timeline.py" })
end)

test("shipped skill bodies point at their files and outputs", function()
  local function read(p) local f = assert(io.open(SHIPPED .. "/" .. p, "rb")); local t = f:read("a"); f:close(); return t end
  local cr = read("code-review/SKILL.md")
  for _, s in ipairs({ "references/checklist.md", "scripts/diff_summary.py", "/workspace/output/review.json",
    "blocker", "major", "minor", "nit", "request_changes", "approve", "\"suggestion\"", "safe.directory" }) do
    has(cr, s, "code-review SKILL.md")
  end
  local ii = read("incident-investigation/SKILL.md")
  for _, s in ipairs({ "references/timeline-template.md", "references/failure-patterns.md", "scripts/log_timeline.py",
    "/workspace/output/incident.json", "root_cause", "contributing_factors", "open_questions", "remediation",
    "Blameless", "Trigger" }) do
    has(ii, s, "incident-investigation SKILL.md")
  end
end)

test("list finds both shipped skills without errors", function()
  local list, errors = skills.list(SHIPPED)
  eq(#errors, 0, "errors: " .. (errors[1] and errors[1].error or ""))
  local names = {}
  for i, s in ipairs(list) do names[i] = s.name end
  same_list(names, { "code-review", "incident-investigation" })
end)

test("select loads in order and dedupes", function()
  local list, err = skills.select(SHIPPED, { "incident-investigation", "code-review", "incident-investigation" })
  ok(list, err)
  eq(#list, 2)
  eq(list[1].name, "incident-investigation")
  eq(list[2].name, "code-review")
  local empty = assert(skills.select(SHIPPED, {}))
  eq(#empty, 0)
  eq(#assert(skills.select(SHIPPED, nil)), 0, "nil selects nothing")
end)

test("prompt section has names and descriptions, not bodies", function()
  local list = assert(skills.select(SHIPPED, { "code-review", "incident-investigation" }))
  local p = skills.prompt_section(list)
  ok(p:sub(1, 10) == "## Skills\n", "starts with the heading")
  has(p, "/workspace/skills/<name>/")
  has(p, "read-only")
  has(p, "SKILL.md")
  has(p, "\n- code-review: Review a code change")
  has(p, "\n- incident-investigation: Investigate a production incident")
  for _, s in ipairs(list) do has(p, (s.description:gsub("%s+", " "):gsub("%s$", ""))) end
  hasnt(p, "# Code review", "no body")
  hasnt(p, "What not to do", "no body")
  hasnt(p, "checklist.md", "no file contents")
  local lines = 0
  for l in p:gmatch("[^\n]+") do if l:match("^%- ") then lines = lines + 1 end end
  eq(lines, 2, "one line per skill")
  eq(skills.prompt_section({}), "", "empty list")
  eq(skills.prompt_section(nil), "", "nil")
end)

-- ---------------------------------------------------------------------------
-- Names

test("validate refuses bad names with the reason", function()
  local function bad(name, dirname, reason)
    local okv, err = skills.validate({ name = name, description = "d" }, dirname)
    ok(not okv, "name " .. show(name) .. " should be refused")
    has(err, reason)
    return err
  end
  has(bad("Code-Review", "Code-Review", "uppercase"), "'Code-Review'")
  bad("-abc", "-abc", "starts with a hyphen")
  bad("abc-", "abc-", "ends with a hyphen")
  bad("a--b", "a--b", "consecutive hyphens")
  bad(string.rep("a", 65), string.rep("a", 65), "65 characters")
  bad("a_b", "a_b", "characters other than")
  bad("", "", "empty")
  bad("good", "other", "does not match its directory 'other'")
  ok(skills.validate({ name = string.rep("a", 64), description = "d" }, string.rep("a", 64)), "64 chars ok")
  ok(skills.validate({ name = "a1-b2-c3", description = "d" }, "a1-b2-c3"))
  ok(skills.validate({ name = "x", description = "d" }), "no dirname given")
end)

test("load refuses bad names from disk", function()
  local root = root_with({
    ["Upper"] = skill_md("Upper", "d"),
    ["-lead"] = skill_md("-lead", "d"),
    ["dbl--hyphen"] = skill_md("dbl--hyphen", "d"),
    [string.rep("b", 65)] = skill_md(string.rep("b", 65), "d"),
    ["mismatch"] = skill_md("other-name", "d"),
  })
  local _, e1 = skills.load(root, "Upper")
  has(e1, "uppercase")
  local _, e2 = skills.load(root, "-lead")
  has(e2, "starts with a hyphen")
  local _, e3 = skills.load(root, "dbl--hyphen")
  has(e3, "consecutive hyphens")
  local _, e4 = skills.load(root, string.rep("b", 65))
  has(e4, "65 characters")
  local s5, e5 = skills.load(root, "mismatch")
  ok(not s5)
  has(e5, "invalid skill 'other-name'")
  has(e5, "does not match its directory 'mismatch'")
end)

test("traversal in the requested name is refused", function()
  local root = root_with({ ["ok-skill"] = skill_md("ok-skill", "d") })
  write(TMP .. "/etc/SKILL.md", skill_md("etc", "d"))
  for _, name in ipairs({ "../etc", "..", ".", "a/b", "/etc", "ok-skill/../ok-skill", "ok-skill\n", "" }) do
    local s, err = skills.load(root, name)
    ok(not s, "name " .. show(name) .. " should be refused")
    has(err, "invalid skill name")
  end
  local _, err = skills.load(root, "../etc")
  has(err, "'../etc'")
  local s, e = skills.select(root, { "../etc" })
  ok(not s)
  has(e, "invalid skill name '../etc'")
  local _, e6 = skills.load(root, 42)
  has(e6, "must be a string")
end)

-- ---------------------------------------------------------------------------
-- Descriptions and fields

test("missing and empty description are refused", function()
  local root = root_with({
    ["no-desc"] = "---\nname: no-desc\n---\nbody\n",
    ["empty-desc"] = "---\nname: empty-desc\ndescription:\n---\nbody\n",
    ["blank-desc"] = "---\nname: blank-desc\ndescription: '   '\n---\nbody\n",
  })
  local _, e1 = skills.load(root, "no-desc")
  has(e1, "invalid skill 'no-desc'")
  has(e1, "description is required")
  local _, e2 = skills.load(root, "empty-desc")
  has(e2, "description is empty")
  local _, e3 = skills.load(root, "blank-desc")
  has(e3, "description is empty")
end)

test("description length limit is 1024 characters", function()
  local root = root_with({
    ["long-desc"] = skill_md("long-desc", string.rep("x", 1025)),
    ["max-desc"] = skill_md("max-desc", string.rep("y", 1024)),
    ["utf8-desc"] = skill_md("utf8-desc", string.rep("\195\169", 1024)), -- 1024 characters, 2048 bytes
  })
  local s, err = skills.load(root, "long-desc")
  ok(not s)
  has(err, "invalid skill 'long-desc'")
  has(err, "1025 characters")
  has(err, "at most 1024")
  ok(skills.load(root, "max-desc"))
  ok(skills.load(root, "utf8-desc"), "characters, not bytes")
  local okv, e2 = skills.validate({ name = "x", description = "\255\254" }, "x")
  ok(not okv)
  has(e2, "not valid UTF-8")
end)

test("unknown field is refused naming the line", function()
  local root = root_with({ ["extra-field"] = "---\nname: extra-field\ndescription: d\nauthor: me\n---\nbody\n" })
  local s, err = skills.load(root, "extra-field")
  ok(not s)
  has(err, "skill 'extra-field'")
  has(err, "line 4")
  has(err, "unknown field 'author'")
  local okv, e2 = skills.validate({ name = "x", description = "d", version = "1" }, "x")
  ok(not okv)
  has(e2, "unknown field 'version'")
end)

test("validate lists every problem", function()
  local okv, err = skills.validate({
    name = "Bad_Name", compatibility = string.rep("c", 501), license = 3,
    metadata = { a = "b", n = 1 }, ["allowed-tools"] = { "Read", 7 },
  }, "dir")
  ok(not okv)
  has(err, "invalid skill 'Bad_Name'")
  has(err, "name 'Bad_Name' has uppercase letters")
  has(err, "description is required")
  has(err, "compatibility is 501 characters")
  has(err, "license must be a string")
  has(err, "metadata.n must be a string")
  has(err, "allowed-tools[2] must be a non-empty string")
  local okv2, err2 = skills.validate({ name = "x", description = "d", ["allowed-tools"] = "Read" }, "x")
  ok(not okv2)
  has(err2, "allowed-tools must be a list of strings")
  local okv3, err3 = skills.validate({ name = "x", description = "d", metadata = { "a" } }, "x")
  ok(not okv3)
  has(err3, "metadata key 1 must be a string")
  ok(skills.validate({ name = "x", description = "d", compatibility = string.rep("c", 500) }, "x"))
  local okv4, err4 = skills.validate("nope", "dir")
  ok(not okv4)
  has(err4, "'dir'")
end)

test("optional fields reach the loaded skill", function()
  local root = root_with({ ["full"] = { ["SKILL.md"] = table.concat({
    "---",
    "name: full",
    "description: Does things. Use when things need doing.",
    "license: Apache-2.0",
    "compatibility: Needs git.",
    "metadata:",
    "  author: example-org",
    "  version: \"2.1\"",
    "allowed-tools: Read Bash(git:*)",
    "---",
    "# Full", "" }, "\n"),
    ["scripts/run.sh"] = "echo hi\n", ["references/REF.md"] = "ref\n", ["assets/t.txt"] = "0123456789" } })
  local s, err = skills.load(root, "full")
  ok(s, err)
  eq(s.license, "Apache-2.0")
  eq(s.compatibility, "Needs git.")
  eq(s.metadata.author, "example-org")
  eq(s.metadata.version, "2.1")
  same_list(s.allowed_tools, { "Read", "Bash(git:*)" })
  same_list(s.files, { "SKILL.md", "assets/t.txt", "references/REF.md", "scripts/run.sh" })
  local f = assert(io.open(root .. "/full/SKILL.md", "rb"))
  local size = #f:read("a")
  f:close()
  eq(s.bytes, size + 8 + 4 + 10)
  eq(s.dir, root .. "/full")
end)

-- ---------------------------------------------------------------------------
-- Files on disk

test("missing SKILL.md is refused", function()
  local root = root_with({ ["no-file"] = { ["README.md"] = "hi\n" }, ["lower"] = { ["skill.md"] = skill_md("lower", "d") } })
  local s, err = skills.load(root, "no-file")
  ok(not s)
  has(err, "skill 'no-file'")
  has(err, "missing SKILL.md")
  local _, e2 = skills.load(root, "lower")
  has(e2, "case-sensitive")
  local _, e3 = skills.load(root, "not-there")
  has(e3, "skill 'not-there': not found")
  write(root .. "/a-file", "x")
  local _, e4 = skills.load(root, "a-file")
  has(e4, "is not a directory")
  mkdir(root .. "/md-dir/SKILL.md")
  local _, e5 = skills.load(root, "md-dir")
  has(e5, "missing SKILL.md")
end)

test("unterminated and missing frontmatter are refused", function()
  local root = root_with({
    ["unterminated"] = "---\nname: unterminated\ndescription: d\n# body without a closing line\n",
    ["no-front"] = "# Just markdown\n\nname: no-front\n",
  })
  local _, e1 = skills.load(root, "unterminated")
  has(e1, "skill 'unterminated'")
  has(e1, "not terminated")
  local _, e2 = skills.load(root, "no-front")
  has(e2, "must start with YAML frontmatter")
end)

test("a symlink inside a skill is refused", function()
  local root = root_with({ ["linked"] = { ["SKILL.md"] = skill_md("linked", "d"), ["scripts/ok.py"] = "" } })
  sh("ln -s /etc/passwd " .. shell_quote(root .. "/linked/scripts/passwd"))
  local s, err = skills.load(root, "linked")
  ok(not s, "symlink to a file")
  has(err, "skill 'linked'")
  has(err, "symlinks are not allowed")
  has(err, "scripts/passwd")

  local root2 = root_with({ ["dirlink"] = { ["SKILL.md"] = skill_md("dirlink", "d") } })
  sh("ln -s / " .. shell_quote(root2 .. "/dirlink/up"))
  local _, e2 = skills.load(root2, "dirlink")
  has(e2, "symlinks are not allowed")

  local root3 = root_with({ ["dangling"] = { ["SKILL.md"] = skill_md("dangling", "d") } })
  sh("ln -s /nonexistent/x " .. shell_quote(root3 .. "/dangling/x"))
  local _, e3 = skills.load(root3, "dangling")
  has(e3, "symlinks are not allowed")

  local root4 = root_with({ ["real"] = skill_md("real", "d") })
  sh("ln -s real " .. shell_quote(root4 .. "/alias"))
  local _, e4 = skills.load(root4, "alias")
  has(e4, "is a symlink")

  local root5 = root_with({ ["mdlink"] = { ["elsewhere.md"] = skill_md("mdlink", "d") } })
  sh("ln -s elsewhere.md " .. shell_quote(root5 .. "/mdlink/SKILL.md"))
  local _, e5 = skills.load(root5, "mdlink")
  has(e5, "symlinks are not allowed")
end)

test("special files inside a skill are refused", function()
  local root = root_with({ ["fifo"] = skill_md("fifo", "d") })
  sh("mkfifo " .. shell_quote(root .. "/fifo/pipe"))
  local _, err = skills.load(root, "fifo")
  has(err, "only regular files and directories")
  has(err, "pipe")
end)

test("size and file-count limits", function()
  local root = root_with({ ["big"] = skill_md("big", "d"), ["many"] = skill_md("many", "d"),
    ["at-limit"] = skill_md("at-limit", "d") })
  write(root .. "/big/assets/blob.bin", string.rep("\0", 5 * 1024 * 1024))
  local s, err = skills.load(root, "big")
  ok(not s)
  has(err, "skill 'big'")
  has(err, "at most 5242880")
  for i = 1, 1000 do write(root .. "/many/assets/f" .. i, "") end
  local s2, e2 = skills.load(root, "many")
  ok(not s2)
  has(e2, "1001 files")
  for i = 1, 999 do write(root .. "/at-limit/assets/f" .. i, "") end
  local s3, e3 = skills.load(root, "at-limit")
  ok(s3, e3)
  eq(#s3.files, 1000)
end)

test("names with shell metacharacters in the root are quoted", function()
  local root = TMP .. "/it's a $(dir) `x`"
  mkdir(root .. "/quoted")
  write(root .. "/quoted/SKILL.md", skill_md("quoted", "d"))
  write(root .. "/quoted/refs/with space.md", "x")
  local s, err = skills.load(root, "quoted")
  ok(s, err)
  same_list(s.files, { "SKILL.md", "refs/with space.md" })
  eq(s.dir, root .. "/quoted")
end)

test("relative root becomes an absolute dir", function()
  local s, err = skills.load(SHIPPED .. "/../skills/", "code-review")
  ok(s, err)
  ok(s.dir:sub(1, 1) == "/", "absolute")
  -- A relative path resolves against the current directory.
  local cwd = capture("pwd -P")
  local rel
  if ROOT:sub(1, #cwd + 1) == cwd .. "/" then rel = ROOT:sub(#cwd + 2) .. "/skills" elseif ROOT == cwd then rel = "skills" end
  if rel then
    local s2, e2 = skills.load(rel, "code-review")
    ok(s2, e2)
    eq(s2.dir, ROOT .. "/skills/code-review")
  end
end)

test("select lists every problem", function()
  local root = root_with({ ["good"] = skill_md("good", "d"), ["no-desc"] = "---\nname: no-desc\n---\n" })
  local list, err = skills.select(root, { "good", "missing-one", "BAD", "no-desc", 5 })
  ok(not list)
  has(err, "skill 'missing-one': not found")
  has(err, "invalid skill name 'BAD'")
  has(err, "invalid skill 'no-desc': description is required")
  has(err, "skills[5] must be a string")
  hasnt(err, "'good'")
  local l2, e2 = skills.select(root, "good")
  ok(not l2)
  has(e2, "list")
  local l3 = assert(skills.select(root, { "good", "good" }))
  eq(#l3, 1)
end)

test("list reports valid and refused skills", function()
  local root = root_with({ ["alpha"] = skill_md("alpha", "d"), ["Beta"] = skill_md("Beta", "d"),
    ["gamma"] = { ["notes.txt"] = "x" }, [".hidden"] = skill_md("hidden", "d") })
  write(root .. "/README.md", "not a skill")
  local list, errors = skills.list(root)
  eq(#list, 1)
  eq(list[1].name, "alpha")
  eq(#errors, 2)
  eq(errors[1].name, "Beta")
  has(errors[1].error, "uppercase")
  eq(errors[2].name, "gamma")
  has(errors[2].error, "missing SKILL.md")
  local l2, e2 = skills.list(TMP .. "/does-not-exist")
  eq(#l2, 0)
  eq(#e2, 1)
  has(e2[1].error, "not a readable directory")
end)

-- ---------------------------------------------------------------------------
-- YAML subset

test("yaml: plain, quoted and escaped scalars", function()
  local m, body = parse_ok(fm(table.concat({
    "name: plain-name   # trailing comment",
    "description: 'It''s single: quoted # not a comment'",
    "license: \"Line\\nTwo \\\"q\\\" \\u00e9 \\x41 \\\\ tab\\t\"",
    "compatibility: C# and F#, x:y, 50% off, a-b",
  }, "\n") .. "\n"))
  eq(m.name, "plain-name")
  eq(m.description, "It's single: quoted # not a comment")
  eq(m.license, "Line\nTwo \"q\" \195\169 A \\ tab\t")
  eq(m.compatibility, "C# and F#, x:y, 50% off, a-b")
  eq(body, "body\n")
  same_list(m["allowed-tools"], {}, "allowed-tools always a list")
  eq(type(m.metadata), "table")
end)

test("yaml: comments, blank lines, CRLF, BOM, closing line with spaces", function()
  local m, body = parse_ok("\239\187\191---\r\n# a comment\r\n\r\nname: crlf\r\n  # indented comment\r\ndescription: d\r\n---  \r\nBody\r\n")
  eq(m.name, "crlf")
  eq(m.description, "d")
  eq(body, "Body\n")
  local m2, b2 = parse_ok("---\nname: x\ndescription: d\n---")
  eq(m2.name, "x")
  eq(b2, "")
end)

test("yaml: folded and literal block scalars", function()
  local m = parse_ok(fm("name: x\ndescription: >\n  Folded\n  lines here.\n\n  New paragraph\n    indented kept\n  end\nlicense: MIT\n"))
  eq(m.description, "Folded lines here.\nNew paragraph\n  indented kept\nend\n")
  eq(m.license, "MIT")
  m = parse_ok(fm("name: x\ndescription: |\n  Literal\n    keeps\n\n  lines\n"))
  eq(m.description, "Literal\n  keeps\n\nlines\n")
  m = parse_ok(fm("name: x\ndescription: >-\n  strip\n  me\n\n\n"))
  eq(m.description, "strip me")
  m = parse_ok(fm("name: x\ndescription: |-\n  a\n  b\n"))
  eq(m.description, "a\nb")
  m = parse_ok(fm("name: x\ndescription: |+\n  keep\n\n\nlicense: L\n"))
  eq(m.description, "keep\n\n\n")
  m = parse_ok(fm("name: x\ndescription: >2\n   two spaces kept\n  next\n"))
  eq(m.description, " two spaces kept\nnext\n")
  m = parse_ok(fm("name: x\ndescription: > # comment\n  hash # inside is text\n"))
  eq(m.description, "hash # inside is text\n")
  m = parse_ok(fm("name: x\ndescription: |\nlicense: L\n"))
  eq(m.description, "")
  eq(m.license, "L")
  parse_err(fm("name: x\ndescription: |x\n  a\n"), "line 3, column 15: invalid YAML", "while scanning a block scalar")
end)

test("yaml: multi-line plain scalars", function()
  local m = parse_ok(fm("name: x\ndescription: first line\n  continues here\n\n  new line\nlicense: L\n"))
  eq(m.description, "first line continues here\nnew line")
  m = parse_ok(fm("name: x\ndescription:\n  starts on the next line\n  and folds\n"))
  eq(m.description, "starts on the next line and folds")
  m = parse_ok(fm("name: x\ndescription: ends here # comment\n  # more comment\nlicense: L\n"))
  eq(m.description, "ends here")
  parse_err(fm("name: x\ndescription: 'quoted'\n  more\n"), "line 4", "did not find expected key")
  parse_err(fm("name: x\ndescription: a # c\n  more\n"), "line 4")
  parse_err(fm("name: x\ndescription: a\n  key: value\n"), "line 4", "': '")
end)

test("yaml: metadata map", function()
  local m = parse_ok(fm("name: x\ndescription: d\nmetadata:\n  author: me  # c\n\n  version: 1.0\n  quoted: \"a: b\"\n  dotted.key_1-x/y: v\nlicense: L\n"))
  eq(m.metadata.author, "me")
  eq(m.metadata.version, "1.0", "numbers stay strings")
  eq(m.metadata.quoted, "a: b")
  eq(m.metadata["dotted.key_1-x/y"], "v")
  eq(m.license, "L")
  m = parse_ok(fm("name: x\ndescription: d\nmetadata: {}\n"))
  eq(next(m.metadata), nil)
  m = parse_ok(fm("name: x\ndescription: d\nmetadata:\n"))
  eq(next(m.metadata), nil)
  parse_err(fm("name: x\ndescription: d\nmetadata:\n  nested:\n    deep: v\n"), "line 5",
    "'metadata.nested' must be a string, not a map")
  parse_err(fm("name: x\ndescription: d\nmetadata:\n  - a\n"), "line 5", "must be a map")
  parse_err(fm("name: x\ndescription: d\nmetadata:\n  a: b\n   c: d\n"), "line 6", "mapping values are not allowed")
  parse_err(fm("name: x\ndescription: d\nmetadata:\n  a: b\n  a: c\n"), "line 6", "duplicate key 'a'")
  -- Any YAML spelling of a flat map of strings is accepted.
  m = parse_ok(fm("name: x\ndescription: d\nmetadata: {a: b, 'q k': \"v\"}\n"))
  eq(m.metadata.a, "b")
  eq(m.metadata["q k"], "v")
  m = parse_ok(fm("name: x\ndescription: d\nmetadata:\n  a: |\n    x\n    y\n  b: ~\n"))
  eq(m.metadata.a, "x\ny\n")
  eq(m.metadata.b, "", "null is the empty string")
  parse_err(fm("name: x\ndescription: d\nmetadata:\n  a: [1, 2]\n"), "line 5", "'metadata.a' must be a string, not a list")
  parse_err(fm("name: x\ndescription: d\nmetadata: text\n"), "line 4", "'metadata' must be a map")
  parse_err(fm("name: x\ndescription: d\nmetadata:\n  ? [k]\n  : v\n"), "line 5", "metadata keys must be strings")
end)

test("yaml: allowed-tools forms", function()
  local m = parse_ok(fm("name: x\ndescription: d\nallowed-tools: Read  Write Bash(git:*)\n"))
  same_list(m["allowed-tools"], { "Read", "Write", "Bash(git:*)" })
  m = parse_ok(fm("name: x\ndescription: d\nallowed-tools: \"Read Grep\"\n"))
  same_list(m["allowed-tools"], { "Read", "Grep" })
  m = parse_ok(fm("name: x\ndescription: d\nallowed-tools: [Read, 'Bash(git status)', \"Grep\"]  # c\n"))
  same_list(m["allowed-tools"], { "Read", "Bash(git status)", "Grep" })
  m = parse_ok(fm("name: x\ndescription: d\nallowed-tools: []\n"))
  same_list(m["allowed-tools"], {})
  m = parse_ok(fm("name: x\ndescription: d\nallowed-tools:\n  - Read\n  # comment\n  - 'Bash(git log)'\nlicense: L\n"))
  same_list(m["allowed-tools"], { "Read", "Bash(git log)" })
  eq(m.license, "L")
  m = parse_ok(fm("name: x\ndescription: d\nallowed-tools:\n- Read\n- Write\nlicense: L\n"))
  same_list(m["allowed-tools"], { "Read", "Write" }, "items at column 0")
  eq(m.license, "L")
  m = parse_ok(fm("name: x\ndescription: d\nallowed-tools:\n"))
  same_list(m["allowed-tools"], {})
  m = parse_ok(fm("name: x\ndescription: d\nallowed-tools: ~\n"))
  same_list(m["allowed-tools"], {}, "null is no tools")
  -- The error is where libYAML noticed it (the closing line); it names where the list began.
  parse_err(fm("name: x\ndescription: d\nallowed-tools: [Read, Write\n"), "line 5", "expected ',' or ']'",
    "flow sequence from line 4")
  parse_err(fm("name: x\ndescription: d\nallowed-tools: [Read,, Write]\n"), "line 4", "did not find expected node content")
  parse_err(fm("name: x\ndescription: d\nallowed-tools: [[Read]]\n"), "line 4", "allowed-tools[1] must be a string, not a list")
  parse_err(fm("name: x\ndescription: d\nallowed-tools:\n   - Read\n  - Write\n"), "line 6", "did not find expected key")
  -- A more indented '- Write' continues the plain scalar, as YAML says.
  m = parse_ok(fm("name: x\ndescription: d\nallowed-tools:\n  - Read\n   - Write\n"))
  same_list(m["allowed-tools"], { "Read - Write" })
  parse_err(fm("name: x\ndescription: d\nallowed-tools:\n  - Read\n  Write\n"), "line 7", "could not find expected ':'",
    "from line 6")
  m = parse_ok(fm("name: x\ndescription: d\nallowed-tools:\n  -\n"))
  local okv, err = skills.validate(m, "x")
  ok(not okv, "an empty list item is refused")
  has(err, "allowed-tools[1] must be a non-empty string")
  parse_err(fm("name: x\ndescription: d\nallowed-tools: {a: b}\n"), "line 4", "space-separated string or a list")
end)

test("yaml: errors name the line", function()
  parse_err(fm("name: x\ndescription: d\nfoo: bar\n"), "line 4", "unknown field 'foo'")
  parse_err(fm("name: x\nname: y\n"), "line 3", "duplicate field 'name'")
  parse_err(fm("name: x\n\tdescription: d\n"), "line 3", "tab character that violates indentation")
  -- Tabs as separation and inside values are YAML.
  eq(parse_ok(fm("name:\tx\n")).name, "x")
  eq(parse_ok(fm("name: x\ndescription: a\tb\n")).description, "a\tb")
  eq(parse_ok(fm("name: x\nmetadata:\n  k:\tv\n")).metadata.k, "v")
  eq(parse_ok(fm("name: x\ndescription: 'a\tb'\n")).description, "a\tb", "quoted tab is fine")
  eq(parse_ok(fm("  name: x\n  description: d\n")).description, "d", "an indented map is one map")
  parse_err(fm("name: x\n# c\n  description: d\n"), "line 4", "did not find expected key")
  parse_err(fm("name: x\n  description: d\n"), "line 3") -- read as a continuation of the name
  parse_err(fm("name: x\ndescription: Use when: reviewing\n"), "line 3", "quote it")
  parse_err(fm("name: x\ndescription: trailing colon:\n"), "line 3", "quote it")
  parse_err(fm("name: x\ndescription: 'open\n"), "end of the frontmatter", "quoted scalar from line 3")
  parse_err(fm("name: x\ndescription: \"open\n"), "end of the frontmatter", "quoted scalar from line 3")
  parse_err(fm("name: x\ndescription: \"bad \\q escape\"\n"), "line 3", "unknown escape")
  parse_err(fm("name: x\ndescription: 'a' trailing\n"), "line 3", "did not find expected key")
  parse_err(fm("name: x\ndescription: &anchor d\n"), "line 3", "anchors ('&anchor') are not allowed")
  parse_err(fm("name: x\ndescription: *alias\n"), "line 3", "aliases ('*alias') are not allowed")
  parse_err(fm("name: x\ndescription: !!str d\n"), "line 3", "tags ('!!str') are not allowed")
  parse_err(fm("name: x\ndescription: [a, b]\n"), "line 3", "'description' must be a string, not a list")
  parse_err(fm("name: x\ndescription: {a: b}\n"), "line 3", "'description' must be a string, not a map")
  parse_err(fm("name: x\ndescription: - item\n"), "line 3", "block sequence entries are not allowed")
  parse_err(fm("name:x\n"), "line 2", "expected 'key: value'")
  parse_err(fm("just text\n"), "line 2", "expected 'key: value'")
  parse_err(fm("- name: x\n"), "line 2", "not a list item")
  eq(parse_ok(fm("name : x\n")).name, "x", "space before ':' is YAML")
  parse_err(fm("? [a]\n: b\n"), "line 2", "field names must be strings")
  parse_err("name: x\n---\n", "line 1", "must start with YAML frontmatter")
  parse_err("", "must start with YAML frontmatter")
  parse_err("---", "not terminated")
  parse_err("---\nname: x\n", "not terminated")
  local _, err = skills.parse(42)
  has(err, "must be a string")
end)

test("yaml: values that stay strings and dashes in plain values", function()
  local m = parse_ok(fm("name: x\ndescription: -starts-with-dash is fine\nlicense: true\ncompatibility: 123\n"))
  eq(m.description, "-starts-with-dash is fine")
  eq(m.license, "true")
  eq(m.compatibility, "123")
  m = parse_ok(fm("name: x\ndescription: \"\"\n"))
  eq(m.description, "")
  local okv, err = skills.validate(m, "x")
  ok(not okv)
  has(err, "description is empty")
end)

test("yaml: no implicit typing: booleans, numbers and dates stay text, null is empty", function()
  local m = parse_ok(fm(table.concat({
    "name: no",
    "description: yes",
    "license: off",
    "compatibility: 2001-12-14",
    "metadata:",
    "  version: 1.10",
    "  octal: 010",
    "  hex: 0x1F",
    "  exp: 1e3",
    "  inf: .inf",
    "  bool: TRUE",
    "  when: 2001-12-14t21:59:43.10-05:00",
    "  null: ~",
    "  quoted: '~'",
    "allowed-tools: [on, 1.5, 'null']",
  }, "\n") .. "\n"))
  eq(m.name, "no")
  eq(m.description, "yes")
  eq(m.license, "off")
  eq(m.compatibility, "2001-12-14")
  eq(m.metadata.version, "1.10", "not the float 1.1")
  eq(m.metadata.octal, "010")
  eq(m.metadata.hex, "0x1F")
  eq(m.metadata.exp, "1e3")
  eq(m.metadata.inf, ".inf")
  eq(m.metadata.bool, "TRUE")
  eq(m.metadata.when, "2001-12-14t21:59:43.10-05:00")
  eq(m.metadata["null"], "", "a null value is the empty string")
  eq(m.metadata.quoted, "~", "a quoted ~ is text")
  same_list(m["allowed-tools"], { "on", "1.5", "null" })
  ok(skills.validate(m, "no"), "a skill may be named no")
  -- A null field is empty, and the validator says so.
  m = parse_ok(fm("name: x\ndescription: ~\nlicense: null\ncompatibility: NULL\nmetadata: ~\n"))
  local okv, err = skills.validate(m, "x")
  ok(not okv)
  has(err, "description is empty")
  has(err, "license is empty")
  has(err, "compatibility is empty")
  eq(next(m.metadata), nil, "null metadata is an empty map")
end)

-- Hostile SKILL.md text: each row is refused with a clear message (or, for
-- encodings and line endings that are fine, parsed to the right value), fast
-- and without building anything large.
local function bomb()
  local lines = { "name: x", "description: d", "metadata:", "  l0: &l0 lol" }
  for i = 1, 9 do
    local refs = {}
    for j = 1, 9 do refs[j] = "*l" .. (i - 1) end
    lines[#lines + 1] = "  l" .. i .. ": &l" .. i .. " [" .. table.concat(refs, ", ") .. "]"
  end
  return fm(table.concat(lines, "\n") .. "\n")
end

local HOSTILE = {
  { "alias bomb (billion laughs)", bomb(), err = { "line 5", "anchors ('&l0') are not allowed" } },
  { "alias bomb with the anchor on a list", fm("name: x\ndescription: d\nallowed-tools: &a [a, *a]\n"),
    err = { "line 4", "anchors ('&a')" } },
  { "alias alone", fm("name: x\ndescription: *x\n"), err = { "line 3", "aliases ('*x')" } },
  { "merge key is not a merge", fm("name: x\ndescription: d\n<<: {license: L}\n"), err = { "line 4", "unknown field '<<'" } },
  { "python object tag", fm("name: x\ndescription: !!python/object:os.system d\n"),
    err = { "line 3", "tags ('!!python/object:os.system') are not allowed" } },
  { "python apply tag on a list", fm("name: x\ndescription: d\nmetadata:\n  cmd: !!python/object/apply:os.system [id]\n"),
    err = { "line 5", "tags ('!!python/object/apply:os.system')" } },
  { "local tag", fm("name: x\ndescription: !custom d\n"), err = { "tags ('!custom')" } },
  { "verbatim tag", fm("name: x\ndescription: !<tag:yaml.org,2002:str> d\n"), err = { "tags ('!!str')" } },
  { "tag on a map", fm("name: x\ndescription: d\nmetadata: !!map {a: b}\n"), err = { "line 4", "tags ('!!map')" } },
  { "duplicate field", fm("name: x\ndescription: d\ndescription: e\n"), err = { "line 4", "duplicate field 'description'" } },
  { "duplicate field spelled differently", fm("name: x\n\"name\": y\n"), err = { "line 3", "duplicate field 'name'" } },
  { "duplicate metadata key in a flow map", fm("name: x\nmetadata: {a: 1, a: 2}\n"), err = { "line 3", "duplicate key 'a' in 'metadata'" } },
  { "second document after ---", fm("name: x\ndescription: d\n--- !!python/object x\n"),
    err = { "line 4", "document markers ('---', '...') and directives are not allowed" } },
  { "second document after ...", fm("name: x\ndescription: d\n...\nlicense: L\n"), err = { "line 4", "document markers" } },
  { "directive", fm("%YAML 1.1\nname: x\n"), err = { "invalid YAML", "expected <document start>" } },
  { "non-UTF-8 byte", fm("name: x\ndescription: caf\233\n"), err = { "line 3: frontmatter is not valid UTF-8" } },
  { "UTF-16 byte order mark", "---\n\255\254n\0a\0m\0e\0\n---\n", err = { "line 2: frontmatter is not valid UTF-8" } },
  { "overlong UTF-8", fm("name: x\ndescription: \192\175\n"), err = { "line 3", "not valid UTF-8" } },
  { "UTF-8 surrogate", fm("name: x\ndescription: \237\160\128\n"), err = { "line 3", "not valid UTF-8" } },
  { "NUL byte", fm("name: x\ndescription: a\0b\n"), err = { "line 3: control character 0x00" } },
  { "escape byte", fm("name: x\n\ndescription: \27[31mred\n"), err = { "line 4: control character 0x1b" } },
  { "non-UTF-8 in the body is the body's business", "---\nname: x\ndescription: d\n---\n\255\n",
    value = function(m, body) eq(m.name, "x"); eq(body, "\255\n") end },
  { "huge scalar under the bound", fm("name: x\ndescription: " .. string.rep("x", 60000) .. "\n"),
    value = function(m) eq(#m.description, 60000) end },
  { "huge scalar over the bound", fm("name: x\ndescription: " .. string.rep("x", 70000) .. "\n"),
    err = { "frontmatter is longer than 65536 bytes" } },
  { "huge frontmatter, never closed", "---\n" .. string.rep("a: b\n", 1000000),
    err = { "frontmatter is longer than 65536 bytes" } },
  { "huge body", fm("name: x\ndescription: d\n") .. string.rep("# body\n", 500000),
    value = function(m, body) eq(m.name, "x"); eq(#body, 5 + 7 * 500000) end },
  { "text over the size limit", fm("name: x\n") .. string.rep("x", 5 * 1024 * 1024),
    err = { "SKILL.md is 5242901 bytes (at most 5242880)" } },
  { "deeply nested flow lists", fm("description: " .. string.rep("[", 30000) .. string.rep("]", 30000) .. "\n"),
    err = { "line 2", "'description' must be a string, not a list" } },
  { "deeply nested unclosed lists", fm(string.rep("[", 60000) .. "\n"), err = { "line 2", "not a list item" } },
  { "deeply nested allowed-tools", fm("allowed-tools: " .. string.rep("[", 30000) .. "\n"),
    err = { "line 2", "allowed-tools[1] must be a string, not a list" } },
  { "deeply nested metadata", fm("metadata: " .. string.rep("{a: ", 15000) .. "\n"),
    err = { "line 2", "'metadata.a' must be a string, not a map" } },
  { "CRLF line endings", "---\r\nname: x\r\ndescription: |\r\n  one\r\n  two\r\nmetadata:\r\n  v: \"1.0\"\r\n---\r\nbody\r\n",
    value = function(m, body) eq(m.description, "one\ntwo\n"); eq(m.metadata.v, "1.0"); eq(body, "body\n") end },
  { "byte order mark", "\239\187\191---\nname: x\ndescription: d\n---\nbody\n",
    value = function(m, body) eq(m.name, "x"); eq(body, "body\n") end },
  { "byte order mark and CRLF without a closing line", "\239\187\191---\r\nname: x\r\n",
    err = { "not terminated" } },
}

test("yaml: hostile input", function()
  for _, row in ipairs(HOSTILE) do
    local label, text = row[1], row[2]
    collectgarbage()
    local mem0, t0 = collectgarbage("count"), os.clock()
    local meta, res = skills.parse(text)
    local kib, secs = collectgarbage("count") - mem0, os.clock() - t0
    if row.err then
      if meta then fail(label .. ": should have been refused", 1) end
      for _, sub in ipairs(row.err) do has(res, sub, label) end
    else
      if not meta then fail(label .. ": " .. tostring(res), 1) end
      row.value(meta, res)
    end
    -- Nothing grows with the input beyond the text itself (the 5 MiB rows
    -- copy it once for CRLF normalisation and once for the body).
    ok(kib < 3 * #text / 1024 + 512, label .. ": used " .. math.floor(kib) .. " KiB")
    ok(secs < 2, label .. ": took " .. secs .. " s")
  end
end)

-- ---------------------------------------------------------------------------

t.finish()
