-- Activities of design 2, the specialist loop (workflows/specialist_loop.lua;
-- named specialist_steps.* beside the workflow script): the input checked and
-- resolved, the repository cloned in the sandbox and read into the fixer's
-- first message, a proposed patch applied (git apply --check first) and the
-- tests run, the accepted patch committed, the gates' policy decisions, and
-- the artifacts kept. They run on the trusted side, with the engine's
-- bindings; the commands they run in the sandbox go through lua/sandbox.lua.
local fs = require "fs"
local json = require "json"
local sandbox = require "sandbox"
local session = require "activities.session"
local util = require "util"

local M = {}

local REPO = "/workspace/working/repo"          -- the checkout, in the sandbox
local PATCHES = "/workspace/working/patches"    -- each proposed patch, as applied
local BUNDLE = "/workspace/working/branch.bundle" -- the committed branch, for the push and the artifact
local MAX_CONTEXT = 256 * 1024                  -- the repository's text in the fixer's first message
local MAX_OUTPUT = 8 * 1024                     -- of a test run's output, fed back and recorded (its tail)
local MAX_DIFF = 64 * 1024                      -- of the diff recorded and shown to the reviewer
local MAX_BUNDLE = 64 * 1024 * 1024

-- The patch the fixer answers with (structured output).
M.PATCH_SCHEMA = {
  type = "object", required = { "files" }, additionalProperties = false,
  properties = {
    summary = { type = "string", maxLength = 4000 },
    files = { type = "array", minItems = 1, maxItems = 50, items = {
      type = "object", required = { "path", "diff" }, additionalProperties = false,
      properties = { path = { type = "string", minLength = 1, maxLength = 500 },
        diff = { type = "string", minLength = 1, maxLength = 200000 } } } },
  },
}

-- The reviewer's verdict (structured output).
M.VERDICT_SCHEMA = {
  type = "object", required = { "verdict", "reasons" }, additionalProperties = false,
  properties = {
    verdict = { type = "string", enum = { "approve", "revise" } },
    reasons = { type = "array", maxItems = 20, items = { type = "string", maxLength = 4000 } },
  },
}


-- The input's schema (lua/util.lua: read at each prepare).
function M.input_schema() return util.input_schema("specialist_loop") end

