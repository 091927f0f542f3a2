//! `agentfile mcp` for 2025-11-25 clients that speak core tasks (VS Code):
//! `capabilities.tasks` at `initialize`, `params.task` on `tools/call`,
//! `tasks/get|result|list|cancel`, by raw JSON lines on stdio shaped like
//! VS Code's messages, and by POSTs over HTTP (two tokens: tasks are per
//! principal). Models are the loopback fake provider.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::support::Dir;
use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const KEY_VAR: &str = "AGENTFILE_MCP_TASKS_V1_TEST_KEY";
const WAIT: Duration = Duration::from_secs(60);

fn temp_dir(label: &str) -> Dir {
    Dir::new(&format!("mcp-tasks-v1-{label}"))
}

const HELLO: &str = "NAME hello\nGOAL greet \"Say hello\"\nRUN main USING greet\n";
const GATED: &str =
    "NAME gated\nGOAL act \"Do the gated thing\" SUPERVISED HUMAN\nRUN main USING act\n";
const SLOW: &str = "NAME slow\nGOAL crawl \"Take your time\"\nRUN main USING crawl\n";
const BROKEN: &str = "NAME broken\nGOAL boom \"Break it\"\nRUN main USING boom\n";

async fn fake() -> FakeServer {
    FakeServer::start(vec![
        FakeReply::text("Hello!").when(["Say hello"]),
        FakeReply::text("gated thing done").when(["Do the gated thing"]),
        FakeReply::text("slow done")
            .with_latency(Duration::from_secs(30))
            .when(["Take your time"]),
        FakeReply::error(400, "this request is invalid").when(["Break it"]),
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
    for (name, text) in [
        ("hello", HELLO),
        ("gated", GATED),
        ("slow", SLOW),
        ("broken", BROKEN),
    ] {
        std::fs::write(d.0.join(format!("{name}.agent")), text).unwrap();
    }
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
        .env_remove("AGENTFILE_MCP_TOKEN")
        .kill_on_drop(true);
    c
}

/// VS Code's `initialize` (2025-11-25, core tasks declared), or a plain one.
fn initialize(id: u64, tasks: bool, elicitation: bool) -> Value {
    let mut caps = json!({"roots": {"listChanged": true}, "sampling": {}});
    if elicitation {
        caps["elicitation"] = json!({"form": {}});
    }
    if tasks {
        caps["tasks"] = json!({
            "list": {}, "cancel": {},
            "requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}}
        });
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": caps,
        "clientInfo": {"name": "Visual Studio Code", "version": "1.107.0"}
    }})
}

struct Raw {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
    /// Requests from the server seen while waiting for replies.
    asked: Vec<Value>,
    /// Notifications seen while waiting for replies.
    notes: Vec<Value>,
}

