//! Sessions: every run's events, persisted as they happen, so any run can be
//! inspected, exported and resumed after a crash.
//!
//! The event log is the source of truth: the executor rebuilds a run's state
//! (completed goals, their outputs, loop iteration counts, approvals) by reading
//! a session's events back, so a store only has to append events durably and read
//! them in order. Every event is stored *before* any other sink sees it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::protocol::events::Event;

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionStatus {
    /// Accepted, waiting for a run slot (servers with a concurrency limit).
    Queued,
    Running,
    /// Paused until a human approves or rejects (`sessions approve`).
    WaitingApproval,
    Completed,
    Failed,
    Cancelled,
    /// The process died while it was running; resumable.
    Interrupted,
}

/// What a store keeps about a session besides its events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionMeta {
    pub id: String,
    pub workflow: String,
    /// The workflow file, absolute.
    pub path: String,
    pub workspace: String,
    pub inputs: BTreeMap<String, String>,
    pub status: SessionStatus,
    /// RFC 3339 UTC.
    pub created_at: String,
    pub updated_at: String,
    /// The highest `seq` stored (0 before the first event).
    pub last_seq: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("session store {path}: {message}")]
    Io { path: String, message: String },
    #[error("no session `{0}`")]
    NotFound(String),
    #[error("event seq {got} for session `{session}` is out of order (expected {expected})")]
    OutOfOrder {
        session: String,
        expected: u64,
        got: u64,
    },
}

/// A place sessions live: SQLite (default) or one JSON file per session.
/// Implementations are safe to share between threads and between processes.
pub trait SessionStore: Send + Sync {
    /// Record a new session (status and `last_seq` as given).
    fn create(&self, meta: &SessionMeta) -> Result<(), StoreError>;
    /// Append one event durably; `seq` must be `last_seq + 1`. Also keeps the
    /// session's `last_seq`, `updated_at` and (for terminal events) status current.
    fn append(&self, event: &Event) -> Result<(), StoreError>;
    fn set_status(&self, id: &str, status: SessionStatus) -> Result<(), StoreError>;
    fn get(&self, id: &str) -> Result<SessionMeta, StoreError>;
    /// Newest first, optionally only those with `status`, at most `limit`.
    fn list(
        &self,
        status: Option<SessionStatus>,
        limit: usize,
    ) -> Result<Vec<SessionMeta>, StoreError>;
    /// A session's events with `seq > after`, in order.
    fn events(&self, id: &str, after: u64) -> Result<Vec<Event>, StoreError>;
}
