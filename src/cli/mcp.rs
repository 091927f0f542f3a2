//! `agentfile mcp`: MCP on stdio (or Streamable HTTP with `--http`) for IDE
//! agents: workflows as tools, progress, approvals, the host's model by
//! sampling.

use std::process::ExitCode;
use std::time::Duration;

use agentfile::server::mcp::{self, McpOptions, http};

use super::server::{ServerArgs, WorkerQueueArgs};
use super::{async_runtime, exit_code};

#[derive(clap::Args)]
pub(super) struct Args {
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

pub(super) fn run(args: Args) -> ExitCode {
    if let Err(code) = args.server.gateway.check("mcp") {
        return code;
    }
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut gateway = args.server.gateway_options();
    let cluster = match args.server.gateway.cluster_config("mcp") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let queue = &args.server.queue;
    match runtime.block_on(queue.connect("mcp", &cluster, &WorkerQueueArgs::default())) {
        Ok(c) => gateway.cluster = c,
        Err(code) => return code,
    }
    let options = McpOptions {
        gateway,
        heartbeat: Duration::from_millis(args.heartbeat_ms.max(10)),
        poll: Duration::from_millis(args.poll_ms.max(10)),
        http: args.http,
        tokens: std::env::var(http::TOKEN_VAR)
            .map(|v| http::parse_tokens(&v))
            .unwrap_or_default(),
        extra_tools: None,
    };
    let code = if options.http.is_some() {
        runtime.block_on(http::serve_http(options))
    } else {
        runtime.block_on(mcp::serve_stdio(options))
    };
    // A read of stdin may still be parked on a blocking thread; do not wait for it.
    runtime.shutdown_timeout(Duration::from_millis(100));
    exit_code(code)
}
