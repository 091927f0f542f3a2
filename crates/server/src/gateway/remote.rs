//! A run executed by an `agentfile worker` (`serve --nats`): queued on NATS,
//! its events relayed to the [`LiveRun`] and the transport's sinks exactly as
//! a local run delivers them — stored events only, in `seq` order, none
//! missing, none twice. Events published by the worker are the fast path; the
//! session store fills every gap (a lost message, a skipped seq, a worker that
//! went quiet) and is polled when nothing arrives.
//!
//! A `run_cancelled` this server did not ask for may be an interruption (a
//! worker stopped by SIGTERM leaves the session `interrupted`, and another
//! worker resumes it): the relay only ends there once the store says the
//! session is `cancelled`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;

use futures::future::BoxFuture;

use crate::cluster::{
    self, ClusterError, Control, ControlReply, Work, control_subject, events_subject,
};
use agentfile_engine::service::{
    Forward, LiveRun, NotQueued, Remote, RemoteWork, RunHooks, RunService, failed_result, result_of,
};
use agentfile_session::SessionStatus;
use agentfile_session::events::EventSink;
use agentfile_wire::events::{Event, EventBody, RunResult, TerminationReason, Usage};
use agentfile_wire::rpc::{RpcError, RunStatus, code};

/// The cluster a `--nats` server queues its runs on, as the run service's
/// [`Remote`].
pub(super) struct Cluster(pub(super) cluster::Cluster);

impl Remote for Cluster {
    fn start<'a>(
        &'a self,
        service: &'a Arc<RunService>,
        live: &'a Arc<LiveRun>,
        work: RemoteWork,
        hooks: RunHooks,
    ) -> BoxFuture<'a, Result<(), NotQueued>> {
        let work = Work {
            session_id: work.session_id,
            from_seq: work.from_seq,
            params: work.params,
            trigger: work.trigger,
        };
        Box::pin(async move {
            start(service, &self.0, live, work, hooks)
                .await
                .map_err(|e| NotQueued::from(e.0))
        })
    }

    fn forward<'a>(
        &'a self,
        id: &'a str,
        request: Forward,
    ) -> BoxFuture<'a, Option<Result<RunStatus, RpcError>>> {
        let control = match request {
            Forward::Approve(p) => Control::Approve {
                approve: p.approve,
                note: p.note,
            },
            Forward::Cancel => Control::Cancel,
        };
        Box::pin(async move {
            match ask(&self.0, id, &control).await {
                Err(Unanswered::NoHolder) => None,
                answer => Some(answer.map_err(|e| e.into_error(id))),
            }
        })
    }
}

/// How long the relay waits for a published event before reading the store;
/// doubled after each read that found nothing new, up to [`POLL_MAX`], and
/// back to this after any delivery. A queued run (a long wait for a free
/// worker) costs the store one read every few seconds, not two a second.
const POLL: Duration = Duration::from_millis(500);
const POLL_MAX: Duration = Duration::from_secs(4);
/// How long after an unrequested `run_cancelled` the session's status decides
/// whether it was cancelled or interrupted.
const SETTLE: Duration = Duration::from_secs(1);
/// The longest wait for a worker's answer to a control request.
const CONTROL_WAIT: Duration = Duration::from_secs(5);

/// Subscribe to the session's events, queue the run, and spawn its relay.
async fn start(
    service: &Arc<RunService>,
    cluster: &cluster::Cluster,
    live: &Arc<LiveRun>,
    work: Work,
    hooks: RunHooks,
) -> Result<(), ClusterError> {
    let id = work.session_id.clone();
    let sub = cluster
        .client
        .subscribe(events_subject(&id))
        .await
        .map_err(|e| {
            ClusterError(format!(
                "cannot subscribe to the events of session `{id}` on NATS: {e}"
            ))
        })?;
    cluster.submit(&work).await?;
    let service2 = service.clone();
    let cluster = cluster.clone();
    let live = live.clone();
    service.track(async move {
        let (result, status) = relay(&cluster, &live, sub, hooks).await;
        service2.forget(live.session_id());
        live.end(result, status);
    });
    Ok(())
}

struct Relay<'a> {
    live: &'a Arc<LiveRun>,
    sinks: Vec<Arc<dyn EventSink>>,
    last: u64,
    cancel_requested: bool,
    /// An unrequested `run_cancelled` was delivered at this time.
    cancelled_at: Option<(Instant, Event)>,
}

