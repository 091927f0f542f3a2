//! `agentfile mcp` for 2026-07-28 clients and the tasks extension
//! (`io.modelcontextprotocol/tasks`), by raw JSON lines on stdio: discover,
//! stateless requests, runs as tasks read from the session store (approval,
//! cancel, a server killed and started again). Models are the loopback fake
//! provider.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::support::Dir;
use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const KEY_VAR: &str = "AGENTFILE_MCP_TASKS_TEST_KEY";
const WAIT: Duration = Duration::from_secs(60);

fn temp_dir(label: &str) -> Dir {
    Dir::new(&format!("mcp-tasks-{label}"))
}

const HELLO: &str = "NAME hello\nGOAL greet \"Say hello\"\nRUN main USING greet\n";
const GATED: &str =
    "NAME gated\nGOAL act \"Do the gated thing\" SUPERVISED HUMAN\nRUN main USING act\n";
const TWO: &str = "NAME two\nGOAL first \"Write the first part\"\nGOAL second \"Take your time over the second part\"\nRUN main USING first, second\n";

async fn fake(slow: Duration) -> FakeServer {
    FakeServer::start(vec![
        FakeReply::text("Hello!").when(["Say hello"]),
        FakeReply::text("gated thing done").when(["Do the gated thing"]),
        FakeReply::text("first part").when(["Write the first part"]),
        FakeReply::text("second part")
            .with_latency(slow)
            .when(["Take your time"]),
    ])
    .await
    .unwrap()
}

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
    std::fs::write(d.0.join("two.agent"), TWO).unwrap();
    d
}

fn command(ws: &Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentfile"));
    c.arg("mcp")
        .arg("--workspace")
        .arg(ws)
        .args(["--heartbeat-ms", "300", "--poll-ms", "200"])
        .current_dir(ws)
        .env(KEY_VAR, "test-key-0123456789")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("AGENTFILE_PROVIDER")
        .env_remove("AGENTFILE_MODEL")
        .kill_on_drop(true);
    c
}

struct Raw {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
    /// Notifications read while waiting for replies.
    notes: Vec<Value>,
}

/// The `_meta` of a 2026-07-28 request; `tasks`: the client declares the
/// tasks extension.
fn meta(tasks: bool) -> Value {
    let caps = if tasks {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    meta_with(caps)
}

fn meta_with(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "raw26", "version": "1"}
    })
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
            next_id: 0,
            notes: Vec::new(),
        }
    }

    async fn send_json(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(v.to_string().as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    async fn reply(&mut self, id: &Value) -> Value {
        loop {
            let line = tokio::time::timeout(WAIT, self.lines.next_line())
                .await
                .expect("no message in time")
                .unwrap()
                .expect("stdout ended before the reply");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id") == Some(id) && v.get("method").is_none() {
                return v;
            }
            if v.get("id").is_none() && v.get("method").is_some() {
                self.notes.push(v);
            }
        }
    }

    /// The first `notifications/tasks` for task `id` with `status`, read so
    /// far or next.
    async fn task_note(&mut self, id: &str, status: &str) -> Value {
        let is = |v: &Value| {
            v["method"] == "notifications/tasks"
                && v["params"]["taskId"] == id
                && v["params"]["status"] == status
        };
        loop {
            if let Some(v) = self.notes.iter().find(|v| is(v)) {
                return v.clone();
            }
            let line = tokio::time::timeout(WAIT, self.lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("no {status} notification; got {:?}", self.notes))
                .unwrap()
                .expect("stdout ended");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v.get("id").is_none() && v.get("method").is_some() {
                self.notes.push(v);
            }
        }
    }

    /// Send a 2026-07-28 request (its `_meta` added to `params`) and return
    /// the reply.
    async fn request(&mut self, method: &str, params: Value, tasks: bool) -> Value {
        self.request_as(method, params, meta(tasks)).await
    }

    async fn request_as(&mut self, method: &str, mut params: Value, meta: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        params["_meta"] = meta;
        self.send_json(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.reply(&id).await
    }

    async fn get(&mut self, task: &str) -> Value {
        self.request("tasks/get", json!({"taskId": task}), true)
            .await
    }

    /// Poll `tasks/get` until the task's status is not `working`.
    async fn settle(&mut self, task: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let r = self.get(task).await;
            assert!(r["result"].is_object(), "{r}");
            if r["result"]["status"] != "working" {
                return r["result"].clone();
            }
            assert!(tokio::time::Instant::now() < deadline, "still working: {r}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn exit_code(&mut self) -> Option<i32> {
        self.stdin = None;
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the server did not exit")
            .unwrap()
            .code()
    }
}

fn session_status(ws: &Path, id: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["sessions", "show", id, "--format", "json"])
        .current_dir(ws)
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

#[tokio::test]
async fn discover_and_a_stateless_request_are_answered() {
    let f = fake(Duration::ZERO).await;
    let ws = workspace("stateless", &f);
    let mut raw = Raw::start(command(&ws.0));
    let d = raw.request("server/discover", json!({}), false).await;
    assert!(d["result"].to_string().contains("2026-07-28"), "{d}");
    assert!(
        d["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object(),
        "{d}"
    );
    // No initialize: each request carries its version and capabilities.
    let list = raw.request("tools/list", json!({}), false).await;
    let tools = list["result"]["tools"].as_array().expect("tools");
    assert!(tools.iter().any(|t| t["name"] == "run"), "{list}");
    // A blocking call from a client without the tasks extension.
    let r = raw
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "hello.agent"}}),
            false,
        )
        .await;
    assert_eq!(
        r["result"]["structuredContent"]["status"], "completed",
        "{r}"
    );
    // tasks/* from a client that did not declare the extension.
    let g = raw
        .request("tasks/get", json!({"taskId": "nope"}), false)
        .await;
    assert!(g["error"].is_object(), "{g}");
    assert_eq!(raw.exit_code().await, Some(0));
}

