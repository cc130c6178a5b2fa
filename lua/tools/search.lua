-- search (sandbox side): ripgrep over the workspace, run in the sandbox as an
-- argv list. The model's pattern, glob and path are single arguments after
-- -e / --glob / "--": never a shell string, never an option.
local common = require "tools.common"

local DEFAULT_RESULTS = 100
local MAX_RESULTS = 1000

local M = {
  name = "search",
  description = "Search file contents in the workspace (ripgrep). By default the pattern is a fixed string; " ..
    "set regex=true for a regular expression. Results are file:line:text, at most max_results lines.",
  parameters = {
    type = "object",
    properties = {
      pattern = { type = "string", minLength = 1, maxLength = 1000, description = "text (or regex) to look for" },
      path = { type = "string", minLength = 1, maxLength = 4096,
        description = "file or directory to search (default /workspace)" },
      regex = { type = "boolean", description = "treat the pattern as a regular expression (default false)" },
      ignore_case = { type = "boolean", description = "case-insensitive (default false)" },
      glob = { type = "string", minLength = 1, maxLength = 200, description = "only files matching this glob, e.g. *.py" },
      max_results = { type = "integer", minimum = 1, maximum = MAX_RESULTS,
        description = "at most this many matching lines (default 100)" },
    },
    required = { "pattern" },
    additionalProperties = false,
  },
  side = "sandbox",
  execs = true, -- runs a process in the sandbox: one at a time (lua/tools/init.lua)
  publishes = false,
  writes = false,
}

-- The argv for ripgrep (exposed for tests).
function M.argv(args)
  local abs = args.path and common.workspace_path(args.path) or common.WORKSPACE
  local max = args.max_results or DEFAULT_RESULTS
  local argv = { "rg", "--no-config", "--line-number", "--with-filename", "--no-heading", "--color", "never",
    "--max-columns", "400", "--max-columns-preview", "--max-filesize", "4M", "--max-count", tostring(max) }
  if not args.regex then argv[#argv + 1] = "--fixed-strings" end
  if args.ignore_case then argv[#argv + 1] = "--ignore-case" end
  if args.glob then
    argv[#argv + 1] = "--glob"
    argv[#argv + 1] = args.glob
  end
  argv[#argv + 1] = "-e"
  argv[#argv + 1] = args.pattern
  argv[#argv + 1] = "--"
  argv[#argv + 1] = abs
  return argv, abs, max
end

-- grep, for a sandbox image without ripgrep (same rules: argv, -e, --).
function M.grep_argv(args)
  local abs = args.path and common.workspace_path(args.path) or common.WORKSPACE
  local argv = { "grep", "-rnIH", "--color=never" }
  argv[#argv + 1] = args.regex and "-E" or "-F"
  if args.ignore_case then argv[#argv + 1] = "-i" end
  if args.glob then argv[#argv + 1] = "--include=" .. args.glob end
  argv[#argv + 1] = "-e"
  argv[#argv + 1] = args.pattern
  argv[#argv + 1] = "--"
  argv[#argv + 1] = abs
  return argv
end

function M.run(ctx, args)
  local sandbox = require "sandbox"
  local argv, abs, max = M.argv(args)
  local opts = { timeout = 60, max_output = 1024 * 1024, workdir = common.WORKDIR }
  local r = sandbox.exec(ctx.sandbox, argv, opts)
  if r.exit_code == 127 then r = sandbox.exec(ctx.sandbox, M.grep_argv(args), opts) end
  if r.error then common.raise("SearchFailed", r.error) end
  if r.exit_code == 1 then
    return { content = "no matches for " .. string.format("%q", args.pattern) .. " in " .. abs,
      data = { matches = 0 } }
  end
  if r.exit_code ~= 0 and (r.stdout or "") == "" then
    common.raise("SearchFailed", "search failed (exit " .. tostring(r.exit_code) .. "): " ..
      common.cap(r.stderr or "", 2000, "error"))
  end
  local lines, total = {}, 0
  for line in (r.stdout or ""):gmatch("[^\n]+") do
    total = total + 1
    if total <= max then lines[#lines + 1] = common.cap(line, 500, "line") end
  end
  local content = table.concat(lines, "\n")
  if total > max then
    content = content .. string.format("\n[%d more matching lines not shown; narrow the search]", total - max)
  end
  return { content = common.cap(content, 128 * 1024, "results"), data = { matches = total, shown = #lines } }
end

return M
