-- policy_lib.hosts (policylib.hosts for policies): URL and host matching for
-- network allowlists. Strict on purpose: whatever a lenient parser (curl's)
-- could read differently is refused, never guessed.
--
--   hosts.parse_url("https://Example.COM.:8443/a?b") -> {scheme="https", host="example.com", port=8443, path="/a?b"}
--   hosts.parse_url("https://u@example.com/")        -> nil, "credentials in the URL (user@host) are not allowed"
--   hosts.normalize("Example.COM.")                  -> "example.com"
--   hosts.match("a.example.com", "*.example.com")    -> true  (the bare domain does not match "*.")
--   hosts.match("example.com", "example.com:8443", 443) -> false (an entry with a port matches that port only)
--   hosts.allowed("api.example.com", {"*.example.com"}, 443) -> true, "*.example.com"
local M = {}

local function valid_name(h)
  if #h > 253 then return false end
  for label in (h .. "."):gmatch("([^.]*)%.") do
    if label == "" or #label > 63 or not label:match("^[a-z0-9_-]+$") then return false end
  end
  return true
end

-- The canonical form of a host name or IP literal: lower case, one trailing dot
-- dropped; nil, reason when it is not a plain ASCII host (a Unicode name must
-- be written in its punycode xn-- form: its mapping is the resolver's, not ours).
function M.normalize(host)
  if type(host) ~= "string" or host == "" then return nil, "no host" end
  if host:find("[\128-\255]") then
    return nil, "the host '" .. host .. "' is not ASCII (write an international name in its xn-- form)"
  end
  local h = host:lower()
  if h:sub(1, 1) == "[" then
    if h:match("^%[[%x:.]+%]$") and h:find(":", 1, true) then return h end
    return nil, "malformed IPv6 host '" .. host .. "'"
  end
  if h:sub(-1) == "." then h = h:sub(1, -2) end
  if not valid_name(h) then return nil, "the host '" .. host .. "' is not a plain host name" end
  return h
end

-- An absolute URL split into scheme, host, port (a number, or nil for the
-- scheme's default) and path (with the query; the fragment dropped).
function M.parse_url(url)
  if type(url) ~= "string" or url == "" then return nil, "a URL is required" end
  if url:find("[%z\1-\32\127\\]") then return nil, "the URL contains spaces, control characters or backslashes" end
  local scheme, rest = url:match("^(%a[%w+.-]*)://(.*)$")
  if not scheme then return nil, "not an absolute URL" end
  local authority, path = rest:match("^([^/?#]*)(.*)$")
  if authority:find("@", 1, true) then return nil, "credentials in the URL (user@host) are not allowed" end
  if authority:find("%", 1, true) then return nil, "percent-encoding in the host is not allowed" end
  local host, port
  if authority:sub(1, 1) == "[" then
    host, port = authority:match("^(%[[^%]]*%])(.*)$")
    if not host then return nil, "malformed IPv6 host" end
  else
    host, port = authority:match("^([^:]*)(.*)$")
  end
  if port ~= "" then
    port = port:match("^:(%d+)$")
    port = port and tonumber(port)
    if not port or port < 1 or port > 65535 then return nil, "malformed port" end
  else
    port = nil
  end
  if host == "" then return nil, "the URL has no host" end
  local h, why = M.normalize(host)
  if not h then return nil, why end
  path = path:gsub("#.*$", "")
  if path == "" then path = "/" end
  return { scheme = scheme:lower(), host = h, port = port, path = path }
end

-- An allowlist entry: "host", "*.domain", either with ":port". nil when malformed
-- (a malformed entry matches nothing).
local function parse_entry(entry)
  if type(entry) ~= "string" then return nil end
  local e, port = entry, nil
  local p = e:match(":(%d+)$")
  if p and not e:match("^%[[^%]]*$") then
    port = tonumber(p)
    e = e:sub(1, #e - #p - 1)
  end
  local wildcard = false
  if e:sub(1, 2) == "*." then
    wildcard = true
    e = e:sub(3)
  end
  local h = M.normalize(e)
  if not h or (wildcard and h:sub(1, 1) == "[") then return nil end
  return { host = h, wildcard = wildcard, port = port }
end

-- Whether host (and port, when the entry names one) matches one allowlist entry.
function M.match(host, pattern, port)
  local h = M.normalize(host)
  local e = parse_entry(pattern)
  if not h or not e then return false end
  if e.port and e.port ~= port then return false end
  if e.wildcard then
    return #h > #e.host + 1 and h:sub(-(#e.host + 1)) == "." .. e.host
  end
  return h == e.host
end

-- Whether host is on list (a sequence of entries); also returns the entry that matched.
function M.allowed(host, list, port)
  if type(list) ~= "table" then return false end
  for _, entry in ipairs(list) do
    if M.match(host, entry, port) then return true, entry end
  end
  return false
end

return M
