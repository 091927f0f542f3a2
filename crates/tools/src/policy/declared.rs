//! The run-time side of an agentrc declaration: a [`Guard`] on the gate that
//! allows only what the file declares (its tools, MOUNT paths and hosts) and
//! what its Cedar policies permit. The policies come compiled with the plan
//! ([`Grants::compiled`](agentfile_plan::declared::Grants::compiled)): this
//! module asks them through [`Authorize`] and links no Cedar parser.
//!
//! Cedar requests, per call:
//!
//! | call | action | resource | context |
//! |---|---|---|---|
//! | every call | `tool.invoke` | `AgentRC::Tool::"<name>"` | `tool`, and `path` / `host`, `url` / `command` when it has one |
//! | file reads (read, glob, grep, ls) | `filesystem.read` | the same tool | `path` |
//! | each file grep or glob reads or lists, each entry ls shows | `filesystem.read` | the same tool | `path` of that file |
//! | writes (write, edit) | `filesystem.write` | the same tool | `path` |
//! | each path a bash line reads / writes (arguments, redirections) | `filesystem.read` / `filesystem.write` | bash | `path` |
//! | web_fetch (and each redirect) | `network.connect` | the same tool | `host`, `port`, `url` |
//!
//! A declaration whose FROM was resolved carries its base
//! ([`Declaration::base`]): the guard holds the base's grants and policies as
//! a layer of their own ([`DeclarationGuard::base`]), asked after the file's,
//! so a call must be allowed by both (and by the base's base, all the way
//! down). The policy sets are never merged, which would let either's permits
//! stand for the other's. Each layer asks its policies about its own agent
//! and its own name of the tool called.
//!
//! The principal is `AgentRC::Agent::"<agent>"`. `tool.invoke` must be
//! permitted (deny by default). The finer action is decided by Cedar when a
//! permit of the file names it; when none does, the runtime adds
//! `permit(principal, action == <that action>, resource);` for it, so MOUNT
//! and URL bound it and the file's `forbid`s still win. `path` is what the
//! agent sees: inside the workspace, `/workspace/…`.

use std::path::{Path, PathBuf};

use std::sync::Arc;

use crate::Denial;
use crate::policy::paths::{self, PathPattern};
use crate::policy::web::DomainPattern;
use crate::policy::{Guard, Permit, Request, Tool};
use agentfile_plan::declared::{Authorize, Base, Declaration, Grants, Verdict};

/// The grants of one declaration, bound to a workspace.
pub struct DeclarationGuard {
    agent: String,
    /// `(built-in or mcp:server:tool, Cedar name)`.
    tools: Vec<(String, String)>,
    mounts: Vec<(PathPattern, bool, String)>,
    hosts: Vec<DomainPattern>,
    cedar: Option<Arc<dyn Authorize>>,
    workspace: PathBuf,
    /// The base's layer (FROM), with what it says in a denial's rule.
    base: Option<(Box<DeclarationGuard>, String)>,
}

impl std::fmt::Debug for DeclarationGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeclarationGuard")
            .field("agent", &self.agent)
            .field("tools", &self.tools)
            .field("mounts", &self.mounts)
            .field("hosts", &self.hosts)
            .field("cedar", &self.cedar.is_some())
            .field("workspace", &self.workspace)
            .field("base", &self.base)
            .finish()
    }
}

fn refuse(tool: &str, rule: impl Into<String>, reason: impl Into<String>) -> Denial {
    Denial {
        tool: tool.to_owned(),
        rule: rule.into(),
        reason: reason.into(),
    }
}

