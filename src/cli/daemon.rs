//! `agentfile daemon`: fire the workflows under the workspaces on their
//! schedules and events until SIGINT / SIGTERM, then stop taking fires and
//! interrupt runs in flight (resumable). Also the flag groups and helpers
//! `triggers` and `emit` share with it: where the triggers are, how a fire's
//! runs run, and how fires are reported.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use agentfile::server::daemon::{Daemon, DaemonOptions, FireResult, InvalidFile};
use agentfile::server::gateway::{DEFAULT_MAX_RUNS, GatewayOptions};

use super::server::{QueueArgs, WorkerQueueArgs, check_provider};
use super::{EXIT_INVALID, async_runtime, exit_code, shown_path, spawn_signal_watch};

#[derive(clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    triggers: TriggerArgs,
    #[command(flatten)]
    runs: FireArgs,
    /// Runs executing at once; more wait as `queued`.
    #[arg(long, default_value_t = DEFAULT_MAX_RUNS)]
    max_runs: usize,
    /// How often the workspaces are scanned for changed workflows.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2s", value_name = "DURATION")]
    rescan: Duration,
    // `--nats`: runs are queued for workers, as `serve --nats` does.
    #[command(flatten)]
    queue: QueueArgs,
}

/// Where the daemon's triggers are: the workflows it registers and the
/// store of its fire records.
#[derive(clap::Args, Clone)]
pub(super) struct TriggerArgs {
    /// A folder to register workflows from (repeatable; default: the current
    /// folder). The first also holds the session store and fire records.
    #[arg(long)]
    workspace: Vec<PathBuf>,
    /// Config file (default: agent.json / agent.toml in the first workspace).
    #[arg(long)]
    config: Option<PathBuf>,
}

/// How the runs a fire starts run.
#[derive(clap::Args, Clone, Default)]
pub(super) struct FireArgs {
    /// Policy file for every run (default: policy.toml beside each workflow).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Provider for every run, overriding the config (`fake`: a scripted
    /// model, offline; see --script).
    #[arg(long)]
    provider: Option<String>,
    /// Model for every run.
    #[arg(long)]
    model: Option<String>,
    /// The provider's API endpoint for every run (a local server, a proxy).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The script `--provider fake` answers every run from.
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
}

impl TriggerArgs {
    /// The daemon's options; `runs` and `max_runs` matter only to commands
    /// that fire.
    pub(super) fn options(&self, runs: &FireArgs, max_runs: usize) -> DaemonOptions {
        DaemonOptions {
            workspaces: self.workspace.clone(),
            gateway: GatewayOptions {
                config: self.config.clone(),
                policy: runs.policy.clone(),
                provider: runs.provider.clone(),
                model: runs.model.clone(),
                base_url: runs.base_url.clone(),
                script: runs.script.clone(),
                max_runs,
                ..Default::default()
            },
            rescan: agentfile::server::daemon::DEFAULT_RESCAN,
        }
    }
}

/// The daemon `options` describe, or the exit after saying why there is none
/// (an unknown provider, a workspace or config that cannot be read).
pub(super) fn open_daemon(command: &str, options: DaemonOptions) -> Result<Arc<Daemon>, ExitCode> {
    check_provider(command, options.gateway.provider.as_deref())?;
    Daemon::new(options).map_err(|e| {
        eprintln!("agentfile {command}: error: {e}");
        ExitCode::from(EXIT_INVALID)
    })
}

pub(super) fn run(args: Args) -> ExitCode {
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let code = runtime.block_on(serve(args));
    runtime.shutdown_timeout(Duration::from_millis(100));
    exit_code(code)
}

/// Register, listen, fire until a signal; the exit code.
async fn serve(args: Args) -> i32 {
    let mut options = args.triggers.options(&args.runs, args.max_runs);
    options.rescan = args.rescan;
    let dir = args
        .triggers
        .workspace
        .first()
        .cloned()
        .unwrap_or_else(|| PathBuf::from("."));
    let config = args.triggers.config.as_deref();
    let section = match agentfile::config::Config::discover(config, &dir) {
        Ok(loaded) => loaded.config.cluster,
        Err(e) => {
            eprintln!("agentfile daemon: error: {e}");
            return i32::from(EXIT_INVALID);
        }
    };
    let connected = args
        .queue
        .connect("daemon", &section, &WorkerQueueArgs::default())
        .await;
    match connected {
        Ok(c) => options.gateway.cluster = c,
        Err(_) => return i32::from(EXIT_INVALID),
    }
    let daemon = match open_daemon("daemon", options) {
        Ok(d) => d,
        Err(_) => return i32::from(EXIT_INVALID),
    };
    for t in daemon.list() {
        match &t.reason {
            None => eprintln!("agentfile daemon: {} ({}) registered", t.id, t.kind),
            Some(r) => eprintln!("agentfile daemon: {} ({}) refused: {r}", t.id, t.kind),
        }
    }
    for f in daemon.invalid_files() {
        eprintln!(
            "agentfile daemon: {}",
            invalid_file_line(&f, Teller::Daemon)
        );
    }
    let stop = agentfile::llm::CancellationToken::new();
    let signalled = Arc::new(AtomicI32::new(0));
    spawn_signal_watch(stop.clone(), signalled.clone());
    if let Err(code) = listen(&daemon, &stop).await {
        return code;
    }
    daemon.run(stop).await;
    signalled.load(Ordering::SeqCst)
}

/// Webhooks over HTTP and events on NATS, where the triggers ask for them.
async fn listen(daemon: &Arc<Daemon>, stop: &agentfile::llm::CancellationToken) -> Result<(), i32> {
    match daemon.listen_webhooks(stop.clone()).await {
        Ok(Some(addr)) => eprintln!("agentfile daemon: webhooks on http://{addr}/hooks/"),
        Ok(None) => {}
        Err(e) => {
            eprintln!("agentfile daemon: {e}");
            return Err(i32::from(EXIT_INVALID));
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
            return Err(i32::from(EXIT_INVALID));
        }
    }
    Ok(())
}

/// Who says [`invalid_file_line`]: `triggers list` (a process of its own,
/// which registers nothing) or the daemon itself.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Teller {
    List,
    Daemon,
}

/// One line on a workflow file that does not validate: that its triggers
/// are not listed (registered), where its errors are shown, and what a
/// daemon does meanwhile — it keeps serving the triggers of the file's last
/// good content, which only the daemon that saw it knows.
pub(super) fn invalid_file_line(f: &InvalidFile, teller: Teller) -> String {
    let file = shown_path(&f.path);
    let errors = format!("{file} has errors");
    let validate = format!("`agentfile validate {file}` shows them");
    if !f.kept.is_empty() {
        return format!(
            "{errors} — {validate}; its last good registration ({}) is kept until the file is \
             valid again",
            f.kept.join(", ")
        );
    }
    match teller {
        Teller::List => format!(
            "{errors}, so its triggers are not listed — {validate}; a daemon that registered the \
             file while it was valid keeps that registration until the file is valid again"
        ),
        Teller::Daemon => format!(
            "{errors}, so its triggers are not registered — {validate}; they are once the file \
             is valid"
        ),
    }
}

/// Print each fire's session id (or why it did not run); 0 when every one started.
pub(super) fn report_fires<E: std::fmt::Display>(
    command: &str,
    fires: Vec<Result<FireResult, E>>,
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
