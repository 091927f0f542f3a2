//! The toolbox: every built-in tool and every MCP tool behind the one gate, as
//! the [`ToolSet`] the executor calls.
//!
//! A call goes: name → arguments checked → [`Gate::check`] → the tool, on the
//! resolved path or URL the gate returned → output capped → [`CallResult`]. This
//! is the only place the policy is consulted before a tool runs. Anything that
//! goes wrong — bad arguments, a missing file, a timeout, a crashed MCP server,
//! even a panic inside a tool — comes back as an error *output* for the model;
//! a refusal comes back with `denied` set so the executor can emit
//! `policy_denied`.
//!
//! The workspace is fixed when the toolbox is built (the policy's `$WORKSPACE`
//! is compiled against it); `ToolContext::workspace` is expected to name the
//! same folder and is not consulted. `ToolContext::agent_id` is the memory
//! namespace and `ToolContext::cancel` stops a running call (a bash process
//! group is killed, a fetch or MCP call abandoned).
//!
//! How the executor builds one: [`Toolbox::for_workflow`] (config, workflow
//! file, workspace, `--policy`), then [`Toolbox::ready`] before the first model
//! call, [`Toolbox::warnings`] to report, and [`ToolSet`] from there on.

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use url::Url;

use super::a2a::{self, A2aHub};
use super::builtin::{self, bash as bash_tool, fs, memory, search, web};
use super::confine::ToolSandbox;
use super::mcp::{self, McpHub};
use super::policy::control::{ControlKind, Mark, Tripwire};
use super::policy::{Gate, Policy, PolicyError, Request, Tool};
use super::secrets::Secrets;
use super::{CallResult, Denial, Script, ToolContext, ToolOutput, ToolSet};
use agentfile_config::Config;
use agentfile_llm::ToolDef;

pub use memory::{MemoryError, MemoryStore};

/// The run's control files at the tripwire: all of them, for a call that
/// could write any (a program outside the sandbox, an MCP server it does not
/// hold), and those not there at the start, for a program in the sandbox
/// (which mounts the others read-only).
struct Tripwires {
    all: Arc<Tripwire>,
    unmounted: Arc<Tripwire>,
}

/// One call's turn at a tripwire.
struct Watch {
    wire: Arc<Tripwire>,
    mark: Mark,
}

/// Limits and timeouts of the tools. The defaults suit an unattended run.
#[derive(Debug, Clone)]
pub struct ToolboxOptions {
    /// Largest tool result handed to the model (bytes), notes included; the
    /// built-in tools fit their output under it with notes that give the true
    /// size (`builtin::fit`), anything else is cut by `builtin::truncate`.
    pub max_result_bytes: usize,
    /// bash: default timeout, and the most a call may ask for.
    pub bash_timeout: Duration,
    pub bash_max_timeout: Duration,
    /// web_fetch / web_search: whole-request timeout and download cap.
    pub web_timeout: Duration,
    pub web_max_bytes: usize,
    /// glob and ls: most entries listed.
    pub max_entries: usize,
    /// grep: bytes of a line searched (the rest is skipped, and said), and
    /// bytes of a file searched; they bound its memory and its time.
    pub grep_max_line_bytes: usize,
    pub grep_max_file_bytes: u64,
    /// MCP: how long [`Toolbox::ready`] waits for servers to list their tools,
    /// how long a server may take to start, and how long a call may take.
    pub mcp_list_deadline: Duration,
    pub mcp_start_timeout: Duration,
    pub mcp_call_timeout: Duration,
    /// What `~` means, for the policy and as bash's `HOME`; `None`: `$HOME`.
    pub home: Option<PathBuf>,
    /// The environment bash's and MCP servers' environments are derived from
    /// (secrets are removed either way); `None`: this process's.
    pub environment: Option<Vec<(String, String)>>,
    /// Whether the workflow itself starts programs (shell steps), whatever
    /// the policy lets the model do. With it, or with bash on or an MCP server
    /// in the sandbox, the kernel sandbox is prepared with the toolbox;
    /// otherwise when a program first starts, if one does.
    pub programs_declared: bool,
}