impl Relay<'_> {
    /// Deliver one event if it is the next; returns the run's end when it is one.
    fn deliver(&mut self, e: Event) -> Option<(RunResult, SessionStatus)> {
        if e.seq != self.last + 1 {
            return None;
        }
        self.last = e.seq;
        self.live.observe(&e);
        for sink in &self.sinks {
            sink.send(&e);
        }
        self.cancelled_at = None;
        if !e.body.is_terminal() {
            return None;
        }
        if matches!(e.body, EventBody::RunCancelled { .. }) && !self.cancel_requested {
            self.cancelled_at = Some((Instant::now(), e));
            return None;
        }
        Some(result_of(self.live.session_id(), &e))
    }

    /// Deliver what the store holds after the last delivered event.
    async fn backfill(&mut self) -> Option<(RunResult, SessionStatus)> {
        let store = self.live.store().clone();
        let id = self.live.session_id().to_owned();
        let after = self.last;
        let events = tokio::task::spawn_blocking(move || store.events(&id, after))
            .await
            .ok()?
            .ok()?;
        for e in events {
            if let Some(end) = self.deliver(e) {
                return Some(end);
            }
        }
        None
    }

    /// After an unrequested `run_cancelled` has settled: the end if the
    /// session is really cancelled, else go on (it was interrupted and will
    /// be resumed by another worker).
    async fn settle(&mut self) -> Option<(RunResult, SessionStatus)> {
        let (at, event) = self.cancelled_at.as_ref()?;
        if at.elapsed() < SETTLE {
            return None;
        }
        let store = self.live.store().clone();
        let id = self.live.session_id().to_owned();
        let meta = tokio::task::spawn_blocking(move || store.get(&id))
            .await
            .ok()?
            .ok()?;
        if meta.last_seq > self.last {
            return None;
        }
        if meta.status == SessionStatus::Cancelled {
            let end = result_of(self.live.session_id(), event);
            return Some(end);
        }
        self.cancelled_at = None;
        None
    }
}

async fn relay(
    cluster: &cluster::Cluster,
    live: &Arc<LiveRun>,
    mut sub: async_nats::Subscriber,
    hooks: RunHooks,
) -> (RunResult, SessionStatus) {
    let mut r = Relay {
        live,
        sinks: hooks.sinks,
        last: live.last_seq(),
        cancel_requested: false,
        cancelled_at: None,
    };
    let id = live.session_id().to_owned();
    let mut poll = POLL;
    loop {
        let before = r.last;
        let mut polled = false;
        let end = tokio::select! {
            m = sub.next() => match m {
                Some(m) => match serde_json::from_slice::<Event>(&m.payload) {
                    // Not this session's (a stray or forged publication): the
                    // store has the real log.
                    Ok(e) if e.session_id != id => None,
                    Ok(e) if e.seq <= r.last => None,
                    Ok(e) if e.seq == r.last + 1 => r.deliver(e),
                    // A gap: the store has everything up to this one.
                    Ok(_) => r.backfill().await,
                    Err(_) => None,
                },
                None => {
                    tokio::time::sleep(poll).await;
                    polled = true;
                    r.backfill().await
                }
            },
            _ = tokio::time::sleep(poll) => {
                polled = true;
                match r.backfill().await {
                    Some(end) => Some(end),
                    None => r.settle().await,
                }
            },
            _ = live.cancelled(), if !r.cancel_requested => {
                r.cancel_requested = true;
                if live.is_interrupted() {
                    // This server stops; the run goes on on its worker.
                    let _ = sub.unsubscribe().await;
                    let mut res = failed_result(&id, "this server stopped relaying the run; it goes on on its worker (follow it with `event`)", SessionStatus::Interrupted);
                    res.termination_reason = TerminationReason::Cancelled;
                    return (res, SessionStatus::Running);
                }
                if let Some((_, e)) = r.cancelled_at.take() {
                    Some(result_of(&id, &e))
                } else {
                    cancel_remote(cluster, live).await;
                    r.backfill().await
                }
            }
        };
        if let Some(end) = end {
            let _ = sub.unsubscribe().await;
            return end;
        }
        poll = next_poll(poll, r.last > before, polled, r.cancelled_at.is_some());
    }
}

/// The next wait before reading the store: the shortest after progress or
/// while an unrequested `run_cancelled` settles, longer after each idle read.
fn next_poll(poll: Duration, progressed: bool, polled: bool, settling: bool) -> Duration {
    if progressed || settling {
        POLL
    } else if polled {
        (poll * 2).min(POLL_MAX)
    } else {
        poll
    }
}

/// Why a control request got no answer from a run's holder.
enum Unanswered {
    /// Nobody subscribes to the run's control subject: no worker holds it.
    NoHolder,
    /// The holder refused it (its message and JSON-RPC code).
    Refused(RpcError),
    /// The request or its answer was lost, or not understood.
    Lost(String),
}

