//! The `agentfile` command line: a thin adapter from flags to the library.
//!
//! Human-readable progress and log lines (`--log-format`, `--log-level`) go to
//! stderr; results go to stdout. Exit codes (CONTRACT §3): 0 success, 1 run
//! failed, 2 usage or validation error.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};

use agentfile::config::Config;
use agentfile::detect::Dialect;
use agentfile::diag::{self, Style};
use agentfile::executor::exit;
use agentfile::frontend::{self, Analysis, Options};
use agentfile::plan::ReadOptions;
use agentfile::printer::{Live, Progress, StreamJson};
use agentfile::protocol::events::RunResult;
use agentfile::run::{self as runapi, RunError, RunRequest, SessionChoice, TerminalApprover};
use agentfile::session::{self, SessionStatus};
use agentfile::telemetry::logs;
use agentfile::{discover, inspect};

#[derive(Parser)]
#[command(
    name = "agentfile",
    version,
    about = "A headless runtime for LLM-agent workflows written as plain files",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines on stderr as text or JSON lines.
    #[arg(long, global = true, value_enum, default_value_t = LogFormatArg::Text)]
    log_format: LogFormatArg,
    /// Log level (error, warn, info, debug, trace) or a filter such as
    /// `agentfile=debug`; default: RUST_LOG, else warn.
    #[arg(long, global = true, value_name = "LEVEL")]
    log_level: Option<String>,
}

#[derive(Clone, Copy, ValueEnum, Default)]
enum LogFormatArg {
    #[default]
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Check workflow files and report every problem (exit 0 valid, 2 not).
    Validate {
        /// Workflow files (or folders holding an Agentfile).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Config file for REQUIRES profiles (default: ./agent.json, ./agent.toml,
        /// then agent.json / agent.toml beside each workflow).
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        /// Which Agentfile dialect to read, instead of guessing.
        #[arg(long, value_enum)]
        dialect: Option<DialectArg>,
        #[command(flatten)]
        read: ReadArgs,
    },
    /// Show a workflow's inputs, agents, goals and steps.
    Inspect {
        /// The workflow (not needed with --support-matrix).
        #[arg(required_unless_present_any = ["support_matrix", "sandbox"])]
        path: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = InspectFormat::Text)]
        format: InspectFormat,
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long, value_enum)]
        dialect: Option<DialectArg>,
        #[command(flatten)]
        read: ReadArgs,
        /// Print what agentfile parses, validates and enforces of each agentrc
        /// directive, and exit.
        #[arg(long)]
        support_matrix: bool,
        /// Print what the kernel sandbox enforces on this machine for the
        /// workflow's policy (PATH: the workflow or its folder; default: the
        /// current folder), and exit.
        #[arg(long)]
        sandbox: bool,
        /// With --sandbox: the policy file (default: policy.toml beside the
        /// workflow, else the safe default).
        #[arg(long, requires = "sandbox")]
        policy: Option<PathBuf>,
        /// With --sandbox: the workspace (default: the workflow's folder, as for `run`).
        #[arg(long, requires = "sandbox")]
        workspace: Option<PathBuf>,
    },
    /// Run a workflow: goals as model/tool loops behind the policy, every event stored.
    Run(RunArgs),
    /// List, show, export, resume and approve stored sessions.
    Sessions {
        #[command(subcommand)]
        command: SessionsCommand,
    },
    /// Serve JSON-RPC 2.0 on stdio, one message per line (run, event, cancel,
    /// approve, validate, inspect, list, sessions; `event` notifications).
    Serve(ServerArgs),
    /// Execute runs queued on NATS JetStream by `serve --nats` / `mcp --nats`
    /// (needs --nats and a PostgreSQL session store); SIGTERM hands runs in
    /// flight back to the queue, resumable.
    Worker(ServerArgs),
    /// Fire the workflows under the workspaces on their schedules and events
    /// until SIGTERM/SIGINT (exit 143/130; runs in flight are left resumable).
    /// With --nats: runs go onto the NATS work queue for `agentfile worker`s,
    /// and `kind: event` workflows also fire on `agentfile.emit.<name>`.
    Daemon(DaemonCmdArgs),
    /// The daemon's triggers: list them, show what fired and why not, fire one now.
    Triggers {
        #[command(subcommand)]
        command: TriggersCommand,
    },
    /// Fire every workflow with `kind: event, name: NAME` once for this event
    /// id, wait for the runs and print their session ids.
    Emit {
        /// The event's name.
        name: String,
        /// The workflow inputs, as a JSON object.
        #[arg(long)]
        payload: Option<String>,
        /// The event id (a redelivered id fires nothing; default: a fresh one).
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// Find workflows under a folder and show their names, paths and inputs.
    List {
        /// Folder to search (default: the current folder).
        dir: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
    },
    /// Serve the web view of the workspace's sessions at http://ADDR/ui/:
    /// the list, each session's graph, timeline and events, live, with
    /// approve, signal, cancel and resume.
    Ui(UiArgs),
    /// Serve MCP on stdio for IDE agents (Claude Code, Cursor, Cline, VS Code):
    /// workflows as tools, progress, approvals, the host's model by sampling.
    Mcp(McpArgs),
    /// Generate a workflow.yaml workflow from a description: the built-in
    /// generator writes artifacts/NAME/RUN_ID/ and the result is validated.
    Create(CreateArgs),
    /// Promote a validated generation run (artifacts/NAME/RUN_ID) to
    /// workflows/NAME/, archiving the run to outputs/NAME/RUN_ID/build/.
    Promote {
        /// The run's folder, `artifacts/NAME/RUN_ID`.
        run: PathBuf,
        /// The project folder (default: the current folder).
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
}

#[derive(clap::Args, Clone)]
struct CreateArgs {
    /// What the workflow should do, in plain words.
    description: String,
    /// The workflow's name (lowercase, hyphenated; default: from the description).
    #[arg(long)]
    name: Option<String>,
    /// The project folder (default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long)]
    policy: Option<PathBuf>,
    #[arg(long)]
    provider: Option<String>,
    #[arg(long)]
    model: Option<String>,
    #[arg(long)]
    base_url: Option<String>,
    #[arg(long, value_enum, default_value_t = OutputMode::Text)]
    output: OutputMode,
    #[arg(long)]
    max_turns: Option<u64>,
    #[arg(long)]
    max_cost_usd: Option<f64>,
    #[arg(long)]
    timeout: Option<String>,
}

#[derive(clap::Args, Clone)]
struct UiArgs {
    /// Where to listen (port 0 picks one and prints it). Without
    /// AGENTFILE_MCP_TOKEN only loopback addresses may be bound.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8790")]
    listen: std::net::SocketAddr,
    /// The folder whose session store is shown (default: agent.workspace in
    /// the config, else here).
    #[arg(long)]
    workspace: Option<PathBuf>,
    #[arg(long)]
    config: Option<PathBuf>,
    /// The policy runs resumed here (approved, signalled) use.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// The provider runs resumed here use (default: what they ran with).
    #[arg(long)]
    provider: Option<String>,
    #[arg(long)]
    model: Option<String>,
}

#[derive(clap::Args, Clone)]
struct McpArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// Serve MCP over Streamable HTTP at http://ADDR/mcp (e.g. 127.0.0.1:8808;
    /// port 0 picks one and prints it) instead of stdio, for many clients at
    /// once. Clients must send `Authorization: Bearer <token>` when
    /// AGENTFILE_MCP_TOKEN is set (several tokens: comma-separated); without
    /// it only loopback addresses may be bound.
    #[arg(long, value_name = "ADDR")]
    http: Option<std::net::SocketAddr>,
    /// Milliseconds between progress heartbeats while a run is quiet.
    #[arg(long, default_value_t = 5000, hide = true)]
    heartbeat_ms: u64,
    /// Milliseconds between workspace rescans for `run_<name>` tools.
    #[arg(long, default_value_t = 3000, hide = true)]
    poll_ms: u64,
}

