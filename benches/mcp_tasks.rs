//! Runs as MCP tasks (2026-07-28, the `io.modelcontextprotocol/tasks`
//! extension) against the real binary, over HTTP (`agentfile mcp --http` on
//! loopback) and over stdio (raw JSON lines), models from the loopback fake
//! provider:
//!
//! - **`tasks/get` latency**: one request to its whole answer, on a task
//!   still working and on one completed. Target: p50 ≤ 1 ms.
//! - **blocking vs task, side by side**: a `tools/call run` that blocks to
//!   the end, against the same run started as a task (`tools/call` answered
//!   with the task) and `tasks/get` polled back to back until `completed`
//!   (the fastest a client can learn the end; a client that keeps to the
//!   advertised `pollInterval` learns it up to that much later).
//!
//! `cargo bench --bench mcp_tasks` times the binary of the `bench` profile.
//! Without `--bench` (as `cargo test --all-targets` runs it) it does a few
//! rounds as a smoke test.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const KEY_VAR: &str = "AGENTFILE_BENCH_MCP_TASKS_KEY";
const V2026: &str = "2026-07-28";

#[path = "support/bin.rs"]
mod support;

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (rounds, polls) = if full { (200, 2000) } else { (3, 20) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let model = FakeServer::start(vec![
            FakeReply::text("Hello!").when(["Say hello"]),
            FakeReply::text("late")
                .with_latency(Duration::from_secs(600))
                .when(["Take your time"]),
        ])
        .await
        .expect("the fake provider");
        let ws = workspace(&model);
        for transport in [Transport::Http, Transport::Stdio] {
            let mut conn = Conn::start(transport, &ws).await;
            measure(&mut conn, transport.name(), rounds, polls).await;
            conn.stop().await;
        }
        let _ = std::fs::remove_dir_all(&ws);
    });
}

async fn measure(conn: &mut Conn, name: &str, rounds: usize, polls: usize) {
    let hello = json!({"name": "run", "arguments": {"path": "hello.agent"}});
    // Warm up: first scan, first analysis, the connection.
    let r = conn.request("tools/call", hello.clone(), false).await;
    assert_eq!(
        r["result"]["structuredContent"]["status"], "completed",
        "{r}"
    );

    // tasks/get on a task still working (its model answers in 10 minutes).
    let slow = conn
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": "slow.agent"}}),
            true,
        )
        .await;
    let slow_id = task_id(&slow);
    let mut working = Vec::with_capacity(polls);
    for _ in 0..polls {
        let t = Instant::now();
        let g = conn
            .request("tasks/get", json!({"taskId": slow_id}), true)
            .await;
        working.push(t.elapsed());
        assert_eq!(g["result"]["status"], "working", "{g}");
    }
    let _ = conn
        .request("tasks/cancel", json!({"taskId": slow_id}), true)
        .await;

    // Blocking calls, then the same run as tasks polled to the end.
    let mut blocking = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        let r = conn.request("tools/call", hello.clone(), false).await;
        blocking.push(t.elapsed());
        assert_eq!(
            r["result"]["structuredContent"]["status"], "completed",
            "{r}"
        );
    }
    let (mut create, mut to_end, mut gets) = (Vec::new(), Vec::new(), 0usize);
    let mut last = String::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let r = conn.request("tools/call", hello.clone(), true).await;
        create.push(t.elapsed());
        let id = task_id(&r);
        loop {
            let g = conn.request("tasks/get", json!({"taskId": id}), true).await;
            gets += 1;
            match g["result"]["status"].as_str() {
                Some("working") => continue,
                Some("completed") => break,
                _ => panic!("{g}"),
            }
        }
        to_end.push(t.elapsed());
        last = id;
    }
    // tasks/get on a completed task.
    let mut completed = Vec::with_capacity(polls);
    for _ in 0..polls {
        let t = Instant::now();
        let g = conn
            .request("tasks/get", json!({"taskId": last}), true)
            .await;
        completed.push(t.elapsed());
        assert_eq!(g["result"]["status"], "completed", "{g}");
    }

    println!("{name}:");
    report("  tasks/get, task working", polls, working);
    report("  tasks/get, task completed", polls, completed);
    report(
        "  tools/call run, blocking, to the result",
        rounds,
        blocking,
    );
    report("  tools/call run as a task, to the task", rounds, create);
    report(
        &format!(
            "  task created + tasks/get polled back to back to completed ({:.1} polls each)",
            gets as f64 / rounds as f64
        ),
        rounds,
        to_end,
    );
}

fn report(what: &str, n: usize, mut times: Vec<Duration>) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    println!(
        "{what} ({n}): p50 {:.3} ms, p99 {:.3} ms, min {:.3} ms",
        ms(at(0.5)),
        ms(at(0.99)),
        ms(times[0])
    );
}

