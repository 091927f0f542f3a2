//! FROM's base (CONTRACT §20): the base package's boundaries are a ceiling.
//!
//! This crate reads one file: the caller finds the base ([`Bases`], in
//! `agentfile-frontend` over the packages on this machine) and hands back its
//! declaration, checked and lowered. Here the file's own grants are held to
//! it:
//!
//! - a boundary the file does not write is the base's: no TOOL (nor
//!   `COPY … /mnt/tools/…`) → the base's tools; no MOUNT → its mounts; no URL
//!   or `POLICY network` → its hosts; no CRED → its credentials; no SOP → its
//!   SOP; no policy (core `POLICY`, `ALLOW`, `DENY`) → none of its own;
//! - a boundary it writes may only narrow the base's: each tool one the base
//!   declares, each host one a base host covers, each mount within a base
//!   mount (a `rw` one within a base `rw` one), each credential one the base
//!   declares with the same source. Anything wider is an
//!   `agentrc-from-widens` error at the directive that widens;
//! - the base's policies are never merged into the file's: the declaration
//!   carries the base ([`Declaration::base`](agentfile_plan::declared::Declaration::base)),
//!   and the gate asks its grants and policies as a layer of their own, so a
//!   call must be allowed by both.

use agentfile_plan::declared::{Base, Credential, DeclaredTool};
use agentfile_plan::diag::Span;

use crate::Checker;
use crate::syntax::Token;

/// Finds the base a FROM names: the caller reads the package and analyses
/// its Agentfile (which may have a base of its own), this crate only holds
/// the file to it.
pub trait Bases {
    /// The base `reference` names (as FROM writes it, without `oci://`),
    /// checked and lowered; an error says why it cannot be used.
    /// `None`: it names a container image, not an agentfile package, and
    /// there are no boundaries to inherit.
    fn base(
        &self,
        reference: &str,
    ) -> Result<Option<Base>, Box<dyn std::error::Error + Send + Sync>>;
}

/// Whether the base's tool `base` allows the declared tool `child`: the same
/// declaration, the same tool, or every tool of an MCP server.
pub fn tool_covers(base: &DeclaredTool, child: &DeclaredTool) -> bool {
    if base.declared == child.declared {
        return true;
    }
    match (&base.tool, &child.tool) {
        (Some(b), Some(c)) => {
            b == c
                || b.strip_suffix('*')
                    .is_some_and(|server| b.starts_with("mcp:") && c.starts_with(server))
        }
        _ => false,
    }
}

/// Whether the base's host pattern `base` allows every host `child` does:
/// `*` allows any; `*.example.com` any name under example.com (as the gate
/// reads it: not example.com itself); else the same name.
pub fn host_covers(base: &str, child: &str) -> bool {
    let b = base.trim().trim_end_matches('.').to_ascii_lowercase();
    let c = child.trim().trim_end_matches('.').to_ascii_lowercase();
    if b == "*" || b == c {
        return true;
    }
    let Some(suffix) = b.strip_prefix("*.") else {
        return false;
    };
    let name = c.strip_prefix("*.").unwrap_or(&c);
    // `*.a.example.com` lies under `*.example.com`; `*.example.com` under
    // itself only (the equal case above).
    name.len() > suffix.len() + 1 && name.ends_with(&format!(".{suffix}"))
}

/// Whether the mount pattern `child` (`$WORKSPACE/src/**`) lies within the
/// base's `base` (`$WORKSPACE/**`): folder by folder, each of the base's
/// folders the child's, or a glob (`*`, `?`) matching it, or `**`.
pub fn mount_within(base: &str, child: &str) -> bool {
    let b = base.strip_suffix("/**").unwrap_or(base);
    let c = child.strip_suffix("/**").unwrap_or(child);
    if b.is_empty() {
        // `/**`: every absolute path, the workspace and home among them.
        return true;
    }
    let bs: Vec<&str> = b.split('/').collect();
    let cs: Vec<&str> = c.split('/').collect();
    for (i, bseg) in bs.iter().enumerate() {
        if *bseg == "**" {
            return true;
        }
        let Some(cseg) = cs.get(i) else {
            return false;
        };
        let same = bseg == cseg
            || (bseg.contains(['*', '?'])
                && !cseg.contains(['*', '?', '['])
                && glob(bseg.as_bytes(), cseg.as_bytes()));
        if !same {
            return false;
        }
    }
    true
}

/// `*` and `?` within one folder name.
fn glob(p: &[u8], s: &[u8]) -> bool {
    match (p.first(), s.first()) {
        (None, None) => true,
        (Some(b'*'), _) => glob(&p[1..], s) || (!s.is_empty() && glob(p, &s[1..])),
        (Some(b'?'), Some(_)) => glob(&p[1..], &s[1..]),
        (Some(a), Some(b)) if a == b => glob(&p[1..], &s[1..]),
        _ => false,
    }
}

