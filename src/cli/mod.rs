//! The `agentfile` command line: the parser, the dispatch, and what every
//! command shares (exit codes, writing to a pipe that may close, the async
//! runtime, stop signals).
//!
//! Each command lives in its own module with the flags it reads and nothing
//! else; flag groups several commands use (how a workflow is read, where the
//! session store is, how a server runs) are small structs in [`args`] and
//! [`server`], flattened only where they apply. None of these modules holds
//! workflow logic: flags become a library call, its result becomes output.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use agentfile::config::Config;
use agentfile::diag::{self, Style};
use agentfile::frontend::Analysis;
use agentfile::telemetry::logs;

mod a2a;
mod args;
mod create;
mod daemon;
mod emit;
mod inspect;
mod list;
mod manual;
mod mcp;
mod package;
mod promote;
mod run;
mod serve;
mod server;
mod sessions;
mod test;
mod triggers;
mod ui;
mod validate;
mod worker;

#[derive(Parser)]
#[command(
    name = "agentfile",
    version,
    about = "A headless runtime for LLM-agent workflows written as plain files",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    globals: Globals,
}

/// The flags every command takes.
#[derive(clap::Args)]
struct Globals {
    /// Log lines on stderr as text or JSON lines.
    #[arg(long, global = true, value_enum, default_value_t = LogFormatArg::Text)]
    log_format: LogFormatArg,
    /// Log level (error, warn, info, debug, trace) or a filter such as
    /// `agentfile=debug`; default: RUST_LOG, else warn.
    #[arg(long, global = true, value_name = "LEVEL")]
    log_level: Option<String>,
}

/// The parser of `agentfile run` alone. Building the whole tree of commands
/// and flags is a tenth of a run's start-up; a command line that starts with
/// `run` is read with this one, and anything it does not accept (help,
/// version, a bad flag) is read again by the whole parser, so what is printed
/// is the same (issue 44).
#[derive(Parser)]
#[command(name = "agentfile", version, propagate_version = true)]
struct RunOnly {
    #[command(subcommand)]
    command: RunCommand,
    #[command(flatten)]
    globals: Globals,
}

#[derive(Subcommand)]
enum RunCommand {
    Run(run::Args),
}

impl Cli {
    /// The command line, read by the parser of `run` alone where it can be.
    fn read() -> Cli {
        let run_first = std::env::args_os()
            .skip(1)
            .find(|a| !a.to_str().is_some_and(|a| a.starts_with('-')))
            .is_some_and(|a| a == "run");
        if run_first && let Ok(only) = parse_kept::<RunOnly>() {
            let RunCommand::Run(args) = only.command;
            return Cli {
                command: Command::Run(args),
                globals: only.globals,
            };
        }
        parse_kept::<Cli>().unwrap_or_else(|e| e.exit())
    }
}

/// Read the command line as `T::try_parse` does, but keep the tree of
/// commands and flags instead of freeing it: the process needs it no more,
/// and freeing it was a seventh of `agentfile --version`'s instructions
/// (320,000 of 2.3 million), before anything was printed. Errors read as
/// clap's own do.
fn parse_kept<T: Parser>() -> Result<T, clap::Error> {
    let command: &'static mut clap::Command = Box::leak(Box::new(T::command()));
    let mut matches = command.try_get_matches_from_mut(std::env::args_os())?;
    T::from_arg_matches_mut(&mut matches).map_err(|e| e.format(command))
}

#[derive(Clone, Copy, ValueEnum, Default)]
enum LogFormatArg {
    #[default]
    Text,
    Json,
}

