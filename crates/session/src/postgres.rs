//! Sessions in PostgreSQL: the store for several machines (workers taking runs
//! from a queue, CONTRACT §13), selected with `session.store = "postgres"`, the
//! connection URL read from the environment variable `session.url_env` names
//! (`AGENTFILE_DATABASE_URL` by default).
//!
//! What it is for: the same contract and the same tables as [`super::sqlite`]
//! (`sessions`, `events`, the derived `messages` and `tool_calls`, `approvals`,
//! `blobs`, `memory`, `schema_migrations`), reachable from every machine that
//! can reach the server. What it is not: a TLS client. Only unencrypted
//! connections (loopback, a private network) are supported for now; a URL that
//! asks for `sslmode=require` or `verify-*` is refused with an error saying so.
//!
//! # Invariants
//!
//! - `append` returns only after its transaction committed: one transaction
//!   per call (or per [`SessionStore::append_batch`]) that locks the session's
//!   row (`SELECT … FOR UPDATE`), checks `seq == last_seq + 1` and writes the
//!   event, its derived rows and the session's `last_seq` together, or nothing.
//! - What `events` returns is exactly what was appended (`serde_json` equal and
//!   byte-for-byte equal when serialised again): the event's `data` object is
//!   stored as JSON text, beside its columns. Strings are stored inline
//!   (PostgreSQL compresses large values itself); `blobs` exists so queries
//!   written for the SQLite schema work, and stays empty.
//! - Reading a session costs what that session holds: events are keyed by
//!   `(session_id, seq)`.
//! - Several processes and machines: row locks order the writers of one
//!   session; schema migrations run in one transaction under an advisory lock
//!   (`pg_advisory_lock`, taken before the transaction begins so that it sees
//!   what the previous holder committed), so many processes opening a fresh
//!   database at once apply them once; a database with a newer schema version is refused
//!   untouched ([`StoreError::TooNew`]).
//! - Nothing read from the database is trusted: an unreadable row is
//!   [`StoreError::Corrupt`], never a panic.
//! - The URL and its password never appear in errors or logs: errors name the
//!   server as `host:port/database` only.
//!
//! - Fire records (`fires`, migration 4; see [`super::fires`]): a claim is an
//!   `INSERT … ON CONFLICT DO NOTHING` on the `(trigger, key)` primary key in
//!   its own transaction, so of several connections on any machines exactly
//!   one inserts a given fire; a claim retried after its COMMIT's answer was
//!   lost recognises its own row by a random per-call token (`claim`).
//!
//! # The lease
//!
//! Concurrent runs of one session from two processes are impossible by
//! construction. The `sessions` row carries the owner (`owner_pid`,
//! `owner_host`, `owner_start`, `heartbeat_at`, as in SQLite) and
//! `lease_until`, a time on the *database server's* clock (so the clocks of
//! the machines do not matter):
//!
//! - Whoever makes a session run takes the lease: creating it `running`,
//!   setting that status, or appending an event that makes it running
//!   (`run_started`, `approval_resolved`). The lease lasts [`Options::lease`]
//!   (default [`owner::STALE_AFTER`](super::owner::STALE_AFTER)). A `queued`
//!   session is owned (for [`super::owner`]'s liveness rule) but not leased:
//!   it waits for whichever process picks it up, perhaps on another machine.
//! - The holder renews it with every append and heartbeat (the event bus beats
//!   every ten seconds), and releases it by appending a terminal event
//!   (`run_complete`, `run_failed`, `run_cancelled`, `run_suspended`) or by
//!   setting a status that is neither live nor `waiting_approval`.
//!   [`SessionStore::record_owner`] hands it over, as if taken at the given
//!   heartbeat.
//! - While another owner holds a valid lease, an append or a `set_status` to
//!   `queued` or `running` is refused with [`StoreError::LeaseHeld`] and writes nothing. A lease is
//!   void once it expires, and at once when its owner is on this machine and
//!   its process is gone (the rule of [`super::owner`]); then anyone may append,
//!   and the next claim takes it over.
//!
//! # Connections
//!
//! The trait is synchronous and is called from plain threads and from inside
//! tokio tasks, so the store never blocks on a runtime of the caller's: one
//! background thread runs its own current-thread runtime and owns the
//! connection; every call sends it a job and waits for the answer. Statements
//! are prepared once per connection. When the connection breaks (the server
//! restarted, the network dropped), the job is retried on a new connection with
//! exponential backoff for up to [`Options::retry_for`] (60 s by default). An
//! append whose first attempt may have committed (the connection broke during
//! `COMMIT`) is idempotent: events already stored at those seqs with the same
//! content count as success. TCP keepalives notice a server that vanished
//! without closing the connection within about half a minute; a row lock is
//! waited for at most 30 s (`lock_timeout`, as SQLite's busy timeout), and a
//! transaction left idle by a client that vanished is ended by the server
//! after 60 s (`idle_in_transaction_session_timeout`).
//!
//! # Followers
//!
//! Every append's transaction notifies the channel `agentfile_events` with
//! the session's id just before its `COMMIT`, so a store in another process
//! that [watches](SessionStore::watch) the session wakes its followers as
//! soon as the events are readable. The listening connection is a second
//! one, opened on the first watch and kept on the connection thread's
//! runtime; see [`listen`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value};
use tokio_postgres::config::Host;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row, Statement};

mod browse;
mod listen;

use super::browse::{SessionQuery, SessionSummary};
use super::changes::{Changes, RunAction, RunRequest, Watch};
use super::fires::{FireKind, FireOutcome, FireRecord, system_ms};
use super::owner::{Owner, OwnerRecord, STALE_AFTER};
use super::row::{RawMeta, event_data};
use super::{
    Approval, SessionMeta, SessionStatus, SessionStore, StoreError, is_live, is_valid_id,
    new_session_id, now, status_after,
};
use agentfile_wire::events::{Event, EventBody};

/// The schema version this code writes; a database with a higher version in
/// `schema_migrations` is refused, untouched.
pub const SCHEMA_VERSION: i64 = 7;

/// How long a call keeps retrying after the connection broke.
pub const DEFAULT_RETRY_FOR: Duration = Duration::from_secs(60);

/// How long `open` waits for the server to answer.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The key of the advisory lock migrations run under ("agentfil").
const MIGRATION_LOCK: i64 = 0x6167_656e_7466_696c;

/// Migration `n` (1-based) takes a database from version `n - 1` to `n`. Never
/// edit a released entry; add a new one. Text columns compared or sorted as
/// times or ids use the `C` collation, so their order is byte order (as in
/// SQLite) whatever the database's locale.
const MIGRATIONS: &[&str] = &[
    MIGRATION_1,
    MIGRATION_2,
    MIGRATION_3,
    MIGRATION_4,
    MIGRATION_5,
    MIGRATION_6,
    browse::MIGRATION_7,
];

/// The principal each session belongs to, whatever door started it (see
/// [`SessionStore::principal`]); NULL for the operator's sessions. A task's
/// owner (migration 2) becomes its session's principal: nothing stored is
/// lost. Written once: the `UPDATE`s that record it match only a row with
/// none or the same.
const MIGRATION_5: &str = r#"
ALTER TABLE sessions ADD COLUMN principal TEXT;
UPDATE sessions SET principal = task_owner WHERE task_owner IS NOT NULL;
"#;

/// Whether an event was copied from another session's journal by a fork
/// (`sessions fork`, the event's `replayed`) rather than produced by this
/// session's run, as in SQLite's migration 9. Every event stored before was
/// its own run's.
const MIGRATION_6: &str = r#"
ALTER TABLE events ADD COLUMN replayed BOOLEAN NOT NULL DEFAULT FALSE;
"#;

/// The principal a session belongs to as an MCP task; NULL for sessions not
/// started as one.
const MIGRATION_2: &str = r#"
ALTER TABLE sessions ADD COLUMN task_owner TEXT;
"#;

/// The per-call settings a session's run started with (JSON text), for a
/// resume to use again; NULL when none were recorded.
const MIGRATION_3: &str = r#"
ALTER TABLE sessions ADD COLUMN run_settings TEXT;
"#;

/// The daemon's fire records (see [`crate::fires`]), as in SQLite's
/// migration 7: the primary key makes `(trigger, key)` unique, so of several
/// connections inserting one fire exactly one succeeds. `claim` is a random
/// token of the inserting call, so a claim retried after its commit's answer
/// was lost recognises its own row.
const MIGRATION_4: &str = r#"
CREATE TABLE fires(
    trigger       TEXT COLLATE "C" NOT NULL,
    key           TEXT COLLATE "C" NOT NULL,
    kind          TEXT NOT NULL,
    scheduled_for TEXT,
    scheduled_ms  BIGINT,
    fired_at      TEXT NOT NULL,
    fired_ms      BIGINT NOT NULL,
    outcome       TEXT NOT NULL,
    reason        TEXT,
    session_id    TEXT,
    cost_usd      DOUBLE PRECISION,
    claim         TEXT NOT NULL,
    PRIMARY KEY(trigger, key)
);
CREATE INDEX fires_by_time ON fires(fired_ms);
CREATE INDEX fires_by_trigger_time ON fires(trigger, fired_ms);
CREATE INDEX fires_by_trigger_schedule ON fires(trigger, scheduled_ms);
"#;

/// The columns `fire_from_row` reads, in its order, and the history order.
const FIRE_COLUMNS: &str = "SELECT trigger, key, kind, scheduled_for, fired_at, outcome, reason, \
     session_id, cost_usd FROM fires";
const FIRE_ORDER: &str = "ORDER BY fired_ms DESC, scheduled_ms DESC NULLS LAST, trigger DESC, \
     key DESC";

const MIGRATION_1: &str = r#"
CREATE TABLE schema_migrations(
    version    BIGINT PRIMARY KEY,
    applied_at TEXT NOT NULL
);

CREATE TABLE sessions(
    id           TEXT COLLATE "C" PRIMARY KEY,
    workflow     TEXT NOT NULL,
    path         TEXT NOT NULL,
    workspace    TEXT NOT NULL,
    inputs       TEXT NOT NULL,          -- JSON object of strings
    status       TEXT COLLATE "C" NOT NULL,
    created_at   TEXT COLLATE "C" NOT NULL,
    updated_at   TEXT COLLATE "C" NOT NULL,
    last_seq     BIGINT NOT NULL DEFAULT 0,
    owner_pid    BIGINT,
    owner_host   TEXT,
    owner_start  TEXT,
    heartbeat_at TEXT COLLATE "C",
    lease_until  TIMESTAMPTZ            -- the server's clock; NULL: not held
);
CREATE INDEX sessions_by_created ON sessions(created_at, id);
CREATE INDEX sessions_by_status ON sessions(status, created_at, id);

-- Kept for queries written against the SQLite schema; this store keeps
-- strings inline, so it stays empty.
CREATE TABLE blobs(
    hash    TEXT COLLATE "C" PRIMARY KEY,
    size    BIGINT NOT NULL,
    content TEXT NOT NULL
);

