//! What the child does between fork and exec.
//!
//! Three processes make one sandboxed program:
//!
//! - the **relay**, the child the caller spawned: it makes a session of its
//!   own (so the caller can kill the group), asks to be killed with its
//!   parent, enters new user, mount, network and PID namespaces, arranges the
//!   mounts, brings up the namespace's own loopback, makes the listeners and
//!   hands them to the caller, then forks the next one and waits, and at the
//!   end exits as the program did (the same code, or the same signal);
//! - **init**, PID 1 of the new PID namespace: it forks the program, reaps
//!   whatever is orphaned, and when the program ends sends its status to the
//!   relay and exits, which makes the kernel kill everything left in the
//!   namespace: nothing a tool starts outlives it, `setsid` and double forks
//!   included;
//! - the **program**: it drops its capabilities, sets `no_new_privs`, enters
//!   the Landlock domain, installs the seccomp filter, and returns to the
//!   standard library, which execs it.
//!
//! Each is killed when its parent dies, so killing the relay (a timeout, a
//! cancel, the caller's death) ends them all.
//!
//! Only system calls are made here, on data prepared by [`Plan::new`] before
//! the fork: no allocation, no lock (the parent has other threads whose
//! locks the child inherits held).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Prepared;

/// The most ports listened on inside one sandbox.
pub(crate) const MAX_LISTENERS: usize = 16;

/// The most folders bound back into one covered folder.
pub(crate) const MAX_KEEP: usize = 32;

/// One mount to make.
#[derive(Debug)]
enum Op {
    /// An empty folder bound read-only over one where unix sockets live
    /// (`/tmp`, `/run`, …), with the paths in `keep` (the writable folders
    /// and the working directory inside it) bound back from the originals,
    /// held open across the first bind. The empty folder (`skeleton`, made
    /// by the parent outside every writable folder) holds only the
    /// placeholders they are bound onto. A bind, not a tmpfs: a superblock
    /// made and destroyed per call costs milliseconds.
    Cover {
        dir: CString,
        skeleton: CString,
        flags: libc::c_ulong,
        keep: Vec<CString>,
    },
    /// An empty read-only tmpfs over a folder.
    HideDir(CString),
    /// `/dev/null` over a file.
    HideFile(CString),
    /// The path bound onto itself, read-only, keeping `flags` (the flags of
    /// the mount it lies on, which a user namespace may not drop).
    ReadOnly(CString, libc::c_ulong),
    /// A folder bound over another (the run's own `/dev/shm`, from its
    /// temporary folder: a Landlock rule on the folder holds through the
    /// bind, where a fresh tmpfs would have no rule at all).
    Bind(CString, CString),
    /// An empty tmpfs over `store` with only `target` in it, bound back
    /// from the folder itself (held open across the tmpfs mount), then made
    /// read-only.
    Expose {
        store: CString,
        mkdirs: Vec<CString>,
        target: CString,
    },
}

/// Everything one sandboxed spawn does, prepared.
#[derive(Debug)]
pub(crate) struct Plan {
    prep: Arc<Prepared>,
    parent: libc::pid_t,
    ops: Vec<Op>,
    cwd: Option<CString>,
    ports: Vec<u16>,
    chan: Option<libc::c_int>,
    /// This spawn's own Landlock ruleset (with namespaces: the rule for its
    /// own devpts is added inside, once mounted); the run's shared one
    /// otherwise.
    ruleset: Option<OwnedFd>,
    /// Mount a devpts instance of its own at `/dev/pts`.
    devpts: bool,
    /// `cgroup.procs` of the call's pids cgroup, to join first.
    procs: Option<libc::c_int>,
}

/// `struct landlock_path_beneath_attr`.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))
}

