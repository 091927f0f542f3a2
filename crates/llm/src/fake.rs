//! A fake LLM server on loopback that speaks the three real wire formats, so the
//! providers — and everything above them — can be tested offline.
//!
//! It answers each request with the next reply of a script, rendered in the
//! format of the endpoint that was hit:
//!
//! - `…/messages` — Anthropic Messages;
//! - `…/chat/completions` — OpenAI Chat Completions;
//! - `…/models/{model}:generateContent` and `…:streamGenerateContent?alt=sse` — Gemini.
//!
//! It streams when the request asks (`"stream": true`, or Gemini's stream
//! endpoint), splitting text and tool-call arguments across several events and
//! each event across two body chunks, the way real servers do. A reply can also be
//! a fault: an HTTP error (with `Retry-After`), a cut or stalled stream, a delay
//! before the first byte, or raw bytes of your choosing. Every request is kept
//! (method, path, headers, JSON body) for tests to inspect.
//!
//! What it is not: a model. It does not look at the conversation; the script
//! decides everything. Scripts are JSON, so a workflow test can say "call `write`
//! with these arguments, then answer `done`":
//!
//! ```json
//! [
//!   {"tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "hi"}}]},
//!   {"text": "done"}
//! ]
//! ```
//!
//! When the script runs out, requests get an HTTP 400 saying so (400, not 5xx, so
//! the client fails at once instead of retrying). `{"replies": […], "repeat": true}`
//! repeats the last reply forever instead (for benchmarks).
//!
//! Lifetime: the server and every connection task stop when the [`FakeServer`] is
//! dropped or [`FakeServer::shutdown`] is called.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// One scripted answer. Fields combine: `text` and `tool_calls` make the content;
/// `error` or `raw` replace it; `latency_ms`, `cut_after`, `stall_after` and
/// `chunk_delay_ms` shape how it is delivered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FakeReply {
    /// Answer text.
    pub text: Option<String>,
    /// Tool calls, all in this one turn (parallel calls when more than one).
    pub tool_calls: Vec<FakeToolCall>,
    /// Token counts to report; by default estimated from the sizes involved.
    pub usage: Option<FakeUsage>,
    /// The raw stop reason to report instead of the natural one for the format.
    pub stop: Option<String>,
    /// The model name to report instead of the requested one.
    pub model: Option<String>,
    /// Wait this long before sending the response headers.
    pub latency_ms: u64,
    /// Wait this long between streamed events.
    pub chunk_delay_ms: u64,
    /// Answer with this HTTP error instead.
    pub error: Option<FakeError>,
    /// Close the connection after this many events (streaming) or half the body.
    pub cut_after: Option<usize>,
    /// Stop sending after this many events but keep the connection open.
    pub stall_after: Option<usize>,
    /// Send exactly this instead of a rendered answer (for garbage tests).
    pub raw: Option<FakeRaw>,
    /// Makes this reply a *rule*: it answers any request whose JSON body
    /// contains every one of these strings (and none of `unless`), and is not
    /// used up. Rules are tried in script order before the plain replies, so a
    /// model can be scripted by what it is asked rather than by call order (a
    /// resumed run asks again what an interrupted one asked).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<String>,
    /// With `when`: strings the request body must not contain.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unless: Vec<String>,
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FakeToolCall {
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// The call id to report; by default one is made up (Gemini: none is sent).
    #[serde(default)]
    pub id: Option<String>,
}

fn empty_object() -> Value {
    json!({})
}

/// Scripted token counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FakeUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// A scripted HTTP error, rendered in the format's own error shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FakeError {
    pub status: u16,
    #[serde(default)]
    pub message: String,
    /// The `Retry-After` header value, verbatim.
    #[serde(default)]
    pub retry_after: Option<String>,
}

/// A scripted response sent byte for byte.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FakeRaw {
    #[serde(default = "ok_status")]
    pub status: u16,
    #[serde(default)]
    pub content_type: Option<String>,
    pub body: String,
}