#[derive(clap::Args, Clone, Default)]
struct RunArgs {
    /// The workflow file (or a folder holding an Agentfile); `-` reads the
    /// workflow from standard input.
    path: Option<PathBuf>,
    /// Run one goal in the workspace, no workflow file needed:
    /// `agentfile run --goal "list the files" --allow ls`.
    #[arg(long, value_name = "TEXT", conflicts_with = "path")]
    goal: Option<String>,
    /// Allow a tool for this run, on top of the policy: `TOOL` or
    /// `TOOL:PATTERN` (repeatable), e.g. `--allow write`, `--allow bash:"cargo test *"`.
    /// A deny rule of the policy file still wins.
    #[arg(long = "allow", value_name = "TOOL[:PATTERN]")]
    allow: Vec<String>,
    /// An input as name=value (repeatable).
    #[arg(long = "input", value_name = "NAME=VALUE")]
    inputs: Vec<String>,
    /// Inputs from a JSON object in FILE, or `-` for standard input.
    #[arg(long, value_name = "FILE|-")]
    inputs_json: Option<String>,
    #[arg(long)]
    config: Option<PathBuf>,
    /// Policy file (default: policy.toml beside the workflow, else the safe default).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// The folder tools work in (default: agent.workspace in the config, else here).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// anthropic, openai, openrouter, ollama, gemini, replay or mcp-sampling.
    #[arg(long)]
    provider: Option<String>,
    #[arg(long)]
    model: Option<String>,
    /// The provider's API endpoint (a local server, a proxy); kept when
    /// --provider switches the wire format. Default: the config's
    /// `llm.base_url` or AGENTFILE_BASE_URL, else the provider's public API.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The cassette `--provider replay` answers from.
    #[arg(long)]
    cassette: Option<PathBuf>,
    /// Record every model exchange of this run to a cassette.
    #[arg(long)]
    record: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = OutputMode::Text)]
    output: OutputMode,
    /// Continue an interrupted session instead of starting a new one.
    #[arg(long, value_name = "SESSION")]
    resume: Option<String>,
    #[arg(long)]
    max_turns: Option<u64>,
    #[arg(long)]
    max_tokens: Option<u64>,
    #[arg(long)]
    max_cost_usd: Option<f64>,
    /// Wall-clock limit such as 90s, 10m or 1h.
    #[arg(long)]
    timeout: Option<String>,
    /// Approve every supervised goal without asking.
    #[arg(long)]
    approve_all: bool,
    /// Exit 5 when a loop reaches its limit without converging.
    #[arg(long)]
    strict_convergence: bool,
    /// Resume a session even though its workflow changed since it started.
    #[arg(long)]
    force_changed: bool,
    #[command(flatten)]
    read: ReadArgs,
}

/// How `validate`, `inspect` and `run` read a workflow, whatever its format
/// (the servers' `lenient`, `profile` and `extensions` params): one
/// [`ReadOptions`].
#[derive(clap::Args, Clone, Default)]
struct ReadArgs {
    /// workflow.yaml: what a runtime can still interpret (unknown fields, a
    /// list-valued `input`, `{placeholder}` text) is a warning, not an error,
    /// and the workflow runs.
    #[arg(long)]
    lenient: bool,
    /// agentrc: `core` checks core conformance (a directive of an optional
    /// profile is an error unless --extensions names its profile); `all`, the
    /// default, accepts every profile agentfile reads.
    #[arg(long, value_enum, default_value_t = ProfileArg::All)]
    profile: ProfileArg,
    /// agentrc, with --profile core: optional profiles to accept
    /// (capability, instruction, security, placement, observability,
    /// experimental, or all).
    #[arg(long, value_delimiter = ',', value_parser = extension_parser())]
    extensions: Vec<String>,
}

#[derive(Clone, Copy, ValueEnum, Default, PartialEq, Eq)]
enum ProfileArg {
    /// Every profile agentfile reads.
    #[default]
    All,
    /// The core profile, plus --extensions.
    Core,
}

impl ReadArgs {
    fn options(&self) -> ReadOptions {
        ReadOptions {
            lenient: self.lenient,
            core_only: self.profile == ProfileArg::Core,
            extensions: self.extensions.clone(),
        }
    }
}

fn extension_parser() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(agentfile::frontend::extension_names())
}

