//! The executor against the loopback fake provider (real HTTP, OpenAI wire
//! format) with a small in-test tool set. End-to-end runs through the real
//! binary and the real tools live in `tests/e2e/run.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentfile::config::LlmConfig;
use agentfile::events::EventBus;
use agentfile::executor::{
    Approval, ApprovalRequest, ApproveAll, Approver, Limits, ModelError, Models, RunSpec, Services,
    bind_inputs, execute,
};
use agentfile::frontend::{Options, analyze_bytes};
use agentfile::llm::fake::{FakeReply, FakeServer};
use agentfile::llm::{
    CancellationToken, HttpOptions, Provider, ProviderOptions, RetryPolicy, ToolDef,
    provider_from_config_with,
};
use agentfile::plan::Plan;
use agentfile::tools::{CallResult, Denial, ToolContext, ToolOutput, ToolSet};
use agentfile::wire::events::{Event, EventBody, LoopStop};
use futures::future::BoxFuture;
use serde_json::{Value, json};

fn plan(dir: &Path, src: &str) -> Arc<Plan> {
    let a = analyze_bytes(
        dir.join("Agentfile"),
        src.as_bytes().to_vec(),
        Options::default(),
    );
    assert_eq!(a.errors(), 0, "{:#?}", a.diagnostics);
    Arc::new(a.plan.unwrap())
}

struct OneModel(Arc<dyn Provider>);

impl Models for OneModel {
    fn provider(&self, _: Option<&str>) -> Result<Arc<dyn Provider>, ModelError> {
        Ok(self.0.clone())
    }
}

fn model(server: &FakeServer) -> OneModel {
    let llm = LlmConfig {
        provider: Some("openai".into()),
        model: Some("gpt-4o".into()),
        base_url: Some(server.base_url()),
        ..Default::default()
    };
    let options = ProviderOptions {
        http: HttpOptions {
            connect_timeout: Duration::from_secs(2),
            first_byte_timeout: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(20),
            call_timeout: Duration::from_secs(60),
            retry: RetryPolicy {
                max_attempts: 2,
                base_delay: Duration::from_millis(5),
                max_delay: Duration::from_millis(10),
                max_retry_after: Duration::from_secs(1),
            },
        },
        ..Default::default()
    };
    let env = |k: &str| (k == "OPENAI_API_KEY").then(|| "test-key-0123456789".to_owned());
    OneModel(provider_from_config_with(&llm, &BTreeMap::new(), &env, &options).unwrap())
}

/// `write` writes a file in the workspace; `bash` is always denied.
struct TestTools;

impl ToolSet for TestTools {
    fn definitions(&self) -> Vec<ToolDef> {
        vec![
            ToolDef {
                name: "write".into(),
                description: "Write a file.".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}),
            },
            ToolDef {
                name: "bash".into(),
                description: "Run a command.".into(),
                parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
            },
        ]
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, CallResult> {
        Box::pin(async move {
            let (output, denied) = match name {
                "write" => {
                    let path = ctx
                        .workspace
                        .join(args["path"].as_str().unwrap_or("out.txt"));
                    std::fs::write(&path, args["content"].as_str().unwrap_or("")).unwrap();
                    (ToolOutput::ok("written"), None)
                }
                "bash" => (
                    ToolOutput::error("denied by bash.allowlist"),
                    Some(Denial {
                        tool: "bash".into(),
                        rule: "bash.allowlist".into(),
                        reason: "not allowed".into(),
                    }),
                ),
                other => (ToolOutput::error(format!("unknown tool {other}")), None),
            };
            CallResult {
                output,
                denied,
                duration: Duration::ZERO,
            }
        })
    }
}

struct Run {
    result: agentfile::wire::events::RunResult,
    events: Vec<Event>,
}

