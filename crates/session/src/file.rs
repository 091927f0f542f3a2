//! The file session store (`session.store = "file"`): plain files a person can
//! read, copy and grep, with the same guarantees as the SQLite store.
//!
//! Layout of the folder, per session `ID`:
//!
//! - `ID.json`: the [`SessionMeta`] (plus the bookkeeping field `status_seq`),
//!   always replaced atomically: written to a temporary file in the same folder,
//!   fsynced, renamed over the old one, and the folder fsynced.
//! - `ID.events.jsonl`: the event log, one event per line exactly as on the wire,
//!   appended and fsynced per event.
//! - `ID.approval-SEQ.json`: a human's decision on the approval requested at
//!   `SEQ`, created exclusively (a hard link from a fsynced temporary file), so the
//!   first decision wins even between processes.
//!
//! What it is not: fast for huge numbers of sessions (`list` reads every
//! session's file; a page of the web view reads every `ID.json`, there being
//! no index, but only its own sessions' logs), nor deduplicating (each event
//! line is complete, so the log stays readable with `jq`); the SQLite store is
//! the default for that. Reading events after a seq parses only the lines
//! asked for.
//!
//! # Crash safety
//!
//! A process killed in the middle of an append can leave a torn last line. It is
//! recognised (no newline at its end, or not an event) and ignored on read, and
//! the next append cuts it off before writing; a garbled line anywhere else is
//! [`StoreError::Corrupt`], never skipped silently. `last_seq` and `updated_at`
//! are derived from the log itself, so they cannot disagree with it; a status
//! change is written to `ID.json` right after the event that caused it, and if
//! the process dies between the two the event wins (on read, and repaired by the
//! next append).
//!
//! Several processes: every change to a session happens under an exclusive
//! `flock` of its log (plus a mutex within the process), so two writers of one
//! session queue and the `seq` check stays exact.
//!
//! # Fire records
//!
//! The daemon's fire records (see [`crate::fires`]) live in `fires/`, one
//! folder per trigger and one file per idempotency key:
//! `fires/TRIGGER/KEY.json`, both names percent-encoded (every byte but ASCII
//! letters, digits, `-` and `_` as `%XX`; a name longer than 180 bytes becomes
//! `%%` and its SHA-256, the file itself holding the real trigger and key).
//! A claim writes the record to a fsynced temporary file and hard-links it to
//! its name: `link(2)` fails when the name exists, atomically, whichever
//! process or machine (on NFS too) tries, so of several processes claiming one
//! fire exactly one succeeds, and a crash leaves the whole record or none.
//! Later changes (session, outcome, cost) replace the file atomically under a
//! `flock` of `fires/TRIGGER/.lock`. Reading history reads every record of the
//! trigger (of every trigger without one), which suits a daemon's numbers,
//! not millions of fires.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::fires::{FireOutcome, FireRecord, newest_first, system_ms};
use super::owner::{Owner, OwnerRecord, effective_status};
use super::{
    Approval, SessionMeta, SessionQuery, SessionStatus, SessionStore, StoreError, io_is_full,
    is_live, is_valid_id, later, now, pending_approval_in, status_after,
};
use agentfile_wire::events::Event;

/// A session store in a folder of JSON files.
#[derive(Debug)]
pub struct FileStore {
    dir: PathBuf,
    /// `flock` does not order threads that share one process's view of a file
    /// well enough on every platform; the mutex makes that explicit.
    lock: Mutex<()>,
}

/// `ID.json` on disk.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct MetaFile {
    #[serde(flatten)]
    meta: SessionMeta,
    /// The `seq` up to which `meta.status` accounts for the log: a status-changing
    /// event after it is newer than the status written here.
    #[serde(default)]
    status_seq: u64,
    /// Who holds the session while it is queued or running (absent in files
    /// written before owners were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<OwnerRecord>,
    /// The principal the session belongs to as an MCP task (absent for
    /// sessions not started as one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    task_owner: Option<String>,
    /// The principal the session belongs to, whatever door started it
    /// (absent for the operator's sessions, and in files written before it
    /// was recorded: there a task's owner is the principal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    principal: Option<String>,
    /// The per-call settings the session's run started with (absent when
    /// none were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run_settings: Option<serde_json::Value>,
}

impl MetaFile {
    /// The principal the session belongs to: recorded, else (a file written
    /// before principals were) its task's owner.
    fn principal(&self) -> Option<String> {
        self.principal.clone().or_else(|| self.task_owner.clone())
    }

    /// Make this process the owner, as of now.
    fn claim(&mut self) {
        self.owner = Some(OwnerRecord {
            owner: Owner::current().clone(),
            heartbeat_at: now(),
        });
    }
}

