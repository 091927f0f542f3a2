//! `agentfile mcp --http ADDR` end to end: the real binary serving Streamable
//! HTTP on a loopback port, spoken to by rmcp's streamable-HTTP client (the
//! way remote IDE hosts use it) and by raw HTTP requests (for the edges:
//! tokens, `Origin`, refusals at start). Models are the loopback fake provider.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::Dir;
use agentfile::llm::fake::{FakeReply, FakeServer};
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Notify;

/// The provider key variable the test workspaces name.
const KEY_VAR: &str = "AGENTFILE_MCP_HTTP_TEST_KEY";
/// The longest any one step of a test may take.
const WAIT: Duration = Duration::from_secs(60);

// ── workspaces ──────────────────────────────────────────────────────────────

fn temp_dir(label: &str) -> Dir {
    Dir::new(&format!("mcp-http-{label}"))
}

const HELLO: &str =
    "NAME hello\nINPUT topic\nGOAL greet \"Say hello about $topic\"\nRUN main USING greet\n";
const SLOW: &str = "NAME slow\nGOAL wait \"Take your time over this\"\nRUN main USING wait\n";

async fn fake() -> FakeServer {
    FakeServer::start(vec![
        FakeReply::text("Hello over HTTP!").when(["Say hello"]),
        FakeReply::text("slow answer")
            .with_latency(Duration::from_secs(30))
            .when(["Take your time"]),
    ])
    .await
    .unwrap()
}

/// A workspace with `hello.agent` and `slow.agent` for the fake model; `extra`
/// is appended to its `agent.toml`.
fn workspace(label: &str, fake: &FakeServer, extra: &str) -> Dir {
    let d = temp_dir(label);
    std::fs::write(
        d.0.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = {:?}\napi_key_env = \"{KEY_VAR}\"\n{extra}",
            fake.base_url()
        ),
    )
    .unwrap();
    std::fs::write(d.0.join("hello.agent"), HELLO).unwrap();
    std::fs::write(d.0.join("slow.agent"), SLOW).unwrap();
    d
}

fn command(ws: &Path, addr: &str, token: Option<&str>) -> tokio::process::Command {
    command_beating(ws, addr, token, "300")
}

/// [`command`] with progress heartbeats every `heartbeat_ms` of a quiet run.
fn command_beating(
    ws: &Path,
    addr: &str,
    token: Option<&str>,
    heartbeat_ms: &str,
) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentfile"));
    c.arg("mcp")
        .arg("--workspace")
        .arg(ws)
        .args([
            "--http",
            addr,
            "--heartbeat-ms",
            heartbeat_ms,
            "--poll-ms",
            "200",
        ])
        .current_dir(ws)
        .env(KEY_VAR, "test-key-0123456789")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("AGENTFILE_PROVIDER")
        .env_remove("AGENTFILE_MODEL")
        .env_remove("AGENTFILE_MCP_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(t) = token {
        c.env("AGENTFILE_MCP_TOKEN", t);
    }
    c
}

/// A running `agentfile mcp --http` and where it listens.
struct Server {
    child: tokio::process::Child,
    /// `http://127.0.0.1:PORT/mcp`
    url: String,
    port: u16,
}

impl Server {
    /// Start it on a port the system picks, and read the address it prints.
    async fn start(ws: &Path, token: Option<&str>) -> Server {
        Server::start_with(ws, token, &[]).await
    }

    /// [`Server::start`] with more arguments.
    async fn start_with(ws: &Path, token: Option<&str>, extra: &[&str]) -> Server {
        let mut cmd = command(ws, "127.0.0.1:0", token);
        cmd.args(extra);
        Server::start_command(cmd).await
    }

    /// Start `cmd` (a [`command`] on port 0).
    async fn start_command(mut cmd: tokio::process::Command) -> Server {
        let mut child = cmd.spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = tokio::time::timeout(WAIT, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(url) = line.strip_prefix("agentfile mcp: listening on ") {
                    return url.to_owned();
                }
                eprintln!("server: {line}");
            }
            panic!("the server ended before listening");
        })
        .await
        .expect("the server did not say where it listens");
        // Keep draining stderr so the server never blocks on it.
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("server: {line}");
            }
        });
        let port = url
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/mcp")
            .parse()
            .unwrap_or_else(|_| panic!("unexpected address {url}"));
        Server { child, url, port }
    }

    async fn exit_code(&mut self) -> Option<i32> {
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the server did not exit")
            .unwrap()
            .code()
    }
}

// ── the host, through rmcp's streamable-HTTP client ─────────────────────────

