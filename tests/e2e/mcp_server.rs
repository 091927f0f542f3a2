//! `agentfile mcp` end to end: the real binary on stdio, spoken to by rmcp's
//! client (the way IDE hosts use it) and by raw JSON lines (for the protocol's
//! edges: negotiation, `server/discover`, malformed input, a client that
//! closes its end right after a call). Models are the loopback fake provider,
//! or this test answering `sampling/createMessage` as the host's model.

// rmcp marks sampling and logging deprecated for the 2026 protocol; the
// server speaks 2025-11-25, where they are current.
#![allow(deprecated)]

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::Dir;
use agentfile::llm::fake::{FakeReply, FakeServer};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction, ErrorData,
    GetPromptRequestParams, Implementation, JsonObject, ProgressNotificationParam, ProtocolVersion,
    SamplingMessage,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Notify;

/// The provider key variable the test workspaces name.
const KEY_VAR: &str = "AGENTFILE_MCP_SERVER_TEST_KEY";
/// The longest any one step of a test may take.
const WAIT: Duration = Duration::from_secs(60);

// ── workspaces ──────────────────────────────────────────────────────────────

fn temp_dir(label: &str) -> Dir {
    Dir::new(&format!("mcp-server-{label}"))
}

const HELLO: &str = "NAME hello\nINPUT topic\nINPUT style DEFAULT \"plain\"\nGOAL greet \"Say hello about $topic in a $style way\"\nRUN main USING greet\n";
const GATED: &str =
    "NAME gated\nGOAL act \"Do the gated thing\" SUPERVISED HUMAN\nRUN main USING act\n";
const SLOW: &str = "NAME slow\nGOAL wait \"Take your time over this\"\nRUN main USING wait\n";

/// A fake model that answers each workflow of [`workspace`] by what it is asked.
async fn fake(slow: Duration) -> FakeServer {
    FakeServer::start(vec![
        FakeReply::text("Hello, caching!").when(["Say hello"]),
        FakeReply::text("gated thing done").when(["Do the gated thing"]),
        FakeReply::text("slow answer")
            .with_latency(slow)
            .when(["Take your time"]),
    ])
    .await
    .unwrap()
}

/// A workspace with `hello.agent`, `gated.agent` and `slow.agent`, configured
/// for the fake model.
fn workspace(label: &str, fake: &FakeServer) -> Dir {
    let d = temp_dir(label);
    std::fs::write(
        d.0.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = {:?}\napi_key_env = \"{KEY_VAR}\"\n",
            fake.base_url()
        ),
    )
    .unwrap();
    std::fs::write(d.0.join("hello.agent"), HELLO).unwrap();
    std::fs::write(d.0.join("gated.agent"), GATED).unwrap();
    std::fs::write(d.0.join("slow.agent"), SLOW).unwrap();
    d
}

fn command(ws: &Path, extra: &[&str]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentfile"));
    c.arg("mcp")
        .arg("--workspace")
        .arg(ws)
        .args(["--heartbeat-ms", "300", "--poll-ms", "200"])
        .args(extra)
        .current_dir(ws)
        .env(KEY_VAR, "test-key-0123456789")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("AGENTFILE_PROVIDER")
        .env_remove("AGENTFILE_MODEL")
        .kill_on_drop(true);
    c
}

// ── the host, through rmcp's client ─────────────────────────────────────────

#[derive(Default)]
struct Seen {
    progress: Mutex<Vec<ProgressNotificationParam>>,
    logs: Mutex<Vec<Value>>,
    list_changed: AtomicUsize,
    elicitations: Mutex<Vec<String>>,
    samplings: Mutex<Vec<Value>>,
    changed: Notify,
}

/// An MCP host: declares what `caps` says, answers elicitation with `elicit`
/// (declines when `None`) and sampling with `sample`.
#[derive(Clone, Default)]
struct Host {
    caps: Value,
    elicit: Option<Value>,
    sample: Option<String>,
    /// With sampling tools: call this tool (name, arguments) before answering.
    sample_tool: Option<(String, Value)>,
    seen: Arc<Seen>,
}

impl ClientHandler for Host {
    fn get_info(&self) -> ClientConfig {
        let caps = serde_json::from_value(if self.caps.is_null() {
            json!({})
        } else {
            self.caps.clone()
        })
        .unwrap();
        ClientConfig::new(caps, Implementation::new("mcp-server-test", "1"))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.seen
            .samplings
            .lock()
            .unwrap()
            .push(serde_json::to_value(&params).unwrap());
        let has_result = params.messages.iter().any(|m| {
            m.content
                .iter()
                .any(|c| matches!(c, rmcp::model::SamplingMessageContentBlock::ToolResult(_)))
        });
        if let (Some((tool, input)), Some(_), false) =
            (&self.sample_tool, &params.tools, has_result)
        {
            return Ok(CreateMessageResult::new(
                SamplingMessage::assistant_tool_use("use-1", tool.clone(), args(input.clone())),
                "host-model".into(),
            )
            .with_stop_reason(CreateMessageResult::STOP_REASON_TOOL_USE));
        }
        let text = self.sample.clone().unwrap_or_default();
        Ok(
            CreateMessageResult::new(SamplingMessage::assistant_text(text), "host-model".into())
                .with_stop_reason(CreateMessageResult::STOP_REASON_END_TURN),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message.clone(),
            _ => String::new(),
        };
        self.seen.elicitations.lock().unwrap().push(message);
        Ok(match &self.elicit {
            Some(content) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(content.clone())
            }
            None => ElicitResult::new(ElicitationAction::Decline),
        })
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.seen.progress.lock().unwrap().push(params);
    }

    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.seen
            .logs
            .lock()
            .unwrap()
            .push(serde_json::to_value(&params).unwrap());
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.seen.list_changed.fetch_add(1, Ordering::SeqCst);
        self.seen.changed.notify_waiters();
    }
}

