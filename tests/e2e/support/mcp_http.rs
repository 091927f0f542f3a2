//! A running `agentfile mcp --http 127.0.0.1:0` process and raw stateless
//! 2026-07-28 requests to it: each request carries its protocol version, the
//! client's capabilities and the `Mcp-Method` / `Mcp-Name` headers, and its
//! reply is read from plain JSON or from the `data:` of an SSE event.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// How long a replica may take to start, and a request to be answered.
pub const WAIT: Duration = Duration::from_secs(60);

/// A running `agentfile mcp --http` replica, killed when dropped.
pub struct Replica {
    pub child: tokio::process::Child,
    /// Its `/mcp` URL, as it printed it.
    pub url: String,
    /// What it printed on stderr after it listened (drained in the background).
    pub log: Arc<Mutex<Vec<String>>>,
    http: reqwest::Client,
}

impl Replica {
    /// Start `cmd` (an `agentfile mcp --http 127.0.0.1:0 …`) and wait until it
    /// says where it listens. `label` prefixes its stderr lines on the test's.
    pub async fn start(mut cmd: tokio::process::Command, label: &str) -> Replica {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = tokio::time::timeout(WAIT, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(url) = line.strip_prefix("agentfile mcp: listening on ") {
                    return url.to_owned();
                }
                eprintln!("{label}: {line}");
            }
            panic!("{label} ended before listening");
        })
        .await
        .unwrap_or_else(|_| panic!("{label} did not say where it listens"));
        let log = Arc::new(Mutex::new(Vec::new()));
        let kept = log.clone();
        let label = label.to_owned();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("{label}: {line}");
                kept.lock().unwrap().push(line);
            }
        });
        Replica {
            child,
            url,
            log,
            http: crate::support::http(),
        }
    }

    /// Stop it as an operator does (SIGTERM) and wait for it.
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: a plain signal to the child this test started.
            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        }
        let _ = tokio::time::timeout(WAIT, self.child.wait()).await;
    }

    /// Kill it outright (SIGKILL), as a crash does, and reap it.
    pub async fn kill(&mut self) {
        self.child.start_kill().unwrap();
        let _ = tokio::time::timeout(WAIT, self.child.wait()).await;
    }

    /// A stateless 2026-07-28 request `method` from a client with
    /// capabilities `caps`; the JSON-RPC reply. Its `Mcp-Name` header is
    /// what the method names (a tool, a resource, a task), as rmcp wants.
    pub async fn request(&self, method: &str, params: Value, caps: Value) -> Value {
        let name = ["name", "uri", "taskId"]
            .iter()
            .find_map(|k| params[*k].as_str())
            .map(str::to_owned);
        let mut params = params;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "replicas", "version": "1"}
        });
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let mut post = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        if let Some(name) = &name {
            post = post.header("mcp-name", name);
        }
        let r = tokio::time::timeout(WAIT, post.body(body.to_string()).send())
            .await
            .unwrap_or_else(|_| panic!("{method} timed out"))
            .unwrap();
        let text = tokio::time::timeout(WAIT, r.text())
            .await
            .unwrap_or_else(|_| panic!("the reply to {method} did not end"))
            .unwrap();
        reply_of(&text)
    }
}

/// The JSON-RPC reply in a body: plain JSON, or the `data:` of an SSE event.
pub fn reply_of(text: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return v;
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC reply in {text:?}"))
}