async fn connect(url: &str, token: Option<&str>) -> RunningService<RoleClient, ()> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(t) = token {
        config = config.auth_header(t.to_owned());
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    tokio::time::timeout(WAIT, ().serve(transport))
        .await
        .expect("initialize timed out")
        .expect("initialize failed")
}

/// A host that counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
struct Listener {
    changed: Arc<(AtomicUsize, Notify)>,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.changed.0.fetch_add(1, Ordering::SeqCst);
        self.changed.1.notify_waiters();
    }
}

fn args(v: Value) -> JsonObject {
    match v {
        Value::Object(o) => o,
        _ => panic!("arguments must be an object"),
    }
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, a: Value) -> CallToolResult {
    tokio::time::timeout(
        WAIT,
        client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args(a))),
    )
    .await
    .unwrap_or_else(|_| panic!("{tool} timed out"))
    .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn structured(r: &CallToolResult) -> Value {
    r.structured_content.clone().unwrap_or(Value::Null)
}

// ── raw HTTP ────────────────────────────────────────────────────────────────

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// POST `body` to the endpoint with `headers`; the status, the headers and the body.
async fn post(url: &str, headers: &[(&str, &str)], body: &str) -> reqwest::Response {
    let mut r = crate::support::http()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_owned());
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    tokio::time::timeout(WAIT, r.send())
        .await
        .expect("POST timed out")
        .unwrap()
}

/// The sessions in the workspace's store, by `agentfile sessions list`.
fn sessions(ws: &Path) -> Vec<Value> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["sessions", "list", "--format", "json", "--workspace"])
        .arg(ws)
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    list.as_array().cloned().unwrap_or_default()
}

// ── tests ───────────────────────────────────────────────────────────────────

#[tokio::test]
async fn a_workflow_runs_over_http_on_loopback_without_a_token() {
    let model = fake().await;
    let ws = workspace("run", &model, "");
    let server = Server::start(&ws.0, None).await;
    let client = connect(&server.url, None).await;
    let info = client.peer_info().expect("initialized");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("agentfile")
    );
    let tools = tokio::time::timeout(WAIT, client.list_all_tools())
        .await
        .unwrap()
        .unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for want in ["run", "event", "cancel", "approve", "list"] {
        assert!(names.contains(&want), "{names:?}");
    }
    let r = call(
        &client,
        "run",
        json!({"path": "hello.agent", "inputs": {"topic": "transports"}}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let out = structured(&r);
    assert_eq!(out["status"], "completed", "{out}");
    assert_eq!(out["outputs"]["greet"], "Hello over HTTP!", "{out}");
    assert_eq!(model.request_count(), 1);
    let id = out["session_id"].as_str().unwrap();
    let listed = sessions(&ws.0);
    assert!(
        listed
            .iter()
            .any(|s| s["id"] == id && s["status"] == "completed"),
        "{listed:?}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn with_a_token_missing_or_wrong_credentials_get_401_and_nothing_runs() {
    let model = fake().await;
    let ws = workspace("token", &model, "");
    let server = Server::start(&ws.0, Some("tok-alpha-1, tok-beta-2")).await;
    let call_run = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"path":"hello.agent","inputs":{"topic":"x"}}}}"#;
    for (label, headers) in [
        ("missing", vec![]),
        ("wrong", vec![("authorization", "Bearer tok-alpha-2")]),
        ("a prefix", vec![("authorization", "Bearer tok-alpha")]),
        ("not bearer", vec![("authorization", "Basic tok-alpha-1")]),
    ] {
        for body in [INITIALIZE, call_run] {
            let r = post(&server.url, &headers, body).await;
            assert_eq!(r.status(), 401, "{label}");
            let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
            assert!(challenge.starts_with("Bearer"), "{label}: {challenge}");
            assert!(r.headers().get("mcp-session-id").is_none(), "{label}");
        }
    }
    // A client cannot get round it with a session id of its own either.
    let r = post(
        &server.url,
        &[
            ("authorization", "Bearer nope"),
            ("mcp-session-id", "made-up"),
        ],
        call_run,
    )
    .await;
    assert_eq!(r.status(), 401);
    assert_eq!(model.request_count(), 0, "a run started without a token");
    assert!(sessions(&ws.0).is_empty(), "a session was created");

    // Each configured token works, and runs.
    for token in ["tok-alpha-1", "tok-beta-2"] {
        let client = connect(&server.url, Some(token)).await;
        let r = call(
            &client,
            "run",
            json!({"path": "hello.agent", "inputs": {"topic": token}}),
        )
        .await;
        assert_eq!(structured(&r)["status"], "completed", "{r:?}");
        client.cancel().await.unwrap();
    }
    assert_eq!(model.request_count(), 2);
}

