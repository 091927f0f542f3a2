//! What telemetry costs a run: the time the telemetry sink's `send` takes on the
//! run's path (the event bus holds its lock meanwhile), and how fast the worker
//! drains events into the `file` exporter. Run with `cargo bench --bench telemetry`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentfile::config::{Config, TelemetryProtocol, TelemetrySection};
use agentfile::telemetry::{RunInfo, Telemetry};
use agentfile::wire::events::{Event, EventBody, ToolCallInfo};

/// One model turn's events: request, answer (1 KiB, one tool call), the call
/// and its result (2 KiB).
fn turn(seq: u64) -> Vec<Event> {
    let ev = |n: u64, body| Event {
        schema_version: 1,
        session_id: "bench".into(),
        seq: seq + n,
        ts: "2026-11-22T10:00:00.123Z".into(),
        step: Some("main".into()),
        goal: Some("review".into()),
        agent: Some("critic".into()),
        iteration: None,
        node: None,
        node_kind: None,
        replayed: false,
        body,
    };
    let args = serde_json::json!({"path": "src/lib.rs"});
    vec![
        ev(
            0,
            EventBody::LlmRequest {
                model: "gpt-4o".into(),
                turn: 1,
                messages: 5,
                tools: 8,
                digests: Default::default(),
            },
        ),
        ev(
            1,
            EventBody::LlmResponse {
                model: "gpt-4o".into(),
                turn: 1,
                input_tokens: 1200,
                output_tokens: 300,
                latency_ms: 900,
                cost_usd: Some(0.004),
                stop_reason: "tool_calls".into(),
                text: "x".repeat(1024),
                tool_calls: vec![ToolCallInfo {
                    id: "c1".into(),
                    name: "read".into(),
                    arguments: args.clone(),
                }],
            },
        ),
        ev(
            2,
            EventBody::ToolCall {
                id: "c1".into(),
                tool: "read".into(),
                arguments: args,
            },
        ),
        ev(
            3,
            EventBody::ToolResult {
                id: "c1".into(),
                tool: "read".into(),
                content: "y".repeat(2048),
                is_error: false,
                duration_ms: 2,
            },
        ),
    ]
}

fn main() {
    let dir =
        std::env::temp_dir().join(format!("agentfile-bench-telemetry-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = Config {
        telemetry: TelemetrySection {
            enabled: true,
            protocol: Some(TelemetryProtocol::File),
            path: Some(dir.clone()),
            ..TelemetrySection::default()
        },
        ..Config::default()
    };
    let info = RunInfo {
        session_id: "bench".into(),
        workflow: "bench".into(),
        agent_id: "bench".into(),
        workspace: PathBuf::from("/tmp"),
        ..RunInfo::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let telemetry = Telemetry::start(&config, &info).expect("telemetry");
    let sink = telemetry.sink();
    // `cargo test --all-targets` runs this too (without `--bench`): a smoke run.
    let bursts: u64 = if std::env::args().any(|a| a == "--bench") {
        50
    } else {
        2
    };
    let per_burst = 1000u64; // well under the queue's 4,096: nothing is dropped
    let mut sending = Duration::ZERO;
    let started = Instant::now();
    for b in 0..bursts {
        let events: Vec<Event> = (0..per_burst / 4)
            .flat_map(|t| turn(b * per_burst + t * 4 + 1))
            .collect();
        let t0 = Instant::now();
        for e in &events {
            sink.send(e);
        }
        sending += t0.elapsed();
        // Let the worker catch up before the next burst.
        while telemetry.progress().produced < (b + 1) * per_burst {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let report = rt.block_on(telemetry.finish(Duration::from_secs(10)));
    let total = started.elapsed();
    let n = bursts * per_burst;
    assert_eq!((report.dropped, report.delivered), (0, n), "{report:?}");
    println!(
        "telemetry: {n} events; send on the run's path {:?} per event; file exporter drained them at {:.0} events/s ({:?} in all)",
        sending / n as u32,
        n as f64 / total.as_secs_f64(),
        total
    );
    let _ = std::fs::remove_dir_all(&dir);
}
