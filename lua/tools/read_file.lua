-- read_file (sandbox side): reads a workspace file through safefs (no
-- symlinks, nothing outside /workspace).
local common = require "tools.common"

local DEFAULT_MAX = 64 * 1024
local HARD_MAX = 1024 * 1024

return {
  name = "read_file",
  description = "Read a text file from the workspace. Paths are absolute (/workspace/input/..., " ..
    "/workspace/working/..., /workspace/output/..., /workspace/task.md) or relative to /workspace/working. " ..
    "Optionally read only a range of lines. Long files are truncated.",
  parameters = {
    type = "object",
    properties = {
      path = { type = "string", minLength = 1, maxLength = 4096, description = "the file to read" },
      start_line = { type = "integer", minimum = 1, description = "first line to return (1-based)" },
      end_line = { type = "integer", minimum = 1, description = "last line to return (inclusive)" },
      max_bytes = { type = "integer", minimum = 1, maximum = HARD_MAX,
        description = "at most this many bytes (default 65536)" },
    },
    required = { "path" },
    additionalProperties = false,
  },
  side = "sandbox",
  publishes = false,
  writes = false,
  run = function(ctx, args)
    local sandbox = require "sandbox"
    local abs = common.workspace_path(args.path)
    local max = args.max_bytes or DEFAULT_MAX
    local ranged = args.start_line ~= nil or args.end_line ~= nil
    local r = sandbox.read_file(ctx.sandbox, abs, ranged and HARD_MAX or max)
    local content = r.content or ""
    if content:find("%z") then
      return { content = string.format("%s is a binary file (%d bytes read); not shown.", abs, #content),
        data = { path = abs, binary = true, bytes = #content } }
    end
    if ranged then
      local first, last = args.start_line or 1, args.end_line or math.huge
      local lines, n = {}, 0
      for line in (content .. (content:sub(-1) == "\n" and "" or "\n")):gmatch("(.-)\n") do
        n = n + 1
        if n >= first and n <= last then lines[#lines + 1] = line end
        if n > last then break end
      end
      content = table.concat(lines, "\n")
    end
    local shown, cut = common.cap(content, max, "file")
    if r.truncated and not cut then
      shown = shown .. "\n[file truncated: only the first " .. #content .. " bytes were read]"
    end
    return { content = shown, data = { path = abs, bytes = #content, truncated = (r.truncated or cut) and true or false } }
  end,
}