impl Unanswered {
    fn into_error(self, id: &str) -> RpcError {
        let why = match self {
            Unanswered::Refused(e) => return e,
            Unanswered::NoHolder => "no worker holds it now".to_owned(),
            Unanswered::Lost(why) => why,
        };
        RpcError::new(
            code::SESSION_STATE,
            format!(
                "the worker holding session `{id}` did not take the request ({why}); if it stopped, another worker resumes the run and asks again: try it then"
            ),
        )
    }
}

/// Send `request` to the worker that holds run `id` and read its answer.
async fn ask(
    cluster: &cluster::Cluster,
    id: &str,
    request: &Control,
) -> Result<RunStatus, Unanswered> {
    let payload = serde_json::to_vec(request).unwrap_or_default();
    let reply = tokio::time::timeout(
        CONTROL_WAIT,
        cluster.client.request(control_subject(id), payload.into()),
    )
    .await;
    match reply {
        Ok(Ok(m)) => match serde_json::from_slice::<ControlReply>(&m.payload) {
            Ok(ControlReply { gone: true, .. }) => Err(Unanswered::NoHolder),
            Ok(ControlReply { error: None, .. }) => Ok(RunStatus {
                session_id: id.to_owned(),
                status: SessionStatus::Running,
            }),
            Ok(ControlReply {
                error: Some(message),
                code,
                ..
            }) => Err(Unanswered::Refused(RpcError::new(
                code.unwrap_or(code::SESSION_STATE),
                message,
            ))),
            Err(e) => Err(Unanswered::Lost(format!(
                "its answer is not understood: {e}"
            ))),
        },
        Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
            Err(Unanswered::NoHolder)
        }
        Ok(Err(e)) => Err(Unanswered::Lost(e.to_string())),
        Err(_) => Err(Unanswered::Lost(format!(
            "no answer within {CONTROL_WAIT:?}"
        ))),
    }
}

/// Ask the worker holding the run to cancel it; when no worker holds it (still
/// queued, or its worker died), record the cancellation in the store: the
/// worker that takes the message then skips it.
async fn cancel_remote(cluster: &cluster::Cluster, live: &Arc<LiveRun>) {
    let id = live.session_id().to_owned();
    let subject = control_subject(&id);
    for _ in 0..20 {
        match tokio::time::timeout(
            CONTROL_WAIT,
            cluster.client.request(subject.clone(), cancel_request()),
        )
        .await
        {
            Ok(Ok(_)) => return,
            Ok(Err(e)) if e.kind() == async_nats::RequestErrorKind::NoResponders => {}
            Ok(Err(e)) => {
                tracing::warn!(session = %id, error = %e, "cancel request failed; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Err(_) => {}
        }
        // Nobody holds it: record the end, unless a worker took it meanwhile
        // (then its lease refuses the append and the request is tried again).
        let store = live.store().clone();
        let sid = id.clone();
        let recorded = tokio::task::spawn_blocking(move || {
            let meta = store.get(&sid).map_err(|e| e.to_string())?;
            if meta.status.is_terminal() {
                return Ok(());
            }
            let bus =
                agentfile_session::events::EventBus::new(&sid, meta.last_seq, Some(store.clone()));
            bus.emit(
                &agentfile_session::events::Scope::default(),
                EventBody::RunCancelled {
                    usage: Usage::default(),
                },
            );
            match bus.store_error() {
                Some(e) => Err(e),
                None => Ok(()),
            }
        })
        .await;
        if let Ok(Ok(())) = recorded {
            // A worker may have claimed it just before: tell it too.
            let _ = tokio::time::timeout(
                CONTROL_WAIT,
                cluster.client.request(subject.clone(), cancel_request()),
            )
            .await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tracing::warn!(session = %id, "could not cancel the remote run");
}

fn cancel_request() -> bytes::Bytes {
    serde_json::to_vec(&Control::Cancel)
        .unwrap_or_default()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_reads_back_off_and_progress_resets_them() {
        let mut p = POLL;
        for _ in 0..10 {
            p = next_poll(p, false, true, false);
        }
        assert_eq!(p, POLL_MAX);
        assert_eq!(
            next_poll(p, false, false, false),
            POLL_MAX,
            "no read, no change"
        );
        assert_eq!(next_poll(p, true, true, false), POLL);
        assert_eq!(
            next_poll(p, false, true, true),
            POLL,
            "a settling cancel is read soon"
        );
        assert_eq!(next_poll(POLL, false, true, false), POLL * 2);
    }
}
