//! `agentfile emit NAME`: fire every workflow with `kind: event, name: NAME`
//! once for the event id, wait for the runs, print their session ids. With
//! `--nats`: store the event in the daemons' JetStream stream instead, and
//! print what a listening daemon fired (or that it fires when one starts).

use std::process::ExitCode;
use std::time::Duration;

use agentfile::cluster::{Cluster, ClusterOptions, display_url};
use agentfile::server::daemon::nats::{EVENTS_STREAM, Published, publish};
use agentfile::server::daemon::{Daemon, FireResult};
use agentfile::session;
use serde_json::Value;

use super::daemon::{FireArgs, TriggerArgs, open_daemon, report_fires};
use super::{EXIT_INVALID, async_runtime};

/// How long `emit --nats` waits for a listening daemon's answer.
const ANSWER_WAIT: Duration = Duration::from_secs(30);

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
    /// Publish the event on NATS (JetStream stream AGENTFILE_EVENTS, subject
    /// agentfile.emit.NAME) for `agentfile daemon --nats` instead of firing
    /// here: the sessions a listening daemon started are printed; with none
    /// listening the event is kept and fires when one starts (exit 0).
    #[arg(
        long,
        env = "AGENTFILE_NATS_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    nats: Option<String>,
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
        Ok(p) => p.unwrap_or(Value::Null),
        Err(e) => {
            eprintln!("agentfile emit: error: --payload is not JSON: {e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let id = args
        .id
        .clone()
        .unwrap_or_else(|| format!("event-{}", session::new_session_id()));
    if let Some(url) = args.nats.clone() {
        return runtime.block_on(emit_on_nats(url, &args.name, &id, payload));
    }
    runtime.block_on(async move {
        let options = args.triggers.options(&args.runs, args.max_runs);
        let d = match open_daemon("emit", options) {
            Ok(d) => d,
            Err(c) => return c,
        };
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
        return nothing_fired(name);
    }
    d.wait_runs().await;
    report_fires("emit", fires)
}

fn nothing_fired(name: &str) -> ExitCode {
    eprintln!(
        "agentfile emit: no workflow subscribes to event `{name}` (a trigger `kind: event, name: {name}`); nothing fired"
    );
    ExitCode::from(1)
}

/// `emit --nats`: store the event in the stream; print what a listening
/// daemon fired, or that it waits for one.
async fn emit_on_nats(url: String, name: &str, id: &str, payload: Value) -> ExitCode {
    if !(payload.is_object() || payload.is_null()) {
        eprintln!(
            "agentfile emit: error: the payload must be a JSON object (its fields are the workflow's inputs)"
        );
        return ExitCode::from(EXIT_INVALID);
    }
    let shown = display_url(&url);
    let cluster = match Cluster::connect(ClusterOptions::new(url)).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("agentfile emit: error: {e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let answer = match publish(&cluster, name, id, &payload, ANSWER_WAIT).await {
        Ok(Published::Answered(a)) => a,
        Ok(Published::Stored { sequence }) => {
            eprintln!(
                "agentfile emit: event `{name}` (id `{id}`) is stored in the NATS stream \
                 {EVENTS_STREAM} at {shown} (message {sequence}); no daemon answered, so it \
                 fires when one (`agentfile daemon --nats`) takes it"
            );
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("agentfile emit: error: {e}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    if let Some(e) = answer.get("error").and_then(Value::as_str) {
        eprintln!("agentfile emit: error: {e}");
        return ExitCode::from(EXIT_INVALID);
    }
    let fires: Vec<Result<FireResult, String>> = answer
        .get("fires")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|f| match f.get("error").and_then(Value::as_str) {
            Some(e) => Err(e.to_owned()),
            None => serde_json::from_value(f)
                .map_err(|e| format!("the daemon's answer is not a fire: {e}")),
        })
        .collect();
    if fires.is_empty() {
        return nothing_fired(name);
    }
    report_fires("emit", fires)
}
