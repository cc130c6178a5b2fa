-- specialist_loop.lua: design 2 on the spine (lua/spine.lua,
-- docs/runtime-designs.md): a specified artifact with unspecified content, a
-- remediation pull request.
--
--   prepare (the input checked: lua/types/specialist_loop_input.schema.json)
--   -> acquire (a sandbox, the repository's bundle in it)
--   -> context (the repository cloned at its base, the tests run once, the
--      fixer's first message computed by code)
--   -> model (at most maxRevisions: the fixer proposes a patch as structured
--      output, code applies it (git apply --check first) and runs the tests,
--      the reviewer judges a patch that passes; what failed goes back)
--   -> validate (an approved patch, or the session fails naming why)
--   -> persist (the commit; the diff and the branch kept as artifacts; with
--      input.github, policy gates (approval by default) before the push and
--      before the draft pull request opens; the draft kept as an artifact)
--   -> release (the sandbox destroyed, on every path)
--
--   engine start workflows/specialist_loop.lua --input @examples/specialist-loop.json
--
-- Every step is recorded: a crash resumes after the last completed one,
-- and a replay gives the same result.
--
-- input schema: ../lua/types/specialist_loop_input.schema.json
local wf = require "workflow"
local caps = require "caps"
local json = require "json"
local jsonschema = require "jsonschema"
local spine = require("spine").new(wf)

-- --------------------------------------------------------- prepare --

local function prepare(input)
  local s = spine.prepared("specialist_steps.prepare", input)
  local prep = s.prep
  wf.emit("session.created", { design = "specialist_loop", objective = input.objective, model = prep.fixer.name,
    reviewer = prep.reviewer.name, max_revisions = prep.max_revisions, base = prep.base, branch = prep.branch,
    test_command = prep.test_command, github = prep.github and (prep.github.owner .. "/" .. prep.github.name) or nil,
    limits = s.limits, identity = input.identity, caps = prep.caps })
  return s
end

-- --------------------------------------------------------- acquire --

-- The sandbox, with the repository's bundle as input/repo.bundle. Cut short
-- or failed part-way, what it made is found by the session's id and removed.
local function acquire(s)
  local ok, sb = pcall(wf.activity, "sandbox.provision", { session_id = s.id, task = s.input.objective,
    files = { { src = s.prep.bundle, dest = "repo.bundle" } }, writable = { "working", "output" },
    limits = { memoryMb = s.limits.memoryMb, cpu = s.limits.cpu } },
    { start_to_close = 300, retry = { max_attempts = 3 } })
  if not ok then
    wf.activity("sandbox.destroy_session", { session_id = s.id }, { retry = { max_attempts = 10, initial_interval = 1 } })
    caps.release(wf, s.caps, "sandboxes")
    error(sb, 0)
  end
  s.sb = sb
  wf.emit("sandbox.ready", { driver = sb.driver, container = sb.container_id, host = sb.host })
end

-- --------------------------------------------------------- context --

local step_opts, in_time = spine.step_opts, spine.in_time

-- The checkout at the base, the tests' first run, the fixer's first message.
local function context(s)
  spine.status("CONTEXT")
  local ctx = in_time(s, wf.activity, "specialist_steps.setup",
    { sandbox = s.sb, prep = s.prep, objective = s.input.objective },
    step_opts(s, s.limits.testTimeoutSeconds + 300, { retry = { max_attempts = 3 } }))
  if not ctx then return end -- the time ran out: the model step says so
  s.base_sha = ctx.base_sha
  local files = 0
  for _, f in ipairs(ctx.files) do if not f.skipped then files = files + 1 end end
  wf.emit("context.built", { bytes = ctx.bytes, files = files, artifacts = 0, sources = ctx.files, base = s.prep.base,
    base_sha = ctx.base_sha, tests_before = ctx.baseline })
  s.fixer_msgs = { { role = "user", content = ctx.message } }
  s.reviewer_msgs = {}
end

-- ----------------------------------------------------------- model --

-- An answer decoded and checked against a schema: the value, or nil and its problems.
local function decode(text, schema, root)
  local ok, v = pcall(json.decode, (text or ""):match("^%s*(.-)%s*$"))
  if not ok or type(v) ~= "table" then
    local inner = (text or ""):match("```json%s*(.-)%s*```")
    if inner then ok, v = pcall(json.decode, inner) end
  end
  if not ok or type(v) ~= "table" then return nil, { "the answer is not a JSON object" } end
  local valid, errors = jsonschema.validate(schema, v, root)
  if not valid then return nil, errors end
  return v
end

-- One call of a role's model (fixer or reviewer) on its own conversation,
-- with its schema as structured output, through its provider's caps; the
-- answer joins the conversation. nil when the time ran out first or during it.
local function call(s, role, schema_name, schema)
  local model = role == "fixer" and (spine.fork_with("model") or s.prep.fixer) or s.prep.reviewer
  local msgs = role == "fixer" and s.fixer_msgs or s.reviewer_msgs
  local gate = role == "fixer" and s.fixer_gate or s.reviewer_gate
  local system = role == "fixer" and s.prep.fixer_system or s.prep.reviewer_system
  local opts = { response_schema = { name = schema_name, schema = schema } }
  local turn = in_time(s, gate.turn, gate, opts, function(o)
    return wf.activity("model.turn", { model = model, system = system, messages = msgs, options = o },
      step_opts(s, 600, { retry = { max_attempts = 3 } }))
  end, function() return spine.remaining(s) end)
  if not turn then return nil end
  s.turns = s.turns + 1
  local u = turn.usage or {}
  s.prices = model.prices
  spine.spend(s, u)
  s.prices = s.prep.fixer.prices
  wf.emit("agent.message", { role = role, text = turn.text, turn = s.turns, usage = u, tool_calls = 0 })
  msgs[#msgs + 1] = { role = "assistant", content = turn.text or "" }
  return turn
end

-- What went wrong with a revision, back to the fixer as its next message.
local function feed_back(s, lines)
  lines[#lines + 1] = ""
  lines[#lines + 1] = "Send the whole patch again, against the base commit, as the JSON object only."
  s.fixer_msgs[#s.fixer_msgs + 1] = { role = "user", content = table.concat(lines, "\n") }
end

-- The reviewer's verdict on a patch that passes the tests.
local function review(s, rev, a)
  spine.status("REVIEWING", { revision = rev })
  s.reviewer_msgs[#s.reviewer_msgs + 1] = { role = "user", content = table.concat({
    "# Objective\n\n", s.input.objective, "\n\n# The patch (revision ", tostring(rev), ")\n\n```diff\n", a.diff,
    "```\n\n# The tests\n\n`", s.prep.test_command, "` exits 0:\n\n```\n", a.output, "\n```\n" }) }
  if spine.limit_reached(s) then return nil end
  local turn = call(s, "reviewer", "verdict", s.prep.verdict_schema)
  if not turn then spine.over_time(s) return nil end
  local v, problems = decode(turn.text, s.prep.verdict_schema, "verdict")
  if not v then v = { verdict = "revise", reasons = { "the reviewer's answer is not a verdict: " ..
    table.concat(problems, "; ") } , invalid = true } end
  wf.emit("review.verdict", { revision = rev, verdict = v.verdict, reasons = v.reasons, invalid = v.invalid })
  return v
end

-- The bounded loop: at most maxRevisions patches; each one's failure (an
-- answer that is not a patch, a patch that does not apply, failing tests, the
-- reviewer's reasons) goes back to the fixer. s.accepted is the approved one.
local function model(s)
  s.turns, s.tokens, s.cost, s.outcome, s.revisions, s.failures = 0, 0, 0, "completed", 0, {}
  s.prices, s.quota = s.prep.fixer.prices, s.caps.quota
  s.fixer_gate = caps.gate(wf, s.caps, s.provider, 0)
  s.reviewer_gate = caps.gate(wf, s.caps, s.prep.reviewer_provider, 0)
  local function failed(rev, why)
    s.failures[#s.failures + 1] = string.format("revision %d: %s", rev, why)
  end
  for rev = 1, s.prep.max_revisions do
    if spine.limit_reached(s) then return end
    s.revisions = rev
    spine.status("FIXING", { revision = rev })
    local turn = call(s, "fixer", "patch", s.prep.patch_schema)
    if not turn then spine.over_time(s) return end
    local patch, problems = decode(turn.text, s.prep.patch_schema, "patch")
    if not patch then
      wf.emit("patch.invalid", { revision = rev, problems = problems })
      failed(rev, "the answer is not a patch")
      feed_back(s, { "Your answer does not match the patch schema:", "- " .. table.concat(problems, "\n- ") })
    else
      spine.status("TESTING", { revision = rev })
      local a = in_time(s, wf.activity, "specialist_steps.attempt", { sandbox = s.sb, prep = s.prep,
        base_sha = s.base_sha, revision = rev, files = patch.files },
        step_opts(s, s.limits.testTimeoutSeconds + 120, { retry = { max_attempts = 3 } }))
      if not a then spine.over_time(s) return end
      if not a.applied then
        wf.emit("patch.rejected", { revision = rev, error = a.error })
        failed(rev, "the patch does not apply")
        feed_back(s, { "The patch does not apply to the base commit (git apply --check):", "", a.error })
      else
        wf.emit("tests.ran", { revision = rev, passed = a.passed, exit_code = a.exit_code, stat = a.stat,
          output = a.output })
        if not a.passed then
          failed(rev, string.format("the tests fail (exit %d)", a.exit_code))
          feed_back(s, { string.format("The patch applies, but `%s` exits %d:", s.prep.test_command, a.exit_code),
            "", "```", a.output, "```" })
        else
          local v = review(s, rev, a)
          if not v then return end
          if v.verdict == "approve" then
            s.accepted = { revision = rev, diff = a.diff, stat = a.stat, summary = patch.summary, reasons = v.reasons }
            return
          end
          failed(rev, "the reviewer asks for a revision")
          local lines = { "The tests pass, but the reviewer asks for a revision:" }
          for _, r in ipairs(v.reasons or {}) do lines[#lines + 1] = "- " .. r end
          feed_back(s, lines)
        end
      end
    end
  end
end

-- -------------------------------------------------------- validate --

local function validate(s)
  if s.accepted then return s.accepted end
  if s.exceeded then
    error({ type = "LimitExceeded", message = string.format("limit %s reached (%s of %s) before a patch was approved",
      s.exceeded.limit, tostring(s.exceeded.value), tostring(s.exceeded.max)), limit = s.exceeded }, 0)
  end
  spine.status("REVISIONS_EXHAUSTED", { revisions = s.revisions })
  error({ type = "MaxRevisions", message = string.format("maxRevisions %d reached without a patch that passes "
    .. "the tests and the review: %s", s.prep.max_revisions, table.concat(s.failures, "; ")),
    failures = s.failures }, 0)
end

-- --------------------------------------------------------- persist --

-- A short, stable digest (FNV-1a 32) for approval request ids.
local function digest(text)
  local h = 2166136261
  for i = 1, #text do h = ((h ~ text:byte(i)) * 16777619) & 0xffffffff end
  return string.format("%08x", h)
end

local function decide(s, gate, args, approval)
  return wf.start_activity("specialist_steps.decide", { gate = gate, args = args, session_id = s.id,
    identity = s.input.identity, approval = approval, policies = spine.fork_with("policies") },
    { retry = { max_attempts = 3 }, ["local"] = true }):wait()
end

-- A policy gate before a side effect outside the session: the policy set
-- decides (policies/20-publish: a person approves, by default); anything
-- but an explicit approval stops the session here (fail closed), and the
-- policies see who approved and may still refuse.
local function gate(s, name, args)
  local d = decide(s, name, args)
  if d.decision == "deny" then
    wf.emit("gate.denied", { gate = name, reason = d.reason, policy_hash = d.hash })
    error({ type = "PolicyDenied", message = string.format("the policies refuse the %s: %s", name, d.reason) }, 0)
  end
  if d.decision ~= "approve" then return end
  local rid = name .. "-" .. digest(json.encode(args))
  wf.emit("approval.requested", { request_id = rid, tool = name, args = args, reason = d.reason, policy_hash = d.hash })
  spine.status("WAITING_FOR_APPROVAL", { request_id = rid })
  local answer = wf.wait_signal("approval:" .. rid,
    { timeout = math.max(0, math.min(s.prep.approval_timeout, spine.remaining(s))) })
  local approved = type(answer) == "table" and answer.approved == true
  local reason = type(answer) == "table" and answer.reason or "no answer before the approval timeout"
  wf.emit("approval.decided", { request_id = rid, approved = approved, reason = reason,
    approver = type(answer) == "table" and answer.approver or nil })
  if not approved then
    s.outcome = "refused"
    error({ type = "ApprovalRefused", message = string.format("the %s was not approved (%s): %s", name, rid,
      tostring(reason)), request_id = rid }, 0)
  end
  local again = decide(s, name, args, { approver = answer.approver, reason = answer.reason, request_id = rid })
  if again.decision == "deny" then
    wf.emit("approval.overruled", { request_id = rid, reason = again.reason, approver = answer.approver })
    error({ type = "PolicyDenied", message = string.format("the policies refuse the %s after its approval: %s", name,
      again.reason) }, 0)
  end
  spine.status("PUBLISHING", { gate = name })
end

-- The accepted patch committed on the branch, the diff and the branch kept;
-- with input.github, the branch pushed and the draft opened, each after its
-- gate; the draft kept as pull-request.json.
local function persist(s, accepted)
  local prep = s.prep
  spine.status("COMMITTING", { revision = accepted.revision })
  local message = prep.title .. "\n\n" .. (accepted.summary or "") .. "\n\nMade by session " .. s.id ..
    " (workflows/specialist_loop.lua), revision " .. accepted.revision .. "."
  local c = wf.activity("specialist_steps.commit", { sandbox = s.sb, base_sha = s.base_sha, branch = prep.branch,
    revision = accepted.revision, message = message, date = math.floor(wf.now()) },
    { start_to_close = 120, retry = { max_attempts = 3 } })
  wf.emit("branch.committed", { branch = prep.branch, commit = c.commit, base = prep.base, stat = accepted.stat })
  local saved = spine.persist("specialist_steps.persist", { sandbox = s.sb, diff = accepted.diff },
    { start_to_close = 120, retry = { max_attempts = 3 } })
  local draft = { title = prep.title, head = prep.branch, base = prep.base, body = prep.body, draft = true,
    commit = c.commit, opened = false }
  local gh = prep.github
  if gh then
    gate(s, "push", { remote = gh.remote, branch = prep.branch, commit = c.commit })
    local pushed = wf.activity("github.push_branch", { id = s.id, sandbox = s.sb, remote = gh.remote,
      branch = prep.branch, commit = c.commit }, { start_to_close = 300, retry = { max_attempts = 3 } })
    wf.emit("branch.pushed", pushed)
    gate(s, "open_pull_request", { repo = gh.owner .. "/" .. gh.name, head = prep.branch, base = prep.base,
      title = prep.title, draft = true })
    local pr = wf.activity("github.open_pull", { github_api = gh.api, owner = gh.owner, name = gh.name,
      head = prep.branch, base = prep.base, title = prep.title, body = prep.body },
      { start_to_close = 120, retry = { max_attempts = 3 } })
    wf.emit("pull_request.opened", { number = pr.number, html_url = pr.html_url, draft = pr.draft,
      already = pr.already, head = prep.branch, base = prep.base, title = prep.title })
    draft.opened, draft.number, draft.html_url, draft.repo = true, pr.number, pr.html_url, gh.owner .. "/" .. gh.name
  end
  local more = spine.persist("specialist_steps.persist_draft", { draft = draft },
    { start_to_close = 60, retry = { max_attempts = 3 } })
  for _, a in ipairs(more) do saved[#saved + 1] = a end
  local summary = draft.opened and string.format("draft pull request #%s %s <- %s (revision %d of %d)",
    tostring(draft.number), prep.base, prep.branch, accepted.revision, prep.max_revisions)
    or string.format("branch %s committed on %s (revision %d of %d); the pull request's draft is kept as "
      .. "pull-request.json", prep.branch, prep.base, accepted.revision, prep.max_revisions)
  return { summary = summary, outcome = s.outcome, revisions = accepted.revision, turns = s.turns,
    tokens = s.tokens, cost_usd = s.prep.fixer.prices and s.cost or nil, commit = c.commit,
    pull_request = draft, review = accepted.reasons, artifacts = saved }
end

-- ---------------------------------------------------------- release --

-- The sandbox destroyed on every path (a cancel meanwhile: destroyed anyway,
-- and the session ends cancelled).
local function release(s, ok, res)
  if not s.sb then return ok, res end
  return spine.destroy_sandbox(s, ok, res)
end

local DESIGN = {
  name = "specialist_loop", admission = { status = "PROVISIONING", sandboxes = true },
  prepare = prepare, acquire = acquire, context = context, model = model, validate = validate, persist = persist,
  release = release,
}

return function(input)
  return spine.run(DESIGN, input)
end
