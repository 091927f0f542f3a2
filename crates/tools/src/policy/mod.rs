//! The security policy: `policy.toml`, loaded, validated, and compiled into the one
//! [`Gate`] every tool call passes through.
//!
//! # The file
//!
//! The seed's format (CONTRACT §4), with the predecessor's `[tools.read]` spelling
//! accepted as well as `[read]`:
//!
//! ```toml
//! default_deny = true
//! [read]
//! allow = ["$WORKSPACE/**"]
//! deny = ["~/.ssh/*"]
//! [bash]
//! allowlist = ["git log *", "cargo test *"]
//! denylist = ["sudo *"]
//! [web_fetch]
//! allow_domains = ["docs.rs", "*.github.com"]
//! rate_limit = 10          # calls per minute
//! [mcp]
//! allow = ["github:*", "fs:read_file"]
//! ```
//!
//! Sections: `read write edit glob grep ls bash web_fetch web_search memory_read
//! memory_write mcp`. Keys: `enabled`, `allow`/`deny` (path patterns; for `[mcp]`
//! `server:tool` patterns, `allowed_tools` being an alias of `allow`),
//! `allowlist`/`denylist` (bash), `allow_domains` (web), `rate_limit` (any tool),
//! and `default_deny` at the top (and inside `[mcp]`). `$WORKSPACE` and `~` expand
//! in patterns; a relative pattern is anchored at the workspace. Top-level
//! `allowed_dirs = [...]` (from the predecessor's later versions) adds directories
//! every file tool may use.
//!
//! # Made safe
//!
//! The seed's semantics, with these deliberate deviations so that a forgotten line
//! never opens the machine:
//!
//! - **No policy file is the safe default, never allow-all**: read, write, edit,
//!   glob, grep and ls inside the workspace only; bash off; web_fetch and
//!   web_search off; memory on; MCP tools denied. See [`Policy::safe_default`].
//! - **An invalid file is an error naming `path:line:col`**, and nothing runs. A
//!   section whose name is close to a tool's (`[bassh]`) is an error with a
//!   did-you-mean; unknown keys inside tool sections are errors. Foreign sections
//!   that are nothing like a tool (`[security]` in the predecessor's example) are
//!   tolerated and listed in [`Policy::ignored_sections`].
//! - **Outside the workspace needs an explicit allow** even when
//!   `default_deny = false`: the seed would let a tool without `allow` touch
//!   anything; here it gets the workspace.
//! - **An allow list always restricts**: a section with `allow` (for `[mcp]`,
//!   `allow`/`allowed_tools`; for bash, `allowlist`; for web_fetch,
//!   `allow_domains`) permits only what it names (file tools: plus
//!   `allowed_dirs`), whatever `default_deny` says. The seed would let
//!   everything else through when `default_deny = false`. An empty list counts
//!   as no list.
//! - **bash and the web tools are off unless their section exists** (under either
//!   `default_deny`), because they are the ways out of the workspace.
//! - **Deny wins**, and is matched against both the path as written (normalised)
//!   and its real location; allow only against the real location.
//! - **Private, loopback and link-local addresses** are refused to web_fetch even
//!   under `allow_domains = ["*"]`, unless a host is named in `allow_domains`
//!   exactly.
//! - `$WORKSPACE/.agentfile/**` (the session and memory store) is off limits to
//!   every file tool and to bash arguments, except the running workflow's own
//!   scratch folder (`.agentfile/runs/<session>/fs`, see
//!   [`Policy::scratch_for_run`]); `$WORKSPACE/.git/**` to write and
//!   edit (hooks and `core.fsmonitor` would run code later), and so are a
//!   run's protected folders (a workflow.yaml's `scripts/`). Bash commands
//!   are held to the same folders by what they may write, not only by their
//!   redirections: [`writes`] says which words of each command it writes
//!   (`sed -i`, `cp`, `mv`, `tee`, `dd of=`, `ln`, `patch`, `tar -x`, `git
//!   checkout` …), and an unknown command may write whatever it names.
//! - An agentrc declaration's Cedar policies judge every file a call reads,
//!   not only the path it names: each file grep and glob read or list, each
//!   entry ls shows, each path of a bash line ([`Guard::judge_file`]).
//!
//! What this module is not: the place tools run. It decides; [`crate::toolbox`]
//! and [`crate::builtin`] act. Apart from the gate, only glob/grep/ls consult it, and only to filter
//! what they list: glob and grep through `read`'s rules (what they list is then
//! read), ls through its own section's rules ([`Gate::listable`]), a name that
//! any file tool's `deny` matches staying hidden from all three; and the
//! servers, for the files a client names ([`Gate::workspace_readable`]).

pub mod bash;
pub mod control;
pub mod declared;
mod gate;
pub mod paths;
pub mod web;
pub mod writes;

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

pub use gate::{Gate, Guard, Permit, Request, SandboxInputs};

/// The policy file name looked for beside a workflow.
pub const POLICY_FILE: &str = "policy.toml";

/// A built-in tool the policy has a section for: the table lives with the
/// plan, which the front ends resolve tool names against.
pub use agentfile_plan::tool::Tool;

/// Keys a section of `tool` may contain.
fn section_keys(tool: Tool) -> &'static [&'static str] {
    match tool {
        Tool::Read | Tool::Write | Tool::Edit | Tool::Glob | Tool::Grep | Tool::Ls => {
            &["enabled", "allow", "deny", "rate_limit"]
        }
        Tool::Bash => &["enabled", "allowlist", "denylist", "rate_limit"],
        Tool::WebFetch => &["enabled", "allow_domains", "rate_limit"],
        Tool::WebSearch | Tool::MemoryRead | Tool::MemoryWrite => &["enabled", "rate_limit"],
    }
}

/// A policy that could not be loaded. Nothing may run with it.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{path}: cannot read policy: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Every problem found, each `path:line:col: message`.
    #[error("{}", render_problems(path, problems))]
    Invalid {
        path: PathBuf,
        problems: Vec<Problem>,
    },
    /// A `--allow TOOL[:PATTERN]` that cannot be granted.
    #[error("--allow {spec}: {source}")]
    Grant { spec: String, source: GrantError },
}