-- The source of truth. `data` is the event's `data` object as JSON text.
CREATE TABLE events(
    session_id     TEXT COLLATE "C" NOT NULL REFERENCES sessions(id),
    seq            BIGINT NOT NULL,
    schema_version BIGINT NOT NULL,
    ts             TEXT NOT NULL,
    type           TEXT COLLATE "C" NOT NULL,
    step           TEXT,
    goal           TEXT,
    agent          TEXT,
    iteration      BIGINT,
    data           TEXT NOT NULL,
    node           TEXT,
    node_kind      TEXT,
    PRIMARY KEY(session_id, seq)
);

CREATE TABLE messages(
    session_id TEXT COLLATE "C" NOT NULL,
    seq        BIGINT NOT NULL,
    step       TEXT,
    goal       TEXT,
    agent      TEXT,
    iteration  BIGINT,
    role       TEXT NOT NULL,
    content    TEXT,
    blob       TEXT COLLATE "C" REFERENCES blobs(hash),
    tool_calls TEXT,                   -- JSON array, assistant only
    PRIMARY KEY(session_id, seq),
    FOREIGN KEY(session_id, seq) REFERENCES events(session_id, seq)
);

CREATE VIEW messages_text AS
    SELECT m.session_id, m.seq, m.step, m.goal, m.agent, m.iteration, m.role,
           coalesce(m.content, b.content) AS content, m.tool_calls
    FROM messages m LEFT JOIN blobs b ON b.hash = m.blob;

CREATE TABLE tool_calls(
    session_id    TEXT COLLATE "C" NOT NULL,
    seq           BIGINT NOT NULL,
    call_id       TEXT COLLATE "C" NOT NULL,
    tool          TEXT NOT NULL,
    step          TEXT,
    goal          TEXT,
    agent         TEXT,
    iteration     BIGINT,
    arguments     TEXT,
    result        TEXT,
    result_blob   TEXT COLLATE "C" REFERENCES blobs(hash),
    result_seq    BIGINT,
    is_error      BOOLEAN,
    duration_ms   BIGINT,
    denied_rule   TEXT,
    denied_reason TEXT,
    PRIMARY KEY(session_id, seq),
    FOREIGN KEY(session_id, seq) REFERENCES events(session_id, seq)
);
CREATE INDEX tool_calls_by_call ON tool_calls(session_id, call_id);

CREATE TABLE approvals(
    session_id    TEXT COLLATE "C" NOT NULL REFERENCES sessions(id),
    seq_requested BIGINT NOT NULL,
    approved      BOOLEAN NOT NULL,
    note          TEXT,
    decided_at    TEXT NOT NULL,
    PRIMARY KEY(session_id, seq_requested)
);

CREATE TABLE IF NOT EXISTS memory(agent_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, updated_at TEXT NOT NULL, PRIMARY KEY(agent_id, key));
"#;

/// The columns `RawMeta::from_row` reads, in its order.
const META_COLUMNS: &str = "SELECT id, workflow, path, workspace, inputs, status, created_at, \
                            updated_at, last_seq, owner_pid, owner_host, owner_start, \
                            heartbeat_at FROM sessions";

const EVENT_COLUMNS: &str =
    "seq, schema_version, ts, type, step, goal, agent, iteration, data, node, node_kind, replayed";

/// How to open a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// How long a call keeps reconnecting and retrying after the connection
    /// broke before it returns an error.
    pub retry_for: Duration,
    /// How long a lease lasts without a renewal (see the module documentation).
    pub lease: Duration,
    /// Who this store appends as. This process by default; tests use others to
    /// play a second machine.
    pub owner: Owner,
    /// How long connecting may take.
    pub connect_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            retry_for: DEFAULT_RETRY_FOR,
            lease: STALE_AFTER,
            owner: Owner::current().clone(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

/// A session store in a PostgreSQL database. See the module documentation.
pub struct PgStore {
    jobs: tokio::sync::mpsc::UnboundedSender<Job>,
    worker: Option<std::thread::JoinHandle<()>>,
    target: String,
    /// The sessions followers watch here.
    changes: Arc<Changes>,
    /// Whether the connection thread was asked to start listening.
    listening: AtomicBool,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        // Closing the channel ends the worker's loop, which closes the
        // connection.
        let (closed, _) = tokio::sync::mpsc::unbounded_channel();
        drop(std::mem::replace(&mut self.jobs, closed));
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl PgStore {
    /// Open the database whose URL the environment variable `var` holds.
    pub fn from_env(var: &str) -> Result<PgStore, StoreError> {
        let url = std::env::var(var).map_err(|_| StoreError::Io {
            path: format!("${var}"),
            message: format!(
                "`session.store` is `postgres` but the environment variable {var} (named by \
                 `session.url_env`) is not set; set it to a URL such as \
                 postgres://USER:PASSWORD@HOST:5432/DATABASE"
            ),
        })?;
        Self::open_with(&url, Options::default()).map_err(|e| match e {
            StoreError::Io { path, message } => StoreError::Io {
                path,
                message: format!("{message} (the URL is read from ${var})"),
            },
            other => other,
        })
    }

    /// Connect to the database at `url` (a `postgres://` URL or a
    /// `key=value` string) with default [`Options`], and bring its schema up
    /// to date.
    pub fn open(url: &str) -> Result<PgStore, StoreError> {
        Self::open_with(url, Options::default())
    }

    /// [`PgStore::open`] with explicit options. Fails at once, naming
    /// `host:port`, when the server cannot be reached.
    pub fn open_with(url: &str, options: Options) -> Result<PgStore, StoreError> {
        let config = parse_url(url)?;
        let target = describe(&config);
        let (jobs, rx) = tokio::sync::mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let worker_target = target.clone();
        let changes = Changes::new();
        let worker_changes = Arc::clone(&changes);
        let worker = std::thread::Builder::new()
            .name("agentfile-postgres".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = ready_tx.send(Err(StoreError::Io {
                            path: worker_target,
                            message: format!("cannot start the connection's runtime: {e}"),
                        }));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let mut worker = Worker {
                        config,
                        target: worker_target,
                        options,
                        conn: None,
                        changes: worker_changes,
                        listening: false,
                    };
                    let started = worker.start().await;
                    let ok = started.is_ok();
                    let _ = ready_tx.send(started);
                    if ok {
                        worker.serve(rx).await;
                    }
                });
            })
            .map_err(|e| StoreError::Io {
                path: target.clone(),
                message: format!("cannot start the connection thread: {e}"),
            })?;
        let started = ready_rx.recv().unwrap_or_else(|_| {
            Err(StoreError::Io {
                path: target.clone(),
                message: "the connection thread stopped before connecting".into(),
            })
        });
        match started {
            Ok(()) => Ok(PgStore {
                jobs,
                worker: Some(worker),
                target,
                changes,
                listening: AtomicBool::new(false),
            }),
            Err(e) => {
                let _ = worker.join();
                Err(e)
            }
        }
    }

    /// Where this store is, as errors name it: `host:port/database`.
    /// Open the listening connection unless it is open: `false` when the
    /// connection thread is gone. Nobody waits for `LISTEN`: watches are
    /// woken once it is in force.
    fn start_listening(&self) -> bool {
        if self.listening.swap(true, Ordering::AcqRel) {
            return true;
        }
        let (reply, _) = std::sync::mpsc::sync_channel(1);
        self.jobs.send((Op::Listen, reply)).is_ok()
    }

    pub fn target(&self) -> &str {
        &self.target
    }

    /// The schema version of the database.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        match self.call(Op::SchemaVersion)? {
            Reply::Version(v) => Ok(v),
            other => Err(self.unexpected(other)),
        }
    }

    fn call(&self, op: Op) -> Result<Reply, StoreError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let gone = || StoreError::Io {
            path: self.target.clone(),
            message: "the connection thread has stopped; open the store again".into(),
        };
        self.jobs.send((op, tx)).map_err(|_| gone())?;
        rx.recv().unwrap_or_else(|_| Err(gone()))
    }

    fn unexpected(&self, reply: Reply) -> StoreError {
        StoreError::Io {
            path: self.target.clone(),
            message: format!("internal error: unexpected reply {}", reply.name()),
        }
    }

    fn unit(&self, op: Op) -> Result<(), StoreError> {
        match self.call(op)? {
            Reply::Unit => Ok(()),
            other => Err(self.unexpected(other)),
        }
    }
}

impl SessionStore for PgStore {
    fn create(&self, meta: &SessionMeta) -> Result<(), StoreError> {
        if !is_valid_id(&meta.id) {
            return Err(StoreError::InvalidId(meta.id.clone()));
        }
        self.unit(Op::Create(meta.clone()))
    }

    fn append(&self, event: &Event) -> Result<(), StoreError> {
        self.append_batch(std::slice::from_ref(event))
    }

    fn append_batch(&self, events: &[Event]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        self.unit(Op::Append(events.to_vec()))
    }

    fn set_status(&self, id: &str, status: SessionStatus) -> Result<(), StoreError> {
        self.unit(Op::SetStatus(id.to_owned(), status))
    }

    fn get(&self, id: &str) -> Result<SessionMeta, StoreError> {
        match self.call(Op::Get(id.to_owned()))? {
            Reply::Meta(m) => Ok(m),
            other => Err(self.unexpected(other)),
        }
    }

    fn list(
        &self,
        status: Option<SessionStatus>,
        limit: usize,
    ) -> Result<Vec<SessionMeta>, StoreError> {
        match self.call(Op::List(status, limit))? {
            Reply::Metas(m) => Ok(m),
            other => Err(self.unexpected(other)),
        }
    }

    fn events(&self, id: &str, after: u64) -> Result<Vec<Event>, StoreError> {
        match self.call(Op::Events(id.to_owned(), after, None))? {
            Reply::Events(e) => Ok(e),
            other => Err(self.unexpected(other)),
        }
    }

    fn events_page(&self, id: &str, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        match self.call(Op::Events(id.to_owned(), after, Some(limit)))? {
            Reply::Events(e) => Ok(e),
            other => Err(self.unexpected(other)),
        }
    }

    fn page(&self, query: &SessionQuery) -> Result<Vec<SessionMeta>, StoreError> {
        match self.call(Op::Page(query.clone()))? {
            Reply::Metas(m) => Ok(m),
            other => Err(self.unexpected(other)),
        }
    }

    fn summary(&self, id: &str) -> Result<SessionSummary, StoreError> {
        match self.call(Op::Summary(id.to_owned()))? {
            Reply::Summary(s) => Ok(s),
            other => Err(self.unexpected(other)),
        }
    }

    fn workflows(&self) -> Result<Vec<String>, StoreError> {
        match self.call(Op::Workflows)? {
            Reply::Ids(names) => Ok(names),
            other => Err(self.unexpected(other)),
        }
    }

    /// Watches share one listening connection, opened (without waiting for
    /// it) on the first watch.
    fn watch(&self, id: &str) -> Option<Watch> {
        let watch = self.changes.watch(id)?;
        self.start_listening().then_some(watch)
    }

    /// Sent as a notification on `agentfile_requests` (at most once: a
    /// process not listening then never hears it).
    fn request(&self, id: &str, action: &RunAction) -> Result<bool, StoreError> {
        let request = RunRequest {
            session: id.to_owned(),
            action: action.clone(),
        }
        .bounded();
        // Strings and a flag: serializing cannot fail.
        let payload = serde_json::to_string(&request).unwrap_or_default();
        match self.call(Op::Request(payload))? {
            Reply::Unit => Ok(true),
            other => Err(self.unexpected(other)),
        }
    }

