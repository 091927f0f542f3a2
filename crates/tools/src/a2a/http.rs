//! The A2A client's HTTP: one connection per URL the policy judged, pinned
//! to the addresses it approved, JSON-RPC posts, server-sent events.
//!
//! Every URL is judged before a byte leaves: [`Gate::check_url`] (the web
//! rules: `[web_fetch]`'s hosts, the SSRF guard, an agentrc declaration's
//! hosts), then the addresses its name resolves to ([`Gate::check_addrs`]),
//! then the connection is pinned to exactly those (no second lookup can
//! rebind the name), proxies ignored and redirects not followed — the same
//! way `web_fetch` goes out.
//!
//! What this is not: the protocol. It knows JSON-RPC's envelope and SSE's
//! framing, not what a task is.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde_json::Value;
use url::Url;

use crate::Denial;
use crate::policy::Gate;
use agentfile_wire::a2a::{JsonRpcRequest, JsonRpcResponse, VERSION_HEADER};

const USER_AGENT: &str = concat!("agentfile/", env!("CARGO_PKG_VERSION"));

/// Most bytes read of one reply (a card, a JSON-RPC answer, one SSE event).
pub(super) const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;

/// What went wrong talking to the remote agent, in the words the model (or
/// the step's error) reads.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("cannot resolve `{host}`: {reason}")]
    Resolve { host: String, reason: String },
    #[error("`{url}` has no host")]
    NoHost { url: String },
    #[error("cannot build an HTTP client: {0}")]
    Client(String),
    #[error("{what} `{url}` failed: {reason}")]
    Request {
        what: &'static str,
        url: String,
        reason: String,
    },
    #[error("{what} `{url}` answered {status}{hint}: {body}")]
    Status {
        what: &'static str,
        url: String,
        status: u16,
        hint: String,
        body: String,
    },
    #[error("{what} `{url}`: the reply is larger than {max} bytes")]
    TooLarge {
        what: &'static str,
        url: String,
        max: usize,
    },
    #[error("{what} `{url}`: the reply is not what A2A sends: {reason}")]
    Malformed {
        what: &'static str,
        url: String,
        reason: String,
    },
    #[error("the remote agent answered {method} with error {code}: {message}")]
    Rpc {
        method: String,
        code: i64,
        message: String,
    },
    #[error("{0}")]
    Remote(String),
}

/// A URL refused by the policy, or a call that went wrong.
#[derive(Debug)]
pub enum Failure {
    Denied(Denial),
    Error(CallError),
}

impl From<Denial> for Failure {
    fn from(d: Denial) -> Failure {
        Failure::Denied(d)
    }
}

impl From<CallError> for Failure {
    fn from(e: CallError) -> Failure {
        Failure::Error(e)
    }
}

