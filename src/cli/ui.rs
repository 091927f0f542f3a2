//! `agentfile ui`: the web view of the workspace's sessions at
//! http://ADDR/ui/ until a signal.

use std::path::PathBuf;
use std::process::ExitCode;

use agentfile::server::{auth, gateway::GatewayOptions, ui};

use super::{async_runtime, exit_code};

#[derive(clap::Args)]
pub(super) struct Args {
    /// Where to listen (port 0 picks one and prints it). Without
    /// AGENTFILE_MCP_TOKEN only loopback addresses may be bound.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8790")]
    listen: std::net::SocketAddr,
    /// The folder whose session store is shown (default: agent.workspace in
    /// the config, else here).
    #[arg(long)]
    workspace: Option<PathBuf>,
    /// Config file (default: agent.toml or agent.json in the current folder).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The policy runs resumed here (approved, signalled) use.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// The provider runs resumed here use (default: what they ran with).
    #[arg(long)]
    provider: Option<String>,
    /// The model runs resumed here use (default: what they ran with).
    #[arg(long)]
    model: Option<String>,
}

pub(super) fn run(args: Args) -> ExitCode {
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    let options = ui::ServeOptions {
        gateway: GatewayOptions {
            config: args.config,
            workspace: args.workspace,
            policy: args.policy,
            provider: args.provider,
            model: args.model,
            ..Default::default()
        },
        listen: args.listen,
        tokens: std::env::var(auth::TOKEN_VAR)
            .map(|v| auth::parse_tokens(&v))
            .unwrap_or_default(),
    };
    let code = runtime.block_on(ui::run(
        options,
        agentfile::server::signals::signal(),
        |_| {},
    ));
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    exit_code(code)
}
