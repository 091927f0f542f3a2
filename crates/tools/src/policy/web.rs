//! URL and address checks for the web tools, and the per-minute rate limiter.
//!
//! What this is for: deciding whether `web_fetch` may contact a URL. A URL must be
//! http(s), carry no credentials, name a host the policy's `allow_domains` covers,
//! and — this is the SSRF guard — not reach a private, loopback, link-local,
//! CGNAT, multicast or otherwise non-public address, whether the URL spells the
//! address directly (`http://[::ffff:127.0.0.1]`, `http://0x7f.1`, `http://2130706433`:
//! the WHATWG parser in `url` normalises those to the address they mean), through a
//! local-looking name (`localhost`, `*.internal`, a single-label intranet name), or
//! through DNS (checked by the fetcher on the addresses it is about to connect to,
//! then pinned so a second lookup cannot rebind). Only a host named *exactly* in
//! `allow_domains` (`"127.0.0.1"`, `"localhost:8080"`) may be non-public; `"*"`
//! never covers them.
//!
//! What it is not: a fetcher. It holds no client and does no I/O.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use url::{Host, Url};

/// One entry of `allow_domains`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainPattern {
    pub source: String,
    kind: DomainKind,
}

/// An `allow_domains` entry (or a `--allow web_fetch:` host) that is not a
/// host pattern; each holds the entry as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    #[error(
        "allow_domains entry {0:?} must be a host name (like \"docs.rs\" or \"*.github.com\"), not a URL"
    )]
    Url(String),
    #[error("allow_domains entry {0:?} is not a valid pattern")]
    Pattern(String),
    #[error("allow_domains entry {0:?}: `*` may only be the whole entry or a leading `*.`")]
    Wildcard(String),
    #[error("allow_domains entry {0:?} is not a host[:port]")]
    HostPort(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DomainKind {
    /// `*`: every public host.
    Any,
    /// `*.example.com`: subdomains of example.com (not example.com itself).
    Suffix(String),
    /// `example.com`, `127.0.0.1:8080`, `[::1]`: this host (and port, when given).
    Exact { host: String, port: Option<u16> },
}

impl DomainPattern {
    pub fn parse(raw: &str) -> Result<DomainPattern, DomainError> {
        let t = raw.trim().to_ascii_lowercase();
        let bad = |why: fn(String) -> DomainError| why(raw.to_owned());
        if t.contains("://") || t.contains('/') {
            return Err(bad(DomainError::Url));
        }
        let kind = if t == "*" {
            DomainKind::Any
        } else if let Some(rest) = t.strip_prefix("*.") {
            if rest.is_empty() || rest.contains('*') {
                return Err(bad(DomainError::Pattern));
            }
            DomainKind::Suffix(rest.trim_end_matches('.').to_owned())
        } else if t.contains('*') {
            return Err(bad(DomainError::Wildcard));
        } else {
            let (host, port) = split_host_port(&t).ok_or_else(|| bad(DomainError::HostPort))?;
            DomainKind::Exact { host, port }
        };
        Ok(DomainPattern {
            source: raw.to_owned(),
            kind,
        })
    }

    pub(crate) fn covers(&self, host: &str, port: u16) -> bool {
        match &self.kind {
            DomainKind::Any => true,
            DomainKind::Suffix(s) => host.len() > s.len() + 1 && host.ends_with(&format!(".{s}")),
            DomainKind::Exact { .. } => self.names_exactly(host, port),
        }
    }

    /// True when this entry names `host` (and `port`, if the entry has one)
    /// literally: the only way a non-public address becomes reachable.
    fn names_exactly(&self, host: &str, port: u16) -> bool {
        match &self.kind {
            DomainKind::Exact { host: h, port: p } => h == host && p.is_none_or(|p| p == port),
            _ => false,
        }
    }
}

fn split_host_port(t: &str) -> Option<(String, Option<u16>)> {
    if let Some(rest) = t.strip_prefix('[') {
        let end = rest.find(']')?;
        let host = rest[..end].to_owned();
        let tail = &rest[end + 1..];
        let port = match tail.strip_prefix(':') {
            Some(p) => Some(p.parse().ok()?),
            None if tail.is_empty() => None,
            None => return None,
        };
        host.parse::<Ipv6Addr>().ok()?;
        return Some((host, port));
    }
    match t.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => {
            Some((h.trim_end_matches('.').to_owned(), Some(p.parse().ok()?)))
        }
        Some(_) => t.parse::<Ipv6Addr>().ok().map(|_| (t.to_owned(), None)),
        None => Some((t.trim_end_matches('.').to_owned(), None)),
    }
}

