#!/usr/bin/env bash
# The whole test suite, as CI runs it (`.ci/run` calls this script) and as a
# developer runs it on a fresh machine. Installs what the tests need, then runs
# formatting, lints and every test. Needs: a Rust toolchain (rustup), network
# access to crates.io.
set -euo pipefail
cd "$(dirname "$0")/.."

# Rust components the checks use (no-ops when present).
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings

echo "== cargo test"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --locked --all-targets 2>&1 | tee "$log"
cargo test --locked --doc 2>&1 | tee -a "$log"

# One closing line with the totals of every test binary above.
passed=$(grep -Eo '[0-9]+ passed' "$log" | awk '{s += $1} END {print s + 0}')
failed=$(grep -Eo '[0-9]+ failed' "$log" | awk '{s += $1} END {print s + 0}')
echo "summary: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
