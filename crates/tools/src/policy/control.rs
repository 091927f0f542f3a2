//! Control files: the files and folders that decide what a run may do — the
//! policy, the config (and so the provider's address and key), the workflow
//! and every file it loads, the workflow's `scripts/`, `.git` (hooks and
//! `core.fsmonitor` run code later) and the session store.
//!
//! The rule they serve: **nothing the agent can write may decide what the
//! agent may do next.** A person changes them between runs; a tool call
//! never does, unless the policy names them in `[control] writable` (a
//! workflow that generates workflows), and never the policy or config files.
//!
//! Three layers hold it:
//! - the gate ([`super::Gate`]): write and edit calls and bash writes into a
//!   control path are denied, whether or not it exists yet;
//! - the kernel sandbox: each existing control path is mounted read-only
//!   onto itself, so neither its contents nor its name can change (a mount
//!   point cannot be renamed, replaced or removed);
//! - the [`Tripwire`], for what neither can see (a control file that does not
//!   exist yet, a sandbox that is partial or off, an MCP server writing
//!   files): each file's state is taken before a call and compared after; a
//!   change made while a call ran is undone, the tool's version moved to
//!   `.agentfile/quarantine/`, and the run told.
//!
//! What this module is not: the place paths are judged (the gate) or mounts
//! made (`agentfile-sandbox`). It names the paths and watches them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::POLICY_FILE;

/// The config file names looked for in a folder (`agent.json` first).
pub const CONFIG_FILES: [&str; 2] = ["agent.json", "agent.toml"];

/// Files larger than this are watched by their metadata only: a change is
/// still seen and reported, but cannot be undone.
const MAX_KEPT_BYTES: u64 = 4 << 20;

/// Folders with more entries are watched by their inode only.
const MAX_FOLDER_NAMES: usize = 256;

/// How many entries a search for a moved folder looks at.
const MAX_SEARCH: usize = 10_000;

/// What a control path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ControlKind {
    /// The policy file in use, or where one would be looked for.
    Policy,
    /// A config file (`agent.json`, `agent.toml`) in use or looked for.
    Config,
    /// The workflow file or a file it loads (agents, skills, prompts,
    /// TOOL.md, ROUTINE.md).
    Workflow,
    /// The workflow's `scripts/` (its declared scripts run unchecked).
    Scripts,
    /// `.git`: hooks and config there run code when a person next uses git.
    Git,
    /// `.agentfile/`: the session and memory store (the gate's store rule
    /// keeps tools out, the run's own scratch folder aside).
    Store,
}

impl ControlKind {
    /// How `inspect --sandbox` and denials name it.
    pub fn describe(self) -> &'static str {
        match self {
            ControlKind::Policy => "policy",
            ControlKind::Config => "config",
            ControlKind::Workflow => "workflow",
            ControlKind::Scripts => "the workflow's scripts",
            ControlKind::Git => "git",
            ControlKind::Store => "session store",
        }
    }

    /// The policy and config files are never writable, whatever
    /// `[control] writable` says: a run that may rewrite its own policy may
    /// do anything.
    pub fn always(self) -> bool {
        matches!(self, ControlKind::Policy | ControlKind::Config)
    }
}

/// One control path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlFile {
    /// Absolute and normalised; it may not exist.
    pub path: PathBuf,
    pub kind: ControlKind,
}

impl ControlFile {
    /// The rule a denial names.
    pub fn rule(&self) -> String {
        format!(
            "built-in: control files are not writable during a run ({})",
            self.kind.describe()
        )
    }
}

/// Where a run's control files are, before they are found.
#[derive(Debug, Clone, Default)]
pub struct ControlInputs {
    /// The resolved workspace.
    pub workspace: PathBuf,
    /// The workflow file's folder.
    pub workflow_dir: PathBuf,
    /// `--policy FILE`, when given.
    pub policy: Option<PathBuf>,
    /// `--config FILE`, when given.
    pub config: Option<PathBuf>,
    /// The folder the command runs in (config files are looked for there).
    pub cwd: Option<PathBuf>,
    /// The workflow file and every file it loads.
    pub workflow_files: Vec<PathBuf>,
}

