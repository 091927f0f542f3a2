//! One owner rule for every door (CONTRACT §18): whether a principal may
//! read or steer a session. MCP (stdio and HTTP: the session tools, tasks),
//! JSON-RPC and the web view at `/ui/` all ask [`Rule::allows`] (through
//! [`Rule::check`] / [`Rule::may`]); none has a rule of its own.
//!
//! The rule:
//! - A session a principal started through a door that knows who is asking
//!   records that principal as its owner, in the session store
//!   ([`SessionStore::principal`], durable, written once with the session
//!   before its run starts, never changed by a resume or by the settings a
//!   caller supplies): an MCP task (any transport: the task's principal),
//!   and on HTTP any run with a bearer token (`run` and `run_<name>`,
//!   blocking or `wait: false`: [`Principal::run_owner`]). Only the owner
//!   may read it (list, show, events, the live stream) or steer it
//!   (approve, signal, cancel, resume); to anyone else it reads as unknown,
//!   exactly as an id that does not exist, so ids cannot be probed.
//! - A session no principal owns (started by the CLI, the daemon, JSON-RPC,
//!   a plain MCP run over stdio or a token-less loopback listener) is the
//!   operator's, and every principal admitted to a listener holds one of the
//!   operator's tokens: it may read and steer such a session, as the MCP
//!   session tools always allowed.
//! - A listener opted in with `[ui] shared = true` lets every principal of
//!   that listener read and steer every session (a team's shared view); the
//!   MCP task methods stay scoped to their token whatever it says.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use agentfile_session::{SessionStore, StoreError};
use sha2::{Digest, Sha256};

/// Who is asking. Its [`Principal::as_str`] is what the store records as a
/// session's owner: stable across restarts and servers. Each door says how
/// it learns it (MCP: `mcp/principal.rs`; HTTP: the bearer token; JSON-RPC
/// on stdio: the local user).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal(String);

impl Principal {
    /// The user this process runs as (stdio: whoever spawned the server).
    pub fn local() -> Principal {
        // SAFETY: getuid cannot fail and has no preconditions.
        let uid = unsafe { libc::getuid() };
        Principal(format!("local:{uid}"))
    }

    /// A client that presented `token` (already checked). Two clients with the
    /// same token are one principal; different tokens never see each other's
    /// sessions. Kept by a digest, never the token itself.
    pub fn token(token: &str) -> Principal {
        let digest = Sha256::digest(token.as_bytes());
        let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
        Principal(format!("token:{hex}"))
    }

    /// An HTTP client on a server with no token configured (loopback only).
    pub fn loopback() -> Principal {
        Principal("loopback".into())
    }

    /// Whether this is a bearer token's principal ([`Principal::token`]).
    pub fn is_token(&self) -> bool {
        self.0.starts_with("token:")
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a request does with a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// List it, show it, read its events, follow its stream.
    Read,
    /// Approve, reject, signal, cancel or resume it.
    Steer,
}

/// The rule of one listener.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    /// `[ui] shared = true`: every principal reads and steers every session.
    pub shared: bool,
}

impl Rule {
    /// The rule of the MCP task methods and session tools, and of JSON-RPC:
    /// never shared.
    pub const OWNED: Rule = Rule { shared: false };

