//! Every directive agentfile recognises in an agentrc Agentfile: the syntax it
//! belongs to, its profile, and what agentfile does with it. One table, read
//! by the checker, by `inspect` (each directive's `profile` and `support`) and
//! by `inspect --support-matrix`, so what we claim and what we do cannot
//! drift apart.

use super::syntax::Syntax;

/// An optional profile of the core specification: accepted by default,
/// under `--profile core` only when `--extensions` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Profile {
    Core,
    Capability,
    Instruction,
    Security,
    Placement,
    Observability,
    Experimental,
    /// The Dockerfile-shaped syntax's four agentrc keywords.
    Agentrc,
    /// Standard Dockerfile keywords (Dockerfile-shaped syntax).
    Dockerfile,
}

impl Profile {
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Core => "core",
            Profile::Capability => "capability",
            Profile::Instruction => "instruction",
            Profile::Security => "security",
            Profile::Placement => "placement",
            Profile::Observability => "observability",
            Profile::Experimental => "experimental",
            Profile::Agentrc => "agentrc",
            Profile::Dockerfile => "dockerfile",
        }
    }

    /// The seed's name for it.
    pub fn title(self) -> &'static str {
        match self {
            Profile::Core => "Core Agentfile",
            Profile::Capability => "Capability Extensions",
            Profile::Instruction => "Instruction Embedding",
            Profile::Security => "Security Shorthand & Limits",
            Profile::Placement => "Placement / Run Manifest",
            Profile::Observability => "Observability",
            Profile::Experimental => "Framework & Experimental",
            Profile::Agentrc => "agentrc keywords",
            Profile::Dockerfile => "Dockerfile keywords",
        }
    }

    /// The profiles `--extensions` can enable.
    pub const OPTIONAL: [Profile; 6] = [
        Profile::Capability,
        Profile::Instruction,
        Profile::Security,
        Profile::Placement,
        Profile::Observability,
        Profile::Experimental,
    ];

    pub fn from_name(name: &str) -> Option<Profile> {
        Profile::OPTIONAL.into_iter().find(|p| p.as_str() == name)
    }
}

/// What agentfile does with a directive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// A run enforces it: every tool call is checked against it.
    Enforced,
    /// A run uses it (the identity, the system prompt, a time limit).
    Used,
    /// Its arguments are checked; a run does not act on it.
    Validated,
    /// Read and shown; nothing to check or act on.
    Parsed,
}

impl Support {
    pub fn as_str(self) -> &'static str {
        match self {
            Support::Enforced => "enforced",
            Support::Used => "used",
            Support::Validated => "validated",
            Support::Parsed => "parsed",
        }
    }
}

/// One directive's entry.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub name: &'static str,
    pub syntax: Syntax,
    pub profile: Profile,
    pub support: Support,
    /// Describes where and how the agent runs, not what it is.
    pub placement: bool,
    /// What a run does with it, in a few words (the support matrix).
    pub note: &'static str,
}

const fn e(
    name: &'static str,
    syntax: Syntax,
    profile: Profile,
    support: Support,
    note: &'static str,
) -> Entry {
    Entry {
        name,
        syntax,
        profile,
        support,
        placement: matches!(profile, Profile::Placement),
        note,
    }
}

use Profile as P;
use Support as S;
use Syntax::{Core as C, Dockerfile as D};

