//! `agentfile serve`: JSON-RPC 2.0 over stdio, one message per line
//! (CONTRACT §6).
//!
//! The pieces, in the order a message meets them:
//!
//! - framing ([`serve`]): stdin is read a line at a time (lines over
//!   [`MAX_LINE`] are refused whole); each line is one request, one
//!   notification, or a batch.
//! - [`Connection::handle_line`]: the JSON-RPC rules — parse error `-32700`
//!   with `id: null`, invalid request `-32600`, unknown method `-32601`, bad
//!   params `-32602` naming the field, application errors with the codes in
//!   [`agentfile_wire::rpc::code`]. Every request runs in its own task, so a
//!   `run` that waits for its outputs does not hold up the requests behind it.
//! - the trigger methods (`triggers`, `trigger_history`, `fire`, `emit`)
//!   go to a [`TriggerService`]: a daemon over this server's gateway, so the
//!   runs a `fire` or `emit` starts are followed like any other.
//! - [`Outbox`]: the only writer of stdout, a thread fed by a bounded channel.
//!   Each message is written whole, so lines never interleave; when the reader
//!   is slow the channel fills and the runs producing events wait
//!   (backpressure) instead of memory growing.
//!
//! Closing stdin stops reading, lets every accepted run finish (their replies
//! and events are still written), then exits; SIGINT/SIGTERM stop the runs and
//! leave their sessions `interrupted`.
//!
//! jsonrpsee is not used: it has no stdio transport, and what its `RpcModule`
//! would add — method dispatch — is one `match` here, while batches,
//! notifications, field-naming params errors and backpressure had to be ours.

use std::io::Write;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::Duration;

use futures::FutureExt;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, BufReader};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::daemon::service::TriggerService;
use crate::gateway::{Gateway, RunHooks};
use crate::limits::{self, Limits};
use agentfile_session::events::EventSink;
use agentfile_wire::events::Event;
use agentfile_wire::rpc::{self, RpcError, code};

/// The longest line read; longer ones are answered with a parse error.
pub const MAX_LINE: usize = limits::MAX_LINE;
/// Lines longer than this are parsed on the blocking pool, so the reader
/// goes on to the next line (a `ping`) while a big one is decoded.
const PARSE_INLINE: usize = 64 * 1024;
/// Messages waiting for stdout before producers wait.
const OUTBOX_CAPACITY: usize = 256;

/// The methods, for `-32601` hints and `rpc.discover`.
pub const METHODS: [&str; 16] = [
    "run",
    "fork",
    "replay",
    "event",
    "cancel",
    "approve",
    "signal",
    "validate",
    "inspect",
    "list",
    "sessions",
    "ping",
    "triggers",
    "trigger_history",
    "fire",
    "emit",
];

/// Serialised messages on their way to stdout, written by one thread.
#[derive(Clone)]
pub struct Outbox {
    tx: SyncSender<Vec<u8>>,
}

impl Outbox {
    /// An outbox writing to `out` on its own thread; the handle joins it once
    /// every `Outbox` clone is dropped and the last line is flushed.
    pub fn start(
        out: Box<dyn Write + Send>,
    ) -> std::io::Result<(Outbox, std::thread::JoinHandle<()>)> {
        let (tx, rx) = sync_channel::<Vec<u8>>(OUTBOX_CAPACITY);
        let handle = std::thread::Builder::new()
            .name("agentfile-stdout".into())
            .spawn(move || write_all(out, rx))?;
        Ok((Outbox { tx }, handle))
    }

    /// Queue one message. Blocks while the outbox is full: the caller is a
    /// run or a reply, and waiting is the backpressure.
    pub fn send(&self, message: &impl Serialize) {
        let mut line = match serde_json::to_vec(message) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("agentfile serve: cannot encode a message: {e}");
                return;
            }
        };
        line.push(b'\n');
        self.send_line(line);
    }

    /// Queue one encoded message, ending in a newline (see [`Outbox::send`]).
    pub fn send_line(&self, line: Vec<u8>) {
        match self.tx.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(line)) => {
                let wait = || {
                    let _ = self.tx.send(line);
                };
                // Let the runtime move other tasks off this thread while it waits.
                match tokio::runtime::Handle::try_current() {
                    Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                        tokio::task::block_in_place(wait)
                    }
                    _ => wait(),
                }
            }
            // The writer is gone (stdout closed): nobody can read it anyway.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