/// The host of a URL as patterns see it: lowercase, no trailing dot, IPv6
/// without brackets.
pub fn host_key(url: &Url) -> Option<String> {
    Some(match url.host()? {
        Host::Domain(d) => d.trim_end_matches('.').to_ascii_lowercase(),
        Host::Ipv4(a) => a.to_string(),
        Host::Ipv6(a) => a.to_string(),
    })
}

/// The verdict on a URL before any network I/O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlVerdict {
    /// Lowercase host, for pinning DNS answers.
    pub host: String,
    /// The host was named exactly in `allow_domains`: non-public addresses are
    /// allowed for it.
    pub named: bool,
}

/// Why a URL is refused: (rule, reason), in the gate's words.
pub type Refusal = (String, String);

/// Check a URL against `allow_domains` (`None`: no list, i.e. every public host
/// when `default_deny` is false) and the static SSRF rules. `label` is the
/// section name for messages (`web_fetch`).
pub fn check_url(
    url: &Url,
    domains: Option<&[DomainPattern]>,
    default_deny: bool,
    label: &str,
) -> Result<UrlVerdict, Refusal> {
    let shown = url.as_str();
    if !matches!(url.scheme(), "http" | "https") {
        return Err((
            format!("{label}: only http and https"),
            format!("`{shown}` uses the {} scheme", url.scheme()),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err((
            format!("{label}: no credentials in URLs"),
            format!("`{shown}` carries a user name or password"),
        ));
    }
    let Some(host) = host_key(url) else {
        return Err((format!("{label}: URL has no host"), shown.to_owned()));
    };
    let port = url.port_or_known_default().unwrap_or(0);
    let named = domains.is_some_and(|d| d.iter().any(|p| p.names_exactly(&host, port)));
    // The SSRF rules first: for a private target that is the reason worth
    // giving, whatever allow_domains says.
    if !named {
        let literal = match url.host() {
            Some(Host::Ipv4(a)) => Some(IpAddr::V4(a)),
            Some(Host::Ipv6(a)) => Some(IpAddr::V6(a)),
            _ => None,
        };
        if let Some(ip) = literal {
            if let Some(why) = non_public(ip) {
                return Err(ssrf_refusal(label, &host, &format!("{ip} is {why}")));
            }
        } else if let Some(why) = local_name(&host) {
            return Err(ssrf_refusal(label, &host, why));
        }
    }
    match domains {
        Some(list) if !list.is_empty() && !list.iter().any(|p| p.covers(&host, port)) => {
            return Err((
                format!("{label}.allow_domains"),
                format!("`{host}` is not in allow_domains"),
            ));
        }
        Some(list) if !list.is_empty() => {}
        _ if default_deny => {
            return Err((
                "default_deny = true".to_owned(),
                format!(
                    "[{label}] has no allow_domains, so no host is allowed (asked for `{host}`)"
                ),
            ));
        }
        _ => {}
    }
    Ok(UrlVerdict { host, named })
}

/// Check the addresses a host resolved to (unless it was named explicitly).
pub fn check_addrs(label: &str, verdict: &UrlVerdict, addrs: &[IpAddr]) -> Result<(), Refusal> {
    if verdict.named {
        return Ok(());
    }
    if addrs.is_empty() {
        return Err((
            format!("{label}: host did not resolve"),
            format!("`{}` has no addresses", verdict.host),
        ));
    }
    for ip in addrs {
        if let Some(why) = non_public(*ip) {
            return Err(ssrf_refusal(
                label,
                &verdict.host,
                &format!("it resolves to {ip}, which is {why}"),
            ));
        }
    }
    Ok(())
}

fn ssrf_refusal(label: &str, host: &str, why: &str) -> Refusal {
    (
        format!("{label}: private and local addresses are refused"),
        format!(
            "`{host}`: {why}; name it exactly in [{label}] allow_domains if this is really wanted"
        ),
    )
}

/// Names that mean "this machine or this network" without DNS.
fn local_name(host: &str) -> Option<&'static str> {
    const SUFFIXES: &[&str] = &[
        ".localhost",
        ".local",
        ".localdomain",
        ".internal",
        ".home.arpa",
        ".lan",
        ".intranet",
        ".corp",
    ];
    if matches!(
        host,
        "localhost" | "localhost.localdomain" | "ip6-localhost" | "ip6-loopback" | "broadcasthost"
    ) {
        return Some("a loopback name");
    }
    if SUFFIXES.iter().any(|s| host.ends_with(s)) {
        return Some("a local-network name");
    }
    if !host.contains('.') {
        // A single label resolves through the search domains to some internal
        // host (`metadata`, `intranet`), never to the public web.
        return Some("a single-label (intranet) name");
    }
    None
}

/// Why an address is not on the public internet, or `None` when it is.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(a) => non_public_v4(a),
        IpAddr::V6(a) => non_public_v6(a),
    }
}