impl Default for ToolboxOptions {
    fn default() -> Self {
        ToolboxOptions {
            max_result_bytes: 64 * 1024,
            bash_timeout: Duration::from_secs(120),
            bash_max_timeout: Duration::from_secs(600),
            web_timeout: Duration::from_secs(30),
            web_max_bytes: 5 * 1024 * 1024,
            max_entries: 1000,
            grep_max_line_bytes: search::DEFAULT_MAX_LINE_BYTES,
            grep_max_file_bytes: search::DEFAULT_MAX_FILE_BYTES,
            mcp_list_deadline: Duration::from_secs(5),
            mcp_start_timeout: Duration::from_secs(30),
            mcp_call_timeout: Duration::from_secs(60),
            home: None,
            environment: None,
            programs_declared: true,
        }
    }
}

/// Why a toolbox could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("workspace {path}: {source}")]
    Workspace {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Memory(#[from] MemoryError),
    #[error("web.gateway_url {url:?} is not a URL: {message}")]
    Gateway { url: String, message: String },
    #[error(
        "the toolbox must be built inside a tokio runtime (MCP servers start in the background)"
    )]
    NoRuntime,
}

/// The value of a tool argument, or (from the calling function) the tool's
/// error answer `<tool>: <message>` when the argument is wrong.
macro_rules! arg {
    ($tool:expr, $e:expr) => {
        match $e {
            Ok(v) => v,
            Err(msg) => return Ok(ToolOutput::error(format!("{}: {msg}", $tool.name()))),
        }
    };
}

/// Built-in and MCP tools behind one policy gate.
pub struct Toolbox {
    gate: Arc<Gate>,
    memory: MemoryStore,
    web: web::WebClient,
    has_gateway: bool,
    /// The environment of bash, bound commands and shell steps; `env()` of a
    /// JavaScript tool reads from it too.
    bash_env: Arc<Vec<(String, String)>>,
    /// The config's secrets ([`Secrets`]): what `bash_env` and MCP servers
    /// are kept from.
    secrets: Secrets,
    /// `[bash]` of the config: the resource limits of every command.
    bash_limits: agentfile_config::BashSection,
    /// The kernel sandbox of every program a call starts.
    sandbox: Arc<ToolSandbox>,
    mcp: McpHub,
    /// Remote A2A agents bound as tools (`[tools.<id>] a2a`).
    a2a: A2aHub,
    /// Configured servers the policy denies entirely (never started).
    unstarted_mcp: Vec<String>,
    options: ToolboxOptions,
    warnings: Vec<String>,
    /// Undoes what a call changed in the run's control files (see
    /// [`crate::policy::control`]).
    tripwire: Tripwires,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox")
            .field("workspace", &self.gate.workspace())
            .field("mcp", &self.mcp)
            .finish()
    }
}

impl Toolbox {
    /// Build the toolbox for a workspace (which must exist). MCP servers start in
    /// the background; call [`Toolbox::ready`] before the first model call to
    /// give them a moment to list their tools.
    pub fn new(
        config: &Config,
        policy: Policy,
        workspace: &Path,
        memory: MemoryStore,
    ) -> Result<Toolbox, ToolError> {
        Self::with_options(config, policy, workspace, memory, ToolboxOptions::default())
    }

    /// [`Toolbox::new`] with explicit limits.
    pub fn with_options(
        config: &Config,
        policy: Policy,
        workspace: &Path,
        memory: MemoryStore,
        options: ToolboxOptions,
    ) -> Result<Toolbox, ToolError> {
        let workspace = workspace
            .canonicalize()
            .map_err(|source| ToolError::Workspace {
                path: workspace.to_owned(),
                source,
            })?;
        let environment: Vec<(String, String)> = match &options.environment {
            Some(e) => e.clone(),
            None => std::env::vars().collect(),
        };
        let home = options.home.clone().or_else(|| {
            environment
                .iter()
                .find(|(k, _)| k == "HOME")
                .filter(|(_, v)| !v.is_empty())
                .map(|(_, v)| PathBuf::from(v))
        });
        let gate = Arc::new(policy.bind(&workspace, home.as_deref())?);
        let mut warnings: Vec<String> = policy
            .ignored_sections()
            .iter()
            .map(|s| format!("policy: section [{s}] is not used by agentfile and was ignored"))
            .collect();
        // Prepared now for a run that may start programs, so its
        // `run_started` says what holds them; a run whose tools start none
        // (the safe default: file tools only) does not pay for a kernel probe,
        // a temporary folder and a ruleset it would never use.
        let may_start_programs = options.programs_declared
            || gate.offers(Tool::Bash)
            || (policy.sandbox().mcp_servers == Some(true) && !config.mcp.servers.is_empty());
        let sandbox = if may_start_programs {
            ToolSandbox::new
        } else {
            ToolSandbox::deferred
        };
        let sandbox = Arc::new(
            sandbox(
                &policy,
                gate.clone(),
                &environment,
                config.session.path.as_deref(),
            )
            .bounded_by(config.bash.max_processes),
        );
        warnings.extend(sandbox.warning());

        let secrets = Secrets::from_config(config);
        let mut bash_env = secrets.child_env(environment.iter().cloned());
        if let Some(h) = &options.home {
            bash_env.retain(|(k, _)| k != "HOME");
            bash_env.push(("HOME".to_owned(), h.display().to_string()));
            bash_env.sort();
        }

        let gateway = match &config.web.gateway_url {
            Some(u) if !u.trim().is_empty() => {
                let url = Url::parse(u).map_err(|e| ToolError::Gateway {
                    url: u.clone(),
                    message: e.to_string(),
                })?;
                let token = config.web.gateway_token_env.as_ref().and_then(|name| {
                    let v = environment
                        .iter()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.clone())
                        .filter(|v| !v.is_empty());
                    if v.is_none() {
                        warnings.push(format!(
                            "web.gateway_token_env names {name}, which is not set; the gateway is called without a token"
                        ));
                    }
                    v
                });
                Some((url, token))
            }
            _ => None,
        };
        let has_gateway = gateway.is_some();
        let web = web::WebClient::new(gateway, options.web_timeout, options.web_max_bytes)
            .with_result_cap(options.max_result_bytes);

