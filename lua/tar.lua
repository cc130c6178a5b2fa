-- A small ustar writer and reader, for copying files in and out of containers
-- through the Docker archive API.
local M = {}

local function octal(n, width) return string.format("%0" .. (width - 1) .. "o", n) .. "\0" end

local function header(name, size, mode, typeflag, uid, gid)
  if #name > 100 then error({ type = "InvalidPath", message = "tar: name longer than 100 bytes: " .. name }, 0) end
  local h = name .. string.rep("\0", 100 - #name) .. octal(mode or 420, 8) .. octal(uid or 0, 8) .. octal(gid or 0, 8)
    .. octal(size, 12) .. octal(0, 12) .. "        " .. (typeflag or "0") .. string.rep("\0", 100)
    .. "ustar\0" .. "00" .. string.rep("\0", 32) .. string.rep("\0", 32) .. octal(0, 8) .. octal(0, 8)
    .. string.rep("\0", 155)
  h = h .. string.rep("\0", 512 - #h)
  local sum = 0
  for i = 1, 512 do sum = sum + h:byte(i) end
  return h:sub(1, 148) .. string.format("%06o\0 ", sum) .. h:sub(157)
end

-- files: {{name = "a/b.txt", data = "...", mode = 0644}, {name = "dir/", dir = true}};
-- owner: {uid=, gid=} for every entry (default 0). Parent directories are added.
function M.pack(files, owner)
  owner = owner or {}
  local out, dirs = {}, {}
  local function add_dir(d, mode)
    if dirs[d] then return end
    dirs[d] = true
    out[#out + 1] = header(d .. "/", 0, mode or 493, "5", owner.uid, owner.gid)
  end
  for _, f in ipairs(files) do
    local parent = ""
    for part in f.name:gmatch("([^/]+)/") do
      parent = parent == "" and part or (parent .. "/" .. part)
      add_dir(parent)
    end
    if f.dir then
      add_dir((f.name:gsub("/$", "")), f.mode)
    else
      local data = f.data or ""
      out[#out + 1] = header(f.name, #data, f.mode, "0", owner.uid, owner.gid)
      out[#out + 1] = data .. string.rep("\0", (512 - #data % 512) % 512)
    end
  end
  out[#out + 1] = string.rep("\0", 1024)
  return table.concat(out)
end

-- Returns {{name=, data=, type="file"|"dir"|"other", size=}} (regular files carry data).
function M.unpack(bytes, max_bytes)
  local files, pos, total = {}, 1, 0
  while pos + 511 <= #bytes do
    local h = bytes:sub(pos, pos + 511)
    if h == string.rep("\0", 512) then break end
    local name = h:sub(1, 100):gsub("%z.*", "")
    local prefix = h:sub(346, 500):gsub("%z.*", "")
    if prefix ~= "" then name = prefix .. "/" .. name end
    -- octal digits only: tonumber(s, 8) also takes a sign, and a negative
    -- size would move pos back (an endless loop)
    local digits = h:sub(125, 136):gsub("[%z ]", "")
    local size = digits:match("^[0-7]+$") and tonumber(digits, 8) or 0
    local flag = h:sub(157, 157)
    pos = pos + 512
    local entry = { name = name, size = size, type = (flag == "0" or flag == "\0") and "file" or flag == "5" and "dir" or "other" }
    if entry.type == "file" then
      total = total + size
      if max_bytes and total > max_bytes then error({ type = "TooLarge", message = "archive larger than " .. max_bytes }, 0) end
      entry.data = bytes:sub(pos, pos + size - 1)
    end
    files[#files + 1] = entry
    pos = pos + size + (512 - size % 512) % 512
  end
  return files
end

return M