#[allow(clippy::too_many_arguments)]
async fn run_with(
    plan: Arc<Plan>,
    server: &FakeServer,
    workspace: &Path,
    inputs: &[(&str, &str)],
    limits: Limits,
    prior: Vec<Event>,
    approver: &dyn Approver,
    cancel: CancellationToken,
) -> Run {
    let given: agentfile::executor::Inputs = inputs
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    let inputs = bind_inputs(&plan, &given).unwrap();
    let last_seq = prior.last().map(|e| e.seq).unwrap_or(0);
    let bus = EventBus::new("s-test", last_seq, None);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    bus.subscribe(Arc::new(move |e: &Event| s.lock().unwrap().push(e.clone())));
    let models = model(server);
    let svc = Services {
        models: &models,
        tools: &TestTools,
        approver,
        bus: &bus,
    };
    let spec = RunSpec {
        plan,
        inputs,
        workspace: workspace.to_owned(),
        agent_id: "test".into(),
        limits,
        provider_label: ("openai".into(), "gpt-4o".into()),
        endpoint: None,
        prior_events: prior,
        warnings: Vec::new(),
        trigger: None,
        forked_from: None,
        replay: None,
    };
    let result = execute(spec, &svc, cancel).await;
    let events = seen.lock().unwrap().clone();
    Run { result, events }
}

async fn run(plan: Arc<Plan>, server: &FakeServer, ws: &Path, inputs: &[(&str, &str)]) -> Run {
    run_with(
        plan,
        server,
        ws,
        inputs,
        Limits::default(),
        Vec::new(),
        &ApproveAll,
        CancellationToken::new(),
    )
    .await
}

fn tmp(name: &str) -> PathBuf {
    crate::support::tmp("exec", name)
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::kind).collect()
}

fn body_of(events: &[Event], kind: &str) -> Vec<EventBody> {
    events
        .iter()
        .filter(|e| e.kind() == kind)
        .map(|e| e.body.clone())
        .collect()
}

#[tokio::test]
async fn run_goals_in_order_with_tools_structured_outputs_and_interpolation() {
    let ws = tmp("basic");
    let p = plan(
        &ws,
        "NAME basic\nINPUT topic\nGOAL research \"Research $topic\" -> findings, sources\nGOAL write \"Write about $findings\"\nRUN main USING research, write\n",
    );
    let server = FakeServer::start(vec![
        FakeReply::tool_call("write", json!({"path": "notes.md", "content": "cats purr"})),
        FakeReply::tool_call(
            "submit_output",
            json!({"findings": "cats purr", "sources": "a book"}),
        ),
        FakeReply::tool_call("bash", json!({"command": "rm -rf /"})),
        FakeReply::text("An essay on purring."),
    ])
    .await
    .unwrap();
    let r = run(p, &server, &ws, &[("topic", "cats")]).await;
    assert_eq!(r.result.status, "completed", "{:?}", r.result);
    assert_eq!(r.result.exit_code, 0);
    assert_eq!(
        r.result.outputs["research"],
        json!({"findings": "cats purr", "sources": "a book"})
    );
    assert_eq!(r.result.outputs["write"], json!("An essay on purring."));
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.md")).unwrap(),
        "cats purr"
    );
    // The second goal's prompt had `$findings` filled in.
    let reqs = server.requests();
    let third = reqs[2].body.to_string();
    assert!(third.contains("Write about cats purr"), "{third}");
    // The denied call was reported to the model and as an event.
    let fourth = reqs[3].body.to_string();
    assert!(fourth.contains("denied by bash.allowlist"), "{fourth}");
    let ks = kinds(&r.events);
    assert_eq!(ks.first(), Some(&"run_started"));
    assert_eq!(ks.last(), Some(&"run_complete"));
    assert!(ks.contains(&"policy_denied"));
    // seq is dense.
    for (i, e) in r.events.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1);
    }
    assert_eq!(r.result.usage.turns, 4);
    assert_eq!(r.result.usage.tool_calls, 2);
}

