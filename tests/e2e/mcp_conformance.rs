//! The official MCP conformance suite (`@modelcontextprotocol/conformance`)
//! against `agentfile mcp`: its server scenarios (`--suite all`) against
//! `agentfile mcp --http` on loopback, and against `agentfile mcp` on stdio
//! through a small HTTP→stdio bridge written here (the suite speaks
//! Streamable HTTP only).
//!
//! Each run reads an expected-failures baseline from `tests/mcp_conformance/`
//! (`--expected-failures`): every check that fails there is listed with the
//! reason (most need the test tools of the suite's "everything" server, which
//! agentfile does not ship). The suite exits non-zero on a failure that is not
//! listed, and on a listed one that now passes — both fail the test.
//!
//! Needs `AGENTFILE_NODE` (Node ≥ 22) and `AGENTFILE_CONFORMANCE` (the suite's
//! `dist/index.js`, 0.2.0-alpha.12); `AGENTFILE_CONFORMANCE_V01` (0.1.16) adds
//! the 0.1.x line. `scripts/test.sh` installs them under `target/`. Without
//! them the tests fail when `CI` is set and are skipped with a notice
//! otherwise.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, oneshot};

/// `(node, suite)` from the environment, or `None` (skipped, except in CI).
fn suite(var: &str) -> Option<(OsString, OsString)> {
    let node = std::env::var_os("AGENTFILE_NODE").filter(|p| !p.is_empty());
    let suite = std::env::var_os(var).filter(|p| !p.is_empty());
    match (node, suite) {
        (Some(node), Some(suite)) => Some((node, suite)),
        _ => {
            if std::env::var_os("CI").is_some() {
                panic!(
                    "AGENTFILE_NODE and {var} are not set: CI must run the MCP conformance suite (scripts/test.sh installs it and sets them)"
                );
            }
            eprintln!(
                "skipped: set AGENTFILE_NODE (Node >= 22) and {var} (the conformance suite's dist/index.js; scripts/test.sh does) to run the MCP conformance suite"
            );
            None
        }
    }
}

fn temp_dir(name: &str) -> PathBuf {
    crate::support::tmp("mcp-conformance", name)
}

/// The shipped binary, `agentfile mcp`: its program and first arguments.
fn agentfile() -> (PathBuf, Vec<&'static str>) {
    (env!("CARGO_BIN_EXE_agentfile").into(), vec!["mcp"])
}

/// `examples/mcp_fixtures.rs`, built beside this test by `cargo build
/// --example mcp_fixtures` (scripts/test.sh: `cargo test` builds examples as
/// test harnesses only); `None` when it is not built (skipped,
/// except in CI).
fn fixtures() -> Option<(PathBuf, Vec<&'static str>)> {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent()?.parent()?.join("examples/mcp_fixtures");
    if bin.is_file() {
        return Some((bin, Vec::new()));
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "{} is not built: scripts/test.sh builds it with `cargo build --example mcp_fixtures`",
            bin.display()
        );
    }
    eprintln!(
        "skipped: {} is not built (`cargo build --example mcp_fixtures`)",
        bin.display()
    );
    None
}

/// `PROGRAM ARGS --http 127.0.0.1:0` in `dir`, and the URL it listens on.
async fn start_http(
    (program, args): &(PathBuf, Vec<&str>),
    dir: &Path,
) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .args(["--http", "127.0.0.1:0", "--workspace"])
        .arg(dir)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("cannot start the server with --http");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("agentfile mcp: listening on ") {
                return url.trim().to_owned();
            }
        }
        panic!("agentfile mcp --http ended without listening");
    })
    .await
    .expect("agentfile mcp --http did not say where it listens");
    // Keep draining stderr so the server never blocks on it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

/// Run the suite's server scenarios against `url` with the baseline
/// `tests/mcp_conformance/<baseline>`; panics unless it passes.
async fn run_suite(node: &OsString, suite: &OsString, url: &str, baseline: &str, out: &Path) {
    let baseline = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp_conformance")
        .join(baseline);
    let mut cmd = tokio::process::Command::new(node);
    cmd.arg(suite)
        .args([
            "server",
            "--url",
            url,
            "--suite",
            "all",
            "--expected-failures",
        ])
        .arg(&baseline)
        .arg("-o")
        .arg(out)
        .current_dir(out)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let run = tokio::time::timeout(Duration::from_secs(240), cmd.output())
        .await
        .expect("the conformance suite timed out")
        .expect("cannot start the conformance suite");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    // The summary: one line per scenario with its passed/failed checks.
    let summary = stdout
        .find("=== SUMMARY ===")
        .map_or(&stdout[..], |i| &stdout[i..]);
    eprintln!("{summary}");
    assert!(
        run.status.success(),
        "the conformance suite failed against {url} (baseline {}):\n{summary}\n{stderr}",
        baseline.display()
    );
    assert!(summary.contains("Baseline check passed"), "{summary}");
}

