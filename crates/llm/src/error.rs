//! Everything that can go wrong talking to a model, as one error type.
//!
//! Each variant names the provider and what went wrong in words a user can act on;
//! an HTTP failure carries the status and the provider's *own* message (not a
//! generic "bad request"). [`LlmError::is_retryable`] is the single place that
//! decides which failures are worth another attempt. No variant ever holds an API
//! key: messages that came from the wire are passed through [`redact`] first.

use std::path::PathBuf;
use std::time::Duration;

/// Which wait ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutPhase {
    /// Opening the TCP/TLS connection.
    Connect,
    /// From sending the request to the response headers.
    FirstByte,
    /// Between two chunks of the response body.
    Idle,
    /// The whole exchange, request to last byte: a provider that keeps sending
    /// a trickle never trips the idle timeout, so this one bounds it.
    Total,
}

impl std::fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeoutPhase::Connect => "the connection",
            TimeoutPhase::FirstByte => "the first byte of the response",
            TimeoutPhase::Idle => "the next chunk of the response",
            TimeoutPhase::Total => "the whole response",
        })
    }
}

/// A failed model call, or a provider that cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The provider answered with an HTTP error status.
    #[error("{provider}: HTTP {status}: {message}")]
    Http {
        provider: String,
        status: u16,
        /// The provider's own error message (or the start of the body when it gave none).
        message: String,
        /// How long the provider asked us to wait (`Retry-After`), if it said.
        retry_after: Option<Duration>,
    },
    /// The provider reported an error inside an otherwise successful stream
    /// (Anthropic's `error` event, an OpenAI chunk with `error`).
    #[error("{provider}: {kind}: {message}")]
    Api {
        provider: String,
        /// The provider's error type (`overloaded_error`, `server_error`, …).
        kind: String,
        message: String,
        retryable: bool,
    },
    /// The connection could not be made (refused, DNS, TLS) or broke before a response.
    #[error("{provider}: cannot reach {url}: {message}")]
    Connect {
        provider: String,
        url: String,
        message: String,
    },
    /// A configured timeout ran out.
    #[error("{provider}: timed out after {after:?} waiting for {phase}")]
    Timeout {
        provider: String,
        phase: TimeoutPhase,
        after: Duration,
    },
    /// The response stopped before it was complete (connection closed mid-body, or
    /// the stream ended without its final event).
    #[error("{provider}: the response was cut off: {message}")]
    StreamCut { provider: String, message: String },
    /// The provider sent something that is not its documented format.
    #[error("{provider}: unexpected response: {message}")]
    Protocol { provider: String, message: String },
    /// The model produced tool-call arguments that are not valid JSON. Not retried
    /// automatically; the caller may retry the call or report it to the model.
    #[error(
        "{provider}: the model's arguments for tool `{tool}` (call {id}) are not valid JSON: {message}; received: {raw}"
    )]
    InvalidToolArguments {
        provider: String,
        tool: String,
        id: String,
        message: String,
        /// The argument text as received (truncated).
        raw: String,
    },
    /// A retryable failure that kept failing until the retry budget ran out.
    #[error("{source} (gave up after {attempts} attempts)")]
    RetriesExhausted {
        attempts: u32,
        #[source]
        source: Box<LlmError>,
    },
    /// The caller cancelled the call.
    #[error("the model call was cancelled")]
    Cancelled,
    /// Neither the config nor a flag names a provider.
    #[error("no provider configured; set llm.provider to one of: {known}")]
    NoProvider { known: String },
    /// The config names a provider we do not know.
    #[error("unknown LLM provider `{name}`; use one of: {known}")]
    UnknownProvider { name: String, known: String },
    /// The API key variable is not set.
    #[error(
        "{provider}: the API key is not set; export {var}=<your key> (or name another variable in llm.api_key_env)"
    )]
    MissingKey { provider: String, var: String },
    /// The configuration is incomplete or invalid for this provider.
    #[error("{provider}: {message}")]
    Config { provider: String, message: String },
    /// The provider exists but cannot be used in this mode (e.g. `mcp-sampling` outside `agentfile mcp`).
    #[error("{provider}: {message}")]
    Unavailable { provider: String, message: String },
    /// Replay could not answer: the cassette does not hold this request.
    #[error("replay: {message}")]
    Replay { message: String },
    /// A cassette could not be read or written.
    #[error("cassette {path}: {message}")]
    Cassette { path: PathBuf, message: String },
}

impl LlmError {
    /// Whether another attempt of the same call may succeed: rate limits, server
    /// errors, network failures, timeouts and cut streams. A 4xx other than 408/429
    /// means the request itself is wrong and is never retried.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Http { status, .. } => is_retryable_status(*status),
            LlmError::Api { retryable, .. } => *retryable,
            LlmError::Connect { .. } | LlmError::Timeout { .. } | LlmError::StreamCut { .. } => {
                true
            }
            _ => false,
        }
    }

    /// The HTTP status behind this error, looking through [`LlmError::RetriesExhausted`].
    pub fn status(&self) -> Option<u16> {
        match self.root() {
            LlmError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The error itself, or for [`LlmError::RetriesExhausted`] the last failure.
    pub fn root(&self) -> &LlmError {
        match self {
            LlmError::RetriesExhausted { source, .. } => source.root(),
            other => other,
        }
    }

    /// How long the provider asked us to wait before retrying, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// 408 Request Timeout, 429 Too Many Requests and every 5xx (Anthropic's 529
/// "overloaded" included) are worth retrying.
pub fn is_retryable_status(status: u16) -> bool {
    status == 408 || status == 429 || (500..=599).contains(&status)
}

/// `text` with every occurrence of `secret` replaced, so a provider that echoes the
/// key back in an error message cannot leak it into logs, events or cassettes.
pub fn redact(text: &str, secret: Option<&str>) -> String {
    match secret {
        // Very short "keys" would redact ordinary words; real keys are long.
        Some(s) if s.len() >= 8 => text.replace(s, "[redacted]"),
        _ => text.to_owned(),
    }
}

pub(crate) use agentfile_config::text::truncate;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_statuses() {
        for s in [408, 429, 500, 502, 503, 529] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 422] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }

    #[test]
    fn exhausted_reports_the_last_failure() {
        let e = LlmError::RetriesExhausted {
            attempts: 3,
            source: Box::new(LlmError::Http {
                provider: "openai".into(),
                status: 503,
                message: "busy".into(),
                retry_after: None,
            }),
        };
        assert_eq!(e.status(), Some(503));
        assert!(!e.is_retryable());
        assert_eq!(
            e.to_string(),
            "openai: HTTP 503: busy (gave up after 3 attempts)"
        );
    }

    #[test]
    fn redaction_and_truncation() {
        assert_eq!(
            redact("bad key sk-123456789", Some("sk-123456789")),
            "bad key [redacted]"
        );
        assert_eq!(redact("a b", Some("a")), "a b");
        assert_eq!(truncate("héllo", 2), "h… [5 more bytes]");
    }
}
