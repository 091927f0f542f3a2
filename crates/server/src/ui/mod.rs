//! The web view (CONTRACT §17): the session browser of a store, served by
//! `agentfile ui` and at `/ui/` on the listeners of `mcp --http` and the
//! daemon.
//!
//! What it is: a few hand-written pages embedded in the binary
//! ([`assets`]), a JSON API over the [`Gateway`] ([`api`]), a live stream of
//! a session's events as server-sent events ([`sse`]), both sending an
//! event as the same row of the log ([`rows`]), and the two pictures
//! computed here rather than in the page: the plan's graph laid out
//! ([`graph`]) and the timeline's lanes ([`timeline`]). Every action
//! (approve, signal, cancel, resume) is the gateway's own operation, the one
//! JSON-RPC and MCP call.
//!
//! What it is not: a second way to run anything, or a place event text is
//! ever markup. Model and tool text travels as JSON strings and the page
//! only ever sets it as text; the Content-Security-Policy (scripts from
//! `/ui/assets/` only, Trusted Types with no policy) makes a slip fail
//! loudly rather than run.
//!
//! Every request passes, in order ([`Ui::handle`]):
//! 1. with no token configured (a loopback listener), `Host` must be a
//!    loopback name at this port (DNS rebinding), else 403;
//! 2. a request that carries `Origin` must come from this server's own
//!    origin or `[mcp] allowed_origins`, else 403;
//! 3. auth, as §14: no token, loopback only and no login; with tokens, the
//!    token as `Authorization: Bearer`, or a login form that sets an
//!    `HttpOnly; SameSite=Strict` cookie naming a server-side login (never
//!    the token), `Secure` too off loopback or behind TLS. Failed logins are
//!    throttled per client address ([`Throttle`]): past a few, every login
//!    from there (the right token too) waits a doubling delay (429 with
//!    `Retry-After`), so guessing is slow however fast the client;
//! 4. a state-changing request made with the cookie or on loopback must
//!    send the page's CSRF token in `X-Agentfile-CSRF` (a header, never the
//!    URL; a form field for the login and logout forms), compared in
//!    constant time. Bearer requests need none: a browser never adds the
//!    header on its own.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::access::{Principal, Rule};
use crate::auth::{self, Tokens};
use crate::gateway::Gateway;

mod api;
mod assets;
pub mod graph;
mod rows;
mod sse;
pub mod timeline;

/// Where the web view is served.
pub const PREFIX: &str = "/ui";

/// A response body: whole, or a stream of server-sent events.
pub type Body = BoxBody<Bytes, Infallible>;

/// The cookie naming a login.
const COOKIE: &str = "af_ui";
/// How long a login lasts.
const LOGIN_TTL: Duration = Duration::from_secs(12 * 3600);
/// Logins kept at most; past it the oldest go.
const MAX_LOGINS: usize = 10_000;
/// Live streams open at once; more get 503.
const MAX_STREAMS: usize = 64;
/// The largest request body (an action's JSON, the login form).
const MAX_BODY: usize = 256 * 1024;
/// The header state-changing requests carry the CSRF token in.
pub const CSRF_HEADER: &str = "x-agentfile-csrf";
/// Failed logins a client address may make before it waits.
const FREE_FAILURES: u32 = 5;
/// The wait after the first failure past [`FREE_FAILURES`]; it doubles with
/// each further one, up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_secs(2);
const MAX_WAIT: Duration = Duration::from_secs(15 * 60);
/// Client addresses whose failures are remembered at most; past it the
/// stalest go.
const MAX_THROTTLED: usize = 10_000;

/// The address of the client a request came from, put into the request's
/// extensions by the listener that accepted it (the login throttle's key).
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub SocketAddr);

/// How the web view is reached.
pub struct UiOptions {
    pub tokens: Tokens,
    /// Origins besides this server's own (`[mcp] allowed_origins`).
    pub allowed_origins: Vec<String>,
    /// The bound address.
    pub local: SocketAddr,
    /// Ends the live streams when the server stops.
    pub stop: CancellationToken,
    /// The most a client may take to send a request's body (`[mcp]
    /// read_timeout`); past it, 408.
    pub read_timeout: Duration,
    /// Who sees which sessions (`[ui] shared`; [`crate::access`]).
    pub rule: Rule,
}

