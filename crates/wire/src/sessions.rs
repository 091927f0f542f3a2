//! Sessions as the wire shows them (`sessions`, `sessions list --format json`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
    /// Waiting at a suspend step for a signal (`sessions signal`).
    Suspended,
}

impl SessionStatus {
    /// Every status, for parsing and for tests.
    pub const ALL: [SessionStatus; 8] = [
        SessionStatus::Queued,
        SessionStatus::Running,
        SessionStatus::WaitingApproval,
        SessionStatus::Completed,
        SessionStatus::Failed,
        SessionStatus::Cancelled,
        SessionStatus::Interrupted,
        SessionStatus::Suspended,
    ];

    /// The name as written in JSON, in the database and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Queued => "queued",
            SessionStatus::Running => "running",
            SessionStatus::WaitingApproval => "waiting_approval",
            SessionStatus::Completed => "completed",
            SessionStatus::Failed => "failed",
            SessionStatus::Cancelled => "cancelled",
            SessionStatus::Interrupted => "interrupted",
            SessionStatus::Suspended => "suspended",
        }
    }

    /// The status named `name` (as [`SessionStatus::as_str`] writes it).
    pub fn parse(name: &str) -> Option<SessionStatus> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Completed, failed or cancelled: the run ended by itself.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            SessionStatus::Completed | SessionStatus::Failed | SessionStatus::Cancelled
        )
    }
}

impl std::fmt::Display for SessionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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