#[tokio::test]
async fn three_agents_run_concurrently() {
    let ws = tmp("parallel");
    let p = plan(
        &ws,
        "NAME par\nAGENT a \"You are A.\"\nAGENT b \"You are B.\"\nAGENT c \"You are C.\"\nGOAL g \"Think\" USING a, b, c\nRUN main USING g\n",
    );
    let slow = |t: &str| FakeReply::text(t).with_latency(Duration::from_millis(300));
    let server = FakeServer::start(vec![
        slow("one"),
        slow("two"),
        slow("three"),
        FakeReply::text("all three agree"),
    ])
    .await
    .unwrap();
    let started = Instant::now();
    let r = run(p, &server, &ws, &[]).await;
    let took = started.elapsed();
    eprintln!("three agents at 300 ms each, then a synthesis: {took:?}");
    assert_eq!(r.result.status, "completed", "{:?}", r.result);
    assert_eq!(r.result.outputs["g"], json!("all three agree"));
    assert!(
        took < Duration::from_millis(750),
        "three 300 ms agents took {took:?}"
    );
    // Each agent's answer and the synthesis are events.
    let agent_outputs: Vec<_> = r
        .events
        .iter()
        .filter(|e| e.kind() == "goal_complete" && e.agent.is_some())
        .map(|e| e.agent.clone().unwrap())
        .collect();
    assert_eq!(agent_outputs, vec!["a", "b", "c"]);
    let synth = server.requests()[3].body.to_string();
    assert!(synth.contains("<agent name=\\\"a\\\">"), "{synth}");
}

#[tokio::test]
async fn a_failed_agent_is_an_error_event_and_the_others_carry_the_goal() {
    let ws = tmp("agent-fails");
    let p = plan(
        &ws,
        "NAME par\nAGENT a \"You are A.\"\nAGENT b \"You are B.\"\nGOAL g \"Think\" USING a, b\nRUN main USING g\n",
    );
    let server = FakeServer::start(vec![
        FakeReply::error(400, "this model refuses").when(["You are B."]),
        FakeReply::text("A's view").when(["You are A."]),
        FakeReply::text("only A answered").when(["<agent name"]),
    ])
    .await
    .unwrap();
    let r = run(p, &server, &ws, &[]).await;
    assert_eq!(r.result.status, "completed", "{:?}", r.result);
    assert_eq!(r.result.outputs["g"], json!("only A answered"));
    let errors: Vec<&Event> = r.events.iter().filter(|e| e.kind() == "error").collect();
    assert_eq!(errors.len(), 1, "{:?}", kinds(&r.events));
    assert_eq!(errors[0].agent.as_deref(), Some("b"));
    assert!(
        matches!(&errors[0].body, EventBody::Error { message } if message.contains("refuses")),
        "{:?}",
        errors[0]
    );
}

#[tokio::test]
async fn loops_stop_on_each_condition() {
    let src = "NAME l\nINPUT n DEFAULT 5\nGOAL work \"Work\"\nLOOP again USING work WITHIN $n\n";
    let stop_of = |r: &Run| {
        body_of(&r.events, "step_complete")
            .into_iter()
            .find_map(|b| match b {
                EventBody::StepComplete {
                    iterations, stop, ..
                } => Some((iterations, stop)),
                _ => None,
            })
            .unwrap()
    };

    // Explicit: the model calls signal_done in the second iteration.
    let ws = tmp("loop-explicit");
    let server = FakeServer::start(vec![
        FakeReply::tool_call("write", json!({"path": "a", "content": "1"})),
        FakeReply::text("did a"),
        FakeReply::tool_call("signal_done", json!({"reason": "done"})),
        FakeReply::text("finished"),
    ])
    .await
    .unwrap();
    let r = run(plan(&ws, src), &server, &ws, &[]).await;
    assert_eq!(stop_of(&r), (Some(2), Some(LoopStop::Explicit)));

    // No tool calls: the first iteration acts, the second does not.
    let ws = tmp("loop-notools");
    let server = FakeServer::start(vec![
        FakeReply::tool_call("write", json!({"path": "a", "content": "1"})),
        FakeReply::text("did a"),
        FakeReply::text("nothing to do"),
    ])
    .await
    .unwrap();
    let r = run(plan(&ws, src), &server, &ws, &[]).await;
    assert_eq!(stop_of(&r), (Some(2), Some(LoopStop::NoToolCalls)));

    // Unchanged: two iterations with tool calls and the same output.
    let ws = tmp("loop-unchanged");
    let server = FakeServer::start(vec![
        FakeReply::tool_call("write", json!({"path": "a", "content": "1"})),
        FakeReply::text("same"),
        FakeReply::tool_call("write", json!({"path": "a", "content": "1"})),
        FakeReply::text("same"),
    ])
    .await
    .unwrap();
    let r = run(plan(&ws, src), &server, &ws, &[]).await;
    assert_eq!(stop_of(&r), (Some(2), Some(LoopStop::Unchanged)));

    // Limit: WITHIN $n = 2, always acting, always different.
    let ws = tmp("loop-limit");
    let server = FakeServer::start(vec![
        FakeReply::tool_call("write", json!({"path": "a", "content": "1"})),
        FakeReply::text("one"),
        FakeReply::tool_call("write", json!({"path": "a", "content": "2"})),
        FakeReply::text("two"),
    ])
    .await
    .unwrap();
    let r = run(plan(&ws, src), &server, &ws, &[("n", "2")]).await;
    assert_eq!(stop_of(&r), (Some(2), Some(LoopStop::Limit)));
    assert_eq!(r.result.status, "completed");
    assert!(kinds(&r.events).contains(&"warning"));
}

