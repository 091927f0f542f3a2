//! The kernel sandbox of the programs a tool starts.
//!
//! The policy gate decides whether a call may run; this crate makes the
//! kernel hold every process the call starts to what the same policy allows:
//!
//! - **files**: a private mount namespace hides denied paths (secrets folders,
//!   the session store) behind empty read-only mounts and makes protected
//!   folders inside writable ones read-only; Landlock then allows reading
//!   everywhere and writing only beneath the writable roots (the rules attach
//!   to inodes, so they hold whatever name a program uses: symlinks, hard
//!   links, `/proc/self/root`);
//! - **network**: a network namespace of its own, with only a loopback of its
//!   own. Where the policy allows hosts, a listener on `127.0.0.1:3128` inside
//!   it is handed to this process, which serves it as an egress proxy that
//!   applies the web policy ([`proxy`]); where it allows host ports, each gets
//!   such a listener spliced to the same port on the host's loopback;
//! - **process**: its own session, killed with its parent, a PID namespace so
//!   that nothing it starts outlives it, `no_new_privs`, a seccomp filter
//!   ([`filter`]) that refuses what a tool never needs; at most
//!   [`Spec::max_processes`] processes at once (a pids cgroup per call,
//!   [`cgroup`]);
//! - **the rest of the machine**: an IPC namespace of its own (no host SysV
//!   segment, queue or semaphore set is reachable, and none made inside
//!   outlives the call), a devpts instance of its own (no other terminal of
//!   the user can be opened), and before Landlock ABI 9 (which scopes named
//!   unix sockets to the writable folders) empty read-only mounts over the
//!   folders where unix sockets live (`/tmp`, `/var/tmp`, `/run`), the
//!   writable folders in them bound back. [`Sandbox::isolation`] says what
//!   holds here.
//!
//! Everything is worked out in the parent ([`Sandbox::new`] once per run,
//! [`Sandbox::command`] per process); the child between fork and exec only
//! makes system calls on that data ([`child`]).
//!
//! What the kernel offers is found once per process ([`probe`]). Where it
//! lacks something, [`Sandbox::new`] says what, and the caller decides
//! whether tools run gated only or not at all.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

#[cfg(target_os = "linux")]
pub mod cgroup;
#[cfg(target_os = "linux")]
mod child;
pub mod filter;
mod probe;
pub mod proxy;
#[cfg(target_os = "linux")]
mod rules;

pub use probe::{Probe, probe};

/// The proxy's address inside every sandbox (each has its own loopback).
pub const PROXY_PORT: u16 = 3128;

/// What one run's sandbox enforces, in paths already resolved (no symlinks).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spec {
    /// Folders (and files) a sandboxed process may write beneath. Paths that
    /// do not exist are skipped.
    pub writable: Vec<PathBuf>,
    /// Paths hidden from every read: a folder shows empty, a file empty.
    pub hidden: Vec<PathBuf>,
    /// Paths inside writable folders that stay read-only (`.git/hooks`, a
    /// workflow's `scripts/`).
    pub read_only: Vec<PathBuf>,
    /// A folder inside a hidden one that stays visible and writable (the
    /// run's scratch folder in the session store), with the hidden folder.
    pub exposed: Option<(PathBuf, PathBuf)>,
    /// The run's private temporary folder (`TMPDIR`); writable.
    pub tmp: PathBuf,
    /// Serve the egress proxy at `127.0.0.1:3128` inside the sandbox.
    pub proxy: bool,
    /// TCP ports of the host's loopback reachable from inside, at the same
    /// port on the sandbox's own loopback.
    pub ports: Vec<u16>,
    /// The most processes (threads included) one call's programs may have
    /// at once, where a pids cgroup can hold them; `None`: no bound here.
    pub max_processes: Option<u64>,
}

/// The process bound a sandbox has unless told otherwise.
pub const DEFAULT_MAX_PROCESSES: u64 = 512;

/// The folders where unix sockets usually live, covered where Landlock
/// cannot scope named sockets (before ABI 9).
pub const SOCKET_FOLDERS: &[&str] = &["/tmp", "/var/tmp", "/run", "/var/run"];

