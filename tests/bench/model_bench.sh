#!/usr/bin/env bash
# 1,000 concurrent streamed completions through the engine against the local
# model server (tests/model_server). Prints requests/s, engine CPU per request
# and RSS, for each provider's wire format.
#   tests/bench/model_bench.sh [N]        (build first: cmake --build build)
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-1000}"
BUILD="${ENGINE_BUILD:-build}"
T="$(mktemp -d)"
trap 'kill $SP 2>/dev/null || true; rm -rf "$T"' EXIT
# ~40 streamed deltas per completion, 10 ms apart, after 100 ms "thinking"
python3 tests/model_server/server.py --port 0 --port-file "$T/port" --scenario <(echo '{"default":{"reply":{"text":"'"$(printf 'word%d ' $(seq 1 40))"'","usage":{"input_tokens":100,"output_tokens":40}},"delay":0.1,"chunk_delay":0.01}}') >/dev/null 2>"$T/server.log" &
SP=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
export ENGINE_LUA_DIR="$PWD/lua"
for p in openai openai-responses anthropic; do
  echo "== $N concurrent streamed completions, $p wire format"
  MODEL_BENCH_DB="$T/$p.db" "$BUILD/tests/bench/model_bench" "http://127.0.0.1:$(cat "$T/port")/v1" "$N" "$p"
done