impl Raw {
    async fn start(ws: &Path, tasks: bool, elicitation: bool) -> (Raw, Value) {
        let mut child = command(ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut raw = Raw {
            child,
            stdin,
            lines,
            next_id: 1,
            asked: Vec::new(),
            notes: Vec::new(),
        };
        raw.send_json(initialize(1, tasks, elicitation)).await;
        let init = raw.reply(&json!(1)).await;
        raw.send_json(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        (raw, init)
    }

    async fn send_json(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(v.to_string().as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .expect("no message in time")
            .unwrap()
            .expect("stdout ended");
        serde_json::from_str(&line).unwrap()
    }

    async fn reply(&mut self, id: &Value) -> Value {
        loop {
            let v = self.next().await;
            if v.get("id") == Some(id) && v.get("method").is_none() {
                return v;
            }
            if v.get("method").is_some() {
                if v.get("id").is_some() {
                    self.asked.push(v);
                } else {
                    self.notes.push(v);
                }
            }
        }
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send_json(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.reply(&id).await
    }

    async fn start_task(&mut self, tool: &str, arguments: Value) -> String {
        let r = self
            .request(
                "tools/call",
                json!({"name": tool, "arguments": arguments, "task": {"ttl": 60000},
                    "_meta": {"progressToken": "vscode-1"}}),
            )
            .await;
        let task = &r["result"]["task"];
        assert_eq!(task["status"], "working", "{r}");
        assert!(task["createdAt"].is_string(), "{r}");
        assert!(task["lastUpdatedAt"].is_string(), "{r}");
        assert!(task.as_object().unwrap().contains_key("ttl"), "{r}");
        assert!(task["pollInterval"].is_u64(), "{r}");
        assert!(r["result"].get("resultType").is_none(), "{r}");
        task["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"))
            .to_owned()
    }

    /// Poll `tasks/get` until the task's status is not `working`.
    async fn settle(&mut self, task: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let r = self.request("tasks/get", json!({"taskId": task})).await;
            assert!(r["result"].is_object(), "{r}");
            assert_eq!(r["result"]["taskId"], task, "{r}");
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

fn tool<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name}: {list}"))
}

fn without_session(mut v: Value) -> Value {
    v["session_id"] = Value::Null;
    v
}

#[tokio::test]
async fn a_v1_client_runs_an_approval_workflow_as_a_task_and_approves_with_the_tool() {
    let f = fake().await;
    let ws = workspace("approve", &f);
    let (mut raw, init) = Raw::start(&ws.0, true, false).await;
    assert_eq!(
        init["result"]["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{init}"
    );
    let list = raw.request("tools/list", json!({})).await;
    assert_eq!(tool(&list, "run")["execution"]["taskSupport"], "optional");
    assert!(tool(&list, "event").get("execution").is_none(), "{list}");
    assert!(list["result"].get("resultType").is_none(), "{list}");
    if list.to_string().contains("run_gated") {
        assert_eq!(
            tool(&list, "run_gated")["execution"]["taskSupport"],
            "optional"
        );
    }

    let id = raw.start_task("run", json!({"path": "gated.agent"})).await;
    let waiting = raw.settle(&id).await;
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    // The client cannot elicit: tasks/result returns the waiting result at once.
    let r = raw.request("tasks/result", json!({"taskId": id})).await;
    let s = &r["result"]["structuredContent"];
    assert_eq!(s["status"], "waiting_approval", "{r}");
    assert_eq!(s["resume_with"], "approve", "{r}");
    // Answered with the `approve` tool, as a blocking call's client would.
    let a = raw
        .request(
            "tools/call",
            json!({"name": "approve", "arguments": {"session_id": id, "approve": true}}),
        )
        .await;
    assert_ne!(a["result"]["isError"], true, "{a}");
    let r = raw.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(
        r["result"]["structuredContent"]["status"], "completed",
        "{r}"
    );
    assert_eq!(
        r["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str(),
        "{r}"
    );
    assert!(r["result"].get("resultType").is_none(), "{r}");
    let done = raw.settle(&id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(done.get("result").is_none(), "a flat Task: {done}");

    // tasks/result of a task gives what a blocking call gives.
    let t = raw.start_task("run", json!({"path": "hello.agent"})).await;
    let by_task = raw.request("tasks/result", json!({"taskId": t})).await;
    let blocking = raw
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "hello.agent"}}),
        )
        .await;
    assert!(blocking["result"].get("task").is_none(), "{blocking}");
    assert_eq!(
        without_session(by_task["result"]["structuredContent"].clone()),
        without_session(blocking["result"]["structuredContent"].clone()),
        "task {by_task}\nblocking {blocking}"
    );

    // tasks/list: both tasks (not the blocking call's session).
    let l = raw.request("tasks/list", json!({})).await;
    let ids: Vec<&str> = l["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{l}"))
        .iter()
        .filter_map(|t| t["taskId"].as_str())
        .collect();
    assert!(
        ids.contains(&id.as_str()) && ids.contains(&t.as_str()),
        "{l}"
    );
    assert_eq!(ids.len(), 2, "{l}");
    // Status notifications went out on the way (best effort, but on stdio
    // nothing loses them).
    assert!(
        raw.notes
            .iter()
            .any(|n| n["method"] == "notifications/tasks/status"
                && n["params"]["taskId"] == id.as_str()),
        "{:?}",
        raw.notes
    );
    // An unknown task.
    let u = raw
        .request(
            "tasks/get",
            json!({"taskId": "20260101-000000-000000000000000000000000"}),
        )
        .await;
    assert_eq!(u["error"]["code"], -32602, "{u}");
    assert_eq!(raw.exit_code().await, Some(0));
}

#[tokio::test]
async fn tasks_result_asks_an_eliciting_client_tagged_with_the_task() {
    let f = fake().await;
    let ws = workspace("elicit", &f);
    let (mut raw, _) = Raw::start(&ws.0, true, true).await;
    let id = raw.start_task("run", json!({"path": "gated.agent"})).await;
    assert_eq!(raw.settle(&id).await["status"], "input_required");
    raw.next_id += 1;
    let rid = json!(raw.next_id);
    raw.send_json(
        json!({"jsonrpc": "2.0", "id": rid, "method": "tasks/result", "params": {"taskId": id}}),
    )
    .await;
    // The server asks; answer it.
    let ask = loop {
        let v = raw.next().await;
        if v["method"] == "elicitation/create" {
            break v;
        }
        assert!(v.get("id") != Some(&rid), "answered without asking: {v}");
    };
    assert_eq!(
        ask["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str(),
        "{ask}"
    );
    assert!(
        ask["params"]["requestedSchema"]["properties"]["approve"].is_object(),
        "{ask}"
    );
    raw.send_json(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"approve": true}}}))
        .await;
    let r = raw.reply(&rid).await;
    assert_eq!(
        r["result"]["structuredContent"]["status"], "completed",
        "{r}"
    );
    assert_eq!(raw.settle(&id).await["status"], "completed");
    assert_eq!(raw.exit_code().await, Some(0));
}