async fn connect(host: &Host, cmd: tokio::process::Command) -> RunningService<RoleClient, Host> {
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    tokio::time::timeout(WAIT, host.clone().serve(transport))
        .await
        .expect("initialize timed out")
        .expect("initialize failed")
}

fn args(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => panic!("arguments must be an object"),
    }
}

async fn call(client: &RunningService<RoleClient, Host>, tool: &str, a: Value) -> CallToolResult {
    tokio::time::timeout(
        WAIT,
        client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args(a))),
    )
    .await
    .unwrap_or_else(|_| panic!("{tool} timed out"))
    .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .filter_map(|v| v["text"].as_str().map(str::to_owned))
        .collect::<Vec<_>>()
        .join("\n")
}

fn structured(r: &CallToolResult) -> Value {
    r.structured_content.clone().unwrap_or(Value::Null)
}

/// Follow a session with `event` until `done`; returns every event.
async fn follow(client: &RunningService<RoleClient, Host>, id: &str, mut after: u64) -> Vec<Value> {
    let mut all = Vec::new();
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "the run did not end: {all:?}");
        let r = call(
            client,
            "event",
            json!({"session_id": id, "after_seq": after, "wait_ms": 5000}),
        )
        .await;
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
        let page = structured(&r);
        for e in page["events"].as_array().unwrap() {
            after = e["seq"].as_u64().unwrap();
            all.push(e.clone());
        }
        if page["done"] == true {
            return all;
        }
    }
}

// ── raw JSON lines ──────────────────────────────────────────────────────────

struct Raw {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    /// Everything read, in order.
    seen: Vec<Value>,
}

impl Raw {
    fn start(mut cmd: tokio::process::Command) -> Raw {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Raw {
            child,
            stdin,
            lines,
            seen: Vec::new(),
        }
    }

    async fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    async fn send_json(&mut self, v: Value) {
        self.send(&v.to_string()).await;
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next message; every line on stdout must be JSON.
    async fn next(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .expect("no message in time")
            .unwrap()?;
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried something that is not JSON ({e}): {line}"));
        self.seen.push(v.clone());
        Some(v)
    }

    /// The reply to request `id`, skipping notifications.
    async fn reply(&mut self, id: Value) -> Value {
        loop {
            let v = self.next().await.expect("stdout ended before the reply");
            if v.get("id") == Some(&id) && v.get("method").is_none() {
                return v;
            }
        }
    }

    async fn initialize(&mut self, version: &str) -> Value {
        self.send_json(json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}))
            .await;
        let r = self.reply(json!("init")).await;
        self.send_json(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        r
    }

    async fn exit_code(&mut self) -> Option<i32> {
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the server did not exit")
            .unwrap()
            .code()
    }
}

// ── negotiation and protocol edges ──────────────────────────────────────────

#[tokio::test]
async fn initialize_answers_both_protocol_versions_and_negotiates_down() {
    let dir = temp_dir("init");
    for (asked, answered) in [
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
    ] {
        let mut raw = Raw::start(command(&dir.0, &[]));
        let r = raw.initialize(asked).await;
        let result = &r["result"];
        assert_eq!(result["protocolVersion"], answered, "{r}");
        assert_eq!(result["serverInfo"]["name"], "agentfile");
        assert_eq!(result["capabilities"]["tools"]["listChanged"], true, "{r}");
        assert!(result["capabilities"]["prompts"].is_object(), "{r}");
        assert!(result["capabilities"]["logging"].is_object(), "{r}");
        // The session works at that version.
        raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)
            .await;
        let tools = raw.reply(json!(2)).await;
        assert!(
            tools["result"]["tools"].as_array().unwrap().len() >= 7,
            "{tools}"
        );
        raw.close_stdin();
        assert_eq!(raw.exit_code().await, Some(0));
    }
}

