-- The shell policy, table-driven: every bypass attempt below (a program that
-- runs programs, an option that writes a file, a variable that changes what
-- runs, ...) must ask a human ("approve"); the genuinely read-only or confined
-- commands must stay allowed ("allow"). Then the policies' library
-- (lua/policy_lib, policylib inside a policy) directly: word splitting, paths,
-- hosts, options, that policies cannot change it, and that it is in the hash.
--
--   lua5.4 tests/policy/test_shell_policy.lua [POLICIES_DIR]   (from any directory)
--
-- Prints "attempt | expected | got" for every row; exits non-zero on any mismatch.
local script = arg and arg[0] or "tests/policy/test_shell_policy.lua"
local repo = script:match("^(.*)/tests/policy/[^/]+$") or "."
if repo == "" then repo = "." end
package.path = repo .. "/lua/?.lua;" .. repo .. "/lua/?/init.lua;" .. package.path
-- the native fs module: build/fs.so (ctest sets LUA_CPATH_5_4 to its build directory)
package.cpath = package.cpath .. ";" .. repo .. "/build/?.so"

local policy = require "policy"
local shell = require "policy_lib.shell"
local paths = require "policy_lib.paths"
local hosts = require "policy_lib.hosts"
local options = require "policy_lib.options"
local commands = require "policy_lib.commands"

local POLICIES = arg and arg[1] or (repo .. "/policies")

local passed, failed = 0, 0
local function test(name, fn)
  local ok, err = pcall(fn)
  if ok then
    passed = passed + 1
  else
    failed = failed + 1
    io.stderr:write("FAIL ", name, "\n  ", tostring(err), "\n")
  end
end
local function fail(msg) error(msg, 3) end
local function ok(cond, msg) if not cond then fail(msg or "expected a true value") end end
local function eq(a, b, msg)
  if a ~= b then fail((msg and (msg .. ": ") or "") .. "expected " .. tostring(b) .. ", got " .. tostring(a)) end
end
local function has(s, sub, msg)
  if type(s) ~= "string" or not s:find(sub, 1, true) then
    fail((msg and (msg .. ": ") or "") .. string.format("expected %q to contain %q", tostring(s), sub))
  end
