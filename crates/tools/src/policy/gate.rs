//! The gate: a [`Policy`] compiled for one workspace, answering "may this call
//! run?" with a [`Permit`] or a [`Denial`] that names the rule.
//!
//! Everything that decides lives here, so the answer to "what can an agent do?"
//! is in one file: enabled flags, path allow/deny, the bash lists and the shell
//! analysis's findings, URL and address rules, MCP patterns, and the per-minute
//! rate limits (counted here, so a limit is enforced whichever tool asks).

use std::path::{Path, PathBuf};
use std::time::Instant;

use url::Url;

use super::bash::{self, Analysis, Item, Val};
use super::paths::{self, PathPattern, Resolved, wildcard_match};
use super::web::{self, DomainPattern, RateLimiter, UrlVerdict};
use super::writes::{self, Beyond, Target};
use super::{Origin, Policy, PolicyError, Problem, Section, Tool};
use crate::Denial;

/// How many directory entries one glob in a bash line may visit while it is
/// expanded for checking; beyond that the line is refused.
const MAX_GLOB_VISITS: usize = 20_000;

/// How many entries of the workspace are looked at for symlinks out before a
/// link-following command is refused for want of certainty.
const MAX_SCAN_ENTRIES: usize = 200_000;

/// Symlinks in the workspace that lead where `read` may not read.
struct Escapes {
    links: Vec<PathBuf>,
    /// False when the scan stopped at [`MAX_SCAN_ENTRIES`].
    complete: bool,
}

/// Whether a command never follows symlinks it meets while recursing into a
/// directory it was given (so a link out inside that directory is harmless).
fn recursion_is_safe(c: &bash::CommandUse) -> bool {
    let flags: Vec<&str> = c
        .args
        .iter()
        .map(|a| a.text.as_str())
        .filter(|t| t.starts_with('-') && !t.starts_with("--"))
        .collect();
    let long = |name: &str| {
        c.args
            .iter()
            .any(|a| a.text == name || a.text.starts_with(&format!("{name}=")))
    };
    let short = |letter: char| flags.iter().any(|f| f[1..].contains(letter));
    match bash::basename(&c.name) {
        // Not recursive at all (a directory argument is an error to them).
        "cat" | "head" | "tail" | "wc" | "file" | "stat" | "cmp" | "md5sum" | "sha1sum"
        | "sha256sum" | "sha512sum" | "sort" | "uniq" | "cut" | "tr" | "echo" | "printf"
        | "test" | "[" | "[[" | "cd" | "pwd" | "mkdir" | "touch" | "basename" | "dirname"
        | "true" | "false" | "git" => true,
        "ls" => !short('L') && !long("--dereference"),
        "grep" | "egrep" | "fgrep" => !short('R') && !long("--dereference-recursive"),
        "rg" => !short('L') && !long("--follow"),
        "find" => !c
            .args
            .iter()
            .any(|a| matches!(a.text.as_str(), "-L" | "-H" | "-follow")),
        "du" => !short('L') && !long("--dereference"),
        "tree" => !short('l'),
        _ => false,
    }
}

/// Commands that recurse from the current directory when given no directory.
fn recurses_from_cwd(c: &bash::CommandUse) -> bool {
    matches!(
        bash::basename(&c.name),
        "grep" | "egrep" | "fgrep" | "rg" | "find" | "du" | "tree"
    )
}