/// RFC 9728: with a token set, the protected-resource metadata is served
/// without one (at the path-suffixed and the root well-known paths), names
/// the endpoint, the header as the way to send a token and the configured
/// authorization servers; every 401 points at it. Without a token it is 404.
#[tokio::test]
async fn the_protected_resource_metadata_is_served_and_the_401_points_at_it() {
    let model = fake().await;
    let ws = workspace(
        "prm",
        &model,
        "[mcp]\nauthorization_servers = [\"https://auth.example.com\"]\n",
    );
    let server = Server::start(&ws.0, Some("prm-secret-token")).await;
    let r = post(&server.url, &[], INITIALIZE).await;
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
    let document = format!(
        "http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp",
        server.port
    );
    assert!(
        challenge.starts_with("Bearer ")
            && challenge.contains(&format!("resource_metadata=\"{document}\"")),
        "{challenge}"
    );
    assert!(!challenge.contains("prm-secret-token"), "{challenge}");
    let root = format!(
        "http://127.0.0.1:{}/.well-known/oauth-protected-resource",
        server.port
    );
    for url in [&document, &root] {
        let r = crate::support::http()
            .get(url.as_str())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{url}");
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        let doc: Value = r.json().await.unwrap();
        assert_eq!(doc["resource"], server.url.as_str(), "{doc}");
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]), "{doc}");
        assert_eq!(
            doc["authorization_servers"],
            json!(["https://auth.example.com"]),
            "{doc}"
        );
    }
    // A wrong token's challenge points there too.
    let r = post(
        &server.url,
        &[("authorization", "Bearer wrong-token-value")],
        INITIALIZE,
    )
    .await;
    let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(
        challenge.contains("error=\"invalid_token\"") && challenge.contains(&document),
        "{challenge}"
    );
    drop(server);
    // No token: nothing to learn, no document.
    let open = Server::start(&ws.0, None).await;
    let r = crate::support::http()
        .get(format!(
            "http://127.0.0.1:{}/.well-known/oauth-protected-resource/mcp",
            open.port
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn a_foreign_origin_is_refused_before_auth_and_own_or_listed_origins_pass() {
    let model = fake().await;
    let ws = workspace(
        "origin",
        &model,
        "[mcp]\nallowed_origins = [\"https://ide.example.com\"]\n",
    );
    let server = Server::start(&ws.0, Some("secret-token")).await;
    let auth = ("authorization", "Bearer secret-token");
    for origin in [
        "http://evil.example",
        "https://ide.example.com:8443",
        "http://ide.example.com",
        "null",
    ] {
        // 403 whether or not the token is right: the origin is checked first.
        for headers in [vec![("origin", origin)], vec![("origin", origin), auth]] {
            let r = post(&server.url, &headers, INITIALIZE).await;
            assert_eq!(r.status(), 403, "{origin}");
            assert!(r.headers().get("mcp-session-id").is_none());
        }
    }
    let own = format!("http://localhost:{}", server.port);
    for origin in [
        own.as_str(),
        "https://ide.example.com",
        "HTTPS://IDE.example.com:443",
    ] {
        let r = post(&server.url, &[("origin", origin), auth], INITIALIZE).await;
        assert_eq!(r.status(), 200, "{origin}");
        assert!(r.headers().get("mcp-session-id").is_some(), "{origin}");
    }
    // No Origin at all (every non-browser client) passes.
    let r = post(&server.url, &[auth], INITIALIZE).await;
    assert_eq!(r.status(), 200);
    // And a foreign Host (DNS rebinding) is refused on a loopback bind.
    let r = post(
        &server.url,
        &[auth, ("host", "attacker.example:80")],
        INITIALIZE,
    )
    .await;
    assert_eq!(r.status(), 403);
    assert_eq!(model.request_count(), 0);
}

#[tokio::test]
async fn other_paths_are_404_and_oversized_bodies_413() {
    let model = fake().await;
    let ws = workspace("bounds", &model, "");
    let server = Server::start(&ws.0, None).await;
    let other = server.url.replace("/mcp", "/other");
    let r = post(&other, &[], INITIALIZE).await;
    assert_eq!(r.status(), 404);
    // One byte over the largest message stdio accepts.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(16 * 1024 * 1024)
    );
    let r = post(&server.url, &[], &big).await;
    assert_eq!(r.status(), 413);
}

#[tokio::test]
async fn a_non_loopback_bind_needs_a_token() {
    let model = fake().await;
    let ws = workspace("bind", &model, "");
    let out = command(&ws.0, "0.0.0.0:0", None).output().await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to serve --http 0.0.0.0:0 without a token")
            && err.contains("AGENTFILE_MCP_TOKEN"),
        "{err}"
    );
    // A token easy to guess is refused there (it is only warned of on
    // loopback); it names the token by its place, never spells it out.
    let out = command(&ws.0, "0.0.0.0:0", Some("t0k3n"))
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("too easy to guess")
            && err.contains("token 1 (about")
            && err.contains("128")
            && !err.contains("t0k3n"),
        "{err}"
    );
    // With a strong token it starts.
    let strong = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    let mut child = command(&ws.0, "0.0.0.0:0", Some(strong)).spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap_or_default();
    assert!(
        line.starts_with("agentfile mcp: listening on http://0.0.0.0:"),
        "{line}"
    );
}

