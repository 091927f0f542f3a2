//! Who may talk to the HTTP listeners (`mcp --http`, the daemon's, `agentfile
//! ui`): the bearer tokens of `AGENTFILE_MCP_TOKEN`, compared as SHA-256
//! digests in constant time, and the origins and `Host` names a page served
//! by this process itself would send (CONTRACT §14, §17).
//!
//! Shared by [`crate::mcp`] and [`crate::ui`], so neither imports the other.

use std::net::SocketAddr;

use http::{HeaderMap, HeaderValue, header};
use sha2::{Digest, Sha256};

/// The variable holding the bearer token(s), comma-separated.
pub const TOKEN_VAR: &str = "AGENTFILE_MCP_TOKEN";

/// The tokens in `AGENTFILE_MCP_TOKEN`'s value: comma-separated, blanks
/// around them ignored, empty ones dropped.
pub fn parse_tokens(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The configured tokens, kept only as digests.
#[derive(Clone, Default)]
pub struct Tokens(Vec<[u8; 32]>);

impl Tokens {
    pub fn new(tokens: &[String]) -> Tokens {
        Tokens(
            tokens
                .iter()
                .map(|t| Sha256::digest(t.as_bytes()).into())
                .collect(),
        )
    }

    /// No token configured: loopback clients only, no login.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `token` is one of them. Every configured token is compared,
    /// each in constant time.
    pub fn accepts(&self, token: &str) -> bool {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut hit = 0u8;
        for t in &self.0 {
            hit |= u8::from(same(t, &digest));
        }
        hit == 1
    }

    /// The token of the request's `Authorization: Bearer` header, whether
    /// or not it is accepted.
    pub fn presented(headers: &HeaderMap) -> Option<&str> {
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer)
    }
}

/// The token of an `Authorization: Bearer <token>` value.
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Byte strings equal, in time that does not depend on where they differ
/// (lengths are not secret).
pub fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The least entropy a token may have, in bits, to guard a listener off
/// loopback: as hard to guess as a random 128-bit key.
pub const MIN_TOKEN_BITS: f64 = 128.0;

/// A conservative estimate of the entropy of `token`, in bits: its length
/// times log2 of the alphabet its characters are drawn from, that alphabet
/// being the character classes it uses (hex digits alone: 16; else lower
/// case 26, upper case 26, digits 10, and each distinct other character
/// once). A person's word scores far higher than it is worth, so this only
/// ever errs towards accepting: it refuses what is certainly too short
/// (`s3cret`: 31 bits), and passes `openssl rand -hex 16` (exactly 128).
pub fn token_bits(token: &str) -> f64 {
    let chars: Vec<char> = token.chars().collect();
    if chars.is_empty() {
        return 0.0;
    }
    let hex = chars.iter().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
        || chars.iter().all(|c| matches!(c, '0'..='9' | 'A'..='F'));
    let alphabet = if hex {
        16
    } else {
        let has = |f: fn(&char) -> bool| chars.iter().any(f);
        let mut others: Vec<char> = chars
            .iter()
            .copied()
            .filter(|c| !c.is_ascii_alphanumeric())
            .collect();
        others.sort_unstable();
        others.dedup();
        26 * usize::from(has(char::is_ascii_lowercase))
            + 26 * usize::from(has(char::is_ascii_uppercase))
            + 10 * usize::from(has(char::is_ascii_digit))
            + others.len()
    };
    if alphabet < 2 {
        return 0.0;
    }
    chars.len() as f64 * (alphabet as f64).log2()
}

/// Whether every token is strong enough for a listener on `bind`: `Err`
/// with the refusal off loopback, `Ok(Some(warning))` on loopback (only
/// this machine's users can guess there, and tests and local scripts use
/// short tokens), `Ok(None)` when all are strong. `what` names the command
/// in the message. Tokens are never spelled out, only numbered.
pub fn check_token_strength(
    tokens: &[String],
    bind: SocketAddr,
    what: &str,
) -> Result<Option<String>, WeakToken> {
    let weak: Vec<String> = tokens
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let bits = token_bits(t);
            (bits + 1e-9 < MIN_TOKEN_BITS)
                .then(|| format!("token {} (about {bits:.0} bits)", i + 1))
        })
        .collect();
    if weak.is_empty() {
        return Ok(None);
    }
    let fix = fix_weak_tokens();
    let which = weak.join(", ");
    if bind.ip().is_loopback() {
        Ok(Some(format!(
            "{what}: warning: {TOKEN_VAR} holds a token too easy to guess: {which}, estimated \
             from length and characters; it is accepted on loopback {bind} only. {fix}"
        )))
    } else {
        Err(WeakToken {
            what: what.to_owned(),
            bind,
            which,
        })
    }
}

/// What to do about a token too easy to guess.
fn fix_weak_tokens() -> String {
    format!(
        "make each at least {MIN_TOKEN_BITS:.0} bits, e.g. `openssl rand -hex 32` (64 hex \
         characters) or `openssl rand -base64 32`"
    )
}

