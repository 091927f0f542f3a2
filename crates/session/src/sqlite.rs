//! The default session store: one SQLite database, shared safely by every
//! agentfile process that runs in a workspace.
//!
//! What it is for: appending a run's events durably and fast, reading one
//! session's events back in order (resume, `sessions show`, `event` long-polls),
//! and keeping query-friendly tables beside the log: `messages` and `tool_calls`
//! (derived from the events as they are appended), `approvals` (human decisions)
//! and `memory` (the key-value store of the memory tools, which only share the
//! file). What it is not: a place for run logic. The `events` table is the source
//! of truth; every other table can be rebuilt from it.
//!
//! # Invariants
//!
//! - `append` returns only after its transaction committed: one `BEGIN
//!   IMMEDIATE` per call (or per [`SqliteStore::append_batch`]), which checks
//!   `seq == last_seq + 1` and writes the event and its derived rows (and, for
//!   an event that changes the status, the session's row) together, or
//!   nothing. A session's `last_seq` and `updated_at` are those of its last
//!   event (or of its row, when that is later): appends that leave the status
//!   alone do not rewrite the `sessions` row (schema version 4).
//! - What `events` returns is exactly what was appended (`serde_json` equal and
//!   byte-for-byte equal when serialised again), although the stored form
//!   differs: every JSON string of [`BLOB_THRESHOLD`] bytes or more anywhere in an
//!   event's `data` is stored once in `blobs`, keyed by its SHA-256, and referred
//!   to as `{"$blob": "<hash>"}`. A goal's output that reappears in
//!   `goal_complete`, `run_complete` and the next goal's prompt is stored once.
//!   An object of the event's own that happens to have the single key `$blob` or
//!   `$lit` is wrapped as `{"$lit": …}`, so the encoding is unambiguous.
//! - Reading a session costs what that session holds, not what the database
//!   holds: events are keyed by `(session_id, seq)`.
//! - Several processes: WAL mode (readers never block the writer), a busy
//!   timeout, and `BEGIN IMMEDIATE` for every write so two writers queue instead
//!   of failing half-way. Schema migrations run in one such transaction at open,
//!   so two processes opening a fresh database at once apply them once.
//! - Nothing read from the database is trusted: an unreadable row is
//!   [`StoreError::Corrupt`], never a panic.
//!
//! # Durability
//!
//! [`Durability::Normal`] (the default) commits into the WAL without an fsync
//! per transaction. A committed transaction is in the operating system's page
//! cache when `append` returns, so killing the process (SIGKILL, a panic, OOM)
//! loses nothing; power loss or a kernel crash can lose the last commits but
//! never corrupts the database (the WAL is checksummed). Losing the tail of a
//! log is harmless to resume: the interrupted goal restarts from its beginning
//! anyway. [`Durability::Full`] fsyncs the WAL on every commit, for machines
//! where power loss must not lose a single event, at the price of one disk
//! flush per append; [`SqliteStore::append_batch`] amortises it. The WAL is
//! checkpointed every 10,000 pages rather than SQLite's default 1,000, which
//! measurably raises the sustained append rate (see `WAL_AUTOCHECKPOINT_PAGES`).
//! Closing a store does not checkpoint and delete the WAL (SQLite's default),
//! so a short CLI run neither pays for that nor for creating the WAL again;
//! a WAL left larger than 1 MiB is checkpointed on close, so the next process's
//! recovery of the WAL index stays cheap. The `-wal` and `-shm` files beside
//! the database are therefore part of it: copy all three, or none while a run
//! writes (`sqlite3 sessions.db .backup` makes a single-file copy).
//!
//! # Owners
//!
//! `sessions` records who runs each session (`owner_pid`, `owner_host`,
//! `owner_start`, `heartbeat_at`, migration 2); `get` and `list` report a
//! queued or running session whose owner is gone as `interrupted`, and
//! [`SessionStore::reap_orphans`] writes that down (see [`super::owner`]).
//!
//! # Principals
//!
//! `sessions.principal` (migration 8) records the principal a session belongs
//! to (an MCP task's, a blocking MCP run's over HTTP), for the owner rule of
//! every listener; `task_owner` (migration 5) also marks a session an MCP
//! task. The principal is written once: the `UPDATE` that records it only
//! matches a row with none or the same, so no later writer moves it.
//!
//! # Fire records
//!
//! `fires` (migration 7) holds the daemon's fire records, keyed by `(trigger,
//! key)` (see [`super::fires`]). A claim is one `INSERT … ON CONFLICT DO
//! NOTHING`: it takes the write lock like every write (waiting up to the busy
//! timeout for another process's transaction), and the primary key lets
//! exactly one of several processes sharing the file insert a given fire.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::browse::like_pattern;
use super::fires::{FireKind, FireOutcome, FireRecord, system_ms};
use super::owner::{Owner, OwnerRecord};
use super::row::{RawMeta, data_text, event_data};
use super::{
    Approval, SessionMeta, SessionQuery, SessionStatus, SessionStore, SessionSummary, StoreError,
    is_live, is_valid_id, now, status_after,
};
use agentfile_wire::events::{Event, EventBody, Usage};

/// The schema version this code writes; a database with a higher
/// `PRAGMA user_version` is refused, untouched.
pub const SCHEMA_VERSION: i64 = 9;

/// JSON strings at least this long (in bytes) are stored once in `blobs`.
/// Below it, the reference and the hashing would cost more than they save.
pub const BLOB_THRESHOLD: usize = 1024;

/// Checkpoint the WAL into the database every this many pages (about 40 MB)
/// rather than SQLite's 1,000. Each checkpoint costs two fsyncs and rewrites
/// the pages that changed; appends touch the same few pages again and again,
/// so checkpointing ten times less often writes far less. Measured: about 1.5×
/// the sustained append rate of the default (README, Performance).
const WAL_AUTOCHECKPOINT_PAGES: i64 = 10_000;

/// A WAL left behind when a store closes is checkpointed (and emptied) once it
/// is larger than this. The next process to open the database reads the whole
/// WAL to rebuild its index, so what is left must stay small: 1 MiB is read in
/// well under a millisecond, and about four short CLI runs fit before one pays
/// for the checkpoint's two fsyncs.
const WAL_KEEP_BYTES: u64 = 1 << 20;

/// How long a write waits for another process's transaction before giving up.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Migration `n` (1-based) takes a database from version `n - 1` to `n`. Never
/// edit a released entry; add a new one.
const MIGRATIONS: &[&str] = &[
    MIGRATION_1,
    MIGRATION_2,
    MIGRATION_3,
    MIGRATION_4,
    MIGRATION_5,
    MIGRATION_6,
    MIGRATION_7,
    MIGRATION_8,
    MIGRATION_9,
];

const MIGRATION_1: &str = r#"
CREATE TABLE schema_migrations(
    version    INTEGER PRIMARY KEY,
    applied_at TEXT NOT NULL
);

