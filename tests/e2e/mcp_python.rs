//! `agentfile mcp` driven by the official MCP Python SDK (`tests/mcp_python/client.py`):
//! a host other than our own rmcp lists the tools, runs a workflow with a
//! progress callback, and connects in the SDK's default `auto` mode (a
//! `server/discover` probe, answered: 2026-07-28) and in `legacy` mode
//! (`initialize`).
//!
//! Needs `AGENTFILE_PY`, the python of a virtual environment with `mcp`
//! installed (`scripts/test.sh` makes one at `target/py-mcp`). Without it the
//! test fails when `CI` is set — CI must not skip it silently — and is skipped
//! with a notice otherwise.

use std::path::PathBuf;
use std::time::Duration;

use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::Value;

const KEY_VAR: &str = "AGENTFILE_MCP_PY_TEST_KEY";

/// The venv's python, or `None` (the test is then skipped, except in CI).
fn python() -> Option<std::ffi::OsString> {
    let Some(python) = std::env::var_os("AGENTFILE_PY").filter(|p| !p.is_empty()) else {
        if std::env::var_os("CI").is_some() {
            panic!(
                "AGENTFILE_PY is not set: CI must run the MCP Python SDK test (scripts/test.sh makes the venv and sets it)"
            );
        }
        eprintln!(
            "skipped: set AGENTFILE_PY to a python with the `mcp` package (scripts/test.sh does) to run the MCP Python SDK test"
        );
        return None;
    };
    Some(python)
}

/// A fresh copy of the project at `from` (relative to the repository) with
/// `agent_toml` as its config; its canonical path.
fn project(name: &str, from: &str, agent_toml: &str) -> PathBuf {
    let dir = crate::support::tmp(&format!("mcp-python-{name}"), "project");
    crate::support::copy_dir(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(from),
        &dir,
        &[],
    );
    let dir = dir.canonicalize().unwrap();
    std::fs::write(dir.join("agent.toml"), agent_toml).unwrap();
    dir
}

/// Run `client.py` against `agentfile mcp` in `dir`; its JSON summary.
async fn client(python: &std::ffi::OsStr, dir: &std::path::Path, scenario: &str) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_python/client.py");
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(&script)
        .args(["--binary", env!("CARGO_BIN_EXE_agentfile"), "--workspace"])
        .arg(dir)
        .args(["--key-var", KEY_VAR, "--key", "test-key-0123456789"])
        .args(["--scenario", scenario])
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("the Python client timed out")
        .expect("cannot start the Python client");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client.py failed: {stderr}");
    let summary: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    eprintln!("MCP Python SDK {}", summary["sdk_version"]);
    summary
}

#[tokio::test]
async fn the_python_sdk_lists_runs_with_progress_and_speaks_2026_after_discover() {
    let Some(python) = python() else {
        return;
    };
    let model = FakeServer::start(vec![
        FakeReply::text("Hello, tides!")
            .with_latency(Duration::from_millis(1000))
            .when(["Say hello about tides"]),
    ])
    .await
    .unwrap();
    let dir = crate::support::tmp_dir("mcp-python");
    std::fs::write(
        dir.join("hello.agent"),
        "NAME hello\nINPUT topic\nGOAL greet \"Say hello about $topic\"\nRUN main USING greet\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = {:?}\napi_key_env = \"{KEY_VAR}\"\n",
            model.base_url()
        ),
    )
    .unwrap();
    let summary = client(&python, &dir, "dsl").await;
    let _ = std::fs::remove_dir_all(&dir);

    let s = &summary["session"];
    assert_eq!(s["protocol_version"], "2025-11-25", "{summary:#}");
    assert_eq!(s["server_name"], "agentfile");
    let tools: Vec<&str> = s["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for t in [
        "approve",
        "cancel",
        "event",
        "inspect",
        "list",
        "run",
        "run_hello",
        "validate",
    ] {
        assert!(tools.contains(&t), "{tools:?}");
    }
    assert_eq!(s["schemas_are_objects"], true);
    assert_eq!(s["is_error"], false, "{summary:#}");
    assert_eq!(s["structured"]["status"], "completed");
    assert_eq!(s["structured"]["outputs"]["greet"], "Hello, tides!");
    assert!(s["text"].as_str().unwrap().contains("Hello, tides!"));
    let progress = s["progress"].as_array().unwrap();
    assert!(progress.len() >= 4, "{progress:?}");
    assert!(
        progress.iter().any(|p| p["message"]
            .as_str()
            .unwrap_or("")
            .contains("still running")),
        "no heartbeat during the 1 s model call: {progress:?}"
    );

    // `auto` probes `server/discover`; it is answered, so the SDK speaks
    // 2026-07-28. `legacy` connects with `initialize`.
    let auto = &summary["auto"];
    assert_eq!(auto["protocol_version"], "2026-07-28", "{summary:#}");
    assert_eq!(auto["validate_ok"], true);
    let legacy = &summary["legacy"];
    assert_eq!(legacy["protocol_version"], "2025-11-25", "{summary:#}");
    assert_eq!(legacy["validate_ok"], true);
}