#[tokio::test]
async fn converge_stops_on_converged_and_keeps_the_last_real_output() {
    let ws = tmp("converge");
    let p = plan(
        &ws,
        "NAME c\nCONVERGE polish \"Polish\" WITHIN 5\nRUN main USING polish\n",
    );
    let server = FakeServer::start(vec![
        FakeReply::text("draft 1"),
        FakeReply::text("draft 2"),
        FakeReply::text("CONVERGED"),
    ])
    .await
    .unwrap();
    let r = run(p, &server, &ws, &[]).await;
    assert_eq!(r.result.outputs["polish"], json!("draft 2"));
    let third = server.requests()[2].body.to_string();
    assert!(third.contains("<convergence-history>"), "{third}");
    assert!(
        !third.contains("WITHIN") && !third.contains("limit"),
        "the limit is hidden: {third}"
    );
    let done = body_of(&r.events, "goal_complete");
    assert!(matches!(
        done[0],
        EventBody::GoalComplete {
            converged: Some(LoopStop::Explicit),
            ..
        }
    ));
}

#[tokio::test]
async fn converge_with_fields_accepts_converged_and_keeps_the_last_fields() {
    // The runtime tells the model to reply exactly CONVERGED; for a goal with
    // `-> fields` that reply must end the goal, not fail as malformed JSON.
    let ws = tmp("converge-fields");
    let p = plan(
        &ws,
        "NAME c\nCONVERGE polish \"Polish\" -> title, body WITHIN 5\nRUN main USING polish\n",
    );
    let server = FakeServer::start(vec![
        FakeReply::tool_call("submit_output", json!({"title": "T1", "body": "B1"})),
        FakeReply::tool_call("submit_output", json!({"title": "T2", "body": "B2"})),
        FakeReply::text("CONVERGED"),
    ])
    .await
    .unwrap();
    let r = run(p, &server, &ws, &[]).await;
    assert_eq!(r.result.status, "completed", "{:?}", r.result);
    assert_eq!(r.result.exit_code, 0);
    assert_eq!(
        r.result.outputs["polish"],
        json!({"title": "T2", "body": "B2"})
    );
    assert_eq!(server.request_count(), 3, "no retry of the CONVERGED reply");
}

#[tokio::test]
async fn signal_done_outside_a_loop_is_answered_once_then_the_goal_ends() {
    let ws = tmp("stray-done");
    let p = plan(&ws, "NAME s\nGOAL g \"Do it\"\nRUN main USING g\n");
    let mut replies = vec![FakeReply::tool_call("signal_done", json!({"reason": "x"}))];
    for _ in 0..50 {
        replies.push(FakeReply {
            text: Some("all done".into()),
            ..FakeReply::tool_call("signal_done", json!({"reason": "x"}))
        });
    }
    let server = FakeServer::start(replies).await.unwrap();
    let r = run(p, &server, &ws, &[]).await;
    assert_eq!(r.result.status, "completed", "{:?}", r.result);
    assert_eq!(r.result.outputs["g"], json!("all done"));
    assert_eq!(server.request_count(), 2, "told once, then the goal ended");
    let told = server.requests()[1].body.to_string();
    assert!(told.contains("not in one"), "{told}");
}