#[tokio::test]
async fn server_discover_is_answered_and_initialize_follows() {
    let dir = temp_dir("discover");
    let mut raw = Raw::start(command(&dir.0, &[]));
    // As clients of the 2026-07-28 revision probe: with _meta, and without.
    raw.send_json(
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"}}}}),
    )
    .await;
    // Since 2026-07-28 is served, discover is answered (and starts no
    // lifecycle: `initialize` may still follow).
    let r = raw.reply(json!(1)).await;
    assert!(r["result"].is_object(), "{r}");
    assert!(r["result"].to_string().contains("2026-07-28"), "{r}");
    assert!(r["result"].to_string().contains("2025-11-25"), "{r}");
    // Without the required `_meta`: invalid params, the connection stays.
    raw.send(r#"{"jsonrpc":"2.0","id":"d2","method":"server/discover"}"#)
        .await;
    let r = raw.reply(json!("d2")).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // A notification and a stray request before initialize neither hang nor close.
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}"#)
        .await;
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#)
        .await;
    let r = raw.reply(json!(3)).await;
    assert!(r["error"].is_object(), "{r}");
    raw.send(r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#)
        .await;
    let r = raw.reply(json!(4)).await;
    assert!(r["result"].is_object(), "{r}");
    let init = raw.initialize("2025-11-25").await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    raw.send(r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#)
        .await;
    let tools = raw.reply(json!(5)).await;
    assert!(tools["result"]["tools"].is_array(), "{tools}");
    raw.close_stdin();
    assert_eq!(raw.exit_code().await, Some(0));
}

#[tokio::test]
async fn malformed_input_and_unknown_tools_are_protocol_errors_bad_arguments_are_tool_errors() {
    let dir = temp_dir("malformed");
    std::fs::write(dir.0.join("hello.agent"), HELLO).unwrap();
    let mut raw = Raw::start(command(&dir.0, &[]));
    raw.initialize("2025-11-25").await;
    raw.send("this is not json").await;
    let r = raw.next().await.unwrap();
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert!(r.get("id").is_none_or(Value::is_null), "{r}");
    raw.send(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{}}}"#)
        .await;
    let r = raw.reply(json!(7)).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    raw.send(r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}"#)
        .await;
    let r = raw.reply(json!(8)).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no_such_tool"),
        "{r}"
    );
    // A misspelt field: a tool result the model can act on, naming the field.
    raw.send(r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run","arguments":{"path":"hello.agent","input":{"topic":"x"}}}}"#)
        .await;
    let r = raw.reply(json!(9)).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("`input`"),
        "{r}"
    );
    // A missing required input, and an invalid workflow: what to fix.
    raw.send(r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"run","arguments":{"path":"hello.agent"}}}"#)
        .await;
    let r = raw.reply(json!(10)).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("topic"),
        "{r}"
    );
    std::fs::write(
        dir.0.join("broken.agent"),
        "NAME broken\nGOAL g \"x\" USING nobody\nRUN m USING g\n",
    )
    .unwrap();
    raw.send(r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"run","arguments":{"path":"broken.agent"}}}"#)
        .await;
    let r = raw.reply(json!(11)).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("nobody"),
        "{r}"
    );
    raw.close_stdin();
    assert_eq!(raw.exit_code().await, Some(0));
}

// ── tools ───────────────────────────────────────────────────────────────────

#[tokio::test]
async fn tools_list_has_seven_tools_and_one_per_workflow_with_json_schemas() {
    let model = fake(Duration::ZERO).await;
    let ws = workspace("tools", &model);
    // Two workflows named alike, and one that does not validate.
    std::fs::create_dir_all(ws.0.join("other")).unwrap();
    std::fs::write(ws.0.join("other/hello.agent"), HELLO).unwrap();
    std::fs::write(
        ws.0.join("broken.agent"),
        "NAME broken\nRUN m USING nothing\n",
    )
    .unwrap();
    let host = Host::default();
    let client = connect(&host, command(&ws.0, &[])).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for fixed in [
        "run", "event", "cancel", "approve", "validate", "inspect", "list",
    ] {
        assert!(names.contains(&fixed), "{names:?}");
    }
    let workflow_tools: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| n.starts_with("run_"))
        .collect();
    assert_eq!(
        workflow_tools,
        ["run_gated", "run_hello", "run_hello_2", "run_slow"],
        "{names:?}"
    );
    for t in &tools {
        let schema = Value::Object(t.input_schema.as_ref().clone());
        assert_eq!(schema["type"], "object", "{}: {schema}", t.name);
        assert!(schema["properties"].is_object(), "{}: {schema}", t.name);
        assert!(!schema.to_string().contains("$ref"), "{}: {schema}", t.name);
        if let Some(out) = &t.output_schema {
            assert_eq!(out.get("type"), Some(&json!("object")), "{}", t.name);
        }
        assert!(
            t.description.as_deref().is_some_and(|d| d.len() > 40),
            "{}",
            t.name
        );
        assert!(t.annotations.is_some(), "{}", t.name);
    }
    let by_name = |n: &str| tools.iter().find(|t| t.name == n).unwrap();
    let hello = Value::Object(by_name("run_hello").input_schema.as_ref().clone());
    assert_eq!(hello["required"], json!(["topic"]), "{hello}");
    assert_eq!(hello["properties"]["style"]["default"], "plain", "{hello}");
    assert!(
        by_name("run_hello")
            .description
            .as_deref()
            .unwrap()
            .contains("Say hello")
    );
    for ro in ["validate", "inspect", "list", "event"] {
        let a = by_name(ro).annotations.clone().unwrap();
        assert_eq!(a.read_only_hint, Some(true), "{ro}");
    }
    assert_eq!(
        by_name("cancel")
            .annotations
            .clone()
            .unwrap()
            .destructive_hint,
        Some(false)
    );
    let run_in = Value::Object(by_name("run").input_schema.as_ref().clone());
    for field in ["path", "inputs", "wait", "resume"] {
        assert!(run_in["properties"][field].is_object(), "{run_in}");
    }
    assert!(by_name("run").output_schema.is_some());
    drop(model);
}

