-- fuzz_tar: lua/tar.lua's reader (tar.unpack, what sandbox.copy_out runs on
-- the archive the Docker engine sends back from the container) on arbitrary
-- bytes, with a max_bytes bound.
--
-- unpack returns entries as data (copy_out hands them to the workflow; nothing
-- writes a file by an entry's name), so a name such as "../x" or "/etc/x" is
-- only a string here. Properties: unpack ends (instruction budget), returns a
-- list or raises a typed error {type=, message=}; the file data it returns
-- adds up to at most max_bytes and to no more than the archive's own size;
-- every entry is {name = string, size = number >= 0, type = "file" | "dir" |
-- "other"}, a file's data a string of at most its size; there are at most as
-- many entries as 512-byte headers in the archive. And pack -> unpack gives
-- the files back.
local fuzz = require "fuzz"
local tar = require "tar"

local TYPES = { file = true, dir = true, other = true }

local function check(bytes, max_bytes)
  local ok, files = pcall(tar.unpack, bytes, max_bytes)
  if not ok then
    if type(files) ~= "table" or type(files.type) ~= "string" or type(files.message) ~= "string" then
      fuzz.fail("tar.unpack raised an untyped error: " .. tostring(files))
    end
    return
  end
  if type(files) ~= "table" then fuzz.fail("tar.unpack returned a " .. type(files)) end
  if #files > #bytes // 512 then fuzz.fail("more entries (" .. #files .. ") than headers in the archive") end
  local total = 0
  for i, e in ipairs(files) do
    if type(e.name) ~= "string" then fuzz.fail("entry " .. i .. " has no name") end
    if math.type(e.size) ~= "integer" or e.size < 0 then
      fuzz.fail("entry " .. i .. " has the size " .. tostring(e.size))
    end
    if not TYPES[e.type] then fuzz.fail("entry " .. i .. " has the type " .. tostring(e.type)) end
    if e.type == "file" then
      if type(e.data) ~= "string" then fuzz.fail("file entry " .. i .. " has no data") end
      if #e.data > e.size then fuzz.fail("file entry " .. i .. " has more data than its size") end
      total = total + #e.data
    elseif e.data ~= nil then
      fuzz.fail("entry " .. i .. " of type " .. e.type .. " carries data")
    end
  end
  if max_bytes and total > max_bytes then fuzz.fail("the data adds up to " .. total .. " > max_bytes " .. max_bytes) end
  if total > #bytes then fuzz.fail("the data adds up to more than the archive") end
end

-- The input's own files packed and read back: names (1-100 bytes, no NUL,
-- slash-separated) and contents from the first bytes.
local function round_trip(data)
  local files, pos = {}, 1
  while pos <= #data and #files < 8 do
    local n = data:byte(pos) % 100 + 1
    local name = data:sub(pos + 1, pos + n):gsub("%z", "_"):gsub("^/+", ""):gsub("/+$", "")
    local size = (data:byte(pos + n + 1) or 0) * 3
    local body = data:sub(pos + n + 2, pos + n + 1 + size)
    pos = pos + n + 2 + size
    if name ~= "" and not name:find("//", 1, true) then files[#files + 1] = { name = name, data = body } end
  end
  -- a name given twice, or a file that is also another's directory, is not
  -- one file each: skip those inputs
  for i, f in ipairs(files) do
    for j, g in ipairs(files) do
      if i ~= j and (f.name == g.name or g.name:sub(1, #f.name + 1) == f.name .. "/") then return end
    end
  end
  local ok, packed = pcall(tar.pack, files)
  if not ok then return end -- a name past 100 bytes once its parents are added is refused
  local back = tar.unpack(packed)
  local got = {}
  for _, e in ipairs(back) do
    if e.type == "file" then got[e.name] = e.data end
  end
  for _, f in ipairs(files) do
    if got[f.name] ~= f.data then fuzz.fail("pack -> unpack lost or changed " .. string.format("%q", f.name)) end
  end
end

return function(data)
  check(data, nil)
  check(data, 1 << 20)
  check(data, #data // 2)
  round_trip(data)
end
