//! A2A (CONTRACT §21): each workflow of the workspace as a skill of one A2A
//! agent, served by `agentfile a2a --http ADDR` and at `/a2a` on the
//! listeners of `mcp --http` and the daemon. The binding is JSON-RPC over
//! HTTP as the official `a2a-sdk` 1.x speaks it (1.0's `SendMessage`,
//! `SendStreamingMessage`, `GetTask`, `ListTasks`, `CancelTask`,
//! `SubscribeToTask`, `GetExtendedAgentCard`), and the 0.3 generation's
//! `message/send`, `message/stream`, `tasks/get`, `tasks/cancel`,
//! `tasks/resubscribe` for older clients.
//!
//! - [`card`]: the skills (one per valid workflow, kept current) and the
//!   agent card at `/.well-known/agent-card.json` (and under `/a2a/`);
//! - [`tasks`]: a task is a session (the task id is the session id): a
//!   message starts a run through the gateway, a task's state is read from
//!   the store, an approval or a suspend is `input-required` and a message
//!   on the task answers it, and only the principal that started a task
//!   sees or cancels it;
//! - [`stream`]: a task followed as its run's events arrive (the streams,
//!   and the wait of a blocking send);
//! - [`methods`]: the JSON-RPC methods; [`reply`]: answers and errors in
//!   the caller's generation. The shapes themselves are
//!   `agentfile_wire::a2a`'s, the ones the A2A tool's client reads.
//!
//! What it is not: a second way to run anything. Every run, answer and
//! cancel is the gateway's own operation, the one MCP and JSON-RPC call,
//! and nothing about a task lives only in memory.
//!
//! Every request passes, in order ([`A2a::handle`]): with no token set (a
//! loopback listener) `Host` must be a loopback name at this port (DNS
//! rebinding); a request that carries `Origin` must come from this
//! server's own origin or `[mcp] allowed_origins` (403); with tokens set
//! (`AGENTFILE_MCP_TOKEN`), `Authorization: Bearer <token>` must name one
//! (401 with `WWW-Authenticate: Bearer`) — except for the agent card, which
//! then lists no skills to a caller without one; a body is at most
//! [`limits::MAX_LINE`] and must arrive within `[mcp] read_timeout`.

use std::collections::HashSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::access::{Guard, InFlight, Principal};
use crate::auth::{self, Tokens};
use crate::gateway::Gateway;
use crate::limits;

pub mod card;
mod methods;
mod reply;
mod stream;
pub mod tasks;

/// Where A2A clients look for the agent card (also served under [`PATH`]).
pub use agentfile_wire::a2a::CARD_PATH;

/// Where the JSON-RPC endpoint is served.
pub const PATH: &str = "/a2a";
/// Streams and blocking sends open at once; past it a stream is refused and
/// a send answers at once.
const MAX_WAITS: usize = 256;

/// A response body: whole, or a stream of server-sent events.
pub type Body = BoxBody<Bytes, Infallible>;

/// How the A2A agent is reached.
pub struct A2aOptions {
    pub tokens: Tokens,
    /// Origins besides this server's own (`[mcp] allowed_origins`).
    pub allowed_origins: Vec<String>,
    /// The bound address.
    pub local: SocketAddr,
    /// Ends the streams and the skills' rescans when the server stops.
    pub stop: CancellationToken,
    /// The most a client may take to send a request's body (`[mcp]
    /// read_timeout`).
    pub read_timeout: Duration,
    /// Streams and blocking sends open at once per principal (`[mcp]
    /// max_streams`).
    pub max_streams: usize,
    /// How often the workspace is rescanned for skills.
    pub poll: Duration,
}

/// The A2A agent of one gateway's workspace.
pub struct A2a {
    gateway: Arc<Gateway>,
    tokens: Tokens,
    origins: HashSet<String>,
    local: SocketAddr,
    catalog: Arc<card::Catalog>,
    stop: CancellationToken,
    waits: Arc<Semaphore>,
    /// The same, per principal.
    waits_of: Arc<InFlight>,
    max_streams: usize,
    read_timeout: Duration,
}

/// A stream's or a blocking send's place among those open, in all and for
/// its principal; given back when dropped.
pub struct Hold {
    _all: tokio::sync::OwnedSemaphorePermit,
    _mine: Guard,
}

