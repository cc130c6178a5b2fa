-- write_file (sandbox side): writes a file under permissions.writablePaths
-- only. The path is checked here, before the sandbox is touched; safefs then
-- checks again (no "..", no symlinks) when it writes.
local common = require "tools.common"

return {
  name = "write_file",
  description = "Create or overwrite a text file in a writable workspace directory (by default " ..
    "/workspace/working and /workspace/output). Relative paths are taken from /workspace/working.",
  parameters = {
    type = "object",
    properties = {
      path = { type = "string", minLength = 1, maxLength = 4096, description = "the file to write" },
      content = { type = "string", maxLength = 4 * 1024 * 1024, description = "the full new content" },
    },
    required = { "path", "content" },
    additionalProperties = false,
  },
  side = "sandbox",
  publishes = false,
  writes = true,
  run = function(ctx, args)
    local abs = common.resolve(args.path)
    if not common.is_writable(abs, ctx.permissions) then
      local roots = common.writable_roots(ctx.permissions)
      common.raise("PermissionDenied", abs .. " is not under a writable path (" ..
        (#roots > 0 and table.concat(roots, ", ") or "none") .. ")")
    end
    local sandbox = require "sandbox"
    sandbox.write_file(ctx.sandbox, abs, args.content)
    return { content = string.format("wrote %d bytes to %s", #args.content, abs),
      data = { path = abs, bytes = #args.content } }
  end,
}