/// The web view of one gateway's store.
pub struct Ui {
    gateway: Arc<Gateway>,
    tokens: Tokens,
    origins: HashSet<String>,
    local: SocketAddr,
    /// The CSRF token of loopback pages (no login to hang one on).
    loopback_csrf: String,
    /// The login form's CSRF token.
    login_csrf: String,
    logins: Mutex<HashMap<String, Login>>,
    throttle: Mutex<Throttle>,
    /// Whether the login cookie is `Secure`: off loopback (where a browser
    /// should reach it over TLS through a proxy) or when the request came
    /// over TLS.
    secure_cookie: bool,
    streams: Arc<Semaphore>,
    stop: CancellationToken,
    plans: api::PlanCache,
    read_timeout: Duration,
    rule: Rule,
}

struct Login {
    csrf: String,
    expires: Instant,
    /// Whose token logged in: the sessions it sees are that principal's.
    principal: Principal,
}

/// How a request is allowed in, and as whom. The principal is the one MCP
/// gives the same token ([`Principal::token`], or "loopback" without
/// tokens), so a task started over MCP is seen and steered here by the
/// token that started it and by no other ([`crate::access`]).
enum Access {
    Loopback,
    Bearer(Principal),
    Cookie { csrf: String, principal: Principal },
}

impl Access {
    fn principal(&self) -> Principal {
        match self {
            Access::Loopback => Principal::loopback(),
            Access::Bearer(p) | Access::Cookie { principal: p, .. } => p.clone(),
        }
    }
}

impl Ui {
    /// A web view of `engine`'s store. Fails only when the system has no
    /// randomness to make the CSRF tokens with.
    pub fn new(gateway: Arc<Gateway>, options: UiOptions) -> std::io::Result<Arc<Ui>> {
        Ok(Arc::new(Ui {
            gateway,
            tokens: options.tokens,
            origins: auth::own_origins(options.local)
                .into_iter()
                .chain(options.allowed_origins)
                .collect(),
            local: options.local,
            loopback_csrf: random_hex()?,
            login_csrf: random_hex()?,
            logins: Mutex::default(),
            throttle: Mutex::default(),
            secure_cookie: !options.local.ip().is_loopback(),
            streams: Arc::new(Semaphore::new(MAX_STREAMS)),
            stop: options.stop,
            plans: api::PlanCache::default(),
            read_timeout: options.read_timeout,
            rule: options.rule,
        }))
    }

    /// Whether `path` is the web view's.
    pub fn owns(path: &str) -> bool {
        path == PREFIX || path.starts_with("/ui/")
    }

