//! The daemon's webhook listener: `POST /hooks/<path>`, signed with an
//! HMAC-SHA256 of the body, fires the webhook trigger that serves `<path>`.
//!
//! This file is the HTTP edge only. Which trigger serves a path, how a body
//! becomes a workflow's inputs, idempotency by delivery id and the trigger's
//! fire policy all live behind [`Deliveries`], which the daemon implements.
//! What the listener keeps, for every request, in this order:
//!
//! 0. `/ui/` is the web view ([`crate::ui`]) and `/a2a` (with
//!    `/.well-known/agent-card.json`) the A2A agent ([`crate::a2a`]), both
//!    served here when the listener is a loopback address or
//!    `AGENTFILE_MCP_TOKEN` is set (each checks the tokens itself);
//! 1. the path: anything not under `/hooks/`, or a path no trigger serves, is
//!    404; a served path asked with another method than `POST` is 405;
//! 2. the size: a `Content-Length` over [`WebhookOptions::max_body`] is 413
//!    before a byte of the body is read; a streamed (chunked) body is cut at
//!    the limit, 413 too;
//! 3. the signature: `X-Agentfile-Signature: sha256=<hex>` (or GitHub's
//!    `X-Hub-Signature-256`), the HMAC-SHA256 of the raw body under the
//!    secret in the variable the trigger's `secret_env` names, read at request
//!    time, compared in constant time. Missing, malformed or wrong is 401 and
//!    nothing is delivered. A secret that is not set (or empty) refuses every
//!    delivery with 401 too, and says so in the log: a webhook never runs
//!    unsigned;
//! 4. the delivery id: `X-Agentfile-Delivery` (or `X-GitHub-Delivery`),
//!    printable ASCII of at most [`MAX_DELIVERY_ID`] bytes, else 400;
//! 5. the body: a JSON object, else 400.
//!
//! Then [`Deliveries::deliver`] runs, in its own task so that a client that
//! hangs up cannot cancel a delivery half-way, and its answer maps to the
//! response (see [`Delivered`]).
//!
//! Slow or hostile clients cannot stall the listener: hyper closes a
//! connection whose request head has not arrived within
//! [`WebhookOptions::header_read_timeout`] (idle connections included), a body
//! must arrive within [`WebhookOptions::body_read_timeout`] (408 past it),
//! connections are not kept alive after their one request, and at most
//! [`WebhookOptions::max_connections`] are served at once (past it new ones
//! wait in the kernel's backlog until one closes). Every connection is its own
//! task, so one slow client never delays another.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hmac::{KeyInit, Mac};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The webhook trigger that serves one path.
pub struct WebhookRoute {
    pub trigger: String,
    pub secret_env: String,
}

/// What [`Deliveries::deliver`] did with one delivery.
pub enum Delivered {
    Started { session_id: String },
    Duplicate { session_id: Option<String> },
    NotStarted { outcome: String, reason: String },
}

/// The daemon's side of the listener: the routes and the firing.
pub trait Deliveries: Send + Sync + 'static {
    /// The webhook trigger serving `path` (the part after `/hooks/`), if any.
    fn route(&self, path: &str) -> Option<WebhookRoute>;
    /// Fire `trigger` for one delivery: `delivery_id` (None: the listener made one up), `body` the JSON body (mapped to the workflow's inputs, checked against its input schema: Err(message) when it does not fit).
    fn deliver(
        &self,
        trigger: &str,
        delivery_id: String,
        body: serde_json::Value,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Delivered, Undelivered>> + Send>>;
}

/// Why a delivery was not taken (its body does not fit the workflow, the
/// trigger is gone): the body of the `422` the sender reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Undelivered(pub String);

