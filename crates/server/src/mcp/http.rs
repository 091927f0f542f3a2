//! `agentfile mcp --http ADDR`: the MCP server over the Streamable HTTP
//! transport, at `/mcp`, for many clients at once.
//!
//! The handler is the one stdio uses ([`McpServer`]); rmcp's
//! [`StreamableHttpService`] does the HTTP framing, SSE streams and sessions
//! (`Mcp-Session-Id`, one [`McpServer`] per session, made by a factory that
//! gives each its own [`Client`] and shares the process's one [`Gateway`],
//! workflow catalog and watcher). In front of it, every request passes, in
//! this order:
//!
//! 1. the path: `/ui/` is the web view ([`crate::ui`]) and `/a2a` the A2A
//!    agent ([`crate::a2a`]), each checking the same tokens and origins
//!    itself; anything else but `/mcp` is 404;
//! 2. `Origin`: a request that carries one must come from this server's own
//!    origin (`http://127.0.0.1:PORT`, `http://localhost:PORT`,
//!    `http://[::1]:PORT`, the bound address) or one listed in `[mcp]
//!    allowed_origins`, else 403. Requests without `Origin` (every non-browser
//!    client) pass. This, with rmcp's `Host` check on a loopback bind, is the
//!    defence against DNS rebinding;
//! 3. the bearer token: with `AGENTFILE_MCP_TOKEN` set (one token, or several
//!    separated by commas, one per client), `Authorization: Bearer <token>`
//!    must name one of them, else 401 with `WWW-Authenticate: Bearer` (its
//!    `resource_metadata` the RFC 9728 document, [`super::protected`], served
//!    without a token) and nothing runs. Tokens are compared as SHA-256 digests, in constant time,
//!    against every configured token. Without a token the server binds
//!    loopback addresses only (anything else is refused at start, exit 2);
//! 4. the bounds: a principal may have at most `--max-requests` POSTs in
//!    flight (429 past it); a body is at most [`limits::MAX_LINE`] (413). A
//!    `subscriptions/listen` stream stays open for as long as the client
//!    listens, so it leaves the in-flight count once it is known to be one
//!    and counts against its own bound instead, `[mcp] max_streams` per
//!    principal (default [`limits::MAX_STREAMS`], 64; 429 naming that bound
//!    past it): idle streams never lock out
//!    the calls of the same token (or of every loopback client, who share
//!    one principal without tokens).
//!
//! A POST in a session (the revisions before 2026-07-28) whose answer is an
//! SSE stream is read to its end by [`super::resume`], whoever listens, and
//! a `GET` with `Last-Event-ID` of such a stream is answered from there; the
//! request holds its place in flight until rmcp's stream ends.
//!
//! A client gets `[mcp] read_timeout` (default 10 s) to send a request's
//! headers (hyper's header-read timer; a kept-alive connection idle that long
//! is closed too) and again its body (else 408 and the connection closes), so
//! one that trickles or stalls holds no connection or task for ever.
//!
//! The [`Principal`] (the token's digest, or "loopback") goes into the HTTP
//! request's extensions, where [`Principal::of`] finds it for the handlers.
//!
//! `--provider mcp-sampling` is refused at start (exit 2): the gateway has one
//! provider for all clients, and which client's model would answer is not
//! defined. SIGTERM or SIGINT stops accepting, interrupts the runs (sessions
//! are left `interrupted`, resumable), lets the calls they held answer, closes
//! the sessions and exits 143 or 130, as on stdio.

use std::collections::HashSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::RoleServer;
use rmcp::service::Peer;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use agentfile_config::Config;

use super::principal::Principal;
use super::{
    ANSWER_GRACE, Client, ExitCode, INTERRUPT_GRACE, KEY_HINT, McpOptions, McpServer, tools,
    transport,
};
use crate::access::{Guard, InFlight};
pub use crate::auth::{TOKEN_VAR, parse_tokens};
use crate::auth::{Tokens, origin_of, own_origins};
use crate::gateway::{Gateway, GatewayOptions};
use crate::limits;