#[tokio::test]
async fn a_run_as_a_task_asks_for_approval_and_completes_like_a_blocking_call() {
    let f = fake(Duration::ZERO).await;
    let ws = workspace("approve", &f);
    let mut raw = Raw::start(command(&ws.0));
    let r = raw
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "gated.agent"}}),
            true,
        )
        .await;
    let task = &r["result"];
    assert_eq!(task["resultType"], "task", "{r}");
    let id = task["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();
    assert_eq!(task["status"], "working", "{r}");
    assert!(task["pollIntervalMs"].is_u64(), "{r}");
    // Status is pushed to a subscription that asks for this task.
    let mut sub = json!({"notifications": {"taskIds": [id]}});
    sub["_meta"] = meta(true);
    raw.send_json(json!({"jsonrpc": "2.0", "id": "task-sub", "method": "subscriptions/listen", "params": sub}))
        .await;
    let waiting = raw.settle(&id).await;
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let reqs = waiting["inputRequests"].as_object().expect("inputRequests");
    let (key, form) = reqs.iter().next().unwrap();
    assert!(key.starts_with("approval-"), "{waiting}");
    assert_eq!(form["method"], "elicitation/create", "{waiting}");
    // Another id, or a made-up one: the same error.
    let unknown = raw.get("20260101-000000-000000000000000000000000").await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let u = raw
        .request(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {key.clone(): {"action": "accept", "content": {"approve": true}}}}),
            true,
        )
        .await;
    assert!(u["result"].is_object(), "{u}");
    let done = raw.settle(&id).await;
    assert_eq!(done["status"], "completed", "{done}");
    // The status changes were pushed too, with what tasks/get says, on the
    // subscription.
    let asked = raw.task_note(&id, "input_required").await;
    assert_eq!(
        asked["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "task-sub"
    );
    assert!(
        asked["params"]["inputRequests"][key.as_str()].is_object(),
        "{asked}"
    );
    let ended = raw.task_note(&id, "completed").await;
    assert_eq!(
        ended["params"]["result"]["structuredContent"]["status"], "completed",
        "{ended}"
    );
    let structured = &done["result"]["structuredContent"];
    assert_eq!(structured["status"], "completed", "{done}");
    assert_eq!(structured["session_id"], id.as_str(), "{done}");
    // The same workflow, blocking (approved through `approve`... here: hello,
    // ungated, compared field by field with its own task).
    let blocking = raw
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "hello.agent"}}),
            false,
        )
        .await;
    let t = raw
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "hello.agent"}}),
            true,
        )
        .await;
    let tid = t["result"]["taskId"].as_str().unwrap().to_owned();
    let tdone = raw.settle(&tid).await;
    let mut a = blocking["result"]["structuredContent"].clone();
    let mut b = tdone["result"]["structuredContent"].clone();
    a["session_id"] = json!(null);
    b["session_id"] = json!(null);
    assert_eq!(a, b, "blocking {blocking}\ntask {tdone}");
    assert_eq!(raw.exit_code().await, Some(0));
}

