//! Who is asking: the auth context an MCP request runs in, and so the owner of
//! the tasks it starts. On stdio it is the local user; on HTTP it is the
//! bearer token the request carried (by a digest, never the token itself), or
//! "loopback" where no token is configured and only loopback clients can
//! connect. A task is visible only to the principal that started it.

use rmcp::RoleServer;
use rmcp::service::RequestContext;
use sha2::{Digest, Sha256};

/// The auth context of a request. Its [`Principal::as_str`] is what the store
/// records as a task's owner: stable across restarts and servers.
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
    /// tasks.
    pub fn token(token: &str) -> Principal {
        let digest = Sha256::digest(token.as_bytes());
        let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
        Principal(format!("token:{hex}"))
    }

    /// An HTTP client on a server with no token configured (loopback only).
    pub fn loopback() -> Principal {
        Principal("loopback".into())
    }

    /// The principal of a request: what the HTTP front layer put into the
    /// request's HTTP extensions, else the local user (stdio).
    pub fn of(ctx: &RequestContext<RoleServer>) -> Principal {
        ctx.extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
            .cloned()
            .unwrap_or_else(Principal::local)
    }

    /// The owner of a session a plain (not task) run of this request starts:
    /// on HTTP the bearer token's principal, the only door that tells its
    /// callers apart; none on stdio or on a loopback listener without a
    /// token, whose runs stay the operator's (any of the operator's doors
    /// reads and steers them). A task always belongs to [`Principal::of`].
    pub fn run_owner(ctx: &RequestContext<RoleServer>) -> Option<Principal> {
        Some(Self::of(ctx)).filter(Principal::is_token)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_told_apart_and_never_spelled_out() {
        let a = Principal::token("secret-a");
        assert_eq!(a, Principal::token("secret-a"));
        assert_ne!(a, Principal::token("secret-b"));
        assert!(!a.as_str().contains("secret"), "{a}");
        assert_ne!(a, Principal::local());
        assert_ne!(Principal::loopback(), Principal::local());
        assert!(a.is_token());
        assert!(!Principal::local().is_token() && !Principal::loopback().is_token());
    }
}