CREATE TABLE sessions(
    id         TEXT PRIMARY KEY NOT NULL,
    workflow   TEXT NOT NULL,
    path       TEXT NOT NULL,
    workspace  TEXT NOT NULL,
    inputs     TEXT NOT NULL,          -- JSON object of strings
    status     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    last_seq   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_created ON sessions(created_at, id);
CREATE INDEX sessions_by_status ON sessions(status, created_at, id);

-- Large strings, stored once, referenced by hash (`{"$blob": hash}` in JSON
-- columns, or the `*_blob` columns for plain text).
CREATE TABLE blobs(
    hash    TEXT PRIMARY KEY NOT NULL, -- SHA-256, lowercase hex
    size    INTEGER NOT NULL,
    content TEXT NOT NULL
);

-- The source of truth. `data` is the event's `data` object in the blob encoding.
CREATE TABLE events(
    session_id     TEXT NOT NULL REFERENCES sessions(id),
    seq            INTEGER NOT NULL,
    schema_version INTEGER NOT NULL,
    ts             TEXT NOT NULL,
    type           TEXT NOT NULL,
    step           TEXT,
    goal           TEXT,
    agent          TEXT,
    iteration      INTEGER,
    data           TEXT NOT NULL,
    PRIMARY KEY(session_id, seq)
) WITHOUT ROWID;

-- Derived from goal_started (role `user`: the goal's outcome), llm_response
-- (`assistant`) and tool_result (`tool`). `content` is NULL when the text is in
-- `blobs` (`blob`); see the `messages_text` view.
CREATE TABLE messages(
    session_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    step       TEXT,
    goal       TEXT,
    agent      TEXT,
    iteration  INTEGER,
    role       TEXT NOT NULL,
    content    TEXT,
    blob       TEXT REFERENCES blobs(hash),
    tool_calls TEXT,                   -- JSON array (blob encoding), assistant only
    PRIMARY KEY(session_id, seq),
    FOREIGN KEY(session_id, seq) REFERENCES events(session_id, seq)
) WITHOUT ROWID;

CREATE VIEW messages_text AS
    SELECT m.session_id, m.seq, m.step, m.goal, m.agent, m.iteration, m.role,
           coalesce(m.content, b.content) AS content, m.tool_calls
    FROM messages m LEFT JOIN blobs b ON b.hash = m.blob;

-- One row per tool call, keyed by the seq of the event that opened it
-- (tool_call, or policy_denied / tool_result when no tool_call preceded).
CREATE TABLE tool_calls(
    session_id    TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    call_id       TEXT NOT NULL,
    tool          TEXT NOT NULL,
    step          TEXT,
    goal          TEXT,
    agent         TEXT,
    iteration     INTEGER,
    arguments     TEXT,                -- JSON (blob encoding)
    result        TEXT,                -- NULL when in `result_blob` or not yet known
    result_blob   TEXT REFERENCES blobs(hash),
    result_seq    INTEGER,
    is_error      INTEGER,
    duration_ms   INTEGER,
    denied_rule   TEXT,
    denied_reason TEXT,
    PRIMARY KEY(session_id, seq),
    FOREIGN KEY(session_id, seq) REFERENCES events(session_id, seq)
) WITHOUT ROWID;
CREATE INDEX tool_calls_by_call ON tool_calls(session_id, call_id);

CREATE TABLE approvals(
    session_id    TEXT NOT NULL REFERENCES sessions(id),
    seq_requested INTEGER NOT NULL,
    approved      INTEGER NOT NULL,
    note          TEXT,
    decided_at    TEXT NOT NULL,
    PRIMARY KEY(session_id, seq_requested)
);

-- Owned by the memory tools; this exact definition is shared with them.
CREATE TABLE IF NOT EXISTS memory(agent_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, updated_at TEXT NOT NULL, PRIMARY KEY(agent_id, key));
"#;

/// The owner of a session and its heartbeat (see [`super::owner`]). NULL for
/// sessions written by version 1, whose liveness `updated_at` alone decides.
const MIGRATION_2: &str = r#"
ALTER TABLE sessions ADD COLUMN owner_pid INTEGER;
ALTER TABLE sessions ADD COLUMN owner_host TEXT;
ALTER TABLE sessions ADD COLUMN owner_start TEXT;
ALTER TABLE sessions ADD COLUMN heartbeat_at TEXT;
"#;

/// The plan node of each event (its path and kind), the resume journal's key.
/// NULL for events written before the step graph, which resume derives from
/// step, goal and iteration.
const MIGRATION_3: &str = r#"
ALTER TABLE events ADD COLUMN node TEXT;
ALTER TABLE events ADD COLUMN node_kind TEXT;
"#;

/// No new table: a new meaning. From version 4 an append that leaves the
/// session's status alone no longer moves `sessions.last_seq` and
/// `updated_at` (one page write less per commit); they are as of the last
/// status change, and the session's last event has the rest (`get` and `list`
/// combine both). An older agentfile would expect `last_seq` to follow every
/// append and refuse to continue such a session, so the version number keeps
/// it away from this database. Bringing the columns up to date first keeps
/// them exact for whoever reads them with SQL right after the upgrade.
const MIGRATION_4: &str = r#"
UPDATE sessions SET last_seq = max(last_seq,
    coalesce((SELECT max(seq) FROM events WHERE session_id = sessions.id), 0));
"#;

/// The principal a session belongs to as an MCP task (`agentfile mcp`); NULL
/// for sessions not started as one.
const MIGRATION_5: &str = r#"
ALTER TABLE sessions ADD COLUMN task_owner TEXT;
"#;

/// The per-call settings a session's run started with (a JSON object), for a
/// resume to use again; NULL when none were recorded.
const MIGRATION_6: &str = r#"
ALTER TABLE sessions ADD COLUMN run_settings TEXT;
"#;

/// The daemon's fire records (see [`crate::fires`]): one row per trigger and
/// idempotency key, which the primary key makes unique, so of several
/// processes inserting the same fire exactly one succeeds. `fired_ms` and
/// `scheduled_ms` are the times as instants, for ordering and ranges.
const MIGRATION_7: &str = r#"
CREATE TABLE fires(
    trigger       TEXT NOT NULL,
    key           TEXT NOT NULL,
    kind          TEXT NOT NULL,
    scheduled_for TEXT,
    scheduled_ms  INTEGER,
    fired_at      TEXT NOT NULL,
    fired_ms      INTEGER NOT NULL,
    outcome       TEXT NOT NULL,
    reason        TEXT,
    session_id    TEXT,
    cost_usd      REAL,
    PRIMARY KEY(trigger, key)
);
CREATE INDEX fires_by_time ON fires(fired_ms);
CREATE INDEX fires_by_trigger_time ON fires(trigger, fired_ms);
CREATE INDEX fires_by_trigger_schedule ON fires(trigger, scheduled_ms);
"#;

/// The principal each session belongs to, whatever door started it (see
/// [`SessionStore::principal`]); NULL for the operator's sessions. A task's
/// owner (migration 5) was the only one recorded before: it becomes its
/// session's principal, so nothing stored is lost and an old task keeps its
/// owner.
const MIGRATION_8: &str = r#"
ALTER TABLE sessions ADD COLUMN principal TEXT;
UPDATE sessions SET principal = task_owner WHERE task_owner IS NOT NULL;
"#;

/// Whether an event was copied from another session's journal by a fork
/// (`sessions fork`, the event's `replayed`) rather than produced by this
/// session's run: 1 or 0. Every event stored before was its own run's.
const MIGRATION_9: &str = r#"
ALTER TABLE events ADD COLUMN replayed INTEGER NOT NULL DEFAULT 0;
"#;

/// The columns `read_fire` reads, in its order, and the history order.
const FIRE_COLUMNS: &str = "SELECT trigger, key, kind, scheduled_for, fired_at, outcome, reason, \
     session_id, cost_usd FROM fires";
const FIRE_ORDER: &str = "ORDER BY fired_ms DESC, coalesce(scheduled_ms, -9223372036854775808) DESC, trigger DESC, \
     key DESC";

/// The columns `raw_meta` reads, in its order. Appends leave the
/// `sessions` row alone unless the status changes, so `updated_at` and
/// `last_seq` are completed from the session's last event (one seek each on
/// the `events` key).
const META_COLUMNS: &str = "SELECT id, workflow, path, workspace, inputs, status, created_at, \
     max(updated_at, coalesce((SELECT ts FROM events WHERE session_id = sessions.id \
     ORDER BY seq DESC LIMIT 1), '')), \
     max(last_seq, coalesce((SELECT max(seq) FROM events WHERE session_id = sessions.id), 0)), \
     owner_pid, owner_host, owner_start, heartbeat_at FROM sessions";

/// What a commit waits for (`session.durability` in the config). See the
/// module documentation.
pub use agentfile_config::Durability;

/// How to open a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub durability: Durability,
    pub busy_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            durability: Durability::default(),
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
        }
    }
}

/// A session store in one SQLite database file.
///
/// One connection behind a mutex: the trait is synchronous and the executor
/// calls it from a blocking thread, so a pool would buy nothing but more file
/// handles. Other processes use their own connections to the same file.
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        let wal = {
            let mut p = self.path.clone().into_os_string();
            p.push("-wal");
            PathBuf::from(p)
        };
        if std::fs::metadata(&wal).is_ok_and(|m| m.len() > WAL_KEEP_BYTES) {
            // Best effort: a reader or writer in another process makes it a
            // partial checkpoint, and the next close tries again.
            let _ = self
                .lock()
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        }
    }
}