fn ok_status() -> u16 {
    200
}

impl FakeReply {
    /// Answer with text.
    pub fn text(text: impl Into<String>) -> Self {
        FakeReply {
            text: Some(text.into()),
            ..Default::default()
        }
    }

    /// Call one tool.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Self::tool_calls([(name, arguments)])
    }

    /// Call several tools in one turn.
    pub fn tool_calls<N: Into<String>>(calls: impl IntoIterator<Item = (N, Value)>) -> Self {
        FakeReply {
            tool_calls: calls
                .into_iter()
                .map(|(name, arguments)| FakeToolCall {
                    name: name.into(),
                    arguments,
                    id: None,
                })
                .collect(),
            ..Default::default()
        }
    }

    /// Fail with an HTTP status and message.
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        FakeReply {
            error: Some(FakeError {
                status,
                message: message.into(),
                retry_after: None,
            }),
            ..Default::default()
        }
    }

    /// Send these bytes as they are.
    pub fn raw(status: u16, content_type: &str, body: impl Into<String>) -> Self {
        FakeReply {
            raw: Some(FakeRaw {
                status,
                content_type: Some(content_type.to_owned()),
                body: body.into(),
            }),
            ..Default::default()
        }
    }

    /// Add a `Retry-After` header to an error reply.
    pub fn with_retry_after(mut self, value: impl Into<String>) -> Self {
        if let Some(e) = &mut self.error {
            e.retry_after = Some(value.into());
        }
        self
    }

    /// Wait before answering.
    /// Turn this reply into a rule answering requests that contain all of `when`.
    pub fn when<S: Into<String>>(mut self, when: impl IntoIterator<Item = S>) -> Self {
        self.when = when.into_iter().map(Into::into).collect();
        self
    }

    /// With [`FakeReply::when`]: strings the request must not contain.
    pub fn unless<S: Into<String>>(mut self, unless: impl IntoIterator<Item = S>) -> Self {
        self.unless = unless.into_iter().map(Into::into).collect();
        self
    }

    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Wait between streamed events.
    pub fn with_chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Report these token counts.
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some(FakeUsage {
            input_tokens,
            output_tokens,
        });
        self
    }

    /// Report this raw stop reason.
    pub fn with_stop(mut self, stop: impl Into<String>) -> Self {
        self.stop = Some(stop.into());
        self
    }

    /// Close the connection after `events` events.
    pub fn cut_after(mut self, events: usize) -> Self {
        self.cut_after = Some(events);
        self
    }

    /// Go silent after `events` events.
    pub fn stall_after(mut self, events: usize) -> Self {
        self.stall_after = Some(events);
        self
    }
}

/// A whole script: replies in order, optionally repeating the last one forever.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FakeScript {
    pub replies: Vec<FakeReply>,
    pub repeat: bool,
}

/// The object form of a script: `{"replies": […], "repeat": bool}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FullScript {
    replies: Vec<FakeReply>,
    #[serde(default)]
    repeat: bool,
}

impl From<FullScript> for FakeScript {
    fn from(f: FullScript) -> FakeScript {
        FakeScript {
            replies: f.replies,
            repeat: f.repeat,
        }
    }
}

impl FakeScript {
    /// A script from its JSON text, with the error's line and column: a
    /// plain array of replies, or `{"replies": […], "repeat": bool}`.
    pub fn from_json(text: &str) -> Result<FakeScript, serde_json::Error> {
        // Parsed as the form its first character says, so an error points
        // into that form rather than saying "no variant matched".
        if text.trim_start().starts_with('{') {
            Ok(serde_json::from_str::<FullScript>(text)?.into())
        } else {
            Ok(FakeScript {
                replies: serde_json::from_str(text)?,
                repeat: false,
            })
        }
    }
}

