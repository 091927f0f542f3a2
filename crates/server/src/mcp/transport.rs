//! Newline-delimited JSON-RPC on stdin/stdout for the MCP server, as an rmcp
//! [`Transport`].
//!
//! rmcp ships a stdio transport; this one exists for three things it does not do:
//!
//! - **A reply is never lost to a closed stdin.** When its input ends, rmcp's
//!   service loop stops reading notifications from handlers, waits at most
//!   5 s for the replies still in flight, then cancels every handler (see
//!   `serve_inner` in rmcp's `service.rs`: `QuitReason::Closed` →
//!   `drain_timeout` of 5 s → `serve_loop_ct.cancel()`). A handler that sends a
//!   progress notification after that point waits forever for the loop to
//!   write it, so a client that pipes a `tools/call` and closes its end at once
//!   gets no answer for any run longer than 5 s. Here the end of input is held
//!   back until every request read has been answered (or cancelled by the
//!   client, or a signal stops the server); only then does `receive` report it.
//!   [`Conn::input_closed`] fires at the real end of input, so work that needs
//!   the client to answer (sampling, elicitation) fails at once instead of
//!   waiting for a reply that cannot come.
//! - **Nothing before the lifecycle starts closes the connection.** rmcp ends
//!   the session on a notification or response that arrives before
//!   `initialize` (or, for a 2026-07-28 client, before its first request with
//!   complete `_meta`); those are dropped here (and logged on stderr).
//!   `server/discover` is rmcp's to answer and starts no lifecycle.
//!
//! Malformed input is answered the JSON-RPC way: invalid JSON with `-32700`
//! and `id: null`, a well-formed message that is not a valid MCP message with
//! `-32600`/`-32602` naming the problem and carrying its `id` when it has one.
//! A line longer than [`MAX_LINE`] is answered with error `-32007` (limit
//! `request_size`) to the id found at its start, else to `id: null`.
//!
//! The connection's bounds ([`crate::limits`]) are kept here, where
//! every request passes: a request past the requests or bytes in flight is
//! answered `-32007` without reaching a handler, and a reply larger than the
//! reply limit becomes a `-32007` error to the same id. `ping` is answered
//! here at once, whatever the load.
//!
//! Writes go through one lock and are flushed per message; nothing else in the
//! process writes to stdout.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::GetMeta as _;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, ErrorCode, JsonRpcMessage,
    ProtocolVersion, RequestId,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use crate::limits::{self, Limits};
use agentfile_wire::rpc::RpcError;

/// The longest message accepted (one line).
pub const MAX_LINE: usize = limits::MAX_LINE;

/// What the transport shares with the rest of the connection.
#[derive(Default)]
pub struct Conn {
    /// Fires when stdin ends: no request or reply from the client can arrive
    /// any more.
    pub input_closed: CancellationToken,
    /// Fires on a signal: stop holding back the end of input.
    pub shutdown: CancellationToken,
    /// Requests read and not yet answered, with the length of their lines.
    pending: Mutex<Pending>,
    answered: Notify,
    pub limits: Limits,
    /// The client declared 2025-11-25 tasks at `initialize` ([`super::tasks_v1`]).
    v1_tasks: std::sync::atomic::AtomicBool,
    /// The id of that `initialize`, whose reply advertises them.
    v1_initialize: Mutex<Option<RequestId>>,
}