impl SqliteStore {
    /// Open (creating it and its folder if needed) the database at `path`, with
    /// default [`Options`], and bring its schema up to date.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        Self::open_with(path, Options::default())
    }

    /// [`SqliteStore::open`] with explicit options.
    pub fn open_with(path: &Path, options: Options) -> Result<SqliteStore, StoreError> {
        let shown = path.display().to_string();
        let io = |message: String| StoreError::Io {
            path: shown.clone(),
            message,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| io(format!("cannot create folder {}: {e}", parent.display())))?;
        }
        let conn = Connection::open(path).map_err(|e| io(format!("cannot open: {e}")))?;
        let store = SqliteStore {
            conn: Mutex::new(conn),
            path: path.to_owned(),
        };
        store.configure(options)?;
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What this connection's commits wait for, as SQLite reports it
    /// (`PRAGMA synchronous`).
    pub fn durability(&self) -> Result<Durability, StoreError> {
        let level: i64 = self
            .lock()
            .pragma_query_value(None, "synchronous", |row| row.get(0))
            .map_err(self.err("read the synchronous setting"))?;
        // 1 NORMAL, 2 FULL, 3 EXTRA (at least as durable as FULL).
        Ok(if level >= 2 {
            Durability::Full
        } else {
            Durability::Normal
        })
    }

    fn configure(&self, options: Options) -> Result<(), StoreError> {
        let mut conn = self.lock();
        conn.busy_timeout(options.busy_timeout)
            .map_err(self.err("set the busy timeout"))?;
        // Check the version before anything writes to the file (switching to
        // WAL rewrites its header): a newer database is left exactly as it was.
        let found = read_version(&conn).map_err(self.err("read the schema version"))?;
        self.check_version(found)?;
        // WAL mode is persistent. Setting it again is not free: it makes SQLite
        // parse the schema a second time (about 0.15 ms per open).
        let mode: String = if header_says_wal(&self.path) {
            "wal".to_owned()
        } else {
            retry_busy(options.busy_timeout, || {
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            })
            .map_err(self.err("switch to WAL mode"))?
        };
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Io {
                path: self.shown(),
                message: format!(
                    "the file system does not support WAL mode (journal_mode is `{mode}`); \
                     put the session database on a local disk"
                ),
            });
        }
        let sync = match options.durability {
            Durability::Normal => "NORMAL",
            Durability::Full => "FULL",
        };
        conn.pragma_update(None, "synchronous", sync)
            .map_err(self.err("set synchronous"))?;
        conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES)
            .map_err(self.err("set the checkpoint interval"))?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(self.err("enable foreign keys"))?;
        // Keep the WAL when the last connection closes (see `Drop`): closing
        // would checkpoint it into the database and delete it, and the next
        // process would create it again — four fsyncs (WAL, database, a new
        // WAL's header and its folder) per CLI run for nothing a crash needs.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            .map_err(self.err("keep the WAL on close"))?;
        // Enough for every statement this file prepares, so none is re-parsed.
        conn.set_prepared_statement_cache_capacity(64);
        // Plans that do not depend on the values bound: without this, SQLite
        // (built with STAT4) compiles `next_seq`'s query and the open-call
        // lookup again every time they are bound, i.e. at every commit.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
            .map_err(self.err("fix query plans"))?;
        if found == SCHEMA_VERSION {
            // Up to date: no need to queue for the write lock.
            return Ok(());
        }
        self.migrate(&mut conn)
    }

    fn check_version(&self, found: i64) -> Result<(), StoreError> {
        if found > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: self.shown(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        if found < 0 {
            return Err(self.corrupt(format!("negative schema version {found}")));
        }
        Ok(())
    }

    fn migrate(&self, conn: &mut Connection) -> Result<(), StoreError> {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.err("begin the migration"))?;
        // Read again inside the write lock: another process may have migrated
        // between our first look and now.
        let found = read_version(&tx).map_err(self.err("read the schema version"))?;
        self.check_version(found)?;
        if found == SCHEMA_VERSION {
            return Ok(());
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            let version = i as i64 + 1;
            tx.execute_batch(sql)
                .map_err(self.err(&format!("apply migration {version}")))?;
            tx.execute(
                "INSERT INTO schema_migrations(version, applied_at) VALUES (?1, ?2)",
                params![version, now()],
            )
            .map_err(self.err(&format!("record migration {version}")))?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(self.err("set the schema version"))?;
        tx.commit().map_err(self.err("commit the migration"))
    }

    /// Run `update` (binding `id`, `principal`), which records `principal`
    /// only where the row has none or the same: no row changed is an unknown
    /// session or another principal's.
    fn write_principal(
        &self,
        id: &str,
        principal: &str,
        update: &str,
        what: &str,
    ) -> Result<(), StoreError> {
        let conn = self.lock();
        let changed = conn
            .prepare_cached(update)
            .and_then(|mut s| s.execute(params![id, principal]))
            .map_err(self.err(what))?;
        if changed > 0 {
            return Ok(());
        }
        let exists = conn
            .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |_| Ok(())).optional())
            .map_err(self.err(what))?;
        Err(match exists {
            Some(()) => StoreError::OwnedByAnother(id.to_owned()),
            None => StoreError::NotFound(id.to_owned()),
        })
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        read_version(&self.lock()).map_err(self.err("read the schema version"))
    }

    /// `PRAGMA integrity_check`: an empty list when the database is sound, else
    /// SQLite's description of each problem.
    pub fn integrity_check(&self) -> Result<Vec<String>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare("PRAGMA integrity_check")
            .map_err(self.err("check integrity"))?;
        let rows = stmt
            .query_map([], |row| row.get::<_, String>(0))
            .map_err(self.err("check integrity"))?;
        let mut problems = Vec::new();
        for row in rows {
            let line = row.map_err(self.err("check integrity"))?;
            if line != "ok" {
                problems.push(line);
            }
        }
        Ok(problems)
    }

    /// How many distinct blobs are stored (for tests and `sessions` statistics).
    pub fn blob_count(&self) -> Result<u64, StoreError> {
        let n: i64 = self
            .lock()
            .query_row("SELECT count(*) FROM blobs", [], |r| r.get(0))
            .map_err(self.err("count blobs"))?;
        Ok(n.max(0) as u64)
    }

    /// The poisoned case only means another thread panicked while holding the
    /// lock; its transaction was rolled back when the `Transaction` dropped, so
    /// the connection is still usable.
    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn shown(&self) -> String {
        self.path.display().to_string()
    }

    fn corrupt(&self, message: String) -> StoreError {
        StoreError::Corrupt {
            path: self.shown(),
            message,
        }
    }

    /// Turn a SQLite error into a [`StoreError`] that names the file and what we
    /// were doing.
    fn err<'a>(&'a self, doing: &'a str) -> impl Fn(rusqlite::Error) -> StoreError + 'a {
        move |e| {
            let code = e.sqlite_error_code();
            let mut message = format!("cannot {doing}: {e}");
            match code {
                Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
                    return self.corrupt(message);
                }
                // SQLite rolls the statement back and keeps the file sound.
                Some(ErrorCode::DiskFull) => {
                    return StoreError::DiskFull {
                        path: self.shown(),
                        message: format!("cannot {doing}"),
                    };
                }
                Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => message.push_str(
                    " (another process kept the database busy past the busy timeout; try again)",
                ),
                _ => {}
            }
            StoreError::Io {
                path: self.shown(),
                message,
            }
        }
    }

    /// SQLite integers are signed; a `u64` beyond `i64::MAX` cannot be stored.
    fn to_sql_int(&self, n: u64, what: &str) -> Result<i64, StoreError> {
        i64::try_from(n).map_err(|_| StoreError::Io {
            path: self.shown(),
            message: format!("{what} {n} is too large to store"),
        })
    }

    /// The `seq` the next event of session `id` must have, read inside `tx`
    /// (which holds the write lock, so no other writer can move it). The
    /// session's log is the `events` table: `sessions.last_seq` only moves with
    /// status changes (and at `create`), so the next seq follows the larger of
    /// the two.
    fn next_seq(&self, tx: &rusqlite::Transaction<'_>, id: &str) -> Result<u64, StoreError> {
        let row: Option<(i64, Option<i64>)> = tx
            .prepare_cached(
                "SELECT last_seq, (SELECT max(seq) FROM events WHERE session_id = ?1) \
                 FROM sessions WHERE id = ?1",
            )
            .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(self.err("read the session"))?;
        let Some((last, max)) = row else {
            return Err(StoreError::NotFound(id.to_owned()));
        };
        let last = from_sql_int(last.max(max.unwrap_or(0)), "last_seq", self)?;
        Ok(last.saturating_add(1))
    }

    /// Write one event and its derived rows inside `tx`; its `seq` has been
    /// checked.
    fn append_in(&self, tx: &rusqlite::Transaction<'_>, event: &Event) -> Result<(), StoreError> {
        let id = &event.session_id;
        let seq = self.to_sql_int(event.seq, "seq")?;
        // Only an event that changes the session's status touches its row: the
        // common event leaves `sessions` alone, which saves a page write per
        // commit (`last_seq` and `updated_at` are read from `events`).
        match status_after(&event.body) {
            None => {}
            // Whoever makes a session run owns it.
            Some(status) if is_live(status) => {
                let me = Owner::current();
                tx.prepare_cached(
                    "UPDATE sessions SET last_seq = ?2, updated_at = max(updated_at, ?3), \
                     status = ?4, owner_pid = ?5, owner_host = ?6, owner_start = ?7, \
                     heartbeat_at = ?8 WHERE id = ?1",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        id,
                        seq,
                        event.ts,
                        status.as_str(),
                        me.pid,
                        me.host,
                        me.start,
                        now()
                    ])
                })
                .map_err(self.err("update the session"))?;
            }
            Some(status) => {
                tx.prepare_cached(
                    "UPDATE sessions SET last_seq = ?2, updated_at = max(updated_at, ?3), \
                     status = ?4 WHERE id = ?1",
                )
                .and_then(|mut s| s.execute(params![id, seq, event.ts, status.as_str()]))
                .map_err(self.err("update the session"))?;
            }
        }

        // Most events hold nothing the blob encoding changes and feed no
        // derived table: their data is stored as serialised, without being
        // built as a value twice on the way (a run's outputs can be large).
        let full;
        let data;
        let mut blobs = Vec::new();
        let plain = (!Self::derives_from_data(&event.body))
            .then(|| data_text(&event.body))
            .flatten()
            .filter(|t| !needs_encoding(t));
        let data_text = match plain {
            Some(text) => {
                data = Value::Null;
                text
            }
            None => {
                full = event_data(&event.body)?;
                data = encode(&full, &mut blobs);
                serde_json::to_string(&data).map_err(|e| StoreError::Io {
                    path: self.shown(),
                    message: format!("cannot serialise event {seq} of `{id}`: {e}"),
                })?
            }
        };
        {
            let mut put = tx
                .prepare_cached(
                    "INSERT INTO blobs(hash, size, content) VALUES (?1, ?2, ?3) \
                     ON CONFLICT(hash) DO NOTHING",
                )
                .map_err(self.err("store a blob"))?;
            for (hash, content) in &blobs {
                put.execute(params![hash, content.len() as i64, content])
                    .map_err(self.err("store a blob"))?;
            }
        }
        let iteration = event.iteration.map(i64::from);
        tx.prepare_cached(
            "INSERT INTO events(session_id, seq, schema_version, ts, type, step, goal, agent, \
             iteration, data, node, node_kind, replayed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, \
             ?9, ?10, ?11, ?12, ?13)",
        )
        .and_then(|mut s| {
            s.execute(params![
                id,
                seq,
                event.schema_version,
                event.ts,
                event.kind(),
                event.step,
                event.goal,
                event.agent,
                iteration,
                data_text,
                event.node,
                event.node_kind,
                event.replayed,
            ])
        })
        .map_err(self.err("store the event"))?;

        self.derive(tx, event, seq, &data)?;

        Ok(())
    }

    /// Keep `messages` and `tool_calls` in step with the event just stored. `data`
    /// is the blob-encoded form, so large texts are referenced, not copied.
    /// The events whose data [`Self::derive`] reads (the others get `null`).
    fn derives_from_data(body: &EventBody) -> bool {
        matches!(
            body,
            EventBody::GoalStarted { .. }
                | EventBody::LlmResponse { .. }
                | EventBody::ToolCall { .. }
                | EventBody::ToolResult { .. }
        )
    }

    fn derive(
        &self,
        tx: &rusqlite::Transaction<'_>,
        event: &Event,
        seq: i64,
        data: &Value,
    ) -> Result<(), StoreError> {
        let id = &event.session_id;
        let iteration = event.iteration.map(i64::from);
        let message = |role: &str, text: &Value, tool_calls: Option<String>| {
            let (content, blob) = text_or_blob(text);
            tx.prepare_cached(
                "INSERT INTO messages(session_id, seq, step, goal, agent, iteration, role, \
                 content, blob, tool_calls) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    id,
                    seq,
                    event.step,
                    event.goal,
                    event.agent,
                    iteration,
                    role,
                    content,
                    blob,
                    tool_calls
                ])
            })
            .map(|_| ())
            .map_err(self.err("store the message"))
        };
        // The call this event answers: the latest one with this id that is still
        // open, since models may reuse call ids across turns. `INDEXED BY`
        // because without statistics SQLite prefers walking the primary key
        // backwards for `max(seq)`, which reads the whole session when the id
        // has no open call: quadratic over a run.
        let open_call = |call_id: &str, column: &str| -> Result<Option<i64>, StoreError> {
            tx.prepare_cached(&format!(
                "SELECT max(seq) FROM tool_calls INDEXED BY tool_calls_by_call \
                 WHERE session_id = ?1 AND call_id = ?2 AND {column} IS NULL"
            ))
            .and_then(|mut s| s.query_row(params![id, call_id], |r| r.get(0)))
            .map_err(self.err("find the tool call"))
        };
        let new_call = |call_id: &str, tool: &str, arguments: Option<String>| {
            tx.prepare_cached(
                "INSERT INTO tool_calls(session_id, seq, call_id, tool, step, goal, agent, \
                 iteration, arguments) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    id,
                    seq,
                    call_id,
                    tool,
                    event.step,
                    event.goal,
                    event.agent,
                    iteration,
                    arguments
                ])
            })
            .map(|_| seq)
            .map_err(self.err("store the tool call"))
        };
        match &event.body {
            EventBody::GoalStarted { .. } => message("user", &data["outcome"], None),
            EventBody::LlmResponse { tool_calls, .. } => {
                let calls = (!tool_calls.is_empty()).then(|| data["tool_calls"].to_string());
                message("assistant", &data["text"], calls)
            }
            EventBody::ToolCall {
                id: call_id, tool, ..
            } => new_call(call_id, tool, Some(data["arguments"].to_string())).map(|_| ()),
            EventBody::ToolResult {
                id: call_id,
                tool,
                is_error,
                duration_ms,
                ..
            } => {
                message("tool", &data["content"], None)?;
                let row = match open_call(call_id, "result_seq")? {
                    Some(row) => row,
                    None => new_call(call_id, tool, None)?,
                };
                let (result, blob) = text_or_blob(&data["content"]);
                let duration = i64::try_from(*duration_ms).unwrap_or(i64::MAX);
                tx.prepare_cached(
                    "UPDATE tool_calls SET result = ?3, result_blob = ?4, result_seq = ?5, \
                     is_error = ?6, duration_ms = ?7 WHERE session_id = ?1 AND seq = ?2",
                )
                .and_then(|mut s| {
                    s.execute(params![id, row, result, blob, seq, is_error, duration])
                })
                .map(|_| ())
                .map_err(self.err("store the tool result"))
            }
            EventBody::PolicyDenied {
                id: call_id,
                tool,
                rule,
                reason,
            } => {
                let row = match open_call(call_id, "denied_rule")? {
                    Some(row) => row,
                    None => new_call(call_id, tool, None)?,
                };
                tx.prepare_cached(
                    "UPDATE tool_calls SET denied_rule = ?3, denied_reason = ?4 \
                     WHERE session_id = ?1 AND seq = ?2",
                )
                .and_then(|mut s| s.execute(params![id, row, rule, reason]))
                .map(|_| ())
                .map_err(self.err("store the denial"))
            }
            _ => Ok(()),
        }
    }

    fn read_meta(&self, conn: &Connection, id: &str) -> Result<Option<SessionMeta>, StoreError> {
        conn.prepare_cached(&format!("{META_COLUMNS} WHERE id = ?1"))
            .and_then(|mut s| s.query_row([id], raw_meta).optional())
            .map_err(self.err("read the session"))?
            .map(|raw| raw.into_meta(SystemTime::now(), |m| self.corrupt(m)))
            .transpose()
    }

    /// The `seq` of the pending `approval_required`, read inside `conn`'s
    /// current transaction.
    fn pending_in(&self, conn: &Connection, id: &str) -> Result<Option<u64>, StoreError> {
        let last_of = |kind: &str| -> Result<Option<i64>, StoreError> {
            conn.prepare_cached("SELECT max(seq) FROM events WHERE session_id = ?1 AND type = ?2")
                .and_then(|mut s| s.query_row(params![id, kind], |r| r.get(0)))
                .map_err(self.err("find the pending approval"))
        };
        let requested = last_of("approval_required")?;
        let resolved = last_of("approval_resolved")?;
        Ok(match (requested, resolved) {
            (Some(r), Some(d)) if d > r => None,
            (Some(r), _) => Some(from_sql_int(r, "seq", self)?),
            (None, _) => None,
        })
    }
}

