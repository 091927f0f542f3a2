//! LLM providers: one small trait, implemented on the real wire formats.
//!
//! What this crate is for: turning a provider-neutral [`ChatRequest`] into a call
//! to Anthropic's Messages API, OpenAI's Chat Completions (which also serves
//! OpenRouter, Ollama's `/v1` and any compatible server) or Google's Gemini
//! `generateContent`, and the answer back into a [`ChatResponse`] — streaming or
//! not, with tool calls, usage, latency and an estimated cost. Around that: retries
//! with backoff and `Retry-After`, timeouts, cancellation, JSON Schema cleaning per
//! provider, recording and replaying cassettes, and a loopback fake server that
//! speaks all three formats so everything above can be tested offline.
//!
//! What it deliberately is not: an agent. It makes one model call at a time and
//! knows nothing of goals, tools' behaviour, policy, sessions or events; the
//! executor decides what to send and what to do with the answer. It never reads a
//! config file either: it is handed an [`LlmConfig`](agentfile_config::LlmConfig) and
//! an environment lookup, and reads the API key only from the variable named there.
//!
//! # Layout
//!
//! - [`types`]: the request/response/stream types everything else uses.
//! - [`error`]: [`LlmError`], with [`LlmError::is_retryable`].
//! - [`http`]: the one HTTP driver (retries, timeouts, cancellation, cost) shared by
//!   the wire formats [`anthropic`], [`openai`] and [`gemini`], which only translate.
//! - [`sse`], [`retry`], [`schema`], [`pricing`]: the pieces the driver and the wire
//!   formats are built from, each testable alone.
//! - [`replay`]: a recording wrapper around any provider, and a provider that
//!   answers from a recorded cassette.
//! - [`factory`]: builds the configured provider, failing early and clearly.
//! - [`fake`]: the loopback fake server (also the `fake-provider` binary).
//!
//! # Invariants
//!
//! - Nothing that came from the wire is `unwrap`ped: garbage is an [`LlmError`]
//!   naming the provider and what was wrong.
//! - The API key is sent only as a header; it is never logged, never in an error
//!   message (provider messages are redacted), never in a cassette.
//! - Cancelling the token drops the in-flight HTTP request and returns
//!   [`LlmError::Cancelled`] promptly, also while waiting to retry.
//! - A stream cut part-way is retried as a whole call; the caller is told with
//!   [`StreamEvent::Restart`] to discard the partial deltas.

pub mod anthropic;
pub mod error;
pub mod factory;
pub mod fake;
pub mod gemini;
pub mod http;
pub mod openai;
pub mod pricing;
pub mod replay;
pub mod retry;
pub mod schema;
pub mod sse;
pub mod types;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
pub use tokio_util::sync::CancellationToken;

pub use error::{LlmError, TimeoutPhase};
pub use factory::{ProviderOptions, provider_for, provider_from_config, provider_from_config_with};
pub use http::{HttpOptions, HttpProvider, ProviderSettings, install_tls};
pub use pricing::Pricing;
pub use replay::{Cassette, Recorder, ReplayProvider, request_digests};
pub use retry::RetryPolicy;
pub use types::{
    ChatRequest, ChatResponse, ContentBlock, Message, Role, StopReason, StreamEvent, ToolCall,
    ToolDef, ToolResult, Usage,
};

/// A model behind some API. Implementations are cheap to share (`Arc<dyn Provider>`)
/// and safe to call concurrently.
///
/// Both calls are cancellable: when `cancel` fires, the in-flight request is
/// dropped and the call ends with [`LlmError::Cancelled`]. Retries happen inside
/// the call; what comes out is the final answer or the final error.
pub trait Provider: Send + Sync {
    /// The provider's name as in the config (`anthropic`, `openrouter`, `replay`, …).
    fn name(&self) -> &str;

    /// The model calls go to when the request does not name one.
    fn model(&self) -> &str;

    /// Where calls go, for the user to see (`https://api.anthropic.com`, a
    /// cassette's path); `None` when there is nothing useful to say.
    fn endpoint(&self) -> Option<String> {
        None
    }

    /// One complete answer.
    fn chat(
        &self,
        request: ChatRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<ChatResponse, LlmError>>;

    /// The answer as it is produced: deltas, then [`StreamEvent::Done`] with the
    /// assembled [`ChatResponse`]. A failure is the stream's last item.
    fn stream(
        &self,
        request: ChatRequest,
        cancel: CancellationToken,
    ) -> BoxStream<'_, Result<StreamEvent, LlmError>>;
}

/// Drain a stream and return its final answer, ignoring the deltas. Handy for
/// callers (and tests) that want streaming transport but not incremental output.
pub async fn collect_stream(
    mut stream: BoxStream<'_, Result<StreamEvent, LlmError>>,
) -> Result<ChatResponse, LlmError> {
    use futures::StreamExt;
    while let Some(item) = stream.next().await {
        if let StreamEvent::Done(response) = item? {
            return Ok(response);
        }
    }
    Err(LlmError::Protocol {
        provider: "stream".to_owned(),
        message: "the stream ended without a final answer".to_owned(),
    })
}