/// Whether the base's credential allows the file's: the same name from the
/// same source, and the same URL when the base binds it to one.
pub fn credential_covers(base: &Credential, child: &Credential) -> bool {
    base.name == child.name
        && base.source == child.source
        && base
            .url
            .as_ref()
            .is_none_or(|u| child.url.as_ref() == Some(u))
}

impl Checker<'_> {
    /// FROM with a resolver: find the base, or say why it cannot be used.
    pub(crate) fn resolve_base(&mut self, t: &Token) {
        let Some(bases) = self.bases else { return };
        let reference = t.text.strip_prefix("oci://").unwrap_or(&t.text).to_owned();
        if reference == "scratch" {
            return;
        }
        let s = self.tspan(t);
        if let Some(first) = self.from {
            self.error(
                "agentrc-duplicate",
                s,
                "a second FROM: an Agentfile has one base",
            )
            .note(first, "the first FROM");
            self.hint("keep one FROM");
            return;
        }
        self.from = Some(s);
        match bases.base(&reference) {
            Ok(base) => self.base = base,
            Err(e) => {
                self.error(
                    "agentrc-from-unresolved",
                    s,
                    format!("cannot use the base `{reference}`: {e}"),
                );
                self.hint("`agentfile pull` the package, or fix the reference");
            }
        }
    }

    /// Inherit what the file does not write from the base, and report each
    /// grant it writes that the base does not allow.
    pub(crate) fn apply_base(&mut self) {
        let (Some(base), Some(from)) = (self.base.clone(), self.from) else {
            return;
        };
        let (from_line, _) = self.line_col(from.start as usize);
        let g = &base.grants;
        if self.grants.tools.is_empty() {
            self.grants.tools = g
                .tools
                .iter()
                .map(|t| DeclaredTool {
                    line: from_line,
                    ..t.clone()
                })
                .collect();
        } else {
            let allowed = list(g.tools.iter().map(|t| t.declared.clone()), "no tools");
            for (t, (_, s)) in self
                .grants
                .tools
                .clone()
                .iter()
                .zip(self.tool_spans.clone())
            {
                if !g.tools.iter().any(|b| tool_covers(b, t)) {
                    self.widens(s, &t.declared, &base, &format!("its tools are {allowed}"));
                }
            }
        }
        if self.grants.mounts.is_empty() {
            self.grants.mounts = g.mounts.clone();
        } else {
            let allowed = list(
                g.mounts
                    .iter()
                    .map(|m| format!("{} {}", m.path, if m.write { "rw" } else { "ro" })),
                "no path",
            );
            for (m, s) in self
                .grants
                .mounts
                .clone()
                .iter()
                .zip(self.mount_spans.clone())
            {
                let within = |w: bool| {
                    g.mounts
                        .iter()
                        .any(|b| (b.write || !w) && mount_within(&b.pattern, &m.pattern))
                };
                let why = if !within(false) {
                    format!("its mounts are {allowed}")
                } else if m.write && !within(true) {
                    format!("it mounts `{}` read-only ({allowed})", m.path)
                } else {
                    continue;
                };
                let what = format!("{} {}", m.path, if m.write { "rw" } else { "ro" });
                self.widens(s, &what, &base, &why);
            }
        }
        if self.grants.hosts.is_empty() {
            self.grants.hosts = g.hosts.clone();
        } else {
            let allowed = if g.hosts.is_empty() {
                "it allows no host".to_owned()
            } else {
                format!("it allows only {}", g.hosts.join(", "))
            };
            for (h, s) in self.host_spans.clone() {
                if !g.hosts.iter().any(|b| host_covers(b, &h)) {
                    self.widens(s, &h, &base, &allowed);
                }
            }
        }
        if self.grants.credentials.is_empty() {
            self.grants.credentials = g.credentials.clone();
        } else {
            let allowed = list(
                g.credentials
                    .iter()
                    .map(|c| format!("{} {}", c.name, c.source)),
                "no credential",
            );
            for (c, s) in self
                .grants
                .credentials
                .clone()
                .iter()
                .zip(self.cred_spans.clone())
            {
                if !g.credentials.iter().any(|b| credential_covers(b, c)) {
                    let what = format!("{} {}", c.name, c.source);
                    self.widens(s, &what, &base, &format!("its credentials are {allowed}"));
                }
            }
        }
        if self.grants.sop.is_none() {
            self.grants.sop = g.sop.clone();
        }
    }

    /// `DIRECTIVE what widens the base `ref@digest`: why`, at `s`.
    fn widens(&mut self, s: Span, what: &str, base: &Base, why: &str) {
        let (line, _) = self.line_col(s.start as usize);
        let directive = self
            .directives
            .iter()
            .find(|d| d.line <= line && line <= d.end_line)
            .map_or("the directive", |d| match d.directive.as_str() {
                "POLICY" => "POLICY network",
                other => other,
            })
            .to_owned();
        self.error(
            "agentrc-from-widens",
            s,
            format!(
                "{directive} {what} widens the base `{}`: {why}",
                base.pinned()
            ),
        );
        self.hint(
            "a file with FROM may only narrow its base: leave the directive out to inherit the base's, or keep within it",
        );
    }
}