/// The end of an event log: its last good event and where it ends.
struct Tail {
    last: Option<Event>,
    /// Bytes up to and including the last good line's newline.
    valid_len: u64,
    file_len: u64,
}

impl FileStore {
    /// Open (creating it if needed) the store in folder `dir`.
    pub fn open(dir: &Path) -> Result<FileStore, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Io {
            path: dir.display().to_string(),
            message: format!("cannot create the sessions folder: {e}"),
        })?;
        Ok(FileStore {
            dir: dir.to_owned(),
            lock: Mutex::new(()),
        })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn meta_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    fn log_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.events.jsonl"))
    }

    fn approval_path(&self, id: &str, seq: u64) -> PathBuf {
        self.dir.join(format!("{id}.approval-{seq}.json"))
    }

    fn guard(&self) -> MutexGuard<'_, ()> {
        // Nothing is guarded but the order of writers; a panic elsewhere
        // leaves no state behind to distrust.
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read_meta(&self, id: &str) -> Result<MetaFile, StoreError> {
        if !is_valid_id(id) {
            return Err(StoreError::NotFound(id.to_owned()));
        }
        let path = self.meta_path(id);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound(id.to_owned()));
            }
            Err(e) => return Err(io_err(&path, "cannot read", e)),
        };
        let file: MetaFile = serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
            path: path.display().to_string(),
            message: format!("not a session file: {e}"),
        })?;
        if file.meta.id != id {
            return Err(StoreError::Corrupt {
                path: path.display().to_string(),
                message: format!("holds session `{}`", file.meta.id),
            });
        }
        Ok(file)
    }

    fn write_meta(&self, file: &MetaFile) -> Result<(), StoreError> {
        let path = self.meta_path(&file.meta.id);
        let bytes = to_pretty(file, &path)?;
        write_atomic(&path, &bytes, false).map_err(|e| io_err(&path, "cannot write", e))
    }

    /// The session as the log says it is now: `last_seq` and `updated_at` from
    /// its last event, and the status of a status-changing last event that
    /// `ID.json` has not caught up with.
    fn current(&self, file: &MetaFile, tail: &Tail) -> SessionMeta {
        let mut meta = file.meta.clone();
        if let Some(last) = &tail.last {
            meta.last_seq = last.seq;
            meta.updated_at = later(&meta.updated_at, &last.ts);
            if last.seq > file.status_seq
                && let Some(status) = status_after(&last.body)
            {
                meta.status = status;
            }
        }
        meta
    }

    /// The session `file` describes as `get` reports it: brought up to date
    /// with its log's tail, `interrupted` when its owner is gone.
    fn as_read(&self, file: &MetaFile) -> Result<SessionMeta, StoreError> {
        let tail = self.tail_of(&file.meta.id)?;
        let mut meta = self.current(file, &tail);
        meta.status = effective_status(
            meta.status,
            self.owner_of(file, &tail),
            &meta.updated_at,
            SystemTime::now(),
        );
        Ok(meta)
    }

    /// Record `principal` as session `id`'s (and, with `task`, as its task
    /// owner) unless another principal owns it: decided under the log's
    /// lock, so of two writers racing only one principal is kept.
    fn write_principal(&self, id: &str, principal: &str, task: bool) -> Result<(), StoreError> {
        let _guard = self.guard();
        self.read_meta(id)?;
        let _log = self.lock_log(id)?;
        let mut file = self.read_meta(id)?;
        if file.principal().is_some_and(|p| p != principal) {
            return Err(StoreError::OwnedByAnother(id.to_owned()));
        }
        file.principal = Some(principal.to_owned());
        if task {
            file.task_owner = Some(principal.to_owned());
        }
        self.write_meta(&file)
    }

    /// The owner to judge the session's liveness by: the one in `ID.json`,
    /// unless the log holds a status change `ID.json` has not caught up with —
    /// then whoever wrote that event died before recording itself, and only
    /// the event's time can tell.
    fn owner_of<'a>(&self, file: &'a MetaFile, tail: &Tail) -> Option<&'a OwnerRecord> {
        let lagging = tail
            .last
            .as_ref()
            .is_some_and(|e| e.seq > file.status_seq && status_after(&e.body).is_some());
        if lagging { None } else { file.owner.as_ref() }
    }

    /// Open a session's log for writing and take its cross-process lock; the
    /// lock is released when the file is closed.
    fn lock_log(&self, id: &str) -> Result<File, StoreError> {
        let path = self.log_path(id);
        let log = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|e| io_err(&path, "cannot open", e))?;
        log.lock().map_err(|e| io_err(&path, "cannot lock", e))?;
        Ok(log)
    }

    /// Parse a log's events with `seq > after`, at most `limit` of them. The
    /// last line may be torn and is then left out; anything else that is not
    /// the next event is an error. Seqs are dense, so the lines before
    /// `after` are skipped unparsed (only the first is read, for where the
    /// log starts): a page costs what it holds, not what the log holds.
    fn parse_log(
        &self,
        id: &str,
        bytes: &[u8],
        after: u64,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let path = self.log_path(id);
        let corrupt = |message: String| StoreError::Corrupt {
            path: path.display().to_string(),
            message,
        };
        // Everything after the last newline is a torn write.
        let complete = match bytes.iter().rposition(|&b| b == b'\n') {
            Some(end) => &bytes[..end],
            None => return Ok(Vec::new()),
        };
        let lines: Vec<&[u8]> = complete.split(|&b| b == b'\n').collect();
        let parse = |i: usize| -> Result<Option<Event>, StoreError> {
            let event = match serde_json::from_slice::<Event>(lines[i]) {
                Ok(e) => e,
                // A garbled *last* line is what a crash during a write leaves
                // (power loss can persist a length before the bytes).
                Err(_) if i + 1 == lines.len() => return Ok(None),
                Err(e) => return Err(corrupt(format!("line {}: not an event: {e}", i + 1))),
            };
            if event.session_id != id {
                return Err(corrupt(format!(
                    "line {}: event of session `{}`",
                    i + 1,
                    event.session_id
                )));
            }
            Ok(Some(event))
        };
        let Some(first) = parse(0)? else {
            return Ok(Vec::new());
        };
        // Lines before the first event after `after`.
        let skip = match after.checked_sub(first.seq) {
            Some(d) => usize::try_from(d.saturating_add(1)).unwrap_or(usize::MAX),
            None => 0,
        }
        .min(lines.len());
        // The seq the line at `i` must hold.
        let first_seq = first.seq;
        let want = |i: usize| first_seq.saturating_add(i as u64);
        let mut events: Vec<Event> = Vec::with_capacity(limit.min(lines.len() - skip));
        if skip == 0 && limit > 0 {
            events.push(first);
        }
        for i in skip.max(1)..lines.len() {
            if events.len() >= limit {
                break;
            }
            let Some(event) = parse(i)? else { break };
            if event.seq != want(i) {
                return Err(corrupt(format!(
                    "line {}: seq {} follows seq {}",
                    i + 1,
                    event.seq,
                    want(i).saturating_sub(1)
                )));
            }
            events.push(event);
        }
        events.retain(|e| e.seq > after);
        Ok(events)
    }

    /// Read the end of a log without reading all of it: the last complete line,
    /// or the one before it when the last is garbled.
    fn read_tail(&self, id: &str, log: &File) -> Result<Tail, StoreError> {
        let path = self.log_path(id);
        let file_len = log
            .metadata()
            .map_err(|e| io_err(&path, "cannot stat", e))?
            .len();
        let mut end = file_len;
        for _attempt in 0..2 {
            let Some((start, line_end)) =
                last_line(log, end).map_err(|e| io_err(&path, "cannot read", e))?
            else {
                return Ok(Tail {
                    last: None,
                    valid_len: 0,
                    file_len,
                });
            };
            let mut line = vec![0; (line_end - start) as usize];
            log.read_exact_at(&mut line, start)
                .map_err(|e| io_err(&path, "cannot read", e))?;
            match serde_json::from_slice::<Event>(&line) {
                Ok(event) => {
                    return Ok(Tail {
                        last: Some(event),
                        valid_len: line_end + 1,
                        file_len,
                    });
                }
                // Torn: look at the line before it.
                Err(_) => end = start,
            }
        }
        Err(StoreError::Corrupt {
            path: path.display().to_string(),
            message: "the last two lines are not events".into(),
        })
    }

    /// The tail of a session's log, or an empty one when it has no log yet.
    fn tail_of(&self, id: &str) -> Result<Tail, StoreError> {
        let path = self.log_path(id);
        match File::open(&path) {
            Ok(log) => self.read_tail(id, &log),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Tail {
                last: None,
                valid_len: 0,
                file_len: 0,
            }),
            Err(e) => Err(io_err(&path, "cannot open", e)),
        }
    }

    /// With the log locked: cut off a torn tail, and bring `ID.json` up to date
    /// with a status-changing last event it missed.
    fn repair(&self, id: &str, log: &File, file: &mut MetaFile) -> Result<Tail, StoreError> {
        let path = self.log_path(id);
        let tail = self.read_tail(id, log)?;
        if tail.valid_len < tail.file_len {
            log.set_len(tail.valid_len)
                .and_then(|()| log.sync_data())
                .map_err(|e| io_err(&path, "cannot cut off the torn last line of", e))?;
        }
        let current = self.current(file, &tail);
        if current.status != file.meta.status {
            // The event's writer died before recording itself as the owner;
            // the owner written here is not the one that made it run.
            if self.owner_of(file, &tail).is_none() {
                file.owner = None;
            }
            file.meta.status = current.status;
            file.status_seq = current.last_seq;
            file.meta.updated_at = current.updated_at;
            self.write_meta(file)?;
        }
        Ok(tail)
    }

    fn fire_dir(&self, trigger: &str) -> PathBuf {
        self.dir.join("fires").join(file_name(trigger))
    }

    fn fire_path(&self, trigger: &str, key: &str) -> PathBuf {
        self.fire_dir(trigger)
            .join(format!("{}.json", file_name(key)))
    }

    fn read_fire(&self, path: &Path) -> Result<Option<FireRecord>, StoreError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(path, "cannot read", e)),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                path: path.display().to_string(),
                message: format!("not a fire record: {e}"),
            })
    }

    /// Every record of `trigger`, or of every trigger.
    fn all_fires(&self, trigger: Option<&str>) -> Result<Vec<FireRecord>, StoreError> {
        let root = self.dir.join("fires");
        let dirs = match trigger {
            Some(t) => vec![self.fire_dir(t)],
            None => match std::fs::read_dir(&root) {
                Ok(entries) => entries
                    .map(|e| e.map(|e| e.path()))
                    .collect::<std::io::Result<Vec<_>>>()
                    .map_err(|e| io_err(&root, "cannot list", e))?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(io_err(&root, "cannot list", e)),
            },
        };
        let mut fires = Vec::new();
        for dir in dirs {
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => continue,
                Err(e) => return Err(io_err(&dir, "cannot list", e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| io_err(&dir, "cannot list", e))?;
                let name = entry.file_name();
                // Temporary files and the lock start with `.`.
                let Some(name) = name.to_str() else { continue };
                if name.starts_with('.') || !name.ends_with(".json") {
                    continue;
                }
                if let Some(fire) = self.read_fire(&entry.path())? {
                    fires.push(fire);
                }
            }
        }
        Ok(fires)
    }

    /// Change a claimed record under the trigger's lock.
    fn update_fire(
        &self,
        trigger: &str,
        key: &str,
        change: impl FnOnce(&mut FireRecord),
    ) -> Result<(), StoreError> {
        let _guard = self.guard();
        let path = self.fire_path(trigger, key);
        let no_fire = || StoreError::NoFire {
            trigger: trigger.to_owned(),
            key: key.to_owned(),
        };
        let dir = self.fire_dir(trigger);
        if !dir.is_dir() {
            return Err(no_fire());
        }
        let lock_path = dir.join(".lock");
        let lock = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|e| io_err(&lock_path, "cannot open", e))?;
        lock.lock()
            .map_err(|e| io_err(&lock_path, "cannot lock", e))?;
        let mut fire = self.read_fire(&path)?.ok_or_else(no_fire)?;
        change(&mut fire);
        let bytes = to_pretty(&fire, &path)?;
        write_atomic(&path, &bytes, false).map_err(|e| io_err(&path, "cannot write", e))
    }

    fn list_ids(&self) -> Result<Vec<String>, StoreError> {
        let entries =
            std::fs::read_dir(&self.dir).map_err(|e| io_err(&self.dir, "cannot list", e))?;
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_err(&self.dir, "cannot list", e))?;
            let name = entry.file_name();
            // Temporary files start with `.`; approvals and logs have a second
            // dot, which an id never has.
            if let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".json"))
                && is_valid_id(id)
            {
                ids.push(id.to_owned());
            }
        }
        Ok(ids)
    }
}

