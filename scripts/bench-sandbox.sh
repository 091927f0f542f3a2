#!/usr/bin/env bash
# Whole-process cost of the kernel sandbox: a two-turn `agentfile run` whose
# model calls bash (`true`) once, then answers, against the zero-latency
# loopback fake model; the same workflow with `[sandbox] enabled = true` and
# `= false`, alternating run by run (so a machine that gets busier hurts both
# alike). Reports medians over RUNS runs (default 200, after 10 warm-up runs).
#
# Usage: scripts/bench-sandbox.sh                # builds target/release first
#        RUNS=500 scripts/bench-sandbox.sh
#        AGENTFILE_BIN=/path/agentfile FAKE_BIN=/path/fake-provider scripts/bench-sandbox.sh
# Needs: cargo (unless both binaries are given), python3.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-200}"

if [ -z "${AGENTFILE_BIN:-}" ] || [ -z "${FAKE_BIN:-}" ]; then
    cargo build --release --bin agentfile --bin fake-provider >&2
    target="${CARGO_TARGET_DIR:-target}"
    AGENTFILE_BIN="${AGENTFILE_BIN:-$target/release/agentfile}"
    FAKE_BIN="${FAKE_BIN:-$target/release/fake-provider}"
fi
AGENTFILE_BIN="$(realpath "$AGENTFILE_BIN")"
FAKE_BIN="$(realpath "$FAKE_BIN")"

# shellcheck source=lib/two-turn-workflow.sh
. scripts/lib/two-turn-workflow.sh
two_turn_workflow "$FAKE_BIN" bench-sandbox '{"name": "bash", "arguments": {"command": "true"}}'
for mode in on off; do
    mkdir -p "$work/$mode"
    cp "$work/Agentfile" "$work/$mode/Agentfile"
    sed 's|^workspace = "ws"|workspace = "../ws"|' "$work/agent.toml" >"$work/$mode/agent.toml"
    enabled=true; [ "$mode" = off ] && enabled=false
    printf '[bash]\nallowlist = ["true"]\n\n[sandbox]\nenabled = %s\n' "$enabled" >"$work/$mode/policy.toml"
done

python3 - "$work" "$RUNS" "$AGENTFILE_BIN" <<'PY'
import json, os, statistics, subprocess, sys, time

work, runs, exe = sys.argv[1], int(sys.argv[2]), sys.argv[3]
env = dict(os.environ, BENCH_KEY="bench-key-0123456789", NO_COLOR="1")

def one(mode):
    t0 = time.perf_counter()
    p = subprocess.run([exe, "run", f"{mode}/Agentfile", "--output", "stream-json"],
                       cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    t = (time.perf_counter() - t0) * 1e3
    events = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    if p.returncode != 0:
        sys.exit(f"bench-sandbox: a run failed (exit {p.returncode})")
    sb = next(e["data"].get("sandbox") for e in events if e["type"] == "run_started")
    took = next(e["data"].get("duration_ms") for e in events if e["type"] == "tool_result")
    return t, took, sb

for _ in range(10):
    one("on"); one("off")
samples = {"on": [], "off": []}
info = {}
for _ in range(runs):
    for mode in ("on", "off"):
        t, took, sb = one(mode)
        samples[mode].append((t, took))
        info[mode] = sb
def stats(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[int(len(xs) * 0.9) - 1], xs[0]
print(f"agentfile run, two turns (one bash `true` call), {runs} runs each, alternating")
for mode in ("on", "off"):
    m, p90, lo = stats([s[0] for s in samples[mode]])
    tm, tp90, _ = stats([s[1] for s in samples[mode]])
    print(f"sandbox {mode:<3} total median {m:7.2f} ms  p90 {p90:7.2f} ms  min {lo:7.2f} ms   "
          f"bash call median {tm} ms  p90 {tp90} ms   {json.dumps(info[mode])}")
PY
