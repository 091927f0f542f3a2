//! Load through `agentfile serve`: N concurrent runs of a small workflow on one
//! connection, against the loopback fake provider answering at once.
//!
//! Every run is sent in one burst (`run` with `wait: true`), so all N are in
//! flight together (`--max-runs N`); the bench reads every reply and every
//! `event` notification, checks all runs completed, and reports the wall time,
//! runs per second, and the server's peak RSS (VmHWM). Target: 1,000 runs
//! complete with peak RSS under 300 MB.
//!
//! `cargo bench --bench serve_load` (release profile); `RUNS=5000` to change N.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use agentfile::llm::fake::{FakeReply, FakeScript, FakeServer};
use serde_json::{Value, json};

const WORKFLOW: &str = "NAME small\nINPUT topic DEFAULT \"load\"\nGOAL outline \"Outline $topic\"\nGOAL summary \"Summarise $outline\"\nRUN main USING outline, summary\n";

#[path = "support/bin.rs"]
mod support;

fn main() {
    // `cargo bench` passes --bench; under `cargo test --all-targets` this is a
    // quick smoke test of the same path with fewer runs.
    let full = std::env::args().any(|a| a == "--bench");
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if full { 1000 } else { 50 });
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let server = rt
        .block_on(FakeServer::start_script(
            FakeScript {
                replies: vec![FakeReply::text("an answer").with_usage(50, 5)],
                repeat: true,
            },
            ([127, 0, 0, 1], 0).into(),
        ))
        .expect("fake provider");
    let dir = std::env::temp_dir().join(format!("agentfile-serve-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("workspace");
    std::fs::write(dir.join("Agentfile"), WORKFLOW).expect("workflow");
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}\"\napi_key_env = \"BENCH_KEY\"\n",
            server.base_url()
        ),
    )
    .expect("config");

    let mut child = Command::new(support::agentfile())
        .args(["serve", "--max-runs", &runs.to_string()])
        .current_dir(&dir)
        .env("BENCH_KEY", "bench")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start agentfile serve");
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");

    let started = Instant::now();
    let writer = std::thread::spawn(move || {
        let mut burst = String::new();
        for i in 0..runs {
            burst.push_str(
                &json!({"jsonrpc": "2.0", "id": i, "method": "run",
                        "params": {"path": "Agentfile", "inputs": {"topic": format!("t{i}")}}})
                .to_string(),
            );
            burst.push('\n');
        }
        stdin.write_all(burst.as_bytes()).expect("send");
        stdin
    });

    let mut completed = 0;
    let mut replies = 0;
    let mut events = 0u64;
    let mut peak_kb = 0;
    let mut lines = BufReader::new(stdout).lines();
    while replies < runs {
        let Some(Ok(line)) = lines.next() else {
            panic!("serve closed stdout after {replies} replies");
        };
        let v: Value = serde_json::from_str(&line).expect("JSON line");
        if v["method"] == "event" {
            events += 1;
            if events.is_multiple_of(2000) {
                peak_kb = peak_kb.max(vm_hwm_kb(pid));
            }
            continue;
        }
        replies += 1;
        if v["result"]["status"] == "completed" {
            completed += 1;
        } else {
            eprintln!("not completed: {v}");
        }
    }
    let elapsed = started.elapsed();
    peak_kb = peak_kb.max(vm_hwm_kb(pid));
    drop(writer.join().expect("writer"));
    let _ = child.wait();

    println!(
        "serve load: {runs} concurrent runs of a 2-goal workflow (zero-latency fake provider)"
    );
    println!("  completed       {completed}/{runs}");
    println!("  event lines     {events}");
    println!(
        "  wall time       {:.2} s  ({:.0} runs/s)",
        elapsed.as_secs_f64(),
        runs as f64 / elapsed.as_secs_f64()
    );
    println!(
        "  peak RSS        {:.1} MB (target < 300 MB)",
        peak_kb as f64 / 1024.0
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(completed, runs, "every run must complete");
}

/// The process's peak resident set (VmHWM) in KiB; 0 where /proc is missing.
fn vm_hwm_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
