//! What this machine's kernel can enforce, found once per process.
//!
//! Landlock's ABI is asked of the kernel (`landlock_create_ruleset` with the
//! version flag); namespaces are tried for real, in a child that makes the
//! same calls a sandboxed process makes and exits with the step that failed.
//!
//! `AGENTFILE_SANDBOX_SIMULATE` pretends a feature is missing, to see what a
//! run does on such a kernel: a comma-separated list of `no-landlock`,
//! `no-userns`, `no-seccomp`, `no-devpts` (no devpts instance of its own:
//! the sandbox then has no terminals at all) and `no-cgroup` (no writable
//! pids controller: processes are not bounded).

use std::sync::OnceLock;

/// The variable that simulates a kernel lacking a feature.
pub const SIMULATE_VAR: &str = "AGENTFILE_SANDBOX_SIMULATE";

/// What the kernel offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// Landlock's ABI version; 0 when absent.
    pub landlock_abi: i32,
    /// Why Landlock is unusable, when it is.
    pub landlock: Option<String>,
    /// Why unprivileged user, mount, network, IPC and PID namespaces are
    /// unusable.
    pub namespaces: Option<String>,
    /// Why a devpts instance of its own cannot be mounted inside them (the
    /// sandbox then has no terminals).
    pub devpts: Option<String>,
    /// Why seccomp filters are unusable.
    pub seccomp: Option<String>,
    /// Features `AGENTFILE_SANDBOX_SIMULATE` pretended away.
    pub simulated: Vec<String>,
}

impl Probe {
    /// Why the whole sandbox cannot be enforced here, in one line; `None`
    /// when it can. Without namespaces alone a partial one still can
    /// ([`crate::Sandbox::partial`]).
    pub fn unavailable(&self) -> Option<String> {
        let why: Vec<&str> = [&self.landlock, &self.namespaces, &self.seccomp]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        (!why.is_empty()).then(|| why.join("; "))
    }
}

/// The probe of this process (done on first use).
pub fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(run)
}

fn run() -> Probe {
    let simulated: Vec<String> = std::env::var(SIMULATE_VAR)
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    let sim = |what: &str| simulated.iter().any(|s| s == what);
    let (landlock_abi, mut landlock) = landlock_abi();
    if sim("no-landlock") {
        landlock = Some("Landlock is not supported by this kernel (simulated)".into());
    }
    let (mut namespaces, mut devpts) = namespaces();
    if sim("no-userns") {
        namespaces = Some("unprivileged user namespaces are disabled (simulated)".into());
    }
    if sim("no-devpts") {
        devpts = Some("devpts cannot be mounted in a user namespace (simulated)".into());
    }
    if namespaces.is_some() {
        devpts = None;
    }
    let mut seccomp = if crate::filter::supported() {
        seccomp()
    } else {
        Some(format!(
            "the sandbox has no seccomp filter for {}",
            std::env::consts::ARCH
        ))
    };
    if sim("no-seccomp") {
        seccomp = Some("seccomp is not supported by this kernel (simulated)".into());
    }
    Probe {
        landlock_abi: if landlock.is_some() { 0 } else { landlock_abi },
        landlock,
        namespaces,
        devpts,
        seccomp,
        simulated,
    }
}

#[cfg(not(target_os = "linux"))]
fn landlock_abi() -> (i32, Option<String>) {
    (0, Some("not Linux".into()))
}

#[cfg(not(target_os = "linux"))]
fn namespaces() -> (Option<String>, Option<String>) {
    (Some("not Linux".into()), None)
}

#[cfg(not(target_os = "linux"))]
fn seccomp() -> Option<String> {
    Some("not Linux".into())
}

#[cfg(target_os = "linux")]
fn landlock_abi() -> (i32, Option<String>) {
    const VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute and the version flag, the call only
    // returns a number.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            VERSION,
        )
    };
    if abi >= 1 {
        return (abi as i32, None);
    }
    let e = std::io::Error::last_os_error();
    let why = match e.raw_os_error() {
        Some(libc::ENOSYS) => "Landlock is not supported by this kernel (before 5.13, or built without it)".to_owned(),
        Some(libc::EOPNOTSUPP) => {
            "Landlock is built into this kernel but not enabled (add landlock to the lsm= boot parameter)".to_owned()
        }
        _ => format!("Landlock is unusable: {e}"),
    };
    (0, Some(why))
}

#[cfg(target_os = "linux")]
fn seccomp() -> Option<String> {
    // SAFETY: PR_GET_SECCOMP only reads this thread's mode.
    let rc = unsafe { libc::prctl(libc::PR_GET_SECCOMP) };
    if rc < 0 {
        Some("seccomp is not supported by this kernel".to_owned())
    } else {
        None
    }
}

/// Try the namespace steps in a child: why they do not work, and why a
/// devpts instance cannot be mounted (`None`s when all work).
#[cfg(target_os = "linux")]
fn namespaces() -> (Option<String>, Option<String>) {
    use std::ffi::CString;
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let uid_map = CString::new(format!("{uid} {uid} 1")).expect("no NUL");
    let gid_map = CString::new(format!("{gid} {gid} 1")).expect("no NUL");
    let steps = [
        "unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWNET|CLONE_NEWIPC|CLONE_NEWPID)",
        "writing the user namespace's id maps",
        "making the mounts private",
        "mounting a tmpfs",
        "bringing up the loopback interface",
        "starting a PID namespace",
        "mounting a devpts instance",
    ];
    // SAFETY: the child makes only async-signal-safe system calls on data
    // prepared before the fork, then _exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return (
            Some(format!(
                "cannot fork to probe namespaces: {}",
                std::io::Error::last_os_error()
            )),
            None,
        );
    }
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            let code = crate::child::probe_steps(&uid_map, &gid_map);
            libc::_exit(code);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for the child we made.
    let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
    if rc != pid || !libc::WIFEXITED(status) {
        return (Some("the namespace probe died".into()), None);
    }
    let code = libc::WEXITSTATUS(status);
    if code == 0 {
        return (None, None);
    }
    let step = (code >> 5) as usize;
    let errno = code & 31;
    let what = steps.get(step.wrapping_sub(1)).copied().unwrap_or("a step");
    let err = if errno == 31 {
        "an error".to_owned()
    } else {
        std::io::Error::from_raw_os_error(errno).to_string()
    };
    let hint = if step <= 2 {
        " (unprivileged user namespaces are disabled or restricted: see kernel.unprivileged_userns_clone, user.max_user_namespaces, kernel.apparmor_restrict_unprivileged_userns)"
    } else {
        ""
    };
    if step == steps.len() {
        return (None, Some(format!("{what} failed: {err}")));
    }
    (
        Some(format!(
            "namespaces are unusable: {what} failed: {err}{hint}"
        )),
        None,
    )
}