impl SessionStore for SqliteStore {
    fn create(&self, meta: &SessionMeta) -> Result<(), StoreError> {
        if !is_valid_id(&meta.id) {
            return Err(StoreError::InvalidId(meta.id.clone()));
        }
        let inputs = serde_json::to_string(&meta.inputs).map_err(|e| StoreError::Io {
            path: self.shown(),
            message: format!("cannot serialise the inputs of `{}`: {e}", meta.id),
        })?;
        let last_seq = self.to_sql_int(meta.last_seq, "last_seq")?;
        // A session created queued or running is owned by its creator.
        let owner = is_live(meta.status).then(|| (Owner::current(), now()));
        let conn = self.lock();
        let inserted = conn
            .prepare_cached(
                "INSERT INTO sessions(id, workflow, path, workspace, inputs, status, created_at, \
                 updated_at, last_seq, owner_pid, owner_host, owner_start, heartbeat_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) \
                 ON CONFLICT(id) DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    meta.id,
                    meta.workflow,
                    meta.path,
                    meta.workspace,
                    inputs,
                    meta.status.as_str(),
                    meta.created_at,
                    meta.updated_at,
                    last_seq,
                    owner.as_ref().map(|(o, _)| o.pid),
                    owner.as_ref().map(|(o, _)| &o.host),
                    owner.as_ref().map(|(o, _)| &o.start),
                    owner.as_ref().map(|(_, t)| t),
                ])
            })
            .map_err(self.err("create the session"))?;
        if inserted == 0 {
            return Err(StoreError::AlreadyExists(meta.id.clone()));
        }
        Ok(())
    }

    fn append(&self, event: &Event) -> Result<(), StoreError> {
        self.append_batch(std::slice::from_ref(event))
    }

    /// All events in one transaction and one commit: the group commit that makes
    /// [`Durability::Full`] affordable when events arrive in bursts.
    fn append_batch(&self, events: &[Event]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.err("begin the append"))?;
        // The seq each session's next event must have: read once per session
        // and batch, then followed in memory.
        let mut next: Option<(&str, u64)> = None;
        for event in events {
            let expected = match next {
                Some((id, seq)) if id == event.session_id => seq,
                _ => self.next_seq(&tx, &event.session_id)?,
            };
            if event.seq != expected {
                return Err(StoreError::OutOfOrder {
                    session: event.session_id.clone(),
                    expected,
                    got: event.seq,
                });
            }
            self.append_in(&tx, event)?;
            next = Some((&event.session_id, expected.saturating_add(1)));
        }
        tx.commit().map_err(self.err("commit the append"))
    }

    fn set_status(&self, id: &str, status: SessionStatus) -> Result<(), StoreError> {
        let conn = self.lock();
        let t = now();
        let changed = if is_live(status) {
            let me = Owner::current();
            conn.prepare_cached(
                "UPDATE sessions SET status = ?2, updated_at = max(updated_at, ?3), \
                 owner_pid = ?4, owner_host = ?5, owner_start = ?6, heartbeat_at = ?3 \
                 WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(params![id, status.as_str(), t, me.pid, me.host, me.start]))
        } else {
            conn.prepare_cached(
                "UPDATE sessions SET status = ?2, updated_at = max(updated_at, ?3) WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(params![id, status.as_str(), t]))
        }
        .map_err(self.err("set the status"))?;
        if changed == 0 {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        Ok(())
    }

    fn get(&self, id: &str) -> Result<SessionMeta, StoreError> {
        self.read_meta(&self.lock(), id)?
            .ok_or_else(|| StoreError::NotFound(id.to_owned()))
    }

    fn list(
        &self,
        status: Option<SessionStatus>,
        limit: usize,
    ) -> Result<Vec<SessionMeta>, StoreError> {
        let conn = self.lock();
        let now = SystemTime::now();
        // Stored `queued` or `running` may read as `interrupted` (an owner that
        // is gone), so a filter on any of the three looks at all three rows
        // and decides after reading; there are few of them.
        let (sql, stored): (String, Vec<&str>) = match status {
            Some(s) if is_live(s) || s == SessionStatus::Interrupted => (
                format!(
                    "{META_COLUMNS} WHERE status IN (?1, ?2, ?3) ORDER BY created_at DESC, id DESC"
                ),
                vec!["queued", "running", "interrupted"],
            ),
            // Two statements rather than `?1 IS NULL OR status = ?1`, which no
            // index can serve.
            Some(s) => (
                format!("{META_COLUMNS} WHERE status = ?1 ORDER BY created_at DESC, id DESC"),
                vec![s.as_str()],
            ),
            None => (
                format!("{META_COLUMNS} ORDER BY created_at DESC, id DESC"),
                Vec::new(),
            ),
        };
        let mut stmt = conn
            .prepare_cached(&sql)
            .map_err(self.err("list sessions"))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(stored), raw_meta)
            .map_err(self.err("list sessions"))?;
        let mut out = Vec::new();
        for row in rows {
            if out.len() >= limit {
                break;
            }
            let meta = row
                .map_err(self.err("list sessions"))?
                .into_meta(now, |m| self.corrupt(m))?;
            if status.is_none_or(|s| s == meta.status) {
                out.push(meta);
            }
        }
        Ok(out)
    }

    fn page(&self, query: &SessionQuery) -> Result<Vec<SessionMeta>, StoreError> {
        let limit = query.limit();
        let mut sql = format!("{META_COLUMNS} WHERE 1");
        let mut args: Vec<String> = Vec::new();
        match query.status {
            // As in `list`: the three that may read `interrupted` are all read.
            Some(s) if is_live(s) || s == SessionStatus::Interrupted => {
                sql.push_str(" AND status IN ('queued', 'running', 'interrupted')");
            }
            Some(s) => {
                args.push(s.as_str().to_owned());
                sql.push_str(&format!(" AND status = ?{}", args.len()));
            }
            None => {}
        }
        if let Some(w) = &query.workflow {
            args.push(w.clone());
            sql.push_str(&format!(" AND workflow = ?{}", args.len()));
        }
        if let Some(q) = query.search() {
            args.push(like_pattern(q));
            let n = args.len();
            sql.push_str(&format!(
                " AND (id LIKE ?{n} ESCAPE '\\' OR workflow LIKE ?{n} ESCAPE '\\' \
                 OR inputs LIKE ?{n} ESCAPE '\\')"
            ));
        }
        if let Some(c) = &query.before {
            // A row value: the `(created_at, id)` index serves it and the order.
            let n = args.len() + 1;
            sql.push_str(&format!(" AND (created_at, id) < (?{n}, ?{})", n + 1));
            args.push(c.created_at.clone());
            args.push(c.id.clone());
        }
        sql.push_str(" ORDER BY created_at DESC, id DESC");
        let conn = self.lock();
        let now = SystemTime::now();
        let mut stmt = conn
            .prepare_cached(&sql)
            .map_err(self.err("page sessions"))?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(&args), raw_meta)
            .map_err(self.err("page sessions"))?;
        let mut out = Vec::new();
        for row in rows {
            if out.len() >= limit {
                break;
            }
            let meta = row
                .map_err(self.err("page sessions"))?
                .into_meta(now, |m| self.corrupt(m))?;
            if query.matches(&meta) {
                out.push(meta);
            }
        }
        Ok(out)
    }

    fn summary(&self, id: &str) -> Result<SessionSummary, StoreError> {
        let conn = self.lock();
        let trigger: Option<(Option<String>, Option<String>)> = conn
            .prepare_cached(
                "SELECT json_extract(data, '$.trigger.id'), json_extract(data, '$.trigger.kind') \
                 FROM events WHERE session_id = ?1 AND seq = 1 AND type = 'run_started'",
            )
            .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(self.err("read the session's start"))?;
        let trigger = trigger.and_then(|(i, k)| i.zip(k));
        let last: Option<(String, String, String)> = conn
            .prepare_cached(
                "SELECT ts, type, data FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    .optional()
            })
            .map_err(self.err("read the session's last event"))?;
        let Some((ts, kind, data)) = last else {
            if self.read_meta(&conn, id)?.is_none() {
                return Err(StoreError::NotFound(id.to_owned()));
            }
            return Ok(SessionSummary::default());
        };
        if matches!(
            kind.as_str(),
            "run_complete" | "run_failed" | "run_cancelled" | "run_suspended"
        ) {
            // Totals are numbers, never moved to `blobs`.
            let usage = serde_json::from_str::<Value>(&data)
                .ok()
                .and_then(|d| serde_json::from_value(d["usage"].clone()).ok());
            return Ok(SessionSummary {
                trigger,
                ended_at: Some(ts),
                usage,
            });
        }
        // Still going: what is stored so far.
        let (turns, input, output, cost, priced, tools): (i64, i64, i64, f64, i64, i64) = conn
            .prepare_cached(
                "SELECT count(*) FILTER (WHERE type = 'llm_response'), \
                 coalesce(sum(json_extract(data, '$.input_tokens')) FILTER (WHERE type = 'llm_response'), 0), \
                 coalesce(sum(json_extract(data, '$.output_tokens')) FILTER (WHERE type = 'llm_response'), 0), \
                 coalesce(sum(json_extract(data, '$.cost_usd')) FILTER (WHERE type = 'llm_response'), 0.0), \
                 count(json_extract(data, '$.cost_usd')) FILTER (WHERE type = 'llm_response'), \
                 count(*) FILTER (WHERE type = 'tool_call') \
                 FROM events WHERE session_id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([id], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
                })
            })
            .map_err(self.err("sum the session's usage"))?;
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        let usage = (turns > 0 || tools > 0).then(|| Usage {
            input_tokens: n(input),
            output_tokens: n(output),
            cost_usd: (priced == turns).then_some(cost),
            turns: n(turns),
            tool_calls: n(tools),
        });
        Ok(SessionSummary {
            trigger,
            ended_at: None,
            usage,
        })
    }

    fn workflows(&self) -> Result<Vec<String>, StoreError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached("SELECT DISTINCT workflow FROM sessions ORDER BY workflow LIMIT 1000")
            .map_err(self.err("list workflows"))?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(self.err("list workflows"))?;
        rows.collect::<Result<_, _>>()
            .map_err(self.err("list workflows"))
    }

    fn events(&self, id: &str, after: u64) -> Result<Vec<Event>, StoreError> {
        self.read_events(id, after, None)
    }

    fn events_page(&self, id: &str, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        self.read_events(id, after, Some(limit))
    }

    fn pending_approval(&self, id: &str) -> Result<Option<u64>, StoreError> {
        let conn = self.lock();
        if self.read_meta(&conn, id)?.is_none() {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        self.pending_in(&conn, id)
    }

    fn record_approval(
        &self,
        id: &str,
        approved: bool,
        note: Option<&str>,
    ) -> Result<Approval, StoreError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.err("begin recording the approval"))?;
        if self.read_meta(&tx, id)?.is_none() {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        let Some(seq) = self.pending_in(&tx, id)? else {
            return Err(StoreError::NoPendingApproval(id.to_owned()));
        };
        let approval = Approval {
            session_id: id.to_owned(),
            seq_requested: seq,
            approved,
            note: note.map(str::to_owned),
            decided_at: now(),
        };
        let inserted = tx
            .prepare_cached(
                "INSERT INTO approvals(session_id, seq_requested, approved, note, decided_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    id,
                    i64::try_from(seq).unwrap_or(i64::MAX),
                    approved,
                    note,
                    approval.decided_at
                ])
            })
            .map_err(self.err("record the approval"))?;
        if inserted == 0 {
            let earlier = read_approval(&tx, id, seq, self)?;
            return Err(StoreError::AlreadyDecided {
                session: id.to_owned(),
                seq,
                approved: earlier.is_some_and(|a| a.approved),
            });
        }
        tx.commit().map_err(self.err("commit the approval"))?;
        Ok(approval)
    }

    fn approval(&self, id: &str, seq_requested: u64) -> Result<Option<Approval>, StoreError> {
        let conn = self.lock();
        if self.read_meta(&conn, id)?.is_none() {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        read_approval(&conn, id, seq_requested, self)
    }

    fn owner(&self, id: &str) -> Result<Option<OwnerRecord>, StoreError> {
        let conn = self.lock();
        conn.prepare_cached(&format!("{META_COLUMNS} WHERE id = ?1"))
            .and_then(|mut s| s.query_row([id], raw_meta).optional())
            .map_err(self.err("read the session"))?
            .map(|raw| raw.owner())
            .ok_or_else(|| StoreError::NotFound(id.to_owned()))
    }

    fn task_owner(&self, id: &str) -> Result<Option<String>, StoreError> {
        let conn = self.lock();
        conn.prepare_cached("SELECT task_owner FROM sessions WHERE id = ?1")
            .and_then(|mut s| {
                s.query_row([id], |r| r.get::<_, Option<String>>(0))
                    .optional()
            })
            .map_err(self.err("read the task owner"))?
            .ok_or_else(|| StoreError::NotFound(id.to_owned()))
    }

    fn set_task_owner(&self, id: &str, principal: &str) -> Result<(), StoreError> {
        self.write_principal(
            id,
            principal,
            "UPDATE sessions SET task_owner = ?2, principal = ?2 \
             WHERE id = ?1 AND (principal IS NULL OR principal = ?2)",
            "record the task owner",
        )
    }

    fn principal(&self, id: &str) -> Result<Option<String>, StoreError> {
        let conn = self.lock();
        conn.prepare_cached("SELECT principal FROM sessions WHERE id = ?1")
            .and_then(|mut s| {
                s.query_row([id], |r| r.get::<_, Option<String>>(0))
                    .optional()
            })
            .map_err(self.err("read the session's owner"))?
            .ok_or_else(|| StoreError::NotFound(id.to_owned()))
    }

    fn set_principal(&self, id: &str, principal: &str) -> Result<(), StoreError> {
        self.write_principal(
            id,
            principal,
            "UPDATE sessions SET principal = ?2 \
             WHERE id = ?1 AND (principal IS NULL OR principal = ?2)",
            "record the session's owner",
        )
    }

    fn run_settings(&self, id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let conn = self.lock();
        let text = conn
            .prepare_cached("SELECT run_settings FROM sessions WHERE id = ?1")
            .and_then(|mut s| {
                s.query_row([id], |r| r.get::<_, Option<String>>(0))
                    .optional()
            })
            .map_err(self.err("read the run settings"))?
            .ok_or_else(|| StoreError::NotFound(id.to_owned()))?;
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    fn set_run_settings(&self, id: &str, settings: &serde_json::Value) -> Result<(), StoreError> {
        let changed = self
            .lock()
            .prepare_cached("UPDATE sessions SET run_settings = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![id, settings.to_string()]))
            .map_err(self.err("record the run settings"))?;
        if changed == 0 {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        Ok(())
    }

    fn record_owner(&self, id: &str, owner: &OwnerRecord) -> Result<(), StoreError> {
        let changed = self
            .lock()
            .prepare_cached(
                "UPDATE sessions SET owner_pid = ?2, owner_host = ?3, owner_start = ?4, \
                 heartbeat_at = ?5 WHERE id = ?1",
            )
            .and_then(|mut s| {
                s.execute(params![
                    id,
                    owner.owner.pid,
                    owner.owner.host,
                    owner.owner.start,
                    owner.heartbeat_at
                ])
            })
            .map_err(self.err("record the owner"))?;
        if changed == 0 {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        Ok(())
    }

    fn heartbeat(&self, id: &str) -> Result<(), StoreError> {
        let me = Owner::current();
        self.lock()
            .prepare_cached(
                "UPDATE sessions SET heartbeat_at = ?2 WHERE id = ?1 AND owner_pid = ?3 \
                 AND owner_start = ?4 AND owner_host = ?5",
            )
            .and_then(|mut s| s.execute(params![id, now(), me.pid, me.start, me.host]))
            .map_err(self.err("record the heartbeat"))?;
        Ok(())
    }

    fn claim_interrupted(&self, id: &str) -> Result<bool, StoreError> {
        let mut conn = self.lock();
        // The look and the write in one write transaction: a second claimer
        // (another process on the file) waits, then reads `running`.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.err("begin claiming the session"))?;
        let Some(meta) = self.read_meta(&tx, id)? else {
            return Err(StoreError::NotFound(id.to_owned()));
        };
        if meta.status != SessionStatus::Interrupted {
            return Ok(false);
        }
        let me = Owner::current();
        tx.prepare_cached(
            "UPDATE sessions SET status = 'running', updated_at = max(updated_at, ?2), \
             owner_pid = ?3, owner_host = ?4, owner_start = ?5, heartbeat_at = ?2 \
             WHERE id = ?1",
        )
        .and_then(|mut s| s.execute(params![id, now(), me.pid, me.host, me.start]))
        .map_err(self.err("claim the session"))?;
        tx.commit()
            .map_err(self.err("commit claiming the session"))?;
        Ok(true)
    }

    fn reap_orphans(&self) -> Result<Vec<String>, StoreError> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.err("begin marking orphaned sessions"))?;
        let now_t = SystemTime::now();
        let mut orphans = Vec::new();
        {
            let mut stmt = tx
                .prepare_cached(&format!(
                    "{META_COLUMNS} WHERE status IN ('queued', 'running') \
                     ORDER BY created_at, id"
                ))
                .map_err(self.err("find orphaned sessions"))?;
            let rows = stmt
                .query_map([], raw_meta)
                .map_err(self.err("find orphaned sessions"))?;
            for row in rows {
                let raw = row.map_err(self.err("find orphaned sessions"))?;
                let id = raw.id.clone();
                if raw.into_meta(now_t, |m| self.corrupt(m))?.status == SessionStatus::Interrupted {
                    orphans.push(id);
                }
            }
        }
        // Inside the write transaction no one can claim a session between the
        // look and the write.
        let t = now();
        for id in &orphans {
            tx.prepare_cached(
                "UPDATE sessions SET status = 'interrupted', updated_at = max(updated_at, ?2) \
                 WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(params![id, t]))
            .map_err(self.err("mark a session interrupted"))?;
        }
        tx.commit()
            .map_err(self.err("commit marking orphaned sessions"))?;
        Ok(orphans)
    }

    /// One `INSERT … ON CONFLICT DO NOTHING`: a write statement takes the
    /// database's write lock at once (waiting up to the busy timeout for
    /// another process's), and the primary key decides who inserted.
    fn claim_fire(&self, fire: &FireRecord) -> Result<bool, StoreError> {
        let (fired_ms, scheduled_ms) = fire.validate()?;
        let inserted = self
            .lock()
            .prepare_cached(
                "INSERT INTO fires(trigger, key, kind, scheduled_for, scheduled_ms, fired_at, \
                 fired_ms, outcome, reason, session_id, cost_usd) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
                 ON CONFLICT(trigger, key) DO NOTHING",
            )
            .and_then(|mut s| {
                s.execute(params![
                    fire.trigger,
                    fire.key,
                    fire.kind.as_str(),
                    fire.scheduled_for,
                    scheduled_ms,
                    fire.fired_at,
                    fired_ms,
                    fire.outcome.as_str(),
                    fire.reason,
                    fire.session_id,
                    fire.cost_usd,
                ])
            })
            .map_err(self.err("claim the fire"))?;
        Ok(inserted == 1)
    }

    fn fire(&self, trigger: &str, key: &str) -> Result<Option<FireRecord>, StoreError> {
        let conn = self.lock();
        let raw = conn
            .prepare_cached(&format!("{FIRE_COLUMNS} WHERE trigger = ?1 AND key = ?2"))
            .and_then(|mut s| s.query_row([trigger, key], RawFire::from_row).optional())
            .map_err(self.err("read the fire"))?;
        raw.map(|r| r.into_fire(self)).transpose()
    }

    fn set_fire_session(
        &self,
        trigger: &str,
        key: &str,
        session_id: &str,
    ) -> Result<(), StoreError> {
        self.update_fire(
            trigger,
            key,
            "UPDATE fires SET session_id = ?3 WHERE trigger = ?1 AND key = ?2",
            &session_id,
        )
    }

    fn finish_fire(
        &self,
        trigger: &str,
        key: &str,
        outcome: FireOutcome,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        let changed = self
            .lock()
            .prepare_cached(
                "UPDATE fires SET outcome = ?3, reason = ?4 WHERE trigger = ?1 AND key = ?2",
            )
            .and_then(|mut s| s.execute(params![trigger, key, outcome.as_str(), reason]))
            .map_err(self.err("record the fire's outcome"))?;
        no_fire_unless(changed, trigger, key)
    }

    fn set_fire_cost(&self, trigger: &str, key: &str, cost_usd: f64) -> Result<(), StoreError> {
        if !cost_usd.is_finite() {
            return Err(StoreError::InvalidFire {
                trigger: trigger.to_owned(),
                key: key.to_owned(),
                message: "cost_usd must be a finite number".into(),
            });
        }
        self.update_fire(
            trigger,
            key,
            "UPDATE fires SET cost_usd = ?3 WHERE trigger = ?1 AND key = ?2",
            &cost_usd,
        )
    }

    fn fires(&self, trigger: Option<&str>, limit: usize) -> Result<Vec<FireRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let conn = self.lock();
        let raws = match trigger {
            Some(t) => conn
                .prepare_cached(&format!(
                    "{FIRE_COLUMNS} WHERE trigger = ?1 {FIRE_ORDER} LIMIT ?2"
                ))
                .and_then(|mut s| {
                    s.query_map(params![t, limit], RawFire::from_row)?
                        .collect::<rusqlite::Result<Vec<_>>>()
                }),
            None => conn
                .prepare_cached(&format!("{FIRE_COLUMNS} {FIRE_ORDER} LIMIT ?1"))
                .and_then(|mut s| {
                    s.query_map(params![limit], RawFire::from_row)?
                        .collect::<rusqlite::Result<Vec<_>>>()
                }),
        }
        .map_err(self.err("read the fires"))?;
        raws.into_iter().map(|r| r.into_fire(self)).collect()
    }

    fn last_fire(&self, trigger: &str) -> Result<Option<FireRecord>, StoreError> {
        let conn = self.lock();
        let raw = conn
            .prepare_cached(&format!(
                "{FIRE_COLUMNS} WHERE trigger = ?1 AND scheduled_ms IS NOT NULL \
                 AND outcome IN ('fired', 'skipped') \
                 ORDER BY scheduled_ms DESC, fired_ms DESC, key DESC LIMIT 1"
            ))
            .and_then(|mut s| s.query_row([trigger], RawFire::from_row).optional())
            .map_err(self.err("read the last fire"))?;
        raw.map(|r| r.into_fire(self)).transpose()
    }

    fn fired_between(
        &self,
        trigger: &str,
        from: SystemTime,
        to: SystemTime,
    ) -> Result<(u64, f64), StoreError> {
        let (count, cost): (i64, f64) = self
            .lock()
            .prepare_cached(
                "SELECT count(*), total(cost_usd) FROM fires WHERE trigger = ?1 \
                 AND outcome = 'fired' AND fired_ms >= ?2 AND fired_ms < ?3",
            )
            .and_then(|mut s| {
                s.query_row(params![trigger, system_ms(from), system_ms(to)], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
            })
            .map_err(self.err("count the fires"))?;
        Ok((from_sql_int(count, "count", self)?, cost))
    }
}

impl SqliteStore {
    /// A session's events after `after`, at most `limit` of them (all with
    /// `None`): the limit is in the query, so only what is returned is read.
    fn read_events(
        &self,
        id: &str,
        after: u64,
        limit: Option<usize>,
    ) -> Result<Vec<Event>, StoreError> {
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        // SQLite reads a negative limit as none.
        let limit = limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX));
        let mut conn = self.lock();
        // One read transaction, so the events and the blobs they refer to are
        // one consistent snapshot even while another process appends.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(self.err("begin the read"))?;
        let exists: Option<i64> = tx
            .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
            .map_err(self.err("read the session"))?;
        if exists.is_none() {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        let mut stmt = tx
            .prepare_cached(
                "SELECT seq, schema_version, ts, type, step, goal, agent, iteration, data, \
                 node, node_kind, replayed FROM events WHERE session_id = ?1 AND seq > ?2 \
                 ORDER BY seq LIMIT ?3",
            )
            .map_err(self.err("read events"))?;
        let rows = stmt
            .query_map(params![id, after, limit], RawEvent::from_row)
            .map_err(self.err("read events"))?;
        let mut blob_stmt = tx
            .prepare_cached("SELECT content FROM blobs WHERE hash = ?1")
            .map_err(self.err("read blobs"))?;
        // A blob referenced by many events (a goal's output) is read once.
        let mut cache: HashMap<String, String> = HashMap::new();
        let mut out = Vec::new();
        for row in rows {
            let raw = row.map_err(self.err("read events"))?;
            let event = raw.into_event(id, self, &mut |hash: &str| {
                if let Some(hit) = cache.get(hash) {
                    return Ok(hit.clone());
                }
                let content: Option<String> = blob_stmt
                    .query_row([hash], |r| r.get(0))
                    .optional()
                    .map_err(self.err("read a blob"))?;
                let content = content.ok_or_else(|| {
                    self.corrupt(format!("blob {hash} is referenced but missing"))
                })?;
                cache.insert(hash.to_owned(), content.clone());
                Ok(content)
            })?;
            out.push(event);
        }
        Ok(out)
    }
}

impl SqliteStore {
    fn update_fire(
        &self,
        trigger: &str,
        key: &str,
        sql: &str,
        value: &dyn rusqlite::ToSql,
    ) -> Result<(), StoreError> {
        let changed = self
            .lock()
            .prepare_cached(sql)
            .and_then(|mut s| s.execute(params![trigger, key, value]))
            .map_err(self.err("update the fire"))?;
        no_fire_unless(changed, trigger, key)
    }
}

fn no_fire_unless(changed: usize, trigger: &str, key: &str) -> Result<(), StoreError> {
    if changed == 0 {
        return Err(StoreError::NoFire {
            trigger: trigger.to_owned(),
            key: key.to_owned(),
        });
    }
    Ok(())
}

/// A `fires` row as SQLite returns it (see [`FIRE_COLUMNS`]).
struct RawFire {
    trigger: String,
    key: String,
    kind: String,
    scheduled_for: Option<String>,
    fired_at: String,
    outcome: String,
    reason: Option<String>,
    session_id: Option<String>,
    cost_usd: Option<f64>,
}

impl RawFire {
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawFire> {
        Ok(RawFire {
            trigger: r.get(0)?,
            key: r.get(1)?,
            kind: r.get(2)?,
            scheduled_for: r.get(3)?,
            fired_at: r.get(4)?,
            outcome: r.get(5)?,
            reason: r.get(6)?,
            session_id: r.get(7)?,
            cost_usd: r.get(8)?,
        })
    }

    fn into_fire(self, store: &SqliteStore) -> Result<FireRecord, StoreError> {
        let kind = FireKind::parse(&self.kind)
            .ok_or_else(|| store.corrupt(format!("unknown fire kind `{}`", self.kind)))?;
        let outcome = FireOutcome::parse(&self.outcome)
            .ok_or_else(|| store.corrupt(format!("unknown fire outcome `{}`", self.outcome)))?;
        Ok(FireRecord {
            trigger: self.trigger,
            kind,
            key: self.key,
            scheduled_for: self.scheduled_for,
            fired_at: self.fired_at,
            outcome,
            reason: self.reason,
            session_id: self.session_id,
            cost_usd: self.cost_usd,
        })
    }
}

fn read_approval(
    conn: &Connection,
    id: &str,
    seq: u64,
    store: &SqliteStore,
) -> Result<Option<Approval>, StoreError> {
    let Ok(seq_sql) = i64::try_from(seq) else {
        return Ok(None);
    };
    conn.prepare_cached(
        "SELECT approved, note, decided_at FROM approvals \
         WHERE session_id = ?1 AND seq_requested = ?2",
    )
    .and_then(|mut s| {
        s.query_row(params![id, seq_sql], |r| {
            Ok(Approval {
                session_id: id.to_owned(),
                seq_requested: seq,
                approved: r.get(0)?,
                note: r.get(1)?,
                decided_at: r.get(2)?,
            })
        })
        .optional()
    })
    .map_err(store.err("read the approval"))
}

/// Whether the database file's header marks it as a WAL database (read and
/// write format versions 2, bytes 18 and 19), which SQLite then opens in WAL
/// mode by itself. Any doubt (no file, short read) says no, and the mode is set.
fn header_says_wal(path: &Path) -> bool {
    use std::io::Read;
    let mut header = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok()
        && header.starts_with(b"SQLite format 3\0")
        && header[18] == 2
        && header[19] == 2
}

/// `PRAGMA user_version`: 0 for a new file, else the last migration applied.
fn read_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
}

/// Switching to WAL needs a moment of exclusive access, which SQLite does not
/// wait for with the busy handler; two processes opening a fresh database at
/// once would otherwise see `database is locked`.
fn retry_busy<T>(
    timeout: Duration,
    mut f: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match f() {
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

fn from_sql_int(n: i64, what: &str, store: &SqliteStore) -> Result<u64, StoreError> {
    u64::try_from(n).map_err(|_| store.corrupt(format!("negative {what} {n}")))
}

/// A `sessions` row as SQLite returns it (see [`META_COLUMNS`]).
fn raw_meta(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawMeta> {
    Ok(RawMeta {
        id: r.get(0)?,
        workflow: r.get(1)?,
        path: r.get(2)?,
        workspace: r.get(3)?,
        inputs: r.get(4)?,
        status: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
        last_seq: r.get(8)?,
        owner_pid: r.get(9)?,
        owner_host: r.get(10)?,
        owner_start: r.get(11)?,
        heartbeat_at: r.get(12)?,
    })
}

/// An `events` row as stored, before it is decoded.
struct RawEvent {
    seq: i64,
    schema_version: i64,
    ts: String,
    kind: String,
    step: Option<String>,
    goal: Option<String>,
    agent: Option<String>,
    iteration: Option<i64>,
    data: String,
    node: Option<String>,
    node_kind: Option<String>,
    replayed: bool,
}

impl RawEvent {
    fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawEvent> {
        Ok(RawEvent {
            seq: r.get(0)?,
            schema_version: r.get(1)?,
            ts: r.get(2)?,
            kind: r.get(3)?,
            step: r.get(4)?,
            goal: r.get(5)?,
            agent: r.get(6)?,
            iteration: r.get(7)?,
            data: r.get(8)?,
            node: r.get(9)?,
            node_kind: r.get(10)?,
            replayed: r.get(11)?,
        })
    }

    fn into_event(
        self,
        id: &str,
        store: &SqliteStore,
        load: &mut dyn FnMut(&str) -> Result<String, StoreError>,
    ) -> Result<Event, StoreError> {
        let seq = self.seq;
        let bad = |what: String| store.corrupt(format!("event {seq} of session `{id}`: {what}"));
        let data: Value =
            serde_json::from_str(&self.data).map_err(|e| bad(format!("unreadable data: {e}")))?;
        // Most events hold no blob reference; skip the walk for them.
        let data = if self.data.contains("\"$blob\"") || self.data.contains("\"$lit\"") {
            decode(data, load).map_err(|e| match e {
                Decode::Store(e) => e,
                Decode::Malformed(m) => bad(m),
            })?
        } else {
            data
        };
        let mut body = Map::new();
        body.insert("type".into(), Value::String(self.kind));
        body.insert("data".into(), data);
        let body: EventBody = serde_json::from_value(Value::Object(body))
            .map_err(|e| bad(format!("does not match its type: {e}")))?;
        Ok(Event {
            schema_version: u32::try_from(self.schema_version)
                .map_err(|_| bad(format!("schema_version {}", self.schema_version)))?,
            session_id: id.to_owned(),
            seq: from_sql_int(seq, "seq", store)?,
            ts: self.ts,
            step: self.step,
            goal: self.goal,
            agent: self.agent,
            iteration: self
                .iteration
                .map(|i| u32::try_from(i).map_err(|_| bad(format!("iteration {i}"))))
                .transpose()?,
            node: self.node,
            node_kind: self.node_kind,
            replayed: self.replayed,
            body,
        })
    }
}

/// The SHA-256 of `text`, lowercase hex: the key of a blob.
pub fn blob_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    let mut hex = String::with_capacity(64);
    for b in digest {
        hex.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        hex.push(char::from_digit(u32::from(b & 0xf), 16).unwrap_or('0'));
    }
    hex
}

/// Whether serialised data may hold what [`encode`] changes: a string of
/// [`BLOB_THRESHOLD`] bytes or more (judged by its escaped length, never
/// shorter than the string), or a key the decoder reads as a marker.
fn needs_encoding(json: &str) -> bool {
    if json.contains("\"$blob\"") || json.contains("\"$lit\"") {
        return true;
    }
    let b = json.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            let start = i + 1;
            i = start;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            if i.min(b.len()) - start >= BLOB_THRESHOLD {
                return true;
            }
        }
        i += 1;
    }
    false
}

/// An object that the decoder would read as a marker.
fn is_marker(m: &Map<String, Value>) -> bool {
    m.len() == 1 && (m.contains_key("$blob") || m.contains_key("$lit"))
}

/// The blob encoding of `v` (see the module documentation); each large string
/// is added to `blobs` as (hash, content).
fn encode<'a>(v: &'a Value, blobs: &mut Vec<(String, &'a str)>) -> Value {
    match v {
        Value::String(s) if s.len() >= BLOB_THRESHOLD => {
            let hash = blob_hash(s);
            let marker = Value::Object(Map::from_iter([(
                "$blob".to_owned(),
                Value::String(hash.clone()),
            )]));
            blobs.push((hash, s));
            marker
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| encode(i, blobs)).collect()),
        Value::Object(m) => {
            let inner = Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), encode(v, blobs)))
                    .collect(),
            );
            if is_marker(m) {
                Value::Object(Map::from_iter([("$lit".to_owned(), inner)]))
            } else {
                inner
            }
        }
        other => other.clone(),
    }
}

