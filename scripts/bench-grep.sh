#!/usr/bin/env bash
# Time the built-in grep (examples/grep.rs: the tool's engine without its output
# cap) against ripgrep on the same tree, with the same defaults (.gitignore
# respected, hidden files and binary files skipped, line numbers).
#
#   scripts/bench-grep.sh [TREE]     default: $CARGO_HOME/registry/src
#
# Needs rg and hyperfine (apt-get install -y ripgrep hyperfine). Output goes
# through a pipe (--output=pipe) so neither tool can take a /dev/null shortcut.
set -euo pipefail
cd "$(dirname "$0")/.."
tree="${1:-${CARGO_HOME:-$HOME/.cargo}/registry/src}"
[ -d "$tree" ] || { echo "no tree at $tree" >&2; exit 2; }
command -v rg >/dev/null || { echo "rg is not installed" >&2; exit 2; }
command -v hyperfine >/dev/null || { echo "hyperfine is not installed" >&2; exit 2; }
cargo build --release --example grep >&2
ours=target/release/examples/grep
echo "tree: $tree ($(du -sh "$tree" | cut -f1), $(find "$tree" -type f | wc -l) files)"
echo "rg: $(rg --version | head -1)"
for pattern in 'PhantomPinned' 'fn\s+[a-z_]+_test\b' 'unsafe'; do
  echo
  echo "== pattern: $pattern ($(rg -n -- "$pattern" "$tree" | wc -l) matching lines)"
  hyperfine --warmup 1 --runs "${RUNS:-5}" --output=pipe --style basic \
    -n rg "rg -n -- '$pattern' '$tree'" \
    -n agentfile "$ours '$pattern' '$tree'"
done
