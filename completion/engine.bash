# bash completion for engine, printed by `engine completion bash`.
#
#   now:      source <(engine completion bash)        (or put that line in ~/.bashrc)
#   for good: engine completion bash > ~/.local/share/bash-completion/completions/engine
#             (read by the bash-completion package; it is not needed otherwise)
#
# The commands and their options are known here. Workflow ids, API token
# names and what a workflow waits on come from `engine __complete` (the
# database of --db on the line, else $ENGINE_DB, else ./engine.db); with
# --server or $ENGINE_SERVER the ids are the server's, so none are looked up.
# Nothing is printed on stderr while completing.

_engine_commands=(start fork serve signal approve audit memory cancel list show events history grants replay eval test gc policy trigger schedule token quota migrate verify doctor completion config)
_engine_statuses=(running waiting queued completed failed cancelled stuck)
_engine_scopes=(read start signal approve cancel admin)
# The options that take a value (as --opt VALUE or --opt=VALUE).
_engine_valued=" --config --server --token --color --db --from --to --input --id --listen --workflows --log-format --request --reason --status --run --script --scopes --grant --at --turn --input-patch --model --policies --baseline --fork --variants --key --kind --identity "

# Sets opts to the options of command $1 (of token's subcommand $2).
_engine_options() {
  case $1 in
    start) opts=(--input --id --detach --quiet -q --json --color --traceparent --tracestate --db --help -h) ;;
    fork) opts=(--at --turn --id --input-patch --script --model --policies --detach --quiet -q --json --color --db --help -h) ;;
    serve) opts=(--db --listen --workflows --log-format --help -h) ;;
    signal | cancel | gc) opts=(--color --db --help -h) ;;
    approve) opts=(--request --deny --reason --db --help -h) ;;
    list) opts=(--status --tree --json --db --help -h) ;;
    show) opts=(--json --color --db --help -h) ;;
    events) opts=(--follow -f --full --json --color --db --help -h) ;;
    history) opts=(--run --json --db --help -h) ;;
    grants) opts=(--json --db --help -h) ;;
    replay) opts=(--script --apply --all --status --json --db --help -h) ;;
    eval) opts=(--id --baseline --live --fork --at --turn --variants --detach --quiet -q --json --color --db --help -h) ;;
    quota | config) opts=(--json --db --help -h) ;;
    migrate) opts=(--db --from --to --help -h) ;;
    verify) opts=(--all --json --db --help -h) ;;
    doctor) opts=(--json --color --db --help -h) ;;
    test) opts=(--json --run --help -h) ;;
    audit)
      case $2 in
        export | key) opts=(--db --help -h) ;;
        verify) opts=(--key --help -h) ;;
        *) opts=(--help -h) ;;
      esac ;;
    memory)
      case $2 in
        list) opts=(--kind --identity --json --db --help -h) ;;
        show) opts=(--json --db --help -h) ;;
        revoke) opts=(--reason --db --help -h) ;;
        *) opts=(--help -h) ;;
      esac ;;
    token)
      case $2 in
        create) opts=(--scopes --grant --db --help -h) ;;
        list) opts=(--json --db --help -h) ;;
        revoke) opts=(--db --help -h) ;;
        *) opts=(--help -h) ;;
      esac ;;
    *) opts=(--help -h) ;;
  esac
}