enum Decode {
    Store(StoreError),
    Malformed(String),
}

/// The inverse of [`encode`]; `load` fetches a blob by hash.
fn decode(
    v: Value,
    load: &mut dyn FnMut(&str) -> Result<String, StoreError>,
) -> Result<Value, Decode> {
    match v {
        Value::Array(items) => items
            .into_iter()
            .map(|i| decode(i, load))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        Value::Object(mut m) if is_marker(&m) => {
            if let Some(hash) = m.remove("$blob") {
                let Value::String(hash) = hash else {
                    return Err(Decode::Malformed("a blob reference is not a string".into()));
                };
                return load(&hash).map(Value::String).map_err(Decode::Store);
            }
            match m.remove("$lit") {
                Some(Value::Object(inner)) => decode_members(inner, load),
                _ => Err(Decode::Malformed("a `$lit` wrapper holds no object".into())),
            }
        }
        Value::Object(m) => decode_members(m, load),
        other => Ok(other),
    }
}

fn decode_members(
    m: Map<String, Value>,
    load: &mut dyn FnMut(&str) -> Result<String, StoreError>,
) -> Result<Value, Decode> {
    m.into_iter()
        .map(|(k, v)| decode(v, load).map(|v| (k, v)))
        .collect::<Result<Map<_, _>, _>>()
        .map(Value::Object)
}

