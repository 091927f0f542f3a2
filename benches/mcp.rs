//! `agentfile mcp` as a host sees it, over real pipes to the real binary:
//!
//! - **spawn → initialize reply**: start the process, write `initialize`, read
//!   the answer. Target: under 10 ms. (The workspace scan for `run_<name>`
//!   tools runs beside the handshake, so it does not count here.)
//! - **`tools/call validate` throughput** on one connection: sequential (write
//!   a call, wait for its answer) and pipelined (write them all, read them all).
//!
//! `cargo bench --bench mcp` times the binary of the `bench` profile (release
//! with thin LTO). Without `--bench` (as `cargo test --all-targets` runs it)
//! it does a few rounds of each as a smoke test.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

#[path = "support/bin.rs"]
mod support;

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (spawns, calls) = if full { (200, 5000) } else { (3, 20) };
    let ws = workspace();
    let bin = &support::agentfile();

    // Warm the page cache and the dynamic loader once.
    let _ = spawn_to_initialize(bin, &ws);
    let mut times: Vec<Duration> = (0..spawns).map(|_| spawn_to_initialize(bin, &ws)).collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "spawn → initialize reply ({spawns} runs): median {:.2} ms, p90 {:.2} ms, min {:.2} ms",
        ms(times[times.len() / 2]),
        ms(times[times.len() * 9 / 10]),
        ms(times[0])
    );

    let (seq, piped) = validate_throughput(bin, &ws, calls);
    println!(
        "tools/call validate, one connection, {calls} calls: sequential {seq:.0} calls/s, pipelined {piped:.0} calls/s"
    );
    let _ = std::fs::remove_dir_all(&ws);
}

fn workspace() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agentfile-bench-mcp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the benchmark workspace");
    std::fs::write(
        dir.join("hello.agent"),
        "NAME hello\nINPUT topic\nGOAL greet \"Say hello about $topic\"\nRUN main USING greet\n",
    )
    .expect("write a workflow");
    dir
}

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    fn start(bin: &Path, ws: &Path) -> Server {
        let mut child = Command::new(bin)
            .args(["mcp", "--workspace"])
            .arg(ws)
            .current_dir(ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start agentfile mcp");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Server {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, line: &str) {
        let w = self.stdin.as_mut().expect("stdin open");
        w.write_all(line.as_bytes()).expect("write");
        w.write_all(b"\n").expect("write");
        w.flush().expect("flush");
    }

    fn read(&mut self) -> String {
        let mut line = String::new();
        let n = self.stdout.read_line(&mut line).expect("read");
        assert!(n > 0, "the server closed stdout");
        line
    }

    fn stop(mut self) {
        self.stdin = None;
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "agentfile mcp exited with {status}");
    }
}

fn spawn_to_initialize(bin: &Path, ws: &Path) -> Duration {
    let started = Instant::now();
    let mut s = Server::start(bin, ws);
    s.send(INIT);
    let reply = s.read();
    let took = started.elapsed();
    assert!(reply.contains("\"protocolVersion\""), "{reply}");
    s.stop();
    took
}

fn call(id: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"validate","arguments":{{"source":"NAME n{id}\nINPUT topic DEFAULT \"x\"\nGOAL g \"Write about $topic\"\nRUN m USING g\n"}}}}}}"#
    )
}

/// (sequential, pipelined) calls per second.
fn validate_throughput(bin: &Path, ws: &Path, n: usize) -> (f64, f64) {
    let mut s = Server::start(bin, ws);
    s.send(INIT);
    s.read();
    s.send(INITIALIZED);
    // Sequential: one call in flight at a time.
    let started = Instant::now();
    for i in 1..=n {
        s.send(&call(i));
        let reply = s.read();
        debug_assert!(reply.contains("\"ok\":true"), "{reply}");
    }
    let sequential = n as f64 / started.elapsed().as_secs_f64();
    // Pipelined: calls written ahead of the answers, up to WINDOW in flight
    // (the server refuses more than 1,024 on one connection with -32007).
    const WINDOW: usize = 1000;
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut stdin = s.stdin.take().expect("stdin");
    let started = Instant::now();
    let writer = {
        let answered = answered.clone();
        std::thread::spawn(move || {
            for (sent, i) in (n + 1..=2 * n).enumerate() {
                if sent >= WINDOW + answered.load(std::sync::atomic::Ordering::Acquire) {
                    stdin.flush().expect("flush");
                    while sent >= WINDOW + answered.load(std::sync::atomic::Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                }
                stdin.write_all(call(i).as_bytes()).expect("write");
                stdin.write_all(b"\n").expect("write");
            }
            stdin.flush().expect("flush");
            stdin
        })
    };
    for done in 1..=n {
        let reply = s.read();
        assert!(reply.contains("\"result\""), "{reply}");
        answered.store(done, std::sync::atomic::Ordering::Release);
    }
    let pipelined = n as f64 / started.elapsed().as_secs_f64();
    s.stdin = Some(writer.join().expect("writer"));
    s.stop();
    (sequential, pipelined)
}