fn write_all(out: Box<dyn Write + Send>, rx: Receiver<Vec<u8>>) {
    let mut out = std::io::BufWriter::new(out);
    while let Ok(line) = rx.recv() {
        if out.write_all(&line).is_err() {
            return;
        }
        // Flush when nothing else is waiting, so a burst costs one write.
        let mut broken = false;
        while let Ok(more) = rx.try_recv() {
            if out.write_all(&more).is_err() {
                broken = true;
                break;
            }
        }
        if broken || out.flush().is_err() {
            return;
        }
    }
    let _ = out.flush();
}

/// One client connection: the gateway and the way back.
pub struct Connection {
    gateway: Arc<Gateway>,
    /// `triggers`, `trigger_history`, `fire`, `emit` (CONTRACT §15).
    triggers: TriggerService,
    outbox: Outbox,
    /// In-flight request handlers.
    requests: TaskTracker,
    /// Requests read but not yet accepted or refused: at end of input these are
    /// waited for before the gateway stops taking runs, so a `run` piped just
    /// before EOF still runs.
    admissions: TaskTracker,
    /// Cancelled once stdin closed and every run finished: long polls answer.
    closed: CancellationToken,
    limits: Limits,
    /// One permit per request or batch item being handled (`ping` aside).
    slots: Arc<Semaphore>,
    /// One permit per byte of the request lines being handled.
    bytes: Arc<Semaphore>,
}

/// Run a connection over `input` until it closes (or `stop` fires: a signal),
/// writing to `outbox`.
pub async fn serve(
    gateway: Arc<Gateway>,
    input: impl AsyncRead + Unpin,
    outbox: Outbox,
    stop: CancellationToken,
) {
    let limits = gateway.options().limits;
    let conn = Arc::new(Connection {
        gateway: gateway.clone(),
        triggers: TriggerService::new(gateway.clone()),
        outbox,
        requests: TaskTracker::new(),
        admissions: TaskTracker::new(),
        closed: CancellationToken::new(),
        limits,
        slots: Arc::new(Semaphore::new(limits.max_requests())),
        bytes: Arc::new(Semaphore::new(
            limits.max_request_bytes().min(Semaphore::MAX_PERMITS),
        )),
    });
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut buf = Vec::new();
    let interrupted = loop {
        buf.clear();
        let read = tokio::select! {
            r = limits::read_line(&mut reader, &mut buf) => r,
            _ = stop.cancelled() => break true,
        };
        match read {
            Ok(limits::Line::Eof) => break false,
            Ok(limits::Line::TooLong) => conn.outbox.send(&error_reply(
                limits::recover_id(&buf),
                limits::limit_error(
                    "request_size",
                    MAX_LINE,
                    format!(
                        "message longer than {} MiB; send workflows by `path`, not inline",
                        MAX_LINE / (1024 * 1024)
                    ),
                ),
            )),
            Ok(limits::Line::Text) => conn.handle_line(std::mem::take(&mut buf)),
            Err(e) => {
                eprintln!("agentfile serve: cannot read standard input: {e}");
                break false;
            }
        }
    };
    conn.admissions.close();
    if interrupted {
        gateway.interrupt(Duration::from_secs(5)).await;
    } else {
        conn.admissions.wait().await;
        gateway.drain().await;
    }
    conn.closed.cancel();
    conn.requests.close();
    conn.requests.wait().await;
}

/// A request after the JSON-RPC checks.
struct Call {
    /// `None` for a notification (no reply).
    id: Option<Value>,
    method: String,
    params: Option<Value>,
}

