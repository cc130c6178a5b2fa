-- Shared by the tool modules: typed errors, workspace path handling, output
-- caps, sanitize(text), which every trusted-side result goes through before
-- the model sees it (control characters stripped, secrets redacted), and
-- redact(text), which every sandbox-side result goes through before it is
-- recorded.
local M = {}

M.WORKSPACE = "/workspace"
M.WORKDIR = "/workspace/working"
M.DEFAULT_WRITABLE = { "/workspace/working", "/workspace/output" }

-- Tool errors are tables {type=, message=}; tools.run turns them into
-- {ok=false, error={type=, message=}}.
function M.raise(type_, message) error({ type = type_, message = message }, 0) end

function M.shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- ------------------------------------------------------------- paths --

-- Normalizes an absolute path: collapses "//" and ".", resolves "..".
-- Returns nil when ".." would climb above "/". (The policies' own, so a tool
-- and the policy that judged its call read a path alike.)
M.normalize = require("policy_lib.paths").normalize

-- A path named by the model -> an absolute, normalized path. Relative paths
-- are taken from /workspace/working (the shell's working directory), so
-- "notes.md" and "/workspace/working/notes.md" name the same file.
function M.resolve(path, base)
  if type(path) ~= "string" or path == "" then M.raise("InvalidPath", "a path is required") end
  if path:find("%z") then M.raise("InvalidPath", "the path contains a NUL byte") end
  local abs = path:sub(1, 1) == "/" and path or ((base or M.WORKDIR) .. "/" .. path)
  local norm = M.normalize(abs)
  if not norm then M.raise("InvalidPath", path .. ": climbs above /") end
  return norm
end

-- Is the absolute, normalized path equal to root or below it?
function M.under(path, root)
  root = root:gsub("/+$", "")
  if root == "" then return true end
  return path == root or path:sub(1, #root + 1) == root .. "/"
end

-- Resolves a path and refuses anything outside /workspace.
function M.workspace_path(path)
  local abs = M.resolve(path)
  if not M.under(abs, M.WORKSPACE) then
    M.raise("InvalidPath", path .. ": outside /workspace")
  end
  return abs
end

-- permissions.writablePaths as absolute roots ("output" and "/workspace/output"
-- both name /workspace/output). nil means the sandbox's defaults.
function M.writable_roots(permissions)
  local list = permissions and permissions.writablePaths
  if list == nil then list = M.DEFAULT_WRITABLE end
  local roots = {}
  for _, p in ipairs(list) do
    if type(p) == "string" and p ~= "" then
      local abs = M.normalize(p:sub(1, 1) == "/" and p or (M.WORKSPACE .. "/" .. p))
      if abs then roots[#roots + 1] = abs end
    end
  end
  return roots
end

function M.is_writable(abs, permissions)
  for _, root in ipairs(M.writable_roots(permissions)) do
    if M.under(abs, root) then return true end
  end
  return false
end

-- ------------------------------------------------------------ output --

-- Keeps at most max bytes of text (cut at a UTF-8 boundary), with a note.
function M.cap(text, max, what)
  text = text or ""
  if #text <= max then return text, false end
  local cut = max
  while cut > 0 do
    local b = text:byte(cut + 1)
    if not b or b < 0x80 or b >= 0xC0 then break end
    cut = cut - 1
  end
  return text:sub(1, cut) .. string.format("\n[%s truncated: %d bytes in all, %d shown]", what or "output", #text, cut), true
end

-- Strips control characters other than newline and tab (a lone \r too, so
-- nothing can overwrite what a terminal shows), and ANSI escape sequences.
function M.strip_control(text)
  text = text:gsub("\27%[[%d;?]*[%a@`]", "")   -- CSI sequences
  text = text:gsub("\27%][^\7\27]*\7", "")      -- OSC ... BEL
  text = text:gsub("\r\n", "\n")
  text = text:gsub("[%z\1-\8\11\12\13-\31\127]", "")
  return text
end

local function escape_pattern(s) return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")) end

-- Environment variables whose values are secrets the engine may hold.
M.SECRET_ENV = { "ENGINE_PUBLISH_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "GH_TOKEN",
  "ENGINE_API_TOKEN", "ENGINE_WEBHOOK_SECRET", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN" }

-- The shortest value redacted for a key, or nil when the key names no secret.
local function secret_key_min(key)
  local k = key:lower()
  if k:find("passw") or k:find("passphrase") then return 4 end
  if k:find("token") or k:find("secret") or k:find("api[_-]?key") or k:find("access[_-]?key")
      or k:find("private[_-]?key") or k:find("credential") or k:find("authorization")
      or k:find("auth[_-]?key") or k:find("session[_-]?key") or k:find("cookie") then
    return 8
  end
  return nil
end

local function secret_key(key, value)
  if value:find("redacted", 1, true) then return false end
  -- `token = tokenize(s)`, `password=os.environ["PW"]`: code that computes
  -- a value, not a credential (no token has brackets)
  if value:find("[%(%[]") then return false end
  local min = secret_key_min(key)
  return min ~= nil and #value >= min
end

-- key=value / "key": "value" pairs whose key names a secret.
local function redact_pairs(text)
  local out, last = {}, 1
  local pos = 1
  while true do
    local s = text:find("[:=]", pos)
    if not s then break end
    -- the key: up to 64 word characters before the separator (and an optional quote and spaces)
    local before = text:sub(math.max(last, s - 80), s - 1)
    local key = before:match("([%w_%-]+)[\"']?%s*$")
    local next_pos = s + 1
    if key and #key <= 64 and secret_key_min(key) then
      local ws, quote, value = text:match("^(%s*)([\"']?)([^%s\"'&,;<>]+)", s + 1)
      if value and secret_key(key, value) then
        local vstart = s + 1 + #ws + #quote
        out[#out + 1] = text:sub(last, vstart - 1)
        out[#out + 1] = "[redacted]"
        last = vstart + #value
        next_pos = last
      end
    end
    pos = next_pos
  end
  if last == 1 then return text end
  out[#out + 1] = text:sub(last)
  return table.concat(out)
end

-- Redacts anything shaped like a credential: provider API keys, GitHub,
-- Slack, AWS and Google keys, JWTs, private key blocks, bearer/basic
-- authorization values, key=value pairs whose key names a secret, URL
-- userinfo, and the literal values of the secret environment variables above
-- (and of `extra`, a list of strings). A pure function of its input and the
-- engine's environment: the same text is redacted the same way every time.
function M.redact(text, extra)
  if type(text) ~= "string" then return text end
  local literals = {}
  for _, name in ipairs(M.SECRET_ENV) do
    local v = os.getenv(name)
    if v and #v >= 6 then literals[#literals + 1] = v end
  end
  for _, v in ipairs(extra or {}) do
    if type(v) == "string" and #v >= 4 then literals[#literals + 1] = v end
  end
  for _, v in ipairs(literals) do text = text:gsub(escape_pattern(v), "[redacted]") end

  text = text:gsub("%-%-%-%-%-BEGIN ([%u ]*)PRIVATE KEY%-%-%-%-%-.-%-%-%-%-%-END [%u ]*PRIVATE KEY%-%-%-%-%-",
    "[redacted private key]")
  text = text:gsub("%-%-%-%-%-BEGIN ([%u ]*)PRIVATE KEY%-%-%-%-%-.*", "[redacted private key]")
  local function long(prefix, min)
    return function(body)
      if #body >= min then return prefix .. "[redacted]" end
    end
  end
  -- an API key starts a word and has digits: "risk-assessment-notes" is no key
  text = text:gsub("%f[%w]sk%-([%w%-_]+)", function(body)
    if #body >= 20 and body:find("%d") then return "sk-[redacted]" end
  end)
  text = text:gsub("(gh[pousr]_)([%w]+)", function(p, body) if #body >= 20 then return p .. "[redacted]" end end)
  text = text:gsub("github_pat_([%w_]+)", long("github_pat_", 20))
  text = text:gsub("glpat%-([%w%-_]+)", long("glpat-", 16))
  text = text:gsub("(xox[abposr]%-)([%w%-]+)", function(p, body) if #body >= 10 then return p .. "[redacted]" end end)
  text = text:gsub("(A[KS]IA)([%u%d]+)", function(p, k) if #k == 16 then return p .. "[redacted]" end end)
  text = text:gsub("AIza([%w%-_]+)", long("AIza", 30))
  text = text:gsub("eyJ[%w%-_]+%.eyJ[%w%-_]+%.[%w%-_]*", "[redacted jwt]")
  -- Authorization: Bearer xxx / Basic xxx / token xxx
  local function credential_like(v) return #v >= 16 or (#v >= 8 and v:find("[%d=+/]")) end
  text = text:gsub("([Bb][Ee][Aa][Rr][Ee][Rr]%s+)([%w%-%._~%+/=]+)",
    function(p, v) if credential_like(v) then return p .. "[redacted]" end end)
  text = text:gsub("([Bb][Aa][Ss][Ii][Cc]%s+)([%w%+/=]+)",
    function(p, v) if #v >= 8 and v:find("[%d=+/]") then return p .. "[redacted]" end end)
  -- password=..., "api_key": "...", token: ...  (scanned from each ':' or '='
  -- with a bounded look-back: a pattern starting at every letter would be
  -- quadratic on long runs of text)
  text = redact_pairs(text)
  -- URL userinfo: scheme://user:pass@host
  text = text:gsub("://([^/%s@]*)@", function(info)
    if #info > 0 then return "://[redacted]@" end
  end)
  return text
end

-- Everything the model sees from a trusted-side tool goes through this.
function M.sanitize(text, extra)
  if type(text) ~= "string" then return text end
  return M.redact(M.strip_control(text), extra)
end

-- Redacts every string in a value (tables copied, not modified).
function M.redact_value(v, depth)
  depth = depth or 0
  if type(v) == "string" then return M.redact(v) end
  if type(v) ~= "table" or depth > 20 then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = M.redact_value(x, depth + 1) end
  return out
end

-- Sanitizes every string in a value (tables copied, not modified).
function M.sanitize_value(v, extra, depth)
  depth = depth or 0
  if type(v) == "string" then return M.sanitize(v, extra) end
  if type(v) ~= "table" or depth > 20 then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = M.sanitize_value(x, extra, depth + 1) end
  return out
end

-- ------------------------------------------------------------ network --

-- URLs and allowlists are read by the policies' own parser (policy_lib.hosts),
-- so the network policy and the fetch tool can never disagree on a host.
local hosts = require "policy_lib.hosts"

-- Parses an http(s) URL for the fetch tool: {scheme, host, port, path}, or
-- nil, reason (other schemes, userinfo, spaces, control characters, hosts
-- that are not plain host names).
function M.parse_url(url)
  local u, why = hosts.parse_url(url)
  if not u then return nil, why end
  if u.scheme ~= "http" and u.scheme ~= "https" then
    return nil, "scheme '" .. u.scheme .. "' is not allowed (http, https only)"
  end
  return u
end

-- Does host (on port, default the scheme's) match the allowlist? An entry
-- matches exactly ("api.github.com") or as "*.suffix" (not the bare suffix),
-- and an entry with ":port" only that port.
function M.host_allowed(host, allowlist, port)
  return (hosts.allowed(host, allowlist, port))
end

return M