#[derive(Default)]
struct Pending {
    requests: HashMap<RequestId, usize>,
    bytes: usize,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

impl Conn {
    pub fn new(limits: Limits) -> Conn {
        Conn {
            limits,
            ..Conn::default()
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Requests read and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.pending().requests.len()
    }

    /// Count a request in flight, or say which bound it would break.
    fn admit(&self, id: &RequestId, len: usize) -> Result<(), RpcError> {
        let mut p = self.pending();
        let max = self.limits.max_requests();
        if p.requests.len() >= max {
            return Err(limits::too_many_requests(max));
        }
        let max_bytes = self.limits.max_request_bytes();
        if p.bytes.saturating_add(len) > max_bytes {
            return Err(limits::too_many_request_bytes(max_bytes));
        }
        if let Some(old) = p.requests.insert(id.clone(), len) {
            // A client reusing an id in flight: count the line once.
            p.bytes -= old;
        }
        p.bytes += len;
        Ok(())
    }

    fn settle(&self, id: &RequestId) {
        let mut p = self.pending();
        if let Some(len) = p.requests.remove(id) {
            p.bytes -= len;
            drop(p);
            self.answered.notify_waiters();
        }
    }

    /// Wait until every request read has been answered, or a shutdown.
    pub async fn idle(&self) {
        loop {
            let notified = self.answered.notified();
            tokio::pin!(notified);
            // Register before checking, so an answer in between is not missed.
            notified.as_mut().enable();
            if self.pending().is_empty() {
                return;
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = self.shutdown.cancelled() => return,
            }
        }
    }
}

type Writer = Arc<tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;

/// The MCP server's stdio transport (see the module doc).
pub struct StdioTransport {
    incoming: mpsc::Receiver<ClientJsonRpcMessage>,
    writer: Writer,
    conn: Arc<Conn>,
    reader: tokio::task::JoinHandle<()>,
}

impl StdioTransport {
    /// Serve on `read`/`write` (stdin and stdout, or pipes in tests).
    pub fn new(
        read: impl AsyncRead + Send + Unpin + 'static,
        write: impl AsyncWrite + Send + Unpin + 'static,
        conn: Arc<Conn>,
        changes: super::listen::Hub,
    ) -> StdioTransport {
        let writer: Writer = Arc::new(tokio::sync::Mutex::new(Box::new(write)));
        let (tx, incoming) = mpsc::channel(64);
        let reader = tokio::spawn(read_loop(
            BufReader::new(read),
            tx,
            writer.clone(),
            conn.clone(),
            changes,
        ));
        StdioTransport {
            incoming,
            writer,
            conn,
            reader,
        }
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

async fn write_line(writer: &Writer, message: &impl serde::Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    write_bytes(writer, &line).await
}

async fn write_bytes(writer: &Writer, line: &[u8]) -> std::io::Result<()> {
    let mut w = writer.lock().await;
    w.write_all(line).await?;
    w.flush().await
}

fn error_reply(id: Option<RequestId>, code: ErrorCode, message: String) -> Value {
    rpc_error(id, RpcError::new(i64::from(code.0), message))
}

/// An error reply; a missing id is written `"id": null`, as JSON-RPC asks of a
/// reply to a request whose id could not be read.
fn rpc_error(id: Option<RequestId>, e: RpcError) -> Value {
    let id = id.map_or(Value::Null, |id| id.into_json_value());
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": e})
}

/// Just enough of a message to route it before the full parse.
#[derive(serde::Deserialize)]
struct Probe {
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(default)]
    method: Option<String>,
}

/// Read lines until the end of input, then hold the end back until every
/// request has been answered (see the module doc).
async fn read_loop<R: AsyncRead + Unpin>(
    mut read: BufReader<R>,
    tx: mpsc::Sender<ClientJsonRpcMessage>,
    writer: Writer,
    conn: Arc<Conn>,
    changes: super::listen::Hub,
) {
    let mut initialized = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        let got = tokio::select! {
            r = limits::read_line(&mut read, &mut line) => r,
            _ = conn.shutdown.cancelled() => break,
        };
        match got {
            Ok(limits::Line::Text) => {}
            Ok(limits::Line::TooLong) => {
                let id = limits::recover_id(&line);
                let _ = write_line(
                    &writer,
                    &serde_json::json!({"jsonrpc": "2.0", "id": id, "error": limits::limit_error(
                        "request_size",
                        MAX_LINE,
                        format!(
                            "message longer than {} MiB; pass workflows by `path`, not inline",
                            MAX_LINE / (1024 * 1024)
                        ),
                    )}),
                )
                .await;
                continue;
            }
            Ok(limits::Line::Eof) => break,
            Err(e) => {
                eprintln!("agentfile mcp: cannot read standard input: {e}");
                break;
            }
        }
        let text = trim_line(&line);
        if text.is_empty() {
            continue;
        }
        // 2025-11-25 core tasks, which rmcp does not model: see `tasks_v1`.
        let v1 = conn.v1_tasks.load(std::sync::atomic::Ordering::Relaxed);
        let (shimmed, found) = super::tasks_v1::inbound_bytes(text, v1);
        let text = shimmed.as_deref().unwrap_or(text);
        if listen(text, &writer, &changes, &conn) {
            continue;
        }
        if let Some(refusal) = removed_in_2026(text) {
            // Gone from 2026-07-28: the request's own revision says so.
            let _ = write_line(&writer, &refusal).await;
            continue;
        }
        let Some(message) = decode(text, &writer).await else {
            continue;
        };
        match &message {
            JsonRpcMessage::Request(r) => {
                if r.request.method() == "ping" {
                    // Answered here, whatever the load: it holds nothing.
                    let pong = serde_json::json!({"jsonrpc": "2.0", "id": r.id.clone().into_json_value(), "result": {}});
                    let _ = write_line(&writer, &pong).await;
                    continue;
                }
                if let Err(e) = conn.admit(&r.id, text.len()) {
                    let _ = write_line(&writer, &rpc_error(Some(r.id.clone()), e)).await;
                    continue;
                }
                if found == super::tasks_v1::Inbound::Initialize {
                    conn.v1_tasks
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    *conn.v1_initialize.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(r.id.clone());
                }
                if r.request.method() == "initialize"
                    || (r.request.method() != "server/discover"
                        && r.request
                            .get_meta()
                            .missing_required_keys(&ProtocolVersion::V_2026_07_28)
                            .is_empty()
                        && r.request
                            .get_meta()
                            .protocol_version()
                            .is_some_and(|v| ProtocolVersion::KNOWN_VERSIONS.contains(&v)))
                {
                    // `initialize`, or a 2026-07-28 request that carries its
                    // version and capabilities: either starts the lifecycle.
                    initialized = true;
                }
            }
            JsonRpcMessage::Notification(n) => {
                if !initialized {
                    // rmcp would end the session here; the lifecycle says to wait.
                    eprintln!("agentfile mcp: ignored a notification received before `initialize`");
                    continue;
                }
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    // rmcp drops the reply of a cancelled request: do not wait for it.
                    conn.settle(id);
                }
            }
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) if !initialized => {
                eprintln!("agentfile mcp: ignored a response received before `initialize`");
                continue;
            }
            _ => {}
        }
        if tx.send(message).await.is_err() {
            // The service loop is gone.
            conn.input_closed.cancel();
            return;
        }
    }
    conn.input_closed.cancel();
    conn.idle().await;
    // Dropping `tx` is what the service loop sees as the end of input.
}

