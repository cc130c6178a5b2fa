#!/usr/bin/env bash
# engine audit export / verify / key (docs/audit.md): a session's signed
# export, checked with nothing but the file and the public key.
#   - an export verifies; the real OpenSSL CLI reads the engine's public key,
#     checks the seal's Ed25519 signature, and sha256sum rebuilds the chain
#   - a hostile table: a flipped byte, a removed, inserted, swapped or
#     appended line, a cut file, an edited seal, CRLF, another engine's key,
#     not an export at all: each is refused, naming the first line that
#     does not check
#   - the private key: made once when several ask at once, 0600 in a 0700
#     directory; one that others can read signs nothing
#   - the API's export (GET /v1/workflows/{id}/audit) and --server
source "$(dirname "$0")/lib.sh"
cd "$T"

"$ENGINE" start "$SRC/workflows/hello.lua" --id au1 --input '{"name":"Ada","n":2}' --detach >/dev/null 2>&1 || true
engine signal au1 approval '{"approved":true}' >/dev/null
assert_exit "the session runs to its end" 0 "$ENGINE" start "$SRC/workflows/hello.lua" --id au1 --quiet

# --- the key: made once by several at once, private to its user
for i in 1 2 3 4; do engine audit key >"$T/key$i.out" 2>&1 & done
wait
assert_eq "four first uses at once print one key" 1 "$(cat "$T"/key*.out | sort -u | wc -l | awk '{print $1 / 2}')"
PUB="$(head -1 "$T/key1.out")"
HEX="$(sed -n 2p "$T/key1.out")"
KEYDIR="$(dirname "$PUB")"
assert_eq "the private key is 0600" 600 "$(stat -c %a "$KEYDIR/audit-ed25519.pem")"
assert_eq "in a 0700 directory" 700 "$(stat -c %a "$KEYDIR")"
assert_exit "OpenSSL reads the public key" 0 openssl pkey -pubin -in "$PUB" -noout
assert_eq "whose raw bytes are the hex the engine prints" "$HEX" \
  "$(openssl pkey -pubin -in "$PUB" -outform DER | tail -c 32 | od -An -tx1 | tr -d ' \n')"

# --- an export verifies
assert_exit "engine audit export" 0 engine audit export au1
printf '%s\n' "$OUT" >"$T/au1.jsonl"
assert_exit "engine audit verify" 0 engine audit verify "$T/au1.jsonl" --key "$PUB"
assert_contains "it says what it holds" "verifies: session au1," "$OUT"
assert_contains "with the approval" "1 approvals" "$OUT"
assert_exit "the key as 64 hex digits works too" 0 engine audit verify "$T/au1.jsonl" --key <(echo "$HEX")
hist="$(engine history au1 --json | wc -l)"
assert_eq "every history event is in it" "$hist" "$(grep -c '"kind":"history"' "$T/au1.jsonl")"
assert_eq "every domain event" "$(engine events au1 --json | wc -l)" "$(grep -c '"kind":"event"' "$T/au1.jsonl")"

# the chain and the signature checked by other tools than the engine's
n="$(wc -l <"$T/au1.jsonl")"
prev=0000000000000000000000000000000000000000000000000000000000000000
broken=0
for i in $(seq 1 "$n"); do
  line="$(sed -n "${i}p" "$T/au1.jsonl")"
  [ "$(jget prev <<<"$line")" == "$prev" ] || broken=$i
  prev="$(printf '%s' "$line" | sha256sum | cut -d' ' -f1)"
done
assert_eq "sha256sum rebuilds the chain: each line's prev is the hash of the one before" 0 "$broken"
seal="$(tail -1 "$T/au1.jsonl")"
printf '%s}' "${seal%,\"signature\":*}" >"$T/signed"
jget signature <<<"$seal" | xxd -r -p >"$T/sig"
assert_exit "openssl pkeyutl checks the seal's Ed25519 signature" 0 \
  openssl pkeyutl -verify -pubin -inkey "$PUB" -rawin -in "$T/signed" -sigfile "$T/sig"
