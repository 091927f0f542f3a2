//! Runtime overhead of the executor: a 100-goal workflow, 3 tool calls per goal,
//! against a zero-latency model (an in-process provider that answers at once) and
//! a no-op tool set, so what is timed is the executor itself — prompt building,
//! interpolation, events, budget checks, conversation bookkeeping.
//!
//! Target: under 200 µs per model turn without a store, under 60 µs with the
//! SQLite session store on. Run with `cargo bench --bench executor`; it prints
//! the per-turn figures (with the store: the pipelined bus a real run uses and,
//! side by side, a bus that commits before each `emit` returns) and the
//! process's peak RSS at the end.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentfile::events::{EventBus, Scope};
use agentfile::executor::{
    ApproveAll, Limits, ModelError, Models, RunSpec, Services, bind_inputs, execute,
};
use agentfile::frontend::{Options, analyze_bytes};
use agentfile::llm::{
    CancellationToken, ChatRequest, ChatResponse, ContentBlock, LlmError, Provider, StopReason,
    StreamEvent, ToolCall, ToolDef, Usage,
};
use agentfile::plan::Plan;
use agentfile::session::sqlite::SqliteStore;
use agentfile::session::{SessionMeta, SessionStatus, SessionStore};
use agentfile::tools::{CallResult, ToolContext, ToolOutput, ToolSet};
use agentfile::wire::events::{Event, EventBody, ToolCallInfo};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde_json::{Value, json};

const GOALS: usize = 100;
const TOOL_CALLS_PER_GOAL: usize = 3;

fn main() {
    divan::main();
    // `cargo test` runs each benchmark once as a smoke test; the reports'
    // repeated runs are for `cargo bench` (`--bench`).
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    report();
    report_store();
    report_turn_storage();
    // The databases of this process's runs.
    for dir in STORE_DIRS.lock().expect("dirs").drain(..) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The folders [`store`] created, removed at the end.
static STORE_DIRS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Answers with a tool call until the conversation holds three tool results,
/// then with text — instantly.
struct Instant0;

impl Provider for Instant0 {
    fn name(&self) -> &str {
        "bench"
    }
    fn model(&self) -> &str {
        "bench-model"
    }
    fn chat(
        &self,
        request: ChatRequest,
        _: CancellationToken,
    ) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        let results = request
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter(|b| matches!(b, ContentBlock::ToolResult(_)))
            .count();
        let content = if results < TOOL_CALLS_PER_GOAL {
            vec![ContentBlock::ToolCall(ToolCall {
                id: format!("call_{results}"),
                name: "read".into(),
                arguments: json!({"path": format!("src/file_{results}.rs")}),
                signature: None,
            })]
        } else {
            vec![ContentBlock::Text {
                text: "The goal is done; the files look fine.".into(),
            }]
        };
        Box::pin(async move {
            Ok(ChatResponse {
                content,
                stop_reason: StopReason::EndTurn,
                raw_stop_reason: None,
                usage: Usage {
                    input_tokens: 1000,
                    output_tokens: 50,
                },
                model: "bench-model".into(),
                latency: Duration::ZERO,
                cost_usd: Some(0.0001),
                attempts: 1,
            })
        })
    }
    fn stream(
        &self,
        request: ChatRequest,
        cancel: CancellationToken,
    ) -> BoxStream<'_, Result<StreamEvent, LlmError>> {
        // The executor streams: the same answers, whole, as one final item.
        Box::pin(futures::stream::once(async move {
            self.chat(request, cancel).await.map(StreamEvent::Done)
        }))
    }
}

struct Bench(Arc<dyn Provider>);

impl Models for Bench {
    fn provider(&self, _: Option<&str>) -> Result<Arc<dyn Provider>, ModelError> {
        Ok(self.0.clone())
    }
}

struct NoopTools;

impl ToolSet for NoopTools {
    fn definitions(&self) -> Vec<ToolDef> {
        vec![ToolDef {
            name: "read".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }]
    }
    fn call<'a>(
        &'a self,
        _: &'a str,
        args: Value,
        _: &'a ToolContext,
    ) -> BoxFuture<'a, CallResult> {
        Box::pin(async move {
            CallResult {
                output: ToolOutput::ok(format!("contents of {}", args["path"])),
                denied: None,
                duration: Duration::ZERO,
            }
        })
    }
}

fn plan() -> Arc<Plan> {
    let mut src = String::from("NAME overhead\nINPUT topic DEFAULT \"the codebase\"\n");
    for i in 0..GOALS {
        src.push_str(&format!(
            "GOAL g{i} \"Review part {i} of $topic and report what you find.\"\n"
        ));
    }
    for chunk in 0..GOALS / 10 {
        let goals: Vec<String> = (chunk * 10..chunk * 10 + 10)
            .map(|i| format!("g{i}"))
            .collect();
        src.push_str(&format!("RUN s{chunk} USING {}\n", goals.join(", ")));
    }
    let a = analyze_bytes(
        PathBuf::from("bench/Agentfile"),
        src.into_bytes(),
        Options::default(),
    );
    Arc::new(a.plan.expect("valid bench workflow"))
}

