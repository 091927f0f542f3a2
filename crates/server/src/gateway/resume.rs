//! Tasks left behind: a run started as a task (MCP or A2A: a session with a
//! task owner) whose server died or stopped is `interrupted` in the store,
//! and any server on the store takes it up again, on start or when someone
//! asks after it (CONTRACT §14, §21). A task never shows a terminal status
//! and then changes, so a resume here is the same run going on.
//!
//! Two servers may look at once: the store's claim
//! ([`SessionStore::claim_interrupted`]) lets one of them take the session,
//! and the other leaves it alone.
//!
//! [`SessionStore::claim_interrupted`]: agentfile_session::SessionStore::claim_interrupted

use std::sync::Arc;

use agentfile_session::{SessionStatus, SessionStore};
use agentfile_wire::rpc::RunParams;

use super::{Gateway, RunHooks};

/// How many interrupted sessions [`Gateway::resume_interrupted_tasks`] looks at.
const RESUME_SCAN: usize = 1_000;

impl Gateway {
    /// Run interrupted task `id` on here unless someone holds it (this
    /// process, or another with a live lease on the same store): `true` when
    /// this call started it. Its approvals wait in the store, as a task's do.
    pub async fn resume_task(self: &Arc<Self>, id: &str) -> bool {
        if self.is_live_here(id) {
            return false;
        }
        let Ok(store) = self.store() else {
            return false;
        };
        if !claim(&store, id).await {
            return false;
        }
        let started = self
            .submit(
                RunParams {
                    resume: Some(id.to_owned()),
                    ..RunParams::default()
                },
                RunHooks::default(),
            )
            .await;
        match started {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(session = %id, error = %e.message, "could not resume the task");
                unclaim(&store, id).await;
                false
            }
        }
    }

    /// Resume the interrupted tasks of the store, at most `--max-runs` of
    /// them, newest first (a server's start). Returns the ids resumed.
    pub async fn resume_interrupted_tasks(self: &Arc<Self>) -> Vec<String> {
        let Ok(store) = self.store() else {
            return Vec::new();
        };
        let max = match self.options().max_runs {
            0 => super::DEFAULT_MAX_RUNS,
            n => n,
        };
        let found = tokio::task::spawn_blocking(move || {
            let sessions = store.list(Some(SessionStatus::Interrupted), RESUME_SCAN)?;
            let mut tasks = Vec::new();
            for m in sessions {
                if tasks.len() >= max {
                    break;
                }
                if m.status == SessionStatus::Interrupted && store.task_owner(&m.id)?.is_some() {
                    tasks.push(m.id);
                }
            }
            Ok::<_, agentfile_session::StoreError>(tasks)
        })
        .await;
        let ids = match found {
            Ok(Ok(ids)) => ids,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not look for interrupted tasks");
                return Vec::new();
            }
            Err(_) => return Vec::new(),
        };
        let mut resumed = Vec::new();
        for id in ids {
            if self.resume_task(&id).await {
                resumed.push(id);
            }
        }
        if !resumed.is_empty() {
            tracing::info!(count = resumed.len(), "interrupted tasks resumed");
        }
        resumed
    }
}

/// Take interrupted session `id` for this server: `false` when another
/// server took it first (or it is not interrupted).
async fn claim(store: &Arc<dyn SessionStore>, id: &str) -> bool {
    let (store, id) = (store.clone(), id.to_owned());
    tokio::task::spawn_blocking(move || store.claim_interrupted(&id))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or(false)
}

/// Give a claimed session back when its resume did not start.
async fn unclaim(store: &Arc<dyn SessionStore>, id: &str) {
    let (store, id) = (store.clone(), id.to_owned());
    let _ = tokio::task::spawn_blocking(move || store.set_status(&id, SessionStatus::Interrupted))
        .await;
}