// Parsed once per process; boxing the large variant would fight clap's derive.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum SessionsCommand {
    /// Sessions, newest first.
    List {
        #[arg(long)]
        status: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        #[command(flatten)]
        at: StoreArgs,
    },
    /// One session: its state and events.
    Show {
        id: String,
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        #[command(flatten)]
        at: StoreArgs,
    },
    /// The full transcript as JSON or markdown.
    Export {
        id: String,
        #[arg(long, value_enum, default_value_t = ExportFormat::Markdown)]
        format: ExportFormat,
        #[command(flatten)]
        at: StoreArgs,
    },
    /// Continue an interrupted session.
    Resume {
        id: String,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Deliver an event to a suspended session, then resume it.
    Signal {
        id: String,
        /// The event's name, one the session's suspend step waits for.
        event: String,
        /// The event's payload, as JSON (the suspend step's `eventPayload`).
        #[arg(long)]
        payload: Option<String>,
        /// Record the signal without resuming the run.
        #[arg(long)]
        no_resume: bool,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Record a decision for a session waiting for approval.
    Approve {
        id: String,
        /// Reject instead of approving.
        #[arg(long)]
        reject: bool,
        #[arg(long)]
        note: Option<String>,
        #[command(flatten)]
        at: StoreArgs,
    },
}

/// `agentfile daemon`: the daemon's settings and where runs execute.
#[derive(clap::Args, Clone, Default)]
struct DaemonCmdArgs {
    #[command(flatten)]
    daemon: DaemonArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Where the daemon looks for workflows and how it runs them.
#[derive(clap::Args, Clone, Default)]
struct DaemonArgs {
    /// A folder to register workflows from (repeatable; default: the current
    /// folder). The first also holds the session store and fire records.
    #[arg(long)]
    workspace: Vec<PathBuf>,
    /// Config file (default: agent.json / agent.toml in the first workspace).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Policy file for every run (default: policy.toml beside each workflow).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Provider for every run, overriding the config.
    #[arg(long)]
    provider: Option<String>,
    /// Model for every run.
    #[arg(long)]
    model: Option<String>,
    /// Runs executing at once; more wait as `queued`.
    #[arg(long, default_value_t = agentfile::server::engine::DEFAULT_MAX_RUNS)]
    max_runs: usize,
    /// How often the workspaces are scanned for changed workflows.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2s", value_name = "DURATION")]
    rescan: std::time::Duration,
}

impl DaemonArgs {
    fn options(&self) -> agentfile::server::daemon::DaemonOptions {
        agentfile::server::daemon::DaemonOptions {
            workspaces: self.workspace.clone(),
            engine: agentfile::server::engine::EngineOptions {
                config: self.config.clone(),
                policy: self.policy.clone(),
                provider: self.provider.clone(),
                model: self.model.clone(),
                max_runs: self.max_runs,
                ..Default::default()
            },
            rescan: self.rescan,
        }
    }
}

#[derive(Subcommand)]
enum TriggersCommand {
    /// Each registered trigger: its state, next fire (in its zone) and quota use.
    List {
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// Fires, newest first: fired, skipped or refused and why, the session of each.
    History {
        /// Only this trigger's fires.
        #[arg(long)]
        trigger: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
    /// Fire trigger ID now, by hand: wait for the run and print its session id.
    Fire {
        id: String,
        #[command(flatten)]
        daemon: DaemonArgs,
    },
}

/// What every server connection runs with.
#[derive(clap::Args, Clone, Default)]
struct ServerArgs {
    /// The folder tools work in, relative request paths start from, and
    /// sessions are stored in (default: the current folder).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Config file for requests that name none (default: agent.json /
    /// agent.toml in the workspace, else beside each workflow).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Policy file for every run (default: policy.toml beside each workflow).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Provider for every run, overriding the config: anthropic, openai,
    /// openrouter, ollama, gemini, replay, or (under `mcp`) mcp-sampling, the
    /// MCP host's own model, which needs no API key.
    #[arg(long)]
    provider: Option<String>,
    /// Model for every run (with mcp-sampling: the model the host is asked for).
    #[arg(long)]
    model: Option<String>,
    /// Runs executing at once; more wait as `queued`.
    #[arg(long, default_value_t = agentfile::server::engine::DEFAULT_MAX_RUNS)]
    max_runs: usize,
    /// Requests (and batch items) handled at once per connection; more are
    /// answered with error -32007.
    #[arg(long, default_value_t = agentfile::server::limits::DEFAULT_MAX_REQUESTS)]
    max_requests: usize,
    /// Largest reply line, in bytes; a larger reply becomes error -32007.
    #[arg(long, default_value_t = agentfile::server::limits::DEFAULT_MAX_REPLY)]
    max_reply_bytes: usize,
    /// Largest workflow file a request may have analysed, in bytes.
    #[arg(long, default_value_t = agentfile::server::limits::DEFAULT_MAX_SOURCE)]
    max_source_bytes: usize,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Runs across machines: the NATS JetStream work queue (CONTRACT §13).
#[derive(clap::Args, Clone, Default)]
struct ClusterArgs {
    /// NATS server URL (e.g. nats://127.0.0.1:4222, JetStream enabled). With
    /// `serve`/`mcp`: queue runs for `agentfile worker`s instead of executing
    /// them here. Sessions must then live in PostgreSQL, and every machine must
    /// see the same files at the same paths.
    #[arg(
        long,
        env = "AGENTFILE_NATS_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    nats: Option<String>,
    /// The JetStream stream runs are queued in (created when missing; default
    /// `AGENTFILE_RUNS`, or `cluster.stream` in the config).
    #[arg(long, value_name = "NAME")]
    nats_stream: Option<String>,
    /// How long a worker may stay silent before its run is given to another
    /// (workers send in-progress acks every third of it), e.g. `30s` (default,
    /// or `cluster.ack_wait` in the config). Applies when the workers'
    /// consumer is first created.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    ack_wait: Option<std::time::Duration>,
    /// `worker`: how long a run waiting at an approval keeps its slot here,
    /// waiting for `approve` through the server that submitted it (default
    /// `5m`, or `cluster.approval_hold`); then it is released as
    /// `waiting_approval` and a later `approve` queues it again.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    approval_hold: Option<std::time::Duration>,
}

impl ClusterArgs {
    /// The settings: flags (and `AGENTFILE_NATS_URL`) first, then the
    /// `[cluster]` section of the server's config, then the defaults. `None`
    /// when no NATS URL is given anywhere; a bad `ack_wait` is a usage error.
    fn options(
        &self,
        command: &str,
        config: &agentfile::config::ClusterSection,
    ) -> Result<Option<agentfile::cluster::ClusterOptions>, ExitCode> {
        let Some(url) = self.nats.clone().or_else(|| config.nats.clone()) else {
            return Ok(None);
        };
        let duration = |flag: Option<std::time::Duration>,
                        text: &Option<String>,
                        key: &str,
                        default: std::time::Duration| {
            match (flag, text) {
            (Some(d), _) => Ok(d),
            (None, Some(text)) => humantime::parse_duration(text).map_err(|e| {
                eprintln!(
                    "agentfile {command}: error: config: `cluster.{key}` = {text:?}: {e} (write a duration such as \"30s\")"
                );
                ExitCode::from(EXIT_INVALID)
            }),
            (None, None) => Ok(default),
        }
        };
        let mut options = agentfile::cluster::ClusterOptions::new(url);
        if let Some(stream) = self.nats_stream.clone().or_else(|| config.stream.clone()) {
            options.stream = stream;
        }
        options.ack_wait = duration(
            self.ack_wait,
            &config.ack_wait,
            "ack_wait",
            agentfile::cluster::DEFAULT_ACK_WAIT,
        )?;
        options.approval_hold = duration(
            self.approval_hold,
            &config.approval_hold,
            "approval_hold",
            agentfile::cluster::DEFAULT_APPROVAL_HOLD,
        )?;
        Ok(Some(options))
    }

    /// Connect when a NATS URL is given (see [`ClusterArgs::options`]); a
    /// server that cannot be reached is a usage error (exit 2) saying what to
    /// do.
    async fn connect(
        &self,
        command: &str,
        config: &agentfile::config::ClusterSection,
    ) -> Result<Option<agentfile::cluster::Cluster>, ExitCode> {
        let Some(options) = self.options(command, config)? else {
            return Ok(None);
        };
        match agentfile::cluster::Cluster::connect(options).await {
            Ok(c) => Ok(Some(c)),
            Err(e) => {
                eprintln!("agentfile {command}: error: {e}");
                Err(ExitCode::from(EXIT_INVALID))
            }
        }
    }
}

impl ServerArgs {
    /// The `[cluster]` section of the server's config (`--config`, else
    /// `agent.json`/`agent.toml` in the workspace); empty without one. A
    /// config that cannot be read is a usage error.
    fn cluster_config(&self, command: &str) -> Result<agentfile::config::ClusterSection, ExitCode> {
        let dir = self.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
        match agentfile::config::Config::discover(self.config.as_deref(), &dir) {
            Ok(loaded) => Ok(loaded.config.cluster),
            Err(e) => {
                eprintln!("agentfile {command}: error: {e}");
                Err(ExitCode::from(EXIT_INVALID))
            }
        }
    }

    /// A provider name that cannot work is a usage error before anything starts.
    fn check(&self, command: &str) -> Result<(), ExitCode> {
        if let Some(p) = &self.provider
            && !agentfile::config::PROVIDERS.contains(&p.as_str())
        {
            eprintln!(
                "agentfile {command}: unknown provider `{p}`; use one of: {}",
                agentfile::config::PROVIDERS.join(", ")
            );
            return Err(ExitCode::from(EXIT_INVALID));
        }
        Ok(())
    }

    fn engine_options(&self) -> agentfile::server::engine::EngineOptions {
        agentfile::server::engine::EngineOptions {
            config: self.config.clone(),
            workspace: self.workspace.clone(),
            policy: self.policy.clone(),
            provider: self.provider.clone(),
            model: self.model.clone(),
            max_runs: self.max_runs,
            limits: agentfile::server::limits::Limits {
                max_requests: self.max_requests,
                max_reply: self.max_reply_bytes,
                max_source: self.max_source_bytes,
            },
            ..Default::default()
        }
    }
}

/// Where the session store is: the config and workspace decide, as for `run`.
#[derive(clap::Args, Clone)]
struct StoreArgs {
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long)]
    workspace: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum, Default, PartialEq, Eq)]
enum OutputMode {
    #[default]
    Text,
    Json,
    StreamJson,
}

#[derive(Clone, Copy, ValueEnum)]
enum ExportFormat {
    Json,
    Markdown,
}

#[derive(Clone, Copy, ValueEnum)]
enum ReportFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum InspectFormat {
    Text,
    Json,
    Mermaid,
}

#[derive(Clone, Copy, ValueEnum)]
enum DialectArg {
    Agentfile,
    Agentrc,
}

impl From<DialectArg> for Dialect {
    fn from(d: DialectArg) -> Dialect {
        match d {
            DialectArg::Agentfile => Dialect::Agentfile,
            DialectArg::Agentrc => Dialect::Agentrc,
        }
    }
}

/// Exit code for usage and validation errors.
const EXIT_INVALID: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = match cli.log_format {
        LogFormatArg::Text => logs::LogFormat::Text,
        LogFormatArg::Json => logs::LogFormat::Json,
    };
    if let Err(e) = logs::init(format, cli.log_level.as_deref()) {
        eprintln!("agentfile: error: {e}");
        return ExitCode::from(EXIT_INVALID);
    }
    let result = match cli.command {
        Command::Validate {
            paths,
            config,
            format,
            dialect,
            read,
        } => validate(
            &paths,
            config.as_deref(),
            format,
            dialect.map(Into::into),
            read.options(),
        ),
        // These print a result after the work is done; a reader that stops
        // early (`| head -1`) does not change that result (0 here).
        Command::List { dir, format } => {
            list(dir.as_deref().unwrap_or(Path::new(".")), format).or_else(|e| quiet_pipe(e, 0))
        }
        Command::Inspect {
            support_matrix: true,
            format,
            ..
        } => support_matrix(format),
        Command::Inspect {
            sandbox: true,
            path,
            format,
            policy,
            workspace,
            ..
        } => inspect_sandbox(
            path.as_deref(),
            policy.as_deref(),
            workspace.as_deref(),
            format,
        ),
        Command::Inspect {
            path,
            format,
            config,
            dialect,
            read,
            ..
        } => inspect_cmd(
            path.as_deref().unwrap_or(Path::new(".")),
            config.as_deref(),
            format,
            dialect.map(Into::into),
            read.options(),
        ),
        Command::Run(args) => {
            // The sandbox's kernel probe (a fork, about a millisecond) runs
            // beside the run's set-up instead of before its first event.
            agentfile::tools::sandbox::probe_soon();
            return run_cmd(args, None);
        }
        Command::Serve(args) => return serve_cmd(args),
        Command::Worker(args) => return worker_cmd(args),
        Command::Mcp(args) => return mcp_cmd(args),
        Command::Ui(args) => return ui_cmd(args),
        Command::Daemon(args) => return daemon_cmd(args),
        Command::Triggers { command } => return triggers_cmd(command),
        Command::Emit {
            name,
            payload,
            id,
            daemon,
        } => return emit_cmd(&name, payload.as_deref(), id, daemon),
        Command::Create(args) => return create_cmd(args),
        Command::Promote { run, workspace } => promote_cmd(&run, workspace.as_deref()),
        Command::Sessions { command } => match command {
            SessionsCommand::Resume { id, run } => return run_cmd(run, Some(id)),
            SessionsCommand::Signal {
                id,
                event,
                payload,
                no_resume,
                run,
            } => {
                let payload = match payload.as_deref().map(serde_json::from_str).transpose() {
                    Ok(p) => p.unwrap_or(serde_json::Value::Null),
                    Err(e) => {
                        eprintln!("agentfile: error: --payload is not JSON: {e}");
                        return ExitCode::from(2);
                    }
                };
                let at = StoreArgs {
                    config: run.config.clone(),
                    workspace: run.workspace.clone(),
                };
                let recorded = open(&at)
                    .map_err(|e| RunError::usage(e.to_string()))
                    .and_then(|store| runapi::record_signal(&store, &id, &event, payload));
                if let Err(e) = recorded {
                    eprintln!("agentfile: error: {e}");
                    return ExitCode::from(u8::try_from(e.exit_code).unwrap_or(1));
                }
                if no_resume {
                    println!(
                        "signal `{event}` recorded for session {id}; continue it with `agentfile sessions resume {id}`"
                    );
                    return ExitCode::SUCCESS;
                }
                return run_cmd(run, Some(id));
            }
            other => sessions_cmd(other).or_else(|e| quiet_pipe(e, 0)),
        },
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("agentfile: error: {e:#}");
            ExitCode::from(EXIT_INVALID)
        }
    }
}