#[tokio::test]
async fn the_hosts_model_is_not_offered_over_http() {
    let model = fake().await;
    let ws = workspace("sampling", &model, "");
    let out = command(&ws.0, "127.0.0.1:0", None)
        .args(["--provider", "mcp-sampling"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("mcp-sampling") && err.contains("stdio only"),
        "{err}"
    );
}

#[tokio::test]
async fn a_malformed_allowed_origin_stops_the_server_at_start() {
    let model = fake().await;
    let ws = workspace(
        "badorigin",
        &model,
        "[mcp]\nallowed_origins = [\"ide.example.com/app\"]\n",
    );
    let out = command(&ws.0, "127.0.0.1:0", None).output().await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("allowed_origins") && err.contains("ide.example.com/app"),
        "{err}"
    );
}

#[tokio::test]
async fn many_clients_at_once_each_run_a_workflow_to_the_end() {
    const CLIENTS: usize = 24;
    let model = fake().await;
    let ws = workspace("many", &model, "");
    let server = Server::start(&ws.0, None).await;
    let runs = (0..CLIENTS).map(|i| {
        let url = server.url.clone();
        tokio::spawn(async move {
            let client = connect(&url, None).await;
            let r = call(
                &client,
                "run",
                json!({"path": "hello.agent", "inputs": {"topic": format!("client {i}")}}),
            )
            .await;
            client.cancel().await.unwrap();
            structured(&r)
        })
    });
    let outs = futures::future::join_all(runs).await;
    let mut ids = std::collections::HashSet::new();
    for out in outs {
        let out = out.unwrap();
        assert_eq!(out["status"], "completed", "{out}");
        assert_eq!(out["outputs"]["greet"], "Hello over HTTP!");
        ids.insert(out["session_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(ids.len(), CLIENTS);
    assert_eq!(model.request_count(), CLIENTS);
}

#[tokio::test]
async fn every_session_hears_that_the_tool_list_changed() {
    let model = fake().await;
    let ws = workspace("changed", &model, "");
    let server = Server::start(&ws.0, None).await;
    let mut clients = Vec::new();
    for _ in 0..3 {
        let host = Listener::default();
        let transport = StreamableHttpClientTransport::from_uri(server.url.clone());
        let client = tokio::time::timeout(WAIT, host.clone().serve(transport))
            .await
            .unwrap()
            .unwrap();
        // The tools as the session starts (the first scan is done).
        let deadline = Instant::now() + WAIT;
        loop {
            let tools = client.list_all_tools().await.unwrap();
            if tools.iter().any(|t| t.name == "run_hello") {
                break;
            }
            assert!(Instant::now() < deadline, "no run_hello tool");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        clients.push((host, client));
    }
    // One client leaves; the others still hear the change.
    let (_, gone) = clients.pop().unwrap();
    gone.cancel().await.unwrap();
    std::fs::write(
        ws.0.join("bye.agent"),
        "NAME bye\nGOAL part \"Say goodbye\"\nRUN main USING part\n",
    )
    .unwrap();
    for (host, client) in &clients {
        tokio::time::timeout(WAIT, async {
            while host.changed.0.load(Ordering::SeqCst) == 0 {
                let notified = host.changed.1.notified();
                if host.changed.0.load(Ordering::SeqCst) > 0 {
                    break;
                }
                let _ = tokio::time::timeout(Duration::from_millis(200), notified).await;
            }
        })
        .await
        .expect("no list_changed");
        let tools = client.list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "run_bye"));
    }
}

#[cfg(unix)]
#[tokio::test]
async fn sigterm_interrupts_runs_answers_the_waiting_call_and_exits_143() {
    let model = fake().await;
    let ws = workspace("sigterm", &model, "");
    let mut server = Server::start(&ws.0, None).await;
    let client = connect(&server.url, None).await;
    let r = call(&client, "run", json!({"path": "slow.agent", "wait": false})).await;
    let detached = structured(&r)["session_id"].as_str().unwrap().to_owned();
    let waiting = {
        let peer = client.peer().clone();
        tokio::spawn(async move {
            peer.call_tool(
                CallToolRequestParams::new("run")
                    .with_arguments(args(json!({"path": "slow.agent"}))),
            )
            .await
        })
    };
    // Both runs are under way when the signal comes.
    let deadline = Instant::now() + WAIT;
    while model.request_count() < 2 {
        assert!(Instant::now() < deadline, "the runs did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = server.child.id().unwrap() as i32;
    // SAFETY: sending a signal to the child this test started.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let started = Instant::now();
    // The waiting call still gets its answer before the process ends.
    let r = tokio::time::timeout(WAIT, waiting)
        .await
        .unwrap()
        .unwrap()
        .expect("the waiting call got no answer");
    assert_eq!(r.is_error, Some(true), "{r:?}");
    assert_eq!(server.exit_code().await, Some(143));
    assert!(started.elapsed() < Duration::from_secs(10));
    let listed = sessions(&ws.0);
    let statuses: Vec<&str> = listed
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["interrupted", "interrupted"], "{listed:?}");
    assert!(listed.iter().any(|s| s["id"] == detached.as_str()));
}

/// Read from `sock` until the server closes it (or `within` passes: `None`);
/// what it sent.
async fn read_to_close(sock: &mut tokio::net::TcpStream, within: Duration) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    // A reset after the answer counts as closed too.
    let _ = tokio::time::timeout(within, sock.read_to_end(&mut got))
        .await
        .ok()?;
    Some(String::from_utf8_lossy(&got).into_owned())
}

#[tokio::test]
async fn a_client_that_stalls_mid_request_is_closed_and_others_are_served_meanwhile() {
    use tokio::io::AsyncWriteExt;
    let model = fake().await;
    let ws = workspace("slowloris", &model, "[mcp]\nread_timeout = \"1s\"\n");
    let server = Server::start(&ws.0, None).await;
    let addr = format!("127.0.0.1:{}", server.port);
    // Half a head, then nothing.
    let mut head = tokio::net::TcpStream::connect(&addr).await.unwrap();
    head.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        .await
        .unwrap();
    // A whole head, half the body it announces, then nothing.
    let mut body = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
        server.port,
        INITIALIZE.len()
    );
    body.write_all(req.as_bytes()).await.unwrap();
    body.write_all(&INITIALIZE.as_bytes()[..20]).await.unwrap();
    // 100 connections that never say anything.
    let mut idle = Vec::new();
    for _ in 0..100 {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    // Meanwhile a normal client is served, at once.
    let t = Instant::now();
    let r = post(&server.url, &[], INITIALIZE).await;
    assert!(r.status().is_success(), "{}", r.status());
    assert!(r.text().await.unwrap().contains("serverInfo"));
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "a valid request waited {:?} behind idle connections",
        t.elapsed()
    );
    let client = connect(&server.url, None).await;
    let done = call(
        &client,
        "run",
        json!({"path": "hello.agent", "inputs": {"topic": "x"}}),
    )
    .await;
    assert_eq!(structured(&done)["status"], "completed", "{done:?}");
    // The stalled ones are closed within a bound (1 s to read, plus slack).
    let t = Instant::now();
    let closed = read_to_close(&mut head, Duration::from_secs(10)).await;
    assert!(closed.is_some(), "a half-sent head kept its connection");
    let answer = read_to_close(&mut body, Duration::from_secs(10))
        .await
        .expect("a half-sent body kept its connection");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(t.elapsed() < Duration::from_secs(10));
    let _ = client.cancel().await;
    drop(idle);
}

/// `subscriptions/listen` streams have their own bound per principal: with
/// `--max-requests 4`, 64 idle streams from one client leave its (and every
/// loopback client's) calls served — they used to fill the in-flight bound
/// and lock every client out with a 429 about "this connection" — and the
/// 65th stream gets a 429 that names the bound it passed. Closing a stream
/// frees its place.
#[tokio::test]
async fn listen_streams_have_their_own_bound_and_never_lock_out_calls() {
    let model = fake().await;
    let ws = workspace("streams", &model, "");
    let mut server = Server::start_with(&ws.0, None, &["--max-requests", "4"]).await;
    let listen = |id: usize| {
        json!({"jsonrpc": "2.0", "id": format!("s{id}"), "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": true}}})
        .to_string()
    };
    let mut open = Vec::new();
    for i in 0..64 {
        let r = post(&server.url, &[], &listen(i)).await;
        assert_eq!(r.status(), 200, "stream {i}: {}", r.text().await.unwrap());
        assert_eq!(r.headers()["content-type"], "text/event-stream");
        open.push(r);
    }
    // Calls go on: the streams hold none of the four in-flight places.
    for _ in 0..8 {
        let r = post(&server.url, &[], INITIALIZE).await;
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    }
    let r = post(&server.url, &[], &listen(64)).await;
    assert_eq!(r.status(), 429);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["error"]["data"],
        json!({"limit": "listen_streams_per_principal", "max": 64}),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap();
    for needle in ["subscriptions/listen streams", "at most 64", "close one"] {
        assert!(message.contains(needle), "{needle}: {message}");
    }
    assert!(!message.contains("this connection"), "{message}");
    // A stream closed frees its place.
    drop(open.pop());
    let deadline = Instant::now() + WAIT;
    loop {
        let r = post(&server.url, &[], &listen(65)).await;
        if r.status() == 200 {
            open.push(r);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the closed stream kept its place"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(open);
    let _ = server.child.start_kill();
    let _ = server.exit_code().await;
}

/// `[mcp] max_streams` sets the listen-stream bound: with 3, the fourth
/// stream of one principal gets the 429 naming 3, and calls still go on. A
/// value out of range (0, more than 4096, not a whole number) stops the
/// server at start, naming the key and the range.
#[tokio::test]
async fn the_listen_stream_bound_is_set_by_mcp_max_streams() {
    let model = fake().await;
    let ws = workspace("max-streams", &model, "[mcp]\nmax_streams = 3\n");
    let mut server = Server::start(&ws.0, None).await;
    let listen = |id: usize| {
        json!({"jsonrpc": "2.0", "id": format!("s{id}"), "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": true}}})
        .to_string()
    };
    let mut open = Vec::new();
    for i in 0..3 {
        let r = post(&server.url, &[], &listen(i)).await;
        assert_eq!(r.status(), 200, "stream {i}: {}", r.text().await.unwrap());
        open.push(r);
    }
    let r = post(&server.url, &[], &listen(3)).await;
    assert_eq!(r.status(), 429);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["error"]["data"],
        json!({"limit": "listen_streams_per_principal", "max": 3}),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 3"),
        "{body}"
    );
    let r = post(&server.url, &[], INITIALIZE).await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    drop(open);
    let _ = server.child.start_kill();
    let _ = server.exit_code().await;

    for bad in ["0", "4097", "-2", "\"8\""] {
        let ws = workspace(
            "max-streams-bad",
            &model,
            &format!("[mcp]\nmax_streams = {bad}\n"),
        );
        let out = tokio::time::timeout(WAIT, command(&ws.0, "127.0.0.1:0", None).output())
            .await
            .expect("a bad max_streams did not stop the server")
            .unwrap();
        assert!(!out.status.success(), "{bad}: {:?}", out.status);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("max_streams"), "{bad}: {err}");
        if !bad.starts_with('"') {
            assert!(err.contains("from 1 to 4096"), "{bad}: {err}");
        }
    }
}

