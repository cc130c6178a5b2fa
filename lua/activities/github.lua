-- Activities of the pull-request review (workflows/pr_review.lua), on the
-- trusted side: the GitHub API (metadata, changed files, reviews), the
-- checkout of the head commit, and the draft's artifact; and of the
-- remediation pull request (workflows/specialist_loop.lua): the branch pushed
-- and the draft pull request opened. The token
-- (credential GITHUB_TOKEN: the engine's environment or credentials file) goes
-- to the API and to git only: never into a result, an error or the sandbox.
-- The API base is input.github_api, else ENGINE_GITHUB_API_URL, else GitHub's
-- (GitHub Enterprise serves the same API under its own base).
local http = require "http"
local json = require "json"
local fs = require "fs"
local activity = require "activity"
local raise = require("util").raise
local review = require "github_review"

local M = {}

local DEFAULT_API = "https://api.github.com"
local MAX_FILE_PAGES = 30 -- GitHub lists at most 3000 files of a pull request (30 pages of 100)

-- The token, for a call a github grant allowed (args.grant, docs/grants.md;
-- nil in a review recorded before grants): any other call never gets it.
local function token(args)
  if not require("grants").may_use("GITHUB_TOKEN", args.grant) then return nil end
  local t = require("runners.common").credential("GITHUB_TOKEN")
  if t == "" then return nil end
  return t
end

-- Any trace of the token taken out of text that leaves this module.
local function scrub(text, tok)
  text = tostring(text or "")
  if tok then text = require("runners.common").redact(text, tok) end
  return text
end

local function api_base(args)
  local base = args.github_api or os.getenv("ENGINE_GITHUB_API_URL") or DEFAULT_API
  if type(base) ~= "string" or not base:match("^https?://[^/]+") then
    raise("InvalidInput", "the GitHub API base must be an http(s) URL (got " .. tostring(base) .. ")",
      { non_retryable = true })
  end
  return (base:gsub("/+$", ""))
end

local function check_pr(pr)
  if type(pr) ~= "table" then raise("InvalidInput", "input.pr is missing", { non_retryable = true }) end
  local problems = review.name_problems(pr)
  if math.type(pr.number) ~= "integer" and not (type(pr.number) == "number" and pr.number == math.floor(pr.number)) or
      (tonumber(pr.number) or 0) < 1 then
    problems[#problems + 1] = "pr.number must be a positive whole number"
  end
  if pr.head_sha ~= nil and (type(pr.head_sha) ~= "string" or not pr.head_sha:match("^%x+$") or #pr.head_sha < 7) then
    problems[#problems + 1] = "pr.head_sha must be a hex commit id"
  end
  if #problems > 0 then raise("InvalidInput", table.concat(problems, "; "), { non_retryable = true }) end
  return pr.owner, pr.name, math.tointeger(pr.number)
end

-- One API call: decoded JSON, or an error naming the call (never the token).
local function call(base, method, path, tok, body)
  local headers = { accept = "application/vnd.github+json", ["x-github-api-version"] = "2022-11-28",
    ["user-agent"] = "engine-pr-review/1" }
  if tok then headers.authorization = "Bearer " .. tok end
  if body then headers["content-type"] = "application/json" end
  local ok, res = pcall(http.request, { url = base .. path, method = method, headers = headers,
    body = body and json.encode(body) or nil, timeout = 60, connect_timeout = 10, max_bytes = 32 * 1024 * 1024 })
  if not ok then
    local e = type(res) == "table" and res or { type = "ConnectionError", message = tostring(res) }
    raise(e.type or "ConnectionError", scrub(method .. " " .. path .. ": " .. tostring(e.message), tok))
  end
  if res.status < 200 or res.status >= 300 then
    -- 4xx other than rate limits will not get better by trying again
    local retry = res.status >= 500 or res.status == 429 or res.status == 403 and
      (res.headers or {})["x-ratelimit-remaining"] == "0"
    raise("GitHubError", scrub(string.format("%s %s: HTTP %d %s", method, path, res.status,
      tostring(res.body or ""):sub(1, 300)), tok), { non_retryable = not retry, status = res.status })
  end
  local okd, v = pcall(json.decode, res.body or "")
  if not okd then raise("GitHubError", method .. " " .. path .. ": the answer is not JSON") end
  return v, res.headers or {}
end

-- Whether a list has another page: GitHub's Link header says so (rel="next");
-- without one, a full page may be followed by more.
local function has_next(headers, n, per_page)
  local link = headers.link
  if type(link) == "string" then return link:find('rel="next"', 1, true) ~= nil end
  return n >= per_page
end

-- Metadata and changed files of the pull request, and the lines a comment
-- may name. Returns {title, body, head_sha, base_sha, html_url, state,
-- files = {{path, status, additions, deletions, ranges}}, truncated}.
function M.fetch_pr(args)
  local pr = args.pr
  local owner, name, number = check_pr(pr)
  local base, tok = api_base(args), token(args)
  local prefix = string.format("/repos/%s/%s/pulls/%d", owner, name, number)
  local meta = call(base, "GET", prefix, tok)
  if type(meta) ~= "table" then raise("GitHubError", "GET " .. prefix .. ": not a pull request object") end
  local files, truncated = {}, false
  for page = 1, MAX_FILE_PAGES do
    local list, headers = call(base, "GET", string.format("%s/files?per_page=100&page=%d", prefix, page), tok)
    if type(list) ~= "table" then raise("GitHubError", "GET " .. prefix .. "/files: not a list") end
    for _, f in ipairs(list) do
      local ranges = review.patch_lines(f.patch)
      files[#files + 1] = { path = f.filename, status = f.status, additions = f.additions, deletions = f.deletions,
        ranges = ranges, no_patch = f.patch == nil or nil }
    end
    if not has_next(headers, #list, 100) then break end
    if page == MAX_FILE_PAGES then truncated = true end
    activity.heartbeat()
  end
  local head = type(meta.head) == "table" and meta.head or {}
  local base_ref = type(meta.base) == "table" and meta.base or {}
  -- the model a review uses when its start names none (a webhook's start
  -- cannot): ENGINE_PR_REVIEW_MODEL, JSON like {"name":"...","provider":"..."},
  -- read here on the trusted side and so recorded with the run
  local model
  local spec = os.getenv("ENGINE_PR_REVIEW_MODEL")
  if spec and spec ~= "" then
    local ok, m = pcall(json.decode, spec)
    if not ok or type(m) ~= "table" or type(m.name) ~= "string" then
      error({ type = "ConfigError", non_retryable = true,
        message = "ENGINE_PR_REVIEW_MODEL must be a JSON object with a name, like {\"name\":\"gpt-4.1\"}" })
    end
    model = m
  end
  return { title = meta.title, body = meta.body ~= json.null and meta.body or nil, html_url = meta.html_url,
    state = meta.state, head_sha = head.sha, base_sha = base_ref.sha, files = files, truncated = truncated or nil,
    api = base, model = model }
end

-- The checkouts live beside the database unless ENGINE_PR_CHECKOUTS says
-- otherwise; each review has its own directory, named by its workflow id.
local function checkout_root()
  local db_dir = activity.worker().db_dir
  return os.getenv("ENGINE_PR_CHECKOUTS") or ((db_dir or ".") .. "/pr-checkouts")
end

-- A review's directory: a readable prefix of its workflow id and a hash of it,
-- so ids that read alike ("pr:a", "pr_a") never share one (as sandboxes do).
local function checkout_name(id)
  if type(id) ~= "string" or id == "" then raise("InvalidInput", "the checkout needs the workflow id", { non_retryable = true }) end
  return require("sandbox").sandbox_name(id)
end

local function git(argv, dir, tok, timeout)
  local a = { "git" }
  -- the token reaches git on its command line for this one call only: it is
  -- never written to a config file the checkout (and so the sandbox) keeps
  if tok then a[#a + 1] = "-c"; a[#a + 1] = "http.extraHeader=Authorization: Bearer " .. tok end
  a[#a + 1] = "-C"; a[#a + 1] = dir
  for _, v in ipairs(argv) do a[#a + 1] = v end
  local r = require("proc").run({ argv = a, timeout = timeout or 300, max_output = 64 * 1024,
    env = { "PATH=/usr/bin:/bin", "HOME=" .. dir, "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1",
      "GIT_ASKPASS=/bin/false" } })
  if r.exit_code ~= 0 then
    raise("GitError", scrub("git " .. argv[1] .. " failed: " .. ((r.stderr or "") ~= "" and r.stderr or r.stdout or ""),
      tok):gsub("%s+$", ""):sub(1, 2000))
  end
  return r.stdout
end

-- Checks out the head commit into <root>/<id>/repo (a shallow fetch of that
-- one commit from the clone URL, with the token when the repository is
-- private) and removes .git. Returns {dir, files = number of files}.
function M.checkout(args)
  local pr = args.pr
  check_pr(pr)
  local sha = args.head_sha or pr.head_sha
  if type(sha) ~= "string" or not sha:match("^%x+$") or #sha < 40 then
    raise("InvalidInput", "the head commit must be a full hex commit id", { non_retryable = true })
  end
  local url = pr.clone_url
  if type(url) ~= "string" or not url:match("^%a[%w+.-]*://") or url:find("@", 1, true) and url:match("^%a[%w+.-]*://[^/]*@") then
    raise("InvalidInput", "pr.clone_url must be a URL without user information", { non_retryable = true })
  end
  local root = checkout_root() .. "/" .. checkout_name(args.id)
  local dir = root .. "/repo"
  -- a retry starts from nothing: what a cut-short attempt left is removed
  require("proc").run({ argv = { "rm", "-rf", "--", root }, env = { "PATH=/usr/bin:/bin" }, timeout = 120 })
  local made, merr = fs.mkdir_p(dir)
  if not made then raise("CheckoutError", "cannot create " .. dir .. ": " .. tostring(merr)) end
  local tok = pr.private and token(args) or nil
  if pr.private and not tok then
    raise("NotConfigured", "the repository is private and no GITHUB_TOKEN credential is set", { non_retryable = true })
  end
  git({ "init", "-q" }, dir)
  git({ "fetch", "-q", "--depth=1", "--no-tags", url, sha }, dir, tok)
  git({ "checkout", "-q", "--detach", sha }, dir)
  local files = 0
  for _ in (git({ "ls-files", "-z" }, dir)):gmatch("%Z+") do files = files + 1 end
  require("proc").run({ argv = { "rm", "-rf", "--", dir .. "/.git" }, env = { "PATH=/usr/bin:/bin" }, timeout = 120 })
  return { dir = dir, files = files, head_sha = sha }
end

-- Removes a review's checkout (once the session has copied it in).
function M.cleanup(args)
  require("proc").run({ argv = { "rm", "-rf", "--", checkout_root() .. "/" .. checkout_name(args.id) },
    env = { "PATH=/usr/bin:/bin" }, timeout = 120 })
  return { removed = true }
end

-- The draft stored as an artifact (by content hash, beside the session's
-- others): {path, sha256, size, stored}.
-- With args.id, the body's marker slot (github_review.MARKER_SLOT) is filled
-- in with the marker of that id.
function M.store_draft(args)
  local artifacts = require "artifacts"
  local draft = args.draft
  if args.id ~= nil and type(draft) == "table" and type(draft.review) == "table" and type(draft.review.body) == "string" then
    local prlib = require "github_review"
    local body = draft.review.body
    local at = body:find(prlib.MARKER_SLOT, 1, true)
    if at then draft.review.body = body:sub(1, at - 1) .. prlib.marker(args.id) .. body:sub(at + #prlib.MARKER_SLOT) end
  end
  return artifacts.store(artifacts.root(), "review-draft.json", json.encode(draft))
end

-- Publishes the review once. The body carries args.marker; before posting,
-- the reviews already on the pull request are searched for it, so a retry
-- after a crash between the POST and its record finds the first review
-- instead of posting a second. Returns {review_id, html_url, already}.
function M.publish(args)
  local owner, name, number = check_pr(args.pr)
  local base, tok = api_base(args), token(args)
  local marker = args.marker
  if type(marker) ~= "string" or #marker < 10 or not tostring(args.review.body):find(marker, 1, true) then
    raise("InvalidInput", "the review body must carry its marker", { non_retryable = true })
  end
  -- what leaves for the pull request is sanitized as a trusted tool's output
  -- is: control characters and anything shaped like a secret (the token too)
  local common = require "tools.common"
  local clean = { commit_id = args.review.commit_id, event = args.review.event,
    body = common.sanitize(tostring(args.review.body), tok and { tok } or nil) }
  if type(args.review.comments) == "table" and #args.review.comments > 0 then
    clean.comments = {}
    for i, c in ipairs(args.review.comments) do
      clean.comments[i] = { path = c.path, line = c.line, side = c.side,
        body = common.sanitize(tostring(c.body), tok and { tok } or nil) }
    end
  end
  args = { pr = args.pr, github_api = args.github_api, marker = marker, review = clean }
  if not clean.body:find(marker, 1, true) then
    raise("InvalidInput", "the review body lost its marker in sanitizing", { non_retryable = true })
  end
  local prefix = string.format("/repos/%s/%s/pulls/%d/reviews", owner, name, number)
  for page = 1, 100 do
    local list, headers = call(base, "GET", string.format("%s?per_page=100&page=%d", prefix, page), tok)
    if type(list) ~= "table" then raise("GitHubError", "GET " .. prefix .. ": not a list") end
    for _, r in ipairs(list) do
      if type(r) == "table" and type(r.body) == "string" and r.body:find(marker, 1, true) then
        return { review_id = r.id, html_url = r.html_url ~= json.null and r.html_url or nil, already = true }
      end
    end
    if not has_next(headers, #list, 100) then break end
  end
  local ok, r = pcall(call, base, "POST", prefix, tok, args.review)
  local inline = true
  if not ok and type(r) == "table" and r.status == 422 and #(args.review.comments or {}) > 0 then
    -- GitHub refuses the whole review when one comment's line is not in its
    -- diff (a patch too large for /files to show, a diff it computes
    -- otherwise): the comments go into the body instead, the marker last
    local folded = {}
    for k, v in pairs(args.review) do folded[k] = v end
    folded.comments = nil -- optional in GitHub's API; an empty Lua table would be {} in JSON
    local lines = { "Line comments (GitHub did not accept them on the diff):", "" }
    for _, c in ipairs(args.review.comments) do
      lines[#lines + 1] = string.format("- `%s:%s` %s", review.one_line(c.path), tostring(c.line), review.one_line(c.body))
    end
    local body = tostring(args.review.body)
    local at = body:find(marker, 1, true)
    folded.body = body:sub(1, at - 1) .. table.concat(lines, "\n") .. "\n\n" .. body:sub(at)
    inline = false
    ok, r = pcall(call, base, "POST", prefix, tok, folded)
  end
  if not ok then error(r, 0) end
  return { review_id = type(r) == "table" and r.id or nil,
    html_url = type(r) == "table" and r.html_url ~= json.null and r.html_url or nil, already = false,
    inline = inline }
end

-- ------------------------------------------ a remediation pull request --
-- (workflows/specialist_loop.lua: design 2, docs/runtime-designs.md)

local function check_repo(owner, name)
  local problems = review.name_problems({ owner = owner, name = name })
  if #problems > 0 then raise("InvalidInput", table.concat(problems, "; "), { non_retryable = true }) end
end

-- Pushes the session's branch (its bundle, from the sandbox) to args.remote
-- as refs/heads/<branch>, with the token when there is one. The commit is the
-- same however often the step runs (specialist_steps.commit fixes its
-- dates), so a retry after a crash between the push and its record finds it
-- there already; a branch that holds another commit is not overwritten.
-- Returns {remote, branch, commit, already}.
function M.push_branch(args)
  local url = args.remote
  if type(url) ~= "string" or not url:match("^https?://[^/@]+/") then
    raise("InvalidInput", "the remote must be an http(s) URL without user information", { non_retryable = true })
  end
  local branch, commit = args.branch, args.commit
  if type(commit) ~= "string" or not commit:match("^%x+$") or #commit < 40 then
    raise("InvalidInput", "the commit must be a full hex commit id", { non_retryable = true })
  end
  local tok = token(args)
  local dir = checkout_root() .. "/" .. checkout_name(args.id) .. "-push"
  require("proc").run({ argv = { "rm", "-rf", "--", dir }, env = { "PATH=/usr/bin:/bin" }, timeout = 120 })
  local made, merr = fs.mkdir_p(dir)
  if not made then raise("PushError", "cannot create " .. dir .. ": " .. tostring(merr)) end
  local ok, res = pcall(function()
    local bundle = require("activities.specialist_steps").bundle_path(args.sandbox, dir)
    git({ "init", "-q", "--bare", "repo.git" }, dir)
    local repo = dir .. "/repo.git"
    git({ "fetch", "-q", bundle, "refs/heads/" .. branch .. ":refs/heads/" .. branch }, repo)
    local have = git({ "rev-parse", "refs/heads/" .. branch }, repo):match("%x+")
    if have ~= commit then
      raise("PushError", "the branch's bundle holds " .. tostring(have) .. ", not the commit " .. commit,
        { non_retryable = true })
    end
    local remote = git({ "ls-remote", url, "refs/heads/" .. branch }, repo, tok):match("^(%x+)")
    if remote == commit then return { remote = url, branch = branch, commit = commit, already = true } end
    if remote then
      raise("PushError", "the remote's branch " .. branch .. " holds another commit (" .. remote .. "): not overwritten",
        { non_retryable = true })
    end
    git({ "push", "-q", url, "refs/heads/" .. branch .. ":refs/heads/" .. branch }, repo, tok)
    return { remote = url, branch = branch, commit = commit, already = false }
  end)
  require("proc").run({ argv = { "rm", "-rf", "--", dir }, env = { "PATH=/usr/bin:/bin" }, timeout = 120 })
  if not ok then error(res, 0) end
  return res
end

-- Opens the pull request as a draft (POST /repos/{owner}/{name}/pulls with
-- draft: true, GitHub's REST shape). An open pull request of the same head
-- is looked for first (GET .../pulls?head=owner:branch&state=open), so a
-- retry after a crash between the POST and its record finds the first one
-- instead of opening a second. Returns {number, html_url, draft, already}.
function M.open_pull(args)
  local owner, name = args.owner, args.name
  check_repo(owner, name)
  local base, tok = api_base(args), token(args)
  local prefix = string.format("/repos/%s/%s/pulls", owner, name)
  local function enc(v) return (tostring(v):gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end)) end
  local list = call(base, "GET", string.format("%s?state=open&head=%s&per_page=100", prefix,
    enc(owner .. ":" .. args.head)), tok)
  if type(list) ~= "table" then raise("GitHubError", "GET " .. prefix .. ": not a list") end
  for _, p in ipairs(list) do
    if type(p) == "table" and type(p.head) == "table" and p.head.ref == args.head then
      return { number = p.number, html_url = p.html_url ~= json.null and p.html_url or nil, draft = p.draft == true,
        already = true }
    end
  end
  local common = require "tools.common"
  local body = { title = common.sanitize(tostring(args.title), tok and { tok } or nil), head = args.head,
    base = args.base, body = common.sanitize(tostring(args.body or ""), tok and { tok } or nil), draft = true }
  local r = call(base, "POST", prefix, tok, body)
  if type(r) ~= "table" then raise("GitHubError", "POST " .. prefix .. ": not a pull request object") end
  return { number = r.number, html_url = r.html_url ~= json.null and r.html_url or nil, draft = r.draft == true,
    already = false }
end

return M