        let servers = &config.mcp.servers;
        if !servers.is_empty() && tokio::runtime::Handle::try_current().is_err() {
            return Err(ToolError::NoRuntime);
        }
        let mcp = McpHub::start(
            servers,
            &gate,
            &workspace,
            &environment,
            &secrets,
            options.mcp_start_timeout,
            options.mcp_call_timeout,
            sandbox.covers_mcp_servers().then(|| sandbox.clone()),
        );
        let a2a = A2aHub::from_config(&config.tools, &environment);
        let unstarted_mcp = servers
            .keys()
            .filter(|s| !gate.mcp_server_possible(s))
            .cloned()
            .collect();
        let watched: Vec<PathBuf> = gate
            .control_files()
            .iter()
            .filter(|(c, writable)| !writable && c.kind != ControlKind::Store)
            .map(|(c, _)| c.path.clone())
            .collect();
        let quarantine = workspace.join(".agentfile").join("quarantine");
        // The sandbox mounts the control files there are now read-only; a
        // program in it can only make one that is not there yet.
        let unmounted = watched
            .iter()
            .filter(|p| p.symlink_metadata().is_err())
            .cloned();
        let tripwire = Tripwires {
            all: Arc::new(Tripwire::new(watched.iter().cloned(), quarantine.clone())),
            unmounted: Arc::new(Tripwire::new(unmounted, quarantine)),
        };
        Ok(Toolbox {
            tripwire,
            gate,
            memory,
            web,
            has_gateway,
            bash_env: Arc::new(bash_env),
            secrets,
            bash_limits: config.bash.clone(),
            sandbox,
            mcp,
            a2a,
            unstarted_mcp,
            options,
            warnings,
        })
    }

    /// Everything a run needs, the way the CLI finds it: the policy from
    /// `--policy` or beside the workflow file (else the safe default), and the
    /// memory store in `<workspace>/.agentfile/sessions.db`.
    pub fn for_workflow(
        config: &Config,
        workflow_file: &Path,
        workspace: &Path,
        policy_file: Option<&Path>,
    ) -> Result<Toolbox, ToolError> {
        let dir = workflow_file.parent().unwrap_or(Path::new("."));
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let policy = Policy::load(policy_file, dir)?;
        let memory = MemoryStore::open(&workspace.join(".agentfile").join("sessions.db"))?;
        Toolbox::new(config, policy, workspace, memory)
    }

    /// Start a call's turn at the tripwire when the call could change a
    /// control file itself: a program outside the whole sandbox (which mounts
    /// them read-only), or an MCP server the sandbox does not hold. The
    /// built-in file tools cannot (the gate refuses them), and a change made
    /// while only such calls run is a person's, which takes effect.
    fn watch(&self, tool: Option<&str>) -> Option<Watch> {
        // A remote agent touches no file here.
        if tool.is_some_and(|n| self.a2a.get(n).is_some()) {
            return None;
        }
        let sandboxed = match tool.map(Tool::from_name) {
            // A shell step or a command tool: a program.
            None | Some(Some(Tool::Bash)) => self.sandbox.holds_control_files(),
            // The file tools: the gate holds every control file.
            Some(Some(_)) => return None,
            // An MCP server's tool.
            Some(None) => self.sandbox.covers_mcp_servers() && self.sandbox.holds_control_files(),
        };
        // In the sandbox, only a control file not there at the start (not
        // mounted) could be the call's.
        let wire = if sandboxed {
            &self.tripwire.unmounted
        } else {
            &self.tripwire.all
        };
        Some(Watch {
            mark: wire.before(),
            wire: wire.clone(),
        })
    }

    /// End a call's turn at the tripwire: what it changed in the run's
    /// control files is undone, the model reads that in the call's result,
    /// and the run's log gets it as an `error` event.
    fn undo_control_changes(&self, watch: Option<Watch>, mut out: ToolOutput) -> ToolOutput {
        let Some(Watch { wire, mark }) = watch else {
            return out;
        };
        let said = wire.after(mark);
        if said.is_empty() {
            return out;
        }
        let notices = self.mcp.notices();
        for line in &said {
            tracing::warn!("{line}");
            notices.push(line.clone());
        }
        out.append_note(&said.join("\n"));
        out
    }

    /// Wait (up to `mcp_list_deadline`) for MCP servers to list their tools.
    /// Returns at once when there are none.
    pub async fn ready(&self) {
        // File tools run on the blocking pool. Start its first thread now, while
        // the run sets up and its first model call is in flight, rather than when
        // the first tool call needs it (0.2 ms on a quiet machine, several on a
        // busy one). An idle pool thread exits after tokio's keep-alive.
        drop(tokio::task::spawn_blocking(|| ()));
        let deadline = self.options.mcp_list_deadline;
        let mcp = async {
            if !self.mcp.is_empty() {
                self.mcp.wait_ready(deadline).await;
            }
        };
        // The cards of the remote agents the policy lets the run reach: the
        // model's first request describes them.
        let gate = &self.gate;
        let cards = self
            .a2a
            .prefetch(gate, |t| gate.check_url(&t.url).is_ok(), deadline);
        tokio::join!(mcp, cards);
    }

    /// Things the caller should show as warnings: ignored policy sections, MCP
    /// servers that failed to start, a missing gateway token, an A2A binding
    /// that cannot be used or whose card could not be read.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.warnings.clone();
        w.extend(self.mcp.warnings());
        w.extend(self.a2a.warnings());
        w
    }

    /// The compiled policy.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The kernel sandbox of the programs calls start.
    pub fn tool_sandbox(&self) -> &ToolSandbox {
        &self.sandbox
    }

    /// The workspace, resolved.
    /// Where the toolbox says an MCP server died mid-run (see
    /// [`agentfile_session::events::Notices`]).
    pub fn notices(&self) -> agentfile_session::events::Notices {
        self.mcp.notices()
    }

    pub fn workspace(&self) -> &Path {
        self.gate.workspace()
    }

    /// Stop MCP servers now (dropping the toolbox does too).
    pub fn shutdown(&self) {
        self.mcp.shutdown();
    }

    fn cap(&self, mut out: ToolOutput) -> ToolOutput {
        out.content = builtin::truncate(out.content, self.options.max_result_bytes);
        out
    }

    async fn dispatch(
        &self,
        name: &str,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, Denial> {
        if ctx.cancel.is_cancelled() {
            return Ok(ToolOutput::error("cancelled before it started"));
        }
        let args = if args.is_null() { json!({}) } else { args };
        if let Some(tool) = Tool::from_name(name) {
            if !args.is_object() {
                return Ok(ToolOutput::error(format!(
                    "arguments for `{name}` must be a JSON object"
                )));
            }
            return self.builtin(tool, &args, ctx).await;
        }
        if let Some(t) = self.a2a.get(name) {
            // The URL as a web_fetch of it would be judged (the web rules,
            // a rate-limit slot); the card's and endpoint's URLs and their
            // addresses are judged again before anything is sent.
            self.gate
                .check(&Request::Fetch { url: &t.url })
                .map_err(|d| Denial {
                    tool: t.id.clone(),
                    rule: d.rule,
                    reason: format!("{} (A2A agent {})", d.reason, t.url),
                })?;
            return a2a::call(t, &self.gate, args, &ctx.cancel).await;
        }
        if let Some(t) = self.mcp.lookup(name, &ctx.cancel).await {
            self.gate.check(&Request::Mcp {
                server: &t.server,
                tool: &t.name,
            })?;
            return Ok(self.mcp.call(&t, args, &ctx.cancel).await);
        }
        for server in &self.unstarted_mcp {
            let prefix = mcp::exposed_name(server, "");
            if let Some(tool) = name.strip_prefix(&prefix) {
                // Its server was never started because the policy allows none of
                // its tools; the call is refused by the same rule.
                self.gate.check(&Request::Mcp { server, tool })?;
            }
        }
        let known: Vec<String> = self.definitions().into_iter().map(|d| d.name).collect();
        let hint = match agentfile_plan::diag::suggest(name, known.iter().map(String::as_str)) {
            Some(s) => format!("; did you mean `{s}`?"),
            None => format!("; available: {}", known.join(", ")),
        };
        Ok(ToolOutput::error(format!("unknown tool `{name}`{hint}")))
    }

    async fn builtin(
        &self,
        tool: Tool,
        args: &Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, Denial> {
        match tool {
            Tool::Read => self.read(args).await,
            Tool::Write => self.write(args).await,
            Tool::Edit => self.edit(args).await,
            Tool::Ls => self.ls(args).await,
            Tool::Glob => self.glob(args).await,
            Tool::Grep => self.grep(args).await,
            Tool::Bash => self.bash(args, ctx).await,
            Tool::WebFetch => self.web_fetch(args, ctx).await,
            Tool::WebSearch => self.web_search(args, ctx).await,
            Tool::MemoryRead => self.memory_read(args, ctx).await,
            Tool::MemoryWrite => self.memory_write(args, ctx).await,
        }
    }

    async fn read(&self, args: &Value) -> Result<ToolOutput, Denial> {
        let tool = Tool::Read;
        let ws = self.gate.workspace().to_path_buf();
        let path = arg!(tool, builtin::str_arg(args, "path"));
        let offset = arg!(tool, builtin::opt_u64(args, "offset"));
        let limit = arg!(tool, builtin::opt_u64(args, "limit"));
        let r = self.path_permit(tool, path)?;
        let cap = self.options.max_result_bytes;
        Ok(blocking(move || fs::read(&r, &fs::shown(&r, &ws), offset, limit, cap)).await)
    }

    async fn write(&self, args: &Value) -> Result<ToolOutput, Denial> {
        let tool = Tool::Write;
        let ws = self.gate.workspace().to_path_buf();
        let path = arg!(tool, builtin::str_arg(args, "path"));
        let content = arg!(tool, builtin::str_arg(args, "content")).to_owned();
        let r = self.path_permit(tool, path)?;
        Ok(blocking(move || fs::write(&r, &fs::shown(&r, &ws), &content)).await)
    }

    async fn edit(&self, args: &Value) -> Result<ToolOutput, Denial> {
        let tool = Tool::Edit;
        let ws = self.gate.workspace().to_path_buf();
        let path = arg!(tool, builtin::str_arg(args, "path"));
        let old = arg!(tool, builtin::str_arg(args, "old")).to_owned();
        let new = arg!(tool, builtin::str_arg(args, "new")).to_owned();
        let all = arg!(tool, builtin::opt_bool(args, "replace_all")).unwrap_or(false);
        let r = self.path_permit(tool, path)?;
        Ok(blocking(move || fs::edit(&r, &fs::shown(&r, &ws), &old, &new, all)).await)
    }

    async fn ls(&self, args: &Value) -> Result<ToolOutput, Denial> {
        let tool = Tool::Ls;
        let ws = self.gate.workspace().to_path_buf();
        let path = arg!(tool, builtin::opt_str(args, "path")).unwrap_or(".");
        let r = self.path_permit(tool, path)?;
        let gate = self.gate.clone();
        let max = self.options.max_entries;
        Ok(blocking(move || fs::ls(&gate, &r, &fs::shown(&r, &ws), max)).await)
    }

    async fn glob(&self, args: &Value) -> Result<ToolOutput, Denial> {
        let tool = Tool::Glob;
        let pattern = arg!(tool, builtin::str_arg(args, "pattern"));
        let path = arg!(tool, builtin::opt_str(args, "path"));
        let gitignore = arg!(tool, builtin::opt_bool(args, "respect_gitignore")).unwrap_or(true);
        let (base, rest) = arg!(tool, search::split_glob(pattern, path));
        let r = self.path_permit(tool, &base)?;
        let gate = self.gate.clone();
        let max = self.options.max_entries;
        Ok(blocking(move || search::glob(&gate, &r, &rest, gitignore, max)).await)
    }

    async fn grep(&self, args: &Value) -> Result<ToolOutput, Denial> {
        let tool = Tool::Grep;
        let pattern = arg!(tool, builtin::str_arg(args, "pattern"));
        let path = arg!(tool, builtin::opt_str(args, "path")).unwrap_or(".");
        let mut opts = search::GrepOptions::new(pattern);
        opts.glob = arg!(tool, builtin::opt_str(args, "glob")).map(str::to_owned);
        opts.case_insensitive =
            arg!(tool, builtin::opt_bool(args, "case_insensitive")).unwrap_or(false);
        opts.fixed_strings = arg!(tool, builtin::opt_bool(args, "fixed_strings")).unwrap_or(false);
        opts.context = arg!(tool, builtin::opt_u64(args, "context"))
            .unwrap_or(0)
            .min(10) as usize;
        opts.respect_gitignore =
            arg!(tool, builtin::opt_bool(args, "respect_gitignore")).unwrap_or(true);
        opts.max_output = self.options.max_result_bytes;
        opts.max_line_chars = 500;
        opts.max_line_bytes = self.options.grep_max_line_bytes;
        opts.max_file_bytes = self.options.grep_max_file_bytes;
        let r = self.path_permit(tool, path)?;
        let gate = self.gate.clone();
        Ok(blocking(move || search::grep_tool(&gate, &r, &opts)).await)
    }

    async fn bash(&self, args: &Value, ctx: &ToolContext) -> Result<ToolOutput, Denial> {
        let tool = Tool::Bash;
        let ws = self.gate.workspace().to_path_buf();
        let command = arg!(tool, builtin::str_arg(args, "command")).to_owned();
        if command.trim().is_empty() {
            return Ok(ToolOutput::error("bash: `command` is empty"));
        }
        let timeout = match arg!(tool, builtin::opt_u64(args, "timeout")) {
            Some(s) => Duration::from_secs(s.max(1)).min(self.options.bash_max_timeout),
            None => self.options.bash_timeout,
        };
        self.check_bash(command.clone()).await?;
        self.sandbox.admit("bash")?;
        Ok(bash_tool::run(
            &command,
            None,
            &ws,
            &self.bash_env,
            timeout,
            self.options.max_result_bytes,
            &self.bash_limits,
            &ctx.cancel,
            Some(&self.sandbox),
        )
        .await)
    }

    async fn web_fetch(&self, args: &Value, ctx: &ToolContext) -> Result<ToolOutput, Denial> {
        let tool = Tool::WebFetch;
        let raw = arg!(tool, builtin::str_arg(args, "url"));
        let url = arg!(
            tool,
            Url::parse(raw.trim()).map_err(|e| format!("`{raw}` is not a URL: {e}"))
        );
        let permit = self.gate.check(&Request::Fetch { url: &url })?;
        let Some(verdict) = permit.url else {
            return Ok(ToolOutput::error("web_fetch: the URL was not judged"));
        };
        self.web.fetch(&self.gate, url, verdict, &ctx.cancel).await
    }

    async fn web_search(&self, args: &Value, ctx: &ToolContext) -> Result<ToolOutput, Denial> {
        let tool = Tool::WebSearch;
        let query = arg!(tool, builtin::str_arg(args, "query"));
        if query.trim().is_empty() {
            return Ok(ToolOutput::error("web_search: `query` is empty"));
        }
        let max = arg!(tool, builtin::opt_u64(args, "max_results"))
            .unwrap_or(5)
            .clamp(1, 20);
        self.gate.check(&Request::Plain(tool))?;
        Ok(self.web.search(query, max, &ctx.cancel).await)
    }

    async fn memory_read(&self, args: &Value, ctx: &ToolContext) -> Result<ToolOutput, Denial> {
        let tool = Tool::MemoryRead;
        let key = arg!(tool, builtin::str_arg(args, "key")).to_owned();
        arg!(tool, memory::check_key(&key));
        self.gate.check(&Request::Plain(tool))?;
        let agent = ctx.agent_id.clone();
        match self.memory.get_async(agent.clone(), key.clone()).await {
            Ok(Some(v)) => Ok(ToolOutput::ok(v)),
            Ok(None) => {
                let keys = self.memory.keys_async(agent).await.unwrap_or_default();
                let listing = if keys.is_empty() {
                    "nothing is stored yet".to_owned()
                } else {
                    format!("stored keys: {}", keys.join(", "))
                };
                Ok(ToolOutput::error(format!(
                    "no value stored under `{key}` ({listing})"
                )))
            }
            Err(e) => Ok(ToolOutput::error(e.to_string())),
        }
    }

    async fn memory_write(&self, args: &Value, ctx: &ToolContext) -> Result<ToolOutput, Denial> {
        let tool = Tool::MemoryWrite;
        let key = arg!(tool, builtin::str_arg(args, "key")).to_owned();
        arg!(tool, memory::check_key(&key));
        let value = match args.get("value") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => {
                return Ok(ToolOutput::error("memory_write: missing argument `value`"));
            }
            Some(other) => other.to_string(),
        };
        if value.len() > memory::MAX_VALUE_BYTES {
            return Ok(ToolOutput::error(format!(
                "memory_write: the value is larger than {} bytes",
                memory::MAX_VALUE_BYTES
            )));
        }
        self.gate.check(&Request::Plain(tool))?;
        let len = value.len();
        match self
            .memory
            .put_async(ctx.agent_id.clone(), key.clone(), value)
            .await
        {
            Ok(()) => Ok(ToolOutput::ok(format!("stored {len} bytes under `{key}`"))),
            Err(e) => Ok(ToolOutput::error(e.to_string())),
        }
    }

    fn path_permit(
        &self,
        tool: Tool,
        path: &str,
    ) -> Result<super::policy::paths::Resolved, Denial> {
        if path.trim().is_empty() {
            return Err(Denial {
                tool: tool.name().to_owned(),
                rule: format!("{tool}: path not understood"),
                reason: "the path is empty".to_owned(),
            });
        }
        let permit = self.gate.check(&Request::Path { tool, path })?;
        permit.path.ok_or_else(|| Denial {
            tool: tool.name().to_owned(),
            rule: format!("{tool}: path not understood"),
            reason: format!("`{path}` was not resolved"),
        })
    }
}

