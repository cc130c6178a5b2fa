-- publish_review (trusted side, publishes): turns {summary, findings, verdict}
-- into a markdown review and either POSTs it as JSON to ctx.config.publish_url
-- (with "Authorization: Bearer $ENGINE_PUBLISH_TOKEN" when that variable is
-- set) or, without a URL, writes it to <reviews_dir>/<session_id>.md
-- (ctx.config.reviews_dir, else $ENGINE_REVIEWS_DIR, else ./reviews). The
-- review text is sanitized before it leaves, and the token never appears in a
-- result or an error. Publishing again for the same session replaces the file
-- (or sends the same Idempotency-Key), so a retried activity is harmless.
local common = require "tools.common"
local fs = require "fs"

local M = {
  name = "publish_review",
  description = "Publish the final review of this session: a summary, a list of findings and a verdict. " ..
    "Publishing is visible outside the session and needs approval.",
  parameters = {
    type = "object",
    properties = {
      summary = { type = "string", minLength = 1, maxLength = 20000, description = "what was reviewed and the overall assessment" },
      findings = {
        type = "array", maxItems = 200,
        items = {
          type = "object",
          properties = {
            title = { type = "string", minLength = 1, maxLength = 300 },
            -- the code-review skill's scale, and a generic one
            severity = { type = "string", enum = { "blocker", "major", "minor", "nit",
              "info", "low", "medium", "high", "critical" } },
            file = { type = "string", maxLength = 1000 },
            line = { type = "integer", minimum = 1 },
            body = { type = "string", maxLength = 10000 },
            detail = { type = "string", maxLength = 10000 },
            suggestion = { type = "string", maxLength = 10000 },
          },
          required = { "title" },
          additionalProperties = false,
        },
      },
      verdict = { type = "string", enum = { "approve", "request_changes", "comment" } },
    },
    required = { "summary", "findings", "verdict" },
    additionalProperties = false,
  },
  side = "trusted",
  publishes = true,
  writes = true,
}

local VERDICT = { approve = "approve", request_changes = "request changes", comment = "comment" }

local function one_line(s) return (tostring(s or ""):gsub("[\r\n]+", " ")) end