/// The path the MCP endpoint is served at.
pub const PATH: &str = "/mcp";
type HttpBody = BoxBody<Bytes, Infallible>;

/// Serve MCP over HTTP on `options.http` until SIGINT or SIGTERM.
pub async fn serve_http(options: McpOptions) -> ExitCode {
    serve_http_until(options, super::signal(), |_| {}).await
}

/// Serve MCP over HTTP on `options.http` until `stop` resolves to an exit
/// code; `bound` hears the address once listening (port 0 picks one).
pub async fn serve_http_until(
    mut options: McpOptions,
    stop: impl Future<Output = ExitCode>,
    bound: impl FnOnce(SocketAddr),
) -> ExitCode {
    let Some(addr) = options.http else {
        eprintln!("agentfile mcp: no --http address to serve");
        return 2;
    };
    if let Err(code) = check_options(&mut options, addr) {
        return code;
    }
    let config_path = options.gateway.config.clone();
    let limits = options.gateway.limits;
    let (gateway, config) = match open_engine(options.gateway) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("agentfile mcp: cannot listen on {addr}: {e}");
            return 2;
        }
    };
    let local = listener.local_addr().unwrap_or(addr);
    let reaper = gateway.clone();
    let _ = tokio::task::spawn_blocking(move || reaper.reap_orphans()).await;
    // Tasks a stopped or killed server left interrupted resume here, as on stdio.
    gateway.resume_interrupted_tasks().await;

    let (scan, catalog) = super::first_scan(&gateway, config_path);

    let ct = CancellationToken::new();
    let sessions = Arc::new(Sessions::default());
    let host = super::ToolHost::default();
    let service = mcp_service(
        Shared {
            gateway: &gateway,
            catalog: &catalog,
            sessions: &sessions,
            host: &host,
        },
        options.heartbeat,
        options.extra_tools.clone(),
        limits,
        &ct,
        local,
    );
    let ui = match web_view(&gateway, &options.tokens, &config, local, &ct) {
        Ok(u) => u,
        Err(code) => return code,
    };
    let front = Arc::new(Front {
        service,
        ui,
        a2a: crate::a2a::A2a::on_listener(
            &gateway,
            &options.tokens,
            &config,
            local,
            ct.child_token(),
        ),
        origins: own_origins(local)
            .into_iter()
            .chain(config.mcp.allowed_origins.iter().cloned())
            .collect(),
        tokens: Tokens::new(&options.tokens),
        in_flight: Arc::new(InFlight::default()),
        max_requests: limits.max_requests(),
        streams: Arc::new(InFlight::default()),
        max_streams: config.mcp.max_streams(),
        resume: super::resume::Streams::new(config.mcp.max_streams(), ct.child_token()),
        closing: CancellationToken::new(),
        v1_sessions: Mutex::default(),
        changes: host.changes().clone(),
        read_timeout: config.mcp.read_timeout(),
        // RFC 9728 metadata: only where a token is needed.
        resource: (!options.tokens.is_empty())
            .then(|| super::protected::Metadata::new(PATH, &config.mcp, local)),
    });
    relay_changes(scan, catalog, options.poll, &host, &sessions, &ct);

    eprintln!("agentfile mcp: listening on http://{local}{PATH}");
    eprintln!("agentfile mcp: web view at http://{local}/ui/");
    bound(local);

    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let code = accept_until(listener, &front, &graceful, stop).await;
    // New requests are refused from here; runs stop and are left resumable;
    // the calls that held them answer; then the sessions and streams close.
    front.closing.cancel();
    gateway.interrupt(INTERRUPT_GRACE).await;
    let _ = tokio::time::timeout(ANSWER_GRACE, front.in_flight.idle()).await;
    ct.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(2), graceful.shutdown()).await;
    code
}

