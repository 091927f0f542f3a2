//! What a plan keeps of an agentrc Agentfile (CONTRACT §12): the parse tree in
//! directive order, and what its boundary directives lower to for a run.
//!
//! `inspect --format json` prints a [`Declaration`] as it is; the run reads
//! [`Grants`] to build the extra policy layers (the declared tools, mounts and
//! hosts, and the Cedar policies) that every tool call must also pass.
//!
//! A declaration whose FROM was resolved carries its [`Base`]: the base's
//! grants bound the file's own (the front end refuses a widening), and the
//! run asks the base's grants and policies as one more layer.
//!
//! The policies reach the run compiled: the front end that read them puts an
//! [`Authorize`] beside their text ([`Grants::compiled`]), so the gate asks
//! them without knowing their language or linking its parser.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An agentrc Agentfile, parsed, checked and lowered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Declaration {
    /// `core` (draft.4: AGENT, TOOL, MOUNT, `POLICY … END`) or `dockerfile`
    /// (IDENTITY, CAPABILITY, SOP, one-line POLICY over Dockerfile keywords).
    pub syntax: String,
    /// The `# syntax=` parser directive's value, when the file has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syntax_directive: Option<String>,
    /// The agent's identity: AGENT, or IDENTITY `name=`; else the file's
    /// folder name.
    pub agent: String,
    /// `sha256:` of the portable declaration: every directive but the
    /// placement ones, comments and layout left out (see `agentrc::digest`).
    pub digest: String,
    /// The optional profiles of the core syntax whose directives the file
    /// may use: all of them, or under `--profile core` those `--extensions`
    /// names (empty for the Dockerfile-shaped syntax, which has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    pub directives: Vec<Directive>,
    /// What this declaration may use: its own directives, and what it
    /// inherits from its base for those it does not write.
    pub grants: Grants,
    /// The base package FROM names, when the caller resolved it (CONTRACT
    /// §20): its grants are a ceiling `grants` stays under, and its policies
    /// keep applying beside this declaration's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<Box<Base>>,
}

/// The base a FROM resolved to: what it is, and what it allows.
///
/// A run asks the base's grants and policies too ([`Base::grants`] and
/// [`Base::base`], all the way down): a call must pass every layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Base {
    /// The reference as FROM writes it (without `oci://`).
    pub reference: String,
    /// The package's manifest digest (`sha256:…`).
    pub digest: String,
    /// The base's agent: the principal its policies are asked about.
    pub agent: String,
    /// The base's grants as resolved (within its own base's, if it has one);
    /// its policies, compiled, in [`Grants::compiled`].
    pub grants: Grants,
    /// The base's own base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<Box<Base>>,
}

impl Base {
    /// `reference@digest`, or the reference when it already pins a digest.
    pub fn pinned(&self) -> String {
        if self.reference.contains('@') {
            self.reference.clone()
        } else {
            format!("{}@{}", self.reference, self.digest)
        }
    }
}

/// One directive, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Directive {
    pub directive: String,
    /// The profile that defines it: `core`, `capability`, `instruction`,
    /// `security`, `placement`, `observability`, `experimental` (draft.4), or
    /// `agentrc` / `dockerfile` (the Dockerfile-shaped syntax).
    pub profile: String,
    /// 1-based line and column of the directive's name.
    pub line: u32,
    pub column: u32,
    /// The last line it spans (continuations, blocks, heredocs).
    pub end_line: u32,
    /// Its arguments, split on whitespace (quotes kept as written), flags
    /// left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// `--name=value` flags (COPY, ADD, HEALTHCHECK); a bare flag has an empty
    /// value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub flags: BTreeMap<String, String>,
    /// `key=value` pairs (IDENTITY, LABEL, ENV, SLICE), quotes removed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, String>,
    /// A `POLICY … END` / `SOP … END` block or a heredoc, captured raw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<Block>,
    /// A placement directive: left out of the digest, ignored by a run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub placement: bool,
    /// What agentfile does with it: `enforced`, `used`, `validated` or
    /// `parsed` (see `inspect --support-matrix`).
    pub support: String,
}