// ── SSE resumption ──────────────────────────────────────────────────────────

/// Three steps of about half a second each: a progress notification per event.
const STEPS: &str = "NAME steps\nGOAL one \"Write step one\"\nGOAL two \"Write step two\"\nGOAL three \"Write step three\"\nRUN main USING one, two, three\n";

/// One SSE event: its id and its JSON message (`None`: the priming event).
#[derive(Debug, Clone)]
struct SseEvent {
    id: String,
    data: Option<Value>,
}

/// Reads the SSE events of a streaming response, one at a time.
struct SseReader {
    response: reqwest::Response,
    buf: Vec<u8>,
}

impl SseReader {
    fn new(response: reqwest::Response) -> SseReader {
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        SseReader {
            response,
            buf: Vec::new(),
        }
    }

    /// The next event (keep-alive comments skipped), or `None` at the end.
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..end + 2).collect();
                let block = String::from_utf8(block).unwrap();
                let (mut id, mut data) = (None, None);
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        let v = v.trim();
                        data = (!v.is_empty()).then(|| serde_json::from_str(v).unwrap());
                    }
                }
                match id {
                    Some(id) => return Some(SseEvent { id, data }),
                    None if data.is_none() => continue, // a keep-alive
                    None => panic!("an event without an id: {block}"),
                }
            }
            match tokio::time::timeout(WAIT, self.response.chunk())
                .await
                .expect("the stream stalled")
            {
                Ok(Some(chunk)) => self.buf.extend_from_slice(&chunk),
                _ => return None,
            }
        }
    }

    /// Every event up to the end of the stream.
    async fn rest(mut self) -> Vec<SseEvent> {
        let mut all = Vec::new();
        while let Some(e) = self.next().await {
            all.push(e);
        }
        all
    }
}

