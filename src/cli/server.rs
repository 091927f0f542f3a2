//! Flag groups of the long-lived servers (`serve`, `mcp`, `worker`, and the
//! queue of `daemon`), each flattened only where it applies: the gateway's
//! settings (every server), a connection's bounds (`serve`, `mcp`), the NATS
//! queue (`serve`, `mcp`, `worker`, `daemon`) and the worker's own timings.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use agentfile::cluster::{Cluster, ClusterOptions};
use agentfile::config::ClusterSection;
use agentfile::server::gateway::{DEFAULT_MAX_RUNS, GatewayOptions};
use agentfile::server::limits;

use super::EXIT_INVALID;

/// What a server that answers connections runs with (`serve`, `mcp`).
#[derive(clap::Args, Clone, Default)]
pub(super) struct ServerArgs {
    #[command(flatten)]
    pub(super) gateway: GatewayArgs,
    #[command(flatten)]
    connection: ConnectionArgs,
    #[command(flatten)]
    pub(super) queue: QueueArgs,
}

impl ServerArgs {
    pub(super) fn gateway_options(&self) -> GatewayOptions {
        GatewayOptions {
            limits: self.connection.limits(),
            ..self.gateway.options()
        }
    }
}

/// The gateway every server runs: where it works, what it runs with.
#[derive(clap::Args, Clone, Default)]
pub(super) struct GatewayArgs {
    /// The folder tools work in, relative request paths start from, and
    /// sessions are stored in (default: the current folder).
    #[arg(long)]
    pub(super) workspace: Option<PathBuf>,
    /// Config file for requests that name none (default: agent.json /
    /// agent.toml in the workspace, else beside each workflow).
    #[arg(long)]
    pub(super) config: Option<PathBuf>,
    /// Policy file for every run (default: policy.toml beside each workflow).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Provider for every run, overriding the config: anthropic, openai,
    /// openrouter, ollama, gemini, replay, fake (a scripted model, offline:
    /// see --script), or (under `mcp`) mcp-sampling, the MCP host's own
    /// model, which needs no API key.
    #[arg(long)]
    provider: Option<String>,
    /// Model for every run (with mcp-sampling: the model the host is asked for).
    #[arg(long)]
    model: Option<String>,
    /// The provider's API endpoint for every run (a local server, a proxy);
    /// default: the config's `llm.base_url` or AGENTFILE_BASE_URL.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The script `--provider fake` answers every run from (a JSON array of
    /// replies; see "Testing offline" in the book, docs/src/guides/testing-offline.md).
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// Runs executing at once; more wait as `queued`.
    #[arg(long, default_value_t = DEFAULT_MAX_RUNS)]
    pub(super) max_runs: usize,
}

