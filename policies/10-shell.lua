-- 10-shell: a shell command runs without a human's approval only when it is
-- proven read-only, or proven to write nothing outside working/ and output/
-- (policylib.commands reads it: every simple command, redirection, cd, wrapper
-- and option of the programs in its audited table). Everything else asks:
-- programs that run other programs (git grep -O, find -exec, xargs, env,
-- interpreters, editors, pagers), options that write files, variables that
-- change what runs, substitutions, functions, unknown programs. This policy
-- never denies, and abstains for every other tool.

local WORKDIR = "/workspace/working" -- where the shell tool starts
local WRITABLE = { "/workspace/working", "/workspace/output" }

-- pytest, python3 -m pytest, make test and npm test run the project's own
-- code, as the run_tests tool does; set this to false to ask for them too.
local TEST_RUNS = true

return {
  name = "shell",
  decide = function(req)
    if req.tool ~= "shell" then return nil end
    local command = type(req.args) == "table" and req.args.command or nil
    if type(command) ~= "string" then return "approve", "shell: no command string to analyse" end
    local why = policylib.commands.analyze(command, { cwd = WORKDIR, writable = WRITABLE, test_runners = TEST_RUNS })
    if why then return "approve", "shell: " .. why end
    return "allow", "shell: read-only or confined to /workspace/working and /workspace/output"
  end,
}
