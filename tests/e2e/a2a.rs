//! `agentfile a2a` (CONTRACT §21) driven by the official A2A Python SDK
//! (`a2a-sdk` 1.x, `tests/a2a/client.py`): the agent card, a run to its
//! outputs, a stream of updates, an approval answered by a message on the
//! task, a cancel, a server SIGKILLed mid-run and started again, tokens and
//! the owner rule; and a 0.3 client's `message/send` as raw JSON, with the
//! JSON-RPC errors of bad requests. Models are the loopback fake provider.
//!
//! Needs `AGENTFILE_PY`, the python of a virtual environment with `a2a-sdk`
//! installed (`scripts/test.sh` makes one at `target/py-mcp`). Without it
//! the SDK tests fail when `CI` is set — CI must not skip them silently —
//! and are skipped with a notice otherwise. The official JavaScript SDK
//! (`@a2a-js/sdk` 1.x, `tests/a2a/client.mjs`) runs and streams a skill too,
//! under the same rule, with `AGENTFILE_NODE` (Node >= 22) and
//! `AGENTFILE_A2A_JS` (the folder whose node_modules holds it).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::Dir;

const KEY_VAR: &str = "AGENTFILE_A2A_TEST_KEY";
const WAIT: Duration = Duration::from_secs(60);
const TOKEN_A: &str = "a2a-token-alpha-0123456789abcdef0123456789abcdef";
const TOKEN_B: &str = "a2a-token-bravo-0123456789abcdef0123456789abcdef";

const HELLO: &str = "NAME hello\nINPUT topic\nGOAL greet \"Say hello about $topic\"\nGOAL sign \"Sign the greeting about $topic\"\nRUN main USING greet, sign\n";
const GATED: &str =
    "NAME gated\nGOAL act \"Do the gated thing\" SUPERVISED HUMAN\nRUN main USING act\n";
const TWO: &str = "NAME two\nGOAL first \"Write the first part\"\nGOAL second \"Take your time over the second part\"\nRUN main USING first, second\n";

/// The venv's python, or `None` (the test is then skipped, except in CI).
fn python() -> Option<std::ffi::OsString> {
    let Some(python) = std::env::var_os("AGENTFILE_PY").filter(|p| !p.is_empty()) else {
        if std::env::var_os("CI").is_some() {
            panic!(
                "AGENTFILE_PY is not set: CI must run the A2A Python SDK tests (scripts/test.sh makes the venv and sets it)"
            );
        }
        eprintln!(
            "skipped: set AGENTFILE_PY to a python with `a2a-sdk` 1.x (scripts/test.sh does) to run the A2A SDK tests"
        );
        return None;
    };
    Some(python)
}

/// Node and the JavaScript SDK's folder, or `None` (skipped, except in CI).
fn node() -> Option<(std::ffi::OsString, std::ffi::OsString)> {
    let get = |v| std::env::var_os(v).filter(|p: &std::ffi::OsString| !p.is_empty());
    match (get("AGENTFILE_NODE"), get("AGENTFILE_A2A_JS")) {
        (Some(node), Some(js)) => Some((node, js)),
        _ if std::env::var_os("CI").is_some() => panic!(
            "AGENTFILE_NODE or AGENTFILE_A2A_JS is not set: CI must run the A2A JavaScript SDK test (scripts/test.sh installs it and sets both)"
        ),
        _ => {
            eprintln!(
                "skipped: set AGENTFILE_NODE and AGENTFILE_A2A_JS (scripts/test.sh does) to run the A2A JavaScript SDK test"
            );
            None
        }
    }
}

/// The fake model: each goal answered by what it asks; the second part of
/// `two` after `slow`.
async fn fake(slow: Duration) -> FakeServer {
    FakeServer::start(vec![
        FakeReply::text("Hello, tides!").when(["Say hello about"]),
        FakeReply::text("— the harbour master").when(["Sign the greeting"]),
        FakeReply::text("gated thing done").when(["Do the gated thing"]),
        FakeReply::text("first part").when(["Write the first part"]),
        FakeReply::text("second part")
            .with_latency(slow)
            .when(["Take your time"]),
    ])
    .await
    .unwrap()
}

