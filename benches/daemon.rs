//! `agentfile daemon` (CONTRACT §15) as a deployment sees it: the real binary
//! on a real SQLite store, workflows with one `bash` step (`sleep 0`), so no
//! model is needed.
//!
//! - **fire jitter**: a 1-second schedule for a while; for each fire, its
//!   session's `run_started` time minus the instant it was scheduled for
//!   (`triggers history`). Target: p99 ≤ 50 ms.
//! - **webhook → 202**: `[daemon] webhooks = "127.0.0.1:0"`, signed
//!   deliveries with distinct delivery ids, one after the other on a
//!   kept-alive connection (each starts a run), timed on the client to the
//!   whole `202` answer. Target: p99 ≤ 10 ms.
//! - **idle daemon with 1,000 schedules**: 1,000 workflows with a yearly
//!   schedule that does not fire while measured; once all are registered,
//!   CPU (`utime + stime` in `/proc/PID/stat`) over 30 s and memory
//!   (`VmRSS`, `VmHWM` in `/proc/PID/status`), with the default rescan
//!   interval and with `--rescan 30s`. Target: < 1 % of a core, ≤ 50 MB.
//!
//! `cargo bench --bench daemon` times the binary of the `bench` profile
//! (`AGENTFILE_BIN=PATH` times another build).
//! Without `--bench` (as `cargo test --all-targets` runs it) every part runs
//! briefly and small, as a smoke test.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const SECRET: &str = "bench-webhook-secret";

#[path = "support/bin.rs"]
mod support;

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (jitter_s, deliveries, schedules, idle_s) = if full {
        (30, 300, 1000, 30)
    } else {
        (3, 10, 20, 2)
    };
    jitter(jitter_s);
    webhook(deliveries);
    idle(schedules, idle_s, None);
    if full {
        idle(schedules, idle_s, Some("30s"));
    }
}

/// The binary measured: `AGENTFILE_BIN` when set, else the one cargo built
/// with this bench.
fn bin() -> PathBuf {
    support::agentfile()
}

/// A 1-second schedule for `secs` seconds: `run_started` − `scheduled_for`.
fn jitter(secs: u64) {
    let ws = Workspace::new("jitter");
    ws.workflow(
        "tick",
        "  - kind: schedule\n    cron: \"* * * * * *\"\n",
        "",
    );
    let d = Daemon::start(&ws, &[], &[]);
    d.registered(1);
    std::thread::sleep(Duration::from_secs(secs));
    d.stop();
    let fires = ws.json(&[
        "triggers", "history", "--limit", "100000", "--format", "json",
    ]);
    let mut late = Vec::new();
    for f in fires["fires"].as_array().expect("fires") {
        if f["outcome"] != "fired" {
            continue;
        }
        let Some(id) = f["session_id"].as_str() else {
            continue;
        };
        let scheduled = instant_ms(&f["scheduled_for"]);
        let shown = ws.json(&["sessions", "show", id, "--format", "json"]);
        let started = shown["events"]
            .as_array()
            .expect("events")
            .iter()
            .find(|e| e["type"] == "run_started")
            .map(|e| instant_ms(&e["ts"]))
            .expect("a run_started event");
        late.push(Duration::from_millis((started - scheduled).max(0) as u64));
    }
    assert!(
        late.len() as u64 + 2 >= secs,
        "{} fires in {secs} s: {fires}",
        late.len()
    );
    report(
        &format!("fire jitter, scheduled instant → run_started, 1-second schedule for {secs} s"),
        late,
    );
}

