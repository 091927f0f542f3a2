//! Who is running a session, and whether they still are.
//!
//! A run killed with `kill -9` (or by the OOM killer, or a power cut) never
//! writes its terminal event, so its session would say `running` forever. To
//! tell such a session from a live one, every store records the session's
//! *owner* — the process that made it `queued` or `running` — and a heartbeat:
//!
//! - the owner is the pid, the host name, and a start token: the boot id, the
//!   pid namespace and the process's start time (in clock ticks since boot), so
//!   a pid the kernel has since given to another process is not mistaken for
//!   the owner, and neither is a pid of another container on the same kernel;
//! - the heartbeat is the time of the owner's last sign of life: its last
//!   event, or the beat a running [`crate::events::EventBus`] writes every
//!   [`HEARTBEAT_INTERVAL`] while a model call keeps the log quiet.
//!
//! A `queued` or `running` session is reported `interrupted` when its owner is
//! gone: on this machine (same boot, same pid namespace) when no live process
//! has that pid and start time; elsewhere, when the heartbeat is older than
//! [`STALE_AFTER`]. [`effective_status`] is that rule; both stores apply it in
//! `get` and `list`, and `reap_orphans` writes it down.
//!
//! What this is not: a lock. Two processes may still append to one session
//! (the store's `seq` check orders them); ownership only answers "is anybody
//! still running this?". The PostgreSQL store, shared by several machines,
//! adds a lease on top of the owner (see [`super::postgres`]).

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::SessionStatus;
use agentfile_wire::events::rfc3339;

/// How often a running bus refreshes its session's heartbeat.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);

/// A heartbeat older than this means the owner on another machine is gone.
/// Six missed beats: a loaded machine or a slow disk does not make a live run
/// look dead.
pub const STALE_AFTER: Duration = Duration::from_secs(60);

/// The process that runs (or queued) a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub pid: u32,
    /// The host name, for people; liveness is decided by `start`.
    pub host: String,
    /// `BOOT_ID/PIDNS/STARTTIME` on Linux: where the pid means something, and
    /// when that process started. Empty where it cannot be known, and then only
    /// the heartbeat tells.
    pub start: String,
}

/// An owner and its last heartbeat (RFC 3339 UTC).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerRecord {
    #[serde(flatten)]
    pub owner: Owner,
    pub heartbeat_at: String,
}

impl Owner {
    /// This process. Computed once: three small reads of `/proc`.
    pub fn current() -> &'static Owner {
        static ME: OnceLock<Owner> = OnceLock::new();
        ME.get_or_init(|| {
            let pid = std::process::id();
            Owner {
                pid,
                host: host_name(),
                start: match (namespace(), start_ticks(pid)) {
                    (Some(ns), Some(t)) => format!("{ns}/{t}"),
                    _ => String::new(),
                },
            }
        })
    }

    /// Whether the owner is alive, when this machine can tell: `None` for an
    /// owner in another boot, pid namespace or machine.
    pub fn is_alive_here(&self) -> Option<bool> {
        let (ns, ticks) = self.start.rsplit_once('/')?;
        let (my_ns, _) = Owner::current().start.rsplit_once('/')?;
        if ns != my_ns {
            return None;
        }
        Some(start_ticks(self.pid).is_some_and(|t| t.to_string() == ticks))
    }
}

/// The status to report for a session stored as `stored`, owned by `owner`
/// (none for sessions written before owners were recorded), last changed at
/// `updated_at`. Only `queued` and `running` can turn into `interrupted`.
pub fn effective_status(
    stored: SessionStatus,
    owner: Option<&OwnerRecord>,
    updated_at: &str,
    now: SystemTime,
) -> SessionStatus {
    if !matches!(stored, SessionStatus::Queued | SessionStatus::Running) {
        return stored;
    }
    if let Some(alive) = owner.and_then(|o| o.owner.is_alive_here()) {
        return if alive {
            stored
        } else {
            SessionStatus::Interrupted
        };
    }
    // Another machine, or no owner recorded: the last sign of life decides.
    let last = match owner {
        Some(o) if o.heartbeat_at.as_str() > updated_at => o.heartbeat_at.as_str(),
        _ => updated_at,
    };
    let threshold = rfc3339(now.checked_sub(STALE_AFTER).unwrap_or(now));
    // Fixed-width RFC 3339 UTC: string order is time order.
    if last < threshold.as_str() {
        SessionStatus::Interrupted
    } else {
        stored
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default()
}

/// `BOOT_ID/PIDNS_INODE`: the scope in which a pid names one process.
fn namespace() -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let ns = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let ns = ns.to_string_lossy();
    let inode: String = ns.chars().filter(char::is_ascii_digit).collect();
    Some(format!("{}/{inode}", boot.trim()))
}

/// Field 22 of `/proc/PID/stat`, the start time in clock ticks after boot;
/// `None` when there is no such process or it is a zombie (dead, not yet
/// reaped by its parent).
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or `)`.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    // `rest` starts at field 3 (the state), so field 22 is 19 further on.
    fields.nth(18)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(owner: Owner, heartbeat_at: &str) -> OwnerRecord {
        OwnerRecord {
            owner,
            heartbeat_at: heartbeat_at.to_owned(),
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn this_process_is_alive_and_a_reused_pid_is_not() {
        let me = Owner::current().clone();
        assert!(!me.start.is_empty(), "{me:?}");
        assert_eq!(me.is_alive_here(), Some(true));
        // Same pid, another start time: a process that merely got our pid.
        let (scope, ticks) = me.start.rsplit_once('/').unwrap();
        let imposter = Owner {
            start: format!("{scope}/{}", ticks.parse::<u64>().unwrap() + 1),
            ..me.clone()
        };
        assert_eq!(imposter.is_alive_here(), Some(false));
        // Another boot or namespace: this machine cannot tell.
        let elsewhere = Owner {
            start: format!("other-boot/1/{ticks}"),
            ..me
        };
        assert_eq!(elsewhere.is_alive_here(), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_dead_pid_is_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let ticks = start_ticks(pid);
        child.wait().unwrap();
        let scope = Owner::current()
            .start
            .rsplit_once('/')
            .unwrap()
            .0
            .to_owned();
        let gone = Owner {
            pid,
            host: "h".into(),
            start: format!("{scope}/{}", ticks.unwrap_or(1)),
        };
        assert_eq!(gone.is_alive_here(), Some(false));
    }

    #[test]
    fn only_live_statuses_turn_interrupted() {
        let now = SystemTime::now();
        let fresh = rfc3339(now);
        let old = rfc3339(now - STALE_AFTER - Duration::from_secs(1));
        let remote = Owner {
            pid: 1,
            host: "elsewhere".into(),
            start: "another-boot/7/100".into(),
        };
        for s in SessionStatus::ALL {
            let got = effective_status(s, Some(&record(remote.clone(), &old)), &old, now);
            let live = matches!(s, SessionStatus::Queued | SessionStatus::Running);
            assert_eq!(got, if live { SessionStatus::Interrupted } else { s });
        }
        // A fresh heartbeat, or fresh events, keep a remote owner alive.
        let r = SessionStatus::Running;
        assert_eq!(
            effective_status(r, Some(&record(remote.clone(), &fresh)), &old, now),
            r
        );
        assert_eq!(
            effective_status(r, Some(&record(remote, &old)), &fresh, now),
            r
        );
        // No owner recorded (an older database): the events' time decides.
        assert_eq!(
            effective_status(r, None, &old, now),
            SessionStatus::Interrupted
        );
        assert_eq!(effective_status(r, None, &fresh, now), r);
    }
}
