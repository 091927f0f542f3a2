//! The Landlock ruleset: read and execute everywhere (or, without
//! namespaces to hide paths with, everywhere but the hidden paths), write only
//! beneath the writable roots, and without namespaces, TCP only to the given
//! ports. Built in the parent; each child only calls `landlock_restrict_self`
//! with it.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};

/// The highest ABI these rules ask for: files through ABI 5 (device
/// ioctls), TCP (ABI 4), the scopes of ABI 6 (abstract unix sockets and
/// signals made outside the sandbox), and on kernels with ABI 9 (Linux 7.1)
/// connecting to a named unix socket only beneath the writable folders. On an
/// older kernel what it lacks is left out (best effort), so the rules that
/// hold are those of the kernel's ABI.
const ABI_PINNED: ABI = ABI::V9;

/// Devices every program may write: the bit buckets and terminals. With
/// namespaces `/dev/pts` is a devpts instance of the sandbox's own, whose
/// rule is added inside (a rule on the host's does not hold on a mount over
/// it).
pub(crate) const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/shm",
];

/// Without namespaces the same, the host's `/dev/pts` being left out (and
/// unreadable: the caller hides it).
pub(crate) const DEVICES_NO_PTS: &[&str] = DEVICES;

/// Every file-system access the rulesets handle on a kernel of ABI `abi`,
/// as bits (what best effort leaves of [`ABI_PINNED`]'s).
pub(crate) fn all_access(abi: i32) -> u64 {
    (AccessFs::from_all(ABI_PINNED) & AccessFs::from_all(ABI::from(abi))).bits()
}

/// What is readable.
pub(crate) enum Reads<'a> {
    /// Everything (hidden paths are hidden by mounts).
    All,
    /// Everything but these paths (no mounts to hide them with).
    AllBut(&'a [PathBuf]),
}

/// The most rules the walk around hidden paths makes (a folder beside a
/// hidden path with very many entries is listed, not walked).
const MAX_WALK_RULES: usize = 4096;

/// Why the ruleset could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RulesetError {
    #[error("cannot build the Landlock ruleset: {0}")]
    Build(#[from] landlock::RulesetError),
    #[error("Landlock is not enforced by this kernel")]
    NotEnforced,
}

pub(crate) fn ruleset(
    writable: &[PathBuf],
    reads: Reads<'_>,
    tcp_connect: Option<&[u16]>,
    devices: &[&str],
) -> Result<OwnedFd, RulesetError> {
    let abi = ABI_PINNED;
    let mut base = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))?;
    if tcp_connect.is_some() {
        base = base.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    let mut created = base
        .scope(Scope::AbstractUnixSocket | Scope::Signal)?
        .create()?;
    match reads {
        Reads::All => {
            created = created.add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))?;
        }
        Reads::AllBut(hidden) => {
            let (whole, listed) = around(hidden);
            created = created
                .add_rules(path_beneath_rules(&whole, AccessFs::from_read(abi)))?
                .add_rules(path_beneath_rules(&listed, AccessFs::ReadDir))?;
        }
    }
    created = created
        .add_rules(path_beneath_rules(devices, AccessFs::from_all(abi)))?
        .add_rules(path_beneath_rules(writable, AccessFs::from_all(abi)))?;
    for port in tcp_connect.unwrap_or_default() {
        created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
    }
    Option::<OwnedFd>::from(created).ok_or(RulesetError::NotEnforced)
}

/// The read rules that leave out `hidden`: whole subtrees that hold no hidden
/// path, and the folders on the way to one (listable, their entries judged
/// one by one). Entries made later in such a folder are not readable.
pub(crate) fn around(hidden: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut whole = Vec::new();
    let mut listed = Vec::new();
    walk(Path::new("/"), hidden, &mut whole, &mut listed);
    (whole, listed)
}

fn walk(dir: &Path, hidden: &[PathBuf], whole: &mut Vec<PathBuf>, listed: &mut Vec<PathBuf>) {
    if hidden.iter().any(|h| h == dir) {
        return;
    }
    if !hidden.iter().any(|h| h.starts_with(dir)) {
        whole.push(dir.to_path_buf());
        return;
    }
    listed.push(dir.to_path_buf());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if whole.len() + listed.len() > MAX_WALK_RULES {
            return;
        }
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(&p, hidden, whole, listed),
            // A rule holds on what a link leads to, which has its own place
            // (and may be a pipe, which takes no rule: /dev/stdin).
            Ok(t) if t.is_symlink() => {}
            _ if hidden.contains(&p) => {}
            _ => whole.push(p),
        }
    }
}
