-- GitHub: a pull request opened, updated (synchronize) or reopened starts one
-- review session (workflows/pr_review.lua) per head commit. GitHub signs each
-- delivery with the webhook's secret (X-Hub-Signature-256), read from the
-- engine's GITHUB_WEBHOOK_SECRET (its environment or credentials file); the
-- delivery id is X-GitHub-Delivery, so a redelivery starts nothing, and the id
-- names the head commit, so the same head delivered twice runs once.
local ACTIONS = { opened = true, synchronize = true, reopened = true }

return {
  route = "github",
  verify = { kind = "github", secret = "GITHUB_WEBHOOK_SECRET" },
  -- what the reviews it starts may hold (docs/grants.md): read and draft,
  -- and post once approved, on any repository whose webhook is signed with
  -- the secret; narrow it to your repositories (github:repo/acme/*:...)
  grants = { "github:repo/*/*:pr.review.draft", "github:repo/*/*:pr.review.publish" },
  map = function(req)
    local event = req.headers["x-github-event"]
    if event == "ping" then return nil, "ping: the webhook is set up" end
    if event ~= "pull_request" then return nil, "event " .. tostring(event) .. " starts nothing" end
    local p = req.json
    if type(p) ~= "table" or type(p.pull_request) ~= "table" or type(p.repository) ~= "table" then
      error("a pull_request event without pull_request and repository")
    end
    if not ACTIONS[p.action] then return nil, "pull_request " .. tostring(p.action) .. " starts nothing" end
    local pr, repo = p.pull_request, p.repository
    if pr.draft then return nil, "pull request #" .. tostring(p.number) .. " is a draft" end
    local head, base = pr.head or {}, pr.base or {}
    local full = tostring(repo.full_name)
    return {
      workflow = "pr_review.lua",
      -- ids are A-Z a-z 0-9 . _ : @ -: the repository's / becomes :
      id = ("pr:%s:%d@%s"):format(full:gsub("[^%w%._%-]", ":"), math.tointeger(p.number) or 0,
        tostring(head.sha):sub(1, 12)),
      input = {
        pr = {
          repo = full, owner = repo.owner and repo.owner.login, name = repo.name, private = repo.private == true,
          number = p.number, title = pr.title, url = pr.html_url, author = pr.user and pr.user.login,
          head_sha = head.sha, head_ref = head.ref, base_sha = base.sha, base_ref = base.ref,
          clone_url = head.repo and head.repo.clone_url or repo.clone_url, action = p.action,
        },
        delivery = req.delivery,
      },
    }
  end,
}