fn task_id(r: &Value) -> String {
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    r["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned()
}

/// The `_meta` of a 2026-07-28 request; `tasks`: the client declares the
/// tasks extension.
fn meta(tasks: bool) -> Value {
    let caps = if tasks {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": V2026,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"}
    })
}

#[derive(Clone, Copy)]
enum Transport {
    Http,
    Stdio,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Http => "HTTP (agentfile mcp --http, one kept-alive connection)",
            Transport::Stdio => "stdio (agentfile mcp, JSON lines)",
        }
    }
}

enum Conn {
    Http {
        child: tokio::process::Child,
        http: reqwest::Client,
        url: String,
        next: u64,
    },
    Stdio {
        child: tokio::process::Child,
        stdin: tokio::process::ChildStdin,
        lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
        next: u64,
    },
}

impl Conn {
    async fn start(transport: Transport, ws: &Path) -> Conn {
        let mut cmd = tokio::process::Command::new(support::agentfile());
        cmd.arg("mcp")
            .arg("--workspace")
            .arg(ws)
            .current_dir(ws)
            .env(KEY_VAR, "bench-key-0123456789")
            .env_remove("AGENTFILE_MCP_TOKEN")
            .kill_on_drop(true);
        match transport {
            Transport::Http => {
                let mut child = cmd
                    .args(["--http", "127.0.0.1:0"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("start agentfile mcp --http");
                let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
                let url = loop {
                    let line = lines
                        .next_line()
                        .await
                        .expect("read stderr")
                        .expect("the server ended before listening");
                    if let Some(url) = line.strip_prefix("agentfile mcp: listening on ") {
                        break url.to_owned();
                    }
                };
                tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
                Conn::Http {
                    child,
                    http: {
                        agentfile::llm::install_tls();
                        reqwest::Client::new()
                    },
                    url,
                    next: 0,
                }
            }
            Transport::Stdio => {
                let mut child = cmd
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("start agentfile mcp");
                let stdin = child.stdin.take().expect("stdin");
                let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
                Conn::Stdio {
                    child,
                    stdin,
                    lines,
                    next: 0,
                }
            }
        }
    }

    /// A 2026-07-28 request and its reply.
    async fn request(&mut self, method: &str, mut params: Value, tasks: bool) -> Value {
        params["_meta"] = meta(tasks);
        match self {
            Conn::Http {
                http, url, next, ..
            } => {
                *next += 1;
                let id = json!(*next);
                let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
                // The standard request headers (SEP-2243) a 2026 client sends.
                let mut post = http
                    .post(url.as_str())
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .header("mcp-protocol-version", V2026)
                    .header("mcp-method", method);
                if let Some(name) = params["name"].as_str().or(params["taskId"].as_str()) {
                    post = post.header("mcp-name", name);
                }
                let text = post
                    .body(body.to_string())
                    .send()
                    .await
                    .expect("POST")
                    .text()
                    .await
                    .expect("the answer");
                // JSON, or an SSE stream whose data lines are messages.
                let found = std::iter::once(text.as_str())
                    .chain(text.lines().filter_map(|l| l.strip_prefix("data:")))
                    .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
                    .find(|v| v.get("id") == Some(&id) && v.get("method").is_none());
                found.unwrap_or_else(|| panic!("no answer to {method} in {text}"))
            }
            Conn::Stdio {
                stdin, lines, next, ..
            } => {
                *next += 1;
                let id = json!(*next);
                let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
                let mut line = body.to_string();
                line.push('\n');
                stdin.write_all(line.as_bytes()).await.expect("write");
                stdin.flush().await.expect("flush");
                loop {
                    let line = lines
                        .next_line()
                        .await
                        .expect("read")
                        .expect("stdout ended before the reply");
                    let v: Value = serde_json::from_str(&line).expect("a JSON line");
                    if v.get("id") == Some(&id) && v.get("method").is_none() {
                        return v;
                    }
                }
            }
        }
    }

    async fn stop(self) {
        match self {
            Conn::Http { mut child, .. } => {
                let _ = child.kill().await;
            }
            Conn::Stdio {
                mut child, stdin, ..
            } => {
                drop(stdin);
                if tokio::time::timeout(Duration::from_secs(10), child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.kill().await;
                }
            }
        }
    }
}

fn workspace(model: &FakeServer) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("agentfile-bench-mcp-tasks-{}", std::process::id()));
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
        "NAME hello\nGOAL greet \"Say hello\"\nRUN main USING greet\n",
    )
    .expect("write a workflow");
    std::fs::write(
        dir.join("slow.agent"),
        "NAME slow\nGOAL wait \"Take your time over this\"\nRUN main USING wait\n",
    )
    .expect("write a workflow");
    dir
}
