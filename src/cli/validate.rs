//! `agentfile validate`: every problem of the files named, as text with
//! caret excerpts or as the JSON report; exit 0 when all are valid, 2 not.
//! A test file (`*.test.yaml`) is checked by `agentfile_testing`, and the
//! workflow it names is validated with it.

use std::io::Write;
use std::path::{Path, PathBuf};

use agentfile::diag::{self, Style};
use agentfile::frontend::{self, Analysis, Options};
use agentfile::testing;

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

/// What a validated file is: a workflow, or a test file (with its cases
/// when it is valid).
#[derive(Clone, Copy)]
enum Kind {
    Workflow,
    Test { cases: Option<usize> },
}

pub(super) fn run(args: Args) -> anyhow::Result<u8> {
    let mut analyses = Vec::with_capacity(args.paths.len());
    let mut kinds = Vec::with_capacity(args.paths.len());
    // A workflow named by a test file is validated once, and not again when
    // it is named on the command line as well.
    let mut seen: Vec<PathBuf> = args
        .paths
        .iter()
        .filter(|p| !testing::is_test_file(p))
        .map(|p| same_file(p))
        .collect();
    for p in &args.paths {
        if !testing::is_test_file(p) {
            analyses.push(workflow(&args, p)?);
            kinds.push(Kind::Workflow);
            continue;
        }
        let (a, cases, named) = test_file(p);
        analyses.push(a);
        kinds.push(Kind::Test { cases });
        if let Some(w) = named
            && !seen.contains(&same_file(&w))
        {
            seen.push(same_file(&w));
            analyses.push(workflow(&args, &w)?);
            kinds.push(Kind::Workflow);
        }
    }
    refuse_webhook_clashes(&mut analyses);
    let errors: usize = analyses.iter().map(Analysis::errors).sum();
    let code = if errors > 0 { EXIT_INVALID } else { 0 };
    print_report(&analyses, &kinds, args.format).map_or_else(|e| quiet_pipe(e, code), |()| Ok(code))
}

/// A workflow read by its front end, with the policy beside it checked.
fn workflow(args: &Args, p: &Path) -> anyhow::Result<Analysis> {
    let cfg = config_for(args.config.as_deref(), p)?;
    let mut a = frontend::analyze(
        p,
        Options {
            packages: None,
            config: cfg.as_ref(),
            dialect: args.dialect.map(Into::into),
            read: args.read.options(),
        },
    );
    frontend::check_policy(&mut a, None);
    Ok(a)
}

/// A test file's diagnostics as an analysis (reported like a workflow's),
/// its number of cases when valid, and the workflow it names when known.
fn test_file(p: &Path) -> (Analysis, Option<usize>, Option<PathBuf>) {
    let analysis = |path, sources, diagnostics, omitted_errors| Analysis {
        path,
        sources,
        diagnostics,
        omitted_errors,
        omitted_warnings: 0,
        dialect: None,
        plan: None,
    };
    match testing::load(p) {
        Ok(t) => (
            analysis(t.path, diag::SourceMap::default(), Vec::new(), 0),
            Some(t.cases.len()),
            Some(t.workflow),
        ),
        Err(e) => (
            analysis(e.path, e.sources, e.diagnostics, e.omitted),
            None,
            e.workflow,
        ),
    }
}

/// The path to compare two names of one file by.
fn same_file(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned())
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

fn print_report(analyses: &[Analysis], kinds: &[Kind], format: ReportFormat) -> anyhow::Result<()> {
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
            for (a, kind) in analyses.iter().zip(kinds) {
                print_diagnostics(&mut out, a, style)?;
                let status = match kind {
                    Kind::Test { cases: Some(n) } => {
                        format!("ok — test file: {}", plural(*n, "case"))
                    }
                    Kind::Test { cases: None } | Kind::Workflow => status_line(a),
                };
                writeln!(out, "{}: {status}", a.path.display())?;
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
