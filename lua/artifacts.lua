-- Artifacts: files kept byte-exact by content hash in ENGINE_ARTIFACTS
-- (default: `artifacts/` beside the workspaces), their contents never in the
-- event log, only {path, sha256, size, stored} (docs/agent-sessions.md).
-- Used by the session's output/ (session.persist), the PR review's draft and
-- an eval's suite_result.json. Activities side.
local fs = require "fs"
local safefs = require "safefs"
local util = require "util"

local M = {}

-- The directory artifacts are stored in (made when missing).
function M.root()
  local ws = require("sandbox").workspace_root()
  local root = os.getenv("ENGINE_ARTIFACTS") or ((ws:match("^(.*)/[^/]+/?$") or ".") .. "/artifacts")
  local made, merr = fs.mkdir_p(root)
  if not made then util.raise("ArtifactError", "cannot create the artifacts directory: " .. tostring(merr)) end
  return root
end

-- Stores content under its hash in root (once: a file already there is the
-- same bytes) and returns its entry {path, sha256, size, stored}.
function M.store(root, path, content)
  local hash = require("sandbox.native").sha256(content)
  local have = io.open(root .. "/" .. hash, "rb")
  if have then
    have:close()
  else
    local ok, err = safefs.write(root, hash, content)
    if not ok then util.raise("ArtifactError", "cannot store " .. safefs.render(path) .. ": " .. tostring(err)) end
  end
  return { path = path, sha256 = hash, size = #content, stored = root .. "/" .. hash }
end

return M