/// Refuse what cannot be served over HTTP (no token off loopback, a weak
/// token, the host's model as provider), and fill in the HTTP defaults.
fn check_options(options: &mut McpOptions, addr: SocketAddr) -> Result<(), ExitCode> {
    if options.tokens.is_empty() && !addr.ip().is_loopback() {
        eprintln!(
            "agentfile mcp: refusing to serve --http {addr} without a token: \
             set {TOKEN_VAR} (clients then send `Authorization: Bearer <token>`), \
             or bind a loopback address such as 127.0.0.1:{}",
            addr.port()
        );
        return Err(2);
    }
    match crate::auth::check_token_strength(&options.tokens, addr, "agentfile mcp") {
        Ok(None) => {}
        Ok(Some(warning)) => eprintln!("{warning}"),
        Err(refusal) => {
            eprintln!("{refusal}");
            return Err(2);
        }
    }
    // One gateway serves every client: there is no one host model to sample.
    if options.gateway.provider.as_deref() == Some(super::sampling::NAME) {
        eprintln!(
            "agentfile mcp: --provider {} needs one host, so it works on stdio only; \
             drop --http, or choose a provider with an API key",
            super::sampling::NAME
        );
        return Err(2);
    }
    options.gateway.sampling = None;
    if options.gateway.key_hint.is_none() {
        options.gateway.key_hint = Some(KEY_HINT.to_owned());
    }
    Ok(())
}

/// The one gateway every client shares, and its workspace's config.
fn open_engine(options: GatewayOptions) -> Result<(Arc<Gateway>, Config), ExitCode> {
    let gateway = match Gateway::new(options) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("agentfile mcp: {e}");
            return Err(2);
        }
    };
    let config = match gateway.default_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("agentfile mcp: {}", e.message);
            return Err(2);
        }
    };
    // Multi-round-trip states sealed with the replicas' shared key, if set.
    if let Err(e) = super::mrtr::configure(&config.mcp) {
        eprintln!("agentfile mcp: {e}");
        return Err(2);
    }
    Ok((gateway, config))
}

/// What every HTTP session shares: one gateway, one catalog of workflow tools,
/// the list of sessions, the extra tools' host.
struct Shared<'a> {
    gateway: &'a Arc<Gateway>,
    catalog: &'a Arc<super::workflows::Catalog>,
    sessions: &'a Arc<Sessions>,
    host: &'a super::ToolHost,
}

/// rmcp's Streamable HTTP service: a new [`McpServer`] per session, each with
/// its own client (its peer, log level), all over one gateway.
fn mcp_service(
    shared: Shared<'_>,
    heartbeat: Duration,
    extra_tools: Option<Arc<dyn super::ExtraTools>>,
    limits: limits::Limits,
    ct: &CancellationToken,
    local: SocketAddr,
) -> StreamableHttpService<McpServer, LocalSessionManager> {
    // Task status for the listen streams that ask, read through a server of
    // its own (its client never connects).
    shared
        .host
        .changes()
        .set_tasks(Arc::new(super::tasks::Feed::new(McpServer {
            gateway: shared.gateway.clone(),
            triggers: Arc::new(crate::daemon::service::TriggerService::new(
                shared.gateway.clone(),
            )),
            client: Arc::new(Client::new(
                Arc::new(transport::Conn::new(limits)),
                heartbeat,
            )),
            catalog: shared.catalog.clone(),
            fixed_tools: false,
            extra_tools: None,
            host: shared.host.clone(),
        })));
    let factory = {
        let (gateway, catalog, sessions) = (
            shared.gateway.clone(),
            shared.catalog.clone(),
            shared.sessions.clone(),
        );
        tools::prepare_fixed();
        let triggers = Arc::new(crate::daemon::service::TriggerService::new(gateway.clone()));
        let host = shared.host.clone();
        move || {
            // Each session its own client (its peer, log level), all one gateway.
            let client = Arc::new(Client::new(
                Arc::new(transport::Conn::new(limits)),
                heartbeat,
            ));
            sessions.add(&client);
            Ok(McpServer {
                gateway: gateway.clone(),
                triggers: triggers.clone(),
                client,
                catalog: catalog.clone(),
                fixed_tools: true,
                extra_tools: extra_tools.clone(),
                host: host.clone(),
            })
        }
    };
    let mut http_config = StreamableHttpServerConfig::default()
        .with_cancellation_token(ct.child_token())
        .with_max_request_body_bytes(limits::MAX_LINE);
    if !local.ip().is_loopback() {
        // Reached by names this process cannot know (a proxy, DNS): the token
        // guards it, and a rebound browser page has no token to send.
        http_config = http_config.disable_allowed_hosts();
    }
    StreamableHttpService::new(
        factory,
        Arc::new(LocalSessionManager::default()),
        http_config,
    )
}

