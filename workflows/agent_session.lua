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
local wf = require "workflow"
local compaction = require "compaction" -- context compaction, bounded runs

local function status(s, extra)
  local p = { status = s }
  for k, v in pairs(extra or {}) do p[k] = v end
  wf.emit("session.status", p)
end

-- A short, stable digest of a tool call's arguments, for approval request ids.
local function digest(s)
  local h = 5381
  for i = 1, #s do h = (h * 33 + s:byte(i)) % 4294967296 end
  return string.format("%08x", h)
end

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

return function(input)
  local id = wf.info().id
  -- a later run of a session that continued as new (lua/compaction.lua)
  local carried = compaction.carried(wf, input)
  if carried then input = carried.input end
  local prep = carried and carried.prep or wf.activity("session.prepare", { input = input, session_id = id },
    { start_to_close = 60, retry = { max_attempts = 3 } })
  if not prep.ok then
    wf.emit("session.failed", { reason = "invalid input", problems = prep.problems })
    error({ type = "InvalidInput", message = "invalid input: " .. table.concat(prep.problems, "; "),
      problems = prep.problems }, 0)
  end
  local limits, perms = prep.limits, prep.permissions
  -- in whole milliseconds, as the log keeps time: float seconds could leave a
  -- sliver of time (1e-16 s) after the timer that ends it has fired
  local function now_ms() return math.floor(wf.now() * 1000 + 0.5) end
  local started = wf.now()
  local deadline_ms = now_ms() + math.floor(limits.timeoutSeconds * 1000)
  if carried then
    started, deadline_ms = carried.started, carried.deadline_ms
    compaction.resume(wf, carried)
  else
    wf.emit("session.created", { objective = input.objective, model = prep.model.name, tools = perms.tools,
      skills = input.skills or {}, limits = limits, identity = input.identity, caps = prep.caps,
      concurrency = prep.concurrency })
    wf.checkpoint("message", function() return prep.first_message end)
  end

  -- The engine's limits (lua/caps.lua; nil without a limits file) and the
  -- input's concurrency key: slots held until the run ends, waited for in
  -- line (status queued). The session's own clock starts once it is let in.
  local caps, conc, provider = prep.caps or {}, prep.concurrency, prep.provider
  local admitted = false
  if conc then
    -- a continued run waits in line for its slot again, whatever the strategy
    local got = wf.acquire("session-key", { key = conc.key, limit = conc.limit,
      strategy = carried and "queue" or conc.strategy })
    if not got then
      local msg = string.format("concurrency key '%s' is at its limit of %d (strategy drop)", conc.key, conc.limit)
      wf.emit("session.failed", { reason = "concurrency", error = msg, key = conc.key, limit = conc.limit })
      error({ type = "ConcurrencyDropped", message = msg, key = conc.key, limit = conc.limit }, 0)
    end
    admitted = true
  end
  if caps.sessions then
    wf.acquire("sessions", { limit = caps.sessions })
    admitted = true
  end

  if not carried then status("PROVISIONING") end
  if caps.sandboxes then
    wf.acquire("sandboxes", { limit = caps.sandboxes })
    admitted = true
  end
  if admitted and not carried then
    started = wf.now()
    deadline_ms = now_ms() + math.floor(limits.timeoutSeconds * 1000)
  end
  local function provision()
    return wf.activity("sandbox.provision", { session_id = id, task = prep.task, simple = prep.simple,
      files = prep.files, skills = prep.skills, writable = perms.writablePaths, limits = limits },
      { start_to_close = 300, retry = { max_attempts = 3 } })
  end
  local provisioned, sb = pcall(function()
    if carried then return carried.sandbox end
    return provision()
  end)
  if not provisioned then
    -- cut short (cancelled: a newer start with the same concurrency key, engine
    -- cancel) or failed part-way: what it made is found by the session's id
    wf.activity("sandbox.destroy_session", { session_id = id }, { retry = { max_attempts = 10, initial_interval = 1 } })
    if caps.sandboxes then wf.release("sandboxes") end
    error(sb, 0)
  end
  if not carried then wf.emit("sandbox.ready", { driver = sb.driver, container = sb.container_id, host = sb.host }) end
  -- A tool found the sandbox out of reach (the session moved to a worker on
  -- another host, or the container went with a restart): a new one, from the
  -- same inputs, recorded; what the model wrote in the old one is gone. Once
  -- per lost sandbox, however many calls found it lost.
  local function reprovision(lost, why)
    if lost ~= sb then return end
    sb = provision()
    wf.emit("sandbox.reprovisioned", { driver = sb.driver, container = sb.container_id, host = sb.host,
      from_host = lost.host, from_container = lost.container_id, reason = why })
  end

  local turns, calls, tokens, final, outcome, exceeded = 0, 0, 0, nil, "completed", nil
  local cost, prices = 0, prep.model.prices -- {input=, output=} in USD per million tokens
  local repairs, MAX_REPAIRS = 0, 2
  local last_tokens = 0
  if carried then
    local c = carried.counters
    turns, calls, tokens, cost, repairs, last_tokens = c.turns, c.calls, c.tokens, c.cost, c.repairs, c.last_tokens
  end
  local function remaining() return (deadline_ms - now_ms()) / 1000 end
  local function over(what, limit, value, extra)
    exceeded = { limit = what, max = limit, value = value }
    for k, v in pairs(extra or {}) do exceeded[k] = v end
    wf.emit("limit.exceeded", exceeded)
    outcome = "limit"
  end

  -- Quotas: the identity's use this UTC day and month, kept by the engine
  -- across sessions and restarts (wf.counter), checked before each model call.
  local quota, lim = caps.quota, caps.quota and require("caps")
  local function over_quota()
    local t = wf.now()
    for _, q in ipairs(lim.QUOTAS) do
      if quota[q] then
        local used = wf.counter(lim.counter_name(quota.identity, q, t), 0)
        if used >= quota[q] then
          over("quota", quota[q], used, { quota = q, identity = quota.identity })
          return true
        end
      end
    end
    return false
  end
  local function count_quota(turn_tokens, turn_cost)
    local t = wf.now()
    for _, q in ipairs(lim.QUOTAS) do
      local delta = q:match("^tokens") and turn_tokens or turn_cost
      if quota[q] and delta > 0 then wf.counter(lim.counter_name(quota.identity, q, t), delta) end
    end
  end

  -- A model call under the engine's caps: a slot of the provider's
  -- concurrent calls, then room in its shared rate windows. With a rate set,
  -- a 429 with a retry-after comes back at once (defer_rate_limit) and
  -- pauses the shared window, so every session on this provider waits it out
  -- (durably, here) rather than meeting 429s of its own.
  local rate = caps.rate
  local function pause_rate(seconds)
    local name = rate.requests and "requests:" or "tokens:"
    wf.rate(name .. provider, { per = rate.window, charge = 0, pause = math.min(86400, seconds) })
  end
  -- A turn's tokens are known once it is done: it reserves what this
  -- session's last turn took (sessions that start together in a window then
  -- do not all pass it) and is charged the rest afterwards.
  local model_call -- below: one model turn, abandoned on an interrupt
  local function capped_turn(mopts)
    if rate then mopts.defer_rate_limit = true end
    local rate_limited, reserved = 0, 0
    while true do
      if caps.model_calls then wf.acquire("model-calls", { key = provider, limit = caps.model_calls }) end
      if rate and rate.requests then wf.rate("requests:" .. provider, { limit = rate.requests, per = rate.window }) end
      if rate and rate.tokens then
        wf.rate("tokens:" .. provider, { limit = rate.tokens, per = rate.window, cost = last_tokens })
        reserved = reserved + last_tokens
      end
      if remaining() <= 0 then
        if caps.model_calls then wf.release("model-calls", { key = provider }) end
        return nil
      end
      local ok, turn = pcall(model_call, mopts)
      if caps.model_calls then wf.release("model-calls", { key = provider }) end
      if ok and not turn then return nil end -- abandoned: an interrupt
      if ok then
        local u = turn.usage or {}
        last_tokens = (u.input_tokens or 0) + (u.output_tokens or 0)
        if rate and rate.tokens and last_tokens > reserved then
          wf.rate("tokens:" .. provider, { per = rate.window, charge = last_tokens - reserved })
        end
        return turn
      end
      if rate and type(turn) == "table" and turn.type == "RateLimited" and turn.retry_after and rate_limited < 5 then
        rate_limited = rate_limited + 1
        pause_rate(turn.retry_after)
      else
        error(turn, 0)
      end
    end
  end
  local capped = caps.model_calls or rate
  -- the transcript's size: compacted before a turn that would not fit
  local context = compaction.session({ wf = wf, prep = prep, model_options = input.modelOptions,
    state = carried and carried.context, remaining = remaining, on_usage = function(u)
      tokens = tokens + (u.input_tokens or 0) + (u.output_tokens or 0)
      local c = prices and ((u.input_tokens or 0) * (prices.input or 0) + (u.output_tokens or 0) * (prices.output or 0)) / 1e6 or 0
      cost = cost + c
      if quota then count_quota((u.input_tokens or 0) + (u.output_tokens or 0), c) end
    end })

  -- sessions started before tool calls ran together replay their turns one call at a time
  local parallel_tools = wf.patched("parallel-tool-calls")

  -- What people tell the session (engine message, interrupt, close): one wait
  -- on the signal session:input stays open, and what it brings is taken at
  -- safe points (before a model turn, before a turn's calls run, while the
  -- session waits for a message). Sessions from before it have none.
  local inbox = parallel_tools and wf.start_wait_signal("session:input") or nil
  local interrupted, closing, abandoned_at = nil, false, nil
  if carried and carried.inbox then interrupted, closing = carried.inbox.interrupted, carried.inbox.closing == true end
  local function take(v)
    if type(v) ~= "table" then return nil end
    if v.kind == "message" then
      wf.emit("user.message", { text = v.text, sender = v.sender })
      context:add(wf.checkpoint("message", function() return { role = "user", content = v.text } end))
    elseif v.kind == "interrupt" then
      interrupted = { reason = v.text ~= "" and v.text or nil, by = v.sender }
    elseif v.kind == "close" then
      closing = true
      wf.emit("session.closing", { by = v.sender })
    end
    return v.kind
  end
  -- takes what has come, without waiting; true when a message was among it
  local function drain()
    local message = false
    while inbox and inbox:ready() do
      message = take(inbox:wait()) == "message" or message
      inbox = wf.start_wait_signal("session:input")
    end
    return message
  end
  -- waits up to idle seconds (and the session's time) for a message: true
  -- when one came, false when the session is closed, idle or out of time
  local function wait_for_message(idle)
    if drain() and not closing then return true end
    if closing then return false end
    status("WAITING_FOR_MESSAGE")
    local timer = wf.start_timer(math.max(0, math.min(idle, remaining())))
    while true do
      local i, v = wf.any({ inbox, timer })
      if i == 2 then
        wf.emit("session.idle", { seconds = math.floor(idle) })
        return false
      end
      inbox = wf.start_wait_signal("session:input")
      local kind = take(v)
      if closing then return false end
      if kind == "message" then
        status("RUNNING")
        return true
      end
    end
  end
  -- One model turn. Raced against what people send: an interrupt abandons
  -- it (recorded, so the transcript leaves its answer out when it comes);
  -- a message waits for the next turn.
  local abandoned, model_calls = false, 0
  model_call = function(mopts)
    local args = { model = prep.model, from_history = true, options = mopts }
    model_calls = model_calls + 1
    if inbox then args.call = model_calls end -- names it for an "abandoned" record (this run's calls)
    local f = wf.start_activity("model.turn", args,
      { start_to_close = math.max(1, math.min(600, remaining())), retry = { max_attempts = 3 } })
    if not inbox then return f:wait() end
    local held = {}
    while true do
      local i, v = wf.any({ f, inbox })
      if i == 1 then
        for _, h in ipairs(held) do take(h) end
        return v
      end
      inbox = wf.start_wait_signal("session:input")
      if type(v) == "table" and v.kind == "interrupt" then
        take(v)
        for _, h in ipairs(held) do take(h) end
        wf.checkpoint("abandoned", function() return { call = model_calls } end)
        abandoned, abandoned_at = true, "during a model turn (abandoned)"
        return nil
      end
      held[#held + 1] = v
    end
  end

  -- an interrupt stops the session here and waits for a message
  local function stop_if_interrupted(where)
    drain()
    if not interrupted then return true end
    wf.emit("session.interrupted", { reason = interrupted.reason, by = interrupted.by,
      at = abandoned_at or where })
    abandoned_at = nil
    interrupted = nil
    return wait_for_message(prep.chat and prep.chat.idle or remaining())
  end

  -- A turn's tool calls: checked and decided in call order, approvals asked
  -- together (answered in any order), the allowed calls run at once; what
  -- the model hears goes back in call order (lua/transcript.lua).
  local function run_calls(list)
    local plan = {}
    for i, call in ipairs(list) do
      local p = { call = call }
      plan[i] = p
      if call.error then
        -- not a tool it was offered, or arguments that are not JSON: the model hears why
        p.content = "error: " .. tostring(call.error.message)
        wf.emit("tool.result", { id = call.id, tool = call.name, ok = false, denied = true, content = p.content })
      elseif calls >= limits.maxToolCalls then
        over("maxToolCalls", limits.maxToolCalls, calls)
        p.content = "denied: the session's tool call limit is reached"
      elseif remaining() <= 0 then
        over("timeoutSeconds", limits.timeoutSeconds, wf.now() - started)
        p.content = "denied: the session's time is up"
      else
        calls = calls + 1
        wf.emit("tool.requested", { id = call.id, tool = call.name, args = call.arguments })
        -- local: a decision reads the policy files and acts on nothing; a crash
        -- before its commit decides again (the tool it allows waits for the commit)
        p.deciding = wf.start_activity("session.decide", { tool = call.name, args = call.arguments,
          permissions = perms, session_id = id, identity = input.identity },
          { retry = { max_attempts = 3 }, ["local"] = true })
      end
    end
    local asks = {}
    for _, p in ipairs(plan) do
      if p.deciding then
        local d = p.deciding:wait()
        p.decision, p.reason = d.decision, d.reason
        if p.decision == "approve" then
          p.rid = p.call.id .. "-" .. digest(p.call.arguments_json or "")
          wf.emit("approval.requested", { request_id = p.rid, tool = p.call.name, args = p.call.arguments,
            reason = p.reason, policy_hash = d.hash })
          asks[#asks + 1] = p
        end
      end
    end
    if #asks > 0 then
      local ids = {}
      for k, p in ipairs(asks) do ids[k] = p.rid end
      status("WAITING_FOR_APPROVAL", { request_id = ids[1], request_ids = #ids > 1 and ids or nil })
      local waiting, futures = {}, {}
      for k, p in ipairs(asks) do
        waiting[k] = p
        futures[k] = wf.start_wait_signal("approval:" .. p.rid,
          { timeout = math.max(0, math.min(prep.approval_timeout, remaining())) })
      end
      while #futures > 0 do
        local k, answer = wf.any(futures)
        local p = table.remove(waiting, k)
        table.remove(futures, k)
        -- anything but an explicit approval is a denial (fail closed)
        local approved = type(answer) == "table" and answer.approved == true
        p.reason = type(answer) == "table" and answer.reason or "no answer before the approval timeout"
        wf.emit("approval.decided", { request_id = p.rid, approved = approved, reason = p.reason,
          approver = type(answer) == "table" and answer.approver or nil })
        p.decision = approved and "allow" or "deny"
        if approved then p.answer = answer end
      end
      status("RUNNING")
      for _, p in ipairs(asks) do
        if p.answer then
          -- the policies see who approved (e.g. not the session's own starter) and may still deny
          p.again = wf.start_activity("session.decide", { tool = p.call.name, args = p.call.arguments,
            permissions = perms, session_id = id, identity = input.identity,
            approval = { approver = p.answer.approver, reason = p.answer.reason, request_id = p.rid } },
            { retry = { max_attempts = 3 }, ["local"] = true }) -- as above: pure of effects
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
    -- interrupted meanwhile: the calls do not run (the model hears why)
    drain()
    if interrupted then
      for _, p in ipairs(plan) do
        if p.decision == "allow" then p.decision, p.reason = "deny", "the session was interrupted" end
      end
    end
    -- calls of tools that run a process in the sandbox go one after another
    -- (in call order, each after the one before it ended); the others at once
    local exclusive, last_exclusive = prep.exclusive_tools or {}, nil
    for _, p in ipairs(plan) do
      if p.decision == "allow" then
        -- an MCP tool's call carries its server (names of credentials, never values) and schema
        local m = prep.mcp and prep.mcp.tools[p.call.name]
        if m then
          m = { server = m.server, tool = m.tool, parameters = m.parameters, checked = m.checked,
            config = prep.mcp.servers[m.server] }
        end
        local args = { tool = p.call.name, tool_call_id = p.call.id, args = p.call.arguments, sandbox = sb,
          permissions = perms, limits = limits, session_id = id, mcp = m }
        local function run()
          return wf.start_activity("session.tool", args,
            { start_to_close = math.max(1, math.min(900, remaining())), retry = { max_attempts = 2 } })
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
    for _, p in ipairs(plan) do
      local call = p.call
      if p.running then
        local r = p.running:wait()
        if r.sandbox_lost then
          reprovision(p.args.sandbox, r.sandbox_lost)
          p.args.sandbox = sb
          p.args.note = "[note: the sandbox was provisioned again (" .. r.sandbox_lost .. "); files written "
            .. "to working/ and output/ before this call are gone]"
          r = p.run():wait()
        end
        p.result_content = r.content
        if r.disk_full then over("diskMb", limits.diskMb, limits.diskMb) end
        wf.emit("tool.result", { id = call.id, tool = call.name, ok = r.ok, content = r.content:sub(1, 2000),
          truncated = (#r.content > 2000 or r.content:find("[output truncated", 1, true)) and true or nil,
          attempt = r.attempt, retried_after_interruption = r.retried_after_interruption })
      else
        if p.decision then
          p.content = "denied: " .. tostring(p.reason)
          wf.emit("tool.result", { id = call.id, tool = call.name, ok = false, denied = true, content = p.content })
        end
        -- a tool that ran is in the transcript through its own result; a call
        -- that did not run is recorded here, once
        wf.checkpoint("message", function()
          return { role = "tool", tool_call_id = call.id, name = call.name, content = p.content }
        end)
      end
      context:add(p.running and p.result_content or p.content)
    end
  end

  local ok, err = pcall(function()
    if not carried then status("RUNNING") end
    while true do
      -- a run's history is bounded: the session goes on in a new run (what
      -- people sent is taken first: an answered wait would not carry over)
      if inbox then drain() end
      context:maybe_continue({ input = { modelOptions = input.modelOptions, identity = input.identity }, prep = prep,
        sandbox = sb, started = started, deadline_ms = deadline_ms, counters = { turns = turns, calls = calls,
          tokens = tokens, cost = cost, repairs = repairs, last_tokens = last_tokens },
        inbox = { interrupted = interrupted, closing = closing } })
      -- limits are checked before the call that would exceed them
      if remaining() <= 0 then over("timeoutSeconds", limits.timeoutSeconds, wf.now() - started) break end
      if turns >= limits.maxModelTurns then over("maxModelTurns", limits.maxModelTurns, turns) break end
      if tokens >= limits.maxTokens then over("maxTokens", limits.maxTokens, tokens) break end
      if prices and limits.maxCostUsd > 0 and cost >= limits.maxCostUsd then
        over("maxCostUsd", limits.maxCostUsd, cost) break
      end
      if quota and over_quota() then break end
      if inbox and not stop_if_interrupted("before a model turn") then
        outcome = closing and outcome or "interrupted"
        break
      end
      context:before_turn()
      turns = turns + 1
      local mopts = { lenient_tools = true } -- an unknown tool or bad arguments go back to the model
      for k, v in pairs(input.modelOptions or {}) do mopts[k] = v end
      local turn = context:turn(function()
        if capped then return capped_turn(mopts) end
        return model_call(mopts)
      end)
      if not turn and abandoned then -- interrupted: the next turn starts after a message
        abandoned = false
        turns = turns - 1
        goto next_turn
      end
      if not turn then -- the time ran out waiting for a slot or the rate
        turns = turns - 1
        over("timeoutSeconds", limits.timeoutSeconds, wf.now() - started)
        break
      end
      local u = turn.usage or {}
      local turn_tokens, turn_cost = (u.input_tokens or 0) + (u.output_tokens or 0), 0
      tokens = tokens + (u.input_tokens or 0) + (u.output_tokens or 0)
      if prices then
        turn_cost = ((u.input_tokens or 0) * (prices.input or 0) + (u.output_tokens or 0) * (prices.output or 0)) / 1e6
        cost = cost + turn_cost
      end
      if quota then count_quota(turn_tokens, turn_cost) end
      wf.emit("agent.message", { text = turn.text, turn = turns, usage = u, tool_calls = #(turn.tool_calls or {}) })
      if not turn.tool_calls or #turn.tool_calls == 0 then
        -- validateResult: the answer must be a JSON object (matching the
        -- input's resultSchema); a bad one gets a bounded number of repair turns
        local result, problem = decode_result(turn.text), nil
        if prep.chat then
          -- a chat session's answers are text; it waits for the next message
          final = turn.text
          if not wait_for_message(prep.chat.idle) then break end
        elseif not result then
          problem = "the answer is not a JSON object"
        elseif prep.result_schema then
          -- local: a pure check of the result against its schema
          local v = wf.activity("session.validate_result", { schema = prep.result_schema,
            result = result.result or result }, { ["local"] = true })
          if not v.ok then problem = "the result does not match the schema: " .. table.concat(v.errors or {}, "; ") end
        end
        if prep.chat then
          -- the next turn answers the message
        elseif not problem or repairs >= MAX_REPAIRS then
          final = turn.text
          break
        else
        repairs = repairs + 1
        wf.emit("session.status", { status = "REPAIRING", problem = problem })
        context:add(wf.checkpoint("message", function()
          return { role = "user", content = "Your final answer could not be used: " .. problem ..
            ". Reply with the JSON object only: {\"summary\": \"...\", \"result\": {...}}." }
        end))
        end
      elseif parallel_tools then
        run_calls(turn.tool_calls)
      else -- a session started before calls ran together: one at a time, as its log has them
        for _, call in ipairs(turn.tool_calls) do run_calls({ call }) end
      end
      if exceeded then break end
      ::next_turn::
    end

    local result = final and decode_result(final)
    if final and prep.chat and not result then result = { summary = final } end
    if final and prep.result_schema and result then
      local v = wf.activity("session.validate_result", { schema = prep.result_schema, result = result.result or result },
        { ["local"] = true }) -- a pure check
      if not v.ok then result = nil end
    end
    if final and not result then
      wf.emit("session.status", { status = "RESULT_INVALID", repairs = repairs })
      outcome = "invalid_result"
    end

    -- persistArtifacts: collected and stored in one step, so no file's content
    -- enters the history; every entry of output/ not saved is reported
    local art = wf.activity("session.persist", { sandbox = sb }, { start_to_close = 900 })
    local saved = art.saved
    for _, a in ipairs(saved) do wf.emit("artifact.saved", a) end
    for _, s in ipairs(art.skipped) do wf.emit("artifact.skipped", s) end

    -- memory: each proposed update needs an approval before it is applied
    if result and type(result.memory_updates) == "table" and prep.memory_file then
      for i, update in ipairs(result.memory_updates) do
        local rid = "memory-" .. i .. "-" .. digest(type(update) == "table" and require("json").encode(update) or tostring(update))
        wf.emit("approval.requested", { request_id = rid, kind = "memory", update = update })
        status("WAITING_FOR_APPROVAL", { request_id = rid })
        local answer = wf.wait_signal("approval:" .. rid, { timeout = math.max(0, math.min(prep.approval_timeout, remaining())) })
        local approved = type(answer) == "table" and answer.approved == true
        wf.emit("approval.decided", { request_id = rid, approved = approved })
        if approved then
          wf.activity("session.apply_memory", { memory_file = prep.memory_file, update = update, session_id = id,
            approver = answer.approver })
          wf.emit("memory.updated", { update = update, approver = answer.approver, session = id })
        end
      end
    end
    return { summary = result and result.summary or final, result = result and result.result, raw = final,
      turns = turns, tool_calls = calls, tokens = tokens, cost_usd = prices and cost or nil, artifacts = saved,
      outcome = outcome, limit = exceeded }
  end)

  status("DESTROYING")
  wf.activity("sandbox.destroy", { sandbox = sb }, { retry = { max_attempts = 10, initial_interval = 1 } })
  if caps.sandboxes then wf.release("sandboxes") end -- the other slots go with the run's end
  if not ok then
    wf.emit("session.failed", { error = type(err) == "table" and err.message or tostring(err) })
    error(err, 0)
  end
  wf.emit("session.completed", { outcome = err.outcome, summary = err.summary, turns = err.turns,
    tool_calls = err.tool_calls, tokens = err.tokens })
  return err
end