fn workspace(label: &str, model: &FakeServer) -> Dir {
    let d = Dir::new(&format!("a2a-{label}"));
    std::fs::write(
        d.0.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = {:?}\napi_key_env = \"{KEY_VAR}\"\n",
            model.base_url()
        ),
    )
    .unwrap();
    std::fs::write(d.0.join("hello.agent"), HELLO).unwrap();
    std::fs::write(d.0.join("gated.agent"), GATED).unwrap();
    std::fs::write(d.0.join("two.agent"), TWO).unwrap();
    d
}

/// Which listener serves the agent: `agentfile a2a --http`, or `/a2a` on
/// `agentfile mcp --http` or on the daemon's (webhooks') listener.
#[derive(Clone, Copy)]
enum Door {
    A2a,
    Mcp,
    Daemon,
}

impl Door {
    /// The A2A endpoint, if `line` of the process's stderr says where it
    /// listens.
    fn endpoint(self, line: &str) -> Option<String> {
        let (said, tail) = match self {
            Door::A2a => {
                let rest = line.strip_prefix("agentfile a2a: serving ")?;
                return Some(rest.split_whitespace().next()?.to_owned());
            }
            Door::Mcp => (line.strip_prefix("agentfile mcp: listening on ")?, "/mcp"),
            Door::Daemon => (
                line.strip_prefix("agentfile daemon: webhooks on ")?,
                "/hooks/",
            ),
        };
        Some(format!("{}/a2a", said.trim().strip_suffix(tail)?))
    }
}

/// A running server with the A2A agent and where it listens.
struct Server {
    child: tokio::process::Child,
    /// `http://127.0.0.1:PORT/a2a`
    url: String,
}

impl Server {
    /// Start it on a port the system picks (`tokens`: AGENTFILE_MCP_TOKEN),
    /// and read the address it prints.
    async fn start(ws: &Path, tokens: Option<&str>) -> Server {
        Server::start_on(Door::A2a, ws, tokens).await
    }

    /// The agent on `door`'s listener: `http://127.0.0.1:PORT/a2a` from the
    /// address the process prints.
    async fn start_on(door: Door, ws: &Path, tokens: Option<&str>) -> Server {
        let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentfile"));
        match door {
            Door::A2a => c.arg("a2a"),
            Door::Mcp => c.arg("mcp"),
            Door::Daemon => c.arg("daemon"),
        };
        c.arg("--workspace").arg(ws);
        match door {
            Door::A2a => c.args(["--http", "127.0.0.1:0", "--poll-ms", "200"]),
            Door::Mcp => c.args(["--http", "127.0.0.1:0", "--poll-ms", "200"]),
            // The daemon's listener is its webhooks' (`[daemon] webhooks`).
            Door::Daemon => &mut c,
        };
        c.current_dir(ws)
            .env(KEY_VAR, "test-key-0123456789")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("AGENTFILE_PROVIDER")
            .env_remove("AGENTFILE_MODEL")
            .env_remove("AGENTFILE_MCP_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(t) = tokens {
            c.env("AGENTFILE_MCP_TOKEN", t);
        }
        let mut child = c.spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = tokio::time::timeout(WAIT, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(url) = door.endpoint(&line) {
                    return url;
                }
                eprintln!("server: {line}");
            }
            panic!("the server ended before listening");
        })
        .await
        .expect("the server did not say where it listens");
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("server: {line}");
            }
        });
        Server { child, url }
    }

    /// SIGKILL, as a crash would.
    async fn kill(mut self) {
        self.child.start_kill().unwrap();
        let _ = self.child.wait().await;
    }
}

