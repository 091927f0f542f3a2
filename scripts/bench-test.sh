#!/usr/bin/env bash
# What `agentfile test` costs beyond the run itself, per replayed case
# (issue 46's target: 20 ms). On a copy of examples/workflow-md: RUNS times
# `agentfile test` with one case, alternating with the same run done by
# `agentfile run --provider replay --cassette` (the run itself: the same
# workflow, cassette and tools); then one test file of CASES cases, whose
# per-case time shows what a case costs when many run (--jobs 1).
#
#   AGENTFILE_BIN=target/release/agentfile RUNS=100 CASES=50 scripts/bench-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${AGENTFILE_BIN:-target/release/agentfile}")
runs=${RUNS:-100}
cases=${CASES:-50}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r examples/workflow-md "$work/ws"
rm -rf "$work/ws/.agentfile"
cd "$work/ws"

now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2) / 1e6}'; }

: > "$work/test.ns"
: > "$work/run.ns"
for _ in $(seq "$runs"); do
  t=$(now); "$bin" test --jobs 1 >/dev/null 2>&1; echo $(( $(now) - t )) >> "$work/test.ns"
  t=$(now)
  "$bin" run .workflows/summarize --provider replay --cassette tests/cassettes/summarize.jsonl \
    --workspace "$work/ws" >/dev/null 2>&1
  echo $(( $(now) - t )) >> "$work/run.ns"
  rm -rf .agentfile
done
test_ms=$(median < "$work/test.ns")
run_ms=$(median < "$work/run.ns")
echo "agentfile test, one case:        median ${test_ms} ms"
echo "agentfile run, the same run:     median ${run_ms} ms"
awk -v a="$test_ms" -v b="$run_ms" 'BEGIN {printf "overhead per case:               %.2f ms\n", a - b}'

# Many cases in one file: the process's start is shared.
{
  echo "workflow: ../.workflows/summarize"
  echo "cases:"
  for i in $(seq "$cases"); do
    echo "  - name: case $i"
    echo "    cassette: cassettes/summarize.jsonl"
    echo "    expect: { status: completed, outputs: { result: { contains: release } } }"
  done
} > tests/many.test.yaml
t=$(now); "$bin" test tests/many.test.yaml --jobs 1 >/dev/null 2>&1; total=$(( $(now) - t ))
awk -v t="$total" -v n="$cases" 'BEGIN {printf "%d cases, --jobs 1:             %.1f ms (%.2f ms per case)\n", n, t / 1e6, t / 1e6 / n}'
t=$(now); "$bin" test tests/many.test.yaml >/dev/null 2>&1; total=$(( $(now) - t ))
awk -v t="$total" -v n="$cases" 'BEGIN {printf "%d cases, --jobs CPUs:          %.1f ms (%.2f ms per case)\n", n, t / 1e6, t / 1e6 / n}'