/// Why a declaration's grants cannot be compiled for a workspace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    #[error("workspace {}: {source}", path.display())]
    Workspace {
        path: PathBuf,
        source: paths::PathError,
    },
    /// A `MOUNT`'s pattern, by the mount's path as written.
    #[error("MOUNT {path}: {source}")]
    Mount {
        path: String,
        source: paths::PatternError,
    },
    #[error("host {host}: {source}")]
    Host {
        host: String,
        source: super::web::DomainError,
    },
    /// The declaration has policies, but the plan carries them uncompiled
    /// (it did not come from the front end that reads them).
    #[error("its policies were not compiled by the front end that read them")]
    Uncompiled,
    /// The base FROM names cannot be compiled.
    #[error("its base `{reference}`: {source}")]
    Base {
        reference: String,
        source: Box<GuardError>,
    },
}

impl DeclarationGuard {
    /// Compile a declaration's grants for a workspace, with its base's (and
    /// their bases') as layers below.
    pub fn new(
        decl: &Declaration,
        workspace: &Path,
        home: Option<&Path>,
    ) -> Result<DeclarationGuard, GuardError> {
        let workspace = paths::realpath(&paths::normalize(workspace)).map_err(|source| {
            GuardError::Workspace {
                path: workspace.to_owned(),
                source,
            }
        })?;
        let home = home.and_then(|h| paths::realpath(&paths::normalize(h)).ok());
        DeclarationGuard::layer(
            &decl.agent,
            &decl.grants,
            decl.base.as_deref(),
            workspace,
            home.as_deref(),
        )
    }

    /// One declaration's grants (a file's, or a base's), its base below.
    fn layer(
        agent: &str,
        g: &Grants,
        base: Option<&Base>,
        workspace: PathBuf,
        home: Option<&Path>,
    ) -> Result<DeclarationGuard, GuardError> {
        let base = match base {
            Some(b) => {
                let layer = DeclarationGuard::layer(
                    &b.agent,
                    &b.grants,
                    b.base.as_deref(),
                    workspace.clone(),
                    home,
                )
                .map_err(|e| GuardError::Base {
                    reference: b.reference.clone(),
                    source: Box::new(e),
                })?;
                Some((Box::new(layer), b.pinned()))
            }
            None => None,
        };
        let mut mounts = Vec::new();
        for m in &g.mounts {
            let p = PathPattern::compile(&m.pattern, &workspace, home).map_err(|source| {
                GuardError::Mount {
                    path: m.path.clone(),
                    source,
                }
            })?;
            mounts.push((
                p,
                m.write,
                format!("MOUNT {} {}", m.path, if m.write { "rw" } else { "ro" }),
            ));
        }
        let mut hosts = Vec::new();
        for h in &g.hosts {
            hosts.push(DomainPattern::parse(h).map_err(|source| GuardError::Host {
                host: h.clone(),
                source,
            })?);
        }
        let tools = g
            .tools
            .iter()
            .filter_map(|t| Some((t.tool.clone()?, t.name.clone())))
            .collect();
        let cedar = match (&g.cedar, &g.compiled.0) {
            (None, _) => None,
            (Some(_), Some(compiled)) => Some(compiled.clone()),
            (Some(_), None) => return Err(GuardError::Uncompiled),
        };
        Ok(DeclarationGuard {
            agent: agent.to_owned(),
            tools,
            mounts,
            hosts,
            cedar,
            workspace,
            base,
        })
    }

    /// The Cedar name of the declared tool a call is, if declared.
    fn declared(&self, tool: &str) -> Option<&str> {
        self.tools
            .iter()
            .find(|(t, _)| t == tool || (t.ends_with(":*") && tool.starts_with(&t[..t.len() - 1])))
            .map(|(_, n)| n.as_str())
    }

    /// A path as the agent sees it: `/workspace/…` inside the workspace.
    fn agent_path(&self, real: &Path) -> String {
        match real.strip_prefix(&self.workspace) {
            Ok(rel) if rel.as_os_str().is_empty() => "/workspace".to_owned(),
            Ok(rel) => format!("/workspace/{}", rel.display()),
            Err(_) => real.display().to_string(),
        }
    }

