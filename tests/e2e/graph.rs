//! The step graph, built with the Rust API (`define_workflow` /
//! `define_step`), run by the executor against the real tools (bash, read,
//! write through the policy gate) and the loopback fake provider: one test
//! per node kind and per route.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentfile::config::{Config, LlmConfig};
use agentfile::events::EventBus;
use agentfile::executor::{
    Approval, ApprovalRequest, ApproveAll, Approver, Limits, ModelError, Models, RunSpec, Services,
    bind_inputs, execute,
};
use agentfile::llm::fake::{FakeReply, FakeServer};
use agentfile::llm::{Provider, ProviderOptions, provider_from_config_with};
use agentfile::plan::{Backoff, Plan, define_step, define_workflow};
use agentfile::session::{SessionMeta, SessionStatus, SessionStore, sqlite::SqliteStore};
use agentfile::tools::policy::Policy;
use agentfile::tools::{MemoryStore, Toolbox};
use agentfile::wire::events::{Event, EventBody, RunResult};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const POLICY: &str = r#"
default_deny = false
[bash]
enabled = true
denylist = ["sudo *"]
[write]
allow = ["$WORKSPACE/**"]
"#;

fn ws(name: &str) -> PathBuf {
    crate::support::tmp("graph", name)
}

struct NoModel;

impl Models for NoModel {
    fn provider(&self, _: Option<&str>) -> Result<Arc<dyn Provider>, ModelError> {
        Err("no model in this test".into())
    }
}

struct OneModel(Arc<dyn Provider>);

impl Models for OneModel {
    fn provider(&self, _: Option<&str>) -> Result<Arc<dyn Provider>, ModelError> {
        Ok(self.0.clone())
    }
}

/// Answers approvals from a script; `None` never answers.
struct Scripted(Mutex<VecDeque<Option<Approval>>>);

impl Approver for Scripted {
    fn decide<'a>(&'a self, _: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        let next = self.0.lock().unwrap().pop_front().flatten();
        Box::pin(async move {
            match next {
                Some(a) => a,
                None => std::future::pending().await,
            }
        })
    }
}

struct Run {
    result: RunResult,
    events: Vec<Event>,
}

async fn run_full(
    plan: Plan,
    dir: &Path,
    inputs: &[(&str, &str)],
    models: &dyn Models,
    approver: &dyn Approver,
    prior: Vec<Event>,
) -> Run {
    run_stored(plan, dir, inputs, models, approver, prior, None).await
}

#[allow(clippy::too_many_arguments)]
async fn run_stored(
    plan: Plan,
    dir: &Path,
    inputs: &[(&str, &str)],
    models: &dyn Models,
    approver: &dyn Approver,
    prior: Vec<Event>,
    store: Option<(Arc<dyn SessionStore>, &str)>,
) -> Run {
    let plan = Arc::new(plan);
    let given: agentfile::executor::Inputs = inputs
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    let inputs = bind_inputs(&plan, &given).unwrap();
    let policy = Policy::parse(POLICY, Path::new("policy.toml")).unwrap();
    let tools = Toolbox::new(
        &Config::default(),
        policy,
        dir,
        MemoryStore::in_memory().unwrap(),
    )
    .unwrap();
    let bus = match store {
        Some((store, id)) => EventBus::new(id, prior.last().map_or(0, |e| e.seq), Some(store)),
        None => EventBus::new("s-graph", prior.last().map_or(0, |e| e.seq), None),
    };
    let seen = Arc::new(Mutex::new(prior.clone()));
    let s = seen.clone();
    bus.subscribe(Arc::new(move |e: &Event| s.lock().unwrap().push(e.clone())));
    let svc = Services {
        models,
        tools: &tools,
        approver,
        bus: &bus,
    };
    let spec = RunSpec {
        plan,
        inputs,
        workspace: dir.canonicalize().unwrap(),
        agent_id: "test".into(),
        limits: Limits::default(),
        provider_label: ("none".into(), "none".into()),
        endpoint: None,
        prior_events: prior,
        warnings: Vec::new(),
        trigger: None,
        forked_from: None,
        replay: None,
    };
    let result = execute(spec, &svc, CancellationToken::new()).await;
    let events = seen.lock().unwrap().clone();
    Run { result, events }
}

