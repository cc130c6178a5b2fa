-- Workspace snapshots: a sandbox's working/ and output/ kept after a turn
-- whose tools could write them, so that a fork of the session (engine fork,
-- docs/forking.md) starts on the workspace its source had at the fork point,
-- byte for byte. Activities side (lua/activities/sandbox.lua).
--
-- A snapshot is content-addressed and de-duplicated like the artifacts
-- (lua/artifacts.lua, the same directory): each file's bytes are stored once
-- under their SHA-256, and a manifest lists the tree (every directory, every
-- file with its hash, size and mode), stored under its own hash, which is the
-- snapshot's id ("tree"). Its contents never enter the event log: the log
-- records the tree's hash, its files and bytes.
--
-- Crash-safe: every blob is written to a temporary name and renamed
-- (safefs.write), the manifest last, and the activity's completion is what
-- records the snapshot: a kill -9 part-way leaves blobs no snapshot names
-- (the next attempt writes the same ones) and no snapshot recorded.
--
-- Not kept: symlinks and special files (a tree holding one is not a
-- snapshot: the session records why, and a fork after that point is refused).
local fs = require "fs"
local safefs = require "safefs"
local util = require "util"
local artifacts = require "artifacts"

local M = {}

-- input/ too: a fork provisions its sandbox from the snapshot, not from the
-- context files, which may be gone by then (a PR review's checkout is)
M.DIRS = { "input", "working", "output" }
local OWNED = { "working", "output" } -- the sandbox's user's; input/ stays the engine's
M.MAX_ENTRIES = 100000
M.MAX_FILE_BYTES = 1024 * 1024 * 1024

local function sha256(s) return require("sandbox.native").sha256(s) end

-- The tree of workspace ws: {entries = {{path, type = "dir"|"file", mode,
-- size, sha256, data}}, bytes}, sorted by path; or nil and why it cannot be
-- kept (a symlink, a special file, a path too long, an unreadable file).
-- with_data: the files' bytes are read too (else hashed in place).
local function walk(ws, with_data)
  local out, bytes = {}, 0
  for _, top in ipairs(M.DIRS) do
    local st = fs.lstat(ws .. "/" .. top)
    if st and st.type == "dir" then
      out[#out + 1] = { path = top, type = "dir", mode = st.mode }
      local entries, err = safefs.list(ws, top, { max_entries = M.MAX_ENTRIES, max_depth = 64 })
      if not entries then return nil, top .. "/ cannot be listed: " .. tostring(err) end
      for _, e in ipairs(entries) do
        local shown = e.skipped == "path_too_long" and e.path or safefs.render(e.path)
        if e.skipped then return nil, shown .. ": " .. tostring(e.skipped) end
        local lst = fs.lstat(ws .. "/" .. e.path)
        if not lst then return nil, shown .. ": vanished while it was read" end
        if e.type == "dir" then
          out[#out + 1] = { path = e.path, type = "dir", mode = lst.mode }
        elseif e.type == "file" then
          local f = { path = e.path, type = "file", mode = lst.mode }
          local data, rerr, truncated = safefs.read(ws, e.path, M.MAX_FILE_BYTES)
          if not data then return nil, shown .. ": unreadable: " .. tostring(rerr) end
          if truncated then return nil, shown .. ": larger than " .. M.MAX_FILE_BYTES .. " bytes" end
          f.size, f.sha256 = #data, sha256(data)
          if with_data then f.data = data end
          bytes = bytes + #data
          out[#out + 1] = f
        else
          return nil, shown .. ": a " .. tostring(e.type) .. " (only files and directories are kept)"
        end
      end
    end
  end
  table.sort(out, function(a, b) return a.path < b.path end)
  return { entries = out, bytes = bytes }
end

-- The manifest's text: one line per entry, sorted; its hash is the tree's.
-- The mode's permission bits are part of it.
local function manifest(entries)
  local lines = { "engine-workspace-snapshot 1" }
  for _, e in ipairs(entries) do
    if e.type == "dir" then
      lines[#lines + 1] = string.format("d %04o - - %s", e.mode & 4095, e.path)
    else
      lines[#lines + 1] = string.format("f %04o %s %d %s", e.mode & 4095, e.sha256, e.size, e.path)
    end
  end
  return table.concat(lines, "\n") .. "\n"
end

local function parse(text)
  local entries, first = {}, true
  for line in text:gmatch("[^\n]+") do
    if first then
      if line ~= "engine-workspace-snapshot 1" then return nil end
      first = false
    else
      local kind, mode, hash, size, path = line:match("^([df]) (%d+) (%S+) (%S+) (.+)$")
      if not kind then return nil end
      entries[#entries + 1] = { type = kind == "d" and "dir" or "file", mode = tonumber(mode, 8),
        sha256 = kind == "f" and hash or nil, size = kind == "f" and tonumber(size) or nil, path = path }
    end
  end
  return not first and entries or nil
end

-- Takes a snapshot of workspace ws. prev: the session's previous snapshot's
-- tree (its files are not counted again), budget_left: bytes the session may
-- still add. Returns {tree, files, bytes, new_bytes} or, past the budget,
-- {over = true, new_bytes, budget_left} with nothing stored; {unkept = why}
-- when the tree holds what a snapshot cannot keep.
function M.take(ws, prev, budget_left)
  local t, why = walk(ws, false)
  if not t then return { unkept = why } end
  local had = {}
  if prev then
    local root = artifacts.root()
    local text = safefs.read(root, prev, 64 * 1024 * 1024)
    for _, e in ipairs(text and parse(text) or {}) do if e.sha256 then had[e.sha256] = true end end
  end
  local new_bytes, files, counted = 0, 0, {}
  for _, e in ipairs(t.entries) do
    if e.type == "file" then
      files = files + 1
      if not had[e.sha256] and not counted[e.sha256] then
        counted[e.sha256] = true
        new_bytes = new_bytes + e.size
      end
    end
  end
  if budget_left and new_bytes > budget_left then
    return { over = true, new_bytes = new_bytes, budget_left = budget_left, files = files, bytes = t.bytes }
  end
  local root = artifacts.root()
  for _, e in ipairs(t.entries) do
    if e.type == "file" then
      local data = safefs.read(ws, e.path, M.MAX_FILE_BYTES)
      if not data or sha256(data) ~= e.sha256 then
        util.raise("SnapshotError", "the workspace changed while its snapshot was taken: " .. safefs.render(e.path))
      end
      artifacts.store(root, e.path, data)
    end
  end
  -- the crash tests' kill -9 here: the blobs stored, no manifest, nothing recorded
  local okc, activity = pcall(require, "activity")
  if okc and activity.crash_point then activity.crash_point("snapshot_blobs") end
  local text = manifest(t.entries)
  local m = artifacts.store(root, "snapshot manifest", text)
  return { tree = m.sha256, files = files, bytes = t.bytes, new_bytes = new_bytes }
end

-- The tree hash of workspace ws as it is now (nothing stored), or nil, why.
function M.tree_of(ws)
  local t, why = walk(ws, false)
  if not t then return nil, why end
  return sha256(manifest(t.entries))
end

-- Restores snapshot tree into workspace ws (a fresh sandbox's: its input/,
-- working/ and output/ empty), working/ and output/ owned by owner ("uid:gid", or nil: the engine's), then
-- checks the result: its tree hash must be the snapshot's. Raises
-- WorkspaceNotRebuildable naming what is missing or differs.
function M.restore(ws, tree, owner, host)
  local root = artifacts.root()
  local text = safefs.read(root, tree, 64 * 1024 * 1024)
  if not text or sha256(text) ~= tree then
    util.raise("WorkspaceNotRebuildable", "the workspace snapshot " .. tree .. " is not in " .. root ..
      " (or no longer has its hash)", { non_retryable = true })
  end
  local entries = parse(text)
  if not entries then
    util.raise("WorkspaceNotRebuildable", "the workspace snapshot " .. tree .. " is not a snapshot manifest",
      { non_retryable = true })
  end
  local modes = {}
  for _, e in ipairs(entries) do
    if e.type == "dir" then
      local ok, err = fs.mkdir_p(ws .. "/" .. e.path, 448) -- 0700 until its mode is set below
      if not ok then util.raise("WorkspaceError", "cannot make " .. safefs.render(e.path) .. ": " .. tostring(err)) end
    else
      local data = safefs.read(root, e.sha256, M.MAX_FILE_BYTES)
      if not data or sha256(data) ~= e.sha256 then
        util.raise("WorkspaceNotRebuildable", "the snapshot's file " .. safefs.render(e.path) .. " (" .. e.sha256 ..
          ") is missing from " .. root .. " or no longer has its hash", { non_retryable = true })
      end
      local ok, err = safefs.write(ws, e.path, data, { mkdirs = true, mode = 384 })
      if not ok then util.raise("WorkspaceError", "cannot write " .. safefs.render(e.path) .. ": " .. tostring(err)) end
    end
    local m = string.format("%04o", e.mode & 4095)
    modes[m] = modes[m] or {}
    table.insert(modes[m], ws .. "/" .. e.path)
  end
  -- ownership, then the modes (a directory made read-only last), in few processes
  if owner then
    for _, d in ipairs(OWNED) do
      local ok, why = host({ "chown", "-R", "--", owner, ws .. "/" .. d })
      if not ok then util.raise("WorkspaceError", "cannot give the restored workspace to " .. owner .. ": " .. tostring(why)) end
    end
  end
  for m, paths in pairs(modes) do
    for i = 1, #paths, 200 do
      local argv = { "chmod", m, "--" }
      for k = i, math.min(#paths, i + 199) do argv[#argv + 1] = paths[k] end
      local ok, why = host(argv)
      if not ok then util.raise("WorkspaceError", "cannot set the restored files' modes: " .. tostring(why)) end
    end
  end
  local got, why = M.tree_of(ws)
  if got ~= tree then
    util.raise("WorkspaceNotRebuildable", "the restored workspace is not the snapshot's (" .. tostring(why or got) ..
      " instead of " .. tree .. ")", { non_retryable = true })
  end
  return { tree = tree, files = #entries }
end

return M