/// Where webhook paths start.
pub const PATH_PREFIX: &str = "/hooks/";
/// The variable holding the secret when a trigger names none.
pub const DEFAULT_SECRET_ENV: &str = "AGENTFILE_WEBHOOK_SECRET";
/// The signature header, `sha256=<hex>`.
pub const SIGNATURE_HEADER: &str = "x-agentfile-signature";
/// GitHub's signature header, the same form; used when ours is absent.
pub const GITHUB_SIGNATURE_HEADER: &str = "x-hub-signature-256";
/// The delivery id header.
pub const DELIVERY_HEADER: &str = "x-agentfile-delivery";
/// GitHub's delivery id header; used when ours is absent.
pub const GITHUB_DELIVERY_HEADER: &str = "x-github-delivery";
/// The longest delivery id accepted, in bytes.
pub const MAX_DELIVERY_ID: usize = 200;
/// The default body limit: 1 MiB.
pub const DEFAULT_MAX_BODY: usize = 1 << 20;

/// The listener's bounds.
#[derive(Clone, Debug)]
pub struct WebhookOptions {
    /// The largest body accepted, in bytes (413 past it).
    pub max_body: usize,
    /// How long a connection may take to send its request head, from the
    /// moment it is accepted; past it hyper closes the connection.
    pub header_read_timeout: Duration,
    /// How long the body may take once the head is in (408 past it).
    pub body_read_timeout: Duration,
    /// Connections served at once; more wait in the backlog.
    pub max_connections: usize,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        WebhookOptions {
            max_body: DEFAULT_MAX_BODY,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_connections: 256,
        }
    }
}

/// How long connections in flight may take to finish once `stop` fires.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

type HmacSha256 = hmac::Hmac<sha2_011::Sha256>;

/// What the listener serves besides webhooks, where it serves them.
#[derive(Default)]
pub struct Mounts {
    /// The web view at `/ui/`.
    pub ui: Option<Arc<crate::ui::Ui>>,
    /// The A2A agent at `/a2a` and its card.
    pub a2a: Option<Arc<crate::a2a::A2a>>,
}

/// Serve webhooks on `listener` until `stop` is cancelled; then accept no
/// more, and give the requests in flight [`SHUTDOWN_GRACE`] to answer.
pub async fn serve_webhooks(
    listener: tokio::net::TcpListener,
    deliveries: Arc<dyn Deliveries>,
    options: WebhookOptions,
    mounts: Mounts,
    stop: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout)
        // One request a connection: nothing lingers idle between deliveries.
        .keep_alive(false);
    let front = Arc::new(Front {
        deliveries,
        ui: mounts.ui,
        a2a: mounts.a2a,
        options,
        stop: stop.clone(),
    });
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let slot = tokio::select! {
            _ = stop.cancelled() => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let sock = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((sock, peer)) => (sock, peer),
                Err(e) => {
                    // Out of descriptors and the like: pass, then try again.
                    tracing::warn!(error = %e, "webhooks: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let (sock, peer) = sock;
        let _ = sock.set_nodelay(true);
        let front = front.clone();
        let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            let front = front.clone();
            // The web view's login throttle keys on it.
            req.extensions_mut().insert(crate::ui::Peer(peer));
            async move { Ok::<_, Infallible>(front.handle(req).await) }
        });
        let conn = graceful.watch(http.serve_connection(TokioIo::new(sock), svc));
        tokio::spawn(async move {
            let _ = conn.await;
            drop(slot);
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown()).await;
}

/// What every request passes (see the module doc).
struct Front {
    deliveries: Arc<dyn Deliveries>,
    /// The web view at `/ui/`, where this listener serves it.
    ui: Option<Arc<crate::ui::Ui>>,
    /// The A2A agent at `/a2a`, where this listener serves it.
    a2a: Option<Arc<crate::a2a::A2a>>,
    options: WebhookOptions,
    stop: CancellationToken,
}

/// A refusal: the status and the message of its `{"error": …}` body.
struct Refusal(StatusCode, String);

impl Refusal {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Refusal(status, message.into())
    }
}