async fn run(plan: Plan, dir: &Path, inputs: &[(&str, &str)]) -> Run {
    run_full(plan, dir, inputs, &NoModel, &ApproveAll, Vec::new()).await
}

fn bash(cmd: &str) -> Value {
    json!({ "command": cmd })
}

fn read(dir: &Path, f: &str) -> String {
    std::fs::read_to_string(dir.join(f)).unwrap_or_default()
}

fn ms(e: &Event) -> i64 {
    // `2026-11-22T10:00:00.123Z` → milliseconds of the day.
    let t = &e.ts[11..23];
    let h: i64 = t[0..2].parse().unwrap();
    let m: i64 = t[3..5].parse().unwrap();
    let s: i64 = t[6..8].parse().unwrap();
    let ms: i64 = t[9..12].parse().unwrap();
    ((h * 60 + m) * 60 + s) * 1000 + ms
}

#[tokio::test]
async fn branch_takes_each_arm_and_the_default() {
    let plan = || {
        define_workflow("route")
            .input("tier", None)
            .step(define_step("route").branch(
                [
                    ("$input.tier == \"free\"", "free"),
                    ("$input.tier == \"paid\"", "paid"),
                ],
                Some("other"),
            ))
            .step(
                define_step("free")
                    .tool("bash", bash("echo free > chosen"))
                    .next("$end"),
            )
            .step(
                define_step("paid")
                    .tool("bash", bash("echo paid > chosen"))
                    .next("$end"),
            )
            .step(define_step("other").tool("bash", bash("echo other > chosen")))
            .commit()
            .unwrap()
    };
    for (tier, want) in [("free", "free"), ("paid", "paid"), ("gold", "other")] {
        let dir = ws(&format!("branch-{tier}"));
        let r = run(plan(), &dir, &[("tier", tier)]).await;
        assert_eq!(r.result.status, "completed", "{:?}", r.result.error);
        assert_eq!(read(&dir, "chosen").trim(), want, "tier {tier}");
        // Only the chosen step ran.
        let ran: Vec<_> = r
            .events
            .iter()
            .filter(|e| e.kind() == "step_started")
            .filter_map(|e| e.step.clone())
            .collect();
        assert_eq!(ran, vec!["route".to_owned(), want.to_owned()]);
    }
}

#[tokio::test]
async fn parallel_branches_run_at_once_and_join() {
    let dir = ws("parallel");
    // Each branch marks that it began, then waits (up to 20 s) until all
    // three have: run one after another, the first would wait alone and fail.
    // No clock is read, so a loaded machine cannot fail it.
    let branch = |name: &str| {
        bash(&format!(
            "touch began-{name}; for i in $(seq 1 1000); do \
             [ -e began-a ] && [ -e began-b ] && [ -e began-c ] && break; sleep 0.02; done; \
             [ -e began-a ] && [ -e began-b ] && [ -e began-c ] && echo {name}"
        ))
    };
    let plan = define_workflow("par")
        .step(define_step("fan").parallel([
            define_step("a").tool("bash", branch("a")),
            define_step("b").tool("bash", branch("b")),
            define_step("c").tool("bash", branch("c")),
        ]))
        .step(define_step("after").tool("bash", bash("echo joined > joined")))
        .commit()
        .unwrap();
    let r = run(plan, &dir, &[]).await;
    assert_eq!(r.result.status, "completed", "{:?}", r.result.error);
    assert_eq!(read(&dir, "joined").trim(), "joined");
    let paths: Vec<_> = r
        .events
        .iter()
        .filter(|e| e.kind() == "node_complete")
        .filter_map(|e| e.node.clone())
        .collect();
    for p in ["fan/a", "fan/b", "fan/c"] {
        assert!(paths.contains(&p.to_owned()), "{paths:?}");
    }
}

