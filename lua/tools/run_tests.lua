-- run_tests (sandbox side): finds the project's test command from its files
-- (a Makefile with a test target -> make test; pytest configuration or test_*.py
-- files -> pytest -q; package.json with a test script -> npm test) and runs it
-- in /workspace/working, as an argv list.
local common = require "tools.common"
local shell = require "tools.shell"

local DEFAULT_TIMEOUT = 300
local MAX_TIMEOUT = 1800

local M = {
  name = "run_tests",
  description = "Run the project's tests in /workspace/working: make test, pytest -q or npm test, " ..
    "detected from the files present (or chosen with runner). Returns the exit code and the end of the output.",
  parameters = {
    type = "object",
    properties = {
      runner = { type = "string", enum = { "auto", "make", "pytest", "npm" }, description = "default auto" },
      timeout = { type = "integer", minimum = 1, maximum = MAX_TIMEOUT, description = "seconds (default 300)" },
    },
    additionalProperties = false,
  },
  side = "sandbox",
  execs = true, -- runs a process in the sandbox: one at a time (lua/tools/init.lua)
  publishes = false,
  writes = true,
}

M.COMMANDS = {
  make = { "make", "test" },
  pytest = { "pytest", "-q" },
  npm = { "npm", "test" },
}

local function read(sandbox, sb, rel)
  local ok, r = pcall(sandbox.read_file, sb, common.WORKDIR .. "/" .. rel, 256 * 1024)
  if ok and type(r) == "table" then return r.content end
  return nil
end

-- Which runner the files in /workspace/working call for (nil if none).
function M.detect(sandbox, sb)
  local makefile = read(sandbox, sb, "Makefile") or read(sandbox, sb, "makefile") or read(sandbox, sb, "GNUmakefile")
  if makefile and (makefile:find("\ntest%s*:") or makefile:find("^test%s*:")) then return "make" end
  for _, f in ipairs({ "pytest.ini", "conftest.py", "tox.ini" }) do
    if read(sandbox, sb, f) then return "pytest" end
  end
  local pyproject = read(sandbox, sb, "pyproject.toml")
  if pyproject and pyproject:find("pytest", 1, true) then return "pytest" end
  local setupcfg = read(sandbox, sb, "setup.cfg")
  if setupcfg and setupcfg:find("[tool:pytest]", 1, true) then return "pytest" end
  local ok, entries = pcall(sandbox.list_files, sb, common.WORKDIR)
  if ok and type(entries) == "table" then
    for _, e in ipairs(entries) do
      local base = tostring(e.path):match("[^/]+$") or ""
      if e.type == "file" and not tostring(e.path):find("node_modules/", 1, true)
          and (base:match("^test_.*%.py$") or base:match("_test%.py$")) then
        return "pytest"
      end
    end
  end
  local pkg = read(sandbox, sb, "package.json")
  if pkg then
    local okj, json = pcall(require, "json")
    local okd, t = false, nil
    if okj then okd, t = pcall(json.decode, pkg) end
    if okd and type(t) == "table" and type(t.scripts) == "table" and type(t.scripts.test) == "string"
        and not t.scripts.test:find("no test specified", 1, true) then
      return "npm"
    end
  end
  if makefile and makefile:find("[%s:]test[%s:]") then return "make" end
  return nil
end

-- Keeps the end of the output, where test runners put their summary.
local function tail(text, max)
  if #text <= max then return text end
  local start = #text - max + 1
  while start <= #text do
    local b = text:byte(start)
    if b < 0x80 or b >= 0xC0 then break end
    start = start + 1
  end
  return string.format("[first %d bytes not shown]\n", start - 1) .. text:sub(start)
end

function M.run(ctx, args)
  local sandbox = require "sandbox"
  local runner = args.runner or "auto"
  if runner == "auto" then
    runner = M.detect(sandbox, ctx.sandbox)
    if not runner then
      common.raise("NoTestRunner", "no tests found in /workspace/working (looked for a Makefile test target, " ..
        "pytest configuration or test_*.py files, and a package.json test script)")
    end
  end
  local limits = ctx.limits or {}
  local cap = MAX_TIMEOUT
  if type(limits.toolTimeoutSeconds) == "number" and limits.toolTimeoutSeconds > 0 then
    cap = math.min(cap, limits.toolTimeoutSeconds)
  end
  local timeout = math.max(1, math.min(args.timeout or DEFAULT_TIMEOUT, cap))
  local argv = M.COMMANDS[runner]
  local opts = { timeout = timeout, max_output = 1024 * 1024, workdir = common.WORKDIR }
  local r = sandbox.exec(ctx.sandbox, argv, opts)
  if runner == "pytest" and r.exit_code == 127 then
    argv = { "python3", "-m", "pytest", "-q" }
    r = sandbox.exec(ctx.sandbox, argv, opts)
  end
  local view = { exit_code = r.exit_code, error = r.error, stdout = tail(r.stdout or "", 48 * 1024),
    stderr = tail(r.stderr or "", 12 * 1024) }
  local verdict = r.exit_code == 0 and "PASSED" or "FAILED"
  return { content = "$ " .. table.concat(argv, " ") .. "\n" .. verdict .. "\n" .. shell.format(view),
    data = { runner = runner, command = table.concat(argv, " "), exit_code = r.exit_code, passed = r.exit_code == 0,
      timed_out = r.timed_out or false, disk_full = r.disk_full or nil } }
end

return M