    fn cedar(
        &self,
        tool: &str,
        name: &str,
        fine: Option<&str>,
        context: &[(&str, &str)],
    ) -> Result<(), Denial> {
        let Some(c) = &self.cedar else { return Ok(()) };
        let d = c.authorize(&self.agent, "tool.invoke", "Tool", name, context);
        if !d.allowed {
            return Err(refuse(
                tool,
                d.rule.clone(),
                format!(
                    "Cedar does not permit `tool.invoke` of `{name}`{}",
                    errors(&d)
                ),
            ));
        }
        if let Some(action) = fine {
            let d = if c.permits_name(action) {
                c.authorize(&self.agent, action, "Tool", name, context)
            } else {
                c.authorize_with_default_permit(&self.agent, action, "Tool", name, context)
            };
            if !d.allowed {
                let what = context
                    .iter()
                    .find(|(k, _)| matches!(*k, "path" | "host"))
                    .map_or(String::new(), |(k, v)| format!(" ({k} {v})"));
                return Err(refuse(
                    tool,
                    d.rule.clone(),
                    format!("Cedar does not permit `{action}`{what}{}", errors(&d)),
                ));
            }
        }
        Ok(())
    }
}

impl DeclarationGuard {
    /// One file a declared tool reads or writes, at its resolved path: under
    /// a MOUNT (one mounted `rw` for a write; bash's paths are bound by the
    /// policy, not MOUNT), and permitted by Cedar's `filesystem.read` or
    /// `filesystem.write` with that path in the context.
    fn file(&self, tool: Tool, name: &str, real: &Path, writes: bool) -> Result<(), Denial> {
        let tool_name = tool.name();
        let seen = self.agent_path(real);
        if tool != Tool::Bash {
            let covering: Vec<&(PathPattern, bool, String)> = self
                .mounts
                .iter()
                .filter(|(p, _, _)| p.is_match(real))
                .collect();
            if covering.is_empty() {
                return Err(refuse(
                    tool_name,
                    "agentrc: MOUNT",
                    format!("`{seen}` is under no MOUNT of the Agentfile"),
                ));
            }
            if writes && !covering.iter().any(|(_, w, _)| *w) {
                return Err(refuse(
                    tool_name,
                    format!("agentrc: {}", covering[0].2),
                    format!("`{seen}` is mounted read-only"),
                ));
            }
        }
        let action = if writes {
            "filesystem.write"
        } else {
            "filesystem.read"
        };
        self.cedar(
            tool_name,
            name,
            Some(action),
            &[("tool", name), ("path", &seen)],
        )
    }
}

fn errors(d: &Verdict) -> String {
    if d.errors.is_empty() {
        String::new()
    } else {
        format!("; errors: {}", d.errors.join("; "))
    }
}

impl Guard for DeclarationGuard {
    /// This declaration's word, then its base's.
    fn judge(&self, req: &Request<'_>, permit: &Permit) -> Result<(), Denial> {
        self.judge_here(req, permit)?;
        match &self.base {
            Some((base, shown)) => base.judge(req, permit).map_err(|d| in_base(d, shown)),
            None => Ok(()),
        }
    }

    fn judge_file(&self, tool: Tool, real: &Path, writes: bool) -> Result<(), Denial> {
        self.judge_file_here(tool, real, writes)?;
        match &self.base {
            Some((base, shown)) => base
                .judge_file(tool, real, writes)
                .map_err(|d| in_base(d, shown)),
            None => Ok(()),
        }
    }

    fn offers(&self, tool: Tool) -> bool {
        self.declared(tool.name()).is_some()
            && self.base.as_ref().is_none_or(|(b, _)| b.offers(tool))
    }

    fn offers_mcp(&self, server: &str, tool: &str) -> bool {
        self.declared(&format!("mcp:{server}:{tool}")).is_some()
            && self
                .base
                .as_ref()
                .is_none_or(|(b, _)| b.offers_mcp(server, tool))
    }
}

/// A denial of a base's layer, saying so.
fn in_base(d: Denial, shown: &str) -> Denial {
    Denial {
        tool: d.tool,
        rule: format!("base {shown}: {}", d.rule),
        reason: format!("{} (the base `{shown}` FROM names)", d.reason),
    }
}

