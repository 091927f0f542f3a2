//! A remote A2A agent as a tool, end to end (CONTRACT §21, issue 48): the
//! built `agentfile run` reads `[tools.desk] a2a = "http://127.0.0.1:…"`
//! from `agent.toml` and calls a fake A2A 1.0 agent on loopback — from a
//! WORKFLOW.md tool step and from a DSL goal whose model calls `desk`. The
//! bearer token comes from the variable `token_env` names and appears in no
//! event; a host the policy does not allow gets no request at all.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use agentfile::llm::fake::FakeReply;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::{KEY_VAR, agentfile, events, fake, runtime, text, tmp};

/// A request the fake agent received: path, JSON-RPC method (for a POST),
/// params and `Authorization`.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    method: Option<String>,
    params: Value,
    authorization: Option<String>,
}

type Log = Arc<Mutex<Vec<Seen>>>;

const TOKEN: &str = "desk-cred-7f3a9";

/// The fake agent: a card of one skill with an input schema, and a
/// `SendMessage` that completes at once with a data artifact (and its text
/// rendering) summarising the topic it was sent.
fn desk() -> (SocketAddr, Log) {
    runtime().block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let log: Log = Arc::default();
        let seen = log.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(answer(sock, addr, seen.clone()));
            }
        });
        (addr, log)
    })
}

async fn answer(mut sock: tokio::net::TcpStream, addr: SocketAddr, log: Log) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
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
    log.lock().unwrap().push(Seen {
        path: path.clone(),
        method: method.clone(),
        params: body["params"].clone(),
        authorization: header("authorization"),
    });
    let payload = match method.as_deref() {
        None if path == "/.well-known/agent-card.json" => json!({
            "name": "Research desk",
            "description": "Answers questions about the sea.",
            "version": "1.0.0",
            "supportedInterfaces": [{"url": format!("http://{addr}/rpc"),
                "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {"streaming": false},
            "defaultInputModes": ["application/json"],
            "defaultOutputModes": ["application/json"],
            "skills": [{"id": "summarise", "name": "Summarise",
                "description": "Summarises what is known about a topic.",
                "inputSchema": {"type": "object", "properties": {"topic": {"type": "string"}},
                    "required": ["topic"]}}]
        }),
        Some("SendMessage") => {
            let topic = body["params"]["message"]["parts"][0]["data"]["topic"]
                .as_str()
                .unwrap_or("?")
                .to_owned();
            let summary = format!("{topic}: high at noon, low at six");
            json!({"jsonrpc": "2.0", "id": body["id"], "result": {"task": {
                "id": "task-77", "contextId": "ctx-1",
                "status": {"state": "TASK_STATE_COMPLETED"},
                "artifacts": [{"artifactId": "outputs", "parts": [
                    {"data": {"summary": summary}}, {"text": summary}]}]}}})
        }
        _ => json!({"jsonrpc": "2.0", "id": body["id"],
            "error": {"code": -32601, "message": "Method not found"}}),
    };
    let payload = payload.to_string();
    let resp = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    );
    let _ = sock.write_all(resp.as_bytes()).await;
    let _ = sock.shutdown().await;
}

const WORKFLOW: &str = r#"---
name: Ask the desk
id: ask
description: Ask the research desk about a topic.
version: 1.0.0
inputs:
  type: object
  properties:
    topic: { type: string }
  required: [topic]
outputs:
  type: object
  properties:
    summary: { type: string }
steps:
  - id: ask
    kind: tool
    tool: desk
    inputs: { topic: $input.topic }
    outputs: { type: object, properties: { summary: { type: string } } }
    next: $end
timeout_ms: 60000
---
Asks a remote A2A agent.
"#;

/// A project whose `agent.toml` binds `desk` to the agent at `addr` (and
/// whose model, when it has one, is `model`), with a policy whose web rules
/// allow `allowed`.
fn project(name: &str, addr: SocketAddr, allowed: &str, model: Option<&str>) -> std::path::PathBuf {
    let dir = tmp("a2a_tool", name);
    let wf = dir.join(".workflows/ask");
    std::fs::create_dir_all(&wf).unwrap();
    std::fs::write(wf.join("WORKFLOW.md"), WORKFLOW).unwrap();
    let mut toml = format!(
        "[tools.desk]\na2a = \"http://{addr}\"\ntoken_env = \"DESK_CRED\"\ntimeout = \"30s\"\n"
    );
    if let Some(base) = model {
        toml = format!(
            "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{base}\"\napi_key_env = \"{KEY_VAR}\"\n\n{toml}"
        );
    }
    std::fs::write(dir.join("agent.toml"), toml).unwrap();
    let policy = format!("default_deny = true\n[web_fetch]\nallow_domains = [\"{allowed}\"]\n");
    std::fs::write(wf.join("policy.toml"), &policy).unwrap();
    std::fs::write(dir.join("policy.toml"), &policy).unwrap();
    dir
}

