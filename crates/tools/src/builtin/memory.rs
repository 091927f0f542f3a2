//! `memory_read` / `memory_write`: a key-value store per agent id that outlives
//! runs, in SQLite.
//!
//! The table is `memory(agent_id, key, value, updated_at)` with `(agent_id, key)`
//! as its key, in a file the caller chooses — normally the session database
//! `<workspace>/.agentfile/sessions.db`, opened in WAL mode so the session store
//! and this store can share it. Calls run on the blocking pool behind one
//! connection and a mutex: SQLite serialises writers anyway, and memory calls
//! are small.
//!
//! What this is not: a cache or a vector store. Values are text, read back
//! exactly; there is no expiry and no search beyond listing keys.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};

/// Longest key accepted.
pub const MAX_KEY_CHARS: usize = 256;
/// Largest value accepted.
pub const MAX_VALUE_BYTES: usize = 1024 * 1024;

/// A memory store problem.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("memory store {path}: {source}")]
    Open {
        path: String,
        source: rusqlite::Error,
    },
    #[error("memory store {path}: cannot create its folder: {source}")]
    Folder {
        path: String,
        source: std::io::Error,
    },
    #[error("memory store: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("memory store: the background task failed")]
    Task,
}

/// A handle to the store; clones share the connection.
///
/// The file is opened at the first call, not by [`MemoryStore::open`]: most
/// runs never use the memory tools, and opening a second connection to the
/// session database (WAL mode, the schema read, the table check) is a
/// measurable part of a short run's start. A file that cannot be opened is
/// reported by the call that needed it, and tried again by the next one.
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// Where to open the connection; `None` for an in-memory store (opened at once).
    path: Option<PathBuf>,
    conn: Mutex<Option<Connection>>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemoryStore")
    }
}

impl MemoryStore {
    /// The store in the SQLite file at `path`, opened (and created, with its
    /// folder, if needed) at the first call; this does no I/O.
    pub fn open(path: &Path) -> Result<MemoryStore, MemoryError> {
        Ok(MemoryStore {
            inner: Arc::new(Inner {
                path: Some(path.to_owned()),
                conn: Mutex::new(None),
            }),
        })
    }

    /// Open the connection to the file at `path`.
    fn connect(path: &Path) -> Result<Connection, MemoryError> {
        let shown = path.display().to_string();
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(|source| MemoryError::Folder {
                path: shown.clone(),
                source,
            })?;
        }
        let conn = Connection::open(path).map_err(|source| MemoryError::Open {
            path: shown.clone(),
            source,
        })?;
        Self::init(&conn, true).map_err(|source| MemoryError::Open {
            path: shown,
            source,
        })?;
        Ok(conn)
    }

    /// A store that lives only as long as this value (for tests and dry runs).
    pub fn in_memory() -> Result<MemoryStore, MemoryError> {
        let conn = Connection::open_in_memory()?;
        Self::init(&conn, false)?;
        Ok(MemoryStore {
            inner: Arc::new(Inner {
                path: None,
                conn: Mutex::new(Some(conn)),
            }),
        })
    }

    fn init(conn: &Connection, wal: bool) -> Result<(), rusqlite::Error> {
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        if wal {
            // journal_mode returns a row; query it rather than execute.
            let _: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        }
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS memory (
                agent_id   TEXT NOT NULL,
                key        TEXT NOT NULL,
                value      TEXT NOT NULL,
                updated_at TEXT NOT NULL,
                PRIMARY KEY (agent_id, key)
            );",
        )?;
        Ok(())
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, MemoryError> {
        let mut conn = self.inner.conn.lock().unwrap_or_else(|p| p.into_inner());
        if conn.is_none()
            && let Some(path) = &self.inner.path
        {
            *conn = Some(Self::connect(path)?);
        }
        match conn.as_ref() {
            Some(c) => Ok(f(c)?),
            // Unreachable: an in-memory store is opened when it is made.
            None => Err(MemoryError::Task),
        }
    }

    /// The value stored under `key` for `agent`, if any.
    pub fn get(&self, agent: &str, key: &str) -> Result<Option<String>, MemoryError> {
        self.with(|c| {
            c.query_row(
                "SELECT value FROM memory WHERE agent_id = ?1 AND key = ?2",
                params![agent, key],
                |r| r.get(0),
            )
            .optional()
        })
    }

    /// Store `value` under `key` for `agent`, replacing what was there.
    pub fn put(&self, agent: &str, key: &str, value: &str) -> Result<(), MemoryError> {
        self.with(|c| {
            c.execute(
                "INSERT INTO memory (agent_id, key, value, updated_at)
                 VALUES (?1, ?2, ?3, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
                 ON CONFLICT (agent_id, key) DO UPDATE
                 SET value = excluded.value, updated_at = excluded.updated_at",
                params![agent, key, value],
            )
            .map(|_| ())
        })
    }

    /// The keys stored for `agent`, sorted.
    pub fn keys(&self, agent: &str) -> Result<Vec<String>, MemoryError> {
        self.with(|c| {
            let mut stmt = c.prepare("SELECT key FROM memory WHERE agent_id = ?1 ORDER BY key")?;
            let rows = stmt.query_map(params![agent], |r| r.get::<_, String>(0))?;
            rows.collect()
        })
    }

    /// [`MemoryStore::get`] off the async threads.
    pub async fn get_async(
        &self,
        agent: String,
        key: String,
    ) -> Result<Option<String>, MemoryError> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.get(&agent, &key))
            .await
            .map_err(|_| MemoryError::Task)?
    }

    /// [`MemoryStore::put`] off the async threads.
    pub async fn put_async(
        &self,
        agent: String,
        key: String,
        value: String,
    ) -> Result<(), MemoryError> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.put(&agent, &key, &value))
            .await
            .map_err(|_| MemoryError::Task)?
    }

    /// [`MemoryStore::keys`] off the async threads.
    pub async fn keys_async(&self, agent: String) -> Result<Vec<String>, MemoryError> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.keys(&agent))
            .await
            .map_err(|_| MemoryError::Task)?
    }
}

/// A memory key that cannot be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("`key` is empty")]
    Empty,
    #[error("`key` is longer than {MAX_KEY_CHARS} characters")]
    TooLong,
    #[error("`key` contains control characters")]
    Control,
}

/// Check a key: non-empty, not too long, no control characters.
pub fn check_key(key: &str) -> Result<(), KeyError> {
    if key.trim().is_empty() {
        return Err(KeyError::Empty);
    }
    if key.chars().count() > MAX_KEY_CHARS {
        return Err(KeyError::TooLong);
    }
    if key.chars().any(char::is_control) {
        return Err(KeyError::Control);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_persist_per_agent_across_opens() {
        let dir = std::env::temp_dir().join(format!("af-memory-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = dir.join("nested/sessions.db");
        {
            let m = MemoryStore::open(&db).unwrap();
            m.put("a", "k", "v1").unwrap();
            m.put("a", "k", "v2").unwrap();
            m.put("b", "k", "other").unwrap();
        }
        let m = MemoryStore::open(&db).unwrap();
        assert_eq!(m.get("a", "k").unwrap().as_deref(), Some("v2"));
        assert_eq!(m.get("b", "k").unwrap().as_deref(), Some("other"));
        assert_eq!(m.get("c", "k").unwrap(), None);
        assert_eq!(m.keys("a").unwrap(), ["k"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn keys_are_checked() {
        assert!(check_key("").is_err());
        assert!(check_key("a\nb").is_err());
        assert!(check_key(&"x".repeat(300)).is_err());
        assert!(check_key("notes/today").is_ok());
    }
}
