//! The `agentfile` command line: a thin adapter from flags to the library.
//!
//! # Layout
//!
//! - `cli` (`src/cli/mod.rs`): the parser, the dispatch, and what every
//!   command shares — exit codes, printing to a pipe that may close, the
//!   async runtime, stop signals.
//! - `cli::args`: flag groups several commands read (how a workflow is read,
//!   the session store, report and output formats).
//! - `cli::server`: the servers' flag groups (the gateway, a connection's
//!   bounds, the NATS queue, the worker's timings).
//! - One module per command, each owning its flags: `validate`, `inspect`,
//!   `list`, `run` (also how `sessions resume|signal` and `create` start a
//!   run), `sessions`, `serve`, `worker`, `mcp`, `ui`, `daemon`, `triggers`,
//!   `emit`, `create`, `promote`. A flag appears only on the commands that
//!   use it.
//!
//! Human-readable progress and log lines (`--log-format`, `--log-level`) go to
//! stderr; results go to stdout. Exit codes (CONTRACT §3): 0 success, 1 run
//! failed, 2 usage or validation error.

mod cli;

fn main() -> std::process::ExitCode {
    // Before anything could build an HTTPS client (see `install_tls`).
    agentfile_llm::install_tls();
    cli::main()
}
