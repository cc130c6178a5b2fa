-- fuzz_policy_input: what the model controls on its way to a policy decision.
-- The agent loop hands a tool call's name and its arguments (any JSON the
-- model sent, not yet checked against the tool's schema) to session.decide:
-- tools.policy_request, then the shipped policy set (policies/*.lua), whose
-- shell policy reads the command line with policylib (policy_lib/shell.lua,
-- commands.lua, ...).
--
-- Input: the first line is the tool name; the rest is the arguments as JSON
-- when it starts with '{' or '[' (decoded by the engine's json), else a shell
-- command line, as {command = rest}.
--
-- Properties: nothing raises; every policy of the shipped set answers without
-- an error or running out of its instruction budget (a policy's error denies,
-- fail closed, but it is a bug: the model can make every call fail); the
-- decision is allow, deny or approve with a string reason and the set's hash;
-- commands.analyze gives nil or a reason of its own, never "could not be
-- analysed" (an internal error it caught); shell.split and shell.commands
-- return a list or nil and a reason.
local fuzz = require "fuzz"
local json = require "json"
local tools = require "tools"
local policy = require "policy"
local shell = require "policy_lib.shell"
local commands = require "policy_lib.commands"

local repo = package.searchpath("policy", package.path):match("^(.*)/lua/policy%.lua$")
local set, err = policy.load_dir(repo .. "/policies")
if not set then error("fuzz_policy_input: the shipped policies do not load: " .. tostring(err)) end

local PERMISSIONS = {
  tools = { "read_file", "list_files", "search", "shell", "write_file", "run_tests", "http_fetch", "publish_review" },
  networkAllowlist = { "api.example.test", "*.example.org" },
  writablePaths = { "/workspace/working", "/workspace/output" },
  requiresApproval = {},
}
local DECISIONS = { allow = true, deny = true, approve = true }

local function analyze(line)
  local ok, why = pcall(commands.analyze, line,
    { cwd = "/workspace/working", writable = PERMISSIONS.writablePaths, test_runners = true })
  if not ok then fuzz.fail("commands.analyze raised: " .. tostring(why)) end
  if why ~= nil and type(why) ~= "string" then fuzz.fail("commands.analyze returned a " .. type(why)) end
  if why and why:find("could not be analysed", 1, true) then fuzz.fail("commands.analyze hit an internal error: " .. why) end
  for _, f in ipairs({ "split", "commands" }) do
    local okf, r, reason = pcall(shell[f], line)
    if not okf then fuzz.fail("shell." .. f .. " raised: " .. tostring(r)) end
    if r == nil and type(reason) ~= "string" then fuzz.fail("shell." .. f .. " failed without a reason") end
    if r ~= nil and type(r) ~= "table" then fuzz.fail("shell." .. f .. " returned a " .. type(r)) end
  end
end

return function(data)
  local name, rest = data:match("^([^\n]*)\n(.*)$")
  if not name then name, rest = "shell", data end
  local args
  if rest:match("^[{[]") then
    local ok, v = pcall(json.decode, rest)
    if not ok then return end -- not JSON: the runner says so before any policy sees it
    args = v
  else
    args = { command = rest }
  end

  local okr, req = pcall(tools.policy_request, name, args, { permissions = PERMISSIONS, session_id = "fuzz" })
  if not okr then fuzz.fail("tools.policy_request raised: " .. tostring(req)) end
  local okd, d = pcall(policy.decide, set, req)
  if not okd then fuzz.fail("policy.decide raised: " .. tostring(d)) end
  if not DECISIONS[d.decision] or type(d.reason) ~= "string" or d.hash ~= set.hash then
    fuzz.fail("policy.decide gave " .. tostring(d.decision) .. ", " .. tostring(d.reason))
  end
  for _, v in ipairs(d.votes) do
    if v.error then fuzz.fail("a shipped policy failed on model input: " .. v.reason) end
  end

  if type(args) == "table" and type(args.command) == "string" then analyze(args.command) end
end