/// The config for a workflow: `--config`, else ./agent.{json,toml}, else one
/// beside the workflow file.
fn config_for(explicit: Option<&Path>, workflow: &Path) -> anyhow::Result<Option<Config>> {
    Ok(runapi::find_config(explicit, workflow, Path::new("."))?)
}

fn color_for_stdout() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// A file's diagnostics as text, ending with "… and N more errors" when the
/// per-file cap left some out.
fn print_diagnostics(out: &mut impl Write, a: &Analysis, style: Style) -> std::io::Result<()> {
    for d in &a.diagnostics {
        out.write_all(diag::render(&a.sources, d, style).as_bytes())?;
    }
    if let Some(note) = a.omitted_note() {
        writeln!(out, "{note}")?;
    }
    Ok(())
}

/// Is this a write to a pipe whose reader has gone (`agentfile … | head -1`)?
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// A closed stdout ends a printing command quietly with the exit code it
/// already had: the reader chose to stop reading, which changes neither whether
/// the files were valid nor whether the command worked. (Not 141: that would
/// hide `validate`'s 0/2 from `set -o pipefail` scripts that only want the
/// first lines.) Any other error stays an error.
fn quiet_pipe(e: anyhow::Error, code: u8) -> anyhow::Result<u8> {
    if is_broken_pipe(&e) { Ok(code) } else { Err(e) }
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

fn validate(
    paths: &[PathBuf],
    config: Option<&Path>,
    format: ReportFormat,
    dialect: Option<Dialect>,
    read: ReadOptions,
) -> anyhow::Result<u8> {
    let mut analyses = Vec::with_capacity(paths.len());
    for p in paths {
        let cfg = config_for(config, p)?;
        let mut a = frontend::analyze(
            p,
            Options {
                config: cfg.as_ref(),
                dialect,
                read: read.clone(),
            },
        );
        frontend::check_policy(&mut a, None);
        analyses.push(a);
    }
    // One webhook path, one trigger, across the files validated together
    // (the daemon refuses the second the same way).
    let plans: Vec<(PathBuf, agentfile::plan::Plan)> = analyses
        .iter()
        .filter_map(|a| a.plan.clone().map(|p| (a.path.clone(), p)))
        .collect();
    let refs: Vec<(&Path, &agentfile::plan::Plan)> =
        plans.iter().map(|(p, plan)| (p.as_path(), plan)).collect();
    for (file, problem) in agentfile::server::daemon::registry::webhook_path_clashes(&refs) {
        if let Some(a) = analyses.iter_mut().find(|a| a.path == file) {
            a.diagnostics.push(diag::Diagnostic::file_error(
                "webhook-path-clash",
                &file,
                problem,
            ));
            a.plan = None;
        }
    }
    let errors: usize = analyses.iter().map(Analysis::errors).sum();
    let code = if errors > 0 { EXIT_INVALID } else { 0 };
    print_report(&analyses, format).map_or_else(|e| quiet_pipe(e, code), |()| Ok(code))
}

fn print_report(analyses: &[Analysis], format: ReportFormat) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        ReportFormat::Json => {
            let report = agentfile::frontend::report::validate_report(analyses);
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
        }
        ReportFormat::Text => {
            let style = Style {
                color: color_for_stdout(),
            };
            for a in analyses {
                print_diagnostics(&mut out, a, style)?;
                let status = match &a.plan {
                    Some(p) => format!(
                        "ok — workflow `{}`: {}, {}, {}, {}",
                        p.name,
                        plural(p.inputs.len(), "input"),
                        plural(p.agents.len(), "agent"),
                        plural(p.goals.len(), "goal"),
                        // Formats other than the DSL have no StepDefs: their
                        // top-level steps are the graph's.
                        plural(
                            if p.steps.is_empty() {
                                p.graph.children().len()
                            } else {
                                p.steps.len()
                            },
                            "step"
                        ),
                    ),
                    None => format!("invalid — {}", plural(a.errors(), "error")),
                };
                let warnings = match a.warnings() {
                    0 => String::new(),
                    n => format!(" ({})", plural(n, "warning")),
                };
                writeln!(out, "{}: {status}{warnings}", a.path.display())?;
            }
        }
    }
    // Surface a closed pipe here, not in a flush at exit that nobody checks.
    out.flush()?;
    Ok(())
}

fn inspect_cmd(
    path: &Path,
    config: Option<&Path>,
    format: InspectFormat,
    dialect: Option<Dialect>,
    read: ReadOptions,
) -> anyhow::Result<u8> {
    let cfg = config_for(config, path)?;
    let a = frontend::analyze(
        path,
        Options {
            config: cfg.as_ref(),
            dialect,
            read,
        },
    );
    let Some(plan) = &a.plan else {
        // Nothing to show: explain why on stderr, like a compiler would.
        let style = Style {
            color: std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        };
        let mut err = std::io::stderr().lock();
        let explained = print_diagnostics(&mut err, &a, style).and_then(|()| {
            writeln!(
                err,
                "{}: invalid — {}; fix them to inspect it",
                a.path.display(),
                plural(a.errors(), "error")
            )
        });
        return explained.map_or_else(
            |e| quiet_pipe(e.into(), EXIT_INVALID),
            |()| Ok(EXIT_INVALID),
        );
    };
    // The plan, as the servers' `inspect` answers: an agentrc file's parse
    // tree and grants are its `agentrc` member.
    let rendered = match format {
        InspectFormat::Text => inspect::text(plan),
        InspectFormat::Json => inspect::json(plan),
        InspectFormat::Mermaid => inspect::mermaid(plan),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(rendered.as_bytes())
        .and_then(|()| out.flush())
        .map_or_else(|e| quiet_pipe(e.into(), 0), |()| Ok(0))
}

/// `inspect --sandbox`: what the kernel sandbox enforces here for a
/// workflow's policy.
fn inspect_sandbox(
    path: Option<&Path>,
    policy: Option<&Path>,
    workspace: Option<&Path>,
    format: InspectFormat,
) -> anyhow::Result<u8> {
    let path = path.unwrap_or(Path::new("."));
    let dir = if path.is_dir() {
        path
    } else {
        path.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    };
    let explicit_policy = policy;
    let mut policy = match agentfile::tools::Policy::load(policy, dir) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return Ok(EXIT_INVALID);
        }
    };
    // As `run` does: the workflow's folder unless told otherwise.
    let workspace = workspace.unwrap_or(dir).to_owned();
    let workspace = match workspace.canonicalize() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("workspace {}: {e}", workspace.display());
            return Ok(EXIT_INVALID);
        }
    };
    // The control files a run of this workflow holds out of its tools'
    // reach, as `run` finds them: the workflow file and what it loads (when
    // it reads), every place a policy or config is looked for, `scripts/`,
    // `.git`, the store.
    let workflow_files = if path.exists() {
        let cfg = config_for(None, path).ok().flatten();
        let (a, mut files) = agentfile::plan::diag::record_sources(|| {
            frontend::analyze(
                path,
                Options {
                    config: cfg.as_ref(),
                    dialect: None,
                    read: ReadOptions::default(),
                },
            )
        });
        files.push(a.path.clone());
        files
    } else {
        Vec::new()
    };
    use agentfile::tools::policy::control;
    policy.control_for_run(control::control_files(&control::ControlInputs {
        workspace: workspace.clone(),
        workflow_dir: dir.to_path_buf(),
        policy: explicit_policy.map(Path::to_path_buf),
        config: None,
        cwd: std::env::current_dir().ok(),
        workflow_files,
    }));
    let home = std::env::home_dir();
    let gate = match policy.bind(&workspace, home.as_deref()) {
        Ok(g) => std::sync::Arc::new(g),
        Err(e) => {
            eprintln!("{e}");
            return Ok(EXIT_INVALID);
        }
    };
    let env: Vec<(String, String)> = std::env::vars().collect();
    let controls: Vec<(control::ControlFile, bool)> = gate.control_files().to_vec();
    let sb = agentfile::tools::sandbox::ToolSandbox::new(&policy, gate, &env, None);
    let partial = sb.info().reason.is_some() || !sb.info().enforced;
    let control_json: Vec<serde_json::Value> = controls
        .iter()
        .map(|(c, writable)| {
            let exists = c.path.symlink_metadata().is_ok();
            let held = if *writable {
                "writable ([control] writable)"
            } else if c.kind == control::ControlKind::Store {
                "hidden from programs; denied to tools (the run's scratch folder aside)"
            } else if exists && !partial {
                "read-only: the gate, a read-only mount (contents and name), the tripwire"
            } else if exists {
                "read-only: the gate and the tripwire (no mount namespace here)"
            } else {
                "may not be created: the gate, and the tripwire removes one a program makes"
            };
            serde_json::json!({
                "path": c.path.display().to_string(),
                "kind": c.kind.describe(),
                "exists": exists,
                "writable": writable,
                "held_by": held,
            })
        })
        .collect();
    let rendered = match format {
        InspectFormat::Json => {
            let mut d = sb.describe();
            d["control_files"] = control_json.into();
            serde_json::to_string_pretty(&d)? + "\n"
        }
        _ => {
            let mut t = sb.describe_text();
            t.push_str(
                "control files (what decides the next run; a person changes them between runs):\n",
            );
            for c in &control_json {
                t.push_str(&format!(
                    "  {} ({}{}): {}\n",
                    c["path"].as_str().unwrap_or_default(),
                    c["kind"].as_str().unwrap_or_default(),
                    if c["exists"].as_bool() == Some(true) {
                        ""
                    } else {
                        ", absent"
                    },
                    c["held_by"].as_str().unwrap_or_default(),
                ));
            }
            t
        }
    };
    let mut out = std::io::stdout().lock();
    out.write_all(rendered.as_bytes())
        .and_then(|()| out.flush())
        .map_or_else(|e| quiet_pipe(e.into(), 0), |()| Ok(0))
}

