//! `agentfile sessions`: list, show, export, approve stored sessions, and
//! resume or signal one (a run, as `run` starts it).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Subcommand, ValueEnum};

use agentfile::printer::Progress;
use agentfile::run::{self as runapi, RunError};
use agentfile::service;
use agentfile::session::{self, SessionStatus};
use agentfile::wire::rpc::ApproveParams;

use super::args::{ReportFormat, StoreArgs};
use super::run::ResumeArgs;
use super::{finish, quiet_pipe};

#[derive(clap::Args)]
pub(super) struct Args {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process; boxing the large variant would fight clap's derive.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Sessions, newest first.
    List {
        /// Only sessions in this state.
        #[arg(long, value_parser = statuses())]
        status: Option<String>,
        /// Most sessions to show.
        #[arg(long, default_value_t = 50, value_name = "N")]
        limit: usize,
        /// Text for people, json for programs.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        #[command(flatten)]
        at: StoreArgs,
    },
    /// One session: its state and events.
    Show {
        /// The session's id (`sessions list` shows them).
        id: String,
        /// Text for people, json for programs.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        #[command(flatten)]
        at: StoreArgs,
    },
    /// The full transcript as JSON or markdown.
    Export {
        /// The session's id (`sessions list` shows them).
        id: String,
        /// Markdown for people, json for programs (every event in full).
        #[arg(long, value_enum, default_value_t = ExportFormat::Markdown)]
        format: ExportFormat,
        #[command(flatten)]
        at: StoreArgs,
    },
    /// Continue an interrupted session.
    Resume {
        /// The session's id (`sessions list` shows them).
        id: String,
        #[command(flatten)]
        run: ResumeArgs,
    },
    /// Deliver an event to a suspended session, then resume it.
    Signal {
        /// The suspended session's id.
        id: String,
        /// The event's name, one the session's suspend step waits for.
        event: String,
        /// The event's payload, as JSON (the suspend step's `eventPayload`).
        #[arg(long)]
        payload: Option<String>,
        /// Record the signal without resuming the run.
        #[arg(long)]
        no_resume: bool,
        #[command(flatten)]
        run: ResumeArgs,
    },
    /// Start a new session from this one's journal and run it live from a
    /// node: every node that completed before it is taken over (no model
    /// call, no tool), the node and all after it run again, with an edited
    /// workflow, other inputs or another model if given.
    Fork {
        /// The session to fork (`sessions list` shows them); it is left as it is.
        id: String,
        /// The node to run live from, by its path as events name it
        /// (`main/report`, `flow/triage-each[3]/triage`; `sessions show` lists them).
        #[arg(long, value_name = "NODE")]
        at: String,
        /// The workflow to run (default: the session's own); it must be
        /// unchanged in what the fork takes over.
        #[arg(long, value_name = "FILE")]
        workflow: Option<PathBuf>,
        /// An input as name=value, replacing the session's (repeatable).
        #[arg(long = "input", value_name = "NAME=VALUE")]
        inputs: Vec<String>,
        #[command(flatten)]
        run: ResumeArgs,
    },
    /// Run a session again from its own journal: every model answer and tool
    /// result as recorded, no model asked and no tool run, in a new session.
    /// With an edited workflow it stops where a request first differs
    /// (`replay-diverged`, naming the node and the part of the request).
    Replay {
        /// The session to replay; it is left as it is.
        id: String,
        /// The workflow to replay (default: the session's own), e.g. an edited copy.
        #[arg(long, value_name = "FILE")]
        workflow: Option<PathBuf>,
        #[command(flatten)]
        run: ResumeArgs,
    },
    /// Record a decision for a session waiting for approval.
    Approve {
        /// The id of the session waiting for approval.
        id: String,
        /// Reject instead of approving.
        #[arg(long)]
        reject: bool,
        /// Recorded with the decision (default: "with `agentfile sessions approve`").
        #[arg(long)]
        note: Option<String>,
        #[command(flatten)]
        at: StoreArgs,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum ExportFormat {
    Json,
    Markdown,
}

pub(super) fn run(args: Args) -> ExitCode {
    match args.command {
        Command::Resume { id, run } => super::run::resume(id, run),
        Command::Fork {
            id,
            at,
            workflow,
            inputs,
            run,
        } => super::run::fork(id, at, workflow, inputs, run),
        Command::Replay { id, workflow, run } => super::run::replay(id, workflow, run),
        Command::Signal {
            id,
            event,
            payload,
            no_resume,
            run,
        } => signal(id, &event, payload.as_deref(), no_resume, run),
        // These print after the work is done; a reader that stops early
        // (`| head -1`) does not change the result (0).
        other => finish(print(other).or_else(|e| quiet_pipe(e, 0))),
    }
}

/// The subcommands that read the store and print.
fn print(command: Command) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    match command {
        Command::List {
            status,
            limit,
            format,
            at,
        } => list(&mut out, status.as_deref(), limit, format, &at)?,
        Command::Show { id, format, at } => show(&mut out, &id, format, &at)?,
        Command::Export { id, format, at } => export(&mut out, &id, format, &at)?,
        Command::Approve {
            id,
            reject,
            note,
            at,
        } => approve(&mut out, &id, reject, note, &at)?,
        Command::Resume { .. }
        | Command::Signal { .. }
        | Command::Fork { .. }
        | Command::Replay { .. } => {
            anyhow::bail!("internal error: resume and signal are handled by `run`")
        }
    }
    out.flush()?;
    Ok(0)
}

/// The session store `--config`/`--workspace` point at.
fn open(at: &StoreArgs) -> anyhow::Result<Arc<dyn session::SessionStore>> {
    let config = runapi::load_config(at.config.as_deref(), Path::new("."))?;
    let ws = runapi::resolve_workspace(at.workspace.as_deref(), &config)?;
    Ok(runapi::open_store(&config, &ws)?)
}

/// `sessions signal`: record the event, then resume the run unless told not to.
fn signal(
    id: String,
    event: &str,
    payload: Option<&str>,
    no_resume: bool,
    run: ResumeArgs,
) -> ExitCode {
    let payload = match payload.map(serde_json::from_str).transpose() {
        Ok(p) => p.unwrap_or(serde_json::Value::Null),
        Err(e) => {
            eprintln!("agentfile: error: --payload is not JSON: {e}");
            return ExitCode::from(2);
        }
    };
    let at = StoreArgs {
        config: run.setup.config.clone(),
        workspace: run.setup.workspace.clone(),
    };
    let recorded = open(&at)
        .map_err(|e| RunError::usage(e.to_string()))
        .and_then(|store| runapi::record_signal(&store, &id, event, payload));
    if let Err(e) = recorded {
        eprintln!("agentfile: error: {e}");
        return ExitCode::from(u8::try_from(e.exit_code).unwrap_or(1));
    }
    if no_resume {
        println!(
            "signal `{event}` recorded for session {id}; continue it with `agentfile sessions resume {id}`"
        );
        return ExitCode::SUCCESS;
    }
    super::run::resume(id, run)
}

/// Every session state `--status` takes, as the store writes it.
fn statuses() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(SessionStatus::ALL.map(SessionStatus::as_str))
}