#[tokio::test]
async fn a_new_workflow_file_is_announced_with_list_changed() {
    let model = fake(Duration::ZERO).await;
    let ws = workspace("changed", &model);
    let host = Host::default();
    let client = connect(&host, command(&ws.0, &[])).await;
    let before = client.list_all_tools().await.unwrap();
    assert!(!before.iter().any(|t| t.name == "run_fresh"));
    let changed = host.seen.changed.notified();
    tokio::pin!(changed);
    changed.as_mut().enable();
    std::fs::write(
        ws.0.join("fresh.agent"),
        "NAME fresh\nINPUT n\nGOAL g \"Count to $n\"\nRUN m USING g\n",
    )
    .unwrap();
    tokio::time::timeout(Duration::from_secs(20), changed)
        .await
        .expect("no notifications/tools/list_changed");
    let after = client.list_all_tools().await.unwrap();
    let fresh = after
        .iter()
        .find(|t| t.name == "run_fresh")
        .expect("run_fresh");
    assert_eq!(fresh.input_schema["required"], json!(["n"]));
    // Removing it is announced too.
    std::fs::remove_file(ws.0.join("fresh.agent")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while host.seen.list_changed.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "removal not announced");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !client
            .list_all_tools()
            .await
            .unwrap()
            .iter()
            .any(|t| t.name == "run_fresh")
    );
}