impl SessionStore for FileStore {
    fn create(&self, meta: &SessionMeta) -> Result<(), StoreError> {
        if !is_valid_id(&meta.id) {
            return Err(StoreError::InvalidId(meta.id.clone()));
        }
        let _guard = self.guard();
        // Hold the log's lock while the meta appears, so no append can slip in
        // between the meta and the emptying of the log below.
        let log = self.lock_log(&meta.id)?;
        let path = self.meta_path(&meta.id);
        let mut file = MetaFile {
            meta: meta.clone(),
            status_seq: meta.last_seq,
            owner: None,
            task_owner: None,
            principal: None,
            run_settings: None,
        };
        if is_live(meta.status) {
            file.claim();
        }
        let bytes = to_pretty(&file, &path)?;
        match write_atomic(&path, &bytes, true) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(StoreError::AlreadyExists(meta.id.clone()));
            }
            Err(e) => return Err(io_err(&path, "cannot create", e)),
        }
        // We own the id now: a log left by an older session of the same name
        // (its meta deleted by hand) must not leak into this one.
        let log_path = self.log_path(&meta.id);
        log.set_len(0)
            .and_then(|()| log.sync_all())
            .and_then(|()| sync_dir(&self.dir))
            .map_err(|e| io_err(&log_path, "cannot create", e))
    }

    fn append(&self, event: &Event) -> Result<(), StoreError> {
        self.append_batch(std::slice::from_ref(event))
    }

    /// Every event is checked before any is written, and each session's events
    /// go to its log in one write and one fsync. Between sessions the batch is
    /// not atomic against a crash (each log is its own file), only against
    /// errors.
    fn append_batch(&self, events: &[Event]) -> Result<(), StoreError> {
        struct Locked {
            id: String,
            log: File,
            file: MetaFile,
            valid_len: u64,
            next: u64,
            lines: Vec<u8>,
            status: Option<(SessionStatus, u64, String)>,
        }
        if events.is_empty() {
            return Ok(());
        }
        let _guard = self.guard();
        // Lock the logs in one fixed order, so two processes batching over the
        // same sessions cannot deadlock.
        let mut ids: Vec<&str> = events.iter().map(|e| e.session_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut locked = Vec::with_capacity(ids.len());
        for id in ids {
            // Check the session exists before `lock_log` creates its log.
            self.read_meta(id)?;
            let log = self.lock_log(id)?;
            // Read the meta under the lock: another process may change it.
            let mut file = self.read_meta(id)?;
            let tail = self.repair(id, &log, &mut file)?;
            let last = tail.last.as_ref().map_or(file.meta.last_seq, |e| e.seq);
            locked.push(Locked {
                id: id.to_owned(),
                log,
                file,
                valid_len: tail.valid_len,
                next: last.saturating_add(1),
                lines: Vec::new(),
                status: None,
            });
        }
        for event in events {
            let Some(s) = locked.iter_mut().find(|s| s.id == event.session_id) else {
                return Err(StoreError::NotFound(event.session_id.clone()));
            };
            if event.seq != s.next {
                return Err(StoreError::OutOfOrder {
                    session: s.id.clone(),
                    expected: s.next,
                    got: event.seq,
                });
            }
            s.next += 1;
            serde_json::to_writer(&mut s.lines, event).map_err(|e| StoreError::Io {
                path: self.log_path(&s.id).display().to_string(),
                message: format!("cannot serialise event {}: {e}", event.seq),
            })?;
            s.lines.push(b'\n');
            if let Some(status) = status_after(&event.body) {
                s.status = Some((status, event.seq, event.ts.clone()));
            }
        }
        for s in &mut locked {
            let path = self.log_path(&s.id);
            if let Err(e) = (&s.log)
                .write_all(&s.lines)
                .and_then(|()| s.log.sync_data())
            {
                // Leave no half line behind for the next reader if we can help it.
                let _ = s.log.set_len(s.valid_len);
                return Err(io_err(&path, "cannot append to", e));
            }
            if let Some((status, seq, ts)) = s.status.take() {
                if is_live(status) {
                    s.file.claim();
                }
                s.file.meta.status = status;
                s.file.meta.last_seq = seq;
                s.file.meta.updated_at = later(&s.file.meta.updated_at, &ts);
                s.file.status_seq = seq;
                // The events are stored, so the append succeeded whatever
                // happens here: until `ID.json` is rewritten, `get` takes the
                // status from the last event, and the next append or
                // `set_status` repairs the file.
                let _ = self.write_meta(&s.file);
            }
        }
        Ok(())
    }

    fn set_status(&self, id: &str, status: SessionStatus) -> Result<(), StoreError> {
        let _guard = self.guard();
        self.read_meta(id)?;
        let log = self.lock_log(id)?;
        let mut file = self.read_meta(id)?;
        let tail = self.repair(id, &log, &mut file)?;
        let current = self.current(&file, &tail);
        file.meta.status = status;
        file.meta.last_seq = current.last_seq;
        file.meta.updated_at = later(&current.updated_at, &now());
        file.status_seq = current.last_seq;
        if is_live(status) {
            file.claim();
        }
        self.write_meta(&file)
    }

    fn claim_interrupted(&self, id: &str) -> Result<bool, StoreError> {
        // Under the log's cross-process lock, as every status change.
        let _guard = self.guard();
        self.read_meta(id)?;
        let log = self.lock_log(id)?;
        let mut file = self.read_meta(id)?;
        let tail = self.repair(id, &log, &mut file)?;
        let current = self.current(&file, &tail);
        let status = effective_status(
            current.status,
            self.owner_of(&file, &tail),
            &current.updated_at,
            SystemTime::now(),
        );
        if status != SessionStatus::Interrupted {
            return Ok(false);
        }
        file.meta.status = SessionStatus::Running;
        file.meta.last_seq = current.last_seq;
        file.meta.updated_at = later(&current.updated_at, &now());
        file.status_seq = current.last_seq;
        file.claim();
        self.write_meta(&file)?;
        Ok(true)
    }

    fn get(&self, id: &str) -> Result<SessionMeta, StoreError> {
        self.as_read(&self.read_meta(id)?)
    }

    /// The order and every filter but the status are in `ID.json`, so only
    /// those files are read to find the page (there is no index: every one
    /// of them, small as they are); the logs, for the status and the last
    /// event, only for the sessions that may be on it.
    fn page(&self, query: &SessionQuery) -> Result<Vec<SessionMeta>, StoreError> {
        let limit = query.limit();
        let loose = SessionQuery {
            status: None,
            ..query.clone()
        };
        let mut candidates = Vec::new();
        for id in self.list_ids()? {
            match self.read_meta(&id) {
                Ok(file) if loose.matches(&file.meta) => candidates.push(file),
                Ok(_) => {}
                // Deleted between the listing and the read.
                Err(StoreError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        candidates.sort_by(|a, b| {
            let key = |f: &MetaFile| (f.meta.created_at.clone(), f.meta.id.clone());
            key(b).cmp(&key(a))
        });
        let mut out = Vec::new();
        for file in &candidates {
            if out.len() == limit {
                break;
            }
            let meta = self.as_read(file)?;
            if query.matches(&meta) {
                out.push(meta);
            }
        }
        Ok(out)
    }

    /// The names in the `ID.json` files; no log is read.
    fn workflows(&self) -> Result<Vec<String>, StoreError> {
        let mut names = std::collections::BTreeSet::new();
        for id in self.list_ids()? {
            match self.read_meta(&id) {
                Ok(file) => {
                    names.insert(file.meta.workflow);
                }
                Err(StoreError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(names.into_iter().take(1000).collect())
    }

    fn list(
        &self,
        status: Option<SessionStatus>,
        limit: usize,
    ) -> Result<Vec<SessionMeta>, StoreError> {
        let mut sessions = Vec::new();
        for id in self.list_ids()? {
            match self.get(&id) {
                Ok(meta) if status.is_none_or(|s| s == meta.status) => sessions.push(meta),
                Ok(_) => {}
                // Deleted between the listing and the read.
                Err(StoreError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        sessions.sort_by(|a, b| {
            (b.created_at.as_str(), b.id.as_str()).cmp(&(a.created_at.as_str(), a.id.as_str()))
        });
        sessions.truncate(limit);
        Ok(sessions)
    }

    fn events(&self, id: &str, after: u64) -> Result<Vec<Event>, StoreError> {
        self.read_meta(id)?;
        let path = self.log_path(id);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_err(&path, "cannot read", e)),
        };
        // Every line is parsed (and so checked), as a resume reads it.
        let mut events = self.parse_log(id, &bytes, 0, usize::MAX)?;
        events.retain(|e| e.seq > after);
        Ok(events)
    }

    /// Only the lines of the page are parsed (see `parse_log`).
    fn events_page(&self, id: &str, after: u64, limit: usize) -> Result<Vec<Event>, StoreError> {
        self.read_meta(id)?;
        let path = self.log_path(id);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_err(&path, "cannot read", e)),
        };
        self.parse_log(id, &bytes, after, limit)
    }

    fn record_approval(
        &self,
        id: &str,
        approved: bool,
        note: Option<&str>,
    ) -> Result<Approval, StoreError> {
        let _guard = self.guard();
        self.read_meta(id)?;
        // Under the log's lock, so no event slips in between the check and the
        // decision.
        let _log = self.lock_log(id)?;
        let Some(seq) = pending_approval_in(&self.events(id, 0)?) else {
            return Err(StoreError::NoPendingApproval(id.to_owned()));
        };
        let approval = Approval {
            session_id: id.to_owned(),
            seq_requested: seq,
            approved,
            note: note.map(str::to_owned),
            decided_at: now(),
        };
        let path = self.approval_path(id, seq);
        let bytes = to_pretty(&approval, &path)?;
        match write_atomic(&path, &bytes, true) {
            Ok(()) => Ok(approval),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let earlier = self.approval(id, seq)?;
                Err(StoreError::AlreadyDecided {
                    session: id.to_owned(),
                    seq,
                    approved: earlier.is_some_and(|a| a.approved),
                })
            }
            Err(e) => Err(io_err(&path, "cannot write", e)),
        }
    }

    fn approval(&self, id: &str, seq_requested: u64) -> Result<Option<Approval>, StoreError> {
        self.read_meta(id)?;
        let path = self.approval_path(id, seq_requested);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path, "cannot read", e)),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                path: path.display().to_string(),
                message: format!("not an approval: {e}"),
            })
    }

    fn owner(&self, id: &str) -> Result<Option<OwnerRecord>, StoreError> {
        Ok(self.read_meta(id)?.owner)
    }

    fn record_owner(&self, id: &str, owner: &OwnerRecord) -> Result<(), StoreError> {
        let _guard = self.guard();
        self.read_meta(id)?;
        let _log = self.lock_log(id)?;
        let mut file = self.read_meta(id)?;
        file.owner = Some(owner.clone());
        self.write_meta(&file)
    }

    fn task_owner(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self.read_meta(id)?.task_owner)
    }

    fn set_task_owner(&self, id: &str, principal: &str) -> Result<(), StoreError> {
        self.write_principal(id, principal, true)
    }

    fn principal(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(self.read_meta(id)?.principal())
    }

    fn set_principal(&self, id: &str, principal: &str) -> Result<(), StoreError> {
        self.write_principal(id, principal, false)
    }

    fn run_settings(&self, id: &str) -> Result<Option<serde_json::Value>, StoreError> {
        Ok(self.read_meta(id)?.run_settings)
    }

    fn set_run_settings(&self, id: &str, settings: &serde_json::Value) -> Result<(), StoreError> {
        let _guard = self.guard();
        self.read_meta(id)?;
        let _log = self.lock_log(id)?;
        let mut file = self.read_meta(id)?;
        file.run_settings = Some(settings.clone());
        self.write_meta(&file)
    }

    fn heartbeat(&self, id: &str) -> Result<(), StoreError> {
        let _guard = self.guard();
        self.read_meta(id)?;
        let _log = self.lock_log(id)?;
        let mut file = self.read_meta(id)?;
        match &mut file.owner {
            Some(o) if o.owner == *Owner::current() => o.heartbeat_at = now(),
            _ => return Ok(()),
        }
        self.write_meta(&file)
    }

    /// A hard link from a fsynced temporary file: `link(2)` refuses an
    /// existing name atomically, so exactly one claimant wins.
    fn claim_fire(&self, fire: &FireRecord) -> Result<bool, StoreError> {
        fire.validate()?;
        let dir = self.fire_dir(&fire.trigger);
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, "cannot create", e))?;
        let path = self.fire_path(&fire.trigger, &fire.key);
        let bytes = to_pretty(fire, &path)?;
        match write_atomic(&path, &bytes, true) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(io_err(&path, "cannot write", e)),
        }
    }

    fn fire(&self, trigger: &str, key: &str) -> Result<Option<FireRecord>, StoreError> {
        self.read_fire(&self.fire_path(trigger, key))
    }

    fn set_fire_session(
        &self,
        trigger: &str,
        key: &str,
        session_id: &str,
    ) -> Result<(), StoreError> {
        self.update_fire(trigger, key, |f| f.session_id = Some(session_id.to_owned()))
    }

    fn finish_fire(
        &self,
        trigger: &str,
        key: &str,
        outcome: FireOutcome,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        self.update_fire(trigger, key, |f| {
            f.outcome = outcome;
            f.reason = reason.map(str::to_owned);
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
        self.update_fire(trigger, key, |f| f.cost_usd = Some(cost_usd))
    }

    fn fires(&self, trigger: Option<&str>, limit: usize) -> Result<Vec<FireRecord>, StoreError> {
        let mut fires = self.all_fires(trigger)?;
        fires.sort_by(newest_first);
        fires.truncate(limit);
        Ok(fires)
    }

    fn last_fire(&self, trigger: &str) -> Result<Option<FireRecord>, StoreError> {
        Ok(self
            .all_fires(Some(trigger))?
            .into_iter()
            .filter(|f| {
                f.scheduled_ms().is_some()
                    && matches!(f.outcome, FireOutcome::Fired | FireOutcome::Skipped)
            })
            .max_by(|a, b| {
                (a.scheduled_ms(), a.fired_ms(), &a.key).cmp(&(
                    b.scheduled_ms(),
                    b.fired_ms(),
                    &b.key,
                ))
            }))
    }

    fn fired_between(
        &self,
        trigger: &str,
        from: SystemTime,
        to: SystemTime,
    ) -> Result<(u64, f64), StoreError> {
        let (from, to) = (system_ms(from), system_ms(to));
        let mut count = 0;
        let mut cost = 0.0;
        for f in self.all_fires(Some(trigger))? {
            if f.outcome == FireOutcome::Fired && f.fired_ms().is_some_and(|t| from <= t && t < to)
            {
                count += 1;
                cost += f.cost_usd.unwrap_or(0.0);
            }
        }
        Ok((count, cost))
    }

    fn reap_orphans(&self) -> Result<Vec<String>, StoreError> {
        let _guard = self.guard();
        let mut orphans = Vec::new();
        let mut ids = self.list_ids()?;
        ids.sort();
        for id in ids {
            let log = match self.read_meta(&id) {
                Ok(_) => self.lock_log(&id)?,
                Err(StoreError::NotFound(_)) => continue,
                Err(e) => return Err(e),
            };
            // Under the log's lock: an owner that claims it now waits for us,
            // and one that claimed it before is seen alive.
            let mut file = self.read_meta(&id)?;
            let tail = self.repair(&id, &log, &mut file)?;
            let current = self.current(&file, &tail);
            let status = effective_status(
                current.status,
                self.owner_of(&file, &tail),
                &current.updated_at,
                SystemTime::now(),
            );
            if status == SessionStatus::Interrupted && current.status != status {
                file.meta.status = status;
                file.meta.last_seq = current.last_seq;
                file.meta.updated_at = later(&current.updated_at, &now());
                file.status_seq = current.last_seq;
                self.write_meta(&file)?;
                orphans.push(id);
            }
        }
        Ok(orphans)
    }
}

/// The byte range of the last complete line that ends at or before `end`
/// (exclusive of its newline), or `None` when there is none. Reads backwards in
/// growing chunks, so a long log costs only its last lines.
fn last_line(log: &File, end: u64) -> std::io::Result<Option<(u64, u64)>> {
    let mut newline = None; // the newline that ends the line
    let mut pos = end;
    let mut chunk = 64 * 1024u64;
    let mut buf = Vec::new();
    while pos > 0 {
        let start = pos.saturating_sub(chunk);
        buf.resize((pos - start) as usize, 0);
        log.read_exact_at(&mut buf, start)?;
        for (i, &b) in buf.iter().enumerate().rev() {
            if b != b'\n' {
                continue;
            }
            let at = start + i as u64;
            match newline {
                None => newline = Some(at),
                Some(nl) => return Ok(Some((at + 1, nl))),
            }
        }
        pos = start;
        chunk = chunk.saturating_mul(2);
    }
    Ok(newline.map(|nl| (0, nl)))
}

/// A trigger id or fire key as a file name (see the module documentation):
/// ASCII letters, digits, `-` and `_` as they are, every other byte `%XX`; a
/// name over 180 bytes is `%%` and its SHA-256 (no encoded name contains `%%`).
fn file_name(s: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    if out.len() > 180 {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(s.as_bytes());
        out = String::from("%%");
        for b in digest {
            let _ = write!(out, "{b:02x}");
        }
    }
    out
}

fn to_pretty<T: Serialize>(value: &T, path: &Path) -> Result<Vec<u8>, StoreError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| StoreError::Io {
        path: path.display().to_string(),
        message: format!("cannot serialise: {e}"),
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Replace (or, when `exclusive`, create) `path` with `bytes` so that a reader
/// or a crash sees the old content or the new, never a mix: temporary file in
/// the same folder, fsync, rename (or hard link, which fails if `path` exists),
/// fsync of the folder.
pub fn write_atomic(path: &Path, bytes: &[u8], exclusive: bool) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        if exclusive {
            std::fs::hard_link(&tmp, path)?;
            std::fs::remove_file(&tmp)?;
        } else {
            std::fs::rename(&tmp, path)?;
        }
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Make a rename or a new file in `dir` survive power loss.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

fn io_err(path: &Path, doing: &str, e: std::io::Error) -> StoreError {
    if io_is_full(&e) {
        return StoreError::DiskFull {
            path: path.display().to_string(),
            message: format!("{doing}: {e}"),
        };
    }
    StoreError::Io {
        path: path.display().to_string(),
        message: format!("{doing}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_line_finds_complete_lines_only() {
        let dir = std::env::temp_dir().join(format!("agentfile-lastline-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("log");
        let check = |content: &[u8], end: Option<u64>, want: Option<(u64, u64)>| {
            std::fs::write(&p, content).unwrap();
            let f = File::open(&p).unwrap();
            let end = end.unwrap_or(content.len() as u64);
            assert_eq!(last_line(&f, end).unwrap(), want, "{content:?}");
        };
        check(b"", None, None);
        check(b"abc", None, None);
        check(b"abc\n", None, Some((0, 3)));
        check(b"abc\ndef", None, Some((0, 3)));
        check(b"abc\ndef\n", None, Some((4, 7)));
        check(b"abc\ndef\n", Some(4), Some((0, 3)));
        let long = format!("{}\n{}\n", "a".repeat(200_000), "b".repeat(150_000));
        check(long.as_bytes(), None, Some((200_001, 350_001)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
