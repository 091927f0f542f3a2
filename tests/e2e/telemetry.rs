//! Telemetry end to end: the real binary runs a multi-agent workflow against the
//! loopback fake provider and ships what happened to a loopback collector — an
//! OTLP/HTTP receiver that decodes the protobuf (span tree, token attributes,
//! logs), a plain HTTP receiver for the seed's JSON messages (batches,
//! retries), or a file. A collector that is down or goes away mid-run never
//! changes the run's outcome. And the process's log lines on stderr never show
//! a secret.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentfile::llm::fake::{FakeReply, FakeServer};
use agentfile::wire::telemetry::{MessageKind, TelemetryMessage};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const KEY_VAR: &str = "AGENTFILE_TEST_KEY";
const KEY: &str = "sk-test-9f8e7d6c5b4a3210";
const TOKEN_VAR: &str = "AGENTFILE_TEST_TELEMETRY_TOKEN";
const TOKEN: &str = "telemetry-token-5551212";

/// Two agents in parallel (Alpha lists the workspace first), their synthesis,
/// then a goal of its own.
const TEAM: &str = "NAME team\n\
AGENT alpha \"You are Alpha, the optimist.\"\n\
AGENT beta \"You are Beta, the skeptic.\"\n\
GOAL survey \"Survey the workspace\" USING alpha, beta\n\
GOAL summary \"Summarise this: $survey\"\n\
RUN main USING survey, summary\n";

/// The model, scripted by what it is asked (concurrent agents ask in any order).
fn team_model() -> Vec<FakeReply> {
    vec![
        FakeReply::text("Alpha: one file, notes.txt.")
            .with_usage(150, 20)
            .when(["You are Alpha", "\"role\":\"tool\""]),
        FakeReply::tool_call("ls", json!({"path": "."}))
            .with_usage(100, 10)
            .when(["You are Alpha"]),
        FakeReply::text("Beta: nothing alarming.")
            .with_usage(90, 9)
            .when(["You are Beta"]),
        FakeReply::text("Synthesis: one file, nothing alarming.")
            .with_usage(60, 6)
            .when(["You reconcile"]),
        FakeReply::text("Summary: the workspace holds notes.txt.")
            .with_usage(70, 7)
            .when(["Summarise this"]),
    ]
}

fn tmp(name: &str) -> PathBuf {
    let d = crate::support::tmp("telemetry", name);
    std::fs::create_dir_all(d.join("ws")).unwrap();
    std::fs::write(
        d.join("ws/notes.txt"),
        "hello
",
    )
    .unwrap();
    d
}

/// A workflow, and a config pointing the OpenAI provider at the fake server
/// with this `[telemetry]` section.
fn setup(dir: &Path, workflow: &str, server: &FakeServer, telemetry: &str) {
    std::fs::write(dir.join("Agentfile"), workflow).unwrap();
    std::fs::write(
        dir.join("agent.toml"),
        format!(
            "[llm]\nprovider = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n\n[telemetry]\n{telemetry}",
            server.base_url()
        ),
    )
    .unwrap();
}