printf 'x' >>"$T/signed"
assert_exit "and refuses it for other bytes" 1 \
  openssl pkeyutl -verify -pubin -inkey "$PUB" -rawin -in "$T/signed" -sigfile "$T/sig"

# a forger without the key: edits line 5's payload, then rebuilds every
# line's prev so the line chain holds (only the seal's signature and the
# database's links are left to catch it)
cat >"$T/forge.py" <<'PY'
import hashlib, json, sys
path = sys.argv[1]
lines = open(path, encoding="utf-8").read().split("\n")[:-1]
lines[4] = lines[4].replace('"seq":', '"seq":1', 1)
prev = "0" * 64
out = []
for l in lines:
    l = '{"prev":"%s",' % prev + l.split(",", 1)[1]
    out.append(l)
    prev = hashlib.sha256(l.encode()).hexdigest()
open(path, "w", encoding="utf-8").write("\n".join(out) + "\n")
PY
# line_of KIND: the number of the first line of that kind in bad.jsonl
line_of() { grep -n "\"kind\":\"$1\"" "$T/bad.jsonl" | sed -n 1p | cut -d: -f1; }
# --- the hostile table: MUTATION (a sed or shell program on the file) | what verify names
OTHER="$T/other"
mkdir -p "$OTHER/keys"
ENGINE_DB="$T/other/o.db" "$ENGINE" audit key >"$T/other.out" 2>&1 || true
OTHER_PUB="$(head -1 "$T/other.out")"
[ -n "$OTHER_PUB" ] && [ -f "$OTHER_PUB" ] || fail "a second engine's key was not made: $(cat "$T/other.out")"
while IFS='|' read -r what program want; do
  [ -n "$what" ] || continue
  cp "$T/au1.jsonl" "$T/bad.jsonl"
  eval "$program"
  key="$PUB"
  [[ "$what" == *"another engine"* ]] && key="$OTHER_PUB"
  assert_exit "$what: refused" 1 engine audit verify "$T/bad.jsonl" --key "$key"
  assert_contains "$what: names it" "$want" "$ERR"
done <<'TABLE'
one byte of a history event changed|sed -i '5s/"type":"/"type":"X/' "$T/bad.jsonl"|line 5: its link is not the database's hash chain rebuilt from its fields (history)
one byte of a domain event changed|sed -i "$(line_of event)s/\"type\":\"/\"type\":\"X/" "$T/bad.jsonl"|its link is not the database's hash chain rebuilt from its fields (domain events)
a history event edited, its link and every prev rebuilt|python3 "$T/forge.py" "$T/bad.jsonl"|line 5: its link is not the database's hash chain
an approval line changed|sed -i "$(line_of approval)s/\"requested_seq\":/\"requested_seq\":9/" "$T/bad.jsonl"|its "prev" is not the hash of the line before
a line removed|sed -i '7d' "$T/bad.jsonl"|line 7: its "prev" is not the hash of the line before
a line inserted|sed -i '4p' "$T/bad.jsonl"|line 5: its "prev" is not the hash of the line before
two lines swapped|sed -i -n '8{h;n;G};p' "$T/bad.jsonl"|line 8: its "prev" is not the hash of the line before
the workflow's status edited|sed -i '2s/"completed"/"failed"/' "$T/bad.jsonl"|line 3: its "prev" is not the hash of the line before: line 2 was changed
the seal dropped|sed -i '$d' "$T/bad.jsonl"|ends without its seal (cut short)
the file cut mid-seal|truncate -s -40 "$T/bad.jsonl"|not a whole line of an export
the seal's time edited|sed -i '$s/"signed_at":1/"signed_at":2/' "$T/bad.jsonl"|the seal's signature does not check
the seal's signature cut off|sed -i '$s/,"signature":"[0-9a-f]*"//' "$T/bad.jsonl"|the seal does not end with its signature
the seal's count edited|sed -i '$s/"lines":/"lines":1/' "$T/bad.jsonl"|the seal counts
a line after the seal|echo '{"kind":"event"}' >>"$T/bad.jsonl"|a line after the seal
CRLF line ends|sed -i 's/$/\r/' "$T/bad.jsonl"|line 2: its "prev" is not the hash of the line before: line 1 was changed
checked with another engine's key|true|sealed by another key
an empty file|: >"$T/bad.jsonl"|ends without its seal
not an export|echo '{"id":"au1"}' >"$T/bad.jsonl"|line 1: not an audit export's first line
TABLE
assert_exit "a key file that is not a key" 2 engine audit verify "$T/au1.jsonl" --key "$T/au1.jsonl"
assert_contains "names it" "is not an Ed25519 public key" "$ERR"
assert_exit "no --key" 2 engine audit verify "$T/au1.jsonl"
assert_contains "says which key is wanted" "--key PUB is required" "$ERR"
assert_exit "an unknown session" 2 engine audit export nope
assert_contains "names it" "nope" "$ERR"