/// Raw lines captured without being read as directives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Block {
    /// `policy`, `sop` or `heredoc`.
    pub kind: String,
    /// The first line of the text.
    pub line: u32,
    /// Byte offset of the text in the file.
    pub offset: usize,
    pub text: String,
}

/// What the declaration grants a run. Every list is an allow list: what it
/// does not name is denied, on top of the operator's policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Grants {
    /// Declared tools and the built-in tool each one is.
    #[serde(default)]
    pub tools: Vec<DeclaredTool>,
    /// File access: MOUNT lines (core), the workspace (Dockerfile syntax).
    #[serde(default)]
    pub mounts: Vec<Mount>,
    /// Hosts web_fetch may reach (URL, `POLICY network dns:…`).
    #[serde(default)]
    pub hosts: Vec<String>,
    /// CRED references: names, never values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<Credential>,
    /// The SOP: the agent's system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sop: Option<String>,
    /// AUDIT's level; every event of a run is stored whatever it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<String>,
    /// Cedar policies (core syntax): a call runs only if they allow it too.
    /// `None`: the file's syntax has no Cedar (Dockerfile-shaped), or it has
    /// a base and writes no policy of its own (the base's apply, [`Base`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cedar: Option<Vec<Block>>,
    /// The policies of `cedar`, compiled by the front end that read them.
    /// Not part of the plan's JSON: a plan read back from JSON has none, and
    /// a run of policies that were never compiled is refused.
    #[serde(skip)]
    #[schemars(skip)]
    pub compiled: Compiled,
    /// Directives a run leaves aside, with why (placement, requests agentfile
    /// does not act on).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<String>,
}

/// A TOOL (or a `/mnt/tools/<name>` COPY/ADD) and what it maps to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeclaredTool {
    /// As written: `utcp:file_read`, `mcp:github.get_issue`.
    pub declared: String,
    /// The Cedar resource id: the name without its namespace (`file_read`).
    pub name: String,
    /// The built-in tool (`read`) or MCP tool (`mcp:github:get_issue`); `None`
    /// when agentfile has no such tool (a run refuses to start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    pub line: u32,
}

/// A path the agent may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Mount {
    /// As written (`/workspace`, `./data`).
    pub path: String,
    /// The policy pattern it grants (`$WORKSPACE/**`, `$WORKSPACE/data/**`).
    pub pattern: String,
    pub write: bool,
}

/// A credential reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Credential {
    pub name: String,
    /// `env:VAR`, `vault://…`, `keyring:…`, as written.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The answer of a declaration's policies to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    /// What decided, in one short line for an event's `rule`.
    pub rule: String,
    /// Policies that failed to evaluate (and were skipped) and requests that
    /// could not be built, in words.
    pub errors: Vec<String>,
}

/// A declaration's policies, compiled: what the gate asks about every call of
/// a declared tool. The principal is the agent, the resource a declared
/// tool's name of `resource_type`, the context a record of `context`'s pairs.
pub trait Authorize: Send + Sync {
    /// May `agent` do `action` on `resource`?
    fn authorize(
        &self,
        agent: &str,
        action: &str,
        resource_type: &str,
        resource: &str,
        context: &[(&str, &str)],
    ) -> Verdict;

    /// [`Authorize::authorize`] as if the policies also permitted `action`
    /// on every resource: allowed unless a policy forbids it. For actions no
    /// permit names ([`Authorize::permits_name`]), so that the forbids still
    /// hold for them.
    fn authorize_with_default_permit(
        &self,
        agent: &str,
        action: &str,
        resource_type: &str,
        resource: &str,
        context: &[(&str, &str)],
    ) -> Verdict;

    /// Whether some permit names `action`.
    fn permits_name(&self, action: &str) -> bool;
}

/// [`Grants::compiled`]: the compiled policies, when a front end compiled
/// them. Compared as equal whatever they hold: they are derived from the
/// policies' text, which is compared.
#[derive(Clone, Default)]
pub struct Compiled(pub Option<Arc<dyn Authorize>>);

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(_) => f.write_str("compiled"),
            None => f.write_str("not compiled"),
        }
    }
}

impl PartialEq for Compiled {
    fn eq(&self, _: &Compiled) -> bool {
        true
    }
}