#[tokio::test]
async fn a_cancelled_task_ends_cancelled_and_a_failing_one_failed() {
    let f = fake().await;
    let ws = workspace("cancel", &f);
    let (mut raw, _) = Raw::start(&ws.0, true, false).await;
    let id = raw.start_task("run", json!({"path": "slow.agent"})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c = raw.request("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(c["result"]["taskId"], id.as_str(), "{c}");
    assert_eq!(c["result"]["status"], "cancelled", "{c}");
    assert_eq!(raw.settle(&id).await["status"], "cancelled");

    let b = raw.start_task("run", json!({"path": "broken.agent"})).await;
    let failed = raw.settle(&b).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let r = raw.request("tasks/result", json!({"taskId": b})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(r["result"]["structuredContent"]["status"], "failed", "{r}");
    assert_eq!(raw.exit_code().await, Some(0));
}

#[tokio::test]
async fn a_client_without_core_tasks_sees_none_of_it() {
    let f = fake().await;
    let ws = workspace("plain", &f);
    let (mut raw, init) = Raw::start(&ws.0, false, false).await;
    assert!(
        init["result"]["capabilities"].get("tasks").is_none(),
        "{init}"
    );
    let list = raw.request("tools/list", json!({})).await;
    assert!(tool(&list, "run").get("execution").is_none(), "{list}");
    // `params.task` from such a client is ignored: a blocking call.
    let r = raw
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "hello.agent"}, "task": {"ttl": 1000}}),
        )
        .await;
    assert_eq!(
        r["result"]["structuredContent"]["status"], "completed",
        "{r}"
    );
    let l = raw.request("tasks/list", json!({})).await;
    assert_eq!(l["error"]["code"], -32601, "{l}");
    assert_eq!(raw.exit_code().await, Some(0));
}

// ── over HTTP, two principals ───────────────────────────────────────────────