fn agentfile(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentfile"));
    cmd.args(extra)
        .arg("run")
        .arg(dir.join("Agentfile"))
        .args(["--config", dir.join("agent.toml").to_str().unwrap()])
        .args(["--workspace", dir.join("ws").to_str().unwrap()])
        .args(["--output", "json"])
        .current_dir(dir)
        .env(KEY_VAR, KEY)
        .env(TOKEN_VAR, TOKEN)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG");
    // The collector is the one the test starts, whatever this machine has set.
    for (k, _) in std::env::vars() {
        if k.starts_with("OTEL_") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run agentfile")
}

fn result_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not a result ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn assert_completed(o: &Output) -> Value {
    let r = result_of(o);
    assert_eq!(
        (o.status.code(), r["status"].as_str()),
        (Some(0), Some("completed")),
        "stderr:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    r
}

/// One request a collector received.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    status: u16,
    headers: BTreeMap<String, String>,
    body: Bytes,
}

/// A loopback collector: answers each request with the next of `statuses`
/// (200 when they run out), keeps every request, and — with `stop_after` —
/// goes away (listener and connections closed) after that many requests.
struct Collector {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Received>>>,
    stop: CancellationToken,
}

impl Collector {
    async fn start(statuses: Vec<u16>, stop_after: Option<usize>) -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let statuses = Arc::new(Mutex::new(statuses.into_iter()));
        let stop = CancellationToken::new();
        let (kept, halt) = (seen.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let stream = tokio::select! {
                    _ = halt.cancelled() => return,
                    a = listener.accept() => match a { Ok((s, _)) => s, Err(_) => return },
                };
                let (kept, statuses, halt) = (kept.clone(), statuses.clone(), halt.clone());
                let closing = halt.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        let (kept, statuses, halt) = (kept.clone(), statuses.clone(), halt.clone());
                        async move {
                            let path = req.uri().path().to_owned();
                            let headers = req
                                .headers()
                                .iter()
                                .map(|(k, v)| {
                                    (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned())
                                })
                                .collect();
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let status = statuses.lock().unwrap().next().unwrap_or(200);
                            let n = {
                                let mut k = kept.lock().unwrap();
                                k.push(Received {
                                    path,
                                    status,
                                    headers,
                                    body,
                                });
                                k.len()
                            };
                            if stop_after.is_some_and(|s| n >= s) {
                                halt.cancel();
                            }
                            // An empty OTLP Export*ServiceResponse is zero bytes.
                            Ok::<_, Infallible>(
                                Response::builder()
                                    .status(status)
                                    .header("content-type", "application/x-protobuf")
                                    .body(Full::new(Bytes::new()))
                                    .unwrap(),
                            )
                        }
                    });
                    let conn =
                        http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                    tokio::select! {
                        _ = conn => {}
                        _ = closing.cancelled() => {}
                    }
                });
            }
        });
        Collector { addr, seen, stop }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn received(&self) -> Vec<Received> {
        self.seen.lock().unwrap().clone()
    }

    /// The accepted requests to `path`, decoded.
    fn decoded<M: Message + Default>(&self, path: &str) -> Vec<M> {
        self.received()
            .iter()
            .filter(|r| r.path == path && r.status == 200)
            .map(|r| M::decode(r.body.clone()).unwrap())
            .collect()
    }

    fn spans(&self) -> Vec<Span> {
        self.decoded::<ExportTraceServiceRequest>("/v1/traces")
            .into_iter()
            .flat_map(|r| r.resource_spans)
            .flat_map(|rs| rs.scope_spans)
            .flat_map(|ss| ss.spans)
            .collect()
    }

    fn logs(&self) -> Vec<LogRecord> {
        self.decoded::<ExportLogsServiceRequest>("/v1/logs")
            .into_iter()
            .flat_map(|r| r.resource_logs)
            .flat_map(|rl| rl.scope_logs)
            .flat_map(|sl| sl.log_records)
            .collect()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Any> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn int(attrs: &[KeyValue], key: &str) -> Option<i64> {
    match attr(attrs, key) {
        Some(Any::IntValue(i)) => Some(*i),
        _ => None,
    }
}

fn string<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match attr(attrs, key) {
        Some(Any::StringValue(s)) => Some(s),
        _ => None,
    }
}

fn named<'a>(spans: &'a [Span], name: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found = named(spans, name);
    assert_eq!(
        found.len(),
        1,
        "spans named `{name}`: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    found[0]
}