    /// Answer one request under [`PREFIX`].
    pub async fn handle<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let mut response = self.route(req).await;
        secure(response.headers_mut());
        response
    }

    async fn route<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let headers = req.headers();
        if self.tokens.is_empty() && !auth::loopback_host(headers, self.local) {
            return text(
                StatusCode::FORBIDDEN,
                "Forbidden: this web view answers only to 127.0.0.1, localhost or [::1] \
                 at its port (set AGENTFILE_MCP_TOKEN to serve other names)",
            );
        }
        if let Some(origin) = headers.get(header::ORIGIN)
            && !auth::origin_of(origin).is_some_and(|o| self.origins.contains(&o))
        {
            return text(
                StatusCode::FORBIDDEN,
                "Forbidden: this Origin is not allowed here; add it to `[mcp] allowed_origins`",
            );
        }
        let path = req.uri().path().to_owned();
        let rest = path.strip_prefix(PREFIX).unwrap_or("");
        let method = req.method().clone();
        match (&method, rest) {
            (&Method::GET, "") => redirect(StatusCode::PERMANENT_REDIRECT, "/ui/", None),
            (&Method::GET, "/login") => self.login_page(),
            (&Method::POST, "/login") => self.login(req).await,
            (&Method::POST, "/logout") => self.logout(req).await,
            (&Method::GET | &Method::HEAD, r) if r.starts_with("/assets/") => {
                assets::serve(&r["/assets/".len()..], req.headers())
            }
            (&Method::GET, r) if r == "/" || is_session_page(r) => match self.access(&req) {
                Ok(_) => assets::page("app.html"),
                Err(AuthError::Missing) => redirect(StatusCode::SEE_OTHER, "/ui/login", None),
                Err(AuthError::Refused(r)) => r,
            },
            (_, r) if r.starts_with("/api/") => {
                let access = match self.access(&req) {
                    Ok(a) => a,
                    Err(AuthError::Missing) => {
                        return json_error(
                            StatusCode::UNAUTHORIZED,
                            "log in at /ui/login, or send `Authorization: Bearer <token>`",
                        );
                    }
                    Err(AuthError::Refused(r)) => return r,
                };
                let csrf = self.csrf_of(&access);
                if method != Method::GET
                    && method != Method::HEAD
                    && let Some(expected) = &csrf
                {
                    let sent = req
                        .headers()
                        .get(CSRF_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("");
                    if !auth::same(sent.as_bytes(), expected.as_bytes()) {
                        return json_error(
                            StatusCode::FORBIDDEN,
                            "the CSRF token is missing or wrong: send the page's token \
                             (GET /ui/api/me) in the X-Agentfile-CSRF header",
                        );
                    }
                }
                let who = access.principal();
                let me = api::Me {
                    auth: match access {
                        Access::Loopback => "loopback",
                        _ => "token",
                    },
                    csrf: csrf.unwrap_or_default(),
                };
                api::route(self, req, &r["/api".len()..], me, &who).await
            }
            _ => text(
                StatusCode::NOT_FOUND,
                "Not Found: the web view is at /ui/ (sessions at /ui/sessions/<id>)",
            ),
        }
    }

    /// How the request is allowed in, if it is.
    #[allow(clippy::result_large_err)] // the refusal is the response itself
    fn access<B>(&self, req: &Request<B>) -> Result<Access, AuthError> {
        if self.tokens.is_empty() {
            return Ok(Access::Loopback);
        }
        if let Some(token) = Tokens::presented(req.headers()) {
            return if self.tokens.accepts(token) {
                Ok(Access::Bearer(Principal::token(token)))
            } else {
                Err(AuthError::Refused(json_error(
                    StatusCode::UNAUTHORIZED,
                    "the bearer token is not one this server accepts",
                )))
            };
        }
        let Some(sid) = cookie(req.headers(), COOKIE) else {
            return Err(AuthError::Missing);
        };
        let mut logins = self.logins();
        match logins.get(sid) {
            Some(l) if l.expires > Instant::now() => Ok(Access::Cookie {
                csrf: l.csrf.clone(),
                principal: l.principal.clone(),
            }),
            Some(_) => {
                logins.remove(sid);
                Err(AuthError::Missing)
            }
            None => Err(AuthError::Missing),
        }
    }

    fn csrf_of(&self, access: &Access) -> Option<String> {
        match access {
            Access::Loopback => Some(self.loopback_csrf.clone()),
            Access::Cookie { csrf, .. } => Some(csrf.clone()),
            Access::Bearer(_) => None,
        }
    }

    fn logins(&self) -> std::sync::MutexGuard<'_, HashMap<String, Login>> {
        self.logins.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn throttle(&self) -> std::sync::MutexGuard<'_, Throttle> {
        self.throttle.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn login_page(&self) -> Response<Body> {
        if self.tokens.is_empty() {
            return redirect(StatusCode::SEE_OTHER, "/ui/", None);
        }
        let page = assets::text_of("login.html").replace("{{csrf}}", &self.login_csrf);
        let mut r = Response::new(Full::new(Bytes::from(page)).boxed());
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        r
    }

    async fn login<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if self.tokens.is_empty() {
            return redirect(StatusCode::SEE_OTHER, "/ui/", None);
        }
        let client = client_key(&req);
        let tls = over_tls(req.headers());
        // Before the token is looked at: while a client waits, the right
        // token is refused too, or the wait would not slow guessing.
        if let Some(wait) = self.throttle().waiting(client, Instant::now()) {
            return too_many_logins(wait);
        }
        let form = match read_body(req, MAX_BODY, self.read_timeout).await {
            Ok(b) => form_fields(&b),
            Err(r) => return r,
        };
        let field = |k: &str| form.get(k).map(String::as_str).unwrap_or("");
        if !auth::same(field("csrf").as_bytes(), self.login_csrf.as_bytes()) {
            return text(
                StatusCode::FORBIDDEN,
                "Forbidden: the login form's token is missing or stale; reload /ui/login",
            );
        }
        if !self.tokens.accepts(field("token")) {
            self.throttle().failed(client, Instant::now());
            return redirect(StatusCode::SEE_OTHER, "/ui/login?failed=1", None);
        }
        self.throttle().forget(client);
        let (sid, csrf) = match (random_hex(), random_hex()) {
            (Ok(s), Ok(c)) => (s, c),
            _ => {
                return text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Internal Server Error: no randomness for a login",
                );
            }
        };
        let mut logins = self.logins();
        let now = Instant::now();
        logins.retain(|_, l| l.expires > now);
        if logins.len() >= MAX_LOGINS
            && let Some(oldest) = logins
                .iter()
                .min_by_key(|(_, l)| l.expires)
                .map(|(k, _)| k.clone())
        {
            logins.remove(&oldest);
        }
        logins.insert(
            sid.clone(),
            Login {
                csrf,
                expires: now + LOGIN_TTL,
                principal: Principal::token(field("token")),
            },
        );
        let secure = if self.secure_cookie || tls {
            "; Secure"
        } else {
            ""
        };
        let cookie = format!(
            "{COOKIE}={sid}; HttpOnly; SameSite=Strict; Path=/ui; Max-Age={}{secure}",
            LOGIN_TTL.as_secs()
        );
        redirect(StatusCode::SEE_OTHER, "/ui/", Some(cookie))
    }

    async fn logout<B>(&self, req: Request<B>) -> Response<Body>
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let sid = cookie(req.headers(), COOKIE).map(str::to_owned);
        let form = match read_body(req, MAX_BODY, self.read_timeout).await {
            Ok(b) => form_fields(&b),
            Err(r) => return r,
        };
        if let Some(sid) = sid {
            let mut logins = self.logins();
            let matches = logins.get(&sid).is_some_and(|l| {
                auth::same(
                    form.get("csrf").map_or(&b""[..], |c| c.as_bytes()),
                    l.csrf.as_bytes(),
                )
            });
            if !matches {
                return text(
                    StatusCode::FORBIDDEN,
                    "Forbidden: the logout form's token is missing or wrong",
                );
            }
            logins.remove(&sid);
        }
        let clear = format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/ui; Max-Age=0");
        redirect(StatusCode::SEE_OTHER, "/ui/login", Some(clear))
    }
}