/// The table. Order: the seed's classification table, then the
/// Dockerfile-shaped syntax.
pub const TABLE: &[Entry] = &[
    e(
        "AGENT",
        C,
        P::Core,
        S::Used,
        "the agent's identity: the Cedar principal, the run's name",
    ),
    e(
        "FROM",
        C,
        P::Core,
        S::Enforced,
        "a package in a named registry is pulled by digest and its TOOL/URL/MOUNT/CRED/POLICY are a ceiling; a Docker Hub name is a container image, checked only",
    ),
    e(
        "CMD",
        C,
        P::Core,
        S::Validated,
        "checked; agentfile runs the agent's model loop itself instead",
    ),
    e(
        "TOOL",
        C,
        P::Core,
        S::Enforced,
        "mapped to a built-in tool; only declared tools are offered and may run",
    ),
    e(
        "MOUNT",
        C,
        P::Core,
        S::Enforced,
        "the only paths file tools may use (ro: read, rw: read and write); /workspace is the workspace",
    ),
    e(
        "CRED",
        C,
        P::Core,
        S::Enforced,
        "env: references must be set before a run starts; values are never read into events",
    ),
    e(
        "URL",
        C,
        P::Core,
        S::Enforced,
        "the only hosts web_fetch may reach",
    ),
    e(
        "POLICY",
        C,
        P::Core,
        S::Enforced,
        "Cedar, evaluated by cedar-policy for every tool call, on top of the policy gate",
    ),
    e(
        "AUDIT",
        C,
        P::Core,
        S::Enforced,
        "every event of a run is stored, whatever the level",
    ),
    e(
        "TOOLSET",
        C,
        P::Capability,
        S::Validated,
        "checked; toolsets are not resolved",
    ),
    e(
        "FUNCTION",
        C,
        P::Capability,
        S::Validated,
        "checked; functions are not loaded",
    ),
    e(
        "SKILL",
        C,
        P::Capability,
        S::Validated,
        "checked; skills are not loaded",
    ),
    e(
        "SERVER",
        C,
        P::Capability,
        S::Validated,
        "checked; configure MCP servers in agentfile's config",
    ),
    e(
        "MCP",
        C,
        P::Capability,
        S::Validated,
        "checked; configure MCP servers in agentfile's config",
    ),
    e(
        "MEMORY",
        C,
        P::Capability,
        S::Validated,
        "checked; the run has agentfile's own memory tools",
    ),
    e(
        "SOP",
        C,
        P::Instruction,
        S::Used,
        "the agent's system prompt",
    ),
    e(
        "ALLOW",
        C,
        P::Security,
        S::Enforced,
        "lowered into a Cedar permit",
    ),
    e(
        "DENY",
        C,
        P::Security,
        S::Enforced,
        "lowered into a Cedar forbid",
    ),
    e(
        "RATELIMIT",
        C,
        P::Security,
        S::Validated,
        "checked; use rate_limit in policy.toml",
    ),
    e(
        "TIMEOUT",
        C,
        P::Security,
        S::Used,
        "the run's wall-clock limit",
    ),
    e(
        "LIMIT",
        C,
        P::Security,
        S::Validated,
        "checked; use agentfile's run limits",
    ),
    e(
        "ISOLATION",
        C,
        P::Placement,
        S::Validated,
        "placement: left out of the digest, ignored by a run (warned)",
    ),
    e(
        "IMAGE",
        C,
        P::Placement,
        S::Validated,
        "placement: left out of the digest, ignored by a run (warned)",
    ),
    e(
        "SLICE",
        C,
        P::Placement,
        S::Validated,
        "placement: left out of the digest, ignored by a run (warned)",
    ),
    e(
        "BACKEND",
        C,
        P::Placement,
        S::Validated,
        "placement: left out of the digest, ignored by a run (warned)",
    ),
    e(
        "BIND",
        C,
        P::Placement,
        S::Validated,
        "placement: left out of the digest, ignored by a run (warned)",
    ),
    e(
        "BROKER",
        C,
        P::Placement,
        S::Validated,
        "placement: left out of the digest, ignored by a run (warned)",
    ),
    e(
        "PLUGIN",
        C,
        P::Placement,
        S::Validated,
        "placement: left out of the digest, ignored by a run (warned)",
    ),
    e(
        "TRACE",
        C,
        P::Observability,
        S::Validated,
        "checked; use agentfile's [telemetry] config",
    ),
    e(
        "HEALTHCHECK",
        C,
        P::Observability,
        S::Validated,
        "checked; not run",
    ),
    e(
        "SHELL",
        C,
        P::Experimental,
        S::Validated,
        "checked; agentfile is the framework",
    ),
    e(
        "OPTIMIZER",
        C,
        P::Experimental,
        S::Validated,
        "checked; not run",
    ),
    e(
        "IDENTITY",
        D,
        P::Agentrc,
        S::Used,
        "name= is the agent's identity; the rest is shown",
    ),
    e(
        "CAPABILITY",
        D,
        P::Agentrc,
        S::Validated,
        "checked and shown",
    ),
    e(
        "SOP",
        D,
        P::Agentrc,
        S::Used,
        "the agent's system prompt (one line, heredoc, or COPY … /mnt/SOP)",
    ),
    e(
        "POLICY",
        D,
        P::Agentrc,
        S::Enforced,
        "network dns:HOST[:PORT] limits web_fetch to those hosts (enforced); agent.timeout is the run's time limit; other requests are checked and shown",
    ),
    e(
        "FROM",
        D,
        P::Dockerfile,
        S::Enforced,
        "as in the core syntax: a package in a named registry is a ceiling; a container image is checked only",
    ),
    e(
        "CMD",
        D,
        P::Dockerfile,
        S::Validated,
        "checked; agentfile runs the agent's model loop itself instead",
    ),
    e(
        "COPY",
        D,
        P::Dockerfile,
        S::Enforced,
        "/mnt/tools/NAME declares a tool (mapped like TOOL; file tools get the workspace); /mnt/SOP is the system prompt",
    ),
    e(
        "ADD",
        D,
        P::Dockerfile,
        S::Enforced,
        "as COPY; --remote resources are not fetched",
    ),
    e(
        "HEALTHCHECK",
        D,
        P::Dockerfile,
        S::Validated,
        "flags checked; not run",
    ),
    e(
        "LABEL",
        D,
        P::Dockerfile,
        S::Validated,
        "key=value checked; org.agentrc.secret.* checked for plaintext",
    ),
    e(
        "ENV",
        D,
        P::Dockerfile,
        S::Parsed,
        "shown; agentfile builds no image",
    ),
    e(
        "ARG",
        D,
        P::Dockerfile,
        S::Parsed,
        "shown; agentfile builds no image",
    ),
    e(
        "WORKDIR",
        D,
        P::Dockerfile,
        S::Parsed,
        "shown; agentfile builds no image",
    ),
    e(
        "USER",
        D,
        P::Dockerfile,
        S::Parsed,
        "shown; agentfile builds no image",
    ),
    e(
        "EXPOSE",
        D,
        P::Dockerfile,
        S::Parsed,
        "shown; agentfile builds no image",
    ),
    e(
        "RUN",
        D,
        P::Dockerfile,
        S::Parsed,
        "shown; agentfile builds no image",
    ),
    e(
        "ENTRYPOINT",
        D,
        P::Dockerfile,
        S::Parsed,
        "shown; agentfile builds no image",
    ),
    e(
        "VOLUME",
        D,
        P::Dockerfile,
        S::Parsed,
        "shown; agentfile builds no image",
    ),
    e(
        "STOPSIGNAL",
        D,
        P::Dockerfile,
        S::Parsed,
        "shown; agentfile builds no image",
    ),
    e(
        "SHELL",
        D,
        P::Dockerfile,
        S::Parsed,
        "shown; agentfile builds no image",
    ),
    e(
        "ONBUILD",
        D,
        P::Dockerfile,
        S::Parsed,
        "shown; agentfile builds no image",
    ),
];

