-- The plain-Lua tests' harness (tests/unit/test_fs.lua, tests/skills/test_skills.lua):
-- named tests that report "ok"/"FAIL" with the failing line, assertions, a
-- fixture directory made with mktemp -d, and the summary that sets the exit code.
--   local t = dofile(ROOT .. "/tests/lua_test.lua"); t.test("name", function() t.eq(1, 1) end)
local M = {}

local passed, failed, failures = 0, 0, {}

function M.shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- A command's standard output, without its last newline.
function M.capture(cmd)
  local f = assert(io.popen(cmd, "r"))
  local out = f:read("a")
  f:close()
  return (out:gsub("\n$", ""))
end

function M.sh(cmd)
  local r = os.execute(cmd)
  assert(r == true or r == 0, "command failed: " .. cmd)
end

-- level: 1 = the caller of fail, 2 = the caller of the helper that called fail.
function M.fail(msg, level)
  local info = debug.getinfo((level or 1) + 1, "l")
  error({ msg = msg .. " (line " .. tostring(info and info.currentline or "?") .. ")" }, 0)
end

function M.show(v) return type(v) == "string" and string.format("%q", v) or tostring(v) end

function M.ok(cond, msg) if not cond then M.fail(msg or "expected a true value", 2) end end

function M.eq(a, b, msg)
  if a ~= b then M.fail((msg and msg .. ": " or "") .. "expected " .. M.show(b) .. ", got " .. M.show(a), 2) end
end

function M.has(s, sub, msg)
  if type(s) ~= "string" or not s:find(sub, 1, true) then
    M.fail((msg and msg .. ": " or "") .. "expected " .. M.show(s) .. " to contain " .. M.show(sub), 2)
  end
end

function M.hasnt(s, sub, msg)
  if type(s) == "string" and s:find(sub, 1, true) then
    M.fail((msg and msg .. ": " or "") .. "expected " .. M.show(s) .. " not to contain " .. M.show(sub), 2)
  end
end

function M.same_list(a, b, msg)
  local sa, sb = table.concat(a or {}, "|"), table.concat(b, "|")
  if type(a) ~= "table" or #a ~= #b or sa ~= sb then
    M.fail((msg and msg .. ": " or "") .. "expected {" .. sb .. "}, got {" .. sa .. "}", 2)
  end
end

function M.test(name, fn)
  local okr, err = pcall(fn)
  if okr then
    passed = passed + 1
    print("ok   " .. name)
  else
    failed = failed + 1
    local m = type(err) == "table" and err.msg or tostring(err)
    failures[#failures + 1] = name .. ": " .. m
    print("FAIL " .. name .. ": " .. m)
  end
end

-- A fresh directory (its real path: TMPDIR may be a symlink), removed by finish.
local tmpdirs = {}
function M.tmpdir(prefix)
  local d = M.capture("mktemp -d \"${TMPDIR:-/tmp}/" .. prefix .. ".XXXXXX\"")
  assert(d:match("^/.+/" .. prefix:gsub("%p", "%%%0") .. "%.[%w]+$"), "mktemp -d failed: " .. d)
  d = M.capture("realpath -- " .. M.shell_quote(d))
  tmpdirs[#tmpdirs + 1] = d
  return d
end

-- Removes the directories tmpdir made (finish does too).
function M.remove_tmpdirs()
  for _, d in ipairs(tmpdirs) do os.execute("rm -rf -- " .. M.shell_quote(d)) end
  tmpdirs = {}
end

-- Removes the fixtures, prints the summary and exits non-zero on a failure.
function M.finish()
  M.remove_tmpdirs()
  print(string.format("\n%d passed, %d failed", passed, failed))
  if failed > 0 then
    for _, f in ipairs(failures) do io.stderr:write("FAIL " .. f .. "\n") end
    os.exit(1)
  end
  os.exit(0)
end

return M