    /// Heard on the listening connection, opened now if it is not yet.
    fn requests(&self) -> Option<tokio::sync::broadcast::Receiver<RunRequest>> {
        let rx = self.changes.requests();
        self.start_listening().then_some(rx)
    }

    fn pending_approval(&self, id: &str) -> Result<Option<u64>, StoreError> {
        match self.call(Op::Pending(id.to_owned()))? {
            Reply::Seq(s) => Ok(s),
            other => Err(self.unexpected(other)),
        }
    }

    fn record_approval(
        &self,
        id: &str,
        approved: bool,
        note: Option<&str>,
    ) -> Result<Approval, StoreError> {
        let op = Op::RecordApproval {
            id: id.to_owned(),
            approved,
            note: note.map(str::to_owned),
            decided_at: now(),
        };
        match self.call(op)? {
            Reply::Approval(Some(a)) => Ok(a),
            other => Err(self.unexpected(other)),
        }
    }

    fn approval(&self, id: &str, seq_requested: u64) -> Result<Option<Approval>, StoreError> {
        match self.call(Op::Approval(id.to_owned(), seq_requested))? {
            Reply::Approval(a) => Ok(a),
            other => Err(self.unexpected(other)),
        }
    }

    fn owner(&self, id: &str) -> Result<Option<OwnerRecord>, StoreError> {
        match self.call(Op::Owner(id.to_owned()))? {
            Reply::Owner(o) => Ok(o),
            other => Err(self.unexpected(other)),
        }
    }

    fn record_owner(&self, id: &str, owner: &OwnerRecord) -> Result<(), StoreError> {
        self.unit(Op::RecordOwner(id.to_owned(), owner.clone()))
    }

    fn heartbeat(&self, id: &str) -> Result<(), StoreError> {
        self.unit(Op::Heartbeat(id.to_owned()))
    }

    fn task_owner(&self, id: &str) -> Result<Option<String>, StoreError> {
        match self.call(Op::TaskOwner(id.to_owned()))? {
            Reply::Principal(p) => Ok(p),
            other => Err(self.unexpected(other)),
        }
    }

    fn set_task_owner(&self, id: &str, principal: &str) -> Result<(), StoreError> {
        self.unit(Op::SetTaskOwner(id.to_owned(), principal.to_owned()))
    }

    fn principal(&self, id: &str) -> Result<Option<String>, StoreError> {
        match self.call(Op::Principal(id.to_owned()))? {
            Reply::Principal(p) => Ok(p),
            other => Err(self.unexpected(other)),
        }
    }

    /// One query for all of them.
    fn principals(&self, ids: &[String]) -> Result<Vec<Option<String>>, StoreError> {
        match self.call(Op::Principals(ids.to_vec()))? {
            Reply::Principals(p) => Ok(p),
            other => Err(self.unexpected(other)),
        }
    }

    /// One job on the connection, its queries pipelined.
    fn summaries(&self, ids: &[String]) -> Result<Vec<SessionSummary>, StoreError> {
        match self.call(Op::Summaries(ids.to_vec()))? {
            Reply::Summaries(s) => Ok(s),
            other => Err(self.unexpected(other)),
        }
    }

    fn set_principal(&self, id: &str, principal: &str) -> Result<(), StoreError> {
        self.unit(Op::SetPrincipal(id.to_owned(), principal.to_owned()))
    }

    fn run_settings(&self, id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        match self.call(Op::RunSettings(id.to_owned()))? {
            Reply::Principal(p) => Ok(p.and_then(|t| serde_json::from_str(&t).ok())),
            other => Err(self.unexpected(other)),
        }
    }

    fn set_run_settings(&self, id: &str, settings: &serde_json::Value) -> Result<(), StoreError> {
        self.unit(Op::SetRunSettings(id.to_owned(), settings.to_string()))
    }

    fn reap_orphans(&self) -> Result<Vec<String>, StoreError> {
        match self.call(Op::Reap)? {
            Reply::Ids(ids) => Ok(ids),
            other => Err(self.unexpected(other)),
        }
    }

    /// `INSERT … ON CONFLICT DO NOTHING`: the primary key decides who
    /// inserted, whatever the isolation level.
    fn claim_fire(&self, fire: &FireRecord) -> Result<bool, StoreError> {
        let (fired_ms, scheduled_ms) = fire.validate()?;
        let op = Op::ClaimFire {
            fire: fire.clone(),
            fired_ms,
            scheduled_ms,
            token: new_session_id(),
        };
        match self.call(op)? {
            Reply::Claimed(b) => Ok(b),
            other => Err(self.unexpected(other)),
        }
    }

    fn fire(&self, trigger: &str, key: &str) -> Result<Option<FireRecord>, StoreError> {
        match self.call(Op::Fire(trigger.to_owned(), key.to_owned()))? {
            Reply::Fires(mut f) => Ok(f.pop()),
            other => Err(self.unexpected(other)),
        }
    }

    fn set_fire_session(
        &self,
        trigger: &str,
        key: &str,
        session_id: &str,
    ) -> Result<(), StoreError> {
        self.unit(Op::UpdateFire {
            trigger: trigger.to_owned(),
            key: key.to_owned(),
            change: FireChange::Session(session_id.to_owned()),
        })
    }

    fn finish_fire(
        &self,
        trigger: &str,
        key: &str,
        outcome: FireOutcome,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        self.unit(Op::UpdateFire {
            trigger: trigger.to_owned(),
            key: key.to_owned(),
            change: FireChange::Outcome(outcome, reason.map(str::to_owned)),
        })
    }

    fn set_fire_cost(&self, trigger: &str, key: &str, cost_usd: f64) -> Result<(), StoreError> {
        if !cost_usd.is_finite() {
            return Err(StoreError::InvalidFire {
                trigger: trigger.to_owned(),
                key: key.to_owned(),
                message: "cost_usd must be a finite number".into(),
            });
        }
        self.unit(Op::UpdateFire {
            trigger: trigger.to_owned(),
            key: key.to_owned(),
            change: FireChange::Cost(cost_usd),
        })
    }

    fn fires(&self, trigger: Option<&str>, limit: usize) -> Result<Vec<FireRecord>, StoreError> {
        match self.call(Op::Fires(trigger.map(str::to_owned), limit))? {
            Reply::Fires(f) => Ok(f),
            other => Err(self.unexpected(other)),
        }
    }

    fn last_fire(&self, trigger: &str) -> Result<Option<FireRecord>, StoreError> {
        match self.call(Op::LastFire(trigger.to_owned()))? {
            Reply::Fires(mut f) => Ok(f.pop()),
            other => Err(self.unexpected(other)),
        }
    }

    fn fired_between(
        &self,
        trigger: &str,
        from: SystemTime,
        to: SystemTime,
    ) -> Result<(u64, f64), StoreError> {
        let op = Op::FiredBetween(trigger.to_owned(), system_ms(from), system_ms(to));
        match self.call(op)? {
            Reply::Quota(n, cost) => Ok((n, cost)),
            other => Err(self.unexpected(other)),
        }
    }

    fn claim_interrupted(&self, id: &str) -> Result<bool, StoreError> {
        match self.call(Op::ClaimInterrupted(id.to_owned()))? {
            Reply::Claimed(taken) => Ok(taken),
            other => Err(self.unexpected(other)),
        }
    }
}

/// What a caller asks the connection thread to do.
enum Op {
    Create(SessionMeta),
    Append(Vec<Event>),
    SetStatus(String, SessionStatus),
    Get(String),
    List(Option<SessionStatus>, usize),
    /// After a seq, at most a limit of them (all with `None`).
    Events(String, u64, Option<usize>),
    Page(SessionQuery),
    Summary(String),
    Summaries(Vec<String>),
    Workflows,
    Pending(String),
    RecordApproval {
        id: String,
        approved: bool,
        note: Option<String>,
        decided_at: String,
    },
    Approval(String, u64),
    Owner(String),
    RecordOwner(String, OwnerRecord),
    TaskOwner(String),
    SetTaskOwner(String, String),
    Principal(String),
    Principals(Vec<String>),
    SetPrincipal(String, String),
    RunSettings(String),
    SetRunSettings(String, String),
    Heartbeat(String),
    Reap,
    ClaimInterrupted(String),
    SchemaVersion,
    ClaimFire {
        fire: FireRecord,
        fired_ms: i64,
        scheduled_ms: Option<i64>,
        /// Random, per call: how a retry recognises the row it inserted.
        token: String,
    },
    Fire(String, String),
    UpdateFire {
        trigger: String,
        key: String,
        change: FireChange,
    },
    Fires(Option<String>, usize),
    LastFire(String),
    FiredBetween(String, i64, i64),
    /// Open the listening connection, if not yet open.
    Listen,
    /// Send a request (its JSON) to the process that holds a run.
    Request(String),
}

/// What `Op::UpdateFire` changes.
enum FireChange {
    Session(String),
    Outcome(FireOutcome, Option<String>),
    Cost(f64),
}

enum Reply {
    Unit,
    Meta(SessionMeta),
    Metas(Vec<SessionMeta>),
    Events(Vec<Event>),
    Summary(SessionSummary),
    Summaries(Vec<SessionSummary>),
    Seq(Option<u64>),
    Approval(Option<Approval>),
    Owner(Option<OwnerRecord>),
    Principal(Option<String>),
    Principals(Vec<Option<String>>),
    Ids(Vec<String>),
    Version(i64),
    Claimed(bool),
    Fires(Vec<FireRecord>),
    Quota(u64, f64),
}

impl Reply {
    fn name(&self) -> &'static str {
        match self {
            Reply::Unit => "unit",
            Reply::Meta(_) => "meta",
            Reply::Metas(_) => "metas",
            Reply::Events(_) => "events",
            Reply::Summary(_) => "summary",
            Reply::Summaries(_) => "summaries",
            Reply::Seq(_) => "seq",
            Reply::Approval(_) => "approval",
            Reply::Owner(_) => "owner",
            Reply::Principal(_) => "principal",
            Reply::Principals(_) => "principals",
            Reply::Ids(_) => "ids",
            Reply::Version(_) => "version",
            Reply::Claimed(_) => "claimed",
            Reply::Fires(_) => "fires",
            Reply::Quota(..) => "quota",
        }
    }
}

type Job = (Op, std::sync::mpsc::SyncSender<Result<Reply, StoreError>>);

/// Why an attempt failed: for good (reported to the caller), or because the
/// connection or the server's state made it fail this time (retried).
enum Failure {
    Store(StoreError),
    Retry { reconnect: bool, message: String },
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        Failure::Store(e)
    }
}

/// One connection and its prepared statements.
struct Conn {
    client: Client,
    statements: RefCell<HashMap<String, Statement>>,
}

/// The connection thread's state.
struct Worker {
    config: tokio_postgres::Config,
    target: String,
    options: Options,
    conn: Option<Conn>,
    /// Woken by the listening connection.
    changes: Arc<Changes>,
    /// Whether the listening task was started.
    listening: bool,
}