/// `client.py SCENARIO ARGS…` against `url` (with `token`); its summary.
async fn client(python: &std::ffi::OsStr, url: &str, token: Option<&str>, args: &[&str]) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/a2a/client.py");
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(&script).args(["--url", url]).kill_on_drop(true);
    if let Some(t) = token {
        cmd.args(["--token", t]);
    }
    cmd.args(args);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("the Python client timed out")
        .expect("cannot start the Python client");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client.py failed: {stderr}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)))
}

/// `client.mjs --scenario SCENARIO --skill SKILL --inputs INPUTS` against
/// `url`; its summary.
async fn js_client(
    (node, modules): &(std::ffi::OsString, std::ffi::OsString),
    url: &str,
    scenario: &str,
    skill: &str,
    inputs: &str,
) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/a2a/client.mjs");
    let mut cmd = tokio::process::Command::new(node);
    cmd.arg(&script)
        .arg("--modules")
        .arg(modules)
        .args(["--url", url, "--scenario", scenario, "--skill", skill])
        .args(["--inputs", inputs])
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("the JavaScript client timed out")
        .expect("cannot start the JavaScript client");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client.mjs failed: {stderr}");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{stderr}", String::from_utf8_lossy(&out.stdout)));
    assert!(v.get("error").is_none(), "{v:#}");
    v
}

