//! `agentfile worker`: execute runs queued on NATS JetStream until SIGINT /
//! SIGTERM, then hand the runs in flight back to the queue (sessions left
//! `interrupted`).

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use agentfile::executor::exit;
use agentfile::server::gateway::{DEFAULT_MAX_RUNS, Gateway, GatewayOptions};
use agentfile::server::limits;

use super::server::{GatewayArgs, QueueArgs, WorkerQueueArgs};
use super::{EXIT_INVALID, async_runtime, exit_code, spawn_signal_watch};

#[derive(clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    gateway: GatewayArgs,
    /// Largest workflow file a request may have analysed, in bytes.
    #[arg(long, default_value_t = limits::DEFAULT_MAX_SOURCE)]
    max_source_bytes: usize,
    #[command(flatten)]
    queue: QueueArgs,
    #[command(flatten)]
    timing: WorkerQueueArgs,
}

pub(super) fn run(args: Args) -> ExitCode {
    if let Err(code) = args.gateway.check("worker") {
        return code;
    }
    let cluster = match args.gateway.cluster_config("worker") {
        Ok(c) => c,
        Err(code) => return code,
    };
    if args.queue.nats.is_none() && cluster.nats.is_none() {
        eprintln!(
            "agentfile worker: error: --nats URL (or AGENTFILE_NATS_URL, or `cluster.nats` in the config) is required: the NATS server runs are queued on"
        );
        return ExitCode::from(EXIT_INVALID);
    }
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let code = runtime.block_on(async move {
        let cluster = match args.queue.connect("worker", &cluster, &args.timing).await {
            Ok(Some(c)) => c,
            _ => return exit::USAGE,
        };
        let options = GatewayOptions {
            limits: limits::Limits {
                max_source: args.max_source_bytes,
                ..Default::default()
            },
            ..args.gateway.options()
        };
        let gateway = match Gateway::new(options) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("agentfile worker: error: {e}");
                return exit::USAGE;
            }
        };
        let stop = agentfile::llm::CancellationToken::new();
        let signalled = Arc::new(AtomicI32::new(0));
        spawn_signal_watch(stop.clone(), signalled.clone());
        let max = if args.gateway.max_runs == 0 {
            DEFAULT_MAX_RUNS
        } else {
            args.gateway.max_runs
        };
        if let Err(e) = agentfile::server::worker::serve(cluster, gateway, max, stop).await {
            eprintln!("agentfile worker: error: {e}");
            return 1;
        }
        signalled.load(Ordering::SeqCst)
    });
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    exit_code(code)
}
