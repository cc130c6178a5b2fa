-- policy_lib.paths (policylib.paths for policies): lexical path checks.
-- Nothing here touches a file system (a policy has none): "." and ".." are
-- resolved as text, so a symlink is not seen. That is why the sandbox's mounts
-- stay the real boundary and these checks are the second one.
--
--   paths.normalize("/a/./b/../c")            -> "/a/c"  (nil: relative, or ".." above "/")
--   paths.resolve("b", "/a")                   -> "/a/b"  (nil when cwd is unknown)
--   paths.under("/a/b", "/a")                  -> true    ("/ab" is not under "/a")
--   paths.confined("x", {"/w", "/o"}, "/w")    -> true, "/w/x"
local M = {}

-- The normalized absolute form of path, or nil when it is not absolute, holds a
-- NUL, or climbs above "/" (which the shell would clamp; a policy asks instead).
function M.normalize(path)
  if type(path) ~= "string" or path:sub(1, 1) ~= "/" or path:find("%z") then return nil end
  local parts = {}
  for seg in path:gmatch("[^/]+") do
    if seg == ".." then
      if #parts == 0 then return nil end
      parts[#parts] = nil
    elseif seg ~= "." then
      parts[#parts + 1] = seg
    end
  end
  return "/" .. table.concat(parts, "/")
end

-- path made absolute against cwd (an absolute directory) and normalized.
function M.resolve(path, cwd)
  if type(path) ~= "string" or path == "" then return nil end
  if path:sub(1, 1) == "/" then return M.normalize(path) end
  if type(cwd) ~= "string" then return nil end
  return M.normalize(cwd .. "/" .. path)
end

-- Whether path is root or inside it (both normalized first; false if either is not absolute).
function M.under(path, root)
  path, root = M.normalize(path), M.normalize(root)
  if not path or not root then return false end
  if root == "/" then return true end
  return path == root or path:sub(1, #root + 1) == root .. "/"
end

-- Whether path (relative ones against cwd) lies under one of roots; also returns
-- the resolved path.
function M.confined(path, roots, cwd)
  local abs = M.resolve(path, cwd)
  if not abs or type(roots) ~= "table" then return false, abs end
  for _, root in ipairs(roots) do
    if M.under(abs, root) then return true, abs end
  end
  return false, abs
end

return M
