# Sourced by scripts/bench-process.sh and scripts/symbol-order.sh: the
# two-turn workflow both run. `two_turn_workflow FAKE_BIN NAME` makes a
# temporary folder (in `work`, removed at exit with the fake model, whose pid
# is `fake_pid`), starts the loopback fake model there and writes
# $work/Agentfile, $work/agent.toml and $work/ws. The model answers with an
# `ls` call first (or the tool call given as JSON in a third argument), and once
# a tool result is in the conversation, with the answer. The key is read from
# BENCH_KEY.
two_turn_cleanup() {
    if [ -n "${fake_pid:-}" ]; then kill "$fake_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}

two_turn_workflow() {
    local fake="$1" name="$2" ls_call='{"name": "ls", "arguments": {"path": "."}}' call url
    call="${3:-$ls_call}"
    work="$(mktemp -d "${TMPDIR:-/tmp}/agentfile-$name.XXXXXX")"
    fake_pid=""
    trap two_turn_cleanup EXIT
    cat >"$work/script.json" <<JSON
{"replies": [
  {"text": "there is one file", "when": ["\\"role\\":\\"tool\\""]},
  {"tool_calls": [$call]}
], "repeat": true}
JSON
    "$fake" "$work/script.json" >"$work/url" &
    fake_pid=$!
    for _ in $(seq 100); do [ -s "$work/url" ] && break; sleep 0.05; done
    url="$(head -n1 "$work/url")"
    [ -n "$url" ] || { echo "$name: the fake provider did not start" >&2; exit 1; }
    mkdir -p "$work/ws"
    echo hello >"$work/ws/file.txt"
    cat >"$work/Agentfile" <<'AF'
NAME bench
GOAL look "List the files in the workspace and say how many there are"
RUN main USING look
AF
    cat >"$work/agent.toml" <<TOML
[agent]
workspace = "ws"
[llm]
provider = "openai"
model = "gpt-4o"
base_url = "$url"
api_key_env = "BENCH_KEY"
TOML
}
