-- Activities for the session's sandbox: wf.activity("sandbox.provision", ...)
-- and friends. Each takes and returns plain tables (recorded in the history);
-- the sandbox handle from provision is passed back in as args.sandbox.
local sandbox = require "sandbox"
local activity = require "activity"

local M = {}

-- A sandbox of another session (a fork's copy of its source's handle) is
-- never used from here: an error, before anything touches it.
local function own(sb)
  local why = sandbox.foreign(sb, activity.info().workflow_id)
  if why then error({ type = "SandboxForeign", message = why, non_retryable = true }, 0) end
  return sb
end

function M.provision(args) return sandbox.provision(args) end
function M.exec(args) return sandbox.exec(own(args.sandbox), args.cmd, args) end
function M.read_file(args) return sandbox.read_file(own(args.sandbox), args.path, args.max_bytes) end
function M.write_file(args) return sandbox.write_file(own(args.sandbox), args.path, args.content) end
function M.list_files(args) return sandbox.list_files(own(args.sandbox), args.path) end
function M.collect(args) return sandbox.collect(own(args.sandbox), args.max_bytes) end
function M.copy_in(args) return sandbox.copy_in(own(args.sandbox), args.path, args.files) end
function M.copy_out(args) return sandbox.copy_out(own(args.sandbox), args.path, args.max_bytes) end
-- workspace snapshots (lua/workspace_snapshots.lua): taken after a turn whose
-- tools could write; restored into a fork's own new sandbox
function M.snapshot(args)
  local sb = own(args.sandbox)
  -- never an empty tree for a workspace this host cannot see: not kept, and said so
  local ok, why = sandbox.reachable(sb)
  if not ok then return { unkept = "the sandbox could not be read: " .. tostring(why) } end
  return require("workspace_snapshots").take(sb.workspace, args.prev, args.budget_left)
end
function M.restore(args)
  local sb = own(args.sandbox)
  return require("workspace_snapshots").restore(sb.workspace, args.tree, sandbox.workspace_owner(sb),
    require("sandbox.common").host_command)
end
-- a fork that never made a sandbox of its own leaves its source's alone
function M.destroy(args)
  local why = sandbox.foreign(args.sandbox, activity.info().workflow_id)
  if why then return { removed = false, kept = why } end
  return sandbox.destroy(args.sandbox)
end
-- after a provision that did not complete: by the session's id alone
function M.destroy_session(args) return sandbox.destroy_session(args.session_id, require("activity").sleep) end

return M
