//! A package's name in a registry: `[oci://]HOST[:PORT]/REPO[:TAG][@sha256:…]`.

use std::fmt;

use crate::{Error, Kind, Result, digest_hex};

/// The scheme a workflow path uses to name a package.
pub const SCHEME: &str = "oci://";

/// A reference to a package: a registry, a repository, and a tag or a digest
/// (or both: the digest wins, the tag is only a label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    inner: oci_client::Reference,
}

impl Reference {
    /// Read a reference, with or without `oci://`.
    pub fn parse(text: &str) -> Result<Reference> {
        let bare = text.strip_prefix(SCHEME).unwrap_or(text);
        if bare.is_empty() || bare.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Error::new(
                Kind::Usage,
                format!("`{text}` is not a package reference (HOST/REPOSITORY[:TAG][@sha256:…])"),
            ));
        }
        let inner = parse_reference(bare).map_err(|why| {
            Error::new(
                Kind::Usage,
                format!(
                    "`{text}` is not a package reference (HOST/REPOSITORY[:TAG][@sha256:…]): {why}"
                ),
            )
        })?;
        if let Some(d) = inner.digest()
            && digest_hex(d).is_none()
        {
            return Err(Error::new(
                Kind::Usage,
                format!(
                    "`{text}`: only sha256 digests are accepted (`@sha256:` and 64 hex digits)"
                ),
            ));
        }
        Ok(Reference { inner })
    }

    /// Whether `path` names a package (`oci://…`) rather than a file.
    pub fn is_package(path: &str) -> bool {
        path.starts_with(SCHEME)
    }

    /// The registry's host (and port).
    pub fn registry(&self) -> &str {
        self.inner.resolve_registry()
    }

    pub fn repository(&self) -> &str {
        self.inner.repository()
    }

    pub fn tag(&self) -> Option<&str> {
        self.inner.tag()
    }

    pub fn digest(&self) -> Option<&str> {
        self.inner.digest()
    }

    /// `HOST/REPOSITORY`: what a signature's `docker-reference` names.
    pub fn repository_name(&self) -> String {
        format!("{}/{}", self.inner.registry(), self.inner.repository())
    }

    /// The same repository at `digest`, the tag kept as a label.
    pub fn with_digest(&self, digest: &str) -> Reference {
        let inner = match self.inner.tag() {
            Some(tag) => oci_client::Reference::with_tag_and_digest(
                self.inner.registry().to_owned(),
                self.inner.repository().to_owned(),
                tag.to_owned(),
                digest.to_owned(),
            ),
            None => oci_client::Reference::with_digest(
                self.inner.registry().to_owned(),
                self.inner.repository().to_owned(),
                digest.to_owned(),
            ),
        };
        Reference { inner }
    }

    /// The same repository at another tag (a signature's `sha256-<hex>.sig`).
    pub fn with_tag(&self, tag: &str) -> Reference {
        Reference {
            inner: oci_client::Reference::with_tag(
                self.inner.registry().to_owned(),
                self.inner.repository().to_owned(),
                tag.to_owned(),
            ),
        }
    }

    /// Whether the registry is on this machine (plain HTTP is allowed only
    /// there).
    pub fn is_loopback(&self) -> bool {
        let host = self.registry();
        let host = match host.strip_prefix('[') {
            Some(rest) => rest.split(']').next().unwrap_or(rest),
            None => host.rsplit_once(':').map_or(host, |(h, _)| h),
        };
        host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    pub(crate) fn oci(&self) -> &oci_client::Reference {
        &self.inner
    }
}

/// The distribution reference grammar, read by hand: `oci_client`'s parser
/// compiles a large regular expression on first use, which every run by
/// package paid for (a quarter of a second in a debug build).
fn parse_reference(text: &str) -> std::result::Result<oci_client::Reference, &'static str> {
    let (name_tag, digest) = match text.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (text, None),
    };
    let last_slash = name_tag.rfind('/');
    let (name, tag) = match name_tag.rfind(':') {
        Some(colon) if last_slash.is_none_or(|s| colon > s) => {
            (&name_tag[..colon], Some(&name_tag[colon + 1..]))
        }
        _ => (name_tag, None),
    };
    let (registry, repository) = match name.split_once('/') {
        Some((first, rest))
            if first == "localhost" || first.contains('.') || first.contains(':') =>
        {
            (first.to_owned(), rest.to_owned())
        }
        Some(_) => ("docker.io".to_owned(), name.to_owned()),
        None => ("docker.io".to_owned(), format!("library/{name}")),
    };
    if registry.is_empty()
        || !registry
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
    {
        return Err("the registry is not a host name");
    }
    if repository.is_empty() || repository.len() > 255 || !repository.split('/').all(component) {
        return Err(
            "the repository is lowercase letters, digits and `._-` separators in `/`-separated parts",
        );
    }
    if let Some(t) = tag
        && (t.is_empty()
            || t.len() > 128
            || t.starts_with(['.', '-'])
            || !t
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)))
    {
        return Err("a tag is up to 128 letters, digits and `_.-`, not starting with `.` or `-`");
    }
    if let Some(d) = digest
        && !d.contains(':')
    {
        return Err("a digest is ALGORITHM:HEX");
    }
    Ok(match (tag, digest) {
        (Some(t), Some(d)) => oci_client::Reference::with_tag_and_digest(
            registry,
            repository,
            t.to_owned(),
            d.to_owned(),
        ),
        (None, Some(d)) => oci_client::Reference::with_digest(registry, repository, d.to_owned()),
        (Some(t), None) => oci_client::Reference::with_tag(registry, repository, t.to_owned()),
        (None, None) => oci_client::Reference::with_tag(registry, repository, "latest".to_owned()),
    })
}

/// One path component: `[a-z0-9]+` joined by `.`, `_`, `__` or dashes.
fn component(c: &str) -> bool {
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    !b.is_empty()
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter()
            .all(|&x| alnum(x) || x == b'.' || x == b'_' || x == b'-')
        && !c.contains("..")
        && !c.contains("___")
        && !c.contains("._")
        && !c.contains("_.")
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.inner.registry(), self.inner.repository())?;
        if let Some(t) = self.inner.tag() {
            write!(f, ":{t}")?;
        }
        if let Some(d) = self.inner.digest() {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn references_read_with_and_without_the_scheme() {
        let r = Reference::parse("oci://127.0.0.1:5000/team/demo:1.0").unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "team/demo");
        assert_eq!(r.tag(), Some("1.0"));
        assert!(r.is_loopback());
        assert_eq!(r.to_string(), "127.0.0.1:5000/team/demo:1.0");
        let pinned = r.with_digest(D);
        assert_eq!(
            pinned.to_string(),
            format!("127.0.0.1:5000/team/demo:1.0@{D}")
        );
        assert_eq!(
            Reference::parse(&format!("localhost:5000/demo@{D}"))
                .unwrap()
                .digest(),
            Some(D)
        );
        assert!(!Reference::parse("ghcr.io/a/b:1").unwrap().is_loopback());
    }

    #[test]
    fn bad_references_are_refused_with_the_shape() {
        for bad in ["", "oci://", "a b", "host/Repo:UPPER@md5:00", "x@sha256:00"] {
            let e = Reference::parse(bad).unwrap_err();
            assert_eq!(e.kind, Kind::Usage, "{bad}: {e}");
        }
    }
}