fn run_once(rt: &tokio::runtime::Runtime, plan: &Arc<Plan>) -> u64 {
    run_with_store(rt, plan, None)
}

/// A fresh SQLite session store in a temporary folder, with one session.
fn store() -> Arc<dyn SessionStore> {
    store_in().0
}

/// [`store`], and the folder of its database.
fn store_in() -> (Arc<dyn SessionStore>, PathBuf) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "agentfile-bench-exec-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    STORE_DIRS.lock().expect("dirs").push(dir.clone());
    let store = SqliteStore::open(&dir.join("sessions.db")).expect("store");
    store
        .create(&SessionMeta {
            id: "bench".into(),
            workflow: "overhead".into(),
            path: "bench/Agentfile".into(),
            workspace: "/tmp".into(),
            inputs: BTreeMap::new(),
            status: SessionStatus::Running,
            created_at: "2026-11-22T00:00:00.000Z".into(),
            updated_at: "2026-11-22T00:00:00.000Z".into(),
            last_seq: 0,
        })
        .expect("session");
    (Arc::new(store), dir)
}

fn run_with_store(
    rt: &tokio::runtime::Runtime,
    plan: &Arc<Plan>,
    store: Option<Arc<dyn SessionStore>>,
) -> u64 {
    run_with_bus(rt, plan, EventBus::new("bench", 0, store).pipelined())
}

/// A run whose bus stores each event before `emit` returns (no group commit
/// across steps: what a run did before its bus was pipelined).
fn run_synchronous(
    rt: &tokio::runtime::Runtime,
    plan: &Arc<Plan>,
    store: Arc<dyn SessionStore>,
) -> u64 {
    run_with_bus(rt, plan, EventBus::new("bench", 0, Some(store)))
}

/// One run of the bench workflow on `bus`; the result comes back once the
/// store holds every event (the executor flushes the bus at the end).
fn run_with_bus(rt: &tokio::runtime::Runtime, plan: &Arc<Plan>, bus: EventBus) -> u64 {
    // A sink that touches every event, as the CLI printer or a server would.
    bus.subscribe(Arc::new(|e: &Event| {
        std::hint::black_box(e.seq);
    }));
    let models = Bench(Arc::new(Instant0));
    let svc = Services {
        models: &models,
        tools: &NoopTools,
        approver: &ApproveAll,
        bus: &bus,
    };
    let spec = RunSpec {
        plan: plan.clone(),
        inputs: bind_inputs(plan, &BTreeMap::new()).expect("inputs"),
        workspace: PathBuf::from("/tmp"),
        agent_id: "bench".into(),
        limits: Limits::default(),
        provider_label: ("bench".into(), "bench-model".into()),
        endpoint: None,
        prior_events: Vec::new(),
        warnings: Vec::new(),
        trigger: None,
        forked_from: None,
        replay: None,
    };
    let result = rt.block_on(execute(spec, &svc, CancellationToken::new()));
    assert_eq!(result.status, "completed", "{result:?}");
    result.usage.turns
}

#[divan::bench(sample_count = 20)]
fn workflow_100_goals_3_tools(bencher: divan::Bencher) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let plan = plan();
    bencher.bench_local(|| run_once(&rt, &plan));
}

/// The same with every event stored durably in SQLite, as a real run does
/// (a pipelined bus: group commit in the background).
#[divan::bench(sample_count = 10)]
fn workflow_100_goals_3_tools_sqlite_store(bencher: divan::Bencher) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let plan = plan();
    bencher
        .with_inputs(store)
        .bench_local_values(|s| run_with_store(&rt, &plan, Some(s)));
}

/// The same with a bus that commits before each `emit` returns.
#[divan::bench(sample_count = 10)]
fn workflow_100_goals_3_tools_sqlite_store_synchronous(bencher: divan::Bencher) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let plan = plan();
    bencher
        .with_inputs(store)
        .bench_local_values(|s| run_synchronous(&rt, &plan, s));
}

