-- Activities for the session's sandbox: wf.activity("sandbox.provision", ...)
-- and friends. Each takes and returns plain tables (recorded in the history);
-- the sandbox handle from provision is passed back in as args.sandbox.
local sandbox = require "sandbox"

local M = {}

function M.provision(args) return sandbox.provision(args) end
function M.exec(args) return sandbox.exec(args.sandbox, args.cmd, args) end
function M.read_file(args) return sandbox.read_file(args.sandbox, args.path, args.max_bytes) end
function M.write_file(args) return sandbox.write_file(args.sandbox, args.path, args.content) end
function M.list_files(args) return sandbox.list_files(args.sandbox, args.path) end
function M.collect(args) return sandbox.collect(args.sandbox, args.max_bytes) end
function M.copy_in(args) return sandbox.copy_in(args.sandbox, args.path, args.files) end
function M.copy_out(args) return sandbox.copy_out(args.sandbox, args.path, args.max_bytes) end
function M.destroy(args) return sandbox.destroy(args.sandbox) end
-- after a provision that did not complete: by the session's id alone
function M.destroy_session(args) return sandbox.destroy_session(args.session_id, require("activity").sleep) end

return M