/// The web view served at `/ui/` beside the endpoint.
fn web_view(
    gateway: &Arc<Gateway>,
    tokens: &[String],
    config: &Config,
    local: SocketAddr,
    ct: &CancellationToken,
) -> Result<Arc<crate::ui::Ui>, ExitCode> {
    crate::ui::Ui::new(
        gateway.clone(),
        crate::ui::UiOptions {
            tokens: Tokens::new(tokens),
            allowed_origins: config.mcp.allowed_origins.clone(),
            local,
            stop: ct.child_token(),
            read_timeout: config.mcp.read_timeout(),
            rule: crate::access::Rule::of_config(config),
        },
    )
    .map_err(|e| {
        eprintln!("agentfile mcp: no randomness for the web view's CSRF tokens: {e}");
        2
    })
}

/// The scanner's changes and the extra tools' go to every session
/// (`list_changed`) and to the listen streams that asked, until `ct` stops.
fn relay_changes(
    scan: super::workflows::Scan,
    catalog: Arc<super::workflows::Catalog>,
    poll: Duration,
    host: &super::ToolHost,
    sessions: &Arc<Sessions>,
    ct: &CancellationToken,
) {
    let hub = host.changes().clone();
    tokio::spawn(scan.watch_with(catalog, poll, ct.child_token(), move || {
        hub.changed(super::listen::Change::Tools);
        std::future::ready(true)
    }));
    let (sessions, mut changes, stop) = (
        sessions.clone(),
        host.changes().subscribe(),
        ct.child_token(),
    );
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                c = changes.recv() => match c {
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        for peer in sessions.peers() {
                            tokio::spawn(async move {
                                let _ = peer.notify_tool_list_changed().await;
                            });
                        }
                    }
                    Err(_) => return,
                },
            }
        }
    });
}

/// Serve each connection `listener` accepts through `front` (watched by
/// `graceful`) until `stop` resolves; the listener closes on return.
async fn accept_until(
    listener: tokio::net::TcpListener,
    front: &Arc<Front>,
    graceful: &hyper_util::server::graceful::GracefulShutdown,
    stop: impl Future<Output = ExitCode>,
) -> ExitCode {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(front.read_timeout);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((sock, peer)) => {
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
                    });
                }
                Err(e) => {
                    // Out of descriptors and the like: pass, then try again.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            code = &mut stop => break code,
        }
    }
}

/// Every HTTP session's client, to tell them all the tool list changed.
#[derive(Default)]
struct Sessions(Mutex<Vec<Weak<Client>>>);

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Weak<Client>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn add(&self, client: &Arc<Client>) {
        let mut all = self.lock();
        all.retain(|c| c.strong_count() > 0);
        all.push(Arc::downgrade(client));
    }

    /// The peers of the sessions still open that have initialized.
    fn peers(&self) -> Vec<Peer<RoleServer>> {
        let mut all = self.lock();
        all.retain(|c| c.strong_count() > 0);
        all.iter()
            .filter_map(|c| c.upgrade().and_then(|c| c.peer()))
            .filter(|p| !p.is_transport_closed())
            .collect()
    }
}

