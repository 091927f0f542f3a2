//! `agentfile worker`: take runs from the queue and execute them with a local
//! [`Gateway`], publishing their events and answering control requests.
//!
//! Per message: the session is read from the shared store; one that already
//! ended (or waits for a human or a signal) is acked and skipped; one another
//! process still holds the lease of is NAKed with a delay; otherwise it is
//! resumed from its journal (a session with no events simply starts). While it
//! runs the message gets an in-progress ack every `ack_wait / 3`; it is acked
//! when the run ends, and NAKed for immediate redelivery when this worker is
//! stopped (SIGTERM: the run is interrupted and its session left resumable).

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind};
use futures::StreamExt;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cluster::{
    Cluster, ClusterError, Control, ControlReply, Work, control_subject, events_subject,
};
use crate::gateway::{Gateway, LiveRun, RunHooks};
use agentfile_session::events::EventSink;
use agentfile_session::{SessionStatus, StoreError};
use agentfile_wire::events::Event;
use agentfile_wire::rpc::RunParams;

/// The longest wait for NATS on the way out (a flush, an ack): the connection
/// may be gone, and the store holds the truth anyway.
const NATS_WAIT: Duration = Duration::from_secs(5);

/// How long a stopped worker waits for its runs to record their interruption.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// Pull and execute runs until `stop` is cancelled, then interrupt the runs in
/// flight and hand them back to the queue.
pub async fn serve(
    cluster: Cluster,
    gateway: Arc<Gateway>,
    max_runs: usize,
    stop: CancellationToken,
) -> Result<(), ClusterError> {
    let consumer = cluster.consumer().await?;
    let slots = Arc::new(Semaphore::new(max_runs.max(1)));
    let tasks = TaskTracker::new();
    let shown = crate::cluster::display_url(&cluster.options.url);
    while !stop.is_cancelled() {
        // Wait for a free slot before asking for work: a message taken is a
        // message this worker must heartbeat.
        let first = tokio::select! {
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            _ = stop.cancelled() => break,
        };
        let free = slots.available_permits() + 1;
        let batch = consumer
            .fetch()
            .max_messages(free)
            .expires(Duration::from_secs(1))
            .messages()
            .await;
        let mut batch = match batch {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, nats = %shown, "cannot fetch work; retrying");
                drop(first);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = stop.cancelled() => break,
                }
                continue;
            }
        };
        let mut first = Some(first);
        loop {
            let next = tokio::select! {
                m = batch.next() => m,
                _ = stop.cancelled() => None,
            };
            let Some(msg) = next else { break };
            let msg = match msg {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(error = %e, "error while fetching work");
                    break;
                }
            };
            let permit = match first.take() {
                Some(p) => p,
                None => match slots.clone().acquire_owned().await {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            let cluster = cluster.clone();
            let gateway = gateway.clone();
            tasks.spawn(async move {
                let _permit = permit;
                handle(cluster, gateway, msg).await;
            });
        }
    }
    // Stopped: no more pulling; interrupt what runs (sessions left
    // `interrupted`), and each task NAKs its message for redelivery.
    gateway.interrupt(STOP_GRACE).await;
    tasks.close();
    let _ = tokio::time::timeout(STOP_GRACE, tasks.wait()).await;
    let _ = tokio::time::timeout(NATS_WAIT, cluster.client.flush()).await;
    Ok(())
}

async fn handle(cluster: Cluster, gateway: Arc<Gateway>, msg: jetstream::Message) {
    let (work, control, store) = match claim(&cluster, &gateway, &msg).await {
        Ok(claimed) => claimed,
        Err(how) => {
            settle(&msg, how).await;
            return;
        }
    };
    let id = work.session_id.clone();
    let (tx, rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let publisher = tokio::spawn(publish_events(
        cluster.client.clone(),
        events_subject(&id),
        rx,
    ));
    let sink: Arc<dyn EventSink> = Arc::new(move |e: &Event| {
        if let Ok(bytes) = serde_json::to_vec(e) {
            let _ = tx.send(bytes);
        }
    });
    let Some(live) = start(
        &gateway,
        &msg,
        &store,
        &id,
        work.params,
        work.trigger,
        sink,
        cluster.options.ack_wait,
    )
    .await
    else {
        publisher.abort();
        return;
    };
    watch(&cluster, &gateway, &msg, &live, &id, control).await;
    // Events are all handed to the publisher; let it finish sending them.
    let _ = tokio::time::timeout(Duration::from_secs(5), publisher).await;
    if live.status() == SessionStatus::Interrupted {
        let _ = tokio::time::timeout(NATS_WAIT, msg.ack_with(AckKind::Nak(None))).await;
    } else {
        match tokio::time::timeout(NATS_WAIT, msg.double_ack()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(session = %id, error = %e, "ack failed; the run may be redelivered, and is then skipped")
            }
            Err(_) => {
                tracing::warn!(session = %id, "no ack confirmation from NATS; the run may be redelivered, and is then skipped")
            }
        }
    }
}