/// Why one `--allow TOOL[:PATTERN]` cannot be granted. `file` is the policy
/// file as shown to the user; `label` the section as written in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error(
        "the pattern after `{name}:` is empty; write `--allow {name}` to enable the tool, \
         or give a pattern"
    )]
    EmptyPattern { name: String },
    /// `near` is `did you mean `x`? ` or empty.
    #[error("unknown tool `{name}`; {near}known tools: {}", section_names().join(", "))]
    UnknownTool { name: String, near: String },
    #[error(
        "{file} turns {tool} off ([{label}] enabled = false); change the policy file to allow it"
    )]
    TurnedOff {
        file: String,
        tool: Tool,
        label: String,
    },
    #[error(
        "{file} turns MCP tools off ([{label}] enabled = false); change the policy file to allow them"
    )]
    McpTurnedOff { file: String, label: String },
    /// `key` is the deny list's key: `deny` or `denylist`.
    #[error(
        "{file} denies it ([{label}] {key} {rule:?}); a deny rule always wins, \
         so change the policy file or ask for less"
    )]
    Denied {
        file: String,
        label: String,
        key: &'static str,
        rule: String,
    },
    #[error("{0} takes no pattern; write `--allow {0}` to enable it")]
    TakesNoPattern(Tool),
    #[error("web_fetch fetches http and https only, not `{0}://`")]
    Scheme(String),
    #[error(
        "web_fetch rules name hosts, not paths: `{path}` cannot be enforced; \
         write `--allow web_fetch:{host}` to allow the whole host"
    )]
    HostPath { host: String, path: String },
    #[error("`{0}` names no host")]
    NoHost(String),
    /// A path pattern that does not expand or compile.
    #[error(transparent)]
    Pattern(#[from] paths::PatternError),
    #[error(transparent)]
    Domain(#[from] web::DomainError),
}

/// One problem in a policy file, at a 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

fn render_problems(path: &Path, problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("{}:{}:{}: {}", path.display(), p.line, p.col, p.message))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A pattern as written, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pat {
    pub text: String,
    pub line: usize,
    pub col: usize,
}

/// One tool's section as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Section {
    /// `read` or `tools.read`: how rules are named back to the user.
    pub label: String,
    pub enabled: Option<bool>,
    pub allow: Vec<Pat>,
    pub deny: Vec<Pat>,
    pub allowlist: Vec<Pat>,
    pub denylist: Vec<Pat>,
    pub allow_domains: Vec<Pat>,
    pub rate_limit: Option<u32>,
}

/// The `[mcp]` section as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct McpSection {
    pub label: String,
    pub enabled: Option<bool>,
    pub default_deny: Option<bool>,
    pub allow: Vec<Pat>,
    pub deny: Vec<Pat>,
    pub rate_limit: Option<u32>,
}

/// The `[sandbox]` section as written: what only the kernel sandbox knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSection {
    /// `enabled = false`: tools run gated only (a trusted folder).
    pub enabled: Option<bool>,
    /// `required = true`: where the sandbox is unavailable, programs are not
    /// started at all.
    pub required: Option<bool>,
    /// Further folders programs may write (path patterns; their literal
    /// folder is what the kernel allows).
    pub(crate) writable: Vec<Pat>,
    /// Ports of this machine's loopback programs may connect to.
    pub ports: Vec<u16>,
    /// Stdio MCP servers run in the sandbox too.
    pub mcp_servers: Option<bool>,
}

/// Where a policy came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    SafeDefault,
    File(PathBuf),
}

/// A loaded, validated policy, not yet tied to a workspace. [`Policy::bind`] it to
/// one to get the [`Gate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub(crate) origin: Origin,
    pub(crate) default_deny: bool,
    pub(crate) sections: [Option<Section>; 11],
    pub(crate) mcp: Option<McpSection>,
    pub(crate) allowed_dirs: Vec<Pat>,
    ignored: Vec<String>,
    /// Folders no call of this run may write, with why (a workflow.yaml's
    /// `scripts/`); set by [`Policy::protect_for_run`].
    pub(crate) protected: Vec<(PathBuf, String)>,
    /// The run's own scratch folder (a WORKFLOW.md's `_workflowFsRoot`),
    /// open to the file tools although it lies in `.agentfile/`; set by
    /// [`Policy::scratch_for_run`].
    pub(crate) scratch: Option<PathBuf>,
    /// Further checks every call must pass (an agentrc declaration's grants
    /// and Cedar policies); set by [`Policy::guard_for_run`].
    pub(crate) guards: Vec<GuardRef>,
    /// `[sandbox]`.
    pub(crate) sandbox: SandboxSection,
    /// `[control] writable`: control files this policy lets a run write
    /// (a generator of workflows); never the policy or config files.
    pub(crate) control_writable: Vec<Pat>,
    /// The files that configure this run, out of every tool's reach; set by
    /// [`Policy::control_for_run`].
    pub(crate) control: Vec<control::ControlFile>,
}

/// A [`Guard`] held by a policy: compared by identity.
#[derive(Clone)]
pub(crate) struct GuardRef(pub std::sync::Arc<dyn Guard>);

impl PartialEq for GuardRef {
    fn eq(&self, other: &GuardRef) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for GuardRef {}

impl fmt::Debug for GuardRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Policy {
    /// The policy a run uses: `explicit` (`--policy FILE`) if given, else
    /// `policy.toml` in `workflow_dir` if there is one, else [`Policy::safe_default`].
    /// An explicit file that does not exist is an error, not the default.
    pub fn load(explicit: Option<&Path>, workflow_dir: &Path) -> Result<Policy, PolicyError> {
        if let Some(path) = explicit {
            return Policy::from_file(path);
        }
        let mut beside = workflow_dir.join(POLICY_FILE);
        // A WORKFLOW.md at `<project>/.workflows/<id>/` uses the project's.
        if !beside.exists()
            && let Some(project) = agentfile_config::project_of(workflow_dir)
        {
            beside = project.join(POLICY_FILE);
        }
        match std::fs::metadata(&beside) {
            Ok(_) => Policy::from_file(&beside),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Policy::safe_default()),
            Err(source) => Err(PolicyError::Read {
                path: beside,
                source,
            }),
        }
    }

