//! Many replicas, one service (CONTRACT §22, issue 49): two `agentfile mcp
//! --http --nats` replicas, A and B, and one `agentfile worker` on one
//! PostgreSQL database and one `nats-server -js`, spoken to by raw stateless
//! 2026-07-28 requests that alternate between the replicas:
//!
//! - a task started through A is polled through B (`working`, then
//!   `input_required` at its approval), answered through B, and its result is
//!   read through both; meanwhile `tasks/get` through B, the replica that
//!   does not hold the run, is timed (p50/p99 printed);
//! - a multi-round-trip call (`[mcp] state_key_env`) whose rounds go A, B, A
//!   completes;
//! - `tasks/cancel` through B stops the run on the worker: the task ends
//!   `cancelled` and the model is asked nothing more;
//! - A SIGKILLed mid-run: the run goes on on the worker and completes, as
//!   B's `tasks/get` shows, no goal asked of the model twice.
//!
//! The model is the in-process fake, whose requests are inspected. Without
//! nats-server or PostgreSQL the tests print `SKIPPED: …` and pass.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use agentfile::llm::fake::{FakeReply, FakeServer};
use serde_json::{Value, json};

use crate::support::cluster::{self, Nats, TRIO, Worker, request_key, script};
use crate::support::mcp_http::{Replica, WAIT};
use crate::support::session::pg;
use crate::support::{Dir, KEY_VAR};

const STATE_VAR: &str = "AGENTFILE_REPLICAS_TEST_STATE_KEY";
/// 32 random bytes, as `openssl rand -hex 32` prints them.
const STATE_KEY: &str = "9d4e1f0a7b3c6258e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7";
const STREAM: &str = "AGENTFILE_REPLICAS";

/// A first goal that takes the model's latency (so the task is surely seen
/// `working`), then one a person approves.
const GATED: &str = "NAME gated\nGOAL prep \"Write alpha for run 0\"\nGOAL act \"Do the gated thing\" SUPERVISED HUMAN\nRUN main USING prep, act\n";

/// A WORKFLOW.md that suspends twice, each time until `go.now`, and ends
/// with both signals' channels: a call of three rounds, the run held by no
/// process between them.
const HOLDS: &str = r#"---
name: Holds
id: holds
description: Waits for two signals.
version: 1.0.0
inputs: { type: object }
outputs: { type: object }
steps:
  - id: first
    kind: suspend
    resume:
      on: [go.now]
    next: second
  - id: second
    kind: suspend
    resume:
      on: [go.now]
    next: $end
result:
  first: $steps.first.channel
  second: $steps.second.channel
---
"#;

const HOLDS_PATH: &str = ".workflows/holds";

/// A client of the tasks extension.
fn tasks() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

/// A client that is asked through input-required results.
fn elicits() -> Value {
    json!({"elicitation": {"form": {}}})
}

/// The service: NATS, a database, the worker, replicas A and B, and the fake
/// model answering [`TRIO`]'s goals after `latency` (the gated goal at once).
/// Dropped in this order: the replicas, the worker, NATS, the workspace.
struct Service {
    a: Replica,
    b: Replica,
    _worker: Worker,
    _nats: Nats,
    _ws: Dir,
    model: FakeServer,
}

impl Service {
    async fn start(label: &str, latency: Duration) -> Service {
        let (model, ws, db_url) = model_and_store(label, latency).await;
        let nats = Nats::start();
        let worker = cluster::worker(ws.path(), &nats.url, &db_url, STREAM, 4, &[]);
        let a = replica(ws.path(), &nats.url, &db_url, "replica A").await;
        let b = replica(ws.path(), &nats.url, &db_url, "replica B").await;
        Service {
            a,
            b,
            _worker: worker,
            _nats: nats,
            _ws: ws,
            model,
        }
    }

    /// How many times the model was asked goal `goal` of [`TRIO`] run `n`.
    fn asked(&self, n: u64, goal: &str) -> usize {
        self.model
            .requests()
            .iter()
            .filter(|r| request_key(&r.body) == Some((n, goal)))
            .count()
    }

