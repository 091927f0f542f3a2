#!/bin/sh
# Throughput of `agentfile worker`s over NATS JetStream: runs/s with 1, 2 and 3
# workers (tests/e2e/cluster.rs, throughput_one_vs_three_workers), asserting that 3
# workers do at least CLUSTER_MIN_SPEEDUP (default 2.5) times what one does.
# Needs nats-server and PostgreSQL (scripts/test.sh installs both as root) and
# enough cores for 3 workers, the server, NATS and PostgreSQL side by side.
#
# The servers, workers and the fake model are release binaries (built here
# unless AGENTFILE_BIN and FAKE_BIN name them); the model answers each call
# after 50 ms; each worker runs at most 4 runs at once (CLUSTER_SLOTS), so one
# worker is latency-bound and more workers add capacity.
#
#   scripts/bench-cluster.sh            # 300 runs per measurement
#   CLUSTER_RUNS=1000 CLUSTER_LATENCY_MS=200 scripts/bench-cluster.sh
set -eu
cd "$(dirname "$0")/.."
export CLUSTER_RUNS="${CLUSTER_RUNS:-300}"
export CLUSTER_MIN_SPEEDUP="${CLUSTER_MIN_SPEEDUP:-2.5}"
export CLUSTER_LATENCY_MS="${CLUSTER_LATENCY_MS:-50}"
export CLUSTER_SLOTS="${CLUSTER_SLOTS:-4}"
if [ -z "${AGENTFILE_BIN:-}" ] || [ -z "${FAKE_BIN:-}" ]; then
    cargo build --release --bin agentfile --bin fake-provider >&2
    release="$(realpath "${CARGO_TARGET_DIR:-target}/release")"
    AGENTFILE_BIN="${AGENTFILE_BIN:-$release/agentfile}"
    FAKE_BIN="${FAKE_BIN:-$release/fake-provider}"
fi
export AGENTFILE_BIN FAKE_BIN
exec cargo test --test e2e cluster::throughput_one_vs_three_workers -- --nocapture