/// A text field in the blob encoding: the text itself, or the hash it is stored
/// under.
fn text_or_blob(v: &Value) -> (Option<&str>, Option<&str>) {
    match v {
        Value::String(s) => (Some(s), None),
        Value::Object(m) => (None, m.get("$blob").and_then(Value::as_str)),
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(v: &Value) -> Value {
        let mut blobs = Vec::new();
        let enc = encode(v, &mut blobs);
        let table: HashMap<String, String> =
            blobs.into_iter().map(|(h, c)| (h, c.to_owned())).collect();
        let text = serde_json::to_string(&enc).unwrap();
        let parsed: Value = serde_json::from_str(&text).unwrap();
        let Ok(back) = decode(parsed, &mut |h: &str| {
            table
                .get(h)
                .cloned()
                .ok_or_else(|| StoreError::NotFound(h.to_owned()))
        }) else {
            panic!("decode failed")
        };
        back
    }

    /// Cached statements stay compiled across commits: re-preparing them at
    /// every bind cost a fifth of a commit.
    #[test]
    fn appends_do_not_recompile_their_queries() {
        use agentfile_wire::events::EventBody;
        let dir = std::env::temp_dir().join(format!("agentfile-qpsg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = SqliteStore::open(&dir.join("sessions.db")).unwrap();
        let meta = SessionMeta {
            id: "s".into(),
            workflow: "w".into(),
            path: "/p".into(),
            workspace: "/ws".into(),
            inputs: Default::default(),
            status: SessionStatus::Running,
            created_at: now(),
            updated_at: now(),
            last_seq: 0,
        };
        store.create(&meta).unwrap();
        let event = |seq: u64, body: EventBody| Event {
            schema_version: 1,
            session_id: "s".into(),
            seq,
            ts: now(),
            step: None,
            goal: None,
            agent: None,
            iteration: None,
            node: None,
            node_kind: None,
            replayed: false,
            body,
        };
        for n in 1..=20u64 {
            let id = format!("c{n}");
            let batch = [
                event(
                    n * 2 - 1,
                    EventBody::ToolCall {
                        id: id.clone(),
                        tool: "ls".into(),
                        arguments: json!({"path": "."}),
                    },
                ),
                event(
                    n * 2,
                    EventBody::ToolResult {
                        id,
                        tool: "ls".into(),
                        content: "x".into(),
                        is_error: false,
                        duration_ms: 1,
                    },
                ),
            ];
            store.append_batch(&batch).unwrap();
        }
        let conn = store.lock();
        let next_seq = conn
            .prepare_cached(
                "SELECT last_seq, (SELECT max(seq) FROM events WHERE session_id = ?1) \
                 FROM sessions WHERE id = ?1",
            )
            .unwrap();
        assert_eq!(
            next_seq.get_status(rusqlite::StatementStatus::RePrepare),
            0,
            "next_seq was compiled again"
        );
        drop(next_seq);
        drop(conn);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A reopened WAL database skips setting the mode; a database another
    /// program left in rollback mode is still switched.
    #[test]
    fn the_journal_mode_is_set_only_when_the_header_lacks_it() {
        let dir = std::env::temp_dir().join(format!("agentfile-walhdr-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sessions.db");
        assert!(!header_says_wal(&path), "no file yet");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch("CREATE TABLE t(x); PRAGMA journal_mode = DELETE;")
                .unwrap();
        }
        assert!(!header_says_wal(&path), "a rollback-journal database");
        drop(SqliteStore::open(&path).unwrap());
        assert!(header_says_wal(&path));
        let store = SqliteStore::open(&path).unwrap();
        let mode: String = store
            .lock()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_version_1_database_migrates_and_keeps_its_sessions() {
        let dir = std::env::temp_dir().join(format!("agentfile-migrate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sessions.db");
        let old = agentfile_wire::events::rfc3339(
            SystemTime::now() - super::super::owner::STALE_AFTER * 2,
        );
        let fresh = now();
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATION_1).unwrap();
            conn.execute_batch(
                "INSERT INTO schema_migrations VALUES (1, 'then'); PRAGMA user_version = 1;",
            )
            .unwrap();
            for (id, at) in [("old", &old), ("recent", &fresh)] {
                conn.execute(
                    "INSERT INTO sessions VALUES (?1, 'w', '/p', '/ws', '{}', 'running', ?2, ?2, 0)",
                    params![id, at],
                )
                .unwrap();
            }
        }
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        // No owner was recorded then: the last sign of life decides.
        assert_eq!(store.get("old").unwrap().status, SessionStatus::Interrupted);
        assert_eq!(store.get("recent").unwrap().status, SessionStatus::Running);
        assert_eq!(store.owner("old").unwrap(), None);
        assert_eq!(store.reap_orphans().unwrap(), ["old"]);
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A database built by the real migrations 1 to 8 (before `replayed`
    /// events), holding an event written with version 8's columns, migrates
    /// to 9: that event reads back as its run's own, and a fork's copied
    /// event is stored and read back `replayed`.
    #[test]
    fn a_version_8_database_reads_its_events_as_not_replayed() {
        let dir = std::env::temp_dir().join(format!("agentfile-migrate8-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sessions.db");
        let t = now();
        {
            let conn = Connection::open(&path).unwrap();
            for (i, sql) in MIGRATIONS[..8].iter().enumerate() {
                conn.execute_batch(sql).unwrap();
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (?1, 'then')",
                    params![i as i64 + 1],
                )
                .unwrap();
            }
            conn.execute_batch("PRAGMA user_version = 8;").unwrap();
            conn.execute(
                "INSERT INTO sessions(id, workflow, path, workspace, inputs, status, created_at, \
                 updated_at, last_seq) VALUES ('old', 'w', '/p', '/ws', '{}', 'running', ?1, ?1, 0)",
                params![t],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO events(session_id, seq, schema_version, ts, type, step, goal, agent, \
                 iteration, data, node, node_kind) VALUES ('old', 1, 1, ?1, 'warning', NULL, \
                 NULL, NULL, NULL, '{\"message\":\"then\"}', 'main', 'goal')",
                params![t],
            )
            .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        let old = Event {
            schema_version: 1,
            session_id: "old".into(),
            seq: 1,
            ts: t.clone(),
            step: None,
            goal: None,
            agent: None,
            iteration: None,
            node: Some("main".into()),
            node_kind: Some("goal".into()),
            replayed: false,
            body: EventBody::Warning {
                message: "then".into(),
            },
        };
        assert_eq!(store.events("old", 0).unwrap(), std::slice::from_ref(&old));
        let copied = Event {
            seq: 2,
            replayed: true,
            ..old.clone()
        };
        store.append(&copied).unwrap();
        assert_eq!(store.events("old", 0).unwrap(), [old, copied]);
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A database built by the real migrations 1 to 7 (before session
    /// principals) migrates to 8: a task's owner becomes its session's
    /// principal, a session with none stays the operator's, and the owner
    /// recorded then does not move.
    #[test]
    fn a_version_7_database_keeps_its_task_owners_as_principals() {
        let dir = std::env::temp_dir().join(format!("agentfile-migrate7-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sessions.db");
        let t = now();
        {
            let conn = Connection::open(&path).unwrap();
            for (i, sql) in MIGRATIONS[..7].iter().enumerate() {
                conn.execute_batch(sql).unwrap();
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (?1, 'then')",
                    params![i as i64 + 1],
                )
                .unwrap();
            }
            conn.execute_batch("PRAGMA user_version = 7;").unwrap();
            for (id, owner) in [("task", Some("token:abc")), ("plain", None)] {
                conn.execute(
                    "INSERT INTO sessions(id, workflow, path, workspace, inputs, status, \
                     created_at, updated_at, last_seq, task_owner) \
                     VALUES (?1, 'w', '/p', '/ws', '{}', 'completed', ?2, ?2, 0, ?3)",
                    params![id, t, owner],
                )
                .unwrap();
            }
        }
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(
            store.principal("task").unwrap().as_deref(),
            Some("token:abc")
        );
        assert_eq!(
            store.task_owner("task").unwrap().as_deref(),
            Some("token:abc")
        );
        assert_eq!(store.principal("plain").unwrap(), None);
        assert!(matches!(
            store.set_principal("task", "token:def"),
            Err(StoreError::OwnedByAnother(_))
        ));
        store.set_principal("task", "token:abc").unwrap();
        store.set_principal("plain", "token:def").unwrap();
        assert_eq!(
            store.principal("plain").unwrap().as_deref(),
            Some("token:def")
        );
        assert_eq!(store.task_owner("plain").unwrap(), None, "not a task");
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A database built by the real migrations 1 to 6 (before fire records)
    /// migrates to 7, keeps its sessions and events, and takes fires.
    #[test]
    fn a_version_6_database_gains_fire_records_and_keeps_its_sessions() {
        use super::super::fires::{FireKind, FireOutcome, FireRecord};
        let dir = std::env::temp_dir().join(format!("agentfile-migrate6-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sessions.db");
        let t = now();
        {
            let conn = Connection::open(&path).unwrap();
            for (i, sql) in MIGRATIONS[..6].iter().enumerate() {
                conn.execute_batch(sql).unwrap();
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (?1, 'then')",
                    params![i as i64 + 1],
                )
                .unwrap();
            }
            conn.execute_batch("PRAGMA user_version = 6;").unwrap();
            conn.execute(
                "INSERT INTO sessions(id, workflow, path, workspace, inputs, status, created_at, \
                 updated_at, last_seq) VALUES ('kept', 'w', '/p', '/ws', '{}', 'completed', ?1, ?1, 0)",
                params![t],
            )
            .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(store.get("kept").unwrap().status, SessionStatus::Completed);
        let fire = FireRecord {
            trigger: "nightly#0".into(),
            kind: FireKind::Schedule,
            key: "2026-11-22T10:00:00Z".into(),
            scheduled_for: Some("2026-11-22T10:00:00Z".into()),
            fired_at: t.clone(),
            outcome: FireOutcome::Fired,
            reason: None,
            session_id: Some("kept".into()),
            cost_usd: None,
        };
        assert!(store.claim_fire(&fire).unwrap());
        assert!(!store.claim_fire(&fire).unwrap());
        assert_eq!(store.fires(None, 10).unwrap(), [fire]);
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Events stored straight from their serialised form (nothing to
    /// encode) and through the encoding (a long string, a marker-shaped
    /// object) read back as they were, and the fast form is what the
    /// encoding would have stored.
    #[test]
    fn events_read_back_the_same_by_either_way_of_storing() {
        use agentfile_wire::events::{EventBody, Usage};
        let big = "z".repeat(BLOB_THRESHOLD);
        let bodies = [
            EventBody::NodeComplete {
                output: json!([{"arm": null, "next": "$end"}, 1.5, "é\n\"q\"", {"b": [1, {"c": 2}]}]),
                next: Some("x".into()),
            },
            EventBody::NodeComplete {
                output: json!({"$blob": "not a reference"}),
                next: None,
            },
            EventBody::NodeComplete {
                output: json!({"text": big, "$lit": 1}),
                next: None,
            },
            EventBody::RunComplete {
                outputs: [("result".to_owned(), json!({"n": [1, 2, 3], "s": "short"}))].into(),
                usage: Usage::default(),
            },
            EventBody::Warning {
                message: "w".repeat(BLOB_THRESHOLD - 1),
            },
        ];
        for body in &bodies {
            let fast = data_text(body).filter(|t| !needs_encoding(t));
            let full = event_data(body).unwrap();
            let mut blobs = Vec::new();
            let slow = serde_json::to_string(&encode(&full, &mut blobs)).unwrap();
            if let Some(fast) = fast {
                assert_eq!(fast, slow, "{body:?}");
            }
        }
        assert!(data_text(&bodies[0]).is_some_and(|t| !needs_encoding(&t)));
        assert!(needs_encoding(&data_text(&bodies[1]).unwrap()));
        assert!(needs_encoding(&data_text(&bodies[2]).unwrap()));

        let dir = std::env::temp_dir().join(format!("agentfile-fastdata-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = SqliteStore::open(&dir.join("sessions.db")).unwrap();
        store
            .create(&SessionMeta {
                id: "s".into(),
                workflow: "w".into(),
                path: "/p".into(),
                workspace: "/ws".into(),
                inputs: Default::default(),
                status: SessionStatus::Running,
                created_at: now(),
                updated_at: now(),
                last_seq: 0,
            })
            .unwrap();
        let events: Vec<Event> = bodies
            .iter()
            .zip(1..)
            .map(|(body, seq)| Event {
                schema_version: 1,
                session_id: "s".into(),
                seq,
                ts: now(),
                step: None,
                goal: None,
                agent: None,
                iteration: None,
                node: Some("n".into()),
                node_kind: None,
                replayed: false,
                body: body.clone(),
            })
            .collect();
        store.append_batch(&events).unwrap();
        let back = store.events("s", 0).unwrap();
        let bodies_back: Vec<&EventBody> = back.iter().map(|e| &e.body).collect();
        assert_eq!(bodies_back, bodies.iter().collect::<Vec<_>>());
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn encoding_round_trips_markers_and_blobs() {
        let big = "x".repeat(BLOB_THRESHOLD);
        let cases = [
            json!({"a": 1, "b": [1, 2, {"c": null}]}),
            json!({"$blob": "not ours"}),
            json!({"$lit": {"$blob": 5}}),
            json!({"$lit": 1}),
            json!({"k": {"$blob": big.clone()}, "big": big.clone(), "list": [big.clone(), "short"]}),
            json!({"$blob": "a", "other": 1}),
        ];
        for v in cases {
            assert_eq!(round_trip(&v), v);
        }
    }

    #[test]
    fn large_strings_become_references() {
        let big = "y".repeat(BLOB_THRESHOLD + 5);
        let mut blobs = Vec::new();
        let value = json!({"output": big, "again": [big]});
        let enc = encode(&value, &mut blobs);
        assert_eq!(blobs.len(), 2);
        assert_eq!(blobs[0].0, blobs[1].0);
        assert_eq!(enc["output"]["$blob"], Value::String(blob_hash(&big)));
        assert_eq!(
            blob_hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