/// What every request passes before rmcp sees it (see the module doc).
struct Front {
    service: StreamableHttpService<McpServer, LocalSessionManager>,
    /// The web view, at `/ui/` (it checks its own auth).
    ui: Arc<crate::ui::Ui>,
    /// The A2A agent, at `/a2a` and its card (it checks its own auth).
    a2a: Arc<crate::a2a::A2a>,
    origins: HashSet<String>,
    tokens: Tokens,
    in_flight: Arc<InFlight>,
    max_requests: usize,
    /// Open `subscriptions/listen` streams, per principal.
    streams: Arc<InFlight>,
    max_streams: usize,
    /// The response streams of session POSTs, kept for `Last-Event-ID`.
    resume: Arc<super::resume::Streams>,
    closing: CancellationToken,
    /// The sessions (`Mcp-Session-Id`) whose client declared 2025-11-25
    /// tasks at `initialize` ([`super::tasks_v1`]).
    v1_sessions: Mutex<HashSet<String>>,
    /// The list changes `subscriptions/listen` streams carry.
    changes: super::listen::Hub,
    /// The most a client may take to send a request's headers (hyper's
    /// `header_read_timeout`, also the idle time of a kept-alive
    /// connection), and again its body (`[mcp] read_timeout`).
    read_timeout: Duration,
    /// The protected-resource metadata, when tokens are set.
    resource: Option<super::protected::Metadata>,
}

