//! `agentfile validate`: every problem of the files named, as text with
//! caret excerpts or as the JSON report; exit 0 when all are valid, 2 not.

use std::io::Write;
use std::path::{Path, PathBuf};

use agentfile::diag::{self, Style};
use agentfile::frontend::{self, Analysis, Options};

use super::args::{DialectArg, ReadArgs, ReportFormat};
use super::{EXIT_INVALID, color_for_stdout, config_for, plural, print_diagnostics, quiet_pipe};

#[derive(clap::Args)]
pub(super) struct Args {
    /// Workflow files (or folders holding an Agentfile).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Config file for REQUIRES profiles (default: ./agent.json, ./agent.toml,
    /// then agent.json / agent.toml beside each workflow).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Text for people (carets under the source), json for programs.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    format: ReportFormat,
    /// Which Agentfile dialect to read, instead of guessing.
    #[arg(long, value_enum)]
    dialect: Option<DialectArg>,
    #[command(flatten)]
    read: ReadArgs,
}

pub(super) fn run(args: Args) -> anyhow::Result<u8> {
    let read = args.read.options();
    let mut analyses = Vec::with_capacity(args.paths.len());
    for p in &args.paths {
        let cfg = config_for(args.config.as_deref(), p)?;
        let mut a = frontend::analyze(
            p,
            Options {
                config: cfg.as_ref(),
                dialect: args.dialect.map(Into::into),
                read: read.clone(),
            },
        );
        frontend::check_policy(&mut a, None);
        analyses.push(a);
    }
    refuse_webhook_clashes(&mut analyses);
    let errors: usize = analyses.iter().map(Analysis::errors).sum();
    let code = if errors > 0 { EXIT_INVALID } else { 0 };
    print_report(&analyses, args.format).map_or_else(|e| quiet_pipe(e, code), |()| Ok(code))
}

/// One webhook path, one trigger, across the files validated together (the
/// daemon refuses the second the same way).
fn refuse_webhook_clashes(analyses: &mut [Analysis]) {
    let plans: Vec<(PathBuf, agentfile::plan::Plan)> = analyses
        .iter()
        .filter_map(|a| a.plan.clone().map(|p| (a.path.clone(), p)))
        .collect();
    let refs: Vec<(&Path, &agentfile::plan::Plan)> =
        plans.iter().map(|(p, plan)| (p.as_path(), plan)).collect();
    for (file, problem) in agentfile::server::daemon::registry::webhook_path_clashes(&refs) {
        if let Some(a) = analyses.iter_mut().find(|a| a.path == file) {
            a.diagnostics.push(diag::Diagnostic::file_error(
                "webhook-path-clash",
                &file,
                problem,
            ));
            a.plan = None;
        }
    }
}

fn print_report(analyses: &[Analysis], format: ReportFormat) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        ReportFormat::Json => {
            let report = agentfile::frontend::report::validate_report(analyses);
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
        }
        ReportFormat::Text => {
            let style = Style {
                color: color_for_stdout(),
            };
            for a in analyses {
                print_diagnostics(&mut out, a, style)?;
                writeln!(out, "{}: {}", a.path.display(), status_line(a))?;
            }
        }
    }
    // Surface a closed pipe here, not in a flush at exit that nobody checks.
    out.flush()?;
    Ok(())
}

/// `ok — workflow …: N inputs, …` or `invalid — N errors`, with the warnings.
fn status_line(a: &Analysis) -> String {
    let status = match &a.plan {
        Some(p) => format!(
            "ok — workflow `{}`: {}, {}, {}, {}",
            p.name,
            plural(p.inputs.len(), "input"),
            plural(p.agents.len(), "agent"),
            plural(p.goals.len(), "goal"),
            // Formats other than the DSL have no StepDefs: their
            // top-level steps are the graph's.
            plural(
                if p.steps.is_empty() {
                    p.graph.children().len()
                } else {
                    p.steps.len()
                },
                "step"
            ),
        ),
        None => format!("invalid — {}", plural(a.errors(), "error")),
    };
    let warnings = match a.warnings() {
        0 => String::new(),
        n => format!(" ({})", plural(n, "warning")),
    };
    format!("{status}{warnings}")
}