/// `a, b, c`, or `none` when there is nothing.
fn list(items: impl Iterator<Item = String>, none: &str) -> String {
    let v: Vec<String> = items.collect();
    if v.is_empty() {
        none.to_owned()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(declared: &str, tool: Option<&str>) -> DeclaredTool {
        DeclaredTool {
            declared: declared.to_owned(),
            name: declared.rsplit(':').next().unwrap_or(declared).to_owned(),
            tool: tool.map(str::to_owned),
            line: 1,
        }
    }

    #[test]
    fn a_tool_is_covered_by_the_same_tool_or_its_servers_wildcard() {
        let read = tool("utcp:file_read", Some("read"));
        assert!(tool_covers(&read, &tool("utcp:read", Some("read"))));
        assert!(!tool_covers(&read, &tool("utcp:shell", Some("bash"))));
        let github = tool("mcp:github", Some("mcp:github:*"));
        assert!(tool_covers(
            &github,
            &tool("mcp:github.get_issue", Some("mcp:github:get_issue"))
        ));
        assert!(!tool_covers(
            &github,
            &tool("mcp:gitlab.get_issue", Some("mcp:gitlab:get_issue"))
        ));
        assert!(!tool_covers(
            &tool("mcp:github.get_issue", Some("mcp:github:get_issue")),
            &github
        ));
        assert!(tool_covers(&tool("x:odd", None), &tool("x:odd", None)));
        assert!(!tool_covers(&tool("x:odd", None), &tool("x:other", None)));
    }

    #[test]
    fn hosts_narrow_to_the_same_name_or_under_a_wildcard() {
        assert!(host_covers("api.example.com", "API.example.com"));
        assert!(!host_covers("api.example.com", "api.other.com"));
        assert!(host_covers("*.example.com", "api.example.com"));
        assert!(host_covers("*.example.com", "*.api.example.com"));
        assert!(host_covers("*.example.com", "*.example.com"));
        assert!(!host_covers("*.example.com", "example.com"));
        assert!(!host_covers("*.example.com", "evil-example.com"));
        assert!(!host_covers("api.example.com", "*.example.com"));
        assert!(host_covers("*", "anything.org"));
        assert!(!host_covers("*.example.com", "*"));
    }

    #[test]
    fn mounts_narrow_folder_by_folder() {
        assert!(mount_within("$WORKSPACE/**", "$WORKSPACE/src/**"));
        assert!(mount_within("$WORKSPACE/**", "$WORKSPACE/**"));
        assert!(!mount_within("$WORKSPACE/src/**", "$WORKSPACE/**"));
        assert!(!mount_within("$WORKSPACE/src/**", "$WORKSPACE/srcx/**"));
        assert!(mount_within(
            "$WORKSPACE/*/docs/**",
            "$WORKSPACE/a/docs/x/**"
        ));
        assert!(!mount_within("$WORKSPACE/*/docs/**", "$WORKSPACE/*/**"));
        assert!(mount_within("/**", "$WORKSPACE/**"));
        assert!(!mount_within("$WORKSPACE/**", "/etc/**"));
        assert!(!mount_within("$WORKSPACE/**", "~/.ssh/**"));
    }

    #[test]
    fn a_credential_narrows_to_the_same_name_and_source() {
        let c = |n: &str, s: &str, u: Option<&str>| Credential {
            name: n.to_owned(),
            source: s.to_owned(),
            url: u.map(str::to_owned),
        };
        let base = c("gh", "env:GH", Some("https://api.github.com"));
        assert!(credential_covers(
            &base,
            &c("gh", "env:GH", Some("https://api.github.com"))
        ));
        assert!(!credential_covers(
            &base,
            &c("gh", "env:GH", Some("https://evil.example"))
        ));
        assert!(!credential_covers(
            &base,
            &c("gh", "env:OTHER", Some("https://api.github.com"))
        ));
        let free = c("gh", "env:GH", None);
        assert!(credential_covers(
            &free,
            &c("gh", "env:GH", Some("https://api.github.com"))
        ));
        assert!(!credential_covers(&free, &c("other", "env:GH", None)));
    }
}