/// A 2025-11-25 client of its own session, speaking raw HTTP.
struct RawSession {
    url: String,
    token: &'static str,
    id: String,
}

impl RawSession {
    async fn open(url: &str, token: &'static str) -> RawSession {
        let auth = format!("Bearer {token}");
        let r = post(url, &[("authorization", &auth)], INITIALIZE).await;
        assert_eq!(r.status(), 200);
        let id = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        let _ = r.text().await;
        let s = RawSession {
            url: url.to_owned(),
            token,
            id,
        };
        let r = s
            .post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        assert_eq!(r.status(), 202);
        s
    }

    async fn post(&self, body: &str) -> reqwest::Response {
        let auth = format!("Bearer {}", self.token);
        post(
            &self.url,
            &[
                ("authorization", &auth),
                ("mcp-session-id", &self.id),
                ("mcp-protocol-version", "2025-11-25"),
            ],
            body,
        )
        .await
    }

    /// `tools/call run steps.agent` with id `n` and progress token `p<n>`.
    async fn run_steps(&self, n: u32) -> SseReader {
        let body = json!({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
            "_meta": {"progressToken": format!("p{n}")},
            "name": "run", "arguments": {"path": "steps.agent"}}});
        SseReader::new(self.post(&body.to_string()).await)
    }

    /// `GET /mcp` resuming after `last` with `token`'s credentials.
    async fn resume(&self, token: &str, last: &str) -> reqwest::Response {
        tokio::time::timeout(
            WAIT,
            crate::support::http()
                .get(&self.url)
                .header("accept", "text/event-stream")
                .header("authorization", format!("Bearer {token}"))
                .header("mcp-session-id", &self.id)
                .header("mcp-protocol-version", "2025-11-25")
                .header("last-event-id", last)
                .send(),
        )
        .await
        .expect("GET timed out")
        .unwrap()
    }
}