/// What a call asks to do, as far as the policy is concerned.
#[derive(Debug, Clone, Copy)]
pub enum Request<'a> {
    /// A file tool on a path as the model wrote it.
    Path { tool: Tool, path: &'a str },
    /// A bash command line.
    Bash { command: &'a str },
    /// `web_fetch` of a parsed URL.
    Fetch { url: &'a Url },
    /// A tool with nothing to match but its section (`web_search`, memory).
    Plain(Tool),
    /// A tool of an MCP server, by the server's name and the tool's own name.
    Mcp { server: &'a str, tool: &'a str },
}

/// A further check a call must pass once the policy allows it: an agentrc
/// declaration's grants and Cedar policies. A call runs only if the policy and
/// every guard allow it; a guard's denial is reported like the policy's.
pub trait Guard: Send + Sync + std::fmt::Debug {
    /// Judge a call the policy allowed; `permit` is what the gate worked out
    /// (the resolved path, the judged URL).
    fn judge(&self, req: &Request<'_>, permit: &Permit) -> Result<(), Denial>;

    /// Judge one file a call reads or writes beyond the path it was judged
    /// for, at its resolved path: each file grep and glob read or list, each
    /// entry ls shows, each path a bash line names (`writes` for the targets
    /// of redirections and of commands that write). The call itself passed
    /// [`Guard::judge`].
    fn judge_file(&self, _tool: Tool, _real: &Path, _writes: bool) -> Result<(), Denial> {
        Ok(())
    }

    /// Whether the model is offered a built-in tool at all.
    fn offers(&self, _tool: Tool) -> bool {
        true
    }

    /// Whether the model is offered an MCP server's tool.
    fn offers_mcp(&self, _server: &str, _tool: &str) -> bool {
        true
    }
}

/// What the gate worked out while allowing a call; tools act on it rather than
/// on the model's spelling.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Permit {
    /// The resolved path, for file tools.
    pub path: Option<Resolved>,
    /// The judged host, for web_fetch.
    pub url: Option<UrlVerdict>,
}

#[derive(Debug, Clone)]
enum Enabled {
    On,
    Off { rule: String, reason: String },
}

#[derive(Debug)]
struct ToolGate {
    label: String,
    enabled: Enabled,
    allow: Vec<PathPattern>,
    /// The section itself has an `allow` list: then it permits only what the
    /// list (and `allowed_dirs`) names, whatever `default_deny` says.
    restricted: bool,
    deny: Vec<PathPattern>,
    allowlist: Vec<String>,
    denylist: Vec<String>,
    /// `None`: the section has no `allow_domains`.
    domains: Option<Vec<DomainPattern>>,
    rate_limit: Option<u32>,
}

#[derive(Debug)]
struct McpGate {
    label: String,
    enabled: Enabled,
    default_deny: bool,
    allow: Vec<String>,
    deny: Vec<String>,
    rate_limit: Option<u32>,
}

/// What the kernel sandbox takes from a bound policy ([`Gate::sandbox_inputs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxInputs {
    /// Folders the write and edit rules allow (their literal folders).
    pub writable: Vec<PathBuf>,
    /// Paths `[read] deny` names without a glob.
    pub hidden: Vec<PathBuf>,
    /// Folders no write may touch: the run's protected folders and what
    /// `[write]`/`[edit] deny` name without a glob.
    pub read_only: Vec<PathBuf>,
    /// The session store, and the run's scratch folder inside it.
    pub store: PathBuf,
    pub scratch: Option<PathBuf>,
    /// The section whose host rules allow network access, when one does.
    pub hosts: Option<String>,
    /// Rules only the gate can apply (globs, guards), for `inspect --sandbox`.
    pub gate_only: Vec<String>,
}

/// A policy bound to a workspace. Cheap to share (`Arc<Gate>`); safe to use from
/// many calls at once.
#[derive(Debug)]
pub struct Gate {
    workspace: PathBuf,
    home: Option<PathBuf>,
    default_deny: bool,
    safe_default: bool,
    tools: Vec<ToolGate>,
    mcp: McpGate,
    limiter: RateLimiter,
    /// Resolved folders no write may touch, with the rule that says why.
    protected: Vec<(PathBuf, String)>,
    /// The run's control files ([`super::control`]), each with whether a
    /// tool may write it (`[control] writable`).
    control: Vec<(super::control::ControlFile, bool)>,
    /// `.git` is named in `[control] writable`: git may write it (its hooks
    /// and config stay read-only in the sandbox).
    git_writable: bool,
    /// The run's scratch folder, spelled under the resolved workspace: the
    /// one subtree of `.agentfile/` the file tools may use.
    scratch: Option<PathBuf>,
    guards: Vec<super::GuardRef>,
}

/// The scratch folder `dir` (spelled under the workspace as `given`) under
/// the resolved workspace `real`, when it lies strictly inside
/// `.agentfile/`; symlinks in it are not followed (a path must then resolve
/// inside this spelling to count).
fn scratch_under(dir: &Path, given: &Path, real: &Path) -> Option<PathBuf> {
    let dir = paths::normalize(dir);
    let rel = dir
        .strip_prefix(real)
        .or_else(|_| dir.strip_prefix(given))
        .ok()?;
    let store = Path::new(".agentfile");
    (rel.starts_with(store) && rel != store).then(|| real.join(rel))
}

fn denial(tool: &str, rule: impl Into<String>, reason: impl Into<String>) -> Denial {
    Denial {
        tool: tool.to_owned(),
        rule: rule.into(),
        reason: reason.into(),
    }
}

/// The gate of MCP tools: off in the safe default unless `--allow mcp:…`
/// added an [mcp] section; otherwise as the section says.
fn mcp_gate(policy: &Policy, safe_default: bool) -> McpGate {
    match &policy.mcp {
        // The safe default has no [mcp]; one added by `--allow mcp:…` counts.
        None if safe_default => McpGate {
            label: "mcp".to_owned(),
            enabled: Enabled::Off {
                rule: "no policy file: MCP tools are off by default".to_owned(),
                reason: "allow them in policy.toml under [mcp] allow = [\"server:tool\"]"
                    .to_owned(),
            },
            default_deny: true,
            allow: Vec::new(),
            deny: Vec::new(),
            rate_limit: None,
        },
        Some(m) => McpGate {
            label: m.label.clone(),
            enabled: if m.enabled == Some(false) {
                Enabled::Off {
                    rule: format!("[{}] enabled = false", m.label),
                    reason: "MCP tools are disabled by the policy".to_owned(),
                }
            } else {
                Enabled::On
            },
            default_deny: m.default_deny.unwrap_or(policy.default_deny),
            allow: m.allow.iter().map(|p| p.text.clone()).collect(),
            deny: m.deny.iter().map(|p| p.text.clone()).collect(),
            rate_limit: m.rate_limit,
        },
        None => McpGate {
            label: "mcp".to_owned(),
            enabled: Enabled::On,
            default_deny: policy.default_deny,
            allow: Vec::new(),
            deny: Vec::new(),
            rate_limit: None,
        },
    }
}

/// Whether `tool` may run at all under its `section` (absent: the policy's
/// defaults decide), with the rule and the reason when it may not.
fn enabled(
    tool: Tool,
    section: Option<&Section>,
    label: &str,
    safe_default: bool,
    default_deny: bool,
) -> Enabled {
    match section {
        Some(s) if s.enabled == Some(false) => Enabled::Off {
            rule: format!("[{label}] enabled = false"),
            reason: format!("{tool} is disabled by the policy"),
        },
        Some(_) => Enabled::On,
        None if safe_default => Enabled::Off {
            rule: format!("no policy file: {tool} is off by default"),
            reason: format!("{tool} needs a policy.toml that enables it (a [{tool}] section)"),
        },
        None if tool == Tool::Bash || tool.is_web() => Enabled::Off {
            rule: format!("no [{tool}] section"),
            reason: format!("{tool} is off unless the policy has a [{tool}] section"),
        },
        None if default_deny => Enabled::Off {
            rule: "default_deny = true".to_owned(),
            reason: format!("the policy has no [{tool}] section"),
        },
        None => Enabled::On,
    }
}

/// The domains a section allows (`allow_domains`), `None` when it names
/// none; a pattern that does not parse is a problem.
fn domains(s: &Section, problems: &mut Vec<Problem>) -> Option<Vec<DomainPattern>> {
    if s.allow_domains.is_empty() {
        return None;
    }
    let mut list = Vec::new();
    for p in &s.allow_domains {
        match DomainPattern::parse(&p.text) {
            Ok(d) => list.push(d),
            Err(e) => problems.push(Problem {
                line: p.line,
                col: p.col,
                message: e.to_string(),
            }),
        }
    }
    Some(list)
}

impl Gate {
    pub(super) fn new(
        policy: &Policy,
        workspace: &Path,
        home: Option<&Path>,
    ) -> Result<Gate, PolicyError> {
        let given = paths::normalize(workspace);
        let workspace =
            paths::realpath(&paths::normalize(workspace)).map_err(|e| PolicyError::Invalid {
                path: policy_path(policy),
                problems: vec![Problem {
                    line: 1,
                    col: 1,
                    message: format!("workspace {}: {e}", workspace.display()),
                }],
            })?;
        let home = home.and_then(|h| paths::realpath(&paths::normalize(h)).ok());
        let safe_default = policy.origin == Origin::SafeDefault;
        let mut problems = Vec::new();
        let compile = |pats: &[super::Pat], problems: &mut Vec<Problem>| -> Vec<PathPattern> {
            let mut out = Vec::new();
            for p in pats {
                match PathPattern::compile(&p.text, &workspace, home.as_deref()) {
                    Ok(c) => out.push(c),
                    Err(e) => problems.push(Problem {
                        line: p.line,
                        col: p.col,
                        message: e.to_string(),
                    }),
                }
            }
            out
        };
        let extra_dirs: Vec<super::Pat> = policy
            .allowed_dirs
            .iter()
            .map(|p| super::Pat {
                text: format!("{}/**", p.text.trim_end_matches('/')),
                ..p.clone()
            })
            .collect();
        let extra = compile(&extra_dirs, &mut problems);
        let mut tools = Vec::new();
        for tool in Tool::ALL {
            let section = policy.section(tool);
            let label = section.map_or_else(|| tool.name().to_owned(), |s| s.label.clone());
            let enabled = enabled(tool, section, &label, safe_default, policy.default_deny);
            let (mut allow, deny) = match section {
                Some(s) => (
                    compile(&s.allow, &mut problems),
                    compile(&s.deny, &mut problems),
                ),
                None => (Vec::new(), Vec::new()),
            };
            if tool.is_path_tool() {
                allow.extend(extra.iter().cloned());
            }
            let domains = section.and_then(|s| domains(s, &mut problems));
            tools.push(ToolGate {
                label,
                enabled,
                allow,
                restricted: section.is_some_and(|s| !s.allow.is_empty()),
                deny,
                allowlist: section.map_or_else(Vec::new, |s| {
                    s.allowlist.iter().map(|p| p.text.clone()).collect()
                }),
                denylist: section.map_or_else(Vec::new, |s| {
                    s.denylist.iter().map(|p| p.text.clone()).collect()
                }),
                domains,
                rate_limit: section.and_then(|s| s.rate_limit),
            });
        }
        let mcp = mcp_gate(policy, safe_default);
        let control_writable = compile(&policy.control_writable, &mut problems);
        if !problems.is_empty() {
            return Err(PolicyError::Invalid {
                path: policy_path(policy),
                problems,
            });
        }
        let scratch = policy
            .scratch
            .as_deref()
            .and_then(|d| scratch_under(d, &given, &workspace));
        // The control files share a few folders: each is resolved once.
        let mut reals = paths::RealPaths::default();
        let mut resolve = |d: &Path| {
            let d = paths::normalize(d);
            reals.realpath(&d).unwrap_or(d)
        };
        let mut protected: Vec<(PathBuf, String)> = policy
            .protected
            .iter()
            .map(|(d, why)| (resolve(d), why.clone()))
            .collect();
        let mut control = Vec::new();
        let mut git_writable = false;
        for c in &policy.control {
            let real = resolve(&c.path);
            // A folder is named by itself or by what lies in it (`.git/**`).
            let named = |p: &Path| {
                control_writable
                    .iter()
                    .any(|w| w.is_match(p) || w.is_match(&p.join("x")))
            };
            let writable = !c.kind.always() && (named(&c.path) || named(&real));
            if c.kind == super::control::ControlKind::Git && writable {
                git_writable = true;
            }
            // The store has its own rule (with the run's scratch folder
            // carved out of it); everything else is a protected path.
            if !writable && c.kind != super::control::ControlKind::Store {
                protected.push((real.clone(), c.rule()));
            }
            control.push((
                super::control::ControlFile {
                    path: real,
                    kind: c.kind,
                },
                writable,
            ));
        }
        Ok(Gate {
            control,
            git_writable,
            scratch,
            workspace,
            home,
            default_deny: policy.default_deny,
            safe_default,
            tools,
            mcp,
            limiter: RateLimiter::default(),
            guards: policy.guards.clone(),
            protected,
        })
    }

    /// The run's control files, each with whether `[control] writable`
    /// opens it to tools.
    pub fn control_files(&self) -> &[(super::control::ControlFile, bool)] {
        &self.control
    }

    /// Whether `.git` stays writable to git (named in `[control] writable`).
    pub fn git_writable(&self) -> bool {
        self.git_writable
    }

    /// What the kernel sandbox of this run's programs derives from the
    /// policy: where writes are allowed, what reads are denied, what stays
    /// read-only, and whether hosts are allowed.
    pub fn sandbox_inputs(&self) -> SandboxInputs {
        let mut writable = Vec::new();
        let mut gate_only = Vec::new();
        for tool in [Tool::Write, Tool::Edit] {
            let t = self.tool(tool);
            if matches!(t.enabled, Enabled::Off { .. }) {
                continue;
            }
            for a in &t.allow {
                writable.push(a.plain_root().unwrap_or_else(|| a.literal_root()));
            }
            if !t.restricted && !self.default_deny && !self.safe_default {
                writable.push(self.workspace.clone());
            }
        }
        if let Some(s) = &self.scratch {
            writable.push(s.clone());
        }
        let mut hidden = Vec::new();
        for d in &self.tool(Tool::Read).deny {
            match d.plain_root() {
                Some(p) => hidden.push(p),
                None => gate_only.push(format!("[read] deny {:?} (a glob)", d.source)),
            }
        }
        let mut read_only: Vec<PathBuf> = self.protected.iter().map(|(d, _)| d.clone()).collect();
        for tool in [Tool::Write, Tool::Edit] {
            for d in &self.tool(tool).deny {
                match d.plain_root() {
                    Some(p) => read_only.push(p),
                    None => {
                        gate_only.push(format!("[{}] deny {:?} (a glob)", tool.name(), d.source))
                    }
                }
            }
        }
        if !self.guards.is_empty() {
            gate_only.push("agentrc grants and Cedar policies".to_owned());
        }
        let web = self.tool(Tool::WebFetch);
        SandboxInputs {
            writable,
            hidden,
            read_only,
            store: self.workspace.join(".agentfile"),
            scratch: self.scratch.clone(),
            hosts: self.offers(Tool::WebFetch).then(|| web.label.clone()),
            gate_only,
        }
    }

    /// The workspace, resolved.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The home directory `~` expands to, if known.
    pub fn home(&self) -> Option<&Path> {
        self.home.as_deref()
    }

    fn tool(&self, tool: Tool) -> &ToolGate {
        &self.tools[tool as usize]
    }

    /// Whether to offer a built-in tool to the model: enabled, and not certain
    /// to refuse every call (bash without an allowlist under `default_deny`).
    pub fn offers(&self, tool: Tool) -> bool {
        let t = self.tool(tool);
        if matches!(t.enabled, Enabled::Off { .. }) || !self.guards.iter().all(|g| g.0.offers(tool))
        {
            return false;
        }
        match tool {
            Tool::Bash => !(self.default_deny && t.allowlist.is_empty()),
            Tool::WebFetch => !(self.default_deny && t.domains.is_none()),
            _ => true,
        }
    }

    /// Whether to offer an MCP tool: exactly what a call would be judged.
    pub fn offers_mcp(&self, server: &str, tool: &str) -> bool {
        self.judge_mcp(server, tool).is_ok()
            && self.guards.iter().all(|g| g.0.offers_mcp(server, tool))
    }

    /// Whether any tool of this server could be allowed; servers that cannot
    /// are never started.
    pub fn mcp_server_possible(&self, server: &str) -> bool {
        if matches!(self.mcp.enabled, Enabled::Off { .. }) {
            return false;
        }
        if !self.mcp.default_deny && self.mcp.allow.is_empty() {
            return true;
        }
        self.mcp.allow.iter().any(|p| {
            let server_part = p.split_once(':').map_or(p.as_str(), |(s, _)| s);
            wildcard_match(server_part, server)
        })
    }

    /// Judge a call. On success the call's rate-limit slot is taken.
    pub fn check(&self, req: &Request<'_>) -> Result<Permit, Denial> {
        let (name, limit, permit) = match *req {
            Request::Path { tool, path } => {
                self.enabled(tool)?;
                let r = self.resolve(tool.name(), path)?;
                self.judge_path(tool.name(), tool, &r)?;
                (
                    tool.name().to_owned(),
                    self.tool(tool).rate_limit,
                    Permit {
                        path: Some(r),
                        url: None,
                    },
                )
            }
            Request::Bash { command } => {
                self.enabled(Tool::Bash)?;
                self.judge_bash(command)?;
                (
                    "bash".to_owned(),
                    self.tool(Tool::Bash).rate_limit,
                    Permit::default(),
                )
            }
            Request::Fetch { url } => {
                let verdict = self.check_url(url)?;
                (
                    "web_fetch".to_owned(),
                    self.tool(Tool::WebFetch).rate_limit,
                    Permit {
                        path: None,
                        url: Some(verdict),
                    },
                )
            }
            Request::Plain(tool) => {
                self.enabled(tool)?;
                (
                    tool.name().to_owned(),
                    self.tool(tool).rate_limit,
                    Permit::default(),
                )
            }
            Request::Mcp { server, tool } => {
                self.judge_mcp(server, tool)?;
                (
                    format!("mcp:{server}:{tool}"),
                    self.mcp.rate_limit,
                    Permit::default(),
                )
            }
        };
        // A fetch met the guards in `check_url`, as every redirect does.
        if !matches!(req, Request::Fetch { .. }) {
            for g in &self.guards {
                g.0.judge(req, &permit)?;
            }
        }
        if let Some(limit) = limit {
            self.limiter
                .try_acquire(&name, limit, Instant::now())
                .map_err(|wait| {
                    let label = match req {
                        Request::Mcp { .. } => self.mcp.label.clone(),
                        Request::Path { tool, .. } | Request::Plain(tool) => {
                            self.tool(*tool).label.clone()
                        }
                        Request::Bash { .. } => self.tool(Tool::Bash).label.clone(),
                        Request::Fetch { .. } => self.tool(Tool::WebFetch).label.clone(),
                    };
                    denial(
                        match req {
                            Request::Mcp { .. } => "mcp",
                            _ => name.as_str(),
                        },
                        format!("{label}.rate_limit = {limit}"),
                        format!(
                            "{limit} calls in the last minute; try again in {} s",
                            wait.as_secs().max(1)
                        ),
                    )
                })?;
        }
        Ok(permit)
    }

    /// Re-check a URL met while following redirects (no rate-limit slot taken:
    /// it is the same call).
    pub fn check_url(&self, url: &Url) -> Result<UrlVerdict, Denial> {
        self.enabled(Tool::WebFetch)?;
        let t = self.tool(Tool::WebFetch);
        let verdict = web::check_url(url, t.domains.as_deref(), self.default_deny, &t.label)
            .map_err(|(rule, reason)| denial("web_fetch", rule, reason))?;
        if !self.guards.is_empty() {
            let permit = Permit {
                path: None,
                url: Some(verdict.clone()),
            };
            for g in &self.guards {
                g.0.judge(&Request::Fetch { url }, &permit)?;
            }
        }
        Ok(verdict)
    }

    /// Check the addresses a judged host resolved to.
    pub fn check_addrs(
        &self,
        verdict: &UrlVerdict,
        addrs: &[std::net::IpAddr],
    ) -> Result<(), Denial> {
        let label = &self.tool(Tool::WebFetch).label;
        web::check_addrs(label, verdict, addrs)
            .map_err(|(rule, reason)| denial("web_fetch", rule, reason))
    }

    /// Whether `tool` may read a path that is already resolved (no symlinks in
    /// it): `read`'s rules allow it and every guard (an agentrc declaration's
    /// Cedar policies) allows `tool` to read that file. glob and grep filter
    /// what they list and read through this, file by file.
    pub fn readable(&self, tool: Tool, real: &Path) -> bool {
        self.policy_readable(real) && self.guards_file(tool, real, false).is_ok()
    }

    /// [`Gate::readable`] by the policy's `read` rules alone.
    fn policy_readable(&self, real: &Path) -> bool {
        let r = Resolved {
            lexical: real.to_path_buf(),
            real: real.to_path_buf(),
        };
        self.enabled(Tool::Read).is_ok() && self.judge_path("read", Tool::Read, &r).is_ok()
    }

    /// Every guard's word on one file `tool` reads or writes.
    fn guards_file(&self, tool: Tool, real: &Path, writes: bool) -> Result<(), Denial> {
        for g in &self.guards {
            g.0.judge_file(tool, real, writes)?;
        }
        Ok(())
    }

    /// Whether `tool` may show a name it found at an already resolved path
    /// (no symlinks in it): `tool`'s own path rules and every guard allow it,
    /// and no file tool's deny rule matches it — a name denied to any tool
    /// (`~/.ssh/*`) stays hidden. `ls` filters its entries through this; glob
    /// and grep go through [`Gate::readable`], since what they list is then
    /// read.
    pub fn listable(&self, tool: Tool, real: &Path) -> bool {
        let r = Resolved {
            lexical: real.to_path_buf(),
            real: real.to_path_buf(),
        };
        if self.judge_path(tool.name(), tool, &r).is_err()
            || self.guards_file(tool, real, false).is_err()
        {
            return false;
        }
        !Tool::ALL
            .into_iter()
            .filter(|t| t.is_path_tool())
            .any(|t| self.tool(t).deny.iter().any(|d| d.is_match(real)))
    }

    /// Resolve a path the way the gate does, for tools that list what they find.
    pub fn resolve_path(&self, raw: &str) -> Result<Resolved, Denial> {
        self.resolve("read", raw)
    }

    /// Whether a server may read a file its client names (a workflow to
    /// validate, inspect, list or run): inside the workspace once `..` and
    /// symlinks are resolved, outside the session store, and matched by no
    /// `read` deny rule. The workspace is the bound whatever `read` allows
    /// beyond it: a client names workflows, not arbitrary files.
    pub fn workspace_readable(&self, raw: &str) -> Result<Resolved, Denial> {
        let r = self.resolve("read", raw)?;
        if !paths::is_within(&r.real, &self.workspace)
            || !paths::is_within(&r.lexical, &self.workspace)
        {
            return Err(denial(
                "read",
                "read: outside the workspace",
                format!(
                    "`{raw}` is outside the workspace ({})",
                    self.workspace.display()
                ),
            ));
        }
        self.judge_path_denials("read", Tool::Read, &r)?;
        Ok(r)
    }

    fn enabled(&self, tool: Tool) -> Result<(), Denial> {
        match &self.tool(tool).enabled {
            Enabled::On => Ok(()),
            Enabled::Off { rule, reason } => Err(denial(tool.name(), rule.clone(), reason.clone())),
        }
    }

    fn resolve(&self, who: &str, raw: &str) -> Result<Resolved, Denial> {
        self.resolve_from(who, raw, &self.workspace)
    }

    fn resolve_from(&self, who: &str, raw: &str, base: &Path) -> Result<Resolved, Denial> {
        paths::resolve(raw, base, self.home.as_deref()).map_err(|e| {
            denial(
                who,
                format!("{who}: path not understood"),
                format!("`{raw}`: {e}"),
            )
        })
    }

    fn shown(&self, r: &Resolved) -> String {
        paths::display_relative(&r.real, &self.workspace)
    }

    /// The path rules of `tool` applied to a resolved path; `who` is the tool
    /// named in a denial (bash when bash's arguments are judged as reads). A
    /// path of a bash line is judged by the guards too, as bash's.
    fn judge_path(&self, who: &str, tool: Tool, r: &Resolved) -> Result<(), Denial> {
        self.judge_path_rules(who, tool, r)?;
        if who == "bash" {
            self.guards_file(
                Tool::Bash,
                &r.real,
                matches!(tool, Tool::Write | Tool::Edit),
            )?;
        }
        Ok(())
    }

    fn judge_path_rules(&self, who: &str, tool: Tool, r: &Resolved) -> Result<(), Denial> {
        self.enabled(tool).map_err(|mut d| {
            d.tool = who.to_owned();
            d
        })?;
        self.judge_path_denials(who, tool, r)?;
        self.judge_path_allows(who, tool, r)
    }

    /// Whether `p` lies in the running workflow's scratch folder.
    fn in_scratch(&self, p: &Path) -> bool {
        self.scratch.as_deref().is_some_and(|s| p.starts_with(s))
    }

    /// What refuses a path whatever allows it: the session store, the
    /// protected folders and `.git` to writes, `tool`'s deny rules.
    fn judge_path_denials(&self, who: &str, tool: Tool, r: &Resolved) -> Result<(), Denial> {
        let t = self.tool(tool);
        let store = self.workspace.join(".agentfile");
        // The run's scratch folder is carved out of the store: a path is in
        // it when both its spelling and its real location are (a symlink in
        // the scratch folder to the session database stays denied).
        let in_store = |p: &Path| p.starts_with(&store) && !self.in_scratch(p);
        if in_store(&r.real) || in_store(&r.lexical) {
            return Err(denial(
                who,
                "built-in: $WORKSPACE/.agentfile is the session store",
                format!("`{}` is inside the session and memory store", self.shown(r)),
            ));
        }
        if matches!(tool, Tool::Write | Tool::Edit) {
            for (dir, why) in &self.protected {
                if r.real.starts_with(dir) || r.lexical.starts_with(dir) {
                    return Err(denial(
                        who,
                        why.clone(),
                        format!(
                            "`{}` is protected during the run: it decides what the run may do; a person changes it between runs",
                            self.shown(r)
                        ),
                    ));
                }
            }
            let git = self.workspace.join(".git");
            if r.real.starts_with(&git) || r.lexical.starts_with(&git) {
                return Err(denial(
                    who,
                    "built-in: $WORKSPACE/.git is not writable",
                    format!(
                        "`{}`: git hooks and config there would run code later",
                        self.shown(r)
                    ),
                ));
            }
        }
        for d in &t.deny {
            if d.is_match(&r.real) || d.is_match(&r.lexical) {
                return Err(denial(
                    who,
                    format!("{}.deny {:?}", t.label, d.source),
                    format!(
                        "`{}` matches a deny pattern of [{}]",
                        self.shown(r),
                        t.label
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Whether `tool`'s allow rules (or the workspace, where no rule
    /// restricts) cover a path.
    fn judge_path_allows(&self, who: &str, tool: Tool, r: &Resolved) -> Result<(), Denial> {
        let t = self.tool(tool);
        if t.allow.iter().any(|a| a.is_match(&r.real)) {
            return Ok(());
        }
        // The workflow's own file contract: allowed as an `allowed_dirs`
        // entry is (deny rules above still won).
        if tool.is_path_tool() && self.in_scratch(&r.real) && self.in_scratch(&r.lexical) {
            return Ok(());
        }
        if self.safe_default {
            return Err(denial(
                who,
                format!(
                    "no policy file: {} is limited to the workspace",
                    tool.name()
                ),
                format!("`{}` is outside the workspace", self.shown(r)),
            ));
        }
        if self.default_deny {
            return Err(denial(
                who,
                "default_deny = true",
                format!("`{}` is not covered by [{}] allow", self.shown(r), t.label),
            ));
        }
        // An allow list restricts under default_deny = false too.
        if t.restricted {
            return Err(denial(
                who,
                format!("{}.allow", t.label),
                format!("`{}` is not covered by [{}] allow", self.shown(r), t.label),
            ));
        }
        if paths::is_within(&r.real, &self.workspace) {
            return Ok(());
        }
        Err(denial(
            who,
            format!("{}: outside the workspace", t.label),
            format!(
                "`{}` is outside the workspace and no [{}] allow pattern names it",
                self.shown(r),
                t.label
            ),
        ))
    }

    fn judge_mcp(&self, server: &str, tool: &str) -> Result<(), Denial> {
        let m = &self.mcp;
        if let Enabled::Off { rule, reason } = &m.enabled {
            return Err(denial("mcp", rule.clone(), reason.clone()));
        }
        let key = format!("{server}:{tool}");
        for p in &m.deny {
            if wildcard_match(p, &key) {
                return Err(denial(
                    "mcp",
                    format!("{}.deny {p:?}", m.label),
                    format!("`{key}` matches a deny pattern"),
                ));
            }
        }
        if m.allow.iter().any(|p| wildcard_match(p, &key)) {
            return Ok(());
        }
        if m.default_deny {
            return Err(denial(
                "mcp",
                "default_deny = true",
                format!("`{key}` is not in [{}] allow", m.label),
            ));
        }
        // An allow list says what is allowed, under default_deny = false too.
        if !m.allow.is_empty() {
            return Err(denial(
                "mcp",
                format!("{}.allow", m.label),
                format!("`{key}` is not in [{}] allow", m.label),
            ));
        }
        Ok(())
    }

    fn judge_bash(&self, line: &str) -> Result<(), Denial> {
        let t = self.tool(Tool::Bash);
        let analysis: Analysis = bash::analyze(line, self.home.as_deref())
            .map_err(|u| denial("bash", "bash: the command cannot be checked", u.0))?;
        let commands: Vec<&bash::CommandUse> = analysis.commands().collect();
        let n = commands.len();
        let nth = |i: usize| {
            if n > 1 {
                format!(" (command {} of {n})", i + 1)
            } else {
                String::new()
            }
        };

        // 1. The denylist, against the whole line, every pipeline, every command.
        let whole = line.split_whitespace().collect::<Vec<_>>().join(" ");
        let deny_hit = |text: &str| t.denylist.iter().find(|p| wildcard_match(p, text));
        for text in std::iter::once(&whole).chain(analysis.pipelines.iter()) {
            if let Some(p) = deny_hit(text) {
                return Err(denial(
                    "bash",
                    format!("{}.denylist {p:?}", t.label),
                    format!("`{text}`"),
                ));
            }
        }
        for (i, c) in commands.iter().enumerate() {
            for form in c.deny_forms() {
                if let Some(p) = deny_hit(&form) {
                    return Err(denial(
                        "bash",
                        format!("{}.denylist {p:?}", t.label),
                        format!("`{}`{}", c.text, nth(i)),
                    ));
                }
            }
        }

        // 2. The allowlist, for every command that runs (wrappers aside).
        for (i, c) in commands.iter().enumerate() {
            if c.transparent {
                continue;
            }
            if t.allowlist.is_empty() {
                if self.default_deny {
                    return Err(denial(
                        "bash",
                        "default_deny = true",
                        format!(
                            "[{}] has no allowlist, so `{}` may not run{}",
                            t.label,
                            c.text,
                            nth(i)
                        ),
                    ));
                }
            } else if !t.allowlist.iter().any(|p| wildcard_match(p, &c.text)) {
                return Err(denial(
                    "bash",
                    format!("{}.allowlist", t.label),
                    format!("`{}` matches no allowlist pattern{}", c.text, nth(i)),
                ));
            }
        }

        // 3. Arguments only known at run time, for commands that open files.
        for (i, c) in commands.iter().enumerate() {
            if let Some(why) = &c.dynamic
                && !c.is_no_file()
            {
                return Err(denial(
                    "bash",
                    "bash: arguments must be known before the command runs",
                    format!(
                        "`{}`: {why}, so the files it names cannot be checked{}",
                        c.text,
                        nth(i)
                    ),
                ));
            }
        }

        // 4. Paths: arguments against read, redirections against read/write,
        //    relative to the workspace and to every directory a `cd` may reach.
        let mut bases = vec![self.workspace.clone()];
        for item in &analysis.items {
            if let Item::Cd(v) = item {
                let mut next = Vec::new();
                for base in &bases {
                    let r = self.resolve_from("bash", &v.text, base)?;
                    self.judge_path("bash", Tool::Read, &r)?;
                    next.push(r.real);
                }
                for b in next {
                    if !bases.contains(&b) {
                        bases.push(b);
                    }
                }
            }
        }
        let mut escapes = None;
        for item in &analysis.items {
            match item {
                Item::Command(c) => {
                    let mut named = Vec::new();
                    // `echo /etc/passwd` prints a string; `test` and the rest
                    // look at what they name.
                    let blind = c.is_no_file() && !matches!(bash::basename(&c.name), "test" | "[");
                    for a in c.args.iter().filter(|_| !blind) {
                        named.extend(self.judge_arg(a, &bases)?);
                    }
                    self.judge_command_paths(c, &named, &bases, &mut escapes)?;
                }
                Item::Paths(vs) => {
                    for a in vs {
                        self.judge_arg(a, &bases)?;
                    }
                }
                Item::Read(v) => self.judge_redirect(Tool::Read, v, &bases)?,
                Item::Write(v) => self.judge_redirect(Tool::Write, v, &bases)?,
                Item::Cd(_) => {}
            }
        }
        Ok(())
    }

    fn judge_redirect(&self, tool: Tool, v: &Val, bases: &[PathBuf]) -> Result<(), Denial> {
        let t = v.text.as_str();
        if matches!(
            t,
            "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/stdin"
        ) || t
            .strip_prefix("/dev/fd/")
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
        {
            return Ok(());
        }
        for base in bases {
            let r = self.resolve_from("bash", t, base)?;
            self.judge_path("bash", tool, &r)?;
        }
        Ok(())
    }

    /// Judge one word that may name files, as a read; returns the real paths
    /// it names (for the command-level checks).
    fn judge_arg(&self, v: &Val, bases: &[PathBuf]) -> Result<Vec<PathBuf>, Denial> {
        let mut named = Vec::new();
        if v.dynamic {
            return Ok(named);
        }
        for cand in path_candidates(&v.text) {
            if v.glob && cand == v.text && cand.contains(['*', '?', '[']) {
                for base in bases {
                    let matches = self.expand_glob(&cand, base)?;
                    if matches.is_empty() {
                        // No match: bash passes the word as it is.
                        named.extend(self.judge_literal(&cand, base)?);
                    }
                    for m in matches {
                        let r = self.resolve_from("bash", &m, base)?;
                        self.judge_path("bash", Tool::Read, &r)?;
                        named.push(r.real);
                    }
                }
                continue;
            }
            for base in bases {
                named.extend(self.judge_literal(&cand, base)?);
            }
        }
        Ok(named)
    }

    fn judge_literal(&self, cand: &str, base: &Path) -> Result<Option<PathBuf>, Denial> {
        let looks_like_path = cand.starts_with('/')
            || cand.starts_with('~')
            || cand.contains('/')
            || cand == "."
            || cand.contains("..");
        let exists = || std::fs::symlink_metadata(base.join(cand)).is_ok();
        if looks_like_path || exists() {
            let r = self.resolve_from("bash", cand, base)?;
            self.judge_path("bash", Tool::Read, &r)?;
            return Ok(Some(r.real));
        }
        Ok(None)
    }

    /// What a command's arguments name, beyond reading: what it may write
    /// must stay out of the protected folders ([`Gate::judge_writes`]); and a
    /// command that may follow symlinks while recursing must not be given a
    /// directory holding a symlink to where `read` may not read.
    fn judge_command_paths(
        &self,
        c: &bash::CommandUse,
        named: &[PathBuf],
        bases: &[PathBuf],
        escapes: &mut Option<Escapes>,
    ) -> Result<(), Denial> {
        self.judge_writes(c, bases)?;
        if recursion_is_safe(c) {
            return Ok(());
        }
        let mut dirs: Vec<&PathBuf> = named.iter().filter(|p| p.is_dir()).collect();
        if recurses_from_cwd(c) {
            dirs.extend(bases.iter());
        }
        if dirs.is_empty() {
            return Ok(());
        }
        let found = escapes.get_or_insert_with(|| self.scan_escapes());
        for d in dirs {
            if let Some(link) = found.links.iter().find(|l| l.starts_with(d)) {
                return Err(denial(
                    "bash",
                    "bash: symlink out of the allowed paths",
                    format!(
                        "`{}` may follow `{}`, a symlink under `{}` to a place `read` may not read",
                        c.text,
                        paths::display_relative(link, &self.workspace),
                        paths::display_relative(d, &self.workspace)
                    ),
                ));
            }
            if !found.complete && d.starts_with(&self.workspace) {
                return Err(denial(
                    "bash",
                    "bash: symlink out of the allowed paths",
                    format!(
                        "`{}` may follow symlinks, and the workspace has too many files to check them all",
                        c.text
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The folders no bash command may write for this run: the run's
    /// protected folders (a workflow's `scripts/`), and `.git` for every
    /// command but git (hooks and config there run code later; git itself
    /// never writes a `.git` path of its work tree).
    fn write_zones(&self, git: bool) -> Vec<(PathBuf, String)> {
        let mut zones = self.protected.clone();
        if !git {
            zones.push((
                self.workspace.join(".git"),
                "built-in: $WORKSPACE/.git is not writable".to_owned(),
            ));
        }
        zones
    }

    /// What a command may write ([`writes::classify`]) against the protected
    /// folders: a path it writes inside one; a folder it writes everything
    /// below (`rm -r`, `tar -x`, `git checkout`) that holds one; running in
    /// one; or, for a command that runs commands or computes the names it
    /// writes (`sed 'e …'`, `awk 'system(…)'`), any protected folder at all.
    fn judge_writes(&self, c: &bash::CommandUse, bases: &[PathBuf]) -> Result<(), Denial> {
        let w = writes::classify(c);
        if w.git && w.repo && !self.git_writable {
            let git = self.workspace.join(".git");
            if let Some((_, rule)) = self.protected.iter().find(|(d, _)| *d == git)
                && exists(&git)
            {
                return Err(denial(
                    "bash",
                    rule.clone(),
                    format!(
                        "`{}` may write the repository in `.git`, a control folder (its hooks and config run code when a person next uses git); to let this workflow commit, name it in policy.toml: [control] writable = [\".git\"]",
                        c.text
                    ),
                ));
            }
        }
        let zones = self.write_zones(w.git);
        if zones.is_empty() && self.guards.is_empty() {
            return Ok(());
        }
        let judge = WriteJudge {
            gate: self,
            command: &c.text,
            zones: &zones,
            bases,
        };
        judge.unnamed(&w)?;
        judge.beyond(w.beyond.as_ref())?;
        for t in &w.targets {
            judge.target(t)?;
        }
        Ok(())
    }

    /// Where a word a command writes may point: each of its path candidates
    /// (globs expanded) against each base.
    fn write_paths(&self, v: &Val, bases: &[PathBuf]) -> Result<Vec<Resolved>, Denial> {
        let mut out = Vec::new();
        if v.dynamic {
            // Refused before, unless the command opens no files.
            return Ok(out);
        }
        for cand in path_candidates(&v.text) {
            for base in bases {
                if v.glob && cand == v.text && cand.contains(['*', '?', '[']) {
                    for m in self.expand_glob(&cand, base)? {
                        out.push(self.resolve_from("bash", &m, base)?);
                    }
                }
                out.push(self.resolve_from("bash", &cand, base)?);
            }
        }
        Ok(out)
    }

    /// The names a source of `cp`/`mv`/`ln`/`rsync` takes in a destination
    /// folder; `None` for one whose contents land there (`src/.`).
    fn source_names(
        &self,
        v: &Val,
        bases: &[PathBuf],
    ) -> Result<Vec<Option<std::ffi::OsString>>, Denial> {
        let name_of = |t: &str| -> Option<std::ffi::OsString> {
            let t = t.trim_end_matches('/');
            if t.is_empty() || t == "." || t == ".." || t.ends_with("/.") || t.ends_with("/..") {
                return None;
            }
            Path::new(t).file_name().map(|n| n.to_os_string())
        };
        let mut out = vec![name_of(&v.text)];
        if v.glob && !v.dynamic && v.text.contains(['*', '?', '[']) {
            for base in bases {
                for m in self.expand_glob(&v.text, base)? {
                    out.push(name_of(&m));
                }
            }
        }
        out.dedup();
        Ok(out)
    }

    /// Every symlink in the workspace whose target `read` may not read.
    fn scan_escapes(&self) -> Escapes {
        let mut out = Escapes {
            links: Vec::new(),
            complete: true,
        };
        let mut stack = vec![self.workspace.clone()];
        let mut seen = 0usize;
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                seen += 1;
                if seen > MAX_SCAN_ENTRIES {
                    out.complete = false;
                    return out;
                }
                let Ok(ft) = e.file_type() else { continue };
                let p = e.path();
                if ft.is_symlink() {
                    let readable =
                        paths::realpath(&p).is_ok_and(|real| self.policy_readable(&real));
                    if !readable {
                        out.links.push(p);
                    }
                } else if ft.is_dir() {
                    stack.push(p);
                }
            }
        }
        out
    }

    /// Expand a bash glob against the file system the way bash would (a superset:
    /// dotfiles, `.` and `..` included), returning absolute paths. The literal
    /// directory before the first glob segment is judged too.
    fn expand_glob(&self, pattern: &str, base: &Path) -> Result<Vec<String>, Denial> {
        let abs = paths::absolute(pattern, base, self.home.as_deref()).map_err(|e| {
            denial(
                "bash",
                "bash: path not understood",
                format!("`{pattern}`: {e}"),
            )
        })?;
        let text = abs.display().to_string();
        let segs: Vec<&str> = text.split('/').filter(|s| !s.is_empty()).collect();
        let first = segs
            .iter()
            .position(|s| s.contains(['*', '?', '[']))
            .unwrap_or(segs.len());
        let prefix = format!("/{}", segs[..first].join("/"));
        let r = self.resolve_from("bash", &prefix, base)?;
        self.judge_path("bash", Tool::Read, &r)?;
        let mut current = vec![PathBuf::from(&prefix)];
        let mut visits = 0usize;
        for seg in &segs[first..] {
            let mut next = Vec::new();
            let is_glob = seg.contains(['*', '?', '[']);
            let matcher = if is_glob {
                match globset::GlobBuilder::new(seg)
                    .literal_separator(true)
                    .build()
                {
                    Ok(g) => Some(g.compile_matcher()),
                    // Not a valid glob: bash takes it literally.
                    Err(_) => None,
                }
            } else {
                None
            };
            for dir in &current {
                let Some(m) = &matcher else {
                    next.push(dir.join(seg));
                    continue;
                };
                if seg.starts_with('.') {
                    // `.*` matches `.` and `..` in bash without globskipdots.
                    for special in [".", ".."] {
                        if m.is_match(special) {
                            next.push(dir.join(special));
                        }
                    }
                }
                let Ok(entries) = std::fs::read_dir(dir) else {
                    continue;
                };
                for e in entries.flatten() {
                    visits += 1;
                    if visits > MAX_GLOB_VISITS {
                        return Err(denial(
                            "bash",
                            "bash: the command cannot be checked",
                            format!("the glob `{pattern}` matches too many files to check"),
                        ));
                    }
                    if m.is_match(e.file_name()) {
                        next.push(e.path());
                    }
                }
            }
            current = next;
            if current.is_empty() {
                break;
            }
        }
        if current.len() == 1 && first == segs.len() {
            return Ok(Vec::new());
        }
        Ok(current
            .into_iter()
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .map(|p| p.display().to_string())
            .collect())
    }
}

/// One bash command's writes judged against the protected folders
/// (`zones`: each folder with the rule that protects it) and the guards.
struct WriteJudge<'a> {
    gate: &'a Gate,
    /// The command as written.
    command: &'a str,
    zones: &'a [(PathBuf, String)],
    /// The folders it may run in.
    bases: &'a [PathBuf],
}

impl WriteJudge<'_> {
    fn refuse(&self, rule: &str, reason: String) -> Result<(), Denial> {
        Err(denial("bash", rule.to_owned(), reason))
    }

    fn shown(&self, p: &Path) -> String {
        paths::display_relative(p, &self.gate.workspace)
    }

    /// Files it may write without naming them: anywhere, or (a command not
    /// in the table) where it runs.
    fn unnamed(&self, w: &writes::Writes) -> Result<(), Denial> {
        if let Some(Beyond::Anywhere(why)) = &w.beyond
            && let Some((dir, rule)) = self.zones.iter().find(|(d, _)| exists(d))
        {
            return self.refuse(
                rule,
                format!(
                    "`{}` may write files it does not name: {why}; `{}` is a protected folder",
                    self.command,
                    self.shown(dir)
                ),
            );
        }
        if !w.known {
            for b in self.bases {
                if let Some((dir, rule)) = self.zones.iter().find(|(d, _)| b.starts_with(d)) {
                    return self.refuse(
                        rule,
                        format!(
                            "`{}` runs in `{}`, inside the protected folder `{}`, where it may write files it does not name; run it from outside the folder",
                            self.command,
                            self.shown(b),
                            self.shown(dir)
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    /// A place written, with everything below it when `deep`: the zone it
    /// meets, its rule, and whether the zone is below the place.
    fn hit(&self, p: &Path, deep: bool) -> Option<(&PathBuf, &String, bool)> {
        self.zones.iter().find_map(|(d, rule)| {
            if p.starts_with(d) {
                Some((d, rule, false))
            } else if deep && d.starts_with(p) && exists(d) {
                Some((d, rule, true))
            } else {
                None
            }
        })
    }

    /// One place written (`how` says why, for the message).
    fn check(&self, r: &Resolved, deep: bool, how: &str) -> Result<(), Denial> {
        for p in [&r.real, &r.lexical] {
            if let Some((dir, rule, below)) = self.hit(p, deep) {
                let shown = self.shown(p);
                let zone = self.shown(dir);
                let reason = if below {
                    format!(
                        "`{}` may write anything under `{shown}`{how}, which holds the protected folder `{zone}`",
                        self.command
                    )
                } else {
                    format!(
                        "`{}` may write `{shown}`{how}, in the protected folder `{zone}`",
                        self.command
                    )
                };
                return self.refuse(rule, reason);
            }
        }
        // What bash writes is the guards' to judge too (Cedar's
        // `filesystem.write`).
        self.gate.guards_file(Tool::Bash, &r.real, true)
    }

    /// What it writes under the folder it runs in, or its whole repository.
    fn beyond(&self, beyond: Option<&Beyond>) -> Result<(), Denial> {
        match beyond {
            Some(Beyond::Cwd(why)) => {
                for b in self.bases {
                    self.check(
                        &Resolved {
                            lexical: b.clone(),
                            real: b.clone(),
                        },
                        true,
                        &format!(
                            " ({why}; give it a folder to write in, such as `-C DIR` or `-d DIR`, or name the file)"
                        ),
                    )?;
                }
            }
            Some(Beyond::Repo(why)) => {
                for b in self.bases {
                    let top = repo_top(b);
                    self.check(
                        &Resolved {
                            lexical: top.clone(),
                            real: top,
                        },
                        true,
                        &format!(" ({why})"),
                    )?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn target(&self, t: &Target) -> Result<(), Denial> {
        match t {
            Target::Path { word, deep } => {
                for r in self.gate.write_paths(word, self.bases)? {
                    self.check(&r, *deep, "")?;
                }
            }
            Target::Into {
                sources,
                dest,
                deep,
                contents,
                parents,
            } => {
                for d in self.gate.write_paths(dest, self.bases)? {
                    self.check(&d, false, "")?;
                    if *parents {
                        self.copied_with_parents(sources, &d, *deep)?;
                    } else if *contents || !d.real.is_dir() {
                        self.check(&d, *deep, "")?;
                    } else {
                        self.copied_into_dir(sources, &d, *deep)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// `cp --parents a/b d` writes d/a/b.
    fn copied_with_parents(&self, sources: &[Val], d: &Resolved, deep: bool) -> Result<(), Denial> {
        for s in sources {
            let t = s.text.as_str();
            let rel = t.split_once("/./").map_or(t, |(_, r)| r);
            let rel = rel.trim_start_matches('/');
            let lexical = paths::normalize(&d.lexical.join(rel));
            let real = paths::realpath(&d.real.join(rel))
                .unwrap_or_else(|_| paths::normalize(&d.real.join(rel)));
            self.check(&Resolved { lexical, real }, deep, "")?;
        }
        Ok(())
    }

    /// Each source lands in the folder `d` under its own name.
    fn copied_into_dir(&self, sources: &[Val], d: &Resolved, deep: bool) -> Result<(), Denial> {
        for s in sources {
            for name in self.gate.source_names(s, self.bases)? {
                let Some(name) = name else {
                    // `src/.`: what is in src lands in d.
                    self.check(d, deep, "")?;
                    continue;
                };
                let lexical = d.lexical.join(&name);
                let real =
                    paths::realpath(&d.real.join(&name)).unwrap_or_else(|_| d.real.join(&name));
                self.check(&Resolved { lexical, real }, deep, "")?;
            }
        }
        Ok(())
    }
}

fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// The top of the git work tree holding `dir` (the nearest folder at or
/// above it with a `.git`), else `dir` itself.
fn repo_top(dir: &Path) -> PathBuf {
    let mut d = Some(dir);
    while let Some(p) = d {
        if std::fs::symlink_metadata(p.join(".git")).is_ok() {
            return p.to_path_buf();
        }
        d = p.parent();
    }
    dir.to_path_buf()
}

fn policy_path(policy: &Policy) -> PathBuf {
    policy
        .source()
        .map_or_else(|| PathBuf::from("<safe default policy>"), Path::to_path_buf)
}

/// The parts of a word that may be paths: the word, what follows `=`, the
/// pieces of `:`/`,` lists, an option's attached value (`-f/etc/x`), and, in a
/// word with spaces (a quoted script such as `sed 'w /tmp/x'`), each token.
/// URLs are not paths, except `file://` ones.
fn path_candidates(word: &str) -> Vec<String> {
    let mut out = Vec::new();
    add_candidates(word, &mut out);
    if word.contains(char::is_whitespace) {
        for tok in word.split_whitespace() {
            add_candidates(
                tok.trim_matches(|c: char| "\"'`(){}[];,<>|&".contains(c)),
                &mut out,
            );
        }
    }
    // Bare options (`-la`, `--verbose`) are not paths.
    out.retain(|c| !c.is_empty() && (!c.starts_with('-') || c.contains(['/', '~'])));
    out.sort();
    out.dedup();
    out
}

fn add_candidates(t: &str, out: &mut Vec<String>) {
    if t.is_empty() {
        return;
    }
    if let Some(scheme_end) = t.find("://") {
        let scheme = &t[..scheme_end];
        let is_scheme = scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c));
        if is_scheme {
            if scheme.eq_ignore_ascii_case("file") {
                out.push(t[scheme_end + 3..].to_owned());
            }
            return;
        }
    }
    out.push(t.to_owned());
    // `key=value`, then lists: `a,b`, `PATH`-like `a:b`. Each piece may be a
    // URL again, so it is judged on its own.
    if let Some((_, value)) = t.split_once('=') {
        add_candidates(value, out);
    } else if t.contains(',') {
        for piece in t.split(',') {
            add_candidates(piece, out);
        }
    } else if t.contains(':') {
        for piece in t.split(':') {
            add_candidates(piece, out);
        }
    } else if t.starts_with('-')
        && let Some(i) = t.find(['/', '~', '.'])
        && i > 0
    {
        // An option with its value attached: `-I/usr/include`, `-f../x`.
        add_candidates(&t[i..], out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run's scratch folder is the one part of `.agentfile/` the file
    /// tools may use: by its spelling and by its real location, under a
    /// restrictive allow list too, deny rules still winning.
    #[test]
    fn the_run_scratch_folder_is_the_only_opening_in_the_store() {
        let d = std::env::temp_dir().join(format!("agentfile-scratch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let scratch = d.join(".agentfile/runs/s1/fs");
        std::fs::create_dir_all(&scratch).unwrap();
        std::fs::create_dir_all(d.join(".agentfile/runs/s2/fs")).unwrap();
        std::fs::write(d.join(".agentfile/sessions.db"), "db").unwrap();
        std::os::unix::fs::symlink(d.join(".agentfile/sessions.db"), scratch.join("db")).unwrap();
        std::os::unix::fs::symlink(d.join(".agentfile"), scratch.join("store")).unwrap();
        let policy_text =
            "[read]\nallow = [\"$WORKSPACE/src/**\"]\n[write]\ndeny = [\"**/*.secret\"]\n";
        let mut p = Policy::parse(policy_text, Path::new("policy.toml")).unwrap();
        p.scratch_for_run(scratch.clone());
        let g = p.bind(&d, None).unwrap();
        let ok = |tool: Tool, path: &str| g.check(&Request::Path { tool, path }).is_ok();
        let fs = ".agentfile/runs/s1/fs";
        assert!(
            ok(Tool::Read, &format!("{fs}/source")),
            "inside, though [read] allow names only src/"
        );
        assert!(ok(Tool::Write, &format!("{fs}/report.md")));
        assert!(ok(Tool::Edit, &format!("{fs}/sub/x")));
        assert!(ok(Tool::Ls, fs));
        assert!(ok(
            Tool::Read,
            &scratch.join("source").display().to_string()
        ));
        assert!(
            !ok(Tool::Write, &format!("{fs}/x.secret")),
            "deny still wins"
        );
        for path in [
            ".agentfile/sessions.db".to_owned(),
            ".agentfile/runs/s1".to_owned(),
            ".agentfile/runs/s1/fs.staging/x".to_owned(),
            ".agentfile/runs/s2/fs/x".to_owned(),
            format!("{fs}/../../s2/fs/x"),
            format!("{fs}/db"),
            format!("{fs}/store/sessions.db"),
        ] {
            assert!(!ok(Tool::Read, &path), "{path}");
            assert!(!ok(Tool::Write, &path), "{path}");
        }
        // Without the opening, the scratch folder is the store's.
        let g = Policy::parse(policy_text, Path::new("policy.toml"))
            .unwrap()
            .bind(&d, None)
            .unwrap();
        assert!(
            g.check(&Request::Path {
                tool: Tool::Write,
                path: &format!("{fs}/report.md")
            })
            .is_err()
        );
        // A scratch folder outside the store opens nothing.
        let mut p = Policy::parse(policy_text, Path::new("policy.toml")).unwrap();
        p.scratch_for_run(d.join("elsewhere"));
        let g = p.bind(&d, None).unwrap();
        assert!(
            g.check(&Request::Path {
                tool: Tool::Read,
                path: "elsewhere/x"
            })
            .is_err()
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn candidates() {
        assert_eq!(
            path_candidates("--file=/etc/x"),
            ["--file=/etc/x", "/etc/x"]
        );
        assert_eq!(
            path_candidates("-I/usr/include"),
            ["-I/usr/include", "/usr/include"]
        );
        assert_eq!(path_candidates("https://x.com/a"), Vec::<String>::new());
        assert_eq!(path_candidates("file:///etc/passwd"), ["/etc/passwd"]);
        assert_eq!(path_candidates("a:b"), ["a", "a:b", "b"]);
        assert_eq!(path_candidates("-la"), Vec::<String>::new());
        assert_eq!(path_candidates("w /tmp/x"), ["/tmp/x", "w", "w /tmp/x"]);
        assert_eq!(
            path_candidates("--url=https://x.com/a:b"),
            ["--url=https://x.com/a:b"]
        );
        assert_eq!(
            path_candidates("PATH=/x:y,z"),
            ["/x", "/x:y", "/x:y,z", "PATH=/x:y,z", "y", "z"]
        );
        assert_eq!(
            path_candidates("print > \"/etc/x\"}"),
            ["/etc/x", "print", "print > \"/etc/x\"}"]
        );
    }

    /// A workspace with `.git`, a protected `scripts/`, and files to copy.
    fn protected_gate(name: &str) -> (PathBuf, Gate) {
        let ws = std::env::temp_dir().join(format!("af-writes-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&ws);
        for d in [".git/hooks", "scripts", "src", "evil/scripts", "out"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        for f in [
            "scripts/publish.sh",
            "src/a.txt",
            "evil/scripts/publish.sh",
            "p.diff",
        ] {
            std::fs::write(ws.join(f), "x\n").unwrap();
        }
        let ws = ws.canonicalize().unwrap();
        let mut policy = Policy::parse(
            "[bash]\nallowlist = [\"*\"]\n[write]\nallow = [\"$WORKSPACE/**\"]\n",
            Path::new("policy.toml"),
        )
        .unwrap();
        policy.protect_for_run(ws.join("scripts"), "the workflow's scripts/");
        let gate = policy.bind(&ws, None).unwrap();
        (ws, gate)
    }

    #[test]
    fn commands_may_not_write_protected_folders() {
        let (ws, gate) = protected_gate("deny");
        let check = |line: &str| gate.check(&Request::Bash { command: line });
        let mut wrong = Vec::new();
        for line in [
            "sed -i 1ax scripts/publish.sh",
            "sed -i -e 1ax scripts/*.sh",
            "cp src/a.txt scripts/publish.sh",
            "cp src/a.txt scripts",
            "cp -r evil/scripts .",
            "cp -r evil/. .",
            "cp -rT evil .",
            "rsync -R evil/./scripts/publish.sh .",
            "ln scripts/publish.sh hard",
            "rsync -a evil/ .",
            "mv scripts x",
            "ln -sf src/a.txt scripts/publish.sh",
            "tee scripts/new.sh",
            "dd if=src/a.txt of=scripts/publish.sh",
            "truncate -s0 scripts/publish.sh",
            "rm -rf .",
            "chmod -R 777 .",
            "find . -name '*.sh' -delete",
            "patch -p0 -i p.diff",
            "patch scripts/publish.sh p.diff",
            "tar -xf a.tar",
            "unzip a.zip",
            "git apply p.diff",
            "git checkout main",
            "cd scripts && touch new",
            "cd scripts; sed -i 1ax publish.sh",
            "sed -e 1eid src/a.txt",
            "sed 's/x/id/e' src/a.txt",
            "sed -n 'w scripts/publish.sh' src/a.txt",
            "awk '{ system(\"id\") }' src/a.txt",
            "awk '{ print > \"scripts/publish.sh\" }' src/a.txt",
            "awk -i inplace 1 scripts/publish.sh",
            "perl -pi -e s/x/y/ scripts/publish.sh",
            "python3 tool.py scripts/publish.sh",
            "OUT=scripts/publish.sh make",
            "sort -o scripts/publish.sh src/a.txt",
            "cp src/a.txt .git/hooks/pre-commit",
            "tar -xf a.tar -C .git",
        ] {
            match check(line) {
                Ok(_) => wrong.push(format!("{line}: allowed")),
                Err(d) => {
                    if !(d.rule.contains("scripts/") || d.rule.contains(".git"))
                        || !d.reason.contains("protected folder")
                    {
                        wrong.push(format!("{line}: {d:?}"));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
        // `-execdir` runs in the folders found: its relative paths are not
        // the workspace's.
        let d = check("find . -name publish.sh -execdir sed -i 1ax publish.sh ';'").unwrap_err();
        assert!(d.rule.contains("known before the command runs"), "{d:?}");
        let _ = std::fs::remove_dir_all(&ws);
    }

    #[test]
    fn reads_and_writes_elsewhere_still_pass() {
        let (ws, gate) = protected_gate("allow");
        let check = |line: &str| gate.check(&Request::Bash { command: line });
        for line in [
            "cat scripts/publish.sh",
            "grep -rn x scripts/",
            "head -1 scripts/*.sh",
            "sed -n 1p scripts/publish.sh",
            "sed s/x/y/ scripts/publish.sh",
            "awk '$1 > 1 {print $1}' scripts/publish.sh",
            "sort scripts/publish.sh",
            "diff scripts/publish.sh src/a.txt",
            "bash scripts/publish.sh",
            "cp scripts/publish.sh out/",
            "cp src/a.txt .",
            "cp -r src out/src2",
            "sed -i 1ax src/a.txt",
            "tee out/log",
            "mv src/a.txt out/",
            "rm -rf out",
            "tar -xf a.tar -C out",
            "unzip a.zip -d out",
            "patch src/a.txt p.diff",
            "git status",
            "git log -- scripts",
            "git add scripts/publish.sh",
            "git diff",
            "cd scripts && cat publish.sh",
            "cd scripts && ls",
            "cd scripts && sed -n 1p publish.sh",
            "find scripts -name '*.sh'",
            "cat .git/config",
            "cp .git/config out/config",
        ] {
            if let Err(d) = check(line) {
                panic!("{line}: {d:?}");
            }
        }
        let _ = std::fs::remove_dir_all(&ws);
    }
}