#[tokio::test]
async fn map_keeps_input_order_and_its_concurrency_bound() {
    let dir = ws("map");
    let cmds: Vec<String> = (0..6)
        .map(|i| format!("sleep 0.{}; echo item-{i}", 1 + (5 - i) % 3))
        .collect();
    std::fs::write(
        dir.join("items.json"),
        serde_json::to_string(&cmds).unwrap(),
    )
    .unwrap();
    let plan = define_workflow("map")
        .step(define_step("list").tool("read", json!({"path": "items.json"})))
        .step(
            define_step("each")
                .map(
                    "$steps.list",
                    2,
                    // The items are commands this test wrote: spliced as
                    // shell code on purpose (a plain `$item` would be one
                    // quoted word, a program name).
                    [define_step("run").tool("bash", json!({"command": "${{ raw($item) }}"}))],
                )
                .publish("results"),
        )
        .commit()
        .unwrap();
    let r = run(plan, &dir, &[]).await;
    assert_eq!(r.result.status, "completed", "{:?}", r.result.error);
    let results = r.result.outputs["results"].as_array().unwrap().clone();
    assert_eq!(results.len(), 6);
    for (i, v) in results.iter().enumerate() {
        assert!(
            v.as_str().unwrap().contains(&format!("item-{i}")),
            "result {i} out of order: {v}"
        );
    }
    // Never more than two calls in flight: the intervals between each item's
    // tool_call and tool_result overlap at most pairwise.
    let mut spans: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for e in &r.events {
        let Some(node) = &e.node else { continue };
        if !node.starts_with("each[") {
            continue;
        }
        match e.kind() {
            "tool_call" => {
                spans.entry(node.clone()).or_default().0 = ms(e);
            }
            "tool_result" => {
                spans.entry(node.clone()).or_default().1 = ms(e);
            }
            _ => {}
        }
    }
    assert_eq!(spans.len(), 6, "{spans:?}");
    let mut most = 0;
    for (s, _) in spans.values() {
        let at = *s + 1;
        let live = spans.values().filter(|(a, b)| *a <= at && at < *b).count();
        most = most.max(live);
    }
    assert!(most <= 2, "{most} items ran at once: {spans:?}");
    assert!(most == 2, "the items never overlapped: {spans:?}");
}

/// A declared script may do what the bash policy would refuse (command
/// substitution, arithmetic): declaring it is the permission.
const COUNTER: &str = "n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; echo \"{\\\"n\\\": $n}\" > n.json\n";

fn counter_step(dir: &Path) -> agentfile::plan::StepBuilder {
    std::fs::write(dir.join("count.sh"), COUNTER).unwrap();
    define_step("bump").shell("count.sh", &[])
}

#[tokio::test]
async fn loop_while_stops_when_false_and_fails_at_its_maximum() {
    let dir = ws("loop");
    let plan = define_workflow("loop")
        .step(define_step("count").loop_while(
            "$steps.state.n < 3",
            10,
            [
                counter_step(&dir),
                define_step("state").tool("read", json!({"path": "n.json"})),
            ],
        ))
        .commit()
        .unwrap();
    let r = run(plan, &dir, &[]).await;
    assert_eq!(r.result.status, "completed", "{:?}", r.result.error);
    assert_eq!(read(&dir, "n").trim(), "3");
    let iterations = r
        .events
        .iter()
        .filter(|e| e.kind() == "loop_iteration")
        .count();
    assert_eq!(iterations, 3);

    let dir = ws("loop-max");
    let plan = define_workflow("loop")
        .step(define_step("count").loop_while(
            "$steps.state.n < 100",
            4,
            [
                counter_step(&dir),
                define_step("state").tool("read", json!({"path": "n.json"})),
            ],
        ))
        .commit()
        .unwrap();
    let r = run(plan, &dir, &[]).await;
    assert_eq!(r.result.exit_code, 5, "{:?}", r.result);
    assert_eq!(read(&dir, "n").trim(), "4", "ran past its maximum");
    assert!(r.result.error.unwrap().contains("maximum of 4"));
}

fn approval_plan() -> Plan {
    define_workflow("approve")
        .step(
            define_step("ask")
                .approval("Ship it?")
                .on_approve("ship")
                .on_reject("revise")
                .wait_timeout(300, "timed-out"),
        )
        .step(
            define_step("ship")
                .tool("bash", bash("echo ship > outcome"))
                .next("$end"),
        )
        .step(
            define_step("revise")
                .tool("bash", bash("echo revise > outcome"))
                .next("$end"),
        )
        .step(define_step("timed-out").tool("bash", bash("echo timeout > outcome")))
        .commit()
        .unwrap()
}