/// A listener off loopback refused: `which` tokens (numbered, never spelled
/// out) are too easy to guess. `what` names the command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what}: refusing to serve {bind} with a token too easy to guess: {which} in \
     {TOKEN_VAR}, estimated from length and characters, where at least \
     {MIN_TOKEN_BITS:.0} are needed off loopback (anyone who can reach the port can \
     try tokens); {fix}",
    TOKEN_VAR = TOKEN_VAR,
    MIN_TOKEN_BITS = MIN_TOKEN_BITS,
    fix = fix_weak_tokens()
)]
pub struct WeakToken {
    pub what: String,
    pub bind: SocketAddr,
    pub which: String,
}

/// The origins a page served by this server itself would send.
pub fn own_origins(local: SocketAddr) -> Vec<String> {
    let port = local.port();
    let mut out = vec![
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
        format!("http://[::1]:{port}"),
    ];
    if !local.ip().is_unspecified() {
        out.push(format!("http://{local}"));
    }
    out
}

/// The canonical form of an `Origin` header's value (`None`: not an origin).
pub fn origin_of(value: &HeaderValue) -> Option<String> {
    let text = value.to_str().ok()?;
    let url = url::Url::parse(text).ok()?;
    let origin = url.origin();
    origin.is_tuple().then(|| origin.ascii_serialization())
}

/// Whether a request's `Host` names this loopback server (`127.0.0.1`,
/// `localhost` or `[::1]`, at its port): a page of another site that a
/// rebound DNS name points here sends its own name, and is refused.
pub fn loopback_host(headers: &HeaderMap, local: SocketAddr) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let host = host.to_ascii_lowercase();
    let port = local.port();
    ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .any(|name| host == format!("{name}:{port}") || (port == 80 && host == *name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_comma_separated() {
        assert_eq!(parse_tokens(" a , b,,c "), ["a", "b", "c"]);
        assert!(parse_tokens(" , ").is_empty());
    }

    #[test]
    fn bearer_tokens_are_read_case_insensitively_and_nothing_else_is() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("Bearerabc"), None);
    }

    #[test]
    fn tokens_are_accepted_only_when_configured() {
        let t = Tokens::new(&["one".into(), "two".into()]);
        assert!(t.accepts("one") && t.accepts("two"));
        assert!(!t.accepts("three") && !t.accepts(""));
        assert!(Tokens::default().is_empty() && !Tokens::default().accepts("one"));
        assert!(same(b"ab", b"ab") && !same(b"ab", b"ac") && !same(b"ab", b"abc"));
    }

    #[test]
    fn tokens_under_128_bits_are_refused_off_loopback_and_warned_of_on_it() {
        assert!(token_bits("s3cret") < 40.0);
        assert!(token_bits("a") < 5.0 && token_bits("") == 0.0);
        assert_eq!(token_bits(&"ab".repeat(16)), 128.0, "32 hex digits");
        assert!(token_bits(&"a1".repeat(15)) < 128.0, "30 hex digits");
        // 22 characters of base64 with every class: 22 × log2(64) = 132.
        assert!(token_bits("Zm9vYmFyYmF6cXV4MTIz+/") > 128.0);
        let (off, on): (SocketAddr, SocketAddr) = (
            "0.0.0.0:80".parse().unwrap(),
            "127.0.0.1:80".parse().unwrap(),
        );
        let strong = "0123456789abcdef".repeat(4);
        let weak = vec![strong.clone(), "hunter2".to_owned()];
        let e = check_token_strength(&weak, off, "agentfile ui")
            .unwrap_err()
            .to_string();
        assert!(e.contains("token 2") && !e.contains("token 1"), "{e}");
        assert!(!e.contains("hunter2") && e.contains("openssl rand"), "{e}");
        let w = check_token_strength(&weak, on, "agentfile ui").unwrap();
        assert!(w.unwrap().contains("warning"));
        assert_eq!(check_token_strength(&[strong], off, "x"), Ok(None));
    }

    #[test]
    fn origins_compare_in_canonical_form() {
        let o = |s: &'static str| origin_of(&HeaderValue::from_static(s));
        assert_eq!(
            o("http://LOCALHOST:8080").as_deref(),
            Some("http://localhost:8080")
        );
        assert_eq!(
            o("https://a.example:443").as_deref(),
            Some("https://a.example")
        );
        assert_eq!(o("null"), None);
        let own = own_origins("127.0.0.1:7000".parse().unwrap());
        assert!(own.contains(&"http://localhost:7000".to_owned()));
        assert!(own.contains(&"http://[::1]:7000".to_owned()));
        assert_eq!(own_origins("0.0.0.0:7000".parse().unwrap()).len(), 3);
    }

    #[test]
    fn only_loopback_names_at_our_port_are_our_host() {
        let local: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        let with = |h: &'static str| {
            let mut m = HeaderMap::new();
            m.insert(header::HOST, HeaderValue::from_static(h));
            loopback_host(&m, local)
        };
        assert!(with("127.0.0.1:7000") && with("LOCALHOST:7000") && with("[::1]:7000"));
        assert!(!with("evil.example:7000") && !with("127.0.0.1:7001") && !with("localhost"));
        assert!(!loopback_host(&HeaderMap::new(), local));
    }
}