/// What a sandbox isolates from the rest of the machine, and how: each
/// field says it in words, for `inspect --sandbox`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Isolation {
    /// Whether no unix socket outside the writable folders can be reached.
    pub unix_sockets_isolated: bool,
    /// Folders hidden so their sockets cannot be reached (their writable
    /// folders bound back).
    pub socket_folders_hidden: Vec<PathBuf>,
    pub unix_sockets: String,
    /// Whether host SysV IPC objects (and POSIX message queues) are out of
    /// reach and none made inside outlives the call.
    pub ipc_isolated: bool,
    pub ipc: String,
    /// Whether the user's terminals (the host's `/dev/pts`) are out of reach.
    pub terminals_isolated: bool,
    pub terminals: String,
    /// The bound on a call's processes, when there is one.
    pub max_processes: Option<u64>,
    pub processes: String,
}

/// Why the sandbox cannot be enforced here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// A run's sandbox, ready to put processes in.
#[derive(Debug, Clone)]
pub struct Sandbox {
    inner: Arc<Prepared>,
}

/// What the child needs, prepared once per run.
#[derive(Debug)]
struct Prepared {
    spec: Spec,
    /// Without namespaces, the run's one ruleset; with them, each spawn
    /// builds its own from `writable` (its devpts gets a rule inside).
    #[cfg(target_os = "linux")]
    ruleset: Option<OwnedFd>,
    /// The writable roots that exist, the run's TMPDIR and `/dev/shm`
    /// folder included.
    writable: Vec<PathBuf>,
    /// The Landlock access a sandbox's own devpts is granted: everything
    /// the ruleset handles.
    pts_access: u64,
    /// Socket folders covered by an empty mount (see [`SOCKET_FOLDERS`]).
    cover: Vec<PathBuf>,
    /// Where the empty folders bound over them are made (beside the run's
    /// temporary folder, outside every writable one), removed with the
    /// sandbox.
    cover_root: PathBuf,
    /// Mount a devpts instance of its own (else an empty `/dev/pts`).
    devpts: bool,
    /// The process bound; `u64::MAX`: none.
    max_processes: std::sync::atomic::AtomicU64,
    filter: Vec<filter::Insn>,
    uid_map: CString,
    gid_map: CString,
    landlock_abi: i32,
    /// Why there are no namespaces, when there are none: then files are
    /// held by Landlock alone, TCP by Landlock's port rules, UDP by seccomp,
    /// and the proxy listens on this machine's loopback (`proxy_listener`).
    partial: Option<String>,
    proxy_listener: Option<std::net::TcpListener>,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        if !self.cover.is_empty() {
            let _ = std::fs::remove_dir_all(&self.cover_root);
        }
    }
}

impl Sandbox {
    /// Prepare a sandbox for `spec`, or say why this machine cannot hold one.
    /// Without namespaces (but with Landlock and seccomp) the sandbox is
    /// partial: see [`Sandbox::partial`].
    pub fn new(spec: Spec) -> Result<Sandbox, Unavailable> {
        let probe = probe();
        if let Some(why) = probe.landlock.clone().or_else(|| probe.seccomp.clone()) {
            return Err(Unavailable(why));
        }
        Self::prepare(spec, probe)
    }

    #[cfg(not(target_os = "linux"))]
    fn prepare(_spec: Spec, _probe: &Probe) -> Result<Sandbox, Unavailable> {
        Err(Unavailable("not Linux".into()))
    }