fn is_progress(e: &SseEvent) -> bool {
    e.data
        .as_ref()
        .is_some_and(|d| d["method"] == "notifications/progress")
}

/// Read until the first progress notification; the events so far.
async fn until_first_progress(reader: &mut SseReader) -> Vec<SseEvent> {
    let mut seen = Vec::new();
    while let Some(e) = reader.next().await {
        let progress = is_progress(&e);
        seen.push(e);
        if progress {
            return seen;
        }
    }
    panic!("the stream ended before any progress: {seen:?}");
}

/// What a run's stream told, to compare runs: the progress messages of its
/// events (heartbeats, whose number depends on timing, left out), the final
/// result's status and outputs, and how many results came.
fn told(events: &[SseEvent], request: u32) -> (Vec<Value>, Vec<Value>) {
    let progress = events
        .iter()
        .filter(|e| is_progress(e))
        .map(|e| &e.data.as_ref().unwrap()["params"])
        .filter(|p| p["progress"].as_f64().is_some_and(|v| v.fract() == 0.0))
        .map(|p| json!(timeless(p["message"].as_str().unwrap_or_default())))
        .collect();
    let results = events
        .iter()
        .filter_map(|e| e.data.as_ref())
        .filter(|d| d["id"] == request && (d.get("result").is_some() || d.get("error").is_some()))
        .map(|d| {
            let s = &d["result"]["structuredContent"];
            json!({"status": s["status"], "outputs": s["outputs"], "error": d["error"]})
        })
        .collect();
    (progress, results)
}

/// A progress message with its session id and numbers (timings) blanked.
fn timeless(message: &str) -> String {
    let mut words: Vec<&str> = message.split(' ').collect();
    for i in 1..words.len() {
        if words[i - 1] == "(session" {
            words[i] = "ID,";
        }
    }
    words
        .join(" ")
        .chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect()
}