/// A WORKFLOW.md through `agentfile mcp` by the Python SDK: its typed tool
/// (the workflow's `inputs` and `outputs` as the tool's schemas) with
/// progress, its approval step answered through elicitation, its suspend
/// step resumed by the `signal` tool, and the resumed run followed with
/// `event` to its outputs. The model is asked once: the resumed run reads
/// the first process's answer from the journal.
#[tokio::test]
async fn the_python_sdk_runs_a_workflow_md_through_approval_and_signal() {
    let Some(python) = python() else {
        return;
    };
    let model = FakeServer::start(vec![
        FakeReply::text(r#"{"notes": "Tides are faster."}"#)
            .when(["release notes for version 1.2.0"]),
    ])
    .await
    .unwrap();
    let dir = project(
        "wmd",
        "tests/workflow_md/ship-notes",
        &format!(
            "[llm]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = {:?}\napi_key_env = \"{KEY_VAR}\"\n\n[tools.publish-notes]\ncommand = [\"python3\", \"publish.py\"]\n",
            model.base_url()
        ),
    );
    let summary = client(&python, &dir, "workflow-md").await;
    let published = std::fs::read_to_string(dir.join("published.jsonl")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let w = &summary["workflow_md"];

    // The tool's schemas are the workflow's.
    let t = &w["tool"];
    assert!(
        t["description"]
            .as_str()
            .unwrap()
            .starts_with("Draft release notes with a model"),
        "{t:#}"
    );
    assert_eq!(t["input_schema"]["type"], "object");
    assert_eq!(
        t["input_schema"]["properties"]["version"]["type"], "string",
        "{t:#}"
    );
    assert_eq!(
        t["input_schema"]["required"],
        serde_json::json!(["version"])
    );
    let outputs = &t["output_schema"]["properties"]["outputs"];
    assert_eq!(
        outputs["required"],
        serde_json::json!(["notes", "channel"]),
        "{t:#}"
    );

    // The first call ends at the suspend step, after an elicited approval.
    let first = &w["first"];
    assert_eq!(first["is_error"], false, "{w:#}");
    assert_eq!(first["structured"]["status"], "suspended", "{w:#}");
    assert_eq!(
        first["structured"]["waiting_for"],
        serde_json::json!(["release.tagged"])
    );
    assert!(first["structured"].get("outputs").is_none(), "{w:#}");
    assert!(
        first["text"].as_str().unwrap().contains("`signal`"),
        "{w:#}"
    );
    let asked = w["elicitations"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{w:#}");
    assert!(
        asked[0]["message"]
            .as_str()
            .unwrap()
            .contains("approve step `review`"),
        "{w:#}"
    );
    assert!(!w["progress"].as_array().unwrap().is_empty(), "{w:#}");

    // A signal the run does not wait for is refused, naming the right one.
    assert_eq!(w["wrong"]["is_error"], true, "{w:#}");
    assert!(
        w["wrong"]["text"]
            .as_str()
            .unwrap()
            .contains("release.tagged"),
        "{w:#}"
    );

    // The right one resumes it to the end.
    assert_eq!(w["signalled"]["is_error"], false, "{w:#}");
    let events: Vec<&str> = w["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(events.last(), Some(&"run_complete"), "{events:?}");
    assert!(events.contains(&"approval_resolved"), "{events:?}");
    assert!(events.contains(&"signal"), "{events:?}");
    assert_eq!(
        w["last"]["data"]["outputs"],
        serde_json::json!({"notes": "Tides are faster.", "channel": "#releases"}),
        "{w:#}"
    );
    let published: Value = serde_json::from_str(published.trim()).unwrap();
    assert_eq!(
        published,
        serde_json::json!({"notes": "Tides are faster.", "channel": "#releases"})
    );
    assert_eq!(model.request_count(), 1, "the model is asked once");
}

#[tokio::test]
async fn the_python_sdk_runs_a_workflow_yaml_through_its_gate() {
    let Some(python) = python() else {
        return;
    };
    let yaml = "specVersion: \"1.0\"\nname: notes-digest\nversion: 1.0.0\ndescription: Digest notes.\ntrigger:\n  type: natural-language\n  input_var: NOTES\nsteps:\n  - id: digest\n    name: Digest\n    agent: agents/writer.md\n    input: $NOTES\n    goal: Digest the notes.\n    produces: outputs/digest.md\n";
    let model = FakeServer::start(vec![
        FakeReply::text("Added: dark mode."),
        FakeReply::text("Brief."),
        FakeReply::text("Design."),
        FakeReply::text(yaml),
        FakeReply::text("<file path=\"writer.md\">\n# Agent: Writer\n</file>"),
        FakeReply::text("<file path=\"digest.md\">\n# Skill: Digest\n</file>"),
        FakeReply::text("<file path=\"README.md\">\nRun it.\n</file>"),
        FakeReply::text("Verdict: PASS."),
    ])
    .await
    .unwrap();
    let dir = project(
        "wy",
        "tests/workflow_yaml/gated",
        &format!(
            "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = {:?}\napi_key_env = \"{KEY_VAR}\"\n",
            model.base_url()
        ),
    );
    let summary = client(&python, &dir, "workflow-yaml").await;
    let notes = std::fs::read_to_string(dir.join("release/NOTES.md")).unwrap_or_default();
    let promoted = std::fs::read_to_string(dir.join("workflows/notes-digest/workflow.yaml"))
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    let w = &summary["workflow_yaml"];
    // The trigger's variable is the tool's one input; the description is the
    // workflow's.
    assert_eq!(
        w["tool"]["input_schema"]["required"],
        serde_json::json!(["CHANGES"]),
        "{w:#}"
    );
    assert!(
        w["tool"]["description"]
            .as_str()
            .unwrap()
            .starts_with("Draft release notes"),
        "{w:#}"
    );
    // The gate was asked through elicitation, then the shell step published.
    assert_eq!(w["elicitations"].as_array().unwrap().len(), 1, "{w:#}");
    assert_eq!(w["result"]["is_error"], false, "{w:#}");
    assert_eq!(w["result"]["structured"]["status"], "completed", "{w:#}");
    assert_eq!(
        w["result"]["structured"]["outputs"]["draft"]["path"], "outputs/notes.md",
        "{w:#}"
    );
    assert_eq!(notes, "Added: dark mode.");
    assert!(
        w["prompts"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("create"))
    );
    // The `create` prompt leads to the `create` tool: the generator runs,
    // its workflow validates, and `promote` installs it.
    assert!(
        w["create_prompt"]
            .as_str()
            .unwrap()
            .contains("`create` tool"),
        "{w:#}"
    );
    assert_eq!(w["created"]["is_error"], false, "{w:#}");
    assert_eq!(w["created"]["structured"]["valid"], true, "{w:#}");
    assert_eq!(w["promoted"]["is_error"], false, "{w:#}");
    assert_eq!(promoted, yaml);
}

#[tokio::test]
async fn the_python_sdk_lists_agent_commands_as_prompts() {
    let Some(python) = python() else {
        return;
    };
    let dir = project(
        "agent-md",
        "fixtures/valid/agent-policy",
        "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"http://127.0.0.1:9\"\n",
    );
    // A second agent in a subfolder, with a command file and a folder.
    std::fs::create_dir_all(dir.join("agents/commands")).unwrap();
    std::fs::write(
        dir.join("agents/tester.agent.md"),
        "---\ncommands:\n  - ./commands\n---\n# Tester\n\nWrites tests.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("agents/commands/unit.md"),
        "---\ndescription: Unit tests for a target\nargument-hint: [target] [framework]\n---\nTest $1 with $2; all: $ARGUMENTS\n",
    )
    .unwrap();
    // Ignored folders are not searched.
    std::fs::create_dir_all(dir.join("node_modules/x")).unwrap();
    std::fs::write(
        dir.join("node_modules/x/hidden.agent.md"),
        "---\ncommands:\n  - {name: x, description: y, body: z}\n---\n# Hidden\n",
    )
    .unwrap();
    let summary = client(&python, &dir, "agent-md").await;
    let _ = std::fs::remove_dir_all(&dir);
    let a = &summary["agent_md"];
    let prompts = a["prompts"].as_object().unwrap();
    for name in [
        "policy.checkPolicies",
        "policy.buildPolicyIndex",
        "policy.suggestPolicyChanges",
        "tester.unit",
        "run",
        "list",
        "create",
    ] {
        assert!(prompts.contains_key(name), "{name} missing: {a:#}");
    }
    assert!(!prompts.contains_key("hidden.x"), "{a:#}");
    assert_eq!(
        prompts["policy.buildPolicyIndex"]["arguments"],
        serde_json::json!([
            {"name": "root-path", "required": true},
            {"name": "index-path", "required": true}
        ])
    );
    assert_eq!(
        prompts["tester.unit"]["arguments"],
        serde_json::json!([
            {"name": "target", "required": true},
            {"name": "framework", "required": true}
        ])
    );
    assert!(
        prompts["policy.checkPolicies"]["description"]
            .as_str()
            .unwrap()
            .starts_with("Check all policy files"),
        "{a:#}"
    );
    let text = a["text"].as_str().unwrap();
    assert!(
        text.starts_with(
            "Scan policies under policies/ and build or update the index file at INDEX.md."
        ),
        "{text}"
    );
    let missing = a["missing"].as_str().unwrap_or_default();
    assert!(
        missing.contains("needs argument 2") && missing.contains("index-path"),
        "{a:#}"
    );
}

/// A run as a task of the 2026-07-28 tasks extension, by the Python SDK (a
/// small `ClientExtension` of `client.py` claims `resultType: "task"`; the
/// SDK has no task client): `input_required` at the approval, answered
/// through `tasks/update`, then `completed` with the same structuredContent
/// as the same run as a blocking call (approved through MRTR elicitation) —
/// over stdio and over `mcp --http`.
#[tokio::test]
async fn the_python_sdk_runs_a_task_through_its_approval_over_stdio_and_http() {
    let Some(python) = python() else {
        return;
    };
    let model = FakeServer::start(vec![
        FakeReply::text("gated thing done").when(["Do the gated thing"]),
    ])
    .await
    .unwrap();
    let dir = crate::support::tmp_dir("mcp-python-tasks");
    std::fs::write(
        dir.join("gated.agent"),
        "NAME gated\nGOAL act \"Do the gated thing\" SUPERVISED HUMAN\nRUN main USING act\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = {:?}\napi_key_env = \"{KEY_VAR}\"\n",
            model.base_url()
        ),
    )
    .unwrap();
    let summary = client(&python, &dir, "tasks").await;
    let _ = std::fs::remove_dir_all(&dir);
    for transport in ["stdio", "http"] {
        let t = &summary["tasks"][transport];
        assert_eq!(t["created"]["status"], "working", "{transport}: {t:#}");
        let id = t["created"]["task_id"].as_str().unwrap();
        let asked = t["input_requests"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{transport}: {t:#}");
        assert!(
            asked[0]["key"].as_str().unwrap().starts_with("approval-"),
            "{transport}: {t:#}"
        );
        assert_eq!(asked[0]["method"], "elicitation/create");
        assert!(
            asked[0]["message"].as_str().unwrap().contains(id),
            "{transport}: {t:#}"
        );
        let statuses: Vec<&str> = t["statuses"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(statuses.contains(&"input_required"), "{statuses:?}");
        assert_eq!(statuses.last(), Some(&"completed"), "{statuses:?}");
        assert_eq!(t["task"]["is_error"], false, "{transport}: {t:#}");
        assert_eq!(t["task"]["structured"]["session_id"], id);
        assert_eq!(
            t["task"]["structured"]["outputs"]["act"], "gated thing done",
            "{transport}: {t:#}"
        );
        // The blocking call of the same run: asked once, the same result
        // but for its session id.
        assert_eq!(t["blocking_elicitations"].as_array().unwrap().len(), 1);
        let mut a = t["task"]["structured"].clone();
        let mut b = t["blocking"]["structured"].clone();
        a["session_id"] = Value::Null;
        b["session_id"] = Value::Null;
        assert_eq!(a, b, "{transport}: {t:#}");
    }
}

/// `two.agent`: two goals, the second asked slowly; `$who` (the transport)
/// tells each run's model requests apart.
const TWO: &str = "NAME two\nINPUT who\nGOAL first \"Write the first part for $who\"\nGOAL second \"Take your time over the second part for $who\"\nRUN main USING first, second\n";

/// A workspace holding `two.agent`, its model the fake `model`; the second
/// goal's answer takes `slow`.
async fn two_goals(label: &str, slow: Duration) -> (FakeServer, PathBuf) {
    let model = FakeServer::start(vec![
        FakeReply::text("first part").when(["Write the first part"]),
        FakeReply::text("second part")
            .with_latency(slow)
            .when(["Take your time"]),
    ])
    .await
    .unwrap();
    let dir = crate::support::tmp("mcp-python", label);
    std::fs::write(dir.join("two.agent"), TWO).unwrap();
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = {:?}\napi_key_env = \"{KEY_VAR}\"\n",
            model.base_url()
        ),
    )
    .unwrap();
    (model, dir)
}

/// Run `client.py` with `scenario`, answering its `WAIT <marker>` lines (on
/// stderr) with `go` (on stdin) once the fake `model` has been asked a
/// request holding the marker: the run is then mid-way, its first goal done.
async fn client_mid_run(
    python: &std::ffi::OsStr,
    dir: &std::path::Path,
    scenario: &str,
    model: &FakeServer,
) -> Value {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_python/client.py");
    let mut child = tokio::process::Command::new(python)
        .arg(&script)
        .args(["--binary", env!("CARGO_BIN_EXE_agentfile"), "--workspace"])
        .arg(dir)
        .args(["--key-var", KEY_VAR, "--key", "test-key-0123456789"])
        .args(["--scenario", scenario])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("cannot start the Python client");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let talk = async {
        let mut stderr = String::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            stderr.push_str(&line);
            stderr.push('\n');
            let Some(marker) = line.strip_prefix("WAIT ") else {
                continue;
            };
            while !model
                .requests()
                .iter()
                .any(|q| q.body.to_string().contains(marker))
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            stdin.write_all(b"go\n").await.unwrap();
            stdin.flush().await.unwrap();
        }
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).await.unwrap();
        (out, stderr, child.wait().await.unwrap())
    };
    let (out, stderr, status) = tokio::time::timeout(Duration::from_secs(120), talk)
        .await
        .expect("the Python client timed out");
    assert!(status.success(), "client.py failed: {stderr}");
    let summary: Value = serde_json::from_slice(&out)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out)));
    eprintln!("MCP Python SDK {}", summary["sdk_version"]);
    summary
}

