#!/usr/bin/env bash
# Signed OCI packages (issue 47), whole process, against a real registry on
# loopback (Debian's docker-registry): `pack` of the demo, `push` and `pull`
# (a fresh cache each time), `sign` and `verify`, and a run of the agentrc
# example by digest from the cache against the same run from its folder (the
# overhead of resolving and checking the package). Medians of RUNS runs.
#
#   AGENTFILE_BIN=target/release/agentfile RUNS=20 scripts/bench-package.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
bin=$(realpath "${AGENTFILE_BIN:-target/release/agentfile}")
runs=${RUNS:-20}
registry=$(command -v docker-registry || echo /usr/bin/docker-registry)
[ -x "$registry" ] || { echo "docker-registry not installed (apt-get install docker-registry)"; exit 1; }
work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/registry.yml" <<YML
version: 0.1
log: { level: error, accesslog: { disabled: true } }
storage: { filesystem: { rootdirectory: $work/data } }
http: { addr: 127.0.0.1:$port }
YML
"$registry" serve "$work/registry.yml" > "$work/registry.log" 2>&1 &
reg=$!
trap 'kill $reg 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$port/v2/" > /dev/null 2>&1 && break
  sleep 0.1
done
host=127.0.0.1:$port

# median TIMES_FILE: the median of the nanosecond figures, in ms.
median() { sort -n "$1" | awk '{a[NR]=$1} END {printf "%.2f", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2) / 1e6}'; }
# time_it NAME COMMAND…: run it RUNS times, print the median.
time_it() {
  local name=$1; shift
  : > "$work/t"
  for _ in $(seq "$runs"); do
    local t; t=$(date +%s%N)
    "$@" > /dev/null 2>&1
    echo $(( $(date +%s%N) - t )) >> "$work/t"
  done
  echo "$name: median $(median "$work/t") ms over $runs runs"
}

cp -r examples/demo "$work/demo" && rm -rf "$work/demo/.agentfile"
cp -r examples/agentrc "$work/agentrc" && rm -rf "$work/agentrc/.agentfile" "$work/agentrc/tests"
cd "$work"
printf '[packages]\nplain_http = true\ncache = "cache"\n' > pull.toml
files=$("$bin" pack demo --format json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["files"]), "files,", d["bytes"], "bytes, layer", d["layerBytes"], "bytes")')
echo "demo package: $files"
time_it "pack examples/demo" "$bin" pack demo
time_it "push examples/demo" "$bin" push demo "$host/bench/demo:1" --plain-http
time_it "pull (fresh cache)" sh -c "rm -rf cache; '$bin' pull $host/bench/demo:1 --config pull.toml"
"$bin" keygen key > /dev/null 2>&1
time_it "sign" "$bin" sign "$host/bench/demo:1" --key key.key --plain-http
time_it "verify" "$bin" verify "$host/bench/demo:1" --key key.pub --plain-http

pinned=$("$bin" push agentrc "$host/bench/agentrc:1" --plain-http 2>/dev/null)
digest=${pinned##*@}
mkdir run && cp agentrc/notes.txt agentrc/model.json run/
printf '[agent]\nworkspace = "."\n\n[packages]\nplain_http = true\ncache = "cache"\n' > run/agent.toml
cd run
"$bin" pull "$host/bench/agentrc:1" > /dev/null 2>&1
args=(--provider fake --script model.json --input "task=What does notes.txt say?" --output json)
time_it "run from the folder" "$bin" run ../agentrc "${args[@]}"
time_it "run by digest (cached)" "$bin" run "oci://$host/bench/agentrc@$digest" "${args[@]}"