impl DeclarationGuard {
    fn judge_here(&self, req: &Request<'_>, permit: &Permit) -> Result<(), Denial> {
        let (tool_name, called) = match *req {
            Request::Path { tool, .. } | Request::Plain(tool) => {
                (tool.name().to_owned(), tool.name().to_owned())
            }
            Request::Bash { .. } => ("bash".to_owned(), "bash".to_owned()),
            Request::Fetch { .. } => ("web_fetch".to_owned(), "web_fetch".to_owned()),
            Request::Mcp { server, tool } => ("mcp".to_owned(), format!("mcp:{server}:{tool}")),
        };
        let Some(name) = self.declared(&called).map(str::to_owned) else {
            return Err(refuse(
                &tool_name,
                "agentrc: no TOOL declares it",
                format!(
                    "the Agentfile does not declare `{called}`; an agentrc agent may use only the tools it declares"
                ),
            ));
        };
        match *req {
            Request::Path { tool, .. } => {
                let real = permit
                    .path
                    .as_ref()
                    .map(|r| r.real.clone())
                    .unwrap_or_else(|| self.workspace.clone());
                self.file(tool, &name, &real, matches!(tool, Tool::Write | Tool::Edit))
            }
            Request::Fetch { url } => {
                let host = permit.url.as_ref().map_or_else(
                    || url.host_str().unwrap_or("").to_ascii_lowercase(),
                    |v| v.host.clone(),
                );
                let port = url.port_or_known_default().unwrap_or(0);
                if !self.hosts.iter().any(|h| h.covers(&host, port)) {
                    return Err(refuse(
                        &tool_name,
                        "agentrc: URL",
                        format!(
                            "`{host}` is not a host the Agentfile declares (URL, POLICY network)"
                        ),
                    ));
                }
                let port = port.to_string();
                self.cedar(
                    &tool_name,
                    &name,
                    Some("network.connect"),
                    &[
                        ("tool", &name),
                        ("host", &host),
                        ("port", &port),
                        ("url", url.as_str()),
                    ],
                )
            }
            Request::Bash { command } => self.cedar(
                &tool_name,
                &name,
                None,
                &[("tool", &name), ("command", command)],
            ),
            _ => self.cedar(&tool_name, &name, None, &[("tool", &name)]),
        }
    }

    fn judge_file_here(&self, tool: Tool, real: &Path, writes: bool) -> Result<(), Denial> {
        let Some(name) = self.declared(tool.name()).map(str::to_owned) else {
            return Err(refuse(
                tool.name(),
                "agentrc: no TOOL declares it",
                format!(
                    "the Agentfile does not declare `{tool}`; an agentrc agent may use only the tools it declares"
                ),
            ));
        };
        self.file(tool, &name, real, writes)
    }
}

/// A declaration that cannot run here: every problem found, in order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("agent `{agent}` cannot start: {}", problems.join("; "))]
pub struct NotRunnable {
    pub agent: String,
    pub problems: Vec<String>,
}