#[tokio::test]
async fn a_retry_is_a_warning_event_before_its_wait() {
    let ws = tmp("retry-warning");
    let p = plan(&ws, "NAME r\nGOAL g \"Do it\"\nRUN main USING g\n");
    let server = FakeServer::start(vec![
        FakeReply::error(429, "slow down"),
        FakeReply::text("done"),
    ])
    .await
    .unwrap();
    let r = run(p, &server, &ws, &[]).await;
    assert_eq!(r.result.status, "completed", "{:?}", r.result);
    let warnings: Vec<String> = body_of(&r.events, "warning")
        .into_iter()
        .filter_map(|b| match b {
            EventBody::Warning { message } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("429") && warnings[0].contains("retry 2/2 in"),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn unparseable_tool_arguments_go_back_to_the_model() {
    // Arguments nested 10,000 deep are not JSON serde will build: the model is
    // told and answers again; the run does not end.
    let ws = tmp("deep-args");
    let p = plan(&ws, "NAME d\nGOAL g \"Do it\"\nRUN main USING g\n");
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let body = json!({
        "id": "x", "object": "chat.completion", "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "write", "arguments": deep}}]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1}
    });
    let server = FakeServer::start(vec![
        FakeReply::raw(200, "application/json", body.to_string()),
        FakeReply::text("sorry, done without tools"),
    ])
    .await
    .unwrap();
    let r = run(p, &server, &ws, &[]).await;
    assert_eq!(r.result.status, "completed", "{:?}", r.result);
    assert_eq!(r.result.outputs["g"], json!("sorry, done without tools"));
    let second = server.requests()[1].body.to_string();
    assert!(second.contains("not valid JSON"), "{second}");
}

#[tokio::test]
async fn text_streams_as_transient_deltas_that_are_never_stored() {
    let ws = tmp("deltas");
    let p = plan(&ws, "NAME d\nGOAL g \"Say it\"\nRUN main USING g\n");
    let server = FakeServer::start(vec![FakeReply::text("streamed words arrive in pieces")])
        .await
        .unwrap();
    let given = BTreeMap::new();
    let inputs = bind_inputs(&p, &given).unwrap();
    let dir = tmp("deltas-store");
    let store: Arc<dyn agentfile::session::SessionStore> =
        Arc::new(agentfile::session::file::FileStore::open(&dir).unwrap());
    let meta = agentfile::session::SessionMeta {
        id: "s-deltas".into(),
        workflow: "d".into(),
        path: "Agentfile".into(),
        workspace: ws.display().to_string(),
        inputs: BTreeMap::new(),
        status: agentfile::session::SessionStatus::Running,
        created_at: "2026-01-01T00:00:00.000Z".into(),
        updated_at: "2026-01-01T00:00:00.000Z".into(),
        last_seq: 0,
    };
    store.create(&meta).unwrap();
    let bus = EventBus::new("s-deltas", 0, Some(store.clone()));
    let live = Arc::new(Mutex::new(Vec::<Event>::new()));
    let l = live.clone();
    bus.subscribe(Arc::new(agentfile::events::AllEvents(move |e: &Event| {
        l.lock().unwrap().push(e.clone())
    })));
    let models = model(&server);
    let svc = Services {
        models: &models,
        tools: &TestTools,
        approver: &ApproveAll,
        bus: &bus,
    };
    let spec = RunSpec {
        plan: p,
        inputs,
        workspace: ws.clone(),
        agent_id: "test".into(),
        limits: Limits::default(),
        provider_label: ("openai".into(), "gpt-4o".into()),
        endpoint: None,
        prior_events: Vec::new(),
        warnings: Vec::new(),
        trigger: None,
        forked_from: None,
        replay: None,
    };
    let result = execute(spec, &svc, CancellationToken::new()).await;
    assert_eq!(result.status, "completed");
    let live = live.lock().unwrap().clone();
    let deltas: String = live
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::LlmDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, "streamed words arrive in pieces");
    assert!(live.iter().filter(|e| e.kind() == "llm_delta").count() > 1);
    // Deltas come before the response they belong to, and move no seq.
    let first_delta = live.iter().position(|e| e.kind() == "llm_delta").unwrap();
    let response = live
        .iter()
        .position(|e| e.kind() == "llm_response")
        .unwrap();
    assert!(first_delta < response);
    let stored = store.events("s-deltas", 0).unwrap();
    assert!(stored.iter().all(|e| e.kind() != "llm_delta"));
    for (i, e) in stored.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1);
    }
    assert_eq!(
        stored.len(),
        live.len() - live.iter().filter(|e| e.kind() == "llm_delta").count()
    );
}