/// Per-turn overhead with the SQLite store on, pipelined and synchronous
/// alternately (so a busy machine hurts both alike), for the README. Each run
/// starts on a fresh database and ends once every event is stored; the store
/// is closed (checkpointing its WAL as a CLI run's exit does) inside the
/// timing.
fn report_store() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let plan = plan();
    let runs = 9;
    // Per run: time per turn, of which closing the store, and WAL frames per turn.
    let (mut piped, mut sync) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        for (pipelined, out) in [(true, &mut piped), (false, &mut sync)] {
            let (s, dir) = store_in();
            let started = Instant::now();
            let turns = if pipelined {
                run_with_store(&rt, &plan, Some(s.clone()))
            } else {
                run_synchronous(&rt, &plan, s.clone())
            };
            let ran = started.elapsed();
            let wal = std::fs::metadata(dir.join("sessions.db-wal")).map_or(0, |m| m.len());
            drop(s);
            let total = started.elapsed();
            let n = turns as u32;
            out.push((
                total / n,
                (total - ran) / n,
                wal as f64 / 4120.0 / f64::from(n),
            ));
        }
    }
    let describe = |v: &mut Vec<(Duration, Duration, f64)>| {
        v.sort_by_key(|r| r.0);
        let (median, best, worst) = (v[v.len() / 2], v[0], v[v.len() - 1]);
        format!(
            "median {:?} (best {:?}, worst {:?}; closing the store {:?} of the median, \
             {:.2} WAL frames per turn)",
            median.0, best.0, worst.0, median.1, median.2
        )
    };
    println!(
        "executor overhead with the SQLite store, per model turn ({runs} runs each, alternating, \
         each on a fresh database and timed until the store is closed): pipelined bus {}; \
         synchronous bus {}",
        describe(&mut piped),
        describe(&mut sync)
    );
}

/// Per-turn overhead and peak memory, printed for the README.
fn report() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let plan = plan();
    let runs = 10;
    let started = Instant::now();
    let mut turns = 0;
    for _ in 0..runs {
        turns += run_once(&rt, &plan);
    }
    let per_turn = started.elapsed() / turns as u32;
    let peak = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM"))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "VmHWM: unknown".into());
    println!(
        "executor overhead: {turns} model turns in {runs} runs of {GOALS} goals x {TOOL_CALLS_PER_GOAL} tool calls: {per_turn:?} per turn; peak {peak}"
    );
}

/// One tool-using model turn's events, as the executor emits them: the
/// request; the answer and the tool call it asks for; the tool's result.
fn turn_events(turn: u32) -> [EventBody; 4] {
    let call = ToolCallInfo {
        id: format!("call_{turn}"),
        name: "read".into(),
        arguments: json!({"path": format!("src/file_{turn}.rs")}),
    };
    [
        EventBody::LlmRequest {
            model: "bench-model".into(),
            turn,
            messages: 3,
            tools: 1,
            digests: Default::default(),
        },
        EventBody::LlmResponse {
            model: "bench-model".into(),
            turn,
            input_tokens: 1000,
            output_tokens: 50,
            latency_ms: 0,
            cost_usd: Some(0.0001),
            stop_reason: "tool_calls".into(),
            text: String::new(),
            tool_calls: vec![call.clone()],
        },
        EventBody::ToolCall {
            id: call.id,
            tool: call.name,
            arguments: call.arguments,
        },
        EventBody::ToolResult {
            id: format!("call_{turn}"),
            tool: "read".into(),
            content: format!("contents of src/file_{turn}.rs"),
            is_error: false,
            duration_ms: 0,
        },
    ]
}

/// What storing a turn's events in SQLite costs through the bus: one commit
/// per event (`emit` on a synchronous bus) against the bursts that are ready
/// at the same moment stored with one commit each (`emit_all`: the answer with
/// its tool call; the tool's result with the next request), and against a
/// pipelined bus, whose writer commits whatever queued while it was busy.
fn report_turn_storage() {
    const TURNS: u32 = 2000;
    let scope = Scope::step("s").with_goal("g");
    let per_turn = |grouped: bool, pipelined: bool| {
        let bus = EventBus::new("bench", 0, Some(store()));
        let bus = if pipelined { bus.pipelined() } else { bus };
        bus.subscribe(Arc::new(|e: &Event| {
            std::hint::black_box(e.seq);
        }));
        let started = Instant::now();
        let mut pending_result: Option<EventBody> = None;
        for turn in 1..=TURNS {
            let [request, response, call, result] = turn_events(turn);
            if grouped {
                match pending_result.take() {
                    Some(prev) => bus.emit_all(&scope, [prev, request]),
                    None => vec![bus.emit(&scope, request)],
                };
                bus.emit_all(&scope, [response, call]);
                pending_result = Some(result);
            } else {
                for body in [request, response, call, result] {
                    bus.emit(&scope, body);
                }
            }
        }
        if let Some(last) = pending_result {
            bus.emit(&scope, last);
        }
        // `store_error` waits for a pipelined bus's last commit.
        assert!(bus.store_error().is_none(), "{:?}", bus.store_error());
        started.elapsed() / TURNS
    };
    // Alternate, so that a busy machine hurts all alike.
    let (mut each, mut grouped, mut piped) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        each.push(per_turn(false, false));
        grouped.push(per_turn(true, false));
        piped.push(per_turn(true, true));
    }
    each.sort();
    grouped.sort();
    piped.sort();
    println!(
        "event storage per tool-using turn (4 events, SQLite, {TURNS} turns, median of 3): \
         one commit per event {:?}; bursts with emit_all (2 commits per turn) {:?}; \
         the same bursts on a pipelined bus {:?}",
        each[1], grouped[1], piped[1]
    );
}
