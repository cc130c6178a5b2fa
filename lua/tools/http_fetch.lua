-- http_fetch (trusted side): a GET of an http(s) URL whose host is on
-- permissions.networkAllowlist (exactly, or by a "*.suffix" entry). No
-- userinfo, no cookies, no credentials of any kind are sent; redirects are
-- followed by hand (at most 5) and every hop is checked again; only text-like
-- responses are returned, capped at 256 KiB, control characters stripped and
-- secrets redacted (common.sanitize).
local common = require "tools.common"

local MAX_BYTES = 256 * 1024
local MAX_REDIRECTS = 5

local M = {
  name = "http_fetch",
  description = "Fetch a web page or API response with an HTTP GET. Only hosts on the session's network " ..
    "allowlist can be reached. Returns the status, content type and the body as text (at most 256 KiB).",
  parameters = {
    type = "object",
    properties = {
      url = { type = "string", minLength = 1, maxLength = 2048, description = "an http:// or https:// URL" },
    },
    required = { "url" },
    additionalProperties = false,
  },
  side = "trusted",
  publishes = false,
  writes = false,
  MAX_BYTES = MAX_BYTES,
}

local TEXT_TYPES = {
  ["application/json"] = true, ["application/xml"] = true, ["application/javascript"] = true,
  ["application/x-javascript"] = true, ["application/ecmascript"] = true, ["application/x-yaml"] = true,
  ["application/yaml"] = true, ["application/toml"] = true, ["application/x-sh"] = true,
  ["application/sql"] = true, ["application/graphql"] = true, ["application/x-ndjson"] = true,
  ["application/ld+json"] = true, ["image/svg+xml"] = true,
}

function M.text_like(content_type)
  local mime = (content_type or ""):match("^%s*([^;%s]+)")
  if not mime then return false end
  mime = mime:lower()
  if mime:match("^text/") then return true end
  if TEXT_TYPES[mime] then return true end
  if mime:match("^application/[%w.%-]+%+json$") or mime:match("^application/[%w.%-]+%+xml$") then return true end
  return false
end

-- Checks a URL against the allowlist: returns the parsed URL or raises.
function M.check_url(url, allowlist)
  local u, why = common.parse_url(url)
  if not u then common.raise("InvalidURL", why) end
  if not common.host_allowed(u.host, allowlist, u.port or (u.scheme == "https" and 443 or 80)) then
    common.raise("HostNotAllowed", "the host '" .. u.host .. "' is not on the network allowlist")
  end
  return u
end

-- A location header (absolute, or relative to the current URL) -> absolute URL.
local function resolve_location(base, loc)
  if loc:match("^%a[%w+.-]*://") then return loc end
  if loc:sub(1, 2) == "//" then return base.scheme .. ":" .. loc end
  local origin = base.scheme .. "://" .. base.host .. (base.port and (":" .. base.port) or "")
  if loc:sub(1, 1) == "/" then return origin .. loc end
  local dir = base.path:gsub("[?#].*$", ""):match("^(.*/)") or "/"
  return origin .. dir .. loc
end

local function read_body(res)
  if type(res.read) ~= "function" then
    local body = res.body or ""
    if #body > MAX_BYTES then return body:sub(1, MAX_BYTES), true end
    return body, false
  end
  local parts, n, truncated = {}, 0, false
  while true do
    local chunk = res:read()
    if chunk == nil then break end
    if n + #chunk > MAX_BYTES then
      parts[#parts + 1] = chunk:sub(1, MAX_BYTES - n)
      truncated = true
      break
    end
    parts[#parts + 1] = chunk
    n = n + #chunk
  end
  if type(res.close) == "function" then pcall(res.close, res) end
  return table.concat(parts), truncated
end

-- The grant a fetch needs: http:HOST:GET (docs/grants.md).
function M.grant(args)
  local u, why = common.parse_url(args.url)
  if not u then common.raise("InvalidURL", why) end
  return "http", u.host, "GET"
end

-- A redirect's hop needs a grant of the session's too (ctx.grants: nil in a
-- session recorded before grants).
local function check_grant(ctx, u)
  if ctx.grants == nil then return end
  local grants = require "grants"
  local need, why = grants.need("http", u.host, "GET")
  local ok = need and grants.check(ctx.grants, need, os.time() * 1000, {})
  if not ok then
    common.raise("GrantDenied", "redirected to " .. u.host .. ": " .. (need and ("missing grant " .. need.text) or why))
  end
end

function M.run(ctx, args)
  local http = require "http"
  local allowlist = ctx.permissions and ctx.permissions.networkAllowlist or {}
  local url = args.url
  local u = M.check_url(url, allowlist)
  local res
  for hop = 0, MAX_REDIRECTS do
    local ok, r = pcall(http.request, {
      url = url, method = "GET", stream = true, max_bytes = 4 * MAX_BYTES,
      timeout = 30, connect_timeout = 10, idle_timeout = 20,
      headers = { ["user-agent"] = "engine-http-fetch/1", accept = "text/*, application/json, application/xml;q=0.9, */*;q=0.1" },
    })
    if not ok then
      local e = r
      local t = type(e) == "table" and e.type or "ConnectionError"
      local msg = type(e) == "table" and e.message or tostring(e)
      if t == "ResponseTooLarge" then msg = "the response is too large" end
      common.raise(t, msg)
    end
    res = r
    local status = res.status or 0
    local location = res.headers and res.headers["location"]
    if status >= 300 and status < 400 and status ~= 304 and location then
      if type(res.close) == "function" then pcall(res.close, res) end
      if hop == MAX_REDIRECTS then common.raise("TooManyRedirects", "more than " .. MAX_REDIRECTS .. " redirects") end
      url = resolve_location(u, location)
      local ok2, err = pcall(M.check_url, url, allowlist)
      if not ok2 then
        common.raise(type(err) == "table" and err.type or "HostNotAllowed",
          "redirected to " .. url .. ": " .. (type(err) == "table" and err.message or tostring(err)))
      end
      u = err
      check_grant(ctx, u)
    else
      break
    end
  end
  local ctype = res.headers and res.headers["content-type"] or ""
  local body, truncated = read_body(res)
  if ctype == "" and not body:find("%z") and utf8.len(body) then ctype = "text/plain (assumed)" end
  if not M.text_like(ctype) and ctype ~= "text/plain (assumed)" then
    return { content = string.format("HTTP %d from %s: content type '%s' is not text; body not shown (%d bytes).",
      res.status or 0, u.host, ctype, #body),
      data = { status = res.status, content_type = ctype, url = url, bytes = #body, shown = false } }
  end
  local text = common.sanitize(body)
  if truncated then text = text .. string.format("\n[response truncated at %d bytes]", MAX_BYTES) end
  return { content = string.format("HTTP %d %s\ncontent-type: %s\n\n%s", res.status or 0, common.sanitize(url), ctype, text),
    data = { status = res.status, content_type = ctype, url = url, bytes = #body, truncated = truncated } }
end

return M
