//! Shared pieces of the provider tests: the same scenarios, run once per wire
//! format against the loopback fake server (`agentfile_llm::fake`).
//!
//! Each module of this binary (`anthropic`, `gemini`, `openai`) calls the
//! scenarios below with its [`Wire`];
//! the scenarios say what every provider must do, the per-wire helpers say how
//! that looks in each format. Timing assertions only ever check lower bounds the
//! code controls (a `Retry-After` wait) or generous upper bounds ("well under the
//! scripted latency"), so a loaded machine cannot make them flaky.
//!
//! The end-to-end suite includes this file too (`tests/e2e/support`), for the
//! `fake-provider` binary's tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentfile_config::LlmConfig;
use agentfile_llm::fake::{FakeReply, FakeServer, RecordedRequest};
use agentfile_llm::{
    CancellationToken, ChatRequest, ContentBlock, HttpOptions, LlmError, Message, Provider,
    ProviderOptions, RetryPolicy, Role, StopReason, StreamEvent, TimeoutPhase, ToolCall, ToolDef,
    ToolResult, collect_stream, provider_from_config_with,
};
use futures::StreamExt;
use serde_json::{Value, json};

/// The checkout's root, where the shared `fixtures/` live, whichever
/// package's tests include this file.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("Cargo.lock").is_file())
        .expect("the checkout's root")
        .to_path_buf()
}

/// The fake API key every test uses. Long enough to be redacted.
pub const KEY: &str = "test-key-0123456789";

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wire {
    Anthropic,
    OpenAi,
    Gemini,
}

impl Wire {
    pub fn provider(self) -> &'static str {
        match self {
            Wire::Anthropic => "anthropic",
            Wire::OpenAi => "openai",
            Wire::Gemini => "gemini",
        }
    }

    /// A model the built-in price table knows.
    pub fn model(self) -> &'static str {
        match self {
            Wire::Anthropic => "claude-sonnet-4-5",
            Wire::OpenAi => "gpt-4o",
            Wire::Gemini => "gemini-2.5-flash",
        }
    }

    /// (USD per million input tokens, per million output tokens) of [`Wire::model`].
    pub fn price(self) -> (f64, f64) {
        match self {
            Wire::Anthropic => (3.0, 15.0),
            Wire::OpenAi => (2.5, 10.0),
            Wire::Gemini => (0.3, 2.5),
        }
    }

    pub fn key_var(self) -> &'static str {
        match self {
            Wire::Anthropic => "ANTHROPIC_API_KEY",
            Wire::OpenAi => "OPENAI_API_KEY",
            Wire::Gemini => "GEMINI_API_KEY",
        }
    }

    /// The natural raw stop reasons: (plain answer, tool calls).
    pub fn raw_stops(self) -> (&'static str, &'static str) {
        match self {
            Wire::Anthropic => ("end_turn", "tool_use"),
            Wire::OpenAi => ("stop", "tool_calls"),
            Wire::Gemini => ("STOP", "STOP"),
        }
    }

    /// The path a (non-)streaming call goes to.
    pub fn path(self, stream: bool) -> String {
        match (self, stream) {
            (Wire::Anthropic, _) => "/v1/messages".into(),
            (Wire::OpenAi, _) => "/v1/chat/completions".into(),
            (Wire::Gemini, false) => format!("/v1beta/models/{}:generateContent", self.model()),
            (Wire::Gemini, true) => {
                format!("/v1beta/models/{}:streamGenerateContent", self.model())
            }
        }
    }

    /// The key arrived where the provider expects it.
    pub fn assert_authenticated(self, r: &RecordedRequest) {
        match self {
            Wire::Anthropic => {
                assert_eq!(r.header("x-api-key"), Some(KEY));
                assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
            }
            Wire::OpenAi => {
                assert_eq!(
                    r.header("authorization"),
                    Some(format!("Bearer {KEY}").as_str())
                )
            }
            Wire::Gemini => {
                assert_eq!(r.header("x-goog-api-key"), Some(KEY));
                assert!(!r.query.clone().unwrap_or_default().contains(KEY));
            }
        }
    }

    /// Whether the request body asked to stream.
    pub fn asked_to_stream(self, r: &RecordedRequest) -> bool {
        match self {
            Wire::Gemini => {
                r.path.ends_with(":streamGenerateContent") && r.query.as_deref() == Some("alt=sse")
            }
            _ => r.body["stream"] == json!(true),
        }
    }

    /// The event count after which a cut stream has already delivered some text.
    pub fn cut_point(self) -> usize {
        match self {
            // message_start, ping, content_block_start, first text_delta
            Wire::Anthropic => 4,
            // role chunk, two content chunks
            Wire::OpenAi => 3,
            // two text chunks
            Wire::Gemini => 2,
        }
    }

    /// What the tool results of the last turn of `body` refer to: call ids for
    /// Anthropic and OpenAI, function names for Gemini (which matches by name).
    pub fn result_refs(self, body: &Value) -> Vec<String> {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        match self {
            Wire::Anthropic => body["messages"].as_array().unwrap().last().unwrap()["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| s(&b["tool_use_id"]))
                .collect(),
            Wire::OpenAi => body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| s(&m["tool_call_id"]))
                .collect(),
            Wire::Gemini => body["contents"].as_array().unwrap().last().unwrap()["parts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| s(&p["functionResponse"]["name"]))
                .collect(),
        }
    }
}

