//! A run in flight: its state as its events are delivered, the decision a
//! supervised goal waits for, and what a transport attaches to it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::executor::{Approval, ApprovalRequest, Approver, exit};
use agentfile_session::events::EventSink;
use agentfile_session::{self as session, SessionStatus, SessionStore};
use agentfile_wire::events::{Event, EventBody, RunResult, TerminationReason, Usage};

/// What a transport attaches to one run.
#[derive(Clone, Default)]
pub struct RunHooks {
    /// Receive every event after it is stored (JSON-RPC notifications, MCP progress).
    pub sinks: Vec<Arc<dyn EventSink>>,
    /// Asked first at a supervised goal (MCP elicitation); when it answers
    /// `Unavailable` the run waits for the `approve` method instead.
    pub approver: Option<Arc<dyn Approver>>,
    /// The principal a new session belongs to (the server's access rule): recorded
    /// with the session before the run starts, and never changed after. The
    /// door that knows who asks sets it (an MCP task; a run over HTTP with a
    /// bearer token); it is not a wire parameter, so no caller names another
    /// owner. A resume leaves the session's owner as it is.
    pub owner: Option<String>,
}

#[derive(Debug, Clone)]
pub(super) struct LiveState {
    pub(super) status: SessionStatus,
    pub(super) last_seq: u64,
    /// The run's last event (complete, failed, cancelled) is stored: nothing
    /// more will be appended, even before `result` is set.
    pub(super) ended: bool,
    pub(super) result: Option<Arc<RunResult>>,
    /// The `seq` of the `approval_required` the run waits at (delivered, and
    /// no `approval_resolved` after it yet).
    pub(super) approval: Option<u64>,
}

impl LiveState {
    /// Take in one delivered event (`ended` is the caller's to set: a relayed
    /// `run_cancelled` may be an interruption that another worker resumes).
    pub(super) fn observe(&mut self, e: &Event) {
        self.last_seq = e.seq;
        if let Some(st) = session::status_after(&e.body) {
            self.status = st;
        }
        match e.body {
            EventBody::ApprovalRequired { .. } => self.approval = Some(e.seq),
            EventBody::ApprovalResolved { .. } => self.approval = None,
            _ if e.body.is_terminal() => self.approval = None,
            _ => {}
        }
    }
}

/// A run accepted by the service and not yet finished.
pub struct LiveRun {
    pub(super) session_id: String,
    pub(super) store: Arc<dyn SessionStore>,
    /// Where that store is ([`session::location`]), and the run's workspace.
    pub(super) stored_at: std::path::PathBuf,
    pub(super) workspace: std::path::PathBuf,
    /// The plan it runs.
    pub(super) plan: Arc<agentfile_plan::Plan>,
    pub(super) cancel: CancellationToken,
    pub(super) state: watch::Sender<LiveState>,
    /// The decision a supervised goal waits for.
    pub(super) pending: Mutex<Pending>,
    /// Stopped by a shutdown rather than a `cancel`: the session is left resumable.
    pub(super) interrupted: AtomicBool,
    /// Nobody is left to call `approve` (the client is gone): an approval this
    /// run waits for, or comes to, ends it as `waiting_approval`.
    pub(super) orphaned: AtomicBool,
    /// Started where nobody can call `approve` (the command line).
    pub(super) unattended: bool,
    /// Why it ended before its first event, when its set-up failed once the
    /// session was recorded (the policy, the tools).
    pub(super) setup_error: Mutex<Option<crate::run::RunError>>,
}

impl LiveRun {
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    pub fn status(&self) -> SessionStatus {
        self.state.borrow().status
    }

    /// Ask the run to stop (as the `cancel` method does).
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Wait for the run's result.
    pub async fn finished(&self) -> Arc<RunResult> {
        let mut rx = self.state.subscribe();
        loop {
            if let Some(r) = rx.borrow_and_update().result.clone() {
                return r;
            }
            if rx.changed().await.is_err() {
                // The sender lives as long as `self`; unreachable in practice.
                let st = rx.borrow().clone();
                return Arc::new(failed_result(
                    &self.session_id,
                    "the run vanished",
                    st.status,
                ));
            }
        }
    }

    pub(super) fn update(&self, f: impl FnOnce(&mut LiveState)) {
        self.state.send_modify(f);
    }

    /// The plan the run executes.
    pub fn plan(&self) -> &Arc<agentfile_plan::Plan> {
        &self.plan
    }

    /// Why its set-up failed after the session was recorded (the result
    /// then says the same, as a failed run).
    pub fn setup_error(&self) -> Option<crate::run::RunError> {
        lock(&self.setup_error).clone()
    }

    /// The store the run's session is in.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// Where the store is, as [`session::location`] names it: a database
    /// file or folder (absolute), or `postgres:$VAR`.
    pub fn stored_at(&self) -> &std::path::Path {
        &self.stored_at
    }

    /// The run's workspace, canonical.
    pub fn workspace(&self) -> &std::path::Path {
        &self.workspace
    }

    /// The `seq` of the last event delivered.
    pub fn last_seq(&self) -> u64 {
        self.state.borrow().last_seq
    }

    /// Take in one event delivered from another process (a relayed run).
    pub fn observe(&self, e: &Event) {
        self.update(|s| s.observe(e));
    }