impl GatewayArgs {
    /// The `[cluster]` section of the server's config (`--config`, else
    /// `agent.json`/`agent.toml` in the workspace); empty without one. A
    /// config that cannot be read is a usage error.
    pub(super) fn cluster_config(&self, command: &str) -> Result<ClusterSection, ExitCode> {
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
    pub(super) fn check(&self, command: &str) -> Result<(), ExitCode> {
        check_provider(command, self.provider.as_deref())
    }

    pub(super) fn options(&self) -> GatewayOptions {
        GatewayOptions {
            config: self.config.clone(),
            workspace: self.workspace.clone(),
            policy: self.policy.clone(),
            provider: self.provider.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            script: self.script.clone(),
            max_runs: self.max_runs,
            ..Default::default()
        }
    }
}

/// `--provider NAME` names a provider agentfile has, else a usage error.
pub(super) fn check_provider(command: &str, provider: Option<&str>) -> Result<(), ExitCode> {
    if let Some(p) = provider
        && !agentfile::config::PROVIDERS.contains(&p)
    {
        eprintln!(
            "agentfile {command}: unknown provider `{p}`; use one of: {}",
            agentfile::config::PROVIDERS.join(", ")
        );
        return Err(ExitCode::from(EXIT_INVALID));
    }
    Ok(())
}

/// What one connection may ask of a server that answers requests.
#[derive(clap::Args, Clone, Default)]
struct ConnectionArgs {
    /// Requests (and batch items) handled at once per connection; more are
    /// answered with error -32007.
    #[arg(long, default_value_t = limits::DEFAULT_MAX_REQUESTS)]
    max_requests: usize,
    /// Largest reply line, in bytes; a larger reply becomes error -32007.
    #[arg(long, default_value_t = limits::DEFAULT_MAX_REPLY)]
    max_reply_bytes: usize,
    /// Largest workflow file a request may have analysed, in bytes.
    #[arg(long, default_value_t = limits::DEFAULT_MAX_SOURCE)]
    max_source_bytes: usize,
}

impl ConnectionArgs {
    fn limits(&self) -> limits::Limits {
        limits::Limits {
            max_requests: self.max_requests,
            max_reply: self.max_reply_bytes,
            max_source: self.max_source_bytes,
        }
    }
}

/// Runs across machines: the NATS JetStream work queue (CONTRACT §13).
#[derive(clap::Args, Clone, Default)]
pub(super) struct QueueArgs {
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
    pub(super) nats: Option<String>,
    /// The JetStream stream runs are queued in (created when missing; default
    /// `AGENTFILE_RUNS`, or `cluster.stream` in the config).
    #[arg(long, value_name = "NAME")]
    nats_stream: Option<String>,
}

/// How a worker holds the runs it takes from the queue; only `worker` reads
/// these (the server that queues a run never does).
#[derive(clap::Args, Clone, Default)]
pub(super) struct WorkerQueueArgs {
    /// How long a worker may stay silent before its run is given to another
    /// (workers send in-progress acks every third of it), e.g. `30s` (default,
    /// or `cluster.ack_wait` in the config). Applies when the workers'
    /// consumer is first created.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    ack_wait: Option<Duration>,
    /// `worker`: how long a run waiting at an approval keeps its slot here,
    /// waiting for `approve` through the server that submitted it (default
    /// `5m`, or `cluster.approval_hold`); then it is released as
    /// `waiting_approval` and a later `approve` queues it again.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    approval_hold: Option<Duration>,
}

impl QueueArgs {
    /// The settings: flags (and `AGENTFILE_NATS_URL`) first, then the
    /// `[cluster]` section of the server's config, then the defaults. `None`
    /// when no NATS URL is given anywhere; a bad duration in the config is a
    /// usage error (also where no flag sets it).
    fn options(
        &self,
        command: &str,
        config: &ClusterSection,
        worker: &WorkerQueueArgs,
    ) -> Result<Option<ClusterOptions>, ExitCode> {
        let Some(url) = self.nats.clone().or_else(|| config.nats.clone()) else {
            return Ok(None);
        };
        let duration = |flag: Option<Duration>, text: &Option<String>, key: &str, default| {
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
        let mut options = ClusterOptions::new(url);
        if let Some(stream) = self.nats_stream.clone().or_else(|| config.stream.clone()) {
            options.stream = stream;
        }
        options.ack_wait = duration(
            worker.ack_wait,
            &config.ack_wait,
            "ack_wait",
            agentfile::cluster::DEFAULT_ACK_WAIT,
        )?;
        options.approval_hold = duration(
            worker.approval_hold,
            &config.approval_hold,
            "approval_hold",
            agentfile::cluster::DEFAULT_APPROVAL_HOLD,
        )?;
        Ok(Some(options))
    }

    /// Connect when a NATS URL is given (see [`QueueArgs::options`]); a
    /// server that cannot be reached is a usage error (exit 2) saying what to
    /// do.
    pub(super) async fn connect(
        &self,
        command: &str,
        config: &ClusterSection,
        worker: &WorkerQueueArgs,
    ) -> Result<Option<Cluster>, ExitCode> {
        let Some(options) = self.options(command, config, worker)? else {
            return Ok(None);
        };
        match Cluster::connect(options).await {
            Ok(c) => Ok(Some(c)),
            Err(e) => {
                eprintln!("agentfile {command}: error: {e}");
                Err(ExitCode::from(EXIT_INVALID))
            }
        }
    }
}
