-- 30-network: http_fetch may reach only hosts on permissions.networkAllowlist
-- (an exact host, or "*.suffix" for its subdomains); anything else, and any
-- URL that is not plain http(s) without credentials, is denied.
local function host_of(url)
  if type(url) ~= "string" then return nil, "the URL is not a string" end
  if url:find("[%z\1-\32\127\\]") then return nil, "the URL contains spaces, control characters or backslashes" end
  local scheme, rest = url:match("^(%a[%w+.-]*)://(.*)$")
  if not scheme then return nil, "not an absolute URL" end
  scheme = scheme:lower()
  if scheme ~= "http" and scheme ~= "https" then return nil, "scheme '" .. scheme .. "' is not allowed" end
  local authority = rest:match("^([^/?#]*)")
  if authority:find("@", 1, true) then return nil, "credentials in the URL are not allowed" end
  local host = authority:sub(1, 1) == "[" and authority:match("^(%[[^%]]*%])") or authority:match("^([^:]*)")
  if not host or host == "" then return nil, "the URL has no host" end
  return (host:lower():gsub("%.$", ""))
end

local function allowed(host, list)
  if type(list) ~= "table" then return false end
  for _, entry in ipairs(list) do
    if type(entry) == "string" then
      local e = entry:lower()
      if e:sub(1, 2) == "*." then
        local suffix = e:sub(2)
        if #host > #suffix and host:sub(-#suffix) == suffix then return true end
      elseif e == host then
        return true
      end
    end
  end
  return false
end

return {
  name = "network",
  decide = function(req)
    if req.tool ~= "http_fetch" then return nil end
    local args = type(req.args) == "table" and req.args or {}
    local host, why = host_of(args.url)
    if not host then return "deny", "http_fetch: " .. why end
    local list = type(req.permissions) == "table" and req.permissions.networkAllowlist or nil
    if not allowed(host, list) then
      return "deny", "http_fetch: the host '" .. host .. "' is not on the network allowlist"
    end
    return nil
  end,
}