/// Failed logins by client address.
#[derive(Default)]
struct Throttle(HashMap<IpAddr, Failures>);

struct Failures {
    count: u32,
    last: Instant,
    until: Option<Instant>,
}

impl Throttle {
    /// How long `client` must still wait before trying again, if at all.
    fn waiting(&self, client: IpAddr, now: Instant) -> Option<Duration> {
        let until = self.0.get(&client)?.until?;
        (until > now).then(|| until - now)
    }

    /// One more failed login from `client`.
    fn failed(&mut self, client: IpAddr, now: Instant) {
        if !self.0.contains_key(&client) && self.0.len() >= MAX_THROTTLED {
            self.0
                .retain(|_, f| now.saturating_duration_since(f.last) < MAX_WAIT);
            if self.0.len() >= MAX_THROTTLED
                && let Some(stalest) = self.0.iter().min_by_key(|(_, f)| f.last).map(|(k, _)| *k)
            {
                self.0.remove(&stalest);
            }
        }
        let f = self.0.entry(client).or_insert(Failures {
            count: 0,
            last: now,
            until: None,
        });
        // A client quiet for the longest wait starts afresh.
        if now.saturating_duration_since(f.last) >= MAX_WAIT {
            f.count = 0;
        }
        f.count = f.count.saturating_add(1);
        f.last = now;
        if f.count >= FREE_FAILURES {
            let doublings = (f.count - FREE_FAILURES).min(16);
            let wait = FIRST_WAIT.saturating_mul(1 << doublings).min(MAX_WAIT);
            f.until = Some(now + wait);
        }
    }