impl A2a {
    /// The agent of `gateway`'s workspace; its skills are scanned now and
    /// every `options.poll` (in the background: call it inside a runtime).
    pub fn new(gateway: Arc<Gateway>, options: A2aOptions) -> Arc<A2a> {
        let root = gateway.root().to_owned();
        let config = gateway.options().config.as_ref().map(|c| {
            if c.is_absolute() {
                c.clone()
            } else {
                root.join(c)
            }
        });
        let catalog =
            card::Catalog::new(root, config, gateway.options().limits.max_source() as u64);
        catalog.watch(options.poll, options.stop.child_token());
        Arc::new(A2a {
            gateway,
            tokens: options.tokens,
            origins: auth::own_origins(options.local)
                .into_iter()
                .chain(options.allowed_origins)
                .collect(),
            local: options.local,
            catalog,
            stop: options.stop,
            waits: Arc::new(Semaphore::new(MAX_WAITS)),
            waits_of: Arc::default(),
            max_streams: options.max_streams,
            read_timeout: options.read_timeout,
        })
    }

    /// The agent on a listener of another server (`mcp --http`, the
    /// daemon's), under its tokens and `[mcp]` settings, until `stop`.
    pub fn on_listener(
        gateway: &Arc<Gateway>,
        tokens: &[String],
        config: &agentfile_config::Config,
        local: SocketAddr,
        stop: CancellationToken,
    ) -> Arc<A2a> {
        A2a::new(
            gateway.clone(),
            A2aOptions {
                tokens: Tokens::new(tokens),
                allowed_origins: config.mcp.allowed_origins.clone(),
                local,
                stop,
                read_timeout: config.mcp.read_timeout(),
                max_streams: config.mcp.max_streams(),
                poll: Duration::from_secs(3),
            },
        )
    }

    /// A place for one more stream or blocking send of `who`: `None` past
    /// [`MAX_WAITS`] in all or `[mcp] max_streams` for `who`.
    fn hold(&self, who: &Principal) -> Option<Hold> {
        let mine = self.waits_of.enter(who, self.max_streams)?;
        let all = self.waits.clone().try_acquire_owned().ok()?;
        Some(Hold {
            _all: all,
            _mine: mine,
        })
    }

    /// Whether `path` is A2A's.
    pub fn owns(path: &str) -> bool {
        path == PATH || path.starts_with("/a2a/") || path == CARD_PATH
    }

    /// Answer one request under [`PATH`] or at [`CARD_PATH`].
    pub async fn handle<B>(self: &Arc<Self>, req: Request<B>) -> Response<Body>
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let headers = req.headers();
        if self.tokens.is_empty() && !auth::loopback_host(headers, self.local) {
            return text(
                StatusCode::FORBIDDEN,
                "Forbidden: this agent answers only to 127.0.0.1, localhost or [::1] at its \
                 port (set AGENTFILE_MCP_TOKEN to serve other names)",
            );
        }
        if let Some(origin) = headers.get(header::ORIGIN)
            && !auth::origin_of(origin).is_some_and(|o| self.origins.contains(&o))
        {
            return text(
                StatusCode::FORBIDDEN,
                "Forbidden: this Origin is not allowed here; add it to `[mcp] allowed_origins` in the config",
            );
        }
        let endpoint = self.endpoint(headers);
        let path = req.uri().path();
        let card = path == CARD_PATH || path.strip_prefix(PATH) == Some(CARD_PATH);
        let method = req.method().clone();
        match (&method, path) {
            (&Method::GET | &Method::HEAD, _) if card => {
                let full = self.authenticate(req.headers()).is_ok();
                let body =
                    serde_json::to_value(self.card(&endpoint, full).await).unwrap_or_default();
                json(StatusCode::OK, &body)
            }
            (&Method::POST, PATH) => {
                let who = match self.authenticate(req.headers()) {
                    Ok(p) => p,
                    Err(r) => return r,
                };
                let version = req
                    .headers()
                    .get("a2a-version")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let body = match read_body(req, limits::MAX_LINE, self.read_timeout).await {
                    Ok(b) => b,
                    Err(r) => return r,
                };
                let call = methods::Call {
                    who,
                    version: version.as_deref(),
                    body: &body,
                    endpoint: &endpoint,
                };
                methods::call(self, call).await
            }
            (_, PATH) => {
                let mut r = text(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "Method Not Allowed: POST JSON-RPC requests to /a2a; the agent card is at \
                     /.well-known/agent-card.json",
                );
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("POST"));
                r
            }
            _ => text(
                StatusCode::NOT_FOUND,
                "Not Found: the A2A endpoint is /a2a, its card /.well-known/agent-card.json",
            ),
        }
    }

    /// The JSON-RPC endpoint's URL as the client reached this server.
    fn endpoint(&self, headers: &HeaderMap) -> String {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .filter(|h| !h.is_empty() && !h.contains(['/', ' ', '"', '\\']))
            .map_or_else(|| self.local.to_string(), str::to_owned);
        format!("{}://{host}{PATH}", scheme(headers))
    }

    /// The agent card; `full`: with the skills (the caller is admitted).
    async fn card(&self, endpoint: &str, full: bool) -> agentfile_wire::a2a::AgentCard {
        let skills = if full {
            self.catalog.skills().await
        } else {
            Arc::default()
        };
        card::card(
            &skills,
            self.gateway.root(),
            endpoint,
            !self.tokens.is_empty(),
        )
    }

    /// The principal a request's bearer token names, or the 401 to answer.
    #[allow(clippy::result_large_err)] // the refusal is the response itself
    fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Response<Body>> {
        if self.tokens.is_empty() {
            return Ok(Principal::loopback());
        }
        let refuse = |challenge: &'static str, why: &str| {
            let mut r = text(StatusCode::UNAUTHORIZED, why);
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(challenge),
            );
            r
        };
        match Tokens::presented(headers) {
            Some(token) if self.tokens.accepts(token) => Ok(Principal::token(token)),
            Some(_) => Err(refuse(
                "Bearer realm=\"agentfile\", error=\"invalid_token\"",
                "Unauthorized: the bearer token is not one this server accepts",
            )),
            None => Err(refuse(
                "Bearer realm=\"agentfile\"",
                "Unauthorized: send `Authorization: Bearer <token>` with a token from AGENTFILE_MCP_TOKEN",
            )),
        }
    }
}

