//! `agentfile serve`: JSON-RPC 2.0 on stdio until stdin closes (runs
//! finish) or a signal (runs stop, sessions left `interrupted`).

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use agentfile::executor::exit;
use agentfile::server::{gateway::Gateway, jsonrpc};

use super::server::{ServerArgs, WorkerQueueArgs};
use super::{async_runtime, exit_code, spawn_signal_watch};

#[derive(clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    server: ServerArgs,
}

pub(super) fn run(Args { server: args }: Args) -> ExitCode {
    if let Err(code) = args.gateway.check("serve") {
        return code;
    }
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
        let mut options = args.gateway_options();
        let cluster = match args.gateway.cluster_config("serve") {
            Ok(c) => c,
            Err(_) => return exit::USAGE,
        };
        let connected = args
            .queue
            .connect("serve", &cluster, &WorkerQueueArgs::default())
            .await;
        match connected {
            Ok(c) => options.cluster = c,
            Err(_) => return exit::USAGE,
        }
        let gateway = match Gateway::new(options) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("agentfile: error: {e}");
                return exit::USAGE;
            }
        };
        // Sessions a killed process left `running` read `interrupted` from now on.
        let reaper = gateway.clone();
        let _ = tokio::task::spawn_blocking(move || reaper.reap_orphans()).await;
        let stop = agentfile::llm::CancellationToken::new();
        let signalled = Arc::new(AtomicI32::new(0));
        spawn_signal_watch(stop.clone(), signalled.clone());
        jsonrpc::serve(gateway, tokio::io::stdin(), outbox, stop).await;
        signalled.load(Ordering::SeqCst)
    });
    // Every reply is queued; the writer ends once it has written them.
    let _ = writer.join();
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    exit_code(code)
}
