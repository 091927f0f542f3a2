//! The Landlock ruleset: read and execute everywhere, write only beneath the
//! writable roots. Built once per run in the parent; each child only calls
//! `landlock_restrict_self` with it.

use std::os::fd::OwnedFd;
use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    Scope, path_beneath_rules,
};

/// The highest ABI these rules were written and tested for: files through
/// ABI 5 (device ioctls) and the scopes of ABI 6 (abstract unix sockets and
/// signals made outside the sandbox).
const ABI_PINNED: ABI = ABI::V6;

/// Devices every program may write: the bit buckets and terminals.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

pub(crate) fn ruleset(writable: &[PathBuf]) -> Result<OwnedFd, String> {
    let abi = ABI_PINNED;
    let fail = |e: &dyn std::fmt::Display| format!("cannot build the Landlock ruleset: {e}");
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| fail(&e))?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(|e| fail(&e))?
        .create()
        .map_err(|e| fail(&e))?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))
        .map_err(|e| fail(&e))?
        .add_rules(path_beneath_rules(DEVICES, AccessFs::from_all(abi)))
        .map_err(|e| fail(&e))?
        .add_rules(path_beneath_rules(writable, AccessFs::from_all(abi)))
        .map_err(|e| fail(&e))?;
    Option::<OwnedFd>::from(created)
        .ok_or_else(|| "Landlock is not enforced by this kernel".to_owned())
}