#[tokio::test]
async fn a_cancelled_task_ends_cancelled() {
    let f = fake(Duration::from_secs(30)).await;
    let ws = workspace("cancel", &f);
    let mut raw = Raw::start(command(&ws.0));
    let r = raw
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "two.agent"}}),
            true,
        )
        .await;
    let id = r["result"]["taskId"].as_str().unwrap().to_owned();
    let c = raw
        .request("tasks/cancel", json!({"taskId": id}), true)
        .await;
    assert!(c["result"].is_object(), "{c}");
    let end = raw.settle(&id).await;
    assert_eq!(end["status"], "cancelled", "{end}");
    assert_eq!(session_status(&ws.0, &id), "cancelled");
    assert_eq!(raw.exit_code().await, Some(0));
}

/// Start `two.agent` as a task with an explicit `model`, and SIGKILL the
/// server while the second goal is being asked. Returns the task id.
async fn start_and_kill(f: &FakeServer, ws: &Path) -> String {
    let mut raw = Raw::start(command(ws));
    let r = raw
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "two.agent", "model": "m-explicit"}}),
            true,
        )
        .await;
    let id = r["result"]["taskId"].as_str().unwrap().to_owned();
    // Wait until the first goal is done and the second is being asked.
    let deadline = tokio::time::Instant::now() + WAIT;
    while !f
        .requests()
        .iter()
        .any(|q| q.body.to_string().contains("Take your time"))
    {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    raw.child.start_kill().unwrap();
    let _ = raw.child.wait().await;
    id
}

/// Every model request ran under the run's own `model`, before and after
/// the restart, and the finished goal was not asked again.
fn asked_as_started(f: &FakeServer) {
    let reqs = f.requests();
    let seconds: Vec<_> = reqs
        .iter()
        .filter(|q| q.body.to_string().contains("Take your time"))
        .collect();
    assert!(seconds.len() >= 2, "the second goal was not asked again");
    for q in &reqs {
        assert_eq!(q.body["model"], "m-explicit", "{}", q.body);
    }
    let firsts = reqs
        .iter()
        .filter(|q| q.body.to_string().contains("Write the first part"))
        .count();
    assert_eq!(firsts, 1, "the finished goal was asked again");
}

#[tokio::test]
async fn a_task_survives_a_killed_server() {
    let f = fake(Duration::from_secs(3)).await;
    let ws = workspace("kill", &f);
    let id = start_and_kill(&f, &ws.0).await;
    let mut again = Raw::start(command(&ws.0));
    let g = again.get(&id).await;
    assert_eq!(g["result"]["status"], "working", "{g}");
    let done = again.settle(&id).await;
    assert_eq!(done["status"], "completed", "{done}");
    asked_as_started(&f);
    assert_eq!(again.exit_code().await, Some(0));
}

#[tokio::test]
async fn an_interrupted_task_resumes_when_a_server_starts() {
    let f = fake(Duration::from_secs(3)).await;
    let ws = workspace("onstart", &f);
    let id = start_and_kill(&f, &ws.0).await;
    // No request at all: starting is enough.
    let mut again = Raw::start(command(&ws.0));
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let status = session_status(&ws.0, &id);
        if status == "completed" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "still {status}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    asked_as_started(&f);
    assert_eq!(again.exit_code().await, Some(0));
}

#[tokio::test]
async fn a_client_that_cannot_be_asked_gets_the_waiting_result_and_approve_completes() {
    let f = fake(Duration::ZERO).await;
    let ws = workspace("noask", &f);
    let mut raw = Raw::start(command(&ws.0));
    // 2026-07-28, no tasks extension, no elicitation: the call returns at
    // once, naming the tool that resumes the run.
    let r = raw
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "gated.agent"}}),
            false,
        )
        .await;
    let s = &r["result"]["structuredContent"];
    assert_eq!(s["status"], "waiting_approval", "{r}");
    assert_eq!(s["resume_with"], "approve", "{r}");
    let id = s["session_id"].as_str().unwrap().to_owned();
    let a = raw
        .request(
            "tools/call",
            json!({"name": "approve", "arguments": {"session_id": id, "approve": true}}),
            false,
        )
        .await;
    assert_eq!(a["result"]["isError"], false, "{a}");
    let mut after = 0;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let page = raw
            .request(
                "tools/call",
                json!({"name": "event", "arguments": {"session_id": id, "after_seq": after, "wait_ms": 2000}}),
                false,
            )
            .await;
        let p = &page["result"]["structuredContent"];
        after = p["last_seq"].as_u64().unwrap_or(after);
        if p["done"] == true {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{page}");
    }
    assert_eq!(session_status(&ws.0, &id), "completed");
    assert_eq!(raw.exit_code().await, Some(0));
}

