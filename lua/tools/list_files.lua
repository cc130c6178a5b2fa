-- list_files (sandbox side): lists a workspace directory (recursively) through
-- safefs, which never follows symlinks.
local common = require "tools.common"

return {
  name = "list_files",
  description = "List the files under a workspace directory, recursively, with their sizes. " ..
    "The path defaults to /workspace; relative paths are taken from /workspace/working.",
  parameters = {
    type = "object",
    properties = {
      path = { type = "string", minLength = 1, maxLength = 4096, description = "the directory (default /workspace)" },
      max_entries = { type = "integer", minimum = 1, maximum = 5000, description = "at most this many entries (default 500)" },
    },
    additionalProperties = false,
  },
  side = "sandbox",
  publishes = false,
  writes = false,
  run = function(ctx, args)
    local sandbox = require "sandbox"
    local abs = args.path and common.workspace_path(args.path) or common.WORKSPACE
    local entries = sandbox.list_files(ctx.sandbox, abs ~= common.WORKSPACE and abs or nil)
    local max = args.max_entries or 500
    local lines = {}
    for i, e in ipairs(entries) do
      if i > max then
        lines[#lines + 1] = string.format("[%d more entries not shown]", #entries - max)
        break
      end
      local p = tostring(e.path)
      if p:sub(1, 1) ~= "/" then p = common.WORKSPACE .. "/" .. p end
      if e.type == "dir" then
        lines[#lines + 1] = p .. "/"
      elseif e.type == "file" then
        lines[#lines + 1] = string.format("%s  (%d bytes)", p, e.size or 0)
      else
        lines[#lines + 1] = string.format("%s  (%s)", p, tostring(e.type))
      end
    end
    local header = string.format("%s: %d entries", abs, #entries)
    if #entries == 0 then header = abs .. ": empty" end
    return { content = header .. (#lines > 0 and ("\n" .. table.concat(lines, "\n")) or ""),
      data = { path = abs, count = #entries } }
  end,
}