/// The mount flags a user namespace may not clear on a bind of `p`.
fn locked_flags(p: &CStr) -> libc::c_ulong {
    // SAFETY: statvfs writes into the struct we own.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(p.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    let keep = libc::ST_NOSUID
        | libc::ST_NODEV
        | libc::ST_NOEXEC
        | libc::ST_NOATIME
        | libc::ST_NODIRATIME
        | libc::ST_RELATIME;
    // The ST_ and MS_ values of these flags are the same.
    st.f_flag & keep
}

impl Plan {
    pub(crate) fn new(
        prep: Arc<Prepared>,
        ports: Vec<u16>,
        chan: Option<libc::c_int>,
        cwd: Option<&Path>,
        ruleset: OwnedFd,
        procs: Option<libc::c_int>,
    ) -> io::Result<Plan> {
        if ports.len() > MAX_LISTENERS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("at most {MAX_LISTENERS} ports can be reached from a sandbox"),
            ));
        }
        let spec = &prep.spec;
        let mut ops = Vec::new();
        // The socket folders first: what is bound back into them is what
        // the mounts below may act on.
        let mut roots: Vec<PathBuf> = prep.writable.clone();
        if let Some(c) = cwd {
            let c = if c.is_absolute() {
                c.to_path_buf()
            } else {
                std::env::current_dir()?.join(c)
            };
            roots.push(c.canonicalize().unwrap_or(c));
        }
        let mut kept: Vec<PathBuf> = Vec::new();
        for (i, d) in prep.cover.iter().enumerate() {
            let inside: Vec<&PathBuf> = roots
                .iter()
                .filter(|r| r.starts_with(d) && *r != d && r.symlink_metadata().is_ok())
                .collect();
            let mut keep: Vec<PathBuf> = inside
                .iter()
                .filter(|r| !inside.iter().any(|o| o != *r && r.starts_with(o)))
                .map(|r| (*r).clone())
                .collect();
            keep.sort();
            keep.dedup();
            if keep.len() > MAX_KEEP {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "at most {MAX_KEEP} writable folders can lie in {}",
                        d.display()
                    ),
                ));
            }
            // The placeholders, made once per run (and again if gone).
            let skeleton = prep.cover_root.join(format!("{i}"));
            std::fs::create_dir_all(&skeleton)?;
            for k in &keep {
                let at = skeleton.join(k.strip_prefix(d).unwrap_or(k));
                if at.symlink_metadata().is_err() {
                    if k.is_dir() {
                        std::fs::create_dir_all(&at)?;
                    } else {
                        if let Some(parent) = at.parent() {
                            std::fs::create_dir_all(parent)?;
                        }
                        std::fs::File::create(&at)?;
                    }
                }
            }
            let skeleton = cstr(&skeleton)?;
            let flags = locked_flags(&skeleton);
            ops.push(Op::Cover {
                dir: cstr(d)?,
                skeleton,
                flags,
                keep: keep.iter().map(|k| cstr(k)).collect::<io::Result<_>>()?,
            });
            kept.extend(keep);
        }
        let visible = |p: &Path| {
            !prep.cover.iter().any(|d| p.starts_with(d)) || kept.iter().any(|k| p.starts_with(k))
        };
        let store = spec.exposed.as_ref().map(|(s, _)| s.as_path());
        for h in &spec.hidden {
            if Some(h.as_path()) == store || !visible(h) {
                continue;
            }
            match std::fs::metadata(h) {
                Ok(m) if m.is_dir() => ops.push(Op::HideDir(cstr(h)?)),
                Ok(_) => ops.push(Op::HideFile(cstr(h)?)),
                Err(_) => {}
            }
        }
        if let Some((store, inner)) = &spec.exposed
            && store.is_dir()
            && inner.is_dir()
            && visible(store)
        {
            let rel = inner.strip_prefix(store).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the exposed folder is not inside the hidden one",
                )
            })?;
            let mut mkdirs = Vec::new();
            let mut at = store.clone();
            for c in rel.components() {
                at.push(c);
                mkdirs.push(cstr(&at)?);
            }
            ops.push(Op::Expose {
                store: cstr(store)?,
                mkdirs,
                target: cstr(inner)?,
            });
        }
        for r in &spec.read_only {
            if r.exists() && visible(r) {
                let c = cstr(r)?;
                let flags = locked_flags(&c);
                ops.push(Op::ReadOnly(c, flags));
            }
        }
        let shm = super::shm_dir(&spec.tmp);
        if Path::new("/dev/shm").is_dir() && shm.is_dir() {
            ops.push(Op::Bind(cstr(&shm)?, c"/dev/shm".to_owned()));
        }
        // No devpts of its own where the kernel refuses one: then none.
        let devpts = prep.devpts && Path::new("/dev/pts").is_dir();
        if !devpts && Path::new("/dev/pts").is_dir() {
            ops.push(Op::HideDir(c"/dev/pts".to_owned()));
        }
        Ok(Plan {
            prep,
            // SAFETY: getpid cannot fail.
            parent: unsafe { libc::getpid() },
            ops,
            cwd: cwd.map(cstr).transpose()?,
            ports,
            chan,
            ruleset: Some(ruleset),
            devpts,
            procs,
        })
    }

    /// The plan without namespaces: the program itself, in its own
    /// session, killed with its parent, confined by Landlock and seccomp.
    pub(crate) fn partial(prep: Arc<Prepared>, procs: Option<libc::c_int>) -> Plan {
        Plan {
            prep,
            // SAFETY: getpid cannot fail.
            parent: unsafe { libc::getpid() },
            ops: Vec::new(),
            cwd: None,
            ports: Vec::new(),
            chan: None,
            ruleset: None,
            devpts: false,
            procs,
        }
    }

    /// Enter the sandbox: run in the spawned child, before exec. Returns in
    /// the program only; the relay and init never return.
    pub(crate) fn enter(&self) -> io::Result<()> {
        // SAFETY: every call below is a system call on data prepared before
        // the fork (see the module's notes).
        unsafe {
            if self.prep.partial.is_some() {
                self.partial_setup()
            } else {
                self.relay_setup()
            }
        }
    }

    unsafe fn partial_setup(&self) -> io::Result<()> {
        unsafe {
            self.own_session()?;
            self.confine()
        }
    }

    /// A session of its own (the caller kills the group), killed with the
    /// caller, no core dumps.
    unsafe fn own_session(&self) -> io::Result<()> {
        unsafe {
            check(libc::setsid())?;
            check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL))?;
            if libc::getppid() != self.parent {
                // The caller died before the line above: die with it.
                libc::_exit(1);
            }
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            if let Some(fd) = self.procs {
                // Into the call's pids cgroup, before anything else is
                // started: `0` is the writer itself.
                let n = libc::write(fd, c"0".as_ptr() as *const libc::c_void, 1);
                if n != 1 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        }
    }

    /// Mount a devpts instance of its own over `/dev/pts` (the host's
    /// terminals are then out of reach; `/dev/ptmx` makes new ones in it)
    /// and let this spawn's ruleset open its terminals: a rule on the host's
    /// `/dev/pts` does not hold on a mount made over it.
    unsafe fn own_devpts(&self) -> io::Result<()> {
        unsafe {
            mount_devpts()?;
            let Some(ruleset) = &self.ruleset else {
                return Ok(());
            };
            let fd = check(libc::open(
                c"/dev/pts".as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            ))?;
            let attr = PathBeneathAttr {
                allowed_access: self.prep.pts_access,
                parent_fd: fd,
            };
            const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
            let rc = libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset.as_raw_fd(),
                LANDLOCK_RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0u32,
            );
            let err = io::Error::last_os_error();
            libc::close(fd);
            if rc < 0 {
                return Err(err);
            }
            Ok(())
        }
    }

    unsafe fn relay_setup(&self) -> io::Result<()> {
        unsafe {
            self.own_session()?;
            enter_namespaces(&self.prep.uid_map, &self.prep.gid_map)?;
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            for op in &self.ops {
                mount_op(op)?;
            }
            if self.devpts {
                self.own_devpts()?;
            }
            if let Some(cwd) = &self.cwd {
                // Again, now that the mounts are in place.
                check(libc::chdir(cwd.as_ptr()))?;
            }
            loopback_up()?;
            if let Some(chan) = self.chan {
                self.hand_over_listeners(chan)?;
            }
            let mut pipe = [0; 2];
            check(libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC))?;
            let init = check(libc::fork())?;
            if init > 0 {
                relay(init, pipe[0]);
            }
            // PID 1 of the new namespace.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            // A /proc of this namespace, where the kernel allows it (`ps`
            // then shows only the sandbox); the one inherited stays
            // otherwise, and Landlock keeps other processes' entries closed.
            libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            );
            let program = check(libc::fork())?;
            if program > 0 {
                init_loop(program, pipe[1]);
            }
            libc::close(pipe[0]);
            libc::close(pipe[1]);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            self.confine()
        }
    }

    /// The program's own restrictions, the filter last (it refuses calls the
    /// steps before it make).
    unsafe fn confine(&self) -> io::Result<()> {
        unsafe {
            for cap in 0..64 {
                libc::prctl(libc::PR_CAPBSET_DROP, cap);
            }
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            );
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
            let ruleset = match (&self.ruleset, &self.prep.ruleset) {
                (Some(r), _) | (None, Some(r)) => r.as_raw_fd(),
                (None, None) => -1,
            };
            check(libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) as libc::c_int)?;
            let filter = &self.prep.filter;
            if !filter.is_empty() {
                let prog = libc::sock_fprog {
                    len: filter.len() as libc::c_ushort,
                    filter: filter.as_ptr() as *mut libc::sock_filter,
                };
                const SECCOMP_SET_MODE_FILTER: libc::c_ulong = 1;
                check(libc::syscall(
                    libc::SYS_seccomp,
                    SECCOMP_SET_MODE_FILTER,
                    0 as libc::c_ulong,
                    &prog as *const libc::sock_fprog,
                ) as libc::c_int)?;
            }
            Ok(())
        }
    }

    /// Listen on each port inside and send the sockets to the caller.
    unsafe fn hand_over_listeners(&self, chan: libc::c_int) -> io::Result<()> {
        unsafe {
            let mut fds = [-1 as libc::c_int; MAX_LISTENERS];
            for (i, port) in self.ports.iter().enumerate() {
                let fd = check(libc::socket(
                    libc::AF_INET,
                    libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                    0,
                ))?;
                fds[i] = fd;
                let one: libc::c_int = 1;
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_REUSEADDR,
                    &one as *const _ as *const libc::c_void,
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
                let addr = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: port.to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                check(libc::bind(
                    fd,
                    &addr as *const _ as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                ))?;
                check(libc::listen(fd, 128))?;
            }
            let n = self.ports.len();
            send_fds(chan, &fds[..n])?;
            for fd in &fds[..n] {
                libc::close(*fd);
            }
            Ok(())
        }
    }
}

