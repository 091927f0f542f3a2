//! Tools: what agents act through, and the one policy gate in front of them.
//!
//! The executor sees tools only through [`ToolSet`]: the definitions to offer the
//! model, and one way to call a tool by name. Every call goes through the policy
//! gate before anything runs; a denied call never runs and comes back as a
//! [`CallResult`] with `denied` set, so the executor can tell the model and emit a
//! `policy_denied` event. Tool failures are results for the model, never run
//! failures.
//!
//! # Layout
//!
//! - [`policy`]: `policy.toml` loaded and validated ([`policy::Policy`]), then
//!   compiled for a workspace into the [`policy::Gate`] that judges every call:
//!   paths ([`policy::paths`]), bash lines parsed as shell ([`policy::bash`]),
//!   URLs and addresses ([`policy::web`]), MCP `server:tool` patterns, rate
//!   limits. With no policy file the safe default applies (file tools in the
//!   workspace only, no bash, no web, memory on, MCP denied).
//! - [`builtin`]: what each built-in tool does once allowed — read, write, edit,
//!   ls, glob, grep, bash, web_fetch, web_search, memory_read, memory_write.
//! - [`mcp`]: tools of MCP servers (rmcp client), started in the background,
//!   offered as `mcp_<server>_<tool>`.
//! - [`a2a`]: remote A2A agents bound as tools (`[tools.<id>] a2a = "URL"`):
//!   one message per call, the task followed by streaming or polling.
//! - [`toolbox`]: [`Toolbox`], the [`ToolSet`] the executor uses: the registry
//!   and the one place the gate is asked.
//! - [`secrets`]: which environment variables reach bash, bound commands,
//!   shell steps, MCP servers and a JavaScript tool's `env()`: one predicate
//!   and one allowlist for all of them.
//! - [`confine`]: how the run's programs are confined: the kernel sandbox
//!   (the `agentfile-sandbox` crate enforces it) derived from the same policy
//!   the gate applies, and the egress proxy's judge.
//! - [`script`]: the QuickJS runtime for agent files' JavaScript tools.
//! - [`isolate`]: work in a child process under limits (the shell analysis,
//!   the sandbox), each worker kind declaring its own hook.
//!
//! What this crate is not: the executor (it never decides what runs next) and
//! no reader of any workflow format.
//!
//! # Invariants
//!
//! - Nothing runs before the gate has said yes, and the gate is asked in one
//!   place (`toolbox.rs`). A denied call returns `denied: Some(..)` naming the
//!   rule, and never touches the file system, a process or the network beyond
//!   the checks themselves.
//! - Listings (glob, grep, ls) never show what `read` could not read.
//! - No secret reaches a bash process, a bound command, a shell step, an MCP
//!   server's environment or a JavaScript tool's `env()` ([`secrets`]).
//! - `ToolSet::call` never panics and never fails; every problem is an output.

use std::path::PathBuf;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use agentfile_llm::ToolDef;

pub mod a2a;
pub mod builtin;
pub mod confine;
pub mod isolate;
pub mod mcp;
pub mod policy;
pub mod script;
pub mod secrets;
pub mod toolbox;

pub use policy::{Gate, Policy, PolicyError};
pub use toolbox::{MemoryError, MemoryStore, ToolError, Toolbox, ToolboxOptions};

/// Where and for whom a tool call runs.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The workspace, absolute and canonical: file tools and bash work here.
    pub workspace: PathBuf,
    /// The agent id (`agent.id` in the config): the memory namespace.
    pub agent_id: String,
    /// Cancelled when the run is cancelled or a budget runs out: a running tool
    /// (a bash process group, an HTTP fetch, an MCP call) stops at once.
    pub cancel: CancellationToken,
}

/// What a tool returns: the text the model reads and, for a command, how it
/// ended as fields the executor reads (it never parses `content` back).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolOutput {
    /// Text the model reads (truncated with a note past the size cap).
    pub content: String,
    /// True when the tool failed (bad arguments, missing file, non-zero exit is
    /// *not* an error for bash — its exit code is part of the content).
    pub is_error: bool,
    /// Set when a command ran (the bash tool, a bound command, a shell step's
    /// script): its exit code and streams. `content` is the report of it the
    /// model reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandOutcome>,
}

impl ToolOutput {
    pub fn ok(content: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: content.into(),
            is_error: false,
            command: None,
        }
    }

    pub fn error(content: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: content.into(),
            is_error: true,
            command: None,
        }
    }

    /// Add a line the model should read after the tool's own report.
    pub fn append_note(&mut self, note: &str) {
        if !self.content.is_empty() && !self.content.ends_with('\n') {
            self.content.push('\n');
        }
        self.content.push_str(note);
    }
}