/// Short timeouts and near-instant backoff, so fault tests run fast.
pub fn fast() -> HttpOptions {
    HttpOptions {
        connect_timeout: Duration::from_secs(2),
        first_byte_timeout: Duration::from_secs(20),
        idle_timeout: Duration::from_secs(20),
        call_timeout: Duration::from_secs(60),
        retry: RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(40),
            max_retry_after: Duration::from_secs(5),
        },
    }
}

/// A provider for `wire` pointed at `base_url`, built the way the runtime builds
/// it: through the factory, with the key in the environment.
pub fn provider_at(wire: Wire, base_url: &str, http: HttpOptions) -> Arc<dyn Provider> {
    let llm = LlmConfig {
        provider: Some(wire.provider().to_owned()),
        model: Some(wire.model().to_owned()),
        base_url: Some(base_url.to_owned()),
        ..Default::default()
    };
    let env = move |k: &str| (k == wire.key_var()).then(|| KEY.to_owned());
    let options = ProviderOptions {
        http,
        ..Default::default()
    };
    provider_from_config_with(&llm, &BTreeMap::new(), &env, &options).unwrap()
}

pub fn provider(wire: Wire, server: &FakeServer) -> Arc<dyn Provider> {
    provider_at(wire, &server.base_url(), fast())
}

pub fn ask(text: &str) -> ChatRequest {
    ChatRequest::new("You are terse.", text)
}

pub fn tools() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "read".into(),
            description: "Read a file in the workspace.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        },
        ToolDef {
            name: "write".into(),
            description: "Write a file in the workspace.".into(),
            parameters: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "title": "WriteArgs",
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "path": {"type": "string", "description": "Relative to the workspace.", "examples": ["notes.md"]},
                    "content": {"type": "string"},
                    "mode": {"$ref": "#/$defs/Mode", "default": "create"}
                },
                "required": ["path", "content"],
                "$defs": {"Mode": {"type": "string", "enum": ["create", "append"]}}
            }),
        },
    ]
}

