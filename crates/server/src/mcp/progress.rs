//! A run's events as MCP notifications: `notifications/progress` for the
//! `tools/call` that started it (when the caller sent a progressToken), with a
//! heartbeat while nothing happens so hosts keep long calls alive, and
//! `notifications/message` log lines for warnings and failures.
//!
//! The engine calls [`RunSink::send`] under the event bus lock, so it only
//! queues: a bounded channel, drained by a [`Forwarder`] task that writes the
//! notifications. When the client reads slowly and the queue is full, progress
//! events are dropped (progress is advisory; the `event` tool has every event),
//! but terminal, warning and error events go to a small side queue so the log
//! lines and the last progress message survive.
//!
//! Progress values: an event's `seq` (dense, increasing per session); the
//! `k`-th heartbeat after event `seq` reports `seq + k/(k+1)`, which keeps the
//! sequence strictly increasing without running into the next event's number.

#![allow(deprecated)] // rmcp marks logging deprecated for the 2026 protocol; we speak 2025-11-25.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::Peer;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::Client;
use super::approval::Phase;
use crate::printer::Progress;
use agentfile_session::events::EventSink;
use agentfile_wire::events::{Event, EventBody};

/// Events queued for the forwarder before progress is dropped.
const QUEUE: usize = 256;
/// Terminal, warning and error events kept aside when the queue is full.
const URGENT: usize = 64;
/// Longest progress message.
const MESSAGE_CHARS: usize = 240;

/// What the sink and the forwarder share.
struct Shared {
    urgent: Mutex<VecDeque<Event>>,
    dropped: AtomicU64,
    last_seq: AtomicU64,
}

/// The [`EventSink`] a run started by one `tools/call` gets.
pub struct RunSink {
    tx: mpsc::Sender<Event>,
    shared: Arc<Shared>,
    phase: Arc<watch::Sender<Phase>>,
}

impl RunSink {
    /// The highest `seq` seen so far.
    pub fn last_seq(&self) -> u64 {
        self.shared.last_seq.load(Ordering::Relaxed)
    }

    /// Where the run stands with approvals (see [`Phase`]).
    pub fn phase(&self) -> Arc<watch::Sender<Phase>> {
        self.phase.clone()
    }
}