impl Worker {
    /// Connect once (no retry: a store that cannot connect fails fast) and
    /// migrate.
    async fn start(&mut self) -> Result<(), StoreError> {
        if let Err(f) = self.connect().await {
            let why = match f {
                Failure::Store(e) => return Err(e),
                Failure::Retry { message, .. } => message,
            };
            return Err(StoreError::Io {
                path: self.target.clone(),
                message: format!(
                    "cannot connect to PostgreSQL at {}: {why}; check that the server is \
                     running and reachable from here, and that the database URL is right",
                    host_port(&self.config)
                ),
            });
        }
        match self.execute(&Op::SchemaVersion, true).await? {
            Reply::Version(v) if v == SCHEMA_VERSION => Ok(()),
            _ => self.migrate().await,
        }
    }

    async fn serve(&mut self, mut rx: tokio::sync::mpsc::UnboundedReceiver<Job>) {
        while let Some((op, reply)) = rx.recv().await {
            if let Op::Listen = op {
                self.listen();
                let _ = reply.send(Ok(Reply::Unit));
                continue;
            }
            let result = self.execute(&op, false).await;
            let _ = reply.send(result);
        }
    }

    /// Start the listening task on this thread's runtime (it ends with it).
    fn listen(&mut self) {
        if self.listening {
            return;
        }
        self.listening = true;
        let mut config = self.tuned();
        config.application_name("agentfile-listen");
        tokio::spawn(listen::listen(
            config,
            self.target.clone(),
            Arc::clone(&self.changes),
        ));
    }