#[tokio::test]
async fn invalid_structured_output_is_retried_once_then_fails() {
    let ws = tmp("badjson");
    let p = plan(
        &ws,
        "NAME j\nGOAL g \"Give facts\" -> facts\nRUN main USING g\n",
    );
    let server = FakeServer::start(vec![
        FakeReply::text("not json"),
        FakeReply::text("still not json"),
    ])
    .await
    .unwrap();
    let r = run(p.clone(), &server, &ws, &[]).await;
    assert_eq!(r.result.status, "failed");
    assert_eq!(r.result.exit_code, 1);
    assert!(
        r.result
            .error
            .as_deref()
            .unwrap()
            .contains("still not json"),
        "{:?}",
        r.result.error
    );
    assert_eq!(server.request_count(), 2);

    let server = FakeServer::start(vec![
        FakeReply::text("oops"),
        FakeReply::text("```json\n{\"facts\": [1, 2]}\n```"),
    ])
    .await
    .unwrap();
    let r = run(p, &server, &ws, &[]).await;
    assert_eq!(r.result.outputs["g"], json!({"facts": [1, 2]}));
}

#[tokio::test]
async fn budgets_stop_the_run_with_exit_code_4() {
    let ws = tmp("budget");
    let p = plan(&ws, "NAME b\nGOAL g \"Work\"\nRUN main USING g\n");
    let server = FakeServer::start(vec![
        FakeReply::tool_call("write", json!({"path": "a", "content": "1"})),
        FakeReply::tool_call("write", json!({"path": "a", "content": "2"})),
        FakeReply::tool_call("write", json!({"path": "a", "content": "3"})),
    ])
    .await
    .unwrap();
    let limits = Limits {
        max_turns: Some(2),
        ..Limits::default()
    };
    let r = run_with(
        p.clone(),
        &server,
        &ws,
        &[],
        limits,
        Vec::new(),
        &ApproveAll,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(r.result.exit_code, 4, "{:?}", r.result);
    assert_eq!(r.result.termination_reason.as_str(), "max_turns");
    assert_eq!(server.request_count(), 2);
    assert_eq!(kinds(&r.events).last(), Some(&"run_failed"));

    // A timeout stops a slow model call mid-flight.
    let server = FakeServer::start(vec![
        FakeReply::text("late").with_latency(Duration::from_secs(10)),
    ])
    .await
    .unwrap();
    let limits = Limits {
        timeout: Some(Duration::from_millis(200)),
        ..Limits::default()
    };
    let started = Instant::now();
    let r = run_with(
        p,
        &server,
        &ws,
        &[],
        limits,
        Vec::new(),
        &ApproveAll,
        CancellationToken::new(),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        (r.result.exit_code, r.result.termination_reason.as_str()),
        (4, "timeout")
    );
}

#[tokio::test]
async fn cancellation_stops_at_once_with_exit_130() {
    let ws = tmp("cancel");
    let p = plan(&ws, "NAME c\nGOAL g \"Work\"\nRUN main USING g\n");
    let server = FakeServer::start(vec![
        FakeReply::text("late").with_latency(Duration::from_secs(10)),
    ])
    .await
    .unwrap();
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        c.cancel();
    });
    let started = Instant::now();
    let r = run_with(
        p,
        &server,
        &ws,
        &[],
        Limits::default(),
        Vec::new(),
        &ApproveAll,
        cancel,
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(r.result.exit_code, 130);
    assert_eq!(kinds(&r.events).last(), Some(&"run_cancelled"));
}

struct Deny;

impl Approver for Deny {
    fn decide<'a>(&'a self, _: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async { Approval::Rejected(Some("not today".into())) })
    }
}

