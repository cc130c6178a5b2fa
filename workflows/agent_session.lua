-- agent_session.lua: one durable agent session.
--
--   prepareSession -> provisionSandbox -> runAgent (model <-> tools, approvals)
--   -> validateResult -> persistArtifacts -> destroySandbox -> COMPLETED
--
-- Each model turn and each tool call is its own activity: a crash resumes at
-- the last completed step. Tool calls go through the policy set (recorded with
-- its hash, so a replay gives the same answer after a policy edit); calls that
-- need approval wait for `engine approve` (durably, for days if need be). The
-- sandbox is destroyed on every path. Every step shows up in the session's
-- event stream (`engine events ID --follow`).
--
-- The third design on the spine (lua/spine.lua, docs/runtime-designs.md):
-- the stages are the top-level functions below, in the order the session
-- runs them, handed to the spine at the end (prepare, acquire: the sandbox,
-- context: the agent loop's state, model: the agent loop, validate, persist,
-- release: the sandbox destroyed); the session's events, admission, clock,
-- limits and clean-up order are the spine's. They share one table, the
-- session's state (`s`, made by prepare). The script is replayed from its
-- log: a change to it (or to the spine) must keep the order and the arguments
-- of every durable call (activities, timers, signals, checkpoints, slots,
-- counters, emits), or sessions recorded before it no longer replay (`engine
-- replay ID --script` checks one).
--
-- input schema: ../lua/types/agent_session_input.schema.json
local wf = require "workflow"
local caps = require "caps"             -- the engine's caps, rates and quotas (workflow side)
local compaction = require "compaction" -- context compaction, bounded runs
local delegation = require "delegation" -- sub-sessions: permissions and budgets that only shrink
local grants = require "grants"         -- what the session may do on the trusted side (docs/grants.md)
local spine = require("spine").new(wf)  -- the stages' runner: events, admission, clock, limits, clean-up
local memory = require "memory"         -- memory by kind: what it read, what it proposes (docs/memory.md)

local MAX_REPAIRS = 2 -- turns that may fix an answer that cannot be used

-- The spine's (lua/spine.lua): the session's status, clock and limits.
local status, now_ms, start_clock, remaining = spine.status, spine.now_ms, spine.start_clock, spine.remaining
local used, fork_with, over, over_time, spend = spine.used, spine.fork_with, spine.over, spine.over_time, spine.spend
local limit_reached, step_opts, in_time = spine.limit_reached, spine.step_opts, spine.in_time

-- ------------------------------------------------------------ helpers --

-- What its sub-sessions spent, in its result (its tokens and cost include
-- it; its turns and tool calls are its own): nil when it has none.
local function sub_totals(s)
  if not s.sub or s.sub.count == 0 then return nil end
  return { count = s.sub.count, turns = s.sub.turns, tool_calls = s.sub.calls, tokens = s.sub.tokens,
    cost_usd = s.prices and s.sub.cost or nil }
end

-- A short, stable digest of a tool call's arguments, for approval request ids.
local function digest(text)
  local h = 5381
  for i = 1, #text do h = (h * 33 + text:byte(i)) % 4294967296 end
  return string.format("%08x", h)
end