# Sets words and cword from COMP_WORDS and COMP_CWORD, with the pieces bash
# cut at a : = or @ (COMP_WORDBREAKS) glued back where COMP_LINE has no blank
# between them: "pr:7" is one id, "--status=wa" one option.
_engine_split_words() {
  local i w rest=${COMP_LINE-} blank
  for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
    w=${COMP_WORDS[i]}
    blank=${rest%%[![:blank:]]*}
    rest=${rest#"$blank"}
    [[ $rest == "$w"* ]] && rest=${rest#"$w"}
    if ((i > 0)) && [[ -z $blank ]] && [[ $w =~ ^[=:@]+$ || ${COMP_WORDS[i - 1]} =~ ^[=:@]+$ ]]; then
      words[${#words[@]} - 1]+=$w
    else
      words+=("$w")
    fi
    ((i == COMP_CWORD)) && cword=$((${#words[@]} - 1))
  done
}

# Offers each argument that starts with the word being completed, less the
# part of it before the text bash replaces ($frag, what it passes as $2):
# cut bytes, "pr:" of "pr:7".
_engine_add() {
  local c
  for c in "$@"; do
    [[ $c == "$cur"* ]] && COMPREPLY+=("${c:cut}")
  done
}

# Lines of `engine __complete WHAT ARGS...` for the database on the line;
# none when the command goes to a server.
_engine_query() {
  [[ -z $server ]] || return 0
  local what=$1
  shift
  local -a args=("$what")
  [[ -n $db ]] && args+=(--db "$db")
  "$bin" __complete "${args[@]}" "$@" 2>/dev/null
}

# Workflow ids after prefix $1 (an option's "--id="), starting with $2, of the
# statuses $3 (comma-separated; all when empty).
_engine_ids() {
  local -a lines args=(--limit 500)
  [[ -n ${3-} ]] && args+=(--status "$3")
  mapfile -t lines < <(_engine_query ids "${args[@]}" -- "$2")
  _engine_add "${lines[@]/#/$1}"
}

# Files after prefix $1 starting with $2: with $3 (an extension) only those
# and directories; with $3 = / only directories. Bash quotes them as file
# names, unless part of the prefix goes in too (the @ of "--input @"), which
# that would quote as well: then a directory only gets its slash.
_engine_files() {
  local -a lines
  local f
  if [[ ${3-} == / ]]; then
    mapfile -t lines < <(compgen -d -- "$2" 2>/dev/null)
  elif [[ -n ${3-} ]]; then
    mapfile -t lines < <(compgen -d -- "$2" 2>/dev/null; compgen -f -X "!*.$3" -- "$2" 2>/dev/null)
  else
    mapfile -t lines < <(compgen -f -- "$2" 2>/dev/null)
  fi
  if [[ -z ${1:cut} ]]; then
    compopt -o filenames 2>/dev/null
    _engine_add "${lines[@]/#/$1}"
    return
  fi
  for f in "${lines[@]}"; do
    [[ -d $f ]] && f+=/
    _engine_add "$1$f"
  done
  [[ ${#COMPREPLY[@]} == 1 && ${COMPREPLY[0]} == */ ]] && compopt -o nospace 2>/dev/null
}

# The value of option $1 after prefix $2 ("--status=" or ""), typed so far $3.
_engine_value() {
  local opt=$1 pre=$2 val=$3 s have
  local -a list lines
  case $opt in
    --db | --from | --to | --config) _engine_files "$pre" "$val" ;;
    --script) _engine_files "$pre" "$val" lua ;;
    --workflows) _engine_files "$pre" "$val" / ;;
    --input) [[ $val == @* ]] && _engine_files "$pre@" "${val#@}" ;;
    --id | --fork | --baseline) _engine_ids "$pre" "$val" ;;
    --variants) _engine_files "$pre" "$val" json ;;
    --status) _engine_add "${_engine_statuses[@]/#/$pre}" ;;
    --color) _engine_add "${pre}auto" "${pre}always" "${pre}never" ;;
    --log-format) _engine_add "${pre}text" "${pre}json" ;;
    --scopes)
      have=${val%"${val##*,}"} # the scopes before the last comma
      for s in "${_engine_scopes[@]}"; do
        [[ ,$have == *,$s,* ]] || list+=("$pre$have$s")
      done
      compopt -o nospace 2>/dev/null
      _engine_add "${list[@]}" ;;
    --request)
      [[ -n ${pos[0]-} ]] && mapfile -t lines < <(_engine_query request -- "${pos[0]}")
      _engine_add "${lines[@]/#/$pre}" ;;
    --listen) _engine_add "${pre}127.0.0.1:7420" "${pre}127.0.0.1:0" ;;
  esac # --reason, --run, --server, --token: free text
}