/// Run a blocking tool on the blocking pool; a panic there is an error output.
async fn blocking(f: impl FnOnce() -> ToolOutput + Send + 'static) -> ToolOutput {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|_| ToolOutput::error("the tool failed unexpectedly"))
}

impl Toolbox {
    /// A bash command line against the policy, off the async threads (the
    /// analysis may expand globs against the file system).
    async fn check_bash(&self, line: String) -> Result<(), Denial> {
        let gate = self.gate.clone();
        let verdict = tokio::task::spawn_blocking(move || {
            gate.check(&Request::Bash { command: &line }).map(|_| ())
        })
        .await;
        verdict.unwrap_or_else(|_| {
            Err(Denial {
                tool: "bash".to_owned(),
                rule: "bash: the command cannot be checked".to_owned(),
                reason: "the check failed unexpectedly".to_owned(),
            })
        })
    }
}

impl ToolSet for Toolbox {
    fn definitions(&self) -> Vec<ToolDef> {
        let mut defs: Vec<ToolDef> = Tool::ALL
            .into_iter()
            .filter(|t| self.gate.offers(*t))
            .filter(|t| *t != Tool::WebSearch || self.has_gateway)
            .map(builtin::definition)
            .collect();
        defs.extend(
            self.mcp
                .definitions(|t| self.gate.offers_mcp(&t.server, &t.name)),
        );
        // A remote agent only where the web rules let the run reach it.
        defs.extend(
            self.a2a
                .tools()
                .iter()
                .filter(|t| self.gate.check_url(&t.url).is_ok())
                .map(|t| t.definition()),
        );
        defs
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        args: Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, CallResult> {
        Box::pin(async move {
            let started = Instant::now();
            let mark = self.watch(Some(name));
            let outcome = AssertUnwindSafe(self.dispatch(name, args, ctx))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| Ok(ToolOutput::error(format!("`{name}` failed unexpectedly"))));
            let outcome = match outcome {
                Ok(out) => Ok(self.undo_control_changes(mark, out)),
                Err(d) => {
                    let _ = self.undo_control_changes(mark, ToolOutput::error(String::new()));
                    Err(d)
                }
            };
            let (output, denied) = match outcome {
                Ok(out) => (self.cap(out), None),
                Err(d) => (
                    ToolOutput::error(format!("denied by policy ({}): {}", d.rule, d.reason)),
                    Some(d),
                ),
            };
            CallResult {
                output,
                denied,
                duration: started.elapsed(),
            }
        })
    }