fn run(dir: &Path, args: &[&str]) -> std::process::Output {
    agentfile(dir, args, &[("DESK_CRED", TOKEN)])
}

fn session_of(o: &std::process::Output) -> (Value, String) {
    let r: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not a result ({e}):\n{}", text(o)));
    let id = r["session_id"].as_str().unwrap_or_default().to_owned();
    (r, id)
}

#[test]
fn a_workflow_md_step_calls_the_remote_agent_with_the_token_and_reads_its_artifact() {
    let (addr, log) = desk();
    let dir = project("step", addr, "127.0.0.1", None);
    let o = run(
        &dir,
        &[
            "run",
            ".workflows/ask",
            "--output",
            "json",
            "--input",
            "topic=tides",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (r, session) = session_of(&o);
    assert_eq!(
        r["outputs"]["summary"], "tides: high at noon, low at six",
        "{r}"
    );

    let seen = log.lock().unwrap().clone();
    let paths: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths, ["/.well-known/agent-card.json", "/rpc"]);
    let send = &seen[1];
    assert_eq!(send.method.as_deref(), Some("SendMessage"));
    assert_eq!(
        send.params["message"]["parts"][0]["data"],
        json!({"topic": "tides"})
    );
    assert_eq!(send.params["message"]["metadata"]["skill"], "summarise");
    for s in &seen {
        assert_eq!(
            s.authorization.as_deref(),
            Some(&*format!("Bearer {TOKEN}"))
        );
    }

    let all = events(&dir, &session);
    let stored = serde_json::to_string(&all).unwrap();
    assert!(!stored.contains(TOKEN), "the token is in an event");
    assert!(
        stored.contains("tides: high at noon"),
        "the result is in the events"
    );
}

#[test]
fn a_dsl_goal_is_offered_the_remote_agent_and_calls_it() {
    let (addr, log) = desk();
    let model = fake(vec![
        FakeReply::tool_call("desk", json!({"topic": "currents"})),
        FakeReply::text("The desk says: currents: high at noon, low at six."),
    ]);
    let dir = project("goal", addr, "127.0.0.1", Some(&model.base_url()));
    std::fs::write(
        dir.join("Agentfile"),
        "NAME desk-brief\nAGENT writer \"You write short briefs.\"\nGOAL brief \"Ask the research desk about currents and report what it says\" USING writer\nRUN main USING brief\n",
    )
    .unwrap();
    let o = run(&dir, &["run", "Agentfile", "--output", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (r, session) = session_of(&o);
    assert!(
        r["outputs"]["brief"]
            .as_str()
            .unwrap_or("")
            .contains("currents"),
        "{r}"
    );

    let first = &model.requests()[0].body;
    let tool = first["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["function"]["name"] == "desk"))
        .unwrap_or_else(|| panic!("desk is not offered: {first}"));
    let described = tool["function"]["description"].as_str().unwrap_or("");
    assert!(described.contains("Research desk"), "{described}");
    assert!(
        described.contains("Summarises what is known about a topic."),
        "{described}"
    );
    assert_eq!(tool["function"]["parameters"]["required"], json!(["topic"]));
    let second = model.requests()[1].body.to_string();
    assert!(
        second.contains("currents: high at noon"),
        "the tool's result reaches the model"
    );

    let sends: Vec<Seen> = log
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.method.is_some())
        .cloned()
        .collect();
    assert_eq!(sends.len(), 1);
    assert_eq!(
        sends[0].params["message"]["parts"][0]["data"],
        json!({"topic": "currents"})
    );
    let stored = serde_json::to_string(&events(&dir, &session)).unwrap();
    assert!(!stored.contains(TOKEN), "the token is in an event");
}

#[test]
fn a_host_the_policy_does_not_allow_is_refused_before_any_request() {
    let (addr, log) = desk();
    let dir = project("denied", addr, "docs.rs", None);
    let o = run(
        &dir,
        &[
            "run",
            ".workflows/ask",
            "--output",
            "json",
            "--input",
            "topic=tides",
        ],
    );
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    let (_, session) = session_of(&o);
    let all = events(&dir, &session);
    let denied: Vec<&Value> = all
        .iter()
        .filter(|e| e["type"] == "policy_denied")
        .collect();
    assert!(
        !denied.is_empty() || text(&o).contains("denied by the policy"),
        "{}",
        text(&o)
    );
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(log.lock().unwrap().is_empty(), "{:?}", log.lock().unwrap());
}

/// A running `agentfile a2a --http` (killed when dropped) and its endpoint.
struct RealAgent {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT/a2a`
    url: String,
}

impl Drop for RealAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `agentfile a2a --http 127.0.0.1:0` serving `ws`, with `token` as its
/// `AGENTFILE_MCP_TOKEN`; the URL it says it serves.
fn real_agent(ws: &Path, token: &str) -> RealAgent {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["a2a", "--http", "127.0.0.1:0"])
        .arg("--workspace")
        .arg(ws)
        .current_dir(ws)
        .env(KEY_VAR, "test-key-0123456789")
        .env("AGENTFILE_MCP_TOKEN", token)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut said = false;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if !said && let Some(rest) = line.strip_prefix("agentfile a2a: serving ") {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_owned());
                said = true;
            } else {
                eprintln!("a2a server: {line}");
            }
        }
    });
    let url = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("agentfile a2a did not say where it listens");
    RealAgent { child, url }
}

#[test]
fn a_workflow_step_calls_a_second_agentfile_serving_a2a() {
    // The remote: a DSL workflow served by `agentfile a2a`, its model the
    // loopback fake, its door guarded by a token.
    let model = fake(vec![
        FakeReply::text("Hello, tides!").when(["Say hello about tides"]),
        FakeReply::text("— the harbour master").when(["Sign the greeting"]),
    ]);
    let remote = tmp("a2a_tool", "remote-ws");
    std::fs::write(
        remote.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n",
            model.base_url()
        ),
    )
    .unwrap();
    std::fs::write(
        remote.join("hello.agent"),
        "NAME hello\nINPUT topic\nGOAL greet \"Say hello about $topic\"\nGOAL sign \"Sign the greeting about $topic\"\nRUN main USING greet, sign\n",
    )
    .unwrap();
    let server = real_agent(&remote, TOKEN);
    let port = server
        .url
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();

    // The caller: a WORKFLOW.md whose step is the remote agent's skill.
    let dir = tmp("a2a_tool", "caller");
    let wf = dir.join(".workflows/ask");
    std::fs::create_dir_all(&wf).unwrap();
    std::fs::write(
        wf.join("WORKFLOW.md"),
        WORKFLOW
            .replace(
                "    summary: { type: string }\n",
                "    greet: { type: string }\n",
            )
            .replace(
                "outputs: { type: object, properties: { summary: { type: string } } }",
                "outputs: { type: object }",
            ),
    )
    .unwrap();
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "[tools.desk]\na2a = \"{}\"\nskill = \"hello\"\ntoken_env = \"DESK_CRED\"\ntimeout = \"60s\"\n",
            server.url
        ),
    )
    .unwrap();
    std::fs::write(
        wf.join("policy.toml"),
        format!("default_deny = true\n[web_fetch]\nallow_domains = [\"127.0.0.1:{port}\"]\n"),
    )
    .unwrap();
    let o = run(
        &dir,
        &[
            "run",
            ".workflows/ask",
            "--output",
            "json",
            "--input",
            "topic=tides",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (r, session) = session_of(&o);
    assert_eq!(r["outputs"]["greet"], "Hello, tides!", "{r}");
    assert_eq!(r["outputs"]["sign"], "— the harbour master", "{r}");
    let stored = serde_json::to_string(&events(&dir, &session)).unwrap();
    assert!(!stored.contains(TOKEN), "the token is in an event");

    // Without the token the remote refuses, and the step says what to set.
    let o = agentfile(
        &dir,
        &[
            "run",
            ".workflows/ask",
            "--output",
            "json",
            "--input",
            "topic=tides",
        ],
        &[],
    );
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("401"), "{}", text(&o));
    drop(server);
}