/// How a command ended and what it printed: the typed result behind the
/// bash tool's text report (`exit code: N`, `--- stdout ---`, `--- stderr ---`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CommandOutcome {
    /// The exit status, when the command exited by itself; `None` when a
    /// signal killed it, it timed out or was cancelled, or it could not be
    /// waited for.
    pub exit_code: Option<i32>,
    /// The signal that killed it, when one did and is known.
    pub signal: Option<i32>,
    /// What it printed on stdout (invalid UTF-8 replaced), up to the result
    /// cap.
    pub stdout: String,
    /// What it printed on stderr, likewise.
    pub stderr: String,
    /// True when a stream printed more than the cap and is cut here.
    pub truncated: bool,
}

impl CommandOutcome {
    /// It exited by itself with status 0.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0)
    }
}

/// Why the policy refused a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Denial {
    pub tool: String,
    /// The rule that decided, as a user would find it in policy.toml
    /// (`bash.denylist "sudo *"`, `read.deny "~/.ssh/*"`, `default_deny`,
    /// `[bash] enabled = false`, `no policy file: bash is off by default`).
    pub rule: String,
    /// What was refused, in words (`sudo rm -rf / (command 1 of 2)`).
    pub reason: String,
}

/// A declared script to run (a shell step).
#[derive(Debug, Clone, Copy)]
pub struct Script<'a> {
    /// Absolute, or relative to the workspace; it must lie inside it.
    pub path: &'a std::path::Path,
    /// `bash` or `pwsh`.
    pub interpreter: &'a str,
    pub args: &'a [String],
    /// Set in its environment, beside the scrubbed one.
    pub env: &'a [(String, String)],
}

/// The result of one call through the gate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallResult {
    /// What goes back to the model. For a denied call: an error naming the rule.
    pub output: ToolOutput,
    /// Set when the policy refused the call (it did not run).
    pub denied: Option<Denial>,
    /// Wall time of the call, gate included.
    pub duration: Duration,
}

impl CallResult {
    /// A call this tool set cannot make: an error for the model, nothing run.
    pub fn unsupported(message: String) -> CallResult {
        CallResult {
            output: ToolOutput::error(message),
            denied: None,
            duration: Duration::ZERO,
        }
    }
}

/// The executor's view of the tools a run may use.
pub trait ToolSet: Send + Sync {
    /// Tools to offer the model (only those the policy enables).
    fn definitions(&self) -> Vec<ToolDef>;

    /// Check `name(args)` against the policy and, when allowed, run it.
    /// Never panics and never fails: every problem is a [`CallResult`].
    fn call<'a>(
        &'a self,
        name: &'a str,
        args: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, CallResult>;

    /// Run a program a workflow's config binds as a tool (`[tools.<id>]
    /// command = [...]`): `input` on its stdin; the command line passes the
    /// bash policy first. The output's [`ToolOutput::command`] says how it
    /// ended; its content is the bash tool's report (`exit code: N`, ...).
    fn run_command<'a>(
        &'a self,
        argv: &'a [String],
        input: Vec<u8>,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, CallResult> {
        let _ = (input, ctx);
        let message = format!(
            "cannot run `{}`: this tool set does not run commands",
            argv.join(" ")
        );
        Box::pin(async move { CallResult::unsupported(message) })
    }

    /// The real place of a workspace file the runtime reads (`read`) or
    /// writes (`write`) on a workflow's behalf (a file contract), judged by
    /// the policy as that tool's call would be.
    fn host_path(&self, tool: policy::Tool, path: &str) -> Result<PathBuf, Denial> {
        let _ = path;
        Err(Denial {
            tool: tool.name().to_owned(),
            rule: "no policy".to_owned(),
            reason: "this tool set does not give file access".to_owned(),
        })
    }

    /// Run a script a workflow declares (a shell step) the way the bash tool
    /// runs a command: own process group, scrubbed environment, timeout. The
    /// declaration is the permission, so the bash allowlist does not apply;
    /// the script must lie inside the workspace. Its output's
    /// [`ToolOutput::command`] says how it ended, as for [`ToolSet::run_command`].
    fn run_script<'a>(
        &'a self,
        script: Script<'a>,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, CallResult> {
        let _ = ctx;
        let message = format!(
            "cannot run `{}`: this tool set does not run scripts",
            script.path.display()
        );
        Box::pin(async move { CallResult::unsupported(message) })
    }

    /// `env(name)` of an agent's JavaScript tool: the variable as the bash
    /// tool's environment holds it (`None` when that environment may hold it
    /// but does not), or why it may not be read (see [`secrets::Secrets::lookup`]).
    fn env_var(&self, name: &str) -> Result<Option<String>, Denial> {
        Err(Denial {
            tool: "env".to_owned(),
            rule: "no environment".to_owned(),
            reason: format!("`{name}`: this tool set gives no environment"),
        })
    }

    /// What the kernel sandbox of the programs this tool set starts
    /// enforces, for `run_started` (`None`: it starts none).
    fn sandbox(&self) -> Option<agentfile_wire::events::SandboxInfo> {
        None
    }
}