/// `inspect --support-matrix`: the agentrc directives and what we do with them.
fn support_matrix(format: InspectFormat) -> anyhow::Result<u8> {
    let rendered = match format {
        InspectFormat::Json => {
            serde_json::to_string_pretty(&agentfile::agentrc::table::matrix_json())? + "\n"
        }
        _ => agentfile::agentrc::table::matrix_text(),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(rendered.as_bytes())
        .and_then(|()| out.flush())
        .map_or_else(|e| quiet_pipe(e.into(), 0), |()| Ok(0))
}

fn list(dir: &Path, format: ReportFormat) -> anyhow::Result<u8> {
    if !dir.is_dir() {
        anyhow::bail!("{}: not a folder", dir.display());
    }
    let cfg = Config::discover(None, Path::new("."))?;
    let found = discover::list(dir, cfg.source.is_some().then_some(&cfg.config));
    let mut out = std::io::stdout().lock();
    match format {
        ReportFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &found)?;
            writeln!(out)?;
        }
        ReportFormat::Text => out.write_all(discover::text(&found).as_bytes())?,
    }
    out.flush()?;
    Ok(0)
}

fn run_cmd(args: RunArgs, resume_id: Option<String>) -> ExitCode {
    // One run needs no worker threads: the executor's concurrency (agents,
    // parallel branches, map items) is async, and blocking work goes to the
    // blocking pool. A current-thread runtime starts faster and wakes less.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("agentfile: error: cannot start the async runtime: {e}");
            ExitCode::from(1)
        }) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mode = args.output;
    let code = runtime.block_on(async move {
        match run_async(args, resume_id, Vec::new()).await {
            Ok((result, order)) => {
                print_result(&result, mode, &order);
                result.exit_code
            }
            Err(e) => {
                eprintln!("agentfile: error: {e}");
                e.exit_code
            }
        }
    });
    // Every event is stored, tool processes and MCP servers are stopped and
    // telemetry is flushed: nothing a blocking thread may still do (an idle
    // pool thread, a terminal read) matters now, and joining them costs a
    // quarter of a millisecond at every exit.
    runtime.shutdown_background();
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