#[tokio::test]
async fn approval_routes_approve_reject_and_timeout() {
    for (name, answer, want) in [
        ("yes", Some(Approval::Approved(Some("lgtm".into()))), "ship"),
        (
            "no",
            Some(Approval::Rejected(Some("not yet".into()))),
            "revise",
        ),
        ("silence", None, "timeout"),
    ] {
        let dir = ws(&format!("approval-{name}"));
        let approver = Scripted(Mutex::new(VecDeque::from([answer])));
        let t = Instant::now();
        let r = run_full(approval_plan(), &dir, &[], &NoModel, &approver, Vec::new()).await;
        assert_eq!(r.result.status, "completed", "{name}: {:?}", r.result.error);
        assert_eq!(read(&dir, "outcome").trim(), want, "{name}");
        let resolved: Vec<_> = r
            .events
            .iter()
            .filter(|e| e.kind() == "approval_resolved")
            .collect();
        assert_eq!(resolved.len(), 1, "{name}");
        assert_eq!(resolved[0].node.as_deref(), Some("ask"));
        if name == "silence" {
            assert!(t.elapsed() >= Duration::from_millis(300));
        }
    }
}

#[tokio::test]
async fn a_rejection_without_a_route_fails_the_run() {
    let dir = ws("reject");
    let plan = define_workflow("approve")
        .step(define_step("ask").approval("Ship it?"))
        .step(define_step("ship").tool("bash", bash("echo ship > outcome")))
        .commit()
        .unwrap();
    let approver = Scripted(Mutex::new(VecDeque::from([Some(Approval::Rejected(None))])));
    let r = run_full(plan, &dir, &[], &NoModel, &approver, Vec::new()).await;
    assert_eq!(r.result.exit_code, 3);
    assert_eq!(r.result.termination_reason.as_str(), "approval_denied");
    assert!(!dir.join("outcome").exists());
}

#[tokio::test]
async fn suspend_ends_with_exit_6_and_a_signal_resumes_it() {
    let dir = ws("suspend");
    let plan = || {
        define_workflow("pay")
            .step(define_step("before").tool("bash", bash("echo 1 >> ran-before")))
            .step(define_step("wait").suspend(&["payment.ok", "payment.cancel"]))
            .step(define_step("after").tool("bash", bash("echo 1 >> ran-after")))
            .commit()
            .unwrap()
    };
    let first = run(plan(), &dir, &[]).await;
    assert_eq!(first.result.status, "suspended");
    assert_eq!(first.result.exit_code, 6);
    assert_eq!(first.events.last().unwrap().kind(), "run_suspended");
    assert!(!dir.join("ran-after").exists());

    // Resuming without a signal suspends again and runs nothing twice.
    let again = run_full(
        plan(),
        &dir,
        &[],
        &NoModel,
        &ApproveAll,
        first.events.clone(),
    )
    .await;
    assert_eq!(again.result.exit_code, 6);
    assert_eq!(read(&dir, "ran-before"), "1\n");

    // A signal the suspend does not wait for changes nothing; its event does.
    let mut prior = again.events.clone();
    for (event, payload) in [("other", json!(null)), ("payment.ok", json!({"id": 7}))] {
        let seq = prior.last().unwrap().seq + 1;
        let mut e = prior.last().unwrap().clone();
        e.seq = seq;
        e.node = None;
        e.node_kind = None;
        e.step = None;
        e.body = EventBody::Signal {
            event: event.into(),
            payload,
        };
        prior.push(e);
    }
    let done = run_full(plan(), &dir, &[], &NoModel, &ApproveAll, prior).await;
    assert_eq!(done.result.status, "completed", "{:?}", done.result.error);
    assert_eq!(read(&dir, "ran-before"), "1\n");
    assert_eq!(read(&dir, "ran-after"), "1\n");
    let out = done
        .events
        .iter()
        .rev()
        .find_map(|e| match (&e.body, e.step.as_deref()) {
            (EventBody::StepComplete { output, .. }, Some("wait")) => output.clone(),
            _ => None,
        })
        .unwrap();
    // The payload's fields are the step's outputs, beside the event's name
    // and the whole payload.
    assert_eq!(
        out,
        json!({"id": 7, "eventName": "payment.ok", "eventPayload": {"id": 7}})
    );
}

