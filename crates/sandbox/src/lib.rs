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
//!   ([`filter`]) that refuses what a tool never needs.
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
    #[cfg(target_os = "linux")]
    ruleset: OwnedFd,
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

impl Sandbox {
    /// Prepare a sandbox for `spec`, or say why this machine cannot hold one.
    /// Without namespaces (but with Landlock and seccomp) the sandbox is
    /// partial: see [`Sandbox::partial`].
    pub fn new(spec: Spec) -> Result<Sandbox, Unavailable> {
        let probe = probe();
        if let Some(why) = probe.landlock.clone().or_else(|| probe.seccomp.clone()) {
            return Err(Unavailable(why));
        }
        Self::prepare(spec, probe.landlock_abi, probe.namespaces.clone())
    }

    #[cfg(not(target_os = "linux"))]
    fn prepare(_spec: Spec, _abi: i32, _partial: Option<String>) -> Result<Sandbox, Unavailable> {
        Err(Unavailable("not Linux".into()))
    }

    #[cfg(target_os = "linux")]
    fn prepare(spec: Spec, abi: i32, partial: Option<String>) -> Result<Sandbox, Unavailable> {
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
            None => (
                rules::ruleset(&writable, rules::Reads::All, None).map_err(Unavailable)?,
                None,
            ),
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
                let hidden: Vec<PathBuf> = spec
                    .hidden
                    .iter()
                    .filter(|h| h.symlink_metadata().is_ok())
                    .cloned()
                    .collect();
                (
                    rules::ruleset(&writable, rules::Reads::AllBut(&hidden), Some(&ports))
                        .map_err(Unavailable)?,
                    listener,
                )
            }
        };
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Ok(Sandbox {
            inner: Arc::new(Prepared {
                ruleset,
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
        if self.inner.partial.is_some() {
            let plan = child::Plan::partial(self.inner.clone());
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
            });
        }
        let listen = self.listen_ports();
        let chan = if listen.is_empty() {
            None
        } else {
            Some(socket_pair()?)
        };
        let plan = child::Plan::new(
            self.inner.clone(),
            listen.clone(),
            chan.as_ref().map(|(_, theirs)| theirs.as_raw_fd()),
            cmd.as_std().get_current_dir(),
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
