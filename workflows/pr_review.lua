-- pr_review.lua: a GitHub pull request reviewed by the agent, end to end.
-- Started by workflows/triggers/github.lua (id pr:OWNER:REPO:N@SHA12), or
-- directly with the same input:
--   {pr = {owner, name, number, head_sha, clone_url, private, title, ...},
--    github_api = "https://...", model = {...}, limits = {...},
--    approvalTimeoutSeconds = 604800, supersede = true,
--    tools = {...} (the session's tools; default read_file, list_files, search)}
--
--   fetch the metadata and changed files (trusted, with GITHUB_TOKEN)
--   -> check out the head commit (git, the token only on git's command line)
--   -> the agent session (agent_session.lua) with the code-review skill over
--      /workspace/input/repo: no network, no credentials in the sandbox
--   -> the findings validated here: a comment must name a changed file and a
--      line of its diff on the new side; the others go into the summary
--   -> review.draft (event and artifact) -> approval -> one review posted,
--      found again by its marker when a retry follows a crash after the POST
--
-- Grants (docs/grants.md): reading the pull request and drafting the review
-- need github:repo/OWNER/NAME:pr.review.draft, posting it
-- github:repo/OWNER/NAME:pr.review.publish; the GitHub token goes only to a
-- call one of them allowed. Without the publish grant the review is drafted
-- and never posted, whoever approves it.
--
-- input schema: pr_review.input.schema.json
local wf = require "workflow"
local grants = require "grants"
local agent_session = require "agent_session"

local prlib = require "github_review"
local one_line = prlib.one_line

local function task_text(pr, meta)
  local lines = { "Pull request " .. tostring(pr.repo or (pr.owner .. "/" .. pr.name)) .. "#" .. tostring(pr.number) ..
    ": " .. one_line(meta.title or pr.title), "" }
  if pr.author then lines[#lines + 1] = "Author: " .. one_line(pr.author) end
  lines[#lines + 1] = "Head " .. tostring(meta.head_sha) .. " (" .. one_line(pr.head_ref) .. ") onto " ..
    one_line(pr.base_ref) .. " (" .. tostring(meta.base_sha or pr.base_sha) .. ")"
  lines[#lines + 1] = ""
  lines[#lines + 1] = "### Description"
  lines[#lines + 1] = ""
  lines[#lines + 1] = (meta.body and meta.body ~= "") and meta.body or "(none)"
  lines[#lines + 1] = ""
  lines[#lines + 1] = "### Changed files"
  lines[#lines + 1] = ""
  for _, f in ipairs(meta.files) do
    lines[#lines + 1] = string.format("- %s (%s, +%s -%s)", one_line(f.path), tostring(f.status),
      tostring(f.additions or 0), tostring(f.deletions or 0))
  end
  return table.concat(lines, "\n")
end

local OBJECTIVE = table.concat({
  "Review the pull request described in /workspace/task.md. The head commit is checked out in",
  "/workspace/input/repo. Read the changed files, find bugs, risky changes and missing tests.",
  "Answer with a single JSON object: {\"summary\": \"the overall assessment\", \"result\": {\"findings\":",
  "[{\"path\": \"path/in/repo\", \"line\": N, \"severity\": \"blocker|major|minor|nit\", \"body\": \"...\"}]}}:",
  "path relative to the repository, line on the new side of a changed line of the diff.",
}, " ")

-- The grant of action on the pull request's repository, checked and its use
-- counted (grant.used), or denied (grant.denied names the missing grant):
-- the grant's text, or nil and why. nil, nil in a review recorded before
-- grants (G nil).
local function gate(G, pr, action, what)
  if not G then return nil end
  local need, bad = grants.need("github", "repo/" .. tostring(pr.owner) .. "/" .. tostring(pr.name), action)
  local matched, why
  if need then matched, why = grants.check(G.effective, need, math.floor(wf.now() * 1000), G.uses) else why = bad end
  if not matched then
    wf.emit("grant.denied", { tool = what, need = need and need.text, reason = why })
    return nil, why
  end
  G.uses[matched] = (G.uses[matched] or 0) + 1
  wf.emit("grant.used", { tool = what, need = need.text, grant = matched, use = G.uses[matched] })
  return matched
end

-- A step its grants do not allow ends the review, naming the missing grant.
local function needs(G, pr, action, what)
  local g, why = gate(G, pr, action, what)
  if G and not g then
    error({ type = "GrantDenied", message = what .. ": " .. tostring(why), non_retryable = true }, 0)
  end
  return g
end

return function(input)
  local id = wf.info().id
  local G -- the review's grants: nil in a review recorded before them
  if wf.patched("grants") and type(input) == "table" then
    local of, problems = grants.of_input(input)
    if not of then
      error({ type = "InvalidInput", message = "invalid input: " .. table.concat(problems, "; ") }, 0)
    end
    G = { effective = of.effective, uses = {} }
  end
  if type(input) ~= "table" or type(input.pr) ~= "table" then
    error({ type = "InvalidInput", message = "input.pr is missing (the pull request to review)" }, 0)
  end
  local pr = input.pr
  if (pr.owner == nil or pr.name == nil) and type(pr.repo) == "string" then -- "owner/name" alone is enough
    pr.owner, pr.name = pr.repo:match("^([^/]+)/([^/]+)$")
  end
  pr.repo = pr.repo or (pr.owner and pr.name and (pr.owner .. "/" .. pr.name))
  local marker = prlib.marker(id)
  -- a newer head of the same pull request supersedes this review (cancelled,
  -- sandbox destroyed, nothing posted), unless the input says supersede=false
  if input.supersede ~= false then
    wf.acquire("pr-review", { key = ("%s/%s#%s"):format(tostring(pr.owner), tostring(pr.name), tostring(pr.number)),
      limit = 1, strategy = "cancel_in_progress" })
  end
  wf.emit("review.started", { repo = pr.repo, number = pr.number, head_sha = pr.head_sha, delivery = input.delivery,
    identity = input.identity, grants = G and G.effective })
  -- the names a grant's resource is made of (the activities check them too)
  local bad_names = G and prlib.name_problems(pr) or {}
  if #bad_names > 0 then
    error({ type = "InvalidInput", message = table.concat(bad_names, "; "), non_retryable = true }, 0)
  end
  local grant = needs(G, pr, "pr.review.draft", "github.fetch_pr")
  local meta = wf.activity("github.fetch_pr", { pr = pr, github_api = input.github_api, grant = grant },
    { start_to_close = 120, retry = { max_attempts = 5, initial_interval = 2 } })
  -- the commit reviewed is the one the trigger named; without one, the PR's head now
  local head = pr.head_sha or meta.head_sha
  if pr.head_sha and meta.head_sha and meta.head_sha ~= pr.head_sha then
    wf.emit("review.note", { text = "the pull request's head moved on to " .. tostring(meta.head_sha) ..
      "; reviewing " .. tostring(pr.head_sha) })
  end
  grant = pr.private and needs(G, pr, "pr.review.draft", "github.checkout") or nil -- the token goes with a private one
  local co = wf.activity("github.checkout", { pr = pr, head_sha = head, id = id, grant = grant },
    { start_to_close = 600, retry = { max_attempts = 3, initial_interval = 2 } })
  wf.emit("review.checked_out", { head_sha = head, files = co.files, changed = #meta.files })

  local ok, session = pcall(agent_session, {
    objective = OBJECTIVE,
    context = { text = task_text(pr, meta), files = { co.dir } },
    skills = { "code-review" },
    -- input.tools: the session's tools (default: read only; a test gives it shell)
    permissions = { tools = input.tools or { "read_file", "list_files", "search" } },
    limits = input.limits or { timeoutSeconds = 1800, maxModelTurns = 30, maxToolCalls = 100 },
    model = input.model or meta.model or { name = "gpt-4.1" },
    identity = input.identity,
    -- the review's agent has only sandbox tools: it holds the review's grants, and uses none
    grants = G and input.grants or nil, starterGrants = G and input.starterGrants or nil,
    -- a review's history stays far below a run's bound: the session never
    -- continues as new (its carried input would not be this workflow's)
    compaction = { runEvents = 1000000 },
  })
  wf.activity("github.cleanup", { id = id }, { retry = { max_attempts = 3 } })
  if not ok then error(session, 0) end

  local result = type(session.result) == "table" and session.result or {}
  local kept, dropped = prlib.validate(result.findings, meta.files)
  local event = "COMMENT"
  for _, c in ipairs(kept) do
    if prlib.SEVERE[c.severity] then event = "REQUEST_CHANGES" end
  end
  local comments = {}
  for i, c in ipairs(kept) do
    comments[i] = { path = c.path, line = c.line, side = "RIGHT", body = "**" .. c.severity .. "**: " .. c.body }
  end
  -- no comments: the field is left out (optional; an empty table would be {} in JSON, not [])
  local review = { commit_id = head, event = event, comments = #comments > 0 and comments or nil,
    body = prlib.review_body(session.summary, dropped, marker) }
  -- stored with the marker made by the activity from the id (so a fork before the approval replays)
  local stored = { review = { commit_id = review.commit_id, event = review.event, comments = review.comments,
    body = prlib.review_body(session.summary, dropped, prlib.MARKER_SLOT) }, dropped = dropped,
    pr = { repo = pr.repo, number = pr.number, url = pr.url } }
  local art = wf.activity("github.store_draft", { draft = stored, id = id }, { retry = { max_attempts = 3 } })
  wf.emit("artifact.saved", art)
  wf.emit("review.draft", { event = event, comments = #comments, dropped = #dropped, commit_id = head,
    summary = session.summary, artifact = art.sha256, findings = kept, dropped_findings = dropped })

  local rid = "publish-review"
  wf.emit("approval.requested", { request_id = rid, kind = "review", repo = pr.repo, number = pr.number,
    event = event, comments = #comments, reason = string.format("publish the review of %s#%s (%s, %d comments)",
      tostring(pr.repo), tostring(pr.number), event, #comments) })
  wf.emit("session.status", { status = "WAITING_FOR_APPROVAL", request_id = rid })
  local answer = wf.wait_signal("approval:" .. rid, { timeout = input.approvalTimeoutSeconds or 7 * 86400 })
  local approved = type(answer) == "table" and answer.approved == true
  wf.emit("approval.decided", { request_id = rid, approved = approved,
    reason = type(answer) == "table" and answer.reason or "no answer before the approval timeout",
    approver = type(answer) == "table" and answer.approver or nil })
  if not approved then
    wf.emit("review.discarded", { reason = type(answer) == "table" and answer.reason or "timeout" })
    return { published = false, event = event, comments = #comments, dropped = #dropped, summary = session.summary }
  end
  -- approved: still only with the publish grant, whoever approved
  local publish_grant, denied = gate(G, pr, "pr.review.publish", "github.publish")
  if G and not publish_grant then
    wf.emit("review.discarded", { reason = "grant: " .. tostring(denied) })
    return { published = false, event = event, comments = #comments, dropped = #dropped, summary = session.summary,
      denied = denied }
  end
  wf.emit("session.status", { status = "PUBLISHING" })
  local posted = wf.activity("github.publish", { pr = pr, github_api = input.github_api, review = review,
    marker = marker, grant = publish_grant }, { start_to_close = 120, retry = { max_attempts = 8, initial_interval = 2 } })
  wf.emit("review.published", { review_id = posted.review_id, url = posted.html_url, already = posted.already,
    event = event, comments = #comments, inline = posted.inline })
  return { published = true, review_id = posted.review_id, url = posted.html_url, event = event,
    comments = #comments, dropped = #dropped, summary = session.summary }
end