impl Connection {
    /// One line from the client: a message or a batch. Its bytes count against
    /// the connection's budget until it is answered.
    fn handle_line(self: &Arc<Self>, line: Vec<u8>) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let weight = u32::try_from(line.len()).unwrap_or(u32::MAX);
        let Ok(bytes) = self.bytes.clone().try_acquire_many_owned(weight) else {
            self.outbox.send(&error_reply(
                limits::recover_id(&line),
                limits::too_many_request_bytes(self.limits.max_request_bytes()),
            ));
            return;
        };
        let conn = self.clone();
        let token = self.admissions.token();
        self.requests.spawn(async move {
            let value = if line.len() <= PARSE_INLINE {
                serde_json::from_slice::<Value>(&line)
            } else {
                // Decoding megabytes takes a while: not on the async threads.
                match tokio::task::spawn_blocking(move || serde_json::from_slice::<Value>(&line))
                    .await
                {
                    Ok(v) => v,
                    Err(e) => {
                        conn.outbox.send(&error_reply(
                            Value::Null,
                            RpcError::internal(format!("internal error: cannot decode: {e}")),
                        ));
                        return;
                    }
                }
            };
            conn.handle_value(value, token).await;
            drop(bytes);
        });
    }

    async fn handle_value(
        self: &Arc<Self>,
        value: serde_json::Result<Value>,
        token: TaskTrackerToken,
    ) {
        let value = match value {
            Ok(v) => v,
            Err(e) => {
                self.outbox.send(&error_reply(
                    Value::Null,
                    RpcError::new(code::PARSE_ERROR, format!("parse error: {e}")),
                ));
                return;
            }
        };
        let max = self.limits.max_reply();
        match value {
            Value::Array(items) if items.is_empty() => self.outbox.send(&error_reply(
                Value::Null,
                RpcError::new(code::INVALID_REQUEST, "invalid request: empty batch"),
            )),
            Value::Array(items) => {
                // Each item's reply is encoded as it comes, within what is left
                // of the reply limit; an item past it gets a small error instead.
                let used = std::sync::atomic::AtomicUsize::new(2);
                let tokens: Vec<_> = items.iter().map(|_| self.admissions.token()).collect();
                drop(token);
                let replies = futures::future::join_all(items.into_iter().zip(tokens).map(
                    |(item, token)| {
                        let used = &used;
                        async move {
                            // The reply is full already: do not run the item at all.
                            if used.load(std::sync::atomic::Ordering::SeqCst) >= max {
                                let id = match &item {
                                    Value::Object(o) => match o.get("id") {
                                        None => return None,
                                        Some(id @ (Value::String(_) | Value::Number(_))) => {
                                            id.clone()
                                        }
                                        Some(_) => Value::Null,
                                    },
                                    _ => Value::Null,
                                };
                                let mut line = limits::encode_capped(
                                    &error_reply(id, limits::reply_too_large(max)),
                                    usize::MAX,
                                )
                                .unwrap_or_default();
                                line.pop();
                                return Some(line);
                            }
                            let (id, reply) = self.clone().reply_to(item, token).await?;
                            let mut line = encode_within(&reply, used, max)
                                .or_else(|| {
                                    encode_within(
                                        &error_reply(id, limits::reply_too_large(max)),
                                        used,
                                        usize::MAX,
                                    )
                                })
                                .unwrap_or_default();
                            line.pop();
                            Some(line)
                        }
                    },
                ))
                .await;
                let replies: Vec<Vec<u8>> = replies.into_iter().flatten().collect();
                // A batch of notifications gets no reply at all.
                if !replies.is_empty() {
                    let mut line = Vec::with_capacity(used.into_inner() + 1);
                    line.push(b'[');
                    for (i, r) in replies.iter().enumerate() {
                        if i > 0 {
                            line.push(b',');
                        }
                        line.extend_from_slice(r);
                    }
                    line.extend_from_slice(b"]\n");
                    self.outbox.send_line(line);
                }
            }
            single => {
                if let Some((id, reply)) = self.clone().reply_to(single, token).await {
                    match limits::encode_capped(&reply, max) {
                        Some(line) => self.outbox.send_line(line),
                        None => self
                            .outbox
                            .send(&error_reply(id, limits::reply_too_large(max))),
                    }
                }
            }
        }
    }

    /// The reply to one message and the id it answers, or `None` for a
    /// notification.
    async fn reply_to(
        self: Arc<Self>,
        message: Value,
        admission: TaskTrackerToken,
    ) -> Option<(Value, Value)> {
        let call = match check(message) {
            Ok(call) => call,
            Err((id, e)) => return Some((id.clone(), error_reply(id, e))),
        };
        let result = if call.method == "ping" {
            // Exempt from the request bounds: it holds nothing.
            rpc::params::<rpc::PingParams>("ping", call.params.clone())
                .and_then(|_| to_value(&rpc::Pong {}))
        } else {
            match self.slots.clone().try_acquire_owned() {
                Ok(slot) => self.dispatch_guarded(&call, admission, slot).await,
                Err(_) => Err(limits::too_many_requests(self.limits.max_requests())),
            }
        };
        let id = call.id?;
        Some((
            id.clone(),
            match result {
                Ok(value) => json!({"jsonrpc": "2.0", "id": id, "result": value}),
                Err(e) => error_reply(id, e),
            },
        ))
    }

    /// [`Connection::dispatch`] holding a request slot; a panic in it is an
    /// internal error reply, and the connection goes on.
    async fn dispatch_guarded(
        self: &Arc<Self>,
        call: &Call,
        admission: TaskTrackerToken,
        _slot: OwnedSemaphorePermit,
    ) -> Result<Value, RpcError> {
        match std::panic::AssertUnwindSafe(self.dispatch(call, admission))
            .catch_unwind()
            .await
        {
            Ok(r) => r,
            Err(p) => {
                let why = limits::panic_message(p.as_ref());
                eprintln!("agentfile serve: `{}` panicked: {why}", call.method);
                Err(RpcError::internal(format!(
                    "internal error: the `{}` handler panicked ({why}); please report it",
                    call.method
                )))
            }
        }
    }

    /// Answer one call. `admission` is held until the call has started any run
    /// it starts (see [`Connection::admissions`]).
    async fn dispatch(
        self: &Arc<Self>,
        call: &Call,
        admission: TaskTrackerToken,
    ) -> Result<Value, RpcError> {
        let params = call.params.clone();
        let m = call.method.as_str();
        let mut admission = Some(admission);
        if !matches!(
            m,
            "run" | "fork" | "replay" | "approve" | "signal" | "fire" | "emit"
        ) {
            admission = None;
        }
        self.owner_rule(m, params.as_ref()).await?;
        match m {
            "run" => {
                let p: rpc::RunParams = rpc::params(m, params)?;
                self.gateway.check_run_paths(&p)?;
                let wait = p.wait.unwrap_or(true);
                let live = self.gateway.submit(p, self.hooks()).await;
                drop(admission.take());
                let live = live?;
                if wait {
                    to_value(&*live.finished().await)
                } else {
                    to_value(&rpc::RunStatus {
                        session_id: live.session_id().to_owned(),
                        status: live.status(),
                    })
                }
            }
            "fork" | "replay" => {
                let (live, wait) = if m == "fork" {
                    let p: rpc::ForkParams = rpc::params(m, params)?;
                    let wait = p.wait.unwrap_or(true);
                    (self.gateway.fork(p, self.hooks()).await, wait)
                } else {
                    let p: rpc::ReplayParams = rpc::params(m, params)?;
                    let wait = p.wait.unwrap_or(true);
                    (self.gateway.replay(p, self.hooks()).await, wait)
                };
                drop(admission.take());
                let live = live?;
                if wait {
                    to_value(&*live.finished().await)
                } else {
                    to_value(&rpc::RunStatus {
                        session_id: live.session_id().to_owned(),
                        status: live.status(),
                    })
                }
            }
            "event" => {
                let p: rpc::EventParams = rpc::params(m, params)?;
                let now = rpc::EventParams {
                    wait_ms: 0,
                    ..p.clone()
                };
                let page = tokio::select! {
                    page = self.gateway.events(p) => page?,
                    // The connection is closing: answer with what there is.
                    _ = self.closed.cancelled() => self.gateway.events(now).await?,
                };
                to_value(&page)
            }
            "cancel" => to_value(&self.gateway.cancel(rpc::params(m, params)?).await?),
            "approve" => {
                let status = self
                    .gateway
                    .approve(rpc::params(m, params)?, self.hooks())
                    .await;
                drop(admission.take());
                to_value(&status?)
            }
            "signal" => {
                let status = self
                    .gateway
                    .signal(rpc::params(m, params)?, self.hooks())
                    .await;
                drop(admission.take());
                to_value(&status?)
            }
            "validate" => to_value(
                &self
                    .gateway
                    .validate_bounded(rpc::params(m, params)?)
                    .await?,
            ),
            "inspect" => self.gateway.inspect_bounded(rpc::params(m, params)?).await,
            "list" => to_value(&self.gateway.list_bounded(rpc::params(m, params)?).await?),
            "sessions" => {
                let mut list = self
                    .gateway
                    .sessions_bounded(rpc::params(m, params)?)
                    .await?;
                list.sessions = self.visible(list.sessions).await?;
                to_value(&list)
            }
            "triggers" => to_value(&self.triggers.triggers(rpc::params(m, params)?).await?),
            "trigger_history" => to_value(&self.triggers.history(rpc::params(m, params)?).await?),
            "fire" => {
                let fired = self.triggers.fire(rpc::params(m, params)?).await;
                drop(admission.take());
                to_value(&fired?)
            }
            "emit" => {
                let fired = self.triggers.emit(rpc::params(m, params)?).await;
                drop(admission.take());
                to_value(&fired?)
            }
            "rpc.discover" => Ok(openrpc()),
            other => Err(RpcError::new(
                code::METHOD_NOT_FOUND,
                format!(
                    "method not found: `{other}`; the methods are {} (and rpc.discover)",
                    METHODS.join(", ")
                ),
            )),
        }
    }

    /// The owner rule of every door ([`crate::access`]) for a method that
    /// names a session: on stdio the caller is the local user, who neither
    /// reads nor steers a session another principal (an HTTP token: a task
    /// or a plain run) owns; such a session reads as unknown, as in MCP.
    async fn owner_rule(&self, method: &str, params: Option<&Value>) -> Result<(), RpcError> {
        let (key, action) = match method {
            "event" | "fork" | "replay" => ("session_id", crate::access::Action::Read),
            "cancel" | "approve" | "signal" => ("session_id", crate::access::Action::Steer),
            "run" => ("resume", crate::access::Action::Steer),
            _ => return Ok(()),
        };
        let Some(id) = params.and_then(|p| p.get(key)).and_then(Value::as_str) else {
            return Ok(()); // the method itself says what is missing
        };
        if !agentfile_session::is_valid_id(id) {
            return Ok(());
        }
        let who = crate::access::Principal::local();
        if crate::access::Rule::OWNED
            .may(self.gateway.store().ok(), &who, id, action)
            .await
        {
            return Ok(());
        }
        Err(RpcError::new(
            code::UNKNOWN_SESSION,
            format!("no session `{id}` in the session store; `sessions` lists them"),
        ))
    }

    /// The sessions of a `sessions` page the local user may read.
    async fn visible(
        &self,
        sessions: Vec<agentfile_session::SessionMeta>,
    ) -> Result<Vec<agentfile_session::SessionMeta>, RpcError> {
        let store = self.gateway.store()?;
        let who = crate::access::Principal::local();
        tokio::task::spawn_blocking(move || {
            crate::access::Rule::OWNED.visible(&*store, &who, sessions, |m| &m.id)
        })
        .await
        .map_err(|e| RpcError::internal(e.to_string()))?
        .map_err(|e| RpcError::new(code::STORE, e.to_string()))
    }

    /// Every event of a run started on this connection becomes an `event`
    /// notification.
    fn hooks(&self) -> RunHooks {
        let outbox = self.outbox.clone();
        // Streamed text deltas too (`llm_delta`, not stored): a client shows
        // the answer as it comes.
        let sink: Arc<dyn EventSink> =
            Arc::new(agentfile_session::events::AllEvents(move |e: &Event| {
                outbox.send(&Notification {
                    jsonrpc: "2.0",
                    method: "event",
                    params: e,
                })
            }));
        RunHooks {
            sinks: vec![sink],
            approver: None,
            owner: None,
        }
    }
}