    fn forget(&mut self, client: IpAddr) {
        self.0.remove(&client);
    }
}

/// The throttle's key for a request: its client's address (an IPv6 client
/// by its /64, which one machine usually holds whole); one shared key when
/// the listener did not say.
fn client_key<B>(req: &Request<B>) -> IpAddr {
    match req.extensions().get::<Peer>().map(|p| p.0.ip()) {
        Some(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        Some(IpAddr::V6(v6)) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        Some(ip) => ip,
        None => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    }
}

/// Whether the request reached the proxy in front of this server over TLS
/// (`X-Forwarded-Proto: https`): the cookie is then `Secure`. A client
/// that sends it itself only makes its own cookie stricter.
fn over_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

/// 429 for a client that failed to log in too often.
fn too_many_logins(wait: Duration) -> Response<Body> {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let mut r = text(
        StatusCode::TOO_MANY_REQUESTS,
        &format!(
            "Too Many Requests: too many failed logins from this address; try again in \
             {secs} s (each further failure doubles the wait, up to {} min)",
            MAX_WAIT.as_secs() / 60
        ),
    );
    if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

enum AuthError {
    /// No credentials: log in.
    Missing,
    /// Credentials refused: this response.
    Refused(Response<Body>),
}

fn is_session_page(rest: &str) -> bool {
    rest.strip_prefix("/sessions/")
        .is_some_and(agentfile_session::is_valid_id)
}

/// The headers every web view response carries.
fn secure(h: &mut HeaderMap) {
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; \
             object-src 'none'; require-trusted-types-for 'script'; trusted-types 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Not `no-referrer`: under it Chromium sends `Origin: null` with the
    // login form's POST, which the Origin check must refuse.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
}

/// A cookie's value from the request's `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The fields of an `application/x-www-form-urlencoded` body.
fn form_fields(body: &[u8]) -> HashMap<String, String> {
    url::form_urlencoded::parse(body).into_owned().collect()
}

/// 32 hex digits from the system's randomness.
fn random_hex() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A request's body, at most `max` bytes, within `within`.
#[allow(clippy::result_large_err)]
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
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(json_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("a request body is at most {max} bytes"),
        )),
        Ok(Err(e)) => Err(json_error(
            StatusCode::BAD_REQUEST,
            &format!("cannot read the body: {e}"),
        )),
        Err(_) => {
            let mut r = json_error(
                StatusCode::REQUEST_TIMEOUT,
                &format!(
                    "the body did not arrive within {}",
                    humantime::format_duration(within)
                ),
            );
            r.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            Err(r)
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

fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    let body = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    let mut r = Response::new(Full::new(Bytes::from(body)).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn json_error(status: StatusCode, message: &str) -> Response<Body> {
    json(status, &serde_json::json!({ "error": message }))
}

fn redirect(status: StatusCode, to: &'static str, cookie: Option<String>) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::new()).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static(to));
    if let Some(c) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        r.headers_mut().insert(header::SET_COOKIE, c);
    }
    r
}

/// Serve the web view alone on `listener` until `stop` is cancelled
/// (`agentfile ui`): HTTP/1.1, `read_timeout` for a request's head.
pub async fn serve(
    listener: tokio::net::TcpListener,
    ui: Arc<Ui>,
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
                Ok((sock, peer)) => {
                    let _ = sock.set_nodelay(true);
                    let ui = ui.clone();
                    let svc = hyper::service::service_fn(move |mut req: Request<hyper::body::Incoming>| {
                        let ui = ui.clone();
                        req.extensions_mut().insert(Peer(peer));
                        async move {
                            if Ui::owns(req.uri().path()) {
                                Ok::<_, Infallible>(ui.handle(req).await)
                            } else if req.uri().path() == "/" {
                                Ok(redirect(StatusCode::SEE_OTHER, "/ui/", None))
                            } else {
                                Ok(text(StatusCode::NOT_FOUND, "Not Found: the web view is at /ui/"))
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

/// What `agentfile ui` serves.
pub struct ServeOptions {
    pub gateway: crate::gateway::GatewayOptions,
    pub listen: SocketAddr,
    /// `AGENTFILE_MCP_TOKEN`'s tokens.
    pub tokens: Vec<String>,
}

/// `agentfile ui`: serve the web view of the workspace's store until `stop`
/// resolves to an exit code; `bound` hears the address once listening.
/// Runs resumed here (an approval, a signal) are interrupted at the end and
/// left resumable.
pub async fn run(
    options: ServeOptions,
    stop: impl Future<Output = i32>,
    bound: impl FnOnce(SocketAddr),
) -> i32 {
    let addr = options.listen;
    if options.tokens.is_empty() && !addr.ip().is_loopback() {
        eprintln!(
            "agentfile ui: refusing to serve {addr} without a token: set {} (then log in \
             with it, or send `Authorization: Bearer <token>`), or listen on a loopback \
             address such as 127.0.0.1:{}",
            auth::TOKEN_VAR,
            addr.port()
        );
        return 2;
    }
    match auth::check_token_strength(&options.tokens, addr, "agentfile ui") {
        Ok(None) => {}
        Ok(Some(warning)) => eprintln!("{warning}"),
        Err(refusal) => {
            eprintln!("{refusal}");
            return 2;
        }
    }
    let gateway = match Gateway::new(options.gateway) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("agentfile ui: {}", e.message);
            return 2;
        }
    };
    let config = match gateway.default_config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("agentfile ui: {}", e.message);
            return 2;
        }
    };
    if let Err(e) = gateway.store() {
        eprintln!("agentfile ui: {}", e.message);
        return 2;
    }
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("agentfile ui: cannot listen on {addr}: {e}");
            return 2;
        }
    };
    let local = listener.local_addr().unwrap_or(addr);
    let reaper = gateway.clone();
    let _ = tokio::task::spawn_blocking(move || reaper.reap_orphans()).await;
    let ct = CancellationToken::new();
    let ui = match Ui::new(
        gateway.clone(),
        UiOptions {
            tokens: Tokens::new(&options.tokens),
            allowed_origins: config.mcp.allowed_origins.clone(),
            local,
            stop: ct.child_token(),
            read_timeout: config.mcp.read_timeout(),
            rule: Rule::of_config(&config),
        },
    ) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("agentfile ui: no randomness for CSRF tokens: {e}");
            return 2;
        }
    };
    eprintln!("agentfile ui: serving http://{local}/ui/");
    bound(local);
    let server = tokio::spawn(serve(listener, ui, ct.clone(), config.mcp.read_timeout()));
    let code = stop.await;
    ct.cancel();
    gateway.interrupt(Duration::from_secs(5)).await;
    let _ = server.await;
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_logins_wait_doubling_delays_and_a_quiet_client_starts_afresh() {
        let mut t = Throttle::default();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        for _ in 1..FREE_FAILURES {
            t.failed(a, t0);
            assert_eq!(t.waiting(a, t0), None);
        }
        t.failed(a, t0);
        assert_eq!(t.waiting(a, t0), Some(FIRST_WAIT));
        assert_eq!(t.waiting(b, t0), None, "another client is not slowed");
        t.failed(a, t0);
        assert_eq!(t.waiting(a, t0), Some(FIRST_WAIT * 2));
        for _ in 0..40 {
            t.failed(a, t0);
        }
        assert_eq!(t.waiting(a, t0), Some(MAX_WAIT));
        assert_eq!(t.waiting(a, t0 + MAX_WAIT), None);
        t.failed(a, t0 + MAX_WAIT * 2);
        assert_eq!(t.waiting(a, t0 + MAX_WAIT * 2), None, "afresh");
        t.forget(a);
        assert!(t.0.is_empty());
    }

    #[test]
    fn cookies_and_forms_are_read_exactly() {
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("a=1; af_ui=abc"));
        assert_eq!(cookie(&h, "af_ui"), Some("abc"));
        assert_eq!(cookie(&h, "af"), None);
        let f = form_fields(b"token=a%2Bb+c&csrf=x");
        assert_eq!(f["token"], "a+b c");
        assert!(is_session_page("/sessions/abc-1") && !is_session_page("/sessions/../x"));
    }
}