#[tokio::test]
async fn run_reports_progress_with_heartbeats_and_returns_structured_outputs() {
    // The slow workflow's model takes 1.5 s: several 300 ms heartbeats.
    let model = fake(Duration::from_millis(1500)).await;
    let ws = workspace("run", &model);
    let host = Host::default();
    let client = connect(&host, command(&ws.0, &[])).await;
    let r = call(&client, "run", json!({"path": "slow.agent"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    let s = structured(&r);
    assert_eq!(s["status"], "completed", "{s}");
    assert_eq!(s["outputs"]["wait"], "slow answer", "{s}");
    assert!(s["session_id"].as_str().is_some_and(|id| !id.is_empty()));
    assert!(s["usage"]["turns"].as_u64() >= Some(1), "{s}");
    assert!(text(&r).contains("slow answer"), "{}", text(&r));
    let progress = host.seen.progress.lock().unwrap().clone();
    assert!(progress.len() >= 5, "{progress:?}");
    // Strictly increasing, each with a one-line message.
    for w in progress.windows(2) {
        assert!(w[1].progress > w[0].progress, "{progress:?}");
    }
    assert!(
        progress
            .iter()
            .all(|p| p.message.as_deref().is_some_and(|m| !m.contains('\n')))
    );
    assert!(
        progress
            .iter()
            .any(|p| p.message.as_deref().unwrap_or("").contains("still running")),
        "no heartbeat: {progress:?}"
    );
    assert!(
        progress
            .iter()
            .any(|p| p.message.as_deref().unwrap_or("").starts_with("done")),
        "{progress:?}"
    );
    // The workflow's own tool runs it the same way.
    let r = call(&client, "run_hello", json!({"topic": "caching"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(structured(&r)["outputs"]["greet"], "Hello, caching!");
    let requests = model.requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(
        last.contains("Say hello about caching in a plain way"),
        "{last}"
    );
}

#[tokio::test]
async fn wait_false_returns_at_once_and_event_follows_the_run() {
    let model = fake(Duration::from_millis(800)).await;
    let ws = workspace("event", &model);
    let host = Host::default();
    let client = connect(&host, command(&ws.0, &[])).await;
    let started = Instant::now();
    let r = call(&client, "run", json!({"path": "slow.agent", "wait": false})).await;
    assert!(
        started.elapsed() < Duration::from_millis(700),
        "did not return at once"
    );
    let s = structured(&r);
    let id = s["session_id"].as_str().unwrap().to_owned();
    assert!(
        ["queued", "running"].contains(&s["status"].as_str().unwrap()),
        "{s}"
    );
    assert!(text(&r).contains("event"), "{}", text(&r));
    let events = follow(&client, &id, 0).await;
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"run_started"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"run_complete"), "{kinds:?}");
    assert_eq!(
        events.last().unwrap()["data"]["outputs"]["wait"],
        "slow answer"
    );
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    // No progress for a call that already answered.
    assert!(host.seen.progress.lock().unwrap().is_empty());
}

#[tokio::test]
async fn cancel_tool_and_a_cancelled_call_both_stop_the_run() {
    let model = fake(Duration::from_secs(30)).await;
    let ws = workspace("cancel", &model);
    let host = Host::default();
    let client = connect(&host, command(&ws.0, &[])).await;
    // The `cancel` tool.
    let r = call(&client, "run", json!({"path": "slow.agent", "wait": false})).await;
    let id = structured(&r)["session_id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let r = call(&client, "cancel", json!({"session_id": id})).await;
    assert_eq!(structured(&r)["status"], "cancelled", "{}", text(&r));
    assert!(started.elapsed() < Duration::from_secs(10));
    let events = follow(&client, &id, 0).await;
    assert_eq!(events.last().unwrap()["type"], "run_cancelled");

    // notifications/cancelled for a waiting `run` call: rmcp's client sends it
    // when the call's future is dropped.
    let pending = client.call_tool(
        CallToolRequestParams::new("run").with_arguments(args(json!({"path": "slow.agent"}))),
    );
    let _ = tokio::time::timeout(Duration::from_millis(1500), pending).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let sessions = std::process::Command::new(env!("CARGO_BIN_EXE_agentfile"))
            .args(["sessions", "list", "--format", "json", "--workspace"])
            .arg(&ws.0)
            .current_dir(&ws.0)
            .output()
            .unwrap();
        let list: Value = serde_json::from_slice(&sessions.stdout).unwrap_or(Value::Null);
        let statuses: Vec<String> = list
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|s| s["status"].as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default();
        if statuses.len() == 2 && statuses.iter().all(|s| s == "cancelled") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cancelled call's run still runs: {statuses:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn approval_through_the_approve_tool_when_the_client_cannot_elicit() {
    let model = fake(Duration::ZERO).await;
    let ws = workspace("approve", &model);
    let host = Host::default();
    let client = connect(&host, command(&ws.0, &[])).await;
    let r = call(&client, "run", json!({"path": "gated.agent"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    let s = structured(&r);
    assert_eq!(s["status"], "waiting_approval", "{s}");
    assert!(text(&r).contains("`approve`"), "{}", text(&r));
    let id = s["session_id"].as_str().unwrap().to_owned();
    let after = s["last_seq"].as_u64().unwrap();
    assert!(model.requests().is_empty(), "the goal ran before approval");
    let r = call(
        &client,
        "approve",
        json!({"session_id": id, "approve": true, "note": "fine by me"}),
    )
    .await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    let events = follow(&client, &id, after).await;
    let resolved = events
        .iter()
        .find(|e| e["type"] == "approval_resolved")
        .unwrap();
    assert_eq!(resolved["data"]["approved"], true);
    assert_eq!(resolved["data"]["note"], "fine by me");
    assert_eq!(
        events.last().unwrap()["data"]["outputs"]["act"],
        "gated thing done"
    );
    // Nothing to approve any more.
    let r = call(
        &client,
        "approve",
        json!({"session_id": id, "approve": true}),
    )
    .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
}

#[tokio::test]
async fn approval_through_elicitation_and_back_to_the_tool_when_declined() {
    let model = fake(Duration::ZERO).await;
    let ws = workspace("elicit", &model);
    let caps = json!({"elicitation": {"form": {}}});
    let host = Host {
        caps: caps.clone(),
        elicit: Some(json!({"approve": true, "note": "ok from the form"})),
        ..Host::default()
    };
    let client = connect(&host, command(&ws.0, &[])).await;
    let r = call(&client, "run", json!({"path": "gated.agent"})).await;
    let s = structured(&r);
    assert_eq!(s["status"], "completed", "{}", text(&r));
    assert_eq!(s["outputs"]["act"], "gated thing done");
    let asked = host.seen.elicitations.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].contains("`act`"), "{asked:?}");
    let id = s["session_id"].as_str().unwrap();
    let events = follow(&client, id, 0).await;
    let resolved = events
        .iter()
        .find(|e| e["type"] == "approval_resolved")
        .unwrap();
    assert_eq!(resolved["data"]["note"], "ok from the form");

    // Rejected in the form: the run fails.
    let rejecting = Host {
        caps: caps.clone(),
        elicit: Some(json!({"approve": false})),
        ..Host::default()
    };
    let client2 = connect(&rejecting, command(&ws.0, &[])).await;
    let r = call(&client2, "run", json!({"path": "gated.agent"})).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert_eq!(structured(&r)["termination_reason"], "approval_denied");

    // Dismissed: the decision moves to the `approve` tool.
    let declining = Host {
        caps,
        elicit: None,
        ..Host::default()
    };
    let client3 = connect(&declining, command(&ws.0, &[])).await;
    let r = call(&client3, "run", json!({"path": "gated.agent"})).await;
    assert_eq!(structured(&r)["status"], "waiting_approval", "{}", text(&r));
    assert_eq!(declining.seen.elicitations.lock().unwrap().len(), 1);
    let id = structured(&r)["session_id"].as_str().unwrap().to_owned();
    call(
        &client3,
        "approve",
        json!({"session_id": id, "approve": true}),
    )
    .await;
    let events = follow(&client3, &id, 0).await;
    assert_eq!(events.last().unwrap()["type"], "run_complete");
}

#[tokio::test]
async fn sampling_runs_a_workflow_on_the_hosts_model_without_a_key() {
    let dir = temp_dir("sampling");
    std::fs::write(dir.0.join("hello.agent"), HELLO).unwrap();
    let host = Host {
        caps: json!({"sampling": {}}),
        sample: Some("Hello from the host's model".into()),
        ..Host::default()
    };
    let mut cmd = command(
        &dir.0,
        &["--provider", "mcp-sampling", "--model", "claude-sonnet-4-5"],
    );
    cmd.env_remove(KEY_VAR);
    let client = connect(&host, cmd).await;
    let r = call(&client, "run_hello", json!({"topic": "tides"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(
        structured(&r)["outputs"]["greet"],
        "Hello from the host's model"
    );
    let sampled = host.seen.samplings.lock().unwrap().clone();
    assert_eq!(sampled.len(), 1, "{sampled:?}");
    let req = &sampled[0];
    assert!(req["maxTokens"].as_u64().unwrap() > 0, "{req}");
    assert_eq!(
        req["modelPreferences"]["hints"][0]["name"], "claude-sonnet-4-5",
        "{req}"
    );
    assert!(req["systemPrompt"].as_str().is_some(), "{req}");
    assert!(
        req["messages"]
            .to_string()
            .contains("Say hello about tides"),
        "{req}"
    );
    // Without sampling tools the model is told tools are unavailable.
    assert!(req.get("tools").is_none(), "{req}");
    let id = structured(&r)["session_id"].as_str().unwrap().to_owned();
    let events = follow(&client, &id, 0).await;
    let started = &events[0];
    assert_eq!(started["data"]["provider"], "mcp-sampling");
}

/// A client with `sampling.tools` (2025-11-25) gets the goal's tools, and its
/// model's `tool_use` runs as a tool call of the goal.
#[tokio::test]
async fn sampling_with_tools_runs_the_hosts_tool_calls() {
    let dir = temp_dir("samplingtools");
    std::fs::write(dir.0.join("hello.agent"), HELLO).unwrap();
    std::fs::write(dir.0.join("notes.txt"), "the tide is high").unwrap();
    let host = Host {
        caps: json!({"sampling": {"tools": {}}}),
        sample: Some("Read it: the tide is high".into()),
        sample_tool: Some(("read".into(), json!({"path": "notes.txt"}))),
        ..Host::default()
    };
    let mut cmd = command(&dir.0, &["--provider", "mcp-sampling"]);
    cmd.env_remove(KEY_VAR);
    let client = connect(&host, cmd).await;
    let r = call(&client, "run_hello", json!({"topic": "tides"})).await;
    assert_eq!(r.is_error, Some(false), "{}", text(&r));
    assert_eq!(
        structured(&r)["outputs"]["greet"],
        "Read it: the tide is high"
    );
    let sampled = host.seen.samplings.lock().unwrap().clone();
    assert_eq!(sampled.len(), 2, "{sampled:?}");
    let tools: Vec<&str> = sampled[0]["tools"]
        .as_array()
        .expect("tools offered")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(tools.contains(&"read"), "{tools:?}");
    let second = sampled[1]["messages"].to_string();
    assert!(
        second.contains("tool_result") && second.contains("the tide is high"),
        "{second}"
    );
    let id = structured(&r)["session_id"].as_str().unwrap().to_owned();
    let events = follow(&client, &id, 0).await;
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_call" && e["data"]["tool"] == "read"),
        "{events:?}"
    );
}

#[tokio::test]
async fn sampling_without_the_capability_says_what_to_do() {
    let dir = temp_dir("nosampling");
    std::fs::write(dir.0.join("hello.agent"), HELLO).unwrap();
    let host = Host::default();
    let client = connect(&host, command(&dir.0, &["--provider", "mcp-sampling"])).await;
    let r = call(
        &client,
        "run",
        json!({"path": "hello.agent", "inputs": {"topic": "x"}}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        text(&r).contains("the MCP client does not support sampling; set a provider with an API key in the server's env block instead"),
        "{}",
        text(&r)
    );
}

#[tokio::test]
async fn a_missing_key_says_where_mcp_hosts_take_it() {
    let dir = temp_dir("nokey");
    std::fs::write(dir.0.join("hello.agent"), HELLO).unwrap();
    let host = Host::default();
    let cmd = command(
        &dir.0,
        &["--provider", "anthropic", "--model", "claude-sonnet-4-5"],
    );
    let client = connect(&host, cmd).await;
    let r = call(&client, "run_hello", json!({"topic": "x"})).await;
    assert_eq!(r.is_error, Some(true));
    let t = text(&r);
    for needle in [
        "ANTHROPIC_API_KEY",
        "\"env\"",
        "claude mcp add",
        ".cursor/mcp.json",
        ".vscode/mcp.json",
        "cline_mcp_settings.json",
    ] {
        assert!(t.contains(needle), "missing {needle}: {t}");
    }
}

#[tokio::test]
async fn run_failures_are_tool_errors_and_log_messages_that_follow_set_level() {
    let model = FakeServer::start(vec![
        FakeReply::error(400, "the model refuses").when(["Say hello"]),
    ])
    .await
    .unwrap();
    let ws = workspace("logs", &model);
    let host = Host::default();
    let client = connect(&host, command(&ws.0, &[])).await;
    let r = call(&client, "run_hello", json!({"topic": "x"})).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).contains("the model refuses"), "{}", text(&r));
    assert_eq!(structured(&r)["status"], "failed");
    let logs = host.seen.logs.lock().unwrap().clone();
    assert!(
        logs.iter().any(|l| l["level"] == "error"
            && l["data"]
                .as_str()
                .unwrap_or("")
                .contains("the model refuses")),
        "{logs:?}"
    );
    let before = logs.len();
    client
        .set_level(rmcp::model::SetLevelRequestParams::new(
            rmcp::model::LoggingLevel::Critical,
        ))
        .await
        .unwrap();
    let r = call(&client, "run_hello", json!({"topic": "y"})).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(
        host.seen.logs.lock().unwrap().len(),
        before,
        "logged below the level"
    );
}

#[tokio::test]
async fn validate_inspect_and_list() {
    let model = fake(Duration::ZERO).await;
    let ws = workspace("validate", &model);
    let host = Host::default();
    let client = connect(&host, command(&ws.0, &[])).await;
    let r = call(
        &client,
        "validate",
        json!({"source": "NAME x\nGOAL g \"do $missing\"\nRUN m USING g\n"}),
    )
    .await;
    assert_eq!(r.is_error, Some(false));
    let s = structured(&r);
    assert_eq!(s["ok"], false);
    assert_eq!(
        s["files"][0]["diagnostics"][0]["code"], "undefined-variable",
        "{s}"
    );
    assert!(text(&r).contains(":2:"), "{}", text(&r));
    let r = call(&client, "validate", json!({"path": "hello.agent"})).await;
    assert_eq!(structured(&r)["ok"], true);
    let r = call(&client, "inspect", json!({"path": "hello.agent"})).await;
    assert_eq!(structured(&r)["name"], "hello");
    let r = call(
        &client,
        "inspect",
        json!({"path": "hello.agent", "format": "mermaid"}),
    )
    .await;
    assert!(text(&r).contains("flowchart"), "{}", text(&r));
    let r = call(&client, "list", json!({})).await;
    let list = structured(&r);
    let names: Vec<&str> = list["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["gated", "hello", "slow"], "{}", text(&r));
    assert!(text(&r).contains("topic (required)"), "{}", text(&r));
}

#[tokio::test]
async fn prompts_run_list_and_create() {
    let dir = temp_dir("prompts");
    let host = Host::default();
    let client = connect(&host, command(&dir.0, &[])).await;
    let prompts = client.list_prompts(None).await.unwrap();
    let names: Vec<&str> = prompts.prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["run", "list", "create"]);
    let create = client
        .get_prompt(GetPromptRequestParams::new("create").with_arguments(args(
            json!({"task": "review a pull request", "format": "agentfile"}),
        )))
        .await
        .unwrap();
    let t = serde_json::to_value(&create.messages).unwrap().to_string();
    for needle in [
        "review a pull request",
        "`validate`",
        "GOAL",
        "CONVERGE",
        "SUPERVISED",
    ] {
        assert!(t.contains(needle), "missing {needle}: {t}");
    }
    let run = client
        .get_prompt(
            GetPromptRequestParams::new("run")
                .with_arguments(args(json!({"workflow": "hello", "inputs": "topic=tides"}))),
        )
        .await
        .unwrap();
    let t = serde_json::to_value(&run.messages).unwrap().to_string();
    assert!(t.contains("`run` tool") && t.contains("topic=tides"), "{t}");
    assert!(
        client
            .get_prompt(GetPromptRequestParams::new("nope"))
            .await
            .is_err()
    );
}

/// The run view as an MCP App: the `io.modelcontextprotocol/ui` extension
/// declared, one `ui://` resource with the app profile, self-contained (no
/// URL to fetch), and the run tools linking it.
#[tokio::test]
async fn the_run_view_is_an_mcp_app_resource_linked_from_the_run_tools() {
    let dir = temp_dir("app");
    let host = Host::default();
    let client = connect(&host, command(&dir.0, &[])).await;
    let info = client.peer_info().expect("initialized");
    let caps = serde_json::to_value(&info.capabilities).unwrap();
    assert_eq!(
        caps["extensions"]["io.modelcontextprotocol/ui"]["mimeTypes"],
        json!(["text/html;profile=mcp-app"]),
        "{caps}"
    );
    let listed = client.list_resources(None).await.unwrap();
    let r = serde_json::to_value(&listed.resources).unwrap();
    assert_eq!(r[0]["uri"], "ui://agentfile/run", "{r}");
    assert_eq!(r[0]["mimeType"], "text/html;profile=mcp-app");
    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "ui://agentfile/run",
        ))
        .await
        .unwrap();
    let page = serde_json::to_value(&read).unwrap();
    let html = page["contents"][0]["text"].as_str().unwrap();
    assert_eq!(page["contents"][0]["mimeType"], "text/html;profile=mcp-app");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "self-contained"
    );
    assert!(
        client
            .read_resource(rmcp::model::ReadResourceRequestParams::new(
                "ui://agentfile/other"
            ))
            .await
            .is_err()
    );
    let tools = client.list_all_tools().await.unwrap();
    let run = tools.iter().find(|t| t.name == "run").unwrap();
    let meta = serde_json::to_value(&run.meta).unwrap();
    assert_eq!(meta["ui"]["resourceUri"], "ui://agentfile/run", "{meta}");
}

// ── lifetime ────────────────────────────────────────────────────────────────

/// rmcp drops replies 5 s after its input ends when a handler still sends
/// notifications; a host that pipes one call and closes stdin must still get
/// the answer, and the process must exit cleanly.
#[tokio::test]
async fn a_call_survives_stdin_closing_right_after_it() {
    let model = fake(Duration::from_secs(6)).await;
    let ws = workspace("eof", &model);
    let mut raw = Raw::start(command(&ws.0, &[]));
    raw.send_json(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "1"}}}))
        .await;
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":"tok"},"name":"run","arguments":{"path":"slow.agent"}}}"#)
        .await;
    raw.close_stdin();
    let started = Instant::now();
    let reply = raw.reply(json!(2)).await;
    assert!(
        started.elapsed() > Duration::from_secs(5),
        "the model was slow; so is the answer"
    );
    assert_eq!(
        reply["result"]["structuredContent"]["status"], "completed",
        "{reply}"
    );
    assert_eq!(
        reply["result"]["structuredContent"]["outputs"]["wait"],
        "slow answer"
    );
    let progress: Vec<&Value> = raw
        .seen
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(progress.len() >= 5, "{progress:?}");
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "tok")
    );
    // Nothing after the answer, and a clean exit.
    assert!(raw.next().await.is_none());
    assert_eq!(raw.exit_code().await, Some(0));
}

