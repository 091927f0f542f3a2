//! Runs held by another process on the same store, reached through the store
//! itself (PostgreSQL; CONTRACT §22): several servers behind one load
//! balancer without NATS, each running its runs in process. A server asked
//! to approve or cancel a run another holds sends the request through the
//! store ([`SessionStore::request`]); the holder hears it
//! ([`RunService::hear_requests`]) and acts on its own run as if asked
//! directly. The sender reads the store for the effect (the approval no
//! longer pending, the session ended) and answers once it is there, or says
//! the holder did not take it.
//!
//! With NATS the cluster's control subject comes first ([`super::Remote`]);
//! this is for the runs nobody answers there.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use agentfile_session::owner::{Owner, OwnerRecord, effective_status};
use agentfile_session::{RunAction, RunRequest, SessionStatus, SessionStore};
use agentfile_wire::rpc::{ApproveParams, CancelParams, RpcError, code};
use tokio::sync::broadcast::error::RecvError;

use super::{RunService, SETTLE_WAIT, lock};

impl RunService {
    /// Act on the requests other processes send through `store` (opened at
    /// `at`) to the runs this process holds; once per store.
    pub(super) fn hear_requests(self: &Arc<Self>, at: &Path, store: &Arc<dyn SessionStore>) {
        if !lock(&self.heard).insert(at.to_owned()) {
            return;
        }
        let Some(mut requests) = store.requests() else {
            return;
        };
        let service = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let request = match requests.recv().await {
                    Ok(r) => r,
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(
                            lost = n,
                            "requests to runs came faster than they were taken; their senders say so"
                        );
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                };
                let Some(service) = service.upgrade() else {
                    return;
                };
                if service.is_live_here(&request.session) {
                    service.obey(request).await;
                }
            }
        });
    }

    /// Carry out `request` for a run held here, as if it had come directly.
    async fn obey(self: &Arc<Self>, request: RunRequest) {
        let id = request.session;
        let done = match request.action {
            // Only the run held here: one that ended meanwhile is its
            // sender's to record and resume.
            RunAction::Approve { approve, note } => {
                let p = ApproveParams {
                    session_id: id.clone(),
                    approve,
                    note,
                };
                match self.approve_live(&p).await {
                    Some(done) => done.map(drop),
                    None => Ok(()),
                }
            }
            RunAction::Cancel => self
                .cancel(CancelParams {
                    session_id: id.clone(),
                })
                .await
                .map(drop),
        };
        if let Err(e) = done {
            tracing::info!(session = %id, error = %e.message, "a request to a run held here was refused");
        }
    }

    /// Send `action` to the live process, not this one, that holds session
    /// `id` on `store`: the holder when sent; `None` when nobody else holds
    /// it or the store carries no requests.
    pub(super) async fn ask_holder(
        &self,
        store: &Arc<dyn SessionStore>,
        id: &str,
        action: RunAction,
    ) -> Option<Owner> {
        let (store, id) = (store.clone(), id.to_owned());
        tokio::task::spawn_blocking(move || {
            let holder = store.owner(&id).ok()??;
            if !holds(&holder) || !in_run(&store, &id) {
                return None;
            }
            store
                .request(&id, &action)
                .ok()
                .filter(|sent| *sent)
                .map(|_| holder.owner)
        })
        .await
        .ok()?
    }

    /// Wait, at most [`SETTLE_WAIT`], until the approval session `id` waited
    /// at (`asked`, its request's `seq`) is no longer pending in the store:
    /// whether it went.
    pub(super) async fn settled_approval(
        &self,
        store: &Arc<dyn SessionStore>,
        id: &str,
        asked: Option<u64>,
    ) -> bool {
        if asked.is_none() {
            return true;
        }
        let deadline = Instant::now() + SETTLE_WAIT;
        while Instant::now() < deadline {
            let (store, sid) = (store.clone(), id.to_owned());
            let pending = tokio::task::spawn_blocking(move || store.pending_approval(&sid))
                .await
                .ok()
                .and_then(Result::ok);
            if pending.is_some_and(|now| now != asked) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }
}

/// Whether `holder` is a live process other than this one: on this machine,
/// its process is there; elsewhere, it beat recently.
fn holds(holder: &OwnerRecord) -> bool {
    holder.owner != *Owner::current()
        && effective_status(
            SessionStatus::Running,
            Some(holder),
            &holder.heartbeat_at,
            SystemTime::now(),
        ) == SessionStatus::Running
}

/// Whether session `id`'s last event leaves it inside a run (not one that
/// ended, e.g. at an approval no one was there to answer): only then does
/// its owner hold it.
fn in_run(store: &Arc<dyn SessionStore>, id: &str) -> bool {
    let Ok(meta) = store.get(id) else {
        return false;
    };
    store
        .events(id, meta.last_seq.saturating_sub(1))
        .ok()
        .and_then(|events| events.last().map(|e| !e.body.is_terminal()))
        .unwrap_or(false)
}

/// The refusal when the holder did not take `what` within [`SETTLE_WAIT`].
pub(super) fn not_taken(id: &str, holder: &Owner, what: &str) -> RpcError {
    RpcError::new(
        code::SESSION_STATE,
        format!(
            "session `{id}` is held by process {} on {}, which did not take the {what} within {}s; \
             try again, or send it to that server",
            holder.pid,
            holder.host,
            SETTLE_WAIT.as_secs()
        ),
    )
}
