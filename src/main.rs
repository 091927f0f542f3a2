//! The `agentfile` command line: a thin adapter from flags to the library.
//!
//! Human-readable progress goes to stderr; results go to stdout. Exit codes
//! (CONTRACT §3): 0 success, 1 run failed, 2 usage or validation error.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use agentfile::config::Config;
use agentfile::detect::Dialect;
use agentfile::diag::{self, Style};
use agentfile::frontend::{self, Analysis, Options};
use agentfile::protocol::diagnostics::ValidateReport;
use agentfile::{discover, inspect};

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
}

#[derive(Subcommand)]
enum Command {
    /// Check workflow files and report every problem (exit 0 valid, 2 not).
    Validate {
        /// Workflow files (or folders holding an Agentfile).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Config file for REQUIRES profiles (default: ./agent.json, ./agent.toml,
        /// then agent.json / agent.toml beside each workflow).
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
        /// Which Agentfile dialect to read, instead of guessing.
        #[arg(long, value_enum)]
        dialect: Option<DialectArg>,
    },
    /// Show a workflow's inputs, agents, goals and steps.
    Inspect {
        path: PathBuf,
        #[arg(long, value_enum, default_value_t = InspectFormat::Text)]
        format: InspectFormat,
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long, value_enum)]
        dialect: Option<DialectArg>,
    },
    /// Find workflows under a folder and show their names, paths and inputs.
    List {
        /// Folder to search (default: the current folder).
        dir: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum ReportFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum InspectFormat {
    Text,
    Json,
    Mermaid,
}

#[derive(Clone, Copy, ValueEnum)]
enum DialectArg {
    Agentfile,
    Agentrc,
}

impl From<DialectArg> for Dialect {
    fn from(d: DialectArg) -> Dialect {
        match d {
            DialectArg::Agentfile => Dialect::Agentfile,
            DialectArg::Agentrc => Dialect::Agentrc,
        }
    }
}

/// Exit code for usage and validation errors.
const EXIT_INVALID: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate {
            paths,
            config,
            format,
            dialect,
        } => validate(&paths, config.as_deref(), format, dialect.map(Into::into)),
        Command::Inspect {
            path,
            format,
            config,
            dialect,
        } => inspect_cmd(&path, config.as_deref(), format, dialect.map(Into::into)),
        Command::List { dir, format } => list(dir.as_deref().unwrap_or(Path::new(".")), format),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("agentfile: error: {e:#}");
            ExitCode::from(EXIT_INVALID)
        }
    }
}

/// The config for a workflow: `--config`, else ./agent.{json,toml}, else one
/// beside the workflow file.
fn config_for(explicit: Option<&Path>, workflow: &Path) -> anyhow::Result<Option<Config>> {
    if let Some(p) = explicit {
        return Ok(Some(Config::discover(Some(p), Path::new("."))?.config));
    }
    let cwd = Config::discover(None, Path::new("."))?;
    if cwd.source.is_some() {
        return Ok(Some(cwd.config));
    }
    let dir = match workflow.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => return Ok(None),
    };
    let dir = if workflow.is_dir() { workflow } else { dir };
    let beside = Config::discover(None, dir)?;
    Ok(beside.source.map(|_| beside.config))
}

fn color_for_stdout() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

fn print_diagnostics(out: &mut impl Write, a: &Analysis, style: Style) -> std::io::Result<()> {
    for d in &a.diagnostics {
        out.write_all(diag::render(&a.sources, d, style).as_bytes())?;
    }
    Ok(())
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

fn validate(
    paths: &[PathBuf],
    config: Option<&Path>,
    format: ReportFormat,
    dialect: Option<Dialect>,
) -> anyhow::Result<u8> {
    let mut analyses = Vec::with_capacity(paths.len());
    for p in paths {
        let cfg = config_for(config, p)?;
        analyses.push(frontend::analyze(
            p,
            Options {
                config: cfg.as_ref(),
                dialect,
            },
        ));
    }
    let errors: usize = analyses.iter().map(Analysis::errors).sum();
    let mut out = std::io::stdout().lock();
    match format {
        ReportFormat::Json => {
            let report = ValidateReport::new(&analyses);
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
        }
        ReportFormat::Text => {
            let style = Style {
                color: color_for_stdout(),
            };
            for a in &analyses {
                print_diagnostics(&mut out, a, style)?;
                let status = match &a.plan {
                    Some(p) => format!(
                        "ok — workflow `{}`: {}, {}, {}, {}",
                        p.name,
                        plural(p.inputs.len(), "input"),
                        plural(p.agents.len(), "agent"),
                        plural(p.goals.len(), "goal"),
                        plural(p.steps.len(), "step"),
                    ),
                    None => format!("invalid — {}", plural(a.errors(), "error")),
                };
                let warnings = match a.warnings() {
                    0 => String::new(),
                    n => format!(" ({})", plural(n, "warning")),
                };
                writeln!(out, "{}: {status}{warnings}", a.path.display())?;
            }
        }
    }
    Ok(if errors > 0 { EXIT_INVALID } else { 0 })
}

fn inspect_cmd(
    path: &Path,
    config: Option<&Path>,
    format: InspectFormat,
    dialect: Option<Dialect>,
) -> anyhow::Result<u8> {
    let cfg = config_for(config, path)?;
    let a = frontend::analyze(
        path,
        Options {
            config: cfg.as_ref(),
            dialect,
        },
    );
    let Some(plan) = &a.plan else {
        // Nothing to show: explain why on stderr, like a compiler would.
        let style = Style {
            color: std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        };
        print_diagnostics(&mut std::io::stderr().lock(), &a, style)?;
        eprintln!(
            "{}: invalid — {}; fix them to inspect it",
            a.path.display(),
            plural(a.errors(), "error")
        );
        return Ok(EXIT_INVALID);
    };
    let rendered = match format {
        InspectFormat::Text => inspect::text(plan),
        InspectFormat::Json => inspect::json(plan),
        InspectFormat::Mermaid => inspect::mermaid(plan),
    };
    std::io::stdout().lock().write_all(rendered.as_bytes())?;
    Ok(0)
}

fn list(dir: &Path, format: ReportFormat) -> anyhow::Result<u8> {
    if !dir.is_dir() {
        anyhow::bail!("{}: not a folder", dir.display());
    }
    let cfg = Config::discover(None, Path::new("."))?;
    let found = discover::list(dir, cfg.source.is_some().then_some(&cfg.config));
    let mut out = std::io::stdout().lock();
    match format {
        ReportFormat::Json => {
            serde_json::to_writer_pretty(&mut out, &found)?;
            writeln!(out)?;
        }
        ReportFormat::Text => out.write_all(discover::text(&found).as_bytes())?,
    }
    Ok(0)
}