    fn run_script<'a>(
        &'a self,
        script: Script<'a>,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, CallResult> {
        Box::pin(async move {
            let started = Instant::now();
            let ws = self.gate.workspace().to_path_buf();
            let shown = script.path.display();
            if let Err(d) = self.sandbox.admit("script") {
                return CallResult {
                    output: ToolOutput::error(format!(
                        "denied by policy ({}): {}",
                        d.rule, d.reason
                    )),
                    denied: Some(d),
                    duration: started.elapsed(),
                };
            }
            let output = match ws.join(script.path).canonicalize() {
                Err(e) => ToolOutput::error(format!("cannot run script `{shown}`: {e}")),
                Ok(path) if !path.starts_with(&ws) => ToolOutput::error(format!(
                    "cannot run script `{shown}`: it lies outside the workspace ({})",
                    ws.display()
                )),
                Ok(path) => {
                    // Quoted for bash: the script and each argument are one
                    // word each, whatever they contain.
                    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
                    let file = quote(&path.display().to_string());
                    let mut command = match script.interpreter {
                        "pwsh" => format!(
                            "command -v pwsh >/dev/null || {{ echo 'this step needs PowerShell (pwsh), which is not installed' >&2; exit 127; }}; pwsh -NoProfile -NonInteractive -File {file}"
                        ),
                        _ => format!("bash {file}"),
                    };
                    for a in script.args {
                        command.push(' ');
                        command.push_str(&quote(a));
                    }
                    let mut env: Vec<(String, String)> = self.bash_env.as_ref().clone();
                    for (k, v) in script.env {
                        env.retain(|(name, _)| name != k);
                        env.push((k.clone(), v.clone()));
                    }
                    let mark = self.watch(None);
                    let out = bash_tool::run(
                        &command,
                        None,
                        &ws,
                        &env,
                        self.options.bash_timeout,
                        self.options.max_result_bytes,
                        &self.bash_limits,
                        &ctx.cancel,
                        Some(&self.sandbox),
                    )
                    .await;
                    self.undo_control_changes(mark, out)
                }
            };
            CallResult {
                output,
                denied: None,
                duration: started.elapsed(),
            }
        })
    }

    fn sandbox(&self) -> Option<agentfile_wire::events::SandboxInfo> {
        Some(self.sandbox.info().clone())
    }

    fn env_var(&self, name: &str) -> Result<Option<String>, Denial> {
        self.secrets
            .lookup(&self.bash_env, name)
            .map_err(|r| Denial {
                tool: "env".to_owned(),
                rule: r.rule,
                reason: r.reason,
            })
    }

    fn host_path(&self, tool: Tool, path: &str) -> Result<PathBuf, Denial> {
        let permit = self.gate.check(&Request::Path { tool, path })?;
        permit.path.map(|r| r.real).ok_or_else(|| Denial {
            tool: tool.name().to_owned(),
            rule: format!("{}: the path cannot be resolved", tool.name()),
            reason: path.to_owned(),
        })
    }

    fn run_command<'a>(
        &'a self,
        argv: &'a [String],
        input: Vec<u8>,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, CallResult> {
        Box::pin(async move {
            let started = Instant::now();
            let done = |output, denied| CallResult {
                output,
                denied,
                duration: started.elapsed(),
            };
            if argv.is_empty() {
                return done(ToolOutput::error("the bound command is empty"), None);
            }
            let quote = |s: &str| {
                if !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
                {
                    s.to_owned()
                } else {
                    format!("'{}'", s.replace('\'', "'\\''"))
                }
            };
            let line: Vec<String> = argv.iter().map(|a| quote(a)).collect();
            let line = line.join(" ");
            if let Err(d) = self.check_bash(line.clone()).await {
                let out = ToolOutput::error(format!("denied by policy ({}): {}", d.rule, d.reason));
                return done(out, Some(d));
            }
            if let Err(d) = self.sandbox.admit("command") {
                let out = ToolOutput::error(format!("denied by policy ({}): {}", d.rule, d.reason));
                return done(out, Some(d));
            }
            let mark = self.watch(None);
            let out = bash_tool::run(
                &line,
                Some(input),
                self.gate.workspace(),
                &self.bash_env,
                self.options.bash_timeout,
                self.options.max_result_bytes,
                &self.bash_limits,
                &ctx.cancel,
                Some(&self.sandbox),
            )
            .await;
            let out = self.undo_control_changes(mark, out);
            done(out, None)
        })
    }
}