/// Methods 2026-07-28 removed: a request naming that revision gets `-32601`.
const REMOVED_IN_2026: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The `-32601` for a request that names 2026-07-28 in its `_meta` and a
/// method that revision removed; `None` for anything else.
fn removed_in_2026(text: &[u8]) -> Option<Value> {
    let named = |m: &str| text.windows(m.len()).any(|w| w == m.as_bytes());
    if !REMOVED_IN_2026.iter().any(|m| named(m)) || !named("2026-") {
        return None;
    }
    let msg: Value = serde_json::from_slice(text).ok()?;
    let method = msg["method"].as_str()?;
    if !REMOVED_IN_2026.contains(&method) || msg.get("id").is_none() {
        return None;
    }
    let version = msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str()?;
    if version < ProtocolVersion::V_2026_07_28.as_str() {
        return None;
    }
    Some(
        serde_json::json!({"jsonrpc": "2.0", "id": msg["id"], "error": {
            "code": ErrorCode::METHOD_NOT_FOUND.0,
            "message": format!("`{method}` is not part of MCP {version} (the revision this request names)")
        }}),
    )
}

/// A `subscriptions/listen` request ([`super::listen`]), served here: the
/// acknowledgement, then the notifications it asked for, tagged with its id,
/// on the one output every subscription shares, until the input ends (or
/// its refusal). `false` for any other message.
fn listen(text: &[u8], writer: &Writer, changes: &super::listen::Hub, conn: &Arc<Conn>) -> bool {
    use super::listen;
    let needle = listen::METHOD.as_bytes();
    if !text.windows(needle.len()).any(|w| w == needle) {
        return false;
    }
    let Ok(msg) = serde_json::from_slice::<Value>(text) else {
        return false;
    };
    if msg["method"] != listen::METHOD || msg.get("id").is_none() {
        return false;
    }
    // On stdio the caller is the local user, the owner of its tasks.
    let opened = listen::open(
        &msg,
        changes,
        super::principal::Principal::local(),
        conn.input_closed.clone(),
    );
    let writer = writer.clone();
    tokio::spawn(async move {
        match opened {
            listen::Opened::Refused(error) => {
                let _ = write_line(&writer, &error).await;
            }
            listen::Opened::Stream(mut messages) => {
                while let Some(m) = futures::StreamExt::next(&mut messages).await {
                    if write_line(&writer, &m).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    true
}

/// Parse one line; answer what cannot be served. `None`: nothing to deliver.
async fn decode(text: &[u8], writer: &Writer) -> Option<ClientJsonRpcMessage> {
    let probe: Probe = match serde_json::from_slice::<Value>(text) {
        Ok(v) => match serde_json::from_value::<Probe>(v) {
            Ok(p) => p,
            Err(e) => {
                let _ = write_line(
                    writer,
                    &error_reply(
                        None,
                        ErrorCode::INVALID_REQUEST,
                        format!("invalid request: {e}"),
                    ),
                )
                .await;
                return None;
            }
        },
        Err(e) => {
            let _ = write_line(
                writer,
                &error_reply(None, ErrorCode::PARSE_ERROR, format!("parse error: {e}")),
            )
            .await;
            return None;
        }
    };
    match serde_json::from_slice::<ClientJsonRpcMessage>(text) {
        // A standard method whose params do not fit lands in rmcp's catch-all
        // for custom methods, which answers "method not found": say what is
        // wrong with the params instead.
        Ok(JsonRpcMessage::Request(r))
            if matches!(r.request, ClientRequest::CustomRequest(_))
                && let Some(why) = bad_params(r.request.method(), text) =>
        {
            let _ = write_line(
                writer,
                &error_reply(Some(r.id), ErrorCode::INVALID_PARAMS, why),
            )
            .await;
            None
        }
        Ok(m) => Some(m),
        Err(e) => {
            match (probe.id, probe.method) {
                // A request we cannot read: say why, to the request.
                (Some(id), Some(method)) => {
                    let _ = write_line(
                        writer,
                        &error_reply(
                            Some(id),
                            ErrorCode::INVALID_PARAMS,
                            format!("invalid params for `{method}`: {e}"),
                        ),
                    )
                    .await;
                }
                // A reply to a request of ours that does not parse, or a
                // notification: nothing can be answered.
                _ => eprintln!("agentfile mcp: ignored a message that is not MCP: {e}"),
            }
            None
        }
    }
}

/// Why the params of a standard MCP method do not parse, or `None` when
/// `method` is not one of them.
fn bad_params(method: &str, text: &[u8]) -> Option<String> {
    use rmcp::model::{
        CallToolRequestParams, GetPromptRequestParams, InitializeRequestParams,
        PaginatedRequestParams,
    };
    fn why<T: serde::de::DeserializeOwned>(method: &str, params: Value) -> String {
        match serde_json::from_value::<T>(params) {
            Err(e) => format!("invalid params for `{method}`: {e}"),
            Ok(_) => format!("invalid request for `{method}`"),
        }
    }
    let params = serde_json::from_slice::<Value>(text)
        .ok()?
        .get("params")
        .cloned()
        .unwrap_or(Value::Null);
    Some(match method {
        "tools/call" => why::<CallToolRequestParams>(method, params),
        "prompts/get" => why::<GetPromptRequestParams>(method, params),
        "initialize" => why::<InitializeRequestParams>(method, params),
        "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list" => {
            why::<Option<PaginatedRequestParams>>(method, params)
        }
        "ping"
        | "logging/setLevel"
        | "resources/read"
        | "resources/subscribe"
        | "resources/unsubscribe"
        | "completion/complete" => {
            format!("invalid params for `{method}`")
        }
        _ => return None,
    })
}

fn trim_line(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // A UTF-8 byte order mark some Windows hosts write.
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    line.trim_ascii()
}

impl Transport<RoleServer> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        let conn = self.conn.clone();
        async move {
            let answers = match &item {
                JsonRpcMessage::Response(r) => Some(r.id.clone()),
                JsonRpcMessage::Error(e) => e.id.clone(),
                _ => None,
            };
            let max = conn.limits.max_reply();
            let v1_initialize = match &item {
                JsonRpcMessage::Response(r) => {
                    let mut slot = conn.v1_initialize.lock().unwrap_or_else(|p| p.into_inner());
                    if slot.as_ref() == Some(&r.id) {
                        slot.take()
                    } else {
                        None
                    }
                }
                _ => None,
            };
            let encoded = match v1_initialize {
                // The reply to a v1 client's `initialize`: it advertises tasks.
                Some(_) => serde_json::to_value(&item).ok().and_then(|mut v| {
                    super::tasks_v1::advertise(&mut v);
                    limits::encode_capped(&v, max)
                }),
                None => limits::encode_capped(&item, max),
            };
            let written = match encoded {
                Some(line) => write_bytes(&writer, &line).await,
                None => {
                    let id = answers.clone();
                    write_line(&writer, &rpc_error(id, limits::reply_too_large(max))).await
                }
            };
            // Settled even when the write failed: a client that is gone will
            // not read it either, and the end of input must not wait for it.
            if let Some(id) = answers {
                conn.settle(&id);
            }
            written
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        let mut w = self.writer.lock().await;
        w.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_trimmed_of_line_ends_and_bom() {
        assert_eq!(trim_line(b"{}\r\n"), b"{}");
        assert_eq!(trim_line(b"\xEF\xBB\xBF{}\n"), b"{}");
        assert_eq!(trim_line(b"  \n"), b"");
    }
}