impl EventSink for RunSink {
    fn send(&self, e: &Event) {
        self.shared.last_seq.fetch_max(e.seq, Ordering::Relaxed);
        match &e.body {
            EventBody::ApprovalResolved { .. }
            | EventBody::RunComplete { .. }
            | EventBody::RunFailed { .. }
            | EventBody::RunCancelled { .. } => {
                self.phase.send_replace(Phase::Running);
            }
            _ => {}
        }
        if let Err(mpsc::error::TrySendError::Full(e)) = self.tx.try_send(e.clone()) {
            if urgent(&e) {
                let mut q = self.shared.urgent.lock().unwrap_or_else(|p| p.into_inner());
                if q.len() < URGENT {
                    q.push_back(e);
                    return;
                }
            }
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Streamed model text: forwarded while there is room, else dropped
    /// quietly (the stored `llm_response` has it all).
    fn send_transient(&self, e: &Event) {
        let _ = self.tx.try_send(e.clone());
    }
}

fn urgent(e: &Event) -> bool {
    e.body.is_terminal() || log_level(&e.body).is_some()
}

/// The log level an event is reported at, if it is logged at all.
fn log_level(body: &EventBody) -> Option<LoggingLevel> {
    match body {
        EventBody::Warning { .. } => Some(LoggingLevel::Warning),
        EventBody::Error { .. } | EventBody::RunFailed { .. } => Some(LoggingLevel::Error),
        _ => None,
    }
}

/// Rank of a level, for comparing with the client's `logging/setLevel`.
pub fn level_rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// Which log lines a call's run sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFloor {
    /// The connection's level (`logging/setLevel`, before 2026-07-28).
    Session,
    /// The request's own (2026-07-28: `_meta["io.modelcontextprotocol/
    /// logLevel"]`); `None`: it asked for none, so none is sent.
    Request(Option<u8>),
}

/// The `_meta` key through which a 2026-07-28 request asks for log lines.
pub const LOG_LEVEL_META: &str = "io.modelcontextprotocol/logLevel";

impl LogFloor {
    /// The floor of a call made with `ctx`.
    pub fn of(ctx: &rmcp::service::RequestContext<RoleServer>) -> LogFloor {
        let stateless = ctx
            .protocol_version()
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
        if !stateless {
            return LogFloor::Session;
        }
        let asked = ctx
            .meta
            .0
            .get(LOG_LEVEL_META)
            .cloned()
            .and_then(|v| serde_json::from_value::<LoggingLevel>(v).ok());
        LogFloor::Request(asked.map(level_rank))
    }
}

/// The task writing one run's notifications.
pub struct Forwarder {
    stop: CancellationToken,
    flushed: oneshot::Receiver<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Forwarder {
    /// Send the progress still queued, then send no more; called before the
    /// `tools/call` answers, because progress after the answer is a protocol
    /// error. Log lines go on while the run does (a run that waits for
    /// approval outlives its call). Gives up after `within` when the client
    /// does not read.
    pub async fn finish(self, within: Duration) {
        self.stop.cancel();
        if tokio::time::timeout(within, self.flushed).await.is_err() {
            self.task.abort();
        }
    }
}

/// A sink for one run and the task that forwards its events. `token`: the
/// caller's progressToken, if any (log lines are sent either way). Without a
/// token the forwarder needs no stopping: it ends with the run.
pub fn start(
    client: &Arc<Client>,
    peer: Option<Peer<RoleServer>>,
    token: Option<ProgressToken>,
    floor: LogFloor,
) -> (Arc<RunSink>, Forwarder) {
    let (tx, rx) = mpsc::channel(QUEUE);
    let shared = Arc::new(Shared {
        urgent: Mutex::new(VecDeque::new()),
        dropped: AtomicU64::new(0),
        last_seq: AtomicU64::new(0),
    });
    let (phase, phase_rx) = watch::channel(Phase::Running);
    let sink = Arc::new(RunSink {
        tx,
        shared: shared.clone(),
        phase: Arc::new(phase),
    });
    let stop = CancellationToken::new();
    let (flushed_tx, flushed) = oneshot::channel();
    let f = Forward {
        peer,
        client: client.clone(),
        token,
        floor,
        shared,
        phase: phase_rx,
        printer: Progress::to_writer(Box::new(std::io::sink())),
        progress: 0.0,
        beats: 0,
        last_line: String::new(),
        started: Instant::now(),
    };
    let task = tokio::spawn(f.run(rx, stop.clone(), flushed_tx));
    (
        sink,
        Forwarder {
            stop,
            flushed,
            task,
        },
    )
}

struct Forward {
    peer: Option<Peer<RoleServer>>,
    client: Arc<Client>,
    token: Option<ProgressToken>,
    floor: LogFloor,
    shared: Arc<Shared>,
    phase: watch::Receiver<Phase>,
    printer: Progress,
    /// The last progress value sent.
    progress: f64,
    /// Heartbeats since the last event.
    beats: u32,
    last_line: String,
    started: Instant,
}

impl Forward {
    async fn run(
        mut self,
        mut rx: mpsc::Receiver<Event>,
        stop: CancellationToken,
        flushed: oneshot::Sender<()>,
    ) {
        let beat = self.client.heartbeat;
        let mut next_beat = tokio::time::Instant::now() + beat;
        let mut flushed = Some(flushed);
        loop {
            tokio::select! {
                biased;
                e = rx.recv() => match e {
                    Some(e) => {
                        self.event(&e).await;
                        self.flush_urgent().await;
                        next_beat = tokio::time::Instant::now() + beat;
                    }
                    None => break,
                },
                _ = stop.cancelled(), if flushed.is_some() => {
                    while let Ok(e) = rx.try_recv() {
                        self.event(&e).await;
                    }
                    self.flush_urgent().await;
                    // From here on: log lines only.
                    self.token = None;
                    if let Some(f) = flushed.take() {
                        let _ = f.send(());
                    }
                }
                _ = tokio::time::sleep_until(next_beat), if self.token.is_some() => {
                    self.heartbeat().await;
                    next_beat = tokio::time::Instant::now() + beat;
                }
            }
        }
        self.flush_urgent().await;
        if let Some(f) = flushed.take() {
            let _ = f.send(());
        }
    }