#[tokio::test]
async fn a_suspend_times_out_to_its_route() {
    let dir = ws("suspend-timeout");
    let plan = define_workflow("pay")
        .step(
            define_step("wait")
                .suspend(&["never"])
                .wait_timeout(0, "late"),
        )
        .step(
            define_step("on-time")
                .tool("bash", bash("echo on-time > outcome"))
                .next("$end"),
        )
        .step(define_step("late").tool("bash", bash("echo late > outcome")))
        .commit()
        .unwrap();
    let r = run(plan, &dir, &[]).await;
    assert_eq!(r.result.status, "completed", "{:?}", r.result.error);
    assert_eq!(read(&dir, "outcome").trim(), "late");
}

#[tokio::test]
async fn subworkflow_runs_with_mapped_inputs() {
    let dir = ws("sub");
    let sub = define_workflow("child")
        .input("name", None)
        .step(define_step("greet").tool(
            "write",
            json!({"path": "greeting.txt", "content": "$input.name"}),
        ))
        .commit()
        .unwrap();
    let plan = define_workflow("parent")
        .input("who", None)
        .step(define_step("call").subworkflow(sub, json!({"name": "$input.who"})))
        .commit()
        .unwrap();
    let r = run(plan, &dir, &[("who", "Ada")]).await;
    assert_eq!(r.result.status, "completed", "{:?}", r.result.error);
    assert_eq!(read(&dir, "greeting.txt"), "Ada");
    assert!(
        r.events
            .iter()
            .any(|e| e.node.as_deref() == Some("call/greet"))
    );
}

#[tokio::test]
async fn retry_backs_off_then_succeeds() {
    let dir = ws("retry");
    std::fs::write(
        dir.join("flaky.sh"),
        "n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n > n; [ $n -ge 3 ]\n",
    )
    .unwrap();
    let plan = define_workflow("retry")
        .step(
            define_step("flaky")
                .shell("flaky.sh", &[])
                .retry(3, Backoff::Linear, 100),
        )
        .commit()
        .unwrap();
    let t = Instant::now();
    let r = run(plan, &dir, &[]).await;
    assert_eq!(r.result.status, "completed", "{:?}", r.result.error);
    assert_eq!(read(&dir, "n").trim(), "3");
    let waits: Vec<Option<u64>> = r
        .events
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::NodeFailed { retry_in_ms, .. } => Some(*retry_in_ms),
            _ => None,
        })
        .collect();
    assert_eq!(waits, vec![Some(100), Some(200)]);
    assert!(t.elapsed() >= Duration::from_millis(300));

    // Out of attempts: the failure stands.
    let dir = ws("retry-out");
    let plan = define_workflow("retry")
        .step(
            define_step("flaky")
                .tool("bash", bash("exit 3"))
                .retry(2, Backoff::Fixed, 10),
        )
        .commit()
        .unwrap();
    let r = run(plan, &dir, &[]).await;
    assert_eq!(r.result.exit_code, 1);
    assert!(r.result.error.unwrap().contains("after 2 attempts"));
}

#[tokio::test]
async fn a_node_timeout_stops_it() {
    let dir = ws("timeout");
    let plan = define_workflow("slow")
        .step(
            define_step("slow")
                .tool("bash", bash("sleep 5"))
                .timeout_ms(300),
        )
        .commit()
        .unwrap();
    let t = Instant::now();
    let r = run(plan, &dir, &[]).await;
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(r.result.exit_code, 1);
    assert!(
        r.result.error.clone().unwrap().contains("timed out"),
        "{:?}",
        r.result
    );
}

