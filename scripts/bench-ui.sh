#!/usr/bin/env bash
# Whole-process figures of the web view (CONTRACT §17) in a real browser: first render of the list
# over 100,001 sessions and of a 10,000-event session (targets ≤ 1 s), and the live view's
# event → screen latency (target ≤ 200 ms). The server's share alone is `cargo bench --bench ui`.
#
#   scripts/bench-ui.sh [bench.py options, e.g. --runs 20 --turns 40 --skip live]
#
# Steps:
#   1. release build of `agentfile` and `fake-provider`;
#   2. the benchmark workspace: `cargo bench --bench ui -- --test` builds it once under
#      target/tmp/bench-ui/ (reused while target/tmp/bench-ui/fill.json exists; about a minute the
#      first time) and runs each in-process benchmark once as a check;
#   3. `agentfile ui` (release) on that workspace, on a free loopback port;
#   4. tests/ui_browser/bench.py with Playwright and the system Chromium: the figures, as a
#      Markdown table with the machine, on stdout and in target/bench-ui.md.
#
# Needs a python with playwright (AGENTFILE_PY, default target/py-mcp/bin/python) and Chromium
# (AGENTFILE_CHROMIUM, default /usr/lib/chromium/chromium). Builds run under `nice`.
set -euo pipefail

cd "$(dirname "$0")/.."
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
PY=${AGENTFILE_PY:-$TARGET/py-mcp/bin/python}
CHROMIUM=${AGENTFILE_CHROMIUM:-/usr/lib/chromium/chromium}
FILL=$TARGET/tmp/bench-ui/fill.json
OUT=$TARGET/bench-ui.md

for need in "$PY" "$CHROMIUM"; do
    [ -x "$need" ] || { echo "bench-ui: $need is missing (set AGENTFILE_PY / AGENTFILE_CHROMIUM)" >&2; exit 2; }
done
"$PY" -c 'import playwright' 2>/dev/null || {
    echo "bench-ui: $PY has no playwright: $PY -m pip install playwright" >&2; exit 2; }

echo "bench-ui: release build" >&2
nice -n 10 cargo build --release --bin agentfile --bin fake-provider
echo "bench-ui: the benchmark workspace (cargo bench --bench ui -- --test)" >&2
nice -n 10 cargo bench --bench ui -- --test
[ -f "$FILL" ] || { echo "bench-ui: $FILL was not written" >&2; exit 1; }
WS=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["workspace"])' "$FILL")

LOG=$(mktemp)
env -u AGENTFILE_MCP_TOKEN "$TARGET/release/agentfile" ui --listen 127.0.0.1:0 --workspace "$WS" 2>"$LOG" &
UI=$!
trap 'kill "$UI" 2>/dev/null; wait "$UI" 2>/dev/null || true; rm -f "$LOG"' EXIT
URL=
for _ in $(seq 1 300); do
    URL=$(sed -n 's|.*serving \(http://[^ ]*\)/ui/.*|\1|p' "$LOG" | head -n1)
    [ -n "$URL" ] && break
    kill -0 "$UI" 2>/dev/null || { cat "$LOG" >&2; exit 1; }
    sleep 0.1
done
[ -n "$URL" ] || { echo "bench-ui: agentfile ui did not start" >&2; cat "$LOG" >&2; exit 1; }
echo "bench-ui: agentfile ui at $URL/ui/ over $WS" >&2

"$PY" tests/ui_browser/bench.py --url "$URL" --fill "$FILL" \
    --agentfile "$TARGET/release/agentfile" --fake-provider "$TARGET/release/fake-provider" \
    --chromium "$CHROMIUM" --out "$OUT" "$@"
echo "bench-ui: written to $OUT" >&2