    /// Read and validate a policy file.
    pub fn from_file(path: &Path) -> Result<Policy, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.to_owned(),
            source,
        })?;
        Policy::parse(&text, path)
    }

    /// Validate policy text; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Policy, PolicyError> {
        let mut policy = parse_text(text).map_err(|problems| PolicyError::Invalid {
            path: path.to_owned(),
            problems,
        })?;
        policy.origin = Origin::File(path.to_owned());
        Ok(policy)
    }

    /// The policy used when there is no policy file: file tools (read, write,
    /// edit, glob, grep, ls) inside the workspace only, bash off, web off, memory
    /// on, MCP tools denied.
    pub fn safe_default() -> Policy {
        let mut sections: [Option<Section>; 11] = Default::default();
        for tool in Tool::ALL {
            let on = tool.is_path_tool() || matches!(tool, Tool::MemoryRead | Tool::MemoryWrite);
            if on {
                sections[tool as usize] = Some(Section {
                    label: tool.name().to_owned(),
                    enabled: Some(true),
                    allow: vec![Pat {
                        text: "$WORKSPACE/**".to_owned(),
                        line: 0,
                        col: 0,
                    }],
                    ..Section::default()
                });
            }
        }
        Policy {
            origin: Origin::SafeDefault,
            default_deny: true,
            sections,
            mcp: None,
            allowed_dirs: Vec::new(),
            ignored: Vec::new(),
            protected: Vec::new(),
            scratch: None,
            guards: Vec::new(),
            sandbox: SandboxSection::default(),
            control_writable: Vec::new(),
            control: Vec::new(),
        }
    }

    /// The file this policy came from; `None` for the safe default.
    pub fn source(&self) -> Option<&Path> {
        match &self.origin {
            Origin::SafeDefault => None,
            Origin::File(p) => Some(p),
        }
    }

    /// The `[sandbox]` section (empty when the file has none).
    pub fn sandbox(&self) -> &SandboxSection {
        &self.sandbox
    }

    /// Top-level sections that were not ours and were skipped (`security`), so a
    /// caller can warn about them.
    pub fn ignored_sections(&self) -> &[String] {
        &self.ignored
    }

    /// Compile this policy for a workspace (absolute; resolved here) and a home
    /// directory (`None` when unknown: `~` patterns then fail to compile).
    pub fn bind(&self, workspace: &Path, home: Option<&Path>) -> Result<Gate, PolicyError> {
        Gate::new(self, workspace, home)
    }

    pub(crate) fn section(&self, tool: Tool) -> Option<&Section> {
        self.sections[tool as usize].as_ref()
    }

    /// Widen this policy for one run with `--allow TOOL[:PATTERN]` grants, as
    /// written on the command line: `write`, `read:~/notes/**`,
    /// `bash:cargo test *`, `web_fetch:https://docs.rs/*`, `mcp:github:get_*`.
    ///
    /// Each grant enables the tool and adds its pattern where that tool keeps
    /// its allow rules:
    ///
    /// | tool | `TOOL` alone | `TOOL:PATTERN` |
    /// |---|---|---|
    /// | read write edit glob grep ls | `allow += "$WORKSPACE/**"` | `allow += PATTERN` (a path pattern) |
    /// | bash | `allowlist += "*"` (the denylist still applies) | `allowlist += PATTERN` |
    /// | web_fetch | `allow_domains += "*"` (private addresses stay refused) | the host of PATTERN (`https://docs.rs/*` or `docs.rs`; a path other than `/*` is refused: rules are per host) |
    /// | web_search memory_read memory_write | enabled | refused (they take no pattern) |
    /// | mcp | `allow += "*"` | `allow += PATTERN` (`server:tool`; `server` alone means `server:*`) |
    ///
    /// A grant is refused — and nothing of this call is applied — when the
    /// policy file says otherwise: the tool's section has `enabled = false`,
    /// or one of its deny rules (`deny`, `denylist`) covers the pattern
    /// (`--allow bash:"rm -rf *"` against `denylist = ["rm *"]`,
    /// `--allow read:~/.ssh/*` against `deny = ["~/.ssh/*"]`). A grant never
    /// weakens a deny rule: at run time deny still wins over every allow. An
    /// unknown tool name is an error that lists the known ones.
    pub fn allow_for_run(&mut self, specs: &[String]) -> Result<(), PolicyError> {
        let mut next = self.clone();
        for spec in specs {
            next.grant(spec).map_err(|source| PolicyError::Grant {
                spec: spec.clone(),
                source,
            })?;
        }
        *self = next;
        Ok(())
    }

    /// Make `dir` unwritable for this run, whatever the rules say: write and
    /// edit calls, and bash redirections, into it are denied with `why` as
    /// the rule. Deny wins over every allow, `--allow` included.
    pub fn protect_for_run(&mut self, dir: PathBuf, why: impl Into<String>) {
        self.protected.push((dir, why.into()));
    }

    /// Open the run's scratch folder `dir` (absolute, inside
    /// `$WORKSPACE/.agentfile/`) to the file tools for this run: the one
    /// subtree of the session store they may read and write (the session
    /// database, other runs' folders and the rest stay denied), allowed as an
    /// `allowed_dirs` entry is, so a restrictive `allow` list does not shut
    /// out the workflow's own file contract. A path counts as inside only if
    /// both its spelling and its real location (symlinks followed) are;
    /// deny rules still win.
    pub fn scratch_for_run(&mut self, dir: PathBuf) {
        self.scratch = Some(dir);
    }

    /// Hold the files that configure this run ([`control::ControlFile`]) out
    /// of every tool's reach: write and edit calls and bash writes into them
    /// are denied, and the kernel sandbox mounts the existing ones
    /// read-only (a folder and its name). Those `[control] writable` names
    /// stay writable, except the policy and config files themselves.
    pub fn control_for_run(&mut self, files: Vec<control::ControlFile>) {
        self.control = files;
    }

    /// `[control] writable` as written, with its positions: what `validate`
    /// warns about.
    pub fn control_writable(&self) -> Vec<(String, usize, usize)> {
        self.control_writable
            .iter()
            .map(|p| (p.text.clone(), p.line, p.col))
            .collect()
    }

    /// Add a check every call of this run must also pass after the policy
    /// allows it: a call runs only if the policy and every guard allow it.
    pub fn guard_for_run(&mut self, guard: std::sync::Arc<dyn Guard>) {
        self.guards.push(GuardRef(guard));
    }

    fn grant(&mut self, spec: &str) -> Result<(), GrantError> {
        let (name, pattern) = match spec.split_once(':') {
            Some((n, p)) => (n.trim(), Some(p.trim())),
            None => (spec.trim(), None),
        };
        if pattern.is_some_and(str::is_empty) {
            return Err(GrantError::EmptyPattern {
                name: name.to_owned(),
            });
        }
        let file = match self.source() {
            Some(p) => p.display().to_string(),
            None => POLICY_FILE.to_owned(),
        };
        if name == "mcp" {
            return self.grant_mcp(pattern, &file);
        }
        let Some(tool) = Tool::from_name(name) else {
            let near = agentfile_plan::diag::suggest(name, section_names())
                .map(|s| format!("did you mean `{s}`? "))
                .unwrap_or_default();
            return Err(GrantError::UnknownTool {
                name: name.to_owned(),
                near,
            });
        };
        if let Some(s) = self.section(tool)
            && s.enabled == Some(false)
        {
            return Err(GrantError::TurnedOff {
                file,
                tool,
                label: s.label.clone(),
            });
        }
        let section = self.sections[tool as usize].get_or_insert_with(|| Section {
            label: tool.name().to_owned(),
            ..Section::default()
        });
        section.enabled = Some(true);
        let pat = |text: &str| Pat {
            text: text.to_owned(),
            line: 0,
            col: 0,
        };
        let add = |list: &mut Vec<Pat>, text: &str| {
            if !list.iter().any(|p| p.text == text) {
                list.push(pat(text));
            }
        };
        match tool {
            t if t.is_path_tool() => {
                let text = pattern.unwrap_or("$WORKSPACE/**");
                let expanded = stand_in_expansions(text)?;
                for d in &section.deny {
                    for (ws, home, allow) in &expanded {
                        let covered = paths::PathPattern::compile(&d.text, ws, Some(home))
                            .is_ok_and(|dp| dp.is_match(Path::new(allow)));
                        if covered {
                            return Err(GrantError::Denied {
                                file,
                                label: section.label.clone(),
                                key: "deny",
                                rule: d.text.clone(),
                            });
                        }
                    }
                }
                add(&mut section.allow, text);
            }
            Tool::Bash => {
                let text = pattern.unwrap_or("*");
                if let Some(d) = section
                    .denylist
                    .iter()
                    .find(|d| paths::wildcard_match(&d.text, text))
                {
                    return Err(GrantError::Denied {
                        file,
                        label: section.label.clone(),
                        key: "denylist",
                        rule: d.text.clone(),
                    });
                }
                add(&mut section.allowlist, text);
            }
            Tool::WebFetch => {
                let host = match pattern {
                    None => "*".to_owned(),
                    Some(p) => url_pattern_host(p)?,
                };
                web::DomainPattern::parse(&host)?;
                add(&mut section.allow_domains, &host);
            }
            _ => {
                if pattern.is_some() {
                    return Err(GrantError::TakesNoPattern(tool));
                }
            }
        }
        Ok(())
    }

    fn grant_mcp(&mut self, pattern: Option<&str>, file: &str) -> Result<(), GrantError> {
        let text = match pattern {
            None => "*".to_owned(),
            Some(p) if p.contains(':') || p == "*" => p.to_owned(),
            Some(server) => format!("{server}:*"),
        };
        if let Some(m) = &self.mcp
            && m.enabled == Some(false)
        {
            return Err(GrantError::McpTurnedOff {
                file: file.to_owned(),
                label: m.label.clone(),
            });
        }
        let m = self.mcp.get_or_insert_with(|| McpSection {
            label: "mcp".to_owned(),
            ..McpSection::default()
        });
        if let Some(d) = m
            .deny
            .iter()
            .find(|d| paths::wildcard_match(&d.text, &text))
        {
            return Err(GrantError::Denied {
                file: file.to_owned(),
                label: m.label.clone(),
                key: "deny",
                rule: d.text.clone(),
            });
        }
        m.enabled = Some(true);
        if !m.allow.iter().any(|p| p.text == text) {
            m.allow.push(Pat {
                text,
                line: 0,
                col: 0,
            });
        }
        Ok(())
    }
}