impl<'de> Deserialize<'de> for FakeScript {
    /// Either a plain array of replies or `{"replies": […], "repeat": bool}`.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            List(Vec<FakeReply>),
            Full(FullScript),
        }
        Ok(match Form::deserialize(d)? {
            Form::List(replies) => FakeScript {
                replies,
                repeat: false,
            },
            Form::Full(f) => f.into(),
        })
    }
}

/// A request the fake server received.
#[derive(Debug, Clone, Serialize)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// Header names lowercased. Kept whole (keys included) so tests can check
    /// authentication; the server only ever holds fake keys.
    pub headers: BTreeMap<String, String>,
    /// The body as JSON (a string when it was not JSON).
    pub body: Value,
}

impl RecordedRequest {
    /// A header's value, by lowercase name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

struct Script {
    rules: Vec<FakeReply>,
    replies: VecDeque<FakeReply>,
    repeat: bool,
    last: Option<FakeReply>,
    total: usize,
}

struct Shared {
    script: Mutex<Script>,
    requests: Mutex<Vec<RecordedRequest>>,
}

impl Shared {
    fn next_reply(&self, body: &str) -> Option<FakeReply> {
        let mut s = self.script.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rule) = s.rules.iter().find(|r| {
            r.when.iter().all(|w| body.contains(w.as_str()))
                && !r.unless.iter().any(|u| body.contains(u.as_str()))
        }) {
            return Some(rule.clone());
        }
        match s.replies.pop_front() {
            Some(r) => {
                s.last = Some(r.clone());
                Some(r)
            }
            None if s.repeat => s.last.clone(),
            None => None,
        }
    }
}

/// A fake server on a thread of its own (with its own runtime), for a caller
/// that has no async runtime at hand: `--provider fake` builds its provider
/// synchronously. Dropping it stops the server; the thread then ends.
pub struct FakeThread {
    base_url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl FakeThread {
    /// Start `script` on a free loopback port.
    pub fn start(script: FakeScript) -> std::io::Result<FakeThread> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("fake-model".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    let at = SocketAddr::from(([127, 0, 0, 1], 0));
                    match FakeServer::start_script(script, at).await {
                        Ok(server) => {
                            let _ = ready_tx.send(Ok(server.base_url()));
                            // Until the provider is dropped (or the process ends).
                            let _ = stopped.await;
                            drop(server);
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                });
            })?;
        let base_url = ready_rx.recv().map_err(|_| {
            std::io::Error::other("the fake model's thread ended before it listened")
        })??;
        Ok(FakeThread {
            base_url,
            stop: Some(stop),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }
}

impl Drop for FakeThread {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A running fake server. Dropping it stops it.
pub struct FakeServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl FakeServer {
    /// Start on a free loopback port with these replies.
    pub async fn start(replies: Vec<FakeReply>) -> std::io::Result<FakeServer> {
        Self::start_script(
            FakeScript {
                replies,
                repeat: false,
            },
            SocketAddr::from(([127, 0, 0, 1], 0)),
        )
        .await
    }

