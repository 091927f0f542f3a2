//! Interpreter overhead of the step graph: a map over N items whose body is one
//! tool node calling a no-op tool, with no session store and no model, so what
//! is timed is the interpreter itself — scopes, paths, journal lookups,
//! events, the concurrency bound.
//!
//! Target: under 10 µs per node, and memory flat in the number of completed
//! nodes beyond their outputs. Run with `cargo bench --bench graph`; it prints
//! the per-node figure and the peak RSS for 10,000 and 50,000 items.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentfile::events::EventBus;
use agentfile::executor::{ApproveAll, Limits, ModelError, Models, RunSpec, Services, execute};
use agentfile::llm::{CancellationToken, Provider, ToolDef};
use agentfile::plan::{Plan, define_step, define_workflow};
use agentfile::tools::{CallResult, ToolContext, ToolOutput, ToolSet};
use futures::future::BoxFuture;
use serde_json::{Value, json};

fn main() {
    divan::main();
    report();
}

struct NoModel;

impl Models for NoModel {
    fn provider(&self, _: Option<&str>) -> Result<Arc<dyn Provider>, ModelError> {
        Err("no model".into())
    }
}

/// Answers every call at once with a short JSON object.
struct Noop;

impl ToolSet for Noop {
    fn definitions(&self) -> Vec<ToolDef> {
        Vec::new()
    }

    fn call<'a>(
        &'a self,
        _: &'a str,
        args: Value,
        _: &'a ToolContext,
    ) -> BoxFuture<'a, CallResult> {
        Box::pin(async move {
            CallResult {
                // The seed step returns the list to map over; each item a
                // two-byte output, so what the memory figure measures is the
                // interpreter's cost per node, not the outputs'.
                output: ToolOutput::ok(match &args["n"] {
                    Value::Array(_) => format!("{{\"n\": {}}}", args["n"]),
                    _ => "ok".to_owned(),
                }),
                denied: None,
                duration: Duration::ZERO,
            }
        })
    }
}

fn plan(items: usize) -> Plan {
    let list: Vec<usize> = (0..items).collect();
    define_workflow("bench")
        .input("unused", Some("x"))
        .step(define_step("seed").tool("noop", json!({"n": list})))
        .step(
            define_step("each")
                .map(
                    "$steps.seed.n",
                    16,
                    [define_step("one").tool("noop", json!({"n": "$item"}))],
                )
                .publish("out"),
        )
        .commit()
        .expect("a valid plan")
}

fn run(rt: &tokio::runtime::Runtime, plan: &Arc<Plan>) -> usize {
    rt.block_on(async {
        let bus = EventBus::new("bench", 0, None);
        let svc = Services {
            models: &NoModel,
            tools: &Noop,
            approver: &ApproveAll,
            bus: &bus,
        };
        let spec = RunSpec {
            plan: plan.clone(),
            inputs: BTreeMap::from([("unused".to_owned(), "x".into())]),
            workspace: PathBuf::from("."),
            agent_id: "bench".into(),
            limits: Limits::default(),
            provider_label: ("none".into(), "none".into()),
            endpoint: None,
            prior_events: Vec::new(),
            warnings: Vec::new(),
            trigger: None,
            forked_from: None,
            replay: None,
        };
        let r = execute(spec, &svc, CancellationToken::new()).await;
        assert_eq!(r.status, "completed", "{:?}", r.error);
        r.outputs["out"].as_array().map_or(0, Vec::len)
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[divan::bench(sample_count = 10)]
fn map_10000_tool_nodes(bencher: divan::Bencher) {
    let rt = runtime();
    let plan = Arc::new(plan(10_000));
    bencher.bench_local(|| run(&rt, &plan));
}

fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn report() {
    let rt = runtime();
    let mut first: Option<(usize, u64)> = None;
    for items in [10_000usize, 50_000] {
        let plan = Arc::new(plan(items));
        let t = Instant::now();
        let done = run(&rt, &plan);
        let took = t.elapsed();
        // Each item is one node (the tool node) plus its map item's scope.
        println!(
            "graph interpreter: {done} map items in {took:?}: {:?} per node; peak RSS {} KiB",
            took / done.max(1) as u32,
            peak_kib()
        );
        match first {
            None => first = Some((items, peak_kib())),
            Some((n, kib)) => println!(
                "graph interpreter: {} bytes of peak RSS per further item (a two-byte output, kept in the map's array, the run's outputs and the run_complete event)",
                (peak_kib().saturating_sub(kib) * 1024) / (items - n) as u64
            ),
        }
    }
}