/// `n` signed deliveries, each timed to its whole `202` answer.
fn webhook(n: usize) {
    let ws = Workspace::new("webhook");
    ws.config("[daemon]\nwebhooks = \"127.0.0.1:0\"\n");
    ws.workflow(
        "hook",
        "  - kind: webhook\n    path: /hook\n",
        ", properties: { topic: { type: string } }, required: [topic]",
    );
    let d = Daemon::start(&ws, &[], &[("AGENTFILE_WEBHOOK_SECRET", SECRET)]);
    let base = d.webhooks.clone().expect("the webhook listener's address");
    let url = format!("{base}hook");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let times = runtime.block_on(async {
        let http = {
            agentfile::llm::install_tls();
            reqwest::Client::new()
        };
        let post = |i: usize| {
            let body = format!(r#"{{"topic": "delivery {i}"}}"#);
            let sig = format!("sha256={}", hmac_hex(SECRET.as_bytes(), body.as_bytes()));
            http.post(&url)
                .header("content-type", "application/json")
                .header("x-agentfile-signature", sig)
                .header("x-agentfile-delivery", format!("bench-{i}"))
                .body(body)
        };
        // Warm up: the connection, the first session.
        for i in 0..3 {
            let r = post(i).send().await.expect("POST");
            assert_eq!(r.status(), 202, "{}", r.text().await.unwrap_or_default());
        }
        let mut times = Vec::with_capacity(n);
        for i in 3..n + 3 {
            let req = post(i);
            let t = Instant::now();
            let r = req.send().await.expect("POST");
            let status = r.status();
            let body = r.bytes().await.expect("the answer");
            times.push(t.elapsed());
            assert_eq!(status, 202, "{}", String::from_utf8_lossy(&body));
        }
        times
    });
    d.stop();
    report(
        &format!("webhook request → 202, {n} signed deliveries one after another"),
        times,
    );
}

/// `count` yearly schedules that do not fire; CPU and memory over `secs`.
fn idle(count: usize, secs: u64, rescan: Option<&str>) {
    let ws = Workspace::new("idle");
    // 1 January, 00:00: not while this runs, unless run over New Year.
    for i in 0..count {
        ws.workflow(
            &format!("y{i:04}"),
            "  - kind: schedule\n    cron: \"0 0 1 1 *\"\n    timezone: UTC\n",
            "",
        );
    }
    let mut args = Vec::new();
    if let Some(r) = rescan {
        args = vec!["--rescan", r];
    }
    let started = Instant::now();
    let d = Daemon::start(&ws, &args, &[]);
    d.registered(count);
    let ready = started.elapsed();
    // Let the schedule tasks start and a rescan or two pass.
    std::thread::sleep(Duration::from_secs(if secs > 5 { 5 } else { 1 }));
    let pid = d.child.id();
    let ticks0 = cpu_ticks(pid);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let ticks = cpu_ticks(pid) - ticks0;
    let wall = t0.elapsed().as_secs_f64();
    let hz = clock_ticks_per_second();
    let (rss, hwm) = (status_kib(pid, "VmRSS:"), status_kib(pid, "VmHWM:"));
    d.stop();
    let fires = ws.json(&["triggers", "history", "--format", "json"]);
    assert_eq!(
        fires["fires"].as_array().map_or(0, Vec::len),
        0,
        "nothing fires while measured: {fires}"
    );
    println!(
        "idle daemon, {count} schedules, rescan {}: {:.2} % of a core over {secs} s, RSS {:.1} MB, peak RSS {:.1} MB (all registered {:.2} s after start)",
        rescan.unwrap_or("2s (default)"),
        ticks as f64 / hz / wall * 100.0,
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0,
        ready.as_secs_f64()
    );
}

fn report(what: &str, mut times: Vec<Duration>) {
    assert!(!times.is_empty(), "{what}: nothing measured");
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let at = |q: f64| times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1];
    println!(
        "{what} (n = {}): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        times.len(),
        ms(at(0.50)),
        ms(at(0.99)),
        ms(times[times.len() - 1])
    );
}

fn instant_ms(v: &Value) -> i64 {
    let s = v.as_str().expect("an instant");
    agentfile::session::fires::instant_ms(s).unwrap_or_else(|| panic!("not an instant: {s}"))
}

/// A workspace folder, removed at the end.
struct Workspace(PathBuf);