    /// The configuration connections are opened with.
    fn tuned(&self) -> tokio_postgres::Config {
        let mut config = self.config.clone();
        config.connect_timeout(self.options.connect_timeout);
        // A server that vanished without closing the connection (a machine
        // gone, a partition) is noticed in about half a minute rather than
        // the kernel's two hours, so the retry can begin.
        config
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(15))
            .keepalives_interval(Duration::from_secs(5))
            .keepalives_retries(3);
        #[cfg(target_os = "linux")]
        config.tcp_user_timeout(Duration::from_secs(30));
        config
    }

    async fn connect(&mut self) -> Result<(), Failure> {
        let config = self.tuned();
        let (client, connection) =
            config
                .connect(NoTls)
                .await
                .map_err(|e| match self.classify(e, "connect") {
                    Failure::Retry { message, .. } => Failure::Retry {
                        reconnect: true,
                        message,
                    },
                    // Authentication or a missing database: no retry helps.
                    Failure::Store(e) => Failure::Store(e),
                })?;
        // The connection's I/O runs beside the jobs on this thread's runtime;
        // it ends when the client is dropped or the server goes away.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        // No wait for a row lock is endless (SQLite's busy timeout), and a
        // client that vanished mid-transaction cannot hold its locks for long.
        client
            .batch_execute(
                "SET lock_timeout = '30s'; SET idle_in_transaction_session_timeout = '60s'",
            )
            .await
            .map_err(|e| self.classify(e, "configure the connection"))?;
        self.conn = Some(Conn {
            client,
            statements: RefCell::new(HashMap::new()),
        });
        Ok(())
    }

    /// Run `op`, reconnecting and retrying while the failure is the
    /// connection's, for up to `retry_for` (none when `once`).
    async fn execute(&mut self, op: &Op, once: bool) -> Result<Reply, StoreError> {
        let deadline = Instant::now() + self.options.retry_for;
        let mut delay = Duration::from_millis(50);
        let mut retried = false;
        loop {
            let attempt = match &self.conn {
                Some(c) if !c.client.is_closed() => {
                    let r = self.run(c, op, retried).await;
                    if r.is_err() && !c.client.is_closed() {
                        // Leave no transaction open for the next job.
                        let _ = c.client.batch_execute("ROLLBACK").await;
                    }
                    r
                }
                _ => match self.connect().await {
                    Ok(()) => continue,
                    Err(f) => Err(f),
                },
            };
            let message = match attempt {
                Ok(reply) => return Ok(reply),
                Err(Failure::Store(e)) => return Err(e),
                Err(Failure::Retry { reconnect, message }) => {
                    if reconnect {
                        self.conn = None;
                    }
                    message
                }
            };
            if once || Instant::now() + delay > deadline {
                return Err(StoreError::Io {
                    path: self.target.clone(),
                    message: format!(
                        "{message}; gave up after retrying for {} s — check that the \
                         PostgreSQL server at {} is running",
                        self.options.retry_for.as_secs(),
                        host_port(&self.config)
                    ),
                });
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(2));
            retried = true;
        }
    }

    async fn migrate(&mut self) -> Result<(), StoreError> {
        let deadline = Instant::now() + self.options.retry_for;
        loop {
            let Some(c) = &self.conn else {
                return Err(self.io("migrate: not connected".into()));
            };
            let r = self.migrate_in(c).await;
            if r.is_err() && !c.client.is_closed() {
                let _ = c.client.batch_execute("ROLLBACK").await;
            }
            match r {
                Ok(()) => return Ok(()),
                Err(Failure::Store(e)) => return Err(e),
                Err(Failure::Retry { message, .. }) => {
                    if Instant::now() > deadline {
                        return Err(self.io(message));
                    }
                    if self.conn.as_ref().is_none_or(|c| c.client.is_closed()) {
                        self.connect().await.map_err(|f| match f {
                            Failure::Store(e) => e,
                            Failure::Retry { message, .. } => self.io(message),
                        })?;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// Apply the missing migrations in one transaction, under an advisory
    /// lock taken *before* it begins: a transaction that waited for the lock
    /// inside itself could still look the tables up in the catalog as they
    /// were before the other process committed them.
    async fn migrate_in(&self, c: &Conn) -> Result<(), Failure> {
        let e = |doing: &'static str| move |err| self.classify(err, doing);
        c.client
            .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(e("wait for the migration lock"))?;
        let result = self.migrate_locked(c).await;
        if result.is_err() && !c.client.is_closed() {
            let _ = c.client.batch_execute("ROLLBACK").await;
        }
        // Closing the connection would release it too.
        let _ = c
            .client
            .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
            .await;
        result
    }

    async fn migrate_locked(&self, c: &Conn) -> Result<(), Failure> {
        let e = |doing: &'static str| move |err| self.classify(err, doing);
        c.client
            .batch_execute("BEGIN")
            .await
            .map_err(e("begin the migration"))?;
        // Read again under the lock: another process may have migrated
        // between our first look and now.
        let found = read_version(c)
            .await
            .map_err(e("read the schema version"))?;
        self.check_version(found)?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            let version = i as i64 + 1;
            c.client
                .batch_execute(sql)
                .await
                .map_err(e("apply a migration"))?;
            c.client
                .execute(
                    "INSERT INTO schema_migrations(version, applied_at) VALUES ($1, $2)",
                    &[&version, &now()],
                )
                .await
                .map_err(e("record a migration"))?;
        }
        c.client
            .batch_execute("COMMIT")
            .await
            .map_err(e("commit the migration"))
    }

    fn check_version(&self, found: i64) -> Result<(), StoreError> {
        if found > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: self.target.clone(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        if found < 0 {
            return Err(self.corrupt(format!("negative schema version {found}")));
        }
        Ok(())
    }

    fn io(&self, message: String) -> StoreError {
        StoreError::Io {
            path: self.target.clone(),
            message,
        }
    }

    fn corrupt(&self, message: String) -> StoreError {
        StoreError::Corrupt {
            path: self.target.clone(),
            message,
        }
    }

    /// Sort a driver error into "retry" (the connection broke, the server is
    /// restarting, a serialisation conflict) and "report".
    fn classify(&self, e: tokio_postgres::Error, doing: &str) -> Failure {
        if let Some(db) = e.as_db_error() {
            let code = db.code();
            let retry = code.code().starts_with("08")
                || *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW
                || *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::T_R_DEADLOCK_DETECTED
                || *code == SqlState::TOO_MANY_CONNECTIONS;
            let message = format!("cannot {doing}: {} ({})", db.message(), code.code());
            if retry {
                let reconnect = !matches!(
                    *code,
                    SqlState::T_R_SERIALIZATION_FAILURE | SqlState::T_R_DEADLOCK_DETECTED
                );
                return Failure::Retry { reconnect, message };
            }
            if *code == SqlState::LOCK_NOT_AVAILABLE {
                return Failure::Store(self.io(format!(
                    "{message}: another connection held the session for over 30 s; try again"
                )));
            }
            if *code == SqlState::DISK_FULL {
                return Failure::Store(StoreError::DiskFull {
                    path: self.target.clone(),
                    message: message.clone(),
                });
            }
            return Failure::Store(self.io(message));
        }
        let io = std::error::Error::source(&e)
            .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some());
        if e.is_closed() || io || doing == "connect" {
            return Failure::Retry {
                reconnect: true,
                message: format!("cannot {doing}: {}", error_chain(&e)),
            };
        }
        Failure::Store(self.io(format!("cannot {doing}: {}", error_chain(&e))))
    }

    fn err<'a>(&'a self, doing: &'a str) -> impl Fn(tokio_postgres::Error) -> Failure + 'a {
        move |e| self.classify(e, doing)
    }

    /// One attempt at `op` on `c`. `retry` is set when an earlier attempt
    /// failed with the connection, and may have committed.
    async fn run(&self, c: &Conn, op: &Op, retry: bool) -> Result<Reply, Failure> {
        match op {
            Op::SchemaVersion => Ok(Reply::Version(
                read_version(c)
                    .await
                    .map_err(self.err("read the schema version"))?,
            )),
            Op::Create(meta) => self.create(c, meta, retry).await.map(|()| Reply::Unit),
            Op::Append(events) => self.append(c, events, retry).await.map(|()| Reply::Unit),
            Op::SetStatus(id, status) => self.set_status(c, id, *status).await,
            Op::Get(id) => match self.read_meta(c, id).await? {
                Some(raw) => Ok(Reply::Meta(
                    raw.into_meta(SystemTime::now(), |m| self.corrupt(m))?,
                )),
                None => Err(StoreError::NotFound(id.clone()).into()),
            },
            Op::List(status, limit) => self.list(c, *status, *limit).await.map(Reply::Metas),
            Op::Events(id, after, limit) => {
                self.events(c, id, *after, *limit).await.map(Reply::Events)
            }
            Op::Page(query) => self.page(c, query).await.map(Reply::Metas),
            Op::Summary(id) => self.summary(c, id).await.map(Reply::Summary),
            Op::Workflows => self.workflows(c).await.map(Reply::Ids),
            Op::Pending(id) => {
                if self.read_meta(c, id).await?.is_none() {
                    return Err(StoreError::NotFound(id.clone()).into());
                }
                self.pending_in(c, id).await.map(Reply::Seq)
            }
            Op::RecordApproval {
                id,
                approved,
                note,
                decided_at,
            } => {
                let a = self
                    .record_approval(c, id, *approved, note.as_deref(), decided_at, retry)
                    .await?;
                Ok(Reply::Approval(Some(a)))
            }
            Op::Approval(id, seq) => {
                if self.read_meta(c, id).await?.is_none() {
                    return Err(StoreError::NotFound(id.clone()).into());
                }
                self.read_approval(c, id, *seq).await.map(Reply::Approval)
            }
            Op::Owner(id) => match self.read_meta(c, id).await? {
                Some(raw) => Ok(Reply::Owner(raw.owner())),
                None => Err(StoreError::NotFound(id.clone()).into()),
            },
            Op::RecordOwner(id, owner) => self.record_owner(c, id, owner).await,
            Op::TaskOwner(id) => {
                let sql = "SELECT task_owner FROM sessions WHERE id = $1";
                self.read_column(c, id, sql, "read the task owner").await
            }
            Op::SetTaskOwner(id, principal) => {
                self.write_principal(
                    c,
                    id,
                    principal,
                    "UPDATE sessions SET task_owner = $2, principal = $2 \
                     WHERE id = $1 AND (principal IS NULL OR principal = $2)",
                    "record the task owner",
                )
                .await
            }
            Op::Principal(id) => {
                let sql = "SELECT principal FROM sessions WHERE id = $1";
                self.read_column(c, id, sql, "read the session's owner")
                    .await
            }
            Op::Principals(ids) => self.principals(c, ids).await.map(Reply::Principals),
            Op::Summaries(ids) => self.summaries(c, ids).await.map(Reply::Summaries),
            Op::SetPrincipal(id, principal) => {
                self.write_principal(
                    c,
                    id,
                    principal,
                    "UPDATE sessions SET principal = $2 \
                     WHERE id = $1 AND (principal IS NULL OR principal = $2)",
                    "record the session's owner",
                )
                .await
            }
            Op::RunSettings(id) => {
                let sql = "SELECT run_settings FROM sessions WHERE id = $1";
                self.read_column(c, id, sql, "read the run settings").await
            }
            Op::SetRunSettings(id, settings) => self.set_run_settings(c, id, settings).await,
            Op::Heartbeat(id) => self.heartbeat(c, id).await,
            Op::Reap => self.reap(c).await.map(Reply::Ids),
            Op::ClaimFire {
                fire,
                fired_ms,
                scheduled_ms,
                token,
            } => self
                .claim_fire(c, fire, *fired_ms, *scheduled_ms, token, retry)
                .await
                .map(Reply::Claimed),
            Op::Fire(trigger, key) => {
                let sql = format!("{FIRE_COLUMNS} WHERE trigger = $1 AND key = $2");
                let rows = self
                    .query(c, &sql, &[trigger, key], "read the fire")
                    .await?;
                self.fires_from(&rows).map(Reply::Fires)
            }
            Op::UpdateFire {
                trigger,
                key,
                change,
            } => self.update_fire(c, trigger, key, change).await,
            Op::Fires(trigger, limit) => self.fires(c, trigger.as_deref(), *limit).await,
            Op::LastFire(trigger) => {
                let sql = format!(
                    "{FIRE_COLUMNS} WHERE trigger = $1 AND scheduled_ms IS NOT NULL \
                     AND outcome IN ('fired', 'skipped') \
                     ORDER BY scheduled_ms DESC, fired_ms DESC, key DESC LIMIT 1"
                );
                let rows = self
                    .query(c, &sql, &[trigger], "read the last fire")
                    .await?;
                self.fires_from(&rows).map(Reply::Fires)
            }
            Op::FiredBetween(trigger, from, to) => self.fired_between(c, trigger, *from, *to).await,
            Op::ClaimInterrupted(id) => self.claim_interrupted(c, id, retry).await,
            // Handled by `serve` before any connection is needed.
            Op::Listen => Ok(Reply::Unit),
            Op::Request(payload) => {
                let sql = format!("SELECT pg_notify('{}', $1)", listen::REQUESTS);
                self.query(c, &sql, &[payload], "send a request to a run")
                    .await
                    .map(|_| Reply::Unit)
            }
        }
    }

    /// One column of a session's row (the task owner, the principal, the
    /// run settings), read by `sql` with the id as `$1`.
    async fn read_column(
        &self,
        c: &Conn,
        id: &str,
        sql: &str,
        doing: &str,
    ) -> Result<Reply, Failure> {
        let row = self.query_opt(c, sql, &[&id], doing).await?;
        match row {
            Some(r) => Ok(Reply::Principal(r.get(0))),
            None => Err(StoreError::NotFound(id.to_owned()).into()),
        }
    }

    async fn record_owner(
        &self,
        c: &Conn,
        id: &str,
        owner: &OwnerRecord,
    ) -> Result<Reply, Failure> {
        let n = self
            .exec(
                c,
                "UPDATE sessions SET owner_pid = $2, owner_host = $3, owner_start = $4, \
                 heartbeat_at = $5, lease_until = nullif($5, '')::timestamptz \
                 + make_interval(secs => $6) WHERE id = $1",
                &[
                    &id,
                    &i64::from(owner.owner.pid),
                    &owner.owner.host,
                    &owner.owner.start,
                    &owner.heartbeat_at,
                    &self.lease_secs(),
                ],
                "record the owner",
            )
            .await?;
        if n == 0 {
            return Err(StoreError::NotFound(id.to_owned()).into());
        }
        Ok(Reply::Unit)
    }

    async fn set_run_settings(&self, c: &Conn, id: &str, settings: &str) -> Result<Reply, Failure> {
        let n = self
            .exec(
                c,
                "UPDATE sessions SET run_settings = $2 WHERE id = $1",
                &[&id, &settings],
                "record the run settings",
            )
            .await?;
        if n == 0 {
            return Err(StoreError::NotFound(id.to_owned()).into());
        }
        Ok(Reply::Unit)
    }

    async fn heartbeat(&self, c: &Conn, id: &str) -> Result<Reply, Failure> {
        let me = &self.options.owner;
        // A released lease stays released: the run has ended.
        self.exec(
            c,
            "UPDATE sessions SET heartbeat_at = $2, lease_until = CASE WHEN lease_until \
             IS NULL THEN NULL ELSE clock_timestamp() + make_interval(secs => $6) END \
             WHERE id = $1 AND owner_pid = $3 AND owner_start = $4 AND owner_host = $5",
            &[
                &id,
                &now(),
                &i64::from(me.pid),
                &me.start,
                &me.host,
                &self.lease_secs(),
            ],
            "record the heartbeat",
        )
        .await?;
        Ok(Reply::Unit)
    }

    async fn update_fire(
        &self,
        c: &Conn,
        trigger: &str,
        key: &str,
        change: &FireChange,
    ) -> Result<Reply, Failure> {
        let n = match change {
            FireChange::Session(id) => {
                self.exec(
                    c,
                    "UPDATE fires SET session_id = $3 WHERE trigger = $1 AND key = $2",
                    &[&trigger, &key, id],
                    "link the fire to its session",
                )
                .await?
            }
            FireChange::Outcome(outcome, reason) => {
                self.exec(
                    c,
                    "UPDATE fires SET outcome = $3, reason = $4 \
                     WHERE trigger = $1 AND key = $2",
                    &[&trigger, &key, &outcome.as_str(), reason],
                    "record the fire's outcome",
                )
                .await?
            }
            FireChange::Cost(cost) => {
                self.exec(
                    c,
                    "UPDATE fires SET cost_usd = $3 WHERE trigger = $1 AND key = $2",
                    &[&trigger, &key, cost],
                    "record the fire's cost",
                )
                .await?
            }
        };
        if n == 0 {
            return Err(StoreError::NoFire {
                trigger: trigger.to_owned(),
                key: key.to_owned(),
            }
            .into());
        }
        Ok(Reply::Unit)
    }

    /// The newest `limit` fires, of one trigger or of all.
    async fn fires(&self, c: &Conn, trigger: Option<&str>, limit: usize) -> Result<Reply, Failure> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = match trigger {
            Some(t) => {
                let sql = format!("{FIRE_COLUMNS} WHERE trigger = $1 {FIRE_ORDER} LIMIT $2");
                self.query(c, &sql, &[&t, &limit], "read the fires").await?
            }
            None => {
                let sql = format!("{FIRE_COLUMNS} {FIRE_ORDER} LIMIT $1");
                self.query(c, &sql, &[&limit], "read the fires").await?
            }
        };
        self.fires_from(&rows).map(Reply::Fires)
    }

    /// How many times `trigger` fired in `[from, to)` (ms), and at what cost.
    async fn fired_between(
        &self,
        c: &Conn,
        trigger: &str,
        from: i64,
        to: i64,
    ) -> Result<Reply, Failure> {
        let rows = self
            .query(
                c,
                "SELECT count(*)::bigint, coalesce(sum(cost_usd), 0)::float8 FROM fires \
                 WHERE trigger = $1 AND outcome = 'fired' AND fired_ms >= $2 \
                 AND fired_ms < $3",
                &[&trigger, &from, &to],
                "count the fires",
            )
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| Failure::Store(self.corrupt("no count of fires".into())))?;
        let n: i64 = self.get(row, 0)?;
        let cost: f64 = self.get(row, 1)?;
        let n = u64::try_from(n)
            .map_err(|_| Failure::Store(self.corrupt(format!("negative count {n}"))))?;
        Ok(Reply::Quota(n, cost))
    }

    async fn claim_fire(
        &self,
        c: &Conn,
        fire: &FireRecord,
        fired_ms: i64,
        scheduled_ms: Option<i64>,
        token: &str,
        retry: bool,
    ) -> Result<bool, Failure> {
        // An explicit transaction, like every write here: a connection cut
        // during its COMMIT is what `retry` below recognises.
        self.begin(c, "begin the claim").await?;
        let inserted = self
            .exec(
                c,
                "INSERT INTO fires(trigger, key, kind, scheduled_for, scheduled_ms, fired_at, \
                 fired_ms, outcome, reason, session_id, cost_usd, claim) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
                 ON CONFLICT(trigger, key) DO NOTHING",
                &[
                    &fire.trigger,
                    &fire.key,
                    &fire.kind.as_str(),
                    &fire.scheduled_for,
                    &scheduled_ms,
                    &fire.fired_at,
                    &fired_ms,
                    &fire.outcome.as_str(),
                    &fire.reason,
                    &fire.session_id,
                    &fire.cost_usd,
                    &token,
                ],
                "claim the fire",
            )
            .await?;
        self.commit(c, "commit the claim").await?;
        if inserted == 1 {
            return Ok(true);
        }
        // A retried claim whose first attempt committed finds its own row.
        if retry {
            let row = self
                .query_opt(
                    c,
                    "SELECT claim FROM fires WHERE trigger = $1 AND key = $2",
                    &[&fire.trigger, &fire.key],
                    "read the fire's claim",
                )
                .await?;
            if let Some(row) = row {
                let claim: String = self.get(&row, 0)?;
                return Ok(claim == token);
            }
        }
        Ok(false)
    }

    fn fires_from(&self, rows: &[Row]) -> Result<Vec<FireRecord>, Failure> {
        rows.iter()
            .map(|r| {
                let kind: String = self.get(r, 2)?;
                let outcome: String = self.get(r, 5)?;
                Ok(FireRecord {
                    trigger: self.get(r, 0)?,
                    key: self.get(r, 1)?,
                    kind: FireKind::parse(&kind).ok_or_else(|| {
                        Failure::Store(self.corrupt(format!("unknown fire kind `{kind}`")))
                    })?,
                    scheduled_for: self.get(r, 3)?,
                    fired_at: self.get(r, 4)?,
                    outcome: FireOutcome::parse(&outcome).ok_or_else(|| {
                        Failure::Store(self.corrupt(format!("unknown fire outcome `{outcome}`")))
                    })?,
                    reason: self.get(r, 6)?,
                    session_id: self.get(r, 7)?,
                    cost_usd: self.get(r, 8)?,
                })
            })
            .collect()
    }

    fn lease_secs(&self) -> f64 {
        self.options.lease.as_secs_f64()
    }

    async fn statement(&self, c: &Conn, sql: &str) -> Result<Statement, Failure> {
        if let Some(s) = c.statements.borrow().get(sql) {
            return Ok(s.clone());
        }
        let s = c
            .client
            .prepare(sql)
            .await
            .map_err(self.err("prepare a statement"))?;
        c.statements.borrow_mut().insert(sql.to_owned(), s.clone());
        Ok(s)
    }

    async fn exec(
        &self,
        c: &Conn,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        doing: &str,
    ) -> Result<u64, Failure> {
        let s = self.statement(c, sql).await?;
        c.client.execute(&s, params).await.map_err(self.err(doing))
    }

    async fn query(
        &self,
        c: &Conn,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        doing: &str,
    ) -> Result<Vec<Row>, Failure> {
        let s = self.statement(c, sql).await?;
        c.client.query(&s, params).await.map_err(self.err(doing))
    }

    /// Run `update` (binding `id`, `principal`), which records `principal`
    /// only where the row has none or the same (so a retry after a lost
    /// `COMMIT` succeeds): no row changed is an unknown session or another
    /// principal's.
    async fn write_principal(
        &self,
        c: &Conn,
        id: &String,
        principal: &String,
        update: &str,
        doing: &str,
    ) -> Result<Reply, Failure> {
        if self.exec(c, update, &[id, principal], doing).await? > 0 {
            return Ok(Reply::Unit);
        }
        let row = self
            .query_opt(c, "SELECT 1 FROM sessions WHERE id = $1", &[id], doing)
            .await?;
        Err(match row {
            Some(_) => StoreError::OwnedByAnother(id.clone()),
            None => StoreError::NotFound(id.clone()),
        }
        .into())
    }

    async fn query_opt(
        &self,
        c: &Conn,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        doing: &str,
    ) -> Result<Option<Row>, Failure> {
        let s = self.statement(c, sql).await?;
        c.client
            .query_opt(&s, params)
            .await
            .map_err(self.err(doing))
    }

    async fn begin(&self, c: &Conn, doing: &str) -> Result<(), Failure> {
        c.client
            .batch_execute("BEGIN")
            .await
            .map_err(self.err(doing))
    }

    async fn commit(&self, c: &Conn, doing: &str) -> Result<(), Failure> {
        c.client
            .batch_execute("COMMIT")
            .await
            .map_err(self.err(doing))
    }

    fn to_sql_int(&self, n: u64, what: &str) -> Result<i64, Failure> {
        i64::try_from(n)
            .map_err(|_| Failure::Store(self.io(format!("{what} {n} is too large to store"))))
    }

    fn get<'r, T: tokio_postgres::types::FromSql<'r>>(
        &self,
        row: &'r Row,
        i: usize,
    ) -> Result<T, Failure> {
        row.try_get(i)
            .map_err(|e| Failure::Store(self.corrupt(format!("unreadable column {i}: {e}"))))
    }

    async fn read_meta(&self, c: &Conn, id: &str) -> Result<Option<RawMeta>, Failure> {
        let sql = format!("{META_COLUMNS} WHERE id = $1");
        match self.query_opt(c, &sql, &[&id], "read the session").await? {
            Some(row) => Ok(Some(raw_meta(self, &row)?)),
            None => Ok(None),
        }
    }

    async fn create(&self, c: &Conn, meta: &SessionMeta, retry: bool) -> Result<(), Failure> {
        let inputs = serde_json::to_string(&meta.inputs).map_err(|e| {
            Failure::Store(self.io(format!("cannot serialise the inputs of `{}`: {e}", meta.id)))
        })?;
        let last_seq = self.to_sql_int(meta.last_seq, "last_seq")?;
        // A session created queued or running is owned by its creator; one
        // created running is also leased to it.
        let me = &self.options.owner;
        let live = is_live(meta.status);
        let leased = meta.status == SessionStatus::Running;
        let pid = live.then(|| i64::from(me.pid));
        let host = live.then_some(&me.host);
        let start = live.then_some(&me.start);
        let beat = live.then(now);
        let inserted = self
            .exec(
                c,
                "INSERT INTO sessions(id, workflow, path, workspace, inputs, status, created_at, \
                 updated_at, last_seq, owner_pid, owner_host, owner_start, heartbeat_at, \
                 lease_until) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, \
                 CASE WHEN $14 THEN clock_timestamp() + make_interval(secs => $15) END) \
                 ON CONFLICT(id) DO NOTHING",
                &[
                    &meta.id,
                    &meta.workflow,
                    &meta.path,
                    &meta.workspace,
                    &inputs,
                    &meta.status.as_str(),
                    &meta.created_at,
                    &meta.updated_at,
                    &last_seq,
                    &pid,
                    &host,
                    &start,
                    &beat,
                    &leased,
                    &self.lease_secs(),
                ],
                "create the session",
            )
            .await?;
        if inserted == 0 {
            // A retried create whose first attempt committed finds its own row.
            if retry
                && let Some(raw) = self.read_meta(c, &meta.id).await?
                && raw.workflow == meta.workflow
                && raw.path == meta.path
                && raw.created_at == meta.created_at
                && raw.inputs == inputs
            {
                return Ok(());
            }
            return Err(StoreError::AlreadyExists(meta.id.clone()).into());
        }
        Ok(())
    }

    /// Whether the lease read from a locked `sessions` row stops `me`: held by
    /// another owner, not expired, and that owner not known dead here.
    fn lease_blocks(&self, lease: &Lease) -> Option<StoreError> {
        if !lease.live {
            return None;
        }
        let owner = lease.owner.as_ref()?;
        if owner == &self.options.owner || owner.is_alive_here() == Some(false) {
            return None;
        }
        Some(StoreError::LeaseHeld {
            session: lease.id.clone(),
            owner: format!("process {} on {}", owner.pid, owner.host),
            until: lease.until.clone().unwrap_or_default(),
        })
    }

    async fn lock_session(&self, c: &Conn, id: &str) -> Result<Option<Lease>, Failure> {
        let row = self
            .query_opt(
                c,
                "SELECT last_seq, owner_pid, owner_host, owner_start, \
                 coalesce(lease_until > clock_timestamp(), false), lease_until IS NOT NULL, \
                 to_char(lease_until AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') \
                 FROM sessions WHERE id = $1 FOR UPDATE",
                &[&id],
                "lock the session",
            )
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let last_seq: i64 = self.get(&row, 0)?;
        let pid: Option<i64> = self.get(&row, 1)?;
        let host: Option<String> = self.get(&row, 2)?;
        let start: Option<String> = self.get(&row, 3)?;
        Ok(Some(Lease {
            id: id.to_owned(),
            last_seq: u64::try_from(last_seq).map_err(|_| {
                Failure::Store(self.corrupt(format!("negative last_seq {last_seq}")))
            })?,
            owner: pid.map(|pid| Owner {
                pid: u32::try_from(pid).unwrap_or(0),
                host: host.unwrap_or_default(),
                start: start.unwrap_or_default(),
            }),
            live: self.get(&row, 4)?,
            held: self.get(&row, 5)?,
            until: self.get(&row, 6)?,
        }))
    }

    async fn append(&self, c: &Conn, events: &[Event], retry: bool) -> Result<(), Failure> {
        let Some(first) = events.first() else {
            return Ok(());
        };
        // `BEGIN` and the first row lock in one round trip: the driver
        // pipelines them, in this order.
        let (_, first_lease) = futures::try_join!(
            self.begin(c, "begin the append"),
            self.lock_session(c, &first.session_id)
        )?;
        // Each session's row is locked once per batch; what later events of
        // the batch change in it is followed here.
        let mut locked: HashMap<&str, Lease> = HashMap::new();
        if let Some(lease) = first_lease {
            locked.insert(&first.session_id, lease);
        }
        for event in events {
            let id = event.session_id.as_str();
            if !locked.contains_key(id) {
                let Some(lease) = self.lock_session(c, id).await? else {
                    return Err(StoreError::NotFound(id.to_owned()).into());
                };
                locked.insert(id, lease);
            }
            let Some(lease) = locked.get_mut(id) else {
                return Err(StoreError::NotFound(id.to_owned()).into());
            };
            self.append_in(c, event, retry, lease).await?;
        }
        // Followers elsewhere hear of it once it is committed, and only then.
        let notify = listen::notify_sql(locked.keys().copied());
        c.client
            .batch_execute(&format!("{notify}COMMIT"))
            .await
            .map_err(self.err("commit the append"))
    }

    /// Write one event and its derived rows, `lease` being its session's
    /// locked row as it stands in this transaction.
    async fn append_in(
        &self,
        c: &Conn,
        event: &Event,
        retry: bool,
        lease: &mut Lease,
    ) -> Result<(), Failure> {
        let id = &event.session_id;
        let seq = self.to_sql_int(event.seq, "seq")?;
        if event.seq != lease.last_seq.saturating_add(1) {
            // The first attempt committed before the connection broke: the
            // same event is already there.
            if retry
                && event.seq <= lease.last_seq
                && self.stored_event(c, id, event.seq).await?.as_ref() == Some(event)
            {
                return Ok(());
            }
            return Err(StoreError::OutOfOrder {
                session: id.clone(),
                expected: lease.last_seq.saturating_add(1),
                got: event.seq,
            }
            .into());
        }
        if let Some(e) = self.lease_blocks(lease) {
            return Err(e.into());
        }
        let me = &self.options.owner;
        let mine = lease.owner.as_ref() == Some(me);
        let status = status_after(&event.body);
        // Whoever makes a session run owns it and takes the lease; a run that
        // ends releases it (waiting keeps it); the holder's appends renew it.
        let claim = status.is_some_and(is_live);
        let release = !claim && mine && status.is_some_and(|s| s != SessionStatus::WaitingApproval);
        let renew = !claim && !release && mine && lease.held;

        let data = event_data(&event.body).map_err(Failure::Store)?;
        let data_text = serde_json::to_string(&data).map_err(|e| {
            Failure::Store(self.io(format!("cannot serialise event {seq} of `{id}`: {e}")))
        })?;
        let iteration = event.iteration.map(i64::from);
        let schema_version = i64::from(event.schema_version);
        let status_text = status.map(|s| s.as_str());
        let pid = i64::from(me.pid);
        let beat = now();
        let lease_secs = self.lease_secs();
        let kind = event.kind();
        let update_params: [&(dyn ToSql + Sync); 12] = [
            id,
            &seq,
            &event.ts,
            &status_text,
            &claim,
            &pid,
            &me.host,
            &me.start,
            &beat,
            &lease_secs,
            &release,
            &renew,
        ];
        let insert_params: [&(dyn ToSql + Sync); 13] = [
            id,
            &seq,
            &schema_version,
            &event.ts,
            &kind,
            &event.step,
            &event.goal,
            &event.agent,
            &iteration,
            &data_text,
            &event.node,
            &event.node_kind,
            &event.replayed,
        ];
        let update = self.exec(
            c,
            "UPDATE sessions SET last_seq = $2, updated_at = greatest(updated_at, $3), \
             status = coalesce($4, status), \
             owner_pid = CASE WHEN $5 THEN $6 ELSE owner_pid END, \
             owner_host = CASE WHEN $5 THEN $7 ELSE owner_host END, \
             owner_start = CASE WHEN $5 THEN $8 ELSE owner_start END, \
             heartbeat_at = CASE WHEN $5 THEN $9 ELSE heartbeat_at END, \
             lease_until = CASE WHEN $5 OR $12 THEN clock_timestamp() + \
             make_interval(secs => $10) WHEN $11 THEN NULL ELSE lease_until END \
             WHERE id = $1",
            &update_params,
            "update the session",
        );
        let insert = self.exec(
            c,
            "INSERT INTO events(session_id, seq, schema_version, ts, type, step, goal, agent, \
             iteration, data, node, node_kind, replayed) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, \
             $9, $10, $11, $12, $13)",
            &insert_params,
            "store the event",
        );
        // Both statements in one round trip: the driver pipelines them.
        futures::try_join!(update, insert)?;

        lease.last_seq = event.seq;
        if claim {
            lease.owner = Some(me.clone());
            lease.live = true;
            lease.held = true;
        } else if release {
            lease.live = false;
            lease.held = false;
        } else if renew {
            lease.live = true;
        }
        self.derive(c, event, seq, &data).await
    }

    /// The event stored at `seq`, if any.
    async fn stored_event(&self, c: &Conn, id: &str, seq: u64) -> Result<Option<Event>, Failure> {
        let seq = self.to_sql_int(seq, "seq")?;
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE session_id = $1 AND seq = $2");
        match self
            .query_opt(c, &sql, &[&id, &seq], "read an event")
            .await?
        {
            Some(row) => Ok(Some(self.event_from_row(id, &row)?)),
            None => Ok(None),
        }
    }

    /// Keep `messages` and `tool_calls` in step with the event just stored.
    async fn derive(&self, c: &Conn, event: &Event, seq: i64, data: &Value) -> Result<(), Failure> {
        let id = &event.session_id;
        let iteration = event.iteration.map(i64::from);
        let message = |role: &'static str, text: &Value, tool_calls: Option<String>| {
            let content = text.as_str().map(str::to_owned);
            async move {
                self.exec(
                    c,
                    "INSERT INTO messages(session_id, seq, step, goal, agent, iteration, role, \
                     content, tool_calls) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                    &[
                        id,
                        &seq,
                        &event.step,
                        &event.goal,
                        &event.agent,
                        &iteration,
                        &role,
                        &content,
                        &tool_calls,
                    ],
                    "store the message",
                )
                .await
                .map(|_| ())
            }
        };
        match &event.body {
            EventBody::GoalStarted { .. } => message("user", &data["outcome"], None).await,
            EventBody::LlmResponse { tool_calls, .. } => {
                let calls = (!tool_calls.is_empty()).then(|| data["tool_calls"].to_string());
                message("assistant", &data["text"], calls).await
            }
            EventBody::ToolCall {
                id: call_id, tool, ..
            } => {
                self.new_call(
                    c,
                    event,
                    seq,
                    call_id,
                    tool,
                    Some(data["arguments"].to_string()),
                )
                .await
            }
            EventBody::ToolResult {
                id: call_id,
                tool,
                is_error,
                duration_ms,
                ..
            } => {
                message("tool", &data["content"], None).await?;
                let row = match self
                    .open_call(
                        c,
                        id,
                        call_id,
                        "SELECT max(seq) FROM tool_calls WHERE session_id = $1 AND call_id = $2 \
                         AND result_seq IS NULL",
                    )
                    .await?
                {
                    Some(row) => row,
                    None => {
                        self.new_call(c, event, seq, call_id, tool, None).await?;
                        seq
                    }
                };
                let result = data["content"].as_str();
                let duration = i64::try_from(*duration_ms).unwrap_or(i64::MAX);
                self.exec(
                    c,
                    "UPDATE tool_calls SET result = $3, result_seq = $4, is_error = $5, \
                     duration_ms = $6 WHERE session_id = $1 AND seq = $2",
                    &[id, &row, &result, &seq, is_error, &duration],
                    "store the tool result",
                )
                .await
                .map(|_| ())
            }
            EventBody::PolicyDenied {
                id: call_id,
                tool,
                rule,
                reason,
            } => {
                let row = match self
                    .open_call(
                        c,
                        id,
                        call_id,
                        "SELECT max(seq) FROM tool_calls WHERE session_id = $1 AND call_id = $2 \
                         AND denied_rule IS NULL",
                    )
                    .await?
                {
                    Some(row) => row,
                    None => {
                        self.new_call(c, event, seq, call_id, tool, None).await?;
                        seq
                    }
                };
                self.exec(
                    c,
                    "UPDATE tool_calls SET denied_rule = $3, denied_reason = $4 \
                     WHERE session_id = $1 AND seq = $2",
                    &[id, &row, rule, reason],
                    "store the denial",
                )
                .await
                .map(|_| ())
            }
            _ => Ok(()),
        }
    }

    /// The call this event answers: the latest one with this id that is
    /// still open, since models may reuse call ids across turns.
    async fn open_call(
        &self,
        c: &Conn,
        id: &str,
        call_id: &str,
        sql: &str,
    ) -> Result<Option<i64>, Failure> {
        let rows = self
            .query(c, sql, &[&id, &call_id], "find the tool call")
            .await?;
        match rows.first() {
            Some(row) => self.get(row, 0),
            None => Ok(None),
        }
    }

    async fn new_call(
        &self,
        c: &Conn,
        event: &Event,
        seq: i64,
        call_id: &str,
        tool: &str,
        arguments: Option<String>,
    ) -> Result<(), Failure> {
        let iteration = event.iteration.map(i64::from);
        self.exec(
            c,
            "INSERT INTO tool_calls(session_id, seq, call_id, tool, step, goal, agent, \
             iteration, arguments) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &event.session_id,
                &seq,
                &call_id,
                &tool,
                &event.step,
                &event.goal,
                &event.agent,
                &iteration,
                &arguments,
            ],
            "store the tool call",
        )
        .await
        .map(|_| ())
    }

    /// Take an interrupted session (see `SessionStore::claim_interrupted`):
    /// the look and the write under the row's lock, so of two claimers the
    /// second reads `running`.
    async fn claim_interrupted(&self, c: &Conn, id: &str, retry: bool) -> Result<Reply, Failure> {
        self.begin(c, "begin claiming the session").await?;
        let Some(lease) = self.lock_session(c, id).await? else {
            let _ = c.client.batch_execute("ROLLBACK").await;
            return Err(StoreError::NotFound(id.to_owned()).into());
        };
        let Some(raw) = self.read_meta(c, id).await? else {
            let _ = c.client.batch_execute("ROLLBACK").await;
            return Err(StoreError::NotFound(id.to_owned()).into());
        };
        let meta = raw.into_meta(SystemTime::now(), |m| self.corrupt(m))?;
        let me = &self.options.owner;
        if meta.status != SessionStatus::Interrupted || self.lease_blocks(&lease).is_some() {
            let _ = c.client.batch_execute("ROLLBACK").await;
            // A retry after a claim that committed before the connection broke.
            let ours = lease.owner.as_ref() == Some(me) && meta.status == SessionStatus::Running;
            return Ok(Reply::Claimed(retry && ours));
        }
        let t = now();
        self.exec(
            c,
            "UPDATE sessions SET status = 'running', updated_at = greatest(updated_at, $2), \
             owner_pid = $3, owner_host = $4, owner_start = $5, heartbeat_at = $2, \
             lease_until = clock_timestamp() + make_interval(secs => $6) WHERE id = $1",
            &[
                &id,
                &t,
                &i64::from(me.pid),
                &me.host,
                &me.start,
                &self.lease_secs(),
            ],
            "claim the session",
        )
        .await?;
        self.commit(c, "commit claiming the session").await?;
        Ok(Reply::Claimed(true))
    }

    async fn set_status(
        &self,
        c: &Conn,
        id: &str,
        status: SessionStatus,
    ) -> Result<Reply, Failure> {
        let t = now();
        if is_live(status) {
            // Making it live claims it, which another's valid lease forbids.
            // Running takes the lease; queued gives ours up (it waits for
            // whichever process picks it up).
            self.begin(c, "begin setting the status").await?;
            let Some(lease) = self.lock_session(c, id).await? else {
                return Err(StoreError::NotFound(id.to_owned()).into());
            };
            if let Some(e) = self.lease_blocks(&lease) {
                return Err(e.into());
            }
            let me = &self.options.owner;
            self.exec(
                c,
                "UPDATE sessions SET status = $2, updated_at = greatest(updated_at, $3), \
                 owner_pid = $4, owner_host = $5, owner_start = $6, heartbeat_at = $3, \
                 lease_until = CASE WHEN $8 THEN clock_timestamp() + make_interval(secs => $7) \
                 END WHERE id = $1",
                &[
                    &id,
                    &status.as_str(),
                    &t,
                    &i64::from(me.pid),
                    &me.host,
                    &me.start,
                    &self.lease_secs(),
                    &(status == SessionStatus::Running),
                ],
                "set the status",
            )
            .await?;
            self.commit(c, "commit the status").await?;
        } else {
            // The holder setting an end (not a wait) releases its lease.
            let me = &self.options.owner;
            let release = status != SessionStatus::WaitingApproval;
            let n = self
                .exec(
                    c,
                    "UPDATE sessions SET status = $2, updated_at = greatest(updated_at, $3), \
                     lease_until = CASE WHEN $4 AND owner_pid = $5 AND owner_host = $6 AND \
                     owner_start = $7 THEN NULL ELSE lease_until END WHERE id = $1",
                    &[
                        &id,
                        &status.as_str(),
                        &t,
                        &release,
                        &i64::from(me.pid),
                        &me.host,
                        &me.start,
                    ],
                    "set the status",
                )
                .await?;
            if n == 0 {
                return Err(StoreError::NotFound(id.to_owned()).into());
            }
        }
        Ok(Reply::Unit)
    }

    async fn list(
        &self,
        c: &Conn,
        status: Option<SessionStatus>,
        limit: usize,
    ) -> Result<Vec<SessionMeta>, Failure> {
        let now_t = SystemTime::now();
        let lim = i64::try_from(limit).unwrap_or(i64::MAX);
        // Stored `queued` or `running` may read as `interrupted` (an owner that
        // is gone), so a filter on any of the three looks at all three rows
        // and decides after reading.
        let rows = match status {
            Some(s) if is_live(s) || s == SessionStatus::Interrupted => {
                let sql = format!(
                    "{META_COLUMNS} WHERE status IN ('queued', 'running', 'interrupted') \
                     ORDER BY created_at DESC, id DESC"
                );
                self.query(c, &sql, &[], "list sessions").await?
            }
            Some(s) => {
                let sql = format!(
                    "{META_COLUMNS} WHERE status = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
                );
                self.query(c, &sql, &[&s.as_str(), &lim], "list sessions")
                    .await?
            }
            None => {
                let sql = format!("{META_COLUMNS} ORDER BY created_at DESC, id DESC LIMIT $1");
                self.query(c, &sql, &[&lim], "list sessions").await?
            }
        };
        let mut out = Vec::new();
        for row in &rows {
            if out.len() >= limit {
                break;
            }
            let meta = raw_meta(self, row)?.into_meta(now_t, |m| self.corrupt(m))?;
            if status.is_none_or(|s| s == meta.status) {
                out.push(meta);
            }
        }
        Ok(out)
    }

    async fn events(
        &self,
        c: &Conn,
        id: &str,
        after: u64,
        limit: Option<usize>,
    ) -> Result<Vec<Event>, Failure> {
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        // `LIMIT NULL` is no limit.
        let limit = limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX));
        let exists = self
            .query_opt(
                c,
                "SELECT 1 FROM sessions WHERE id = $1",
                &[&id],
                "read the session",
            )
            .await?;
        if exists.is_none() {
            return Err(StoreError::NotFound(id.to_owned()).into());
        }
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE session_id = $1 AND seq > $2 ORDER BY seq \
             LIMIT $3"
        );
        let rows = self
            .query(c, &sql, &[&id, &after, &limit], "read events")
            .await?;
        rows.iter().map(|r| self.event_from_row(id, r)).collect()
    }

    fn event_from_row(&self, id: &str, r: &Row) -> Result<Event, Failure> {
        let seq: i64 = self.get(r, 0)?;
        let bad = |what: String| {
            Failure::Store(self.corrupt(format!("event {seq} of session `{id}`: {what}")))
        };
        let schema_version: i64 = self.get(r, 1)?;
        let kind: String = self.get(r, 3)?;
        let data_text: String = self.get(r, 8)?;
        let iteration: Option<i64> = self.get(r, 7)?;
        let data: Value =
            serde_json::from_str(&data_text).map_err(|e| bad(format!("unreadable data: {e}")))?;
        let mut body = Map::new();
        body.insert("type".into(), Value::String(kind));
        body.insert("data".into(), data);
        let body: EventBody = serde_json::from_value(Value::Object(body))
            .map_err(|e| bad(format!("does not match its type: {e}")))?;
        Ok(Event {
            schema_version: u32::try_from(schema_version)
                .map_err(|_| bad(format!("schema_version {schema_version}")))?,
            session_id: id.to_owned(),
            seq: u64::try_from(seq).map_err(|_| bad("negative seq".into()))?,
            ts: self.get(r, 2)?,
            step: self.get(r, 4)?,
            goal: self.get(r, 5)?,
            agent: self.get(r, 6)?,
            iteration: iteration
                .map(|i| u32::try_from(i).map_err(|_| bad(format!("iteration {i}"))))
                .transpose()?,
            node: self.get(r, 9)?,
            node_kind: self.get(r, 10)?,
            replayed: self.get(r, 11)?,
            body,
        })
    }

    async fn pending_in(&self, c: &Conn, id: &str) -> Result<Option<u64>, Failure> {
        let row = self
            .query_opt(
                c,
                "SELECT max(seq) FILTER (WHERE type = 'approval_required'), \
                 max(seq) FILTER (WHERE type = 'approval_resolved') \
                 FROM events WHERE session_id = $1",
                &[&id],
                "find the pending approval",
            )
            .await?;
        let Some(row) = row else { return Ok(None) };
        let requested: Option<i64> = self.get(&row, 0)?;
        let resolved: Option<i64> = self.get(&row, 1)?;
        Ok(match (requested, resolved) {
            (Some(r), Some(d)) if d > r => None,
            (Some(r), _) => Some(
                u64::try_from(r)
                    .map_err(|_| Failure::Store(self.corrupt(format!("negative seq {r}"))))?,
            ),
            (None, _) => None,
        })
    }

    async fn read_approval(
        &self,
        c: &Conn,
        id: &str,
        seq: u64,
    ) -> Result<Option<Approval>, Failure> {
        let Ok(seq_sql) = i64::try_from(seq) else {
            return Ok(None);
        };
        let row = self
            .query_opt(
                c,
                "SELECT approved, note, decided_at FROM approvals \
                 WHERE session_id = $1 AND seq_requested = $2",
                &[&id, &seq_sql],
                "read the approval",
            )
            .await?;
        row.map(|r| {
            Ok(Approval {
                session_id: id.to_owned(),
                seq_requested: seq,
                approved: self.get(&r, 0)?,
                note: self.get(&r, 1)?,
                decided_at: self.get(&r, 2)?,
            })
        })
        .transpose()
    }

    async fn record_approval(
        &self,
        c: &Conn,
        id: &str,
        approved: bool,
        note: Option<&str>,
        decided_at: &str,
        retry: bool,
    ) -> Result<Approval, Failure> {
        self.begin(c, "begin recording the approval").await?;
        // The row lock orders two deciders of one session.
        if self.lock_session(c, id).await?.is_none() {
            return Err(StoreError::NotFound(id.to_owned()).into());
        }
        let Some(seq) = self.pending_in(c, id).await? else {
            return Err(StoreError::NoPendingApproval(id.to_owned()).into());
        };
        let approval = Approval {
            session_id: id.to_owned(),
            seq_requested: seq,
            approved,
            note: note.map(str::to_owned),
            decided_at: decided_at.to_owned(),
        };
        let seq_sql = self.to_sql_int(seq, "seq")?;
        let inserted = self
            .exec(
                c,
                "INSERT INTO approvals(session_id, seq_requested, approved, note, decided_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                &[&id, &seq_sql, &approved, &note, &decided_at],
                "record the approval",
            )
            .await?;
        if inserted == 0 {
            let earlier = self.read_approval(c, id, seq).await?;
            // Our own first attempt, committed before the connection broke.
            if retry && earlier.as_ref() == Some(&approval) {
                return Ok(approval);
            }
            return Err(StoreError::AlreadyDecided {
                session: id.to_owned(),
                seq,
                approved: earlier.is_some_and(|a| a.approved),
            }
            .into());
        }
        self.commit(c, "commit the approval").await?;
        Ok(approval)
    }

    async fn reap(&self, c: &Conn) -> Result<Vec<String>, Failure> {
        self.begin(c, "begin marking orphaned sessions").await?;
        let sql = format!(
            "{META_COLUMNS} WHERE status IN ('queued', 'running') ORDER BY created_at, id \
             FOR UPDATE"
        );
        let rows = self.query(c, &sql, &[], "find orphaned sessions").await?;
        let now_t = SystemTime::now();
        let mut orphans = Vec::new();
        for row in &rows {
            let raw = raw_meta(self, row)?;
            let id = raw.id.clone();
            if raw.into_meta(now_t, |m| self.corrupt(m))?.status == SessionStatus::Interrupted {
                orphans.push(id);
            }
        }
        // The rows are locked: no one claims a session between the look and
        // the write.
        let t = now();
        for id in &orphans {
            self.exec(
                c,
                "UPDATE sessions SET status = 'interrupted', updated_at = greatest(updated_at, $2), \
                 lease_until = NULL WHERE id = $1",
                &[id, &t],
                "mark a session interrupted",
            )
            .await?;
        }
        self.commit(c, "commit marking orphaned sessions").await?;
        Ok(orphans)
    }
}

