#!/usr/bin/env bash
# Whole-process benchmark of `agentfile run`: a two-turn run (one `ls` call,
# then an answer) against the zero-latency loopback fake model, with the
# default SQLite session store. With SCENARIO=three-step, a durable
# three-step workflow instead (a WORKFLOW.md of three tool steps — ls, read,
# glob — no model), every event in the same store.
#
# Reports, as medians over RUNS runs (default 200, after 10 warm-up runs):
#   total           exec to exit of the whole process
#   to run_started  exec to the moment the `run_started` line reaches our pipe
#                   (stream-json flushes per line, so this is when it was emitted)
#   in run          the `run_started` line to the `run_complete` line: the run
#                   itself (steps, turns, events stored)
#   after complete  the `run_complete` line to process exit
#   --version       exec to exit of `agentfile --version` in the same loop: the
#                   floor (loading the binary), which no run can beat
# Times are taken with a monotonic clock in the parent just before spawning,
# so no strace or clock skew is involved.
#
# With COMPARE=/path/to/another/agentfile, the two binaries run alternately in
# one loop (one run of each in turn, against the same fake model and the same
# database), so a machine that gets busier or quieter part-way hurts both
# alike; both are reported, each with its own session database. Use it for before/after figures on a shared machine.
#
# Usage: scripts/bench-process.sh                 # builds target/release first
#        AGENTFILE_BIN=/path/agentfile FAKE_BIN=/path/fake-provider scripts/bench-process.sh
#        RUNS=500 scripts/bench-process.sh
#        COMPARE=/tmp/agentfile-before scripts/bench-process.sh
#        SCENARIO=three-step scripts/bench-process.sh
# Needs: cargo (unless both binaries are given), python3 (installed with
# apt-get when missing and running as root).
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-200}"
SCENARIO="${SCENARIO:-two-turn}"
case "$SCENARIO" in
two-turn) workflow=Agentfile ;;
three-step) workflow=WORKFLOW.md ;;
*) echo "bench-process: SCENARIO is two-turn or three-step, not '$SCENARIO'" >&2; exit 2 ;;
esac

if ! command -v python3 >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq python3 >/dev/null
    else
        echo "bench-process: python3 is needed (apt-get install python3)" >&2
        exit 2
    fi
fi

if [ -z "${AGENTFILE_BIN:-}" ] || [ -z "${FAKE_BIN:-}" ]; then
    cargo build --release --bin agentfile --bin fake-provider >&2
    target="${CARGO_TARGET_DIR:-target}"
    AGENTFILE_BIN="${AGENTFILE_BIN:-$target/release/agentfile}"
    FAKE_BIN="${FAKE_BIN:-$target/release/fake-provider}"
fi
AGENTFILE_BIN="$(realpath "$AGENTFILE_BIN")"
FAKE_BIN="$(realpath "$FAKE_BIN")"
if [ -n "${COMPARE:-}" ]; then COMPARE="$(realpath "$COMPARE")"; fi

# shellcheck source=lib/two-turn-workflow.sh
. scripts/lib/two-turn-workflow.sh
two_turn_workflow "$FAKE_BIN" bench-process
if [ "$SCENARIO" = three-step ]; then
    # Three tool steps, no model: what a run costs around its steps (plan,
    # store, events, gate) when the steps themselves are next to free.
    cat >"$work/WORKFLOW.md" <<'MD'
---
name: Three steps
id: three-step
description: List the workspace, read its file, find the text files.
version: 1.0.0
inputs: { type: object }
outputs: { type: object }
steps:
  - id: look
    kind: tool
    tool: ls
    inputs: { path: "." }
    next: read
  - id: read
    kind: tool
    tool: read
    inputs: { path: file.txt }
    next: find
  - id: find
    kind: tool
    tool: glob
    inputs: { pattern: "*.txt" }
---
List the workspace, read its file, find the text files.
MD
fi

python3 - "$work" "$RUNS" "$workflow" "$SCENARIO" "$AGENTFILE_BIN" ${COMPARE:+"$COMPARE"} <<'PY'
import json, os, statistics, subprocess, sys, time

work, runs, workflow, scenario, exes = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
env = dict(os.environ, BENCH_KEY="bench-key-0123456789", NO_COLOR="1")

# Compared binaries keep separate session databases (one may have a newer schema).
envs = {exe: env if len(exes) == 1 else
        dict(env, AGENTFILE_SESSION_PATH=os.path.join(work, f"db{i}", "sessions.db"))
        for i, exe in enumerate(exes)}

def one(exe):
    t0 = time.perf_counter()
    p = subprocess.Popen([exe, "run", workflow, "--output", "stream-json"],
                         cwd=work, env=envs[exe], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    started = complete = None
    for line in p.stdout:
        now = time.perf_counter()
        try:
            kind = json.loads(line).get("type")
        except ValueError:
            continue
        if kind == "run_started":
            started = now
        elif kind == "run_complete":
            complete = now
    code = p.wait()
    end = time.perf_counter()
    if code != 0 or started is None or complete is None:
        sys.exit(f"bench-process: a run failed (exit {code})")
    return (end - t0) * 1e3, (started - t0) * 1e3, (complete - started) * 1e3, (end - complete) * 1e3

def floor(exe):
    # The same spawn and wait for `agentfile --version`: loading the binary,
    # clap, exit. No run can start sooner than this.
    t0 = time.perf_counter()
    subprocess.run([exe, "--version"], cwd=work, env=envs[exe],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t0) * 1e3

for _ in range(10):
    for exe in exes:
        one(exe)
samples = {exe: [] for exe in exes}
floors = {exe: [] for exe in exes}
for _ in range(runs):
    for exe in exes:
        samples[exe].append(one(exe))
        floors[exe].append(floor(exe))
def row(name, runs_of, i):
    xs = sorted(s[i] for s in runs_of)
    p90 = xs[int(len(xs) * 0.9) - 1]
    print(f"{name:<16} median {statistics.median(xs):7.2f} ms   p90 {p90:7.2f} ms   min {xs[0]:7.2f} ms")
if len(exes) > 1:
    print(f"{len(exes)} binaries, alternating run by run")
for exe in exes:
    what = "two turns (one ls call)" if scenario == "two-turn" else "three tool steps, durable"
    print(f"agentfile run, {what}, {runs} runs: {exe}")
    row("total", samples[exe], 0)
    row("to run_started", samples[exe], 1)
    row("in run", samples[exe], 2)
    row("after complete", samples[exe], 3)
    row("--version", [(f,) for f in floors[exe]], 0)
PY
