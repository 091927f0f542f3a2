//! The bound on a call's processes: a pids cgroup of its own.
//!
//! `RLIMIT_NPROC` counts per user and does not bind root at all (CI runs as
//! root), so a fork bomb in a sandbox would fill the machine's process table.
//! Where this process can write a pids controller (cgroup v2 with `pids`
//! enabled below its own cgroup, or the v1 `pids` hierarchy), each sandboxed
//! call gets a child cgroup of this process's own with `pids.max` set: the
//! spawned child joins it before it does anything else (`cgroup.procs`, an
//! already-open descriptor), so everything the call starts is counted there
//! and `fork` fails with `EAGAIN` past the bound. When the call ends the
//! cgroup is emptied (anything left is killed) and removed.
//!
//! Found once per process; `AGENTFILE_SANDBOX_SIMULATE=no-cgroup` pretends
//! there is no writable controller.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where per-call cgroups are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Controller {
    /// This process's own cgroup in the pids hierarchy.
    pub dir: PathBuf,
    /// "cgroup v2" or "cgroup v1".
    pub version: &'static str,
}

/// Why this process has no pids controller to use.
#[derive(Debug, thiserror::Error)]
pub enum NoController {
    /// `AGENTFILE_SANDBOX_SIMULATE=no-cgroup`.
    #[error("no writable pids controller (simulated)")]
    Simulated,
    #[error("cannot read {path}: {source}")]
    Read {
        path: &'static str,
        source: io::Error,
    },
    /// Why each hierarchy found was of no use.
    #[error("no writable pids controller ({})", .0.join("; "))]
    Unusable(Vec<String>),
}

/// The pids controller this process can use, or why there is none.
pub fn controller() -> Result<&'static Controller, &'static NoController> {
    static FOUND: OnceLock<Result<Controller, NoController>> = OnceLock::new();
    FOUND.get_or_init(find).as_ref()
}

fn find() -> Result<Controller, NoController> {
    if crate::probe().simulated.iter().any(|s| s == "no-cgroup") {
        return Err(NoController::Simulated);
    }
    let read = |path: &'static str| {
        std::fs::read_to_string(path).map_err(|source| NoController::Read { path, source })
    };
    let cgroups = read("/proc/self/cgroup")?;
    let mounts = read("/proc/self/mountinfo")?;
    let mut why = Vec::new();
    // v2 first: the unified hierarchy, where `pids` is enabled for children.
    if let Some(path) = cgroups.lines().find_map(|l| l.strip_prefix("0::"))
        && let Some((mnt, root)) = mount_of(&mounts, "cgroup2", None)
    {
        let dir = join(&mnt, &root, path);
        let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control"))
            .unwrap_or_default()
            .split_whitespace()
            .any(|c| c == "pids");
        if enabled {
            match try_dir(&dir) {
                Ok(()) => {
                    return Ok(Controller {
                        dir,
                        version: "cgroup v2",
                    });
                }
                Err(e) => why.push(format!("cgroup v2 at {}: {e}", dir.display())),
            }
        } else {
            why.push("cgroup v2: pids is not enabled below this process's cgroup".into());
        }
    }
    let v1 = cgroups.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        ctrls.split(',').any(|c| c == "pids").then_some(path)
    });
    if let Some(path) = v1
        && let Some((mnt, root)) = mount_of(&mounts, "cgroup", Some("pids"))
    {
        let dir = join(&mnt, &root, path);
        match try_dir(&dir) {
            Ok(()) => {
                return Ok(Controller {
                    dir,
                    version: "cgroup v1",
                });
            }
            Err(e) => why.push(format!("cgroup v1 at {}: {e}", dir.display())),
        }
    }
    if why.is_empty() {
        why.push("this machine has no pids cgroup controller".into());
    }
    Err(NoController::Unusable(why))
}