    /// The run ended (a relayed run): its result and the session's status.
    pub fn end(&self, result: RunResult, status: SessionStatus) {
        self.update(|s| {
            s.status = status;
            s.ended = true;
            s.result = Some(Arc::new(result));
        });
    }

    /// Cancelled by `cancel` or a shutdown.
    pub fn cancelled(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.cancel.cancelled()
    }

    /// Stopped by a shutdown rather than a `cancel`: the session is left resumable.
    pub fn is_interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }
}

/// Where a run's approval stands. A client that sees `approval_required` may
/// answer before the executor starts waiting; the decision is then kept.
#[derive(Default)]
pub(super) enum Pending {
    #[default]
    Nothing,
    Waiting(oneshot::Sender<Approval>),
    Decided(Approval),
    /// The approval asked at this `seq` has its decision, whose
    /// `approval_resolved` may not be delivered yet: a second `approve` is
    /// refused, never kept for the run's next approval.
    Answered(u64),
}

/// Waits for the `approve` method, after asking the transport's own approver
/// (MCP elicitation) if there is one.
pub(super) struct ServiceApprover {
    pub(super) live: Arc<LiveRun>,
    pub(super) first: Option<Arc<dyn Approver>>,
}

impl Approver for ServiceApprover {
    fn decide<'a>(&'a self, req: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            let (tx, rx) = oneshot::channel();
            {
                let mut pending = lock(&self.live.pending);
                if let Pending::Decided(d) = std::mem::take(&mut *pending) {
                    *pending = Pending::Answered(self.live.state.borrow().approval.unwrap_or(0));
                    return d;
                }
                if self.live.orphaned.load(Ordering::SeqCst) {
                    return Approval::Unavailable(nobody_to_approve(&self.live.session_id));
                }
                *pending = Pending::Waiting(tx);
            }
            let answer = async {
                rx.await.unwrap_or_else(|_| {
                    Approval::Unavailable("the approval request was dropped".into())
                })
            };
            let decision = match &self.first {
                Some(first) => {
                    tokio::pin!(answer);
                    tokio::select! {
                        d = first.decide(req) => match d {
                            Approval::Unavailable(_) => answer.await,
                            decided => decided,
                        },
                        d = &mut answer => d,
                    }
                }
                None => answer.await,
            };
            // Decided here, by the transport's approver (MCP elicitation) or
            // given up: whichever way, no later `approve` may stand for this
            // approval, only for a later one.
            let seq = self.live.state.borrow().approval.unwrap_or(0);
            *lock(&self.live.pending) = Pending::Answered(seq);
            decision
        })
    }
}

/// Why a run stops at an approval once its client is gone (after "goal `g`
/// needs approval, but").
pub(super) fn nobody_to_approve(id: &str) -> String {
    format!(
        "the client that started it is gone; approve it with `agentfile sessions approve {id}`, then continue with `agentfile sessions resume {id}`"
    )
}

/// The result of a run that ended before or outside the executor.
pub fn failed_result(id: &str, message: &str, status: SessionStatus) -> RunResult {
    RunResult {
        kind: "result".into(),
        session_id: id.to_owned(),
        status: match status {
            SessionStatus::Completed => "completed",
            SessionStatus::Cancelled | SessionStatus::Interrupted => "cancelled",
            _ => "failed",
        }
        .into(),
        outputs: Default::default(),
        usage: Usage::default(),
        termination_reason: agentfile_wire::events::TerminationReason::Error,
        error: Some(message.to_owned()),
        exit_code: exit::FAILED,
        waiting_for: Vec::new(),
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The result a local run would have returned, from its terminal event.
pub fn result_of(id: &str, e: &Event) -> (RunResult, SessionStatus) {
    let mut r = RunResult {
        kind: "result".into(),
        session_id: id.to_owned(),
        status: String::new(),
        outputs: Default::default(),
        usage: Usage::default(),
        termination_reason: TerminationReason::Completed,
        error: None,
        exit_code: 0,
        waiting_for: Vec::new(),
    };
    let status = match &e.body {
        EventBody::RunComplete { outputs, usage } => {
            r.status = "completed".into();
            r.outputs = outputs.clone();
            r.usage = usage.clone();
            SessionStatus::Completed
        }
        EventBody::RunFailed {
            error,
            termination_reason,
            usage,
        } => {
            r.status = "failed".into();
            r.termination_reason = *termination_reason;
            r.error = Some(error.clone());
            r.usage = usage.clone();
            if *termination_reason == TerminationReason::ApprovalUnavailable {
                SessionStatus::WaitingApproval
            } else {
                SessionStatus::Failed
            }
        }
        EventBody::RunCancelled { usage } => {
            r.status = "cancelled".into();
            r.termination_reason = TerminationReason::Cancelled;
            r.usage = usage.clone();
            SessionStatus::Cancelled
        }
        EventBody::RunSuspended { events, usage } => {
            r.status = "suspended".into();
            r.termination_reason = TerminationReason::Suspended;
            r.waiting_for = events.clone();
            r.usage = usage.clone();
            SessionStatus::Suspended
        }
        _ => {
            r.status = "failed".into();
            r.termination_reason = TerminationReason::Error;
            SessionStatus::Failed
        }
    };
    r.exit_code = r.termination_reason.exit_code();
    (r, status)
}