# events a script wrote without payloads, or with payloads of another shape,
# are exported as they are (the derived lines never read past them)
cat >"$T/odd.lua" <<'LUA'
local wf = require "workflow"
return function()
  wf.emit("approval.requested")
  wf.emit("approval.decided")
  wf.emit("artifact.saved")
  wf.emit("approval.requested", { request_id = { 1, 2 } })
  wf.emit("artifact.saved", { path = 7, sha256 = false, stored = "/nonexistent" })
  return "odd"
end
LUA
assert_exit "a session with odd events runs" 0 "$ENGINE" start "$T/odd.lua" --id odd --quiet
assert_exit "its export is made" 0 engine audit export odd
printf '%s\n' "$OUT" >"$T/odd.jsonl"
assert_exit "and verifies" 0 engine audit verify "$T/odd.jsonl" --key "$PUB"
assert_contains "with its approval requests" "2 approvals" "$OUT"

# a private key others can read signs nothing
chmod 644 "$KEYDIR/audit-ed25519.pem"
assert_exit "a readable private key is refused" 2 engine audit export au1
assert_contains "naming the file and its mode" "can be read by others (mode 644)" "$ERR"
chmod 600 "$KEYDIR/audit-ed25519.pem"

# --- the API and --server
TOK="$(engine token create auditor --scopes read 2>/dev/null | tail -1)"
serve_api --workflows "$SRC/workflows"
code="$(curl -s -o "$T/api.jsonl" -D "$T/api.h" -w '%{http_code}' -H "Authorization: Bearer $TOK" "$URL/v1/workflows/au1/audit")"
assert_eq "GET /v1/workflows/au1/audit: 200" 200 "$code"
assert_contains "as a JSON lines download" "attachment; filename=\"au1.audit.jsonl\"" "$(cat "$T/api.h")"
assert_exit "the server's export verifies" 0 engine audit verify "$T/api.jsonl" --key "$PUB"
assert_eq "recording who asked" "token:auditor" "$(head -1 "$T/api.jsonl" | jget exported_by)"
assert_eq "without a token: 401" 401 "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/workflows/au1/audit")"
assert_eq "an unknown session: 404" 404 \
  "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOK" "$URL/v1/workflows/nope/audit")"
assert_exit "engine --server audit export" 0 env ENGINE_TOKEN="$TOK" "$ENGINE" --server "$URL" audit export au1
printf '%s\n' "$OUT" >"$T/remote.jsonl"
assert_exit "verifies" 0 engine audit verify "$T/remote.jsonl" --key "$PUB"
assert_exit "audit key is refused with --server" 2 env ENGINE_TOKEN="$TOK" "$ENGINE" --server "$URL" audit key
finish