/// `agentfile mcp --http` with `tokens`.
async fn http(ws: &Path, tokens: &str) -> crate::support::mcp_http::Replica {
    let mut c = command(ws);
    c.args(["--http", "127.0.0.1:0"])
        .env("AGENTFILE_MCP_TOKEN", tokens);
    crate::support::mcp_http::Replica::start(c, "server").await
}

/// One client session over HTTP: its token and `Mcp-Session-Id`.
struct HttpClient {
    url: String,
    token: String,
    session: Option<String>,
    next_id: u64,
}

impl HttpClient {
    async fn post(&mut self, body: Value) -> (reqwest::StatusCode, Option<Value>) {
        let mut r = crate::support::http()
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("authorization", format!("Bearer {}", self.token))
            .body(body.to_string());
        if let Some(s) = &self.session {
            r = r
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-11-25");
        }
        let resp = tokio::time::timeout(WAIT, r.send())
            .await
            .expect("POST timed out")
            .unwrap();
        if let Some(s) = resp.headers().get("mcp-session-id") {
            self.session = Some(s.to_str().unwrap().to_owned());
        }
        let status = resp.status();
        let text = tokio::time::timeout(WAIT, resp.text())
            .await
            .expect("body timed out")
            .unwrap();
        // JSON, or SSE whose `data:` lines carry messages: the reply is the
        // one with an id and no method.
        let reply = serde_json::from_str::<Value>(&text).ok().or_else(|| {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
                .find(|v| v.get("id").is_some() && v.get("method").is_none())
        });
        (status, reply)
    }

    async fn connect(url: &str, token: &str) -> (HttpClient, Value) {
        let mut c = HttpClient {
            url: url.to_owned(),
            token: token.to_owned(),
            session: None,
            next_id: 1,
        };
        let (_, init) = c.post(initialize(1, true, false)).await;
        assert!(c.session.is_some(), "no session");
        let (status, _) = c
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert!(status.is_success(), "{status}");
        (c, init.expect("an initialize reply"))
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let (status, reply) = self
            .post(json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}))
            .await;
        reply.unwrap_or_else(|| panic!("{method}: no reply ({status})"))
    }
}