fn text(status: StatusCode, body: &str) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_owned())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(value.to_string())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The scheme the client used: `https` when a proxy in front that ended TLS
/// says so (`X-Forwarded-Proto`, or `proto=` in `Forwarded`), else `http`,
/// so that the card names a URL the client can reach.
fn scheme(headers: &HeaderMap) -> &'static str {
    let said = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase)
    };
    let https = said(header::HeaderName::from_static("x-forwarded-proto"))
        .is_some_and(|v| v.split(',').next().is_some_and(|p| p.trim() == "https"))
        || said(header::FORWARDED).is_some_and(|v| {
            v.split(',').next().is_some_and(|first| {
                first.split(';').any(|pair| {
                    pair.split_once('=').is_some_and(|(k, v)| {
                        k.trim() == "proto" && v.trim().trim_matches('"') == "https"
                    })
                })
            })
        });
    if https { "https" } else { "http" }
}

/// A request's body, at most `max` bytes, within `within`.
#[allow(clippy::result_large_err)] // the refusal is the response itself
async fn read_body<B>(
    req: Request<B>,
    max: usize,
    within: Duration,
) -> Result<Bytes, Response<Body>>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limited = http_body_util::Limited::new(req.into_body(), max);
    match tokio::time::timeout(within, limited.collect()).await {
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(text(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("Payload Too Large: a request is at most {max} bytes"),
        )),
        Ok(Err(e)) => Err(text(
            StatusCode::BAD_REQUEST,
            &format!("Bad Request: cannot read the body: {e}"),
        )),
        Err(_) => {
            let mut r = text(
                StatusCode::REQUEST_TIMEOUT,
                &format!(
                    "Request Timeout: the body did not arrive within {}",
                    humantime::format_duration(within)
                ),
            );
            r.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            Err(r)
        }
    }
}

/// What `agentfile a2a` serves.
pub struct ServeOptions {
    pub gateway: crate::gateway::GatewayOptions,
    pub listen: SocketAddr,
    /// `AGENTFILE_MCP_TOKEN`'s tokens.
    pub tokens: Vec<String>,
    /// How often the workspace is rescanned for skills.
    pub poll: Duration,
}