/// How a message that is not run here is answered.
enum Settle {
    Ack,
    With(AckKind),
}

async fn settle(msg: &jetstream::Message, how: Settle) {
    let _ = match how {
        Settle::Ack => msg.ack().await,
        Settle::With(kind) => msg.ack_with(kind).await,
    };
}

/// Read the message and claim its session for this worker: its work, the
/// run's control subscription and the store — or how to answer a message
/// that is not run here (not a run, a session that ended or is leased
/// elsewhere, a store that cannot be reached).
async fn claim(
    cluster: &Cluster,
    gateway: &Gateway,
    msg: &jetstream::Message,
) -> Result<
    (
        Work,
        async_nats::Subscriber,
        Arc<dyn agentfile_session::SessionStore>,
    ),
    Settle,
> {
    let retry_soon = || Settle::With(AckKind::Nak(Some(Duration::from_secs(1))));
    let work: Work = match serde_json::from_slice(&msg.payload) {
        Ok(w) => w,
        Err(e) => {
            tracing::error!(error = %e, "not a run message; dropped");
            return Err(Settle::With(AckKind::Term));
        }
    };
    let id = work.session_id.clone();
    let ack_wait = cluster.options.ack_wait;
    // Subscribed before the session is read: a `cancel` that finds no one
    // listening marks the session cancelled in the store, which is then seen.
    let control = match cluster.client.subscribe(control_subject(&id)).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(session = %id, error = %e, "cannot subscribe for control; retrying later");
            return Err(retry_soon());
        }
    };
    let _ = tokio::time::timeout(NATS_WAIT, cluster.client.flush()).await;
    let store = match gateway.store() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(session = %id, error = %e.message, "cannot open the session store");
            return Err(Settle::With(AckKind::Nak(Some(ack_wait))));
        }
    };
    let claim = {
        let store = store.clone();
        let id = id.clone();
        tokio::task::spawn_blocking(move || {
            let meta = store.get(&id)?;
            if !matches!(
                meta.status,
                SessionStatus::Queued | SessionStatus::Running | SessionStatus::Interrupted
            ) {
                return Ok(Some(meta.status));
            }
            store.set_status(&id, SessionStatus::Queued).map(|_| None)
        })
        .await
    };
    match claim {
        Ok(Ok(None)) => Ok((work, control, store)),
        Ok(Ok(Some(status))) => {
            tracing::info!(session = %id, status = status.as_str(), "session not runnable; skipped");
            Err(Settle::Ack)
        }
        Ok(Err(StoreError::LeaseHeld { .. })) => {
            tracing::info!(session = %id, "session still leased by another process; retrying later");
            Err(Settle::With(AckKind::Nak(Some(ack_wait))))
        }
        Ok(Err(StoreError::NotFound(_))) => {
            tracing::error!(session = %id, "no such session in the store; dropped");
            Err(Settle::With(AckKind::Term))
        }
        Ok(Err(e)) => {
            tracing::warn!(session = %id, error = %e, "cannot claim the session; retrying later");
            Err(retry_soon())
        }
        Err(e) => {
            tracing::error!(session = %id, error = %e, "claim task failed");
            Err(retry_soon())
        }
    }
}

/// Resume the claimed session here. `None`: it did not start, and the
/// message is answered already.
#[allow(clippy::too_many_arguments)]
async fn start(
    gateway: &Arc<Gateway>,
    msg: &jetstream::Message,
    store: &Arc<dyn agentfile_session::SessionStore>,
    id: &str,
    params: RunParams,
    trigger: Option<agentfile_wire::events::RunTrigger>,
    sink: Arc<dyn EventSink>,
    ack_wait: Duration,
) -> Option<Arc<LiveRun>> {
    let params = RunParams {
        resume: Some(id.to_owned()),
        path: String::new(),
        inputs: Default::default(),
        wait: None,
        ..params
    };
    let hooks = RunHooks {
        sinks: vec![sink],
        approver: None,
        // The session was recorded, with its owner, by the submitter.
        owner: None,
    };
    // The trigger the submitter's fire carried: the `run_started` this
    // worker writes names it.
    match gateway.submit_with_trigger(params, hooks, trigger).await {
        Ok(l) => Some(l),
        Err(e) if e.code == agentfile_wire::rpc::code::SHUTTING_DOWN => {
            // This worker is stopping: another one takes it.
            let _ = tokio::time::timeout(NATS_WAIT, msg.ack_with(AckKind::Nak(None))).await;
            None
        }
        Err(e) if e.code == agentfile_wire::rpc::code::SESSION_STATE => {
            // Already running here (a redelivery that overtook its own run).
            tracing::info!(session = %id, error = %e.message, "not started; retrying later");
            let _ = msg.ack_with(AckKind::Nak(Some(ack_wait))).await;
            None
        }
        Err(e) => {
            // The run cannot even start here (its workflow or config is gone,
            // the provider is not set up): record why, so the submitter sees it.
            tracing::error!(session = %id, error = %e.message, "cannot start the run");
            let store = store.clone();
            let sid = id.to_owned();
            let message = e.message.clone();
            let _ =
                tokio::task::spawn_blocking(move || record_failure(&store, &sid, &message)).await;
            let _ = msg.ack().await;
            None
        }
    }
}

