//! Remote A2A agents as tools (`[tools.<id>] a2a`), against a fake agent on
//! loopback that speaks the 1.0 JSON-RPC binding (and 0.3's) as the
//! official SDK does: the card read once per toolbox, a completed task's
//! artifacts as the result, a working task polled or streamed to its end, a
//! failed or waiting task as a tool error, a timeout cancelling the remote
//! task, the bearer token from `token_env`, and a host the policy does not
//! allow refused before any packet. Nothing here leaves 127.0.0.1.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentfile_config::{Config, ToolBinding};
use agentfile_tools::policy::Policy;
use agentfile_tools::{MemoryStore, ToolContext, ToolSet, Toolbox, ToolboxOptions};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A request the fake agent received.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    /// The JSON-RPC method, for a POST.
    method: Option<String>,
    params: Value,
    authorization: Option<String>,
    version: Option<String>,
}

/// What the fake agent answers a JSON-RPC call with.
enum Answer {
    Result(Value),
    /// Server-sent events, each the `result` of one JSON-RPC response.
    Events(Vec<Value>),
}

type Rpc = fn(&Agent, &str, &Value) -> Answer;

/// The fake agent: its card, what it saw, and how it answers.
struct Agent {
    card: Value,
    rpc: Rpc,
    seen: Mutex<Vec<Seen>>,
    /// GetTask calls so far.
    polls: AtomicUsize,
}

impl Agent {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn calls(&self, method: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.method.as_deref() == Some(method))
            .collect()
    }

    fn card_reads(&self) -> usize {
        self.seen()
            .iter()
            .filter(|s| s.path.ends_with("agent-card.json"))
            .count()
    }
}

/// Start the fake agent on a free loopback port; `card` may say
/// `{{URL}}` where the agent's own base URL goes.
async fn agent(card: Value, rpc: Rpc) -> (SocketAddr, Arc<Agent>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let card = serde_json::from_str(
        &card
            .to_string()
            .replace("{{URL}}", &format!("http://{addr}")),
    )
    .unwrap();
    let agent = Arc::new(Agent {
        card,
        rpc,
        seen: Mutex::new(Vec::new()),
        polls: AtomicUsize::new(0),
    });
    let a = agent.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            tokio::spawn(answer(sock, a.clone()));
        }
    });
    (addr, agent)
}

async fn answer(mut sock: tokio::net::TcpStream, agent: Arc<Agent>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let Ok(n) = sock.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    };
    let len: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
    let body: Value = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
    let method = body["method"].as_str().map(str::to_owned);
    agent.seen.lock().unwrap().push(Seen {
        path: path.clone(),
        method: method.clone(),
        params: body["params"].clone(),
        authorization: header("authorization"),
        version: header("a2a-version"),
    });
    let (kind, payload) = match method {
        None if path.ends_with("agent-card.json") => ("application/json", agent.card.to_string()),
        None => ("text/plain", String::new()),
        Some(m) => match (agent.rpc)(&agent, &m, &body["params"]) {
            Answer::Result(r) => (
                "application/json",
                json!({"jsonrpc": "2.0", "id": body["id"], "result": r}).to_string(),
            ),
            Answer::Events(events) => {
                let mut s = String::new();
                for e in events {
                    let r = json!({"jsonrpc": "2.0", "id": body["id"], "result": e});
                    s.push_str(&format!("data: {r}\n\n"));
                }
                ("text/event-stream", s)
            }
        },
    };
    let status = if payload.is_empty() { 404 } else { 200 };
    let resp = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    );
    let _ = sock.write_all(resp.as_bytes()).await;
    let _ = sock.shutdown().await;
}

/// A card of one skill with an input schema, answering at `{{URL}}/rpc`.
fn card(streaming: bool) -> Value {
    json!({
        "name": "Research desk",
        "description": "Answers questions about tides.",
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": "{{URL}}/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": streaming},
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [{
            "id": "summarise", "name": "Summarise", "description": "Summarises a topic.",
            "tags": ["text"],
            "inputSchema": {"type": "object", "properties": {"topic": {"type": "string"}},
                "required": ["topic"]}
        }]
    })
}

fn task(state: &str, artifacts: Value) -> Value {
    json!({"id": "task-1", "contextId": "ctx-1", "status": {"state": state}, "artifacts": artifacts})
}

fn summary() -> Value {
    json!([{"artifactId": "out", "parts": [{"data": {"summary": "high at noon"}},
        {"text": "summary: high at noon"}]}])
}

fn completes(_: &Agent, method: &str, _: &Value) -> Answer {
    match method {
        "SendMessage" => Answer::Result(json!({"task": task("TASK_STATE_COMPLETED", summary())})),
        _ => Answer::Result(json!({})),
    }
}

