//! `agentfile mcp` driven by the official MCP TypeScript SDK
//! (`@modelcontextprotocol/client` 2.x) and its tasks client
//! (`@modelcontextprotocol/ext-tasks`), `tests/mcp_typescript/client.mjs`:
//! runs as tasks of the 2026-07-28 tasks extension through an approval, a
//! cancel mid-run and a server SIGKILLed mid-run, each over stdio and over
//! `mcp --http`. Models are the loopback fake provider.
//!
//! Needs `AGENTFILE_MCP_TS` (a folder whose node_modules holds both
//! packages) and `AGENTFILE_NODE` (Node >= 22); `scripts/test.sh` installs
//! them under target/. Without them the tests fail when `CI` is set and are
//! skipped with a notice otherwise.

use std::path::PathBuf;
use std::time::Duration;

use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::Value;

const KEY_VAR: &str = "AGENTFILE_MCP_TS_TEST_KEY";

/// Node and the packages' folder, or `None` (skipped, except in CI).
fn node() -> Option<(std::ffi::OsString, std::ffi::OsString)> {
    let get = |v| std::env::var_os(v).filter(|p: &std::ffi::OsString| !p.is_empty());
    match (get("AGENTFILE_NODE"), get("AGENTFILE_MCP_TS")) {
        (Some(node), Some(ts)) => Some((node, ts)),
        _ if std::env::var_os("CI").is_some() => panic!(
            "AGENTFILE_NODE or AGENTFILE_MCP_TS is not set: CI must run the MCP TypeScript SDK tests (scripts/test.sh installs them and sets both)"
        ),
        _ => {
            eprintln!(
                "skipped: set AGENTFILE_NODE and AGENTFILE_MCP_TS (scripts/test.sh does) to run the MCP TypeScript SDK tests"
            );
            None
        }
    }
}

const GATED: &str =
    "NAME gated\nGOAL act \"Do the gated thing\" SUPERVISED HUMAN\nRUN main USING act\n";
/// Two goals, the second asked slowly; `$who` (the transport) tells each
/// run's model requests apart.
const TWO: &str = "NAME two\nINPUT who\nGOAL first \"Write the first part for $who\"\nGOAL second \"Take your time over the second part for $who\"\nRUN main USING first, second\n";

/// A workspace with `gated.agent` and `two.agent`, its model the fake; the
/// second goal's answer takes `slow`.
async fn workspace(label: &str, slow: Duration) -> (FakeServer, PathBuf) {
    let model = FakeServer::start(vec![
        FakeReply::text("gated thing done").when(["Do the gated thing"]),
        FakeReply::text("first part").when(["Write the first part"]),
        FakeReply::text("second part")
            .with_latency(slow)
            .when(["Take your time"]),
    ])
    .await
    .unwrap();
    let dir = crate::support::tmp("mcp-ts", label);
    std::fs::write(dir.join("gated.agent"), GATED).unwrap();
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

/// Run `client.mjs` with `scenario`, answering its `WAIT <marker>` lines (on
/// stderr) with `go` (on stdin) once the fake `model` has been asked a
/// request holding the marker: the run is then mid-way, its first goal done.
async fn client(dir: &std::path::Path, scenario: &str, model: &FakeServer) -> Option<Value> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let (node, modules) = node()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_typescript/client.mjs");
    let mut child = tokio::process::Command::new(node)
        .arg(&script)
        .arg("--modules")
        .arg(modules)
        .args(["--binary", env!("CARGO_BIN_EXE_agentfile"), "--workspace"])
        .arg(dir)
        .args(["--key-var", KEY_VAR, "--key", "test-key-0123456789"])
        .args(["--scenario", scenario])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("cannot start the TypeScript client");
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
        .expect("the TypeScript client timed out");
    assert!(status.success(), "client.mjs failed: {stderr}");
    let summary: Value = serde_json::from_slice(&out)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out)));
    eprintln!("MCP TypeScript SDK {}", summary["sdk_version"]);
    Some(summary)
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