#[tokio::test]
async fn supervised_goals_wait_for_approval() {
    let ws = tmp("approve");
    let p = plan(
        &ws,
        "NAME a\nGOAL safe \"Look\"\nGOAL risky \"Deploy\" SUPERVISED HUMAN\nRUN main USING safe, risky\n",
    );
    let server = FakeServer::start(vec![FakeReply::text("looked")])
        .await
        .unwrap();
    let r = run_with(
        p,
        &server,
        &ws,
        &[],
        Limits::default(),
        Vec::new(),
        &Deny,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(r.result.exit_code, 3);
    assert_eq!(r.result.termination_reason.as_str(), "approval_denied");
    assert_eq!(
        server.request_count(),
        1,
        "the rejected goal never reached the model"
    );
    assert!(kinds(&r.events).contains(&"approval_required"));
}

#[tokio::test]
async fn resume_skips_completed_goals_and_continues_loops() {
    let ws = tmp("resume");
    let src = "NAME r\nGOAL a \"First\"\nGOAL b \"Second from $a\"\nGOAL c \"Loop body\"\nRUN one USING a, b\nLOOP two USING c WITHIN 3\n";
    let p = plan(&ws, src);
    let full = FakeServer::start(vec![
        FakeReply::text("A"),
        FakeReply::text("B"),
        FakeReply::tool_call("write", json!({"path": "x", "content": "1"})),
        FakeReply::text("C1"),
        FakeReply::text("C2"),
    ])
    .await
    .unwrap();
    let whole = run(p.clone(), &full, &ws, &[]).await;
    assert_eq!(whole.result.status, "completed");

    // Cut the log right after the loop's first iteration completed.
    let cut = whole
        .events
        .iter()
        .position(|e| e.kind() == "goal_complete" && e.goal.as_deref() == Some("c"))
        .unwrap();
    let prior = whole.events[..=cut].to_vec();
    let rest = FakeServer::start(vec![FakeReply::text("C2")])
        .await
        .unwrap();
    let resumed = run_with(
        p,
        &rest,
        &ws,
        &[],
        Limits::default(),
        prior,
        &ApproveAll,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(resumed.result.status, "completed", "{:?}", resumed.result);
    assert_eq!(resumed.result.outputs, whole.result.outputs);
    assert_eq!(
        rest.request_count(),
        1,
        "only the second loop iteration ran again"
    );
    assert!(matches!(
        resumed.events[0].body,
        EventBody::RunStarted {
            resumed_from_seq: Some(_),
            ..
        }
    ));
    assert_eq!(resumed.events[0].seq, cut as u64 + 2);
}

#[test]
fn inputs_are_checked_before_any_model_call() {
    let ws = tmp("inputs");
    let p = plan(
        &ws,
        "NAME i\nINPUT topic\nINPUT n DEFAULT 3\nGOAL g \"$topic\"\nLOOP l USING g WITHIN $n\n",
    );
    let e = bind_inputs(&p, &BTreeMap::new()).unwrap_err().to_string();
    assert!(e.contains("missing required input `topic`"), "{e}");
    let given = BTreeMap::from([("topik".to_owned(), "x".into())]);
    assert!(
        bind_inputs(&p, &given)
            .unwrap_err()
            .to_string()
            .contains("did you mean `topic`?")
    );
    let given = BTreeMap::from([
        ("topic".to_owned(), "x".into()),
        ("n".to_owned(), "lots".into()),
    ]);
    assert!(
        bind_inputs(&p, &given)
            .unwrap_err()
            .to_string()
            .contains("positive whole number")
    );
    // A JSON number binds as it is, and limits the loop like its text would.
    let given = BTreeMap::from([("topic".to_owned(), "x".into()), ("n".to_owned(), 2.into())]);
    assert_eq!(bind_inputs(&p, &given).unwrap()["n"], serde_json::json!(2));
    let given = BTreeMap::from([("topic".to_owned(), "x".into()), ("n".to_owned(), 0.into())]);
    assert_eq!(
        bind_inputs(&p, &given).unwrap_err().to_string(),
        "input `n` is a loop limit and must be a positive whole number, not `0`"
    );
}