#[tokio::test]
async fn a_blocking_call_from_an_eliciting_client_gets_input_required_and_the_retry_completes() {
    let f = fake(Duration::ZERO).await;
    let ws = workspace("mrtr", &f);
    let mut raw = Raw::start(command(&ws.0));
    let caps = meta_with(json!({"elicitation": {"form": {}}}));
    let call = json!({"name": "run", "arguments": {"path": "gated.agent"}});
    let r = raw
        .request_as("tools/call", call.clone(), caps.clone())
        .await;
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    let state = r["result"]["requestState"].as_str().unwrap().to_owned();
    let reqs = r["result"]["inputRequests"].as_object().unwrap();
    let (key, form) = reqs.iter().next().unwrap();
    assert!(key.starts_with("approval-"), "{r}");
    assert_eq!(form["method"], "elicitation/create", "{r}");
    let answer = json!({key.clone(): {"action": "accept", "content": {"approve": true}}});
    // A state that was changed is refused.
    let mut bad = call.clone();
    bad["requestState"] = json!(state.replacen('.', ".9", 1));
    bad["inputResponses"] = answer.clone();
    let t = raw.request_as("tools/call", bad, caps.clone()).await;
    assert_eq!(t["error"]["code"], -32602, "{t}");
    let mut retry = call.clone();
    retry["requestState"] = json!(state);
    retry["inputResponses"] = answer;
    let done = raw.request_as("tools/call", retry, caps).await;
    let s = &done["result"]["structuredContent"];
    assert_eq!(s["status"], "completed", "{done}");
    assert_eq!(s["outputs"]["act"], "gated thing done", "{done}");
    assert_eq!(raw.exit_code().await, Some(0));
}

#[tokio::test]
async fn a_client_declaring_tasks_at_initialize_gets_tasks_too() {
    let f = fake(Duration::ZERO).await;
    let ws = workspace("legacy", &f);
    let mut raw = Raw::start(command(&ws.0));
    raw.send_json(
        json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "clientInfo": {"name": "legacy", "version": "1"}}}),
    )
    .await;
    let init = raw.reply(&json!("init")).await;
    assert!(
        init["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object(),
        "{init}"
    );
    raw.send_json(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    raw.send_json(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "run_hello", "arguments": {}}}))
        .await;
    let r = raw.reply(&json!(1)).await;
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    let id = r["result"]["taskId"].as_str().unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut n = 1;
    loop {
        n += 1;
        raw.send_json(
            json!({"jsonrpc": "2.0", "id": n, "method": "tasks/get", "params": {"taskId": id}}),
        )
        .await;
        let g = raw.reply(&json!(n)).await;
        if g["result"]["status"] == "completed" {
            assert_eq!(
                g["result"]["result"]["structuredContent"]["outputs"]["greet"], "Hello!",
                "{g}"
            );
            break;
        }
        assert_eq!(g["result"]["status"], "working", "{g}");
        assert!(tokio::time::Instant::now() < deadline, "{g}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(raw.exit_code().await, Some(0));
}

/// A WORKFLOW.md of tools alone whose `outputs` schema its result breaks
/// (`zeta` is text, not a number).
const MISMATCH_MD: &str = r#"---
name: Mismatch
id: mismatch
description: Reads a file its schema calls a number.
version: 1.0.0
inputs: { type: object }
outputs:
  type: object
  properties:
    zeta: { type: integer }
steps:
  - id: first
    kind: tool
    tool: read
    inputs: { path: z.txt }
    next: $end
result:
  zeta: $steps.first
---
"#;

#[tokio::test]
async fn a_workflow_task_gets_the_output_schema_check_of_a_blocking_call() {
    let f = fake(Duration::ZERO).await;
    let ws = workspace("schema", &f);
    std::fs::create_dir_all(ws.0.join(".workflows/mismatch")).unwrap();
    std::fs::write(ws.0.join(".workflows/mismatch/WORKFLOW.md"), MISMATCH_MD).unwrap();
    std::fs::write(ws.0.join("z.txt"), "zed\n").unwrap();
    let mut raw = Raw::start(command(&ws.0));
    let list = raw.request("tools/list", json!({}), false).await;
    let name = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .find(|n| n.starts_with("run_") && n.contains("mismatch"))
        .unwrap_or_else(|| panic!("no run_ tool for the workflow: {list}"))
        .to_owned();
    let call = json!({"name": name, "arguments": {}});
    let blocking = raw.request("tools/call", call.clone(), false).await;
    assert_eq!(blocking["result"]["isError"], true, "{blocking}");
    let t = raw.request("tools/call", call, true).await;
    let id = t["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{t}"))
        .to_owned();
    let done = raw.settle(&id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], true, "{done}");
    // The same complaint as the blocking call's (the first block names the
    // session, which differs).
    assert_eq!(
        done["result"]["content"][1], blocking["result"]["content"][1],
        "{done}"
    );
    assert!(
        done["result"]["content"][1]["text"]
            .as_str()
            .is_some_and(|t| t.contains("do not match the workflow's `outputs` schema")),
        "{done}"
    );
    assert_eq!(raw.exit_code().await, Some(0));
}