/// A path pattern expanded against the stand-in workspace and home used for
/// checks, and against this user's real home when known (so
/// `/home/me/.ssh/id_rsa` meets a `~/.ssh/*` deny): `(workspace, home, text)`.
fn stand_in_expansions(text: &str) -> Result<Vec<(PathBuf, PathBuf, String)>, paths::PatternError> {
    let ws = PathBuf::from("/nonexistent/agentfile-policy-check/workspace");
    let mut homes = vec![PathBuf::from("/nonexistent/agentfile-policy-check/home")];
    if let Some(h) = std::env::home_dir() {
        homes.push(h);
    }
    let mut out = Vec::new();
    for home in homes {
        let e = paths::expand_pattern(text, &ws, Some(&home))?;
        paths::PathPattern::compile(text, &ws, Some(&home))?;
        out.push((ws.clone(), home, e));
    }
    Ok(out)
}

/// The host of a web_fetch grant: `docs.rs`, `*.github.com`,
/// `https://docs.rs/*`, `https://docs.rs`. Rules are per host, so a narrower
/// path is refused rather than silently widened.
fn url_pattern_host(p: &str) -> Result<String, GrantError> {
    let rest = match p.split_once("://") {
        Some(("http" | "https" | "*", rest)) => rest,
        Some((scheme, _)) => {
            return Err(GrantError::Scheme(scheme.to_owned()));
        }
        None => p,
    };
    let (host, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if !matches!(path, "" | "/" | "/*" | "/**") {
        return Err(GrantError::HostPath {
            host: host.to_owned(),
            path: path.to_owned(),
        });
    }
    if host.is_empty() {
        return Err(GrantError::NoHost(p.to_owned()));
    }
    Ok(host.to_owned())
}

/// What a top-level key is.
enum TopKey {
    Tool(Tool),
    Mcp,
}

fn top_key(name: &str) -> Option<TopKey> {
    if name == "mcp" {
        return Some(TopKey::Mcp);
    }
    Tool::from_name(name).map(TopKey::Tool)
}

fn section_names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Tool::ALL.iter().map(|t| t.name()).collect();
    v.push("mcp");
    v
}