impl Front {
    async fn handle(&self, mut req: Request<Incoming>) -> Response<HttpBody> {
        if crate::ui::Ui::owns(req.uri().path()) {
            return self.ui.handle(req).await;
        }
        if crate::a2a::A2a::owns(req.uri().path()) {
            return self.a2a.handle(req).await;
        }
        if let Some(meta) = &self.resource
            && meta.owns(req.uri().path())
        {
            // Public: how to authenticate is what a client without a token asks.
            return meta
                .respond(req.method(), req.headers())
                .map(|b| Full::new(Bytes::from(b)).boxed());
        }
        if req.uri().path() != PATH {
            return text(StatusCode::NOT_FOUND, "Not Found: the MCP endpoint is /mcp");
        }
        if let Some(origin) = req.headers().get(header::ORIGIN)
            && !origin_of(origin).is_some_and(|o| self.origins.contains(&o))
        {
            return text(
                StatusCode::FORBIDDEN,
                &format!(
                    "Forbidden: Origin {} is not allowed here; add it to `[mcp] allowed_origins` in the config",
                    origin.to_str().unwrap_or("(not text)")
                ),
            );
        }
        let principal = match self.authenticate(req.headers()) {
            Ok(p) => p,
            Err(response) => return response,
        };
        if self.closing.is_cancelled() {
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service Unavailable: the server is shutting down",
            );
        }
        let mut guard = if req.method() == Method::POST {
            match self.in_flight.enter(&principal, self.max_requests) {
                Some(g) => Some(g),
                None => return too_many(self.max_requests),
            }
        } else {
            None
        };
        req.extensions_mut().insert(principal.clone());
        let response = if req.method() == Method::POST {
            match self.post(req, &principal).await {
                Ok(Posted::Answer(r)) => r,
                Ok(Posted::Stream(r, stream)) => {
                    // A listen stream holds its own place, not a request's.
                    guard = Some(stream);
                    r
                }
                Ok(Posted::Resumable(r, session, disconnect)) => {
                    // In flight until rmcp's stream ends, whoever reads it.
                    return self.resume.adopt(r, session, principal, guard, disconnect);
                }
                Err(r) => return r,
            }
        } else if req.method() == Method::GET
            && let Some(resumed) = self.resume.resume(req.headers(), &principal)
        {
            resumed
        } else {
            if req.method() == Method::DELETE
                && let Some(id) = session_id(req.headers())
            {
                self.v1().remove(&id);
                self.resume.forget_session(&id);
            }
            self.service.handle(req).await
        };
        match guard {
            // In flight until its body (the SSE stream of its answer) ends.
            Some(guard) => response.map(|inner| {
                Tracked {
                    inner,
                    _guard: guard,
                }
                .boxed()
            }),
            None => response,
        }
    }

    fn v1(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.v1_sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A POST, its body read (at most [`limits::MAX_LINE`]) and passed through
    /// the 2025-11-25 tasks shim ([`super::tasks_v1`]) before rmcp parses it.
    async fn post(
        &self,
        req: Request<Incoming>,
        who: &Principal,
    ) -> Result<Posted, Response<HttpBody>> {
        use http_body_util::Limited;
        let (parts, body) = req.into_parts();
        let read = tokio::time::timeout(
            self.read_timeout,
            Limited::new(body, limits::MAX_LINE).collect(),
        );
        let bytes = match read.await {
            Ok(Ok(c)) => c.to_bytes(),
            Err(_) => {
                // A client that trickles its body holds nothing for longer.
                let mut r = text(
                    StatusCode::REQUEST_TIMEOUT,
                    &format!(
                        "Request Timeout: the body did not arrive within {}",
                        humantime::format_duration(self.read_timeout)
                    ),
                );
                r.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                return Err(r);
            }
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                return Err(text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!(
                        "Payload Too Large: a request is at most {} bytes",
                        limits::MAX_LINE
                    ),
                ));
            }
            Ok(Err(e)) => {
                return Err(text(
                    StatusCode::BAD_REQUEST,
                    &format!("Bad Request: cannot read the body: {e}"),
                ));
            }
        };
        match self.listen(&bytes, who) {
            Some(Listened::Stream(listen)) => {
                let Some(stream) = self.streams.enter(who, self.max_streams) else {
                    return Err(too_many_streams(self.max_streams));
                };
                return Ok(Posted::Stream(listen, stream));
            }
            Some(Listened::Refused(r)) => return Ok(Posted::Answer(r)),
            None => {}
        }
        let v1 = session_id(&parts.headers).is_some_and(|id| self.v1().contains(&id));
        let (shimmed, found) = super::tasks_v1::inbound_bytes(&bytes, v1);
        let bytes = shimmed.map_or(bytes, Bytes::from);
        let resumable = super::resume::resumable(&parts.headers, &bytes);
        let disconnect = super::resume::Disconnect::default();
        let mut parts = parts;
        if resumable.is_some() {
            parts.extensions.insert(disconnect.clone());
        }
        let response = self
            .service
            .handle(Request::from_parts(parts, Full::new(bytes)))
            .await;
        if let Some(session) = resumable
            && is_event_stream(&response)
        {
            return Ok(Posted::Resumable(response, session, disconnect));
        }
        if found != super::tasks_v1::Inbound::Initialize || !response.status().is_success() {
            return Ok(Posted::Answer(response));
        }
        // A v1 client's `initialize`: remember its session, and advertise
        // tasks in the reply (one message, JSON or a short SSE stream).
        if let Some(id) = session_id(response.headers()) {
            let mut all = self.v1();
            if all.len() >= MAX_V1_SESSIONS {
                all.clear();
            }
            all.insert(id);
        }
        let (mut parts, body) = response.into_parts();
        let Ok(Ok(collected)) = tokio::time::timeout(Duration::from_secs(30), body.collect()).await
        else {
            return Ok(Posted::Answer(text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error: the initialize reply did not end",
            )));
        };
        let body = collected.to_bytes();
        let body = super::tasks_v1::advertise_body(&body).map_or(body, Bytes::from);
        parts.headers.remove(header::CONTENT_LENGTH);
        Ok(Posted::Answer(Response::from_parts(
            parts,
            Full::new(body).boxed(),
        )))
    }

    /// A `subscriptions/listen` request's response: an SSE stream that
    /// opens with the acknowledgement and carries the notifications it asked
    /// for until the client goes or the server stops (or the JSON-RPC error
    /// that refuses it). `None` for any other body.
    fn listen(&self, body: &[u8], who: &Principal) -> Option<Listened> {
        use super::listen;
        let needle = listen::METHOD.as_bytes();
        if !body.windows(needle.len()).any(|w| w == needle) {
            return None;
        }
        let msg: serde_json::Value = serde_json::from_slice(body).ok()?;
        if msg["method"] != listen::METHOD || msg.get("id").is_none() {
            return None;
        }
        let messages = match listen::open(&msg, &self.changes, who.clone(), self.closing.clone()) {
            listen::Opened::Stream(s) => s,
            listen::Opened::Refused(error) => {
                let mut r = Response::new(Full::new(Bytes::from(error.to_string())).boxed());
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                return Some(Listened::Refused(r));
            }
        };
        let frames = futures::StreamExt::map(messages, |v| {
            Ok::<_, Infallible>(Frame::data(Bytes::from(format!(
                "event: message\ndata: {v}\n\n"
            ))))
        });
        let mut response = Response::new(http_body_util::StreamBody::new(frames).boxed());
        let h = response.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        Some(Listened::Stream(response))
    }

    /// The principal a request's bearer token names, or the 401 to answer.
    #[allow(clippy::result_large_err)] // the error is the response itself
    fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Response<HttpBody>> {
        if self.tokens.is_empty() {
            return Ok(Principal::loopback());
        }
        // The challenge points at the protected-resource metadata.
        let challenge = |error: Option<&str>| match &self.resource {
            Some(meta) => meta.challenge(headers, error),
            None => HeaderValue::from_static("Bearer realm=\"agentfile\""),
        };
        let Some(token) = Tokens::presented(headers) else {
            return Err(unauthorized(
                challenge(None),
                "Unauthorized: send `Authorization: Bearer <token>` with a token from AGENTFILE_MCP_TOKEN",
            ));
        };
        if self.tokens.accepts(token) {
            Ok(Principal::token(token))
        } else {
            Err(unauthorized(
                challenge(Some("invalid_token")),
                "Unauthorized: the bearer token is not one this server accepts",
            ))
        }
    }
}