fn list(
    out: &mut impl Write,
    status: Option<&str>,
    limit: usize,
    format: ReportFormat,
    at: &StoreArgs,
) -> anyhow::Result<()> {
    let status = match status {
        None => None,
        Some(s) => Some(SessionStatus::parse(s).ok_or_else(|| {
            let all: Vec<&str> = SessionStatus::ALL.map(SessionStatus::as_str).to_vec();
            anyhow::anyhow!("unknown status `{s}`; use one of {}", all.join(", "))
        })?),
    };
    let list = open(at)?.list(status, limit)?;
    match format {
        ReportFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &list)?;
            writeln!(out)?;
        }
        ReportFormat::Text => {
            if list.is_empty() {
                writeln!(out, "no sessions")?;
                return Ok(());
            }
            // Columns as wide as their longest cell (ids are all one width).
            let id = list.iter().map(|m| m.id.len()).max().unwrap_or(0);
            let wf = list
                .iter()
                .map(|m| m.workflow.chars().count())
                .max()
                .unwrap_or(0)
                .max("WORKFLOW".len());
            writeln!(
                out,
                "{:id$}  {:16}  {:wf$}  UPDATED",
                "SESSION", "STATUS", "WORKFLOW"
            )?;
            for m in list {
                writeln!(
                    out,
                    "{:id$}  {:16}  {:wf$}  {}",
                    m.id,
                    m.status.as_str(),
                    m.workflow,
                    m.updated_at
                )?;
            }
        }
    }
    Ok(())
}

fn show(
    out: &mut impl Write,
    id: &str,
    format: ReportFormat,
    at: &StoreArgs,
) -> anyhow::Result<()> {
    let store = open(at)?;
    let meta = store.get(id)?;
    let events = store.events(id, 0)?;
    match format {
        ReportFormat::Json => {
            serde_json::to_writer_pretty(
                &mut *out,
                &serde_json::json!({"session": meta, "events": events}),
            )?;
            writeln!(out)?;
        }
        ReportFormat::Text => {
            let status = serde_json::to_value(meta.status)?
                .as_str()
                .unwrap_or("")
                .to_owned();
            writeln!(
                out,
                "session {}\nworkflow {} ({})\nstatus {status}\nworkspace {}\nevents {}",
                meta.id,
                meta.workflow,
                meta.path,
                meta.workspace,
                events.len()
            )?;
            let progress = Progress::to_writer(Box::new(std::io::sink()));
            for e in &events {
                if let Some(line) = progress.line(e) {
                    writeln!(out, "{line}")?;
                }
            }
        }
    }
    Ok(())
}

fn export(
    out: &mut impl Write,
    id: &str,
    format: ExportFormat,
    at: &StoreArgs,
) -> anyhow::Result<()> {
    let store = open(at)?;
    let meta = store.get(id)?;
    let events = store.events(id, 0)?;
    match format {
        ExportFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &session::export::json(&meta, &events))?;
            writeln!(out)?;
        }
        ExportFormat::Markdown => {
            out.write_all(session::export::markdown(&meta, &events).as_bytes())?
        }
    }
    Ok(())
}

fn approve(
    out: &mut impl Write,
    id: &str,
    reject: bool,
    note: Option<String>,
    at: &StoreArgs,
) -> anyhow::Result<()> {
    let store = open(at)?;
    let decision = ApproveParams {
        session_id: id.to_owned(),
        approve: !reject,
        note: note.or(Some("with `agentfile sessions approve`".into())),
    };
    let goal =
        service::record_approval(&store, &decision).map_err(|e| anyhow::anyhow!(e.message))?;
    let verb = if reject { "rejected" } else { "approved" };
    // A WORKFLOW.md approval step or tool step has no goal name.
    let what = if goal.is_empty() {
        "the pending approval".to_owned()
    } else {
        format!("goal `{goal}`")
    };
    writeln!(
        out,
        "{verb} {what} of session {id}; continue it with `agentfile sessions resume {id}`"
    )?;
    Ok(())
}