#[tokio::test]
async fn the_conformance_suite_passes_against_mcp_http() {
    let Some((node, suite)) = suite("AGENTFILE_CONFORMANCE") else {
        return;
    };
    let dir = temp_dir("http");
    let out = temp_dir("http-results");
    let (_server, url) = start_http(&agentfile(), &dir).await;
    run_suite(&node, &suite, &url, "http-0.2.yaml", &out).await;
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&out);
}

#[tokio::test]
async fn the_conformance_suite_0_1_passes_against_mcp_http() {
    let Some((node, suite)) = suite("AGENTFILE_CONFORMANCE_V01") else {
        return;
    };
    let dir = temp_dir("http01");
    let out = temp_dir("http01-results");
    let (_server, url) = start_http(&agentfile(), &dir).await;
    run_suite(&node, &suite, &url, "http-0.1.yaml", &out).await;
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&out);
}

#[tokio::test]
async fn the_conformance_suite_passes_against_mcp_stdio_through_a_bridge() {
    let Some((node, suite)) = suite("AGENTFILE_CONFORMANCE") else {
        return;
    };
    let dir = temp_dir("stdio");
    let out = temp_dir("stdio-results");
    let url = Bridge::start(agentfile(), dir.clone()).await;
    run_suite(&node, &suite, &url, "stdio-0.2.yaml", &out).await;
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&out);
}

/// The suite's test tools (`examples/mcp_fixtures.rs`: agentfile's server
/// with an `ExtraTools` registry) run the scenarios that need them.
#[tokio::test]
async fn the_conformance_suite_passes_against_the_fixtures_over_http() {
    let Some((node, suite)) = suite("AGENTFILE_CONFORMANCE") else {
        return;
    };
    let Some(fixtures) = fixtures() else {
        return;
    };
    let dir = temp_dir("fixtures");
    let out = temp_dir("fixtures-results");
    let (_server, url) = start_http(&fixtures, &dir).await;
    run_suite(&node, &suite, &url, "fixtures-0.2.yaml", &out).await;
    if let Some((node, suite)) = std::env::var_os("AGENTFILE_CONFORMANCE_V01").map(|s| (node, s)) {
        let out = temp_dir("fixtures01-results");
        run_suite(&node, &suite, &url, "fixtures-0.1.yaml", &out).await;
        let _ = std::fs::remove_dir_all(&out);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&out);
}

#[tokio::test]
async fn the_conformance_suite_passes_against_the_fixtures_on_stdio_through_a_bridge() {
    let Some((node, suite)) = suite("AGENTFILE_CONFORMANCE") else {
        return;
    };
    let Some(fixtures) = fixtures() else {
        return;
    };
    let dir = temp_dir("fixtures-stdio");
    let out = temp_dir("fixtures-stdio-results");
    let url = Bridge::start(fixtures, dir.clone()).await;
    run_suite(&node, &suite, &url, "fixtures-stdio-0.2.yaml", &out).await;
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&out);
}

/// One `agentfile mcp` process on stdio, as the bridge drives it: requests
/// go in with ids of the bridge's own (clients reuse theirs), answers come
/// back by that id.
struct Stdio1 {
    stdin: Mutex<tokio::process::ChildStdin>,
    pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>,
    _child: tokio::process::Child,
}

