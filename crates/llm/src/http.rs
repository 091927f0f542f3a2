//! The HTTP driver every wire format shares: send, time out, retry, cancel, stream,
//! and account (latency, usage, cost).
//!
//! A wire format ([`WireFormat`]: Anthropic, OpenAI, Gemini) only knows how to
//! write a request body and read a response or a stream of events; it never
//! touches the network. This keeps the fault behaviour — the part that is hard to
//! get right — in one place, tested once against all three formats.
//!
//! Fault rules, in order:
//! - cancellation wins over everything, including a backoff sleep;
//! - connect, first-byte and idle timeouts are separate, so a slow model that
//!   streams steadily is not killed by a total deadline;
//! - a retryable failure ([`LlmError::is_retryable`]) is retried with the
//!   [`RetryPolicy`], a stream cut part-way as a whole new call;
//! - anything else fails at once with the provider's own message.

use std::time::{Duration, Instant};

use futures::channel::mpsc;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, SinkExt, StreamExt};
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::Provider;
use crate::error::{LlmError, TimeoutPhase, redact, truncate};
use crate::pricing::Pricing;
use crate::retry::{RetryPolicy, retry_after_from_headers};
use crate::sse::{SseEvent, SseParser};
use crate::types::{ChatRequest, ChatResponse, ContentBlock, StopReason, StreamEvent, Usage};

/// Timeouts and retries for HTTP providers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HttpOptions {
    /// Opening the connection (TCP and TLS).
    pub connect_timeout: Duration,
    /// From sending the request to the response headers. Non-streaming calls get
    /// their headers only when the whole answer is ready, hence the generous default.
    pub first_byte_timeout: Duration,
    /// Longest silence between two chunks of a response body.
    pub idle_timeout: Duration,
    /// Longest one attempt may take from request to last byte, however
    /// steadily the bytes come (config `llm.call_timeout`).
    pub call_timeout: Duration,
    pub retry: RetryPolicy,
}

/// Default for [`HttpOptions::call_timeout`]: room for a long answer at a slow
/// model's pace, and a bound on a provider that trickles forever.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(600);

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(120),
            call_timeout: DEFAULT_CALL_TIMEOUT,
            retry: RetryPolicy::default(),
        }
    }
}

/// Everything an HTTP provider is built from (the factory fills it from the config).
#[derive(Clone)]
pub struct ProviderSettings {
    /// The provider's name for messages and events (`openrouter` runs the OpenAI format).
    pub name: String,
    pub model: String,
    /// The key itself, read from the environment by the caller.
    pub api_key: Option<String>,
    /// Where the API lives; see each wire format for what is appended.
    pub base_url: String,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub pricing: Pricing,
    pub options: HttpOptions,
}

impl std::fmt::Debug for ProviderSettings {
    // Written by hand so the key can never end up in a debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("name", &self.name)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("base_url", &self.base_url)
            .field("max_tokens", &self.max_tokens)
            .field("temperature", &self.temperature)
            .field("options", &self.options)
            .finish()
    }
}

/// What a wire format extracted from one response.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub content: Vec<ContentBlock>,
    pub stop_reason: StopReason,
    pub raw_stop_reason: Option<String>,
    pub usage: Usage,
    /// The model the provider says answered.
    pub model: Option<String>,
}

/// Why a provider's headers cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("the API key contains characters not allowed in a header")]
    ApiKey,
}

/// One provider's request and response formats. Pure translation: no I/O.
pub trait WireFormat: Send + Sync {
    /// The endpoint for `model`, below `base` (already without a trailing `/`).
    fn url(&self, base: &str, model: &str, stream: bool) -> String;
    /// Authentication (and version) headers. Marked sensitive by the implementation.
    fn headers(&self, api_key: Option<&str>) -> Result<HeaderMap, HeaderError>;
    /// The JSON body for `request`.
    fn body(&self, request: &ChatRequest, call: &CallParams<'_>) -> Value;
    /// A complete (non-streaming) response body.
    fn parse(&self, body: &[u8], ctx: &DecodeContext) -> Result<Parsed, DecodeError>;
    /// A fresh decoder for one streamed response.
    fn decoder(&self, ctx: &DecodeContext) -> Box<dyn StreamDecoder>;
    /// The provider's own message from an error body, when it has the usual shape.
    fn error_message(&self, body: &[u8]) -> Option<String> {
        generic_error_message(body)
    }
}

/// The per-call settings a body is written with.
#[derive(Debug, Clone, Copy)]
pub struct CallParams<'a> {
    pub model: &'a str,
    pub max_tokens: Option<u32>,
    pub temperature: Option<f32>,
    pub stream: bool,
}

