//! Sessions: every run's events, persisted as they happen, so any run can be
//! inspected, exported and resumed after a crash.
//!
//! The event log is the source of truth: the executor rebuilds a run's state
//! (completed goals, their outputs, loop iteration counts, approvals) by reading
//! a session's events back, so a store only has to append events durably and read
//! them in order. Every event is stored *before* any other sink sees it.
//!
//! # Layout
//!
//! - this file: the [`SessionStore`] interface every backend implements, the
//!   shared rules (which events change a session's status, what a valid session
//!   id is), [`open`] (the backend and path a configuration asks for) and
//!   [`new_session_id`].
//! - [`sqlite`]: the default backend, one SQLite database in WAL mode shared
//!   safely by several processes; derived `messages` and `tool_calls` tables,
//!   large strings stored once in `blobs`, the `memory` table of the memory tools.
//! - [`postgres`]: the same tables in PostgreSQL, for runs on several
//!   machines; a lease keeps two processes from running one session at once.
//! - [`file`]: one JSON file per session plus an append-only JSON Lines event log,
//!   for people who want plain files.
//! - [`fires`]: the daemon's fire records ([`FireRecord`]), claimed once per
//!   trigger and idempotency key across every process sharing a store, so
//!   each scheduled instant, webhook delivery and event fires exactly once.
//! - [`owner`]: who runs a session and whether they still do, so a run killed
//!   with `kill -9` reads as `interrupted` instead of `running` forever.
//! - [`browse`]: a page of sessions at a time and a summary of each, for
//!   the web view.
//! - [`changes`]: wake-ups for those following a session another process
//!   runs ([`SessionStore::watch`]), so they need not poll.
//! - [`export`]: a session's full transcript as JSON or Markdown, rendered from
//!   its events alone.
//! - [`events`]: the event bus, which stamps each event, writes it to the store
//!   and only then hands it to the sinks; and `Notices`, where other crates
//!   leave errors a run survives.
//!
//! What this crate is not: the resume logic. Deciding which goals are complete
//! and what to run next is the executor's, from [`SessionStore::events`]; a store
//! never interprets a run beyond the status rules of [`status_after`].

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use agentfile_config::Config;
use agentfile_wire::events::{Event, EventBody, rfc3339};

pub mod browse;
pub mod changes;
pub mod events;
pub mod export;
pub mod file;
pub mod fires;
pub mod owner;
pub mod postgres;
mod row;
pub mod sqlite;

pub use agentfile_wire::sessions::{SessionMeta, SessionStatus};
pub use browse::{Cursor, SessionQuery, SessionSummary};
pub use changes::{Changes, RunAction, RunRequest, Watch};
pub use file::FileStore;
pub use fires::{FireKind, FireOutcome, FireRecord};
pub use owner::{Owner, OwnerRecord};
pub use postgres::PgStore;
pub use sqlite::{Durability, SqliteStore};

/// Why a store could not do what was asked. Every variant that concerns a file
/// names it, so the message alone says where to look.
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
    /// Stored data that cannot be read back: a bad row, a garbled line in the
    /// middle of an event log. Nothing is repaired or dropped silently.
    #[error("session store {path} is damaged: {message}")]
    Corrupt { path: String, message: String },
    /// The database was written by a newer agentfile; it is left untouched.
    #[error(
        "session database {path} has schema version {found}, but this agentfile knows only up to \
         {supported}; upgrade agentfile, or point `session.path` (PostgreSQL: the URL in \
         `session.url_env`) at another database"
    )]
    TooNew {
        path: String,
        found: i64,
        supported: i64,
    },
    #[error("session `{0}` already exists")]
    AlreadyExists(String),
    #[error(
        "`{0}` is not a valid session id (1 to 128 ASCII letters, digits, `-` or `_`, not starting with `-`)"
    )]
    InvalidId(String),
    #[error(
        "unknown session store `{0}` in config `session.store`; use `sqlite`, `file` or `postgres`"
    )]
    UnknownBackend(String),
    #[error("session `{0}` is not waiting for an approval")]
    NoPendingApproval(String),
    #[error(
        "the approval requested at seq {seq} of session `{session}` was already {}",
        if *approved { "approved" } else { "rejected" }
    )]
    AlreadyDecided {
        session: String,
        seq: u64,
        approved: bool,
    },
    /// Another process holds the session's lease (PostgreSQL store): it is
    /// running the session, so this one may not append to it.
    #[error(
        "session `{session}` is being run by {owner}, whose lease lasts until {until}; wait for \
         that run to end (or, if it died, for its lease to expire) before resuming it"
    )]
    LeaseHeld {
        session: String,
        owner: String,
        until: String,
    },
    #[error("this session store does not support {0}")]
    Unsupported(&'static str),
    /// The session belongs to another principal: its owner, once recorded,
    /// never changes ([`SessionStore::set_principal`]).
    #[error("session `{0}` belongs to another principal; its owner does not change")]
    OwnedByAnother(String),
    /// A fire record that cannot be stored as given (see
    /// [`FireRecord`]).
    #[error("fire `{key}` of trigger `{trigger}`: {message}")]
    InvalidFire {
        trigger: String,
        key: String,
        message: String,
    },
    /// No fire record with this trigger and key was claimed.
    #[error("no fire `{key}` of trigger `{trigger}`")]
    NoFire { trigger: String, key: String },
    /// The disk (or the file size limit) is full. Nothing stored before is
    /// damaged, and the write that failed left nothing behind.
    #[error(
        "session store {path}: disk full ({message}); what was stored before is intact — \
         free some space (or point `session.path` at another disk), then continue the run \
         with `agentfile sessions resume`"
    )]
    DiskFull { path: String, message: String },
}