/// The fixed conversation whose request body is snapshot-tested per provider: a
/// system prompt, a user turn, an assistant turn with two tool calls, the two
/// results (one failed), and two tool definitions.
pub fn snapshot_request() -> ChatRequest {
    ChatRequest {
        model: None,
        system: Some("You are a careful file editor.".into()),
        messages: vec![
            Message::user("Read a.txt, then write its summary to notes.md."),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::Text {
                        text: "I'll read the file and check the notes.".into(),
                    },
                    ContentBlock::ToolCall(ToolCall {
                        id: "call_1".into(),
                        name: "read".into(),
                        arguments: json!({"path": "a.txt"}),
                        signature: Some("c2lnbmF0dXJlLTE=".into()),
                    }),
                    ContentBlock::ToolCall(ToolCall {
                        id: "call_2".into(),
                        name: "read".into(),
                        arguments: json!({"path": "notes.md"}),
                        signature: None,
                    }),
                ],
            },
            Message::tool_results([
                ToolResult {
                    call_id: "call_1".into(),
                    name: "read".into(),
                    content: "Rust is a systems language.".into(),
                    is_error: false,
                },
                ToolResult {
                    call_id: "call_2".into(),
                    name: "read".into(),
                    content: "notes.md: no such file".into(),
                    is_error: true,
                },
            ]),
        ],
        tools: tools(),
        max_tokens: Some(1024),
        temperature: Some(0.2),
    }
}

/// Everything a stream produced, split up.
#[derive(Debug, Default)]
pub struct Collected {
    pub events: Vec<StreamEvent>,
    pub error: Option<LlmError>,
}

impl Collected {
    pub fn done(&self) -> &agentfile_llm::ChatResponse {
        match self.events.last() {
            Some(StreamEvent::Done(r)) => r,
            other => panic!(
                "no final answer; last event {other:?}, error {:?}",
                self.error
            ),
        }
    }

    /// Text deltas since the last restart.
    pub fn text_after_restart(&self) -> String {
        let start = self
            .events
            .iter()
            .rposition(|e| matches!(e, StreamEvent::Restart { .. }))
            .map_or(0, |i| i + 1);
        self.events[start..]
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    pub fn restarts(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, StreamEvent::Restart { .. }))
            .count()
    }

    /// The argument fragments of tool call `index`.
    pub fn fragments(&self, index: usize) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolCallDelta { index: i, fragment } if *i == index => {
                    Some(fragment.clone())
                }
                _ => None,
            })
            .collect()
    }
}

pub async fn stream_all(p: &dyn Provider, request: ChatRequest) -> Collected {
    let mut s = p.stream(request, CancellationToken::new());
    let mut c = Collected::default();
    while let Some(item) = s.next().await {
        match item {
            Ok(e) => c.events.push(e),
            Err(e) => {
                c.error = Some(e);
                break;
            }
        }
    }
    c
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

// ---- the scenarios ---------------------------------------------------------

pub async fn plain_answer(wire: Wire) {
    let server = FakeServer::start(vec![
        FakeReply::text("Hello from the fake.").with_usage(1200, 70),
    ])
    .await
    .unwrap();
    let p = provider(wire, &server);
    let r = p
        .chat(ask("Say hello."), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(r.text(), "Hello from the fake.");
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!(r.raw_stop_reason.as_deref(), Some(wire.raw_stops().0));
    assert_eq!(r.model, wire.model());
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (1200, 70));
    assert_eq!(r.attempts, 1);
    assert!(r.latency > Duration::ZERO);
    let (pi, po) = wire.price();
    assert!(
        close(r.cost_usd.unwrap(), (1200.0 * pi + 70.0 * po) / 1e6),
        "{:?}",
        r.cost_usd
    );

    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, wire.path(false));
    assert!(!wire.asked_to_stream(&reqs[0]));
    wire.assert_authenticated(&reqs[0]);
}

pub async fn plain_answer_streaming(wire: Wire) {
    let server = FakeServer::start(vec![FakeReply::text("Streaming hello, wörld.")])
        .await
        .unwrap();
    let p = provider(wire, &server);
    let c = stream_all(p.as_ref(), ask("Say hello.")).await;
    assert!(c.error.is_none(), "{:?}", c.error);
    let deltas = c
        .events
        .iter()
        .filter(|e| matches!(e, StreamEvent::TextDelta(_)))
        .count();
    assert!(deltas >= 2, "text should arrive in pieces: {:?}", c.events);
    assert_eq!(c.text_after_restart(), "Streaming hello, wörld.");
    assert_eq!(c.done().text(), "Streaming hello, wörld.");
    assert_eq!(c.done().stop_reason, StopReason::EndTurn);
    let reqs = server.requests();
    assert_eq!(reqs[0].path, wire.path(true));
    assert!(wire.asked_to_stream(&reqs[0]));
    wire.assert_authenticated(&reqs[0]);
}