/// While the run goes on: keep the message in progress, answer the control
/// requests for it, and release it after the approval hold.
async fn watch(
    cluster: &Cluster,
    gateway: &Arc<Gateway>,
    msg: &jetstream::Message,
    live: &LiveRun,
    id: &str,
    mut control: async_nats::Subscriber,
) {
    // An approval the run reaches is decided by the submitting server's
    // client: its `approve` arrives on the control subject. Past
    // `approval_hold` without one, the run is released as `waiting_approval`
    // (its slot is not held for a human who left); `approve` then queues it.
    let hold = cluster.options.approval_hold;
    let mut waiting_since: Option<tokio::time::Instant> = None;
    let mut beat =
        tokio::time::interval((cluster.options.ack_wait / 3).max(Duration::from_millis(100)));
    beat.tick().await;
    let finished = live.finished();
    tokio::pin!(finished);
    loop {
        let release_at = waiting_since.map(|t| t + hold);
        tokio::select! {
            _ = &mut finished => break,
            _ = beat.tick() => {
                if let Err(e) = msg.ack_with(AckKind::Progress).await {
                    tracing::warn!(session = %id, error = %e, "in-progress ack failed");
                }
            }
            _ = sleep_until(release_at) => {
                waiting_since = None;
                let reason = format!(
                    "no decision came within the worker's approval hold ({}); `approve` it and it is queued again",
                    humantime::format_duration(hold)
                );
                gateway.release_approval(id, reason);
            }
            req = control.next() => {
                let Some(req) = req else { continue };
                let answer = obey(gateway, live, id, &req.payload).await;
                if let Some(reply) = req.reply {
                    let bytes = serde_json::to_vec(&answer).unwrap_or_default();
                    let _ = cluster.client.publish(reply, bytes.into()).await;
                }
            }
        }
        // The hold counts from when the run started waiting.
        match (
            live.status() == SessionStatus::WaitingApproval,
            waiting_since,
        ) {
            (true, None) => waiting_since = Some(tokio::time::Instant::now()),
            (false, Some(_)) => waiting_since = None,
            _ => {}
        }
    }
    let _ = control.unsubscribe().await;
}

/// Sleep until `at`; never, without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Carry out one control request for the run held here.
async fn obey(gateway: &Arc<Gateway>, live: &LiveRun, id: &str, payload: &[u8]) -> ControlReply {
    let request = match serde_json::from_slice::<Control>(payload) {
        Ok(r) => r,
        Err(e) => {
            return ControlReply {
                error: Some(format!("not a control request: {e}")),
                code: Some(agentfile_wire::rpc::code::INVALID_PARAMS),
                gone: false,
            };
        }
    };
    match request {
        Control::Cancel => {
            live.cancel();
            ControlReply::default()
        }
        Control::Approve { approve, note } => {
            let params = agentfile_wire::rpc::ApproveParams {
                session_id: id.to_owned(),
                approve,
                note,
            };
            match gateway.approve_live(&params).await {
                Some(Ok(_)) => ControlReply::default(),
                Some(Err(e)) => ControlReply {
                    error: Some(e.message),
                    code: Some(e.code),
                    gone: false,
                },
                // Ended here (released at the hold) before the request came.
                None => ControlReply {
                    gone: true,
                    ..ControlReply::default()
                },
            }
        }
    }
}

async fn publish_events(
    client: async_nats::Client,
    subject: String,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    while let Some(bytes) = rx.recv().await {
        // At most once: the submitter reads anything lost from the store.
        let _ = client.publish(subject.clone(), bytes.into()).await;
    }
    let _ = tokio::time::timeout(NATS_WAIT, client.flush()).await;
}

/// Append `run_failed` to a session that could not start on this worker.
fn record_failure(store: &Arc<dyn agentfile_session::SessionStore>, id: &str, message: &str) {
    let Ok(meta) = store.get(id) else { return };
    let bus = agentfile_session::events::EventBus::new(id, meta.last_seq, Some(store.clone()));
    bus.emit(
        &agentfile_session::events::Scope::default(),
        agentfile_wire::events::EventBody::RunFailed {
            error: format!("the worker could not start the run: {message}"),
            termination_reason: agentfile_wire::events::TerminationReason::Error,
            usage: Default::default(),
        },
    );
}