local function fixer_system(input)
  local lines = {
    "You fix a repository so that its tests pass and the objective is met. The repository, the test command and",
    "its output are in the user's message. Answer with one JSON object matching this JSON schema, and nothing else",
    "(no prose, no code fence):",
    "",
    json.encode(M.PATCH_SCHEMA),
    "",
    "Each entry of files is one file's unified diff against the base commit (as `git diff` writes it: optional",
    "--- a/PATH and +++ b/PATH lines, then @@ hunks with three lines of context). Every patch you send replaces",
    "the one before: it is applied to the base commit, never on top of an earlier patch.",
  }
  if type(input.instructions) == "string" and input.instructions ~= "" then
    lines[#lines + 1] = ""
    lines[#lines + 1] = input.instructions
  end
  return table.concat(lines, "\n")
end

local REVIEWER_SYSTEM = table.concat({
  "You review a patch that is to become a pull request. The objective, the patch and the output of the tests",
  "(which pass) are in the user's message. Judge whether the patch meets the objective, is correct and changes",
  "nothing else. Answer with one JSON object matching this JSON schema, and nothing else:",
  "",
  json.encode(M.VERDICT_SCHEMA),
  "",
  "verdict \"approve\" lets the pull request open; \"revise\" sends your reasons back to the fixer.",
}, "\n")

-- Checks SpecialistLoopInput, naming every problem, and resolves it: the
-- bundle's real path under ENGINE_CONTEXT_ROOTS, the defaults, both models'
-- providers and the engine's caps, the system prompts. Returns {ok=false,
-- problems={...}} or the prepared run.
function M.prepare(args)
  local input = args.input
  local problems, schema = util.check_input("specialist_loop", input)
  local function problem(fmt, ...) problems[#problems + 1] = string.format(fmt, ...) end
  if type(input) ~= "table" then return { ok = false, problems = problems } end
  local repo = type(input.repo) == "table" and input.repo or {}
  local base = repo.base or schema.properties.repo.properties.base.default
  local branch = repo.branch or schema.properties.repo.properties.branch.default
  -- what the schema's patterns cannot say of a ref (git check-ref-format's rules)
  for name, ref in pairs({ base = base, branch = branch }) do
    if type(ref) == "string" and (ref:find("..", 1, true) or ref:find("//", 1, true) or ref:match("%.lock$")
        or ref:match("/$") or ref:match("%.$") or ref:find("/.", 1, true)) then
      problem("repo.%s is not a valid branch name: %s", name, ref)
    end
  end
  if base == branch then problem("repo.branch must differ from repo.base (both are %s)", tostring(base)) end
  local bundle
  if type(repo.bundle) == "string" and repo.bundle ~= "" then
    local roots = session.allowed_roots()
    local rp = fs.realpath(repo.bundle)
    if not rp then problem("repo.bundle %s does not exist", repo.bundle)
    elseif not session.under(rp, roots) then
      problem("repo.bundle %s is outside the allowed roots (%s)", repo.bundle, table.concat(roots, ":"))
    elseif (fs.lstat(rp) or {}).type ~= "file" then problem("repo.bundle %s is not a file", repo.bundle)
    else bundle = rp end
  end
  if type(input.github) == "table" and type(input.github.name) == "string" and input.github.name:match("^%.+$") then
    problem("github.name must be a repository name (got %s)", input.github.name)
  end
  local limits = {}
  for k, p in pairs(schema.properties.limits.properties) do limits[k] = p.default end
  if type(input.limits) == "table" then for k, v in pairs(input.limits) do limits[k] = v end end
  local max_revisions = input.maxRevisions or schema.properties.maxRevisions.default
  -- the spine's limits: a fixer's and a reviewer's call per revision
  limits.maxModelTurns = 2 * (math.tointeger(max_revisions) or 1)
  local provider, caps = session.provider_and_caps(input.fixer, input.identity, problem)
  local reviewer_provider = session.provider_and_caps(input.reviewer, input.identity, problem)
  if #problems > 0 then return { ok = false, problems = problems } end
  local title = type(input.pullRequest) == "table" and input.pullRequest.title or nil
  if not title then
    title = input.objective:match("^%s*([^\n]*)"):sub(1, 200)
  end
  local body = type(input.pullRequest) == "table" and input.pullRequest.body or nil
  return { ok = true, bundle = bundle, base = base, branch = branch, test_command = input.testCommand,
    max_revisions = max_revisions, fixer = input.fixer, reviewer = input.reviewer, limits = limits,
    provider = provider, reviewer_provider = reviewer_provider, caps = caps,
    fixer_system = fixer_system(input), reviewer_system = REVIEWER_SYSTEM,
    patch_schema = M.PATCH_SCHEMA, verdict_schema = M.VERDICT_SCHEMA, title = title,
    body = body or ("Objective:\n\n" .. input.objective), github = input.github,
    approval_timeout = input.approvalTimeoutSeconds or schema.properties.approvalTimeoutSeconds.default }
end

-- ------------------------------------------------- in the sandbox --

local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- A command in the sandbox; raises when the sandbox itself failed (out of
-- memory, disk full, a time limit), returns the result otherwise.
local function run(sb, cmd, timeout)
  local r = sandbox.exec(sb, cmd, { timeout = timeout or 120, max_output = 256 * 1024 })
  if r.error and not r.timed_out then util.raise("SandboxError", r.error) end
  return r
end

-- A command that must succeed: its stdout, or an error naming it.
local function must(sb, cmd, what, timeout)
  local r = run(sb, cmd, timeout)
  if r.exit_code ~= 0 then
    util.raise("SandboxError", what .. " failed (exit " .. tostring(r.exit_code) .. "): " ..
      tostring((r.stderr or "") ~= "" and r.stderr or r.stdout):sub(1, 2000), { non_retryable = true })
  end
  return r.stdout or ""
end

local function tail(text, max)
  text = text or ""
  if #text <= max then return text end
  local cut = text:sub(-max)
  return "[... " .. (#text - max) .. " bytes before]\n" .. cut
end

local GIT = "git -c user.name=engine -c user.email=engine@localhost -c advice.detachedHead=false"

-- The tests at the checkout as it is: {exit_code, passed, output (tail)}.
local function run_tests(sb, cmd, timeout)
  local r = run(sb, "cd " .. REPO .. " && (\n" .. cmd .. "\n) 2>&1", timeout)
  local out = r.stdout or ""
  if r.timed_out then out = out .. "\n[the tests were killed after " .. timeout .. " s]" end
  return { exit_code = r.timed_out and 124 or r.exit_code, passed = r.exit_code == 0 and not r.timed_out,
    output = tail(out, MAX_OUTPUT) }
end

-- The repository's tracked text files (sorted) read into the fixer's first
-- message, within MAX_CONTEXT: {{path, text}} and what was left out.
local function read_tree(sb)
  local list = must(sb, "cd " .. REPO .. " && git ls-files -z", "git ls-files")
  local paths = {}
  for p in list:gmatch("%Z+") do paths[#paths + 1] = p end
  table.sort(paths)
  local parts, files, used = {}, {}, 0
  for _, p in ipairs(paths) do
    local ok, r = pcall(sandbox.read_file, sb, REPO .. "/" .. p, MAX_CONTEXT)
    local text = ok and r.content or nil
    local entry = { path = p }
    if not text or not utf8.len(text) or text:find("%z") then entry.skipped = "not text"
    elseif used + #text > MAX_CONTEXT then entry.skipped = "maxContextBytes"
    else
      used = used + #text
      entry.bytes = #text
      parts[#parts + 1] = "\n## File " .. p .. "\n\n```\n" .. text .. (text:sub(-1) == "\n" and "" or "\n") .. "```\n"
    end
    files[#files + 1] = entry
  end
  return table.concat(parts), files
end

-- The repository cloned at its base branch into working/repo (from the
-- bundle in input/), the fix's branch made, the tests run once at the base,
-- and the fixer's first message. Run again after a crash, it starts over.
-- Returns {base_sha, message, files = {{path, bytes, skipped}}, baseline = {exit_code, passed}, bytes}.
function M.setup(args)
  local sb, prep = args.sandbox, args.prep
  must(sb, "rm -rf " .. REPO .. " " .. PATCHES .. " " .. BUNDLE .. " && mkdir -p " .. PATCHES .. " && " .. GIT ..
    " clone -q --no-tags -b " .. sh_quote(prep.base) .. " /workspace/input/repo.bundle " .. REPO,
    "cloning the repository (branch " .. prep.base .. ")")
  local sha = must(sb, "cd " .. REPO .. " && git rev-parse HEAD", "git rev-parse"):match("%x+")
  must(sb, "cd " .. REPO .. " && " .. GIT .. " checkout -q -b " .. sh_quote(prep.branch), "git checkout -b")
  local baseline = run_tests(sb, prep.test_command, prep.limits.testTimeoutSeconds)
  local tree, files = read_tree(sb)
  local message = table.concat({
    "# Objective\n\n", args.objective, "\n\n",
    "# The tests\n\n`", prep.test_command, "` at the base commit (", prep.base, ", ", sha:sub(1, 12), ") exits ",
    tostring(baseline.exit_code), ":\n\n```\n", baseline.output, "\n```\n\n# The repository\n", tree })
  return { base_sha = sha, message = message, files = files, bytes = #message,
    baseline = { exit_code = baseline.exit_code, passed = baseline.passed } }
end

-- A path a patch may touch: relative, inside the repository, not its .git.
local function path_problem(p)
  if type(p) ~= "string" or p == "" then return "a file's path is empty" end
  if p:sub(1, 1) == "/" then return "the path " .. p .. " is absolute" end
  for part in p:gmatch("[^/]+") do
    if part == ".." then return "the path " .. p .. " leaves the repository" end
    if part == ".git" then return "the path " .. p .. " is inside .git" end
  end
  if p:find("[%c]") then return "the path " .. p:gsub("%c", "?") .. " has control characters" end
  return nil
end

-- The fixer's files as one patch git applies: each file's diff with its
-- ---/+++ header (added when the model left it out).
local function patch_text(files)
  local out = {}
  for _, f in ipairs(files) do
    local d = f.diff
    if not (d:match("^diff %-%-git ") or d:match("^%-%-%- ")) then
      d = "--- a/" .. f.path .. "\n+++ b/" .. f.path .. "\n" .. d
    end
    if d:sub(-1) ~= "\n" then d = d .. "\n" end
    out[#out + 1] = d
  end
  return table.concat(out)
end

-- One revision: the checkout back at the base commit, the patch written to
-- working/patches/rN.diff, `git apply --check` (a patch that does not apply
-- is the fixer's failure: {applied = false, error}), then applied and the
-- tests run: {applied = true, passed, exit_code, output, diff, stat}.
-- Run again after a crash, it starts over from the base.
function M.attempt(args)
  local sb, prep = args.sandbox, args.prep
  for _, f in ipairs(args.files) do
    local why = path_problem(f.path)
    if why then return { applied = false, error = why } end
  end
  local name = string.format("%s/r%d.diff", PATCHES, args.revision)
  must(sb, "cd " .. REPO .. " && git reset -q --hard " .. args.base_sha .. " && git clean -qfdx", "resetting the checkout")
  sandbox.write_file(sb, name, patch_text(args.files))
  local check = run(sb, "cd " .. REPO .. " && git apply --check " .. name .. " 2>&1")
  if check.exit_code ~= 0 then
    return { applied = false, error = tail((check.stdout or ""):gsub("%s+$", ""), 4000) }
  end
  -- staged as it applies: what the tests leave behind (caches, reports) is not the patch
  must(sb, "cd " .. REPO .. " && git apply --index " .. name, "git apply")
  local t = run_tests(sb, prep.test_command, prep.limits.testTimeoutSeconds)
  local diff = must(sb, "cd " .. REPO .. " && git diff --cached " .. args.base_sha, "git diff")
  local stat = must(sb, "cd " .. REPO .. " && git diff --cached --stat " .. args.base_sha, "git diff --stat")
  return { applied = true, passed = t.passed, exit_code = t.exit_code, output = t.output,
    diff = diff:sub(1, MAX_DIFF), diff_cut = #diff > MAX_DIFF or nil, stat = stat:gsub("%s+$", "") }
end

-- The accepted revision committed on the branch (its author, committer and
-- dates fixed: the same commit id however often it is run) and the branch
-- bundled in working/ for the push and the artifact. Returns {commit}.
function M.commit(args)
  local sb = args.sandbox
  local name = string.format("%s/r%d.diff", PATCHES, args.revision)
  local date = string.format("@%d +0000", math.floor(args.date))
  local env = "GIT_AUTHOR_DATE=" .. sh_quote(date) .. " GIT_COMMITTER_DATE=" .. sh_quote(date) .. " "
  -- the message as a file: no text of the input's is ever read by the shell
  local msg = PATCHES .. "/commit-message.txt"
  sandbox.write_file(sb, msg, args.message)
  must(sb, "cd " .. REPO .. " && git checkout -q -B " .. sh_quote(args.branch) .. " " .. args.base_sha ..
    " && git reset -q --hard && git clean -qfdx && git apply --index " .. name .. " && " .. env .. GIT ..
    " commit -q -F " .. msg, "committing the patch")
  local commit = must(sb, "cd " .. REPO .. " && git rev-parse HEAD", "git rev-parse"):match("%x+")
  must(sb, "rm -f " .. BUNDLE .. " && cd " .. REPO .. " && git bundle create -q " .. BUNDLE .. " " ..
    sh_quote(args.branch), "git bundle")
  return { commit = commit }
end

-- ------------------------------------------------------- the gates --

-- The policy set's decision on a gate (push, open_pull_request): a request
-- as a trusted tool's (side trusted, publishes), so policies/20-publish asks
-- a person by default. With args.approval, the approver's answer is in it.
-- Returns {decision, reason, hash}.
function M.decide(args)
  local policy = require "policy"
  local current, err
  if type(args.policies) == "string" then current, err = policy.load_dir(args.policies)
  else current, err = policy.in_force(session.policies_dir()) end
  if not current then
    return { decision = "deny", reason = "no valid policy set: " .. tostring(err), hash = "none" }
  end
  local req = { tool = args.gate, args = args.args, side = "trusted", publishes = true, writes = false,
    permissions = { tools = { "push", "open_pull_request" } }, session_id = args.session_id,
    identity = args.identity, approval = args.approval }
  local d = policy.decide(current, req)
  return { decision = d.decision, reason = d.reason, hash = d.hash }
end

-- ------------------------------------------------------ the result --

-- The final diff (fix.patch) and the branch (branch.bundle: the commit as
-- git can fetch it) kept as artifacts; contents never enter the history.
-- Returns {saved, skipped}.
function M.persist(args)
  local artifacts = require "artifacts"
  local root = artifacts.root()
  local saved, skipped = { artifacts.store(root, "fix.patch", args.diff) }, {}
  local ok, b = pcall(sandbox.read_file, args.sandbox, BUNDLE, MAX_BUNDLE)
  if ok and not b.truncated then saved[#saved + 1] = artifacts.store(root, "branch.bundle", b.content)
  else skipped[#skipped + 1] = { path = "branch.bundle", reason = ok and "larger than 64 MiB" or tostring(b) } end
  return { saved = saved, skipped = skipped }
end

-- The pull request's draft (pull-request.json: what was, or would be, opened).
function M.persist_draft(args)
  local artifacts = require "artifacts"
  return { saved = { artifacts.store(artifacts.root(), "pull-request.json", json.encode(args.draft)) }, skipped = {} }
end

-- The branch's bundle from the sandbox, for the push (lua/activities/github.lua):
-- written to a file of the host's, returned as its path.
function M.bundle_path(sb, dir)
  local r = sandbox.read_file(sb, BUNDLE, MAX_BUNDLE)
  if r.truncated then util.raise("BundleTooLarge", "the branch's bundle is larger than 64 MiB", { non_retryable = true }) end
  local path = dir .. "/branch.bundle"
  local f, err = io.open(path, "wb")
  if not f then util.raise("PushError", "cannot write " .. path .. ": " .. tostring(err)) end
  f:write(r.content)
  f:close()
  return path
end

return M
