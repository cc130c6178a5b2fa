-- 30-network: http_fetch may reach only hosts on permissions.networkAllowlist
-- (an exact host, or "*.suffix" for its subdomains, either with an optional
-- ":port"); anything else, and any URL that is not plain http(s) without
-- credentials, is denied. Matching is policylib.hosts: case and one trailing
-- dot do not matter, a Unicode host must be written in its xn-- form.
local hosts = policylib.hosts

return {
  name = "network",
  decide = function(req)
    if req.tool ~= "http_fetch" then return nil end
    local args = type(req.args) == "table" and req.args or {}
    local url, why = hosts.parse_url(args.url)
    if not url then return "deny", "http_fetch: " .. why end
    if url.scheme ~= "http" and url.scheme ~= "https" then
      return "deny", "http_fetch: scheme '" .. url.scheme .. "' is not allowed"
    end
    local list = type(req.permissions) == "table" and req.permissions.networkAllowlist or nil
    local port = url.port or (url.scheme == "https" and 443 or 80)
    if not hosts.allowed(url.host, list, port) then
      return "deny", "http_fetch: the host '" .. url.host .. "' is not on the network allowlist"
    end
    return nil
  end,
}