/// What a decoder may need to know about the call.
#[derive(Debug, Clone)]
pub struct DecodeContext {
    /// A hash of the request body, for deterministic made-up ids (Gemini).
    pub seed: u64,
}

/// Turns the events of one streamed response into deltas and, at the end, the answer.
pub trait StreamDecoder: Send {
    /// Handle one event, pushing the deltas it carries.
    fn event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), DecodeError>;
    /// The provider's end-of-stream marker has been seen; nothing after it matters.
    fn is_done(&self) -> bool;
    /// The stream ended: the assembled answer, or why it is incomplete.
    fn finish(self: Box<Self>) -> Result<Parsed, DecodeError>;
}

/// Why a stream could not be decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeError {
    /// Not the documented format.
    Protocol(String),
    /// The stream ended before its final event.
    Incomplete(String),
    /// The provider reported an error inside the stream.
    Api {
        kind: String,
        message: String,
        retryable: bool,
    },
    /// Tool-call arguments that are not JSON.
    ToolArguments {
        tool: String,
        id: String,
        message: String,
        raw: String,
    },
}

/// The provider's message from the common `{"error": {"message": …}}` shapes
/// (OpenAI, Anthropic, Gemini, and Gemini's `[{"error": …}]` stream form).
pub fn generic_error_message(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let v = match &v {
        Value::Array(items) => items.first()?.clone(),
        _ => v,
    };
    let err = v.get("error")?;
    if let Some(s) = err.as_str() {
        return Some(s.to_owned());
    }
    let message = err.get("message").and_then(Value::as_str)?;
    let kind = err
        .get("type")
        .or_else(|| err.get("status"))
        .and_then(Value::as_str);
    Some(match kind {
        Some(k) if !k.is_empty() => format!("{message} ({k})"),
        _ => message.to_owned(),
    })
}

/// Parse accumulated tool-call argument text. Empty text means "no arguments".
pub fn parse_arguments(tool: &str, id: &str, raw: &str) -> Result<Value, DecodeError> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(raw).map_err(|e| DecodeError::ToolArguments {
        tool: tool.to_owned(),
        id: id.to_owned(),
        message: e.to_string(),
        raw: truncate(raw, 400),
    })
}

/// Largest successful response body we accept.
const MAX_BODY: usize = 64 * 1024 * 1024;
/// Largest error body we read; the message is at the start.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// Output limit when the config gives none and the API insists on one (Anthropic).
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// Makes rustls's ring provider the process's default, once. Every HTTPS
/// client takes its cryptography from there (the workspace builds reqwest
/// without a provider of its own: see the workspace's Cargo.toml), ours and
/// those that libraries build (rmcp's MCP client, the OTLP exporter): call this
/// before building one. A provider an embedding program installed first is
/// kept.
pub fn install_tls() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// One HTTP client per (connect timeout, loopback, plain http) for the whole
/// process.
///
/// A client carries its TLS configuration (the root store) and a connection
/// pool; building one per provider made a server with 1,000 runs in flight hold
/// 1,000 of each. Shared, the runs also reuse each other's connections.
///
/// A plain-http loopback client (Ollama, the fake provider) gets an empty root
/// store: building the default one reads every certificate under
/// /etc/ssl/certs, about 10 ms of a 25 ms run, for a connection that never
/// speaks TLS. Such a client refuses https, which it is never given: the key
/// says which URLs it serves.
fn shared_client(
    connect_timeout: Duration,
    loopback: bool,
    plain_http: bool,
) -> reqwest::Result<reqwest::Client> {
    type Key = (Duration, bool, bool);
    static CLIENTS: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<Key, reqwest::Client>>,
    > = std::sync::OnceLock::new();
    let key = (connect_timeout, loopback, loopback && plain_http);
    let mut clients = CLIENTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(c) = clients.get(&key) {
        return Ok(c.clone());
    }
    install_tls();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .user_agent(concat!("agentfile/", env!("CARGO_PKG_VERSION")));
    // A proxy from the environment must not capture calls to a local server
    // (Ollama, the fake provider): they would fail or leave the machine.
    if loopback {
        builder = builder.no_proxy();
    }
    if key.2 {
        builder = builder.tls_certs_only(Vec::<reqwest::Certificate>::new());
    }
    let client = builder.build()?;
    clients.insert(key, client.clone());
    Ok(client)
}