impl Stdio1 {
    fn spawn((program, args): &(PathBuf, Vec<&str>), dir: &Path) -> Arc<Stdio1> {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .arg("--workspace")
            .arg(dir)
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("cannot start the server on stdio");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>> = Arc::default();
        let this = Arc::new(Stdio1 {
            stdin: Mutex::new(stdin),
            pending: pending.clone(),
            _child: child,
        });
        let weak = Arc::downgrade(&this);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let is_answer = msg.get("result").is_some() || msg.get("error").is_some();
                match (msg.get("id").and_then(Value::as_u64), is_answer) {
                    (Some(id), true) => {
                        if let Some(tx) = pending.lock().await.remove(&id) {
                            let _ = tx.send(msg);
                        }
                    }
                    // A request from the server (elicitation, sampling,
                    // roots): a plain JSON POST has no stream to carry it.
                    (_, false) if msg.get("id").is_some() && msg.get("method").is_some() => {
                        let Some(this) = weak.upgrade() else { break };
                        let answer = json!({"jsonrpc": "2.0", "id": msg["id"], "error": {
                            "code": -32601,
                            "message": "the conformance bridge cannot forward server-to-client requests"
                        }});
                        this.write(&answer).await;
                    }
                    // Notifications (progress, logs, list_changed): dropped.
                    _ => {}
                }
            }
        });
        this
    }

    async fn write(&self, msg: &Value) {
        let mut line = serde_json::to_vec(msg).unwrap();
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        let _ = stdin.write_all(&line).await;
        let _ = stdin.flush().await;
    }

    /// Send a request (with a fresh id) and wait for its answer, given back
    /// with the client's id.
    async fn request(&self, mut msg: Value, id: u64) -> Option<Value> {
        let theirs = msg["id"].take();
        msg["id"] = json!(id);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().await.insert(id, tx);
        self.write(&msg).await;
        let mut answer = tokio::time::timeout(Duration::from_secs(60), rx)
            .await
            .ok()?
            .ok()?;
        answer["id"] = theirs;
        Some(answer)
    }
}

/// An HTTP→stdio bridge on loopback: a POSTed JSON-RPC message goes to an
/// `agentfile mcp` child on stdio and its answer comes back as the JSON
/// response. Each `initialize` starts a child of its own (its
/// `Mcp-Session-Id` routes the session's later requests); requests without a
/// session (2026-07-28, stateless) share one child.
struct Bridge {
    server: (PathBuf, Vec<&'static str>),
    dir: PathBuf,
    sessions: Mutex<HashMap<String, Arc<Stdio1>>>,
    stateless: Mutex<Option<Arc<Stdio1>>>,
    next: AtomicU64,
}

type Body = Full<Bytes>;

impl Bridge {
    async fn start(server: (PathBuf, Vec<&'static str>), dir: PathBuf) -> String {
        let bridge = Arc::new(Bridge {
            server,
            dir,
            sessions: Mutex::default(),
            stateless: Mutex::default(),
            next: AtomicU64::new(1),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    break;
                };
                let bridge = bridge.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let bridge = bridge.clone();
                        async move { Ok::<_, std::convert::Infallible>(bridge.handle(req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        url
    }

    async fn handle(&self, req: Request<hyper::body::Incoming>) -> Response<Body> {
        let session = req
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        match *req.method() {
            Method::POST => {}
            Method::DELETE => {
                let gone = match &session {
                    Some(s) => self.sessions.lock().await.remove(s).is_some(),
                    None => false,
                };
                return status(if gone {
                    StatusCode::OK
                } else {
                    StatusCode::NOT_FOUND
                });
            }
            _ => return status(StatusCode::METHOD_NOT_ALLOWED),
        }
        let Ok(body) = req.into_body().collect().await else {
            return status(StatusCode::BAD_REQUEST);
        };
        let Ok(msg) = serde_json::from_slice::<Value>(&body.to_bytes()) else {
            return json_response(
                StatusCode::BAD_REQUEST,
                &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse error"}}),
                None,
            );
        };
        let (child, new_session) = if msg["method"] == "initialize" {
            let id = format!("bridge-{}", self.next.fetch_add(1, Ordering::Relaxed));
            let child = Stdio1::spawn(&self.server, &self.dir);
            self.sessions.lock().await.insert(id.clone(), child.clone());
            (child, Some(id))
        } else if let Some(s) = &session {
            match self.sessions.lock().await.get(s) {
                Some(c) => (c.clone(), None),
                None => return status(StatusCode::NOT_FOUND),
            }
        } else {
            let mut slot = self.stateless.lock().await;
            (
                slot.get_or_insert_with(|| Stdio1::spawn(&self.server, &self.dir))
                    .clone(),
                None,
            )
        };
        if msg.get("id").is_none() {
            child.write(&msg).await;
            return status(StatusCode::ACCEPTED);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        match child.request(msg, id).await {
            Some(answer) => json_response(StatusCode::OK, &answer, new_session),
            None => status(StatusCode::BAD_GATEWAY),
        }
    }
}

fn status(code: StatusCode) -> Response<Body> {
    Response::builder()
        .status(code)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

fn json_response(code: StatusCode, body: &Value, session: Option<String>) -> Response<Body> {
    let mut r = Response::builder()
        .status(code)
        .header("content-type", "application/json");
    if let Some(s) = session {
        r = r.header("mcp-session-id", s);
    }
    r.body(Full::new(Bytes::from(serde_json::to_vec(body).unwrap())))
        .unwrap()
}