/// The end of input drains: runs started with `wait: false` finish first.
#[tokio::test]
async fn the_end_of_input_lets_started_runs_finish() {
    let model = fake(Duration::from_secs(2)).await;
    let ws = workspace("drain", &model);
    let mut raw = Raw::start(command(&ws.0, &[]));
    raw.initialize("2025-11-25").await;
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"path":"slow.agent","wait":false}}}"#)
        .await;
    let r = raw.reply(json!(2)).await;
    let id = r["result"]["structuredContent"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    raw.close_stdin();
    assert_eq!(raw.exit_code().await, Some(0));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["sessions", "show", &id, "--format", "json", "--workspace"])
        .arg(&ws.0)
        .current_dir(&ws.0)
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["session"]["status"], "completed", "{shown}");
}

/// A run waiting for an approval when the input ends cannot be approved on
/// this connection any more: it stops as `waiting_approval` (for `sessions
/// approve` and `resume`) instead of keeping the process alive forever.
#[tokio::test]
async fn an_approval_nobody_can_give_any_more_ends_the_run_at_end_of_input() {
    let model = fake(Duration::ZERO).await;
    let ws = workspace("orphan", &model);
    let mut raw = Raw::start(command(&ws.0, &[]));
    raw.initialize("2025-11-25").await;
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"path":"gated.agent"}}}"#)
        .await;
    let r = raw.reply(json!(2)).await;
    assert_eq!(
        r["result"]["structuredContent"]["status"], "waiting_approval",
        "{r}"
    );
    let id = r["result"]["structuredContent"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    raw.close_stdin();
    assert_eq!(raw.exit_code().await, Some(0));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["sessions", "show", &id, "--format", "json", "--workspace"])
        .arg(&ws.0)
        .current_dir(&ws.0)
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["session"]["status"], "waiting_approval", "{shown}");
    assert!(
        model.requests().is_empty(),
        "the supervised goal ran unapproved"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn sigterm_interrupts_runs_and_leaves_them_resumable() {
    let model = fake(Duration::from_secs(30)).await;
    let ws = workspace("sigterm", &model);
    let mut raw = Raw::start(command(&ws.0, &[]));
    raw.initialize("2025-11-25").await;
    raw.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"path":"slow.agent","wait":false}}}"#)
        .await;
    let r = raw.reply(json!(2)).await;
    let id = r["result"]["structuredContent"]["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    raw.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"progressToken":3},"name":"run","arguments":{"path":"slow.agent"}}}"#)
        .await;
    // Both runs are under way (the second has reported progress) when the signal comes.
    loop {
        let m = raw.next().await.expect("stdout ended");
        if m["method"] == "notifications/progress" {
            break;
        }
    }
    let pid = raw.child.id().unwrap() as i32;
    // SAFETY: sending a signal to the child this test started.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let started = Instant::now();
    // The waiting call still gets its answer before the process ends.
    let r = raw.reply(json!(3)).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(raw.exit_code().await, Some(143));
    assert!(started.elapsed() < Duration::from_secs(10));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["sessions", "list", "--format", "json", "--workspace"])
        .arg(&ws.0)
        .current_dir(&ws.0)
        .output()
        .unwrap();
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let statuses: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["interrupted", "interrupted"], "{list}");
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == id.as_str())
    );
}

