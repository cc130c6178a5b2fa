-- spine.lua: the one spine every session design runs on (docs/runtime-designs.md).
--
--   prepare -> admit -> acquire -> context -> model -> validate -> persist
--           -> release (on every path) -> session.completed | session.failed
--
-- A design is a table of stages (functions of the session's state `s`); only
-- the middle moves: one model call with context computed by code
-- (workflows/one_call.lua), or an agent loop in a sandbox
-- (workflows/agent_session.lua). What every design shares is here, once: the
-- session's events (session.status, an input refused, session.completed and
-- session.failed), its admission (the concurrency key and the engine's caps,
-- lua/caps.lua), its clock and limits (timeoutSeconds, maxModelTurns,
-- maxTokens, maxCostUsd, quotas: limit.exceeded said once), the artifacts a
-- stage persisted (artifact.saved, artifact.skipped), and the clean-up that
-- runs after the stages whatever happened (a failure, a cancel, a limit).
--
-- Workflow side: every call below is a durable call of the workflow (`wf`,
-- given to new), in the order a design's history has them. A change here is a
-- change of every design's recorded commands: sessions recorded before it
-- must still replay (`engine replay ID --script`).
local caps = require "caps"

local M = {}

-- The stages, in the order run() calls them. Each is design[name](s, ...):
--   prepare(input) -> s    the input checked and resolved (refuse() names its
--                          problems); s.caps, s.prep.concurrency, s.limits set
--   acquire(s)             resources the run holds (a sandbox); what it left
--                          half-made on failure is its own to undo
--   context(s)             what the model will see, computed by code
--   model(s)               the model's part (one call, or a loop)
--   validate(s) -> result  the answer checked (repairs are the model's part)
--   persist(s, result) -> the workflow's result (artifacts kept)
--   release(s, ok, res) -> ok, res   clean-up after acquire, on every path
--   failed(s, err)         what a failure's error carries back (optional)
-- Optional: acquire, release, failed. design.name names the run in a trace;
-- design.admission = {status=, sandboxes=} (below).
M.STAGES = { "prepare", "acquire", "context", "model", "validate", "persist", "release" }

function M.new(wf)
  local S = {}

  -- A step of the session's progress (session.status {status, ...}).
  function S.status(name, extra)
    local p = { status = name }
    for k, v in pairs(extra or {}) do p[k] = v end
    wf.emit("session.status", p)
  end

  -- The input refused before anything started: every problem named
  -- (session.failed), raised as InvalidInput (engine start exits 2).
  function S.refuse(problems)
    wf.emit("session.failed", { reason = "invalid input", problems = problems })
    error({ type = "InvalidInput", message = "invalid input: " .. table.concat(problems, "; "), problems = problems }, 0)
  end

  -- A design's prepare activity (NAME.prepare {input, session_id}: {ok,
  -- problems} or the input resolved, with limits, caps and provider) run
  -- for input: the session's state with its clock started, or the input
  -- refused naming every problem.
  function S.prepared(activity, input)
    local s = { id = wf.info().id, input = input }
    local prep = wf.activity(activity, { input = input, session_id = s.id },
      { start_to_close = 60, retry = { max_attempts = 3 } })
    if not prep.ok then S.refuse(prep.problems) end
    s.prep, s.limits, s.caps, s.provider = prep, prep.limits, prep.caps or {}, prep.provider
    S.start_clock(s)
    return s
  end

  -- A design's sandbox destroyed (its release, on every path): returns ok
  -- and the session's result or error. A cancel that comes while it is
  -- being destroyed (a newer start on the session's concurrency key)
  -- abandons that attempt: the clean-up runs again (a cancel is raised once)
  -- and the session ends cancelled.
  function S.destroy_sandbox(s, ok, res)
    S.status("DESTROYING")
    local args, opts = { sandbox = s.sb }, { retry = { max_attempts = 10, initial_interval = 1 } }
    local destroyed, err = pcall(wf.activity, "sandbox.destroy", args, opts)
    if not destroyed then
      if not (type(err) == "table" and err.type == "Cancelled") then error(err, 0) end
      wf.activity("sandbox.destroy", args, opts)
      ok, res = false, err
    end
    return ok, res
  end

  -- --------------------------------------------------------- the clock --

  -- In whole milliseconds, as the log keeps time: float seconds could leave a
  -- sliver of time (1e-16 s) after the timer that ends it has fired.
  function S.now_ms() return math.floor(wf.now() * 1000 + 0.5) end

  -- The session's own clock starts (again) now.
  function S.start_clock(s)
    s.started = wf.now()
    s.deadline_ms = S.now_ms() + math.floor(s.limits.timeoutSeconds * 1000)
  end

  -- The seconds the session has left.
  function S.remaining(s) return (s.deadline_ms - S.now_ms()) / 1000 end

  -- A step's activity options (opts, with its retry) within the session's
  -- time: an attempt at most cap seconds, and every attempt, retries too,
  -- within the time left (at least a second each).
  function S.step_opts(s, cap, opts)
    local left = S.remaining(s)
    opts.start_to_close = math.max(1, math.min(cap, left))
    opts.schedule_to_close = math.max(1, left)
    return opts
  end

  -- Runs fn(...), a step bounded by S.step_opts: its results, or nil when
  -- it timed out with the session's time used up. That is the time limit
  -- reached during the step (on a slow machine, a slow sandbox or model), so
  -- the caller ends the session with its partial result (S.over_time), as
  -- when the time runs out between steps; any other error is raised.
  function S.in_time(s, fn, ...)
    local r = table.pack(pcall(fn, ...))
    if r[1] then return table.unpack(r, 2, r.n) end
    local err = r[2]
    if type(err) == "table" and err.type == "Timeout" and S.remaining(s) <= 0 then return nil end
    error(err, 0)
  end

  -- ------------------------------------------------------------ limits --

  -- A counter of the session's (turns, calls, tokens, cost) with what its
  -- ended sub-sessions spent (s.sub): what its limits are checked against.
  function S.used(s, c)
    return s[c] + (s.sub and s.sub[c] or 0)
  end

  -- A fork (engine fork --model, --policies; docs/forking.md) runs on from its
  -- fork point with another model or policy set: what its step says
  -- (wf.info().fork.with), nil before the fork point (the copied prefix
  -- replays as it was recorded) and in a session that is not a fork.
  function S.fork_with(key)
    local f = wf.info().fork
    return f and type(f.with) == "table" and f.with[key] or nil
  end

  -- A limit is reached: said once (limit.exceeded), and the session ends after this step.
  function S.over(s, what, limit, value, extra)
    s.exceeded = { limit = what, max = limit, value = value }
    for k, v in pairs(extra or {}) do s.exceeded[k] = v end
    wf.emit("limit.exceeded", s.exceeded)
    s.outcome = "limit"
  end

  function S.over_time(s) S.over(s, "timeoutSeconds", s.limits.timeoutSeconds, wf.now() - s.started) end

  -- What a model's usage costs: tokens, USD (with the model's prices, s.prices)
  -- and the identity's quota (s.quota).
  function S.spend(s, u)
    local n = (u.input_tokens or 0) + (u.output_tokens or 0)
    local prices = s.prices -- {input=, output=} in USD per million tokens
    local forked = S.fork_with("model")
    if forked then prices = forked.prices end -- a fork's model is priced by its own prices
    local c = prices and ((u.input_tokens or 0) * (prices.input or 0) + (u.output_tokens or 0) * (prices.output or 0)) / 1e6
      or 0
    s.tokens = s.tokens + n
    s.cost = s.cost + c
    caps.count_quota(wf, s.quota, n, c)
  end

  -- Limits are checked before the call that would exceed them: true when one
  -- is reached (s.limits: timeoutSeconds, maxModelTurns, maxTokens, maxCostUsd).
  function S.limit_reached(s)
    local limits = s.limits
    if S.remaining(s) <= 0 then S.over_time(s) return true end
    local turns, tokens, cost = S.used(s, "turns"), S.used(s, "tokens"), S.used(s, "cost")
    if turns >= limits.maxModelTurns then S.over(s, "maxModelTurns", limits.maxModelTurns, turns) return true end
    if tokens >= limits.maxTokens then S.over(s, "maxTokens", limits.maxTokens, tokens) return true end
    if s.prices and limits.maxCostUsd > 0 and cost >= limits.maxCostUsd then
      S.over(s, "maxCostUsd", limits.maxCostUsd, cost)
      return true
    end
    local q = caps.quota_reached(wf, s.quota)
    if q then
      S.over(s, "quota", q.limit, q.used, { quota = q.quota, identity = q.identity })
      return true
    end
    return false
  end

  -- --------------------------------------------------------- admission --

  -- The engine's limits (lua/caps.lua; nil without a limits file) and the
  -- input's concurrency key (s.prep.concurrency): slots held until the run
  -- ends, waited for in line (status queued). The session's own clock starts
  -- (again) once it is let in. opts.status: the step said between the
  -- sessions' slot and the sandboxes' (opts.sandboxes: a sandbox is held).
  -- A continued run (s.carried) waits in line again and says nothing.
  function S.admit(s, opts)
    opts = opts or {}
    local conc, admitted = s.prep.concurrency, false
    if conc then
      -- a continued run waits in line for its slot again, whatever the strategy
      local got = wf.acquire("session-key", { key = conc.key, limit = conc.limit,
        strategy = s.carried and "queue" or conc.strategy })
      if not got then
        local msg = string.format("concurrency key '%s' is at its limit of %d (strategy drop)", conc.key, conc.limit)
        wf.emit("session.failed", { reason = "concurrency", error = msg, key = conc.key, limit = conc.limit })
        error({ type = "ConcurrencyDropped", message = msg, key = conc.key, limit = conc.limit }, 0)
      end
      admitted = true
    end
    if caps.hold(wf, s.caps, "sessions") then admitted = true end
    if opts.status and not s.carried then S.status(opts.status) end
    if opts.sandboxes and caps.hold(wf, s.caps, "sandboxes") then admitted = true end
    if admitted and not s.carried then S.start_clock(s) end
  end

  -- -------------------------------------------------------- artifacts --

  -- Runs the activity that stores a stage's artifacts (its result:
  -- {saved = {{path, sha256, size, stored}}, skipped = {{path, reason}}})
  -- and says each one. Returns what was saved.
  function S.persist(name, args, opts)
    local art = wf.activity(name, args, opts)
    for _, a in ipairs(art.saved) do wf.emit("artifact.saved", a) end
    for _, e in ipairs(art.skipped or {}) do wf.emit("artifact.skipped", e) end
    return art.saved
  end

  -- --------------------------------------------------------- telemetry --

  -- The session's run in a trace (engine/worker/otel_spans.h): an agent's
  -- invocation, with its model once prepared. Telemetry only: nothing is
  -- recorded, a replay says the same.
  function S.describe(name, s)
    wf.span({ attributes = { ["gen_ai.operation.name"] = "invoke_agent", ["gen_ai.agent.name"] = name,
      ["gen_ai.conversation.id"] = wf.info().id, ["gen_ai.provider.name"] = s and s.provider,
      ["gen_ai.request.model"] = s and s.prep.model and s.prep.model.name } })
  end

  -- ------------------------------------------------------------ the run --

  -- The end, on every path after acquire: the design's clean-up, the
  -- sandboxes' slot given back, then session.completed {outcome, summary,
  -- turns, tool_calls, tokens} and the result, or session.failed {error}
  -- and the error raised again.
  function S.finish(design, s, ok, res)
    if design.release then ok, res = design.release(s, ok, res) end
    if (design.admission or {}).sandboxes then caps.release(wf, s.caps, "sandboxes") end
    if not ok then
      wf.emit("session.failed", { error = type(res) == "table" and res.message or tostring(res) })
      if design.failed then design.failed(s, res) end
      error(res, 0)
    end
    wf.emit("session.completed", { outcome = res.outcome, summary = res.summary, turns = res.turns,
      tool_calls = res.tool_calls, tokens = res.tokens })
    return res
  end

  -- Runs a design's stages on input (see M.STAGES); returns the session's
  -- result or raises its error. A failure in prepare, admit or acquire ends
  -- the run there (nothing was acquired, or acquire undid it); from context
  -- on, the clean-up runs whatever happens.
  function S.run(design, input)
    S.describe(design.name, nil)
    local s = design.prepare(input)
    S.describe(design.name, s)
    S.admit(s, design.admission)
    if design.acquire then design.acquire(s) end
    local ok, res = pcall(function()
      design.context(s)
      design.model(s)
      local result = design.validate(s)
      return design.persist(s, result)
    end)
    return S.finish(design, s, ok, res)
  end

  return S
end

return M