pub async fn parallel_tool_calls_round_trip(wire: Wire) {
    let server = FakeServer::start(vec![
        FakeReply::tool_calls([
            ("read", json!({"path": "a.txt"})),
            (
                "write",
                json!({"path": "b.txt", "content": "x\ny \"quoted\""}),
            ),
        ]),
        FakeReply::text("done"),
    ])
    .await
    .unwrap();
    let p = provider(wire, &server);
    let mut request = ask("Copy a.txt to b.txt.");
    request.tools = tools();
    let r = p
        .chat(request.clone(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(r.raw_stop_reason.as_deref(), Some(wire.raw_stops().1));
    let calls = r.tool_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].name.as_str(), calls[1].name.as_str()),
        ("read", "write")
    );
    assert_eq!(calls[0].arguments, json!({"path": "a.txt"}));
    assert_eq!(
        calls[1].arguments,
        json!({"path": "b.txt", "content": "x\ny \"quoted\""})
    );
    assert_ne!(calls[0].id, calls[1].id);
    assert!(!calls[0].id.is_empty());

    // Send both results back in one turn; each must reach the model tied to its call.
    let results: Vec<ToolResult> = calls
        .iter()
        .map(|c| ToolResult {
            call_id: c.id.clone(),
            name: c.name.clone(),
            content: format!("ran {}", c.name),
            is_error: false,
        })
        .collect();
    request.messages.push(r.to_message());
    request.messages.push(Message::tool_results(results));
    let r2 = p.chat(request, CancellationToken::new()).await.unwrap();
    assert_eq!(r2.text(), "done");

    let sent = &server.requests()[1].body;
    let expected: Vec<String> = match wire {
        Wire::Gemini => calls.iter().map(|c| c.name.clone()).collect(),
        _ => calls.iter().map(|c| c.id.clone()).collect(),
    };
    assert_eq!(wire.result_refs(sent), expected);
}

pub async fn streamed_tool_call_arguments(wire: Wire) {
    let args0 =
        json!({"path": "src/main.rs", "content": "fn main() {\n    println!(\"hi\");\n}\n"});
    let args1 = json!({"path": "README.md"});
    let server = FakeServer::start(vec![FakeReply::tool_calls([
        ("write", args0.clone()),
        ("read", args1.clone()),
    ])])
    .await
    .unwrap();
    let p = provider(wire, &server);
    let mut request = ask("Write main.rs, then read the README.");
    request.tools = tools();
    let c = stream_all(p.as_ref(), request).await;
    assert!(c.error.is_none(), "{:?}", c.error);

    let starts: Vec<(usize, String)> = c
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolCallStart { index, name, .. } => Some((*index, name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        vec![(0, "write".to_owned()), (1, "read".to_owned())]
    );
    for (i, args) in [(0, &args0), (1, &args1)] {
        let fragments = c.fragments(i);
        let joined: String = fragments.concat();
        assert_eq!(&serde_json::from_str::<Value>(&joined).unwrap(), args);
        if wire == Wire::Gemini {
            // Gemini sends each call whole (see gemini.rs).
            assert_eq!(fragments.len(), 1);
        } else {
            assert!(
                fragments.len() >= 2,
                "arguments should arrive split: {fragments:?}"
            );
        }
    }
    let done = c.done();
    assert_eq!(done.stop_reason, StopReason::ToolUse);
    let calls = done.tool_calls();
    assert_eq!(calls[0].arguments, args0);
    assert_eq!(calls[1].arguments, args1);
}

pub async fn usage_is_reported_when_streaming(wire: Wire) {
    let server = FakeServer::start(vec![FakeReply::text("counted").with_usage(1000, 250)])
        .await
        .unwrap();
    let p = provider(wire, &server);
    let c = stream_all(p.as_ref(), ask("Count.")).await;
    let r = c.done();
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (1000, 250));
    let (pi, po) = wire.price();
    assert!(close(r.cost_usd.unwrap(), (1000.0 * pi + 250.0 * po) / 1e6));
    assert_eq!(r.model, wire.model());
    if wire == Wire::OpenAi {
        assert_eq!(
            server.requests()[0].body["stream_options"],
            json!({"include_usage": true})
        );
    }
}