/// Sections known to be written for other tools; skipped without a word.
const FOREIGN_SECTIONS: &[&str] = &["security"];

struct Ctx<'t> {
    text: &'t str,
    problems: Vec<Problem>,
}

impl Ctx<'_> {
    fn at(&self, span: &Range<usize>) -> (usize, usize) {
        line_col(self.text, span.start)
    }

    fn problem(&mut self, span: &Range<usize>, message: impl Into<String>) {
        let (line, col) = self.at(span);
        self.problems.push(Problem {
            line,
            col,
            message: message.into(),
        });
    }
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    (line, col)
}

fn parse_text(text: &str) -> Result<Policy, Vec<Problem>> {
    let root = DeTable::parse(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let (line, col) = line_col(text, span.start);
        vec![Problem {
            line,
            col,
            message: e.message().trim_end().to_owned(),
        }]
    })?;
    let mut cx = Ctx {
        text,
        problems: Vec::new(),
    };
    let mut policy = Policy {
        origin: Origin::SafeDefault,
        default_deny: false,
        sections: Default::default(),
        mcp: None,
        allowed_dirs: Vec::new(),
        ignored: Vec::new(),
        protected: Vec::new(),
        scratch: None,
        guards: Vec::new(),
        sandbox: SandboxSection::default(),
        control_writable: Vec::new(),
        control: Vec::new(),
    };
    for (key, value) in root.get_ref().iter() {
        let name: &str = key.get_ref();
        let kspan = key.span();
        match name {
            "default_deny" => {
                if let Some(b) = want_bool(&mut cx, "default_deny", value) {
                    policy.default_deny = b;
                }
            }
            "allowed_dirs" => {
                policy.allowed_dirs = want_patterns(&mut cx, "allowed_dirs", value);
            }
            "sandbox" => policy.sandbox = sandbox_section(&mut cx, value),
            "control" => policy.control_writable = control_section(&mut cx, value),
            "tools" => match value.get_ref() {
                DeValue::Table(tools) => {
                    for (tkey, tval) in tools.iter() {
                        let tname: &str = tkey.get_ref();
                        let label = format!("tools.{tname}");
                        match top_key(tname) {
                            Some(k) => section(&mut cx, &mut policy, k, &label, tval),
                            None => {
                                let hint = did_you_mean(tname);
                                cx.problem(
                                    &tkey.span(),
                                    format!("unknown tool section [tools.{tname}]{hint}"),
                                );
                            }
                        }
                    }
                }
                _ => cx.problem(&value.span(), "`tools` must be a table of tool sections"),
            },
            _ => match top_key(name) {
                Some(k) => section(&mut cx, &mut policy, k, name, value),
                None => match value.get_ref() {
                    DeValue::Table(_) => {
                        let near = agentfile_plan::diag::suggest(name, section_names());
                        match near {
                            Some(s) if !FOREIGN_SECTIONS.contains(&name) => cx.problem(
                                &kspan,
                                format!("unknown section [{name}]; did you mean [{s}]?"),
                            ),
                            _ => policy.ignored.push(name.to_owned()),
                        }
                    }
                    _ => {
                        let hint = match agentfile_plan::diag::suggest(
                            name,
                            ["default_deny", "allowed_dirs"],
                        ) {
                            Some(s) => format!("; did you mean `{s}`?"),
                            None => {
                                "; top-level keys are `default_deny` and `allowed_dirs`".to_owned()
                            }
                        };
                        cx.problem(&kspan, format!("unknown key `{name}`{hint}"));
                    }
                },
            },
        }
    }
    // Patterns must compile; try them against a stand-in workspace now so a bad
    // one is reported with its line before anything runs.
    check_patterns(&mut cx, &policy);
    if cx.problems.is_empty() {
        Ok(policy)
    } else {
        cx.problems.sort_by_key(|p| (p.line, p.col));
        Err(cx.problems)
    }
}

fn did_you_mean(name: &str) -> String {
    match agentfile_plan::diag::suggest(name, section_names()) {
        Some(s) => format!("; did you mean [{s}]?"),
        None => format!("; known sections: {}", section_names().join(", ")),
    }
}

fn section(
    cx: &mut Ctx<'_>,
    policy: &mut Policy,
    key: TopKey,
    label: &str,
    value: &Spanned<DeValue<'_>>,
) {
    let DeValue::Table(table) = value.get_ref() else {
        cx.problem(&value.span(), format!("[{label}] must be a table"));
        return;
    };
    match key {
        TopKey::Tool(tool) => {
            if policy.sections[tool as usize].is_some() {
                cx.problem(
                    &value.span(),
                    format!("the {tool} section appears twice (as [{tool}] and [tools.{tool}])"),
                );
                return;
            }
            let mut s = Section {
                label: label.to_owned(),
                ..Section::default()
            };
            for (k, v) in table.iter() {
                let kname: &str = k.get_ref();
                if !section_keys(tool).contains(&kname) {
                    let hint = key_hint(tool, kname);
                    cx.problem(
                        &k.span(),
                        format!("unknown key `{kname}` in [{label}]{hint}"),
                    );
                    continue;
                }
                let what = format!("{label}.{kname}");
                match kname {
                    "enabled" => s.enabled = want_bool(cx, &what, v),
                    "allow" => s.allow = want_patterns(cx, &what, v),
                    "deny" => s.deny = want_patterns(cx, &what, v),
                    "allowlist" => s.allowlist = want_patterns(cx, &what, v),
                    "denylist" => s.denylist = want_patterns(cx, &what, v),
                    "allow_domains" => s.allow_domains = want_patterns(cx, &what, v),
                    "rate_limit" => s.rate_limit = want_rate(cx, &what, v),
                    _ => {}
                }
            }
            policy.sections[tool as usize] = Some(s);
        }
        TopKey::Mcp => {
            if policy.mcp.is_some() {
                cx.problem(&value.span(), "the mcp section appears twice");
                return;
            }
            let mut s = McpSection {
                label: label.to_owned(),
                ..McpSection::default()
            };
            const KEYS: &[&str] = &[
                "enabled",
                "default_deny",
                "allow",
                "allowed_tools",
                "deny",
                "rate_limit",
            ];
            for (k, v) in table.iter() {
                let kname: &str = k.get_ref();
                let what = format!("{label}.{kname}");
                match kname {
                    "enabled" => s.enabled = want_bool(cx, &what, v),
                    "default_deny" => s.default_deny = want_bool(cx, &what, v),
                    "allow" | "allowed_tools" => {
                        let mut pats = want_patterns(cx, &what, v);
                        s.allow.append(&mut pats);
                    }
                    "deny" => s.deny = want_patterns(cx, &what, v),
                    "rate_limit" => s.rate_limit = want_rate(cx, &what, v),
                    _ => {
                        let hint = match agentfile_plan::diag::suggest(kname, KEYS.iter().copied())
                        {
                            Some(h) => format!("; did you mean `{h}`?"),
                            None => format!("; keys are {}", KEYS.join(", ")),
                        };
                        cx.problem(
                            &k.span(),
                            format!("unknown key `{kname}` in [{label}]{hint}"),
                        );
                    }
                }
            }
            policy.mcp = Some(s);
        }
    }
}