-- The answer as a JSON object (bare, or in a ```json block or braces), or nil.
local function decode_result(text)
  local json = require "json"
  local ok, v = pcall(json.decode, (text or ""):match("^%s*(.-)%s*$"))
  if ok and type(v) == "table" then return v end
  local inner = (text or ""):match("```json%s*(.-)%s*```") or (text or ""):match("(%b{})")
  if inner then
    ok, v = pcall(json.decode, inner)
    if ok and type(v) == "table" then return v end
  end
  return nil
end

-- --------------------------------------------------- prepareSession --

-- The input checked and resolved (session.prepare), or, in a later run of a
-- session that continued as new (lua/compaction.lua), what its first run
-- prepared. Returns the session's state, which the stages fill in:
--   id, input, prep, limits, perms, caps, provider, carried   (prepare)
--   view                          the parent whose working/ it sees (a sub-session's, prepare)
--   started, deadline_ms          the session's clock (prepare, admit)
--   sb                            the sandbox handle (provision, reprovision)
--   turns, calls, tokens, cost, repairs, prices, quota, gate, context,
--   parallel_tools, inbox, interrupted, closing, abandoned, abandoned_at,
--   model_calls                   the agent loop's (start_agent)
--   final, outcome, exceeded      how it ended (run_agent, validate_result)
local function prepare(input)
  local s = { id = wf.info().id }
  -- sessions recorded before grants have none (their tools ran as they did)
  local granted = wf.patched("grants")
  local carried = compaction.carried(wf, input)
  if carried then input = carried.input end
  -- a sub-session that sees its parent's working/ (subSession.workspace
  -- "parent"): only the session the engine recorded as its parent (wf.child)
  -- can be that parent, whatever the input names
  local view, not_parent = delegation.parent_view(input, wf.info().parent)
  if not_parent then spine.refuse({ not_parent }) end
  s.view = view
  local prep = carried and carried.prep or wf.activity("session.prepare", { input = input, session_id = s.id },
    { start_to_close = 60, retry = { max_attempts = 3 } })
  if not prep.ok then spine.refuse(prep.problems) end
  s.input, s.carried, s.prep = input, carried, prep
  if granted and not (carried and not carried.grants) then -- a run continued from one before grants has none
    -- what it asked for (input.grants) within what its starter holds
    -- (input.starterGrants, the engine's): a continued run keeps its first
    -- run's, and the uses counted so far
    local g = carried and carried.grants
    if not g then
      local of, problems = grants.of_input(input)
      if not of then spine.refuse(problems) end
      g = { effective = of.effective, dropped = of.dropped, uses = {} }
    end
    s.grants, s.grants_dropped, s.grant_uses = g.effective, g.dropped, g.uses or {}
  end
  s.parent = type(input.subSession) == "table" and input.subSession.parent or nil -- a sub-session's delegating session
  s.limits, s.perms = prep.limits, prep.permissions
  s.caps, s.provider = prep.caps or {}, prep.provider
  if s.parent then
    -- a sub-session runs in its parent's slots of the engine-wide caps:
    -- waiting for one of its own while its parent holds one and waits for it
    -- would never end once parents hold every slot. A tree is bounded by
    -- child_max_fanout and delegation.maxSubSessions instead.
    local own = {}
    for k, v in pairs(s.caps) do own[k] = v end
    own.sessions, own.sandboxes = nil, nil
    s.caps = own
  end
  start_clock(s)
  if carried then
    s.started, s.deadline_ms = carried.started, carried.deadline_ms
    compaction.resume(wf, carried)
  else
    wf.emit("session.created", { objective = input.objective, model = prep.model.name, tools = s.perms.tools,
      skills = input.skills or {}, limits = s.limits, identity = input.identity, caps = prep.caps,
      concurrency = prep.concurrency, parent_session = s.parent, grants = s.grants,
      grants_not_held = s.grants_dropped and #s.grants_dropped > 0 and s.grants_dropped or nil })
    if prep.memory_read then wf.emit("memory.read", prep.memory_read) end -- (in its first message)
    wf.checkpoint("message", function() return prep.first_message end)
  end
  return s
end

-- ------------------------------------------------- provisionSandbox --

-- restoring: its input/ comes from a workspace snapshot, not the context files
local function new_sandbox(s, restoring)
  local prep = s.prep
  return wf.activity("sandbox.provision", { session_id = s.id, task = prep.task, simple = prep.simple,
    files = restoring and {} or prep.files, skills = prep.skills, writable = s.perms.writablePaths, limits = s.limits,
    parent_view = s.view },
    { start_to_close = 300, retry = { max_attempts = 3 } })
end

-- The sandbox (a continued run keeps its first run's). Cut short (cancelled:
-- a newer start with the same concurrency key, engine cancel) or failed
-- part-way, what it made is found by the session's id and removed.
local function provision(s)
  local provisioned, sb = pcall(function()
    if s.carried then return s.carried.sandbox end
    return new_sandbox(s)
  end)
  if not provisioned then
    wf.activity("sandbox.destroy_session", { session_id = s.id }, { retry = { max_attempts = 10, initial_interval = 1 } })
    caps.release(wf, s.caps, "sandboxes")
    error(sb, 0)
  end
  s.sb = sb
  if not s.carried then wf.emit("sandbox.ready", { driver = sb.driver, container = sb.container_id, host = sb.host }) end
end

-- A tool found the sandbox out of reach (the session moved to a worker on
-- another host, or the container went with a restart): a new one, from the
-- same inputs, recorded; what the model wrote in the old one is gone. Once
-- per lost sandbox, however many calls found it lost.
local function reprovision(s, lost, why)
  if lost ~= s.sb then return end
  s.sb = new_sandbox(s)
  if s.ws then s.ws.dirty = s.turns end -- its workspace is not the last snapshot's any more
  wf.emit("sandbox.reprovisioned", { driver = s.sb.driver, container = s.sb.container_id, host = s.sb.host,
    from_host = lost.host, from_container = lost.container_id, reason = why })
end

-- --------------------------------------------- workspace snapshots --
-- The workspace goes with a fork (docs/forking.md, "The workspace"): once
-- provisioned and after each turn whose tools could write it, input/,
-- working/ and output/ are kept as a snapshot (lua/workspace_snapshots.lua:
-- content-addressed, each file once, within limits.snapshotMb), and a fork
-- provisions a sandbox of its own and restores the last snapshot before its
-- point into it, or fails before its first tool runs when its point's
-- workspace was never kept (engine fork refuses what the events already say:
-- engine/ops/fork_workspace.c). Sessions from before snapshots were taken
-- replay without them (wf.patched).
--   s.ws = {on, budget, used, tree (the last snapshot), dirty (the turn whose
--   tools wrote since it), stopped (why no more are taken), written}

-- Tools that never write the workspace (the rest may: a process in the
-- sandbox, a file written, an MCP tool).
local READ_ONLY_TOOLS = { read_file = true, list_files = true, search = true, publish_review = true,
  http_fetch = true, delegate = true, propose_memory = true }

local function start_snapshots(s)
  local mb = s.limits.snapshotMb or 0 -- (prepared before the limit existed: none; its default is the schema's)
  s.ws = { on = wf.patched("workspace-snapshots") and mb > 0, budget = math.floor(mb * 1024 * 1024), used = 0 }
  if s.carried and s.carried.workspace then
    for k, v in pairs(s.carried.workspace) do s.ws[k] = v end
  end
end

-- The sandbox as provisioned (its input/, turn 0): what a fork before any
-- write restores, when the context files it came from are gone.
local function first_snapshot(s)
  if s.carried or not s.ws.on then return end
  s.ws.dirty = 0
end

-- A call of tool ran in the sandbox and may have written its workspace.
local function wrote(s, tool)
  if READ_ONLY_TOOLS[tool] then return end
  s.ws.dirty = s.ws.dirty or s.turns
  s.ws.written = true
end

-- A fork's sandbox: a session forked after its source provisioned holds the
-- source's handle (copied history), never its to use. Before its first use
-- after the fork point, the fork provisions its own and restores into it the
-- last snapshot before the point; or fails, saying why, when the source's
-- workspace at the point was never kept. Nothing in the copied prefix (where
-- wf.info().fork is nil): it replays as recorded.
local function own_sandbox(s)
  local sb = s.sb
  if not (type(sb) == "table" and sb.session_id and sb.session_id ~= s.id and wf.info().fork) then return end
  local ws, why = s.ws, nil
  if ws.stopped then
    why = ws.stopped
  elseif not ws.on and ws.written then
    why = "the source took no workspace snapshots (it started before they were, or with limits.snapshotMb 0) "
      .. "and its tools wrote the workspace"
  elseif ws.dirty and ws.dirty > 0 then -- (0: the first snapshot not taken yet, nothing written)
    why = string.format("the tools of turn %d wrote the workspace after %s and before the fork point; fork at that "
      .. "turn's workspace.snapshot event or before its tool calls", ws.dirty,
      ws.tree and "the last snapshot" or "the sandbox was provisioned")
  end
  if why then
    error({ type = "WorkspaceNotRebuildable", message = "the workspace of session " .. sb.session_id ..
      " at the fork point cannot be rebuilt: " .. why }, 0)
  end
  s.sb = new_sandbox(s, ws.tree ~= nil)
  local restored = ws.tree and wf.activity("sandbox.restore", { sandbox = s.sb, tree = ws.tree },
    { start_to_close = 600, retry = { max_attempts = 3 } })
  wf.emit("workspace.restored", { from = sb.session_id, tree = ws.tree, files = restored and restored.files or 0,
    driver = s.sb.driver, container = s.sb.container_id, host = s.sb.host })
end

-- After a turn's tool calls: a snapshot when one of them may have written.
local function snapshot_workspace(s)
  local ws = s.ws
  if not (ws and ws.on and ws.dirty and not ws.stopped) then return end
  own_sandbox(s)
  local r = wf.activity("sandbox.snapshot", { sandbox = s.sb, prev = ws.tree, budget_left = ws.budget - ws.used },
    { start_to_close = 600, retry = { max_attempts = 3 } })
  if r.over or r.unkept then
    ws.stopped = r.over and string.format("the session's workspace snapshots reached their budget (limits.snapshotMb "
      .. "%s: %d of %d bytes stored) at turn %d, whose snapshot needs %d more", tostring(s.limits.snapshotMb),
      ws.used, ws.budget, s.turns, r.new_bytes)
      or string.format("turn %d left what a snapshot cannot keep: %s", s.turns, tostring(r.unkept))
    wf.emit("workspace.unrebuildable", { turn = s.turns, reason = ws.stopped, budget_bytes = ws.budget,
      used_bytes = ws.used, needed_bytes = r.new_bytes })
    return
  end
  ws.tree, ws.used, ws.dirty = r.tree, ws.used + r.new_bytes, nil
  wf.emit("workspace.snapshot", { turn = s.turns, tree = r.tree, files = r.files, bytes = r.bytes,
    new_bytes = r.new_bytes, used_bytes = ws.used, budget_bytes = ws.budget })
end

-- ------------------------------------------------ what people send --
-- What people tell the session (engine message, interrupt, close): one wait
-- on the signal session:input stays open, and what it brings is taken at
-- safe points (before a model turn, before a turn's calls run, while the
-- session waits for a message). Sessions from before it have none.

local function take(s, v)
  if type(v) ~= "table" then return nil end
  if v.kind == "message" then
    wf.emit("user.message", { text = v.text, sender = v.sender })
    s.context:add(wf.checkpoint("message", function() return { role = "user", content = v.text } end))
  elseif v.kind == "interrupt" then
    s.interrupted = { reason = v.text ~= "" and v.text or nil, by = v.sender }
  elseif v.kind == "close" then
    s.closing = true
    wf.emit("session.closing", { by = v.sender })
  end
  return v.kind
end

-- Takes what has come, without waiting; true when a message was among it.
local function drain(s)
  local message = false
  while s.inbox and s.inbox:ready() do
    message = take(s, s.inbox:wait()) == "message" or message
    s.inbox = wf.start_wait_signal("session:input")
  end
  return message
end

-- Waits up to idle seconds (and the session's time) for a message: true when
-- one came, false when the session is closed, idle or out of time.
local function wait_for_message(s, idle)
  if drain(s) and not s.closing then return true end
  if s.closing then return false end
  status("WAITING_FOR_MESSAGE")
  local timer = wf.start_timer(math.max(0, math.min(idle, remaining(s))))
  while true do
    local i, v = wf.any({ s.inbox, timer })
    if i == 2 then
      wf.emit("session.idle", { seconds = math.floor(idle) })
      return false
    end
    s.inbox = wf.start_wait_signal("session:input")
    local kind = take(s, v)
    if s.closing then return false end
    if kind == "message" then
      status("RUNNING")
      return true
    end
  end
end

-- An interrupt stops the session here and waits for a message; false when
-- none comes.
local function stop_if_interrupted(s, where)
  drain(s)
  if not s.interrupted then return true end
  wf.emit("session.interrupted", { reason = s.interrupted.reason, by = s.interrupted.by,
    at = s.abandoned_at or where })
  s.abandoned_at = nil
  s.interrupted = nil
  return wait_for_message(s, s.prep.chat and s.prep.chat.idle or remaining(s))
end

-- ------------------------------------------------------- model turns --

-- One model turn. Raced against what people send: an interrupt abandons it
-- (recorded, so the transcript leaves its answer out when it comes); a
-- message waits for the next turn. nil when abandoned.
local function model_call(s, mopts)
  local args = { model = fork_with("model") or s.prep.model, from_history = true, options = mopts }
  s.model_calls = s.model_calls + 1
  if s.inbox then args.call = s.model_calls end -- names it for an "abandoned" record (this run's calls)
  local f = wf.start_activity("model.turn", args,
    step_opts(s, 600, { retry = { max_attempts = 3 } }))
  if not s.inbox then return f:wait() end
  local held = {}
  while true do
    local i, v = wf.any({ f, s.inbox })
    if i == 1 then
      for _, h in ipairs(held) do take(s, h) end
      return v
    end
    s.inbox = wf.start_wait_signal("session:input")
    if type(v) == "table" and v.kind == "interrupt" then
      take(s, v)
      for _, h in ipairs(held) do take(s, h) end
      wf.checkpoint("abandoned", function() return { call = s.model_calls } end)
      s.abandoned, s.abandoned_at = true, "during a model turn (abandoned)"
      return nil
    end
    held[#held + 1] = v
  end
end

-- The next model turn, under the provider's caps and the context's size.
-- Returns the turn, or nil and "abandoned" (an interrupt: the next turn
-- starts after a message) or "timeout" (the time ran out waiting for a slot
-- or the rate).
local function model_turn(s)
  -- a compaction or a model call that times out with the session's time is that time running out
  if not in_time(s, function() s.context:before_turn() return true end) then
    over_time(s)
    return nil, "timeout"
  end
  s.turns = s.turns + 1
  local mopts = { lenient_tools = true } -- an unknown tool or bad arguments go back to the model
  for k, v in pairs(s.input.modelOptions or {}) do mopts[k] = v end
  local turn = in_time(s, s.context.turn, s.context, function()
    return s.gate:turn(mopts, function(o) return model_call(s, o) end, function() return remaining(s) end)
  end)
  if turn then return turn end
  s.turns = s.turns - 1
  if s.abandoned then
    s.abandoned = false
    return nil, "abandoned"
  end
  over_time(s)
  return nil, "timeout"
end

-- A turn with no tool calls is an answer (validateResult): it must be a JSON
-- object (matching the input's resultSchema); a bad one gets a bounded number
-- of repair turns. A chat session's answers are text: it waits for the next
-- message. Returns true when the session's turns are over.
local function answered(s, turn)
  local prep = s.prep
  local result, problem = decode_result(turn.text), nil
  if prep.chat then
    s.final = turn.text
    if not wait_for_message(s, prep.chat.idle) then return true end
    return false -- the next turn answers the message
  elseif not result then
    problem = "the answer is not a JSON object"
  elseif prep.result_schema then
    -- local: a pure check of the result against its schema
    local v = wf.activity("session.validate_result", { schema = prep.result_schema,
      result = result.result or result }, { ["local"] = true })
    if not v.ok then problem = "the result does not match the schema: " .. table.concat(v.errors or {}, "; ") end
  end
  if not problem or s.repairs >= MAX_REPAIRS then
    s.final = turn.text
    return true
  end
  s.repairs = s.repairs + 1
  status("REPAIRING", { problem = problem })
  s.context:add(wf.checkpoint("message", function()
    return { role = "user", content = "Your final answer could not be used: " .. problem ..
      ". Reply with the JSON object only: {\"summary\": \"...\", \"result\": {...}}." }
  end))
  return false
end

-- ------------------------------------------------------- tool calls --
-- A turn's tool calls: checked and decided in call order, approvals asked
-- together (answered in any order), the allowed calls run at once; what the
-- model hears goes back in call order (lua/transcript.lua). Each step below
-- takes the turn's plan: one entry {call=, ...} per call, in call order.

-- The policy's decision on a call (with who approved it, when asked again).
-- Local: a decision reads the policy files and acts on nothing; a crash
-- before its commit decides again (the tool it allows waits for the commit).
local function decide(s, call, approval)
  return wf.start_activity("session.decide", { tool = call.name, args = call.arguments,
    permissions = s.perms, session_id = s.id, identity = s.input.identity, approval = approval,
    policies = fork_with("policies"), grants = s.grants,
    -- an MCP tool's grant names its server and the tool's own name (dots and all)
    mcp_tool = s.grants and s.prep.mcp and s.prep.mcp.tools[call.name] and s.prep.mcp.tools[call.name].tool or nil },
    { retry = { max_attempts = 3 }, ["local"] = true })
end

-- The grant a call needs (d.need, from the tool's definition), checked
-- against the session's (lua/grants.lua) beside the policy's decision: a
-- call without one is denied (grant.denied names what is missing), and at
-- its start (use: true) a call with one counts a use of it (grant.used).
-- Counted from the history: a replay counts the same uses in the same order.
-- Returns true when the call may go on.
local function gate(s, p, use)
  if not s.grants then return true end
  local why, matched
  if p.need_problem then
    why = p.need_problem
  elseif p.need then
    matched, why = grants.check(s.grants, p.need, now_ms(), s.grant_uses)
  else
    return true -- a tool that needs no grant (the sandbox's)
  end
  if not matched then
    p.decision, p.reason = "deny", "grant: " .. why
    wf.emit("grant.denied", { id = p.call.id, tool = p.call.name, need = p.need and p.need.text, reason = why,
      policy = p.policy and p.policy.decision })
    return false
  end
  if use then
    s.grant_uses[matched] = (s.grant_uses[matched] or 0) + 1
    p.grant = matched
    wf.emit("grant.used", { id = p.call.id, tool = p.call.name, need = p.need.text, grant = matched,
      use = s.grant_uses[matched] })
  end
  return true
end

-- 1. limits: a call past the session's tool calls or time is denied; the
-- others are counted, shown, and sent to the policies (all at once).
local function request_calls(s, list)
  local plan = {}
  for i, call in ipairs(list) do
    local p = { call = call }
    plan[i] = p
    if call.error then
      -- not a tool it was offered, or arguments that are not JSON: the model hears why
      p.content = "error: " .. tostring(call.error.message)
      wf.emit("tool.result", { id = call.id, tool = call.name, ok = false, denied = true, content = p.content })
    elseif used(s, "calls") >= s.limits.maxToolCalls then
      over(s, "maxToolCalls", s.limits.maxToolCalls, used(s, "calls"))
      p.content = "denied: the session's tool call limit is reached"
    elseif remaining(s) <= 0 then
      over_time(s)
      p.content = "denied: the session's time is up"
    else
      s.calls = s.calls + 1
      wf.emit("tool.requested", { id = call.id, tool = call.name, args = call.arguments })
      p.deciding = decide(s, call)
    end
  end
  return plan
end

-- 2. the decisions, in call order; the calls that need a person are asked
-- for (approval.requested) and returned.
local function collect_decisions(s, plan)
  local asks = {}
  for _, p in ipairs(plan) do
    if p.deciding then
      local d = p.deciding:wait()
      p.decision, p.reason = d.decision, d.reason
      p.policy = { decision = d.decision, reason = d.reason, hash = d.hash } -- for its span
      p.need, p.need_problem = d.need, d.need_problem
      -- a call its grants do not cover is denied before anyone is asked:
      -- no policy and no approver can allow it
      if p.decision ~= "deny" then gate(s, p, false) end
      if p.decision == "approve" then
        p.rid = p.call.id .. "-" .. digest(p.call.arguments_json or "")
        wf.emit("approval.requested", { request_id = p.rid, tool = p.call.name, args = p.call.arguments,
          reason = p.reason, policy_hash = d.hash, parent_session = s.parent })
        asks[#asks + 1] = p
      end
    end
  end
  return asks
end

-- 3. approvals: waited for together, answered in any order; anything but an
-- explicit approval is a denial (fail closed).
local function await_approvals(s, asks)
  local ids = {}
  for k, p in ipairs(asks) do ids[k] = p.rid end
  status("WAITING_FOR_APPROVAL", { request_id = ids[1], request_ids = #ids > 1 and ids or nil })
  local waiting, futures = {}, {}
  for k, p in ipairs(asks) do
    waiting[k] = p
    futures[k] = wf.start_wait_signal("approval:" .. p.rid,
      { timeout = math.max(0, math.min(s.prep.approval_timeout, remaining(s))) })
  end
  while #futures > 0 do
    local k, answer = wf.any(futures)
    local p = table.remove(waiting, k)
    table.remove(futures, k)
    local approved = type(answer) == "table" and answer.approved == true
    p.reason = type(answer) == "table" and answer.reason or "no answer before the approval timeout"
    wf.emit("approval.decided", { request_id = p.rid, approved = approved, reason = p.reason,
      approver = type(answer) == "table" and answer.approver or nil })
    p.decision = approved and "allow" or "deny"
    if approved then p.answer = answer end
  end
  status("RUNNING")
end

-- 4. the policies see who approved (e.g. not the session's own starter) and
-- may still deny.
local function redecide_approved(s, asks)
  for _, p in ipairs(asks) do
    if p.answer then
      p.again = decide(s, p.call, { approver = p.answer.approver, reason = p.answer.reason, request_id = p.rid })
    end
  end
  for _, p in ipairs(asks) do
    if p.again then
      local again = p.again:wait()
      if again.decision == "deny" then
        p.decision, p.reason = "deny", again.reason
        wf.emit("approval.overruled", { request_id = p.rid, reason = again.reason, approver = p.answer.approver })
      end
    end
  end
end

-- 5. interrupted meanwhile: the calls do not run (the model hears why).
local function deny_if_interrupted(s, plan)
  drain(s)
  if not s.interrupted then return end
  for _, p in ipairs(plan) do
    if p.decision == "allow" then p.decision, p.reason = "deny", "the session was interrupted" end
  end
end

-- What the call's spans in a trace say of how it was let run: the policy's
-- decision and the approval (options only: telemetry, not the call's arguments).
local function tool_span(p)
  local policy = p.policy or {}
  return { ["engine.policy.decision"] = policy.decision, ["engine.policy.reason"] = policy.reason,
    ["engine.policy.hash"] = policy.hash, ["engine.approval.request_id"] = p.rid,
    ["engine.approval.approved"] = p.answer and true or nil,
    ["engine.approval.approver"] = p.answer and p.answer.approver or nil }
end

-- ----------------------------------------------------------- delegate --
-- A delegate call (input.delegation) starts a sub-session: this script as a
-- child workflow, with a subset of this session's permissions and limits
-- reserved out of what it has left (lua/delegation.lua). What it asks that
-- this session lacks, or a budget too small, is refused before anything
-- starts; the call's result says why. The children of a turn run at once.

-- The child's input: this session's model, files and approvals, what the
-- call asked (checked), the limits reserved.
local function sub_input(s, args, asked, limits, timeout)
  local from = s.prep.delegation.from
  local mcp
  for _, t in ipairs(asked.tools) do
    local server = t:match("^mcp__(.-)__.")
    if server and type(from.mcpServers) == "table" and from.mcpServers[server] then
      mcp = mcp or {}
      mcp[server] = from.mcpServers[server]
    end
  end
  local lim = { timeoutSeconds = timeout, cpu = s.limits.cpu, memoryMb = s.limits.memoryMb, diskMb = s.limits.diskMb }
  for k, v in pairs(limits) do lim[k] = v end
  return { objective = args.objective, context = { text = args.context, files = from.context_files },
    skills = asked.skills, permissions = { tools = asked.tools, networkAllowlist = asked.networkAllowlist,
      writablePaths = asked.writablePaths, requiresApproval = s.perms.requiresApproval },
    limits = lim, model = from.model, modelOptions = from.modelOptions, identity = s.input.identity,
    mcpServers = mcp, compaction = from.compaction, approvalTimeoutSeconds = from.approvalTimeoutSeconds,
    resultSchema = args.outputSchema, delegation = delegation.sub_options(s.prep.delegation, asked),
    subSession = delegation.sub_session(s.id, s.prep.delegation, delegation.depth(s.input)),
    -- its starter is this session: it may hold this session's grants, except
    -- those with uses, which are this session's to count (docs/grants.md)
    starterGrants = s.grants and grants.handed_down(s.grants) or nil }
end

-- What a delegate call asks, checked: {tools, skills, networkAllowlist,
-- writablePaths} (the parent's where it asks nothing), or nil and why.
local function sub_permissions(s, args)
  local from = s.prep.delegation.from
  local own = { tools = {}, skills = from.skills, networkAllowlist = s.perms.networkAllowlist,
    writablePaths = s.perms.writablePaths }
  for _, t in ipairs(s.perms.tools) do
    if t ~= "delegate" then own.tools[#own.tools + 1] = t end
  end
  local asked = { tools = args.tools or own.tools, skills = args.skills or own.skills,
    networkAllowlist = args.networkAllowlist or own.networkAllowlist, writablePaths = args.writablePaths or own.writablePaths }
  own.tools = s.perms.tools -- delegate only when asked for by name, and the tree is not too deep for it
  local why = delegation.lacks(own, asked) or delegation.deeper(delegation.depth(s.input), s.prep.delegation, asked)
  if why then return nil, why end
  -- a session recorded before sub-sessions could delegate refused such a
  -- call: on its replay it still does (the marker is only in newer logs)
  if delegation.sub_options(s.prep.delegation, asked) and not wf.patched("nested-delegation") then
    return nil, "refused: the sub-session asks for what this session lacks: tool 'delegate' (a sub-session cannot "
      .. "delegate in turn)"
  end
  return asked
end

-- Starts a delegate call's sub-session (p.child, p.reservation), or says
-- why not (p.content). ways: this turn's delegate calls still to start,
-- this one included, and the session itself (for the shares).
local function start_delegate(s, p, ways)
  local jsonschema = require "jsonschema"
  local args = type(p.call.arguments) == "table" and p.call.arguments or {}
  local def = require "tools.delegate"
  local valid, errs = jsonschema.validate(def.parameters, args, "args")
  if not valid then
    p.content = "error: delegate: " .. table.concat(errs, "; ")
    return
  end
  if s.sub.started >= s.prep.delegation.maxSubSessions then
    p.content = string.format("refused: this session has started its %d sub-sessions (delegation.maxSubSessions)",
      s.prep.delegation.maxSubSessions)
    return
  end
  local asked, why = sub_permissions(s, args)
  if not asked then
    p.content = why
    return
  end
  if args.outputSchema ~= nil then
    local ok, problems = jsonschema.check_schema(args.outputSchema, "outputSchema")
    if not ok then
      p.content = "error: delegate: " .. table.concat(problems, "; ")
      return
    end
  end
  local left_time = math.floor(remaining(s))
  local asked_limits = args.limits or {}
  local timeout = asked_limits.timeoutSeconds or left_time
  if left_time < 1 or timeout > left_time then
    p.content = string.format("refused: this session has not enough budget left for the sub-session: "
      .. "timeoutSeconds %s asked, %d left", tostring(timeout), math.max(0, left_time))
    return
  end
  local counted = {}
  for _, b in ipairs(delegation.BUDGET) do counted[b.counter] = used(s, b.counter) end
  local limits, short = delegation.reserve(delegation.left(s.limits, counted, s.reserved),
    { maxModelTurns = asked_limits.maxModelTurns, maxToolCalls = asked_limits.maxToolCalls,
      maxTokens = asked_limits.maxTokens, maxCostUsd = asked_limits.maxCostUsd }, ways)
  if not limits then
    p.content = short
    return
  end
  for _, b in ipairs(delegation.BUDGET) do s.reserved[b.counter] = s.reserved[b.counter] + limits[b.limit] end
  s.sub.started = s.sub.started + 1
  local id = s.id .. "." .. s.sub.started
  limits.timeoutSeconds = timeout
  wf.emit("delegation.started", { id = p.call.id, child = id, objective = args.objective, tools = asked.tools,
    limits = limits })
  p.child_id, p.reservation = id, limits
  -- the parent's end (a cancel) cancels it, and its clean-up runs: no sandbox is left
  p.child = wf.start_child("agent_session", sub_input(s, args, asked, limits, timeout),
    { id = id, parent_close = "request_cancel", timeout = math.max(1, remaining(s)) })
end

-- The children of a turn, joined: each one's {ok, value} (a child's error is
-- its call's result, never the session's).
local function join_delegates(plan)
  local waits = {}
  for _, p in ipairs(plan) do
    if p.child then
      waits[#waits + 1] = wf.spawn(function(f) return { pcall(f.wait, f) } end, p.child)
      p.joined = #waits
    end
  end
  if #waits == 0 then return end
  local all = wf.all(waits)
  for _, p in ipairs(plan) do
    if p.joined then
      p.ended = all[p.joined]
      -- this session was cancelled: its clean-up runs (the children are
      -- cancelled by their parent_close); a child cancelled alone is ChildCancelled
      local e = p.ended[2]
      if not p.ended[1] and type(e) == "table" and e.type == "Cancelled" then error(e, 0) end
    end
  end
end

-- A delegate call's result: its child's answer (or its error), and its
-- actual spend in place of its reservation.
local function finish_delegate(s, p)
  local ok, r = p.ended[1], p.ended[2]
  local spend = delegation.spend_of(ok and r or (type(r) == "table" and r.usage))
  delegation.settle(s.sub, s.reserved, p.reservation, spend)
  s.sub.count = s.sub.count + 1
  local json = require "json"
  local outcome = ok and r.outcome or (type(r) == "table" and r.type or "error")
  wf.emit("delegation.ended", { id = p.call.id, child = p.child_id, ok = ok and outcome == "completed", outcome = outcome,
    tokens = spend and spend.tokens, turns = spend and spend.turns, tool_calls = spend and spend.calls,
    charged_reservation = not spend or nil })
  if not ok then
    local msg = type(r) == "table" and tostring(r.message) or tostring(r)
    return false, string.format("error: the sub-session %s failed: %s", p.child_id, msg)
  end
  if outcome == "invalid_result" then
    return false, string.format("error: the sub-session %s gave no answer matching its outputSchema: %s", p.child_id,
      tostring(r.raw))
  end
  return outcome == "completed", string.format("sub-session %s (%s): %s", p.child_id, tostring(outcome),
    json.encode({ summary = r.summary, result = r.result, turns = r.turns, tool_calls = r.tool_calls, tokens = r.tokens,
      cost_usd = r.cost_usd, limit = r.limit }))
end

-- 6. the allowed calls start: those of tools that run a process in the
-- sandbox one after another (in call order, each after the one before it
-- ended), the others at once.
local function start_calls(s, plan)
  local prep = s.prep
  local exclusive, last_exclusive = prep.exclusive_tools or {}, nil
  -- the grants again, now: time has passed (an approval), and the turn's
  -- calls before it may have used a grant up
  for _, p in ipairs(plan) do
    if p.decision == "allow" then gate(s, p, true) end
  end
  local delegates = 0
  for _, p in ipairs(plan) do
    if p.decision == "allow" and s.sub and p.call.name == "delegate" then delegates = delegates + 1 end
    if p.decision == "allow" and p.call.name ~= "delegate" then own_sandbox(s) end
  end
  for _, p in ipairs(plan) do
    if p.decision == "allow" and s.sub and p.call.name == "delegate" then
      p.delegate = true
      start_delegate(s, p, delegates + 1)
      delegates = delegates - 1
    elseif p.decision == "allow" then
      -- an MCP tool's call carries its server (names of credentials, never values) and schema
      local m = prep.mcp and prep.mcp.tools[p.call.name]
      if m then
        m = { server = m.server, tool = m.tool, parameters = m.parameters, checked = m.checked,
          config = prep.mcp.servers[m.server] }
      end
      local args = { tool = p.call.name, tool_call_id = p.call.id, args = p.call.arguments, sandbox = s.sb,
        permissions = s.perms, limits = s.limits, session_id = s.id, mcp = m, grant = p.grant,
        grants = p.grant and s.grants or nil,
        memory = memory.call_context(p.call.name, p.answer, s.input.identity, p.rid or p.call.id, now_ms()) }
      local span = tool_span(p)
      local function run()
        return wf.start_activity("session.tool", args,
          step_opts(s, 900, { retry = { max_attempts = 2 }, span_attributes = span }))
      end
      p.args, p.run = args, run
      if exclusive[p.call.name] then
        p.running = wf.spawn(function(before)
          if before then pcall(before.wait, before) end
          return run():wait()
        end, last_exclusive)
        last_exclusive = p.running
      else
        p.running = run()
      end
    end
  end
end

-- A call's message in the transcript: a tool that ran is there through its
-- own result (lua/transcript.lua); a call that did not is recorded once.
local function tool_message(call, content)
  wf.checkpoint("message", function()
    return { role = "tool", tool_call_id = call.id, name = call.name, content = content }
  end)
end

-- A started call's result: its session.tool activity's, run again in a new
-- sandbox when it found none; nil when the session's time ran out while it ran.
local function call_result(s, p)
  local function again() return in_time(s, function() return p.run():wait() end) end
  local r = in_time(s, p.running.wait, p.running)
  if r and r.sandbox_lost and wf.info().fork and p.args.sandbox.session_id ~= s.id then
    -- a call started before the fork point and run again in the fork: on its own sandbox
    own_sandbox(s)
    p.args.sandbox = s.sb
    r = again()
  end
  if r and r.sandbox_lost then
    reprovision(s, p.args.sandbox, r.sandbox_lost)
    p.args.sandbox = s.sb
    p.args.note = "[note: the sandbox was provisioned again (" .. r.sandbox_lost .. "); files written "
      .. "to working/ and output/ before this call are gone]"
    r = again()
  end
  return r
end

-- 7. the results, in call order: a call that found the sandbox lost runs
-- again in a new one; a call that did not run is recorded once, as denied,
-- and one the session's time ran out under, as such.
local function finish_calls(s, plan)
  join_delegates(plan)
  for _, p in ipairs(plan) do
    local call = p.call
    if p.delegate then
      local ok = false
      if p.child then ok, p.content = finish_delegate(s, p) end
      wf.emit("tool.result", { id = call.id, tool = call.name, ok = ok, content = p.content:sub(1, 2000),
        truncated = #p.content > 2000 or nil, denied = not p.child or nil, child = p.child_id })
      tool_message(call, p.content)
    elseif p.running then
      local r = call_result(s, p)
      if s.ws then wrote(s, call.name) end
      -- it may have written the workspace: engine fork refuses a point after it and before the turn's snapshot
      local writes = (s.ws and s.ws.on and not READ_ONLY_TOOLS[call.name]) or nil
      if r then
        p.result_content = r.content
        if r.disk_full then over(s, "diskMb", s.limits.diskMb, s.limits.diskMb) end
        wf.emit("tool.result", { id = call.id, tool = call.name, ok = r.ok, content = r.content:sub(1, 2000),
          truncated = (#r.content > 2000 or r.content:find("[output truncated", 1, true)) and true or nil,
          attempt = r.attempt, retried_after_interruption = r.retried_after_interruption, writes = writes })
        if r.memory then wf.emit("memory.stored", r.memory) end -- propose_memory's entry, approved and recorded
      else
        -- the session's time ran out while it ran: the session ends after this turn, and
        -- the call, with no result of its own, is recorded here
        if not s.exceeded then over_time(s) end
        p.running, p.content = nil, "error: the session's time ran out while the call ran"
        wf.emit("tool.result", { id = call.id, tool = call.name, ok = false, content = p.content, writes = writes })
        tool_message(call, p.content)
      end
    else
      if p.decision then
        p.content = "denied: " .. tostring(p.reason)
        wf.emit("tool.result", { id = call.id, tool = call.name, ok = false, denied = true, content = p.content })
      end
      tool_message(call, p.content)
    end
    s.context:add(p.running and p.result_content or p.content)
  end
end

local function run_calls(s, list)
  local plan = request_calls(s, list)
  local asks = collect_decisions(s, plan)
  if #asks > 0 then
    await_approvals(s, asks)
    redecide_approved(s, asks)
  end
  deny_if_interrupted(s, plan)
  start_calls(s, plan)
  finish_calls(s, plan)
end

-- ------------------------------------------------------------ runAgent --

-- What the agent loop keeps: its counters (carried by a continued run), the
-- model's gate (lua/caps.lua), the transcript's size (lua/compaction.lua) and
-- the wait for what people send.
local function start_agent(s)
  local carried = s.carried
  s.turns, s.calls, s.tokens, s.cost, s.repairs = 0, 0, 0, 0, 0
  local last_tokens = 0
  if carried then
    local c = carried.counters
    s.turns, s.calls, s.tokens, s.cost, s.repairs, last_tokens = c.turns, c.calls, c.tokens, c.cost, c.repairs,
      c.last_tokens
  end
  if s.prep.delegation then
    -- what its ended sub-sessions spent (counted against its limits) and
    -- what its running ones have reserved
    s.sub = carried and carried.counters.sub or { turns = 0, calls = 0, tokens = 0, cost = 0, started = 0, count = 0 }
    s.reserved = { turns = 0, calls = 0, tokens = 0, cost = 0 }
  end
  s.outcome, s.prices, s.quota = "completed", s.prep.model.prices, s.caps.quota
  s.gate = caps.gate(wf, s.caps, s.provider, last_tokens)
  -- the transcript's size: compacted before a turn that would not fit
  s.context = compaction.session({ wf = wf, prep = s.prep, model_options = s.input.modelOptions,
    state = carried and carried.context, remaining = function() return remaining(s) end,
    on_usage = function(u) spend(s, u) end })
  -- sessions started before tool calls ran together replay their turns one call at a time
  s.parallel_tools = wf.patched("parallel-tool-calls")
  start_snapshots(s)
  first_snapshot(s)
  s.inbox = s.parallel_tools and wf.start_wait_signal("session:input") or nil
  s.closing, s.abandoned, s.model_calls = false, false, 0
  if carried and carried.inbox then s.interrupted, s.closing = carried.inbox.interrupted, carried.inbox.closing == true end
end

-- A run's history is bounded: the session goes on in a new run with what it
-- keeps (lua/compaction.lua). Returns only when this run goes on.
local function maybe_continue(s)
  s.context:maybe_continue({ input = { modelOptions = s.input.modelOptions, identity = s.input.identity,
      subSession = s.input.subSession },
    prep = s.prep, sandbox = s.sb, started = s.started, deadline_ms = s.deadline_ms, counters = { turns = s.turns,
      calls = s.calls, tokens = s.tokens, cost = s.cost, repairs = s.repairs, last_tokens = s.gate.last_tokens,
      sub = s.sub },
    inbox = { interrupted = s.interrupted, closing = s.closing }, workspace = s.ws,
    grants = s.grants and { effective = s.grants, dropped = s.grants_dropped, uses = s.grant_uses } or nil })
end

-- The agent loop: model turns and their tool calls, until an answer, a
-- limit, an interrupt with no message after it, or the session's close.
local function run_agent(s)
  if not s.carried then status("RUNNING") end
  snapshot_workspace(s) -- turn 0's (first_snapshot)
  while true do
    -- what people sent is taken first: an answered wait would not carry over
    if s.inbox then drain(s) end
    maybe_continue(s)
    if limit_reached(s) then break end
    if s.inbox and not stop_if_interrupted(s, "before a model turn") then
      s.outcome = s.closing and s.outcome or "interrupted"
      break
    end
    local turn, why = model_turn(s)
    if why == "timeout" then break end
    if turn then
      local u = turn.usage or {}
      spend(s, u)
      wf.emit("agent.message", { text = turn.text, turn = s.turns, usage = u, tool_calls = #(turn.tool_calls or {}) })
      if not turn.tool_calls or #turn.tool_calls == 0 then
        if answered(s, turn) then break end
      elseif s.parallel_tools then
        run_calls(s, turn.tool_calls)
      else -- a session started before calls ran together: one at a time, as its log has them
        for _, call in ipairs(turn.tool_calls) do run_calls(s, { call }) end
      end
      snapshot_workspace(s)
      if s.exceeded then break end
    end
  end
end

-- ------------------------------------------------------ validateResult --

-- The final answer decoded and checked against the input's resultSchema: the
-- result, or nil (RESULT_INVALID) when there is an answer that cannot be used.
local function validate_result(s)
  local final, prep = s.final, s.prep
  local result = final and decode_result(final)
  if final and prep.chat and not result then result = { summary = final } end
  if final and prep.result_schema and result then
    local v = wf.activity("session.validate_result", { schema = prep.result_schema, result = result.result or result },
      { ["local"] = true }) -- a pure check
    if not v.ok then result = nil end
  end
  if final and not result then
    status("RESULT_INVALID", { repairs = s.repairs })
    s.outcome = "invalid_result"
  end
  return result
end

-- ---------------------------------------------------- persistArtifacts --

-- Collected and stored in one step, so no file's content enters the history;
-- every entry of output/ not saved is reported. Returns what was saved.
local function persist_artifacts(s)
  return spine.persist("session.persist", { sandbox = s.sb }, { start_to_close = 900 })
end

-- Memory: each update the answer proposes needs an approval before it is applied.
local function update_memory(s, result)
  local prep = s.prep
  if not (result and type(result.memory_updates) == "table" and prep.memory_file) then return end
  for i, update in ipairs(result.memory_updates) do
    local rid = "memory-" .. i .. "-" .. digest(type(update) == "table" and require("json").encode(update) or tostring(update))
    wf.emit("approval.requested", { request_id = rid, kind = "memory", update = update })
    status("WAITING_FOR_APPROVAL", { request_id = rid })
    local answer = wf.wait_signal("approval:" .. rid, { timeout = math.max(0, math.min(prep.approval_timeout, remaining(s))) })
    local approved = type(answer) == "table" and answer.approved == true
    wf.emit("approval.decided", { request_id = rid, approved = approved })
    if approved then
      wf.activity("session.apply_memory", { memory_file = prep.memory_file, update = update, session_id = s.id,
        approver = answer.approver })
      wf.emit("memory.updated", { update = update, approver = answer.approver, session = s.id })
    end
  end
end

-- ------------------------------------------------------ destroySandbox --

-- On every path (the spine's release); the other slots go with the run's
-- end. Returns ok and the session's result or error: a cancel while the
-- sandbox is destroyed turns it into a failure. The spine then gives the
-- sandboxes' slot back and says how the session ended.
local function destroy(s, ok, res) return spine.destroy_sandbox(s, ok, res) end

-- A sub-session's spend goes back with its error: its parent counts it.
local function failed(s, res)
  if s.parent and type(res) == "table" and s.turns then
    res.usage = { turns = s.turns, tool_calls = s.calls, tokens = used(s, "tokens"), cost_usd = used(s, "cost"),
      sub_sessions = sub_totals(s) }
  end
end

-- ------------------------------------------------------------- session --

-- The result: the answer's summary and result, the counters, the artifacts.
local function persist(s, result)
  local saved = persist_artifacts(s)
  update_memory(s, result)
  return { summary = result and result.summary or s.final, result = result and result.result, raw = s.final,
    turns = s.turns, tool_calls = s.calls, tokens = used(s, "tokens"),
    cost_usd = s.prices and used(s, "cost") or nil, sub_sessions = sub_totals(s),
    artifacts = saved, outcome = s.outcome, limit = s.exceeded }
end

-- The session on the spine: admitted with a sandbox slot (status
-- PROVISIONING between the two), the sandbox acquired and destroyed on every
-- path after it.
local DESIGN = {
  name = "agent_session", admission = { status = "PROVISIONING", sandboxes = true },
  prepare = prepare, acquire = provision, context = start_agent, model = run_agent, validate = validate_result,
  persist = persist, release = destroy, failed = failed,
}

return function(input)
  return spine.run(DESIGN, input)
end