/// The control paths of a run: every place a policy or config file is or
/// would be looked for (so none can be planted at a place searched first),
/// the workflow's files, its `scripts/`, `.git` and the store.
pub fn control_files(i: &ControlInputs) -> Vec<ControlFile> {
    let abs = |p: &Path| {
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            match &i.cwd {
                Some(c) => c.join(p),
                None => std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()),
            }
        };
        super::paths::normalize(&p)
    };
    let mut out: Vec<ControlFile> = Vec::new();
    let mut add = |path: PathBuf, kind: ControlKind| {
        if path.as_os_str().is_empty() {
            return;
        }
        match out.iter_mut().find(|c| c.path == path) {
            // A path that is two things is held as the stricter one.
            Some(c) if kind.always() && !c.kind.always() => c.kind = kind,
            Some(_) => {}
            None => out.push(ControlFile { path, kind }),
        }
    };
    let workflow_dir = abs(&i.workflow_dir);
    let project = agentfile_config::project_of(&workflow_dir);
    let mut dirs: Vec<PathBuf> = Vec::new();
    for d in [
        i.cwd.as_deref().map(abs),
        Some(abs(&i.workspace)),
        Some(workflow_dir.clone()),
        project.clone(),
    ]
    .into_iter()
    .flatten()
    {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    if let Some(p) = &i.policy {
        add(abs(p), ControlKind::Policy);
    }
    for d in &dirs {
        add(d.join(POLICY_FILE), ControlKind::Policy);
    }
    if let Some(c) = &i.config {
        add(abs(c), ControlKind::Config);
    }
    for d in &dirs {
        for name in CONFIG_FILES {
            add(d.join(name), ControlKind::Config);
        }
    }
    for f in &i.workflow_files {
        add(abs(f), ControlKind::Workflow);
    }
    add(workflow_dir.join("scripts"), ControlKind::Scripts);
    let ws = abs(&i.workspace);
    add(ws.join(".git"), ControlKind::Git);
    // What of `.git` runs code, held on its own too: without a sandbox the
    // tripwire watches these (the whole of `.git` changes as git works).
    add(ws.join(".git/config"), ControlKind::Git);
    add(ws.join(".git/hooks"), ControlKind::Git);
    add(ws.join(".agentfile"), ControlKind::Store);
    out
}

/// The state of one watched path, as much as tells a change.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Absent,
    /// Neither a file nor a folder we can read (a socket, a dangling link).
    Other {
        ino: u64,
        kind: u32,
    },
    /// A folder, with its entries' names when it has few (a new entry is
    /// then seen; `.git` changes its own entries and is held by its inode).
    Folder {
        ino: u64,
        dev: u64,
        names: Option<std::collections::BTreeSet<std::ffi::OsString>>,
    },
    File(FileState),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FileState {
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    link: bool,
}

fn state_of(path: &Path) -> State {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return State::Absent;
    };
    let ft = m.file_type();
    if ft.is_dir() {
        let names = (path.file_name() != Some(std::ffi::OsStr::new(".git")))
            .then(|| {
                let mut names = std::collections::BTreeSet::new();
                for e in std::fs::read_dir(path).ok()? {
                    names.insert(e.ok()?.file_name());
                    if names.len() > MAX_FOLDER_NAMES {
                        return None;
                    }
                }
                Some(names)
            })
            .flatten();
        State::Folder {
            ino: m.ino(),
            dev: m.dev(),
            names,
        }
    } else if ft.is_file() || ft.is_symlink() {
        State::File(FileState {
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            link: ft.is_symlink(),
        })
    } else {
        State::Other {
            ino: m.ino(),
            kind: m.mode() & libc::S_IFMT,
        }
    }
}