/// A provider reached over HTTP, speaking one [`WireFormat`].
pub struct HttpProvider {
    name: String,
    model: String,
    base_url: String,
    api_key: Option<String>,
    max_tokens: Option<u32>,
    temperature: Option<f32>,
    pricing: Pricing,
    options: HttpOptions,
    headers: HeaderMap,
    client: reqwest::Client,
    wire: Box<dyn WireFormat>,
}

impl std::fmt::Debug for HttpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpProvider")
            .field("name", &self.name)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl HttpProvider {
    /// A provider speaking `wire`.
    pub fn new(settings: ProviderSettings, wire: Box<dyn WireFormat>) -> Result<Self, LlmError> {
        let config_error = |message: String| LlmError::Config {
            provider: settings.name.clone(),
            message,
        };
        let base_url = settings.base_url.trim_end_matches('/').to_owned();
        let parsed = reqwest::Url::parse(&base_url)
            .map_err(|e| config_error(format!("base_url `{base_url}` is not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(config_error(format!(
                "base_url `{base_url}` must start with http:// or https://"
            )));
        }
        let headers = wire
            .headers(settings.api_key.as_deref())
            .map_err(|e| config_error(e.to_string()))?;
        let client = shared_client(
            settings.options.connect_timeout,
            is_loopback(&parsed),
            parsed.scheme() == "http",
        )
        .map_err(|e| config_error(format!("cannot set up the HTTP client: {e}")))?;
        Ok(HttpProvider {
            name: settings.name,
            model: settings.model,
            base_url,
            api_key: settings.api_key,
            max_tokens: settings.max_tokens,
            temperature: settings.temperature,
            pricing: settings.pricing,
            options: settings.options,
            headers,
            client,
            wire,
        })
    }

    /// The request body this provider would send for `request` (what the fake
    /// server captures; used by snapshot tests and debugging).
    pub fn request_body(&self, request: &ChatRequest, stream: bool) -> Value {
        let model = request.model.as_deref().unwrap_or(&self.model);
        self.wire
            .body(request, &self.params(request, model, stream))
    }

    fn params<'a>(&self, request: &ChatRequest, model: &'a str, stream: bool) -> CallParams<'a> {
        CallParams {
            model,
            max_tokens: request.max_tokens.or(self.max_tokens),
            temperature: request.temperature.or(self.temperature),
            stream,
        }
    }

    async fn run(
        &self,
        request: ChatRequest,
        cancel: CancellationToken,
        mut sink: Option<Sink<'_>>,
    ) -> Result<ChatResponse, LlmError> {
        if cancel.is_cancelled() {
            return Err(LlmError::Cancelled);
        }
        let stream = sink.is_some();
        let model = request.model.clone().unwrap_or_else(|| self.model.clone());
        let body = self
            .wire
            .body(&request, &self.params(&request, &model, stream));
        let url = self.wire.url(&self.base_url, &model, stream);
        // Serialised once: the seed hashes these bytes, and every attempt
        // sends them (a cheap clone of the same buffer).
        let body = bytes::Bytes::from(
            serde_json::to_vec(&body)
                .map_err(|e| self.protocol(format!("cannot encode the request: {e}")))?,
        );
        let ctx = DecodeContext { seed: fnv1a(&body) };
        let started = Instant::now();
        let policy = self.options.retry;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            if let Some(s) = sink.as_mut() {
                s.emitted = false;
            }
            let outcome = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                r = tokio::time::timeout(
                    self.options.call_timeout,
                    self.attempt(&url, &body, &ctx, sink.as_mut()),
                ) => r.unwrap_or_else(|_| Err(self.timeout(TimeoutPhase::Total))),
            };
            let error = match outcome {
                Ok(parsed) => return Ok(self.finish(parsed, &model, started, attempt)),
                Err(e) => e,
            };
            let wait = (error.is_retryable() && attempt < policy.max_attempts.max(1))
                .then(|| policy.delay(attempt, error.retry_after()))
                .flatten();
            let Some(wait) = wait else {
                return Err(if attempt > 1 {
                    LlmError::RetriesExhausted {
                        attempts: attempt,
                        source: Box::new(error),
                    }
                } else {
                    error
                });
            };
            tracing::info!(
                provider = %self.name,
                attempt,
                wait_ms = wait.as_millis() as u64,
                error = %error,
                "model call failed; retrying"
            );
            if let Some(s) = sink.as_mut() {
                // Said before the wait, so a run does not look stalled while it
                // backs off (the executor turns this into a `warning` event).
                s.notify(StreamEvent::Retry {
                    attempt: attempt + 1,
                    max_attempts: policy.max_attempts.max(1),
                    wait,
                    reason: error.to_string(),
                })
                .await?;
                if s.emitted {
                    s.send(StreamEvent::Restart {
                        attempt: attempt + 1,
                        reason: error.to_string(),
                    })
                    .await?;
                }
            }
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    fn finish(&self, parsed: Parsed, model: &str, started: Instant, attempts: u32) -> ChatResponse {
        let reported = parsed
            .model
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| model.to_owned());
        // The reported name is usually a dated snapshot that the table knows by
        // family; fall back to the requested name for aliases it does not.
        let cost = self
            .pricing
            .cost(&reported, &parsed.usage)
            .or_else(|| self.pricing.cost(model, &parsed.usage));
        ChatResponse {
            content: parsed.content,
            stop_reason: parsed.stop_reason,
            raw_stop_reason: parsed.raw_stop_reason,
            usage: parsed.usage,
            model: reported,
            latency: started.elapsed(),
            cost_usd: cost,
            attempts,
        }
    }

    /// One HTTP exchange, no retries.
    async fn attempt(
        &self,
        url: &str,
        body: &bytes::Bytes,
        ctx: &DecodeContext,
        sink: Option<&mut Sink<'_>>,
    ) -> Result<Parsed, LlmError> {
        let send = self
            .client
            .post(url)
            .headers(self.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone())
            .send();
        let response = match tokio::time::timeout(self.options.first_byte_timeout, send).await {
            Err(_) => return Err(self.timeout(TimeoutPhase::FirstByte)),
            Ok(Err(e)) => return Err(self.request_error(&e, url)),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after_from_headers(response.headers());
            // The status alone is still worth reporting if the body cannot be read.
            let bytes = self
                .read_body(response, MAX_ERROR_BODY, true)
                .await
                .unwrap_or_default();
            let message = self.wire.error_message(&bytes).unwrap_or_else(|| {
                let text = String::from_utf8_lossy(&bytes);
                let text = text.trim();
                if text.is_empty() {
                    status
                        .canonical_reason()
                        .unwrap_or("no error message")
                        .to_owned()
                } else {
                    truncate(text, 500)
                }
            });
            return Err(LlmError::Http {
                provider: self.name.clone(),
                status: status.as_u16(),
                message: self.redact(&message),
                retry_after,
            });
        }
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        match sink {
            // A server that ignores `stream: true` and answers with one JSON body is
            // still understood; the deltas are made from the whole answer.
            Some(sink) if !is_json => self.read_stream(response, ctx, sink).await,
            sink => {
                let bytes = self.read_body(response, MAX_BODY, false).await?;
                let parsed = self
                    .wire
                    .parse(&bytes, ctx)
                    .map_err(|e| self.decode_error(e))?;
                if let Some(sink) = sink {
                    for event in deltas_of(&parsed.content) {
                        sink.send(event).await?;
                    }
                }
                Ok(parsed)
            }
        }
    }

    async fn read_body(
        &self,
        mut response: reqwest::Response,
        limit: usize,
        truncate_at_limit: bool,
    ) -> Result<Vec<u8>, LlmError> {
        let mut buf = Vec::new();
        while let Some(chunk) = self.next_chunk(&mut response).await? {
            if buf.len() + chunk.len() > limit {
                if truncate_at_limit {
                    buf.extend_from_slice(&chunk[..limit - buf.len()]);
                    break;
                }
                return Err(self.protocol(format!("the response is larger than {limit} bytes")));
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(buf)
    }

    async fn next_chunk(
        &self,
        response: &mut reqwest::Response,
    ) -> Result<Option<bytes::Bytes>, LlmError> {
        match tokio::time::timeout(self.options.idle_timeout, response.chunk()).await {
            Err(_) => Err(self.timeout(TimeoutPhase::Idle)),
            Ok(Err(e)) => Err(LlmError::StreamCut {
                provider: self.name.clone(),
                message: self.redact(&error_chain(&e)),
            }),
            Ok(Ok(chunk)) => Ok(chunk),
        }
    }

    async fn read_stream(
        &self,
        mut response: reqwest::Response,
        ctx: &DecodeContext,
        sink: &mut Sink<'_>,
    ) -> Result<Parsed, LlmError> {
        let mut parser = SseParser::new();
        let mut decoder = self.wire.decoder(ctx);
        let mut events = Vec::new();
        let mut deltas = Vec::new();
        loop {
            let chunk = self.next_chunk(&mut response).await?;
            let ended = chunk.is_none();
            let fed = match &chunk {
                Some(bytes) => parser.feed(bytes, &mut events),
                None => parser.finish(&mut events),
            };
            fed.map_err(|e| self.protocol(e.to_string()))?;
            for event in events.drain(..) {
                decoder
                    .event(&event, &mut deltas)
                    .map_err(|e| self.decode_error(e))?;
                if decoder.is_done() {
                    break;
                }
            }
            for delta in deltas.drain(..) {
                sink.send(delta).await?;
            }
            if ended || decoder.is_done() {
                break;
            }
        }
        decoder.finish().map_err(|e| self.decode_error(e))
    }

    fn decode_error(&self, e: DecodeError) -> LlmError {
        let provider = self.name.clone();
        match e {
            DecodeError::Protocol(m) => LlmError::Protocol {
                provider,
                message: self.redact(&m),
            },
            DecodeError::Incomplete(m) => LlmError::StreamCut {
                provider,
                message: m,
            },
            DecodeError::Api {
                kind,
                message,
                retryable,
            } => LlmError::Api {
                provider,
                kind,
                message: self.redact(&message),
                retryable,
            },
            DecodeError::ToolArguments {
                tool,
                id,
                message,
                raw,
            } => LlmError::InvalidToolArguments {
                provider,
                tool,
                id,
                message,
                raw: self.redact(&raw),
            },
        }
    }

    fn request_error(&self, e: &reqwest::Error, url: &str) -> LlmError {
        let message = self.redact(&error_chain(e));
        if e.is_timeout() {
            let phase = if e.is_connect() {
                TimeoutPhase::Connect
            } else {
                TimeoutPhase::FirstByte
            };
            return self.timeout(phase);
        }
        if e.is_body() || e.is_decode() {
            return LlmError::StreamCut {
                provider: self.name.clone(),
                message,
            };
        }
        // Refused, reset, DNS, TLS: all "could not get an answer from there".
        LlmError::Connect {
            provider: self.name.clone(),
            url: url.to_owned(),
            message,
        }
    }

    fn timeout(&self, phase: TimeoutPhase) -> LlmError {
        let after = match phase {
            TimeoutPhase::Connect => self.options.connect_timeout,
            TimeoutPhase::FirstByte => self.options.first_byte_timeout,
            TimeoutPhase::Idle => self.options.idle_timeout,
            TimeoutPhase::Total => self.options.call_timeout,
        };
        LlmError::Timeout {
            provider: self.name.clone(),
            phase,
            after,
        }
    }

    fn protocol(&self, message: String) -> LlmError {
        LlmError::Protocol {
            provider: self.name.clone(),
            message: self.redact(&message),
        }
    }

    fn redact(&self, text: &str) -> String {
        redact(text, self.api_key.as_deref())
    }
}

impl Provider for HttpProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn endpoint(&self) -> Option<String> {
        Some(self.base_url.clone())
    }

    fn chat(
        &self,
        request: ChatRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<ChatResponse, LlmError>> {
        self.run(request, cancel, None).boxed()
    }

    fn stream(
        &self,
        request: ChatRequest,
        cancel: CancellationToken,
    ) -> BoxStream<'_, Result<StreamEvent, LlmError>> {
        // The driver runs as a future inside the returned stream and pushes items
        // through a bounded channel; both are polled by whoever polls the stream, so
        // nothing is spawned and dropping the stream drops the HTTP request.
        let (tx, rx) = mpsc::channel(32);
        let driver = async move {
            let mut tx = tx;
            let sink = Sink {
                tx: &mut tx,
                emitted: false,
            };
            let result = self.run(request, cancel, Some(sink)).await;
            // A closed receiver means nobody wants the answer any more.
            let _ = tx.send(result.map(StreamEvent::Done)).await;
        };
        let driver = futures::stream::once(driver).filter_map(|()| async { None });
        futures::stream::select(rx, driver).boxed()
    }
}