/// What `lock_session` read from a locked `sessions` row.
struct Lease {
    id: String,
    last_seq: u64,
    owner: Option<Owner>,
    /// `lease_until` is in the future.
    live: bool,
    /// `lease_until` is set (not released).
    held: bool,
    until: Option<String>,
}

/// The last migration applied: 0 for an empty database.
async fn read_version(c: &Conn) -> Result<i64, tokio_postgres::Error> {
    let exists: bool = c
        .client
        .query_one("SELECT to_regclass('schema_migrations') IS NOT NULL", &[])
        .await?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let row = c
        .client
        .query_one(
            "SELECT coalesce(max(version), 0)::bigint FROM schema_migrations",
            &[],
        )
        .await?;
    row.try_get(0)
}

/// A `sessions` row as PostgreSQL returns it (see [`META_COLUMNS`]).
fn raw_meta(w: &Worker, r: &Row) -> Result<RawMeta, Failure> {
    Ok(RawMeta {
        id: w.get(r, 0)?,
        workflow: w.get(r, 1)?,
        path: w.get(r, 2)?,
        workspace: w.get(r, 3)?,
        inputs: w.get(r, 4)?,
        status: w.get(r, 5)?,
        created_at: w.get(r, 6)?,
        updated_at: w.get(r, 7)?,
        last_seq: w.get(r, 8)?,
        owner_pid: w.get(r, 9)?,
        owner_host: w.get(r, 10)?,
        owner_start: w.get(r, 11)?,
        heartbeat_at: w.get(r, 12)?,
    })
}

