-- Tests for the native fs module (engine/vm/lua_fs.c), loaded as build/fs.so
-- into plain lua5.4 -- the same source the engine registers in its activity VM.
--   LUA_CPATH_5_4='build/?.so;;' lua5.4 tests/unit/test_fs.lua   (ctest sets it)
-- Fixtures live in one directory made with mktemp -d, removed at the end.

local script = arg and arg[0] or "tests/unit/test_fs.lua"
local repo = script:match("^(.*)/tests/unit/[^/]+$") or "."
if repo == "" then repo = "." end
package.cpath = package.cpath .. ";" .. repo .. "/build/?.so"
local fs = require "fs"

local t = dofile(repo .. "/tests/lua_test.lua")
local shell_quote, capture, sh = t.shell_quote, t.capture, t.sh
local fail, show, ok, eq, test = t.fail, t.show, t.ok, t.eq, t.test

local TMP = t.tmpdir("fs-test")

local function write(path, content)
  local f = assert(io.open(path, "wb"))
  f:write(content)
  f:close()
end

-- the fixture tree: a file, a directory, symlinks to both, a dangling one, a FIFO
local T = TMP .. "/tree"
sh("mkdir -p " .. shell_quote(T .. "/dir/sub"))
write(T .. "/file.txt", "hello\n")
write(T .. "/.hidden", "")
sh("ln -s file.txt " .. shell_quote(T .. "/link-to-file"))
sh("ln -s dir " .. shell_quote(T .. "/link-to-dir"))
sh("ln -s nowhere " .. shell_quote(T .. "/dangling"))
sh("mkfifo " .. shell_quote(T .. "/fifo"))

local ENOENT, ENOTDIR = "No such file or directory", "Not a directory"
local function octal(s) return tonumber(s, 8) end

-- ------------------------------------------------------------- realpath --

test("realpath: resolves symlinks, '..' and '.' to an absolute path", function()
  eq(fs.realpath(T .. "/link-to-dir/sub/../."), T .. "/dir")
  eq(fs.realpath(T .. "/link-to-file"), T .. "/file.txt")
  eq(fs.realpath("/"), "/")
end)

test("realpath: a relative path is taken from the working directory", function()
  eq(fs.realpath("."), capture("pwd -P"))
end)

test("realpath: the path must exist (realpath -e)", function()
  local r, err = fs.realpath(T .. "/missing")
  eq(r, nil)
  eq(err, T .. "/missing: " .. ENOENT)
  r, err = fs.realpath(T .. "/dangling")
  eq(r, nil, "a dangling symlink")
  eq(err, T .. "/dangling: " .. ENOENT)
  r, err = fs.realpath(T .. "/file.txt/x")
  eq(err, T .. "/file.txt/x: " .. ENOTDIR)
end)

test("realpath: a NUL byte or an empty path is refused, not cut short", function()
  local r, err = fs.realpath(T .. "\0/etc")
  eq(r, nil)
  eq(err, T .. ": the path contains a NUL byte")
  r, err = fs.realpath("")
  eq(r, nil)
  eq(err, "(empty path): " .. ENOENT)
end)

-- ----------------------------------------------------------------- list --

test("list: every entry, sorted by name, with its lstat type", function()
  local got = {}
  for i, e in ipairs(fs.list(T)) do got[i] = e.name .. "=" .. e.type end
  eq(table.concat(got, " "), ".hidden=file dangling=link dir=dir fifo=other file.txt=file "
    .. "link-to-dir=link link-to-file=link")
end)