/// Nothing told twice on a stream: unique ids, progress strictly increasing.
fn assert_once(events: &[SseEvent]) {
    let mut ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
    ids.sort_unstable();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "an event came twice: {events:?}");
    let values: Vec<f64> = events
        .iter()
        .filter(|e| is_progress(e))
        .map(|e| {
            e.data.as_ref().unwrap()["params"]["progress"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "progress repeated or went back: {values:?}"
    );
}

/// A 2025-11-25 session's `run` whose SSE stream drops after the first
/// progress notification and is resumed with `Last-Event-ID` gets every
/// progress notification and the result exactly once, as an undisturbed run
/// does — resumed while the run goes on, and resumed after its response was
/// sent to nobody. An id of a stream not kept here, or one never sent, gets
/// 404 saying so; another token cannot resume the stream.
#[tokio::test]
async fn a_dropped_stream_resumed_with_last_event_id_misses_nothing() {
    let model = FakeServer::start(vec![
        FakeReply::text("one done")
            .with_latency(Duration::from_millis(500))
            .when(["step one"]),
        FakeReply::text("two done")
            .with_latency(Duration::from_millis(500))
            .when(["step two"]),
        FakeReply::text("three done")
            .with_latency(Duration::from_millis(500))
            .when(["step three"]),
    ])
    .await
    .unwrap();
    let ws = workspace("resume", &model, "");
    std::fs::write(ws.0.join("steps.agent"), STEPS).unwrap();
    let (a, b) = (
        "resume-token-a-0123456789abcdef",
        "resume-token-b-0123456789abcdef",
    );
    let server = Server::start(&ws.0, Some(&format!("{a},{b}"))).await;
    let session = RawSession::open(&server.url, a).await;

    // Undisturbed.
    let whole = session.run_steps(2).await.rest().await;
    assert!(
        whole[0].data.is_none(),
        "the priming event first: {whole:?}"
    );
    let (progress, results) = told(&whole, 2);
    assert!(progress.len() >= 3, "{whole:?}");
    assert_eq!(results.len(), 1, "{whole:?}");
    assert_eq!(results[0]["status"], "completed", "{whole:?}");
    assert_once(&whole);

    // Dropped after the first progress, resumed while the run goes on.
    let mut reader = session.run_steps(3).await;
    let mut got = until_first_progress(&mut reader).await;
    let last = got.last().unwrap().id.clone();
    drop(reader);
    let r = session.resume(a, &last).await;
    got.extend(SseReader::new(r).rest().await);
    assert_once(&got);
    assert_eq!(told(&got, 3), (progress.clone(), results.clone()));

    // Dropped after the first progress; the response comes while nobody
    // listens; resumed after.
    let mut reader = session.run_steps(4).await;
    let mut got = until_first_progress(&mut reader).await;
    let last = got.last().unwrap().id.clone();
    drop(reader);
    let deadline = Instant::now() + WAIT;
    while sessions(&ws.0)
        .iter()
        .filter(|s| s["status"] == "completed")
        .count()
        < 3
    {
        assert!(Instant::now() < deadline, "the third run did not finish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Another token: not its stream.
    let r = session.resume(b, &last).await;
    assert_eq!(r.status(), 404);
    let refusal = r.text().await.unwrap();
    assert!(refusal.contains("no stream"), "{refusal}");
    let r = session.resume(a, &last).await;
    got.extend(SseReader::new(r).rest().await);
    assert_once(&got);
    assert_eq!(told(&got, 4), (progress.clone(), results.clone()));

    // Unknown streams and events are told apart, and say what to do.
    let (stream, _) = last.split_once('/').unwrap();
    let r = session.resume(a, "987654/0").await;
    assert_eq!(r.status(), 404);
    let refusal = r.text().await.unwrap();
    assert!(
        refusal.contains("no stream 987654") && refusal.contains("send the request again"),
        "{refusal}"
    );
    let r = session.resume(a, &format!("{stream}/9999")).await;
    assert_eq!(r.status(), 404);
    let refusal = r.text().await.unwrap();
    assert!(refusal.contains("never sent"), "{refusal}");
    // Resuming a finished stream again replays only what follows the id.
    let r = session.resume(a, &got[got.len() - 2].id).await;
    let tail = SseReader::new(r).rest().await;
    assert_eq!(tail.len(), 1, "{tail:?}");
    assert_eq!(tail[0].id, got.last().unwrap().id);
}

/// A stream that moved on past what it keeps: resuming after its first event
/// gets 410 saying the events are no longer kept and what to do. (A quiet run
/// with a heartbeat every 10 ms sends far more than the 256 events kept.)
#[tokio::test]
async fn resuming_past_what_a_stream_keeps_gets_410() {
    let model = fake().await;
    let ws = workspace("resume-gone", &model, "");
    let token = "resume-token-c-0123456789abcdef";
    let server =
        Server::start_command(command_beating(&ws.0, "127.0.0.1:0", Some(token), "10")).await;
    let session = RawSession::open(&server.url, token).await;
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "_meta": {"progressToken": "p"}, "name": "run", "arguments": {"path": "slow.agent"}}});
    let mut reader = SseReader::new(session.post(&body.to_string()).await);
    let first = reader.next().await.expect("the priming event");
    drop(reader);
    let deadline = Instant::now() + WAIT;
    loop {
        let r = session.resume(token, &first.id).await;
        if r.status() == 410 {
            let refusal = r.text().await.unwrap();
            assert!(
                refusal.contains("no longer kept")
                    && refusal.contains("256")
                    && refusal.contains("send the request again"),
                "{refusal}"
            );
            break;
        }
        assert_eq!(r.status(), 200);
        drop(r);
        assert!(Instant::now() < deadline, "the stream kept everything");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