fn ctx() -> ToolContext {
    ToolContext {
        workspace: std::env::temp_dir(),
        agent_id: "a2a".to_owned(),
        cancel: CancellationToken::new(),
    }
}

const LOOPBACK: &str = r#"
default_deny = true
[web_fetch]
allow_domains = ["127.0.0.1"]
"#;

fn binding(addr: SocketAddr, more: impl FnOnce(&mut ToolBinding)) -> Config {
    let mut b = ToolBinding {
        a2a: Some(format!("http://{addr}")),
        ..ToolBinding::default()
    };
    more(&mut b);
    let mut config = Config::default();
    config.tools.insert("desk".to_owned(), b);
    config
}

async fn toolbox(policy: &str, config: Config, env: Vec<(String, String)>) -> Toolbox {
    let policy = Policy::parse(policy, Path::new("policy.toml")).unwrap();
    let options = ToolboxOptions {
        environment: Some(env),
        ..ToolboxOptions::default()
    };
    let tb = Toolbox::with_options(
        &config,
        policy,
        &std::env::temp_dir(),
        MemoryStore::in_memory().unwrap(),
        options,
    )
    .unwrap();
    tb.ready().await;
    tb
}

#[tokio::test]
async fn a_completed_task_gives_its_artifact_and_the_card_is_read_once() {
    let (addr, agent) = agent(card(false), completes).await;
    let tb = toolbox(LOOPBACK, binding(addr, |_| {}), Vec::new()).await;
    let def = tb
        .definitions()
        .into_iter()
        .find(|d| d.name == "desk")
        .expect("the remote agent is offered");
    assert!(
        def.description.contains("Research desk"),
        "{}",
        def.description
    );
    assert!(
        def.description.contains("Summarises a topic."),
        "{}",
        def.description
    );
    assert_eq!(def.parameters["required"], json!(["topic"]));

    for _ in 0..2 {
        let r = tb.call("desk", json!({"topic": "tides"}), &ctx()).await;
        assert!(r.denied.is_none(), "{:?}", r.denied);
        assert!(!r.output.is_error, "{}", r.output.content);
        let out: Value = serde_json::from_str(&r.output.content).unwrap();
        assert_eq!(out, json!({"summary": "high at noon"}));
    }
    assert_eq!(agent.card_reads(), 1, "the card is read once per toolbox");
    let sends = agent.calls("SendMessage");
    assert_eq!(sends.len(), 2);
    let s = &sends[0];
    assert_eq!(s.path, "/rpc");
    assert_eq!(s.version.as_deref(), Some("1.0"));
    let m = &s.params["message"];
    assert_eq!(m["role"], "ROLE_USER");
    assert_eq!(m["parts"], json!([{"data": {"topic": "tides"}}]));
    assert_eq!(m["metadata"]["skill"], "summarise");
    assert!(m["messageId"].as_str().is_some_and(|i| !i.is_empty()));
    assert!(s.authorization.is_none());
}

fn works_then_completes(agent: &Agent, method: &str, _: &Value) -> Answer {
    match method {
        "SendMessage" => Answer::Result(json!({"task": task("TASK_STATE_WORKING", json!([]))})),
        "GetTask" if agent.polls.fetch_add(1, Ordering::SeqCst) < 1 => {
            Answer::Result(task("TASK_STATE_WORKING", json!([])))
        }
        "GetTask" => Answer::Result(task("TASK_STATE_COMPLETED", summary())),
        _ => Answer::Result(json!({})),
    }
}

#[tokio::test]
async fn a_working_task_is_polled_with_get_task_until_it_completes() {
    let (addr, agent) = agent(card(false), works_then_completes).await;
    let tb = toolbox(LOOPBACK, binding(addr, |_| {}), Vec::new()).await;
    let r = tb.call("desk", json!({"topic": "tides"}), &ctx()).await;
    assert!(!r.output.is_error, "{}", r.output.content);
    assert_eq!(r.output.content, r#"{"summary":"high at noon"}"#);
    let send = &agent.calls("SendMessage")[0];
    assert_eq!(send.params["configuration"]["returnImmediately"], true);
    let polls = agent.calls("GetTask");
    assert_eq!(polls.len(), 2);
    assert_eq!(polls[0].params["id"], "task-1");
    assert!(agent.calls("CancelTask").is_empty());
}

fn streams(_: &Agent, method: &str, _: &Value) -> Answer {
    let update = |state: &str| json!({"statusUpdate": {"taskId": "task-1", "contextId": "ctx-1", "status": {"state": state}}});
    let chunk = |text: &str, append: bool| {
        json!({"artifactUpdate": {"taskId": "task-1", "contextId": "ctx-1", "append": append,
            "artifact": {"artifactId": "out", "parts": [{"text": text}]}}})
    };
    match method {
        "SendStreamingMessage" => Answer::Events(vec![
            json!({"task": task("TASK_STATE_SUBMITTED", json!([]))}),
            update("TASK_STATE_WORKING"),
            chunk("high tide at noon,", false),
            chunk("low at six.", true),
            update("TASK_STATE_COMPLETED"),
        ]),
        _ => Answer::Result(json!({})),
    }
}

#[tokio::test]
async fn a_streaming_agent_is_followed_over_server_sent_events() {
    let (addr, agent) = agent(card(true), streams).await;
    let tb = toolbox(LOOPBACK, binding(addr, |_| {}), Vec::new()).await;
    let r = tb.call("desk", json!({"topic": "tides"}), &ctx()).await;
    assert!(!r.output.is_error, "{}", r.output.content);
    assert_eq!(r.output.content, "high tide at noon,\nlow at six.");
    let sent = agent.calls("SendStreamingMessage");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].params["message"]["metadata"]["skill"], "summarise");
    assert!(agent.calls("GetTask").is_empty(), "the stream said it all");
}