/// What the store says of session `id`.
fn session_status(ws: &Path, id: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["sessions", "show", id, "--format", "json"])
        .current_dir(ws)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["status"]
        .as_str()
        .or_else(|| v["session"]["status"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Wait until the model has been asked something containing `text`.
async fn asked(model: &FakeServer, text: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !model
        .requests()
        .iter()
        .any(|q| q.body.to_string().contains(text))
    {
        assert!(tokio::time::Instant::now() < deadline, "never asked {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn data_of(artifact: &Value) -> Value {
    artifact["parts"]
        .as_array()
        .and_then(|ps| ps.iter().find_map(|p| p.get("data").cloned()))
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn the_python_sdk_discovers_the_card_and_runs_a_skill_to_its_outputs() {
    let Some(python) = python() else {
        return;
    };
    let model = fake(Duration::ZERO).await;
    let ws = workspace("run", &model);
    let server = Server::start(&ws.0, None).await;

    let card = client(&python, &server.url, None, &["card"]).await;
    eprintln!("A2A Python SDK {}", card["sdk_version"]);
    assert_eq!(card["streaming"], true, "{card:#}");
    assert_eq!(card["same_under_a2a"], true, "{card:#}");
    assert!(
        card["security_schemes"]
            .as_object()
            .is_none_or(|s| s.is_empty())
    );
    let ifaces = card["interfaces"].as_array().unwrap();
    assert!(ifaces.iter().any(|i| i["protocolVersion"] == "1.0"
        && i["protocolBinding"] == "JSONRPC"
        && i["url"] == server.url.as_str()));
    let skills = card["skills"].as_array().unwrap();
    let ids: Vec<&str> = skills.iter().filter_map(|s| s["id"].as_str()).collect();
    assert_eq!(ids, ["gated", "hello", "two"], "{card:#}");
    let hello = &skills[1];
    let d = hello["description"].as_str().unwrap();
    assert!(
        d.contains("Inputs (JSON Schema)") && d.contains("\"topic\""),
        "{d}"
    );
    assert_eq!(hello["examples"], json!([r#"{"topic":"<topic>"}"#]));
    let schemas = &card["extensions"][0]["params"]["skills"];
    assert_eq!(schemas["hello"]["required"], json!(["topic"]), "{card:#}");

    let run = client(
        &python,
        &server.url,
        None,
        &["run", "hello", r#"{"topic": "tides"}"#],
    )
    .await;
    assert_eq!(run["state"], "TASK_STATE_COMPLETED", "{run:#}");
    let outputs = &run["artifacts"][0];
    assert_eq!(outputs["name"], "outputs");
    assert_eq!(
        data_of(outputs),
        json!({"greet": "Hello, tides!", "sign": "— the harbour master"})
    );
    let texts: Vec<&str> = outputs["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(texts, ["Hello, tides!", "— the harbour master"]);
    // The task id is the session id.
    let id = run["id"].as_str().unwrap();
    assert_eq!(session_status(&ws.0, id), "completed");
    assert_eq!(run["metadata"]["skill"], "hello");
}

#[tokio::test]
async fn streaming_sends_updates_as_the_run_goes_then_the_outputs() {
    let Some(python) = python() else {
        return;
    };
    let model = fake(Duration::ZERO).await;
    let ws = workspace("stream", &model);
    let server = Server::start(&ws.0, None).await;
    let s = client(
        &python,
        &server.url,
        None,
        &["stream", "hello", r#"{"topic": "moon"}"#],
    )
    .await;
    let updates = s["updates"].as_array().unwrap_or_else(|| panic!("{s:#}"));
    let (last, before) = updates.split_last().unwrap();
    assert_eq!(last["kind"], "status", "{s:#}");
    assert_eq!(last["state"], "TASK_STATE_COMPLETED", "{s:#}");
    assert_eq!(updates[0]["kind"], "task");
    let progress: Vec<&Value> = before.iter().filter(|u| u["kind"] != "task").collect();
    assert!(
        progress.len() >= 3,
        "fewer than 3 updates before the final one: {s:#}"
    );
    let texts: Vec<String> = before
        .iter()
        .flat_map(|u| u["text"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("goal `greet` started: Say hello about moon")),
        "{texts:?}"
    );
    let artifacts: Vec<&str> = before
        .iter()
        .filter(|u| u["kind"] == "artifact")
        .filter_map(|u| u["name"].as_str())
        .collect();
    assert_eq!(artifacts, ["greet", "sign", "outputs"], "{s:#}");
    let outputs = before.iter().rfind(|u| u["kind"] == "artifact").unwrap();
    assert_eq!(data_of(&outputs["artifact"])["greet"], "Hello, tides!");
}

/// The card at `/.well-known/agent-card.json` of the listener behind `url`
/// names `url` as its 1.0 JSON-RPC interface and lists the skills; a message
/// runs `hello` to its outputs (raw JSON; and through the Python SDK when
/// there is one).
async fn card_and_run_on(door: Door, label: &str) {
    let model = fake(Duration::ZERO).await;
    let ws = workspace(label, &model);
    if let Door::Daemon = door {
        let config = ws.0.join("agent.toml");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str("\n[daemon]\nwebhooks = \"127.0.0.1:0\"\n");
        std::fs::write(&config, text).unwrap();
    }
    let server = Server::start_on(door, &ws.0, None).await;
    let base = server.url.strip_suffix("/a2a").unwrap();
    let card: Value = crate::support::http()
        .get(format!("{base}/.well-known/agent-card.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ifaces = card["supportedInterfaces"].as_array().unwrap();
    assert!(
        ifaces
            .iter()
            .any(|i| i["protocolVersion"] == "1.0" && i["url"] == server.url.as_str()),
        "{card:#}"
    );
    let ids: Vec<&str> = card["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, ["gated", "hello", "two"], "{card:#}");

    let sent = rpc(
        &server.url,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m1", "role": "ROLE_USER",
            "parts": [{"data": {"topic": "tides"}}], "metadata": {"skill": "hello"}}}})
        .to_string(),
    )
    .await;
    let task = &sent["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent:#}");
    assert_eq!(data_of(&task["artifacts"][0])["greet"], "Hello, tides!");
    let id = task["id"].as_str().unwrap();
    assert_eq!(session_status(&ws.0, id), "completed");

    let Some(python) = python() else {
        return;
    };
    let sdk = client(&python, &server.url, None, &["card"]).await;
    assert_eq!(sdk["same_under_a2a"], true, "{sdk:#}");
    let run = client(
        &python,
        &server.url,
        None,
        &["run", "hello", r#"{"topic": "tides"}"#],
    )
    .await;
    assert_eq!(run["state"], "TASK_STATE_COMPLETED", "{run:#}");
    assert_eq!(
        data_of(&run["artifacts"][0]),
        json!({"greet": "Hello, tides!", "sign": "— the harbour master"})
    );
}

#[tokio::test]
async fn the_agent_on_the_mcp_http_listener_has_its_card_and_runs_a_skill() {
    card_and_run_on(Door::Mcp, "mcp").await;
}

#[tokio::test]
async fn the_agent_on_the_daemons_listener_has_its_card_and_runs_a_skill() {
    card_and_run_on(Door::Daemon, "daemon").await;
}

#[tokio::test]
async fn the_javascript_sdk_runs_a_skill_and_streams_one() {
    let Some(node) = node() else {
        return;
    };
    let model = fake(Duration::ZERO).await;
    let ws = workspace("js", &model);
    let server = Server::start(&ws.0, None).await;

    let run = js_client(&node, &server.url, "run", "hello", r#"{"topic": "tides"}"#).await;
    eprintln!("@a2a-js/sdk {}", run["sdk_version"]);
    assert_eq!(run["state"], "TASK_STATE_COMPLETED", "{run:#}");
    let outputs = &run["artifacts"][0];
    assert_eq!(outputs["name"], "outputs");
    assert_eq!(
        data_of(outputs),
        json!({"greet": "Hello, tides!", "sign": "— the harbour master"})
    );
    let id = run["id"].as_str().unwrap();
    assert_eq!(session_status(&ws.0, id), "completed");
    assert_eq!(run["metadata"]["skill"], "hello");

    let s = js_client(
        &node,
        &server.url,
        "stream",
        "hello",
        r#"{"topic": "moon"}"#,
    )
    .await;
    let updates = s["updates"].as_array().unwrap_or_else(|| panic!("{s:#}"));
    let (last, before) = updates.split_last().unwrap();
    assert_eq!(last["kind"], "status", "{s:#}");
    assert_eq!(last["state"], "TASK_STATE_COMPLETED", "{s:#}");
    assert_eq!(updates[0]["kind"], "task", "{s:#}");
    let progress = before.iter().filter(|u| u["kind"] != "task").count();
    assert!(
        progress >= 3,
        "fewer than 3 updates before the final one: {s:#}"
    );
    let artifacts: Vec<&str> = before
        .iter()
        .filter(|u| u["kind"] == "artifact")
        .filter_map(|u| u["name"].as_str())
        .collect();
    assert_eq!(artifacts, ["greet", "sign", "outputs"], "{s:#}");
    let outputs = before.iter().rfind(|u| u["kind"] == "artifact").unwrap();
    assert_eq!(data_of(outputs)["greet"], "Hello, tides!");
}

#[tokio::test]
async fn an_approval_is_input_required_and_a_message_on_the_task_answers_it() {
    let Some(python) = python() else {
        return;
    };
    let model = fake(Duration::ZERO).await;
    let ws = workspace("approve", &model);
    let server = Server::start(&ws.0, None).await;
    let s = client(&python, &server.url, None, &["approve", "gated", "{}"]).await;
    let asked = &s["asked"];
    assert_eq!(asked["state"], "TASK_STATE_INPUT_REQUIRED", "{s:#}");
    assert_eq!(asked["status_data"][0]["input"], "approval", "{s:#}");
    assert!(
        asked["status_text"][0]
            .as_str()
            .unwrap()
            .contains("\"approve\": true"),
        "{s:#}"
    );
    let answered = &s["answered"];
    assert_eq!(
        answered["id"], asked["id"],
        "the answer is on the same task"
    );
    assert_eq!(answered["state"], "TASK_STATE_COMPLETED", "{s:#}");
    assert_eq!(
        data_of(&answered["artifacts"][0])["act"],
        "gated thing done"
    );
    let id = asked["id"].as_str().unwrap();
    assert_eq!(session_status(&ws.0, id), "completed");
    let events = crate::support::events(&ws.0, id);
    assert!(
        events.iter().any(|e| e["type"] == "approval_resolved"
            && e["data"]["approved"] == true
            && e.to_string().contains("fine by the Python client")),
        "{events:#?}"
    );
}

#[tokio::test]
async fn a_task_cancelled_mid_run_is_cancelled_in_the_store() {
    let Some(python) = python() else {
        return;
    };
    let model = fake(Duration::from_secs(30)).await;
    let ws = workspace("cancel", &model);
    let server = Server::start(&ws.0, None).await;
    let started = client(&python, &server.url, None, &["start", "two", "{}"]).await;
    assert_eq!(started["state"], "TASK_STATE_WORKING", "{started:#}");
    let id = started["id"].as_str().unwrap().to_owned();
    asked(&model, "Take your time").await;
    let c = client(&python, &server.url, None, &["cancel", &id]).await;
    assert_eq!(c["state"], "TASK_STATE_CANCELED", "{c:#}");
    assert_eq!(session_status(&ws.0, &id), "cancelled");
    // A task that ended cannot be cancelled again.
    let again = client(&python, &server.url, None, &["cancel", &id]).await;
    assert_eq!(again["type"], "TaskNotCancelableError", "{again:#}");
}

#[tokio::test]
async fn a_task_survives_a_killed_server_and_get_returns_the_resumed_result() {
    let Some(python) = python() else {
        return;
    };
    let model = fake(Duration::from_secs(3)).await;
    let ws = workspace("kill", &model);
    let server = Server::start(&ws.0, None).await;
    let started = client(&python, &server.url, None, &["start", "two", "{}"]).await;
    let id = started["id"].as_str().unwrap().to_owned();
    asked(&model, "Take your time").await;
    server.kill().await;

    let again = Server::start(&ws.0, None).await;
    let done = client(&python, &again.url, None, &["wait", &id]).await;
    assert_eq!(done["state"], "TASK_STATE_COMPLETED", "{done:#}");
    assert_eq!(
        data_of(&done["artifacts"][0]),
        json!({"first": "first part", "second": "second part"})
    );
    assert!(
        !done["seen"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "TASK_STATE_FAILED"),
        "{done:#}"
    );
    // The finished goal was not asked again; the interrupted one was.
    let reqs = model.requests();
    let count = |t: &str| {
        reqs.iter()
            .filter(|q| q.body.to_string().contains(t))
            .count()
    };
    assert_eq!(count("Write the first part"), 1);
    assert!(count("Take your time") >= 2);
    assert_eq!(session_status(&ws.0, &id), "completed");
}

#[tokio::test]
async fn tokens_guard_the_agent_and_a_task_is_only_its_owners() {
    let Some(python) = python() else {
        return;
    };
    let model = fake(Duration::ZERO).await;
    let ws = workspace("tokens", &model);
    let server = Server::start(&ws.0, Some(&format!("{TOKEN_A},{TOKEN_B}"))).await;

    // No token: 401 with the challenge, and nothing runs.
    let raw = crate::support::http()
        .post(&server.url)
        .header("content-type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 401);
    assert!(
        raw.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Bearer")
    );
    let refused = client(
        &python,
        &server.url,
        None,
        &["refused", "hello", r#"{"topic": "x"}"#],
    )
    .await;
    assert!(
        refused["error"].as_str().unwrap().contains("401"),
        "{refused:#}"
    );
    assert!(
        model.requests().is_empty(),
        "a refused request ran something"
    );

    // With one: the card names the bearer scheme and lists the skills.
    let card = client(&python, &server.url, Some(TOKEN_A), &["card"]).await;
    assert!(
        card["security_schemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"]
            .as_str()
            .is_some_and(|s| s.eq_ignore_ascii_case("bearer")),
        "{card:#}"
    );
    assert_eq!(card["skills"].as_array().unwrap().len(), 3);

    // A's task: B can neither read nor cancel it; A can.
    let a = client(
        &python,
        &server.url,
        Some(TOKEN_A),
        &["start", "gated", "{}"],
    )
    .await;
    let id = a["id"].as_str().unwrap().to_owned();
    let b_get = client(&python, &server.url, Some(TOKEN_B), &["get", &id]).await;
    assert_eq!(b_get["type"], "TaskNotFoundError", "{b_get:#}");
    let b_cancel = client(&python, &server.url, Some(TOKEN_B), &["cancel", &id]).await;
    assert_eq!(b_cancel["type"], "TaskNotFoundError", "{b_cancel:#}");
    let a_get = client(&python, &server.url, Some(TOKEN_A), &["get", &id]).await;
    assert_eq!(a_get["state"], "TASK_STATE_INPUT_REQUIRED", "{a_get:#}");
    assert_eq!(a_get["id"], id.as_str());
    assert_ne!(session_status(&ws.0, &id), "cancelled");
}

/// Hostile HTTP on the A2A endpoint: each gets its status, the server goes on.
/// A body past the line limit is 413 (its first bytes never parsed); a body
/// that stops coming is 408 after `[mcp] read_timeout`; a client that sends
/// no head at all is dropped after it; the card behind a TLS proxy names an
/// https URL; a client past `[mcp] max_streams` open streams is refused the
/// next until one closes. Then a skill still runs.
#[tokio::test]
async fn hostile_requests_get_their_status_and_the_agent_goes_on() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let model = fake(Duration::from_secs(3)).await;
    let ws = workspace("hostile", &model);
    let mut config = std::fs::read_to_string(ws.0.join("agent.toml")).unwrap();
    config.push_str("\n[mcp]\nread_timeout = \"1s\"\nmax_streams = 1\n");
    std::fs::write(ws.0.join("agent.toml"), config).unwrap();
    let server = Server::start(&ws.0, None).await;
    let url = &server.url;
    let http = crate::support::http();

    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\",\"params\":{{\"id\":\"{}\"}}}}",
        "x".repeat(20 << 20)
    );
    let r = http
        .post(url)
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await;
    match r {
        Ok(r) => assert_eq!(r.status(), 413),
        // The server may answer and close before the whole body is sent.
        Err(e) => assert!(e.is_request() || e.is_body(), "{e}"),
    }

    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/a2a")
        .to_owned();
    // A body announced and never sent.
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    s.write_all(format!("POST /a2a HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{").as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let started = std::time::Instant::now();
    let _ = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut got)).await;
    let got = String::from_utf8_lossy(&got);
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // No head at all: dropped.
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    s.write_all(b"POST /a2a HTTP/1.1\r\n").await.unwrap();
    let mut got = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut got)).await;
    assert!(closed.is_ok(), "a silent client is dropped");

    // Behind a proxy that ended TLS, the card names the https URL.
    let card: Value = http
        .get(url.replace("/a2a", "/.well-known/agent-card.json"))
        .header("x-forwarded-proto", "https")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        card.to_string().contains(&format!("https://{addr}/a2a")),
        "{card:#}"
    );

    // One stream open (a run whose second goal takes 3 s): the next is refused.
    let stream = |n: u32| {
        let body = json!({"jsonrpc": "2.0", "id": n, "method": "message/stream", "params": {
        "message": {"kind": "message", "messageId": format!("s{n}"), "role": "user",
            "parts": [{"kind": "data", "data": {}}], "metadata": {"skill": "two"}}}});
        http.post(url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let open = stream(1).await.unwrap();
    assert!(
        open.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"),
        "{open:?}"
    );
    let refused: Value = stream(2).await.unwrap().json().await.unwrap();
    assert_eq!(refused["error"]["code"], -32603, "{refused:#}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_streams"),
        "{refused:#}"
    );
    drop(open);
    // The server sees the client go and gives its place back (within
    // moments; a loaded machine gets a few seconds).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let again = stream(3).await.unwrap();
        let sse = again.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream");
        if sse {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a stream closed gives its place back: {:?}",
            again.text().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A skill still runs to its end (a blocking send, once the last stream's
    // place is back: until then it answers at once with the working task).
    loop {
        let sent = hello_v03(url).await;
        let state = &sent["result"]["status"]["state"];
        if state == "completed" {
            break;
        }
        assert_eq!(state, "working", "{sent:#}");
        assert!(std::time::Instant::now() < deadline, "{sent:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A 0.3 `message/send` running the `hello` skill about tides; the reply.
async fn hello_v03(url: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": "a", "method": "message/send", "params": {
    "message": {"kind": "message", "messageId": "m1", "role": "user",
        "parts": [{"kind": "data", "data": {"topic": "tides"}}],
        "metadata": {"skill": "hello"}}}});
    rpc(url, &body.to_string()).await
}

/// POST `body` to the endpoint; the JSON-RPC reply.
async fn rpc(url: &str, body: &str) -> Value {
    let r = crate::support::http()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

#[tokio::test]
async fn a_0_3_message_send_runs_and_bad_requests_get_json_rpc_errors() {
    let model = fake(Duration::ZERO).await;
    let ws = workspace("v03", &model);
    let server = Server::start(&ws.0, None).await;
    let url = &server.url;

    let sent = hello_v03(url).await;
    let task = &sent["result"];
    assert_eq!(task["kind"], "task", "{sent:#}");
    assert_eq!(task["status"]["state"], "completed", "{sent:#}");
    let parts = task["artifacts"][0]["parts"].as_array().unwrap();
    assert_eq!(parts[0]["kind"], "data");
    assert_eq!(parts[0]["data"]["greet"], "Hello, tides!");
    let got = rpc(
        url,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get",
        "params": {"id": task["id"]}})
        .to_string(),
    )
    .await;
    assert_eq!(got["result"]["status"]["state"], "completed", "{got:#}");

    // Bad requests: each its error, and the server goes on.
    let e = rpc(url, "{not json").await;
    assert_eq!(e["error"]["code"], -32700, "{e:#}");
    let e = rpc(url, r#"{"jsonrpc":"2.0","id":3,"method":"Nope"}"#).await;
    assert_eq!(e["error"]["code"], -32601, "{e:#}");
    let e = rpc(
        url,
        &json!({"jsonrpc": "2.0", "id": 4, "method": "SendMessage", "params": {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": {}}],
            "metadata": {"skill": "nope"}}}})
        .to_string(),
    )
    .await;
    assert_eq!(e["error"]["code"], -32602, "{e:#}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown skill `nope`"),
        "{e:#}"
    );
    let e = rpc(
        url,
        &json!({"jsonrpc": "2.0", "id": 5, "method": "SendMessage", "params": {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"data": {"wrong": 1}}],
            "metadata": {"skill": "hello"}}}})
        .to_string(),
    )
    .await;
    assert_eq!(e["error"]["code"], -32602, "{e:#}");
    let m = e["error"]["message"].as_str().unwrap();
    assert!(m.contains("wrong") && m.contains("JSON Schema"), "{e:#}");
    let e = rpc(url, r#"{"jsonrpc":"2.0","id":6,"method":"GetTask","params":{"id":"20260101-000000-000000000000000000000000"}}"#).await;
    assert_eq!(e["error"]["code"], -32001, "{e:#}");
    let e = rpc(
        url,
        r#"{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"x"}}"#,
    )
    .await;
    assert_eq!(e["error"]["code"], -32001, "{e:#}");
    // Still serving.
    let again = rpc(
        url,
        &json!({"jsonrpc": "2.0", "id": 8, "method": "SendMessage", "params": {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "harbours"}],
            "metadata": {"skill": "hello"}}}})
        .to_string(),
    )
    .await;
    assert_eq!(
        again["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{again:#}"
    );
}