fn check<T: Copy + PartialOrd + Default>(rc: T) -> io::Result<T> {
    if rc < T::default() {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// The namespaces a sandbox has of its own: user, mount, network, SysV IPC
/// (and POSIX message queues: a segment or queue made inside ends with the
/// call, one of the host's cannot be reached) and PID.
const NAMESPACES: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWPID;

/// New namespaces ([`NAMESPACES`]), with this process's user and group
/// mapped to themselves.
unsafe fn enter_namespaces(uid_map: &CStr, gid_map: &CStr) -> io::Result<()> {
    unsafe {
        check(libc::unshare(NAMESPACES))?;
        write_file(c"/proc/self/setgroups", c"deny")?;
        write_file(c"/proc/self/uid_map", uid_map)?;
        write_file(c"/proc/self/gid_map", gid_map)
    }
}

unsafe fn write_file(path: &CStr, text: &CStr) -> io::Result<()> {
    unsafe {
        let fd = check(libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC))?;
        let bytes = text.to_bytes();
        let n = libc::write(fd, bytes.as_ptr() as *const libc::c_void, bytes.len());
        let err = io::Error::last_os_error();
        libc::close(fd);
        if n != bytes.len() as isize {
            return Err(err);
        }
        Ok(())
    }
}

/// A devpts instance of its own at `/dev/pts`.
unsafe fn mount_devpts() -> io::Result<()> {
    unsafe {
        check(libc::mount(
            c"devpts".as_ptr(),
            c"/dev/pts".as_ptr(),
            c"devpts".as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"newinstance,ptmxmode=0666,mode=0620".as_ptr() as *const libc::c_void,
        ))?;
        Ok(())
    }
}

unsafe fn mount_op(op: &Op) -> io::Result<()> {
    let none = std::ptr::null::<libc::c_char>();
    let ro_tmpfs = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    unsafe {
        match op {
            Op::Cover {
                dir,
                skeleton,
                flags,
                keep,
            } => {
                // Opened here, in the new mount namespace (see Expose).
                let mut held = [-1 as libc::c_int; MAX_KEEP];
                for (i, k) in keep.iter().enumerate() {
                    held[i] = check(libc::open(k.as_ptr(), libc::O_PATH | libc::O_CLOEXEC))?;
                }
                check(libc::mount(
                    skeleton.as_ptr(),
                    dir.as_ptr(),
                    none,
                    libc::MS_BIND,
                    std::ptr::null(),
                ))?;
                check(libc::mount(
                    none,
                    dir.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags,
                    std::ptr::null(),
                ))?;
                for (i, k) in keep.iter().enumerate() {
                    let mut source = [0u8; 32];
                    fd_path(held[i], &mut source);
                    let bound = libc::mount(
                        source.as_ptr() as *const libc::c_char,
                        k.as_ptr(),
                        none,
                        libc::MS_BIND | libc::MS_REC,
                        std::ptr::null(),
                    );
                    let err = io::Error::last_os_error();
                    libc::close(held[i]);
                    if bound < 0 {
                        return Err(err);
                    }
                }
            }
            Op::HideDir(p) => {
                check(libc::mount(
                    c"tmpfs".as_ptr(),
                    p.as_ptr(),
                    c"tmpfs".as_ptr(),
                    ro_tmpfs,
                    c"size=4k,mode=0555".as_ptr() as *const libc::c_void,
                ))?;
            }
            Op::HideFile(p) => {
                check(libc::mount(
                    c"/dev/null".as_ptr(),
                    p.as_ptr(),
                    none,
                    libc::MS_BIND,
                    std::ptr::null(),
                ))?;
            }
            Op::ReadOnly(p, flags) => {
                check(libc::mount(
                    p.as_ptr(),
                    p.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ))?;
                check(libc::mount(
                    none,
                    p.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags,
                    std::ptr::null(),
                ))?;
            }
            Op::Bind(from, to) => {
                check(libc::mount(
                    from.as_ptr(),
                    to.as_ptr(),
                    none,
                    libc::MS_BIND,
                    std::ptr::null(),
                ))?;
            }
            Op::Expose {
                store,
                mkdirs,
                target,
            } => {
                // Opened here, in the new mount namespace: a bind from a
                // mount of another namespace is refused (EINVAL).
                let held = check(libc::open(
                    target.as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                ))?;
                let mut source = [0u8; 32];
                fd_path(held, &mut source);
                check(libc::mount(
                    c"tmpfs".as_ptr(),
                    store.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    c"size=64k,mode=0755".as_ptr() as *const libc::c_void,
                ))?;
                for d in mkdirs {
                    check(libc::mkdir(d.as_ptr(), 0o755))?;
                }
                let bound = libc::mount(
                    source.as_ptr() as *const libc::c_char,
                    target.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                );
                let err = io::Error::last_os_error();
                libc::close(held);
                if bound < 0 {
                    return Err(err);
                }
                check(libc::mount(
                    none,
                    store.as_ptr(),
                    none,
                    libc::MS_REMOUNT | ro_tmpfs,
                    std::ptr::null(),
                ))?;
            }
        }
    }
    Ok(())
}

/// `/proc/self/fd/N` as a NUL-terminated string, without allocating.
fn fd_path(fd: libc::c_int, out: &mut [u8; 32]) {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    out[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut digits = [0u8; 11];
    let mut n = fd.unsigned_abs();
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        out[PREFIX.len() + i] = digits[len - 1 - i];
    }
    out[PREFIX.len() + len] = 0;
}

/// Bring up the namespace's own loopback (it starts down).
unsafe fn loopback_up() -> io::Result<()> {
    unsafe {
        let fd = check(libc::socket(
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
        ))?;
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (d, s) in ifr.ifr_name.iter_mut().zip(b"lo\0") {
            *d = *s as libc::c_char;
        }
        ifr.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        let rc = libc::ioctl(fd, libc::SIOCSIFFLAGS, &ifr);
        let err = io::Error::last_os_error();
        libc::close(fd);
        if rc < 0 {
            return Err(err);
        }
        Ok(())
    }
}

/// Close every descriptor but `keep`.
unsafe fn close_all_but(keep: libc::c_int) {
    unsafe {
        for fd in 0..3 {
            if fd != keep {
                libc::close(fd);
            }
        }
        if keep > 3 {
            libc::syscall(libc::SYS_close_range, 3u32, (keep - 1) as u32, 0u32);
        }
        libc::syscall(
            libc::SYS_close_range,
            (keep + 1).max(3) as u32,
            u32::MAX,
            0u32,
        );
    }
}

/// The relay: wait for init, then end as the program did.
unsafe fn relay(init: libc::pid_t, status_pipe: libc::c_int) -> ! {
    unsafe {
        close_all_but(status_pipe);
        let mut status = 0;
        loop {
            let rc = libc::waitpid(init, &mut status, 0);
            if rc == init {
                break;
            }
            if rc < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(126);
            }
        }
        let mut program: libc::c_int = 0;
        let n = libc::read(
            status_pipe,
            &mut program as *mut _ as *mut libc::c_void,
            std::mem::size_of::<libc::c_int>(),
        );
        if n == std::mem::size_of::<libc::c_int>() as isize {
            status = program;
        }
        mirror(status)
    }
}