/// What is kept of one watched path: its state, and a regular file's bytes
/// so a change can be undone.
#[derive(Debug, Clone)]
struct Kept {
    state: State,
    bytes: Option<Vec<u8>>,
}

fn keep(path: &Path) -> Kept {
    let state = state_of(path);
    let bytes = match &state {
        State::File(f) if !f.link && f.len <= MAX_KEPT_BYTES => std::fs::read(path).ok(),
        _ => None,
    };
    Kept { state, bytes }
}

#[derive(Debug, Default)]
struct Watched {
    kept: BTreeMap<PathBuf, Kept>,
    /// Calls running now: while any runs, a change is a tool's.
    in_flight: usize,
}

/// Undoes changes a tool call made to control paths (see the module's
/// notes). One per run; shared by its calls.
#[derive(Debug)]
pub struct Tripwire {
    quarantine: PathBuf,
    watched: Mutex<Watched>,
}

/// A call's turn at the [`Tripwire`]: hand it back to [`Tripwire::after`].
#[must_use = "hand the mark to Tripwire::after when the call ends"]
pub struct Mark(());

impl Tripwire {
    /// Watch `paths` (absolute), moving what a tool left in their place to
    /// `quarantine` (a folder that tools cannot reach).
    pub fn new(paths: impl IntoIterator<Item = PathBuf>, quarantine: PathBuf) -> Tripwire {
        let kept = paths.into_iter().map(|p| (p.clone(), keep(&p))).collect();
        Tripwire {
            quarantine,
            watched: Mutex::new(Watched { kept, in_flight: 0 }),
        }
    }

