//! `agentfile a2a --http ADDR`: each workflow of the workspace as a skill of
//! an A2A agent (JSON-RPC at http://ADDR/a2a, the agent card at
//! http://ADDR/.well-known/agent-card.json), until a signal.

use std::process::ExitCode;
use std::time::Duration;

use agentfile::server::{a2a, auth};

use super::server::{GatewayArgs, QueueArgs, WorkerQueueArgs};
use super::{async_runtime, exit_code};

#[derive(clap::Args)]
pub(super) struct Args {
    #[command(flatten)]
    gateway: GatewayArgs,
    #[command(flatten)]
    queue: QueueArgs,
    /// Where to listen (e.g. 127.0.0.1:8809; port 0 picks one and prints
    /// it). Clients must send `Authorization: Bearer <token>` when
    /// AGENTFILE_MCP_TOKEN is set (several tokens: comma-separated); without
    /// it only loopback addresses may be bound.
    #[arg(long, value_name = "ADDR")]
    http: std::net::SocketAddr,
    /// Milliseconds between workspace rescans for skills.
    #[arg(long, default_value_t = 3000, hide = true)]
    poll_ms: u64,
}

pub(super) fn run(args: Args) -> ExitCode {
    if let Err(code) = args.gateway.check("a2a") {
        return code;
    }
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut gateway = args.gateway.options();
    let cluster = match args.gateway.cluster_config("a2a") {
        Ok(c) => c,
        Err(code) => return code,
    };
    match runtime.block_on(
        args.queue
            .connect("a2a", &cluster, &WorkerQueueArgs::default()),
    ) {
        Ok(c) => gateway.cluster = c,
        Err(code) => return code,
    }
    let options = a2a::ServeOptions {
        gateway,
        listen: args.http,
        tokens: std::env::var(auth::TOKEN_VAR)
            .map(|v| auth::parse_tokens(&v))
            .unwrap_or_default(),
        poll: Duration::from_millis(args.poll_ms.max(10)),
    };
    let code = runtime.block_on(a2a::run(
        options,
        agentfile::server::signals::signal(),
        |_| {},
    ));
    runtime.shutdown_timeout(Duration::from_millis(100));
    exit_code(code)
}
