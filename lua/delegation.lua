-- delegation: the arithmetic and the checks of a sub-session (the delegate
-- tool, lua/tools/delegate.lua; workflows/agent_session.lua starts it), as
-- pure functions (tests/unit/test_delegation.lua).
--
-- Permissions only shrink: what a sub-session asks (tools, skills, network
-- hosts, writable paths) must be a subset of its parent's; it keeps every
-- approval its parent needs. Budgets only shrink, by reservation: a child's
-- limits are reserved out of what its parent has left (its limits less its
-- own spend, its ended children's spend and its running children's
-- reservations); when the child ends its actual spend replaces its
-- reservation. So a tree of sessions never spends more than its root's
-- limits allow (each limit is checked before the step that would pass it, as
-- in any session: a model turn may end past maxTokens by its own usage).
--
--   delegation.options(input)                 -> {enabled, maxSubSessions, workspace, maxDepth} | nil [, problem]
--   delegation.depth(input)                    -> how deep below its root session this one is (0: a root)
--   delegation.sub_session(parent_id, options, depth) -> the child's input.subSession
--   delegation.deeper(depth, options, asked)   -> nil | "refused: ..." (a sub-session that could delegate too deep)
--   delegation.sub_options(options, asked)     -> the child's input.delegation (nil unless it asks for delegate)
--   delegation.parent_view(input, started_by)  -> parent id | nil [, why]
--   delegation.lacks(parent, asked)            -> nil | "refused: ... lacks: tool 'shell', ..."
--   delegation.left(limits, used, reserved)    -> {maxModelTurns=, maxToolCalls=, maxTokens=, maxCostUsd=}
--   delegation.reserve(left, asked, ways)      -> limits | nil, "refused: ..."
--   delegation.settle(totals, reserved, reservation, actual)
--   delegation.spend_of(result)                -> {turns, calls, tokens, cost} | nil
local M = {}

-- The limits a child's reservation draws from, and the parent's counter each is counted in.
M.BUDGET = {
  { limit = "maxModelTurns", counter = "turns", whole = true },
  { limit = "maxToolCalls", counter = "calls", whole = true },
  { limit = "maxTokens", counter = "tokens", whole = true },
  { limit = "maxCostUsd", counter = "cost" },
}

M.DEFAULT_MAX_SUB_SESSIONS = 4
-- How many levels of sub-sessions a root session's tree may have (the
-- engine's child_max_depth bounds every tree of children as well).
M.DEFAULT_MAX_DEPTH = 3

local function contains(list, v)
  for _, x in ipairs(list or {}) do
    if x == v then return true end
  end
  return false
end

-- What a sub-session works in (delegation.workspace): a sandbox of its own,
-- or that and its parent's working/ read-only at /workspace/parent.
M.WORKSPACES = { own = true, parent = true }

-- The input's delegation ({enabled=true, maxSubSessions=, workspace=}) with
-- its defaults, or nil when the session may not delegate, or nil and the
-- problem when it asks for a workspace that is neither "own" nor "parent".
function M.options(input)
  local d = type(input) == "table" and input.delegation or nil
  if type(d) ~= "table" or d.enabled ~= true then return nil end
  local workspace = d.workspace == nil and "own" or d.workspace
  if not M.WORKSPACES[workspace] then
    return nil, string.format('delegation.workspace must be "own" or "parent" (got %s)', tostring(workspace))
  end
  return { enabled = true, maxSubSessions = d.maxSubSessions or M.DEFAULT_MAX_SUB_SESSIONS, workspace = workspace,
    maxDepth = d.maxDepth or M.DEFAULT_MAX_DEPTH }
end

-- How many levels below its root session a session is: 0 for one started
-- by a person, else its subSession.depth (absent: 1, a root's sub-session,
-- so the inputs of sub-sessions made before nesting are unchanged).
function M.depth(input)
  local sub = type(input) == "table" and input.subSession or nil
  if type(sub) ~= "table" then return 0 end
  return math.type(sub.depth) == "integer" and sub.depth or 1
end

-- A sub-session's input's subSession, as its parent (at depth) makes it.
function M.sub_session(parent_id, options, depth)
  local d = (depth or 0) + 1
  return { parent = parent_id, workspace = options.workspace == "parent" and "parent" or nil,
    depth = d > 1 and d or nil }
end

local function asks_delegate(asked)
  for _, t in ipairs(asked.tools or {}) do
    if t == "delegate" then return true end
  end
  return false
end

-- A delegate call from a session at depth whose sub-session asks for the
-- delegate tool itself: refused when that sub-session (at depth + 1) could
-- start sub-sessions deeper than options.maxDepth.
function M.deeper(depth, options, asked)
  if not asks_delegate(asked) or depth + 1 < options.maxDepth then return nil end
  return string.format("refused: the sub-session would be %d levels below its root session and could not delegate "
    .. "(delegation.maxDepth %d): ask without the tool 'delegate'", depth + 1, options.maxDepth)
end

-- The delegation a sub-session may do (its input's delegation): its
-- parent's options, only when it asked for the delegate tool.
function M.sub_options(options, asked)
  if not asks_delegate(asked) then return nil end
  return { enabled = true, maxSubSessions = options.maxSubSessions, workspace = options.workspace,
    maxDepth = options.maxDepth }
end

-- The session whose working/ a sub-session sees read-only at
-- /workspace/parent: nil when its input asks for none, else its parent's id,
-- or nil and why when the input names a parent that did not start it.
-- subSession.parent is only a claim of the input's (anyone who starts a
-- session writes it); the engine's own record of who started this workflow
-- (started_by: wf.info().parent, set by wf.child, nil for a session started
-- by a person) is the trust anchor: the two must agree.
function M.parent_view(input, started_by)
  local sub = type(input) == "table" and input.subSession or nil
  if type(sub) ~= "table" or sub.workspace ~= "parent" then return nil end
  if type(sub.parent) ~= "string" or sub.parent == "" or sub.parent ~= started_by then
    return nil, string.format("subSession.workspace \"parent\": this session was not started by session %s " ..
      "(its parent is %s), so it may not see that session's workspace", tostring(sub.parent),
      started_by and tostring(started_by) or "none")
  end
  return sub.parent