// Parsed once per process; boxing the large variant would fight clap's derive.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Check workflow files and report every problem (exit 0 valid, 2 not).
    Validate(validate::Args),
    /// Show a workflow's inputs, agents, goals and steps.
    Inspect(inspect::Args),
    /// Run the cases of workflow test files (*.test.yaml): each in a scratch
    /// copy of the workspace, the model replayed from its cassette, its
    /// expectations checked (exit 0 all passed, 1 a case failed, 2 invalid).
    Test(test::Args),
    /// Run a workflow: goals as model/tool loops behind the policy, every event stored.
    Run(run::Args),
    /// List, show, export, resume and approve stored sessions.
    Sessions(sessions::Args),
    /// Serve JSON-RPC 2.0 on stdio, one message per line (run, event, cancel,
    /// approve, validate, inspect, list, sessions; `event` notifications).
    Serve(serve::Args),
    /// Execute runs queued on NATS JetStream by `serve --nats` / `mcp --nats`
    /// (needs --nats and a PostgreSQL session store); SIGTERM hands runs in
    /// flight back to the queue, resumable.
    Worker(worker::Args),
    /// Fire the workflows under the workspaces on their schedules and events
    /// until SIGTERM/SIGINT (exit 143/130; runs in flight are left resumable).
    /// With --nats: runs go onto the NATS work queue for `agentfile worker`s,
    /// and `kind: event` workflows also fire on `agentfile.emit.<name>`.
    Daemon(daemon::Args),
    /// The daemon's triggers: list them, show what fired and why not, fire one now.
    Triggers(triggers::Args),
    /// Fire every workflow with `kind: event, name: NAME` once for this event
    /// id, wait for the runs and print their session ids.
    Emit(emit::Args),
    /// Find workflows under a folder and show their names, paths and inputs.
    List(list::Args),
    /// Serve the web view of the workspace's sessions at http://ADDR/ui/:
    /// the list, each session's graph, timeline and events, live, with
    /// approve, signal, cancel and resume.
    Ui(ui::Args),
    /// Serve MCP on stdio for IDE agents (Claude Code, Cursor, Cline, VS Code):
    /// workflows as tools, progress, approvals, the host's model by sampling.
    Mcp(mcp::Args),
    /// Serve each workflow as a skill of an A2A agent over HTTP (JSON-RPC at
    /// /a2a, the agent card at /.well-known/agent-card.json): runs as tasks,
    /// streamed, answered and cancelled by any A2A 1.0 or 0.3 client.
    A2a(a2a::Args),
    /// Generate a workflow.yaml workflow from a description: the built-in
    /// generator writes artifacts/NAME/RUN_ID/ and the result is validated.
    Create(create::Args),
    /// Promote a validated generation run (artifacts/NAME/RUN_ID) to
    /// workflows/NAME/, archiving the run to outputs/NAME/RUN_ID/build/.
    Promote(promote::Args),
    /// Pack a workflow and everything it loads as a reproducible OCI package
    /// and print its digest (-o FILE: an OCI image layout archive).
    Pack(package::PackArgs),
    /// Pack a workflow and push it to an OCI registry; prints REF@sha256:….
    Push(package::PushArgs),
    /// Pull a package into the cache, checked; prints REF@sha256:….
    Pull(package::PullArgs),
    /// Sign a package in its registry with a private key (cosign-compatible:
    /// `cosign verify --key` accepts it).
    Sign(package::SignArgs),
    /// Check a package's signature against trusted public keys (exit 3 when
    /// none verifies).
    Verify(package::VerifyArgs),
    /// Make an ECDSA P-256 key pair for `sign` and `verify` (PREFIX.key,
    /// PREFIX.pub).
    Keygen(package::KeygenArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or
    /// powershell.
    Completions(manual::CompletionsArgs),
    /// Print the manual page agentfile(1), or write a page per command with --dir.
    Man(manual::ManArgs),
}

/// Exit code for usage and validation errors.
const EXIT_INVALID: u8 = 2;

/// Parse the command line, start logging, run the command; its exit code.
pub fn main() -> ExitCode {
    let cli = Cli::read();
    let format = match cli.globals.log_format {
        LogFormatArg::Text => logs::LogFormat::Text,
        LogFormatArg::Json => logs::LogFormat::Json,
    };
    if let Err(e) = logs::init(format, cli.globals.log_level.as_deref()) {
        eprintln!("agentfile: error: {e}");
        return ExitCode::from(EXIT_INVALID);
    }
    let result = match cli.command {
        Command::Validate(args) => validate::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::List(args) => list::run(args),
        Command::Promote(args) => promote::run(args),
        Command::Run(args) => return run::run(args),
        Command::Test(args) => return test::run(args),
        Command::Sessions(args) => return sessions::run(args),
        Command::Serve(args) => return serve::run(args),
        Command::Worker(args) => return worker::run(args),
        Command::Mcp(args) => return mcp::run(args),
        Command::A2a(args) => return a2a::run(args),
        Command::Ui(args) => return ui::run(args),
        Command::Daemon(args) => return daemon::run(args),
        Command::Triggers(args) => return triggers::run(args),
        Command::Emit(args) => return emit::run(args),
        Command::Create(args) => return create::run(args),
        Command::Pack(args) => return package::pack(args),
        Command::Push(args) => return package::push(args),
        Command::Pull(args) => return package::pull(args),
        Command::Sign(args) => return package::sign(args),
        Command::Verify(args) => return package::verify(args),
        Command::Keygen(args) => return package::keygen(args),
        Command::Completions(args) => return manual::completions(args),
        Command::Man(args) => return manual::man(args),
    };
    finish(result)
}

/// The exit of a command that returns its code, or an error to print (exit 2).
fn finish(result: anyhow::Result<u8>) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("agentfile: error: {e:#}");
            ExitCode::from(EXIT_INVALID)
        }
    }
}