#[tokio::test]
async fn over_http_tasks_belong_to_their_token() {
    let f = fake().await;
    let ws = workspace("http", &f);
    let mut server = http(&ws.0, "token-a,token-b").await;
    let (mut a, init) = HttpClient::connect(&server.url, "token-a").await;
    assert_eq!(
        init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
        json!({}),
        "{init}"
    );
    let (mut b, _) = HttpClient::connect(&server.url, "token-b").await;
    let list = a.request("tools/list", json!({})).await;
    assert_eq!(tool(&list, "run")["execution"]["taskSupport"], "optional");

    let r = a
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "gated.agent"}, "task": {"ttl": 60000}}),
        )
        .await;
    assert_eq!(r["result"]["task"]["status"], "working", "{r}");
    let id = r["result"]["task"]["taskId"].as_str().unwrap().to_owned();

    // B cannot see, read or cancel A's task.
    let g = b.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(g["error"]["code"], -32602, "{g}");
    let c = b.request("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(c["error"]["code"], -32602, "{c}");
    let l = b.request("tasks/list", json!({})).await;
    assert_eq!(l["result"]["tasks"], json!([]), "{l}");
    // Nor through the session tools, which take the id as well.
    for (tool, args) in [
        ("cancel", json!({"session_id": id})),
        ("event", json!({"session_id": id, "after_seq": 0})),
        ("approve", json!({"session_id": id, "approve": true})),
        ("signal", json!({"session_id": id, "event": "go"})),
        ("run", json!({"resume": id})),
    ] {
        let r = b
            .request("tools/call", json!({"name": tool, "arguments": args}))
            .await;
        assert_eq!(r["result"]["isError"], true, "{tool}: {r}");
        assert!(
            r.to_string().contains(&format!("unknown session `{id}`")),
            "{tool}: {r}"
        );
    }
    let l = a.request("tasks/list", json!({})).await;
    assert_eq!(l["result"]["tasks"][0]["taskId"], id.as_str(), "{l}");

    // A waits for approval, approves with the tool, gets the result.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let g = a.request("tasks/get", json!({"taskId": id})).await;
        if g["result"]["status"] == "input_required" {
            break;
        }
        assert_eq!(g["result"]["status"], "working", "{g}");
        assert!(tokio::time::Instant::now() < deadline, "{g}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ok = a
        .request(
            "tools/call",
            json!({"name": "approve", "arguments": {"session_id": id, "approve": true}}),
        )
        .await;
    assert_ne!(ok["result"]["isError"], true, "{ok}");
    let r = a.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(
        r["result"]["structuredContent"]["status"], "completed",
        "{r}"
    );
    let g = a.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(g["result"]["status"], "completed", "{g}");
    // B's still cannot.
    let g = b.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(g["error"]["code"], -32602, "{g}");
    let _ = server.child.start_kill();
    let _ = server.child.wait().await;
}

#[tokio::test]
async fn a_finished_task_is_unknown_after_its_ttl_and_its_session_stays() {
    let f = fake().await;
    let ws = workspace("ttl", &f);
    let config = ws.0.join("agent.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[mcp]\ntask_ttl = \"2s\"\ntask_poll_interval = \"250ms\"\n");
    std::fs::write(&config, text).unwrap();
    let (mut raw, _) = Raw::start(&ws.0, true, false).await;
    // The handle reports the server's TTL and poll interval.
    let r = raw
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "hello.agent"}, "task": {"ttl": 600000}}),
        )
        .await;
    let task = &r["result"]["task"];
    assert_eq!(task["ttl"], 2000, "{r}");
    assert_eq!(task["pollInterval"], 250, "{r}");
    let id = task["taskId"].as_str().unwrap().to_owned();
    let done = raw.settle(&id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["ttl"], 2000, "{done}");
    assert_eq!(done["pollInterval"], 250, "{done}");
    // Readable within the TTL.
    let result = raw.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(
        result["result"]["structuredContent"]["status"], "completed",
        "{result}"
    );
    let list = raw.request("tasks/list", json!({})).await;
    let listed = list["result"]["tasks"].as_array().expect("tasks");
    let mine = listed.iter().find(|t| t["taskId"] == id.as_str());
    assert_eq!(mine.expect("listed")["ttl"], 2000, "{list}");
    // Past it: unknown, as a made-up id is; the session stays.
    tokio::time::sleep(Duration::from_millis(2600)).await;
    let unknown = raw
        .request(
            "tasks/get",
            json!({"taskId": "20260101-000000-000000000000000000000000"}),
        )
        .await;
    let gone = raw.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(gone["error"]["code"], unknown["error"]["code"], "{gone}");
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
    let gone = raw.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
    let list = raw.request("tasks/list", json!({})).await;
    assert!(
        !list["result"]["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .any(|t| t["taskId"] == id.as_str()),
        "{list}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["sessions", "show", &id, "--format", "json"])
        .current_dir(&ws.0)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("completed"));
    assert_eq!(raw.exit_code().await, Some(0));
}

