//! `agentfile mcp --http` as remote hosts see it: the real binary on a
//! loopback port, models from the loopback fake provider.
//!
//! - **HTTP `initialize`**: POST `initialize` on a kept-alive connection, read
//!   the whole answer (a new session each time). Target: ≤ 5 ms.
//! - **first `tools/call`**: in that new session, `notifications/initialized`
//!   then `tools/call validate`, to the whole answer. Target: ≤ 5 ms.
//! - **200 clients at once**, each its own session (rmcp's streamable-HTTP
//!   client) running a workflow on the fake provider to the end: wall time and
//!   the server's peak RSS (`VmHWM` in `/proc/PID/status`). Target: ≤ 300 MB.
//!
//! `cargo bench --bench mcp_http` times the binary of the `bench` profile.
//! Without `--bench` (as `cargo test --all-targets` runs it) it does a few
//! rounds and 10 clients, as a smoke test.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentfile::llm::fake::{FakeReply, FakeServer};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

const KEY_VAR: &str = "AGENTFILE_BENCH_MCP_HTTP_KEY";
const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const VALIDATE: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"validate","arguments":{"path":"hello.agent"}}}"#;

#[path = "support/bin.rs"]
mod support;

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (rounds, clients) = if full { (300, 200) } else { (3, 10) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let model = FakeServer::start(vec![FakeReply::text("Hello!").when(["Say hello"])])
            .await
            .expect("the fake provider");
        let ws = workspace(&model);
        let bin = &support::agentfile();
        let (child, url) = start(bin, &ws);
        let pid = child.id();
        let _server = Kill(child);

        let http = {
            agentfile::llm::install_tls();
            reqwest::Client::new()
        };
        // Warm up: connection, first scan, first analysis.
        let _ = handshake(&http, &url).await;
        let mut init = Vec::with_capacity(rounds);
        let mut first_call = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let (i, c) = handshake(&http, &url).await;
            init.push(i);
            first_call.push(c);
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        for (name, mut times) in [("HTTP initialize", init), ("first tools/call validate", first_call)] {
            times.sort();
            println!(
                "{name} ({rounds} sessions): median {:.2} ms, p90 {:.2} ms, min {:.2} ms",
                ms(times[times.len() / 2]),
                ms(times[times.len() * 9 / 10]),
                ms(times[0])
            );
        }

        let before = peak_rss_kib(pid);
        let started = Instant::now();
        let runs = (0..clients).map(|i| {
            let url = url.clone();
            tokio::spawn(async move {
                let client = ()
                    .serve(StreamableHttpClientTransport::from_uri(url))
                    .await
                    .expect("initialize");
                let r = client
                    .call_tool(CallToolRequestParams::new("run").with_arguments(
                        json!({"path": "hello.agent", "inputs": {"topic": format!("client {i}")}})
                            .as_object()
                            .cloned()
                            .unwrap(),
                    ))
                    .await
                    .expect("tools/call run");
                let _ = client.cancel().await;
                r.structured_content.unwrap_or(Value::Null)["status"] == "completed"
            })
        });
        let done = futures::future::join_all(runs).await;
        let elapsed = started.elapsed();
        let completed = done.iter().filter(|r| matches!(r, Ok(true))).count();
        assert_eq!(completed, clients, "every client's run completes");
        println!(
            "{clients} clients at once, each initialize + tools/call run to the end: {:.0} ms wall, server peak RSS {:.1} MB (before: {:.1} MB)",
            ms(elapsed),
            peak_rss_kib(pid) as f64 / 1024.0,
            before as f64 / 1024.0
        );
        let _ = std::fs::remove_dir_all(&ws);
    });
}

/// One new session: `initialize` and the first `tools/call`, each timed to
/// its whole answer.
async fn handshake(http: &reqwest::Client, url: &str) -> (Duration, Duration) {
    let t = Instant::now();
    let r = post(http, url, None, INIT).await;
    let session = r
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_owned();
    let body = r.text().await.unwrap();
    let init = t.elapsed();
    assert!(body.contains("\"serverInfo\""), "{body}");
    let _ = post(http, url, Some(&session), INITIALIZED).await;
    let t = Instant::now();
    let body = post(http, url, Some(&session), VALIDATE)
        .await
        .text()
        .await
        .unwrap();
    let call = t.elapsed();
    assert!(body.contains("\"result\""), "{body}");
    let _ = http
        .delete(url)
        .header("mcp-session-id", &session)
        .send()
        .await;
    (init, call)
}

async fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: &'static str,
) -> reqwest::Response {
    let mut r = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(s) = session {
        r = r
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-11-25");
    }
    r.send().await.expect("POST")
}

fn workspace(model: &FakeServer) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agentfile-bench-mcp-http-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the benchmark workspace");
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\nbase_url = {:?}\napi_key_env = \"{KEY_VAR}\"\n",
            model.base_url()
        ),
    )
    .expect("write the config");
    std::fs::write(
        dir.join("hello.agent"),
        "NAME hello\nINPUT topic\nGOAL greet \"Say hello about $topic\"\nRUN main USING greet\n",
    )
    .expect("write a workflow");
    dir
}

/// Start `agentfile mcp --http 127.0.0.1:0`; the child and its endpoint.
fn start(bin: &Path, ws: &Path) -> (Child, String) {
    let mut child = Command::new(bin)
        .args(["mcp", "--http", "127.0.0.1:0", "--workspace"])
        .arg(ws)
        .current_dir(ws)
        .env(KEY_VAR, "bench-key-0123456789")
        .env_remove("AGENTFILE_MCP_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start agentfile mcp --http");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("the server ended before listening")
            .expect("read stderr");
        if let Some(url) = line.strip_prefix("agentfile mcp: listening on ") {
            break url.to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

/// `VmHWM` of a process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
