//! `agentfile emit NAME`: fire every workflow with `kind: event, name: NAME`
//! once for the event id, wait for the runs, print their session ids.

use std::process::ExitCode;

use agentfile::server::daemon::Daemon;
use agentfile::session;

use super::daemon::{FireArgs, TriggerArgs, open_daemon, report_fires};
use super::{EXIT_INVALID, async_runtime};

#[derive(clap::Args)]
pub(super) struct Args {
    /// The event's name.
    name: String,
    /// The workflow inputs, as a JSON object.
    #[arg(long)]
    payload: Option<String>,
    /// The event id (a redelivered id fires nothing; default: a fresh one).
    #[arg(long)]
    id: Option<String>,
    #[command(flatten)]
    triggers: TriggerArgs,
    #[command(flatten)]
    runs: FireArgs,
    /// Runs executing at once; more wait as `queued`.
    #[arg(long, default_value_t = agentfile::server::gateway::DEFAULT_MAX_RUNS)]
    max_runs: usize,
}

pub(super) fn run(args: Args) -> ExitCode {
    let payload = match args
        .payload
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
    {
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
        let options = args.triggers.options(&args.runs, args.max_runs);
        let d = match open_daemon("emit", options) {
            Ok(d) => d,
            Err(c) => return c,
        };
        let id = args
            .id
            .unwrap_or_else(|| format!("event-{}", session::new_session_id()));
        emit(&d, &args.name, &id, payload).await
    })
}

async fn emit(
    d: &std::sync::Arc<Daemon>,
    name: &str,
    id: &str,
    payload: serde_json::Value,
) -> ExitCode {
    let fires = match d.emit(name, id, payload).await {
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
}