# Argument number $1 (from 0) of the command.
_engine_argument() {
  local -a lines
  case $cmd:$1 in
    start:0 | test:*) _engine_files "" "$cur" lua ;;
    signal:0 | cancel:0) _engine_ids "" "$cur" running,waiting,stuck ;;
    approve:0) _engine_ids "" "$cur" waiting ;;
    show:0 | events:0 | history:0 | grants:0 | replay:0 | fork:0 | verify:*) _engine_ids "" "$cur" ;;
    signal:1)
      mapfile -t lines < <(_engine_query signal -- "${pos[0]}")
      _engine_add "${lines[@]}" ;;
    eval:0) _engine_files "" "$cur" / ;;
    policy:0) _engine_add check ;;
    policy:1) _engine_files "" "$cur" / ;;
    trigger:0) _engine_add check test deliveries ;;
    schedule:0) _engine_add create list pause resume trigger delete ;;
    token:0) _engine_add create list revoke ;;
    audit:0) _engine_add export verify key ;;
    memory:0) _engine_add list show revoke ;;
    audit:1)
      case ${pos[0]} in
        export) _engine_ids "" "$cur" ;;
        verify) _engine_files "" "$cur" "" ;;
      esac ;;
    quota:0) _engine_add list ;;
    token:1)
      if [[ ${pos[0]} == revoke ]]; then
        mapfile -t lines < <(_engine_query tokens -- "$cur")
        _engine_add "${lines[@]}"
      fi ;;
    completion:0) _engine_add bash zsh ;;
  esac
}

_engine() {
  local IFS=$' \t\n' frag=${2-${COMP_WORDS[COMP_CWORD]}} cword=0 cut
  local -a words=() pos=() opts=()
  _engine_split_words
  local cur=${words[cword]} bin=${words[0]} db='' server=${ENGINE_SERVER-} cmd='' i w
  cut=$((${#cur} - ${#frag}))
  ((cut < 0)) && cut=0
  COMPREPLY=()
  [[ $bin == [~]/* ]] && bin=$HOME/${bin#[~]/} # a ~/ the shell leaves to us on the line
  # the database and server named on the line, the command and its arguments
  for ((i = 1; i < ${#words[@]}; i++)); do
    ((i == cword)) && continue
    w=${words[i]}
    case $w in
      --db=* | --server=*) [[ $w == --db=* ]] && db=${w#*=} || server=${w#*=} ;;
      -*)
        if [[ $_engine_valued == *" $w "* ]] && ((i + 1 != cword && i + 1 < ${#words[@]})); then
          ((i++))
          [[ $w == --db ]] && db=${words[i]}
          [[ $w == --server ]] && server=${words[i]}
        fi ;;
      *) ((i < cword)) && { [[ -z $cmd ]] && cmd=$w || pos+=("$w"); } ;;
    esac
  done
  [[ $db == [~]/* ]] && db=$HOME/${db#[~]/}
  local prev=${words[cword - 1]-}
  if [[ $cur == --*=* && $_engine_valued == *" ${cur%%=*} "* ]]; then
    _engine_value "${cur%%=*}" "${cur%%=*}=" "${cur#*=}"
  elif ((cword > 1)) && [[ $_engine_valued == *" $prev "* ]]; then
    _engine_value "$prev" "" "$cur"
  elif [[ -z $cmd && $cur == -* ]]; then
    _engine_add --config --server --token --color --version --help -h
  elif [[ -z $cmd ]]; then
    _engine_add "${_engine_commands[@]}"
  elif [[ $cur == -* ]]; then
    _engine_options "$cmd" "${pos[0]-}"
    _engine_add "${opts[@]}"
  else
    _engine_argument "${#pos[@]}"
  fi
  return 0
}

complete -F _engine engine
