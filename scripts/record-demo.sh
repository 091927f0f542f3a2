#!/usr/bin/env bash
# Re-records the demo's cassette (examples/demo/demo.cassette.jsonl): runs the
# demo against the loopback fake provider, scripted by
# examples/demo/record.script.json, with --record. Run it after changing
# anything that changes what the runtime sends a model (prompts, tool schemas);
# tests/e2e/demo.rs fails until you do.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --bins
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
target/debug/fake-provider examples/demo/record.script.json > "$tmp/url" &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/url" ] && break; sleep 0.05; done
url=$(head -n 1 "$tmp/url")
cat > "$tmp/agent.toml" <<TOML
[agent]
id = "demo"
[llm]
provider = "openai"
model = "gpt-4o"
base_url = "$url"
api_key_env = "DEMO_FAKE_KEY"
TOML
rm -f examples/demo/REPORT.md
DEMO_FAKE_KEY=not-a-real-key target/debug/agentfile run examples/demo \
  --config "$tmp/agent.toml" --workspace examples/demo \
  --record examples/demo/demo.cassette.jsonl
echo "recorded $(wc -l < examples/demo/demo.cassette.jsonl) exchanges into examples/demo/demo.cassette.jsonl"