/// A bearer token, never printed.
#[derive(Clone)]
pub struct Token(pub(super) String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// One judged URL with a client pinned to its approved addresses.
#[derive(Clone, Debug)]
pub struct Http {
    pub url: Url,
    client: reqwest::Client,
    /// Sent as `A2A-Version`.
    version: &'static str,
    token: Option<Token>,
}

/// Judge `url` by the web rules and its addresses, and build a client that
/// connects to exactly those addresses.
pub async fn open(
    gate: &Gate,
    url: &Url,
    version: &'static str,
    token: Option<Token>,
    timeout: Duration,
) -> Result<Http, Failure> {
    let verdict = gate.check_url(url)?;
    let port = url.port_or_known_default().unwrap_or(80);
    let addrs: Vec<SocketAddr> = match url.host() {
        Some(url::Host::Ipv4(a)) => vec![SocketAddr::new(IpAddr::V4(a), port)],
        Some(url::Host::Ipv6(a)) => vec![SocketAddr::new(IpAddr::V6(a), port)],
        Some(url::Host::Domain(d)) => tokio::net::lookup_host((d.trim_end_matches('.'), port))
            .await
            .map_err(|e| CallError::Resolve {
                host: verdict.host.clone(),
                reason: e.to_string(),
            })?
            .collect(),
        None => {
            return Err(CallError::NoHost {
                url: url.to_string(),
            }
            .into());
        }
    };
    let ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
    gate.check_addrs(&verdict, &ips)?;
    agentfile_llm::install_tls();
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(timeout.min(Duration::from_secs(30)))
        .user_agent(USER_AGENT);
    if let Some(url::Host::Domain(d)) = url.host() {
        builder = builder.resolve_to_addrs(d, &addrs);
    }
    let client = builder
        .build()
        .map_err(|e| CallError::Client(error_chain(&e)))?;
    Ok(Http {
        url: url.clone(),
        client,
        version,
        token,
    })
}

impl Http {
    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut r = self
            .client
            .request(method, self.url.clone())
            .header(VERSION_HEADER, self.version);
        if let Some(t) = &self.token {
            r = r.bearer_auth(&t.0);
        }
        r
    }

    /// `GET` the URL as JSON (the agent card).
    pub async fn get_json(&self, what: &'static str) -> Result<Value, CallError> {
        let resp = self
            .request(reqwest::Method::GET)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| self.failed(what, &e))?;
        let body = self.body(what, resp).await?;
        serde_json::from_slice(&body).map_err(|e| self.malformed(what, e.to_string()))
    }

    /// One JSON-RPC call; its `result`, or the error it answered with.
    pub async fn call(&self, method: &str, params: Value, id: u64) -> Result<Value, CallError> {
        let what = "A2A call to";
        let req = JsonRpcRequest::new(id, method, params);
        let resp = self
            .request(reqwest::Method::POST)
            .header(reqwest::header::ACCEPT, "application/json")
            .json(&req)
            .send()
            .await
            .map_err(|e| self.failed(what, &e))?;
        let body = self.body(what, resp).await?;
        let reply: JsonRpcResponse =
            serde_json::from_slice(&body).map_err(|e| self.malformed(what, e.to_string()))?;
        result_of(method, reply).map_err(|e| match e {
            Unanswered::Error(e) => e,
            Unanswered::Empty => self.malformed(what, "neither `result` nor `error`".to_owned()),
        })
    }

    /// A JSON-RPC call answered with server-sent events: each event's
    /// `result` goes to `each` until it says stop (`false`) or the stream
    /// ends. Returns whether `each` stopped it.
    pub async fn stream(
        &self,
        method: &str,
        params: Value,
        id: u64,
        mut each: impl FnMut(Value) -> bool,
    ) -> Result<bool, CallError> {
        let what = "A2A stream from";
        let req = JsonRpcRequest::new(id, method, params);
        let mut resp = self
            .request(reqwest::Method::POST)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(&req)
            .send()
            .await
            .map_err(|e| self.failed(what, &e))?;
        if !resp.status().is_success() {
            return Err(self.status_error(what, resp).await);
        }
        let mut sse = SseLines::default();
        loop {
            let chunk = match resp.chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => return Ok(false),
                Err(e) => return Err(self.failed(what, &e)),
            };
            for data in sse.push(&chunk) {
                let data = data.map_err(|max| CallError::TooLarge {
                    what,
                    url: self.url.to_string(),
                    max,
                })?;
                let reply: JsonRpcResponse = serde_json::from_str(&data)
                    .map_err(|e| self.malformed(what, format!("an event is not JSON-RPC: {e}")))?;
                let result = result_of(method, reply).map_err(|e| match e {
                    Unanswered::Error(e) => e,
                    Unanswered::Empty => {
                        self.malformed(what, "an event has neither `result` nor `error`".into())
                    }
                })?;
                if !each(result) {
                    return Ok(true);
                }
            }
        }
    }

    async fn body(
        &self,
        what: &'static str,
        resp: reqwest::Response,
    ) -> Result<Vec<u8>, CallError> {
        if !resp.status().is_success() {
            return Err(self.status_error(what, resp).await);
        }
        read_capped(resp, MAX_REPLY_BYTES)
            .await
            .map_err(|e| match e {
                Some(e) => self.failed(what, &e),
                None => CallError::TooLarge {
                    what,
                    url: self.url.to_string(),
                    max: MAX_REPLY_BYTES,
                },
            })
    }

    async fn status_error(&self, what: &'static str, resp: reqwest::Response) -> CallError {
        let status = resp.status().as_u16();
        let hint = match (status, &self.token) {
            (401 | 403, None) => {
                " (the agent wants credentials: name the variable holding its token in the tool's `token_env`)"
            }
            (401 | 403, Some(_)) => " (the token from the tool's `token_env` was not accepted)",
            _ => "",
        }
        .to_owned();
        let body = read_capped(resp, 2048).await.unwrap_or_default();
        CallError::Status {
            what,
            url: self.url.to_string(),
            status,
            hint,
            body: agentfile_config::text::truncate(&String::from_utf8_lossy(&body), 500),
        }
    }

    fn failed(&self, what: &'static str, e: &reqwest::Error) -> CallError {
        CallError::Request {
            what,
            url: self.url.to_string(),
            reason: error_chain(e),
        }
    }

    fn malformed(&self, what: &'static str, reason: String) -> CallError {
        CallError::Malformed {
            what,
            url: self.url.to_string(),
            reason,
        }
    }
}

