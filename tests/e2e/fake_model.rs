//! `--provider fake --script FILE` (and `[llm] provider = "fake"`): a
//! scripted model anyone can run offline, with nothing else set — no config,
//! no key, no `fake-provider` program, no base URL — in every command that
//! runs workflows (`run`, `serve`, `mcp`, the daemon's `triggers fire`).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::support::{Dir, bin};

/// A goal that lists the workspace, and a script that calls `ls` once and
/// then answers.
fn workspace() -> Dir {
    let dir = Dir::new("fake-model");
    let p = dir.path();
    std::fs::write(
        p.join("Agentfile"),
        "NAME look\nGOAL look \"List the files in the workspace and say how many there are\"\nRUN main USING look\n",
    )
    .unwrap();
    std::fs::write(p.join("file.txt"), "hello\n").unwrap();
    std::fs::write(
        p.join("model.json"),
        r#"[
  {"tool_calls": [{"name": "ls", "arguments": {"path": "."}}]},
  {"text": "there are three files"}
]"#,
    )
    .unwrap();
    dir
}

/// The binary in `dir` with no provider, key or endpoint in its environment.
fn bare(dir: &Path) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(dir).stdin(Stdio::null()).env("NO_COLOR", "1");
    for (k, _) in std::env::vars() {
        if k.starts_with("AGENTFILE_") || k.ends_with("_API_KEY") || k == "RUST_LOG" {
            c.env_remove(k);
        }
    }
    c
}

fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn run_with_the_fake_model_needs_nothing_else() {
    let ws = workspace();
    let o = bare(ws.path())
        .args([
            "run",
            "Agentfile",
            "--provider",
            "fake",
            "--script",
            "model.json",
        ])
        .args(["--output", "json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(r["outputs"]["look"], "there are three files", "{r}");
    // The scripted call ran for real, behind the policy.
    let id = r["session_id"].as_str().unwrap();
    let shown = bare(ws.path())
        .args(["sessions", "show", id, "--format", "json"])
        .output()
        .unwrap();
    let events: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let listed = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "tool_result")
        .unwrap_or_else(|| panic!("no tool_result: {events}"));
    assert!(listed.to_string().contains("file.txt"), "{listed}");
}

#[test]
fn a_resumed_run_answers_from_the_script_it_started_with() {
    let ws = workspace();
    std::fs::write(
        ws.path().join("gated.agent"),
        "NAME gated\nGOAL look \"List the files in the workspace and say how many there are\" SUPERVISED HUMAN\nRUN main USING look\n",
    )
    .unwrap();
    // Unattended, the run stops at the approval before any model call.
    let o = bare(ws.path())
        .args([
            "run",
            "gated.agent",
            "--provider",
            "fake",
            "--script",
            "model.json",
        ])
        .args(["--output", "json"])
        .output()
        .unwrap();
    let r: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", said(&o)));
    assert_eq!(r["termination_reason"], "approval_unavailable", "{r}");
    let id = r["session_id"].as_str().unwrap();
    let approve = bare(ws.path())
        .args(["sessions", "approve", id])
        .output()
        .unwrap();
    assert_eq!(approve.status.code(), Some(0), "{}", said(&approve));
    // No --provider, no --script: both were stored with the session.
    let again = bare(ws.path())
        .args(["sessions", "resume", id, "--output", "json"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", said(&again));
    let r: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(r["outputs"]["look"], "there are three files", "{r}");
}

/// Two agent steps in parallel branches, the left one slow to answer, so
/// their events interleave in the store: the Markdown export writes each
/// step's section once, with its conversation under it, left (which
/// started first) before right — and no empty output for the branches.
#[test]
fn the_markdown_export_gives_each_parallel_agent_step_one_section() {
    let ws = workspace();
    let p = ws.path();
    let agent = |side: &str| {
        format!(
            "      - id: {side}\n        steps:\n          - id: look\n            kind: tool\n            tool: agent\n            inputs: {{ prompt: \"Look {side}\" }}\n"
        )
    };
    std::fs::write(
        p.join("WORKFLOW.md"),
        format!(
            "---\nname: par\nid: par\ndescription: Two agents at once.\nversion: 1.0.0\ninputs: {{ type: object }}\noutputs: {{ type: object }}\nsteps:\n  - id: fan\n    kind: parallel\n    branches:\n{}{}    next: $end\n---\n# par\n",
            agent("left"),
            agent("right")
        ),
    )
    .unwrap();
    // Each side lists the folder, then answers; the left's first answer
    // comes late, so the right's whole conversation falls inside the left's.
    std::fs::write(
        p.join("par.json"),
        r#"{"replies": [
  {"when": ["Look left"], "unless": ["file.txt"], "latency_ms": 300,
   "tool_calls": [{"name": "ls", "arguments": {"path": "."}}]},
  {"when": ["Look right"], "unless": ["file.txt"],
   "tool_calls": [{"name": "ls", "arguments": {"path": "."}}]},
  {"when": ["Look left"], "text": "left done"},
  {"when": ["Look right"], "text": "right done"}
]}"#,
    )
    .unwrap();
    let o = bare(p)
        .args([
            "run",
            "WORKFLOW.md",
            "--provider",
            "fake",
            "--script",
            "par.json",
        ])
        .args(["--output", "json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = r["session_id"].as_str().unwrap();
    let shown = bare(p)
        .args(["sessions", "show", id, "--format", "json"])
        .output()
        .unwrap();
    let events = String::from_utf8_lossy(&shown.stdout);
    assert!(
        events.find("right done") < events.find("left done"),
        "the branches did not interleave: {events}"
    );
    let o = bare(p)
        .args(["sessions", "export", id, "--format", "markdown"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    let md = String::from_utf8_lossy(&o.stdout);
    for heading in [
        "## Step `fan`",
        "### Goal `agent:fan/left/look`",
        "### Goal `agent:fan/right/look`",
    ] {
        assert_eq!(md.matches(heading).count(), 1, "{heading}:\n{md}");
    }
    let at = |text: &str| md.find(text).unwrap_or_else(|| panic!("{text}:\n{md}"));
    assert!(at("> Look left") < at("> left done"), "{md}");
    assert!(at("> left done") < at("> Look right"), "{md}");
    assert!(at("> Look right") < at("> right done"), "{md}");
    assert!(!md.contains("null"), "{md}");
}

#[test]
fn the_config_can_name_the_fake_model_and_its_script() {
    let ws = workspace();
    std::fs::create_dir_all(ws.path().join("conf")).unwrap();
    std::fs::rename(
        ws.path().join("model.json"),
        ws.path().join("conf/model.json"),
    )
    .unwrap();
    // `script` is relative to the config's folder, like `cassette`.
    std::fs::write(
        ws.path().join("conf/agent.toml"),
        "[agent]\nworkspace = \"..\"\n[llm]\nprovider = \"fake\"\nscript = \"model.json\"\n",
    )
    .unwrap();
    let o = bare(ws.path())
        .args([
            "run",
            "Agentfile",
            "--config",
            "conf/agent.toml",
            "--output",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["outputs"]["look"], "there are three files", "{r}");
}

#[test]
fn a_missing_or_broken_script_is_a_usage_error_that_says_what_to_do() {
    let ws = workspace();
    let o = bare(ws.path())
        .args(["run", "Agentfile", "--provider", "fake"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(said(&o).contains("--script FILE"), "{}", said(&o));
    std::fs::write(ws.path().join("bad.json"), "[\n  {\"txt\": \"hi\"}\n]").unwrap();
    let o = bare(ws.path())
        .args([
            "run",
            "Agentfile",
            "--provider",
            "fake",
            "--script",
            "bad.json",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    let err = said(&o);
    assert!(
        err.contains("bad.json") && err.contains("unknown field `txt`") && err.contains("line 2"),
        "{err}"
    );
    // A script that runs out is the model's error, not a hang.
    std::fs::write(ws.path().join("short.json"), "[]").unwrap();
    let o = bare(ws.path())
        .args([
            "run",
            "Agentfile",
            "--provider",
            "fake",
            "--script",
            "short.json",
        ])
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0), "{}", said(&o));
}

/// Write `requests` to a server on stdio, one per line, and read lines until
/// the reply to the last one: that reply.
fn converse(mut server: Command, requests: &[Value]) -> Value {
    let mut child = server
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for r in requests {
        writeln!(stdin, "{r}").unwrap();
    }
    let last = requests.last().unwrap()["id"].clone();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let reply = loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the server ended before answering"
        );
        let msg: Value = serde_json::from_str(&line).unwrap_or_default();
        if msg["id"] == last {
            break msg;
        }
    };
    drop(stdin);
    let _ = child.wait();
    reply
}

#[test]
fn serve_and_mcp_run_on_the_fake_model_too() {
    let ws = workspace();
    let mut serve = bare(ws.path());
    serve.args(["serve", "--provider", "fake", "--script", "model.json"]);
    let r = converse(
        serve,
        &[json!({"jsonrpc": "2.0", "id": 1, "method": "run", "params": {"path": "Agentfile"}})],
    );
    assert_eq!(r["result"]["status"], "completed", "{r}");
    assert_eq!(
        r["result"]["outputs"]["look"], "there are three files",
        "{r}"
    );

    let mut mcp = bare(ws.path());
    mcp.args(["mcp", "--provider", "fake", "--script", "model.json"]);
    let r = converse(
        mcp,
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "run", "arguments": {"path": "Agentfile"}}}),
        ],
    );
    let result = &r["result"]["structuredContent"];
    assert_eq!(result["status"], "completed", "{r}");
    assert_eq!(result["outputs"]["look"], "there are three files", "{r}");
}

#[test]
fn the_daemons_fires_take_the_fake_model_flags() {
    let ws = workspace();
    let d = ws.path().join(".workflows/tick");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("WORKFLOW.md"),
        "---\nname: tick\nid: tick\ndescription: A test.\nversion: 1.0.0\ninputs: { type: object }\noutputs: { type: object }\ntriggers:\n  - kind: event\n    name: tick\nsteps:\n  - id: look\n    kind: tool\n    tool: ls\n    inputs: { path: \".\" }\n---\n# tick\n",
    )
    .unwrap();
    let o = bare(ws.path())
        .args(["triggers", "fire", "tick#0", "--provider", "fake"])
        .args(["--script", "model.json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", said(&o));
    let help = bare(ws.path()).args(["daemon", "--help"]).output().unwrap();
    let help = said(&help);
    assert!(
        help.contains("--script <FILE>") && help.contains("--base-url <URL>"),
        "{help}"
    );
}