    /// The rule `[ui]` of `config` asks for (`shared = true`, else owned).
    pub fn of_config(config: &agentfile_config::Config) -> Rule {
        let shared = config
            .other
            .get("ui")
            .and_then(|ui| ui.get("shared"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        Rule { shared }
    }

    /// Whether `who` may do `action` with a session whose recorded owner is
    /// `owner` (`None`: no principal owns it).
    pub fn allows(&self, who: &Principal, owner: Option<&str>, action: Action) -> bool {
        // Both actions follow one rule today; the action is part of the
        // question so that a grant of reading alone has a place to go.
        let _ = action;
        match owner {
            None => true,
            Some(_) if self.shared => true,
            Some(o) => o == who.as_str(),
        }
    }

    /// [`Rule::allows`] for session `id` of `store` (blocking: call it off
    /// the async threads). A session that does not exist has no owner to
    /// refuse: the operation itself then says it is unknown, in the same
    /// words as for a session the caller may not see.
    pub fn check(
        &self,
        store: &dyn SessionStore,
        who: &Principal,
        id: &str,
        action: Action,
    ) -> Result<bool, StoreError> {
        let owner = match owner_of(store, id) {
            Ok(o) => o,
            Err(StoreError::NotFound(_) | StoreError::InvalidId(_)) => None,
            Err(e) => return Err(e),
        };
        Ok(self.allows(who, owner.as_deref(), action))
    }

    /// [`Rule::check`] on `store`, off the async threads. A store that
    /// cannot answer (or could not be opened: `None`) denies: the caller
    /// reports the session unknown.
    pub async fn may(
        &self,
        store: Option<Arc<dyn SessionStore>>,
        who: &Principal,
        id: &str,
        action: Action,
    ) -> bool {
        let Some(store) = store else {
            return false;
        };
        let (rule, who, id) = (*self, who.clone(), id.to_owned());
        tokio::task::spawn_blocking(move || rule.check(&*store, &who, &id, action))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(false)
    }

    /// The items (sessions, by `id`) that `who` may read, in order
    /// (blocking).
    pub fn visible<T>(
        &self,
        store: &dyn SessionStore,
        who: &Principal,
        items: Vec<T>,
        id: impl Fn(&T) -> &str,
    ) -> Result<Vec<T>, StoreError> {
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            if self.check(store, who, id(&item), Action::Read)? {
                out.push(item);
            }
        }
        Ok(out)
    }
}

/// The principal recorded as session `id`'s owner, if any (whatever door
/// started it: kept with the session, so it holds across servers and
/// restarts).
pub fn owner_of(store: &dyn SessionStore, id: &str) -> Result<Option<String>, StoreError> {
    store.principal(id)
}

/// Requests or streams open, per principal and in all (`mcp --http`'s POSTs
/// in flight and listen streams, the A2A door's streams and blocking calls).
#[derive(Default)]
pub(crate) struct InFlight {
    counts: Mutex<HashMap<Principal, usize>>,
    settled: Notify,
}

impl InFlight {
    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<Principal, usize>> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Count one more for `who`, unless `who` has `max` open already; the
    /// guard counts it off when dropped.
    pub(crate) fn enter(self: &Arc<Self>, who: &Principal, max: usize) -> Option<Guard> {
        let mut counts = self.counts();
        let n = counts.entry(who.clone()).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Guard {
            in_flight: self.clone(),
            who: who.clone(),
        })
    }

    /// Wait until nothing is open.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.settled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.counts().is_empty() {
                return;
            }
            notified.await;
        }
    }
}

/// One open request or stream of [`InFlight`].
pub(crate) struct Guard {
    in_flight: Arc<InFlight>,
    who: Principal,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let mut counts = self.in_flight.counts();
        if let Some(n) = counts.get_mut(&self.who) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.who);
            }
        }
        drop(counts);
        self.in_flight.settled.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_alone_see_their_sessions_unless_the_listener_is_shared() {
        let (alice, bob) = (Principal::token("alice"), Principal::token("bob"));
        let owned = Rule::OWNED;
        for action in [Action::Read, Action::Steer] {
            assert!(owned.allows(&alice, Some(alice.as_str()), action));
            assert!(!owned.allows(&bob, Some(alice.as_str()), action));
            assert!(owned.allows(&bob, None, action), "the operator's runs");
            assert!(Rule { shared: true }.allows(&bob, Some(alice.as_str()), action));
        }
        let mut c = agentfile_config::Config::default();
        assert_eq!(Rule::of_config(&c), Rule::OWNED);
        c.other
            .insert("ui".into(), serde_json::json!({"shared": true}));
        assert!(Rule::of_config(&c).shared);
    }
}