#[tokio::test]
async fn compensations_run_in_reverse_order_on_failure() {
    let dir = ws("saga");
    let saga = || {
        define_workflow("saga")
            .step(
                define_step("a")
                    .tool("bash", bash("echo a >> done.log"))
                    .compensation(define_step("undo-a").tool("bash", bash("echo a >> undo.log"))),
            )
            .step(define_step("plain").tool("bash", bash("echo plain >> done.log")))
            .step(
                define_step("b")
                    .tool("bash", bash("echo b >> done.log"))
                    .compensation(define_step("undo-b").tool("bash", bash("echo b >> undo.log"))),
            )
            .step(define_step("c").tool("bash", bash("exit 1")))
            .commit()
            .unwrap()
    };
    let plan = saga();
    let r = run(plan, &dir, &[]).await;
    assert_eq!(r.result.status, "failed");
    assert_eq!(read(&dir, "undo.log"), "b\na\n");
    let comp = r
        .events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::Compensating { nodes, .. } => Some(nodes.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(comp, vec!["b".to_owned(), "a".to_owned()]);

    // Resumed after the walk-back, nothing is undone twice.
    let again = run_full(saga(), &dir, &[], &NoModel, &ApproveAll, r.events.clone()).await;
    assert_eq!(again.result.status, "failed");
    assert_eq!(read(&dir, "undo.log"), "b\na\n");
    assert_eq!(read(&dir, "done.log"), "a\nplain\nb\n");
}

#[tokio::test]
async fn a_goal_step_talks_to_the_model() {
    let dir = ws("goal");
    let server = FakeServer::start(vec![FakeReply::text("four")])
        .await
        .unwrap();
    let llm = LlmConfig {
        provider: Some("openai".into()),
        model: Some("gpt-4o".into()),
        base_url: Some(server.base_url()),
        ..Default::default()
    };
    let env = |k: &str| (k == "OPENAI_API_KEY").then(|| "test-key-0123456789".to_owned());
    let provider =
        provider_from_config_with(&llm, &BTreeMap::new(), &env, &ProviderOptions::default())
            .unwrap();
    let plan = define_workflow("ask")
        .input("q", None)
        .goal("answer", "Answer: $prompt")
        .step(
            define_step("ask")
                .goal_with("answer", json!({"prompt": "$input.q"}))
                .publish("answer"),
        )
        .commit()
        .unwrap();
    let r = run_full(
        plan,
        &dir,
        &[("q", "what is 2+2?")],
        &OneModel(provider),
        &ApproveAll,
        Vec::new(),
    )
    .await;
    assert_eq!(r.result.status, "completed", "{:?}", r.result.error);
    assert_eq!(r.result.outputs["answer"], json!("four"));
    let started = r
        .events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::GoalStarted { outcome, .. } => Some(outcome.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(started, "Answer: what is 2+2?");
}

#[test]
fn commit_reports_every_structural_problem() {
    let err = define_workflow("bad")
        .step(define_step("a").tool("bash", bash("true")).next("c"))
        .step(define_step("b").kind_named("frobnicate"))
        .step(define_step("c").branch([("$input.x == 1", "a")], Some("nowhere")))
        .commit()
        .unwrap_err();
    let codes: Vec<&str> = err.iter().map(|d| d.code).collect();
    for c in ["dangling-next", "unknown-kind", "unreachable", "cycle"] {
        assert!(codes.contains(&c), "missing {c}: {err:#?}");
    }
}

/// The whole round trip across processes: the run suspends (exit 6) with its
/// events in the workspace's SQLite store; `agentfile sessions signal`, another
/// process, records the event; the resumed run completes from the journal.
#[tokio::test]
async fn a_signal_from_another_process_resumes_a_suspended_run() {
    let dir = ws("signal-cli");
    let db = dir.join(".agentfile").join("sessions.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&db).unwrap());
    let id = "s-signal-1";
    store
        .create(&SessionMeta {
            id: id.into(),
            workflow: "pay".into(),
            path: "define_workflow(\"pay\")".into(),
            workspace: dir.display().to_string(),
            inputs: BTreeMap::new(),
            status: SessionStatus::Running,
            created_at: "2026-11-23T00:00:00.000Z".into(),
            updated_at: "2026-11-23T00:00:00.000Z".into(),
            last_seq: 0,
        })
        .unwrap();
    let plan = || {
        define_workflow("pay")
            .step(define_step("before").tool("bash", bash("echo 1 >> ran-before")))
            .step(define_step("wait").suspend(&["payment.ok"]))
            .step(define_step("after").tool("bash", bash("echo 1 >> ran-after")))
            .commit()
            .unwrap()
    };
    let first = run_stored(
        plan(),
        &dir,
        &[],
        &NoModel,
        &ApproveAll,
        Vec::new(),
        Some((store.clone(), id)),
    )
    .await;
    assert_eq!(first.result.exit_code, 6);
    assert_eq!(store.get(id).unwrap().status, SessionStatus::Suspended);

    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_agentfile"))
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap()
    };
    // An event nothing waits for is refused, naming what it waits for.
    let wrong = cli(&["sessions", "signal", id, "payment.failed", "--no-resume"]);
    assert_eq!(wrong.status.code(), Some(2));
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(err.contains("`payment.ok`"), "{err}");
    let ok = cli(&[
        "sessions",
        "signal",
        id,
        "payment.ok",
        "--payload",
        "{\"amount\": 12}",
        "--no-resume",
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );

    let prior = store.events(id, 0).unwrap();
    let done = run_stored(
        plan(),
        &dir,
        &[],
        &NoModel,
        &ApproveAll,
        prior,
        Some((store.clone(), id)),
    )
    .await;
    assert_eq!(done.result.status, "completed", "{:?}", done.result.error);
    assert_eq!(read(&dir, "ran-before"), "1\n");
    assert_eq!(read(&dir, "ran-after"), "1\n");
    assert_eq!(store.get(id).unwrap().status, SessionStatus::Completed);
}

#[test]
fn commit_checks_what_each_expression_may_read() {
    let err = define_workflow("scopes")
        .input("name", None)
        .step(define_step("early").tool("read", json!({"path": "$steps.late"})))
        .step(define_step("fan").parallel([
            define_step("a").tool("read", json!({"path": "$input.name"})),
            define_step("b").tool("read", json!({"path": "$steps.a"})),
        ]))
        .step(define_step("late").tool("read", json!({"path": "$item"})))
        .step(define_step("ok").tool("read", json!({"path": "$steps.a", "x": "$input.nmae"})))
        .commit()
        .unwrap_err();
    let msgs: Vec<String> = err
        .iter()
        .map(|d| format!("{} {}", d.code, d.message))
        .collect();
    let has = |code: &str, step: &str| {
        msgs.iter()
            .any(|m| m.starts_with(code) && m.contains(&format!("step `{step}`")))
    };
    assert!(has("unknown-step-reference", "early"), "{msgs:#?}");
    assert!(has("unknown-step-reference", "fan/b"), "{msgs:#?}");
    assert!(has("item-outside-map", "late"), "{msgs:#?}");
    assert!(has("unknown-input", "ok"), "{msgs:#?}");
    assert_eq!(msgs.len(), 4, "{msgs:#?}");
}

#[tokio::test]
async fn max_steps_and_the_workflow_timeout_stop_a_run() {
    let dir = ws("max-steps");
    let plan = define_workflow("many")
        .max_steps(3)
        .step(define_step("a").tool("bash", bash("echo a >> ran")))
        .step(define_step("b").tool("bash", bash("echo b >> ran")))
        .step(define_step("c").tool("bash", bash("echo c >> ran")))
        .step(define_step("d").tool("bash", bash("echo d >> ran")))
        .commit()
        .unwrap();
    let r = run(plan, &dir, &[]).await;
    assert_eq!(r.result.exit_code, 1);
    assert!(
        r.result.error.clone().unwrap().contains("max_steps = 3"),
        "{:?}",
        r.result
    );
    assert_eq!(read(&dir, "ran"), "a\nb\nc\n");

    let dir = ws("wf-timeout");
    let plan = define_workflow("slow")
        .timeout_ms(300)
        .step(define_step("slow").tool("bash", bash("sleep 5")))
        .commit()
        .unwrap();
    let t = Instant::now();
    let r = run(plan, &dir, &[]).await;
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(r.result.exit_code, 4);
    assert_eq!(r.result.termination_reason.as_str(), "timeout");
}

/// A suspend's deadline is absolute: a run resumed after it passed takes the
/// timeout route even though no process was waiting.
#[tokio::test]
async fn a_suspend_deadline_holds_across_restarts() {
    let dir = ws("suspend-deadline");
    let plan = || {
        define_workflow("pay")
            .step(
                define_step("wait")
                    .suspend(&["paid"])
                    .wait_timeout(300, "late"),
            )
            .step(
                define_step("on-time")
                    .tool("bash", bash("echo on-time > outcome"))
                    .next("$end"),
            )
            .step(define_step("late").tool("bash", bash("echo late > outcome")))
            .commit()
            .unwrap()
    };
    let first = run(plan(), &dir, &[]).await;
    assert_eq!(first.result.exit_code, 6);
    let deadline = first
        .events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::Suspended { deadline_ms, .. } => *deadline_ms,
            _ => None,
        })
        .unwrap();
    // Before the deadline: still waiting.
    let early = run_full(
        plan(),
        &dir,
        &[],
        &NoModel,
        &ApproveAll,
        first.events.clone(),
    )
    .await;
    assert_eq!(early.result.exit_code, 6);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let late = run_full(
        plan(),
        &dir,
        &[],
        &NoModel,
        &ApproveAll,
        early.events.clone(),
    )
    .await;
    assert_eq!(late.result.status, "completed", "{:?}", late.result.error);
    assert_eq!(read(&dir, "outcome").trim(), "late");
    // The deadline recorded first is the one that counted.
    assert!(late.events.iter().all(|e| match &e.body {
        EventBody::Suspended { deadline_ms, .. } => *deadline_ms == Some(deadline),
        _ => true,
    }));
}

/// A step's value is the command's stdout as the bash tool's typed result
/// holds it: text that looks like the tool's own report (`exit code: N`,
/// `--- stdout ---`, `--- stderr ---`) is just output, on stdout of a tool
/// step and of a shell step alike.
#[tokio::test]
async fn a_step_reads_the_commands_result_not_its_report() {
    let dir = ws("report-lookalike");
    const FAKE: &str = "exit code: 1\n--- stdout ---\nfake\n--- stderr ---\nnot an error";
    std::fs::write(
        dir.join("fake.sh"),
        format!("printf '%s\\n' '{FAKE}'\necho 'exit code: 0' >&2\n"),
    )
    .unwrap();
    let plan = define_workflow("lookalike")
        .step(
            define_step("tool")
                .tool("bash", bash(&format!("printf '%s\\n' '{FAKE}'")))
                .publish("tool"),
        )
        .step(
            define_step("script")
                .shell("fake.sh", &[])
                .publish("script"),
        )
        .commit()
        .unwrap();
    let r = run(plan, &dir, &[]).await;
    assert_eq!(r.result.status, "completed", "{:?}", r.result.error);
    assert_eq!(r.result.outputs["tool"], json!(FAKE));
    assert_eq!(r.result.outputs["script"], json!(FAKE));
    // What the model would read is the report, unchanged.
    let report = r
        .events
        .iter()
        .find_map(|e| match &e.body {
            EventBody::ToolResult { tool, content, .. } if tool == "bash" => Some(content.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(report, format!("exit code: 0\n--- stdout ---\n{FAKE}"));
}

/// A step whose command exits non-zero, or is killed by a signal, failed,
/// whatever its stdout says.
#[tokio::test]
async fn a_step_whose_command_did_not_exit_0_fails() {
    for (name, cmd) in [
        ("exit", "echo 'exit code: 0'; exit 4"),
        ("signal", "echo 'exit code: 0'; kill -9 0"),
    ] {
        let dir = ws(&format!("not-0-{name}"));
        let plan = define_workflow("not-0")
            .step(define_step("s").tool("bash", bash(cmd)))
            .commit()
            .unwrap();
        let r = run(plan, &dir, &[]).await;
        assert_eq!(r.result.status, "failed", "{name}: {:?}", r.result.outputs);
        assert!(
            r.result
                .error
                .as_deref()
                .unwrap_or("")
                .contains("`bash` failed"),
            "{name}: {:?}",
            r.result.error
        );
    }
}