fn ui_cmd(args: UiArgs) -> ExitCode {
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let options = agentfile::server::ui::ServeOptions {
        engine: agentfile::server::engine::EngineOptions {
            config: args.config,
            workspace: args.workspace,
            policy: args.policy,
            provider: args.provider,
            model: args.model,
            ..Default::default()
        },
        listen: args.listen,
        tokens: std::env::var(agentfile::server::auth::TOKEN_VAR)
            .map(|v| agentfile::server::auth::parse_tokens(&v))
            .unwrap_or_default(),
    };
    let code = runtime.block_on(agentfile::server::ui::run(
        options,
        agentfile::server::signals::signal(),
        |_| {},
    ));
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

fn mcp_cmd(args: McpArgs) -> ExitCode {
    if let Err(code) = args.server.check("mcp") {
        return code;
    }
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut engine = args.server.engine_options();
    let cluster = match args.server.cluster_config("mcp") {
        Ok(c) => c,
        Err(code) => return code,
    };
    match runtime.block_on(args.server.cluster.connect("mcp", &cluster)) {
        Ok(c) => engine.cluster = c,
        Err(code) => return code,
    }
    let options = agentfile::server::mcp::McpOptions {
        engine,
        heartbeat: std::time::Duration::from_millis(args.heartbeat_ms.max(10)),
        poll: std::time::Duration::from_millis(args.poll_ms.max(10)),
        http: args.http,
        tokens: std::env::var(agentfile::server::mcp::http::TOKEN_VAR)
            .map(|v| agentfile::server::mcp::http::parse_tokens(&v))
            .unwrap_or_default(),
        extra_tools: None,
    };
    let code = if options.http.is_some() {
        runtime.block_on(agentfile::server::mcp::http::serve_http(options))
    } else {
        runtime.block_on(agentfile::server::mcp::serve_stdio(options))
    };
    // A read of stdin may still be parked on a blocking thread; do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Run (or resume) a workflow; also returns its outputs' names in the order
/// the plan declares them ([`agentfile::plan::Plan::output_order`]), for
/// printing them.
async fn run_async(
    args: RunArgs,
    resume_id: Option<String>,
    extra: Vec<Arc<dyn agentfile::events::EventSink>>,
) -> Result<(RunResult, Vec<String>), RunError> {
    let usage = |m: String| RunError::usage(m);
    let resume_id = resume_id.or(args.resume.clone());
    let here = std::env::current_dir()
        .map_err(|e| usage(format!("cannot read the current folder: {e}")))?;
    // A workflow that is not a file: `--goal TEXT`, or `-` for stdin. It is
    // placed in the current folder (policy.toml and FROM paths resolve there).
    let (path, source) = match (&args.goal, &args.path) {
        (Some(goal), _) => {
            if goal.trim().is_empty() {
                return Err(usage("--goal needs the text of the goal".into()));
            }
            (here.join("(goal)"), Some(runapi::one_goal_workflow(goal)))
        }
        (None, Some(p)) if p.as_os_str() == "-" => {
            if args.inputs_json.as_deref() == Some("-") {
                return Err(usage(
                    "`run -` reads the workflow from standard input; pass --inputs-json a file"
                        .into(),
                ));
            }
            (here.join("(stdin)"), Some(read_workflow_stdin()?))
        }
        (None, p) => (p.clone().unwrap_or_default(), None),
    };
    let mut req = RunRequest {
        path,
        source,
        allow: args.allow.clone(),
        inputs: runapi::parse_inputs(&args.inputs, args.inputs_json.as_deref())?,
        config: args.config.clone(),
        policy: args.policy.clone(),
        workspace: args.workspace.clone(),
        provider: args.provider.clone(),
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        cassette: args.cassette.clone(),
        record: args.record.clone(),
        max_turns: args.max_turns,
        max_tokens: args.max_tokens,
        max_cost_usd: args.max_cost_usd,
        timeout: match &args.timeout {
            Some(t) => Some(
                agentfile::executor::parse_duration(t)
                    .map_err(|e| usage(format!("--timeout: {e}")))?,
            ),
            None => None,
        },
        strict_convergence: args.strict_convergence,
        force_changed: args.force_changed,
        read: args.read.options(),
        http: None,
        sampling: None,
        loaded_config: None,
    };
    let choice = match resume_id {
        Some(id) => {
            // The session says which workflow, inputs and workspace it ran with.
            let config = runapi::load_config(args.config.as_deref(), Path::new("."))?;
            let ws = runapi::resolve_workspace(args.workspace.as_deref(), &config)?;
            let store = runapi::open_store(&config, &ws)?;
            let meta = store.get(&id).map_err(|e| {
                usage(format!(
                    "{e} (looked in the session store of {})",
                    ws.display()
                ))
            })?;
            if args.path.is_none() && args.goal.is_none() {
                req.path = PathBuf::from(&meta.path);
            }
            if !args.inputs.is_empty() || args.inputs_json.is_some() {
                return Err(usage(
                    "a resumed run keeps the inputs it started with; drop --input/--inputs-json"
                        .into(),
                ));
            }
            req.inputs = agentfile::executor::inputs::inputs_from_text(&meta.inputs);
            req.workspace = Some(PathBuf::from(&meta.workspace));
            // The run's own settings (model, budgets, …) unless given again.
            runapi::RunSettings::stored(store.as_ref(), &id).fill(&mut req);
            SessionChoice::Resume(id)
        }
        None => {
            if args.path.is_none() && args.goal.is_none() {
                return Err(usage(
                    "run needs a workflow: agentfile run PATH, `agentfile run -` (from standard input) or `agentfile run --goal TEXT`".into(),
                ));
            }
            SessionChoice::New
        }
    };
    let prepared = runapi::prepare(&req, &|req, config| {
        let options = Options {
            config: Some(config),
            dialect: None,
            read: req.read.clone(),
        };
        Analysis::load_for_run(&req.path, req.source.as_deref(), options).map_err(Into::into)
    })?;
    let order = prepared.plan.output_order();
    let mut sinks: Vec<Arc<dyn agentfile::events::EventSink>> = extra;
    match args.output {
        OutputMode::StreamJson => sinks.push(Arc::new(StreamJson::stdout())),
        OutputMode::Text | OutputMode::Json => {
            let terminal = std::io::stderr().is_terminal();
            let color = terminal && std::env::var_os("NO_COLOR").is_none();
            if terminal && !std::env::var("TERM").is_ok_and(|t| t == "dumb") {
                sinks.push(Arc::new(Live::stderr(color)));
            } else {
                sinks.push(Arc::new(Progress::stderr(color)));
            }
        }
    }
    let cancel = agentfile::llm::CancellationToken::new();
    let on_signal = cancel.clone();
    let stopped_by = std::sync::Arc::new(std::sync::atomic::AtomicI32::new(0));
    let record = stopped_by.clone();
    tokio::spawn(async move {
        if let Some(code) = next_stop_signal().await {
            record.store(code, std::sync::atomic::Ordering::SeqCst);
            eprintln!("\nagentfile: cancelling (Ctrl-C again to quit at once)");
            on_signal.cancel();
            if next_stop_signal().await.is_some() {
                std::process::exit(code);
            }
        }
    });
    let approver = TerminalApprover {
        approve_all: args.approve_all,
    };
    let mut result = runapi::start(prepared, choice, sinks, &approver, cancel).await?;
    // A run cancelled by SIGTERM exits 143, as a terminated process does.
    let signal = stopped_by.load(std::sync::atomic::Ordering::SeqCst);
    if result.status == "cancelled" && signal != 0 {
        result.exit_code = signal;
    }
    Ok((result, order))
}

/// A workflow piped to `agentfile run -`, bounded like a workflow file.
fn read_workflow_stdin() -> Result<String, RunError> {
    use std::io::Read;
    let limit = frontend::MAX_WORKFLOW_BYTES;
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            RunError::usage(format!("cannot read the workflow from standard input: {e}"))
        })?;
    if bytes.len() as u64 > limit {
        return Err(RunError::usage(format!(
            "the workflow on standard input is larger than {limit} bytes"
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        RunError::usage(format!(
            "the workflow on standard input is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// The multi-threaded runtime the async commands run on.
fn async_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("agentfile: error: cannot start the async runtime: {e}");
            ExitCode::from(1)
        })
}

/// `agentfile serve`: until stdin closes (runs finish) or a signal (runs stop,
/// sessions left `interrupted`).
fn serve_cmd(args: ServerArgs) -> ExitCode {
    if let Err(code) = args.check("serve") {
        return code;
    }
    use agentfile::server::{engine::Engine, jsonrpc};
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let (outbox, writer) = match jsonrpc::Outbox::start(Box::new(std::io::stdout())) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("agentfile: error: cannot start the output thread: {e}");
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(async move {
        let mut options = args.engine_options();
        let cluster = match args.cluster_config("serve") {
            Ok(c) => c,
            Err(_) => return exit::USAGE,
        };
        match args.cluster.connect("serve", &cluster).await {
            Ok(c) => options.cluster = c,
            Err(_) => return exit::USAGE,
        }
        let engine = match Engine::new(options) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("agentfile: error: {e}");
                return exit::USAGE;
            }
        };
        // Sessions a killed process left `running` read `interrupted` from now on.
        let reaper = engine.clone();
        let _ = tokio::task::spawn_blocking(move || reaper.reap_orphans()).await;
        let stop = agentfile::llm::CancellationToken::new();
        let signalled = std::sync::Arc::new(std::sync::atomic::AtomicI32::new(0));
        spawn_signal_watch(stop.clone(), signalled.clone());
        jsonrpc::serve(engine, tokio::io::stdin(), outbox, stop).await;
        signalled.load(std::sync::atomic::Ordering::SeqCst)
    });
    // Every reply is queued; the writer ends once it has written them.
    let _ = writer.join();
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// `agentfile worker`: execute queued runs until SIGINT / SIGTERM, then hand
/// the runs in flight back to the queue (sessions left `interrupted`).
fn worker_cmd(args: ServerArgs) -> ExitCode {
    if let Err(code) = args.check("worker") {
        return code;
    }
    let cluster = match args.cluster_config("worker") {
        Ok(c) => c,
        Err(code) => return code,
    };
    if args.cluster.nats.is_none() && cluster.nats.is_none() {
        eprintln!(
            "agentfile worker: error: --nats URL (or AGENTFILE_NATS_URL, or `cluster.nats` in the config) is required: the NATS server runs are queued on"
        );
        return ExitCode::from(EXIT_INVALID);
    }
    use agentfile::server::engine::Engine;
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let code = runtime.block_on(async move {
        let cluster = match args.cluster.connect("worker", &cluster).await {
            Ok(Some(c)) => c,
            _ => return exit::USAGE,
        };
        let engine = match Engine::new(args.engine_options()) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("agentfile worker: error: {e}");
                return exit::USAGE;
            }
        };
        let stop = agentfile::llm::CancellationToken::new();
        let signalled = std::sync::Arc::new(std::sync::atomic::AtomicI32::new(0));
        spawn_signal_watch(stop.clone(), signalled.clone());
        let max = if args.max_runs == 0 {
            agentfile::server::engine::DEFAULT_MAX_RUNS
        } else {
            args.max_runs
        };
        if let Err(e) = agentfile::server::worker::serve(cluster, engine, max, stop).await {
            eprintln!("agentfile worker: error: {e}");
            return 1;
        }
        signalled.load(std::sync::atomic::Ordering::SeqCst)
    });
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The daemon of `args`, or the exit after saying why there is none.
fn open_daemon(
    command: &str,
    args: &DaemonArgs,
) -> Result<Arc<agentfile::server::daemon::Daemon>, ExitCode> {
    open_daemon_with(command, args, args.options())
}

/// [`open_daemon`] with `options` made from `args` (and a cluster, say).
fn open_daemon_with(
    command: &str,
    args: &DaemonArgs,
    options: agentfile::server::daemon::DaemonOptions,
) -> Result<Arc<agentfile::server::daemon::Daemon>, ExitCode> {
    if let Some(p) = &args.provider
        && !agentfile::config::PROVIDERS.contains(&p.as_str())
    {
        eprintln!(
            "agentfile {command}: unknown provider `{p}`; use one of: {}",
            agentfile::config::PROVIDERS.join(", ")
        );
        return Err(ExitCode::from(EXIT_INVALID));
    }
    agentfile::server::daemon::Daemon::new(options).map_err(|e| {
        eprintln!("agentfile {command}: error: {e}");
        ExitCode::from(EXIT_INVALID)
    })
}

/// `agentfile daemon`: fire schedules until SIGINT / SIGTERM, then stop
/// taking fires and interrupt runs in flight (resumable).
fn daemon_cmd(
    DaemonCmdArgs {
        daemon: args,
        cluster,
    }: DaemonCmdArgs,
) -> ExitCode {
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let code = runtime.block_on(async move {
        // `--nats`: runs are queued for workers, as `serve --nats` does.
        let mut options = args.options();
        let dir = args
            .workspace
            .first()
            .cloned()
            .unwrap_or_else(|| PathBuf::from("."));
        let section = match agentfile::config::Config::discover(args.config.as_deref(), &dir) {
            Ok(loaded) => loaded.config.cluster,
            Err(e) => {
                eprintln!("agentfile daemon: error: {e}");
                return i32::from(EXIT_INVALID);
            }
        };
        match cluster.connect("daemon", &section).await {
            Ok(c) => options.engine.cluster = c,
            Err(_) => return i32::from(EXIT_INVALID),
        }
        let daemon = match open_daemon_with("daemon", &args, options) {
            Ok(d) => d,
            Err(_) => return i32::from(EXIT_INVALID),
        };
        for t in daemon.list() {
            match &t.reason {
                None => eprintln!("agentfile daemon: {} ({}) registered", t.id, t.kind),
                Some(r) => eprintln!("agentfile daemon: {} ({}) refused: {r}", t.id, t.kind),
            }
        }
        let stop = agentfile::llm::CancellationToken::new();
        let signalled = std::sync::Arc::new(std::sync::atomic::AtomicI32::new(0));
        spawn_signal_watch(stop.clone(), signalled.clone());
        match daemon.listen_webhooks(stop.clone()).await {
            Ok(Some(addr)) => eprintln!("agentfile daemon: webhooks on http://{addr}/hooks/"),
            Ok(None) => {}
            Err(e) => {
                eprintln!("agentfile daemon: {e}");
                return i32::from(EXIT_INVALID);
            }
        }
        match daemon.listen_nats_events(stop.clone()).await {
            Ok(true) => eprintln!(
                "agentfile daemon: events on NATS subjects {}.<name>",
                agentfile::server::daemon::nats::EVENT_PREFIX
            ),
            Ok(false) => {}
            Err(e) => {
                eprintln!("agentfile daemon: error: {e}");
                return i32::from(EXIT_INVALID);
            }
        }
        daemon.run(stop).await;
        signalled.load(std::sync::atomic::Ordering::SeqCst)
    });
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// `agentfile triggers list|history|fire`.
fn triggers_cmd(command: TriggersCommand) -> ExitCode {
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        match command {
            TriggersCommand::List { format, daemon } => {
                let d = match open_daemon("triggers list", &daemon) {
                    Ok(d) => d,
                    Err(c) => return c,
                };
                let rows = d.list();
                match format {
                    ReportFormat::Json => {
                        println!("{}", serde_json::json!({ "triggers": rows }));
                    }
                    ReportFormat::Text => {
                        if rows.is_empty() {
                            println!("no triggers under the workspace");
                        }
                        for r in rows {
                            let mut line = format!("{}  {}  {}", r.id, r.kind, r.state);
                            if let Some(n) = &r.next_fire {
                                line.push_str(&format!("  next {n}"));
                            }
                            if let Some(why) = &r.reason {
                                line.push_str(&format!("  ({why})"));
                            }
                            println!("{line}");
                        }
                    }
                }
                ExitCode::SUCCESS
            }
            TriggersCommand::History {
                trigger,
                limit,
                format,
                daemon,
            } => {
                let d = match open_daemon("triggers history", &daemon) {
                    Ok(d) => d,
                    Err(c) => return c,
                };
                let fires = match d.store().fires(trigger.as_deref(), limit) {
                    Ok(f) => f,
                    Err(e) => {
                        eprintln!("agentfile triggers history: error: {e}");
                        return ExitCode::from(1);
                    }
                };
                match format {
                    ReportFormat::Json => {
                        let rows: Vec<serde_json::Value> = fires
                            .iter()
                            .map(|f| {
                                let mut v = serde_json::to_value(f).unwrap_or_default();
                                if let Some(o) = v.as_object_mut() {
                                    o.remove("key");
                                    o.remove("cost_usd");
                                }
                                v
                            })
                            .collect();
                        println!("{}", serde_json::json!({ "fires": rows }));
                    }
                    ReportFormat::Text => {
                        for f in fires {
                            let mut line = format!(
                                "{}  {}  {}  {}",
                                f.fired_at,
                                f.trigger,
                                f.kind.as_str(),
                                f.outcome.as_str()
                            );
                            if let Some(s) = &f.session_id {
                                line.push_str(&format!("  {s}"));
                            }
                            if let Some(r) = &f.reason {
                                line.push_str(&format!("  ({r})"));
                            }
                            println!("{line}");
                        }
                    }
                }
                ExitCode::SUCCESS
            }
            TriggersCommand::Fire { id, daemon } => {
                let d = match open_daemon("triggers fire", &daemon) {
                    Ok(d) => d,
                    Err(c) => return c,
                };
                let key = format!("manual-{}", session::new_session_id());
                let r = d
                    .fire(
                        &id,
                        agentfile::session::FireKind::Manual,
                        key,
                        None,
                        Default::default(),
                    )
                    .await;
                d.wait_runs().await;
                report_fires("triggers fire", vec![r])
            }
        }
    })
}

/// Print each fire's session id (or why it did not run); 0 when every one started.
fn report_fires(
    command: &str,
    fires: Vec<Result<agentfile::server::daemon::FireResult, String>>,
) -> ExitCode {
    let mut ok = true;
    for f in fires {
        match f {
            Ok(f) => match (&f.session_id, f.claimed) {
                (Some(s), true) => println!("{}: {s}", f.trigger),
                (_, false) => println!(
                    "{}: already fired for `{}`{}",
                    f.trigger,
                    f.key,
                    f.session_id
                        .map(|s| format!(" (session {s})"))
                        .unwrap_or_default()
                ),
                (None, true) => {
                    ok = false;
                    println!(
                        "{}: {}: {}",
                        f.trigger,
                        f.outcome.as_str(),
                        f.reason.unwrap_or_default()
                    );
                }
            },
            Err(e) => {
                ok = false;
                eprintln!("agentfile {command}: error: {e}");
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `agentfile emit NAME`: fire the subscribed workflows once for the event id.
fn emit_cmd(name: &str, payload: Option<&str>, id: Option<String>, args: DaemonArgs) -> ExitCode {
    let payload = match payload.map(serde_json::from_str).transpose() {
        Ok(p) => p.unwrap_or(serde_json::Value::Null),
        Err(e) => {
            eprintln!("agentfile emit: error: --payload is not JSON: {e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        let d = match open_daemon("emit", &args) {
            Ok(d) => d,
            Err(c) => return c,
        };
        let id = id.unwrap_or_else(|| format!("event-{}", session::new_session_id()));
        let fires = match d.emit(name, &id, payload).await {
            Ok(f) => f,
            Err(e) => {
                eprintln!("agentfile emit: error: {e}");
                return ExitCode::from(EXIT_INVALID);
            }
        };
        if fires.is_empty() {
            eprintln!(
                "agentfile emit: no workflow subscribes to event `{name}` (a trigger `kind: event, name: {name}`); nothing fired"
            );
            return ExitCode::from(1);
        }
        d.wait_runs().await;
        report_fires("emit", fires)
    })
}

/// SIGINT / SIGTERM cancel `stop` and record the exit code (130 / 143).
fn spawn_signal_watch(
    stop: agentfile::llm::CancellationToken,
    code: std::sync::Arc<std::sync::atomic::AtomicI32>,
) {
    tokio::spawn(async move {
        if let Some(c) = next_stop_signal().await {
            code.store(c, std::sync::atomic::Ordering::SeqCst);
            stop.cancel();
        }
    });
}

/// The next SIGINT or SIGTERM (Ctrl-C elsewhere), as the exit code a process
/// stopped by it reports: 130 or 143. `None` when signals cannot be watched.
async fn next_stop_signal() -> Option<i32> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return None;
        };
        tokio::select! {
            _ = int.recv() => Some(130),
            _ = term.recv() => Some(143),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.ok().map(|_| 130)
    }
}

fn print_result(result: &RunResult, mode: OutputMode, order: &[String]) {
    let mut out = std::io::stdout().lock();
    match mode {
        OutputMode::Json => {
            let _ = serde_json::to_writer_pretty(&mut out, result);
            let _ = writeln!(out);
        }
        OutputMode::StreamJson => StreamJson::stdout().write_line(result),
        OutputMode::Text => {
            if result.status != "completed" {
                if let Some(e) = &result.error {
                    eprintln!("agentfile: {}: {e}", result.termination_reason);
                }
                eprintln!(
                    "session {} — resume with `agentfile sessions resume {}`",
                    result.session_id, result.session_id
                );
                return;
            }
            // One output: as is, for pipelines. Several: each under its name,
            // in the order the plan declares them. On a terminal, model text
            // may not carry escape sequences that would act on it.
            let terminal = std::io::stdout().is_terminal();
            let shown = |v: &serde_json::Value| {
                let t = value_text(v);
                if terminal {
                    agentfile::text::for_terminal(&t).into_owned()
                } else {
                    t
                }
            };
            if result.outputs.len() == 1 {
                if let Some(v) = result.outputs.values().next() {
                    let _ = writeln!(out, "{}", shown(v));
                }
            } else {
                // Every output: those the plan names in its order, then the
                // rest by name.
                let named: std::collections::HashSet<&str> =
                    order.iter().map(String::as_str).collect();
                let first = order
                    .iter()
                    .filter_map(|n| result.outputs.get_key_value(n.as_str()));
                let rest = result
                    .outputs
                    .iter()
                    .filter(|(n, _)| !named.contains(n.as_str()));
                for (name, v) in first.chain(rest) {
                    let _ = writeln!(out, "## {name}\n\n{}\n", shown(v));
                }
            }
        }
    }
}

fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// The session store `--config`/`--workspace` point at.
fn open(at: &StoreArgs) -> anyhow::Result<Arc<dyn session::SessionStore>> {
    let config = runapi::load_config(at.config.as_deref(), Path::new("."))?;
    let ws = runapi::resolve_workspace(at.workspace.as_deref(), &config)?;
    Ok(runapi::open_store(&config, &ws)?)
}

fn sessions_cmd(cmd: SessionsCommand) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    match cmd {
        SessionsCommand::List {
            status,
            limit,
            format,
            at,
        } => {
            let status = match status.as_deref() {
                None => None,
                Some(s) => Some(
                    serde_json::from_value::<SessionStatus>(serde_json::Value::String(s.to_owned()))
                        .map_err(|_| anyhow::anyhow!("unknown status `{s}`; use queued, running, waiting_approval, completed, failed, cancelled or interrupted"))?,
                ),
            };
            let list = open(&at)?.list(status, limit)?;
            match format {
                ReportFormat::Json => {
                    serde_json::to_writer_pretty(&mut out, &list)?;
                    writeln!(out)?;
                }
                ReportFormat::Text => {
                    if list.is_empty() {
                        writeln!(out, "no sessions")?;
                    }
                    for m in list {
                        let status = serde_json::to_value(m.status)?
                            .as_str()
                            .unwrap_or("")
                            .to_owned();
                        writeln!(
                            out,
                            "{}  {:16}  {:20}  {}",
                            m.id, status, m.workflow, m.updated_at
                        )?;
                    }
                }
            }
        }
        SessionsCommand::Show { id, format, at } => {
            let store = open(&at)?;
            let meta = store.get(&id)?;
            let events = store.events(&id, 0)?;
            match format {
                ReportFormat::Json => {
                    serde_json::to_writer_pretty(
                        &mut out,
                        &serde_json::json!({"session": meta, "events": events}),
                    )?;
                    writeln!(out)?;
                }
                ReportFormat::Text => {
                    let status = serde_json::to_value(meta.status)?
                        .as_str()
                        .unwrap_or("")
                        .to_owned();
                    writeln!(
                        out,
                        "session {}\nworkflow {} ({})\nstatus {status}\nworkspace {}\nevents {}",
                        meta.id,
                        meta.workflow,
                        meta.path,
                        meta.workspace,
                        events.len()
                    )?;
                    let progress = Progress::to_writer(Box::new(std::io::sink()));
                    for e in &events {
                        if let Some(line) = progress.line(e) {
                            writeln!(out, "{line}")?;
                        }
                    }
                }
            }
        }
        SessionsCommand::Export { id, format, at } => {
            let store = open(&at)?;
            let meta = store.get(&id)?;
            let events = store.events(&id, 0)?;
            match format {
                ExportFormat::Json => {
                    serde_json::to_writer_pretty(&mut out, &session::export::json(&meta, &events))?;
                    writeln!(out)?;
                }
                ExportFormat::Markdown => {
                    out.write_all(session::export::markdown(&meta, &events).as_bytes())?
                }
            }
        }
        SessionsCommand::Approve {
            id,
            reject,
            note,
            at,
        } => {
            let store = open(&at)?;
            let goal = runapi::record_decision(
                &store,
                &id,
                !reject,
                note.or(Some("with `agentfile sessions approve`".into())),
            )?;
            let verb = if reject { "rejected" } else { "approved" };
            // A WORKFLOW.md approval step or tool step has no goal name.
            let what = if goal.is_empty() {
                "the pending approval".to_owned()
            } else {
                format!("goal `{goal}`")
            };
            writeln!(
                out,
                "{verb} {what} of session {id}; continue it with `agentfile sessions resume {id}`"
            )?;
        }
        SessionsCommand::Resume { .. } | SessionsCommand::Signal { .. } => {
            anyhow::bail!("internal error: resume and signal are handled by `run`")
        }
    }
    out.flush()?;
    Ok(0)
}

/// `agentfile create`: run the built-in generator workflow into
/// `artifacts/NAME/RUN_ID/` (its manifest kept at every step), then validate
/// the workflow it wrote (CONTRACT §10).
fn create_cmd(a: CreateArgs) -> ExitCode {
    use agentfile::author::create;
    let fail = |m: String, code: u8| {
        eprintln!("agentfile: error: {m}");
        ExitCode::from(code)
    };
    let ws = match a
        .workspace
        .clone()
        .unwrap_or_else(|| PathBuf::from("."))
        .canonicalize()
    {
        Ok(p) => p,
        Err(e) => return fail(format!("workspace: {e}"), EXIT_INVALID),
    };
    let begun = match create::begin(&ws, &a.description, a.name.as_deref()) {
        Ok(b) => b,
        Err(e) => return fail(e.to_string(), EXIT_INVALID),
    };
    let args = RunArgs {
        path: Some(begun.workflow.clone()),
        inputs: begun
            .inputs()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        workspace: Some(ws.clone()),
        config: a.config.clone(),
        policy: a.policy.clone(),
        provider: a.provider.clone(),
        model: a.model.clone(),
        base_url: a.base_url.clone(),
        output: a.output,
        max_turns: a.max_turns,
        max_cost_usd: a.max_cost_usd,
        timeout: a.timeout.clone(),
        ..RunArgs::default()
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot start the async runtime: {e}"), 1),
    };
    let sink: Arc<dyn agentfile::events::EventSink> = begun.sink.clone();
    let outcome = runtime.block_on(run_async(args, None, vec![sink]));
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    let result = match outcome {
        Ok((r, _)) => r,
        Err(e) => {
            create::finish(&begun, &ws, "failed", Some(&e.message));
            return fail(e.message, u8::try_from(e.exit_code).unwrap_or(1));
        }
    };
    if let Some(e) = begun.sink.error() {
        eprintln!("agentfile: warning: the manifest could not be kept: {e}");
    }
    let created = create::finish(&begun, &ws, &result.status, result.error.as_deref());
    let mut code = u8::try_from(result.exit_code).unwrap_or(1);
    if result.status == "completed" && !created.valid {
        code = EXIT_INVALID;
    }
    let rel = &created.artifacts;
    match a.output {
        OutputMode::Json | OutputMode::StreamJson => {
            let mut v = serde_json::to_value(&created).unwrap_or_default();
            v["type"] = "create".into();
            v["run"] = serde_json::to_value(&result).unwrap_or_default();
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        }
        OutputMode::Text => {
            if result.status != "completed" {
                print_result(&result, a.output, &[]);
                eprintln!(
                    "the generation run stopped ({}); its files are in {rel}",
                    result.status
                );
            } else if created.valid {
                println!("{rel}: generated and validated");
                println!("next: agentfile promote {rel}");
            } else {
                println!("{rel}: generated, but the workflow is invalid:");
                for d in &created.diagnostics {
                    println!("  {d}");
                }
                println!("run `agentfile create` again, or fix the files in {rel}");
            }
        }
    }
    ExitCode::from(code)
}

/// `agentfile promote artifacts/NAME/RUN_ID`.
fn promote_cmd(run: &Path, workspace: Option<&Path>) -> anyhow::Result<u8> {
    let ws = workspace
        .unwrap_or(Path::new("."))
        .canonicalize()
        .map_err(|e| anyhow::anyhow!("workspace: {e}"))?;
    match agentfile::author::generate::promote(&ws, run) {
        Ok(p) => {
            println!(
                "promoted {} to {} (the run is archived in {})",
                run.display(),
                p.target,
                p.archive
            );
            Ok(0)
        }
        Err(e) => {
            eprintln!("agentfile: error: {e}");
            Ok(EXIT_INVALID)
        }
    }
}