impl StoreError {
    /// Whether this is a full disk, which no retry will fix until a person
    /// frees space.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, StoreError::DiskFull { .. })
    }
}

/// `ENOSPC` (no space left) and `EFBIG` (the process's file size limit,
/// `ulimit -f`): both mean nothing more can be written until someone acts.
pub(crate) fn io_is_full(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull
        || e.kind() == std::io::ErrorKind::FileTooLarge
        || e.kind() == std::io::ErrorKind::QuotaExceeded
}

/// A human's decision on an `approval_required` event (`sessions approve ID
/// [--reject]`, JSON-RPC `approve`). Recorded by whoever decides, read by the run
/// that waits for it (or by the resumed run when the waiting one died).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Approval {
    pub session_id: String,
    /// The `seq` of the `approval_required` event this decides.
    pub seq_requested: u64,
    pub approved: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub note: Option<String>,
    /// RFC 3339 UTC.
    pub decided_at: String,
}

/// A place sessions live: SQLite (default) or one JSON file per session.
/// Implementations are safe to share between threads and between processes.
///
/// The provided methods (`append_batch`, `pending_approval`, the approvals) have
/// defaults so that a test double only needs the required ones; both real
/// backends override them.
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

    /// At most `limit` of a session's events with `seq > after`, in order:
    /// the start of what [`events`](Self::events) returns. The default reads
    /// them all and cuts; every real store reads only those it returns (the
    /// limit is in the query), so a poll for the next hundred events of a
    /// session of a million costs a hundred.
    fn events_page(&self, id: &str, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        let mut events = self.events(id, after)?;
        events.truncate(limit);
        Ok(events)
    }

    /// Append several events with one durable commit (group commit): all of them
    /// or, on any error, none. Each must follow the one before, as for
    /// [`SessionStore::append`].
    fn append_batch(&self, events: &[Event]) -> Result<(), StoreError> {
        events.iter().try_for_each(|e| self.append(e))
    }

    /// A page of sessions for a person browsing them: newest first, those
    /// `query` matches, after its cursor. The default filters `list`; SQLite
    /// reads only the page, by its `(created_at, id)` index.
    fn page(&self, query: &SessionQuery) -> Result<Vec<SessionMeta>, StoreError> {
        let limit = query.limit();
        let mut out = self.list(query.status, usize::MAX)?;
        out.retain(|m| query.matches(m));
        out.truncate(limit);
        Ok(out)
    }

    /// What a session's events add up to: its trigger, when it ended, its
    /// usage ([`browse::summarize`]).
    fn summary(&self, id: &str) -> Result<SessionSummary, StoreError> {
        Ok(browse::summarize(&self.events(id, 0)?))
    }

    /// The workflow names sessions were recorded under, sorted, at most 1,000.
    fn workflows(&self) -> Result<Vec<String>, StoreError> {
        let mut names: Vec<String> = self
            .list(None, usize::MAX)?
            .into_iter()
            .map(|m| m.workflow)
            .collect();
        names.sort();
        names.dedup();
        names.truncate(1000);
        Ok(names)
    }

    /// Watch session `id` for appends made by any process sharing this
    /// store, so a follower of a run elsewhere waits for a wake-up instead
    /// of polling. Take the watch *before* reading the store, then read, then
    /// wait on [`Watch::changed`]: nothing appended after the watch began is
    /// missed. A wake-up means "read again", nothing more, and one can be
    /// lost (a dropped connection); followers re-read now and then anyway.
    /// `None`: this store cannot hear other processes (SQLite, files; the
    /// default) or watches too many sessions already; poll.
    fn watch(&self, id: &str) -> Option<Watch> {
        let _ = id;
        None
    }

    /// Ask the process holding session `id`'s run (another process on this
    /// store) to act on `action` (see [`changes`]): `Ok(true)` when sent, and
    /// nothing says it was heard; read the store for its effect. `Ok(false)`:
    /// this store carries no requests (SQLite, files; the default).
    fn request(&self, id: &str, action: &RunAction) -> Result<bool, StoreError> {
        let _ = (id, action);
        Ok(false)
    }

    /// The requests other processes send to the runs of this store, for a
    /// process that holds runs; `None`: this store carries none.
    fn requests(&self) -> Option<tokio::sync::broadcast::Receiver<RunRequest>> {
        None
    }

    /// The `seq` of the session's `approval_required` event that no
    /// `approval_resolved` has answered yet, if any.
    fn pending_approval(&self, id: &str) -> Result<Option<u64>, StoreError> {
        Ok(pending_approval_in(&self.events(id, 0)?))
    }

    /// Record a human's decision on the session's pending approval. The first
    /// decision wins: a second one is [`StoreError::AlreadyDecided`], and a session
    /// that is not waiting is [`StoreError::NoPendingApproval`]. Safe to call from
    /// another process while the run waits, or after it died.
    fn record_approval(
        &self,
        id: &str,
        approved: bool,
        note: Option<&str>,
    ) -> Result<Approval, StoreError> {
        let _ = (id, approved, note);
        Err(StoreError::Unsupported("approvals"))
    }

    /// The decision recorded for the `approval_required` event at `seq_requested`.
    fn approval(&self, id: &str, seq_requested: u64) -> Result<Option<Approval>, StoreError> {
        let _ = (id, seq_requested);
        Err(StoreError::Unsupported("approvals"))
    }

    /// The process recorded as running the session, with its last heartbeat.
    /// Stores record it themselves: whoever creates a session `queued` or
    /// `running`, sets one of those statuses, or appends an event that makes it
    /// running (`run_started`, `approval_resolved`) becomes its owner.
    fn owner(&self, id: &str) -> Result<Option<OwnerRecord>, StoreError> {
        let _ = id;
        Ok(None)
    }

    /// Record `owner` as the session's owner, as if it had claimed it at
    /// `owner.heartbeat_at`. For handing a session over, and for tests.
    fn record_owner(&self, id: &str, owner: &OwnerRecord) -> Result<(), StoreError> {
        let _ = (id, owner);
        Err(StoreError::Unsupported("owners"))
    }

    /// Refresh the heartbeat of a session this process owns; a session owned
    /// by another process is left alone.
    fn heartbeat(&self, id: &str) -> Result<(), StoreError> {
        let _ = id;
        Ok(())
    }

    /// Who a session belongs to as an MCP task (an opaque principal string
    /// such as `local:1000` or `token:…`), or `None` for a session that was
    /// not started as a task. Durable: a server started again on the same
    /// store serves the task to the same principal only.
    fn task_owner(&self, id: &str) -> Result<Option<String>, StoreError> {
        self.get(id)?;
        Ok(None)
    }

    /// Record the principal a session belongs to as an MCP task. It is also
    /// the session's [`principal`](Self::principal), and refused with
    /// [`StoreError::OwnedByAnother`] when another principal owns it.
    fn set_task_owner(&self, id: &str, principal: &str) -> Result<(), StoreError> {
        let _ = (id, principal);
        Err(StoreError::Unsupported("task owners"))
    }

    /// The principal a session belongs to (an opaque string such as
    /// `token:…` or `local:1000`), whatever door started it: an MCP task, a
    /// blocking MCP run over HTTP with a bearer token. `None` for a session
    /// no principal owns (the CLI's, the daemon's, JSON-RPC's): the
    /// operator's. The owner rule of every listener reads it. Durable, and
    /// fixed once recorded.
    fn principal(&self, id: &str) -> Result<Option<String>, StoreError> {
        self.task_owner(id)
    }

    /// [`SessionStore::principal`] of each of `ids`, in their order (`None`
    /// for a session that is gone): one read where the store can (a page of
    /// the web view checks every row's owner).
    fn principals(&self, ids: &[String]) -> Result<Vec<Option<String>>, StoreError> {
        ids.iter()
            .map(|id| match self.principal(id) {
                Err(StoreError::NotFound(_) | StoreError::InvalidId(_)) => Ok(None),
                other => other,
            })
            .collect()
    }

    /// [`SessionStore::summary`] of each of `ids`, in their order (the
    /// default for a session that is gone): one trip where the store can.
    fn summaries(&self, ids: &[String]) -> Result<Vec<SessionSummary>, StoreError> {
        ids.iter()
            .map(|id| match self.summary(id) {
                Err(StoreError::NotFound(_) | StoreError::InvalidId(_)) => {
                    Ok(SessionSummary::default())
                }
                other => other,
            })
            .collect()
    }

    /// Record the principal session `id` belongs to. Recorded once: setting
    /// the same principal again is a no-op, another one is refused with
    /// [`StoreError::OwnedByAnother`] and nothing changes (a resume, or
    /// settings a caller supplies, never move a session to someone else).
    fn set_principal(&self, id: &str, principal: &str) -> Result<(), StoreError> {
        let _ = (id, principal);
        Err(StoreError::Unsupported("session owners"))
    }

    /// The per-call settings a session's run started with (provider, model,
    /// budgets, …: a JSON object its runner defines, never secrets), for a
    /// resume to use again; `None` when none were recorded.
    fn run_settings(&self, id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        self.get(id)?;
        Ok(None)
    }

    /// Record the per-call settings of a session's run (see
    /// [`run_settings`](Self::run_settings)).
    fn set_run_settings(&self, id: &str, settings: &serde_json::Value) -> Result<(), StoreError> {
        let _ = (id, settings);
        Err(StoreError::Unsupported("run settings"))
    }

    /// Take an `interrupted` session to run it here: at once, it becomes
    /// `running`, owned by this process, unless it no longer reads
    /// `interrupted` (another process took it first, or it ended): then
    /// `false` and nothing is written. Two servers starting on one store call
    /// it for the same task, and only one of them gets `true`. SQLite and the
    /// file store decide under their write lock; this default (PostgreSQL) by
    /// `set_status`, whose lease refuses a second claimer.
    fn claim_interrupted(&self, id: &str) -> Result<bool, StoreError> {
        if self.get(id)?.status != SessionStatus::Interrupted {
            return Ok(false);
        }
        match self.set_status(id, SessionStatus::Running) {
            Ok(()) => Ok(true),
            Err(StoreError::LeaseHeld { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Mark `interrupted` every `queued` or `running` session whose owner is
    /// gone (see [`owner::effective_status`]), and return their ids. Servers
    /// call it when they start, so what a crash left behind is written down
    /// once and listed as resumable. Safe to run while other processes run
    /// sessions: a live owner's session is never touched, and a session
    /// claimed again between the look and the write is left as it is.
    fn reap_orphans(&self) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }

    /// Write `fire` unless a record with the same `(trigger, key)` exists,
    /// atomically across every process sharing the store: `true` when this
    /// call inserted it (this process owns the fire and runs it), `false`
    /// when someone already had (the record is left as it was). The daemon
    /// claims *before* it starts the run, so a crash between the two leaves
    /// the fire recorded (without a session) rather than lost or doubled.
    /// A record whose times are not RFC 3339 is [`StoreError::InvalidFire`].
    fn claim_fire(&self, fire: &FireRecord) -> Result<bool, StoreError> {
        let _ = fire;
        Err(StoreError::Unsupported("fire records"))
    }

    /// The fire record of `trigger` with idempotency key `key`, if claimed.
    fn fire(&self, trigger: &str, key: &str) -> Result<Option<FireRecord>, StoreError> {
        let _ = (trigger, key);
        Err(StoreError::Unsupported("fire records"))
    }

    /// Link a claimed fire to the session its run started
    /// ([`StoreError::NoFire`] when it was never claimed).
    fn set_fire_session(
        &self,
        trigger: &str,
        key: &str,
        session_id: &str,
    ) -> Result<(), StoreError> {
        let _ = (trigger, key, session_id);
        Err(StoreError::Unsupported("fire records"))
    }

    /// Change a claimed fire's outcome and reason (a fire claimed as `fired`
    /// whose run could not start, say); `reason: None` clears it.
    fn finish_fire(
        &self,
        trigger: &str,
        key: &str,
        outcome: FireOutcome,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        let _ = (trigger, key, outcome, reason);
        Err(StoreError::Unsupported("fire records"))
    }

    /// Record what a fire's run cost (for `max_cost_usd_per_day`).
    fn set_fire_cost(&self, trigger: &str, key: &str, cost_usd: f64) -> Result<(), StoreError> {
        let _ = (trigger, key, cost_usd);
        Err(StoreError::Unsupported("fire records"))
    }

    /// Fire records, of one trigger or of all, newest first (by `fired_at`,
    /// then `scheduled_for`, trigger and key, descending), at most `limit`.
    fn fires(&self, trigger: Option<&str>, limit: usize) -> Result<Vec<FireRecord>, StoreError> {
        let _ = (trigger, limit);
        Err(StoreError::Unsupported("fire records"))
    }

    /// The record with the latest `scheduled_for` among `trigger`'s fires
    /// whose outcome is `fired` or `skipped` (records without a
    /// `scheduled_for` are not considered): where catch-up after downtime
    /// starts counting.
    fn last_fire(&self, trigger: &str) -> Result<Option<FireRecord>, StoreError> {
        let _ = trigger;
        Err(StoreError::Unsupported("fire records"))
    }

    /// How many of `trigger`'s fires with outcome `fired` have `fired_at` in
    /// `[from, to)`, and the sum of their known costs (the per-day quota).
    fn fired_between(
        &self,
        trigger: &str,
        from: SystemTime,
        to: SystemTime,
    ) -> Result<(u64, f64), StoreError> {
        let _ = (trigger, from, to);
        Err(StoreError::Unsupported("fire records"))
    }
}

/// `queued` and `running`: the statuses a process holds, and that turn into
/// `interrupted` when it dies (see [`owner`]).
pub(crate) fn is_live(status: SessionStatus) -> bool {
    matches!(status, SessionStatus::Queued | SessionStatus::Running)
}

/// How appending `body` changes a session's status, if it does: `run_started`
/// (a new or resumed run) and `approval_resolved` make it running,
/// `approval_required` waiting, and the three terminal events completed, failed
/// or cancelled. Both backends apply exactly this rule.
pub fn status_after(body: &EventBody) -> Option<SessionStatus> {
    match body {
        EventBody::RunStarted { .. } | EventBody::ApprovalResolved { .. } => {
            Some(SessionStatus::Running)
        }
        EventBody::ApprovalRequired { .. } => Some(SessionStatus::WaitingApproval),
        EventBody::RunComplete { .. } => Some(SessionStatus::Completed),
        EventBody::RunFailed { .. } => Some(SessionStatus::Failed),
        EventBody::RunCancelled { .. } => Some(SessionStatus::Cancelled),
        EventBody::RunSuspended { .. } => Some(SessionStatus::Suspended),
        _ => None,
    }
}

/// The `seq` of the last `approval_required` in `events` that no later
/// `approval_resolved` answers.
pub fn pending_approval_in(events: &[Event]) -> Option<u64> {
    let mut pending = None;
    for e in events {
        match e.body {
            EventBody::ApprovalRequired { .. } => pending = Some(e.seq),
            EventBody::ApprovalResolved { .. } => pending = None,
            _ => {}
        }
    }
    pending
}

/// Session ids become file names in the file store and travel through shells
/// and URLs, so both backends accept only a conservative alphabet.
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('-')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Which backend a configuration selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    File,
    Postgres,
}

/// The environment variable a PostgreSQL store's URL is read from when
/// `session.url_env` is not set.
pub const DEFAULT_URL_ENV: &str = "AGENTFILE_DATABASE_URL";

/// The backend and location the configuration asks for: `session.store`
/// (`sqlite` when unset) and `session.path`, else `<workspace>/.agentfile/sessions.db`
/// for SQLite and `<workspace>/.agentfile/sessions/` for files. A relative
/// `session.path` is taken relative to the workspace, like every other path a
/// run uses. For PostgreSQL the location is `postgres:$VAR`, the variable the
/// URL is read from (never the URL itself, which may hold a password).
pub fn location(config: &Config, workspace: &Path) -> Result<(Backend, PathBuf), StoreError> {
    let backend = match config.session.store.as_deref() {
        None | Some("sqlite") => Backend::Sqlite,
        Some("file") => Backend::File,
        Some("postgres") => Backend::Postgres,
        Some(other) => return Err(StoreError::UnknownBackend(other.to_owned())),
    };
    if backend == Backend::Postgres {
        return Ok((
            backend,
            PathBuf::from(format!("postgres:${}", url_env(config))),
        ));
    }
    let path = match &config.session.path {
        Some(p) => workspace.join(p),
        None => workspace.join(".agentfile").join(match backend {
            Backend::Sqlite => "sessions.db",
            Backend::File | Backend::Postgres => "sessions",
        }),
    };
    Ok((backend, path))
}

/// Open the session store the configuration asks for (see [`location`]),
/// creating its folder, database or migrations as needed. PostgreSQL's URL is
/// read from the environment variable [`url_env`] names; the database must
/// exist and the server answer, else this fails at once.
pub fn open(config: &Config, workspace: &Path) -> Result<Box<dyn SessionStore>, StoreError> {
    Ok(match location(config, workspace)? {
        (Backend::Sqlite, path) => Box::new(SqliteStore::open_with(
            &path,
            sqlite::Options {
                durability: config.session.durability.unwrap_or_default(),
                ..sqlite::Options::default()
            },
        )?),
        (Backend::File, path) => Box::new(FileStore::open(&path)?),
        (Backend::Postgres, _) => Box::new(PgStore::from_env(url_env(config))?),
    })
}

/// The environment variable the PostgreSQL URL is read from: `session.url_env`,
/// else [`DEFAULT_URL_ENV`].
pub fn url_env(config: &Config) -> &str {
    config
        .session
        .url_env
        .as_deref()
        .filter(|v| !v.is_empty())
        .unwrap_or(DEFAULT_URL_ENV)
}

/// A new session id: `YYYYMMDD-HHMMSS-` and 24 random hex digits, e.g.
/// `20261122-100000-3fa94c0e1b27a0c4d9e1f207`. Ids sort by creation time (to
/// the second). The 96 random bits make an id unguessable (an MCP task id is
/// the session id, and knowing one is enough to poll it on a shared store) and
/// make two processes starting runs in the same second collide with negligible
/// probability (`create` refuses a duplicate anyway).
pub fn new_session_id() -> String {
    let ts = now();
    // `rfc3339` is fixed-width: 2026-11-22T10:00:00.123Z
    let digits: String = ts.chars().take(19).filter(char::is_ascii_digit).collect();
    let (date, time) = digits.split_at(digits.len().min(8));
    let high = random_u64();
    let low = random_u64() & 0xffff_ffff;
    format!("{date}-{time}-{high:016x}{low:08x}")
}

/// 64 random bits without a dependency: the kernel's generator when it can be
/// read, always mixed with std's randomly keyed hasher, the pid, the time and a
/// counter, so ids stay unique within a process even without `/dev/urandom`.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::io::Read;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);

    let mut os = [0u8; 8];
    let _ = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut os));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    h.write_u128(nanos);
    h.finish() ^ u64::from_le_bytes(os)
}