// ── host integrations ───────────────────────────────────────────────────────

/// Every ready-made host config names `agentfile` with `["mcp"]` and shows the
/// `env` block for the provider key.
#[test]
fn integration_configs_start_agentfile_mcp() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("integrations");
    let files = [
        ("claude-code/agentfile/.mcp.json", "mcpServers"),
        ("cursor/.cursor/mcp.json", "mcpServers"),
        ("cline/cline_mcp_settings.json", "mcpServers"),
        ("vscode/.vscode/mcp.json", "servers"),
    ];
    for (file, key) in files {
        let text =
            std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        let server = &v[key]["agentfile"];
        assert_eq!(server["command"], "agentfile", "{file}");
        assert_eq!(server["args"], json!(["mcp"]), "{file}");
        assert!(server["env"]["ANTHROPIC_API_KEY"].is_string(), "{file}");
        if key == "servers" {
            assert_eq!(server["type"], "stdio", "{file}");
        }
    }
    let plugin: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("claude-code/agentfile/.claude-plugin/plugin.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(plugin["name"], "agentfile");
    for cmd in ["run", "list", "create"] {
        let md =
            std::fs::read_to_string(root.join(format!("claude-code/agentfile/commands/{cmd}.md")))
                .unwrap();
        assert!(
            md.starts_with("---\n") && md.contains("description:"),
            "{cmd}.md"
        );
    }
}