/// Where streamed deltas go, remembering whether this attempt has sent any.
struct Sink<'a> {
    tx: &'a mut mpsc::Sender<Result<StreamEvent, LlmError>>,
    emitted: bool,
}

impl Sink<'_> {
    async fn send(&mut self, event: StreamEvent) -> Result<(), LlmError> {
        self.emitted = true;
        self.notify(event).await
    }

    /// Pass on an event that is not part of the answer (it does not make a
    /// later retry need a `Restart`).
    async fn notify(&mut self, event: StreamEvent) -> Result<(), LlmError> {
        self.tx
            .send(Ok(event))
            .await
            .map_err(|_| LlmError::Cancelled)
    }
}

/// Deltas equivalent to a whole answer, for servers that did not stream.
pub(crate) fn deltas_of(content: &[ContentBlock]) -> Vec<StreamEvent> {
    let mut out = Vec::new();
    let mut index = 0;
    for block in content {
        match block {
            ContentBlock::Text { text } if !text.is_empty() => {
                out.push(StreamEvent::TextDelta(text.clone()));
            }
            ContentBlock::ToolCall(call) => {
                out.push(StreamEvent::ToolCallStart {
                    index,
                    id: call.id.clone(),
                    name: call.name.clone(),
                });
                out.push(StreamEvent::ToolCallDelta {
                    index,
                    fragment: call.arguments.to_string(),
                });
                index += 1;
            }
            _ => {}
        }
    }
    out
}