pub async fn rate_limit_honours_retry_after(wire: Wire) {
    let server = FakeServer::start(vec![
        FakeReply::error(429, "slow down").with_retry_after("1"),
        FakeReply::text("after the wait"),
    ])
    .await
    .unwrap();
    let p = provider(wire, &server);
    let started = Instant::now();
    let r = p.chat(ask("Hi."), CancellationToken::new()).await.unwrap();
    assert_eq!(r.text(), "after the wait");
    assert_eq!(server.request_count(), 2);
    assert_eq!(r.attempts, 2);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    // Latency covers the whole call, the wait included.
    assert!(r.latency >= Duration::from_secs(1));
}

pub async fn server_error_then_success(wire: Wire) {
    let server = FakeServer::start(vec![
        FakeReply::error(500, "boom"),
        FakeReply::text("recovered"),
    ])
    .await
    .unwrap();
    let p = provider(wire, &server);
    let r = p.chat(ask("Hi."), CancellationToken::new()).await.unwrap();
    assert_eq!(r.text(), "recovered");
    assert_eq!(r.attempts, 2);
    assert_eq!(server.request_count(), 2);
}

pub async fn cut_stream_is_retried_as_a_whole_call(wire: Wire) {
    let text = "one two three four five six";
    let server = FakeServer::start(vec![
        FakeReply::text(text)
            .cut_after(wire.cut_point())
            .with_chunk_delay(Duration::from_millis(20)),
        FakeReply::text(text),
    ])
    .await
    .unwrap();
    let p = provider(wire, &server);
    let c = stream_all(p.as_ref(), ask("Count.")).await;
    assert!(c.error.is_none(), "{:?}", c.error);
    assert_eq!(server.request_count(), 2);
    assert_eq!(c.restarts(), 1, "{:?}", c.events);
    assert_eq!(c.text_after_restart(), text);
    assert_eq!(c.done().text(), text);
    assert_eq!(c.done().attempts, 2);

    // Non-streaming: a body cut half-way is retried too.
    let server = FakeServer::start(vec![
        FakeReply::text(text).cut_after(0),
        FakeReply::text(text),
    ])
    .await
    .unwrap();
    let p = provider(wire, &server);
    let r = p
        .chat(ask("Count."), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(r.text(), text);
    assert_eq!(server.request_count(), 2);
}

pub async fn bad_request_fails_at_once_with_the_provider_message(wire: Wire) {
    let message = "max_tokens: 999999 > 64000, which is the maximum allowed";
    let server = FakeServer::start(vec![
        FakeReply::error(400, message),
        FakeReply::text("never"),
    ])
    .await
    .unwrap();
    let p = provider(wire, &server);
    let e = p
        .chat(ask("Hi."), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(e, LlmError::Http { status: 400, .. }), "{e:?}");
    let shown = e.to_string();
    assert!(shown.contains(message), "{shown}");
    assert!(shown.starts_with(wire.provider()), "{shown}");
    assert_eq!(server.request_count(), 1);
}

pub async fn key_never_appears_in_errors(wire: Wire) {
    let server = FakeServer::start(vec![FakeReply::error(
        401,
        format!("invalid x-api-key {KEY}"),
    )])
    .await
    .unwrap();
    let p = provider(wire, &server);
    let e = p
        .chat(ask("Hi."), CancellationToken::new())
        .await
        .unwrap_err();
    let shown = format!("{e} {e:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("[redacted]"), "{shown}");
}

pub async fn connect_error_is_retried_then_clear(wire: Wire) {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = provider_at(wire, &format!("http://127.0.0.1:{port}"), fast());
    let e = p
        .chat(ask("Hi."), CancellationToken::new())
        .await
        .unwrap_err();
    let LlmError::RetriesExhausted { attempts, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(*attempts, 3);
    assert!(matches!(e.root(), LlmError::Connect { .. }), "{e:?}");
    let shown = e.to_string();
    assert!(
        shown.contains(wire.provider()) && shown.contains("cannot reach"),
        "{shown}"
    );
    assert!(shown.contains(&port.to_string()), "{shown}");
}

pub async fn first_byte_timeout(wire: Wire) {
    let server = FakeServer::start(vec![
        FakeReply::text("too late").with_latency(Duration::from_secs(30)),
        FakeReply::text("too late").with_latency(Duration::from_secs(30)),
    ])
    .await
    .unwrap();
    let mut http = fast();
    http.first_byte_timeout = Duration::from_millis(300);
    http.retry.max_attempts = 2;
    let p = provider_at(wire, &server.base_url(), http);
    let started = Instant::now();
    let e = p
        .chat(ask("Hi."), CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        matches!(
            e.root(),
            LlmError::Timeout {
                phase: TimeoutPhase::FirstByte,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        matches!(e, LlmError::RetriesExhausted { attempts: 2, .. }),
        "{e:?}"
    );
    assert_eq!(server.request_count(), 2);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

pub async fn idle_stream_timeout(wire: Wire) {
    let server = FakeServer::start(vec![FakeReply::text("one two three").stall_after(1)])
        .await
        .unwrap();
    let mut http = fast();
    http.idle_timeout = Duration::from_millis(300);
    http.retry = RetryPolicy::none();
    let p = provider_at(wire, &server.base_url(), http);
    let c = stream_all(p.as_ref(), ask("Hi.")).await;
    let e = c.error.expect("the stall must end in an error");
    assert!(
        matches!(
            e,
            LlmError::Timeout {
                phase: TimeoutPhase::Idle,
                ..
            }
        ),
        "{e:?}"
    );
}

/// A provider that trickles (each chunk inside the idle timeout) cannot hold a
/// call forever: the per-call deadline ends it.
pub async fn trickle_hits_the_call_deadline(wire: Wire) {
    let server = FakeServer::start(vec![
        FakeReply::text("a b c d e f g h i j k l m n o p q r s t u v w x y z")
            .with_chunk_delay(Duration::from_millis(300)),
    ])
    .await
    .unwrap();
    let mut http = fast();
    http.idle_timeout = Duration::from_secs(5);
    http.call_timeout = Duration::from_millis(500);
    http.retry = RetryPolicy::none();
    let p = provider_at(wire, &server.base_url(), http);
    let started = Instant::now();
    let c = stream_all(p.as_ref(), ask("Hi.")).await;
    let e = c.error.expect("the trickle must end in an error");
    assert!(
        matches!(
            e,
            LlmError::Timeout {
                phase: TimeoutPhase::Total,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

/// Every retry is announced on the stream before its wait, so callers can say
/// why nothing is happening.
pub async fn retries_are_announced(wire: Wire) {
    let server = FakeServer::start(vec![
        FakeReply::error(429, "slow down"),
        FakeReply::text("after the wait"),
    ])
    .await
    .unwrap();
    let p = provider(wire, &server);
    let c = stream_all(p.as_ref(), ask("Hi.")).await;
    assert!(c.error.is_none(), "{:?}", c.error);
    let retries: Vec<_> = c
        .events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retry {
                attempt,
                max_attempts,
                reason,
                ..
            } => Some((*attempt, *max_attempts, reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(retries.len(), 1, "{:?}", c.events);
    assert_eq!(retries[0].0, 2);
    assert_eq!(retries[0].1, 3);
    assert!(retries[0].2.contains("429"), "{}", retries[0].2);
}

pub async fn cancellation_stops_the_request(wire: Wire) {
    let server = FakeServer::start(vec![
        FakeReply::text("slow").with_latency(Duration::from_secs(30)),
    ])
    .await
    .unwrap();
    let p = provider(wire, &server);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let e = p.chat(ask("Hi."), cancel).await.unwrap_err();
    canceller.await.unwrap();
    assert!(matches!(e, LlmError::Cancelled), "{e:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.request_count(), 1, "the request was in flight");
}

pub async fn cancellation_mid_stream(wire: Wire) {
    // The server goes silent after the first text, for longer than any test runs.
    let server = FakeServer::start(vec![
        FakeReply::text("a b c d e f g h i").stall_after(wire.cut_point()),
    ])
    .await
    .unwrap();
    let p = provider(wire, &server);
    let cancel = CancellationToken::new();
    let mut s = p.stream(ask("Hi."), cancel.clone());
    let started = Instant::now();
    // Wait for the first delta, then cancel while the stream is silent.
    loop {
        match s.next().await {
            Some(Ok(StreamEvent::TextDelta(_))) => break,
            Some(Ok(_)) => {}
            other => panic!("expected a delta, got {other:?}"),
        }
    }
    cancel.cancel();
    let next = s.next().await;
    assert!(matches!(next, Some(Err(LlmError::Cancelled))), "{next:?}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

pub async fn garbage_is_a_clear_error(wire: Wire) {
    let server = FakeServer::start(vec![
        FakeReply::raw(200, "application/json", "<html>gateway</html>"),
        FakeReply::raw(200, "application/json", r#"{"unexpected": true}"#),
        FakeReply::raw(200, "text/event-stream", "data: {not json\n\n"),
    ])
    .await
    .unwrap();
    let p = provider(wire, &server);
    for _ in 0..2 {
        let e = p
            .chat(ask("Hi."), CancellationToken::new())
            .await
            .unwrap_err();
        assert!(matches!(e, LlmError::Protocol { .. }), "{e:?}");
        assert!(e.to_string().starts_with(wire.provider()), "{e}");
    }
    let e = collect_stream(p.stream(ask("Hi."), CancellationToken::new()))
        .await
        .unwrap_err();
    assert!(matches!(e, LlmError::Protocol { .. }), "{e:?}");
    assert!(e.to_string().contains("not JSON"), "{e}");
    assert_eq!(server.request_count(), 3, "garbage is not retried");
}

/// The exact body sent for [`snapshot_request`] equals the fixture; with
/// `UPDATE_SNAPSHOTS=1` the fixture is rewritten instead.
pub async fn request_body_matches_snapshot(wire: Wire) {
    let server = FakeServer::start(vec![FakeReply::text("ok")])
        .await
        .unwrap();
    let p = provider(wire, &server);
    p.chat(snapshot_request(), CancellationToken::new())
        .await
        .unwrap();
    let body = server.requests()[0].body.clone();
    let path = repo()
        .join("fixtures/llm/requests")
        .join(format!("{}.json", wire.provider()));
    let pretty = serde_json::to_string_pretty(&body).unwrap() + "\n";
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &pretty).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_SNAPSHOTS=1 to create it",
            path.display()
        )
    });
    let expected: Value = serde_json::from_str(&expected).unwrap();
    assert!(
        expected == body,
        "{} differs from the body sent (UPDATE_SNAPSHOTS=1 rewrites it):\n{pretty}",
        path.display()
    );
}

/// Declares one `#[tokio::test]` per named scenario above, for one wire format.
#[macro_export]
macro_rules! scenarios {
    ($wire:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                $crate::support::$name($wire).await
            }
        )*
    };
}
