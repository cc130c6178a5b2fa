#!/usr/bin/env bash
# Shell completion (`engine completion bash|zsh`, `engine __complete`): the
# bash script called as bash calls it (COMP_WORDS, COMP_CWORD, COMP_LINE),
# every option of every command's usage line offered by both scripts, ids
# from the database of the line (--db, ENGINE_DB) by status, quick on 10,000
# workflows, silent on stderr whatever goes wrong; then both scripts in real
# interactive shells on a terminal driven by tmux (bash --norc -i, zsh -f with
# compinit, sourced and from $fpath).
source "$(dirname "$0")/lib.sh"
WF="$SRC/tests/integration/wf"
for tool in tmux zsh sqlite3; do
  command -v "$tool" >/dev/null || { fail "no $tool on this machine (scripts/install-deps installs it)"; finish; }
done
# `engine` on PATH, as a user has it: the scripts run the command of the line
mkdir -p "$T/bin" "$T/work/sub"
ln -s "$ENGINE" "$T/bin/engine"
export PATH="$T/bin:$PATH"
unset ENGINE_SERVER ENGINE_TOKEN
engine completion bash >"$T/engine.bash"
engine completion zsh >"$T/_engine"

# --- the database: two sessions waiting for approval, two finished, a token
bg SERVE engine serve
for n in 7 8; do
  assert_exit "pr-review:$n recorded" 3 engine start "$WF/approvals.lua" --id "pr-review:$n" --detach \
    --input "{\"requests\":[{\"id\":\"r$n\",\"tool\":\"shell\",\"timeout\":3600}]}"
done
engine start "$WF/tiny.lua" --id done-1 --detach >/dev/null || true
engine start "$WF/tiny.lua" --id done-2 --detach >/dev/null || true
wait_status pr-review:7 waiting && wait_status pr-review:8 waiting && wait_status done-1 completed &&
  wait_status done-2 completed || fail "the test workflows never got going"
engine token create ci-bot --scopes read >/dev/null 2>&1
touch "$T/work/review.lua" "$T/work/notes.txt"