/// A WORKFLOW.md that suspends until `go.now`, then ends with the signal's
/// payload and a file it reads.
const SUSPEND_MD: &str = r#"---
name: Hold
id: hold
description: Waits for a signal, then reads a file.
version: 1.0.0
inputs: { type: object }
outputs: { type: object }
steps:
  - id: hold
    kind: suspend
    resume:
      on: [go.now]
    next: read
  - id: read
    kind: tool
    tool: read
    inputs: { path: z.txt }
    next: $end
result:
  channel: $steps.hold.channel
  text: $steps.read
---
"#;

#[tokio::test]
async fn a_blocking_call_that_suspends_gets_input_required_and_the_retry_signals() {
    let f = fake(Duration::ZERO).await;
    let ws = workspace("mrtr-signal", &f);
    std::fs::create_dir_all(ws.0.join(".workflows/hold")).unwrap();
    std::fs::write(ws.0.join(".workflows/hold/WORKFLOW.md"), SUSPEND_MD).unwrap();
    std::fs::write(ws.0.join("z.txt"), "zed\n").unwrap();
    let mut raw = Raw::start(command(&ws.0));
    let caps = meta_with(json!({"elicitation": {"form": {}}}));
    let call = json!({"name": "run", "arguments": {"path": ".workflows/hold"}});
    let r = raw
        .request_as("tools/call", call.clone(), caps.clone())
        .await;
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    let state = r["result"]["requestState"].as_str().unwrap().to_owned();
    let reqs = r["result"]["inputRequests"].as_object().unwrap();
    let (key, form) = reqs.iter().next().unwrap();
    assert!(key.starts_with("signal-"), "{r}");
    assert_eq!(form["method"], "elicitation/create", "{r}");
    assert_eq!(
        form["params"]["requestedSchema"]["properties"]["event"]["enum"],
        json!(["go.now"]),
        "{r}"
    );
    // No answer: asked again.
    let mut empty = call.clone();
    empty["requestState"] = json!(state);
    empty["inputResponses"] = json!({});
    let again = raw.request_as("tools/call", empty, caps.clone()).await;
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    let mut retry = call.clone();
    retry["requestState"] = json!(state);
    retry["inputResponses"] = json!({key.clone(): {"action": "accept",
        "content": {"event": "go.now", "payload": "{\"channel\": \"#x\"}"}}});
    let done = raw.request_as("tools/call", retry, caps).await;
    let s = &done["result"]["structuredContent"];
    assert_eq!(s["status"], "completed", "{done}");
    assert_eq!(s["outputs"]["channel"], "#x", "{done}");
    assert_eq!(raw.exit_code().await, Some(0));
}