/// The mount point and root of the first mount of `fstype` (with the super
/// option `option`), from `/proc/self/mountinfo`.
fn mount_of(mountinfo: &str, fstype: &str, option: Option<&str>) -> Option<(PathBuf, String)> {
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split_whitespace();
        let (ty, _source, opts) = (r.next()?, r.next()?, r.next().unwrap_or(""));
        if ty != fstype || option.is_some_and(|o| !opts.split(',').any(|x| x == o)) {
            return None;
        }
        let l: Vec<&str> = left.split_whitespace().collect();
        Some((PathBuf::from(unescape(l.get(4)?)), unescape(l.get(3)?)))
    })
}

fn unescape(s: &str) -> String {
    s.replace("\\040", " ").replace("\\011", "\t")
}

/// The folder of cgroup `path` in a hierarchy mounted at `mnt` from `root`.
fn join(mnt: &Path, root: &str, path: &str) -> PathBuf {
    let rel = if root == "/" {
        path
    } else {
        path.strip_prefix(root).unwrap_or(path)
    };
    mnt.join(rel.trim_start_matches('/'))
}

/// Remove the empty call cgroups in `dir` of processes that are gone (one
/// killed before it could remove its own).
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("agentfile-"))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// Make, bound and remove a child of `dir`.
fn try_dir(dir: &Path) -> io::Result<()> {
    sweep(dir);
    let probe = dir.join(format!("agentfile-probe-{}", std::process::id()));
    std::fs::create_dir(&probe)?;
    let r = std::fs::write(probe.join("pids.max"), "64");
    let _ = std::fs::remove_dir(&probe);
    r
}

/// One call's cgroup, removed (after killing what is left in it) when
/// dropped.
#[derive(Debug)]
pub struct CallGroup {
    dir: PathBuf,
    procs: OwnedFd,
}

impl CallGroup {
    /// A new cgroup below `c` holding at most `max` tasks.
    pub(crate) fn new(c: &Controller, max: u64) -> io::Result<CallGroup> {
        use std::os::unix::fs::OpenOptionsExt;
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = c.dir.join(format!(
            "agentfile-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir)?;
        let made = std::fs::write(dir.join("pids.max"), max.to_string()).and_then(|()| {
            std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(dir.join("cgroup.procs"))
        });
        match made {
            Ok(f) => Ok(CallGroup {
                dir,
                procs: f.into(),
            }),
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// The descriptor the child writes `0` to, to join.
    pub(crate) fn procs_fd(&self) -> libc::c_int {
        self.procs.as_raw_fd()
    }
}

/// Kill every process in the cgroup at `dir`.
fn kill_all(dir: &Path) {
    if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    let pids = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in pids
        .lines()
        .filter_map(|p| p.trim().parse::<libc::pid_t>().ok())
    {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

impl Drop for CallGroup {
    fn drop(&mut self) {
        if std::fs::remove_dir(&self.dir).is_ok() {
            return;
        }
        // Still populated: a process the call left (the partial mode has no
        // PID namespace to end them), or one still exiting.
        kill_all(&self.dir);
        if std::fs::remove_dir(&self.dir).is_ok() {
            return;
        }
        let dir = self.dir.clone();
        let _ = std::thread::Builder::new()
            .name("sandbox-cgroup".into())
            .spawn(move || {
                for _ in 0..500 {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    if std::fs::remove_dir(&dir).is_ok() {
                        return;
                    }
                    kill_all(&dir);
                }
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_and_cgroup_paths() {
        let mi = "30 25 0:26 / /sys/fs/cgroup/pids rw,relatime shared:9 - cgroup cgroup rw,pids\n\
                  31 25 0:27 /docker/abc /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        let (m, r) = mount_of(mi, "cgroup", Some("pids")).unwrap();
        assert_eq!(
            (m.as_path(), r.as_str()),
            (Path::new("/sys/fs/cgroup/pids"), "/")
        );
        assert!(mount_of(mi, "cgroup", Some("memory")).is_none());
        let (m, r) = mount_of(mi, "cgroup2", None).unwrap();
        assert_eq!(
            join(&m, &r, "/docker/abc/x"),
            PathBuf::from("/sys/fs/cgroup/unified/x")
        );
        assert_eq!(
            join(Path::new("/sys/fs/cgroup/pids"), "/", "/"),
            PathBuf::from("/sys/fs/cgroup/pids")
        );
    }
}