# comp FRAG LINE WORD...: what the bash script offers (COMPREPLY, sorted, one
# per line) for the command line LINE split by bash into WORDs, the last one
# being completed, of which bash replaces FRAG (what it passes as $2). Run
# with set -u; anything on stderr is kept in $T/comp.err.
comp() {
  local frag="$1" line="$2"
  shift 2
  (cd "$T/work" && bash --norc -c 'set -u; source "$1"; frag=$2 COMP_LINE=$3; shift 3
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_POINT=${#COMP_LINE}
    _engine engine "$frag" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf "%s\n" "${COMPREPLY[@]}" | sort' _ "$T/engine.bash" "$frag" "$line" "$@" 2>>"$T/comp.err") || true
}
# c LINE: comp for a line without : = @ (bash splits it at blanks only); a
# line ending in a blank completes an empty word.
c() {
  local -a w
  read -ra w <<<"$1"
  [[ "$1" == *" " ]] && w+=("")
  comp "${w[${#w[@]} - 1]}" "$1" "${w[@]}"
}
lines() { tr '\n' ' ' | sed 's/ $//'; }
: >"$T/comp.err"

# --- the bash script: loaded, registered, commands and options
assert_eq "complete -p names the function" "complete -F _engine engine" \
  "$(bash --norc -c "source '$T/engine.bash'; complete -p engine")"
assert_eq "engine ap completes to approve" "approve" "$(c "engine ap" | lines)"
assert_eq "every command" "approve audit cancel completion config doctor eval events fork gc grants history list memory migrate policy quota replay schedule serve show signal start test token trigger verify" \
  "$(c "engine " | lines)"
assert_eq "global options before the command" "--color --config --help --server --token --version" "$(c "engine --" | lines)"
assert_eq "a command after --server URL" "schedule serve show signal start" "$(c "engine --server http://127.0.0.1:1 s" | lines)"
assert_eq "list --status offers the statuses" "cancelled completed failed queued running stuck waiting" \
  "$(c "engine list --status " | lines)"
assert_eq "list --status w" "waiting" "$(c "engine list --status w" | lines)"
assert_eq "--status=wa (bash cuts at =)" "waiting" \
  "$(comp "wa" "engine list --status=wa" engine list --status = wa | lines)"
assert_eq "token subcommands" "create list revoke" "$(c "engine token " | lines)"
assert_eq "token create --scopes" "admin approve cancel read signal start" \
  "$(c "engine token create x --scopes " | lines)"
assert_eq "--scopes after a comma: after what is there" "read,signal read,start" \
  "$(c "engine token create x --scopes read,s" | lines)"
assert_eq "--scopes: not those there already" "read,start,admin read,start,approve read,start,cancel read,start,signal" \
  "$(c "engine token create x --scopes read,start," | lines)"
assert_eq "completion shells" "bash zsh" "$(c "engine completion " | lines)"
assert_eq "policy check" "check" "$(c "engine policy " | lines)"
assert_eq "quota list" "list" "$(c "engine quota " | lines)"

# Every option of every usage line (engine COMMAND --help, engine --help for
# the global ones) is offered: a new option must be added to the scripts.
usage_options() { # COMMAND [SUB]: the options its usage lines name
  engine "$@" --help | sed '/^$/q' | grep -E "^(usage: |       )engine $1${2:+ $2}" | { grep -oE -- '--[a-z][a-z-]*' || true; } | sort -u
}
for cmd in start fork serve signal approve cancel list show events history replay eval test gc policy quota migrate verify doctor completion; do
  want="$(usage_options "$cmd" | lines)"
  got="$(c "engine $cmd -" | lines)"
  missing=""
  for o in $want; do [[ " $got " == *" $o "* ]] || missing+=" $o"; done
  assert_eq "bash offers every option of $cmd's usage ($want)" "" "$missing"
done
for sub in export verify key; do
  want="$(usage_options audit "$sub" | lines)"
  got="$(c "engine audit $sub -" | lines)"
  missing=""
  for o in $want; do [[ " $got " == *" $o "* ]] || missing+=" $o"; done
  assert_eq "bash offers every option of audit $sub ($want)" "" "$missing"
done
for sub in create list revoke; do
  want="$(usage_options token "$sub" | lines)"
  got="$(c "engine token $sub -" | lines)"
  missing=""
  for o in $want; do [[ " $got " == *" $o "* ]] || missing+=" $o"; done
  assert_eq "bash offers every option of token $sub ($want)" "" "$missing"
done
want="$(engine --help | grep '^usage:' | grep -oE -- '--[a-z][a-z-]*' | sort -u | lines)"
got="$(c "engine -" | lines)"
missing=""
for o in $want; do [[ " $got " == *" $o "* ]] || missing+=" $o"; done
assert_eq "bash offers the global options ($want)" "" "$missing"

# --- ids from the database, by status, and what a workflow waits on
assert_eq "approve offers the waiting sessions only" "pr-review:7 pr-review:8" "$(c "engine approve " | lines)"
assert_eq "show offers every workflow" "done-1 done-2 pr-review:7 pr-review:8" "$(c "engine show " | lines)"
assert_eq "events, a prefix" "done-1 done-2" "$(c "engine events d" | lines)"
assert_eq "cancel offers the unfinished" "pr-review:7 pr-review:8" "$(c "engine cancel " | lines)"
assert_eq "start --id offers existing ids" "done-1 done-2" "$(c "engine start --id do" | lines)"
assert_eq "after the id's colon bash replaces only what follows it" "7 8" \
  "$(comp "" "engine approve pr-review:" engine approve pr-review : | lines)"
assert_eq "after the colon and a digit" "7" "$(comp "7" "engine approve pr-review:7" engine approve pr-review : 7 | lines)"
assert_eq "signal ID offers the signal it waits on" "approval:r7" "$(c "engine signal pr-review:7 " | lines)"
assert_eq "approve --request offers the pending request" "r8" "$(c "engine approve pr-review:8 --request " | lines)"
assert_eq "--db PATH on the line is the database (an empty one here: nothing)" "" \
  "$(engine token create x --scopes read --db "$T/other.db" >/dev/null 2>&1; c "engine show --db $T/other.db " | lines)"
assert_eq "token revoke offers live tokens" "ci-bot" "$(c "engine token revoke " | lines)"
assert_eq "--server: no ids (they are the server's)" "" "$(c "engine --server http://127.0.0.1:1 show " | lines)"
assert_eq "ENGINE_SERVER: no ids either" "" "$(ENGINE_SERVER=http://127.0.0.1:1 c "engine show " | lines)"

# --- files: FILE.lua, --input @file, --script
assert_eq "start FILE.lua: .lua files and directories" "review.lua sub" "$(c "engine start " | lines)"
assert_eq "--input @ offers files after the @" "@notes.txt" "$(comp "@no" "engine start x.lua --input @no" \
  engine start x.lua --input @ no | lines)"
assert_eq "--script offers .lua files" "review.lua" "$(c "engine replay done-1 --script r" | lines)"
assert_eq "test FILE_test.lua...: .lua files and directories" "review.lua sub" "$(c "engine test " | lines)"
assert_eq "test: more files after one" "review.lua sub" "$(c "engine test review.lua " | lines)"
assert_eq "test --run takes free text" "" "$(c "engine test --run " | lines)"
assert_eq "nothing on stderr while completing" "" "$(cat "$T/comp.err")"

# --- engine __complete itself: quiet and read-only on 10,000 workflows
B="$T/bulk.db"
engine start "$WF/tiny.lua" --id seed --db "$B" >/dev/null 2>&1
sqlite3 "$B" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)
  INSERT INTO workflows(id,run,status,script_name,script_dir,code_hash,input,result,error,cancel,created_at,updated_at)
  SELECT printf('bulk-%05d', i), run, CASE i % 3 WHEN 0 THEN 'waiting' ELSE 'completed' END, script_name,
         script_dir, code_hash, input, result, error, cancel, created_at + i, updated_at + i
  FROM n, workflows WHERE id = 'seed'"
assert_eq "10,001 workflows" 10001 "$(sqlite3 "$B" "SELECT count(*) FROM workflows")"
before="$(sha256sum "$B" | cut -c1-64) $(cd "$T" && ls bulk.db*)"
assert_eq "a prefix: its ids only" "bulk-04200 bulk-04201 bulk-04202 bulk-04203 bulk-04204 bulk-04205 bulk-04206 bulk-04207 bulk-04208 bulk-04209" \
  "$(engine __complete ids --db "$B" bulk-0420 | lines)"
assert_eq "a whole id is its own prefix" "seed" "$(engine __complete ids --db "$B" seed)"
assert_eq "no prefix: at most 500, in id order" "500 bulk-00001" \
  "$(engine __complete ids --db "$B" | wc -l) $(engine __complete ids --db "$B" | sed -n 1p)"
assert_eq "with --status" "bulk-00012 bulk-00015 bulk-00018" \
  "$(engine __complete ids --db "$B" --status waiting bulk-0001 | lines)"
assert_eq "--describe adds status and script" "bulk-00003	waiting tiny.lua" \
  "$(engine __complete ids --db "$B" --describe bulk-00003)"
assert_eq "ENGINE_DB names the database of a line without --db" "bulk-09998 bulk-09999" \
  "$(ENGINE_DB="$B" c "engine show bulk-0999" | sed -n '9,10p' | lines)"
assert_eq "--db=PATH (bash cuts at =)" "bulk-10000" \
  "$(comp "bulk-1" "engine show --db=$B bulk-1" engine show --db = "$B" bulk-1 | lines)"
assert_eq "--db ~/PATH (a ~ the shell has not expanded yet)" "bulk-10000" \
  "$(HOME="$T" c "engine show --db ~/bulk.db bulk-1" | lines)"
# (how quick: tests/bench/completion_bench.sh, on a database like this one)
for p in bulk-0 bulk-05 bulk-077 bulk-0999 bulk-1 seed x; do c "engine show --db $B $p" >/dev/null; done
assert_eq "the database is left as it was (bytes and files)" "$before" \
  "$(sha256sum "$B" | cut -c1-64) $(cd "$T" && ls bulk.db*)"
echo "not a database" >"$T/junk.db"
for args in "ids --db $T/junk.db" "ids --db $T/none.db" "ids --status nonsense" "ids --limit 0" "bogus" "" \
  "request --db $B" "request --db $B nosuch" "signal --db $B seed" "tokens --db $B"; do
  set +e
  # shellcheck disable=SC2086
  out="$(engine __complete $args 2>"$T/q.err")"
  set -e
  assert_eq "__complete $args: nothing on stderr" "" "$(cat "$T/q.err")"
  [ -z "$out" ] || fail "__complete $args printed [$out]"
done
assert_eq "the junk file is not touched" "not a database" "$(cat "$T/junk.db")"
if [ -e "$T/none.db" ]; then fail "__complete created $T/none.db"; else pass "no database is created"; fi
assert_exit "completion with an unknown shell" 2 engine completion fish
assert_contains "says which" "unknown shell 'fish' (bash or zsh)" "$ERR"

# --- zsh: every option of every usage line in the specs the commands pass
ZSPECS="$(cd "$T/work" && zsh -f -c 'compdef() { :; }; source "$1"
  _arguments() { print -rl -- "$@"; return 1; }
  for f in start fork serve signal approve cancel list show events history grants replay eval test gc policy quota migrate verify doctor completion \
           token_create token_list token_revoke audit_export audit_verify audit_key memory_list memory_show memory_revoke; do
    _engine_cmd_$f | sed -E "s/^\([^)]*\)//; s/^\*//; s/^(-[-a-z]+).*/$f \1/; t; d"
  done' _ "$T/_engine" 2>&1)"
for cmd in start fork serve signal approve cancel list show events history grants replay eval test gc policy quota migrate verify doctor completion \
  "token create" "token list" "token revoke" "audit export" "audit verify" "audit key" "memory list" "memory show" "memory revoke"; do
  missing=""
  # shellcheck disable=SC2086 # "token create" is two arguments
  for o in $(usage_options $cmd); do
    grep -qx -- "${cmd/ /_} $o" <<<"$ZSPECS" || missing+=" $o"
  done
  assert_eq "zsh offers every option of $cmd's usage" "" "$missing"
done

# --- real shells on a terminal (tmux): type, press Tab, read the screen
export TERM="${TERM:-xterm}"
SOCK="$T/tmux.sock"
trap 'EXIT_RC=$?; tmux -S "$SOCK" kill-server 2>/dev/null; cleanup' EXIT
# shell NAME COMMAND: a new window running COMMAND in $T/work
shell() { tmux -S "$SOCK" new-window -d -t comp -n "$1" -c "$T/work" "$2"; }
tmux -S "$SOCK" new-session -d -s comp -n hold -x 160 -y 40 -c "$T/work" "sleep 3600"
screen() { tmux -S "$SOCK" capture-pane -p -t "comp:$1"; }
# until NAME TEXT: waits (up to 10 s) for the window's screen to show TEXT
until_shows() {
  wait_true 30 'screen "$1" | has_line -F -- "$2"' '' "$@" && return 0
  fail "$1: the screen never showed [$2]:"
  screen "$1" >&2
  return 1
}
# until_line NAME LINE: the same for a whole line (tmux drops trailing blanks)
until_line() {
  wait_true 30 'screen "$1" | has_line -xF -- "$2"' '' "$@" && return 0
  fail "$1: the screen never showed the line [$2]:"
  screen "$1" >&2
  return 1
}
# typed NAME KEYS...: clears the line and the screen, then sends KEYS
typed() {
  local win="$1"
  shift
  tmux -S "$SOCK" send-keys -t "comp:$win" C-e C-u C-l
  sleep 0.2 # the keystrokes' pace (the terminal redraws), not a wait for the engine
  tmux -S "$SOCK" send-keys -t "comp:$win" "$@"
}
cat >"$T/rc.bash" <<EOF
PS1='bash\$ '
source <(engine completion bash) && echo "loaded: \$(complete -p engine)"
EOF
shell w-bash "env -u ENGINE_SERVER bash --norc -i"
tmux -S "$SOCK" send-keys -t comp:w-bash "source '$T/rc.bash' 2>'$T/bash.err'" Enter
until_shows w-bash "loaded: complete -F _engine engine"
assert_eq "bash -i loads the script without a word on stderr" "" "$(cat "$T/bash.err")"
typed w-bash "engine ap" Tab
until_line w-bash 'bash$ engine approve' && pass "bash: engine ap<Tab> completes to approve"
typed w-bash "engine approve " Tab
until_line w-bash 'bash$ engine approve pr-review:' && pass "bash: approve <Tab> inserts what the waiting ids share"
tmux -S "$SOCK" send-keys -t comp:w-bash Tab Tab
# bash lists what follows the colon, as it does for any word it cut there
until_line w-bash '7  8' && pass "bash: approve pr-review:<Tab><Tab> lists the waiting ids (7 and 8)"
screen w-bash | has_line 'done-1' && fail "bash: a finished workflow offered to approve"
screen w-bash | has_line 'pr-review:pr-review' && fail "bash: the id's colon doubled the prefix"
typed w-bash "engine show " Tab Tab
until_shows w-bash 'done-1' && until_shows w-bash 'pr-review:8' && pass "bash: show <Tab><Tab> lists every id"
typed w-bash "engine list --status " Tab Tab
until_shows w-bash 'waiting' && until_shows w-bash 'cancelled' && pass "bash: list --status <Tab><Tab> lists the statuses"
typed w-bash "engine signal pr-review:7 " Tab
until_line w-bash 'bash$ engine signal pr-review:7 approval:r7' && pass "bash: signal ID <Tab> gives the signal it waits on"

shell w-zsh "env -u ENGINE_SERVER zsh -f -i"
tmux -S "$SOCK" send-keys -t comp:w-zsh "PS1='zsh%% '; autoload -Uz compinit && compinit -u -D && source <(engine completion zsh) 2>'$T/zsh.err' && echo loaded-\$+_comps[engine]" Enter
until_shows w-zsh "loaded-1"
assert_eq "zsh -f with compinit loads the script without a word on stderr" "" "$(cat "$T/zsh.err")"
typed w-zsh "engine ap" Tab
until_line w-zsh 'zsh% engine approve' && pass "zsh: engine ap<Tab> completes to approve"
typed w-zsh "engine approve " Tab
until_line w-zsh 'zsh% engine approve pr-review:' && tmux -S "$SOCK" send-keys -t comp:w-zsh Tab &&
  until_shows w-zsh 'pr-review:8' &&
  pass "zsh: approve <Tab> offers the waiting ids"
screen w-zsh | has_line 'done-1' && fail "zsh: a finished workflow offered to approve"
typed w-zsh "engine show " Tab
until_shows w-zsh 'completed tiny.lua' && pass "zsh: ids come with their status and script"
typed w-zsh "engine list --status=" Tab
until_shows w-zsh 'stuck' && pass "zsh: list --status= <Tab> offers the statuses"

mkdir -p "$T/zfunc"
cp "$T/_engine" "$T/zfunc/_engine"
shell w-fpath "env -u ENGINE_SERVER zsh -f -i"
tmux -S "$SOCK" send-keys -t comp:w-fpath "PS1='zsh%% '; fpath=('$T/zfunc' \$fpath); autoload -Uz compinit && compinit -u -D && echo loaded-fpath" Enter
until_shows w-fpath "loaded-fpath"
typed w-fpath "engine ap" Tab
until_line w-fpath 'zsh% engine approve' && pass "zsh from \$fpath: engine ap<Tab> completes to approve"
typed w-fpath "engine cancel " Tab Tab
until_shows w-fpath 'pr-review:8' && pass "zsh from \$fpath: ids too"

finish
