#!/bin/sh
# Throughput of `agentfile worker`s over NATS JetStream: runs/s with 1, 2 and 3
# workers (tests/cluster.rs, throughput_one_vs_three_workers), asserting that 3
# workers do at least CLUSTER_MIN_SPEEDUP (default 2.5) times what one does.
# Needs nats-server and PostgreSQL (scripts/test.sh installs both as root) and
# enough cores for 3 workers, the server, NATS and PostgreSQL side by side.
#
#   scripts/bench-cluster.sh            # 300 runs per measurement
#   CLUSTER_RUNS=1000 scripts/bench-cluster.sh
set -eu
cd "$(dirname "$0")/.."
export CLUSTER_RUNS="${CLUSTER_RUNS:-300}"
export CLUSTER_MIN_SPEEDUP="${CLUSTER_MIN_SPEEDUP:-2.5}"
exec cargo test ${CARGO_PROFILE:+--profile "$CARGO_PROFILE"} --test cluster throughput_one_vs_three_workers -- --nocapture
