#!/usr/bin/env bash
# API tokens from the CLI: `token create` prints the token once (stdout, alone)
# and the database keeps only its SHA-256; `token list` shows names, scopes and
# state, never a secret or a hash; `token revoke` ends a token, and a second
# revoke or a bad scope is exit 2 with one line naming the problem.
source "$(dirname "$0")/lib.sh"
one_line() { [ "$(printf '%s' "$ERR" | grep -c .)" == 1 ] && pass "$1: one line" || fail "$1: stderr is not one line: $ERR"; }
sha() { printf '%s' "$1" | sha256sum | cut -c1-64; }
# db_has TEXT: whether TEXT appears in the database or its WAL
db_has() { cat "$ENGINE_DB" "$ENGINE_DB-wal" 2>/dev/null | grep -c -F -a -- "$1" || true; }

# --- refused before any database exists, and none is created
assert_exit "list without a database" 2 engine token list
assert_contains "says there is none" "no database at $ENGINE_DB" "$ERR"
assert_exit "revoke without a database" 2 engine token revoke ci
assert_exit "create without --scopes" 2 engine token create ci
assert_contains "says --scopes is required" "--scopes is required" "$ERR"; one_line "missing --scopes"
assert_exit "an unknown scope" 2 engine token create ci --scopes read,deploy
assert_contains "names the scope" 'unknown scope "deploy"' "$ERR"
assert_contains "lists the valid scopes" "read, start, signal, approve, cancel, admin" "$ERR"; one_line "unknown scope"
assert_exit "a bad name" 2 engine token create "ci bot" --scopes read
assert_contains "names the problem" 'invalid token name "ci bot": a space at byte 3' "$ERR"; one_line "bad name"
assert_exit "no NAME" 2 engine token create --scopes read
assert_exit "an unknown subcommand" 2 engine token rotate ci
assert_exit "an unknown option" 2 engine token list --scopes read
assert_eq "no database was created" no "$([ -e "$ENGINE_DB" ] && echo yes || echo no)"