-- The markdown text of a review (sanitized).
function M.markdown(session_id, args)
  local out = {}
  local function add(s) out[#out + 1] = s end
  add("# Review: " .. one_line(session_id))
  add("")
  add("**Verdict:** " .. (VERDICT[args.verdict] or one_line(args.verdict)))
  add("")
  add("## Summary")
  add("")
  add(args.summary)
  add("")
  add("## Findings")
  add("")
  if #args.findings == 0 then add("None.") end
  for i, f in ipairs(args.findings) do
    local where = ""
    if f.file then where = " (`" .. one_line(f.file) .. (f.line and (":" .. f.line) or "") .. "`)" end
    add(string.format("%d. **[%s]** %s%s", i, f.severity or "info", one_line(f.title), where))
    for _, text in ipairs({ f.body or "", f.detail or "", f.suggestion and f.suggestion ~= "" and ("Suggestion: " .. f.suggestion) or "" }) do
      if text ~= "" then
        for line in (text .. "\n"):gmatch("(.-)\n") do add("   " .. line) end
      end
    end
  end
  add("")
  return common.sanitize(table.concat(out, "\n"))
end

function M.check_session_id(id)
  if type(id) ~= "string" or not id:match("^[%w][%w_.%-]*$") or #id > 128 or id:find("..", 1, true) then
    common.raise("InvalidSessionId", "the session id must be 1-128 characters of [A-Za-z0-9_.-], " ..
      "starting with a letter or digit, without '..'")
  end
  return id
end

-- A URL to show: scheme://host[:port]/path, without userinfo or query.
local function display_url(url)
  local scheme, rest = tostring(url):match("^(%a[%w+.-]*)://(.*)$")
  if not scheme then return "the configured endpoint" end
  local authority, path = rest:match("^([^/?#]*)([^?#]*)")
  authority = authority:gsub("^.*@", "")
  return scheme .. "://" .. authority .. path
end

local function post(ctx, id, args, markdown, token)
  local http = require "http"
  local json = require "json"
  local url = ctx.config.publish_url
  local headers = { ["content-type"] = "application/json", ["idempotency-key"] = "review/" .. id,
    ["user-agent"] = "engine-publish-review/1" }
  if token then headers["authorization"] = "Bearer " .. token end
  local findings = {}
  for i, f in ipairs(args.findings) do findings[i] = common.sanitize_value(f) end
  local body = json.encode({ session_id = id, verdict = args.verdict, summary = common.sanitize(args.summary),
    findings = findings, markdown = markdown })
  local ok, res = pcall(http.request, { url = url, method = "POST", headers = headers, body = body,
    timeout = 30, connect_timeout = 10, max_bytes = 64 * 1024 })
  local where = display_url(url)
  if not ok then
    local e = res
    common.raise(type(e) == "table" and e.type or "ConnectionError",
      "posting the review to " .. where .. " failed: " .. (type(e) == "table" and e.message or tostring(e)))
  end
  if res.status < 200 or res.status >= 300 then
    common.raise("PublishFailed", string.format("posting the review to %s failed: HTTP %d %s", where, res.status,
      (common.cap(res.body or "", 500, "body"))))
  end
  return { content = string.format("review posted to %s (HTTP %d)", where, res.status),
    data = { destination = where, status = res.status, verdict = args.verdict, findings = #args.findings } }
end

local function write_file(ctx, id, markdown)
  local dir = ctx.config and ctx.config.reviews_dir or os.getenv("ENGINE_REVIEWS_DIR") or "reviews"
  if type(dir) ~= "string" or dir == "" or dir:find("%z") then common.raise("NotConfigured", "no reviews directory") end
  local made, merr = fs.mkdir_p(dir)
  if not made then common.raise("PublishFailed", "cannot create the reviews directory " .. dir .. " (" .. merr .. ")") end
  local path = dir:gsub("/+$", "") .. "/" .. id .. ".md"
  local tmp = path .. ".tmp"
  local f, err = io.open(tmp, "wb")
  if not f then common.raise("PublishFailed", "cannot write " .. path .. ": " .. tostring(err)) end
  local okw, werr = f:write(markdown)
  f:close()
  if not okw then
    os.remove(tmp)
    common.raise("PublishFailed", "cannot write " .. path .. ": " .. tostring(werr))
  end
  local okr, rerr = os.rename(tmp, path)
  if not okr then
    os.remove(tmp)
    common.raise("PublishFailed", "cannot write " .. path .. ": " .. tostring(rerr))
  end
  return { content = "review written to " .. path, data = { path = path, bytes = #markdown } }
end

-- The grant publishing needs (docs/grants.md); ENGINE_PUBLISH_TOKEN goes
-- only with a review grant.
function M.grant() return "review", nil, "publish" end

function M.run(ctx, args)
  local id = M.check_session_id(ctx.session_id)
  local token = os.getenv("ENGINE_PUBLISH_TOKEN")
  if token == "" or not require("grants").may_use("ENGINE_PUBLISH_TOKEN", ctx.grant) then token = nil end
  local markdown = M.markdown(id, args)
  local config = ctx.config or {}
  local ok, res = pcall(function()
    if type(config.publish_url) == "string" and config.publish_url ~= "" then
      return post({ config = config }, id, args, markdown, token)
    end
    return write_file({ config = config }, id, markdown)
  end)
  -- whatever happened, the token is not in what we hand back
  local extra = token and { token } or nil
  if not ok then
    local e = res
    common.raise(type(e) == "table" and e.type or "PublishFailed",
      common.sanitize(type(e) == "table" and tostring(e.message) or tostring(e), extra))
  end
  res.data.verdict = args.verdict
  res.data.findings = #args.findings
  return common.sanitize_value(res, extra)
end

return M