/// What must hold before a run of this declaration starts: every declared
/// tool exists, every `env:` credential is set. Values are never read.
pub fn check_runnable(decl: &Declaration) -> Result<(), NotRunnable> {
    let mut problems = Vec::new();
    let unknown: Vec<&str> = decl
        .grants
        .tools
        .iter()
        .filter(|t| t.tool.is_none())
        .map(|t| t.declared.as_str())
        .collect();
    if !unknown.is_empty() {
        problems.push(format!(
            "it declares tools agentfile does not have: {} (see `agentfile inspect --support-matrix`)",
            unknown.join(", ")
        ));
    }
    let missing: Vec<String> = decl
        .grants
        .credentials
        .iter()
        .filter_map(|c| c.source.strip_prefix("env:").map(|v| (c, v)))
        .filter(|(_, v)| std::env::var_os(v).is_none_or(|x| x.is_empty()))
        .map(|(c, v)| format!("{v} (CRED {})", c.name))
        .collect();
    if !missing.is_empty() {
        problems.push(format!(
            "its credentials are not set in the environment: {}",
            missing.join(", ")
        ));
    }
    let unresolvable: Vec<&str> = decl
        .grants
        .credentials
        .iter()
        .filter(|c| !c.source.starts_with("env:"))
        .map(|c| c.name.as_str())
        .collect();
    if !unresolvable.is_empty() {
        problems.push(format!(
            "agentfile resolves env: credentials only, not: {}",
            unresolvable.join(", ")
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(NotRunnable {
            agent: decl.agent.to_string(),
            problems,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentfile_plan::declared::{Compiled, Grants};

    #[derive(Debug)]
    struct PermitAll;

    impl Authorize for PermitAll {
        fn authorize(&self, _: &str, _: &str, _: &str, _: &str, _: &[(&str, &str)]) -> Verdict {
            Verdict {
                allowed: true,
                rule: "all".to_owned(),
                errors: Vec::new(),
            }
        }

        fn authorize_with_default_permit(
            &self,
            a: &str,
            b: &str,
            c: &str,
            d: &str,
            e: &[(&str, &str)],
        ) -> Verdict {
            self.authorize(a, b, c, d, e)
        }

        fn permits_name(&self, _: &str) -> bool {
            true
        }
    }

    fn declaration(
        cedar: Option<Vec<agentfile_plan::declared::Block>>,
        compiled: Compiled,
    ) -> Declaration {
        Declaration {
            syntax: "core".to_owned(),
            syntax_directive: None,
            agent: "a".to_owned(),
            digest: String::new(),
            extensions: Vec::new(),
            directives: Vec::new(),
            grants: Grants {
                cedar,
                compiled,
                ..Grants::default()
            },
            base: None,
        }
    }

    /// Policies the plan carries as text only (a plan that did not come from
    /// the front end that compiles them) are refused, never skipped.
    #[test]
    fn policies_never_compiled_refuse_the_run() {
        let ws = std::env::temp_dir();
        let uncompiled = declaration(Some(Vec::new()), Compiled::default());
        let err = DeclarationGuard::new(&uncompiled, &ws, None).unwrap_err();
        assert_eq!(err, GuardError::Uncompiled);
        let compiled = declaration(Some(Vec::new()), Compiled(Some(Arc::new(PermitAll))));
        assert!(DeclarationGuard::new(&compiled, &ws, None).is_ok());
        let none = declaration(None, Compiled::default());
        assert!(DeclarationGuard::new(&none, &ws, None).is_ok());
    }

    /// A base's policies are a layer of their own: never compiled, they
    /// refuse the run as the file's would.
    #[test]
    fn a_base_whose_policies_were_never_compiled_refuses_the_run() {
        let ws = std::env::temp_dir();
        let mut child = declaration(None, Compiled::default());
        let base = declaration(Some(Vec::new()), Compiled::default());
        child.base = Some(Box::new(Base {
            reference: "reg/base:1".to_owned(),
            digest: "sha256:00".to_owned(),
            agent: base.agent.clone(),
            grants: base.grants.clone(),
            base: None,
        }));
        let err = DeclarationGuard::new(&child, &ws, None).unwrap_err();
        assert_eq!(
            err,
            GuardError::Base {
                reference: "reg/base:1".to_owned(),
                source: Box::new(GuardError::Uncompiled),
            }
        );
        assert_eq!(
            err.to_string(),
            "its base `reg/base:1`: its policies were not compiled by the front end that read them"
        );
        let b = child.base.as_mut().unwrap();
        b.grants.compiled = Compiled(Some(Arc::new(PermitAll)));
        let guard = DeclarationGuard::new(&child, &ws, None).unwrap();
        // The base declares no tool: nothing is offered, whatever the file says.
        assert!(!guard.offers(Tool::Read));
    }
}