    /// Whether anything is watched.
    pub fn is_empty(&self) -> bool {
        self.lock().kept.is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.watched.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A call starts. A change found while no call ran was a person's: it is
    /// what takes effect, so it is kept as the state to restore.
    pub fn before(&self) -> Mark {
        let mut w = self.lock();
        if w.in_flight == 0 {
            for (path, kept) in w.kept.iter_mut() {
                if state_of(path) != kept.state {
                    *kept = keep(path);
                }
            }
        }
        w.in_flight += 1;
        Mark(())
    }

    /// A call ended: undo whatever changed a watched path since it was
    /// kept, and say what was done (one line per path; empty when nothing
    /// changed).
    pub fn after(&self, _mark: Mark) -> Vec<String> {
        let mut w = self.lock();
        w.in_flight = w.in_flight.saturating_sub(1);
        let mut said = Vec::new();
        let changed: Vec<PathBuf> = w
            .kept
            .iter()
            .filter(|(p, k)| state_of(p) != k.state)
            .map(|(p, _)| p.clone())
            .collect();
        for path in changed {
            let Some(kept) = w.kept.get(&path).cloned() else {
                continue;
            };
            let line = self.undo(&path, &kept);
            // What is there now is the state to compare with next, whether
            // or not the undo succeeded (so one change is reported once).
            if let Some(k) = w.kept.get_mut(&path) {
                let bytes = k.bytes.take();
                *k = keep(&path);
                if k.bytes.is_none() && matches!(kept.state, State::File(_)) {
                    k.bytes = bytes;
                }
            }
            said.push(line);
        }
        said
    }

    /// Put `path` back as `kept` says, the tool's version moved aside.
    fn undo(&self, path: &Path, kept: &Kept) -> String {
        let shown = path.display();
        if let State::Folder { ino, dev, names } = &kept.state {
            return self.undo_folder(path, (*ino, *dev), names.as_ref());
        }
        let moved = match state_of(path) {
            State::Absent => None,
            _ => Some(self.move_aside(path)),
        };
        let moved_note = match &moved {
            None => String::new(),
            Some(Ok(to)) => format!("; the tool's version is at {}", to.display()),
            Some(Err(e)) => format!("; the tool's version could not be moved aside: {e}"),
        };
        if let Some(Err(_)) = moved {
            return format!(
                "control file {shown} was changed by a tool during the run and could not be restored{moved_note}; check it before the next run"
            );
        }
        match (&kept.state, &kept.bytes) {
            (State::Absent, _) => format!(
                "control file {shown} was created by a tool during the run; removed{moved_note}"
            ),
            (State::File(_), Some(bytes)) => match write_back(path, bytes) {
                Ok(()) => format!(
                    "control file {shown} was changed by a tool during the run; restored{moved_note}"
                ),
                Err(e) => format!(
                    "control file {shown} was changed by a tool during the run and could not be restored ({e}){moved_note}; check it before the next run"
                ),
            },
            _ => format!(
                "control path {shown} was replaced by a tool during the run and cannot be restored here{moved_note}; check it before the next run"
            ),
        }
    }

    /// A control folder that changed: a folder renamed away is found by its
    /// inode near where it was and put back (what took its place moved
    /// aside); entries new in a folder whose names were kept are moved
    /// aside. Changes inside its existing files are the sandbox's and the
    /// gate's to stop: they are not seen here.
    fn undo_folder(
        &self,
        path: &Path,
        (ino, dev): (u64, u64),
        names: Option<&std::collections::BTreeSet<std::ffi::OsString>>,
    ) -> String {
        use std::os::unix::fs::MetadataExt;
        let shown = path.display();
        let same = std::fs::symlink_metadata(path)
            .is_ok_and(|m| m.is_dir() && m.ino() == ino && m.dev() == dev);
        if same {
            let Some(names) = names else {
                return format!("control folder {shown} was changed by a tool during the run");
            };
            let mut moved = Vec::new();
            for e in std::fs::read_dir(path).into_iter().flatten().flatten() {
                if !names.contains(&e.file_name()) {
                    match self.move_aside(&e.path()) {
                        Ok(to) => {
                            moved.push(format!("{} (now {})", e.path().display(), to.display()))
                        }
                        Err(err) => {
                            moved.push(format!("{} (not moved: {err})", e.path().display()))
                        }
                    }
                }
            }
            return if moved.is_empty() {
                format!(
                    "control folder {shown} was changed by a tool during the run (entries removed or renamed); check it before the next run"
                )
            } else {
                format!(
                    "control folder {shown} gained entries from a tool during the run; moved aside: {}",
                    moved.join(", ")
                )
            };
        }
        let Some(original) = find_folder(path, ino, dev) else {
            return format!(
                "control folder {shown} was moved or replaced by a tool during the run and the original was not found; check it before the next run"
            );
        };
        let planted = match state_of(path) {
            State::Absent => String::new(),
            _ => match self.move_aside(path) {
                Ok(to) => format!("; what took its place is at {}", to.display()),
                Err(e) => {
                    return format!(
                        "control folder {shown} was replaced by a tool during the run and could not be restored ({e}); the original is at {}",
                        original.display()
                    );
                }
            },
        };
        match std::fs::rename(&original, path) {
            Ok(()) => format!(
                "control folder {shown} was moved by a tool during the run (to {}); put back{planted}",
                original.display()
            ),
            Err(e) => format!(
                "control folder {shown} was moved by a tool during the run to {} and could not be put back ({e}){planted}",
                original.display()
            ),
        }
    }

    /// Move what is at `path` into the quarantine folder, under a name that
    /// says where it came from and when.
    fn move_aside(&self, path: &Path) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(&self.quarantine)?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        let name: String = path
            .to_string_lossy()
            .trim_start_matches('/')
            .chars()
            .map(|c| if c == '/' { '%' } else { c })
            .collect();
        let mut to = self.quarantine.join(format!("{stamp}-{name}"));
        let mut n = 1;
        while std::fs::symlink_metadata(&to).is_ok() {
            to = self.quarantine.join(format!("{stamp}-{n}-{name}"));
            n += 1;
        }
        std::fs::rename(path, &to)?;
        Ok(to)
    }
}