    /// Start on `addr` (port 0 for any free one) with a whole script.
    pub async fn start_script(script: FakeScript, addr: SocketAddr) -> std::io::Result<FakeServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            script: Mutex::new(Script {
                total: script.replies.len(),
                rules: script
                    .replies
                    .iter()
                    .filter(|r| !r.when.is_empty())
                    .cloned()
                    .collect(),
                replies: script
                    .replies
                    .into_iter()
                    .filter(|r| r.when.is_empty())
                    .collect(),
                repeat: script.repeat,
                last: None,
            }),
            requests: Mutex::new(Vec::new()),
        });
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(accept_loop(listener, shared.clone(), shutdown.clone()));
        Ok(FakeServer {
            addr,
            shared,
            shutdown,
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:PORT`: the base URL for any of the three providers.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How many requests have been received.
    pub fn request_count(&self) -> usize {
        self.shared
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Append replies to the script.
    pub fn push(&self, replies: impl IntoIterator<Item = FakeReply>) {
        let mut s = self.shared.script.lock().unwrap_or_else(|p| p.into_inner());
        for r in replies {
            s.total += 1;
            s.replies.push_back(r);
        }
    }

    /// Stop accepting, end every connection, and wait for the server task.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, shutdown: CancellationToken) {
    loop {
        let stream = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors and the like: wait a little, keep serving.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let shared = shared.clone();
        let token = shutdown.clone();
        // Owned by `shutdown`: every connection ends when the server does.
        tokio::spawn(async move {
            let handler_token = token.clone();
            let service = service_fn(move |req| handle(shared.clone(), handler_token.clone(), req));
            let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = conn => {}
                _ = token.cancelled() => {}
            }
        });
    }
}

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Wire {
    Anthropic,
    OpenAi,
    Gemini { stream: bool },
}

async fn handle(
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let method = req.method().to_string();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().map(str::to_owned);
    let headers = joined_headers(&req);
    let bytes = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return Ok(plain(
                400,
                "text/plain",
                format!("cannot read the request body: {e}"),
            ));
        }
    };
    let body: Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    let number = {
        let mut r = shared.requests.lock().unwrap_or_else(|p| p.into_inner());
        r.push(RecordedRequest {
            method,
            path: path.clone(),
            query: query.clone(),
            headers,
            body: body.clone(),
        });
        r.len()
    };
    let wire = match checked_wire(&path, query.as_deref(), &body) {
        Ok(wire) => wire,
        Err(refusal) => return Ok(*refusal),
    };

    let Some(reply) = shared.next_reply(&body.to_string()) else {
        let total = shared
            .script
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .total;
        return Ok(render_error(
            wire,
            400,
            &format!(
                "fake provider: the script has no reply for request #{number} (it holds {total})"
            ),
            None,
        ));
    };

    if reply.latency_ms > 0 {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(reply.latency_ms)) => {}
            _ = shutdown.cancelled() => {}
        }
    }
    if let Some(raw) = &reply.raw {
        let ct = raw.content_type.as_deref().unwrap_or("application/json");
        return Ok(plain(raw.status, ct, raw.body.clone()));
    }
    if let Some(e) = &reply.error {
        return Ok(render_error(
            wire,
            e.status,
            &e.message,
            e.retry_after.as_deref(),
        ));
    }
    Ok(respond(
        wire, &path, &body, &bytes, number, &reply, shutdown,
    ))
}

/// The request's headers, repeated ones joined with `, `.
fn joined_headers(req: &Request<Incoming>) -> BTreeMap<String, String> {
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in req.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    headers
}

/// The provider format the request's path names, or the error answer for a
/// request no provider would accept.
fn checked_wire(
    path: &str,
    query: Option<&str>,
    body: &Value,
) -> Result<Wire, Box<Response<Body>>> {
    let wire = if path.ends_with("/messages") {
        Wire::Anthropic
    } else if path.ends_with("/chat/completions") {
        Wire::OpenAi
    } else if path.ends_with(":generateContent") {
        Wire::Gemini { stream: false }
    } else if path.ends_with(":streamGenerateContent") {
        Wire::Gemini { stream: true }
    } else {
        return Err(Box::new(plain(
            404,
            "application/json",
            json!({"error": {"message": format!("fake provider: no endpoint at {path}")}})
                .to_string(),
        )));
    };
    if !body.is_object() {
        return Err(Box::new(render_error(
            wire,
            400,
            "fake provider: the request body is not a JSON object",
            None,
        )));
    }
    if wire == (Wire::Gemini { stream: true }) && query != Some("alt=sse") {
        return Err(Box::new(render_error(
            wire,
            400,
            "fake provider: only ?alt=sse streaming is supported",
            None,
        )));
    }
    Ok(wire)
}

/// A scripted reply in the request's format, streamed when it asked for a
/// stream.
fn respond(
    wire: Wire,
    path: &str,
    body: &Value,
    bytes: &[u8],
    number: usize,
    reply: &FakeReply,
    shutdown: CancellationToken,
) -> Response<Body> {
    let model = match wire {
        Wire::Gemini { .. } => path
            .rsplit_once("/models/")
            .map(|(_, rest)| rest.split(':').next().unwrap_or("").to_owned())
            .unwrap_or_default(),
        _ => body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
    };
    let answer = Answer {
        number,
        model: reply.model.clone().unwrap_or(model),
        usage: reply.usage.unwrap_or_else(|| estimate_usage(bytes, reply)),
        reply,
    };
    let stream = match wire {
        Wire::Gemini { stream } => stream,
        _ => body.get("stream").and_then(Value::as_bool) == Some(true),
    };
    let include_usage = body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        == Some(true);
    if stream {
        let events = match wire {
            Wire::Anthropic => anthropic_events(&answer),
            Wire::OpenAi => openai_events(&answer, include_usage),
            Wire::Gemini { .. } => gemini_events(&answer),
        };
        streamed(events, reply, shutdown)
    } else {
        let body = match wire {
            Wire::Anthropic => anthropic_body(&answer),
            Wire::OpenAi => openai_body(&answer),
            Wire::Gemini { .. } => gemini_body(&answer),
        };
        whole(body.to_string(), reply)
    }
}

struct Answer<'a> {
    number: usize,
    model: String,
    usage: FakeUsage,
    reply: &'a FakeReply,
}

impl Answer<'_> {
    fn text(&self) -> &str {
        self.reply.text.as_deref().unwrap_or("")
    }

    fn call_id(&self, prefix: &str, i: usize) -> String {
        self.reply.tool_calls[i]
            .id
            .clone()
            .unwrap_or_else(|| format!("{prefix}_fake_{}_{i}", self.number))
    }

    fn stop(&self, natural_text: &str, natural_tools: &str) -> String {
        self.reply.stop.clone().unwrap_or_else(|| {
            if self.reply.tool_calls.is_empty() {
                natural_text.to_owned()
            } else {
                natural_tools.to_owned()
            }
        })
    }
}

/// Rough token counts (4 bytes a token), deterministic for a given request.
fn estimate_usage(request: &[u8], reply: &FakeReply) -> FakeUsage {
    let out: usize = reply.text.as_deref().map_or(0, str::len)
        + reply
            .tool_calls
            .iter()
            .map(|c| c.name.len() + c.arguments.to_string().len())
            .sum::<usize>();
    FakeUsage {
        input_tokens: (request.len() as u64 / 4).max(1),
        output_tokens: (out as u64 / 4).max(1),
    }
}

/// `s` in up to `n` non-empty pieces, cut on character boundaries.
fn pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(n.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

// ---- Anthropic ------------------------------------------------------------

fn anthropic_body(a: &Answer<'_>) -> Value {
    let mut content = Vec::new();
    if !a.text().is_empty() {
        content.push(json!({"type": "text", "text": a.text()}));
    }
    for (i, c) in a.reply.tool_calls.iter().enumerate() {
        content.push(json!({"type": "tool_use", "id": a.call_id("toolu", i), "name": c.name, "input": c.arguments}));
    }
    json!({
        "id": format!("msg_fake_{}", a.number),
        "type": "message",
        "role": "assistant",
        "model": a.model,
        "content": content,
        "stop_reason": a.stop("end_turn", "tool_use"),
        "stop_sequence": null,
        "usage": {"input_tokens": a.usage.input_tokens, "output_tokens": a.usage.output_tokens},
    })
}

fn anthropic_events(a: &Answer<'_>) -> Vec<String> {
    let ev = |v: Value| {
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        format!("event: {kind}\ndata: {v}\n\n")
    };
    let mut out = vec![
        ev(json!({"type": "message_start", "message": {
            "id": format!("msg_fake_{}", a.number), "type": "message", "role": "assistant",
            "model": a.model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": a.usage.input_tokens, "output_tokens": 1}}})),
        ev(json!({"type": "ping"})),
    ];
    let mut index = 0;
    if !a.text().is_empty() {
        out.push(ev(json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})));
        for p in pieces(a.text(), 3) {
            out.push(ev(json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}})));
        }
        out.push(ev(json!({"type": "content_block_stop", "index": index})));
        index += 1;
    }
    for (i, c) in a.reply.tool_calls.iter().enumerate() {
        out.push(ev(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": a.call_id("toolu", i), "name": c.name, "input": {}}})));
        // The real API opens with an empty fragment; mirror that.
        out.push(ev(json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": ""}})));
        for p in pieces(&c.arguments.to_string(), 3) {
            out.push(ev(json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": p}})));
        }
        out.push(ev(json!({"type": "content_block_stop", "index": index})));
        index += 1;
    }
    out.push(ev(json!({"type": "message_delta",
        "delta": {"stop_reason": a.stop("end_turn", "tool_use"), "stop_sequence": null},
        "usage": {"output_tokens": a.usage.output_tokens}})));
    out.push(ev(json!({"type": "message_stop"})));
    out
}

// ---- OpenAI ---------------------------------------------------------------

fn openai_tool_calls(a: &Answer<'_>) -> Vec<Value> {
    a.reply
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"id": a.call_id("call", i), "type": "function",
                   "function": {"name": c.name, "arguments": c.arguments.to_string()}})
        })
        .collect()
}

fn openai_body(a: &Answer<'_>) -> Value {
    let mut message = json!({
        "role": "assistant",
        "content": if a.text().is_empty() { Value::Null } else { json!(a.text()) },
        "refusal": null,
    });
    if !a.reply.tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(openai_tool_calls(a));
    }
    json!({
        "id": format!("chatcmpl-fake-{}", a.number),
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": a.model,
        "choices": [{"index": 0, "message": message, "logprobs": null,
                     "finish_reason": a.stop("stop", "tool_calls")}],
        "usage": {"prompt_tokens": a.usage.input_tokens, "completion_tokens": a.usage.output_tokens,
                  "total_tokens": a.usage.input_tokens + a.usage.output_tokens},
    })
}

fn openai_events(a: &Answer<'_>, include_usage: bool) -> Vec<String> {
    let chunk = |choices: Value, usage: Value| {
        let mut v = json!({"id": format!("chatcmpl-fake-{}", a.number), "object": "chat.completion.chunk",
                           "created": 1_700_000_000, "model": a.model, "choices": choices});
        if include_usage {
            v["usage"] = usage;
        }
        format!("data: {v}\n\n")
    };
    let delta = |d: Value| {
        chunk(
            json!([{"index": 0, "delta": d, "logprobs": null, "finish_reason": null}]),
            Value::Null,
        )
    };
    let mut out = vec![delta(
        json!({"role": "assistant", "content": "", "refusal": null}),
    )];
    for p in pieces(a.text(), 3) {
        out.push(delta(json!({"content": p})));
    }
    for (i, c) in a.reply.tool_calls.iter().enumerate() {
        out.push(delta(
            json!({"tool_calls": [{"index": i, "id": a.call_id("call", i), "type": "function",
                                               "function": {"name": c.name, "arguments": ""}}]}),
        ));
        for p in pieces(&c.arguments.to_string(), 3) {
            out.push(delta(
                json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
            ));
        }
    }
    out.push(chunk(
        json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": a.stop("stop", "tool_calls")}]),
        Value::Null,
    ));
    if include_usage {
        out.push(chunk(
            json!([]),
            json!({"prompt_tokens": a.usage.input_tokens, "completion_tokens": a.usage.output_tokens,
                   "total_tokens": a.usage.input_tokens + a.usage.output_tokens}),
        ));
    }
    out.push("data: [DONE]\n\n".to_owned());
    out
}

// ---- Gemini ---------------------------------------------------------------

fn gemini_call_part(a: &Answer<'_>, i: usize) -> Value {
    let c = &a.reply.tool_calls[i];
    let mut call = json!({"name": c.name, "args": c.arguments});
    if let Some(id) = &c.id {
        call["id"] = json!(id);
    }
    let mut part = json!({"functionCall": call});
    // Gemini 3 signs the first call of a turn and wants the signature back.
    if i == 0 {
        part["thoughtSignature"] = json!(format!("fake-signature-{}", a.number));
    }
    part
}

fn gemini_usage(a: &Answer<'_>, done: bool) -> Value {
    if done {
        json!({"promptTokenCount": a.usage.input_tokens, "candidatesTokenCount": a.usage.output_tokens,
               "totalTokenCount": a.usage.input_tokens + a.usage.output_tokens})
    } else {
        json!({"promptTokenCount": a.usage.input_tokens, "totalTokenCount": a.usage.input_tokens})
    }
}

fn gemini_body(a: &Answer<'_>) -> Value {
    let mut parts = Vec::new();
    if !a.text().is_empty() {
        parts.push(json!({"text": a.text()}));
    }
    for i in 0..a.reply.tool_calls.len() {
        parts.push(gemini_call_part(a, i));
    }
    json!({
        "candidates": [{"content": {"parts": parts, "role": "model"},
                        "finishReason": a.stop("STOP", "STOP"), "index": 0}],
        "usageMetadata": gemini_usage(a, true),
        "modelVersion": a.model,
        "responseId": format!("fake-{}", a.number),
    })
}

fn gemini_events(a: &Answer<'_>) -> Vec<String> {
    let mut parts: Vec<Value> = pieces(a.text(), 3)
        .into_iter()
        .map(|p| json!({"text": p}))
        .collect();
    for i in 0..a.reply.tool_calls.len() {
        parts.push(gemini_call_part(a, i));
    }
    if parts.is_empty() {
        parts.push(json!({"text": ""}));
    }
    let last = parts.len() - 1;
    parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let mut candidate = json!({"content": {"parts": [part], "role": "model"}, "index": 0});
            if i == last {
                candidate["finishReason"] = json!(a.stop("STOP", "STOP"));
            }
            let v = json!({"candidates": [candidate], "usageMetadata": gemini_usage(a, i == last),
                           "modelVersion": a.model, "responseId": format!("fake-{}", a.number)});
            // Gemini separates events with CRLF; exercise that path.
            format!("data: {v}\r\n\r\n")
        })
        .collect()
}

// ---- errors and delivery --------------------------------------------------

fn render_error(
    wire: Wire,
    status: u16,
    message: &str,
    retry_after: Option<&str>,
) -> Response<Body> {
    let body = match wire {
        Wire::Anthropic => {
            let kind = match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Wire::OpenAi => {
            let kind = match status {
                429 => "rate_limit_exceeded",
                500..=599 => "server_error",
                _ => "invalid_request_error",
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
        }
        Wire::Gemini { .. } => {
            let kind = match status {
                400 => "INVALID_ARGUMENT",
                401 => "UNAUTHENTICATED",
                403 => "PERMISSION_DENIED",
                404 => "NOT_FOUND",
                429 => "RESOURCE_EXHAUSTED",
                503 => "UNAVAILABLE",
                _ => "INTERNAL",
            };
            json!({"error": {"code": status, "message": message, "status": kind}})
        }
    };
    let mut response = plain(status, "application/json", body.to_string());
    if let Some(v) = retry_after
        && let Ok(v) = hyper::header::HeaderValue::from_str(v)
    {
        response.headers_mut().insert("retry-after", v);
    }
    response
}

fn plain(status: u16, content_type: &str, body: String) -> Response<Body> {
    let body = Full::new(Bytes::from(body))
        .map_err(|never| match never {})
        .boxed_unsync();
    build(status, content_type, body)
}

fn build(status: u16, content_type: &str, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, v);
    }
    response
}

fn cut_error() -> std::io::Error {
    std::io::Error::other("fake provider: connection cut on purpose")
}

/// A complete JSON answer; with `cut_after`, half of it and then a dropped connection.
fn whole(body: String, reply: &FakeReply) -> Response<Body> {
    if reply.cut_after.is_none() {
        return plain(200, "application/json", body);
    }
    let mut half = body.len() / 2;
    while !body.is_char_boundary(half) {
        half -= 1;
    }
    let first = Bytes::from(body[..half].to_owned());
    let body = futures::stream::once(async move { Ok(Frame::data(first)) }).chain(
        futures::stream::once(async {
            // As in `streamed`: let the first half out before dropping the connection.
            tokio::time::sleep(Duration::from_millis(20)).await;
            Err(cut_error())
        }),
    );
    build(
        200,
        "application/json",
        StreamBody::new(body).boxed_unsync(),
    )
}

/// An event stream, each event in two chunks, with the reply's delivery faults.
fn streamed(events: Vec<String>, reply: &FakeReply, shutdown: CancellationToken) -> Response<Body> {
    let limit = match (reply.cut_after, reply.stall_after) {
        (Some(c), Some(s)) => c.min(s),
        (Some(c), None) => c,
        (None, Some(s)) => s,
        (None, None) => usize::MAX,
    };
    let cut = reply.cut_after.is_some_and(|c| c <= limit);
    let stall = !cut && reply.stall_after.is_some();
    let delay = Duration::from_millis(reply.chunk_delay_ms);
    let mut frames: Vec<Bytes> = Vec::new();
    for event in events.into_iter().take(limit) {
        let bytes = event.into_bytes();
        // Splitting mid-event (even mid-character) exercises the client's buffering.
        let mid = bytes.len() / 2;
        frames.push(Bytes::copy_from_slice(&bytes[..mid]));
        frames.push(Bytes::copy_from_slice(&bytes[mid..]));
    }
    let body = futures::stream::iter(frames.into_iter().enumerate())
        .then(move |(i, frame)| async move {
            // Delay before each event (not each half), so a delay makes every event
            // its own write on the wire.
            if i % 2 == 0 && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Ok::<_, std::io::Error>(Frame::data(frame))
        })
        .chain(
            futures::stream::once(async move {
                if cut {
                    // Let what was sent reach the client before the connection
                    // drops: hyper flushes while the body is pending.
                    tokio::time::sleep(delay.max(Duration::from_millis(20))).await;
                    Some(Err(cut_error()))
                } else {
                    None
                }
            })
            .filter_map(|x| async move { x }),
        )
        .chain(
            futures::stream::once(async move {
                if stall {
                    shutdown.cancelled().await;
                }
                None
            })
            .filter_map(|x: Option<Result<Frame<Bytes>, std::io::Error>>| async move { x }),
        );
    let mut response = build(
        200,
        "text/event-stream",
        StreamBody::new(body).boxed_unsync(),
    );
    response.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-cache"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_parse_in_both_forms() {
        let list: FakeScript = serde_json::from_str(
            r#"[{"tool_calls": [{"name": "write", "arguments": {"path": "a"}}]}, {"text": "done"}]"#,
        )
        .unwrap();
        assert_eq!(list.replies.len(), 2);
        assert!(!list.repeat);
        assert_eq!(list.replies[1], FakeReply::text("done"));
        let full: FakeScript = serde_json::from_str(
            r#"{"replies": [{"text": "x", "latency_ms": 5}], "repeat": true}"#,
        )
        .unwrap();
        assert!(full.repeat);
        assert_eq!(full.replies[0].latency_ms, 5);
        assert!(serde_json::from_str::<FakeScript>(r#"[{"txt": "typo"}]"#).is_err());
    }

    #[test]
    fn pieces_cover_the_text() {
        assert_eq!(pieces("héllo wörld", 3).concat(), "héllo wörld");
        assert_eq!(pieces("ab", 3), vec!["a", "b"]);
        assert!(pieces("", 3).is_empty());
    }
}