fn non_public_v4(a: Ipv4Addr) -> Option<&'static str> {
    let o = a.octets();
    let why = if a.is_unspecified() || o[0] == 0 {
        "unspecified (\"this network\")"
    } else if a.is_loopback() {
        "loopback"
    } else if a.is_private() {
        "private"
    } else if a.is_link_local() {
        "link-local (cloud metadata lives here)"
    } else if o[0] == 100 && (o[1] & 0xC0) == 64 {
        "shared address space (CGNAT)"
    } else if a.is_multicast() {
        "multicast"
    } else if a.is_broadcast() || o[0] >= 240 {
        "reserved"
    } else if a.is_documentation() || (o[0] == 198 && (o[1] & 0xFE) == 18) {
        "reserved for documentation or benchmarking"
    } else if o[0] == 192 && o[1] == 0 && o[2] == 0 {
        "IETF protocol assignments"
    } else if o[0] == 192 && o[1] == 88 && o[2] == 99 {
        "6to4 relay anycast"
    } else {
        return None;
    };
    Some(why)
}

fn non_public_v6(a: Ipv6Addr) -> Option<&'static str> {
    let s = a.segments();
    if let Some(v4) = a.to_ipv4_mapped() {
        return non_public_v4(v4).map(|_| "an IPv4-mapped form of a non-public address");
    }
    let why = if a.is_unspecified() {
        "unspecified"
    } else if a.is_loopback() {
        "loopback"
    } else if (s[0] & 0xFFC0) == 0xFE80 || (s[0] & 0xFFC0) == 0xFEC0 {
        "link-local or site-local"
    } else if (s[0] & 0xFE00) == 0xFC00 {
        "unique local (private)"
    } else if (s[0] & 0xFF00) == 0xFF00 {
        "multicast"
    } else if s[0] == 0x2001 && s[1] == 0x0DB8 {
        "reserved for documentation"
    } else if s[0] == 0 && s[1] == 0 && s[2] == 0 && s[3] == 0 && s[4] == 0 && s[5] == 0 {
        // ::a.b.c.d, the deprecated IPv4-compatible form.
        "an IPv4-compatible form"
    } else if s[0] == 0x0064 && s[1] == 0xFF9B {
        // NAT64 embeds an IPv4 address; judge that one.
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        return non_public_v4(v4).map(|_| "a NAT64 form of a non-public address");
    } else if s[0] == 0x2002 {
        // 6to4 embeds an IPv4 address in the next 32 bits.
        let v4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        return non_public_v4(v4).map(|_| "a 6to4 form of a non-public address");
    } else if s[0] == 0x2001 && s[1] == 0 {
        "Teredo (tunnels to arbitrary IPv4)"
    } else if s[0] == 0x0100 && s[1] == 0 && s[2] == 0 && s[3] == 0 {
        "discard-only"
    } else {
        return None;
    };
    Some(why)
}

/// A sliding one-minute window per tool: at most `limit` calls in any 60 s.
#[derive(Debug, Default)]
pub struct RateLimiter {
    windows: Mutex<HashMap<String, VecDeque<Instant>>>,
}