end

-- A network allowlist entry of the child's is the parent's, or under one of
-- its "*.suffix" entries (the same port part, if any).
local function host_covered(parent_list, host)
  host = host:lower()
  for _, p in ipairs(parent_list or {}) do
    p = tostring(p):lower()
    if p == host then return true end
    local suffix = p:match("^%*(%..+)$")
    if suffix and #host > #suffix and host:sub(-#suffix) == suffix then return true end
  end
  return false
end

-- A writable path of the child's is the parent's, or under one.
local function path_covered(parent_list, path)
  if path:find("%.%.") then return false end
  path = path:gsub("/+$", "")
  for _, p in ipairs(parent_list or {}) do
    p = tostring(p):gsub("/+$", "")
    if path == p or path:sub(1, #p + 1) == p .. "/" then return true end
  end
  return false
end

-- What the child asks that the parent lacks, each named: nil when nothing.
-- parent and asked: {tools=, skills=, networkAllowlist=, writablePaths=}
-- (an asked field nil inherits the parent's). The delegate tool is one of
-- the parent's like any other (how deep a tree may go: M.deeper).
function M.lacks(parent, asked)
  local missing = {}
  local function lack(fmt, v) missing[#missing + 1] = string.format(fmt, tostring(v)) end
  for _, t in ipairs(asked.tools or {}) do
    if not contains(parent.tools, t) then lack("tool '%s'", t) end
  end
  for _, k in ipairs(asked.skills or {}) do
    if not contains(parent.skills, k) then lack("skill '%s'", k) end
  end
  for _, h in ipairs(asked.networkAllowlist or {}) do
    if not host_covered(parent.networkAllowlist, tostring(h)) then lack("network host '%s'", h) end
  end
  for _, w in ipairs(asked.writablePaths or {}) do
    if not path_covered(parent.writablePaths, tostring(w)) then lack("writable path '%s'", w) end
  end
  if #missing == 0 then return nil end
  return "refused: the sub-session asks for what this session lacks: " .. table.concat(missing, ", ")
end

-- What the parent has left to reserve, per limit: its limits less used
-- (its own and its ended children's spend) and reserved (its running
-- children's reservations). A maxCostUsd of 0 (no limit) stays 0.
function M.left(limits, used, reserved)
  local out = {}
  for _, b in ipairs(M.BUDGET) do
    local max = limits[b.limit] or 0
    if b.limit == "maxCostUsd" and max <= 0 then
      out[b.limit] = 0
    else
      out[b.limit] = math.max(0, max - (used[b.counter] or 0) - (reserved[b.counter] or 0))
    end
  end
  return out
end

local function fmt_num(v)
  if math.type(v) == "integer" or (math.type(v) == "float" and v == math.floor(v) and math.abs(v) < 2 ^ 53) then
    return string.format("%d", math.floor(v))
  end
  return string.format("%.6g", v)
end

-- The child's limits: each asked limit if the parent has that much left,
-- else an equal share of what is left among ways (this turn's delegate
-- calls still to start, this one included, and the parent itself: ways =
-- calls + 1). Returns the limits, or nil and why (naming each limit).
function M.reserve(left, asked, ways)
  asked = asked or {}
  local out, short = {}, {}
  for _, b in ipairs(M.BUDGET) do
    local k, have, want = b.limit, left[b.limit], asked[b.limit]
    if b.limit == "maxCostUsd" and have == 0 then
      -- the parent has no cost limit: neither has the child, unless it asks one
      out[k] = want or 0
    elseif want ~= nil then
      if want > have then
        short[#short + 1] = string.format("%s %s asked, %s left", k, fmt_num(want), fmt_num(have))
      else
        out[k] = want
      end
    else
      local share = have / ways
      if b.whole then share = math.floor(share) end
      if share <= 0 or (b.whole and share < 1) then
        short[#short + 1] = string.format("%s: %s left to share", k, fmt_num(have))
      else
        out[k] = share
      end
    end
  end
  if #short > 0 then
    return nil, "refused: this session has not enough budget left for the sub-session: " .. table.concat(short, "; ")
  end
  return out
end

-- A child's spend from its result (or its error's usage): nil when unknown.
function M.spend_of(r)
  if type(r) ~= "table" or type(r.tokens) ~= "number" then return nil end
  local sub = type(r.sub_sessions) == "table" and r.sub_sessions or {}
  return { turns = (r.turns or 0) + (sub.turns or 0), calls = (r.tool_calls or 0) + (sub.tool_calls or 0),
    tokens = r.tokens, cost = r.cost_usd or 0 }
end

-- The child ended: its reservation is given back and its actual spend
-- counted (the whole reservation when its spend is unknown: a bound).
-- totals and reserved are {turns, calls, tokens, cost}, changed in place.
function M.settle(totals, reserved, reservation, actual)
  for _, b in ipairs(M.BUDGET) do
    local c = b.counter
    local r = reservation[b.limit] or 0
    reserved[c] = (reserved[c] or 0) - r
    totals[c] = (totals[c] or 0) + (actual and (actual[c] or 0) or r)
  end
end

return M