/// The folder with inode `ino` on `dev`, looked for below the parent of
/// `path` (where a rename in one file system leaves it), breadth first, at
/// most [`MAX_SEARCH`] entries.
fn find_folder(path: &Path, ino: u64, dev: u64) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut queue = std::collections::VecDeque::from([path.parent()?.to_path_buf()]);
    let mut seen = 0;
    while let Some(dir) = queue.pop_front() {
        for e in std::fs::read_dir(&dir).ok()?.flatten() {
            seen += 1;
            if seen > MAX_SEARCH {
                return None;
            }
            let Ok(m) = e.metadata() else { continue };
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if m.ino() == ino && m.dev() == dev {
                return Some(e.path());
            }
            queue.push_back(e.path());
        }
    }
    None
}

/// Write `bytes` to `path` by a rename, so a reader sees the old or the new
/// file and never half of one.
fn write_back(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.agentfile-restore-{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)?;
    let done = f.write_all(bytes).and_then(|()| f.sync_all());
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("agentfile-control-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn every_place_a_policy_or_config_is_looked_for_is_held() {
        let ws = PathBuf::from("/w");
        let files = control_files(&ControlInputs {
            workspace: ws.clone(),
            workflow_dir: PathBuf::from("/w/.workflows/x"),
            cwd: Some(PathBuf::from("/c")),
            workflow_files: vec![PathBuf::from("/w/.workflows/x/WORKFLOW.md")],
            ..ControlInputs::default()
        });
        let has =
            |p: &str, k: ControlKind| files.iter().any(|c| c.path == Path::new(p) && c.kind == k);
        assert!(has("/w/policy.toml", ControlKind::Policy));
        assert!(has("/w/.workflows/x/policy.toml", ControlKind::Policy));
        assert!(has("/c/agent.json", ControlKind::Config));
        assert!(has("/w/agent.toml", ControlKind::Config));
        assert!(has("/w/.workflows/x/WORKFLOW.md", ControlKind::Workflow));
        assert!(has("/w/.workflows/x/scripts", ControlKind::Scripts));
        assert!(has("/w/.git", ControlKind::Git));
        assert!(has("/w/.agentfile", ControlKind::Store));
    }

    #[test]
    fn a_change_made_during_a_call_is_undone_and_one_made_between_calls_kept() {
        let d = temp("tripwire");
        let policy = d.join("policy.toml");
        let config = d.join("agent.toml");
        std::fs::write(&config, "[llm]\n").unwrap();
        let q = d.join("q");
        let t = Tripwire::new([policy.clone(), config.clone()], q.clone());

        let m = t.before();
        std::fs::write(&policy, "[bash]\nallowlist = [\"*\"]\n").unwrap();
        std::fs::write(&config, "[llm]\nbase_url = \"http://evil\"\n").unwrap();
        let said = t.after(m);
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(!policy.exists(), "a created control file is removed");
        assert_eq!(std::fs::read_to_string(&config).unwrap(), "[llm]\n");
        assert_eq!(std::fs::read_dir(&q).unwrap().count(), 2, "both kept aside");

        // A person's edit between calls is what takes effect.
        std::fs::write(&config, "[llm]\nmodel = \"m\"\n").unwrap();
        let m = t.before();
        assert!(t.after(m).is_empty());
        assert_eq!(
            std::fs::read_to_string(&config).unwrap(),
            "[llm]\nmodel = \"m\"\n"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn while_another_call_runs_a_change_is_still_a_tools() {
        let d = temp("overlap");
        let policy = d.join("policy.toml");
        let t = Tripwire::new([policy.clone()], d.join("q"));
        let a = t.before();
        std::fs::write(&policy, "x").unwrap();
        // B starts while A runs: it must not take A's change as a person's.
        let b = t.before();
        assert!(t.after(b).len() == 1);
        assert!(t.after(a).is_empty());
        assert!(!policy.exists());
        let _ = std::fs::remove_dir_all(&d);
    }
}