end
local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local function capture(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return (out:gsub("\n$", ""))
end

-- ------------------------------------------------------------ the table --

-- command line -> what the default policy set must decide
local APPROVE = {
  -- git: pagers, aliases, hooks and programs named by options or config
  "git grep -Oless foo", "git grep -O foo", "git grep --open-files-in-pager=sh foo",
  "git grep --open-files-in-pager foo", "git grep --open=sh foo", "git grep -nOsh foo", "git grep -in -O./x.sh foo",
  "git -c core.pager=sh log", "git -c alias.x='!sh -c id' x", "git -c core.fsmonitor=./x status",
  "git -c core.hooksPath=/workspace/working/h status", "git -c diff.external=./x diff",
  "git -c core.sshCommand=./x log", "git --config-env=core.pager=P log", "git --exec-path=/workspace/working log",
  "git --git-dir=/workspace/working/evil log", "git --work-tree=/ status", "git -C / status",
  "git -C /workspace/input/repo diff", "git -p log", "git --paginate log", "git --bare log", "git diff --ext-diff",
  "git log -p --ext-diff", "git show --textconv HEAD", "git diff --output=/etc/x", "git diff --output /etc/x",
  "git log --output=/workspace/working/x", "git log --outp=x", "git format-patch -1", "git help log", "git log --help",
  "git st", "git cat-file --textconv HEAD:a", "git cat-file --filters HEAD:a", "git log --show-signature",
  "git blame --textconv a", "git log $opt", "git diff *", "git $sub", "git clone 'ext::sh -c id' /workspace/working/x",
  "git clone -u ./x /workspace/input/r.bundle /workspace/working/r",
  "git clone --template=/workspace/working/t a /workspace/working/r",
  "git clone -c core.fsmonitor=x a /workspace/working/r", "git clone a /tmp/r",
  "git clone host:repo /workspace/working/r", "git clone --recurse-submodules a /workspace/working/r",
  "/usr/bin/git -c core.pager=sh log", "git commit -am wip", "git push", "git config core.pager sh",
  -- environment variables that name programs or change behaviour
  "GIT_PAGER=sh git log", "GIT_EXTERNAL_DIFF=./x git diff", "GIT_SSH_COMMAND=./x git log",
  "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=sh git log", "GIT_DIR=/x git log",
  "env GIT_PAGER=sh git log", "export GIT_PAGER=sh; git log", "PAGER=sh git log", "LD_PRELOAD=./x.so ls",
  "LD_LIBRARY_PATH=. ls", "BASH_ENV=x bash -c ls", "ENV=x sh -c ls", "PATH=/workspace/working:$PATH ls", "IFS=/ ls",
  "EDITOR=./x git log", "VISUAL=./x ls", "LESSOPEN='|id %s' cat a", "PYTHONPATH=. pytest -q",
  "PYTEST_ADDOPTS=-pevil pytest", "MAKEFLAGS=-f/x make test", "FOO=1 ls", "PATH=/tmp", "IFS=x", "export PATH=/tmp; ls",
  "set -a; x=1", "set -o allexport", "printf -v PATH /tmp", "read PATH < a", "for PATH in /tmp; do ls; done",
  "declare -n r=PATH; r=/tmp; ls", "declare -x FOO=1", "local -i x", "typeset -n x", "unset 'a[$(id)]'", "unset 'a[x]'",
  "env -i LD_PRELOAD=/x ls", "env PATH=/workspace/working ls",
  -- find, rg, grep, sort, sed, awk, tar, date
  "find . -exec sh \\;", "find . -execdir rm {} +", "find . -ok rm {} \\;", "find . -okdir rm {} \\;", "find . -delete",
  "find . -fprint /etc/x", "find . -fprintf /etc/x %p", "find . -fls /etc/x", "find . -fprint0 x",
  "find . -name x $act", "find . \"-exe\"\"c\" id \\;", "find . -name *", "rg --pre ./x foo", "rg --pre=sh foo",
  "rg --pre-glob '*' --pre sh foo", "rg foo *", "rg $opts foo", "sort --compress-program=sh a", "sort --compress=sh a",
  "sort -o /etc/x a", "sort -uo/etc/x a", "sort -T /tmp a", "sort --temporary-directory=/tmp a", "sort $opt a",
  "sort --random-thing a", "sed '1e id' a.txt", "sed e a.txt", "sed 's/x/id/e' a.txt", "sed 'w /etc/x' a",
  "sed 's/a/b/w /etc/x' a", "sed 'W /tmp/x' a", "sed 'r /etc/shadow' a", "sed 'R x' a", "sed -i 's/a/b/' /etc/hosts",
  "sed -i'/tmp/*' 's/a/b/' a.txt", "sed -f script.sed a", "sed --expression='1e id' a", "sed -n -e p -e '1e id' a",
  "sed -e \"$s\" a", "sed -ne '$!{h;d};x;e' a", "sed -i 's/a/b/'", "sed --in-place=/x 's/a/b/' a",
  "awk 'BEGIN{system(\"id\")}'", "awk '{print | \"sh\"}'", "awk '{print > \"/etc/x\"}'",
  "awk 'BEGIN{\"id\" | getline x}'", "awk -f prog.awk", "gawk -l filefuncs 'BEGIN{}'", "gawk '@load \"x\"; BEGIN{}'",
  "mawk -W exec prog.awk", "awk \"$prog\" a.txt", "awk '{printf \"%s\", $0 > \"/tmp/x\"}'",
  "awk '{print \"}\" > \"/tmp/x\"}'", "awk -v x=1 -f p.awk a", "gawk -o/etc/x '{}' a",
  "gawk --dump-variables=/etc/x '{}' a", "tar --to-command=sh -xf a.tar", "tar -I sh -tf a.tar",
  "tar --use-compress-program=sh -tf a.tar", "tar -tf a.tar --checkpoint=1 --checkpoint-action=exec=id",
  "tar -tf a.tar --info-script=x.sh", "tar -F x.sh -tf a.tar", "tar -tf host:/a.tar", "tar -xf a.tar",
  "tar tf a.tar --to-command=sh", "tar -cf /workspace/output/a.tar .", "tar -tf \"$a\"", "date -s 2020-01-01",
  "date 0101", "date --set=now",
  -- xargs, env and the other wrappers run what they are given
  "xargs rm", "xargs sh -c 'id'", "xargs -I{} sh -c '{}'", "find . | xargs git grep -O foo",
  "xargs --process-slot-var=LD_PRELOAD grep x", "xargs -a list env", "xargs python3", "ls | xargs -0 perl",
  "env python3 -c 1", "env -S 'sh -c id'", "env -C / rm x", "env --chdir=/ ls", "env -u PATH ls; env FOO=1 ls",
  "nice python3 x.py", "timeout 5 python3 -c 1", "nohup rm /x", "stdbuf -o0 perl -e 1", "time -o /etc/x ls",
  "command perl -e 1", "exec python3", "eval ls", "builtin eval ls", "nice -n 5 env X=1 ls", "timeout 5 sh -c 'rm /x'",
  "nice --adjustment=3 -- awk 'BEGIN{system(\"id\")}'",
  -- pagers, editors, interpreters, package managers, build tools, archives
  "less a.txt", "more a.txt", "man ls", "vi a", "vim -c '!id'", "nano a", "emacs a", "ed a", "python -c 1",
  "python3 x.py", "python3 -m http.server", "perl -e 1", "ruby -e 1", "node -e 1", "lua -e 1", "bash -c \"$x\"",
  "sh -c 'python3 -c 1'", "bash x.sh", "sh -s < x", "bash -i -c ls", "bash --rcfile x -c ls", "bash -l -c ls",
  "sh -c 'git grep -Oless x'", "bash -c \"bash -c 'perl -e 1'\"", "zsh -c ls", "sh", "zip x.zip a", "unzip a.zip",
  "patch -p1 < x.diff", "make", "make install", "make -f x test", "pip install x", "npm install", "npm run build",
  "npx x", "curl -o /workspace/output/x http://example.com", "wget x", "diff3 --diff-program=sh a b c",
  -- shell constructs that run or hide commands
  "echo $(id)", "echo `id`", "cat <(id)", "diff <(ls) <(ls)", "f(){ id; }; f", "ls(){ rm -rf /; }; ls",
  "alias ls=id; ls", ". ./x.sh", "source x.sh", "trap id EXIT", "cat <<EOF\n$(id)\nEOF", "cat <<EOF\nhi\n",
  "cat <<EOF\nEO\\\nF\nrm -rf /x\nEOF", "export 'a[1]=x'", "x='a[$(id)]'; [[ $x -eq 1 ]]", "[[ x -eq 1 ]]",
  "test -v 'a[$(id)]'", "[ -v x ]", "echo ${x:=y}", "echo ${!x}", "echo ${x@P}", "echo ${x:1}", "echo ${a[1]}",
  "echo $[1+1]", "echo $((1+1))", "(( i++ ))", "$x", "\"$CMD\" a", "l? /", "/usr/bin/l*", "./x.sh", "/tmp/ls",
  "/usr/bin/../../tmp/x", "~/bin/ls", "case x in *) id;; esac", "coproc id", "function f { id; }", "a=(x y)",
  -- writes outside working/ and output/, including through cd, globs and symlinks
  "cd /; cd /workspace/working/nope; rm x", "while true; do rm x; cd /; done", "cd /; (cd /workspace/working); rm x",
  "cd / | true; rm x", "cd $D; rm x", "cd; rm x", "cd -; rm x", "cp * /workspace/output/",
  "echo x > /workspace/output/.*", "rm -rf /workspace/working/.*", "rm -rf /workspace/working/..?",
  "ln -s ../../etc /workspace/working/l", "ln -s /etc /workspace/working/l", "cp -s /etc/passwd /workspace/working/x",
  "cp -l /workspace/input/a /workspace/working/x", "cp --parents ../../etc/x /workspace/output",
  "cp -b -S /../../etc/x a /workspace/working/b", "install -d /etc/x /workspace/working/y", "mv /workspace/input/a .",
  "head -c 1 /dev/zero > /dev/sda", "echo x > /proc/self/attr/current", "> /etc/x", "cat a >& /etc/x",
  "yes | head > /workspace/input/x", "tee /workspace/input/x < a", "echo x > /tmp/x", "echo x > /workspace/outputs/x",
  "echo x > /workspace/working/../input/x", "touch /workspace/output/../../etc/x", "gzip -S /../../x a",
  "rmdir -p /workspace/working/a/b", "chmod 777 /workspace/input/a", "dd of=/etc/x", "dd $args", "cat a | tee /etc/x",
  "echo a > {b,/etc/x}", "touch ~/x",
  "bash -c 'cat < /dev/tcp/127.0.0.1/2375'", "git log --format=%G?", "tar tfz host:/x", "cd /workspace/input/repo && git status", "git -C \"$d\" diff",
  -- test runners: only the plain test run, from working/ or output/
  "pytest -p evil", "pytest --basetemp=/", "pytest -c /tmp/x.ini", "pytest -o cache_dir=/tmp",
  "pytest /workspace/input/tests", "cd /tmp && pytest", "pytest --junitxml=/etc/x", "python3 -m pytest -p x",
  "pytest --rootdir=/", "pytest $args", "pytest -W error::x.Warning", "pytest --confcutdir=/",
  "python3 -m pytest --pyargs os",
}

local ALLOW = {
  "cd /workspace/input/repo && git --no-optional-locks status", "git -C \"$d\" log", "tar tzf a.tgz",
  "git log -p", "git log --oneline -5", "git diff HEAD~1", "git diff --stat origin/main...feature",
  "git show HEAD:README.md", "git grep -n foo", "git grep -e foo -- '*.py'", "git grep -nie foo", "git grep -e -O foo",
  "git status", "git --no-pager log -p -- src/", "git -C /workspace/working/repo log", "git -C repo status",
  "git blame a.py", "git ls-files", "git rev-parse HEAD", "git log --output-indicator-new=+ -p", "git diff --text",
  "git log --format='%H %s'", "git clone -q -b feature /workspace/input/repo.bundle /workspace/working/repo",
  "git --version", "git --exec-path", "git --no-optional-locks -C /workspace/input/repo status",
  "git diff --no-ext-diff --no-textconv", "git log -- '$x'",
  "cd /workspace/working/repo && git log --oneline origin/main..feature && git diff --stat origin/main...feature",
  "cd /workspace/working/repo && git diff origin/main...feature && python3 -m pytest -q 2>&1 | tail -5 || true",
  "rg -n foo src", "rg -n foo src/*.py", "rg -z foo", "grep -rn x .", "grep -f patterns.txt -r src", "egrep x a",
  "ls -la", "ls -la /workspace/input", "cat a | head", "cat a | head -n 5 | sort | uniq -c", "find . -name '*.py'",
  "find . -type f -newer x -print", "find /workspace/input -maxdepth 2", "sed -n 1,5p f", "sed -n '1,5p' a.txt",
  "sed 's/a/b/g' a.txt", "sed -e 's/a/b/' -e '/x/d' a", "sed '1i header' a", "sed -i 's/a/b/' /workspace/working/a.txt",
  "sed -i.bak 's/a/b/' a.txt", "sed -E 's/(a|b)/x/g' a", "sed '/start/,/end/p' a", "sed = a", "sed '$!N;P;D' a",
  "sed '1!G;h;$!d' a.txt", "sed 's/e/E/2g' a", "echo x > /workspace/working/a", "echo x >> /workspace/output/log 2>&1",
  "pytest -q", "pytest -q tests/test_x.py::test_a", "pytest -x -k 'not slow' --tb=short", "python3 -m pytest -q",
  "make test", "npm test", "npm run test", "awk '{print $1}' a.txt", "awk -F: '$3 > 100 {print $1}' /etc/passwd",
  "awk 'NR>1' a", "mawk '{s+=$1} END {print s}' a", "awk -v n=3 'NR==n' a", "sort -k2 -t, a.csv",
  "sort -o /workspace/output/s.txt a", "sort -n a | uniq", "uniq a /workspace/output/u", "wc -l *.py",
  "head -n 20 a; tail -n 20 a", "for f in *.py; do wc -l \"$f\"; done", "while read -r l; do echo \"$l\"; done < a.txt",
  "while IFS= read -r line; do echo \"$line\"; done < a", "if [ -f a ]; then cat a; fi",
  "test -d /workspace/input && ls /workspace/input", "[[ -f a ]] && echo yes", "[[ 3 -gt 2 ]]", "cd sub && rm -f *.o",
  "mkdir -p /workspace/output/r && cp /workspace/input/a /workspace/output/r/", "rm -rf /workspace/working/build",
  "rm -rf /workspace/working/*", "tar -tzf /workspace/input/a.tgz", "tar tvf a.tar",
  "cat > /workspace/working/a.py <<'EOF'\nimport os\nprint($x, `y`, $(z))\nEOF",
  "cat <<EOF > /workspace/output/r.md\nhello $USER\nEOF", "cat <<-EOF\n\thi\n\tEOF", "env", "env LC_ALL=C sort a",
  "env -i ls", "LC_ALL=C grep -c x a", "timeout 10 grep -r x .", "nice -n 10 rg foo", "nohup ls", "time ls",
  "command -v git", "command ls", "exec ls", "xargs grep -n import", "find . -name '*.py' | xargs grep -n import",
  "find . -print0 | xargs -0 wc -l", "ls | xargs echo", "bash -c 'ls -la'", "sh -c 'cat a | head'", "sh -ec 'ls'",
  "/usr/bin/git log", "/bin/ls", "echo 'git grep -Oless x'", "echo \"rm -rf /\"", "printf '%s\\n' a b",
  "date +%Y-%m-%d", "date -u", "du -sh .", "stat a", "diff a b", "diff -u a b > /workspace/output/d.patch", "cmp a b",
  "column -t a", "jq .name a.json", "x=1; echo $x", "DIR=/workspace/input; ls $DIR", "set -euo pipefail; ls",
  "export LC_ALL=C; sort a", "readlink -f a", "realpath a", "git diff | head", "gzip -c a > /workspace/output/a.gz",
  "gzip /workspace/working/a", "ln -s /workspace/working/a /workspace/working/b", "ln -s a b",
  "touch /workspace/output/x", "chmod +x /workspace/working/run.sh", "dd if=/workspace/input/a of=/workspace/output/b",
  "tee /workspace/output/a < b", "cat a >/dev/null 2>&1", "ls 2>/dev/null", "echo x >&2", "cat a 1>&2", "sleep 1",
  "cat a <<< 'x'", "ls # ; rm /x", "echo a \\\n b", "{ ls; pwd; } > /workspace/output/o",
  "(cd /workspace/output && ls)", "cd /workspace/output; for f in *; do wc -c \"$f\"; done",
  "echo ${x:-default} ${#x} ${x%.py}",
}

local function load_set(dir)
  local set, err = policy.load_dir(dir)
  if not set then
    io.stderr:write("cannot load ", dir, ": ", tostring(err), "\n")
    os.exit(2)
  end
  return set
end

local function shell_request(command)
  return {
    tool = "shell", args = { command = command }, side = "sandbox", writes = true, publishes = false,
    permissions = { tools = { "read_file", "list_files", "search", "shell", "write_file", "run_tests" },
      networkAllowlist = {}, writablePaths = { "/workspace/working", "/workspace/output" }, requiresApproval = {} },
    session_id = "test-shell-policy",
  }
end

local function show(s)
  s = s:gsub("\n", "\\n")
  if #s > 72 then s = s:sub(1, 69) .. "..." end
  return s
end

do
  local set = load_set(POLICIES)
  local rows, mismatches = {}, 0
  local function row(command, expected)
    local d = policy.decide(set, shell_request(command))
    local bad = d.decision ~= expected
    if bad then mismatches = mismatches + 1 end
    rows[#rows + 1] = string.format("%-72s | %-7s | %-7s%s", show(command), expected, d.decision,
      bad and ("  <- MISMATCH: " .. tostring(d.reason)) or "")
  end
  for _, c in ipairs(APPROVE) do row(c, "approve") end
  for _, c in ipairs(ALLOW) do row(c, "allow") end
  print(string.format("%-72s | %-7s | %s", "attempt", "expected", "got"))
  print(string.rep("-", 72) .. "-+-" .. string.rep("-", 8) .. "-+-" .. string.rep("-", 8))
  for _, r in ipairs(rows) do print(r) end
  print(string.format("%d rows, %d mismatches (policies: %s)", #rows, mismatches, POLICIES))
  if mismatches > 0 then failed = failed + 1 else passed = passed + 1 end
end

-- ----------------------------------------------------------- the library --

local function words_of(line)
  local toks = assert(shell.split(line))
  local out = {}
  for _, t in ipairs(toks) do
    out[#out + 1] = t.op and ("<" .. t.op .. ">")
      or t.redir and ("[" .. (t.fd or "") .. t.redir .. t.target.text .. "]") or t.text
  end
  return table.concat(out, "|")
end

test("shell.split: quotes, escapes, operators, redirections", function()
  eq(words_of([[ls -l 'a b' "c d" e\ f]]), "ls|-l|a b|c d|e f")
  eq(words_of([['it'"'"'s' "a\"b" "\$x" 'a\b']]), [[it's|a"b|$x|a\b]])
  eq(words_of("a;b&&c||d|e&f|&g"), "a|<;>|b|<&&>|c|<||>|d|<|>|e|<&>|f|<|&>|g")
  eq(words_of("echo x>f 2>&1 <in >>app 3<>rw &>all"), "echo|x|[>f]|[2>&1]|[<in]|[>>app]|[3<>rw]|[&>all]")
  eq(words_of("echo a\\\nb # rm /x"), "echo|ab")
  eq(words_of("a\nb"), "a|<\n>|b")
  eq(words_of("(ls)"), "<(>|ls|<)>")
  local t = assert(shell.split([[echo "$HOME" a$x *.py src/*.py '*' ~ a=~/x [ [[ a[1] -$y]]))
  local function flags(w)
    return (w.expand and "e" or "") .. (w.split and "s" or "") .. (w.glob and "g" or "") .. (w.lead and "l" or "")
  end
  local got = {}
  for i = 2, #t do got[#got + 1] = t[i].text .. "=" .. flags(t[i]) end
  eq(table.concat(got, " "), "$HOME=el a$x=es *.py=gl src/*.py=g *= ~=e a=~/x=e [= [[= a[1]=g -$y=es")
  local a = assert(shell.split([[x=1 y="a b" 'z'=1 w+=2 cmd]]))
  eq(a[1].assign, "x"); eq(a[2].assign, "y"); eq(a[2].text, "y=a b"); eq(a[3].assign, nil); eq(a[4].assign, "w")
  eq(a[5].assign, nil)
end)

test("shell.split: here-documents", function()
  local t = assert(shell.split("cat <<'EOF' > out\n$(id) `x`\nEOF\necho done"))
  eq(t[2].redir, "<<"); eq(t[2].literal, true); eq(t[2].body, "$(id) `x`")
  eq(t[3].redir, ">"); eq(t[3].target.text, "out"); eq(t[#t].text, "done")
  local u = assert(shell.split("cat <<-E\n\tx $y\n\tE"))
  eq(u[2].body, "x $y"); eq(u[2].literal, false)
  local _, why = shell.split("cat <<E\n$(id)\nE")
  has(why, "here-document")
  _, why = shell.split("cat <<E\nno end")
  has(why, "unterminated here-document")
end)

test("shell.split: what it refuses", function()
  for line, want in pairs({
    ["echo $(id)"] = "command substitution", ["echo `id`"] = "command substitution",
    ['echo "$(id)"'] = "command substitution", ["cat <(id)"] = "process substitution", ["echo $[1]"] = "arithmetic",
    ["(( x ))"] = "arithmetic", ["echo 'x"] = "unterminated quote", ['echo "x'] = "unterminated quote",
    ["echo ${x:=1}"] = "assignments", ["echo ${x=1}"] = "assignments", ["echo ${!x}"] = "indirect",
    ["echo ${x@P}"] = "transformations", ["echo ${x:1:2}"] = "substring", ["echo ${a[0]}"] = "subscripts",
    ["echo >"] = "redirection without a target", ["echo > ;"] = "redirection without a target",
  }) do
    local toks, why = shell.split(line)
    eq(toks, nil, line)
    has(why, want, line)
  end
  ok(shell.split("echo ${x:-a} ${x-a} ${x:+a} ${#x} ${x%%.*} ${x/a/b} ${1} $@ $# $?"), "plain expansions split")
end)

test("shell.commands and shell.words", function()
  local c = assert(shell.commands("a x | b > f && c; d"))
  eq(#c, 4); eq(c[1].op, ""); eq(c[2].op, "|"); eq(c[2].redirs[1].target.text, "f"); eq(c[3].op, "&&"); eq(c[4].op, ";")
  local _, why = shell.commands("f() { id; }")
  has(why, "function definitions")
  local w = assert(shell.words("git log -p 'a b'"))
  eq(table.concat(w, ","), "git,log,-p,a b")
  eq((shell.words("ls > x")), nil); eq((shell.words("ls $x")), nil); eq((shell.words("a; b")), nil)
end)

test("paths: normalize, resolve, under, confined", function()
  eq(paths.normalize("/a/./b/../c/"), "/a/c"); eq(paths.normalize("/"), "/"); eq(paths.normalize("//a//b"), "/a/b")
  eq(paths.normalize("/.."), nil); eq(paths.normalize("/a/../.."), nil); eq(paths.normalize("a/b"), nil)
  eq(paths.normalize("/a\0b"), nil); eq(paths.normalize(nil), nil)
  eq(paths.resolve("b/../c", "/a"), "/a/c"); eq(paths.resolve("/x", nil), "/x"); eq(paths.resolve("x", nil), nil)
  eq(paths.resolve("", "/a"), nil)
  ok(paths.under("/a/b", "/a")); ok(paths.under("/a", "/a")); ok(paths.under("/a/b/", "/a/"))
  ok(not paths.under("/ab", "/a")); ok(not paths.under("/a/../b", "/a")); ok(paths.under("/anything", "/"))
  ok(not paths.under("a/b", "a"))
  local roots = { "/workspace/working", "/workspace/output" }
  local c, abs = paths.confined("x/y", roots, "/workspace/working")
  ok(c); eq(abs, "/workspace/working/x/y")
  ok(not paths.confined("../input/x", roots, "/workspace/working"))
  ok(not paths.confined("/workspace/outputs/x", roots))
  ok(not paths.confined("x", roots, nil))
end)

test("hosts: URLs, wildcards, ports, trailing dots, case, IDN, userinfo", function()
  local u = assert(hosts.parse_url("HTTPS://Example.COM.:8443/a?b#frag"))
  eq(u.scheme, "https"); eq(u.host, "example.com"); eq(u.port, 8443); eq(u.path, "/a?b")
  u = assert(hosts.parse_url("http://[::1]:8080"))
  eq(u.host, "[::1]"); eq(u.port, 8080); eq(u.path, "/")
  for url, want in pairs({
    ["https://u@example.com/"] = "credentials", ["https://u:p@example.com/"] = "credentials",
    ["https://evil.com\\@example.com/"] = "backslashes", ["https://exa mple.com/"] = "spaces",
    ["https://ex%61mple.com/"] = "percent", ["https://example.com:0/"] = "port", ["https://example.com:99999/"] = "port",
    ["https://example.com:x/"] = "port", ["https://example.com../"] = "not a plain host",
    ["https://exämple.com/"] = "xn--", ["https:///x"] = "no host", ["example.com/x"] = "absolute",
    ["https://[::1/"] = "IPv6",
  }) do
    local r, why = hosts.parse_url(url)
    eq(r, nil, url)
    has(why, want, url)
  end
  eq(hosts.parse_url("https://example.com#@evil.com/").host, "example.com")
  eq(hosts.parse_url("https://example.com?@evil.com").host, "example.com")
  eq(hosts.normalize("API.Example.com."), "api.example.com")
  ok(hosts.match("a.example.com", "*.example.com")); ok(hosts.match("a.b.example.com", "*.Example.COM."))
  ok(not hosts.match("example.com", "*.example.com")); ok(not hosts.match("badexample.com", "*.example.com"))
  ok(not hosts.match("example.com.evil.com", "example.com")); ok(hosts.match("EXAMPLE.com.", "example.com"))
  ok(hosts.match("example.com", "example.com", 8443), "an entry without a port matches any port")
  ok(hosts.match("example.com", "example.com:8443", 8443)); ok(not hosts.match("example.com", "example.com:8443", 443))
  ok(hosts.match("xn--exmple-cua.com", "XN--EXMPLE-CUA.COM")); ok(not hosts.match("exämple.com", "xn--exmple-cua.com"))
  ok(not hosts.match("a.example.com", "a.*.com")); ok(not hosts.match("a.example.com", "*"))
  ok(hosts.match("[::1]", "[::1]:8080", 8080)); ok(not hosts.match("x", 42))
  local yes, entry = hosts.allowed("api.example.com", { "other.org", "*.example.com" }, 443)
  ok(yes); eq(entry, "*.example.com")
  ok(not hosts.allowed("api.example.com", nil)); ok(not hosts.allowed("a", { 1, {} }))
end)

test("options.parse: clusters, values, abbreviations, --, unknown options, expansions", function()
  local spec = { short = "nrs", short_arg = { o = "output", k = "key" }, short_opt = { i = "in-place" },
    long = { output = true, key = true, reverse = false, check = "optional", ["in-place"] = "optional" }, abbrev = true }
  local function parse(line) return options.parse(assert(shell.split(line)), spec) end
  local r = assert(parse("-nro/x a --key 2 --rev -- -b"))
  eq(r.has.n and r.has.r and true, true); eq(r.has.output.value.text, "/x"); eq(r.has.key.value.text, "2")
  ok(r.has.reverse); eq(#r.operands, 2); eq(r.operands[1].text, "a"); eq(r.operands[2].text, "-b")
  eq(assert(parse("--out=y")).has.output.value.text, "y"); eq(assert(parse("-ibak")).has["in-place"].value.text, "bak")
  eq(assert(parse("-i")).has["in-place"].value, nil)
  for line, want in pairs({ ["-x"] = "unknown option '-x'", ["--nope"] = "unknown", ["-o"] = "needs a value",
    ["--reverse=1"] = "takes no value", ["*"] = "may expand", ["$x"] = "may expand", ["a$x"] = "may expand" }) do
    local res, why = parse(line)
    eq(res, nil, line); has(why, want, line)
  end
  local amb = { long = { output = true, ["output-dir"] = true }, abbrev = true }
  local _, why = options.parse(assert(shell.split("--out=x")), amb)
  has(why, "ambiguous")
  ok(options.parse(assert(shell.split("src/*.py -- $x")), spec), "a glob that starts with a name, and words after --")
end)

test("commands.analyze: reasons, and no writable roots means nothing is written", function()
  local opts = { cwd = "/workspace/working", writable = { "/workspace/working" } }
  eq(commands.analyze("ls -la", opts), nil)
  has(commands.analyze("git grep -Oless x", opts), "-O")
  has(commands.analyze("echo x > /etc/x", opts), "/etc/x")
  has(commands.analyze("perl -e 1", opts), "not known to be read-only")
  eq(commands.analyze("touch a", opts), nil)
  ok(commands.analyze("touch a", { cwd = "/workspace/working" }), "no writable roots")
  ok(commands.analyze("pytest -q", opts), "test runs only when the policy says so")
  local tests_ok = { cwd = "/workspace/working", writable = { "/workspace/working" }, test_runners = true }
  eq(commands.analyze("pytest -q", tests_ok), nil)
  has(commands.analyze(42, opts), "no command line")
  eq(commands.READ_ONLY.cat, "any"); eq(commands.READ_ONLY.git, "checked"); eq(commands.READ_ONLY.perl, nil)
  ok(commands.exported_ok("LC_ALL") and commands.exported_ok("LC_NUMERIC") and not commands.exported_ok("GIT_PAGER"))
  ok(commands.shell_var_ok("x") and not commands.shell_var_ok("PATH") and not commands.shell_var_ok("LD_PRELOAD"))
end)

-- --------------------------------------------------- read-only guarantee --

-- fixture directories under $TMPDIR (tests/lua_test.lua), removed at the end
local lua_test = dofile(repo .. "/tests/lua_test.lua")
local function tempdir() return lua_test.tmpdir("test_shell_policy") end
local function policy_dir(files)
  local dir = tempdir()
  for name, content in pairs(files) do
    local f = assert(io.open(dir .. "/" .. name, "wb"))
    f:write(content)
    f:close()
  end
  return dir
end

test("policylib is read-only: a policy cannot change what the next policy sees", function()
  local tamper = [[
local worked = {}
local function try(what, f) if pcall(f) then worked[#worked + 1] = what end end
try("replace a module", function() policylib.shell = {} end)
try("remove a module", function() policylib.commands = nil end)
try("replace a function", function() policylib.paths.normalize = function() return "/workspace/working" end end)
try("add to the table", function() policylib.commands.READ_ONLY.perl = "any" end)
try("table.insert", function() table.insert(policylib.commands.READ_ONLY, "perl") end)
try("new global field", function() policylib.extra = 1 end)
try("pairs state", function()
  local _, state = pairs(policylib.commands.READ_ONLY)
  state.perl = "any"
end)
local n = 0
for k, v in pairs(policylib) do n = n + 1 end
return function(req)
  if #worked > 0 then return "deny", "changed policylib: " .. table.concat(worked, ", ") end
  if n ~= 5 then return "deny", "pairs saw " .. n .. " modules" end
end
]]
  local check = [[
return function(req)
  if policylib.commands.READ_ONLY.perl ~= nil then return "deny", "perl became read-only" end
  if policylib.paths.normalize("/a/../b") ~= "/b" then return "deny", "normalize changed" end
  if not policylib.commands.analyze("perl -e 1", {cwd = "/w", writable = {"/w"}}) then return "deny", "perl ok" end
  if policylib.extra ~= nil then return "deny", "extra field" end
  return "allow", "library intact"
end
]]
  local set = assert(policy.load_dir(policy_dir({ ["a.lua"] = tamper, ["b.lua"] = check })))
  local d = policy.decide(set, { tool = "t", permissions = { tools = { "t" } } })
  eq(d.decision, "allow", d.reason)
  eq(d.reason, "library intact")
  eq(require("policy_lib.programs").table.perl, nil, "the real table is untouched")
  local err_set = assert(policy.load_dir(policy_dir({ ["a.lua"] = "return function(req) policylib.x = 1 end\n" })))
  local d2 = policy.decide(err_set, { tool = "t", permissions = { tools = { "t" } } })
  eq(d2.decision, "deny"); has(d2.reason, "read-only")
end)

test("the set hash covers the library's own sources", function()
  local dir = policy_dir({ ["a.lua"] = "return function(req) end\n" })
  local set = assert(policy.load_dir(dir))
  local files = { { name = "a.lua", content = "return function(req) end\n" } }
  ok(set.hash ~= policy.hash_sources(files), "the library is part of the hash")
  local all = { files[1] }
  for _, s in ipairs(policy.library_sources()) do all[#all + 1] = s end
  eq(set.hash, policy.hash_sources(all))
  local names = {}
  for _, s in ipairs(policy.library_sources()) do names[#names + 1] = s.name end
  has(table.concat(names, " "), "policy_lib/commands.lua")
  -- a copy of lua/ with one library file edited gives another hash for the same policies
  local copy = tempdir()
  os.execute("cp -r " .. shell_quote(repo .. "/lua") .. " " .. shell_quote(copy .. "/lua"))
  local probe = copy .. "/probe.lua"
  local f = assert(io.open(probe, "wb"))
  f:write("package.path = arg[1] .. '/?.lua;' .. package.path\npackage.cpath = " .. string.format("%q", package.cpath)
    .. "\nprint(assert(require('policy').load_dir(arg[2])).hash)\n")
  f:close()
  local function hash_with(lua_dir)
    return capture("lua5.4 " .. shell_quote(probe) .. " " .. shell_quote(lua_dir) .. " " .. shell_quote(dir))
  end
  eq(hash_with(copy .. "/lua"), set.hash, "the same library, the same hash")
  local lib = io.open(copy .. "/lua/policy_lib/paths.lua", "ab")
  lib:write("-- edited\n")
  lib:close()
  local edited = hash_with(copy .. "/lua")
  ok(edited:match("^%x+$") and edited ~= set.hash, "editing the library changes the hash (" .. edited .. ")")
end)

-- ------------------------------------------------------------- cleanup --

lua_test.remove_tmpdirs()

print(string.format("%d passed, %d failed", passed, failed))
os.exit(failed == 0 and 0 or 1)