# --- create: the token alone on stdout, once; a note on stderr
assert_exit "create ci" 0 engine token create ci --scopes read,start
TOKEN="$OUT"
assert_eq "stdout is one line" 1 "$(printf '%s\n' "$OUT" | wc -l)"
if [[ "$TOKEN" =~ ^eng_[A-Za-z0-9_-]{43}$ ]]; then pass "the token is eng_ and 43 base64url characters"
else fail "the token looks like [$TOKEN]"; fi
assert_contains "stderr says it is not shown again" "not shown again" "$ERR"
assert_contains "stderr gives the identity" "token:ci" "$ERR"
assert_eq "the database was created" yes "$([ -e "$ENGINE_DB" ] && echo yes || echo no)"
HASH="$(sha "$TOKEN")"
assert_eq "the database holds the token's SHA-256" "$HASH" "$(sqlite3 "$ENGINE_DB" "SELECT hash FROM tokens WHERE name='ci'")"
assert_eq "the secret is nowhere in the database files" 0 "$(db_has "$TOKEN")"
assert_eq "nor its random part" 0 "$(db_has "${TOKEN#eng_}")"

# --- list: name, scopes, state; never a secret or a hash
assert_exit "list" 0 engine token list
LIST="$OUT"
assert_contains "lists ci" "ci" "$LIST"
assert_contains "with its scopes" "read,start" "$LIST"
assert_contains "as live" "live" "$LIST"
[[ "$LIST" != *"$TOKEN"* && "$LIST" != *"${TOKEN#eng_}"* ]] && pass "list shows no secret" || fail "list shows the secret"
[[ "$LIST" != *"$HASH"* && "$LIST" != *"${HASH:0:12}"* ]] && pass "list shows no hash" || fail "list shows the hash"
assert_exit "list --json" 0 engine token list --json
JSON="$OUT"
assert_eq "one JSON line per token" 1 "$(printf '%s\n' "$JSON" | wc -l)"
assert_eq "json name" ci "$(jget name <<<"$JSON")"
assert_eq "json scopes" '["read","start"]' "$(jget scopes <<<"$JSON")"
assert_eq "json status" live "$(jget status <<<"$JSON")"
assert_eq "json revoked_at" nil "$(jget revoked_at <<<"$JSON")"
created="$(jget created_at <<<"$JSON")"
[[ "$created" =~ ^[0-9]{13}$ ]] && pass "json created_at is epoch ms" || fail "created_at is [$created]"
[[ "$JSON" != *"$TOKEN"* && "$JSON" != *"$HASH"* && "$JSON" != *'"hash"'* ]] && pass "json shows no secret or hash" ||
  fail "json shows a secret or hash: $JSON"

# --- a second live token of that name is refused; the first is unchanged
before="$(sqlite3 "$ENGINE_DB" "SELECT hash, scopes FROM tokens")"
assert_exit "create ci again" 2 engine token create ci --scopes admin
assert_contains "says it is live" "a live token named ci exists" "$ERR"; one_line "duplicate"
assert_eq "nothing printed on stdout" "" "$OUT"
assert_eq "the first token is unchanged" "$before" "$(sqlite3 "$ENGINE_DB" "SELECT hash, scopes FROM tokens")"

# --- revoke, then revoke again
assert_exit "revoke ci" 0 engine token revoke ci
assert_contains "says it is revoked" "token ci revoked" "$ERR"
assert_exit "list after revoke" 0 engine token list --json
assert_eq "json status revoked" revoked "$(jget status <<<"$OUT")"
revoked="$(jget revoked_at <<<"$OUT")"
[[ "$revoked" =~ ^[0-9]{13}$ ]] && [ "$revoked" -ge "$created" ] && pass "revoked_at is set" || fail "revoked_at is [$revoked]"
assert_exit "human list after revoke" 0 engine token list
assert_contains "shows revoked" "revoked" "$OUT"
assert_exit "revoke ci again" 2 engine token revoke ci
assert_contains "says there is no live token" "no live token named ci" "$ERR"; one_line "second revoke"
assert_exit "revoke a name never created" 2 engine token revoke nobody
assert_contains "names it" "no live token named nobody" "$ERR"

# --- the name can be used again: a new secret, the old hash gone
assert_exit "create ci after revoke" 0 engine token create ci --scopes admin --db "$ENGINE_DB"
NEW="$OUT"
[ "$NEW" != "$TOKEN" ] && pass "a new secret" || fail "the same secret came back"
assert_eq "the row holds the new hash" "$(sha "$NEW")|32|" \
  "$(sqlite3 "$ENGINE_DB" "SELECT hash || '|' || scopes || '|' || ifnull(revoked_at,'') FROM tokens WHERE name='ci'")"
assert_eq "the old hash is gone" 0 "$(sqlite3 "$ENGINE_DB" "SELECT count(*) FROM tokens WHERE hash='$HASH'")"

# --- --db names another database; --help
OTHER="$T/other.db"
assert_exit "create in --db" 0 engine token create deploy.bot@ci --scopes signal,approve --db "$OTHER"
assert_exit "list --db" 0 engine token list --db "$OTHER"
assert_contains "the other database has it" "deploy.bot@ci" "$OUT"
assert_contains "with its scopes" "signal,approve" "$OUT"
assert_exit "token --help" 0 engine token --help
assert_contains "help names the identity" "token:NAME" "$OUT"
assert_exit "engine --help" 0 engine --help
assert_contains "main help lists token" "token create|list|revoke" "$OUT"

# --- grants (docs/grants.md): stored with the token, each bad one named
G="$T/grants.db"
assert_exit "create with grants" 0 engine token create gh --scopes start --grant 'github:repo/Acme/*:pr.review.draft' \
  --grant 'http:api.example.test:GET;uses=3' --db "$G"
assert_eq "stored canonical, in order" '["github:repo/acme/*:pr.review.draft","http:api.example.test:GET;uses=3"]' \
  "$(sqlite3 "$G" "SELECT grants FROM tokens WHERE name='gh'")"
assert_exit "list --json" 0 engine token list --json --db "$G"
assert_contains "lists them" '"grants":["github:repo/acme/*:pr.review.draft","http:api.example.test:GET;uses=3"]' "$OUT"
assert_exit "a '*' in an action is refused" 2 engine token create bad --scopes start --grant 'github:repo/a/b:*' --db "$G"
assert_contains "naming the grant and its problem" "--grant[1]: invalid grant \"github:repo/a/b:*\": '*' in its action" "$ERR"
assert_exit "a '..' part is refused" 2 engine token create bad --scopes start --grant 'ok:x' --grant 'github:repo/../b:x' --db "$G"
assert_contains "naming which one" "--grant[2]" "$ERR"
assert_eq "nothing was created" 0 "$(sqlite3 "$G" "SELECT count(*) FROM tokens WHERE name='bad'")"
assert_exit "a token without --grant" 0 engine token create plain --scopes read --db "$G"
assert_eq "holds none" "" "$(sqlite3 "$G" "SELECT ifnull(grants,'') FROM tokens WHERE name='plain'")"

# --- a database from before grants (SQLite 6; 7, the history's chain) gains the
# column and keeps its tokens
CUR="$("$ENGINE" --version | sed -n 's/.*SQLite \([0-9]*\).*/\1/p')"
for old in 6 7; do
  D="$T/old$old.db"
  assert_exit "a token in a new database ($old)" 0 engine token create keep --scopes read --db "$D"
  sqlite3 "$D" "ALTER TABLE tokens DROP COLUMN grants; UPDATE meta SET value='$old' WHERE key='schema_version'"
  assert_exit "list opens version $old" 0 engine token list --db "$D"
  assert_contains "the token is still there" "keep" "$OUT"
  assert_eq "brought to this engine's version ($CUR)" "$CUR" "$(sqlite3 "$D" "SELECT value FROM meta WHERE key='schema_version'")"
  assert_eq "with the column" 1 "$(sqlite3 "$D" "SELECT count(*) FROM pragma_table_info('tokens') WHERE name='grants'")"
  assert_exit "and grants can be stored" 0 engine token create more --scopes read --grant review:publish --db "$D"
done

finish
