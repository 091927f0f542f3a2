#!/usr/bin/env bash
# Write scripts/symbol-order.txt: the functions of the release `agentfile`
# that a short run executes, in the order they first run. build.rs hands the
# file to the linker (release builds on x86-64 Linux), which puts those
# functions next to each other, so a run maps fewer pages of code at start.
#
# Run it after changes that move the run's startup path (new dependencies,
# a new runtime, a different store); a stale file still links, it only loses
# part of the gain. What it runs: the two-turn workflow of
# scripts/bench-process.sh (stream-json and text output), `validate` and
# `--version`, each once under valgrind's callgrind.
#
# Usage: scripts/symbol-order.sh     # builds target/release first
#        AGENTFILE_BIN=/path/agentfile FAKE_BIN=/path/fake-provider scripts/symbol-order.sh
#        (a release binary linked with AGENTFILE_SYMBOL_ORDER=0)
# Needs: cargo, valgrind and python3 (installed with apt-get when missing and
# running as root).
set -euo pipefail

cd "$(dirname "$0")/.."
for tool in valgrind python3; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            apt-get update -qq && apt-get install -y -qq "$tool" >/dev/null
        else
            echo "symbol-order: $tool is needed (apt-get install $tool)" >&2
            exit 2
        fi
    fi
done

if [ -z "${AGENTFILE_BIN:-}" ] || [ -z "${FAKE_BIN:-}" ]; then
    # Without the old order, so the names come from a plain build.
    AGENTFILE_SYMBOL_ORDER=0 cargo build --release --bin agentfile --bin fake-provider >&2
    target="${CARGO_TARGET_DIR:-target}"
    AGENTFILE_BIN="${AGENTFILE_BIN:-$target/release/agentfile}"
    FAKE_BIN="${FAKE_BIN:-$target/release/fake-provider}"
fi
bin="$(realpath "$AGENTFILE_BIN")"
fake="$(realpath "$FAKE_BIN")"

# shellcheck source=lib/two-turn-workflow.sh
. scripts/lib/two-turn-workflow.sh
two_turn_workflow "$fake" symbol-order

profile() {
    local out="$1"
    shift
    (cd "$work" && BENCH_KEY=bench-key-0123456789 NO_COLOR=1 valgrind --tool=callgrind \
        --demangle=no --compress-strings=no --callgrind-out-file="$out" "$bin" "$@" \
        >/dev/null 2>&1 </dev/null) || true
}
# A first run creates the session database; the profiled ones find it, as
# most runs do.
(cd "$work" && BENCH_KEY=bench-key-0123456789 "$bin" run Agentfile --output stream-json >/dev/null)
profile "$work/cg.1" run Agentfile --output stream-json
profile "$work/cg.2" run Agentfile
profile "$work/cg.3" validate Agentfile
profile "$work/cg.4" --version

python3 - "$bin" "$work"/cg.* >scripts/symbol-order.txt <<'PY'
import sys
binary, files = sys.argv[1], sys.argv[2:]
seen, order = set(), []
for path in files:
    obj = None
    for line in open(path, errors="replace"):
        if line.startswith("ob="):
            obj = line[3:].strip()
        elif line.startswith("fn="):
            name = line[3:].strip()
            # Names with an LTO suffix (`.llvm.N`) are kept: a dependency's stay
            # the same from build to build, only those of a changed crate go stale.
            if obj == binary and name not in seen and not name.startswith("0x"):
                seen.add(name)
                order.append(name)
print("\n".join(order))
PY
echo "symbol-order: $(wc -l <scripts/symbol-order.txt) functions in scripts/symbol-order.txt" >&2