/// An error and its sources, joined: reqwest's own message alone ("error sending
/// request") does not say *why*.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A temperature as JSON. `f32` widened to `f64` prints as `0.20000000298023224`;
/// going through its shortest decimal form sends `0.2`, as the user wrote it.
pub fn temperature_json(t: f32) -> Value {
    t.to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(Value::Null, Value::Number)
}

/// FNV-1a: a tiny, stable hash (std's hashers are randomly seeded per process).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_in_the_usual_shapes() {
        assert_eq!(
            generic_error_message(
                br#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens too big"}}"#
            )
            .as_deref(),
            Some("max_tokens too big (invalid_request_error)")
        );
        assert_eq!(
            generic_error_message(br#"{"error":{"message":"bad","type":"","code":null}}"#)
                .as_deref(),
            Some("bad")
        );
        assert_eq!(
            generic_error_message(
                br#"[{"error":{"code":400,"message":"no","status":"INVALID_ARGUMENT"}}]"#
            )
            .as_deref(),
            Some("no (INVALID_ARGUMENT)")
        );
        assert_eq!(
            generic_error_message(br#"{"error":"plain"}"#).as_deref(),
            Some("plain")
        );
        assert_eq!(generic_error_message(b"<html>"), None);
    }

    #[test]
    fn arguments_parse_or_explain() {
        assert_eq!(
            parse_arguments("t", "1", " ").unwrap(),
            serde_json::json!({})
        );
        let e = parse_arguments("t", "1", "{\"a\":").unwrap_err();
        assert!(matches!(e, DecodeError::ToolArguments { .. }));
    }

    #[test]
    fn settings_debug_hides_the_key() {
        let s = ProviderSettings {
            name: "openai".into(),
            model: "m".into(),
            api_key: Some("sk-very-secret-key".into()),
            base_url: "http://127.0.0.1:1".into(),
            max_tokens: None,
            temperature: None,
            pricing: Pricing::default(),
            options: HttpOptions::default(),
        };
        assert!(!format!("{s:?}").contains("sk-very-secret-key"));
    }
}