enum Unanswered {
    Error(CallError),
    Empty,
}

fn result_of(method: &str, reply: JsonRpcResponse) -> Result<Value, Unanswered> {
    if let Some(e) = reply.error {
        return Err(Unanswered::Error(CallError::Rpc {
            method: method.to_owned(),
            code: e.code,
            message: e.message,
        }));
    }
    reply.result.ok_or(Unanswered::Empty)
}

/// The body, up to `cap` bytes; `Err(None)` when it is larger.
async fn read_capped(
    mut resp: reqwest::Response,
    cap: usize,
) -> Result<Vec<u8>, Option<reqwest::Error>> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(Some)? {
        if body.len() + chunk.len() > cap {
            return Err(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

/// Server-sent events cut from a byte stream: the `data:` of each event,
/// its lines joined by `\n` (comments, `event:`, `id:` and `retry:` lines
/// read and left). An event past [`MAX_REPLY_BYTES`] is `Err(max)`.
#[derive(Default)]
pub(super) struct SseLines {
    pending: Vec<u8>,
    data: Option<String>,
}

impl SseLines {
    pub(super) fn push(&mut self, chunk: &[u8]) -> Vec<Result<String, usize>> {
        self.pending.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if let Some(d) = self.data.take() {
                    out.push(Ok(d));
                }
                continue;
            }
            if let Some(v) = line.strip_prefix("data:") {
                let v = v.strip_prefix(' ').unwrap_or(v);
                match &mut self.data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(v);
                    }
                    None => self.data = Some(v.to_owned()),
                }
            }
            if self
                .data
                .as_ref()
                .is_some_and(|d| d.len() > MAX_REPLY_BYTES)
            {
                self.data = None;
                out.push(Err(MAX_REPLY_BYTES));
            }
        }
        if self.pending.len() > MAX_REPLY_BYTES {
            self.pending.clear();
            out.push(Err(MAX_REPLY_BYTES));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_cut_where_a_blank_line_ends_them() {
        let mut s = SseLines::default();
        assert!(s.push(b": keep-alive\n\ndata: {\"a\"").is_empty());
        let got = s.push(b":1}\r\nevent: x\r\ndata: two\r\n\r\ndata:3\n\n");
        let got: Vec<String> = got.into_iter().map(Result::unwrap).collect();
        assert_eq!(got, ["{\"a\":1}\ntwo", "3"]);
    }
}
