-- Tests for lua/github_review.lua, the pull-request review's pure parts: the
-- lines of a patch a comment may name, findings checked against them, the
-- review's body. Plain lua5.4:
--   lua5.4 tests/unit/test_github_review.lua   (from any directory)

local script = arg and arg[0] or "tests/unit/test_github_review.lua"
local repo = script:match("^(.*)/tests/unit/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. package.path
local gr = require "github_review"

local t = dofile(repo .. "/tests/lua_test.lua")
local ok, eq, test = t.ok, t.eq, t.test

local function ranges_text(r)
  local out = {}
  for _, x in ipairs(r) do out[#out + 1] = x[1] .. "-" .. x[2] end
  return table.concat(out, ",")
end

-- two hunks of one modified file, as GitHub's /files lists its patch
local PATCH = table.concat({
  "@@ -4,6 +4,8 @@ class Bucket:",
  "         self.items = []",
  " ",
  "     def add(self, item):",
  "+        if len(self.items) > self.capacity:",
  "+            return False",
  "         self.items.append(item)",
  "-        return None",
  "+        return True",
  " ",
  "@@ -40,3 +42,4 @@ def drain(self):",
  "     x = 1",
  "-    y = 2",
  "+    y = 3",
  "+    z = 4",
  "\\ No newline at end of file",
}, "\n")

test("the new side's lines of each hunk, context and added", function()
  local ranges, added = gr.patch_lines(PATCH)
  eq(ranges_text(ranges), "4-11,42-44")
  eq(ranges_text(added), "7-8,10-10,43-44")
end)

test("a new file's patch, and no patch at all", function()
  local ranges, added = gr.patch_lines("@@ -0,0 +1,2 @@\n+a\n+b")
  eq(ranges_text(ranges), "1-2")
  eq(ranges_text(added), "1-2")
  eq(ranges_text(gr.patch_lines(nil)), "")
  eq(ranges_text(gr.patch_lines("Binary files differ")), "")
end)

test("a deleted line is not a line on the new side", function()
  local ranges = gr.patch_lines("@@ -1,2 +1,1 @@\n-gone\n kept")
  eq(ranges_text(ranges), "1-1")
end)

local FILES = { { path = "src/bucket.py", ranges = (gr.patch_lines(PATCH)) }, { path = "bin.dat", ranges = {} } }

test("findings on a changed line are kept, the others dropped with a reason", function()
  local kept, dropped = gr.validate({
    { path = "src/bucket.py", line = 7, severity = "Major", body = "off by one" },
    { path = "src/bucket.py", line = 43.0, body = "float line from JSON" },
    { path = "src/bucket.py", line = 20, body = "between the hunks" },
    { path = "README.md", line = 1, body = "not changed" },
    { path = "bin.dat", line = 1, body = "no patch" },
    { path = "src/bucket.py", line = 7 },
    { path = "src/bucket.py", line = 7.5, body = "not a whole line" },
    "not an object",
  }, FILES)
  eq(#kept, 2)
  eq(kept[1].path, "src/bucket.py"); eq(kept[1].line, 7); eq(kept[1].side, "RIGHT"); eq(kept[1].severity, "major")
  eq(math.type(kept[2].line), "integer")
  eq(#dropped, 6)
  eq(dropped[1].reason, "line 20 is not in the diff")
  eq(dropped[2].reason, "not a file this pull request changes")
  eq(dropped[3].reason, "line 1 is not in the diff")
  eq(dropped[4].reason, "no text")
  eq(dropped[5].reason, "no line")
  eq(dropped[6].index, 8)
end)

test("no findings, or findings that are not a list", function()
  local kept, dropped = gr.validate(nil, FILES)
  eq(#kept, 0); eq(#dropped, 0)
  kept = gr.validate("text", FILES)
  eq(#kept, 0)
end)

test("at most MAX_COMMENTS comments", function()
  local many = {}
  for i = 1, gr.MAX_COMMENTS + 3 do many[i] = { path = "src/bucket.py", line = 7, body = "x" .. i } end
  local kept, dropped = gr.validate(many, FILES)
  eq(#kept, gr.MAX_COMMENTS); eq(#dropped, 3)
end)

test("the body: the summary, the dropped findings on one line each, the marker last", function()
  local body = gr.review_body("All good.", { { finding = { path = "a.py", line = 3, severity = "minor",
    body = "two\nlines" } } }, "<!-- engine:review:X -->")
  t.has(body, "All good.")
  t.has(body, "- **minor** `a.py:3` two lines")
  ok(body:sub(-#"<!-- engine:review:X -->") == "<!-- engine:review:X -->", "the marker ends the body")
  eq(gr.review_body(nil, {}, "M"), "No summary.\n\nM")
end)

t.finish()
