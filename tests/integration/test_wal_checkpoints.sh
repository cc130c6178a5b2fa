#!/usr/bin/env bash
# SQLite's WAL is copied into the database file by the worker in the
# background, off the commits' path (engine/worker/checkpoints.c,
# engine/store/sqlite_wal.c): after a burst of starts fills the WAL past half
# its bound, /metrics counts a background checkpoint; a kill -9 of the serve
# during another burst loses no start it acknowledged, every one completes
# after the restart with its input as its result, and the file passes
# SQLite's integrity check. SQLite only (PostgreSQL has no WAL of the store's).
source "$(dirname "$0")/lib.sh"
on_postgres && { echo "SQLite only"; finish; }
TWF="$SRC/tests/integration/wf"
checkpoints() { curl -s "$URL/metrics" | sed -n "s/^engine_wal_checkpoints_total{where=\"$1\"} \([0-9]*\)$/\1/p"; }
# a 40 KB input: its row, its event and its result (tiny.lua echoes it) are about 30 pages of the WAL
PAD="$(head -c 40000 /dev/zero | tr '\0' 'x')"
post() { # ID: starts tiny.lua with the big input; 0 when the API acknowledged it
  printf '{"script":"tiny.lua","id":"%s","input":{"pad":"%s"}}' "$1" "$PAD" >"$T/body"
  [ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/v1/workflows" --data-binary @"$T/body")" == 201 ]
}

serve_api --workflows "$TWF"
assert_eq "no checkpoint before any write" "0" "$(checkpoints background)"
for i in $(seq 1 40); do post "a$i" || fail "start a$i was not acknowledged"; done
wait_for 60 "a background checkpoint after 40 big starts" '[ "$(checkpoints background)" -ge 1 ]' \
  'curl -s "$URL/metrics" | grep wal_checkpoints'
echo "# in_commit checkpoints: $(checkpoints in_commit) (a commit reached the bound while none ran beside it)"
wait_for 60 "the 40 starts completed" '[ "$(sql "SELECT count(*) FROM workflows WHERE status='"'"'completed'"'"'")" == 40 ]'

# --- kill -9 during a burst: the checkpoint may be copying at that moment
acked=0
for i in $(seq 1 60); do
  post "b$i" && acked=$i || break
  [ "$i" -eq 45 ] && kill -9 "$S" # mid-burst: what follows is refused (no serve)
done
wait "$S" 2>/dev/null || true
[ "$acked" -ge 45 ] && pass "45 starts acknowledged before the kill" || fail "only $acked starts acknowledged"
assert_eq "the file passes SQLite's integrity check after the kill" "ok" "$(sql 'PRAGMA integrity_check')"
serve_api --workflows "$TWF"
wait_for 120 "every acknowledged start completed after the restart" \
  '[ "$(sql "SELECT count(*) FROM workflows WHERE id LIKE '"'"'b%'"'"' AND status='"'"'completed'"'"'")" -ge "$acked" ]'
bad=0
for i in $(seq 1 "$acked"); do
  r="$(sql "SELECT length(result) FROM workflows WHERE id='b$i'")"
  [ "${r:-0}" -gt 40000 ] || bad=$((bad + 1))
done
assert_eq "each acknowledged start's result holds its whole input" "0" "$bad"
kill "$S"; wait "$S" 2>/dev/null || true
assert_eq "the file passes SQLite's integrity check at the end" "ok" "$(sql 'PRAGMA integrity_check')"
finish