/// Parse a connection URL, refusing TLS modes this build cannot honour.
/// Errors never repeat the URL (it may hold a password).
fn parse_url(url: &str) -> Result<tokio_postgres::Config, StoreError> {
    let bad = |message: String| StoreError::Io {
        path: "PostgreSQL".into(),
        message,
    };
    if let Some(mode) = ssl_mode(url)
        && !matches!(mode.as_str(), "disable" | "allow" | "prefer")
    {
        return Err(bad(format!(
            "the database URL asks for sslmode={mode}, but TLS to PostgreSQL is not supported \
             yet; connect over loopback or a private network with sslmode=disable"
        )));
    }
    let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
        bad(format!(
            "the database URL is not a valid PostgreSQL connection string ({e}); \
             expected postgres://USER:PASSWORD@HOST:PORT/DATABASE"
        ))
    })?;
    config.ssl_mode(tokio_postgres::config::SslMode::Disable);
    config.application_name("agentfile");
    Ok(config)
}

/// The `sslmode` a URL or `key=value` string asks for, if any.
fn ssl_mode(url: &str) -> Option<String> {
    let at = url.find("sslmode")?;
    let rest = url[at + "sslmode".len()..].trim_start();
    let rest = rest.strip_prefix('=')?.trim_start();
    let value: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    Some(value.to_ascii_lowercase())
}

/// `host:port` of the first host, for errors.
fn host_port(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
}

/// `PostgreSQL host:port/database`: how errors name the store.
fn describe(config: &tokio_postgres::Config) -> String {
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("PostgreSQL {}/{db}", host_port(config))
}

/// An error and its causes, one after the other.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_modes_are_refused_without_the_url() {
        for url in [
            "postgres://u:secret@db:5432/x?sslmode=require",
            "host=db password=secret sslmode = verify-full",
        ] {
            let e = parse_url(url).unwrap_err().to_string();
            assert!(e.contains("TLS") && !e.contains("secret"), "{e}");
        }
        let c = parse_url("postgres://u:secret@db:6543/x?sslmode=disable").unwrap();
        assert_eq!(describe(&c), "PostgreSQL db:6543/x");
        let e = parse_url("postgres://u:secret@db:notaport/x")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("secret"), "{e}");
    }
}