    /// Wait until the model has been asked goal `goal` of run `n`.
    async fn until_asked(&self, n: u64, goal: &str) {
        let deadline = Instant::now() + WAIT;
        while self.asked(n, goal) == 0 {
            assert!(
                Instant::now() < deadline,
                "run {n} never asked goal {goal} of the model"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The fake model answering [`TRIO`]'s goals after `latency` (the gated goal
/// at once), and a workspace on a new PostgreSQL database (its URL) holding
/// [`TRIO`], [`GATED`] and [`HOLDS`].
async fn model_and_store(label: &str, latency: Duration) -> (FakeServer, Dir, String) {
    let mut replies = script(latency);
    replies.replies.insert(
        0,
        FakeReply::text("gated thing done").when(["Do the gated thing"]),
    );
    let model = FakeServer::start_script(replies, ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let ws = Dir::new(&format!("replicas-{label}"));
    let db_url = pg::url_for(ws.path());
    std::fs::write(
        ws.path().join("agent.toml"),
        format!(
            "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n\n[session]\nstore = \"postgres\"\n\n[mcp]\nstate_key_env = \"{STATE_VAR}\"\n",
            model.base_url()
        ),
    )
    .unwrap();
    std::fs::write(ws.path().join("Agentfile"), TRIO).unwrap();
    std::fs::write(ws.path().join("gated.agent"), GATED).unwrap();
    std::fs::create_dir_all(ws.path().join(HOLDS_PATH)).unwrap();
    std::fs::write(ws.path().join(HOLDS_PATH).join("WORKFLOW.md"), HOLDS).unwrap();
    (model, ws, db_url)
}

/// `agentfile mcp --http 127.0.0.1:0 --nats …` on the service's store.
async fn replica(ws: &Path, nats: &str, db_url: &str, label: &str) -> Replica {
    let mut c = tokio::process::Command::from(cluster::command(
        ws,
        nats,
        db_url,
        &[
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--heartbeat-ms",
            "300",
            "--nats-stream",
            STREAM,
        ],
    ));
    c.env(STATE_VAR, STATE_KEY)
        .env_remove("AGENTFILE_MCP_TOKEN")
        .env_remove("AGENTFILE_PROVIDER")
        .env_remove("AGENTFILE_MODEL");
    Replica::start(c, label).await
}

/// Start `path` (with `inputs`) as a task through `r`; its id.
async fn start_task(r: &Replica, path: &str, inputs: Value) -> String {
    let s = r
        .request(
            "tools/call",
            json!({"name": "run", "arguments": {"path": path, "inputs": inputs}}),
            tasks(),
        )
        .await;
    assert_eq!(s["result"]["resultType"], "task", "{s}");
    s["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{s}"))
        .to_owned()
}

/// `tasks/get` of `id` through `r`: its result.
async fn get(r: &Replica, id: &str) -> Value {
    let g = r.request("tasks/get", json!({"taskId": id}), tasks()).await;
    assert!(g["result"].is_object(), "tasks/get {id}: {g}");
    g["result"].clone()
}

/// Poll `tasks/get` of `id` through `r` until its status is not `working`;
/// that result. A terminal status is never followed by another.
async fn settle(r: &Replica, id: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let t = get(r, id).await;
        if t["status"] != "working" {
            return t;
        }
        assert!(Instant::now() < deadline, "still working: {t}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The outputs of a completed task's result, as `tasks/get` gives it.
fn outputs(t: &Value) -> Value {
    assert_eq!(t["status"], "completed", "{t}");
    let s = &t["result"]["structuredContent"];
    assert_eq!(s["status"], "completed", "{t}");
    s["outputs"].clone()
}

/// Run `f` (one test's body) with the service's tools here, one such test
/// at a time; without nats-server or PostgreSQL it says SKIPPED and passes.
fn with_cluster<F: std::future::Future<Output = ()>>(f: impl FnOnce() -> F) {
    if !cluster::available() {
        return;
    }
    let _one = cluster::one_at_a_time();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(f());
}

/// Items 1 and 2: polled through B while it works and while it waits at its
/// approval, approved through B, read through A and B.
#[test]
fn a_task_started_on_one_replica_is_polled_and_approved_on_the_other() {
    with_cluster(|| async {
        let s = Service::start("approve", Duration::from_millis(400)).await;
        let id = start_task(&s.a, "gated.agent", json!({})).await;

        let first = get(&s.b, &id).await;
        assert_eq!(first["status"], "working", "{first}");
        let waiting = settle(&s.b, &id).await;
        assert_eq!(waiting["status"], "input_required", "{waiting}");
        let requests = waiting["inputRequests"]
            .as_object()
            .unwrap_or_else(|| panic!("{waiting}"));
        let key = requests.keys().next().unwrap().clone();
        assert!(key.starts_with("approval-"), "{waiting}");
        assert_eq!(get(&s.a, &id).await["status"], "input_required", "A agrees");

        // The figure: tasks/get through B, which does not hold the run.
        let mut ms: Vec<f64> = Vec::new();
        for _ in 0..200 {
            let at = Instant::now();
            let t = get(&s.b, &id).await;
            ms.push(at.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(t["status"], "input_required", "{t}");
        }
        ms.sort_by(f64::total_cmp);
        let pct = |p: f64| ms[((ms.len() - 1) as f64 * p).round() as usize];
        eprintln!(
            "tasks/get through the replica that does not hold the run: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} requests)",
            pct(0.5),
            pct(0.99),
            ms[ms.len() - 1],
            ms.len()
        );

        // Answered through B: the decision reaches the worker, which holds
        // the run, and it completes.
        let u = s
            .b
            .request(
                "tasks/update",
                json!({"taskId": id, "inputResponses": {key.clone(): {"action": "accept", "content": {"approve": true}}}}),
                tasks(),
            )
            .await;
        assert!(u["result"].is_object(), "tasks/update through B: {u}");
        // Once the answer is accepted the task never asks it again.
        let through_b = settle(&s.b, &id).await;
        assert!(
            through_b["inputRequests"].get(&key).is_none(),
            "tasks/get through B asks {key} again after tasks/update accepted it: {through_b}"
        );
        let through_a = settle(&s.a, &id).await;
        assert_eq!(
            outputs(&through_b),
            json!({"prep": "alpha-out", "act": "gated thing done"}),
            "{through_b}"
        );
        assert_eq!(outputs(&through_a), outputs(&through_b), "{through_a}");
        assert_eq!(
            s.model
                .requests()
                .iter()
                .filter(|r| r.body.to_string().contains("Do the gated thing"))
                .count(),
            1,
            "the approved goal is asked once"
        );
    });
}

/// The state and the answer of an input-required reply that waits for
/// `go.now`, signalled with `channel`.
fn signal(r: &Value, channel: &str) -> (String, Value) {
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    let state = r["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_owned();
    let key = r["result"]["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next())
        .unwrap_or_else(|| panic!("{r}"))
        .clone();
    assert!(key.starts_with("signal-"), "{r}");
    let payload = json!({"channel": channel}).to_string();
    let answer =
        json!({key: {"action": "accept", "content": {"event": "go.now", "payload": payload}}});
    (state, answer)
}

/// Item 3: one call of three rounds, A, B, A, each round's state sealed by
/// the replica before.
#[test]
fn a_multi_round_trip_call_completes_with_rounds_on_alternate_replicas() {
    with_cluster(|| async {
        let s = Service::start("rounds", Duration::from_millis(20)).await;
        let call = |r: &'static str, extra: Value| {
            let mut params = json!({"name": "run", "arguments": {"path": HOLDS_PATH}});
            for (k, v) in extra.as_object().cloned().unwrap_or_default() {
                params[k] = v;
            }
            let replica = if r == "A" { &s.a } else { &s.b };
            replica.request("tools/call", params, elicits())
        };
        let (state, answer) = signal(&call("A", json!({})).await, "#one");
        let r = call(
            "B",
            json!({"requestState": state, "inputResponses": answer}),
        )
        .await;
        assert!(r.get("error").is_none(), "round 2 on B: {r}");
        let (state, answer) = signal(&r, "#two");
        let r = call(
            "A",
            json!({"requestState": state, "inputResponses": answer}),
        )
        .await;
        assert!(r.get("error").is_none(), "round 3 on A: {r}");
        let done = &r["result"]["structuredContent"];
        assert_eq!(done["status"], "completed", "{r}");
        assert_eq!(
            done["outputs"],
            json!({"first": "#one", "second": "#two"}),
            "{r}"
        );
    });
}

/// Item 4: a run on the worker, started through A, cancelled through B.
#[test]
fn a_task_cancelled_on_the_other_replica_stops_on_the_worker() {
    with_cluster(|| async {
        let latency = Duration::from_millis(1500);
        let s = Service::start("cancel", latency).await;
        let id = start_task(&s.a, "Agentfile", json!({"n": 4})).await;
        s.until_asked(4, "a").await;

        let c =
            s.b.request("tasks/cancel", json!({"taskId": id}), tasks())
                .await;
        assert!(c["result"].is_object(), "tasks/cancel through B: {c}");
        let through_b = settle(&s.b, &id).await;
        assert_eq!(through_b["status"], "cancelled", "{through_b}");
        assert_eq!(settle(&s.a, &id).await["status"], "cancelled");

        // Past the time the goal asked would have been answered: the worker
        // asked nothing more.
        tokio::time::sleep(latency * 2).await;
        let asked: Vec<usize> = ["a", "b", "c"].iter().map(|g| s.asked(4, g)).collect();
        assert_eq!(asked, [1, 0, 0], "the model was asked on after the cancel");
        assert_eq!(get(&s.b, &id).await["status"], "cancelled");
    });
}

/// Item 5: A, which started the task, SIGKILLed while the worker runs it.
#[test]
fn a_task_completes_when_the_replica_that_started_it_is_killed() {
    with_cluster(|| async {
        let mut s = Service::start("kill", Duration::from_millis(500)).await;
        let id = start_task(&s.a, "Agentfile", json!({"n": 5})).await;
        s.until_asked(5, "a").await;
        s.a.kill().await;

        let mut seen: Vec<String> = Vec::new();
        let deadline = Instant::now() + WAIT;
        let done = loop {
            let t = get(&s.b, &id).await;
            let status = t["status"].as_str().unwrap_or_default().to_owned();
            if seen.last() != Some(&status) {
                seen.push(status.clone());
            }
            if status != "working" {
                break t;
            }
            assert!(Instant::now() < deadline, "still working: {t}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(seen, ["working", "completed"], "{done}");
        assert_eq!(
            outputs(&done),
            json!({"a": "alpha-out", "b": "beta-out", "c": "gamma-out"}),
            "{done}"
        );
        let asked: HashMap<&str, usize> = ["a", "b", "c"]
            .iter()
            .map(|g| (*g, s.asked(5, g)))
            .collect();
        assert_eq!(
            asked,
            HashMap::from([("a", 1), ("b", 1), ("c", 1)]),
            "each goal asked of the model once"
        );
        // Still so a moment later: nobody took the run up again.
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(get(&s.b, &id).await["status"], "completed");
        assert_eq!(s.model.request_count(), 3);
    });
}

/// Without NATS (CONTRACT §22): two replicas on one PostgreSQL database, each
/// running its runs in process. A task started through A waits at its
/// approval inside A; answered through B, the decision reaches A through the
/// store and the task completes, its goal asked once. A run of A's cancelled
/// through B stops there.
#[test]
fn without_nats_the_replica_holding_a_run_takes_its_approval_and_cancel_from_the_other() {
    with_cluster(|| async {
        let (model, ws, db_url) = model_and_store("in-process", Duration::from_millis(1500)).await;
        let start = |label: &'static str| {
            let mut c = tokio::process::Command::new(cluster::binary());
            c.args(["mcp", "--http", "127.0.0.1:0", "--heartbeat-ms", "300"])
                .arg("--workspace")
                .arg(ws.path())
                .current_dir(ws.path())
                .env(KEY_VAR, "test-key-0123456789")
                .env("AGENTFILE_DATABASE_URL", &db_url)
                .env(STATE_VAR, STATE_KEY)
                .env_remove("AGENTFILE_NATS_URL")
                .env_remove("AGENTFILE_MCP_TOKEN")
                .env_remove("AGENTFILE_PROVIDER")
                .env_remove("AGENTFILE_MODEL");
            Replica::start(c, label)
        };
        let a = start("replica A").await;
        let b = start("replica B").await;

        let id = start_task(&a, "gated.agent", json!({})).await;
        let waiting = settle(&b, &id).await;
        assert_eq!(waiting["status"], "input_required", "{waiting}");
        let key = waiting["inputRequests"]
            .as_object()
            .and_then(|m| m.keys().next())
            .unwrap_or_else(|| panic!("{waiting}"))
            .clone();
        let u = b
            .request(
                "tasks/update",
                json!({"taskId": id, "inputResponses": {key.clone(): {"action": "accept", "content": {"approve": true}}}}),
                tasks(),
            )
            .await;
        assert!(u["result"].is_object(), "tasks/update through B: {u}");
        let done = settle(&b, &id).await;
        assert!(done["inputRequests"].get(&key).is_none(), "{done}");
        assert_eq!(
            outputs(&done),
            json!({"prep": "alpha-out", "act": "gated thing done"}),
            "{done}"
        );
        let asked = |needle: &str| {
            model
                .requests()
                .iter()
                .filter(|r| r.body.to_string().contains(needle))
                .count()
        };
        assert_eq!(
            asked("Do the gated thing"),
            1,
            "the approved goal is asked once"
        );
        assert_eq!(
            asked("Write alpha for run 0"),
            1,
            "the run went on in A, not again in B"
        );

        // A three-goal run in A, cancelled through B mid-goal.
        let id = start_task(&a, "Agentfile", json!({"n": 5})).await;
        let deadline = Instant::now() + WAIT;
        while asked("Write alpha for run 5") == 0 {
            assert!(Instant::now() < deadline, "the run never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let c = b
            .request("tasks/cancel", json!({"taskId": id}), tasks())
            .await;
        assert!(c["result"].is_object(), "tasks/cancel through B: {c}");
        let t = settle(&a, &id).await;
        assert_eq!(t["status"], "cancelled", "{t}");
        tokio::time::sleep(Duration::from_millis(3000)).await;
        assert_eq!(
            asked("Write beta for run 5"),
            0,
            "the cancelled run went no further"
        );
    });
}