/// A run's or a server's exit code as the process's (out of range: 1).
fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The config for a workflow: `--config`, else ./agent.{json,toml}, else one
/// beside the workflow file.
fn config_for(explicit: Option<&Path>, workflow: &Path) -> anyhow::Result<Option<Config>> {
    Ok(agentfile::run::find_config(
        explicit,
        workflow,
        Path::new("."),
    )?)
}

/// `path` relative to the current folder when it is under it, else as is.
fn shown_path(path: &Path) -> String {
    std::env::current_dir()
        .and_then(|d| d.canonicalize())
        .ok()
        .and_then(|d| path.strip_prefix(d).ok().map(Path::to_path_buf))
        .map(|p| {
            if p.as_os_str().is_empty() {
                ".".into()
            } else {
                p
            }
        })
        .unwrap_or_else(|| path.to_path_buf())
        .display()
        .to_string()
}

fn color_for_stdout() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// A file's diagnostics as text, ending with "… and N more errors" when the
/// per-file cap left some out.
fn print_diagnostics(out: &mut impl Write, a: &Analysis, style: Style) -> std::io::Result<()> {
    for d in &a.diagnostics {
        out.write_all(diag::render(&a.sources, d, style).as_bytes())?;
    }
    if let Some(note) = a.omitted_note() {
        writeln!(out, "{note}")?;
    }
    Ok(())
}

/// Is this a write to a pipe whose reader has gone (`agentfile … | head -1`)?
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// A closed stdout ends a printing command quietly with the exit code it
/// already had: the reader chose to stop reading, which changes neither whether
/// the files were valid nor whether the command worked. (Not 141: that would
/// hide `validate`'s 0/2 from `set -o pipefail` scripts that only want the
/// first lines.) Any other error stays an error.
fn quiet_pipe(e: anyhow::Error, code: u8) -> anyhow::Result<u8> {
    if is_broken_pipe(&e) { Ok(code) } else { Err(e) }
}

/// Write `rendered` to stdout and exit 0, also when the reader has gone.
fn print_rendered(rendered: &str) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    out.write_all(rendered.as_bytes())
        .and_then(|()| out.flush())
        .map_or_else(|e| quiet_pipe(e.into(), 0), |()| Ok(0))
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// The multi-threaded runtime the async commands run on.
fn async_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("agentfile: error: cannot start the async runtime: {e}");
            ExitCode::from(1)
        })
}

/// SIGINT / SIGTERM cancel `stop` and record the exit code (130 / 143).
fn spawn_signal_watch(
    stop: agentfile::llm::CancellationToken,
    code: std::sync::Arc<std::sync::atomic::AtomicI32>,
) {
    tokio::spawn(async move {
        if let Some(c) = next_stop_signal().await {
            code.store(c, std::sync::atomic::Ordering::SeqCst);
            stop.cancel();
        }
    });
}

/// The next SIGINT or SIGTERM (Ctrl-C elsewhere), as the exit code a process
/// stopped by it reports: 130 or 143. `None` when signals cannot be watched.
async fn next_stop_signal() -> Option<i32> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return None;
        };
        tokio::select! {
            _ = int.recv() => Some(130),
            _ = term.recv() => Some(143),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await.ok().map(|_| 130)
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// What `--help` shows for every command and subcommand, walked from the
    /// parser itself: each option and positional has a help line, and each
    /// command says what it does. Fails naming every one that does not.
    #[test]
    fn every_option_of_every_command_has_a_help_line() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if a.is_hide_set() || id == "help" || id == "version" {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    let name = a
                        .get_long()
                        .map(|l| format!("--{l}"))
                        .unwrap_or_else(|| format!("<{}>", id.to_uppercase()));
                    missing.push(format!("`{path} {name}`"));
                }
            }
            for sub in cmd.get_subcommands() {
                let here = format!("{path} {}", sub.get_name());
                if sub.get_name() != "help" && sub.get_about().is_none() {
                    missing.push(format!("`{here}` (the command itself)"));
                }
                walk(sub, &here, missing);
            }
        }
        let mut cli = super::Cli::command();
        cli.build();
        let mut missing = Vec::new();
        walk(&cli, "agentfile", &mut missing);
        assert!(
            missing.is_empty(),
            "without a help line:\n  {}",
            missing.join("\n  ")
        );
    }

    /// A value list names every value the command accepts.
    #[test]
    fn sessions_list_offers_every_status_it_accepts() {
        let cli = super::Cli::command();
        let list = cli
            .find_subcommand("sessions")
            .and_then(|s| s.find_subcommand("list"))
            .expect("sessions list");
        let status = list
            .get_arguments()
            .find(|a| a.get_id() == "status")
            .expect("--status");
        let offered: Vec<String> = status
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_owned())
            .collect();
        for s in agentfile::session::SessionStatus::ALL {
            assert!(
                offered.iter().any(|o| o == s.as_str()),
                "{s:?} not in {offered:?}"
            );
        }
    }
}
