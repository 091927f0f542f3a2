//! One workflow per format, run by the built binary in text mode (the default
//! a person gets: no `--output`): standard output holds the run's outputs and
//! nothing else, each under its name in the order the plan declares them
//! (`Plan::output_order`), or a lone output as is. And `inspect --format json`
//! prints the same plan as JSON-RPC `inspect` over `agentfile serve`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use agentfile::llm::fake::FakeReply;
use serde_json::{Value, json};

use crate::support;
use crate::support::{KEY_VAR, config, fake, text};

fn tmp(name: &str) -> PathBuf {
    support::tmp("out", name)
}

fn write(dir: &Path, rel: &str, body: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

/// The Agentfile DSL: three goals, published in step order (not by name).
const DSL: &str = "NAME three\nGOAL zeta \"Say z\"\nGOAL alpha \"Say a\"\nGOAL mid \"Say m\"\nRUN main USING zeta, alpha, mid\n";

/// WORKFLOW.md with no model: an `outputs` schema naming `zeta` then `alpha`,
/// and a `result` adding `mid`.
const WORKFLOW_MD: &str = r#"---
name: Three
id: three
description: Reads three files.
version: 1.0.0
inputs: { type: object }
outputs:
  type: object
  properties:
    zeta: { type: string }
    alpha: { type: string }
steps:
  - id: first
    kind: tool
    tool: read
    inputs: { path: z.txt }
    next: second
  - id: second
    kind: tool
    tool: read
    inputs: { path: a.txt }
    next: third
  - id: third
    kind: tool
    tool: read
    inputs: { path: m.txt }
    next: $end
result:
  zeta: $steps.first
  alpha: $steps.second
  mid: $steps.third
---
"#;

/// workflow.yaml: three steps, each publishing its artifact under its id.
const WORKFLOW_YAML: &str = r#"specVersion: "1.0"
name: trio
version: 1.0.0
description: Three steps.
trigger:
  type: command
  input_var: TOPIC
steps:
  - id: zeta
    name: Zeta
    agent: agents/w.md
    skill: skills/s.md
    input: $TOPIC
    goal: Say z.
    produces: outputs/z.md
  - id: alpha
    name: Alpha
    agent: agents/w.md
    skill: skills/s.md
    input: $TOPIC
    goal: Say a.
    produces: outputs/a.md
  - id: mid
    name: Mid
    agent: agents/w.md
    skill: skills/s.md
    input: $TOPIC
    goal: Say m.
    produces: outputs/m.md
"#;

const AGENTRC: &str = "# syntax=agentrc.agentfile/v0.1\nAGENT writer\nCMD python ./agent.py\nTOOL utcp:file_read\nAUDIT all\nPOLICY\n  permit(principal, action, resource);\nEND\n";

const AGENT_MD: &str = "---\ntitle: Helper\n---\n\n## System\nYou help.\n";

/// One folder per format, its workflow written; the path to run and inspect.
fn dsl(dir: &Path) -> &'static str {
    write(dir, "Agentfile", DSL);
    "Agentfile"
}

fn workflow_md(dir: &Path) -> &'static str {
    write(dir, ".workflows/three/WORKFLOW.md", WORKFLOW_MD);
    write(dir, "z.txt", "zed\n");
    write(dir, "a.txt", "ay\n");
    write(dir, "m.txt", "em\n");
    ".workflows/three"
}

fn workflow_yaml(dir: &Path) -> &'static str {
    write(dir, "workflows/trio/workflow.yaml", WORKFLOW_YAML);
    write(
        dir,
        "workflows/trio/agents/w.md",
        "# Agent: W\n\n## Persona\nYou write.\n",
    );
    write(
        dir,
        "workflows/trio/skills/s.md",
        "# Skill: S\n\n## Instructions\n1. Write.\n",
    );
    "workflows/trio"
}

fn agentrc(dir: &Path) -> &'static str {
    write(dir, "Agentfile", AGENTRC);
    "Agentfile"
}

fn agent_md(dir: &Path) -> &'static str {
    write(dir, "helper.agent.md", AGENT_MD);
    "helper.agent.md"
}