test("list: a symlink to a directory is listed, never followed; one given as the directory is", function()
  for _, e in ipairs(fs.list(T)) do
    if e.name == "link-to-dir" then eq(e.type, "link") end
  end
  local inside = fs.list(T .. "/link-to-dir")
  eq(#inside, 1)
  eq(inside[1].name, "sub")
  eq(inside[1].type, "dir")
end)

test("list: an empty directory is an empty list", function()
  local l = fs.list(T .. "/dir/sub")
  eq(type(l), "table")
  eq(#l, 0)
end)

test("list: errors name the path", function()
  local l, err = fs.list(T .. "/missing")
  eq(l, nil)
  eq(err, T .. "/missing: " .. ENOENT)
  l, err = fs.list(T .. "/file.txt")
  eq(l, nil)
  eq(err, T .. "/file.txt: " .. ENOTDIR)
  l, err = fs.list(T .. "/dangling")
  eq(err, T .. "/dangling: " .. ENOENT)
  l, err = fs.list(T .. "/link-to-file")
  eq(err, T .. "/link-to-file: " .. ENOTDIR)
end)

test("list: byte order, names with spaces and newlines kept whole", function()
  local d = TMP .. "/names"
  sh("mkdir -p " .. shell_quote(d))
  for _, n in ipairs({ "b", "a b", "a\nb", "B", "\xc3\xa9" }) do write(d .. "/" .. n, "") end
  local got = {}
  for i, e in ipairs(fs.list(d)) do got[i] = e.name end
  eq(table.concat(got, "|"), "B|a\nb|a b|b|\xc3\xa9")
end)

test("list: more than 100000 entries is an error, not a huge table", function()
  -- on a tmpfs when there is one: 100000 creations cost seconds on a disk
  local d = capture("mktemp -d /dev/shm/fs-test-many.XXXXXX 2>/dev/null || mktemp -d \"${TMPDIR:-/tmp}/fs-test-many.XXXXXX\"")
  assert(d:match("/fs%-test%-many%.[%w]+$"), "mktemp -d failed: " .. d)
  -- 100000 fit, one more does not (removed before anything is checked)
  sh("cd " .. shell_quote(d) .. " && seq 1 100000 | xargs touch")
  local l, err = fs.list(d)
  write(d .. "/one-more", "")
  local l2, err2 = fs.list(d)
  sh("rm -rf -- " .. shell_quote(d))
  eq(err, nil)
  eq(#l, 100000)
  eq(l[1].name, "1")
  eq(l[100000].name, "99999", "byte order")
  eq(l2, nil)
  eq(err2, d .. ": too many entries (more than 100000)")
end)

-- ---------------------------------------------------------------- lstat --

test("lstat: type, size and permission bits; a symlink is not followed", function()
  sh("chmod 0640 " .. shell_quote(T .. "/file.txt"))
  local s = fs.lstat(T .. "/file.txt")
  eq(s.type, "file")
  eq(s.size, 6)
  eq(s.mode, octal("640"))
  s = fs.lstat(T .. "/link-to-file")
  eq(s.type, "link")
  eq(s.size, #"file.txt", "a symlink's size is its target's length")
  eq(fs.lstat(T .. "/dangling").type, "link")
  eq(fs.lstat(T .. "/dir").type, "dir")
  eq(fs.lstat(T .. "/link-to-dir").type, "link")
  eq(fs.lstat(T .. "/fifo").type, "other")
end)

test("lstat: a missing path", function()
  local s, err = fs.lstat(T .. "/missing")
  eq(s, nil)
  eq(err, T .. "/missing: " .. ENOENT)
end)

-- -------------------------------------------------------------- mkdir_p --

test("mkdir_p: makes every missing directory, and is fine when they exist", function()
  local p = TMP .. "/made/a/b/c"
  eq(fs.mkdir_p(p), true)
  eq(fs.lstat(p).type, "dir")
  eq(fs.lstat(p).mode & octal("022"), 0, "0755 under the umask at most")
  eq(fs.mkdir_p(p), true, "again")
  eq(fs.mkdir_p(TMP .. "/made//a///b/c2/"), true, "repeated and trailing slashes")
  eq(fs.lstat(TMP .. "/made/a/b/c2").type, "dir")
  eq(fs.mkdir_p("/"), true)
end)

test("mkdir_p: the mode is the last directory's", function()
  local p = TMP .. "/modes/x/y"
  eq(fs.mkdir_p(p, octal("500")), true)
  eq(fs.lstat(p).mode, octal("500"))
  eq(fs.lstat(TMP .. "/modes/x").mode, octal("700"), "those above stay writable and searchable")
  local okc, err = pcall(fs.mkdir_p, p, octal("10000"))
  eq(okc, false)
  ok(tostring(err):find("mode must be from 0 to 07777", 1, true), tostring(err))
end)

test("mkdir_p: through a symlink to a directory", function()
  eq(fs.mkdir_p(T .. "/link-to-dir/new"), true)
  eq(fs.lstat(T .. "/dir/new").type, "dir")
end)

test("mkdir_p: a file in the way", function()
  local r, err = fs.mkdir_p(T .. "/file.txt")
  eq(r, nil)
  eq(err, T .. "/file.txt: File exists")
  r, err = fs.mkdir_p(T .. "/file.txt/below/more")
  eq(r, nil)
  eq(err, T .. "/file.txt: " .. ENOTDIR)
  r, err = fs.mkdir_p(T .. "/dangling/x")
  eq(r, nil, "a dangling symlink on the path")
  eq(err, T .. "/dangling: " .. ENOTDIR)
end)

-- ---------------------------------------------------------- sha256_file --

test("sha256_file: known digests, lowercase hex", function()
  write(TMP .. "/abc", "abc")
  eq(fs.sha256_file(TMP .. "/abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
  write(TMP .. "/empty", "")
  eq(fs.sha256_file(TMP .. "/empty"), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
end)

test("sha256_file: a file of many read chunks, as sha256sum sees it", function()
  local parts = {}
  for i = 1, 30000 do parts[i] = string.format("%05d line of the big file\n", i) end
  write(TMP .. "/big", table.concat(parts)) -- 780000 bytes: not a multiple of the chunk
  eq(fs.sha256_file(TMP .. "/big"), capture("sha256sum " .. shell_quote(TMP .. "/big")):match("^(%x+)"))
end)

test("sha256_file: a symlink is refused, not followed", function()
  local h, err = fs.sha256_file(T .. "/link-to-file")
  eq(h, nil)
  eq(err, T .. "/link-to-file: is a symlink (not followed)")
  h, err = fs.sha256_file(T .. "/dangling")
  eq(err, T .. "/dangling: is a symlink (not followed)")
end)

test("sha256_file: only regular files (a FIFO does not block it)", function()
  local h, err = fs.sha256_file(T .. "/fifo")
  eq(h, nil)
  eq(err, T .. "/fifo: not a regular file")
  h, err = fs.sha256_file(T .. "/dir")
  eq(err, T .. "/dir: not a regular file")
  h, err = fs.sha256_file("/dev/null")
  eq(err, "/dev/null: not a regular file")
end)

test("sha256_file: a missing file", function()
  local h, err = fs.sha256_file(T .. "/missing")
  eq(h, nil)
  eq(err, T .. "/missing: " .. ENOENT)
end)

-- --------------------------------------------------------------- getuid --

test("getuid: the real user id, an integer", function()
  local uid = fs.getuid()
  eq(math.type(uid), "integer")
  eq(uid, tonumber(capture("id -ru")))
end)

test("every function wants a string path", function()
  for _, name in ipairs({ "realpath", "list", "lstat", "mkdir_p", "sha256_file" }) do
    local okc, err = pcall(fs[name], nil)
    eq(okc, false, name)
    ok(tostring(err):find("string expected", 1, true), name .. ": " .. tostring(err))
  end
end)

-- ---------------------------------------------------------------------------

t.finish()