    async fn flush_urgent(&mut self) {
        loop {
            let next = self
                .shared
                .urgent
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front();
            match next {
                Some(e) => self.event(&e).await,
                None => return,
            }
        }
    }

    async fn event(&mut self, e: &Event) {
        if let EventBody::LlmDelta { text, restart, .. } = &e.body {
            // Between two stored events: a progress value between their seqs,
            // rising with each piece, as for heartbeats.
            self.beats += 1;
            let k = f64::from(self.beats);
            let value = self.progress.floor() + k / (k + 1.0);
            let who = e.agent.as_deref().or(e.goal.as_deref()).unwrap_or("model");
            let message = if *restart {
                format!("[{who}] the model call is being retried")
            } else {
                format!("[{who}] ✎ {}", agentfile_config::text::truncate(text, 400))
            };
            self.progress(value, message).await;
            return;
        }
        let line = summary(&self.printer, e);
        if let Some(level) = log_level(&e.body) {
            self.log(level, &line).await;
        }
        self.last_line = line.clone();
        self.beats = 0;
        let value = e.seq as f64;
        if value <= self.progress {
            return;
        }
        let dropped = self.shared.dropped.swap(0, Ordering::Relaxed);
        let message = if dropped > 0 {
            format!("{line} ({dropped} earlier events not shown; `event` has them all)")
        } else {
            line
        };
        self.progress(value, message).await;
    }

    async fn heartbeat(&mut self) {
        self.beats += 1;
        let k = f64::from(self.beats);
        let base = self.progress.floor();
        let value = base + k / (k + 1.0);
        let elapsed = self.started.elapsed().as_secs();
        let message = match *self.phase.borrow() {
            Phase::Asking => {
                format!("waiting for the user to answer the approval prompt ({elapsed}s)")
            }
            _ if self.last_line.is_empty() => format!("waiting for a run slot ({elapsed}s)"),
            _ => format!("still running, {elapsed}s; last: {}", self.last_line),
        };
        self.progress(value, message).await;
    }

    async fn progress(&mut self, value: f64, message: String) {
        let (Some(peer), Some(token)) = (&self.peer, &self.token) else {
            return;
        };
        self.progress = value;
        let _ = peer
            .notify_progress(
                ProgressNotificationParam::new(token.clone(), value).with_message(message),
            )
            .await;
    }

