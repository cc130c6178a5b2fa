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
    -- safefs marks what it did not list: a directory at the depth limit, a
    -- path of 4 KiB or more (shown cut), one it could not read, and a last
    -- {type = "more"} entry counting what is past its own cap
    local shown, uncounted = {}, 0
    for _, e in ipairs(entries) do
      if e.type == "more" then uncounted = uncounted + (e.count or 0) else shown[#shown + 1] = e end
    end
    local total = #shown + uncounted
    local lines = {}
    for i, e in ipairs(shown) do
      if i > max then break end
      local p = tostring(e.path)
      if p:sub(1, 1) ~= "/" then p = common.WORKSPACE .. "/" .. p end
      if e.skipped == "path_too_long" then
        lines[#lines + 1] = string.format("%s  (%s; path too long to list: %d bytes)", p, tostring(e.type),
          e.path_bytes or 0)
      elseif e.type == "dir" then
        lines[#lines + 1] = p .. "/" .. (e.skipped == "too_deep" and "  (contents not listed: too deep)"
          or e.skipped == "unreadable" and "  (unreadable)" or "")
      elseif e.type == "file" then
        lines[#lines + 1] = string.format("%s  (%d bytes)", p, e.size or 0)
      else
        lines[#lines + 1] = string.format("%s  (%s)", p, tostring(e.type))
      end
    end
    local more = total - math.min(#shown, max)
    if more > 0 then lines[#lines + 1] = string.format("[%d more entries not shown]", more) end
    local header = string.format("%s: %d entries", abs, total)
    if total == 0 then header = abs .. ": empty" end
    return { content = header .. (#lines > 0 and ("\n" .. table.concat(lines, "\n")) or ""),
      data = { path = abs, count = total } }
  end,
}
