-- The pull-request review's pure parts (workflows/pr_review.lua, and its
-- activities in lua/activities/github.lua): which lines of a diff a review
-- comment may name, the findings checked against them, the review's body.
-- No IO: the workflow calls these directly, deterministically.
local M = {}

-- The right-side lines a review comment may name in one file's patch: the
-- lines of its hunks on the new side (added and context lines), as sorted,
-- merged [first, last] ranges; and the added lines alone.
function M.patch_lines(patch)
  local ranges, added = {}, {}
  local line
  local function add(list, n)
    local last = list[#list]
    if last and last[2] == n - 1 then last[2] = n else list[#list + 1] = { n, n } end
  end
  for text in (tostring(patch or "") .. "\n"):gmatch("(.-)\r?\n") do
    local start = text:match("^@@ %-%d+,?%d* %+(%d+),?%d* @@")
    if start then
      line = tonumber(start)
    elseif line then
      local c = text:sub(1, 1)
      if c == "+" then
        add(ranges, line); add(added, line); line = line + 1
      elseif c == " " then
        add(ranges, line); line = line + 1
      end -- "-" is the old side; "\" is "No newline at end of file"
    end
  end
  return ranges, added
end

M.SEVERE = { blocker = true, critical = true, high = true, major = true }
M.MAX_COMMENTS = 50

function M.in_ranges(ranges, line)
  for _, r in ipairs(ranges or {}) do
    if line >= r[1] and line <= r[2] then return true end
  end
  return false
end

-- Keeps the findings a review comment can carry; says why of each other.
function M.validate(findings, files)
  local by_path = {}
  for _, f in ipairs(files) do by_path[f.path] = f end
  local kept, dropped = {}, {}
  for i, f in ipairs(type(findings) == "table" and findings or {}) do
    local why
    local line = type(f) == "table" and math.tointeger(f.line)
    if type(f) ~= "table" or type(f.body) ~= "string" or not f.body:match("%S") then
      why = "no text"
    elseif type(f.path) ~= "string" or not by_path[f.path] then
      why = "not a file this pull request changes"
    elseif not line or line < 1 then
      why = "no line"
    elseif not M.in_ranges(by_path[f.path].ranges, line) then
      why = "line " .. line .. " is not in the diff"
    elseif #kept >= M.MAX_COMMENTS then
      why = "over " .. M.MAX_COMMENTS .. " comments"
    end
    if why then
      dropped[#dropped + 1] = { index = i, reason = why, finding = f }
    else
      kept[#kept + 1] = { path = f.path, line = line, side = "RIGHT",
        severity = type(f.severity) == "string" and f.severity:lower() or "info", body = f.body }
    end
  end
  return kept, dropped
end

-- What is wrong with the pull request's owner and name (each a GitHub
-- name: [A-Za-z0-9._-], not only dots), as a list of problems.
function M.name_problems(pr)
  local problems = {}
  for _, k in ipairs({ "owner", "name" }) do
    if type(pr[k]) ~= "string" or not pr[k]:match("^[%w%._%-]+$") or pr[k]:match("^%.+$") then
      problems[#problems + 1] = "pr." .. k .. " must be a GitHub name ([A-Za-z0-9._-])"
    end
  end
  return problems
end

function M.one_line(s) return (tostring(s or ""):gsub("[\r\n]+", " ")) end

-- The marker a review's body ends with: how a retry after a crash finds the
-- review it posted.
function M.marker(id) return "<!-- engine:review:" .. tostring(id) .. " -->" end
-- Where the marker goes in a body built before the workflow's id is known to
-- the activity that stores it (github.store_draft fills it in from its id
-- argument: a fork's copied history replays an argument equal to the id as
-- the fork's own, not an id inside a longer string; docs/forking.md)
M.MARKER_SLOT = "<!-- engine:review:{id} -->"

function M.review_body(summary, dropped, marker)
  local out = { tostring(summary or "No summary."), "" }
  if #dropped > 0 then
    out[#out + 1] = "Other findings (not attached to a line of the diff):"
    out[#out + 1] = ""
    for _, d in ipairs(dropped) do
      local f = type(d.finding) == "table" and d.finding or {}
      local where = type(f.path) == "string" and (" `" .. M.one_line(f.path) .. (f.line and (":" .. M.one_line(f.line)) or "") .. "`") or ""
      out[#out + 1] = "- " .. (type(f.severity) == "string" and ("**" .. M.one_line(f.severity) .. "**") or "") .. where
        .. " " .. M.one_line(f.body)
    end
    out[#out + 1] = ""
  end
  out[#out + 1] = marker
  return table.concat(out, "\n")
end


return M
