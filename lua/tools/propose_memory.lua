-- propose_memory (trusted side, publishes): proposes an entry of memory
-- (docs/memory.md) that later sessions read: knowledge (a fact) or
-- preferences (of the session's starter). Publishing: the policies ask a
-- person by default (policies/20-publish.lua); a proposal that cannot be
-- stored (kind instructions, text too long) is refused before anyone is
-- asked (lua/memory.lua check_proposal, in session.decide). Once approved,
-- the entry is recorded with its provenance, once however often the call's
-- activity runs (its id comes from the activity's idempotency key).
local memory = require "memory"

return {
  name = "propose_memory",
  description = "Propose an entry of memory for later sessions: kind knowledge (a fact worth remembering, with " ..
    "the evidence for it) or preferences (how the person who started this session wants things done). A person " ..
    "approves or refuses each proposal; a refused one is not kept.",
  parameters = {
    type = "object",
    properties = {
      kind = { type = "string", enum = { "knowledge", "preferences" } },
      text = { type = "string", minLength = 1, maxLength = memory.TEXT_MAX, description = "the entry, one statement" },
      evidence = { type = "string", maxLength = memory.EVIDENCE_MAX,
        description = "where it comes from: a file and line, a command's output, what the user said" },
    },
    required = { "kind", "text" },
    additionalProperties = false,
  },
  side = "trusted",
  publishes = true, -- later sessions read it: a person decides
  writes = true,
  run = function(ctx, args)
    local call = ctx.memory
    if type(call) ~= "table" then
      error({ type = "NotApproved", message = "propose_memory runs only as an agent session's approved call" }, 0)
    end
    local problem = memory.check_proposal(args, call.identity)
    if problem then error({ type = "InvalidArguments", message = problem }, 0) end
    local entry = memory.record(args, call, ctx.session_id)
    require("activity").crash_point("memory.recorded") -- the tests' kill -9 after the write
    return { content = string.format("stored as memory entry %s (%s), approved by %s", entry.id, entry.kind,
      tostring(entry.approver)), data = { memory_entry = entry } }
  end,
}
