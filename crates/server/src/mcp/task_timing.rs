//! How long tasks live and how often clients poll them: `[mcp]
//! task_poll_interval` and `task_ttl`, the same for both generations of tasks
//! ([`super::tasks`], [`super::tasks_v1`]), which both read it from here.

use std::time::Duration;

use super::McpServer;

/// What every task of this server reports, in both generations
/// ([`super::tasks`] builds the 2026 handles with it): `pollInterval` from
/// `[mcp] task_poll_interval`, `ttl` from `[mcp] task_ttl` (`None`: no
/// expiry). `task_ttl` is also the bound of a TTL a 2025-11-25 client asks
/// for (`params.task.ttl`, [`Timing::ttl_for`]); the 2026 extension has
/// clients ask for none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub poll_interval_ms: u64,
    pub ttl_ms: Option<u64>,
}

/// The key of the run settings that keeps the TTL a task was given when
/// its client asked for one (unknown to the engine, which ignores it).
pub const TTL_KEY: &str = "mcp_task_ttl_ms";

impl Timing {
    /// The TTL of a task whose client asked for `requested` ms: that, within
    /// the server's bound (`[mcp] task_ttl`; none set: no bound); nothing
    /// asked, the server's own.
    pub fn ttl_for(self, requested: Option<u64>) -> Option<u64> {
        match (requested, self.ttl_ms) {
            (Some(r), Some(bound)) => Some(r.min(bound)),
            (Some(r), None) => Some(r),
            (None, own) => own,
        }
    }

    /// The TTL of a task whose run settings are `settings`: the one it was
    /// given (kept under [`TTL_KEY`], bounded again in case the bound fell
    /// since), else the server's.
    pub fn ttl_of(self, settings: Option<&serde_json::Value>) -> Option<u64> {
        self.ttl_for(settings.and_then(|s| s.get(TTL_KEY)?.as_u64()))
    }

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

/// Whether task `meta`, whose TTL is `ttl_ms`, ended more than that ago: it
/// then answers as an unknown task (`tasks/get`, `tasks/result`,
/// `tasks/list` leave it out), while its session stays in the store.
pub fn expired(ttl_ms: Option<u64>, meta: &agentfile_session::SessionMeta) -> bool {
    let Some(ttl) = ttl_ms else {
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

    #[test]
    fn a_requested_ttl_is_honoured_within_the_bound() {
        let bounded = Timing {
            poll_interval_ms: 1_000,
            ttl_ms: Some(60_000),
        };
        assert_eq!(bounded.ttl_for(Some(1_500)), Some(1_500));
        assert_eq!(bounded.ttl_for(Some(u64::MAX)), Some(60_000));
        assert_eq!(bounded.ttl_for(None), Some(60_000));
        let unbounded = Timing {
            ttl_ms: None,
            ..bounded
        };
        assert_eq!(unbounded.ttl_for(Some(1_500)), Some(1_500));
        assert_eq!(unbounded.ttl_for(None), None);
        let kept = serde_json::json!({TTL_KEY: 90_000, "mcp_tool": "run_x"});
        assert_eq!(bounded.ttl_of(Some(&kept)), Some(60_000));
        assert_eq!(unbounded.ttl_of(Some(&kept)), Some(90_000));
        assert_eq!(bounded.ttl_of(None), Some(60_000));
    }
}
