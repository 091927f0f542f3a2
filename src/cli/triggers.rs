//! `agentfile triggers list|history|fire`: the daemon's triggers, what fired
//! and why not, and one fired by hand.

use std::process::ExitCode;

use clap::Subcommand;

use agentfile::server::daemon::Daemon;
use agentfile::server::gateway::DEFAULT_MAX_RUNS;
use agentfile::session::{self, FireKind};

use super::args::ReportFormat;
use super::async_runtime;
use super::daemon::{FireArgs, Teller, TriggerArgs, invalid_file_line, open_daemon, report_fires};

#[derive(clap::Args)]
pub(super) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Each registered trigger: its state, next fire (in its zone) and quota use.
    List {
        /// Text for people, json for programs.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        #[command(flatten)]
        triggers: TriggerArgs,
    },
    /// Fires, newest first: fired, skipped or refused and why, the session of each.
    History {
        /// Only this trigger's fires.
        #[arg(long)]
        trigger: Option<String>,
        /// Most fires to show.
        #[arg(long, default_value_t = 50, value_name = "N")]
        limit: usize,
        /// Text for people, json for programs.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        #[command(flatten)]
        triggers: TriggerArgs,
    },
    /// Fire trigger ID now, by hand: wait for the run and print its session id.
    Fire {
        /// The trigger's id (`triggers list` shows them).
        id: String,
        #[command(flatten)]
        triggers: TriggerArgs,
        #[command(flatten)]
        runs: FireArgs,
    },
}

pub(super) fn run(args: Args) -> ExitCode {
    let runtime = match async_runtime() {
        Ok(r) => r,
        Err(code) => return code,
    };
    runtime.block_on(async move {
        match args.command {
            Command::List { format, triggers } => {
                let options = triggers.options(&FireArgs::default(), DEFAULT_MAX_RUNS);
                match open_daemon("triggers list", options) {
                    Ok(d) => list(&d, format),
                    Err(c) => c,
                }
            }
            Command::History {
                trigger,
                limit,
                format,
                triggers,
            } => {
                let options = triggers.options(&FireArgs::default(), DEFAULT_MAX_RUNS);
                match open_daemon("triggers history", options) {
                    Ok(d) => history(&d, trigger.as_deref(), limit, format),
                    Err(c) => c,
                }
            }
            Command::Fire { id, triggers, runs } => {
                let d =
                    match open_daemon("triggers fire", triggers.options(&runs, DEFAULT_MAX_RUNS)) {
                        Ok(d) => d,
                        Err(c) => return c,
                    };
                let key = format!("manual-{}", session::new_session_id());
                let r = d
                    .fire(&id, FireKind::Manual, key, None, Default::default())
                    .await;
                d.wait_runs().await;
                report_fires("triggers fire", vec![r])
            }
        }
    })
}

fn list(d: &Daemon, format: ReportFormat) -> ExitCode {
    let rows = d.list();
    match format {
        ReportFormat::Json => {
            // A file that does not validate, and why (its last good
            // triggers, if any, are still served and listed).
            let invalid: Vec<serde_json::Value> = d
                .invalid_files()
                .iter()
                .map(|f| {
                    serde_json::json!({
                        "path": f.path.display().to_string(),
                        "reason": f.reason.to_string(),
                        "kept": f.kept,
                    })
                })
                .collect();
            println!(
                "{}",
                serde_json::json!({ "triggers": rows, "invalid": invalid })
            );
        }
        ReportFormat::Text => {
            // A file that does not validate has no triggers to list, which
            // is not the same as having none: say which and why.
            let invalid = d.invalid_files();
            if rows.is_empty() && invalid.is_empty() {
                println!("no triggers under the workspace");
            }
            for f in &invalid {
                println!("{}", invalid_file_line(f, Teller::List));
            }
            for r in rows {
                let mut line = format!("{}  {}  {}", r.id, r.kind, r.state);
                if let Some(n) = &r.next_fire {
                    line.push_str(&format!("  next {n}"));
                }
                if let Some(why) = &r.reason {
                    line.push_str(&format!("  ({})", one_line(why)));
                }
                println!("{line}");
            }
        }
    }
    ExitCode::SUCCESS
}

fn history(d: &Daemon, trigger: Option<&str>, limit: usize, format: ReportFormat) -> ExitCode {
    let fires = match d.store().fires(trigger, limit) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("agentfile triggers history: error: {e}");
            return ExitCode::from(1);
        }
    };
    match format {
        ReportFormat::Json => {
            let rows: Vec<serde_json::Value> = fires
                .iter()
                .map(|f| {
                    let mut v = serde_json::to_value(f).unwrap_or_default();
                    if let Some(o) = v.as_object_mut() {
                        o.remove("key");
                        o.remove("cost_usd");
                    }
                    v
                })
                .collect();
            println!("{}", serde_json::json!({ "fires": rows }));
        }
        ReportFormat::Text => {
            for f in fires {
                let mut line = format!(
                    "{}  {}  {}  {}",
                    f.fired_at,
                    f.trigger,
                    f.kind.as_str(),
                    f.outcome.as_str()
                );
                if let Some(s) = &f.session_id {
                    line.push_str(&format!("  {s}"));
                }
                if let Some(r) = &f.reason {
                    line.push_str(&format!("  ({})", one_line(r)));
                }
                println!("{line}");
            }
        }
    }
    ExitCode::SUCCESS
}

/// A reason as one row's worth: its first line (a diagnostic's
/// `file:line:col: error: …`), and a pointer to the rest when it has more
/// (the carets and hints of a rendered diagnostic). `--format json` keeps
/// the whole text.
fn one_line(reason: &str) -> String {
    let mut lines = reason.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("").to_owned();
    if lines.next().is_some() {
        format!("{first} …; --format json has all of it")
    } else {
        first
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_reason_of_many_lines_is_one_row() {
        let caret = "w.md:3:1: error: unknown key `stpes`\n  |\n3 | stpes:\n  | ^^^^^\n  = hint: did you mean `steps`?\n";
        assert_eq!(
            super::one_line(caret),
            "w.md:3:1: error: unknown key `stpes` …; --format json has all of it"
        );
        assert_eq!(super::one_line("overlap: skipped"), "overlap: skipped");
    }
}
