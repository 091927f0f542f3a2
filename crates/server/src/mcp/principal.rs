//! Who is asking: the auth context an MCP request runs in, and so the owner of
//! the tasks it starts. On stdio it is the local user; on HTTP it is the
//! bearer token the request carried (by a digest, never the token itself), or
//! "loopback" where no token is configured and only loopback clients can
//! connect. A task is visible only to the principal that started it.

use rmcp::RoleServer;
use rmcp::service::RequestContext;

pub use crate::access::Principal;

impl Principal {
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