#[test]
fn otlp_span_tree_of_a_multi_agent_run() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FakeServer::start(team_model())).unwrap();
    let collector = rt.block_on(Collector::start(vec![], None));
    let dir = tmp("otlp-tree");
    setup(
        &dir,
        TEAM,
        &server,
        &format!(
            "enabled = true\nprotocol = \"otlp\"\nendpoint = \"{}\"\n\n[telemetry.headers_env]\nx-collector-token = \"{TOKEN_VAR}\"\n",
            collector.url()
        ),
    );
    let o = agentfile(&dir, &[], &[]);
    let result = assert_completed(&o);
    let session = result["session_id"].as_str().unwrap();

    let traces = collector.decoded::<ExportTraceServiceRequest>("/v1/traces");
    let resource = traces[0].resource_spans[0].resource.as_ref().unwrap();
    assert_eq!(
        string(&resource.attributes, "service.name"),
        Some("agentfile")
    );
    let spans = collector.spans();
    assert_eq!(
        spans.len(),
        13,
        "{:#?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let trace = &spans[0].trace_id;
    assert!(
        spans.iter().all(|s| &s.trace_id == trace),
        "one trace per run"
    );

    let run = one(&spans, "run team");
    assert!(run.parent_span_id.is_empty());
    assert_eq!(string(&run.attributes, "session.id"), Some(session));
    assert_eq!(
        int(&run.attributes, "agentfile.usage.input_tokens"),
        Some(470)
    );
    let step = one(&spans, "step main");
    assert_eq!(step.parent_span_id, run.span_id);
    let survey = one(&spans, "goal survey");
    let summary = one(&spans, "goal summary");
    assert_eq!(survey.parent_span_id, step.span_id);
    assert_eq!(summary.parent_span_id, step.span_id);
    let agents: BTreeMap<&str, &Span> = ["alpha", "beta", "synthesis"]
        .into_iter()
        .map(|a| (a, one(&spans, &format!("invoke_agent {a}"))))
        .collect();
    for (name, a) in &agents {
        assert_eq!(a.parent_span_id, survey.span_id, "{name}");
        assert_eq!(string(&a.attributes, "gen_ai.agent.name"), Some(*name));
        assert_eq!(
            string(&a.attributes, "gen_ai.operation.name"),
            Some("invoke_agent")
        );
    }

    // Model calls: under their agent (or the goal when it has none), with the
    // GenAI attributes and the tokens the provider reported.
    let chats = named(&spans, "chat gpt-4o");
    assert_eq!(chats.len(), 5);
    let tokens_under = |parent: &Span| {
        let mut t: Vec<(i64, i64)> = chats
            .iter()
            .filter(|c| c.parent_span_id == parent.span_id)
            .map(|c| {
                (
                    int(&c.attributes, "gen_ai.usage.input_tokens").unwrap(),
                    int(&c.attributes, "gen_ai.usage.output_tokens").unwrap(),
                )
            })
            .collect();
        t.sort();
        t
    };
    assert_eq!(tokens_under(agents["alpha"]), vec![(100, 10), (150, 20)]);
    assert_eq!(tokens_under(agents["beta"]), vec![(90, 9)]);
    assert_eq!(tokens_under(agents["synthesis"]), vec![(60, 6)]);
    assert_eq!(tokens_under(summary), vec![(70, 7)]);
    for c in &chats {
        assert_eq!(string(&c.attributes, "gen_ai.operation.name"), Some("chat"));
        assert_eq!(
            string(&c.attributes, "gen_ai.provider.name"),
            Some("openai")
        );
        assert_eq!(
            string(&c.attributes, "gen_ai.request.model"),
            Some("gpt-4o")
        );
        assert!(string(&c.attributes, "gen_ai.response.model").is_some());
        assert!(
            matches!(attr(&c.attributes, "gen_ai.response.finish_reasons"), Some(Any::ArrayValue(a)) if a.values.len() == 1)
        );
        // Content capture is off by default for OTLP.
        assert!(attr(&c.attributes, "gen_ai.output.messages").is_none());
        assert_eq!(c.kind, 3, "SPAN_KIND_CLIENT");
    }

    let tool = one(&spans, "execute_tool ls");
    assert_eq!(tool.parent_span_id, agents["alpha"].span_id);
    assert_eq!(string(&tool.attributes, "gen_ai.tool.name"), Some("ls"));
    assert!(string(&tool.attributes, "gen_ai.tool.call.id").is_some());
    assert!(attr(&tool.attributes, "gen_ai.tool.call.result").is_none());

    // A clean run: no error statuses.
    for s in &spans {
        assert!(
            s.status.as_ref().is_none_or(|st| st.code != 2),
            "{} failed: {:?}",
            s.name,
            s.status
        );
    }
    // Children sit inside their parents in time.
    let by_id: BTreeMap<&[u8], &Span> = spans.iter().map(|s| (&s.span_id[..], s)).collect();
    for s in &spans {
        if let Some(p) = by_id.get(&s.parent_span_id[..]) {
            assert!(
                p.start_time_unix_nano <= s.start_time_unix_nano
                    && s.end_time_unix_nano <= p.end_time_unix_nano,
                "{} outside {}",
                s.name,
                p.name
            );
        }
    }

    // Logs: one record per event, the seed's message as body, linked to the trace.
    let logs = collector.logs();
    let events = agentfile_events(&dir, session);
    assert_eq!(logs.len(), events, "one log record per event");
    for l in &logs {
        assert_eq!(string(&l.attributes, "session.id"), Some(session));
        assert_eq!(&l.trace_id, trace);
        let Some(AnyValue {
            value: Some(Any::KvlistValue(body)),
        }) = &l.body
        else {
            panic!("body is not a map: {l:?}")
        };
        assert_eq!(string(&body.values, "workflow_name"), Some("team"));
    }
    assert!(
        logs.iter()
            .any(|l| l.event_name == "agentfile.llm_response")
    );

    // The configured header went to the collector; the key never did.
    for r in collector.received() {
        assert_eq!(
            r.headers.get("x-collector-token").map(String::as_str),
            Some(TOKEN)
        );
        assert!(!String::from_utf8_lossy(&r.body).contains(KEY));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// How many events the session stored.
fn agentfile_events(dir: &Path, session: &str) -> usize {
    let o = Command::new(env!("CARGO_BIN_EXE_agentfile"))
        .args(["sessions", "show", session, "--format", "json"])
        .args(["--workspace", dir.join("ws").to_str().unwrap()])
        .args(["--config", dir.join("agent.toml").to_str().unwrap()])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v["events"].as_array().unwrap().len()
}

/// A long run (six model calls of 250 ms) whose collector accepts one request
/// and then goes away.
#[test]
fn a_collector_that_goes_away_mid_run_changes_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut script: Vec<FakeReply> = (0..5)
        .map(|i| {
            FakeReply::tool_call("ls", json!({"path": "."}))
                .with_latency(Duration::from_millis(250))
                .with_usage(10 + i, 1)
        })
        .collect();
    script.push(FakeReply::text("done").with_latency(Duration::from_millis(250)));
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let collector = rt.block_on(Collector::start(vec![], Some(1)));
    let dir = tmp("otlp-gone");
    setup(
        &dir,
        "NAME long\nGOAL look \"Look around\"\nRUN main USING look\n",
        &server,
        &format!("enabled = true\nendpoint = \"{}\"\n", collector.url()),
    );
    let started = Instant::now();
    // Export every 100 ms, so batches go out while the run is still going.
    let o = agentfile(
        &dir,
        &[],
        &[
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
            ("OTEL_BLRP_SCHEDULE_DELAY", "100"),
        ],
    );
    let took = started.elapsed();
    let result = assert_completed(&o);
    assert_eq!(result["outputs"]["look"], "done");
    let got = collector.received();
    assert_eq!(got.len(), 1, "the collector took one request, then left");
    // The run (≈1.5 s of model latency) plus at most the bounded flush at its
    // end (2 s); the bound is generous for a loaded machine.
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("telemetry") && stderr.contains("not delivered"),
        "the loss is reported once:\n{stderr}"
    );
    assert_eq!(stderr.matches("not delivered").count(), 1, "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn messages(collector: &Collector) -> Vec<(u16, Vec<TelemetryMessage>)> {
    collector
        .received()
        .iter()
        .map(|r| {
            assert_eq!(r.path, "/ingest");
            assert_eq!(
                r.headers.get("content-type").map(String::as_str),
                Some("application/json")
            );
            (r.status, serde_json::from_slice(&r.body).unwrap())
        })
        .collect()
}

fn http_config(collector: &Collector) -> String {
    format!(
        "enabled = true\nprotocol = \"http\"\nendpoint = \"{}/ingest\"\n",
        collector.url()
    )
}

#[test]
fn http_messages_arrive_in_batches() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FakeServer::start(team_model())).unwrap();
    let collector = rt.block_on(Collector::start(vec![], None));
    let dir = tmp("http-batches");
    setup(&dir, TEAM, &server, &http_config(&collector));
    let o = agentfile(&dir, &[], &[]);
    let result = assert_completed(&o);
    let session = result["session_id"].as_str().unwrap();
    let posts = messages(&collector);
    let all: Vec<&TelemetryMessage> = posts.iter().flat_map(|(_, m)| m).collect();
    let events = agentfile_events(&dir, session);
    assert_eq!(all.len(), events, "every event, once");
    assert!(
        posts.len() < all.len() && posts.iter().any(|(_, m)| m.len() > 1),
        "{} POSTs for {} messages",
        posts.len(),
        all.len()
    );
    let seqs: Vec<u64> = all.iter().map(|m| m.data.seq).collect();
    assert_eq!(
        seqs,
        (1..=events as u64).collect::<Vec<_>>(),
        "in order, no gaps"
    );
    for m in &all {
        assert_eq!((m.schema_version, m.session_id.as_str()), (1, session));
        assert_eq!(
            (m.agent_id.as_str(), m.workflow_name.as_str()),
            ("default", "team")
        );
    }
    // The seed's data fields, on an agent's model answer.
    let beta = all
        .iter()
        .find(|m| m.data.event == "llm_response" && m.data.agent.as_deref() == Some("beta"))
        .unwrap();
    assert_eq!(beta.kind, MessageKind::Message);
    assert_eq!(beta.data.role.as_deref(), Some("assistant"));
    assert_eq!(beta.data.goal.as_deref(), Some("survey"));
    assert_eq!(
        beta.data.content.as_deref(),
        Some("Beta: nothing alarming.")
    );
    assert_eq!(beta.data.tokens.map(|t| (t.input, t.output)), Some((90, 9)));
    assert_eq!(beta.data.model.as_deref(), Some("gpt-4o"));
    assert!(beta.data.latency.is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn http_batches_are_retried_and_arrive_once() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FakeServer::start(team_model())).unwrap();
    let collector = rt.block_on(Collector::start(vec![503, 500], None));
    let dir = tmp("http-retry");
    setup(&dir, TEAM, &server, &http_config(&collector));
    let o = agentfile(&dir, &[], &[]);
    let result = assert_completed(&o);
    let session = result["session_id"].as_str().unwrap();
    let posts = messages(&collector);
    let statuses: Vec<u16> = posts.iter().map(|(s, _)| *s).collect();
    assert_eq!(&statuses[..3], &[503, 500, 200], "{statuses:?}");
    // The refused POSTs carried the same batch the accepted one did.
    assert_eq!(posts[0].1, posts[2].1);
    let accepted: Vec<u64> = posts
        .iter()
        .filter(|(s, _)| *s == 200)
        .flat_map(|(_, m)| m.iter().map(|m| m.data.seq))
        .collect();
    let events = agentfile_events(&dir, session) as u64;
    assert_eq!(
        accepted,
        (1..=events).collect::<Vec<_>>(),
        "each message once"
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("not delivered"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_collector_that_is_down_costs_the_run_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FakeServer::start(team_model())).unwrap();
    // A port with nothing behind it.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/ingest?token=s3cret", free.local_addr().unwrap());
    drop(free);
    let dir = tmp("http-down");
    setup(
        &dir,
        TEAM,
        &server,
        &format!("enabled = true\nprotocol = \"http\"\nendpoint = \"{url}\"\n"),
    );
    let started = Instant::now();
    let o = agentfile(&dir, &[], &[]);
    assert_completed(&o);
    assert!(started.elapsed() < Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("not delivered"), "{stderr}");
    assert!(
        !stderr.contains("s3cret"),
        "the URL's query stays out of logs:\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn file_exporter_writes_one_jsonl_file_per_session() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut model = team_model();
    model.push(
        FakeReply::text("Polished.")
            .with_usage(30, 3)
            .when(["Polish"]),
    );
    let server = rt.block_on(FakeServer::start(model)).unwrap();
    let dir = tmp("file");
    let workflow =
        format!("{TEAM}GOAL polish \"Polish the summary\"\nLOOP refine USING polish WITHIN 2\n");
    setup(
        &dir,
        &workflow,
        &server,
        "enabled = true\nprotocol = \"file\"\n",
    );
    let first = assert_completed(&agentfile(&dir, &[], &[]));
    let second = assert_completed(&agentfile(&dir, &[], &[]));
    let folder = dir.join("ws/.agentfile/telemetry");
    let mut files: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut expected: Vec<String> = [&first, &second]
        .iter()
        .map(|r| format!("{}.jsonl", r["session_id"].as_str().unwrap()))
        .collect();
    expected.sort();
    assert_eq!(files, expected);

    let session = first["session_id"].as_str().unwrap();
    let text = std::fs::read_to_string(folder.join(format!("{session}.jsonl"))).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), agentfile_events(&dir, session));
    for l in &lines {
        for key in [
            "schema_version",
            "agent_id",
            "session_id",
            "workflow_name",
            "timestamp",
            "type",
            "data",
        ] {
            assert!(l.get(key).is_some(), "{key} missing in {l}");
        }
        assert_eq!(l["session_id"], session);
        let _: TelemetryMessage = serde_json::from_value(l.clone()).unwrap();
    }
    let find = |event: &str, agent: Option<&str>| {
        lines
            .iter()
            .find(|l| l["data"]["event"] == event && l["data"]["agent"].as_str() == agent)
            .unwrap_or_else(|| panic!("no {event} of {agent:?}"))
    };
    // The goal put to the agents, an agent's answer with its tool call, the
    // tool's result, and a loop's message with its iteration.
    let user = find("goal_started", None);
    assert_eq!(
        (&user["type"], &user["data"]["role"]),
        (&json!("message"), &json!("user"))
    );
    assert_eq!(user["data"]["content"], "Survey the workspace");
    let alpha = find("llm_response", Some("alpha"));
    assert_eq!(alpha["data"]["tool_calls"][0]["name"], "ls");
    assert_eq!(alpha["data"]["tokens"], json!({"input": 100, "output": 10}));
    assert_eq!(alpha["data"]["model"], "gpt-4o");
    assert!(alpha["data"]["latency"].is_u64());
    let tool = find("tool_result", Some("alpha"));
    assert_eq!(tool["data"]["role"], "tool");
    assert!(
        tool["data"]["content"]
            .as_str()
            .unwrap()
            .contains("notes.txt")
    );
    let polish = lines
        .iter()
        .find(|l| l["data"]["event"] == "llm_response" && l["data"]["goal"] == "polish")
        .unwrap();
    assert_eq!(polish["data"]["iteration"], 1);
    assert_eq!(polish["data"]["content"], "Polished.");
    let last = lines.last().unwrap();
    assert_eq!(
        (&last["type"], &last["data"]["event"]),
        (&json!("log"), &json!("run_complete"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn trace_logs_never_show_the_key_or_the_token() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FakeServer::start(team_model())).unwrap();
    let collector = rt.block_on(Collector::start(vec![503], None));
    let dir = tmp("secrets");
    setup(
        &dir,
        TEAM,
        &server,
        &format!(
            "{}\n[telemetry.headers_env]\nAuthorization = \"{TOKEN_VAR}\"\n",
            http_config(&collector)
        ),
    );
    let o = agentfile(&dir, &["--log-level", "trace"], &[]);
    assert_completed(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("TRACE") || stderr.contains("DEBUG"),
        "logging was on:\n{stderr}"
    );
    assert!(stderr.contains("telemetry started"), "{stderr}");
    assert!(!stderr.contains(KEY), "the API key leaked to stderr");
    assert!(
        !stderr.contains(TOKEN),
        "the telemetry token leaked to stderr"
    );
    assert!(
        !stderr.contains('\u{1b}'),
        "no ANSI codes when stderr is not a terminal"
    );
    // The token did reach the collector, as a header.
    assert!(
        collector
            .received()
            .iter()
            .all(|r| r.headers.get("authorization").map(String::as_str) == Some(TOKEN))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn json_log_lines_and_a_quiet_default() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FakeServer::start(team_model())).unwrap();
    let dir = tmp("json-logs");
    setup(&dir, TEAM, &server, "enabled = true\nprotocol = \"file\"\n");
    let o = agentfile(&dir, &["--log-format", "json", "--log-level", "info"], &[]);
    assert_completed(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let logs: Vec<Value> = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let started = logs
        .iter()
        .find(|l| l["message"] == "telemetry started")
        .unwrap_or_else(|| panic!("{stderr}"));
    assert_eq!(started["level"], "INFO");
    assert!(started["exporter"].as_str().unwrap().starts_with("file → "));

    // Without flags the level is warn: a clean run logs nothing.
    let quiet = agentfile(&dir, &[], &[]);
    assert_completed(&quiet);
    let stderr = String::from_utf8_lossy(&quiet.stderr);
    assert!(
        !stderr.contains("INFO") && !stderr.contains("telemetry started"),
        "{stderr}"
    );
    // RUST_LOG works when --log-level is absent.
    let env = agentfile(&dir, &[], &[("RUST_LOG", "agentfile=info")]);
    assert!(String::from_utf8_lossy(&env.stderr).contains("telemetry started"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_telemetry_config_fails_before_the_run() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FakeServer::start(vec![])).unwrap();
    let dir = tmp("bad-config");
    setup(&dir, TEAM, &server, "enabled = true\nprotocol = \"http\"\n");
    let o = agentfile(&dir, &[], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("telemetry.endpoint"));
    assert_eq!(server.request_count(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn otlp_honours_the_standard_variables() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FakeServer::start(team_model())).unwrap();
    let collector = rt.block_on(Collector::start(vec![], None));
    let dir = tmp("otel-env");
    // No endpoint in the config: OTEL_EXPORTER_OTLP_ENDPOINT decides.
    setup(&dir, TEAM, &server, "enabled = true\n");
    let url = collector.url();
    let o = agentfile(
        &dir,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()),
            ("OTEL_SERVICE_NAME", "nightly-reviews"),
        ],
    );
    assert_completed(&o);
    let traces = collector.decoded::<ExportTraceServiceRequest>("/v1/traces");
    assert!(!traces.is_empty());
    let resource = traces[0].resource_spans[0].resource.as_ref().unwrap();
    assert_eq!(
        string(&resource.attributes, "service.name"),
        Some("nightly-reviews")
    );
    assert!(collector.spans().len() >= 13);

    // OTEL_SDK_DISABLED turns the exporter off.
    let before = collector.received().len();
    let o = agentfile(
        &dir,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()),
            ("OTEL_SDK_DISABLED", "true"),
        ],
    );
    assert_completed(&o);
    assert_eq!(collector.received().len(), before);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An exporter that gives up on a batch while the run goes on is an `error`
/// event of the run (once), not only a log line at its end.
#[test]
fn an_exporter_that_gives_up_mid_run_is_an_error_event() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut script: Vec<FakeReply> = (0..6)
        .map(|_| {
            FakeReply::tool_call("ls", json!({"path": "."}))
                .with_latency(Duration::from_millis(1200))
        })
        .collect();
    script.push(FakeReply::text("done"));
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/ingest?token=s3cret", free.local_addr().unwrap());
    drop(free);
    let dir = tmp("http-gives-up");
    setup(
        &dir,
        "NAME long\nGOAL look \"Look around\"\nRUN main USING look\n",
        &server,
        &format!("enabled = true\nprotocol = \"http\"\nendpoint = \"{url}\"\n"),
    );
    let o = agentfile(&dir, &[], &[]);
    assert_completed(&o);
    // The run itself heard of it: an `error` event in its log.
    let r = result_of(&o);
    let id = r["session_id"].as_str().unwrap();
    let store = agentfile::session::sqlite::SqliteStore::open(
        &dir.join("ws").join(".agentfile").join("sessions.db"),
    )
    .unwrap();
    let errors: Vec<String> = agentfile::session::SessionStore::events(&store, id, 0)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.body {
            agentfile::wire::events::EventBody::Error { message } => Some(message),
            _ => None,
        })
        .collect();
    assert!(
        errors
            .iter()
            .any(|m| m.contains("telemetry") && m.contains("gave up")),
        "{errors:?}"
    );
    assert!(errors.iter().all(|m| !m.contains("s3cret")), "{errors:?}");
    assert_eq!(
        errors.iter().filter(|m| m.contains("telemetry")).count(),
        1,
        "{errors:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