fn fails(_: &Agent, method: &str, _: &Value) -> Answer {
    let said = json!({"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "the tide tables are gone"}]});
    match method {
        "SendMessage" => Answer::Result(json!({"task": {"id": "task-1",
            "status": {"state": "TASK_STATE_FAILED", "message": said}}})),
        _ => Answer::Result(json!({})),
    }
}

#[tokio::test]
async fn a_failed_task_is_a_tool_error_with_the_remote_message() {
    let (addr, _agent) = agent(card(false), fails).await;
    let tb = toolbox(LOOPBACK, binding(addr, |_| {}), Vec::new()).await;
    let r = tb.call("desk", json!({"topic": "tides"}), &ctx()).await;
    assert!(r.denied.is_none());
    assert!(r.output.is_error);
    let text = &r.output.content;
    assert!(text.starts_with("desk: "), "{text}");
    assert!(
        text.contains("task task-1 failed: the tide tables are gone"),
        "{text}"
    );
}

fn wants_input(_: &Agent, method: &str, _: &Value) -> Answer {
    match method {
        "SendMessage" => {
            Answer::Result(json!({"task": task("TASK_STATE_INPUT_REQUIRED", json!([]))}))
        }
        _ => Answer::Result(json!({})),
    }
}

#[tokio::test]
async fn a_task_that_wants_input_is_an_error_naming_it() {
    let (addr, _agent) = agent(card(false), wants_input).await;
    let tb = toolbox(LOOPBACK, binding(addr, |_| {}), Vec::new()).await;
    let r = tb.call("desk", json!({"topic": "tides"}), &ctx()).await;
    assert!(r.output.is_error);
    let text = &r.output.content;
    assert!(
        text.contains("needs input") && text.contains("task-1"),
        "{text}"
    );
}

fn never_finishes(_: &Agent, method: &str, params: &Value) -> Answer {
    match method {
        "SendMessage" => Answer::Result(json!({"task": task("TASK_STATE_WORKING", json!([]))})),
        "GetTask" => Answer::Result(task("TASK_STATE_WORKING", json!([]))),
        "CancelTask" => {
            Answer::Result(json!({"id": params["id"], "status": {"state": "TASK_STATE_CANCELED"}}))
        }
        _ => Answer::Result(json!({})),
    }
}

#[tokio::test]
async fn past_its_timeout_the_call_cancels_the_remote_task() {
    let (addr, agent) = agent(card(false), never_finishes).await;
    let config = binding(addr, |b| b.timeout = Some("1s".to_owned()));
    let tb = toolbox(LOOPBACK, config, Vec::new()).await;
    let started = std::time::Instant::now();
    let r = tb.call("desk", json!({"topic": "tides"}), &ctx()).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(r.output.is_error);
    let text = &r.output.content;
    assert!(text.contains("did not finish within 1 s"), "{text}");
    assert!(
        text.contains("its task task-1 was cancelled (CancelTask sent)"),
        "{text}"
    );
    let cancels = agent.calls("CancelTask");
    assert_eq!(cancels.len(), 1);
    assert_eq!(cancels[0].params["id"], "task-1");
}

#[tokio::test]
async fn a_call_dropped_by_its_step_timeout_still_cancels_the_remote_task() {
    let (addr, agent) = agent(card(false), never_finishes).await;
    let tb = toolbox(LOOPBACK, binding(addr, |_| {}), Vec::new()).await;
    let c = ctx();
    let call = tb.call("desk", json!({"topic": "tides"}), &c);
    assert!(
        tokio::time::timeout(Duration::from_millis(600), call)
            .await
            .is_err()
    );
    for _ in 0..50 {
        if !agent.calls("CancelTask").is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(agent.calls("CancelTask")[0].params["id"], "task-1");
}

#[tokio::test]
async fn the_bearer_token_comes_from_token_env_and_is_shown_nowhere() {
    let (addr, agent) = agent(card(false), completes).await;
    let config = binding(addr, |b| b.token_env = Some("DESK_CRED".to_owned()));
    let env = vec![
        ("DESK_CRED".to_owned(), "s3cr3t-desk".to_owned()),
        ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
    ];
    let tb = toolbox(LOOPBACK, config, env).await;
    let r = tb.call("desk", json!({"topic": "tides"}), &ctx()).await;
    assert!(!r.output.is_error, "{}", r.output.content);
    for s in agent.seen() {
        assert_eq!(
            s.authorization.as_deref(),
            Some("Bearer s3cr3t-desk"),
            "{}",
            s.path
        );
    }
    assert!(!format!("{r:?}").contains("s3cr3t"));
    assert!(!format!("{tb:?}").contains("s3cr3t"));
    assert!(!format!("{:?}", tb.definitions()).contains("s3cr3t"));
    assert!(!tb.warnings().join("\n").contains("s3cr3t"));
    // The variable is a secret: no program the model steers may read it.
    assert!(tb.env_var("DESK_CRED").is_err());
}

#[tokio::test]
async fn a_missing_token_variable_is_a_warning() {
    fn refuses(_: &Agent, _: &str, _: &Value) -> Answer {
        Answer::Result(Value::Null)
    }
    let (addr, _agent) = agent(card(false), refuses).await;
    let config = binding(addr, |b| b.token_env = Some("DESK_CRED".to_owned()));
    let tb = toolbox(LOOPBACK, config, Vec::new()).await;
    assert!(
        tb.warnings()
            .iter()
            .any(|w| w.contains("DESK_CRED, which is not set")),
        "{:?}",
        tb.warnings()
    );
}

#[tokio::test]
async fn a_host_the_policy_does_not_allow_gets_no_request_at_all() {
    let (addr, agent) = agent(card(false), completes).await;
    let elsewhere = r#"
default_deny = true
[web_fetch]
allow_domains = ["docs.rs"]
"#;
    for policy in [elsewhere, "default_deny = true\n"] {
        let tb = toolbox(policy, binding(addr, |_| {}), Vec::new()).await;
        assert!(
            tb.definitions().iter().all(|d| d.name != "desk"),
            "a remote agent the run cannot reach is not offered"
        );
        let r = tb.call("desk", json!({"topic": "tides"}), &ctx()).await;
        let d = r.denied.expect("refused by the policy");
        assert_eq!(d.tool, "desk");
        assert!(
            d.reason.contains(&format!("http://{addr}/")),
            "{}",
            d.reason
        );
        assert!(
            r.output.content.starts_with("denied by policy"),
            "{}",
            r.output.content
        );
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(agent.seen().is_empty(), "{:?}", agent.seen());
}

fn speaks_0_3(agent: &Agent, method: &str, _: &Value) -> Answer {
    let t = |state: &str| {
        json!({"kind": "task", "id": "old-1", "contextId": "c", "status": {"state": state},
            "artifacts": [{"artifactId": "a", "parts": [{"kind": "data", "data": {"ok": true}}]}]})
    };
    match method {
        "message/send" => Answer::Result(t("working")),
        "tasks/get" if agent.polls.fetch_add(1, Ordering::SeqCst) < 1 => {
            Answer::Result(t("working"))
        }
        "tasks/get" => Answer::Result(t("completed")),
        _ => Answer::Result(json!({})),
    }
}

#[tokio::test]
async fn a_0_3_agent_is_spoken_to_with_message_send_and_tasks_get() {
    let old_card = json!({
        "name": "Old desk", "description": "0.3", "url": "{{URL}}/a2a",
        "protocolVersion": "0.3.0", "version": "1", "capabilities": {},
        "skills": [{"id": "summarise", "name": "Summarise", "description": "", "tags": []}]
    });
    let (addr, agent) = agent(old_card, speaks_0_3).await;
    let tb = toolbox(LOOPBACK, binding(addr, |_| {}), Vec::new()).await;
    let r = tb.call("desk", json!({"topic": "tides"}), &ctx()).await;
    assert!(!r.output.is_error, "{}", r.output.content);
    assert_eq!(r.output.content, r#"{"ok":true}"#);
    let send = &agent.calls("message/send")[0];
    assert_eq!(send.path, "/a2a");
    assert_eq!(send.version.as_deref(), Some("0.3"));
    let m = &send.params["message"];
    assert_eq!(m["kind"], "message");
    assert_eq!(m["role"], "user");
    assert_eq!(
        m["parts"],
        json!([{"kind": "data", "data": {"topic": "tides"}}])
    );
    assert_eq!(m["metadata"]["skill"], "summarise");
    assert_eq!(send.params["configuration"]["blocking"], false);
    assert_eq!(agent.calls("tasks/get").len(), 2);
}