    #[cfg(target_os = "linux")]
    fn prepare(spec: Spec, probe: &Probe) -> Result<Sandbox, Unavailable> {
        let abi = probe.landlock_abi;
        let partial = probe.namespaces.clone();
        let mut writable: Vec<PathBuf> = spec
            .writable
            .iter()
            .filter(|p| p.exists())
            .cloned()
            .collect();
        writable.push(spec.tmp.clone());
        // The run's `/dev/shm` (POSIX shared memory, semaphores), private to
        // it like its TMPDIR.
        let shm = shm_dir(&spec.tmp);
        if std::fs::create_dir_all(&shm).is_ok() {
            writable.push(shm);
        }
        if let Some((_, inner)) = &spec.exposed {
            writable.push(inner.clone());
        }
        let (ruleset, proxy_listener) = match &partial {
            // Built per spawn (see `command`); once here to fail early.
            None => {
                rules::ruleset(&writable, rules::Reads::All, None, rules::DEVICES)
                    .map_err(|e| Unavailable(e.to_string()))?;
                (None, None)
            }
            Some(_) => {
                // No network namespace: the proxy listens on this machine's
                // loopback, and Landlock lets TCP reach only its port and
                // the allowed ones.
                let listener = if spec.proxy {
                    Some(std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| {
                        Unavailable(format!("cannot listen for the egress proxy: {e}"))
                    })?)
                } else {
                    None
                };
                let mut ports = spec.ports.clone();
                if let Some(l) = &listener {
                    ports.push(
                        l.local_addr()
                            .map_err(|e| Unavailable(e.to_string()))?
                            .port(),
                    );
                }
                // No devpts of its own: the host's terminals are neither
                // readable nor writable (new ones come from /dev/ptmx, their
                // other end by TIOCGPTPEER).
                let mut hidden: Vec<PathBuf> = spec
                    .hidden
                    .iter()
                    .filter(|h| h.symlink_metadata().is_ok())
                    .cloned()
                    .collect();
                if std::path::Path::new("/dev/pts").is_dir() {
                    hidden.push(PathBuf::from("/dev/pts"));
                }
                (
                    Some(
                        rules::ruleset(
                            &writable,
                            rules::Reads::AllBut(&hidden),
                            Some(&ports),
                            rules::DEVICES_NO_PTS,
                        )
                        .map_err(|e| Unavailable(e.to_string()))?,
                    ),
                    listener,
                )
            }
        };
        let cover: Vec<PathBuf> = if partial.is_none() && abi < 9 {
            let mut v: Vec<PathBuf> = Vec::new();
            for d in SOCKET_FOLDERS {
                let Ok(d) = std::path::Path::new(d).canonicalize() else {
                    continue;
                };
                if d.is_dir() && !v.contains(&d) && !writable.iter().any(|w| d.starts_with(w)) {
                    v.push(d);
                }
            }
            v
        } else {
            Vec::new()
        };
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let cover_root = {
            let mut name = spec.tmp.as_os_str().to_owned();
            name.push(".cover");
            PathBuf::from(name)
        };
        // The folder that holds the empty folders is covered last (they are
        // bound from it by name).
        let mut cover = cover;
        cover.sort_by_key(|d| cover_root.starts_with(d));
        let max = spec.max_processes.unwrap_or(u64::MAX);
        Ok(Sandbox {
            inner: Arc::new(Prepared {
                ruleset,
                writable,
                pts_access: rules::all_access(abi),
                cover_root,
                cover,
                devpts: partial.is_none() && probe.devpts.is_none(),
                max_processes: std::sync::atomic::AtomicU64::new(max),
                filter: filter::program_for(partial.is_some()),
                uid_map: CString::new(format!("{uid} {uid} 1")).expect("no NUL"),
                gid_map: CString::new(format!("{gid} {gid} 1")).expect("no NUL"),
                spec,
                landlock_abi: abi,
                partial,
                proxy_listener,
            }),
        })
    }

    /// Why the sandbox is partial, when it is: without namespaces, hidden
    /// paths inside writable folders (the session store, `.git`) and
    /// read-only ones are not held, a process can outlive its call if the
    /// caller dies, and `ports` are open on any host.
    pub fn partial(&self) -> Option<&str> {
        self.inner.partial.as_deref()
    }

    /// Where programs reach the proxy.
    pub fn proxy_port(&self) -> Option<u16> {
        if !self.inner.spec.proxy {
            return None;
        }
        match &self.inner.proxy_listener {
            Some(l) => l.local_addr().ok().map(|a| a.port()),
            None => Some(PROXY_PORT),
        }
    }

    /// What this sandbox enforces.
    pub fn spec(&self) -> &Spec {
        &self.inner.spec
    }

    /// Bound each call's processes to `max` (`None`: no bound).
    pub fn set_max_processes(&self, max: Option<u64>) {
        self.inner.max_processes.store(
            max.unwrap_or(u64::MAX),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// The bound on a call's processes.
    pub fn max_processes(&self) -> Option<u64> {
        let n = self
            .inner
            .max_processes
            .load(std::sync::atomic::Ordering::Relaxed);
        (n != u64::MAX).then_some(n)
    }

    /// What is isolated from the rest of the machine here, and how.
    pub fn isolation(&self) -> Isolation {
        let p = &self.inner;
        let partial = p.partial.is_some();
        let abi9 = p.landlock_abi >= 9;
        let shown = |v: &[PathBuf]| {
            v.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let unix_sockets = if abi9 {
            "named sockets only beneath the writable folders (Landlock ABI 9); abstract ones only inside (Landlock scope)".to_owned()
        } else if partial {
            format!(
                "NOT isolated: a named socket anywhere this user can reach connects (Landlock ABI {} scopes only abstract sockets; no mount namespace to hide the socket folders)",
                p.landlock_abi
            )
        } else if p.cover.is_empty() {
            format!(
                "NOT isolated: a named socket outside the hidden paths connects (Landlock ABI {} < 9, and every socket folder is writable)",
                p.landlock_abi
            )
        } else {
            format!(
                "{} hidden behind empty read-only mounts (the writable folders in them bound back), so their sockets (databases, D-Bus, X11, ssh-agent) cannot be reached; a named socket elsewhere outside the hidden paths still connects (Landlock ABI {} < 9); abstract ones only inside (Landlock scope)",
                shown(&p.cover),
                p.landlock_abi
            )
        };
        let (ipc_isolated, ipc) = if partial {
            (
                true,
                "SysV IPC (shmget, shmat, msgget, semget, …) and POSIX message queues refused (seccomp; no IPC namespace)".to_owned(),
            )
        } else {
            (
                true,
                "an IPC namespace of its own: no host SysV segment, queue or semaphore set (or POSIX message queue) is reachable, and none made inside outlives the call; /dev/shm is the run's own".to_owned(),
            )
        };
        let (terminals_isolated, terminals) = if partial {
            (
                true,
                "/dev/pts neither readable nor writable (Landlock): no terminal of the user can be opened; new ones come from /dev/ptmx, their other end only by TIOCGPTPEER (openpty); no controlling terminal (own session)".to_owned(),
            )
        } else if p.devpts {
            (
                true,
                "a devpts instance of its own at /dev/pts: no terminal of the user can be opened, new ones (openpty) work; no controlling terminal (own session)".to_owned(),
            )
        } else {
            (
                true,
                format!(
                    "no terminals: /dev/pts is empty ({}); no controlling terminal (own session)",
                    probe().devpts.as_deref().unwrap_or("no devpts instance")
                ),
            )
        };
        let max = self.max_processes();
        let processes = match (max, cgroup_controller()) {
            (None, _) => "not bounded by the sandbox ([bash] max_processes = 0); RLIMIT_NPROC does not bind root".to_owned(),
            (Some(n), Ok(c)) => format!(
                "at most {n} at once, threads included (a pids cgroup per call under {} ({}), removed after it, anything left in it killed)",
                c.dir.display(),
                c.version
            ),
            (Some(_), Err(why)) => format!(
                "NOT bounded: {why}; only [bash] max_processes (RLIMIT_NPROC, per user, does not bind root)"
            ),
        };
        Isolation {
            unix_sockets_isolated: abi9,
            socket_folders_hidden: p.cover.clone(),
            unix_sockets,
            ipc_isolated,
            ipc,
            terminals_isolated,
            terminals,
            max_processes: max.filter(|_| cgroup_controller().is_ok()),
            processes,
        }
    }

    /// The call's pids cgroup, when processes are bounded and a controller
    /// is writable.
    #[cfg(target_os = "linux")]
    fn call_group(&self) -> io::Result<Option<cgroup::CallGroup>> {
        let Some(max) = self.max_processes() else {
            return Ok(None);
        };
        let Ok(c) = cgroup::controller() else {
            return Ok(None);
        };
        // The relay and init count too.
        let extra = if self.inner.partial.is_some() { 0 } else { 2 };
        cgroup::CallGroup::new(c, max.saturating_add(extra))
            .map(Some)
            .map_err(|e| io::Error::other(format!("cannot make the call's pids cgroup: {e}")))
    }

    /// The Landlock ABI the kernel offers.
    pub fn landlock_abi(&self) -> i32 {
        self.inner.landlock_abi
    }

    /// The environment a sandboxed process gets on top of its own: `TMPDIR`,
    /// caches in it (`XDG_CACHE_HOME`, npm's; the ones under `~` are not
    /// writable), and the proxy variables when the proxy is on.
    pub fn env(&self) -> Vec<(String, String)> {
        let tmp = &self.inner.spec.tmp;
        let mut env = vec![
            ("TMPDIR".to_owned(), tmp.display().to_string()),
            (
                "XDG_CACHE_HOME".to_owned(),
                tmp.join(".cache").display().to_string(),
            ),
            (
                "npm_config_cache".to_owned(),
                tmp.join(".npm").display().to_string(),
            ),
        ];
        if let Some(port) = self.proxy_port() {
            let url = format!("http://127.0.0.1:{port}");
            for k in [
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "http_proxy",
                "https_proxy",
                "npm_config_proxy",
                "npm_config_https_proxy",
            ] {
                env.push((k.to_owned(), url.clone()));
            }
            // Node's fetch ignores the variables above unless asked.
            env.push(("NODE_USE_ENV_PROXY".to_owned(), "1".to_owned()));
        }
        env
    }

    /// Put the process `cmd` will start into this sandbox. `cmd` must not ask
    /// for a process group (the sandbox makes a session). Call
    /// [`Guest::listeners`] right after spawning it.
    #[cfg(target_os = "linux")]
    pub fn command(&self, cmd: &mut tokio::process::Command) -> io::Result<Guest> {
        let group = self.call_group()?;
        let procs = group.as_ref().map(cgroup::CallGroup::procs_fd);
        if self.inner.partial.is_some() {
            let plan = child::Plan::partial(self.inner.clone(), procs);
            // SAFETY: as below.
            unsafe {
                cmd.pre_exec(move || plan.enter());
            }
            let shared = match &self.inner.proxy_listener {
                Some(l) => Some(l.try_clone()?),
                None => None,
            };
            return Ok(Guest {
                ours: None,
                ports: Vec::new(),
                shared,
                _group: group,
            });
        }
        let listen = self.listen_ports();
        let chan = if listen.is_empty() {
            None
        } else {
            Some(socket_pair()?)
        };
        // A ruleset of this spawn's own: its devpts gets a rule inside.
        let ruleset = rules::ruleset(
            &self.inner.writable,
            rules::Reads::All,
            None,
            rules::DEVICES,
        )
        .map_err(io::Error::other)?;
        let plan = child::Plan::new(
            self.inner.clone(),
            listen.clone(),
            chan.as_ref().map(|(_, theirs)| theirs.as_raw_fd()),
            cmd.as_std().get_current_dir(),
            ruleset,
            procs,
        )?;
        // SAFETY: the closure runs between fork and exec and makes only
        // system calls on data prepared above (see `child`).
        unsafe {
            cmd.pre_exec(move || plan.enter());
        }
        Ok(Guest {
            ours: chan.map(|(ours, theirs)| (ours, Some(theirs))),
            ports: listen,
            shared: None,
            _group: group,
        })
    }

    #[cfg(not(target_os = "linux"))]
    pub fn command(&self, _cmd: &mut tokio::process::Command) -> io::Result<Guest> {
        Err(io::Error::other("the sandbox needs Linux"))
    }

    /// The ports listened on inside: the proxy's, then the forwarded ones.
    fn listen_ports(&self) -> Vec<u16> {
        let spec = &self.inner.spec;
        let mut ports = Vec::new();
        if spec.proxy {
            ports.push(PROXY_PORT);
        }
        ports.extend(spec.ports.iter().copied().filter(|p| *p != PROXY_PORT));
        ports
    }
}

/// A process being put in a sandbox: how its listeners come back.
#[derive(Debug)]
pub struct Guest {
    /// Our end of the channel, and theirs until the spawn is done.
    ours: Option<(OwnedFd, Option<OwnedFd>)>,
    ports: Vec<u16>,
    /// Without namespaces: the run's proxy listener on this machine.
    shared: Option<std::net::TcpListener>,
    /// The call's pids cgroup, removed (and emptied) when the guest is
    /// dropped: keep it until the process has ended.
    #[cfg(target_os = "linux")]
    _group: Option<cgroup::CallGroup>,
}

/// The pids controller this process can use, or why there is none.
#[cfg(target_os = "linux")]
pub fn cgroup_controller() -> Result<&'static cgroup::Controller, &'static cgroup::NoController> {
    cgroup::controller()
}

#[cfg(not(target_os = "linux"))]
fn cgroup_controller() -> Result<&'static (), &'static str> {
    Err("not Linux")
}

impl Guest {
    /// The listeners the sandbox made inside (the proxy's first), each with
    /// its port. Call after the spawn succeeded: the child sent them before
    /// it ran the program.
    pub fn listeners(&mut self) -> io::Result<Vec<(u16, std::net::TcpListener)>> {
        if let Some(l) = self.shared.take() {
            return Ok(vec![(PROXY_PORT, l)]);
        }
        let Some((ours, theirs)) = &mut self.ours else {
            return Ok(Vec::new());
        };
        drop(theirs.take());
        #[cfg(target_os = "linux")]
        {
            let fds = child::receive_fds(ours.as_raw_fd(), self.ports.len())?;
            Ok(self
                .ports
                .iter()
                .copied()
                .zip(fds.into_iter().map(std::net::TcpListener::from))
                .collect())
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = ours;
            Ok(Vec::new())
        }
    }
}

/// Where a run's `/dev/shm` lives: in its temporary folder.
fn shm_dir(tmp: &std::path::Path) -> PathBuf {
    tmp.join(".shm")
}

#[cfg(target_os = "linux")]
fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: socketpair writes two descriptors into the array we own.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by no one else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