/// The status of session `id` in `dir`'s store, by `agentfile sessions show`.
fn session_status(dir: &std::path::Path, id: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["sessions", "show", id, "--format", "json"])
        .current_dir(dir)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "sessions show: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    v["status"]
        .as_str()
        .or_else(|| v["session"]["status"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Model requests holding `text`.
fn asked(model: &FakeServer, text: &str) -> usize {
    model
        .requests()
        .iter()
        .filter(|q| q.body.to_string().contains(text))
        .count()
}

/// A task cancelled by the Python SDK through `tasks/cancel` while its second
/// goal is being asked (a 30 s answer) ends `cancelled`, and so does its
/// session in the store — over stdio and over `mcp --http`.
#[tokio::test]
async fn the_python_sdk_cancels_a_task_mid_run_over_stdio_and_http() {
    let Some(python) = python() else {
        return;
    };
    let (model, dir) = two_goals("cancel", Duration::from_secs(30)).await;
    let started = std::time::Instant::now();
    let summary = client_mid_run(&python, &dir, "cancel", &model).await;
    for transport in ["stdio", "http"] {
        let t = &summary["cancel"][transport];
        assert_eq!(t["created"]["status"], "working", "{transport}: {t:#}");
        let id = t["created"]["task_id"].as_str().unwrap();
        assert!(t["cancel"].is_object(), "{transport}: {t:#}");
        assert_eq!(t["is_error"], true, "{transport}: {t:#}");
        assert_eq!(
            t["statuses"].as_array().unwrap().last(),
            Some(&Value::from("cancelled")),
            "{transport}: {t:#}"
        );
        assert_eq!(session_status(&dir, id), "cancelled", "{transport}");
        assert_eq!(asked(&model, &format!("first part for {transport}")), 1);
    }
    // Cancelling stopped the 30 s model calls.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The server SIGKILLed while a task's second goal is being asked (the SDK's
/// stdio transport spawned it, through `sh` to learn its pid; over HTTP, the
/// client started `mcp --http`), then started again: a new Python SDK client
/// gets the same task id from `tasks/get`, still `working`, and follows it to
/// `completed` with both goals' outputs; the finished first goal is not asked
/// again, the interrupted second is.
#[tokio::test]
async fn the_python_sdk_follows_a_task_across_a_sigkilled_server_over_stdio_and_http() {
    let Some(python) = python() else {
        return;
    };
    let (model, dir) = two_goals("kill", Duration::from_secs(2)).await;
    let summary = client_mid_run(&python, &dir, "kill", &model).await;
    let _ = std::fs::remove_dir_all(&dir);
    for transport in ["stdio", "http"] {
        let t = &summary["kill"][transport];
        assert_eq!(t["created"]["status"], "working", "{transport}: {t:#}");
        let id = t["created"]["task_id"].as_str().unwrap();
        assert_eq!(t["after_restart"], "working", "{transport}: {t:#}");
        assert_eq!(
            t["statuses"].as_array().unwrap().last(),
            Some(&Value::from("completed")),
            "{transport}: {t:#}"
        );
        let s = &t["result"]["structuredContent"];
        assert_eq!(s["status"], "completed", "{transport}: {t:#}");
        assert_eq!(s["session_id"], id, "{transport}: {t:#}");
        assert_eq!(
            s["outputs"],
            serde_json::json!({"first": "first part", "second": "second part"}),
            "{transport}: {t:#}"
        );
        assert_eq!(
            asked(&model, &format!("first part for {transport}")),
            1,
            "{transport}: the finished goal was asked again"
        );
        assert!(
            asked(&model, &format!("second part for {transport}")) >= 2,
            "{transport}: the interrupted goal was not asked again"
        );
    }
}