impl Front {
    async fn handle(&self, req: Request<Incoming>) -> Response<crate::ui::Body> {
        if crate::ui::Ui::owns(req.uri().path()) {
            return match &self.ui {
                Some(ui) => ui.handle(req).await,
                None => answer(
                    StatusCode::NOT_FOUND,
                    &json!({ "error": "the web view is not served on this listener: it is \
                        not a loopback address and AGENTFILE_MCP_TOKEN is not set" }),
                )
                .map(BodyExt::boxed),
            };
        }
        if crate::a2a::A2a::owns(req.uri().path())
            && let Some(a2a) = &self.a2a
        {
            return a2a.handle(req).await;
        }
        match self.accept(req).await {
            Ok(r) => r.map(BodyExt::boxed),
            Err(Refusal(status, message)) => {
                let mut r = answer(status, &json!({ "error": message }));
                if status == StatusCode::METHOD_NOT_ALLOWED {
                    r.headers_mut()
                        .insert(header::ALLOW, HeaderValue::from_static("POST"));
                }
                r.map(BodyExt::boxed)
            }
        }
    }

    async fn accept(&self, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Refusal> {
        let full = req.uri().path();
        let path = match full.strip_prefix(PATH_PREFIX) {
            Some(p) if !p.is_empty() => p.to_owned(),
            _ => {
                return Err(Refusal::new(
                    StatusCode::NOT_FOUND,
                    format!("nothing is served at {full}: webhooks are POST /hooks/<path>"),
                ));
            }
        };
        let Some(route) = self.deliveries.route(&path) else {
            return Err(Refusal::new(
                StatusCode::NOT_FOUND,
                format!("no webhook trigger serves {full}"),
            ));
        };
        if req.method() != Method::POST {
            return Err(Refusal::new(
                StatusCode::METHOD_NOT_ALLOWED,
                format!(
                    "{} {full} is not allowed: a webhook is delivered with POST",
                    req.method()
                ),
            ));
        }
        if self.stop.is_cancelled() {
            return Err(Refusal::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "the daemon is shutting down; deliver again later",
            ));
        }
        let max = self.options.max_body;
        if content_length(req.headers()).is_some_and(|n| n > max as u64) {
            return Err(too_large(max));
        }
        // Cheap refusals first: no body is read for a request that cannot pass.
        let signature = signature_of(req.headers())?;
        let secret = secret_of(&route.secret_env).ok_or_else(|| {
            tracing::warn!(
                trigger = %route.trigger,
                variable = %route.secret_env,
                "webhook delivery refused: the secret variable is not set (or empty), \
                 so the signature cannot be checked"
            );
            Refusal::new(
                StatusCode::UNAUTHORIZED,
                "the signature cannot be checked: the daemon has no secret for this webhook \
                 (its log names the variable to set)",
            )
        })?;
        let (parts, body) = req.into_parts();
        let body = self.read_body(body).await?;
        verify(&secret, &body, &signature)?;
        let delivery_id = delivery_id_of(&parts.headers)?;
        let body = json_object(&body, &parts.headers)?;
        self.deliver(route, delivery_id, body).await
    }