/// The CLI keeps a run's settings too: `sessions resume` of a killed
/// `run --model` asks the same model, and one given again wins.
#[tokio::test]
async fn sessions_resume_keeps_the_runs_model_unless_given_again() {
    let f = fake(Duration::from_secs(3)).await;
    let ws = workspace("cli", &f);
    let cli = |args: &[&str]| {
        let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentfile"));
        c.args(args)
            .current_dir(&ws.0)
            .env(KEY_VAR, "test-key-0123456789")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("AGENTFILE_PROVIDER")
            .env_remove("AGENTFILE_MODEL")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    };
    for (again, want) in [(None, "m-cli"), (Some("m-other"), "m-other")] {
        let before = f.requests().len();
        let mut run = cli(&["run", "two.agent", "--model", "m-cli", "--output", "json"])
            .spawn()
            .unwrap();
        let deadline = tokio::time::Instant::now() + WAIT;
        while !f.requests()[before..]
            .iter()
            .any(|q| q.body.to_string().contains("Take your time"))
        {
            assert!(tokio::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        run.start_kill().unwrap();
        let _ = run.wait().await;
        let list = cli(&["sessions", "list", "--format", "json"])
            .output()
            .await
            .unwrap();
        let sessions: Value = serde_json::from_slice(&list.stdout).unwrap();
        let id = sessions[0]["id"].as_str().unwrap().to_owned();
        let killed_at = f.requests().len();
        let mut args = vec!["sessions", "resume", id.as_str(), "--output", "json"];
        if let Some(m) = again {
            args.extend(["--model", m]);
        }
        let o = cli(&args).output().await.unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let after = &f.requests()[killed_at..];
        assert!(!after.is_empty());
        for q in after {
            assert_eq!(q.body["model"], want, "{}", q.body);
        }
    }
}

/// 2026-07-28 on stdio: `subscriptions/listen` is acknowledged first and
/// then carries the tool-list changes it asked for, tagged with its id (and
/// another listen that asked for prompts only hears nothing of them);
/// methods the revision removed get -32601 when a request names it, and
/// keep working for clients that negotiated an older revision.
#[tokio::test]
async fn stdio_listen_is_acknowledged_and_tagged_and_removed_methods_are_refused() {
    let f = fake(Duration::ZERO).await;
    let ws = workspace("listen", &f);
    let mut raw = Raw::start(command(&ws.0));
    let mut tools = json!({"notifications": {"toolsListChanged": true}});
    tools["_meta"] = meta(false);
    raw.send_json(json!({"jsonrpc": "2.0", "id": "tools-sub", "method": "subscriptions/listen", "params": tools}))
        .await;
    let mut prompts = json!({"notifications": {"promptsListChanged": true}});
    prompts["_meta"] = meta(false);
    raw.send_json(
        json!({"jsonrpc": "2.0", "id": 77, "method": "subscriptions/listen", "params": prompts}),
    )
    .await;
    // Removed in 2026-07-28: refused when the request names that revision.
    for method in ["ping", "logging/setLevel", "initialize"] {
        let r = raw.request(method, json!({}), false).await;
        assert_eq!(r["error"]["code"], -32601, "{method}: {r}");
    }
    // The list as it is first (the server's first scan done), so that what
    // is added next is a change to it, not part of it.
    let first = raw.request("tools/list", json!({}), false).await;
    let names: Vec<&str> = first["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools/list: {first}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"run_hello"), "{names:?}");
    assert!(
        !names.contains(&"run_added"),
        "before the change: {names:?}"
    );
    // A new workflow: the tool list changes.
    std::fs::write(ws.0.join("added.agent"), HELLO.replace("hello", "added")).unwrap();
    let key = "io.modelcontextprotocol/subscriptionId";
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let changed = raw.notes.iter().any(|n| {
            n["method"] == "notifications/tools/list_changed"
                && n["params"]["_meta"][key] == "tools-sub"
        });
        if changed {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no tagged list_changed: {:?}",
            raw.notes
        );
        // Any request reads the notifications that came before its reply.
        raw.request("tools/list", json!({}), false).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let acks: Vec<&Value> = raw
        .notes
        .iter()
        .filter(|n| n["method"] == "notifications/subscriptions/acknowledged")
        .collect();
    assert_eq!(acks.len(), 2, "{:?}", raw.notes);
    let ack = |id: Value| {
        acks.iter()
            .find(|a| a["params"]["_meta"][key] == id)
            .unwrap_or_else(|| panic!("no acknowledgement for {id}"))
    };
    assert_eq!(
        ack(json!("tools-sub"))["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    // Prompts are not announced: nothing honoured, nothing sent.
    assert_eq!(ack(json!(77))["params"]["notifications"], json!({}));
    assert!(
        !raw.notes.iter().any(|n| n["params"]["_meta"][key] == 77
            && n["method"] != "notifications/subscriptions/acknowledged"),
        "{:?}",
        raw.notes
    );
    // Each acknowledgement comes before its subscription's notifications.
    let first = raw
        .notes
        .iter()
        .position(|n| n["params"]["_meta"][key] == "tools-sub")
        .unwrap();
    assert_eq!(
        raw.notes[first]["method"],
        "notifications/subscriptions/acknowledged"
    );
    // An older client's ping still works.
    raw.send_json(json!({"jsonrpc": "2.0", "id": "old", "method": "ping"}))
        .await;
    let pong = raw.reply(&json!("old")).await;
    assert!(pong["result"].is_object(), "{pong}");
    assert_eq!(raw.exit_code().await, Some(0));
}

/// `notifications/tasks` goes only where it was asked for: a client that
/// runs a task without subscribing (even with a listen stream for the tool
/// list) hears nothing of it; a subscription names the tasks it follows, is
/// acknowledged with those of them that are the client's own, and hears their
/// state; asking without declaring the tasks extension is `-32021`.
#[tokio::test]
async fn task_status_is_pushed_only_to_a_subscription_that_asked() {
    let f = fake(Duration::ZERO).await;
    let ws = workspace("task-sub", &f);
    let mut raw = Raw::start(command(&ws.0));
    let mut tools = json!({"notifications": {"toolsListChanged": true}});
    tools["_meta"] = meta(true);
    raw.send_json(json!({"jsonrpc": "2.0", "id": "tools-only", "method": "subscriptions/listen", "params": tools}))
        .await;
    let r = raw
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "gated.agent"}}),
            true,
        )
        .await;
    let id = r["result"]["taskId"].as_str().expect("a task").to_owned();
    let waiting = raw.settle(&id).await;
    let key = waiting["inputRequests"]
        .as_object()
        .and_then(|r| r.keys().next().cloned())
        .expect("an input request");
    raw.request(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"approve": true}}}}),
        true,
    )
    .await;
    assert_eq!(raw.settle(&id).await["status"], "completed");
    // A last round trip: anything pushed during the run has been read.
    raw.request("tools/list", json!({}), true).await;
    assert!(
        !raw.notes
            .iter()
            .any(|n| n["method"] == "notifications/tasks"),
        "pushed without a subscription: {:?}",
        raw.notes
    );
    // Asked without the extension: refused, nothing subscribed.
    let mut bare = json!({"notifications": {"taskIds": [id]}});
    bare["_meta"] = meta(false);
    raw.send_json(
        json!({"jsonrpc": "2.0", "id": "bare", "method": "subscriptions/listen", "params": bare}),
    )
    .await;
    let refused = raw.reply(&json!("bare")).await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    // Subscribed: its own task is honoured (and its state sent), a made-up
    // id is not.
    let other = "20260101-000000-000000000000000000000000";
    let mut sub = json!({"notifications": {"taskIds": [id, other]}});
    sub["_meta"] = meta(true);
    raw.send_json(
        json!({"jsonrpc": "2.0", "id": "sub", "method": "subscriptions/listen", "params": sub}),
    )
    .await;
    let done = raw.task_note(&id, "completed").await;
    let sid = "io.modelcontextprotocol/subscriptionId";
    assert_eq!(done["params"]["_meta"][sid], "sub", "{done}");
    assert_eq!(
        done["params"]["result"]["structuredContent"]["status"], "completed",
        "{done}"
    );
    let ack = raw
        .notes
        .iter()
        .find(|n| {
            n["method"] == "notifications/subscriptions/acknowledged"
                && n["params"]["_meta"][sid] == "sub"
        })
        .expect("acknowledged")
        .clone();
    assert_eq!(
        ack["params"]["notifications"],
        json!({"taskIds": [id]}),
        "{ack}"
    );
    assert!(
        !raw.notes.iter().any(|n| n["params"]["taskId"] == other),
        "{:?}",
        raw.notes
    );
    assert_eq!(raw.exit_code().await, Some(0));
}