#[derive(Serialize)]
struct Notification<'a, T: Serialize> {
    jsonrpc: &'static str,
    method: &'static str,
    params: &'a T,
}

/// The JSON-RPC 2.0 request rules; on failure, the id to answer with.
// Once per message, and the error is answered at once: boxing it buys nothing.
#[allow(clippy::result_large_err)]
fn check(message: Value) -> Result<Call, (Value, RpcError)> {
    let invalid = |id: Value, why: &str| {
        (
            id,
            RpcError::new(code::INVALID_REQUEST, format!("invalid request: {why}")),
        )
    };
    let Value::Object(mut obj) = message else {
        return Err(invalid(
            Value::Null,
            "expected an object with jsonrpc, method and id",
        ));
    };
    // The id decides whether there is a reply; an id of the wrong type cannot
    // be echoed, so the error goes to `null`.
    let id = match obj.remove("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(id),
        Some(_) => {
            return Err(invalid(
                Value::Null,
                "`id` must be a string, a number or null",
            ));
        }
    };
    let reply_id = id.clone().unwrap_or(Value::Null);
    match obj.get("jsonrpc") {
        Some(Value::String(v)) if v == "2.0" => {}
        Some(_) => return Err(invalid(reply_id, "`jsonrpc` must be exactly \"2.0\"")),
        None => return Err(invalid(reply_id, "missing `jsonrpc`: \"2.0\"")),
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        Some(_) => return Err(invalid(reply_id, "`method` must be a string")),
        None => return Err(invalid(reply_id, "missing `method`")),
    };
    let params = match obj.remove("params") {
        None => None,
        Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p),
        Some(_) => {
            return Err(invalid(reply_id, "`params` must be an object or an array"));
        }
    };
    Ok(Call { id, method, params })
}