fn key_hint(tool: Tool, key: &str) -> String {
    // The common mix-ups get a direct answer rather than a spelling guess.
    match (tool, key) {
        (Tool::Bash, "allow") => return "; bash uses `allowlist`".to_owned(),
        (Tool::Bash, "deny") => return "; bash uses `denylist`".to_owned(),
        (t, "allowlist" | "denylist") if t.is_path_tool() => {
            return format!("; [{t}] uses `allow` and `deny` (path patterns)");
        }
        (Tool::WebFetch, "allow") => return "; web_fetch uses `allow_domains`".to_owned(),
        (t, "allow_domains") if t != Tool::WebFetch => {
            return format!("; `allow_domains` belongs in [web_fetch], not [{t}]");
        }
        _ => {}
    }
    match agentfile_plan::diag::suggest(key, section_keys(tool).iter().copied()) {
        Some(s) => format!("; did you mean `{s}`?"),
        None => format!("; [{tool}] takes {}", section_keys(tool).join(", ")),
    }
}

/// The `[control]` table: `writable = [patterns]`, the control files a run
/// may rewrite.
fn control_section(cx: &mut Ctx<'_>, value: &Spanned<DeValue<'_>>) -> Vec<Pat> {
    let DeValue::Table(table) = value.get_ref() else {
        cx.problem(&value.span(), "[control] must be a table");
        return Vec::new();
    };
    let mut out = Vec::new();
    for (k, v) in table.iter() {
        match k.get_ref().as_ref() {
            "writable" => out = want_patterns(cx, "control.writable", v),
            other => {
                let hint = match agentfile_plan::diag::suggest(other, ["writable"]) {
                    Some(s) => format!("; did you mean `{s}`?"),
                    None => "; [control] takes `writable`".to_owned(),
                };
                cx.problem(
                    &k.span(),
                    format!("unknown key `{other}` in [control]{hint}"),
                );
            }
        }
    }
    out
}

/// The `[sandbox]` table.
fn sandbox_section(cx: &mut Ctx<'_>, value: &Spanned<DeValue<'_>>) -> SandboxSection {
    const KEYS: [&str; 5] = ["enabled", "required", "writable", "ports", "mcp_servers"];
    let mut out = SandboxSection::default();
    let DeValue::Table(table) = value.get_ref() else {
        cx.problem(&value.span(), "[sandbox] must be a table");
        return out;
    };
    for (k, v) in table.iter() {
        let name: &str = k.get_ref();
        match name {
            "enabled" => out.enabled = want_bool(cx, "sandbox.enabled", v),
            "required" => out.required = want_bool(cx, "sandbox.required", v),
            "mcp_servers" => out.mcp_servers = want_bool(cx, "sandbox.mcp_servers", v),
            "writable" => out.writable = want_patterns(cx, "sandbox.writable", v),
            "ports" => {
                let DeValue::Array(items) = v.get_ref() else {
                    cx.problem(&v.span(), "`sandbox.ports` must be a list of port numbers");
                    continue;
                };
                for item in items {
                    let port = match item.get_ref() {
                        DeValue::Integer(i) => {
                            i64::from_str_radix(&i.as_str().replace('_', ""), i.radix()).ok()
                        }
                        _ => None,
                    };
                    match port.and_then(|p| u16::try_from(p).ok()) {
                        Some(p) if p != 0 && p != agentfile_sandbox::PROXY_PORT => {
                            if !out.ports.contains(&p) {
                                out.ports.push(p);
                            }
                        }
                        Some(p) if p == agentfile_sandbox::PROXY_PORT => cx.problem(
                            &item.span(),
                            format!("port {p} is the sandbox's egress proxy; forward another port"),
                        ),
                        _ => cx.problem(
                            &item.span(),
                            "each of `sandbox.ports` must be a TCP port number, 1 to 65535",
                        ),
                    }
                }
                if out.ports.len() > 15 {
                    cx.problem(&v.span(), "`sandbox.ports` may name at most 15 ports");
                }
            }
            other => {
                let hint = match agentfile_plan::diag::suggest(other, KEYS) {
                    Some(s) => format!("; did you mean `{s}`?"),
                    None => format!("; [sandbox] keys are {}", KEYS.join(", ")),
                };
                cx.problem(
                    &k.span(),
                    format!("unknown key `{other}` in [sandbox]{hint}"),
                );
            }
        }
    }
    out
}

fn want_bool(cx: &mut Ctx<'_>, what: &str, v: &Spanned<DeValue<'_>>) -> Option<bool> {
    match v.get_ref() {
        DeValue::Boolean(b) => Some(*b),
        other => {
            cx.problem(
                &v.span(),
                format!("`{what}` must be true or false, not {}", other.type_str()),
            );
            None
        }
    }
}