/// `agentfile run PATH ARGS…` in text mode against the fake model answering
/// `Z answer`, `A answer`, `M answer` in turn.
fn run_text(dir: &Path, path: &str, args: &[&str]) -> Output {
    let server = fake(vec![
        FakeReply::text("Z answer"),
        FakeReply::text("A answer"),
        FakeReply::text("M answer"),
    ]);
    config(dir, &server);
    let mut all = vec!["run", path];
    all.extend_from_slice(args);
    let o = support::agentfile(dir, &all, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    o
}

fn stdout(o: &Output) -> &str {
    std::str::from_utf8(&o.stdout).unwrap()
}

#[test]
fn dsl_outputs_print_in_step_order() {
    let dir = tmp("run-dsl");
    let path = dsl(&dir);
    let o = run_text(&dir, path, &[]);
    assert_eq!(
        stdout(&o),
        "## zeta\n\nZ answer\n\n## alpha\n\nA answer\n\n## mid\n\nM answer\n\n",
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn workflow_md_outputs_print_in_schema_then_result_order() {
    let dir = tmp("run-wmd");
    let path = workflow_md(&dir);
    let o = run_text(&dir, path, &[]);
    // Each value is the file as read (its newline kept), then a blank line.
    assert_eq!(
        stdout(&o),
        "## zeta\n\nzed\n\n\n## alpha\n\nay\n\n\n## mid\n\nem\n\n\n",
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `result` object with no `outputs` schema naming its keys: they print
/// as written (the plan's `output_names`), not by name.
#[test]
fn workflow_md_result_keys_print_as_written() {
    let dir = tmp("run-wmd-result");
    let wf = WORKFLOW_MD.replace(
        "outputs:\n  type: object\n  properties:\n    zeta: { type: string }\n    alpha: { type: string }\n",
        "outputs: { type: object }\n",
    );
    write(&dir, ".workflows/three/WORKFLOW.md", &wf);
    write(&dir, "z.txt", "zed\n");
    write(&dir, "a.txt", "ay\n");
    write(&dir, "m.txt", "em\n");
    let o = run_text(&dir, ".workflows/three", &[]);
    assert_eq!(
        stdout(&o),
        "## zeta\n\nzed\n\n\n## alpha\n\nay\n\n\n## mid\n\nem\n\n\n",
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn workflow_yaml_outputs_print_in_step_order() {
    let dir = tmp("run-wy");
    let path = workflow_yaml(&dir);
    let o = run_text(&dir, path, &["--input", "TOPIC=t"]);
    let artifact = |p: &str| {
        format!(
            "{{\n  \"path\": \"{p}\",\n  \"files\": [\n    {{\n      \"path\": \"{p}\",\n      \"bytes\": 8\n    }}\n  ]\n}}"
        )
    };
    let want = format!(
        "## zeta\n\n{}\n\n## alpha\n\n{}\n\n## mid\n\n{}\n\n",
        artifact("outputs/z.md"),
        artifact("outputs/a.md"),
        artifact("outputs/m.md")
    );
    assert_eq!(stdout(&o), want, "{}", text(&o));
    let wf = dir.join("workflows/trio");
    for (f, a) in [("z", "Z"), ("a", "A"), ("m", "M")] {
        let got = std::fs::read_to_string(wf.join(format!("outputs/{f}.md"))).unwrap();
        assert_eq!(got, format!("{a} answer"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An agentrc Agentfile lowers into one agent, one goal: one output, printed
/// as is (for pipelines), and nothing else on standard output.
#[test]
fn agentrc_prints_its_one_output_as_is() {
    let dir = tmp("run-rc");
    let path = agentrc(&dir);
    let o = run_text(&dir, path, &["--input", "task=do it"]);
    assert_eq!(stdout(&o), "Z answer\n", "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// An agent file run on its own: one output, as is.
#[test]
fn an_agent_file_prints_its_one_output_as_is() {
    let dir = tmp("run-am");
    let path = agent_md(&dir);
    let o = run_text(&dir, path, &["--input", "task=do it"]);
    assert_eq!(stdout(&o), "Z answer\n", "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// JSON-RPC `inspect` of `path` over `agentfile serve` started in `dir`: the
/// reply's result. The server answers, then exits when its input closes.
fn rpc_inspect(dir: &Path, path: &str) -> Value {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .arg("serve")
        .current_dir(dir)
        .env(KEY_VAR, "test-key-0123456789")
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start agentfile serve");
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "inspect", "params": {"path": path}});
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{request}").unwrap();
    drop(stdin);
    let o = child.wait_with_output().unwrap();
    let line = String::from_utf8_lossy(&o.stdout);
    let reply = line
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["id"] == 1)
        .unwrap_or_else(|| panic!("no reply to inspect: {}", text(&o)));
    assert!(reply.get("error").is_none(), "{reply}");
    reply["result"].clone()
}

/// `inspect --format json` on the command line and over JSON-RPC print the
/// same plan. The one field that differs is `path` ("the workflow file, as
/// given"): the CLI keeps the argument, relative to its current folder; the
/// server resolves it against its workspace. Both name the same file.
fn inspect_agrees(name: &str, make: fn(&Path) -> &'static str) -> Value {
    let dir = tmp(&format!("inspect-{name}"));
    let path = make(&dir);
    let o = support::agentfile(&dir, &["inspect", "--format", "json", path], &[]);
    assert!(o.status.success(), "{}", text(&o));
    let mut cli: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {}", text(&o)));
    let mut rpc = rpc_inspect(&dir, path);
    let cli_path = cli["path"].take();
    let rpc_path = rpc["path"].take();
    let cli_file = dir.join(cli_path.as_str().unwrap());
    assert_eq!(
        Path::new(rpc_path.as_str().unwrap()),
        cli_file.as_path(),
        "{name}"
    );
    assert!(cli_file.is_file(), "{name}: {}", cli_file.display());
    assert_eq!(cli, rpc, "{name}: the CLI's plan, then the server's");
    // Both are the plan (an agentrc file's declaration rides in it).
    assert!(
        cli["graph"].is_object() && cli["fingerprint"].is_string(),
        "{cli:#}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    cli
}

#[test]
fn inspect_json_agrees_for_the_dsl() {
    inspect_agrees("dsl", dsl);
}

#[test]
fn inspect_json_agrees_for_workflow_md() {
    inspect_agrees("wmd", workflow_md);
}

#[test]
fn inspect_json_agrees_for_workflow_yaml() {
    inspect_agrees("wy", workflow_yaml);
}

#[test]
fn inspect_json_agrees_for_agentrc() {
    let plan = inspect_agrees("rc", agentrc);
    assert_eq!(plan["format"], "agentrc", "{plan:#}");
    assert_eq!(plan["agentrc"]["agent"], "writer", "{plan:#}");
}

#[test]
fn inspect_json_agrees_for_an_agent_file() {
    inspect_agrees("am", agent_md);
}
