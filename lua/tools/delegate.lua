-- delegate (workflow side): starts a sub-session, an agent session of its
-- own (a child workflow of workflows/agent_session.lua), and gives its final
-- result back as the call's result. Offered only when the session's input has
-- delegation.enabled. Unlike the other tools it is not in the registry
-- (lua/tools/init.lua NAMES) and never runs in session.tool: the session's
-- workflow checks the call (lua/delegation.lua: a subset of this session's
-- permissions, limits drawn from what it has left) and starts the child
-- itself. This module is its definition: what the model is offered and what
-- the policies see (side "workflow", neither publishing nor writing: the
-- sub-session's own calls go through the policies one by one).
local LIMIT = { type = "integer", minimum = 1 }

return {
  name = "delegate",
  description = "Hand a part of your task to a sub-session: an agent of its own, in a sandbox of its own " ..
    "(the same input files, its own working/ and output/), with a subset of your tools, skills, hosts and " ..
    "writable paths and a share of your remaining limits. Several delegate calls in one turn run at once. " ..
    "Its final answer ({summary, result}) comes back as this call's result; with outputSchema, its result " ..
    "must match that JSON schema. Asking for anything you do not have yourself is refused.",
  parameters = {
    type = "object",
    properties = {
      objective = { type = "string", minLength = 1, maxLength = 20000, description = "what the sub-session is to do" },
      context = { type = "string", maxLength = 100000, description = "text added to its task under Context" },
      tools = { type = "array", maxItems = 300, items = { type = "string", minLength = 1 },
        description = "the tools it may use, a subset of yours (default: yours, without delegate)" },
      skills = { type = "array", maxItems = 100, items = { type = "string", minLength = 1 },
        description = "the skills it gets, a subset of yours (default: yours)" },
      networkAllowlist = { type = "array", maxItems = 300, items = { type = "string", minLength = 1 },
        description = "hosts its trusted-side tools may reach, a subset of yours (default: yours)" },
      writablePaths = { type = "array", maxItems = 100, items = { type = "string", minLength = 1 },
        description = "paths it may write, each one of yours or under one (default: yours)" },
      limits = {
        type = "object",
        properties = {
          maxModelTurns = LIMIT, maxToolCalls = LIMIT, maxTokens = LIMIT,
          maxCostUsd = { type = "number", minimum = 0 },
          timeoutSeconds = { type = "number", exclusiveMinimum = 0 },
        },
        additionalProperties = false,
        description = "its limits, at most what you have left (default: an equal share of what you have left " ..
          "among this turn's delegate calls and yourself)",
      },
      outputSchema = { type = "object", description = "a JSON schema its result must match" },
    },
    required = { "objective" },
    additionalProperties = false,
  },
  -- added to the description when the session's delegation.workspace is "parent"
  parent_view = "It also sees your /workspace/working, read-only, at /workspace/parent (as it is while it runs).",
  side = "workflow",
  publishes = false,
  writes = false,
}