/// The web view on the same listener asks the same owner rule as the task
/// methods: with B's token — as a bearer or logged in with it — A's task is
/// not listed, not shown, not streamed, and cannot be approved, signalled,
/// cancelled or resumed (each reads as an unknown session); A's token sees
/// and approves it there. (B used to approve and cancel A's run here.)
#[tokio::test]
async fn over_http_the_web_view_keeps_a_task_to_its_token() {
    let f = fake().await;
    let ws = workspace("http-ui", &f);
    let mut server = http(&ws.0, "token-a,token-b").await;
    let (mut a, _) = HttpClient::connect(&server.url, "token-a").await;
    let r = a
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "gated.agent"}, "task": {"ttl": 60000}}),
        )
        .await;
    let id = r["result"]["task"]["taskId"].as_str().unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let g = a.request("tasks/get", json!({"taskId": id})).await;
        if g["result"]["status"] == "input_required" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{g}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let base = server.url.trim_end_matches("/mcp").to_owned();
    let http = crate::support::http_builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(WAIT)
        .build()
        .unwrap();
    let ui = |path: &str| format!("{base}/ui/api{path}");

    // B's bearer: nothing of A's run, by any route.
    let list: Value = http
        .get(ui("/sessions"))
        .bearer_auth("token-b")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(!list.to_string().contains(&id), "B lists A's task: {list}");
    for path in [
        format!("/sessions/{id}"),
        format!("/sessions/{id}/events/1"),
        format!("/sessions/{id}/stream"),
    ] {
        let r = http
            .get(ui(&path))
            .bearer_auth("token-b")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "GET {path}");
    }
    for (action, body) in [
        ("approve", json!({"approve": true})),
        ("approve", json!({"approve": false})),
        ("signal", json!({"event": "go"})),
        ("cancel", json!({})),
        ("resume", json!({})),
    ] {
        let r = http
            .post(ui(&format!("/sessions/{id}/{action}")))
            .bearer_auth("token-b")
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        assert_eq!(status, 404, "B's {action}: {text}");
        assert!(text.contains(&format!("no session `{id}`")), "{text}");
    }
    // Logged in with B's token, the same.
    let form = http
        .get(format!("{base}/ui/login"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = form
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    let r = http
        .post(format!("{base}/ui/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token=token-b&csrf={csrf}"))
        .send()
        .await
        .unwrap();
    let jar = r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let list = http
        .get(ui("/sessions"))
        .header("cookie", &jar)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        list.contains("\"sessions\"") && !list.contains(&id),
        "{list}"
    );
    let r = http
        .get(ui(&format!("/sessions/{id}")))
        .header("cookie", &jar)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    // Still waiting: B changed nothing.
    let g = a.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(g["result"]["status"], "input_required", "{g}");
    // A's bearer sees it in the list and approves it from the web view.
    let list = http
        .get(ui("/sessions"))
        .bearer_auth("token-a")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(list.contains(&id), "{list}");
    let r = http
        .post(ui(&format!("/sessions/{id}/approve")))
        .bearer_auth("token-a")
        .header("content-type", "application/json")
        .body(json!({"approve": true}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let r = a.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(
        r["result"]["structuredContent"]["status"], "completed",
        "{r}"
    );
    let _ = server.child.start_kill();
    let _ = server.child.wait().await;
}

/// A plain (not task) run over HTTP is its token's as a task is: A starts a
/// blocking `run` that stops at an approval and a `wait: false` run that is
/// still working; with B's token neither is listed, shown, streamed,
/// approved, signalled, cancelled or resumed — through the MCP session tools
/// or the web view, as a bearer or logged in — and each reads as an unknown
/// session; neither is a task (`tasks/list` of A lists neither). A's token
/// sees both, approves the first and cancels the second. (Such runs used to
/// record no owner, so B could steer them.)
#[tokio::test]
async fn over_http_a_blocking_run_keeps_to_its_token() {
    let f = fake().await;
    let ws = workspace("http-plain", &f);
    let mut server = http(&ws.0, "token-a,token-b").await;
    let (mut a, _) = HttpClient::connect(&server.url, "token-a").await;
    let (mut b, _) = HttpClient::connect(&server.url, "token-b").await;
    // No elicitation: the blocking call returns when the run waits for a
    // human, with the session to approve.
    let r = a
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "gated.agent"}}),
        )
        .await;
    let gated = &r["result"]["structuredContent"];
    assert_eq!(gated["status"], "waiting_approval", "{r}");
    assert_eq!(gated["resume_with"], "approve", "{r}");
    let gated = gated["session_id"].as_str().unwrap().to_owned();
    let r = a
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "slow.agent", "wait": false}}),
        )
        .await;
    let slow = r["result"]["structuredContent"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();

    // B: unknown through every MCP session tool.
    for id in [&gated, &slow] {
        for (tool, args) in [
            ("event", json!({"session_id": id, "after_seq": 0})),
            ("approve", json!({"session_id": id, "approve": true})),
            ("approve", json!({"session_id": id, "approve": false})),
            ("signal", json!({"session_id": id, "event": "go"})),
            ("cancel", json!({"session_id": id})),
            ("run", json!({"resume": id})),
            ("fork", json!({"session_id": id, "at": "main"})),
            ("replay", json!({"session_id": id})),
        ] {
            let r = b
                .request("tools/call", json!({"name": tool, "arguments": args}))
                .await;
            assert_eq!(r["result"]["isError"], true, "{tool}: {r}");
            assert!(
                r.to_string().contains(&format!("unknown session `{id}`")),
                "{tool}: {r}"
            );
        }
        let g = b.request("tasks/get", json!({"taskId": id})).await;
        assert_eq!(g["error"]["code"], -32602, "{g}");
        let c = b.request("tasks/cancel", json!({"taskId": id})).await;
        assert_eq!(c["error"]["code"], -32602, "{c}");
    }
    let l = b.request("tasks/list", json!({})).await;
    assert_eq!(l["result"]["tasks"], json!([]), "{l}");
    // Not tasks: A's task list has neither.
    let l = a.request("tasks/list", json!({})).await;
    assert_eq!(l["result"]["tasks"], json!([]), "{l}");

    // B: nothing on the web view either, as a bearer and logged in.
    let base = server.url.trim_end_matches("/mcp").to_owned();
    let http = crate::support::http_builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(WAIT)
        .build()
        .unwrap();
    let ui = |path: &str| format!("{base}/ui/api{path}");
    let form = http
        .get(format!("{base}/ui/login"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = form
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    let r = http
        .post(format!("{base}/ui/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token=token-b&csrf={csrf}"))
        .send()
        .await
        .unwrap();
    let jar = r.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let as_b = |r: reqwest::RequestBuilder, cookie: bool| {
        if cookie {
            r.header("cookie", &jar)
        } else {
            r.bearer_auth("token-b")
        }
    };
    for cookie in [false, true] {
        let list = as_b(http.get(ui("/sessions")), cookie)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(list.contains("\"sessions\""), "{list}");
        for id in [&gated, &slow] {
            assert!(!list.contains(id.as_str()), "B lists A's run: {list}");
            for path in [
                format!("/sessions/{id}"),
                format!("/sessions/{id}/events/1"),
                format!("/sessions/{id}/stream"),
            ] {
                let r = as_b(http.get(ui(&path)), cookie).send().await.unwrap();
                assert_eq!(r.status(), 404, "GET {path}");
            }
            if cookie {
                // Steering with the login cookie needs the page's CSRF
                // token; the bearer's refusals below are the rule's.
                continue;
            }
            for (action, body) in [
                ("approve", json!({"approve": true})),
                ("approve", json!({"approve": false})),
                ("signal", json!({"event": "go"})),
                ("cancel", json!({})),
                ("resume", json!({})),
            ] {
                let r = as_b(http.post(ui(&format!("/sessions/{id}/{action}"))), cookie)
                    .header("content-type", "application/json")
                    .body(body.to_string())
                    .send()
                    .await
                    .unwrap();
                let status = r.status();
                let text = r.text().await.unwrap();
                assert_eq!(status, 404, "B's {action}: {text}");
                assert!(text.contains(&format!("no session `{id}`")), "{text}");
            }
        }
    }

    // B changed nothing: A still sees the first waiting, the second working.
    let e = a
        .request(
            "tools/call",
            json!({"name": "event", "arguments": {"session_id": gated, "after_seq": 0}}),
        )
        .await;
    assert_eq!(
        e["result"]["structuredContent"]["status"], "waiting_approval",
        "{e}"
    );
    let e = a
        .request(
            "tools/call",
            json!({"name": "event", "arguments": {"session_id": slow, "after_seq": 0}}),
        )
        .await;
    let status = e["result"]["structuredContent"]["status"].clone();
    assert!(status == "running" || status == "queued", "{e}");
    // A's bearer lists both on the web view and shows them.
    let list = http
        .get(ui("/sessions"))
        .bearer_auth("token-a")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(list.contains(&gated) && list.contains(&slow), "{list}");
    for id in [&gated, &slow] {
        let r = http
            .get(ui(&format!("/sessions/{id}")))
            .bearer_auth("token-a")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    }
    // A approves the first and it completes; A cancels the second.
    let ok = a
        .request(
            "tools/call",
            json!({"name": "approve", "arguments": {"session_id": gated, "approve": true}}),
        )
        .await;
    assert_ne!(ok["result"]["isError"], true, "{ok}");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let e = a
            .request(
                "tools/call",
                json!({"name": "event", "arguments": {"session_id": gated, "after_seq": 0, "wait_ms": 2000}}),
            )
            .await;
        let page = &e["result"]["structuredContent"];
        if page["done"] == true {
            assert_eq!(page["status"], "completed", "{e}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{e}");
    }
    let c = a
        .request(
            "tools/call",
            json!({"name": "cancel", "arguments": {"session_id": slow}}),
        )
        .await;
    assert_ne!(c["result"]["isError"], true, "{c}");
    // Resumed and approved, the first is still A's alone.
    let r = b
        .request(
            "tools/call",
            json!({"name": "event", "arguments": {"session_id": gated, "after_seq": 0}}),
        )
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let _ = server.child.start_kill();
    let _ = server.child.wait().await;
}

/// A client's requested TTL (`params.task.ttl`) is the task's within the
/// server's bound (`[mcp] task_ttl`): a small one is reported back (on the
/// handle, `tasks/get`, `tasks/list`) and the task is unknown once it has
/// passed; a huge one is capped at the bound.
#[tokio::test]
async fn a_requested_ttl_is_honoured_within_the_bound() {
    let f = fake().await;
    let ws = workspace("ttl-asked", &f);
    let config = ws.0.join("agent.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("\n[mcp]\ntask_ttl = \"1h\"\ntask_poll_interval = \"250ms\"\n");
    std::fs::write(&config, text).unwrap();
    let (mut raw, _) = Raw::start(&ws.0, true, false).await;
    let mut start = async |ttl: u64| {
        let r = raw
            .request(
                "tools/call",
                json!({"name": "run", "arguments": {"path": "hello.agent"}, "task": {"ttl": ttl}}),
            )
            .await;
        r["result"]["task"].clone()
    };
    let small = start(1_500).await;
    assert_eq!(small["ttl"], 1_500, "{small}");
    let huge = start(1_000_000_000_000).await;
    assert_eq!(huge["ttl"], 3_600_000, "{huge}");
    let (small, huge) = (
        small["taskId"].as_str().unwrap().to_owned(),
        huge["taskId"].as_str().unwrap().to_owned(),
    );
    assert_eq!(raw.settle(&huge).await["ttl"], 3_600_000);
    let done = raw.settle(&small).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["ttl"], 1_500, "{done}");
    let list = raw.request("tasks/list", json!({})).await;
    let listed = list["result"]["tasks"].as_array().expect("tasks");
    let ttl_of = |id: &str| {
        listed
            .iter()
            .find(|t| t["taskId"] == id)
            .map(|t| t["ttl"].clone())
    };
    assert_eq!(ttl_of(&small), Some(json!(1_500)), "{list}");
    assert_eq!(ttl_of(&huge), Some(json!(3_600_000)), "{list}");
    // Past its own TTL the small one is unknown; the other still answers.
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let gone = raw.request("tasks/get", json!({"taskId": small})).await;
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
    let kept = raw.request("tasks/get", json!({"taskId": huge})).await;
    assert_eq!(kept["result"]["status"], "completed", "{kept}");
    let _ = raw.child.start_kill();
    let _ = raw.child.wait().await;
}