/// The window the limit applies to.
pub const RATE_WINDOW: Duration = Duration::from_secs(60);

impl RateLimiter {
    /// Record a call to `key` at `now` if fewer than `limit` calls happened in
    /// the last minute; otherwise say how long until one slot frees up.
    pub fn try_acquire(&self, key: &str, limit: u32, now: Instant) -> Result<(), Duration> {
        let mut map = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let q = map.entry(key.to_owned()).or_default();
        while let Some(&front) = q.front() {
            if now.saturating_duration_since(front) >= RATE_WINDOW {
                q.pop_front();
            } else {
                break;
            }
        }
        if q.len() >= limit as usize {
            let oldest = q.front().copied().unwrap_or(now);
            return Err(RATE_WINDOW.saturating_sub(now.saturating_duration_since(oldest)));
        }
        q.push_back(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, domains: &[&str]) -> Result<UrlVerdict, Refusal> {
        let pats: Vec<DomainPattern> = domains
            .iter()
            .map(|d| DomainPattern::parse(d).unwrap())
            .collect();
        let url = Url::parse(url).unwrap();
        check_url(&url, Some(&pats), true, "web_fetch")
    }

    #[test]
    fn numeric_forms_are_normalised_and_refused() {
        for u in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[fe80::1]/",
            "http://100.64.0.1/",
            "http://0.0.0.0/",
            "http://[64:ff9b::a00:1]/",
            "http://[2002:c0a8:1::]/",
            "http://localhost/",
            "http://LOCALHOST./",
            "http://foo.localhost/",
            "http://metadata.google.internal/",
            "http://intranet/",
        ] {
            assert!(check(u, &["*"]).is_err(), "{u} should be refused");
        }
    }

    #[test]
    fn named_hosts_may_be_private() {
        assert!(check("http://127.0.0.1:8080/x", &["127.0.0.1"]).is_ok());
        assert!(check("http://127.0.0.1:8080/x", &["127.0.0.1:8080"]).is_ok());
        assert!(check("http://127.0.0.1:9090/x", &["127.0.0.1:8080"]).is_err());
        assert!(check("http://[::1]:8080/x", &["[::1]"]).is_ok());
        assert!(check("http://localhost/", &["localhost"]).is_ok());
    }

    #[test]
    fn domain_patterns() {
        assert!(check("https://docs.rs/x", &["docs.rs"]).is_ok());
        assert!(check("https://api.github.com/x", &["*.github.com"]).is_ok());
        assert!(check("https://github.com/x", &["*.github.com"]).is_err());
        assert!(check("https://evilgithub.com/x", &["*.github.com"]).is_err());
        assert!(check("https://example.com/", &["docs.rs"]).is_err());
        assert!(check("ftp://example.com/", &["*"]).is_err());
        assert!(check("file:///etc/passwd", &["*"]).is_err());
        assert!(check("https://user:pw@example.com/", &["*"]).is_err());
        assert!(DomainPattern::parse("https://x.com").is_err());
        assert!(DomainPattern::parse("a*b.com").is_err());
    }

    #[test]
    fn resolved_addresses_are_checked() {
        let v = check("https://example.com/", &["*"]).unwrap();
        assert!(check_addrs("web_fetch", &v, &["93.184.216.34".parse().unwrap()]).is_ok());
        assert!(check_addrs("web_fetch", &v, &["10.0.0.1".parse().unwrap()]).is_err());
        assert!(check_addrs("web_fetch", &v, &[]).is_err());
    }

    #[test]
    fn rate_limit_slides() {
        let r = RateLimiter::default();
        let t0 = Instant::now();
        assert!(r.try_acquire("web_fetch", 2, t0).is_ok());
        assert!(
            r.try_acquire("web_fetch", 2, t0 + Duration::from_secs(1))
                .is_ok()
        );
        let wait = r
            .try_acquire("web_fetch", 2, t0 + Duration::from_secs(2))
            .unwrap_err();
        assert_eq!(wait, Duration::from_secs(58));
        assert!(
            r.try_acquire("web_fetch", 2, t0 + Duration::from_secs(60))
                .is_ok()
        );
        assert!(r.try_acquire("other", 2, t0).is_ok());
    }
}