fn error_reply(id: Value, e: RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": e})
}

fn to_value(v: &impl Serialize) -> Result<Value, RpcError> {
    serde_json::to_value(v)
        .map_err(|e| RpcError::internal(format!("cannot encode the result: {e}")))
}

/// `value` encoded as one line if it fits in what is left of `max` after
/// `used` bytes, which it then adds to `used`.
fn encode_within(
    value: &Value,
    used: &std::sync::atomic::AtomicUsize,
    max: usize,
) -> Option<Vec<u8>> {
    use std::sync::atomic::Ordering;
    let left = max.saturating_sub(used.load(Ordering::SeqCst));
    let line = limits::encode_capped(value, left)?;
    // Reserve after encoding: items finishing together may each fit alone and
    // not together, so the sum is checked again.
    let before = used.fetch_add(line.len(), Ordering::SeqCst);
    if before.saturating_add(line.len()) > max {
        used.fetch_sub(line.len(), Ordering::SeqCst);
        return None;
    }
    Some(line)
}

/// The OpenRPC document of this server (`protocol/openrpc.json`).
pub fn openrpc() -> Value {
    // Built once: generating it costs milliseconds, and a batch may ask often.
    static DOC: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    DOC.get_or_init(crate::schemas::openrpc::document).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_checks() {
        let e = check(json!({"jsonrpc": "2.0", "id": 1})).err().unwrap();
        assert_eq!(e.0, json!(1));
        assert_eq!(e.1.code, code::INVALID_REQUEST);
        let e = check(json!({"jsonrpc": "1.0", "method": "x", "id": "a"}))
            .err()
            .unwrap();
        assert_eq!(e.0, json!("a"));
        let e = check(json!({"jsonrpc": "2.0", "method": "x", "id": [1]}))
            .err()
            .unwrap();
        assert_eq!(e.0, Value::Null);
        let e = check(json!({"jsonrpc": "2.0", "method": "x", "params": 3}))
            .err()
            .unwrap();
        assert!(e.1.message.contains("params"));
        let c = check(json!({"jsonrpc": "2.0", "method": "list"}))
            .ok()
            .unwrap();
        assert!(c.id.is_none());
        assert!(check(json!(5)).is_err());
    }

    /// A reader that does not read makes senders wait once the outbox is full,
    /// instead of memory growing; every line arrives whole once it reads again.
    #[test]
    fn a_slow_reader_applies_backpressure() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::{Arc, Mutex};
        struct Gate {
            open: Arc<Mutex<()>>,
            out: Arc<Mutex<Vec<u8>>>,
        }
        impl Write for Gate {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                let _open = self.open.lock().unwrap();
                self.out.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let open = Arc::new(Mutex::new(()));
        let out = Arc::new(Mutex::new(Vec::new()));
        let closed = open.lock().unwrap();
        let (outbox, writer) = Outbox::start(Box::new(Gate {
            open: open.clone(),
            out: out.clone(),
        }))
        .unwrap();
        let sent = Arc::new(AtomicUsize::new(0));
        let total = OUTBOX_CAPACITY * 4;
        let producer = {
            let sent = sent.clone();
            std::thread::spawn(move || {
                for i in 0..total {
                    outbox.send(&json!({"n": i, "pad": "x".repeat(100)}));
                    sent.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        let queued = sent.load(Ordering::SeqCst);
        // The channel, the writer's 8 KiB buffer (about 70 of these lines) and
        // the line it is writing; nothing beyond.
        assert!(queued < total / 2, "{queued} sent while stdout was blocked");
        assert!(queued >= OUTBOX_CAPACITY, "{queued}");
        drop(closed);
        producer.join().unwrap();
        writer.join().unwrap();
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), total);
        assert!(lines.iter().enumerate().all(|(i, v)| v["n"] == i));
    }
}
