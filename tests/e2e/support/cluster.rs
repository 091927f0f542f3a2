//! What the suites that run across processes share (CONTRACT §13, §22): a
//! real `nats-server -js` on loopback, `agentfile` commands pointed at it and
//! at a PostgreSQL database, workers killed when dropped, and the fake
//! model's three-goal script with a way to tell its requests apart.
//!
//! Without nats-server or PostgreSQL, [`available`] prints `SKIPPED: …` and
//! the suites pass without running.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentfile::llm::fake::{FakeReply, FakeScript};
use serde_json::Value;

use super::KEY_VAR;
use super::session::{TempDir, pg};

/// Three goals, each asked with the run's `n`: `request_key` tells which
/// run and goal a model request is for.
pub const TRIO: &str = "NAME trio\nINPUT n\nGOAL a \"Write alpha for run $n\"\nGOAL b \"Write beta for run $n\"\nGOAL c \"Write gamma for run $n\"\nRUN main USING a, b, c\n";

pub fn nats_server() -> Option<PathBuf> {
    for dir in ["/usr/sbin", "/usr/bin", "/usr/local/bin"] {
        let p = Path::new(dir).join("nats-server");
        if p.is_file() {
            return Some(p);
        }
    }
    let out = Command::new("sh")
        .args(["-c", "command -v nats-server"])
        .output()
        .ok()?;
    let p = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (!p.is_empty()).then(|| PathBuf::from(p))
}

/// The tests that start a NATS server, workers and servers, some of which
/// measure: one at a time, so they neither starve each other on a small
/// machine nor measure each other.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether nats-server and PostgreSQL are here; if not, says which is
/// missing (`SKIPPED: …`).
pub fn available() -> bool {
    if nats_server().is_none() {
        eprintln!(
            "SKIPPED: nats-server not installed (`apt-get install nats-server`, or run scripts/test.sh, which installs it)"
        );
        return false;
    }
    pg::available()
}

/// A `nats-server -js` on a free loopback port, killed when dropped.
pub struct Nats {
    child: Child,
    pub url: String,
    _dir: TempDir,
}

impl Nats {
    /// On a port the server picks itself (`-p -1`) and writes into a ports
    /// file: a port chosen here first could be taken by another test's server
    /// in between, and this test would then talk to that one.
    pub fn start() -> Nats {
        let dir = TempDir::new("nats");
        let child = Command::new(nats_server().unwrap())
            .args(["-js", "-a", "127.0.0.1", "-p", "-1", "-sd"])
            .arg(dir.path().join("store"))
            .arg("--ports_file_dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nats-server");
        let ports = dir.path().join(format!("nats-server_{}.ports", child.id()));
        let deadline = Instant::now() + Duration::from_secs(20);
        let url = loop {
            let said = std::fs::read(&ports)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|v| v["nats"][0].as_str().map(str::to_owned));
            if let Some(url) = said {
                break url;
            }
            assert!(Instant::now() < deadline, "nats-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        let addr = url.trim_start_matches("nats://").to_owned();
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(Instant::now() < deadline, "nats-server does not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Nats {
            child,
            url,
            _dir: dir,
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fake model's script: each goal of [`TRIO`] gets its own answer after
/// `latency`.
pub fn script(latency: Duration) -> FakeScript {
    let rule = |needle: &str, text: &str| {
        FakeReply::text(text)
            .with_latency(latency)
            .when([needle.to_owned()])
    };
    FakeScript {
        replies: vec![
            rule("Write gamma", "gamma-out"),
            rule("Write beta", "beta-out"),
            rule("Write alpha", "alpha-out"),
            FakeReply::text("other").with_latency(latency),
        ],
        repeat: true,
    }
}

/// The goal and run a model request of [`TRIO`] is for: (run n, goal).
pub fn request_key(body: &Value) -> Option<(u64, &'static str)> {
    let text = body.to_string();
    let goal = if text.contains("Write gamma") {
        "c"
    } else if text.contains("Write beta") {
        "b"
    } else if text.contains("Write alpha") {
        "a"
    } else {
        return None;
    };
    let at = text.find("for run ")? + "for run ".len();
    let digits: String = text[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    Some((digits.parse().ok()?, goal))
}

/// The `agentfile` under test: this build's, or `AGENTFILE_BIN` (e.g. a
/// release build, for scripts/bench-cluster.sh's figures).
pub fn binary() -> PathBuf {
    std::env::var_os("AGENTFILE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_agentfile")))
}

/// `agentfile ARGS` on workspace `ws`, NATS at `nats` and the database at
/// `db_url`, with the test key set.
pub fn command(ws: &Path, nats: &str, db_url: &str, args: &[&str]) -> Command {
    let mut c = Command::new(binary());
    c.args(args)
        .arg("--workspace")
        .arg(ws)
        .arg("--nats")
        .arg(nats)
        .current_dir(ws)
        .env(KEY_VAR, "test-key-0123456789")
        .env("AGENTFILE_DATABASE_URL", db_url)
        .env_remove("AGENTFILE_NATS_URL");
    c
}

/// A worker process, killed when dropped (a failed test leaves none behind).
pub struct Worker(pub Child);

impl std::ops::Deref for Worker {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Worker {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `agentfile worker` on `stream` with `max_runs` slots (and `extra`
/// arguments), its stderr on the test's.
pub fn worker(
    ws: &Path,
    nats: &str,
    db_url: &str,
    stream: &str,
    max_runs: usize,
    extra: &[&str],
) -> Worker {
    let max_runs = max_runs.to_string();
    let mut args = vec![
        "worker",
        "--max-runs",
        &max_runs,
        "--ack-wait",
        "2s",
        "--nats-stream",
        stream,
    ];
    args.extend_from_slice(extra);
    command(ws, nats, db_url, &args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map(Worker)
        .expect("start agentfile worker")
}
