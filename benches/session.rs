//! Session store costs that a run feels:
//!
//! - `append`: one event appended to the SQLite store, each call its own
//!   durable transaction, with `synchronous=NORMAL` (the default) and `FULL`.
//!   Target: at least 20,000 events/s with the default.
//! - `append_batch_full`: group commit under `FULL`, batches of 10 and 100.
//! - `append_file`: the file store, which fsyncs every event.
//! - `resume_read`: `events(id, 0)` of a 1,000-event session in a database that
//!   also holds 1 or 200 other sessions of 1,000 events, written interleaved
//!   as concurrent runs would. Resume cost should depend on the session, not on
//!   the database. Run as a test (`cargo test --all-targets`, no `--bench`),
//!   the sessions hold 100 events: each benchmark runs once, and a debug
//!   build need not write 201,000 events first.
//!
//! Events are a realistic mix (request, response with text and a tool call,
//! tool call, tool result; about 400 bytes each). The files live under
//! `target/tmp`, on the same disk as the build, so fsync is real.
//!
//! Run with `cargo bench --bench session`.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::PathBuf;

use agentfile::session::sqlite::Options;
use agentfile::session::{
    Durability, FileStore, SessionMeta, SessionStatus, SessionStore, SqliteStore,
};
use agentfile::wire::events::{Event, EventBody, ToolCallInfo, rfc3339};
use divan::counter::ItemsCount;
use serde_json::json;

fn main() {
    divan::main();
}

/// A fresh, empty folder for one benchmark.
fn fresh_dir(label: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bench-session-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the benchmark folder");
    dir
}

fn sqlite(label: &str, durability: Durability) -> SqliteStore {
    let options = Options {
        durability,
        ..Options::default()
    };
    SqliteStore::open_with(&fresh_dir(label).join("sessions.db"), options)
        .expect("open the benchmark database")
}

fn meta(id: &str) -> SessionMeta {
    let now = rfc3339(std::time::SystemTime::now());
    SessionMeta {
        id: id.to_owned(),
        workflow: "bench".into(),
        path: "/bench/Agentfile".into(),
        workspace: "/bench".into(),
        inputs: BTreeMap::from([("topic".into(), "storage".into())]),
        status: SessionStatus::Running,
        created_at: now.clone(),
        updated_at: now,
        last_seq: 0,
    }
}

/// Event `seq` of session `id`: the four kinds of a tool-using turn in turn.
fn event(id: &str, seq: u64) -> Event {
    let call = format!("call-{}", seq / 4);
    let body = match seq % 4 {
        0 => EventBody::LlmRequest {
            model: "fake-model".into(),
            turn: (seq / 4) as u32,
            messages: 6,
            tools: 8,
            digests: Default::default(),
        },
        1 => EventBody::LlmResponse {
            model: "fake-model".into(),
            turn: (seq / 4) as u32,
            input_tokens: 1800,
            output_tokens: 90,
            latency_ms: 950,
            cost_usd: Some(0.0068),
            stop_reason: "tool_use".into(),
            text: "I will read the configuration next, then compare it with the defaults.".into(),
            tool_calls: vec![ToolCallInfo {
                id: call,
                name: "read".into(),
                arguments: json!({"path": format!("src/module_{seq}.rs")}),
            }],
        },
        2 => EventBody::ToolCall {
            id: call,
            tool: "read".into(),
            arguments: json!({"path": format!("src/module_{seq}.rs")}),
        },
        _ => EventBody::ToolResult {
            id: call,
            tool: "read".into(),
            content: "fn main() {\n    println!(\"hello\");\n}\n".repeat(8),
            is_error: false,
            duration_ms: 2,
        },
    };
    Event {
        schema_version: 1,
        session_id: id.to_owned(),
        seq,
        ts: rfc3339(std::time::SystemTime::now()),
        step: Some("work".into()),
        goal: Some("explore".into()),
        agent: Some("reader".into()),
        iteration: None,
        node: None,
        node_kind: None,
        replayed: false,
        body,
    }
}

#[divan::bench(args = ["normal", "full"], sample_count = 100, sample_size = 200)]
fn append(bencher: divan::Bencher, durability: &str) {
    let durability = if durability == "full" {
        Durability::Full
    } else {
        Durability::Normal
    };
    let store = sqlite(&format!("append-{durability:?}"), durability);
    store.create(&meta("bench")).expect("create");
    let seq = Cell::new(0);
    bencher
        .counter(ItemsCount::new(1usize))
        .with_inputs(|| {
            seq.set(seq.get() + 1);
            event("bench", seq.get())
        })
        .bench_local_refs(|e| store.append(e).expect("append"));
}

#[divan::bench(args = [10, 100])]
fn append_batch_full(bencher: divan::Bencher, batch: u64) {
    let store = sqlite(&format!("batch-{batch}"), Durability::Full);
    store.create(&meta("bench")).expect("create");
    let seq = Cell::new(0);
    bencher
        .counter(ItemsCount::new(batch as usize))
        .with_inputs(|| {
            let first = seq.get() + 1;
            seq.set(seq.get() + batch);
            (first..first + batch)
                .map(|s| event("bench", s))
                .collect::<Vec<_>>()
        })
        .bench_local_refs(|events| store.append_batch(events).expect("append"));
}

#[divan::bench(sample_count = 100, sample_size = 20)]
fn append_file(bencher: divan::Bencher) {
    let store = FileStore::open(&fresh_dir("file")).expect("open");
    store.create(&meta("bench")).expect("create");
    let seq = Cell::new(0);
    bencher
        .counter(ItemsCount::new(1usize))
        .with_inputs(|| {
            seq.set(seq.get() + 1);
            event("bench", seq.get())
        })
        .bench_local_refs(|e| store.append(e).expect("append"));
}

#[divan::bench(args = [1, 200], sample_count = 30)]
fn resume_read(bencher: divan::Bencher, others: usize) {
    // `cargo bench` passes `--bench`; `cargo test` runs each benchmark once.
    let benchmarking = std::env::args().any(|a| a == "--bench");
    let events: u64 = if benchmarking { 1_000 } else { 100 };
    let store = sqlite(&format!("resume-{others}"), Durability::Normal);
    let mut ids: Vec<String> = (0..others).map(|i| format!("other-{i}")).collect();
    ids.push("target".into());
    for id in &ids {
        store.create(&meta(id)).expect("create");
    }
    // Interleaved, as concurrent runs write: the target's rows are spread
    // over the whole table.
    for seq in 1..=events {
        let round: Vec<Event> = ids.iter().map(|id| event(id, seq)).collect();
        store.append_batch(&round).expect("append");
    }
    bencher
        .counter(ItemsCount::new(events as usize))
        .bench_local(|| {
            let read = store.events("target", 0).expect("read");
            assert_eq!(read.len() as u64, events);
            read
        });
}
