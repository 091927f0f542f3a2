#!/usr/bin/env bash
# Figures of the A2A server (CONTRACT §21, issue 48) on loopback: A2A message → first streamed
# update (target ≤ 5 ms) and GetTask latency (target p50 ≤ 1 ms), measured by tests/a2a/bench.py
# against `agentfile a2a` on a scratch workspace whose model is the scripted fake (no network).
#
#   scripts/bench-a2a.sh [bench.py options, e.g. --runs 50 --gets 2000]
#
# Uses target/release/agentfile when it exists (build it with `cargo build --release`), else
# target/debug/agentfile (say which in what you report: a debug build is several times slower).
# AGENTFILE_BIN overrides both. Needs a python with httpx (AGENTFILE_PY, default
# target/py-mcp/bin/python, which scripts/test.sh makes).
set -euo pipefail

cd "$(dirname "$0")/.."
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
PY=${AGENTFILE_PY:-$TARGET/py-mcp/bin/python}
BIN=${AGENTFILE_BIN:-}
if [ -z "$BIN" ]; then
    if [ -x "$TARGET/release/agentfile" ]; then BIN=$TARGET/release/agentfile; else BIN=$TARGET/debug/agentfile; fi
fi
[ -x "$BIN" ] || { echo "bench-a2a: no $BIN: cargo build first" >&2; exit 2; }
"$PY" -c 'import httpx' 2>/dev/null || { echo "bench-a2a: $PY has no httpx" >&2; exit 2; }

WS=$(mktemp -d)
LOG=$WS/server.log
trap 'kill "$PID" 2>/dev/null || true; rm -rf "$WS"' EXIT
cat > "$WS/hello.agent" <<'EOF'
NAME hello
INPUT topic
GOAL greet "Say hello about $topic"
RUN main USING greet
EOF
echo '{"replies": [{"text": "Hello!"}], "repeat": true}' > "$WS/model.json"

"$BIN" a2a --http 127.0.0.1:0 --workspace "$WS" --provider fake --script "$WS/model.json" 2> "$LOG" &
PID=$!
URL=
for _ in $(seq 100); do
    URL=$(sed -n 's/^agentfile a2a: serving \([^ ]*\).*/\1/p' "$LOG")
    [ -n "$URL" ] && break
    sleep 0.1
done
[ -n "$URL" ] || { cat "$LOG" >&2; exit 1; }
echo "bench-a2a: $BIN at $URL ($(nproc) cores)" >&2
"$PY" tests/a2a/bench.py --url "$URL" "$@"
