#!/usr/bin/env bash
# How long `agentfile sessions replay` takes for a session of about 1,000
# events (issue 46's target: 200 ms), whole process: a WORKFLOW.md mapping a
# tool step over ITEMS items (node_started, tool_call, tool_result and
# node_complete each: four events an item) is run once, then replayed RUNS
# times; the median wall time and the events replayed are printed.
#
#   AGENTFILE_BIN=target/release/agentfile ITEMS=250 RUNS=20 scripts/bench-replay.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${AGENTFILE_BIN:-target/release/agentfile}")
items=${ITEMS:-250}
runs=${RUNS:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/.workflows/many"
cat > "$work/.workflows/many/WORKFLOW.md" <<'WF'
---
name: Many
id: many
description: List the workspace once per item.
version: 1.0.0
inputs:
  type: object
  properties:
    items: { type: array, items: { type: string } }
outputs: { type: object }
steps:
  - id: each
    kind: map
    over: $input.items
    steps:
      - id: look
        kind: tool
        tool: ls
        inputs: { path: "." }
---
WF
cd "$work"
python3 -c "import json,sys; print(json.dumps({'items': [str(i) for i in range($items)]}))" > inputs.json
"$bin" run .workflows/many --inputs-json inputs.json --output json > first.json 2>/dev/null
id=$(python3 -c "import json; print(json.load(open('first.json'))['session_id'])")
events=$("$bin" sessions show "$id" --format json | python3 -c "import json,sys; print(len(json.load(sys.stdin)['events']))")
: > times
for _ in $(seq "$runs"); do
  t=$(date +%s%N)
  "$bin" sessions replay "$id" --output json > /dev/null 2>&1
  echo $(( $(date +%s%N) - t )) >> times
done
median=$(sort -n times | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2) / 1e6}')
echo "session of $events events: replay median ${median} ms over $runs runs"