/// The current time as the stores write it (RFC 3339 UTC, milliseconds).
pub(crate) fn now() -> String {
    rfc3339(std::time::SystemTime::now())
}

/// The later of two RFC 3339 UTC timestamps. They are fixed-width, so the
/// string order is the time order.
pub(crate) fn later(a: &str, b: &str) -> String {
    if b > a { b.to_owned() } else { a.to_owned() }
}

/// The suspends of a stored session still waiting: (node path, events).
pub fn pending_suspends(events: &[Event]) -> Vec<(String, Vec<String>)> {
    use agentfile_wire::events::EventBody;
    let mut waiting: Vec<(String, Vec<String>)> = Vec::new();
    for e in events {
        match (&e.body, &e.node) {
            (EventBody::Suspended { events, .. }, Some(node)) => {
                waiting.retain(|(p, _)| p != node);
                waiting.push((node.clone(), events.clone()));
            }
            (EventBody::Signal { event, .. }, _) => {
                // A signal goes to the first suspend that waits for it.
                if let Some(i) = waiting.iter().position(|(_, evs)| evs.contains(event)) {
                    waiting.remove(i);
                }
            }
            (EventBody::StepComplete { .. } | EventBody::NodeComplete { .. }, Some(node)) => {
                waiting.retain(|(p, _)| p != node);
            }
            _ => {}
        }
    }
    waiting
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 30 item 18: `session.durability = "full"` reaches SQLite.
    #[test]
    fn item_18_the_config_chooses_sqlite_durability() {
        let dir = std::env::temp_dir().join(format!("agentfile-durability-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (value, want) in [
            (None, Durability::Normal),
            (Some(Durability::Normal), Durability::Normal),
            (Some(Durability::Full), Durability::Full),
        ] {
            let mut config = Config::default();
            config.session.durability = value;
            let (_, path) = location(&config, &dir).unwrap();
            let store = SqliteStore::open_with(
                &path,
                sqlite::Options {
                    durability: config.session.durability.unwrap_or_default(),
                    ..sqlite::Options::default()
                },
            )
            .unwrap();
            assert_eq!(store.durability().unwrap(), want, "{value:?}");
            drop(store);
            // `open` itself honours it too.
            drop(open(&config, &dir).unwrap());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn ids_are_valid_unique_and_shaped() {
        let ids: std::collections::BTreeSet<String> =
            (0..10_000).map(|_| new_session_id()).collect();
        assert_eq!(ids.len(), 10_000);
        for id in ids.iter().take(3) {
            assert!(is_valid_id(id), "{id}");
            let parts: Vec<&str> = id.split('-').collect();
            assert_eq!(parts.len(), 3, "{id}");
            assert_eq!((parts[0].len(), parts[1].len(), parts[2].len()), (8, 6, 24));
            assert!(parts[2].bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        }
    }

    #[test]
    fn id_alphabet() {
        for bad in ["", "../x", "a/b", "a.b", "-x", "a b", &"x".repeat(129)] {
            assert!(!is_valid_id(bad), "{bad:?}");
        }
        assert!(is_valid_id("20261122-100000-abcdef012345"));
        assert!(is_valid_id("run_1"));
    }

    #[test]
    fn statuses_round_trip() {
        for s in SessionStatus::ALL {
            assert_eq!(SessionStatus::parse(s.as_str()), Some(s));
            assert_eq!(
                serde_json::to_value(s).ok(),
                Some(serde_json::Value::String(s.as_str().to_owned()))
            );
        }
        assert_eq!(SessionStatus::parse("done"), None);
    }

    #[test]
    fn location_follows_config() {
        let ws = Path::new("/ws");
        let mut c = Config::default();
        let (b, p) = location(&c, ws).unwrap();
        assert_eq!(
            (b, p),
            (Backend::Sqlite, PathBuf::from("/ws/.agentfile/sessions.db"))
        );
        c.session.store = Some("file".into());
        let (b, p) = location(&c, ws).unwrap();
        assert_eq!(
            (b, p),
            (Backend::File, PathBuf::from("/ws/.agentfile/sessions"))
        );
        c.session.path = Some("runs".into());
        assert_eq!(location(&c, ws).unwrap().1, PathBuf::from("/ws/runs"));
        c.session.path = Some("/abs/db".into());
        assert_eq!(location(&c, ws).unwrap().1, PathBuf::from("/abs/db"));
        c.session.store = Some("redis".into());
        let e = location(&c, ws).unwrap_err().to_string();
        assert!(e.contains("`redis`") && e.contains("sqlite"), "{e}");
    }

    #[test]
    fn later_is_time_order() {
        assert_eq!(
            later("2026-01-01T00:00:00.000Z", "2025-12-31T23:59:59.999Z"),
            "2026-01-01T00:00:00.000Z"
        );
        assert_eq!(
            later("2025-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000Z"),
            "2026-01-01T00:00:00.000Z"
        );
    }
}