fn want_rate(cx: &mut Ctx<'_>, what: &str, v: &Spanned<DeValue<'_>>) -> Option<u32> {
    let parsed = match v.get_ref() {
        DeValue::Integer(i) => i64::from_str_radix(&i.as_str().replace('_', ""), i.radix()).ok(),
        _ => None,
    };
    match parsed.and_then(|n| u32::try_from(n).ok()) {
        Some(n) if n >= 1 => Some(n),
        _ => {
            cx.problem(
                &v.span(),
                format!("`{what}` must be a whole number of calls per minute, at least 1"),
            );
            None
        }
    }
}

fn want_patterns(cx: &mut Ctx<'_>, what: &str, v: &Spanned<DeValue<'_>>) -> Vec<Pat> {
    let DeValue::Array(items) = v.get_ref() else {
        cx.problem(
            &v.span(),
            format!(
                "`{what}` must be a list of strings, not {}",
                v.get_ref().type_str()
            ),
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in items {
        match item.get_ref() {
            DeValue::String(s) => {
                let (line, col) = cx.at(&item.span());
                if s.trim().is_empty() {
                    cx.problem(&item.span(), format!("empty pattern in `{what}`"));
                    continue;
                }
                out.push(Pat {
                    text: s.to_string(),
                    line,
                    col,
                });
            }
            other => cx.problem(
                &item.span(),
                format!(
                    "`{what}` must contain only strings, found {}",
                    other.type_str()
                ),
            ),
        }
    }
    out
}

fn check_patterns(cx: &mut Ctx<'_>, policy: &Policy) {
    let ws = Path::new("/nonexistent/agentfile-policy-check/workspace");
    let home = Path::new("/nonexistent/agentfile-policy-check/home");
    let mut bad = Vec::new();
    let path_lists = policy
        .sections
        .iter()
        .flatten()
        .flat_map(|s| s.allow.iter().chain(&s.deny))
        .chain(&policy.allowed_dirs);
    for pat in path_lists {
        if let Err(m) = paths::PathPattern::compile(&pat.text, ws, Some(home)) {
            bad.push((pat.line, pat.col, m.to_string()));
        }
    }
    if let Some(s) = policy.section(Tool::WebFetch) {
        for pat in &s.allow_domains {
            if let Err(m) = web::DomainPattern::parse(&pat.text) {
                bad.push((pat.line, pat.col, m.to_string()));
            }
        }
    }
    if let Some(m) = &policy.mcp {
        for pat in m.allow.iter().chain(&m.deny) {
            if !pat.text.contains(':') && pat.text != "*" {
                bad.push((
                    pat.line,
                    pat.col,
                    format!(
                        "MCP pattern {:?} must be `server:tool` (`server:*` for all of a server's tools)",
                        pat.text
                    ),
                ));
            }
        }
    }
    for (line, col, message) in bad {
        cx.problems.push(Problem { line, col, message });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Policy, String> {
        Policy::parse(text, Path::new("policy.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_malformed_sandbox_table_is_refused_with_lines() {
        let err = parse(
            "[sandbox]\nenabled = \"yes\"\nports = [3128, 70000, \"x\", 5432]\nwritable = \"target\"\nrequird = true\n",
        )
        .unwrap_err();
        for want in [
            "2:",
            "`sandbox.enabled` must be true or false",
            "3:",
            "port 3128 is the sandbox's egress proxy",
            "each of `sandbox.ports` must be a TCP port number",
            "4:",
            "`sandbox.writable` must be a list of strings",
            "5:",
            "unknown key `requird` in [sandbox]; did you mean `required`?",
        ] {
            assert!(err.contains(want), "{want:?} missing from:\n{err}");
        }
        assert!(
            parse("sandbox = 1\n")
                .unwrap_err()
                .contains("[sandbox] must be a table")
        );
        let ok = parse("[sandbox]\nports = [5432, 5432]\nmcp_servers = true\n").unwrap();
        assert_eq!(ok.sandbox().ports, vec![5432]);
        assert_eq!(ok.sandbox().mcp_servers, Some(true));
    }

    #[test]
    fn reference_policies_load() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/reference");
        let files = [
            "headless-agent-v0.1.0/examples/policy.toml",
            "headless-agent-v0.1.0/brainstorm/policy.toml",
            "headless-agent-head/examples/policy.toml",
        ];
        for f in files {
            // The shared folder lives beside the checkout, as for tests/cli.rs.
            let p = root.join(f);
            assert!(p.is_file(), "{} is missing", p.display());
            let policy = Policy::from_file(&p).unwrap_or_else(|e| panic!("{f}: {e}"));
            assert!(policy.source().is_some());
        }
    }

    #[test]
    fn both_section_spellings() {
        let a = parse("[tools.read]\nenabled = true\n").unwrap();
        let b = parse("[read]\nenabled = true\n").unwrap();
        assert_eq!(a.section(Tool::Read).unwrap().enabled, Some(true));
        assert_eq!(b.section(Tool::Read).unwrap().enabled, Some(true));
        let both = parse("[read]\nenabled = true\n[tools.read]\nenabled = false\n").unwrap_err();
        assert!(both.contains("appears twice"), "{both}");
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = parse("default_deny = true\n[bassh]\nenabled = true\n").unwrap_err();
        assert!(
            e.starts_with("policy.toml:2:2: unknown section [bassh]; did you mean [bash]?"),
            "{e}"
        );
        let e = parse("[read]\nenabled = \"yes\"\n").unwrap_err();
        assert!(
            e.starts_with("policy.toml:2:11: `read.enabled` must be true or false"),
            "{e}"
        );
        let e = parse("[read]\nallow = [\"a/[\"]\n").unwrap_err();
        assert!(e.starts_with("policy.toml:2:10: invalid pattern"), "{e}");
        let e = parse("[bash]\nallow = [\"ls\"]\n").unwrap_err();
        assert!(e.contains("bash uses `allowlist`"), "{e}");
        let e = parse("defualt_deny = true\n").unwrap_err();
        assert!(e.contains("did you mean `default_deny`"), "{e}");
        let e = parse("[read\n").unwrap_err();
        assert!(e.starts_with("policy.toml:1:"), "{e}");
        let e = parse("[web_fetch]\nrate_limit = 0\n").unwrap_err();
        assert!(e.contains("at least 1"), "{e}");
        let e = parse("[tools.raed]\n").unwrap_err();
        assert!(e.contains("did you mean [read]"), "{e}");
        let e = parse("[mcp]\nallow = [\"github\"]\n").unwrap_err();
        assert!(e.contains("server:tool"), "{e}");
    }

    #[test]
    fn every_problem_is_reported() {
        let e = parse("[read]\nenabled = 1\n[write]\nallow = \"x\"\n").unwrap_err();
        assert_eq!(e.lines().count(), 2, "{e}");
    }

    #[test]
    fn foreign_sections_are_tolerated() {
        let p = parse("[security]\nextra_patterns = [\"x\"]\n[observability]\nx = 1\n").unwrap();
        assert_eq!(p.ignored_sections(), ["observability", "security"]);
    }

    #[test]
    fn missing_explicit_file_is_an_error_and_missing_beside_is_default() {
        let dir = std::env::temp_dir();
        let e = Policy::load(Some(Path::new("/nonexistent/policy.toml")), &dir).unwrap_err();
        assert!(matches!(e, PolicyError::Read { .. }));
        let p = Policy::load(None, Path::new("/nonexistent-dir")).unwrap();
        assert_eq!(p, Policy::safe_default());
    }

    fn grants(policy: &mut Policy, specs: &[&str]) -> Result<(), String> {
        let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
        policy.allow_for_run(&specs).map_err(|e| e.to_string())
    }

    fn ws() -> PathBuf {
        let d = std::env::temp_dir().join("agentfile-policy-grants");
        let _ = std::fs::create_dir_all(&d);
        d
    }

    fn bash_ok(g: &Gate, line: &str) -> bool {
        g.check(&Request::Bash { command: line }).is_ok()
    }

    #[test]
    fn grants_enable_and_add_patterns() {
        let home = Path::new("/nonexistent-home");
        let mut p = Policy::safe_default();
        grants(
            &mut p,
            &[
                "bash:cargo test *",
                "web_fetch:https://docs.rs/*",
                "mcp:github:get_*",
                "read:/nonexistent-home/notes/**",
            ],
        )
        .unwrap();
        let g = p.bind(&ws(), Some(home)).unwrap();
        assert!(bash_ok(&g, "cargo test -q"));
        assert!(!bash_ok(&g, "ls"));
        let url = |u: &str| url::Url::parse(u).unwrap();
        assert!(
            g.check(&Request::Fetch {
                url: &url("https://docs.rs/serde")
            })
            .is_ok()
        );
        assert!(
            g.check(&Request::Fetch {
                url: &url("https://example.com/")
            })
            .is_err()
        );
        let mcp = |server, tool| g.check(&Request::Mcp { server, tool }).is_ok();
        assert!(mcp("github", "get_issue"));
        assert!(!mcp("github", "delete_repo"));
        let read = |path| {
            g.check(&Request::Path {
                tool: Tool::Read,
                path,
            })
            .is_ok()
        };
        assert!(read("/nonexistent-home/notes/a.md"));
        assert!(!read("/nonexistent-home/other"));

        // A tool alone: in the workspace (file tools), anything (bash).
        let mut p = parse("default_deny = true\n").unwrap();
        grants(&mut p, &["write", "bash", "mcp:fs", "memory_read"]).unwrap();
        let g = p.bind(&ws(), Some(home)).unwrap();
        let write = |path| {
            g.check(&Request::Path {
                tool: Tool::Write,
                path,
            })
            .is_ok()
        };
        assert!(write("a.txt"));
        assert!(!write("/etc/passwd"));
        assert!(bash_ok(&g, "ls -la && pwd"));
        assert!(
            g.check(&Request::Mcp {
                server: "fs",
                tool: "read"
            })
            .is_ok()
        );
        assert!(g.check(&Request::Plain(Tool::MemoryRead)).is_ok());
    }

    #[test]
    fn grants_the_file_denies_are_refused_whole() {
        let text = "[bash]\nallowlist = [\"ls *\"]\ndenylist = [\"rm *\"]\n\
                    [read]\ndeny = [\"~/.ssh/*\"]\n[mcp]\ndeny = [\"github:delete_*\"]\n\
                    [web_search]\nenabled = false\n";
        let mut p = parse(text).unwrap();
        let before = p.clone();
        let e = grants(&mut p, &["write", "bash:rm -rf *"]).unwrap_err();
        assert!(
            e.starts_with(
                "--allow bash:rm -rf *: policy.toml denies it ([bash] denylist \"rm *\")"
            ),
            "{e}"
        );
        // Nothing of a refused call is applied, not even the good grant before.
        assert_eq!(p, before);
        for spec in [
            "read:~/.ssh/*",
            "read:~/.ssh/id_rsa",
            "mcp:github:delete_repo",
        ] {
            let e = grants(&mut p, &[spec]).unwrap_err();
            assert!(e.contains("denies it"), "{spec}: {e}");
        }
        let e = grants(&mut p, &["web_search"]).unwrap_err();
        assert!(e.contains("enabled = false"), "{e}");
        grants(&mut p, &["read:~/notes/**", "bash:git status"]).unwrap();
    }

    #[test]
    fn bad_grants_say_what_to_write() {
        let mut p = Policy::safe_default();
        let e = grants(&mut p, &["bsh:ls"]).unwrap_err();
        assert!(
            e.contains("unknown tool `bsh`; did you mean `bash`?"),
            "{e}"
        );
        assert!(e.contains("known tools: read, write, edit"), "{e}");
        let e = grants(&mut p, &["memory_read:x"]).unwrap_err();
        assert!(e.contains("takes no pattern"), "{e}");
        let e = grants(&mut p, &["web_fetch:https://docs.rs/serde/*"]).unwrap_err();
        assert!(e.contains("--allow web_fetch:docs.rs"), "{e}");
        let e = grants(&mut p, &["web_fetch:ftp://x.org"]).unwrap_err();
        assert!(e.contains("http and https only"), "{e}");
        let e = grants(&mut p, &["bash:"]).unwrap_err();
        assert!(e.contains("empty"), "{e}");
        let e = grants(&mut p, &["read:a/["]).unwrap_err();
        assert!(e.contains("invalid pattern"), "{e}");
    }

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("ab\ncé d", 7), (2, 4));
    }
}