impl Workspace {
    fn new(what: &str) -> Workspace {
        let p = std::env::temp_dir().join(format!(
            "agentfile-bench-daemon-{what}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create the benchmark workspace");
        Workspace(p)
    }

    fn config(&self, toml: &str) {
        std::fs::write(self.0.join("agent.toml"), toml).expect("write the config");
    }

    /// `.workflows/<id>/WORKFLOW.md` with `triggers` (YAML list items) and
    /// one `sleep 0` step; `props` goes into the input schema.
    fn workflow(&self, id: &str, triggers: &str, props: &str) {
        let d = self.0.join(".workflows").join(id);
        std::fs::create_dir_all(&d).expect("create a workflow folder");
        std::fs::write(
            d.join("WORKFLOW.md"),
            format!(
                "---\nname: {id}\nid: {id}\ndescription: A benchmark.\nversion: 1.0.0\ninputs: {{ type: object{props} }}\noutputs: {{ type: object }}\ntriggers:\n{triggers}steps:\n  - id: wait\n    kind: tool\n    tool: bash\n    inputs: {{ command: \"sleep 0\" }}\n---\n# {id}\n"
            ),
        )
        .expect("write a workflow");
        std::fs::write(d.join("policy.toml"), "[bash]\nallowlist = [\"sleep *\"]\n")
            .expect("write a policy");
    }

    /// `agentfile ARGS --workspace WS`, its stdout as JSON.
    fn json(&self, args: &[&str]) -> Value {
        let out = Command::new(bin())
            .args(args)
            .arg("--workspace")
            .arg(&self.0)
            .output()
            .expect("run agentfile");
        assert!(
            out.status.success(),
            "agentfile {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("JSON")
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `agentfile daemon` on a workspace; killed when dropped.
struct Daemon {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
    webhooks: Option<String>,
}

impl Daemon {
    fn start(ws: &Workspace, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let mut child = Command::new(bin())
            .args(["daemon", "--workspace"])
            .arg(&ws.0)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start agentfile daemon");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut d = Daemon {
            child,
            lines,
            webhooks: None,
        };
        if env.iter().any(|(k, _)| *k == "AGENTFILE_WEBHOOK_SECRET") {
            d.webhooks = Some(d.wait_for(|l| {
                l.strip_prefix("agentfile daemon: webhooks on ")
                    .map(|u| u.trim().to_owned())
            }));
        }
        d
    }

    /// The first stderr line `f` accepts.
    fn wait_for<T>(&self, mut f: impl FnMut(&str) -> Option<T>) -> T {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(120))
                .expect("the daemon ended or said nothing for 2 minutes");
            if let Some(t) = f(&line) {
                return t;
            }
            assert!(!line.contains(" refused: "), "{line}");
        }
    }

    /// Wait until the daemon has said `n` triggers are registered.
    fn registered(&self, n: usize) {
        let mut seen = 0;
        self.wait_for(|l| {
            if l.ends_with(") registered") {
                seen += 1;
            }
            (seen == n).then_some(())
        });
    }

    /// SIGTERM and wait for the exit.
    fn stop(mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `utime + stime` of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the command's closing parenthesis; utime and stime are
    // the 14th and 15th of the whole line.
    let rest = &stat[stat.rfind(')').expect("a command name") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime")
}

fn clock_ticks_per_second() -> f64 {
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 { hz as f64 } else { 100.0 }
}

/// A `Vm…:` line of `/proc/PID/status`, in KiB.
fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// HMAC-SHA256 of `body` under `key`, as hex (RFC 2104 over sha2).
fn hmac_hex(key: &[u8], body: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let (mut ipad, mut opad) = ([0x36u8; 64], [0x5cu8; 64]);
    for i in 0..64 {
        ipad[i] ^= k[i];
        opad[i] ^= k[i];
    }
    let inner = Sha256::new()
        .chain_update(ipad)
        .chain_update(body)
        .finalize();
    let mac = Sha256::new()
        .chain_update(opad)
        .chain_update(inner)
        .finalize();
    mac.iter().map(|b| format!("{b:02x}")).collect()
}