    async fn log(&self, level: LoggingLevel, line: &str) {
        let Some(peer) = &self.peer else { return };
        let floor = match self.floor {
            LogFloor::Session => self.client.log_level(),
            LogFloor::Request(Some(floor)) => floor,
            LogFloor::Request(None) => return,
        };
        if level_rank(level) < floor {
            return;
        }
        let _ = peer
            .notify_logging_message(
                LoggingMessageNotificationParam::new(
                    level,
                    serde_json::Value::String(line.to_owned()),
                )
                .with_logger("agentfile"),
            )
            .await;
    }
}

/// One line about an event, for a progress message or a log line: the CLI's
/// progress line where it prints one, else a line of our own.
pub fn summary(printer: &Progress, e: &Event) -> String {
    let line = printer.line(e).unwrap_or_else(|| quiet_line(e));
    let first = line
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut out: String = first.chars().take(MESSAGE_CHARS).collect();
    if first.chars().count() > MESSAGE_CHARS {
        out.push('…');
    }
    out
}

/// A line for the events the CLI does not print (it shows them as they
/// happen; a progress message needs every one to say something).
fn quiet_line(e: &Event) -> String {
    let who = match (&e.goal, &e.agent) {
        (Some(g), Some(a)) => format!("{g}/{a}"),
        (Some(g), None) => g.clone(),
        (None, Some(a)) => a.clone(),
        (None, None) => String::new(),
    };
    let at = if who.is_empty() {
        String::new()
    } else {
        format!("[{who}] ")
    };
    match &e.body {
        EventBody::AgentStarted { role } => format!("{at}agent started ({role})"),
        EventBody::LlmRequest { turn, .. } => format!("{at}asking the model (turn {turn})"),
        EventBody::LlmResponse {
            latency_ms,
            tool_calls,
            text,
            ..
        } => {
            if tool_calls.is_empty() {
                let first = text
                    .lines()
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .unwrap_or("");
                format!("{at}model answered in {latency_ms} ms: {first}")
            } else {
                let names: Vec<&str> = tool_calls.iter().map(|c| c.name.as_str()).collect();
                format!("{at}model calls {} ({latency_ms} ms)", names.join(", "))
            }
        }
        EventBody::ToolResult {
            tool, duration_ms, ..
        } => format!("{at}{tool} done in {duration_ms} ms"),
        EventBody::GoalComplete { .. } => format!("{at}finished"),
        EventBody::StepComplete { .. } => {
            format!("step {} complete", e.step.as_deref().unwrap_or(""))
        }
        EventBody::LoopIteration { limit } => {
            format!("{at}iteration {}/{limit}", e.iteration.unwrap_or(0))
        }
        _ => format!("{at}{}", e.kind().replace('_', " ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentfile_wire::events::EVENT_SCHEMA_VERSION;

    fn event(seq: u64, body: EventBody) -> Event {
        Event {
            schema_version: EVENT_SCHEMA_VERSION,
            session_id: "s".into(),
            seq,
            ts: "2026-01-01T00:00:00.000Z".into(),
            step: None,
            goal: Some("g".into()),
            agent: None,
            iteration: None,
            node: None,
            node_kind: None,
            replayed: false,
            body,
        }
    }

    #[test]
    fn summaries_are_one_short_line() {
        let p = Progress::to_writer(Box::new(std::io::sink()));
        let e = event(
            3,
            EventBody::Error {
                message: format!("{}\nsecond line", "x".repeat(500)),
            },
        );
        let s = summary(&p, &e);
        assert!(!s.contains('\n'));
        assert!(s.chars().count() <= MESSAGE_CHARS + 1, "{s}");
        let e = event(
            4,
            EventBody::LlmRequest {
                model: "m".into(),
                turn: 1,
                messages: 2,
                tools: 0,
                digests: Default::default(),
            },
        );
        assert_eq!(summary(&p, &e), "[g] asking the model (turn 1)");
    }

    #[test]
    fn a_full_queue_keeps_terminal_and_log_events() {
        let (tx, _rx) = mpsc::channel(1);
        let (phase, _) = watch::channel(Phase::Running);
        let sink = RunSink {
            tx,
            shared: Arc::new(Shared {
                urgent: Mutex::new(VecDeque::new()),
                dropped: AtomicU64::new(0),
                last_seq: AtomicU64::new(0),
            }),
            phase: Arc::new(phase),
        };
        let usage = agentfile_wire::events::Usage::default();
        sink.send(&event(
            1,
            EventBody::Warning {
                message: "a".into(),
            },
        ));
        sink.send(&event(2, EventBody::LoopIteration { limit: 3 }));
        sink.send(&event(3, EventBody::RunCancelled { usage }));
        assert_eq!(sink.shared.dropped.load(Ordering::Relaxed), 1);
        let urgent = sink.shared.urgent.lock().unwrap();
        assert_eq!(urgent.iter().map(|e| e.seq).collect::<Vec<_>>(), [3]);
        assert_eq!(sink.last_seq(), 3);
    }
}