/// What a POST became: an answer, a listen stream and its place among the
/// principal's streams, or a session's SSE answer that may be resumed.
enum Posted {
    Answer(Response<HttpBody>),
    Stream(Response<HttpBody>, Guard),
    Resumable(Response<HttpBody>, String, super::resume::Disconnect),
}

/// A 200 whose body is an SSE stream.
fn is_event_stream(response: &Response<HttpBody>) -> bool {
    response.status() == StatusCode::OK
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// A `subscriptions/listen` POST: its stream, or the error that refuses it.
enum Listened {
    Stream(Response<HttpBody>),
    Refused(Response<HttpBody>),
}

/// Sessions remembered as 2025-11-25 task clients; past it the memory is
/// dropped (those clients then see tasks no more until they initialize again).
const MAX_V1_SESSIONS: usize = 10_000;

/// The `Mcp-Session-Id` of a request or response.
fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn text(status: StatusCode, body: &str) -> Response<HttpBody> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_owned())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn unauthorized(challenge: HeaderValue, body: &str) -> Response<HttpBody> {
    let mut r = text(StatusCode::UNAUTHORIZED, body);
    r.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
    r
}

/// 429 past the in-flight bound: over HTTP it is per principal (a token,
/// or every loopback client together where no token is set), not per
/// connection as on stdio.
fn too_many(max: usize) -> Response<HttpBody> {
    too_many_with(limits::limit_error(
        "requests_in_flight",
        max,
        format!(
            "too many requests in flight for this client (at most {max} per token, or for all \
             loopback clients together when no token is set; `--max-requests`); wait for some \
             replies, then send it again"
        ),
    ))
}

/// 429 past the bound of open `subscriptions/listen` streams.
fn too_many_streams(max: usize) -> Response<HttpBody> {
    too_many_with(limits::too_many_streams(max))
}

/// 429 with `error` as the JSON-RPC error stdio answers past a bound.
fn too_many_with(error: agentfile_wire::rpc::RpcError) -> Response<HttpBody> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": error,
    });
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *r.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// A response body that holds its request's place in flight until it ends.
struct Tracked {
    inner: HttpBody,
    _guard: Guard,
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