/// The entry for `name` in `syntax`.
pub fn lookup(syntax: Syntax, name: &str) -> Option<&'static Entry> {
    TABLE.iter().find(|e| e.syntax == syntax && e.name == name)
}

/// Every name of a syntax, for did-you-mean.
pub fn names(syntax: Syntax) -> impl Iterator<Item = &'static str> {
    TABLE
        .iter()
        .filter(move |e| e.syntax == syntax)
        .map(|e| e.name)
}

/// The support matrix as text (CLI and README).
pub fn matrix_text() -> String {
    let mut o = String::from(
        "agentrc support matrix: what agentfile does with each directive\n\
         (parses: read and shown by inspect; validates: arguments checked; enforces: a run acts on it)\n\n",
    );
    for syntax in [C, D] {
        o.push_str(match syntax {
            C => "Core syntax (draft.4: AGENT, TOOL, MOUNT, POLICY … END)\n",
            D => "\nDockerfile-shaped syntax (IDENTITY, CAPABILITY, SOP, POLICY key value)\n",
        });
        o.push_str(&format!(
            "  {:<12} {:<14} {:<7} {:<9} {:<8} {}\n",
            "directive", "profile", "parses", "validates", "enforces", "what a run does"
        ));
        for e in TABLE.iter().filter(|e| e.syntax == syntax) {
            let (v, n) = marks(e.support);
            o.push_str(&format!(
                "  {:<12} {:<14} {:<7} {:<9} {:<8} {}\n",
                e.name,
                e.profile.as_str(),
                "yes",
                v,
                n,
                e.note
            ));
        }
    }
    o
}

/// `(validates, enforces)` marks.
fn marks(s: Support) -> (&'static str, &'static str) {
    match s {
        Support::Enforced => ("yes", "yes"),
        Support::Used => ("yes", "used"),
        Support::Validated => ("yes", "no"),
        Support::Parsed => ("no", "no"),
    }
}

/// The support matrix as JSON.
pub fn matrix_json() -> serde_json::Value {
    let rows: Vec<serde_json::Value> = TABLE
        .iter()
        .map(|e| {
            let (v, n) = marks(e.support);
            serde_json::json!({
                "syntax": e.syntax.as_str(),
                "directive": e.name,
                "profile": e.profile.as_str(),
                "parses": true,
                "validates": v == "yes",
                "enforces": n == "yes",
                "support": e.support.as_str(),
                "placement": e.placement,
                "note": e.note,
            })
        })
        .collect();
    serde_json::json!({ "directives": rows })
}

/// Built-in tools, by the names agentrc files use for them (without their
/// namespace: `utcp:file_read` is `file_read`).
pub const TOOL_NAMES: &[(&str, &str)] = &[
    ("file_read", "read"),
    ("read_file", "read"),
    ("read", "read"),
    ("file_write", "write"),
    ("write_file", "write"),
    ("write", "write"),
    ("file_edit", "edit"),
    ("edit_file", "edit"),
    ("edit", "edit"),
    ("file_list", "ls"),
    ("list_directory", "ls"),
    ("ls", "ls"),
    ("file_glob", "glob"),
    ("glob", "glob"),
    ("file_search", "grep"),
    ("grep", "grep"),
    ("search_files", "grep"),
    ("shell", "bash"),
    ("bash", "bash"),
    ("web_fetch", "web_fetch"),
    ("http_get", "web_fetch"),
    ("fetch", "web_fetch"),
    ("web_search", "web_search"),
    ("memory_read", "memory_read"),
    ("memory_write", "memory_write"),
];

/// Tool namespaces read as agentfile's built-in tools.
pub const TOOL_NAMESPACES: &[&str] = &["utcp", "utci", "builtin", "agentfile"];

/// The built-in tool for a tool name (namespace already removed).
pub fn builtin_tool(name: &str) -> Option<&'static str> {
    TOOL_NAMES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}