/// Exit with the same code, or die of the same signal.
unsafe fn mirror(status: libc::c_int) -> ! {
    unsafe {
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

/// PID 1: reap everything; when the program ends, report and exit (which
/// kills the rest of the namespace).
unsafe fn init_loop(program: libc::pid_t, status_pipe: libc::c_int) -> ! {
    unsafe {
        close_all_but(status_pipe);
        loop {
            let mut status = 0;
            let rc = libc::waitpid(-1, &mut status, 0);
            if rc == program {
                libc::write(
                    status_pipe,
                    &status as *const _ as *const libc::c_void,
                    std::mem::size_of::<libc::c_int>(),
                );
                libc::_exit(0);
            }
            if rc < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(126);
            }
        }
    }
}

/// The cmsg buffer: room for [`MAX_LISTENERS`] descriptors, aligned.
#[repr(C, align(8))]
struct CmsgBuf([u8; 128]);

/// One message of one byte with room for descriptors: the pieces live in
/// `frame`, which must not move while `msg` is used.
struct Frame {
    buf: CmsgBuf,
    byte: [u8; 1],
    iov: libc::iovec,
    msg: libc::msghdr,
}

impl Frame {
    /// Fill `self` as a message with `control` bytes of control data.
    ///
    /// # Safety
    /// `self` must stay where it is while `self.msg` is used.
    unsafe fn point(&mut self, control: usize) {
        self.iov = libc::iovec {
            iov_base: self.byte.as_mut_ptr() as *mut libc::c_void,
            iov_len: 1,
        };
        self.msg.msg_iov = &mut self.iov;
        self.msg.msg_iovlen = 1;
        self.msg.msg_control = self.buf.0.as_mut_ptr() as *mut libc::c_void;
        self.msg.msg_controllen = control as _;
    }

    fn new() -> Frame {
        // SAFETY: iovec and msghdr are plain C structs; all zeroes is valid.
        unsafe {
            Frame {
                buf: CmsgBuf([0; 128]),
                byte: [0],
                iov: std::mem::zeroed(),
                msg: std::mem::zeroed(),
            }
        }
    }
}

unsafe fn send_fds(chan: libc::c_int, fds: &[libc::c_int]) -> io::Result<()> {
    unsafe {
        let mut f = Frame::new();
        let data_len = std::mem::size_of_val(fds) as libc::c_uint;
        f.point(libc::CMSG_SPACE(data_len) as usize);
        let cmsg = libc::CMSG_FIRSTHDR(&f.msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(data_len) as _;
        std::ptr::copy_nonoverlapping(
            fds.as_ptr() as *const u8,
            libc::CMSG_DATA(cmsg),
            data_len as usize,
        );
        check(libc::sendmsg(chan, &f.msg, 0))?;
        Ok(())
    }
}

/// Receive the `n` descriptors the child sent (they are queued by the time
/// the spawn returned, so this does not wait).
pub(crate) fn receive_fds(chan: libc::c_int, n: usize) -> io::Result<Vec<OwnedFd>> {
    // SAFETY: recvmsg writes into buffers we own and sized; the descriptors
    // it returns are new and owned by no one else.
    unsafe {
        let mut f = Frame::new();
        f.point(f.buf.0.len());
        let msg = &mut f.msg;
        let rc = libc::recvmsg(chan, msg, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC);
        if rc < 0 {
            return Err(io::Error::other(format!(
                "the sandbox did not hand over its listeners: {}",
                io::Error::last_os_error()
            )));
        }
        let mut out = Vec::new();
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let count = bytes / std::mem::size_of::<libc::c_int>();
                let data = libc::CMSG_DATA(cmsg) as *const libc::c_int;
                for i in 0..count {
                    out.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
        if out.len() != n {
            return Err(io::Error::other(format!(
                "the sandbox handed over {} listeners, not {n}",
                out.len()
            )));
        }
        Ok(out)
    }
}

/// The namespace steps of a sandboxed spawn, tried in a forked child of the
/// probe: 0 when all work, else `step << 5 | errno` (errno 31: another).
///
/// # Safety
/// Call only in a child just forked; it makes system calls only.
pub(crate) unsafe fn probe_steps(uid_map: &CStr, gid_map: &CStr) -> i32 {
    let code = |step: i32| {
        let e = io::Error::last_os_error().raw_os_error().unwrap_or(31);
        step << 5 | if e > 0 && e < 31 { e } else { 31 }
    };
    unsafe {
        if libc::unshare(NAMESPACES) != 0 {
            return code(1);
        }
        if write_file(c"/proc/self/setgroups", c"deny").is_err()
            || write_file(c"/proc/self/uid_map", uid_map).is_err()
            || write_file(c"/proc/self/gid_map", gid_map).is_err()
        {
            return code(2);
        }
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return code(3);
        }
        if libc::mount(
            c"tmpfs".as_ptr(),
            c"/tmp".as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            std::ptr::null(),
        ) != 0
        {
            return code(4);
        }
        if loopback_up().is_err() {
            return code(5);
        }
        let pid = libc::fork();
        if pid < 0 {
            return code(6);
        }
        if pid == 0 {
            libc::_exit(0);
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        if mount_devpts().is_err() {
            return code(7);
        }
        0
    }
}