/// `agentfile a2a --http ADDR`: serve the workspace's workflows as an A2A
/// agent until `stop` resolves to an exit code; `bound` hears the address
/// once listening. Tasks a stopped or killed server left interrupted are
/// resumed on start; the runs of this one are interrupted at the end and
/// left resumable.
pub async fn run(
    options: ServeOptions,
    stop: impl Future<Output = i32>,
    bound: impl FnOnce(SocketAddr),
) -> i32 {
    let addr = options.listen;
    if options.tokens.is_empty() && !addr.ip().is_loopback() {
        eprintln!(
            "agentfile a2a: refusing to serve --http {addr} without a token: set {} (clients \
             then send `Authorization: Bearer <token>`), or bind a loopback address such as \
             127.0.0.1:{}",
            auth::TOKEN_VAR,
            addr.port()
        );
        return 2;
    }
    match auth::check_token_strength(&options.tokens, addr, "agentfile a2a") {
        Ok(None) => {}
        Ok(Some(warning)) => eprintln!("{warning}"),
        Err(refusal) => {
            eprintln!("{refusal}");
            return 2;
        }
    }
    let opened = Gateway::new(options.gateway).and_then(|g| {
        let config = g.default_config()?;
        g.store()?;
        Ok((g, config))
    });
    let (gateway, config) = match opened {
        Ok(o) => o,
        Err(e) => {
            eprintln!("agentfile a2a: {}", e.message);
            return 2;
        }
    };
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("agentfile a2a: cannot listen on {addr}: {e}");
            return 2;
        }
    };
    let local = listener.local_addr().unwrap_or(addr);
    let reaper = gateway.clone();
    let _ = tokio::task::spawn_blocking(move || reaper.reap_orphans()).await;
    gateway.resume_interrupted_tasks().await;
    let ct = CancellationToken::new();
    let a2a = A2a::new(
        gateway.clone(),
        A2aOptions {
            tokens: Tokens::new(&options.tokens),
            allowed_origins: config.mcp.allowed_origins.clone(),
            local,
            stop: ct.child_token(),
            read_timeout: config.mcp.read_timeout(),
            max_streams: config.mcp.max_streams(),
            poll: options.poll,
        },
    );
    eprintln!(
        "agentfile a2a: serving http://{local}{PATH} (agent card at http://{local}{CARD_PATH})"
    );
    bound(local);
    let server = tokio::spawn(serve(listener, a2a, ct.clone(), config.mcp.read_timeout()));
    let code = stop.await;
    ct.cancel();
    gateway.interrupt(Duration::from_secs(5)).await;
    let _ = server.await;
    code
}

/// Serve the agent alone on `listener` until `stop` is cancelled: HTTP/1.1,
/// `read_timeout` for a request's head.
async fn serve(
    listener: tokio::net::TcpListener,
    a2a: Arc<A2a>,
    stop: CancellationToken,
    read_timeout: Duration,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(read_timeout);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((sock, _)) => {
                    let _ = sock.set_nodelay(true);
                    let a2a = a2a.clone();
                    let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let a2a = a2a.clone();
                        async move {
                            if A2a::owns(req.uri().path()) {
                                Ok::<_, Infallible>(a2a.handle(req).await)
                            } else {
                                Ok(text(
                                    StatusCode::NOT_FOUND,
                                    "Not Found: the A2A endpoint is /a2a, its card /.well-known/agent-card.json",
                                ))
                            }
                        }
                    });
                    let conn = graceful.watch(http.serve_connection(TokioIo::new(sock), svc));
                    tokio::spawn(async move {
                        let _ = conn.await;
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = stop.cancelled() => break,
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(Duration::from_secs(2), graceful.shutdown()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn the_card_says_https_only_when_a_proxy_ended_tls() {
        assert_eq!(scheme(&headers(&[])), "http");
        assert_eq!(scheme(&headers(&[("x-forwarded-proto", "https")])), "https");
        assert_eq!(
            scheme(&headers(&[("x-forwarded-proto", "HTTPS, http")])),
            "https"
        );
        assert_eq!(
            scheme(&headers(&[("x-forwarded-proto", "http, https")])),
            "http"
        );
        assert_eq!(
            scheme(&headers(&[(
                "forwarded",
                "for=192.0.2.60;proto=https;by=203.0.113.43"
            )])),
            "https"
        );
        assert_eq!(
            scheme(&headers(&[("forwarded", "proto=\"https\"")])),
            "https"
        );
        assert_eq!(
            scheme(&headers(&[("forwarded", "proto=http, proto=https")])),
            "http"
        );
        assert_eq!(scheme(&headers(&[("x-forwarded-proto", "gopher")])), "http");
    }
}
