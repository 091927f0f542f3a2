//! How long tasks live and how often clients poll them: `[mcp]
//! task_poll_interval` and `task_ttl`, the same for both generations of tasks
//! ([`super::tasks`], [`super::tasks_v1`]), which both read it from here.

use std::time::Duration;

use super::McpServer;

/// What every task of this server reports, in both generations
/// ([`super::tasks`] builds the 2026 handles with it): `pollInterval` from
/// `[mcp] task_poll_interval`, `ttl` from `[mcp] task_ttl` (`None`: no
/// expiry). The server's TTL is the task's, whatever a client asks for
/// (receivers may override a requested `ttl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub poll_interval_ms: u64,
    pub ttl_ms: Option<u64>,
}

impl Timing {
    fn of(mcp: &agentfile_config::McpSection) -> Timing {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Timing {
            poll_interval_ms: ms(mcp.task_poll_interval()).max(1),
            ttl_ms: mcp.task_ttl().map(ms),
        }
    }
}

/// This process's [`Timing`], read from the server's config once (a server
/// process has one gateway, one config).
pub fn timing(server: &McpServer) -> Timing {
    static TIMING: std::sync::OnceLock<Timing> = std::sync::OnceLock::new();
    *TIMING.get_or_init(|| {
        let mcp = server
            .gateway
            .default_config()
            .map(|c| c.mcp)
            .unwrap_or_default();
        Timing::of(&mcp)
    })
}

/// Whether task `meta` ended more than the TTL ago: it then answers as an
/// unknown task (`tasks/get`, `tasks/result`, `tasks/list` leave it out),
/// while its session stays in the store.
pub fn expired(server: &McpServer, meta: &agentfile_session::SessionMeta) -> bool {
    let Some(ttl) = timing(server).ttl_ms else {
        return false;
    };
    meta.status.is_terminal() && ended_before(&meta.updated_at, ttl, std::time::SystemTime::now())
}

/// Whether `updated_at` (RFC 3339 UTC as the stores write it: fixed width,
/// so string order is time order) lies more than `ttl_ms` before `now`.
fn ended_before(updated_at: &str, ttl_ms: u64, now: std::time::SystemTime) -> bool {
    now.checked_sub(Duration::from_millis(ttl_ms))
        .is_some_and(|cutoff| updated_at < agentfile_wire::events::rfc3339(cutoff).as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_expires_once_its_ttl_has_passed_since_it_ended() {
        let now = humantime::parse_rfc3339("2026-11-26T12:00:00Z").unwrap();
        assert!(ended_before("2026-11-26T11:58:59.999Z", 60_000, now));
        assert!(!ended_before("2026-11-26T11:59:00.000Z", 60_000, now));
        assert!(!ended_before("2026-11-26T11:59:30.000Z", 60_000, now));
        let mcp = agentfile_config::McpSection::default();
        assert_eq!(
            Timing::of(&mcp),
            Timing {
                poll_interval_ms: 1_000,
                ttl_ms: None
            }
        );
    }
}