    /// The body, at most `max_body` bytes, within `body_read_timeout`.
    async fn read_body(&self, body: Incoming) -> Result<Bytes, Refusal> {
        let max = self.options.max_body;
        let limit = self.options.body_read_timeout;
        match tokio::time::timeout(limit, Limited::new(body, max).collect()).await {
            Err(_) => Err(Refusal::new(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the body did not arrive within {}",
                    humantime::format_duration(limit)
                ),
            )),
            Ok(Ok(collected)) => Ok(collected.to_bytes()),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large(max)),
            Ok(Err(e)) => Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                format!("cannot read the body: {e}"),
            )),
        }
    }

    async fn deliver(
        &self,
        route: WebhookRoute,
        delivery_id: Option<String>,
        body: Value,
    ) -> Result<Response<Full<Bytes>>, Refusal> {
        // Without an id from the sender there is nothing to recognise a
        // redelivery by: a digest of the body would make two genuine, equal
        // events (two identical pushes) one. So a fresh id, and no
        // idempotency, for senders that send none.
        let delivery_id =
            delivery_id.unwrap_or_else(|| format!("local-{}", agentfile_session::new_session_id()));
        // Its own task: a client hanging up drops this request's future, and
        // must not cut a delivery off between recording it and starting it.
        let delivery = self
            .deliveries
            .deliver(&route.trigger, delivery_id.clone(), body);
        let done = tokio::spawn(delivery).await.map_err(|e| {
            tracing::error!(trigger = %route.trigger, delivery_id, error = %e, "webhook delivery failed");
            Refusal::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the delivery failed inside the daemon; see its log",
            )
        })?;
        match done {
            Ok(Delivered::Started { session_id }) => {
                tracing::info!(trigger = %route.trigger, delivery_id, session_id, "webhook delivered");
                Ok(answer(
                    StatusCode::ACCEPTED,
                    &json!({ "session_id": session_id }),
                ))
            }
            Ok(Delivered::Duplicate { session_id }) => Ok(answer(
                StatusCode::OK,
                &json!({ "session_id": session_id, "duplicate": true }),
            )),
            // Accepted, and the trigger's policy (overlap, quota) decided not
            // to run: the delivery itself was fine, so 2xx; a 4xx/5xx would
            // have senders retry (GitHub marks it failed), and a retry meets
            // the same policy or, later, runs an event twice.
            Ok(Delivered::NotStarted { outcome, reason }) => Ok(answer(
                StatusCode::ACCEPTED,
                &json!({ "outcome": outcome, "reason": reason }),
            )),
            Err(Undelivered(message)) => {
                Err(Refusal::new(StatusCode::UNPROCESSABLE_ENTITY, message))
            }
        }
    }
}

fn answer(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn too_large(max: usize) -> Refusal {
    Refusal::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the body is over the limit of {max} bytes"),
    )
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The signature's 32 bytes, from our header or else GitHub's.
fn signature_of(headers: &HeaderMap) -> Result<[u8; 32], Refusal> {
    let Some((name, value)) = first_of(
        headers,
        [
            (SIGNATURE_HEADER, "X-Agentfile-Signature"),
            (GITHUB_SIGNATURE_HEADER, "X-Hub-Signature-256"),
        ],
    ) else {
        return Err(Refusal::new(
            StatusCode::UNAUTHORIZED,
            "the delivery is not signed: send X-Agentfile-Signature (or X-Hub-Signature-256): \
             sha256=<hex HMAC-SHA256 of the body>",
        ));
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().strip_prefix("sha256="))
        .and_then(decode_hex)
        .ok_or_else(|| {
            Refusal::new(
                StatusCode::UNAUTHORIZED,
                format!("{name} is malformed: expected sha256=<64 hex digits>"),
            )
        })
}

/// The first of `names` (ours before GitHub's) the request carries, as
/// (its name for messages, its value).
fn first_of<'h>(
    headers: &'h HeaderMap,
    names: [(&'static str, &'static str); 2],
) -> Option<(&'static str, &'h HeaderValue)> {
    names
        .into_iter()
        .find_map(|(name, shown)| headers.get(name).map(|v| (shown, v)))
}

fn decode_hex(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let digit = |b: u8| (b as char).to_digit(16);
        out[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
    }
    Some(out)
}

/// The secret in `variable`, read now (a rotated secret applies at once);
/// `None` when unset or empty.
fn secret_of(variable: &str) -> Option<Vec<u8>> {
    let value = std::env::var_os(variable)?;
    let bytes = value.into_encoded_bytes();
    (!bytes.is_empty()).then_some(bytes)
}

