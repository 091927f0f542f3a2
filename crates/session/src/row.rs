//! What the SQL stores (SQLite and PostgreSQL) share between a row and the
//! types above them: a `sessions` row before it is checked, and the `data`
//! object an event is stored as. Each backend reads the columns with its own
//! driver; what they mean is decided here, once.

use std::time::SystemTime;

use serde_json::{Map, Value};

use super::owner::{Owner, OwnerRecord, effective_status};
use super::{SessionMeta, SessionStatus, StoreError};
use agentfile_wire::events::EventBody;

/// A `sessions` row as stored, before it is checked; the columns in the
/// order both stores' `META_COLUMNS` select them.
pub(crate) struct RawMeta {
    pub id: String,
    pub workflow: String,
    pub path: String,
    pub workspace: String,
    pub inputs: String,
    pub status: String,
    pub created_at: String,
    pub updated_at: String,
    pub last_seq: i64,
    pub owner_pid: Option<i64>,
    pub owner_host: Option<String>,
    pub owner_start: Option<String>,
    pub heartbeat_at: Option<String>,
}

impl RawMeta {
    /// Who runs the session, as recorded, if anyone.
    pub fn owner(&self) -> Option<OwnerRecord> {
        Some(OwnerRecord {
            owner: Owner {
                // A pid that does not fit is nobody's: the owner reads as gone.
                pid: u32::try_from(self.owner_pid?).unwrap_or(0),
                host: self.owner_host.clone().unwrap_or_default(),
                start: self.owner_start.clone().unwrap_or_default(),
            },
            heartbeat_at: self.heartbeat_at.clone().unwrap_or_default(),
        })
    }

    /// The session as reported: its stored status, or `interrupted` when it
    /// is queued or running and its owner is gone (as of `now`). `corrupt`
    /// makes the backend's error for a row that cannot be read.
    pub fn into_meta(
        self,
        now: SystemTime,
        corrupt: impl Fn(String) -> StoreError,
    ) -> Result<SessionMeta, StoreError> {
        let stored = SessionStatus::parse(&self.status).ok_or_else(|| {
            corrupt(format!(
                "session `{}` has unknown status `{}`",
                self.id, self.status
            ))
        })?;
        let status = effective_status(stored, self.owner().as_ref(), &self.updated_at, now);
        let inputs = serde_json::from_str(&self.inputs)
            .map_err(|e| corrupt(format!("session `{}` has unreadable inputs: {e}", self.id)))?;
        Ok(SessionMeta {
            last_seq: u64::try_from(self.last_seq)
                .map_err(|_| corrupt(format!("negative last_seq {}", self.last_seq)))?,
            id: self.id,
            workflow: self.workflow,
            path: self.path,
            workspace: self.workspace,
            inputs,
            status,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// The `data` object of an event body as JSON text, serialised straight from
/// the body (no [`Value`] copy of it on the way: a run's outputs can be
/// large); `None` for a body without data.
pub(crate) fn data_text(body: &EventBody) -> Option<String> {
    let mut full = serde_json::to_string(body).ok()?;
    // Adjacently tagged: `{"type":"<kind>","data":<data>}`.
    let prefix = format!("{{\"type\":\"{}\",\"data\":", body.kind());
    if !(full.starts_with(&prefix) && full.ends_with('}')) {
        return None;
    }
    full.pop();
    full.drain(..prefix.len());
    Some(full)
}

/// The `data` object of an event body, as it appears on the wire.
pub(crate) fn event_data(body: &EventBody) -> Result<Value, StoreError> {
    let wire = serde_json::to_value(body).map_err(|e| StoreError::Io {
        path: String::new(),
        message: format!("cannot serialise a {} event: {e}", body.kind()),
    })?;
    match wire {
        Value::Object(mut m) => Ok(m.remove("data").unwrap_or(Value::Object(Map::new()))),
        _ => Ok(Value::Object(Map::new())),
    }
}