fn statuses(t: &Value) -> Vec<&str> {
    t["task"]["statuses"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// A gated run as a task: the ext-tasks session sees `input_required`, its
/// input handler answers the approval, the task completes with the same
/// structuredContent (but for the session id) as the same run as a blocking
/// `callTool` approved through elicitation — over stdio and HTTP.
#[tokio::test]
async fn the_typescript_sdk_runs_a_task_through_its_approval_over_stdio_and_http() {
    let (model, dir) = workspace("approval", Duration::ZERO).await;
    let Some(summary) = client(&dir, "approval", &model).await else {
        return;
    };
    let _ = std::fs::remove_dir_all(&dir);
    for transport in ["stdio", "http"] {
        let t = &summary["approval"][transport];
        assert_eq!(t["era"], "modern", "{transport}: {t:#}");
        assert_eq!(t["kind"], "task", "{transport}: {t:#}");
        let id = t["task_id"].as_str().unwrap();
        let asked = t["input_requests"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{transport}: {t:#}");
        assert_eq!(asked[0]["kind"], "elicitation", "{transport}: {t:#}");
        assert_eq!(asked[0]["task_id"], id, "{transport}: {t:#}");
        assert!(asked[0]["message"].as_str().unwrap().contains(id), "{t:#}");
        let seen = statuses(t);
        assert!(seen.contains(&"input_required"), "{transport}: {seen:?}");
        assert_eq!(seen.last(), Some(&"completed"), "{transport}: {seen:?}");
        let s = &t["task"]["result"]["structuredContent"];
        assert_eq!(s["session_id"], id, "{transport}: {t:#}");
        assert_eq!(
            s["outputs"]["act"], "gated thing done",
            "{transport}: {t:#}"
        );
        assert_eq!(
            t["blocking_elicitations"].as_array().unwrap().len(),
            1,
            "{t:#}"
        );
        let mut a = s.clone();
        let mut b = t["blocking"]["structured"].clone();
        a["session_id"] = Value::Null;
        b["session_id"] = Value::Null;
        assert_eq!(a, b, "{transport}: {t:#}");
    }
}

/// `execution.cancel()` while the second goal is being asked (a 30 s
/// answer): the task ends `cancelled`, `tasks/get` says so, and so does the
/// session in the store — over stdio and HTTP.
#[tokio::test]
async fn the_typescript_sdk_cancels_a_task_mid_run_over_stdio_and_http() {
    let (model, dir) = workspace("cancel", Duration::from_secs(30)).await;
    let started = std::time::Instant::now();
    let Some(summary) = client(&dir, "cancel", &model).await else {
        return;
    };
    for transport in ["stdio", "http"] {
        let t = &summary["cancel"][transport];
        assert_eq!(t["kind"], "task", "{transport}: {t:#}");
        let id = t["task_id"].as_str().unwrap();
        assert_eq!(t["task"]["status"], "cancelled", "{transport}: {t:#}");
        assert_eq!(t["get"], "cancelled", "{transport}: {t:#}");
        assert_eq!(session_status(&dir, id), "cancelled", "{transport}");
        assert_eq!(asked(&model, &format!("first part for {transport}")), 1);
    }
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The server SIGKILLed while the second goal is being asked (over stdio,
/// the SDK's transport's child; over HTTP, `mcp --http`), then started
/// again: a new ext-tasks session's `tasks/get` on the same id reports the
/// run `working`, and it completes with both goals' outputs; the finished
/// first goal is not asked again, the interrupted second is.
#[tokio::test]
async fn the_typescript_sdk_follows_a_task_across_a_sigkilled_server_over_stdio_and_http() {
    let (model, dir) = workspace("kill", Duration::from_secs(2)).await;
    let Some(summary) = client(&dir, "kill", &model).await else {
        return;
    };
    let _ = std::fs::remove_dir_all(&dir);
    for transport in ["stdio", "http"] {
        let t = &summary["kill"][transport];
        assert_eq!(t["kind"], "task", "{transport}: {t:#}");
        let id = t["task_id"].as_str().unwrap();
        assert_eq!(t["after_restart"], "working", "{transport}: {t:#}");
        assert_eq!(t["task"]["status"], "completed", "{transport}: {t:#}");
        let s = &t["task"]["result"]["structuredContent"];
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