/// Check the HMAC-SHA256 of `body` under `secret`, in constant time.
fn verify(secret: &[u8], body: &[u8], signature: &[u8; 32]) -> Result<(), Refusal> {
    let Ok(mut mac) = HmacSha256::new_from_slice(secret) else {
        // HMAC takes keys of any length; kept as a refusal all the same.
        return Err(Refusal::new(
            StatusCode::UNAUTHORIZED,
            "the signature cannot be checked",
        ));
    };
    mac.update(body);
    mac.verify_slice(signature).map_err(|_| {
        Refusal::new(
            StatusCode::UNAUTHORIZED,
            "the signature does not match the body: sign the raw body with HMAC-SHA256 \
             under the webhook's secret",
        )
    })
}

/// The sender's delivery id (ours, else GitHub's), checked; `None` if it sent none.
fn delivery_id_of(headers: &HeaderMap) -> Result<Option<String>, Refusal> {
    let Some((name, value)) = first_of(
        headers,
        [
            (DELIVERY_HEADER, "X-Agentfile-Delivery"),
            (GITHUB_DELIVERY_HEADER, "X-GitHub-Delivery"),
        ],
    ) else {
        return Ok(None);
    };
    let bytes = value.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_DELIVERY_ID || !bytes.iter().all(u8::is_ascii_graphic)
    {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            format!(
                "{name} must be 1 to {MAX_DELIVERY_ID} printable ASCII characters, without spaces"
            ),
        ));
    }
    Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
}

/// The body as a JSON object.
fn json_object(body: &[u8], headers: &HeaderMap) -> Result<Value, Refusal> {
    let hint = match headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    {
        Some(t) if t.starts_with("application/x-www-form-urlencoded") => {
            " (the body is form-encoded: set the sender's content type to application/json)"
        }
        _ => "",
    };
    match serde_json::from_slice::<Value>(body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(other) => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            format!(
                "the body must be a JSON object, not {}",
                match other {
                    Value::Array(_) => "an array",
                    Value::String(_) => "a string",
                    Value::Number(_) => "a number",
                    Value::Bool(_) => "a boolean",
                    _ => "null",
                }
            ),
        )),
        Err(e) => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            format!("the body is not JSON: {e}{hint}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_signatures_decode_only_when_whole() {
        let hex = "00ff".repeat(16);
        let bytes = decode_hex(&hex).unwrap();
        assert_eq!(bytes[0], 0);
        assert_eq!(bytes[1], 0xff);
        assert_eq!(decode_hex(&hex.to_uppercase()), Some(bytes));
        assert_eq!(decode_hex(&hex[..62]), None);
        assert_eq!(decode_hex(&format!("{}zz", &hex[..62])), None);
        assert_eq!(decode_hex(&format!("{hex}00")), None);
    }

    #[test]
    fn delivery_ids_are_printable_and_bounded() {
        let mut h = HeaderMap::new();
        assert!(matches!(delivery_id_of(&h), Ok(None)));
        h.insert(GITHUB_DELIVERY_HEADER, HeaderValue::from_static("gh-1"));
        assert_eq!(delivery_id_of(&h).ok().flatten().as_deref(), Some("gh-1"));
        h.insert(DELIVERY_HEADER, HeaderValue::from_static("ours-1"));
        assert_eq!(delivery_id_of(&h).ok().flatten().as_deref(), Some("ours-1"));
        h.insert(DELIVERY_HEADER, HeaderValue::from_static("has space"));
        assert!(delivery_id_of(&h).is_err());
        let long = "a".repeat(MAX_DELIVERY_ID + 1);
        h.insert(DELIVERY_HEADER, HeaderValue::from_str(&long).unwrap());
        assert!(delivery_id_of(&h).is_err());
        let exact = "a".repeat(MAX_DELIVERY_ID);
        h.insert(DELIVERY_HEADER, HeaderValue::from_str(&exact).unwrap());
        assert!(delivery_id_of(&h).is_ok());
    }
}
